/* The seed planner (DESIGN.md §5): a pure function from a shape to a kernel path and split. */
#include "internal.h"

qmm_plan_params qmm_plan_seed_params(void)
{
    qmm_plan_params p = {.tile_m = 32, .tile_n = 32, .target_blocks = 320, .max_split = 16,
                         .matvec_max_m = 8};
    return p;
}

int qmm_split_align_group(int64_t k, int group, int want)
{
    if (!QMM_GROUP_OK(group) || k < group || k % group || want < 1) return 1;
    int s = want;
    while (s > 1 && k % ((int64_t)s * group)) s--;
    return s;
}

int qmm_split_align(int64_t k, int want) { return qmm_split_align_group(k, QMM_GROUP, want); }

// the plan for C[M, N] = A[M, K] · W[N, K]ᵀ
qmm_status qmm_plan_seed(int64_t m, int64_t n, int64_t k, const qmm_plan_params *p,
                         qmm_plan *out)
{
    qmm_clear_error();
    if (!p || !out) return qmm_fail(QMM_ERR_NULL, "qmm_plan_seed: %s is NULL", !p ? "p" : "out");
    if (m < 1 || n < 1 || k < 1 || k % QMM_GROUP)
        return qmm_fail(QMM_ERR_SHAPE,
                        "qmm_plan_seed: M = %lld, N = %lld, K = %lld (all >= 1, K a multiple "
                        "of %d)", (long long)m, (long long)n, (long long)k, QMM_GROUP);
    if (p->tile_m < 1 || p->tile_n < 1 || p->target_blocks < 1 || p->max_split < 1 ||
        p->matvec_max_m < 0)
        return qmm_fail(QMM_ERR_ARG,
                        "qmm_plan_seed: parameters tile %dx%d, target %d, cap %d, matvec M <= %d "
                        "(tiles, target and cap must be >= 1)", p->tile_m, p->tile_n,
                        p->target_blocks, p->max_split, p->matvec_max_m);
    int64_t rows = (m - 1) / p->tile_m + 1, cols = (n - 1) / p->tile_n + 1; /* ceil, no overflow */
    if (rows > INT64_MAX / cols)
        return qmm_fail(QMM_ERR_OVERFLOW, "qmm_plan_seed: %lld x %lld blocks overflow int64",
                        (long long)rows, (long long)cols);
    int64_t base = rows * cols;

    /* split = min(cap, max(1, floor(target / base)), K/128), then down to a divisor of K/128 */
    int64_t want = p->target_blocks / base;
    if (want < 1) want = 1;
    if (want > p->max_split) want = p->max_split;
    if (want > k / QMM_GROUP) want = k / QMM_GROUP;
    int split = qmm_split_align(k, (int)want);

    qmm_plan plan = {.split = split, .base_blocks = base, .blocks = base * split,
                     .tile_m = p->tile_m, .tile_n = p->tile_n, .predicted_us = -1.0};
    if (m <= p->matvec_max_m) {
        /* decode shapes: the matvec kernel has its own grid and never splits K */
        plan.path = QMM_PATH_MATVEC;
        plan.split = 1;
        plan.blocks = 0;
    } else {
        plan.path = split > 1 ? QMM_PATH_SPLITK : QMM_PATH_TILED;
    }
    if (k / plan.split > INT32_MAX)
        return qmm_fail(QMM_ERR_OVERFLOW, "qmm_plan_seed: K / split = %lld does not fit int",
                        (long long)(k / plan.split));
    plan.k_per_split = (int)(k / plan.split);
    *out = plan;
    return QMM_OK;
}
