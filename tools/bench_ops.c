/*
 * `qmm bench ops`: every selected projection × M, qmm's paths beside cuBLAS bf16 on the same GPU
 * in one process (DESIGN.md §8). Order of work: machine facts → ceilings (copy kernel, cuBLAS
 * 8192³) → per shape: random weight, device copies → per M: random A, CPU reference of the
 * checked rows, every contender checked then timed (bench_case.c) → reports rewritten after
 * every case, so a crash keeps what was measured. Markdown on stdout at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_ops.h"
#include "internal.h"
#include "commands.h"

#ifdef QMM_HAVE_CUDA
#include "bench_gpu.h"

typedef struct ops_state {
    bench_opts o;
    bench_meta meta;
    bench_ceilings ceil;
    bench_model_setup model;
    bench_results rs;
    int failures;
} ops_state;

/* Model points + calibration from the results so far, then every requested file (and stdout at
 * the end). */
static void write_outputs(ops_state *st, int final)
{
    bench_model_point *pts = malloc(sizeof *pts * (st->rs.n ? st->rs.n : 1));
    bench_calibration cal;
    int npts = pts ? bench_model_collect(&st->rs, &st->model, pts, (int)st->rs.n) : 0;
    bench_model_calibrate(&st->model, pts, npts, &cal);
    bench_report r = {&st->o, &st->meta, &st->ceil, &st->rs, &st->model, pts, npts, &cal};
    if (st->o.out_md) bench_write_file(st->o.out_md, bench_write_md, &r);
    if (st->o.out_csv) bench_write_file(st->o.out_csv, bench_write_csv, &r);
    if (st->o.out_json) bench_write_file(st->o.out_json, bench_write_json, &r);
    if (final) {
        bench_write_md(stdout, &r);
        fflush(stdout);
    }
    free(pts);
}

static void progress(const ops_state *st, int done, int total, const bench_shape *sh, int64_t m,
                     int failures, double seconds)
{
    const bench_results *rs = &st->rs;
    const bench_result *au = bench_results_find(rs, sh->name, m, "auto", 0);
    const bench_result *ti = bench_results_find(rs, sh->name, m, "tiled", 0);
    const bench_result *mv = bench_results_find(rs, sh->name, m, "matvec", 0);
    const bench_result *cb = bench_results_find(rs, sh->name, m, "cublas", 0);
    const bench_result *bs = bench_results_best_split(rs, sh->name, m);
    char t[5][32];
    const bench_result *show[4] = {au, ti, mv, cb};
    for (int i = 0; i < 4; i++) {
        if (!show[i]) snprintf(t[i], sizeof t[i], "-");
        else if (show[i]->status != BENCH_PASS) snprintf(t[i], sizeof t[i], "FAIL");
        else snprintf(t[i], sizeof t[i], "%.2f", show[i]->t.graph_med);
    }
    if (bs) snprintf(t[4], sizeof t[4], "%.2f (s=%d)", bs->t.graph_med, bs->split);
    else snprintf(t[4], sizeof t[4], "-");
    fprintf(stderr, "[%3d/%d] %-6s %lld->%lld M=%-5lld plan %s/%d | auto %s tiled %s split-K %s "
                    "matvec %s cuBLAS %s us",
            done, total, sh->name, (long long)sh->k, (long long)sh->n, (long long)m,
            au && au->plan_path > 0 ? qmm_path_name((qmm_path)au->plan_path) : "?",
            au ? au->plan_split : 0, t[0], t[1], t[4], t[2], t[3]);
    if (au && cb && au->status == BENCH_PASS && cb->status == BENCH_PASS)
        fprintf(stderr, " | auto %.2fx cuBLAS", cb->t.graph_med / au->t.graph_med);
    if (failures) fprintf(stderr, " | %d FAILED", failures);
    fprintf(stderr, " [%.1f s]\n", seconds);
}

static void *host_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) bench_die("malloc", "out of host memory", __FILE__, __LINE__);
    return p;
}

/* All M of one shape. Returns the number of cases done. */
static int run_shape(ops_state *st, cudaStream_t s, qmm_cuda_ctx *ctx, bench_cublas *cb,
                     bench_rng *rng, const bench_shape *sh, int done, int total)
{
    const bench_opts *o = &st->o;
    int64_t n = sh->n, k = sh->k, mmax = 1;
    for (int i = 0; i < o->m_count; i++)
        if (o->ms[i] > mmax) mmax = o->ms[i];

    bench_set_activity("%s: random weight %lldx%lld", sh->name, (long long)n, (long long)k);
    qmm_w4 w;
    CKQ(qmm_w4_alloc_group(n, k, sh->group, &w));
    bench_random_w4(rng, &w);
    qmm_bf16 *wb = host_alloc((size_t)n * (size_t)k * sizeof *wb);
    CKQ(qmm_dequantize(&w, wb, QMM_BF16, (size_t)n * (size_t)k));
    bench_copies cp;
    bench_copies_create(&cp, ctx, &w, wb, st->meta.l2_bytes, o);
    free(wb);
    fprintf(stderr, "qmm bench ops: %s %lld->%lld: %d W4 copies of %.2f MB, %d bf16 copies of "
                    "%.2f MB\n",
            sh->name, (long long)k, (long long)n, cp.n_w4, cp.w4_bytes / 1e6, cp.n_bf16,
            cp.bf16_bytes / 1e6);

    qmm_bf16 *a_dev = NULL, *c_dev = NULL;
    void *ws = NULL;
    size_t ws_bytes = 0;
    CK(cudaMalloc((void **)&a_dev, (size_t)mmax * (size_t)k * sizeof(qmm_bf16)));
    CK(cudaMalloc((void **)&c_dev, (size_t)mmax * (size_t)n * sizeof(qmm_bf16)));
    qmm_bf16 *a = host_alloc((size_t)mmax * (size_t)k * sizeof *a);
    qmm_bf16 *a_rows = host_alloc((size_t)BENCH_FULL_CHECK_ROWS * (size_t)k * sizeof *a_rows);
    qmm_bf16 *ref = host_alloc((size_t)BENCH_FULL_CHECK_ROWS * (size_t)n * sizeof *ref);
    qmm_bf16 *got = host_alloc((size_t)BENCH_FULL_CHECK_ROWS * (size_t)n * sizeof *got);
    int64_t rows[BENCH_FULL_CHECK_ROWS];

    for (int i = 0; i < o->m_count; i++) {
        int64_t m = o->ms[i];
        double t0 = (qmm_now_ms() * 1e-3);
        bench_set_activity("%s M=%lld: CPU reference", sh->name, (long long)m);
        bench_random_bf16(rng, a, (size_t)m * (size_t)k);
        int nrows = bench_check_rows(m, rows);
        const qmm_bf16 *a_ref = a;
        if (nrows != m) {
            for (int r = 0; r < nrows; r++)
                memcpy(a_rows + (size_t)r * (size_t)k, a + (size_t)rows[r] * (size_t)k,
                       (size_t)k * sizeof *a);
            a_ref = a_rows;
        }
        CKQ(qmm_matmul_cpu(a_ref, nrows, &w, ref, o->cpu_threads));
        CK(cudaMemcpyAsync(a_dev, a, (size_t)m * (size_t)k * sizeof *a, cudaMemcpyHostToDevice, s));
        CK(cudaStreamSynchronize(s));

        bench_case c = {o,    s,     ctx,   cb,    sh,  m,   &cp, a_dev,
                        c_dev, &ws, &ws_bytes, rows, nrows, ref, got};
        int f = bench_run_case(&c, &st->rs);
        st->failures += f;
        progress(st, done + i + 1, total, sh, m, f, (qmm_now_ms() * 1e-3) - t0);
        write_outputs(st, 0);
    }

    CK(cudaStreamSynchronize(s));
    CK(cudaFree(a_dev));
    CK(cudaFree(c_dev));
    if (ws) CK(cudaFree(ws));
    free(a);
    free(a_rows);
    free(ref);
    free(got);
    bench_copies_free(&cp);
    qmm_w4_free(&w);
    return o->m_count;
}

/* The model's inputs: this run's ceilings, and the resident blocks per SM of each tiled kernel
 * configuration as qmm_cuda_info reports them (--model-bps overrides). */
static void setup_model(ops_state *st, qmm_cuda_ctx *ctx)
{
    qmm_gpu_info info;
    memset(&info, 0, sizeof info);
    if (qmm_cuda_info(ctx, &info) != QMM_OK)
        fprintf(stderr, "qmm bench ops: WARNING: qmm_cuda_info failed (%s); the model keeps the "
                        "preset blocks per SM\n", qmm_last_error());
    int n = (int)(sizeof info.tiled_blocks_per_sm / sizeof info.tiled_blocks_per_sm[0]);
    bench_model_setup_init(&st->model, st->meta.sms, &st->ceil, info.tiled_blocks_per_sm, n,
                           st->o.model_blocks_per_sm);
    if (!st->model.ok) fprintf(stderr, "qmm bench ops: WARNING: %s\n", st->model.why);
}

static int run(int argc, char **argv)
{
    ops_state *st = calloc(1, sizeof *st);
    if (!st) return 1;
    int rc = bench_parse_args(argc, argv, &st->o);
    if (rc) {
        free(st);
        return rc > 0 ? 0 : 2;
    }
    bench_opts *o = &st->o;
    if (!bench_have_gpu("qmm bench ops", o->device)) {
        free(st);
        return 2;
    }
    if (!o->seed_given) o->seed = bench_seed_from_clock();

    bench_set_activity("setting up device %d", o->device);
    CK(cudaSetDevice(o->device));
    cudaStream_t s;
    /* Non-blocking: the legacy default stream cannot be captured, and nothing else implicitly
     * synchronises with the timed work. The qmm context and cuBLAS both use this stream. */
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    qmm_cuda_ctx *ctx = NULL;
    CKQ(qmm_cuda_create(o->device, (void *)s, &ctx));
    bench_meta_fill(&st->meta, o, argc, argv);
    bench_cublas cb;
    memset(&cb, 0, sizeof cb);
    bench_cublas_init(&cb, s);
    st->meta.cublas_version = cb.version;
    bench_rng rng = {o->seed};
    fprintf(stderr, "qmm bench ops: %s, %d SMs, L2 %.0f MiB, driver %d, runtime %d, cuBLAS %d; "
                    "seed %llu (--seed to repeat); weights %s\n",
            st->meta.gpu, st->meta.sms, st->meta.l2_bytes / 1048576.0, st->meta.driver_version,
            st->meta.runtime_version, cb.version, (unsigned long long)o->seed,
            o->hot ? "hot" : "cold");

    bench_measure_ceilings(s, &cb, o, &rng, &st->ceil);
    fprintf(stderr, "qmm bench ops: copy ceiling %.0f GB/s (%s)\nqmm bench ops: bf16 ceiling "
                    "%.1f TFLOP/s (%s)\n",
            st->ceil.copy.value, st->ceil.copy.note, st->ceil.cublas.value, st->ceil.cublas.note);
    setup_model(st, ctx);

    int total = o->shape_count * o->m_count, done = 0;
    for (int i = 0; i < o->shape_count; i++)
        done += run_shape(st, s, ctx, &cb, &rng, &o->shapes[i], done, total);

    write_outputs(st, 1);
    if (st->failures)
        fprintf(stderr, "qmm bench ops: %d contender(s) FAILED the CPU check or timing (see the "
                        "Failures section)\n", st->failures);
    rc = st->failures ? 1 : 0;
    bench_cublas_destroy(&cb);
    qmm_cuda_destroy(ctx);
    CK(cudaStreamDestroy(s));
    bench_results_free(&st->rs);
    free(st);
    return rc;
}
#endif /* QMM_HAVE_CUDA */

int bench_ops_main(int argc, char **argv)
{
#ifdef QMM_HAVE_CUDA
    return run(argc, argv);
#else
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            bench_usage(stdout);
            return 0;
        }
    fprintf(stderr, "qmm bench ops: needs a CUDA build; this qmm was built without nvcc "
                    "(configure with the CUDA toolkit present and -DQMM_CUDA=ON)\n");
    return 2;
#endif
}
