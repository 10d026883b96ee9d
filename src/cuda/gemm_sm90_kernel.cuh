/* The Hopper W4A16 kernel (one template, instantiated per tuning-table row by gemm_sm90.cu,
 * which describes the design): a producer warp fills the shared-memory ring, consumer
 * warpgroups dequantize and run wgmma, and a segment ends in a store, a workspace fixup or a
 * cluster sum; its device helpers in gemm_sm90_device.cuh. Included by gemm_sm90.cu only (the
 * helpers define the trace build's device buffer). */
#ifndef QMM_CUDA_GEMM_SM90_KERNEL_CUH
#define QMM_CUDA_GEMM_SM90_KERNEL_CUH

#include "gemm_sm90_args.cuh"
#include "gemm_sm90_device.cuh"
#include "hopper.cuh"
#include "tune/sm90.h"

namespace qmm {

// a (tensor map) is [m, k] bf16; packed/sb the device layout (groups of 128/GPB); c is [m, n] bf16.
template <int TN, int WG, int STAGES, int BPS, int GPB, bool PARTIAL = false>
__global__ void __launch_bounds__(128 * (WG + 1), BPS)
    gemm_sm90_w4_bf16_kernel(const __grid_constant__ Sm90Maps<PARTIAL> maps, const Sm90Args args)
{
    using S = Sm90Shape<TN, WG, GPB>;
    /* 256-token tiles split through the workspace only (but an experiment's pairs: NOTES.md row 275) */
    constexpr bool CLUSTER_OK = TN <= QMM_SM90_CLUSTER_MAX_TOKENS;
    constexpr int CL_PIECES = TN >= 256 ? S::PIECES + S::PIECES / 2 : 2 * S::PIECES + QMM_SM90_MAX_CLUSTER - 1;
    static_assert(!CLUSTER_OK || CL_PIECES * 512 <= STAGES * S::STAGE_BYTES,
                  "a cluster CTA stages its partial and receives its pieces in its ring");
    static_assert(TN < 256 || 3 * 128 * WG * TN <= STAGES * S::STAGE_BYTES,
                  "a 256-token fixup stages three half partials in the ring (add_partials_staged)");
    constexpr int KPG = 8 / GPB; /* k16 steps per group */
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(smem + STAGES * S::STAGE_BYTES);
    uint64_t *empty = full + STAGES;
    uint64_t *cl_ready = empty + STAGES; /* cluster: the other CTAs' rings are free to write */
    uint64_t *cl_recv = cl_ready + 1;    /* cluster: every piece this CTA sums has arrived */
    int *last_flag = (int *)(cl_recv + 1);

    const int wg = threadIdx.x / 128;
    /* registers moved from the producer warpgroup (40 left) to the consumers, where the cap at
     * entry is short; the consumers can take what the block was given at launch and the
     * producer released (setmaxnreg.inc waits for it otherwise): 168·384 − 40·128 ≥ 232·256,
     * 80·256 − 40·128 ≥ 120·128, 128·256 − 40·128 ≥ 216·128, 80·384 − 40·128 ≥ 96·256. 0 = keep
     * the cap. */
    constexpr int CONS_REGS = WG == 2 && BPS == 1  ? 232
                              : WG == 1 && BPS == 3 ? 120
                              : TN == 64 && WG == 1 && BPS == 2 ? 216 /* 64 tokens, two CTAs a SM */
                              : WG == 2 && BPS == 2  ? 96  /* 32 or 64 tokens × 128 rows, two a SM */
                                                     : 0;
    /* one k-block's wgmmas left in flight across the next one's issue: TN = 128 only; the
     * 64-token tiles ran 30-40 % slower with it (NOTES.md row 63) */
    constexpr bool PIPE = BPS == 1 && TN == 128;
    /* one fragment buffer, the k-block's wgmmas awaited before the next is dequantized: with
     * several CTAs a SM (they fill the gap), and at 256 tokens, where 128 accumulators and two
     * buffers exceed the consumers' 232 registers and the other warpgroup's 8 wgmmas (twice the
     * 128-token tile's) cover a warpgroup's dequantization */
    constexpr bool ONE_BUF = BPS > 1 || TN >= 256;
    /* stream-K on the 256-token tile starts with whole tiles, one wave after another (their
     * k-blocks in step on every SM, so the SMs share each k-block's activations and weights in
     * L2), and spreads only the tiles left over (NOTES.md row 162) */
    constexpr bool DP = TN >= 256;
    const int p = blockIdx.x;
    const int begin = cta_start<DP>(args, p), end = cta_start<DP>(args, p + 1);
    const int dp_begin = DP ? p * args.dp_per_cta * args.groups : 0;
    const int dp_end = DP ? dp_begin + args.dp_per_cta * args.groups : 0;
    SM90_TRACE(const long long t_entry = clock64(); long long tr_t = 0; unsigned long long tr[SM90_TR_SLOTS] = {};
               unsigned long long *tr_out = sm90_trace_entry(p, (dp_end - dp_begin) + (end - begin));)

    /* The producer's schedule (Sm90Pos): the (tile, group) of its next weight and activation
     * copies; lane 0 of warp 0 issues every copy (but the first stages' activations with `two`,
     * below: lane 0 of warp 1). */
    using Pos = Sm90Pos;
    auto advance = [&](Pos &q) { sm90_advance<DP>(args, q, dp_end, begin); };
    const bool producer_warp = threadIdx.x < 32, lane0 = threadIdx.x == 0;
    const int n_it = (dp_end - dp_begin) + (end - begin), pre = n_it < STAGES ? n_it : STAGES;
    /* Weights never depend on the previous kernel: the first pre_w stages' go before the wait,
     * the activations after it. At 8-16 tokens every stage's weights go first. From 24 tokens a
     * stage's activations (6–32 KB) outweigh its weights (4–8 KB) and, behind every first-stage
     * weight copy, started the consumers 2–3 µs late: one stage of weights first, then each
     * stage's activations and the weights a stage ahead (NOTES.md rows 74, 215), but for 24-64-
     * token 64-row launches of at most one CTA a SM every stage's weights first (row 217:
     * all_weights_first). At 8-16 tokens with more than two CTAs a SM a second warp issues the
     * activations (`two`). */
    constexpr int PRE_W = TN <= 16 ? STAGES : 1;
    const int pre_w = args.all_weights_first || pre < PRE_W ? pre : PRE_W;
    Pos wp = {0, 0, 0, 0};
    uint64_t pol = 0;
    auto load_weights = [&](int s, Pos &q) {
        if (lane0) {
            uint8_t *st = smem + s * S::STAGE_BYTES;
            if constexpr (PARTIAL) { /* 256 bytes a box row */
                const bool last = q.mt == args.m_tiles - 1;
                mbar_arrive_expect_tx(&full[s], S::TX_BYTES - (last ? (TN - args.last_rows) * 256 : 0));
            } else {
                mbar_arrive_expect_tx(&full[s], S::TX_BYTES);
            }
            /* 128-row block nt·WG/2, group grp: 8 KB; a 64-row tile is half of it */
            const int64_t block = q.nt * WG / 2, half = WG == 1 ? q.nt % 2 : 0;
            bulk_copy(st + S::ACT_BYTES, args.packed + (block * args.groups + q.grp) * 2048 + half * 1024,
                      S::W_BYTES, &full[s], pol);
            /* the block's GPB groups of scale|bias pairs for these 64·WG rows: 256·WG bytes each */
            for (int g = 0; g < GPB; g++)
                bulk_copy_plain(st + S::ACT_BYTES + S::W_BYTES + g * WG * 256,
                                args.sb + (int64_t)(q.grp * GPB + g) * args.n_pad + q.nt * 64 * WG, WG * 256,
                                &full[s]);
        }
        advance(q);
    };
    /* the launcher's rule (tune/sm90.h); warp 1 then issues the first stages' activations */
    const bool two = TN <= 16 && args.two_warp_start;
    const bool act_warp = two && threadIdx.x >= 32 && threadIdx.x < 64;
    if (producer_warp || act_warp) wp = sm90_pos(args, dp_begin < dp_end ? dp_begin : begin);
    Pos ap = wp;
    if (lane0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1); /* lane 0's expect_tx; the copies complete the bytes */
            mbar_init(&empty[s], SM90_EMPTY_ARRIVALS * WG);
        }
        if (args.cluster > 1) mbar_init(cl_ready, args.cluster - 1), mbar_init(cl_recv, 1);
        mbar_fence_init();
        fence_proxy_async_shared(); /* the barriers, initialised, before this thread's copies */
        prefetch_tensor_map(&maps.act);
        if constexpr (PARTIAL) prefetch_tensor_map(&maps.last);
        pol = policy_evict_first();
    }
    auto load_act = [&](int s, Pos &q) {
        if (two ? threadIdx.x % 32 == 0 : lane0) { /* lane 0 of warp 0, or of warp 1 at the start */
            uint8_t *st = smem + s * S::STAGE_BYTES;
            bool last = false;
            if constexpr (PARTIAL) last = q.mt == args.m_tiles - 1;
            if (last) { /* the k halves where the B descriptors read them */
                if constexpr (PARTIAL) {
                    tma_load_3d(st, &maps.last, 0, q.mt * TN, q.grp * 2, &full[s]);
                    tma_load_3d(st + TN * 128, &maps.last, 0, q.mt * TN, q.grp * 2 + 1, &full[s]);
                }
            } else {
                tma_load_3d(st, &maps.act, 0, q.mt * TN, q.grp * 2, &full[s]);
            }
        }
        advance(q);
    };
    /* One warp: the first stage goes out before the block barrier, which waits for every warp
     * of the CTA to have started (0.3–0.5 µs after entry; the first copy came 0.4 µs after it):
     * the weights of pre_w stages, then, once the previous kernel is done, the first
     * activations. The rest of the first stages follow the barrier: issuing them took ~0.1 µs a
     * stage, and held before it they kept the consumers from the first stage (NOTES.md row
     * 108). Two warps (`two`): every first stage goes out before the barrier, the weights from
     * warp 0, the activations from warp 1 (NOTES.md row 193). */
    auto first_act = [&](int j) {
        load_act(j, ap);
        if (j + pre_w < pre) load_weights(j + pre_w, wp);
    };
    if (two) {
        /* two streams: warp 0 requests every first stage's weights at once, warp 1 waits for
         * the previous kernel and requests their activations */
        if (producer_warp) {
            named_barrier_arrive(2, 64); /* the barriers are made: warp 1 may copy */
            for (int j = 0; j < pre; j++) {
                load_weights(j, wp);
                SM90_TRACE(if (j == 0) tr[SM90_TR_P_W0] = clock64() - t_entry);
            }
            SM90_TRACE(tr[SM90_TR_P_WALL] = clock64() - t_entry);
            for (int j = 0; j < pre; j++) advance(ap); /* warp 1's stages */
            sm90_dependency_wait(args);
            SM90_TRACE(tr[SM90_TR_P_PDL] = clock64() - t_entry);
        } else if (act_warp) {
            named_barrier(2, 64);
            sm90_dependency_wait(args);
            for (int j = 0; j < pre; j++) load_act(j, ap);
        }
    } else if (producer_warp) {
        for (int j = 0; j < pre_w; j++) {
            load_weights(j, wp);
            SM90_TRACE(if (j == 0) tr[SM90_TR_P_W0] = clock64() - t_entry);
        }
        SM90_TRACE(tr[SM90_TR_P_WALL] = clock64() - t_entry);
        sm90_dependency_wait(args); /* activations come from the previous kernel */
        SM90_TRACE(tr[SM90_TR_P_PDL] = clock64() - t_entry);
        if (pre > 0) first_act(0);
    }
    __syncthreads();
    /* the barriers' initialisation visible to the cluster before any remote arrival: every
     * thread arrives now and waits before its first remote operation (or before exiting) */
    if (args.cluster > 1) cluster_arrive_relaxed();

    if (wg == 0) {
        /* ---- producer: warp 0 ---- */
        SM90_TRACE(tr[SM90_TR_P_SYNC] = clock64() - t_entry);
        if (CONS_REGS) regs_dealloc<40>();
        SM90_TRACE(tr[SM90_TR_P_REGS] = clock64() - t_entry);
        if (producer_warp) {
            if (!two)
                for (int j = 1; j < pre; j++) first_act(j);
            SM90_TRACE(tr[SM90_TR_P_FIRST] = clock64() - t_entry);
            for (int j = pre, s = 0, phase = 0; j < n_it; j++) {
                SM90_TRACE(tr_t = clock64());
                mbar_wait(&empty[s], (uint32_t)phase);
                SM90_TRACE(tr[SM90_TR_P_EMPTY_WAIT] += clock64() - tr_t);
                load_weights(s, wp);
                load_act(s, ap);
                if (++s == STAGES) s = 0, phase ^= 1;
            }
            if (lane0) pdl_launch_dependents();
            SM90_TRACE(if (lane0) sm90_trace_producer(tr_out, tr, t_entry);)
        }
        if (args.cluster > 1) cluster_wait(); /* pairs the arrival at the start */
    } else {
    /* ---- consumers: warpgroup c computes weight rows [64c, 64c + 64) of the tile ---- */
    if (CONS_REGS) regs_alloc<CONS_REGS ? CONS_REGS : 40>();
    sm90_dependency_wait(args); /* C, the partials, the counters may be the previous kernel's */
    const int c = wg - 1, ct = threadIdx.x - 128 * wg, warp = ct / 32, lane = ct % 32;
    const int g = lane / 4, t4 = lane % 4;
    const uint32_t magic = codes_magic(args.m);

    /* NACC independent accumulators, k16 step kk into acc[kk % NACC]: a chain of dependent small
     * wgmmas runs at its latency (measured: ~1200 cycles for the 8 steps of one n8 group), while
     * independent chains overlap. They are summed in a fixed order at the end of a segment. */
    constexpr int NACC = BPS > 1 || TN >= 128 ? 1 : TN <= 16 ? 8 : 128 / TN; /* several CTAs a SM: registers are short */
    /* the segment's sum: its own array, except at 256 tokens, where one accumulator set is
     * 128 registers a thread and the sum is that set itself */
    float accs[NACC][TN / 2], acc_own[TN >= 256 ? 1 : TN / 2];
    float *const acc = TN >= 256 ? accs[0] : acc_own;
#pragma unroll
    for (int u = 0; u < NACC; u++)
#pragma unroll
        for (int i = 0; i < TN / 2; i++) accs[u][i] = 0.f;
    const int my_off = ((c * (TN / 8)) * 128 + ct) * 4; /* this thread's float4 r4 at + r4 * 512 */

    /* Wait for a stage and build this thread's eight k16 A fragments of it in f (distinct
     * registers, so the wgmmas that read them issue back to back). */
    auto prepare = [&](Frag &f, int s, int phase) {
        SM90_TRACE(tr_t = clock64());
        mbar_spin(&full[s], (uint32_t)phase);
        SM90_TRACE(const long long tr_ready = clock64(); tr[SM90_TR_C_FULL_WAIT] += tr_ready - tr_t;
                   if (!tr[SM90_TR_C_FIRST]) tr[SM90_TR_C_FIRST] = tr_ready - t_entry);
        const uint8_t *st = smem + s * S::STAGE_BYTES;
        const uint32_t *wt = (const uint32_t *)(st + S::ACT_BYTES) + (c * 4 + warp) * 256;
        const uint32_t *sbt = (const uint32_t *)(st + S::ACT_BYTES + S::W_BYTES) + c * 64 + warp * 16;
        const uint4 lo = lds128(wt + 16 * g + 4 * t4), hi = lds128(wt + 16 * (g + 8) + 4 * t4);
        uint32_t sbl = lds32(sbt + g), sbh = lds32(sbt + g + 8);
        uint32_t sl = (sbl & 0xFFFFu) * 0x10001u, bl = (sbl >> 16) * 0x10001u;
        uint32_t sh = (sbh & 0xFFFFu) * 0x10001u, bh = (sbh >> 16) * 0x10001u;
#pragma unroll
        for (int kk = 0; kk < 8; kk++) {
            if constexpr (GPB > 1) {
                if (kk > 0 && kk % KPG == 0) { /* step kk starts group kk / KPG of the block */
                    const uint32_t *sbj = sbt + (kk / KPG) * 64 * WG;
                    sbl = lds32(sbj + g), sbh = lds32(sbj + g + 8);
                    sl = (sbl & 0xFFFFu) * 0x10001u, bl = (sbl >> 16) * 0x10001u;
                    sh = (sbh & 0xFFFFu) * 0x10001u, bh = (sbh >> 16) * 0x10001u;
                }
            }
            const int wj = kk / 2, sft = (kk % 2) * 8;
            const uint32_t wl = word_at(lo, wj), wh = word_at(hi, wj);
            f.a[kk][0] = sm90_convert(wl, sft, sl, bl, magic), f.a[kk][1] = sm90_convert(wh, sft, sh, bh, magic);
            f.a[kk][2] = sm90_convert(wl, sft + 4, sl, bl, magic), f.a[kk][3] = sm90_convert(wh, sft + 4, sh, bh, magic);
        }
#pragma unroll
        for (int kk = 0; kk < 8; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++) fence_reg(f.a[kk][i]);
        SM90_TRACE(tr[SM90_TR_C_DEQUANT] += clock64() - tr_ready);
    };

    /* Store outputs 4·jj … 4·jj + 3 of this thread (8 tokens × the warp's 16 rows a jj): rows
     * g, g + 8 of tokens 2·t4, 2·t4 + 1, as 2-byte stores (m0: the tile's first token; n_row:
     * this thread's first row). */
    auto store_piece_at = [&](int m0, int n_row, int jj, const float *v) {
        const int tok = m0 + 8 * jj + 2 * t4;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = n_row + (e >= 2 ? 8 : 0), tk = tok + (e & 1);
            if (tk < args.m && row < args.n) args.c[(int64_t)tk * args.n + row] = __float2bfloat16_rn(v[e]);
        }
    };
    /* a tile's first token, and the first of this warp's 16 rows in it */
    auto tile_m0 = [&](int tile) { return (tile - args.by_m_tiles.div(tile) * args.m_tiles) * TN; };
    auto warp_row0 = [&](int tile) { return args.by_m_tiles.div(tile) * 64 * WG + c * 64 + warp * 16; };
    auto store_piece = [&](int tile, int jj, const float *v) {
        store_piece_at(tile_m0(tile), warp_row0(tile) + g, jj, v);
    };
    /* 4-byte stores in the 128-token kernels (the 64-token two-warpgroup kernel spilled with
     * them; the smaller tiles store little) */
    constexpr bool PAIR_STORES = TN >= 128;

    /* Split-K in a cluster of R CTAs (one segment a CTA, its partition of the tile). Piece gp
     * (warp gp / P's k-slice gp % P, P = TN / 8) is summed by CTA gp % R, into whose ring every
     * rank z puts its partial of the piece, at recv[z][gp / R]: the other ranks by st.async,
     * whose bytes complete on the owner's cl_recv (no cluster-wide fence, no barrier), once the
     * owner has said its ring is idle (cl_ready). The owner adds the R partials of a piece in
     * rank order from zero, the order of the workspace fixup too. 128-token tiles send from the
     * accumulators; the others first stage their partial in the ring and send in a rolled loop
     * (sent from registers, the 64-token kernels spilled; the 8/16-token ones were 2-4 % slower,
     * NOTES.md row 71). */
    auto cluster_reduce = [&](int tile) {
        constexpr int P = TN / 8;
        constexpr bool DIRECT = TN == 128;
        const int R = args.cluster, me = (int)cluster_rank(), w = c * 4 + warp;
        const int maxp = (S::PIECES + R - 1) / R;
        constexpr bool WIDE = TN >= 256; /* pairs (an experiment): no slot for the owner's own */
        auto slot = [&](int z, int at) { return WIDE && z > at ? z - 1 : z; }; /* z's at CTA at */
        float *recv = (float *)smem; /* [R (WIDE: R - 1)][maxp][32 lanes] float4 */
        float *stage = recv + (WIDE ? R - 1 : R) * maxp * 32 * 4; /* [PIECES][32] float4, unless DIRECT */
        auto piece = [&](float *base, int i) { return base + (i * 32 + lane) * 4; };
        named_barrier(1, 128 * WG); /* every consumer warp is past its last stage: the ring is idle */
        if constexpr (!DIRECT) {
#pragma unroll
            for (int r4 = 0; r4 < P; r4++)
                *(float4 *)piece(stage, w * P + r4) =
                    make_float4(acc[4 * r4], acc[4 * r4 + 1], acc[4 * r4 + 2], acc[4 * r4 + 3]);
        }
        cluster_wait(); /* pairs the arrival at the start */
        if (c == 0 && ct == 0)
            for (int z = 0; z < R; z++)
                if (z != me) mbar_arrive_remote(cl_ready, (uint32_t)z);
        const int mine = S::PIECES / R + (me < S::PIECES % R ? 1 : 0);
        if (c == 0 && ct == 0) mbar_arrive_expect_tx(cl_recv, (uint32_t)((R - 1) * mine * 512));
        mbar_wait(cl_ready, 0);
        SM90_TRACE(tr[SM90_TR_C_BAR1] = clock64() - t_entry);
        int owner = (w * P) % R, local = (w * P) / R;
        if constexpr (DIRECT) {
#pragma unroll
            for (int r4 = 0; r4 < P; r4++) {
                const float4 v = make_float4(acc[4 * r4], acc[4 * r4 + 1], acc[4 * r4 + 2], acc[4 * r4 + 3]);
                float *dst = piece(recv, me * maxp + local);
                if (owner == me) *(float4 *)dst = v; /* read back by this thread only */
                else st_async_f4(dst, (uint32_t)owner, v, cl_recv);
                if (++owner == R) owner = 0, local++;
            }
        } else {
#pragma unroll 1
            for (int r4 = 0; r4 < P; r4++) { /* its own pieces stay in the stage */
                if (owner != me)
                    st_async_f4(piece(recv, slot(me, owner) * maxp + local), (uint32_t)owner,
                                *(const float4 *)piece(stage, w * P + r4), cl_recv);
                if (++owner == R) owner = 0, local++;
            }
        }
        mbar_wait(cl_recv, 0);
        SM90_TRACE(tr[SM90_TR_C_SUMMED] = clock64() - t_entry);
        const int m0 = tile_m0(tile), n_row = warp_row0(tile) + g;
        if (DIRECT && PAIR_STORES && args.vec_c && n_row - g + 16 <= args.n) {
            /* 128-token tiles whose warp's 16 rows are in C: the owner's loop for R known at
             * compile time (this thread's pieces r4 = r0, r0 + R, ...; every rank's partials of
             * two pieces loaded before they are summed), the stores from one pointer, 4 bytes a
             * lane. Was ~75 instructions a piece at R = 2, one piece after another, and 2-byte
             * stores: 1.6 µs of q M = 256's end (NOTES.md row 116). */
            auto sum_owned = [&](auto rc) {
                constexpr int RC = decltype(rc)::value, NP = (P + RC - 1) / RC;
                const int r0 = ((me - w * P) % RC + RC) % RC, l0 = (w * P + r0) / RC;
                const int64_t n = args.n, tok8 = 8 * n;
                __nv_bfloat16 *c0 = args.c + (m0 + 2 * t4) * n + n_row;
                const int left0 = args.m - (m0 + 2 * t4);
#pragma unroll
                for (int j0 = 0; j0 < NP; j0 += 2) {
                    uint4 x[2][RC];
#pragma unroll
                    for (int j = 0; j < 2; j++)
                        if (j0 + j < NP && r0 + (j0 + j) * RC < P)
#pragma unroll
                            for (int z = 0; z < RC; z++) x[j][z] = lds128((const uint32_t *)piece(recv, z * maxp + l0 + j0 + j));
#pragma unroll
                    for (int j = 0; j < 2; j++) {
                        const int r4 = r0 + (j0 + j) * RC;
                        if (j0 + j < NP && r4 < P) {
                            float v[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                            for (int z = 0; z < RC; z++) { /* rank order from zero */
                                v[0] += __uint_as_float(x[j][z].x), v[1] += __uint_as_float(x[j][z].y);
                                v[2] += __uint_as_float(x[j][z].z), v[3] += __uint_as_float(x[j][z].w);
                            }
                            sm90_store_pairs(g, c0 + r4 * tok8, n, v, left0 - 8 * r4);
                        }
                    }
                }
            };
            if constexpr (DIRECT) switch (R) {
            case 2: sum_owned(Int<2>{}); break;
            case 3: sum_owned(Int<3>{}); break;
            case 4: sum_owned(Int<4>{}); break;
            case 5: sum_owned(Int<5>{}); break;
            case 6: sum_owned(Int<6>{}); break;
            case 7: sum_owned(Int<7>{}); break;
            default: sum_owned(Int<QMM_SM90_MAX_CLUSTER>{}); break;
            }
            return;
        }
        /* Otherwise the owner adds the partials by explicit ld.shared, two in flight (through a
         * generic pointer they were LD.E, one at a time), the piece's place in C computed once
         * (NOTES.md row 77 for 128-token tiles, row 100 for the others); a rank's partial is in
         * the ring, or for the owner's own in the stage unless DIRECT. */
        owner = (w * P) % R, local = (w * P) / R;
#pragma unroll 1
        for (int r4 = 0; r4 < P; r4++) {
            if (owner == me) {
                auto src = [&](int z) {
                    return (const uint32_t *)(!DIRECT && z == me ? piece(stage, w * P + r4)
                                                                 : piece(recv, slot(z, me) * maxp + local));
                };
                float v[4] = {0.f, 0.f, 0.f, 0.f};
                auto add = [&](const uint4 &x) {
                    v[0] += __uint_as_float(x.x), v[1] += __uint_as_float(x.y);
                    v[2] += __uint_as_float(x.z), v[3] += __uint_as_float(x.w);
                };
                int z = 0;
#pragma unroll 1
                for (; z + 1 < R; z += 2) {
                    const uint4 x0 = lds128(src(z)), x1 = lds128(src(z + 1));
                    add(x0), add(x1); /* rank order */
                }
                if (z < R) add(lds128(src(z)));
                store_piece_at(m0, n_row, r4, v);
            }
            if (++owner == R) owner = 0, local++;
        }
    };

    auto zero_accs = [&]() { /* after each segment (a cluster's: experiments, NOTES.md rows 274-275) */
#pragma unroll
        for (int u = 0; u < NACC; u++)
#pragma unroll
            for (int i = 0; i < TN / 2; i++) accs[u][i] = 0.f;
    };
    /* The end of this CTA's segment of a tile: store it, or add the partial to the tile's. */
    auto finish_segment = [&](int tile, bool tile_end, int begin, bool ring_idle) {
#pragma unroll
        for (int i = 0; i < TN / 2; i++) {
            acc[i] = accs[0][i];
#pragma unroll
            for (int u = 1; u < NACC; u++) acc[i] += accs[u][i];
        }
        if constexpr (CLUSTER_OK)
            if (args.cluster > 1) {
                cluster_reduce(tile);
#if defined(QMM_EXP_ZERO_ACCS) || defined(QMM_EXP_WIDE_CLUSTER)
                zero_accs();
#endif
                return;
            }
        const int t_first = tile * args.groups;
        /* the segment holds the tile's first iteration: this CTA is first in its partition order (pa) */
        const bool head = begin <= t_first;
        /* 128-token kernels: the head's own partial from registers (acc live through the fixup's
         * loads: the 64-token two-warpgroup kernel spilled with it) */
        constexpr bool OWN_REGS = TN >= 128;
        bool store = head && tile_end; /* the segment is the whole tile */
        if (!store) {
            int pa = 0, pb = 0; /* the tile's first and last partitions (CTAs) */
            /* Stream-K: the head segment ends this CTA's range, after a segment end of its own
             * (the tail of an earlier tile) the tile's other partitions did not pay, so they
             * have usually counted by now. Then this CTA is the last and sums without writing
             * its partial or counting (its own from registers: at a 128-token tile 64 KB fewer
             * through L2 each way at the launch's end, where every SM fixes up at once; NOTES.md
             * row 115). A CTA has at most one head segment that is not a whole tile, so
             * last_flag[1] is written once. */
            bool early = false;
            if (OWN_REGS && head && args.split == 0) {
                pa = p, pb = cta_of<DP>(args, t_first + args.groups - 1);
                if (ct == 0 && c == 0) last_flag[1] = ld_acquire_gpu(&args.counters[tile]) == (uint32_t)(pb - pa);
                named_barrier(1, 128 * WG);
                early = last_flag[1] != 0;
            }
            if (early) {
                store = true;
            } else {
                /* write the partial, then count; the last CTA of the tile sums and stores.
                 * Ordering: the block barrier puts every thread's partial before thread 0's
                 * release-acquire count, and the second barrier puts that before every
                 * thread's reads. */
                float *slot = args.partials + (int64_t)(p * 2 + (begin >= t_first ? 0 : 1)) * S::SLOT_FLOATS;
#pragma unroll
                for (int r4 = 0; r4 < TN / 8; r4++)
                    *(float4 *)(slot + my_off + r4 * 512) =
                        make_float4(acc[4 * r4], acc[4 * r4 + 1], acc[4 * r4 + 2], acc[4 * r4 + 3]);
                named_barrier(1, 128 * WG);
                pa = cta_of<DP>(args, t_first), pb = cta_of<DP>(args, t_first + args.groups - 1);
                if (ct == 0 && c == 0) {
                    const uint32_t old = atom_add_acq_rel_gpu(&args.counters[tile], 1u);
                    *last_flag = old == (uint32_t)(pb - pa);
                }
                named_barrier(1, 128 * WG);
                store = *last_flag != 0;
            }
            if (store) {
                /* every other partial is in the workspace (this CTA's too, read back unless it
                 * is the head and OWN_REGS): sum in CTA order from zero */
#pragma unroll
                for (int i = 0; i < TN / 2; i++) acc[i] = OWN_REGS && head ? 0.f + acc[i] : 0.f;
                fixup_sum<TN, BPS, DP, S::SLOT_FLOATS>(args, acc, OWN_REGS && head ? pa + 1 : pa, pb, t_first, my_off,
                                                       ring_idle, smem, c * 128 + ct, 128 * WG);
                if (ct == 0 && c == 0) args.counters[tile] = 0; /* ready for the next call */
            }
        }
        if (PAIR_STORES && store && args.vec_c && warp_row0(tile) + 16 <= args.n) {
            /* a whole tile's stores (stream-K gate M = 256 −4.5 % against 16-byte stores
             * through shared memory, NOTES.md row 116) */
            const int m0 = tile_m0(tile), left0 = args.m - (m0 + 2 * t4);
            const int64_t n = args.n;
            __nv_bfloat16 *c0 = args.c + (m0 + 2 * t4) * n + warp_row0(tile) + g;
#pragma unroll
            for (int jj = 0; jj < TN / 8; jj++) sm90_store_pairs(g, c0 + jj * 8 * n, n, acc + 4 * jj, left0 - 8 * jj);
        } else if (store) {
#pragma unroll
            for (int jj = 0; jj < TN / 8; jj++) store_piece(tile, jj, acc + 4 * jj);
        }
        zero_accs();
    };

    /* The pipeline, one CTA a SM: k-block i + 1 is dequantized into the other fragment buffer
     * while i's wgmmas run (PIPE: the wgmmas of i are issued, then those of i − 1 awaited, their
     * stage released and i + 1 dequantized into i − 1's buffer); two buffers, alternating.
     * Several CTAs a SM: one buffer, each k-block's wgmmas awaited before the next is
     * dequantized (the other CTAs fill the gap). */
    int s = 0, phase = 0;
    int pending = -1; /* PIPE: the stage whose wgmmas may still run */
    Frag fa, fb;
    auto step = [&](Frag &cur, Frag &nxt, int it) {
        const uint32_t act = smem_u32(smem + s * S::STAGE_BYTES);
        SM90_TRACE(tr_t = clock64());
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 8; kk++) {
            const uint64_t desc = desc_k128b(act + (kk / 4) * TN * 128 + (kk % 4) * 32);
            WgmmaRS<TN>::mma(accs[kk % NACC], cur.a[kk][0], cur.a[kk][1], cur.a[kk][2], cur.a[kk][3], desc);
        }
        wgmma_commit();
        SM90_TRACE(tr[SM90_TR_C_ISSUE] += clock64() - tr_t);
        const int done = s;
        if (++s == STAGES) s = 0, phase ^= 1;
        if (PIPE) {
            /* one group in flight: the previous k-block's wgmmas are done, so its stage is
             * released and its fragment buffer refilled */
            SM90_TRACE(tr_t = clock64());
            wgmma_wait<1>();
            SM90_TRACE(tr[SM90_TR_C_MMA_WAIT] += clock64() - tr_t);
#pragma unroll
            for (int kk = 0; kk < 8; kk++)
#pragma unroll
                for (int i = 0; i < 4; i++) fence_reg(nxt.a[kk][i]);
            __syncwarp();
            if (pending >= 0 && SM90_ARRIVING_LANE) mbar_arrive(&empty[pending]);
            pending = done;
            if (it + 1 < end) prepare(nxt, s, phase);
            return;
        }
        if (!ONE_BUF && it + 1 < end) prepare(nxt, s, phase); /* overlaps the wgmmas */
        SM90_TRACE(tr_t = clock64());
        wgmma_wait<0>();
        SM90_TRACE(tr[SM90_TR_C_MMA_WAIT] += clock64() - tr_t);
#pragma unroll
        for (int u = 0; u < NACC; u++)
#pragma unroll
            for (int i = 0; i < TN / 2; i++) fence_reg(accs[u][i]);
#pragma unroll
        for (int kk = 0; kk < 8; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++) fence_reg(cur.a[kk][i]);
        __syncwarp();
        if (SM90_ARRIVING_LANE) mbar_arrive(&empty[done]);
    };
    /* The loop segment by segment, the segment's end once after its k-blocks: inlined into
     * each step (as it was), the rarely run epilogue split the hot loop ~64 KB apart and a third
     * of the consumers' stalls were instruction fetches (ncu, NOTES.md row 61); merged into the
     * k-block loop's latch, it made ptxas drain the wgmmas every k-block (C7517). A range of
     * iterations [rb, re): the CTA's one range, or its data-parallel tiles and then its
     * stream-K share (DP). */
    auto run_range = [&](const int rb, const int re, const bool last_range) {
    int tile = args.by_groups.div(rb);
    if (rb < re) prepare(fa, s, phase);
    for (int it = rb; it < re;) {
        const int tile_stop = (tile + 1) * args.groups, stop = min(re, tile_stop);
        for (; it < stop; it++) {
            if (!ONE_BUF && ((it - rb) & 1)) step(fb, fa, it);
            else step(fa, fb, it);
            if (ONE_BUF && it + 1 < stop) prepare(fa, s, phase); /* one fragment buffer live */
        }
        if (PIPE) { /* drain before the segment's end */
            wgmma_wait<0>();
#pragma unroll
            for (int u = 0; u < NACC; u++)
#pragma unroll
                for (int i = 0; i < TN / 2; i++) fence_reg(accs[u][i]);
            __syncwarp();
            if (SM90_ARRIVING_LANE) mbar_arrive(&empty[pending]);
            pending = -1;
        }
        SM90_TRACE(tr[SM90_TR_C_LOOP_DONE] = clock64() - t_entry);
        finish_segment(tile, stop == tile_stop, rb, last_range && stop == re);
        tile++;
        if (ONE_BUF && it < re) prepare(fa, s, phase);
    }
    };
    if (DP) run_range(dp_begin, dp_end, false); /* whole tiles: stores, never a fixup */
    run_range(begin, end, true);
    SM90_TRACE(if (c == 0 && ct == 0) sm90_trace_consumer(tr_out, tr, t_entry);)
    }
    if (args.wait_late) pdl_wait(); /* a rest launch ends after the clusters it follows */
}

} // namespace qmm
#endif
