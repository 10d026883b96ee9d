/*
 * Decode path: C[M, N] = A[M, K] · Wᵀ for M <= 16 on tensor cores.
 *
 * Roles are swapped so that small M wastes little: W rows are the mma's A operand (16 rows a tile),
 * the tokens its B operand (8 a tile). The codes enter the mma as the exact bf16 values 128 + q,
 * so per group of 128 the mma yields P = Σ a·(128+q) and the weights are never rounded:
 *   Σ a·w = s·Σ a·q + b·Σ a = s·P + (b − 128·s)·Σ a      (fp32, per group).
 * A block owns 16·ROWT rows; its W = 4 or 8 warps take the K groups in turn (warp w: w, w+W, …),
 * each keeping MV_DEPTH groups of weights in flight (a register ring), and sum their results in
 * shared memory in a fixed order: deterministic, no atomics.
 */
#include "kernels.h"
#include "w4_layout.h"

namespace qmm {


/* 16 bytes of streamed weights, not kept in L1. */
__device__ __forceinline__ uint4 ld_stream16(const uint32_t *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ uint32_t word_of(const uint4 &v, int j)
{
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

template <int ROWT> struct MvGroup {
    uint4 lo[ROWT], hi[ROWT];   /* this lane's 16 bytes of rows g and g+8 of each row tile */
    uint32_t sb_lo[ROWT], sb_hi[ROWT];
};

template <int ROWT>
__device__ __forceinline__ void mv_load(MvGroup<ROWT> &G, const uint32_t *__restrict__ packed,
                                        const uint32_t *__restrict__ sb, int64_t kw, int n_pad,
                                        int n0, int grp, int g, int t)
{
#pragma unroll
    for (int rt = 0; rt < ROWT; rt++) {
        int row = n0 + rt * 16 + g;
        const uint32_t *tile = packed + qmm_w4_device_offset(row, grp, kw / 16);
        G.lo[rt] = ld_stream16(tile + 4 * t);
        G.hi[rt] = ld_stream16(tile + 8 * 16 + 4 * t); /* row + 8, same tile */
        G.sb_lo[rt] = __ldg(sb + (int64_t)grp * n_pad + row);
        G.sb_hi[rt] = __ldg(sb + (int64_t)grp * n_pad + row + 8);
    }
}

/* One group of 128 columns for this warp: P = Σ a·(128+q) on tensor cores, then
 * acc += s·P + (b − 128·s)·Σa per output. */
template <int TOKT, int ROWT>
__device__ __forceinline__ void mv_group(float (&acc)[ROWT][TOKT][4], const MvGroup<ROWT> &cur,
                                         const uint32_t *__restrict__ a32, int m, int k, int grp,
                                         int g, int t)
{
    uint32_t bf[TOKT][8][2];
    float asum[TOKT];
#pragma unroll
    for (int tt = 0; tt < TOKT; tt++) {
        int tok = tt * 8 + g;
        asum[tt] = 0.f;
        const uint32_t *ap = a32 + ((int64_t)tok * k + grp * 128) / 2 + t;
#pragma unroll
        for (int ch = 0; ch < 8; ch++) {
            bf[tt][ch][0] = tok < m ? __ldg(ap + 8 * ch) : 0u;
            bf[tt][ch][1] = tok < m ? __ldg(ap + 8 * ch + 4) : 0u;
            asum[tt] += bf16_lo(bf[tt][ch][0]) + bf16_hi(bf[tt][ch][0]) +
                        bf16_lo(bf[tt][ch][1]) + bf16_hi(bf[tt][ch][1]);
        }
    }
    float p[ROWT][TOKT][4];
    zero_frags(p);
#pragma unroll
    for (int ch = 0; ch < 8; ch++) {
        const int j = ch / 2, h = (ch % 2) * 8;
#pragma unroll
        for (int rt = 0; rt < ROWT; rt++) {
            uint32_t wl = word_of(cur.lo[rt], j), wh = word_of(cur.hi[rt], j);
            uint32_t a0 = codes_128(wl, h), a2 = codes_128(wl, h + 4);
            uint32_t a1 = codes_128(wh, h), a3 = codes_128(wh, h + 4);
#pragma unroll
            for (int tt = 0; tt < TOKT; tt++)
                mma_bf16_16816(p[rt][tt], a0, a1, a2, a3, bf[tt][ch][0], bf[tt][ch][1]);
        }
    }
#pragma unroll
    for (int tt = 0; tt < TOKT; tt++) {
        float s = asum[tt];
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);           /* Σa of token tt*8 + g */
        float s0 = __shfl_sync(0xffffffffu, s, 8 * t);     /* token tt*8 + 2t */
        float s1 = __shfl_sync(0xffffffffu, s, 8 * t + 4); /* token tt*8 + 2t + 1 */
#pragma unroll
        for (int rt = 0; rt < ROWT; rt++) {
            float sl = bf16_lo(cur.sb_lo[rt]), bl = bf16_hi(cur.sb_lo[rt]) - 128.f * sl;
            float sh = bf16_lo(cur.sb_hi[rt]), bh = bf16_hi(cur.sb_hi[rt]) - 128.f * sh;
            acc[rt][tt][0] += sl * p[rt][tt][0] + bl * s0;
            acc[rt][tt][1] += sl * p[rt][tt][1] + bl * s1;
            acc[rt][tt][2] += sh * p[rt][tt][2] + bh * s0;
            acc[rt][tt][3] += sh * p[rt][tt][3] + bh * s1;
        }
    }
}

/* Groups in flight per warp: the loads of the next MV_DEPTH-1 groups are issued before the
 * current one is used, so a warp keeps about MV_DEPTH KB of weights in flight. */
constexpr int MV_DEPTH = 4;

// a is [m, k] bf16, packed/sb the device layout (w4_layout.h), c is [m, n] bf16; m <= 8*TOKT.
template <int TOKT, int ROWT, int MV_WARPS>
__global__ __launch_bounds__(MV_WARPS * 32) void matvec_w4g128_bf16_kernel(
    const __nv_bfloat16 *__restrict__ a, int m, int k, const uint32_t *__restrict__ packed,
    const uint32_t *__restrict__ sb, int n, int n_pad, __nv_bfloat16 *__restrict__ c)
{
    constexpr int ROWS = 16 * ROWT, TOKS = 8 * TOKT;
    __shared__ float red[MV_WARPS][TOKS][ROWS + 1];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int n0 = blockIdx.x * ROWS, groups = k / 128;
    const int64_t kw = k / 8;
    const uint32_t *__restrict__ a32 = reinterpret_cast<const uint32_t *>(a);

    float acc[ROWT][TOKT][4];
    zero_frags(acc);

    /* a ring of MV_DEPTH groups: warp w takes groups w, w + MV_WARPS, ... */
    MvGroup<ROWT> ring[MV_DEPTH];
#pragma unroll
    for (int d = 0; d < MV_DEPTH; d++) {
        int grp = warp + d * MV_WARPS;
        if (grp < groups) mv_load<ROWT>(ring[d], packed, sb, kw, n_pad, n0, grp, g, t);
    }
    for (int base = warp; base < groups; base += MV_DEPTH * MV_WARPS) {
#pragma unroll
        for (int d = 0; d < MV_DEPTH; d++) {
            int grp = base + d * MV_WARPS;
            if (grp < groups) {
                mv_group<TOKT, ROWT>(acc, ring[d], a32, m, k, grp, g, t);
                int next = grp + MV_DEPTH * MV_WARPS;
                if (next < groups) mv_load<ROWT>(ring[d], packed, sb, kw, n_pad, n0, next, g, t);
            }
        }
    }

#pragma unroll
    for (int rt = 0; rt < ROWT; rt++)
#pragma unroll
        for (int tt = 0; tt < TOKT; tt++) {
            int row = rt * 16 + g, tok = tt * 8 + 2 * t;
            red[warp][tok][row] = acc[rt][tt][0];
            red[warp][tok + 1][row] = acc[rt][tt][1];
            red[warp][tok][row + 8] = acc[rt][tt][2];
            red[warp][tok + 1][row + 8] = acc[rt][tt][3];
        }
    __syncthreads();
    for (int e = threadIdx.x; e < TOKS * ROWS; e += MV_WARPS * 32) {
        int tok = e / ROWS, r = e % ROWS;
        if (tok < m && n0 + r < n) {
            float s = 0.f;
#pragma unroll
            for (int w = 0; w < MV_WARPS; w++) s += red[w][tok][r];
            c[(int64_t)tok * n + n0 + r] = __float2bfloat16_rn(s);
        }
    }
}

template <int TOKT, int ROWT, int WARPS>
static cudaError_t launch_matvec_t(const DevWeight &w, const __nv_bfloat16 *a, int m,
                                   __nv_bfloat16 *c, cudaStream_t stream)
{
    constexpr int ROWS = 16 * ROWT;
    dim3 grid((unsigned)((w.n + ROWS - 1) / ROWS));
    matvec_w4g128_bf16_kernel<TOKT, ROWT, WARPS><<<grid, WARPS * 32, 0, stream>>>(
        a, m, (int)w.k, w.packed, w.sb, (int)w.n, (int)w.n_pad, c);
    return cudaGetLastError();
}

cudaError_t launch_matvec(const DevWeight &w, const __nv_bfloat16 *a, int m, __nv_bfloat16 *c,
                          int wide_tiles, cudaStream_t stream)
{
    /* 8 warps a block split K finely; when that needs more than about one wave of blocks
     * (wide_tiles, from the tuning table), 4-warp blocks (6 a SM) keep the grid in one wave.
     * The warp count sets the order of the block's fixed fp32 sum, so the threshold is a constant
     * of the family (not this GPU's SM count): the same shape gives the same bits on every GPU. */
    bool wide = (w.n + 15) / 16 > wide_tiles;
    if (m <= 8)
        return wide ? launch_matvec_t<1, 1, 4>(w, a, m, c, stream) : launch_matvec_t<1, 1, 8>(w, a, m, c, stream);
    return wide ? launch_matvec_t<2, 1, 4>(w, a, m, c, stream) : launch_matvec_t<2, 1, 8>(w, a, m, c, stream);
}

} // namespace qmm
