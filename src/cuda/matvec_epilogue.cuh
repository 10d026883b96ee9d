/* The decode matvec's epilogues (matvec.cu's kernel, after its CTA's sums): store, residual
 * (x += bf16(y) in fp32, and the next RMSNorm's inputs), SwiGLU, fp32 store; and the residual's
 * values read early, before the dependency wait (weights) or right after it (x); and the map of
 * a CTA's tiles, which the kernel shares. */
#ifndef QMM_CUDA_MATVEC_EPILOGUE_CUH
#define QMM_CUDA_MATVEC_EPILOGUE_CUH

#include "kernels.h"
#include "hopper.cuh"

namespace qmm {

/* The 16-row tile i (< R = 2^lr) of row set s: with R >= 2, R/2 gate tiles of a 128-row block
 * and the matching up tiles 4 further (the SwiGLU layout); other epilogues do not care. */
__device__ __forceinline__ int mv_tile_lg(int s, int i, int lr)
{
    if (lr == 0) return s;
    const int half = 1 << (lr - 1), pb_lg = 3 - lr; /* row sets a 128-row block: 8 / R */
    const int j0 = (s & ((1 << pb_lg) - 1)) << (lr - 1);
    return ((s >> pb_lg) << 3) + (i < half ? j0 + i : 4 + j0 + i - half);
}


/* The residual epilogue's values for a warp's first (token, tile) pair, read early: lanes < 16
 * hold their row's x and γ (ok: the row exists and this CTA writes the result). */
struct MvResidualPre {
    float x, g;
    bool ok;
    const float *xp; /* the row's x, read after the wait */
};
__device__ __forceinline__ void mv_residual_pre_weights(const MatvecArgs &p, MvResidualPre &pre, int set,
                                                        int lr, int rank)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, pr = warp;
    const int row = mv_tile_lg(set, pr & ((1 << lr) - 1), lr) * 16 + lane % 16;
    pre.ok = p.epi == MV_EPI_RESIDUAL && rank == 0 && pr < (p.m << lr) && lane < 16 && row < p.n;
    pre.x = 0.f;
    pre.g = pre.ok && p.xg ? __bfloat162float(p.gamma[row]) : 0.f;
    /* as an integer: p.x is NULL outside the residual epilogue (only dereferenced when ok) */
    pre.xp = (const float *)((uintptr_t)p.x + (uintptr_t)(((int64_t)(pr >> lr) * p.ldc + row) * 4));
}
__device__ __forceinline__ void mv_residual_pre_x(MvResidualPre &pre)
{
    if (pre.ok) pre.x = *pre.xp;
}

/* The epilogue of a row set from its fp32 sums ys[t][i·16 + r] (tile i, row r), all threads;
 * the store takes V = 1 or 4 consecutive rows a thread (4, from two tokens on: one 8-byte store
 * where the rows and the output allow it; M = 8 −3 %, NOTES row 236). */
template <int V = 1>
static __device__ void mv_epilogue(const MatvecArgs &p, const float *ys, const float *inv, int set, int lr,
                                   const MvResidualPre &pre)
{
    const int m = p.m, tid = threadIdx.x, R = 1 << lr, rows = R * 16; /* shifts, not divisions */
    if (p.epi == MV_EPI_SWIGLU) { /* R even: tile i < R/2 gate rows, tile i + R/2 their up rows */
        const int half = R / 2;
        for (int e = tid; e < m * half * 16; e += blockDim.x) {
            const int t = e >> (lr + 3), i = (e >> 4) & (half - 1), r = e & 15;
            const int tile = mv_tile_lg(set, i, lr), j = (tile / 8) * 64 + (tile % 8) * 16 + r;
            if (j >= p.n / 2) continue;
            const float g = __bfloat162float(__float2bfloat16_rn(ys[t * rows + i * 16 + r] * inv[t]));
            const float u = __bfloat162float(__float2bfloat16_rn(ys[t * rows + (i + half) * 16 + r] * inv[t]));
            p.c[(int64_t)t * p.ldc + j] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
        }
        return;
    }
    if (V == 4 && p.epi == MV_EPI_STORE && p.ldc % 4 == 0 && (uintptr_t)p.c % 8 == 0) {
        for (int e = 4 * tid; e < m * rows; e += 4 * blockDim.x) {
            const int t = e >> (lr + 4), i = (e >> 4) & (R - 1), r = e & 15;
            const int row = mv_tile_lg(set, i, lr) * 16 + r;
            __nv_bfloat16 *c = p.c + (int64_t)t * p.ldc + row;
            if (row + 3 < p.n) {
                const __nv_bfloat162 lo = __floats2bfloat162_rn(ys[e] * inv[t], ys[e + 1] * inv[t]);
                const __nv_bfloat162 hi = __floats2bfloat162_rn(ys[e + 2] * inv[t], ys[e + 3] * inv[t]);
                uint2 v;
                v.x = *reinterpret_cast<const uint32_t *>(&lo), v.y = *reinterpret_cast<const uint32_t *>(&hi);
                *reinterpret_cast<uint2 *>(c) = v;
            } else
                for (int j = 0; j < 4 && row + j < p.n; j++) c[j] = __float2bfloat16_rn(ys[e + j] * inv[t]);
        }
        return;
    }
    if (p.epi == MV_EPI_STORE) {
        for (int e = tid; e < m * rows; e += blockDim.x) {
            const int t = e >> (lr + 4), i = (e >> 4) & (R - 1), r = e & 15;
            const int row = mv_tile_lg(set, i, lr) * 16 + r;
            if (row < p.n) p.c[(int64_t)t * p.ldc + row] = __float2bfloat16_rn(ys[e] * inv[t]);
        }
        return;
    }
    if (p.epi == MV_EPI_STORE_F32) { /* y unrounded: a tensor-parallel rank's partial sum */
        for (int e = tid; e < m * rows; e += blockDim.x) {
            const int t = e >> (lr + 4), i = (e >> 4) & (R - 1), r = e & 15;
            const int row = mv_tile_lg(set, i, lr) * 16 + r;
            if (row < p.n) p.x[(int64_t)t * p.ldc + row] = ys[e] * inv[t];
        }
        return;
    }
    /* residual: x (fp32) += bf16(y); xg = bf16(x·γ); ss[t][tile] = Σ x² over the tile's rows.
     * Warp w takes the (token, tile) pairs w, w + 8, ...: one row a lane (16 lanes), then a sum
     * over the 16 lanes in a fixed order. */
    const int warp = tid / 32, lane = tid % 32;
    for (int pr = warp; pr < m * R; pr += blockDim.x / 32) {
        const int t = pr >> lr, i = pr & (R - 1), tile = mv_tile_lg(set, i, lr), row = tile * 16 + (lane % 16);
        float ss = 0.f;
        if (lane < 16 && row < p.n) {
            const float y = __bfloat162float(__float2bfloat16_rn(ys[t * rows + i * 16 + lane] * inv[t]));
            const bool early = pr == warp; /* pre holds this row's x and γ */
            float *xp = p.x + (int64_t)t * p.ldc + row;
            const float x = (early ? pre.x : *xp) + y;
            *xp = x;
            ss = x * x;
            if (p.xg)
                p.xg[(int64_t)t * p.ldc + row] =
                    __float2bfloat16_rn(x * (early ? pre.g : __bfloat162float(p.gamma[row])));
        }
#pragma unroll
        for (int o = 8; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane == 0 && p.ss_out && tile < p.ss_out_blocks) p.ss_out[(int64_t)t * p.ss_out_blocks + tile] = ss;
    }
}

} // namespace qmm

#endif
