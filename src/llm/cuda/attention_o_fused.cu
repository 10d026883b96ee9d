/*
 * Experiment (off unless QMM_DECODE_ATTN_O=fused: bench/NOTES.md row 202,
 * bench/research-decode-chain.md §5): the decode step's attention and o projection in one
 * kernel while the context is one split, so that the o matvec neither waits for the attention's
 * grid nor stages its input from L2.
 *
 * Grid: clusters of kv_heads CTAs of 512 threads, one cluster for every kv_heads row sets of o
 * (a row set: AO_TPC 16-row tiles, the matvec's tile map mv_tile_lg); CTA g of a cluster is KV
 * head g and row set blockIdx.x. A CTA:
 *   1. asks for its o weights (every group of its tiles, 1 KB a (tile, group), and their
 *      scale|bias words) by bulk copies before the dependency wait: weights never depend on it;
 *   2. warps 0-7: KV head g's G query heads' attention over the whole context
 *      (attn_decode_block with one split, its heads the mma's columns; cluster 0 appends the new
 *      K/V row), the G · HD outputs to its shared memory; warps 8-15 wait for the predecessor;
 *   3. a cluster barrier, then every CTA copies the kv_heads CTAs' outputs (DSMEM) into its
 *      activation row: the whole attention output, so no partial sum leaves the CTA;
 *   4. its tiles times that row: 16 warps, a warp a tile's eighth of the groups, the matvec's
 *      exact-code arithmetic (mv_group); the eighths added in order; the matvec's residual
 *      epilogue (x += bf16(y), bf16(x · γ), Σx² of each tile);
 *   5. a last cluster barrier before exit (its outputs stay readable until every peer copied).
 * Numerics: the attention is attn_decode_block's (a block of G heads instead of the one-head
 * blocks the fused kernel runs at one split), o's groups are summed in another order than the o
 * matvec's: the step agrees with the unfused one within rounding, not bitwise. Every step of a
 * session that takes it (one split throughout: session.cu) runs it, eager or in a graph.
 */
#include "cuda/hopper.cuh"
#include "cuda/matvec_epilogue.cuh"
#include "cuda/matvec_group.cuh"
#include "llm/cuda/attention_decode_block.cuh"
#include "llm/cuda/pdl.cuh"

namespace qmm_llm {

constexpr int AO_THREADS = 512, AO_WARPS = AO_THREADS / 32;
constexpr int AO_TPC = 2;                 /* 16-row tiles of o a CTA (a row set: mv_tile_lg, lr 1) */
constexpr int AO_PARTS = AO_WARPS / AO_TPC; /* warps a tile, each a part of the groups */

struct AoArgs {
    const bf16 *q, *k, *v, *qw, *kw;
    const float *cos_t, *sin_t;
    float eps;
    const int32_t *pos;
    int64_t max_seq;
    bf16 *kc, *vc;
    qmm::MatvecArgs o; /* the o weight, m = 1, and the residual epilogue's arrays */
    int sets;          /* row sets with tiles: ceil(n_pad / 16 / AO_TPC) */
    unsigned long long *stamp;
};

/* Shared memory: the attention's (ad_layout), the weights [AO_TPC][groups] of 1 KB and their
 * scale|bias [AO_TPC][groups] of 64 bytes, the activation row (k bf16), this CTA's G heads'
 * outputs, the warps' sums [AO_WARPS][16], the tiles' sums, inv, the weights' barrier. */
template <int HD, int G>
struct AoSmem {
    size_t w, sb, act, outl, red, ys, inv, bar, bytes;
    __host__ __device__ AoSmem(int groups, int k)
    {
        w = (ad_layout<HD, G>::BYTES + 127) / 128 * 128;
        sb = w + (size_t)AO_TPC * groups * 1024;
        act = sb + (size_t)AO_TPC * groups * 64;
        outl = act + ((size_t)k * 2 + 127) / 128 * 128;
        red = outl + (G * HD * 2 + 127) / 128 * 128;
        ys = red + AO_WARPS * 16 * 4;
        inv = ys + AO_TPC * 16 * 4;
        bar = inv + 16 * 4;
        bytes = bar + 16;
    }
};

/* The attention's barrier among warps 0-7, and their dependency wait (and the trigger). */
struct AoAttnSync {
    unsigned long long *stamp;
    __device__ void sync() const { qmm::named_barrier(1, AD_THREADS); }
    __device__ void wait() const { pdl_wait_trigger(stamp); }
#ifdef QMM_AD_TRACE
    __device__ void phase(int) const {} /* the fused kernel's trace only */
#endif
};

template <int HD, int G>
__global__ void __launch_bounds__(AO_THREADS, 1) attn_o_fused_kernel(const AoArgs a)
{
    extern __shared__ __align__(128) unsigned char smem[];
    stamp_start(a.stamp);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int kvh = (int)qmm::cluster_size(), g = (int)qmm::cluster_rank(), set = blockIdx.x;
    const int groups = a.o.k >> 7, n_tiles = (int)(a.o.n_pad / 16);
    const AoSmem<HD, G> L(groups, a.o.k);
    uint64_t *wbar = reinterpret_cast<uint64_t *>(smem + L.bar);
    bf16 *outl = reinterpret_cast<bf16 *>(smem + L.outl);
    const bool rows = set < a.sets; /* the last cluster's CTAs past the row sets: attention only */
    if (tid == 0) {
        qmm::mbar_init(wbar, 1);
        qmm::mbar_fence_init();
    }
    __syncthreads();
    if (warp == 8 && rows) { /* 1. the o weights, before the dependency wait */
        uint32_t bytes = 0;
        for (int i = 0; i < AO_TPC; i++)
            if (qmm::mv_tile_lg(set, i, 1) < n_tiles) bytes += (uint32_t)groups * (1024 + 64);
        if (lane == 0) qmm::mbar_arrive_expect_tx(wbar, bytes);
        __syncwarp();
        const uint64_t pol = qmm::policy_evict_first();
        for (int j = lane; j < AO_TPC * groups; j += 32) {
            const int i = j / groups, gr = j % groups, tile = qmm::mv_tile_lg(set, i, 1);
            if (tile >= n_tiles) continue;
            qmm::bulk_copy(smem + L.w + (size_t)j * 1024,
                           a.o.packed + ((int64_t)(tile >> 3) * groups + gr) * 2048 + (tile & 7) * 256, 1024,
                           wbar, pol);
            qmm::bulk_copy_plain(smem + L.sb + (size_t)j * 64, a.o.sb + (int64_t)gr * a.o.n_pad + tile * 16, 64,
                                 wbar);
        }
    }
    /* the residual epilogue's first rows' γ now (a weight), their x after the wait */
    qmm::MvResidualPre pre;
    qmm::mv_residual_pre_weights(a.o, pre, set, 1, 0);

    if (warp < AD_THREADS / 32) /* 2. KV head g's heads; cluster 0 appends the new row */
        attn_decode_block<HD, G, AoAttnSync, false, false, true>(
            a.q, a.k, a.v, a.qw, a.kw, a.cos_t, a.sin_t, a.eps, a.pos, a.max_seq, 1, a.kc, a.vc, nullptr,
            nullptr, outl, g, 0, kvh, smem, AoAttnSync{a.stamp}, (int)blockIdx.x < kvh);
    else
        pdl_wait(); /* pdl.cuh: every thread reading activations waits first */
    qmm::mv_residual_pre_x(pre);

    /* 3. every KV head's outputs (G · HD bf16 a CTA) into the activation row */
    qmm::cluster_arrive(); /* release: this CTA's outputs */
    qmm::cluster_wait();
    {
        constexpr int PER = G * HD * 2 / 16; /* 16-byte pieces a KV head */
        const uint32_t src = qmm::smem_u32(outl);
        for (int e = tid; e < kvh * PER; e += AO_THREADS) {
            const int r = e / PER, j = e % PER;
            const float4 v = qmm::ld_cluster_f4(qmm::cluster_map(src + 16 * j, (uint32_t)r));
            *reinterpret_cast<float4 *>(smem + L.act + (size_t)r * G * HD * 2 + 16 * j) = v;
        }
    }
    qmm::cluster_arrive(); /* this CTA has read its peers' outputs: waited for before exit */
    __syncthreads();

    /* 4. warp w: tile w % AO_TPC, the groups of part w / AO_TPC */
    float *red = reinterpret_cast<float *>(smem + L.red), *ys = reinterpret_cast<float *>(smem + L.ys);
    float *inv = reinterpret_cast<float *>(smem + L.inv);
    if (rows) {
        qmm::mbar_wait(wbar, 0);
        const int i = warp % AO_TPC, part = warp / AO_TPC, g8 = lane / 4, t4 = lane % 4;
        const int g0 = part * groups / AO_PARTS, g1 = (part + 1) * groups / AO_PARTS;
        const bf16 *act = reinterpret_cast<const bf16 *>(smem + L.act);
        const uint32_t arow[1] = {qmm::smem_u32(act + 16 * (lane / 16) + 8 * ((lane / 8) % 2))};
        const uint32_t srow = qmm::smem_u32(act + 16 * (lane % 8) + 8 * ((lane / 8) % 2));
        const uint32_t magic = qmm::codes_magic(1);
        float acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
        for (int gr = g0; gr < g1; gr++) {
            const int j = i * groups + gr;
            const uint32_t *w = reinterpret_cast<const uint32_t *>(smem + L.w + (size_t)j * 1024);
            const uint32_t *sbw = reinterpret_cast<const uint32_t *>(smem + L.sb + (size_t)j * 64);
            const uint4 lo = qmm::lds128(w + lane * 4), hi = qmm::lds128(w + 128 + lane * 4);
            const uint32_t sl[1] = {qmm::lds32(sbw + g8)}, sh[1] = {qmm::lds32(sbw + g8 + 8)};
            qmm::mv_group<1, true, 1>(acc, lo, hi, sl, sh, arow, srow, gr, magic);
        }
        if (t4 == 0) { /* column 0: the one token */
            red[warp * 16 + g8] = acc[0][0];
            red[warp * 16 + g8 + 8] = acc[0][2];
        }
    }
    __syncthreads();
    if (rows && tid < AO_TPC * 16) { /* the parts of tile i added in order */
        const int i = tid / 16, r = tid % 16;
        float s = 0.f;
        for (int part = 0; part < AO_PARTS; part++) s += red[(part * AO_TPC + i) * 16 + r];
        ys[i * 16 + r] = s;
        if (tid == 0) inv[0] = 1.f;
    }
    __syncthreads();
    if (rows) qmm::mv_epilogue(a.o, ys, inv, set, 1, pre);

    qmm::cluster_wait(); /* 5. every peer has copied this CTA's outputs */
    __syncthreads();
    stamp_end(a.stamp);
}

/* kv_heads <= 8: a portable cluster, and K = heads · 128 <= 4 096 (AO_MAX_K: the shared memory
 * opted in once); n_pad a multiple of 128, as the device layout pads it, so that the row sets'
 * tile map (mv_tile_lg) covers every tile; the bulk copies' 16-byte alignment. Only the <128, 4>
 * instance is built (Qwen3-4B's geometry, the experiment's subject): other groups, Qwen3-14B's
 * 5 among them (its K = 5 120 is past AO_MAX_K too), are refused, and the session keeps the
 * fused attention kernel and the o matvec for them (llm_attention_o_fusable). */
constexpr int AO_MAX_K = 4096;
int attention_o_fused_supported(int hd, int heads, int kv_heads, const qmm::MatvecArgs &o)
{
    return hd == 128 && kv_heads >= 1 && kv_heads <= 8 && heads == 4 * kv_heads && o.k == heads * hd &&
           o.k <= AO_MAX_K && o.group == 128 && o.n > 0 && o.n <= o.n_pad && o.n_pad % 128 == 0 &&
           o.epi == qmm::MV_EPI_RESIDUAL && o.ldc >= o.n && (((uintptr_t)o.packed | (uintptr_t)o.sb) & 15) == 0;
}

cudaError_t launch_attention_o_fused(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *qw,
                                     const bf16 *kw, const float *cos_t, const float *sin_t, float eps,
                                     const int32_t *pos, int heads, int kv_heads, int hd, int64_t max_seq,
                                     bf16 *kc, bf16 *vc, const qmm::MatvecArgs &o, cudaStream_t stream,
                                     const llm_launch *ln)
{
    if (!attention_o_fused_supported(hd, heads, kv_heads, o) || !o.x || (o.xg && !o.gamma))
        return cudaErrorInvalidValue;
    AoArgs a = {q, k, v, qw, kw, cos_t, sin_t, eps, pos, max_seq, kc, vc, o, 0, stamp_of(ln)};
    a.o.m = 1;
    a.sets = (int)(o.n_pad / 16 / AO_TPC);
    const int clusters = (a.sets + kv_heads - 1) / kv_heads;
    const size_t bytes = AoSmem<128, 4>(o.k / 128, o.k).bytes;
    static int opted[64]; /* once a device, for the largest K taken */
    cudaError_t e = llm_opt_in_smem(attn_o_fused_kernel<128, 4>, (int)AoSmem<128, 4>(AO_MAX_K / 128, AO_MAX_K).bytes,
                                    opted);
    if (e != cudaSuccess) return e;
    e = qmm::launch_cluster_pdl(attn_o_fused_kernel<128, 4>, dim3((unsigned)(clusters * kv_heads)),
                                dim3(AO_THREADS), bytes, stream, ln && ln->pdl, (unsigned)kv_heads, a);
    return e != cudaSuccess ? e : cudaGetLastError();
}

} // namespace qmm_llm
