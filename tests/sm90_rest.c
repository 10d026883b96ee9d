/*
 * gpu_sm90's cases on a split in clusters with its last tiles aside (NOTES.md row 228; its table
 * is in gpu_sm90.c): one wave of clusters, then the tiles left split through the workspace in a
 * second launch that follows the clusters' dependency wait and waits for them at its end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_sm90.h"

#ifdef QMM_HAVE_CUDA
#include <cuda_runtime.h>

/* Forced (the options' rest = 1) where the clusters exceed one wave on a 132-SM Hopper and on
 * smaller ones: within tolerance of fp64, the same bits 10 times, C poisoned before each run (a
 * tile left unwritten fails); the same split without rest = 1 sets nothing aside. o at M = 256
 * in clusters of 3 (40 tiles for 117 slots: one aside, split 8 ways), ragged tokens and rows
 * over down's K (the tile aside is the last, ragged one), and down at M = 128 in clusters of 7
 * (five tiles aside split 5 ways, fewer than a cluster's limit, through the workspace all the
 * same). */
void case_rest_aside(void)
{
    static const int64_t shapes[][4] = {{256, 2560, 4096, 3}, {200, 2504, 9728, 3}, {128, 2560, 9728, 7}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        prob p;
        SETUP(p, m, n, k);
        const size_t bytes = (size_t)(m * n) * 2;
        qmm_bf16 *first = malloc(bytes), *out = malloc(bytes);
        qmm_cuda_options o = opts(QMM_PATH_WGMMA, (int)shapes[i][3]);
        o.rest = 1;
        qmm_plan plan;
        const qmm_status st = first && out ? prob_run(&p, &o, first, &plan) : QMM_ERR_NOMEM;
        CHECK_OK(st);
        if (st == QMM_OK) {
            CHECKF(plan.rest_tiles > 0 && plan.rest_split >= 2 && plan.workspace_bytes > 0,
                   "M=%lld: %d tiles aside split %d, %zu workspace bytes", (long long)m, plan.rest_tiles,
                   plan.rest_split, plan.workspace_bytes);
            prob_check(&p, first, 1e-2, "tiles aside");
            same_bits_10_times(&p, &o, first, out, bytes, i);
            printf("    (clusters of %d, %d tiles aside split %d ways)\n", plan.split, plan.rest_tiles,
                   plan.rest_split);
            qmm_plan second_wave;
            o.rest = 0;
            CHECK_OK(qmm_cuda_plan(prob_setup.ctx, m, n, k, &o, &second_wave));
            CHECK(second_wave.rest_tiles == 0 && second_wave.split == plan.split);
        }
        free(first), free(out);
        prob_free(&p);
    }
    /* rest = 1 where the clusters fit one wave (q at M = 16 in clusters of 2) is refused */
    qmm_cuda_options o = opts(QMM_PATH_WGMMA, 2);
    o.rest = 1;
    qmm_plan plan;
    CHECK_STATUS(qmm_cuda_plan(prob_setup.ctx, 16, 4096, 2560, &o, &plan), QMM_ERR_ARG);
}

/* A chain of dependent calls with tiles aside (each call's input the previous call's output,
 * launched back to back: the rest launch reads what the kernel before the clusters wrote, on the
 * strength of the clusters' own wait) equals the same chain synchronized between calls. */
void case_rest_dependent_launches(void)
{
    const int64_t m = 256, d = 2560; /* 40 tiles in clusters of 3 */
    prob p;
    SETUP(p, m, d, d);
    const size_t bytes = (size_t)(m * d) * 2;
    qmm_bf16 *c2 = NULL, *c3 = NULL, *x = malloc(bytes), *y = malloc(bytes);
    void *ws = NULL;
    qmm_cuda_options o = opts(QMM_PATH_WGMMA, 3);
    o.rest = 1;
    size_t wsb = 0;
    qmm_plan plan = {0};
    qmm_status st = qmm_cuda_plan(prob_setup.ctx, m, d, d, &o, &plan);
    if (st == QMM_OK) st = qmm_cuda_workspace_size(prob_setup.ctx, m, d, d, &o, &wsb);
    CHECK_OK(st);
    CHECK(plan.rest_tiles > 0);
    const int ready = st == QMM_OK && x && y && cudaMalloc((void **)&c2, bytes) == cudaSuccess &&
                      cudaMalloc((void **)&c3, bytes) == cudaSuccess && cudaMalloc(&ws, wsb) == cudaSuccess;
    CHECK(ready);
    for (int sync = 0; ready && sync < 2; sync++) {
        cudaMemset(c2, 0xFF, bytes), cudaMemset(c3, 0xFF, bytes);
        cudaDeviceSynchronize();
        for (int rep = 0; rep < 20; rep++) { /* A -> c2 -> c3 -> c2 -> ... */
            const qmm_bf16 *in = rep == 0 ? p.a_dev : (rep % 2 ? c2 : c3);
            CHECK_OK(qmm_cuda_matmul(prob_setup.ctx, in, m, p.dw, rep % 2 ? c3 : c2, ws, wsb, &o, NULL));
            if (sync) cudaDeviceSynchronize();
        }
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        cudaMemcpy(sync ? y : x, c3, bytes, cudaMemcpyDeviceToHost);
    }
    if (ready) {
        CHECKF(memcmp(x, y, bytes) == 0, "chained launches with %d tiles aside differ from synchronized ones",
               plan.rest_tiles);
        printf("    M=%lld N=K=%lld clusters of 3, %d tiles aside: 20 chained calls as synchronized ones\n",
               (long long)m, (long long)d, plan.rest_tiles);
    }
    cudaFree(ws), cudaFree(c2), cudaFree(c3);
    free(x), free(y);
    prob_free(&p);
}

#endif
