/* `qmm bench e2e`, the child process: one model, one session, warm-ups, one timed generation;
 * prints its results as tagged JSON lines for the parent. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_e2e.h"
#include "bench_e2e_profile.h"
#ifdef QMM_HAVE_CUDA
#include "bench_gpu.h"
#endif
#include "common/common.h"
#include "qmm.h"

static void prompt_ids(int32_t *ids, int64_t n, long long seed, int64_t vocab)
{
    bench_prompt_ids(ids, n, (uint64_t)seed * 0x9E3779B97F4A7C15ull + 12345, vocab);
}

/* The copy ceiling of --profile: `qmm bench ops`'s own measurement (its 1 GiB buffers, 9 replays
 * of a graph of 10 copies; with the warm-up and eager batches some 220 copies of 2 GB moved, about
 * 0.15 s at 3 TB/s by arithmetic), so the two benchmarks divide by the same number. The child
 * takes it after freeing the session and the model: the 2 GiB then fit beside any model the
 * session fitted, where a smaller buffer would make it a different measurement. */
#define E2E_CEILING_BYTES ((size_t)1 << 30)
#define E2E_CEILING_REPS 9

/* This GPU's copy ceiling into c; on failure c->measured = 0, c->note says why, and so does
 * stderr (the report then divides by the H200's, labelled as such). */
static void child_copy_ceiling(int device, bench_ceiling *c)
{
#ifdef QMM_HAVE_CUDA
    if (!bench_measure_copy_ceiling(device, E2E_CEILING_BYTES, E2E_CEILING_REPS, c)) return;
#else
    memset(c, 0, sizeof *c);
    snprintf(c->note, sizeof c->note, "a build without CUDA");
    (void)device;
#endif
    fprintf(stderr, "qmm bench e2e: WARNING: copy ceiling not measured (%s); the in-graph "
            "profile divides by the H200's %.0f GB/s, labelled as such\n", c->note,
            E2E_COPY_CEILING_GBS);
}

/* --verify: GPU vs CPU on an 8-token prompt. */
static int child_verify(qmm_llm_model *m, long long seed)
{
    const qmm_llm_config *c = qmm_llm_model_config(m);
    int32_t ids[8];
    prompt_ids(ids, 8, seed, c->vocab_size);
    float *a = malloc((size_t)c->vocab_size * 4), *b = malloc((size_t)c->vocab_size * 4);
    qmm_llm_cpu_session *cs = NULL;
    qmm_llm_cuda_session *gs = NULL;
    qmm_status st = qmm_llm_cpu_session_create(m, 8, 0, &cs);
    if (!st) st = qmm_llm_cuda_session_create(m, 8, NULL, &gs);
    if (!st) st = qmm_llm_cpu_prefill(cs, ids, 8, a);
    if (!st) st = qmm_llm_cuda_prefill(gs, ids, 8, b, NULL);
    int rc = 1;
    if (st) {
        fprintf(stderr, "verify: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
    } else {
        double num = 0, den = 0;
        int finite = 1;
        for (int64_t i = 0; i < c->vocab_size; i++) {
            finite &= isfinite(b[i]);
            num += ((double)b[i] - a[i]) * ((double)b[i] - a[i]);
            den += (double)a[i] * a[i];
        }
        double rel = finite && den > 0 ? sqrt(num / den) : INFINITY;
        printf("VERIFY {\"prompt\": 8, \"logits_rel_err\": %.6g, \"pass\": %s}\n", rel,
               rel <= 2e-2 ? "true" : "false");
        rc = rel <= 2e-2 ? 0 : 1;
    }
    qmm_llm_cpu_session_destroy(cs);
    qmm_llm_cuda_session_destroy(gs);
    free(a), free(b);
    return rc;
}

int e2e_child_main(const e2e_args *a, int split_k)
{
    qmm_llm_model *m = NULL;
    qmm_status st = qmm_llm_model_open(a->model, (uint64_t)a->seed, &m);
    if (st) {
        fprintf(stderr, "qmm bench e2e: %s: %s\n", a->model, qmm_last_error());
        return 1;
    }
    if (a->verify) {
        int rc = child_verify(m, a->seed);
        qmm_llm_model_destroy(m);
        return rc;
    }
    const qmm_llm_config *c = qmm_llm_model_config(m);
    int64_t n = a->in_len[0], out = a->out_len[0];
    const int64_t cap = a->max_seq > 0 ? a->max_seq : n + out - 1;
    int32_t *ids = malloc((size_t)n * 4), *toks = malloc((size_t)out * 4);
    prompt_ids(ids, n, a->seed, c->vocab_size);
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    o.split_k = split_k;
    o.fuse_projections = a->fuse;
    o.pdl = a->pdl;
    o.persistent_decode = a->persistent;
    qmm_llm_cuda_session *s = NULL;
    qmm_llm_cpu_session *cs = NULL;
    qmm_llm_timing t;
    memset(&t, 0, sizeof t);
    qmm_llm_graph_profile gp;
    int have_gp = 0;
    if (a->cpu) {
        st = qmm_llm_cpu_session_create(m, cap, 0, &cs);
        for (int w = 0; w <= a->warmup && !st; w++) {
            st = qmm_llm_cpu_reset(cs);
            if (!st) st = qmm_llm_cpu_generate(cs, ids, n, out, toks, &t);
        }
    } else {
        st = qmm_llm_cuda_session_create(m, cap, &o, &s);
        for (int w = 0; w <= a->warmup && !st; w++) {
            st = qmm_llm_cuda_reset(s);
            if (!st) st = qmm_llm_cuda_generate(s, ids, n, out, toks, &t);
        }
    }
    int rc = 0;
    if (st) {
        fprintf(stderr, "qmm bench e2e: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
        rc = 1;
    } else {
        uint32_t sum = 0;
        for (int64_t i = 0; i < out; i++) sum = sum * 31u + (uint32_t)toks[i];
        qmm_gpu_info gi;
        memset(&gi, 0, sizeof gi);
        qmm_cuda_ctx *ctx = NULL;
        if (a->cpu) {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            snprintf(gi.name, sizeof gi.name, "CPU reference forward, %ld threads", cpus);
        } else if (!qmm_cuda_create(0, NULL, &ctx)) {
            qmm_cuda_info(ctx, &gi);
        }
        qmm_cuda_destroy(ctx);
        /* the kernels the session says it runs (the CPU forward has no choices) */
        qmm_llm_cuda_kernels kn = {"-", "-", "-"};
        if (!a->cpu) qmm_llm_cuda_session_kernels(s, &kn);
        printf("RESULT {\"input_len\": %lld, \"output_len\": %lld, \"split_k\": %d, "
               "\"prefill_ms\": %.6f, \"decode_ms\": %.6f, \"tokens_hash\": %u, "
               "\"weight_bytes\": %zu, \"gpu\": \"%s\", \"sm_count\": %d, \"cc\": \"%d.%d\", "
               "\"driver\": %d, \"runtime\": %d, \"prefill_attention\": \"%s\", "
               "\"decode_step\": \"%s\", \"decode_attention\": \"%s\"}\n",
               (long long)n, (long long)out, split_k, t.prefill_ms, t.decode_ms, sum,
               qmm_llm_model_weight_bytes(m), gi.name, gi.sm_count, gi.cc_major, gi.cc_minor,
               gi.driver_version, gi.runtime_version, kn.prefill_attention, kn.decode_step,
               kn.decode_attention);
        if (a->profile && !a->cpu && n <= 4096) {
            qmm_llm_profile pp, pd;
            st = qmm_llm_cuda_profile(s, ids, n, &pp, &pd);
            if (!st) {
                e2e_print_profile("PROFILE_PREFILL", &pp);
                e2e_print_profile("PROFILE_DECODE", &pd);
            }
        }
        /* the decode step in its graph: any prompt length (the prefill runs in chunks) */
        int steps = out - 1 < 20 ? (int)(out - 1) : 20;
        have_gp = a->profile && !a->cpu && steps >= 1 &&
                  !qmm_llm_cuda_profile_graph(s, ids, n, steps, &gp);
    }
    qmm_llm_cuda_session_destroy(s);
    qmm_llm_cpu_session_destroy(cs);
    free(ids), free(toks);
    qmm_llm_model_destroy(m);
    if (have_gp) { /* printed with its denominator, measured now that the memory is free */
        bench_ceiling copy;
        child_copy_ceiling(o.device, &copy);
        e2e_print_graph_profile(stdout, "PROFILE_GRAPH", &gp, &copy);
    }
    return rc;
}
