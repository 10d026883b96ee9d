/* generation_config.json (and config.json's eos_token_id): sampling defaults and stop tokens. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "llm/llm_io.h"

static int add_eos(qmm_generation_config *g, const cJSON *id)
{
    if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > INT32_MAX ||
        id->valuedouble != floor(id->valuedouble))
        return 0;
    if (g->eos_count < QMM_MAX_EOS) g->eos[g->eos_count++] = (int32_t)id->valuedouble;
    return 1;
}

static qmm_status eos_of(const cJSON *root, const char *path, qmm_generation_config *g)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id"), *e;
    int ok = 1;
    if (!v || cJSON_IsNull(v)) return QMM_OK;
    if (cJSON_IsArray(v)) cJSON_ArrayForEach(e, v) ok &= add_eos(g, e);
    else ok = add_eos(g, v);
    return ok ? QMM_OK : qmm_fail(QMM_ERR_FORMAT, "%s: eos_token_id must be an id or a list of ids",
                                  path);
}

/* Parse dir/name; *root NULL (and QMM_OK) when the file does not exist. */
static qmm_status parse(const char *dir, const char *name, char *path, cJSON **root)
{
    *root = NULL;
    qmm_status st = llm_path_join(dir, name, path, LLM_PATH_MAX);
    if (st) return st;
    char *text = NULL;
    size_t len = 0;
    st = llm_read_file(path, (size_t)1 << 20, &text, &len);
    if (st == QMM_ERR_NOT_FOUND) {
        qmm_clear_error();
        return QMM_OK;
    }
    if (st) return st;
    *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!*root || !cJSON_IsObject(*root)) {
        cJSON_Delete(*root);
        *root = NULL;
        return qmm_fail(QMM_ERR_FORMAT, "%s: malformed JSON (want an object)", path);
    }
    return QMM_OK;
}

static qmm_status number(const cJSON *root, const char *key, const char *path, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return QMM_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return qmm_fail(QMM_ERR_FORMAT, "%s: %s must be a number", path, key);
    *out = v->valuedouble;
    return QMM_OK;
}

qmm_status qmm_generation_config_load(const char *dir, qmm_generation_config *out)
{
    if (!dir || !out) return qmm_fail(QMM_ERR_NULL, "qmm_generation_config_load: NULL argument");
    qmm_generation_config g;
    memset(&g, 0, sizeof g);
    g.sampling.temperature = 0; /* greedy unless the model's file asks to sample */
    g.sampling.top_p = 1;
    char path[LLM_PATH_MAX];
    cJSON *root = NULL;
    qmm_status st = parse(dir, "generation_config.json", path, &root);
    if (!st && root) {
        /* HF's defaults when sampling: temperature 1, top-k 50, top-p 1, min-p off */
        double t = 1, k = 50, p = 1, mp = 0;
        st = number(root, "temperature", path, &t);
        if (!st) st = number(root, "top_k", path, &k);
        if (!st) st = number(root, "top_p", path, &p);
        if (!st) st = number(root, "min_p", path, &mp);
        if (!st && (t < 0 || k < 0 || k > INT32_MAX || k != floor(k) || !(p > 0 && p <= 1) ||
                    mp < 0 || mp > 1))
            st = qmm_fail(QMM_ERR_FORMAT, "%s: temperature %g, top_k %g, top_p %g, min_p %g out "
                          "of range", path, t, k, p, mp);
        if (!st && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "do_sample"))) {
            g.sampling.temperature = t;
            g.sampling.top_k = (int64_t)k;
            g.sampling.top_p = p;
            g.sampling.min_p = mp;
        }
        if (!st) st = eos_of(root, path, &g);
    }
    cJSON_Delete(root);
    if (!st && g.eos_count == 0) {
        st = parse(dir, "config.json", path, &root);
        if (!st && root) st = eos_of(root, path, &g);
        cJSON_Delete(root);
    }
    if (st) return st;
    *out = g;
    qmm_clear_error();
    return QMM_OK;
}
