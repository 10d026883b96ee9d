/* The option parser of `qmm run` / `qmm chat` and the model + tokenizer setup they share. */
#include "run_opts.h"

#include <limits.h>
#include <string.h>

#include "cli.h"
#include "llm/llm_io.h"

int run_parse(const char *cmd, int argc, char **argv, run_opts *o, void (*usage)(FILE *))
{
    static const char *const decodes[] = {"fused", "persistent", NULL}; /* index = persistent */
    memset(o, 0, sizeof *o);
    o->device = "auto";
    o->max_new = 16;
    o->seed = 1;
    o->split_k = o->graph = o->resident = o->fuse = o->pdl = 1;
    o->buffers = 2;
    o->think = 1;
    o->chat_template = -1;
    int chat = !strcmp(cmd, "chat");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int ok = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return EXIT_OK;
        }
        if (!chat && !strcmp(a, "--offload-weights")) { o->offload = 1; continue; }
        if (!strcmp(a, "--json")) { o->json = 1; continue; }
        if (strncmp(a, "--", 2) || !(
            !strcmp(a, "--model") || !strcmp(a, "--tokenizer") || !strcmp(a, "--device") ||
            !strcmp(a, "--seed") || !strcmp(a, "--threads") || !strcmp(a, "--max-seq") ||
            !strcmp(a, "--max-new-tokens") || !strcmp(a, "--temperature") ||
            !strcmp(a, "--top-k") || !strcmp(a, "--top-p") || !strcmp(a, "--min-p") ||
            !strcmp(a, "--think") || !strcmp(a, "--system") || !strcmp(a, "--split-k") ||
            !strcmp(a, "--graph") || !strcmp(a, "--fuse") || !strcmp(a, "--pdl") ||
            !strcmp(a, "--decode") ||
            (!chat && (!strcmp(a, "--prompt") || !strcmp(a, "--prompt-ids") ||
                       !strcmp(a, "--prompt-len") || !strcmp(a, "--buffers") ||
                       !strcmp(a, "--resident") || !strcmp(a, "--chat-template")))))
            return cli_unknown(cmd, a); /* unknown, even when it is the last argument */
        if (!(v = cli_value(cmd, argc, argv, &i))) return EXIT_USAGE;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--tokenizer")) o->tokenizer = v;
        else if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "--prompt-ids")) o->ids_arg = v;
        else if (!strcmp(a, "--system")) o->system = v;
        else if (!strcmp(a, "--prompt-len")) ok = cli_int(cmd, a, v, 1, INT32_MAX, &o->prompt_len);
        else if (!strcmp(a, "--max-new-tokens"))
            ok = o->have_max_new = cli_int(cmd, a, v, 1, INT32_MAX, &o->max_new);
        else if (!strcmp(a, "--max-seq")) ok = cli_int(cmd, a, v, 1, INT32_MAX, &o->max_seq);
        else if (!strcmp(a, "--seed")) ok = o->have_seed = cli_int(cmd, a, v, 0, LLONG_MAX, &o->seed);
        else if (!strcmp(a, "--threads")) ok = cli_int(cmd, a, v, 0, 4096, &o->threads);
        else if (!strcmp(a, "--buffers")) ok = cli_int(cmd, a, v, 1, 1024, &o->buffers);
        else if (!strcmp(a, "--top-k")) ok = o->have_top_k = cli_int(cmd, a, v, 0, INT32_MAX, &o->top_k);
        else if (!strcmp(a, "--temperature"))
            ok = o->have_temperature = cli_double(cmd, a, v, 0, 1e4, &o->temperature);
        else if (!strcmp(a, "--top-p")) ok = o->have_top_p = cli_double(cmd, a, v, 1e-9, 1, &o->top_p);
        else if (!strcmp(a, "--min-p")) ok = o->have_min_p = cli_double(cmd, a, v, 0, 1, &o->min_p);
        else if (!strcmp(a, "--resident")) ok = cli_on_off(cmd, a, v, &o->resident);
        else if (!strcmp(a, "--split-k")) ok = cli_on_off(cmd, a, v, &o->split_k);
        else if (!strcmp(a, "--graph")) ok = cli_on_off(cmd, a, v, &o->graph);
        else if (!strcmp(a, "--fuse")) ok = cli_on_off(cmd, a, v, &o->fuse);
        else if (!strcmp(a, "--pdl")) ok = cli_on_off(cmd, a, v, &o->pdl);
        else if (!strcmp(a, "--decode")) ok = cli_choice(cmd, a, v, decodes, &o->persistent);
        else if (!strcmp(a, "--think")) ok = cli_on_off(cmd, a, v, &o->think);
        else if (!strcmp(a, "--chat-template")) ok = cli_on_off(cmd, a, v, &o->chat_template);
        if (!ok) return EXIT_USAGE;
    }
    if (!o->model) {
        fprintf(stderr, "qmm %s: --model is required\n", cmd);
        return EXIT_USAGE;
    }
    if (!chat && !!o->prompt + !!o->ids_arg + (o->prompt_len > 0) != 1) {
        fprintf(stderr, "qmm run: give exactly one of --prompt TEXT, --prompt-ids LIST, "
                "--prompt-len N\n");
        return EXIT_USAGE;
    }
    if (o->offload && (o->prompt || chat)) {
        fprintf(stderr, "qmm %s: --offload-weights runs with token ids (--prompt-ids or "
                "--prompt-len)\n", cmd);
        return EXIT_USAGE;
    }
    if (o->offload && o->persistent) { /* the session would refuse it after the resident run */
        fprintf(stderr, "qmm run: --decode persistent needs resident weights: not with "
                "--offload-weights\n");
        return EXIT_USAGE;
    }
    if (o->json && o->offload) {
        fprintf(stderr, "qmm run: --json is not available with --offload-weights\n");
        return EXIT_USAGE;
    }
    if (o->offload && !strcmp(o->device, "cpu")) {
        fprintf(stderr, "qmm run: --offload-weights streams weights to a GPU: not with --device "
                "cpu\n");
        return EXIT_USAGE;
    }
    return run_use_cuda(cmd, o) < 0 ? EXIT_USAGE : -1;
}

int run_use_cuda(const char *cmd, const run_opts *o)
{
    static const char *const devices[] = {"cpu", "cuda", "auto", NULL};
    int d;
    if (!cli_choice(cmd, "--device", o->device, devices, &d)) return -1;
    if (d < 2) return d;
    int count = 0;
    qmm_cuda_device_count(&count, NULL, 0);
    return count > 0 || o->offload; /* offload: the CUDA session says why it cannot */
}

int text_open(const char *cmd, const run_opts *o, text_setup *s)
{
    memset(s, 0, sizeof *s);
    s->use_cuda = run_use_cuda(cmd, o);
    /* the tokenizer first: it is quick and its absence should not cost a model load */
    const char *tp = o->tokenizer;
    char dir[LLM_PATH_MAX];
    if (!tp) {
        if (!strncmp(o->model, "synthetic:", 10) || !llm_is_dir(o->model)) {
            if (!strncmp(o->model, "synthetic:", 10) || llm_dirname(o->model, dir, sizeof dir)) {
                fprintf(stderr, "qmm %s: %s has no tokenizer: give --tokenizer DIR (a model "
                        "directory with tokenizer.json)\n", cmd, o->model);
                return EXIT_USAGE;
            }
            tp = dir;
        } else {
            tp = o->model;
        }
    }
    qmm_status st = qmm_tokenizer_load(tp, &s->tok);
    if (st) {
        fprintf(stderr, "qmm %s: tokenizer: %s (%s)\n", cmd, qmm_last_error(), qmm_status_name(st));
        return EXIT_USAGE;
    }
    char gdir[LLM_PATH_MAX];
    if (llm_is_dir(tp)) snprintf(gdir, sizeof gdir, "%s", tp);
    else llm_dirname(tp, gdir, sizeof gdir);
    if ((st = qmm_generation_config_load(gdir, &s->gc))) {
        fprintf(stderr, "qmm %s: %s (%s)\n", cmd, qmm_last_error(), qmm_status_name(st));
        text_close(s);
        return EXIT_USAGE;
    }
    qmm_sampling *sm = &s->gc.sampling;
    if (o->have_temperature) sm->temperature = o->temperature;
    if (o->have_top_k) sm->top_k = o->top_k;
    if (o->have_top_p) sm->top_p = o->top_p;
    if (o->have_min_p) sm->min_p = o->min_p;
    st = qmm_llm_model_open(o->model, (uint64_t)o->seed, &s->model);
    if (st) {
        fprintf(stderr, "qmm %s: %s: %s (%s)\n", cmd, o->model, qmm_last_error(),
                qmm_status_name(st));
        text_close(s);
        return st == QMM_ERR_NOMEM ? EXIT_CHECK : EXIT_USAGE;
    }
    int64_t nv = qmm_llm_model_config(s->model)->vocab_size;
    if (qmm_tokenizer_vocab_size(s->tok) > nv) {
        fprintf(stderr, "qmm %s: the tokenizer has %lld ids but the model's vocabulary %lld\n",
                cmd, (long long)qmm_tokenizer_vocab_size(s->tok), (long long)nv);
        text_close(s);
        return EXIT_USAGE;
    }
    return -1;
}

void text_close(text_setup *s)
{
    qmm_llm_model_destroy(s->model);
    qmm_tokenizer_destroy(s->tok);
    memset(s, 0, sizeof *s);
}
