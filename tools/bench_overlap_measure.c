/* `qmm bench overlap`: the measurements (copy engines, engines alone, the pipeline at b buffers),
 * each checked before it is timed. Every CUDA and qmm call is checked (common.h: CK, CKQ). */
#ifdef QMM_HAVE_CUDA

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_overlap.h"

/* ---- 1. copy engines ---- */

/* µs of one copy alone on the benchmark's stream (CUDA events) */
static double copy_alone_us(ov_env *env, void *dst, const void *src, size_t bytes,
                            enum cudaMemcpyKind kind)
{
    float ms;
    CK(cudaEventRecord(env->e0, env->s));
    CK(cudaMemcpyAsync(dst, src, bytes, kind, env->s));
    CK(cudaEventRecord(env->e1, env->s));
    CK(cudaEventSynchronize(env->e1));
    CK(cudaEventElapsedTime(&ms, env->e0, env->e1));
    return 1000.0 * ms;
}

void ov_copy_engines(ov_env *env)
{
    bench_set_activity("%s", "copy-engine bandwidth");
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
        double t_up = copy_alone_us(env, d_up, h_up, bytes, cudaMemcpyHostToDevice);
        double t_down = copy_alone_us(env, h_down, d_down, bytes, cudaMemcpyDeviceToHost);
        if (r >= 0) up[r] = t_up, down[r] = t_down;
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
    bench_summary(up, reps, &t[0][0], &t[0][1], &t[0][2]);
    bench_summary(down, reps, &t[1][0], &t[1][1], &t[1][2]);
    bench_summary(both_up, reps, &t[2][0], &t[2][1], &t[2][2]);
    bench_summary(both_down, reps, &t[3][0], &t[3][1], &t[3][2]);
    bench_summary(both, reps, &t[4][0], &t[4][1], &t[4][2]);
    double gb = (double)bytes / 1e9;
    bench_text *md = &env->md;
    bench_tprintf(md, "## Copy engines (pinned host memory, %.0f MiB per direction)\n\n",
            (double)bytes / 1048576.0);
    bench_tprintf(md, "| copy | time ms (median [min, max]) | GB/s |\n|---|---|---|\n");
    static const char *names[5] = {"H2D alone", "D2H alone", "H2D while D2H runs",
                                   "D2H while H2D runs", "both at once (start to both done)"};
    for (int i = 0; i < 5; i++)
        bench_tprintf(md, "| %s | %.3f [%.3f, %.3f] | %.1f |\n", names[i], t[i][0] / 1000,
                t[i][1] / 1000, t[i][2] / 1000, (i == 4 ? 2 * gb : gb) / (t[i][0] * 1e-6));
    double overlap = (t[0][0] + t[1][0]) / t[4][0];
    bench_tprintf(md,
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

/* Weight [N, K] and, unless a_share is given, pinned A [m_max, K]; pinned C [m_max, N]. */
void ov_data_create(ov_env *env, ov_data *d, int64_t k, int64_t n, int64_t m_max,
                        qmm_bf16 *a_share, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->k = k, d->n = n, d->m_max = m_max;
    bench_set_activity("%s", "making the weight");
    CKQ(qmm_w4_alloc(n, k, &d->w));
    bench_rng rng = {seed};
    bench_random_w4(&rng, &d->w);
    CKQ(qmm_cuda_weight_upload(env->ctx, &d->w, &d->dw));
    bench_set_activity("%s", "pinned host buffers");
    if (a_share) {
        d->a_host = a_share;
    } else {
        CK(cudaMallocHost((void **)&d->a_host, (size_t)(m_max * k) * 2));
        bench_rng ra = {seed ^ 0xA5A5A5A5u};
        bench_random_bf16(&ra, d->a_host, (size_t)(m_max * k));
    }
    CK(cudaMallocHost((void **)&d->c_host, (size_t)(m_max * n) * 2));

    /* the reference: one unchunked call of all rows with the same options */
    bench_set_activity("%s", "unchunked reference call");
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
    d->ref = bench_xmalloc((size_t)(m_max * n) * 2);
    CK(cudaMemcpy(d->ref, c_dev, (size_t)(m_max * n) * 2, cudaMemcpyDeviceToHost));
    CK(cudaFree(a_dev));
    CK(cudaFree(c_dev));
    if (ws) CK(cudaFree(ws));

    /* the reference against the CPU on 4 rows spread over M */
    bench_set_activity("%s", "CPU check of the reference");
    enum { ROWS = 4 };
    qmm_bf16 *a4 = bench_xmalloc((size_t)(ROWS * k) * 2), *c4 = bench_xmalloc((size_t)(ROWS * n) * 2);
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

void ov_data_free(ov_data *d, int free_a)
{
    qmm_cuda_weight_free(d->dw);
    qmm_w4_free(&d->w);
    if (free_a) CK(cudaFreeHost(d->a_host));
    CK(cudaFreeHost(d->c_host));
    free(d->ref);
}

/* ---- 2. one configuration ---- */

/* A case of n chunks of m rows each (callers may then change rows[]). */
void ov_case_init(ov_case *c, const char *name, const char *what, ov_data *d, int64_t m, int n)
{
    memset(c, 0, sizeof *c);
    c->name = name, c->what = what, c->d = d, c->m = m, c->chunks = n;
    for (int i = 0; i < n; i++) c->rows[i] = m;
}

const ov_alone *ov_alone_for(const ov_case *c, int64_t rows)
{
    for (int i = 0; i < c->n_alone; i++)
        if (c->alone[i].rows == rows) return &c->alone[i];
    return NULL;
}

/* Each engine on one chunk of `rows` rows, alone on the GPU: median of reps (after a warm-up). */
void ov_measure_alone(ov_env *env, ov_case *c, int64_t rows, ov_alone *out)
{
    ov_data *d = c->d;
    bench_set_activity("%s", "engines alone");
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
    for (int e = 0; e < 3; e++) bench_summary(t[e], env->o.reps, &out->med[e], &out->mn[e], &out->mx[e]);
    CK(cudaFree(a_dev));
    CK(cudaFree(c_dev));
    if (ws) CK(cudaFree(ws));
}

/* times[3, n] engine-major from the alone medians of each chunk's size. */
void ov_alone_times(const ov_case *c, double *times)
{
    for (int i = 0; i < c->chunks; i++) {
        const ov_alone *a = ov_alone_for(c, c->rows[i]);
        for (int e = 0; e < 3; e++) times[e * c->chunks + i] = a->med[e];
    }
}

double ov_makespan(const qmm_model_segment *seg, int n)
{
    double end = 0;
    for (int j = 0; j < 3 * n; j++) end = fmax(end, seg[j].end);
    return end;
}

/* Pipeline with b buffers: verify bit for bit, then reps timed runs; predictions beside. */
void ov_measure_pipeline(ov_env *env, ov_case *c, int b, ov_result *res)
{
    ov_data *d = c->d;
    const int n = c->chunks, reps = env->o.reps;
    static char act[128];
    snprintf(act, sizeof act, "%s, b=%d", c->name, b);
    bench_set_activity("%s", act);
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
        totals[r] = ov_makespan(segs[r], n);
    }
    qmm_pipeline_destroy(p);
    bench_summary(totals, reps, &res->med, &res->mn, &res->mx);
    int pick = 0; /* the repetition closest to the median shows the timeline */
    for (int r = 1; r < reps; r++)
        if (fabs(totals[r] - res->med) < fabs(totals[pick] - res->med)) pick = r;
    memcpy(res->seg, segs[pick], sizeof(qmm_model_segment) * 3 * (size_t)n);
    res->b = b;

    /* predictions */
    double alone[3 * OV_MAX_CHUNKS], chunk[3 * OV_MAX_CHUNKS];
    ov_alone_times(c, alone);
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


#else
typedef int bench_overlap_measure_unused; /* CUDA builds only */
#endif
