/*
 * qmm CUDA backend (included by qmm.h; do not include directly).
 *
 * A context binds one device and one stream. Weights are uploaded once (qmm_cuda_weight); calls
 * take device pointers for A [M, K] bf16 and C [M, N] bf16 (row-major, 16-byte aligned) and a
 * caller-provided workspace whose size qmm_cuda_workspace_size reports: nothing is allocated per
 * call. All launches go to the context's stream and are asynchronous; errors in arguments are
 * reported before anything is launched. Builds without nvcc answer QMM_ERR_UNSUPPORTED.
 */
#ifndef QMM_CUDA_H
#define QMM_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qmm_cuda_ctx qmm_cuda_ctx;
typedef struct qmm_cuda_weight qmm_cuda_weight;

/* What the planner needs to know about a GPU. */
typedef struct qmm_gpu_info {
    char name[256];
    int device;
    int cc_major, cc_minor;
    int sm_count;
    int l2_bytes;
    int smem_per_block_optin;
    int clock_khz;          /* SM clock, 0 if unknown */
    int mem_clock_khz;
    int mem_bus_bits;
    int driver_version;     /* e.g. 13000 */
    int runtime_version;
    int tiled_blocks_per_sm[QMM_MAX_TILE_CONFIGS]; /* resident blocks per SM, per tiled config */
} qmm_gpu_info;

/* 1 if this library was built with CUDA support. */
int qmm_cuda_built(void);
/* Number of usable devices in *count (0 when none); QMM_OK even when 0. msg gets the reason
 * when there is none (may be NULL). */
qmm_status qmm_cuda_device_count(int *count, char *msg, size_t msg_len);

/* stream is a cudaStream_t (NULL = the legacy default stream). */
qmm_status qmm_cuda_create(int device, void *stream, qmm_cuda_ctx **out);
void qmm_cuda_destroy(qmm_cuda_ctx *ctx);
qmm_status qmm_cuda_set_stream(qmm_cuda_ctx *ctx, void *stream);
qmm_status qmm_cuda_info(const qmm_cuda_ctx *ctx, qmm_gpu_info *out);

/* Transform a host weight once into the device layout (src/w4_layout.h) and copy it to the
 * device; returns when the copy has landed. Any group size (32, 64, 128); K a multiple of 128. */
qmm_status qmm_cuda_weight_upload(qmm_cuda_ctx *ctx, const qmm_w4 *w, qmm_cuda_weight **out);
void qmm_cuda_weight_free(qmm_cuda_weight *w);
int64_t qmm_cuda_weight_n(const qmm_cuda_weight *w);
int64_t qmm_cuda_weight_k(const qmm_cuda_weight *w);
/* Device bytes the weight occupies (packed + scales + biases). */
size_t qmm_cuda_weight_bytes(const qmm_cuda_weight *w);

/* out_dev[r, :] = row rows_dev[r] of W dequantized in fp32 (fmaf(scale, q, bias), exactly
 * qmm_dequantize_row_f32), r < count (1..65535), on the context's stream: a row gather from the
 * uploaded weight (the engine's embedding lookup reads the LM head's copy). rows_dev, out_dev
 * [count, K] and err_dev are device memory; an id outside [0, N) yields row 0 and sets
 * *err_dev = 1 (err_dev may be NULL). */
qmm_status qmm_cuda_dequantize_rows(qmm_cuda_ctx *ctx, const qmm_cuda_weight *w,
                                    const int32_t *rows_dev, int64_t count, float *out_dev,
                                    int32_t *err_dev);

/* Weights whose device memory the caller manages (e.g. streamed layer by layer into slots).
 * The device layout (src/w4_layout.h) takes packed_bytes + sb_bytes; qmm_w4_device_image writes
 * it into host memory (pinned, for async copies), and qmm_cuda_weight_wrap makes a weight handle
 * over device buffers holding that image. The handle does not own the buffers:
 * qmm_cuda_weight_free releases only the handle. */
qmm_status qmm_w4_device_image_bytes_group(int64_t n, int64_t k, int group, size_t *packed_bytes,
                                           size_t *sb_bytes);
qmm_status qmm_w4_device_image(const qmm_w4 *w, void *packed, size_t packed_bytes, void *sb,
                               size_t sb_bytes);
qmm_status qmm_cuda_weight_wrap_group(qmm_cuda_ctx *ctx, int64_t n, int64_t k, int group,
                                      void *packed_dev, void *sb_dev, qmm_cuda_weight **out);
/* The same for groups of 128. */
qmm_status qmm_w4_device_image_bytes(int64_t n, int64_t k, size_t *packed_bytes, size_t *sb_bytes);
qmm_status qmm_cuda_weight_wrap(qmm_cuda_ctx *ctx, int64_t n, int64_t k, void *packed_dev,
                                void *sb_dev, qmm_cuda_weight **out);
/* The weight's group size (0 for NULL). */
int qmm_cuda_weight_group(const qmm_cuda_weight *w);

typedef enum qmm_policy {
    QMM_POLICY_DEVICE = 0, /* default: one full wave on this GPU, split chosen by the model */
    QMM_POLICY_SEED = 1    /* the seed rule, exact (32x32 accounting, target 320, cap 16) */
} qmm_policy;

typedef struct qmm_cuda_options {
    qmm_path path;          /* AUTO = the plan */
    int split;              /* SPLITK: partitions, 0 = the plan's split; AUTO: 0 = the plan,
                               1 = the plan with the split held at 1 (the unsplit control);
                               other paths: 0 */
    int stages;             /* tiled/split-K async-copy pipeline depth 1..4; 0 = tuned default */
    qmm_dtype partial_type; /* split-K partial planes: QMM_BF16 (default) or QMM_F32 */
    qmm_policy policy;
    int group;              /* the weight's group size, for planning without the weight: 0 (the
                               default) = any: qmm_cuda_plan plans for 128 and
                               qmm_cuda_workspace_size reports enough for every group size;
                               qmm_cuda_matmul plans with its weight's own group (a nonzero value
                               that differs is an error) */
    int rows;               /* WGMMA with a split >= 1: weight rows a tile, 0 = the rule's
                               height, 64 or 128 (the token tile's other height, where the
                               table has one: tokens 32, 64 and 128; AUTO weighs it in
                               clusters, plan_call.c) */
    int rest;               /* a split in clusters whose CTAs exceed one wave of such clusters:
                               1 = its first tiles in clusters, one wave, and the tiles left
                               split through the workspace on the SMs they leave free (path
                               WGMMA with a split >= 2); 0 = the plan's choice (AUTO), a second
                               wave of clusters (a forced split); -1 = never */
} qmm_cuda_options;

qmm_cuda_options qmm_cuda_options_default(void);

/* The one planning function (plain C, no GPU needed): what qmm_cuda_matmul runs for C[M, N] =
 * A[M, K] · W[N, K]ᵀ on a GPU described by d with options o (NULL = defaults): path, kernel
 * configuration, split, stages and workspace bytes. It does the one shape check (M, N, K >= 1,
 * K % 128 == 0, each <= 2^30) and the options check. Every group size (o->group: 32, 64, 128)
 * plans alike. A context plans with its own description
 * (qmm_cuda_device_desc); `qmm plan` and the tests use the shipped table (qmm_tune_desc). */
qmm_status qmm_plan_call(const qmm_device_desc *d, int64_t m, int64_t n, int64_t k,
                         const qmm_cuda_options *o, qmm_plan *out);

/* The description a context plans with (the shipped table corrected by its GPU's SM count and
 * occupancy). */
qmm_status qmm_cuda_device_desc(const qmm_cuda_ctx *ctx, qmm_device_desc *out);

/* Plan a call without running it (what qmm_cuda_matmul would do with these options). */
qmm_status qmm_cuda_plan(qmm_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                         const qmm_cuda_options *opt, qmm_plan *out);

/* Workspace bytes qmm_cuda_matmul needs for this shape and options: 0 for the matvec and the
 * unsplit tiled kernel, split*M*N partials for split-K, N*K*2 (rounded up to 256) + 256 + 32 MiB for the dense path
 * (the plan's workspace_bytes). */
qmm_status qmm_cuda_workspace_size(qmm_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                                   const qmm_cuda_options *opt, size_t *bytes);

/* c_dev[M, N] = a_dev[M, K] · Wᵀ on the context's stream. opt may be NULL (defaults).
 * plan_out (may be NULL) receives what ran. */
qmm_status qmm_cuda_matmul(qmm_cuda_ctx *ctx, const qmm_bf16 *a_dev, int64_t m,
                           const qmm_cuda_weight *w, qmm_bf16 *c_dev, void *workspace,
                           size_t workspace_bytes, const qmm_cuda_options *opt,
                           qmm_plan *plan_out);

#ifdef __cplusplus
}
#endif

#endif /* QMM_CUDA_H */
