/*
 * qmm performance model (included by qmm.h after the core declarations; do not include directly).
 *
 * Two models from the overlap / split-K document (DESIGN.md §6), kept exact, and our refinement
 * beside them (never replacing them):
 *   - pipeline schedule: three in-order engines (copy in, compute, copy out), n tiles, b buffers,
 *     simulated event by event, with the document's closed form beside the simulation;
 *   - split-K waves: the document model (compute by waves + an fp32 partial-sum term) and the
 *     refined model (operand-read floor, bf16/fp32 partials, occupancy, launch overhead, an
 *     achievable fraction of peak) plus a Stream-K estimate.
 * Everything here is pure arithmetic on the host: no device, no printing, no global state.
 * Units: times in microseconds (µs) unless a name says otherwise, sizes in bytes.
 */
#ifndef QMM_PERF_H
#define QMM_PERF_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- pipeline schedule -------------------------------------------------------------------- */

/* The three engines, in pipeline order (index into the per-engine arrays below). */
typedef enum qmm_model_engine {
    QMM_ENGINE_LOAD = 0,    /* copy in: tile i into a free buffer */
    QMM_ENGINE_COMPUTE = 1, /* compute on tile i; frees its buffer when done */
    QMM_ENGINE_STORE = 2    /* copy out the result of tile i */
} qmm_model_engine;
#define QMM_MODEL_ENGINES 3

/* Engine name ("load", "compute", "store"); "?" when out of range. */
const char *qmm_model_engine_name(int e);

/* A pipeline to simulate. Durations are in any one unit (the output uses the same unit). */
typedef struct qmm_model_pipeline {
    int tiles;                                   /* n >= 1 */
    int buffers;                                 /* b >= 1: tiles that may be resident at once */
    double time[QMM_MODEL_ENGINES];              /* per-tile duration of each engine, >= 0, finite;
                                                    used for engine e when per_tile[e] is NULL */
    const double *per_tile[QMM_MODEL_ENGINES];   /* optional [n] durations of engine e (>= 0,
                                                    finite); overrides time[e] (jittered times) */
} qmm_model_pipeline;

/* When one engine worked on one tile. */
typedef struct qmm_model_segment {
    double start;
    double end;
} qmm_model_segment;

/* What a simulation measured. */
typedef struct qmm_model_schedule {
    double total;                        /* end of the last store (the makespan) */
    double busy[QMM_MODEL_ENGINES];      /* sum of the engine's durations */
    double idle[QMM_MODEL_ENGINES];      /* total - busy (includes fill and drain) */
    double stall[QMM_MODEL_ENGINES];     /* gaps between the engine's first start and last end:
                                            the waits the document draws hatched */
    double closed_form;                  /* the document's estimate with the engine means
                                            l, c, s: b = 1: n(l + c) + s;
                                            b >= 2: l + n*max(l, c, s) + s */
    int closed_form_exact;               /* 1 when closed_form equals total (to 1e-9 relative);
                                            0 e.g. in the copy-bound case, where the document's
                                            formula overestimates */
} qmm_model_schedule;

/* Simulate the schedule event by event. Rules (tile i, buffers b):
 *   load i    starts at max(end load i-1, end compute i-b when i >= b)
 *   compute i starts at max(end load i,   end compute i-1)
 *   store i   starts at max(end compute i, end store i-1)
 * seg is [3, n] engine-major (seg[e*n + i]) or NULL with seg_count 0; when given, seg_count must
 * be >= 3n. out receives the totals. Fails with QMM_ERR_NOMEM only when seg is NULL and the
 * n-entry scratch array cannot be allocated. */
qmm_status qmm_model_schedule_run(const qmm_model_pipeline *p, qmm_model_segment *seg,
                                  size_t seg_count, qmm_model_schedule *out);

/* Seeded jittered durations: times[e*n + i] = base[e] * (1 + jitter*u), u uniform in [-1, 1)
 * from a splitmix64 stream seeded with seed, drawn tile by tile (load, compute, store).
 * base[3] >= 0, 0 <= jitter < 1, times is [3, n] with count >= 3n. Same seed, same times. */
qmm_status qmm_model_jitter_times(const double base[QMM_MODEL_ENGINES], int tiles, double jitter,
                                  uint64_t seed, double *times, size_t count);

/* Render a schedule as a text Gantt chart: three rows (load, compute, store), each `cols`
 * characters; column c covers times [c*dt, (c+1)*dt) and shows the digit (tile % 10) of the
 * segment covering the column's midpoint, '.' when the engine is idle there. Rows end with '\n';
 * the text is NUL-terminated. seg is [3, n] as written by qmm_model_schedule_run.
 * buf needs 3*(cols + 1) + 1 bytes (QMM_ERR_WORKSPACE otherwise). dt > 0, cols >= 1. */
qmm_status qmm_model_gantt(const qmm_model_segment *seg, int tiles, double dt, int cols,
                           char *buf, size_t size);

/* ---- GPUs and kernels --------------------------------------------------------------------- */

/* qmm_gpu_caps (a GPU's rates, one struct for the planner and the models): qmm.h */

/* Presets: "a100" (A100 SXM4 40GB: 108 SMs, 312 TFLOP/s, 1.555 TB/s), "h100" (H100 SXM: 132,
 * 989.5, 3.35), "h200" (datasheet: 132, 989.5, 4.8), "h200-measured" (our measured ceilings:
 * 132, 720, 4.2). Unknown name -> QMM_ERR_NOT_FOUND. */
qmm_status qmm_model_gpu_preset(const char *name, qmm_gpu_caps *out);
/* Name of preset i (0-based), NULL past the end: for listing. */
const char *qmm_model_gpu_preset_name(int i);

/* What the refined model needs to know about a kernel. Tuning facts, not semantics. */
typedef struct qmm_model_kernel {
    int tile_m, tile_n;            /* output tile of one block, >= 1 */
    int tile_k;                    /* K consumed per main-loop iteration, >= 1: Stream-K's unit
                                      of work (128, one group, for the W4 kernels) */
    int blocks_per_sm;             /* resident blocks per SM (occupancy), >= 1; each resident block
                                      runs at 1/blocks_per_sm of the SM's rate */
    double compute_efficiency;     /* achievable fraction of peak_tflops, (0, 1]; fit to
                                      measurements */
    double a_bytes_per_elem;       /* activation element bytes (2: bf16), > 0 */
    double weight_bytes_per_elem;  /* 2 for bf16 W; 0.53125 for W4 g128 (4 bits + a bf16 scale
                                      and bias per 128), > 0 */
    double c_bytes_per_elem;       /* output element bytes (2: bf16), > 0 */
    qmm_dtype partial_type;        /* split-K partial planes / Stream-K partials: QMM_BF16 or
                                      QMM_F32 */
    double fixup_us;               /* Stream-K: serial cost per partial an owner waits for and
                                      adds (flag wait + add), >= 0, uncalibrated */
} qmm_model_kernel;

/* Presets: "document" (128x128 tile, tile_k 64, 1 block/SM, efficiency 1, bf16 A/W/C, fp32
 * partials, no fixup cost: with launch_us = 0 the refined model equals the document model
 * whenever compute exceeds the memory floor) and "w4" (our W4A16 tiled kernel as first guessed:
 * 64x64 tile, tile_k 128, 1 block/SM, efficiency 0.5, W4 at 0.53125 B/weight, bf16 partials,
 * fixup 0.5 µs; uncalibrated). Unknown name -> QMM_ERR_NOT_FOUND. */
qmm_status qmm_model_kernel_preset(const char *name, qmm_model_kernel *out);

/* ---- split-K and Stream-K estimates ----------------------------------------------------- */

/* One estimate, with its parts (µs). total_us = max(compute_us, memory_us) + launch_us +
 * reduction_us in the refined model; the document model has memory_us = launch_us = 0. */
typedef struct qmm_model_estimate {
    int split;              /* K partitions s (Stream-K: 1) */
    int64_t tiles;          /* output tiles ceil(M/tile_m) * ceil(N/tile_n) */
    int64_t blocks;         /* tiles * s (Stream-K: the persistent grid, min(sms * blocks_per_sm,
                               the MAC iterations)) */
    int64_t waves;          /* ceil(blocks / (sms * blocks_per_sm)) (document: blocks_per_sm 1) */
    double compute_us;      /* waves * one block's time (a partial wave costs a full one);
                               Stream-K: the largest share of MAC iterations */
    double memory_us;       /* operand floor: (A + W + C bytes) / bandwidth (0: document) */
    double reduction_us;    /* split-K (s > 1): partial planes written and read back, plus the
                               reduce kernel's launch; Stream-K: the fixup; 0 otherwise */
    double launch_us;       /* the main kernel's launch overhead (0: document) */
    double total_us;        /* the prediction */
    double operand_bytes;   /* A + W + C bytes of the floor (0: document) */
    double partial_bytes;   /* bytes of partials written and read back */
    int memory_bound;       /* 1 when memory_us > compute_us */
    int64_t split_tiles;    /* Stream-K: tiles whose iterations are shared by >= 2 workers */
    int64_t max_peers;      /* Stream-K: most partials one tile's owner waits for */
} qmm_model_estimate;

/* The document model, exact: tiles = ceil(M/bm)*ceil(N/bn), waves = ceil(tiles*s / SMs),
 * t = waves * 2*bm*bn*(K/s) / (peak/SMs) + (s > 1 ? 8*M*N*s / bandwidth : 0)
 * (K/s is real-valued; 8 bytes = an fp32 partial written and read back). Requires m, n, k,
 * bm, bn, s >= 1; the GPU's launch_us is ignored. */
qmm_status qmm_model_splitk_document(const qmm_gpu_caps *gpu, int64_t m, int64_t n, int64_t k,
                                     int bm, int bn, int s, qmm_model_estimate *out);
/* The same, returning total_us directly, or -1 on invalid arguments (qmm_last_error says why). */
double qmm_model_splitk_document_us(const qmm_gpu_caps *gpu, int64_t m, int64_t n, int64_t k,
                                    int bm, int bn, int s);

/* The refined split-K model for C[M, N] = A[M, K] · W[N, K]ᵀ with s partitions of K:
 *   blocks = tiles*s, waves = ceil(blocks / (SMs*blocks_per_sm)),
 *   compute = waves * blocks_per_sm * 2*tile_m*tile_n*(K/s) / (peak*efficiency/SMs),
 *   memory  = (M*K*a_bytes + N*K*w_bytes + M*N*c_bytes) / bandwidth,
 *   reduction = s > 1 ? 2*s*M*N*partial_bytes / bandwidth + launch : 0,
 *   total = max(compute, memory) + launch + reduction.
 * 1 <= s <= K (K/s real-valued; alignment is the caller's choice, see best_split). */
qmm_status qmm_model_splitk_refined(const qmm_gpu_caps *gpu, const qmm_model_kernel *kern,
                                    int64_t m, int64_t n, int64_t k, int s,
                                    qmm_model_estimate *out);

/* Stream-K estimate: a persistent grid of W = min(SMs*blocks_per_sm, T) workers shares the T =
 * tiles*ceil(K/tile_k) MAC iterations evenly across tile boundaries (worker w takes iterations
 * [floor(w*T/W), floor((w+1)*T/W))). compute = the largest share * one iteration's time; a tile
 * covered by p > 1 workers costs (p-1) partials of tile_m*tile_n*partial_bytes written and read
 * back (over the bandwidth, all tiles together) and the owner's serial fixup_us per partial
 * (the longest chain counts). total = max(compute, memory) + launch + fixup. */
qmm_status qmm_model_streamk(const qmm_gpu_caps *gpu, const qmm_model_kernel *kern, int64_t m,
                             int64_t n, int64_t k, qmm_model_estimate *out);

/* The Hopper wgmma kernel's time (qmm_wgmma_model, qmm.h; src/perf/wgmma.c) for its schedule:
 * tiles of tn tokens x 64*wg weight rows, `groups` 128-column k-blocks a tile, `ctas` CTAs of
 * which bps are resident a SM: split > 0 is split-K with `split` partitions a tile (ctas =
 * tiles*split; 1 = unsplit), split = 0 stream-K over ctas <= SMs*bps. slots: the resident CTAs
 * of a clustered launch (split 2..QMM_MAX_WGMMA_CLUSTER), <= 0 for SMs*bps. < 0 on bad input or
 * a model of all zeros. */
double qmm_model_wgmma_us(const qmm_wgmma_model *c, int sms, int64_t m, int64_t n, int64_t groups,
                          int tn, int wg, int bps, int64_t ctas, int split, int64_t slots);

/* The searches below try every split up to max_split: a bound keeps them short (a split beyond
 * this many partitions never fills a GPU better). max_split above it is QMM_ERR_ARG. */
#define QMM_MODEL_MAX_SPLIT 65536

/* The document model's best split over s = 1..max_split (any s), smallest s on ties. */
qmm_status qmm_model_best_split_document(const qmm_gpu_caps *gpu, int64_t m, int64_t n,
                                         int64_t k, int bm, int bn, int max_split,
                                         qmm_model_estimate *best);

/* The refined model's best split over s = 1..max_split with K % (s*align) == 0 (align = 128,
 * QMM_GROUP, for the W4 kernels: equal whole groups per partition; align = 0: any s <= K).
 * s = 1 is always a candidate (with align > 0 it needs K % align == 0). Smallest s on ties. */
qmm_status qmm_model_best_split(const qmm_gpu_caps *gpu, const qmm_model_kernel *kern,
                                int64_t m, int64_t n, int64_t k, int max_split, int align,
                                qmm_model_estimate *best);

#ifdef __cplusplus
}
#endif

#endif /* QMM_PERF_H */
