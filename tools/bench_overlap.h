/* `qmm bench overlap`: the shared types of the benchmark (bench_overlap.c: arguments and the
 * report; bench_overlap_measure.c: the measurements). */
#ifndef QMM_TOOLS_BENCH_OVERLAP_H
#define QMM_TOOLS_BENCH_OVERLAP_H

#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "qmm.h"

#define OV_MAX_CHUNKS 64
#define OV_MAX_REPS 51
#define OV_BUFFERS 3 /* b = 1 .. OV_BUFFERS */

typedef struct ov_opts {
    int reps, chunks, device, gantt_cols, ratio;
    int64_t compute_k, compute_n, compute_m; /* compute-heavy: K, N, chunk rows */
    int64_t copy_k, copy_n, copy_m;          /* copy-heavy */
    double copy_mib;                         /* bandwidth test size per direction */
    uint64_t seed;
    const char *out_md, *out_csv, *commit;
} ov_opts;

#ifdef QMM_HAVE_CUDA
#include <cuda_runtime.h>

/* ---- the environment of one benchmark run ---- */

typedef struct ov_env {
    ov_opts o;
    qmm_cuda_ctx *ctx;
    qmm_gpu_info info;
    cudaStream_t s;           /* alone measurements and references */
    cudaEvent_t e0, e1;
    void *events[6 * OV_MAX_CHUNKS]; /* the pipeline's per-segment events */
    qmm_cuda_options tiled;   /* path TILED, default stages: chunking keeps the bits */
    bench_text md;
    FILE *csv;
} ov_env;

typedef struct ov_data {
    int64_t k, n, m_max;     /* A is [m_max, K], C [m_max, N] */
    qmm_w4 w;
    qmm_cuda_weight *dw;
    qmm_bf16 *a_host, *c_host; /* pinned */
    qmm_bf16 *ref;           /* [m_max, N]: one unchunked call, checked against the CPU */
    double cpu_err;          /* relative error of the reference on sampled rows vs the CPU */
} ov_data;

typedef struct ov_alone {
    int64_t rows;
    double med[3], mn[3], mx[3]; /* µs of one chunk, per engine */
} ov_alone;

typedef struct ov_result {
    int b;
    double med, mn, mx;           /* measured makespans, µs */
    double model_alone, model_chunk, exact_alone, closed_form;
    qmm_model_segment seg[3 * OV_MAX_CHUNKS];       /* the median repetition's timeline */
    qmm_model_segment model_seg[3 * OV_MAX_CHUNKS]; /* the model with the alone times */
    double mean_dur[3];           /* mean in-pipeline duration per chunk, per engine */
    double slack_mean, slack_max; /* start - latest dependency end, over steps with deps */
} ov_result;

typedef struct ov_case {
    const char *name, *what;
    ov_data *d;
    int64_t m;                    /* chunk rows (the pipeline's slot size) */
    int chunks;
    int64_t rows[OV_MAX_CHUNKS];
    int64_t m_total;
    ov_alone alone[2];            /* per distinct chunk size */
    int n_alone;
    ov_result res[OV_BUFFERS];
} ov_case;

/* bench_overlap_measure.c */
void ov_copy_engines(ov_env *env);
/* Weight [N, K] and, unless a_share is given, pinned A [m_max, K]; pinned C [m_max, N]. */
void ov_data_create(ov_env *env, ov_data *d, int64_t k, int64_t n, int64_t m_max,
                    qmm_bf16 *a_share, uint64_t seed);
void ov_data_free(ov_data *d, int free_a);
void ov_case_init(ov_case *c, const char *name, const char *what, ov_data *d, int64_t m, int n);
const ov_alone *ov_alone_for(const ov_case *c, int64_t rows);
void ov_measure_alone(ov_env *env, ov_case *c, int64_t rows, ov_alone *out);
void ov_alone_times(const ov_case *c, double *times);
double ov_makespan(const qmm_model_segment *seg, int n);
void ov_measure_pipeline(ov_env *env, ov_case *c, int b, ov_result *res);

#endif /* QMM_HAVE_CUDA */
#endif
