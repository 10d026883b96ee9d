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
            "               [--split-k on|off] [--graph on|off] [--fuse on|off] [--pdl on|off]\n"
            "               [--threads T]\n"
            "               [--max-seq N] [--offload-weights [--buffers B] [--resident on|off]]\n"
            "  PRESET: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b (synthetic weights from --seed)\n"
            "  --prompt-len N: N random token ids from --seed instead of --prompt-ids\n"
            "  --split-k off: the unsplit tiled kernel for every prefill projection (CUDA)\n"
            "  --fuse on (default): q|k|v and gate|up as one stacked weight each (CUDA; 4 matmuls\n"
            "      a layer); off: 7 separate projections\n"
            "  --pdl on (default): the engine's kernels with programmatic dependent launch (CUDA)\n"
            "  --max-seq: KV cache positions (default prompt + new tokens)\n"
            "  --offload-weights: stream the layers' weights from pinned host memory into B\n"
            "      device slots (default 2) while earlier layers compute (CUDA)\n"
            "  --resident on (default with offload): first run the resident session: its tokens\n"
            "      must match, its profile gives the per-layer compute time of the prediction\n");
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

/* One CUDA session: create, generate (and profile when pp is given), destroy. */
/* warm: one untimed generation first, so the timed one excludes first-use costs (lazy module
 * loading, graph capture, cuBLAS setup) — the resident and streamed runs compare like with like. */
static qmm_status cuda_generate(const qmm_llm_model *m, long long max_seq,
                                const qmm_llm_cuda_options *o, const int32_t *ids, int64_t n,
                                int64_t max_new, int32_t *out, qmm_llm_timing *t,
                                qmm_llm_offload_stats *stats, qmm_llm_profile *pp,
                                qmm_llm_profile *pd, int warm)
{
    qmm_llm_cuda_session *s = NULL;
    double t1 = now_ms();
    qmm_status st = qmm_llm_cuda_session_create(m, max_seq, o, &s);
    if (!st) {
        printf("device cuda: session of %lld positions ready in %.0f ms (split-K %s, graph %s, "
               "fused projections %s, weights %s)\n", max_seq, now_ms() - t1,
               o->split_k ? "on" : "off", o->use_graph ? "on" : "off",
               o->fuse_projections ? "on" : "off", o->offload_weights ? "streamed" : "resident");
        if (warm) st = qmm_llm_cuda_generate(s, ids, n, max_new, out, t);
        if (!st && warm) st = qmm_llm_cuda_reset(s);
        if (!st) st = qmm_llm_cuda_generate(s, ids, n, max_new, out, t);
    }
    if (!st && stats) st = qmm_llm_cuda_offload_stats(s, stats);
    /* the profile runs one forward of at most 4096 rows (the default chunk) and one step */
    int64_t pn = n < 4096 ? n : 4096;
    if (pn > max_seq - 1) pn = max_seq - 1;
    if (pp) memset(pp, 0, sizeof *pp);
    if (pd) memset(pd, 0, sizeof *pd);
    if (!st && pp && pn >= 1) st = qmm_llm_cuda_profile(s, ids, pn, pp, pd);
    qmm_llm_cuda_session_destroy(s);
    return st;
}

/* Share of a profiled forward spent in the layers: all but the embedding, head and argmax. */
static double layer_share(const qmm_llm_profile *p)
{
    static const char *outside[] = {"embedding", "lm head matmul", "argmax", "advance"};
    double other = 0;
    for (int i = 0; i < p->count; i++)
        for (size_t j = 0; j < sizeof outside / sizeof outside[0]; j++)
            if (!strcmp(p->name[i], outside[j])) other += p->ms[i];
    return p->total_ms > 0 ? (p->total_ms - other) / p->total_ms : 0.0;
}

/* Predicted time of a forward of measured length total_ms on the resident weights when its
 * layers stream with b buffers: the schedule model (tiles = layers, load = one layer's upload,
 * compute = one layer, store = 0) plus the part outside the layers. */
static void print_prediction(const char *what, double total_ms, double share, int layers,
                             double upload_ms, int measured_b, double measured_ms)
{
    double layer_ms = total_ms * share / layers, rest = total_ms - layer_ms * layers;
    printf("  %s: resident %.3f ms = %d layers x %.4f ms + %.3f ms outside; upload %.4f ms a "
           "layer\n", what, total_ms, layers, layer_ms, rest, upload_ms);
    for (int b = 1; b <= 3; b++) {
        qmm_model_pipeline p = {layers, b, {upload_ms, layer_ms, 0.0}, {NULL, NULL, NULL}};
        qmm_model_schedule r;
        if (qmm_model_schedule_run(&p, NULL, 0, &r)) continue;
        printf("    b = %d: predicted %.3f ms%s", b, r.total + rest,
               b == measured_b ? "" : "\n");
        if (b == measured_b)
            printf(", measured %.3f ms (%+.1f%%)\n", measured_ms,
                   100.0 * (measured_ms / (r.total + rest) - 1.0));
    }
}

int cmd_run(int argc, char **argv)
{
    const char *model = NULL, *ids_arg = NULL, *device = "auto";
    long long prompt_len = 0, max_new = 16, max_seq = 0, seed = 1;
    int split_k = 1, graph = 1, fuse = 1, pdl = 1, threads = 0, offload = 0, buffers = 2;
    int resident = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--offload-weights")) { /* a flag: no value */
            offload = 1;
            continue;
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
        else if (!strcmp(a, "--buffers")) buffers = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--resident")) {
            if (!on_off(v, &resident)) end = (char *)v;
        }
        else if (!strcmp(a, "--split-k")) {
            if (!on_off(v, &split_k)) end = (char *)v;
        } else if (!strcmp(a, "--graph")) {
            if (!on_off(v, &graph)) end = (char *)v;
        } else if (!strcmp(a, "--fuse")) {
            if (!on_off(v, &fuse)) end = (char *)v;
        } else if (!strcmp(a, "--pdl")) {
            if (!on_off(v, &pdl)) end = (char *)v;
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
    if (offload && buffers < 1) {
        fprintf(stderr, "qmm run: --buffers must be at least 1\n");
        return 2;
    }
    if (offload && !strcmp(device, "cpu")) {
        fprintf(stderr, "qmm run: --offload-weights streams weights to a GPU: not with --device "
                "cpu\n");
        return 2;
    }
    int use_cuda;
    if (!strcmp(device, "cpu")) use_cuda = 0;
    else if (!strcmp(device, "cuda")) use_cuda = 1;
    else if (!strcmp(device, "auto")) {
        int count = 0;
        qmm_cuda_device_count(&count, NULL, 0);
        use_cuda = count > 0 || offload; /* offload: the CUDA session says why it cannot */
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
    /* with offload the resident reference also profiles a step after the prompt: one more */
    if (max_seq <= 0) max_seq = n + max_new - 1 + offload;
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
    int mismatch = 0; /* streamed tokens differ from the resident run's */
    if (use_cuda) {
        qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
        o.split_k = split_k;
        o.use_graph = graph;
        o.fuse_projections = fuse;
        o.pdl = pdl;
        if (!offload) {
            st = cuda_generate(m, max_seq, &o, ids, n, max_new, out, &t, NULL, NULL, NULL, 0);
        } else {
            /* the resident run first: the reference tokens and the per-layer compute time */
            qmm_llm_timing rt;
            qmm_llm_profile pp, pd;
            int32_t *ref = malloc((size_t)max_new * sizeof *ref);
            int have_ref = 0;
            memset(&rt, 0, sizeof rt);
            memset(&pp, 0, sizeof pp);
            memset(&pd, 0, sizeof pd);
            if (resident && ref) {
                qmm_status rs = cuda_generate(m, max_seq, &o, ids, n, max_new, ref, &rt, NULL,
                                              &pp, &pd, 1);
                if (rs)
                    printf("resident run failed (%s: %s): no reference, no prediction\n",
                           qmm_status_name(rs), qmm_last_error());
                else {
                    have_ref = 1;
                    printf("resident: prefill %.3f ms, %.1f tok/s", rt.prefill_ms,
                           qmm_llm_prefill_tok_s(&rt));
                    if (max_new > 1)
                        printf("; decode %.3f ms, %.1f tok/s", rt.decode_ms,
                               qmm_llm_decode_tok_s(&rt));
                    printf("\n");
                }
            }
            qmm_llm_offload_stats os;
            memset(&os, 0, sizeof os);
            o.offload_weights = 1;
            o.offload_buffers = buffers;
            st = cuda_generate(m, max_seq, &o, ids, n, max_new, out, &t, &os, NULL, NULL, 1);
            if (!st) {
                printf("weight streaming: %d slots of %.2f MB (%.2f MB on the device), H2D %.1f "
                       "GB/s measured, %.4f ms per layer upload\n", os.buffers,
                       (double)os.layer_bytes / 1e6, (double)os.slot_bytes / 1e6, os.h2d_gbs,
                       os.upload_ms);
                if (have_ref && pp.total_ms <= 0)
                    printf("no room for the profile (--max-seq <= prompt): no prediction\n");
                if (have_ref) {
                    int same = !memcmp(ref, out, (size_t)max_new * sizeof *out);
                    printf("tokens identical to the resident run: %s\n", same ? "yes" : "NO");
                    mismatch = !same;
                }
                if (have_ref && pp.total_ms > 0) {
                    printf("prediction (schedule model, tiles = %lld layers, store = 0; layer "
                           "times = resident time x the profile's layer share):\n",
                           (long long)c->num_layers);
                    print_prediction("prefill", rt.prefill_ms, layer_share(&pp),
                                     (int)c->num_layers, os.upload_ms, os.buffers, t.prefill_ms);
                    if (max_new > 1) {
                        double steps = (double)(max_new - 1);
                        print_prediction("decode step", rt.decode_ms / steps, layer_share(&pd),
                                         (int)c->num_layers, os.upload_ms, os.buffers,
                                         t.decode_ms / steps);
                    }
                }
            }
            free(ref);
        }
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
    if (mismatch) {
        fprintf(stderr, "qmm run: weight streaming changed the generated tokens\n");
        rc = 1;
    }
    free(out);
    free(ids);
    qmm_llm_model_destroy(m);
    return rc;
}
