/*
 * Per-head RMSNorm of q and k, RoPE from the shared table, and the KV-cache write: one kernel,
 * one warp a (row, head slot) at a time. Slots [0, heads) of a row are query heads, [heads,
 * heads + kv_heads) key/value heads. One 64-thread block a head (the earlier form: 82 k blocks a
 * layer at 2048 rows) spent its time in block launches and, under PDL, in every block's
 * griddepcontrol (bench/NOTES.md row 47); here the grid is at most one resident wave of 8-warp
 * blocks, each warp striding over the slots, and Σx² is reduced with shuffles only.
 */
#include "llm/cuda/llm_kernels.cuh"

namespace qmm_llm {

constexpr int ROPE_WARPS = 8;

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* One rotated pair as llm_head_norm_rope rounds it, without contractions. */
__device__ __forceinline__ void rotate(float a, float b, float inv, float wa, float wb, float c,
                                       float s, bf16 *oa, bf16 *ob)
{
    float ya = __fmul_rn(__fmul_rn(a, inv), wa);
    float yb = __fmul_rn(__fmul_rn(b, inv), wb);
    *oa = __float2bfloat16_rn(__fsub_rn(__fmul_rn(ya, c), __fmul_rn(yb, s)));
    *ob = __float2bfloat16_rn(__fadd_rn(__fmul_rn(yb, c), __fmul_rn(ya, s)));
}

/* Where slot sl's head is read and written: in (q or k row), out (q in place, or the cache row),
 * its norm weight, and for key heads the v row and its cache row (else NULL). */
struct head_io {
    const bf16 *in, *w, *vi;
    bf16 *out, *vo;
    int64_t p; /* position */
};

/* q [m, heads*hd] (rows q_stride apart), k and v [m, kv_heads*hd] (rows kv_stride apart);
 * kc, vc one layer's cache [kv_heads, max_seq, hd]; cos_t, sin_t [max_seq, hd/2] */
struct rope_args {
    bf16 *q;
    const bf16 *k, *v;
    int64_t q_stride, kv_stride;
    const bf16 *qw, *kw;
    const float *cos_t, *sin_t;
    const int32_t *pos;
    int heads, kv_heads, hd;
    float eps;
    int64_t max_seq, slots; /* slots = m · (heads + kv_heads) */
    bf16 *kc, *vc;
};

__device__ __forceinline__ head_io head_of(const rope_args &a, int64_t p0, int64_t sl)
{
    const int per_row = a.heads + a.kv_heads;
    const int64_t r = sl / per_row;
    const int slot = (int)(sl - r * per_row);
    head_io h;
    h.p = p0 + r;
    if (slot < a.heads) {
        bf16 *qh = a.q + r * a.q_stride + (int64_t)slot * a.hd;
        h.in = qh, h.out = qh, h.w = a.qw, h.vi = nullptr, h.vo = nullptr;
    } else {
        const int kvh = slot - a.heads;
        const int64_t src = r * a.kv_stride + (int64_t)kvh * a.hd;
        const int64_t dst = ((int64_t)kvh * a.max_seq + h.p) * a.hd;
        h.in = a.k + src, h.out = a.kc + dst, h.w = a.kw, h.vi = a.v + src, h.vo = a.vc + dst;
    }
    return h;
}

/* hd = 128 NP: lane l holds elements 2l + 64t, +1 (t < NP) of each half, loaded as pairs
 * (bf16x2, float2); needs 4-byte aligned rows and 8-byte aligned tables (the launcher checks).
 * Every load is issued before the reduction, so a warp has the whole head in flight at once. */
template <int NP>
__device__ __forceinline__ void head_vec(const rope_args &a, const head_io &h, int lane)
{
    constexpr int HALF = 64 * NP;
    using pair = __nv_bfloat162;
    pair x0[NP], x1[NP], w0[NP], w1[NP], v0[NP], v1[NP]; /* kept packed: 32 registers a thread */
    float2 c[NP], s[NP];
    const float *cr = a.cos_t + h.p * HALF, *sr = a.sin_t + h.p * HALF;
    float ss = 0.0f;
#pragma unroll
    for (int t = 0; t < NP; t++) {
        const int e = 2 * lane + 64 * t;
        x0[t] = *reinterpret_cast<const pair *>(h.in + e);
        x1[t] = *reinterpret_cast<const pair *>(h.in + HALF + e);
        w0[t] = *reinterpret_cast<const pair *>(h.w + e);
        w1[t] = *reinterpret_cast<const pair *>(h.w + HALF + e);
        c[t] = *reinterpret_cast<const float2 *>(cr + e);
        s[t] = *reinterpret_cast<const float2 *>(sr + e);
        if (h.vo) {
            v0[t] = *reinterpret_cast<const pair *>(h.vi + e);
            v1[t] = *reinterpret_cast<const pair *>(h.vi + HALF + e);
        }
        const float2 f0 = __bfloat1622float2(x0[t]), f1 = __bfloat1622float2(x1[t]);
        ss += f0.x * f0.x + f1.x * f1.x + f0.y * f0.y + f1.y * f1.y;
    }
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float)(2 * HALF) + a.eps);
#pragma unroll
    for (int t = 0; t < NP; t++) {
        const int e = 2 * lane + 64 * t;
        const float2 f0 = __bfloat1622float2(x0[t]), f1 = __bfloat1622float2(x1[t]);
        const float2 g0 = __bfloat1622float2(w0[t]), g1 = __bfloat1622float2(w1[t]);
        pair o0, o1;
        rotate(f0.x, f1.x, inv, g0.x, g1.x, c[t].x, s[t].x, &o0.x, &o1.x);
        rotate(f0.y, f1.y, inv, g0.y, g1.y, c[t].y, s[t].y, &o0.y, &o1.y);
        *reinterpret_cast<pair *>(h.out + e) = o0;
        *reinterpret_cast<pair *>(h.out + HALF + e) = o1;
        if (h.vo) {
            *reinterpret_cast<pair *>(h.vo + e) = v0[t];
            *reinterpret_cast<pair *>(h.vo + HALF + e) = v1[t];
        }
    }
}

/* Any even hd: lane l holds pairs (i, i + hd/2), i = l, l + 32, ...; the head is read twice
 * (Σx², then the rotation; each element is read and written by the same lane, so q in place is
 * safe). */
__device__ __forceinline__ void head_any(const rope_args &a, const head_io &h, int lane)
{
    const int half = a.hd / 2;
    float ss = 0.0f;
    for (int i = lane; i < half; i += 32) {
        const float x0 = __bfloat162float(h.in[i]), x1 = __bfloat162float(h.in[i + half]);
        ss += x0 * x0 + x1 * x1;
    }
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float)a.hd + a.eps);
    const float *cr = a.cos_t + h.p * half, *sr = a.sin_t + h.p * half;
    for (int i = lane; i < half; i += 32) {
        const float x0 = __bfloat162float(h.in[i]), x1 = __bfloat162float(h.in[i + half]);
        rotate(x0, x1, inv, __bfloat162float(h.w[i]), __bfloat162float(h.w[i + half]), cr[i], sr[i],
               &h.out[i], &h.out[i + half]);
        if (h.vo) {
            h.vo[i] = h.vi[i];
            h.vo[i + half] = h.vi[i + half];
        }
    }
}

/* NP > 0: hd = 128 NP through head_vec; NP = 0: any even hd through head_any.
 * hd 128: eight blocks a SM (64 warps, full occupancy) */
template <int NP>
__global__ void __launch_bounds__(ROPE_WARPS * 32, NP == 1 ? 8 : 4)
    qk_norm_rope_kernel(rope_args a, unsigned long long *stamp)
{
    stamp_start(stamp);
    pdl_wait_trigger(stamp); /* q, k, v come from the projection before; *pos read after it */
    const int64_t p0 = *a.pos;
    const int lane = threadIdx.x % 32;
    const int64_t nwarps = (int64_t)gridDim.x * ROPE_WARPS;
    for (int64_t sl = (int64_t)blockIdx.x * ROPE_WARPS + threadIdx.x / 32; sl < a.slots;
         sl += nwarps) {
        const head_io h = head_of(a, p0, sl);
        if constexpr (NP > 0)
            head_vec<NP>(a, h, lane);
        else
            head_any(a, h, lane);
    }
    if (stamp) { /* uniform over the block */
        __syncthreads();
        stamp_end(stamp);
    }
}

/* Blocks of the kernel resident at once on the current device (one wave), cached per device. */
template <int NP>
static cudaError_t wave_blocks(int *out)
{
    static int cached[64];
    int dev = 0, sms = 0, per_sm = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if (dev >= 0 && dev < 64 && cached[dev]) {
        *out = cached[dev];
        return cudaSuccess;
    }
    e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, qk_norm_rope_kernel<NP>,
                                                          ROPE_WARPS * 32, 0);
    if (e != cudaSuccess) return e;
    *out = sms * (per_sm > 0 ? per_sm : 1);
    if (dev >= 0 && dev < 64) cached[dev] = *out;
    return cudaSuccess;
}

template <int NP>
static cudaError_t launch_np(const rope_args &a, cudaStream_t stream, const llm_launch *ln)
{
    int wave = 0;
    cudaError_t e = wave_blocks<NP>(&wave);
    if (e != cudaSuccess) return e;
    const int64_t need = (a.slots + ROPE_WARPS - 1) / ROPE_WARPS;
    const int blocks = (int)(need < wave ? need : wave);
    e = llm_launch_kernel(qk_norm_rope_kernel<NP>, dim3(blocks), dim3(ROPE_WARPS * 32), 0, stream,
                          ln, a, stamp_of(ln));
    return e != cudaSuccess ? e : cudaGetLastError();
}

static bool aligned(const void *p, uintptr_t n) { return ((uintptr_t)p % n) == 0; }

cudaError_t launch_qk_norm_rope(bf16 *q, const bf16 *k, const bf16 *v, int64_t q_stride,
                                int64_t kv_stride, const bf16 *qw, const bf16 *kw,
                                const float *cos_t, const float *sin_t, const int32_t *pos, int m,
                                int heads, int kv_heads, int hd, float eps, int64_t max_seq,
                                bf16 *kc, bf16 *vc, cudaStream_t stream, const llm_launch *ln)
{
    if (m < 1 || heads < 1 || kv_heads < 1 || hd < 2 || hd % 2 || max_seq < m)
        return cudaErrorInvalidValue;
    const rope_args a = {q,   k,     v,       q_stride, kv_stride, qw,
                         kw,  cos_t, sin_t,   pos,      heads,     kv_heads,
                         hd,  eps,   max_seq, (int64_t)m * (heads + kv_heads), kc, vc};
    /* the paired loads: rows and weights 4-byte aligned, the tables 8-byte aligned */
    const bool pairs = q_stride % 2 == 0 && kv_stride % 2 == 0 && aligned(q, 4) && aligned(k, 4) &&
                       aligned(v, 4) && aligned(qw, 4) && aligned(kw, 4) && aligned(kc, 4) &&
                       aligned(vc, 4) && aligned(cos_t, 8) && aligned(sin_t, 8);
    if (pairs && hd == 128) return launch_np<1>(a, stream, ln);
    if (pairs && hd == 256) return launch_np<2>(a, stream, ln);
    return launch_np<0>(a, stream, ln);
}

} // namespace qmm_llm
