/*
 * The decode matvec's launcher (matvec.cu launch_matvec_ex, through llm_op_matvec_fused) on bad
 * arguments: each returns cudaErrorInvalidValue before anything runs (no fault, no sticky error,
 * the poisoned outputs untouched), and a good launch after them still runs and writes.
 * Skips (exit 77) without a GPU or without CUDA in this build.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"

#ifndef QMM_HAVE_CUDA
int main(void) { test_skip_no_gpu("this build has no CUDA backend (nvcc was not found)"); }
#else
#include <cuda_runtime.h>

#include "llm/cuda/ops_entry.h"

enum { M = 2, N = 256, K = 256, N_RAGGED = 200 };

typedef struct bad_case {
    const char *what;
    int ragged, m, epi, a_off, null_c, null_x, null_gamma, norm_dim, shape;
    int64_t lda, ldc;
} bad_case;

/* One field off a good store launch (m = 2, N = K = 256) each; shape = 16·R + C (+ 1024: the
 * staging in rounds). */
static const bad_case bad[] = {
    {"m = 0", 0, 0, 0, 0, 0, 0, 0, 0, 0, K, N},
    {"m = 17", 0, 17, 0, 0, 0, 0, 0, 0, 0, K, N},
    {"epilogue 4 (none such)", 0, M, 4, 0, 0, 0, 0, 0, 0, K, N},
    {"fp32 store without x", 0, M, 3, 0, 0, 1, 0, 0, 0, K, N},
    {"activations 2-byte aligned", 0, M, 0, 1, 0, 0, 0, 0, 0, K, N},
    {"lda < K", 0, M, 0, 0, 0, 0, 0, 0, 0, K - 8, N},
    {"lda not a multiple of 8", 0, M, 0, 0, 0, 0, 0, 0, 0, K + 4, N},
    {"ldc < N", 0, M, 0, 0, 0, 0, 0, 0, 0, K, N - 1},
    {"store to NULL", 0, M, 0, 0, 1, 0, 0, 0, 0, K, N},
    {"residual without x", 0, M, 1, 0, 0, 1, 0, 0, 0, K, N},
    {"residual xg without gamma", 0, M, 1, 0, 0, 0, 1, 0, 0, K, N},
    {"norm width 0", 0, M, 0, 0, 0, 0, 0, -1, 0, K, N},
    {"SwiGLU of N = 200", 1, M, 2, 0, 0, 0, 0, 0, 0, K, N_RAGGED / 2},
    {"SwiGLU with R = 1", 0, M, 2, 0, 0, 0, 0, 0, 16 + 1, K, N / 2},
    {"R = 3", 0, M, 0, 0, 0, 0, 0, 0, 48 + 1, K, N},
    {"C = 3", 0, M, 0, 0, 0, 0, 0, 0, 16 + 3, K, N},
    {"C = 4 over 2 groups", 0, M, 0, 0, 0, 0, 0, 0, 16 + 4, K, N},
    {"R = 3, staged in rounds", 0, M, 0, 0, 0, 0, 0, 0, 1024 + 48 + 1, K, N},
    {"SwiGLU with R = 1, staged in rounds", 0, M, 2, 0, 0, 0, 0, 0, 1024 + 16 + 1, K, N / 2},
};

static void *dev(size_t bytes, int fill)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return NULL;
    cudaMemset(p, fill, bytes);
    return p;
}

/* The device buffers of the cases: activations 16 bytes longer (a + 1 element is misaligned),
 * outputs poisoned with 0xFF bytes. */
typedef struct bufs {
    unsigned char *a;
    void *c, *gamma, *xg;
    float *x, *ss, *ss_in;
} bufs;

static void run_cases(qmm_cuda_ctx *ctx, qmm_cuda_weight *cw, qmm_cuda_weight *cwr, const bufs *d)
{
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        const bad_case *b = &bad[i];
        const void *a = (const qmm_bf16 *)d->a + b->a_off;
        int e = llm_op_matvec_fused(ctx, b->ragged ? cwr : cw, b->m, b->epi, a, b->lda,
                                    b->null_c ? NULL : d->c, b->ldc, b->null_x ? NULL : d->x,
                                    b->null_gamma ? NULL : d->gamma, d->xg, d->ss,
                                    b->norm_dim ? d->ss_in : NULL, 16, b->norm_dim < 0 ? 0 : K,
                                    1e-6f, b->shape);
        CHECKF(e == cudaErrorInvalidValue, "%s: launcher returned %d, want %d", b->what, e,
               (int)cudaErrorInvalidValue);
        cudaError_t s = cudaDeviceSynchronize();
        CHECKF(s == cudaSuccess, "%s: %s after the refused launch", b->what, cudaGetErrorString(s));
    }
    /* nothing written by the refused launches */
    static uint16_t hc[M * N];
    static uint32_t hx[M * N];
    cudaMemcpy(hc, d->c, sizeof hc, cudaMemcpyDeviceToHost);
    cudaMemcpy(hx, d->x, sizeof hx, cudaMemcpyDeviceToHost);
    int touched = 0;
    for (int i = 0; i < M * N; i++) touched += hc[i] != 0xFFFF || hx[i] != 0xFFFFFFFFu;
    CHECKF(touched == 0, "%d outputs written by refused launches", touched);
    /* the good launch still runs and writes every output */
    int e = llm_op_matvec_fused(ctx, cw, M, 0, d->a, K, d->c, N, NULL, NULL, NULL, NULL, NULL, 0,
                                0, 0.f, 0);
    CHECKF(e == cudaSuccess, "good launch: %d", e);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    cudaMemcpy(hc, d->c, sizeof hc, cudaMemcpyDeviceToHost);
    int poisoned = 0;
    for (int i = 0; i < M * N; i++) poisoned += hc[i] == 0xFFFF;
    CHECKF(poisoned == 0, "good launch left %d outputs poisoned", poisoned);
}

static void bad_arguments_fail_cleanly(void)
{
    qmm_cuda_ctx *ctx = test_gpu_context();
    qmm_w4 w, wr;
    CHECK_OK(qmm_w4_alloc(N, K, &w));
    CHECK_OK(qmm_w4_alloc(N_RAGGED, K, &wr));
    test_random_w4(&w, 0.002, 0.02);
    test_random_w4(&wr, 0.002, 0.02);
    qmm_cuda_weight *cw = NULL, *cwr = NULL;
    CHECK_OK(qmm_cuda_weight_upload(ctx, &w, &cw));
    CHECK_OK(qmm_cuda_weight_upload(ctx, &wr, &cwr));
    static qmm_bf16 ha[M * K];
    test_fill_bf16(ha, M * K, 1.0);
    bufs d = {dev(M * K * 2 + 16, 0), dev(M * N * 2, 0xFF), dev(N * 2, 0), dev(M * N * 2, 0xFF),
              dev(M * N * 4, 0xFF), dev(M * 16 * 4, 0xFF), dev(M * 16 * 4, 0)};
    const int ok = d.a && d.c && d.gamma && d.xg && d.x && d.ss && d.ss_in && cw && cwr;
    CHECKF(ok, "device allocations or uploads failed");
    if (ok) {
        cudaMemcpy(d.a, ha, sizeof ha, cudaMemcpyHostToDevice);
        run_cases(ctx, cw, cwr, &d);
    }
    cudaFree(d.a), cudaFree(d.c), cudaFree(d.gamma), cudaFree(d.xg), cudaFree(d.x);
    cudaFree(d.ss), cudaFree(d.ss_in);
    qmm_cuda_weight_free(cw);
    qmm_cuda_weight_free(cwr);
    qmm_w4_free(&w);
    qmm_w4_free(&wr);
    qmm_cuda_destroy(ctx);
}

TEST_GPU_MAIN("the matvec launcher's argument checks are not tested here", bad_arguments_fail_cleanly)
#endif
