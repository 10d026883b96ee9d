/*
 * Decode under tensor parallelism, on paper (issue 16): a prediction, never a measurement.
 *
 * Batch-1 decode is bandwidth bound: each rank reads its shard of the weights (W4: 0.5 byte a
 * weight + a bf16 scale and bias a group) and its KV heads' cache once a token. Megatron-style
 * tensor parallelism adds collectives on the critical path: an all-reduce of the bf16 hidden
 * vector (2 * hidden bytes) after o and after down in every layer, one for the vocabulary-split
 * embedding lookup, and one small all-gather for the distributed argmax. Nothing overlaps them in
 * decode: the next layer needs the reduced vector.
 *   one all-reduce (ring) = latency + 2 (t - 1) / t * bytes / link bandwidth   (t = 1: 0)
 *   token = (weight + KV bytes of a rank) / (HBM bandwidth * hbm_fraction) + launches
 *           + collectives
 * hbm_fraction 0.66 (of the preset's 4.2 TB/s) and 2.6 µs a kernel are fit to the two measured
 * t = 1 fused steps of the larger models (two H200s' machine, 32-token prompt, commit 55c1747,
 * bench/results/2026-12-01-session4/tp-x2/: Qwen3-8B 1.931 ms for 4.03 GB and 36 × 5 kernels,
 * Qwen3-32B 6.998 ms for 17.0 GB and 64 × 5). With them the t = 2 fused steps (7 kernels and two
 * all-reduces a layer) come out 2-4 % fast: 8B 1.88 vs 1.92 ms, 32B 5.11 vs 5.33. Qwen3-4B's
 * step (1.48 ms) is 16 % slower than the fit says (1.24): its small matrices stream worse; so may
 * smaller shards at larger t, which the model does not know.
 * The link defaults are measured: `qmm bench allreduce --tp 2` on two H200s (NVLink; bench/results/
 * 2026-12-01-matvec/tp/allreduce.log): 6.6 µs for 8 KB, and 279 GB/s a direction fit to 64 MB.
 */
#ifndef QMM_PERF_TP_MODEL_H
#define QMM_PERF_TP_MODEL_H

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_LINK_GBS_MEASURED 279.0
#define TP_LINK_US_MEASURED 6.6

typedef struct tp_link {
    double bandwidth_gbs; /* per GPU, one direction, GB/s (1e9 B/s), > 0 */
    double latency_us;    /* fixed cost of one collective, µs, >= 0 */
} tp_link;

typedef struct tp_decode_params {
    qmm_gpu_caps gpu;      /* bandwidth_tbs (HBM) and launch_us (per kernel in the graph) */
    double hbm_fraction;   /* of bandwidth_tbs the decode kernels reach, (0, 1] */
    tp_link link;
    int64_t context;       /* tokens in the KV cache, >= 0 */
    int kernels_per_layer; /* kernels a layer launches in the decode graph, >= 1 */
} tp_decode_params;

typedef struct tp_decode_estimate {
    int ranks;
    double weight_bytes;   /* one rank's weight bytes a token */
    double kv_bytes;       /* one rank's KV-cache bytes a token */
    double memory_us;      /* (weight + KV bytes) / HBM bandwidth */
    double launch_us;      /* layers * kernels_per_layer * launch_us */
    int collectives;       /* on the critical path a token (0 at t = 1) */
    double allreduce_us;   /* one all-reduce of 2 * hidden bytes */
    double comm_us;        /* all collectives of a token */
    double total_us;       /* memory + launch + comm */
    double tokens_per_s;
    double comm_share;     /* comm_us / total_us */
} tp_decode_estimate;

/* The defaults: the h200-measured GPU preset (4.2 TB/s) at hbm_fraction 0.66 with 2.6 µs a kernel
 * in the graph (fit above), 5 kernels a layer, 1024 tokens of context, the
 * measured link above. */
tp_decode_params tp_decode_defaults(void);

/* One ring all-reduce of `bytes` over `ranks` (0 at ranks = 1). */
qmm_status tp_allreduce_us(const tp_link *l, int ranks, double bytes, double *us);

/* Predict one decode token of config c at t = ranks (tp_check_cuda_blocks' checks: t must divide
 * the heads, KV heads and intermediate width in whole groups, and every rank's K must be whole
 * blocks of 128 columns). *out is written only on success. */
qmm_status tp_decode_predict(const qmm_llm_config *c, int ranks, const tp_decode_params *p,
                             tp_decode_estimate *out);

#ifdef __cplusplus
}
#endif

#endif
