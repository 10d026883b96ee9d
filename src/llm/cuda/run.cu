/* The CUDA session's calls: prefill, decode, greedy generation (decode chained on the device) and
 * the per-kernel profile. */
#include <stdlib.h>
#include <string.h>

#include "llm/cuda/session.h"

/* Rows of the next chunk when n rows are left. */
static int chunk_rows(const qmm_llm_cuda_session *s, int64_t left)
{
    return (int)(left < s->chunk ? left : s->chunk);
}

static qmm_status check_ids(const qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                            int64_t extra)
{
    if (n < 1) return qmm_fail(QMM_ERR_ARG, "n = %lld tokens", (long long)n);
    if (n > s->max_seq - s->pos || extra > s->max_seq - s->pos - n)
        return qmm_fail(QMM_ERR_RANGE,
                        "%lld tokens (+%lld generated) at position %lld do not fit the context of "
                        "%lld positions", (long long)n, (long long)extra, (long long)s->pos,
                        (long long)s->max_seq);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->cfg.vocab_size)
            return qmm_fail(QMM_ERR_RANGE, "token %lld is id %d, outside the vocabulary [0, %lld)",
                            (long long)i, ids[i], (long long)s->cfg.vocab_size);
    return QMM_OK;
}

/* ids -> the device token history at the current position (stream-ordered). */
static qmm_status put_ids(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n)
{
    memcpy(s->h_tokens, ids, (size_t)n * 4);
    QMM_CUDA_TRY(cudaMemcpyAsync(s->d_tokens + s->pos, s->h_tokens, (size_t)n * 4,
                                 cudaMemcpyHostToDevice, s->stream));
    return QMM_OK;
}

/* The prefill forwards of n tokens already in the history at s->pos (chunked), ending with the
 * argmax. */
static qmm_status enqueue_prefill(qmm_llm_cuda_session *s, int64_t n)
{
    for (int64_t done = 0; done < n;) {
        int rows = chunk_rows(s, n - done);
        qmm_status st = llm_cuda_run_forward(s, rows, done + rows == n, s->pos + done);
        if (st) return st;
        done += rows;
    }
    return QMM_OK;
}

/* After a forward: wait, check the device error flag, hand out logits / the next token. */
static qmm_status finish(qmm_llm_cuda_session *s, float *logits_out, int32_t *next_out)
{
    int32_t err = 0;
    QMM_CUDA_TRY(cudaMemcpyAsync(&s->h_tokens[0], s->d_err, 4, cudaMemcpyDeviceToHost, s->stream));
    if (next_out)
        QMM_CUDA_TRY(cudaMemcpyAsync(&s->h_tokens[1], s->d_tokens + s->pos, 4,
                                     cudaMemcpyDeviceToHost, s->stream));
    if (logits_out)
        QMM_CUDA_TRY(cudaMemcpyAsync(s->h_logits, s->logits, (size_t)s->cfg.vocab_size * 2,
                                     cudaMemcpyDeviceToHost, s->stream));
    qmm_status st = llm_sync(s);
    if (st) return st;
    err = s->h_tokens[0];
    if (err)
        return qmm_fail(QMM_ERR_RANGE, err == 2 ? "every logit was NaN (the argmax had no candidate)"
                                                : "a token id outside the vocabulary reached the "
                                                  "embedding");
    if (next_out) *next_out = s->h_tokens[1];
    if (logits_out)
        for (int64_t i = 0; i < s->cfg.vocab_size; i++)
            logits_out[i] = qmm_bf16_to_f32(((const qmm_bf16 *)s->h_logits)[i]);
    return QMM_OK;
}

extern "C" qmm_status qmm_llm_cuda_prefill(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                           float *logits_out, int32_t *next_out)
{
    if (!s || !ids) return qmm_fail(QMM_ERR_NULL, "qmm_llm_cuda_prefill: NULL argument");
    qmm_status st = check_ids(s, ids, n, 0);
    if (st) return st;
    QMM_CUDA_TRY(cudaSetDevice(s->device));
    if ((st = put_ids(s, ids, n)) || (st = enqueue_prefill(s, n))) return st;
    s->pos += n;
    st = finish(s, logits_out, next_out);
    if (!st) qmm_clear_error();
    return st;
}

extern "C" qmm_status qmm_llm_cuda_decode(qmm_llm_cuda_session *s, int32_t id, float *logits_out,
                                          int32_t *next_out)
{
    if (!s) return qmm_fail(QMM_ERR_NULL, "qmm_llm_cuda_decode: NULL argument");
    qmm_status st = check_ids(s, &id, 1, 0);
    if (st) return st;
    QMM_CUDA_TRY(cudaSetDevice(s->device));
    if ((st = put_ids(s, &id, 1)) || (st = llm_cuda_run_forward(s, 1, 1, s->pos))) return st;
    s->pos += 1;
    st = finish(s, logits_out, next_out);
    if (!st) qmm_clear_error();
    return st;
}

extern "C" qmm_status qmm_llm_cuda_generate(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                            int64_t max_new, int32_t *out, qmm_llm_timing *timing)
{
    if (!s || !ids || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_cuda_generate: NULL argument");
    if (max_new < 1) return qmm_fail(QMM_ERR_ARG, "max_new = %lld", (long long)max_new);
    qmm_status st = check_ids(s, ids, n, max_new - 1);
    if (st) return st;
    QMM_CUDA_TRY(cudaSetDevice(s->device));
    int64_t p0 = s->pos;
    if ((st = put_ids(s, ids, n))) return st;
    QMM_CUDA_TRY(cudaEventRecord(s->ev[0], s->stream));
    if ((st = enqueue_prefill(s, n))) return st;
    QMM_CUDA_TRY(cudaEventRecord(s->ev[1], s->stream));
    /* each step's argmax wrote the next input into the history: no host round trip, except
     * under tensor parallelism every 32 steps: a lost peer stalls the stream, and once the
     * launch queue is full cudaGraphLaunch would block the host with no timeout */
    for (int64_t i = 1; i < max_new; i++) {
        /* s->pos moves only after the loop: step i runs at p0 + n + i - 1 */
        if ((st = llm_cuda_run_forward(s, 1, 1, p0 + n + i - 1))) return st;
        if (s->tp && i % 32 == 0 && (st = llm_sync(s))) return st;
    }
    QMM_CUDA_TRY(cudaEventRecord(s->ev[2], s->stream));
    s->pos = p0 + n + max_new - 1;
    QMM_CUDA_TRY(cudaMemcpyAsync(s->h_tokens, s->d_tokens + p0 + n, (size_t)max_new * 4,
                                 cudaMemcpyDeviceToHost, s->stream));
    if ((st = llm_sync(s))) return st;
    memcpy(out, s->h_tokens, (size_t)max_new * 4);
    if ((st = finish(s, NULL, NULL))) return st;
    if (timing) {
        float a = 0, b = 0;
        QMM_CUDA_TRY(cudaEventElapsedTime(&a, s->ev[0], s->ev[1]));
        QMM_CUDA_TRY(cudaEventElapsedTime(&b, s->ev[1], s->ev[2]));
        timing->prompt_tokens = n;
        timing->new_tokens = max_new;
        timing->prefill_ms = a;
        timing->decode_ms = max_new > 1 ? b : 0.0;
    }
    qmm_clear_error();
    return QMM_OK;
}

/* Charge each gap between marks to the name of the mark that ends it. */
static qmm_status collect(llm_prof *p, qmm_llm_profile *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 1; i < p->count; i++) {
        float ms = 0;
        QMM_CUDA_TRY(cudaEventElapsedTime(&ms, p->ev[i - 1], p->ev[i]));
        int at = 0;
        while (at < out->count && strcmp(out->name[at], p->name[i])) at++;
        if (at == out->count) {
            if (out->count == QMM_LLM_PROFILE_MAX) continue;
            out->name[out->count++] = p->name[i];
        }
        out->ms[at] += ms;
        out->launches[at]++;
        out->total_ms += ms;
    }
    return QMM_OK;
}

extern "C" qmm_status qmm_llm_cuda_profile(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                           qmm_llm_profile *prefill, qmm_llm_profile *decode)
{
    if (!s || !ids) return qmm_fail(QMM_ERR_NULL, "qmm_llm_cuda_profile: NULL argument");
    if (n > s->chunk)
        return qmm_fail(QMM_ERR_RANGE, "profiling runs one forward: n = %lld exceeds the chunk of "
                        "%lld rows", (long long)n, (long long)s->chunk);
    qmm_status st = qmm_llm_cuda_reset(s);
    if (st) return st;
    if ((st = check_ids(s, ids, n, 1))) return st;
    llm_prof *p = (llm_prof *)calloc(1, sizeof *p);
    if (!p) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    int made = 0;
    for (; made < LLM_PROF_EVENTS && !st; made++)
        if (cudaEventCreate(&p->ev[made]) != cudaSuccess)
            st = qmm_fail(QMM_ERR_CUDA, "cudaEventCreate failed");
    if (!st) st = put_ids(s, ids, n);
    if (!st) st = llm_cuda_forward(s, (int)n, 1, p);
    if (!st) st = llm_sync(s); /* the profiled prefill */
    if (!st && prefill) st = collect(p, prefill);
    s->pos += n;
    p->count = 0;
    if (!st) st = llm_cuda_forward(s, 1, 1, p);
    if (!st) st = llm_sync(s); /* the profiled decode step */
    if (!st && decode) st = collect(p, decode);
    for (int i = 0; i < made; i++)
        if (p->ev[i]) cudaEventDestroy(p->ev[i]);
    free(p);
    qmm_status rs = qmm_llm_cuda_reset(s);
    return st ? st : rs;
}

/* The helpers above for graph_profile.cu (session.h). */
qmm_status llm_check_ids(const qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                         int64_t extra)
{
    return check_ids(s, ids, n, extra);
}

qmm_status llm_put_ids(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n)
{
    return put_ids(s, ids, n);
}

qmm_status llm_enqueue_prefill(qmm_llm_cuda_session *s, int64_t n) { return enqueue_prefill(s, n); }
