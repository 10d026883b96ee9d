/*
 * qmm chunked host<->device pipeline (included by qmm.h after qmm_cuda.h; do not include directly).
 *
 * C[M_total, N] = A[M_total, K] · W[N, K]ᵀ where A and C live in pinned host memory and W on the
 * device. The rows are cut into chunks of at most m rows; b device slots (each an A buffer
 * [m, K] and a C buffer [m, N]) are reused round-robin, chunk i in slot i % b. Three engines on
 * three CUDA streams, the engines of the performance model (qmm_perf.h):
 *   load    (copy stream, H2D)  upload chunk i into slot i % b
 *   compute (compute stream)    qmm_cuda_matmul of chunk i
 *   store   (copy stream, D2H)  download chunk i's result to the host
 * Dependencies (each engine is in order, so "i-1 of the same engine" is its stream's order):
 *   load i    after load i-1,    compute i-b  (slot's A buffer free)
 *   compute i after compute i-1, load i,      store i-b  (slot's C buffer free)
 *   store i   after store i-1,   compute i
 * The model's rules are the same except for "compute i after store i-b": the model's store
 * engine frees nothing because it assumes unlimited output space; a real slot has one C buffer,
 * so we must not overwrite it before its previous download finished. qmm_pipeline_simulate runs
 * these exact rules; qmm_model_schedule_run runs the model's.
 *
 * The schedule is data (qmm_pipeline_plan): the CUDA code issues exactly the plan's steps and
 * dependencies, and the CPU tests check the plan's properties without a GPU.
 */
#ifndef QMM_PIPELINE_H
#define QMM_PIPELINE_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the schedule as data (pure host code, every build) -------------------------------------- */

#define QMM_PIPELINE_MAX_DEPS 3

/* "The segment of `engine` on `chunk` must have ended." */
typedef struct qmm_pipeline_dep {
    int engine; /* qmm_model_engine */
    int chunk;
} qmm_pipeline_dep;

/* One engine's work on one chunk. A plan lists 3 steps per chunk in issue order (chunk 0 load,
 * compute, store; chunk 1 ...): every dependency refers to an earlier step of the list. */
typedef struct qmm_pipeline_step {
    int chunk;
    int engine;           /* QMM_ENGINE_LOAD (H2D), QMM_ENGINE_COMPUTE, QMM_ENGINE_STORE (D2H) */
    int slot;             /* device buffer slot: chunk % buffers */
    int64_t row0, rows;   /* rows [row0, row0 + rows) of A and C */
    int dep_count;        /* 0..3; dep[0] is the same engine's previous chunk when chunk > 0 */
    qmm_pipeline_dep dep[QMM_PIPELINE_MAX_DEPS];
} qmm_pipeline_step;

/* Chunks of at most chunk_rows rows covering m_total rows: ceil(m_total / chunk_rows).
 * m_total, chunk_rows >= 1; the count must fit an int. */
qmm_status qmm_pipeline_chunk_count(int64_t m_total, int64_t chunk_rows, int *chunks);

/* rows[chunks] = chunk_rows each, the last one ragged (m_total - (chunks-1)*chunk_rows);
 * count >= the chunk count. */
qmm_status qmm_pipeline_uniform_rows(int64_t m_total, int64_t chunk_rows, int64_t *rows,
                                     size_t count);

/* The schedule of chunks of rows[chunks] rows (each >= 1) through `buffers` slots (>= 1):
 * steps[3 * chunks] in issue order, dependencies as in the comment at the top of this file.
 * step_count >= 3 * chunks. */
qmm_status qmm_pipeline_plan(const int64_t *rows, int chunks, int buffers,
                             qmm_pipeline_step *steps, size_t step_count);

/* Run a plan's dependencies event by event with durations times[3, chunks] (engine-major:
 * times[e * chunks + i], >= 0, finite): each step starts when all its dependencies have ended.
 * seg[3, chunks] (engine-major, as qmm_model_schedule_run writes it; may be NULL with
 * seg_count 0) receives the segments, *total (may be NULL) the end of the last segment.
 * With dependencies that never bind (e.g. b >= 2 and compute the slowest engine) it equals
 * qmm_model_schedule_run on the same times. */
qmm_status qmm_pipeline_simulate(const qmm_pipeline_step *steps, int chunks, const double *times,
                                 size_t time_count, qmm_model_segment *seg, size_t seg_count,
                                 double *total);

/* ---- the CUDA pipeline (QMM_ERR_UNSUPPORTED in builds without CUDA) ------------------------ */

typedef struct qmm_pipeline qmm_pipeline;

/* A pipeline for weight w (owned by the caller; it must outlive the pipeline) on ctx's device:
 * chunks of up to chunk_rows rows, `buffers` slots. Allocates once: the slots' device buffers
 * (buffers * chunk_rows * (K + N) bf16), the workspace the options need for any chunk of
 * 1..chunk_rows rows, three non-blocking streams and the dependency events. It runs its
 * matmuls on a context of its own bound to the compute stream, so the caller's ctx (whose stream
 * is shared state without a getter) is never changed. opt may be NULL (defaults); for results
 * bitwise equal to one unchunked call use path QMM_PATH_TILED (see pipeline.cu). One run at a
 * time per pipeline (it is not thread-safe); pipelines of one weight may run concurrently. */
qmm_status qmm_pipeline_create(qmm_cuda_ctx *ctx, const qmm_cuda_weight *w, int64_t chunk_rows,
                               int buffers, const qmm_cuda_options *opt, qmm_pipeline **out);
void qmm_pipeline_destroy(qmm_pipeline *p);

/* Device bytes the pipeline holds (slots + workspace); 0 for NULL. */
size_t qmm_pipeline_device_bytes(const qmm_pipeline *p);

/* c_host[m_total, N] = a_host[m_total, K] · Wᵀ, both in pinned host memory (cudaMallocHost or
 * cudaHostRegister; pageable or device memory -> QMM_ERR_ARG), in chunks of the pipeline's
 * chunk_rows, the last one ragged. Synchronous: returns when c_host holds the result.
 * events: NULL (event_count 0) or at least 6 * chunks cudaEvent_t handles created by the caller
 * with timing enabled; the run records the start and end of every segment into
 * events[(e * chunks + i) * 2 + 0 / 1] (engine e, chunk i). qmm_pipeline_timeline reads them. */
qmm_status qmm_pipeline_run(qmm_pipeline *p, const qmm_bf16 *a_host, int64_t m_total,
                            qmm_bf16 *c_host, void *const *events, size_t event_count);

/* The same with chunk i of rows[i] rows (1..chunk_rows), consecutive from row 0:
 * a_host is [Σ rows, K], c_host [Σ rows, N]. For experiments with uneven chunks. */
qmm_status qmm_pipeline_run_rows(qmm_pipeline *p, const qmm_bf16 *a_host, const int64_t *rows,
                                 int chunks, qmm_bf16 *c_host, void *const *events,
                                 size_t event_count);

/* Segments of a finished run from its events (layout as in qmm_pipeline_run): seg[3, chunks]
 * engine-major in µs since the start of chunk 0's load. seg_count >= 3 * chunks. */
qmm_status qmm_pipeline_timeline(void *const *events, int chunks, qmm_model_segment *seg,
                                 size_t seg_count);

#ifdef __cplusplus
}
#endif

#endif /* QMM_PIPELINE_H */
