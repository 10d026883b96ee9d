/* The decode matvec's timestamps (matvec.cu): the in-graph profile's end stamp, and the
 * experiment build's phase stamps. Included by matvec.cu only. */
#ifndef QMM_CUDA_MATVEC_STAMPS_CUH
#define QMM_CUDA_MATVEC_STAMPS_CUH

namespace qmm {

__device__ __forceinline__ unsigned long long mv_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* The in-graph profile's stamp (MatvecArgs::stamp; nothing without it): [2], the last CTA's
 * end, by thread 0 of each CTA after its block's last writes. The profile times a matvec from
 * the previous kernel's end to this, so no start or wait stamp is taken: read there too, the
 * pointer stayed live through the loop and cost the 8-warp kernel of 2-8 tokens a spill. */
__device__ __forceinline__ void mv_stamp_end(unsigned long long *stamp)
{
    if (!stamp || threadIdx.x != 0) return;
    atomicMax(stamp + 2, mv_now());
}
/* Experiment build -DQMM_MV_PHASES (NOTES row 195; it may spill): thread 0 of every CTA also
 * stamps its start into [0] (the earliest) and its return from the dependency wait into [1] (the
 * earliest) and [3] (the latest), where the profile splits a matvec's row (graph_profile.cu). */
__device__ __forceinline__ void mv_phase_start(unsigned long long *stamp)
{
#ifdef QMM_MV_PHASES
    if (stamp && threadIdx.x == 0) atomicMin(stamp, mv_now());
#endif
    (void)stamp;
}
__device__ __forceinline__ void mv_phase_waited(unsigned long long *stamp)
{
#ifdef QMM_MV_PHASES
    if (stamp && threadIdx.x == 0) {
        const unsigned long long t = mv_now();
        atomicMin(stamp + 1, t);
        atomicMax(stamp + 3, t);
    }
#endif
    (void)stamp;
}

} // namespace qmm

#endif
