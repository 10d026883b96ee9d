/*
 * Prefill path: tiled bf16 tensor-core GEMM with W4 weights dequantized in registers, and its
 * split-K form (partition index in blockIdx.z, each partition writing its own [M, N] plane).
 *
 * One k-tile is one block of 128 columns (w4_layout.h). Per stage the block copies asynchronously
 * (cp.async) A[BM, 128] (bf16, 16-byte chunks XOR-swizzled by row so ldmatrix is conflict-free),
 * the packed codes W[BN, 16 words] and the scale|bias pairs of the block's GPB groups (GPB = 1,
 * 2, 4 for groups of 128, 64, 32: a template parameter, so the g128 kernel is the one it was).
 * STAGES buffers form the pipeline: 1 = copy then compute, 2 = double buffering, 3–4 deeper. Each warp computes a (BM/WM)×(BN/WN)
 * tile with m16n8k16 mma; its B fragments are dequantized from the lane's 16 bytes of codes
 * (w4_layout.h) as bf16(scale·q + bias), accumulation in fp32.
 */
#include "kernels.h"
#include "w4_layout.h"

namespace qmm {

#define QMM_TILE_ROW(tm, tn, wm, wn, max_m, stages, bps) {tm, tn, wm, wn},
const TileConfig tile_configs[TILE_CONFIGS] = {QMM_SM90_TILED(QMM_TILE_ROW)};
#undef QMM_TILE_ROW

template <int BM, int BN, int GPB> struct TileSmem {
    static constexpr int A_BYTES = BM * 256;     /* BM rows x 128 bf16 */
    static constexpr int W_BYTES = BN * 64;      /* BN rows x 16 words */
    static constexpr int SB_BYTES = GPB * BN * 4; /* [GPB][BN] scale|bias pairs */
    static constexpr int STAGE_BYTES = A_BYTES + W_BYTES + SB_BYTES;
};

// a is [m, k] bf16; packed/sb the device layout (groups of 128/GPB); out is [gridDim.z, m, n] of
// OutT; partition z covers columns [z*k_split, (z+1)*k_split), k_split a multiple of 128.
template <int BM, int BN, int WM, int WN, int STAGES, typename OutT, int GPB>
__global__ __launch_bounds__(WM *WN * 32) void gemm_w4_bf16_kernel(
    const __nv_bfloat16 *__restrict__ a, int m, int k, const uint32_t *__restrict__ packed,
    const uint32_t *__restrict__ sb, int n, int n_pad, OutT *__restrict__ out, int k_split)
{
    constexpr int THREADS = WM * WN * 32, TM = BM / WM, TN = BN / WN, MT = TM / 16, NT = TN / 8;
    using S = TileSmem<BM, BN, GPB>;
    constexpr int CPG = 8 / GPB; /* 16-column chunks per group */
    extern __shared__ uint4 smem_v4[];
    unsigned char *smem = reinterpret_cast<unsigned char *>(smem_v4);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int warp_m = warp / WN, warp_n = warp % WN;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, z = blockIdx.z;
    const int k_begin = z * k_split, k_tiles = k_split / 128;
    const uint32_t magic = codes_magic(m);
    out += (int64_t)z * m * n;

    auto stage_a = [&](int s) { return reinterpret_cast<__nv_bfloat16 *>(smem + s * S::STAGE_BYTES); };
    auto stage_w = [&](int s) { return reinterpret_cast<uint32_t *>(smem + s * S::STAGE_BYTES + S::A_BYTES); };
    auto stage_sb = [&](int s) {
        return reinterpret_cast<uint32_t *>(smem + s * S::STAGE_BYTES + S::A_BYTES + S::W_BYTES);
    };

    auto load_stage = [&](int s, int kt) {
        const int kg = k_begin + kt * 128, grp = kg / 128;
        __nv_bfloat16 *sa = stage_a(s);
        for (int i = tid; i < BM * 16; i += THREADS) {
            int r = i / 16, ch = i % 16, gm = m0 + r;
            const __nv_bfloat16 *src = a + (int64_t)(gm < m ? gm : m - 1) * k + kg + ch * 8;
            cp_async16(sa + r * 128 + ((ch ^ (r & 7)) * 8), src, gm < m);
        }
        uint32_t *sw = stage_w(s);
        for (int i = tid; i < BN * 4; i += THREADS) {
            int r = i / 4, ch = i % 4;
            cp_async16(sw + r * 16 + ch * 4, packed + qmm_w4_device_offset(n0 + r, grp, k / 128) + ch * 4, true);
        }
        uint32_t *ss = stage_sb(s);
        if constexpr (GPB == 1) {
            for (int i = tid; i < BN / 4; i += THREADS)
                cp_async16(ss + i * 4, sb + (int64_t)grp * n_pad + n0 + i * 4, true);
        } else { /* [GPB][BN]: the block's groups grp·GPB + j */
            for (int i = tid; i < GPB * BN / 4; i += THREADS) {
                const int j = i / (BN / 4), r4 = i % (BN / 4);
                cp_async16(ss + j * BN + r4 * 4, sb + (int64_t)(grp * GPB + j) * n_pad + n0 + r4 * 4, true);
            }
        }
    };

    float acc[MT][NT][4];
    zero_frags(acc);

    auto compute_stage = [&](int s) {
        const __nv_bfloat16 *sa = stage_a(s);
        const uint32_t *sw = stage_w(s), *ss = stage_sb(s);
        uint4 wv[NT];
        uint32_t s2[NT], b2[NT];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            int row = warp_n * TN + nt * 8 + g;
            wv[nt] = *reinterpret_cast<const uint4 *>(sw + row * 16 + 4 * t);
            uint32_t v = ss[row];
            s2[nt] = (v & 0xFFFFu) | (v << 16);
            b2[nt] = (v >> 16) | (v & 0xFFFF0000u);
        }
#pragma unroll
        for (int ch = 0; ch < 8; ch++) {
            if constexpr (GPB > 1) {
                if (ch > 0 && ch % CPG == 0) { /* chunk ch starts group ch / CPG of the block */
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) {
                        uint32_t v = ss[(ch / CPG) * BN + warp_n * TN + nt * 8 + g];
                        s2[nt] = (v & 0xFFFFu) | (v << 16);
                        b2[nt] = (v >> 16) | (v & 0xFFFF0000u);
                    }
                }
            }
            uint32_t af[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                int row = warp_m * TM + mt * 16 + (lane % 16), c16 = 2 * ch + lane / 16;
                ldmatrix_x4(af[mt][0], af[mt][1], af[mt][2], af[mt][3],
                            sa + row * 128 + ((c16 ^ (row & 7)) * 8));
            }
            const int h = (ch % 2) * 8;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const int j = ch / 2;
                uint32_t word = j == 0 ? wv[nt].x : j == 1 ? wv[nt].y : j == 2 ? wv[nt].z : wv[nt].w;
                uint32_t b0 = dequant_pair(word, h, s2[nt], b2[nt], magic);
                uint32_t b1 = dequant_pair(word, h + 4, s2[nt], b2[nt], magic);
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    mma_bf16_16816(acc[mt][nt], af[mt][0], af[mt][1], af[mt][2], af[mt][3], b0, b1);
            }
        }
    };

    if constexpr (STAGES == 1) {
        for (int kt = 0; kt < k_tiles; kt++) {
            load_stage(0, kt);
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();
            compute_stage(0);
            __syncthreads();
        }
    } else {
#pragma unroll
        for (int s = 0; s < STAGES - 1; s++) {
            if (s < k_tiles) load_stage(s, s);
            cp_async_commit();
        }
        for (int kt = 0; kt < k_tiles; kt++) {
            cp_async_wait<STAGES - 2>();
            __syncthreads(); /* tile kt has landed; slot (kt-1)%STAGES is free */
            int pf = kt + STAGES - 1;
            if (pf < k_tiles) load_stage(pf % STAGES, pf);
            cp_async_commit();
            compute_stage(kt % STAGES);
        }
        cp_async_wait<0>();
    }

    const bool pairs = (n % 2) == 0;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                int row = m0 + warp_m * TM + mt * 16 + g + half * 8;
                int col = n0 + warp_n * TN + nt * 8 + 2 * t;
                if (row >= m || col >= n) continue;
                float v0 = acc[mt][nt][2 * half], v1 = acc[mt][nt][2 * half + 1];
                OutT *dst = out + (int64_t)row * n + col;
                if (pairs) {
                    if constexpr (sizeof(OutT) == 4) {
                        *reinterpret_cast<float2 *>(dst) = make_float2(v0, v1);
                    } else {
                        *reinterpret_cast<__nv_bfloat162 *>(dst) = __floats2bfloat162_rn(v0, v1);
                    }
                } else {
                    dst[0] = from_f32<OutT>(v0);
                    if (col + 1 < n) dst[1] = from_f32<OutT>(v1);
                }
            }
}

/* ---- instantiation table: group size x config (a row of tune/sm90.h) x stages x output type ---- */

typedef void (*TiledKernelBf16)(const __nv_bfloat16 *, int, int, const uint32_t *, const uint32_t *,
                                int, int, __nv_bfloat16 *, int);
typedef void (*TiledKernelF32)(const __nv_bfloat16 *, int, int, const uint32_t *, const uint32_t *,
                               int, int, float *, int);

#define QMM_TILED_ROW(BM, BN, WM, WN, T, GPB)                                             \
    {                                                                                     \
        gemm_w4_bf16_kernel<BM, BN, WM, WN, 1, T, GPB>,                                   \
            gemm_w4_bf16_kernel<BM, BN, WM, WN, 2, T, GPB>,                               \
            gemm_w4_bf16_kernel<BM, BN, WM, WN, 3, T, GPB>,                               \
            gemm_w4_bf16_kernel<BM, BN, WM, WN, 4, T, GPB>                                \
    }

static_assert(MAX_STAGES == 4, "QMM_TILED_ROW instantiates stages 1..4");
/* index 0, 1, 2: groups of 128, 64, 32 (GPB 1, 2, 4) */
constexpr int GROUP_KINDS = 3;
static int group_index(int group) { return group == 64 ? 1 : group == 32 ? 2 : 0; }
#define QMM_BF16_ROW1(tm, tn, wm, wn, max_m, stages, bps) QMM_TILED_ROW(tm, tn, wm, wn, __nv_bfloat16, 1),
#define QMM_BF16_ROW2(tm, tn, wm, wn, max_m, stages, bps) QMM_TILED_ROW(tm, tn, wm, wn, __nv_bfloat16, 2),
#define QMM_BF16_ROW4(tm, tn, wm, wn, max_m, stages, bps) QMM_TILED_ROW(tm, tn, wm, wn, __nv_bfloat16, 4),
#define QMM_F32_ROW1(tm, tn, wm, wn, max_m, stages, bps) QMM_TILED_ROW(tm, tn, wm, wn, float, 1),
#define QMM_F32_ROW2(tm, tn, wm, wn, max_m, stages, bps) QMM_TILED_ROW(tm, tn, wm, wn, float, 2),
#define QMM_F32_ROW4(tm, tn, wm, wn, max_m, stages, bps) QMM_TILED_ROW(tm, tn, wm, wn, float, 4),
static const TiledKernelBf16 kernels_bf16[GROUP_KINDS][TILE_CONFIGS][MAX_STAGES] = {
    {QMM_SM90_TILED(QMM_BF16_ROW1)}, {QMM_SM90_TILED(QMM_BF16_ROW2)}, {QMM_SM90_TILED(QMM_BF16_ROW4)}};
static const TiledKernelF32 kernels_f32[GROUP_KINDS][TILE_CONFIGS][MAX_STAGES] = {
    {QMM_SM90_TILED(QMM_F32_ROW1)}, {QMM_SM90_TILED(QMM_F32_ROW2)}, {QMM_SM90_TILED(QMM_F32_ROW4)}};
#undef QMM_BF16_ROW1
#undef QMM_BF16_ROW2
#undef QMM_BF16_ROW4
#undef QMM_F32_ROW1
#undef QMM_F32_ROW2
#undef QMM_F32_ROW4

size_t tiled_smem_bytes(int config, int stages, int group)
{
    const TileConfig &c = tile_configs[config];
    const size_t sb = 4 * (size_t)groups_per_block(group); /* scale|bias bytes per row */
    return (size_t)stages * ((size_t)c.tile_m * 256 + (size_t)c.tile_n * (64 + sb));
}

cudaError_t tiled_init(void)
{
    static const int groups[GROUP_KINDS] = {128, 64, 32};
    for (int gi = 0; gi < GROUP_KINDS; gi++)
        for (int c = 0; c < TILE_CONFIGS; c++)
            for (int s = 1; s <= MAX_STAGES; s++) {
                int bytes = (int)tiled_smem_bytes(c, s, groups[gi]);
                cudaError_t e = cudaFuncSetAttribute((const void *)kernels_bf16[gi][c][s - 1],
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
                if (e == cudaSuccess)
                    e = cudaFuncSetAttribute((const void *)kernels_f32[gi][c][s - 1],
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
                if (e != cudaSuccess) return e;
            }
    return cudaSuccess;
}

cudaError_t tiled_occupancy(int config, int stages, int *blocks_per_sm)
{
    const TileConfig &c = tile_configs[config];
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        blocks_per_sm, (const void *)kernels_bf16[0][config][stages - 1], c.warps_m * c.warps_n * 32,
        tiled_smem_bytes(config, stages, 128));
}

cudaError_t launch_tiled(int config, int stages, const DevWeight &w, const __nv_bfloat16 *a, int m,
                         void *out, qmm_dtype out_type, int split, cudaStream_t stream)
{
    const TileConfig &c = tile_configs[config];
    dim3 grid((unsigned)((m + c.tile_m - 1) / c.tile_m), (unsigned)((w.n + c.tile_n - 1) / c.tile_n),
              (unsigned)split);
    dim3 block(c.warps_m * c.warps_n * 32);
    if (!groups_per_block(w.group) || w.k % ((int64_t)split * 128)) return cudaErrorInvalidValue;
    const int gi = group_index(w.group);
    size_t smem = tiled_smem_bytes(config, stages, w.group);
    int k_split = (int)(w.k / split);
    if (out_type == QMM_F32)
        kernels_f32[gi][config][stages - 1]<<<grid, block, smem, stream>>>(
            a, m, (int)w.k, w.packed, w.sb, (int)w.n, (int)w.n_pad, (float *)out, k_split);
    else
        kernels_bf16[gi][config][stages - 1]<<<grid, block, smem, stream>>>(
            a, m, (int)w.k, w.packed, w.sb, (int)w.n, (int)w.n_pad, (__nv_bfloat16 *)out, k_split);
    return cudaGetLastError();
}

} // namespace qmm
