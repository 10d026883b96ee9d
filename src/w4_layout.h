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
 * Scales and biases become one array sb[K/128][N_pad] of uint32: low half the bf16 scale, high half
 * the bf16 bias, so one group's values for consecutive rows are contiguous.
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

/* Word offset of (row, group) in the device packed array (groups = K/128). */
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

/* n_pad = N rounded up to QMM_W4_ROW_PAD; packed_out has n_pad*K/8 words, sb_out K/128*n_pad. */
int64_t qmm_w4_device_rows(int64_t n);
qmm_status qmm_w4_to_device_layout(const qmm_w4 *w, uint32_t *packed_out, uint32_t *sb_out);

#ifdef __cplusplus
}
#endif

#endif
