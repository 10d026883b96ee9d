/* Host-side transform of a W4 weight into the device layout described in w4_layout.h. */
#include "w4_layout.h"

#include <string.h>

#include "cpu/threads.h"
#include "internal.h"

int64_t qmm_w4_device_rows(int64_t n)
{
    return (n + QMM_W4_ROW_PAD - 1) / QMM_W4_ROW_PAD * QMM_W4_ROW_PAD;
}

typedef struct layout_job {
    const qmm_w4 *w;
    uint32_t *packed, *sb;
    int64_t n_pad;
    int threads;
} layout_job;

/* Rows [n*t/T, n*(t+1)/T) of the transform: rows are independent, so threads split them. */
static void layout_rows(void *arg, int t)
{
    const layout_job *j = arg;
    const qmm_w4 *w = j->w;
    int64_t k = w->k, blocks = k / 128, groups = k / w->group, n_pad = j->n_pad;
    int64_t r0 = w->n * t / j->threads, r1 = w->n * (t + 1) / j->threads;
    for (int64_t r = r0; r < r1; r++) {
        const uint32_t *src = w->packed + r * (k / 8);
        for (int64_t bi = 0; bi < blocks; bi++) {
            /* qmm_w4_device_position, a source word at a time: word sw holds codes
             * k = 8sw..8sw+7, i.e. chunk c = sw/2, half hi8 = sw%2; its nibble pair t (codes
             * 16c+8hi8+2t, +1) goes to word 4t + c/2 at bits 8(c%2) + 4hi8 and 16 above */
            uint32_t out[16] = {0};
            const uint32_t *gs = src + bi * 16;
            for (int sw = 0; sw < 16; sw++) {
                uint32_t x = gs[sw];
                int c = sw / 2, base = 8 * (c % 2) + 4 * (sw % 2);
                for (int t = 0; t < 4; t++, x >>= 8)
                    out[4 * t + c / 2] |= ((x & 0xF) | ((x & 0xF0) << 12)) << base;
            }
            memcpy(j->packed + qmm_w4_device_offset(r, bi, blocks), out, sizeof out);
        }
        for (int64_t gi = 0; gi < groups; gi++)
            j->sb[gi * n_pad + r] =
                (uint32_t)w->scales[r * groups + gi] | ((uint32_t)w->biases[r * groups + gi] << 16);
    }
}

/* The device layout takes whole 128-column blocks (w4_layout.h). */
static qmm_status check_blocks(int64_t k, int group)
{
    if (k % 128)
        return qmm_fail(QMM_ERR_SHAPE, "K = %lld (groups of %d): the CUDA kernels take K a "
                        "multiple of 128 (the CPU path runs it)", (long long)k, group);
    return QMM_OK;
}

qmm_status qmm_w4_to_device_layout(const qmm_w4 *w, uint32_t *packed_out, uint32_t *sb_out)
{
    qmm_status st = qmm_w4_validate(w);
    if (st == QMM_OK) st = check_blocks(w->k, w->group);
    if (st != QMM_OK) return st;
    if (!packed_out || !sb_out) return qmm_fail(QMM_ERR_NULL, "output buffers are NULL");
    layout_job j = {.w = w, .packed = packed_out, .sb = sb_out, .n_pad = qmm_w4_device_rows(w->n)};
    /* padding rows are zero codes, scales and biases (the real rows are written whole) */
    int64_t blocks = w->k / 128, groups = w->k / w->group;
    for (int64_t r = w->n; r < j.n_pad; r++) {
        for (int64_t bi = 0; bi < blocks; bi++)
            memset(packed_out + qmm_w4_device_offset(r, bi, blocks), 0, 16 * sizeof(uint32_t));
        for (int64_t gi = 0; gi < groups; gi++) sb_out[gi * j.n_pad + r] = 0;
    }
    /* every core for large weights (Qwen3-4B's session spends seconds here), one for small */
    int64_t bytes = w->n * w->k / 2;
    j.threads = bytes < ((int64_t)1 << 20) ? 1 : qmm_cpu_online();
    if (j.threads > w->n) j.threads = (int)w->n;
    qmm_parallel_run(j.threads, layout_rows, &j);
    return QMM_OK;
}

qmm_status qmm_w4_device_image_bytes_group(int64_t n, int64_t k, int group, size_t *packed_bytes,
                                           size_t *sb_bytes)
{
    if (!packed_bytes || !sb_bytes) return qmm_fail(QMM_ERR_NULL, "output pointers are NULL");
    size_t words = 0, groups = 0;
    qmm_status st = qmm_w4_sizes_group(n, k, group, &words, &groups, NULL);
    if (st == QMM_OK) st = check_blocks(k, group);
    if (st != QMM_OK) return st;
    int64_t n_pad = qmm_w4_device_rows(n);
    size_t pw, ps;
    if (!qmm_mul_size((size_t)n_pad, (size_t)(k / 8) * 4, &pw) ||
        !qmm_mul_size((size_t)n_pad, (size_t)(k / group) * 4, &ps))
        return qmm_fail(QMM_ERR_OVERFLOW, "device image of N = %lld, K = %lld overflows size_t",
                        (long long)n, (long long)k);
    *packed_bytes = pw;
    *sb_bytes = ps;
    return QMM_OK;
}

qmm_status qmm_w4_device_image_bytes(int64_t n, int64_t k, size_t *packed_bytes, size_t *sb_bytes)
{
    return qmm_w4_device_image_bytes_group(n, k, QMM_GROUP, packed_bytes, sb_bytes);
}

qmm_status qmm_w4_device_image(const qmm_w4 *w, void *packed, size_t packed_bytes, void *sb,
                               size_t sb_bytes)
{
    if (!w || !packed || !sb) return qmm_fail(QMM_ERR_NULL, "w, packed or sb is NULL");
    size_t pb, sbb;
    qmm_status st = qmm_w4_validate(w);
    if (st == QMM_OK) st = qmm_w4_device_image_bytes_group(w->n, w->k, w->group, &pb, &sbb);
    if (st != QMM_OK) return st;
    if (packed_bytes < pb || sb_bytes < sbb)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "device image needs %zu + %zu bytes, got %zu + %zu",
                        pb, sbb, packed_bytes, sb_bytes);
    if (((uintptr_t)packed | (uintptr_t)sb) % 4)
        return qmm_fail(QMM_ERR_ALIGN, "device image buffers must be 4-byte aligned");
    return qmm_w4_to_device_layout(w, (uint32_t *)packed, (uint32_t *)sb);
}
