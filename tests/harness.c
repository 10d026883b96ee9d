#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t g_seed, g_state;
static int g_failed_now;
static const char *g_case;

uint64_t test_seed(void) { return g_seed; }

uint64_t test_rand_u64(void)
{
    /* splitmix64: small, good enough for test data */
    uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double test_rand_uniform(double lo, double hi)
{
    return lo + (hi - lo) * ((double)(test_rand_u64() >> 11) * (1.0 / 9007199254740992.0));
}

double test_rand_normal(void)
{
    double u1 = test_rand_uniform(1e-12, 1.0), u2 = test_rand_uniform(0.0, 1.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void test_fill_bf16(qmm_bf16 *x, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) x[i] = qmm_f32_to_bf16((float)(scale * test_rand_normal()));
}

void test_random_w4(qmm_w4 *w, double scale_lo, double scale_hi)
{
    for (size_t i = 0; i < w->packed_count; i++) w->packed[i] = (uint32_t)test_rand_u64();
    for (size_t i = 0; i < w->scales_count; i++) {
        double s = test_rand_uniform(scale_lo, scale_hi);
        if (test_rand_u64() & 1) s = -s;
        w->scales[i] = qmm_f32_to_bf16((float)s);
        /* bias centres the group: about -7.5*s, jittered */
        w->biases[i] = qmm_f32_to_bf16((float)(-7.5 * s + 0.25 * s * test_rand_normal()));
    }
}

void test_matmul_f64(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, double *c)
{
    int64_t n = w->n, k = w->k, gs = w->group, g = k / gs;
    double *row = malloc((size_t)k * sizeof *row);
    for (int64_t r = 0; r < n; r++) {
        for (int64_t j = 0; j < k; j++) {
            uint32_t q = (w->packed[r * (k / 8) + j / 8] >> (4 * (j % 8))) & 0xF;
            double s = qmm_bf16_to_f32(w->scales[r * g + j / gs]);
            double b = qmm_bf16_to_f32(w->biases[r * g + j / gs]);
            row[j] = s * q + b;
        }
        for (int64_t i = 0; i < m; i++) {
            double acc = 0;
            for (int64_t j = 0; j < k; j++) acc += (double)qmm_bf16_to_f32(a[i * k + j]) * row[j];
            c[i * n + r] = acc;
        }
    }
    free(row);
}

double test_rel_frob_bf16(const qmm_bf16 *got, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double g = qmm_bf16_to_f32(got[i]);
        if (!isfinite(g)) return INFINITY;
        num += (g - ref[i]) * (g - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double test_rel_frob_f32(const float *got, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i];
        if (!isfinite(g)) return INFINITY;
        num += (g - ref[i]) * (g - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "    FAIL %s:%d [%s] ", file, line, g_case ? g_case : "?");
    vfprintf(stdout, fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    g_failed_now = 1;
}

int test_failed_now(void) { return g_failed_now; }

void test_skip_all(const char *why)
{
    printf("SKIP: %s\n", why);
    printf("0 passed, 0 failed, all skipped\n");
    fflush(stdout);
    exit(77);
}

int test_main(int argc, char **argv, const test_case *cases, int count)
{
    const char *filter = NULL;
    int have_seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            g_seed = strtoull(argv[++i], NULL, 0);
            have_seed = 1;
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
            filter = argv[++i];
        } else if (!strcmp(argv[i], "--list")) {
            for (int c = 0; c < count; c++) printf("%s\n", cases[c].name);
            return 0;
        } else {
            fprintf(stderr, "usage: %s [--seed N] [--filter SUBSTR] [--list]\n", argv[0]);
            return 2;
        }
    }
    if (!have_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        g_seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
    }
    printf("%s: seed %llu (rerun with --seed %llu)\n", argv[0], (unsigned long long)g_seed,
           (unsigned long long)g_seed);
    int passed = 0, failed = 0;
    for (int c = 0; c < count; c++) {
        if (filter && !strstr(cases[c].name, filter)) continue;
        g_case = cases[c].name;
        g_failed_now = 0;
        g_state = g_seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(c + 1));
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cases[c].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6;
        printf("%-4s %s (%.1f ms)\n", g_failed_now ? "FAIL" : "ok", cases[c].name, ms);
        fflush(stdout);
        if (g_failed_now) failed++; else passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
