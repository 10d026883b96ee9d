/* Device helpers of the Hopper W4A16 kernel (gemm_sm90_kernel.cuh): the predicated 4-byte
 * stores of the 128-token epilogues, how a consumer warp releases a stage, the code conversion, a
 * stage's fragment registers, the fixup's sum of workspace partials, and the trace build's
 * per-CTA buffer (shared-memory loads: hopper.cuh).
 * Included by gemm_sm90_kernel.cuh only (it defines that buffer). */
#ifndef QMM_CUDA_GEMM_SM90_DEVICE_CUH
#define QMM_CUDA_GEMM_SM90_DEVICE_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "gemm_sm90_args.cuh"
#include "hopper.cuh"
#include "tune/sm90.h"
#include "common.cuh" /* dequant_pair */

namespace qmm {

/* The dependency wait (griddepcontrol) where the kernel reads what the previous one wrote: none
 * in a rest launch, which waits at its end instead (Sm90Args::wait_late); the clusters' launch
 * before a rest launch lets it start right after this wait (trigger_early). */
__device__ __forceinline__ void sm90_dependency_wait(const Sm90Args &a)
{
    if (!a.wait_late) pdl_wait();
    if (a.trigger_early && threadIdx.x == 0) pdl_launch_dependents();
}

/* A 4-byte global store under a predicate: predicated, not a branch (guarded by an if, each
 * store became a divergent region, BSSY/BSYNC, in the unrolled epilogues). No memory clobber:
 * the kernel never reads C, and with one the shared-memory loads of the next pieces could not
 * move above the store. */
__device__ __forceinline__ void st_global_b32_if(bool p, void *addr, uint32_t v)
{
    asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %0, 0;\n @q st.global.b32 [%1], %2;\n}\n" ::"r"((int)p),
                 "l"(addr), "r"(v));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi)
{
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(const uint32_t *)&v;
}

/* Outputs 4·jj … 4·jj + 3 of a thread as 4-byte stores, from o = its place (token 2·t4, row g of
 * the piece; its warp's 16 rows inside C, n columns a token): lanes g and g ^ 1 swap halves by
 * two shuffles, so that a lane of even g stores rows g, g + 1 and one of odd g rows g + 7,
 * g + 8, and a warp store fills four whole 32-byte sectors (2-byte stores wrote each sector in
 * two halves, and a transpose through shared memory cost more than it saved: NOTES.md rows 75,
 * 113, 116). left: the tokens from this thread's first to M. The whole warp calls it. */
__device__ __forceinline__ void sm90_store_pairs(int g, __nv_bfloat16 *o, int64_t n, const float *v, int left)
{
    const bool odd = g & 1;
    const float r0 = __shfl_xor_sync(0xffffffffu, odd ? v[0] : v[2], 4);
    const float r1 = __shfl_xor_sync(0xffffffffu, odd ? v[1] : v[3], 4);
    __nv_bfloat16 *d = odd ? o + 7 : o;
    st_global_b32_if(left > 0, d, odd ? pack_bf16x2(r0, v[2]) : pack_bf16x2(v[0], r0));
    st_global_b32_if(left > 1, d + n, odd ? pack_bf16x2(r1, v[3]) : pack_bf16x2(v[1], r1));
}

/* A consumer warp releases a stage by lane 0's arrive after a __syncwarp (4 arrivals a
 * warpgroup). The diagnostic build -DQMM_SM90_ALL_LANES_ARRIVE has every lane arrive instead, so
 * that compute-sanitizer's racecheck, which does not see the __syncwarp (a NOP in SASS), sees each
 * reading lane's own release (bench/results/2026-12-02-session11/racecheck-analysis.md). */
#ifdef QMM_SM90_ALL_LANES_ARRIVE
#define SM90_EMPTY_ARRIVALS 128
#define SM90_ARRIVING_LANE true
#else
#define SM90_EMPTY_ARRIVALS 4
#define SM90_ARRIVING_LANE (lane == 0)
#endif

/* The conversion of two codes (dequant_pair). The experiment build -DQMM_SM90_STUB_DEQUANT=N
 * replaces it for timing only (wrong results): 1 one logic instruction; 2 the two bf16x2 FMAs
 * without extracting the codes; 3 the extraction with two integer instructions in place of the
 * FMAs (NOTES.md row 104). */
__device__ __forceinline__ uint32_t sm90_convert(uint32_t word, int shift, uint32_t s2, uint32_t b2,
                                                 uint32_t magic)
{
#if !defined(QMM_SM90_STUB_DEQUANT)
    return dequant_pair(word, shift, s2, b2, magic);
#elif QMM_SM90_STUB_DEQUANT == 1
    return word ^ s2;
#elif QMM_SM90_STUB_DEQUANT == 2
    return fma_bf16x2(fma_bf16x2(word, 0x3F803F80u, 0xC300C300u), s2, b2);
#else
    return (codes_lop3(word >> shift, magic) + s2) ^ b2;
#endif
}

/* The fixup: adds to acc (this thread's TN / 2 values, at my_off of each slot) the workspace
 * partials of a tile's partitions (CTAs) q_first…pb in CTA order, each CTA's slot 0 or 1 as its
 * split or stream-K range starts at or before the tile's first iteration t_first (DP: after the
 * data-parallel tiles, gemm_sm90_args.cuh). FIX partials' loads in flight at once, CH of the
 * thread's TN / 8 float4s at a time: all of them below 256 tokens, where a whole partial in
 * flight fits beside the accumulators. */
template <int TN, int BPS, bool DP, int SLOT_FLOATS>
__device__ __forceinline__ void add_partials(const Sm90Args &args, float *acc, int q_first, int pb,
                                             int t_first, int my_off)
{
    constexpr int FIX = BPS > 1 ? (TN <= 8 ? 4 : TN <= 16 ? 2 : 1) : TN <= 16 ? 8 : TN <= 32 ? 4 : TN <= 64 ? 2 : 1;
    constexpr int CH = TN >= 256 ? 8 : TN / 8;
#pragma unroll
    for (int r0 = 0; r0 < TN / 8; r0 += CH)
        for (int q0 = q_first; q0 <= pb; q0 += FIX) {
            float4 v[FIX][CH];
#pragma unroll
            for (int u = 0; u < FIX; u++) {
                const int q = q0 + u;
                if (q > pb) break;
                const float *qs = args.partials + (int64_t)(q * 2 + (cta_start<DP>(args, q) >= t_first ? 0 : 1)) * SLOT_FLOATS;
#pragma unroll
                for (int r4 = 0; r4 < CH; r4++) v[u][r4] = __ldcg((const float4 *)(qs + my_off + (r0 + r4) * 512));
            }
#pragma unroll
            for (int u = 0; u < FIX; u++) {
                if (q0 + u > pb) break;
#pragma unroll
                for (int r4 = 0; r4 < CH; r4++) {
                    float *a4 = acc + 4 * (r0 + r4);
                    a4[0] += v[u][r4].x, a4[1] += v[u][r4].y;
                    a4[2] += v[u][r4].z, a4[3] += v[u][r4].w;
                }
            }
        }
}

/* add_partials for a 256-token tile's fixup at the end of the CTA's range, where the ring is idle:
 * each partition's partial comes into the ring by cp.async, half a partial (TN / 16 float4s a
 * thread, 64 KB a CTA) a unit, three units in flight, so the reads are no longer one L2 round
 * trip per 8 float4s a thread (add_partials' registers allow no more: 4 · ~4.7 round trips in a
 * row for o at 2 048 tokens, NOTES.md rows 162, 263). The last CTA still sums alone: a sum
 * shared by every partition made each wait for the slowest (row 163). A thread reads back only
 * what it copied (cp.async.wait_group is per thread): no barrier. The same adds in the same
 * order as add_partials, so the same bits. ci: the consumer thread (0 … 128·WG − 1); ring: the
 * stages. */
template <int TN, bool DP, int SLOT_FLOATS>
__device__ __forceinline__ void add_partials_staged(const Sm90Args &args, float *acc, int q_first, int pb,
                                                    int t_first, int my_off, uint8_t *ring, int ci, int threads)
{
    static_assert(TN >= 256, "the ring holds three units of 64 · WG · TN / 2 floats only from 256 tokens");
    constexpr int HALF = TN / 16; /* float4s a thread a unit */
    constexpr int UNITS_IN_FLIGHT = 3;
    const int units = 2 * (pb - q_first + 1);
    uint8_t *const mine = ring + ci * 16; /* this thread's float4 r of a unit at + r · threads · 16 */
    const uint32_t base = smem_u32(mine), unit_bytes = (uint32_t)(HALF * threads * 16);
    auto issue = [&](int u) {
        if (u < units) {
            const int q = q_first + u / 2;
            const float *qs = args.partials +
                              (int64_t)(q * 2 + (cta_start<DP>(args, q) >= t_first ? 0 : 1)) * SLOT_FLOATS +
                              my_off + (u % 2) * HALF * 512;
            uint8_t *dst = mine + (u % UNITS_IN_FLIGHT) * unit_bytes;
#pragma unroll
            for (int r = 0; r < HALF; r++) cp_async16(dst + r * threads * 16, qs + r * 512, true);
        }
        cp_async_commit(); /* empty groups past the last unit keep the count uniform */
    };
#pragma unroll
    for (int u = 0; u < UNITS_IN_FLIGHT; u++) issue(u);
    for (int u0 = 0; u0 < units; u0 += 2) /* a partition's two halves: acc indexed by constants */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int u = u0 + h;
            cp_async_wait<UNITS_IN_FLIGHT - 1>();
            const uint32_t src = base + (uint32_t)(u % UNITS_IN_FLIGHT) * unit_bytes;
#pragma unroll
            for (int r = 0; r < HALF; r++) {
                float4 v;
                asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                             : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                             : "r"(src + (uint32_t)(r * threads * 16))
                             : "memory");
                float *a = acc + 4 * (h * HALF + r);
                a[0] += v.x, a[1] += v.y, a[2] += v.z, a[3] += v.w;
            }
            issue(u + UNITS_IN_FLIGHT); /* into the unit just read: this thread's own bytes */
        }
}

/* The fixup's sum of partitions [q_first, pb]: a 256-token tile's staged through the ring where
 * it is idle (the range's last segment: every stage consumed, no copy pending), else
 * add_partials. The same order of adds either way, so the same bits (NOTES row 264). */
template <int TN, int BPS, bool DP, int SLOT_FLOATS>
__device__ __forceinline__ void fixup_sum(const Sm90Args &args, float *acc, int q_first, int pb, int t_first,
                                          int my_off, bool ring_idle, uint8_t *ring, int ci, int threads)
{
    if constexpr (TN >= 256)
        if (ring_idle) {
            add_partials_staged<TN, DP, SLOT_FLOATS>(args, acc, q_first, pb, t_first, my_off, ring, ci, threads);
            return;
        }
    (void)ring_idle, (void)ring, (void)ci, (void)threads;
    add_partials<TN, BPS, DP, SLOT_FLOATS>(args, acc, q_first, pb, t_first, my_off);
}

/* One stage's A fragments for this thread: eight k16 steps × 4 registers. */
struct Frag {
    uint32_t a[8][4];
};

#ifdef QMM_SM90_TRACE
/* An experiment build (bench/probe/sm90_trace.cu): per CTA of the last launch, where its time
 * went (SM90_TR_* slots; clocks since the CTA's entry, sums of cycles spent waiting). */
enum {
    SM90_TR_ENTRY_NS, SM90_TR_SMID, SM90_TR_P_FIRST, SM90_TR_P_EMPTY_WAIT, SM90_TR_P_LAST,
    SM90_TR_C_FIRST, SM90_TR_C_FULL_WAIT, SM90_TR_C_MMA_WAIT, SM90_TR_C_DEQUANT,
    SM90_TR_C_LOOP_DONE, SM90_TR_C_STORED, SM90_TR_KBLOCKS, SM90_TR_P_W0, SM90_TR_P_WALL,
    SM90_TR_P_PDL, SM90_TR_C_BAR1, SM90_TR_C_SUMMED, SM90_TR_C_ISSUE, SM90_TR_P_SYNC, SM90_TR_P_REGS,
    SM90_TR_SLOTS
};
#define SM90_TR_MAX_CTAS 4096
__device__ unsigned long long sm90_trace_buf[SM90_TR_MAX_CTAS * SM90_TR_SLOTS];
__device__ int sm90_trace_grid;
#define SM90_TRACE(...) __VA_ARGS__
/* At a CTA's entry: its clock, its slots, and (thread 0) the entry time, SM and k-blocks. */
__device__ __forceinline__ unsigned long long *sm90_trace_entry(int p, int kblocks)
{
    unsigned long long *out = sm90_trace_buf + (size_t)min(p, SM90_TR_MAX_CTAS - 1) * SM90_TR_SLOTS;
    if (threadIdx.x == 0) {
        unsigned long long gt;
        unsigned smid;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        out[SM90_TR_ENTRY_NS] = gt, out[SM90_TR_SMID] = smid, out[SM90_TR_KBLOCKS] = (unsigned long long)kblocks;
        if (p == 0) sm90_trace_grid = gridDim.x;
    }
    return out;
}
/* The producer's slots (lane 0 of warp 0 at its end), and the consumers' (thread 0 of
 * warpgroup 1 at the CTA's end), from this thread's sums tr. */
__device__ __forceinline__ void sm90_trace_producer(unsigned long long *out, const unsigned long long *tr,
                                                    long long t_entry)
{
    static const int slots[] = {SM90_TR_P_FIRST, SM90_TR_P_EMPTY_WAIT, SM90_TR_P_W0, SM90_TR_P_WALL,
                                SM90_TR_P_PDL, SM90_TR_P_SYNC, SM90_TR_P_REGS};
    for (int i : slots) out[i] = tr[i];
    out[SM90_TR_P_LAST] = clock64() - t_entry;
}
__device__ __forceinline__ void sm90_trace_consumer(unsigned long long *out, const unsigned long long *tr,
                                                    long long t_entry)
{
    for (int i = SM90_TR_C_FIRST; i <= SM90_TR_C_LOOP_DONE; i++) out[i] = tr[i];
    out[SM90_TR_C_BAR1] = tr[SM90_TR_C_BAR1], out[SM90_TR_C_SUMMED] = tr[SM90_TR_C_SUMMED];
    out[SM90_TR_C_ISSUE] = tr[SM90_TR_C_ISSUE];
    out[SM90_TR_C_STORED] = clock64() - t_entry;
}
#else
#define SM90_TRACE(...)
#endif

/* a compile-time int as a value (the cluster owner's loop is instantiated for each rank count) */
template <int N> struct Int {
    static constexpr int value = N;
};
static_assert(QMM_SM90_MAX_CLUSTER == 8, "the owner's loop has a case for every rank count 2...8");

} // namespace qmm
#endif
