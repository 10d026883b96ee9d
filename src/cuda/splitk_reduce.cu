/* Split-K reduction: c = bf16(Σ_z planes[z]) with the sum in fp32 in a fixed order (z = 0, 1, …),
 * so results are identical run to run. One output a thread per grid-stride step. */
#include "kernels.h"

namespace qmm {

// planes is [split, mn] of P, c is [mn] bf16.
template <typename P>
__global__ void splitk_reduce_kernel(const P *__restrict__ planes, int split, int64_t mn,
                                     __nv_bfloat16 *__restrict__ c)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < mn; i += stride) {
        float s = 0.f;
        for (int z = 0; z < split; z++) s += to_f32(planes[(int64_t)z * mn + i]);
        c[i] = __float2bfloat16_rn(s);
    }
}

cudaError_t launch_splitk_reduce(const void *planes, qmm_dtype type, int split, int64_t mn,
                                 __nv_bfloat16 *c, cudaStream_t stream)
{
    const int threads = 256;
    int64_t blocks = (mn + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    if (type == QMM_F32)
        splitk_reduce_kernel<float><<<(unsigned)blocks, threads, 0, stream>>>(
            (const float *)planes, split, mn, c);
    else
        splitk_reduce_kernel<__nv_bfloat16><<<(unsigned)blocks, threads, 0, stream>>>(
            (const __nv_bfloat16 *)planes, split, mn, c);
    return cudaGetLastError();
}

} // namespace qmm
