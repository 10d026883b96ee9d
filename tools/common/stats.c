/* Statistics and result errors for the tools. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// x is [n], n >= 1
void bench_summary(const double *x, int n, double *med, double *min, double *max)
{
    double *s = malloc(sizeof *s * (size_t)(n > 0 ? n : 1));
    if (!s || n < 1) {
        *med = *min = *max = NAN;
        free(s);
        return;
    }
    memcpy(s, x, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    *min = s[0];
    *max = s[n - 1];
    *med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
}

/* ref(i) is the reference of element i: from bf16 or from fp64 */
static double rel_frob(const qmm_bf16 *got, const qmm_bf16 *ref16, const double *ref64,
                       size_t count, size_t *nonfinite)
{
    double num = 0, den = 0;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        double g = qmm_bf16_to_f32(got[i]), r = ref16 ? qmm_bf16_to_f32(ref16[i]) : ref64[i];
        if (!isfinite(g)) {
            bad++;
            continue;
        }
        num += (g - r) * (g - r);
        den += r * r;
    }
    if (nonfinite) *nonfinite = bad;
    if (bad) return INFINITY;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double bench_rel_frob(const qmm_bf16 *got, const qmm_bf16 *ref, size_t count, size_t *nonfinite)
{
    return rel_frob(got, ref, NULL, count, nonfinite);
}

double bench_rel_frob_f64(const qmm_bf16 *got, const double *ref, size_t count)
{
    return rel_frob(got, NULL, ref, count, NULL);
}
