/* Sampling: temperature, top-k, top-p, min-p (in HF transformers' order) and a seeded draw.
 * The kept set and its probabilities come from one function, so the sampler draws from exactly
 * the distribution qmm_sampling_probs reports. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct qmm_sampler {
    qmm_sampling s;
    int64_t n;
    uint64_t rng;
    int64_t *idx;
    double *p;
};

static qmm_status check_params(const qmm_sampling *s)
{
    if (!(s->temperature >= 0 && s->temperature < 1e6))
        return qmm_fail(QMM_ERR_ARG, "temperature %g: must be >= 0 (0 = greedy)", s->temperature);
    if (s->top_k < 0) return qmm_fail(QMM_ERR_ARG, "top-k %lld: must be >= 0 (0 = off)",
                                      (long long)s->top_k);
    if (!(s->top_p > 0 && s->top_p <= 1))
        return qmm_fail(QMM_ERR_ARG, "top-p %g: must be in (0, 1] (1 = off)", s->top_p);
    if (!(s->min_p >= 0 && s->min_p <= 1))
        return qmm_fail(QMM_ERR_ARG, "min-p %g: must be in [0, 1] (0 = off)", s->min_p);
    return QMM_OK;
}

/* Sorted by probability, descending; ties: the lower id first. */
static int by_prob(const void *a, const void *b, void *ctx)
{
    const double *p = ctx;
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    double px = p[x], py = p[y];
    return px != py ? (px < py ? 1 : -1) : (x > y) - (x < y);
}

/* The k-th largest of p[n] (k <= n), through a min-heap of the k largest seen. */
static double kth_largest(const double *p, int64_t n, int64_t k, double *heap)
{
    int64_t h = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = p[i];
        if (h == k && v <= heap[0]) continue;
        if (h < k) {
            int64_t j = h++;
            while (j > 0 && heap[(j - 1) / 2] > v) { heap[j] = heap[(j - 1) / 2]; j = (j - 1) / 2; }
            heap[j] = v;
        } else {
            int64_t j = 0;
            for (;;) {
                int64_t c = 2 * j + 1;
                if (c >= h) break;
                if (c + 1 < h && heap[c + 1] < heap[c]) c++;
                if (heap[c] >= v) break;
                heap[j] = heap[c];
                j = c;
            }
            heap[j] = v;
        }
    }
    return heap[0];
}

/* The kept tokens idx[0..*kept) (most likely first when a top-p or min-p cut needs the order)
 * and their probabilities, renormalized, in
 * pk[0..*kept). p[n] is scratch (n doubles), idx has room for n; heap room for top_k doubles. */
static qmm_status kept_set(const float *logits, int64_t n, const qmm_sampling *s, double *p,
                           int64_t *idx, double *heap, double *pk, int64_t *kept)
{
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
    if (best < 0) return qmm_fail(QMM_ERR_RANGE, "every one of the %lld logits is NaN", (long long)n);
    if (s->temperature == 0 || isinf(logits[best])) { /* greedy (or one infinite logit wins) */
        idx[0] = best;
        pk[0] = 1;
        *kept = 1;
        return QMM_OK;
    }
    double mx = logits[best], inv_t = 1.0 / s->temperature;
    for (int64_t i = 0; i < n; i++)
        p[i] = isnan(logits[i]) ? 0.0 : exp(((double)logits[i] - mx) * inv_t);
    double thr = 0; /* top-k: HF keeps every token at least as likely as the k-th */
    if (s->top_k > 0 && s->top_k < n) thr = kth_largest(p, n, s->top_k, heap);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (p[i] > 0 && p[i] >= thr) idx[m++] = i;
    /* the order matters only to the cuts: plain temperature sampling skips the sort (152k ids) */
    int cuts = s->top_p < 1 || s->min_p > 0;
    if (cuts) qsort_r(idx, (size_t)m, sizeof *idx, by_prob, p);
    double z = 0;
    for (int64_t i = 0; i < m; i++) z += p[idx[i]];
    if (s->top_p < 1) { /* keep while the mass before a token is below top_p (at least one) */
        double before = 0;
        int64_t k = 0;
        while (k < m && (k == 0 || before < s->top_p * z)) before += p[idx[k++]];
        m = k;
    }
    if (s->min_p > 0) {
        double floor_p = s->min_p * p[idx[0]];
        int64_t k = 1;
        while (k < m && p[idx[k]] >= floor_p) k++;
        m = k;
    }
    z = 0;
    for (int64_t i = 0; i < m; i++) z += p[idx[i]];
    for (int64_t i = 0; i < m; i++) pk[i] = p[idx[i]] / z;
    *kept = m;
    return QMM_OK;
}

qmm_status qmm_sampling_probs(const float *logits, int64_t n, const qmm_sampling *s, float *probs)
{
    if (!logits || !s || !probs) return qmm_fail(QMM_ERR_NULL, "qmm_sampling_probs: NULL argument");
    if (n < 1 || n > INT32_MAX) return qmm_fail(QMM_ERR_ARG, "qmm_sampling_probs: n = %lld", (long long)n);
    qmm_status st = check_params(s);
    if (st) return st;
    double *p = malloc((size_t)n * sizeof *p), *pk = malloc((size_t)n * sizeof *pk);
    int64_t *idx = malloc((size_t)n * sizeof *idx), kept = 0;
    if (!p || !pk || !idx) st = qmm_fail(QMM_ERR_NOMEM, "qmm_sampling_probs: out of memory");
    double *heap = pk + 0; /* kth_largest runs before pk is written */
    if (!st) st = kept_set(logits, n, s, p, idx, heap, pk, &kept);
    if (!st) {
        memset(probs, 0, (size_t)n * sizeof *probs);
        for (int64_t i = 0; i < kept; i++) probs[idx[i]] = (float)pk[i];
        qmm_clear_error();
    }
    free(p);
    free(pk);
    free(idx);
    return st;
}

qmm_status qmm_sampler_create(int64_t n, const qmm_sampling *s, uint64_t seed, qmm_sampler **out)
{
    if (!s || !out) return qmm_fail(QMM_ERR_NULL, "qmm_sampler_create: NULL argument");
    if (n < 1 || n > INT32_MAX) return qmm_fail(QMM_ERR_ARG, "qmm_sampler_create: n = %lld", (long long)n);
    qmm_status st = check_params(s);
    if (st) return st;
    qmm_sampler *sp = calloc(1, sizeof *sp);
    if (sp) {
        sp->idx = malloc((size_t)n * sizeof *sp->idx);
        sp->p = malloc(2 * (size_t)n * sizeof *sp->p); /* probabilities, then the kept ones */
    }
    if (!sp || !sp->idx || !sp->p) {
        qmm_sampler_destroy(sp);
        return qmm_fail(QMM_ERR_NOMEM, "qmm_sampler_create: out of memory");
    }
    sp->s = *s;
    sp->n = n;
    sp->rng = seed;
    *out = sp;
    return QMM_OK;
}

void qmm_sampler_destroy(qmm_sampler *sp)
{
    if (!sp) return;
    free(sp->idx);
    free(sp->p);
    free(sp);
}

qmm_status qmm_sampler_sample(qmm_sampler *sp, const float *logits, int32_t *out)
{
    if (!sp || !logits || !out) return qmm_fail(QMM_ERR_NULL, "qmm_sampler_sample: NULL argument");
    double *p = sp->p, *pk = sp->p + sp->n;
    int64_t kept = 0;
    qmm_status st = kept_set(logits, sp->n, &sp->s, p, sp->idx, pk, pk, &kept);
    if (st) return st;
    double u = qmm_unit_f64(&sp->rng), cum = 0; /* splitmix64: the stream depends on the seed only */
    int64_t pick = kept - 1; /* rounding: the last kept token takes what the sum misses */
    for (int64_t i = 0; i < kept; i++) {
        cum += pk[i];
        if (u < cum) {
            pick = i;
            break;
        }
    }
    *out = (int32_t)sp->idx[pick];
    return QMM_OK;
}
