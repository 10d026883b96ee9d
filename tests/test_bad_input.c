/* Bad input to every format, CPU matmul and planner function: the specific status, a message in
 * qmm_last_error(), no crash, and the outputs byte for byte unchanged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

#define BIG (1LL << 40) /* BIG * BIG elements overflow a 64-bit size_t */


/* A poisoned byte region with the same pattern kept aside, to prove nothing was written. */
typedef struct region {
    unsigned char *p;
    size_t bytes;
} region;

static region poisoned(size_t bytes)
{
    region r = {malloc(bytes), bytes};
    memset(r.p, 0xA5, bytes);
    return r;
}

static void check_untouched(region r, const char *what)
{
    for (size_t i = 0; i < r.bytes; i++)
        if (r.p[i] != 0xA5) {
            CHECKF(0, "%s: byte %zu of the output was written", what, i);
            return;
        }
}

/* A descriptor whose buffers are all poisoned (n = 4, k = 256). */
typedef struct weight {
    qmm_w4 w;
    region packed, scales, biases;
} weight;

static weight poisoned_weight(void)
{
    weight x;
    x.packed = poisoned(4 * 256 / 8 * 4);
    x.scales = poisoned(4 * 2 * 2);
    x.biases = poisoned(4 * 2 * 2);
    qmm_w4 w = {4, 256, (uint32_t *)x.packed.p, (qmm_bf16 *)x.scales.p, (qmm_bf16 *)x.biases.p,
                128, 8, 8, 128};
    x.w = w;
    return x;
}

static void check_weight_untouched(const weight *x, const char *what)
{
    check_untouched(x->packed, what);
    check_untouched(x->scales, what);
    check_untouched(x->biases, what);
}

static void free_weight(weight *x)
{
    free(x->packed.p);
    free(x->scales.p);
    free(x->biases.p);
}

/* Descriptors broken one way each, with the status they must give. */
typedef struct broken {
    const char *what;
    qmm_w4 w;
    qmm_status want;
} broken;

static int broken_weights(const qmm_w4 *good, broken *out)
{
    int n = 0;
#define BROKEN(name, field, value, status)                                                    \
    do {                                                                                      \
        out[n].what = name;                                                                   \
        out[n].w = *good;                                                                     \
        out[n].w.field = value;                                                               \
        out[n++].want = status;                                                               \
    } while (0)
    BROKEN("n = 0", n, 0, QMM_ERR_SHAPE);
    BROKEN("n = -3", n, -3, QMM_ERR_SHAPE);
    BROKEN("k = 0", k, 0, QMM_ERR_SHAPE);
    BROKEN("k = -128", k, -128, QMM_ERR_SHAPE);
    BROKEN("k = 100", k, 100, QMM_ERR_SHAPE);
    BROKEN("k = 200", k, 200, QMM_ERR_SHAPE);
    BROKEN("packed NULL", packed, NULL, QMM_ERR_NULL);
    BROKEN("scales NULL", scales, NULL, QMM_ERR_NULL);
    BROKEN("biases NULL", biases, NULL, QMM_ERR_NULL);
    BROKEN("packed_count - 1", packed_count, good->packed_count - 1, QMM_ERR_SIZE_MISMATCH);
    BROKEN("packed_count + 1", packed_count, good->packed_count + 1, QMM_ERR_SIZE_MISMATCH);
    BROKEN("scales_count 0", scales_count, 0, QMM_ERR_SIZE_MISMATCH);
    BROKEN("biases_count * 2", biases_count, good->biases_count * 2, QMM_ERR_SIZE_MISMATCH);
    BROKEN("k = 512 (counts for 256)", k, 512, QMM_ERR_SIZE_MISMATCH);
    BROKEN("group 0", group, 0, QMM_ERR_ARG);
    BROKEN("group 16", group, 16, QMM_ERR_ARG);
    BROKEN("group 256", group, 256, QMM_ERR_ARG);
    BROKEN("group 64 (counts for 128)", group, 64, QMM_ERR_SIZE_MISMATCH);
    BROKEN("n = 2^40, k = 2^40", n, BIG, QMM_ERR_OVERFLOW);
    out[n - 1].w.k = BIG;
#undef BROKEN
    return n;
}

static void sizes_and_alloc(void)
{
    const int64_t shapes[][2] = {{0, 128}, {-1, 128}, {4, 0}, {4, -128}, {4, 100}, {4, 129}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        size_t a = 7, b = 7, c = 7;
        EXPECT_FAIL(qmm_w4_sizes(shapes[i][0], shapes[i][1], &a, &b, &c), QMM_ERR_SHAPE);
        CHECK(a == 7 && b == 7 && c == 7);
        region w = poisoned(sizeof(qmm_w4));
        EXPECT_FAIL(qmm_w4_alloc(shapes[i][0], shapes[i][1], (qmm_w4 *)w.p), QMM_ERR_SHAPE);
        check_untouched(w, "qmm_w4_alloc");
        free(w.p);
    }
    size_t a = 7;
    EXPECT_FAIL(qmm_w4_sizes(BIG, BIG, &a, NULL, NULL), QMM_ERR_OVERFLOW);
    EXPECT_FAIL(qmm_w4_sizes(INT64_MAX, 1LL << 62, NULL, NULL, NULL), QMM_ERR_OVERFLOW);
    CHECK(a == 7);
    region w = poisoned(sizeof(qmm_w4));
    EXPECT_FAIL(qmm_w4_alloc(BIG, BIG, (qmm_w4 *)w.p), QMM_ERR_OVERFLOW);
    check_untouched(w, "qmm_w4_alloc");
    free(w.p);
    EXPECT_FAIL(qmm_w4_alloc(4, 128, NULL), QMM_ERR_NULL);
    qmm_w4_free(NULL); /* allowed */
}

static void validate(void)
{
    weight x = poisoned_weight();
    CHECK_OK(qmm_w4_validate(&x.w));
    EXPECT_FAIL(qmm_w4_validate(NULL), QMM_ERR_NULL);
    broken b[32];
    int nb = broken_weights(&x.w, b);
    for (int i = 0; i < nb; i++) {
        printf("    %s -> %s\n", b[i].what, qmm_status_name(b[i].want));
        EXPECT_FAIL(qmm_w4_validate(&b[i].w), b[i].want);
    }
    free_weight(&x);
}

static void quantize(void)
{
    weight x = poisoned_weight();
    float *src = calloc(4 * 256, sizeof *src);
    qmm_quant_error err = {-1, -1, -1};
    EXPECT_FAIL(qmm_quantize(NULL, QMM_F32, &x.w, &err), QMM_ERR_NULL);
    EXPECT_FAIL(qmm_quantize(src, QMM_F32, NULL, &err), QMM_ERR_NULL);
    EXPECT_FAIL(qmm_quantize(src, (qmm_dtype)3, &x.w, &err), QMM_ERR_DTYPE);
    EXPECT_FAIL(qmm_quantize(src, (qmm_dtype)-1, &x.w, &err), QMM_ERR_DTYPE);
    broken b[32];
    int nb = broken_weights(&x.w, b);
    for (int i = 0; i < nb; i++) EXPECT_FAIL(qmm_quantize(src, QMM_F32, &b[i].w, &err), b[i].want);
    src[1000] = INFINITY;
    EXPECT_FAIL(qmm_quantize(src, QMM_F32, &x.w, &err), QMM_ERR_RANGE);
    qmm_bf16 *src16 = calloc(4 * 256, sizeof *src16);
    src16[77] = 0x7FC0; /* NaN in bf16 */
    EXPECT_FAIL(qmm_quantize(src16, QMM_BF16, &x.w, &err), QMM_ERR_RANGE);
    src16[77] = 0;
    src16[1023] = 0xFC00; /* -Inf in f16 */
    EXPECT_FAIL(qmm_quantize(src16, QMM_F16, &x.w, &err), QMM_ERR_RANGE);
    CHECK(err.max_abs == -1 && err.rms == -1 && err.rel_frob == -1);
    check_weight_untouched(&x, "qmm_quantize");
    free(src);
    free(src16);
    free_weight(&x);
}

static void dequantize(void)
{
    weight x = poisoned_weight();
    /* a valid weight to read from: everything zero */
    memset(x.packed.p, 0, x.packed.bytes);
    memset(x.scales.p, 0, x.scales.bytes);
    memset(x.biases.p, 0, x.biases.bytes);
    region dst = poisoned(4 * 256 * sizeof(float));
    EXPECT_FAIL(qmm_dequantize(NULL, dst.p, QMM_F32, 1024), QMM_ERR_NULL);
    EXPECT_FAIL(qmm_dequantize(&x.w, NULL, QMM_F32, 1024), QMM_ERR_NULL);
    EXPECT_FAIL(qmm_dequantize(&x.w, dst.p, (qmm_dtype)9, 1024), QMM_ERR_DTYPE);
    EXPECT_FAIL(qmm_dequantize(&x.w, dst.p, QMM_F32, 1023), QMM_ERR_SIZE_MISMATCH);
    EXPECT_FAIL(qmm_dequantize(&x.w, dst.p, QMM_BF16, 1025), QMM_ERR_SIZE_MISMATCH);
    EXPECT_FAIL(qmm_dequantize(&x.w, dst.p, QMM_F16, 0), QMM_ERR_SIZE_MISMATCH);
    broken b[32];
    int nb = broken_weights(&x.w, b);
    for (int i = 0; i < nb; i++)
        EXPECT_FAIL(qmm_dequantize(&b[i].w, dst.p, QMM_F32, 1024), b[i].want);
    /* 2^62 elements fit size_t, 2^64 f32 bytes do not (the buffers are never touched) */
    qmm_w4 huge = {1LL << 31, 1LL << 31, x.w.packed, x.w.scales, x.w.biases,
                   (size_t)1 << 59, (size_t)1 << 55, (size_t)1 << 55, 128};
    EXPECT_FAIL(qmm_dequantize(&huge, dst.p, QMM_F32, 1024), QMM_ERR_OVERFLOW);
    EXPECT_FAIL(qmm_dequantize(&huge, dst.p, QMM_BF16, 1024), QMM_ERR_SIZE_MISMATCH);
    check_untouched(dst, "qmm_dequantize");

    region row = poisoned(256 * sizeof(float));
    EXPECT_FAIL(qmm_dequantize_row_f32(NULL, 0, (float *)row.p), QMM_ERR_NULL);
    EXPECT_FAIL(qmm_dequantize_row_f32(&x.w, 0, NULL), QMM_ERR_NULL);
    EXPECT_FAIL(qmm_dequantize_row_f32(&x.w, -1, (float *)row.p), QMM_ERR_ARG);
    EXPECT_FAIL(qmm_dequantize_row_f32(&x.w, 4, (float *)row.p), QMM_ERR_ARG);
    for (int i = 0; i < nb; i++)
        EXPECT_FAIL(qmm_dequantize_row_f32(&b[i].w, 0, (float *)row.p), b[i].want);
    check_untouched(row, "qmm_dequantize_row_f32");
    free(dst.p);
    free(row.p);
    free_weight(&x);
}

typedef qmm_status (*matmul_fn)(const qmm_bf16 *, int64_t, const qmm_w4 *, qmm_bf16 *, int);

static qmm_status ref_adapter(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, qmm_bf16 *c, int t)
{
    (void)t;
    return qmm_matmul_ref(a, m, w, c);
}

static void matmul_bad(matmul_fn fn, const char *name)
{
    weight x = poisoned_weight();
    memset(x.packed.p, 0, x.packed.bytes);
    memset(x.scales.p, 0, x.scales.bytes);
    memset(x.biases.p, 0, x.biases.bytes);
    qmm_bf16 *a = calloc(3 * 256, sizeof *a);
    region c = poisoned(3 * 4 * sizeof(qmm_bf16));
    qmm_bf16 *cp = (qmm_bf16 *)c.p;
    EXPECT_FAIL(fn(NULL, 3, &x.w, cp, 2), QMM_ERR_NULL);
    EXPECT_FAIL(fn(a, 3, NULL, cp, 2), QMM_ERR_NULL);
    EXPECT_FAIL(fn(a, 3, &x.w, NULL, 2), QMM_ERR_NULL);
    EXPECT_FAIL(fn(a, 0, &x.w, cp, 2), QMM_ERR_SHAPE);
    EXPECT_FAIL(fn(a, -5, &x.w, cp, 2), QMM_ERR_SHAPE);
    broken b[32];
    int nb = broken_weights(&x.w, b);
    for (int i = 0; i < nb; i++) EXPECT_FAIL(fn(a, 3, &b[i].w, cp, 2), b[i].want);
    /* M*K elements overflow size_t; nothing may be read or allocated first */
    EXPECT_FAIL(fn(a, 1LL << 62, &x.w, cp, 2), QMM_ERR_OVERFLOW);
    EXPECT_FAIL(fn(a, INT64_MAX, &x.w, cp, 0), QMM_ERR_OVERFLOW);
    check_untouched(c, name);
    /* any thread count is accepted: <= 0 means all CPUs, large ones are clamped */
    CHECK_OK(fn(a, 3, &x.w, cp, -7));
    CHECK_OK(fn(a, 3, &x.w, cp, 100000));
    CHECK(qmm_last_error()[0] == 0); /* success clears the detail */
    free(a);
    free(c.p);
    free_weight(&x);
}

static void matmul_ref(void) { matmul_bad(ref_adapter, "qmm_matmul_ref"); }
static void matmul_cpu(void) { matmul_bad(qmm_matmul_cpu, "qmm_matmul_cpu"); }

static void plan(void)
{
    qmm_plan_params pp = qmm_plan_seed_params();
    region out = poisoned(sizeof(qmm_plan));
    qmm_plan *o = (qmm_plan *)out.p;
    EXPECT_FAIL(qmm_plan_seed(16, 1024, 2560, NULL, o), QMM_ERR_NULL);
    EXPECT_FAIL(qmm_plan_seed(16, 1024, 2560, &pp, NULL), QMM_ERR_NULL);
    const int64_t shapes[][3] = {{0, 1024, 2560},  {-1, 1024, 2560}, {16, 0, 2560},
                                 {16, -9, 2560},   {16, 1024, 0},    {16, 1024, -256},
                                 {16, 1024, 2500}, {16, 1024, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        EXPECT_FAIL(qmm_plan_seed(shapes[i][0], shapes[i][1], shapes[i][2], &pp, o),
                    QMM_ERR_SHAPE);
    EXPECT_FAIL(qmm_plan_seed(INT64_MAX, INT64_MAX, 128, &pp, o), QMM_ERR_OVERFLOW);
    qmm_plan_params bad[5];
    for (int i = 0; i < 5; i++) bad[i] = pp;
    bad[0].tile_m = 0;
    bad[1].tile_n = -32;
    bad[2].target_blocks = 0;
    bad[3].max_split = 0;
    bad[4].matvec_max_m = -1;
    for (int i = 0; i < 5; i++) EXPECT_FAIL(qmm_plan_seed(16, 1024, 2560, &bad[i], o), QMM_ERR_ARG);
    check_untouched(out, "qmm_plan_seed");
    free(out.p);
}

static void unknown_enums(void)
{
    CHECK(qmm_dtype_size((qmm_dtype)3) == 0 && qmm_dtype_size((qmm_dtype)-1) == 0);
    CHECK(qmm_dtype_name((qmm_dtype)3)[0] != 0);
    CHECK(qmm_path_name((qmm_path)42)[0] != 0);
    CHECK(qmm_status_name((qmm_status)999)[0] != 0);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, sizes_and_alloc, validate, quantize, dequantize, matmul_ref, matmul_cpu, plan,
               unknown_enums);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
