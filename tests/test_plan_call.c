/* qmm_plan_call on the shipped tuning table: what qmm_cuda_matmul runs, decided on the CPU. */
#include <math.h>
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

/* the shipped table with the wgmma kernel left out: the tiled, split-K, dense family alone */
static qmm_device_desc sm90_tiled(void)
{
    qmm_device_desc d = sm90();
    d.wgmma_min_m = 0;
    d.dense_force_m = 0;
    return d;
}

/* Two pinned tables of `qmm plan --model qwen3-4b --policy device`, one row a projection.
 * tiled: at commit af3c3dd, before the tuning table and the wgmma kernel
 * (bench/results/2026-11-29-final/plan-device.txt), at M = 16, 32, 64, 128, 2048; the tiled
 * family of the shipped table (wgmma off) must reproduce it, but for one cell since session 27:
 * with the dense path's fitted time (8.6 µs at k M = 128, measured 9.2; the old constants said
 * 5.4) the tiled family's split-K model (7.8, measured 10.7: it is 20-27 % short at 10
 * partitions) wins there. Only qmm_plan_device plans the tiled family on this table.
 * deflt: the shipped default since the wgmma kernel (commits bae0d7b, 27ea9a0), at M = 1, 16,
 * 64, 384, 2048 (and ff0ed56: narrow outputs, N <= 1024, dense from M = 128): the matvec at
 * M = 1 (M = 2..8 back to the matvec after its rebuild, 2026-12-01), the wgmma kernel
 * from 9 to 384 tokens, 512 since session 14 (where the tiles do not fill the GPU in whole
 * waves: stream-K or, since session 6, split-K in clusters where the refit model predicts it
 * faster, and since session 14 the unsplit schedule likewise: q at M = 384; narrow outputs
 * dense from M = 257 until session 27, since then k at M = 384 in clusters of 2 of 64-row
 * blocks, 8.7 µs measured against the dense path's 9.9), the dense path beyond. Since session
 * 16 token tiles of 64 and 128 also take clusters of the other block height where the model
 * prefers them: o and down at M = 64 clusters of 5 in 128-row blocks (8.11 / 13.57 µs measured
 * against 10.35 / 16.44 for 64-row clusters of 2 and stream-K; NOTES.md row 114) until session
 * 37, whose 64-row tile of 64 tokens runs two CTAs a SM: o and down at M = 64 in its clusters of
 * 5 (200 CTAs), q in clusters of 3, k of 7 (NOTES.md row 199). Since session
 * 25 the 256-token tile, unsplit, takes q and gate at M = 2048, where its tiles fill the waves
 * (NOTES.md row 161), and since session 61 down at M = 2048 in stream-K (its fixup staged
 * through the ring, priced lower: row 269).
 * Cells path/split/predicted µs, or for the wgmma family path/split/CTAs x token tile x weight
 * rows. A change here is a change of what the GPU runs (the matvec's and the dense path's
 * predicted µs: their models, refit in session 27, NOTES row 165, test_perf_fit). */
static const int64_t tiled_tokens[5] = {16, 32, 64, 128, 2048}, deflt_tokens[5] = {1, 16, 64, 384, 2048};
static const struct {
    const char *proj;
    int64_t k, n;
    const char *tiled[5], *deflt[5];
} qwen3_4b[] = {
    {"q", 2560, 4096, {"splitk/10/5.4", "splitk/10/6.1", "splitk/5/12.2", "splitk/4/15.2", "dense/1/66.3"},
     {"matvec/1/4.1", "wgmma/5/320x16x64", "wgmma/3/192x64x64", "wgmma/1/96x128x128", "wgmma/1/256x256x128"}},
    {"k", 2560, 1024, {"splitk/10/4.9", "splitk/10/5.1", "splitk/10/7.1", "splitk/10/7.8", "dense/1/20.2"},
     {"matvec/1/2.6", "wgmma/7/112x16x64", "wgmma/7/112x64x64", "wgmma/2/96x128x64", "dense/1/20.2"}},
    {"o", 4096, 2560, {"splitk/16/5.4", "splitk/16/6.1", "splitk/8/12.2", "dense/1/19.1", "dense/1/66.3"},
     {"matvec/1/4.1", "wgmma/8/320x16x64", "wgmma/5/200x64x64", "wgmma/2/120x128x128", "dense/1/66.3"}},
    {"gate", 2560, 9728, {"splitk/4/9.6", "splitk/4/10.2", "splitk/2/25.4", "dense/1/38.4", "dense/1/150.7"},
     {"matvec/1/6.7", "wgmma/2/304x16x64", "wgmma/3/228x64x128", "wgmma/1/228x128x128", "wgmma/1/608x256x128"}},
    {"down", 9728, 2560, {"splitk/4/28.5", "splitk/4/28.6", "splitk/4/44.7", "dense/1/38.4", "dense/1/150.7"},
     {"matvec/1/6.7", "wgmma/8/320x16x64", "wgmma/5/200x64x64", "wgmma/2/120x128x128", "streamk/1/132x256x128"}},
};

/* Every row of the table under d: the tiled columns (deflt = 0) or the default ones. */
static void check_pinned(const qmm_device_desc *d, int deflt)
{
    const int64_t *tokens = deflt ? deflt_tokens : tiled_tokens;
    for (size_t i = 0; i < sizeof qwen3_4b / sizeof qwen3_4b[0]; i++)
        for (int t = 0; t < 5; t++) {
            qmm_plan p;
            CHECK_OK(qmm_plan_call(d, tokens[t], qwen3_4b[i].n, qwen3_4b[i].k, NULL, &p));
            char got[64];
            if (p.path == QMM_PATH_WGMMA || p.path == QMM_PATH_STREAMK)
                snprintf(got, sizeof got, "%s/%d/%lldx%dx%d", qmm_path_name(p.path), p.split,
                         (long long)p.blocks, p.tile_m, p.tile_n);
            else
                snprintf(got, sizeof got, "%s/%d/%.1f", qmm_path_name(p.path), p.split, p.predicted_us);
            const char *want = deflt ? qwen3_4b[i].deflt[t] : qwen3_4b[i].tiled[t];
            CHECKF(!strcmp(got, want), "%s M=%lld: %s, want %s", qwen3_4b[i].proj,
                   (long long)tokens[t], got, want);
        }
}

static void qwen3_4b_tiled_table(void)
{
    qmm_device_desc d = sm90_tiled();
    CHECK(!strcmp(d.family, "sm90") && d.gpu.sms == 132);
    check_pinned(&d, 0);
    /* decode: the matvec up to M = 8, as the seed rule */
    for (int64_t m = 1; m <= 9; m++) {
        qmm_plan p;
        CHECK_OK(qmm_plan_call(&d, m, 4096, 2560, NULL, &p));
        CHECK((p.path == QMM_PATH_MATVEC) == (m <= 8));
    }
}

static void qwen3_4b_default_table(void)
{
    qmm_device_desc d = sm90();
    CHECK(d.wgmma_min_m == 9 && d.wgmma_max_m == 512 && d.dense_force_m == 0);
    CHECK(d.wgmma_wide_min_m == 1024);
    CHECK(d.dense_narrow_n == 0); /* k/v at M = 257…512 take the wgmma kernel since session 27 */
    check_pinned(&d, 1);
}

/* Clusters of the other block height (NOTES.md rows 112, 114): the auto plan takes them where
 * the model prefers them; a forced split keeps the rule's height, and the two share partitions
 * (gpu_sm90's other-height cases check them bitwise on the GPU). At 64 tokens the 128-row
 * clusters are no longer planned for these shapes (NOTES.md row 199). */
static void other_block_height(void)
{
    qmm_device_desc d = sm90();
    static const struct {
        int64_t m, n, k;
        int split, tokens, rows, rule_rows;
    } cells[] = {
        {128, 1024, 2560, 5, 128, 64, 128}, /* k at M = 128 */
        {128, 4096, 2560, 2, 128, 64, 128}, /* q at M = 128 */
    };
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
        qmm_plan p, f;
        CHECK_OK(qmm_plan_call(&d, cells[i].m, cells[i].n, cells[i].k, NULL, &p));
        CHECKF(p.path == QMM_PATH_WGMMA && p.split == cells[i].split && p.tile_m == cells[i].tokens &&
                   p.tile_n == cells[i].rows && p.workspace_bytes == 0,
               "M=%lld N=%lld: %s split %d tile %dx%d", (long long)cells[i].m, (long long)cells[i].n,
               qmm_path_name(p.path), p.split, p.tile_m, p.tile_n);
        qmm_cuda_options o = qmm_cuda_options_default();
        o.path = QMM_PATH_WGMMA, o.split = cells[i].split;
        CHECK_OK(qmm_plan_call(&d, cells[i].m, cells[i].n, cells[i].k, &o, &f));
        CHECK(f.split == p.split && f.tile_m == p.tile_m && f.tile_n == cells[i].rule_rows &&
              f.k_per_split == p.k_per_split);
    }
}

/* The 32-token tile's other height (128 weight rows, two CTAs a SM; NOTES.md row 204): the H100's
 * correction of the table weighs it in clusters (the H200's not yet: unmeasured there). Since
 * the 64-row blocks run three CTAs a SM (NOTES.md row 213) their clusters of 5-8 fit one wave and
 * the model takes them at 25-32 tokens on both GPUs; 17-24 tokens take the 24-token tile, which
 * has one height. The options' rows force either height, and only a tile that has the other. */
static void other_block_height_32(void)
{
    qmm_device_desc d = sm90(), h100 = d, generic = d;
    CHECK(d.wgmma_alt_min_tile == 64);
    qmm_tune_for_gpu(&h100, "NVIDIA H100 80GB HBM3");
    CHECK(h100.wgmma_alt_min_tile == 32);
    qmm_tune_for_gpu(&d, "NVIDIA H200");
    CHECK(d.wgmma_alt_min_tile == 64);
    CHECK_OK(qmm_tune_desc(8, 9, 0, &generic));
    qmm_tune_for_gpu(&generic, "NVIDIA H100 80GB HBM3");
    CHECK(generic.wgmma_alt_min_tile == 64); /* another family's table: untouched */
    qmm_device_desc pcie;
    CHECK_OK(qmm_tune_desc(9, 0, 114, &pcie));
    qmm_tune_for_gpu(&pcie, "NVIDIA H100 PCIe"); /* 114 SMs: not the part measured */
    CHECK(pcie.wgmma_alt_min_tile == 64);
    qmm_plan p, q;
    /* gate at 32 tokens: 64-row clusters of 2 (304 CTAs of the 396 three a SM give) on both
     * GPUs, where the H200 ran stream-K and the H100 128-row clusters of 3 (8.7 µs against 9.1
     * for these: the model's pick, 4 % behind; NOTES.md row 213) */
    CHECK_OK(qmm_plan_call(&d, 32, 9728, 2560, NULL, &p));
    CHECK_OK(qmm_plan_call(&h100, 32, 9728, 2560, NULL, &q));
    CHECKF(p.path == QMM_PATH_WGMMA && p.split == 2 && p.tile_m == 32 && p.tile_n == 64 &&
               p.blocks == 152 * 2 && p.workspace_bytes == 0 && q.config == p.config && q.split == 2,
           "gate M=32: %s split %d tile %dx%d, %lld CTAs", qmm_path_name(p.path), p.split, p.tile_m,
           p.tile_n, (long long)p.blocks);
    /* q, o, down at 17-32 tokens: 64-row clusters (24- and 32-token tiles) in one wave, as the
     * H200 plans them */
    static const int64_t taller[][2] = {{4096, 2560}, {2560, 4096}, {2560, 9728}}; /* q, o, down */
    for (int i = 0; i < 3; i++)
        for (int64_t m = 17; m <= 32; m += 15) {
            CHECK_OK(qmm_plan_call(&h100, m, taller[i][0], taller[i][1], NULL, &p));
            CHECK_OK(qmm_plan_call(&d, m, taller[i][0], taller[i][1], NULL, &q));
            CHECKF(p.path == QMM_PATH_WGMMA && p.split >= 5 && p.tile_m == (m <= 24 ? 24 : 32) &&
                       p.tile_n == 64 && p.config == q.config && p.split == q.split,
                   "N=%lld M=%lld: %s split %d tile %dx%d", (long long)taller[i][0], (long long)m,
                   qmm_path_name(p.path), p.split, p.tile_m, p.tile_n);
        }
    CHECK_OK(qmm_plan_call(&h100, 32, 4096, 2560, NULL, &p)); /* q: 320 CTAs in 345 slots */
    CHECKF(p.split == 5 && p.blocks == 320 && p.tile_n == 64, "q M=32: split %d, %lld CTAs", p.split,
           (long long)p.blocks);
    /* a clustered launch leaves a slot of the occupancy count free (NOTES.md row 207: q at 32
     * tokens in 224 of 224 slots ran 1.0-1.2 µs above the model): with clusters of 5 given
     * exactly q's 320 CTAs, AUTO takes another size */
    qmm_device_desc tight = h100;
    tight.wgmma_cluster_ctas[p.config][5] = 320;
    CHECK_OK(qmm_plan_call(&tight, 32, 4096, 2560, NULL, &q));
    CHECKF(q.split != 5 || q.tile_n != 64, "q M=32 with 320 slots: split %d, %lld CTAs", q.split,
           (long long)q.blocks);
    CHECK_OK(qmm_plan_call(&h100, 32, 1024, 2560, NULL, &p)); /* k keeps 64-row clusters */
    CHECK(p.path == QMM_PATH_WGMMA && p.tile_n == 64);
    for (int i = 0; i < 3; i++) /* 33-64 tokens: q, o, down as the H200 plans (gate: paired_64) */
        for (int64_t m = 33; m <= 64; m += 31 - 15 * (m == 33)) { /* 33, 49, 64 */
            CHECK_OK(qmm_plan_call(&h100, m, taller[i][0], taller[i][1], NULL, &p));
            CHECK_OK(qmm_plan_call(&d, m, taller[i][0], taller[i][1], NULL, &q));
            CHECK(p.path == q.path && p.split == q.split && p.config == q.config && p.tile_n == q.tile_n &&
                  p.tile_m == (m <= 48 ? 48 : 64));
        }
    /* forced heights */
    qmm_cuda_options o = qmm_cuda_options_default();
    o.path = QMM_PATH_WGMMA, o.split = 3, o.rows = 128;
    CHECK_OK(qmm_plan_call(&d, 32, 9728, 2560, &o, &p));
    CHECK(p.tile_m == 32 && p.tile_n == 128 && p.split == 3 && p.blocks == 76 * 3 && p.stages == 4);
    o.rows = 64;
    CHECK_OK(qmm_plan_call(&h100, 32, 9728, 2560, &o, &p));
    CHECK(p.tile_n == 64 && p.split == 3 && p.blocks == 152 * 3);
    o.rows = 128, o.split = 1;
    CHECK_OK(qmm_plan_call(&d, 30, 1000, 1280, &o, &p)); /* unsplit, ragged */
    CHECK(p.tile_n == 128 && p.split == 1 && p.blocks == 8);
    EXPECT_FAIL(qmm_plan_call(&d, 16, 9728, 2560, &o, &p), QMM_ERR_ARG); /* 16 tokens: one height */
    EXPECT_FAIL(qmm_plan_call(&d, 24, 9728, 2560, &o, &p), QMM_ERR_ARG); /* and 24, 48 */
    EXPECT_FAIL(qmm_plan_call(&d, 48, 9728, 2560, &o, &p), QMM_ERR_ARG);
    o.rows = 96;
    EXPECT_FAIL(qmm_plan_call(&d, 32, 9728, 2560, &o, &p), QMM_ERR_ARG);
    o.rows = 128, o.split = 0;
    EXPECT_FAIL(qmm_plan_call(&d, 32, 9728, 2560, &o, &p), QMM_ERR_ARG); /* a split is forced */
    o.path = QMM_PATH_AUTO;
    EXPECT_FAIL(qmm_plan_call(&d, 32, 9728, 2560, &o, &p), QMM_ERR_ARG);
    d.wgmma_alt_min_tile = -1;
    EXPECT_FAIL(qmm_plan_call(&d, 32, 9728, 2560, NULL, &p), QMM_ERR_ARG);
    d.wgmma_alt_min_tile = 48; /* not a token tile with two heights */
    EXPECT_FAIL(qmm_plan_call(&d, 32, 9728, 2560, NULL, &p), QMM_ERR_ARG);
    d.wgmma_alt_min_tile = 0; /* never */
    CHECK_OK(qmm_plan_call(&d, 64, 4096, 2560, NULL, &p));
}

/* The 64-token tile's 128-row blocks two CTAs a SM (the table's row 9; NOTES.md rows 206, 208,
 * 219): weighed in clusters where the rule's blocks are 128 rows (gate/up of Qwen3-4B at 49-64
 * tokens: clusters of 3, 228 CTAs, instead of stream-K; 33-48 take the 48-token tile), never for
 * 64-row outputs (q, o, down, k), and only where the table has its cluster counts (both GPUs'
 * since session 43; a table's -1 says its clusters do not fit: stream-K again). */
static void paired_64(void)
{
    const qmm_device_desc d = sm90();
    qmm_device_desc h100 = d;
    qmm_tune_for_gpu(&h100, "NVIDIA H100 80GB HBM3");
    int tn = 0, wg = 0, stages = 0;
    CHECK(qmm_sm90_config(QMM_SM90_PAIRED_64, &tn, &wg, &stages) && tn == 64 && wg == 2 && stages == 4 &&
          qmm_sm90_blocks_per_sm(QMM_SM90_PAIRED_64) == 2);
    for (int s = 2; s <= QMM_SM90_MAX_CLUSTER; s++)
        CHECK(qmm_sm90_cluster_slots(&d, QMM_SM90_PAIRED_64, s) > 0 &&
              qmm_sm90_cluster_slots(&h100, QMM_SM90_PAIRED_64, s) ==
                  qmm_sm90_cluster_slots(&d, QMM_SM90_PAIRED_64, s));
    qmm_device_desc unmeasured = d;
    for (int s = 2; s <= QMM_SM90_MAX_CLUSTER; s++) unmeasured.wgmma_cluster_ctas[QMM_SM90_PAIRED_64][s] = -1;
    qmm_plan p;
    for (int64_t m = 33; m <= 48; m += 15) { /* the 48-token tile's 64-row clusters of 2 */
        CHECK_OK(qmm_plan_call(&h100, m, 9728, 2560, NULL, &p));
        CHECKF(p.path == QMM_PATH_WGMMA && p.tile_m == 48 && p.tile_n == 64 && p.split == 2 &&
                   p.blocks == 152 * 2,
               "H100 gate M=%lld: %s config %d split %d, %lld CTAs", (long long)m, qmm_path_name(p.path),
               p.config, p.split, (long long)p.blocks);
    }
    for (int64_t m = 49; m <= 64; m += 15) {
        for (int gpu = 0; gpu < 2; gpu++) { /* gate */
            CHECK_OK(qmm_plan_call(gpu ? &h100 : &d, m, 9728, 2560, NULL, &p));
            CHECKF(p.path == QMM_PATH_WGMMA && p.config == QMM_SM90_PAIRED_64 && p.split == 3 &&
                       p.blocks == 76 * 3 && p.tile_m == 64 && p.tile_n == 128 && p.stages == 4 &&
                       p.workspace_bytes == 0,
                   "%s gate M=%lld: %s config %d split %d, %lld CTAs", gpu ? "H100" : "H200", (long long)m,
                   qmm_path_name(p.path), p.config, p.split, (long long)p.blocks);
        }
        CHECK_OK(qmm_plan_call(&unmeasured, m, 9728, 2560, NULL, &p)); /* no counts: stream-K, one a SM */
        CHECK(p.path == QMM_PATH_STREAMK && p.config != QMM_SM90_PAIRED_64 && p.tile_n == 128);
    }
    static const int64_t narrow[][2] = {{4096, 2560}, {1024, 2560}, {2560, 4096}, {2560, 9728}};
    for (int i = 0; i < 4; i++) { /* q, k, o, down: 64-row blocks by the rule */
        CHECK_OK(qmm_plan_call(&h100, 64, narrow[i][0], narrow[i][1], NULL, &p));
        CHECK(p.config != QMM_SM90_PAIRED_64 && p.tile_n == 64);
    }
    CHECK_OK(qmm_plan_call(&h100, 32, 9728, 2560, NULL, &p)); /* 32 tokens: row 205's row */
    CHECK(p.config != QMM_SM90_PAIRED_64 && p.tile_m == 32);
    /* the request itself */
    CHECK_OK(qmm_plan_sm90(64, 9728, 2560, 132, 1024, QMM_SM90_SPLIT_PAIRED, 4, &p));
    CHECK(p.config == QMM_SM90_PAIRED_64 && p.blocks == 76 * 4 && p.split == 4 && p.tile_n == 128);
    CHECK_OK(qmm_plan_sm90(50, 1000, 1280, 132, 1024, QMM_SM90_SPLIT_PAIRED, 1, &p)); /* ragged */
    CHECK(p.config == QMM_SM90_PAIRED_64 && p.blocks == 8 && p.split == 1);
    EXPECT_FAIL(qmm_plan_sm90(32, 9728, 2560, 132, 1024, QMM_SM90_SPLIT_PAIRED, 3, &p), QMM_ERR_ARG);
    EXPECT_FAIL(qmm_plan_sm90(48, 9728, 2560, 132, 1024, QMM_SM90_SPLIT_PAIRED, 3, &p), QMM_ERR_ARG);
    EXPECT_FAIL(qmm_plan_sm90(65, 9728, 2560, 132, 1024, QMM_SM90_SPLIT_PAIRED, 3, &p), QMM_ERR_ARG);
}

/* Long prompts (NOTES.md row 173): beyond the table's wgmma range (M > wgmma_max_m) AUTO takes
 * the faster predicted of the wgmma kernel's own plan (path WGMMA, split 0: 128-token tiles, 256
 * from wgmma_wide_min_m, where the 128-token tile's one wave of clusters of 128-row blocks is
 * weighed too: rows 251, 254) and the dense path, the kernel on a tie; dense_force_m, where a
 * table sets it, still says dense. Forced splits of the 256-token tile go through the workspace
 * (no clusters). */
static void long_prompts(void)
{
    qmm_device_desc d = sm90(), narrow = d;
    narrow.wgmma_wide_min_m = 0;
    static const int64_t ms[] = {513, 640, 768, 1000, 1023, 1024, 1536, 2048, 3000, 4096, 8192};
    static const int64_t shapes[][2] = {{2560, 4096}, {2560, 1024}, {4096, 2560},
                                        {2560, 9728}, {9728, 2560}, {2560, 6144}}; /* K, N */
    qmm_cuda_options family = qmm_cuda_options_default(), dense = family;
    family.path = QMM_PATH_WGMMA, dense.path = QMM_PATH_DENSE;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
            const int64_t m = ms[i], k = shapes[s][0], n = shapes[s][1];
            qmm_plan p, w, dn, c;
            CHECK_OK(qmm_plan_call(&d, m, n, k, NULL, &p));
            CHECK_OK(qmm_plan_call(&d, m, n, k, &family, &w));
            CHECK_OK(qmm_plan_call(&d, m, n, k, &dense, &dn));
            CHECK(w.predicted_us > 0 && dn.predicted_us > 0);
            CHECK(w.tile_m == (m < d.wgmma_wide_min_m ? 128 : 256));
            CHECK_OK(qmm_plan_call(&narrow, m, n, k, &family, &c)); /* the 128-token tile's plan */
            if (m >= d.wgmma_wide_min_m && c.path == QMM_PATH_WGMMA && c.tile_n == 128 &&
                c.split > 1 && !c.workspace_bytes && !c.rest_tiles &&
                c.predicted_us < w.predicted_us * 0.999)
                w = c; /* one wave of clusters of 128-row blocks (no workspace): weighed from the
                        * wide tile on */
            CHECKF(test_plan_equal(&p, w.predicted_us <= dn.predicted_us ? &w : &dn),
                   "M=%lld N=%lld K=%lld: %s %.1f µs, kernel %.1f, dense %.1f", (long long)m,
                   (long long)n, (long long)k, qmm_path_name(p.path), p.predicted_us, w.predicted_us,
                   dn.predicted_us);
        }
    /* the shipped table's choices on the Qwen3-4B cells measured in session 30 (NOTES.md row 173,
     * bench/results/2026-12-05-session30/r1-long-prompts/, two passes, µs) */
    static const struct {
        int64_t m, n, k;
        qmm_path path;
        int tokens;
    } cells[] = {
        {640, 2560, 9728, QMM_PATH_STREAMK, 128}, /* down: 55.7 / 55.7 against dense 66.2 / 66.3 */
        {768, 2560, 4096, QMM_PATH_WGMMA, 128},   /* o: 27.4 / 27.5 against 32.6 / 32.6 */
        {640, 4096, 2560, QMM_PATH_STREAMK, 128}, /* q: 26.0 / 26.0 against 27.8 / 27.9 */
        {513, 1024, 2560, QMM_PATH_DENSE, 0},     /* k: 10.5 against the kernel's 11.9 */
        {1024, 4096, 2560, QMM_PATH_WGMMA, 256},  /* q */
        {1024, 9728, 2560, QMM_PATH_STREAMK, 256}, /* gate */
        {1024, 2560, 9728, QMM_PATH_STREAMK, 256}, /* down: 81.5 / 80.4 against 92.5 / 87.3 */
        {2048, 4096, 2560, QMM_PATH_WGMMA, 256},  /* q */
        {2048, 9728, 2560, QMM_PATH_WGMMA, 256},  /* gate */
        {2048, 2560, 9728, QMM_PATH_STREAMK, 256}, /* down: since the staged fixup (row 269) */
        {1024, 2560, 4096, QMM_PATH_STREAMK, 256}, /* o: the same */
        {2048, 2560, 4096, QMM_PATH_DENSE, 0},     /* o */
        {2048, 1024, 2560, QMM_PATH_DENSE, 0},     /* k */
        {1024, 1024, 2560, QMM_PATH_WGMMA, 128},   /* k: clusters of 2, as at 1 023 (row 251) */
        {1025, 1024, 2560, QMM_PATH_DENSE, 0},     /* k: 72 tiles in pairs exceed one wave */
        {1024, 512, 2560, QMM_PATH_DENSE, 0},      /* k of a rank at t = 2: not the 64-row
                                                    * blocks' clusters, untimed there */
    };
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
        qmm_plan p;
        CHECK_OK(qmm_plan_call(&d, cells[i].m, cells[i].n, cells[i].k, NULL, &p));
        CHECKF(p.path == cells[i].path && (p.path == QMM_PATH_DENSE || p.tile_m == cells[i].tokens),
               "M=%lld N=%lld K=%lld: %s split %d tile %dx%d", (long long)cells[i].m,
               (long long)cells[i].n, (long long)cells[i].k, qmm_path_name(p.path), p.split, p.tile_m,
               p.tile_n);
    }
    /* a table's dense_force_m still says dense */
    qmm_device_desc forced_dense = d;
    forced_dense.dense_force_m = 513;
    qmm_plan fd;
    CHECK_OK(qmm_plan_call(&forced_dense, 640, 2560, 9728, NULL, &fd));
    CHECK(fd.path == QMM_PATH_DENSE);
    /* forced: 128 tokens below the threshold, 256 from it; a split of 3 through the workspace */
    qmm_cuda_options o = qmm_cuda_options_default();
    o.path = QMM_PATH_WGMMA, o.split = 3;
    qmm_plan f;
    CHECK_OK(qmm_plan_call(&d, 1023, 2560, 9728, &o, &f));
    CHECK(f.tile_m == 128 && f.split == 3 && f.workspace_bytes == 0); /* clusters of 3 */
    CHECK_OK(qmm_plan_call(&d, 1024, 2560, 9728, &o, &f));
    CHECK(f.path == QMM_PATH_WGMMA && f.tile_m == 256 && f.split == 3 && f.blocks == 4 * 20 * 3 &&
          f.workspace_bytes == (size_t)f.blocks * 2 * 256 * 128 * 4);
    /* a description without the wide tile: 128-token tiles throughout; a bad one is refused */
    d.wgmma_wide_min_m = 0;
    CHECK_OK(qmm_plan_call(&d, 2048, 4096, 2560, &o, &f));
    CHECK(f.tile_m == 128);
    CHECK_OK(qmm_plan_call(&d, 2048, 4096, 2560, &family, &f));
    CHECK(f.tile_m == 128);
    d.wgmma_wide_min_m = -1;
    CHECK(qmm_plan_call(&d, 2048, 4096, 2560, NULL, &f) == QMM_ERR_ARG);
    /* a table without the dense path keeps the kernel */
    d = sm90();
    d.dense_tflops = 0;
    CHECK_OK(qmm_plan_call(&d, 2048, 2560, 9728, NULL, &f));
    CHECK(f.path == QMM_PATH_WGMMA || f.path == QMM_PATH_STREAMK);
    /* a table whose wide tile starts inside its wgmma range (256 <= wgmma_max_m) weighs the
     * 128-token tile's clusters there too: AUTO is the family's plan or those clusters, the
     * faster predicted (q and o at 256 tokens, o and down at 384 take clusters of 2 of 128-token
     * tiles, predicted 13.3-36.1 µs against the 256-token tile's 23.2-49.5) */
    d = sm90();
    d.wgmma_wide_min_m = 256;
    qmm_device_desc narrow_d = d;
    narrow_d.wgmma_wide_min_m = 0;
    int took_clusters = 0;
    static const int64_t in_range[] = {256, 384, 512};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t i = 0; i < sizeof in_range / sizeof in_range[0]; i++) {
            const int64_t m = in_range[i], k = shapes[s][0], n = shapes[s][1];
            qmm_plan p, w, c;
            CHECK_OK(qmm_plan_call(&d, m, n, k, NULL, &p));
            CHECK_OK(qmm_plan_call(&d, m, n, k, &family, &w));
            CHECK(w.tile_m == 256);
            CHECK_OK(qmm_plan_call(&narrow_d, m, n, k, &family, &c));
            const int clusters = c.path == QMM_PATH_WGMMA && c.tile_n == 128 && c.split > 1 &&
                                 !c.workspace_bytes && !c.rest_tiles &&
                                 c.predicted_us < w.predicted_us * 0.999;
            took_clusters += clusters;
            CHECKF(test_plan_equal(&p, clusters ? &c : &w), "wide from 256, M=%lld N=%lld K=%lld: %s %dx%d split %d",
                   (long long)m, (long long)n, (long long)k, qmm_path_name(p.path), p.tile_m, p.tile_n, p.split);
        }
    CHECK(took_clusters > 0);
}

/* The plan is complete: configuration, stages and workspace are what the kernels will use. */
static void plan_fields(void)
{
    qmm_device_desc d = sm90_tiled(), wg = sm90();
    static const int64_t ms[] = {1, 8, 9, 16, 32, 33, 64, 65, 128, 300, 2048};
    static const int64_t shapes[][2] = {{2560, 4096}, {2560, 1024}, {9728, 2560}, {128, 1}, {256, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
            int64_t m = ms[i], k = shapes[s][0], n = shapes[s][1];
            qmm_plan p, dev;
            memset(&p, 0x5A, sizeof p);
            CHECK_OK(qmm_plan_call(&d, m, n, k, NULL, &p));
            CHECK_OK(qmm_plan_device(m, n, k, &wg, &dev)); /* the tiled family's policy */
            CHECK(test_plan_equal(&p, &dev));
            qmm_plan w;
            CHECK_OK(qmm_plan_call(&wg, m, n, k, NULL, &w)); /* the default: the wgmma kernel */
            int tn = 0, wgs = 0, stages = 0;
            /* the table's M range, and beyond it (long_prompts) the kernel unless the dense path
             * is predicted faster */
            int wg_m = m > wg.wgmma_max_m ? w.path != QMM_PATH_DENSE
                                          : m >= wg.wgmma_min_m &&
                                                !(n <= wg.dense_narrow_n && m >= wg.dense_narrow_m);
            CHECK(wg_m == (w.path == QMM_PATH_WGMMA || w.path == QMM_PATH_STREAMK));
            if (wg_m) {
                CHECK(qmm_sm90_config(w.config, &tn, &wgs, &stages) && w.tile_m == tn &&
                      w.tile_n == 64 * wgs && w.stages == stages);
                /* unsplit; split-K in clusters (whole groups, no workspace, one wave of the
                 * clusters the GPU holds); or stream-K (one wave, two partial slots a CTA) */
                const int64_t tiles = (m + tn - 1) / tn * ((n + 64 * wgs - 1) / (64 * wgs));
                CHECK((w.path == QMM_PATH_WGMMA && w.split == 1 && w.workspace_bytes == 0) ||
                      (w.path == QMM_PATH_WGMMA && w.split >= 2 && w.split <= QMM_MAX_WGMMA_CLUSTER &&
                       w.split <= k / 128 && w.blocks == tiles * w.split && w.workspace_bytes == 0 &&
                       w.blocks <= wg.wgmma_cluster_ctas[w.config][w.split]) ||
                      (w.path == QMM_PATH_STREAMK &&
                       w.blocks <= (int64_t)wg.gpu.sms * qmm_sm90_blocks_per_sm(w.config) &&
                       w.workspace_bytes == (size_t)w.blocks * 2 * (size_t)(w.tile_m * w.tile_n) * 4));
            } else {
                CHECK(w.path == (m <= wg.matvec_max_m ? QMM_PATH_MATVEC : QMM_PATH_DENSE)); /* the table's ends */
            }
            CHECK(p.split >= 1 && p.k_per_split * (int64_t)p.split == k && p.predicted_us > 0);
            switch (p.path) {
            case QMM_PATH_MATVEC:
                CHECK(m <= d.matvec_max_m && p.workspace_bytes == 0 && p.stages == 0);
                break;
            case QMM_PATH_TILED:
            case QMM_PATH_SPLITK: {
                const qmm_tile_config *c = &d.config[p.config];
                CHECK(m <= c->max_m || p.config == d.config_count - 1);
                CHECK(p.config == 0 || m > d.config[p.config - 1].max_m);
                CHECK(p.tile_m == c->tile_m && p.tile_n == c->tile_n && p.stages == c->stages);
                size_t ws = p.path == QMM_PATH_SPLITK ? (size_t)p.split * m * n * 2 : 0;
                CHECKF(p.workspace_bytes == ws, "M=%lld N=%lld: %zu bytes, want %zu", (long long)m,
                       (long long)n, p.workspace_bytes, ws);
                break;
            }
            case QMM_PATH_DENSE:
                CHECK(m >= d.dense_min_m && p.split == 1 && p.stages == 0);
                CHECK(p.workspace_bytes >= (size_t)n * k * 2 + ((size_t)32 << 20));
                break;
            default:
                CHECKF(0, "path %s", qmm_path_name(p.path));
            }
        }
}

/* Forced paths and options: what the benchmarks and tests ask for. */
static void forced(void)
{
    qmm_device_desc d = sm90_tiled();
    qmm_cuda_options o = qmm_cuda_options_default();
    qmm_plan p;

    o.path = QMM_PATH_TILED; /* the unsplit control at a shape the policy splits */
    CHECK_OK(qmm_plan_call(&d, 32, 1024, 2560, &o, &p));
    CHECK(p.path == QMM_PATH_TILED && p.split == 1 && p.workspace_bytes == 0 && p.config == 0);
    o.stages = 3;
    CHECK_OK(qmm_plan_call(&d, 32, 1024, 2560, &o, &p));
    CHECK(p.stages == 3);

    o = qmm_cuda_options_default();
    o.path = QMM_PATH_SPLITK;
    o.split = 4;
    o.partial_type = QMM_F32;
    CHECK_OK(qmm_plan_call(&d, 100, 1000, 2560, &o, &p));
    CHECK(p.path == QMM_PATH_SPLITK && p.split == 4 && p.k_per_split == 640 && p.config == 2);
    CHECK(p.workspace_bytes == (size_t)4 * 100 * 1000 * 4);
    o.split = 3; /* 20 groups do not split in 3 */
    CHECK_STATUS(qmm_plan_call(&d, 100, 1000, 2560, &o, &p), QMM_ERR_ARG);

    o = qmm_cuda_options_default();
    o.split = 1; /* AUTO held at split 1 */
    CHECK_OK(qmm_plan_call(&d, 32, 1024, 2560, &o, &p));
    CHECK(p.path == QMM_PATH_TILED && p.split == 1);

    o = qmm_cuda_options_default();
    o.path = QMM_PATH_MATVEC;
    CHECK_OK(qmm_plan_call(&d, 16, 1024, 2560, &o, &p)); /* the kernel's limit, beyond the policy's */
    CHECK(p.path == QMM_PATH_MATVEC);
    CHECK_STATUS(qmm_plan_call(&d, 17, 1024, 2560, &o, &p), QMM_ERR_ARG);

    o.path = QMM_PATH_DENSE;
    CHECK_OK(qmm_plan_call(&d, 1, 1024, 2560, &o, &p));
    CHECK(p.path == QMM_PATH_DENSE && p.workspace_bytes == (size_t)1024 * 2560 * 2 + 256 + (32u << 20));

    /* the wgmma kernel, forced or by default */
    d = sm90();
    o = qmm_cuda_options_default();
    o.split = 1; /* AUTO held at split 1: the unsplit wgmma kernel */
    CHECK_OK(qmm_plan_call(&d, 32, 1024, 2560, &o, &p));
    CHECK(p.path == QMM_PATH_WGMMA && p.split == 1 && p.workspace_bytes == 0);
    o.path = QMM_PATH_WGMMA;
    o.split = 4; /* a cluster's split sums in distributed shared memory: no workspace */
    CHECK_OK(qmm_plan_call(&d, 32, 1024, 2560, &o, &p));
    CHECK(p.path == QMM_PATH_WGMMA && p.split == 4 && p.workspace_bytes == 0);
    o.split = 10; /* beyond a cluster: the partials go through the workspace */
    CHECK_OK(qmm_plan_call(&d, 32, 1024, 2560, &o, &p));
    CHECK(p.path == QMM_PATH_WGMMA && p.split == 10 && p.workspace_bytes > 0);
    /* a GPU whose clusters of 4 do not fit: the forced split is refused, AUTO never plans it */
    qmm_device_desc small = d;
    for (int c = 0; c < QMM_MAX_WGMMA_CONFIGS; c++) small.wgmma_cluster_ctas[c][4] = -1;
    o.split = 4;
    CHECK_STATUS(qmm_plan_call(&small, 32, 1024, 2560, &o, &p), QMM_ERR_ARG);
    for (int64_t m = 9; m <= 384; m += 7) {
        CHECK_OK(qmm_plan_call(&small, m, 4096, 2560, NULL, &p));
        CHECK(!(p.path == QMM_PATH_WGMMA && p.split == 4));
    }
    o.path = QMM_PATH_STREAMK;
    o.split = 0;
    CHECK_OK(qmm_plan_call(&d, 2048, 4096, 2560, &o, &p));
    CHECK(p.path == QMM_PATH_STREAMK && p.blocks >= 1 && p.workspace_bytes > 0);
    o = qmm_cuda_options_default();
    o.path = QMM_PATH_TILED; /* forcing a tiled path still plans the tiled kernel */
    CHECK_OK(qmm_plan_call(&d, 32, 1024, 2560, &o, &p));
    CHECK(p.path == QMM_PATH_TILED && p.config == 0);
    d = sm90_tiled();

    /* the seed policy: the reference rule's split, our tiles, no prediction */
    o = qmm_cuda_options_default();
    o.policy = QMM_POLICY_SEED;
    CHECK_OK(qmm_plan_call(&d, 16, 1024, 2560, &o, &p));
    CHECK(p.path == QMM_PATH_SPLITK && p.split == 10 && p.predicted_us < 0 && p.config == 0);
    CHECK(p.tile_m == 32 && p.tile_n == 64);
}

static void generic_gpu(void)
{
    qmm_device_desc d;
    CHECK_OK(qmm_tune_desc(8, 9, 76, &d)); /* a GPU the table does not know: planned, not tuned */
    CHECK(!strcmp(d.family, "generic") && d.gpu.sms == 76 && d.dense_tflops == 0);
    qmm_plan p;
    CHECK_OK(qmm_plan_call(&d, 2048, 4096, 2560, NULL, &p));
    CHECK(p.path == QMM_PATH_TILED);
}

/* Every group size plans exactly as groups of 128 (group 0 = 128), on every family and policy
 * (the matvec reads groups of 128, 64 and 32); a group size outside 32, 64, 128 is refused. */
static void group_routing(void)
{
    qmm_device_desc descs[3] = {sm90(), sm90_tiled()};
    CHECK_OK(qmm_tune_desc(8, 9, 76, &descs[2])); /* generic: no wgmma kernel */
    CHECK(descs[2].wgmma_min_m == 0);
    static const int64_t ms[] = {1, 2, 4, 5, 8, 9, 16, 64, 300, 2048};
    static const int64_t shapes[][2] = {{2560, 4096}, {2560, 1024}, {9728, 2560}, {128, 1}, {256, 1000}};
    for (int di = 0; di < 3; di++) {
        const qmm_device_desc *d = &descs[di];
        int matvec = 0;
        for (int pol = 0; pol < 2; pol++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
                    int64_t m = ms[i], k = shapes[s][0], n = shapes[s][1];
                    qmm_cuda_options o = qmm_cuda_options_default();
                    o.policy = pol ? QMM_POLICY_SEED : QMM_POLICY_DEVICE;
                    qmm_plan p0, p128, pg;
                    CHECK_OK(qmm_plan_call(d, m, n, k, &o, &p0));
                    o.group = 128;
                    CHECK_OK(qmm_plan_call(d, m, n, k, &o, &p128));
                    CHECK(test_plan_equal(&p0, &p128));
                    matvec += p128.path == QMM_PATH_MATVEC;
                    for (int g = 32; g <= 64; g *= 2) {
                        o.group = g;
                        memset(&pg, 0x5A, sizeof pg);
                        CHECK_OK(qmm_plan_call(d, m, n, k, &o, &pg));
                        CHECKF(test_plan_equal(&pg, &p128), "%s M=%lld N=%lld K=%lld g%d: "
                               "%s, groups of 128 %s", d->family, (long long)m, (long long)n,
                               (long long)k, g, qmm_path_name(pg.path), qmm_path_name(p128.path));
                    }
                }
        CHECKF(matvec > 0, "%s: no plan took the matvec", d->family);
    }
    /* the matvec forced on each group size */
    qmm_device_desc d = sm90();
    qmm_cuda_options o = qmm_cuda_options_default();
    qmm_plan p;
    o.path = QMM_PATH_MATVEC;
    for (int g = 32; g <= 128; g *= 2) {
        o.group = g;
        CHECK_OK(qmm_plan_call(&d, 1, 1024, 2560, &o, &p));
        CHECK(p.path == QMM_PATH_MATVEC);
    }
    o = qmm_cuda_options_default();
    o.group = 48;
    CHECK_STATUS(qmm_plan_call(&d, 1, 1024, 2560, &o, &p), QMM_ERR_ARG);
    o.group = 256;
    CHECK_STATUS(qmm_plan_call(&d, 1, 1024, 2560, &o, &p), QMM_ERR_ARG);
    /* the other forced paths take every group and plan exactly as for 128 (what
     * qmm_cuda_workspace_size relies on for group 0) */
    static const qmm_path paths[] = {QMM_PATH_TILED, QMM_PATH_SPLITK, QMM_PATH_DENSE, QMM_PATH_WGMMA,
                                     QMM_PATH_STREAMK};
    static const int64_t fms[] = {1, 4, 16, 300};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        for (size_t mi = 0; mi < sizeof fms / sizeof fms[0]; mi++) {
            qmm_plan p128, pg;
            o = qmm_cuda_options_default();
            o.path = paths[i];
            o.split = paths[i] == QMM_PATH_SPLITK || paths[i] == QMM_PATH_WGMMA ? 4 : 0;
            CHECK_OK(qmm_plan_call(&d, fms[mi], 1024, 2560, &o, &p128));
            for (int g = 32; g <= 64; g *= 2) {
                o.group = g;
                CHECK_OK(qmm_plan_call(&d, fms[mi], 1024, 2560, &o, &pg));
                CHECKF(test_plan_equal(&pg, &p128), "forced %s M=%lld g%d differs from g128",
                       qmm_path_name(paths[i]), (long long)fms[mi], g);
            }
        }
}

static void bad_input(void)
{
    qmm_device_desc d = sm90();
    qmm_cuda_options o = qmm_cuda_options_default();
    qmm_plan p;
    memset(&p, 0x5A, sizeof p);
    qmm_plan before = p;
    CHECK_STATUS(qmm_plan_call(NULL, 32, 1024, 2560, NULL, &p), QMM_ERR_NULL);
    CHECK_STATUS(qmm_plan_call(&d, 32, 1024, 2560, NULL, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_plan_call(&d, 0, 1024, 2560, NULL, &p), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_plan_call(&d, 32, 1024, 2500, NULL, &p), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_plan_call(&d, (int64_t)1 << 31, 1024, 2560, NULL, &p), QMM_ERR_SHAPE);
    qmm_device_desc tiled = sm90_tiled(); /* the tiled grid's 65535 column tiles */
    CHECK_STATUS(qmm_plan_call(&tiled, 32, 64 * 65536 + 1, 2560, NULL, &p), QMM_ERR_SHAPE);
    o.path = QMM_PATH_STREAMK;
    o.split = 4; /* stream-K takes no split */
    CHECK_STATUS(qmm_plan_call(&d, 32, 1024, 2560, &o, &p), QMM_ERR_ARG);
    o.split = 0;
    o.path = (qmm_path)9;
    CHECK_STATUS(qmm_plan_call(&d, 32, 1024, 2560, &o, &p), QMM_ERR_ARG);
    o = qmm_cuda_options_default();
    o.stages = 5;
    CHECK_STATUS(qmm_plan_call(&d, 32, 1024, 2560, &o, &p), QMM_ERR_ARG);
    o = qmm_cuda_options_default();
    o.split = 4; /* a split needs path SPLITK */
    CHECK_STATUS(qmm_plan_call(&d, 32, 1024, 2560, &o, &p), QMM_ERR_ARG);
    o = qmm_cuda_options_default();
    o.partial_type = QMM_F16;
    CHECK_STATUS(qmm_plan_call(&d, 32, 1024, 2560, &o, &p), QMM_ERR_DTYPE);
    CHECK_STATUS(qmm_tune_desc(9, 0, -1, &d), QMM_ERR_ARG);
    CHECK_STATUS(qmm_tune_desc(9, 0, 0, NULL), QMM_ERR_NULL);
    CHECK(memcmp(&p, &before, sizeof p) == 0);
}

/* Fills a stack frame with a pattern, so that a field a caller's struct leaves unset shows. */
static __attribute__((noinline)) void dirty_stack(void)
{
    volatile unsigned char frame[4096];
    for (size_t i = 0; i < sizeof frame; i++) frame[i] = 0x5A;
}

/* qmm_cuda_options_default: every field as qmm_cuda.h documents it (AUTO, the rule's 0 for split,
 * stages, group and rows, bf16 partials, the device policy), whatever the stack held before. */
static void options_default(void)
{
    dirty_stack();
    const qmm_cuda_options o = qmm_cuda_options_default();
    CHECK(o.path == QMM_PATH_AUTO && o.split == 0 && o.stages == 0 && o.partial_type == QMM_BF16 &&
          o.policy == QMM_POLICY_DEVICE && o.group == 0 && o.rows == 0);
    const qmm_device_desc d = sm90();
    qmm_plan p;
    CHECK_OK(qmm_plan_call(&d, 32, 4096, 2560, &o, &p));
}

/* The 8- and 16-token tiles' two-warp start (tune/sm90.h, NOTES.md row 193): more than two CTAs
 * a SM, 16 tokens or fewer, a known SM count; on the pinned M = 16 plans (132 SMs) q, o, gate
 * and down take it, k (112 CTAs) does not. */
static void two_warp_start(void)
{
    CHECK(qmm_sm90_two_warp_start(16, 265, 132) && !qmm_sm90_two_warp_start(16, 264, 132));
    CHECK(qmm_sm90_two_warp_start(8, 1000, 132) && !qmm_sm90_two_warp_start(32, 1000, 132));
    CHECK(!qmm_sm90_two_warp_start(16, 1000, 0));
    const qmm_device_desc d = sm90();
    static const int two[] = {1, 0, 1, 1, 1}; /* qwen3_4b's rows: q, k, o, gate, down */
    for (size_t i = 0; i < sizeof qwen3_4b / sizeof qwen3_4b[0]; i++) {
        qmm_plan p;
        CHECK_OK(qmm_plan_call(&d, 16, qwen3_4b[i].n, qwen3_4b[i].k, NULL, &p));
        CHECKF(qmm_sm90_two_warp_start(p.tile_m, p.blocks, d.gpu.sms) == two[i],
               "%s M=16: %lld CTAs of %d tokens on %d SMs, two warps %d, want %d", qwen3_4b[i].proj,
               (long long)p.blocks, p.tile_m, d.gpu.sms, !two[i], two[i]);
    }
}

/* 24- to 64-token tiles of 64-row blocks, at most one CTA a SM, a known SM count (tune/sm90.h,
 * NOTES.md rows 216, 217): k/v at 17-64 tokens (112 CTAs in clusters of 7) take it; gate at 64
 * tokens (the paired row's 228 CTAs of 128 rows) and q (320 CTAs) do not. */
static void all_weights_first(void)
{
    CHECK(qmm_sm90_all_weights_first(24, 64, 132, 132) && !qmm_sm90_all_weights_first(24, 64, 133, 132));
    CHECK(qmm_sm90_all_weights_first(64, 64, 1, 132) && !qmm_sm90_all_weights_first(16, 64, 1, 132) &&
          !qmm_sm90_all_weights_first(128, 64, 1, 132));
    CHECK(!qmm_sm90_all_weights_first(64, 128, 100, 132) && !qmm_sm90_all_weights_first(32, 64, 100, 0));
    const qmm_device_desc d = sm90();
    static const int64_t ms[] = {17, 24, 32, 33, 48, 49, 64}; /* the 24-, 32-, 48- and 64-token tiles */
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        const int64_t m = ms[i];
        qmm_plan k, q, g;
        CHECK_OK(qmm_plan_call(&d, m, 1024, 2560, NULL, &k));
        CHECK_OK(qmm_plan_call(&d, m, 4096, 2560, NULL, &q));
        CHECK_OK(qmm_plan_call(&d, m, 9728, 2560, NULL, &g));
        CHECKF(qmm_sm90_all_weights_first(k.tile_m, k.tile_n, k.blocks, d.gpu.sms) &&
                   !qmm_sm90_all_weights_first(q.tile_m, q.tile_n, q.blocks, d.gpu.sms) &&
                   !qmm_sm90_all_weights_first(g.tile_m, g.tile_n, g.blocks, d.gpu.sms),
               "M=%lld: k %lld CTAs of %dx%d, q %lld, gate %lld of %dx%d", (long long)m, (long long)k.blocks,
               k.tile_m, k.tile_n, (long long)q.blocks, (long long)g.blocks, g.tile_m, g.tile_n);
    }
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, qwen3_4b_tiled_table, qwen3_4b_default_table, other_block_height, other_block_height_32,
               paired_64,
               long_prompts, plan_fields,
               forced, generic_gpu, group_routing, two_warp_start, all_weights_first, options_default,
               bad_input);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
