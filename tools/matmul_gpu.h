/* The GPU half of `qmm matmul`. */
#ifndef QMM_TOOLS_MATMUL_GPU_H
#define QMM_TOOLS_MATMUL_GPU_H

#include <stdio.h>

#include "qmm.h"

/* Run C = A·Wᵀ on GPU 0 with the planned path, check against ref[M, N] (fp64), print the plan,
 * error and time on out. Returns 0 pass, 1 check failed, 2 could not run; 3 when no GPU and
 * !required. */
int matmul_gpu(const qmm_w4 *w, const qmm_bf16 *a, int64_t m, const double *ref, double tol,
               int required, const qmm_cuda_options *opt, FILE *out);

#endif
