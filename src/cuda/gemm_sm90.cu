/*
 * Hopper path: C[M, N] = A[M, K] · Wᵀ with wgmma, the weights in registers, for M = 1…any.
 *
 * Roles are swapped (Cᵀ = W·Aᵀ): 64 weight rows per consumer warpgroup are the wgmma A operand,
 * dequantized from the device layout (w4_layout.h: one lane's 16 bytes per 16-row tile and group
 * are exactly its m64nNk16 A fragments for the group's eight k16 steps) to bf16(s·q + b); the
 * tokens are the wgmma N dimension (TN = 8…256), so a 16-token prompt runs an n16 tile.
 * A producer warp fills a ring of STAGES shared-memory buffers, one 128-column block of k each
 * (one group at g128; GPB = 2, 4 groups at g64, g32: a template parameter), by the copy
 * engines: the block's weight rows (one contiguous 4 or 8 KB piece of the device layout) by a
 * bulk copy, the activations by one 3-D TMA box with the 128-byte swizzle that wgmma's K-major B
 * descriptor reads, the GPB groups' scale|bias pairs by one bulk copy each. Full/empty mbarriers
 * pace the ring. Below, a "group" of the schedule is such a block: partitions of whole blocks
 * are partitions of whole groups at every g.
 *
 * Work is a list of iterations (tile, group), tiles ordered m-tile fastest so that CTAs running
 * together share weight tiles. CTA p owns iterations [start(p), start(p+1)):
 *   split S > 0 (split-K): CTA p = tile·S + z takes the group-aligned partition z of its tile,
 *                          partitions differing by at most one group (S = 1: the unsplit
 *                          schedule, one CTA per tile);
 *   split = 0 (stream-K):  P CTAs take equal shares (at most one iteration apart) of all
 *                          I = tiles · groups iterations; at 256 tokens, CTA p first takes
 *                          whole tiles p·W … p·W + W − 1 (W = floor(tiles / P): the full
 *                          waves, data-parallel) and then its equal share of the rest.
 * A CTA that covers a whole tile stores it. Split-K with at most QMM_SM90_MAX_CLUSTER partitions
 * runs a tile's CTAs as one cluster: the tile's pieces are shared out among the CTAs, each CTA
 * sends its fp32 partial of a piece into the owner's idle ring (st.async, completing on the
 * owner's mbarrier), and the owner sums its pieces over the partitions in rank order (no
 * workspace, no counter, no cluster-wide fence). Otherwise a CTA
 * writes its partial to the workspace and counts itself in the tile's counter; the last CTA to
 * arrive sums every partial of the tile in CTA order. Both sum in partition order from zero, so
 * the result does not depend on timing (bitwise equal run to run) nor on the reduction used.
 * Clusters beyond one wave may run as one wave and the tiles left, split through the workspace
 * in a second launch (Sm90Schedule::rest_tiles, launch_sm90 below).
 *
 * Programmatic dependent launch: the producer issues weight copies before griddepcontrol.wait
 * (weights never depend on the previous kernel: every stage's at 8–16 tokens, and at 24–64
 * tokens in 64-row blocks where the launch has at most one CTA a SM, tune/sm90.h's
 * qmm_sm90_all_weights_first; else the first stage's), the activations after it (at 8–16 tokens
 * from a second warp where the launch has more than two CTAs a SM: tune/sm90.h's
 * qmm_sm90_two_warp_start); consumers wait before writing; launch_dependents once every copy is
 * issued.
 *
 * Files: the kernel in gemm_sm90_kernel.cuh, its argument block and shared-memory layout in
 * gemm_sm90_args.cuh, the host side (tensor map, init, occupancy, launch) here.
 */
#include <cudaTypedefs.h>

#include "gemm_sm90_kernel.cuh"
#include "kernels.h"
#include "w4_layout.h"

namespace qmm {

/* ---- host side ---- */

#ifdef QMM_SM90_TRACE
cudaError_t sm90_trace_read(unsigned long long *out, int max_ctas, int *ctas)
{
    cudaError_t e = cudaMemcpyFromSymbol(ctas, sm90_trace_grid, sizeof(int));
    if (*ctas > max_ctas) *ctas = max_ctas;
    return e == cudaSuccess
               ? cudaMemcpyFromSymbol(out, sm90_trace_buf, sizeof(unsigned long long) * SM90_TR_SLOTS * *ctas)
               : e;
}
#endif

static PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(void)
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                             &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            f = nullptr;
        return (PFN_cuTensorMapEncodeTiled_v12000)f;
    }();
    return fn;
}

const Sm90Config sm90_configs[SM90_CONFIGS] = {
#define QMM_SM90_ROW(tn, wg, st, bps) {tn, wg, st, bps},
    QMM_SM90_CONFIGS(QMM_SM90_ROW)
#undef QMM_SM90_ROW
};

/* The 48-, 64- and 128-token tiles copy a partial last tile's rows only (Sm90Maps<true>, launch_sm90
 * says when); the others take the TN-row boxes, whose rows past M cost less than a second box a
 * stage there (NOTES.md rows 200, 203). */
static constexpr bool sm90_partial_boxes(int tn) { return tn == 48 || tn == 64 || tn == 128; }

template <int TN, int WG, int ST, int BPS, bool P> static cudaError_t sm90_init_p(void)
{
    cudaError_t e = cudaFuncSetAttribute(gemm_sm90_w4_bf16_kernel<TN, WG, ST, BPS, 1, P>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)sm90_smem_bytes<TN, WG, ST, 1>());
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(gemm_sm90_w4_bf16_kernel<TN, WG, ST, BPS, 2, P>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)sm90_smem_bytes<TN, WG, ST, 2>());
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(gemm_sm90_w4_bf16_kernel<TN, WG, ST, BPS, 4, P>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)sm90_smem_bytes<TN, WG, ST, 4>());
    return e;
}
template <int TN, int WG, int ST, int BPS> static cudaError_t sm90_init_t(void)
{
    cudaError_t e = sm90_init_p<TN, WG, ST, BPS, false>();
    if constexpr (sm90_partial_boxes(TN))
        if (e == cudaSuccess) e = sm90_init_p<TN, WG, ST, BPS, true>();
    return e;
}

cudaError_t sm90_init(void)
{
    cudaError_t e = cudaSuccess;
#define QMM_SM90_INIT(tn, wg, st, bps) \
    if (e == cudaSuccess) e = sm90_init_t<tn, wg, st, bps>();
    QMM_SM90_CONFIGS(QMM_SM90_INIT)
#undef QMM_SM90_INIT
    if (e == cudaSuccess && !tensor_map_encoder()) e = cudaErrorNotSupported;
    return e;
}

template <int TN, int WG, int ST, int BPS> static cudaError_t sm90_cluster_ctas_t(int s, int *ctas)
{
    if (TN > QMM_SM90_CLUSTER_MAX_TOKENS) { /* its ring cannot receive a cluster's partials
                                             * (gemm_sm90_kernel.cuh) */
        *ctas = 0;
        return cudaSuccess;
    }
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = (unsigned)s;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(s * 64));
    cfg.blockDim = dim3(Sm90Shape<TN, WG, 1>::THREADS);
    cfg.dynamicSmemBytes = sm90_smem_bytes<TN, WG, ST, 1>();
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, gemm_sm90_w4_bf16_kernel<TN, WG, ST, BPS, 1>, &cfg);
    *ctas = clusters * s;
    return e;
}

cudaError_t sm90_cluster_ctas(int config, int s, int *ctas)
{
    int i = 0;
#define QMM_SM90_CLUSTERS(tn, wg, st, bps) \
    if (i++ == config) return sm90_cluster_ctas_t<tn, wg, st, bps>(s, ctas);
    QMM_SM90_CONFIGS(QMM_SM90_CLUSTERS)
#undef QMM_SM90_CLUSTERS
    return cudaErrorInvalidValue;
}

size_t sm90_workspace_bytes(int config, int ctas)
{
    const Sm90Config &c = sm90_configs[config];
    return (size_t)ctas * 2 * 64 * c.warpgroups * c.tile_tokens * sizeof(float);
}

template <int TN, int WG, int ST, int BPS, int GPB>
static cudaError_t launch_sm90_t(const CUtensorMap &map, const CUtensorMap &map_last, const Sm90Args &args,
                                 bool pdl, cudaStream_t stream)
{
    const dim3 grid((unsigned)args.ctas), block(Sm90Shape<TN, WG, GPB>::THREADS);
    const size_t smem = sm90_smem_bytes<TN, WG, ST, GPB>();
    if constexpr (sm90_partial_boxes(TN))
        if (args.last_rows)
            return launch_cluster_pdl(gemm_sm90_w4_bf16_kernel<TN, WG, ST, BPS, GPB, true>, grid, block, smem,
                                      stream, pdl, (unsigned)args.cluster, Sm90Maps<true>{map, map_last}, args);
    return launch_cluster_pdl(gemm_sm90_w4_bf16_kernel<TN, WG, ST, BPS, GPB, false>, grid, block, smem, stream,
                              pdl, (unsigned)args.cluster, Sm90Maps<false>{map}, args);
}

cudaError_t launch_sm90(int config, const Sm90Schedule &sched, const DevWeight &w,
                        const __nv_bfloat16 *a, int m, __nv_bfloat16 *c, void *workspace,
                        uint32_t *counters, bool pdl, cudaStream_t stream)
{
    if (config < 0 || config >= SM90_CONFIGS || !groups_per_block(w.group)) return cudaErrorInvalidValue;
    const Sm90Config &cf = sm90_configs[config];
    PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode) return cudaErrorNotSupported;

    /* A seen as [K/64 chunks][M rows][64]: one box {64, TN, 2} is a group's two swizzled
     * 64-wide chunks, stored chunk after chunk as the B descriptors expect */
    CUtensorMap map, map_last;
    cuuint64_t dims[3] = {64, (cuuint64_t)m, (cuuint64_t)(w.k / 64)};
    cuuint64_t strides[2] = {(cuuint64_t)w.k * 2, 128};
    cuuint32_t box[3] = {64, (cuuint32_t)cf.tile_tokens, 2};
    cuuint32_t elem[3] = {1, 1, 1};
    CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)a, dims, strides, box,
                        elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return cudaErrorInvalidValue;
    /* The 48-, 64- and 128-token tiles: a last token tile that M does not fill, by at least a fifth,
     * copied as boxes of its own rows, one a k half (H100, NOTES.md rows 200, 203: M = 33 / 40
     * −13…−19 % / −1…−12 %, 100 −3…−4 %, 200 −1…−14 %; but 8 rows short of 64 tokens +2…+4 %,
     * so there the boxes of TN rows stay; measured on the 64-token tile, taken by the 48-token
     * tile unmeasured). The wgmma columns of the rows not copied read
     * whatever the stage held; their outputs are never stored. */
    const int tail = m % cf.tile_tokens;
    const int last_rows = sm90_partial_boxes(cf.tile_tokens) && tail && (cf.tile_tokens - tail) * 5 >= cf.tile_tokens
                              ? tail
                              : 0;
    map_last = map;
    if (last_rows) {
        cuuint32_t box_last[3] = {64, (cuuint32_t)last_rows, 1};
        r = encode(&map_last, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)a, dims, strides, box_last, elem,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS) return cudaErrorInvalidValue;
    }

    Sm90Args args;
    args.packed = w.packed;
    args.sb = w.sb;
    args.c = c;
    args.partials = (float *)workspace;
    args.counters = counters;
    args.m = m;
    args.n = (int)w.n;
    args.n_pad = (int)w.n_pad;
    args.groups = (int)(w.k / 128);
    args.m_tiles = (m + cf.tile_tokens - 1) / cf.tile_tokens;
    args.n_tiles = (int)((w.n + 64 * cf.warpgroups - 1) / (64 * cf.warpgroups));
    const int64_t iters = (int64_t)args.m_tiles * args.n_tiles * args.groups;
    if (iters > INT32_MAX) return cudaErrorInvalidValue;
    args.iters = (int)iters;
    args.split = sched.split;
    args.cluster = qmm_sm90_cluster(cf.tile_tokens, sched.split);
    args.ctas = sched.split > 0 ? args.m_tiles * args.n_tiles * sched.split : sched.ctas;
    if (args.ctas < 1 || args.ctas > args.iters || sched.split > args.groups) return cudaErrorInvalidValue;
    const int rest = sched.rest_tiles;
    if (rest && (rest < 0 || args.cluster < 2 || rest >= args.m_tiles * args.n_tiles || sched.rest_split < 2 ||
                 sched.rest_split > args.groups || !workspace || !counters))
        return cudaErrorInvalidValue;
    /* stream-K on the 256-token tile: the full waves of whole tiles first (gemm_sm90_kernel.cuh) */
    const int tiles = args.m_tiles * args.n_tiles;
    args.dp_per_cta = sched.split == 0 && cf.tile_tokens > 128 ? tiles / args.ctas : 0;
    args.dp_tiles = args.dp_per_cta * args.ctas;
    const int share = sched.split > 0 ? args.groups : args.iters - args.dp_tiles * args.groups;
    const int parts = sched.split > 0 ? sched.split : args.ctas;
    args.q = share / parts;
    args.r = share % parts;
    args.vec_c = w.n % 8 == 0 && (uintptr_t)c % 16 == 0;
    args.by_split = sm90_div(sched.split > 0 ? sched.split : 1);
    args.by_groups = sm90_div(args.groups);
    args.by_m_tiles = sm90_div(args.m_tiles);
    /* the producer's start rules, by the launch's CTA count (tune/sm90.h): up to 16 tokens every
     * first stage goes out before the dependency wait, from two warps where the launch has more
     * than two CTAs a SM; 24-64 tokens in 64-row blocks at most one CTA a SM: every first
     * stage's weights first */
    auto start_rules = [&](Sm90Args &x) {
        x.two_warp_start = qmm_sm90_two_warp_start(cf.tile_tokens, x.ctas, sched.sms);
        x.all_weights_first = qmm_sm90_all_weights_first(cf.tile_tokens, 64 * cf.warpgroups, x.ctas, sched.sms);
    };
    start_rules(args);
    args.last_rows = last_rows;
    args.tile0 = args.trigger_early = args.wait_late = 0;

    const int gpb = groups_per_block(w.group);
    auto launch = [&](const Sm90Args &x, bool dependent) -> cudaError_t {
#define QMM_SM90_DISPATCH(tn, wg, st, bps)                                          \
    if (cf.tile_tokens == tn && cf.warpgroups == wg && cf.stages == st && cf.blocks_per_sm == bps) \
        return gpb == 1   ? launch_sm90_t<tn, wg, st, bps, 1>(map, map_last, x, dependent, stream) \
               : gpb == 2 ? launch_sm90_t<tn, wg, st, bps, 2>(map, map_last, x, dependent, stream) \
                          : launch_sm90_t<tn, wg, st, bps, 4>(map, map_last, x, dependent, stream);
        QMM_SM90_CONFIGS(QMM_SM90_DISPATCH)
#undef QMM_SM90_DISPATCH
        return cudaErrorInvalidValue;
    };
    if (!rest) return launch(args, pdl);
    /* The clusters' one wave and the tiles left over (NOTES.md row 228): a launch of the first
     * tiles - rest tiles in clusters, then, as its programmatic dependent, the rest split through
     * the workspace. The clusters let it start right after their dependency wait, so its CTAs
     * are placed after every cluster, on the SMs the clusters leave free (launched side by side
     * on two streams, they ran no faster: row 227); it reads only what that wait made
     * ready, and waits for the clusters at its end, so that its end is the pair's. */
    Sm90Args first = args, aside = args;
    first.iters = (tiles - rest) * args.groups;
    first.ctas = (tiles - rest) * args.split;
    first.trigger_early = 1;
    aside.tile0 = tiles - rest;
    aside.split = sched.rest_split;
    aside.cluster = 1;
    aside.ctas = rest * sched.rest_split;
    aside.q = args.groups / sched.rest_split;
    aside.r = args.groups % sched.rest_split;
    aside.by_split = sm90_div(sched.rest_split);
    aside.wait_late = 1;
    start_rules(first);
    start_rules(aside);
    const cudaError_t e = launch(first, pdl);
    return e == cudaSuccess ? launch(aside, true) : e;
}

} // namespace qmm
