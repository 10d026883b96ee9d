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
 *   P · (R + λ · m / 4) · ceil(groups / C)  +  μ · P  +  ν · log2 C  +  ρ · ⌈g / D⌉,
 *   P = ceil(CTAs / SMs),  g = ceil(ceil(groups / C) / (W / R)):
 * the busiest SM's (tile, group) pieces of weights, its staged activations (m rows of 256 bytes
 * a group, from L2, on the path after the dependency wait) at λ of a weight KB a KB, a fixed cost
 * a CTA (its staging round trip and sums) of μ, a cluster's DSMEM sum of ν a doubling, and ρ a
 * round of a warp's chain: a warp holds D groups in flight and requests a slot's next group only
 * once it has multiplied the last, so g groups take ⌈g / D⌉ dependent rounds. At one token
 * λ = 0.75, μ = 6, ν = 3, ρ = 16, from two λ = 1, μ = 3, ν = 8, ρ = 16: refit (NOTES rows 248,
 * 248b; the first fit, row 99, and the one-token constants of rows 102-103 had no ρ) to every
 * shape of the Qwen3-4B projections and of 0.6B…32B's q, k, o, gate, down and stacked q|k|v and
 * gate|up at 1-8 tokens on an H100, holding 4B's decode-step shapes. The rounds term is what the
 * bytes alone missed: Qwen3-8B's down at one token in 128 CTAs of one warp a tile (32 groups a
 * warp) took 14.7 µs, in clusters of 8 12.1; with the refit 8B decodes 19 % faster, 1.7B 7 %,
 * 32B 5-8 %, 0.6B 2 %, 4B the same (H100, 32 positions). From 9 tokens the rule counts the
 * pieces alone, clusters of at most 4 (not refit: the planner gives those sizes to the wgmma
 * kernel). R >= 2 from two tokens on and for SwiGLU (gate and up tiles together). With no
 * single-wave shape (very large N) the least cost of the 8-warp shapes, resident or not (was the
 * fewest CTAs, one warp a tile: 14B's gate at 8 tokens 38.3 µs where clusters of 8 take 21.8;
 * row 248); from 9 tokens the fewest. */
void matvec_choose_shape(const MatvecArgs &p, const MatvecScratch &s, int *W, int *R, int *C)
{
    const int64_t tiles = p.n_pad / 16, sms = s.sm_count > 0 ? s.sm_count : 1;
    const int tokt = p.m <= 8 ? 1 : 2, groups = p.k / 128, depth = mv_depth(tokt);
    const int r_min = p.m > 1 || p.epi == MV_EPI_SWIGLU ? 2 : 1, c_max = tokt == 1 ? 8 : 4;
    /* the cost's constants: a staged KB against a weight KB, a CTA on the busiest SM, a cluster
     * doubling and a round of a warp's loads, in weight KB (NOTES rows 99, 102, 248b) */
    double lam = p.m == 1 ? 0.75 : 1.0, mu = p.m == 1 ? 6.0 : 3.0, nu = p.m == 1 ? 3.0 : 8.0, rho = 16.0;
#ifdef QMM_MV_KNOBS /* experiment build: QMM_MV_COST="lam,mu,nu,rho" */
    if (const char *e = getenv("QMM_MV_COST")) sscanf(e, "%lf,%lf,%lf,%lf", &lam, &mu, &nu, &rho);
#endif
    double best_cost = 1e300, fallback_cost = 1e300;
    int64_t best_warps = -1;
    *W = 8, *R = r_min, *C = 1;
    int fb_r = r_min, fb_c = 1;
    /* 4 warps from three tokens on lose (NOTES rows 58, 237: qkv +6…+18 %, gate +3 %); at two
     * the cost's 4-warp picks are gate's and gate|up's, 6 and 4 % faster */
    for (int w = 8; w >= (p.m <= 2 ? 4 : 8); w /= 2)
        for (int r = r_min; r <= w; r *= 2)
            for (int c = 1, lc = 0; c <= c_max; c *= 2, lc++) {
                const size_t bytes = matvec_smem_bytes(p, r, c);
                if ((c > 1 && groups < 2 * c) || bytes > (size_t)MV_SMEM_MAX) continue;
                const int64_t ctas = tiles / r * c, per = (ctas + sms - 1) / sms, gc = (groups + c - 1) / c;
                const int64_t warp_groups = (gc + w / r - 1) / (w / r); /* W / R warps a tile */
                const int64_t rounds = (warp_groups + depth - 1) / depth;
                const double cost = tokt == 1 ? (double)per * (r + lam * p.m / 4.0) * gc + mu * per + nu * lc +
                                                    rho * (double)rounds
                                              : (double)per * r * gc;
                const bool resident = ctas <= mv_resident(s, tokt, w, lc, mv_per_sm(p, w, bytes));
                if (resident && (cost < best_cost - 1e-9 || (cost < best_cost + 1e-9 && ctas * w > best_warps)))
                    best_cost = cost, best_warps = ctas * w, *W = w, *R = r, *C = c;
                /* several tokens a tile: the fewest CTAs, as before the refit */
                const double fb = tokt == 1 ? cost : (double)ctas;
                if (w == 8 && fb < fallback_cost - 1e-9) fallback_cost = fb, fb_r = r, fb_c = c;
            }
    if (best_warps >= 0) return;
    *W = 8, *R = fb_r, *C = fb_c; /* no single-wave shape: the least cost of 8 warps */
    if (fallback_cost == 1e300) /* a row too long to stage in 4 parts: 8 */
        *C = groups >= 2 * MV_MAX_CLUSTER ? MV_MAX_CLUSTER : 1;
}

} // namespace qmm
