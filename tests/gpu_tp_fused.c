/*
 * The fused decode step under tensor parallelism (decode_fused_tp.cu, issue 16). Skips (77)
 * without NCCL or without a CUDA device; the t = 2 case needs two devices (with one, only the
 * one-rank case runs, and a NOTE says so). Each case launches ranks (the launcher of
 * src/llm/tp.h) on synthetic weights (t = 2: Qwen3-8B shapes; one rank: Qwen3-0.6B), a 16-token
 * prompt and 32 decode steps, every session fed the tokens of rank 0's single-GPU fused run:
 *   - t = 1 fused (rank 0, the whole model): the reference logits and greedy tokens;
 *   - TP fused, graph (the default TP session, t ranks): it must report the fused step; its
 *     logits within TOL of t = 1 fused at every step, its argmax t = 1's token (or a near tie
 *     of t = 1's logits, counted and printed);
 *   - TP fused, eager (use_graph = 0): bit for bit the graph's logits and tokens (the same
 *     kernels and collectives; the sum of two ranks is order-free). The TP sessions are sized
 *     for TP_MAX_SEQ positions, so the graph session holds decode graphs per context bucket
 *     (src/llm/decode_bucket.h) and its steps replay the smallest, which must give the bits of
 *     the eager step at the session's full split count;
 *   - TP unfused (fuse_projections = 0: the TP path of before, the reference): it must report
 *     the unfused step; the fused logits within TOL of it, the same tokens (or a near tie).
 * With one rank the collectives are copies and the TP step differs from the single-GPU one only
 * in where Σx² is summed: a smoke test of its plumbing on a machine with one GPU.
 * TOL: QMM_TP_FUSED_TOL, default 2e-2, the project's model-level budget, which gpu_tp.c also
 * fails at (the unfused t = 2 step measured 1.24e-2 to 1.32e-2 against t = 1 unfused on these
 * weights, bench/results/2026-12-01-matvec/tp/gpu_tp.log: a change in the order of fp32 sums
 * cascades through 36 layers of bf16 roundings, test_tp_forward.c). Every comparison prints its
 * worst error and whether it meets the 1e-2; QMM_TP_FUSED_TOL=1e-2 makes that a failure.
 * The prompt (16 rows) runs the unfused forward in every TP session: only the decode steps
 * (1..32) tell the fused step from the unfused one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "llm/decode_bucket.h"
#include "llm/tp.h"

#define STEPS 32
#define PROMPT 110 /* the steps cross 128 positions: two decode graphs, by context bucket */
#define NLOG (STEPS + 1) /* the prefill's logits, then one a step */
#define TP_MAX_SEQ 4096  /* a long context: the attention's decode graphs per bucket exist */

static int rank_fail(const tp_env *e, const char *what, qmm_status st)
{
    fprintf(stderr, "rank %d: %s: %s (%s)\n", e->rank, what, qmm_last_error(), qmm_status_name(st));
    fflush(NULL);
    _exit(st == QMM_ERR_COMM ? 3 : 1); /* a collective may be stuck: no CUDA teardown */
}

/* One session's run: the prefill, then STEPS steps fed tok[0..STEPS-1]; its logits and argmax
 * tokens into logits[NLOG][V] and got[NLOG] (poisoned first: the session must write them). */
static void run_steps(const tp_env *e, qmm_llm_cuda_session *s, const int32_t *ids,
                      const int32_t *tok, int64_t V, float *logits, int32_t *got, const char *what)
{
    for (size_t j = 0; j < (size_t)NLOG * (size_t)V; j++) logits[j] = NAN;
    for (int i = 0; i < NLOG; i++) got[i] = -1;
    qmm_status st = qmm_llm_cuda_prefill(s, ids, PROMPT, logits, &got[0]);
    for (int i = 1; i <= STEPS && !st; i++)
        st = qmm_llm_cuda_decode(s, tok[i - 1], logits + (size_t)i * V, &got[i]);
    if (st) rank_fail(e, what, st);
}

/* A TP session of the shard with these options, run, destroyed; fused: the decode step it must
 * report. */
static void tp_run(const tp_env *e, const qmm_llm_model *shard, tp_comm *comm, int fuse,
                   int graph, int fused, const int32_t *ids, const int32_t *tok, int64_t V,
                   float *logits, int32_t *got, const char *what)
{
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    o.fuse_projections = fuse;
    o.use_graph = graph;
    qmm_llm_cuda_session *s = NULL;
    qmm_status st = tp_session_create(shard, TP_MAX_SEQ, &o, comm, &s);
    if (st) rank_fail(e, what, st);
    if (graph && llm_cuda_decode_buckets(s) < 1) {
        fprintf(stderr, "rank %d: %s: no decode graph per context bucket\n", e->rank, what);
        _exit(1);
    }
    if (tp_session_decode_fused(s) != fused) {
        fprintf(stderr, "rank %d: %s: decodes with the %s step, want the %s one\n", e->rank, what,
                tp_session_decode_fused(s) ? "fused" : "unfused", fused ? "fused" : "unfused");
        _exit(1);
    }
    run_steps(e, s, ids, tok, V, logits, got, what);
    qmm_llm_cuda_session_destroy(s);
}

/* got against ref at every step: worst relative error (the decode steps: 1..STEPS, where the
 * paths differ, and the prefill), argmax equal or a near tie of ref. Returns the failures. */
static int compare(const char *name, const float *got, const int32_t *gtok, const float *ref,
                   const int32_t *rtok, int64_t V, double tol)
{
    int bad = 0, ties = 0;
    double worst = 0;
    for (int i = 0; i < NLOG; i++) {
        const double err = test_rel_err_f32(got + (size_t)i * V, ref + (size_t)i * V, V);
        double gap = 0;
        const int tie = gtok[i] != rtok[i] && gtok[i] >= 0 && gtok[i] < V &&
                        test_near_tie(ref + (size_t)i * V, V, gtok[i], &gap);
        worst = err > worst || isnan(err) ? err : worst;
        ties += tie;
        if (!(err <= tol) || (gtok[i] != rtok[i] && !tie)) {
            bad++;
            printf("  %s step %d: rel err %.3g (tol %.3g), token %d, reference %d%s\n", name, i,
                   err, tol, gtok[i], rtok[i], tie ? " (a near tie)" : "");
        }
    }
    printf("fused: %s: worst rel err %.3g over %d steps (tol %.3g; the issue's 1e-2 %s), %d near "
           "ties, %d failures\n", name, worst, NLOG, tol, worst <= 1e-2 ? "met" : "NOT met", ties,
           bad);
    return bad;
}

static int role_compare(const tp_env *e, const char *preset)
{
    const char *tol_s = getenv("QMM_TP_FUSED_TOL");
    const double tol = tol_s ? atof(tol_s) : 2e-2;
    const int t = e->ranks;
    qmm_llm_config c;
    qmm_status st = qmm_llm_config_preset(preset, &c);
    qmm_llm_model *full = NULL;
    if (!st) st = qmm_llm_model_synthetic(&c, 5, &full);
    if (st) rank_fail(e, "model", st);
    const int64_t V = c.vocab_size;
    const size_t plane = (size_t)NLOG * (size_t)V;
    int32_t ids[PROMPT], tok[NLOG], t_graph[NLOG], t_eager[NLOG], t_unf[NLOG];
    uint64_t seed = 12345; /* the same prompt in both rank processes */
    for (int i = 0; i < PROMPT; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((seed >> 33) % (uint64_t)V);
    }
    float *ref = malloc(plane * 4), *graph = malloc(plane * 4), *eager = malloc(plane * 4),
          *unf = malloc(plane * 4);
    if (!ref || !graph || !eager || !unf) rank_fail(e, "buffers", QMM_ERR_NOMEM);
    char tok_path[600];
    snprintf(tok_path, sizeof tok_path, "%s.tokens", e->id_path);
    if (e->rank == 0) {
        /* t = 1 fused, greedy: the tokens every later run is fed */
        qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
        qmm_llm_cuda_session *one = NULL;
        if ((st = qmm_llm_cuda_session_create(full, PROMPT + STEPS + 1, &o, &one)))
            rank_fail(e, "t = 1 session", st);
        st = qmm_llm_cuda_prefill(one, ids, PROMPT, ref, &tok[0]);
        for (int i = 1; i <= STEPS && !st; i++)
            st = qmm_llm_cuda_decode(one, tok[i - 1], ref + (size_t)i * V, &tok[i]);
        if (st) rank_fail(e, "t = 1 run", st);
        qmm_llm_cuda_session_destroy(one);
        FILE *f = fopen(tok_path, "wb"); /* before the communicator: rank 1 waits for it there */
        if (!f || fwrite(tok, sizeof tok, 1, f) != 1 || fclose(f)) {
            fprintf(stderr, "rank 0: cannot write %s\n", tok_path);
            return 1;
        }
    }
    qmm_llm_model *shard = NULL;
    if ((st = tp_shard_model(full, e->ranks, e->rank, &shard))) rank_fail(e, "shard", st);
    qmm_llm_model_destroy(full);
    tp_comm *comm = NULL;
    if ((st = tp_comm_create(e, e->rank, &comm))) rank_fail(e, "communicator", st);
    if (e->rank != 0) { /* t = 1's tokens from the file */
        FILE *f = fopen(tok_path, "rb");
        if (!f || fread(tok, sizeof tok, 1, f) != 1) {
            fprintf(stderr, "rank %d: cannot read %s\n", e->rank, tok_path);
            return 1;
        }
        fclose(f);
    }
    /* the sessions one after another on the one communicator, in the same order on both ranks */
    tp_run(e, shard, comm, 1, 1, 1, ids, tok, V, graph, t_graph, "TP fused, graph");
    tp_run(e, shard, comm, 1, 0, 1, ids, tok, V, eager, t_eager, "TP fused, eager");
    tp_run(e, shard, comm, 0, 1, 0, ids, tok, V, unf, t_unf, "TP unfused");
    tp_comm_destroy(comm);
    qmm_llm_model_destroy(shard);
    int bad = 0;
    if (e->rank == 0) {
        char name[3][160];
        snprintf(name[0], sizeof name[0], "%s t = %d fused against t = 1 fused", preset, t);
        snprintf(name[1], sizeof name[1], "%s t = %d fused against t = %d unfused", preset, t, t);
        snprintf(name[2], sizeof name[2], "%s t = %d unfused against t = 1 fused", preset, t);
        bad += compare(name[0], graph, t_graph, ref, tok, V, tol);
        bad += compare(name[1], graph, t_graph, unf, t_unf, V, tol);
        bad += compare(name[2], unf, t_unf, ref, tok, V, 1.0); /* tokens only: gpu_tp's case */
        size_t diff = 0;
        for (size_t j = 0; j < plane; j++)
            diff += memcmp(&graph[j], &eager[j], 4) != 0;
        const int tok_diff = memcmp(t_graph, t_eager, sizeof t_graph) != 0;
        printf("fused: %s t = %d graph against eager: %zu of %zu logits differ, tokens %s\n",
               preset, t, diff, plane, tok_diff ? "DIFFER" : "equal");
        bad += diff != 0 || tok_diff;
    }
    free(ref), free(graph), free(eager), free(unf);
    return bad ? 1 : 0;
}

static int rank_main(const char *preset)
{
    tp_env e;
    int is_rank = 0;
    qmm_status st = tp_env_read(&e, &is_rank);
    if (st || !is_rank) {
        fprintf(stderr, "gpu_tp_fused: bad rank environment: %s\n", qmm_last_error());
        return 1;
    }
    return role_compare(&e, preset);
}

static void launch(int ranks, const char *preset)
{
    char *argv[] = {"gpu_tp_fused", "--rank", (char *)preset, NULL};
    int code = 0;
    qmm_status st = tp_launch(ranks, "/proc/self/exe", argv, 0, 400, &code);
    CHECKF(st == QMM_OK, "the ranks failed: %s (first code %d)", qmm_last_error(), code);
}

static void fused_t2_matches_t1_and_unfused_t2_on_qwen3_8b_shapes(void) { launch(2, "qwen3-8b"); }

/* Qwen3-14B: 20 query heads over 4 KV heads a rank, 5 a KV head (no divisor of the attention
 * mma's 8 head columns) */
static void fused_t2_matches_t1_and_unfused_t2_on_qwen3_14b_shapes(void) { launch(2, "qwen3-14b"); }

/* One rank (a communicator of one, every collective a copy): the TP step on one GPU against the
 * single-GPU fused step; they differ only in where Σx² is summed (the add kernel instead of the
 * matvec's residual epilogue). The TP step's plumbing, tested on any machine with one GPU. */
static void fused_tp_on_one_rank_matches_the_single_gpu_step(void) { launch(1, "qwen3-0.6b"); }

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--rank")) return rank_main(argv[2]);
    if (!tp_have_nccl()) test_skip_all("the fused TP step untested: this build has no NCCL");
    int ndev = 0;
    char why[256] = "", msg[400];
    if (qmm_cuda_device_count(&ndev, why, sizeof why) || ndev < 1) {
        snprintf(msg, sizeof msg, "the fused TP step untested: %s", *why ? why : "no CUDA device");
        test_skip_no_gpu(msg);
    }
    TEST_TABLE(two, fused_tp_on_one_rank_matches_the_single_gpu_step,
               fused_t2_matches_t1_and_unfused_t2_on_qwen3_8b_shapes,
               fused_t2_matches_t1_and_unfused_t2_on_qwen3_14b_shapes);
    TEST_TABLE(one, fused_tp_on_one_rank_matches_the_single_gpu_step);
    if (ndev >= 2) return test_main(argc, argv, two, TEST_COUNT(two));
    printf("NOTE: one CUDA device: the t = 2 case (fused_t2_matches_t1_and_unfused_t2_on_"
           "qwen3_8b_shapes) is not run\n");
    return test_main(argc, argv, one, TEST_COUNT(one));
}
