/* Greedy sampling and throughput arithmetic shared by both backends. */
#include <math.h>

#include "internal.h"

qmm_status qmm_llm_argmax(const float *x, int64_t n, int32_t *out)
{
    if (!x || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_argmax: NULL argument");
    if (n < 1 || n > INT32_MAX) return qmm_fail(QMM_ERR_ARG, "qmm_llm_argmax: n = %lld", (long long)n);
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
    if (best < 0) return qmm_fail(QMM_ERR_RANGE, "every one of the %lld logits is NaN", (long long)n);
    *out = (int32_t)best;
    return QMM_OK;
}

double qmm_llm_prefill_tok_s(const qmm_llm_timing *t)
{
    return t && t->prefill_ms > 0 ? (double)t->prompt_tokens / (t->prefill_ms * 1e-3) : 0.0;
}

double qmm_llm_decode_tok_s(const qmm_llm_timing *t)
{
    return t && t->new_tokens > 1 && t->decode_ms > 0
               ? (double)(t->new_tokens - 1) / (t->decode_ms * 1e-3)
               : 0.0;
}
