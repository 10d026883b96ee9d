/* The plan of a split in clusters with its last tiles aside (plan_sm90.c, NOTES.md row 228) on
 * the shipped tuning table, decided on the CPU: which tiles go aside, how many ways they split,
 * the workspace, the refusals, and the prediction (the slower of the two launches). */
#include <string.h>

#include "harness.h"
#include "plan.h"
#include "plan_sm90.h"

static qmm_device_desc sm90(void)
{
    qmm_device_desc d;
    memset(&d, 0, sizeof d);
    CHECK_OK(qmm_tune_desc(9, 0, 0, &d));
    return d;
}

static qmm_cuda_options clusters(int split, int rest)
{
    qmm_cuda_options o = qmm_cuda_options_default();
    o.path = QMM_PATH_WGMMA, o.split = split, o.rest = rest;
    return o;
}

/* o at M = 256 in clusters of 3: 40 tiles of 128 × 128 need 120 CTAs, the table's slots for
 * such clusters are 117: 39 tiles in clusters, the 40th split over 8 of the 15 SMs left (at
 * most QMM_SM90_REST_MAX_WAYS). Down at M = 128 in clusters of 7: 105 slots, 15 clusters, 5
 * tiles over 27 SMs: 5 ways each. */
static void forced_rest(void)
{
    const qmm_device_desc d = sm90();
    qmm_cuda_options o = clusters(3, 1);
    qmm_plan p;
    CHECK_OK(qmm_plan_call(&d, 256, 2560, 4096, &o, &p));
    CHECKF(p.path == QMM_PATH_WGMMA && p.split == 3 && p.rest_tiles == 1 && p.rest_split == 8 &&
               p.blocks == 117 + 8 && p.base_blocks == 40,
           "o 256: split %d, %d aside split %d, %lld CTAs", p.split, p.rest_tiles, p.rest_split,
           (long long)p.blocks);
    CHECK(p.workspace_bytes == (size_t)8 * 2 * 128 * 128 * 4);

    o = clusters(7, 1);
    CHECK_OK(qmm_plan_call(&d, 128, 2560, 9728, &o, &p));
    CHECKF(p.rest_tiles == 5 && p.rest_split == 5 && p.blocks == 105 + 25, "down 128: %d aside split %d",
           p.rest_tiles, p.rest_split);

    /* the same split without rest: a second wave of clusters, nothing aside, no workspace */
    o = clusters(3, 0);
    CHECK_OK(qmm_plan_call(&d, 256, 2560, 4096, &o, &p));
    CHECK(p.rest_tiles == 0 && p.rest_split == 0 && p.blocks == 120 && p.workspace_bytes == 0);

    /* the device policy predicts the pair as the slower of its launches */
    o = clusters(3, 1);
    o.policy = QMM_POLICY_DEVICE;
    CHECK_OK(qmm_plan_call(&d, 256, 2560, 4096, &o, &p));
    CHECK(p.predicted_us > 0);
}

/* Refused: clusters that fit one wave (q at M = 16 in clusters of 2), no clusters (unsplit,
 * splits past the cluster limit, stream-K, the plan's own path), a value other than -1, 0, 1. */
static void refusals(void)
{
    const qmm_device_desc d = sm90();
    qmm_plan p;
    qmm_cuda_options o = clusters(2, 1);
    EXPECT_FAIL(qmm_plan_call(&d, 16, 4096, 2560, &o, &p), QMM_ERR_ARG);
    o = clusters(1, 1);
    EXPECT_FAIL(qmm_plan_call(&d, 256, 2560, 4096, &o, &p), QMM_ERR_ARG);
    o = clusters(10, 1); /* through the workspace already */
    EXPECT_FAIL(qmm_plan_call(&d, 256, 2560, 4096, &o, &p), QMM_ERR_ARG);
    o = clusters(0, 1);
    o.path = QMM_PATH_STREAMK;
    EXPECT_FAIL(qmm_plan_call(&d, 256, 2560, 4096, &o, &p), QMM_ERR_ARG);
    o.path = QMM_PATH_AUTO;
    EXPECT_FAIL(qmm_plan_call(&d, 256, 2560, 4096, &o, &p), QMM_ERR_ARG);
    o = clusters(3, 2);
    EXPECT_FAIL(qmm_plan_call(&d, 256, 2560, 4096, &o, &p), QMM_ERR_ARG);
    o = clusters(3, -2);
    EXPECT_FAIL(qmm_plan_call(&d, 256, 2560, 4096, &o, &p), QMM_ERR_ARG);
}

/* The plan's own choice. The shipped table (the H200's) sets no tiles aside; with an H100's
 * corrections (from 128-token tiles on, over at most two token tiles, NOTES.md row 230) exactly
 * o and down at 200 and 256 tokens take them (clusters of 3, the 40th tile split 8 ways), among
 * every Qwen3-4B projection at 128 / 200 / 256 / 384 / 512 tokens. Where the plan sets them it
 * is the forced plan of that split and predicted no slower than the plan without them
 * (rest = -1), which never sets them; the other block height's clusters never set them (o at
 * 128 tokens lost 12 % so). */
static void auto_choice(void)
{
    qmm_device_desc d = sm90();
    qmm_plan shipped;
    CHECK_OK(qmm_plan_call(&d, 256, 2560, 4096, NULL, &shipped));
    CHECK(shipped.rest_tiles == 0);
    qmm_tune_for_gpu(&d, "NVIDIA H100 80GB HBM3");
    CHECK(d.wgmma_rest_min_tile == 128);
    d.wgmma_rest_min_tile = -1;
    EXPECT_FAIL(qmm_plan_call(&d, 256, 2560, 4096, NULL, &shipped), QMM_ERR_ARG);
    d.wgmma_rest_min_tile = 128;
    static const struct {
        const char *name;
        int64_t n, k;
    } proj[] = {{"q", 4096, 2560}, {"k", 1024, 2560}, {"o", 2560, 4096}, {"gate", 9728, 2560}, {"down", 2560, 9728}};
    static const int64_t ms[] = {128, 200, 256, 384, 512};
    for (size_t i = 0; i < sizeof proj / sizeof proj[0]; i++)
        for (size_t j = 0; j < sizeof ms / sizeof ms[0]; j++) {
            qmm_plan p, forced, never;
            qmm_cuda_options o = qmm_cuda_options_default();
            CHECK_OK(qmm_plan_call(&d, ms[j], proj[i].n, proj[i].k, &o, &p));
            const int want = (ms[j] == 200 || ms[j] == 256) && (!strcmp(proj[i].name, "o") || !strcmp(proj[i].name, "down"));
            CHECKF(want ? p.rest_tiles == 1 && p.rest_split == 8 && p.split == 3 && p.tile_n == 128 : !p.rest_tiles,
                   "%s at %lld: split %d, %d tiles aside split %d", proj[i].name, (long long)ms[j], p.split,
                   p.rest_tiles, p.rest_split);
            o.rest = -1;
            CHECK_OK(qmm_plan_call(&d, ms[j], proj[i].n, proj[i].k, &o, &never));
            CHECK(never.rest_tiles == 0);
            if (!p.rest_tiles) continue;
            o = clusters(p.split, 1);
            o.rows = p.tile_n;
            CHECK_OK(qmm_plan_call(&d, ms[j], proj[i].n, proj[i].k, &o, &forced));
            CHECK(forced.rest_tiles == p.rest_tiles && forced.rest_split == p.rest_split &&
                  forced.blocks == p.blocks && forced.workspace_bytes == p.workspace_bytes);
            CHECK(p.predicted_us > 0 && (never.predicted_us < 0 || p.predicted_us <= never.predicted_us));
        }
    /* the other height (64-row blocks at 128 tokens): o in its clusters of 3 needs 120 CTAs of
     * 117 slots, and the model would price its pair at 9.9 µs against 10.7 for clusters of 5 */
    qmm_cuda_options o = clusters(3, 1);
    o.rows = 64;
    qmm_plan alt;
    CHECK_OK(qmm_plan_call(&d, 128, 2560, 4096, &o, &alt));
    CHECK(alt.rest_tiles == 1 && alt.tile_n == 64 && alt.predicted_us > 0);
    CHECK_OK(qmm_plan_call(&d, 128, 2560, 4096, NULL, &shipped));
    CHECK(shipped.rest_tiles == 0 && shipped.predicted_us > alt.predicted_us);
    /* other models' shapes: at 128 tokens Qwen3-14B's q (5120 → 5120) in clusters of 3 with one
     * tile aside and 8B's down (12288 → 4096) in clusters of 4 with two (measured −15 / −16 %);
     * beyond two token tiles none (14B's k, 5120 → 1024, at 384 tokens: the model would take
     * clusters of 5 with two tiles aside, which lost 53 % on 4B's k; k at 640 lost 14 % against
     * the dense path; NOTES.md row 230) */
    static const struct {
        int64_t m, n, k;
        int split, rest, ways;
    } more[] = {{128, 5120, 5120, 3, 1, 8}, {128, 4096, 12288, 4, 2, 6}, {384, 1024, 5120, 0, 0, 0},
                {640, 1024, 2560, 0, 0, 0}};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        qmm_plan p;
        CHECK_OK(qmm_plan_call(&d, more[i].m, more[i].n, more[i].k, NULL, &p));
        CHECKF(p.rest_tiles == more[i].rest && p.rest_split == more[i].ways &&
                   (!more[i].split || p.split == more[i].split),
               "M=%lld N=%lld K=%lld: split %d, %d tiles aside split %d", (long long)more[i].m,
               (long long)more[i].n, (long long)more[i].k, p.split, p.rest_tiles, p.rest_split);
    }
    /* what the bound refuses is a plan: 14B's k at 384 forced in clusters of 5 sets two aside */
    qmm_cuda_options o3 = clusters(5, 1);
    qmm_plan k384;
    CHECK_OK(qmm_plan_call(&d, 384, 1024, 5120, &o3, &k384));
    CHECK(k384.rest_tiles == 2 && k384.rest_split == 8);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, forced_rest, refusals, auto_choice);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
