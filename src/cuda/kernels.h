/* Internal interface between the C entry points (context.cu) and the kernel families. */
#ifndef QMM_CUDA_KERNELS_H
#define QMM_CUDA_KERNELS_H

#include "common.cuh"
#include "internal.h"
#include "plan.h"
#include "tune/sm90.h"

namespace qmm {

/* A weight on the device, in the layout of w4_layout.h. */
struct DevWeight {
    int64_t n, k, n_pad;
    uint32_t *packed; /* [n_pad, k/8] permuted codes (blocks of 128 columns at every group size) */
    uint32_t *sb;     /* [k/group, n_pad] scale | bias << 16 */
    int group;        /* 32, 64 or 128 */
};

/* Groups per 128-column block (the kernels' template parameter GPB): 1, 2 or 4; 0 = unsupported. */
__host__ __device__ constexpr int groups_per_block(int group)
{
    return group == 128 ? 1 : group == 64 ? 2 : group == 32 ? 4 : 0;
}

/* Tiled kernel configurations (tile and warp layout), one per row of the tuning table
 * (tune/sm90.h). They change speed, never results: every configuration and stage count
 * accumulates each output in the same k order. */
struct TileConfig {
    int tile_m, tile_n, warps_m, warps_n;
};
#define QMM_COUNT_ROW(...) +1
constexpr int TILE_CONFIGS = 0 QMM_SM90_TILED(QMM_COUNT_ROW);
#undef QMM_COUNT_ROW
static_assert(TILE_CONFIGS <= QMM_MAX_TILE_CONFIGS, "tuning table has too many tiled rows");
extern const TileConfig tile_configs[TILE_CONFIGS];
constexpr int MAX_STAGES = QMM_MAX_STAGES;

size_t tiled_smem_bytes(int config, int stages, int group);
/* Raise the dynamic shared-memory limits of every instantiation (once per device). */
cudaError_t tiled_init(void);
/* Resident blocks per SM of a configuration at a stage count (occupancy API), groups of 128. */
cudaError_t tiled_occupancy(int config, int stages, int *blocks_per_sm);

/* out = partial plane(s) [split, m, n] of type out_type (QMM_BF16 or QMM_F32), or C itself when
 * split == 1 and out_type == QMM_BF16. */
cudaError_t launch_tiled(int config, int stages, const DevWeight &w, const __nv_bfloat16 *a, int m,
                         void *out, qmm_dtype out_type, int split, cudaStream_t stream);

/* c[m, n] = bf16(Σ_z planes[z]) in fp32, z = 0..split-1 in order. */
cudaError_t launch_splitk_reduce(const void *planes, qmm_dtype type, int split, int64_t mn,
                                 __nv_bfloat16 *c, cudaStream_t stream);

/* The decode matvec (matvec.cu), M <= 16, groups of 128, 64 or 32. Its epilogues: */
enum { MV_EPI_STORE = 0, MV_EPI_RESIDUAL = 1, MV_EPI_SWIGLU = 2, MV_EPI_STORE_F32 = 3 };
struct MatvecArgs {
    const uint32_t *packed, *sb; /* the weight (DevWeight) */
    int n, k, group;
    int64_t n_pad;
    const __nv_bfloat16 *a;      /* [m, lda], 16-byte aligned rows */
    int64_t lda;
    int m;
    int epi;
    __nv_bfloat16 *c;            /* STORE: [m, ldc]; SWIGLU: [m, ldc] with n/2 columns */
    int64_t ldc;
    float *x;                    /* RESIDUAL: x[m, ldc] += bf16(y), in fp32; STORE_F32: x = y */
    const __nv_bfloat16 *gamma;  /* RESIDUAL: the next RMSNorm's weight [n] (with xg) */
    __nv_bfloat16 *xg;           /*   xg[m, ldc] = bf16(x · gamma) (may be NULL) */
    float *ss_out;               /*   ss_out[t * ss_out_blocks + i] = Σ x² of rows 16i..16i+15 */
    int ss_out_blocks;
    const float *ss_in;          /* RMSNorm source: y *= 1/sqrt(Σ_j ss_in[t*ss_blocks+j]/norm_dim + eps) */
    int ss_blocks, norm_dim;
    float eps;
    int tiles_per_cta, cluster;  /* the CTA shape (16-row tiles a CTA, CTAs a cluster along K):
                                    0 = the launcher's choice, of warps too */
    int warps;                   /* warps a CTA: 8, or 4 (m <= 8); 0 with a caller's shape: 8 */
    int pre_wait;                /* groups a warp requests before the dependency wait (0: 2) */
    int log_r, log_c;            /* set by the launcher: log2 R, log2 C (shifts in the kernel) */
    int rounds;                  /* M >= 2, experiment (NOTES row 182): the activations staged in
                                    rounds, each warp's groups strided; 0 = QMM_MV_ROUNDS (off
                                    unless set to 1), 1 on, 2 off; the default staging wherever
                                    n_pad · 8 exceeds an int (the strided scale|bias step) */
    unsigned long long *stamp;   /* the engine's in-graph profile (NULL: none): stamp[2] gets the
                                    last CTA's end (%globaltimer ns, atomic max); [0], [1] are
                                    left as they are */
};
/* What the matvec's shape choice needs of the context: the SM count, and how many CTAs of each
 * kernel (one token tile in CTAs of 8 warps, two in 8, one in 4) are resident at once in
 * clusters of 2, 4, 8 (occupancy API at the launch bounds; index log2 of the size, [0] unused;
 * 0: unknown, the SM count times the CTAs a SM). */
struct MatvecScratch {
    int sm_count;
    int cluster_ctas[3][4];
};
cudaError_t matvec_init(void);
/* s.cluster_ctas from the occupancy API (s.sm_count set); a size it cannot answer stays 0. */
void matvec_capacity(MatvecScratch &s);
/* The CTA shape the launcher takes for p when the caller leaves it open (matvec_shape.cu):
 * warps a CTA, tiles a CTA, CTAs a cluster. */
void matvec_choose_shape(const MatvecArgs &p, const MatvecScratch &s, int *W, int *R, int *C);
/* The weight's arrays and sizes in a MatvecArgs; the caller adds the rest. */
MatvecArgs matvec_args(const DevWeight &w);
/* cudaErrorInvalidValue, before anything runs, for arguments the kernel does not take (matvec.cu
 * matvec_args_ok: NULL arrays, short rows, a SwiGLU weight of partial 128-row blocks, ...). */
cudaError_t launch_matvec_ex(MatvecArgs p, const MatvecScratch &scratch, bool pdl, cudaStream_t stream);
cudaError_t launch_matvec(const DevWeight &w, const __nv_bfloat16 *a, int m, __nv_bfloat16 *c,
                          const MatvecScratch &scratch, cudaStream_t stream);

/* Dense path: W dequantized into the workspace, then cuBLAS. run_dense returns NULL on
 * success, else what failed. */
constexpr size_t DENSE_CUBLAS_WORKSPACE = QMM_DENSE_CUBLAS_WORKSPACE;
cudaError_t launch_dequant(const DevWeight &w, __nv_bfloat16 *out, cudaStream_t stream);
/* out[r, :] = W[ids[r + off], :] in fp32 (fmaf(scale, q, bias), as qmm_dequantize_row_f32),
 * r < count, off = *id_offset (0 when NULL: device memory, so a graph replays at any offset).
 * An id outside [0, N) reads row 0 and sets *err = 1 (err may be NULL). */
cudaError_t launch_dequant_rows(const DevWeight &w, const int32_t *ids, const int32_t *id_offset,
                                int count, float *out, int32_t *err, cudaStream_t stream);
const char *run_dense(void *cublas, const DevWeight &w, const __nv_bfloat16 *a, int m,
                      __nv_bfloat16 *c, void *workspace, cudaStream_t stream);

/* The device weight behind a handle (context.cu), for kernels outside src/cuda (the engine). */
const DevWeight &weight_dev(const qmm_cuda_weight *w);
/* A context's matvec scratch (context.cu), for the engine's fused decode matvecs. */
const MatvecScratch &matvec_scratch(const qmm_cuda_ctx *ctx);

/* Hopper wgmma kernel (gemm_sm90.cu): token tile, consumer warpgroups (64 weight rows each),
 * pipeline stages. The schedule: split > 0 = split-K with `split` group-aligned partitions per
 * tile (1 = unsplit); split = 0 = stream-K over `ctas` CTAs. */
struct Sm90Config {
    int tile_tokens, warpgroups, stages, blocks_per_sm;
};
constexpr int SM90_CONFIGS = QMM_SM90_CONFIG_COUNT;
extern const Sm90Config sm90_configs[SM90_CONFIGS];
struct Sm90Schedule {
    int split, ctas;
    int sms; /* the device's SMs (the producer's start rules, tune/sm90.h; 0: unknown) */
    /* a split in clusters: its last rest_tiles tiles split rest_split ways through the
     * workspace in a second launch, on the SMs the clusters leave free (0: none) */
    int rest_tiles, rest_split;
};
cudaError_t sm90_init(void);
/* Resident CTAs of wgmma configuration `config` launched in clusters of s (occupancy API). */
cudaError_t sm90_cluster_ctas(int config, int s, int *ctas);
/* fp32 partial slots a split or stream-K schedule of `ctas` CTAs needs (a rest launch: its own). */
size_t sm90_workspace_bytes(int config, int ctas);
/* counters: one zeroed uint32 per tile (split/stream-K only), left zeroed. */
cudaError_t launch_sm90(int config, const Sm90Schedule &sched, const DevWeight &w,
                        const __nv_bfloat16 *a, int m, __nv_bfloat16 *c, void *workspace,
                        uint32_t *counters, bool pdl, cudaStream_t stream);

} // namespace qmm

#endif
