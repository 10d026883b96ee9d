/* The CPU reference matmul: the definition of what every other path computes.
 * Scalar, one thread, readable top to bottom: check the arguments, then three loops. */
#include <stdlib.h>
#include <math.h>

#include "cpu.h"

qmm_status qmm_cpu_check_matmul(const char *fn, const qmm_bf16 *a, int64_t m, const qmm_w4 *w,
                                const qmm_bf16 *c)
{
    if (!a || !c) return qmm_fail(QMM_ERR_NULL, "%s: %s is NULL", fn, !a ? "a" : "c");
    if (m < 1) return qmm_fail(QMM_ERR_SHAPE, "%s: M = %lld must be >= 1", fn, (long long)m);
    if ((uintptr_t)a % sizeof *a || (uintptr_t)c % sizeof *c)
        return qmm_fail(QMM_ERR_ALIGN, "%s: %s is not 2-byte aligned (bf16)", fn,
                        (uintptr_t)a % sizeof *a ? "a" : "c");
    qmm_status st = qmm_w4_validate(w);
    if (st) return st;
    size_t mk, mn;
    if ((uint64_t)m > SIZE_MAX || !qmm_mul_size((size_t)m, (size_t)w->k, &mk) ||
        !qmm_mul_size(mk, sizeof(float), &mk) || !qmm_mul_size((size_t)m, (size_t)w->n, &mn) ||
        !qmm_mul_size(mn, sizeof(float), &mn))
        return qmm_fail(QMM_ERR_OVERFLOW, "%s: M = %lld with W [%lld, %lld] overflows size_t", fn,
                        (long long)m, (long long)w->n, (long long)w->k);
    return QMM_OK;
}

// a is [M, K] bf16, w is [N, K] W4 (groups of g), c is [M, N] bf16: c = a · wᵀ
qmm_status qmm_matmul_ref(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, qmm_bf16 *c)
{
    qmm_clear_error();
    qmm_status st = qmm_cpu_check_matmul("qmm_matmul_ref", a, m, w, c);
    if (st) return st;

    size_t M = (size_t)m, N = (size_t)w->n, K = (size_t)w->k, g = (size_t)w->group, G = K / g;
    float *af = malloc(M * K * sizeof *af);  /* A in f32 (exact): converted once */
    float *wrow = malloc(K * sizeof *wrow);  /* one dequantized row of W, reused for all of A */
    if (!af || !wrow) {
        free(af);
        free(wrow);
        return qmm_fail(QMM_ERR_NOMEM, "qmm_matmul_ref: no memory for A in f32");
    }
    for (size_t i = 0; i < M * K; i++) af[i] = qmm_bf16_to_f32(a[i]);

    for (size_t n = 0; n < N; n++) {
        // w[n][j] = fmaf(scale, q, bias) in fp32
        for (size_t j = 0; j < K; j++) {
            uint32_t q = (w->packed[n * (K / 8) + j / 8] >> (4 * (j % 8))) & 0xFu;
            float s = qmm_bf16_to_f32(w->scales[n * G + j / g]);
            float b = qmm_bf16_to_f32(w->biases[n * G + j / g]);
            wrow[j] = fmaf(s, (float)q, b);
        }
        // c[i][n] = bf16(Σ_j a[i][j] * w[n][j]): one fp32 accumulator, j in order
        for (size_t i = 0; i < M; i++) {
            float acc = 0.0f;
            for (size_t j = 0; j < K; j++) {
                float p = af[i * K + j] * wrow[j]; /* its own statement: never fused into an FMA */
                acc += p;
            }
            c[i * N + n] = qmm_f32_to_bf16(acc);
        }
    }
    free(wrow);
    free(af);
    return QMM_OK;
}
