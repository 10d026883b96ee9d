/*
 * `qmm bench overlap`: the chunked host<->device pipeline (qmm_pipeline.h) against the schedule
 * model (DESIGN.md §6), on one GPU in one run.
 *
 *   1. copy engines: H2D and D2H bandwidth of pinned memory alone, and both at once on two
 *      streams (do uploads and downloads overlap each other?);
 *   2. per configuration (compute-heavy, copy-heavy, balanced with uniform and with alternating
 *      chunk sizes): each engine's time for one chunk alone (CUDA events, median), then the
 *      pipeline for b = 1, 2, 3, every run first checked bit for bit against one unchunked call
 *      (itself checked against the CPU); the measured makespan beside the model fed with the
 *      alone times, the model fed with the per-chunk times measured in that run, and the exact
 *      dependency simulation (the model plus "compute i waits for store i-b");
 *   3. text Gantt charts of the measured timelines (CUDA events per segment) beside the model's,
 *      a CSV of all segments for bench/plot_overlap.py, markdown with the machine facts.
 * Every CUDA and qmm call is checked; a failure prints the call, file:line and the error, and
 * exits 1 (a failed call may poison the context, so there is no going on).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "qmm.h"

#define OV_MAX_CHUNKS 64
#define OV_MAX_REPS 51
#define OV_BUFFERS 3 /* b = 1 .. OV_BUFFERS */

typedef struct ov_opts {
    int reps, chunks, device, gantt_cols, ratio;
    int64_t compute_k, compute_n, compute_m; /* compute-heavy: K, N, chunk rows */
    int64_t copy_k, copy_n, copy_m;          /* copy-heavy */
    double copy_mib;                         /* bandwidth test size per direction */
    uint64_t seed;
    const char *out_md, *out_csv, *commit;
} ov_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm bench overlap [--reps 7] [--chunks 12] [--compute K,N,m] [--copy K,N,m]\n"
            "                         [--ratio 4] [--copy-mib 256] [--gantt-cols 96] [--seed S]\n"
            "                         [--device 0] [--out FILE.md] [--csv FILE.csv]\n"
            "                         [--commit STR]\n"
            "  the chunked H2D -> matmul -> D2H pipeline with b = 1, 2, 3 buffers, measured with\n"
            "  CUDA events and put beside the schedule model fed with the measured engine times\n"
            "  --compute K,N,m   compute-heavy configuration (default 16384,16384,512)\n"
            "  --copy K,N,m      copy-heavy configuration (default 8192,2048,2048)\n"
            "  --ratio R         balanced case: chunks alternate m and m/R rows (default 4)\n"
            "  --chunks N        chunks per run (default 12, at most %d)\n"
            "  --reps N          timed repetitions, medians reported (default 7, 3..%d)\n"
            "  --copy-mib X      bytes per direction of the bandwidth test (default 256)\n"
            "  --csv FILE        every segment (measured and model) for bench/plot_overlap.py\n"
            "  --out FILE        the markdown report (also printed to stdout)\n"
            "  --commit STR      commit to record (default: env QMM_COMMIT, else \"unknown\")\n",
            OV_MAX_CHUNKS, OV_MAX_REPS);
}

static int parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* "K,N,m" with K a multiple of 128. */
static int parse_shape(const char *s, int64_t *k, int64_t *n, int64_t *m)
{
    long long a, b, c;
    char extra;
    if (sscanf(s, "%lld,%lld,%lld%c", &a, &b, &c, &extra) != 3) return -1;
    if (a < 128 || a % 128 || a > (1 << 20) || b < 1 || b > (1 << 20) || c < 1 || c > (1 << 20))
        return -1;
    *k = a, *n = b, *m = c;
    return 0;
}

/* 0 to run, 1 after --help, -1 on a bad argument (printed). */
static int parse_args(int argc, char **argv, ov_opts *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 7, o->chunks = 12, o->gantt_cols = 96, o->ratio = 4;
    o->compute_k = 16384, o->compute_n = 16384, o->compute_m = 512;
    o->copy_k = 8192, o->copy_n = 2048, o->copy_m = 2048;
    o->copy_mib = 256;
    o->seed = (uint64_t)time(NULL);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        }
        if (!v) {
            fprintf(stderr, "qmm bench overlap: %s needs a value (or is unknown)\n", a);
            return -1;
        }
        int bad = 0;
        if (!strcmp(a, "--reps")) bad = parse_int(v, 3, OV_MAX_REPS, &x), o->reps = (int)x;
        else if (!strcmp(a, "--chunks")) bad = parse_int(v, 2, OV_MAX_CHUNKS, &x), o->chunks = (int)x;
        else if (!strcmp(a, "--device")) bad = parse_int(v, 0, 1024, &x), o->device = (int)x;
        else if (!strcmp(a, "--gantt-cols")) bad = parse_int(v, 16, 400, &x), o->gantt_cols = (int)x;
        else if (!strcmp(a, "--ratio")) bad = parse_int(v, 1, 1024, &x), o->ratio = (int)x;
        else if (!strcmp(a, "--seed")) bad = parse_int(v, 0, INT64_MAX, &x), o->seed = (uint64_t)x;
        else if (!strcmp(a, "--copy-mib")) {
            char *end;
            o->copy_mib = strtod(v, &end);
            bad = *end || !(o->copy_mib >= 1 && o->copy_mib <= 8192);
        } else if (!strcmp(a, "--compute")) bad = parse_shape(v, &o->compute_k, &o->compute_n, &o->compute_m);
        else if (!strcmp(a, "--copy")) bad = parse_shape(v, &o->copy_k, &o->copy_n, &o->copy_m);
        else if (!strcmp(a, "--out")) o->out_md = v;
        else if (!strcmp(a, "--csv")) o->out_csv = v;
        else if (!strcmp(a, "--commit")) o->commit = v;
        else {
            fprintf(stderr, "qmm bench overlap: unknown option %s\n", a);
            usage(stderr);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "qmm bench overlap: bad value '%s' for %s\n", v, a);
            return -1;
        }
        i++;
    }
    return 0;
}

#ifndef QMM_HAVE_CUDA

int bench_overlap_main(int argc, char **argv)
{
    ov_opts o;
    int r = parse_args(argc, argv, &o);
    if (r) return r > 0 ? 0 : 2;
    fprintf(stderr, "qmm bench overlap: this build has no CUDA backend (nvcc was not found or "
                    "QMM_CUDA=OFF)\n");
    return 2;
}

#else
#include <cuda_runtime.h>

/* ---- checks: print the call, where, the error; exit (a failed call poisons the context) ---- */

static const char *ov_activity = "starting";

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t ck_e_ = (x);                                                               \
        if (ck_e_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s:%d: %s failed: %s (%s) while: %s\n", __FILE__, __LINE__, #x,   \
                    cudaGetErrorString(ck_e_), cudaGetErrorName(ck_e_), ov_activity);          \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#define CKQ(x)                                                                                 \
    do {                                                                                       \
        qmm_status ck_q_ = (x);                                                                \
        if (ck_q_ != QMM_OK) {                                                                 \
            fprintf(stderr, "%s:%d: %s failed: %s: %s while: %s\n", __FILE__, __LINE__, #x,    \
                    qmm_status_name(ck_q_), qmm_last_error(), ov_activity);                    \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "qmm bench overlap: out of host memory (%zu bytes) while: %s\n", n,
                ov_activity);
        exit(1);
    }
    return p;
}

/* ---- a growing text buffer for the markdown report ---- */

typedef struct ov_text {
    char *p;
    size_t len, cap;
} ov_text;

static void tprintf(ov_text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void tprintf(ov_text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = t->cap - t->len;
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (t->p && (size_t)n < room) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        char *q = realloc(t->p, cap);
        if (!q) {
            fprintf(stderr, "qmm bench overlap: out of memory for the report\n");
            exit(1);
        }
        t->p = q, t->cap = cap;
    }
}

/* ---- small statistics and data ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median, min, max of x[n]. */
static void summary(const double *x, int n, double *med, double *mn, double *mx)
{
    double s[OV_MAX_REPS];
    memcpy(s, x, sizeof *x * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    *med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    *mn = s[0], *mx = s[n - 1];
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* x[count] uniform in [-1, 1) as bf16. */
static void fill_bf16(qmm_bf16 *x, size_t count, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < count; i++) {
        float u = (float)(splitmix(&s) >> 40) * (1.0f / 16777216.0f);
        x[i] = qmm_f32_to_bf16(2.0f * u - 1.0f);
    }
}

/* Random W4 weight: random codes, scales of both signs |s| in [0.004, 0.03], bias ≈ -7.5·s. */
static void random_w4(qmm_w4 *w, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < w->packed_count; i++) w->packed[i] = (uint32_t)splitmix(&s);
    for (size_t i = 0; i < w->scales_count; i++) {
        double u = (double)(splitmix(&s) >> 11) * (1.0 / 9007199254740992.0);
        double sc = 0.004 + 0.026 * u;
        if (splitmix(&s) & 1) sc = -sc;
        w->scales[i] = qmm_f32_to_bf16((float)sc);
        w->biases[i] = qmm_f32_to_bf16((float)(-7.5 * sc));
    }
}

/* ---- the environment of one benchmark run ---- */

typedef struct ov_env {
    ov_opts o;
    qmm_cuda_ctx *ctx;
    qmm_gpu_info info;
    cudaStream_t s;           /* alone measurements and references */
    cudaEvent_t e0, e1;
    void *events[6 * OV_MAX_CHUNKS]; /* the pipeline's per-segment events */
    qmm_cuda_options tiled;   /* path TILED, default stages: chunking keeps the bits */
    ov_text md;
    FILE *csv;
} ov_env;

/* ---- 1. copy engines ---- */

static void copy_engines(ov_env *env)
{
    ov_activity = "copy-engine bandwidth";
    size_t bytes = (size_t)(env->o.copy_mib * 1048576.0) & ~(size_t)4095;
    void *h_up, *h_down, *d_up, *d_down;
    CK(cudaMallocHost(&h_up, bytes));
    CK(cudaMallocHost(&h_down, bytes));
    CK(cudaMalloc(&d_up, bytes));
    CK(cudaMalloc(&d_down, bytes));
    memset(h_up, 1, bytes);
    CK(cudaMemsetAsync(d_down, 2, bytes, env->s));
    cudaStream_t s2;
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t end2, all;
    CK(cudaEventCreate(&end2));
    CK(cudaEventCreate(&all));

    int reps = env->o.reps;
    double up[OV_MAX_REPS], down[OV_MAX_REPS], both[OV_MAX_REPS], both_up[OV_MAX_REPS],
        both_down[OV_MAX_REPS];
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        float ms;
        CK(cudaEventRecord(env->e0, env->s));
        CK(cudaMemcpyAsync(d_up, h_up, bytes, cudaMemcpyHostToDevice, env->s));
        CK(cudaEventRecord(env->e1, env->s));
        CK(cudaEventSynchronize(env->e1));
        CK(cudaEventElapsedTime(&ms, env->e0, env->e1));
        if (r >= 0) up[r] = 1000.0 * ms;
        CK(cudaEventRecord(env->e0, env->s));
        CK(cudaMemcpyAsync(h_down, d_down, bytes, cudaMemcpyDeviceToHost, env->s));
        CK(cudaEventRecord(env->e1, env->s));
        CK(cudaEventSynchronize(env->e1));
        CK(cudaEventElapsedTime(&ms, env->e0, env->e1));
        if (r >= 0) down[r] = 1000.0 * ms;
        /* both at once: one start event, the two copies on two streams, joined */
        CK(cudaEventRecord(env->e0, env->s));
        CK(cudaStreamWaitEvent(s2, env->e0, 0));
        CK(cudaMemcpyAsync(d_up, h_up, bytes, cudaMemcpyHostToDevice, env->s));
        CK(cudaMemcpyAsync(h_down, d_down, bytes, cudaMemcpyDeviceToHost, s2));
        CK(cudaEventRecord(env->e1, env->s));
        CK(cudaEventRecord(end2, s2));
        CK(cudaStreamWaitEvent(env->s, end2, 0));
        CK(cudaEventRecord(all, env->s));
        CK(cudaEventSynchronize(all));
        if (r >= 0) {
            CK(cudaEventElapsedTime(&ms, env->e0, all));
            both[r] = 1000.0 * ms;
            CK(cudaEventElapsedTime(&ms, env->e0, env->e1));
            both_up[r] = 1000.0 * ms;
            CK(cudaEventElapsedTime(&ms, env->e0, end2));
            both_down[r] = 1000.0 * ms;
        }
    }
    double t[5][3];
    summary(up, reps, &t[0][0], &t[0][1], &t[0][2]);
    summary(down, reps, &t[1][0], &t[1][1], &t[1][2]);
    summary(both_up, reps, &t[2][0], &t[2][1], &t[2][2]);
    summary(both_down, reps, &t[3][0], &t[3][1], &t[3][2]);
    summary(both, reps, &t[4][0], &t[4][1], &t[4][2]);
    double gb = (double)bytes / 1e9;
    ov_text *md = &env->md;
    tprintf(md, "## Copy engines (pinned host memory, %.0f MiB per direction)\n\n",
            (double)bytes / 1048576.0);
    tprintf(md, "| copy | time ms (median [min, max]) | GB/s |\n|---|---|---|\n");
    static const char *names[5] = {"H2D alone", "D2H alone", "H2D while D2H runs",
                                   "D2H while H2D runs", "both at once (start to both done)"};
    for (int i = 0; i < 5; i++)
        tprintf(md, "| %s | %.3f [%.3f, %.3f] | %.1f |\n", names[i], t[i][0] / 1000,
                t[i][1] / 1000, t[i][2] / 1000, (i == 4 ? 2 * gb : gb) / (t[i][0] * 1e-6));
    double overlap = (t[0][0] + t[1][0]) / t[4][0];
    tprintf(md,
            "\nOverlap factor (H2D alone + D2H alone) / (both at once) = **%.2f** (2 = the two "
            "directions run fully in parallel on separate copy engines, 1 = they serialise): "
            "uploads and downloads %s.\n\n",
            overlap,
            overlap > 1.8   ? "overlap each other"
            : overlap > 1.2 ? "overlap partly (shared bandwidth)"
                            : "do not overlap");
    fprintf(stderr, "copy engines: H2D %.1f GB/s, D2H %.1f GB/s, overlap factor %.2f\n",
            gb / (t[0][0] * 1e-6), gb / (t[1][0] * 1e-6), overlap);
    CK(cudaEventDestroy(end2));
    CK(cudaEventDestroy(all));
    CK(cudaStreamDestroy(s2));
    CK(cudaFreeHost(h_up));
    CK(cudaFreeHost(h_down));
    CK(cudaFree(d_up));
    CK(cudaFree(d_down));
}

/* ---- a weight with its pinned data and reference ---- */

typedef struct ov_data {
    int64_t k, n, m_max;     /* A is [m_max, K], C [m_max, N] */
    qmm_w4 w;
    qmm_cuda_weight *dw;
    qmm_bf16 *a_host, *c_host; /* pinned */
    qmm_bf16 *ref;           /* [m_max, N]: one unchunked call, checked against the CPU */
    double cpu_err;          /* relative error of the reference on sampled rows vs the CPU */
} ov_data;

/* Weight [N, K] and, unless a_share is given, pinned A [m_max, K]; pinned C [m_max, N]. */
static void data_create(ov_env *env, ov_data *d, int64_t k, int64_t n, int64_t m_max,
                        qmm_bf16 *a_share, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->k = k, d->n = n, d->m_max = m_max;
    ov_activity = "making the weight";
    CKQ(qmm_w4_alloc(n, k, &d->w));
    random_w4(&d->w, seed);
    CKQ(qmm_cuda_weight_upload(env->ctx, &d->w, &d->dw));
    ov_activity = "pinned host buffers";
    if (a_share) {
        d->a_host = a_share;
    } else {
        CK(cudaMallocHost((void **)&d->a_host, (size_t)(m_max * k) * 2));
        fill_bf16(d->a_host, (size_t)(m_max * k), seed ^ 0xA5A5A5A5u);
    }
    CK(cudaMallocHost((void **)&d->c_host, (size_t)(m_max * n) * 2));

    /* the reference: one unchunked call of all rows with the same options */
    ov_activity = "unchunked reference call";
    qmm_bf16 *a_dev, *c_dev;
    void *ws = NULL;
    size_t ws_bytes = 0;
    CKQ(qmm_cuda_workspace_size(env->ctx, m_max, n, k, &env->tiled, &ws_bytes));
    CK(cudaMalloc((void **)&a_dev, (size_t)(m_max * k) * 2));
    CK(cudaMalloc((void **)&c_dev, (size_t)(m_max * n) * 2));
    if (ws_bytes) CK(cudaMalloc(&ws, ws_bytes));
    CK(cudaMemcpy(a_dev, d->a_host, (size_t)(m_max * k) * 2, cudaMemcpyHostToDevice));
    /* on env->s, the stream of the call: a plain cudaMemset would run on the legacy stream,
     * which does not order against our non-blocking stream */
    CK(cudaMemsetAsync(c_dev, 0xFF, (size_t)(m_max * n) * 2, env->s));
    CKQ(qmm_cuda_set_stream(env->ctx, env->s));
    CKQ(qmm_cuda_matmul(env->ctx, a_dev, m_max, d->dw, c_dev, ws, ws_bytes, &env->tiled, NULL));
    CK(cudaStreamSynchronize(env->s));
    d->ref = xmalloc((size_t)(m_max * n) * 2);
    CK(cudaMemcpy(d->ref, c_dev, (size_t)(m_max * n) * 2, cudaMemcpyDeviceToHost));
    CK(cudaFree(a_dev));
    CK(cudaFree(c_dev));
    if (ws) CK(cudaFree(ws));

    /* the reference against the CPU on 4 rows spread over M */
    ov_activity = "CPU check of the reference";
    enum { ROWS = 4 };
    qmm_bf16 *a4 = xmalloc((size_t)(ROWS * k) * 2), *c4 = xmalloc((size_t)(ROWS * n) * 2);
    int64_t rows[ROWS];
    for (int i = 0; i < ROWS; i++) {
        rows[i] = i * (m_max - 1) / (ROWS - 1);
        memcpy(a4 + i * k, d->a_host + rows[i] * k, (size_t)k * 2);
    }
    CKQ(qmm_matmul_cpu(a4, ROWS, &d->w, c4, 0));
    double num = 0, den = 0;
    for (int i = 0; i < ROWS; i++)
        for (int64_t j = 0; j < n; j++) {
            double g = qmm_bf16_to_f32(d->ref[rows[i] * n + j]), r = qmm_bf16_to_f32(c4[i * n + j]);
            num += (g - r) * (g - r);
            den += r * r;
            if (!isfinite(g)) num = INFINITY;
        }
    d->cpu_err = den > 0 ? sqrt(num / den) : sqrt(num);
    free(a4), free(c4);
    if (!(d->cpu_err <= 1e-2)) {
        fprintf(stderr, "qmm bench overlap: the unchunked GPU call (K=%lld N=%lld M=%lld) differs "
                        "from the CPU: relative error %.3e > 1e-2\n",
                (long long)k, (long long)n, (long long)m_max, d->cpu_err);
        exit(1);
    }
}

static void data_free(ov_data *d, int free_a)
{
    qmm_cuda_weight_free(d->dw);
    qmm_w4_free(&d->w);
    if (free_a) CK(cudaFreeHost(d->a_host));
    CK(cudaFreeHost(d->c_host));
    free(d->ref);
}

/* ---- 2. one configuration ---- */

typedef struct ov_alone {
    int64_t rows;
    double med[3], mn[3], mx[3]; /* µs of one chunk, per engine */
} ov_alone;

typedef struct ov_result {
    int b;
    double med, mn, mx;           /* measured makespans, µs */
    double model_alone, model_chunk, exact_alone, closed_form;
    qmm_model_segment seg[3 * OV_MAX_CHUNKS];       /* the median repetition's timeline */
    qmm_model_segment model_seg[3 * OV_MAX_CHUNKS]; /* the model with the alone times */
    double mean_dur[3];           /* mean in-pipeline duration per chunk, per engine */
    double slack_mean, slack_max; /* start - latest dependency end, over steps with deps */
} ov_result;

typedef struct ov_case {
    const char *name, *what;
    ov_data *d;
    int64_t m;                    /* chunk rows (the pipeline's slot size) */
    int chunks;
    int64_t rows[OV_MAX_CHUNKS];
    int64_t m_total;
    ov_alone alone[2];            /* per distinct chunk size */
    int n_alone;
    ov_result res[OV_BUFFERS];
} ov_case;

/* A case of n chunks of m rows each (callers may then change rows[]). */
static void case_init(ov_case *c, const char *name, const char *what, ov_data *d, int64_t m, int n)
{
    memset(c, 0, sizeof *c);
    c->name = name, c->what = what, c->d = d, c->m = m, c->chunks = n;
    for (int i = 0; i < n; i++) c->rows[i] = m;
}

static const ov_alone *alone_for(const ov_case *c, int64_t rows)
{
    for (int i = 0; i < c->n_alone; i++)
        if (c->alone[i].rows == rows) return &c->alone[i];
    return NULL;
}

/* Each engine on one chunk of `rows` rows, alone on the GPU: median of reps (after a warm-up). */
static void measure_alone(ov_env *env, ov_case *c, int64_t rows, ov_alone *out)
{
    ov_data *d = c->d;
    ov_activity = "engines alone";
    qmm_bf16 *a_dev, *c_dev;
    void *ws = NULL;
    size_t ws_bytes = 0;
    CKQ(qmm_cuda_workspace_size(env->ctx, rows, d->n, d->k, &env->tiled, &ws_bytes));
    CK(cudaMalloc((void **)&a_dev, (size_t)(rows * d->k) * 2));
    CK(cudaMalloc((void **)&c_dev, (size_t)(rows * d->n) * 2));
    if (ws_bytes) CK(cudaMalloc(&ws, ws_bytes));
    CKQ(qmm_cuda_set_stream(env->ctx, env->s));
    double t[3][OV_MAX_REPS];
    for (int r = -2; r < env->o.reps; r++) { /* two warm-ups */
        int64_t row0 = (int64_t)((r + 2) % c->chunks) * c->m; /* rotate over the host rows */
        if (row0 + rows > d->m_max) row0 = 0;
        for (int e = 0; e < 3; e++) {
            CK(cudaEventRecord(env->e0, env->s));
            if (e == QMM_ENGINE_LOAD)
                CK(cudaMemcpyAsync(a_dev, d->a_host + row0 * d->k, (size_t)(rows * d->k) * 2,
                                   cudaMemcpyHostToDevice, env->s));
            else if (e == QMM_ENGINE_COMPUTE)
                CKQ(qmm_cuda_matmul(env->ctx, a_dev, rows, d->dw, c_dev, ws, ws_bytes, &env->tiled,
                                    NULL));
            else
                CK(cudaMemcpyAsync(d->c_host + row0 * d->n, c_dev, (size_t)(rows * d->n) * 2,
                                   cudaMemcpyDeviceToHost, env->s));
            CK(cudaEventRecord(env->e1, env->s));
            CK(cudaEventSynchronize(env->e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, env->e0, env->e1));
            if (r >= 0) t[e][r] = 1000.0 * ms;
        }
    }
    out->rows = rows;
    for (int e = 0; e < 3; e++) summary(t[e], env->o.reps, &out->med[e], &out->mn[e], &out->mx[e]);
    CK(cudaFree(a_dev));
    CK(cudaFree(c_dev));
    if (ws) CK(cudaFree(ws));
}

/* times[3, n] engine-major from the alone medians of each chunk's size. */
static void alone_times(const ov_case *c, double *times)
{
    for (int i = 0; i < c->chunks; i++) {
        const ov_alone *a = alone_for(c, c->rows[i]);
        for (int e = 0; e < 3; e++) times[e * c->chunks + i] = a->med[e];
    }
}

static double makespan(const qmm_model_segment *seg, int n)
{
    double end = 0;
    for (int j = 0; j < 3 * n; j++) end = fmax(end, seg[j].end);
    return end;
}

/* Pipeline with b buffers: verify bit for bit, then reps timed runs; predictions beside. */
static void measure_pipeline(ov_env *env, ov_case *c, int b, ov_result *res)
{
    ov_data *d = c->d;
    const int n = c->chunks, reps = env->o.reps;
    static char act[128];
    snprintf(act, sizeof act, "%s, b=%d", c->name, b);
    ov_activity = act;
    qmm_pipeline *p;
    CKQ(qmm_pipeline_create(env->ctx, d->dw, c->m, b, &env->tiled, &p));

    /* correctness first: poisoned output, one run, bitwise against the unchunked call */
    memset(d->c_host, 0xFF, (size_t)(c->m_total * d->n) * 2);
    CKQ(qmm_pipeline_run_rows(p, d->a_host, c->rows, n, d->c_host, NULL, 0));
    if (memcmp(d->c_host, d->ref, (size_t)(c->m_total * d->n) * 2)) {
        size_t i = 0;
        while (d->c_host[i] == d->ref[i]) i++;
        fprintf(stderr, "qmm bench overlap: %s b=%d: the pipeline's output differs from one "
                        "unchunked call at element %zu (row %zu): 0x%04x vs 0x%04x\n",
                c->name, b, i, i / (size_t)d->n, d->c_host[i], d->ref[i]);
        exit(1);
    }

    static qmm_model_segment segs[OV_MAX_REPS][3 * OV_MAX_CHUNKS];
    double totals[OV_MAX_REPS];
    for (int r = 0; r < reps; r++) {
        CKQ(qmm_pipeline_run_rows(p, d->a_host, c->rows, n, d->c_host, env->events,
                                  (size_t)6 * n));
        CKQ(qmm_pipeline_timeline(env->events, n, segs[r], (size_t)3 * n));
        totals[r] = makespan(segs[r], n);
    }
    qmm_pipeline_destroy(p);
    summary(totals, reps, &res->med, &res->mn, &res->mx);
    int pick = 0; /* the repetition closest to the median shows the timeline */
    for (int r = 1; r < reps; r++)
        if (fabs(totals[r] - res->med) < fabs(totals[pick] - res->med)) pick = r;
    memcpy(res->seg, segs[pick], sizeof(qmm_model_segment) * 3 * (size_t)n);
    res->b = b;

    /* predictions */
    double alone[3 * OV_MAX_CHUNKS], chunk[3 * OV_MAX_CHUNKS];
    alone_times(c, alone);
    for (int j = 0; j < 3 * n; j++) chunk[j] = fmax(0.0, res->seg[j].end - res->seg[j].start);
    qmm_model_pipeline mp = {n, b, {0, 0, 0}, {alone, alone + n, alone + 2 * n}};
    qmm_model_schedule sch;
    CKQ(qmm_model_schedule_run(&mp, res->model_seg, (size_t)3 * n, &sch));
    res->model_alone = sch.total;
    res->closed_form = sch.closed_form;
    qmm_model_pipeline mc = {n, b, {0, 0, 0}, {chunk, chunk + n, chunk + 2 * n}};
    CKQ(qmm_model_schedule_run(&mc, NULL, 0, &sch));
    res->model_chunk = sch.total;
    qmm_pipeline_step steps[3 * OV_MAX_CHUNKS];
    CKQ(qmm_pipeline_plan(c->rows, n, b, steps, (size_t)3 * n));
    CKQ(qmm_pipeline_simulate(steps, n, alone, (size_t)3 * n, NULL, 0, &res->exact_alone));

    /* where the time went: mean duration per engine, and the hand-off latency (a step's start
     * after the end of the last thing it waited for) */
    for (int e = 0; e < 3; e++) {
        double sum = 0;
        for (int i = 0; i < n; i++) sum += chunk[e * n + i];
        res->mean_dur[e] = sum / n;
    }
    double ssum = 0, smax = 0;
    int scount = 0;
    for (int j = 0; j < 3 * n; j++) {
        const qmm_pipeline_step *s = &steps[j];
        if (!s->dep_count) continue;
        double ready = 0;
        for (int q = 0; q < s->dep_count; q++)
            ready = fmax(ready, res->seg[s->dep[q].engine * n + s->dep[q].chunk].end);
        double slack = res->seg[s->engine * n + s->chunk].start - ready;
        ssum += slack;
        smax = fmax(smax, slack);
        scount++;
    }
    res->slack_mean = scount ? ssum / scount : 0;
    res->slack_max = smax;
    fprintf(stderr, "  %-22s b=%d: measured %.3f ms, model %.3f ms\n", c->name, b, res->med / 1000,
            res->model_alone / 1000);
}

static double pct(double measured, double predicted)
{
    return predicted > 0 ? 100.0 * (measured - predicted) / predicted : NAN;
}

/* Three labelled rows of a Gantt chart. */
static void gantt(ov_text *md, const char *title, const qmm_model_segment *seg, int n, double dt,
                  int cols)
{
    size_t size = 3 * ((size_t)cols + 1) + 1;
    char *buf = xmalloc(size);
    CKQ(qmm_model_gantt(seg, n, dt, cols, buf, size));
    tprintf(md, "%s\n", title);
    const char *row = buf;
    for (int e = 0; e < 3; e++) {
        const char *nl = strchr(row, '\n');
        tprintf(md, "%-8s|%.*s|\n", qmm_model_engine_name(e), (int)(nl - row), row);
        row = nl + 1;
    }
    free(buf);
}

static void csv_segments(ov_env *env, const ov_case *c, int b, const char *kind,
                         const qmm_model_segment *seg)
{
    if (!env->csv) return;
    for (int e = 0; e < 3; e++)
        for (int i = 0; i < c->chunks; i++)
            fprintf(env->csv, "%s,%d,%s,%d,%s,%lld,%.3f,%.3f\n", c->name, b, kind, i,
                    qmm_model_engine_name(e), (long long)c->rows[i], seg[e * c->chunks + i].start,
                    seg[e * c->chunks + i].end);
}

static void run_case(ov_env *env, ov_case *c)
{
    ov_data *d = c->d;
    c->m_total = 0;
    for (int i = 0; i < c->chunks; i++) c->m_total += c->rows[i];
    c->n_alone = 0;
    for (int i = 0; i < c->chunks; i++)
        if (!alone_for(c, c->rows[i])) measure_alone(env, c, c->rows[i], &c->alone[c->n_alone++]);
    for (int b = 1; b <= OV_BUFFERS; b++) measure_pipeline(env, c, b, &c->res[b - 1]);

    ov_text *md = &env->md;
    tprintf(md, "## %s: K=%lld, N=%lld, %d chunks (%s), %lld rows in all\n\n", c->name,
            (long long)d->k, (long long)d->n, c->chunks, c->what, (long long)c->m_total);
    tprintf(md,
            "Checked first: every pipeline run below (b = 1..%d) was bitwise equal to one "
            "unchunked `qmm_cuda_matmul` of all rows (path TILED), whose sampled rows are within "
            "%.2e of the CPU (limit 1e-2).\n\n",
            OV_BUFFERS, d->cpu_err);
    tprintf(md, "One chunk, each engine alone (median of %d [min, max]):\n\n", env->o.reps);
    tprintf(md, "| rows | load (H2D) µs | GB/s | compute µs | TFLOP/s | store (D2H) µs | GB/s |\n"
                "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < c->n_alone; i++) {
        const ov_alone *a = &c->alone[i];
        double rows = (double)a->rows;
        tprintf(md,
                "| %lld | %.1f [%.1f, %.1f] | %.1f | %.1f [%.1f, %.1f] | %.1f | %.1f [%.1f, %.1f] "
                "| %.1f |\n",
                (long long)a->rows, a->med[0], a->mn[0], a->mx[0],
                rows * d->k * 2 / (a->med[0] * 1e3), a->med[1], a->mn[1], a->mx[1],
                2 * rows * d->n * d->k / (a->med[1] * 1e6), a->med[2], a->mn[2], a->mx[2],
                rows * d->n * 2 / (a->med[2] * 1e3));
    }
    tprintf(md,
            "\n| b | measured ms (median [min, max]) | model, engines alone | error | model, "
            "per-chunk times of the run | error | exact deps, engines alone | document closed "
            "form | hand-off µs mean / max |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int b = 0; b < OV_BUFFERS; b++) {
        const ov_result *r = &c->res[b];
        tprintf(md,
                "| %d | %.3f [%.3f, %.3f] | %.3f | %+.1f%% | %.3f | %+.1f%% | %.3f | %.3f | "
                "%.1f / %.1f |\n",
                r->b, r->med / 1000, r->mn / 1000, r->mx / 1000, r->model_alone / 1000,
                pct(r->med, r->model_alone), r->model_chunk / 1000, pct(r->med, r->model_chunk),
                r->exact_alone / 1000, r->closed_form / 1000, r->slack_mean, r->slack_max);
    }
    const ov_result *r1 = &c->res[0], *r2 = &c->res[1], *r3 = &c->res[2];
    double s_meas = r1->med / r2->med, s_model = r1->model_alone / r2->model_alone;
    double t_meas = r2->med / r3->med, t_model = r2->model_alone / r3->model_alone;
    double gap = 100.0 * (s_meas / s_model - 1);
    tprintf(md,
            "\nb = 2 over b = 1: measured **%.3fx**, model %.3fx (%+.1f%%: %s 15%%). "
            "b = 3 over b = 2: measured %.3fx, model %.3fx.\n\n",
            s_meas, s_model, gap, fabs(gap) <= 15 ? "within" : "NOT within", t_meas, t_model);
    tprintf(md, "Mean time per chunk of each engine inside the pipeline (µs; alone: the model's "
                "input):\n\n| engine | alone |");
    for (int b = 0; b < OV_BUFFERS; b++) tprintf(md, " b=%d |", b + 1);
    tprintf(md, "\n|---|---|");
    for (int b = 0; b < OV_BUFFERS; b++) tprintf(md, "---|");
    tprintf(md, "\n");
    double alone[3 * OV_MAX_CHUNKS];
    alone_times(c, alone);
    for (int e = 0; e < 3; e++) {
        double sum = 0;
        for (int i = 0; i < c->chunks; i++) sum += alone[e * c->chunks + i];
        tprintf(md, "| %s | %.1f |", qmm_model_engine_name(e), sum / c->chunks);
        for (int b = 0; b < OV_BUFFERS; b++) tprintf(md, " %.1f |", c->res[b].mean_dur[e]);
        tprintf(md, "\n");
    }
    tprintf(md, "\nTimelines (digit = chunk %% 10, '.' = idle; measured from CUDA events, model "
                "fed with the engine times alone; same scale within each b):\n\n```\n");
    for (int b = 0; b < OV_BUFFERS; b++) {
        const ov_result *r = &c->res[b];
        double span = fmax(makespan(r->seg, c->chunks), r->model_alone);
        double dt = span / env->o.gantt_cols;
        char title[160];
        snprintf(title, sizeof title, "b=%d measured %.3f ms (one column = %.1f us)", r->b,
                 makespan(r->seg, c->chunks) / 1000, dt);
        gantt(md, title, r->seg, c->chunks, dt, env->o.gantt_cols);
        snprintf(title, sizeof title, "b=%d model    %.3f ms", r->b, r->model_alone / 1000);
        gantt(md, title, r->model_seg, c->chunks, dt, env->o.gantt_cols);
        if (b + 1 < OV_BUFFERS) tprintf(md, "\n");
        csv_segments(env, c, r->b, "measured", r->seg);
        csv_segments(env, c, r->b, "model", r->model_seg);
    }
    tprintf(md, "```\n\n");
}

/* Chunk rows for a balanced weight: scale N so one chunk's compute takes about its upload. */
static int64_t balanced_n(const ov_case *heavy)
{
    const ov_alone *a = &heavy->alone[0];
    double ratio = a->med[QMM_ENGINE_COMPUTE] / a->med[QMM_ENGINE_LOAD];
    double n = (double)heavy->d->n / (ratio > 0 ? ratio : 1);
    int64_t r = (int64_t)(n / 128 + 0.5) * 128;
    if (r < 128) r = 128;
    if (r > heavy->d->n) r = heavy->d->n;
    return r;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        fprintf(stderr, "qmm bench overlap: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

int bench_overlap_main(int argc, char **argv)
{
    ov_env *env = calloc(1, sizeof *env);
    if (!env) return 1;
    int pr = parse_args(argc, argv, &env->o);
    if (pr) {
        free(env);
        return pr > 0 ? 0 : 2;
    }
    const ov_opts *o = &env->o;
    int count = 0;
    char why[256] = "";
    CKQ(qmm_cuda_device_count(&count, why, sizeof why));
    if (count == 0) {
        fprintf(stderr, "qmm bench overlap: %s\n", why);
        free(env);
        return 2;
    }
    ov_activity = "creating the context";
    CKQ(qmm_cuda_create(o->device, NULL, &env->ctx));
    CKQ(qmm_cuda_info(env->ctx, &env->info));
    CK(cudaStreamCreateWithFlags(&env->s, cudaStreamNonBlocking));
    CK(cudaEventCreate(&env->e0));
    CK(cudaEventCreate(&env->e1));
    for (int j = 0; j < 6 * OV_MAX_CHUNKS; j++) {
        cudaEvent_t e;
        CK(cudaEventCreate(&e));
        env->events[j] = e;
    }
    env->tiled = qmm_cuda_options_default();
    env->tiled.path = QMM_PATH_TILED;
    if (o->out_csv) {
        env->csv = fopen(o->out_csv, "w");
        if (!env->csv) {
            fprintf(stderr, "qmm bench overlap: cannot write %s: %s\n", o->out_csv,
                    strerror(errno));
            return 2;
        }
    }

    /* machine facts */
    const char *commit = o->commit ? o->commit : getenv("QMM_COMMIT");
    if (!commit || !*commit) commit = "unknown";
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    ov_text *md = &env->md;
    const qmm_gpu_info *in = &env->info;
    tprintf(md, "# qmm bench overlap\n\n");
    tprintf(md, "- GPU: %s (sm_%d%d, %d SMs), driver %d.%d, runtime %d.%d\n", in->name,
            in->cc_major, in->cc_minor, in->sm_count, in->driver_version / 1000,
            in->driver_version % 1000 / 10, in->runtime_version / 1000,
            in->runtime_version % 1000 / 10);
    tprintf(md, "- date: %s, commit: %s, seed: %llu, repetitions: %d\n", date, commit,
            (unsigned long long)o->seed, o->reps);
    tprintf(md, "- command: qmm bench");
    for (int i = 0; i < argc; i++) tprintf(md, " %s", argv[i]);
    tprintf(md, "\n- engines: load = H2D cudaMemcpyAsync from pinned memory, compute = "
                "qmm_cuda_matmul path TILED (default stages), store = D2H; each on its own "
                "stream; times from CUDA events\n\n");
    if (env->csv) {
        fprintf(env->csv, "# gpu: %s\n# driver: %d\n# runtime: %d\n# date: %s\n# commit: %s\n",
                in->name, in->driver_version, in->runtime_version, date, commit);
        fprintf(env->csv, "config,buffers,kind,chunk,engine,rows,start_us,end_us\n");
    }

    copy_engines(env);

    /* compute-heavy and copy-heavy: uniform chunks */
    int n = o->chunks;
    ov_data heavy_d, copy_d, bal_d;
    data_create(env, &heavy_d, o->compute_k, o->compute_n, (int64_t)n * o->compute_m, NULL,
                o->seed);
    static ov_case heavy, copyc, bal, jit; /* large: keep them off the stack */
    case_init(&heavy, "compute-heavy", "uniform", &heavy_d, o->compute_m, n);
    run_case(env, &heavy);

    data_create(env, &copy_d, o->copy_k, o->copy_n, (int64_t)n * o->copy_m, NULL, o->seed + 1);
    case_init(&copyc, "copy-heavy", "uniform", &copy_d, o->copy_m, n);
    run_case(env, &copyc);
    data_free(&copy_d, 1);

    /* balanced (compute ≈ upload), the same A as compute-heavy: uniform, then alternating
     * chunk sizes m, m/ratio (per-chunk times that vary: where a third buffer can help) */
    int64_t nb = balanced_n(&heavy);
    data_create(env, &bal_d, o->compute_k, nb, (int64_t)n * o->compute_m, heavy_d.a_host,
                o->seed + 2);
    case_init(&bal, "balanced", "uniform", &bal_d, o->compute_m, n);
    run_case(env, &bal);
    static char alt_what[64];
    int64_t small = o->compute_m / o->ratio > 0 ? o->compute_m / o->ratio : 1;
    snprintf(alt_what, sizeof alt_what, "alternating %lld and %lld rows", (long long)o->compute_m,
             (long long)small);
    case_init(&jit, "balanced-alternating", alt_what, &bal_d, o->compute_m, n);
    for (int i = 0; i < n; i++) jit.rows[i] = i % 2 ? small : o->compute_m;
    run_case(env, &jit);
    tprintf(md,
            "Jitter: with uniform chunks b = 3 over b = 2 is measured %.3fx (model %.3fx); with "
            "alternating chunk sizes %.3fx (model %.3fx). A third buffer pays only when "
            "per-chunk times vary.\n\n",
            bal.res[1].med / bal.res[2].med, bal.res[1].model_alone / bal.res[2].model_alone,
            jit.res[1].med / jit.res[2].med, jit.res[1].model_alone / jit.res[2].model_alone);
    data_free(&bal_d, 0);
    data_free(&heavy_d, 1);

    fputs(md->p, stdout);
    if (o->out_md) write_file(o->out_md, md->p);
    if (env->csv && fclose(env->csv)) {
        fprintf(stderr, "qmm bench overlap: cannot write %s\n", o->out_csv);
        return 1;
    }
    for (int j = 0; j < 6 * OV_MAX_CHUNKS; j++) cudaEventDestroy((cudaEvent_t)env->events[j]);
    cudaEventDestroy(env->e0);
    cudaEventDestroy(env->e1);
    cudaStreamDestroy(env->s);
    qmm_cuda_destroy(env->ctx);
    free(md->p);
    free(env);
    return 0;
}

#endif /* QMM_HAVE_CUDA */
