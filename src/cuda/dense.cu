/*
 * The dense path for long prompts: dequantize W into the workspace as bf16 [N, K] (the same
 * bf16(scale·q + bias) the tiled kernel computes in registers), then one cuBLAS bf16 GEMM with
 * fp32 accumulation. It pays only where the GEMM is compute bound and cuBLAS's tensor-core rate
 * (wgmma) beats our mma.sync kernel by more than the dequantization costs; the planner decides.
 * Also the row gather (qmm_cuda_dequantize_rows): selected rows in fp32, e.g. embedding lookups.
 */
#include <cublas_v2.h>

#include "kernels.h"
#include "w4_layout.h"

namespace qmm {

// packed/sb: device layout (groups of 128/GPB); w is [n, k] bf16 row-major. One thread per
// (row, 128-column block, chunk of 16 columns): consecutive threads write consecutive 32-byte
// pieces of a row, so a warp's stores cover 1 KB contiguously.
template <int GPB>
__global__ void dequant_w4_bf16_kernel(const uint32_t *__restrict__ packed,
                                       const uint32_t *__restrict__ sb, int n, int n_pad, int k,
                                       __nv_bfloat16 *__restrict__ w)
{
    const int chunks = k / 16;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)n * chunks) return;
    const int row = (int)(idx / chunks), kc = (int)(idx % chunks), grp = kc / 8, c = kc % 8;
    const uint32_t *src = packed + qmm_w4_device_offset(row, grp, k / 128);
    const uint32_t v = sb[(int64_t)(grp * GPB + c / (8 / GPB)) * n_pad + row]; /* chunk c's group */
    const uint32_t s2 = (v & 0xFFFFu) | (v << 16), b2 = (v >> 16) | (v & 0xFFFF0000u);
    const int h = (c % 2) * 8;
    const uint32_t magic = codes_magic(k);
    uint32_t lo[4], hi[4];
#pragma unroll
    for (int t = 0; t < 4; t++) {
        uint32_t word = __ldg(src + 4 * t + c / 2); /* lane t's word for this chunk */
        lo[t] = dequant_pair(word, h, s2, b2, magic);     /* k = 16c + 2t, +1 */
        hi[t] = dequant_pair(word, h + 4, s2, b2, magic); /* k = 16c + 2t + 8, +9 */
    }
    uint4 *dst = reinterpret_cast<uint4 *>(w + (int64_t)row * k + (int64_t)kc * 16);
    dst[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    dst[1] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
}

// out is [count, k] fp32; one block a row, consecutive threads on consecutive columns;
// groups of 1 << gshift columns
__global__ void dequant_rows_f32_kernel(const uint32_t *__restrict__ packed,
                                        const uint32_t *__restrict__ sb, int n, int n_pad, int k,
                                        int gshift, const int32_t *__restrict__ ids,
                                        const int32_t *__restrict__ id_offset,
                                        float *__restrict__ out, int32_t *err)
{
    const int r = blockIdx.x;
    int64_t row = ids[(id_offset ? *id_offset : 0) + r];
    if (row < 0 || row >= n) {
        if (threadIdx.x == 0 && err) *err = 1;
        row = 0;
    }
    qmm_w4_device_row_f32(packed, sb, row, k, gshift, n_pad, out + (int64_t)r * k);
}

cudaError_t launch_dequant_rows(const DevWeight &w, const int32_t *ids, const int32_t *id_offset,
                                int count, float *out, int32_t *err, cudaStream_t stream)
{
    if (count < 1) return cudaSuccess;
    const int gshift = w.group == 32 ? 5 : w.group == 64 ? 6 : w.group == 128 ? 7 : 0;
    if (!gshift) return cudaErrorInvalidValue;
    dequant_rows_f32_kernel<<<count, 256, 0, stream>>>(w.packed, w.sb, (int)w.n, (int)w.n_pad,
                                                       (int)w.k, gshift, ids, id_offset, out, err);
    return cudaGetLastError();
}

cudaError_t launch_dequant(const DevWeight &w, __nv_bfloat16 *out, cudaStream_t stream)
{
    int64_t threads = w.n * (w.k / 16);
    const unsigned blocks = (unsigned)((threads + 255) / 256);
    if (w.group == 128)
        dequant_w4_bf16_kernel<1><<<blocks, 256, 0, stream>>>(w.packed, w.sb, (int)w.n, (int)w.n_pad, (int)w.k, out);
    else if (w.group == 64)
        dequant_w4_bf16_kernel<2><<<blocks, 256, 0, stream>>>(w.packed, w.sb, (int)w.n, (int)w.n_pad, (int)w.k, out);
    else if (w.group == 32)
        dequant_w4_bf16_kernel<4><<<blocks, 256, 0, stream>>>(w.packed, w.sb, (int)w.n, (int)w.n_pad, (int)w.k, out);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

const char *run_dense(void *cublas, const DevWeight &w, const __nv_bfloat16 *a, int m,
                      __nv_bfloat16 *c, void *workspace, cudaStream_t stream)
{
    /* the layout of qmm_dense_workspace_bytes (plan_call.c) */
    cublasHandle_t h = (cublasHandle_t)cublas;
    __nv_bfloat16 *wb = (__nv_bfloat16 *)workspace;
    uintptr_t after_w = (uintptr_t)workspace + ((size_t)w.n * (size_t)w.k * 2 + 255) / 256 * 256;
    char *cublas_ws = (char *)((after_w + 255) / 256 * 256);
    if (launch_dequant(w, wb, stream) != cudaSuccess) return "dequantize kernel launch failed";
    if (cublasSetStream(h, stream) != CUBLAS_STATUS_SUCCESS) return "cublasSetStream failed";
    if (cublasSetWorkspace(h, cublas_ws, DENSE_CUBLAS_WORKSPACE) != CUBLAS_STATUS_SUCCESS)
        return "cublasSetWorkspace failed";
    /* row-major C[m,n] = A[m,k]·W[n,k]ᵀ is column-major Cᵀ[n,m] = W·Aᵀ with W seen as kxn col-major */
    const float one = 1.f, zero = 0.f;
    cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)w.n, m, (int)w.k, &one, wb,
                                     CUDA_R_16BF, (int)w.k, a, CUDA_R_16BF, (int)w.k, &zero, c,
                                     CUDA_R_16BF, (int)w.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? nullptr : "cublasGemmEx failed";
}

} // namespace qmm
