/* Internal helpers shared by the library's files (not part of the public API). */
#ifndef QMM_INTERNAL_H
#define QMM_INTERNAL_H

#include <string.h>

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record a failure's detail for qmm_last_error() and return s, so callers can write
 *   if (k % 128) return qmm_fail(QMM_ERR_SHAPE, "K = %lld is not a multiple of 128", k); */
qmm_status qmm_fail(qmm_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Clear the detail (called at the start of public entry points that succeed). */
void qmm_clear_error(void);

/* The bits of a float and back (no aliasing). */
static inline uint32_t qmm_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float qmm_f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* splitmix64: one small seeded stream for every generator in the tree (weights, jitter, test
 * and benchmark data), so a seed means the same numbers everywhere. */
static inline uint64_t qmm_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [0, 1) with 53 random bits. */
static inline double qmm_unit_f64(uint64_t *state)
{
    return (double)(qmm_splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Milliseconds on the monotonic clock (status.c). */
double qmm_now_ms(void);

/* w over caller-owned buffers: packed [n, k/8] words, scales and biases [n, k/group]. */
static inline void qmm_w4_view(qmm_w4 *w, int64_t n, int64_t k, int64_t group, void *packed,
                               void *scales, void *biases)
{
    w->n = n;
    w->k = k;
    w->group = group;
    w->packed = (uint32_t *)packed;
    w->scales = (qmm_bf16 *)scales;
    w->biases = (qmm_bf16 *)biases;
    w->packed_count = (size_t)n * (size_t)(k / 8);
    w->scales_count = w->biases_count = (size_t)n * (size_t)(k / group);
}

/* Order of two byte strings (pointer, length): memcmp, then the shorter first. */
static inline int qmm_cmp_bytes(const char *a, size_t na, const char *b, size_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

/* Report progress to the hook of qmm_set_progress (nothing when none is set). */
void qmm_progress(const char *what, double done, double total);

/* A growable NUL-terminated byte buffer (status.c): appends after an allocation failure do
 * nothing and leave oom set, so a writer checks once at the end. */
typedef struct qmm_buf {
    char *p;
    size_t len, cap;
    int oom;
} qmm_buf;
void qmm_buf_put(qmm_buf *b, const char *s, size_t n);

/* a*b into *out; 0 on overflow. */
static inline int qmm_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > (size_t)-1 / a) return 0;
    *out = a * b;
    return 1;
}

/* For `qmm bench ops` only (tools/bench_case.c), not for library users: the description a
 * context plans with, changed in place to time a contender planned under another rule, and
 * restored after it (context.cu; CUDA builds). */
qmm_device_desc *qmm_cuda_desc_for_bench(qmm_cuda_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
