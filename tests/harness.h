/*
 * A tiny test harness: a table of named cases, a seed printed and settable (--seed N),
 * a name filter (--filter SUBSTR), and a closing line "N passed, N failed" (then ", N skipped"
 * when cases skipped themselves).
 * Exit codes: 0 all passed (some cases may have skipped themselves), 1 a failure, 77 skipped:
 * the whole program, or every case that ran (ctest shows it as Skipped).
 * QMM_REQUIRE_GPU=1 (bench/device.sh sets it on the GPU machine) turns a skip for lack of a GPU
 * (test_skip_no_gpu, test_require_gpu) into a failure, exit 1, so a broken driver cannot pass
 * every GPU test; test_skip_all stays a skip (no NCCL, a second GPU that a one-GPU machine lacks).
 */
#ifndef QMM_TEST_HARNESS_H
#define QMM_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include "qmm.h"

typedef struct test_case {
    const char *name;
    void (*fn)(void);
} test_case;

/* A table of cases named after their functions: TEST_TABLE(cases, fn_a, fn_b, ...) declares
 * static const test_case cases[] = {{"fn_a", fn_a}, ...} (up to 16 cases). */
#define TEST_ENTRY_(fn) {#fn, fn},
#define TEST_E1_(f, x) f(x)
#define TEST_E2_(f, x, ...) f(x) TEST_E1_(f, __VA_ARGS__)
#define TEST_E3_(f, x, ...) f(x) TEST_E2_(f, __VA_ARGS__)
#define TEST_E4_(f, x, ...) f(x) TEST_E3_(f, __VA_ARGS__)
#define TEST_E5_(f, x, ...) f(x) TEST_E4_(f, __VA_ARGS__)
#define TEST_E6_(f, x, ...) f(x) TEST_E5_(f, __VA_ARGS__)
#define TEST_E7_(f, x, ...) f(x) TEST_E6_(f, __VA_ARGS__)
#define TEST_E8_(f, x, ...) f(x) TEST_E7_(f, __VA_ARGS__)
#define TEST_E9_(f, x, ...) f(x) TEST_E8_(f, __VA_ARGS__)
#define TEST_E10_(f, x, ...) f(x) TEST_E9_(f, __VA_ARGS__)
#define TEST_E11_(f, x, ...) f(x) TEST_E10_(f, __VA_ARGS__)
#define TEST_E12_(f, x, ...) f(x) TEST_E11_(f, __VA_ARGS__)
#define TEST_E13_(f, x, ...) f(x) TEST_E12_(f, __VA_ARGS__)
#define TEST_E14_(f, x, ...) f(x) TEST_E13_(f, __VA_ARGS__)
#define TEST_E15_(f, x, ...) f(x) TEST_E14_(f, __VA_ARGS__)
#define TEST_E16_(f, x, ...) f(x) TEST_E15_(f, __VA_ARGS__)
#define TEST_NTH_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, N, ...) N
#define TEST_EACH_(f, ...)                                                                   \
    TEST_NTH_(__VA_ARGS__, TEST_E16_, TEST_E15_, TEST_E14_, TEST_E13_, TEST_E12_, TEST_E11_,   \
              TEST_E10_, TEST_E9_, TEST_E8_, TEST_E7_, TEST_E6_, TEST_E5_, TEST_E4_, TEST_E3_, \
              TEST_E2_, TEST_E1_, 0)(f, __VA_ARGS__)
#define TEST_TABLE(name, ...) static const test_case name[] = {TEST_EACH_(TEST_ENTRY_, __VA_ARGS__)}
#define TEST_COUNT(t) ((int)(sizeof(t) / sizeof((t)[0])))

/* The whole main of a GPU test: skip unless a CUDA device is present (what: what goes untested),
 * then run the cases named after their functions. */
#define TEST_GPU_MAIN(what, ...)                                                              \
    int main(int argc, char **argv)                                                           \
    {                                                                                         \
        test_require_gpu(what);                                                               \
        TEST_TABLE(cases, __VA_ARGS__);                                                       \
        return test_main(argc, argv, cases, TEST_COUNT(cases));                               \
    }

/* Runs the table; returns the process exit code. */
int test_main(int argc, char **argv, const test_case *cases, int count);
/* Skip the whole program with a visible reason: prints and exits 77. Not for the lack of any GPU
 * (test_skip_no_gpu): for what a GPU machine may still lack (NCCL, two GPUs, data). */
void test_skip_all(const char *why);
/* Skip the whole program for lack of a GPU (no device, no CUDA in the build): exits 77, or 1 with
 * a FAIL line when QMM_REQUIRE_GPU=1. */
void test_skip_no_gpu(const char *why);
/* QMM_REQUIRE_GPU=1: a missing GPU is a failure, not a skip. */
int test_gpu_required(void);
/* Mark the running case skipped (printed "skip NAME: why"; counted apart from passes). A check
 * that fails in the case still makes it a failure. */
void test_skip_case(const char *why);

/* Mark the running case failed with a message (it keeps running; later checks still report). */
void test_fail(const char *file, int line, const char *fmt, ...);
int test_failed_now(void);

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) test_fail(__FILE__, __LINE__, "CHECK failed: %s", #cond);        \
    } while (0)
#define CHECKF(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);                      \
    } while (0)
#define CHECK_STATUS(expr, want)                                                      \
    do {                                                                              \
        qmm_status got_ = (expr);                                                     \
        if (got_ != (want))                                                           \
            test_fail(__FILE__, __LINE__, "%s -> %s, want %s (%s)", #expr,            \
                      qmm_status_name(got_), qmm_status_name(want), qmm_last_error()); \
    } while (0)
#define CHECK_OK(expr) CHECK_STATUS(expr, QMM_OK)
/* expr must fail with `want` and leave a message (qmm_clear_error is internal.h's) */
#define EXPECT_FAIL(expr, want)                                                               \
    do {                                                                                      \
        qmm_clear_error();                                                                    \
        CHECK_STATUS(expr, want);                                                             \
        CHECKF(qmm_last_error()[0] != 0, "%s: qmm_last_error() is empty", #expr);             \
    } while (0)
/* The tests' one CUDA check (GPU tests include cuda_runtime.h): fail the case and return. */
#define CUDA_OK(call)                                                                          \
    do {                                                                                       \
        int e_ = (int)(call);                                                                  \
        if (e_ != 0) {                                                                         \
            test_fail(__FILE__, __LINE__, "%s: %s", #call,                                     \
                      cudaGetErrorString((cudaError_t)e_));                                    \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* ---- random data (seeded from --seed; fresh each run unless given) ---- */
uint64_t test_seed(void);
uint64_t test_rand_u64(void);
double test_rand_uniform(double lo, double hi);
double test_rand_normal(void);
void test_fill_bf16(qmm_bf16 *x, size_t n, double scale);   /* normal(0, scale) */
/* A random quantized weight: random codes, scales of both signs (|s| in [lo, hi]), biases. */
void test_random_w4(qmm_w4 *w, double scale_lo, double scale_hi);

/* fp64 reference of C = A·Wᵀ using the dequantized weights exactly (no rounding). */
void test_matmul_f64(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, double *c);
/* The same with |a| and |w|: the scale of the rounding errors of any way to compute it. */
void test_matmul_abs_f64(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, double *c);
/* Σ (a·w)² over each output's terms: the size of the errors of rounding each term (the weight's
 * bf16 rounding) when a few terms dominate. */
void test_matmul_sq_f64(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, double *c);
/* ||got - ref||_F / ||ref||_F ; NaN/Inf in got -> +INFINITY. */
double test_rel_frob_bf16(const qmm_bf16 *got, const double *ref, size_t n);
double test_rel_frob_f32(const float *got, const double *ref, size_t n);

/* ---- files and models (harness.c) ---- */
/* A fresh directory under $TMPDIR (or /tmp) named qmm_<tag>_XXXXXX into out; 0 (and a failed
 * case) when it cannot be made. */
int test_make_tmpdir(char *out, size_t size, const char *tag);
/* Write text to path (a failed case when it cannot). */
void test_write_text(const char *path, const char *text);
/* A file's bytes (malloc'd, *len set; free them), or NULL when it cannot be opened. */
unsigned char *test_read_file(const char *path, size_t *len);
/* Remove a directory tree. */
void test_rm_tree(const char *dir);
/* A model the way a user makes one: random HF checkpoint -> quantize -> load (NULL and a failed
 * case on error). The model keeps its file mapped, so the directory is gone on return. */
qmm_llm_model *test_checkpoint_model(const qmm_llm_config *c);
/* A synthetic model (qmm_llm_model_synthetic; NULL and a failed case on error). */
qmm_llm_model *test_synthetic_model(const qmm_llm_config *c, uint64_t seed);
/* A CUDA session with options o (NULL: the defaults); NULL and a failed case on error. */
qmm_llm_cuda_session *test_cuda_session(const qmm_llm_model *m, int64_t max_seq,
                                        const qmm_llm_cuda_options *o);
/* Token `got` is an acceptable greedy choice under the reference logits ref[n]: the argmax, or
 * within a near tie of it (2 % of max(1, |best logit|): fp32 accumulation order and bf16
 * rounding move logits by about 1e-3 relative). *gap (gap may be NULL) = ref[best] - ref[got]. */
int test_near_tie(const float *ref, int64_t n, int32_t got, double *gap);
/* What the engine tests start from: a model, n random prompt ids, two logit buffers a and b of
 * the vocabulary's size (V). */
typedef struct test_llm {
    qmm_llm_model *m;
    int64_t V;
    int32_t *ids;
    float *a, *b;
} test_llm;
/* Takes m (test_checkpoint_model or test_synthetic_model); 0 when m is NULL (its maker failed the
 * case; nothing to free). */
int test_llm_init(test_llm *t, qmm_llm_model *m, int n);
void test_llm_free(test_llm *t);
/* Steps session s and the reference session ref through f->ids[0..steps), one decode each: at
 * every position s's logits within tol of ref's and its token ref's or a near tie under ref's
 * logits; s at position steps afterwards. Returns the worst rel err; `what` and config index ci
 * name the pair in failures. */
double test_decode_pair(test_llm *f, qmm_llm_cuda_session *s, qmm_llm_cuda_session *ref, int steps,
                        double tol, const char *what, int ci);
/* n random token ids in [0, vocab). */
void test_random_ids(int32_t *ids, int n, int64_t vocab);
/* Skip the program (test_skip_no_gpu: exit 77, or 1 under QMM_REQUIRE_GPU=1) unless a CUDA device
 * is present; what: what goes untested. */
void test_require_gpu(const char *what);
/* A context on GPU 0 and its facts printed (exit 1 when it cannot be made). */
qmm_cuda_ctx *test_gpu_context(void);

/* ||got - ref|| / ||ref|| of two fp32 vectors (logits); +inf when got holds a NaN or Inf. */
double test_rel_err_f32(const float *got, const float *ref, int64_t n);

/* Field by field (padding bytes of a copied struct are unspecified, so no memcmp). */
int test_plan_equal(const qmm_plan *a, const qmm_plan *b);

/* Poison pattern for outputs: a signalling-looking NaN in bf16. */
#define TEST_POISON_BF16 ((qmm_bf16)0x7FA5)

#endif
