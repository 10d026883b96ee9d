/* `qmm bench ops`: one (shape, M) case. Every contender runs on the same A and weight, is checked
 * against the CPU reference with its output (and workspace) poisoned first, and only then timed.
 * A contender that fails is reported and not timed. */
#ifdef QMM_HAVE_CUDA

#include <math.h>
#include <string.h>

#include "bench_gpu.h"
#include "bench_read.h"
#include "internal.h"
#include "tune/sm90.h"

#define MAX_CONTENDERS 48

typedef struct contender {
    char name[16];
    int cublas;               /* 1: cuBLAS bf16 on the dequantized weight */
    int read;                 /* 1: only stream the weight's bytes (bench_read.cu) */
    int narrow;               /* 1: planned with 128-token tiles where the table's rule takes 256 */
    qmm_cuda_options opt;     /* qmm contenders */
} contender;

/* What one enqueued call needs. */
typedef struct call_ctx {
    const bench_case *c;
    const contender *ct;
    void *ws;
    size_t ws_bytes;
    int sm_count; /* the read contender's grid */
} call_ctx;

static int enqueue(void *user, int call, char *why, size_t why_len)
{
    call_ctx *x = user;
    const bench_case *c = x->c;
    if (x->ct->cublas) {
        const void *w = c->cp->bf16[call % c->cp->n_bf16];
        cublasStatus_t st = bench_cublas_matmul(c->cb, c->a_dev, c->m, w, c->shape->n,
                                                c->shape->k, c->c_dev);
        if (st != CUBLAS_STATUS_SUCCESS) {
            snprintf(why, why_len, "cublasGemmEx: %s", cublasGetStatusString(st));
            return -1;
        }
        return 0;
    }
    const qmm_cuda_weight *w = c->cp->w4[call % c->cp->n_w4];
    if (x->ct->read) {
        if (bench_read_weight(w, x->sm_count, x->ws, c->s) != 0) {
            snprintf(why, why_len, "read kernel launch failed");
            return -1;
        }
        return 0;
    }
    qmm_status st = qmm_cuda_matmul(c->ctx, c->a_dev, c->m, w, c->c_dev, x->ws, x->ws_bytes,
                                    &x->ct->opt, NULL);
    if (st != QMM_OK) {
        snprintf(why, why_len, "qmm_cuda_matmul: %s: %s", qmm_status_name(st), qmm_last_error());
        return -1;
    }
    return 0;
}

static contender qmm_contender(const bench_case *c, const char *name, qmm_path path, int split,
                               int stages)
{
    const bench_opts *o = c->o;
    contender ct;
    memset(&ct, 0, sizeof ct);
    snprintf(ct.name, sizeof ct.name, "%s", name);
    ct.opt = qmm_cuda_options_default();
    ct.opt.path = path;
    ct.opt.split = split;
    ct.opt.stages = stages;
    ct.opt.policy = (qmm_policy)o->policy;
    ct.opt.group = c->shape->group; /* the plan and exact workspace of this weight */
    return ct;
}

/* auto, tiled, the wgmma family (its plan, unsplit, stream-K, clusters where AUTO takes it, and
 * 128-token tiles where it takes 256), split-K at the plan's split, split-K at every valid split
 * up to the tuning table's cap, matvec (M within the kernel's limit), qmm's dense path (M from
 * the table's dense_min_m), cuBLAS, and optionally tiled at stages 1..4. */
static int build_contenders(const bench_case *c, const qmm_plan *plan, contender *list)
{
    const bench_opts *o = c->o;
    qmm_device_desc d;
    if (qmm_cuda_device_desc(c->ctx, &d) != QMM_OK) return 0;
    int n = 0;
    list[n++] = qmm_contender(c, "auto", QMM_PATH_AUTO, 0, 0);
    list[n++] = qmm_contender(c, "tiled", QMM_PATH_TILED, 0, 0);
    list[n++] = qmm_contender(c, "wgmma_s1", QMM_PATH_WGMMA, 1, 0);
    list[n++] = qmm_contender(c, "wgmma", QMM_PATH_WGMMA, 0, 0);
    list[n++] = qmm_contender(c, "streamk", QMM_PATH_STREAMK, 0, 0);
    /* the wgmma kernel's split-K in clusters (DSMEM reduction), where the plan takes the kernel */
    if (d.wgmma_min_m > 0 && c->m >= d.wgmma_min_m && c->m <= d.wgmma_max_m)
        for (int s = 2; s <= QMM_SM90_MAX_CLUSTER && s <= c->shape->k / QMM_GROUP; s++)
            list[n++] = qmm_contender(c, "cluster", QMM_PATH_WGMMA, s, 0);
    /* from the table's wide_min_m the family plans 256-token tiles: its 128-token schedules
     * beside them (unsplit, stream-K, and the family's own choice), for the model's fit */
    if (d.wgmma_min_m > 0 && d.wgmma_wide_min_m > 0 && c->m >= d.wgmma_wide_min_m) {
        list[n] = qmm_contender(c, "t128", QMM_PATH_WGMMA, 0, 0);
        list[n++].narrow = 1;
        list[n] = qmm_contender(c, "t128_s1", QMM_PATH_WGMMA, 1, 0);
        list[n++].narrow = 1;
        list[n] = qmm_contender(c, "t128_sk", QMM_PATH_STREAMK, 0, 0);
        list[n++].narrow = 1;
    }
    if (plan->path == QMM_PATH_SPLITK && plan->split > 1)
        list[n++] = qmm_contender(c, "splitk_plan", QMM_PATH_SPLITK, plan->split, 0);
    for (int s = 2; s <= d.max_split; s++)
        if (c->shape->k % ((int64_t)s * QMM_GROUP) == 0)
            list[n++] = qmm_contender(c, "splitk", QMM_PATH_SPLITK, s, 0);
    if (c->m <= d.matvec_limit_m)
        list[n++] = qmm_contender(c, "matvec", QMM_PATH_MATVEC, 0, 0);
    if (c->m >= d.dense_min_m) list[n++] = qmm_contender(c, "dense", QMM_PATH_DENSE, 0, 0);
    if (c->m <= d.matvec_limit_m) { /* the floor of a kernel that reads the weight */
        contender rd;
        memset(&rd, 0, sizeof rd);
        snprintf(rd.name, sizeof rd.name, "read");
        rd.read = 1;
        list[n++] = rd;
    }
    contender cb;
    memset(&cb, 0, sizeof cb);
    snprintf(cb.name, sizeof cb.name, "cublas");
    cb.cublas = 1;
    list[n++] = cb;
    static const char *const stage_names[] = {"tiled_st1", "tiled_st2", "tiled_st3", "tiled_st4"};
    if (o->stages_sweep)
        for (int st = 1; st <= 4; st++)
            list[n++] = qmm_contender(c, stage_names[st - 1], QMM_PATH_TILED, 0, st);
    return n;
}

static void ensure_workspace(const bench_case *c, size_t need)
{
    if (need <= *c->ws_bytes) return;
    CK(cudaStreamSynchronize(c->s));
    if (*c->ws) CK(cudaFree(*c->ws));
    *c->ws = NULL;
    *c->ws_bytes = 0;
    CK(cudaMalloc(c->ws, need));
    *c->ws_bytes = need;
}

/* The checked rows of C into c->got [nrows, N]. */
static void fetch_rows(const bench_case *c)
{
    size_t row_bytes = (size_t)c->shape->n * sizeof(qmm_bf16);
    if (c->nrows == c->m) {
        CK(cudaMemcpyAsync(c->got, c->c_dev, row_bytes * (size_t)c->m, cudaMemcpyDeviceToHost, c->s));
    } else {
        for (int i = 0; i < c->nrows; i++)
            CK(cudaMemcpyAsync(c->got + (size_t)i * (size_t)c->shape->n,
                               c->c_dev + (size_t)c->rows[i] * (size_t)c->shape->n, row_bytes,
                               cudaMemcpyDeviceToHost, c->s));
    }
    CK(cudaStreamSynchronize(c->s));
}

static void fail(bench_result *r, const char *why)
{
    r->status = BENCH_FAIL;
    snprintf(r->why, sizeof r->why, "%s", why);
}

/* Poison, run once on copy 0, compare with the CPU. 0 pass, -1 fail (r->why says). */
static int check(const bench_case *c, call_ctx *x, bench_result *r)
{
    size_t c_bytes = (size_t)c->m * (size_t)c->shape->n * sizeof(qmm_bf16);
    char why[160] = "";
    /* 0xFFFF is a bf16 NaN: an element the contender never writes cannot pass. */
    CK(cudaMemsetAsync(c->c_dev, 0xFF, c_bytes, c->s));
    if (x->ws && x->ws_bytes) CK(cudaMemsetAsync(x->ws, 0xFF, x->ws_bytes, c->s));
    if (x->ct->read) { /* no output to check: run it once */
        r->checked_rows = 0;
        r->rel_err = 0.0;
        if (enqueue(x, 0, why, sizeof why)) {
            fail(r, why);
            return -1;
        }
        CK(cudaStreamSynchronize(c->s));
        return 0;
    }
    if (x->ct->cublas) {
        if (enqueue(x, 0, why, sizeof why)) {
            fail(r, why);
            return -1;
        }
    } else {
        qmm_plan ran;
        memset(&ran, 0, sizeof ran);
        qmm_status st = qmm_cuda_matmul(c->ctx, c->a_dev, c->m, c->cp->w4[0], c->c_dev, x->ws,
                                        x->ws_bytes, &x->ct->opt, &ran);
        if (st != QMM_OK) {
            snprintf(why, sizeof why, "qmm_cuda_matmul: %s: %s", qmm_status_name(st),
                     qmm_last_error());
            fail(r, why);
            return -1;
        }
        r->path = ran.path;
        r->split = ran.split > 0 ? ran.split : 1;
        r->tile_m = ran.tile_m;
        r->tile_n = ran.tile_n;
        r->config = ran.config;
        r->run_predicted_us = ran.predicted_us;
    }
    CK(cudaStreamSynchronize(c->s));
    CK(cudaGetLastError());
    fetch_rows(c);
    size_t nonfinite = 0;
    r->checked_rows = c->nrows;
    r->rel_err = bench_rel_frob(c->got, c->ref, (size_t)c->nrows * (size_t)c->shape->n, &nonfinite);
    if (nonfinite) {
        snprintf(why, sizeof why, "%zu non-finite outputs in %d checked rows", nonfinite, c->nrows);
        fail(r, why);
        return -1;
    }
    if (!(r->rel_err <= BENCH_TOLERANCE)) {
        snprintf(why, sizeof why, "relative Frobenius error %.3g > %.0e vs the CPU", r->rel_err,
                 BENCH_TOLERANCE);
        fail(r, why);
        return -1;
    }
    return 0;
}

static int run_contender_as_is(const bench_case *c, const contender *ct, const qmm_plan *plan,
                               bench_results *rs);

/* A narrow contender plans under the table with 128-token tiles at every M (wide_min_m 0),
 * restored after it. */
static int run_contender(const bench_case *c, const contender *ct, const qmm_plan *plan,
                         bench_results *rs)
{
    qmm_device_desc *d = ct->narrow ? qmm_cuda_desc_for_bench(c->ctx) : NULL;
    const int wide = d ? d->wgmma_wide_min_m : 0;
    if (d) d->wgmma_wide_min_m = 0;
    const int failed = run_contender_as_is(c, ct, plan, rs);
    if (d) d->wgmma_wide_min_m = wide;
    return failed;
}

static int run_contender_as_is(const bench_case *c, const contender *ct, const qmm_plan *plan,
                               bench_results *rs)
{
    const bench_shape *sh = c->shape;
    bench_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.proj, sizeof r.proj, "%s", sh->name);
    r.k = sh->k;
    r.n = sh->n;
    r.m = c->m;
    snprintf(r.contender, sizeof r.contender, "%.15s", ct->name);
    r.path = ct->read ? -2 : ct->cublas ? -1 : (int)ct->opt.path;
    r.split = ct->cublas ? 1 : ct->opt.split > 0 ? ct->opt.split : 1;
    r.stages = ct->cublas ? 0 : ct->opt.stages;
    r.rel_err = NAN;
    r.t.graph_med = r.t.graph_min = r.t.graph_max = NAN;
    r.t.eager_med = r.t.eager_min = r.t.eager_max = NAN;
    r.flops = 2.0 * (double)c->m * (double)sh->n * (double)sh->k;
    double io = (double)c->m * (double)(sh->k + sh->n) * sizeof(qmm_bf16);
    r.bytes = io + (double)(ct->cublas ? c->cp->bf16_bytes : c->cp->w4_logical_bytes);
    r.plan_path = plan->path;
    r.plan_split = plan->split;
    r.plan_rest_tiles = plan->rest_tiles;
    r.plan_rest_split = plan->rest_split;
    r.predicted_us = plan->predicted_us;
    r.run_predicted_us = -1.0;
    r.config = -1;

    call_ctx x = {c, ct, NULL, 0, 0};
    bench_set_activity("%s M=%lld %s split=%d stages=%d: check", sh->name, (long long)c->m,
                       ct->name, r.split, r.stages);
    if (ct->read) {
        ensure_workspace(c, 16); /* the sink word */
        x.ws = *c->ws;
        qmm_gpu_info gi;
        memset(&gi, 0, sizeof gi);
        if (qmm_cuda_info(c->ctx, &gi) != QMM_OK) fail(&r, "qmm_cuda_info failed");
        x.sm_count = gi.sm_count;
        r.flops = 0.0;
        r.bytes = (double)c->cp->w4_logical_bytes;
    } else if (!ct->cublas) {
        size_t need = 0;
        qmm_status st = qmm_cuda_workspace_size(c->ctx, c->m, sh->n, sh->k, &ct->opt, &need);
        if (st != QMM_OK) {
            char why[160];
            snprintf(why, sizeof why, "qmm_cuda_workspace_size: %s: %s", qmm_status_name(st),
                     qmm_last_error());
            fail(&r, why);
        } else {
            ensure_workspace(c, need);
            x.ws = need ? *c->ws : NULL;
            x.ws_bytes = need;
        }
    }
    if (r.status == BENCH_PASS && check(c, &x, &r) == 0) {
        bench_set_activity("%s M=%lld %s split=%d stages=%d: timing", sh->name, (long long)c->m,
                           ct->name, r.split, r.stages);
        bench_timing_req q = {c->o->calls, ct->cublas ? c->cp->n_bf16 : c->cp->n_w4, c->o->reps,
                              c->o->target_replay_us};
        char why[160] = "";
        if (bench_time_calls(c->s, enqueue, &x, &q, &r.t, why, sizeof why)) fail(&r, why);
    }
    if (!bench_results_push(rs, &r))
        bench_die("bench_results_push", "out of host memory", __FILE__, __LINE__);
    return r.status != BENCH_PASS;
}

int bench_run_case(const bench_case *c, bench_results *rs)
{
    qmm_cuda_options ao = qmm_cuda_options_default();
    ao.policy = (qmm_policy)c->o->policy;
    ao.group = c->shape->group;
    qmm_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.predicted_us = -1.0;
    if (qmm_cuda_plan(c->ctx, c->m, c->shape->n, c->shape->k, &ao, &plan) != QMM_OK) {
        fprintf(stderr, "qmm bench ops: WARNING: qmm_cuda_plan(%s, M=%lld) failed: %s\n",
                c->shape->name, (long long)c->m, qmm_last_error());
        memset(&plan, 0, sizeof plan);
        plan.predicted_us = -1.0;
    }
    contender list[MAX_CONTENDERS];
    int n = build_contenders(c, &plan, list), failures = 0;
    for (int i = 0; i < n; i++) failures += run_contender(c, &list[i], &plan, rs);
    return failures;
}

#else
typedef int bench_case_unused; /* CUDA builds only */
#endif
