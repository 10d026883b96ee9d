/* qmm run --prompt TEXT: encode (through the chat template when the tokenizer has one), stream
 * the generated text to stdout, stop at EOS, and print a summary line on stderr (or one JSON
 * object on stdout with --json). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gen.h"
#include "run_opts.h"

static void print_json(const text_setup *s, const gen_result *r, const char *text, size_t len)
{
    printf("{\"prompt_tokens\": %lld, \"generated_tokens\": %lld, \"stop\": \"%s\", \"ids\": [",
           (long long)r->prompt_tokens, (long long)r->new_tokens,
           r->stopped_at_eos ? "eos" : "length");
    for (int64_t i = 0; i < r->new_tokens; i++) printf("%s%d", i ? ", " : "", r->ids[i]);
    printf("], \"text\": ");
    cli_json_string(stdout, text, len);
    printf(", \"first_token_ms\": %.3f, \"prefill_ms\": %.3f, \"prompt_tok_s\": %.2f, "
           "\"decode_ms\": %.3f, \"decode_tok_s\": %.2f, \"device\": \"%s\"}\n",
           r->first_token_ms, r->prefill_ms,
           r->prefill_ms > 0 ? r->prompt_tokens / (r->prefill_ms * 1e-3) : 0.0, r->decode_ms,
           r->new_tokens > 1 && r->decode_ms > 0 ? (r->new_tokens - 1) / (r->decode_ms * 1e-3)
                                                 : 0.0,
           s->use_cuda ? "cuda" : "cpu");
}

int run_text(const run_opts *o)
{
    text_setup s;
    int rc = text_open("run", o, &s);
    if (rc >= 0) return rc;
    /* through the chat template unless it is off or missing (as mlx_lm.generate does) */
    char *text = NULL;
    size_t len = 0;
    qmm_chat_message msgs[2] = {{"system", o->system ? o->system : ""}, {"user", o->prompt}};
    int nm = o->system ? 2 : 1;
    qmm_status st = QMM_OK;
    if (o->chat_template != 0) {
        st = qmm_chat_render(s.tok, msgs + 2 - nm, nm, 1, o->think, &text, &len);
        if (st == QMM_ERR_UNSUPPORTED && o->chat_template < 0) st = QMM_OK; /* plain text */
    }
    if (!st && !text) {
        len = strlen(o->prompt);
        text = malloc(len + 1);
        if (text) memcpy(text, o->prompt, len + 1);
        else st = QMM_ERR_NOMEM;
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    if (!st) st = qmm_tokenizer_encode(s.tok, text, len, &ids, &n);
    free(text);
    if (!st && n < 1) {
        fprintf(stderr, "qmm run: the prompt is empty\n");
        text_close(&s);
        return EXIT_USAGE;
    }
    int64_t max_new = o->have_max_new ? o->max_new : 256;
    int64_t max_seq = o->max_seq > 0 ? o->max_seq : n + max_new - 1;
    qmm_llm_cuda_options co = qmm_llm_cuda_options_default();
    co.split_k = o->split_k;
    co.use_graph = o->graph;
    co.fuse_projections = o->fuse;
    co.pdl = o->pdl;
    co.persistent_decode = o->persistent;
    gen_engine e;
    qmm_sampler *sp = NULL;
    gen_result r;
    memset(&r, 0, sizeof r);
    memset(&e, 0, sizeof e);
    if (!st) st = qmm_sampler_create(qmm_llm_model_config(s.model)->vocab_size, &s.gc.sampling,
                                     (uint64_t)o->seed, &sp);
    if (!st) st = gen_open(&e, s.model, s.use_cuda, max_seq, (int)o->threads, &co);
    if (!st) st = gen_run(&e, ids, n, max_new, sp, &s.gc, s.tok, o->json ? NULL : stdout, &r);
    if (!st && !o->json) {
        printf("\n");
        gen_summary(stderr, &r);
    }
    if (!st && o->json) {
        char *out = NULL;
        size_t olen = 0;
        int64_t keep = r.new_tokens - r.stopped_at_eos; /* the EOS token is not text */
        st = qmm_tokenizer_decode(s.tok, r.ids, keep, &out, &olen);
        if (!st) print_json(&s, &r, out, olen);
        free(out);
    }
    if (st) fprintf(stderr, "qmm run: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
    free(r.ids);
    free(ids);
    gen_close(&e);
    qmm_sampler_destroy(sp);
    text_close(&s);
    return st ? EXIT_USAGE : EXIT_OK;
}
