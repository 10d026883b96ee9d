/* `qmm bench ops`: statistics, random data, output checks and the results list. Pure (no CUDA). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ops.h"

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

/* splitmix64: tiny, seedable, good enough for test data. */
uint64_t bench_rng_next(bench_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double bench_rng_uniform(bench_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(bench_rng_next(r) >> 11) * 0x1.0p-53);
}

void bench_random_w4(bench_rng *r, qmm_w4 *w)
{
    for (size_t i = 0; i < w->packed_count; i++) w->packed[i] = (uint32_t)bench_rng_next(r);
    for (size_t g = 0; g < w->scales_count; g++) {
        double mag = bench_rng_uniform(r, 0.004, 0.03);
        double s = (bench_rng_next(r) & 1) ? mag : -mag;
        /* The bias is the group's edge of larger magnitude, so it sits near -7.5·s whatever
         * the sign of s: the dequantized weights straddle zero, as in real checkpoints. */
        w->scales[g] = qmm_f32_to_bf16((float)s);
        w->biases[g] = qmm_f32_to_bf16((float)(-s * bench_rng_uniform(r, 6.5, 8.5)));
    }
}

void bench_random_bf16(bench_rng *r, qmm_bf16 *x, size_t count)
{
    for (size_t i = 0; i < count; i++) x[i] = qmm_f32_to_bf16((float)bench_rng_uniform(r, -1, 1));
}

// rows is [BENCH_FULL_CHECK_ROWS]
int bench_check_rows(int64_t m, int64_t *rows)
{
    if (m <= BENCH_FULL_CHECK_ROWS) {
        for (int64_t i = 0; i < m; i++) rows[i] = i;
        return (int)m;
    }
    for (int i = 0; i < BENCH_SAMPLE_ROWS; i++)
        rows[i] = (int64_t)((double)i * (double)(m - 1) / (BENCH_SAMPLE_ROWS - 1) + 0.5);
    return BENCH_SAMPLE_ROWS;
}

// got, ref are [count]
double bench_rel_frob(const qmm_bf16 *got, const qmm_bf16 *ref, size_t count, size_t *nonfinite)
{
    double num = 0, den = 0;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        double g = qmm_bf16_to_f32(got[i]), r = qmm_bf16_to_f32(ref[i]);
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

bench_result *bench_results_push(bench_results *rs, const bench_result *r)
{
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 64;
        bench_result *v = realloc(rs->v, cap * sizeof *v);
        if (!v) return NULL;
        rs->v = v;
        rs->cap = cap;
    }
    rs->v[rs->n] = *r;
    return &rs->v[rs->n++];
}

void bench_results_free(bench_results *rs)
{
    free(rs->v);
    memset(rs, 0, sizeof *rs);
}

const bench_result *bench_results_find(const bench_results *rs, const char *proj, int64_t m,
                                       const char *name, int split)
{
    for (size_t i = 0; i < rs->n; i++) {
        const bench_result *r = &rs->v[i];
        if (r->m == m && !strcmp(r->proj, proj) && !strcmp(r->contender, name) &&
            (split <= 0 || r->split == split))
            return r;
    }
    return NULL;
}

const bench_result *bench_results_best_split(const bench_results *rs, const char *proj, int64_t m)
{
    const bench_result *best = NULL;
    for (size_t i = 0; i < rs->n; i++) {
        const bench_result *r = &rs->v[i];
        if (r->m != m || strcmp(r->proj, proj) || strcmp(r->contender, "splitk") ||
            r->status != BENCH_PASS || !isfinite(r->t.graph_med))
            continue;
        if (!best || r->t.graph_med < best->t.graph_med) best = r;
    }
    return best;
}
