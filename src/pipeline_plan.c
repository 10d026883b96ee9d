/*
 * The chunked pipeline's schedule as data: which rows each chunk covers, which slot it uses and
 * which earlier steps each step waits for. The CUDA code (src/cuda/pipeline.cu) issues exactly
 * these steps, so the CPU tests of the plan test the order the GPU sees. Builds without CUDA get
 * the CUDA entry points here as stubs that answer QMM_ERR_UNSUPPORTED.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "internal.h"

qmm_status qmm_pipeline_chunk_count(int64_t m_total, int64_t chunk_rows, int *chunks)
{
    if (!chunks) return qmm_fail(QMM_ERR_NULL, "pipeline: chunks is NULL");
    if (m_total < 1 || chunk_rows < 1)
        return qmm_fail(QMM_ERR_SHAPE, "pipeline: M_total = %lld, chunk rows = %lld, need >= 1",
                        (long long)m_total, (long long)chunk_rows);
    int64_t n = (m_total + chunk_rows - 1) / chunk_rows; /* no overflow: both >= 1 */
    if (n > INT_MAX)
        return qmm_fail(QMM_ERR_RANGE, "pipeline: %lld chunks do not fit an int", (long long)n);
    *chunks = (int)n;
    qmm_clear_error();
    return QMM_OK;
}

qmm_status qmm_pipeline_uniform_rows(int64_t m_total, int64_t chunk_rows, int64_t *rows,
                                     size_t count)
{
    if (!rows) return qmm_fail(QMM_ERR_NULL, "pipeline: rows is NULL");
    int n;
    qmm_status st = qmm_pipeline_chunk_count(m_total, chunk_rows, &n);
    if (st != QMM_OK) return st;
    if (count < (size_t)n)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "pipeline: rows has %zu entries, need %d", count, n);
    for (int i = 0; i < n; i++) rows[i] = chunk_rows;
    rows[n - 1] = m_total - (int64_t)(n - 1) * chunk_rows; /* the ragged last chunk */
    qmm_clear_error();
    return QMM_OK;
}

static void add_dep(qmm_pipeline_step *s, int engine, int chunk)
{
    s->dep[s->dep_count].engine = engine;
    s->dep[s->dep_count].chunk = chunk;
    s->dep_count++;
}

qmm_status qmm_pipeline_plan(const int64_t *rows, int chunks, int buffers,
                             qmm_pipeline_step *steps, size_t step_count)
{
    if (!rows || !steps) return qmm_fail(QMM_ERR_NULL, "pipeline plan: rows or steps is NULL");
    if (chunks < 1) return qmm_fail(QMM_ERR_ARG, "pipeline plan: chunks = %d, need >= 1", chunks);
    if (buffers < 1)
        return qmm_fail(QMM_ERR_ARG, "pipeline plan: buffers = %d, need >= 1", buffers);
    if (step_count / 3 < (size_t)chunks)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "pipeline plan: %zu steps, need 3*%d", step_count,
                        chunks);
    int64_t row0 = 0;
    for (int i = 0; i < chunks; i++) {
        if (rows[i] < 1)
            return qmm_fail(QMM_ERR_SHAPE, "pipeline plan: chunk %d has %lld rows, need >= 1", i,
                            (long long)rows[i]);
        if (row0 > INT64_MAX - rows[i])
            return qmm_fail(QMM_ERR_OVERFLOW, "pipeline plan: row count overflows at chunk %d", i);
        row0 += rows[i];
    }

    row0 = 0;
    for (int i = 0; i < chunks; i++) {
        for (int e = 0; e < QMM_MODEL_ENGINES; e++) {
            qmm_pipeline_step *s = &steps[3 * i + e];
            s->chunk = i;
            s->engine = e;
            s->slot = i % buffers;
            s->row0 = row0;
            s->rows = rows[i];
            s->dep_count = 0;
            /* dep[0]: the engine is in order (one stream per engine) */
            if (i > 0) add_dep(s, e, i - 1);
            if (e == QMM_ENGINE_LOAD) {
                /* the slot's A buffer is read by compute i-b: wait until it is done */
                if (i >= buffers) add_dep(s, QMM_ENGINE_COMPUTE, i - buffers);
            } else if (e == QMM_ENGINE_COMPUTE) {
                add_dep(s, QMM_ENGINE_LOAD, i);
                /* the slot's C buffer is read by store i-b: the model leaves this out (its
                 * store frees nothing); a real slot must not be overwritten while downloading */
                if (i >= buffers) add_dep(s, QMM_ENGINE_STORE, i - buffers);
            } else {
                add_dep(s, QMM_ENGINE_COMPUTE, i);
            }
        }
        row0 += rows[i];
    }
    qmm_clear_error();
    return QMM_OK;
}

qmm_status qmm_pipeline_simulate(const qmm_pipeline_step *steps, int chunks, const double *times,
                                 size_t time_count, qmm_model_segment *seg, size_t seg_count,
                                 double *total)
{
    if (!steps || !times) return qmm_fail(QMM_ERR_NULL, "pipeline simulate: steps or times is NULL");
    if (chunks < 1)
        return qmm_fail(QMM_ERR_ARG, "pipeline simulate: chunks = %d, need >= 1", chunks);
    size_t need = (size_t)3 * (size_t)chunks;
    if (time_count < need)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "pipeline simulate: %zu times, need %zu",
                        time_count, need);
    if (seg && seg_count < need)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "pipeline simulate: %zu segments, need %zu",
                        seg_count, need);
    for (size_t j = 0; j < need; j++)
        if (!isfinite(times[j]) || times[j] < 0)
            return qmm_fail(QMM_ERR_RANGE, "pipeline simulate: time %zu is %g, need >= 0", j,
                            times[j]);

    /* ends[e * chunks + i], NAN until that step has run: a dependency on a later step is an
     * invalid plan, not something to wait for. starts[] beside it: seg is written only once the
     * whole plan has proved valid (nothing is written on error). */
    double *ends = malloc(2 * need * sizeof *ends), *starts = ends + need;
    if (!ends) return qmm_fail(QMM_ERR_NOMEM, "pipeline simulate: %zu ends", need);
    for (size_t j = 0; j < need; j++) ends[j] = NAN;

    double last = 0;
    for (size_t j = 0; j < need; j++) {
        const qmm_pipeline_step *s = &steps[j];
        if (s->chunk < 0 || s->chunk >= chunks || s->engine < 0 || s->engine >= QMM_MODEL_ENGINES ||
            s->dep_count < 0 || s->dep_count > QMM_PIPELINE_MAX_DEPS) {
            free(ends);
            return qmm_fail(QMM_ERR_ARG, "pipeline simulate: step %zu is malformed", j);
        }
        size_t me = (size_t)s->engine * (size_t)chunks + (size_t)s->chunk;
        if (!isnan(ends[me])) {
            free(ends);
            return qmm_fail(QMM_ERR_ARG, "pipeline simulate: step %zu (%s %d) appears twice", j,
                            qmm_model_engine_name(s->engine), s->chunk);
        }
        double start = 0;
        for (int d = 0; d < s->dep_count; d++) {
            const qmm_pipeline_dep *dp = &s->dep[d];
            double end = NAN;
            if (dp->chunk >= 0 && dp->chunk < chunks && dp->engine >= 0 &&
                dp->engine < QMM_MODEL_ENGINES)
                end = ends[(size_t)dp->engine * (size_t)chunks + (size_t)dp->chunk];
            if (isnan(end)) {
                free(ends);
                return qmm_fail(QMM_ERR_ARG,
                                "pipeline simulate: step %zu (%s %d) waits for %s %d, which has "
                                "not run before it",
                                j, qmm_model_engine_name(s->engine), s->chunk,
                                qmm_model_engine_name(dp->engine), dp->chunk);
            }
            if (end > start) start = end;
        }
        double end = start + times[me];
        ends[me] = end;
        starts[me] = start;
        if (end > last) last = end;
    }
    if (seg)
        for (size_t j = 0; j < need; j++) seg[j] = (qmm_model_segment){starts[j], ends[j]};
    free(ends);
    if (total) *total = last;
    qmm_clear_error();
    return QMM_OK;
}

#ifndef QMM_HAVE_CUDA
/* ---- builds without CUDA: the device pipeline is unavailable ---- */

#define NO_CUDA                                                                                \
    qmm_fail(QMM_ERR_UNSUPPORTED, "the chunked pipeline needs the CUDA backend; this build has " \
                                  "none (nvcc was not found or QMM_CUDA=OFF)")

qmm_status qmm_pipeline_create(qmm_cuda_ctx *ctx, const qmm_cuda_weight *w, int64_t chunk_rows,
                               int buffers, const qmm_cuda_options *opt, qmm_pipeline **out)
{
    (void)ctx, (void)w, (void)chunk_rows, (void)buffers, (void)opt;
    if (out) *out = NULL;
    return NO_CUDA;
}

void qmm_pipeline_destroy(qmm_pipeline *p) { (void)p; }

size_t qmm_pipeline_device_bytes(const qmm_pipeline *p)
{
    (void)p;
    return 0;
}

qmm_status qmm_pipeline_run(qmm_pipeline *p, const qmm_bf16 *a_host, int64_t m_total,
                            qmm_bf16 *c_host, void *const *events, size_t event_count)
{
    (void)p, (void)a_host, (void)m_total, (void)c_host, (void)events, (void)event_count;
    return NO_CUDA;
}

qmm_status qmm_pipeline_run_rows(qmm_pipeline *p, const qmm_bf16 *a_host, const int64_t *rows,
                                 int chunks, qmm_bf16 *c_host, void *const *events,
                                 size_t event_count)
{
    (void)p, (void)a_host, (void)rows, (void)chunks, (void)c_host, (void)events,
        (void)event_count;
    return NO_CUDA;
}

qmm_status qmm_pipeline_timeline(void *const *events, int chunks, qmm_model_segment *seg,
                                 size_t seg_count)
{
    (void)events, (void)chunks, (void)seg, (void)seg_count;
    return NO_CUDA;
}
#endif
