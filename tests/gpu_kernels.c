/*
 * GPU kernels against the CPU/fp64 references on fresh random data (signed scales), outputs
 * poisoned (NaN) before every run. Tolerances, relative Frobenius vs fp64 of the dequantized
 * weights: bf16 output with bf16 partial planes <= 1e-2; fp32 partials <= 5e-3; every element
 * finite. Exactness claims (fallback, stages, determinism) are checked bit for bit.
 * Groups of 64 and 32 (cases g64/..., g32/...): the same checks on such weights (the matvec
 * too), and bitwise equality with groups of 128 when each block's groups share a scale|bias
 * (the cases of their own in kernels_groups.c; this file holds the one table of cases).
 * Skips (exit 77) with the reason when there is no GPU or no CUDA in this build.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_kernels.h"
#include "plan.h"
#include "plan_sm90.h"

#ifndef QMM_HAVE_CUDA
int main(void) { test_skip_no_gpu("this build has no CUDA backend (nvcc was not found)"); }
#else
#include <cuda_runtime.h>

static qmm_cuda_ctx *ctx;

/* ---- cases ---- */

/* the Qwen3-4B projections, from the engine's shapes (filled by main) */
static prob_proj projections[QMM_LLM_LINEAR_COUNT];

static void qwen3_projections(void)
{
    static const int64_t ms[] = {1, 2, 8, 9, 16, 32, 64, 128, 2048};
    for (size_t pi = 0; pi < sizeof projections / sizeof projections[0]; pi++)
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            prob p;
            SETUP(p, ms[mi], projections[pi].n, projections[pi].k);
            qmm_plan plan;
            qmm_cuda_options o = qmm_cuda_options_default();
            CHECK_OK(prob_run(&p, &o, p.out, &plan));
            double err = prob_check(&p, p.out, 1e-2, "auto");
            printf("    %-5s K=%-5lld N=%-5lld M=%-5lld %-7s split %-2d tile %dx%d  err %.2e\n",
                   projections[pi].name, (long long)p.k, (long long)p.n, (long long)p.m,
                   qmm_path_name(plan.path), plan.split, plan.tile_m, plan.tile_n, err);
            /* the unsplit kernel on the same data */
            if (plan.path != QMM_PATH_TILED) {
                o = opts(QMM_PATH_TILED, 0, 0, QMM_BF16);
                CHECK_OK(prob_run(&p, &o, p.out, NULL));
                prob_check(&p, p.out, 1e-2, "tiled");
            }
            prob_free(&p);
        }
}

static void splitk_kv_m32(void)
{
    prob p;
    SETUP(p, 32, 1024, 2560);
    qmm_plan plan;
    qmm_cuda_options o = qmm_cuda_options_default();
    CHECK_OK(qmm_cuda_plan(ctx, 32, 1024, 2560, &o, &plan));
    CHECKF(plan.split > 1 || plan.path == QMM_PATH_STREAMK,
           "device plan for k/v at M=32 does not split K (%s, split %d)", qmm_path_name(plan.path), plan.split);
    /* the unsplit control: the same plan with the split held at 1 is the unsplit kernel, bitwise */
    {
        qmm_cuda_options ctl = qmm_cuda_options_default(), til = opts(QMM_PATH_WGMMA, 1, 0, QMM_BF16);
        ctl.split = 1;
        qmm_bf16 *x = malloc((size_t)(p.m * p.n) * 2);
        qmm_plan cp;
        CHECK_OK(prob_run(&p, &ctl, p.out, &cp));
        CHECK(cp.path == QMM_PATH_WGMMA && cp.split == 1);
        CHECK_OK(prob_run(&p, &til, x, NULL));
        CHECK(memcmp(p.out, x, (size_t)(p.m * p.n) * 2) == 0);
        free(x);
    }
    o.policy = QMM_POLICY_SEED;
    CHECK_OK(qmm_cuda_plan(ctx, 32, 1024, 2560, &o, &plan));
    CHECKF(plan.split == 10, "seed plan for k/v at M=32: split %d, want 10", plan.split);
    CHECK_OK(prob_run(&p, &o, p.out, &plan));
    printf("    seed split %d bf16 partials err %.2e\n", plan.split, prob_check(&p, p.out, 1e-2, "seed bf16"));
    o.partial_type = QMM_F32;
    CHECK_OK(prob_run(&p, &o, p.out, &plan));
    printf("    seed split %d f32 partials err %.2e\n", plan.split, prob_check(&p, p.out, 5e-3, "seed f32"));
    static const int splits[] = {2, 4, 5, 10, 20};
    for (int i = 0; i < 5; i++) {
        o = opts(QMM_PATH_SPLITK, splits[i], 0, QMM_F32);
        CHECK_OK(prob_run(&p, &o, p.out, NULL));
        prob_check(&p, p.out, 5e-3, "forced split f32");
        o.partial_type = QMM_BF16;
        CHECK_OK(prob_run(&p, &o, p.out, NULL));
        prob_check(&p, p.out, 1e-2, "forced split bf16");
    }
    prob_free(&p);
}

static void ragged_shapes_g(int group)
{
    static const int64_t shapes[][3] = {
        {17, 1032, 2560}, {1, 1, 128}, {3, 31, 128}, {33, 200, 256}, {65, 130, 384},
        {129, 1000, 1280}, {5, 1032, 2560}, {13, 77, 640},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        prob p;
        SETUP_G(p, shapes[s][0], shapes[s][1], shapes[s][2], group);
        qmm_cuda_options o = qmm_cuda_options_default();
        CHECK_OK(prob_run(&p, &o, p.out, NULL));
        prob_check(&p, p.out, 1e-2, "auto");
        o = opts(QMM_PATH_TILED, 0, 0, QMM_BF16);
        CHECK_OK(prob_run(&p, &o, p.out, NULL));
        prob_check(&p, p.out, 1e-2, "tiled");
        int groups = (int)(p.k / 128);
        for (int sp = 2; sp <= groups && sp <= 16; sp++) {
            if (groups % sp) continue;
            o = opts(QMM_PATH_SPLITK, sp, 0, QMM_F32);
            CHECK_OK(prob_run(&p, &o, p.out, NULL));
            prob_check(&p, p.out, 5e-3, "splitk f32");
        }
        o = opts(QMM_PATH_DENSE, 0, 0, QMM_BF16);
        CHECK_OK(prob_run(&p, &o, p.out, NULL));
        prob_check(&p, p.out, 1e-2, "dense");
        if (p.m <= 16) {
            o = opts(QMM_PATH_MATVEC, 0, 0, QMM_BF16);
            CHECK_OK(prob_run(&p, &o, p.out, NULL));
            prob_check(&p, p.out, 1e-2, "matvec");
        }
        printf("    g%d M=%lld N=%lld K=%lld ok\n", group, (long long)p.m, (long long)p.n, (long long)p.k);
        prob_free(&p);
    }
}
static void ragged_shapes(void) { ragged_shapes_g(QMM_GROUP); }

static void matvec_all_m(void)
{
    for (int64_t m = 1; m <= 16; m++) {
        prob p;
        SETUP(p, m, 1024 + 16 * m, 2560);
        qmm_cuda_options o = opts(QMM_PATH_MATVEC, 0, 0, QMM_BF16);
        CHECK_OK(prob_run(&p, &o, p.out, NULL));
        /* the matvec never rounds the weights: fp32 accumulation, bf16 output only */
        double err = prob_check(&p, p.out, 5e-3, "matvec");
        if (m == 1 || m == 16) printf("    matvec M=%lld err %.2e\n", (long long)m, err);
        /* row blocks shared by several CTAs are summed in CTA order: the same bits again */
        qmm_bf16 *again = malloc((size_t)(p.m * p.n) * 2);
        CHECK_OK(prob_run(&p, &o, again, NULL));
        CHECKF(!memcmp(p.out, again, (size_t)(p.m * p.n) * 2), "matvec M=%lld: two runs differ",
               (long long)m);
        free(again);
        prob_free(&p);
    }
}

static void fallback_is_bitwise_g(int group)
{
    /* Whenever a plan's split is 1 the call must run the unsplit kernel: bitwise equal to forcing
     * it. Note M=128, N=256, K=2560 is NOT a full grid under the seed rule (base 4*8 = 32 ->
     * split 10), so the full-grid cases are q at M=128 (seed base 512) and larger M; the device
     * policy sends M >= 128 to the dense path when the model says so, and keeps the unsplit
     * kernel where K has too few groups to split (K = 128, 256). */
    static const int64_t shapes[][3] = {{128, 256, 2560}, {128, 4096, 2560}, {300, 9728, 2560},
                                        {384, 4096, 2560}, {2048, 1024, 2560}, {100, 1000, 256},
                                        {60, 5000, 128}};
    int compared[2] = {0, 0};
    for (int si = 0; si < 7; si++) {
        prob p;
        SETUP_G(p, shapes[si][0], shapes[si][1], shapes[si][2], group);
        size_t sz = (size_t)(p.m * p.n);
        qmm_bf16 *x = malloc(sz * 2), *y = malloc(sz * 2);
        for (int pol = 0; pol < 2; pol++) {
            qmm_cuda_options o = qmm_cuda_options_default();
            o.policy = pol ? QMM_POLICY_SEED : QMM_POLICY_DEVICE;
            qmm_plan plan;
            CHECK_OK(prob_run(&p, &o, x, &plan));
            printf("    M=%lld N=%lld K=%lld policy %-6s: %s split %d\n", (long long)p.m,
                   (long long)p.n, (long long)p.k, pol ? "seed" : "device",
                   qmm_path_name(plan.path), plan.split);
            /* split, stream-K or the dense path: not an unsplit plan */
            if (plan.path != QMM_PATH_TILED && !(plan.path == QMM_PATH_WGMMA && plan.split == 1)) continue;
            o.path = plan.path;
            o.split = plan.path == QMM_PATH_WGMMA ? 1 : 0;
            CHECK_OK(prob_run(&p, &o, y, NULL));
            CHECKF(same_bits(x, y, sz), "unsplit plan differs from the forced tiled kernel");
            compared[pol]++;
        }
        prob_check(&p, x, 1e-2, "fallback");
        free(x), free(y);
        prob_free(&p);
    }
    CHECKF(compared[0] >= 2 && compared[1] >= 2, "too few full-grid cases (%d device, %d seed)",
           compared[0], compared[1]);
}
static void fallback_is_bitwise(void) { fallback_is_bitwise_g(QMM_GROUP); }

/* The option sets of list, each run `runs` times, all give the bits of the first run (left in
 * first[m*n]). */
static void all_same_bits(prob *p, const qmm_cuda_options *list, int count, int runs,
                          qmm_bf16 *first, const char *what)
{
    size_t sz = (size_t)(p->m * p->n);
    CHECK_OK(prob_run(p, &list[0], first, NULL));
    for (int i = 0; i < count; i++)
        for (int r = i == 0; r < runs; r++) {
            CHECK_OK(prob_run(p, &list[i], p->out, NULL));
            CHECKF(same_bits(first, p->out, sz), "M=%lld %s: option set %d run %d differs", (long long)p->m,
                   what, i, r);
        }
}

static void stages_same_bits_g(int group)
{
    static const int64_t ms[] = {17, 48, 100};
    for (int mi = 0; mi < 3; mi++) {
        prob p;
        SETUP_G(p, ms[mi], 520, 1280, group);
        qmm_bf16 *first = malloc((size_t)(p.m * p.n) * 2);
        for (int split = 1; split <= 5; split += 4) {
            qmm_cuda_options stages[4]; /* 1 .. 4 stages: the same bits */
            for (int s = 0; s < 4; s++)
                stages[s] = opts(split > 1 ? QMM_PATH_SPLITK : QMM_PATH_TILED, split, s + 1, QMM_BF16);
            all_same_bits(&p, stages, 4, 1, first, split > 1 ? "split 5, stages" : "tiled, stages");
            prob_check(&p, first, 1e-2, "stages");
        }
        free(first);
        prob_free(&p);
    }
}

static void stages_same_bits(void) { stages_same_bits_g(QMM_GROUP); }

/* Split-K with bf16 and fp32 partials: 10 more runs give the first run's bits. */
static void splitk_deterministic_g(int group)
{
    prob p;
    SETUP_G(p, 32, 1024, 2560, group);
    qmm_bf16 *first = malloc((size_t)(p.m * p.n) * 2);
    for (int t = 0; t < 2; t++) {
        qmm_cuda_options o = opts(QMM_PATH_SPLITK, 10, 0, t ? QMM_F32 : QMM_BF16);
        all_same_bits(&p, &o, 1, 11, first, t ? "split 10 f32" : "split 10 bf16");
    }
    free(first);
    prob_free(&p);
}

static void splitk_deterministic(void) { splitk_deterministic_g(QMM_GROUP); }

static void bad_input(void)
{
    prob p;
    SETUP(p, 32, 1024, 2560);
    size_t sz = (size_t)(p.m * p.n);
    cudaMemset(p.c_dev, 0xAB, sz * 2);
    qmm_cuda_options o = qmm_cuda_options_default();
    CHECK_STATUS(qmm_cuda_matmul(NULL, p.a_dev, 32, p.dw, p.c_dev, p.ws, p.ws_bytes, &o, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_cuda_matmul(ctx, NULL, 32, p.dw, p.c_dev, p.ws, p.ws_bytes, &o, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, NULL, p.c_dev, p.ws, p.ws_bytes, &o, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev + 1, 32, p.dw, p.c_dev, p.ws, p.ws_bytes, &o, NULL), QMM_ERR_ALIGN);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, p.dw, p.c_dev + 3, p.ws, p.ws_bytes, &o, NULL), QMM_ERR_ALIGN);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 0, p.dw, p.c_dev, p.ws, p.ws_bytes, &o, NULL), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, -3, p.dw, p.c_dev, p.ws, p.ws_bytes, &o, NULL), QMM_ERR_SHAPE);
    qmm_cuda_options s = opts(QMM_PATH_SPLITK, 10, 0, QMM_BF16);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, p.dw, p.c_dev, p.ws, 1000, &s, NULL), QMM_ERR_WORKSPACE);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, p.dw, p.c_dev, NULL, 0, &s, NULL), QMM_ERR_WORKSPACE);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, p.dw, p.c_dev, (char *)p.ws + 4, p.ws_bytes - 4, &s, NULL), QMM_ERR_ALIGN);
    s.split = 3; /* 20 groups do not split in 3 */
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, p.dw, p.c_dev, p.ws, p.ws_bytes, &s, NULL), QMM_ERR_ARG);
    s = opts(QMM_PATH_TILED, 4, 0, QMM_BF16); /* a split needs path SPLITK */
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, p.dw, p.c_dev, p.ws, p.ws_bytes, &s, NULL), QMM_ERR_ARG);
    s = opts(QMM_PATH_TILED, 0, 5, QMM_BF16);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, p.dw, p.c_dev, p.ws, p.ws_bytes, &s, NULL), QMM_ERR_ARG);
    s = opts(QMM_PATH_MATVEC, 0, 0, QMM_BF16);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, p.dw, p.c_dev, p.ws, p.ws_bytes, &s, NULL), QMM_ERR_ARG);
    s = opts(QMM_PATH_STREAMK, 2, 0, QMM_BF16); /* stream-K takes no split */
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, p.dw, p.c_dev, p.ws, p.ws_bytes, &s, NULL), QMM_ERR_ARG);
    s = opts(QMM_PATH_SPLITK, 2, 0, (qmm_dtype)7);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 32, p.dw, p.c_dev, p.ws, p.ws_bytes, &s, NULL), QMM_ERR_DTYPE);
    CHECK(strlen(qmm_last_error()) > 0);
    /* nothing was launched: C still holds the fill */
    cudaDeviceSynchronize();
    cudaMemcpy(p.out, p.c_dev, sz * 2, cudaMemcpyDeviceToHost);
    int untouched = 1;
    for (size_t i = 0; i < sz; i++) untouched &= p.out[i] == 0xABAB;
    CHECKF(untouched, "a rejected call wrote to C");
    /* bad weights never reach the device */
    qmm_w4 bad = p.w;
    bad.k = 100;
    qmm_cuda_weight *dw = NULL;
    CHECK_STATUS(qmm_cuda_weight_upload(ctx, &bad, &dw), QMM_ERR_SHAPE);
    CHECK(dw == NULL);
    bad = p.w;
    bad.scales_count--;
    CHECK_STATUS(qmm_cuda_weight_upload(ctx, &bad, &dw), QMM_ERR_SIZE_MISMATCH);
    size_t bytes = 0;
    CHECK_STATUS(qmm_cuda_workspace_size(ctx, 32, 1024, 100, NULL, &bytes), QMM_ERR_SHAPE);
    prob_free(&p);
}

static void plan_is_one_wave(void)
{
    /* the device plan never asks for more blocks than one wave of resident blocks, and uses
     * group-aligned partitions: the tiled split-K's divide K; the wgmma kernel's differ by at
     * most one group, and its split-K in clusters fits one wave of the clusters this GPU holds
     * (its occupancy answer, in the context's description), stream-K one CTA a resident slot */
    qmm_gpu_info info;
    qmm_device_desc d;
    CHECK_OK(qmm_cuda_info(ctx, &info));
    CHECK_OK(qmm_cuda_device_desc(ctx, &d));
    for (size_t pi = 0; pi < sizeof projections / sizeof projections[0]; pi++)
        for (int64_t m = 9; m <= 4096; m *= 2) {
            qmm_plan plan;
            const int64_t k = projections[pi].k;
            CHECK_OK(qmm_cuda_plan(ctx, m, projections[pi].n, k, NULL, &plan));
            const int wgmma = plan.path == QMM_PATH_WGMMA || plan.path == QMM_PATH_STREAMK;
            CHECK(wgmma ? plan.split >= 1 && plan.split <= k / 128 : k % ((int64_t)plan.split * 128) == 0);
            int64_t slots = (int64_t)info.sm_count * info.tiled_blocks_per_sm[plan.config];
            if (wgmma) {
                slots = (int64_t)info.sm_count * qmm_sm90_blocks_per_sm(plan.config);
                if (plan.path == QMM_PATH_WGMMA && plan.split >= 2 && plan.split <= QMM_MAX_WGMMA_CLUSTER)
                    slots = d.wgmma_cluster_ctas[plan.config][plan.split];
            }
            /* tiles aside (an H100's plans): the clusters one wave, their CTAs beside them on
             * the SMs left */
            const int64_t aside = (int64_t)plan.rest_tiles * plan.rest_split, waved = plan.blocks - aside;
            if (aside)
                CHECKF(waved + aside <= (int64_t)info.sm_count * qmm_sm90_blocks_per_sm(plan.config),
                       "%s M=%lld: %lld CTAs aside do not fit beside the clusters",
                       projections[pi].name, (long long)m, (long long)aside);
            if (plan.split > 1 || plan.path == QMM_PATH_STREAMK)
                CHECKF(waved <= slots, "%s M=%lld: %lld blocks > one wave (%lld)", projections[pi].name,
                       (long long)m, (long long)waved, (long long)slots);
        }
}

static void plan_is_the_shipped_table(void)
{
    /* the context plans with the shipped tuning table (occupancy included) and the corrections
     * for this GPU's name, so the CPU test test_plan_call pins what this GPU runs (`qmm plan
     * --table h100` an H100's); on an H200 the occupancy API must agree */
    qmm_gpu_info info;
    qmm_device_desc mine, shipped;
    CHECK_OK(qmm_cuda_info(ctx, &info));
    CHECK_OK(qmm_cuda_device_desc(ctx, &mine));
    CHECK_OK(qmm_tune_desc(info.cc_major, info.cc_minor, info.sm_count, &shipped));
    qmm_tune_for_gpu(&shipped, info.name); /* what the context corrects by the GPU's name */
    CHECK(mine.wgmma_alt_min_tile == shipped.wgmma_alt_min_tile);
    CHECK(mine.wgmma_rest_min_tile == shipped.wgmma_rest_min_tile);
    for (int c = 0; c < shipped.config_count; c++)
        CHECKF(mine.config[c].blocks_per_sm == shipped.config[c].blocks_per_sm,
               "config %d: occupancy %d blocks/SM, the table says %d", c,
               mine.config[c].blocks_per_sm, shipped.config[c].blocks_per_sm);
    CHECK(!strcmp(mine.family, shipped.family) && mine.gpu.sms == shipped.gpu.sms);
    CHECK(mine.gpu.bandwidth_tbs == shipped.gpu.bandwidth_tbs && mine.tiled_tflops == shipped.tiled_tflops);
    for (size_t pi = 0; pi < sizeof projections / sizeof projections[0]; pi++)
        for (int64_t m = 1; m <= 4096; m *= 2) {
            qmm_plan a, b;
            CHECK_OK(qmm_cuda_plan(ctx, m, projections[pi].n, projections[pi].k, NULL, &a));
            CHECK_OK(qmm_plan_call(&shipped, m, projections[pi].n, projections[pi].k, NULL, &b));
            CHECK(test_plan_equal(&a, &b));
        }
}

static void dense_shapes(int first, int last)
{
    static const int64_t shapes[][3] = {{129, 1000, 1280}, {1, 31, 128}, {2048, 4096, 2560}};
    for (int si = first; si <= last; si++) {
        prob p;
        SETUP(p, shapes[si][0], shapes[si][1], shapes[si][2]);
        qmm_cuda_options o = opts(QMM_PATH_DENSE, 0, 0, QMM_BF16);
        size_t need = 0;
        CHECK_OK(qmm_cuda_workspace_size(ctx, p.m, p.n, p.k, &o, &need));
        CHECK(need >= (size_t)(p.n * p.k * 2) && need <= p.ws_bytes);
        CHECK_OK(prob_run(&p, &o, p.out, NULL));
        printf("    dense M=%lld N=%lld K=%lld err %.2e\n", (long long)p.m, (long long)p.n,
               (long long)p.k, prob_check(&p, p.out, 1e-2, "dense"));
        CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, p.m, p.dw, p.c_dev, p.ws, need - 1, &o, NULL),
                     QMM_ERR_WORKSPACE);
        prob_free(&p);
    }
}

static void dense_path(void) { dense_shapes(0, 1); }
static void dense_path_2048(void) { dense_shapes(2, 2); }

static void wrapped_weight_g(int group)
{
    /* a weight over caller-owned device buffers (streaming slots) gives the uploaded one's bits */
    prob p;
    SETUP_G(p, 17, 1032, 2560, group);
    size_t pb = 0, sbb = 0, sz = (size_t)(p.m * p.n);
    CHECK_OK(qmm_w4_device_image_bytes_group(p.n, p.k, group, &pb, &sbb));
    void *hp = NULL, *hs = NULL, *dp = NULL, *ds = NULL;
    CUDA_OK(cudaMallocHost(&hp, pb));
    CUDA_OK(cudaMallocHost(&hs, sbb));
    CUDA_OK(cudaMalloc(&dp, pb));
    CUDA_OK(cudaMalloc(&ds, sbb));
    CHECK_OK(qmm_w4_device_image(&p.w, hp, pb, hs, sbb));
    cudaMemcpy(dp, hp, pb, cudaMemcpyHostToDevice);
    cudaMemcpy(ds, hs, sbb, cudaMemcpyHostToDevice);
    qmm_cuda_weight *wrapped = NULL;
    CHECK_STATUS(qmm_cuda_weight_wrap_group(ctx, p.n, p.k, group, (char *)dp + 4, ds, &wrapped),
                 QMM_ERR_ALIGN);
    CHECK(wrapped == NULL);
    CHECK_OK(qmm_cuda_weight_wrap_group(ctx, p.n, p.k, group, dp, ds, &wrapped));
    CHECK(qmm_cuda_weight_group(wrapped) == group);
    qmm_bf16 *x = malloc(sz * 2), *y = malloc(sz * 2);
    for (int path = QMM_PATH_MATVEC; path <= QMM_PATH_SPLITK; path++) {
        if (path == QMM_PATH_MATVEC && p.m > 16) continue;
        qmm_cuda_options o = opts((qmm_path)path, path == QMM_PATH_SPLITK ? 4 : 0, 0, QMM_BF16);
        CHECK_OK(prob_run(&p, &o, x, NULL));
        qmm_cuda_weight *own = p.dw;
        p.dw = wrapped;
        CHECK_OK(prob_run(&p, &o, y, NULL));
        p.dw = own;
        CHECKF(same_bits(x, y, sz), "path %d: wrapped weight differs", path);
    }
    qmm_cuda_weight_free(wrapped); /* frees the handle only */
    CHECK(cudaFree(dp) == cudaSuccess && cudaFree(ds) == cudaSuccess);
    cudaFreeHost(hp), cudaFreeHost(hs);
    free(x), free(y);
    prob_free(&p);
}
static void wrapped_weight(void) { wrapped_weight_g(QMM_GROUP); }

/* Every path gets exactly the workspace it reports, framed by guard bytes, and C is framed too:
 * an under-reported size or an overrun of a ragged tile changes a guard. */
static int guards_intact(const unsigned char *dev, size_t guard, size_t body)
{
    unsigned char *h = malloc(guard);
    int ok = 1;
    for (int side = 0; side < 2 && ok; side++) {
        cudaMemcpy(h, dev + (side ? guard + body : 0), guard, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < guard; i++) ok &= h[i] == 0xA5;
    }
    free(h);
    return ok;
}

/* options.group = the weight's: the exact size (group 0 reports enough for any group, which
 * may be more than this weight's plan needs) */
static void exact_workspace_guards_g(int group)
{
    static const int64_t shapes[][3] = {{17, 1032, 2560}, {33, 200, 256}, {129, 1000, 1280}, {5, 77, 640},
                                        {1, 1032, 2560}};
    const size_t guard = 4096; /* a multiple of 256: keeps the pointers' alignment */
    for (int si = 0; si < 5; si++) {
        prob p;
        SETUP_G(p, shapes[si][0], shapes[si][1], shapes[si][2], group);
        size_t c_bytes = (size_t)(p.m * p.n) * 2;
        int groups = (int)(p.k / 128), top = 1;
        for (int sp = 2; sp <= 16 && sp <= groups; sp++)
            if (groups % sp == 0) top = sp;
        qmm_cuda_options list[5] = {qmm_cuda_options_default(), opts(QMM_PATH_TILED, 0, 0, QMM_BF16),
                                    opts(QMM_PATH_SPLITK, top, 0, QMM_BF16),
                                    opts(QMM_PATH_SPLITK, top, 0, QMM_F32),
                                    opts(QMM_PATH_DENSE, 0, 0, QMM_BF16)};
        for (int oi = 0; oi < 5; oi++) {
            size_t need = 0, any = 0;
            CHECK_OK(qmm_cuda_workspace_size(ctx, p.m, p.n, p.k, &list[oi], &any));
            list[oi].group = group;
            CHECK_OK(qmm_cuda_workspace_size(ctx, p.m, p.n, p.k, &list[oi], &need));
            CHECKF(any >= need, "g%d option set %d: group 0 reports %zu bytes < the weight's %zu", group,
                   oi, any, need);
            unsigned char *ws = NULL, *cb = NULL;
            CUDA_OK(cudaMalloc((void **)&ws, need + 2 * guard));
            CUDA_OK(cudaMalloc((void **)&cb, c_bytes + 2 * guard));
            cudaMemset(ws, 0xA5, need + 2 * guard);
            cudaMemset(cb, 0xA5, c_bytes + 2 * guard);
            cudaMemset(cb + guard, 0xFF, c_bytes); /* C itself: NaN */
            qmm_plan plan;
            CHECK_OK(qmm_cuda_matmul(ctx, p.a_dev, p.m, p.dw, (qmm_bf16 *)(cb + guard), ws + guard,
                                     need, &list[oi], &plan));
            CHECK(cudaDeviceSynchronize() == cudaSuccess);
            CHECKF(guards_intact(ws, guard, need), "option set %d (%s split %d): workspace guard hit",
                   oi, qmm_path_name(plan.path), plan.split);
            CHECKF(guards_intact(cb, guard, c_bytes), "option set %d (%s): C guard hit", oi,
                   qmm_path_name(plan.path));
            cudaMemcpy(p.out, cb + guard, c_bytes, cudaMemcpyDeviceToHost);
            prob_check(&p, p.out, 1e-2, qmm_path_name(plan.path));
            if (need > 0) /* one byte short is refused before anything runs */
                CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, p.m, p.dw, (qmm_bf16 *)(cb + guard),
                                             ws + guard, need - 1, &list[oi], NULL),
                             QMM_ERR_WORKSPACE);
            cudaFree(ws), cudaFree(cb);
        }
        prob_free(&p);
    }
}
static void exact_workspace_guards(void) { exact_workspace_guards_g(QMM_GROUP); }

/* ---- groups of 64 and 32: the checks above on such weights (more in kernels_groups.c) ---- */

static void g64_ragged_shapes(void) { ragged_shapes_g(64); }
static void g32_ragged_shapes(void) { ragged_shapes_g(32); }
static void g64_fallback_is_bitwise(void) { fallback_is_bitwise_g(64); }
static void g64_stages_same_bits(void) { stages_same_bits_g(64); }
static void g32_stages_same_bits(void) { stages_same_bits_g(32); }
static void g64_splitk_deterministic(void) { splitk_deterministic_g(64); }
static void g64_wrapped_weight(void) { wrapped_weight_g(64); }
static void g64_exact_workspace_guards(void) { exact_workspace_guards_g(64); }
static void g32_exact_workspace_guards(void) { exact_workspace_guards_g(32); }

static const test_case cases[] = {
    {"small/exact_workspace_guards", exact_workspace_guards},
    {"small/wrapped_weight", wrapped_weight},
    {"dense/small_shapes", dense_path},
    {"dense/m2048", dense_path_2048},
    {"small/bad_input", bad_input},
    {"small/ragged_shapes", ragged_shapes},
    {"small/matvec_all_m", matvec_all_m},
    {"small/splitk_kv_m32", splitk_kv_m32},
    {"small/stages_same_bits", stages_same_bits},
    {"small/splitk_deterministic", splitk_deterministic},
    {"plan_is_one_wave", plan_is_one_wave},
    {"plan_is_the_shipped_table", plan_is_the_shipped_table},
    {"fallback_is_bitwise", fallback_is_bitwise},
    {"qwen3_projections", qwen3_projections},
    {"g64/ragged_shapes", g64_ragged_shapes},
    {"g64/all_m", g64_all_m},
    {"g64/fallback_is_bitwise", g64_fallback_is_bitwise},
    {"g64/stages_same_bits", g64_stages_same_bits},
    {"g64/splitk_deterministic", g64_splitk_deterministic},
    {"g64/wrapped_weight", g64_wrapped_weight},
    {"g64/exact_workspace_guards", g64_exact_workspace_guards},
    {"g64/same_bits_as_g128", g64_same_bits_as_g128},
    {"g64/dequantize_rows", g64_dequantize_rows},
    {"g64/plan_follows_weight", g64_plan_follows_weight},
    {"g32/ragged_shapes", g32_ragged_shapes},
    {"g32/stages_same_bits", g32_stages_same_bits},
    {"g32/exact_workspace_guards", g32_exact_workspace_guards},
    {"g32/same_bits_as_g128", g32_same_bits_as_g128},
    {"g32/dequantize_rows", g32_dequantize_rows},
};

int main(int argc, char **argv)
{
    test_require_gpu("the CUDA kernels are not tested here");
    if (!prob_qwen3_projections(projections, 0)) {
        printf("no qwen3-4b shapes: %s\n", qmm_last_error());
        return 1;
    }
    ctx = test_gpu_context();
    prob_setup = (prob_style){ctx, 64, 1}; /* all rows up to M = 64; one generous workspace */
    int rc = test_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
    qmm_cuda_destroy(ctx);
    return rc;
}
#endif
