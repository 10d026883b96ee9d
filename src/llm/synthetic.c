/*
 * Synthetic weights with the exact shapes of a config, for benchmarks and tests without a
 * checkpoint. Scales are sized so each projection maps unit-RMS inputs to about unit-RMS outputs:
 * a code q uniform in [0, 15] has standard deviation 4.61, so with |scale| ~ 0.217/sqrt(K) and the
 * bias centring the codes (-7.5*scale, jittered) a K-long dot product of unit inputs has RMS ~ 1.
 * Signs of the scales are random (real checkpoints hold both). The embedding (and an untied head)
 * use |scale| ~ 0.87/sqrt(hidden) so that logits of a unit-RMS final state spread with RMS ~ 4.
 * Work is cut into row blocks, each seeded from (seed, tensor, block), so the result does not
 * depend on the thread count.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "llm/model.h"

typedef struct syn_job {
    qmm_w4 *w;          /* NULL for a norm */
    int64_t row0, rows;
    double amp;         /* mean |scale| */
    qmm_bf16 *norm;
    int64_t norm_len;
    uint64_t seed;
} syn_job;

typedef struct syn_pool {
    syn_job *jobs;
    size_t count;
    size_t next;
    pthread_mutex_t lock;
    pthread_t owner; /* the calling thread: the one that reports progress */
} syn_pool;

/* splitmix64's finalizer: hashes a seed and a tensor index into a job's seed */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}


static void run_job(const syn_job *j)
{
    uint64_t s = j->seed;
    if (!j->w) {
        for (int64_t i = 0; i < j->norm_len; i++)
            j->norm[i] = qmm_f32_to_bf16((float)(1.0 + 0.1 * (2.0 * qmm_unit_f64(&s) - 1.0)));
        return;
    }
    int64_t words = j->w->k / 8, groups = j->w->k / j->w->group;
    uint32_t *p = j->w->packed + j->row0 * words;
    size_t nw = (size_t)(j->rows * words);
    for (size_t i = 0; i + 1 < nw; i += 2) {
        uint64_t r = qmm_splitmix64(&s);
        p[i] = (uint32_t)r;
        p[i + 1] = (uint32_t)(r >> 32);
    }
    if (nw % 2) p[nw - 1] = (uint32_t)qmm_splitmix64(&s);
    qmm_bf16 *sc = j->w->scales + j->row0 * groups, *bi = j->w->biases + j->row0 * groups;
    for (int64_t g = 0; g < j->rows * groups; g++) {
        uint64_t r = qmm_splitmix64(&s);
        double u = (double)(r >> 40) * (1.0 / 16777216.0);          /* 24 bits */
        double jitter = (double)((r >> 8) & 0xFFFF) / 32768.0 - 1.0; /* 16 bits, [-1, 1) */
        double sc_v = j->amp * (0.5 + u);
        if (r & 1) sc_v = -sc_v;
        float sb = qmm_bf16_to_f32(qmm_f32_to_bf16((float)sc_v));
        sc[g] = qmm_f32_to_bf16(sb);
        bi[g] = qmm_f32_to_bf16((float)(-7.5 * sb + 0.5 * sb * jitter));
    }
}

static void *worker(void *arg)
{
    syn_pool *pool = arg;
    int reports = pthread_equal(pthread_self(), pool->owner); /* the hook runs on the caller */
    for (;;) {
        pthread_mutex_lock(&pool->lock);
        size_t i = pool->next < pool->count ? pool->next++ : pool->count;
        pthread_mutex_unlock(&pool->lock);
        if (i == pool->count) return NULL;
        run_job(&pool->jobs[i]);
        if (reports) qmm_progress("synthetic weights", (double)i, (double)pool->count);
    }
}

/* Allocate w's buffers from the model and queue row blocks of about 4M weights. */
/* A zeroed job appended to the growing list, or NULL when memory runs out. */
static syn_job *push_job(syn_job **jobs, size_t *count, size_t *cap)
{
    if (*count == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        syn_job *nj = realloc(*jobs, nc * sizeof *nj);
        if (!nj) return NULL;
        *jobs = nj;
        *cap = nc;
    }
    syn_job *j = &(*jobs)[(*count)++];
    memset(j, 0, sizeof *j);
    return j;
}

static qmm_status add_w4(qmm_llm_model *m, syn_job **jobs, size_t *count, size_t *cap, qmm_w4 *w,
                         int64_t n, int64_t k, double amp, uint64_t seed, uint64_t tensor)
{
    size_t words, groups;
    int gs = (int)m->cfg.group_size;
    qmm_status st = qmm_w4_sizes_group(n, k, gs, &words, &groups, NULL);
    if (st) return st;
    void *p, *s, *b;
    if ((st = llm_model_alloc(m, words * 4, &p)) || (st = llm_model_alloc(m, groups * 2, &s)) ||
        (st = llm_model_alloc(m, groups * 2, &b)))
        return st;
    memset(w, 0, sizeof *w);
    qmm_w4_view(w, n, k, gs, p, s, b);
    m->weight_bytes += words * 4 + groups * 4;
    int64_t block = (4 << 20) / k;
    if (block < 1) block = 1;
    for (int64_t r = 0, blk = 0; r < n; r += block, blk++) {
        syn_job *j = push_job(jobs, count, cap);
        if (!j) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
        j->w = w;
        j->row0 = r;
        j->rows = n - r < block ? n - r : block;
        j->amp = amp;
        j->seed = mix64(seed ^ mix64(tensor * 0x100000001B3ull + (uint64_t)blk));
    }
    return QMM_OK;
}

static qmm_status add_norm(qmm_llm_model *m, syn_job **jobs, size_t *count, size_t *cap,
                           const qmm_bf16 **slot, int64_t len, uint64_t seed, uint64_t tensor)
{
    void *p;
    qmm_status st = llm_model_alloc(m, (size_t)len * 2, &p);
    if (st) return st;
    *slot = p;
    m->weight_bytes += (size_t)len * 2;
    syn_job *j = push_job(jobs, count, cap);
    if (!j) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    j->norm = p;
    j->norm_len = len;
    j->seed = mix64(seed ^ mix64(tensor * 0x100000001B3ull + 0xABCDEFull));
    return QMM_OK;
}

static qmm_status queue_all(qmm_llm_model *m, uint64_t seed, syn_job **jobs, size_t *count,
                            size_t *cap)
{
    const qmm_llm_config *c = &m->cfg;
    uint64_t t = 1;
    double head_amp = 0.87 / sqrt((double)c->hidden_size);
    qmm_status st = add_w4(m, jobs, count, cap, &m->embed, c->vocab_size, c->hidden_size, head_amp,
                           seed, t++);
    if (st) return st;
    if (c->tie_word_embeddings) {
        m->lm_head = m->embed;
    } else if ((st = add_w4(m, jobs, count, cap, &m->lm_head, c->vocab_size, c->hidden_size,
                            head_amp, seed, t++))) {
        return st;
    }
    if ((st = add_norm(m, jobs, count, cap, &m->final_norm, c->hidden_size, seed, t++))) return st;
    for (int64_t l = 0; l < c->num_layers; l++) {
        for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
            int64_t n, k;
            qmm_llm_linear_shape(c, (qmm_llm_linear)i, &n, &k);
            if ((st = add_w4(m, jobs, count, cap, &m->layers[l].lin[i], n, k,
                             0.217 / sqrt((double)k), seed, t++)))
                return st;
        }
        for (int i = 0; i < QMM_LLM_NORM_COUNT; i++)
            if ((st = add_norm(m, jobs, count, cap, &m->layers[l].norm[i],
                               llm_norm_len(c, (qmm_llm_norm)i), seed, t++)))
                return st;
    }
    return QMM_OK;
}

qmm_status qmm_llm_model_synthetic(const qmm_llm_config *c, uint64_t seed, qmm_llm_model **out)
{
    if (!c || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_model_synthetic: NULL argument");
    *out = NULL;
    qmm_llm_model *m;
    qmm_status st = llm_model_new(c, &m);
    if (st) return st;
    m->synthetic = 1;
    syn_pool pool = {0};
    size_t cap = 0;
    st = queue_all(m, seed, &pool.jobs, &pool.count, &cap);
    if (st) {
        free(pool.jobs);
        qmm_llm_model_destroy(m);
        return st;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
    pthread_mutex_init(&pool.lock, NULL);
    pool.owner = pthread_self();
    pthread_t tids[64];
    int started = 0;
    for (int i = 1; i < nthreads; i++)
        if (!pthread_create(&tids[started], NULL, worker, &pool)) started++;
    worker(&pool); /* this thread works too; with no helper threads it does everything */
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    qmm_progress("synthetic weights", (double)pool.count, (double)pool.count);
    pthread_mutex_destroy(&pool.lock);
    free(pool.jobs);
    *out = m;
    return QMM_OK;
}
