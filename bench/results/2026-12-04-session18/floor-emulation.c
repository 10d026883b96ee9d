/* The error floor of tests/matmul_prob.c emulated on the CPU (NOTES.md, the eighteenth session):
 * random problems as prob_init makes them, the dense path's arithmetic (weights dequantized to
 * bf16 by one FMA, fp32 sums, bf16 out), the relative error against the old floor and the new.
 * Not built by CMake; from the repository root after a build:
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -DFAC=1.0 -Iinclude -Isrc -Itests FILE tests/harness.c \
 *       build/libqmm.a -lm -lpthread -lcjson -lutf8proc -lpcre2-8 -L/usr/local/cuda/lib64 \
 *       -lnccl -lcudart -lcublas -lstdc++ -ldl -o floor && ./floor --seed 11 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "harness.h"
#include "internal.h"
#ifndef FAC
#define FAC 1.0
#endif

static float bf(float x) { return qmm_bf16_to_f32(qmm_f32_to_bf16(x)); }

static void run(int64_t m, int64_t n, int64_t k, int trials)
{
    int fail_old = 0, fail_new = 0, floor_new_used = 0, floor_old_used = 0;
    double worst_old = 0, worst_new = 0;
    for (int t = 0; t < trials; t++) {
        qmm_w4 w;
        qmm_w4_alloc_group(n, k, 128, &w);
        test_random_w4(&w, 0.002, 0.02);
        qmm_bf16 *a = malloc(m * k * 2);
        test_fill_bf16(a, m * k, 1.0);
        double *ref = malloc(8 * m * n), *ab = malloc(8 * m * n), *sqv = malloc(8 * m * n);
        test_matmul_f64(a, m, &w, ref);
        test_matmul_abs_f64(a, m, &w, ab);
        test_matmul_sq_f64(a, m, &w, sqv);
        double ss = 0, sq = 0, rr = 0, num = 0;
        for (int64_t i = 0; i < m * n; i++) ss += ab[i] * ab[i], sq += sqv[i], rr += ref[i] * ref[i];
        /* the dense path: weights dequantized to bf16, fp32 sums, bf16 out */
        int64_t g = k / 128;
        for (int64_t i = 0; i < m; i++)
            for (int64_t r = 0; r < n; r++) {
                float acc = 0;
                for (int64_t j = 0; j < k; j++) {
                    uint32_t q = (w.packed[r * (k / 8) + j / 8] >> (4 * (j % 8))) & 0xF;
                    float s = qmm_bf16_to_f32(w.scales[r * g + j / 128]), b = qmm_bf16_to_f32(w.biases[r * g + j / 128]);
                    acc += qmm_bf16_to_f32(a[i * k + j]) * bf(fmaf(s, (float)q, b));
                }
                double d = bf(acc) - ref[i * n + r];
                num += d * d;
            }
        double f_old = sqrt(ss) / (2 * sqrt((double)k)), f_new = fmax(f_old, sqrt(sq) * FAC);
        double e_old = sqrt(num) / fmax(sqrt(rr), f_old), e_new = sqrt(num) / fmax(sqrt(rr), f_new);
        fail_old += e_old > 1e-2, fail_new += e_new > 1e-2;
        floor_old_used += f_old > sqrt(rr), floor_new_used += f_new > sqrt(rr);
        if (e_old > worst_old) worst_old = e_old;
        if (e_new > worst_new) worst_new = e_new;
        free(a), free(ref), free(ab), free(sqv);
        qmm_w4_free(&w);
    }
    printf("M=%lld N=%lld K=%lld: %d trials; over 1e-2: old floor %d, new %d; worst %.3g / %.3g; floor above ||ref||: old %d, new %d\n",
           (long long)m, (long long)n, (long long)k, trials, fail_old, fail_new, worst_old, worst_new, floor_old_used, floor_new_used);
}

static void sim(void)
{
    run(1, 1, 128, 400000);
    run(1, 3, 256, 50000);
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {{"sim", sim}};
    return test_main(argc, argv, cases, 1);
}
