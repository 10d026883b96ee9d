/*
 * The Qwen3 engine's kernels under a sanitizer, and a long decode (issue 17).
 *   small_model_prefill_decode: a small model's prefill (chunked, split-K on), eager decode
 *     steps and graph decode steps: every kernel of the engine. Small enough to run under
 *     compute-sanitizer memcheck / racecheck / synccheck / initcheck (bench/device.sh, step
 *     reliability); logits within 2e-2 of the CPU reference, tokens its argmax or a near tie.
 *   small_matmul_paths: one matmul on each path (matvec, tiled, split-K, dense), the same way.
 *   decode_10000_steps: 10 000 decode steps of one session. The CPU reference is fed the same
 *     tokens (teacher forcing), and the logits are compared at checkpoints spread over the run:
 *     relative error <= 2e-2 everywhere and the last <= 3x the first + 5e-3 (no drift). cudaMemGetInfo before and after the steps: no device memory growth. Then the
 *     chained generate (graph) of 10 000 tokens twice: identical tokens, no growth either.
 * Skips (exit 77) without CUDA or a GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifndef QMM_HAVE_CUDA
int main(void) { test_skip_no_gpu("this build has no CUDA backend (nvcc was not found)"); }
#else
#include <cuda_runtime.h>

static size_t free_bytes(void)
{
    size_t f = 0, t = 0;
    cudaDeviceSynchronize();
    cudaMemGetInfo(&f, &t);
    return f;
}


static void small_model_prefill_decode(void)
{
    static const qmm_llm_config c = {256, 512, 2, 4, 2, 64, 500, 256, 1e6, 1e-6, 1, 128};
    test_llm f;
    if (!test_llm_init(&f, test_synthetic_model(&c, 21), 40)) return;
    qmm_llm_model *m = f.m;
    const int32_t *ids = f.ids;
    float *ref = f.a, *got = f.b;
    for (int graph = 0; graph < 2; graph++) {
        qmm_llm_cpu_session *cs = NULL;
        qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
        o.use_graph = graph;
        o.max_chunk = 16; /* the 40-token prompt in three chunks */
        CHECK_OK(qmm_llm_cpu_session_create(m, 64, 1, &cs));
        qmm_llm_cuda_session *gs = test_cuda_session(m, 64, &o);
        if (!cs || !gs) {
            qmm_llm_cpu_session_destroy(cs);
            qmm_llm_cuda_session_destroy(gs);
            break;
        }
        int32_t next = -1;
        CHECK_OK(qmm_llm_cpu_prefill(cs, ids, 40, ref));
        CHECK_OK(qmm_llm_cuda_prefill(gs, ids, 40, got, &next));
        double e = test_rel_err_f32(got, ref, c.vocab_size);
        CHECKF(e <= 2e-2, "graph %d prefill: rel err %.3g", graph, e);
        for (int step = 0; step < 8; step++) {
            CHECKF(test_near_tie(ref, c.vocab_size, next, NULL), "graph %d step %d: token %d", graph,
                   step, next);
            int32_t id = next;
            CHECK_OK(qmm_llm_cpu_decode(cs, id, ref));
            CHECK_OK(qmm_llm_cuda_decode(gs, id, got, &next));
            e = test_rel_err_f32(got, ref, c.vocab_size);
            CHECKF(e <= 2e-2, "graph %d step %d: rel err %.3g", graph, step, e);
        }
        qmm_llm_cpu_session_destroy(cs);
        qmm_llm_cuda_session_destroy(gs);
    }
    test_llm_free(&f);
}

/* One matmul on each path (dense = cuBLAS: racecheck reports hazards inside its nvjet kernels,
 * so this case is apart from the engine's). */
static void small_matmul_paths(void)
{
    qmm_cuda_ctx *ctx = NULL;
    CHECK_OK(qmm_cuda_create(0, NULL, &ctx));
    if (!ctx) return;
    const int64_t n = 256, k = 1024;
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(n, k, &w));
    test_random_w4(&w, 0.002, 0.02);
    qmm_cuda_weight *dw = NULL;
    CHECK_OK(qmm_cuda_weight_upload(ctx, &w, &dw));
    const struct {
        qmm_path path;
        int64_t m;
        int split;
    } runs[] = {{QMM_PATH_MATVEC, 3, 0}, {QMM_PATH_TILED, 40, 0}, {QMM_PATH_SPLITK, 24, 4},
                {QMM_PATH_DENSE, 64, 0}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0] && dw; r++) {
        qmm_cuda_options o = qmm_cuda_options_default();
        o.path = runs[r].path;
        o.split = runs[r].split;
        int64_t mm = runs[r].m;
        size_t ws_bytes = 0;
        CHECK_OK(qmm_cuda_workspace_size(ctx, mm, n, k, &o, &ws_bytes));
        qmm_bf16 *a = malloc((size_t)(mm * k) * 2), *cc = malloc((size_t)(mm * n) * 2);
        test_fill_bf16(a, (size_t)(mm * k), 1.0);
        qmm_bf16 *a_dev = NULL, *c_dev = NULL;
        void *ws = NULL;
        cudaMalloc((void **)&a_dev, (size_t)(mm * k) * 2);
        cudaMalloc((void **)&c_dev, (size_t)(mm * n) * 2);
        if (ws_bytes) cudaMalloc(&ws, ws_bytes);
        cudaMemcpy(a_dev, a, (size_t)(mm * k) * 2, cudaMemcpyHostToDevice);
        CHECK_OK(qmm_cuda_matmul(ctx, a_dev, mm, dw, c_dev, ws, ws_bytes, &o, NULL));
        cudaMemcpy(cc, c_dev, (size_t)(mm * n) * 2, cudaMemcpyDeviceToHost);
        double *r64 = malloc(sizeof(double) * (size_t)(mm * n));
        test_matmul_f64(a, mm, &w, r64);
        double e = test_rel_frob_bf16(cc, r64, (size_t)(mm * n));
        CHECKF(e <= 1e-2, "%s M=%lld: rel err %.3g", qmm_path_name(runs[r].path), (long long)mm, e);
        free(r64);
        free(a);
        free(cc);
        cudaFree(a_dev);
        cudaFree(c_dev);
        cudaFree(ws);
    }
    qmm_cuda_weight_free(dw);
    qmm_w4_free(&w);
    qmm_cuda_destroy(ctx);
}

#define STEPS 10000

static void decode_10000_steps(void)
{
    static const qmm_llm_config c = {256, 512, 2, 4, 2, 64, 1000, 16384, 1e6, 1e-6, 1, 128};
    test_llm f;
    if (!test_llm_init(&f, test_synthetic_model(&c, 5), 16)) return;
    const int32_t *ids = f.ids;
    float *ref = f.a, *got = f.b;
    qmm_llm_cpu_session *cs = NULL;
    CHECK_OK(qmm_llm_cpu_session_create(f.m, 16 + STEPS + 1, 0, &cs));
    qmm_llm_cuda_session *gs = test_cuda_session(f.m, 16 + STEPS + 1, NULL);
    if (!cs || !gs) goto done;
    int32_t next = -1;
    CHECK_OK(qmm_llm_cpu_prefill(cs, ids, 16, ref));
    CHECK_OK(qmm_llm_cuda_prefill(gs, ids, 16, got, &next));
    /* one step before measuring: first-use allocations (graph, lazy modules) are not growth */
    CHECK_OK(qmm_llm_cpu_decode(cs, next, ref));
    CHECK_OK(qmm_llm_cuda_decode(gs, next, got, &next));
    size_t before = free_bytes();
    double first_err = -1, last_err = -1, worst = 0;
    int checkpoints = 0;
    for (int step = 1; step < STEPS; step++) {
        int check = step % 500 == 0 || step == STEPS - 1;
        int32_t id = next;
        /* the CPU follows the GPU's tokens; its logits are computed only at checkpoints' steps
         * (it must still run every step to fill its cache) */
        CHECK_OK(qmm_llm_cpu_decode(cs, id, check ? ref : NULL));
        CHECK_OK(qmm_llm_cuda_decode(gs, id, check ? got : NULL, &next));
        if (test_failed_now()) break;
        if (check) {
            double e = test_rel_err_f32(got, ref, c.vocab_size);
            if (first_err < 0) first_err = e;
            last_err = e;
            if (e > worst) worst = e;
            checkpoints++;
        }
    }
    size_t after = free_bytes();
    printf("    %d steps: logits rel err first %.3g, last %.3g, worst %.3g over %d checkpoints; "
           "device free %zu -> %zu bytes\n", STEPS, first_err, last_err, worst, checkpoints,
           before, after);
    CHECKF(worst <= 2e-2, "worst rel err %.3g", worst);
    /* bf16 roundings that differ between the two orders keep the error near 1e-3; a drift
     * (state that accumulates error step after step) would grow it well past that */
    CHECKF(last_err <= 3.0 * first_err + 5e-3, "drift: %.3g at the end, %.3g at first", last_err,
           first_err);
    CHECKF(after == before, "device memory changed by %lld bytes over the steps",
           (long long)before - (long long)after);

    /* the chained generate of 10 000 tokens, twice: same tokens, no growth */
    int32_t *t1 = malloc(sizeof(int32_t) * STEPS), *t2 = malloc(sizeof(int32_t) * STEPS);
    CHECK_OK(qmm_llm_cuda_reset(gs));
    CHECK_OK(qmm_llm_cuda_generate(gs, ids, 16, STEPS, t1, NULL));
    before = free_bytes();
    CHECK_OK(qmm_llm_cuda_reset(gs));
    CHECK_OK(qmm_llm_cuda_generate(gs, ids, 16, STEPS, t2, NULL));
    after = free_bytes();
    CHECK(!memcmp(t1, t2, sizeof(int32_t) * STEPS));
    CHECKF(after == before, "generate: device memory changed by %lld bytes",
           (long long)before - (long long)after);
    free(t1);
    free(t2);
done:
    qmm_llm_cpu_session_destroy(cs);
    qmm_llm_cuda_session_destroy(gs);
    test_llm_free(&f);
}

TEST_GPU_MAIN("the engine soak is not run here", small_model_prefill_decode, small_matmul_paths,
              decode_10000_steps)
#endif
