/* Shared by test_mlx_reference.c (CPU) and gpu_mlx_reference.c (CUDA): the data that
 * tests/mlx/make_reference.py wrote with MLX, and the comparison of a qmm run against it.
 * The directory comes from QMM_MLX_DIR (ctest sets it to <build>/mlx). */
#ifndef QMM_TEST_MLX_REF_H
#define QMM_TEST_MLX_REF_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/safetensors.h"

#define MLX_STEPS 16      /* greedy tokens per prompt */
#define MLX_PROMPTS 3
#define MLX_MAX_REL 1e-2  /* last-token logits, relative Frobenius error, against MLX in fp32 */

/* The model directories and the group size of most of their layers. */
static const struct mlx_model {
    const char *name;
    int group;
} mlx_models[] = {{"g64", 64}, {"g128", 128}, {"g64-mixed", 64}, {"qmm-g64", 64}};
#define MLX_MODEL_COUNT 4 /* qmm-g64: written by qmm quantize-checkpoint, read by both */

/* The data directory, or NULL after skipping (or, in CI, failing) the whole program. */
static const char *mlx_dir(void)
{
    const char *dir = getenv("QMM_MLX_DIR");
    char ok[1024];
    snprintf(ok, sizeof ok, "%s/OK", dir ? dir : "");
    FILE *f = dir ? fopen(ok, "r") : NULL;
    if (f) {
        fclose(f);
        return dir;
    }
    char msg[1200];
    snprintf(msg, sizeof msg, "no MLX reference data (%s%s): tests/mlx/make_reference.py did not "
             "run; it needs the MLX wheels of tests/mlx/requirements.txt",
             dir ? "nothing complete in " : "QMM_MLX_DIR is not set", dir ? dir : "");
    if (getenv("CI")) {
        printf("FAIL: %s (CI must not skip this test)\n0 passed, 1 failed\n", msg);
        exit(1);
    }
    test_skip_all(msg);
    return NULL;
}

/* Model i of the data directory, or NULL (a failed case) when it does not load. */
static qmm_llm_model *mlx_load(const char *dir, int i)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, mlx_models[i].name);
    qmm_llm_model *m = NULL;
    qmm_status st = qmm_llm_model_load(path, &m);
    CHECKF(st == QMM_OK, "loading %s: %s", path, qmm_last_error());
    return st == QMM_OK ? m : NULL;
}

/* A tensor of the reference file with the given dtype and element count. */
static const void *mlx_tensor(const st_set *s, const char *name, st_dtype t, int64_t count)
{
    const st_tensor *x = st_find(s, name);
    int64_t n = 1;
    if (x)
        for (int i = 0; i < x->ndim; i++) n *= x->shape[i];
    if (!x || x->dtype != t || (count >= 0 && n != count)) {
        test_fail(__FILE__, __LINE__, "reference tensor '%s' missing or not %s [%lld]", name,
                  st_dtype_name(t), (long long)count);
        return NULL;
    }
    return x->data;
}

static int64_t mlx_tensor_len(const st_set *s, const char *name)
{
    const st_tensor *x = st_find(s, name);
    return x && x->ndim == 1 ? x->shape[0] : -1;
}

static double mlx_rel_err(const float *got, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        float r;
        memcpy(&r, ref + i, sizeof r); /* the mapping may not align f32 */
        if (!isfinite(got[i])) return INFINITY;
        num += ((double)got[i] - r) * ((double)got[i] - r);
        den += (double)r * r;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* How a backend runs one prompt: logits of its last token, then `steps` greedy tokens. */
typedef qmm_status (*mlx_run_fn)(void *session, const int32_t *ids, int64_t n, float *logits,
                                 int32_t *tokens, int64_t steps);

/* Every prompt of model `name` through run(): logits within MLX_MAX_REL of MLX fp32 and the same
 * greedy tokens. Prints what it reaches (also against MLX's own bf16 run). Returns the worst
 * relative error, or -1 when the reference could not be read. */
static double mlx_compare(const char *dir, const char *name, int64_t vocab, mlx_run_fn run,
                          void *session)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.ref.safetensors", dir, name);
    st_set ref;
    qmm_status st = st_open(path, &ref);
    CHECKF(st == QMM_OK, "%s: %s", path, qmm_last_error());
    if (st) return -1;
    float *logits = malloc((size_t)vocab * sizeof *logits);
    double worst = 0;
    for (int p = 0; p < MLX_PROMPTS; p++) {
        char key[64];
        snprintf(key, sizeof key, "prompt.%d", p);
        int64_t n = mlx_tensor_len(&ref, key);
        const int32_t *ids = mlx_tensor(&ref, key, ST_I32, n);
        snprintf(key, sizeof key, "tokens.%d", p);
        const int32_t *want = mlx_tensor(&ref, key, ST_I32, MLX_STEPS);
        snprintf(key, sizeof key, "logits.%d", p);
        const float *l32 = mlx_tensor(&ref, key, ST_F32, vocab);
        snprintf(key, sizeof key, "logits_bf16.%d", p);
        const float *l16 = mlx_tensor(&ref, key, ST_F32, vocab);
        if (!ids || !want || !l32 || !l16) break;
        int32_t idv[64], wantv[MLX_STEPS], got[MLX_STEPS];
        if (n < 1 || n > 64) {
            test_fail(__FILE__, __LINE__, "prompt %d has %lld tokens", p, (long long)n);
            break;
        }
        memcpy(idv, ids, (size_t)n * 4);
        memcpy(wantv, want, sizeof wantv);
        for (int64_t i = 0; i < vocab; i++) logits[i] = NAN; /* poisoned */
        for (int i = 0; i < MLX_STEPS; i++) got[i] = -1;
        st = run(session, idv, n, logits, got, MLX_STEPS);
        CHECKF(st == QMM_OK, "%s prompt %d: %s", name, p, qmm_last_error());
        if (st) break;
        double e32 = mlx_rel_err(logits, l32, vocab), e16 = mlx_rel_err(logits, l16, vocab);
        int same = 0;
        while (same < MLX_STEPS && got[same] == wantv[same]) same++;
        printf("    %-9s prompt %d (%2lld tokens): logits rel. error %.2e vs MLX fp32, %.2e vs "
               "MLX bf16; greedy tokens equal for %d/%d steps\n", name, p, (long long)n, e32,
               e16, same, MLX_STEPS);
        CHECKF(e32 <= MLX_MAX_REL, "%s prompt %d: logits rel. error %g > %g", name, p, e32,
               MLX_MAX_REL);
        CHECKF(same == MLX_STEPS, "%s prompt %d: token %d is %d, MLX says %d", name, p, same,
               same < MLX_STEPS ? got[same] : -1, same < MLX_STEPS ? wantv[same] : -1);
        if (!(e32 <= worst)) worst = e32;
    }
    free(logits);
    st_close(&ref);
    return worst;
}

#endif
