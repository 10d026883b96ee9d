/* The engine's side of tensor parallelism (C++ only): what a TP session adds to the CUDA
 * session, the collectives of tp_comm.cu, and the forward's hooks (tp_session.cu). */
#ifndef QMM_LLM_CUDA_TP_SESSION_H
#define QMM_LLM_CUDA_TP_SESSION_H

#include <cuda_runtime.h>

#include "llm/tp.h"

struct qmm_llm_cuda_session;

/* A session's tensor-parallel state (NULL in a single-GPU session). */
struct llm_tp {
    tp_comm *comm;          /* not owned */
    int rank, ranks;
    int64_t vocab_lo, vocab_count; /* the embedding / head rows this rank holds */
    int pdl;                /* the fused decode step's kernels launch with PDL (the options'
                             * pdl; the unfused TP forward launches plainly) */
    float *y32;             /* [TP_F32_ROWS, hidden]: fp32 partial sums of o and down
                             * (llm_tp_alloc_y32, with the session's scratch) */
    int y32_symmetric;      /* y32 is the communicator's symmetric buffer (it frees it) */
};

/* Row-parallel outputs of at most this many rows (decode, short prefill chunks) are summed in
 * fp32 (the matvec's fp32 epilogue, an fp32 all-reduce, one bf16 rounding in the residual add,
 * as the single-GPU projection rounds once); longer chunks sum bf16 partials (the GEMM paths
 * write bf16 only). */
#define TP_F32_ROWS 16

/* tp_comm.cu: bf16 (or fp32) sum in place over the ranks; in-place all-gather of per_rank bf16
 * elements (this rank's part at full + rank * per_rank); a stream wait bounded by the timeout
 * (it does not abort: on failure the caller destroys every graph that captured a collective,
 * since NCCL's abort waits for them, then calls tp_comm_abort); the abort itself, on a helper
 * thread waited for at most max(QMM_TP_TIMEOUT_S, 10 s) (1 when it returned in time; either
 * way the communicator is never used again). */
qmm_status tp_comm_allreduce(tp_comm *c, void *buf, size_t count, int fp32, cudaStream_t st);
qmm_status tp_comm_allgather_bf16(tp_comm *c, void *full, size_t per_rank, cudaStream_t st);
qmm_status tp_comm_sync(tp_comm *c, cudaStream_t stream);
/* tp_comm.cu: NCCL symmetric memory of `bytes` owned by the communicator (freed with it), for
 * the low-latency all-reduce kernels, lent to one session at a time (returned on release);
 * *out = NULL: take plain memory (QMM_TP_SYMMETRIC=0, or the buffer is lent or too small). */
qmm_status tp_comm_symmetric_buffer(tp_comm *c, size_t bytes, void **out);
void tp_comm_symmetric_return(tp_comm *c, void *p);
int tp_comm_abort(tp_comm *c);
int tp_comm_aborted(const tp_comm *c);
int tp_comm_device(const tp_comm *c);

/* session.cu: a session of model m, tensor-parallel when tp is non-NULL (the session owns tp). */
qmm_status llm_cuda_session_make(const qmm_llm_model *m, int64_t max_seq,
                                 const qmm_llm_cuda_options *opt, llm_tp *tp,
                                 qmm_llm_cuda_session **out);

/* The forward's hooks (launches only, capturable): the vocabulary-split embedding of m rows
 * into the residual (zeros outside this rank's rows, then an fp32 all-reduce: exact, as one
 * rank contributes each row); the bf16 all-reduce of a row-parallel output; where the head
 * writes this rank's logits, and their all-gather into the full logits. */
qmm_status llm_tp_embed(qmm_llm_cuda_session *s, int m);
qmm_status llm_tp_allreduce(qmm_llm_cuda_session *s, void *buf, size_t count);
/* The fp32 row-parallel projection y32[m, n] = a · Wᵀ (unrounded) when it applies (m <=
 * TP_F32_ROWS); NULL when the caller takes the bf16 path. Launch + all-reduce. */
float *llm_tp_f32_out(qmm_llm_cuda_session *s, int m, const qmm_cuda_weight *w);
qmm_status llm_tp_project_f32(qmm_llm_cuda_session *s, const qmm_llm::bf16 *a, int m,
                              const qmm_cuda_weight *w, float *y32, const char *name);
qmm_status llm_tp_allreduce_f32(qmm_llm_cuda_session *s, float *y32, size_t count);

/* The host side of the forward's end: a TP session whose communicator was aborted refuses
 * every call (QMM_ERR_COMM); the bounded stream wait, which on failure destroys the session's
 * graphs (NCCL's abort waits for the graphs holding its collectives) and aborts; the TP
 * resources' release (session destroy). */
qmm_status llm_tp_usable(const qmm_llm_cuda_session *s);
/* The fp32 partials y32 of `count` floats: symmetric memory of the communicator, or plain. */
qmm_status llm_tp_alloc_y32(qmm_llm_cuda_session *s, size_t count);
qmm_status llm_tp_sync(qmm_llm_cuda_session *s);
void llm_tp_release(qmm_llm_cuda_session *s);
void *llm_tp_head_out(qmm_llm_cuda_session *s);
qmm_status llm_tp_gather_logits(qmm_llm_cuda_session *s);

#endif
