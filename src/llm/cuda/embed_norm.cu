/* Embedding lookup (W4 rows dequantized) and the fused residual add + RMSNorm. */
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

// x is [m, hidden]; embedding [vocab, hidden] as packed [vocab, hidden/8], scales/biases
// [vocab, hidden/128]
__global__ void embed_kernel(const uint32_t *__restrict__ packed, const bf16 *__restrict__ scales,
                             const bf16 *__restrict__ biases, int64_t vocab, int64_t hidden,
                             const int32_t *__restrict__ tokens, const int32_t *__restrict__ pos,
                             float *__restrict__ x, int32_t *err)
{
    int r = blockIdx.x;
    int64_t id = tokens[*pos + r];
    if (id < 0 || id >= vocab) {
        if (threadIdx.x == 0) *err = 1;
        id = 0;
    }
    const uint32_t *words = packed + id * (hidden / 8);
    const bf16 *s = scales + id * (hidden / 128), *b = biases + id * (hidden / 128);
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
        uint32_t q = (words[j / 8] >> (4 * (j % 8))) & 0xFu;
        /* as qmm_dequantize_row_f32: fmaf(scale, q, bias) */
        x[(int64_t)r * hidden + j] =
            __fmaf_rn(__bfloat162float(s[j / 128]), (float)q, __bfloat162float(b[j / 128]));
    }
}

cudaError_t launch_embed(const uint32_t *packed, const bf16 *scales, const bf16 *biases,
                         int64_t vocab, int64_t hidden, const int32_t *tokens, const int32_t *pos,
                         int m, float *x, int32_t *err, cudaStream_t stream)
{
    embed_kernel<<<m, 256, 0, stream>>>(packed, scales, biases, vocab, hidden, tokens, pos, x, err);
    return cudaGetLastError();
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
