/*
 * What every benchmark and tool shares: seeded random data, statistics, the relative error of a
 * result, a growing text buffer, argument parsing, run metadata (commit, date), and fatal checks
 * of CUDA and qmm calls. One source each, so the tools agree on data and on what they record.
 */
#ifndef QMM_TOOLS_COMMON_H
#define QMM_TOOLS_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qmm.h"

#if defined(__GNUC__)
#define BENCH_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define BENCH_PRINTF(f, a)
#endif

/* ---- random data (data.c): splitmix64, as the library and the tests ---- */

typedef struct bench_rng {
    uint64_t s;
} bench_rng;
uint64_t bench_rng_next(bench_rng *r);
double bench_rng_uniform(bench_rng *r, double lo, double hi);
/* Random quantized weight (buffers already allocated by qmm_w4_alloc): random codes, scales of
 * both signs with |s| in [0.004, 0.03], bias ≈ -7.5·s (zero-centred weights, as MLX writes). */
void bench_random_w4(bench_rng *r, qmm_w4 *w);
/* x[count] uniform in [-1, 1) as bf16. */
void bench_random_bf16(bench_rng *r, qmm_bf16 *x, size_t count);
/* Normal(0, 1) (Box-Muller). */
double bench_rng_normal(bench_rng *r);
/* n token ids in [0, vocab) from the LCG stream that starts at state (qmm run and bench e2e
 * prompts: the same state, the same prompt). */
void bench_prompt_ids(int32_t *ids, int64_t n, uint64_t state, int64_t vocab);
/* A seed from the clock (63 bits: prints and parses the same everywhere). */
uint64_t bench_seed_from_clock(void);

/* ---- statistics (stats.c) ---- */

/* Median, min and max of x[n] (n >= 1); x is not modified. */
void bench_summary(const double *x, int n, double *med, double *min, double *max);
/* ||got - ref||_F / ||ref||_F over count bf16 values; +inf when got holds a NaN or Inf (their
 * number in *nonfinite, which may be NULL). */
double bench_rel_frob(const qmm_bf16 *got, const qmm_bf16 *ref, size_t count, size_t *nonfinite);
/* The same against an fp64 reference. */
double bench_rel_frob_f64(const qmm_bf16 *got, const double *ref, size_t count);

/* ---- text, files, arguments, metadata (text.c) ---- */

typedef struct bench_text {
    char *p;
    size_t len, cap;
} bench_text;
/* Append to t (exits on out of memory). */
void bench_tprintf(bench_text *t, const char *fmt, ...) BENCH_PRINTF(2, 3);
/* Write text to path, or exit 1 with the reason. */
void bench_write_text(const char *tool, const char *path, const char *text);
/* Whole-string integer in [lo, hi]; 0 on success, -1 otherwise. */
int bench_parse_ll(const char *s, long long lo, long long hi, long long *out);
/* The commit to record: given, else env QMM_COMMIT, else `git rev-parse --short HEAD`, else
 * "unknown". */
void bench_commit(const char *given, char *out, size_t size);
/* Now, UTC, ISO 8601 ("2026-11-29T14:58:00Z"). */
void bench_date_utc(char *out, size_t size);

/* ---- model shapes (data.c) ---- */

typedef struct bench_proj {
    char name[16]; /* "q", "k", ..., "down" */
    int64_t k, n;  /* K in_features, N out_features */
} bench_proj;
/* The seven projections of one decoder layer of a preset ("qwen3-4b", ...), from the engine's
 * own shapes (qmm_llm_linear_shape); returns the count, 0 for an unknown preset. */
int bench_projections(const char *preset, bench_proj out[QMM_LLM_LINEAR_COUNT]);

/* 1 when CUDA device `device` exists; else 0 after printing "tool: no usable CUDA device ..." */
int bench_have_gpu(const char *tool, int device);

/* ---- fatal checks (check.c): print the call, where, the error, what was going on; exit 1
 * (a failed CUDA call may poison the context, so there is no going on) ---- */

void bench_set_activity(const char *fmt, ...) BENCH_PRINTF(1, 2);
void bench_die(const char *call, const char *detail, const char *file, int line);
void *bench_xmalloc(size_t n);

#define CKQ(x)                                                                                  \
    do {                                                                                        \
        qmm_status ck_q_ = (x);                                                                 \
        if (ck_q_ != QMM_OK) {                                                                  \
            char ck_d_[512];                                                                    \
            snprintf(ck_d_, sizeof ck_d_, "%s: %s", qmm_status_name(ck_q_), qmm_last_error());  \
            bench_die(#x, ck_d_, __FILE__, __LINE__);                                           \
        }                                                                                       \
    } while (0)

#ifdef QMM_HAVE_CUDA
#include <cuda_runtime.h>
#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t ck_e_ = (x);                                                                \
        if (ck_e_ != cudaSuccess) {                                                             \
            char ck_d_[256];                                                                    \
            snprintf(ck_d_, sizeof ck_d_, "%s (%s)", cudaGetErrorString(ck_e_),                 \
                     cudaGetErrorName(ck_e_));                                                  \
            bench_die(#x, ck_d_, __FILE__, __LINE__);                                           \
        }                                                                                       \
    } while (0)
#endif

#endif
