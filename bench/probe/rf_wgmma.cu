/*
 * rf_wgmma: the prototype of research-sm90-small-m.md §3 P1, a register-fed wgmma kernel for
 * 16- and 32-token W4A16 matmuls, timed beside the library's auto path and a plain weight read
 * (the floor) on the Qwen3-4B projections, in one process.
 *
 * Why: at 9-32 tokens the shipped wgmma kernel (TMA ring, producer warpgroup, per-k-block
 * full/empty mbarriers) runs 1.4-1.9x `read`; the one-token matvec, which loads its weights
 * straight into registers, ends its loop much sooner at equal bytes (memo §2.1). Does the
 * matvec's loop with warpgroup-MMA arithmetic get near `read` at 16 tokens?
 *
 * The kernel (rf_w4_bf16_kernel<TN, WG, D, BUF, SRC>): a CTA is WG warpgroups (no producer) on a
 * tile of 64·WG weight rows × TN tokens and one of `split` contiguous, near-equal ranges of the
 * 128-column blocks (split-K over blockIdx.y). Each lane fetches its own A fragments' codes: the
 * 16-byte pieces of rows g and g + 8 of its warp's 16 (the device layout gives exactly the
 * m16n8k16 / m64nNk16 fragments' codes, w4_layout.h) and their two scale|bias words, D blocks
 * ahead, the first D before the PDL wait, either
 *   SRC_REG (kernel "rf"): into a ring of D register slots by ld.global.nc (the matvec's loop),
 *   SRC_CPA ("rf_cpa"): into a per-warp shared-memory ring by cp.async, one commit group a
 *       block, each lane reading back only its own bytes (no barrier, no mbarrier). Why: in the
 *       SASS every register-slot load sits on one scoreboard (SB5), so the first use of any
 *       slot waits for every load in flight; cp.async.wait_group D-1 is a counted wait.
 * The CTA's K share of the activations (TN tokens, rows m >= M zero-filled) is staged once
 * after the wait into shared memory by the shipped kernel's TMA map and box ({64, TN, 2}: one
 * block, its two 64-column halves TN·128 bytes apart, 128-byte swizzle), one box a block issued
 * by one thread, all landing on one mbarrier. A block: the kernel's conversion (dequant_pair)
 * into 8 k16 steps × 4 bf16x2 registers, built whole before the first wgmma; the slot refilled
 * with block i + D; then wgmma.fence, 8 `wgmma m64nTNk16` RS into one accumulator, commit, and
 * wait_group 0 (BUF 1) or wait_group 1 with two fragment buffers (BUF 2, "_b2": the next block
 * converts while this one's wgmmas run). The end: split 1 stores bf16; otherwise every CTA
 * writes its fp32 partial to the workspace, counts on the tile's counter (release/acquire),
 * and the last CTA sums the split partials in the fixed order 0..split-1 from the workspace
 * (its own too), stores bf16 and resets the counter. Deterministic; not bitwise the library's
 * (another order of additions).
 * Timing-only modes (the fastest configuration of each SRC, per projection): KERNEL_nofix skips
 * the fixup (wrong output: the cost of the end), KERNEL_loads replaces conversion and wgmma by an
 * XOR of the fetched words (the loop's structure alone, fixup kept), KERNEL_loads_nofix both.
 *
 * Checks before any timing: (1) a self-check of every kernel instantiation on exact values
 * (codes 0..15, scales 0.5/1/2, biases -8/-4/0/2, activations multiples of 0.5: every sum
 * exact in fp32), N = 120 (rows padded to 128), K = 512, split 1 and 3, M = TN and TN - 7,
 * against the host, bitwise, with guard elements after C; a wrong B layout, descriptor or
 * fragment order fails here. (2) every timed configuration on the projection's random weight
 * (signed scales) at M and at a ragged M (9 for the 16-token tile, 25 for 32) against the
 * library's auto output on the same data: |ours - ref| <= 2^-7·|ref| + 1e-2·max|ref| per
 * element (one bf16 rounding apart, as any other order of fp32 additions), no NaN, counters
 * back at zero. Exit status 1 when any check fails.
 *
 * Timing: as sm90_trace / `qmm bench ops` (bench_time_calls): a CUDA graph of calls cycling
 * through ceil(400 MB / bytes) cold weight copies (so the weights come from DRAM), the median of
 * 9 replays, µs a call. Every kernel is launched with the PDL attribute, as the library's are.
 * `read` streams the same packed + scale|bias bytes with 128-bit loads (tools/bench_read.cu's kernel,
 * `qmm bench ops`' read contender): best of three grids.
 *
 *   rf_wgmma [PROJ ...]        PROJ: q k o gate down (default: all five)
 *   environment: RF_M=16 (or 32, or "16,32": the token counts timed; 32 uses the 32-token tile)
 *                RF_CONFIGS=WG:C:D:B[:S],...  (replace the default list; S 0 = SRC_REG, the
 *                default, 1 = SRC_CPA; e.g. RF_CONFIGS=1:8:4:1,1:8:8:1:1,2:4:2:2)
 *   build: ninja -C build rf_wgmma; runtime 4 s on an H100 at RF_M=16 (session 53; 24 configurations
 *   a projection by default).
 *   stdout: '#' lines (device, kernels' registers, self-check, auto plans, each configuration's
 *           CTAs and residency, best per SRC, auto re-timed at the end), then CSV
 *           proj,m,kernel,wg,c,d,us,read_us,auto_us,max_abs_err,ok
 *           kernel: auto | read | rf | rf_b2 | rf_cpa | rf_cpa_b2 | <one of these>_nofix | _loads |
 *           _loads_nofix; c: the split; d: the ring depth; lines at the ragged M are checks only
 *           (us empty); a configuration that failed its check at M is timed all the same (ok 0).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "qmm.h"
#include "qmm_cuda.h"
#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled */
#include <cublas_v2.h> /* C++ declarations first: bench_gpu.h includes it inside extern "C" */
extern "C" {
#include "harness.h"
#include "bench_gpu.h"
#include "bench_read.h" /* the floor: tools/bench_read.cu's read kernel on a grid */
}
#include "cuda/common.cuh"  /* dequant_pair, codes_magic, ld_stream */
#include "cuda/hopper.cuh"  /* wgmma fence/commit/wait, desc_k128b, WgmmaRS<N>, PDL */
#include "cuda/kernels.h"   /* weight_dev: the device pointers of an uploaded weight */

namespace {
using namespace qmm;

/* ---- the kernel ---------------------------------------------------------------------------- */

enum { MODE_FULL = 0, MODE_NOFIX = 1, MODE_LOADS = 2 }; /* bits: NOFIX | LOADS */

struct RfArgs {
    const uint32_t *packed;  /* device layout (w4_layout.h), groups of 128 */
    const uint32_t *sb;      /* [blocks][n_pad] scale | bias << 16 */
    const __nv_bfloat16 *a;  /* [m, k] */
    __nv_bfloat16 *c;        /* [m, n] */
    float *partials;         /* [tiles][split][TN/8][128·WG threads][4]: a thread's float4s */
    uint32_t *counters;      /* [tiles], zero between launches */
    int m, n, k, n_pad, blocks, split, mode;
};

enum { SRC_REG = 0, SRC_CPA = 1 }; /* the weights' path into registers */

/* the per-warp cp.async ring (SRC_CPA): a slot is a block's 32 lanes' pieces, lo at 16·lane,
 * hi at 512 + 16·lane, the scale|bias pair at 1024 + 8·lane */
constexpr int CPA_SLOT = 1280;
template <int WG, int D, int SRC> constexpr int ring_bytes()
{
    return SRC == SRC_CPA ? (4 * WG * D * CPA_SLOT + 1023) / 1024 * 1024 : 0;
}

__device__ __forceinline__ void cp_async16_u32(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4_u32(uint32_t dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ uint4 lds128_u32(uint32_t a)
{
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
    return v;
}
__device__ __forceinline__ uint2 lds64_u32(uint32_t a)
{
    uint2 v;
    asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(a));
    return v;
}

// a is [m, k] bf16, c [m, n] bf16; grid (n_pad / (64·WG) row tiles, split); 128·WG threads;
// dynamic shared memory: the cp.async rings (SRC_CPA), then the K share's activations,
// ceil(blocks / split)·TN·256 bytes, + 1 KB of alignment.
// SRC_REG: a lane's D blocks in registers (uint4 lo[D], hi[D], sl[D], sh[D]), ld.global.nc.
// SRC_CPA: a lane's D blocks in its warp's shared-memory ring by cp.async, one commit group a
//   block, cp.async.wait_group D-1 before each: a counted wait, where the D register slots'
//   loads share one scoreboard and a wait for one is a wait for all (SASS: every LDG on SB5).
template <int TN, int WG, int D, int BUF, int SRC>
__global__ void __launch_bounds__(128 * WG) rf_w4_bf16_kernel(const __grid_constant__ CUtensorMap act, const RfArgs p)
{
    static_assert(TN == 16 || TN == 32, "token tile");
    static_assert(BUF == 1 || BUF == 2, "fragment buffers");
    constexpr int T = 128 * WG, BOX = TN * 128; /* threads; bytes of one 64-column box */
    constexpr int RSLOTS = SRC == SRC_REG ? D : 1; /* register slots */
    extern __shared__ uint8_t smem_raw[];
    __shared__ int last_cta;
    __shared__ alignas(8) uint64_t staged; /* the activations' copies have landed */
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int tile = blockIdx.x, z = blockIdx.y;
    const int b0 = (int)((int64_t)z * p.blocks / p.split), nb = (int)((int64_t)(z + 1) * p.blocks / p.split) - b0;
    const int row0 = tile * 64 * WG + warp * 16; /* the warp's 16 rows (n_pad: always in the arrays) */

    /* this lane's pieces: rows row0 + g (lo) and + 8 (hi, 128 words on), words 4·t4..4·t4 + 3;
     * next block 2048 words on; scale|bias of rows row0 + g and + 8, next block n_pad on */
    const uint32_t *src_w = p.packed + ((int64_t)(row0 / 128) * p.blocks + b0) * 2048 + (row0 % 128 + g) * 16 + 4 * t4;
    const uint32_t *src_s = p.sb + (int64_t)b0 * p.n_pad + row0 + g;
    uint4 lo[RSLOTS], hi[RSLOTS];
    uint32_t sl[RSLOTS], sh[RSLOTS];
    auto load = [&](int s) { /* SRC_REG: the next block into register slot s */
        lo[s] = ld_stream(src_w), hi[s] = ld_stream(src_w + 128);
        sl[s] = ld_stream32(src_s), sh[s] = ld_stream32(src_s + 8);
        src_w += 2048, src_s += p.n_pad;
    };
    const uint32_t ring = smem_u32(smem) + (uint32_t)(warp * D * CPA_SLOT);
    auto cp_load = [&](int i) { /* SRC_CPA: block i (if any) into slot i % D, one commit group */
        if (i < nb) {
            const uint32_t d = ring + (uint32_t)((i % D) * CPA_SLOT);
            const uint32_t *w = src_w + (int64_t)i * 2048, *s = src_s + (int64_t)i * p.n_pad;
            cp_async16_u32(d + 16 * lane, w);
            cp_async16_u32(d + 512 + 16 * lane, w + 128);
            cp_async4_u32(d + 1024 + 8 * lane, s);
            cp_async4_u32(d + 1028 + 8 * lane, s + 8);
        }
        cp_async_commit(); /* empty past the end: the counts stay one group a block */
    };
    auto cp_take = [&](int i) { /* SRC_CPA: block i from its slot into register slot 0 */
        cp_async_wait<D - 1>();
        const uint32_t d = ring + (uint32_t)((i % D) * CPA_SLOT);
        lo[0] = lds128_u32(d + 16 * lane), hi[0] = lds128_u32(d + 512 + 16 * lane);
        const uint2 s2 = lds64_u32(d + 1024 + 8 * lane);
        sl[0] = s2.x, sh[0] = s2.y;
    };
    /* weights never depend on the previous kernel: the first D blocks go before the wait, first
     * thing (ptxas schedules within a basic block: placed after the barrier's init, a branch,
     * they were moved below the block barrier and griddepcontrol.wait) */
#pragma unroll
    for (int s = 0; s < D; s++) {
        if constexpr (SRC == SRC_REG) {
            if (s < nb) load(s);
        } else {
            cp_load(s);
        }
    }
    const uint32_t sm_act = smem_u32(smem) + (uint32_t)ring_bytes<WG, D, SRC>();
    if (tid == 0) {
        mbar_init(&staged, 1);
        mbar_fence_init();
        prefetch_tensor_map(&act);
    }
    __syncthreads(); /* the barrier's init before anyone waits on it */
    pdl_wait();

    /* The K share's activations by the copy engine (LSU loads would queue behind this SM's weight
     * loads, NOTES.md rows 153-156): one TMA box {64, TN, 2} a block, the tokens past M
     * zero-filled, the block's two 64-column boxes TN·128 bytes apart in the 128-byte swizzle
     * the B descriptors read (the shipped kernel's map and box) */
    if (tid == 0) {
        mbar_arrive_expect_tx(&staged, (uint32_t)(nb * 2 * BOX));
        for (int j = 0; j < nb; j++)
            tma_load_3d(smem + ring_bytes<WG, D, SRC>() + j * 2 * BOX, &act, 0, 0, 2 * (b0 + j), &staged);
    }
    mbar_wait(&staged, 0);

    float acc[TN / 2];
#pragma unroll
    for (int i = 0; i < TN / 2; i++) acc[i] = 0.f;

    if (p.mode & MODE_LOADS) {
        /* the loop's structure alone: the loaded words kept live by an XOR */
        uint32_t x = 0;
        auto fold = [&](int s) {
            x ^= lo[s].x ^ lo[s].y ^ lo[s].z ^ lo[s].w ^ hi[s].x ^ hi[s].y ^ hi[s].z ^ hi[s].w ^ sl[s] ^ sh[s];
        };
        if constexpr (SRC == SRC_REG) {
            for (int base = 0; base < nb; base += D) {
#pragma unroll
                for (int s = 0; s < D; s++) {
                    const int i = base + s;
                    if (i >= nb) break;
                    fold(s);
                    if (i + D < nb) load(s);
                }
            }
        } else {
            for (int i = 0; i < nb; i++) {
                cp_take(i);
                fold(0);
                cp_load(i + D);
            }
        }
        acc[0] = __uint_as_float(x & 0x007FFFFFu);
    } else {
        const uint32_t magic = codes_magic(p.m);
        const uint64_t desc0 = desc_k128b(sm_act);
        uint32_t f[BUF][8][4];
        /* block i's 8 k16 A fragments from register slot s into buffer fb (the shipped kernel's
         * prepare(): register e of step kk holds row g (+8 for odd e), k = 16·kk + 2·t4 (+8 for
         * e >= 2) and the next k) */
        auto convert = [&](int fb, int s) {
            const uint32_t sl2 = (sl[s] & 0xFFFFu) * 0x10001u, bl2 = (sl[s] >> 16) * 0x10001u;
            const uint32_t sh2 = (sh[s] & 0xFFFFu) * 0x10001u, bh2 = (sh[s] >> 16) * 0x10001u;
#pragma unroll
            for (int kk = 0; kk < 8; kk++) {
                const int wj = kk / 2, sft = (kk % 2) * 8;
                const uint32_t wl = word_at(lo[s], wj), wh = word_at(hi[s], wj);
                f[fb][kk][0] = dequant_pair(wl, sft, sl2, bl2, magic);
                f[fb][kk][1] = dequant_pair(wh, sft, sh2, bh2, magic);
                f[fb][kk][2] = dequant_pair(wl, sft + 4, sl2, bl2, magic);
                f[fb][kk][3] = dequant_pair(wh, sft + 4, sh2, bh2, magic);
            }
#pragma unroll
            for (int kk = 0; kk < 8; kk++)
#pragma unroll
                for (int e = 0; e < 4; e++) fence_reg(f[fb][kk][e]);
        };
        /* block i from register slot s (SRC_REG; SRC_CPA: its ring slot, s = 0) through
         * fragment buffer fb */
        auto step = [&](int i, int s, int fb) {
            if constexpr (SRC == SRC_REG) {
                convert(fb, s);
                if (i + D < nb) load(s); /* the slot is free once converted */
            } else {
                cp_take(i);
                convert(fb, 0);
                cp_load(i + D); /* the slot is free once read (this lane's own bytes) */
            }
            /* B: block i's boxes at (2i + kk/4)·BOX, 32 bytes a k16 step inside the swizzled
             * 128-byte rows; added to the descriptor's address field (>> 4, no carry out:
             * shared addresses are below 2^18) */
            const uint64_t db = desc0 + (uint64_t)((i * 2 * BOX) >> 4);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 8; kk++)
                WgmmaRS<TN>::mma(acc, f[fb][kk][0], f[fb][kk][1], f[fb][kk][2], f[fb][kk][3],
                                 db + (uint64_t)(((kk / 4) * BOX + (kk % 4) * 32) >> 4));
            wgmma_commit();
            if constexpr (BUF == 1) {
                wgmma_wait<0>();
#pragma unroll
                for (int e = 0; e < TN / 2; e++) fence_reg(acc[e]);
#pragma unroll
                for (int kk = 0; kk < 8; kk++)
#pragma unroll
                    for (int e = 0; e < 4; e++) fence_reg(f[0][kk][e]);
            } else {
                /* the previous block's wgmmas are done: its buffer may be rewritten */
                wgmma_wait<1>();
#pragma unroll
                for (int kk = 0; kk < 8; kk++)
#pragma unroll
                    for (int e = 0; e < 4; e++) fence_reg(f[1 - fb][kk][e]);
            }
        };
        if constexpr (SRC == SRC_REG && BUF == 1) {
            /* the matvec's loop: D blocks a pass, slots static, the pass left early at the end */
            for (int base = 0; base < nb; base += D) {
#pragma unroll
                for (int s = 0; s < D; s++) {
                    if (base + s >= nb) break;
                    step(base + s, s, 0);
                }
            }
        } else if constexpr (BUF == 1) {
            for (int i = 0; i < nb; i++) step(i, 0, 0);
        } else {
            /* one block an iteration, its slot and buffer chosen by a branch to a straight-line
             * copy of the step: ptxas keeps a wgmma group in flight across straight-line code
             * and the loop's back edge only (with the passes' early exits above it serialized
             * every wgmma, C7513). U: a multiple of the register slots and of 2. */
            constexpr int U = RSLOTS % 2 ? 2 * RSLOTS : RSLOTS;
            for (int i = 0; i < nb; i++) {
                const int r = i % U;
#pragma unroll
                for (int j = 0; j < U; j++)
                    if (r == j) step(i, j % RSLOTS, j % 2);
            }
        }
        if constexpr (BUF == 2) {
            wgmma_wait<0>();
#pragma unroll
            for (int e = 0; e < TN / 2; e++) fence_reg(acc[e]);
        }
    }
    if constexpr (SRC == SRC_CPA) cp_async_wait<0>(); /* the empty groups past the end */
    pdl_launch_dependents(); /* the next call may start its weight loads */

    /* accumulator e: token 8·(e/4) + 2·t4 + e%2, row g (+8 for e%4 >= 2) of the warp's 16 */
    auto store = [&](const float *v) {
#pragma unroll
        for (int e = 0; e < TN / 2; e++) {
            const int tok = 8 * (e / 4) + 2 * t4 + (e & 1), row = row0 + g + (e & 2 ? 8 : 0);
            if (tok < p.m && row < p.n) p.c[(int64_t)tok * p.n + row] = __float2bfloat16_rn(v[e]);
        }
    };
    if (p.split == 1) {
        store(acc);
        return;
    }
    /* split-K: the partial, then the count; the last CTA of the tile sums in order 0..split-1 */
    float *const slots = p.partials + (int64_t)tile * p.split * (T * TN / 2);
#pragma unroll
    for (int r4 = 0; r4 < TN / 8; r4++)
        *(float4 *)(slots + (int64_t)z * (T * TN / 2) + (r4 * T + tid) * 4) =
            make_float4(acc[4 * r4], acc[4 * r4 + 1], acc[4 * r4 + 2], acc[4 * r4 + 3]);
    if (p.mode & MODE_NOFIX) return;
    __threadfence();
    __syncthreads();
    if (tid == 0) last_cta = atom_add_acq_rel_gpu(&p.counters[tile], 1u) == (uint32_t)(p.split - 1);
    __syncthreads();
    if (!last_cta) return;
    __threadfence();
    float v[TN / 2];
#pragma unroll
    for (int e = 0; e < TN / 2; e++) v[e] = 0.f;
#pragma unroll 4
    for (int zz = 0; zz < p.split; zz++) {
        const float *sz = slots + (int64_t)zz * (T * TN / 2);
#pragma unroll
        for (int r4 = 0; r4 < TN / 8; r4++) {
            const float4 x = __ldcg((const float4 *)(sz + (r4 * T + tid) * 4));
            v[4 * r4] += x.x, v[4 * r4 + 1] += x.y, v[4 * r4 + 2] += x.z, v[4 * r4 + 3] += x.w;
        }
    }
    store(v);
    if (tid == 0) p.counters[tile] = 0; /* ready for the next call */
}

/* ---- the host side: kernel table, launcher ------------------------------------------------- */

using RfFn = void (*)(CUtensorMap, RfArgs);
struct RfKernel {
    int tn, wg, d, buf, src;
    RfFn fn;
    int ring; /* bytes of the cp.async rings */
};
#define RF_K(TN, WG, D, B, S) {TN, WG, D, B, S, rf_w4_bf16_kernel<TN, WG, D, B, S>, ring_bytes<WG, D, S>()}
/* Register slots: two fragment buffers at D = 4 take 226-234 registers (ptxas gives each of the
 * loop's four step copies its own fragments), at D = 2 about half. cp.async rings: D 4 and 8. */
#define RF_WG(TN, WG)                                                                              \
    RF_K(TN, WG, 2, 1, SRC_REG), RF_K(TN, WG, 3, 1, SRC_REG), RF_K(TN, WG, 4, 1, SRC_REG),          \
        RF_K(TN, WG, 2, 2, SRC_REG), RF_K(TN, WG, 4, 2, SRC_REG), RF_K(TN, WG, 4, 1, SRC_CPA),      \
        RF_K(TN, WG, 8, 1, SRC_CPA), RF_K(TN, WG, 4, 2, SRC_CPA), RF_K(TN, WG, 8, 2, SRC_CPA)
const RfKernel rf_kernels[] = {RF_WG(16, 1), RF_WG(16, 2), RF_WG(32, 1), RF_WG(32, 2)};

const RfKernel *find_kernel(int tn, int wg, int d, int buf, int src)
{
    for (const RfKernel &k : rf_kernels)
        if (k.tn == tn && k.wg == wg && k.d == d && k.buf == buf && k.src == src) return &k;
    return nullptr;
}
const char *kernel_name(const RfKernel &k)
{
    return k.src == SRC_REG ? (k.buf == 2 ? "rf_b2" : "rf") : (k.buf == 2 ? "rf_cpa_b2" : "rf_cpa");
}

constexpr int SMEM_MAX = 200 * 1024; /* the attribute asked for (the opt-in limit is 227 KB less static) */
size_t rf_smem(const RfKernel &k, int blocks, int split)
{
    return (size_t)k.ring + (size_t)((blocks + split - 1) / split) * k.tn * 256 + 1024;
}

/* One weight's device pointers for the kernel. */
struct DevW {
    const uint32_t *packed, *sb;
    int n_pad;
};

/* The activations' tensor map, as gemm_sm90.cu's: a [m, k] bf16 seen as [k/64][m][64], box
 * {64, tn, 2} (one 128-column block, two swizzled 64-column halves), rows past m zero-filled. */
bool encode_act_map(const void *a, int m, int k, int tn, CUtensorMap *map)
{
    static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            f = nullptr;
        return (PFN_cuTensorMapEncodeTiled_v12000)f;
    }();
    if (!encode) return false;
    cuuint64_t dims[3] = {64, (cuuint64_t)m, (cuuint64_t)(k / 64)};
    cuuint64_t strides[2] = {(cuuint64_t)k * 2, 128};
    cuuint32_t box[3] = {64, (cuuint32_t)tn, 2};
    cuuint32_t elem[3] = {1, 1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)a, dims, strides, box, elem,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* c[m, n] = a[m, k] · Wᵀ on stream st; map: encode_act_map(a, m, k, kn.tn); split: K partitions,
 * 1..blocks; mode: MODE_* bits. */
cudaError_t rf_launch(const RfKernel &kn, const CUtensorMap &map, const DevW &w, int n, int k, const __nv_bfloat16 *a,
                      int m, __nv_bfloat16 *c, float *partials, uint32_t *counters, int split, int mode, cudaStream_t st)
{
    RfArgs p = {w.packed, w.sb, a, c, partials, counters, m, n, k, w.n_pad, k / 128, split, mode};
    const dim3 grid(w.n_pad / (64 * kn.wg), split), block(128 * kn.wg);
    return launch_pdl(kn.fn, grid, block, rf_smem(kn, p.blocks, split), st, true, map, p);
}

/* ---- host data ------------------------------------------------------------------------------ */

struct Proj {
    const char *name;
    int n, k;
};
const Proj projs[] = {{"q", 4096, 2560}, {"k", 1024, 2560}, {"o", 2560, 4096}, {"gate", 9728, 2560},
                      {"down", 2560, 9728}};

float bf(qmm_bf16 x) { return qmm_bf16_to_f32(x); }

/* got against ref (both [m, n] bf16): max |got - ref|, max |ref|, and whether every element is
 * within 2^-7·|ref| + 1e-2·max|ref| and finite. */
bool compare(const std::vector<qmm_bf16> &got, const std::vector<qmm_bf16> &ref, double *max_err, double *max_ref)
{
    double mr = 0, me = 0;
    for (qmm_bf16 x : ref) mr = std::max(mr, (double)fabsf(bf(x)));
    bool ok = true;
    for (size_t i = 0; i < ref.size(); i++) {
        const double r = bf(ref[i]), e = fabs((double)bf(got[i]) - r);
        if (!(e <= ldexp(fabs(r), -7) + 1e-2 * mr)) ok = false; /* NaN fails */
        if (!(e <= me)) me = e;
    }
    *max_err = me, *max_ref = mr;
    return ok;
}

/* ---- the self-check: exact values, every instantiation ------------------------------------- */

int self_check(cudaStream_t st, qmm_cuda_ctx *ctx)
{
    const int N = 120, K = 512, MMAX = 32, GUARD = 256;
    uint32_t seed = 12345u;
    auto rnd = [&]() { return seed = seed * 1664525u + 1013904223u, (int)(seed >> 8); };
    qmm_w4 w;
    if (qmm_w4_alloc(N, K, &w)) {
        fprintf(stderr, "rf_wgmma: qmm_w4_alloc: %s\n", qmm_last_error());
        return 1;
    }
    const float scales[3] = {0.5f, 1.f, 2.f}, biases[4] = {-8.f, -4.f, 0.f, 2.f};
    std::vector<float> wf((size_t)N * K), af((size_t)MMAX * K);
    memset(w.packed, 0, w.packed_count * 4);
    for (int r = 0; r < N; r++)
        for (int gi = 0; gi < K / 128; gi++) {
            const float s = scales[rnd() % 3], b = biases[rnd() % 4];
            w.scales[r * (K / 128) + gi] = qmm_f32_to_bf16(s), w.biases[r * (K / 128) + gi] = qmm_f32_to_bf16(b);
            for (int j = gi * 128; j < gi * 128 + 128; j++) {
                const int q = rnd() % 16;
                w.packed[(size_t)r * (K / 8) + j / 8] |= (uint32_t)q << (4 * (j % 8));
                wf[(size_t)r * K + j] = s * q + b;
            }
        }
    std::vector<qmm_bf16> ha((size_t)MMAX * K), ref((size_t)MMAX * N);
    for (size_t i = 0; i < ha.size(); i++) af[i] = 0.5f * (float)(rnd() % 9 - 4), ha[i] = qmm_f32_to_bf16(af[i]);
    for (int t = 0; t < MMAX; t++) /* exact in double and in float: one rounding to bf16 */
        for (int r = 0; r < N; r++) {
            double x = 0;
            for (int j = 0; j < K; j++) x += (double)wf[(size_t)r * K + j] * af[(size_t)t * K + j];
            ref[(size_t)t * N + r] = qmm_f32_to_bf16((float)x);
        }
    qmm_cuda_weight *cw;
    if (qmm_cuda_weight_upload(ctx, &w, &cw)) {
        fprintf(stderr, "rf_wgmma: upload: %s\n", qmm_last_error());
        return 1;
    }
    const DevWeight &dw = weight_dev(cw);
    const DevW d = {dw.packed, dw.sb, (int)dw.n_pad};
    __nv_bfloat16 *a, *c;
    float *parts;
    uint32_t *counters;
    CK(cudaMalloc(&a, ha.size() * 2));
    CK(cudaMalloc(&c, ((size_t)MMAX * N + GUARD) * 2));
    CK(cudaMalloc(&parts, (size_t)d.n_pad * 4 * MMAX * 4));
    CK(cudaMalloc(&counters, 64 * 4));
    CK(cudaMemset(counters, 0, 64 * 4));
    CK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));

    int checked = 0, failed = 0;
    std::vector<qmm_bf16> out((size_t)MMAX * N + GUARD);
    std::vector<uint32_t> cnt(64);
    for (const RfKernel &kn : rf_kernels)
        for (int split : {1, 3})
            for (int m : {kn.tn, kn.tn - 7}) {
                CUtensorMap map;
                if (!encode_act_map(a, m, K, kn.tn, &map)) {
                    fprintf(stderr, "rf_wgmma: cuTensorMapEncodeTiled failed\n");
                    return 1;
                }
                CK(cudaMemsetAsync(c, 0xFF, out.size() * 2, st));
                CK(rf_launch(kn, map, d, N, K, a, m, c, parts, counters, split, MODE_FULL, st));
                CK(cudaStreamSynchronize(st));
                CK(cudaMemcpy(out.data(), c, out.size() * 2, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(cnt.data(), counters, cnt.size() * 4, cudaMemcpyDeviceToHost));
                int bad = 0;
                for (size_t i = 0; i < (size_t)m * N; i++) bad += out[i] != ref[i];
                for (size_t i = (size_t)m * N; i < out.size(); i++) bad += out[i] != 0xFFFF; /* past C */
                for (uint32_t x : cnt) bad += x != 0;
                checked++;
                if (bad) {
                    failed++;
                    fprintf(stderr, "self-check FAIL %s TN %d WG %d D %d B %d split %d M %d: %d wrong\n",
                            kernel_name(kn), kn.tn, kn.wg, kn.d, kn.buf, split, m, bad);
                }
            }
    printf("# self-check (exact values, N %d K %d, split 1/3, M = TN, TN-7; bitwise vs host): %s, %d of %d right\n",
           N, K, failed ? "FAIL" : "PASS", checked - failed, checked);
    cudaFree(a), cudaFree(c), cudaFree(parts), cudaFree(counters);
    qmm_cuda_weight_free(cw);
    qmm_w4_free(&w);
    return failed ? 1 : 0;
}

/* ---- timing --------------------------------------------------------------------------------- */

struct Copies {
    std::vector<qmm_cuda_weight *> w; /* w[0] uploaded, the others wrapped D2D copies */
    std::vector<void *> bufs;
    std::vector<DevW> d;
    size_t packed_bytes = 0, sb_bytes = 0;
};

struct AutoCall {
    qmm_cuda_ctx *ctx;
    const Copies *cp;
    const qmm_bf16 *a;
    int m;
    qmm_bf16 *c;
    void *ws;
    size_t ws_bytes;
};
int enqueue_auto(void *user, int call, char *why, size_t why_len)
{
    AutoCall &k = *static_cast<AutoCall *>(user);
    qmm_cuda_options o = qmm_cuda_options_default();
    if (qmm_cuda_matmul(k.ctx, k.a, k.m, k.cp->w[call % k.cp->w.size()], k.c, k.ws, k.ws_bytes, &o, NULL)) {
        snprintf(why, why_len, "%s", qmm_last_error());
        return 1;
    }
    return 0;
}

struct RfCall {
    const RfKernel *kn;
    CUtensorMap map; /* encode_act_map(a, m, k, kn->tn): set_m keeps it in step with m */
    const Copies *cp;
    int n, k, m, split, mode;
    const __nv_bfloat16 *a;
    __nv_bfloat16 *c;
    float *parts;
    uint32_t *counters;
    cudaStream_t st;
};
void set_m(RfCall &r, int m)
{
    r.m = m;
    if (!encode_act_map(r.a, m, r.k, r.kn->tn, &r.map)) {
        fprintf(stderr, "rf_wgmma: cuTensorMapEncodeTiled failed\n");
        exit(1);
    }
}
int enqueue_rf(void *user, int call, char *why, size_t why_len)
{
    RfCall &r = *static_cast<RfCall *>(user);
    const cudaError_t e = rf_launch(*r.kn, r.map, r.cp->d[call % r.cp->d.size()], r.n, r.k, r.a, r.m, r.c, r.parts,
                                    r.counters, r.split, r.mode, r.st);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "%s", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

struct ReadCall {
    const Copies *cp;
    int grid;
    uint32_t *sink;
    cudaStream_t st;
};
int enqueue_read(void *user, int call, char *why, size_t why_len)
{
    ReadCall &r = *static_cast<ReadCall *>(user);
    if (bench_read_weight_grid(r.cp->w[call % r.cp->w.size()], r.grid, r.sink, r.st)) {
        snprintf(why, why_len, "the read kernel's launch failed");
        return 1;
    }
    return 0;
}

double time_calls(cudaStream_t st, bench_enqueue_fn fn, void *user, int copies)
{
    const bench_timing_req q = {copies, copies, 9, 50.0};
    bench_time t;
    char why[256];
    if (bench_time_calls(st, fn, user, &q, &t, why, sizeof why)) {
        fprintf(stderr, "rf_wgmma: timing failed: %s\n", why);
        exit(1);
    }
    return t.graph_med;
}

struct Cfg {
    const RfKernel *kn;
    int split;
};

/* The default list: WG 1 and 2, the split that puts about 2 and 4 four-warp CTAs on each SM
 * (the same warps either way); register slots D 3, 4 with one fragment buffer and 2 with two;
 * cp.async rings D 4, 8 with one buffer and 4 with two. */
std::vector<Cfg> default_cfgs(int tn, int n_pad, int blocks, int sms)
{
    std::vector<Cfg> v;
    const int tiles1 = n_pad / 64;
    for (int wg = 1; wg <= 2; wg++) {
        std::vector<int> splits;
        for (int r : {2, 4}) {
            int s = std::max(1, std::min(blocks, (int)lround((double)r * sms / tiles1)));
            while (s < blocks && rf_smem(*find_kernel(tn, wg, 8, 1, SRC_CPA), blocks, s) > SMEM_MAX) s++;
            if (std::find(splits.begin(), splits.end(), s) == splits.end()) splits.push_back(s);
        }
        for (int s : splits)
            for (int dbs : {310, 410, 220, 411, 811, 421})
                v.push_back({find_kernel(tn, wg, dbs / 100, dbs / 10 % 10, dbs % 10), s});
    }
    return v;
}

/* RF_CONFIGS=WG:C:D:B[:S],...  (S: 0 register slots, the default; 1 cp.async ring) */
bool parse_cfgs(const char *s, int tn, int blocks, std::vector<Cfg> *out)
{
    while (*s) {
        int wg, c, d, b, src = 0, used = 0;
        if (sscanf(s, "%d:%d:%d:%d%n", &wg, &c, &d, &b, &used) != 4) return false;
        s += used, used = 0;
        if (*s == ':' && sscanf(s, ":%d%n", &src, &used) != 1) return false;
        const RfKernel *kn = find_kernel(tn, wg, d, b, src);
        if (!kn || c < 1 || c > blocks || rf_smem(*kn, blocks, c) > SMEM_MAX) {
            fprintf(stderr, "rf_wgmma: no kernel WG %d D %d B %d S %d at TN %d, or split %d out of 1..%d (or too "
                            "much shared memory)\n", wg, d, b, src, tn, c, blocks);
            return false;
        }
        out->push_back({kn, c});
        s += used;
        if (*s == ',') s++;
        else if (*s) return false;
    }
    return true;
}

} // namespace

int main(int argc, char **argv)
{
    std::vector<const Proj *> sel;
    for (int i = 1; i < argc; i++) {
        const Proj *pj = nullptr;
        for (const Proj &x : projs)
            if (!strcmp(x.name, argv[i])) pj = &x;
        if (!pj) {
            fprintf(stderr, "usage: rf_wgmma [q|k|o|gate|down ...]  (env RF_M=16|32|16,32, "
                            "RF_CONFIGS=WG:C:D:B[:S],...)\n");
            return 2;
        }
        sel.push_back(pj);
    }
    if (sel.empty())
        for (const Proj &x : projs) sel.push_back(&x);
    std::vector<int> ms;
    {
        const char *e = getenv("RF_M");
        for (const char *s = e && *e ? e : "16"; *s;) {
            char *end;
            const long m = strtol(s, &end, 10);
            if (end == s || m < 1 || m > 32) {
                fprintf(stderr, "rf_wgmma: RF_M: token counts 1..32, comma separated\n");
                return 2;
            }
            ms.push_back((int)m);
            s = *end == ',' ? end + 1 : end;
        }
    }

    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    qmm_cuda_ctx *ctx;
    if (qmm_cuda_create(0, st, &ctx)) {
        fprintf(stderr, "qmm_cuda_create: %s\n", qmm_last_error());
        return 1;
    }
    qmm_gpu_info gi;
    CKQ(qmm_cuda_info(ctx, &gi));
    printf("# rf_wgmma: %s, sm_%d%d, %d SMs, SM clock %d MHz, memory clock %d MHz x %d bits, L2 %d MB\n", gi.name,
           gi.cc_major, gi.cc_minor, gi.sm_count, gi.clock_khz / 1000, gi.mem_clock_khz / 1000, gi.mem_bus_bits,
           gi.l2_bytes >> 20);
    if (gi.cc_major != 9) {
        fprintf(stderr, "rf_wgmma: needs an sm_90 GPU\n");
        return 1;
    }
    for (const RfKernel &kn : rf_kernels) {
        CK(cudaFuncSetAttribute(kn.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_MAX));
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, kn.fn));
        printf("# kernel %s TN %d WG %d D %d B %d: %d registers, %zu bytes local (spills)\n", kernel_name(kn), kn.tn,
               kn.wg, kn.d, kn.buf, fa.numRegs, fa.localSizeBytes);
    }
    /* a failed self-check is reported and counted, and the timings still run (a first device
     * call of new code: the loop's structure is timed even where a layout detail is wrong) */
    int failures = self_check(st, ctx) ? 1 : 0;
    printf("proj,m,kernel,wg,c,d,us,read_us,auto_us,max_abs_err,ok\n");
    for (const Proj *pj : sel) {
        const int N = pj->n, K = pj->k, blocks = K / 128;
        qmm_w4 w;
        CKQ(qmm_w4_alloc(N, K, &w));
        test_random_w4(&w, 0.002, 0.02);
        Copies cp;
        const double bytes = (double)N * K * 0.53125;
        const int copies = std::min(256, std::max(4, (int)ceil(400e6 / bytes)));
        cp.w.resize(1);
        CKQ(qmm_cuda_weight_upload(ctx, &w, &cp.w[0]));
        CKQ(qmm_w4_device_image_bytes(N, K, &cp.packed_bytes, &cp.sb_bytes));
        const DevWeight &d0 = weight_dev(cp.w[0]);
        cp.d.push_back({d0.packed, d0.sb, (int)d0.n_pad});
        for (int i = 1; i < copies; i++) {
            void *pk, *sb;
            CK(cudaMalloc(&pk, cp.packed_bytes));
            CK(cudaMalloc(&sb, cp.sb_bytes));
            CK(cudaMemcpy(pk, d0.packed, cp.packed_bytes, cudaMemcpyDeviceToDevice));
            CK(cudaMemcpy(sb, d0.sb, cp.sb_bytes, cudaMemcpyDeviceToDevice));
            qmm_cuda_weight *x;
            CKQ(qmm_cuda_weight_wrap(ctx, N, K, pk, sb, &x));
            cp.w.push_back(x), cp.bufs.push_back(pk), cp.bufs.push_back(sb);
            cp.d.push_back({(const uint32_t *)pk, (const uint32_t *)sb, (int)d0.n_pad});
        }
        const int n_pad = (int)d0.n_pad;
        std::vector<qmm_bf16> ha((size_t)32 * K);
        test_fill_bf16(ha.data(), ha.size(), 1.0);
        qmm_bf16 *a, *c;
        float *parts;
        uint32_t *counters, *sink;
        CK(cudaMalloc(&a, ha.size() * 2));
        CK(cudaMalloc(&c, (size_t)32 * N * 2));
        CK(cudaMalloc(&parts, (size_t)n_pad * blocks * 32 * 4));
        CK(cudaMalloc(&counters, (size_t)n_pad / 64 * 4));
        CK(cudaMalloc(&sink, 4));
        CK(cudaMemset(counters, 0, (size_t)n_pad / 64 * 4));
        CK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
        printf("# %s: N %d K %d, %d copies of %.2f MB (packed + scale|bias)\n", pj->name, N, K, copies,
               (cp.packed_bytes + cp.sb_bytes) / 1e6);

        /* the floor: best of three grids */
        double read_us = 1e30;
        for (int mult : {2, 4, 8}) {
            ReadCall rc = {&cp, mult * gi.sm_count, sink, st};
            const double us = time_calls(st, enqueue_read, &rc, copies);
            printf("# %s read, %d CTAs of %d threads: %.2f us\n", pj->name, rc.grid, 512, us);
            read_us = std::min(read_us, us);
        }

        for (int m : ms) {
            const int tn = m <= 16 ? 16 : 32, m_rag = tn == 16 ? 9 : 25;
            std::vector<Cfg> cfgs;
            if (const char *e = getenv("RF_CONFIGS")) {
                if (!parse_cfgs(e, tn, blocks, &cfgs)) {
                    fprintf(stderr, "rf_wgmma: bad RF_CONFIGS %s\n", e);
                    return 2;
                }
            } else {
                cfgs = default_cfgs(tn, n_pad, blocks, gi.sm_count);
            }
            /* the auto path: the references at m and m_rag, then its time (twice, the first
             * discarded: the first timing of a process read 1-4 % high, sm90_trace) */
            size_t ws_bytes = 0, ws_rag = 0;
            qmm_cuda_options o = qmm_cuda_options_default();
            CKQ(qmm_cuda_workspace_size(ctx, m, N, K, &o, &ws_bytes));
            CKQ(qmm_cuda_workspace_size(ctx, m_rag, N, K, &o, &ws_rag));
            ws_bytes = std::max(ws_bytes, ws_rag);
            void *ws = nullptr;
            if (ws_bytes) CK(cudaMalloc(&ws, ws_bytes));
            std::vector<qmm_bf16> ref[2], got((size_t)32 * N);
            const int check_m[2] = {m, m_rag};
            for (int v = 0; v < 2; v++) {
                qmm_plan plan;
                CK(cudaMemsetAsync(c, 0xFF, (size_t)32 * N * 2, st));
                CKQ(qmm_cuda_matmul(ctx, a, check_m[v], cp.w[0], c, ws, ws_bytes, &o, &plan));
                CK(cudaStreamSynchronize(st));
                ref[v].resize((size_t)check_m[v] * N);
                CK(cudaMemcpy(ref[v].data(), c, ref[v].size() * 2, cudaMemcpyDeviceToHost));
                printf("# %s M %d auto plan: path %d, split %d, CTAs %lld, tile %dx%d, rest %dx%d\n", pj->name,
                       check_m[v], (int)plan.path, plan.split, (long long)plan.blocks, plan.tile_m, plan.tile_n,
                       plan.rest_tiles, plan.rest_split);
            }
            AutoCall ac = {ctx, &cp, a, m, c, ws, ws_bytes};
            time_calls(st, enqueue_auto, &ac, copies);
            const double auto_us = time_calls(st, enqueue_auto, &ac, copies);
            printf("%s,%d,auto,,,,%.2f,%.2f,%.2f,,1\n", pj->name, m, auto_us, read_us, auto_us);
            printf("%s,%d,read,,,,%.2f,%.2f,%.2f,,1\n", pj->name, m, read_us, read_us, auto_us);
            fflush(stdout);

            double best_us[2] = {1e30, 1e30}; /* the fastest configuration of each weight path */
            const Cfg *best[2] = {nullptr, nullptr};
            bool best_ok[2] = {false, false};
            for (const Cfg &cf : cfgs) {
                const RfKernel &kn = *cf.kn;
                int occ = 0;
                const size_t smem = rf_smem(kn, blocks, cf.split);
                CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kn.fn, 128 * kn.wg, smem));
                const int ctas = n_pad / (64 * kn.wg) * cf.split;
                printf("# %s M %d %s WG %d C %d D %d B %d: %d CTAs (%.2f a SM, at most %d resident), %d-%d blocks a CTA, "
                       "%.1f KB shared\n", pj->name, m, kernel_name(kn), kn.wg, cf.split, kn.d, kn.buf, ctas,
                       (double)ctas / gi.sm_count,
                       occ, blocks / cf.split, (blocks + cf.split - 1) / cf.split, smem / 1024.0);
                RfCall rc = {&kn, {}, &cp, N, K, m, cf.split, MODE_FULL, (const __nv_bfloat16 *)a, (__nv_bfloat16 *)c,
                             parts, counters, st};
                /* checks: at m and m_rag on copy 0, C poisoned, the counters back at zero */
                double err[2] = {0, 0}, mref[2] = {0, 0};
                bool ok[2];
                for (int v = 0; v < 2; v++) {
                    set_m(rc, check_m[v]);
                    CK(cudaMemsetAsync(c, 0xFF, (size_t)32 * N * 2, st));
                    char why[256];
                    if (enqueue_rf(&rc, 0, why, sizeof why)) {
                        fprintf(stderr, "rf_wgmma: launch failed: %s\n", why);
                        return 1;
                    }
                    CK(cudaStreamSynchronize(st));
                    CK(cudaMemcpy(got.data(), c, ref[v].size() * 2, cudaMemcpyDeviceToHost));
                    std::vector<uint32_t> cnt((size_t)n_pad / 64);
                    CK(cudaMemcpy(cnt.data(), counters, cnt.size() * 4, cudaMemcpyDeviceToHost));
                    std::vector<qmm_bf16> g2(got.begin(), got.begin() + ref[v].size());
                    ok[v] = compare(g2, ref[v], &err[v], &mref[v]);
                    for (uint32_t x : cnt) ok[v] = ok[v] && x == 0;
                    if (!ok[v]) failures++;
                }
                set_m(rc, m);
                const char *name = kernel_name(kn);
                double us;
                us = time_calls(st, enqueue_rf, &rc, copies); /* timed even when wrong: ok says */
                /* the fastest right configuration, or the fastest of all while none is right */
                if ((ok[0] || !best_ok[kn.src]) && (us < best_us[kn.src] || (ok[0] && !best_ok[kn.src])))
                    best_us[kn.src] = us, best[kn.src] = &cf, best_ok[kn.src] = ok[0];
                printf("%s,%d,%s,%d,%d,%d,%.2f,%.2f,%.2f,%.4g,%d\n", pj->name, m, name, kn.wg, cf.split, kn.d, us, read_us,
                       auto_us, err[0], ok[0] ? 1 : 0);
                printf("%s,%d,%s,%d,%d,%d,,,,%.4g,%d\n", pj->name, m_rag, name, kn.wg, cf.split, kn.d, err[1], ok[1] ? 1 : 0);
                fflush(stdout);
            }
            double ref_max = 0;
            for (qmm_bf16 x : ref[0]) ref_max = std::max(ref_max, (double)fabsf(bf(x)));
            printf("# %s M %d: max|ref| %.4g; tolerance 2^-7|ref| + 1e-2 max|ref|\n", pj->name, m, ref_max);
            for (int src = 0; src < 2; src++) {
                const Cfg *bc = best[src];
                if (!bc) continue;
                /* the timing-only modes of the path's fastest configuration */
                const struct {
                    const char *suffix;
                    int mode;
                } modes[] = {{"nofix", MODE_NOFIX}, {"loads", MODE_LOADS}, {"loads_nofix", MODE_LOADS | MODE_NOFIX}};
                for (const auto &md : modes) {
                    RfCall rc = {bc->kn, {}, &cp, N, K, m, bc->split, md.mode, (const __nv_bfloat16 *)a,
                                 (__nv_bfloat16 *)c, parts, counters, st};
                    set_m(rc, m);
                    const double us = time_calls(st, enqueue_rf, &rc, copies);
                    printf("%s,%d,%s_%s,%d,%d,%d,%.2f,%.2f,%.2f,,\n", pj->name, m, kernel_name(*bc->kn), md.suffix,
                           bc->kn->wg, bc->split, bc->kn->d, us, read_us, auto_us);
                }
                printf("# %s M %d: best %s %.2f us (WG %d C %d D %d B %d) = %.2fx read, %.2fx auto\n", pj->name, m,
                       kernel_name(*bc->kn), best_us[src], bc->kn->wg, bc->split, bc->kn->d, bc->kn->buf,
                       best_us[src] / read_us, best_us[src] / auto_us);
            }
            CK(cudaMemset(counters, 0, (size_t)n_pad / 64 * 4)); /* untouched by those modes; kept exact anyway */
            printf("# %s M %d: auto re-timed at the end %.2f us (first %.2f)\n", pj->name, m,
                   time_calls(st, enqueue_auto, &ac, copies), auto_us);
            fflush(stdout);
            if (ws) cudaFree(ws);
        }
        cudaFree(a), cudaFree(c), cudaFree(parts), cudaFree(counters), cudaFree(sink);
        for (qmm_cuda_weight *x : cp.w) qmm_cuda_weight_free(x);
        for (void *b : cp.bufs) cudaFree(b);
        qmm_w4_free(&w);
    }
    qmm_cuda_destroy(ctx);
    printf("# %s\n", failures ? "FAIL: some configuration disagreed with the auto path" : "all checks passed");
    return failures ? 1 : 0;
}
