/* Planning the Hopper wgmma kernel (plan_sm90.c). */
#ifndef QMM_PLAN_SM90_H
#define QMM_PLAN_SM90_H

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qmm_sm90_request {
    QMM_SM90_AUTO = 0,    /* unsplit when the tiles fill the GPU, else stream-K */
    QMM_SM90_SPLIT = 1,   /* split-K with the given split (1 = unsplit) */
    QMM_SM90_STREAMK = 2, /* stream-K over min(SMs, iterations) CTAs */
    /* split-K as SPLIT in the other block height (64 weight rows where the rule takes 128, or
     * 128 where it takes 64) for token tiles that have both (64, 128); otherwise as SPLIT */
    QMM_SM90_SPLIT_ALT = 3,
    /* split-K as SPLIT in the 64-token tile's 128-row blocks two CTAs a SM (the table's
     * QMM_SM90_PAIRED_64 row); an error for other token tiles */
    QMM_SM90_SPLIT_PAIRED = 4
} qmm_sm90_request;

/* The plan: path WGMMA (split = partitions per tile) or STREAMK; config = the tuning row;
 * tile_m = token tile (256 from wide_min_m tokens on, where wide_min_m > 0), tile_n = weight
 * rows per block; blocks = CTAs launched. */
qmm_status qmm_plan_sm90(int64_t m, int64_t n, int64_t k, int sm_count, int64_t wide_min_m,
                         qmm_sm90_request req, int split, qmm_plan *out);
/* Row `index` of the tuning table (tune/sm90.h); 0 when out of range. */
int qmm_sm90_config(int index, int *tile_tokens, int *warpgroups, int *stages);
/* Resident CTAs a SM of row `index` (tune/sm90.h); 0 when out of range. */
int qmm_sm90_blocks_per_sm(int index);
/* Resident CTAs of configuration `config` launched in clusters of `split` CTAs (split-K summed in
 * the cluster), from the description: > 0 that count, -1 such clusters do not fit the GPU, 0 not a
 * clustered launch (or not known: SMs x blocks per SM). */
int qmm_sm90_cluster_slots(const qmm_device_desc *d, int config, int split);
/* fp32 partial-slot bytes of a split or stream-K plan (a rest launch's, NOTES.md row 228); 0
 * otherwise. */
size_t qmm_sm90_workspace_bytes(const qmm_plan *p);
/* A split in clusters whose CTAs exceed the GPU's slots for such clusters: its first
 * floor(slots / split) tiles in clusters, one wave, and the rest_tiles left split rest_split ways
 * through the workspace on the SMs the clusters leave free (2 to QMM_SM90_REST_MAX_WAYS ways;
 * NOTES.md rows 228-229).
 * Sets p's rest_tiles, rest_split, blocks (both launches' CTAs) and workspace_bytes and returns
 * 1; returns 0 with p unchanged where it does not apply. */
int qmm_sm90_plan_rest(const qmm_device_desc *d, int64_t k, qmm_plan *p);

#ifdef __cplusplus
}
#endif

#endif
