/*
 * The chunked pipeline on the GPU: bit for bit equal to one unchunked qmm_cuda_matmul with the
 * same forced options (path TILED) for b in {1,2,3,4} x chunk rows in {1,7,64,100} x M_total in
 * {1,100,333}, host outputs poisoned first and guarded past M_total; uneven chunks; the recorded
 * timeline respects the plan's dependencies; AUTO options (split-K chunks) within tolerance;
 * bad input answered with a status and the pipeline still usable afterwards.
 * Skips (exit 77) with the reason when there is no GPU or no CUDA in this build.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifndef QMM_HAVE_CUDA
int main(void) { test_skip_no_gpu("this build has no CUDA backend (nvcc was not found)"); }
#else
#include <cuda_runtime.h>

static qmm_cuda_ctx *ctx;

#define MAX_ROWS 333

/* One weight, pinned host A [MAX_ROWS, K] and C [MAX_ROWS, N], device copies for the reference. */
typedef struct fixture {
    int64_t n, k;
    qmm_w4 w;
    qmm_cuda_weight *dw;
    qmm_bf16 *a_host, *c_host; /* pinned */
    qmm_bf16 *a_dev, *c_dev;
    void *ws;
    size_t ws_bytes;
} fixture;

static int fixture_init(fixture *f, int64_t n, int64_t k)
{
    memset(f, 0, sizeof *f);
    f->n = n, f->k = k;
    if (qmm_w4_alloc(n, k, &f->w) != QMM_OK) return 0;
    test_random_w4(&f->w, 0.002, 0.02);
    if (qmm_cuda_weight_upload(ctx, &f->w, &f->dw) != QMM_OK) return 0;
    size_t a_bytes = (size_t)(MAX_ROWS * k) * 2, c_bytes = (size_t)(MAX_ROWS * n) * 2;
    f->ws_bytes = (size_t)32 * MAX_ROWS * (size_t)n * 4 + ((size_t)33 << 20) + (size_t)(n * k) * 2;
    if (cudaMallocHost((void **)&f->a_host, a_bytes) != cudaSuccess ||
        cudaMallocHost((void **)&f->c_host, c_bytes) != cudaSuccess ||
        cudaMalloc((void **)&f->a_dev, a_bytes) != cudaSuccess ||
        cudaMalloc((void **)&f->c_dev, c_bytes) != cudaSuccess ||
        cudaMalloc(&f->ws, f->ws_bytes) != cudaSuccess)
        return 0;
    test_fill_bf16(f->a_host, (size_t)(MAX_ROWS * k), 1.0);
    return cudaMemcpy(f->a_dev, f->a_host, a_bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}

static void fixture_free(fixture *f)
{
    qmm_cuda_weight_free(f->dw);
    cudaFreeHost(f->a_host), cudaFreeHost(f->c_host);
    cudaFree(f->a_dev), cudaFree(f->c_dev), cudaFree(f->ws);
    qmm_w4_free(&f->w);
}

/* Set up a fixture or fail the case and return (a half-built fixture is freed). */
#define SETUP(f, n, k)                                                                      \
    do {                                                                                    \
        if (!fixture_init(&(f), (n), (k))) {                                                \
            CHECKF(0, "setup failed: %s", qmm_last_error());                                \
            fixture_free(&(f));                                                             \
            return;                                                                         \
        }                                                                                   \
    } while (0)

static qmm_cuda_options tiled_options(void)
{
    qmm_cuda_options o = qmm_cuda_options_default();
    o.path = QMM_PATH_TILED; /* stages: the tuned default */
    return o;
}

/* ref[m, N] = one unchunked call over the first m rows with options o. */
static int reference(const fixture *f, int64_t m, const qmm_cuda_options *o, qmm_bf16 *ref)
{
    cudaMemset(f->c_dev, 0xFF, (size_t)(m * f->n) * 2);
    qmm_status st = qmm_cuda_matmul(ctx, f->a_dev, m, f->dw, f->c_dev, f->ws, f->ws_bytes, o, NULL);
    if (st != QMM_OK) {
        test_fail(__FILE__, __LINE__, "reference call M=%lld: %s", (long long)m, qmm_last_error());
        return 0;
    }
    if (cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(ref, f->c_dev, (size_t)(m * f->n) * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
        test_fail(__FILE__, __LINE__, "reference call M=%lld failed on the device", (long long)m);
        return 0;
    }
    return 1;
}

static void poison(fixture *f)
{
    for (size_t i = 0; i < (size_t)(MAX_ROWS * f->n); i++) f->c_host[i] = TEST_POISON_BF16;
}

/* c_host's first m rows equal ref bit for bit, the rows after m still poisoned. */
static int same_as_ref(const fixture *f, int64_t m, const qmm_bf16 *ref, const char *what)
{
    size_t used = (size_t)(m * f->n), all = (size_t)(MAX_ROWS * f->n);
    for (size_t i = 0; i < used; i++)
        if (f->c_host[i] != ref[i]) {
            test_fail(__FILE__, __LINE__, "%s: M_total=%lld: element %zu (row %zu) is 0x%04x, "
                      "the unchunked call gives 0x%04x", what, (long long)m, i, i / (size_t)f->n,
                      f->c_host[i], ref[i]);
            return 0;
        }
    for (size_t i = used; i < all; i++)
        if (f->c_host[i] != TEST_POISON_BF16) {
            test_fail(__FILE__, __LINE__, "%s: M_total=%lld: element %zu past the output was "
                      "written", what, (long long)m, i);
            return 0;
        }
    return 1;
}

static void bitwise_grid(void)
{
    static const int64_t totals[] = {1, 100, MAX_ROWS};
    static const int64_t chunk_rows[] = {1, 7, 64, 100};
    fixture f;
    SETUP(f, 200, 384);
    qmm_cuda_options o = tiled_options();
    qmm_bf16 *ref[3];
    int have_ref = 1;
    for (int t = 0; t < 3; t++) {
        ref[t] = malloc((size_t)(totals[t] * f.n) * 2);
        have_ref &= reference(&f, totals[t], &o, ref[t]);
    }
    if (!have_ref) {
        for (int t = 0; t < 3; t++) free(ref[t]);
        fixture_free(&f);
        return;
    }
    /* the reference itself against fp64, once */
    double *exact = malloc(sizeof *exact * (size_t)(MAX_ROWS * f.n));
    test_matmul_f64(f.a_host, MAX_ROWS, &f.w, exact);
    double err = test_rel_frob_bf16(ref[2], exact, (size_t)(MAX_ROWS * f.n));
    CHECKF(err <= 1e-2, "unchunked reference: rel err %.3e vs fp64", err);
    free(exact);

    for (int b = 1; b <= 4; b++)
        for (size_t mi = 0; mi < sizeof chunk_rows / sizeof chunk_rows[0]; mi++) {
            qmm_pipeline *p = NULL;
            CHECK_OK(qmm_pipeline_create(ctx, f.dw, chunk_rows[mi], b, &o, &p));
            if (!p) continue;
            int ok = 1;
            for (int t = 0; t < 3; t++) {
                poison(&f);
                qmm_status st = qmm_pipeline_run(p, f.a_host, totals[t], f.c_host, NULL, 0);
                CHECK_OK(st);
                char what[64];
                snprintf(what, sizeof what, "b=%d m=%lld", b, (long long)chunk_rows[mi]);
                ok &= st == QMM_OK && same_as_ref(&f, totals[t], ref[t], what);
            }
            printf("    b=%d chunk rows %-3lld M_total 1, 100, 333: %s\n", b,
                   (long long)chunk_rows[mi], ok ? "bitwise equal" : "DIFFERENT");
            qmm_pipeline_destroy(p);
        }
    printf("    unchunked reference vs fp64: rel err %.2e\n", err);
    for (int t = 0; t < 3; t++) free(ref[t]);
    fixture_free(&f);
}

static void uneven_chunks(void)
{
    static const int64_t rows[] = {64, 1, 33, 64, 7, 50, 64, 2};
    const int chunks = 8;
    int64_t total = 0;
    for (int i = 0; i < chunks; i++) total += rows[i];
    fixture f;
    SETUP(f, 136, 256);
    qmm_cuda_options o = tiled_options();
    qmm_bf16 *ref = malloc((size_t)(total * f.n) * 2);
    if (reference(&f, total, &o, ref)) {
        for (int b = 1; b <= 3; b++) {
            qmm_pipeline *p = NULL;
            CHECK_OK(qmm_pipeline_create(ctx, f.dw, 64, b, &o, &p));
            if (!p) continue;
            poison(&f);
            CHECK_OK(qmm_pipeline_run_rows(p, f.a_host, rows, chunks, f.c_host, NULL, 0));
            char what[32];
            snprintf(what, sizeof what, "uneven b=%d", b);
            same_as_ref(&f, total, ref, what);
            qmm_pipeline_destroy(p);
        }
    }
    free(ref);
    fixture_free(&f);
}

/* The recorded segments: positive lengths, each engine in order, and every cross-engine
 * dependency of the plan respected (within the events' resolution). */
static void timeline_respects_plan(void)
{
    const int64_t m = 64, total = MAX_ROWS;
    const double tol_us = 5.0; /* event timestamps: ~0.5 us resolution */
    fixture f;
    SETUP(f, 1024, 2048);
    int n;
    CHECK_OK(qmm_pipeline_chunk_count(total, m, &n));
    int64_t *rows = malloc(sizeof *rows * (size_t)n);
    qmm_pipeline_step *steps = malloc(sizeof *steps * 3 * (size_t)n);
    void **ev = calloc((size_t)6 * n, sizeof *ev);
    qmm_model_segment *seg = malloc(sizeof *seg * 3 * (size_t)n);
    for (int j = 0; j < 6 * n; j++) {
        cudaEvent_t e;
        CUDA_OK(cudaEventCreate(&e));
        ev[j] = e;
    }
    CHECK_OK(qmm_pipeline_uniform_rows(total, m, rows, (size_t)n));
    qmm_cuda_options o = tiled_options();
    for (int b = 1; b <= 3; b++) {
        qmm_pipeline *p = NULL;
        CHECK_OK(qmm_pipeline_create(ctx, f.dw, m, b, &o, &p));
        if (!p) continue;
        CHECK_OK(qmm_pipeline_plan(rows, n, b, steps, 3 * (size_t)n));
        CHECK_STATUS(qmm_pipeline_run(p, f.a_host, total, f.c_host, ev, (size_t)6 * n - 1),
                     QMM_ERR_SIZE_MISMATCH);
        CHECK_OK(qmm_pipeline_run(p, f.a_host, total, f.c_host, ev, (size_t)6 * n));
        CHECK_OK(qmm_pipeline_timeline(ev, n, seg, 3 * (size_t)n));
        int bad = 0;
        for (int j = 0; j < 3 * n; j++) {
            const qmm_pipeline_step *s = &steps[j];
            const qmm_model_segment *me = &seg[s->engine * n + s->chunk];
            if (!(me->end >= me->start) || !isfinite(me->start)) bad++;
            for (int d = 0; d < s->dep_count; d++) {
                const qmm_model_segment *dep = &seg[s->dep[d].engine * n + s->dep[d].chunk];
                if (me->start < dep->end - tol_us) {
                    bad++;
                    printf("    b=%d: %s %d starts at %.1f us, before %s %d ends at %.1f\n", b,
                           qmm_model_engine_name(s->engine), s->chunk, me->start,
                           qmm_model_engine_name(s->dep[d].engine), s->dep[d].chunk, dep->end);
                }
            }
        }
        CHECKF(bad == 0, "b=%d: %d segments break the plan's order", b, bad);
        CHECK(seg[0].start == 0);
        double end = 0;
        for (int j = 0; j < 3 * n; j++) end = fmax(end, seg[j].end);
        printf("    b=%d: %d chunks of %lld rows, N=%lld K=%lld: %.1f us, %zu device bytes\n", b,
               n, (long long)m, (long long)f.n, (long long)f.k, end, qmm_pipeline_device_bytes(p));
        qmm_pipeline_destroy(p);
    }
    for (int j = 0; j < 6 * n; j++)
        if (ev[j]) cudaEventDestroy((cudaEvent_t)ev[j]);
    free(ev), free(seg), free(steps), free(rows);
    fixture_free(&f);
}

/* Default options: small chunks plan split-K (workspace sized for every chunk size); the result
 * is within the kernels' tolerance of fp64 (not bitwise: the split depends on the chunk). */
static void auto_options(void)
{
    fixture f;
    SETUP(f, 1024, 2560);
    const int64_t total = 100;
    double *exact = malloc(sizeof *exact * (size_t)(total * f.n));
    test_matmul_f64(f.a_host, total, &f.w, exact);
    static const int64_t chunk_rows[] = {7, 32, 64};
    for (int ci = 0; ci < 3; ci++) {
        qmm_plan plan;
        CHECK_OK(qmm_cuda_plan(ctx, chunk_rows[ci], f.n, f.k, NULL, &plan));
        qmm_pipeline *p = NULL;
        CHECK_OK(qmm_pipeline_create(ctx, f.dw, chunk_rows[ci], 2, NULL, &p));
        if (!p) continue;
        CHECK(qmm_pipeline_device_bytes(p) >= (size_t)2 * chunk_rows[ci] * (f.n + f.k) * 2);
        poison(&f);
        CHECK_OK(qmm_pipeline_run(p, f.a_host, total, f.c_host, NULL, 0));
        double err = test_rel_frob_bf16(f.c_host, exact, (size_t)(total * f.n));
        CHECKF(err <= 1e-2, "auto, chunk rows %lld: rel err %.3e", (long long)chunk_rows[ci], err);
        printf("    auto, chunk rows %-2lld (full chunk plan: %s split %d): rel err %.2e\n",
               (long long)chunk_rows[ci], qmm_path_name(plan.path), plan.split, err);
        qmm_pipeline_destroy(p);
    }
    free(exact);
    fixture_free(&f);
}

static void bad_input(void)
{
    fixture f;
    SETUP(f, 64, 128);
    qmm_cuda_options o = tiled_options();
    qmm_pipeline *p = NULL;
    CHECK_STATUS(qmm_pipeline_create(NULL, f.dw, 8, 2, &o, &p), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_create(ctx, NULL, 8, 2, &o, &p), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_create(ctx, f.dw, 8, 2, &o, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_create(ctx, f.dw, 8, 0, &o, &p), QMM_ERR_ARG);
    CHECK_STATUS(qmm_pipeline_create(ctx, f.dw, 8, -1, &o, &p), QMM_ERR_ARG);
    CHECK_STATUS(qmm_pipeline_create(ctx, f.dw, 8, 65, &o, &p), QMM_ERR_ARG);
    CHECK_STATUS(qmm_pipeline_create(ctx, f.dw, 0, 2, &o, &p), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_pipeline_create(ctx, f.dw, -5, 2, &o, &p), QMM_ERR_SHAPE);
    qmm_cuda_options mv = qmm_cuda_options_default();
    mv.path = QMM_PATH_MATVEC; /* the matvec takes at most 16 rows */
    CHECK_STATUS(qmm_pipeline_create(ctx, f.dw, 64, 2, &mv, &p), QMM_ERR_ARG);
    qmm_cuda_options bad_stages = tiled_options();
    bad_stages.stages = 9;
    CHECK_STATUS(qmm_pipeline_create(ctx, f.dw, 8, 2, &bad_stages, &p), QMM_ERR_ARG);
    CHECK(p == NULL);

    CHECK_OK(qmm_pipeline_create(ctx, f.dw, 8, 2, &o, &p));
    if (!p) {
        fixture_free(&f);
        return;
    }
    poison(&f);
    CHECK_STATUS(qmm_pipeline_run(p, NULL, 10, f.c_host, NULL, 0), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_run(p, f.a_host, 10, NULL, NULL, 0), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_run(p, f.a_host, 0, f.c_host, NULL, 0), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_pipeline_run(p, f.a_host, -1, f.c_host, NULL, 0), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_pipeline_run(p, f.a_host, 10, f.c_host, NULL, 12), QMM_ERR_NULL);
    void *ev[12] = {0};
    CHECK_STATUS(qmm_pipeline_run(p, f.a_host, 10, f.c_host, ev, 12), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_run(p, f.a_host, 10, f.c_host, ev, 11), QMM_ERR_SIZE_MISMATCH);
    /* pageable and device memory are refused: nothing would overlap */
    qmm_bf16 *pageable = malloc((size_t)(10 * f.k) * 2);
    test_fill_bf16(pageable, (size_t)(10 * f.k), 1.0);
    CHECK_STATUS(qmm_pipeline_run(p, pageable, 10, f.c_host, NULL, 0), QMM_ERR_ARG);
    CHECK(strstr(qmm_last_error(), "pageable") != NULL);
    CHECK_STATUS(qmm_pipeline_run(p, f.a_host, 10, pageable, NULL, 0), QMM_ERR_ARG);
    CHECK_STATUS(qmm_pipeline_run(p, f.a_dev, 10, f.c_host, NULL, 0), QMM_ERR_ARG);
    CHECK(strstr(qmm_last_error(), "device") != NULL);
    free(pageable);
    int64_t rows[3] = {8, 9, 1};
    CHECK_STATUS(qmm_pipeline_run_rows(p, f.a_host, rows, 3, f.c_host, NULL, 0), QMM_ERR_SHAPE);
    rows[1] = 0;
    CHECK_STATUS(qmm_pipeline_run_rows(p, f.a_host, rows, 3, f.c_host, NULL, 0), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_pipeline_run_rows(p, f.a_host, rows, 0, f.c_host, NULL, 0), QMM_ERR_ARG);
    CHECK_STATUS(qmm_pipeline_run_rows(p, f.a_host, NULL, 3, f.c_host, NULL, 0), QMM_ERR_NULL);
    for (size_t i = 0; i < (size_t)(MAX_ROWS * f.n); i++)
        if (f.c_host[i] != TEST_POISON_BF16) {
            CHECKF(0, "a refused run wrote element %zu", i);
            break;
        }

    /* still usable after refusals */
    qmm_bf16 *ref = malloc((size_t)(10 * f.n) * 2);
    if (reference(&f, 10, &o, ref)) {
        CHECK_OK(qmm_pipeline_run(p, f.a_host, 10, f.c_host, NULL, 0));
        same_as_ref(&f, 10, ref, "after refusals");
    }
    free(ref);
    qmm_pipeline_destroy(p);
    fixture_free(&f);
}

TEST_TABLE(cases, bitwise_grid, uneven_chunks, timeline_respects_plan, auto_options, bad_input);

int main(int argc, char **argv)
{
    test_require_gpu("the chunked pipeline is not tested here");
    ctx = test_gpu_context();
    int rc = test_main(argc, argv, cases, TEST_COUNT(cases));
    qmm_cuda_destroy(ctx);
    return rc;
}
#endif
