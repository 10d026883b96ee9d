/*
 * C entry points of the decode-step kernels (attention_decode*.cu, argmax.cu, the vectorised
 * swiglu and add + rmsnorm), for the GPU tests: device pointers, stream a cudaStream_t (NULL =
 * the legacy stream), pdl = 1 launches with programmatic dependent launch. Shapes and meaning as
 * the launchers in llm_kernels.cuh; a launch error is QMM_ERR_CUDA. CUDA builds only.
 */
#ifndef QMM_LLM_DECODE_OPS_H
#define QMM_LLM_DECODE_OPS_H

#include <stdint.h>

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

qmm_status llm_cuda_op_attention_decode(const qmm_bf16 *q, const qmm_bf16 *k, const qmm_bf16 *v,
                                        const qmm_bf16 *qw, const qmm_bf16 *kw,
                                        const float *cos_t, const float *sin_t, float eps,
                                        const int32_t *pos, int heads, int kv_heads, int hd,
                                        int64_t max_seq, int nsplit, qmm_bf16 *kc, qmm_bf16 *vc,
                                        float *partials, int *counters, qmm_bf16 *out,
                                        void *stream, int pdl);
int llm_cuda_op_attention_decode_splits(int64_t max_seq, int kv_heads, int sm_count);
/* The cluster-merged kernel (attention_decode_cluster.cu; no partials or counters) and its
 * splits a KV head on the current device (0: its clusters do not fit; sm_count 0: any). */
qmm_status llm_cuda_op_attention_decode_cluster(const qmm_bf16 *q, const qmm_bf16 *k,
                                                const qmm_bf16 *v, const qmm_bf16 *qw,
                                                const qmm_bf16 *kw, const float *cos_t,
                                                const float *sin_t, float eps, const int32_t *pos,
                                                int heads, int kv_heads, int hd, int64_t max_seq,
                                                int nsplit, qmm_bf16 *kc, qmm_bf16 *vc,
                                                qmm_bf16 *out, void *stream, int pdl);
int llm_cuda_op_attention_decode_cluster_splits(int kv_heads, int hd, int group, int sm_count);

/* Both argmax stages (pairs [llm_cuda_op_argmax_blocks(vocab)]). */
qmm_status llm_cuda_op_argmax(const qmm_bf16 *logits, int64_t vocab, float *pair_v, int *pair_i,
                              int32_t *tokens, int32_t *pos, int m, int32_t *err, void *stream,
                              int pdl);
int llm_cuda_op_argmax_blocks(int64_t vocab);

qmm_status llm_cuda_op_swiglu(const qmm_bf16 *gate, const qmm_bf16 *up, int64_t rows,
                              int64_t width, int64_t in_stride, qmm_bf16 *out, void *stream,
                              int pdl);
qmm_status llm_cuda_op_add_rmsnorm(float *x, const qmm_bf16 *add, const qmm_bf16 *w, int64_t n,
                                   float eps, int row0, int m, qmm_bf16 *h, void *stream, int pdl);
/* The tensor-parallel fused step's add (launch_add_norm_fold_f32): x += bf16(add), xg = bf16(x·w),
 * ss_out [m, n/16] = Σx² per 16 elements. */
qmm_status llm_cuda_op_add_norm_fold_f32(float *x, const float *add, const qmm_bf16 *w, int64_t n,
                                         int m, qmm_bf16 *xg, float *ss_out, void *stream, int pdl);

#ifdef __cplusplus
}
#endif

#endif
