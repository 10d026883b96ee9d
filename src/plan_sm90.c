/* The plan of the Hopper wgmma kernel (src/cuda/gemm_sm90.cu): token tile from M, the number of
 * consumer warpgroups from the output grid, and the schedule — unsplit when the tiles fill the
 * GPU in whole waves, else stream-K over one CTA per SM (or split-K when forced). Plain C, so
 * the choice for any shape on any SM count is testable without a GPU. The "groups" here are the
 * kernel's 128-column k blocks: a block holds 1, 2 or 4 whole groups of 128, 64 or 32, so every
 * split-K partition and stream-K share is group-aligned at every group size. */
#include "internal.h"
#include "plan_sm90.h"
#include "tune/sm90.h"

static const int sm90_rows[][4] = {
#define QMM_SM90_ROW(tn, wg, st, bps) {tn, wg, st, bps},
    QMM_SM90_CONFIGS(QMM_SM90_ROW)
#undef QMM_SM90_ROW
};

int qmm_sm90_config(int index, int *tile_tokens, int *warpgroups, int *stages)
{
    if (index < 0 || index >= QMM_SM90_CONFIG_COUNT) return 0;
    if (tile_tokens) *tile_tokens = sm90_rows[index][0];
    if (warpgroups) *warpgroups = sm90_rows[index][1];
    if (stages) *stages = sm90_rows[index][2];
    return 1;
}

int qmm_sm90_blocks_per_sm(int index)
{
    return index >= 0 && index < QMM_SM90_CONFIG_COUNT ? sm90_rows[index][3] : 0;
}

int qmm_sm90_cluster_slots(const qmm_device_desc *d, int config, int split)
{
    if (!d || config < 0 || config >= QMM_SM90_CONFIG_COUNT || qmm_sm90_cluster(sm90_rows[config][0], split) < 2)
        return 0;
    const int slots = d->wgmma_cluster_ctas[config][split];
    return slots < 0 ? -1 : slots;
}

static int find_config(int tn, int wg)
{
    for (int i = 0; i < QMM_SM90_CONFIG_COUNT; i++)
        if (sm90_rows[i][0] == tn && sm90_rows[i][1] == wg) return i;
    return -1;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The smallest token tile that holds M, 128 beyond it, and 256 from wide_min_m on (> 0). */
static int token_tile(int64_t m, int64_t wide_min_m)
{
    static const int tiles[] = {8, 16, 24, 32, 48, 64, 128};
    if (wide_min_m > 0 && m >= wide_min_m) return 256;
    for (int i = 0; i < (int)(sizeof tiles / sizeof tiles[0]); i++)
        if (m <= tiles[i]) return tiles[i];
    return 128;
}

/* The fraction of its waves that `tiles` CTAs (one a SM) fill: tiles / (waves x SMs). */
static double wave_fill(int64_t tiles, int sm_count)
{
    return (double)tiles / (double)(cdiv(tiles, sm_count) * sm_count);
}

/* Whole waves, or so many that the last partial wave costs little. */
static int fills_gpu(int64_t tiles, int sm_count)
{
    if (tiles < sm_count) return 0;
    return tiles % sm_count == 0 || wave_fill(tiles, sm_count) >= 0.85;
}

qmm_status qmm_plan_sm90(int64_t m, int64_t n, int64_t k, int sm_count, int64_t wide_min_m,
                         qmm_sm90_request req, int split, qmm_plan *out)
{
    if (!out) return qmm_fail(QMM_ERR_NULL, "plan output is NULL");
    if (m < 1 || n < 1 || k < 1 || k % QMM_GROUP || m > (1 << 30) || n > (1 << 30) || k > (1 << 30))
        return qmm_fail(QMM_ERR_SHAPE, "M = %lld, N = %lld, K = %lld: need 1..2^30 and K %% 128 == 0",
                        (long long)m, (long long)n, (long long)k);
    if (sm_count < 1) return qmm_fail(QMM_ERR_ARG, "sm_count = %d", sm_count);
    const int64_t groups = k / QMM_GROUP;
    if (split < 0 || split > groups)
        return qmm_fail(QMM_ERR_ARG, "split = %d: K = %lld has %lld groups of 128", split,
                        (long long)k, (long long)groups);

    /* small token tiles (up to 48): 64-row blocks (many CTAs a SM); wider ones 128 rows, unless
     * the output is narrow (k/v) and 64-row blocks double the tiles */
    int tn = token_tile(m, wide_min_m), wg = tn <= 48 ? 1 : 2;
    int64_t tiles = cdiv(m, tn) * cdiv(n, 64 * wg);
    if (tn == 64 && tiles * 2 <= sm_count) wg = 1, tiles = cdiv(m, tn) * cdiv(n, 64);
    if (req == QMM_SM90_SPLIT_ALT) { /* the 8-, 16-, 24-, 48- and 256-token tiles have one height */
        if (tn == 32 || tn == 64 || tn == 128) wg = 3 - wg, tiles = cdiv(m, tn) * cdiv(n, 64 * wg);
        req = QMM_SM90_SPLIT;
    }
    int config = find_config(tn, wg);
    if (req == QMM_SM90_SPLIT_PAIRED) {
        if (tn != 64 || sm90_rows[QMM_SM90_PAIRED_64][0] != 64 || sm90_rows[QMM_SM90_PAIRED_64][1] != 2)
            return qmm_fail(QMM_ERR_ARG, "the 64-token tile's paired row: M = %lld takes %d-token tiles",
                            (long long)m, tn);
        wg = 2, tiles = cdiv(m, tn) * cdiv(n, 128), config = QMM_SM90_PAIRED_64;
        req = QMM_SM90_SPLIT;
    }
    if (config < 0) return qmm_fail(QMM_ERR_ARG, "no sm90 configuration for TN %d, WG %d", tn, wg);

    qmm_plan p = {0};
    p.config = config;
    p.tile_m = tn;
    p.tile_n = 64 * wg;
    p.base_blocks = tiles;
    p.predicted_us = -1;
    int64_t iters = tiles * groups, ctas;
    /* one group a tile leaves nothing to share: unsplit */
    int streamk = req == QMM_SM90_STREAMK ||
                  (req == QMM_SM90_AUTO && groups > 1 && !fills_gpu(tiles, sm_count));
    if (req == QMM_SM90_SPLIT && split < 1) split = 1;
    if (req == QMM_SM90_AUTO && !streamk) split = 1;
    if (streamk) {
        int64_t slots = (int64_t)sm_count * sm90_rows[config][3]; /* every resident CTA */
        int64_t few = iters / QMM_SM90_MIN_STREAMK_ITERS;
        ctas = few < slots ? few : slots;
        if (ctas < 1) ctas = 1;
        p.path = QMM_PATH_STREAMK;
        p.split = 1;
        p.k_per_split = (int)k;
    } else {
        ctas = tiles * split;
        p.path = QMM_PATH_WGMMA;
        p.split = split;
        p.k_per_split = (int)(k / split); /* partitions differ by at most one group */
    }
    if (ctas > INT32_MAX)
        return qmm_fail(QMM_ERR_SHAPE, "%lld CTAs exceed the grid limit", (long long)ctas);
    if ((streamk || qmm_sm90_cluster(tn, split) < split) && tiles > QMM_SM90_MAX_COUNTED_TILES)
        return qmm_fail(QMM_ERR_SHAPE, "%lld tiles: a split schedule counts at most %d", (long long)tiles,
                        QMM_SM90_MAX_COUNTED_TILES);
    p.blocks = ctas;
    *out = p;
    return QMM_OK;
}

size_t qmm_sm90_workspace_bytes(const qmm_plan *p)
{
    if (!p || (p->path != QMM_PATH_STREAMK && !(p->path == QMM_PATH_WGMMA && p->split > 1))) return 0;
    if (p->path == QMM_PATH_WGMMA && p->rest_tiles > 0) /* the rest launch's CTAs */
        return (size_t)p->rest_tiles * (size_t)p->rest_split * 2 * (size_t)p->tile_n * (size_t)p->tile_m *
               sizeof(float);
    if (p->path == QMM_PATH_WGMMA && qmm_sm90_cluster(p->tile_m, p->split) > 1) return 0; /* in the clusters */
    /* two fp32 partial slots per CTA (its first and last tile segments) */
    return (size_t)p->blocks * 2 * (size_t)p->tile_n * (size_t)p->tile_m * sizeof(float);
}

int qmm_sm90_plan_rest(const qmm_device_desc *d, int64_t k, qmm_plan *p)
{
    if (!d || !p || p->path != QMM_PATH_WGMMA || p->rest_tiles || qmm_sm90_cluster(p->tile_m, p->split) < 2)
        return 0;
    const int64_t slots = qmm_sm90_cluster_slots(d, p->config, p->split);
    if (slots <= 0 || p->blocks < slots) return 0; /* one wave already, or no count */
    const int64_t first = slots / p->split, rest = p->base_blocks - first;
    const int64_t free_slots = (int64_t)d->gpu.sms * qmm_sm90_blocks_per_sm(p->config) - first * p->split;
    int64_t ways = rest > 0 ? free_slots / rest : 0;
    if (ways > QMM_SM90_REST_MAX_WAYS) ways = QMM_SM90_REST_MAX_WAYS;
    if (ways > k / QMM_GROUP) ways = k / QMM_GROUP;
    if (first < 1 || rest < 1 || ways < 2 || p->base_blocks > QMM_SM90_MAX_COUNTED_TILES) return 0;
    p->rest_tiles = (int)rest;
    p->rest_split = (int)ways;
    p->blocks = first * p->split + rest * ways;
    p->workspace_bytes = qmm_sm90_workspace_bytes(p);
    return 1;
}
