/* `qmm bench ops`: the checked rows and the results list. Pure (no CUDA). The shared statistics and
 * data are in tools/common/. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ops.h"

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
