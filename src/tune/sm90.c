/* The shipped tuning table: sm_90 (H200) and the generic entry for GPUs the table does not know. */
#include <string.h>

#include "internal.h"
#include "plan.h"
#include "plan_sm90.h"
#include "tune/sm90.h"

_Static_assert(QMM_SM90_CONFIG_COUNT <= QMM_MAX_WGMMA_CONFIGS, "qmm.h holds every wgmma row");
_Static_assert(QMM_SM90_MAX_CLUSTER == QMM_MAX_WGMMA_CLUSTER, "one cluster limit");

/* Resident CTAs of each wgmma configuration (tune/sm90.h order) in clusters of s = 2..8, as
 * cudaOccupancyMaxActiveClusters answers on the H200 (times s; `qmm plan --policy device` on
 * the GPU, bench/results/2026-12-01-session6/r4-icache/plan.log): the GPCs' SM counts leave SMs
 * idle for most s. The rows of three CTAs a SM since session 42 (24, 32 and 48 tokens × 64 rows)
 * take TN 16's answers, the same count a SM; the 64-token tile's 128-row row two a SM (session
 * 43, NOTES.md row 219) the 32-token one's (both 384 threads two a SM; a context asks its GPU).
 * Every sm90 part with a context plans the latter where its GPU says the clusters fit, though
 * only the H100 SXM and the H200 have measured it (unlike wgmma_alt_min_tile's 32, which
 * qmm_tune_for_gpu gives the 132-SM H100 alone). */
static const int sm90_cluster_ctas[QMM_SM90_CONFIG_COUNT][QMM_SM90_MAX_CLUSTER + 1] = {
    {0, 0, 396, 372, 368, 345, 372, 329, 360}, /* TN 8, 3 a SM */
    {0, 0, 396, 372, 368, 345, 372, 329, 360}, /* TN 16, 3 a SM */
    {0, 0, 396, 372, 368, 345, 372, 329, 360}, /* TN 32, 3 a SM: as TN 16 (see below) */
    {0, 0, 132, 117, 120, 110, 102, 105, 120}, /* TN 64, WG 2 */
    {0, 0, 132, 117, 120, 110, 102, 105, 120}, /* TN 128 */
    {0, 0, 264, 237, 248, 235, 234, 224, 240}, /* TN 64, WG 1, 2 a SM */
    {0, 0, 132, 117, 120, 110, 102, 105, 120}, /* TN 128, WG 1 */
#ifdef QMM_EXP_WIDE_CLUSTER
    {0, 0, 132, -1, -1, -1, -1, -1, -1},       /* TN 256 (experiment): pairs, the one-a-SM count */
#else
    {0, 0, -1, -1, -1, -1, -1, -1, -1},        /* TN 256: no clusters */
#endif
    {0, 0, 264, 237, 248, 235, 234, 224, 240}, /* TN 32, WG 2, 2 a SM: TN 64 WG 1's */
    {0, 0, 264, 237, 248, 235, 234, 224, 240}, /* TN 64, WG 2, 2 a SM: TN 32 WG 2's */
    {0, 0, 396, 372, 368, 345, 372, 329, 360}, /* TN 24, 3 a SM: as TN 16 */
    {0, 0, 396, 372, 368, 345, 372, 329, 360}, /* TN 48, 3 a SM: as TN 16 */
};

/* The H200. The tiled family's rates (tiled_tflops, the launch and copy terms) were fitted to
 * bench ops in bench/results/2026-11-29-stages-overlap/ (then the plan's choice was within 2 % of
 * the best measured contender on average over the Qwen3-4B shapes); each later path's constants
 * say below which runs they come from. */
static qmm_device_desc sm90(void)
{
    qmm_device_desc d;
    memset(&d, 0, sizeof d);
    d.family = "sm90";
    d.gpu.name = "sm90";
    d.gpu.sms = 132;             /* H200 */
    d.gpu.peak_tflops = 720.0;   /* bf16 matmul ceiling measured by a cuBLAS 8192^3 GEMM */
    d.gpu.bandwidth_tbs = 3.9;   /* bench ops copy ceiling */
    d.gpu.launch_us = 1.0;       /* per kernel inside a graph */
    d.matvec_max_m = 8;          /* the seed's value; from 9 tokens the wgmma kernel (below) */
    d.matvec_limit_m = 16;       /* the matvec kernel has 1 and 2 token tiles of 8 */
    d.max_split = 16;
    d.min_k_tiles = 2;
#define QMM_ROW(tm, tn, wm, wn, max_m, stages, bps) \
    d.config[d.config_count++] = (qmm_tile_config){tm, tn, bps, max_m, stages};
    QMM_SM90_TILED(QMM_ROW)
#undef QMM_ROW
    d.tiled_tflops = 250.0;     /* mma.sync + dequant kernel's effective rate */
    /* where each path wins on the H200 (bench/results/2026-11-30-sm90/ops.md; for the matvec
     * bench/results/2026-12-01-session4/r2-attention/ops248.md): the matvec up to 8 tokens (at
     * M = 2, 4 it beats the wgmma kernel's stream-K on every Qwen3-4B projection by 3-30 %, at
     * M = 8 on all but q: 7.01 vs 5.82 µs), the wgmma kernel from 9 to 512 tokens, and beyond
     * it the kernel or dequantize + cuBLAS, whichever the model predicts faster (plan_call.c,
     * long_prompt; NOTES.md row 173: since session 30, where a fixed rule took the dense path
     * from 513, after session 14's kernel beat it at 385…512 but at 768 on o and down only,
     * NOTES.md row 106). The engine's fused decode step calls the matvec itself (its epilogues). */
    d.wgmma_min_m = 9;
    d.wgmma_max_m = 512;
    /* 256-token tiles from 1 024 tokens (NOTES.md row 161, bench/results/2026-12-04-session25/
     * r1-tn256/: unsplit q 28.6 / 58.1 µs at 1 024 / 2 048 tokens against the dense path's
     * 37.6 / 65.4 and cuBLAS's 28.6 / 58.4; gate at 2 048 147.5 against 169.9 and 154.9). 512
     * tokens stay with the 128-token tile: 256 lost there on q, k, o (2 token tiles). Beyond
     * wgmma_max_m AUTO takes the kernel's plan or the dense path, whichever the model predicts
     * faster (plan_call.c, long_prompt; NOTES.md row 173). From 1 024 tokens the 128-token
     * tile is weighed only as one wave of clusters of 128-row blocks (row 251: k/v at 1 024
     * tokens), not unsplit or stream-K: the model was 8-16 % optimistic for those there (k at
     * 2 048 20.0 µs measured, 17.5 predicted; q at 1 536 55.7-59.7 against 51.4; row 176) */
    d.wgmma_wide_min_m = 1024;
    /* clusters in the other block height from the 64-token tiles on (NOTES.md rows 112, 114);
     * the 32-token tile's 128-row row (row 204) was measured on an H100 only, which takes it
     * (qmm_tune_for_gpu); 32 here once an H200 run says so */
    d.wgmma_alt_min_tile = 64;
    /* clusters beyond one wave with the tiles left aside (NOTES.md rows 228-230): planned on
     * the H100, where they were measured (qmm_tune_for_gpu); not here until an H200 has run them */
    d.wgmma_rest_min_tile = 0;
    /* resident CTAs in clusters (a context asks its GPU instead) */
    for (int c = 0; c < QMM_SM90_CONFIG_COUNT; c++)
        for (int s = 2; s <= QMM_SM90_MAX_CLUSTER; s++)
            d.wgmma_cluster_ctas[c][s] = sm90_cluster_ctas[c][s];
    d.dense_force_m = 0; /* beyond wgmma_max_m the model decides (plan_call.c, long_prompt) */
    /* No narrow-output rule: k/v (N = 1 024) at M = 257…512 ran the dense path by that rule
     * until session 27, and the wgmma kernel's plan took 8.4–9.2 µs there against the dense path's
     * 9.8–10.2 in every run of the shipped kernel since session 17 (2026-12-02-session17 …
     * session25/r2-final, experiment builds aside; NOTES.md row 165) */
    d.dense_narrow_n = 0;
    d.dense_narrow_m = 0;
    /* The dense path's time (src/plan_device.c): fixed + the dequantize pass + max(GEMM flops /
     * dense_tflops, GEMM bytes / the copy ceiling), fitted (`bench/fit_model.py --dense`) to the
     * medians of its 30 cells (the five Qwen3-4B projections at M = 128…2048) over sessions 24
     * and 25's bench ops CSVs: all within 15 %, rms 6.5 % (the old constants, 400 TFLOP/s and
     * two launches, predicted M = 2048 1.7–1.8x slow). 810 TFLOP/s is an effective rate of the
     * fit, above the 8192^3 GEMM's 720: the terms trade time between the GEMM and the dequantize
     * pass (measured dense minus cuBLAS alone: ~19 µs of down's at M <= 512, 14 at 2048; NOTES.md
     * row 165). Decisions on this table do not use it but for qmm_plan_device's tiled family. */
    d.dense_tflops = 810.0;
    d.dense_fixed_us = 4.9;
    d.dense_dequant_tbs = 3.17;
    d.dense_min_m = 128;
    /* The wgmma kernel's time model (src/perf/wgmma.c; refit with bench/fit_model.py): least
     * squares of the relative error, every constant >= 0, over 660 forced cells (wgmma_s1,
     * streamk, split-K in clusters of 2..8): the five Qwen3-4B projections at M = 1..2048 of the
     * seventeenth session's final build (bench/results/2026-12-02-session17/r5-final/
     * ops_final.csv) and five other shapes at M = 9..128 (the stacked gate|up, Qwen3-0.6B's gate,
     * 8B's gate and down, 14B's q: 2026-12-04-session18/r1-owner-stores/plans.csv); 635 within
     * 15 %. On the Qwen3-4B cells: auto 46 of 55 within 15 % (the misses: the dense path's 5 at
     * M = 2048, the matvec's k and q M = 1, q and gate M = 8), plans within 5 % of the best
     * measured contender on 54 of 55 (k M = 384, dense by the table); on the same build's second
     * pass (ops_new2.csv, M = 9..512) 395 of 405, 45 of 45, 44 of 45 (tests/test_perf_fit.c).
     * Against the fit on the 4B cells alone (row 117) it plans 0.6B's gate at M = 9..16 in
     * clusters of 4 (stream-K was 35 % slower) and the stacked q|k|v at M = 33..64 in clusters
     * of 2 of the other block height (unsplit was 13-15 % slower; NOTES.md row 119). The k-block's
     * chain and its share of the SM's issue slots add up; the fixed term fits to 0 (the k-block
     * terms absorb it, so short K, 8 groups, is predicted 10-28 % fast). */
    d.wgmma_model = (qmm_wgmma_model){
        .fixed_us = 0.0,
        .fill_us_per_kb = 0.007312,  /* first stage + output tile: 0.54 µs at TN 128, WG 2 */
        .stage_us = 0.2555,          /* NOTES 19: the per-stage handshake of a CTA's k-block */
        .us_per_mflop = 0.06651,     /* TN 128, WG 2: 4.2 MFLOP a k-block, +0.28 µs */
        .issue_us = 0.1569,          /* a warpgroup's k-block on its SM, beside the others there */
        .round_trip_us = 0.8027,     /* partial write + counter; a batch of partial loads */
        .partial_us_per_mb = 0.08809, /* partials written and read: ~11 TB/s */
        .cluster_us = 2.178,         /* two cluster barriers, the partners' skew, a wave */
        .cluster_us_per_kb = 0.0335,  /* a CTA's partial through distributed shared memory */
        /* the 256-token tile's extra per k-block of its chain, fitted alone (`fit_model.py
         * --wide`, the constants above held) to the 20 forced cells of that tile in NOTES.md
         * row 161's final run (r2-final/ops_final.csv; 0.231 on row 162's r4-hybrid/ops1.csv) */
        .wide_kblock_us = 0.228,
    };
    /* The matvec (groups of 128): fixed + weight bytes / rate + (M - 1)·N·row_token, least squares
     * of the relative error (`bench/fit_model.py --matvec`) over the medians of its 15 cells (the
     * five Qwen3-4B projections at M = 1, 2, 8) in the four bench ops runs of the kernel as it
     * is since ea97224 (2026-12-04-session23 r2 ops_n1, r4 ops_base, r7 ops_fin, session25
     * r2-final ops_final): within 10.8 % (o M = 8 −11 %). The fifth session's constants (2.42
     * µs, 2.71 TB/s, 0.0598 ns) predicted M = 1 and 8 up to 32 % slow (NOTES.md row 165). */
    d.matvec_fixed_us = 2.15;
    d.matvec_tbs = 2.91;        /* 0.344 µs a MB */
    d.matvec_row_token_ns = 0.038;
    return d;
}

/* The corrections of the family's table for one GPU by its name (the context's): the H100 runs
 * the H200's table but for what was measured on it alone. */
void qmm_tune_for_gpu(qmm_device_desc *d, const char *name)
{
    if (!d || !name || strcmp(d->family, "sm90")) return;
    /* the 32-token tile's other height, 128 weight rows two CTAs a SM (H100, NOTES.md row 204:
     * q, k, o, down at M = 32 −1…−7 % in clusters, gate −27 % against stream-K): measured on
     * the 132-SM parts (SXM) only; a 114-SM PCIe card keeps the H200's rule */
    if (!strstr(name, "H100") || d->gpu.sms != 132) return;
    d->wgmma_alt_min_tile = 32;
    /* one wave of clusters and the tiles left aside from the 128-token tile, over at most two
     * token tiles (QMM_SM90_REST_MAX_TOKEN_TILES; NOTES.md row 230: bench/results/
     * 2026-12-06-session46/r1, r3, medians of two pairs against the plans before): Qwen3-4B o
     * at 200 / 256 tokens 15.7 → 13.2 / 15.5 → 13.7 µs, down 26.4 → 24.2 / 27.1 → 24.3
     * (clusters of 3, the 40th tile split 8 ways); at 128 tokens 14B q / o 18.4 → 15.5, 32B o
     * 24.2 → 21.6, 8B down 27.8 → 23.3 (two tiles aside); 4B's 128-token cells keep their
     * plans, whose forced pairs lost 10-114 % */
    d->wgmma_rest_min_tile = 128;
}

/* A GPU the table does not know: the same kernels (the only ones built), rates well below the
 * H200's so the model does not promise speed it has not seen, and no dense path (its crossover
 * was measured on the H200 only). Planning still works; it is just not tuned. */
static qmm_device_desc generic(void)
{
    qmm_device_desc d = sm90();
    d.family = d.gpu.name = "generic";
    d.gpu.peak_tflops = 200.0;
    d.gpu.bandwidth_tbs = 1.5;
    d.gpu.launch_us = 2.0;
    d.tiled_tflops = 100.0;
    d.dense_tflops = 0.0; /* no dense path, so none of its fitted constants either */
    d.dense_fixed_us = d.dense_dequant_tbs = 0.0;
    d.dense_force_m = d.dense_narrow_n = 0;
    d.wgmma_min_m = d.wgmma_max_m = d.wgmma_wide_min_m = 0; /* sm_90a code only */
    memset(&d.wgmma_model, 0, sizeof d.wgmma_model); /* never measured here: no predictions */
    d.matvec_tbs = 0;                                 /* the refined model at the rates above */
    return d;
}

qmm_status qmm_tune_desc(int cc_major, int cc_minor, int sm_count, qmm_device_desc *out)
{
    (void)cc_minor; /* sm_90 and sm_90a share the table */
    if (!out) return qmm_fail(QMM_ERR_NULL, "qmm_tune_desc: out is NULL");
    if (sm_count < 0) return qmm_fail(QMM_ERR_ARG, "qmm_tune_desc: sm_count = %d", sm_count);
    qmm_device_desc d = cc_major == 9 ? sm90() : generic();
    if (sm_count > 0) d.gpu.sms = sm_count;
    *out = d;
    qmm_clear_error();
    return QMM_OK;
}
