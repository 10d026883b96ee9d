/*
 * The chunked host<->device pipeline (include/qmm_pipeline.h): A in pinned host memory is
 * uploaded chunk by chunk on one stream, multiplied on a second, downloaded on a third, with
 * events carrying exactly the dependencies of the plan (src/pipeline_plan.c).
 *
 * Why chunking does not change the bits (path TILED): the unsplit tiled kernel computes every
 * output element C[r][n] from row r of A and row n of W alone, accumulating over K in the same
 * order whatever the tile configuration, stage count or position of the row inside its tile
 * (kernels.h; gpu_kernels checks it), and rows past M inside a tile are zero-filled and never
 * stored. So computing rows [r0, r0 + m) as their own call gives the same bits as computing them
 * inside one call over all rows. Split-K (chosen by AUTO for small chunks) sums partial planes
 * of a per-call split, and the matvec path has its own order: both stay within tolerance but
 * not bit for bit.
 *
 * Events: one "done" event per (engine, slot). A wait on (engine e, chunk j) uses the event of
 * slot j % b; it is correct because steps are issued in plan order and the last record of that
 * event before the wait is chunk j's (the chunks between j and the waiting step use other slots
 * or have not issued engine e yet; test_pipeline checks this property of the plan).
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda/cuda_try.h"
#include "internal.h"

#define PIPE_MAX_BUFFERS 64
#define PIPE_MAX_ROWS ((int64_t)1 << 30)

struct qmm_pipeline {
    int device;
    qmm_cuda_ctx *ctx;          /* ours, bound to stream[QMM_ENGINE_COMPUTE] */
    const qmm_cuda_weight *w;   /* the caller's */
    int64_t n, k, chunk_rows;
    int buffers;
    qmm_cuda_options opt;
    cudaStream_t stream[QMM_MODEL_ENGINES];
    cudaEvent_t done[QMM_MODEL_ENGINES][PIPE_MAX_BUFFERS]; /* [engine][slot] */
    qmm_bf16 *a_slot[PIPE_MAX_BUFFERS]; /* [chunk_rows, K] each */
    qmm_bf16 *c_slot[PIPE_MAX_BUFFERS]; /* [chunk_rows, N] each */
    void *ws;
    size_t ws_bytes;
    size_t device_bytes;
};

/* Release whatever a (possibly half-built) pipeline holds. */
static void pipeline_free(qmm_pipeline *p)
{
    if (!p) return;
    cudaSetDevice(p->device);
    for (int e = 0; e < QMM_MODEL_ENGINES; e++)
        if (p->stream[e]) cudaStreamSynchronize(p->stream[e]);
    qmm_cuda_destroy(p->ctx);
    for (int s = 0; s < p->buffers; s++) {
        cudaFree(p->a_slot[s]);
        cudaFree(p->c_slot[s]);
        for (int e = 0; e < QMM_MODEL_ENGINES; e++)
            if (p->done[e][s]) cudaEventDestroy(p->done[e][s]);
    }
    cudaFree(p->ws);
    for (int e = 0; e < QMM_MODEL_ENGINES; e++)
        if (p->stream[e]) cudaStreamDestroy(p->stream[e]);
    cudaGetLastError(); /* teardown errors are not the caller's next call's business */
    free(p);
}

/* Streams, events, our context, workspace and slots of a zeroed p with its sizes set. */
static qmm_status pipeline_build(qmm_pipeline *p)
{
    QMM_CUDA_TRY(cudaSetDevice(p->device));
    /* non-blocking: the legacy default stream (weight uploads, cudaMemcpy) must not serialise
     * with the pipeline's streams */
    for (int e = 0; e < QMM_MODEL_ENGINES; e++)
        QMM_CUDA_TRY(cudaStreamCreateWithFlags(&p->stream[e], cudaStreamNonBlocking));
    for (int s = 0; s < p->buffers; s++)
        for (int e = 0; e < QMM_MODEL_ENGINES; e++)
            QMM_CUDA_TRY(cudaEventCreateWithFlags(&p->done[e][s], cudaEventDisableTiming));
    qmm_status st = qmm_cuda_create(p->device, p->stream[QMM_ENGINE_COMPUTE], &p->ctx);
    if (st != QMM_OK) return st;

    /* the slots first: a chunk size too large for the GPU fails here, before the loop below
     * (whose cost grows with the chunk rows: about 40 ns a row) */
    size_t a_bytes, c_bytes;
    const size_t slot_limit = SIZE_MAX / 2 / PIPE_MAX_BUFFERS; /* a + c of all slots + ws fit */
    if (!qmm_mul_size((size_t)p->chunk_rows, (size_t)p->k * 2, &a_bytes) ||
        !qmm_mul_size((size_t)p->chunk_rows, (size_t)p->n * 2, &c_bytes) ||
        c_bytes > slot_limit || a_bytes > slot_limit - c_bytes)
        return qmm_fail(QMM_ERR_OVERFLOW, "pipeline: slot bytes overflow (%lld rows, K = %lld, "
                                          "N = %lld)",
                        (long long)p->chunk_rows, (long long)p->k, (long long)p->n);
    for (int s = 0; s < p->buffers; s++) {
        QMM_CUDA_TRY(cudaMalloc((void **)&p->a_slot[s], a_bytes));
        QMM_CUDA_TRY(cudaMalloc((void **)&p->c_slot[s], c_bytes));
    }

    /* the workspace of the largest need over every chunk size a run can use (1..chunk_rows):
     * with AUTO a small ragged chunk may split K where a full one does not. This also rejects
     * options no chunk size can run (e.g. MATVEC with more than its rows). */
    size_t ws = 0;
    for (int64_t r = 1; r <= p->chunk_rows; r++) {
        size_t b = 0;
        st = qmm_cuda_workspace_size(p->ctx, r, p->n, p->k, &p->opt, &b);
        if (st != QMM_OK) return st;
        if (b > ws) ws = b;
    }
    if (ws > SIZE_MAX / 2)
        return qmm_fail(QMM_ERR_OVERFLOW, "pipeline: workspace of %zu bytes", ws);
    if (ws > 0) QMM_CUDA_TRY(cudaMalloc(&p->ws, ws));
    p->ws_bytes = ws;
    p->device_bytes = ws + (size_t)p->buffers * (a_bytes + c_bytes);
    return QMM_OK;
}

extern "C" qmm_status qmm_pipeline_create(qmm_cuda_ctx *ctx, const qmm_cuda_weight *w,
                                          int64_t chunk_rows, int buffers,
                                          const qmm_cuda_options *opt, qmm_pipeline **out)
{
    if (!out) return qmm_fail(QMM_ERR_NULL, "pipeline create: out is NULL");
    *out = NULL;
    if (!ctx || !w) return qmm_fail(QMM_ERR_NULL, "pipeline create: ctx or w is NULL");
    if (chunk_rows < 1 || chunk_rows > PIPE_MAX_ROWS)
        return qmm_fail(QMM_ERR_SHAPE, "pipeline create: chunk rows = %lld, need 1..2^30",
                        (long long)chunk_rows);
    if (buffers < 1 || buffers > PIPE_MAX_BUFFERS)
        return qmm_fail(QMM_ERR_ARG, "pipeline create: buffers = %d, need 1..%d", buffers,
                        PIPE_MAX_BUFFERS);
    qmm_gpu_info info;
    qmm_status st = qmm_cuda_info(ctx, &info);
    if (st != QMM_OK) return st;

    qmm_pipeline *p = (qmm_pipeline *)calloc(1, sizeof *p);
    if (!p) return qmm_fail(QMM_ERR_NOMEM, "pipeline create: out of host memory");
    p->device = info.device;
    p->w = w;
    p->n = qmm_cuda_weight_n(w);
    p->k = qmm_cuda_weight_k(w);
    p->chunk_rows = chunk_rows;
    p->buffers = buffers;
    p->opt = opt ? *opt : qmm_cuda_options_default();
    if (p->opt.group == 0) p->opt.group = qmm_cuda_weight_group(w); /* the exact workspace */
    st = pipeline_build(p);
    if (st != QMM_OK) {
        /* keep the build's message: teardown may overwrite qmm_last_error via qmm_cuda_destroy */
        char why[512];
        strncpy(why, qmm_last_error(), sizeof why - 1);
        why[sizeof why - 1] = 0;
        pipeline_free(p);
        return qmm_fail(st, "%s", why);
    }
    *out = p;
    qmm_clear_error();
    return QMM_OK;
}

extern "C" void qmm_pipeline_destroy(qmm_pipeline *p) { pipeline_free(p); }

extern "C" size_t qmm_pipeline_device_bytes(const qmm_pipeline *p)
{
    return p ? p->device_bytes : 0;
}

/* QMM_OK when [ptr, ptr + bytes) starts and ends in page-locked host memory. Pageable memory
 * would still give the right result, but each copy would be staged and synchronous, so there
 * would be nothing to overlap: refuse it rather than measure a different pipeline. */
static qmm_status check_pinned(const void *ptr, size_t bytes, const char *name)
{
    const char *ends[2] = {"start", "end"};
    const void *at[2] = {ptr, (const char *)ptr + bytes - 1};
    for (int j = 0; j < 2; j++) {
        cudaPointerAttributes a;
        cudaError_t e = cudaPointerGetAttributes(&a, at[j]);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return qmm_fail(QMM_ERR_ARG, "%s: cannot query its memory type (%s)", name,
                            cudaGetErrorString(e));
        }
        if (a.type != cudaMemoryTypeHost)
            return qmm_fail(QMM_ERR_ARG,
                            "%s (%s) is %s memory; the pipeline needs pinned host memory "
                            "(cudaMallocHost or cudaHostRegister)",
                            name, ends[j],
                            a.type == cudaMemoryTypeDevice    ? "device"
                            : a.type == cudaMemoryTypeManaged ? "managed"
                                                              : "pageable");
    }
    return QMM_OK;
}

/* Issue every step of the plan. Same-engine order is the stream's; other dependencies are
 * event waits. */
static qmm_status enqueue(qmm_pipeline *p, const qmm_pipeline_step *steps, int chunks,
                          const qmm_bf16 *a_host, qmm_bf16 *c_host, void *const *events)
{
    const int b = p->buffers;
    for (size_t j = 0; j < (size_t)3 * (size_t)chunks; j++) {
        const qmm_pipeline_step *s = &steps[j];
        cudaStream_t st = p->stream[s->engine];
        for (int d = 0; d < s->dep_count; d++)
            if (s->dep[d].engine != s->engine)
                QMM_CUDA_TRY(cudaStreamWaitEvent(st, p->done[s->dep[d].engine][s->dep[d].chunk % b], 0));
        size_t at = ((size_t)s->engine * (size_t)chunks + (size_t)s->chunk) * 2;
        if (events) QMM_CUDA_TRY(cudaEventRecord((cudaEvent_t)events[at], st));
        if (s->engine == QMM_ENGINE_LOAD) {
            QMM_CUDA_TRY(cudaMemcpyAsync(p->a_slot[s->slot], a_host + s->row0 * p->k,
                                     (size_t)s->rows * (size_t)p->k * 2, cudaMemcpyHostToDevice, st));
        } else if (s->engine == QMM_ENGINE_COMPUTE) {
            /* our context's stream is the compute stream (set at creation, never changed) */
            qmm_status q = qmm_cuda_matmul(p->ctx, p->a_slot[s->slot], s->rows, p->w,
                                           p->c_slot[s->slot], p->ws, p->ws_bytes, &p->opt, NULL);
            if (q != QMM_OK) return q;
        } else {
            QMM_CUDA_TRY(cudaMemcpyAsync(c_host + s->row0 * p->n, p->c_slot[s->slot],
                                     (size_t)s->rows * (size_t)p->n * 2, cudaMemcpyDeviceToHost, st));
        }
        if (events) QMM_CUDA_TRY(cudaEventRecord((cudaEvent_t)events[at + 1], st));
        QMM_CUDA_TRY(cudaEventRecord(p->done[s->engine][s->slot], st));
    }
    return QMM_OK;
}

extern "C" qmm_status qmm_pipeline_run_rows(qmm_pipeline *p, const qmm_bf16 *a_host,
                                            const int64_t *rows, int chunks, qmm_bf16 *c_host,
                                            void *const *events, size_t event_count)
{
    if (!p || !a_host || !rows || !c_host)
        return qmm_fail(QMM_ERR_NULL, "pipeline run: p, a_host, rows or c_host is NULL");
    if (chunks < 1) return qmm_fail(QMM_ERR_ARG, "pipeline run: chunks = %d, need >= 1", chunks);
    int64_t m_total = 0;
    for (int i = 0; i < chunks; i++) {
        if (rows[i] < 1 || rows[i] > p->chunk_rows)
            return qmm_fail(QMM_ERR_SHAPE, "pipeline run: chunk %d has %lld rows, need 1..%lld", i,
                            (long long)rows[i], (long long)p->chunk_rows);
        m_total += rows[i];
        if (m_total > PIPE_MAX_ROWS)
            return qmm_fail(QMM_ERR_SHAPE, "pipeline run: more than 2^30 rows in all");
    }
    if (events) {
        if (event_count / 6 < (size_t)chunks)
            return qmm_fail(QMM_ERR_SIZE_MISMATCH, "pipeline run: %zu events, need 6*%d",
                            event_count, chunks);
        for (size_t j = 0; j < (size_t)6 * (size_t)chunks; j++)
            if (!events[j]) return qmm_fail(QMM_ERR_NULL, "pipeline run: event %zu is NULL", j);
    } else if (event_count) {
        return qmm_fail(QMM_ERR_NULL, "pipeline run: events is NULL but event_count = %zu",
                        event_count);
    }
    QMM_CUDA_TRY(cudaSetDevice(p->device));
    qmm_status st = check_pinned(a_host, (size_t)m_total * (size_t)p->k * 2, "a_host");
    if (st == QMM_OK) st = check_pinned(c_host, (size_t)m_total * (size_t)p->n * 2, "c_host");
    if (st != QMM_OK) return st;

    size_t count = (size_t)3 * (size_t)chunks;
    qmm_pipeline_step *steps = (qmm_pipeline_step *)malloc(count * sizeof *steps);
    if (!steps) return qmm_fail(QMM_ERR_NOMEM, "pipeline run: %d chunks of plan", chunks);
    st = qmm_pipeline_plan(rows, chunks, p->buffers, steps, count);
    if (st == QMM_OK) st = enqueue(p, steps, chunks, a_host, c_host, events);
    free(steps);

    /* wait for everything issued, also after a failed issue, so no slot is in use on return */
    char why[512] = "";
    if (st != QMM_OK) {
        strncpy(why, qmm_last_error(), sizeof why - 1);
        why[sizeof why - 1] = 0;
    }
    for (int e = 0; e < QMM_MODEL_ENGINES; e++) {
        cudaError_t err = cudaStreamSynchronize(p->stream[e]);
        if (err != cudaSuccess && st == QMM_OK)
            return qmm_fail(QMM_ERR_CUDA, "pipeline run: cudaStreamSynchronize(%s) at %s:%d: %s",
                            qmm_model_engine_name(e), __FILE__, __LINE__, cudaGetErrorString(err));
    }
    if (st != QMM_OK) return qmm_fail(st, "%s", why);
    qmm_clear_error();
    return QMM_OK;
}

extern "C" qmm_status qmm_pipeline_run(qmm_pipeline *p, const qmm_bf16 *a_host, int64_t m_total,
                                       qmm_bf16 *c_host, void *const *events, size_t event_count)
{
    if (!p) return qmm_fail(QMM_ERR_NULL, "pipeline run: p is NULL");
    if (m_total > PIPE_MAX_ROWS)
        return qmm_fail(QMM_ERR_SHAPE, "pipeline run: M_total = %lld exceeds 2^30",
                        (long long)m_total);
    int chunks;
    qmm_status st = qmm_pipeline_chunk_count(m_total, p->chunk_rows, &chunks);
    if (st != QMM_OK) return st;
    int64_t *rows = (int64_t *)malloc((size_t)chunks * sizeof *rows);
    if (!rows) return qmm_fail(QMM_ERR_NOMEM, "pipeline run: %d chunk sizes", chunks);
    st = qmm_pipeline_uniform_rows(m_total, p->chunk_rows, rows, (size_t)chunks);
    if (st == QMM_OK) st = qmm_pipeline_run_rows(p, a_host, rows, chunks, c_host, events, event_count);
    free(rows);
    return st;
}

extern "C" qmm_status qmm_pipeline_timeline(void *const *events, int chunks,
                                            qmm_model_segment *seg, size_t seg_count)
{
    if (!events || !seg) return qmm_fail(QMM_ERR_NULL, "pipeline timeline: events or seg is NULL");
    if (chunks < 1)
        return qmm_fail(QMM_ERR_ARG, "pipeline timeline: chunks = %d, need >= 1", chunks);
    size_t n = (size_t)chunks;
    if (seg_count / 3 < n)
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "pipeline timeline: %zu segments, need 3*%d",
                        seg_count, chunks);
    for (size_t j = 0; j < 6 * n; j++)
        if (!events[j]) return qmm_fail(QMM_ERR_NULL, "pipeline timeline: event %zu is NULL", j);
    cudaEvent_t origin = (cudaEvent_t)events[(QMM_ENGINE_LOAD * n + 0) * 2];
    for (size_t e = 0; e < QMM_MODEL_ENGINES; e++)
        for (size_t i = 0; i < n; i++) {
            float ms0 = 0, ms1 = 0;
            QMM_CUDA_TRY(cudaEventElapsedTime(&ms0, origin, (cudaEvent_t)events[(e * n + i) * 2]));
            QMM_CUDA_TRY(cudaEventElapsedTime(&ms1, origin, (cudaEvent_t)events[(e * n + i) * 2 + 1]));
            seg[e * n + i].start = 1000.0 * ms0;
            seg[e * n + i].end = 1000.0 * ms1;
        }
    qmm_clear_error();
    return QMM_OK;
}
