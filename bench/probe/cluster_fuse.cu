/*
 * cluster_fuse: first feasibility numbers for a decode kernel in which one thread-block cluster
 * handles one KV head of Qwen3-4B (8 KV heads, 4 query heads each, head_dim 128) and its CTAs
 * exchange small vectors through distributed shared memory (DSMEM). Two answers:
 *
 * (1) Occupancy: cudaOccupancyMaxActiveClusters for clusters of C in {2, 4, 8, 12, 16} CTAs of
 *     256 threads with 60, 100, 150, 200 KB of dynamic shared memory a CTA (the push kernel
 *     below at B = 2048: ~76 registers a thread, so registers alone allow 3 CTAs an SM; a
 *     real kernel with more registers may fit fewer at 60 KB; the non-portable cluster size
 *     allowed, the dynamic-smem limit raised to 200 KB). Row: C, KB, max active clusters,
 *     resident CTAs (clusters x C), the SM count; a query that fails prints its error in the
 *     row.
 *
 * (2) DSMEM all-gather latency: G clusters of C in {8, 12, 16} CTAs (G = 8, or fewer where the
 *     occupancy calculator holds fewer clusters of that kernel at once: the row says so), 256
 *     threads, 60 KB dynamic shared memory a CTA. In each of REPS repetitions every CTA
 *     contributes B in {96, 256, 1024, 2048} bytes (16-byte words spread over its threads) and
 *     ends the repetition holding the C - 1 peers' contributions (its own it has); every thread
 *     reads its share of the gathered bytes, checks them and sums them (the sums go to global
 *     memory). Word w of CTA q's contribution in repetition r is pattern(q, r, w) (a hash: a
 *     stale repetition or a wrong slot reads differently). Variants:
 *
 *   push   each CTA st.async's (`st.async.shared::cluster.mbarrier::complete_tx::bytes.v4`)
 *          its B bytes into its slot of a receive buffer in every peer, completing the bytes on
 *          the peer's mbarrier. Two receive buffers and two mbarriers (static shared memory),
 *          by repetition parity p = r & 1; buffer p holds C - 1 slots of B bytes (the own
 *          contribution is not sent: 2 x 15 x 2048 bytes fit the 60 KB exactly), the slot of
 *          sender q in receiver d is (q - d - 1) mod C, and sender me writes to peers
 *          d = me + 1, me + 2, ... (mod C): every CTA starts on a different peer. Thread 0 does
 *          mbarrier.arrive.expect_tx((C - 1) B) on mbarrier p (arrival count 1) each
 *          repetition; every thread then waits for the repetition's phase (parity (r >> 1) & 1)
 *          and reads its words of buffer p.
 *          Synchronisation: ONE cluster barrier a repetition, split and deferred by one
 *          repetition: repetition r ends with `barrier.cluster.wait.acquire` (completing the
 *          barrier whose arrivals were made at the end of repetition r - 1) and then
 *          `barrier.cluster.arrive.release` (this CTA has read buffer p of repetition r). Before
 *          the loop one extra arrive, after it the last wait (so arrive and wait alternate per
 *          thread, as barrier.cluster requires). Why it is race-free:
 *          - WAR on the receive buffer: a peer writes buffer p next in repetition r + 2, after
 *            its wait at the end of repetition r + 1, which completes only once every thread of
 *            the cluster made its arrive of repetition r -- each thread's arrive follows (in
 *            program order, release) its reads of buffer p in repetition r, and the peer's
 *            wait is an acquire, so those reads happen before the peer's st.async.
 *          - mbarrier phases: complete_tx for repetition r + 2 reaches mbarrier p only after
 *            the same barrier, i.e. after every thread of the receiver saw phase r complete, so
 *            the bytes land in phase r + 2's phase (before or after thread 0's expect_tx for
 *            it: a transaction count may go transiently negative inside one phase; the
 *            pending arrival of thread 0 keeps the phase open), and no waiter can miss a phase
 *            (the mbarrier is never two phases ahead of a waiting thread). Thread 0 reaches
 *            repetition r + 2's expect_tx only after the same barrier, so phase r is complete.
 *          - RAW: the data of repetition r is visible once mbarrier phase r completes
 *            (complete_tx has release semantics at cluster scope; the wait here is
 *            mbarrier.test_wait.parity.acquire.cluster).
 *          - first use and exit: the mbarriers are initialised (fence.mbarrier_init) before a
 *            full cluster barrier; the final wait returns only once every CTA saw all its
 *            bytes land, so no st.async targets a CTA that has exited.
 *          With the data the deferred wait is usually already complete (a peer's bytes of
 *          repetition r arrive only after its sending threads made their arrive of r - 1), so
 *          a repetition costs about the st.async -> mbarrier latency, not a cluster barrier.
 *   pull   each CTA writes its B bytes into its own shared memory (double buffered by
 *          repetition parity), `barrier.cluster.arrive.release` + `barrier.cluster.wait.acquire`,
 *          then every thread loads its share of the peers' slots with ld.shared::cluster (mapa
 *          on the local address). ONE full cluster barrier a repetition, no second one: the
 *          writes of repetition r + 1 go to the other buffer, whose last readers (repetition
 *          r - 1) read it before their arrive of repetition r, and the writer passed the wait of
 *          repetition r (release -> acquire: those reads happen before the writes); the writes
 *          of repetition r + 2 to buffer p come after the wait of r + 1, which follows every
 *          reader's loads of repetition r. A last barrier after the loop keeps every CTA's
 *          shared memory alive until the peers' last loads are done.
 *   push-empty / pull-empty   only the cluster barriers of the variant, no data: both reduce
 *          to one full cluster barrier (arrive.release + wait.acquire) a repetition; for push
 *          that barrier is off the critical path when data flows (above), so push's number is
 *          not "push-empty + data".
 *   push-signal   push's mbarrier protocol without data: threads 0..C-2 arrive (remote,
 *          mbarrier.arrive.relaxed.cluster.shared::cluster) on one peer's mbarrier each (arrival
 *          count C - 1), every thread waits for the phase; the deferred cluster barrier as push.
 *          The pure signalling latency of push.
 *
 *     Timing: %globaltimer, read by thread 0 of each CTA after an initial full cluster barrier
 *     and after the last repetition's (final) barrier; per repetition = (t1 - t0) / REPS;
 *     median and max over the G x C CTAs of the second of two launches (the first warms up,
 *     and is checked too). "shared" = CTAs of the launch that ran on an SM holding another CTA
 *     of the launch (%smid; at 60 KB up to 3 CTAs fit an SM, so a cluster may pack).
 *
 *     Checks: every mbarrier wait is bounded (2^26 polls of mbarrier.test_wait, ~1-3 s; a
 *     thread that gives up counts a timeout in global memory and skips its later waits, while
 *     every cluster barrier still runs, so the launch always ends); every thread compares each
 *     word it gathers with the pattern (mismatches counted in global memory); the words
 *     gathered in the last repetition are copied to global memory and compared on the host.
 *     The host prints "mismatches: N" and exits 1 on any mismatch, timeout or CUDA error.
 *
 *   cluster_fuse [--reps N]          N repetitions a launch (default 2000); no GPU arguments
 *   build: ninja -C build cluster_fuse; 66 launches of ~2000 x 1-5 us: a few seconds at most
 *   stdout: the device line, then the two tables (plain text, '#' lines are notes)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "cuda/hopper.cuh"   /* mbarrier, cluster barrier, mapa, st.async, ld.shared::cluster, launch */
#include "llm/cuda/pdl.cuh"  /* qmm_llm::global_ns (%globaltimer) */

#define PCK(x)                                                                                       \
    do {                                                                                             \
        cudaError_t e_ = (x);                                                                        \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "cluster_fuse: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

namespace {
using namespace qmm;

constexpr int THREADS = 256;
constexpr int MAXC = 16;                      /* largest cluster */
constexpr int MAXB = 2048;                    /* largest contribution, bytes */
constexpr int SMEM = 60 * 1024;               /* dynamic shared memory of the latency launches */
constexpr int MAXG = 8;                       /* clusters a latency launch (one a KV head) */
constexpr int DUMP_WORDS = (MAXC - 1) * MAXB / 4; /* a CTA's gathered words (last repetition) */
constexpr uint32_t POLL_LIMIT = 1u << 26;     /* mbarrier polls before a thread gives up */

enum { PUSH, PULL, PUSH_EMPTY, PULL_EMPTY, PUSH_SIGNAL };
const char *mode_name(int m)
{
    return m == PUSH ? "push" : m == PULL ? "pull" : m == PUSH_EMPTY ? "push-empty" : m == PULL_EMPTY ? "pull-empty" : "push-signal";
}

/* Word w of CTA q's contribution in repetition r. */
__host__ __device__ __forceinline__ uint32_t pattern(uint32_t q, uint32_t r, uint32_t w)
{
    return q * 0x9E3779B1u + r * 0x85EBCA77u + w * 0x27D4EB2Fu + 0x165667B1u;
}

struct Out {
    unsigned long long *t; /* [2 ctas]: t0, t1 of thread 0 (%globaltimer) */
    uint32_t *info;        /* [2 ctas]: cluster rank, %smid */
    uint32_t *dump;        /* [ctas][DUMP_WORDS]: slot s = peer (rank + s + 1) % C, last repetition */
    uint32_t *sink;        /* [ctas][THREADS]: each thread's sum of what it gathered */
    unsigned int *count;   /* [0] mismatches, [1] timed-out waits */
};

/* One poll of the phase with this parity (acquire at cluster scope: the bytes completed on it
 * came from other CTAs). */
__device__ __forceinline__ bool mbar_test_cluster(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.test_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return done != 0;
}
/* Wait at most POLL_LIMIT polls; false (and a timeout counted) when the phase never came. */
__device__ __forceinline__ bool mbar_wait_bounded(uint64_t *bar, uint32_t parity, unsigned int *count)
{
    const uint32_t a = smem_u32(bar);
    for (uint32_t n = 0; n < POLL_LIMIT; n++)
        if (mbar_test_cluster(a, parity)) return true;
    atomicAdd(&count[1], 1u);
    return false;
}
__device__ __forceinline__ uint32_t sm_id()
{
    uint32_t s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

/* Compare the 4 words of 16-byte chunk c of peer q's contribution of repetition r; sum them. */
__device__ __forceinline__ void check4(uint4 v, uint32_t q, uint32_t r, uint32_t c, uint32_t &bad, uint32_t &acc)
{
    const uint32_t e = pattern(q, r, 4 * c);
    bad += (v.x != e) + (v.y != e + 0x27D4EB2Fu) + (v.z != e + 2 * 0x27D4EB2Fu) + (v.w != e + 3 * 0x27D4EB2Fu);
    acc += v.x + v.y + v.z + v.w;
}

template <int MODE, int BYTES>
__global__ void __launch_bounds__(THREADS) gather_kernel(int reps, Out o)
{
    constexpr int CH = BYTES / 16;                                    /* 16-byte chunks a contribution */
    constexpr int KMAX = CH ? ((MAXC - 1) * CH + THREADS - 1) / THREADS : 1; /* chunks a thread, at most */
    static_assert(BYTES % 16 == 0 && 2 * (MAXC - 1) * BYTES <= SMEM, "the receive buffers fit");
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t mbar[2];

    const uint32_t C = cluster_size(), me = cluster_rank(), tid = threadIdx.x;
    const int n = (int)(C - 1) * CH; /* chunks to gather (and, for push, to send) */
    uint32_t acc = 0, bad = 0;
    bool live = true; /* false once this thread's mbarrier wait timed out: skip later waits */

    if (MODE == PUSH || MODE == PUSH_SIGNAL) {
        if (tid == 0) {
            mbar_init(&mbar[0], MODE == PUSH ? 1 : C - 1);
            mbar_init(&mbar[1], MODE == PUSH ? 1 : C - 1);
            mbar_fence_init();
        }
    }
    cluster_arrive(); /* every CTA's mbarriers initialised before any peer signals them */
    cluster_wait();
    unsigned long long t0 = 0;
    if (tid == 0) t0 = qmm_llm::global_ns();

    if constexpr (MODE == PUSH || MODE == PUSH_EMPTY || MODE == PUSH_SIGNAL) {
        cluster_arrive(); /* "repetition -1 read": the deferred barrier's first arrive */
        for (int r = 0; r < reps; r++) {
            const int p = r & 1;
            const uint32_t parity = (uint32_t)(r >> 1) & 1;
            if constexpr (MODE == PUSH) {
                unsigned char *buf = smem + (size_t)p * (C - 1) * BYTES;
                if (tid == 0 && live) mbar_arrive_expect_tx(&mbar[p], (uint32_t)n * 16);
#pragma unroll
                for (int k = 0; k < KMAX; k++) {
                    const int i = (int)tid + k * THREADS;
                    if (i < n) {
                        const uint32_t o1 = 1 + i / CH, c = i % CH; /* peer offset 1..C-1, chunk */
                        const uint32_t d = (me + o1) % C, slot = C - 1 - o1; /* my slot in d */
                        const uint32_t e = pattern(me, r, 4 * c);
                        const float4 v = make_float4(__uint_as_float(e), __uint_as_float(e + 0x27D4EB2Fu),
                                                     __uint_as_float(e + 2 * 0x27D4EB2Fu),
                                                     __uint_as_float(e + 3 * 0x27D4EB2Fu));
                        st_async_f4((float *)(buf + (size_t)slot * BYTES + 16 * c), d, v, &mbar[p]);
                    }
                }
                if (live) live = mbar_wait_bounded(&mbar[p], parity, o.count);
                uint4 v[KMAX];
#pragma unroll
                for (int k = 0; k < KMAX; k++) {
                    const int i = (int)tid + k * THREADS;
                    if (i < n) v[k] = lds128((const uint32_t *)(buf + (size_t)(i / CH) * BYTES + 16 * (i % CH)));
                }
#pragma unroll
                for (int k = 0; k < KMAX; k++) {
                    const int i = (int)tid + k * THREADS;
                    if (i < n) {
                        const uint32_t s = i / CH, c = i % CH, q = (me + s + 1) % C;
                        check4(v[k], q, r, c, bad, acc);
                        if (r == reps - 1) *(uint4 *)&o.dump[(size_t)blockIdx.x * DUMP_WORDS + 4 * i] = v[k];
                    }
                }
            } else if constexpr (MODE == PUSH_SIGNAL) {
                if (tid < C - 1) mbar_arrive_remote(&mbar[p], (me + 1 + tid) % C);
                if (live) live = mbar_wait_bounded(&mbar[p], parity, o.count);
            }
            cluster_wait();   /* everyone read buffer p ^ 1 in repetition r - 1 */
            cluster_arrive(); /* this CTA has read buffer p of repetition r */
        }
        cluster_wait();
    } else { /* PULL, PULL_EMPTY */
        for (int r = 0; r < reps; r++) {
            if constexpr (MODE == PULL) {
                unsigned char *src = smem + (size_t)(r & 1) * BYTES;
                for (int c = (int)tid; c < CH; c += THREADS) {
                    const uint32_t e = pattern(me, r, 4 * c);
                    *(uint4 *)(src + 16 * c) = make_uint4(e, e + 0x27D4EB2Fu, e + 2 * 0x27D4EB2Fu, e + 3 * 0x27D4EB2Fu);
                }
                cluster_arrive(); /* release: my contribution written (and my loads of r - 1 done) */
                cluster_wait();   /* acquire: every peer's contribution of r written */
                const uint32_t base = smem_u32(src);
                uint4 v[KMAX];
#pragma unroll
                for (int k = 0; k < KMAX; k++) {
                    const int i = (int)tid + k * THREADS;
                    if (i < n) {
                        const uint32_t s = i / CH, c = i % CH, q = (me + s + 1) % C;
                        const float4 f = ld_cluster_f4(cluster_map(base + 16 * c, q));
                        v[k] = make_uint4(__float_as_uint(f.x), __float_as_uint(f.y), __float_as_uint(f.z),
                                          __float_as_uint(f.w));
                    }
                }
#pragma unroll
                for (int k = 0; k < KMAX; k++) {
                    const int i = (int)tid + k * THREADS;
                    if (i < n) {
                        const uint32_t s = i / CH, c = i % CH, q = (me + s + 1) % C;
                        check4(v[k], q, r, c, bad, acc);
                        if (r == reps - 1) *(uint4 *)&o.dump[(size_t)blockIdx.x * DUMP_WORDS + 4 * i] = v[k];
                    }
                }
            } else {
                cluster_arrive();
                cluster_wait();
            }
        }
        cluster_arrive(); /* the peers' last loads from my shared memory are done */
        cluster_wait();
    }

    if (tid == 0) {
        o.t[2 * blockIdx.x] = t0;
        o.t[2 * blockIdx.x + 1] = qmm_llm::global_ns();
        o.info[2 * blockIdx.x] = me;
        o.info[2 * blockIdx.x + 1] = sm_id();
    }
    o.sink[(size_t)blockIdx.x * THREADS + tid] = acc;
    if (bad) atomicAdd(&o.count[0], bad);
}

using Kernel = void (*)(int, Out);

/* The launches' kernels take 60 KB (the occupancy one up to 200 KB) and clusters of up to 16. */
void prep(Kernel k, int smem)
{
    PCK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    PCK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
}

cudaError_t max_clusters(Kernel k, int C, int smem, int *n)
{
    cudaLaunchAttribute a;
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = C;
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(C * 32);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = &a;
    cfg.numAttrs = 1;
    *n = 0;
    return cudaOccupancyMaxActiveClusters(n, k, &cfg);
}

struct Variant {
    int mode, bytes;
    Kernel fn;
};

double median_of(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const size_t m = v.size();
    return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}
} // namespace

int main(int argc, char **argv)
{
    int reps = 2000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            char *end;
            const long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 10000000) {
                fprintf(stderr, "cluster_fuse: --reps wants a count from 1 to 10000000, not '%s'\n", argv[i]);
                return 2;
            }
            reps = (int)v;
        } else {
            fprintf(stderr, "usage: cluster_fuse [--reps N]   (default 2000)\n");
            return 2;
        }
    }

    int dev = 0, sms = 0, clock_khz = 0, cc_major = 0, cc_minor = 0;
    PCK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    PCK(cudaGetDeviceProperties(&prop, dev));
    PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    PCK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
    PCK(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, dev));
    PCK(cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
    printf("# device: %s, %d SMs, clock %.0f MHz (peak), cc %d.%d\n", prop.name, sms, clock_khz / 1000.0,
           cc_major, cc_minor);
    if (cc_major < 9) {
        fprintf(stderr, "cluster_fuse: needs sm_90 (thread-block clusters, st.async); this is cc %d.%d\n",
                cc_major, cc_minor);
        return 1;
    }

    const Variant variants[] = {
        {PUSH, 96, gather_kernel<PUSH, 96>},       {PUSH, 256, gather_kernel<PUSH, 256>},
        {PUSH, 1024, gather_kernel<PUSH, 1024>},   {PUSH, 2048, gather_kernel<PUSH, 2048>},
        {PULL, 96, gather_kernel<PULL, 96>},       {PULL, 256, gather_kernel<PULL, 256>},
        {PULL, 1024, gather_kernel<PULL, 1024>},   {PULL, 2048, gather_kernel<PULL, 2048>},
        {PUSH_SIGNAL, 0, gather_kernel<PUSH_SIGNAL, 0>},
        {PUSH_EMPTY, 0, gather_kernel<PUSH_EMPTY, 0>}, {PULL_EMPTY, 0, gather_kernel<PULL_EMPTY, 0>},
    };
    for (const Variant &v : variants) prep(v.fn, SMEM);

    /* ---- (1) occupancy ---- */
    const Kernel occ_fn = gather_kernel<PUSH, 2048>;
    prep(occ_fn, 200 * 1024);
    printf("\n== (1) occupancy: cudaOccupancyMaxActiveClusters, %d threads a CTA (the push kernel) ==\n", THREADS);
    printf("%4s %8s %9s %14s %5s\n", "C", "smem_KB", "clusters", "resident_CTAs", "SMs");
    for (int C : {2, 4, 8, 12, 16})
        for (int kb : {60, 100, 150, 200}) {
            int n = 0;
            const cudaError_t e = max_clusters(occ_fn, C, kb * 1024, &n);
            if (e != cudaSuccess) {
                cudaGetLastError();
                printf("%4d %8d  error: %s\n", C, kb, cudaGetErrorString(e));
            } else {
                printf("%4d %8d %9d %14d %5d\n", C, kb, n, n * C, sms);
            }
        }
    fflush(stdout);

    /* ---- (2) all-gather latency ---- */
    const int max_ctas = MAXG * MAXC;
    Out o;
    PCK(cudaMalloc(&o.t, (size_t)max_ctas * 2 * sizeof(unsigned long long)));
    PCK(cudaMalloc(&o.info, (size_t)max_ctas * 2 * sizeof(uint32_t)));
    PCK(cudaMalloc(&o.dump, (size_t)max_ctas * DUMP_WORDS * sizeof(uint32_t)));
    PCK(cudaMalloc(&o.sink, (size_t)max_ctas * THREADS * sizeof(uint32_t)));
    PCK(cudaMalloc(&o.count, 2 * sizeof(unsigned int)));
    cudaStream_t st;
    PCK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    printf("\n== (2) DSMEM all-gather: %d repetitions a launch, %d threads a CTA, %d KB dynamic smem; "
           "ns a repetition (%%globaltimer, thread 0 of each CTA), over the G x C CTAs ==\n",
           reps, THREADS, SMEM / 1024);
    printf("%-12s %3s %3s %6s %9s %9s %7s  %s\n", "variant", "C", "G", "bytes", "med_ns", "max_ns", "shared", "note");
    unsigned long long total_mismatch = 0, host_mismatch = 0;
    std::vector<unsigned long long> t((size_t)max_ctas * 2);
    std::vector<uint32_t> info((size_t)max_ctas * 2), dump;
    for (int C : {8, 12, 16})
        for (const Variant &v : variants) {
            int fit = 0;
            const cudaError_t qe = max_clusters(v.fn, C, SMEM, &fit);
            if (qe != cudaSuccess) {
                cudaGetLastError();
                printf("%-12s %3d %3s %6d  occupancy query failed: %s\n", mode_name(v.mode), C, "-", v.bytes,
                       cudaGetErrorString(qe));
                continue;
            }
            if (fit < 1) {
                printf("%-12s %3d %3d %6d  no cluster of %d fits\n", mode_name(v.mode), C, 0, v.bytes, C);
                continue;
            }
            const int G = std::min(MAXG, fit), ctas = G * C;
            unsigned int count[2] = {0, 0};
            bool failed = false;
            for (int launch = 0; launch < 2 && !failed; launch++) { /* 0: warm-up (checked too) */
                PCK(cudaMemsetAsync(o.count, 0, 2 * sizeof(unsigned int), st));
                PCK(cudaMemsetAsync(o.dump, 0xFF, (size_t)ctas * DUMP_WORDS * sizeof(uint32_t), st));
                const cudaError_t le = launch_cluster_pdl(v.fn, dim3(ctas), dim3(THREADS), SMEM, st, false,
                                                          (unsigned)C, reps, o);
                if (le != cudaSuccess) {
                    cudaGetLastError();
                    printf("%-12s %3d %3d %6d  launch failed: %s\n", mode_name(v.mode), C, G, v.bytes,
                           cudaGetErrorString(le));
                    failed = true;
                    break;
                }
                PCK(cudaStreamSynchronize(st));
                PCK(cudaMemcpy(count, o.count, sizeof count, cudaMemcpyDeviceToHost));
                total_mismatch += count[0];
                if (count[1]) {
                    printf("%-12s %3d %3d %6d  ERROR: %u mbarrier waits timed out (%u polls each); "
                           "mismatches so far: %llu\n",
                           mode_name(v.mode), C, G, v.bytes, count[1], POLL_LIMIT, total_mismatch);
                    fprintf(stderr, "cluster_fuse: mbarrier waits timed out: the protocol is broken\n");
                    return 1;
                }
                if (v.bytes) { /* the host's own check of the last repetition's gathered words */
                    const int words = (C - 1) * v.bytes / 4;
                    dump.resize((size_t)ctas * DUMP_WORDS);
                    PCK(cudaMemcpy(dump.data(), o.dump, dump.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
                    PCK(cudaMemcpy(info.data(), o.info, (size_t)ctas * 2 * sizeof(uint32_t), cudaMemcpyDeviceToHost));
                    const int per = v.bytes / 4;
                    for (int b = 0; b < ctas; b++) {
                        const uint32_t me = info[2 * b];
                        for (int i = 0; i < words; i++) {
                            const uint32_t s = i / per, w = i % per, q = (me + s + 1) % C;
                            host_mismatch += dump[(size_t)b * DUMP_WORDS + i] != pattern(q, reps - 1, w);
                        }
                    }
                }
            }
            if (failed) continue;
            PCK(cudaMemcpy(t.data(), o.t, (size_t)ctas * 2 * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
            PCK(cudaMemcpy(info.data(), o.info, (size_t)ctas * 2 * sizeof(uint32_t), cudaMemcpyDeviceToHost));
            std::vector<double> ns(ctas);
            std::vector<int> on_sm(4096, 0);
            for (int b = 0; b < ctas; b++) {
                ns[b] = (double)(t[2 * b + 1] - t[2 * b]) / reps;
                on_sm[info[2 * b + 1] % 4096]++;
            }
            int shared = 0;
            for (int b = 0; b < ctas; b++) shared += on_sm[info[2 * b + 1] % 4096] > 1;
            char note[64] = "";
            if (G < MAXG) snprintf(note, sizeof note, "G=%d: only %d clusters fit at once", G, fit);
            printf("%-12s %3d %3d %6d %9.1f %9.1f %7d  %s\n", mode_name(v.mode), C, G, v.bytes, median_of(ns),
                   *std::max_element(ns.begin(), ns.end()), shared, note);
            fflush(stdout);
        }

    printf("\nmismatches: %llu (device, every repetition)\n", total_mismatch);
    printf("host check (last repetition's gathered words): %llu mismatching\n", host_mismatch);
    cudaFree(o.t), cudaFree(o.info), cudaFree(o.dump), cudaFree(o.sink), cudaFree(o.count);
    cudaStreamDestroy(st);
    if (total_mismatch || host_mismatch) {
        fprintf(stderr, "cluster_fuse: the gathered data was wrong\n");
        return 1;
    }
    return 0;
}
