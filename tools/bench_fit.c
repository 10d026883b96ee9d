/* `qmm bench ops`: the refined split-K model beside the measured split sweep, and its calibration
 * (per-SM efficiency and launch overhead fitted by least squares). Pure (no CUDA). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ops.h"

/* Where the model is compared (issue 5): the projections split-K is for, at mid prompt lengths. */
static const char *const model_projs[] = {"k", "v", "o", "down"};
static const int64_t model_ms[] = {16, 32, 64};

void bench_model_setup_init(bench_model_setup *ms, int sms, const bench_ceilings *c,
                            const int *config_bps, int count, int bps_override)
{
    memset(ms, 0, sizeof *ms);
    if (qmm_model_gpu_preset("h200-measured", &ms->gpu) != QMM_OK ||
        qmm_model_kernel_preset("w4", &ms->kern) != QMM_OK) {
        snprintf(ms->why, sizeof ms->why, "model presets unavailable: %s", qmm_last_error());
        return;
    }
    ms->gpu.name = "this-gpu";
    if (sms > 0) ms->gpu.sms = sms;
    if (c->cublas.value > 0) ms->gpu.peak_tflops = c->cublas.value;
    if (c->copy.value > 0) ms->gpu.bandwidth_tbs = c->copy.value / 1000.0;
    for (int i = 0; config_bps && i < count && i < QMM_MAX_TILE_CONFIGS; i++)
        ms->config_bps[i] = config_bps[i] > 0 ? config_bps[i] : 0;
    ms->bps_override = bps_override > 0 ? bps_override : 0;
    if (ms->bps_override) ms->kern.blocks_per_sm = ms->bps_override;
    ms->ok = 1;
}

double bench_model_predict(const bench_model_setup *ms, const bench_model_point *p,
                           double efficiency, double launch_us)
{
    qmm_gpu_caps gpu = ms->gpu;
    qmm_model_kernel kern = ms->kern;
    gpu.launch_us = launch_us;
    kern.compute_efficiency = efficiency;
    if (p->tile_m > 0 && p->tile_n > 0) {
        kern.tile_m = p->tile_m;
        kern.tile_n = p->tile_n;
    }
    if (p->blocks_per_sm > 0) kern.blocks_per_sm = p->blocks_per_sm;
    qmm_model_estimate e;
    if (qmm_model_splitk_refined(&gpu, &kern, p->m, p->n, p->k, p->split, &e) != QMM_OK)
        return -1.0;
    return e.total_us;
}

static int is_model_case(const char *proj, int64_t m)
{
    int pj = 0, mm = 0;
    for (size_t i = 0; i < sizeof model_projs / sizeof model_projs[0]; i++)
        pj |= !strcmp(proj, model_projs[i]);
    for (size_t i = 0; i < sizeof model_ms / sizeof model_ms[0]; i++) mm |= m == model_ms[i];
    return pj && mm;
}

int bench_model_collect(const bench_results *rs, const bench_model_setup *ms,
                        bench_model_point *pts, int max)
{
    int n = 0;
    if (!ms->ok) return 0;
    for (size_t i = 0; i < rs->n && n < max; i++) {
        const bench_result *r = &rs->v[i];
        int is_tiled = !strcmp(r->contender, "tiled"), is_split = !strcmp(r->contender, "splitk");
        if ((!is_tiled && !is_split) || r->status != BENCH_PASS || !isfinite(r->t.graph_med) ||
            !is_model_case(r->proj, r->m))
            continue;
        bench_model_point *p = &pts[n];
        memset(p, 0, sizeof *p);
        snprintf(p->proj, sizeof p->proj, "%s", r->proj);
        p->m = r->m;
        p->n = r->n;
        p->k = r->k;
        p->split = is_tiled ? 1 : r->split;
        p->tile_m = r->tile_m;
        p->tile_n = r->tile_n;
        if (ms->bps_override) p->blocks_per_sm = ms->bps_override;
        else if (r->config >= 0 && r->config < QMM_MAX_TILE_CONFIGS)
            p->blocks_per_sm = ms->config_bps[r->config];
        p->measured_us = r->t.graph_med;
        p->planner_us = r->run_predicted_us;
        p->model_us = bench_model_predict(ms, p, ms->kern.compute_efficiency, ms->gpu.launch_us);
        p->calib_us = NAN;
        if (p->model_us > 0) n++;
    }
    return n;
}

/* Squared relative error of predictions t0 + L·c against the measurements, with the least-squares
 * L (clamped at 0) for these t0 and launch coefficients c. */
static double fit_launch(const double *meas, const double *t0, const double *c, int n, double *L)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        double w = 1.0 / (meas[i] * meas[i]);
        num += w * (meas[i] - t0[i]) * c[i];
        den += w * c[i] * c[i];
    }
    *L = den > 0 && num > 0 ? num / den : 0.0;
    double err = 0;
    for (int i = 0; i < n; i++) {
        double e = (t0[i] + *L * c[i] - meas[i]) / meas[i];
        err += e * e;
    }
    return err;
}

/* Error of one efficiency; fills the best launch overhead. Scratch arrays are [n]. */
static double try_efficiency(const bench_model_setup *ms, const bench_model_point *pts, int n,
                             double eff, double *meas, double *t0, double *c, double *L)
{
    for (int i = 0; i < n; i++) {
        /* The model is linear in the launch overhead (the reduce kernel adds a second launch);
         * reading the coefficient from the model keeps the fit honest if that changes. */
        double a = bench_model_predict(ms, &pts[i], eff, 0.0);
        double b = bench_model_predict(ms, &pts[i], eff, 1.0);
        if (a < 0 || b < 0) return INFINITY;
        meas[i] = pts[i].measured_us;
        t0[i] = a;
        c[i] = b - a;
    }
    return fit_launch(meas, t0, c, n, L);
}

static void rel_errors(const bench_model_point *pts, int n, int calibrated, double *rms,
                       double *worst)
{
    double s = 0, w = 0;
    for (int i = 0; i < n; i++) {
        double pred = calibrated ? pts[i].calib_us : pts[i].model_us;
        double e = 100.0 * (pred - pts[i].measured_us) / pts[i].measured_us;
        s += e * e;
        if (fabs(e) > w) w = fabs(e);
    }
    *rms = n ? sqrt(s / n) : NAN;
    *worst = n ? w : NAN;
}

void bench_model_calibrate(const bench_model_setup *ms, bench_model_point *pts, int n,
                           bench_calibration *cal)
{
    memset(cal, 0, sizeof *cal);
    cal->efficiency = cal->launch_us = NAN;
    cal->points = n;
    rel_errors(pts, n, 0, &cal->rms_before, &cal->worst_before);
    cal->rms_after = cal->worst_after = NAN;
    if (!ms->ok || n < 2) return;

    double *meas = malloc(sizeof *meas * (size_t)n), *t0 = malloc(sizeof *t0 * (size_t)n),
           *c = malloc(sizeof *c * (size_t)n);
    double best_err = INFINITY, best_eff = NAN, best_L = 0, L, lo, hi;
    if (!meas || !t0 || !c) goto done;
    /* Coarse grid over (0, 1], then a fine one around the best: the error is not convex in the
     * efficiency (max of compute and memory), so no gradient steps. */
    for (int i = 1; i <= 200; i++) {
        double eff = 0.005 * i;
        double err = try_efficiency(ms, pts, n, eff, meas, t0, c, &L);
        if (err < best_err) best_err = err, best_eff = eff, best_L = L;
    }
    if (!isfinite(best_err)) goto done;
    lo = fmax(best_eff - 0.005, 0.0001);
    hi = fmin(best_eff + 0.005, 1.0);
    for (int i = 0; i <= 100; i++) {
        double eff = lo + (hi - lo) * i / 100.0;
        double err = try_efficiency(ms, pts, n, eff, meas, t0, c, &L);
        if (err < best_err) best_err = err, best_eff = eff, best_L = L;
    }
    cal->ok = 1;
    cal->efficiency = best_eff;
    cal->launch_us = best_L;
    for (int i = 0; i < n; i++) pts[i].calib_us = bench_model_predict(ms, &pts[i], best_eff, best_L);
    rel_errors(pts, n, 1, &cal->rms_after, &cal->worst_after);
done:
    free(meas);
    free(t0);
    free(c);
}
