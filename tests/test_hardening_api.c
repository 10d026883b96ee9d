/* Regression tests for issue 17's API defects: each case is an input that crashed, hung, wrote
 * an output on error or was accepted wrongly before the fix. Outputs are poisoned and must stay
 * untouched on every refusal. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "internal.h"


static qmm_device_desc desc(void)
{
    qmm_device_desc d;
    memset(&d, 0, sizeof d);
    d.gpu.sms = 132;
    d.matvec_max_m = 8;
    d.matvec_limit_m = 16;
    d.max_split = 16;
    d.min_k_tiles = 2;
    d.config_count = 2;
    d.config[0] = (qmm_tile_config){32, 64, 4, 64, 2};
    d.config[1] = (qmm_tile_config){128, 128, 1, 1 << 30, 4};
    d.gpu.bandwidth_tbs = 4.0;
    d.gpu.peak_tflops = 720;
    d.tiled_tflops = 400;
    d.gpu.launch_us = 2;
    d.dense_tflops = 300;
    d.dense_min_m = 512;
    return d;
}

/* Defect 1: the dense path's configuration index was not checked (out-of-bounds read). */
static void predict_checks_the_config_of_every_path(void)
{
    qmm_device_desc d = desc();
    const int configs[] = {-1, 2, 4, 1000000, INT_MAX, INT_MIN};
    const qmm_path paths[] = {QMM_PATH_DENSE, QMM_PATH_TILED, QMM_PATH_SPLITK};
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++)
        for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
            qmm_plan plan;
            memset(&plan, 0, sizeof plan);
            plan.path = paths[p];
            plan.split = 1;
            plan.config = configs[i];
            double us = qmm_plan_predict_us(2048, 4096, 2560, &d, &plan);
            CHECKF(us == -1, "%s with config %d: predicted %g, want -1", qmm_path_name(paths[p]),
                   configs[i], us);
        }
    qmm_plan ok;
    memset(&ok, 0, sizeof ok);
    ok.path = QMM_PATH_DENSE;
    ok.split = 1;
    ok.config = 1;
    CHECK(qmm_plan_predict_us(2048, 4096, 2560, &d, &ok) > 0);
}

/* Defect 8: Inf or NaN rates gave OK with predicted_us = -1. */
static void device_plan_refuses_non_finite_rates(void)
{
    static const struct {
        const char *what;
        int field; /* 0 peak (the tiled kernel's rate), 1 launch, 2 bandwidth, 3 dense, 4 the
                    * dense path's fixed µs, 5 its dequantize rate */
        double v;
    } bad[] = {
        {"peak Inf", 0, INFINITY}, {"peak NaN", 0, NAN},     {"launch Inf", 1, INFINITY},
        {"launch NaN", 1, NAN},    {"launch -1", 1, -1},     {"bandwidth Inf", 2, INFINITY},
        {"dense Inf", 3, INFINITY}, {"dense NaN", 3, NAN},   {"dense -1", 3, -1},
        {"dense fixed Inf", 4, INFINITY}, {"dense fixed NaN", 4, NAN}, {"dense fixed -1", 4, -1},
        {"dequant Inf", 5, INFINITY}, {"dequant NaN", 5, NAN}, {"dequant -1", 5, -1},
    };
    const int64_t ms[] = {1, 32, 4096};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (size_t j = 0; j < 3; j++) {
            qmm_device_desc d = desc();
            double *f[] = {&d.tiled_tflops, &d.gpu.launch_us, &d.gpu.bandwidth_tbs, &d.dense_tflops,
                           &d.dense_fixed_us, &d.dense_dequant_tbs};
            *f[bad[i].field] = bad[i].v;
            qmm_plan p;
            memset(&p, 0xA5, sizeof p);
            qmm_plan poison = p;
            qmm_clear_error();
            qmm_status st = qmm_plan_device(ms[j], 4096, 2560, &d, &p);
            CHECKF(st != QMM_OK, "%s, M = %lld: accepted (predicted %g)", bad[i].what,
                   (long long)ms[j], p.predicted_us);
            CHECKF(!memcmp(&p, &poison, sizeof p), "%s: the plan was written", bad[i].what);
        }
    /* finite but absurd rates: the prediction must still be a usable number, or an error */
    qmm_device_desc d = desc();
    d.gpu.bandwidth_tbs = 1e-303;
    qmm_plan p;
    qmm_status st = qmm_plan_device(32, 4096, 2560, &d, &p);
    CHECK(st != QMM_OK || (isfinite(p.predicted_us) && p.predicted_us >= 0));
    /* a denormal dequantize rate on the shipped table, where the table sends M = 2048 to the
     * dense path: an error, not an OK plan without a prediction */
    CHECK_OK(qmm_tune_desc(9, 0, 0, &d));
    d.dense_dequant_tbs = 1e-310;
    qmm_cuda_options o = qmm_cuda_options_default();
    o.policy = QMM_POLICY_DEVICE;
    st = qmm_plan_call(&d, 2048, 2560, 4096, &o, &p);
    CHECKF(st == QMM_ERR_RANGE, "a denormal dequantize rate: %s (predicted %g)", qmm_status_name(st),
           p.predicted_us);
}

/* Defect 3: max_split = INT_MAX with K >= 2^31 overflowed s++ after 35 s of CPU. */
static void best_split_bounds_its_search(void)
{
    qmm_gpu_caps g = {0};
    qmm_model_kernel k = {0};
    CHECK_OK(qmm_model_gpu_preset("h200", &g));
    CHECK_OK(qmm_model_kernel_preset("w4", &k));
    qmm_model_estimate e;
    memset(&e, 0xA5, sizeof e);
    qmm_model_estimate poison = e;
    const int64_t big_k = (int64_t)1 << 40;
    double t0 = (qmm_now_ms() * 1e-3);
    EXPECT_FAIL(qmm_model_best_split(&g, &k, 16, 1024, big_k, INT_MAX, QMM_GROUP, &e),
                QMM_ERR_ARG);
    EXPECT_FAIL(qmm_model_best_split(&g, &k, 16, 1024, big_k, INT_MAX, 0, &e), QMM_ERR_ARG);
    EXPECT_FAIL(qmm_model_best_split_document(&g, 16, 1024, big_k, 128, 128, INT_MAX, &e),
                QMM_ERR_ARG);
    EXPECT_FAIL(qmm_model_best_split(&g, &k, 16, 1024, big_k, QMM_MODEL_MAX_SPLIT + 1, 0, &e),
                QMM_ERR_ARG);
    CHECK(!memcmp(&e, &poison, sizeof e));
    /* the largest allowed search runs, and quickly */
    CHECK_OK(qmm_model_best_split(&g, &k, 16, 1024, big_k, QMM_MODEL_MAX_SPLIT, 0, &e));
    CHECK_OK(qmm_model_best_split_document(&g, 16, 1024, big_k, 128, 128, QMM_MODEL_MAX_SPLIT,
                                           &e));
    double dt = (qmm_now_ms() * 1e-3) - t0;
    printf("    searches took %.3f s\n", dt);
    CHECKF(dt < 5.0, "the bounded searches took %.1f s", dt);
}

/* Defect 7 (first half): qmm_pipeline_simulate filled seg before finding a bad step. */
static void pipeline_simulate_writes_nothing_on_error(void)
{
    enum { N = 4 };
    int64_t rows[N] = {8, 8, 8, 3};
    qmm_pipeline_step st[3 * N];
    CHECK_OK(qmm_pipeline_plan(rows, N, 2, st, 3 * N));
    double t[3 * N];
    for (int i = 0; i < 3 * N; i++) t[i] = 1.0 + i % 3;
    /* three ways to break the last steps: the earlier ones are valid and used to be written */
    for (int how = 0; how < 3; how++) {
        qmm_pipeline_step bad[3 * N];
        memcpy(bad, st, sizeof bad);
        qmm_pipeline_step *last = &bad[3 * N - 1];
        if (how == 0) last->dep[0].chunk = N + 5;       /* waits for a step that never runs */
        else if (how == 1) last->engine = 7;            /* malformed */
        else bad[3 * N - 1] = bad[3 * N - 2];           /* the same step twice */
        qmm_model_segment seg[3 * N];
        memset(seg, 0xA5, sizeof seg);
        double total = -42;
        unsigned char poison[sizeof seg];
        memcpy(poison, seg, sizeof seg);
        EXPECT_FAIL(qmm_pipeline_simulate(bad, N, t, 3 * N, seg, 3 * N, &total), QMM_ERR_ARG);
        CHECKF(!memcmp(seg, poison, sizeof seg), "case %d: seg was written", how);
        CHECK(total == -42);
    }
    qmm_model_segment seg[3 * N];
    double total = 0;
    CHECK_OK(qmm_pipeline_simulate(st, N, t, 3 * N, seg, 3 * N, &total));
    CHECK(total > 0 && seg[3 * N - 1].end <= total);
}

/* Defect 10: misaligned buffers were read with misaligned loads (UBSan) on the CPU path. */
static void cpu_path_refuses_misaligned_buffers(void)
{
    const int64_t m = 3, n = 5, k = 256;
    qmm_w4 w;
    CHECK_OK(qmm_w4_alloc(n, k, &w));
    test_random_w4(&w, 0.01, 0.1);
    /* byte buffers with room for an odd offset */
    unsigned char *abuf = malloc((size_t)(m * k) * 2 + 8), *cbuf = malloc((size_t)(m * n) * 2 + 8);
    unsigned char *pbuf = malloc(w.packed_count * 4 + 8), *sbuf = malloc(w.scales_count * 2 + 8);
    qmm_bf16 *a = (qmm_bf16 *)(abuf + 2), *c = (qmm_bf16 *)(cbuf + 2);
    test_fill_bf16(a, (size_t)(m * k), 1.0);
    qmm_bf16 *a_odd = (qmm_bf16 *)(abuf + 1), *c_odd = (qmm_bf16 *)(cbuf + 1);
    memmove(a_odd, a, (size_t)(m * k) * 2);
    memset(cbuf, 0xA5, (size_t)(m * n) * 2 + 8);
    EXPECT_FAIL(qmm_matmul_ref(a_odd, m, &w, c), QMM_ERR_ALIGN);
    EXPECT_FAIL(qmm_matmul_cpu(a_odd, m, &w, (qmm_bf16 *)(cbuf + 2), 1), QMM_ERR_ALIGN);
    memmove(a, a_odd, (size_t)(m * k) * 2);
    EXPECT_FAIL(qmm_matmul_ref(a, m, &w, c_odd), QMM_ERR_ALIGN);
    EXPECT_FAIL(qmm_matmul_cpu(a, m, &w, c_odd, 1), QMM_ERR_ALIGN);
    for (size_t i = 0; i < (size_t)(m * n) * 2 + 8; i++)
        if (cbuf[i] != 0xA5) {
            CHECKF(0, "byte %zu of C was written", i);
            break;
        }
    /* misaligned weight buffers */
    qmm_w4 wp = w, ws = w, wb = w;
    wp.packed = (uint32_t *)(pbuf + 2);
    memcpy(wp.packed, w.packed, w.packed_count * 4);
    ws.scales = (qmm_bf16 *)(sbuf + 1);
    memcpy(ws.scales, w.scales, w.scales_count * 2);
    wb.biases = (qmm_bf16 *)(sbuf + 1);
    memcpy(wb.biases, w.biases, w.biases_count * 2);
    const qmm_w4 *bad[] = {&wp, &ws, &wb};
    for (int i = 0; i < 3; i++) {
        EXPECT_FAIL(qmm_w4_validate(bad[i]), QMM_ERR_ALIGN);
        EXPECT_FAIL(qmm_matmul_ref(a, m, bad[i], c), QMM_ERR_ALIGN);
        EXPECT_FAIL(qmm_matmul_cpu(a, m, bad[i], c, 1), QMM_ERR_ALIGN);
        float row[256];
        EXPECT_FAIL(qmm_dequantize_row_f32(bad[i], 0, row), QMM_ERR_ALIGN);
    }
    /* quantize from and dequantize into misaligned element buffers */
    float *src = malloc((size_t)(n * k) * 4 + 8);
    for (int64_t i = 0; i < n * k; i++) src[i] = (float)test_rand_normal();
    unsigned char *src_odd = (unsigned char *)malloc((size_t)(n * k) * 4 + 8);
    memcpy(src_odd + 2, src, (size_t)(n * k) * 4);
    EXPECT_FAIL(qmm_quantize(src_odd + 2, QMM_F32, &w, NULL), QMM_ERR_ALIGN);
    EXPECT_FAIL(qmm_quantize(src_odd + 1, QMM_BF16, &w, NULL), QMM_ERR_ALIGN);
    EXPECT_FAIL(qmm_dequantize(&w, src_odd + 2, QMM_F32, (size_t)(n * k)), QMM_ERR_ALIGN);
    EXPECT_FAIL(qmm_dequantize(&w, src_odd + 1, QMM_BF16, (size_t)(n * k)), QMM_ERR_ALIGN);
    /* aligned: works */
    CHECK_OK(qmm_quantize(src, QMM_F32, &w, NULL));
    CHECK_OK(qmm_matmul_cpu(a, m, &w, c, 1));
    free(src);
    free(src_odd);
    free(abuf);
    free(cbuf);
    free(pbuf);
    free(sbuf);
    qmm_w4_free(&w);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, predict_checks_the_config_of_every_path, device_plan_refuses_non_finite_rates,
               best_split_bounds_its_search, pipeline_simulate_writes_nothing_on_error,
               cpu_path_refuses_misaligned_buffers);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
