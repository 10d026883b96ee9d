/* The CUDA entry points of a build made without nvcc: each says so, none does anything. */
#include <stdio.h>

#include "internal.h"

#define NO_CUDA qmm_fail(QMM_ERR_UNSUPPORTED, "this qmm was built without CUDA (no nvcc at build time)")

int qmm_cuda_built(void) { return 0; }

qmm_status qmm_cuda_device_count(int *count, char *msg, size_t msg_len)
{
    if (!count) return qmm_fail(QMM_ERR_NULL, "count is NULL");
    *count = 0;
    if (msg && msg_len) snprintf(msg, msg_len, "this qmm was built without CUDA (no nvcc at build time)");
    return QMM_OK;
}

qmm_status qmm_cuda_create(int device, void *stream, qmm_cuda_ctx **out)
{
    (void)device, (void)stream;
    if (out) *out = NULL;
    return NO_CUDA;
}
void qmm_cuda_destroy(qmm_cuda_ctx *ctx) { (void)ctx; }
qmm_status qmm_cuda_set_stream(qmm_cuda_ctx *ctx, void *stream) { (void)ctx, (void)stream; return NO_CUDA; }
qmm_status qmm_cuda_info(const qmm_cuda_ctx *ctx, qmm_gpu_info *out) { (void)ctx, (void)out; return NO_CUDA; }
qmm_status qmm_cuda_weight_upload(qmm_cuda_ctx *ctx, const qmm_w4 *w, qmm_cuda_weight **out)
{
    (void)ctx, (void)w;
    if (out) *out = NULL;
    return NO_CUDA;
}
void qmm_cuda_weight_free(qmm_cuda_weight *w) { (void)w; }
qmm_status qmm_cuda_dequantize_rows(qmm_cuda_ctx *ctx, const qmm_cuda_weight *w,
                                    const int32_t *rows_dev, int64_t count, float *out_dev,
                                    int32_t *err_dev)
{
    (void)ctx, (void)w, (void)rows_dev, (void)count, (void)out_dev, (void)err_dev;
    return NO_CUDA;
}
int64_t qmm_cuda_weight_n(const qmm_cuda_weight *w) { (void)w; return 0; }
int64_t qmm_cuda_weight_k(const qmm_cuda_weight *w) { (void)w; return 0; }
size_t qmm_cuda_weight_bytes(const qmm_cuda_weight *w) { (void)w; return 0; }

qmm_status qmm_cuda_plan(qmm_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                         const qmm_cuda_options *opt, qmm_plan *out)
{
    (void)ctx, (void)m, (void)n, (void)k, (void)opt, (void)out;
    return NO_CUDA;
}
qmm_status qmm_cuda_device_desc(const qmm_cuda_ctx *ctx, qmm_device_desc *out)
{
    (void)ctx, (void)out;
    return NO_CUDA;
}
qmm_status qmm_cuda_workspace_size(qmm_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                                   const qmm_cuda_options *opt, size_t *bytes)
{
    (void)ctx, (void)m, (void)n, (void)k, (void)opt, (void)bytes;
    return NO_CUDA;
}
qmm_status qmm_cuda_matmul(qmm_cuda_ctx *ctx, const qmm_bf16 *a_dev, int64_t m,
                           const qmm_cuda_weight *w, qmm_bf16 *c_dev, void *workspace,
                           size_t workspace_bytes, const qmm_cuda_options *opt,
                           qmm_plan *plan_out)
{
    (void)ctx, (void)a_dev, (void)m, (void)w, (void)c_dev, (void)workspace, (void)workspace_bytes,
        (void)opt, (void)plan_out;
    return NO_CUDA;
}
qmm_status qmm_cuda_weight_wrap(qmm_cuda_ctx *ctx, int64_t n, int64_t k, void *packed_dev,
                                void *sb_dev, qmm_cuda_weight **out)
{
    (void)ctx, (void)n, (void)k, (void)packed_dev, (void)sb_dev;
    if (out) *out = NULL;
    return NO_CUDA;
}
qmm_status qmm_cuda_weight_wrap_group(qmm_cuda_ctx *ctx, int64_t n, int64_t k, int group,
                                      void *packed_dev, void *sb_dev, qmm_cuda_weight **out)
{
    (void)ctx, (void)n, (void)k, (void)group, (void)packed_dev, (void)sb_dev;
    if (out) *out = NULL;
    return NO_CUDA;
}
int qmm_cuda_weight_group(const qmm_cuda_weight *w)
{
    (void)w;
    return 0;
}
