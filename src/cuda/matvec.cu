/*
 * Decode path: C[M, N] = A[M, K] · Wᵀ for M <= 16, built for the memory-bandwidth limit.
 *
 * Every warp streams its own weights straight into registers: a warp owns one 16-row tile and a
 * run of groups (every KW-th group in the experiment below: RND), and each (tile, group) is one
 * contiguous KB of the device layout (w4_layout.h:
 * row block rb, group g at word (rb·groups + g)·2048, its 16-row tile t at + 256·t). A warp keeps
 * mv_depth groups of loads in flight (the first ones issued before griddepcontrol.wait: weights
 * never depend on the previous kernel) and refills a slot as soon as it is multiplied, so no
 * producer, barrier or shared-memory copy sits between a load and its use; the prologue before
 * those loads is shifts only (R and C are powers of two). The activation rows arrive by bulk
 * copies on an mbarrier, the residual epilogue's inputs right after the dependency wait (NOTES
 * rows 49-57; the phases of one launch are timed by an experiment build, -DQMM_MV_TRACE).
 * A CTA (W = 8 warps, or 4 up to 8 tokens) takes R tiles (1, 2, 4 or 8, at most W) × its share
 * of K, the warps of a tile splitting that share; a cluster of C CTAs splits K further. Partial
 * sums meet in shared memory (the CTA's warps), then in rank 0's shared memory (the cluster, over
 * DSMEM), always added in the same order: deterministic, one launch, nothing in global memory but
 * the result.
 * Arithmetic (exact codes): the codes enter the mma as the exact bf16 values 128 + q, and an mma
 * by all-ones weights gives Σa (one a group for one token, four for 2-8: mv_group), so per group
 *   Σ a·w = s·Σ a·q + b·Σ a = s·P + (b − 128·s)·Σa          (fp32, no weight rounded).
 * Groups of 64 and 32: a "group" of the loops here is a 128-column block of the device layout
 * (w4_layout.h), whose G = 2 or 4 groups each take their own P, Σa and scale|bias word.
 * Experiment builds (timing only, wrong results; NOTES.md row 109): -DQMM_MV_STUB=1 the loads
 * alone, 2 the mma on the code words masked to finite bf16 (2 logic instructions a word pair
 * instead of the conversion's 14), 3 without the Σa mma, 4 token 0's activation row staged alone
 * (rows 1 to m - 1 whatever shared memory held), 5 the sums and the epilogue of token 0 alone:
 * the staging's and the end's shares of the several-token cost.
 * Where the time goes (bench/NOTES.md rows 27-32, 49-57): at M = 1 the loads alone run at the
 * speed of a kernel that only reads the weight; the code conversion (~1 instruction a weight
 * pair) and the mma add what the SM cannot overlap with the last bytes' arrival.
 * Epilogues (the engine's fused decode step): store; residual (x += bf16(y) in fp32, and the next
 * RMSNorm's inputs: bf16(x·γ) and Σx² per 16-row tile); SwiGLU over a gate|up weight whose row
 * blocks hold 64 gate rows then the same 64 up rows (a CTA takes gate tiles with their up tiles).
 * With a norm source the result is scaled by 1/sqrt(mean(x²) + eps) from those per-tile sums
 * (RMSNorm folded into the matmul).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "hopper.cuh"
#include "matvec_epilogue.cuh"
#include "matvec_group.cuh"
#include "matvec_layout.cuh"
#include "matvec_stamps.cuh"
#include "w4_layout.h"

namespace qmm {

/* MV_PRE_WAIT of a lane's mv_depth groups (matvec_layout.cuh) are requested before the
 * dependency wait, the rest after the activations' copy: requested after all of them, the
 * activations queued behind every SM's weight loads (NOTES row 56: at 1 or 2, gate 7.16 → 6.7 µs
 * alone, decode +2–4 %). */
constexpr int MV_PRE_WAIT = 2;


/* A lane's slot: its 16 bytes of rows g8 and g8 + 8 of the next (tile, 128-column block) and
 * their scale|bias words, one a group of the block (G, n_pad words apart: w4_layout.h); the
 * sources move on to the warp's next block (step_w words, step_s scale|bias words). */
template <int G>
__device__ __forceinline__ void mv_load(uint4 &lo, uint4 &hi, uint32_t (&sl)[G], uint32_t (&sh)[G],
                                        const uint32_t *&src_w, const uint32_t *&src_s, int step_w,
                                        int step_s, int n_pad)
{
    lo = ld_stream(src_w);
    hi = ld_stream(src_w + 128);
#pragma unroll
    for (int i = 0; i < G; i++) {
        sl[i] = ld_stream32(src_s + i * n_pad);
        sh[i] = ld_stream32(src_s + i * n_pad + 8);
    }
    src_w += step_w;
    src_s += step_s;
}

#ifdef QMM_MV_TRACE /* an experiment build: thread 0's clock at each phase, per CTA */
__device__ unsigned long long mv_trace_buf[8192 * 8];
__device__ int mv_trace_grid;
#define MV_STAMP(i)                                                                              \
    do {                                                                                         \
        if (threadIdx.x == 0 && blockIdx.x < 8192) mv_trace_buf[blockIdx.x * 8 + (i)] = clock64() - t_entry; \
    } while (0)
cudaError_t matvec_trace_read(unsigned long long *out, int max_ctas, int *ctas)
{
    cudaError_t e = cudaMemcpyFromSymbol(ctas, mv_trace_grid, sizeof(int));
    if (*ctas > max_ctas) *ctas = max_ctas;
    return e == cudaSuccess ? cudaMemcpyFromSymbol(out, mv_trace_buf, sizeof(unsigned long long) * 8 * *ctas) : e;
}
#else
#define MV_STAMP(i) ((void)0)
#endif

/* V = 1 or 4 consecutive floats of shared memory in one access: loaded, stored, or stored
 * into cluster rank 0's (the same offset there) by st.async, completing bytes on its `bar`. */
template <int V> __device__ __forceinline__ void mv_ld(float (&d)[V], const float *p)
{
    if constexpr (V == 4) {
        const float4 x = *reinterpret_cast<const float4 *>(p);
        d[0] = x.x, d[1] = x.y, d[2] = x.z, d[3] = x.w;
    } else
        d[0] = *p;
}
template <int V> __device__ __forceinline__ void mv_st(float *p, const float (&d)[V])
{
    if constexpr (V == 4)
        *reinterpret_cast<float4 *>(p) = make_float4(d[0], d[1], d[2], d[3]);
    else
        *p = d[0];
}
template <int V> __device__ __forceinline__ void mv_st_async(float *p, const float (&d)[V], uint64_t *bar)
{
    if constexpr (V == 4)
        st_async_f4(p, 0, make_float4(d[0], d[1], d[2], d[3]), bar);
    else
        st_async_f32(p, 0, d[0], bar);
}

/* The staging in rounds (RND, experiment: NOTES row 182). With m tokens a CTA stages m rows of its
 * whole K share before any warp starts (40 KB at m = 8 on gate), which lands long after the first
 * weights. In rounds a warp's groups are strided instead of contiguous (part p of the KW parts of
 * a tile takes groups p, p + KW, ...), so that its i-th groups together are one contiguous run of
 * K, and the rows are copied run by run: i = 0, 1, 2–3, 4–7, 8 on, each on its own barrier; a
 * warp waits for a round before its first group in it. The sums then group other k together
 * (other bits than the default, the same tolerance). */
__host__ __device__ constexpr int mv_round_first(int r) { return r == 0 ? 0 : 1 << (r - 1); }
__host__ __device__ constexpr int mv_rounds(int most) /* rounds for at most `most` groups a warp */
{
    return 1 + (most > 1) + (most > 2) + (most > 4) + (most > 8);
}
/* Round r's groups of the CTA's share of kr, [g0, g1) (KW = 2^kw_lg parts a tile). */
__device__ __forceinline__ void mv_round_groups(int r, int nrounds, int kw_lg, int kr, int &g0, int &g1)
{
    g0 = mv_round_first(r) << kw_lg;
    g1 = r + 1 < nrounds ? mv_round_first(r + 1) << kw_lg : kr;
}

/* G: groups a 128-column block (128 / the group size) */
template <int TOKT, int W, bool ONE, bool RND = false, int G = 1>
__global__ __launch_bounds__(32 * W, mv_ctas_bound(TOKT, W)) void matvec_kernel(const MatvecArgs p)
{
    static_assert(8 * TOKT <= 2 * W, "a warp copies at most two activation rows (the staging)");
    static_assert(!(ONE && RND), "rounds are for several tokens");
    constexpr int TOKS = 8 * TOKT;
    constexpr int D = mv_depth(TOKT);
    extern __shared__ __align__(128) unsigned char smem[];
    mv_phase_start(p.stamp);
#ifdef QMM_MV_TRACE
    const long long t_entry = clock64();
    if (threadIdx.x == 0 && blockIdx.x < 8192) {
        unsigned long long gt;
        unsigned smid;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        mv_trace_buf[blockIdx.x * 8] = gt, mv_trace_buf[blockIdx.x * 8 + 1] = smid;
        if (blockIdx.x == 0) mv_trace_grid = gridDim.x;
    }
#endif
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
    const int g8 = lane / 4, t4 = lane % 4;
    /* The first loads come first: every index below is a shift (R = 2^lr, C = 2^lc, W warps),
     * so a warp requests its first groups a few dozen instructions after it starts. */
    const int lr = p.log_r, lc = p.log_c, groups = p.k >> 7;
    const int rank = lc ? (int)cluster_rank() : 0, set = blockIdx.x >> lc;
    /* this CTA's groups [c0, c1), this warp's ng of them from w0 (a run, or every KW-th with
     * RND), its tile */
    const int c0 = (rank * groups) >> lc, c1 = ((rank + 1) * groups) >> lc;
    const int part = warp >> lr, ti = warp & ((1 << lr) - 1), tile = mv_tile_lg(set, ti, lr);
    const int kw_lg = (W == 8 ? 3 : 2) - lr; /* warps a tile: W / R */
    const int kr = c1 - c0;
    /* contiguous: groups [w0, w0 + ng); rounds: w0, w0 + KW, ... (ng of them) */
    const int w0 = RND ? c0 + part : c0 + ((part * kr) >> kw_lg);
    const int ng = RND ? (part < kr ? ((kr - 1 - part) >> kw_lg) + 1 : 0)
                       : c0 + (((part + 1) * kr) >> kw_lg) - w0;
    const int step_w = RND ? 2048 << kw_lg : 2048;

    /* D slots of registers a lane: its 16 bytes of rows g8 and g8 + 8 of a (tile, group) and
     * their scale|bias words; the first pre_wait groups requested before the dependency wait
     * (weights never depend on the previous kernel), the rest of the first D after the
     * activations' copy, a slot refilled once its group is multiplied */
    const uint32_t *src_w = p.packed + ((int64_t)(tile >> 3) * groups + w0) * 2048 + (tile & 7) * 256 +
                            lane * 4; /* = row g8, words 4·t4 */
    const uint32_t *src_s = p.sb + (int64_t)w0 * G * p.n_pad + tile * 16 + g8;
    const int n_pad = (int)p.n_pad; /* G · n_pad fits an int (launcher) */
    const int step_s = RND ? (int)(G * p.n_pad) << kw_lg : (int)(G * p.n_pad); /* fits an int (launcher) */
    uint4 lo[D], hi[D];
    uint32_t sl[D][G], sh[D][G];
    const int pre_n = p.pre_wait; /* groups requested before the wait; the rest after the activations */
#pragma unroll
    for (int j = 0; j < D; j++)
        if (j < ng && j < pre_n) mv_load<G>(lo[j], hi[j], sl[j], sh[j], src_w, src_s, step_w, step_s, n_pad);
    MV_STAMP(2);

    const int R = 1 << lr, C = 1 << lc, KW = 1 << kw_lg;
    const MvSmem L(p.m, (groups + C - 1) >> lc, TOKS, R * 16, RND);
    __nv_bfloat16 *as = reinterpret_cast<__nv_bfloat16 *>(smem + L.a_off);
    float *red = reinterpret_cast<float *>(smem + L.red_off); /* [warp][TOKS][16] */
    float *ys = reinterpret_cast<float *>(smem + L.ys_off);   /* [C][m][R·16] */
    float *inv = reinterpret_cast<float *>(smem + L.inv_off); /* [16] */
    uint64_t *staged = reinterpret_cast<uint64_t *>(smem + L.bar_off);
    uint64_t *summed = staged + 1; /* cluster rank 0: the other ranks' sums have landed */
    /* rounds: round 0 on `staged`, round r >= 1 on staged[1 + r] */
    const int nrounds = RND ? mv_rounds((kr + (1 << kw_lg) - 1) >> kw_lg) : 1;
    if (tid == 0) {
        mbar_init(staged, 1);
        if (lc) mbar_init(summed, 1);
        for (int r = 1; r < nrounds; r++) mbar_init(staged + 1 + r, 1);
        mbar_fence_init();
    }
    /* every CTA of the cluster has started and initialised its barriers: see the reduction */
    if (lc) cluster_arrive_relaxed();
    /* The residual epilogue's first (token, tile) pair of this warp: its norm weight now (a
     * weight), its residual row after the wait; read at the end they were a round trip there. */
    MvResidualPre pre;
    mv_residual_pre_weights(p, pre, set, lr, rank);
    /* Everything the steps after the wait need is computed before it, so that the wait is
     * followed by the copies themselves (the build had ~80 instructions of the staging's
     * addresses between the wait and the first copy; NOTES.md row 148). The empty asm pins a
     * value here: volatile asm keeps its order, so the compiler's front end cannot sink the
     * computation below the wait (ptxas could still schedule it later; the SASS shows it does
     * not: 27 instructions from the wait to the first copy). First the copies of rows warp and
     * warp + W (m <= 2W: the launcher's checks and the static_assert above). */
    uint32_t row_bytes = (uint32_t)(c1 - c0) * 256, bar_u32 = smem_u32(staged);
    uint32_t a_dst0 = smem_u32(as + warp * L.a_stride), a_dst1 = a_dst0 + W * L.a_stride * 2;
    const __nv_bfloat16 *a_src0 = p.a + (int64_t)warp * p.lda + c0 * 128, *a_src1 = a_src0 + W * p.lda;
    asm volatile("" : "+r"(row_bytes), "+r"(bar_u32), "+r"(a_dst0), "+r"(a_dst1), "+l"(a_src0), "+l"(a_src1));
    float acc[TOKT][4] = {};
    uint32_t arow[TOKT]; /* shared addresses: this lane's ldmatrix row of token tile tt (rows
                          * clamped to m - 1: those columns of the mma are discarded) */
#pragma unroll
    for (int tt = 0; tt < TOKT; tt++) {
        const int r = min(tt * 8 + (lane % 8), p.m - 1);
        arow[tt] = smem_u32(as + r * L.a_stride + 16 * (lane / 16) + 8 * ((lane / 8) % 2));
        asm volatile("" : "+r"(arow[tt]));
    }
    /* ONE: lane l < 16 gives row l % 8 of matrix l / 8 of the slices' B fragment: slice l % 8,
     * its k 0–7 or 8–15 (lanes 16–31 repeat them; ldmatrix .x2 reads lanes 0–15) */
    uint32_t srow = smem_u32(as + 16 * (lane % 8) + 8 * ((lane / 8) % 2));
    uint32_t magic = codes_magic(p.m);
    asm volatile("" : "+r"(srow), "+r"(magic), "+l"(pre.xp));
    __syncthreads(); /* the barrier's init before anyone waits on it */
    /* the barrier's one arrival carries every row's bytes; a row landing before it only sends
     * the transaction count below zero for a while (its phase cannot complete) */
#if defined(QMM_MV_STUB) && QMM_MV_STUB == 4 /* token 0's row staged alone, whatever m */
    const int staged_rows = 1;
#else
    const int staged_rows = p.m;
#endif
    if (tid == 0 && !RND) mbar_arrive_expect_tx(staged, row_bytes * (uint32_t)staged_rows);
    if (tid == 0 && RND)
        for (int r = 0; r < nrounds; r++) {
            int g0, g1;
            mv_round_groups(r, nrounds, kw_lg, kr, g0, g1);
            mbar_arrive_expect_tx(r ? staged + 1 + r : staged, (uint32_t)(g1 - g0) * 256 * (uint32_t)p.m);
        }

    pdl_wait(); /* activations, norm sums and outputs belong to the previous kernel until here */
    mv_phase_waited(p.stamp);
    /* The m activation rows of groups [c0, c1) by the copy engine (one bulk copy a row): loads
     * of this SM's threads would queue behind the weight loads already in flight. */
    if (lane == 0 && warp < staged_rows) { /* row t by warp t % W: a bulk copy is issued one lane at a time */
        if (!RND) {
            bulk_copy_u32(a_dst0, a_src0, row_bytes, bar_u32);
            if (warp + W < staged_rows) bulk_copy_u32(a_dst1, a_src1, row_bytes, bar_u32);
        } else
            for (int r = 0; r < nrounds; r++) { /* both rows' round r before round r + 1 */
                int g0, g1;
                mv_round_groups(r, nrounds, kw_lg, kr, g0, g1);
                const uint32_t bytes = (uint32_t)(g1 - g0) * 256, bar = bar_u32 + (r ? 8 * (1 + r) : 0);
                bulk_copy_u32(a_dst0 + g0 * 256, a_src0 + g0 * 128, bytes, bar);
                if (warp + W < p.m) bulk_copy_u32(a_dst1 + g0 * 256, a_src1 + g0 * 128, bytes, bar);
            }
    }
    /* The next kernel may launch now: its CTAs take this grid's free slots and those of its
     * early finishers and request their first weights while this grid's last bytes arrive
     * (they wait for its completion before reading what it writes). After the loop, as before
     * NOTES row 187, they launched only once the slowest CTA had left its loop: decode +5 % on
     * an H100. */
    pdl_launch_dependents();
#pragma unroll
    for (int j = 0; j < D; j++)
        if (j < ng && j >= pre_n) mv_load<G>(lo[j], hi[j], sl[j], sh[j], src_w, src_s, step_w, step_s, n_pad);
    mv_residual_pre_x(pre);
    for (int t = warp; t < p.m; t += W) { /* RMSNorm of the input rows from their Σx² */
        float ss = 0.f;
        if (p.ss_in)
            for (int j = lane; j < p.ss_blocks; j += 32) ss += p.ss_in[(int64_t)t * p.ss_blocks + j];
#pragma unroll
        for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane == 0) inv[t] = p.ss_in ? 1.0f / sqrtf(ss / (float)p.norm_dim + p.eps) : 1.0f;
    }
    if (!RND) {
        mbar_wait(staged, 0); /* inv is read after later barriers */
        MV_STAMP(3);
    }

    /* the warp's groups, D in flight */
    int rnd_next = 0, rnd_at = 0; /* rounds: the next one to wait for, and its first group */
    for (int base = 0; base < ng; base += D) {
#pragma unroll
        for (int j = 0; j < D; j++) {
            const int i = base + j;
            if (i >= ng) break;
            if (RND && i == rnd_at) { /* the first group of round rnd_next: 0, 1, 2, 4, 8 */
                mbar_wait(rnd_next ? staged + 1 + rnd_next : staged, 0);
                if (i == 0) MV_STAMP(3);
                rnd_next++;
                rnd_at = rnd_next < MV_ROUNDS_MAX ? mv_round_first(rnd_next) : INT_MAX;
            }
            mv_group<TOKT, ONE, G>(acc, lo[j], hi[j], sl[j], sh[j], arow, srow,
                                   RND ? part + (i << kw_lg) : w0 + i - c0, magic);
            if (i == 0) MV_STAMP(4);
            if (i + D < ng) /* refill the slot (after its use: no register copies) */
                mv_load<G>(lo[j], hi[j], sl[j], sh[j], src_w, src_s, step_w, step_s, n_pad);
        }
    }
    MV_STAMP(5);

    /* the warps' partial sums → this CTA's sums of its rows, parts added in order */
#pragma unroll
    for (int tt = 0; tt < TOKT; tt++) {
        float *rw = red + (warp * TOKS + tt * 8 + 2 * t4) * 16;
        rw[g8] = acc[tt][0];
        rw[16 + g8] = acc[tt][1];
        rw[g8 + 8] = acc[tt][2];
        rw[16 + g8 + 8] = acc[tt][3];
    }
    __syncthreads();
    MV_STAMP(6);
    const int rows = R * 16;
#if defined(QMM_MV_STUB) && QMM_MV_STUB == 5 /* the sums and the epilogue of token 0 alone */
    MatvecArgs pe = p;
    pe.m = 1;
#else
    const MatvecArgs &pe = p;
#endif
    if (lc) cluster_wait(); /* the start arrival: every CTA of the cluster is running */
    /* the other ranks' sums go to rank 0's ys[rank] by st.async, completing bytes on its
     * `summed` barrier: no cluster-wide fence (a release barrier is a MEMBAR.GPU, NOTES row 70).
     * V consecutive rows a thread (m · rows is a multiple of 16): from two tokens on 16-byte
     * pieces, a quarter of the remote stores (NOTES row 235: M = 8 −6 %; one token keeps 4-byte
     * ones, decode −0.5 % with 16). Every row's sum keeps its order: the same bits. */
    constexpr int V = ONE ? 1 : 4;
    if (C > 1 && rank == 0 && tid == 0) mbar_arrive_expect_tx(summed, (uint32_t)((C - 1) * pe.m * rows * 4));
    for (int e = V * tid; e < pe.m * rows; e += V * 32 * W) {
        const int t = e >> (lr + 4), i = (e >> 4) & (R - 1), r = e & 15;
        float s[V] = {}, v[V];
        for (int q = 0; q < KW; q++) {
            mv_ld<V>(v, red + ((q * R + i) * TOKS + t) * 16 + r);
#pragma unroll
            for (int j = 0; j < V; j++) s[j] += v[j];
        }
        if (rank != 0) mv_st_async<V>(ys + (int64_t)rank * pe.m * rows + e, s, summed);
        else mv_st<V>(ys + e, s);
    }
    if (C > 1) { /* rank 0 adds the ranks' sums in rank order (its own ys[e]: this thread's) */
        if (rank != 0) return;
        mbar_wait(summed, 0);
        for (int e = V * tid; e < pe.m * rows; e += V * 32 * W) {
            float s[V], v[V];
            mv_ld<V>(s, ys + e);
            for (int q = 1; q < C; q++) {
                mv_ld<V>(v, ys + (int64_t)q * pe.m * rows + e);
#pragma unroll
                for (int j = 0; j < V; j++) s[j] += v[j];
            }
            mv_st<V>(ys + e, s);
        }
    }
    __syncthreads();
    mv_epilogue<V>(pe, ys, inv, set, lr, pre); /* the store in V-row pieces too (NOTES row 236) */
    MV_STAMP(7);
    if (p.stamp) { /* after every thread's last write (a cluster's other ranks ended before) */
        __syncthreads();
        mv_stamp_end(p.stamp);
    }
}

/* The kernels of G groups a block: one token tile in CTAs of 8 warps, two in 8, one in 4
 * (MatvecScratch's index); the one-token kernels (same launch bounds, so the same residency);
 * several tokens staged in rounds (experiment, NOTES row 182). */
typedef void (*MvKernel)(const MatvecArgs);
template <int G> struct MvKernels {
    static constexpr MvKernel plain[3] = {matvec_kernel<1, 8, false, false, G>, matvec_kernel<2, 8, false, false, G>,
                                          matvec_kernel<1, 4, false, false, G>};
    static constexpr MvKernel one[3] = {matvec_kernel<1, 8, true, false, G>, nullptr,
                                        matvec_kernel<1, 4, true, false, G>};
    static constexpr MvKernel rounds[3] = {matvec_kernel<1, 8, false, true, G>, matvec_kernel<2, 8, false, true, G>,
                                           matvec_kernel<1, 4, false, true, G>};
};
/* groups of 128, 64, 32 */
static const MvKernel *const mv_plain[3] = {MvKernels<1>::plain, MvKernels<2>::plain, MvKernels<4>::plain};
static const MvKernel *const mv_one[3] = {MvKernels<1>::one, MvKernels<2>::one, MvKernels<4>::one};
static const MvKernel *const mv_rounds_k[3] = {MvKernels<1>::rounds, MvKernels<2>::rounds, MvKernels<4>::rounds};
static const int mv_kernel_warps[3] = {8, 8, 4};

cudaError_t matvec_init(void)
{
    cudaError_t e = cudaSuccess;
    for (int gi = 0; gi < 3; gi++)
        for (int i = 0; i < 3; i++)
            for (MvKernel k : {mv_plain[gi][i], mv_one[gi][i], mv_rounds_k[gi][i]})
                if (e == cudaSuccess && k)
                    e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, MV_SMEM_MAX);
    return e;
}

/* The kernels' resident CTAs in clusters, from the occupancy API at the launch bounds (the GPCs'
 * SM counts decide how many clusters fit: on the H200 at 3 CTAs a SM clusters of 4 hold 368 of
 * 396, NOTES row 62). */
void matvec_capacity(MatvecScratch &s)
{
    for (int k = 0; k < 3; k++)
        for (int lc = 1; lc < 4; lc++) {
            cudaLaunchAttribute attr;
            attr.id = cudaLaunchAttributeClusterDimension;
            attr.val.clusterDim.x = 1u << lc;
            attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(64u << lc);
            cfg.blockDim = dim3(32u * mv_kernel_warps[k]);
            cfg.dynamicSmemBytes = 8192; /* a typical shape's: the launch bounds limit first */
            cfg.attrs = &attr;
            cfg.numAttrs = 1;
            int clusters = 0;
            if (cudaOccupancyMaxActiveClusters(&clusters, mv_plain[0][k], &cfg) != cudaSuccess) {
                (void)cudaGetLastError(); /* unknown: the shape rule assumes every SM */
                clusters = 0;
            }
            s.cluster_ctas[k][lc] = clusters << lc;
        }
}

/* What the kernel dereferences, checked so that a bad argument is an error, not a fault: the
 * arrays it reads and writes (16-byte weight loads, 4-byte scale|bias loads), a real n, rows at
 * least as long as what is read or written in them (the last row stays in an [m, ld] buffer),
 * a known epilogue, and a norm width to divide by. */
static bool matvec_args_ok(const MatvecArgs &p)
{
    const int64_t width = p.epi == MV_EPI_SWIGLU ? p.n / 2 : p.n;
    if (!p.packed || !p.sb || !p.a || (uintptr_t)p.packed % 16 || (uintptr_t)p.sb % 4 ||
        p.n <= 0 || p.n > p.n_pad || p.lda < p.k || p.ldc < width)
        return false;
    if (p.ss_in && (p.ss_blocks < 0 || p.norm_dim <= 0)) return false;
    switch (p.epi) {
    case MV_EPI_STORE: return p.c != nullptr;
    case MV_EPI_SWIGLU: return p.c != nullptr && p.n % 128 == 0; /* whole 64|64 blocks */
    case MV_EPI_RESIDUAL: return p.x != nullptr && (!p.xg || p.gamma);
    case MV_EPI_STORE_F32: return p.x != nullptr;
    default: return false;
    }
}

cudaError_t launch_matvec_ex(MatvecArgs p, const MatvecScratch &scratch, bool pdl, cudaStream_t stream)
{
    const int tokt = p.m <= 8 ? 1 : 2;
    /* groups of 128, 64 or 32 (G scale|bias words a tile row and block, G · n_pad words apart:
     * an int); 16-byte activation rows */
    const int G = groups_per_block(p.group), gi = G == 4 ? 2 : G / 2; /* index 0, 1, 2 */
    if (G == 0 || p.m < 1 || p.m > 16 || p.k <= 0 || p.k % 128 || p.n_pad <= 0 || p.n_pad % 128 ||
        p.n_pad > INT32_MAX / G || p.lda % 8 || (uintptr_t)p.a % 16)
        return cudaErrorInvalidValue;
    if (!matvec_args_ok(p) || p.rounds < 0 || p.rounds > 2) return cudaErrorInvalidValue;
    if (p.pre_wait <= 0) p.pre_wait = MV_PRE_WAIT;
    if (p.tiles_per_cta == 0 || p.cluster == 0)
        matvec_choose_shape(p, scratch, &p.warps, &p.tiles_per_cta, &p.cluster);
    if (p.warps == 0) p.warps = 8;
    const int R = p.tiles_per_cta, C = p.cluster, W = p.warps, groups = p.k / 128;
    /* rounds from two tokens, where the strided scale|bias step (G · n_pad · W / R) fits an int */
    static const bool env_rounds = [] {
        const char *v = getenv("QMM_MV_ROUNDS");
        return v && strcmp(v, "1") == 0;
    }();
    const bool rounds = p.m >= 2 && (p.rounds == 1 || (p.rounds == 0 && env_rounds)) &&
                        p.n_pad <= INT32_MAX / 8 / G;
    if ((W != 8 && W != 4) || (W == 4 && tokt != 1) || R > W) return cudaErrorInvalidValue;
    if ((R != 1 && R != 2 && R != 4 && R != 8) || (C != 1 && C != 2 && C != 4 && C != 8) ||
        (p.epi == MV_EPI_SWIGLU && R == 1) || C > groups)
        return cudaErrorInvalidValue;
    const size_t bytes = matvec_smem_bytes(p, R, C, rounds);
    if (bytes > (size_t)MV_SMEM_MAX) return cudaErrorInvalidValue;
    p.log_r = R == 1 ? 0 : R == 2 ? 1 : R == 4 ? 2 : 3;
    p.log_c = C == 1 ? 0 : C == 2 ? 1 : C == 4 ? 2 : 3;
    const int64_t ctas = p.n_pad / 16 / R * C;
    cudaLaunchAttribute attr[2];
    int na = 0;
    if (C > 1) {
        attr[na].id = cudaLaunchAttributeClusterDimension;
        attr[na].val.clusterDim.x = (unsigned)C;
        attr[na].val.clusterDim.y = 1;
        attr[na++].val.clusterDim.z = 1;
    }
    if (pdl) {
        attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[na++].val.programmaticStreamSerializationAllowed = 1;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)ctas);
    cfg.blockDim = dim3(32 * W);
    cfg.dynamicSmemBytes = bytes;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = (unsigned)na;
    const int ki = mv_kernel_index(tokt, W);
    void (*const kernel)(const MatvecArgs) =
        p.m == 1 ? mv_one[gi][ki] : rounds ? mv_rounds_k[gi][ki] : mv_plain[gi][ki];
    return cudaLaunchKernelEx(&cfg, kernel, p);
}

MatvecArgs matvec_args(const DevWeight &w)
{
    MatvecArgs p = {};
    p.packed = w.packed;
    p.sb = w.sb;
    p.n = (int)w.n;
    p.n_pad = w.n_pad;
    p.k = (int)w.k;
    p.group = w.group;
    return p;
}

cudaError_t launch_matvec(const DevWeight &w, const __nv_bfloat16 *a, int m, __nv_bfloat16 *c,
                          const MatvecScratch &scratch, cudaStream_t stream)
{
    MatvecArgs p = matvec_args(w);
    p.a = a;
    p.lda = w.k;
    p.m = m;
    p.c = c;
    p.ldc = w.n;
    p.epi = MV_EPI_STORE;
    return launch_matvec_ex(p, scratch, true, stream);
}

} // namespace qmm
