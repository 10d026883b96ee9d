/* bf16 and f16 conversions: edge cases (ties both ways, NaN, ±Inf, ±0, overflow, subnormals),
 * exhaustive round trips, and random values against an independent rounding in double. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

#define CHECK_BF16(f32bits, want)                                                            \
    do {                                                                                     \
        qmm_bf16 got_ = qmm_f32_to_bf16(qmm_f32_from_bits(f32bits));                                  \
        CHECKF(got_ == (want), "f32 0x%08x -> bf16 0x%04x, want 0x%04x", (unsigned)(f32bits), \
               got_, (unsigned)(want));                                                      \
    } while (0)

#define CHECK_F16(x, want)                                                                   \
    do {                                                                                     \
        qmm_f16 got_ = qmm_f32_to_f16(x);                                                    \
        CHECKF(got_ == (want), "f32 %a -> f16 0x%04x, want 0x%04x", (double)(x), got_,       \
               (unsigned)(want));                                                            \
    } while (0)

static void bf16_known_values(void)
{
    CHECK(qmm_bf16_to_f32(0x3F80) == 1.0f);
    CHECK(qmm_bf16_to_f32(0xC000) == -2.0f);
    CHECK(qmm_bf16_to_f32(0x0001) == qmm_f32_from_bits(0x00010000)); /* subnormal, exact */
    CHECK(qmm_bf16_to_f32(0x7F7F) == qmm_f32_from_bits(0x7F7F0000)); /* largest finite */
    CHECK_BF16(0x3F800000u, 0x3F80);
    CHECK_BF16(0x40490FDBu, 0x4049); /* pi rounds down */
}

static void bf16_ties_to_even(void)
{
    CHECK_BF16(0x3F808000u, 0x3F80); /* tie, even below: down */
    CHECK_BF16(0x3F818000u, 0x3F82); /* tie, odd below: up */
    CHECK_BF16(0x3F808001u, 0x3F81); /* above half: up */
    CHECK_BF16(0x3F807FFFu, 0x3F80); /* below half: down */
    CHECK_BF16(0xBF808000u, 0xBF80); /* negative ties mirror */
    CHECK_BF16(0xBF818000u, 0xBF82);
    CHECK_BF16(0x3FFF8000u, 0x4000); /* tie carries into the exponent */
}

static void bf16_special(void)
{
    CHECK_BF16(0x00000000u, 0x0000);
    CHECK_BF16(0x80000000u, 0x8000);
    CHECK_BF16(0x7F800000u, 0x7F80);
    CHECK_BF16(0xFF800000u, 0xFF80);
    CHECK_BF16(0x7F7FFFFFu, 0x7F80); /* FLT_MAX overflows to Inf */
    CHECK_BF16(0xFF7FFFFFu, 0xFF80);
    CHECK_BF16(0x7F7F7FFFu, 0x7F7F); /* just below the halfway point stays finite */
    CHECK_BF16(0x7F7F8000u, 0x7F80); /* tie above the largest (odd) finite: Inf */
    CHECK_BF16(0x00000001u, 0x0000); /* f32 subnormals */
    CHECK_BF16(0x00008000u, 0x0000);
    CHECK_BF16(0x00018000u, 0x0002);
    CHECK_BF16(0x80008001u, 0x8001);
    /* NaNs stay NaN (never Inf), become quiet, keep the sign */
    uint32_t nans[] = {0x7FC00000u, 0x7F800001u, 0x7F800100u, 0xFF800001u, 0x7FFFFFFFu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        qmm_bf16 h = qmm_f32_to_bf16(qmm_f32_from_bits(nans[i]));
        CHECKF((h & 0x7F80) == 0x7F80 && (h & 0x0040), "NaN 0x%08x -> 0x%04x is not a quiet NaN",
               nans[i], h);
        CHECKF((h >> 15) == (nans[i] >> 31), "NaN 0x%08x lost its sign", nans[i]);
    }
    CHECK(isnan(qmm_bf16_to_f32(0x7FC1)));
    CHECK(isinf(qmm_bf16_to_f32(0xFF80)) && qmm_bf16_to_f32(0xFF80) < 0);
}

static void bf16_exhaustive_round_trip(void)
{
    int bad = 0;
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        float f = qmm_bf16_to_f32((qmm_bf16)h);
        CHECK(qmm_f32_bits(f) == h << 16);
        qmm_bf16 back = qmm_f32_to_bf16(f);
        int is_nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F);
        int ok = is_nan ? back == (h | 0x40) : back == h;
        if (!ok && bad++ < 5) CHECKF(0, "bf16 0x%04x -> f32 -> 0x%04x", h, back);
    }
    CHECK(bad == 0);
}

/* The nearest value with `mant_bits` stored mantissa bits and minimum normal exponent emin,
 * ties to even, computed in double (independent of the bit tricks); Inf when it reaches
 * `overflow` (the first value that rounds to Inf). */
static double round_format(double x, int mant_bits, int emin, double overflow)
{
    if (x == 0) return x;
    int e;
    frexp(fabs(x), &e); /* |x| = f * 2^e, f in [0.5, 1) */
    e -= 1;
    if (e < emin) e = emin;
    double ulp = ldexp(1.0, e - mant_bits);
    double r = nearbyint(x / ulp) * ulp; /* x / ulp is exact; nearbyint ties to even */
    if (fabs(r) >= overflow) return x > 0 ? INFINITY : -INFINITY;
    return r;
}

static void bf16_random_vs_double(void)
{
    int bad = 0;
    for (int i = 0; i < 1 << 20; i++) {
        float x = qmm_f32_from_bits((uint32_t)test_rand_u64());
        if (isnan(x)) continue;
        double want = round_format(x, 7, -126, 0x1p128);
        float got = qmm_bf16_to_f32(qmm_f32_to_bf16(x));
        if (!(got == want && !signbit(got) == !signbit(want)) && bad++ < 5)
            CHECKF(0, "bf16(%a) = %a, want %a", (double)x, (double)got, want);
    }
    CHECK(bad == 0);
}

static void f16_known_values(void)
{
    CHECK(qmm_f16_to_f32(0x3C00) == 1.0f);
    CHECK(qmm_f16_to_f32(0xC000) == -2.0f);
    CHECK(qmm_f16_to_f32(0x7BFF) == 65504.0f);
    CHECK(qmm_f16_to_f32(0x0400) == 0x1p-14f);
    CHECK(qmm_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(qmm_f16_to_f32(0x03FF) == 1023 * 0x1p-24f);
    CHECK(qmm_f16_to_f32(0x8000) == 0 && signbit(qmm_f16_to_f32(0x8000)));
    CHECK(isinf(qmm_f16_to_f32(0x7C00)) && qmm_f16_to_f32(0xFC00) < 0);
    CHECK(isnan(qmm_f16_to_f32(0x7C01)) && isnan(qmm_f16_to_f32(0xFE00)));
    CHECK_F16(1.0f, 0x3C00);
    CHECK_F16(-2.0f, 0xC000);
    CHECK_F16(0.0f, 0x0000);
    CHECK_F16(-0.0f, 0x8000);
}

static void f16_ties_overflow_subnormals(void)
{
    CHECK_F16(1.0f + 0x1p-11f, 0x3C00);     /* tie, even below */
    CHECK_F16(1.0f + 3 * 0x1p-11f, 0x3C02); /* tie, odd below: up */
    CHECK_F16(1.0f + 0x1p-11f + 0x1p-20f, 0x3C01);
    CHECK_F16(-(1.0f + 3 * 0x1p-11f), 0xBC02);
    CHECK_F16(65504.0f, 0x7BFF);
    CHECK_F16(65519.0f, 0x7BFF);
    CHECK_F16(65520.0f, 0x7C00); /* tie above the largest (odd) finite: Inf */
    CHECK_F16(1e10f, 0x7C00);
    CHECK_F16(-1e10f, 0xFC00);
    CHECK_F16(INFINITY, 0x7C00);
    CHECK_F16(-INFINITY, 0xFC00);
    CHECK_F16(FLT_MAX, 0x7C00);
    CHECK_F16(0x1p-24f, 0x0001);
    CHECK_F16(0x1p-25f, 0x0000); /* tie between 0 and the smallest subnormal: 0 */
    CHECK_F16(0x1.000002p-25f, 0x0001);
    CHECK_F16(3 * 0x1p-25f, 0x0002); /* 1.5 subnormal ulps: tie to even 2 */
    CHECK_F16(0x1p-26f, 0x0000);
    CHECK_F16(-0x1p-30f, 0x8000);
    CHECK_F16(1023.5f * 0x1p-24f, 0x0400); /* largest subnormal + half: up into the normals */
    CHECK_F16(0x1p-14f, 0x0400);
    CHECK_F16(qmm_f32_from_bits(0x00000001u), 0x0000); /* f32 subnormal */
    qmm_f16 n1 = qmm_f32_to_f16(NAN), n2 = qmm_f32_to_f16(qmm_f32_from_bits(0xFF800001u));
    CHECKF((n1 & 0x7C00) == 0x7C00 && (n1 & 0x0200), "NaN -> 0x%04x", n1);
    CHECKF((n2 & 0xFC00) == 0xFC00 && (n2 & 0x0200), "-sNaN -> 0x%04x", n2);
}

static void f16_exhaustive_round_trip(void)
{
    int bad = 0;
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        qmm_f16 back = qmm_f32_to_f16(qmm_f16_to_f32((qmm_f16)h));
        int is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
        int ok = is_nan ? back == (h | 0x200) : back == h;
        if (!ok && bad++ < 5) CHECKF(0, "f16 0x%04x -> f32 -> 0x%04x", h, back);
    }
    CHECK(bad == 0);
}

static void f16_random_vs_double(void)
{
    int bad = 0;
    for (int i = 0; i < 1 << 20; i++) {
        /* half the draws in f16's range, half anywhere */
        float x = (i & 1) ? qmm_f32_from_bits((uint32_t)test_rand_u64())
                          : (float)(test_rand_normal() * ldexp(1.0, (int)(test_rand_u64() % 44) - 28));
        if (isnan(x)) continue;
        double want = round_format(x, 10, -14, 65520.0);
        float got = qmm_f16_to_f32(qmm_f32_to_f16(x));
        if (!(got == want && !signbit(got) == !signbit(want)) && bad++ < 5)
            CHECKF(0, "f16(%a) = %a, want %a", (double)x, (double)got, want);
    }
    CHECK(bad == 0);
}

static void dtype_and_path_names(void)
{
    CHECK(qmm_dtype_size(QMM_BF16) == 2 && qmm_dtype_size(QMM_F16) == 2 &&
          qmm_dtype_size(QMM_F32) == 4);
    CHECK(!strcmp(qmm_dtype_name(QMM_BF16), "bf16") && !strcmp(qmm_dtype_name(QMM_F16), "f16") &&
          !strcmp(qmm_dtype_name(QMM_F32), "f32"));
    CHECK(!strcmp(qmm_path_name(QMM_PATH_MATVEC), "matvec"));
    CHECK(!strcmp(qmm_path_name(QMM_PATH_TILED), "tiled"));
    CHECK(!strcmp(qmm_path_name(QMM_PATH_SPLITK), "splitk"));
    CHECK(!strcmp(qmm_path_name(QMM_PATH_STREAMK), "streamk"));
    CHECK(!strcmp(qmm_path_name(QMM_PATH_AUTO), "auto"));
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, bf16_known_values, bf16_ties_to_even, bf16_special,
               bf16_exhaustive_round_trip, bf16_random_vs_double, f16_known_values,
               f16_ties_overflow_subnormals, f16_exhaustive_round_trip, f16_random_vs_double,
               dtype_and_path_names);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
