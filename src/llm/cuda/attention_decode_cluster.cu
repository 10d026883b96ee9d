/*
 * The decode step's attention for long contexts, merged in a thread-block cluster: the fused
 * kernel's work (attention_decode.cu: qk-norm, RoPE, cache append, split-KV attention on the
 * tensor cores), with the splits of a KV head in one cluster of C CTAs (a session's full graph:
 * 16, or 8 where the GPU cannot hold a cluster of 16 for every KV head at once; its buckets' 2
 * to 8), two splits a CTA (a half of 256 threads each, its own named barrier and shared memory),
 * and the merge reading the splits' results from the CTAs' shared memory instead of global
 * memory.
 *
 * Why: at 2 048 positions the fused kernel's 33 splits have their K/V tiles by ~4.2 µs after the
 * first block starts, but the launch ends at ~9.5 µs (bench/NOTES.md rows 167, 168): after the
 * tiles come the partials' stores, a ticket (an atomic round trip), the (m, l) loads and two
 * more rounds of partial loads by the last block of each KV head, each an L2 round trip.
 * Through distributed shared memory the merge is a cluster barrier and loads of ~0.1 µs.
 *
 * Splits: 2·C a KV head, cut by llm_ad_split_even (decode_split.h); split s is half s % 2 of
 * CTA s / 2 of the cluster. With one split (up to AD_SINGLE positions) the first G
 * splits take one query head each, as in the fused kernel (no merge). Otherwise every split puts
 * its output sums and (m, l) in its SLOT; after a cluster barrier the first half of CTA 0 merges
 * them in the fused kernel's order (ad_merge), and a second barrier keeps the other CTAs' shared
 * memory alive until it has read them. Where every split holds one tile (T <= 2·C tiles) the
 * cut, the arithmetic and the merge order are the fused kernel's at any split count >= T, so
 * the two give the same bits there (the decode buckets rely on it; gpu_llm_decode_ops tests it).
 * One CTA a SM (its shared memory at hd 128, its registers at 64). The clusters do not wait for
 * each other, but one that finds no room runs after the others have ended, doubling the launch:
 * attention_decode_cluster_splits takes the larger size of which the occupancy calculator holds
 * kv_heads clusters at once (a 132-SM H100 holds 15 clusters of 8 at one CTA a SM, not 16:
 * bench/NOTES.md row 62; so at most 7 of 16).
 */
#include "llm/cuda/attention_decode_block.cuh"
#include "llm/cuda/pdl.cuh"

namespace qmm_llm {

/* the cluster sizes tried for a session's longest contexts, largest first (16 is a non-portable
 * size); two splits a CTA. Shorter contexts' graphs launch clusters of 2 to 8 (session.cu). */
constexpr int ADC_SIZES[2] = {16, 8};

template <int HD, int G>
struct adc_layout {
    static constexpr int HALF = (ad_layout<HD, G>::SLOT_END + 127) / 128 * 128; /* a split's */
    static constexpr int BYTES = 2 * HALF;
};

#ifdef QMM_AD_TRACE
/* Experiment build: the phases of every half of the last launch (thread 0 of the half stamps
 * %globaltimer): 0 entry, 1 dependency wait done, 2 first tile landed, 3 tiles done, 4 SLOT
 * written, 5 the cluster's SLOTs visible (first barrier), 6 the merge's (m, l) loaded (CTA 0),
 * 7 end. */
constexpr int ADC_TRACE_HALVES = 4096;
__device__ unsigned long long adc_trace[ADC_TRACE_HALVES * 8];
void attention_decode_cluster_trace_print(void)
{
    std::vector<unsigned long long> t(ADC_TRACE_HALVES * 8);
    if (cudaMemcpyFromSymbol(t.data(), adc_trace, t.size() * 8) != cudaSuccess) return;
    static const char *name[8] = {"entry",     "wait done", "tile 0",   "tiles done",
                                  "slot",      "barrier",   "merge ml", "end"};
    ad_trace_summary("adc_trace (the cluster kernel; a unit is a half CTA)", t, name);
}
#endif

/* A half's barrier (named barrier 1 + half: its 256 threads) and the dependency wait. */
struct AdHalfSync {
    unsigned long long *stamp;
    int bar;
    __device__ void sync() const { qmm::named_barrier(bar, AD_THREADS); }
    __device__ void wait() const { pdl_wait_trigger(stamp); }
#ifdef QMM_AD_TRACE
    __device__ void phase(int i) const
    {
        const unsigned b = blockIdx.x * 2 + threadIdx.x / AD_THREADS;
        if (threadIdx.x % AD_THREADS == 0 && b < ADC_TRACE_HALVES) adc_trace[b * 8 + i] = global_ns();
    }
    __device__ void begin() const
    {
        const unsigned b = blockIdx.x * 2 + threadIdx.x / AD_THREADS;
        if (threadIdx.x % AD_THREADS == 0 && b < ADC_TRACE_HALVES)
            for (int i = 0; i < 8; i++) adc_trace[b * 8 + i] = i ? 0 : global_ns();
    }
#endif
};

template <int HD, int G>
__global__ void __launch_bounds__(2 * AD_THREADS, 1)
    attn_decode_cluster_kernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                               const bf16 *__restrict__ v, const bf16 *__restrict__ qw,
                               const bf16 *__restrict__ kw, const float *__restrict__ cos_t,
                               const float *__restrict__ sin_t, float eps,
                               const int32_t *__restrict__ pos, int64_t max_seq,
                               bf16 *__restrict__ kc, bf16 *__restrict__ vc, bf16 *__restrict__ out,
                               unsigned long long *stamp)
{
    extern __shared__ __align__(128) unsigned char smem[];
    using L = adc_layout<HD, G>;
    stamp_start(stamp);
    const int half = (int)threadIdx.x / AD_THREADS, rank = (int)qmm::cluster_rank();
    const int C = (int)qmm::cluster_size(), nsplit = 2 * C;
    const int kvh = (int)blockIdx.x / C, kv_heads = (int)gridDim.x / C;
    const AdHalfSync sync{stamp, 1 + half};
#ifdef QMM_AD_TRACE
    sync.begin();
#endif
    attn_decode_block<HD, G, AdHalfSync, true, true>(q, k, v, qw, kw, cos_t, sin_t, eps, pos, max_seq,
                                                     nsplit, kc, vc, nullptr, nullptr, out, kvh,
                                                     2 * rank + half, kv_heads, smem + half * L::HALF,
                                                     sync);
    /* a half without work returned before the dependency wait: wait (and trigger) here, so that
     * every thread has done both before the block ends (a no-op where done) */
    pdl_wait_trigger(nullptr);
    int64_t s0, s1;
    int active;
    llm_ad_split_even(*pos + 1, nsplit, 0, &s0, &s1, &active); /* the same in every CTA */
    if (active > 1) {
#ifdef QMM_AD_TRACE
        if (2 * rank + half < active) sync.phase(4);
#endif
        qmm::cluster_arrive(); /* every split's SLOT is written (release) */
        qmm::cluster_wait();
#ifdef QMM_AD_TRACE
        sync.phase(5);
#endif
        if (rank == 0 && half == 0)
            ad_merge<HD, G>(AdPartialsCluster<HD, G>{qmm::smem_u32(smem + ad_layout<HD, G>::SLOT),
                                                     (uint32_t)L::HALF},
                            active, kvh, out, smem, sync, (int)threadIdx.x);
        qmm::cluster_arrive(); /* CTA 0 has read the others' SLOTs: they may exit */
        qmm::cluster_wait();
    }
    __syncthreads();
#ifdef QMM_AD_TRACE
    sync.phase(7);
#endif
    stamp_end(stamp);
}

/* The launch of kernel<HD, G> for kv_heads KV heads in clusters of csize (its configuration). */
template <int HD, int G>
static cudaLaunchConfig_t adc_config(int kv_heads, int csize, cudaLaunchAttribute *attr,
                                     unsigned *na, cudaStream_t stream, bool pdl)
{
    *na = 0;
    attr[*na].id = cudaLaunchAttributeClusterDimension;
    attr[*na].val.clusterDim.x = (unsigned)csize;
    attr[*na].val.clusterDim.y = 1;
    attr[(*na)++].val.clusterDim.z = 1;
    if (pdl) {
        attr[*na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[(*na)++].val.programmaticStreamSerializationAllowed = 1;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(kv_heads * csize));
    cfg.blockDim = dim3(2 * AD_THREADS);
    cfg.dynamicSmemBytes = adc_layout<HD, G>::BYTES;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = *na;
    return cfg;
}

/* The opt-ins (shared memory past 48 KB, a cluster of 16), once per device. */
template <int HD, int G>
static cudaError_t adc_opt_in()
{
    static int opted[64];
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if (dev < 0 || dev >= 64) return cudaErrorInvalidDevice;
    if (opted[dev]) return cudaSuccess;
    e = cudaFuncSetAttribute(attn_decode_cluster_kernel<HD, G>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, adc_layout<HD, G>::BYTES);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(attn_decode_cluster_kernel<HD, G>,
                                 cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (e == cudaSuccess) opted[dev] = 1;
    return e;
}

/* The splits a KV head (2 · the cluster size) of the largest size of which the current device
 * holds kv_heads clusters at once (kv_heads · size <= sm_count when sm_count > 0); 0: none. */
template <int HD, int G>
static int adc_splits(int kv_heads, int sm_count)
{
    if (adc_opt_in<HD, G>() != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    for (int csize : ADC_SIZES) {
        if (sm_count > 0 && (int64_t)kv_heads * csize > sm_count) continue;
        cudaLaunchAttribute attr[2];
        unsigned na;
        cudaLaunchConfig_t cfg = adc_config<HD, G>(kv_heads, csize, attr, &na, nullptr, false);
        int n = 0;
        if (cudaOccupancyMaxActiveClusters(&n, attn_decode_cluster_kernel<HD, G>, &cfg) != cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        if (n >= kv_heads) return 2 * csize;
    }
    return 0;
}

template <int HD, int G>
static cudaError_t adc_launch(int kv_heads, int csize, const bf16 *q, const bf16 *k, const bf16 *v,
                              const bf16 *qw, const bf16 *kw, const float *cos_t,
                              const float *sin_t, float eps, const int32_t *pos, int64_t max_seq,
                              bf16 *kc, bf16 *vc, bf16 *out, cudaStream_t stream,
                              const llm_launch *ln)
{
    cudaError_t e = adc_opt_in<HD, G>();
    if (e != cudaSuccess) return e;
    cudaLaunchAttribute attr[2];
    unsigned na;
    cudaLaunchConfig_t cfg = adc_config<HD, G>(kv_heads, csize, attr, &na, stream, ln && ln->pdl);
    e = cudaLaunchKernelEx(&cfg, attn_decode_cluster_kernel<HD, G>, q, k, v, qw, kw, cos_t, sin_t,
                           eps, pos, max_seq, kc, vc, out, stamp_of(ln));
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* Returns the expression (...) with the constants HD and G of the (hd, group) instance, or the
 * fallback for a pair without one. */
#define ADC_DISPATCH(hd, group, fallback, ...)                                                    \
    do {                                                                                           \
        switch ((hd) * 16 + (group)) {                                                             \
        case 64 * 16 + 1: { constexpr int HD = 64, G = 1; return __VA_ARGS__; }                          \
        case 64 * 16 + 2: { constexpr int HD = 64, G = 2; return __VA_ARGS__; }                          \
        case 64 * 16 + 4: { constexpr int HD = 64, G = 4; return __VA_ARGS__; }                          \
        case 64 * 16 + 5: { constexpr int HD = 64, G = 5; return __VA_ARGS__; }                          \
        case 64 * 16 + 8: { constexpr int HD = 64, G = 8; return __VA_ARGS__; }                          \
        case 128 * 16 + 1: { constexpr int HD = 128, G = 1; return __VA_ARGS__; }                        \
        case 128 * 16 + 2: { constexpr int HD = 128, G = 2; return __VA_ARGS__; }                        \
        case 128 * 16 + 4: { constexpr int HD = 128, G = 4; return __VA_ARGS__; }                        \
        case 128 * 16 + 5: { constexpr int HD = 128, G = 5; return __VA_ARGS__; }                        \
        case 128 * 16 + 8: { constexpr int HD = 128, G = 8; return __VA_ARGS__; }                        \
        default: return fallback;                                                                  \
        }                                                                                          \
    } while (0)

int attention_decode_cluster_splits(int kv_heads, int hd, int group, int sm_count)
{
    if (kv_heads < 1 || !attention_supported(hd, group)) return 0;
    ADC_DISPATCH(hd, group, 0, adc_splits<HD, G>(kv_heads, sm_count));
}

cudaError_t launch_attention_decode_cluster(const bf16 *q, const bf16 *k, const bf16 *v,
                                            const bf16 *qw, const bf16 *kw, const float *cos_t,
                                            const float *sin_t, float eps, const int32_t *pos,
                                            int heads, int kv_heads, int hd, int64_t max_seq,
                                            int nsplit, bf16 *kc, bf16 *vc, bf16 *out,
                                            cudaStream_t stream, const llm_launch *ln)
{
    /* clusters of 2 to 16; the one-split path takes one half a query head */
    if (kv_heads < 1 || heads % kv_heads || !attention_supported(hd, heads / kv_heads) ||
        (nsplit != 4 && nsplit != 8 && nsplit != 16 && nsplit != 32) || nsplit < heads / kv_heads)
        return cudaErrorInvalidValue;
    ADC_DISPATCH(hd, heads / kv_heads, cudaErrorInvalidValue,
                 adc_launch<HD, G>(kv_heads, nsplit / 2, q, k, v, qw, kw, cos_t, sin_t, eps, pos, max_seq, kc, vc,
                                   out, stream, ln));
}

#undef ADC_DISPATCH

} // namespace qmm_llm
