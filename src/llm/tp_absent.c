/* The tensor-parallel entry points in a build without CUDA: each says so (tp_comm.cu holds the
 * CUDA build's, with or without NCCL). */
#include "internal.h"
#include "llm/tp.h"

#ifndef QMM_HAVE_CUDA

#define NO_TP                                                                                 \
    qmm_fail(QMM_ERR_UNSUPPORTED, "tensor parallelism (--tp > 1) needs CUDA and NCCL, and this " \
                                  "qmm was built without CUDA")

struct tp_comm {
    int unused;
};

int tp_have_nccl(void) { return 0; }
int tp_comm_rank(const tp_comm *c) { return c ? 0 : 0; }
int tp_comm_ranks(const tp_comm *c) { return c ? 1 : 1; }
void tp_comm_destroy(tp_comm *c) { (void)c; }

qmm_status tp_comm_create(const tp_env *e, int device, tp_comm **out)
{
    (void)e, (void)device;
    if (out) *out = NULL;
    return NO_TP;
}

qmm_status tp_session_create(const qmm_llm_model *shard, int64_t max_seq,
                             const qmm_llm_cuda_options *opt, tp_comm *comm,
                             qmm_llm_cuda_session **out)
{
    (void)shard, (void)max_seq, (void)opt, (void)comm;
    if (out) *out = NULL;
    return NO_TP;
}

int tp_session_decode_fused(const qmm_llm_cuda_session *s) { return s ? 0 : 0; }

qmm_status tp_allreduce_sweep(tp_comm *c, const double *bytes, int n, int iters, int repeats,
                              double *us)
{
    (void)c, (void)bytes, (void)n, (void)iters, (void)repeats, (void)us;
    return NO_TP;
}

#else
typedef int tp_absent_unused; /* ISO C: no empty translation unit */
#endif
