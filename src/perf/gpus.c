/* GPU and kernel presets of the wave models: the figures the document uses, the H200's
 * datasheet, our measured H200 ceilings (DESIGN.md §8), and first guesses for our kernels.
 * They change predictions, never results. */
#include <string.h>

#include "internal.h"

/* The launch overhead is not in the document; 2 µs is the order of an eager launch-to-launch gap,
 * a placeholder until the benchmarks fit it. */
#define LAUNCH_US_GUESS 2.0

static const qmm_gpu_caps gpu_presets[] = {
    {"a100", 108, 312.0, 1.555, LAUNCH_US_GUESS},          /* A100 SXM4 40GB (document) */
    {"h100", 132, 989.5, 3.35, LAUNCH_US_GUESS},           /* H100 SXM (document) */
    {"h200", 132, 989.5, 4.8, LAUNCH_US_GUESS},            /* H200 datasheet */
    {"h200-measured", 132, 720.0, 4.2, LAUNCH_US_GUESS},   /* H200 measured ceilings */
};
#define GPU_PRESETS ((int)(sizeof gpu_presets / sizeof gpu_presets[0]))

qmm_status qmm_model_gpu_preset(const char *name, qmm_gpu_caps *out)
{
    if (!name || !out) return qmm_fail(QMM_ERR_NULL, "gpu_preset: name or out is NULL");
    for (int i = 0; i < GPU_PRESETS; i++)
        if (!strcmp(name, gpu_presets[i].name)) {
            *out = gpu_presets[i];
            qmm_clear_error();
            return QMM_OK;
        }
    return qmm_fail(QMM_ERR_NOT_FOUND,
                    "gpu_preset: no GPU '%s' (a100, h100, h200, h200-measured)", name);
}

const char *qmm_model_gpu_preset_name(int i)
{
    return i >= 0 && i < GPU_PRESETS ? gpu_presets[i].name : NULL;
}

static const struct {
    const char *name;
    qmm_model_kernel k;
} kernel_presets[] = {
    /* The document's bf16 GEMM: ideal compute, fp32 partials (its 8 bytes per element). */
    {"document", {128, 128, 64, 1, 1.0, 2.0, 2.0, 2.0, QMM_F32, 0.0}},
    /* Our W4A16 tiled kernel, first guess: bf16 partials as the split-K path writes them. */
    {"w4", {64, 64, 128, 1, 0.5, 2.0, 0.53125, 2.0, QMM_BF16, 0.5}},
};

qmm_status qmm_model_kernel_preset(const char *name, qmm_model_kernel *out)
{
    if (!name || !out) return qmm_fail(QMM_ERR_NULL, "kernel_preset: name or out is NULL");
    for (size_t i = 0; i < sizeof kernel_presets / sizeof kernel_presets[0]; i++)
        if (!strcmp(name, kernel_presets[i].name)) {
            *out = kernel_presets[i].k;
            qmm_clear_error();
            return QMM_OK;
        }
    return qmm_fail(QMM_ERR_NOT_FOUND, "kernel_preset: no kernel '%s' (document, w4)", name);
}
