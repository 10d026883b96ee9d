/* SwiGLU, and the one-block greedy argmax that also advances the device-side position (the
 * forward now runs the two-stage argmax of argmax.cu; this one stays as its reference). */
#include <math.h>

#include "llm/cuda/llm_kernels.cuh"

namespace qmm_llm {

// gate, up are [rows, width] with rows in_stride apart; out is [rows, width]
/* Column of element c of a row: c, or with gate and up interleaved in chunks, its place in the
 * chunk pairs (up is gate + chunk). */
__device__ __forceinline__ int64_t gu_col(int64_t c, int64_t chunk)
{
    return chunk ? (c / chunk) * 2 * chunk + c % chunk : c;
}

__global__ void swiglu_kernel(const bf16 *gate, const bf16 *up, int64_t rows, int64_t width,
                              int64_t in_stride, int64_t chunk, bf16 *out, unsigned long long *stamp)
{
    stamp_start(stamp);
    pdl_wait_trigger(stamp);
    int64_t n = rows * width;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / width, c = gu_col(i % width, chunk);
        float g = __bfloat162float(gate[r * in_stride + c]), u = __bfloat162float(up[r * in_stride + c]);
        /* as llm_swiglu: g / (1 + exp(-g)) * u */
        out[i] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
    }
    __syncthreads();
    stamp_end(stamp);
}

// The same, 8 elements (16 bytes) a thread: width and in_stride multiples of 8, aligned buffers.
__global__ void swiglu_vec_kernel(const bf16 *gate, const bf16 *up, int64_t rows, int64_t width,
                                  int64_t in_stride, int64_t chunk, bf16 *out,
                                  unsigned long long *stamp)
{
    stamp_start(stamp);
    pdl_wait_trigger(stamp);
    const int64_t n8 = rows * width / 8;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = i * 8, r = e / width, c = gu_col(e % width, chunk);
        const uint4 gu = *reinterpret_cast<const uint4 *>(gate + r * in_stride + c);
        const uint4 uu = *reinterpret_cast<const uint4 *>(up + r * in_stride + c);
        const __nv_bfloat162 *g2 = reinterpret_cast<const __nv_bfloat162 *>(&gu);
        const __nv_bfloat162 *u2 = reinterpret_cast<const __nv_bfloat162 *>(&uu);
        uint4 o;
        uint32_t *o32 = reinterpret_cast<uint32_t *>(&o);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 g = __bfloat1622float2(g2[k]), u = __bfloat1622float2(u2[k]);
            __nv_bfloat162 y = __floats2bfloat162_rn(g.x / (1.0f + expf(-g.x)) * u.x,
                                                     g.y / (1.0f + expf(-g.y)) * u.y);
            o32[k] = *reinterpret_cast<uint32_t *>(&y);
        }
        *reinterpret_cast<uint4 *>(out + e) = o;
    }
    __syncthreads();
    stamp_end(stamp);
}

cudaError_t launch_swiglu(const bf16 *gate, const bf16 *up, int64_t rows, int64_t width,
                          int64_t in_stride, int64_t chunk, bf16 *out, cudaStream_t stream,
                          const llm_launch *ln)
{
    const bool vec = width % 8 == 0 && in_stride % 8 == 0 && chunk % 8 == 0 &&
                     ((uintptr_t)gate | (uintptr_t)up | (uintptr_t)out) % 16 == 0;
    const int threads = vec ? 128 : 256; /* decode: 9728 / 8 -> 10 blocks of 128 */
    int64_t items = vec ? rows * width / 8 : rows * width;
    int64_t blocks = (items + threads - 1) / threads;
    if (blocks > 4096) blocks = 4096;
    if (blocks < 1) blocks = 1;
    cudaError_t e = llm_launch_kernel(vec ? swiglu_vec_kernel : swiglu_kernel, dim3((unsigned)blocks),
                                      dim3(threads), 0, stream, ln, gate, up, rows, width,
                                      in_stride, chunk, out, stamp_of(ln));
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* (value, index) a beats b: a finite-or-inf value, larger, or equal with a lower index. An index
 * of -1 means "no candidate" (every value seen was NaN). */
__device__ __forceinline__ bool beats(float av, int ai, float bv, int bi)
{
    if (ai < 0) return false;
    if (bi < 0) return true;
    return av > bv || (av == bv && ai < bi);
}

// logits [vocab]; tokens [max_seq + 1]; one block of 1024 threads
__global__ void __launch_bounds__(1024)
    argmax_advance_kernel(const bf16 *__restrict__ logits, int64_t vocab, int32_t *tokens,
                          int32_t *pos, int m, int32_t *err)
{
    __shared__ float sv[32];
    __shared__ int si[32];
    float best = -INFINITY;
    int bi = -1;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
        float v = __bfloat162float(logits[i]);
        if (v == v && (bi < 0 || v > best)) { /* ascending i: ties keep the lower index */
            best = v;
            bi = (int)i;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (beats(ov, oi, best, bi)) best = ov, bi = oi;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) sv[warp] = best, si[warp] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)(blockDim.x / 32); w++)
            if (beats(sv[w], si[w], best, bi)) best = sv[w], bi = si[w];
        int p = *pos;
        if (bi < 0) {
            *err = 2;
            bi = 0;
        }
        tokens[p + m] = bi;
        *pos = p + m;
    }
}

cudaError_t launch_argmax_advance(const bf16 *logits, int64_t vocab, int32_t *tokens,
                                  int32_t *pos, int m, int32_t *err, cudaStream_t stream)
{
    argmax_advance_kernel<<<1, 1024, 0, stream>>>(logits, vocab, tokens, pos, m, err);
    return cudaGetLastError();
}

__global__ void advance_kernel(int32_t *pos, int m) { *pos += m; }

cudaError_t launch_advance(int32_t *pos, int m, cudaStream_t stream)
{
    advance_kernel<<<1, 1, 0, stream>>>(pos, m);
    return cudaGetLastError();
}

} // namespace qmm_llm
