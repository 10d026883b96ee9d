/*
 * gpu_kernels's cases of their own on groups of 64 and 32 (its table is in gpu_kernels.c): M =
 * 1…300 through every path the plan takes, the same bits as groups of 128 when each block's
 * groups share a scale|bias, the row dequantizer bit for bit, a plan that follows the weight's
 * group. Outputs poisoned; tolerances those of gpu_kernels.c.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_kernels.h"

#ifdef QMM_HAVE_CUDA
#include <cuda_runtime.h>

/* M = 1…300 through every path the plan takes (the plan of groups of 128: the matvec at decode
 * sizes), the tiled kernel and split-K on the same data */
void g64_all_m(void)
{
    static const int64_t ms[] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 31, 32, 33, 64, 65, 100, 128, 129, 255, 300};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        prob p;
        SETUP_G(p, ms[i], 1000, 1280, 64);
        qmm_plan plan;
        qmm_cuda_options o = qmm_cuda_options_default();
        CHECK_OK(prob_run(&p, &o, p.out, &plan));
        double e = prob_check(&p, p.out, 1e-2, "g64 auto");
        printf("    g64 M=%-4lld N=1000 K=1280 %-7s split %d err %.2e\n", (long long)p.m,
               qmm_path_name(plan.path), plan.split, e);
        o = opts(QMM_PATH_TILED, 0, 0, QMM_BF16);
        CHECK_OK(prob_run(&p, &o, p.out, NULL));
        prob_check(&p, p.out, 1e-2, "g64 tiled");
        o = opts(QMM_PATH_SPLITK, 5, 0, QMM_F32);
        CHECK_OK(prob_run(&p, &o, p.out, NULL));
        prob_check(&p, p.out, 5e-3, "g64 splitk f32");
        prob_free(&p);
    }
}

/* Groups of g inside each 128-column block sharing one scale and bias make the same matrix as a
 * groups-of-128 weight: the tiled, split-K and dense paths must give the g128 kernels' bits. */
static void same_bits_as_g128(int group)
{
    static const int64_t shapes[][3] = {{17, 1032, 2560}, {77, 520, 1280}, {300, 200, 384}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        prob p, q;
        SETUP_PAIR(p, q, m, n, k, group);
        size_t sz = (size_t)(m * n);
        const int blocks = (int)(k / 128);
        const qmm_cuda_options list[] = {
            opts(QMM_PATH_TILED, 0, 1, QMM_BF16), opts(QMM_PATH_TILED, 0, 0, QMM_BF16),
            opts(QMM_PATH_SPLITK, qmm_split_align(k, 4), 0, QMM_BF16),
            opts(QMM_PATH_SPLITK, qmm_split_align(k, 4), 0, QMM_F32), opts(QMM_PATH_DENSE, 0, 0, QMM_BF16)};
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
            if (list[i].path == QMM_PATH_SPLITK && (list[i].split < 2 || list[i].split > blocks)) continue;
            CHECK_OK(prob_run(&p, &list[i], p.out, NULL));
            CHECK_OK(prob_run(&q, &list[i], q.out, NULL));
            CHECKF(same_bits(p.out, q.out, sz), "g%d M=%lld N=%lld K=%lld option set %zu (%s): differs "
                   "from groups of 128", group, (long long)m, (long long)n, (long long)k, i,
                   qmm_path_name(list[i].path));
            prob_check(&p, p.out, list[i].partial_type == QMM_F32 ? 5e-3 : 1e-2, "shared groups");
        }
        prob_free(&p), prob_free(&q);
    }
}

/* qmm_cuda_dequantize_rows equals qmm_dequantize_row_f32 bit for bit (bad ids flagged) */
static void dequantize_rows_g(int group)
{
    qmm_cuda_ctx *ctx = prob_setup.ctx;
    qmm_w4 w;
    const int64_t n = 333, k = 1280;
    CHECK_OK(qmm_w4_alloc_group(n, k, group, &w));
    test_random_w4(&w, 0.002, 0.02);
    qmm_cuda_weight *dw = NULL;
    CHECK_OK(qmm_cuda_weight_upload(ctx, &w, &dw));
    const int32_t ids[6] = {0, 332, 17, 200, 5, 400}; /* 400: out of range -> row 0, err = 1 */
    int32_t *ids_dev = NULL, *err_dev = NULL;
    float *out_dev = NULL, *out = malloc(6 * (size_t)k * 4), *want = malloc((size_t)k * 4);
    CUDA_OK(cudaMalloc((void **)&ids_dev, sizeof ids));
    CUDA_OK(cudaMalloc((void **)&err_dev, 4));
    CUDA_OK(cudaMalloc((void **)&out_dev, 6 * (size_t)k * 4));
    cudaMemcpy(ids_dev, ids, sizeof ids, cudaMemcpyHostToDevice);
    cudaMemset(err_dev, 0, 4);
    cudaMemset(out_dev, 0xFF, 6 * (size_t)k * 4); /* NaN */
    CHECK_OK(qmm_cuda_dequantize_rows(ctx, dw, ids_dev, 6, out_dev, err_dev));
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    cudaMemcpy(out, out_dev, 6 * (size_t)k * 4, cudaMemcpyDeviceToHost);
    int32_t err = 0;
    cudaMemcpy(&err, err_dev, 4, cudaMemcpyDeviceToHost);
    CHECK(err == 1);
    for (int r = 0; r < 6; r++) {
        CHECK_OK(qmm_dequantize_row_f32(&w, ids[r] < n ? ids[r] : 0, want));
        CHECKF(memcmp(out + r * k, want, (size_t)k * 4) == 0, "g%d row %d (id %d) differs", group, r, ids[r]);
    }
    cudaFree(ids_dev), cudaFree(err_dev), cudaFree(out_dev);
    free(out), free(want);
    qmm_cuda_weight_free(dw);
    qmm_w4_free(&w);
}

/* The plan follows the weight: a g64 weight at decode sizes runs the matvec, as groups of 128
 * do, with the workspace that qmm_cuda_workspace_size reports for group 0 (any); options that
 * disagree with the weight's group are refused */
void g64_plan_follows_weight(void)
{
    qmm_cuda_ctx *ctx = prob_setup.ctx;
    prob p;
    SETUP_G(p, 1, 2560, 9728, 64);
    qmm_plan plan;
    qmm_cuda_options o = qmm_cuda_options_default();
    CHECK_OK(qmm_cuda_plan(ctx, 1, 2560, 9728, &o, &plan));
    CHECK(plan.path == QMM_PATH_MATVEC); /* group 0 plans for 128 */
    o.group = 64;
    CHECK_OK(qmm_cuda_plan(ctx, 1, 2560, 9728, &o, &plan));
    CHECK(plan.path == QMM_PATH_MATVEC);
    size_t any = 0;
    o.group = 0;
    CHECK_OK(qmm_cuda_workspace_size(ctx, 1, 2560, 9728, &o, &any));
    CHECK(any >= plan.workspace_bytes);
    void *ws = NULL;
    if (any) CUDA_OK(cudaMalloc(&ws, any));
    cudaMemset(p.c_dev, 0xFF, (size_t)p.n * 2);
    qmm_plan ran;
    CHECK_OK(qmm_cuda_matmul(ctx, p.a_dev, 1, p.dw, p.c_dev, ws, any, NULL, &ran));
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(ran.path == plan.path && ran.blocks == plan.blocks);
    cudaMemcpy(p.out, p.c_dev, (size_t)p.n * 2, cudaMemcpyDeviceToHost);
    prob_check(&p, p.out, 1e-2, "g64 decode");
    printf("    g64 M=1 N=2560 K=9728: %s, %lld CTAs, %zu workspace bytes\n", qmm_path_name(ran.path),
           (long long)ran.blocks, any);
    o.group = 128;
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 1, p.dw, p.c_dev, ws, any, &o, NULL), QMM_ERR_ARG);
    /* K not a whole number of 128-column blocks stays on the CPU */
    qmm_w4 odd;
    CHECK_OK(qmm_w4_alloc_group(8, 192, 64, &odd));
    qmm_cuda_weight *dw = NULL;
    CHECK_STATUS(qmm_cuda_weight_upload(ctx, &odd, &dw), QMM_ERR_SHAPE);
    CHECK(dw == NULL);
    qmm_w4_free(&odd);
    cudaFree(ws);
    prob_free(&p);
}

void g64_same_bits_as_g128(void) { same_bits_as_g128(64); }
void g32_same_bits_as_g128(void) { same_bits_as_g128(32); }
void g64_dequantize_rows(void) { dequantize_rows_g(64); }
void g32_dequantize_rows(void) { dequantize_rows_g(32); }

#endif
