/* qmm's CUDA engine against MLX itself: the checkpoints of tests/mlx/make_reference.py, loaded
 * unchanged, must give MLX's last-token logits (relative error <= 1e-2 against MLX in fp32) and
 * its 16 greedy tokens. Every model runs on the GPU, one case each (--filter g64): groups of 128,
 * groups of 64 (mlx_lm.convert's default), the mixed recipe with a layer at 32, and qmm's own
 * g64 conversion. Skips without a GPU; needs QMM_MLX_DIR (ctest sets it; on a machine without
 * the MLX wheels, copy <build>/mlx from one that has them). */
#include "mlx_ref.h"

static const char *g_dir;

static qmm_status cuda_run(void *session, const int32_t *ids, int64_t n, float *logits,
                           int32_t *tokens, int64_t steps)
{
    qmm_llm_cuda_session *s = session;
    qmm_status st = qmm_llm_cuda_reset(s);
    if (!st) st = qmm_llm_cuda_prefill(s, ids, n, logits, NULL);
    if (!st) st = qmm_llm_cuda_reset(s);
    if (!st) st = qmm_llm_cuda_generate(s, ids, n, steps, tokens, NULL);
    return st;
}

static void model_matches_mlx_on_cuda(const char *name)
{
    int i = 0;
    while (i < MLX_MODEL_COUNT && strcmp(mlx_models[i].name, name)) i++;
    CHECKF(i < MLX_MODEL_COUNT, "no model %s in mlx_ref.h", name);
    if (i == MLX_MODEL_COUNT) return;
    qmm_llm_model *m = mlx_load(g_dir, i);
    if (!m) return;
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    qmm_llm_cuda_session *s = NULL;
    qmm_status st = qmm_llm_cuda_session_create(m, 96, &o, &s);
    CHECKF(st == QMM_OK, "%s: CUDA session: %s", mlx_models[i].name, qmm_last_error());
    if (!st) {
        double e = mlx_compare(g_dir, mlx_models[i].name, qmm_llm_model_config(m)->vocab_size,
                               cuda_run, s);
        printf("    %-9s on CUDA: worst logits error %.2e\n", mlx_models[i].name, e);
    }
    qmm_llm_cuda_session_destroy(s);
    qmm_llm_model_destroy(m);
}

static void g64(void) { model_matches_mlx_on_cuda("g64"); }
static void g128(void) { model_matches_mlx_on_cuda("g128"); }
static void g64_mixed(void) { model_matches_mlx_on_cuda("g64-mixed"); }
static void qmm_g64(void) { model_matches_mlx_on_cuda("qmm-g64"); }

int main(int argc, char **argv)
{
    test_require_gpu("the MLX reference is not run on CUDA here");
    g_dir = mlx_dir();
    _Static_assert(MLX_MODEL_COUNT == 4, "one case a model");
    TEST_TABLE(cases, g64, g128, g64_mixed, qmm_g64);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
