/* Stream-K estimate (Osama et al., 2023): a persistent grid shares all MAC iterations evenly,
 * across tile boundaries, so no wave is partial; tiles cut between workers pay a fixup. */
#include <math.h>
#include <stdint.h>

#include "internal.h"

// a is [M, K], w is [N, K], c is [M, N]; tiles of tile_m x tile_n, K in steps of tile_k
qmm_status qmm_model_streamk(const qmm_gpu_caps *gpu, const qmm_model_kernel *kern, int64_t m,
                             int64_t n, int64_t k, qmm_model_estimate *out)
{
    if (!out) return qmm_fail(QMM_ERR_NULL, "streamk: out is NULL");
    /* The unsplit refined estimate validates everything and gives the floor and the launch. */
    qmm_model_estimate e;
    qmm_status st = qmm_model_splitk_refined(gpu, kern, m, n, k, 1, &e);
    if (st != QMM_OK) return st;

    int64_t iters_per_tile = (k - 1) / kern->tile_k + 1;
    int64_t workers = (int64_t)gpu->sms * kern->blocks_per_sm;
    if (e.tiles > INT64_MAX / iters_per_tile ||
        e.tiles * iters_per_tile > INT64_MAX / workers)
        return qmm_fail(QMM_ERR_OVERFLOW, "streamk: %lld tiles x %lld iterations x %lld workers "
                        "overflow", (long long)e.tiles, (long long)iters_per_tile,
                        (long long)workers);
    int64_t total = e.tiles * iters_per_tile;
    /* More workers than iterations would leave some idle; only min(W, T) take part, so every
     * worker's range is non-empty and the workers covering a tile are consecutive. */
    if (workers > total) workers = total;

    /* Walk the worker boundaries (worker w starts at floor(w*T/W)), not the tiles: a boundary
     * strictly inside a tile adds one partial to it. Boundaries ascend, so a tile's run of them
     * is contiguous; O(W) whatever the grid. */
    int64_t extra = 0, run = 0, run_tile = -1;
    e.split_tiles = 0;
    e.max_peers = 0;
    for (int64_t w = 1; w < workers; w++) {
        int64_t start = w * total / workers;
        if (start % iters_per_tile == 0) continue; /* on a tile edge: nothing to fix up */
        int64_t tile = start / iters_per_tile;
        if (tile != run_tile) {
            run_tile = tile;
            run = 0;
            e.split_tiles++;
        }
        run++;
        extra++;
        if (run > e.max_peers) e.max_peers = run;
    }

    double sm_flops_per_us = gpu->peak_tflops * kern->compute_efficiency * 1e6 / gpu->sms;
    double iter_us = kern->blocks_per_sm * 2.0 * kern->tile_m * kern->tile_n * kern->tile_k /
                     sm_flops_per_us;
    int64_t share = (total - 1) / workers + 1; /* the largest share sets the pace */
    double elem = kern->partial_type == QMM_F32 ? 4.0 : 2.0;

    e.split = 1;
    e.blocks = workers;
    e.waves = 1;
    e.compute_us = (double)share * iter_us;
    e.memory_bound = e.memory_us > e.compute_us;
    e.partial_bytes = 2.0 * (double)extra * kern->tile_m * kern->tile_n * elem;
    /* Partial traffic flows from all SMs at once; the owner's waits and adds are serial. */
    e.reduction_us = e.partial_bytes / (gpu->bandwidth_tbs * 1e6) +
                     (double)e.max_peers * kern->fixup_us;
    e.total_us = fmax(e.compute_us, e.memory_us) + e.launch_us + e.reduction_us;
    *out = e;
    qmm_clear_error();
    return QMM_OK;
}
