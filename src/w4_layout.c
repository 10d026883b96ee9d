/* Host-side transform of a W4 weight into the device layout described in w4_layout.h. */
#include "w4_layout.h"

#include <string.h>

#include "internal.h"

int64_t qmm_w4_device_rows(int64_t n)
{
    return (n + QMM_W4_ROW_PAD - 1) / QMM_W4_ROW_PAD * QMM_W4_ROW_PAD;
}

qmm_status qmm_w4_to_device_layout(const qmm_w4 *w, uint32_t *packed_out, uint32_t *sb_out)
{
    qmm_status st = qmm_w4_validate(w);
    if (st != QMM_OK) return st;
    if (!packed_out || !sb_out) return qmm_fail(QMM_ERR_NULL, "output buffers are NULL");
    int64_t n = w->n, k = w->k, g = k / QMM_GROUP, n_pad = qmm_w4_device_rows(n);
    int word_of[QMM_GROUP], bit_of[QMM_GROUP];
    for (int j = 0; j < QMM_GROUP; j++) qmm_w4_device_position(j, &word_of[j], &bit_of[j]);

    memset(packed_out, 0, (size_t)n_pad * (size_t)(k / 8) * sizeof(uint32_t));
    memset(sb_out, 0, (size_t)g * (size_t)n_pad * sizeof(uint32_t));
    for (int64_t r = 0; r < n; r++) {
        const uint32_t *src = w->packed + r * (k / 8);
        for (int64_t gi = 0; gi < g; gi++) {
            uint32_t out[16] = {0};
            for (int j = 0; j < QMM_GROUP; j++) {
                uint32_t q = (src[gi * 16 + j / 8] >> (4 * (j % 8))) & 0xF;
                out[word_of[j]] |= q << bit_of[j];
            }
            memcpy(packed_out + qmm_w4_device_offset(r, gi, g), out, sizeof out);
            sb_out[gi * n_pad + r] =
                (uint32_t)w->scales[r * g + gi] | ((uint32_t)w->biases[r * g + gi] << 16);
        }
    }
    return QMM_OK;
}

qmm_status qmm_w4_device_image_bytes(int64_t n, int64_t k, size_t *packed_bytes, size_t *sb_bytes)
{
    if (!packed_bytes || !sb_bytes) return qmm_fail(QMM_ERR_NULL, "output pointers are NULL");
    size_t words = 0, groups = 0;
    qmm_status st = qmm_w4_sizes(n, k, &words, &groups, NULL);
    if (st != QMM_OK) return st;
    int64_t n_pad = qmm_w4_device_rows(n);
    size_t pw, ps;
    if (!qmm_mul_size((size_t)n_pad, (size_t)(k / 8) * 4, &pw) ||
        !qmm_mul_size((size_t)n_pad, (size_t)(k / QMM_GROUP) * 4, &ps))
        return qmm_fail(QMM_ERR_OVERFLOW, "device image of N = %lld, K = %lld overflows size_t",
                        (long long)n, (long long)k);
    *packed_bytes = pw;
    *sb_bytes = ps;
    return QMM_OK;
}

qmm_status qmm_w4_device_image(const qmm_w4 *w, void *packed, size_t packed_bytes, void *sb,
                               size_t sb_bytes)
{
    if (!w || !packed || !sb) return qmm_fail(QMM_ERR_NULL, "w, packed or sb is NULL");
    size_t pb, sbb;
    qmm_status st = qmm_w4_validate(w);
    if (st == QMM_OK) st = qmm_w4_device_image_bytes(w->n, w->k, &pb, &sbb);
    if (st != QMM_OK) return st;
    if (packed_bytes < pb || sb_bytes < sbb)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "device image needs %zu + %zu bytes, got %zu + %zu",
                        pb, sbb, packed_bytes, sb_bytes);
    if (((uintptr_t)packed | (uintptr_t)sb) % 4)
        return qmm_fail(QMM_ERR_ALIGN, "device image buffers must be 4-byte aligned");
    return qmm_w4_to_device_layout(w, (uint32_t *)packed, (uint32_t *)sb);
}
