/* Device helpers shared by the kernel families: PTX wrappers for async copies, ldmatrix and
 * bf16 tensor-core mma, and the W4 code extraction of the device layout (see w4_layout.h). */
#ifndef QMM_CUDA_COMMON_CUH
#define QMM_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

namespace qmm {

/* 16 (4) bytes of streamed weights, not kept in L1 (an L2 policy would cost two registers). */
__device__ __forceinline__ uint4 ld_stream(const uint32_t *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ uint32_t ld_stream32(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];\n" : "=r"(v) : "l"(p));
    return v;
}

/* 16-byte async copy global -> shared; zero-fills the destination when !pred. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool pred)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int bytes = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3,
                                            const void *smem)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}

/* The same from a shared-memory address (a register the caller keeps). */
__device__ __forceinline__ void ldmatrix_x4_at(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* Two 8x8 b16 matrices (lanes 0–15 give the row addresses). */
__device__ __forceinline__ void ldmatrix_x2_at(uint32_t (&r)[2], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

/* d += a(16x16, row) · b(16x8, col), bf16 in, fp32 accumulate. */
__device__ __forceinline__ void mma_bf16_16816(float d[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Two codes as bf16x2 of value 128 + q (exact): the bf16 of 128 has exponent 7 and a zero
 * mantissa, so OR-ing q (< 16) into the low mantissa bits adds q. One LOP3, (w & 0x000F000F) |
 * magic, with the magic 0x43004300 in a register: given as a second immediate it costs a second
 * LOP3 (NOTES.md row 105). The caller shifts the word (w >> shift). */
__device__ __forceinline__ uint32_t codes_lop3(uint32_t w, uint32_t magic)
{
    uint32_t d;
    asm("lop3.b32 %0, %1, 0x000F000F, %2, 0xEA;\n" : "=r"(d) : "r"(w), "r"(magic)); /* (a & b) | c */
    return d;
}

/* The magic of codes_lop3 from a value the compiler cannot see through (any int >= 0), so that
 * it stays in a register instead of folding into the LOP3 as an immediate. */
__device__ __forceinline__ uint32_t codes_magic(int nonnegative)
{
    return 0x43004300u | ((uint32_t)nonnegative >> 31);
}

/* bf16x2 fused multiply-add, one rounding. */
__device__ __forceinline__ uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* Dequantized weights of the two codes at bits shift and shift + 16 of word as bf16x2: scale * q
 * + bias (one rounding), where s2 / b2 hold the scale / bias in both halves and magic is
 * codes_magic's. 128 + q minus 128 is exact in bf16. */
__device__ __forceinline__ uint32_t dequant_pair(uint32_t word, int shift, uint32_t s2, uint32_t b2,
                                                 uint32_t magic)
{
    const uint32_t one2 = 0x3F803F80u, minus128 = 0xC300C300u;
    uint32_t q = fma_bf16x2(codes_lop3(word >> shift, magic), one2, minus128);
    return fma_bf16x2(q, s2, b2);
}

__device__ __forceinline__ float bf16_lo(uint32_t x) { return __uint_as_float(x << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t x) { return __uint_as_float(x & 0xFFFF0000u); }

/* Zero an [A][B][4] accumulator of mma fragments (stays in registers). */
template <int A, int B> __device__ __forceinline__ void zero_frags(float (&x)[A][B][4])
{
#pragma unroll
    for (int i = 0; i < A; i++)
#pragma unroll
        for (int j = 0; j < B; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) x[i][j][e] = 0.f;
}

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

} // namespace qmm

#endif
