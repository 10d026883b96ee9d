/*
 * Tuning of the Hopper wgmma kernel family (src/cuda/gemm_sm90.cu) for sm_90 (H100, H200):
 * its configurations, written once. X(token tile TN, consumer warpgroups WG, pipeline stages,
 * resident blocks per SM). Small token tiles run several CTAs a SM: each CTA walks its stages
 * one after another (~0.4 µs a stage measured, mostly latency), so independent CTAs overlap;
 * large tiles run one CTA with a deep ring.
 * A block computes 64·WG weight rows × TN tokens; its shared-memory ring holds STAGES groups
 * (weights 4·WG KB + scales|biases + activations TN·256 bytes each). These change speed, never
 * results for a given configuration and schedule.
 */
#ifndef QMM_TUNE_SM90_H
#define QMM_TUNE_SM90_H

#define QMM_SM90_CONFIGS(X)                                                                        \
    X(8, 1, 10, 3) X(16, 1, 8, 3) X(32, 1, 8, 2)                                                    \
    X(64, 2, 8, 1) X(128, 2, 5, 1) X(64, 1, 9, 1)

/* A stream-K CTA takes at least this many groups, so a tile's partials stay few. */
#define QMM_SM90_MIN_STREAMK_ITERS 4

#define QMM_SM90_COUNT_ONE(tn, wg, st, bps) +1
enum { QMM_SM90_CONFIG_COUNT = 0 QMM_SM90_CONFIGS(QMM_SM90_COUNT_ONE) };
#undef QMM_SM90_COUNT_ONE

/* Split and stream-K schedules count finished CTAs per tile in a per-context array this long. */
#define QMM_SM90_MAX_COUNTED_TILES 65536

#endif
