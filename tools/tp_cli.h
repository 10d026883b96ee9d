/* The tensor-parallel side of the qmm tool (issue 16): `qmm run --tp N`, `qmm bench e2e --tp
 * 1,2`, `qmm bench allreduce`. The command re-executes itself once per rank through the
 * launcher (src/llm/tp.h); a process started that way (QMM_TP_RANK set) is a rank. */
#ifndef QMM_TOOLS_TP_CLI_H
#define QMM_TOOLS_TP_CLI_H

#include <stdint.h>

#include "llm/tp.h"
#include "qmm.h"

/* Exit code of a run whose rank died or whose collective timed out. */
#define EXIT_TP_RANK 3

/* Remove "--tp V" from argv (in place, *argc shrinks); *value = V or NULL when absent. 0 when
 * --tp is the last argument (message printed). */
int tp_cli_take(const char *cmd, int *argc, char **argv, const char **value);

/* Launch `ranks` copies of `qmm PREFIX... ARGS...` (args = argv[1..argc) of the subcommand, with
 * "--tp ranks" appended); exit code: 0, or EXIT_TP_RANK with the launcher's message. */
int tp_cli_launch(const char *cmd, int ranks, const char *const *prefix, int argc, char **argv);

/* A rank's engine: the model opened (every rank the same seed), this rank's shard, the
 * communicator on device `rank`, and a session of max_seq positions (t = 1: today's single-GPU
 * session on the whole model; the TP path only when ranks > 1). */
typedef struct tp_rank_ctx {
    tp_env env;
    qmm_llm_model *model; /* the whole model (t = 1) or the shard */
    qmm_llm_config full;  /* the whole model's config */
    tp_comm *comm;
    qmm_llm_cuda_session *s;
    double load_ms, session_ms;
} tp_rank_ctx;
int tp_rank_open(const char *cmd, const char *model, long long seed, int64_t max_seq,
                 const qmm_llm_cuda_options *o, tp_rank_ctx *r);
void tp_rank_close(tp_rank_ctx *r);
/* The exit code for a failed status (EXIT_TP_RANK for QMM_ERR_COMM, else 1), message printed. */
int tp_rank_fail(const char *cmd, const tp_rank_ctx *r, qmm_status st);

/* The test hook: QMM_TP_TEST_KILL_RANK = this rank raises QMM_TP_TEST_KILL_SIGNAL (KILL or
 * STOP, default KILL) after decode step QMM_TP_TEST_KILL_STEP (default 2). Returns the step, or
 * -1 when this rank is not the victim. */
int tp_test_kill_step(int rank);
void tp_test_kill_now(void);

/* qmm run --tp V (tp_cli.c): V is the --tp value taken out of argv. */
int tp_run_main(const char *tp_value, int argc, char **argv);
int tp_bench_e2e_main(int argc, char **argv);     /* qmm bench e2e --tp LIST (tp_bench.c) */
int bench_allreduce_main(int argc, char **argv);  /* qmm bench allreduce (tp_bench.c) */

#endif
