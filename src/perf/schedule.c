/* Pipeline schedule: three in-order engines (load, compute, store), n tiles, b buffers, simulated
 * event by event (DESIGN.md §6), with the document's closed form beside the simulation. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

const char *qmm_model_engine_name(int e)
{
    static const char *const names[QMM_MODEL_ENGINES] = {"load", "compute", "store"};
    return e >= 0 && e < QMM_MODEL_ENGINES ? names[e] : "?";
}

/* Duration of engine e on tile i. */
static double duration(const qmm_model_pipeline *p, int e, int i)
{
    return p->per_tile[e] ? p->per_tile[e][i] : p->time[e];
}

static qmm_status check_pipeline(const qmm_model_pipeline *p)
{
    if (p->tiles < 1) return qmm_fail(QMM_ERR_ARG, "pipeline: tiles = %d, need >= 1", p->tiles);
    if (p->buffers < 1)
        return qmm_fail(QMM_ERR_ARG, "pipeline: buffers = %d, need >= 1", p->buffers);
    for (int e = 0; e < QMM_MODEL_ENGINES; e++)
        for (int i = 0; i < (p->per_tile[e] ? p->tiles : 1); i++) {
            double t = duration(p, e, i);
            if (!isfinite(t) || t < 0)
                return qmm_fail(QMM_ERR_RANGE, "pipeline: %s time of tile %d is %g, need >= 0",
                                qmm_model_engine_name(e), i, t);
        }
    return QMM_OK;
}

/* The document's estimate from the engine means: b = 1 alternates load and compute;
 * b >= 2 assumes the slowest engine runs without a break after the first load. */
static double closed_form(const qmm_model_pipeline *p)
{
    double mean[QMM_MODEL_ENGINES];
    for (int e = 0; e < QMM_MODEL_ENGINES; e++) {
        if (!p->per_tile[e]) {
            mean[e] = p->time[e];
            continue;
        }
        double sum = 0;
        for (int i = 0; i < p->tiles; i++) sum += p->per_tile[e][i];
        mean[e] = sum / p->tiles;
    }
    double l = mean[QMM_ENGINE_LOAD], c = mean[QMM_ENGINE_COMPUTE], s = mean[QMM_ENGINE_STORE];
    if (p->buffers == 1) return p->tiles * (l + c) + s;
    return l + p->tiles * fmax(l, fmax(c, s)) + s;
}

qmm_status qmm_model_schedule_run(const qmm_model_pipeline *p, qmm_model_segment *seg,
                                  size_t seg_count, qmm_model_schedule *out)
{
    if (!p || !out) return qmm_fail(QMM_ERR_NULL, "schedule_run: pipeline or out is NULL");
    qmm_status st = check_pipeline(p);
    if (st != QMM_OK) return st;
    int n = p->tiles, b = p->buffers;
    if (seg && seg_count < (size_t)3 * (size_t)n)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "schedule_run: seg_count = %zu, need >= 3*%d",
                        seg_count, n);

    /* Compute ends are what a later load waits on (tile i-b); keep them in seg or in scratch. */
    double *scratch = NULL;
    if (!seg) {
        scratch = malloc((size_t)n * sizeof *scratch);
        if (!scratch) return qmm_fail(QMM_ERR_NOMEM, "schedule_run: %d tiles of scratch", n);
    }

    qmm_model_schedule r = {0};
    double load_end = 0, comp_end = 0, store_end = 0;
    for (int i = 0; i < n; i++) {
        double ls = load_end;
        if (i >= b) {
            double freed = seg ? seg[n + i - b].end : scratch[i - b];
            if (freed > ls) ls = freed;
        }
        double le = ls + duration(p, QMM_ENGINE_LOAD, i);
        double cs = fmax(le, comp_end);
        double ce = cs + duration(p, QMM_ENGINE_COMPUTE, i);
        double ss = fmax(ce, store_end);
        double se = ss + duration(p, QMM_ENGINE_STORE, i);
        if (i > 0) { /* in-order engines: a stall is the gap after the previous tile */
            r.stall[QMM_ENGINE_LOAD] += ls - load_end;
            r.stall[QMM_ENGINE_COMPUTE] += cs - comp_end;
            r.stall[QMM_ENGINE_STORE] += ss - store_end;
        }
        if (seg) {
            seg[i] = (qmm_model_segment){ls, le};
            seg[n + i] = (qmm_model_segment){cs, ce};
            seg[2 * n + i] = (qmm_model_segment){ss, se};
        } else {
            scratch[i] = ce;
        }
        for (int e = 0; e < QMM_MODEL_ENGINES; e++) r.busy[e] += duration(p, e, i);
        load_end = le;
        comp_end = ce;
        store_end = se;
    }
    free(scratch);

    r.total = store_end;
    for (int e = 0; e < QMM_MODEL_ENGINES; e++) r.idle[e] = r.total - r.busy[e];
    r.closed_form = closed_form(p);
    r.closed_form_exact = fabs(r.closed_form - r.total) <= 1e-9 * fmax(1.0, r.total);
    *out = r;
    qmm_clear_error();
    return QMM_OK;
}


qmm_status qmm_model_jitter_times(const double base[QMM_MODEL_ENGINES], int tiles, double jitter,
                                  uint64_t seed, double *times, size_t count)
{
    if (!base || !times) return qmm_fail(QMM_ERR_NULL, "jitter_times: base or times is NULL");
    if (tiles < 1) return qmm_fail(QMM_ERR_ARG, "jitter_times: tiles = %d, need >= 1", tiles);
    if (!(jitter >= 0 && jitter < 1))
        return qmm_fail(QMM_ERR_RANGE, "jitter_times: jitter = %g, need 0 <= jitter < 1", jitter);
    for (int e = 0; e < QMM_MODEL_ENGINES; e++)
        if (!isfinite(base[e]) || base[e] < 0)
            return qmm_fail(QMM_ERR_RANGE, "jitter_times: %s time %g, need >= 0",
                            qmm_model_engine_name(e), base[e]);
    if (count < (size_t)3 * (size_t)tiles)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "jitter_times: count = %zu, need >= 3*%d", count,
                        tiles);
    uint64_t state = seed;
    for (int i = 0; i < tiles; i++)
        for (int e = 0; e < QMM_MODEL_ENGINES; e++) {
            double u = (double)(qmm_splitmix64(&state) >> 11) * (1.0 / 9007199254740992.0);
            times[(size_t)e * tiles + i] = base[e] * (1 + jitter * (2 * u - 1));
        }
    qmm_clear_error();
    return QMM_OK;
}
