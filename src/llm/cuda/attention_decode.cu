/*
 * The decode step's attention in one kernel: per-head RMSNorm + RoPE of q and of the new k, the
 * KV-cache append, and split-KV (flash-decoding) attention whose splits are merged in a fixed
 * order by the last block of each KV head (no second launch).
 *
 * Grid (kv_heads, max(nsplit, G)), 256 threads (G query heads a KV head). nsplit is fixed when
 * the graph is captured (it fills the GPU at the longest context; graphs of fewer splits serve
 * short contexts with the same bits, decode_bucket.h); at run time the position decides how
 * many splits do work: up to AD_SINGLE positions one block per query head (no merge; the block
 * chain is the latency there, bench/NOTES.md row 90), beyond that splits of whole 64-row tiles,
 * at most nsplit of them, each for the G heads of its KV head. Idle blocks exit at once.
 *
 * A block streams its rows through shared memory in tiles of AD_T positions with a cp.async ring
 * of AD_STAGES tiles. Rows before the new position are already in the cache (written by earlier
 * forwards), so the first tiles are requested before pdl_wait(): they arrive while the q|k|v
 * projection finishes. Per tile, on the tensor cores with the G heads as the mma's columns:
 * scores K·qᵀ (four warps of 16 rows), an online softmax per query head (one warp each, fp32),
 * then Vᵀ·Pᵀ with P as bf16 hi + lo (a warp per 16 dims; attention_decode_block.cuh). The
 * per-thread fp32 version before it took 2 µs a tile for one head, 4–5 µs for four (the
 * phases of the -DQMM_AD_TRACE build, bench/NOTES.md row 93). The new row never comes from the
 * cache: rows at or past the new position are zero-filled and the block that owns the position
 * patches its K and V into the tile from registers (that block also writes them to the cache).
 *
 * Numerics as llm_head_norm_rope / llm_attend_row (fp32; q, k rounded to bf16 after RoPE, so
 * their products are exact in the mma; no contractions in the norm and rotation; P·V to ~2^-16 of
 * fp32 by the hi + lo split); the sums run in another order, so results agree within rounding,
 * not bitwise. The merge order is fixed: the same inputs give the same bits.
 */
#include "llm/cuda/attention_decode_block.cuh"
#include "llm/cuda/pdl.cuh"
#ifdef QMM_AD_TRACE
#include <vector>
#endif

namespace qmm_llm {

#ifdef QMM_AD_TRACE
/* Experiment build: the phases of every block of the last launch, µs after the first block's
 * entry: 0 entry, 1 dependency wait done, 2 first tile landed, 3 tiles done, 4 partials written,
 * 5 ticket taken, 6 the merge's (m, l) loaded, 7 end. */
constexpr int AD_TRACE_BLOCKS = 4096;
__device__ unsigned long long ad_trace[AD_TRACE_BLOCKS * 8];
__device__ __forceinline__ unsigned long long ad_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
void attention_decode_trace_print(void)
{
    std::vector<unsigned long long> t(AD_TRACE_BLOCKS * 8);
    if (cudaMemcpyFromSymbol(t.data(), ad_trace, t.size() * 8) != cudaSuccess) return;
    static const char *name[8] = {"entry",    "wait done", "tile 0",   "tiles done",
                                  "partials", "ticket",    "merge ml", "end"};
    ad_trace_summary("ad_trace", t, name);
    attention_decode_cluster_trace_print();
}
#endif

/* One split (up to AD_SINGLE positions): a block a query head. The experiment build
 * -DQMM_AD_GROUP_BLOCK (NOTES.md row 201) runs a block a KV head there instead, its G heads as
 * the mma's columns (the other blocks exit at once): is a block of G heads as short a chain as
 * one of one head on the tensor cores? */
#ifdef QMM_AD_GROUP_BLOCK
constexpr bool AD_ONE_HEAD = false;
#else
constexpr bool AD_ONE_HEAD = true;
#endif

/* The kernel's barrier and dependency wait (PDL; a no-op in a plain launch). */
struct AdBlockSync {
    unsigned long long *stamp;
    __device__ void sync() const { __syncthreads(); }
    __device__ void wait() const { pdl_wait_trigger(stamp); }
#ifdef QMM_AD_TRACE
    __device__ void phase(int i) const
    {
        const unsigned b = blockIdx.y * gridDim.x + blockIdx.x;
        if (threadIdx.x == 0 && b < AD_TRACE_BLOCKS) ad_trace[b * 8 + i] = ad_now();
    }
#endif
};

// Grid (kv_heads, max(nsplit, G)): block (x, y) is KV head x's split y, or its query head y
// while the context is one split (attention_decode_block.cuh). Two blocks a SM: 116 registers
// for <128, 4>, no spills (at three, the shared memory's limit, ptxas had 80, and the attention
// took 117 µs a step at 32 positions against 98 with more: NOTES row 138); the split count
// stays within the blocks resident at once.
template <int HD, int G>
__global__ void __launch_bounds__(AD_THREADS, AD_BLOCKS_PER_SM)
    attn_decode_fused_kernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                             const bf16 *__restrict__ v, const bf16 *__restrict__ qw,
                             const bf16 *__restrict__ kw, const float *__restrict__ cos_t,
                             const float *__restrict__ sin_t, float eps,
                             const int32_t *__restrict__ pos, int64_t max_seq, int nsplit,
                             bf16 *__restrict__ kc, bf16 *__restrict__ vc,
                             float *__restrict__ partials, int *__restrict__ counters,
                             bf16 *__restrict__ out, unsigned long long *stamp)
{
    extern __shared__ __align__(16) unsigned char smem[];
    stamp_start(stamp);
#ifdef QMM_AD_TRACE
    {
        const unsigned b = blockIdx.y * gridDim.x + blockIdx.x;
        if (threadIdx.x == 0 && b < AD_TRACE_BLOCKS) {
            ad_trace[b * 8] = ad_now();
            for (int i = 1; i < 8; i++) ad_trace[b * 8 + i] = 0;
        }
    }
#endif
    attn_decode_block<HD, G, AdBlockSync, AD_ONE_HEAD>(q, k, v, qw, kw, cos_t, sin_t, eps, pos, max_seq,
                                                nsplit, kc, vc, partials, counters, out, blockIdx.x,
                                                blockIdx.y, gridDim.x, smem, AdBlockSync{stamp});
    __syncthreads();
    stamp_end(stamp);
}

int attention_decode_splits(int64_t max_seq, int kv_heads, int sm_count)
{
    if (max_seq <= AD_SINGLE || kv_heads < 1) return 1;
    /* four blocks a SM's worth, so that up to 64 · 4 · SMs / kv_heads positions every split is
     * one 64-row tile (fewer splits round the chunk up to 128 rows once the context passes
     * splits · 64: half the blocks; bench/NOTES.md row 44) */
    const int64_t sms = sm_count > 0 ? sm_count : 132;
    int64_t fill = (4 * sms + kv_heads - 1) / kv_heads;
    int64_t tiles = (max_seq + AD_T - 1) / AD_T;
    int64_t n = fill < tiles ? fill : tiles;
    if (n > AD_MAX_SPLITS) n = AD_MAX_SPLITS;
    /* no more blocks than are resident at once (264 on 132 SMs): beyond, the last ones waited
     * for a second wave, longer splits cost less (bench/NOTES.md row 125) */
    const int64_t resident = AD_BLOCKS_PER_SM * sms / kv_heads;
    if (n > resident) n = resident;
#ifdef QMM_AD_SPLITS_CAP /* experiment builds: at most this many (NOTES.md row 168) */
    if (n > QMM_AD_SPLITS_CAP) n = QMM_AD_SPLITS_CAP;
#endif
    return n < 1 ? 1 : (int)n;
}

/* Dynamic shared memory of a launch: its own, or, when the grid fits the SMs (the one-head
 * blocks while the context is one split), enough that two of its blocks cannot share a SM while
 * one o-matvec CTA still fits beside one. Under PDL a launch's blocks fill the SMs that free first
 * up to the launch bound, two a SM on 16 SMs for 32 blocks; one a SM took the attention 94.6 →
 * 86.6 µs a step at 32 positions and decode +1 % (a whole SM each, 227 KB, cost more in the
 * matvec that follows than it saved: bench/NOTES.md rows 145, 146). */
static size_t ad_launch_bytes(size_t bytes, unsigned blocks, size_t *most)
{
    *most = bytes; /* the larger of the two sizes, for the opt-in */
    static int sms[64], smem_sm[64], optin[64]; /* per device; sms written last */
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return bytes;
    if (!sms[dev]) {
        int n = 0, sm = 0, oi = 0;
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&oi, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
            (void)cudaGetLastError();
            return bytes;
        }
        smem_sm[dev] = sm, optin[dev] = oi, sms[dev] = n;
    }
    /* with the 1 KB a block the hardware reserves, two blocks of half a SM + 1 KB do not fit */
    const size_t one = (size_t)smem_sm[dev] / 2 + 1024;
    if (one <= bytes || one > (size_t)optin[dev]) return bytes;
    *most = one;
    return blocks <= (unsigned)sms[dev] ? one : bytes;
}

template <int HD, int G>
static cudaError_t launch_fused_inst(int kv_heads, int nsplit, const bf16 *q, const bf16 *k,
                                     const bf16 *v, const bf16 *qw, const bf16 *kw,
                                     const float *cos_t, const float *sin_t, float eps,
                                     const int32_t *pos, int64_t max_seq, bf16 *kc, bf16 *vc,
                                     float *partials, int *counters, bf16 *out,
                                     cudaStream_t stream, const llm_launch *ln)
{
    /* at least G blocks a KV head: one a query head while the context is one split */
    const dim3 grid(kv_heads, nsplit > G ? nsplit : G);
    size_t most;
    const size_t bytes = ad_launch_bytes(ad_layout<HD, G>::BYTES, grid.x * grid.y, &most);
    static int opted[64]; /* per device: the opt-in above 48 KB of shared memory is made */
    cudaError_t e = llm_opt_in_smem(attn_decode_fused_kernel<HD, G>, (int)most, opted);
    if (e != cudaSuccess) return e;
    e = llm_launch_kernel(attn_decode_fused_kernel<HD, G>, grid, dim3(AD_THREADS), bytes, stream, ln,
                          q, k, v, qw, kw, cos_t, sin_t, eps, pos, max_seq, nsplit, kc, vc, partials,
                          counters, out, stamp_of(ln));
    return e != cudaSuccess ? e : cudaGetLastError();
}

template <int HD>
static cudaError_t launch_fused_hd(int group, int kv_heads, int nsplit, const bf16 *q,
                                   const bf16 *k, const bf16 *v, const bf16 *qw, const bf16 *kw,
                                   const float *cos_t, const float *sin_t, float eps,
                                   const int32_t *pos, int64_t max_seq, bf16 *kc, bf16 *vc,
                                   float *partials, int *counters, bf16 *out, cudaStream_t stream,
                                   const llm_launch *ln)
{
#define AD_CASE(G_)                                                                            \
    case G_:                                                                                   \
        return launch_fused_inst<HD, G_>(kv_heads, nsplit, q, k, v, qw, kw, cos_t, sin_t, eps, \
                                         pos, max_seq, kc, vc, partials, counters, out, stream, \
                                         ln);
    switch (group) {
        AD_CASE(1)
        AD_CASE(2)
        AD_CASE(4)
        AD_CASE(5)
        AD_CASE(8)
    default: return cudaErrorInvalidValue;
    }
#undef AD_CASE
}

cudaError_t launch_attention_decode_fused(const bf16 *q, const bf16 *k, const bf16 *v,
                                          const bf16 *qw, const bf16 *kw, const float *cos_t,
                                          const float *sin_t, float eps, const int32_t *pos,
                                          int heads, int kv_heads, int hd, int64_t max_seq,
                                          int nsplit, bf16 *kc, bf16 *vc, float *partials,
                                          int *counters, bf16 *out, cudaStream_t stream,
                                          const llm_launch *ln)
{
    if (kv_heads < 1 || heads % kv_heads || !attention_supported(hd, heads / kv_heads) ||
        nsplit < 1 || nsplit > AD_MAX_SPLITS)
        return cudaErrorInvalidValue;
    const int group = heads / kv_heads;
    return hd == 128 ? launch_fused_hd<128>(group, kv_heads, nsplit, q, k, v, qw, kw, cos_t, sin_t,
                                            eps, pos, max_seq, kc, vc, partials, counters, out,
                                            stream, ln)
                     : launch_fused_hd<64>(group, kv_heads, nsplit, q, k, v, qw, kw, cos_t, sin_t,
                                           eps, pos, max_seq, kc, vc, partials, counters, out,
                                           stream, ln);
}

} // namespace qmm_llm
