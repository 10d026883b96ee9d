/*
 * What the sources of the gpu_sm90 test share: gpu_sm90.c (the one table of cases, and the
 * helpers below), sm90_groups.c (its cases on groups of 64 and 32), sm90_heights.c (the other
 * block heights two CTAs a SM) and sm90_rest.c (clusters with tiles aside).
 */
#ifndef QMM_TEST_GPU_SM90_H
#define QMM_TEST_GPU_SM90_H

#include "matmul_prob.h"

/* The default options with a forced path and split. */
static inline qmm_cuda_options opts(qmm_path path, int split)
{
    qmm_cuda_options o = qmm_cuda_options_default();
    o.path = path, o.split = split;
    return o;
}

/* gpu_sm90.c: every schedule of one shape against fp64; the plan of gate at M = 300 (a full
 * grid) is the forced unsplit schedule, bit for bit. */
void check_schedules_g(int64_t m, int64_t n, int64_t k, int group, const char *name);
void full_grid_is_unsplit(int group);
/* Schedule i of a list (options o) run 10 more times gives the bits of its first run. */
void same_bits_10_times(prob *p, const qmm_cuda_options *o, const qmm_bf16 *first, qmm_bf16 *out,
                        size_t bytes, size_t i);

/* sm90_groups.c */
void case_g64_ragged(void);
void case_g32_ragged(void);
void case_g64_all_m(void);
void case_g64_projections(void);
void case_g64_bitwise(void);
void case_g64_same_bits(void);
void case_g32_same_bits(void);

/* sm90_heights.c */
void case_other_height_32(void);
void case_paired_64(void);

/* sm90_rest.c */
void case_rest_aside(void);
void case_rest_dependent_launches(void);

#endif
