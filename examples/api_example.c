/* The README's "API in a few lines" as a program, CPU path: quantize a random W[N, K], multiply
 * A[M, K] by it with the fast CPU matmul and check the result against the reference definition
 * (qmm_matmul_ref) and against fp64 over the dequantized weight. Built by tests/install against
 * an installed qmm (pkg-config and find_package); exits 0 when every check passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qmm.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        qmm_status st_ = (call);                                                             \
        if (st_ != QMM_OK) {                                                                 \
            fprintf(stderr, "%s: %s (%s)\n", #call, qmm_status_name(st_), qmm_last_error()); \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

int main(void)
{
    enum { M = 3, N = 64, K = 256 };
    static float weights_f32[N * K], deq[N * K];
    static qmm_bf16 a_bf16[M * K], c_bf16[M * N], c_ref[M * N];
    srand(15);
    for (int i = 0; i < N * K; i++) weights_f32[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < M * K; i++) a_bf16[i] = qmm_f32_to_bf16((float)rand() / RAND_MAX - 0.5f);

    qmm_w4 w;
    qmm_quant_error err;
    CHECK(qmm_w4_alloc(N, K, &w));
    CHECK(qmm_quantize(weights_f32, QMM_F32, &w, &err));
    CHECK(qmm_matmul_cpu(a_bf16, M, &w, c_bf16, 0));
    CHECK(qmm_matmul_ref(a_bf16, M, &w, c_ref));
    CHECK(qmm_dequantize(&w, deq, QMM_F32, (size_t)N * K));

    double worst = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double want = 0;
            for (int j = 0; j < K; j++)
                want += (double)qmm_bf16_to_f32(a_bf16[m * K + j]) * deq[n * K + j];
            float got = qmm_bf16_to_f32(c_bf16[m * N + n]);
            float ref = qmm_bf16_to_f32(c_ref[m * N + n]);
            /* bf16 output: one rounding of a value of magnitude ~|want|, plus fp32 sums */
            double tol = 1e-2 * fabs(want) + 1e-2;
            if (fabs(got - want) > tol || fabs(ref - want) > tol) {
                fprintf(stderr, "c[%d][%d] = %g (ref %g), want %g\n", m, n, got, ref, want);
                qmm_w4_free(&w);
                return 1;
            }
            if (fabs(got - want) > worst) worst = fabs(got - want);
        }
    printf("qmm %s: %dx%dx%d ok, quantization rel. error %.4f, max |c - fp64| %.2e\n",
           qmm_version(), M, N, K, err.rel_frob, worst);
    qmm_w4_free(&w);
    return 0;
}
