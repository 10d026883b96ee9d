/* The read contender of `qmm bench ops` (bench_read.cu). */
#ifndef QMM_BENCH_READ_H
#define QMM_BENCH_READ_H

#include "qmm_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stream every byte of w's device arrays once (grid: 4 blocks a SM); 0 or -1 (launch failed). */
int bench_read_weight(const qmm_cuda_weight *w, int sm_count, void *sink, void *stream);
/* The same on a grid of `blocks` blocks of 512 threads (the probes try several). */
int bench_read_weight_grid(const qmm_cuda_weight *w, int blocks, void *sink, void *stream);

#ifdef __cplusplus
}
#endif

#endif
