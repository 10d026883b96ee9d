/*
 * Tensor-parallel shards of a Qwen3 model's W4 weights (Megatron-style; issue 16), CPU only.
 *
 * For t ranks, each rank r holds:
 *   column-parallel (split N, the output rows): q (its query heads), k and v (its KV heads),
 *     gate and up (its slice of the intermediate width);
 *   row-parallel (split K, the input columns): o (the columns of its query heads) and down (its
 *     intermediate slice); their partial outputs are summed across ranks (the all-reduce);
 *   vocabulary (split rows): the embedding and the LM head (a gather, or a distributed argmax).
 * A row-parallel cut must fall on a quantization-group boundary (scales and biases belong to
 * whole groups); a cut inside a group is QMM_ERR_ARG naming the boundary and the group size.
 * Slices are copies in MLX's affine layout (packed [n, k/8] uint32, scales/biases [n, k/g]):
 * what each GPU uploads at load time from the unsliced checkpoint.
 */
#ifndef QMM_LLM_TP_SLICE_H
#define QMM_LLM_TP_SLICE_H

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which dimension a shard cuts. */
typedef enum tp_cut {
    TP_CUT_ROWS = 0, /* output rows (N): column-parallel linears, and the vocabulary */
    TP_CUT_COLS = 1  /* input columns (K): row-parallel linears; group-aligned */
} tp_cut;

/* A half-open range [lo, lo + count). */
typedef struct tp_range {
    int64_t lo, count;
} tp_range;

/* The weight kinds a rank holds a shard of: the seven linears of qmm_llm_linear (same order),
 * then the embedding / LM head. */
#define TP_VOCAB ((int)QMM_LLM_LINEAR_COUNT)
#define TP_KIND_COUNT (TP_VOCAB + 1)

/* One rank's share of every weight kind. */
typedef struct tp_rank_plan {
    int rank, ranks;
    int64_t heads, kv_heads;  /* this rank's query and KV heads (num_heads / t, num_kv_heads / t) */
    int64_t intermediate;     /* its slice of intermediate_size */
    tp_cut cut[TP_KIND_COUNT];
    tp_range range[TP_KIND_COUNT]; /* rows (TP_CUT_ROWS) or columns (TP_CUT_COLS) it holds */
} tp_rank_plan;

/* Rank `rank` of `ranks` under config c. Checks: ranks >= 1, 0 <= rank < ranks, c valid, t divides
 * num_attention_heads, num_key_value_heads (KV heads are split, never replicated) and
 * intermediate_size, and every row-parallel cut is a multiple of the group size. The vocabulary
 * need not divide: the first V % t ranks get one more row. *out is written only on success. */
qmm_status tp_plan_rank(const qmm_llm_config *c, int ranks, int rank, tp_rank_plan *out);

/* tp_plan_rank's checks, then what the CUDA engine adds: every rank's K (hidden_size, o's and
 * down's shares) a multiple of 128, the device layout's column block, whatever the group size
 * (Qwen3-4B in groups of 64 at t = 8: down's 1 216 columns a rank are whole groups of 64, not
 * blocks of 128). QMM_ERR_SHAPE names the dimension; a tensor-parallel CUDA rank checks this
 * before it cuts its shard. */
qmm_status tp_check_cuda_blocks(const qmm_llm_config *c, int ranks);

/* Name of a weight kind ("q_proj", ..., "down_proj", "embed_tokens/lm_head"), NULL out of range. */
const char *tp_kind_name(int kind);

/* Copy the shard [r.lo, r.lo + r.count) of w's rows (TP_CUT_ROWS) or columns (TP_CUT_COLS) into a
 * newly allocated weight *out (free with qmm_w4_free). Columns must start and end on group
 * boundaries. *out is written only on success. */
qmm_status tp_slice_w4(const qmm_w4 *w, tp_cut cut, tp_range r, qmm_w4 *out);

#ifdef __cplusplus
}
#endif

#endif
