/* The CPU reference forward of Qwen3: plain C over qmm_matmul_cpu, a bf16 KV cache, greedy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "llm/cpu_ops.h"
#include "llm/model.h"

/* Rows per forward; longer prompts run in chunks (attention reads the cache, so chunking does not
 * change what is computed, only how much scratch is needed). */
#define CPU_CHUNK 256

struct qmm_llm_cpu_session {
    const qmm_llm_model *m;
    int64_t max_seq, chunk, pos;
    int threads;
    float *x;                 /* [chunk, hidden] residual stream, fp32 */
    qmm_bf16 *h;              /* [chunk, max(hidden, q_dim)] normed activations / attention out */
    qmm_bf16 *q, *k, *v;      /* [chunk, q_dim], [chunk, kv_dim] x2 */
    qmm_bf16 *proj;           /* [chunk, hidden] o / down outputs */
    qmm_bf16 *gate, *up;      /* [chunk, inter]; gate is reused for the SwiGLU output */
    qmm_bf16 *kc, *vc;        /* [layers, kv_heads, max_seq, head_dim] */
    qmm_bf16 *logits;         /* [vocab] */
    float *logits_f;          /* [vocab] for generate */
    float *cos_t, *sin_t;     /* [max_seq, head_dim/2] */
    float *scores;            /* [max_seq] */
};

void qmm_llm_cpu_session_destroy(qmm_llm_cpu_session *s)
{
    if (!s) return;
    void *bufs[] = {s->x, s->h, s->q, s->k, s->v, s->proj, s->gate, s->up, s->kc, s->vc, s->logits, s->logits_f, s->cos_t, s->sin_t, s->scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(s);
}

/* malloc(a*b*c) with overflow checks. */
static void *alloc3(size_t a, size_t b, size_t c, int *fail)
{
    size_t n;
    if (!qmm_mul_size(a, b, &n) || !qmm_mul_size(n, c, &n)) {
        *fail = 1;
        return NULL;
    }
    void *p = malloc(n ? n : 1);
    if (!p) *fail = 1;
    return p;
}

qmm_status qmm_llm_cpu_session_create(const qmm_llm_model *m, int64_t max_seq, int threads,
                                      qmm_llm_cpu_session **out)
{
    if (!m || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_cpu_session_create: NULL argument");
    *out = NULL;
    const qmm_llm_config *c = &m->cfg;
    if (max_seq < 1 || max_seq > c->max_position_embeddings)
        return qmm_fail(QMM_ERR_RANGE, "max_seq = %lld must be in [1, max_position_embeddings = %lld]",
                        (long long)max_seq, (long long)c->max_position_embeddings);
    qmm_llm_cpu_session *s = calloc(1, sizeof *s);
    if (!s) return qmm_fail(QMM_ERR_NOMEM, "out of memory for the session");
    s->m = m;
    s->max_seq = max_seq;
    s->chunk = max_seq < CPU_CHUNK ? max_seq : CPU_CHUNK;
    s->threads = threads;
    size_t ch = (size_t)s->chunk, hid = (size_t)c->hidden_size;
    size_t qd = (size_t)(c->num_heads * c->head_dim), kvd = (size_t)(c->num_kv_heads * c->head_dim);
    size_t wide = hid > qd ? hid : qd;
    size_t cache = (size_t)c->num_layers * (size_t)c->num_kv_heads * (size_t)max_seq;
    int fail = 0;
    s->x = alloc3(ch, hid, sizeof(float), &fail);
    s->h = alloc3(ch, wide, 2, &fail);
    s->q = alloc3(ch, qd, 2, &fail);
    s->k = alloc3(ch, kvd, 2, &fail);
    s->v = alloc3(ch, kvd, 2, &fail);
    s->proj = alloc3(ch, hid, 2, &fail);
    s->gate = alloc3(ch, (size_t)c->intermediate_size, 2, &fail);
    s->up = alloc3(ch, (size_t)c->intermediate_size, 2, &fail);
    s->kc = alloc3(cache, (size_t)c->head_dim, 2, &fail);
    s->vc = alloc3(cache, (size_t)c->head_dim, 2, &fail);
    s->logits = alloc3((size_t)c->vocab_size, 1, 2, &fail);
    s->logits_f = alloc3((size_t)c->vocab_size, 1, sizeof(float), &fail);
    s->cos_t = alloc3((size_t)max_seq, (size_t)c->head_dim / 2, sizeof(float), &fail);
    s->sin_t = alloc3((size_t)max_seq, (size_t)c->head_dim / 2, sizeof(float), &fail);
    s->scores = alloc3((size_t)max_seq, 1, sizeof(float), &fail);
    if (fail) {
        qmm_llm_cpu_session_destroy(s);
        return qmm_fail(QMM_ERR_NOMEM, "out of memory for a CPU session of %lld positions",
                        (long long)max_seq);
    }
    llm_rope_table(c->rope_theta, c->head_dim, max_seq, s->cos_t, s->sin_t);
    *out = s;
    return QMM_OK;
}

qmm_status qmm_llm_cpu_reset(qmm_llm_cpu_session *s)
{
    if (!s) return qmm_fail(QMM_ERR_NULL, "session is NULL");
    s->pos = 0;
    return QMM_OK;
}

int64_t qmm_llm_cpu_position(const qmm_llm_cpu_session *s) { return s ? s->pos : 0; }

static qmm_status matmul(const qmm_llm_cpu_session *s, const qmm_bf16 *a, int64_t rows,
                         const qmm_w4 *w, qmm_bf16 *c)
{
    return qmm_matmul_cpu(a, rows, w, c, s->threads);
}

/* Attention of n new rows at positions p0.. over the cache of layer l; q [n, heads*hd] in,
 * out [n, heads*hd]. Query head h reads KV head h / (heads / kv_heads). */
static void attention(qmm_llm_cpu_session *s, int64_t l, int64_t n, int64_t p0, qmm_bf16 *out)
{
    const qmm_llm_config *c = &s->m->cfg;
    int64_t hd = c->head_dim, group = c->num_heads / c->num_kv_heads;
    for (int64_t r = 0; r < n; r++) {
        for (int64_t h = 0; h < c->num_heads; h++) {
            int64_t kvh = h / group;
            size_t base = ((size_t)l * (size_t)c->num_kv_heads + (size_t)kvh) * (size_t)s->max_seq *
                          (size_t)hd;
            llm_attend_row(s->q + (r * c->num_heads + h) * hd, s->kc + base, s->vc + base,
                           p0 + r + 1, hd, s->scores, out + (r * c->num_heads + h) * hd);
        }
    }
}

/* One chunk of n rows at positions p0..p0+n-1; logits of the last row when want_logits. */
static qmm_status forward(qmm_llm_cpu_session *s, const int32_t *ids, int64_t n, int64_t p0,
                          int want_logits)
{
    const qmm_llm_model *m = s->m;
    const qmm_llm_config *c = &m->cfg;
    int64_t H = c->hidden_size, hd = c->head_dim, half = hd / 2, I = c->intermediate_size;
    int64_t qd = c->num_heads * hd, kvd = c->num_kv_heads * hd;
    double eps = c->rms_norm_eps;
    qmm_status st;
    for (int64_t r = 0; r < n; r++)
        if ((st = qmm_dequantize_row_f32(&m->embed, ids[r], s->x + r * H))) return st;
    for (int64_t l = 0; l < c->num_layers; l++) {
        const llm_layer *L = &m->layers[l];
        for (int64_t r = 0; r < n; r++)
            llm_rmsnorm_row(s->x + r * H, L->norm[QMM_LLM_INPUT_NORM], H, eps, s->h + r * H);
        if ((st = matmul(s, s->h, n, &L->lin[QMM_LLM_Q], s->q)) ||
            (st = matmul(s, s->h, n, &L->lin[QMM_LLM_K], s->k)) ||
            (st = matmul(s, s->h, n, &L->lin[QMM_LLM_V], s->v)))
            return st;
        for (int64_t r = 0; r < n; r++) {
            int64_t p = p0 + r;
            const float *cr = s->cos_t + p * half, *sr = s->sin_t + p * half;
            for (int64_t h = 0; h < c->num_heads; h++) {
                qmm_bf16 *qh = s->q + r * qd + h * hd;
                llm_head_norm_rope(qh, L->norm[QMM_LLM_Q_NORM], hd, eps, cr, sr, qh);
            }
            for (int64_t h = 0; h < c->num_kv_heads; h++) {
                size_t at = (((size_t)l * (size_t)c->num_kv_heads + (size_t)h) * (size_t)s->max_seq +
                             (size_t)p) * (size_t)hd;
                llm_head_norm_rope(s->k + r * kvd + h * hd, L->norm[QMM_LLM_K_NORM], hd, eps, cr,
                                   sr, s->kc + at);
                memcpy(s->vc + at, s->v + r * kvd + h * hd, (size_t)hd * 2);
            }
        }
        attention(s, l, n, p0, s->h);
        if ((st = matmul(s, s->h, n, &L->lin[QMM_LLM_O], s->proj))) return st;
        for (int64_t r = 0; r < n; r++) llm_add_row(s->x + r * H, s->proj + r * H, H);
        for (int64_t r = 0; r < n; r++)
            llm_rmsnorm_row(s->x + r * H, L->norm[QMM_LLM_POST_ATTN_NORM], H, eps, s->h + r * H);
        if ((st = matmul(s, s->h, n, &L->lin[QMM_LLM_GATE], s->gate)) ||
            (st = matmul(s, s->h, n, &L->lin[QMM_LLM_UP], s->up)))
            return st;
        llm_swiglu(s->gate, s->up, n * I, s->gate);
        if ((st = matmul(s, s->gate, n, &L->lin[QMM_LLM_DOWN], s->proj))) return st;
        for (int64_t r = 0; r < n; r++) llm_add_row(s->x + r * H, s->proj + r * H, H);
    }
    if (want_logits) {
        llm_rmsnorm_row(s->x + (n - 1) * H, m->final_norm, H, eps, s->h);
        if ((st = matmul(s, s->h, 1, &m->lm_head, s->logits))) return st;
    }
    return QMM_OK;
}

qmm_status qmm_llm_cpu_prefill(qmm_llm_cpu_session *s, const int32_t *ids, int64_t n,
                               float *logits_out)
{
    if (!s || !ids) return qmm_fail(QMM_ERR_NULL, "qmm_llm_cpu_prefill: NULL argument");
    if (n < 1) return qmm_fail(QMM_ERR_ARG, "qmm_llm_cpu_prefill: n = %lld tokens", (long long)n);
    if (n > s->max_seq - s->pos)
        return qmm_fail(QMM_ERR_RANGE,
                        "%lld tokens at position %lld do not fit the context of %lld positions",
                        (long long)n, (long long)s->pos, (long long)s->max_seq);
    int64_t vocab = s->m->cfg.vocab_size;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return qmm_fail(QMM_ERR_RANGE, "token %lld is id %d, outside the vocabulary [0, %lld)",
                            (long long)i, ids[i], (long long)vocab);
    for (int64_t done = 0; done < n;) {
        int64_t rows = n - done < s->chunk ? n - done : s->chunk;
        qmm_status st = forward(s, ids + done, rows, s->pos, done + rows == n);
        if (st) return st;
        s->pos += rows;
        done += rows;
    }
    if (logits_out)
        for (int64_t i = 0; i < vocab; i++) logits_out[i] = qmm_bf16_to_f32(s->logits[i]);
    qmm_clear_error();
    return QMM_OK;
}

qmm_status qmm_llm_cpu_decode(qmm_llm_cpu_session *s, int32_t id, float *logits_out)
{
    return qmm_llm_cpu_prefill(s, &id, 1, logits_out);
}

qmm_status qmm_llm_cpu_generate(qmm_llm_cpu_session *s, const int32_t *ids, int64_t n,
                                int64_t max_new, int32_t *out, qmm_llm_timing *timing)
{
    if (!s || !ids || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_cpu_generate: NULL argument");
    if (n < 1 || max_new < 1)
        return qmm_fail(QMM_ERR_ARG, "generate needs n >= 1 and max_new >= 1 (got %lld, %lld)",
                        (long long)n, (long long)max_new);
    if (n > s->max_seq - s->pos || max_new - 1 > s->max_seq - s->pos - n)
        return qmm_fail(QMM_ERR_RANGE,
                        "%lld prompt + %lld new tokens at position %lld do not fit the context "
                        "of %lld positions", (long long)n, (long long)max_new, (long long)s->pos,
                        (long long)s->max_seq);
    double t0 = qmm_now_ms();
    qmm_status st = qmm_llm_cpu_prefill(s, ids, n, s->logits_f);
    if (!st) st = qmm_llm_argmax(s->logits_f, s->m->cfg.vocab_size, &out[0]);
    if (st) return st;
    double t1 = qmm_now_ms();
    for (int64_t i = 1; i < max_new; i++) {
        if ((st = qmm_llm_cpu_decode(s, out[i - 1], s->logits_f))) return st;
        if ((st = qmm_llm_argmax(s->logits_f, s->m->cfg.vocab_size, &out[i]))) return st;
    }
    double t2 = qmm_now_ms();
    if (timing) {
        timing->prompt_tokens = n;
        timing->new_tokens = max_new;
        timing->prefill_ms = t1 - t0;
        timing->decode_ms = t2 - t1;
    }
    return QMM_OK;
}
