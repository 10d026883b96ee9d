/*
 * The C entry points of the CUDA backend: context, weight upload, planning and dispatch.
 * Pipeline of every call (as in BLIS): check arguments -> plan -> launch; nothing is launched
 * when a check fails, and nothing is allocated per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "cuda_try.h"
#include "kernels.h"
#include "plan_sm90.h"
#include "w4_layout.h"

using namespace qmm;

struct qmm_cuda_ctx {
    int device;
    cudaStream_t stream;
    qmm_gpu_info info;
    qmm_device_desc desc; /* what the device policy knows */
    cublasHandle_t cublas; /* the dense path's */
    uint32_t *counters;    /* per-tile CTA counts of the wgmma kernel's split schedules, kept zero */
};

struct qmm_cuda_weight {
    DevWeight dev;
    size_t bytes;
    int device;
    int owns; /* 0 for qmm_cuda_weight_wrap: the caller's buffers */
};

#define CUDA_TRY QMM_CUDA_TRY

/* ---- tuning for sm_90 (H200). These change speed, never results. The model parameters were
 * fitted to bench ops on the H200 (bench/results/2026-11-29-stages-overlap/ops.*): with them the plan's
 * choice is within 2% of the best measured contender on average over the Qwen3-4B shapes. ---- */
static const int default_stages[TILE_CONFIGS] = {2, 2, 4}; /* bench ops --stages: 2 beats 1 by 18-28%, 3-4 add nothing at small tiles */
static const int config_max_m[TILE_CONFIGS] = {32, 64, 1 << 30};
static const int tuned_matvec_max_m = 8;   /* seed value; the matvec itself handles M <= 16 */
static const int tuned_max_split = 16;
static const int tuned_min_k_tiles = 2;
static const double tuned_peak_tflops = 250.0; /* mma.sync + dequant kernel's effective rate */
static const double tuned_bandwidth_gbs = 3900.0; /* bench ops copy ceiling */
static const double tuned_launch_us = 1.0;
static const int matvec_limit_m = 16;
static const double tuned_dense_tflops = 400.0; /* cuBLAS bf16 at these shapes (not 8192^3) */
static const int tuned_dense_min_m = 128;
/* Where each path wins on the H200 (bench/results/2026-11-30-sm90/ops.md): the matvec at
 * M <= 4, the wgmma kernel from 5 to 384 tokens, dequantize + cuBLAS beyond (and for N <= 1024
 * from M = 128). */
static const int tuned_sm90_min_m = 5;
static const int tuned_sm90_max_m = 384;

static const int tuned_dense_narrow_n = 1024; /* k/v: the dense path wins from M = 128 */

/* Long prompts, and narrow outputs at M >= 128: dequantize + cuBLAS. */
static bool should_use_dense(int64_t m, int64_t n)
{
    return m > tuned_sm90_max_m || (m >= 128 && n <= tuned_dense_narrow_n);
}
/* The Hopper wgmma kernel for this call? */
static bool should_use_sm90(int64_t m, int64_t n)
{
    return m >= tuned_sm90_min_m && !should_use_dense(m, n);
}

extern "C" int qmm_cuda_built(void) { return 1; }

extern "C" qmm_status qmm_cuda_device_count(int *count, char *msg, size_t msg_len)
{
    if (!count) return qmm_fail(QMM_ERR_NULL, "count is NULL");
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (msg && msg_len) snprintf(msg, msg_len, "no CUDA device: %s", cudaGetErrorString(e));
        cudaGetLastError(); /* clear the sticky-free error state */
        *count = 0;
        return QMM_OK;
    }
    if (n == 0 && msg && msg_len) snprintf(msg, msg_len, "no CUDA device found");
    *count = n;
    return QMM_OK;
}

extern "C" qmm_status qmm_cuda_create(int device, void *stream, qmm_cuda_ctx **out)
{
    if (!out) return qmm_fail(QMM_ERR_NULL, "out is NULL");
    *out = NULL;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        cudaGetLastError();
        return qmm_fail(QMM_ERR_NO_DEVICE, "no CUDA device is available");
    }
    if (device < 0 || device >= count)
        return qmm_fail(QMM_ERR_ARG, "device %d out of range (%d devices)", device, count);
    CUDA_TRY(cudaSetDevice(device));
    cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    if (prop.major != 9) /* sm_90a code does not run on other architectures */
        return qmm_fail(QMM_ERR_UNSUPPORTED, "%s is sm_%d%d; this build targets sm_90", prop.name,
                        prop.major, prop.minor);
    CUDA_TRY(tiled_init());

    qmm_cuda_ctx *ctx = (qmm_cuda_ctx *)calloc(1, sizeof *ctx);
    if (!ctx) return qmm_fail(QMM_ERR_NOMEM, "out of host memory");
    ctx->device = device;
    ctx->stream = (cudaStream_t)stream;
    qmm_gpu_info *in = &ctx->info;
    snprintf(in->name, sizeof in->name, "%s", prop.name);
    in->device = device;
    in->cc_major = prop.major;
    in->cc_minor = prop.minor;
    in->sm_count = prop.multiProcessorCount;
    in->l2_bytes = prop.l2CacheSize;
    in->smem_per_block_optin = (int)prop.sharedMemPerBlockOptin;
    cudaDeviceGetAttribute(&in->clock_khz, cudaDevAttrClockRate, device);
    cudaDeviceGetAttribute(&in->mem_clock_khz, cudaDevAttrMemoryClockRate, device);
    cudaDeviceGetAttribute(&in->mem_bus_bits, cudaDevAttrGlobalMemoryBusWidth, device);
    cudaDriverGetVersion(&in->driver_version);
    cudaRuntimeGetVersion(&in->runtime_version);
    cudaGetLastError();

    qmm_device_desc *d = &ctx->desc;
    d->sm_count = in->sm_count;
    d->matvec_max_m = tuned_matvec_max_m;
    d->max_split = tuned_max_split;
    d->min_k_tiles = tuned_min_k_tiles;
    d->config_count = TILE_CONFIGS;
    d->bandwidth_gbs = tuned_bandwidth_gbs;
    d->peak_tflops = tuned_peak_tflops;
    d->launch_us = tuned_launch_us;
    d->dense_tflops = tuned_dense_tflops;
    d->dense_min_m = tuned_dense_min_m;
    if (cublasCreate(&ctx->cublas) != CUBLAS_STATUS_SUCCESS) {
        free(ctx);
        return qmm_fail(QMM_ERR_CUDA, "cublasCreate failed");
    }
    cudaError_t ce = sm90_init();
    size_t counter_bytes = (size_t)QMM_SM90_MAX_COUNTED_TILES * sizeof(uint32_t);
    if (ce == cudaSuccess) ce = cudaMalloc((void **)&ctx->counters, counter_bytes);
    if (ce == cudaSuccess) ce = cudaMemset(ctx->counters, 0, counter_bytes);
    if (ce == cudaSuccess) ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) {
        cudaFree(ctx->counters);
        cublasDestroy(ctx->cublas);
        free(ctx);
        cudaGetLastError();
        return qmm_fail(ce == cudaErrorMemoryAllocation ? QMM_ERR_NOMEM : QMM_ERR_CUDA,
                        "wgmma kernel setup failed: %s", cudaGetErrorString(ce));
    }
    for (int c = 0; c < TILE_CONFIGS; c++) {
        int bps = 0;
        cudaError_t e = tiled_occupancy(c, default_stages[c], &bps);
        if (e != cudaSuccess || bps < 1) {
            cudaFree(ctx->counters);
            cublasDestroy(ctx->cublas);
            free(ctx);
            return qmm_fail(QMM_ERR_CUDA, "occupancy query for tile configuration %d failed: %s", c,
                            cudaGetErrorString(e));
        }
        in->tiled_blocks_per_sm[c] = bps;
        d->config[c].tile_m = tile_configs[c].tile_m;
        d->config[c].tile_n = tile_configs[c].tile_n;
        d->config[c].blocks_per_sm = bps;
        d->config[c].max_m = config_max_m[c];
    }
    *out = ctx;
    return QMM_OK;
}

extern "C" void qmm_cuda_destroy(qmm_cuda_ctx *ctx)
{
    if (!ctx) return;
    cudaFree(ctx->counters);
    cublasDestroy(ctx->cublas);
    free(ctx);
}

extern "C" qmm_status qmm_cuda_set_stream(qmm_cuda_ctx *ctx, void *stream)
{
    if (!ctx) return qmm_fail(QMM_ERR_NULL, "ctx is NULL");
    ctx->stream = (cudaStream_t)stream;
    return QMM_OK;
}

extern "C" qmm_status qmm_cuda_info(const qmm_cuda_ctx *ctx, qmm_gpu_info *out)
{
    if (!ctx || !out) return qmm_fail(QMM_ERR_NULL, "ctx or out is NULL");
    *out = ctx->info;
    return QMM_OK;
}

/* ---- weights ---- */

extern "C" qmm_status qmm_cuda_weight_upload(qmm_cuda_ctx *ctx, const qmm_w4 *w,
                                             qmm_cuda_weight **out)
{
    if (!ctx || !w || !out) return qmm_fail(QMM_ERR_NULL, "ctx, w or out is NULL");
    *out = NULL;
    qmm_status st = qmm_w4_validate(w);
    if (st != QMM_OK) return st;
    /* the device layout and every kernel read groups of 128 (QMM_GROUP) */
    if (w->group != QMM_GROUP)
        return qmm_fail(QMM_ERR_UNSUPPORTED, "the CUDA kernels take groups of %d; this weight "
                        "[%lld, %lld] has groups of %d (the CPU path runs it)", QMM_GROUP,
                        (long long)w->n, (long long)w->k, w->group);
    if (w->n > (1 << 30) || w->k > (1 << 30))
        return qmm_fail(QMM_ERR_SHAPE, "N = %lld, K = %lld: the CUDA kernels take up to 2^30",
                        (long long)w->n, (long long)w->k);
    int64_t n_pad = qmm_w4_device_rows(w->n);
    size_t packed_bytes = (size_t)n_pad * (size_t)(w->k / 8) * 4;
    size_t sb_bytes = (size_t)(w->k / QMM_GROUP) * (size_t)n_pad * 4;
    uint32_t *hp = (uint32_t *)malloc(packed_bytes), *hs = (uint32_t *)malloc(sb_bytes);
    qmm_cuda_weight *dw = (qmm_cuda_weight *)calloc(1, sizeof *dw);
    if (!hp || !hs || !dw) {
        free(hp), free(hs), free(dw);
        return qmm_fail(QMM_ERR_NOMEM, "out of host memory for the layout transform");
    }
    st = qmm_w4_to_device_layout(w, hp, hs);
    cudaError_t e = cudaSuccess;
    if (st == QMM_OK) {
        e = cudaSetDevice(ctx->device);
        if (e == cudaSuccess) e = cudaMalloc((void **)&dw->dev.packed, packed_bytes);
        if (e == cudaSuccess) e = cudaMalloc((void **)&dw->dev.sb, sb_bytes);
        if (e == cudaSuccess) e = cudaMemcpy(dw->dev.packed, hp, packed_bytes, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(dw->dev.sb, hs, sb_bytes, cudaMemcpyHostToDevice);
        /* from pageable memory cudaMemcpy may return before the DMA lands; kernels on other
         * (non-blocking) streams must see the weight */
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
    }
    free(hp), free(hs);
    if (st != QMM_OK || e != cudaSuccess) {
        cudaFree(dw->dev.packed), cudaFree(dw->dev.sb), free(dw);
        cudaGetLastError();
        return st != QMM_OK ? st
                            : qmm_fail(e == cudaErrorMemoryAllocation ? QMM_ERR_NOMEM : QMM_ERR_CUDA,
                                       "weight upload failed: %s", cudaGetErrorString(e));
    }
    dw->dev.n = w->n;
    dw->dev.k = w->k;
    dw->dev.n_pad = n_pad;
    dw->bytes = packed_bytes + sb_bytes;
    dw->device = ctx->device;
    dw->owns = 1;
    *out = dw;
    return QMM_OK;
}

extern "C" qmm_status qmm_cuda_weight_wrap(qmm_cuda_ctx *ctx, int64_t n, int64_t k,
                                           void *packed_dev, void *sb_dev, qmm_cuda_weight **out)
{
    if (!ctx || !packed_dev || !sb_dev || !out)
        return qmm_fail(QMM_ERR_NULL, "ctx, packed, sb or out is NULL");
    *out = NULL;
    size_t pb, sbb;
    qmm_status st = qmm_w4_device_image_bytes(n, k, &pb, &sbb);
    if (st != QMM_OK) return st;
    if (n > (1 << 30) || k > (1 << 30))
        return qmm_fail(QMM_ERR_SHAPE, "N = %lld, K = %lld: the CUDA kernels take up to 2^30",
                        (long long)n, (long long)k);
    if (((uintptr_t)packed_dev | (uintptr_t)sb_dev) % 16)
        return qmm_fail(QMM_ERR_ALIGN, "device image buffers must be 16-byte aligned");
    qmm_cuda_weight *dw = (qmm_cuda_weight *)calloc(1, sizeof *dw);
    if (!dw) return qmm_fail(QMM_ERR_NOMEM, "out of host memory");
    dw->dev.n = n;
    dw->dev.k = k;
    dw->dev.n_pad = qmm_w4_device_rows(n);
    dw->dev.packed = (uint32_t *)packed_dev;
    dw->dev.sb = (uint32_t *)sb_dev;
    dw->bytes = pb + sbb;
    dw->device = ctx->device;
    dw->owns = 0;
    *out = dw;
    return QMM_OK;
}

extern "C" void qmm_cuda_weight_free(qmm_cuda_weight *w)
{
    if (!w) return;
    if (w->owns) {
        cudaFree(w->dev.packed);
        cudaFree(w->dev.sb);
    }
    free(w);
}
extern "C" int64_t qmm_cuda_weight_n(const qmm_cuda_weight *w) { return w ? w->dev.n : 0; }
extern "C" int64_t qmm_cuda_weight_k(const qmm_cuda_weight *w) { return w ? w->dev.k : 0; }
extern "C" size_t qmm_cuda_weight_bytes(const qmm_cuda_weight *w) { return w ? w->bytes : 0; }

/* ---- options, plan, workspace ---- */

extern "C" qmm_cuda_options qmm_cuda_options_default(void)
{
    qmm_cuda_options o;
    o.path = QMM_PATH_AUTO;
    o.split = 0;
    o.stages = 0;
    o.partial_type = QMM_BF16;
    o.policy = QMM_POLICY_DEVICE;
    return o;
}

static int config_for_m(const qmm_device_desc *d, int64_t m)
{
    for (int i = 0; i < d->config_count; i++)
        if (m <= d->config[i].max_m) return i;
    return d->config_count - 1;
}

/* The plan a call will run: the policy's, then the forced path/split of the options. */
static qmm_status make_plan(const qmm_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                            const qmm_cuda_options *o, qmm_plan *p)
{
    if (m < 1 || n < 1 || k < 1 || k % QMM_GROUP)
        return qmm_fail(QMM_ERR_SHAPE, "M = %lld, N = %lld, K = %lld: need >= 1 and K %% 128 == 0",
                        (long long)m, (long long)n, (long long)k);
    if (m > (1 << 30) || n > (1 << 30) || k > (1 << 30))
        return qmm_fail(QMM_ERR_SHAPE, "M = %lld, N = %lld, K = %lld: the CUDA kernels take up to 2^30",
                        (long long)m, (long long)n, (long long)k);
    if (o->path < QMM_PATH_AUTO || o->path > QMM_PATH_WGMMA)
        return qmm_fail(QMM_ERR_ARG, "unknown path %d", (int)o->path);
    if (o->stages < 0 || o->stages > MAX_STAGES)
        return qmm_fail(QMM_ERR_ARG, "stages = %d: use 0 (default) or 1..%d", o->stages, MAX_STAGES);
    if (o->partial_type != QMM_BF16 && o->partial_type != QMM_F32)
        return qmm_fail(QMM_ERR_DTYPE, "partial planes must be bf16 or f32");
    if (o->policy != QMM_POLICY_DEVICE && o->policy != QMM_POLICY_SEED)
        return qmm_fail(QMM_ERR_ARG, "unknown policy %d", (int)o->policy);
    if (o->split < 0 || o->split > 64)
        return qmm_fail(QMM_ERR_ARG, "split = %d out of range 0..64", o->split);
    if (o->split > 1 && o->path != QMM_PATH_SPLITK && o->path != QMM_PATH_WGMMA)
        return qmm_fail(QMM_ERR_ARG, "split = %d needs path SPLITK or WGMMA (AUTO takes 0 or 1)", o->split);

    /* the Hopper wgmma kernel: forced, or AUTO under the device policy */
    if (o->path == QMM_PATH_WGMMA)
        return qmm_plan_sm90(m, n, k, ctx->info.sm_count, o->split > 0 ? QMM_SM90_SPLIT : QMM_SM90_AUTO,
                             o->split, p);
    if (o->path == QMM_PATH_STREAMK) {
        if (o->split > 0) return qmm_fail(QMM_ERR_ARG, "stream-K takes split 0");
        return qmm_plan_sm90(m, n, k, ctx->info.sm_count, QMM_SM90_STREAMK, 0, p);
    }
    if (o->path == QMM_PATH_AUTO && o->policy == QMM_POLICY_DEVICE && should_use_sm90(m, n))
        return qmm_plan_sm90(m, n, k, ctx->info.sm_count, o->split == 1 ? QMM_SM90_SPLIT : QMM_SM90_AUTO,
                             1, p);
    const bool dense = o->path == QMM_PATH_AUTO && o->policy == QMM_POLICY_DEVICE && should_use_dense(m, n);

    const qmm_device_desc *d = &ctx->desc;
    qmm_status st;
    if (o->policy == QMM_POLICY_SEED) {
        qmm_plan_params sp = qmm_plan_seed_params();
        st = qmm_plan_seed(m, n, k, &sp, p);
        if (st != QMM_OK) return st;
        p->config = config_for_m(d, m);
        p->predicted_us = -1;
    } else {
        st = qmm_plan_device(m, n, k, d, p);
        if (st != QMM_OK) return st;
    }

    if (o->path == QMM_PATH_DENSE || dense || (o->path == QMM_PATH_AUTO && p->path == QMM_PATH_DENSE)) {
        p->path = QMM_PATH_DENSE;
        p->split = 1;
        p->k_per_split = (int)k;
        if (o->policy == QMM_POLICY_DEVICE) p->predicted_us = qmm_plan_predict_us(m, n, k, d, p);
        return QMM_OK;
    }
    if (o->path == QMM_PATH_MATVEC || (o->path == QMM_PATH_AUTO && p->path == QMM_PATH_MATVEC)) {
        if (m > matvec_limit_m)
            return qmm_fail(QMM_ERR_ARG, "the matvec path takes M <= %d (M = %lld)", matvec_limit_m,
                            (long long)m);
        p->path = QMM_PATH_MATVEC;
        p->split = 1;
        p->k_per_split = (int)k;
        return QMM_OK;
    }
    if (o->path != QMM_PATH_AUTO) p->config = config_for_m(d, m);
    int split = p->path == QMM_PATH_MATVEC ? 1 : p->split;
    if (o->path == QMM_PATH_TILED || (o->path == QMM_PATH_AUTO && o->split == 1)) split = 1;
    if (o->path == QMM_PATH_SPLITK && o->split > 0) split = o->split;
    if (split < 1) split = 1;
    if (k % ((int64_t)split * QMM_GROUP))
        return qmm_fail(QMM_ERR_ARG, "split = %d does not divide K = %lld into whole groups of 128",
                        split, (long long)k);
    const qmm_tile_config *c = &d->config[p->config];
    p->tile_m = c->tile_m;
    p->tile_n = c->tile_n;
    p->base_blocks = ((m + c->tile_m - 1) / c->tile_m) * ((n + c->tile_n - 1) / c->tile_n);
    if ((n + c->tile_n - 1) / c->tile_n > 65535)
        return qmm_fail(QMM_ERR_SHAPE, "N = %lld needs more than 65535 column tiles", (long long)n);
    p->split = split;
    p->blocks = p->base_blocks * split;
    p->k_per_split = (int)(k / split);
    p->path = split > 1 ? QMM_PATH_SPLITK : QMM_PATH_TILED;
    if (o->policy == QMM_POLICY_DEVICE) p->predicted_us = qmm_plan_predict_us(m, n, k, d, p);
    return QMM_OK;
}

static size_t workspace_for(const qmm_plan *p, int64_t m, int64_t n, int64_t k, qmm_dtype t)
{
    if (p->path == QMM_PATH_DENSE) return dense_workspace_bytes(n, k);
    if (p->path == QMM_PATH_WGMMA || p->path == QMM_PATH_STREAMK) return qmm_sm90_workspace_bytes(p);
    if (p->path != QMM_PATH_SPLITK) return 0;
    return (size_t)p->split * (size_t)m * (size_t)n * (t == QMM_F32 ? 4 : 2);
}

extern "C" qmm_status qmm_cuda_plan(qmm_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                                    const qmm_cuda_options *opt, qmm_plan *out)
{
    if (!ctx || !out) return qmm_fail(QMM_ERR_NULL, "ctx or out is NULL");
    qmm_cuda_options o = opt ? *opt : qmm_cuda_options_default();
    qmm_plan p;
    qmm_status st = make_plan(ctx, m, n, k, &o, &p);
    if (st == QMM_OK) *out = p;
    return st;
}

extern "C" qmm_status qmm_cuda_workspace_size(qmm_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                                              const qmm_cuda_options *opt, size_t *bytes)
{
    if (!ctx || !bytes) return qmm_fail(QMM_ERR_NULL, "ctx or bytes is NULL");
    qmm_cuda_options o = opt ? *opt : qmm_cuda_options_default();
    qmm_plan p;
    qmm_status st = make_plan(ctx, m, n, k, &o, &p);
    if (st != QMM_OK) return st;
    *bytes = workspace_for(&p, m, n, k, o.partial_type);
    return QMM_OK;
}

/* ---- the call ---- */

extern "C" qmm_status qmm_cuda_matmul(qmm_cuda_ctx *ctx, const qmm_bf16 *a_dev, int64_t m,
                                      const qmm_cuda_weight *w, qmm_bf16 *c_dev, void *workspace,
                                      size_t workspace_bytes, const qmm_cuda_options *opt,
                                      qmm_plan *plan_out)
{
    if (!ctx || !a_dev || !w || !c_dev) return qmm_fail(QMM_ERR_NULL, "ctx, a, w or c is NULL");
    if (((uintptr_t)a_dev | (uintptr_t)c_dev) % 16)
        return qmm_fail(QMM_ERR_ALIGN, "A and C must be 16-byte aligned");
    if (w->device != ctx->device)
        return qmm_fail(QMM_ERR_ARG, "weight lives on device %d, context on %d", w->device,
                        ctx->device);
    qmm_cuda_options o = opt ? *opt : qmm_cuda_options_default();
    qmm_plan p;
    qmm_status st = make_plan(ctx, m, w->dev.n, w->dev.k, &o, &p);
    if (st != QMM_OK) return st;
    size_t need = workspace_for(&p, m, w->dev.n, w->dev.k, o.partial_type);
    if (need > 0) {
        if (!workspace || workspace_bytes < need)
            return qmm_fail(QMM_ERR_WORKSPACE, "%s (split %d) needs %zu workspace bytes, got %zu%s",
                            qmm_path_name(p.path), p.split, need, workspace ? workspace_bytes : (size_t)0,
                            workspace ? "" : " (NULL)");
        if ((uintptr_t)workspace % 16)
            return qmm_fail(QMM_ERR_ALIGN, "workspace must be 16-byte aligned");
    }

    const __nv_bfloat16 *a = (const __nv_bfloat16 *)a_dev;
    __nv_bfloat16 *c = (__nv_bfloat16 *)c_dev;
    cudaError_t e = cudaSetDevice(ctx->device); /* another context may have made its device current */
    if (e != cudaSuccess)
        return qmm_fail(QMM_ERR_CUDA, "cudaSetDevice(%d): %s", ctx->device, cudaGetErrorString(e));
    if (p.path == QMM_PATH_DENSE) {
        const char *why = run_dense(ctx->cublas, w->dev, a, (int)m, c, workspace, ctx->stream);
        if (why) return qmm_fail(QMM_ERR_CUDA, "dense path: %s", why);
        e = cudaGetLastError();
    } else if (p.path == QMM_PATH_WGMMA || p.path == QMM_PATH_STREAMK) {
        Sm90Schedule sched = {p.path == QMM_PATH_STREAMK ? 0 : p.split, (int)p.blocks};
        e = launch_sm90(p.config, sched, w->dev, a, (int)m, c, workspace, ctx->counters, true,
                        ctx->stream);
    } else if (p.path == QMM_PATH_MATVEC) {
        e = launch_matvec(w->dev, a, (int)m, c, ctx->info.sm_count, ctx->stream);
    } else {
        int stages = o.stages ? o.stages : default_stages[p.config];
        if (p.split == 1) {
            e = launch_tiled(p.config, stages, w->dev, a, (int)m, c, QMM_BF16, 1, ctx->stream);
        } else {
            e = launch_tiled(p.config, stages, w->dev, a, (int)m, workspace, o.partial_type,
                             p.split, ctx->stream);
            if (e == cudaSuccess)
                e = launch_splitk_reduce(workspace, o.partial_type, p.split, m * w->dev.n, c,
                                         ctx->stream);
        }
    }
    if (e != cudaSuccess)
        return qmm_fail(QMM_ERR_CUDA, "kernel launch failed: %s", cudaGetErrorString(e));
    if (plan_out) *plan_out = p;
    return QMM_OK;
}
