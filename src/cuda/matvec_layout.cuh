/* The decode matvec's CTA layout shared by the kernel (matvec.cu) and its shape choice
 * (matvec_shape.cu): the shared memory of a CTA, the launch bounds, the kernels' index. */
#ifndef QMM_CUDA_MATVEC_LAYOUT_CUH
#define QMM_CUDA_MATVEC_LAYOUT_CUH

#include <stddef.h>

#include "kernels.h"

namespace qmm {

constexpr int MV_WARPS = 8; /* the most warps a CTA (4 or 8: matvec_choose_shape) */
constexpr int MV_MAX_CLUSTER = 8;
constexpr int MV_SMEM_MAX = 227 * 1024, MV_SMEM_SM = 228 * 1024;

/* Groups of loads in flight a lane (40 bytes each at groups of 128, 32 + 8·G with G groups a
 * block): 3 with one token tile (80 registers, three CTAs a SM), 4 with two (two CTAs a SM); the
 * shape choice counts a warp's rounds of them. */
__host__ __device__ constexpr int mv_depth(int tokt) { return tokt == 1 ? 3 : 4; }
/* CTAs a SM by the launch bounds: 8 warps with one token tile 3 (80 registers), with two 2,
 * 4 warps 5 (95 registers). The bound also caps how many CTAs of a launch one SM takes: under
 * PDL a launch's CTAs fill the SMs that free first up to it, so at 6 the 4-warp shapes' 608–640
 * CTAs (4.6–4.9 a SM) put 6 on some SMs, which ended the launch; at 5 (the same SASS) gate at
 * one token ran 6.7 → 6.1 µs and decode 5–6 % faster (down, whose 640 CTAs in clusters of 8 no
 * longer fit one wave, moved to 8-warp CTAs; NOTES.md rows 139, 141, 147). */
__host__ __device__ constexpr int mv_ctas_bound(int tokt, int w) { return w == 4 ? 5 : tokt == 1 ? 3 : 2; }
/* MatvecScratch.cluster_ctas's kernel index: one token tile in 8 warps, two in 8, one in 4. */
constexpr int mv_kernel_index(int tokt, int w) { return w == 4 ? 2 : tokt == 1 ? 0 : 1; }

/* The staged activations' rounds (experiment, NOTES row 182): a warp's first groups, its
 * second, its third and fourth, ... its ninth on, each round's bytes on a barrier of its own. */
constexpr int MV_ROUNDS_MAX = 5;

/* Shared memory of a CTA that stages kr groups of m activation rows (rounds: the barriers of
 * rounds 1... after the staging's and the cluster sum's). */
struct MvSmem {
    int a_stride; /* bf16 a staged row: kr·128 + 8 (ldmatrix rows on distinct banks) */
    size_t a_off, red_off, ys_off, inv_off, bar_off, bytes;
    __host__ __device__ MvSmem(int m, int kr, int toks, int rows, bool rounds = false)
    {
        a_stride = kr * 128 + 8;
        a_off = 0;
        red_off = (a_off + (size_t)m * a_stride * 2 + 15) / 16 * 16;
        ys_off = red_off + (size_t)MV_WARPS * toks * 16 * 4; /* the most warps a CTA */
        inv_off = ys_off + (size_t)MV_MAX_CLUSTER * m * rows * 4;
        bar_off = inv_off + 16 * 4; /* the staging's mbarrier, then the cluster sum's */
        bytes = bar_off + 16 + (rounds ? 8 * (MV_ROUNDS_MAX - 1) : 0);
    }
};

/* Dynamic shared memory of a launch of shape (R tiles, C CTAs a cluster), staged at once or
 * in rounds. */
size_t matvec_smem_bytes(const MatvecArgs &p, int R, int C, bool rounds = false);

} // namespace qmm

#endif
