/* `qmm run --tp N` and what every tensor-parallel command shares: taking --tp out of the
 * arguments, launching the ranks, a rank's model / communicator / session, the kill hook of the
 * tests (tp_cli.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"
#include "llm/tp_slice.h"
#include "run_opts.h"
#include "tp_cli.h"

int tp_cli_take(const char *cmd, int *argc, char **argv, const char **value)
{
    *value = NULL;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--tp")) continue;
        if (i + 1 >= *argc) {
            fprintf(stderr, "qmm %s: --tp needs a value\n", cmd);
            return 0;
        }
        *value = argv[i + 1];
        for (int j = i; j + 2 <= *argc; j++) argv[j] = argv[j + 2];
        *argc -= 2;
        i--;
    }
    return 1;
}

int tp_cli_launch(const char *cmd, int ranks, const char *const *prefix, int argc, char **argv)
{
    int ndev = 0;
    char why[256] = "";
    if (qmm_cuda_device_count(&ndev, why, sizeof why) || ndev < ranks) {
        fprintf(stderr, "qmm %s: --tp %d needs %d CUDA devices (one a rank); this machine has "
                "%d%s%s\n", cmd, ranks, ranks, ndev, *why ? ": " : "", why);
        return EXIT_USAGE;
    }
    int np = 0;
    while (prefix[np]) np++;
    char **av = calloc((size_t)(np + argc + 4), sizeof *av);
    if (!av) return EXIT_USAGE;
    char t[16];
    snprintf(t, sizeof t, "%d", ranks);
    int k = 0;
    av[k++] = "qmm";
    for (int i = 0; i < np; i++) av[k++] = (char *)prefix[i];
    for (int i = 1; i < argc; i++) av[k++] = argv[i];
    av[k++] = "--tp";
    av[k++] = t;
    av[k] = NULL;
    int code = 0;
    qmm_status st = tp_launch(ranks, "/proc/self/exe", av, 1, 0, &code);
    free(av);
    if (st) {
        fprintf(stderr, "qmm %s: %s\n", cmd, qmm_last_error());
        return EXIT_TP_RANK;
    }
    return EXIT_OK;
}

int tp_rank_open(const char *cmd, const char *model, long long seed, int64_t max_seq,
                 const qmm_llm_cuda_options *o, tp_rank_ctx *r)
{
    memset(r, 0, sizeof *r);
    int is_rank = 0;
    qmm_status st = tp_env_read(&r->env, &is_rank);
    if (!st && !is_rank)
        st = qmm_fail(QMM_ERR_ARG, "not started by the tensor-parallel launcher (QMM_TP_RANK unset)");
    if (st) return tp_rank_fail(cmd, r, st);
    double t0 = qmm_now_ms();
    qmm_llm_model *m = NULL;
    if ((st = qmm_llm_model_open(model, (uint64_t)seed, &m))) return tp_rank_fail(cmd, r, st);
    r->full = *qmm_llm_model_config(m);
    qmm_llm_cuda_options so = *o;
    if (r->env.ranks == 1) {
        r->model = m;
        r->load_ms = qmm_now_ms() - t0;
        so.device = 0;
        st = qmm_llm_cuda_session_create(m, max_seq, &so, &r->s);
    } else {
        st = tp_check_cuda_blocks(&r->full, r->env.ranks);
        if (!st) st = tp_shard_model(m, r->env.ranks, r->env.rank, &r->model);
        qmm_llm_model_destroy(m); /* a rank keeps only its shard */
        r->load_ms = qmm_now_ms() - t0;
        if (!st) st = tp_comm_create(&r->env, r->env.rank, &r->comm);
        double t1 = qmm_now_ms();
        if (!st) st = tp_session_create(r->model, max_seq, &so, r->comm, &r->s);
        r->session_ms = qmm_now_ms() - t1;
    }
    return st ? tp_rank_fail(cmd, r, st) : -1;
}

void tp_rank_close(tp_rank_ctx *r)
{
    qmm_llm_cuda_session_destroy(r->s);
    tp_comm_destroy(r->comm);
    qmm_llm_model_destroy(r->model);
    memset(r, 0, sizeof *r);
}

int tp_rank_fail(const char *cmd, const tp_rank_ctx *r, qmm_status st)
{
    fprintf(stderr, "qmm %s: rank %d of %d: %s (%s)\n", cmd, r->env.rank, r->env.ranks,
            qmm_last_error(), qmm_status_name(st));
    if (st == QMM_ERR_COMM) { /* a collective may still be stuck on the device: no teardown */
        fflush(NULL);
        _exit(EXIT_TP_RANK);
    }
    return st == QMM_ERR_COMM ? EXIT_TP_RANK : EXIT_USAGE;
}

int tp_test_kill_step(int rank)
{
    const char *v = getenv("QMM_TP_TEST_KILL_RANK"), *s = getenv("QMM_TP_TEST_KILL_STEP");
    if (!v || atoi(v) != rank) return -1;
    int step = s ? atoi(s) : 2;
    return step < 1 ? 1 : step;
}

void tp_test_kill_now(void)
{
    const char *sig = getenv("QMM_TP_TEST_KILL_SIGNAL");
    fflush(NULL);
    /* STOP: the rank stays alive and silent, so only the peers' collective timeout ends them */
    raise(sig && !strcmp(sig, "STOP") ? SIGSTOP : SIGKILL);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm run --tp N --model PRESET|DIR (--prompt-len N | --prompt-ids 1,2,3)\n"
            "               [--max-new-tokens N] [--seed S] [--split-k on|off] [--graph on|off]\n"
            "               [--fuse on|off] [--max-seq N]\n"
            "  N ranks, one process per GPU (rank r on device r), Megatron-style tensor\n"
            "  parallelism over NCCL; greedy, token ids in and out (as qmm run with ids)\n"
            "  exit: 0 ok, 2 usage or environment, 3 a rank died or a collective timed out\n");
}

/* Checks every rank would make, before anything is launched. */
static int check_opts(const run_opts *o, int ranks)
{
    if (o->prompt) {
        fprintf(stderr, "qmm run: --tp takes token ids (--prompt-len or --prompt-ids), not "
                        "--prompt text\n");
        return EXIT_USAGE;
    }
    if (o->offload || (o->device && strcmp(o->device, "cuda") && strcmp(o->device, "auto"))) {
        fprintf(stderr, "qmm run: --tp runs on CUDA devices with resident weights (no --device "
                        "cpu, no --offload-weights)\n");
        return EXIT_USAGE;
    }
    if (o->persistent) { /* the persistent decode kernel runs on one GPU */
        fprintf(stderr, "qmm run: --decode persistent is one GPU's decode step, not with --tp\n");
        return EXIT_USAGE;
    }
    if (ranks > 1 && !tp_have_nccl()) {
        fprintf(stderr, "qmm run: --tp %d needs NCCL, and this qmm was built without it (CUDA "
                        "and nccl.h / libnccl at configure time)\n", ranks);
        return EXIT_USAGE;
    }
    return -1;
}

static int64_t rank_ids(const run_opts *o, int64_t vocab, int32_t **out)
{
    int64_t n = 0;
    int32_t *ids = NULL;
    if (o->ids_arg) {
        size_t len = strlen(o->ids_arg);
        ids = malloc((len / 2 + 1) * sizeof *ids);
        for (const char *p = o->ids_arg; ids && *p;) {
            char *end;
            errno = 0;
            long v = strtol(p, &end, 10);
            if (end == p || errno || v < 0 || v >= vocab || (*end && *end != ',')) {
                free(ids);
                return -1;
            }
            ids[n++] = (int32_t)v;
            p = *end ? end + 1 : end;
        }
    } else { /* run_ids.c's random prompt, so --tp 1 and qmm run agree */
        n = o->prompt_len;
        ids = malloc((size_t)n * sizeof *ids);
        uint64_t s = (uint64_t)o->seed * 0x9E3779B97F4A7C15ull + 1;
        for (int64_t i = 0; ids && i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int32_t)((s >> 33) % (uint64_t)vocab);
        }
    }
    *out = ids;
    return ids && n > 0 ? n : -1;
}

/* The victim of the kill test: prefill, then single steps until its step comes. */
static qmm_status run_victim(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                             int64_t max_new, int step, int32_t *toks)
{
    qmm_status st = qmm_llm_cuda_prefill(s, ids, n, NULL, &toks[0]);
    for (int64_t i = 1; i < max_new && !st; i++) {
        if (i > step) tp_test_kill_now();
        st = qmm_llm_cuda_decode(s, toks[i - 1], NULL, &toks[i]);
    }
    return st;
}

int tp_run_main(const char *tp_value, int argc, char **argv)
{
    long long ranks = 0;
    if (!cli_int("run", "--tp", tp_value, 1, 64, &ranks)) return EXIT_USAGE;
    run_opts o;
    int rc = run_parse("run", argc, argv, &o, usage);
    if (rc >= 0) return rc;
    if ((rc = check_opts(&o, (int)ranks)) >= 0) return rc;
    if (!getenv("QMM_TP_RANK")) {
        static const char *const prefix[] = {"run", NULL};
        return tp_cli_launch("run", (int)ranks, prefix, argc, argv);
    }
    /* a rank: the prompt's length sizes the session, its ids need the model's vocabulary */
    qmm_llm_cuda_options co = qmm_llm_cuda_options_default();
    co.split_k = o.split_k, co.use_graph = o.graph, co.fuse_projections = o.fuse;
    int64_t n = o.prompt_len;
    if (o.ids_arg) {
        n = 1;
        for (const char *p = o.ids_arg; *p; p++) n += *p == ',';
    }
    int64_t max_new = o.max_new, max_seq = o.max_seq ? o.max_seq : n + max_new;
    tp_rank_ctx r;
    if ((rc = tp_rank_open("run", o.model, o.seed, max_seq, &co, &r)) >= 0) {
        tp_rank_close(&r);
        return rc;
    }
    int32_t *ids = NULL;
    if (rank_ids(&o, r.full.vocab_size, &ids) != n) {
        fprintf(stderr, "qmm run: --prompt-ids must be ids in [0, %lld), comma-separated\n",
                (long long)r.full.vocab_size);
        free(ids);
        tp_rank_close(&r);
        return EXIT_USAGE;
    }
    qmm_status st;
    const int rank = r.env.rank, victim = tp_test_kill_step(rank);
    int32_t *toks = calloc((size_t)max_new, sizeof *toks);
    qmm_llm_timing t;
    memset(&t, 0, sizeof t);
    st = toks ? QMM_OK : qmm_fail(QMM_ERR_NOMEM, "out of memory");
    if (!st && victim >= 0) {
        st = run_victim(r.s, ids, n, max_new, victim, toks);
    } else if (!st) { /* one untimed generation, then the timed one */
        st = qmm_llm_cuda_generate(r.s, ids, n, max_new, toks, &t);
        if (!st) st = qmm_llm_cuda_reset(r.s);
        if (!st) st = qmm_llm_cuda_generate(r.s, ids, n, max_new, toks, &t);
    }
    rc = st ? tp_rank_fail("run", &r, st) : EXIT_OK;
    if (!st && rank == 0) {
        printf("tp %d: weights %.0f ms, session %.0f ms (each rank its shard)\nids:", r.env.ranks,
               r.load_ms, r.session_ms);
        for (int64_t i = 0; i < max_new; i++) printf("%s%d", i ? "," : " ", toks[i]);
        printf("\nprefill: %.3f ms, %.1f tok/s\n", t.prefill_ms,
               t.prefill_ms > 0 ? 1000.0 * (double)n / t.prefill_ms : 0.0);
        if (max_new > 1)
            printf("decode: %.3f ms, %.1f tok/s\n", t.decode_ms,
                   t.decode_ms > 0 ? 1000.0 * (double)(max_new - 1) / t.decode_ms : 0.0);
    }
    free(toks), free(ids);
    tp_rank_close(&r);
    return rc;
}
