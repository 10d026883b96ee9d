/* C entry points of the decode-step kernels (decode_ops.h): thin wrappers over the launchers. */
#include "internal.h"
#include "llm/cuda/decode_ops.h"
#include "llm/cuda/llm_kernels.cuh"

using namespace qmm_llm;

static qmm_status done(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return QMM_OK;
    cudaGetLastError();
    return qmm_fail(QMM_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}

#define B(p) reinterpret_cast<const bf16 *>(p)
#define BW(p) reinterpret_cast<bf16 *>(p)

extern "C" qmm_status llm_cuda_op_attention_decode(
    const qmm_bf16 *q, const qmm_bf16 *k, const qmm_bf16 *v, const qmm_bf16 *qw, const qmm_bf16 *kw,
    const float *cos_t, const float *sin_t, float eps, const int32_t *pos, int heads, int kv_heads,
    int hd, int64_t max_seq, int nsplit, qmm_bf16 *kc, qmm_bf16 *vc, float *partials,
    int *counters, qmm_bf16 *out, void *stream, int pdl)
{
    llm_launch ln = {pdl, nullptr};
    return done(launch_attention_decode_fused(B(q), B(k), B(v), B(qw), B(kw), cos_t, sin_t, eps, pos,
                                              heads, kv_heads, hd, max_seq, nsplit, BW(kc), BW(vc),
                                              partials, counters, BW(out),
                                              (cudaStream_t)stream, &ln),
                "fused decode attention");
}

extern "C" int llm_cuda_op_attention_decode_splits(int64_t max_seq, int kv_heads, int sm_count)
{
    return attention_decode_splits(max_seq, kv_heads, sm_count);
}

extern "C" qmm_status llm_cuda_op_attention_decode_cluster(
    const qmm_bf16 *q, const qmm_bf16 *k, const qmm_bf16 *v, const qmm_bf16 *qw, const qmm_bf16 *kw,
    const float *cos_t, const float *sin_t, float eps, const int32_t *pos, int heads, int kv_heads,
    int hd, int64_t max_seq, int nsplit, qmm_bf16 *kc, qmm_bf16 *vc, qmm_bf16 *out, void *stream,
    int pdl)
{
    llm_launch ln = {pdl, nullptr};
    return done(launch_attention_decode_cluster(B(q), B(k), B(v), B(qw), B(kw), cos_t, sin_t, eps,
                                                pos, heads, kv_heads, hd, max_seq, nsplit, BW(kc),
                                                BW(vc), BW(out), (cudaStream_t)stream, &ln),
                "cluster decode attention");
}

extern "C" int llm_cuda_op_attention_decode_cluster_splits(int kv_heads, int hd, int group,
                                                           int sm_count)
{
    return attention_decode_cluster_splits(kv_heads, hd, group, sm_count);
}

extern "C" qmm_status llm_cuda_op_argmax(const qmm_bf16 *logits, int64_t vocab, float *pair_v,
                                         int *pair_i, int32_t *tokens, int32_t *pos, int m,
                                         int32_t *err, void *stream, int pdl)
{
    llm_launch ln = {pdl, nullptr};
    qmm_status st = done(launch_argmax_partial(B(logits), vocab, pair_v, pair_i,
                                               (cudaStream_t)stream, &ln),
                         "argmax stage 1");
    if (st) return st;
    return done(launch_argmax_finish(pair_v, pair_i, argmax_blocks(vocab), tokens, pos, m, err,
                                     (cudaStream_t)stream, &ln),
                "argmax stage 2");
}

extern "C" int llm_cuda_op_argmax_blocks(int64_t vocab) { return argmax_blocks(vocab); }

extern "C" qmm_status llm_cuda_op_swiglu(const qmm_bf16 *gate, const qmm_bf16 *up, int64_t rows,
                                         int64_t width, int64_t in_stride, qmm_bf16 *out,
                                         void *stream, int pdl)
{
    llm_launch ln = {pdl, nullptr};
    return done(launch_swiglu(B(gate), B(up), rows, width, in_stride, 0, BW(out),
                              (cudaStream_t)stream, &ln),
                "swiglu");
}

extern "C" qmm_status llm_cuda_op_add_rmsnorm(float *x, const qmm_bf16 *add, const qmm_bf16 *w,
                                              int64_t n, float eps, int row0, int m, qmm_bf16 *h,
                                              void *stream, int pdl)
{
    llm_launch ln = {pdl, nullptr};
    return done(launch_add_rmsnorm(x, B(add), B(w), n, eps, row0, m, BW(h), (cudaStream_t)stream,
                                   &ln),
                "add + rmsnorm");
}

extern "C" qmm_status llm_cuda_op_add_norm_fold_f32(float *x, const float *add, const qmm_bf16 *w,
                                                    int64_t n, int m, qmm_bf16 *xg, float *ss_out,
                                                    void *stream, int pdl)
{
    llm_launch ln = {pdl, nullptr};
    return done(launch_add_norm_fold_f32(x, add, B(w), n, m, BW(xg), ss_out, (cudaStream_t)stream,
                                         &ln),
                "add + folded norm");
}
