/* qmm run with token ids: --prompt-ids LIST or --prompt-len N random ids; greedy generation,
 * ids out, prefill and decode timings; with --offload-weights the streamed run is checked
 * against the resident one and compared with the schedule model's prediction. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "internal.h"
#include "run_opts.h"

static FILE *g_info; /* progress lines: stdout, or stderr when stdout carries --json */

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
    double t1 = qmm_now_ms();
    qmm_status st = qmm_llm_cuda_session_create(m, max_seq, o, &s);
    if (!st) {
        fprintf(g_info, "device cuda: session of %lld positions ready in %.0f ms (split-K %s, graph %s, "
               "fused projections %s, weights %s, decode %s)\n", max_seq, qmm_now_ms() - t1,
               o->split_k ? "on" : "off", o->use_graph ? "on" : "off",
               o->fuse_projections ? "on" : "off", o->offload_weights ? "streamed" : "resident",
               o->persistent_decode ? "persistent" : "fused");
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
    fprintf(g_info, "  %s: resident %.3f ms = %d layers x %.4f ms + %.3f ms outside; upload %.4f ms a "
           "layer\n", what, total_ms, layers, layer_ms, rest, upload_ms);
    for (int b = 1; b <= 3; b++) {
        qmm_model_pipeline p = {layers, b, {upload_ms, layer_ms, 0.0}, {NULL, NULL, NULL}};
        qmm_model_schedule r;
        if (qmm_model_schedule_run(&p, NULL, 0, &r)) continue;
        fprintf(g_info, "    b = %d: predicted %.3f ms%s", b, r.total + rest,
               b == measured_b ? "" : "\n");
        if (b == measured_b)
            fprintf(g_info, ", measured %.3f ms (%+.1f%%)\n", measured_ms,
                   100.0 * (measured_ms / (r.total + rest) - 1.0));
    }
}

int run_ids(const run_opts *o)
{
    const char *model = o->model, *ids_arg = o->ids_arg;
    long long prompt_len = o->prompt_len, max_new = o->max_new, max_seq = o->max_seq,
              seed = o->seed;
    int split_k = o->split_k, graph = o->graph, fuse = o->fuse, pdl = o->pdl, threads = (int)o->threads,
        offload = o->offload, buffers = (int)o->buffers, resident = o->resident,
        persistent = o->persistent;
    int use_cuda = run_use_cuda("run", o);
    g_info = o->json ? stderr : stdout;
    int32_t *ids = NULL;
    int64_t n;
    if (ids_arg) {
        n = parse_ids(ids_arg, &ids);
        if (n < 1) {
            free(ids); /* an empty list parses to no ids */
            fprintf(stderr, "qmm run: --prompt-ids must be a comma-separated list of integers\n");
            return EXIT_USAGE;
        }
    } else {
        n = prompt_len;
        ids = malloc((size_t)n * sizeof *ids);
        if (!ids) return EXIT_USAGE;
    }

    double t0 = qmm_now_ms();
    qmm_llm_model *m = NULL;
    qmm_status st = qmm_llm_model_open(model, (uint64_t)seed, &m);
    if (st) {
        fprintf(stderr, "qmm run: %s: %s (%s)\n", model, qmm_last_error(), qmm_status_name(st));
        free(ids);
        return EXIT_USAGE;
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
    fprintf(g_info, "model %s: %lld layers, hidden %lld, heads %lld/%lld, vocab %lld, %s, %.2f %s of "
           "weights (%s, %.0f ms)\n", model, (long long)c->num_layers, (long long)c->hidden_size,
           (long long)c->num_heads, (long long)c->num_kv_heads, (long long)c->vocab_size,
           c->tie_word_embeddings ? "tied head" : "separate head", wb >= 1e9 ? wb / 1e9 : wb / 1e6,
           wb >= 1e9 ? "GB" : "MB",
           qmm_llm_model_is_synthetic(m) ? "synthetic" : "checkpoint",
           qmm_now_ms() - t0);

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
        o.persistent_decode = persistent;
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
                    fprintf(g_info, "resident run failed (%s: %s): no reference, no prediction\n",
                           qmm_status_name(rs), qmm_last_error());
                else {
                    have_ref = 1;
                    fprintf(g_info, "resident: prefill %.3f ms, %.1f tok/s", rt.prefill_ms,
                           qmm_llm_prefill_tok_s(&rt));
                    if (max_new > 1)
                        fprintf(g_info, "; decode %.3f ms, %.1f tok/s", rt.decode_ms,
                               qmm_llm_decode_tok_s(&rt));
                    fprintf(g_info, "\n");
                }
            }
            qmm_llm_offload_stats os;
            memset(&os, 0, sizeof os);
            o.offload_weights = 1;
            o.offload_buffers = buffers;
            st = cuda_generate(m, max_seq, &o, ids, n, max_new, out, &t, &os, NULL, NULL, 1);
            if (!st) {
                fprintf(g_info, "weight streaming: %d slots of %.2f MB (%.2f MB on the device), H2D %.1f "
                       "GB/s measured, %.4f ms per layer upload\n", os.buffers,
                       (double)os.layer_bytes / 1e6, (double)os.slot_bytes / 1e6, os.h2d_gbs,
                       os.upload_ms);
                if (have_ref && pp.total_ms <= 0)
                    fprintf(g_info, "no room for the profile (--max-seq <= prompt): no prediction\n");
                if (have_ref) {
                    int same = !memcmp(ref, out, (size_t)max_new * sizeof *out);
                    fprintf(g_info, "tokens identical to the resident run: %s\n", same ? "yes" : "NO");
                    mismatch = !same;
                }
                if (have_ref && pp.total_ms > 0) {
                    fprintf(g_info, "prediction (schedule model, tiles = %lld layers, store = 0; layer "
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
            fprintf(g_info, "device cpu\n");
            st = qmm_llm_cpu_generate(s, ids, n, max_new, out, &t);
        }
        qmm_llm_cpu_session_destroy(s);
    }
    int rc = 0;
    if (st) {
        fprintf(stderr, "qmm run: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
        rc = EXIT_USAGE;
    } else {
        if (o->json) {
            printf("{\"model\": ");
            cli_json_string(stdout, model, strlen(model));
            printf(", \"synthetic\": %s, \"device\": \"%s\", \"prompt_ids\": [",
                   qmm_llm_model_is_synthetic(m) ? "true" : "false", use_cuda ? "cuda" : "cpu");
            for (int64_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
            printf("], \"generated_ids\": [");
            for (int64_t i = 0; i < max_new; i++) printf("%s%d", i ? ", " : "", out[i]);
            printf("], \"prefill_ms\": %.3f, \"prefill_tok_s\": %.2f, \"decode_ms\": %.3f, "
                   "\"decode_tok_s\": %.2f}\n", t.prefill_ms, qmm_llm_prefill_tok_s(&t),
                   t.decode_ms, qmm_llm_decode_tok_s(&t));
        } else {
            fprintf(g_info, "prompt (%lld):", (long long)n);
            for (int64_t i = 0; i < n && i < 64; i++) fprintf(g_info, " %d", ids[i]);
            fprintf(g_info, "%s\ngenerated (%lld):", n > 64 ? " ..." : "", max_new);
            for (int64_t i = 0; i < max_new; i++) fprintf(g_info, " %d", out[i]);
            fprintf(g_info, "\nprefill: %.3f ms, %.1f tok/s\n", t.prefill_ms, qmm_llm_prefill_tok_s(&t));
            if (max_new > 1)
                fprintf(g_info, "decode: %lld steps in %.3f ms, %.1f tok/s\n", max_new - 1, t.decode_ms,
                       qmm_llm_decode_tok_s(&t));
        }
    }
    if (mismatch) {
        fprintf(stderr, "qmm run: weight streaming changed the generated tokens\n");
        rc = EXIT_CHECK;
    }
    free(out);
    free(ids);
    qmm_llm_model_destroy(m);
    return rc;
}
