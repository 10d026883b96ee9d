/*
 * gpu_sm90's cases on the token tiles' other block heights two CTAs a SM (its table is in
 * gpu_sm90.c): the 32-token tile's 128-row blocks forced by the options' rows, and the 64-token
 * tile's 128-row blocks two a SM where this GPU's plan takes them.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_sm90.h"
#include "tune/sm90.h"

#ifdef QMM_HAVE_CUDA

/* The 32-token tile's 128-row blocks (two CTAs a SM, NOTES.md row 204), forced by the options'
 * rows on any GPU: within tolerance of fp64, and the same bits as the rule's 64-row blocks (three
 * CTAs a SM since NOTES.md row 213) at the
 * same split (both sum a k-block's k16 steps in one chain, the partitions in order), unsplit,
 * in clusters and through the workspace (split 9), at groups of 128 and 32 (a stage's scales
 * for four groups), ragged tokens and rows; three runs, the same bits. */
void case_other_height_32(void)
{
    static const int64_t shapes[][4] = {
        {32, 9728, 2560, 128}, /* gate at M = 32 */
        {25, 1032, 2560, 128}, /* ragged tokens and rows (17-24 tokens: the 24-token tile) */
        {30, 1000, 1280, 32},
    };
    static const int splits[] = {1, 2, 3, 8, 9};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        prob p;
        SETUP_G(p, m, n, k, (int)shapes[i][3]);
        size_t bytes = (size_t)(m * n) * 2;
        qmm_bf16 *rule = malloc(bytes);
        CHECK(rule != NULL);
        for (size_t s = 0; rule && s < sizeof splits / sizeof splits[0]; s++) {
            qmm_cuda_options o = opts(QMM_PATH_WGMMA, splits[s]), tall = o;
            tall.rows = 128;
            qmm_plan rp, tp;
            qmm_status st = prob_run(&p, &o, rule, &rp);
            for (int r = 0; r < 3 && st == QMM_OK; r++) {
                st = prob_run(&p, &tall, p.out, &tp);
                if (st != QMM_OK) break;
                CHECKF(tp.tile_m == 32 && tp.tile_n == 128 && rp.tile_n == 64 && tp.split == rp.split,
                       "M=%lld split %d: tiles %dx%d and %dx%d", (long long)m, splits[s], tp.tile_m,
                       tp.tile_n, rp.tile_m, rp.tile_n);
                CHECKF(memcmp(rule, p.out, bytes) == 0, "g%lld M=%lld N=%lld split %d run %d: 128-row blocks "
                       "differ from 64-row ones", (long long)shapes[i][3], (long long)m, (long long)n, splits[s], r);
            }
            CHECKF(st == QMM_OK, "M=%lld split %d: %s (%s)", (long long)m, splits[s], qmm_status_name(st),
                   qmm_last_error());
            if (st == QMM_OK) prob_check(&p, p.out, 1e-2, "32-token 128-row blocks");
        }
        printf("    g%-3lld M=%-3lld N=%-5lld K=%-5lld splits 1, 2, 3, 8, 9: 128-row blocks bitwise equal to 64-row ones\n",
               (long long)shapes[i][3], (long long)m, (long long)n, (long long)k);
        free(rule);
        prob_free(&p);
    }
}

/* The 64-token tile's 128-row blocks two CTAs a SM (the table's row 9, NOTES.md rows 206, 208,
 * 219), which AUTO takes in clusters where the rule's blocks are 128 rows, on a GPU whose table
 * has that row's cluster counts (every sm90 GPU's since session 43; a context's -1 where its
 * occupancy API says the clusters do not fit): gate at 49-64 tokens, ragged tokens and
 * rows, groups of 64 and 32, against fp64, three runs with the same bits. Where this GPU plans
 * another schedule, the shape says so and is not run; where its table has the row's clusters,
 * at least one shape must take them. */
void case_paired_64(void)
{
    qmm_device_desc d;
    CHECK_OK(qmm_cuda_device_desc(prob_setup.ctx, &d));
    const int planned_here = d.wgmma_cluster_ctas[QMM_SM90_PAIRED_64][3] > 0; /* clusters of 3 fit */
    int ran = 0;
    static const int64_t shapes[][4] = {
        {64, 9728, 2560, 128}, {56, 9736, 2560, 128}, {60, 9728, 2560, 64}, {49, 9728, 1280, 32}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        qmm_cuda_options o = qmm_cuda_options_default();
        o.group = (int)shapes[i][3];
        qmm_plan plan = {0};
        qmm_status st = qmm_cuda_plan(prob_setup.ctx, m, n, k, &o, &plan);
        CHECK_OK(st);
        if (st != QMM_OK) continue;
        if (plan.config != QMM_SM90_PAIRED_64) {
            printf("    g%-3d M=%-3lld N=%-5lld: this GPU plans %s split %d (row %d), not the paired row: "
                   "not run\n", o.group, (long long)m, (long long)n, qmm_path_name(plan.path), plan.split,
                   plan.config);
            continue;
        }
        prob p;
        SETUP_G(p, m, n, k, o.group);
        const size_t bytes = (size_t)(m * n) * 2;
        qmm_bf16 *first = malloc(bytes);
        CHECK(first != NULL);
        for (int r = 0; first && r < 3; r++) {
            qmm_plan got = {0};
            st = prob_run(&p, NULL, r ? p.out : first, &got);
            CHECK_OK(st);
            if (st != QMM_OK) break;
            CHECK(got.config == QMM_SM90_PAIRED_64 && got.split == plan.split && got.tile_n == 128);
            if (r) CHECKF(memcmp(first, p.out, bytes) == 0, "M=%lld N=%lld: run %d differs", (long long)m,
                          (long long)n, r);
        }
        if (first && st == QMM_OK) {
            prob_check(&p, first, 1e-2, "64-token 128-row blocks two a SM");
            ran++;
        }
        printf("    g%-3d M=%-3lld N=%-5lld K=%-5lld clusters of %d, %lld CTAs two a SM: within tolerance, "
               "the same bits three times\n", o.group, (long long)m, (long long)n, (long long)k, plan.split,
               (long long)plan.blocks);
        free(first);
        prob_free(&p);
    }
    /* where this GPU's table has the row's clusters, at least one shape must take them */
    CHECKF(!planned_here || ran > 0, "this GPU's table plans the paired row, yet no shape took it");
}

#endif
