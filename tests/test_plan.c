/* The seed planner: the Qwen3-4B table of DESIGN.md §5 cell by cell, matvec for M <= 8,
 * qmm_split_align, and the parameters acting as documented. */
#include <string.h>

#include "harness.h"

static void seed_params(void)
{
    qmm_plan_params p = qmm_plan_seed_params();
    CHECK(p.tile_m == 32 && p.tile_n == 32 && p.target_blocks == 320 && p.max_split == 16 &&
          p.matvec_max_m == 8);
}

/* DESIGN.md §5: base → split for each projection (K→N) and token count M. */
static void qwen3_4b_table(void)
{
    static const struct {
        const char *proj;
        int64_t k, n;
        int64_t base[5];
        int split[5];
    } rows[] = {
        {"q", 2560, 4096, {128, 128, 256, 512, 8192}, {2, 2, 1, 1, 1}},
        {"k", 2560, 1024, {32, 32, 64, 128, 2048}, {10, 10, 5, 2, 1}},
        {"v", 2560, 1024, {32, 32, 64, 128, 2048}, {10, 10, 5, 2, 1}},
        {"o", 4096, 2560, {80, 80, 160, 320, 5120}, {4, 4, 2, 1, 1}},
        {"gate", 2560, 9728, {304, 304, 608, 1216, 19456}, {1, 1, 1, 1, 1}},
        {"up", 2560, 9728, {304, 304, 608, 1216, 19456}, {1, 1, 1, 1, 1}},
        {"down", 9728, 2560, {80, 80, 160, 320, 5120}, {4, 4, 2, 1, 1}},
    };
    static const int64_t tokens[5] = {16, 32, 64, 128, 2048};
    qmm_plan_params pp = qmm_plan_seed_params();
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (int t = 0; t < 5; t++) {
            qmm_plan pl;
            memset(&pl, 0xA5, sizeof pl);
            CHECK_OK(qmm_plan_seed(tokens[t], rows[r].n, rows[r].k, &pp, &pl));
            int split = rows[r].split[t];
            printf("    %-4s %lld→%lld M=%-4lld  %lld→%d  (want %lld→%d)\n", rows[r].proj,
                   (long long)rows[r].k, (long long)rows[r].n, (long long)tokens[t],
                   (long long)pl.base_blocks, pl.split, (long long)rows[r].base[t], split);
            CHECK(pl.base_blocks == rows[r].base[t] && pl.split == split);
            CHECK(pl.path == (split > 1 ? QMM_PATH_SPLITK : QMM_PATH_TILED));
            CHECK(pl.blocks == rows[r].base[t] * split);
            CHECK(pl.k_per_split == rows[r].k / split && pl.k_per_split % QMM_GROUP == 0);
            CHECK(pl.tile_m == 32 && pl.tile_n == 32 && pl.predicted_us < 0);
        }
    }
}

static void matvec_for_small_m(void)
{
    qmm_plan_params pp = qmm_plan_seed_params();
    qmm_plan pl;
    for (int64_t m = 1; m <= 8; m++) {
        CHECK_OK(qmm_plan_seed(m, 1024, 2560, &pp, &pl));
        CHECKF(pl.path == QMM_PATH_MATVEC && pl.split == 1 && pl.k_per_split == 2560,
               "M=%lld: %s split %d", (long long)m, qmm_path_name(pl.path), pl.split);
    }
    CHECK_OK(qmm_plan_seed(9, 1024, 2560, &pp, &pl));
    CHECK(pl.path == QMM_PATH_SPLITK && pl.split == 10);
    pp.matvec_max_m = 0; /* matvec off: M = 1 goes to split-K like any small grid */
    CHECK_OK(qmm_plan_seed(1, 1024, 2560, &pp, &pl));
    CHECK(pl.path == QMM_PATH_SPLITK && pl.split == 10);
}

static void split_align(void)
{
    CHECK(qmm_split_align(2560, 16) == 10); /* 20 groups */
    CHECK(qmm_split_align(2560, 10) == 10);
    CHECK(qmm_split_align(2560, 3) == 2);
    CHECK(qmm_split_align(2560, 9) == 5);
    CHECK(qmm_split_align(9728, 16) == 4); /* 76 groups = 4 · 19 */
    CHECK(qmm_split_align(9728, 19) == 19);
    CHECK(qmm_split_align(4096, 16) == 16);
    CHECK(qmm_split_align(4096, 7) == 4);
    CHECK(qmm_split_align(128, 16) == 1);
    CHECK(qmm_split_align(2560, 1) == 1);
    CHECK(qmm_split_align(2560, 0) == 1); /* nonsense asks get the unsplit answer */
    CHECK(qmm_split_align(2560, -5) == 1);
    CHECK(qmm_split_align(100, 4) == 1);
    CHECK(qmm_split_align(0, 4) == 1);
    /* a weight's own group: partitions of whole groups of 64 or 32 */
    CHECK(qmm_split_align_group(2560, 128, 16) == qmm_split_align(2560, 16));
    CHECK(qmm_split_align_group(2560, 64, 16) == 10); /* 40 groups */
    CHECK(qmm_split_align_group(2560, 64, 9) == 8);
    CHECK(qmm_split_align_group(2496, 64, 16) == 13); /* 39 groups = 3 · 13; K % 128 != 0 */
    CHECK(qmm_split_align(2496, 16) == 1);
    CHECK(qmm_split_align_group(9728, 32, 16) == 16); /* 304 groups */
    CHECK(qmm_split_align_group(128, 32, 16) == 4);
    CHECK(qmm_split_align_group(2560, 48, 4) == 1); /* not a supported group */
    CHECK(qmm_split_align_group(96, 64, 4) == 1);   /* K not a multiple of the group */
}

static void rule_limits(void)
{
    qmm_plan_params pp = qmm_plan_seed_params();
    qmm_plan pl;
    /* one block: floor(320/1) = 320, capped at 16 */
    CHECK_OK(qmm_plan_seed(16, 32, 8192, &pp, &pl));
    CHECK(pl.base_blocks == 1 && pl.split == 16 && pl.k_per_split == 512);
    /* ... and at K/128 */
    CHECK_OK(qmm_plan_seed(16, 32, 256, &pp, &pl));
    CHECK(pl.split == 2 && pl.path == QMM_PATH_SPLITK);
    CHECK_OK(qmm_plan_seed(16, 32, 128, &pp, &pl));
    CHECK(pl.split == 1 && pl.path == QMM_PATH_TILED);
    /* ragged M and N round the grid up */
    CHECK_OK(qmm_plan_seed(33, 65, 2560, &pp, &pl));
    CHECK(pl.base_blocks == 2 * 3 && pl.split == 10); /* floor(320/6) = 53 -> 16 -> 10 */
    /* the parameters change the plan as documented */
    pp.target_blocks = 640;
    CHECK_OK(qmm_plan_seed(64, 1024, 2560, &pp, &pl));
    CHECK(pl.split == 10); /* floor(640/64) = 10 */
    pp.max_split = 4;
    CHECK_OK(qmm_plan_seed(64, 1024, 2560, &pp, &pl));
    CHECK(pl.split == 4);
    pp = qmm_plan_seed_params();
    pp.tile_m = 64;
    pp.tile_n = 128;
    CHECK_OK(qmm_plan_seed(16, 1024, 2560, &pp, &pl));
    CHECK(pl.base_blocks == 8 && pl.split == 10 && pl.tile_m == 64 && pl.tile_n == 128);
    /* huge shapes stay exact */
    pp = qmm_plan_seed_params();
    CHECK_OK(qmm_plan_seed(1LL << 40, 1LL << 20, 1LL << 20, &pp, &pl));
    CHECK(pl.base_blocks == (1LL << 35) * (1LL << 15) && pl.split == 1);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, seed_params, qwen3_4b_table, matvec_for_small_m, split_align, rule_limits);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
