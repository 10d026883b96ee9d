/* PTX wrappers for the Hopper (sm_90a) kernel family: mbarriers, bulk and tensor (TMA) copies
 * into shared memory, warpgroup MMA (wgmma) with the A operand in registers, programmatic
 * dependent launch, register reallocation. Each wrapper is one instruction of the PTX ISA. */
#ifndef QMM_CUDA_HOPPER_CUH
#define QMM_CUDA_HOPPER_CUH

#include <cuda.h> /* CUtensorMap (a 128-byte struct; no driver library needed) */
#include <cuda_runtime.h>
#include <stdint.h>

namespace qmm {

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- shared-memory loads (explicit ld.shared: through a generic pointer they were LD.E) ---- */

__device__ __forceinline__ uint4 lds128(const uint32_t *p)
{
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(smem_u32(p)));
    return v;
}

__device__ __forceinline__ uint32_t lds32(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(smem_u32(p)));
    return v;
}

/* 32-bit word j (0..3) of a 16-byte load */
__device__ __forceinline__ uint32_t word_at(const uint4 &v, int j)
{
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

/* ---- mbarriers ---- */
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
/* Make the inits visible to the async proxy (the copy engine) before any copy uses them. */
__device__ __forceinline__ void mbar_fence_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/* Generic-proxy writes to shared memory (an mbarrier's initialisation, cp.async copies that have
 * landed) ordered before this thread's later async-proxy operations on it (bulk copies
 * completing on the barrier; wgmma reading its operand, after a barrier for other threads'). */
__device__ __forceinline__ void fence_proxy_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
/* Spin until the phase with this parity has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT_%=;\n"
                 "}\n" ::"r"(smem_u32(bar)),
                 "r"(parity)
                 : "memory");
}

/* Spin on the non-blocking test until the phase with this parity has completed: a waiter that
 * expects the data within a few hundred cycles, where a suspended try_wait wakes late. */
__device__ __forceinline__ void mbar_spin(uint64_t *bar, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "SPIN_%=:\n"
                 "mbarrier.test_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra SPIN_%=;\n"
                 "}\n" ::"r"(smem_u32(bar)),
                 "r"(parity)
                 : "memory");
}

/* ---- copies into shared memory that complete on an mbarrier ---- */
/* L2 policy for data read once (streamed weights). */
__device__ __forceinline__ uint64_t policy_evict_first()
{
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}
/* bytes (multiple of 16) from global src to shared dst; both 16-byte aligned. */
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar,
                                          uint64_t policy)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
                 "[%0], [%1], %2, [%3], %4;\n" ::"r"(smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy)
                 : "memory");
}
/* The same without a cache hint (data other CTAs read too, e.g. activations), from shared
 * addresses already converted (the matvec converts them before its dependency wait). */
__device__ __forceinline__ void bulk_copy_u32(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
/* The same from generic pointers. */
__device__ __forceinline__ void bulk_copy_plain(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
    bulk_copy_u32(smem_u32(dst), src, bytes, smem_u32(bar));
}
/* A 2-D box of the tensor map at (x = innermost coordinate, y) into dst (1024-byte aligned). */
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, int x, int y,
                                            uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_u32(dst)),
                 "l"(map), "r"(x), "r"(y), "r"(smem_u32(bar))
                 : "memory");
}
/* A 3-D box at (x, y, z) into dst (1024-byte aligned). */
__device__ __forceinline__ void tma_load_3d(void *dst, const CUtensorMap *map, int x, int y, int z,
                                            uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_u32(dst)),
                 "l"(map), "r"(x), "r"(y), "r"(z), "r"(smem_u32(bar))
                 : "memory");
}
/* Arrive on bar when this thread's earlier cp.async copies have landed (the barrier's expected
 * count includes this arrival). */
__device__ __forceinline__ void cp_async_arrive_noinc(uint64_t *bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap *map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

/* ---- thread-block clusters: rank, barrier, distributed shared memory ---- */
__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint32_t cluster_size()
{
    uint32_t n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
    return n;
}
__device__ __forceinline__ void cluster_arrive_relaxed()
{
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait()
{
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* Arrive with release semantics: this thread's earlier writes (shared memory included) are
 * visible to the cluster's threads once their matching cluster_wait returns. */
__device__ __forceinline__ void cluster_arrive()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
/* The shared-memory address a (this CTA's) in CTA `rank` of the cluster. */
__device__ __forceinline__ uint32_t cluster_map(uint32_t a, uint32_t rank)
{
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(a), "r"(rank));
    return remote;
}
/* Loads from another CTA's shared memory (an address from cluster_map). */
__device__ __forceinline__ float4 ld_cluster_f4(uint32_t a)
{
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(a)
                 : "memory");
    return v;
}
__device__ __forceinline__ float ld_cluster_f32(uint32_t a)
{
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(a) : "memory");
    return v;
}
/* The address of local pointer p in CTA `rank` of the cluster. */
__device__ __forceinline__ uint32_t cluster_addr(const void *p, uint32_t rank)
{
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(p)), "r"(rank));
    return remote;
}
/* Arrive on the mbarrier at local address bar in CTA `rank`, publishing nothing (relaxed). */
__device__ __forceinline__ void mbar_arrive_remote(uint64_t *bar, uint32_t rank)
{
    asm volatile("mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr(bar, rank))
                 : "memory");
}
/* Store v at local address p in CTA `rank` through the async proxy; its 16 bytes complete on
 * that CTA's mbarrier at local address bar (the receiver waits there, no fence needed). */
__device__ __forceinline__ void st_async_f4(float *p, uint32_t rank, float4 v, uint64_t *bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(
                     cluster_addr(p, rank)),
                 "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(cluster_addr(bar, rank))
                 : "memory");
}
/* The same for one float. */
__device__ __forceinline__ void st_async_f32(float *p, uint32_t rank, float v, uint64_t *bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n" ::"r"(
                     cluster_addr(p, rank)),
                 "f"(v), "r"(cluster_addr(bar, rank))
                 : "memory");
}

/* ---- programmatic dependent launch ---- */
/* Wait until the grids this one depends on have completed and their writes are visible
 * (a no-op when the kernel was launched without the PDL attribute). */
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
/* Let the next kernel in the stream start launching (its own pdl_wait still orders memory). */
__device__ __forceinline__ void pdl_launch_dependents()
{
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
/* The host side: kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when
 * pdl (without it the two instructions above are no-ops), in clusters of `cluster` CTAs along x
 * when cluster > 1. */
template <typename... KArgs, typename... Args>
static inline cudaError_t launch_cluster_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block,
                                             size_t smem, cudaStream_t stream, bool pdl,
                                             unsigned cluster, Args... args)
{
    cudaLaunchAttribute attr[2];
    unsigned na = 0;
    if (pdl) {
        attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[na++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster > 1) {
        attr[na].id = cudaLaunchAttributeClusterDimension;
        attr[na].val.clusterDim.x = cluster;
        attr[na].val.clusterDim.y = 1;
        attr[na++].val.clusterDim.z = 1;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = na;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}
template <typename... KArgs, typename... Args>
static inline cudaError_t launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                     cudaStream_t stream, bool pdl, Args... args)
{
    return launch_cluster_pdl(kernel, grid, block, smem, stream, pdl, 1u, args...);
}

/* ---- registers: a warpgroup gives up or takes registers (needs a launch-bounds cap) ---- */
template <int N> __device__ __forceinline__ void regs_dealloc()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void regs_alloc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

/* Returns the old value; release orders this thread's (and, through a block barrier, the
 * block's) earlier writes before the add, acquire orders later reads after it. */
__device__ __forceinline__ uint32_t atom_add_acq_rel_gpu(uint32_t *p, uint32_t v)
{
    uint32_t old;
    asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

/* Pairs with atom_add_acq_rel_gpu's release: later reads (through a block barrier, the block's)
 * see what the adders wrote before their adds. */
__device__ __forceinline__ uint32_t ld_acquire_gpu(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Named barrier among `threads` threads (a multiple of 32) of the block. */
__device__ __forceinline__ void named_barrier(int id, int threads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/* Arrive at named barrier id without waiting (the other threads of the count wait on it). */
__device__ __forceinline__ void named_barrier_arrive(int id, int threads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/* ---- warpgroup MMA ---- */
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Keep the compiler from moving register reads/writes across the async MMA. */
__device__ __forceinline__ void fence_reg(float &r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_reg(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }

/* Shared-memory matrix descriptor of a K-major bf16 tile written by TMA with the 128-byte
 * swizzle: rows of 64 elements (128 bytes), 8-row atoms of 1024 bytes (the stride between atoms
 * along N), start address 1024-aligned plus the k offset (32 bytes per k16 step). */
__device__ __forceinline__ uint64_t desc_k128b(uint32_t smem_addr)
{
    uint64_t d = 0;
    d |= (uint64_t)((smem_addr & 0x3FFFF) >> 4);
    d |= (uint64_t)(16 >> 4) << 16;   /* leading byte offset: unused for swizzled K-major */
    d |= (uint64_t)(1024 >> 4) << 32; /* stride byte offset: next 8-row atom */
    d |= (uint64_t)1 << 62;           /* 128-byte swizzle */
    return d;
}

/* The same for an N-major bf16 B operand (read transposed, imm-trans-b 1) written with the
 * 128-byte swizzle: each 128-byte row holds 64 consecutive N elements of one k, 8-row atoms of
 * 1024 bytes along K (the stride byte offset), panels of 64 N elements panel_bytes apart (the
 * leading byte offset); start address 1024-aligned plus 2048 bytes per k16 step. */
__device__ __forceinline__ uint64_t desc_n128b(uint32_t smem_addr, uint32_t panel_bytes)
{
    uint64_t d = 0;
    d |= (uint64_t)((smem_addr & 0x3FFFF) >> 4);
    d |= (uint64_t)((panel_bytes & 0x3FFFF) >> 4) << 16; /* leading byte offset: next panel */
    d |= (uint64_t)(1024 >> 4) << 32;                    /* stride byte offset: next 8 k */
    d |= (uint64_t)1 << 62;                              /* 128-byte swizzle */
    return d;
}

} // namespace qmm

#include "wgmma_rs.cuh"

#endif
