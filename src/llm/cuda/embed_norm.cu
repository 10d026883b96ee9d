/* Embedding lookup (rows of the uploaded W4 dequantized by the library) and the fused residual
 * add + RMSNorm. */
#include "cuda/kernels.h"
#include "llm/cuda/llm_kernels.cuh"

namespace qmm_llm {

/* Block reduction of a float sum (blockDim.x a multiple of 32, <= 1024). */
__device__ __forceinline__ float block_sum(float v, float *red)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads(); /* red may still be read by a previous call */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = 0.0f;
    for (int i = 0; i < warps; i++) t += red[i]; /* same order in every thread */
    return t;
}

cudaError_t launch_embed(const qmm_cuda_weight *embed, const int32_t *tokens, const int32_t *pos,
                         int m, float *x, int32_t *err, cudaStream_t stream)
{
    return qmm::launch_dequant_rows(qmm::weight_dev(embed), tokens, pos, m, x, err, stream);
}

// x, add are [*, n] (rows row0 + r); h is [m, n]
__global__ void add_rmsnorm_kernel(float *__restrict__ x, const bf16 *__restrict__ add,
                                   const bf16 *__restrict__ w, int64_t n, float eps, int row0,
                                   bf16 *__restrict__ h)
{
    __shared__ float red[32];
    int r = blockIdx.x;
    float *xr = x + (int64_t)(row0 + r) * n;
    const bf16 *ar = add ? add + (int64_t)(row0 + r) * n : nullptr;
    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        float v = xr[j];
        if (ar) {
            v += __bfloat162float(ar[j]);
            xr[j] = v;
        }
        ss += v * v;
    }
    ss = block_sum(ss, red);
    /* as llm_rmsnorm_row: 1 / sqrtf(mean + eps), then x * inv * w */
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    bf16 *hr = h + (int64_t)r * n;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        hr[j] = __float2bfloat16_rn(xr[j] * inv * __bfloat162float(w[j]));
}

cudaError_t launch_add_rmsnorm(float *x, const bf16 *add, const bf16 *w, int64_t n, float eps,
                               int row0, int m, bf16 *h, cudaStream_t stream)
{
    int threads = n >= 4096 ? 1024 : n >= 1024 ? 512 : 256;
    add_rmsnorm_kernel<<<m, threads, 0, stream>>>(x, add, w, n, eps, row0, h);
    return cudaGetLastError();
}

} // namespace qmm_llm
