/*
 * The tensor-core pieces the attention kernels use (prefill: attention_mma.cu and
 * attention_prefill_wgmma.cu, decode: attention_decode_block.cuh): bf16 mma.sync m16n8k16 with
 * fp32 accumulation, ldmatrix, bf16 packing, the cp.async copies that fill their K/V tiles, the
 * softmax's exponential and the query fragments' loads.
 */
#ifndef QMM_LLM_MMA_SYNC_CUH
#define QMM_LLM_MMA_SYNC_CUH

#include <cuda_bf16.h>
#include <stdint.h>

namespace qmm_llm {

/* 16 bytes global -> shared, cached in L2 only; zero-filled, nothing read, when !valid. */
__device__ __forceinline__ void cp16_zfill(void *smem, const void *gmem, bool valid)
{
    unsigned d = (unsigned)__cvta_generic_to_shared(smem);
    int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(gmem), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* Until at most N of this thread's committed groups are pending. */
template <int N> __device__ __forceinline__ void cp_wait_group()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4], uint32_t b0,
                                          uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* 2^x, the hardware's approximation (flush to zero below the normal range: P underflows to 0). */
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Two consecutive bf16 at p (4-byte aligned) as one register; zero when !ok. */
__device__ __forceinline__ uint32_t ld_pair(const __nv_bfloat16 *p, bool ok)
{
    return ok ? *reinterpret_cast<const uint32_t *>(p) : 0u;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x (low half) = lo */
    return *reinterpret_cast<uint32_t *>(&v);
}

/* Four 8x8 bf16 matrices (lane l gives the row address of matrix l / 8), as stored or transposed. */
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const __nv_bfloat16 *p)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const __nv_bfloat16 *p)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

} // namespace qmm_llm

#endif
