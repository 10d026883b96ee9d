/*
 * The decode matvec's CTA shape (matvec.cu's launcher, when the caller leaves it open): how many
 * CTAs of a shape are resident at once, and the rule that picks warps, tiles and cluster size.
 */
#ifdef QMM_MV_KNOBS
#include <stdio.h>
#include <stdlib.h>
#endif

#include "kernels.h"
#include "matvec_layout.cuh"

namespace qmm {

size_t matvec_smem_bytes(const MatvecArgs &p, int R, int C, bool rounds)
{
    const int tokt = p.m <= 8 ? 1 : 2, groups = p.k / 128;
    return MvSmem(p.m, (groups + C - 1) / C, 8 * tokt, R * 16, rounds).bytes;
}
/* CTAs of a launch a SM holds: launch bounds, and shared memory with the 1 KB the hardware
 * reserves a CTA. */
static int mv_per_sm(const MatvecArgs &p, int W, size_t bytes)
{
    const int bounds = mv_ctas_bound(p.m <= 8 ? 1 : 2, W), by_smem = (int)(MV_SMEM_SM / (bytes + 1024));
    return by_smem < bounds ? by_smem : bounds;
}

/* CTAs of a shape resident at once: per_sm a SM (launch bounds and shared memory), in clusters
 * of 2^lc as the occupancy API counted them at the bounds (scaled when shared memory holds
 * fewer a SM). */
static int64_t mv_resident(const MatvecScratch &s, int tokt, int w, int lc, int per_sm)
{
    const int64_t all = (int64_t)s.sm_count * per_sm;
    const int k = mv_kernel_index(tokt, w), bounds = mv_ctas_bound(tokt, w);
    const int64_t clustered = s.cluster_ctas[k][lc];
    if (lc == 0 || clustered <= 0) return all;
    const int64_t scaled = clustered * per_sm / bounds >> lc << lc;
    return scaled < all ? scaled : all;
}

/* The CTA shape: W warps (8, or 4 up to two tokens), R tiles a CTA, C CTAs a cluster along K
 * (bench/probe/mv_shapes.cu times every shape): every CTA resident at once (clusters counted by
 * the occupancy API), then the least cost on the busiest SM, with more warps and then fewer
 * tiles a CTA on a tie. Up to 8 tokens the cost is, in KB of weights streamed,
 *   P · (R + λ · m / 4) · ceil(groups / C)  +  μ · P  +  ν · log2 C,   P = ceil(CTAs / SMs):
 * the busiest SM's (tile, group) pieces of weights, its staged activations (m rows of 256 bytes
 * a group, from L2, on the path after the dependency wait) at λ of a weight KB a KB, a fixed cost
 * a CTA (its staging round trip and sums) of μ, and a cluster's DSMEM sum of ν a doubling:
 * λ = 0.5, μ = 0, ν = 5, fitted to the seven Qwen3-4B projections at M = 1, 2, 4, 8
 * (`2026-12-02-session13/r2-shapes/`, NOTES row 99): `qmm bench ops` 5 % below the previous
 * rule's total (which counted the pieces alone, then the most warps), 1.5 % above the best shape
 * of each cell; one cell lost 4.5 % (o at 8 tokens, clusters of 8). It favours fewer, larger
 * CTAs where the activations are a large share of a CTA's bytes (q at M = 1: 128 CTAs of 2
 * tiles, 3.87 µs, where 256 of 1 took 4.52). At one token λ = 0.75, μ = 3, ν = 3: the decode
 * step's four shapes alone 27.69 → 27.34 µs a layer and decode 1–1.6 % faster (rows 102–103).
 * From 9 tokens the rule counts the pieces alone, clusters of at most 4 (not refit: the planner
 * gives those sizes to the wgmma kernel). R >= 2 from two tokens on and for SwiGLU (gate and up
 * tiles together). With no single-wave shape (very large N) the fewest CTAs of 8 warps. */
void matvec_choose_shape(const MatvecArgs &p, const MatvecScratch &s, int *W, int *R, int *C)
{
    const int64_t tiles = p.n_pad / 16, sms = s.sm_count > 0 ? s.sm_count : 1;
    const int tokt = p.m <= 8 ? 1 : 2, groups = p.k / 128;
    const int r_min = p.m > 1 || p.epi == MV_EPI_SWIGLU ? 2 : 1, c_max = tokt == 1 ? 8 : 4;
    /* the cost's constants: a staged KB against a weight KB, a CTA on the busiest SM and a
     * cluster doubling, in weight KB (NOTES rows 99, 102) */
    double best_cost = 1e300, lam = p.m == 1 ? 0.75 : 0.5, mu = p.m == 1 ? 3.0 : 0.0, nu = p.m == 1 ? 3.0 : 5.0;
#ifdef QMM_MV_KNOBS /* experiment build: QMM_MV_COST="lam,mu,nu" */
    if (const char *e = getenv("QMM_MV_COST")) sscanf(e, "%lf,%lf,%lf", &lam, &mu, &nu);
#endif
    int64_t best_warps = -1, fewest = INT64_MAX;
    *W = 8, *R = r_min, *C = 1;
    /* 4 warps from three tokens on lose (NOTES rows 58, 237: qkv +6…+18 %, gate +3 %); at two
     * the cost's 4-warp picks are gate's and gate|up's, 6 and 4 % faster */
    for (int w = 8; w >= (p.m <= 2 ? 4 : 8); w /= 2)
        for (int r = r_min; r <= w; r *= 2)
            for (int c = 1, lc = 0; c <= c_max; c *= 2, lc++) {
                const size_t bytes = matvec_smem_bytes(p, r, c);
                if ((c > 1 && groups < 2 * c) || bytes > (size_t)MV_SMEM_MAX) continue;
                const int64_t ctas = tiles / r * c, per = (ctas + sms - 1) / sms, gc = (groups + c - 1) / c;
                const double cost = tokt == 1 ? (double)per * (r + lam * p.m / 4.0) * gc + mu * per + nu * lc
                                              : (double)per * r * gc;
                const bool resident = ctas <= mv_resident(s, tokt, w, lc, mv_per_sm(p, w, bytes));
                if (resident && (cost < best_cost - 1e-9 || (cost < best_cost + 1e-9 && ctas * w > best_warps)))
                    best_cost = cost, best_warps = ctas * w, *W = w, *R = r, *C = c;
                if (best_warps < 0 && w == 8 && ctas < fewest) fewest = ctas, *R = r, *C = c;
            }
    if (best_warps < 0 && fewest == INT64_MAX) /* a row too long to stage in 4 parts: 8 */
        *C = groups >= 2 * MV_MAX_CLUSTER ? MV_MAX_CLUSTER : 1;
}

} // namespace qmm
