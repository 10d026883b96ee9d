/*
 * `qmm bench e2e --tp 1,2` and `qmm bench allreduce`: tensor-parallel measurements (issue 16).
 *
 * e2e: for each t, t ranks (one process per GPU, the launcher) make the same model, each keeps
 * its shard (t = 1: today's single-GPU session), and for each
 * prompt length run `warmup` untimed and `repeats` timed greedy generations (medians; prefill =
 * the forward that yields the first token, decode = the remaining single-token steps, CUDA
 * events, the step in its CUDA graph with the collectives inside). Then one eagerly profiled
 * prefill and decode step give the collectives' time a step (the "all-reduce" and "all-gather"
 * marks of the forward) and their share of that step. Beside it: `qmm perf tp`'s prediction
 * (a model, not a measurement) at the same t and context.
 * Each row says which decode step ran (fused where it applies, at any t; --fuse off: unfused).
 * allreduce: bf16 sum over t ranks, 8 KB to 64 MB, each size a CUDA graph of many all-reduces,
 * median of 7; algorithm and bus bandwidth (NCCL's definitions) and a two-point link fit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "internal.h"
#include "perf/tp_model.h"
#include "tp_cli.h"

#define TPB_LENS 8

typedef struct tpb_args {
    const char *model, *csv;
    int64_t in_len[TPB_LENS];
    int nin;
    long long out_len, warmup, repeats, seed;
    int fuse; /* fused projections and, where it applies, the fused decode step */
    double link_gbs, link_us;
} tpb_args;

static void e2e_usage(FILE *f)
{
    fprintf(f,
            "usage: qmm bench e2e --tp 1,2 [--model PRESET|DIR] [--input-len 32,128,2048]\n"
            "                     [--output-len 65] [--warmup 1] [--repeats 3] [--seed S]\n"
            "                     [--csv FILE] [--link-gbs B] [--link-us U] [--fuse on|off]\n"
            "  for each t: t ranks (one process per GPU, rank r on device r); medians of the\n"
            "  timed generations, the collectives' time and share of one profiled step, and\n"
            "  the `qmm perf tp` prediction beside (--link-*: the all-reduce sweep's fit);\n"
            "  --fuse off: separate projections and the unfused decode step at every t (the\n"
            "  'decode step' column says which ran)\n");
}

static int parse_lens(const char *v, tpb_args *a)
{
    a->nin = 0;
    for (const char *p = v; *p;) {
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p || x < 1 || x > 1 << 20 || (*end && *end != ',') || a->nin == TPB_LENS)
            return 0;
        a->in_len[a->nin++] = x;
        p = *end ? end + 1 : end;
    }
    return a->nin > 0;
}

static int parse_e2e(int argc, char **argv, tpb_args *a)
{
    memset(a, 0, sizeof *a);
    a->model = "qwen3-8b";
    a->in_len[0] = 32, a->in_len[1] = 128, a->in_len[2] = 2048, a->nin = 3;
    a->out_len = 65, a->warmup = 1, a->repeats = 3, a->seed = 1, a->fuse = 1;
    a->link_gbs = TP_LINK_GBS_MEASURED, a->link_us = TP_LINK_US_MEASURED;
    const char *cmd = "bench e2e";
    /* the single-GPU driver's own options: `qmm bench e2e --help` lists them beside --tp */
    static const char *const single_gpu[] = {"--no-verify", "--verify", "--profile", "--split-k",
                                             "--out", "--json", "--device", "--pdl", "--decode",
                                             "--max-seq"};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (cli_is_help(o)) {
            e2e_usage(stdout);
            return 0;
        }
        for (size_t j = 0; j < sizeof single_gpu / sizeof single_gpu[0]; j++)
            if (!strcmp(o, single_gpu[j])) {
                fprintf(stderr, "qmm %s: %s is not an option with --tp (the tensor-parallel "
                                "driver's are listed by `qmm bench e2e --tp 1,2 --help`)\n", cmd, o);
                return EXIT_USAGE;
            }
        static const char *const known[] = {"--model",   "--csv",  "--input-len", "--output-len",
                                            "--warmup",  "--repeats", "--seed",   "--link-gbs",
                                            "--link-us", "--fuse",    NULL};
        const char *v = cli_known_value(cmd, known, argc, argv, &i); /* unknown before "needs a value" */
        if (!v) return EXIT_USAGE;
        int ok = 1;
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--csv")) a->csv = v;
        else if (!strcmp(o, "--input-len")) ok = parse_lens(v, a);
        else if (!strcmp(o, "--output-len")) ok = cli_int(cmd, o, v, 2, 1 << 16, &a->out_len);
        else if (!strcmp(o, "--warmup")) ok = cli_int(cmd, o, v, 0, 100, &a->warmup);
        else if (!strcmp(o, "--repeats")) ok = cli_int(cmd, o, v, 1, 64, &a->repeats);
        else if (!strcmp(o, "--seed")) ok = cli_int(cmd, o, v, 0, INT32_MAX, &a->seed);
        else if (!strcmp(o, "--link-gbs")) ok = cli_double(cmd, o, v, 1e-3, 1e6, &a->link_gbs);
        else if (!strcmp(o, "--link-us")) ok = cli_double(cmd, o, v, 0, 1e6, &a->link_us);
        else if (!strcmp(o, "--fuse")) ok = cli_on_off(cmd, o, v, &a->fuse);
        else return cli_unknown(cmd, o);
        if (!ok) {
            if (!strcmp(o, "--input-len"))
                fprintf(stderr, "qmm bench e2e: --input-len '%s': want up to %d lengths in [1, "
                        "1048576], comma-separated\n", v, TPB_LENS);
            return EXIT_USAGE;
        }
    }
    return -1;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ms of the profile's collectives. */
static double comm_ms(const qmm_llm_profile *p)
{
    double ms = 0;
    for (int i = 0; i < p->count; i++)
        if (!strcmp(p->name[i], "all-reduce") || !strcmp(p->name[i], "all-gather")) ms += p->ms[i];
    return ms;
}

static void prompt(int32_t *ids, int64_t n, long long seed, int64_t vocab)
{
    uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 7;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % (uint64_t)vocab);
    }
}

static const char *ROW_HEAD =
    "| t | decode step | prompt | new | prefill ms | prefill tok/s | decode ms/token | "
    "decode tok/s | collectives ms/step (eager) | share | model tok/s | model comm share |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|\n";

/* One length on a rank: medians of the timed runs, then the profiled step. */
static qmm_status measure(const tpb_args *a, tp_rank_ctx *r, int64_t n, FILE *csv)
{
    const int64_t out = a->out_len;
    int32_t *ids = malloc((size_t)n * 4), *toks = malloc((size_t)out * 4);
    double pre[64], dec[64];
    qmm_status st = ids && toks ? QMM_OK : qmm_fail(QMM_ERR_NOMEM, "out of memory");
    if (!st) prompt(ids, n, a->seed, r->full.vocab_size);
    for (long long i = -a->warmup; i < a->repeats && !st; i++) {
        qmm_llm_timing t;
        if ((st = qmm_llm_cuda_reset(r->s)) || (st = qmm_llm_cuda_generate(r->s, ids, n, out, toks, &t)))
            break;
        if (i >= 0) pre[i] = t.prefill_ms, dec[i] = t.decode_ms / (double)(out - 1);
    }
    qmm_llm_profile pp, pd;
    memset(&pp, 0, sizeof pp), memset(&pd, 0, sizeof pd);
    int64_t pn = n < 4096 ? n : 4096;
    if (!st) st = qmm_llm_cuda_profile(r->s, ids, pn, &pp, &pd);
    if (!st && r->env.rank == 0) {
        const int t = r->env.ranks;
        double pm = median(pre, (int)a->repeats), dm = median(dec, (int)a->repeats);
        double cm = comm_ms(&pd), share = pd.total_ms > 0 ? cm / pd.total_ms : 0;
        tp_decode_params p = tp_decode_defaults();
        p.link.bandwidth_gbs = a->link_gbs, p.link.latency_us = a->link_us;
        p.context = n + out / 2;
        /* the step that ran: fused (5 kernels a layer; at t > 1 also the two residual adds
         * after the all-reduces), or the unfused forward (8 a layer); collectives are in comm */
        const int fused = tp_session_decode_fused(r->s);
        p.kernels_per_layer = fused ? (t > 1 ? 7 : 5) : 8;
        tp_decode_estimate e;
        memset(&e, 0, sizeof e);
        int have_model = tp_decode_predict(&r->full, t, &p, &e) == QMM_OK;
        printf("| %d | %s | %lld | %lld | %.3f | %.1f | %.4f | %.1f | %.4f | %.1f%% | %s%.1f | "
               "%.1f%% |\n",
               t, fused ? "fused" : "unfused", (long long)n, (long long)out, pm,
               1000.0 * (double)n / pm, dm, 1000.0 / dm, cm,
               100.0 * share, have_model ? "" : "n/a ", e.tokens_per_s, 100.0 * e.comm_share);
        if (csv)
            fprintf(csv, "%s,%d,%lld,%lld,%.6f,%.6f,%.6f,%.6f,%.6f,%.4f,%zu,%s\n", a->model, t,
                    (long long)n, (long long)out, pm, dm, cm, cm + (comm_ms(&pp)), pd.total_ms,
                    e.tokens_per_s, qmm_llm_model_weight_bytes(r->model),
                    fused ? "fused" : "unfused");
        fflush(stdout);
    }
    free(ids), free(toks);
    return st;
}

static int e2e_rank(const tpb_args *a)
{
    int64_t max_in = 0;
    for (int i = 0; i < a->nin; i++)
        if (a->in_len[i] > max_in) max_in = a->in_len[i];
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    o.fuse_projections = a->fuse;
    tp_rank_ctx r;
    int rc = tp_rank_open("bench e2e", a->model, a->seed, max_in + a->out_len, &o, &r);
    if (rc >= 0) {
        tp_rank_close(&r);
        return rc;
    }
    FILE *csv = NULL;
    if (a->csv && r.env.rank == 0) {
        csv = fopen(a->csv, "a");
        if (csv && !fseek(csv, 0, SEEK_END) && ftell(csv) == 0)
            fprintf(csv, "model,t,prompt,new,prefill_ms,decode_ms_per_token,comm_ms_decode_step,"
                         "comm_ms_prefill_plus_decode,eager_decode_step_ms,model_tok_s,"
                         "weight_bytes_per_rank,decode_step\n");
    }
    if (r.env.rank == 0)
        fprintf(stderr, "t = %d: weights %.0f ms (%.2f GB a rank), session %.0f ms\n", r.env.ranks,
                r.load_ms, (double)qmm_llm_model_weight_bytes(r.model) / 1e9, r.session_ms);
    qmm_status st = QMM_OK;
    for (int i = 0; i < a->nin && !st; i++) st = measure(a, &r, a->in_len[i], csv);
    if (csv) fclose(csv);
    rc = st ? tp_rank_fail("bench e2e", &r, st) : EXIT_OK;
    tp_rank_close(&r);
    return rc;
}

int tp_bench_e2e_main(int argc, char **argv)
{
    const char *list = NULL;
    if (!tp_cli_take("bench e2e", &argc, argv, &list)) return EXIT_USAGE;
    tpb_args a;
    int rc = parse_e2e(argc, argv, &a);
    if (rc >= 0) return rc;
    if (getenv("QMM_TP_RANK")) return e2e_rank(&a);
    int ts[TP_MAX_LIST], nt = 0;
    if (tp_parse_list(list ? list : "1", ts, TP_MAX_LIST, &nt)) {
        fprintf(stderr, "qmm bench e2e: %s\n", qmm_last_error());
        return EXIT_USAGE;
    }
    for (int i = 0; i < nt; i++)
        if (ts[i] > 1 && !tp_have_nccl()) {
            fprintf(stderr, "qmm bench e2e: --tp %d needs NCCL, and this qmm was built without "
                            "it\n", ts[i]);
            return EXIT_USAGE;
        }
    printf("# tensor-parallel e2e: %s, greedy, seed %lld (model columns: a prediction, link "
           "%.0f GB/s, %.1f us an all-reduce)\n\n%s", a.model, a.seed, a.link_gbs, a.link_us,
           ROW_HEAD);
    fflush(stdout);
    static const char *const prefix[] = {"bench", "e2e", NULL};
    int worst = EXIT_OK;
    for (int i = 0; i < nt; i++) {
        int c = tp_cli_launch("bench e2e", ts[i], prefix, argc, argv);
        if (c) worst = c;
    }
    return worst;
}

/* ---- qmm bench allreduce ---- */

static void ar_usage(FILE *f)
{
    fprintf(f, "usage: qmm bench allreduce [--tp 2] [--csv FILE] [--repeats 7]\n"
               "  bf16 sum over t ranks (one process per GPU), 8 KB to 64 MB\n");
}

int bench_allreduce_main(int argc, char **argv)
{
    const char *tpv = NULL, *csv = NULL;
    long long repeats = 7, t = 2;
    if (!tp_cli_take("bench allreduce", &argc, argv, &tpv)) return EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            ar_usage(stdout);
            return 0;
        }
        static const char *const known[] = {"--csv", "--repeats", NULL};
        const char *o = argv[i], *v = cli_known_value("bench allreduce", known, argc, argv, &i);
        if (!v) return EXIT_USAGE;
        if (!strcmp(o, "--csv")) csv = v;
        else if (!strcmp(o, "--repeats")) {
            if (!cli_int("bench allreduce", o, v, 1, 63, &repeats)) return EXIT_USAGE;
        } else return cli_unknown("bench allreduce", o);
    }
    if (tpv && !cli_int("bench allreduce", "--tp", tpv, 1, 64, &t)) return EXIT_USAGE;
    if (!tp_have_nccl()) {
        fprintf(stderr, "qmm bench allreduce: needs NCCL, and this qmm was built without it\n");
        return EXIT_USAGE;
    }
    if (!getenv("QMM_TP_RANK")) {
        static const char *const prefix[] = {"bench", "allreduce", NULL};
        return tp_cli_launch("bench allreduce", (int)t, prefix, argc, argv);
    }
    tp_rank_ctx r;
    memset(&r, 0, sizeof r);
    int is_rank = 0;
    qmm_status st = tp_env_read(&r.env, &is_rank);
    if (!st) st = tp_comm_create(&r.env, r.env.rank, &r.comm);
    enum { N = 14 }; /* 8 KB .. 64 MB */
    double bytes[N], us[N];
    for (int i = 0; i < N; i++) bytes[i] = 8192.0 * (double)(1 << i);
    /* the same number of all-reduces in every graph: 20 (the largest take ~0.5 ms each) */
    if (!st) st = tp_allreduce_sweep(r.comm, bytes, N, 20, (int)repeats, us);
    int rc = st ? tp_rank_fail("bench allreduce", &r, st) : EXIT_OK;
    if (!st && r.env.rank == 0) {
        FILE *f = csv ? fopen(csv, "w") : NULL;
        if (f) fprintf(f, "ranks,bytes,us,algbw_gbs,busbw_gbs\n");
        printf("# all-reduce, bf16 sum, %d ranks, median of %lld graphs of 20\n\n"
               "| bytes | us | algbw GB/s | busbw GB/s |\n|---|---|---|---|\n", r.env.ranks,
               repeats);
        const double f2 = r.env.ranks > 1 ? 2.0 * (r.env.ranks - 1) / r.env.ranks : 1.0;
        for (int i = 0; i < N; i++) {
            double alg = bytes[i] / (us[i] * 1e3);
            printf("| %.0f | %.2f | %.1f | %.1f |\n", bytes[i], us[i], alg, alg * f2);
            if (f) fprintf(f, "%d,%.0f,%.4f,%.4f,%.4f\n", r.env.ranks, bytes[i], us[i], alg, alg * f2);
        }
        /* the model's link: latency from the smallest, bandwidth from the largest size */
        double bw = bytes[N - 1] * f2 / ((us[N - 1] - us[0]) * 1e3);
        printf("\nlink fit (qmm perf tp --link-us %.1f --link-gbs %.0f): latency = the 8 KB "
               "time, bandwidth = 2 (t-1)/t * 64 MB over (its time - that latency)\n", us[0], bw);
        if (f) fclose(f);
    }
    tp_comm_destroy(r.comm);
    return rc;
}
