/*
 * ring_probe: where the wgmma kernel's 128- and 256-token k-block loses to the tensor bound.
 *
 * Row 175 (`wgmma_issue`) ran the consumers' k-block on operands that stay in shared memory: two
 * warpgroups at N = 128 take 1 108 cycles a k-block against 1 024 for the wgmmas alone, where the
 * kernel (gemm_sm90_kernel.cuh) takes ~1 450 (`sm90_trace`: 735 ns at q M = 256). This probe puts
 * the kernel's ring back piece by piece: a CTA of the kernel's shape (a producer warpgroup whose
 * lane 0 issues every copy, two consumer warpgroups of 64 weight rows, setmaxnreg 40 / 232, one
 * CTA a SM on every SM), the kernel's conversion (dequant_pair) and register-A wgmmas, ITER
 * k-blocks a CTA, in six modes:
 *   fixed     the stage's bytes copied once; every k-block reads stage 0 (row 175's floor)
 *   land      as fixed, while the producer copies a stage's bytes (B, codes, scale|bias) into
 *             the other slots at the consumers' pace (each k-block's end frees a slot): the
 *             landing bytes' contention alone, nothing waits for them
 *   ring      the kernel's ring: the consumers wait for stage j's full barrier, read its B,
 *             codes and scale|bias, and release it on its empty barrier; sources L2-resident
 *   ring-hbm  as ring, each k-block's codes a fresh 8 KB piece of a large buffer (HBM, with the
 *             kernel's evict-first hint), as the kernel's weights
 *   lock      as fixed, the two consumer warpgroups meeting at a named barrier before each
 *             k-block's conversion (the lockstep one full barrier imposes, without copies)
 *   ring-w    as ring, but only the codes and scale|bias are copied a stage (8.5 KB); every slot's
 *             B written once at the start
 * with STAGES slots and, at N = 128, the kernel's pipe (two fragment buffers, one k-block's
 * wgmmas in flight, the stage released a k-block late) or drain (wait 0, one buffer; the
 * kernel's 256-token loop).
 * Timing (clock64, thread 0 of each consumer warpgroup, first wait to last drain) divided by
 * ITER, with the part of it spent spinning on full barriers and issuing the wgmmas (fence to
 * commit: it includes waiting for the conversion's results); the SM clock from clock64 against
 * %globaltimer; medians over every CTA's warpgroups of REPS launches after one warm-up. Before
 * timing, every configuration runs 11 k-blocks on one CTA with exact data (w4_probe_data.h,
 * each copied k-block's scale|bias one of seven exact multiples, the ring poisoned first)
 * against the CPU: a stage read before its copy landed or from another lap fails it.
 *
 *   ring_probe [ITER [REPS]]           defaults 200 and 5 (build: ninja -C build ring_probe)
 *   stdout: '#' lines (device, checks, clock), then
 *           mode,N,stages,loop,cycles_per_kblock,ns_per_kblock,wait_full_cycles,issue_cycles
 *   exit status 1 when a check failed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "cuda/common.cuh" /* dequant_pair, codes_magic: the kernel's conversion */
#include "cuda/hopper.cuh" /* mbarriers, bulk copies, wgmma fence/commit/wait, WgmmaRS<N>, desc_k128b */
#include "w4_probe_data.h"

#define PCK(x)                                                                                       \
    do {                                                                                             \
        cudaError_t e_ = (x);                                                                        \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "ring_probe: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

namespace {
using namespace qmm;

enum { FIXED = 0, LAND = 1, RING = 2, RING_HBM = 3, LOCK = 4, RING_W = 5 };
const char *const mode_names[6] = {"fixed", "land", "ring", "ring-hbm", "lock", "ring-w"};
constexpr int W_BYTES = 8192, SB_BYTES = 512; /* 128 rows: the kernel's WG = 2 stage */
/* k-block j's copies take scale|bias variant j % SB_VARIANTS (scales and biases times
 * sb_mult[v]: exact, so a k-block's product is sb_mult[v] times variant 0's), so that a stage read
 * before its copy landed, or a slot's copy from another lap of the ring, changes the sum the
 * check compares; 7 is prime to every stage count the probe runs */
constexpr int SB_VARIANTS = 7;
const float sb_mult[SB_VARIANTS] = {1.f, -1.f, 2.f, -2.f, 4.f, -4.f, 0.5f};
template <int N> struct Stage {
    static constexpr int B = N * 256; /* two 64-wide k boxes of N rows, TMA's 128-byte swizzle */
    static constexpr int TX = B + W_BYTES + SB_BYTES;
    static constexpr int BYTES = (TX + 1023) / 1024 * 1024;
};
constexpr int SMEM_MAX = 227 * 1024;
constexpr int CLK_SLOTS = 4; /* per CTA: clock64 and globaltimer at entry and exit */

/* img: one stage's bytes (B image, codes, scale|bias variant 0) then the other SB_VARIANTS - 1
 * scale|bias variants; wbig: nbig copies of the codes (ring-hbm);
 * out (CTA 0): consumer thread t's N/2 accumulators at t·N/2; times: per (CTA, consumer
 * warpgroup) the loop's cycles; clocks: CLK_SLOTS a CTA. */
template <int N, int STAGES, int MODE, bool PIPE>
__global__ void __launch_bounds__(384, 1)
    ring_kernel(const uint8_t *__restrict__ img, const uint8_t *__restrict__ wbig, long long nbig, int iters,
                int magic_src, float *out, unsigned long long *times, unsigned long long *clocks)
{
    using S = Stage<N>;
    static_assert(STAGES * S::BYTES + 1024 + 2 * STAGES * 8 + 16 <= SMEM_MAX, "shared memory");
    constexpr bool RINGED = MODE == RING || MODE == RING_HBM || MODE == RING_W;
    constexpr bool RELEASES = MODE != FIXED && MODE != LOCK;
    static_assert(MODE != LAND || STAGES >= 2, "land copies into slots 1 and up");
    static_assert(!RINGED || !PIPE || STAGES >= 2, "the pipe holds two stages");
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(smem + STAGES * S::BYTES), *empty = full + STAGES;
    int *done = (int *)(empty + STAGES); /* land: warps' finished k-blocks (lane 0 of each adds 1) */
    const int tid = threadIdx.x;
    unsigned long long c_entry = 0, g_entry = 0;
    if (tid == 128) { /* the consumer thread that writes the clocks at the end */
        asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(g_entry));
        c_entry = clock64();
    }
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) mbar_init(&full[s], 1), mbar_init(&empty[s], 8);
        *done = 0;
        mbar_fence_init();
    }
    /* the ring poisoned (NaN codes' neighbours: 0xFF bytes), so that a stage read before its copy
     * lands cannot pass the check on an earlier launch's bytes */
    for (int i = tid; i < STAGES * S::BYTES / 16; i += blockDim.x)
        ((uint4 *)smem)[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
    fence_proxy_async_shared(); /* before the copies that overwrite it */
    __syncthreads();            /* before other threads' stores below */
    if (MODE == FIXED || MODE == LAND || MODE == LOCK) { /* stage 0 holds the operands for the whole launch */
        for (int i = tid; i < S::TX / 16; i += blockDim.x) ((uint4 *)smem)[i] = ((const uint4 *)img)[i];
        fence_proxy_async_shared(); /* generic stores before the wgmmas' async-proxy reads */
    }
    if (MODE == RING_W) { /* every slot's B, once */
        for (int s = 0; s < STAGES; s++)
            for (int i = tid; i < S::B / 16; i += blockDim.x)
                ((uint4 *)(smem + s * S::BYTES))[i] = ((const uint4 *)img)[i];
        fence_proxy_async_shared();
    }
    __syncthreads();
    const int wg = __shfl_sync(0xFFFFFFFFu, tid / 128, 0);

    if (wg == 0) { /* ---- producer: lane 0 of warp 0 issues every copy ---- */
        regs_dealloc<40>();
        if (tid != 0 || MODE == FIXED || MODE == LOCK) return;
        const uint64_t pol = policy_evict_first();
        auto copy_stage = [&](int slot, int j) {
            uint8_t *st = smem + slot * S::BYTES;
            mbar_arrive_expect_tx(&full[slot], MODE == RING_W ? S::TX - S::B : S::TX);
            if (MODE != RING_W) bulk_copy_plain(st, img, S::B, &full[slot]);
            if (MODE == RING_HBM)
                bulk_copy(st + S::B, wbig + (((long long)blockIdx.x * iters + j) % nbig) * W_BYTES, W_BYTES,
                          &full[slot], pol);
            else
                bulk_copy_plain(st + S::B, img + S::B, W_BYTES, &full[slot]);
            bulk_copy_plain(st + S::B + W_BYTES, img + S::B + W_BYTES + (j % SB_VARIANTS) * SB_BYTES, SB_BYTES,
                            &full[slot]);
        };
        if (MODE == LAND) {
            /* copy j into slot 1 + j % (STAGES − 1), once k-block j − (STAGES − 1) is done (a
             * count that only grows: the consumers never wait here, so the producer may lag
             * them by any number of k-blocks) and the slot's last copy has landed */
            constexpr int NS = STAGES > 1 ? STAGES - 1 : 1; /* (STAGES ≥ 2 in land) */
            for (int j = 0; j < iters; j++) {
                const int slot = 1 + j % NS, u = j / NS;
                if (u > 0) {
                    while (*(volatile int *)done < 8 * (j - NS + 1)) {
                    }
                    mbar_wait(&full[slot], (u - 1) & 1);
                }
                copy_stage(slot, j);
            }
            for (int j = max(0, iters - NS); j < iters; j++) mbar_wait(&full[1 + j % NS], (j / NS) & 1);
        } else {
            for (int j = 0; j < iters; j++) {
                const int s = j % STAGES, u = j / STAGES;
                if (u > 0) mbar_wait(&empty[s], (u - 1) & 1);
                copy_stage(s, j);
            }
        }
        return;
    }

    /* ---- consumers: warpgroup c, weight rows [64c, 64c + 64) ---- */
    regs_alloc<232>();
    const int c = wg - 1, ct = tid - 128 * wg, warp = ct / 32, lane = ct % 32, g = lane / 4, t4 = lane % 4;
    const uint32_t magic = codes_magic(magic_src);
    float acc[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++) acc[i] = 0.f;
    uint32_t fa[8][4], fb[8][4];
    long long t0 = 0, t_wait = 0, t_issue = 0; /* the loop's start; cycles spinning on full barriers; issuing */
    /* the slot k-block j reads; the end of k-block j: its stage's empty barrier, or land's count */
    auto read_slot = [&](int j) { return RINGED ? j % STAGES : 0; };
    auto release = [&](int j) {
        if (MODE == LAND) atomicAdd(done, 1);
        else mbar_arrive(&empty[j % STAGES]);
    };
    /* the kernel's prepare(): wait for the stage, build the eight k16 A fragments */
    auto prepare = [&](uint32_t (&f)[8][4], int j) {
        const int s = read_slot(j);
        if (RINGED) {
            const long long w0 = clock64();
            mbar_spin(&full[s], (j / STAGES) & 1);
            t_wait += clock64() - w0;
        }
        if (j == 0) t0 = clock64(); /* the loop from its first stage on, as sm90_trace's */
        if (MODE == LOCK) named_barrier(2, 256);
        const uint8_t *st = smem + s * S::BYTES;
        const uint32_t *wt = (const uint32_t *)(st + S::B) + (c * 4 + warp) * 256;
        const uint32_t *sbt = (const uint32_t *)(st + S::B + W_BYTES) + c * 64 + warp * 16;
        const uint4 lo = lds128(wt + 16 * g + 4 * t4), hi = lds128(wt + 16 * (g + 8) + 4 * t4);
        const uint32_t sbl = lds32(sbt + g), sbh = lds32(sbt + g + 8);
        const uint32_t sl = (sbl & 0xFFFFu) * 0x10001u, bl = (sbl >> 16) * 0x10001u;
        const uint32_t sh = (sbh & 0xFFFFu) * 0x10001u, bh = (sbh >> 16) * 0x10001u;
#pragma unroll
        for (int kk = 0; kk < 8; kk++) {
            const int wj = kk / 2, sft = (kk % 2) * 8;
            const uint32_t wl = word_at(lo, wj), wh = word_at(hi, wj);
            f[kk][0] = dequant_pair(wl, sft, sl, bl, magic), f[kk][1] = dequant_pair(wh, sft, sh, bh, magic);
            f[kk][2] = dequant_pair(wl, sft + 4, sl, bl, magic), f[kk][3] = dequant_pair(wh, sft + 4, sh, bh, magic);
        }
#pragma unroll
        for (int kk = 0; kk < 8; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++) fence_reg(f[kk][i]);
    };
    int pending = -1; /* pipe: the k-block whose wgmmas may still run */
    auto step = [&](uint32_t (&cur)[8][4], uint32_t (&nxt)[8][4], int j) {
        const uint32_t b = smem_u32(smem + read_slot(j) * S::BYTES);
        const long long i0 = clock64();
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 8; kk++)
            WgmmaRS<N>::mma(acc, cur[kk][0], cur[kk][1], cur[kk][2], cur[kk][3],
                            desc_k128b(b + (kk / 4) * N * 128 + (kk % 4) * 32));
        wgmma_commit();
        t_issue += clock64() - i0;
        if (PIPE) {
            wgmma_wait<1>();
#pragma unroll
            for (int kk = 0; kk < 8; kk++)
#pragma unroll
                for (int i = 0; i < 4; i++) fence_reg(nxt[kk][i]);
            __syncwarp();
            if (pending >= 0 && RELEASES && lane == 0) release(pending);
            pending = j;
            if (j + 1 < iters) prepare(nxt, j + 1);
            return;
        }
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < N / 2; i++) fence_reg(acc[i]);
#pragma unroll
        for (int kk = 0; kk < 8; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++) fence_reg(cur[kk][i]);
        __syncwarp();
        if (RELEASES && lane == 0) release(j);
        if (j + 1 < iters) prepare(cur, j + 1);
    };

    prepare(fa, 0);
#pragma unroll 1
    for (int j = 0; j < iters; j++) {
        if (PIPE && (j & 1)) step(fb, fa, j);
        else step(fa, fb, j);
    }
    if (PIPE) {
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < N / 2; i++) fence_reg(acc[i]);
        __syncwarp();
        if (RELEASES && lane == 0) release(pending);
    }
    const long long t1 = clock64();
    if (ct == 0) {
        unsigned long long *tm = times + (blockIdx.x * 2 + c) * 3;
        tm[0] = (unsigned long long)(t1 - t0), tm[1] = (unsigned long long)t_wait, tm[2] = (unsigned long long)t_issue;
    }
    if (blockIdx.x == 0)
#pragma unroll
        for (int i = 0; i < N / 2; i++) out[(c * 128 + ct) * (N / 2) + i] = acc[i];
    named_barrier(1, 256); /* the consumers, before thread 128 reads the exit clocks */
    if (ct == 0 && c == 0) {
        unsigned long long *k = clocks + blockIdx.x * CLK_SLOTS, g_exit;
        asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(g_exit));
        k[0] = c_entry, k[1] = clock64(), k[2] = g_entry, k[3] = g_exit;
    }
}

using KernelFn = void (*)(const uint8_t *, const uint8_t *, long long, int, int, float *, unsigned long long *,
                          unsigned long long *);
struct Cfg {
    int mode, n, stages, pipe;
    KernelFn fn;
    int smem;
};
#define CFG(M, N, ST, P) {M, N, ST, P, ring_kernel<N, ST, M, P>, ST * Stage<N>::BYTES + 1024 + 2 * ST * 8 + 16}
const Cfg cfgs[] = {
    /* 128 tokens: the kernel's loop (pipe, 5 stages), then the ring's depth and the drain */
    CFG(FIXED, 128, 1, true), CFG(FIXED, 128, 1, false), CFG(LOCK, 128, 1, true), CFG(LAND, 128, 5, true),
    CFG(LAND, 128, 5, false), CFG(RING_W, 128, 5, true),
    CFG(RING, 128, 5, true), CFG(RING, 128, 4, true), CFG(RING, 128, 3, true), CFG(RING, 128, 5, false),
    CFG(RING_HBM, 128, 5, true), CFG(RING_HBM, 128, 4, true), CFG(RING_HBM, 128, 5, false),
    /* 256 tokens: the kernel's loop (drain, 3 stages) */
    CFG(FIXED, 256, 1, false), CFG(LOCK, 256, 1, false), CFG(LAND, 256, 3, false), CFG(RING_W, 256, 3, false),
    CFG(RING, 256, 3, false), CFG(RING, 256, 2, false), CFG(RING_HBM, 256, 3, false)};

} // namespace

int main(int argc, char **argv)
{
    int iters, reps, sms;
    if (const int st = probe_sm90_start("ring_probe", argc, argv, &iters, &reps, &sms)) return st;

    const ProbeData data; /* w4_probe_data.h: exact products and sums */
    const int NMAX = ProbeData::NMAX;
    /* a stage image for N tokens: B, then the codes, then the scale|bias words' SB_VARIANTS
     * variants (scale and bias times sb_mult[v], exact in bf16) */
    auto bf16_of = [](uint32_t h) {
        const uint32_t u = h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    };
    auto stage_image = [&](int n_tok) {
        std::vector<uint8_t> img((size_t)n_tok * 256 + W_BYTES + SB_VARIANTS * SB_BYTES);
        const std::vector<uint16_t> b = data.b_image(n_tok);
        memcpy(img.data(), b.data(), b.size() * 2);
        memcpy(&img[(size_t)n_tok * 256], data.packed.data(), W_BYTES);
        for (int v = 0; v < SB_VARIANTS; v++) {
            std::vector<uint32_t> sbv(ProbeData::ROWS);
            for (int r = 0; r < ProbeData::ROWS; r++) {
                const float sc = bf16_of(data.sbw[r] & 0xFFFFu) * sb_mult[v], bi = bf16_of(data.sbw[r] >> 16) * sb_mult[v];
                sbv[r] = probe_bf16_bits(sc) | (uint32_t)probe_bf16_bits(bi) << 16;
            }
            memcpy(&img[(size_t)n_tok * 256 + W_BYTES + v * SB_BYTES], sbv.data(), SB_BYTES);
        }
        return img;
    };

    /* ring-hbm's codes: ITER pieces a CTA, each a copy of the stage's 8 KB (more than L2 holds) */
    const long long nbig = (long long)sms * iters;
    uint8_t *d_img, *d_big;
    float *d_out;
    unsigned long long *d_times, *d_clocks;
    PCK(cudaMalloc(&d_img, (size_t)NMAX * 256 + W_BYTES + SB_VARIANTS * SB_BYTES));
    PCK(cudaMalloc(&d_big, (size_t)nbig * W_BYTES));
    PCK(cudaMalloc(&d_out, 256 * (NMAX / 2) * sizeof(float)));
    PCK(cudaMalloc(&d_times, (size_t)sms * 6 * sizeof(unsigned long long)));
    PCK(cudaMalloc(&d_clocks, (size_t)sms * CLK_SLOTS * sizeof(unsigned long long)));
    PCK(cudaMemcpy(d_big, data.packed.data(), W_BYTES, cudaMemcpyHostToDevice));
    for (long long have = 1; have < nbig; have *= 2) /* doubling copies of the first piece */
        PCK(cudaMemcpy(d_big + have * W_BYTES, d_big, (size_t)std::min(have, nbig - have) * W_BYTES,
                       cudaMemcpyDeviceToDevice));
    for (const Cfg &c : cfgs)
        PCK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, c.smem));

    /* ---- checks: CHECK_ITER k-blocks on one CTA, every configuration: every ring wraps twice,
     * and each k-block's scale|bias variant weighs its product (the ring modes copy k-block j's
     * variant j % SB_VARIANTS; the others read stage 0, variant 0, throughout) ---- */
    const int CHECK_ITER = 11;
    int failed = 0;
    std::vector<float> out(256 * (NMAX / 2));
    for (const Cfg &c : cfgs) {
        const std::vector<uint8_t> img = stage_image(c.n);
        PCK(cudaMemcpy(d_img, img.data(), img.size(), cudaMemcpyHostToDevice));
        PCK(cudaMemset(d_out, 0xFF, out.size() * sizeof(float))); /* NaN: a thread that wrote nothing fails */
        c.fn<<<1, 384, c.smem>>>(d_img, d_big, nbig, CHECK_ITER, 0, d_out, d_times, d_clocks);
        PCK(cudaGetLastError());
        PCK(cudaDeviceSynchronize());
        PCK(cudaMemcpy(out.data(), d_out, 256 * (c.n / 2) * sizeof(float), cudaMemcpyDeviceToHost));
        const bool ringed = c.mode == RING || c.mode == RING_HBM || c.mode == RING_W;
        double weight = 0; /* Σ over the k-blocks of the variant's multiple */
        for (int j = 0; j < CHECK_ITER; j++) weight += ringed ? sb_mult[j % SB_VARIANTS] : 1.0;
        int bad = 0;
        double max_err = 0;
        for (int t = 0; t < 256; t++) {
            for (int i = 0; i < c.n / 2; i++) {
                int row, tok;
                ProbeData::acc_place(t, i, &row, &tok);
                const double err = fabs(out[t * (c.n / 2) + i] - weight * data.dot(row, tok));
                if (!(err <= 1e-3)) bad++;
                if (!(err <= max_err)) max_err = err; /* NaN counts */
            }
        }
        if (bad) {
            failed++;
            fprintf(stderr, "check FAIL %s N=%d stages=%d %s: %d of %d outputs wrong, max error %g\n",
                    mode_names[c.mode], c.n, c.stages, c.pipe ? "pipe" : "drain", bad, 256 * c.n / 2, max_err);
        }
    }
    printf("# check: %s (%d of %zu configurations right: %d k-blocks against the CPU)\n", failed ? "FAIL" : "PASS",
           (int)(sizeof cfgs / sizeof cfgs[0]) - failed, sizeof cfgs / sizeof cfgs[0], CHECK_ITER);

    /* ---- timing: one CTA a SM on every SM ---- */
    printf("mode,N,stages,loop,cycles_per_kblock,ns_per_kblock,wait_full_cycles,issue_cycles\n");
    std::vector<unsigned long long> times((size_t)sms * 6), clocks((size_t)sms * CLK_SLOTS);
    std::vector<double> all_ghz;
    for (const Cfg &c : cfgs) {
        const std::vector<uint8_t> img = stage_image(c.n);
        PCK(cudaMemcpy(d_img, img.data(), img.size(), cudaMemcpyHostToDevice));
        std::vector<double> tot, wait, iss, ghz;
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
            c.fn<<<sms, 384, c.smem>>>(d_img, d_big, nbig, iters, 0, d_out, d_times, d_clocks);
            PCK(cudaGetLastError());
            PCK(cudaDeviceSynchronize());
            if (r < 0) continue;
            PCK(cudaMemcpy(times.data(), d_times, times.size() * sizeof(times[0]), cudaMemcpyDeviceToHost));
            PCK(cudaMemcpy(clocks.data(), d_clocks, clocks.size() * sizeof(clocks[0]), cudaMemcpyDeviceToHost));
            for (int b = 0; b < sms; b++) {
                for (int w = 0; w < 2; w++) {
                    const unsigned long long *tm = &times[(size_t)(b * 2 + w) * 3];
                    tot.push_back((double)tm[0] / iters), wait.push_back((double)tm[1] / iters);
                    iss.push_back((double)tm[2] / iters);
                }
                const unsigned long long *k = &clocks[(size_t)b * CLK_SLOTS];
                if (k[3] > k[2]) ghz.push_back((double)(k[1] - k[0]) / (double)(k[3] - k[2]));
            }
        }
        const double cyc = probe_median(tot), clk = probe_median(ghz);
        all_ghz.push_back(clk);
        printf("%s,%d,%d,%s,%.1f,%.1f,%.1f,%.1f\n", mode_names[c.mode], c.n, c.stages, c.pipe ? "pipe" : "drain", cyc,
               cyc / clk, probe_median(wait), probe_median(iss));
        fflush(stdout);
    }
    std::sort(all_ghz.begin(), all_ghz.end());
    printf("# SM clock (clock64 / globaltimer, median over CTAs): %.3f GHz (configurations' range %.3f-%.3f)\n",
           probe_median(all_ghz), all_ghz.front(), all_ghz.back());
    printf("# tensor bound: %d cycles a k-block at N = 128, %d at N = 256 (two warpgroups, 1 024 FMA a cycle a "
           "sub-partition's share: 128 rows x N x 128 k / 2 048)\n", 128 * 128 * 128 / 2048, 128 * 256 * 128 / 2048);
    cudaFree(d_img), cudaFree(d_big), cudaFree(d_out), cudaFree(d_times), cudaFree(d_clocks);
    return failed ? 1 : 0;
}
