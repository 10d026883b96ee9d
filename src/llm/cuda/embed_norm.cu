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

/* The value added to the residual: a bf16 projection as it is; an fp32 one (a tensor-parallel
 * all-reduced sum) rounded to bf16 first, as the single-GPU projection's output is. */
__device__ __forceinline__ float add_value(bf16 a) { return __bfloat162float(a); }
__device__ __forceinline__ float add_value(float a) { return __bfloat162float(__float2bfloat16_rn(a)); }

// x, add are [*, n] (rows row0 + r); h is [m, n]. The general form (any n, any alignment).
template <typename A>
__global__ void add_rmsnorm_kernel(float *__restrict__ x, const A *__restrict__ add,
                                   const bf16 *__restrict__ w, int64_t n, float eps, int row0,
                                   bf16 *__restrict__ h, unsigned long long *stamp)
{
    __shared__ float red[32];
    stamp_start(stamp);
    pdl_wait_trigger(stamp);
    int r = blockIdx.x;
    float *xr = x + (int64_t)(row0 + r) * n;
    const A *ar = add ? add + (int64_t)(row0 + r) * n : nullptr;
    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        float v = xr[j];
        if (ar) {
            v += add_value(ar[j]);
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
    __syncthreads();
    stamp_end(stamp);
}

__device__ __forceinline__ float4 bf16x4_to_float4(uint2 u)
{
    float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.x));
    float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
}

/* four values of add from element 4i on */
__device__ __forceinline__ float4 add_value4(const bf16 *a, int64_t i)
{
    return bf16x4_to_float4(reinterpret_cast<const uint2 *>(a)[i]);
}
__device__ __forceinline__ float4 add_value4(const float *a, int64_t i)
{
    const float4 v = reinterpret_cast<const float4 *>(a)[i];
    return make_float4(add_value(v.x), add_value(v.y), add_value(v.z), add_value(v.w));
}

// The same for n % 4 == 0 and aligned rows: each thread keeps V float4 of the row in registers
// (one read and one write of x), the norm weight is read before the PDL wait.
// ss_out (n % 16 == 0, row0 == 0): the norm is left to the consumer instead (the fused decode
// step's folded RMSNorm, matvec.cu's ss_in): h = bf16(x · w) unscaled and
// ss_out[r · n/16 + i] = Σ x² of elements 16i..16i+15, what the matvec's residual epilogue writes.
template <int V, typename A>
__global__ void __launch_bounds__(1024) /* V = 8 launches 1024 threads: registers capped (spills) */
    add_rmsnorm_vec_kernel(float *__restrict__ x, const A *__restrict__ add,
                                       const bf16 *__restrict__ w, int64_t n, float eps, int row0,
                                       bf16 *__restrict__ h, float *__restrict__ ss_out,
                                       unsigned long long *stamp)
{
    __shared__ float red[32];
    stamp_start(stamp);
    const int64_t n4 = n / 4;
    float4 wv[V], xv[V];
#pragma unroll
    for (int j = 0; j < V; j++) {
        const int64_t i = threadIdx.x + (int64_t)j * blockDim.x;
        if (i < n4) wv[j] = bf16x4_to_float4(reinterpret_cast<const uint2 *>(w)[i]);
    }
    pdl_wait_trigger(stamp);
    const int r = blockIdx.x;
    float4 *xr = reinterpret_cast<float4 *>(x + (int64_t)(row0 + r) * n);
    const A *ar = add ? add + (int64_t)(row0 + r) * n : nullptr;
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < V; j++) {
        const int64_t i = threadIdx.x + (int64_t)j * blockDim.x;
        if (i >= n4) continue;
        float4 v = xr[i];
        if (ar) {
            const float4 a = add_value4(ar, i);
            v.x += a.x, v.y += a.y, v.z += a.z, v.w += a.w;
            xr[i] = v;
        }
        xv[j] = v;
        ss += v.x * v.x;
        ss += v.y * v.y;
        ss += v.z * v.z;
        ss += v.w * v.w;
    }
    float inv = 1.0f;
    if (ss_out) {
        /* a 16-element tile is the float4s of 4 neighbouring lanes (blockDim % 32 == 0) */
#pragma unroll
        for (int j = 0; j < V; j++) {
            const int64_t i = threadIdx.x + (int64_t)j * blockDim.x;
            float t = 0.0f;
            if (i < n4) {
                const float4 v = xv[j];
                t = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
            t += __shfl_xor_sync(0xffffffffu, t, 1);
            t += __shfl_xor_sync(0xffffffffu, t, 2);
            if (i < n4 && i % 4 == 0) ss_out[(int64_t)r * (n / 16) + i / 4] = t;
        }
    } else {
        ss = block_sum(ss, red);
        inv = 1.0f / sqrtf(ss / (float)n + eps);
    }
    uint2 *hr = reinterpret_cast<uint2 *>(h + (int64_t)r * n);
#pragma unroll
    for (int j = 0; j < V; j++) {
        const int64_t i = threadIdx.x + (int64_t)j * blockDim.x;
        if (i >= n4) continue;
        const float4 v = xv[j], g = wv[j];
        __nv_bfloat162 lo = __floats2bfloat162_rn(v.x * inv * g.x, v.y * inv * g.y);
        __nv_bfloat162 hi = __floats2bfloat162_rn(v.z * inv * g.z, v.w * inv * g.w);
        uint2 o;
        o.x = *reinterpret_cast<uint32_t *>(&lo);
        o.y = *reinterpret_cast<uint32_t *>(&hi);
        hr[i] = o;
    }
    __syncthreads();
    stamp_end(stamp);
}

template <typename A>
static cudaError_t add_rmsnorm(float *x, const A *add, const bf16 *w, int64_t n, float eps,
                               int row0, int m, bf16 *h, cudaStream_t stream, const llm_launch *ln,
                               float *ss_out = nullptr)
{
    /* float4 rows of x, 4-element pieces of add (8 or 16 bytes), w and h */
    const bool aligned = (uintptr_t)x % 16 == 0 && (uintptr_t)add % (4 * sizeof(A)) == 0 &&
                         ((uintptr_t)w | (uintptr_t)h) % 8 == 0;
    const int64_t n4 = n / 4;
    cudaError_t e;
    if (n % 4 == 0 && aligned && n4 <= 8 * 1024) {
        const int v = n4 <= 1024 ? 1 : n4 <= 2048 ? 2 : n4 <= 4096 ? 4 : 8;
        const int threads = (int)(((n4 + v - 1) / v + 31) / 32 * 32);
        void (*k)(float *, const A *, const bf16 *, int64_t, float, int, bf16 *, float *,
                  unsigned long long *) = v == 1   ? add_rmsnorm_vec_kernel<1, A>
                                          : v == 2 ? add_rmsnorm_vec_kernel<2, A>
                                          : v == 4 ? add_rmsnorm_vec_kernel<4, A>
                                                   : add_rmsnorm_vec_kernel<8, A>;
        e = llm_launch_kernel(k, dim3(m), dim3(threads), 0, stream, ln, x, add, w, n, eps, row0, h,
                              ss_out, stamp_of(ln));
    } else if (ss_out) {
        return cudaErrorInvalidValue; /* the folded form: aligned rows only (launcher below) */
    } else {
        int threads = n >= 4096 ? 1024 : n >= 1024 ? 512 : 256;
        e = llm_launch_kernel(add_rmsnorm_kernel<A>, dim3(m), dim3(threads), 0, stream, ln, x, add,
                              w, n, eps, row0, h, stamp_of(ln));
    }
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t launch_add_rmsnorm(float *x, const bf16 *add, const bf16 *w, int64_t n, float eps,
                               int row0, int m, bf16 *h, cudaStream_t stream, const llm_launch *ln)
{
    return add_rmsnorm(x, add, w, n, eps, row0, m, h, stream, ln);
}

cudaError_t launch_add_rmsnorm_f32(float *x, const float *add, const bf16 *w, int64_t n, float eps,
                                   int row0, int m, bf16 *h, cudaStream_t stream,
                                   const llm_launch *ln)
{
    return add_rmsnorm(x, add, w, n, eps, row0, m, h, stream, ln);
}

cudaError_t launch_add_norm_fold_f32(float *x, const float *add, const bf16 *w, int64_t n, int m,
                                     bf16 *xg, float *ss_out, cudaStream_t stream,
                                     const llm_launch *ln)
{
    if (!ss_out || !add || m < 1 || n <= 0 || n % 16 || n / 4 > 8 * 1024 || (uintptr_t)x % 16 ||
        (uintptr_t)add % 16 || ((uintptr_t)w | (uintptr_t)xg) % 8)
        return cudaErrorInvalidValue;
    return add_rmsnorm(x, add, w, n, 0.0f, 0, m, xg, stream, ln, ss_out);
}

} // namespace qmm_llm
