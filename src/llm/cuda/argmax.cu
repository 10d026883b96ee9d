/* Greedy argmax over the logits in two stages: many blocks each reduce a slice to a
 * (value, index) pair, one small block reduces the pairs, writes the next token and advances the
 * device position. Ties keep the lowest index and NaN never wins (as qmm_llm_argmax), whatever
 * the order in which pairs meet, so the result is the one-block argmax's, bit for bit. */
#include <math.h>

#include "llm/cuda/llm_kernels.cuh"
#include "llm/cuda/pdl.cuh"

namespace qmm_llm {

constexpr int AM_THREADS = 256, AM_VEC = 8, AM_PER_BLOCK = AM_THREADS * AM_VEC; /* one 16-byte load a thread */

/* (value, index) a beats b: b is empty (index -1), or a is larger, or equal with a lower index. */
__device__ __forceinline__ bool am_beats(float av, int ai, float bv, int bi)
{
    if (ai < 0) return false;
    if (bi < 0) return true;
    return av > bv || (av == bv && ai < bi);
}

__device__ __forceinline__ void am_take(float v, int i, float *best, int *bi)
{
    if (v == v && (*bi < 0 || v > *best)) *best = v, *bi = i; /* ascending i: ties keep the first */
}

/* The block's best pair into (*bv, *bi) of thread 0. */
__device__ __forceinline__ void am_block_reduce(float *best, int *bi)
{
    __shared__ float sv[AM_THREADS / 32];
    __shared__ int si[AM_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, *best, o);
        int oi = __shfl_xor_sync(0xffffffffu, *bi, o);
        if (am_beats(ov, oi, *best, *bi)) *best = ov, *bi = oi;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) sv[warp] = *best, si[warp] = *bi;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < AM_THREADS / 32; w++)
            if (am_beats(sv[w], si[w], *best, *bi)) *best = sv[w], *bi = si[w];
}

// logits [vocab] (16-byte aligned); pair_v, pair_i [gridDim.x]: block b reduces
// [b * AM_PER_BLOCK, (b + 1) * AM_PER_BLOCK)
__global__ void __launch_bounds__(AM_THREADS)
    argmax_partial_kernel(const bf16 *__restrict__ logits, int64_t vocab, float *__restrict__ pair_v,
                          int *__restrict__ pair_i, unsigned long long *stamp)
{
    stamp_start(stamp);
    pdl_wait_trigger(stamp);
    const int64_t lo = (int64_t)blockIdx.x * AM_PER_BLOCK;
    const int64_t hi = min(vocab, lo + AM_PER_BLOCK);
    float best = -INFINITY;
    int bi = -1;
    for (int64_t i0 = lo + (int64_t)threadIdx.x * AM_VEC; i0 < hi; i0 += AM_THREADS * AM_VEC) {
        if (i0 + AM_VEC <= hi) {
            const uint4 u = *reinterpret_cast<const uint4 *>(logits + i0);
            const __nv_bfloat162 *h2 = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float2 f = __bfloat1622float2(h2[e]);
                am_take(f.x, (int)(i0 + 2 * e), &best, &bi);
                am_take(f.y, (int)(i0 + 2 * e + 1), &best, &bi);
            }
        } else {
            for (int64_t i = i0; i < hi; i++) am_take(__bfloat162float(logits[i]), (int)i, &best, &bi);
        }
    }
    am_block_reduce(&best, &bi);
    if (threadIdx.x == 0) {
        pair_v[blockIdx.x] = best;
        pair_i[blockIdx.x] = bi;
    }
    __syncthreads();
    stamp_end(stamp);
}

// pairs [n]; tokens [max_seq + 1]; one block
__global__ void __launch_bounds__(AM_THREADS)
    argmax_finish_kernel(const float *__restrict__ pair_v, const int *__restrict__ pair_i, int n,
                         int32_t *tokens, int32_t *pos, int m, int32_t *err,
                         unsigned long long *stamp)
{
    stamp_start(stamp);
    pdl_wait_trigger(stamp);
    float best = -INFINITY;
    int bi = -1;
    for (int i = threadIdx.x; i < n; i += AM_THREADS)
        if (am_beats(pair_v[i], pair_i[i], best, bi)) best = pair_v[i], bi = pair_i[i];
    am_block_reduce(&best, &bi);
    if (threadIdx.x == 0) {
        const int p = *pos;
        if (bi < 0) {
            *err = 2;
            bi = 0;
        }
        tokens[p + m] = bi;
        *pos = p + m;
    }
    __syncthreads();
    stamp_end(stamp);
}

int argmax_blocks(int64_t vocab) { return (int)((vocab + AM_PER_BLOCK - 1) / AM_PER_BLOCK); }

cudaError_t launch_argmax_partial(const bf16 *logits, int64_t vocab, float *pair_v, int *pair_i,
                                  cudaStream_t stream, const llm_launch *ln)
{
    if (vocab < 1 || vocab > INT32_MAX || ((uintptr_t)logits & 15)) return cudaErrorInvalidValue;
    cudaError_t e = llm_launch_kernel(argmax_partial_kernel, dim3(argmax_blocks(vocab)),
                                      dim3(AM_THREADS), 0, stream, ln, logits, vocab, pair_v,
                                      pair_i, stamp_of(ln));
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t launch_argmax_finish(const float *pair_v, const int *pair_i, int n, int32_t *tokens,
                                 int32_t *pos, int m, int32_t *err, cudaStream_t stream,
                                 const llm_launch *ln)
{
    if (n < 1) return cudaErrorInvalidValue;
    cudaError_t e = llm_launch_kernel(argmax_finish_kernel, dim3(1), dim3(AM_THREADS), 0, stream,
                                      ln, pair_v, pair_i, n, tokens, pos, m, err, stamp_of(ln));
    return e != cudaSuccess ? e : cudaGetLastError();
}

} // namespace qmm_llm
