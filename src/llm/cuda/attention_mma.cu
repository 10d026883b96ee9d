/*
 * Prefill attention on tensor cores (bf16 mma.sync m16n8k16, fp32 accumulate), flash style.
 *
 * A block owns 64 query rows of one head: warp w owns rows 16w..16w+15 and keeps them in
 * registers as A fragments for the whole walk over the keys. Key tiles of 64 are copied into
 * shared memory with cp.async, two stages deep (tile i + 1 lands while tile i is multiplied), K
 * and V both as [key][dim] rows: K row-major is the B operand of Q·Kᵀ ("col" layout), and the
 * B operand of P·V comes from V by ldmatrix.trans. Per tile a warp computes S = Q·Kᵀ (16 x 64, 8 n-tiles),
 * masks, updates the running max and sum of its two rows per thread (g and g + 8 of the fragment
 * layout), exponentiates, and feeds P back as A fragments (the accumulator layout of two adjacent
 * n-tiles is exactly an A fragment) into O += P·V, O being 16 x HD accumulators in registers.
 * Numerics against the fp32 kernel: P enters the second product rounded to bf16 (the row sums
 * use the fp32 values), everything else is fp32; scores are kept in log2 units (the softmax
 * scale times log2 e) so each exponential is one hardware ex2 (a relative error near 1e-6 for
 * these arguments, far below P's bf16 rounding).
 *
 * Fragment layout of m16n8k16 (PTX ISA), g = lane / 4, t = lane % 4:
 *   A 16x16: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
 *   B 16x8:  b0 (k = 2t..2t+1, n = g), b1 (k = 2t+8.., n = g)
 *   C 16x8:  c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)
 */
#include <math.h>

#include "llm/cuda/llm_kernels.cuh"
#include "llm/cuda/mma_sync.cuh"

namespace qmm_llm {

constexpr int TC_BQ = 64, TC_BK = 64, TC_WARPS = 4;

template <int HD> struct tc_layout {
    static constexpr int KS = HD + 8;          /* padded row stride (bf16): conflict-free loads */
    static constexpr int TILE = TC_BK * KS;    /* one K or V tile */
    static constexpr int BYTES = 2 * 2 * TILE * 2; /* [stage][K|V][key][KS] */
};

// q is [m, heads*HD] (rows q_stride apart), out [m, heads*HD]; kc, vc one layer's cache
// [kv_heads, max_seq, HD]
template <int HD>
__global__ void __launch_bounds__(TC_WARPS * 32, 3) /* three blocks a SM, as many as the shared
                                                        memory allows (a few registers spill) */
    attn_prefill_mma_kernel(const bf16 *__restrict__ q, int64_t q_stride, const bf16 *__restrict__ kc,
                            const bf16 *__restrict__ vc, const int32_t *__restrict__ pos, int m,
                            int heads, int kv_heads, int64_t max_seq, bf16 *__restrict__ out,
                            unsigned long long *stamp)
{
    using TL = tc_layout<HD>;
    constexpr int KS = TL::KS;
    constexpr int KSTEPS = HD / 16; /* k-steps of Q·Kᵀ */
    constexpr int DT = HD / 8;      /* n-tiles of O */
    extern __shared__ __align__(16) bf16 tc_smem[];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int h = blockIdx.y, kvh = h / (heads / kv_heads);
    const int r0 = (gridDim.x - 1 - blockIdx.x) * TC_BQ; /* the longest rows first: a shorter tail */
    const int64_t p0 = *pos;
    const int64_t qd = (int64_t)heads * HD;
    const int rw = r0 + warp * 16;            /* first row of this warp */
    const int ra = rw + g, rb = rw + g + 8;   /* the thread's two rows */
    const bool va = ra < m, vb = rb < m;
    const int64_t qa = p0 + ra, qb = p0 + rb; /* their positions */

    const int rows_here = min(TC_BQ, m - r0);
    const int64_t kend = p0 + r0 + rows_here;
    stamp_start(stamp);
    pdl_wait_trigger(stamp); /* this prompt's cache rows and q come from the kernel before */
    const int ntiles = (int)((kend + TC_BK - 1) / TC_BK);
    const bf16 *K = kc + (int64_t)kvh * max_seq * HD, *V = vc + (int64_t)kvh * max_seq * HD;
    /* tile i into stage i % 2; keys at or past kend are zero-filled (and masked below) */
    auto load = [&](int i) {
        bf16 *ks = tc_smem + (i & 1) * 2 * TL::TILE, *vs = ks + TL::TILE;
        const int64_t k0 = (int64_t)i * TC_BK;
#pragma unroll
        for (int c = threadIdx.x; c < TC_BK * HD / 8; c += TC_WARPS * 32) {
            const int j = c / (HD / 8), d8 = (c % (HD / 8)) * 8;
            const int64_t kp = k0 + j;
            const bool ok = kp < kend;
            const int64_t off = (ok ? kp : 0) * HD + d8;
            cp16_zfill(ks + j * KS + d8, K + off, ok);
            cp16_zfill(vs + j * KS + d8, V + off, ok);
        }
        cp_commit();
    };
    load(0);

    uint32_t qf[KSTEPS][4];
    const bf16 *qra = q + (int64_t)ra * q_stride + (int64_t)h * HD;
    const bf16 *qrb = q + (int64_t)rb * q_stride + (int64_t)h * HD;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; kk++) {
        qf[kk][0] = ld_pair(qra + kk * 16 + 2 * t, va);
        qf[kk][1] = ld_pair(qrb + kk * 16 + 2 * t, vb);
        qf[kk][2] = ld_pair(qra + kk * 16 + 8 + 2 * t, va);
        qf[kk][3] = ld_pair(qrb + kk * 16 + 8 + 2 * t, vb);
    }
    float o[DT][4];
#pragma unroll
    for (int dn = 0; dn < DT; dn++) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.0f;
    float ma = -INFINITY, mb = -INFINITY, la = 0.0f, lb = 0.0f; /* l: this thread's share */
    const float scale = 1.4426950408889634f / sqrtf((float)HD); /* log2 e / sqrt(HD) */
    /* ldmatrix.trans row of this lane: matrix l / 8 is keys +8·(l/8 % 2), dims +8·(l/16) */
    const int vrow = (lane & 7) + ((lane >> 3) & 1) * 8, vcol = (lane >> 4) * 8;

    for (int i = 0; i < ntiles; i++) {
        if (i + 1 < ntiles) {
            load(i + 1);
            cp_wait_group<1>();
        } else {
            cp_wait_group<0>();
        }
        __syncthreads(); /* tile i has landed for every thread */
        const bf16 *Ks = tc_smem + (i & 1) * 2 * TL::TILE, *Vs = Ks + TL::TILE;
        const int64_t k0 = (int64_t)i * TC_BK;

        /* S = Q·Kᵀ for keys k0 + 8n + (2t, 2t+1); K's B fragments of k-steps kk, kk + 1 in
         * one ldmatrix (matrix j: keys 8n.., dims 16kk + 8j..) */
        float s[TC_BK / 8][4];
#pragma unroll
        for (int n = 0; n < TC_BK / 8; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            const bf16 *kr = &Ks[(8 * n + (lane & 7)) * KS + 8 * (lane >> 3)];
#pragma unroll
            for (int kk = 0; kk < KSTEPS; kk += 2) {
                uint32_t b[4];
                ldsm_x4(b, kr + kk * 16);
                mma_16816(s[n], qf[kk], b[0], b[1]);
                mma_16816(s[n], qf[kk + 1], b[2], b[3]);
            }
        }
        float ta = -INFINITY, tb = -INFINITY;
        if (k0 + TC_BK - 1 <= p0 + rw) { /* warp-uniform: every key of the tile is visible to
                                            every row of the warp (rows past m are never stored) */
#pragma unroll
            for (int n = 0; n < TC_BK / 8; n++) {
#pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] *= scale;
                ta = fmaxf(ta, fmaxf(s[n][0], s[n][1]));
                tb = fmaxf(tb, fmaxf(s[n][2], s[n][3]));
            }
        } else {
#pragma unroll
            for (int n = 0; n < TC_BK / 8; n++) {
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int64_t kp = k0 + 8 * n + 2 * t + e;
                    s[n][e] = (va && kp <= qa) ? s[n][e] * scale : -INFINITY;
                    s[n][2 + e] = (vb && kp <= qb) ? s[n][2 + e] * scale : -INFINITY;
                    ta = fmaxf(ta, s[n][e]);
                    tb = fmaxf(tb, s[n][2 + e]);
                }
            }
        }
        /* the 4 threads of a row are lanes 4g..4g+3 */
        ta = fmaxf(ta, __shfl_xor_sync(0xffffffffu, ta, 1));
        ta = fmaxf(ta, __shfl_xor_sync(0xffffffffu, ta, 2));
        tb = fmaxf(tb, __shfl_xor_sync(0xffffffffu, tb, 1));
        tb = fmaxf(tb, __shfl_xor_sync(0xffffffffu, tb, 2));
        float na = fmaxf(ma, ta), nb = fmaxf(mb, tb);
        /* a row with no visible key yet keeps alpha 1 and p 0 (no inf - inf) */
        float aa = na == -INFINITY ? 1.0f : ex2(ma - na);
        float ab = nb == -INFINITY ? 1.0f : ex2(mb - nb);
        ma = na, mb = nb;
        float sa = 0.0f, sb = 0.0f;
#pragma unroll
        for (int n = 0; n < TC_BK / 8; n++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                s[n][e] = na == -INFINITY ? 0.0f : ex2(s[n][e] - na);
                s[n][2 + e] = nb == -INFINITY ? 0.0f : ex2(s[n][2 + e] - nb);
                sa += s[n][e];
                sb += s[n][2 + e];
            }
        }
        la = la * aa + sa;
        lb = lb * ab + sb;
        if (__any_sync(0xffffffffu, aa != 1.0f || ab != 1.0f)) { /* a row's max moved */
#pragma unroll
            for (int dn = 0; dn < DT; dn++) {
                o[dn][0] *= aa, o[dn][1] *= aa;
                o[dn][2] *= ab, o[dn][3] *= ab;
            }
        }
        /* O += P·V: P's accumulators of n-tiles 2kk and 2kk+1 are the A fragment of k-step kk;
         * V's B fragments of n-tiles dn, dn + 1 in one ldmatrix.trans */
#pragma unroll
        for (int kk = 0; kk < TC_BK / 16; kk++) {
            uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                              pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dn = 0; dn < DT; dn += 2) {
                uint32_t b[4];
                ldsm_x4_trans(b, Vs + (kk * 16 + vrow) * KS + dn * 8 + vcol);
                mma_16816(o[dn], pa, b[0], b[1]);
                mma_16816(o[dn + 1], pa, b[2], b[3]);
            }
        }
        __syncthreads(); /* stage i % 2 is free for tile i + 2 */
    }
    /* the row sums: this thread's share + the other 3 threads of the row */
    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    bf16 *oa = out + (int64_t)ra * qd + (int64_t)h * HD, *ob = out + (int64_t)rb * qd + (int64_t)h * HD;
#pragma unroll
    for (int dn = 0; dn < DT; dn++) {
        int d = 8 * dn + 2 * t;
        if (va)
            *reinterpret_cast<__nv_bfloat162 *>(oa + d) =
                __floats2bfloat162_rn(o[dn][0] / la, o[dn][1] / la);
        if (vb)
            *reinterpret_cast<__nv_bfloat162 *>(ob + d) =
                __floats2bfloat162_rn(o[dn][2] / lb, o[dn][3] / lb);
    }
    if (stamp) { /* uniform over the block */
        __syncthreads();
        stamp_end(stamp);
    }
}

template <int HD>
static cudaError_t launch_prefill_mma_hd(dim3 grid, const bf16 *q, int64_t q_stride, const bf16 *kc,
                                         const bf16 *vc, const int32_t *pos, int m, int heads,
                                         int kv_heads, int64_t max_seq, bf16 *out,
                                         cudaStream_t stream, const llm_launch *ln)
{
    constexpr int bytes = tc_layout<HD>::BYTES;
    static int opted[64]; /* per device: the opt-in above 48 KB of shared memory is made */
    cudaError_t e = llm_opt_in_smem(attn_prefill_mma_kernel<HD>, bytes, opted);
    if (e != cudaSuccess) return e;
    e = llm_launch_kernel(attn_prefill_mma_kernel<HD>, grid, dim3(TC_WARPS * 32), bytes, stream, ln,
                          q, q_stride, kc, vc, pos, m, heads, kv_heads, max_seq, out,
                          stamp_of(ln));
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t launch_attention_prefill_mma(const bf16 *q, int64_t q_stride, const bf16 *kc,
                                         const bf16 *vc, const int32_t *pos, int m, int heads,
                                         int kv_heads, int hd, int64_t max_seq, bf16 *out,
                                         cudaStream_t stream, const llm_launch *ln)
{
    dim3 grid((m + TC_BQ - 1) / TC_BQ, heads);
    if (hd == 128)
        return launch_prefill_mma_hd<128>(grid, q, q_stride, kc, vc, pos, m, heads, kv_heads,
                                          max_seq, out, stream, ln);
    if (hd == 64)
        return launch_prefill_mma_hd<64>(grid, q, q_stride, kc, vc, pos, m, heads, kv_heads,
                                         max_seq, out, stream, ln);
    return cudaErrorInvalidValue;
}

} // namespace qmm_llm
