/*
 * Prefill attention on Hopper's warpgroup MMA (head dim 128; bench/NOTES.md rows 180, 181, 185,
 * 186): the engine's default on sm_90, a tile at a time below 1 024 tokens a forward and
 * pipelined from there (session.h); QMM_PREFILL_ATTN=wgmma or wgmma_pipe forces one schedule.
 *
 * The mma.sync kernel (attention_mma.cu) gives each warp 16 query rows and has every warp read
 * the whole K and V tile from shared memory by ldmatrix: 32 KB of shared-memory reads a warp a
 * 64-key tile for 0.5 MFLOP. Here a warpgroup owns 64 rows and both products are wgmma with the
 * A operand in registers, B read by the tensor cores straight from shared memory once a
 * warpgroup:
 *   S = Q·Kᵀ  m64n64k16, eight k-steps over the head dim (Q's fragments loaded once);
 *   O += P·V  m64n128k16, four k-steps over the tile's keys (P from S's accumulators: the
 *             accumulator layout of two adjacent 8-key columns is the A fragment of a k-step,
 *             as in the mma.sync kernel).
 * A block is two warpgroups (128 query rows of one head, the longest rows launched first) and
 * walks key tiles of 64 copied by cp.async three stages deep (two tiles in flight while one is
 * multiplied, one barrier a tile) into the 128-byte-swizzled layout wgmma reads: a key's 64
 * dims of a panel in one 128-byte row (16-byte chunk c of row j at chunk c ^ (j % 8)), panels
 * of dims 0..63 and 64..127 one after the other. K is the K-major B operand of Q·Kᵀ; V, in
 * the same rows, the N-major B operand of P·V (read transposed). The copies are the generic
 * proxy's and wgmma reads through the async proxy, hence the proxy fence before each tile's
 * barrier. A warpgroup whose rows see none of a tile's keys skips it (its exponentials would
 * all be 0 and its maxima unchanged: the same result).
 * Two schedules (PIPE): a tile at a time, each product awaited before the next step; or
 * pipelined as FlashAttention-3 does within a warpgroup, the next tile's S on the tensor cores
 * during this tile's softmax and this tile's P·V during the next softmax (five stages, three
 * tiles copied ahead; every warpgroup walks every tile, adding the zero products of a tile its
 * rows do not see). The same arithmetic in the same order otherwise.
 * Masking, the softmax in log2 units and the numerics (P rounded to bf16 for P·V, the row sums
 * from the fp32 values) are the mma.sync kernel's; the products' fp32 sums run in the tensor
 * cores' order, so the bits differ from that kernel's (the op table checks both against the CPU).
 *
 * Fragment layouts (PTX ISA, wgmma m64nNk16), warp w of the warpgroup, g = lane / 4, t = lane % 4:
 *   A 64x16 (registers): a0 (16w + g, 2t..2t+1), a1 (16w + g + 8, 2t..), a2 (16w + g, 2t+8..),
 *                        a3 (16w + g + 8, 2t+8..)
 *   D 64xN: d[4j], d[4j+1] (16w + g, 8j + 2t..2t+1), d[4j+2], d[4j+3] (16w + g + 8, 8j + 2t..)
 */
#include <math.h>

#include "cuda/hopper.cuh"
#include "llm/cuda/llm_kernels.cuh"
#include "llm/cuda/mma_sync.cuh"

namespace qmm_llm {

constexpr int WA_HD = 128, WA_BQ = 128, WA_BK = 64, WA_THREADS = 256;
constexpr int WA_PANEL = WA_BK * 128;                 /* 64 dims of the tile's 64 keys: 8 KB */
constexpr int WA_TILE = 2 * WA_PANEL;                 /* K or V: two panels */
constexpr int WA_STAGE = 2 * WA_TILE;                 /* K then V: 32 KB */
constexpr int WA_KSTEPS = WA_HD / 16;                 /* k-steps of Q·Kᵀ */
static_assert(WA_BK * WA_HD / 8 % WA_THREADS == 0, "a tile's 16-byte chunks: a whole number a thread");
/* the ring: tiles copied AHEAD ahead of the one multiplied, in STAGES stages (pipelined: the
 * next tile's S is issued before this one's softmax, so one more tile must have landed, and a
 * tile's P·V is awaited one tile later, so its stage is refilled one tile later) */
template <bool PIPE> struct wa_ring {
    static constexpr int AHEAD = PIPE ? 3 : 2, STAGES = PIPE ? 5 : 3;
    static constexpr int SMEM = STAGES * WA_STAGE + 1024; /* + the swizzle's 1024-byte alignment */
};

/* One thread's two rows (a = g, b = g + 8 of its warp's 16): validity, positions, the online
 * softmax's running max m and this thread's share l of the row sum. */
struct wa_rows {
    bool va, vb;
    int64_t qa, qb, rw; /* positions of rows a, b; the warp's first row (index) */
    float ma, mb, la, lb;
};

/* Issues S = Q·Kᵀ for the K tile at ks (eight m64n64k16, committed as one group; not awaited):
 * s[4n + e] is key 8n + 2t + (e & 1) of the tile for row a (e < 2) or b. */
__device__ __forceinline__ void wa_issue_qk(float (&s)[WA_BK / 2], const uint32_t (&qf)[WA_KSTEPS][4],
                                            uint32_t ks)
{
    using namespace qmm;
#pragma unroll
    for (int e = 0; e < WA_BK / 2; e++) {
        s[e] = 0.0f;
        fence_reg(s[e]); /* the zeros written before the fence, not sunk past it */
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < WA_KSTEPS; kk++)
        WgmmaRS<WA_BK>::mma(s, qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3],
                            desc_k128b(ks + (kk / 4) * WA_PANEL + (kk % 4) * 32));
    wgmma_commit();
}

/* The online softmax of a tile's scores (keys k0..k0 + 63) in place: masked, scaled to log2
 * units, exponentiated against the new row maxima; the running sums updated. Returns the old
 * accumulators' factors in *aa, *ab (1 where no row's max moved). */
__device__ __forceinline__ void wa_softmax(float (&s)[WA_BK / 2], wa_rows &r, int64_t k0, int64_t p0,
                                           int t, float scale, float *aa, float *ab)
{
    float ta = -INFINITY, tb = -INFINITY;
    if (k0 + WA_BK - 1 <= p0 + r.rw) { /* warp-uniform: every key visible to every row */
#pragma unroll
        for (int n = 0; n < WA_BK / 8; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) s[4 * n + e] *= scale;
            ta = fmaxf(ta, fmaxf(s[4 * n], s[4 * n + 1]));
            tb = fmaxf(tb, fmaxf(s[4 * n + 2], s[4 * n + 3]));
        }
    } else {
#pragma unroll
        for (int n = 0; n < WA_BK / 8; n++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int64_t kp = k0 + 8 * n + 2 * t + e;
                s[4 * n + e] = (r.va && kp <= r.qa) ? s[4 * n + e] * scale : -INFINITY;
                s[4 * n + 2 + e] = (r.vb && kp <= r.qb) ? s[4 * n + 2 + e] * scale : -INFINITY;
                ta = fmaxf(ta, s[4 * n + e]);
                tb = fmaxf(tb, s[4 * n + 2 + e]);
            }
        }
    }
    /* the 4 threads of a row are lanes 4g..4g+3 */
    ta = fmaxf(ta, __shfl_xor_sync(0xffffffffu, ta, 1));
    ta = fmaxf(ta, __shfl_xor_sync(0xffffffffu, ta, 2));
    tb = fmaxf(tb, __shfl_xor_sync(0xffffffffu, tb, 1));
    tb = fmaxf(tb, __shfl_xor_sync(0xffffffffu, tb, 2));
    const float na = fmaxf(r.ma, ta), nb = fmaxf(r.mb, tb);
    /* a row with no visible key yet keeps alpha 1 and p 0 (no inf - inf) */
    *aa = na == -INFINITY ? 1.0f : ex2(r.ma - na);
    *ab = nb == -INFINITY ? 1.0f : ex2(r.mb - nb);
    r.ma = na, r.mb = nb;
    float sa = 0.0f, sb = 0.0f;
#pragma unroll
    for (int n = 0; n < WA_BK / 8; n++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            s[4 * n + e] = na == -INFINITY ? 0.0f : ex2(s[4 * n + e] - na);
            s[4 * n + 2 + e] = nb == -INFINITY ? 0.0f : ex2(s[4 * n + 2 + e] - nb);
            sa += s[4 * n + e];
            sb += s[4 * n + 2 + e];
        }
    }
    r.la = r.la * *aa + sa;
    r.lb = r.lb * *ab + sb;
}

/* O *= the factors (skipped when no row of the warp moved its max), then issues O += P·V for
 * the V tile at vs (four m64n128k16, one group; not awaited): k-step kk takes keys
 * 16kk..16kk+15, i.e. S's columns 2kk and 2kk + 1, whose accumulators are its A fragment pa[kk];
 * V's rows of those keys are two 8-row atoms, 2048 bytes a k-step. The caller keeps pa (the
 * wgmma reads it from the registers until the group completes) and fences it after its wait. */
__device__ __forceinline__ void wa_issue_pv(float (&o)[WA_HD / 2], uint32_t (&pa)[WA_BK / 16][4],
                                            const float (&s)[WA_BK / 2], float aa, float ab,
                                            uint32_t vs)
{
    using namespace qmm;
    if (__any_sync(0xffffffffu, aa != 1.0f || ab != 1.0f)) { /* a row's max moved */
#pragma unroll
        for (int j = 0; j < WA_HD / 8; j++) {
            o[4 * j] *= aa, o[4 * j + 1] *= aa;
            o[4 * j + 2] *= ab, o[4 * j + 3] *= ab;
        }
    }
#pragma unroll
    for (int kk = 0; kk < WA_BK / 16; kk++) {
        pa[kk][0] = pack_bf16(s[8 * kk], s[8 * kk + 1]);
        pa[kk][1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
        pa[kk][2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
        pa[kk][3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
#pragma unroll
        for (int r = 0; r < 4; r++) fence_reg(pa[kk][r]);
    }
#pragma unroll
    for (int e = 0; e < WA_HD / 2; e++) fence_reg(o[e]); /* the rescale, before the fence */
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < WA_BK / 16; kk++)
        WgmmaRSN<WA_HD>::mma(o, pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3],
                             desc_n128b(vs + kk * 2048, WA_PANEL));
    wgmma_commit();
}

/* After a wgmma group's wait: its registers read back from here on (the compiler neither
 * hoists reads above the wait nor reuses an in-flight operand's registers before it). */
template <int N> __device__ __forceinline__ void wa_fence_all(float (&r)[N])
{
#pragma unroll
    for (int e = 0; e < N; e++) qmm::fence_reg(r[e]);
}
__device__ __forceinline__ void wa_fence_all(uint32_t (&pa)[WA_BK / 16][4])
{
#pragma unroll
    for (int kk = 0; kk < WA_BK / 16; kk++)
#pragma unroll
        for (int e = 0; e < 4; e++) qmm::fence_reg(pa[kk][e]);
}

// q is [m, heads*128] (rows q_stride apart), out [m, heads*128]; kc, vc one layer's cache
// [kv_heads, max_seq, 128]. PIPE: the pipelined schedule (see the loop).
template <bool PIPE>
__global__ void __launch_bounds__(WA_THREADS, 1)
    attn_prefill_wgmma_kernel(const bf16 *__restrict__ q, int64_t q_stride,
                              const bf16 *__restrict__ kc, const bf16 *__restrict__ vc,
                              const int32_t *__restrict__ pos, int m, int heads, int kv_heads,
                              int64_t max_seq, bf16 *__restrict__ out, unsigned long long *stamp)
{
    using namespace qmm;
    using RG = wa_ring<PIPE>;
    extern __shared__ __align__(16) uint8_t wa_raw[]; /* aligned below, at run time */
    const uint32_t raw = smem_u32(wa_raw);
    uint8_t *smem = wa_raw + ((1024 - (raw & 1023)) & 1023); /* the swizzle's 1024-byte atoms */
    const uint32_t sbase = smem_u32(smem);

    const int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32;
    const int g = lane >> 2, t = lane & 3;
    const int h = blockIdx.y, kvh = h / (heads / kv_heads);
    const int r0 = (gridDim.x - 1 - blockIdx.x) * WA_BQ; /* the longest rows first */
    const int64_t p0 = *pos;
    const int64_t qd = (int64_t)heads * WA_HD;
    wa_rows r;
    r.rw = r0 + wg * 64 + warp * 16;          /* first row of this warp */
    const int ra = (int)r.rw + g, rb = ra + 8; /* the thread's two rows */
    r.va = ra < m, r.vb = rb < m;
    r.qa = p0 + ra, r.qb = p0 + rb;
    r.ma = r.mb = -INFINITY, r.la = r.lb = 0.0f;
    const int rows_here = min(WA_BQ, m - r0);
    const int64_t kend = p0 + r0 + rows_here;
    /* keys before wg_end are visible to some row of this warpgroup (none: 0) */
    const int wg_rows = min(64, m - (r0 + wg * 64));
    const int64_t wg_end = wg_rows > 0 ? p0 + r0 + wg * 64 + wg_rows : 0;

    stamp_start(stamp);
    pdl_wait_trigger(stamp); /* this prompt's cache rows and q come from the kernel before */
    const int ntiles = (int)((kend + WA_BK - 1) / WA_BK);
    const bf16 *K = kc + (int64_t)kvh * max_seq * WA_HD, *V = vc + (int64_t)kvh * max_seq * WA_HD;
    /* tile i into stage i % STAGES, swizzled; keys at or past kend are zero-filled (and
     * masked); past the last tile an empty group, so that every thread counts one a tile */
    auto load = [&](int i) {
        if (i >= ntiles) {
            cp_commit();
            return;
        }
        uint8_t *ks = smem + (i % RG::STAGES) * WA_STAGE, *vs = ks + WA_TILE;
        const int64_t k0 = (int64_t)i * WA_BK;
#pragma unroll 1 /* rolled: fewer live addresses (unrolled, the pipelined kernel took 254
                   * registers of 255) */
        for (int n = 0; n < WA_BK * WA_HD / 8 / WA_THREADS; n++) {
            const int c = tid + n * WA_THREADS;
            const int j = c / (WA_HD / 8), d16 = c % (WA_HD / 8); /* key, 16-byte chunk */
            const int64_t kp = k0 + j;
            const bool ok = kp < kend;
            const int64_t off = (ok ? kp : 0) * WA_HD + d16 * 8;
            const int so = (d16 / 8) * WA_PANEL + j * 128 + (((d16 % 8) ^ (j % 8)) * 16);
            cp16_zfill(ks + so, K + off, ok);
            cp16_zfill(vs + so, V + off, ok);
        }
        cp_commit();
    };
#pragma unroll
    for (int i = 0; i < RG::AHEAD; i++) load(i);
    auto stage = [&](int i) { return sbase + (uint32_t)((i % RG::STAGES) * WA_STAGE); };
    /* the warpgroup multiplies tile i (warpgroup-uniform: wgmma wants all its 128 threads) */
    auto active = [&](int i) { return (int64_t)i * WA_BK < wg_end; };

    uint32_t qf[WA_KSTEPS][4];
    const bf16 *qra = q + (int64_t)ra * q_stride + (int64_t)h * WA_HD;
    const bf16 *qrb = q + (int64_t)rb * q_stride + (int64_t)h * WA_HD;
#pragma unroll
    for (int kk = 0; kk < WA_KSTEPS; kk++) {
        qf[kk][0] = ld_pair(qra + kk * 16 + 2 * t, r.va);
        qf[kk][1] = ld_pair(qrb + kk * 16 + 2 * t, r.vb);
        qf[kk][2] = ld_pair(qra + kk * 16 + 8 + 2 * t, r.va);
        qf[kk][3] = ld_pair(qrb + kk * 16 + 8 + 2 * t, r.vb);
    }
    float o[WA_HD / 2]; /* d of m64n128: dims 8j + 2t.., rows a (4j, 4j+1) and b (4j+2, 4j+3) */
#pragma unroll
    for (int e = 0; e < WA_HD / 2; e++) o[e] = 0.0f;
    uint32_t pa[WA_BK / 16][4] = {}; /* P's A fragments of the P·V in flight */
    const float scale = 1.4426950408889634f / sqrtf((float)WA_HD); /* log2 e / sqrt(HD) */

    if constexpr (!PIPE) {
        /* a tile at a time: S, its softmax, P·V, each product awaited before the next step */
        for (int i = 0; i < ntiles; i++) {
            cp_wait_group<RG::AHEAD - 1>(); /* this thread's copies of tile i have landed */
            fence_proxy_async_shared();     /* ... ordered before the tensor cores read them */
            __syncthreads(); /* tile i is in for every thread, and every warpgroup is done with
                              * tile i - 1 (its last wgmma awaited): its stage takes tile i + 2 */
            load(i + RG::AHEAD);
            if (active(i)) {
                float s[WA_BK / 2], aa, ab;
                wa_issue_qk(s, qf, stage(i));
                wgmma_wait<0>();
                wa_fence_all(s);
                wa_softmax(s, r, (int64_t)i * WA_BK, p0, t, scale, &aa, &ab);
                wa_issue_pv(o, pa, s, aa, ab, stage(i) + WA_TILE);
                wgmma_wait<0>(); /* before the next tile's barrier hands this stage to a copy */
                wa_fence_all(o);
                wa_fence_all(pa);
            }
        }
    } else {
        /* pipelined (FlashAttention-3's intra-warpgroup overlap): tile i + 1's S runs on the
         * tensor cores during tile i's softmax, and tile i's P·V during tile i + 1's, up to the
         * rescale of O, which waits for it. Iteration i: (a) tiles up to i + 1 have landed;
         * (b) one barrier; (c) S(i + 1) is issued; (d) tile i + 3 is copied into the stage of
         * tile i - 2, whose P·V every warpgroup awaited in iteration i - 1; (e) S(i)'s softmax
         * runs, P·V(i - 1) is awaited, O rescaled, P·V(i) issued, S(i + 1) awaited. ptxas keeps
         * wgmma groups in flight only across straight-line code and the loop's back edge, so
         * every warpgroup walks every tile (a tile none of its rows sees adds only zero
         * products, where row 180 skips it) and the last tile is peeled. */
        float sc[WA_BK / 2], sn[WA_BK / 2]; /* S of tiles i and i + 1 */
        auto top = [&]() {
            cp_wait_group<RG::AHEAD - 2>(); /* this thread's copies of tile i + 1 have landed */
            fence_proxy_async_shared();
            __syncthreads();
        };
        auto steady = [&](int i, float (&cur)[WA_BK / 2], float (&nxt)[WA_BK / 2]) {
            top();
            wa_issue_qk(nxt, qf, stage(i + 1)); /* first: the tensor cores start sooner */
            load(i + RG::AHEAD);
            float aa, ab;
            wa_softmax(cur, r, (int64_t)i * WA_BK, p0, t, scale, &aa, &ab);
            wgmma_wait<1>(); /* P·V(i - 1), issued before S(i + 1) */
            wa_fence_all(o);
            wa_fence_all(pa);
            wa_issue_pv(o, pa, cur, aa, ab, stage(i) + WA_TILE);
            wgmma_wait<1>(); /* S(i + 1); P·V(i) stays in flight */
            wa_fence_all(nxt);
        };
        auto last = [&](int i, float (&cur)[WA_BK / 2]) {
            top();
            load(i + RG::AHEAD); /* an empty group: every thread counts one a tile */
            float aa, ab;
            wa_softmax(cur, r, (int64_t)i * WA_BK, p0, t, scale, &aa, &ab);
            wgmma_wait<0>(); /* P·V(i - 1) */
            wa_fence_all(o);
            wa_fence_all(pa);
            wa_issue_pv(o, pa, cur, aa, ab, stage(i) + WA_TILE);
            wgmma_wait<0>();
            wa_fence_all(o);
            wa_fence_all(pa);
        };
        cp_wait_group<RG::AHEAD - 1>(); /* tile 0 */
        fence_proxy_async_shared();
        __syncthreads();
        wa_issue_qk(sc, qf, stage(0));
        wgmma_wait<0>();
        wa_fence_all(sc);
        int i = 0;
        for (; i + 2 < ntiles; i += 2) { /* two a trip: S's registers swap roles */
            steady(i, sc, sn);
            steady(i + 1, sn, sc);
        }
        if (i + 1 < ntiles) {
            steady(i, sc, sn);
            last(i + 1, sn);
        } else {
            last(i, sc);
        }
    }
    /* the row sums: this thread's share + the other 3 threads of the row */
    float la = r.la, lb = r.lb;
    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    bf16 *oa = out + (int64_t)ra * qd + (int64_t)h * WA_HD;
    bf16 *ob = out + (int64_t)rb * qd + (int64_t)h * WA_HD;
#pragma unroll
    for (int j = 0; j < WA_HD / 8; j++) {
        const int d = 8 * j + 2 * t;
        if (r.va)
            *reinterpret_cast<__nv_bfloat162 *>(oa + d) =
                __floats2bfloat162_rn(o[4 * j] / la, o[4 * j + 1] / la);
        if (r.vb)
            *reinterpret_cast<__nv_bfloat162 *>(ob + d) =
                __floats2bfloat162_rn(o[4 * j + 2] / lb, o[4 * j + 3] / lb);
    }
    if (stamp) { /* uniform over the block */
        __syncthreads();
        stamp_end(stamp);
    }
}

int attention_prefill_wgmma_supported(int hd)
{
    int dev = 0, major = 0, minor = 0;
    if (hd != WA_HD || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return 0;
    return major == 9 && minor == 0;
}

template <bool PIPE>
static cudaError_t launch_wgmma(dim3 grid, const bf16 *q, int64_t q_stride, const bf16 *kc,
                                const bf16 *vc, const int32_t *pos, int m, int heads, int kv_heads,
                                int64_t max_seq, bf16 *out, cudaStream_t stream,
                                const llm_launch *ln)
{
    constexpr int bytes = wa_ring<PIPE>::SMEM;
    static int opted[64]; /* per device: the opt-in above 48 KB of shared memory is made */
    cudaError_t e = llm_opt_in_smem(attn_prefill_wgmma_kernel<PIPE>, bytes, opted);
    if (e != cudaSuccess) return e;
    e = llm_launch_kernel(attn_prefill_wgmma_kernel<PIPE>, grid, dim3(WA_THREADS), bytes, stream,
                          ln, q, q_stride, kc, vc, pos, m, heads, kv_heads, max_seq, out,
                          stamp_of(ln));
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t launch_attention_prefill_wgmma(const bf16 *q, int64_t q_stride, const bf16 *kc,
                                           const bf16 *vc, const int32_t *pos, int m, int heads,
                                           int kv_heads, int hd, int64_t max_seq, bf16 *out,
                                           cudaStream_t stream, const llm_launch *ln, int pipelined)
{
    if (hd != WA_HD || m < 1 || heads < 1 || kv_heads < 1 || heads % kv_heads)
        return cudaErrorInvalidValue;
    const dim3 grid((m + WA_BQ - 1) / WA_BQ, heads);
    return pipelined ? launch_wgmma<true>(grid, q, q_stride, kc, vc, pos, m, heads, kv_heads,
                                          max_seq, out, stream, ln)
                     : launch_wgmma<false>(grid, q, q_stride, kc, vc, pos, m, heads, kv_heads,
                                           max_seq, out, stream, ln);
}

} // namespace qmm_llm
