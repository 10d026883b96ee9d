/* The wgmma kernel's argument block, its shared-memory layout and the schedule's arithmetic
 * (which iterations a CTA owns, the producer's walk over them), shared by the kernel
 * (gemm_sm90_kernel.cuh) and its launcher (gemm_sm90.cu, where the design is described). */
#ifndef QMM_CUDA_GEMM_SM90_ARGS_CUH
#define QMM_CUDA_GEMM_SM90_ARGS_CUH

#include <cuda_bf16.h>
#include <stdint.h>

namespace qmm {

/* Division by a divisor fixed for the launch (1 ≤ d < 2^31) of a dividend in [0, 2^31): a
 * multiply-high and a shift (the multiplier ceil(2^(31+l) / d), l = ceil(log2 d), exact for
 * such dividends; d = 1 by a select), set up on the host by sm90_div: ~25 dependent
 * instructions fewer a division on the producer's way to its first copy and in the epilogue
 * (NOTES.md row 108). */
struct Sm90Div {
    uint32_t d, mul, shr;
#ifdef __CUDACC__
    __device__ __forceinline__ int div(int n) const
    {
        return d == 1 ? n : (int)(__umulhi((uint32_t)n, mul) >> shr);
    }
#endif
};
inline Sm90Div sm90_div(int d)
{
    Sm90Div v = {(uint32_t)d, 0u, 0u};
    if (d > 1) {
        uint32_t l = 0;
        while ((1u << l) < (uint32_t)d) l++;
        v.mul = (uint32_t)(((1ull << (31 + l)) + (uint64_t)d - 1) / (uint64_t)d);
        v.shr = l - 1;
    }
    return v;
}

struct Sm90Args {
    const uint32_t *packed, *sb; /* device layout */
    __nv_bfloat16 *c;            /* [m, n] */
    float *partials;             /* [ctas][2][64·WG·TN], split or stream-K only */
    uint32_t *counters;          /* [tiles], zero between calls */
    int m, n, n_pad, groups, m_tiles, n_tiles;
    int ctas, split; /* split > 0: split-K with `split` partitions; 0: stream-K over `ctas` */
    int cluster;     /* split-K with the partitions of a tile in one cluster (= split), or 1 */
    int iters;       /* tiles · groups */
    /* the shares, without divisions of 64-bit numbers in the kernel: stream-K CTA p starts at
     * p·q + min(p, r) (q, r = iters ÷ ctas); split-K partition z of a tile at z·q + min(z, r)
     * (q, r = groups ÷ split) */
    int q, r;
    int vec_c; /* n % 8 == 0 and c 16-byte aligned: the 128-token tiles' 4-byte stores */
    Sm90Div by_split, by_groups, by_m_tiles; /* the prologue's divisions (split ≥ 1 here) */
    /* stream-K on the 256-token tile: CTA p first runs whole tiles [p·dp_per_cta, (p+1)·dp_per_cta)
     * (data-parallel, the full waves), then its share of the iterations from dp_tiles·groups on
     * (q, r over those); 0, 0 elsewhere */
    int dp_per_cta, dp_tiles;
    /* 8- and 16-token tiles: warp 1 requests the first stages' activations while warp 0
     * requests their weights (when: tune/sm90.h, qmm_sm90_two_warp_start) */
    int two_warp_start;
    /* 24- to 64-token tiles of 64-row blocks: every first stage's weights before the dependency
     * wait, not the first stage's alone (when: tune/sm90.h, qmm_sm90_all_weights_first) */
    int all_weights_first;
    /* the last token tile when M does not fill it and the kernel copies its rows only
     * (Sm90Maps<true>): its rows, last_rows = M mod TN < TN (NOTES.md row 200) */
    int last_rows;
    /* A split in clusters with its last tiles aside (launch_sm90, NOTES.md row 228): the
     * clusters' launch lets the next one start right after its dependency wait
     * (trigger_early); the next runs tiles [tile0, tiles) split through the workspace on the
     * SMs the clusters leave free, and waits for the clusters at its end, not before its loop
     * (wait_late: the clusters' own wait made the activations ready). */
    int tile0, trigger_early, wait_late;
};

/* The activations' tensor maps: boxes of TN rows; with PARTIAL also boxes of the last tile's
 * last_rows rows, one a 64-wide k half, so that no box row lies past M (the 48-, 64- and 128-token
 * tiles: the rows past M cost the copy engine as much as real ones, NOTES.md row 200). */
template <bool PARTIAL> struct Sm90Maps {
    CUtensorMap act;
};
template <> struct Sm90Maps<true> {
    CUtensorMap act, last;
};

template <int TN, int WG, int GPB> struct Sm90Shape {
    static constexpr int ACT_BYTES = TN * 256;     /* two 64-wide k boxes of TN rows */
    static constexpr int W_BYTES = WG * 4096;      /* 4·WG 16-row tiles of one block */
    static constexpr int SB_BYTES = GPB * WG * 256; /* [GPB][64·WG rows] scale|bias */
    static constexpr int TX_BYTES = ACT_BYTES + W_BYTES + SB_BYTES; /* a stage's copy-engine bytes */
    static constexpr int STAGE_BYTES = (TX_BYTES + 1023) / 1024 * 1024; /* TMA boxes 1024-aligned */
    static constexpr int THREADS = 128 * (WG + 1);
    static constexpr int SLOT_FLOATS = 64 * WG * TN;
    /* split-K in a cluster of R CTAs: a tile is 4·WG·TN/8 pieces (a warp's 16 rows × 8 tokens
     * of fp32, 512 bytes); CTA z sums the pieces z, z + R, … */
    static constexpr int PIECES = 4 * WG * TN / 8;
};

/* After the ring: its barriers, the cluster's two, the last-CTA flags. */
template <int STAGES> constexpr int sm90_bar_bytes()
{
    return ((2 * STAGES + 2) * 8 + 16 + 15) / 16 * 16;
}
template <int TN, int WG, int STAGES, int GPB> constexpr size_t sm90_smem_bytes()
{
    return (size_t)STAGES * Sm90Shape<TN, WG, GPB>::STAGE_BYTES + 1024 /* alignment */ +
           sm90_bar_bytes<STAGES>();
}

/* First iteration of CTA p's split or stream-K range (p = ctas gives iters); DP: the kernel has
 * data-parallel tiles before the stream-K iterations (the 256-token tile). */
template <bool DP = false> __device__ __forceinline__ int cta_start(const Sm90Args &a, int p)
{
    if (p >= a.ctas) return a.iters;
    if (a.split > 0) {
        const int t = a.by_split.div(p), z = p - t * a.split;
        return (a.tile0 + t) * a.groups + z * a.q + min(z, a.r);
    }
    return (DP ? a.dp_tiles * a.groups : 0) + p * a.q + min(p, a.r);
}

/* The CTA whose split or stream-K range holds iteration i. */
template <bool DP = false> __device__ __forceinline__ int cta_of(const Sm90Args &a, int i)
{
    if (a.split > 0) {
        const int t = i / a.groups, g = i - t * a.groups, edge = a.r * (a.q + 1);
        return (t - a.tile0) * a.split + (g < edge ? g / (a.q + 1) : a.r + (g - edge) / a.q);
    }
    if (DP) i -= a.dp_tiles * a.groups;
    const int edge = a.r * (a.q + 1);
    return i < edge ? i / (a.q + 1) : a.r + (i - edge) / a.q;
}

/* The producer's walk over a CTA's iterations: the (group, m-tile, n-tile) of iteration `it`,
 * advanced without divisions; with DP, from the end of the data-parallel tiles (dp_end) to the
 * stream-K range's first iteration (sk_begin). */
struct Sm90Pos {
    int grp, mt, nt, it;
};
__device__ __forceinline__ Sm90Pos sm90_pos(const Sm90Args &a, int i)
{
    const int t0 = a.by_groups.div(i), nt0 = a.by_m_tiles.div(t0);
    return Sm90Pos{i - t0 * a.groups, t0 - nt0 * a.m_tiles, nt0, i};
}
template <bool DP>
__device__ __forceinline__ void sm90_advance(const Sm90Args &a, Sm90Pos &q, int dp_end, int sk_begin)
{
    if (DP && ++q.it == dp_end) {
        q = sm90_pos(a, sk_begin);
        return;
    }
    if (++q.grp == a.groups) {
        q.grp = 0;
        if (++q.mt == a.m_tiles) q.mt = 0, q.nt++;
    }
}

} // namespace qmm
#endif
