/* The GPU half of `qmm matmul`: upload, plan, run, check against the fp64 product, time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"
#include "matmul_gpu.h"

#ifndef QMM_HAVE_CUDA
int matmul_gpu(const qmm_w4 *w, const qmm_bf16 *a, int64_t m, const double *ref, double tol,
               int required, const qmm_cuda_options *opt, FILE *out)
{
    (void)w, (void)a, (void)m, (void)ref, (void)tol, (void)opt, (void)out;
    if (required) fprintf(stderr, "qmm matmul: this build has no CUDA backend\n");
    return required ? 2 : 3;
}
#else
#include <cuda_runtime.h>

int matmul_gpu(const qmm_w4 *w, const qmm_bf16 *a, int64_t m, const double *ref, double tol,
               int required, const qmm_cuda_options *opt, FILE *out)
{
    int count = 0;
    char why[256] = "";
    qmm_cuda_device_count(&count, why, sizeof why);
    if (count == 0) {
        if (required) fprintf(stderr, "qmm matmul: %s\n", why);
        else fprintf(out, "gpu        skipped: %s\n", why);
        return required ? 2 : 3;
    }
    int64_t n = w->n, k = w->k;
    size_t mn = (size_t)m * (size_t)n;
    qmm_cuda_ctx *ctx = NULL;
    qmm_cuda_weight *dw = NULL;
    qmm_bf16 *a_dev = NULL, *c_dev = NULL, *c = malloc(mn * 2);
    void *ws = NULL;
    size_t ws_bytes = 0;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = 2;
    qmm_plan plan;
    qmm_status st = qmm_cuda_create(0, NULL, &ctx);
    if (st == QMM_OK) st = qmm_cuda_weight_upload(ctx, w, &dw);
    if (st == QMM_OK) st = qmm_cuda_workspace_size(ctx, m, n, k, opt, &ws_bytes);
    if (st != QMM_OK) {
        fprintf(stderr, "qmm matmul: %s: %s\n", qmm_status_name(st), qmm_last_error());
        goto done;
    }
    if (!c || cudaMalloc((void **)&a_dev, (size_t)m * k * 2) || cudaMalloc((void **)&c_dev, mn * 2) ||
        (ws_bytes && cudaMalloc(&ws, ws_bytes)) || cudaEventCreate(&e0) || cudaEventCreate(&e1)) {
        fprintf(stderr, "qmm matmul: device allocation failed\n");
        goto done;
    }
    cudaMemcpy(a_dev, a, (size_t)m * k * 2, cudaMemcpyHostToDevice);
    cudaMemset(c_dev, 0xFF, mn * 2); /* poison: NaN everywhere */
    st = qmm_cuda_matmul(ctx, a_dev, m, dw, c_dev, ws, ws_bytes, opt, &plan);
    if (st != QMM_OK || cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "qmm matmul: gpu run failed: %s\n",
                st != QMM_OK ? qmm_last_error() : cudaGetErrorString(cudaGetLastError()));
        goto done;
    }
    cudaMemcpy(c, c_dev, mn * 2, cudaMemcpyDeviceToHost);
    double err = bench_rel_frob_f64(c, ref, mn);
    /* eager launches, hot weights: a quick figure; `qmm bench ops` is the measurement */
    const int reps = 50;
    cudaEventRecord(e0, 0);
    for (int r = 0; r < reps; r++) qmm_cuda_matmul(ctx, a_dev, m, dw, c_dev, ws, ws_bytes, opt, NULL);
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    double us = 1e3 * ms / reps;
    qmm_gpu_info info;
    qmm_cuda_info(ctx, &info);
    fprintf(out, "gpu        %10.2f us  %8.2f TFLOP/s   rel. Frobenius vs fp64 %.3e   (%s, %s split %d, "
           "tile %dx%d; eager, hot L2)\n",
           us, 2.0 * m * n * k / us * 1e-6, err, info.name, qmm_path_name(plan.path), plan.split,
           plan.tile_m, plan.tile_n);
    rc = err <= tol ? 0 : 1;
    if (rc) fprintf(out, "FAIL: gpu error %.3e exceeds %g\n", err, tol);
done:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a_dev), cudaFree(c_dev), cudaFree(ws);
    qmm_cuda_weight_free(dw);
    qmm_cuda_destroy(ctx);
    free(c);
    return rc;
}
#endif
