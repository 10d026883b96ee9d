/*
 * wgmma_issue: what one k-block of the Hopper W4A16 kernel (gemm_sm90_kernel.cuh) costs, and how
 * much of it is issuing the wgmmas, with the dequantized weights (wgmma's A operand) given
 *   RS  from registers, as the kernel does: `wgmma.mma_async m64nNk16 d, {a0..a3}, desc_b`, or
 *   SS  through shared memory: the converted bf16 A tile stored in the K-major 128-byte-swizzled
 *       layout (the one TMA gives the activations, B), fence.proxy.async.shared::cta, a barrier
 *       of the warpgroup's 128 threads (bar.sync 1 + warpgroup), then `d, desc_a, desc_b`.
 * Nothing is loaded from global memory in the loop: the packed codes, scales/biases and the
 * activation tile stay in shared memory for the whole launch. One CTA a SM on every SM (the
 * launch asks for 150 KB of shared memory), 1 or 2 consumer warpgroups a CTA, each running
 * ITER k-blocks (K = 128 each) of
 *   full        ld.shared of 16 code words + 2 scale|bias words a thread, the kernel's conversion
 *               (dequant_pair: LOP3 + two bf16x2 FMAs a pair, magic from a register) into 32
 *               bf16x2 fragment registers; SS: 8 stmatrix.x4 (the fragments into the swizzled
 *               tile, two tiles alternating), proxy fence, warpgroup barrier; then wgmma.fence,
 *               8 wgmmas (k16 step kk into accumulator set kk % NACC), commit, wait_group 0
 *   full-sts32  SS only: the tile stored by 32 st.shared.b32 a thread instead of stmatrix
 *   issue       the conversion and the stores done once before the loop: fence, 8 wgmmas,
 *               commit, wait 0 (the issue cost and the MMA latency alone)
 *   *-accA      the same with A independent accumulator sets (the kernel's NACC for N < 128:
 *               8 at N = 16, 4 at N = 32, 2 at N = 64); without the suffix one set of N/2 floats.
 * Timing (clock64, thread 0 of each warpgroup): cycles for the ITER k-blocks, and the cycles from
 * before wgmma.fence to after commit_group of each k-block (the span the kernel's trace calls
 * "issue span"), both divided by ITER; the SM clock from clock64 against %globaltimer over each
 * CTA's run. Medians over every CTA's warpgroups of REPS launches (after one warm-up).
 * Before timing, every configuration runs one k-block on one CTA with codes, scales, biases and
 * activations whose products and sums are exact in fp32, compared to the CPU (the SS layout and
 * descriptors proven right; a wrong layout makes the SS timings meaningless).
 *
 *   wgmma_issue [ITER [REPS]]          defaults 200 and 5 (build: ninja -C build wgmma_issue;
 *                                      the whole run takes a few seconds)
 *   stdout: '#' lines (device, checks, clock), then
 *           mode,variant,N,wgs,cycles_per_kblock,issue_cycles_per_kblock,ns_per_kblock
 *   exit status 1 when a check failed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "cuda/common.cuh" /* dequant_pair, codes_magic: the kernel's conversion (sm90_convert) */
#include "cuda/hopper.cuh" /* wgmma fence/commit/wait, desc_k128b, named_barrier, WgmmaRS<N>, lds128 */
#include "w4_probe_data.h"

#define PCK(x)                                                                                       \
    do {                                                                                             \
        cudaError_t e_ = (x);                                                                        \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "wgmma_issue: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

namespace {
using namespace qmm;

/* ---- wgmma with A and B both from shared memory (descriptors); d[N/2] += A(64x16) · B(16xN):
 * scale-d 1 (accumulate), scale-a/b 1, both K-major (transpose 0); written as gen_wgmma_rs.py
 * writes the register-A ones ---- */
template <int N> struct WgmmaSS;
template <> struct WgmmaSS<16> {
    static __device__ __forceinline__ void mma(float (&d)[8], uint64_t desc_a, uint64_t desc_b)
    {
        asm volatile("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
                     "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, 1, 1, 1, 0, 0;\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "l"(desc_a), "l"(desc_b));
    }
};
template <> struct WgmmaSS<32> {
    static __device__ __forceinline__ void mma(float (&d)[16], uint64_t desc_a, uint64_t desc_b)
    {
        asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, 1, 1, 1, 0, 0;\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "l"(desc_a), "l"(desc_b));
    }
};
template <> struct WgmmaSS<64> {
    static __device__ __forceinline__ void mma(float (&d)[32], uint64_t desc_a, uint64_t desc_b)
    {
        asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, 1, 1, 1, 0, 0;\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(desc_a), "l"(desc_b));
    }
};
template <> struct WgmmaSS<128> {
    static __device__ __forceinline__ void mma(float (&d)[64], uint64_t desc_a, uint64_t desc_b)
    {
        asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, 1, 1, 1, 0, 0;\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(desc_a), "l"(desc_b));
    }
};
template <> struct WgmmaSS<256> {
    static __device__ __forceinline__ void mma(float (&d)[128], uint64_t desc_a, uint64_t desc_b)
    {
        asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, 1, 1, 1, 0, 0;\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "l"(desc_a), "l"(desc_b));
    }
};

constexpr int A_TILE = 64 * 128 * 2; /* one warpgroup's bf16 A tile of a k-block: 16 KB */
/* shared memory from a 1024-aligned base: B (N rows x 256 bytes, at most 64 KB), the A tiles
 * (2 a warpgroup), the packed codes (4 KB a warpgroup), scale|bias words (256 bytes a warpgroup) */
constexpr int OFF_B = 0, OFF_A = 65536, OFF_W = OFF_A + 4 * A_TILE, OFF_SB = OFF_W + 8192;
constexpr int SMEM_BYTES = 150 * 1024; /* > half of the SM's 228 KB: one CTA a SM */
static_assert(OFF_SB + 512 + 1024 <= SMEM_BYTES, "shared memory layout");
enum { RS = 0, SS = 1 };
enum { FULL = 0, ISSUE = 1, FULL_STS = 2 };
constexpr int CLK_SLOTS = 5; /* per CTA: clock64 and globaltimer at entry and exit, smid */

/* four 8x8 b16 matrices in the mma fragment layout (thread g, t4: row g, columns 2·t4, 2·t4 + 1);
 * lane l gives the address of row l % 8 of matrix l / 8 (16 contiguous bytes) */
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r0), "r"(r1),
                 "r"(r2), "r"(r3)
                 : "memory");
}
__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned long long globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    return t;
}

/* packed: per warpgroup 4 KB of codes (warp w's 16 rows at word (wg·4 + w)·256, row r's 16
 * words at 16·r, thread t4's four at 4·t4: the kernel's stage layout); sb: a scale|bias bf16 pair
 * per weight row; b_img: the swizzled B tile's bytes (N·256); out (CTA 0 only): thread t's N/2
 * accumulators at t·N/2; times: per (CTA, warpgroup) total and issue cycles; clocks: CLK_SLOTS a
 * CTA. */
template <int N, int MODE, int VAR, int NACC>
__global__ void __launch_bounds__(256, 1)
    probe_kernel(const uint32_t *__restrict__ packed, const uint32_t *__restrict__ sb,
                 const uint4 *__restrict__ b_img, int iters, int magic_src, float *out,
                 unsigned long long *times, unsigned long long *clocks)
{
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const int tid = threadIdx.x, wgs = blockDim.x / 128;
    unsigned long long c_entry = 0, g_entry = 0;
    if (tid == 0) c_entry = clock64(), g_entry = globaltimer();
    for (int i = tid; i < N * 16; i += blockDim.x) ((uint4 *)(smem + OFF_B))[i] = b_img[i];
    for (int i = tid; i < wgs * 1024; i += blockDim.x) ((uint32_t *)(smem + OFF_W))[i] = packed[i];
    for (int i = tid; i < wgs * 64; i += blockDim.x) ((uint32_t *)(smem + OFF_SB))[i] = sb[i];
    __syncthreads();

    /* the warpgroup index through a shuffle from lane 0, so that the compiler knows it is
     * warp-uniform and keeps the A tile's descriptors in uniform registers (no R2UR a wgmma) */
    const int wg = __shfl_sync(0xFFFFFFFFu, tid / 128, 0);
    const int ct = tid % 128, warp = ct / 32, lane = ct % 32, g = lane / 4, t4 = lane % 4;
    const uint32_t magic = codes_magic(magic_src);
    const uint32_t sm_b = smem_u32(smem + OFF_B), sm_a = smem_u32(smem + OFF_A + wg * 2 * A_TILE);
    const uint32_t *wt = (const uint32_t *)(smem + OFF_W) + (wg * 4 + warp) * 256;
    const uint32_t *sbt = (const uint32_t *)(smem + OFF_SB) + wg * 64 + warp * 16;

    /* The kernel's prepare() without the stage wait: this thread's eight k16 A fragments, rows g
     * and g + 8 of its warp's 16; register i of step kk holds row g (+8 for odd i), k = 16·kk +
     * 2·t4 (+8 for i >= 2) and the next k. */
    uint32_t f[8][4];
    auto convert = [&]() {
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

    /* The A tile (64 rows x 128 k, bf16) as wgmma's K-major 128-byte-swizzle operand: two
     * 64-element k boxes of 8 KB, row m of a box at 128·m; the 16-byte chunk c (k 8c…8c + 7 of
     * the box) of row m at chunk c ^ (m % 8); the tile 1024-aligned, so that the swizzle (address
     * bits 4-6 ^= bits 7-9) is the same in absolute addresses. Exactly the layout TMA's 128-byte
     * swizzle writes for B, read through the same descriptor (desc_k128b). */
    const int st_row = 16 * warp + (lane & 7) + ((lane >> 3) & 1) * 8; /* stmatrix: matrix lane/8's row lane%8 */
    const uint32_t st_off = st_row * 128, st_x = (lane & 7) ^ (lane >> 4);
    auto store_a = [&](uint32_t a_buf) {
        if (VAR == FULL_STS) {
#pragma unroll
            for (int kk = 0; kk < 8; kk++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int row = 16 * warp + g + 8 * (i & 1), chunk = 2 * (kk % 4) + (i >> 1);
                    sts32(a_buf + (kk / 4) * 8192 + row * 128 + ((chunk ^ g) << 4) + 4 * t4, f[kk][i]);
                }
        } else {
            /* matrices 0…3 = f[kk][0…3]: rows 0-7 / 8-15 of the warp, k chunk 2·(kk%4) / +1 */
#pragma unroll
            for (int kk = 0; kk < 8; kk++)
                stmatrix_x4(a_buf + (kk / 4) * 8192 + st_off + (((2 * (kk % 4)) ^ st_x) << 4), f[kk][0], f[kk][1],
                            f[kk][2], f[kk][3]);
        }
    };

    float accs[NACC][N / 2];
#pragma unroll
    for (int u = 0; u < NACC; u++)
#pragma unroll
        for (int i = 0; i < N / 2; i++) accs[u][i] = 0.f;
    /* B (the activations): step kk at box kk / 4, 32 bytes a k16 step, as the kernel's step() */
    auto desc_b = [&](int kk) { return desc_k128b(sm_b + (kk / 4) * N * 128 + (kk % 4) * 32); };
    /* A (SS): the tile's descriptor once, each step's by adding its offset / 16 to the start
     * address field (no carry out of it: shared addresses are below 2^18) */
    auto mma = [&](uint32_t a_buf) {
        const uint64_t da = desc_k128b(a_buf);
#pragma unroll
        for (int kk = 0; kk < 8; kk++) {
            if constexpr (MODE == RS)
                WgmmaRS<N>::mma(accs[kk % NACC], f[kk][0], f[kk][1], f[kk][2], f[kk][3], desc_b(kk));
            else
                WgmmaSS<N>::mma(accs[kk % NACC], da + (uint64_t)(((kk / 4) * 8192 + (kk % 4) * 32) >> 4), desc_b(kk));
        }
    };

    if (VAR == ISSUE) { /* the operand fixed: converted (and stored) once */
        convert();
        if (MODE == SS) {
            store_a(sm_a);
            fence_proxy_async_shared();
            named_barrier(1 + wg, 128);
        }
    }
    __syncthreads();
    long long t_issue = 0;
    const long long t_start = clock64();
#pragma unroll 1
    for (int it = 0; it < iters; it++) {
        const uint32_t a_buf = VAR == ISSUE ? sm_a : sm_a + (it & 1) * A_TILE;
        if (VAR != ISSUE) {
            convert();
            if (MODE == SS) {
                /* the tile two k-blocks back: every warp of the warpgroup passed this barrier
                 * one k-block ago, after its wait for that k-block's wgmmas */
                store_a(a_buf);
                fence_proxy_async_shared(); /* generic-proxy stores before the async proxy's reads */
                named_barrier(1 + wg, 128);
            }
        }
        const long long t0 = clock64();
        wgmma_fence();
        mma(a_buf);
        wgmma_commit();
        t_issue += clock64() - t0;
        wgmma_wait<0>();
#pragma unroll
        for (int u = 0; u < NACC; u++)
#pragma unroll
            for (int i = 0; i < N / 2; i++) fence_reg(accs[u][i]);
        if (MODE == RS)
#pragma unroll
            for (int kk = 0; kk < 8; kk++)
#pragma unroll
                for (int i = 0; i < 4; i++) fence_reg(f[kk][i]);
    }
    const long long t_end = clock64();

    if (ct == 0) {
        times[(blockIdx.x * 2 + wg) * 2] = (unsigned long long)(t_end - t_start);
        times[(blockIdx.x * 2 + wg) * 2 + 1] = (unsigned long long)t_issue;
    }
    if (blockIdx.x == 0)
#pragma unroll
        for (int i = 0; i < N / 2; i++) {
            float s = accs[0][i];
#pragma unroll
            for (int u = 1; u < NACC; u++) s += accs[u][i];
            out[tid * (N / 2) + i] = s;
        }
    __syncthreads();
    if (tid == 0) {
        unsigned smid;
        asm volatile("mov.u32 %0, %%smid;\n" : "=r"(smid));
        unsigned long long *c = clocks + blockIdx.x * CLK_SLOTS;
        c[0] = c_entry, c[1] = clock64(), c[2] = g_entry, c[3] = globaltimer(), c[4] = smid;
    }
}

using KernelFn = void (*)(const uint32_t *, const uint32_t *, const uint4 *, int, int, float *,
                          unsigned long long *, unsigned long long *);
struct Cfg {
    int mode, var, n, nacc;
    KernelFn fn;
};
#define RS_CFGS(N) {RS, FULL, N, 1, probe_kernel<N, RS, FULL, 1>}, {RS, ISSUE, N, 1, probe_kernel<N, RS, ISSUE, 1>}
#define SS_CFGS(N)                                                                                   \
    {SS, FULL, N, 1, probe_kernel<N, SS, FULL, 1>}, {SS, FULL_STS, N, 1, probe_kernel<N, SS, FULL_STS, 1>}, \
        {SS, ISSUE, N, 1, probe_kernel<N, SS, ISSUE, 1>}
/* the kernel's accumulator sets at N < 128 (NACC = 8, 4, 2) */
#define ACC_CFGS(M, N, A) {M, FULL, N, A, probe_kernel<N, M, FULL, A>}, {M, ISSUE, N, A, probe_kernel<N, M, ISSUE, A>}
const Cfg cfgs[] = {RS_CFGS(16), RS_CFGS(32), RS_CFGS(64), RS_CFGS(128), RS_CFGS(256),
                    ACC_CFGS(RS, 16, 8), ACC_CFGS(RS, 32, 4), ACC_CFGS(RS, 64, 2),
                    SS_CFGS(16), SS_CFGS(32), SS_CFGS(64), SS_CFGS(128), SS_CFGS(256),
                    ACC_CFGS(SS, 16, 8), ACC_CFGS(SS, 32, 4), ACC_CFGS(SS, 64, 2)};

const char *mode_name(int m) { return m == RS ? "RS" : "SS"; }
void variant_name(const Cfg &c, char *buf, size_t len)
{
    const char *base = c.var == FULL ? "full" : c.var == ISSUE ? "issue" : "full-sts32";
    if (c.nacc > 1) snprintf(buf, len, "%s-acc%d", base, c.nacc);
    else snprintf(buf, len, "%s", base);
}

} // namespace

int main(int argc, char **argv)
{
    int iters, reps, sms;
    if (const int st = probe_sm90_start("wgmma_issue", argc, argv, &iters, &reps, &sms)) return st;

    const ProbeData data; /* w4_probe_data.h: exact products and sums */
    const int NMAX = ProbeData::NMAX;
    const std::vector<uint32_t> &packed = data.packed, &sbw = data.sbw;

    uint32_t *d_packed, *d_sb;
    uint4 *d_b;
    float *d_out;
    unsigned long long *d_times, *d_clocks;
    PCK(cudaMalloc(&d_packed, packed.size() * 4));
    PCK(cudaMalloc(&d_sb, sbw.size() * 4));
    PCK(cudaMalloc(&d_b, NMAX * 256));
    PCK(cudaMalloc(&d_out, 256 * (NMAX / 2) * sizeof(float)));
    PCK(cudaMalloc(&d_times, (size_t)sms * 4 * sizeof(unsigned long long)));
    PCK(cudaMalloc(&d_clocks, (size_t)sms * CLK_SLOTS * sizeof(unsigned long long)));
    PCK(cudaMemcpy(d_packed, packed.data(), packed.size() * 4, cudaMemcpyHostToDevice));
    PCK(cudaMemcpy(d_sb, sbw.data(), sbw.size() * 4, cudaMemcpyHostToDevice));
    for (const Cfg &c : cfgs) PCK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));

    /* B's shared-memory image for N tokens: element (n, k) at box k / 64 (N·128 bytes each), row
     * n, chunk (k % 64) / 8 ^ (n % 8), 2·(k % 8) into the chunk: TMA's 128-byte swizzle */
    auto upload_b = [&](int n_tok) {
        const std::vector<uint16_t> img = data.b_image(n_tok);
        PCK(cudaMemcpy(d_b, img.data(), img.size() * 2, cudaMemcpyHostToDevice));
    };

    /* ---- checks: one k-block on one CTA, every configuration ---- */
    int checked[2] = {0, 0}, failed[2] = {0, 0};
    std::vector<float> out(256 * (NMAX / 2));
    for (int wgs = 1; wgs <= 2; wgs++)
        for (const Cfg &c : cfgs) {
            upload_b(c.n);
            PCK(cudaMemset(d_out, 0xFF, out.size() * sizeof(float))); /* NaN: a thread that wrote nothing fails */
            c.fn<<<1, 128 * wgs, SMEM_BYTES>>>(d_packed, d_sb, d_b, 1, 0, d_out, d_times, d_clocks);
            PCK(cudaGetLastError());
            PCK(cudaDeviceSynchronize());
            PCK(cudaMemcpy(out.data(), d_out, 128 * wgs * (c.n / 2) * sizeof(float), cudaMemcpyDeviceToHost));
            double max_err = 0;
            int bad = 0;
            for (int t = 0; t < 128 * wgs; t++) {
                for (int i = 0; i < c.n / 2; i++) {
                    int row, tok;
                    ProbeData::acc_place(t, i, &row, &tok);
                    const double v = out[t * (c.n / 2) + i], err = fabs(v - data.dot(row, tok));
                    if (!(err <= 1e-3)) bad++;
                    if (!(err <= max_err)) max_err = err; /* NaN counts */
                }
            }
            char vn[32];
            variant_name(c, vn, sizeof vn);
            checked[c.mode]++;
            if (bad) {
                failed[c.mode]++;
                fprintf(stderr, "check FAIL %s %s N=%d wgs=%d: %d of %d outputs wrong, max error %g\n", mode_name(c.mode),
                        vn, c.n, wgs, bad, 128 * wgs * c.n / 2, max_err);
            }
        }
    for (int m = 0; m < 2; m++)
        printf("# check %s: %s (%d of %d configurations right: one k-block against the CPU)\n", mode_name(m),
               failed[m] ? "FAIL" : "PASS", checked[m] - failed[m], checked[m]);

    /* ---- timing: one CTA a SM on every SM ---- */
    printf("mode,variant,N,wgs,cycles_per_kblock,issue_cycles_per_kblock,ns_per_kblock\n");
    std::vector<unsigned long long> times((size_t)sms * 4), clocks((size_t)sms * CLK_SLOTS);
    std::vector<double> all_ghz;
    for (int wgs = 1; wgs <= 2; wgs++)
        for (const Cfg &c : cfgs) {
            upload_b(c.n);
            std::vector<double> tot, iss, ghz;
            bool shared_sm = false;
            for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
                c.fn<<<sms, 128 * wgs, SMEM_BYTES>>>(d_packed, d_sb, d_b, iters, 0, d_out, d_times, d_clocks);
                PCK(cudaGetLastError());
                PCK(cudaDeviceSynchronize());
                if (r < 0) continue;
                PCK(cudaMemcpy(times.data(), d_times, times.size() * sizeof(times[0]), cudaMemcpyDeviceToHost));
                PCK(cudaMemcpy(clocks.data(), d_clocks, clocks.size() * sizeof(clocks[0]), cudaMemcpyDeviceToHost));
                std::vector<int> seen(1024, 0);
                for (int b = 0; b < sms; b++) {
                    for (int w = 0; w < wgs; w++) {
                        tot.push_back((double)times[(b * 2 + w) * 2] / iters);
                        iss.push_back((double)times[(b * 2 + w) * 2 + 1] / iters);
                    }
                    const unsigned long long *k = &clocks[(size_t)b * CLK_SLOTS];
                    if (k[3] > k[2]) ghz.push_back((double)(k[1] - k[0]) / (double)(k[3] - k[2]));
                    if (seen[k[4] % 1024]++) shared_sm = true;
                }
            }
            const double cyc = probe_median(tot), ic = probe_median(iss), clk = probe_median(ghz);
            all_ghz.push_back(clk);
            char vn[32];
            variant_name(c, vn, sizeof vn);
            printf("%s,%s,%d,%d,%.1f,%.1f,%.1f\n", mode_name(c.mode), vn, c.n, wgs, cyc, ic, cyc / clk);
            if (shared_sm) printf("# warning: %s %s N=%d wgs=%d: two CTAs ran on one SM\n", mode_name(c.mode), vn, c.n, wgs);
            fflush(stdout);
        }
    std::sort(all_ghz.begin(), all_ghz.end());
    printf("# SM clock (clock64 / globaltimer, median over CTAs): %.3f GHz (configurations' range %.3f-%.3f)\n",
           probe_median(all_ghz), all_ghz.front(), all_ghz.back());
    cudaFree(d_packed), cudaFree(d_sb), cudaFree(d_b), cudaFree(d_out), cudaFree(d_times), cudaFree(d_clocks);
    return failed[0] || failed[1] ? 1 : 0;
}
