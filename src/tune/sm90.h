/*
 * Tuning table of the sm_90 family (H100, H200): every kernel configuration, written once.
 * These values change speed, never results (every configuration and stage count accumulates each
 * output in the same k order; tests/gpu_kernels.c proves it bitwise).
 *
 * Each section is an X-macro list, read where the family's kernels are instantiated
 * (src/cuda/gemm_tiled.cu, src/cuda/gemm_sm90.cu) and where the planner reads its rows
 * (sm90.c builds the tiled rows into qmm_device_desc; plan_sm90.c reads the wgmma rows); the
 * benchmarks and `qmm plan` ask for the description (qmm_tune_desc). A new kernel family adds
 * one section here.
 */
#ifndef QMM_TUNE_SM90_H
#define QMM_TUNE_SM90_H

/* "any M": the last configuration of a section takes every longer prompt */
#define QMM_TUNE_ANY_M (1 << 30)

/* Tiled mma.sync kernel (TILED and SPLITK paths), in increasing max_m order:
 *   X(tile_m, tile_n, warps_m, warps_n, max_m, stages, blocks_per_sm)
 * stages: bench ops --stages on the H200, 2 beats 1 by 18-28%, 3-4 add nothing at small tiles.
 * blocks_per_sm: what the occupancy API answers on the H200 at those stages; a context replaces
 * it with its own GPU's answer. */
#define QMM_SM90_TILED(X)                                                                       \
    X(32, 64, 1, 4, 32, 2, 5)   /* 128 threads: small prompts */                                \
    X(64, 128, 2, 4, 64, 2, 2)  /* 256 threads */                                               \
    X(128, 128, 2, 4, QMM_TUNE_ANY_M, 4, 1) /* 256 threads: long prompts */

/* Deepest cp.async pipeline any tiled kernel is instantiated with (stages 1..this). */
#define QMM_SM90_MAX_STAGES 4

/* Hopper wgmma kernel (QMM_PATH_WGMMA and QMM_PATH_STREAMK: src/cuda/gemm_sm90.cu, planned by
 * src/plan_sm90.c): X(token tile TN, consumer warpgroups WG, pipeline stages, resident blocks
 * per SM). Small token tiles run several CTAs a SM: each CTA walks its stages one after another
 * (~0.4 µs a stage measured, mostly latency), so independent CTAs overlap; large tiles run one
 * CTA with a deep ring. A block computes 64·WG weight rows × TN tokens; its shared-memory ring
 * holds STAGES 128-column blocks of k (weights 4·WG KB + the block's 1, 2 or 4 groups of
 * scales|biases + activations TN·256 bytes each). Groups of 64 need no more shared memory than
 * groups of 128 (stages round up to 1 KB); groups of 32 add 1 KB a stage at WG = 2 (at most
 * 216 KB a CTA): every row keeps its stage count and resident blocks per SM at every group size.
 * 64 tokens × 64 rows runs two CTAs a SM (5 stages of 21 KB): at one a SM (9 stages) it was
 * 3-8 % slower at 48-64 tokens on q, k, o and down, also in launches of fewer CTAs than SMs (q in
 * clusters of 2, 128 CTAs: NOTES.md rows 198-199). 24, 32 and 48 tokens × 64 rows run three CTAs
 * a SM (6, 5 and 4 stages of 11, 13 and 17 KB), so that a launch of the clusters of 4-8 that
 * spread a narrow weight over every SM fits one wave (q at 25-32 tokens in clusters of 5: 320
 * CTAs, 235 slots in clusters of 5 two a SM); token tiles of 24 and 48 leave less of the tile empty at 17-24 and
 * 33-48 tokens (H100 at 17-48 tokens: q, o, down −10…−20 %, k −5…−15 %, gate ±1 % / +4 % / −10 %
 * at 17-24 / 25-32 / 33-48; NOTES.md rows 211-213).
 * Row 6 (128 tokens × 64 rows, 5 stages of 37 KB) runs only split-K in clusters, where
 * the planner's model prefers twice the tiles to the 128-row row's; likewise 64 tokens × 128
 * rows where the rule takes 64-row blocks (plan_call.c, the other block height). The 256-token
 * row (3 stages of 73 KB) takes prompts from the table's wgmma_wide_min_m tokens on (tune/sm90.c,
 * NOTES.md row 161): a converted weight fragment feeds twice the tokens of the 128-token tile.
 * 32 tokens × 128 rows (4 stages of 17 KB, two CTAs a SM: 96 registers a consumer thread, one
 * accumulator and one fragment buffer) is the 32-token tile's other height, taken in clusters
 * where the model prefers it: a stage's activations serve twice the weight rows (H100: q, o,
 * down at M = 32 −4…−7 %, gate −27 %; NOTES.md row 204). 64 tokens × 128 rows also runs two CTAs
 * a SM (4 stages of 25 KB, the same registers), taken only in clusters where the rule's blocks are
 * 128 rows (wide outputs: gate/up at 49-64 tokens in clusters of 3 −17…−19 % against stream-K on
 * the one-a-SM row, whose stream-K and few-CTA launches it loses; H100 and H200, NOTES.md rows
 * 206, 208, 219).
 * Rows keep their index (new ones last). */
#define QMM_SM90_CONFIGS(X)                                                                        \
    X(8, 1, 10, 3) X(16, 1, 8, 3) X(32, 1, 5, 3)                                                    \
    X(64, 2, 8, 1) X(128, 2, 5, 1) X(64, 1, 5, 2) X(128, 1, 5, 1) X(256, 2, 3, 1)                   \
    X(32, 2, 4, 2) X(64, 2, 4, 2) X(24, 1, 6, 3) X(48, 1, 4, 3)

/* The tiles left aside by a split in clusters beyond one wave (plan_sm90.c) split at most this
 * many ways: their last CTA reads the other partials one at a time (~0.5 µs each), so 15 ways
 * ended o at M = 256 ~7 µs after the rest's loops (16.5 µs against 13.9 at 8 ways on an H100,
 * NOTES.md row 229). */
#define QMM_SM90_REST_MAX_WAYS 8

/* AUTO weighs tiles aside only where the prompt is at most this many token tiles: where they
 * were measured to pay (one or two 128-token tiles: o, down, q of Qwen3-4B…32B, −8…−16 % on an
 * H100). With more token tiles the unsplit or two-way plans fill the GPU already: k at 384 / 512
 * tokens in clusters of 5 / 4 with two tiles aside took 13.3 µs against 8.7 / 9.1, and at 640
 * 13.4 against the dense path's 11.8 (NOTES.md row 230). */
#define QMM_SM90_REST_MAX_TOKEN_TILES 2

/* Split-K with 2 … this many partitions runs each tile's CTAs as one cluster that sums the
 * partials in distributed shared memory (8: the portable cluster size); more partitions go
 * through the workspace and the tile counters, as do all of the 256-token tile's, whose ring
 * has no room to receive a cluster's partials. */
#define QMM_SM90_MAX_CLUSTER 8 /* QMM_MAX_WGMMA_CLUSTER, qmm.h */
#ifdef QMM_EXP_WIDE_CLUSTER /* experiment (NOTES.md rows 272, 275): the 256-token tile's pairs in
                             * clusters, the partial staged in the ring (gemm_sm90_kernel.cuh) */
#define QMM_SM90_CLUSTER_MAX_TOKENS 256
#else
#define QMM_SM90_CLUSTER_MAX_TOKENS 128
#endif
static inline int qmm_sm90_cluster(int tile_tokens, int split)
{
    if (tile_tokens > 128) /* the experiment's 256-token clusters: pairs only (the ring's room) */
        return tile_tokens <= QMM_SM90_CLUSTER_MAX_TOKENS && split == 2 ? 2 : 1;
    return split >= 2 && split <= QMM_SM90_MAX_CLUSTER ? split : 1;
}

/* 8- and 16-token tiles: a second producer warp requests the first stages' activations while
 * the first requests their weights, where the launch has more than two CTAs a SM (their
 * activations queued behind the SM's weight copies; at most two a SM were slower: NOTES.md rows
 * 172, 193). sms 0 (unknown): one warp. */
static inline int qmm_sm90_two_warp_start(int tile_tokens, long long ctas, int sms)
{
    return tile_tokens <= 16 && sms > 0 && ctas > 2LL * sms;
}

/* 24- to 64-token tiles of 64-row blocks: every first stage's weights before the dependency
 * wait (not just the first stage's) where the launch has at most one CTA a SM: nothing else of
 * the launch queues on the SM's copies (k/v, 112 CTAs at 17-64 tokens: -1.6...-4.4 % on an H100,
 * -2.9...-4.9 % on the H200). Not the 128-token tiles' launches of at most one CTA a SM (+1...+8 %,
 * H100) nor 128-row blocks (gate's 64-token stream-K, 132 CTAs: +4 %, H200), whose stages carry
 * twice the weights: NOTES.md rows 216, 217. sms 0: no. */
static inline int qmm_sm90_all_weights_first(int tile_tokens, int rows, long long ctas, int sms)
{
    return tile_tokens >= 24 && tile_tokens <= 64 && rows == 64 && sms > 0 && ctas <= sms;
}

/* A stream-K CTA takes at least this many groups, so a tile's partials stay few. */
#define QMM_SM90_MIN_STREAMK_ITERS 4

#define QMM_SM90_COUNT_ONE(tn, wg, st, bps) +1
enum { QMM_SM90_CONFIG_COUNT = 0 QMM_SM90_CONFIGS(QMM_SM90_COUNT_ONE) };
#undef QMM_SM90_COUNT_ONE
/* The 64-token tile's 128-row blocks two CTAs a SM: row 9 (planned by its own request,
 * QMM_SM90_SPLIT_PAIRED; a (TN, WG) lookup finds the one-a-SM row first). */
enum { QMM_SM90_PAIRED_64 = 9 };

/* Split and stream-K schedules count finished CTAs per tile in a per-context array this long. */
#define QMM_SM90_MAX_COUNTED_TILES 65536

#endif
