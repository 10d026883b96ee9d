/* One 128-column block of the decode matvec's arithmetic (exact codes, fp32 sums): the warp's
 * 16-row tile times a staged activation row (or eight), shared by matvec.cu's kernel and the fused
 * decode attention + o kernel (llm/cuda/attention_o_fused.cu, an experiment). */
#ifndef QMM_CUDA_MATVEC_GROUP_CUH
#define QMM_CUDA_MATVEC_GROUP_CUH

#include "common.cuh"

namespace qmm {

/* One 128-column block of a warp's tile, in G groups (G = 128 / group size: 1, 2 or 4): per
 * group acc += s·P + (b − 128·s)·Σa, with P = Σ a·(128 + q) from a chain of k16 mma steps on the
 * codes lo (rows g8), hi (rows g8 + 8) and the staged activations at arow (block gl), and Σa from
 * mma by all-ones weights (NOTES.md rows 109, 184); the group's scale|bias words sl[i], sh[i]
 * (w4_layout.h: group i of the block takes chunks 8i/G … 8(i+1)/G − 1, pairs of k16 steps
 * c2 = 4i/G … 4(i+1)/G − 1):
 *  - several tokens: the four B registers of each pair of k16 steps, in their order, are also an
 *    A fragment whose rows g8 and g8 + 8 both hold token g8's 32 values of the pair (the k order
 *    does not matter to a sum), so one mma sums them: 4 mma a block (it was 8, B by all-ones A,
 *    −1…−3 % at 2-8 tokens); token g8's Σa is then c0 + c2, and each lane takes its columns'
 *    tokens 2·t4 and 2·t4 + 1 by two shuffles;
 *  - one token (ONE): the mma's other 7 token columns are idle, so all-ones weights times the
 *    block's 128 activations as 8 columns of 16 (slice j in column j, this lane's ldmatrix row at
 *    srow), a group's column sums added across the quad: one mma a block. */
template <int TOKT, bool ONE, int G>
__device__ __forceinline__ void mv_group(float (&acc)[TOKT][4], const uint4 lo, const uint4 hi,
                                         const uint32_t (&sl)[G], const uint32_t (&sh)[G],
                                         const uint32_t (&arow)[TOKT], uint32_t srow, int gl, uint32_t magic)
{
    static_assert(!ONE || TOKT == 1, "one token, one token tile");
    static_assert(G == 1 || G == 2 || G == 4, "groups of 128, 64 or 32");
#if defined(QMM_MV_STUB) && QMM_MV_STUB == 1 /* the loads alone, kept live by one sum */
    acc[0][0] += __uint_as_float((lo.x ^ lo.y ^ lo.z ^ lo.w ^ hi.x ^ hi.y ^ hi.z ^ hi.w ^ sl[0] ^ sh[0]) & 0x007FFFFFu);
    return;
#endif
    const uint32_t one2 = 0x3F803F80u;
    constexpr int PAIRS = 4 / G; /* pairs of k16 steps a group */
#if !(defined(QMM_MV_STUB) && QMM_MV_STUB == 3) /* 3: without Σa */
    /* one token: slices 2·t4, 2·t4 + 1 (the block's pair of k16 steps t4) summed in this lane */
    auto one_pair_sum = [&]() {
        uint32_t sb2[2];
        ldmatrix_x2_at(sb2, srow + gl * 256);
        float d[4] = {0.f, 0.f, 0.f, 0.f};
        mma_bf16_16816(d, one2, one2, one2, one2, sb2[0], sb2[1]);
        return d[0] + d[1];
    };
    float pair = 0.f; /* G > 1: the pair sum, once a block */
    if constexpr (ONE && G > 1) {
        pair = one_pair_sum();
        if constexpr (G == 2) pair += __shfl_xor_sync(0xffffffffu, pair, 1); /* lanes 0-1 | 2-3: a group */
    }
#endif
#pragma unroll
    for (int gi = 0; gi < G; gi++) {
        float pq[TOKT][4] = {}, sa[TOKT][4] = {};
#pragma unroll
        for (int c2 = gi * PAIRS; c2 < (gi + 1) * PAIRS; c2++) { /* k16 steps 2·c2 and 2·c2 + 1 */
            uint32_t b[TOKT][4];
#pragma unroll
            for (int tt = 0; tt < TOKT; tt++) ldmatrix_x4_at(b[tt], arow[tt] + (gl * 128 + 32 * c2) * 2);
            const uint32_t wl = c2 == 0 ? lo.x : c2 == 1 ? lo.y : c2 == 2 ? lo.z : lo.w;
            const uint32_t wh = c2 == 0 ? hi.x : c2 == 1 ? hi.y : c2 == 2 ? hi.z : hi.w;
#pragma unroll
            for (int h = 0; h < 2; h++) {
#if defined(QMM_MV_STUB) && QMM_MV_STUB == 2 /* the mma on the masked words */
                const uint32_t a0 = wl & 0x3F7F3F7Fu, a2 = a0, a1 = wh & 0x3F7F3F7Fu, a3 = a1; /* finite */
#else
                const uint32_t a0 = codes_lop3(wl >> (8 * h), magic), a2 = codes_lop3(wl >> (8 * h + 4), magic);
                const uint32_t a1 = codes_lop3(wh >> (8 * h), magic), a3 = codes_lop3(wh >> (8 * h + 4), magic);
#endif
#pragma unroll
                for (int tt = 0; tt < TOKT; tt++) {
                    mma_bf16_16816(pq[tt], a0, a1, a2, a3, b[tt][2 * h], b[tt][2 * h + 1]);
                }
            }
#if !(defined(QMM_MV_STUB) && QMM_MV_STUB == 3)
            if (!ONE) /* Σa of the pair of k16 steps, the activations as the A operand */
#pragma unroll
                for (int tt = 0; tt < TOKT; tt++)
                    mma_bf16_16816(sa[tt], b[tt][0], b[tt][1], b[tt][2], b[tt][3], one2, one2);
#endif
        }
#if !(defined(QMM_MV_STUB) && QMM_MV_STUB == 3)
        if (!ONE) /* sa[tt][0] + sa[tt][2]: token g8's Σa; this lane's columns: tokens 2·t4, 2·t4 + 1 */
#pragma unroll
            for (int tt = 0; tt < TOKT; tt++) {
                const float own = sa[tt][0] + sa[tt][2];
                const int t4 = threadIdx.x % 4;
                sa[tt][0] = sa[tt][2] = __shfl_sync(0xffffffffu, own, 8 * t4);
                sa[tt][1] = sa[tt][3] = __shfl_sync(0xffffffffu, own, 8 * t4 + 4);
            }
        if (ONE) { /* TOKT = 1: every column holds the one token */
            float t;
            if constexpr (G == 1) {
                t = one_pair_sum();
                t += __shfl_xor_sync(0xffffffffu, t, 1);
                t += __shfl_xor_sync(0xffffffffu, t, 2); /* the same bits in every lane of the quad */
            } else { /* group gi's sum is in quad lane PAIRS·gi */
                t = __shfl_sync(0xffffffffu, pair, (threadIdx.x & ~3u) | (unsigned)(PAIRS * gi));
            }
            sa[0][0] = sa[0][1] = sa[0][2] = sa[0][3] = t;
        }
#endif
        const float s_l = bf16_lo(sl[gi]), b_l = bf16_hi(sl[gi]) - 128.f * s_l;
        const float s_h = bf16_lo(sh[gi]), b_h = bf16_hi(sh[gi]) - 128.f * s_h;
        /* two FMAs a value (acc + b'·Σa, then + s·P); with one token the odd columns repeat it
         * and are never read */
#pragma unroll
        for (int tt = 0; tt < TOKT; tt++) {
            acc[tt][0] = fmaf(s_l, pq[tt][0], fmaf(b_l, sa[tt][0], acc[tt][0]));
            acc[tt][2] = fmaf(s_h, pq[tt][2], fmaf(b_h, sa[tt][2], acc[tt][2]));
            if (!ONE) {
                acc[tt][1] = fmaf(s_l, pq[tt][1], fmaf(b_l, sa[tt][1], acc[tt][1]));
                acc[tt][3] = fmaf(s_h, pq[tt][3], fmaf(b_h, sa[tt][3], acc[tt][3]));
            }
        }
    }
}

} // namespace qmm

#endif
