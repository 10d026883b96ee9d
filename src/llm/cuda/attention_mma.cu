/*
 * Prefill attention on tensor cores (bf16 mma.sync m16n8k16, fp32 accumulate), flash style.
 *
 * A block owns 64 query rows of one head: warp w owns rows 16w..16w+15 and keeps them in
 * registers as A fragments for the whole walk over the keys. Key tiles of 64 are staged in shared
 * memory: K as [key][dim] (the B operand of Q·Kᵀ, "col" layout, is K row-major) and V transposed
 * as [dim][key] (the B operand of P·V). Per tile a warp computes S = Q·Kᵀ (16 x 64, 8 n-tiles),
 * masks, updates the running max and sum of its two rows per thread (g and g + 8 of the fragment
 * layout), exponentiates, and feeds P back as A fragments (the accumulator layout of two adjacent
 * n-tiles is exactly an A fragment) into O += P·V, O being 16 x HD accumulators in registers.
 * Numerics against the fp32 kernel: P enters the second product rounded to bf16 (the row sums
 * use the fp32 values), everything else is fp32.
 *
 * Fragment layout of m16n8k16 (PTX ISA), g = lane / 4, t = lane % 4:
 *   A 16x16: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
 *   B 16x8:  b0 (k = 2t..2t+1, n = g), b1 (k = 2t+8.., n = g)
 *   C 16x8:  c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)
 */
#include <math.h>

#include "llm/cuda/llm_kernels.cuh"

namespace qmm_llm {

constexpr int TC_BQ = 64, TC_BK = 64, TC_WARPS = 4;

__device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4], uint32_t b0,
                                          uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x (low half) = lo */
    return *reinterpret_cast<uint32_t *>(&v);
}

/* Two consecutive bf16 at p (4-byte aligned) as one register; zero when !ok. */
__device__ __forceinline__ uint32_t ld_pair(const bf16 *p, bool ok)
{
    return ok ? *reinterpret_cast<const uint32_t *>(p) : 0u;
}

// q is [m, heads*HD] (rows q_stride apart), out [m, heads*HD]; kc, vc one layer's cache
// [kv_heads, max_seq, HD]
template <int HD>
__global__ void __launch_bounds__(TC_WARPS * 32)
    attn_prefill_mma_kernel(const bf16 *__restrict__ q, int64_t q_stride, const bf16 *__restrict__ kc,
                            const bf16 *__restrict__ vc, const int32_t *__restrict__ pos, int m,
                            int heads, int kv_heads, int64_t max_seq, bf16 *__restrict__ out)
{
    constexpr int KS = HD + 8;     /* padded row strides (in bf16): conflict-free fragment loads */
    constexpr int VS = TC_BK + 8;
    constexpr int KSTEPS = HD / 16; /* k-steps of Q·Kᵀ */
    constexpr int DT = HD / 8;      /* n-tiles of O */
    __shared__ __align__(16) bf16 Ks[TC_BK * KS];
    __shared__ __align__(16) bf16 Vt[HD * VS];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int h = blockIdx.y, kvh = h / (heads / kv_heads);
    const int r0 = blockIdx.x * TC_BQ;
    const int64_t p0 = *pos;
    const int64_t qd = (int64_t)heads * HD;
    const int rw = r0 + warp * 16;            /* first row of this warp */
    const int ra = rw + g, rb = rw + g + 8;   /* the thread's two rows */
    const bool va = ra < m, vb = rb < m;
    const int64_t qa = p0 + ra, qb = p0 + rb; /* their positions */

    uint32_t qf[KSTEPS][4];
    const bf16 *qra = q + (int64_t)ra * q_stride + (int64_t)h * HD;
    const bf16 *qrb = q + (int64_t)rb * q_stride + (int64_t)h * HD;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; kk++) {
        qf[kk][0] = ld_pair(qra + kk * 16 + 2 * t, va);
        qf[kk][1] = ld_pair(qrb + kk * 16 + 2 * t, vb);
        qf[kk][2] = ld_pair(qra + kk * 16 + 8 + 2 * t, va);
        qf[kk][3] = ld_pair(qrb + kk * 16 + 8 + 2 * t, vb);
    }
    float o[DT][4];
#pragma unroll
    for (int dn = 0; dn < DT; dn++) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.0f;
    float ma = -INFINITY, mb = -INFINITY, la = 0.0f, lb = 0.0f; /* l: this thread's share */

    const int rows_here = min(TC_BQ, m - r0);
    const int64_t kend = p0 + r0 + rows_here;
    const bf16 *K = kc + (int64_t)kvh * max_seq * HD, *V = vc + (int64_t)kvh * max_seq * HD;
    const float scale = 1.0f / sqrtf((float)HD);

    for (int64_t k0 = 0; k0 < kend; k0 += TC_BK) {
        __syncthreads(); /* the previous tile is consumed */
        for (int c = threadIdx.x; c < TC_BK * HD / 8; c += TC_WARPS * 32) {
            int j = c / (HD / 8), d8 = (c % (HD / 8)) * 8;
            int64_t kp = k0 + j;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
            if (kp < kend) {
                kv = *reinterpret_cast<const uint4 *>(K + kp * HD + d8);
                vv = *reinterpret_cast<const uint4 *>(V + kp * HD + d8);
            }
            *reinterpret_cast<uint4 *>(&Ks[j * KS + d8]) = kv;
            const bf16 *ve = reinterpret_cast<const bf16 *>(&vv);
#pragma unroll
            for (int i = 0; i < 8; i++) Vt[(d8 + i) * VS + j] = ve[i];
        }
        __syncthreads();

        /* S = Q·Kᵀ for keys k0 + 8n + (2t, 2t+1) */
        float s[TC_BK / 8][4];
#pragma unroll
        for (int n = 0; n < TC_BK / 8; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            const bf16 *kr = &Ks[(8 * n + g) * KS + 2 * t];
#pragma unroll
            for (int kk = 0; kk < KSTEPS; kk++)
                mma_16816(s[n], qf[kk], *reinterpret_cast<const uint32_t *>(kr + kk * 16),
                          *reinterpret_cast<const uint32_t *>(kr + kk * 16 + 8));
        }
        float ta = -INFINITY, tb = -INFINITY;
#pragma unroll
        for (int n = 0; n < TC_BK / 8; n++) {
#pragma unroll
            for (int i = 0; i < 2; i++) {
                int64_t kp = k0 + 8 * n + 2 * t + i;
                s[n][i] = (va && kp <= qa) ? s[n][i] * scale : -INFINITY;
                s[n][2 + i] = (vb && kp <= qb) ? s[n][2 + i] * scale : -INFINITY;
                ta = fmaxf(ta, s[n][i]);
                tb = fmaxf(tb, s[n][2 + i]);
            }
        }
        /* the 4 threads of a row are lanes 4g..4g+3 */
        ta = fmaxf(ta, __shfl_xor_sync(0xffffffffu, ta, 1));
        ta = fmaxf(ta, __shfl_xor_sync(0xffffffffu, ta, 2));
        tb = fmaxf(tb, __shfl_xor_sync(0xffffffffu, tb, 1));
        tb = fmaxf(tb, __shfl_xor_sync(0xffffffffu, tb, 2));
        float na = fmaxf(ma, ta), nb = fmaxf(mb, tb);
        /* a row with no visible key yet keeps alpha 1 and p 0 (no inf - inf) */
        float aa = na == -INFINITY ? 1.0f : expf(ma - na);
        float ab = nb == -INFINITY ? 1.0f : expf(mb - nb);
        ma = na, mb = nb;
        float sa = 0.0f, sb = 0.0f;
#pragma unroll
        for (int n = 0; n < TC_BK / 8; n++) {
#pragma unroll
            for (int i = 0; i < 2; i++) {
                s[n][i] = na == -INFINITY ? 0.0f : expf(s[n][i] - na);
                s[n][2 + i] = nb == -INFINITY ? 0.0f : expf(s[n][2 + i] - nb);
                sa += s[n][i];
                sb += s[n][2 + i];
            }
        }
        la = la * aa + sa;
        lb = lb * ab + sb;
#pragma unroll
        for (int dn = 0; dn < DT; dn++) {
            o[dn][0] *= aa, o[dn][1] *= aa;
            o[dn][2] *= ab, o[dn][3] *= ab;
        }
        /* O += P·V: P's accumulators of n-tiles 2kk and 2kk+1 are the A fragment of k-step kk */
#pragma unroll
        for (int kk = 0; kk < TC_BK / 16; kk++) {
            uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                              pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dn = 0; dn < DT; dn++) {
                const bf16 *vr = &Vt[(8 * dn + g) * VS + kk * 16 + 2 * t];
                mma_16816(o[dn], pa, *reinterpret_cast<const uint32_t *>(vr),
                          *reinterpret_cast<const uint32_t *>(vr + 8));
            }
        }
    }
    /* the row sums: this thread's share + the other 3 threads of the row */
    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    bf16 *oa = out + (int64_t)ra * qd + (int64_t)h * HD, *ob = out + (int64_t)rb * qd + (int64_t)h * HD;
#pragma unroll
    for (int dn = 0; dn < DT; dn++) {
        int d = 8 * dn + 2 * t;
        if (va)
            *reinterpret_cast<__nv_bfloat162 *>(oa + d) =
                __floats2bfloat162_rn(o[dn][0] / la, o[dn][1] / la);
        if (vb)
            *reinterpret_cast<__nv_bfloat162 *>(ob + d) =
                __floats2bfloat162_rn(o[dn][2] / lb, o[dn][3] / lb);
    }
}

cudaError_t launch_attention_prefill_mma(const bf16 *q, int64_t q_stride, const bf16 *kc,
                                         const bf16 *vc, const int32_t *pos, int m, int heads,
                                         int kv_heads, int hd, int64_t max_seq, bf16 *out,
                                         cudaStream_t stream)
{
    dim3 grid((m + TC_BQ - 1) / TC_BQ, heads);
    if (hd == 128)
        attn_prefill_mma_kernel<128><<<grid, TC_WARPS * 32, 0, stream>>>(
            q, q_stride, kc, vc, pos, m, heads, kv_heads, max_seq, out);
    else if (hd == 64)
        attn_prefill_mma_kernel<64><<<grid, TC_WARPS * 32, 0, stream>>>(
            q, q_stride, kc, vc, pos, m, heads, kv_heads, max_seq, out);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

} // namespace qmm_llm
