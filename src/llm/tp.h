/*
 * Tensor-parallel Qwen3 over NCCL (issue 16): the launcher, a rank's weight shard, its
 * communicator.
 *
 * One process per GPU (rank r drives device r), the usual rank / world-size setup of NCCL,
 * rather than one process driving every GPU: each rank is then today's single-GPU engine with
 * its own CUDA context, stream and captured decode graph (nothing in the engine learns about
 * several devices), a rank that crashes is a process that dies (the launcher sees it and ends
 * the others instead of a thread taking the whole run down), and the same binary runs under any
 * external launcher that sets the environment below.
 *
 * The launcher (tp_launch) forks and execs `ranks` copies of a command with
 *   QMM_TP_RANK = r, QMM_TP_RANKS = t, QMM_TP_ID = a file in a fresh temp directory
 *   (rank 0 writes the ncclUniqueId there, the others read it), NCCL_NVLS_ENABLE=0 unless set,
 * waits for them, and when one dies (a signal, or a non-zero exit) kills the others and fails
 * with "rank N died: ...". Ranks die with the launcher (PR_SET_PDEATHSIG).
 */
#ifndef QMM_LLM_TP_H
#define QMM_LLM_TP_H

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_MAX_LIST 8

/* This process's place, from the environment. */
typedef struct tp_env {
    int rank, ranks;
    char id_path[512]; /* where rank 0 publishes the ncclUniqueId */
} tp_env;

/* *is_rank = 0 when QMM_TP_RANK is unset (a plain process); otherwise the three variables are
 * checked (0 <= rank < ranks <= 64, an id path) and *e filled. */
qmm_status tp_env_read(tp_env *e, int *is_rank);

/* "1,2" -> out[0..*n): each in [1, 64], at most max entries, no repeats. */
qmm_status tp_parse_list(const char *s, int *out, int max, int *n);

/* Fork `ranks` copies of exe (argv as given, argv[0] included) with the environment above and
 * wait for all of them. quiet_others: ranks > 0 write stdout to /dev/null (rank 0 reports).
 * timeout_s > 0 bounds the whole run (every rank is killed past it). Returns QMM_OK when every
 * rank exits 0; QMM_ERR_COMM with "rank N died: ..." (or "... timed out") otherwise, after
 * killing and reaping the rest. *first_code (may be NULL): the first failing rank's exit status,
 * or 128 + its signal. */
qmm_status tp_launch(int ranks, const char *exe, char *const argv[], int quiet_others,
                     int timeout_s, int *first_code);

/* fn(copy of arg) on a helper thread, waited for at most `seconds`: 1 when it returned in
 * time, 0 when the wait ended first (the thread is left to finish on its own and frees the
 * copy; nothing the caller owns may be reachable from arg then), -1 when no thread could start
 * (fn did not run). For calls that can block forever: NCCL's abort and destroy. */
int tp_call_bounded(void (*fn)(void *), const void *arg, size_t arg_size, double seconds);

/* The shard of rank `rank` of `ranks` of model full (tp_plan_rank's cuts): a model whose config
 * has num_heads / t, num_key_value_heads / t and intermediate_size / t (hidden and vocab_size
 * unchanged) and whose embedding and LM head hold only the rank's vocabulary rows (the
 * vocabulary must divide by t: the logits are gathered in equal parts). Norms are copied; full
 * may be destroyed afterwards. *out is written only on success. */
qmm_status tp_shard_model(const qmm_llm_model *full, int ranks, int rank, qmm_llm_model **out);

/* ---- a rank's communicator (tp_comm.cu; without NCCL in the build every call fails) ---- */

typedef struct tp_comm tp_comm;

/* 1 when this qmm was built with NCCL. */
int tp_have_nccl(void);

/* Join the communicator of e on CUDA device `device`: rank 0 makes the ncclUniqueId and
 * publishes it at e->id_path (written beside, then renamed), the others wait for the file. The
 * wait and ncclCommInitRank are bounded by QMM_TP_INIT_TIMEOUT_S (default 600 s: a rank may
 * still be generating its weights); every later wait for a collective by QMM_TP_TIMEOUT_S
 * (default 60 s), after which the session's graphs are destroyed and the communicator aborted
 * (QMM_ERR_COMM; the abort, which can block, waited for at most max(that timeout, 10 s)). */
qmm_status tp_comm_create(const tp_env *e, int device, tp_comm **out);
void tp_comm_destroy(tp_comm *c);
int tp_comm_rank(const tp_comm *c);
int tp_comm_ranks(const tp_comm *c);

/* A TP session of shard (tp_shard_model of the same rank) on this rank's device: the engine's
 * forward with an NCCL all-reduce after o and down and the embedding, and the logits
 * all-gathered before the argmax (every rank gets the same token); decode takes the fused step
 * where it applies (decode_fused_tp.cu; fuse_projections = 0 keeps the unfused one). Use it with the
 * qmm_llm_cuda_* calls (prefill, decode, generate, reset, profile, destroy); comm and shard must
 * outlive it. opt->device is ignored (the comm's device). */
qmm_status tp_session_create(const qmm_llm_model *shard, int64_t max_seq,
                             const qmm_llm_cuda_options *opt, tp_comm *comm,
                             qmm_llm_cuda_session **out);

/* 1 when session s (TP or not) decodes with the fused step (decode_fused.cu,
 * decode_fused_tp.cu), 0 when with the unfused forward (fuse_projections = 0, groups other than
 * 128, the reference attention, ...): what the benchmarks report beside their numbers. */
int tp_session_decode_fused(const qmm_llm_cuda_session *s);

/* The all-reduce sweep: bf16 sum over the communicator's ranks for each size in bytes[n],
 * median microseconds of `repeats` timings of a CUDA graph of `iters` all-reduces, into us[n].
 * Every rank calls it with the same sizes. */
qmm_status tp_allreduce_sweep(tp_comm *c, const double *bytes, int n, int iters, int repeats,
                              double *us);

#ifdef __cplusplus
}
#endif

#endif
