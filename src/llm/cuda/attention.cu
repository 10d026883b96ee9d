/*
 * Causal GQA attention over the bf16 KV cache, fp32 math (correctness first).
 *
 * Prefill: a block owns 16 query rows of one head and walks the keys in tiles of 32 staged in
 * shared memory, keeping an online softmax (running max and sum, rescaled accumulators), so the
 * score matrix never exists in full. Thread t owns row t/8 and, of each key tile, keys t%8 + 8u;
 * of the output, dims t%8 + 8e: the 8 threads of a row are 8 consecutive lanes, so row maxima and
 * sums are 3 xor-shuffles.
 *
 * Decode: one block per (KV head, split of the sequence) serves all query heads of that KV head,
 * so each cached K/V row is read once per group. A warp walks positions (4 at a time, loads first,
 * for memory-level parallelism); lane l holds dims [l*E, l*E + E) of each query. The 4 warps'
 * partial softmax states merge in shared memory; with several splits, a combine kernel merges the
 * splits' states in a fixed order.
 */
#include <math.h>

#include "llm/cuda/llm_kernels.cuh"

namespace qmm_llm {

/* ---- prefill ---- */

constexpr int PF_BQ = 16, PF_BK = 32, PF_THREADS = 128;

// q is [m, heads*HD] (rows q_stride apart), out [m, heads*HD]; kc, vc one layer's cache
// [kv_heads, max_seq, HD]
template <int HD>
__global__ void __launch_bounds__(PF_THREADS)
    attn_prefill_kernel(const bf16 *__restrict__ q, int64_t q_stride, const bf16 *__restrict__ kc,
                        const bf16 *__restrict__ vc, const int32_t *__restrict__ pos, int m,
                        int heads, int kv_heads, int64_t max_seq, bf16 *__restrict__ out)
{
    constexpr int QS = HD + 4;      /* padded strides: conflict-free shared-memory access */
    constexpr int KS = HD + 1;
    constexpr int PS = PF_BK + 1;
    constexpr int E = HD / 8;       /* output dims per thread */
    __shared__ float Qs[PF_BQ * QS];
    __shared__ float Ks[PF_BK * KS];
    __shared__ float Vs[PF_BK * HD];
    __shared__ float Ps[PF_BQ * PS];

    const int t = threadIdx.x, tr = t >> 3, c8 = t & 7;
    const int h = blockIdx.y, kvh = h / (heads / kv_heads);
    const int r0 = blockIdx.x * PF_BQ;
    const int64_t p0 = *pos;
    const int64_t qd = (int64_t)heads * HD;

    for (int idx = t; idx < PF_BQ * HD; idx += PF_THREADS) {
        int rr = idx / HD, d = idx % HD, r = r0 + rr;
        Qs[rr * QS + d] = r < m ? __bfloat162float(q[(int64_t)r * q_stride + (int64_t)h * HD + d]) : 0.0f;
    }
    const int r = r0 + tr;
    const bool valid = r < m;
    const int64_t qpos = p0 + r;
    const int rows_here = min(PF_BQ, m - r0);
    const int64_t kend = p0 + r0 + rows_here; /* keys [0, kend) cover every row of the block */
    const bf16 *K = kc + (int64_t)kvh * max_seq * HD;
    const bf16 *V = vc + (int64_t)kvh * max_seq * HD;
    const float scale = 1.0f / sqrtf((float)HD);

    float mrow = -INFINITY, lrow = 0.0f, acc[E];
#pragma unroll
    for (int e = 0; e < E; e++) acc[e] = 0.0f;

    for (int64_t k0 = 0; k0 < kend; k0 += PF_BK) {
        __syncthreads(); /* the previous tile is consumed (and Qs is loaded) */
        for (int idx = t; idx < PF_BK * HD; idx += PF_THREADS) {
            int j = idx / HD, d = idx % HD;
            int64_t kp = k0 + j;
            float kv = 0.0f, vv = 0.0f; /* zeros past the end: 0 * p stays 0 */
            if (kp < kend) {
                kv = __bfloat162float(K[kp * HD + d]);
                vv = __bfloat162float(V[kp * HD + d]);
            }
            Ks[j * KS + d] = kv;
            Vs[j * HD + d] = vv;
        }
        __syncthreads();
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8
        for (int d = 0; d < HD; d++) {
            float qv = Qs[tr * QS + d];
#pragma unroll
            for (int u = 0; u < 4; u++) s[u] = fmaf(qv, Ks[(c8 + 8 * u) * KS + d], s[u]);
        }
        float tmax = -INFINITY;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int64_t kp = k0 + c8 + 8 * u;
            s[u] = (valid && kp <= qpos) ? s[u] * scale : -INFINITY;
            tmax = fmaxf(tmax, s[u]);
        }
        for (int o = 4; o > 0; o >>= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, o));
        float mnew = fmaxf(mrow, tmax), alpha = 1.0f, psum = 0.0f, p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (mnew != -INFINITY) { /* rows with no visible key yet (or padding rows) stay empty */
            alpha = expf(mrow - mnew);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                p[u] = expf(s[u] - mnew);
                psum += p[u];
            }
        }
        for (int o = 4; o > 0; o >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, o);
        lrow = lrow * alpha + psum;
        mrow = mnew;
#pragma unroll
        for (int u = 0; u < 4; u++) Ps[tr * PS + c8 + 8 * u] = p[u];
        __syncthreads();
#pragma unroll
        for (int e = 0; e < E; e++) acc[e] *= alpha;
#pragma unroll 4
        for (int j = 0; j < PF_BK; j++) {
            float pj = Ps[tr * PS + j];
#pragma unroll
            for (int e = 0; e < E; e++) acc[e] = fmaf(pj, Vs[j * HD + c8 + 8 * e], acc[e]);
        }
    }
    if (valid) {
        bf16 *o = out + (int64_t)r * qd + (int64_t)h * HD;
#pragma unroll
        for (int e = 0; e < E; e++) o[c8 + 8 * e] = __float2bfloat16_rn(acc[e] / lrow);
    }
}

cudaError_t launch_attention_prefill(const bf16 *q, int64_t q_stride, const bf16 *kc, const bf16 *vc,
                                     const int32_t *pos, int m, int heads, int kv_heads, int hd,
                                     int64_t max_seq, bf16 *out, cudaStream_t stream)
{
    dim3 grid((m + PF_BQ - 1) / PF_BQ, heads);
    if (hd == 128)
        attn_prefill_kernel<128><<<grid, PF_THREADS, 0, stream>>>(q, q_stride, kc, vc, pos, m,
                                                                   heads, kv_heads, max_seq, out);
    else if (hd == 64)
        attn_prefill_kernel<64><<<grid, PF_THREADS, 0, stream>>>(q, q_stride, kc, vc, pos, m,
                                                                  heads, kv_heads, max_seq, out);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

/* ---- decode ---- */

constexpr int DC_WARPS = 4, DC_UNROLL = 4;

/* E consecutive bf16 from p (E = 2 or 4, aligned to 2E bytes) as floats. */
template <int E>
__device__ __forceinline__ void load_row(const bf16 *p, float *f)
{
    if constexpr (E == 4) {
        uint2 u = *reinterpret_cast<const uint2 *>(p);
        float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.x));
        float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.y));
        f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
    } else {
        uint32_t u = *reinterpret_cast<const uint32_t *>(p);
        float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u));
        f[0] = a.x, f[1] = a.y;
    }
}

// q, out are [heads*HD] (one row); kc, vc [kv_heads, max_seq, HD]; partials
// [heads, nsplit, HD + 2]. Grid (kv_heads, nsplit), DC_WARPS warps.
template <int HD, int G>
__global__ void __launch_bounds__(DC_WARPS * 32)
    attn_decode_kernel(const bf16 *__restrict__ q, const bf16 *__restrict__ kc,
                       const bf16 *__restrict__ vc, const int32_t *__restrict__ pos,
                       int64_t max_seq, int nsplit, float *__restrict__ partials,
                       bf16 *__restrict__ out)
{
    constexpr int E = HD / 32;
    __shared__ float sm_m[DC_WARPS][G], sm_l[DC_WARPS][G];
    __shared__ float sm_acc[DC_WARPS][G][HD];
    const int kvh = blockIdx.x, split = blockIdx.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t len = (int64_t)*pos + 1;
    const int64_t chunk = (len + nsplit - 1) / nsplit;
    const int64_t start = (int64_t)split * chunk;
    const int64_t end = min(len, start + chunk);
    const float scale = 1.0f / sqrtf((float)HD);

    float qv[G][E], mx[G], l[G], acc[G][E];
#pragma unroll
    for (int g = 0; g < G; g++) {
        load_row<E>(q + ((int64_t)kvh * G + g) * HD + lane * E, qv[g]);
        mx[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < E; e++) acc[g][e] = 0.0f;
    }
    const bf16 *K = kc + (int64_t)kvh * max_seq * HD + lane * E;
    const bf16 *V = vc + (int64_t)kvh * max_seq * HD + lane * E;

    for (int64_t p0 = start + warp; p0 < end; p0 += DC_WARPS * DC_UNROLL) {
        float kf[DC_UNROLL][E], vf[DC_UNROLL][E];
#pragma unroll
        for (int u = 0; u < DC_UNROLL; u++) { /* all loads first: several rows in flight */
            int64_t p = p0 + (int64_t)u * DC_WARPS;
            if (p < end) {
                load_row<E>(K + p * HD, kf[u]);
                load_row<E>(V + p * HD, vf[u]);
            }
        }
#pragma unroll
        for (int u = 0; u < DC_UNROLL; u++) {
            int64_t p = p0 + (int64_t)u * DC_WARPS;
            if (p >= end) break; /* uniform across the warp */
#pragma unroll
            for (int g = 0; g < G; g++) {
                float s = 0.0f;
#pragma unroll
                for (int e = 0; e < E; e++) s = fmaf(qv[g][e], kf[u][e], s);
                for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
                s *= scale;
                float mnew = fmaxf(mx[g], s);
                float alpha = expf(mx[g] - mnew), pp = expf(s - mnew);
                l[g] = l[g] * alpha + pp;
#pragma unroll
                for (int e = 0; e < E; e++) acc[g][e] = fmaf(pp, vf[u][e], acc[g][e] * alpha);
                mx[g] = mnew;
            }
        }
    }
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (lane == 0) {
            sm_m[warp][g] = mx[g];
            sm_l[warp][g] = l[g];
        }
#pragma unroll
        for (int e = 0; e < E; e++) sm_acc[warp][g][lane * E + e] = acc[g][e];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < G * HD; idx += DC_WARPS * 32) {
        int g = idx / HD, d = idx % HD;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < DC_WARPS; w++) M = fmaxf(M, sm_m[w][g]);
        float L = 0.0f, O = 0.0f;
#pragma unroll
        for (int w = 0; w < DC_WARPS; w++) {
            if (sm_m[w][g] == -INFINITY) continue; /* a warp that saw no position */
            float f = expf(sm_m[w][g] - M);
            L += sm_l[w][g] * f;
            O += sm_acc[w][g][d] * f;
        }
        int h = kvh * G + g;
        if (nsplit == 1) {
            out[(int64_t)h * HD + d] = __float2bfloat16_rn(O / L);
        } else {
            float *pp = partials + ((int64_t)h * nsplit + split) * (HD + 2);
            if (d == 0) {
                pp[0] = M;
                pp[1] = L;
            }
            pp[2 + d] = O;
        }
    }
}

// partials [heads, nsplit, HD + 2] -> out [heads*HD]; one block per head, HD threads
__global__ void attn_combine_kernel(const float *__restrict__ partials, int nsplit, int hd,
                                    bf16 *__restrict__ out)
{
    const int h = blockIdx.x, d = threadIdx.x;
    const float *base = partials + (int64_t)h * nsplit * (hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++) M = fmaxf(M, base[(int64_t)s * (hd + 2)]);
    float L = 0.0f, O = 0.0f;
    for (int s = 0; s < nsplit; s++) {
        const float *p = base + (int64_t)s * (hd + 2);
        if (p[0] == -INFINITY) continue; /* an empty split */
        float f = expf(p[0] - M);
        L += p[1] * f;
        O += p[2 + d] * f;
    }
    out[(int64_t)h * hd + d] = __float2bfloat16_rn(O / L);
}

/* The decode kernels are instantiated per group. 5 is Qwen3-14B's (40 query heads over 8 KV
 * heads, 20 over 4 a rank at t = 2): the kernels bound their head loops by G, and the tensor-core
 * ones (attention_decode_block.cuh) take the heads as the mma's 8 columns with columns >= G
 * zeroed and never stored, so no instance assumes that G divides 8. */
int attention_supported(int hd, int group)
{
    return (hd == 64 || hd == 128) &&
           (group == 1 || group == 2 || group == 4 || group == 5 || group == 8);
}

template <int HD, int G>
static void launch_decode_inst(dim3 grid, const bf16 *q, const bf16 *kc, const bf16 *vc,
                               const int32_t *pos, int64_t max_seq, int nsplit, float *partials,
                               bf16 *out, cudaStream_t stream)
{
    attn_decode_kernel<HD, G><<<grid, DC_WARPS * 32, 0, stream>>>(q, kc, vc, pos, max_seq, nsplit,
                                                                  partials, out);
}

template <int HD>
static cudaError_t launch_decode_hd(int group, dim3 grid, const bf16 *q, const bf16 *kc,
                                    const bf16 *vc, const int32_t *pos, int64_t max_seq,
                                    int nsplit, float *partials, bf16 *out, cudaStream_t stream)
{
    switch (group) {
    case 1: launch_decode_inst<HD, 1>(grid, q, kc, vc, pos, max_seq, nsplit, partials, out, stream); break;
    case 2: launch_decode_inst<HD, 2>(grid, q, kc, vc, pos, max_seq, nsplit, partials, out, stream); break;
    case 4: launch_decode_inst<HD, 4>(grid, q, kc, vc, pos, max_seq, nsplit, partials, out, stream); break;
    case 5: launch_decode_inst<HD, 5>(grid, q, kc, vc, pos, max_seq, nsplit, partials, out, stream); break;
    case 8: launch_decode_inst<HD, 8>(grid, q, kc, vc, pos, max_seq, nsplit, partials, out, stream); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

cudaError_t launch_attention_decode(const bf16 *q, const bf16 *kc, const bf16 *vc,
                                    const int32_t *pos, int heads, int kv_heads, int hd,
                                    int64_t max_seq, int nsplit, float *partials, bf16 *out,
                                    cudaStream_t stream)
{
    int group = heads / kv_heads;
    if (!attention_supported(hd, group) || nsplit < 1) return cudaErrorInvalidValue;
    dim3 grid(kv_heads, nsplit);
    cudaError_t e = hd == 128 ? launch_decode_hd<128>(group, grid, q, kc, vc, pos, max_seq, nsplit,
                                                      partials, out, stream)
                              : launch_decode_hd<64>(group, grid, q, kc, vc, pos, max_seq, nsplit,
                                                     partials, out, stream);
    if (e != cudaSuccess || nsplit == 1) return e;
    attn_combine_kernel<<<heads, hd, 0, stream>>>(partials, nsplit, hd, out);
    return cudaGetLastError();
}

} // namespace qmm_llm
