/* The device split-K policy: our tile, one full wave of resident blocks, the model's choice. */
#include <math.h>
#include <string.h>

#include "plan.h"
#include "plan_sm90.h"

static int finite_pos(double x) { return isfinite(x) && x > 0; }

qmm_status qmm_check_desc(const qmm_device_desc *d)
{
    if (!d) return qmm_fail(QMM_ERR_NULL, "device description is NULL");
    if (d->gpu.sms < 1 || d->max_split < 1 || d->min_k_tiles < 1 || d->config_count < 1 ||
        d->config_count > QMM_MAX_TILE_CONFIGS || d->matvec_max_m < 0 ||
        d->matvec_limit_m < d->matvec_max_m || d->wgmma_min_m < 0 ||
        d->wgmma_max_m < d->wgmma_min_m || d->dense_force_m < 0 || d->dense_narrow_n < 0 ||
        d->dense_narrow_m < 0)
        return qmm_fail(QMM_ERR_ARG, "device description: sm_count %d, max_split %d, "
                        "min_k_tiles %d, config_count %d, matvec M <= %d (kernel %d) out of range",
                        d->gpu.sms, d->max_split, d->min_k_tiles, d->config_count,
                        d->matvec_max_m, d->matvec_limit_m);
    if (d->wgmma_wide_min_m < 0)
        return qmm_fail(QMM_ERR_ARG, "device description: wgmma_wide_min_m %d must be >= 0",
                        d->wgmma_wide_min_m);
    if (d->wgmma_rest_min_tile < 0 || d->wgmma_rest_min_tile > 256)
        return qmm_fail(QMM_ERR_ARG, "device description: wgmma_rest_min_tile %d: use 0 (never) or a "
                        "token tile", d->wgmma_rest_min_tile);
    if (d->wgmma_alt_min_tile != 0 && d->wgmma_alt_min_tile != 32 && d->wgmma_alt_min_tile != 64 &&
        d->wgmma_alt_min_tile != 128) /* the token tiles with two heights */
        return qmm_fail(QMM_ERR_ARG, "device description: wgmma_alt_min_tile %d: use 0 (never), "
                        "32, 64 or 128", d->wgmma_alt_min_tile);
    for (int i = 0; i < d->config_count; i++) {
        const qmm_tile_config *c = &d->config[i];
        if (c->tile_m < 1 || c->tile_n < 1 || c->blocks_per_sm < 1 || c->max_m < 1 ||
            c->stages < 1 || c->stages > QMM_MAX_STAGES)
            return qmm_fail(QMM_ERR_ARG, "device description: tile configuration %d is invalid", i);
    }
    if (!finite_pos(d->gpu.bandwidth_tbs) || !finite_pos(d->gpu.peak_tflops) ||
        !finite_pos(d->tiled_tflops) || !isfinite(d->gpu.launch_us) || d->gpu.launch_us < 0 ||
        !isfinite(d->dense_tflops) || d->dense_tflops < 0 || !isfinite(d->dense_fixed_us) ||
        d->dense_fixed_us < 0 || !isfinite(d->dense_dequant_tbs) || d->dense_dequant_tbs < 0)
        return qmm_fail(QMM_ERR_ARG, "device description: bandwidth, peak and tiled rate must be "
                        "finite and > 0, launch and the dense path's constants finite and >= 0");
    const qmm_wgmma_model *w = &d->wgmma_model;
    const double pred[] = {w->fixed_us, w->fill_us_per_kb, w->stage_us, w->us_per_mflop,
                           w->issue_us, w->round_trip_us, w->partial_us_per_mb,
                           w->cluster_us, w->cluster_us_per_kb, w->wide_kblock_us,
                           d->matvec_fixed_us, d->matvec_tbs, d->matvec_row_token_ns};
    for (size_t i = 0; i < sizeof pred / sizeof pred[0]; i++)
        if (!isfinite(pred[i]) || pred[i] < 0)
            return qmm_fail(QMM_ERR_ARG, "device description: the wgmma and matvec model "
                            "constants must be finite and >= 0 (#%zu is %g)", i, pred[i]);
    return QMM_OK;
}

int qmm_choose_config(const qmm_device_desc *d, int64_t m)
{
    for (int i = 0; i < d->config_count; i++)
        if (m <= d->config[i].max_m) return i;
    return d->config_count - 1;
}

/* The refined model (src/perf) seen through the device description: the tile of the plan's
 * configuration, its occupancy, W4 operands, bf16 partial planes. The wgmma kernel and (where the
 * description has its constants) the matvec have models of their own, fitted per GPU; without
 * them the matvec is a 16x8 mma tile whose time is the operand floor plus a launch. */
double qmm_plan_predict_us(int64_t m, int64_t n, int64_t k, const qmm_device_desc *d,
                           const qmm_plan *p)
{
    if (!d || !p || m < 1 || n < 1 || k < 1 || qmm_check_desc(d) != QMM_OK) return -1;
    if (p->path == QMM_PATH_WGMMA || p->path == QMM_PATH_STREAMK) {
        /* the wgmma kernel's own model over its schedule (src/perf/wgmma.c) */
        int tn = 0, wg = 0, bps = qmm_sm90_blocks_per_sm(p->config);
        if (!qmm_sm90_config(p->config, &tn, &wg, NULL) || k % QMM_GROUP) return -1;
        const int split = p->path == QMM_PATH_STREAMK ? 0 : p->split;
        const int64_t slots = qmm_sm90_cluster_slots(d, p->config, split);
        if (slots < 0) return -1; /* such clusters do not fit this GPU: no prediction */
        if (p->rest_tiles > 0) {
            /* the clusters' wave beside the rest (plan_sm90.c), the slower of the two, the rest
             * priced as a stream-K launch of its own (on an H100: o at M = 256 14.2 µs predicted,
             * 13.5-13.7 measured; down 27.0 against 24.1-24.4; NOTES.md rows 229-230: not fitted
             * on its own). The model counts tiles, so each part is given one token tile of as
             * many weight tiles */
            const int64_t first = p->base_blocks - p->rest_tiles, rows = 64 * (int64_t)wg;
            const double a = qmm_model_wgmma_us(&d->wgmma_model, d->gpu.sms, tn, first * rows, k / QMM_GROUP, tn,
                                                wg, bps, first * split, split, slots);
            const double b = qmm_model_wgmma_us(&d->wgmma_model, d->gpu.sms, tn, p->rest_tiles * rows,
                                                k / QMM_GROUP, tn, wg, bps,
                                                (int64_t)p->rest_tiles * p->rest_split, 0, 0);
            return a < 0 || b < 0 ? -1 : a > b ? a : b;
        }
        return qmm_model_wgmma_us(&d->wgmma_model, d->gpu.sms, m, n, k / QMM_GROUP, tn, wg, bps,
                                  p->blocks, split, slots);
    }
    if (p->path == QMM_PATH_MATVEC && d->matvec_tbs > 0) {
        /* weights streamed once at the matvec's effective rate, plus a fixed cost and a term per
         * extra token and output row (its reduction and stores): fitted in tune/sm90.c */
        double bytes = (double)n * (double)k * 0.53125; /* codes + bf16 scale|bias a group */
        double t = d->matvec_fixed_us + bytes / (d->matvec_tbs * 1e6) +
                   (double)(m - 1) * (double)n * d->matvec_row_token_ns * 1e-3;
        return isfinite(t) ? t : -1;
    }
    /* every non-matvec plan names a tiled configuration (the dense plan keeps its tiled
     * alternative's): an index out of range is a bad plan */
    if (p->path != QMM_PATH_MATVEC &&
        (p->config < 0 || p->config >= d->config_count || p->split < 1))
        return -1;
    if (p->path == QMM_PATH_DENSE) {
        if (!(d->dense_tflops > 0)) return -1;
        /* dequantize (read W4, write bf16), then a bf16 GEMM bound by cuBLAS's rate or its
         * bytes; a fixed cost and the dequantize pass's rate where the table fits them */
        double bw = d->gpu.bandwidth_tbs * 1e6, nk = (double)n * (double)k; /* bytes per µs */
        double fixed = d->dense_fixed_us > 0 ? d->dense_fixed_us : 2.0 * d->gpu.launch_us;
        double dq_bw = d->dense_dequant_tbs > 0 ? d->dense_dequant_tbs * 1e6 : bw;
        double dequant = nk * (0.53125 + 2.0) / dq_bw;
        double gemm_flops = 2.0 * (double)m * nk / (d->dense_tflops * 1e6);
        double gemm_bytes = (nk * 2.0 + (double)m * k * 2.0 + (double)m * n * 2.0) / bw;
        double t = fixed + dequant + (gemm_flops > gemm_bytes ? gemm_flops : gemm_bytes);
        return isfinite(t) ? t : -1;
    }
    qmm_gpu_caps gpu = d->gpu;
    gpu.peak_tflops = d->tiled_tflops; /* the model's compute rate is our kernel's, not cuBLAS's */
    qmm_model_kernel kern = {16, 8, QMM_GROUP, 8, 1.0, 2.0, 0.53125, 2.0, QMM_BF16, 0.0};
    int split = 1;
    if (p->path != QMM_PATH_MATVEC) {
        const qmm_tile_config *c = &d->config[p->config];
        kern.tile_m = c->tile_m;
        kern.tile_n = c->tile_n;
        kern.blocks_per_sm = c->blocks_per_sm;
        split = p->split;
    }
    qmm_model_estimate e;
    if (qmm_model_splitk_refined(&gpu, &kern, m, n, k, split, &e) != QMM_OK) return -1;
    return e.total_us;
}

qmm_status qmm_plan_device(int64_t m, int64_t n, int64_t k, const qmm_device_desc *d,
                           qmm_plan *out)
{
    if (!d) return qmm_fail(QMM_ERR_NULL, "device description is NULL");
    qmm_device_desc tiled = *d;
    tiled.wgmma_min_m = 0; /* the split-K policy of the tiled kernels only, */
    tiled.dense_force_m = tiled.dense_narrow_n = 0; /* the dense path where the model says so */
    qmm_cuda_options o = qmm_cuda_options_default();
    o.policy = QMM_POLICY_DEVICE;
    return qmm_plan_call(&tiled, m, n, k, &o, out);
}
