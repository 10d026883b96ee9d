/*
 * The Hopper wgmma kernel (paths WGMMA and STREAMK) against fp64 on fresh random data with
 * signed scales, C poisoned before every run, workspaces exactly as the library sizes them.
 * Tolerance: relative Frobenius error <= 1e-2 (weights dequantized to bf16, bf16 output; fp32
 * accumulation and partials). Bitwise: determinism over 10 runs of every schedule, the full-grid
 * plan equal to the forced unsplit schedule, dependent launches (PDL) equal to synchronized ones.
 * Groups of 64 and 32 (cases g64/..., g32/...): a stage holds 2 or 4 groups of scale|bias; the
 * same checks on such weights, M = 1…300, and bitwise equality with groups of 128 when each
 * block's groups share their scale and bias (most of them in sm90_groups.c; this file holds the
 * one table of cases). 256-token tiles (bitwise/256-token, small/256-token) from 1 024 tokens.
 * Skips (exit 77) with the reason when there is no GPU or no CUDA in this build.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_sm90.h"
#include "tune/sm90.h"

#ifndef QMM_HAVE_CUDA
int main(void) { test_skip_no_gpu("this build has no CUDA backend (nvcc was not found)"); }
#else
#include <cuda_runtime.h>

static qmm_cuda_ctx *ctx;

/* Every schedule of one shape against fp64: the plan, unsplit, split-K 2, 3 and 8 (summed in
 * clusters), 9 (through the workspace), stream-K. */
void check_schedules_g(int64_t m, int64_t n, int64_t k, int group, const char *name)
{
    prob p;
    SETUP_G(p, m, n, k, group);
    const struct { const char *what; qmm_cuda_options o; } list[] = {
        {"auto", qmm_cuda_options_default()}, {"wgmma-unsplit", opts(QMM_PATH_WGMMA, 1)},
        {"wgmma-split2", opts(QMM_PATH_WGMMA, 2)}, {"wgmma-split3", opts(QMM_PATH_WGMMA, 3)},
        {"wgmma-split8", opts(QMM_PATH_WGMMA, 8)}, {"wgmma-split9", opts(QMM_PATH_WGMMA, 9)},
        {"streamk", opts(QMM_PATH_STREAMK, 0)},
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        if (list[i].o.split > k / 128) continue;
        qmm_plan plan;
        qmm_status st = prob_run(&p, &list[i].o, p.out, &plan);
        CHECKF(st == QMM_OK, "%s %s M=%lld: %s (%s)", name, list[i].what, (long long)m,
               qmm_status_name(st), qmm_last_error());
        if (st != QMM_OK) continue;
        double e = prob_check(&p, p.out, 1e-2, list[i].what);
        if (e > worst) worst = e;
    }
    printf("    %-5s g%-3d M=%-5lld N=%-5lld K=%-5lld worst rel err %.2e\n", name, group,
           (long long)m, (long long)n, (long long)k, worst);
    prob_free(&p);
}

static void check_schedules(int64_t m, int64_t n, int64_t k, const char *name)
{
    check_schedules_g(m, n, k, QMM_GROUP, name);
}

/* M through every token tile's tails (NOTES.md row 200: a last tile that M does not fill gets
 * boxes of its own rows), the 256-token tile's too (M = 1100), on a ragged N and K = 10 groups */
static void case_all_m(void)
{
    static const int64_t ms[] = {1, 3, 8, 9, 15, 16, 17, 24, 25, 31, 33, 40, 48, 49, 63, 64, 65, 100, 127, 129, 200, 257, 1100};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) check_schedules(ms[i], 1000, 1280, "all-m");
}

static void case_projections(void)
{
    static const int64_t ms[] = {1, 9, 16, 17, 32, 64, 100, 128, 256, 2048};
    prob_proj projections[QMM_LLM_LINEAR_COUNT];
    int count = prob_qwen3_projections(projections, 1); /* q, k, o, gate, down */
    CHECKF(count == 5, "qwen3-4b projections: %d (%s)", count, qmm_last_error());
    for (int s = 0; s < count; s++)
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
            check_schedules(ms[i], projections[s].n, projections[s].k, projections[s].name);
}

static void case_ragged(void)
{
    static const int64_t shapes[][3] = {
        {1, 1032, 2560}, {9, 1032, 256}, {130, 1032, 384}, {3, 8, 128}, {17, 1, 128},
        {64, 200, 128}, {5, 4100, 1280}, {300, 72, 512},
        {40, 1003, 256}, /* n % 8 != 0: the epilogue's 2-byte stores instead of 16-byte ones */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_schedules(shapes[i][0], shapes[i][1], shapes[i][2], "ragged");
}

/* C of p's last run: row nan_row all NaN, row inf_row (-1: none) all non-finite, every other
 * element finite; `what` and `id` name the run in the message. */
static void check_nonfinite_rows(const prob *p, int64_t nan_row, int64_t inf_row, const char *what, long long id)
{
    int bad = 0, nan_ok = 1, inf_ok = 1;
    for (int64_t r = 0; r < p->m; r++)
        for (int64_t j = 0; j < p->n; j++) {
            const float v = qmm_bf16_to_f32(p->out[r * p->n + j]);
            if (r == nan_row) nan_ok &= isnan(v);
            else if (r == inf_row) inf_ok &= !isfinite(v);
            else if (!isfinite(v)) bad++;
        }
    CHECKF(nan_ok && inf_ok && bad == 0, "%s %lld: NaN row all NaN %d, Inf row all non-finite %d, %d non-finite elsewhere",
           what, id, nan_ok, inf_ok, bad);
}

/* NaN and Inf in one row of A reach that row of C only (C poisoned with zeros, so that the
 * non-finite rows must have been written). */
static void case_nonfinite_rows(void)
{
    const int64_t m = 20, n = 1032, k = 512;
    prob p;
    SETUP(p, m, n, k);
    p.zero_poison = 1;              /* C poisoned with zeros: a row left unwritten fails */
    p.a[5 * k + 7] = 0x7FC0;        /* NaN in row 5 */
    p.a[11 * k + 300] = 0x7F80;     /* +Inf in row 11 */
    cudaMemcpy(p.a_dev, p.a, (size_t)(m * k) * 2, cudaMemcpyHostToDevice);
    const qmm_cuda_options list[] = {qmm_cuda_options_default(), opts(QMM_PATH_WGMMA, 1),
                                     opts(QMM_PATH_WGMMA, 2), opts(QMM_PATH_WGMMA, 4),
                                     opts(QMM_PATH_STREAMK, 0)};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        qmm_plan plan;
        CHECK_OK(prob_run(&p, &list[i], p.out, &plan));
        check_nonfinite_rows(&p, 5, 11, "schedule", (long long)i);
    }
    prob_free(&p);
}

/* The same for the decode matvec (the plan for M <= 8): a NaN or an Inf in one token's
 * activations stays in that token's row, whatever the kernel does with its staged activations
 * (NOTES.md row 121 tried a scale a token); one token, and 4 tokens with NaN in row 1 and -Inf
 * in row 2. */
static void case_nonfinite_rows_matvec(void)
{
    static const int64_t ms[] = {1, 4};
    const int64_t n = 1032, k = 2560;
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        const int64_t m = ms[i], nan_row = m > 1 ? 1 : 0, inf_row = m > 1 ? 2 : -1;
        prob p;
        SETUP(p, m, n, k);
        p.zero_poison = 1;                           /* a row left unwritten fails */
        p.a[nan_row * k + 7] = 0x7FC0;               /* NaN */
        if (inf_row >= 0) p.a[inf_row * k + 2000] = 0xFF80; /* -Inf */
        cudaMemcpy(p.a_dev, p.a, (size_t)(m * k) * 2, cudaMemcpyHostToDevice);
        qmm_plan plan;
        const qmm_cuda_options o = qmm_cuda_options_default();
        CHECK_OK(prob_run(&p, &o, p.out, &plan));
        CHECKF(plan.path == QMM_PATH_MATVEC, "M = %lld: plan path %d, not the matvec", (long long)m, (int)plan.path);
        check_nonfinite_rows(&p, nan_row, inf_row, "M =", (long long)m);
        prob_free(&p);
    }
}

/* Schedule i of a list run 10 more times gives the bits of its first run (`first`). */
void same_bits_10_times(prob *p, const qmm_cuda_options *o, const qmm_bf16 *first, qmm_bf16 *out,
                        size_t bytes, size_t i)
{
    qmm_plan plan;
    for (int r = 0; r < 10; r++) {
        CHECK_OK(prob_run(p, o, out, &plan));
        CHECKF(memcmp(first, out, bytes) == 0, "M=%lld schedule %zu: run %d differs from run 0",
               (long long)p->m, i, r + 1);
    }
    printf("    M=%-4lld N=%-5lld K=%-5lld %s split %d: the same bits 10 times\n", (long long)p->m,
           (long long)p->n, (long long)p->k, qmm_path_name(plan.path), plan.split);
}

/* 128-token tiles: stream-K (a tile in three or four partitions: the head's fixup from its
 * registers, with or without counting, NOTES.md row 115) and clusters of 2, 5 and 8 (the owner's
 * loop for each rank count, row 116) give the same bits 10 times, within tolerance of fp64; at
 * the edges (M = 200: tokens past M, the predicated paired stores; N = 2504: warps whose rows
 * pass N, the 2-byte stores and the owner's old loop). */
static void case_bitwise_128(void)
{
    static const int64_t shapes[][3] = {{256, 2560, 9728}, {200, 2504, 4096}};
    const qmm_cuda_options list[] = {qmm_cuda_options_default(), opts(QMM_PATH_STREAMK, 0),
                                     opts(QMM_PATH_WGMMA, 2), opts(QMM_PATH_WGMMA, 5),
                                     opts(QMM_PATH_WGMMA, 8)};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2];
        prob p;
        SETUP(p, m, n, k);
        size_t bytes = (size_t)(m * n) * 2;
        qmm_bf16 *first = malloc(bytes), *out = malloc(bytes);
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
            qmm_plan plan;
            CHECK_OK(prob_run(&p, &list[i], first, &plan));
            CHECKF(plan.tile_m == 128, "M=%lld schedule %zu: %d-token tiles", (long long)m, i, plan.tile_m);
            prob_check(&p, first, 1e-2, "128-token");
            same_bits_10_times(&p, &list[i], first, out, bytes, i);
        }
        prob_free(&p);
        free(first), free(out);
    }
}

/* 256-token tiles (from the table's wgmma_wide_min_m tokens, NOTES.md row 161): the plan, the
 * unsplit schedule, stream-K and split-K of 3 and 8 (through the workspace: no clusters at this
 * tile) give the same bits 10 times, within tolerance of fp64; at the edges (M = 1030: a last
 * tile of 6 tokens; N = 2504: warps whose rows pass N, the 2-byte stores); a full grid (256
 * tiles, 0.97 of two waves) is planned unsplit, bit for bit the forced unsplit schedule. Its
 * stream-K runs a wave of whole tiles first and spreads the other 124; at 1792 x 2432 the one
 * tile left over is spread over 8 of the 132 CTAs (the others have no stream-K share). */
static void case_bitwise_256(void)
{
    static const int64_t shapes[][3] = {{1030, 2504, 1024}, {1024, 8192, 1024}, {1792, 2432, 1024}};
    const qmm_cuda_options list[] = {qmm_cuda_options_default(), opts(QMM_PATH_WGMMA, 1),
                                     opts(QMM_PATH_STREAMK, 0), opts(QMM_PATH_WGMMA, 3),
                                     opts(QMM_PATH_WGMMA, 8)};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2];
        prob p;
        SETUP(p, m, n, k);
        size_t bytes = (size_t)(m * n) * 2;
        qmm_bf16 *first = malloc(bytes), *out = malloc(bytes), *planned = malloc(bytes);
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
            qmm_plan plan;
            CHECK_OK(prob_run(&p, &list[i], first, &plan));
            /* the plan of 133 tiles (half of two waves) is the dense path */
            if (i > 0 || sh < 2)
                CHECKF(plan.tile_m == 256 && plan.tile_n == 128, "M=%lld schedule %zu: %dx%d tiles",
                       (long long)m, i, plan.tile_m, plan.tile_n);
            if (i == 0 && sh == 1)
                CHECKF(plan.path == QMM_PATH_WGMMA && plan.split == 1, "full grid planned as %s split %d",
                       qmm_path_name(plan.path), plan.split);
            prob_check(&p, first, 1e-2, "256-token");
            if (i == 0) memcpy(planned, first, bytes);
            if (i == 1 && sh == 1) CHECKF(memcmp(planned, first, bytes) == 0, "full grid: plan != unsplit");
            same_bits_10_times(&p, &list[i], first, out, bytes, i);
        }
        prob_free(&p);
        free(first), free(out), free(planned);
    }
}

/* A small 256-token case for the sanitizers: every schedule, groups of 128, 64 and 32, N = 130
 * (not a multiple of 8: the 2-byte stores throughout). */
static void case_small_256(void)
{
    check_schedules_g(1030, 130, 384, QMM_GROUP, "tn256");
    check_schedules_g(1030, 130, 384, 64, "tn256");
    check_schedules_g(1030, 130, 384, 32, "tn256");
}

/* Stream-K with short ranges, for the sanitizers: at 4 k-blocks a CTA, every range crosses a
 * tile's end at 3 groups a 128-token tile and one in five at 19, so a segment that leaves a
 * partial comes before a head's that sums; the same bits 10 times, within tolerance of fp64, at
 * N = 1 000 (warps past N). */
static void case_stream_k_short(void)
{
    static const int64_t shapes[][3] = {{200, 1000, 2432}, {130, 1024, 384}};
    const qmm_cuda_options sk = opts(QMM_PATH_STREAMK, 0);
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2];
        prob p;
        SETUP(p, m, n, k);
        size_t bytes = (size_t)(m * n) * 2;
        qmm_bf16 *first = malloc(bytes), *out = malloc(bytes);
        qmm_plan plan;
        CHECK_OK(prob_run(&p, &sk, first, &plan));
        CHECKF(plan.path == QMM_PATH_STREAMK && plan.tile_m == 128, "M=%lld: %s, %d-token tiles", (long long)m,
               qmm_path_name(plan.path), plan.tile_m);
        prob_check(&p, first, 1e-2, "stream-K short ranges");
        same_bits_10_times(&p, &sk, first, out, bytes, sh);
        prob_free(&p);
        free(first), free(out);
    }
}

/* gate at M = 300 fills the GPU (3 x 76 tiles, 86 % of two waves): the plan must be the unsplit
 * schedule, bit for bit (groups other than 128 also checked against fp64) */
void full_grid_is_unsplit(int group)
{
    prob p;
    SETUP_G(p, 300, 9728, 2560, group);
    size_t bytes = (size_t)(300 * 9728) * 2;
    qmm_bf16 *a2 = malloc(bytes), *b2 = malloc(bytes);
    qmm_plan plan;
    qmm_cuda_options unsplit = opts(QMM_PATH_WGMMA, 1);
    CHECK_OK(prob_run(&p, NULL, a2, &plan));
    CHECKF(plan.path == QMM_PATH_WGMMA && plan.split == 1, "g%d full grid planned as %s split %d",
           group, qmm_path_name(plan.path), plan.split);
    CHECK_OK(prob_run(&p, &unsplit, b2, &plan));
    CHECK(memcmp(a2, b2, bytes) == 0);
    if (group != QMM_GROUP) prob_check(&p, a2, 1e-2, "full grid");
    free(a2), free(b2);
    prob_free(&p);
}

/* Every schedule gives the same bits 10 times; the full-grid plan is the unsplit schedule. */
static void case_bitwise(void)
{
    const int64_t m = 32, n = 2560, k = 9728;
    prob p;
    SETUP(p, m, n, k);
    size_t bytes = (size_t)(m * n) * 2;
    qmm_bf16 *first = malloc(bytes), *out = malloc(bytes);
    const qmm_cuda_options list[] = {qmm_cuda_options_default(), opts(QMM_PATH_WGMMA, 5),
                                     opts(QMM_PATH_WGMMA, 8), opts(QMM_PATH_WGMMA, 12),
                                     opts(QMM_PATH_STREAMK, 0)};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        qmm_plan plan;
        CHECK_OK(prob_run(&p, &list[i], first, &plan));
        for (int r = 0; r < 10; r++) {
            CHECK_OK(prob_run(&p, &list[i], out, &plan));
            CHECKF(memcmp(first, out, bytes) == 0, "schedule %zu: run %d differs from run 0", i, r + 1);
        }
    }
    prob_free(&p);
    free(first), free(out);
    full_grid_is_unsplit(QMM_GROUP);
}

/* A chain of dependent calls launched back to back (PDL lets each start before the previous
 * ends) equals the same chain with a synchronization between calls. */
static void dependent_launches_g(int group)
{
    const int64_t m = 16, d = 2560;
    prob p;
    SETUP_G(p, m, d, d, group);
    qmm_bf16 *c2 = NULL, *c3 = NULL;
    size_t bytes = (size_t)(m * d) * 2;
    if (cudaMalloc((void **)&c2, bytes) != cudaSuccess || cudaMalloc((void **)&c3, bytes) != cudaSuccess) {
        test_fail(__FILE__, __LINE__, "cudaMalloc failed");
        cudaFree(c2);
        prob_free(&p);
        return;
    }
    const qmm_cuda_options list[] = {opts(QMM_PATH_STREAMK, 0), opts(QMM_PATH_WGMMA, 1),
                                     opts(QMM_PATH_WGMMA, 4), opts(QMM_PATH_WGMMA, 10)};
    qmm_bf16 *x = malloc(bytes), *y = malloc(bytes);
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        size_t wsb = 0;
        CHECK_OK(qmm_cuda_workspace_size(ctx, m, d, d, &list[i], &wsb));
        void *ws = NULL;
        if (wsb) cudaMalloc(&ws, wsb);
        for (int sync = 0; sync < 2; sync++) {
            cudaMemset(c2, 0xFF, bytes), cudaMemset(c3, 0xFF, bytes);
            cudaDeviceSynchronize();
            for (int rep = 0; rep < 20; rep++) { /* A -> c2 -> c3 -> c2 -> ... */
                const qmm_bf16 *in = rep == 0 ? p.a_dev : (rep % 2 ? c2 : c3);
                qmm_bf16 *outp = rep % 2 ? c3 : c2;
                CHECK_OK(qmm_cuda_matmul(ctx, in, m, p.dw, outp, ws, wsb, &list[i], NULL));
                if (sync) cudaDeviceSynchronize();
            }
            cudaDeviceSynchronize();
            cudaMemcpy(sync ? y : x, c3, bytes, cudaMemcpyDeviceToHost);
        }
        CHECKF(memcmp(x, y, bytes) == 0, "schedule %zu: back-to-back chain differs from synchronized", i);
        cudaFree(ws);
    }
    free(x), free(y);
    cudaFree(c2), cudaFree(c3);
    prob_free(&p);
}

static void case_dependent_launches(void) { dependent_launches_g(QMM_GROUP); }
static void case_g64_dependent_launches(void) { dependent_launches_g(64); }

/* Bad requests: stream-K with a split, a split beyond K's groups; C untouched. */
static void case_bad_requests(void)
{
    prob p;
    SETUP(p, 4, 256, 256);
    qmm_cuda_options o = opts(QMM_PATH_STREAMK, 2);
    qmm_plan plan;
    CHECK_STATUS(qmm_cuda_plan(ctx, 4, 256, 256, &o, &plan), QMM_ERR_ARG);
    o = opts(QMM_PATH_WGMMA, 3); /* K = 256 has 2 groups */
    CHECK_STATUS(qmm_cuda_plan(ctx, 4, 256, 256, &o, &plan), QMM_ERR_ARG);
    o = opts(QMM_PATH_STREAMK, 0);
    size_t need = 0;
    CHECK_OK(qmm_cuda_workspace_size(ctx, 4, 256, 256, &o, &need));
    CHECK(need > 0);
    cudaMemset(p.c_dev, 0xFF, 4 * 256 * 2);
    CHECK_STATUS(qmm_cuda_matmul(ctx, p.a_dev, 4, p.dw, p.c_dev, NULL, 0, &o, NULL), QMM_ERR_WORKSPACE);
    qmm_bf16 out[4 * 256];
    cudaMemcpy(out, p.c_dev, sizeof out, cudaMemcpyDeviceToHost);
    int untouched = 1;
    for (int i = 0; i < 4 * 256; i++) untouched &= out[i] == 0xFFFF;
    CHECK(untouched);
    prob_free(&p);
}

/* Where the plan takes split-K in clusters of the other block height (64-row blocks of 128
 * tokens: the model preferring them to the rule's height): the plan is that schedule, within
 * tolerance of fp64, the same bits 10 times, and the same bits as the forced schedule with the
 * same split in the rule's height (the same partitions, each output summed in the same k order).
 * At 64 tokens the two heights no longer share bits (the 64-row tile, two CTAs a SM, sums a
 * k-block's k16 steps in one chain, the 128-row tile in two) and no shape here plans 128-row
 * clusters since (NOTES.md row 199). */
static void other_height_clusters_g(int group)
{
    static const int64_t shapes[][3] = {
        {128, 1024, 2560}, /* k at M = 128: clusters of 5 in 64-row blocks */
        {100, 1032, 2560}, /* ragged tokens and rows */
        {128, 4096, 2560}, /* q at M = 128: clusters of 2 in 64-row blocks */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        prob p;
        SETUP_G(p, m, n, k, group);
        size_t bytes = (size_t)(m * n) * 2;
        qmm_bf16 *first = malloc(bytes), *rule = malloc(bytes);
        qmm_plan plan, rule_plan;
        qmm_status st = first && rule ? prob_run(&p, NULL, first, &plan) : QMM_ERR_NOMEM;
        qmm_cuda_options o = opts(QMM_PATH_WGMMA, st == QMM_OK ? plan.split : 1);
        if (st == QMM_OK) st = prob_run(&p, &o, rule, &rule_plan);
        CHECKF(st == QMM_OK, "g%d M=%lld N=%lld: %s (%s)", group, (long long)m, (long long)n,
               qmm_status_name(st), qmm_last_error());
        if (st != QMM_OK) {
            free(first), free(rule);
            prob_free(&p);
            continue;
        }
        CHECKF(plan.path == QMM_PATH_WGMMA && plan.split >= 2 && rule_plan.split == plan.split &&
                   rule_plan.tile_m == plan.tile_m && rule_plan.tile_n != plan.tile_n,
               "g%d M=%lld N=%lld: planned %s split %d tile %dx%d (the rule's %dx%d): not clusters of "
               "the other block height", group, (long long)m, (long long)n, qmm_path_name(plan.path),
               plan.split, plan.tile_m, plan.tile_n, rule_plan.tile_m, rule_plan.tile_n);
        prob_check(&p, first, 1e-2, "other-height clusters");
        for (int r = 0; r < 10; r++) {
            CHECK_OK(prob_run(&p, NULL, p.out, &plan));
            CHECKF(memcmp(first, p.out, bytes) == 0, "g%d M=%lld N=%lld: run %d differs from run 0", group,
                   (long long)m, (long long)n, r + 1);
        }
        CHECKF(memcmp(first, rule, bytes) == 0, "g%d M=%lld N=%lld: %d-row blocks differ from %d-row ones",
               group, (long long)m, (long long)n, plan.tile_n, rule_plan.tile_n);
        printf("    g%-3d M=%-4lld N=%-5lld K=%-5lld clusters of %d %d-row blocks: bitwise equal to %d-row ones\n",
               group, (long long)m, (long long)n, (long long)k, plan.split, plan.tile_n, rule_plan.tile_n);
        free(first), free(rule);
        prob_free(&p);
    }
}
static void case_other_height_clusters(void) { other_height_clusters_g(QMM_GROUP); }

static void case_g64_other_height_clusters(void) { other_height_clusters_g(64); }
/* Two rules of the producer's start (tune/sm90.h) order copies only, so the same rows give the
 * same bits on either side of them: qmm_sm90_two_warp_start (8-16-token tiles, two producer warps
 * where a launch has more than two CTAs a SM) and qmm_sm90_all_weights_first (24-64-token tiles,
 * every first stage's weights before the dependency wait where it has at most one a SM). A weight
 * of n rows runs a forced split of 64-row blocks above the rule's CTA bound; its first rows, the
 * same split within it (split-K summed in clusters, and through the workspace); their outputs'
 * rows equal bitwise, the large one within tolerance of fp64. */
typedef struct {
    const char *name;
    int per_sm; /* the rule's bound: CTAs a SM */
    int (*rule)(int tile_tokens, long long ctas, int sms);
    struct { int64_t m, k; int split; } shapes[4];
} start_rule;
static void start_rule_sides(const start_rule *sr)
{
    int dev = 0, sms = 0;
    CHECK(cudaGetDevice(&dev) == cudaSuccess &&
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && sms > 0);
    if (sms <= 0) return;
    int ran = 0; /* shapes compared: a GPU on which every one skips has tested nothing */
    for (size_t i = 0; i < sizeof sr->shapes / sizeof sr->shapes[0]; i++) {
        const int64_t m = sr->shapes[i].m, k = sr->shapes[i].k, bound = (int64_t)sr->per_sm * sms;
        const int split = sr->shapes[i].split;
        /* enough 64-row tiles for the far side, at most the bound's CTAs (and 16 tiles) inside */
        const int64_t tiles = (bound + split) / split, small_tiles = bound / split;
        const int64_t n = (tiles < 64 ? 64 : tiles) * 64, n_small = (small_tiles < 16 ? small_tiles : 16) * 64;
        if (n_small < 64) {
            printf("    M=%-3lld split %d: %d SMs hold no launch of this split within the rule's bound, skipped\n",
                   (long long)m, split, sms);
            continue;
        }
        prob big, small;
        memset(&small, 0, sizeof small);
        SETUP(big, m, n, k);
        if (!prob_init(&small, m, n_small, k)) {
            CHECKF(0, "setup of M=%lld N=%lld: %s", (long long)m, (long long)n_small, qmm_last_error());
            prob_free(&big), prob_free(&small);
            return;
        }
        /* the small weight is the big one's first rows, and the same A */
        memcpy(small.w.packed, big.w.packed, small.w.packed_count * 4);
        memcpy(small.w.scales, big.w.scales, small.w.scales_count * 2);
        memcpy(small.w.biases, big.w.biases, small.w.biases_count * 2);
        qmm_cuda_weight_free(small.dw);
        small.dw = NULL;
        int ok = qmm_cuda_weight_upload(prob_setup.ctx, &small.w, &small.dw) == QMM_OK &&
                 cudaMemcpy(small.a_dev, big.a_dev, (size_t)(m * k) * 2, cudaMemcpyDeviceToDevice) == cudaSuccess;
        CHECKF(ok, "M=%lld: the small weight's upload: %s", (long long)m, qmm_last_error());
        qmm_cuda_options o = opts(QMM_PATH_WGMMA, split);
        o.rows = 64;
        qmm_plan pb, ps;
        ok = ok && prob_run(&big, &o, big.out, &pb) == QMM_OK && prob_run(&small, &o, small.out, &ps) == QMM_OK;
        CHECKF(ok, "M=%lld K=%lld split %d: %s", (long long)m, (long long)k, split, qmm_last_error());
        if (ok) {
            ran++;
            const int big_side = sr->rule(pb.tile_m, pb.blocks, sms);
            const int small_side = sr->rule(ps.tile_m, ps.blocks, sms);
            CHECKF(ps.tile_m == pb.tile_m && pb.tile_n == 64 && ps.tile_n == 64 && big_side != small_side,
                   "M=%lld: %lld and %lld CTAs of %d-token tiles on %d SMs: not both sides of %s", (long long)m,
                   (long long)pb.blocks, (long long)ps.blocks, pb.tile_m, sms, sr->name);
            prob_check(&big, big.out, 1e-2, sr->name);
            int same = 1;
            for (int64_t r = 0; r < m && same; r++)
                same = memcmp(big.out + r * n, small.out + r * n_small, (size_t)n_small * 2) == 0;
            CHECKF(same, "M=%lld K=%lld split %d: rows of %lld CTAs differ from those of %lld", (long long)m,
                   (long long)k, split, (long long)pb.blocks, (long long)ps.blocks);
            printf("    %s M=%-3lld K=%-5lld split %d: %lld CTAs (%s) and %lld (%s): same bits\n", sr->name,
                   (long long)m, (long long)k, split, (long long)pb.blocks, big_side ? "on" : "off",
                   (long long)ps.blocks, small_side ? "on" : "off");
        }
        prob_free(&big), prob_free(&small);
    }
    CHECKF(ran > 0, "%s: no shape ran on %d SMs (all skipped or failed)", sr->name, sms);
}
/* clusters of 5, 2 and 8; 10 partitions through the workspace and the tiles' counters */
static void case_two_warp_start(void)
{
    static const start_rule sr = {"two-warp start", 2, qmm_sm90_two_warp_start,
                                  {{16, 2560, 5}, {9, 2560, 2}, {12, 4096, 8}, {16, 2560, 10}}};
    start_rule_sides(&sr);
}
/* the 24-, 32-, 48- and 64-token tiles: clusters of 7, 2 and 3; 10 partitions */
static int all_weights_first_64(int tile_tokens, long long ctas, int sms)
{
    return qmm_sm90_all_weights_first(tile_tokens, 64, ctas, sms); /* the blocks start_rule forces */
}
static void case_all_weights_first(void)
{
    static const start_rule sr = {"all weights first", 1, all_weights_first_64,
                                  {{24, 2560, 7}, {32, 2560, 2}, {48, 4096, 3}, {64, 2560, 10}}};
    start_rule_sides(&sr);
}

static const test_case cases[] = {
    {"small/ragged", case_ragged},
    {"small/nonfinite-rows", case_nonfinite_rows},
    {"small/nonfinite-rows-matvec", case_nonfinite_rows_matvec},
    {"small/bad-requests", case_bad_requests},
    {"small/dependent-launches", case_dependent_launches},
    {"small/two-warp-start", case_two_warp_start},
    {"small/all-weights-first", case_all_weights_first},
    {"bitwise", case_bitwise},
    {"bitwise/128-token", case_bitwise_128},
    {"bitwise/256-token", case_bitwise_256},
    {"small/256-token", case_small_256},
    {"small/stream-k-short", case_stream_k_short},
    {"rest/aside", case_rest_aside},
    {"rest/dependent-launches", case_rest_dependent_launches},
    {"all-m", case_all_m},
    {"projections", case_projections},
    {"other-height/clusters", case_other_height_clusters},
    {"other-height/32-token", case_other_height_32},
    {"other-height/64-token-paired", case_paired_64},
    {"g64/other-height-clusters", case_g64_other_height_clusters},
    {"g64/ragged", case_g64_ragged},
    {"g64/all-m", case_g64_all_m},
    {"g64/bitwise", case_g64_bitwise},
    {"g64/dependent-launches", case_g64_dependent_launches},
    {"g64/same-bits-as-g128", case_g64_same_bits},
    {"g64/projections", case_g64_projections},
    {"g32/ragged", case_g32_ragged},
    {"g32/same-bits-as-g128", case_g32_same_bits},
};

int main(int argc, char **argv)
{
    int n = 0;
    char msg[256] = "";
    qmm_cuda_device_count(&n, msg, sizeof msg);
    if (n == 0) test_skip_no_gpu(msg[0] ? msg : "no CUDA device");
    if (qmm_cuda_create(0, NULL, &ctx) != QMM_OK) {
        printf("FAIL: a GPU is present but the context could not be created: %s\n", qmm_last_error());
        return 1;
    }
    prob_setup = (prob_style){ctx, 48, 0}; /* all rows up to M = 48; workspaces as reported */
    int rc = test_main(argc, argv, cases, (int)(sizeof cases / sizeof cases[0]));
    qmm_cuda_destroy(ctx);
    return rc;
}
#endif
