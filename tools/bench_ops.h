/*
 * `qmm bench ops`: shared types of the operator benchmark. The pure parts (arguments, statistics,
 * data, checks, model fit, reports) build everywhere; the GPU parts (bench_gpu.h) only with CUDA.
 *
 * Shapes follow DESIGN.md: C[M, N] = A[M, K] · W[N, K]ᵀ, K → N written "K→N".
 */
#ifndef QMM_TOOLS_BENCH_OPS_H
#define QMM_TOOLS_BENCH_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "qmm.h"

#define BENCH_MAX_SHAPES 32
#define BENCH_MAX_MS 64
#define BENCH_MIN_REPS 7
#define BENCH_FULL_CHECK_ROWS 256 /* M above this: check a sample of rows, not all */
#define BENCH_SAMPLE_ROWS 64
#define BENCH_TOLERANCE 1e-2      /* relative Frobenius error allowed vs the CPU (DESIGN §8) */

/* Fallback ceilings (DESIGN §8), used only when measurement is switched off. */
#define BENCH_DEFAULT_COPY_GBPS 4200.0
#define BENCH_DEFAULT_CUBLAS_TFLOPS 720.0

typedef struct bench_shape {
    char name[24]; /* "q", "down", or "2560x1024" for --shape; "-g64" appended for groups != 128 */
    int64_t k, n;  /* K in_features (reduced), N out_features */
    int group;     /* the weight's group size: 128 (the default), 64 or 32 (--group) */
} bench_shape;

typedef struct bench_opts {
    bench_shape shapes[BENCH_MAX_SHAPES];
    int shape_count;
    int64_t ms[BENCH_MAX_MS];
    int m_count;
    int calls;             /* minimum calls per graph (more when a replay would be < target) */
    int reps;              /* timed replays / eager batches, >= BENCH_MIN_REPS */
    double target_replay_us; /* grow the call count until a replay takes about this long */
    int hot;               /* 1: one weight copy (L2-hot); 0: rotate copies >= 4x L2 */
    int stages_sweep;      /* 1: also time the tiled kernel at stages 1..4 */
    int groups[3];         /* --group: the group sizes, each shape runs at each (default 128) */
    int group_count;
    int measure_ceilings;  /* 0: use the DESIGN §8 defaults instead of measuring */
    int device;
    uint64_t seed;
    int seed_given;
    double max_copies_mb;  /* device memory cap for one family of weight copies */
    int cpu_threads;       /* CPU reference threads (0 = all cores) */
    int policy;            /* qmm_policy of the auto contender */
    int model_blocks_per_sm; /* 0: ask qmm_cuda_info; else override for the model */
    const char *out_md, *out_csv, *out_json;
    const char *commit;    /* NULL: env QMM_COMMIT, else "unknown" */
} bench_opts;

/* Parse `qmm bench ops` arguments (argv[0] is "ops"). Returns 0 to run, 1 when --help was
 * printed, -1 on a bad argument (message printed to stderr). Fills defaults first. */
int bench_parse_args(int argc, char **argv, bench_opts *o);
void bench_usage(FILE *f);

/* ---- statistics and data (bench_stats.c) -------------------------------------------------- */

/* Rows of C checked against the CPU: all when m <= BENCH_FULL_CHECK_ROWS, else BENCH_SAMPLE_ROWS
 * rows spread evenly over [0, m) (first and last included). rows needs BENCH_FULL_CHECK_ROWS
 * entries. Returns the count. */
int bench_check_rows(int64_t m, int64_t *rows);

/* ---- results ------------------------------------------------------------------------------ */

typedef struct bench_time {
    double graph_med, graph_min, graph_max; /* µs per call inside a CUDA graph replay */
    double eager_med, eager_min, eager_max; /* µs per call launched one by one */
    int calls;                              /* calls per graph / eager batch */
    int copies;                             /* weight copies rotated through */
    int reps;                               /* timed replays (and eager batches) */
} bench_time;

enum { BENCH_PASS = 0, BENCH_FAIL = 1 };

/* One contender on one (shape, M). */
typedef struct bench_result {
    char proj[24];
    int64_t k, n, m;
    char contender[16];   /* auto tiled splitk_plan splitk matvec cublas tiled_st1..4 */
    int path;             /* qmm_path that ran; -1 for cuBLAS */
    int split;            /* K partitions that ran (1 = unsplit) */
    int stages;           /* requested pipeline stages (0 = the tuned default) */
    int tile_m, tile_n;   /* tile of what ran (0 when unknown / cuBLAS) */
    int config;           /* tiled kernel configuration that ran (qmm_plan.config) */
    int status;           /* BENCH_PASS or BENCH_FAIL (a failure is not timed) */
    char why[160];        /* the failure, "" when it passed */
    double rel_err;       /* vs the CPU reference on the checked rows */
    int checked_rows;
    bench_time t;
    double bytes;         /* bytes a call must move: weights (W4 packed+scales+biases, or bf16
                             for cuBLAS) + A + C */
    double flops;         /* 2·M·N·K */
    int plan_path, plan_split; /* the plan of this (shape, M), same on every row */
    int plan_rest_tiles, plan_rest_split; /* its tiles aside, and their split (qmm_plan) */
    double predicted_us;  /* the plan's predicted time (qmm_plan.predicted_us), < 0 if none */
    double run_predicted_us; /* the planner's prediction for what this contender ran, < 0 if none */
} bench_result;

typedef struct bench_results {
    bench_result *v;
    size_t n, cap;
} bench_results;

/* Append a copy of r; returns the stored row or NULL when out of memory. */
bench_result *bench_results_push(bench_results *rs, const bench_result *r);
void bench_results_free(bench_results *rs);
/* The first row of (proj, m) whose contender equals name (and split when split > 0). */
const bench_result *bench_results_find(const bench_results *rs, const char *proj, int64_t m,
                                       const char *name, int split);
/* The passing split-K sweep row of (proj, m) with the smallest graph time, NULL if none. */
const bench_result *bench_results_best_split(const bench_results *rs, const char *proj, int64_t m);

/* ---- machine and ceilings ----------------------------------------------------------------- */

typedef struct bench_meta {
    char gpu[128];
    int cc_major, cc_minor;
    int sms;
    long long l2_bytes;
    int sm_clock_khz, mem_clock_khz, mem_bus_bits;
    int driver_version, runtime_version, cublas_version;
    char commit[80];
    char date[40];       /* ISO 8601 UTC */
    char command[2048];  /* the command line that produced the results */
    uint64_t seed;
    int hot, reps, calls_min;
} bench_meta;

/* One ceiling: the rate of the median, the slowest and the fastest timing; measured 1 in this
 * run, 0 the DESIGN default; how it was obtained. */
typedef struct bench_ceiling {
    double value, min, max;
    int measured;
    char note[160];
} bench_ceiling;

typedef struct bench_ceilings {
    bench_ceiling copy;   /* GB/s: kernel copy, read+write bytes / time */
    bench_ceiling cublas; /* TFLOP/s: cuBLAS bf16 8192³ */
} bench_ceilings;

/* ---- model vs measurement (bench_fit.c) ---------------------------------------------------- */

#define BENCH_MODEL_ERR_FLAG 25.0 /* % error beyond which the report flags a point */

typedef struct bench_model_point {
    char proj[24];
    int64_t m, n, k;
    int split;
    int tile_m, tile_n;
    int blocks_per_sm;  /* resident blocks of the configuration that ran (0: the preset's) */
    double measured_us; /* graph median: tiled for split 1, the split-K sweep otherwise */
    double planner_us;  /* the planner's own prediction (qmm_plan.predicted_us), < 0 if none */
    double model_us;    /* refined model, uncalibrated */
    double calib_us;    /* refined model with the fitted efficiency and launch overhead */
} bench_model_point;

typedef struct bench_calibration {
    int ok;             /* 1 when a fit was made */
    int points;
    double efficiency;  /* fitted qmm_model_kernel.compute_efficiency */
    double launch_us;   /* fitted qmm_gpu_caps.launch_us */
    double rms_before, rms_after;     /* RMS relative error, % */
    double worst_before, worst_after; /* largest |relative error|, % */
} bench_calibration;

/* The model inputs the benchmark used (GPU from measured ceilings, kernel from the "w4"
 * preset with the tile of what ran and the resident blocks per SM). */
typedef struct bench_model_setup {
    int ok;              /* 0: the model could not be set up (why says) */
    char why[160];
    qmm_gpu_caps gpu;
    qmm_model_kernel kern;
    int config_bps[QMM_MAX_TILE_CONFIGS]; /* resident blocks per SM of each tiled configuration
                                             (qmm_gpu_info), 0 when unknown */
    int bps_override;    /* --model-bps: used for every point when > 0 */
} bench_model_setup;

/* Fill the model inputs: the "h200-measured" GPU preset (for its launch overhead) with this
 * GPU's SM count and the ceilings measured in this run, and the "w4" kernel preset. Each point
 * then takes the tile and resident blocks of the configuration that ran: config_bps[count]
 * (may be NULL), or bps_override for all when > 0. */
void bench_model_setup_init(bench_model_setup *ms, int sms, const bench_ceilings *c,
                            const int *config_bps, int count, int bps_override);
/* Collect the model points from the results: projections k, v, o, down at M in {16, 32, 64},
 * split 1 (tiled) and every passing split-K sweep row, with the model's prediction.
 * Returns the count (at most max). */
int bench_model_collect(const bench_results *rs, const bench_model_setup *ms,
                        bench_model_point *pts, int max);
/* Fit efficiency (grid over (0, 1]) and launch overhead (weighted least squares, >= 0) to
 * minimise the squared relative error over pts; fills pts[i].calib_us and cal. */
void bench_model_calibrate(const bench_model_setup *ms, bench_model_point *pts, int n,
                           bench_calibration *cal);
/* The refined model's prediction for a point with this efficiency and launch overhead,
 * < 0 on invalid input. */
double bench_model_predict(const bench_model_setup *ms, const bench_model_point *p,
                           double efficiency, double launch_us);

/* ---- reports (bench_report.c) -------------------------------------------------------------- */

typedef struct bench_report {
    const bench_opts *opts;
    const bench_meta *meta;
    const bench_ceilings *ceil;
    const bench_results *rs;
    const bench_model_setup *model;
    const bench_model_point *pts;
    int npts;
    const bench_calibration *cal;
} bench_report;

/* The experiments' switches set in the environment ("NAME=value ...", "" if none). */
const char *bench_experiment_env(void);
void bench_write_md(FILE *f, const bench_report *r);
void bench_write_csv(FILE *f, const bench_report *r);
void bench_write_json(FILE *f, const bench_report *r);
/* Write through fn to path atomically (path.tmp, then rename). 0 ok, -1 (message printed). */
int bench_write_file(const char *path, void (*fn)(FILE *, const bench_report *),
                     const bench_report *r);

#endif
