/*
 * The C entry points of the CUDA backend: context, weight upload, planning and dispatch.
 * Pipeline of every call (as in BLIS): check pointers -> qmm_plan_call (plan_call.c: shape,
 * options, path, configuration, split, stages, workspace) -> check the workspace ->
 * switch (plan.path). Nothing is launched when a check fails, nothing is allocated per call.
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
    MatvecScratch mv;      /* what the matvec's shape choice needs */
};

struct qmm_cuda_weight {
    DevWeight dev;
    size_t bytes;
    int device;
    int owns; /* 0 for qmm_cuda_weight_wrap: the caller's buffers */
};

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
    QMM_CUDA_TRY(cudaSetDevice(device));
    cudaDeviceProp prop;
    QMM_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    if (prop.major != 9) /* sm_90a code does not run on other architectures */
        return qmm_fail(QMM_ERR_UNSUPPORTED, "%s is sm_%d%d; this build targets sm_90", prop.name,
                        prop.major, prop.minor);
    QMM_CUDA_TRY(tiled_init());

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

    /* the shipped tuning table of this family, corrected below by this GPU's occupancy */
    qmm_device_desc *d = &ctx->desc;
    qmm_status st = qmm_tune_desc(prop.major, prop.minor, in->sm_count, d);
    if (st == QMM_OK) qmm_tune_for_gpu(d, prop.name);
    if (st == QMM_OK && d->config_count != TILE_CONFIGS) /* the table and kernels: one list */
        st = qmm_fail(QMM_ERR_UNSUPPORTED, "tuning table %s has %d tiled rows, the kernels %d",
                      d->family, d->config_count, TILE_CONFIGS);
    if (st != QMM_OK) {
        free(ctx);
        return st;
    }
    cublasStatus_t bs = cublasCreate(&ctx->cublas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        free(ctx);
        /* under memory pressure cuBLAS reports ALLOC_FAILED, or NOT_INITIALIZED when its own
         * context allocations fail: both are out of memory when little is left */
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        cudaGetLastError();
        if (bs == CUBLAS_STATUS_ALLOC_FAILED ||
            (bs == CUBLAS_STATUS_NOT_INITIALIZED && free_b < ((size_t)256 << 20)))
            return qmm_fail(QMM_ERR_NOMEM, "cublasCreate: out of device memory (%zu MiB free)",
                            free_b >> 20);
        return qmm_fail(QMM_ERR_CUDA, "cublasCreate failed (cuBLAS status %d)", (int)bs);
    }
    cudaError_t ce = sm90_init();
    size_t counter_bytes = (size_t)QMM_SM90_MAX_COUNTED_TILES * sizeof(uint32_t);
    if (ce == cudaSuccess) ce = cudaMalloc((void **)&ctx->counters, counter_bytes);
    if (ce == cudaSuccess) ce = cudaMemset(ctx->counters, 0, counter_bytes);
    if (ce == cudaSuccess) ce = matvec_init();
    ctx->mv = {};
    ctx->mv.sm_count = in->sm_count;
    if (ce == cudaSuccess) matvec_capacity(ctx->mv);
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
        cudaError_t e = tiled_occupancy(c, d->config[c].stages, &bps);
        if (e != cudaSuccess || bps < 1) {
                cudaFree(ctx->counters);
            cublasDestroy(ctx->cublas);
            free(ctx);
            return qmm_fail(QMM_ERR_CUDA, "occupancy query for tile configuration %d failed: %s", c,
                            cudaGetErrorString(e));
        }
        in->tiled_blocks_per_sm[c] = bps;
        d->config[c].blocks_per_sm = bps;
    }
    /* this GPU's GPCs decide how many clusters fit; the table's values stay where it cannot say,
     * and its -1 stays everywhere (a row the table has not measured on this GPU, or without
     * clusters) */
    for (int c = 0; d->wgmma_min_m > 0 && c < QMM_SM90_CONFIG_COUNT; c++)
        for (int s = 2; s <= QMM_SM90_MAX_CLUSTER; s++) {
            int ctas = 0;
            if (d->wgmma_cluster_ctas[c][s] < 0) continue;
            if (sm90_cluster_ctas(c, s, &ctas) == cudaSuccess) d->wgmma_cluster_ctas[c][s] = ctas > 0 ? ctas : -1;
            else cudaGetLastError();
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
    if (w->n > (1 << 30) || w->k > (1 << 30))
        return qmm_fail(QMM_ERR_SHAPE, "N = %lld, K = %lld: the CUDA kernels take up to 2^30",
                        (long long)w->n, (long long)w->k);
    size_t packed_bytes = 0, sb_bytes = 0; /* K % 128 == 0 is checked here */
    st = qmm_w4_device_image_bytes_group(w->n, w->k, w->group, &packed_bytes, &sb_bytes);
    if (st != QMM_OK) return st;
    int64_t n_pad = qmm_w4_device_rows(w->n);
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
    dw->dev.group = w->group;
    dw->bytes = packed_bytes + sb_bytes;
    dw->device = ctx->device;
    dw->owns = 1;
    *out = dw;
    return QMM_OK;
}

extern "C" qmm_status qmm_cuda_weight_wrap_group(qmm_cuda_ctx *ctx, int64_t n, int64_t k,
                                                 int group, void *packed_dev, void *sb_dev,
                                                 qmm_cuda_weight **out)
{
    if (!ctx || !packed_dev || !sb_dev || !out)
        return qmm_fail(QMM_ERR_NULL, "ctx, packed, sb or out is NULL");
    *out = NULL;
    size_t pb, sbb;
    qmm_status st = qmm_w4_device_image_bytes_group(n, k, group, &pb, &sbb);
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
    dw->dev.group = group;
    dw->dev.packed = (uint32_t *)packed_dev;
    dw->dev.sb = (uint32_t *)sb_dev;
    dw->bytes = pb + sbb;
    dw->device = ctx->device;
    dw->owns = 0;
    *out = dw;
    return QMM_OK;
}

extern "C" qmm_status qmm_cuda_weight_wrap(qmm_cuda_ctx *ctx, int64_t n, int64_t k,
                                           void *packed_dev, void *sb_dev, qmm_cuda_weight **out)
{
    return qmm_cuda_weight_wrap_group(ctx, n, k, QMM_GROUP, packed_dev, sb_dev, out);
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
const DevWeight &qmm::weight_dev(const qmm_cuda_weight *w) { return w->dev; }
const MatvecScratch &qmm::matvec_scratch(const qmm_cuda_ctx *ctx) { return ctx->mv; }

extern "C" qmm_status qmm_cuda_dequantize_rows(qmm_cuda_ctx *ctx, const qmm_cuda_weight *w,
                                               const int32_t *rows_dev, int64_t count,
                                               float *out_dev, int32_t *err_dev)
{
    if (!ctx || !w || !rows_dev || !out_dev)
        return qmm_fail(QMM_ERR_NULL, "ctx, w, rows or out is NULL");
    if (count < 1 || count > 65535)
        return qmm_fail(QMM_ERR_ARG, "count = %lld: need 1..65535 rows", (long long)count);
    if (w->device != ctx->device)
        return qmm_fail(QMM_ERR_ARG, "weight lives on device %d, context on %d", w->device,
                        ctx->device);
    QMM_CUDA_TRY(cudaSetDevice(ctx->device));
    QMM_CUDA_TRY(launch_dequant_rows(w->dev, rows_dev, NULL, (int)count, out_dev, err_dev, ctx->stream));
    return QMM_OK;
}

extern "C" int64_t qmm_cuda_weight_n(const qmm_cuda_weight *w) { return w ? w->dev.n : 0; }
extern "C" int64_t qmm_cuda_weight_k(const qmm_cuda_weight *w) { return w ? w->dev.k : 0; }
extern "C" size_t qmm_cuda_weight_bytes(const qmm_cuda_weight *w) { return w ? w->bytes : 0; }
extern "C" int qmm_cuda_weight_group(const qmm_cuda_weight *w) { return w ? w->dev.group : 0; }

/* ---- plan, workspace: qmm_plan_call (plan_call.c) on this context's description ---- */

extern "C" qmm_status qmm_cuda_device_desc(const qmm_cuda_ctx *ctx, qmm_device_desc *out)
{
    if (!ctx || !out) return qmm_fail(QMM_ERR_NULL, "ctx or out is NULL");
    *out = ctx->desc;
    return QMM_OK;
}

extern "C" qmm_device_desc *qmm_cuda_desc_for_bench(qmm_cuda_ctx *ctx)
{
    return ctx ? &ctx->desc : NULL;
}

extern "C" qmm_status qmm_cuda_plan(qmm_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                                    const qmm_cuda_options *opt, qmm_plan *out)
{
    if (!ctx || !out) return qmm_fail(QMM_ERR_NULL, "ctx or out is NULL");
    return qmm_plan_call(&ctx->desc, m, n, k, opt, out);
}

extern "C" qmm_status qmm_cuda_workspace_size(qmm_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                                              const qmm_cuda_options *opt, size_t *bytes)
{
    if (!ctx || !bytes) return qmm_fail(QMM_ERR_NULL, "ctx or bytes is NULL");
    qmm_plan p; /* every group size plans alike: group 0 (any) is any weight's plan */
    qmm_status st = qmm_plan_call(&ctx->desc, m, n, k, opt, &p);
    if (st != QMM_OK) return st;
    *bytes = p.workspace_bytes;
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
    /* plan for this weight's group (the options may leave it at 0, or must agree) */
    qmm_cuda_options o = opt ? *opt : qmm_cuda_options_default();
    if (o.group != 0 && o.group != w->dev.group)
        return qmm_fail(QMM_ERR_ARG, "options.group = %d, but the weight has groups of %d", o.group,
                        w->dev.group);
    o.group = w->dev.group;
    qmm_plan p;
    qmm_status st = qmm_plan_call(&ctx->desc, m, w->dev.n, w->dev.k, &o, &p);
    if (st != QMM_OK) return st;
    if (p.workspace_bytes > 0) {
        if (!workspace || workspace_bytes < p.workspace_bytes)
            return qmm_fail(QMM_ERR_WORKSPACE, "%s (split %d) needs %zu workspace bytes, got %zu%s",
                            qmm_path_name(p.path), p.split, p.workspace_bytes,
                            workspace ? workspace_bytes : (size_t)0, workspace ? "" : " (NULL)");
        if ((uintptr_t)workspace % 16)
            return qmm_fail(QMM_ERR_ALIGN, "workspace must be 16-byte aligned");
    }
    const qmm_dtype partials = o.partial_type;

    const __nv_bfloat16 *a = (const __nv_bfloat16 *)a_dev;
    __nv_bfloat16 *c = (__nv_bfloat16 *)c_dev;
    cudaError_t e = cudaSetDevice(ctx->device); /* another context may have made its device current */
    if (e != cudaSuccess)
        return qmm_fail(QMM_ERR_CUDA, "cudaSetDevice(%d): %s", ctx->device, cudaGetErrorString(e));
    switch (p.path) {
    case QMM_PATH_DENSE: {
        const char *why = run_dense(ctx->cublas, w->dev, a, (int)m, c, workspace, ctx->stream);
        if (why) return qmm_fail(QMM_ERR_CUDA, "dense path: %s", why);
        e = cudaGetLastError();
        break;
    }
    case QMM_PATH_WGMMA:
    case QMM_PATH_STREAMK: {
        Sm90Schedule sched = {p.path == QMM_PATH_STREAMK ? 0 : p.split, (int)p.blocks, ctx->mv.sm_count,
                              p.rest_tiles, p.rest_split};
        e = launch_sm90(p.config, sched, w->dev, a, (int)m, c, workspace, ctx->counters, true,
                        ctx->stream);
        break;
    }
    case QMM_PATH_MATVEC:
        e = launch_matvec(w->dev, a, (int)m, c, ctx->mv, ctx->stream);
        break;
    case QMM_PATH_TILED:
        e = launch_tiled(p.config, p.stages, w->dev, a, (int)m, c, QMM_BF16, 1, ctx->stream);
        break;
    case QMM_PATH_SPLITK:
        e = launch_tiled(p.config, p.stages, w->dev, a, (int)m, workspace, partials, p.split,
                         ctx->stream);
        if (e == cudaSuccess)
            e = launch_splitk_reduce(workspace, partials, p.split, m * w->dev.n, c, ctx->stream);
        break;
    default: /* the planner returns only the paths above */
        return qmm_fail(QMM_ERR_UNSUPPORTED, "no kernel runs path %s", qmm_path_name(p.path));
    }
    if (e != cudaSuccess)
        return qmm_fail(QMM_ERR_CUDA, "kernel launch failed: %s", cudaGetErrorString(e));
    if (plan_out) *plan_out = p;
    return QMM_OK;
}
