/*
 * What the sources of the gpu_kernels test share: gpu_kernels.c (the one table of cases) and
 * kernels_groups.c (its cases of their own on groups of 64 and 32).
 */
#ifndef QMM_TEST_GPU_KERNELS_H
#define QMM_TEST_GPU_KERNELS_H

#include <string.h>

#include "matmul_prob.h"

/* The default options with a forced path, split, stage count and partials' type. */
static inline qmm_cuda_options opts(qmm_path path, int split, int stages, qmm_dtype partial)
{
    qmm_cuda_options o = qmm_cuda_options_default();
    o.path = path, o.split = split, o.stages = stages, o.partial_type = partial;
    return o;
}

static inline int same_bits(const qmm_bf16 *x, const qmm_bf16 *y, size_t n)
{
    return memcmp(x, y, n * sizeof *x) == 0;
}

/* kernels_groups.c */
void g64_all_m(void);
void g64_same_bits_as_g128(void);
void g32_same_bits_as_g128(void);
void g64_dequantize_rows(void);
void g32_dequantize_rows(void);
void g64_plan_follows_weight(void);

#endif
