/* `qmm bench ops`: the dense peer, cuBLAS bf16 GEMM on the dequantized weights. */
#ifdef QMM_HAVE_CUDA

#include <limits.h>

#include "bench_gpu.h"

/* cuBLAS asks for 32 MiB on Hopper; twice that leaves no reason for it to want more. */
#define CUBLAS_WS_BYTES ((size_t)64 << 20)

void bench_cublas_check(cublasStatus_t s, const char *call, const char *file, int line)
{
    if (s != CUBLAS_STATUS_SUCCESS) bench_die(call, cublasGetStatusString(s), file, line);
}

void bench_cublas_init(bench_cublas *b, cudaStream_t s)
{
    CKB(cublasCreate(&b->h));
    /* cublasSetStream resets the workspace to cuBLAS's own pool, so the stream goes first. A
     * user workspace keeps cuBLAS from allocating while a graph is being captured. */
    CKB(cublasSetStream(b->h, s));
    b->ws_bytes = CUBLAS_WS_BYTES;
    CK(cudaMalloc(&b->ws, b->ws_bytes));
    CKB(cublasSetWorkspace(b->h, b->ws, b->ws_bytes));
    CKB(cublasGetVersion(b->h, &b->version));
}

void bench_cublas_destroy(bench_cublas *b)
{
    if (b->h) CKB(cublasDestroy(b->h));
    if (b->ws) CK(cudaFree(b->ws));
    b->h = NULL;
    b->ws = NULL;
}

/* Row-major C[M, N] = A[M, K] · W[N, K]ᵀ seen column-major: C is Cᵀ [N, M] (ld N), A is Aᵀ
 * [K, M] (ld K), W is Wᵀ [K, N] (ld K). So Cᵀ = W · Aᵀ = op(Wᵀ) · Aᵀ with op = transpose:
 * gemm(T, N, m=N, n=M, k=K, W ld K, A ld K, C ld N). The benchmark checks the result against
 * the CPU before timing, so a wrong mapping cannot pass unseen. */
cublasStatus_t bench_cublas_matmul(bench_cublas *b, const void *a, int64_t m, const void *w,
                                   int64_t n, int64_t k, void *c)
{
    if (m < 1 || n < 1 || k < 1 || m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return CUBLAS_STATUS_INVALID_VALUE;
    const float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(b->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, w,
                        CUDA_R_16BF, (int)k, a, CUDA_R_16BF, (int)k, &zero, c, CUDA_R_16BF,
                        (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

#else
typedef int bench_cublas_unused; /* CUDA builds only */
#endif
