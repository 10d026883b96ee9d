/*
 * One matmul problem on the GPU, shared by the kernel tests (gpu_kernels.c, gpu_sm90.c): fresh
 * random weights (signed scales) and A, their device copies, and the fp64 reference of sampled
 * rows; a run poisons C (NaN) first; a check wants every element finite and the sampled rows
 * within a tolerance (relative Frobenius error) of fp64.
 */
#ifndef QMM_TEST_MATMUL_PROB_H
#define QMM_TEST_MATMUL_PROB_H

#include "harness.h"

/* How a test program sets its problems up (set by its main before the cases run). */
typedef struct prob_style {
    qmm_cuda_ctx *ctx;
    int64_t full_rows;    /* up to this M every row gets an fp64 reference; 24 sampled rows above */
    int fixed_workspace;  /* 1: one generous workspace per problem (p->ws); 0: each run allocates
                           * exactly the size qmm_cuda_workspace_size reports */
} prob_style;
extern prob_style prob_setup;

typedef struct prob {
    int64_t m, n, k;
    qmm_w4 w;
    qmm_bf16 *a, *a_dev, *c_dev;
    qmm_bf16 *out; /* host buffer for C [m, n] */
    qmm_cuda_weight *dw;
    void *ws; /* fixed_workspace only */
    size_t ws_bytes;
    int rows; /* sampled rows for the fp64 reference */
    int64_t *row_idx;
    double *ref;  /* [rows, n] */
    double floor; /* the error norm's smallest denominator: the terms' sizes (prob_reference) */
    int zero_poison; /* prob_run fills C with zeros, not NaN (tests that expect NaN in C) */
} prob;

/* 1 on success; 0 leaves a half-built problem that prob_free frees. Groups of 128, or of
 * `group` (32, 64, 128) with prob_init_g. */
int prob_init(prob *p, int64_t m, int64_t n, int64_t k);
int prob_init_g(prob *p, int64_t m, int64_t n, int64_t k, int group);
/* Two problems that make one matrix: p of groups `group` whose groups inside each 128-column
 * block share the block's first scale and bias (reference recomputed), q of groups of 128 with
 * those values, the same codes and the same A; both uploaded. 1 on success; 0 leaves both for
 * prob_free. */
int prob_init_shared_pair(prob *p, prob *q, int64_t m, int64_t n, int64_t k, int group);
/* Recompute the fp64 reference after changing p->w on the host. */
void prob_reference(prob *p);
void prob_free(prob *p);

/* Set up a problem or fail the case and return (a half-built problem is freed). */
#define SETUP_G(p, m, n, k, g)                                                              \
    do {                                                                                    \
        if (!prob_init_g(&(p), (m), (n), (k), (g))) {                                       \
            test_fail(__FILE__, __LINE__, "setup of M=%lld N=%lld K=%lld g%d failed: %s",   \
                      (long long)(m), (long long)(n), (long long)(k), (g), qmm_last_error()); \
            prob_free(&(p));                                                                \
            return;                                                                         \
        }                                                                                   \
    } while (0)
#define SETUP(p, m, n, k) SETUP_G(p, m, n, k, QMM_GROUP)
/* The same for prob_init_shared_pair's two problems. */
#define SETUP_PAIR(p, q, m, n, k, g)                                                          \
    do {                                                                                      \
        if (!prob_init_shared_pair(&(p), &(q), (m), (n), (k), (g))) {                         \
            test_fail(__FILE__, __LINE__, "setup of the g%d pair M=%lld N=%lld K=%lld: %s",   \
                      (g), (long long)(m), (long long)(n), (long long)(k), qmm_last_error()); \
            prob_free(&(p)), prob_free(&(q));                                                 \
            return;                                                                           \
        }                                                                                     \
    } while (0)

/* Poison C (NaN, or zeros with zero_poison), run (o may be NULL), synchronize, copy C into
 * out[m*n]. Returns the status. */
qmm_status prob_run(prob *p, const qmm_cuda_options *o, qmm_bf16 *out, qmm_plan *plan);
/* Every element of out finite and the sampled rows within tol of fp64 (a failed case otherwise).
 * Returns the error (+inf when an element is not finite). */
double prob_check(const prob *p, const qmm_bf16 *out, double tol, const char *what);

/* The Qwen3-4B projections from the engine's shapes (qmm_llm_linear_shape); distinct: only the
 * first of equal shapes (q, k, o, gate, down). Returns the count, 0 on failure. */
typedef struct prob_proj {
    const char *name;
    int64_t n, k;
} prob_proj;
int prob_qwen3_projections(prob_proj *out, int distinct);

#endif
