/*
 * The non-matmul kernels of the Qwen3 CUDA forward, one family per .cu file, each with its
 * launcher (stream-ordered, no allocation, no host sync). They reproduce cpu_ops.c: fp32 math,
 * bf16 where the CPU stores bf16. Every kernel that depends on the sequence position reads it from
 * device memory (*pos = positions already in the cache before this forward), so a captured CUDA
 * graph replays correctly at any position.
 */
#ifndef QMM_LLM_KERNELS_CUH
#define QMM_LLM_KERNELS_CUH

/* launchers taking `ln` launch as it says (PDL, timestamps); NULL: a plain launch */
#include "llm/cuda/pdl.cuh"
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "qmm.h"

namespace qmm {
struct MatvecArgs; /* cuda/kernels.h */
}

namespace qmm_llm {

typedef __nv_bfloat16 bf16;

/* ---- embed_norm.cu ---- */

/* x[r, :] = dequant(embedding row tokens[*pos + r]), r < m, from the uploaded weight (the
 * library's row gather); x is [m, hidden] fp32. An id outside [0, vocab) reads row 0 and sets
 * *err = 1 (the host reports it). */
cudaError_t launch_embed(const qmm_cuda_weight *embed, const int32_t *tokens, const int32_t *pos,
                         int m, float *x, int32_t *err, cudaStream_t stream);

/* For r < m: if add: x[row0 + r] += add[row0 + r] (fp32, written back);
 * h[r] = bf16(x[row0 + r] * w / sqrt(mean(x^2) + eps)). x, add are [*, n]; h is [m, n]. */
cudaError_t launch_add_rmsnorm(float *x, const bf16 *add, const bf16 *w, int64_t n, float eps,
                               int row0, int m, bf16 *h, cudaStream_t stream,
                               const llm_launch *ln = nullptr);
/* The same with an fp32 add (a tensor-parallel all-reduced projection): x += bf16(add), the
 * rounding the single-GPU projection applies to its output. */
cudaError_t launch_add_rmsnorm_f32(float *x, const float *add, const bf16 *w, int64_t n, float eps,
                                   int row0, int m, bf16 *h, cudaStream_t stream,
                                   const llm_launch *ln = nullptr);
/* The residual add of the tensor-parallel fused decode step, the norm left to the next matvec
 * (its ss_in): for r < m, x[r] += bf16(add[r]); xg[r] = bf16(x[r] · w) (not normalised);
 * ss_out[r · n/16 + i] = Σ x[r]² over elements 16i..16i+15. x, add are [m, n]; n % 16 == 0,
 * n <= 32768, 16-byte aligned x and add, 8-byte aligned w and xg (else cudaErrorInvalidValue). */
cudaError_t launch_add_norm_fold_f32(float *x, const float *add, const bf16 *w, int64_t n, int m,
                                     bf16 *xg, float *ss_out, cudaStream_t stream,
                                     const llm_launch *ln = nullptr);

/* ---- rope.cu ---- */

/* Rows r < m at position p = *pos + r. q (row stride q_stride, heads*hd wide) is normalised
 * with qw and rotated in place; k (row stride kv_stride, kv*hd wide) is normalised with kw,
 * rotated and stored at kc[kvh][p]; v (row stride kv_stride) is copied to vc[kvh][p]. kc, vc are
 * one layer's cache, [kv_heads, max_seq, hd]. cos_t/sin_t [max_seq, hd/2]. The strides let q, k,
 * v be column ranges of one fused [m, q+k+v] projection output. Any even hd (paired loads for
 * hd 128 and 256 when aligned); m >= 1, else cudaErrorInvalidValue. PDL-safe (pdl.cuh). */
cudaError_t launch_qk_norm_rope(bf16 *q, const bf16 *k, const bf16 *v, int64_t q_stride,
                                int64_t kv_stride, const bf16 *qw, const bf16 *kw,
                                const float *cos_t, const float *sin_t, const int32_t *pos, int m,
                                int heads, int kv_heads, int hd, float eps, int64_t max_seq,
                                bf16 *kc, bf16 *vc, cudaStream_t stream,
                                const llm_launch *ln = nullptr);

/* ---- attention.cu ---- */

/* Causal GQA attention of m rows (fp32 on CUDA cores: the reference for the mma kernel) at
 * positions *pos + r over the layer's cache (which already holds them): out [m, heads*hd] =
 * softmax(q·k / sqrt(hd)) · v, tiled with an online softmax. q rows are q_stride apart.
 * hd must be 64 or 128. */
cudaError_t launch_attention_prefill(const bf16 *q, int64_t q_stride, const bf16 *kc, const bf16 *vc,
                                     const int32_t *pos, int m, int heads, int kv_heads, int hd,
                                     int64_t max_seq, bf16 *out, cudaStream_t stream);

/* The same on tensor cores (bf16 mma.sync, fp32 accumulate; P rounded to bf16 for P·V):
 * attention_mma.cu. hd must be 64 or 128. PDL-safe (pdl.cuh). */
cudaError_t launch_attention_prefill_mma(const bf16 *q, int64_t q_stride, const bf16 *kc,
                                         const bf16 *vc,
                                         const int32_t *pos, int m, int heads, int kv_heads,
                                         int hd, int64_t max_seq, bf16 *out, cudaStream_t stream,
                                         const llm_launch *ln = nullptr);

/* The same on Hopper's warpgroup MMA (attention_prefill_wgmma.cu): hd 128 only, on a device of
 * compute capability 9.0 (attention_prefill_wgmma_supported); pipelined: the schedule that
 * overlaps a tile's softmax with the neighbouring tiles' products. The engine's default where it
 * runs: pipelined from LLM_PREFILL_PIPE_MIN_M tokens a forward (session.h). PDL-safe. */
int attention_prefill_wgmma_supported(int hd);
cudaError_t launch_attention_prefill_wgmma(const bf16 *q, int64_t q_stride, const bf16 *kc,
                                           const bf16 *vc, const int32_t *pos, int m, int heads,
                                           int kv_heads, int hd, int64_t max_seq, bf16 *out,
                                           cudaStream_t stream, const llm_launch *ln = nullptr,
                                           int pipelined = 0);

/* One row at position *pos over *pos + 1 cached positions, split into nsplit ranges; each block
 * serves the heads/kv_heads query heads of one KV head (K and V are read once per group).
 * nsplit == 1 writes out directly; otherwise partials [heads, nsplit, hd + 2] (max, sum, acc)
 * are merged by a combine kernel into out [heads*hd]. */
cudaError_t launch_attention_decode(const bf16 *q, const bf16 *kc, const bf16 *vc,
                                    const int32_t *pos, int heads, int kv_heads, int hd,
                                    int64_t max_seq, int nsplit, float *partials, bf16 *out,
                                    cudaStream_t stream);
/* 1 when (hd, heads/kv_heads) has a decode kernel instance. */
int attention_supported(int hd, int group);

/* ---- attention_decode.cu ---- */

/* The decode step's attention of one row at position p = *pos, in one kernel: q heads
 * (q [heads*hd]) and the new k (k [kv_heads*hd]) are RMS-normalised (qw, kw [hd]) and rotated
 * (cos_t/sin_t [max_seq, hd/2]) as launch_qk_norm_rope does; k and v (v [kv_heads*hd]) are
 * written to kc, vc [kv_heads, max_seq, hd] at p; out [heads*hd] = softmax(q·k / sqrt(hd)) · v
 * over positions 0..p. Grid (kv_heads, max(nsplit, heads/kv_heads)): up to 128 positions one
 * block per query head, beyond that splits of >= 64 rows, merged by the last block of each KV head (partials
 * [heads, nsplit, hd + 2]; counters [kv_heads], zero before the first launch and after every
 * launch). hd 64 or 128, heads/kv_heads in {1, 2, 4, 5, 8}, nsplit in [1, 64]. */
cudaError_t launch_attention_decode_fused(
    const bf16 *q, const bf16 *k, const bf16 *v,                          /* the new row */
    const bf16 *qw, const bf16 *kw, const float *cos_t, const float *sin_t, float eps, /* norm, RoPE */
    const int32_t *pos, int heads, int kv_heads, int hd, int64_t max_seq, int nsplit, /* shape */
    bf16 *kc, bf16 *vc, float *partials, int *counters, bf16 *out,        /* cache, scratch, out */
    cudaStream_t stream, const llm_launch *ln = nullptr);
/* The grid's splits for a session of max_seq positions: about two blocks per SM at the longest
 * context, never more than its 64-row tiles, at most 64. */
int attention_decode_splits(int64_t max_seq, int kv_heads, int sm_count);
#ifdef QMM_AD_TRACE
void attention_decode_trace_print(void); /* experiment build: attention_decode.cu */
void attention_decode_cluster_trace_print(void); /* its cluster kernel's (called by the above) */
#endif

/* ---- attention_decode_cluster.cu ---- */

/* The same attention with each KV head's nsplit splits in one thread-block cluster of nsplit / 2
 * CTAs, merged through distributed shared memory (no partials, no counters), cut by
 * llm_ad_split_even (decode_split.h); nsplit 4, 8, 16 or 32 (at most
 * attention_decode_cluster_splits), and at least heads / kv_heads. Where every split holds one
 * 64-row tile (len <= 64 · nsplit) the fused kernel, or this one, launched with at least that
 * many splits gives the same bits. */
cudaError_t launch_attention_decode_cluster(
    const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *qw, const bf16 *kw,
    const float *cos_t, const float *sin_t, float eps, const int32_t *pos, int heads, int kv_heads,
    int hd, int64_t max_seq, int nsplit, bf16 *kc, bf16 *vc, bf16 *out, cudaStream_t stream,
    const llm_launch *ln = nullptr);
/* Its splits a KV head on the current device: 32 (clusters of 16) or 16 (of 8), the larger of
 * which kv_heads clusters fit at once (one CTA a SM; kv_heads · size <= sm_count when
 * sm_count > 0); 0 where neither fits, or for an unsupported hd or group (then use
 * launch_attention_decode_fused). */
int attention_decode_cluster_splits(int kv_heads, int hd, int group, int sm_count);

/* ---- attention_o_fused.cu (an experiment: QMM_DECODE_ATTN_O=fused, session.cu) ---- */

/* The decode attention as launch_attention_decode_fused does it with one split, and the o
 * projection with its residual epilogue (o: a MatvecArgs of the o weight with MV_EPI_RESIDUAL,
 * as the fused decode step's o matvec), in one kernel: clusters of kv_heads CTAs, each CTA one KV
 * head's attention and 32 rows of o over the whole attention output (gathered through
 * distributed shared memory). hd 128, heads = 4 · kv_heads, kv_heads <= 8, groups of 128 (other
 * groups, Qwen3-14B's 5 among them, keep the fused attention and the o matvec). */
int attention_o_fused_supported(int hd, int heads, int kv_heads, const qmm::MatvecArgs &o);
cudaError_t launch_attention_o_fused(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *qw,
                                     const bf16 *kw, const float *cos_t, const float *sin_t, float eps,
                                     const int32_t *pos, int heads, int kv_heads, int hd, int64_t max_seq,
                                     bf16 *kc, bf16 *vc, const qmm::MatvecArgs &o, cudaStream_t stream,
                                     const llm_launch *ln = nullptr);

/* ---- swiglu_argmax.cu ---- */

/* out[r, i] = bf16(silu(gate[r, i]) * up[r, i]) for r < rows, i < width; gate and up rows are
 * in_stride apart (separate buffers: width; one fused [rows, 2*width] output: 2*width), out rows
 * width apart. out may be gate when in_stride == width. chunk > 0: the fused output interleaves
 * gate and up in chunks (element i of gate at column (i/chunk)·2·chunk + i%chunk, up = gate +
 * chunk). */
cudaError_t launch_swiglu(const bf16 *gate, const bf16 *up, int64_t rows, int64_t width,
                          int64_t in_stride, int64_t chunk, bf16 *out, cudaStream_t stream,
                          const llm_launch *ln = nullptr);

/* best = argmax logits[vocab] (lowest index on ties, NaN never wins); tokens[*pos + m] = best,
 * *pos += m. With no finite logit: tokens[*pos + m] = 0 and *err = 2. */
cudaError_t launch_argmax_advance(const bf16 *logits, int64_t vocab, int32_t *tokens,
                                  int32_t *pos, int m, int32_t *err, cudaStream_t stream);
/* ---- argmax.cu ---- */

/* Stage 1: pair_v/pair_i [argmax_blocks(vocab)] = each block's best (value, index) of its slice
 * of logits [vocab] (16-byte aligned); index -1 when the slice is all NaN. */
int argmax_blocks(int64_t vocab);
cudaError_t launch_argmax_partial(const bf16 *logits, int64_t vocab, float *pair_v, int *pair_i,
                                  cudaStream_t stream, const llm_launch *ln = nullptr);
/* Stage 2: best of n pairs (lowest index on ties); tokens[*pos + m] = best, *pos += m; with no
 * candidate tokens[*pos + m] = 0 and *err = 2 (as launch_argmax_advance). */
cudaError_t launch_argmax_finish(const float *pair_v, const int *pair_i, int n, int32_t *tokens,
                                 int32_t *pos, int m, int32_t *err, cudaStream_t stream,
                                 const llm_launch *ln = nullptr);

/* *pos += m (a prefill chunk that is not the last). */
cudaError_t launch_advance(int32_t *pos, int m, cudaStream_t stream);

} // namespace qmm_llm

#endif
