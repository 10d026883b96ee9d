/* The W4 format (groups of 32, 64, 128): sizes, bit layout against hand-computed words, quantize/dequantize round
 * trip within the error bound, signed scales, zero-range groups, and source dtypes agreeing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void sizes(void)
{
    size_t words = 0, groups = 0, bytes = 0;
    CHECK_OK(qmm_w4_sizes(3, 256, &words, &groups, &bytes));
    CHECK(words == 96 && groups == 6 && bytes == 96 * 4 + 6 * 2 * 2);
    CHECK_OK(qmm_w4_sizes(4096, 2560, NULL, NULL, &bytes));
    CHECK(bytes == (size_t)(4096.0 * 2560 * 0.53125)); /* 0.53125 bytes per weight */
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(5, 384, &w));
    CHECK(w.n == 5 && w.k == 384 && w.packed_count == 240 && w.scales_count == 15 &&
          w.biases_count == 15 && w.packed && w.scales && w.biases);
    CHECK_OK(qmm_w4_validate(&w));
    qmm_w4_free(&w);
    CHECK(!w.packed && !w.scales && !w.biases && w.n == 0);
    qmm_w4_free(&w); /* freeing twice is harmless */
    qmm_w4_free(NULL);
}

/* One row x[0..127] = -15 + (j % 16): the negative edge is larger, so bias = -15 and the scale
 * is +1; codes are j % 16, i.e. words 0x76543210, 0xFEDCBA98 alternating. Mirrored (-x): the
 * positive edge is larger, bias = 15, scale = -1, and the codes are the same. */
static void layout_hand_computed(void)
{
    static const struct { float sign; qmm_bf16 scale, bias; } cases[] = {
        {1, 0x3F80, 0xC170}, {-1, 0xBF80, 0x4170}};
    float x[QMM_GROUP];
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(1, QMM_GROUP, &w));
    for (int c = 0; c < 2; c++) {
        for (int j = 0; j < QMM_GROUP; j++) x[j] = cases[c].sign * (float)(-15 + j % 16);
        CHECK_OK(qmm_quantize(x, QMM_F32, &w, NULL));
        CHECKF(w.scales[0] == cases[c].scale && w.biases[0] == cases[c].bias,
               "sign %+.0f: scale 0x%04x bias 0x%04x", cases[c].sign, w.scales[0], w.biases[0]);
        for (int i = 0; i < QMM_GROUP / 8; i++)
            CHECKF(w.packed[i] == (i % 2 ? 0xFEDCBA98u : 0x76543210u), "sign %+.0f: word %d = 0x%08x",
                   cases[c].sign, i, w.packed[i]);
    }
    qmm_w4_free(&w);
}

/* Dequantize hand-written words: column j of row r reads nibble j % 8 of word j / 8, LSB first,
 * with the scale and bias of group j / 128. */
static void layout_dequantize_hand_words(void)
{
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(2, 2 * QMM_GROUP, &w));
    for (size_t i = 0; i < w.packed_count; i++) w.packed[i] = 0x76543210u;
    w.packed[0] = 0x0000000Fu;             /* row 0: column 0 is 15, columns 1..7 are 0 */
    w.packed[w.packed_count - 1] = 0xF0000000u; /* row 1: the last column is 15 */
    qmm_bf16 sc[4] = {0x3F00, 0xBF80, 0x4000, 0x3E80}; /* 0.5, -1, 2, 0.25 */
    qmm_bf16 bi[4] = {0xBF80, 0x4000, 0x0000, 0x3F80}; /* -1, 2, 0, 1 */
    memcpy(w.scales, sc, sizeof sc);
    memcpy(w.biases, bi, sizeof bi);
    float *d = malloc(2 * 256 * sizeof *d);
    CHECK_OK(qmm_dequantize(&w, d, QMM_F32, 2 * 256));
    CHECK(d[0] == 0.5f * 15 - 1 && d[1] == -1.0f && d[7] == -1.0f);
    CHECK(d[8] == -1.0f && d[9] == -0.5f && d[15] == 0.5f * 7 - 1); /* 0x76543210 */
    CHECK(d[128] == 2.0f && d[129] == 1.0f && d[135] == -5.0f);     /* group 1: -q + 2 */
    CHECK(d[256 + 0] == 0.0f && d[256 + 7] == 14.0f);               /* row 1, group 0: 2q */
    CHECK(d[256 + 255] == 0.25f * 15 + 1 && d[256 + 254] == 1.0f);  /* last word 0xF0000000 */
    float row[256];
    CHECK_OK(qmm_dequantize_row_f32(&w, 1, row));
    CHECK(!memcmp(row, d + 256, sizeof row));
    free(d);
    qmm_w4_free(&w);
}

/* |w - dq| <= |scale|/2 (rounding to the grid) + what bf16 rounding of scale and bias moves
 * the grid: 2^-8 of |bias| and of the group's range, plus fp32 slack. */
static int within_bound(float x, float dq, float s, float b, float range)
{
    double bound = fabs(s) / 2 + 0x1p-8 * (fabs(b) + range) + 1e-6 * (fabs(x) + fabs(b));
    return fabs((double)x - dq) <= bound;
}

static void check_round_trip(int64_t n, int64_t k, const float *x, const qmm_w4 *w,
                             const qmm_quant_error *qe)
{
    float *d = malloc((size_t)(n * k) * sizeof *d);
    CHECK_OK(qmm_dequantize(w, d, QMM_F32, (size_t)(n * k)));
    int64_t gs = w->group, groups = k / gs;
    double max_abs = 0, e2 = 0, x2 = 0;
    int bad = 0;
    for (int64_t r = 0; r < n; r++) {
        for (int64_t g = 0; g < groups; g++) {
            const float *xg = x + r * k + g * gs, *dg = d + r * k + g * gs;
            float lo = xg[0], hi = xg[0];
            for (int i = 0; i < gs; i++) lo = fminf(lo, xg[i]), hi = fmaxf(hi, xg[i]);
            float s = qmm_bf16_to_f32(w->scales[r * groups + g]);
            float b = qmm_bf16_to_f32(w->biases[r * groups + g]);
            /* the scale's sign follows the data: the larger-magnitude edge is the bias */
            CHECK((fabsf(lo) > fabsf(hi)) == (s > 0));
            for (int i = 0; i < gs; i++) {
                double e = (double)xg[i] - dg[i];
                if (!within_bound(xg[i], dg[i], s, b, hi - lo) && bad++ < 5)
                    CHECKF(0, "row %lld col %lld: w %g dq %g (scale %g bias %g)", (long long)r,
                           (long long)(g * gs + i), xg[i], dg[i], s, b);
                max_abs = fmax(max_abs, fabs(e));
                e2 += e * e;
                x2 += (double)xg[i] * xg[i];
            }
        }
    }
    CHECK(bad == 0);
    if (qe) {
        CHECKF(qe->max_abs == max_abs, "max_abs %g, recomputed %g", qe->max_abs, max_abs);
        CHECK(fabs(qe->rms - sqrt(e2 / (double)(n * k))) <= 1e-12 * (1 + qe->rms));
        CHECK(fabs(qe->rel_frob - sqrt(e2 / x2)) <= 1e-9 * (1 + qe->rel_frob));
        /* 16 levels on a Gaussian group: about 0.1 relative error */
        CHECKF(qe->rel_frob > 0.02 && qe->rel_frob < 0.2, "rel_frob %g", qe->rel_frob);
    }
    free(d);
}

static void round_trip_f32(void)
{
    int64_t n = 37, k = 640;
    float *x = malloc((size_t)(n * k) * sizeof *x);
    for (int64_t i = 0; i < n * k; i++) x[i] = (float)(0.05 * test_rand_normal() + 0.01);
    /* a few groups with an offset, a few tiny, a few huge */
    for (int i = 0; i < QMM_GROUP; i++) {
        x[i] += 3.0f;
        x[k + i] *= 1e-30f;
        x[2 * k + i] *= 1e30f;
    }
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(n, k, &w));
    qmm_quant_error qe;
    CHECK_OK(qmm_quantize(x, QMM_F32, &w, &qe));
    printf("    [37, 640] f32: max_abs %.3g rms %.3g rel_frob %.3g\n", qe.max_abs, qe.rms,
           qe.rel_frob);
    check_round_trip(n, k, x, &w, NULL); /* the offset groups skew the error statistics */
    qmm_w4_free(&w);
    free(x);
}

/* Round trip at every group size; smaller groups fit the data more closely. */
static void round_trip_stats(void)
{
    int64_t n = 64, k = 1024;
    float *x = malloc((size_t)(n * k) * sizeof *x);
    for (int64_t i = 0; i < n * k; i++) x[i] = (float)(0.02 * test_rand_normal());
    const int groups[] = {128, 64, 32};
    double last = 1;
    for (int i = 0; i < 3; i++) {
        qmm_w4 w;
        CHECK_OK(qmm_w4_alloc_group(n, k, groups[i], &w));
        CHECK(w.group == groups[i] && w.scales_count == (size_t)(n * k / groups[i]));
        qmm_quant_error qe;
        CHECK_OK(qmm_quantize(x, QMM_F32, &w, &qe));
        printf("    g%-3d rel_frob %.4f\n", groups[i], qe.rel_frob);
        check_round_trip(n, k, x, &w, &qe);
        CHECKF(qe.rel_frob < last, "g%d: error %g not below the larger group's %g", groups[i],
               qe.rel_frob, last);
        last = qe.rel_frob;
        qmm_w4_free(&w);
    }
    free(x);
}

/* Groups of 32 and 64: column j reads the scale and bias of group j / g (hand-set values). */
static void small_group_indexing(void)
{
    const int groups[] = {32, 64};
    for (int t = 0; t < 2; t++) {
        int g = groups[t];
        int64_t n = 3, k = 4 * g;
        qmm_w4 w;
        CHECK_OK(qmm_w4_alloc_group(n, k, g, &w));
        for (size_t i = 0; i < w.packed_count; i++) w.packed[i] = 0x76543210u;
        for (size_t i = 0; i < w.scales_count; i++) {
            w.scales[i] = qmm_f32_to_bf16(i % 2 ? -(float)(i + 1) : (float)(i + 1));
            w.biases[i] = qmm_f32_to_bf16((float)(8 * i)); /* exact in bf16 */
        }
        float *d = malloc((size_t)(n * k) * sizeof *d);
        CHECK_OK(qmm_dequantize(&w, d, QMM_F32, (size_t)(n * k)));
        for (int64_t r = 0; r < n; r++)
            for (int64_t j = 0; j < k; j++) {
                size_t gi = (size_t)(r * 4 + j / g);
                float want = (gi % 2 ? -(float)(gi + 1) : (float)(gi + 1)) * (float)(j % 8) +
                             (float)(8 * gi);
                CHECKF(d[r * k + j] == want, "g%d [%lld][%lld] = %g, want %g", g, (long long)r,
                       (long long)j, d[r * k + j], want);
            }
        free(d);
        qmm_w4_free(&w);
    }
    /* unsupported group sizes and K not a multiple of the group */
    qmm_w4 w;
    CHECK_STATUS(qmm_w4_alloc_group(2, 256, 16, &w), QMM_ERR_ARG);
    CHECK_STATUS(qmm_w4_alloc_group(2, 256, 0, &w), QMM_ERR_ARG);
    CHECK_STATUS(qmm_w4_alloc_group(2, 96, 64, &w), QMM_ERR_SHAPE);
    CHECK(strstr(qmm_last_error(), "group size 64") != NULL);
    CHECK_OK(qmm_w4_alloc_group(2, 96, 32, &w));
    w.group = 48; /* a descriptor edited by hand is checked too */
    CHECK_STATUS(qmm_w4_validate(&w), QMM_ERR_ARG);
    w.group = 64;
    CHECK_STATUS(qmm_w4_validate(&w), QMM_ERR_SHAPE);
    w.group = 32;
    CHECK_OK(qmm_w4_validate(&w));
    qmm_w4_free(&w);
}

static void signed_scales(void)
{
    /* group 0 leans positive (larger max): negative scale; group 1 leans negative */
    float x[2 * QMM_GROUP];
    for (int i = 0; i < 2 * QMM_GROUP; i++) x[i] = (float)test_rand_uniform(-1, 1);
    x[5] = 4.0f;
    x[QMM_GROUP + 9] = -4.0f;
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(1, 2 * QMM_GROUP, &w));
    CHECK_OK(qmm_quantize(x, QMM_F32, &w, NULL));
    float s0 = qmm_bf16_to_f32(w.scales[0]), s1 = qmm_bf16_to_f32(w.scales[1]);
    CHECKF(s0 < 0 && s1 > 0, "scales %g %g", s0, s1);
    CHECK(qmm_bf16_to_f32(w.biases[0]) == 4.0f && qmm_bf16_to_f32(w.biases[1]) == -4.0f);
    /* the edges dequantize exactly: code 0 is the bias */
    float d[2 * QMM_GROUP];
    CHECK_OK(qmm_dequantize(&w, d, QMM_F32, 2 * QMM_GROUP));
    CHECK(d[5] == 4.0f && d[QMM_GROUP + 9] == -4.0f);
    check_round_trip(1, 2 * QMM_GROUP, x, &w, NULL);
    qmm_w4_free(&w);
}

static void zero_range_groups(void)
{
    /* group 0 all 0.3 (not a bf16 value), group 1 all zero, group 2 all -2, group 3 tiny range */
    float x[4 * QMM_GROUP];
    for (int i = 0; i < QMM_GROUP; i++) {
        x[i] = 0.3f;
        x[QMM_GROUP + i] = 0.0f;
        x[2 * QMM_GROUP + i] = -2.0f;
        x[3 * QMM_GROUP + i] = 1e-39f * (float)(i % 3); /* f32 subnormals */
    }
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(1, 4 * QMM_GROUP, &w));
    qmm_quant_error qe;
    CHECK_OK(qmm_quantize(x, QMM_F32, &w, &qe));
    for (int g = 0; g < 3; g++) {
        float s = qmm_bf16_to_f32(w.scales[g]);
        CHECKF(s != 0 && isfinite(s), "group %d scale %g", g, s);
        for (int i = 0; i < QMM_GROUP / 8; i++) CHECK(w.packed[g * 16 + i] == 0);
    }
    float d[4 * QMM_GROUP];
    CHECK_OK(qmm_dequantize(&w, d, QMM_F32, 4 * QMM_GROUP));
    for (int i = 0; i < QMM_GROUP; i++) {
        CHECK(d[i] == qmm_bf16_to_f32(qmm_f32_to_bf16(0.3f))); /* exact to the bias */
        CHECK(d[QMM_GROUP + i] == 0.0f);
        CHECK(d[2 * QMM_GROUP + i] == -2.0f);
        CHECK(isfinite(d[3 * QMM_GROUP + i]) && fabsf(d[3 * QMM_GROUP + i]) < 1e-37f);
    }
    CHECK(isfinite(qe.max_abs) && qe.max_abs < 1e-3);
    qmm_w4_free(&w);
}

/* Values exactly representable in bf16 and f16 quantize identically from every source type. */
static void source_dtypes_agree(void)
{
    int64_t n = 9, k = 384;
    size_t count = (size_t)(n * k);
    float *xf = malloc(count * sizeof *xf);
    qmm_bf16 *xb = malloc(count * sizeof *xb);
    qmm_f16 *xh = malloc(count * sizeof *xh);
    for (size_t i = 0; i < count; i++) {
        xf[i] = (float)((int)(test_rand_u64() % 255) - 127) * 0x1p-9f; /* 8 significant bits */
        xb[i] = qmm_f32_to_bf16(xf[i]);
        xh[i] = qmm_f32_to_f16(xf[i]);
        CHECK(qmm_bf16_to_f32(xb[i]) == xf[i] && qmm_f16_to_f32(xh[i]) == xf[i]);
    }
    qmm_w4 a, b, c;
    CHECK_OK(qmm_w4_alloc(n, k, &a));
    CHECK_OK(qmm_w4_alloc(n, k, &b));
    CHECK_OK(qmm_w4_alloc(n, k, &c));
    qmm_quant_error ea, eb, ec;
    CHECK_OK(qmm_quantize(xf, QMM_F32, &a, &ea));
    CHECK_OK(qmm_quantize(xb, QMM_BF16, &b, &eb));
    CHECK_OK(qmm_quantize(xh, QMM_F16, &c, &ec));
    CHECK(!memcmp(a.packed, b.packed, a.packed_count * 4) &&
          !memcmp(a.packed, c.packed, a.packed_count * 4));
    CHECK(!memcmp(a.scales, b.scales, a.scales_count * 2) &&
          !memcmp(a.scales, c.scales, a.scales_count * 2));
    CHECK(!memcmp(a.biases, b.biases, a.biases_count * 2) &&
          !memcmp(a.biases, c.biases, a.biases_count * 2));
    CHECK(ea.max_abs == eb.max_abs && ea.rms == ec.rms && ea.rel_frob == eb.rel_frob);
    qmm_w4_free(&a);
    qmm_w4_free(&b);
    qmm_w4_free(&c);
    free(xf);
    free(xb);
    free(xh);
}

/* Every destination dtype is the f32 dequantization rounded once. */
static void dequantize_dtypes(void)
{
    int64_t n = 7, k = 256;
    size_t count = (size_t)(n * k);
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(n, k, &w));
    test_random_w4(&w, 0.001, 0.1);
    float *f = malloc(count * sizeof *f), row[256];
    qmm_bf16 *b = malloc(count * sizeof *b);
    qmm_f16 *h = malloc(count * sizeof *h);
    CHECK_OK(qmm_dequantize(&w, f, QMM_F32, count));
    CHECK_OK(qmm_dequantize(&w, b, QMM_BF16, count));
    CHECK_OK(qmm_dequantize(&w, h, QMM_F16, count));
    for (size_t i = 0; i < count; i++) {
        size_t r = i / (size_t)k, j = i % (size_t)k;
        uint32_t q = (w.packed[r * (size_t)k / 8 + j / 8] >> (4 * (j % 8))) & 0xF;
        float s = qmm_bf16_to_f32(w.scales[r * 2 + j / 128]);
        float bb = qmm_bf16_to_f32(w.biases[r * 2 + j / 128]);
        CHECK(f[i] == fmaf(s, (float)q, bb));
        CHECK(b[i] == qmm_f32_to_bf16(f[i]) && h[i] == qmm_f32_to_f16(f[i]));
    }
    for (int64_t r = 0; r < n; r++) {
        CHECK_OK(qmm_dequantize_row_f32(&w, r, row));
        CHECK(!memcmp(row, f + r * k, sizeof row));
    }
    free(f);
    free(b);
    free(h);
    qmm_w4_free(&w);
}

/* Quantizing a weight's own dequantization is stable: the error is no worse than the grid. */
static void requantize_dequantized(void)
{
    int64_t n = 16, k = 512;
    size_t count = (size_t)(n * k);
    qmm_w4 w, w2;
    CHECK_OK(qmm_w4_alloc(n, k, &w));
    CHECK_OK(qmm_w4_alloc(n, k, &w2));
    test_random_w4(&w, 0.001, 0.05);
    float *d = malloc(count * sizeof *d);
    CHECK_OK(qmm_dequantize(&w, d, QMM_F32, count));
    qmm_quant_error qe;
    CHECK_OK(qmm_quantize(d, QMM_F32, &w2, &qe));
    check_round_trip(n, k, d, &w2, NULL);
    free(d);
    qmm_w4_free(&w);
    qmm_w4_free(&w2);
}

static void quantize_rejects_without_writing(void)
{
    int64_t n = 3, k = 256;
    size_t count = (size_t)(n * k);
    float *x = malloc(count * sizeof *x);
    for (size_t i = 0; i < count; i++) x[i] = (float)test_rand_normal();
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(n, k, &w));
    memset(w.packed, 0xA5, w.packed_count * 4);
    memset(w.scales, 0xA5, w.scales_count * 2);
    memset(w.biases, 0xA5, w.biases_count * 2);
    float bad[] = {NAN, INFINITY, -INFINITY};
    for (int t = 0; t < 3; t++) {
        x[count - 1] = bad[t]; /* the very last element: everything before is valid */
        qmm_quant_error qe = {-1, -1, -1};
        CHECK_STATUS(qmm_quantize(x, QMM_F32, &w, &qe), QMM_ERR_RANGE);
        CHECK(qmm_last_error()[0] != 0);
        CHECK(qe.max_abs == -1);
    }
    /* a group beyond bf16's range: its bias would round to Inf */
    x[count - 1] = 3.3999e38f;
    CHECK_STATUS(qmm_quantize(x, QMM_F32, &w, NULL), QMM_ERR_RANGE);
    for (size_t i = 0; i < w.packed_count; i++) CHECK(w.packed[i] == 0xA5A5A5A5u);
    for (size_t i = 0; i < w.scales_count; i++)
        CHECK(w.scales[i] == 0xA5A5 && w.biases[i] == 0xA5A5);
    /* a group whose range overflows f32 (but whose edges fit bf16): its scale still fits */
    x[count - 1] = 0;
    x[0] = 3e38f;
    x[1] = -3e38f;
    CHECK_OK(qmm_quantize(x, QMM_F32, &w, NULL));
    CHECK(isfinite(qmm_bf16_to_f32(w.scales[0])));
    free(x);
    qmm_w4_free(&w);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, sizes, layout_hand_computed, layout_dequantize_hand_words, round_trip_f32,
               round_trip_stats, small_group_indexing, signed_scales, zero_range_groups,
               source_dtypes_agree, dequantize_dtypes, requantize_dequantized,
               quantize_rejects_without_writing);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
