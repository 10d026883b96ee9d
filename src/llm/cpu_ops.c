/* CPU operators of the Qwen3 forward (see cpu_ops.h for the numerics). */
#include "llm/cpu_ops.h"

#include <math.h>

void llm_rope_table(double theta, int64_t head_dim, int64_t max_seq, float *cos_t, float *sin_t)
{
    int64_t half = head_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        double inv = pow(theta, -(double)(2 * i) / (double)head_dim);
        for (int64_t p = 0; p < max_seq; p++) {
            double a = (double)p * inv;
            cos_t[p * half + i] = (float)cos(a);
            sin_t[p * half + i] = (float)sin(a);
        }
    }
}

void llm_rmsnorm_row(const float *x, const qmm_bf16 *w, int64_t n, double eps, qmm_bf16 *out)
{
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + (float)eps);
    for (int64_t i = 0; i < n; i++) out[i] = qmm_f32_to_bf16(x[i] * inv * qmm_bf16_to_f32(w[i]));
}

void llm_head_norm_rope(const qmm_bf16 *in, const qmm_bf16 *w, int64_t hd, double eps,
                        const float *cos_r, const float *sin_r, qmm_bf16 *out)
{
    float y[1024]; /* head_dim <= 1024 (config validation) */
    float ss = 0.0f;
    for (int64_t i = 0; i < hd; i++) {
        y[i] = qmm_bf16_to_f32(in[i]);
        ss += y[i] * y[i];
    }
    float inv = 1.0f / sqrtf(ss / (float)hd + (float)eps);
    for (int64_t i = 0; i < hd; i++) y[i] = y[i] * inv * qmm_bf16_to_f32(w[i]);
    int64_t half = hd / 2;
    for (int64_t i = 0; i < half; i++) {
        float a = y[i], b = y[i + half], c = cos_r[i], s = sin_r[i];
        out[i] = qmm_f32_to_bf16(a * c - b * s);
        out[i + half] = qmm_f32_to_bf16(b * c + a * s);
    }
}

void llm_attend_row(const qmm_bf16 *q, const qmm_bf16 *k, const qmm_bf16 *v, int64_t len,
                    int64_t hd, float *scores, qmm_bf16 *out)
{
    float qf[1024], acc[1024];
    float scale = 1.0f / sqrtf((float)hd);
    for (int64_t d = 0; d < hd; d++) {
        qf[d] = qmm_bf16_to_f32(q[d]);
        acc[d] = 0.0f;
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < len; j++) {
        const qmm_bf16 *kj = k + j * hd;
        float s = 0.0f;
        for (int64_t d = 0; d < hd; d++) s += qf[d] * qmm_bf16_to_f32(kj[d]);
        scores[j] = s * scale;
        if (scores[j] > mx) mx = scores[j];
    }
    float l = 0.0f;
    for (int64_t j = 0; j < len; j++) {
        float p = expf(scores[j] - mx);
        l += p;
        const qmm_bf16 *vj = v + j * hd;
        for (int64_t d = 0; d < hd; d++) acc[d] += p * qmm_bf16_to_f32(vj[d]);
    }
    for (int64_t d = 0; d < hd; d++) out[d] = qmm_f32_to_bf16(acc[d] / l);
}

void llm_swiglu(const qmm_bf16 *gate, const qmm_bf16 *up, int64_t n, qmm_bf16 *out)
{
    for (int64_t i = 0; i < n; i++) {
        float g = qmm_bf16_to_f32(gate[i]), u = qmm_bf16_to_f32(up[i]);
        out[i] = qmm_f32_to_bf16(g / (1.0f + expf(-g)) * u);
    }
}

void llm_add_row(float *x, const qmm_bf16 *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] += qmm_bf16_to_f32(y[i]);
}
