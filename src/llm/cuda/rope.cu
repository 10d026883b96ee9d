/* Per-head RMSNorm of q and k, RoPE from the shared table, and the KV-cache write: one kernel. */
#include "llm/cuda/llm_kernels.cuh"

namespace qmm_llm {

__device__ __forceinline__ float head_sum(float v, float *red)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = 0.0f;
    for (int i = 0; i < warps; i++) t += red[i];
    return t;
}

// q is [m, heads*hd] (rows q_stride apart), k and v [m, kv_heads*hd] (rows kv_stride apart);
// kc, vc [kv_heads, max_seq, hd]; one block per
// (row, head slot): slots [0, heads) are query heads, [heads, heads + kv_heads) key/value heads.
// Thread i < hd/2 owns the rotating pair (i, i + hd/2).
__global__ void qk_norm_rope_kernel(bf16 *q, const bf16 *k, const bf16 *v, int64_t q_stride,
                                    int64_t kv_stride, const bf16 *__restrict__ qw,
                                    const bf16 *__restrict__ kw, const float *__restrict__ cos_t,
                                    const float *__restrict__ sin_t, const int32_t *__restrict__ pos,
                                    int heads, int kv_heads, int hd, float eps, int64_t max_seq,
                                    bf16 *__restrict__ kc, bf16 *__restrict__ vc)
{
    __shared__ float red[32];
    const int r = blockIdx.x, slot = blockIdx.y, half = hd / 2, i = threadIdx.x;
    const int64_t p = (int64_t)*pos + r;
    const bool is_q = slot < heads;
    const int hh = is_q ? slot : slot - heads;
    const bf16 *in = is_q ? q + (int64_t)r * q_stride + (int64_t)hh * hd
                          : k + (int64_t)r * kv_stride + (int64_t)hh * hd;
    const bf16 *w = is_q ? qw : kw;
    float a = 0.0f, b = 0.0f;
    if (i < half) {
        a = __bfloat162float(in[i]);
        b = __bfloat162float(in[i + half]);
    }
    float ss = head_sum(a * a + b * b, red);
    /* as llm_head_norm_rope, without contractions so both sides round alike */
    float inv = 1.0f / sqrtf(ss / (float)hd + eps);
    if (i >= half) return;
    float ya = __fmul_rn(__fmul_rn(a, inv), __bfloat162float(w[i]));
    float yb = __fmul_rn(__fmul_rn(b, inv), __bfloat162float(w[i + half]));
    float c = cos_t[p * half + i], s = sin_t[p * half + i];
    bf16 oa = __float2bfloat16_rn(__fsub_rn(__fmul_rn(ya, c), __fmul_rn(yb, s)));
    bf16 ob = __float2bfloat16_rn(__fadd_rn(__fmul_rn(yb, c), __fmul_rn(ya, s)));
    if (is_q) {
        bf16 *o = q + (int64_t)r * q_stride + (int64_t)hh * hd;
        o[i] = oa;
        o[i + half] = ob;
    } else {
        bf16 *ko = kc + ((int64_t)hh * max_seq + p) * hd;
        ko[i] = oa;
        ko[i + half] = ob;
        const bf16 *vi = v + (int64_t)r * kv_stride + (int64_t)hh * hd;
        bf16 *vo = vc + ((int64_t)hh * max_seq + p) * hd;
        vo[i] = vi[i];
        vo[i + half] = vi[i + half];
    }
}

cudaError_t launch_qk_norm_rope(bf16 *q, const bf16 *k, const bf16 *v, int64_t q_stride,
                                int64_t kv_stride, const bf16 *qw, const bf16 *kw,
                                const float *cos_t, const float *sin_t, const int32_t *pos, int m,
                                int heads, int kv_heads, int hd, float eps, int64_t max_seq,
                                bf16 *kc, bf16 *vc, cudaStream_t stream)
{
    int threads = ((hd / 2 + 31) / 32) * 32;
    dim3 grid(m, heads + kv_heads);
    qk_norm_rope_kernel<<<grid, threads, 0, stream>>>(q, k, v, q_stride, kv_stride, qw, kw, cos_t,
                                                      sin_t, pos, heads, kv_heads, hd, eps, max_seq,
                                                      kc, vc);
    return cudaGetLastError();
}

} // namespace qmm_llm
