/*
 * One C entry per engine kernel, so tests/test_ops.c can run each kernel alone against its
 * cpu_ops.c counterpart. Device pointers (bf16 as void *), the legacy default stream, no host
 * sync; each returns the launch's cudaError_t as an int (0 = launched). Shapes as in
 * llm_kernels.cuh, which each entry calls unchanged.
 */
#ifndef QMM_LLM_OPS_ENTRY_H
#define QMM_LLM_OPS_ENTRY_H

#include <stdint.h>

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

int llm_op_embed(const qmm_cuda_weight *embed, const int32_t *tokens, const int32_t *pos, int m,
                 float *x, int32_t *err);
int llm_op_add_rmsnorm(float *x, const void *add, const void *w, int64_t n, float eps, int m,
                       void *h);
/* the same with an fp32 add, rounded to bf16 before it is added (tensor parallelism) */
int llm_op_add_rmsnorm_f32(float *x, const float *add, const void *w, int64_t n, float eps, int m,
                           void *h);
/* pdl: launched with programmatic dependent launch (as the engine does when PDL is on) */
int llm_op_qk_norm_rope(int pdl, void *q, const void *k, const void *v, int64_t q_stride,
                        int64_t kv_stride, const void *qw, const void *kw, const float *cos_t,
                        const float *sin_t, const int32_t *pos, int m, int heads, int kv_heads,
                        int hd, float eps, int64_t max_seq, void *kc, void *vc);
/* mma: 0 = the fp32 CUDA-core kernel, 1 = the tensor-core kernel, 2 = that launched with PDL,
 * 3 = the warpgroup-MMA kernel (hd 128 on compute capability 9.0), 4 = that launched with PDL,
 * 5 and 6 = the same pipelined */
int llm_op_attention_prefill(int mma, const void *q, int64_t q_stride, const void *kc,
                             const void *vc, const int32_t *pos, int m, int heads, int kv_heads,
                             int hd, int64_t max_seq, void *out);
/* 1 when llm_op_attention_prefill's variants 3 to 6 run here (this device, this hd) */
int llm_op_attention_prefill_wgmma_supported(int hd);
int llm_op_attention_decode(const void *q, const void *kc, const void *vc, const int32_t *pos,
                            int heads, int kv_heads, int hd, int64_t max_seq, int nsplit,
                            float *partials, void *out);
/* the decode step's fused qk-norm + RoPE + cache append + attention (attention_decode.cu) */
int llm_op_attention_decode_fused(const void *q, const void *k, const void *v, const void *qw,
                                  const void *kw, const float *cos_t, const float *sin_t,
                                  float eps, const int32_t *pos, int heads, int kv_heads, int hd,
                                  int64_t max_seq, int nsplit, void *kc, void *vc,
                                  float *partials, int *counters, void *out);
/* The cluster-merged kernel (attention_decode_cluster.cu: no partials or counters) at nsplit
 * splits, and the most splits the current device holds clusters for (0: none). */
int llm_op_attention_decode_cluster(const void *q, const void *k, const void *v, const void *qw,
                                    const void *kw, const float *cos_t, const float *sin_t,
                                    float eps, const int32_t *pos, int heads, int kv_heads, int hd,
                                    int64_t max_seq, int nsplit, void *kc, void *vc, void *out);
int llm_op_attention_decode_cluster_splits(int kv_heads, int hd, int group);
int llm_op_swiglu(const void *gate, const void *up, int64_t rows, int64_t width,
                  int64_t in_stride, void *out);
/* The decode matvec with an epilogue (kernels.h MatvecArgs; epi 0 store, 1 residual, 2 SwiGLU,
 * 3 fp32 store) on the context's scratch: c[m, ldc] (store, SwiGLU), x/xg[m, ldc] and
 * ss_out[m, blocks] (residual), x[m, ldc] (fp32 store); ss_in (may be NULL) the RMSNorm sums of
 * the input rows; shape = 16·R + C forces R tiles a CTA and clusters of C, + 512 with CTAs of
 * 4 warps (0: the launcher's choice), + 1024 with the activations staged in rounds (m >= 2;
 * without it the default staging, whatever QMM_MV_ROUNDS says), + 2048 with 3 groups a warp
 * requested before the dependency wait (the decode step's gate|up). */
int llm_op_matvec_fused(const qmm_cuda_ctx *ctx, const qmm_cuda_weight *w, int m, int epi,
                        const void *a, int64_t lda, void *c, int64_t ldc, float *x,
                        const void *gamma, void *xg, float *ss_out, const float *ss_in,
                        int ss_blocks, int norm_dim, float eps, int shape);
/* The decode attention and the o matvec in one kernel (attention_o_fused.cu, an experiment):
 * launch_attention_decode_fused's step at one split, then x[n] += out·Wᵀ with xg = bf16(x·gamma)
 * and ss_out = Σx² per 16 rows (w: n × heads·hd); supported says whether the shapes fit. */
int llm_op_attention_o_fused_supported(const qmm_cuda_weight *w, int heads, int kv_heads, int hd);
int llm_op_attention_o_fused(const qmm_cuda_weight *w, const void *q, const void *k, const void *v,
                             const void *qw, const void *kw, const float *cos_t, const float *sin_t,
                             float eps, const int32_t *pos, int heads, int kv_heads, int hd,
                             int64_t max_seq, void *kc, void *vc, float *x, const void *gamma, void *xg,
                             float *ss_out);
int llm_op_argmax_advance(const void *logits, int64_t vocab, int32_t *tokens, int32_t *pos, int m,
                          int32_t *err);
/* the two-stage argmax (argmax.cu): pair_v/pair_i hold llm_op_argmax_blocks(vocab) entries */
int llm_op_argmax_blocks(int64_t vocab);
int llm_op_argmax_two_stage(const void *logits, int64_t vocab, float *pair_v, int *pair_i,
                            int32_t *tokens, int32_t *pos, int m, int32_t *err);

#ifdef __cplusplus
}
#endif

#endif
