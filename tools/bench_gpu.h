/*
 * `qmm bench ops`: the GPU half (CUDA builds only). Every CUDA, cuBLAS and qmm call of the
 * benchmark goes through CK / CKB / CKQ, which print the call, file:line, the error and what the
 * benchmark was doing, then exit(1): a failed call poisons the context, so there is no going on.
 * Reports already written stay on disk (they are rewritten after every case).
 */
#ifndef QMM_TOOLS_BENCH_GPU_H
#define QMM_TOOLS_BENCH_GPU_H

#ifdef QMM_HAVE_CUDA

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench_ops.h"

/* CK, CKQ, bench_die, bench_set_activity: tools/common/common.h */

/* A cuBLAS call: on failure bench_die with cuBLAS's message (bench_cublas.c). */
#define CKB(x) bench_cublas_check((x), #x, __FILE__, __LINE__)
void bench_cublas_check(cublasStatus_t s, const char *call, const char *file, int line);

/* ---- timing (bench_timing.c) --------------------------------------------------------------- */

/* Enqueue call number `call` (0-based) on the timed stream; 0 on success, else nonzero with the
 * reason written into why[why_len]. Must not synchronise (it is captured into a graph). */
typedef int (*bench_enqueue_fn)(void *user, int call, char *why, size_t why_len);

typedef struct bench_timing_req {
    int min_calls;    /* at least this many calls per graph / batch */
    int copies;       /* weight copies the calls rotate through: calls is a multiple of it */
    int reps;         /* timed replays and eager batches */
    double target_us; /* grow calls until a batch takes about this long */
} bench_timing_req;

/* Warm up, pick the call count, time `reps` eager batches (events around each batch) and `reps`
 * back-to-back replays of a CUDA graph of the same calls (an event between replays), captured on
 * s, which must not be the legacy default stream. Per-call times into out. Returns 0, or -1 when
 * a call or the capture failed (why says). */
int bench_time_calls(cudaStream_t s, bench_enqueue_fn fn, void *user, const bench_timing_req *q,
                     bench_time *out, char *why, size_t why_len);

/* ---- cuBLAS bf16 dense peer (bench_cublas.c) ------------------------------------------------ */

typedef struct bench_cublas {
    cublasHandle_t h;
    void *ws;          /* preallocated workspace: cuBLAS may not allocate under graph capture */
    size_t ws_bytes;
    int version;
} bench_cublas;

void bench_cublas_init(bench_cublas *b, cudaStream_t s);
void bench_cublas_destroy(bench_cublas *b);
/* c[M, N] = a[M, K] · w[N, K]ᵀ, bf16 row-major in and out, fp32 accumulation (cublasGemmEx). */
cublasStatus_t bench_cublas_matmul(bench_cublas *b, const void *a, int64_t m, const void *w,
                                   int64_t n, int64_t k, void *c);

/* ---- ceilings (bench_ceiling.c) ------------------------------------------------------------- */

/* Measure into c: the copy bandwidth of a 1 GiB device-to-device kernel copy (read + write bytes
 * over time, graph of 10) and cuBLAS bf16 TFLOP/s at 8192³. When a measurement cannot be made,
 * says so on stderr and in the note, and keeps the DESIGN default. */
void bench_measure_ceilings(cudaStream_t s, bench_cublas *cb, const bench_opts *o, bench_rng *rng,
                            bench_ceilings *c);
void bench_default_ceilings(bench_ceilings *c);
/* The copy ceiling alone, as bench_measure_ceilings measures it but over `bytes` per buffer (a
 * multiple of 16, at least 8 MiB; two buffers are allocated) and `reps` replays of a graph of 10
 * copies, on CUDA device `device` (made current) and a stream of its own. Returns 0 with c
 * measured (GB/s at the median, the slowest and the fastest replay), or -1 with c->measured = 0,
 * c->value = 0 and the reason in c->note: a bad request, no memory for the buffers, the kernel
 * unavailable or wrong. Prints nothing; a CUDA error that poisons the context still ends the
 * process (CK). */
int bench_measure_copy_ceiling(int device, size_t bytes, int reps, bench_ceiling *c);

/* ---- machine facts (bench_device.c) --------------------------------------------------------- */

void bench_meta_fill(bench_meta *m, const bench_opts *o, int argc, char **argv);

/* ---- device weight copies (bench_copies.c) -------------------------------------------------- */

typedef struct bench_copies {
    qmm_cuda_weight **w4; /* [n_w4] uploads of the same quantized weight */
    int n_w4;
    size_t w4_bytes;      /* device bytes of one copy (the library's layout, padding included) */
    size_t w4_logical_bytes; /* packed + scales + biases of the format: what GB/s counts */
    void **bf16;          /* [n_bf16] device copies of the dequantized bf16 weight [N, K] */
    int n_bf16;
    size_t bf16_bytes;
} bench_copies;

/* Upload enough copies that each family totals >= 4x the L2 (1 copy with --hot), capped by
 * --max-copies-mb (a warning says when the cap bites). w_bf16 is the host [N, K] dequantized. */
void bench_copies_create(bench_copies *cp, qmm_cuda_ctx *ctx, const qmm_w4 *w,
                         const qmm_bf16 *w_bf16, long long l2_bytes, const bench_opts *o);
void bench_copies_free(bench_copies *cp);

/* ---- one (shape, M) case: every contender checked, then timed (bench_case.c) ---------------- */

typedef struct bench_case {
    const bench_opts *o;
    cudaStream_t s;
    qmm_cuda_ctx *ctx;
    bench_cublas *cb;
    const bench_shape *shape;
    int64_t m;
    const bench_copies *cp;
    const qmm_bf16 *a_dev; /* [M, K] */
    qmm_bf16 *c_dev;       /* [M, N] */
    void **ws;             /* workspace, grown as contenders need (cudaMalloc'd) */
    size_t *ws_bytes;
    const int64_t *rows;   /* the checked rows of C */
    int nrows;
    const qmm_bf16 *ref;   /* CPU reference of the checked rows [nrows, N] */
    qmm_bf16 *got;         /* host scratch [nrows, N] */
} bench_case;

/* Append one row per contender to rs. Returns how many contenders failed. */
int bench_run_case(const bench_case *c, bench_results *rs);

#endif /* QMM_HAVE_CUDA */
#endif
