/* The C entries of ops_entry.h: each forwards to its launcher on the default stream. */
#include "llm/cuda/ops_entry.h"
#include "llm/cuda/llm_kernels.cuh"
#include "cuda/kernels.h"

using namespace qmm_llm;

extern "C" int llm_op_embed(const qmm_cuda_weight *embed, const int32_t *tokens,
                            const int32_t *pos, int m, float *x, int32_t *err)
{
    return (int)launch_embed(embed, tokens, pos, m, x, err, 0);
}

extern "C" int llm_op_add_rmsnorm(float *x, const void *add, const void *w, int64_t n, float eps,
                                  int m, void *h)
{
    return (int)launch_add_rmsnorm(x, (const bf16 *)add, (const bf16 *)w, n, eps, 0, m, (bf16 *)h, 0);
}

extern "C" int llm_op_add_rmsnorm_f32(float *x, const float *add, const void *w, int64_t n,
                                      float eps, int m, void *h)
{
    return (int)launch_add_rmsnorm_f32(x, add, (const bf16 *)w, n, eps, 0, m, (bf16 *)h, 0);
}

extern "C" int llm_op_qk_norm_rope(int pdl, void *q, const void *k, const void *v,
                                   int64_t q_stride, int64_t kv_stride, const void *qw,
                                   const void *kw, const float *cos_t, const float *sin_t,
                                   const int32_t *pos, int m, int heads, int kv_heads, int hd,
                                   float eps, int64_t max_seq, void *kc, void *vc)
{
    const llm_launch ln = {pdl, nullptr};
    return (int)launch_qk_norm_rope((bf16 *)q, (const bf16 *)k, (const bf16 *)v, q_stride, kv_stride,
                                    (const bf16 *)qw, (const bf16 *)kw, cos_t, sin_t, pos, m, heads,
                                    kv_heads, hd, eps, max_seq, (bf16 *)kc, (bf16 *)vc, 0, &ln);
}

extern "C" int llm_op_attention_prefill(int mma, const void *q, int64_t q_stride, const void *kc,
                                        const void *vc, const int32_t *pos, int m, int heads,
                                        int kv_heads, int hd, int64_t max_seq, void *out)
{
    const llm_launch ln = {mma == 2 || mma == 4 || mma == 6, nullptr};
    if (mma >= 3)
        return (int)launch_attention_prefill_wgmma((const bf16 *)q, q_stride, (const bf16 *)kc,
                                                   (const bf16 *)vc, pos, m, heads, kv_heads, hd,
                                                   max_seq, (bf16 *)out, 0, &ln, mma >= 5);
    if (mma)
        return (int)launch_attention_prefill_mma((const bf16 *)q, q_stride, (const bf16 *)kc,
                                                 (const bf16 *)vc, pos, m, heads, kv_heads, hd,
                                                 max_seq, (bf16 *)out, 0, &ln);
    return (int)launch_attention_prefill((const bf16 *)q, q_stride, (const bf16 *)kc,
                                         (const bf16 *)vc, pos, m, heads, kv_heads, hd, max_seq,
                                         (bf16 *)out, 0);
}

extern "C" int llm_op_attention_prefill_wgmma_supported(int hd)
{
    return attention_prefill_wgmma_supported(hd);
}

extern "C" int llm_op_attention_decode(const void *q, const void *kc, const void *vc,
                                       const int32_t *pos, int heads, int kv_heads, int hd,
                                       int64_t max_seq, int nsplit, float *partials, void *out)
{
    return (int)launch_attention_decode((const bf16 *)q, (const bf16 *)kc, (const bf16 *)vc, pos,
                                        heads, kv_heads, hd, max_seq, nsplit, partials,
                                        (bf16 *)out, 0);
}

extern "C" int llm_op_swiglu(const void *gate, const void *up, int64_t rows, int64_t width,
                             int64_t in_stride, void *out)
{
    return (int)launch_swiglu((const bf16 *)gate, (const bf16 *)up, rows, width, in_stride, 0,
                              (bf16 *)out, 0);
}

extern "C" int llm_op_argmax_advance(const void *logits, int64_t vocab, int32_t *tokens,
                                     int32_t *pos, int m, int32_t *err)
{
    return (int)launch_argmax_advance((const bf16 *)logits, vocab, tokens, pos, m, err, 0);
}

extern "C" int llm_op_attention_decode_cluster(const void *q, const void *k, const void *v,
                                               const void *qw, const void *kw, const float *cos_t,
                                               const float *sin_t, float eps, const int32_t *pos,
                                               int heads, int kv_heads, int hd, int64_t max_seq,
                                               int nsplit, void *kc, void *vc, void *out)
{
    return (int)launch_attention_decode_cluster(
        (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, (const bf16 *)qw, (const bf16 *)kw,
        cos_t, sin_t, eps, pos, heads, kv_heads, hd, max_seq, nsplit, (bf16 *)kc, (bf16 *)vc,
        (bf16 *)out, 0);
}

extern "C" int llm_op_attention_decode_cluster_splits(int kv_heads, int hd, int group)
{
    return attention_decode_cluster_splits(kv_heads, hd, group, 0);
}

extern "C" int llm_op_attention_decode_fused(const void *q, const void *k, const void *v,
                                             const void *qw, const void *kw, const float *cos_t,
                                             const float *sin_t, float eps, const int32_t *pos,
                                             int heads, int kv_heads, int hd, int64_t max_seq,
                                             int nsplit, void *kc, void *vc, float *partials,
                                             int *counters, void *out)
{
    return (int)launch_attention_decode_fused(
        (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, (const bf16 *)qw, (const bf16 *)kw,
        cos_t, sin_t, eps, pos, heads, kv_heads, hd, max_seq, nsplit, (bf16 *)kc, (bf16 *)vc,
        partials, counters, (bf16 *)out, 0);
}

extern "C" int llm_op_argmax_blocks(int64_t vocab) { return argmax_blocks(vocab); }

extern "C" int llm_op_argmax_two_stage(const void *logits, int64_t vocab, float *pair_v,
                                       int *pair_i, int32_t *tokens, int32_t *pos, int m,
                                       int32_t *err)
{
    cudaError_t e = launch_argmax_partial((const bf16 *)logits, vocab, pair_v, pair_i, 0);
    if (e != cudaSuccess) return (int)e;
    return (int)launch_argmax_finish(pair_v, pair_i, argmax_blocks(vocab), tokens, pos, m, err, 0);
}

/* The o weight's MatvecArgs with the residual epilogue (one row). */
static qmm::MatvecArgs attention_o_args(const qmm_cuda_weight *w, float *x, const void *gamma, void *xg,
                                        float *ss_out)
{
    const qmm::DevWeight &d = qmm::weight_dev(w);
    qmm::MatvecArgs p = qmm::matvec_args(d);
    p.m = 1;
    p.epi = qmm::MV_EPI_RESIDUAL;
    p.ldc = d.n;
    p.x = x;
    p.gamma = (const bf16 *)gamma;
    p.xg = (bf16 *)xg;
    p.ss_out = ss_out;
    p.ss_out_blocks = (int)((d.n + 15) / 16);
    return p;
}

extern "C" int llm_op_attention_o_fused_supported(const qmm_cuda_weight *w, int heads, int kv_heads, int hd)
{
    return attention_o_fused_supported(hd, heads, kv_heads, attention_o_args(w, NULL, NULL, NULL, NULL));
}

extern "C" int llm_op_attention_o_fused(const qmm_cuda_weight *w, const void *q, const void *k, const void *v,
                                        const void *qw, const void *kw, const float *cos_t,
                                        const float *sin_t, float eps, const int32_t *pos, int heads,
                                        int kv_heads, int hd, int64_t max_seq, void *kc, void *vc, float *x,
                                        const void *gamma, void *xg, float *ss_out)
{
    return (int)launch_attention_o_fused((const bf16 *)q, (const bf16 *)k, (const bf16 *)v, (const bf16 *)qw,
                                         (const bf16 *)kw, cos_t, sin_t, eps, pos, heads, kv_heads, hd, max_seq,
                                         (bf16 *)kc, (bf16 *)vc, attention_o_args(w, x, gamma, xg, ss_out), 0);
}

extern "C" int llm_op_matvec_fused(const qmm_cuda_ctx *ctx, const qmm_cuda_weight *w, int m, int epi,
                                   const void *a, int64_t lda, void *c, int64_t ldc, float *x,
                                   const void *gamma, void *xg, float *ss_out, const float *ss_in,
                                   int ss_blocks, int norm_dim, float eps, int shape)
{
    const qmm::DevWeight &d = qmm::weight_dev(w);
    qmm::MatvecArgs p = qmm::matvec_args(d);
    p.a = (const bf16 *)a;
    p.lda = lda;
    p.m = m;
    p.epi = epi;
    p.c = (bf16 *)c;
    p.ldc = ldc;
    p.x = x;
    p.gamma = (const bf16 *)gamma;
    p.xg = (bf16 *)xg;
    p.ss_out = ss_out;
    p.ss_out_blocks = (int)((d.n + 15) / 16);
    p.ss_in = ss_in;
    p.ss_blocks = ss_blocks;
    p.norm_dim = norm_dim;
    p.eps = eps;
    p.tiles_per_cta = shape % 512 / 16;
    p.cluster = shape % 16;
    p.warps = shape & 512 ? 4 : 0; /* + 512: CTAs of 4 warps */
    p.rounds = shape & 1024 ? 1 : 2;  /* + 1024: the staging in rounds (M >= 2), else off */
    p.pre_wait = shape & 2048 ? 3 : 0; /* + 2048: 3 groups a warp before the wait (decode gate|up) */
    return (int)qmm::launch_matvec_ex(p, qmm::matvec_scratch(ctx), false, 0);
}
