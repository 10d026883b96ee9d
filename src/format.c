/* The W4 weight format (DESIGN.md §3), groups of 32, 64 or 128: sizes, allocation, validation,
 * quantize, dequantize. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "internal.h"

#define BF16_MIN_NORMAL ((qmm_bf16)0x0080) /* 2^-126, the smallest positive normal bf16 */

/* ---- sizes and descriptors ---- */

qmm_status qmm_w4_sizes_group(int64_t n, int64_t k, int group, size_t *packed_words,
                              size_t *group_count, size_t *total_bytes)
{
    qmm_clear_error();
    if (!QMM_GROUP_OK(group))
        return qmm_fail(QMM_ERR_ARG, "group size %d is not supported (32, 64 or 128)", group);
    if (n < 1 || k < 1)
        return qmm_fail(QMM_ERR_SHAPE, "W is [N = %lld, K = %lld]; both must be >= 1",
                        (long long)n, (long long)k);
    if (k % group)
        return qmm_fail(QMM_ERR_SHAPE, "K = %lld is not a multiple of the group size %d",
                        (long long)k, group);
    /* Everything else is a fraction of the element count, so checking n*k once is enough:
     * words = nk/8, groups = nk/g, bytes = 4*words + 2*2*groups < nk. */
    size_t elems;
    if ((uint64_t)n > SIZE_MAX || (uint64_t)k > SIZE_MAX || !qmm_mul_size((size_t)n, (size_t)k, &elems))
        return qmm_fail(QMM_ERR_OVERFLOW, "W [%lld, %lld] has more elements than size_t holds",
                        (long long)n, (long long)k);
    size_t words = elems / 8, groups = elems / (size_t)group;
    if (packed_words) *packed_words = words;
    if (group_count) *group_count = groups;
    if (total_bytes) *total_bytes = words * sizeof(uint32_t) + 2 * groups * sizeof(qmm_bf16);
    return QMM_OK;
}

qmm_status qmm_w4_sizes(int64_t n, int64_t k, size_t *packed_words, size_t *group_count,
                        size_t *total_bytes)
{
    return qmm_w4_sizes_group(n, k, QMM_GROUP, packed_words, group_count, total_bytes);
}

qmm_status qmm_w4_alloc_group(int64_t n, int64_t k, int group, qmm_w4 *w)
{
    if (!w) return qmm_fail(QMM_ERR_NULL, "qmm_w4_alloc: w is NULL");
    size_t words, groups;
    qmm_status st = qmm_w4_sizes_group(n, k, group, &words, &groups, NULL);
    if (st) return st;
    qmm_w4 out = {n, k, calloc(words, sizeof(uint32_t)), calloc(groups, sizeof(qmm_bf16)),
                  calloc(groups, sizeof(qmm_bf16)), words, groups, groups, group};
    if (!out.packed || !out.scales || !out.biases) {
        qmm_w4_free(&out);
        return qmm_fail(QMM_ERR_NOMEM, "cannot allocate a [%lld, %lld] W4 weight",
                        (long long)n, (long long)k);
    }
    *w = out;
    return QMM_OK;
}

qmm_status qmm_w4_alloc(int64_t n, int64_t k, qmm_w4 *w)
{
    return qmm_w4_alloc_group(n, k, QMM_GROUP, w);
}

void qmm_w4_free(qmm_w4 *w)
{
    if (!w) return;
    free(w->packed);
    free(w->scales);
    free(w->biases);
    qmm_w4 empty = {0};
    *w = empty;
}

qmm_status qmm_w4_validate(const qmm_w4 *w)
{
    qmm_clear_error();
    if (!w) return qmm_fail(QMM_ERR_NULL, "weight descriptor is NULL");
    if (!QMM_GROUP_OK(w->group))
        return qmm_fail(QMM_ERR_ARG, "weight descriptor: group size %d is not supported (32, 64 "
                        "or 128; set w->group)", w->group);
    size_t words, groups;
    qmm_status st = qmm_w4_sizes_group(w->n, w->k, w->group, &words, &groups, NULL);
    if (st) return st;
    if (!w->packed || !w->scales || !w->biases)
        return qmm_fail(QMM_ERR_NULL, "weight buffer is NULL (packed %p, scales %p, biases %p)",
                        (void *)w->packed, (void *)w->scales, (void *)w->biases);
    /* every path reads these as uint32 and bf16: a misaligned buffer is refused, not read
     * with misaligned loads (undefined behaviour in C, a fault on some targets) */
    if ((uintptr_t)w->packed % 4 || (uintptr_t)w->scales % 2 || (uintptr_t)w->biases % 2)
        return qmm_fail(QMM_ERR_ALIGN, "weight buffers must be aligned to their element size "
                        "(packed %p: 4 bytes, scales %p and biases %p: 2 bytes)",
                        (void *)w->packed, (void *)w->scales, (void *)w->biases);
    if (w->packed_count != words || w->scales_count != groups || w->biases_count != groups)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH,
                        "W [%lld, %lld] in groups of %d needs %zu packed words and %zu scales "
                        "and biases; the descriptor says %zu, %zu, %zu",
                        (long long)w->n, (long long)w->k, w->group, words, groups, w->packed_count,
                        w->scales_count, w->biases_count);
    return QMM_OK;
}

/* ---- quantize ---- */

/* x[0..g-1] = src[at..at+g-1] as f32 */
static void load_group(const void *src, qmm_dtype t, size_t at, int g, float *x)
{
    for (int i = 0; i < g; i++) {
        switch (t) {
        case QMM_BF16: x[i] = qmm_bf16_to_f32(((const qmm_bf16 *)src)[at + i]); break;
        case QMM_F16: x[i] = qmm_f16_to_f32(((const qmm_f16 *)src)[at + i]); break;
        case QMM_F32: x[i] = ((const float *)src)[at + i]; break;
        }
    }
}

/* The affine parameters of one group x[g] (finite). The edge of larger magnitude is the bias
 * so the scale's sign follows the data (MLX's rule). A zero or tiny range gets the smallest
 * normal scale, so division stays finite; *flat says every code is 0 (all values equal).
 * Returns 0 when the group's magnitude does not fit bf16 (its scale or bias would be Inf). */
static int group_params(const float *x, int g, qmm_bf16 *scale, qmm_bf16 *bias, int *flat)
{
    float lo = x[0], hi = x[0];
    for (int i = 1; i < g; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    int low_edge = fabsf(lo) > fabsf(hi);
    double step = ((double)hi - (double)lo) / 15.0; /* in double: hi - lo may overflow f32 */
    qmm_bf16 s = qmm_f32_to_bf16((float)(low_edge ? step : -step));
    qmm_bf16 b = qmm_f32_to_bf16(low_edge ? lo : hi);
    float sf = qmm_bf16_to_f32(s), bf = qmm_bf16_to_f32(b);
    if (!isfinite(sf) || !isfinite(bf)) return 0;
    if (fabsf(sf) < FLT_MIN) s = (qmm_bf16)((low_edge ? 0 : 0x8000) | BF16_MIN_NORMAL);
    *scale = s;
    *bias = b;
    *flat = lo == hi;
    return 1;
}

/* The code of x: clamp(rint((x - bias) / scale), 0, 15) with the rounded scale and bias. */
static uint32_t quant_code(float x, float scale, float bias)
{
    double t = rint(((double)x - (double)bias) / (double)scale);
    return t <= 0 ? 0u : t >= 15 ? 15u : (uint32_t)t;
}

/* The library's dequantized value: fmaf(scale, q, bias), one rounding, as the reference uses. */
static float dequant(float scale, uint32_t q, float bias) { return fmaf(scale, (float)q, bias); }

// src is [N, K] row-major in src_type; w is [N, K] preallocated
qmm_status qmm_quantize(const void *src, qmm_dtype src_type, qmm_w4 *w, qmm_quant_error *err)
{
    qmm_clear_error();
    if (!src) return qmm_fail(QMM_ERR_NULL, "qmm_quantize: src is NULL");
    if (src_type != QMM_BF16 && src_type != QMM_F16 && src_type != QMM_F32)
        return qmm_fail(QMM_ERR_DTYPE, "qmm_quantize: unknown source dtype %d", (int)src_type);
    if ((uintptr_t)src % qmm_dtype_size(src_type))
        return qmm_fail(QMM_ERR_ALIGN, "qmm_quantize: src %p is not aligned to its %zu-byte "
                        "elements", src, qmm_dtype_size(src_type));
    qmm_status st = qmm_w4_validate(w);
    if (st) return st;

    int gs = w->group;
    size_t n = (size_t)w->n, k = (size_t)w->k, groups_per_row = k / (size_t)gs;
    float x[QMM_GROUP]; /* the largest group */

    /* Pass 1 checks everything (non-finite input, groups too large for bf16) so that a failure
     * leaves w untouched; pass 2 writes. */
    for (size_t g = 0; g < n * groups_per_row; g++) {
        load_group(src, src_type, g * (size_t)gs, gs, x);
        for (int i = 0; i < gs; i++)
            if (!isfinite(x[i]))
                return qmm_fail(QMM_ERR_RANGE, "qmm_quantize: src[%zu][%zu] = %g is not finite",
                                g / groups_per_row, (g % groups_per_row) * (size_t)gs + (size_t)i, x[i]);
        qmm_bf16 s, b;
        int flat;
        if (!group_params(x, gs, &s, &b, &flat))
            return qmm_fail(QMM_ERR_RANGE, "qmm_quantize: row %zu, columns %zu..%zu: the scale or "
                            "bias of this group does not fit bf16", g / groups_per_row,
                            (g % groups_per_row) * (size_t)gs, (g % groups_per_row + 1) * (size_t)gs - 1);
    }

    double max_abs = 0, sum_err2 = 0, sum_w2 = 0;
    for (size_t g = 0; g < n * groups_per_row; g++) {
        load_group(src, src_type, g * (size_t)gs, gs, x);
        qmm_bf16 s, b;
        int flat;
        group_params(x, gs, &s, &b, &flat);
        float sf = qmm_bf16_to_f32(s), bf = qmm_bf16_to_f32(b);
        w->scales[g] = s;
        w->biases[g] = b;
        uint32_t *words = w->packed + g * (size_t)(gs / 8);
        for (int i = 0; i < gs; i += 8) {
            uint32_t word = 0;
            for (int c = 0; c < 8; c++) {
                uint32_t q = flat ? 0u : quant_code(x[i + c], sf, bf);
                word |= q << (4 * c);
                double e = (double)x[i + c] - dequant(sf, q, bf);
                if (fabs(e) > max_abs) max_abs = fabs(e);
                sum_err2 += e * e;
                sum_w2 += (double)x[i + c] * x[i + c];
            }
            words[i / 8] = word;
        }
    }
    if (err) {
        err->max_abs = max_abs;
        err->rms = sqrt(sum_err2 / ((double)n * (double)k));
        err->rel_frob = sum_w2 > 0 ? sqrt(sum_err2 / sum_w2) : 0;
    }
    return QMM_OK;
}

/* ---- dequantize ---- */

/* out[K] = row r of W (descriptor already validated) */
static void dequant_row(const qmm_w4 *w, size_t r, float *out)
{
    size_t k = (size_t)w->k, g = (size_t)w->group, gpr = k / g;
    const uint32_t *words = w->packed + r * (k / 8);
    for (size_t j = 0; j < k; j++) {
        float s = qmm_bf16_to_f32(w->scales[r * gpr + j / g]);
        float b = qmm_bf16_to_f32(w->biases[r * gpr + j / g]);
        out[j] = dequant(s, (words[j / 8] >> (4 * (j % 8))) & 0xFu, b);
    }
}

// w is [N, K]; dst is [N, K] row-major in dst_type, dst_count elements
qmm_status qmm_dequantize(const qmm_w4 *w, void *dst, qmm_dtype dst_type, size_t dst_count)
{
    qmm_clear_error();
    qmm_status st = qmm_w4_validate(w);
    if (st) return st;
    if (!dst) return qmm_fail(QMM_ERR_NULL, "qmm_dequantize: dst is NULL");
    size_t esize = qmm_dtype_size(dst_type);
    if (!esize) return qmm_fail(QMM_ERR_DTYPE, "qmm_dequantize: unknown dtype %d", (int)dst_type);
    if ((uintptr_t)dst % esize)
        return qmm_fail(QMM_ERR_ALIGN, "qmm_dequantize: dst %p is not aligned to its %zu-byte "
                        "elements", dst, esize);
    size_t n = (size_t)w->n, k = (size_t)w->k, bytes;
    if (!qmm_mul_size(n * k, esize, &bytes)) /* n*k itself was checked by validate */
        return qmm_fail(QMM_ERR_OVERFLOW, "[%zu, %zu] %s does not fit size_t bytes", n, k,
                        qmm_dtype_name(dst_type));
    if (dst_count != n * k)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "dst has %zu elements; W [%zu, %zu] needs %zu",
                        dst_count, n, k, n * k);

    float *row = malloc(k * sizeof *row);
    if (!row) return qmm_fail(QMM_ERR_NOMEM, "qmm_dequantize: no memory for one row");
    for (size_t r = 0; r < n; r++) {
        dequant_row(w, r, row);
        for (size_t j = 0; j < k; j++) {
            size_t at = r * k + j;
            switch (dst_type) {
            case QMM_BF16: ((qmm_bf16 *)dst)[at] = qmm_f32_to_bf16(row[j]); break;
            case QMM_F16: ((qmm_f16 *)dst)[at] = qmm_f32_to_f16(row[j]); break;
            case QMM_F32: ((float *)dst)[at] = row[j]; break;
            }
        }
    }
    free(row);
    return QMM_OK;
}

// w is [N, K]; out is [K]
qmm_status qmm_dequantize_row_f32(const qmm_w4 *w, int64_t n, float *out)
{
    qmm_clear_error();
    qmm_status st = qmm_w4_validate(w);
    if (st) return st;
    if (!out) return qmm_fail(QMM_ERR_NULL, "qmm_dequantize_row_f32: out is NULL");
    if ((uintptr_t)out % sizeof(float))
        return qmm_fail(QMM_ERR_ALIGN, "qmm_dequantize_row_f32: out %p is not 4-byte aligned",
                        (void *)out);
    if (n < 0 || n >= w->n)
        return qmm_fail(QMM_ERR_ARG, "row %lld is outside W's rows [0, %lld)", (long long)n,
                        (long long)w->n);
    dequant_row(w, (size_t)n, out);
    return QMM_OK;
}
