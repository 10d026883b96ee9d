/* Internals of the CPU backend shared by the reference and the fast path (not public). */
#ifndef QMM_CPU_H
#define QMM_CPU_H

#include "internal.h"

/* The argument contract of both CPU matmuls (a [M, K] bf16, w [N, K], c [M, N] bf16): checks
 * pointers, M >= 1, the weight descriptor and that M*K and M*N elements fit size_t. */
qmm_status qmm_cpu_check_matmul(const char *fn, const qmm_bf16 *a, int64_t m, const qmm_w4 *w,
                                const qmm_bf16 *c);

/* The fast path's schedule for a shape, exposed so tests can tell which cases split K. */
typedef struct qmm_cpu_schedule {
    int threads;  /* threads that run (<= requested, <= work items) */
    int split;    /* partitions of K across threads (1 = each item covers all of K) */
    int64_t panels; /* output column panels of QMM_CPU_NR W rows */
} qmm_cpu_schedule;

#define QMM_CPU_NR 8 /* W rows (output columns) per panel: one micro-tile's width */
#define QMM_CPU_MR 4 /* A rows per micro-tile */

/* threads <= 0: one per online CPU. K partitions are whole groups of `group` columns.
 * Pure function of its arguments and the CPU count. */
qmm_cpu_schedule qmm_cpu_schedule_for(int64_t m, int64_t n, int64_t k, int group, int threads);

#endif
