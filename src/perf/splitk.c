/* Split-K wave models: the document's model, exact, and our refined model beside it
 * (DESIGN.md §6), plus the best-split searches the planner calls. */
#include <math.h>
#include <stdint.h>

#include "internal.h"

static qmm_status check_gpu(const qmm_gpu_caps *g, const char *fn)
{
    if (g->sms < 1) return qmm_fail(QMM_ERR_ARG, "%s: gpu sms = %d, need >= 1", fn, g->sms);
    if (!(g->peak_tflops > 0) || !isfinite(g->peak_tflops))
        return qmm_fail(QMM_ERR_RANGE, "%s: gpu peak_tflops = %g, need > 0", fn, g->peak_tflops);
    if (!(g->bandwidth_tbs > 0) || !isfinite(g->bandwidth_tbs))
        return qmm_fail(QMM_ERR_RANGE, "%s: gpu bandwidth_tbs = %g, need > 0", fn,
                        g->bandwidth_tbs);
    if (!(g->launch_us >= 0) || !isfinite(g->launch_us))
        return qmm_fail(QMM_ERR_RANGE, "%s: gpu launch_us = %g, need >= 0", fn, g->launch_us);
    return QMM_OK;
}

static int positive_finite(double x) { return x > 0 && isfinite(x); }

static qmm_status check_kernel(const qmm_model_kernel *kn, const char *fn)
{
    if (kn->tile_m < 1 || kn->tile_n < 1 || kn->tile_k < 1)
        return qmm_fail(QMM_ERR_ARG, "%s: kernel tile %dx%d (k %d), need >= 1", fn, kn->tile_m,
                        kn->tile_n, kn->tile_k);
    if (kn->blocks_per_sm < 1)
        return qmm_fail(QMM_ERR_ARG, "%s: kernel blocks_per_sm = %d, need >= 1", fn,
                        kn->blocks_per_sm);
    if (!(kn->compute_efficiency > 0 && kn->compute_efficiency <= 1))
        return qmm_fail(QMM_ERR_RANGE, "%s: compute_efficiency = %g, need in (0, 1]", fn,
                        kn->compute_efficiency);
    if (!positive_finite(kn->a_bytes_per_elem) || !positive_finite(kn->weight_bytes_per_elem) ||
        !positive_finite(kn->c_bytes_per_elem))
        return qmm_fail(QMM_ERR_RANGE, "%s: element bytes A %g, W %g, C %g, need > 0", fn,
                        kn->a_bytes_per_elem, kn->weight_bytes_per_elem, kn->c_bytes_per_elem);
    if (kn->partial_type != QMM_BF16 && kn->partial_type != QMM_F32)
        return qmm_fail(QMM_ERR_DTYPE, "%s: partial_type %d, need bf16 or f32", fn,
                        (int)kn->partial_type);
    if (!(kn->fixup_us >= 0) || !isfinite(kn->fixup_us))
        return qmm_fail(QMM_ERR_RANGE, "%s: fixup_us = %g, need >= 0", fn, kn->fixup_us);
    return QMM_OK;
}

/* Shape and split checks shared by both models; *tiles = ceil(m/tm)*ceil(n/tn). */
static qmm_status check_shape(int64_t m, int64_t n, int64_t k, int tm, int tn, int s,
                              int64_t *tiles, const char *fn)
{
    if (m < 1 || n < 1 || k < 1)
        return qmm_fail(QMM_ERR_SHAPE, "%s: M = %lld, N = %lld, K = %lld, need >= 1", fn,
                        (long long)m, (long long)n, (long long)k);
    if (tm < 1 || tn < 1)
        return qmm_fail(QMM_ERR_ARG, "%s: tile %dx%d, need >= 1", fn, tm, tn);
    if (s < 1 || s > k)
        return qmm_fail(QMM_ERR_ARG, "%s: split %d, need 1 <= s <= K = %lld", fn, s,
                        (long long)k);
    int64_t rows = (m - 1) / tm + 1, cols = (n - 1) / tn + 1;
    if (rows > INT64_MAX / cols || rows * cols > INT64_MAX / s)
        return qmm_fail(QMM_ERR_OVERFLOW, "%s: %lld x %lld tiles x %d splits overflow", fn,
                        (long long)rows, (long long)cols, s);
    *tiles = rows * cols;
    return QMM_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a - 1) / b + 1; }

qmm_status qmm_model_splitk_document(const qmm_gpu_caps *gpu, int64_t m, int64_t n, int64_t k,
                                     int bm, int bn, int s, qmm_model_estimate *out)
{
    static const char fn[] = "splitk_document";
    if (!gpu || !out) return qmm_fail(QMM_ERR_NULL, "%s: gpu or out is NULL", fn);
    qmm_status st = check_gpu(gpu, fn);
    int64_t tiles = 0;
    if (st == QMM_OK) st = check_shape(m, n, k, bm, bn, s, &tiles, fn);
    if (st != QMM_OK) return st;

    qmm_model_estimate e = {0};
    e.split = s;
    e.tiles = tiles;
    e.blocks = tiles * s;
    e.waves = ceil_div(e.blocks, gpu->sms);
    double sm_flops_per_us = gpu->peak_tflops * 1e6 / gpu->sms;
    e.compute_us = (double)e.waves * 2.0 * bm * bn * ((double)k / s) / sm_flops_per_us;
    if (s > 1) {
        e.partial_bytes = 8.0 * (double)m * (double)n * s; /* fp32 written + read back */
        e.reduction_us = e.partial_bytes / (gpu->bandwidth_tbs * 1e6);
    }
    e.total_us = e.compute_us + e.reduction_us;
    *out = e;
    qmm_clear_error();
    return QMM_OK;
}

double qmm_model_splitk_document_us(const qmm_gpu_caps *gpu, int64_t m, int64_t n, int64_t k,
                                    int bm, int bn, int s)
{
    qmm_model_estimate e;
    if (qmm_model_splitk_document(gpu, m, n, k, bm, bn, s, &e) != QMM_OK) return -1.0;
    return e.total_us;
}

// a is [M, K], w is [N, K], c is [M, N]; partial planes are [s, M, N]
qmm_status qmm_model_splitk_refined(const qmm_gpu_caps *gpu, const qmm_model_kernel *kern,
                                    int64_t m, int64_t n, int64_t k, int s,
                                    qmm_model_estimate *out)
{
    static const char fn[] = "splitk_refined";
    if (!gpu || !kern || !out) return qmm_fail(QMM_ERR_NULL, "%s: gpu, kernel or out is NULL", fn);
    qmm_status st = check_gpu(gpu, fn);
    if (st == QMM_OK) st = check_kernel(kern, fn);
    int64_t tiles = 0;
    if (st == QMM_OK) st = check_shape(m, n, k, kern->tile_m, kern->tile_n, s, &tiles, fn);
    if (st != QMM_OK) return st;

    double bytes_per_us = gpu->bandwidth_tbs * 1e6;
    qmm_model_estimate e = {0};
    e.split = s;
    e.tiles = tiles;
    e.blocks = tiles * s;
    e.waves = ceil_div(e.blocks, (int64_t)gpu->sms * kern->blocks_per_sm);
    /* A resident block gets 1/blocks_per_sm of its SM's achievable rate, so a wave lasts
     * blocks_per_sm single-block times; a partial wave costs a full one. */
    double sm_flops_per_us = gpu->peak_tflops * kern->compute_efficiency * 1e6 / gpu->sms;
    double block_us = 2.0 * kern->tile_m * kern->tile_n * ((double)k / s) / sm_flops_per_us;
    e.compute_us = (double)e.waves * kern->blocks_per_sm * block_us;
    e.operand_bytes = (double)m * (double)k * kern->a_bytes_per_elem +
                      (double)n * (double)k * kern->weight_bytes_per_elem +
                      (double)m * (double)n * kern->c_bytes_per_elem;
    e.memory_us = e.operand_bytes / bytes_per_us;
    e.memory_bound = e.memory_us > e.compute_us;
    e.launch_us = gpu->launch_us;
    if (s > 1) {
        /* Each partition writes its [M, N] plane; the reduce kernel reads them all back. */
        double elem = kern->partial_type == QMM_F32 ? 4.0 : 2.0;
        e.partial_bytes = 2.0 * s * (double)m * (double)n * elem;
        e.reduction_us = e.partial_bytes / bytes_per_us + gpu->launch_us;
    }
    e.total_us = fmax(e.compute_us, e.memory_us) + e.launch_us + e.reduction_us;
    *out = e;
    qmm_clear_error();
    return QMM_OK;
}

qmm_status qmm_model_best_split_document(const qmm_gpu_caps *gpu, int64_t m, int64_t n,
                                         int64_t k, int bm, int bn, int max_split,
                                         qmm_model_estimate *best)
{
    if (!best) return qmm_fail(QMM_ERR_NULL, "best_split_document: best is NULL");
    if (max_split < 1 || max_split > QMM_MODEL_MAX_SPLIT)
        return qmm_fail(QMM_ERR_ARG, "best_split_document: max_split = %d, need 1..%d", max_split,
                        QMM_MODEL_MAX_SPLIT);
    qmm_model_estimate b, e;
    qmm_status st = qmm_model_splitk_document(gpu, m, n, k, bm, bn, 1, &b);
    if (st != QMM_OK) return st;
    for (int s = 2; s <= max_split && s <= k; s++) {
        st = qmm_model_splitk_document(gpu, m, n, k, bm, bn, s, &e);
        if (st != QMM_OK) return st;
        if (e.total_us < b.total_us) b = e;
    }
    *best = b;
    return QMM_OK;
}

qmm_status qmm_model_best_split(const qmm_gpu_caps *gpu, const qmm_model_kernel *kern,
                                int64_t m, int64_t n, int64_t k, int max_split, int align,
                                qmm_model_estimate *best)
{
    if (!best) return qmm_fail(QMM_ERR_NULL, "best_split: best is NULL");
    if (max_split < 1 || max_split > QMM_MODEL_MAX_SPLIT)
        return qmm_fail(QMM_ERR_ARG, "best_split: max_split = %d, need 1..%d", max_split,
                        QMM_MODEL_MAX_SPLIT);
    if (align < 0) return qmm_fail(QMM_ERR_ARG, "best_split: align = %d, need >= 0", align);
    if (align > 0 && k >= 1 && k % align != 0)
        return qmm_fail(QMM_ERR_SHAPE, "best_split: K = %lld is not a multiple of align %d",
                        (long long)k, align);
    qmm_model_estimate b, e;
    qmm_status st = qmm_model_splitk_refined(gpu, kern, m, n, k, 1, &b);
    if (st != QMM_OK) return st;
    for (int s = 2; s <= max_split && s <= k; s++) {
        if (align > 0 && k % ((int64_t)s * align) != 0) continue;
        st = qmm_model_splitk_refined(gpu, kern, m, n, k, s, &e);
        if (st != QMM_OK) return st;
        if (e.total_us < b.total_us) b = e;
    }
    *best = b;
    return QMM_OK;
}
