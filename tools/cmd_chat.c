/* qmm chat: a multi-turn conversation on stdin/stdout. Each input line is a user turn; the
 * reply streams out. The KV cache is kept across turns: a turn feeds only its new tokens (the
 * previous reply's last token, <|im_end|>, and the new user message in the Qwen3 template), so
 * earlier replies stay in the cache as generated, thinking included (the Jinja template would
 * drop earlier reasoning when re-rendering: that costs a full prefill each turn). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "gen.h"
#include "run_opts.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm chat --model DIR|FILE|synthetic:PRESET [--tokenizer DIR] [--system TEXT]\n"
            "                [--think on|off] [--max-new-tokens N] [--max-seq N] [--device D]\n"
            "                [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--seed S]\n"
            "                [--threads T] [--json] [--decode fused|persistent]\n"
            "  Reads one user message per line from stdin (a terminal or a pipe) and streams each\n"
            "  reply to stdout, followed by an empty line; a summary per turn goes to stderr.\n"
            "  The KV cache is kept between turns (each turn feeds only its new tokens).\n"
            "  --think off: the template's empty <think></think> block, no reasoning\n"
            "  --json: one JSON object per turn (fed and generated ids, text) instead of text\n"
            "  --decode: fused (default) or persistent decode steps, as in qmm run (CUDA)\n"
            "  defaults: --max-new-tokens 512, --max-seq min(max_position_embeddings, 8192);\n"
            "  sampling from generation_config.json as in qmm run\n"
            "  exit: 0 at the end of input, 2 usage or environment (including a full context)\n");
}

/* Append ids[n] to *v[*len] (growing *cap). */
static int append(int32_t **v, int64_t *len, int64_t *cap, const int32_t *ids, int64_t n)
{
    if (n == 0) return 0;
    if (*len + n > *cap) {
        int64_t c = (*len + n) * 2;
        int32_t *p = realloc(*v, (size_t)c * sizeof *p);
        if (!p) return -1;
        *v = p;
        *cap = c;
    }
    memcpy(*v + *len, ids, (size_t)n * sizeof *ids);
    *len += n;
    return 0;
}

/* The tokens of one turn: [pending reply tail] + template(user message) with the generation
 * prompt; the first turn carries the system message. */
static qmm_status turn_tokens(const text_setup *s, const run_opts *o, const char *line, int first,
                              const int32_t *pend, int64_t npend, int32_t **ids, int64_t *n)
{
    qmm_chat_message m[2] = {{"system", o->system ? o->system : ""}, {"user", line}};
    int with_sys = first && o->system;
    char *text = NULL, *t2;
    size_t len = 0;
    qmm_status st = qmm_chat_render(s->tok, m + !with_sys, 1 + with_sys, 1, o->think, &text, &len);
    if (!st && !first) { /* the previous turn's <|im_end|> is followed by a newline */
        t2 = malloc(len + 2);
        if (!t2) st = QMM_ERR_NOMEM;
        else {
            t2[0] = '\n';
            memcpy(t2 + 1, text, len + 1);
            free(text);
            text = t2;
            len++;
        }
    }
    int32_t *body = NULL;
    int64_t nb = 0;
    if (!st) st = qmm_tokenizer_encode(s->tok, text, len, &body, &nb);
    free(text);
    int32_t *all = NULL;
    int64_t na = 0, cap = 0;
    if (!st && (append(&all, &na, &cap, pend, npend) || append(&all, &na, &cap, body, nb)))
        st = QMM_ERR_NOMEM;
    free(body);
    if (st) {
        free(all);
        return st;
    }
    *ids = all;
    *n = na;
    return QMM_OK;
}

static void print_turn_json(const text_setup *s, const int32_t *fed, int64_t nfed,
                            const gen_result *r, int64_t position)
{
    char *text = NULL;
    size_t len = 0;
    qmm_tokenizer_decode(s->tok, r->ids, r->new_tokens - r->stopped_at_eos, &text, &len);
    printf("{\"fed_ids\": [");
    for (int64_t i = 0; i < nfed; i++) printf("%s%d", i ? ", " : "", fed[i]);
    printf("], \"generated_ids\": [");
    for (int64_t i = 0; i < r->new_tokens; i++) printf("%s%d", i ? ", " : "", r->ids[i]);
    printf("], \"stop\": \"%s\", \"position\": %lld, \"text\": ",
           r->stopped_at_eos ? "eos" : "length", (long long)position);
    cli_json_string(stdout, text ? text : "", len);
    printf("}\n");
    fflush(stdout);
    free(text);
}

int cmd_chat(int argc, char **argv)
{
    run_opts o;
    int rc = run_parse("chat", argc, argv, &o, usage);
    if (rc >= 0) return rc;
    text_setup s;
    if ((rc = text_open("chat", &o, &s)) >= 0) return rc;
    int32_t im_end;
    char *probe = NULL;
    size_t probe_len = 0;
    qmm_status tst = qmm_chat_render(s.tok, NULL, 0, 0, 1, &probe, &probe_len);
    free(probe);
    if (tst || qmm_tokenizer_token_id(s.tok, "<|im_end|>", &im_end)) {
        fprintf(stderr, "qmm chat: the tokenizer has no Qwen3 chat template or no <|im_end|>\n");
        text_close(&s);
        return EXIT_USAGE;
    }
    const qmm_llm_config *c = qmm_llm_model_config(s.model);
    int64_t max_seq = o.max_seq > 0 ? o.max_seq
                      : c->max_position_embeddings < 8192 ? c->max_position_embeddings : 8192;
    int64_t max_new = o.have_max_new ? o.max_new : 512;
    qmm_llm_cuda_options co = qmm_llm_cuda_options_default();
    co.split_k = o.split_k;
    co.use_graph = o.graph;
    co.fuse_projections = o.fuse;
    co.pdl = o.pdl;
    co.persistent_decode = o.persistent;
    gen_engine e;
    qmm_sampler *sp = NULL;
    qmm_status st = qmm_sampler_create(c->vocab_size, &s.gc.sampling, (uint64_t)o.seed, &sp);
    if (!st) st = gen_open(&e, s.model, s.use_cuda, max_seq, (int)o.threads, &co);
    if (st) {
        fprintf(stderr, "qmm chat: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
        qmm_sampler_destroy(sp);
        text_close(&s);
        return EXIT_USAGE;
    }
    int tty = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t cap = 0;
    int32_t pend[2];
    int64_t npend = 0;
    rc = EXIT_OK;
    for (int turn = 0;; turn++) {
        if (tty) fprintf(stderr, "> ");
        ssize_t got = getline(&line, &cap, stdin);
        if (got < 0) break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        int32_t *ids = NULL;
        int64_t n = 0;
        st = turn_tokens(&s, &o, line, turn == 0, pend, npend, &ids, &n);
        int64_t room = max_seq - gen_position(&e) - n + 1;
        if (!st && room < 1) {
            fprintf(stderr, "qmm chat: the conversation fills the context (%lld positions): "
                    "start again with a larger --max-seq\n", (long long)max_seq);
            free(ids);
            rc = EXIT_USAGE;
            break;
        }
        gen_result r;
        memset(&r, 0, sizeof r);
        int64_t before = gen_position(&e);
        if (!st) st = gen_run(&e, ids, n, max_new < room ? max_new : room, sp, &s.gc, s.tok,
                              o.json ? NULL : stdout, &r);
        if (!st) {
            /* the reply's last token was sampled, not fed: it opens the next turn, followed by
             * <|im_end|> unless it is the end already */
            npend = 0;
            if (r.new_tokens) pend[npend++] = r.ids[r.new_tokens - 1];
            if (!r.stopped_at_eos || r.eos_id != im_end) pend[npend++] = im_end;
            if (o.json) print_turn_json(&s, ids, n, &r, gen_position(&e));
            else {
                printf("\n\n");
                fflush(stdout);
            }
            fprintf(stderr, "turn %d: fed %lld tokens (cache %lld -> %lld positions); ", turn + 1,
                    (long long)n, (long long)before, (long long)gen_position(&e));
            gen_summary(stderr, &r);
        }
        free(ids);
        free(r.ids);
        if (st) {
            fprintf(stderr, "qmm chat: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
            rc = EXIT_USAGE;
            break;
        }
    }
    free(line);
    gen_close(&e);
    qmm_sampler_destroy(sp);
    text_close(&s);
    return rc;
}
