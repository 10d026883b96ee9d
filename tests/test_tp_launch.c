/* Tensor parallelism without a GPU (issue 16, CI): the --tp list and the rank environment, the
 * launcher's error paths (a rank that exits non-zero, one killed by a signal, one stopped while
 * the other fails, a run past its limit, a command that cannot start: each ends the others
 * within a bound and names the rank),
 * a rank's shard model against the slices it must hold, the bounded wait for a call that may
 * block (NCCL's abort), and the CLI's refusals before launch. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "llm/model.h"
#include "llm/tp.h"
#include "llm/tp_slice.h"

#ifndef QMM_CLI
#define QMM_CLI "qmm"
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void tp_list_parses_and_refuses(void)
{
    static const struct {
        const char *s;
        int n, v[3];
    } ok[] = {{"1", 1, {1}}, {"1,2", 2, {1, 2}}, {"8,2,1", 3, {8, 2, 1}}, {"64", 1, {64}}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int v[TP_MAX_LIST] = {-1, -1, -1}, n = -1;
        CHECK_OK(tp_parse_list(ok[i].s, v, TP_MAX_LIST, &n));
        CHECKF(n == ok[i].n, "'%s': %d entries, want %d", ok[i].s, n, ok[i].n);
        for (int j = 0; j < ok[i].n && n == ok[i].n; j++) CHECK(v[j] == ok[i].v[j]);
    }
    static const char *bad[] = {"", "0", "65", "1,,2", "1,", ",1", "2,2", "a", "1;2", "-1",
                                "1,2,3,4,5,6,7,8,9", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int v[TP_MAX_LIST], n = -7;
        CHECK_STATUS(tp_parse_list(bad[i], v, TP_MAX_LIST, &n), QMM_ERR_ARG);
        CHECKF(n == -7, "'%s': n written on failure", bad[i]);
    }
}

static void rank_environment_is_checked(void)
{
    static const struct {
        const char *rank, *ranks, *id;
        qmm_status want;
        int is_rank;
    } cases[] = {
        {NULL, "2", "/tmp/x", QMM_OK, 0},     {"0", "2", "/tmp/x", QMM_OK, 1},
        {"1", "2", "/tmp/x", QMM_OK, 1},      {"2", "2", "/tmp/x", QMM_ERR_ARG, 0},
        {"-1", "2", "/tmp/x", QMM_ERR_ARG, 0}, {"0", "0", "/tmp/x", QMM_ERR_ARG, 0},
        {"0", "65", "/tmp/x", QMM_ERR_ARG, 0}, {"0", NULL, "/tmp/x", QMM_ERR_ARG, 0},
        {"0", "2", NULL, QMM_ERR_ARG, 0},     {"0", "2", "", QMM_ERR_ARG, 0},
        {"1x", "2", "/tmp/x", QMM_ERR_ARG, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *names[3] = {"QMM_TP_RANK", "QMM_TP_RANKS", "QMM_TP_ID"};
        const char *vals[3] = {cases[i].rank, cases[i].ranks, cases[i].id};
        for (int k = 0; k < 3; k++) {
            if (vals[k]) setenv(names[k], vals[k], 1);
            else unsetenv(names[k]);
        }
        tp_env e;
        memset(&e, 0x5a, sizeof e);
        int is_rank = -1;
        CHECK_STATUS(tp_env_read(&e, &is_rank), cases[i].want);
        CHECKF(is_rank == cases[i].is_rank, "case %zu: is_rank %d", i, is_rank);
        if (cases[i].want == QMM_OK && cases[i].is_rank)
            CHECK(e.rank == atoi(cases[i].rank) && e.ranks == 2 && !strcmp(e.id_path, "/tmp/x"));
        for (int k = 0; k < 3; k++) unsetenv(names[k]);
    }
}

/* tp_launch of `sh -c SCRIPT` on `ranks` ranks: status, first code, seconds, message. */
static qmm_status launch_sh(int ranks, const char *script, int timeout_s, int *code, double *secs)
{
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    double t0 = now_s();
    *code = -1;
    qmm_status st = tp_launch(ranks, "/bin/sh", argv, 1, timeout_s, code);
    *secs = now_s() - t0;
    return st;
}

static void launcher_gives_each_rank_its_environment(void)
{
    int code;
    double s;
    unsetenv("NCCL_NVLS_ENABLE");
    CHECK_OK(launch_sh(3, "test \"$QMM_TP_RANKS\" = 3 && test \"$QMM_TP_RANK\" -ge 0 && "
                          "test \"$QMM_TP_RANK\" -lt 3 && test -n \"$QMM_TP_ID\" && "
                          "test \"$NCCL_NVLS_ENABLE\" = 0", 30, &code, &s));
    CHECK(code == 0);
    /* a value the user set is kept */
    setenv("NCCL_NVLS_ENABLE", "1", 1);
    CHECK_OK(launch_sh(2, "test \"$NCCL_NVLS_ENABLE\" = 1", 30, &code, &s));
    unsetenv("NCCL_NVLS_ENABLE");
    /* the ranks differ: only rank 1 fails */
    CHECK_STATUS(launch_sh(2, "test \"$QMM_TP_RANK\" != 1", 30, &code, &s), QMM_ERR_COMM);
    CHECKF(strstr(qmm_last_error(), "rank 1 died: exit status 1") != NULL, "message: %s",
           qmm_last_error());
}

/* One rank fails while the others would run for a minute: the launcher must end them at once. */
static void launcher_ends_the_others_when_a_rank_dies(void)
{
    static const struct {
        const char *script;
        const char *msg;
        int code;
    } cases[] = {
        {"if [ \"$QMM_TP_RANK\" = 1 ]; then sleep 0.2; exit 3; fi; sleep 60",
         "rank 1 died: exit status 3", 3},
        {"if [ \"$QMM_TP_RANK\" = 1 ]; then sleep 0.2; kill -KILL $$; fi; sleep 60",
         "rank 1 died: killed by signal 9", 128 + SIGKILL},
        {"if [ \"$QMM_TP_RANK\" = 0 ]; then kill -SEGV $$; fi; sleep 60",
         "rank 0 died: killed by signal 11", 128 + SIGSEGV},
        /* a stopped rank (SIGSTOP: alive, silent, deaf to every signal but SIGKILL) while the
         * other gives up (its collective timed out): the launcher must still end it */
        {"if [ \"$QMM_TP_RANK\" = 1 ]; then kill -STOP $$; fi; sleep 0.2; exit 3",
         "rank 0 died: exit status 3", 3},
        {"if [ \"$QMM_TP_RANK\" = 0 ]; then kill -STOP $$; fi; sleep 0.2; exit 3",
         "rank 1 died: exit status 3", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int code;
        double s;
        CHECK_STATUS(launch_sh(2, cases[i].script, 0, &code, &s), QMM_ERR_COMM);
        CHECKF(strstr(qmm_last_error(), cases[i].msg) != NULL, "case %zu: '%s', want '%s'", i,
               qmm_last_error(), cases[i].msg);
        CHECKF(code == cases[i].code, "case %zu: code %d, want %d", i, code, cases[i].code);
        CHECKF(s < 10.0, "case %zu: the launcher took %.1f s to end the other rank", i, s);
    }
}

static void launcher_limits_and_bad_arguments(void)
{
    int code;
    double s;
    CHECK_STATUS(launch_sh(2, "sleep 60", 1, &code, &s), QMM_ERR_COMM);
    CHECKF(strstr(qmm_last_error(), "after the 1 s limit") != NULL, "%s", qmm_last_error());
    CHECK(code == 124 && s < 10.0);
    /* every rank stopped: only the limit ends the run */
    CHECK_STATUS(launch_sh(2, "kill -STOP $$; sleep 60", 1, &code, &s), QMM_ERR_COMM);
    CHECKF(strstr(qmm_last_error(), "after the 1 s limit") != NULL, "%s", qmm_last_error());
    CHECKF(code == 124 && s < 10.0, "code %d after %.1f s", code, s);
    /* a command that cannot start: the child says so and exits 127 */
    char *argv[] = {"no-such-program", NULL};
    CHECK_STATUS(tp_launch(2, "/nonexistent/qmm-no-such-program", argv, 1, 30, &code),
                 QMM_ERR_COMM);
    CHECKF(strstr(qmm_last_error(), "exit status 127") != NULL, "%s", qmm_last_error());
    char *ok[] = {"sh", "-c", "true", NULL};
    CHECK_STATUS(tp_launch(0, "/bin/sh", ok, 1, 0, NULL), QMM_ERR_ARG);
    CHECK_STATUS(tp_launch(65, "/bin/sh", ok, 1, 0, NULL), QMM_ERR_ARG);
    CHECK_STATUS(tp_launch(2, "/bin/sh", ok, 1, -1, NULL), QMM_ERR_ARG);
    CHECK_STATUS(tp_launch(2, NULL, ok, 1, 0, NULL), QMM_ERR_NULL);
}

/* tp_call_bounded: fn reads one byte from fds[0] (blocks until the test writes or closes),
 * then marks *done. */
typedef struct blocker {
    int fd;
    volatile int *done;
} blocker;

static void block_on_pipe(void *p)
{
    const blocker *b = p;
    char c;
    ssize_t r = read(b->fd, &c, 1);
    (void)r;
    *b->done = 1;
}

static void bounded_call_returns_at_its_bound(void)
{
    static const struct {
        double bound, wait_before; /* seconds: the bound, when the call is released */
        int want;
    } cases[] = {{5.0, 0.0, 1}, {0.3, -1.0, 0}, {0.0, -1.0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fds[2];
        CHECK(pipe(fds) == 0);
        volatile int done = 0;
        blocker b = {fds[0], &done};
        if (cases[i].wait_before >= 0) CHECK(write(fds[1], "x", 1) == 1); /* returns at once */
        double t0 = now_s();
        int got = tp_call_bounded(block_on_pipe, &b, sizeof b, cases[i].bound);
        double s = now_s() - t0;
        CHECKF(got == cases[i].want, "case %zu: %d, want %d", i, got, cases[i].want);
        CHECKF(s < cases[i].bound + 2.0, "case %zu: returned after %.2f s (bound %.1f s)", i, s,
               cases[i].bound);
        if (!cases[i].want) {
            CHECKF(!done, "case %zu: the blocked call ran to its end", i);
            CHECK(s >= cases[i].bound * 0.9);
        }
        /* release a call still blocked: its thread ends and frees its copy of b (ASan) */
        close(fds[1]);
        for (int k = 0; k < 500 && !done; k++) usleep(10000);
        CHECKF(done, "case %zu: the call never finished", i);
        usleep(20000); /* the thread's last steps after setting done */
        close(fds[0]);
    }
    CHECK(tp_call_bounded(NULL, NULL, 0, 1.0) == -1);
}

/* A small model every t in {1, 2} divides in whole groups of 64. */
static qmm_llm_config small_config(void)
{
    qmm_llm_config c = {256, 512, 2, 4, 2, 64, 1000, 64, 1e6, 1e-6, 0, 64};
    return c;
}

static int same_w4(const qmm_w4 *a, const qmm_w4 *b)
{
    return a->n == b->n && a->k == b->k && a->group == b->group &&
           !memcmp(a->packed, b->packed, a->packed_count * 4) &&
           !memcmp(a->scales, b->scales, a->scales_count * 2) &&
           !memcmp(a->biases, b->biases, a->biases_count * 2);
}

static void shard_model_holds_its_slices(void)
{
    for (int tie = 0; tie <= 1; tie++) {
        qmm_llm_config c = small_config();
        c.tie_word_embeddings = tie;
        qmm_llm_model *full = NULL;
        CHECK_OK(qmm_llm_model_synthetic(&c, 11 + (uint64_t)tie, &full));
        if (!full) return;
        for (int t = 1; t <= 2; t++)
            for (int r = 0; r < t; r++) {
                qmm_llm_model *s = NULL;
                CHECK_OK(tp_shard_model(full, t, r, &s));
                if (!s) continue;
                tp_rank_plan p;
                CHECK_OK(tp_plan_rank(&c, t, r, &p));
                CHECK(s->cfg.num_heads == c.num_heads / t && s->cfg.num_kv_heads == c.num_kv_heads / t);
                CHECK(s->cfg.intermediate_size == c.intermediate_size / t);
                CHECK(s->cfg.hidden_size == c.hidden_size && s->cfg.vocab_size == c.vocab_size);
                for (int64_t l = 0; l < c.num_layers; l++) {
                    for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
                        qmm_w4 want;
                        CHECK_OK(tp_slice_w4(&full->layers[l].lin[i], p.cut[i], p.range[i], &want));
                        CHECKF(same_w4(&s->layers[l].lin[i], &want), "t %d rank %d layer %lld %s",
                               t, r, (long long)l, tp_kind_name(i));
                        qmm_w4_free(&want);
                    }
                    for (int i = 0; i < QMM_LLM_NORM_COUNT; i++) {
                        int64_t n = llm_norm_len(&c, (qmm_llm_norm)i);
                        CHECK(s->layers[l].norm[i] != full->layers[l].norm[i]); /* a copy */
                        CHECK(!memcmp(s->layers[l].norm[i], full->layers[l].norm[i], (size_t)n * 2));
                    }
                }
                qmm_w4 head;
                CHECK_OK(tp_slice_w4(&full->lm_head, TP_CUT_ROWS, p.range[TP_VOCAB], &head));
                CHECK(same_w4(&s->lm_head, &head) && s->lm_head.n == c.vocab_size / t);
                qmm_w4_free(&head);
                CHECK_OK(tp_slice_w4(&full->embed, TP_CUT_ROWS, p.range[TP_VOCAB], &head));
                CHECK(same_w4(&s->embed, &head));
                qmm_w4_free(&head);
                CHECK(!memcmp(s->final_norm, full->final_norm, (size_t)c.hidden_size * 2));
                qmm_llm_model_destroy(s);
            }
        qmm_llm_model_destroy(full);
    }
}

static void shard_model_refuses_bad_splits(void)
{
    qmm_llm_config c = small_config();
    qmm_llm_model *full = NULL, *s = (qmm_llm_model *)&c; /* poison: must stay */
    CHECK_OK(qmm_llm_model_synthetic(&c, 3, &full));
    if (!full) return;
    CHECK_STATUS(tp_shard_model(full, 4, 0, &s), QMM_ERR_ARG); /* 2 KV heads over 4 ranks */
    CHECK(s == (qmm_llm_model *)&c);
    CHECK_STATUS(tp_shard_model(full, 2, 2, &s), QMM_ERR_ARG);
    CHECK_STATUS(tp_shard_model(NULL, 2, 0, &s), QMM_ERR_NULL);
    qmm_llm_model_destroy(full);
    c.vocab_size = 1001; /* odd: the logits could not be gathered in equal parts */
    CHECK_OK(qmm_llm_model_synthetic(&c, 3, &full));
    if (!full) return;
    CHECK_STATUS(tp_shard_model(full, 2, 0, &s), QMM_ERR_UNSUPPORTED);
    CHECKF(strstr(qmm_last_error(), "vocab_size = 1001") != NULL, "%s", qmm_last_error());
    qmm_llm_model_destroy(full);
}

/* The CLI refuses bad --tp requests before it launches anything (exit 2, a message). */
static void cli_refuses_bad_tp_requests(void)
{
    static const struct {
        const char *args, *msg;
    } cases[] = {
        {"run --tp 0 --model qwen3-0.6b --prompt-len 4", "--tp"},
        {"run --tp x --model qwen3-0.6b --prompt-len 4", "--tp"},
        {"run --model qwen3-0.6b --prompt-len 4 --tp", "--tp needs a value"},
        {"run --tp 2 --model qwen3-0.6b --prompt hello", "token ids"},
        {"run --tp 2 --model qwen3-0.6b --prompt-len 4 --device cpu", "CUDA devices"},
        {"run --tp 2 --model qwen3-0.6b --prompt-len 4 --offload-weights", "resident"},
        {"bench e2e --tp 1,1 --model qwen3-0.6b", "twice"},
        {"bench e2e --tp 0 --model qwen3-0.6b", "--tp"},
        {"bench e2e --tp 2 --input-len 0", "--input-len"},
        {"bench e2e --tp 2 --bogus 1", "unknown option"},
        {"bench e2e --tp 2 --fuse maybe", "--fuse"},
        {"bench allreduce --tp 0", "--tp"},
        {"bench allreduce --bogus 1", "unknown option"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024], out[4096] = "";
        snprintf(cmd, sizeof cmd, "timeout 60 %s %s 2>&1", QMM_CLI, cases[i].args);
        FILE *p = popen(cmd, "r");
        if (!p) {
            CHECKF(0, "popen %s", cmd);
            continue;
        }
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = 0;
        int st = pclose(p);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        CHECKF(code == 2, "qmm %s: exit %d, want 2 (%s)", cases[i].args, code, out);
        CHECKF(strstr(out, cases[i].msg) != NULL, "qmm %s: '%s' lacks '%s'", cases[i].args, out,
               cases[i].msg);
    }
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, tp_list_parses_and_refuses, rank_environment_is_checked,
               launcher_gives_each_rank_its_environment, launcher_ends_the_others_when_a_rank_dies,
               launcher_limits_and_bad_arguments, bounded_call_returns_at_its_bound,
               shard_model_holds_its_slices, shard_model_refuses_bad_splits,
               cli_refuses_bad_tp_requests);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
