/*
 * qmm Qwen3 engine (included by qmm.h; do not include directly).
 *
 * A Qwen3 decoder run on qmm's W4A16 kernels, batch 1, greedy:
 *   embedding (W4 rows dequantized) -> layers x [RMSNorm -> q,k,v -> per-head RMSNorm on q,k ->
 *   RoPE (halves, theta) -> causal GQA attention over a KV cache -> o + residual -> RMSNorm ->
 *   silu(gate)*up -> down + residual] -> final RMSNorm -> LM head (tied: the embedding) -> argmax.
 *
 * Numerics shared by the CPU reference and the CUDA forward (the CPU defines them):
 *   fp32: the residual stream, every reduction (norms, attention scores, softmax, P·V), RoPE
 *         (cos/sin from one table computed in double), SwiGLU.
 *   bf16 (rounded once where the GPU stores them): normed activations (matmul inputs), every
 *         matmul output (q, k, v, o, gate, up, down, logits), q and k after norm+RoPE, the KV cache,
 *         the attention output, the SwiGLU output.
 * Logits are the bf16 head outputs widened to float; argmax takes the lowest index on ties.
 *
 * Checkpoints: MLX 4-bit safetensors as mlx_lm saves them (model.safetensors, or shards listed by
 * model.safetensors.index.json) beside a Hugging Face config.json whose "quantization" (or
 * "quantization_config") gives {group_size: 32, 64 or 128, bits: 4}, optionally per layer.
 * Weights are memory-mapped and the W4 views point into the mapping (read-only by contract);
 * qmm_llm_model_load_mode can copy them into memory instead (see there: a mapped file must not
 * shrink while its model lives). Both engines run every group size (the CUDA engine's persistent
 * decode step, an option, groups of 128 only).
 */
#ifndef QMM_LLM_H
#define QMM_LLM_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- model description -------------------------------------------------------------------- */

typedef struct qmm_llm_config {
    int64_t hidden_size;             /* model width; multiple of group_size */
    int64_t intermediate_size;       /* MLP width; multiple of group_size */
    int64_t num_layers;              /* num_hidden_layers */
    int64_t num_heads;               /* query heads (num_attention_heads) */
    int64_t num_kv_heads;            /* key/value heads; divides num_heads */
    int64_t head_dim;                /* even; num_heads*head_dim a multiple of group_size */
    int64_t vocab_size;
    int64_t max_position_embeddings; /* context limit */
    double rope_theta;
    double rms_norm_eps;
    int tie_word_embeddings;         /* 1: the LM head is the embedding matrix */
    int64_t group_size;              /* quantization group: 32, 64 or 128 (config.json's
                                        "quantization"; when absent the largest that divides
                                        every K; 0 here means 128). Layers that config.json
                                        overrides by name may differ */
} qmm_llm_config;

/* Parse a Qwen3 config.json held in json[len]. Unknown keys are ignored; keys the engine cannot
 * honour (another model_type, rope_scaling, attention bias, a quantization other than 4-bit
 * affine in groups of 32, 64 or 128) are QMM_ERR_UNSUPPORTED; malformed JSON or wrong types are
 * QMM_ERR_FORMAT. Per-layer entries of "quantization" are checked when the weights load. */
qmm_status qmm_llm_config_parse(const char *json, size_t len, qmm_llm_config *out);
/* Read and parse a config.json file. */
qmm_status qmm_llm_config_load(const char *path, qmm_llm_config *out);
/* Built-in shapes: "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b". */
qmm_status qmm_llm_config_preset(const char *name, qmm_llm_config *out);
/* Name of preset i (0, 1, ...), NULL past the last. */
const char *qmm_llm_preset_name(int i);
/* Check the sizes the engine needs (multiples of the group size, heads divisible, ranges). */
qmm_status qmm_llm_config_validate(const qmm_llm_config *c);

/* The linear layers of one decoder layer. */
typedef enum qmm_llm_linear {
    QMM_LLM_Q = 0,
    QMM_LLM_K,
    QMM_LLM_V,
    QMM_LLM_O,
    QMM_LLM_GATE,
    QMM_LLM_UP,
    QMM_LLM_DOWN,
    QMM_LLM_LINEAR_COUNT
} qmm_llm_linear;

/* The norms of one decoder layer (weights of length hidden, hidden, head_dim, head_dim). */
typedef enum qmm_llm_norm {
    QMM_LLM_INPUT_NORM = 0,
    QMM_LLM_POST_ATTN_NORM,
    QMM_LLM_Q_NORM,
    QMM_LLM_K_NORM,
    QMM_LLM_NORM_COUNT
} qmm_llm_norm;

/* Short name of a linear ("q_proj", ...), NULL when out of range. */
const char *qmm_llm_linear_name(qmm_llm_linear which);
/* out_features n and in_features k of a linear under config c. */
qmm_status qmm_llm_linear_shape(const qmm_llm_config *c, qmm_llm_linear which, int64_t *n,
                                int64_t *k);

/* ---- progress ------------------------------------------------------------------------------ */

/* Long operations (synthetic weights, checkpoint quantization) report their progress through
 * fn(ctx, what, done, total) on the calling thread, done == total last. One hook per process;
 * NULL (the default) turns it off. The library never prints: the CLI draws the bar. */
typedef void (*qmm_progress_fn)(void *ctx, const char *what, double done, double total);
void qmm_set_progress(qmm_progress_fn fn, void *ctx);

/* ---- a loaded model (weights + config) ------------------------------------------------------ */

typedef struct qmm_llm_model qmm_llm_model;

/* path: a directory holding config.json and model.safetensors or model.safetensors.index.json,
 * or a .safetensors file with config.json beside it. Every tensor is validated against the
 * config: a missing one is QMM_ERR_NOT_FOUND naming it, a wrong dtype or shape (scales that do
 * not match the configured group size included) QMM_ERR_FORMAT; a layer that config.json
 * quantizes with other bits, or leaves unquantized, QMM_ERR_UNSUPPORTED naming it. */
qmm_status qmm_llm_model_load(const char *path, qmm_llm_model **out);
/* How the weight files are read. MAP (qmm_llm_model_load): memory-mapped, fast, no copy; the
 * files must then stay as they are while the model lives: a file truncated or rewritten in place
 * afterwards makes the next access to its missing pages raise SIGBUS (the kernel's rule for
 * mappings; no status can report it). COPY: every file is read into private memory at load
 * (its size in RAM, one full read); later changes to the files cannot affect the model. */
typedef enum qmm_llm_load_mode { QMM_LLM_LOAD_MAP = 0, QMM_LLM_LOAD_COPY = 1 } qmm_llm_load_mode;
qmm_status qmm_llm_model_load_mode(const char *path, qmm_llm_load_mode mode, qmm_llm_model **out);
/* Synthetic weights of config c: seeded random codes, scales ~ 0.22/sqrt(K) of both signs with
 * biases centring the codes (so each projection keeps activations near unit RMS), norms near 1.
 * The same seed gives the same weights. Uses all cores to fill qwen3-4b (2.2 GB) quickly. */
qmm_status qmm_llm_model_synthetic(const qmm_llm_config *c, uint64_t seed, qmm_llm_model **out);
/* spec: "synthetic:NAME" (a preset's shapes with synthetic weights from seed; NAME-g64 or NAME-g32
 * quantized in groups of 64 or 32 instead of 128), a path as in
 * qmm_llm_model_load, or a bare preset NAME when no file or directory of that name exists (an
 * existing path always wins). */
qmm_status qmm_llm_model_open(const char *spec, uint64_t seed, qmm_llm_model **out);
void qmm_llm_model_destroy(qmm_llm_model *m);

const qmm_llm_config *qmm_llm_model_config(const qmm_llm_model *m);
/* 1 when the weights were generated (qmm_llm_model_synthetic), 0 when read from a checkpoint. */
int qmm_llm_model_is_synthetic(const qmm_llm_model *m);
/* Bytes of all weights (quantized linears, embedding, head when untied, norms). */
size_t qmm_llm_model_weight_bytes(const qmm_llm_model *m);
/* Read-only views of the weights (valid while the model lives). */
qmm_status qmm_llm_model_linear(const qmm_llm_model *m, int64_t layer, qmm_llm_linear which,
                                const qmm_w4 **out);
qmm_status qmm_llm_model_norm(const qmm_llm_model *m, int64_t layer, qmm_llm_norm which,
                              const qmm_bf16 **out);
/* embedding is [vocab, hidden]; the LM head is the same view when tied. */
qmm_status qmm_llm_model_embedding(const qmm_llm_model *m, const qmm_w4 **out);
qmm_status qmm_llm_model_lm_head(const qmm_llm_model *m, const qmm_w4 **out);
qmm_status qmm_llm_model_final_norm(const qmm_llm_model *m, const qmm_bf16 **out);

/* ---- sampling and timing -------------------------------------------------------------------- */

/* Index of the largest of x[n] (lowest index on ties; NaN never wins). QMM_ERR_RANGE when every
 * value is NaN. */
qmm_status qmm_llm_argmax(const float *x, int64_t n, int32_t *out);

typedef struct qmm_llm_timing {
    int64_t prompt_tokens;
    int64_t new_tokens;
    double prefill_ms;  /* the forward that yields the first new token (head + argmax included) */
    double decode_ms;   /* the remaining new_tokens - 1 single-token steps */
} qmm_llm_timing;

/* prompt_tokens / prefill seconds and (new_tokens - 1) / decode seconds; 0 when undefined. */
double qmm_llm_prefill_tok_s(const qmm_llm_timing *t);
double qmm_llm_decode_tok_s(const qmm_llm_timing *t);

/* ---- CPU reference forward ------------------------------------------------------------------ */

typedef struct qmm_llm_cpu_session qmm_llm_cpu_session;

/* A session owns a KV cache for max_seq positions (<= max_position_embeddings) and scratch for
 * prefills of up to max_seq tokens. threads <= 0: one per online CPU (for the matmuls). */
qmm_status qmm_llm_cpu_session_create(const qmm_llm_model *m, int64_t max_seq, int threads,
                                      qmm_llm_cpu_session **out);
void qmm_llm_cpu_session_destroy(qmm_llm_cpu_session *s);
/* Forget every position (the cache is reused). */
qmm_status qmm_llm_cpu_reset(qmm_llm_cpu_session *s);
/* Positions filled so far. */
int64_t qmm_llm_cpu_position(const qmm_llm_cpu_session *s);

/* Run ids[n] at the next n positions; logits_out[vocab] (may be NULL) gets the logits of the last
 * one. QMM_ERR_RANGE when a token id is outside [0, vocab) or the cache would overflow (nothing
 * is changed then). */
qmm_status qmm_llm_cpu_prefill(qmm_llm_cpu_session *s, const int32_t *ids, int64_t n,
                               float *logits_out);
/* One token: the same as a prefill of n = 1. */
qmm_status qmm_llm_cpu_decode(qmm_llm_cpu_session *s, int32_t id, float *logits_out);
/* Greedy: prefill ids[n], then max_new - 1 decode steps; out[max_new] receives the new tokens.
 * timing may be NULL. The session must have room for n + max_new - 1 positions. */
qmm_status qmm_llm_cpu_generate(qmm_llm_cpu_session *s, const int32_t *ids, int64_t n,
                                int64_t max_new, int32_t *out, qmm_llm_timing *timing);

/* ---- CUDA forward --------------------------------------------------------------------------- */

typedef struct qmm_llm_cuda_session qmm_llm_cuda_session;

typedef struct qmm_llm_cuda_options {
    int device;          /* CUDA device index */
    int split_k;         /* 1: projections take the planner's path (split-K where it helps);
                            0: the unsplit tiled kernel for every projection with M > 8 */
    int use_graph;       /* 1: decode steps replay a captured CUDA graph (one for each range of
                            context lengths, with smaller attention grids at short contexts;
                            the eager step's results bit for bit) */
    int64_t max_chunk;   /* rows per prefill forward (longer prompts run in chunks); 0 = min(max_seq, 4096) */
    int attention_ref;   /* 1: reference attention kernels: prefill in fp32 on CUDA cores (the
                            reference of the default tensor-core kernel; slower), and decode as
                            a separate qk-norm + rope + cache kernel before the attention (the
                            reference of the default fused decode kernel) */
    int fuse_projections; /* 1 (default): q|k|v and gate|up stacked into one W4 weight each (rows
                             concatenated at upload), 4 matmuls per layer instead of 7; 0: the
                             separate shapes (on which the split-K comparison is defined) */
    int offload_weights; /* 1: weight streaming. The layers' weights stay in pinned host memory
                            (their device images, built at session creation) and are uploaded
                            layer by layer on a copy stream into offload_buffers device slots while
                            earlier layers compute; embedding, LM head, norms, KV cache and
                            scratch stay resident. Logits are bitwise those of the resident run */
    int offload_buffers; /* device layer slots b >= 1 (default 2); more than the layer count acts
                            as the layer count. Layer l uses slot l % b and is uploaded as soon
                            as layer l - b has finished with that slot */
    int pdl;             /* 1 (default): the engine's kernels are launched with programmatic
                            dependent launch, so each is resident and waiting before its
                            predecessor ends; 0: plain launches (the comparison). Same results
                            bit for bit. Off with offload_weights */
    int persistent_decode; /* 1: each decode step (batch 1) is one persistent kernel for all
                              layers and the LM head, its weights streamed through every SM's
                              shared memory without gaps between layers (one CTA a SM, a
                              cooperative launch); 0 (default): the fused step of five kernels a
                              layer. Needs resident weights of groups of 128, fused projections,
                              one GPU; otherwise session creation fails with QMM_ERR_UNSUPPORTED */
} qmm_llm_cuda_options;

qmm_llm_cuda_options qmm_llm_cuda_options_default(void);

/* Upload the model's weights, allocate the bf16 KV cache for max_seq positions and all scratch
 * (nothing is allocated later). Builds without CUDA answer QMM_ERR_UNSUPPORTED. */
qmm_status qmm_llm_cuda_session_create(const qmm_llm_model *m, int64_t max_seq,
                                       const qmm_llm_cuda_options *opt,
                                       qmm_llm_cuda_session **out);
void qmm_llm_cuda_session_destroy(qmm_llm_cuda_session *s);
qmm_status qmm_llm_cuda_reset(qmm_llm_cuda_session *s);
int64_t qmm_llm_cuda_position(const qmm_llm_cuda_session *s);
/* As the CPU calls. next_out (may be NULL) receives the greedy token (argmax on the device). */
qmm_status qmm_llm_cuda_prefill(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                float *logits_out, int32_t *next_out);
qmm_status qmm_llm_cuda_decode(qmm_llm_cuda_session *s, int32_t id, float *logits_out,
                               int32_t *next_out);
/* Greedy generation with the decode loop chained on the device (each step's argmax feeds the
 * next step's embedding without a host round trip). Timed with CUDA events. */
qmm_status qmm_llm_cuda_generate(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                 int64_t max_new, int32_t *out, qmm_llm_timing *timing);

/* The kernels a session chose at creation, from its GPU, its options and the experiments'
 * environment variables (QMM_PREFILL_ATTN, QMM_DECODE_ATTN): short names, static strings. */
typedef struct qmm_llm_cuda_kernels {
    const char *prefill_attention; /* "wgmma_by_length" (warpgroup MMA, a key tile at a time
                                      below 1 024 tokens a forward, pipelined from there: the
                                      default at head dim 128 on sm_90), "wgmma" / "wgmma_pipe"
                                      (one schedule forced), "mma" (mma.sync), "reference" (fp32) */
    const char *decode_step;       /* "fused" (five kernels a layer), "persistent" (one kernel
                                      for all layers), "layered" (the prefill's kernels) */
    const char *decode_attention;  /* "fused" (split-KV, one launch), "cluster" (its launches of
                                      4 splits or more merged in thread-block clusters),
                                      "fused with o" (the attention and the o projection in one
                                      kernel: an experiment, QMM_DECODE_ATTN_O=fused),
                                      "persistent", "reference" */
} qmm_llm_cuda_kernels;

/* Which kernels the session runs (see qmm_llm_cuda_kernels). Builds without CUDA answer
 * QMM_ERR_UNSUPPORTED. */
qmm_status qmm_llm_cuda_session_kernels(const qmm_llm_cuda_session *s, qmm_llm_cuda_kernels *out);

/* What weight streaming moves (all zero when the session keeps its weights resident). */
typedef struct qmm_llm_offload_stats {
    int buffers;             /* device layer slots in use */
    size_t layer_bytes;      /* one layer's device image (the bytes uploaded per layer) */
    size_t slot_bytes;       /* device bytes of all slots together */
    double h2d_gbs;          /* host-to-device bandwidth from pinned memory measured at session
                                creation (every layer image copied once), GB/s (1e9 B/s) */
    double upload_ms;        /* layer_bytes / h2d_gbs: one layer's upload time, ms */
} qmm_llm_offload_stats;

/* The weight-streaming figures of a session. Builds without CUDA answer QMM_ERR_UNSUPPORTED. */
qmm_status qmm_llm_cuda_offload_stats(const qmm_llm_cuda_session *s, qmm_llm_offload_stats *out);

/* Per-kernel-family time of one forward, measured eagerly with CUDA events around each launch. */
#define QMM_LLM_PROFILE_MAX 24
typedef struct qmm_llm_profile {
    int count;                            /* entries used */
    const char *name[QMM_LLM_PROFILE_MAX]; /* "qkv matmul", "attention", ... (static strings) */
    double ms[QMM_LLM_PROFILE_MAX];       /* total over the forward */
    int launches[QMM_LLM_PROFILE_MAX];
    double total_ms;                      /* sum of the entries */
} qmm_llm_profile;

/* Profile one prefill of ids[n] from position 0 (the cache is reset first), then one decode step
 * after it; either output may be NULL. Leaves the session reset. */
qmm_status qmm_llm_cuda_profile(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                qmm_llm_profile *prefill, qmm_llm_profile *decode);

/* The decode step as it runs in its CUDA graph, from %globaltimer stamps the engine's kernels
 * write (first block start, return from the PDL wait, last block end). Entries in step order:
 * stamped = 1, an engine kernel family timed from its wait to its end; stamped = 0, the time
 * from the previous engine kernel's end to the next one's wait, charged to the matmuls launched
 * in between (their launch gaps included). */
#define QMM_LLM_GRAPH_PROFILE_MAX 24
typedef struct qmm_llm_graph_profile {
    int count;
    const char *name[QMM_LLM_GRAPH_PROFILE_MAX];   /* static strings */
    int stamped[QMM_LLM_GRAPH_PROFILE_MAX];        /* 1: an engine kernel, from its PDL wait to its
                                                      last block's end; 2: a decode matvec, from the
                                                      previous stamped kernel's end to its own end;
                                                      0: unstamped work between stamped kernels */
    int launches[QMM_LLM_GRAPH_PROFILE_MAX];       /* per step */
    double us[QMM_LLM_GRAPH_PROFILE_MAX];          /* per step, median over the steps */
    double bytes[QMM_LLM_GRAPH_PROFILE_MAX];       /* moved per step (weights, KV cache, activations) */
    double stamped_us;     /* median of (last stamped end - first stamped start) */
    double event_us;       /* median step time by CUDA events around each replay */
    int kernels_per_step;  /* kernel nodes in the decode graph */
    int steps;
    int64_t context;       /* positions cached before the first profiled step */
    int pdl;
} qmm_llm_graph_profile;

/* Prefill ids[n] from position 0 (the cache is reset first), then replay a stamped copy of the
 * decode graph `steps` times (1..1000) and summarise. Leaves the session reset. Builds without
 * CUDA answer QMM_ERR_UNSUPPORTED. */
qmm_status qmm_llm_cuda_profile_graph(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                      int steps, qmm_llm_graph_profile *out);

/* ---- checkpoint writer ---------------------------------------------------------------------- */

typedef struct qmm_llm_quantize_report {
    int64_t quantized;   /* tensors quantized (linears and the embedding) */
    int64_t copied;      /* norms copied as bf16 */
    int64_t ignored;     /* input tensors the engine does not use */
    double worst_rel_frob; /* largest relative quantization error over the quantized tensors */
    uint64_t bytes;      /* size of the written model.safetensors */
} qmm_llm_quantize_report;

/* in_path: a bf16/f16/f32 Hugging Face checkpoint (directory with config.json and
 * model.safetensors or an index, or a .safetensors file with config.json beside it).
 * Writes out_dir/model.safetensors (MLX 4-bit layout, groups of 128) and out_dir/config.json (the
 * input's, with "quantization" and "quantization_config" entries added, as mlx_lm saves them),
 * each to a temporary name first, fsynced, then renamed: on error nothing is left behind.
 * tokenizer.json, tokenizer_config.json and generation_config.json beside the input are copied.
 * out_dir is created when missing. report may be NULL. */
qmm_status qmm_llm_quantize_checkpoint(const char *in_path, const char *out_dir,
                                       qmm_llm_quantize_report *report);
/* The same with groups of group_size columns (32, 64 or 128; mlx_lm.convert's default is 64). */
qmm_status qmm_llm_quantize_checkpoint_group(const char *in_path, const char *out_dir,
                                             int group_size, qmm_llm_quantize_report *report);

#ifdef __cplusplus
}
#endif

#endif /* QMM_LLM_H */
