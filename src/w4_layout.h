/*
 * The device layout of a W4 weight (done once, at upload; see src/w4_layout.c).
 *
 * Packed codes take the MLX size (N_pad * K/8 words), but the 16 words of each
 * (row, group of 128) are permuted so that the four lanes t = 0..3 of an mma quad each read one
 * 16-byte vector (words 4t..4t+3) holding exactly the codes their m16n8k16 fragment needs:
 * k ∈ {16c+2t, 16c+2t+1, 16c+2t+8, 16c+2t+9} for the eight 16-wide chunks c of the group.
 * Word j = 4t + (c/2) holds chunks c = 2j', 2j'+1 (j' = c/2, h = c%2) at:
 *   bits [8h,   8h+4)    k = 16c+2t        bits [16+8h,   16+8h+4)  k = 16c+2t+1
 *   bits [8h+4, 8h+8)    k = 16c+2t+8      bits [16+8h+4, 16+8h+8)  k = 16c+2t+9
 * so (word >> 8h) & 0x000F000F puts the codes of k = 16c+2t and 16c+2t+1 in the two bf16 halves
 * of a register, and (word >> (8h+4)) & 0x000F000F those of k+8, k+9.
 * The (row, group) pieces of 64 bytes are arranged in 128-row blocks: for one group, the block's
 * eight 16-row tiles follow each other (each tile's 16 rows one contiguous kilobyte, so a warp's
 * loads for one group are a single kilobyte), making the block's group one contiguous 8 KB piece
 * that a single bulk copy moves; the block's groups follow each other.
 * Rows are padded to a multiple of QMM_W4_ROW_PAD with zero codes, scales and biases.
 *
 * Scales and biases become one array sb[K/g][N_pad] of uint32: low half the bf16 scale, high half
 * the bf16 bias, so one group's values for consecutive rows are contiguous.
 *
 * Groups of 64 and 32 (g64, g32). The codes' layout above does not depend on the group size: it
 * is a layout of 128-column blocks (the "group" of the offsets below is always a block of 128),
 * and every kernel's k step (a tiled k-tile, a wgmma stage, a matvec ring slot) stays one block.
 * Only sb changes: it has K/g rows, so a block holds G = 128/g consecutive groups of scale|bias,
 * sb[b·G + i] for i = 0..G-1, and the block's chunk c (columns 16c..16c+15, the c of the code
 * positions above) belongs to group b·G + c/(8/G): chunks 0-3 | 4-7 at g64, pairs of chunks at
 * g32. A split of K into whole blocks is therefore a split into whole groups at every g. The
 * device layout needs K % 128 == 0 (every Qwen3 projection has it); other K run on the CPU.
 */
#ifndef QMM_W4_LAYOUT_H
#define QMM_W4_LAYOUT_H

#include <stdint.h>
#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QMM_W4_ROW_PAD 128

#ifdef __CUDACC__
#define QMM_W4_HD __host__ __device__
#else
#define QMM_W4_HD
#endif

/* Word offset of (row, 128-column block) in the device packed array (groups = K/128 blocks). */
static inline QMM_W4_HD int64_t qmm_w4_device_offset(int64_t row, int64_t group, int64_t groups)
{
    return ((row / 128) * groups + group) * 2048 + (row % 128) * 16;
}

/* Index in the permuted group (0..15 word, bit offset) of code k (0..127) of a group. */
static inline QMM_W4_HD void qmm_w4_device_position(int k, int *word, int *bit)
{
    int c = k / 16, r = k % 16;          /* chunk, position inside the chunk */
    int hi8 = r >= 8, rr = r % 8;        /* k+8 half of the fragment? */
    int t = rr / 2, odd = rr % 2;        /* quad lane, second of the pair? */
    int h = c % 2;
    *word = 4 * t + c / 2;
    *bit = 16 * odd + 8 * h + 4 * hi8;
}

#ifdef __CUDACC__
/* Row `row` of a device-layout weight (K = k, groups of 1 << gshift, scale|bias words sb[g][n_pad])
 * dequantized into out[0, k) in fp32 as fmaf(scale, q, bias) (qmm_dequantize_row_f32's values),
 * the block's threads on consecutive columns. */
static __device__ inline void qmm_w4_device_row_f32(const uint32_t *packed, const uint32_t *sb,
                                                    int64_t row, int k, int gshift, int64_t n_pad,
                                                    float *out)
{
    const int blocks = k / 128;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        int word, bit;
        qmm_w4_device_position(j % 128, &word, &bit);
        const uint32_t q = (packed[qmm_w4_device_offset(row, j / 128, blocks) + word] >> bit) & 0xFu;
        const uint32_t v = sb[(int64_t)(j >> gshift) * n_pad + row];
        out[j] = __fmaf_rn(__uint_as_float(v << 16), (float)q, __uint_as_float(v & 0xFFFF0000u));
    }
}
#endif

/* n_pad = N rounded up to QMM_W4_ROW_PAD; packed_out has n_pad*K/8 words, sb_out K/g*n_pad
 * (g = w->group). K must be a multiple of 128 (QMM_ERR_SHAPE otherwise). */
int64_t qmm_w4_device_rows(int64_t n);
qmm_status qmm_w4_to_device_layout(const qmm_w4 *w, uint32_t *packed_out, uint32_t *sb_out);

#ifdef __cplusplus
}
#endif

#endif
