/* The device split-K policy: our tile, one full wave of resident blocks, the model's choice. */
#include <math.h>
#include <string.h>

#include "internal.h"

static qmm_status check_desc(const qmm_device_desc *d)
{
    if (!d) return qmm_fail(QMM_ERR_NULL, "device description is NULL");
    if (d->sm_count < 1 || d->max_split < 1 || d->min_k_tiles < 1 || d->config_count < 1 ||
        d->config_count > QMM_MAX_TILE_CONFIGS)
        return qmm_fail(QMM_ERR_ARG, "device description: sm_count %d, max_split %d, "
                        "min_k_tiles %d, config_count %d out of range", d->sm_count, d->max_split,
                        d->min_k_tiles, d->config_count);
    for (int i = 0; i < d->config_count; i++)
        if (d->config[i].tile_m < 1 || d->config[i].tile_n < 1 || d->config[i].blocks_per_sm < 1)
            return qmm_fail(QMM_ERR_ARG, "device description: tile configuration %d is invalid", i);
    /* Inf passes "> 0" but makes every prediction NaN or 0: finite values only */
    if (!(d->bandwidth_gbs > 0) || !(d->peak_tflops > 0) || !(d->launch_us >= 0) ||
        !isfinite(d->bandwidth_gbs) || !isfinite(d->peak_tflops) || !isfinite(d->launch_us))
        return qmm_fail(QMM_ERR_ARG, "device description: bandwidth %g, peak %g and launch %g "
                        "must be finite and > 0 (launch >= 0)", d->bandwidth_gbs, d->peak_tflops,
                        d->launch_us);
    if (!(d->dense_tflops >= 0) || !isfinite(d->dense_tflops))
        return qmm_fail(QMM_ERR_ARG, "device description: dense_tflops = %g must be finite and "
                        ">= 0", d->dense_tflops);
    return QMM_OK;
}

/* The refined model (src/model) seen through the device description: the tile of the plan's
 * configuration, its occupancy, W4 operands, bf16 partial planes. The matvec is a 16x8 mma tile
 * whose compute is negligible: its time is the operand floor plus a launch. */
double qmm_plan_predict_us(int64_t m, int64_t n, int64_t k, const qmm_device_desc *d,
                           const qmm_plan *p)
{
    if (!d || !p || m < 1 || n < 1 || k < 1 || check_desc(d) != QMM_OK) return -1;
    /* the dense path reads its configuration's tile too: check the index for every non-matvec
     * path */
    if (p->path != QMM_PATH_MATVEC &&
        (p->config < 0 || p->config >= d->config_count || p->split < 1))
        return -1;
    qmm_model_gpu gpu = {"device", d->sm_count, d->peak_tflops, d->bandwidth_gbs / 1e3, d->launch_us};
    qmm_model_kernel kern = {16, 8, QMM_GROUP, 8, 1.0, 2.0, 0.53125, 2.0, QMM_BF16, 0.0};
    int split = 1;
    if (p->path != QMM_PATH_MATVEC) {
        const qmm_tile_config *c = &d->config[p->config];
        kern.tile_m = c->tile_m;
        kern.tile_n = c->tile_n;
        kern.blocks_per_sm = c->blocks_per_sm;
        split = p->split;
    }
    if (p->path == QMM_PATH_DENSE) {
        if (!(d->dense_tflops > 0)) return -1;
        /* dequantize (read W4, write bf16), then a bf16 GEMM bound by cuBLAS's rate or its bytes */
        double bw = d->bandwidth_gbs * 1e3, nk = (double)n * (double)k;
        double dequant = nk * (0.53125 + 2.0) / bw + d->launch_us;
        double gemm_flops = 2.0 * (double)m * nk / (d->dense_tflops * 1e6);
        double gemm_bytes = (nk * 2.0 + (double)m * k * 2.0 + (double)m * n * 2.0) / bw;
        return dequant + (gemm_flops > gemm_bytes ? gemm_flops : gemm_bytes) + d->launch_us;
    }
    qmm_model_estimate e;
    if (qmm_model_splitk_refined(&gpu, &kern, m, n, k, split, &e) != QMM_OK) return -1;
    return e.total_us;
}

/* A plan leaves only with a usable prediction: extreme (finite) rates can still overflow it. */
static qmm_status finish(const qmm_plan *p, qmm_plan *out)
{
    if (!(p->predicted_us >= 0) || !isfinite(p->predicted_us))
        return qmm_fail(QMM_ERR_RANGE, "device plan: the predicted time is %g; the device "
                        "description's rates are out of range", p->predicted_us);
    *out = *p;
    return QMM_OK;
}

qmm_status qmm_plan_device(int64_t m, int64_t n, int64_t k, const qmm_device_desc *d,
                           qmm_plan *out)
{
    if (!out) return qmm_fail(QMM_ERR_NULL, "plan output is NULL");
    if (m < 1 || n < 1 || k < 1 || k % QMM_GROUP)
        return qmm_fail(QMM_ERR_SHAPE, "M = %lld, N = %lld, K = %lld: need >= 1 and K %% 128 == 0",
                        (long long)m, (long long)n, (long long)k);
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return qmm_fail(QMM_ERR_SHAPE, "M = %lld, N = %lld, K = %lld: each must fit in 32 bits",
                        (long long)m, (long long)n, (long long)k);
    qmm_status st = check_desc(d);
    if (st != QMM_OK) return st;

    qmm_plan p;
    memset(&p, 0, sizeof p);
    if (m <= d->matvec_max_m) {
        p.path = QMM_PATH_MATVEC;
        p.split = 1;
        p.tile_m = 8;
        p.tile_n = 16;
        p.base_blocks = p.blocks = 0;
        p.k_per_split = (int)k;
        p.predicted_us = qmm_plan_predict_us(m, n, k, d, &p);
        return finish(&p, out);
    }
    int ci = d->config_count - 1;
    for (int i = 0; i < d->config_count; i++)
        if (m <= d->config[i].max_m) { ci = i; break; }
    const qmm_tile_config *c = &d->config[ci];
    p.config = ci;
    p.tile_m = c->tile_m;
    p.tile_n = c->tile_n;
    p.base_blocks = ((m + c->tile_m - 1) / c->tile_m) * ((n + c->tile_n - 1) / c->tile_n);
    int64_t slots = (int64_t)d->sm_count * c->blocks_per_sm, groups = k / QMM_GROUP;
    int64_t want = slots / p.base_blocks;
    if (want > d->max_split) want = d->max_split;
    if (want > groups / d->min_k_tiles) want = groups / d->min_k_tiles;
    if (want < 1) want = 1;

    /* every aligned split up to the rule's; the model picks (ties keep the smaller split) */
    int best = 1;
    double best_us = -1;
    for (int s = 1; s <= want; s++) {
        if (groups % s) continue;
        p.split = s;
        p.path = s > 1 ? QMM_PATH_SPLITK : QMM_PATH_TILED;
        double us = qmm_plan_predict_us(m, n, k, d, &p);
        if (us < 0) continue;
        if (best_us < 0 || us < best_us * 0.999) best = s, best_us = us;
    }
    p.split = best;
    p.path = best > 1 ? QMM_PATH_SPLITK : QMM_PATH_TILED;
    p.blocks = p.base_blocks * best;
    p.k_per_split = (int)(k / best);
    p.predicted_us = best_us;

    /* long prompts: dequantize + cuBLAS when the model says it beats our tiled kernel */
    if (d->dense_tflops > 0 && m >= d->dense_min_m) {
        qmm_plan dense = p;
        dense.path = QMM_PATH_DENSE;
        dense.split = 1;
        dense.k_per_split = (int)k;
        dense.predicted_us = qmm_plan_predict_us(m, n, k, d, &dense);
        if (dense.predicted_us > 0 && dense.predicted_us < p.predicted_us) p = dense;
    }
    return finish(&p, out);
}
