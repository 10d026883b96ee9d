/*
 * GPU reliability (issue 17): device out-of-memory and concurrency.
 *   oom_*: most of the device memory is taken first (a "hog" of cudaMalloc blocks leaving a chosen
 *     margin free); then a weight upload, a chunked pipeline (its workspace and slots) and a Qwen3
 *     session are created with too little room. Each must fail with QMM_ERR_NOMEM and free
 *     everything it took: after the hog is released, cudaMemGetInfo reports the free memory of
 *     before (within 2 MiB). Margins sweep the range, so the failure hits every allocation of the
 *     sequence; a margin that suffices must give a working object (checked against the CPU).
 *   two_threads_*: two host threads, each with its own context and stream, run matmuls (every path)
 *     and Qwen3 sessions at the same time; every result must equal, bit for bit, the same work
 *     run alone first (and the matmuls the fp64 reference within 1e-2).
 * Skips (exit 77) without CUDA or a GPU.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifndef QMM_HAVE_CUDA
int main(void) { test_skip_no_gpu("this build has no CUDA backend (nvcc was not found)"); }
#else
#include <cuda_runtime.h>

#define MIB ((size_t)1 << 20)

static size_t free_bytes(void)
{
    size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    return f;
}

/* Take device memory until at most `leave` bytes are free: blocks of 1 GiB, then 64 MiB, 2 MiB. */
typedef struct hog {
    void *p[4096];
    int n;
} hog;

static void hog_take(hog *h, size_t leave)
{
    h->n = 0;
    const size_t steps[] = {(size_t)1 << 30, 64 * MIB, 2 * MIB};
    for (int s = 0; s < 3; s++)
        while (h->n < 4096 && free_bytes() > leave + steps[s]) {
            if (cudaMalloc(&h->p[h->n], steps[s]) != cudaSuccess) {
                cudaGetLastError();
                break;
            }
            h->n++;
        }
}

static void hog_release(hog *h)
{
    for (int i = 0; i < h->n; i++) cudaFree(h->p[i]);
    h->n = 0;
    cudaDeviceSynchronize();
}

/* After a failed or destroyed attempt, the free memory must be back to `before`. */
static void check_no_leak(size_t before, const char *what, size_t margin)
{
    size_t after = free_bytes();
    CHECKF(after + 2 * MIB >= before, "%s (margin %zu MiB): %zu MiB of device memory not freed",
           what, margin / MIB, (before - after) / MIB);
}

/* ---- out of memory ---- */

/* What an attempt works on (each kind uses its part). */
typedef struct attempt_args {
    qmm_cuda_ctx *ctx;
    const qmm_w4 *w;                /* upload */
    const qmm_cuda_weight *dw;      /* pipeline */
    const qmm_llm_model *m;         /* session: the model, its options, */
    const qmm_llm_cuda_options *o;
    const int32_t *ids, *want;      /* 4 prompt ids, the 4 tokens of a session with room */
} attempt_args;

/* One attempt under memory pressure: its status; what it made (on QMM_OK) it checks and frees. */
typedef qmm_status (*attempt_fn)(const attempt_args *t);

/* For margins 0, step, ..., (count - 1) * step: take all device memory but the margin, attempt,
 * release. Each attempt succeeds or fails with QMM_ERR_NOMEM (both must happen), and the free
 * memory returns to what it was before the sweep. */
static void oom_sweep(const char *what, size_t step, int count, attempt_fn attempt,
                      const attempt_args *arg)
{
    size_t before = free_bytes();
    int nomem = 0, ok = 0;
    for (int i = 0; i < count; i++) {
        size_t margin = step * (size_t)i;
        hog h;
        hog_take(&h, margin);
        qmm_status st = attempt(arg);
        CHECKF(st == QMM_OK || st == QMM_ERR_NOMEM, "%s, margin %zu MiB: %s (%s)", what,
               margin / MIB, qmm_status_name(st), qmm_last_error());
        nomem += st == QMM_ERR_NOMEM, ok += st == QMM_OK;
        hog_release(&h);
        check_no_leak(before, what, margin);
    }
    printf("    %s: %d margins out of memory, %d fitted\n", what, nomem, ok);
    CHECK(nomem > 0 && ok > 0);
}

/* A context on GPU 0 and a random n x k weight in w; NULL (a failed case, nothing left to free)
 * when either cannot be made. */
static qmm_cuda_ctx *context_and_weight(qmm_w4 *w, int64_t n, int64_t k)
{
    qmm_cuda_ctx *ctx = NULL;
    CHECK_OK(qmm_cuda_create(0, NULL, &ctx));
    if (ctx && qmm_w4_alloc(n, k, w) != QMM_OK) {
        test_fail(__FILE__, __LINE__, "qmm_w4_alloc: %s", qmm_last_error());
        qmm_cuda_destroy(ctx);
        return NULL;
    }
    if (ctx) test_random_w4(w, 0.01, 0.02);
    return ctx;
}

static qmm_status try_upload(const attempt_args *t)
{
    qmm_cuda_weight *dw = (qmm_cuda_weight *)0x1;
    qmm_status st = qmm_cuda_weight_upload(t->ctx, t->w, &dw);
    if (st == QMM_ERR_NOMEM) CHECK(dw == NULL || dw == (qmm_cuda_weight *)0x1);
    if (st == QMM_OK) qmm_cuda_weight_free(dw);
    return st;
}

static void oom_weight_upload(void)
{
    qmm_w4 w; /* 32 MiB of codes + 1 MiB of scales and biases */
    qmm_cuda_ctx *ctx = context_and_weight(&w, 8192, 8192);
    if (!ctx) return;
    attempt_args t = {.ctx = ctx, .w = &w};
    oom_sweep("weight upload of 33 MiB", 4 * MIB, 17, try_upload, &t); /* margins up to 64 MiB */
    /* the context still works */
    qmm_cuda_weight *dw = NULL;
    CHECK_OK(qmm_cuda_weight_upload(ctx, &w, &dw));
    qmm_cuda_weight_free(dw);
    qmm_w4_free(&w);
    qmm_cuda_destroy(ctx);
}

static qmm_status try_pipeline(const attempt_args *t)
{
    qmm_pipeline *p = NULL;
    qmm_status st = qmm_pipeline_create(t->ctx, t->dw, 4096, 4, NULL, &p);
    qmm_pipeline_destroy(p);
    return st;
}

static void oom_pipeline_workspace(void)
{
    qmm_w4 w;
    qmm_cuda_ctx *ctx = context_and_weight(&w, 4096, 4096);
    if (!ctx) return;
    qmm_cuda_weight *dw = NULL;
    CHECK_OK(qmm_cuda_weight_upload(ctx, &w, &dw));
    /* 4 slots of 4096 rows x (K + N) bf16 = 256 MiB, plus a split-K/dense workspace; margins up
     * to 512 MiB */
    attempt_args t = {.ctx = ctx, .dw = dw};
    oom_sweep("pipeline of 4 x 4096 rows", 32 * MIB, 17, try_pipeline, &t);
    qmm_cuda_weight_free(dw);
    qmm_w4_free(&w);
    qmm_cuda_destroy(ctx);
}

static qmm_status try_session(const attempt_args *t)
{
    qmm_llm_cuda_session *s = NULL;
    qmm_status st = qmm_llm_cuda_session_create(t->m, 4096, t->o, &s);
    if (st == QMM_ERR_NOMEM) CHECK(s == NULL);
    if (st == QMM_OK) {
        int32_t got[4];
        memset(got, 0xA5, sizeof got);
        CHECK_OK(qmm_llm_cuda_generate(s, t->ids, 4, 4, got, NULL));
        CHECK(!memcmp(got, t->want, sizeof got));
    }
    qmm_llm_cuda_session_destroy(s);
    return st;
}

static void oom_session(void)
{
    qmm_llm_config c;
    CHECK_OK(qmm_llm_config_preset("qwen3-0.6b", &c));
    qmm_llm_model *m = NULL;
    CHECK_OK(qmm_llm_model_synthetic(&c, 11, &m));
    if (!m) return;
    const int32_t ids[4] = {1, 2, 3, 4};
    int32_t want[4];
    /* the tokens of a session with room, first */
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    qmm_llm_cuda_session *s = NULL;
    size_t before = free_bytes();
    CHECK_OK(qmm_llm_cuda_session_create(m, 4096, &o, &s));
    size_t need = before - free_bytes();
    if (s) CHECK_OK(qmm_llm_cuda_generate(s, ids, 4, 4, want, NULL));
    qmm_llm_cuda_session_destroy(s);
    cudaDeviceSynchronize();
    printf("    a qwen3-0.6b session of 4096 positions takes %zu MiB\n", need / MIB);
    attempt_args t = {.m = m, .o = &o, .ids = ids, .want = want};
    oom_sweep("session", need / 10, 13, try_session, &t); /* 0 .. 120 % of what it needs */
    qmm_llm_model_destroy(m);
}

/* ---- two threads ---- */

typedef struct job {
    int id;
    const qmm_llm_model *model;
    qmm_w4 *w;                   /* shared host weight (read only) */
    const qmm_bf16 *a;           /* [256, K] host activations */
    qmm_bf16 *c[4];              /* results of the 4 paths, [256, N] each */
    int32_t tokens[24];
    int iters;
    char err[512];
} job;

#define JN 3072
#define JK 4096
#define JM 256

static void *job_run(void *arg)
{
    job *j = arg;
    cudaStream_t stream;
    qmm_cuda_ctx *ctx = NULL;
    qmm_cuda_weight *dw = NULL;
    qmm_bf16 *a_dev = NULL, *c_dev = NULL;
    void *ws = NULL;
    qmm_llm_cuda_session *s = NULL;
    const qmm_path paths[4] = {QMM_PATH_MATVEC, QMM_PATH_TILED, QMM_PATH_SPLITK, QMM_PATH_DENSE};
    const int64_t ms[4] = {4, 200, 48, 256};
    qmm_status st = QMM_OK;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        snprintf(j->err, sizeof j->err, "stream");
        return NULL;
    }
    st = qmm_cuda_create(0, stream, &ctx);
    if (!st) st = qmm_cuda_weight_upload(ctx, j->w, &dw);
    size_t ws_bytes = (size_t)JN * JK * 2 + ((size_t)64 << 20);
    if (!st && (cudaMalloc((void **)&a_dev, (size_t)JM * JK * 2) != cudaSuccess ||
                cudaMalloc((void **)&c_dev, (size_t)JM * JN * 2) != cudaSuccess ||
                cudaMalloc(&ws, ws_bytes) != cudaSuccess))
        st = QMM_ERR_NOMEM;
    if (!st) cudaMemcpyAsync(a_dev, j->a, (size_t)JM * JK * 2, cudaMemcpyHostToDevice, stream);
    for (int it = 0; it < j->iters && !st; it++)
        for (int p = 0; p < 4 && !st; p++) {
            qmm_cuda_options o = qmm_cuda_options_default();
            o.path = paths[p];
            if (paths[p] == QMM_PATH_SPLITK) o.split = 4; /* a real split, whatever the plan */
            cudaMemsetAsync(c_dev, 0xFF, (size_t)JM * JN * 2, stream); /* NaN poison */
            st = qmm_cuda_matmul(ctx, a_dev, ms[p], dw, c_dev, ws, ws_bytes, &o, NULL);
            if (!st && it == j->iters - 1)
                cudaMemcpyAsync(j->c[p], c_dev, (size_t)ms[p] * JN * 2, cudaMemcpyDeviceToHost,
                                stream);
            if (!st && cudaStreamSynchronize(stream) != cudaSuccess) st = QMM_ERR_CUDA;
        }
    /* then a session on the same thread, while the other thread does the same */
    const int32_t ids[8] = {5, 9, 2, 7, 1, 3, 3, 8};
    qmm_llm_cuda_options lo = qmm_llm_cuda_options_default();
    if (!st) st = qmm_llm_cuda_session_create(j->model, 64, &lo, &s);
    for (int it = 0; it < j->iters && !st; it++) {
        st = qmm_llm_cuda_generate(s, ids, 8, 24, j->tokens, NULL);
        if (!st) st = qmm_llm_cuda_reset(s);
    }
    if (st) snprintf(j->err, sizeof j->err, "%s: %s", qmm_status_name(st), qmm_last_error());
    qmm_llm_cuda_session_destroy(s);
    cudaFree(a_dev);
    cudaFree(c_dev);
    cudaFree(ws);
    qmm_cuda_weight_free(dw);
    qmm_cuda_destroy(ctx);
    cudaStreamDestroy(stream);
    return NULL;
}

static void job_init(job *j, int id, const qmm_llm_model *m, qmm_w4 *w, const qmm_bf16 *a, int it)
{
    memset(j, 0, sizeof *j);
    j->id = id;
    j->model = m;
    j->w = w;
    j->a = a;
    j->iters = it;
    for (int p = 0; p < 4; p++) j->c[p] = calloc((size_t)JM * JN, 2);
}

static void job_free(job *j)
{
    for (int p = 0; p < 4; p++) free(j->c[p]);
}

static void two_threads_matmuls_and_sessions(void)
{
    static const qmm_llm_config small = {512, 1024, 2, 8, 2, 64, 2000, 256, 1e6, 1e-6, 1, 128};
    qmm_llm_model *m = NULL;
    CHECK_OK(qmm_llm_model_synthetic(&small, 3, &m));
    qmm_w4 w[2];
    qmm_bf16 *a[2];
    for (int t = 0; t < 2; t++) {
        CHECK_OK(qmm_w4_alloc(JN, JK, &w[t]));
        test_random_w4(&w[t], 0.002, 0.02);
        a[t] = malloc((size_t)JM * JK * 2);
        test_fill_bf16(a[t], (size_t)JM * JK, 1.0);
    }
    /* alone first: the reference results */
    job alone[2], both[2];
    for (int t = 0; t < 2; t++) {
        job_init(&alone[t], t, m, &w[t], a[t], 1);
        job_run(&alone[t]);
        CHECKF(!alone[t].err[0], "alone %d: %s", t, alone[t].err);
    }
    /* fp64 check of the alone results (sampled rows) */
    const int64_t ms[4] = {4, 200, 48, 256};
    for (int t = 0; t < 2; t++)
        for (int p = 0; p < 4; p++) {
            double *ref = malloc(sizeof(double) * 4 * JN);
            int64_t rows[4] = {0, 1, ms[p] / 2, ms[p] - 1};
            qmm_bf16 *asub = malloc((size_t)4 * JK * 2), *csub = malloc((size_t)4 * JN * 2);
            for (int r = 0; r < 4; r++) {
                memcpy(asub + r * JK, a[t] + rows[r] * JK, (size_t)JK * 2);
                memcpy(csub + r * JN, alone[t].c[p] + rows[r] * JN, (size_t)JN * 2);
            }
            test_matmul_f64(asub, 4, &w[t], ref);
            double e = test_rel_frob_bf16(csub, ref, (size_t)4 * JN);
            CHECKF(e <= 1e-2, "thread %d path %d: rel err %.3g", t, p, e);
            free(ref);
            free(asub);
            free(csub);
        }
    /* then both at once, several iterations each */
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        job_init(&both[t], t, m, &w[t], a[t], 20);
        pthread_create(&th[t], NULL, job_run, &both[t]);
    }
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++) {
        CHECKF(!both[t].err[0], "thread %d: %s", t, both[t].err);
        for (int p = 0; p < 4; p++)
            CHECKF(!memcmp(both[t].c[p], alone[t].c[p], (size_t)ms[p] * JN * 2),
                   "thread %d, path %d: differs from the run alone", t, p);
        CHECKF(!memcmp(both[t].tokens, alone[t].tokens, sizeof both[t].tokens),
               "thread %d: session tokens differ from the run alone", t);
    }
    CHECK(!memcmp(alone[0].tokens, alone[1].tokens, sizeof alone[0].tokens));
    for (int t = 0; t < 2; t++) {
        job_free(&alone[t]);
        job_free(&both[t]);
        qmm_w4_free(&w[t]);
        free(a[t]);
    }
    qmm_llm_model_destroy(m);
}

TEST_GPU_MAIN("the GPU reliability cases are not run here", oom_weight_upload,
              oom_pipeline_workspace, oom_session, two_threads_matmuls_and_sessions)
#endif
