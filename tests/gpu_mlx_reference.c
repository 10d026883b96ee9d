/* qmm's CUDA engine against MLX itself: the checkpoints of tests/mlx/make_reference.py, loaded
 * unchanged, must give MLX's last-token logits (relative error <= 1e-2 against MLX in fp32) and
 * its 16 greedy tokens. Groups of 128 must run; a model with other group sizes must either run
 * and match, or be refused cleanly (QMM_ERR_UNSUPPORTED naming a tensor) while the CUDA kernels
 * take groups of 128 only. Skips without a GPU; needs QMM_MLX_DIR (ctest sets it; on a machine
 * without the MLX wheels, copy <build>/mlx from one that has them). */
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

static void models_match_mlx_on_cuda(void)
{
    int ran128 = 0;
    for (int i = 0; i < MLX_MODEL_COUNT; i++) {
        qmm_llm_model *m = mlx_load(g_dir, i);
        if (!m) continue;
        qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
        qmm_llm_cuda_session *s = NULL;
        qmm_status st = qmm_llm_cuda_session_create(m, 96, &o, &s);
        int all128 = !strcmp(mlx_models[i].name, "g128");
        if (st == QMM_ERR_UNSUPPORTED && !all128) {
            printf("    %-9s refused by the CUDA engine: %s\n", mlx_models[i].name,
                   qmm_last_error());
            CHECK(strstr(qmm_last_error(), "groups of") != NULL);
        } else {
            CHECKF(st == QMM_OK, "%s: CUDA session: %s", mlx_models[i].name, qmm_last_error());
            if (!st) {
                double e = mlx_compare(g_dir, mlx_models[i].name,
                                       qmm_llm_model_config(m)->vocab_size, cuda_run, s);
                printf("    %-9s on CUDA: worst logits error %.2e\n", mlx_models[i].name, e);
                ran128 += all128;
            }
        }
        qmm_llm_cuda_session_destroy(s);
        qmm_llm_model_destroy(m);
    }
    CHECKF(ran128 == 1, "the g128 model did not run on CUDA");
}

int main(int argc, char **argv)
{
    test_require_gpu("the MLX reference is not run on CUDA here");
    g_dir = mlx_dir();
    TEST_TABLE(cases, models_match_mlx_on_cuda);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
