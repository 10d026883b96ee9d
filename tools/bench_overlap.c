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
#include "bench_overlap.h"


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
            "  --commit STR      commit to record (default: env QMM_COMMIT, else git, else \"unknown\")\n",
            OV_MAX_CHUNKS, OV_MAX_REPS);
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
        if (!strcmp(a, "--reps")) bad = bench_parse_ll(v, 3, OV_MAX_REPS, &x), o->reps = (int)x;
        else if (!strcmp(a, "--chunks")) bad = bench_parse_ll(v, 2, OV_MAX_CHUNKS, &x), o->chunks = (int)x;
        else if (!strcmp(a, "--device")) bad = bench_parse_ll(v, 0, 1024, &x), o->device = (int)x;
        else if (!strcmp(a, "--gantt-cols")) bad = bench_parse_ll(v, 16, 400, &x), o->gantt_cols = (int)x;
        else if (!strcmp(a, "--ratio")) bad = bench_parse_ll(v, 1, 1024, &x), o->ratio = (int)x;
        else if (!strcmp(a, "--seed")) bad = bench_parse_ll(v, 0, INT64_MAX, &x), o->seed = (uint64_t)x;
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

/* CK, CKQ, bench_xmalloc, bench_text, bench_summary, bench_rng: tools/common/common.h */

static double pct(double measured, double predicted)
{
    return predicted > 0 ? 100.0 * (measured - predicted) / predicted : NAN;
}

/* Three labelled rows of a Gantt chart. */
static void gantt(bench_text *md, const char *title, const qmm_model_segment *seg, int n, double dt,
                  int cols)
{
    size_t size = 3 * ((size_t)cols + 1) + 1;
    char *buf = bench_xmalloc(size);
    CKQ(qmm_model_gantt(seg, n, dt, cols, buf, size));
    bench_tprintf(md, "%s\n", title);
    const char *row = buf;
    for (int e = 0; e < 3; e++) {
        const char *nl = strchr(row, '\n');
        bench_tprintf(md, "%-8s|%.*s|\n", qmm_model_engine_name(e), (int)(nl - row), row);
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
        if (!ov_alone_for(c, c->rows[i])) ov_measure_alone(env, c, c->rows[i], &c->alone[c->n_alone++]);
    for (int b = 1; b <= OV_BUFFERS; b++) ov_measure_pipeline(env, c, b, &c->res[b - 1]);

    bench_text *md = &env->md;
    bench_tprintf(md, "## %s: K=%lld, N=%lld, %d chunks (%s), %lld rows in all\n\n", c->name,
            (long long)d->k, (long long)d->n, c->chunks, c->what, (long long)c->m_total);
    bench_tprintf(md,
            "Checked first: every pipeline run below (b = 1..%d) was bitwise equal to one "
            "unchunked `qmm_cuda_matmul` of all rows (path TILED), whose sampled rows are within "
            "%.2e of the CPU (limit 1e-2).\n\n",
            OV_BUFFERS, d->cpu_err);
    bench_tprintf(md, "One chunk, each engine alone (median of %d [min, max]):\n\n", env->o.reps);
    bench_tprintf(md, "| rows | load (H2D) µs | GB/s | compute µs | TFLOP/s | store (D2H) µs | GB/s |\n"
                "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < c->n_alone; i++) {
        const ov_alone *a = &c->alone[i];
        double rows = (double)a->rows;
        bench_tprintf(md,
                "| %lld | %.1f [%.1f, %.1f] | %.1f | %.1f [%.1f, %.1f] | %.1f | %.1f [%.1f, %.1f] "
                "| %.1f |\n",
                (long long)a->rows, a->med[0], a->mn[0], a->mx[0],
                rows * d->k * 2 / (a->med[0] * 1e3), a->med[1], a->mn[1], a->mx[1],
                2 * rows * d->n * d->k / (a->med[1] * 1e6), a->med[2], a->mn[2], a->mx[2],
                rows * d->n * 2 / (a->med[2] * 1e3));
    }
    bench_tprintf(md,
            "\n| b | measured ms (median [min, max]) | model, engines alone | error | model, "
            "per-chunk times of the run | error | exact deps, engines alone | document closed "
            "form | hand-off µs mean / max |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int b = 0; b < OV_BUFFERS; b++) {
        const ov_result *r = &c->res[b];
        bench_tprintf(md,
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
    bench_tprintf(md,
            "\nb = 2 over b = 1: measured **%.3fx**, model %.3fx (%+.1f%%: %s 15%%). "
            "b = 3 over b = 2: measured %.3fx, model %.3fx.\n\n",
            s_meas, s_model, gap, fabs(gap) <= 15 ? "within" : "NOT within", t_meas, t_model);
    bench_tprintf(md, "Mean time per chunk of each engine inside the pipeline (µs; alone: the model's "
                "input):\n\n| engine | alone |");
    for (int b = 0; b < OV_BUFFERS; b++) bench_tprintf(md, " b=%d |", b + 1);
    bench_tprintf(md, "\n|---|---|");
    for (int b = 0; b < OV_BUFFERS; b++) bench_tprintf(md, "---|");
    bench_tprintf(md, "\n");
    double alone[3 * OV_MAX_CHUNKS];
    ov_alone_times(c, alone);
    for (int e = 0; e < 3; e++) {
        double sum = 0;
        for (int i = 0; i < c->chunks; i++) sum += alone[e * c->chunks + i];
        bench_tprintf(md, "| %s | %.1f |", qmm_model_engine_name(e), sum / c->chunks);
        for (int b = 0; b < OV_BUFFERS; b++) bench_tprintf(md, " %.1f |", c->res[b].mean_dur[e]);
        bench_tprintf(md, "\n");
    }
    bench_tprintf(md, "\nTimelines (digit = chunk %% 10, '.' = idle; measured from CUDA events, model "
                "fed with the engine times alone; same scale within each b):\n\n```\n");
    for (int b = 0; b < OV_BUFFERS; b++) {
        const ov_result *r = &c->res[b];
        double span = fmax(ov_makespan(r->seg, c->chunks), r->model_alone);
        double dt = span / env->o.gantt_cols;
        char title[160];
        snprintf(title, sizeof title, "b=%d measured %.3f ms (one column = %.1f us)", r->b,
                 ov_makespan(r->seg, c->chunks) / 1000, dt);
        gantt(md, title, r->seg, c->chunks, dt, env->o.gantt_cols);
        snprintf(title, sizeof title, "b=%d model    %.3f ms", r->b, r->model_alone / 1000);
        gantt(md, title, r->model_seg, c->chunks, dt, env->o.gantt_cols);
        if (b + 1 < OV_BUFFERS) bench_tprintf(md, "\n");
        csv_segments(env, c, r->b, "measured", r->seg);
        csv_segments(env, c, r->b, "model", r->model_seg);
    }
    bench_tprintf(md, "```\n\n");
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

int bench_overlap_main(int argc, char **argv)
{
    ov_opts opts;
    int pr = parse_args(argc, argv, &opts);
    if (pr) return pr > 0 ? 0 : 2;
    if (!bench_have_gpu("qmm bench overlap", opts.device)) return 2;
    ov_env *env = calloc(1, sizeof *env);
    if (!env) return 1;
    env->o = opts;
    const ov_opts *o = &env->o;
    bench_set_activity("%s", "creating the context");
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
    char commit[80], date[32];
    bench_commit(o->commit, commit, sizeof commit);
    bench_date_utc(date, sizeof date);
    bench_text *md = &env->md;
    const qmm_gpu_info *in = &env->info;
    bench_tprintf(md, "# qmm bench overlap\n\n");
    bench_tprintf(md, "- GPU: %s (sm_%d%d, %d SMs), driver %d.%d, runtime %d.%d\n", in->name,
            in->cc_major, in->cc_minor, in->sm_count, in->driver_version / 1000,
            in->driver_version % 1000 / 10, in->runtime_version / 1000,
            in->runtime_version % 1000 / 10);
    bench_tprintf(md, "- date: %s, commit: %s, seed: %llu, repetitions: %d\n", date, commit,
            (unsigned long long)o->seed, o->reps);
    bench_tprintf(md, "- command: qmm bench");
    for (int i = 0; i < argc; i++) bench_tprintf(md, " %s", argv[i]);
    bench_tprintf(md, "\n- engines: load = H2D cudaMemcpyAsync from pinned memory, compute = "
                "qmm_cuda_matmul path TILED (default stages), store = D2H; each on its own "
                "stream; times from CUDA events\n\n");
    if (env->csv) {
        fprintf(env->csv, "# gpu: %s\n# driver: %d\n# runtime: %d\n# date: %s\n# commit: %s\n",
                in->name, in->driver_version, in->runtime_version, date, commit);
        fprintf(env->csv, "config,buffers,kind,chunk,engine,rows,start_us,end_us\n");
    }

    ov_copy_engines(env);

    /* compute-heavy and copy-heavy: uniform chunks */
    int n = o->chunks;
    ov_data heavy_d, copy_d, bal_d;
    ov_data_create(env, &heavy_d, o->compute_k, o->compute_n, (int64_t)n * o->compute_m, NULL,
                o->seed);
    static ov_case heavy, copyc, bal, jit; /* large: keep them off the stack */
    ov_case_init(&heavy, "compute-heavy", "uniform", &heavy_d, o->compute_m, n);
    run_case(env, &heavy);

    ov_data_create(env, &copy_d, o->copy_k, o->copy_n, (int64_t)n * o->copy_m, NULL, o->seed + 1);
    ov_case_init(&copyc, "copy-heavy", "uniform", &copy_d, o->copy_m, n);
    run_case(env, &copyc);
    ov_data_free(&copy_d, 1);

    /* balanced (compute ≈ upload), the same A as compute-heavy: uniform, then alternating
     * chunk sizes m, m/ratio (per-chunk times that vary: where a third buffer can help) */
    int64_t nb = balanced_n(&heavy);
    ov_data_create(env, &bal_d, o->compute_k, nb, (int64_t)n * o->compute_m, heavy_d.a_host,
                o->seed + 2);
    ov_case_init(&bal, "balanced", "uniform", &bal_d, o->compute_m, n);
    run_case(env, &bal);
    static char alt_what[64];
    int64_t small = o->compute_m / o->ratio > 0 ? o->compute_m / o->ratio : 1;
    snprintf(alt_what, sizeof alt_what, "alternating %lld and %lld rows", (long long)o->compute_m,
             (long long)small);
    ov_case_init(&jit, "balanced-alternating", alt_what, &bal_d, o->compute_m, n);
    for (int i = 0; i < n; i++) jit.rows[i] = i % 2 ? small : o->compute_m;
    run_case(env, &jit);
    bench_tprintf(md,
            "Jitter: with uniform chunks b = 3 over b = 2 is measured %.3fx (model %.3fx); with "
            "alternating chunk sizes %.3fx (model %.3fx). A third buffer pays only when "
            "per-chunk times vary.\n\n",
            bal.res[1].med / bal.res[2].med, bal.res[1].model_alone / bal.res[2].model_alone,
            jit.res[1].med / jit.res[2].med, jit.res[1].model_alone / jit.res[2].model_alone);
    ov_data_free(&bal_d, 0);
    ov_data_free(&heavy_d, 1);

    fputs(md->p, stdout);
    if (o->out_md) bench_write_text("qmm bench overlap", o->out_md, md->p);
    if (env->csv && fclose(env->csv)) {
        fprintf(stderr, "qmm bench overlap: cannot write %s\n", o->out_csv);
        return 1;
    }
    for (int j = 0; j < 6 * OV_MAX_CHUNKS; j++) cudaEventDestroy((cudaEvent_t)env->events[j]);
    cudaEventDestroy(env->e0), cudaEventDestroy(env->e1);
    cudaStreamDestroy(env->s);
    qmm_cuda_destroy(env->ctx);
    free(md->p), free(env);
    return 0;
}

#endif /* QMM_HAVE_CUDA */
