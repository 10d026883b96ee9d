/* The non-matmul operators of the Qwen3 forward on the CPU: the reference semantics the CUDA
 * kernels must match (fp32 math, bf16 where the activation is stored). */
#ifndef QMM_LLM_CPU_OPS_H
#define QMM_LLM_CPU_OPS_H

#include <stdint.h>

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cos_t, sin_t are [max_seq, head_dim/2]: angle(pos, i) = pos * theta^(-2i/head_dim), computed in
 * double and rounded to float once, so every backend rotates by the same numbers. */
void llm_rope_table(double theta, int64_t head_dim, int64_t max_seq, float *cos_t, float *sin_t);

/* out[n] = bf16(x * w / sqrt(mean(x^2) + eps)); x is fp32 (the residual stream). */
void llm_rmsnorm_row(const float *x, const qmm_bf16 *w, int64_t n, double eps, qmm_bf16 *out);

/* One head vector in[hd] (bf16, a q or k projection output): RMSNorm with w[hd], then RoPE with
 * the table rows cos_r, sin_r [hd/2] (x[i], x[i+hd/2] rotate together), rounded once to bf16.
 * in and out may alias. */
void llm_head_norm_rope(const qmm_bf16 *in, const qmm_bf16 *w, int64_t hd, double eps,
                        const float *cos_r, const float *sin_r, qmm_bf16 *out);

/* Attention of one query q[hd] over len cached positions k[len, hd], v[len, hd]:
 * softmax(q·k / sqrt(hd)) · v in fp32; scores[len] is scratch. out[hd] bf16. */
void llm_attend_row(const qmm_bf16 *q, const qmm_bf16 *k, const qmm_bf16 *v, int64_t len,
                    int64_t hd, float *scores, qmm_bf16 *out);

/* out[n] = bf16(silu(gate) * up), silu(g) = g / (1 + exp(-g)), in fp32. */
void llm_swiglu(const qmm_bf16 *gate, const qmm_bf16 *up, int64_t n, qmm_bf16 *out);

/* x[n] += y[n] (y bf16, x fp32). */
void llm_add_row(float *x, const qmm_bf16 *y, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
