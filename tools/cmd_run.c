/* qmm run: greedy generation with a Qwen3 model (checkpoint or synthetic preset), token ids in and
 * out, with prefill and decode timings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "qmm.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm run --model DIR|FILE|PRESET (--prompt-ids 1,2,3 | --prompt-len N)\n"
            "               [--max-new-tokens N] [--device cpu|cuda|auto] [--seed S]\n"
            "               [--split-k on|off] [--graph on|off] [--fuse on|off] [--threads T]\n"
            "               [--max-seq N]\n"
            "  PRESET: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b (synthetic weights from --seed)\n"
            "  --prompt-len N: N random token ids from --seed instead of --prompt-ids\n"
            "  --split-k off: the unsplit tiled kernel for every prefill projection (CUDA)\n"
            "  --fuse on: q|k|v and gate|up as one stacked weight each (CUDA; 4 matmuls a layer)\n"
            "  --max-seq: KV cache positions (default prompt + new tokens)\n");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* "1,2,3" -> ids (malloc'd); -1 on a malformed list. */
static int64_t parse_ids(const char *s, int32_t **out)
{
    int64_t cap = 16, n = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    const char *p = s;
    while (ids && *p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX || (*end && *end != ',')) {
            free(ids);
            return -1;
        }
        if (n == cap) {
            cap *= 2;
            int32_t *grown = realloc(ids, (size_t)cap * sizeof *ids);
            if (!grown) break;
            ids = grown;
        }
        ids[n++] = (int32_t)v;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p) {
            free(ids);
            return -1;
        }
    }
    *out = ids;
    return ids ? n : -1;
}

static int on_off(const char *v, int *out)
{
    if (!strcmp(v, "on")) *out = 1;
    else if (!strcmp(v, "off")) *out = 0;
    else return 0;
    return 1;
}

int cmd_run(int argc, char **argv)
{
    const char *model = NULL, *ids_arg = NULL, *device = "auto";
    long long prompt_len = 0, max_new = 16, max_seq = 0, seed = 1;
    int split_k = 1, graph = 1, fuse = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "qmm run: %s needs a value\n", a);
            return 2;
        }
        i++;
        char *end = NULL;
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--prompt-ids")) ids_arg = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--prompt-len")) prompt_len = strtoll(v, &end, 10);
        else if (!strcmp(a, "--max-new-tokens")) max_new = strtoll(v, &end, 10);
        else if (!strcmp(a, "--max-seq")) max_seq = strtoll(v, &end, 10);
        else if (!strcmp(a, "--seed")) seed = strtoll(v, &end, 10);
        else if (!strcmp(a, "--threads")) threads = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--split-k")) {
            if (!on_off(v, &split_k)) end = (char *)v;
        } else if (!strcmp(a, "--graph")) {
            if (!on_off(v, &graph)) end = (char *)v;
        } else if (!strcmp(a, "--fuse")) {
            if (!on_off(v, &fuse)) end = (char *)v;
        } else {
            fprintf(stderr, "qmm run: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (end && *end) {
            fprintf(stderr, "qmm run: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!model || (!ids_arg && prompt_len <= 0) || max_new < 1) {
        usage(stderr);
        return 2;
    }
    int use_cuda;
    if (!strcmp(device, "cpu")) use_cuda = 0;
    else if (!strcmp(device, "cuda")) use_cuda = 1;
    else if (!strcmp(device, "auto")) {
        int count = 0;
        qmm_cuda_device_count(&count, NULL, 0);
        use_cuda = count > 0;
    } else {
        fprintf(stderr, "qmm run: --device must be cpu, cuda or auto\n");
        return 2;
    }

    int32_t *ids = NULL;
    int64_t n;
    if (ids_arg) {
        n = parse_ids(ids_arg, &ids);
        if (n < 1) {
            fprintf(stderr, "qmm run: --prompt-ids must be a comma-separated list of integers\n");
            return 2;
        }
    } else {
        n = prompt_len;
        ids = malloc((size_t)n * sizeof *ids);
        if (!ids) return 1;
    }

    double t0 = now_ms();
    qmm_llm_model *m = NULL;
    qmm_status st = qmm_llm_model_open(model, (uint64_t)seed, &m);
    if (st) {
        fprintf(stderr, "qmm run: %s: %s (%s)\n", model, qmm_last_error(), qmm_status_name(st));
        free(ids);
        return 1;
    }
    const qmm_llm_config *c = qmm_llm_model_config(m);
    if (!ids_arg) {
        uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
        for (int64_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int32_t)((s >> 33) % (uint64_t)c->vocab_size);
        }
    }
    if (max_seq <= 0) max_seq = n + max_new - 1;
    double wb = (double)qmm_llm_model_weight_bytes(m);
    printf("model %s: %lld layers, hidden %lld, heads %lld/%lld, vocab %lld, %s, %.2f %s of "
           "weights (%s, %.0f ms)\n", model, (long long)c->num_layers, (long long)c->hidden_size,
           (long long)c->num_heads, (long long)c->num_kv_heads, (long long)c->vocab_size,
           c->tie_word_embeddings ? "tied head" : "separate head", wb >= 1e9 ? wb / 1e9 : wb / 1e6,
           wb >= 1e9 ? "GB" : "MB",
           strchr(model, '/') || !strncmp(model, ".", 1) ? "checkpoint" : "synthetic",
           now_ms() - t0);

    int32_t *out = malloc((size_t)max_new * sizeof *out);
    qmm_llm_timing t;
    memset(&t, 0, sizeof t);
    if (use_cuda) {
        qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
        o.split_k = split_k;
        o.use_graph = graph;
        o.fuse_projections = fuse;
        qmm_llm_cuda_session *s = NULL;
        double t1 = now_ms();
        st = qmm_llm_cuda_session_create(m, max_seq, &o, &s);
        if (!st) {
            printf("device cuda: session of %lld positions ready in %.0f ms (split-K %s, graph %s, "
                   "fused projections %s)\n", max_seq, now_ms() - t1, split_k ? "on" : "off",
                   graph ? "on" : "off", fuse ? "on" : "off");
            st = qmm_llm_cuda_generate(s, ids, n, max_new, out, &t);
        }
        qmm_llm_cuda_session_destroy(s);
    } else {
        qmm_llm_cpu_session *s = NULL;
        st = qmm_llm_cpu_session_create(m, max_seq, threads, &s);
        if (!st) {
            printf("device cpu\n");
            st = qmm_llm_cpu_generate(s, ids, n, max_new, out, &t);
        }
        qmm_llm_cpu_session_destroy(s);
    }
    int rc = 0;
    if (st) {
        fprintf(stderr, "qmm run: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
        rc = 1;
    } else {
        printf("prompt (%lld):", (long long)n);
        for (int64_t i = 0; i < n && i < 64; i++) printf(" %d", ids[i]);
        printf("%s\ngenerated (%lld):", n > 64 ? " ..." : "", max_new);
        for (int64_t i = 0; i < max_new; i++) printf(" %d", out[i]);
        printf("\nprefill: %.3f ms, %.1f tok/s\n", t.prefill_ms, qmm_llm_prefill_tok_s(&t));
        if (max_new > 1)
            printf("decode: %lld steps in %.3f ms, %.1f tok/s\n", max_new - 1, t.decode_ms,
                   qmm_llm_decode_tok_s(&t));
    }
    free(out);
    free(ids);
    qmm_llm_model_destroy(m);
    return rc;
}
