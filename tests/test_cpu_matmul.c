/* CPU matmuls: the reference against an fp64 product, the fast path against the reference on
 * ragged shapes, group sizes 32, 64 and 128 and thread counts (including K split across threads),
 * determinism, guards. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"

#define MAX_REL 4e-3 /* relative Frobenius error allowed for a bf16 output */
#define GUARD 64     /* poisoned elements after each output, checked untouched */

typedef struct problem {
    int64_t m, n, k;
    qmm_w4 w;
    qmm_bf16 *a;
} problem;

static problem make_problem_group(int64_t m, int64_t n, int64_t k, int group)
{
    problem p = {m, n, k, {0}, malloc((size_t)(m * k) * sizeof(qmm_bf16))};
    CHECK_OK(qmm_w4_alloc_group(n, k, group, &p.w));
    test_random_w4(&p.w, 0.002, 0.02);
    test_fill_bf16(p.a, (size_t)(m * k), 1.0);
    return p;
}

static problem make_problem(int64_t m, int64_t n, int64_t k)
{
    return make_problem_group(m, n, k, QMM_GROUP);
}

static void free_problem(problem *p)
{
    qmm_w4_free(&p->w);
    free(p->a);
}

/* an output [M, N] followed by GUARD elements, all poisoned */
static qmm_bf16 *poisoned_output(size_t count)
{
    qmm_bf16 *c = malloc((count + GUARD) * sizeof *c);
    for (size_t i = 0; i < count + GUARD; i++) c[i] = TEST_POISON_BF16;
    return c;
}

static void check_guard(const qmm_bf16 *c, size_t count, const char *what)
{
    for (size_t i = count; i < count + GUARD; i++)
        if (c[i] != TEST_POISON_BF16) {
            CHECKF(0, "%s wrote past its output (element %zu)", what, i);
            return;
        }
}

static double bf16_ulp(double x)
{
    int e;
    frexp(fabs(x) < 0x1p-126 ? 0x1p-126 : fabs(x), &e); /* |x| in [2^(e-1), 2^e) */
    return ldexp(1.0, e - 1 - 7);
}

/* The reference against fp64 on a few shapes. */
static void ref_vs_fp64(void)
{
    const int64_t shapes[][4] = {{1, 1, 128, 128}, {3, 31, 256, 128}, {17, 64, 2560, 128},
                                 {40, 129, 1024, 128}, {1, 1, 32, 32},  {5, 33, 96, 32},
                                 {9, 40, 64, 64},      {17, 64, 2496, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        problem p = make_problem_group(m, n, k, (int)shapes[s][3]);
        size_t mn = (size_t)(m * n);
        double *ref = malloc(mn * sizeof *ref);
        qmm_bf16 *c = poisoned_output(mn);
        test_matmul_f64(p.a, m, &p.w, ref);
        CHECK_OK(qmm_matmul_ref(p.a, m, &p.w, c));
        double e = test_rel_frob_bf16(c, ref, mn);
        printf("    M=%lld N=%lld K=%lld g%d  ref vs fp64 %.2e\n", (long long)m, (long long)n,
               (long long)k, p.w.group, e);
        CHECKF(e <= MAX_REL, "M=%lld N=%lld K=%lld: rel. Frobenius %g", (long long)m,
               (long long)n, (long long)k, e);
        check_guard(c, mn, "qmm_matmul_ref");
        free(ref);
        free(c);
        free_problem(&p);
    }
}

/* Fast path vs reference on one problem: Frobenius and elementwise. The elementwise bound is
 * rigorous for two fp32 summation orders of K products (each within K·2^-24·Σ|a·w| of the
 * exact sum) plus one bf16 rounding each, so it cannot be flaky; a wrong group, code or bias
 * is tens of times larger. */
static void fast_vs_ref(problem *p, int threads)
{
    int64_t m = p->m, n = p->n, k = p->k;
    size_t mn = (size_t)(m * n);
    qmm_cpu_schedule sc = qmm_cpu_schedule_for(m, n, k, p->w.group, threads);
    qmm_bf16 *c_ref = poisoned_output(mn), *c_fast = poisoned_output(mn),
             *c_again = poisoned_output(mn);
    CHECK_OK(qmm_matmul_ref(p->a, m, &p->w, c_ref));
    CHECK_OK(qmm_matmul_cpu(p->a, m, &p->w, c_fast, threads));
    CHECK_OK(qmm_matmul_cpu(p->a, m, &p->w, c_again, threads));

    /* Σ|a|·|w| per output, for the elementwise bound */
    float *wd = malloc((size_t)(n * k) * sizeof *wd);
    CHECK_OK(qmm_dequantize(&p->w, wd, QMM_F32, (size_t)(n * k)));
    double max_ratio = 0, num = 0, den = 0;
    int bad = 0;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t r = 0; r < n; r++) {
            double absdot = 0;
            for (int64_t j = 0; j < k; j++)
                absdot += fabs((double)qmm_bf16_to_f32(p->a[i * k + j]) * wd[r * k + j]);
            double f = qmm_bf16_to_f32(c_fast[i * n + r]), g = qmm_bf16_to_f32(c_ref[i * n + r]);
            double tol = 2.0 * (double)k * 0x1p-24 * absdot + bf16_ulp(fmax(fabs(f), fabs(g)));
            double diff = fabs(f - g);
            if (!(diff <= tol) && bad++ < 5)
                CHECKF(0, "c[%lld][%lld]: fast %g ref %g (tolerance %g)", (long long)i,
                       (long long)r, f, g, tol);
            if (tol > 0) max_ratio = fmax(max_ratio, diff / tol);
            num += (f - g) * (f - g);
            den += g * g;
        }
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    printf("    M=%-4lld N=%-5lld K=%-5lld g%-3d threads %d -> %d used, K split %d: fast vs ref "
           "%.2e, worst diff/tolerance %.3f\n",
           (long long)m, (long long)n, (long long)k, p->w.group, threads, sc.threads, sc.split, rel,
           max_ratio);
    CHECKF(rel <= MAX_REL && bad == 0, "fast vs ref: rel %g, %d elements out of bound", rel, bad);
    CHECKF(!memcmp(c_fast, c_again, mn * sizeof *c_fast), "fast path not deterministic");
    check_guard(c_ref, mn, "qmm_matmul_ref");
    check_guard(c_fast, mn, "qmm_matmul_cpu");
    free(wd);
    free(c_ref);
    free(c_fast);
    free(c_again);
}

/* The grid: M in {1,3,17,33,128} x N in {1,31,1032} x K in {128,2560}, all CPUs;
 * the group size cycles through 128, 64, 32 so every size meets every kind of shape. */
static void fast_grid(void)
{
    const int64_t ms[] = {1, 3, 17, 33, 128}, ns[] = {1, 31, 1032}, ks[] = {128, 2560};
    const int groups[] = {128, 64, 32};
    int c = 0;
    for (int ki = 0; ki < 2; ki++)
        for (int ni = 0; ni < 3; ni++)
            for (int mi = 0; mi < 5; mi++) {
                problem p = make_problem_group(ms[mi], ns[ni], ks[ki], groups[c++ % 3]);
                fast_vs_ref(&p, 0);
                free_problem(&p);
            }
}

/* Thread counts 1..8 on shapes where some split K across threads and some do not. */
static void fast_thread_counts(void)
{
    const int64_t shapes[][4] = {{33, 1, 2560, 128}, {128, 31, 2560, 128}, {17, 9, 1024, 128},
                                 {300, 5, 1280, 128}, {3, 1032, 384, 128}, {64, 100, 640, 128},
                                 {33, 1, 160, 32},    {17, 9, 192, 64},    {40, 3, 2496, 64}};
    const int threads[] = {1, 2, 3, 4, 7, 8};
    int splits = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        problem p = make_problem_group(shapes[s][0], shapes[s][1], shapes[s][2], (int)shapes[s][3]);
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
            fast_vs_ref(&p, threads[t]);
            splits += qmm_cpu_schedule_for(p.m, p.n, p.k, p.w.group, threads[t]).split > 1;
        }
        free_problem(&p);
    }
    CHECKF(splits >= 10, "only %d cases split K across threads", splits);
}

/* The schedule: split only when panels are too few, group aligned, never more than K/group. */
static void schedule_rules(void)
{
    qmm_cpu_schedule s = qmm_cpu_schedule_for(128, 4096, 2560, 128, 2);
    CHECK(s.threads == 2 && s.split == 1 && s.panels == 512);
    s = qmm_cpu_schedule_for(128, 1, 2560, 128, 4);
    CHECK(s.threads == 4 && s.split == 8 && s.panels == 1);
    s = qmm_cpu_schedule_for(1024, 1, 256, 128, 4); /* only 2 groups */
    CHECK(s.split == 2 && s.threads == 2);
    s = qmm_cpu_schedule_for(1024, 1, 256, 64, 4); /* 4 groups of 64 */
    CHECK(s.split == 4 && s.threads == 4);
    s = qmm_cpu_schedule_for(1024, 1, 256, 32, 4); /* 8 groups of 32: the rule wants 8 */
    CHECK(s.split == 8 && s.threads == 4);
    s = qmm_cpu_schedule_for(1, 1, 128, 128, 8); /* tiny: one thread */
    CHECK(s.threads == 1 && s.split == 1);
    s = qmm_cpu_schedule_for(1, 4096, 2560, 128, 0); /* all CPUs */
    CHECK(s.threads >= 1 && s.split == 1);
}

/* A weight with wildly different group scales and an all-zero A row: exact zeros, no NaN. */
static void zero_rows_and_extremes(void)
{
    problem p = make_problem(5, 40, 512);
    for (int64_t j = 0; j < p.k; j++) p.a[2 * p.k + j] = 0; /* row 2 of A is zero */
    for (size_t g = 0; g < p.w.scales_count; g += 3) {
        p.w.scales[g] = qmm_f32_to_bf16(100.0f);
        p.w.biases[g] = qmm_f32_to_bf16(-750.0f);
    }
    size_t mn = (size_t)(p.m * p.n);
    double *ref = malloc(mn * sizeof *ref);
    qmm_bf16 *c_ref = poisoned_output(mn), *c_fast = poisoned_output(mn);
    test_matmul_f64(p.a, p.m, &p.w, ref);
    CHECK_OK(qmm_matmul_ref(p.a, p.m, &p.w, c_ref));
    CHECK_OK(qmm_matmul_cpu(p.a, p.m, &p.w, c_fast, 3));
    CHECK(test_rel_frob_bf16(c_ref, ref, mn) <= MAX_REL);
    CHECK(test_rel_frob_bf16(c_fast, ref, mn) <= MAX_REL);
    for (int64_t r = 0; r < p.n; r++)
        CHECK(c_ref[2 * p.n + r] == 0 && c_fast[2 * p.n + r] == 0);
    free(ref);
    free(c_ref);
    free(c_fast);
    free_problem(&p);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, ref_vs_fp64, fast_grid, fast_thread_counts, schedule_rules,
               zero_rows_and_extremes);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
