/*
 * Programmatic dependent launch (PDL) and in-graph timestamps for the engine's kernels.
 *
 * A kernel launched with PDL may start while its predecessor in the stream still runs. The
 * contract every engine kernel keeps (so that the whole chain stays correct):
 *   - before pdl_wait() it reads only data no kernel of this forward writes (weights, norm and
 *     rope tables, and -- attention only -- the position *pos and the KV-cache rows before it,
 *     which only earlier forwards write: every forward starts with the embedding, a plain launch
 *     that waits for all earlier work), and it writes nothing but its own timestamps;
 *   - every block that reads or writes activations calls pdl_wait() first (griddepcontrol.wait
 *     returns once the predecessor grid has completed and its writes are visible);
 *   - pdl_trigger() (griddepcontrol.launch_dependents) only after pdl_wait(): the successor may
 *     then be scheduled, and it waits for this grid's completion before reading our outputs.
 * Launched without PDL both instructions are no-ops, so one kernel serves both modes.
 */
#ifndef QMM_LLM_PDL_CUH
#define QMM_LLM_PDL_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/hopper.cuh" /* qmm::launch_pdl */

namespace qmm_llm {

/* How one launch is made: with PDL or plain, and where its timestamps go (NULL: none).
 * stamp points at 4 uint64: [0] earliest block start, [1] earliest return from pdl_wait,
 * [2] latest block end (all %globaltimer, ns); the host sets [0], [1] to ~0 and [2] to 0. */
struct llm_launch {
    int pdl;
    unsigned long long *stamp;
};

__device__ __forceinline__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Thread 0 of each block: the block started. */
__device__ __forceinline__ void stamp_start(unsigned long long *stamp)
{
    if (stamp && threadIdx.x == 0) atomicMin(&stamp[0], global_ns());
}

/* Every thread: wait for the predecessor, then let the successor launch; thread 0 stamps. */
__device__ __forceinline__ void pdl_wait_trigger(unsigned long long *stamp)
{
    pdl_wait();
    if (stamp && threadIdx.x == 0) atomicMin(&stamp[1], global_ns());
    pdl_trigger();
}

/* Thread 0 of each block, after the block's last write (call after a __syncthreads). */
__device__ __forceinline__ void stamp_end(unsigned long long *stamp)
{
    if (stamp && threadIdx.x == 0) atomicMax(&stamp[2], global_ns());
}

/* kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when ln->pdl. */
template <typename... KArgs, typename... Args>
static cudaError_t llm_launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                     cudaStream_t stream, const llm_launch *ln, Args... args)
{
    return qmm::launch_pdl(kernel, grid, block, smem, stream, ln && ln->pdl, args...);
}

static inline unsigned long long *stamp_of(const llm_launch *ln) { return ln ? ln->stamp : nullptr; }

/* The opt-in to more than 48 KB of dynamic shared memory, made once per device and kernel
 * (opted: the caller's flags, one a device). */
template <typename... KArgs>
static cudaError_t llm_opt_in_smem(void (*kernel)(KArgs...), int bytes, int (&opted)[64])
{
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if (dev < 0 || dev >= 64) return cudaErrorInvalidDevice;
    if (opted[dev]) return cudaSuccess;
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess) opted[dev] = 1;
    return e;
}

} // namespace qmm_llm

#endif
