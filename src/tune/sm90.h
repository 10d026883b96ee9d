/*
 * Tuning table of the sm_90 family (H100, H200): every kernel configuration, written once.
 * These values change speed, never results (every configuration and stage count accumulates each
 * output in the same k order; tests/gpu_kernels.c proves it bitwise).
 *
 * Each section is an X-macro list, read in three places:
 *   - the kernel file instantiates one kernel per row (src/cuda/gemm_tiled.cu);
 *   - sm90.c builds the planner's qmm_device_desc from the rows;
 *   - nothing else: the benchmarks and `qmm plan` ask for that description (qmm_tune_desc).
 * A new kernel family adds one section here (and its field in qmm_device_desc).
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

#endif
