/*
 * qmm — W4A16 quantized matrix multiply for LLM inference.
 *
 * One public header. Names and math (see DESIGN.md):
 *   C[M, N] = A[M, K] · W[N, K]ᵀ      M tokens, K in_features (reduced), N out_features.
 * Weights: 4-bit codes in groups of g = 32, 64 or 128 along K, one bf16 scale and bias per
 * (row, group):
 *   w[n][j] = scales[n][j/g] * q + biases[n][j/g],  q = (packed[n][j/8] >> 4*(j%8)) & 0xF.
 * Scales may be negative. Byte-compatible with MLX mx.quantize(w, group_size=g, bits=4).
 *
 * Conventions: every function returns qmm_status; on error nothing is written to outputs and
 * qmm_last_error() holds a sentence saying what was wrong. The library never prints or aborts.
 */
#ifndef QMM_H
#define QMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ------------------------------------------------------------------------------ */

/* X-macro: enum value, short name, default message. The list only grows. */
#define QMM_STATUS_LIST(X)                                                                   \
    X(QMM_OK, "ok", "success")                                                               \
    X(QMM_ERR_NULL, "null", "a required pointer is NULL")                                    \
    X(QMM_ERR_SHAPE, "shape", "invalid shape (M, N, K >= 1, K a multiple of the group size)")   \
    X(QMM_ERR_OVERFLOW, "overflow", "shape too large: byte size overflows size_t")           \
    X(QMM_ERR_SIZE_MISMATCH, "size-mismatch", "buffer sizes do not match the shape")         \
    X(QMM_ERR_DTYPE, "dtype", "unknown or unsupported element type")                         \
    X(QMM_ERR_ARG, "arg", "invalid argument")                                                \
    X(QMM_ERR_ALIGN, "align", "pointer is not aligned as the kernel requires")               \
    X(QMM_ERR_WORKSPACE, "workspace", "workspace too small")                                 \
    X(QMM_ERR_NOMEM, "nomem", "out of memory")                                               \
    X(QMM_ERR_NO_DEVICE, "no-device", "no usable CUDA device")                               \
    X(QMM_ERR_CUDA, "cuda", "CUDA runtime error")                                            \
    X(QMM_ERR_UNSUPPORTED, "unsupported", "not supported by this build or path")             \
    X(QMM_ERR_IO, "io", "file I/O error")                                                    \
    X(QMM_ERR_FORMAT, "format", "malformed file or data")                                    \
    X(QMM_ERR_NOT_FOUND, "not-found", "item not found")                                      \
    X(QMM_ERR_RANGE, "range", "value out of range")                                         \
    X(QMM_ERR_COMM, "comm", "a tensor-parallel rank or collective failed or timed out")

typedef enum qmm_status {
#define QMM_X_ENUM(e, name, msg) e,
    QMM_STATUS_LIST(QMM_X_ENUM)
#undef QMM_X_ENUM
        QMM_STATUS_COUNT
} qmm_status;

/* Short name of a status ("shape"), never NULL. */
const char *qmm_status_name(qmm_status s);
/* Default one-line message of a status, never NULL. */
const char *qmm_status_string(qmm_status s);
/* Detail of the last failure in this thread ("K = 100 is not a multiple of 128"); "" if none. */
const char *qmm_last_error(void);

/* ---- element types ----------------------------------------------------------------------- */

typedef uint16_t qmm_bf16; /* bfloat16 bits */
typedef uint16_t qmm_f16;  /* IEEE binary16 bits */

typedef enum qmm_dtype { QMM_BF16 = 0, QMM_F16 = 1, QMM_F32 = 2 } qmm_dtype;

/* Bytes per element, 0 for an unknown dtype. */
size_t qmm_dtype_size(qmm_dtype t);
const char *qmm_dtype_name(qmm_dtype t);

/* Conversions: round to nearest even; NaN stays NaN (quiet), ±Inf stays ±Inf; overflow to Inf. */
float qmm_bf16_to_f32(qmm_bf16 x);
qmm_bf16 qmm_f32_to_bf16(float x);
float qmm_f16_to_f32(qmm_f16 x);
qmm_f16 qmm_f32_to_f16(float x);

/* ---- the W4 weight format ---------------------------------------------------------------- */

#define QMM_GROUP 128 /* default columns per quantization group (the CUDA kernels' group) */
#define QMM_BITS 4    /* the only bit width: any other is rejected */
/* 1 when g is a supported group size: 32, 64 or 128. */
#define QMM_GROUP_OK(g) ((g) == 32 || (g) == 64 || (g) == 128)

/* A view of one quantized weight matrix W[N, K] in host memory; the caller owns the buffers.
 * The counts are element counts of the buffers and must equal what the shape requires. */
typedef struct qmm_w4 {
    int64_t n;            /* out_features (rows of W), >= 1 */
    int64_t k;            /* in_features (reduced), multiple of group */
    uint32_t *packed;     /* [n, k/8]: 8 codes per word, column j at bits 4*(j%8) (LSB first) */
    qmm_bf16 *scales;     /* [n, k/group], any sign */
    qmm_bf16 *biases;     /* [n, k/group] */
    size_t packed_count;  /* words in packed: n*k/8 */
    size_t scales_count;  /* elements in scales: n*k/group */
    size_t biases_count;  /* elements in biases: n*k/group */
    int group;            /* columns per group: 32, 64 or 128 (0 is rejected, not a default) */
} qmm_w4;

/* Buffer sizes for a shape and group size, with overflow checks. Any output may be NULL. */
qmm_status qmm_w4_sizes_group(int64_t n, int64_t k, int group, size_t *packed_words,
                              size_t *group_count, size_t *total_bytes);
/* The same for groups of 128. */
qmm_status qmm_w4_sizes(int64_t n, int64_t k, size_t *packed_words, size_t *group_count,
                        size_t *total_bytes);
/* Allocate the three buffers of a weight (malloc); qmm_w4_free releases them. */
qmm_status qmm_w4_alloc_group(int64_t n, int64_t k, int group, qmm_w4 *w);
/* The same for groups of 128. */
qmm_status qmm_w4_alloc(int64_t n, int64_t k, qmm_w4 *w);
void qmm_w4_free(qmm_w4 *w);
/* Check pointers, group size, shape and counts of a descriptor. */
qmm_status qmm_w4_validate(const qmm_w4 *w);

/* What quantization achieved (over all n*k weights). */
typedef struct qmm_quant_error {
    double max_abs;    /* max |w - dequant(w)| */
    double rms;        /* sqrt(mean (w - dequant)^2) */
    double rel_frob;   /* ||w - dequant||_F / ||w||_F  (0 when w = 0) */
} qmm_quant_error;

/* src[N, K] row-major (dtype bf16, f16 or f32) -> w (shape and group from w; buffers
 * preallocated). Round-to-nearest affine per group: the edge of larger magnitude becomes the bias
 * (so the scale's sign follows the data, as in MLX), scale = ±(max-min)/15, both rounded to bf16,
 * codes = clamp(rint((x - bias) / scale), 0, 15) computed with the rounded scale and bias.
 * err may be NULL. Non-finite inputs are rejected (QMM_ERR_RANGE). */
qmm_status qmm_quantize(const void *src, qmm_dtype src_type, qmm_w4 *w, qmm_quant_error *err);

/* w -> dst[N, K] row-major in dst_type; dst_count is the element count of dst (must be n*k).
 * Every dtype is the f32 value fmaf(scale, q, bias) rounded once. That f32 value equals MLX's
 * mx.dequantize on f32 scales and biases bit for bit; mx.dequantize on bf16 scales computes in
 * bf16 (s*q rounded, then + bias rounded) and can differ from the bf16 output here by 1 ulp. */
qmm_status qmm_dequantize(const qmm_w4 *w, void *dst, qmm_dtype dst_type, size_t dst_count);

/* Dequantize one row n of W into f32 out[K]. */
qmm_status qmm_dequantize_row_f32(const qmm_w4 *w, int64_t n, float *out);

/* ---- CPU matmul --------------------------------------------------------------------------- */

/* Reference (the definition): a[M, K] bf16, c[M, N] bf16. For each (m, n): acc = Σ_j a*w in fp32
 * in column order j = 0..K-1, w = fmaf(scale, q, bias) in fp32; c = bf16(acc). Scalar, one thread. */
qmm_status qmm_matmul_ref(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, qmm_bf16 *c);

/* Fast CPU path: same function (fp32 accumulate, different order), all cores.
 * threads <= 0 means one per online CPU. When M*N is too small to give every thread rows,
 * the reduction is split across threads (split-K on the CPU) and summed in a fixed order. */
qmm_status qmm_matmul_cpu(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, qmm_bf16 *c,
                          int threads);

/* ---- planner ------------------------------------------------------------------------------- */

typedef enum qmm_path {
    QMM_PATH_AUTO = 0,  /* let the planner choose (only as a request) */
    QMM_PATH_MATVEC = 1,
    QMM_PATH_TILED = 2, /* unsplit tiled kernel */
    QMM_PATH_SPLITK = 3,
    QMM_PATH_STREAMK = 4, /* the Hopper wgmma kernel, stream-K schedule (one launch) */
    QMM_PATH_DENSE = 5,   /* dequantize W to bf16 in the workspace, then cuBLAS (large M) */
    QMM_PATH_WGMMA = 6    /* the Hopper wgmma kernel, unsplit or split-K in one launch */
} qmm_path;

const char *qmm_path_name(qmm_path p);

/* Tuning parameters of a split-K policy. They change speed, never results. */
typedef struct qmm_plan_params {
    int tile_m, tile_n;    /* output tile of one block */
    int target_blocks;     /* fill the GPU with this many blocks (seed: 320) */
    int max_split;         /* cap on partitions (seed: 16) */
    int matvec_max_m;      /* M <= this -> matvec (seed: 8) */
} qmm_plan_params;

typedef struct qmm_plan {
    qmm_path path;
    int split;            /* partitions of K (1 = unsplit) */
    int64_t base_blocks;  /* ceil(M/tile_m) * ceil(N/tile_n) */
    int64_t blocks;       /* base_blocks * split (matvec: its own grid, 0 if unknown) */
    int tile_m, tile_n;
    int k_per_split;      /* K / split, a multiple of 128 */
    double predicted_us;  /* model's prediction, < 0 when none */
    int config;           /* index of the kernel configuration in the device description's
                             section of this path (tiled, split-K: config[]; else 0) */
    int stages;           /* async-copy pipeline depth the kernel runs with (0: path has none) */
    size_t workspace_bytes; /* what qmm_cuda_matmul needs for this plan (qmm_plan_call) */
    int rest_tiles;       /* WGMMA split in clusters: its last rest_tiles output tiles run split */
    int rest_split;       /* rest_split ways through the workspace in a second launch, on the
                             SMs the clusters leave free (0: none) */
} qmm_plan;

/* The seed policy's parameters: 32x32 tiles, target 320, cap 16, matvec for M <= 8. */
qmm_plan_params qmm_plan_seed_params(void);

/* The seed policy, exact (DESIGN.md §5):
 *   base = ceil(M/tm)*ceil(N/tn); split = min(cap, max(1, floor(target/base)), K/128);
 *   decrease split until K % (split*128) == 0; split <= 1 -> tiled; M <= matvec_max_m -> matvec. */
qmm_status qmm_plan_seed(int64_t m, int64_t n, int64_t k, const qmm_plan_params *p,
                         qmm_plan *out);

/* Largest split <= want that divides K into equal whole groups of 128 (>= 1). */
int qmm_split_align(int64_t k, int want);
/* The same for groups of `group` columns (a weight's w->group): 1 when group or K is invalid. */
int qmm_split_align_group(int64_t k, int group, int want);

/* A GPU's capabilities as the models see them (one struct: the performance model's presets and
 * the planner's device description both use it). qmm_gpu_info is what CUDA reports about a device
 * (name, versions, clocks); this is what it can do. */
typedef struct qmm_gpu_caps {
    const char *name;      /* preset name ("h200") or the caller's label; may be NULL */
    int sms;               /* streaming multiprocessors, >= 1 */
    double peak_tflops;    /* dense bf16 tensor-core peak, TFLOP/s (1e12 flop/s), > 0 */
    double bandwidth_tbs;  /* DRAM bandwidth, TB/s (1e12 B/s), > 0 */
    double launch_us;      /* overhead of one kernel launch, µs, >= 0 (refined model only; an
                              uncalibrated default in the presets, to fit from measurements) */
} qmm_gpu_caps;

/* What the planner knows of a GPU and of our kernels: one struct, filled from the shipped tuning
 * table of the GPU's family (src/tune/, qmm_tune_desc) and, on a GPU, corrected with its SM count
 * and the occupancy API's resident blocks. Tuning values: they change speed, never results. */
#define QMM_MAX_TILE_CONFIGS 8
#define QMM_MAX_WGMMA_CONFIGS 12
#define QMM_MAX_WGMMA_CLUSTER 8
/* Time model of the Hopper wgmma kernel (src/perf/wgmma.c), constants fitted per GPU to bench
 * ops (tune/sm90.c). A CTA's k-block costs stage_us + us_per_mflop · its MFLOP along its chain of
 * stages, plus issue_us per consumer warpgroup for every k-block of the CTAs sharing the busiest
 * SM (the two add: co-resident CTAs do not overlap). Split or stream-K tiles add round_trip_us per
 * segment end and per batch of partial loads, and their partial traffic at partial_us_per_mb;
 * split-K in clusters adds cluster_us + cluster_us_per_kb per KB of a CTA's partial, a wave. The
 * 256-token tile adds wide_kblock_us to each k-block of its chain (one fragment buffer: a
 * warpgroup's dequantization no longer runs under its own wgmmas). */
typedef struct qmm_wgmma_model {
    double fixed_us;          /* launch and prologue, inside a graph */
    double fill_us_per_kb;    /* a CTA's first stage and its output tile, per KB */
    double stage_us;          /* the per-stage handshake latency of one CTA's k-block */
    double us_per_mflop;      /* the k-block's dequantize + wgmma work, per MFLOP */
    double issue_us;          /* a k-block's issue cost per warpgroup on a shared SM */
    double round_trip_us;     /* a partial's write + counter, or one batch of partial loads */
    double partial_us_per_mb; /* all partials written and read back, per MB */
    double cluster_us;        /* split-K in clusters: the two cluster barriers, a wave */
    double cluster_us_per_kb; /* … and a CTA's partial through shared memory, per KB, a wave */
    double wide_kblock_us;    /* the 256-token tile's extra per k-block of its chain */
} qmm_wgmma_model;

typedef struct qmm_tile_config {
    int tile_m, tile_n;   /* output tile of one block */
    int blocks_per_sm;    /* resident blocks per SM (occupancy API) */
    int max_m;            /* the planner uses the first configuration with M <= max_m */
    int stages;           /* default async-copy pipeline depth (1..4) */
} qmm_tile_config;

typedef struct qmm_device_desc {
    const char *family;   /* tuning table the values come from: "sm90", "generic" */
    qmm_gpu_caps gpu;     /* SMs, bandwidth (the measured copy ceiling), launch overhead, peak */
    /* matvec (decode) */
    int matvec_max_m;     /* the planner takes the matvec for M <= this */
    int matvec_limit_m;   /* the matvec kernel takes M <= this (forced path) */
    /* tiled mma.sync kernel and its split-K form */
    int max_split;        /* cap on partitions */
    int min_k_tiles;      /* each partition keeps at least this many groups of 128 */
    int config_count;
    qmm_tile_config config[QMM_MAX_TILE_CONFIGS];
    double tiled_tflops;  /* the tiled kernel's achievable bf16 rate (the model's compute) */
    /* the Hopper wgmma kernel (tile rows: tune/sm90.h QMM_SM90_CONFIGS, plan_sm90.c) */
    int wgmma_min_m;      /* AUTO under the device policy takes it for wgmma_min_m <= M <= */
    int wgmma_max_m;      /* wgmma_max_m; wgmma_min_m = 0: never */
    int wgmma_wide_min_m; /* from this M on the kernel's token tile is 256 (plan_sm90.c), or the
                           * 128-token tile's one wave of clusters where predicted faster; 0:
                           * none. Beyond wgmma_max_m AUTO under the device policy takes the
                           * kernel or the dense path, whichever the model predicts faster
                           * (unless dense_force_m says dense) */
    int wgmma_alt_min_tile; /* AUTO also weighs split-K clusters in the other block height (64 <->
                             * 128 weight rows) for token tiles from this size on (32, 64 or 128;
                             * 0: never) */
    int wgmma_rest_min_tile; /* AUTO also weighs clusters beyond one wave with the tiles left
                              * aside (qmm_plan.rest_tiles) for token tiles from this size on, in
                              * the rule's block height, over a few token tiles (0: never) */
    /* resident CTAs of wgmma configuration c launched in clusters of s CTAs (split-K summed in
     * the cluster), [c][s] for s = 2..QMM_MAX_WGMMA_CLUSTER: the GPCs' SM counts leave some
     * SMs idle (H200, 1 CTA a SM: 132 in pairs, 120 in fours); 0 = SMs x blocks per SM, < 0 =
     * such clusters do not fit or are not to be planned on this GPU (the plan never chooses
     * them; a context keeps the table's -1 and asks the GPU for the rest) */
    int wgmma_cluster_ctas[QMM_MAX_WGMMA_CONFIGS][QMM_MAX_WGMMA_CLUSTER + 1];
    /* dense fallback (dequantize + cuBLAS) */
    double dense_tflops;  /* cuBLAS bf16 rate for the dense path; 0 = never use it */
    /* its time: dense_fixed_us + the weights' n·k·2.53 bytes (W4 read, bf16 written) at
     * dense_dequant_tbs + max(GEMM flops / dense_tflops, GEMM bytes / the copy ceiling);
     * dense_fixed_us = 0: two launches; dense_dequant_tbs = 0: the copy ceiling */
    double dense_fixed_us;
    double dense_dequant_tbs;
    int dense_min_m;      /* the dense path is considered only for M >= this */
    int dense_force_m;    /* AUTO under the device policy takes it from this M on; 0 = the
                             model decides */
    int dense_narrow_n;   /* ... and for N <= dense_narrow_n from M = dense_narrow_m on (the */
    int dense_narrow_m;   /* narrow k/v outputs); dense_narrow_n = 0: no such rule */
    /* predictions only (they never change a choice): the wgmma kernel's model (all 0: no
     * prediction), and the matvec's fixed_us + weight bytes / matvec_tbs + a term per extra
     * token and output row (matvec_tbs = 0: the refined model's operand floor) */
    qmm_wgmma_model wgmma_model;
    double matvec_fixed_us;
    double matvec_tbs;
    double matvec_row_token_ns;
} qmm_device_desc;

/* The shipped tuning table's description of a GPU family: compute capability 9.x -> "sm90" (the
 * H200's values, its occupancy included, so planning needs no GPU); any other -> "generic" (the
 * same kernels, conservative rates, no dense path). sm_count > 0 replaces the table's count
 * (the H200's 132). */
qmm_status qmm_tune_desc(int cc_major, int cc_minor, int sm_count, qmm_device_desc *out);

/* The device policy: the seed rule's shape with our tile and one full wave of resident blocks as
 * the target, split = min(cap, floor(SMs*blocks_per_sm / base), K/128), aligned down to whole
 * groups and to at least min_k_tiles groups a partition; among the aligned splits up to that one,
 * the one with the smallest predicted time (qmm_plan_predict_us) wins; for M >= dense_min_m the
 * dense path when its prediction is smaller. It is qmm_plan_call (qmm_cuda.h) with the default
 * options on d with the wgmma kernel left out (wgmma_min_m = 0): the plan is complete (stages,
 * workspace bytes). */
qmm_status qmm_plan_device(int64_t m, int64_t n, int64_t k, const qmm_device_desc *d,
                           qmm_plan *out);
/* Predicted µs of running a plan (refined model: waves, operand bytes, partial planes, launches). */
double qmm_plan_predict_us(int64_t m, int64_t n, int64_t k, const qmm_device_desc *d,
                           const qmm_plan *p);

#ifdef __cplusplus
}
#endif

#include "qmm_perf.h"
#include "qmm_cuda.h"
#include "qmm_llm.h"
#include "qmm_text.h"
#include "qmm_pipeline.h"

#endif /* QMM_H */
