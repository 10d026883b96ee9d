/*
 * gpu_sm90's cases on groups of 64 and 32 (its table is in gpu_sm90.c): a stage of the wgmma
 * kernel holds 2 or 4 groups of scale|bias. Every schedule against fp64 on ragged shapes, M =
 * 1…300 and the Qwen3-4B projections; the same bits 10 times; the same bits as groups of 128
 * when each block's groups share their scale and bias.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_sm90.h"

#ifdef QMM_HAVE_CUDA

static void ragged_g(int group)
{
    static const int64_t shapes[][3] = {
        {1, 1032, 2560}, {9, 1032, 256}, {130, 1032, 384}, {3, 8, 128}, {17, 1, 128},
        {64, 200, 128}, {5, 4100, 1280}, {300, 72, 512}, {34, 1032, 384}, {48, 200, 128},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_schedules_g(shapes[i][0], shapes[i][1], shapes[i][2], group, "ragged");
}
void case_g64_ragged(void) { ragged_g(64); }
void case_g32_ragged(void) { ragged_g(32); }

/* M = 1…300 through every token tile, on a ragged N and a K of 10 blocks (20 groups of 64) */
void case_g64_all_m(void)
{
    static const int64_t ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40, 48, 63,
                                 64, 65, 100, 127, 128, 129, 200, 255, 256, 257, 300};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) check_schedules_g(ms[i], 1000, 1280, 64, "all-m");
}

void case_g64_projections(void)
{
    static const int64_t ms[] = {1, 16, 64, 300};
    prob_proj projections[QMM_LLM_LINEAR_COUNT];
    int count = prob_qwen3_projections(projections, 1); /* q, k, o, gate, down */
    CHECKF(count == 5, "qwen3-4b projections: %d (%s)", count, qmm_last_error());
    for (int s = 0; s < count; s++)
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
            check_schedules_g(ms[i], projections[s].n, projections[s].k, 64, projections[s].name);
}

/* g64: every schedule 10 times the same bits; the full-grid plan is the unsplit schedule */
void case_g64_bitwise(void)
{
    const int64_t m = 32, n = 2560, k = 9728;
    prob p;
    SETUP_G(p, m, n, k, 64);
    size_t bytes = (size_t)(m * n) * 2;
    qmm_bf16 *first = malloc(bytes), *out = malloc(bytes);
    const qmm_cuda_options list[] = {qmm_cuda_options_default(), opts(QMM_PATH_WGMMA, 5),
                                     opts(QMM_PATH_STREAMK, 0)};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        qmm_plan plan;
        CHECK_OK(prob_run(&p, &list[i], first, &plan));
        prob_check(&p, first, 1e-2, "g64 bitwise");
        for (int r = 0; r < 10; r++) {
            CHECK_OK(prob_run(&p, &list[i], out, &plan));
            CHECKF(memcmp(first, out, bytes) == 0, "g64 schedule %zu: run %d differs from run 0", i, r + 1);
        }
    }
    free(first), free(out);
    prob_free(&p);
    full_grid_is_unsplit(64);
}

/* A weight whose groups of g inside each 128-column block share one scale and bias is the same
 * matrix as a groups-of-128 weight: every wgmma and stream-K schedule must give the g128 kernel's
 * bits (this pins the arithmetic; the fp64 checks above catch a stage that reads the wrong
 * group). The matvec's own group arithmetic is held to the tolerance alone. */
static void same_bits_as_g128(int group)
{
    static const int64_t shapes[][3] = {{1, 1032, 2560}, {16, 1024, 2560}, {77, 520, 1280}, {300, 200, 384}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        prob p, q;
        SETUP_PAIR(p, q, m, n, k, group);
        size_t bytes = (size_t)(m * n) * 2;
        const qmm_cuda_options list[] = {qmm_cuda_options_default(), opts(QMM_PATH_WGMMA, 1),
                                         opts(QMM_PATH_WGMMA, 2), opts(QMM_PATH_STREAMK, 0)};
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
            if (list[i].split > k / 128) continue;
            qmm_cuda_options o = list[i];
            qmm_plan pp, pq;
            CHECK_OK(prob_run(&p, &o, p.out, &pp));
            if (pp.path == QMM_PATH_WGMMA || pp.path == QMM_PATH_STREAMK) {
                o.path = pp.path; /* g128 at small M would take the matvec: force the same kernel */
                o.split = pp.path == QMM_PATH_WGMMA ? pp.split : 0;
            }
            CHECK_OK(prob_run(&q, &o, q.out, &pq));
            /* the matvec sums each group of g on its own (P and Σa a group, then s and b), so
             * its bits follow the group size: only the tolerance below holds for it */
            CHECKF(pp.path == QMM_PATH_MATVEC || memcmp(p.out, q.out, bytes) == 0,
                   "g%d M=%lld N=%lld K=%lld option set %zu (%s split %d): differs from groups of "
                   "128", group, (long long)m, (long long)n, (long long)k, i,
                   qmm_path_name(pp.path), pp.split);
            prob_check(&p, p.out, 1e-2, "shared groups");
        }
        prob_free(&p), prob_free(&q);
    }
}
void case_g64_same_bits(void) { same_bits_as_g128(64); }
void case_g32_same_bits(void) { same_bits_as_g128(32); }

#endif
