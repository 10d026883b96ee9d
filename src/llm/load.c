/* Loading an MLX 4-bit checkpoint: every tensor checked against the config (group sizes from
 * config.json, per layer where it says so), W4 views into the mapping (no copy unless a tensor
 * is misaligned for its element type). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "llm/model.h"
#include "llm/quant_config.h"

/* Find name with the wanted dtype and 1- or 2-D shape; why says where the shape comes from. */
static qmm_status expect_tensor(const qmm_llm_model *m, const char *name, st_dtype dtype,
                                int ndim, int64_t d0, int64_t d1, const char *why,
                                const st_tensor **out)
{
    const st_tensor *t = st_find(&m->set, name);
    if (!t) return qmm_fail(QMM_ERR_NOT_FOUND, "tensor '%s' is missing from the checkpoint", name);
    int64_t want[2] = {d0, d1};
    int shape_ok = t->ndim == ndim;
    for (int i = 0; i < ndim && shape_ok; i++) shape_ok = t->shape[i] == want[i];
    if (t->dtype != dtype || !shape_ok) {
        char got[128], exp[128];
        st_shape_string(t->ndim, t->shape, got, sizeof got);
        st_shape_string(ndim, want, exp, sizeof exp);
        int unquantized = dtype == ST_U32 && (t->dtype == ST_BF16 || t->dtype == ST_F16 ||
                                              t->dtype == ST_F32);
        return qmm_fail(QMM_ERR_FORMAT, "tensor '%s' is %s %s, want %s %s (%s)%s",
                        name, st_dtype_name(t->dtype), got, st_dtype_name(dtype), exp, why,
                        unquantized ? "; an unquantized checkpoint? qmm quantize-checkpoint "
                                      "converts it" : "");
    }
    *out = t;
    return QMM_OK;
}

/* The tensor's data, or an aligned copy when the file puts it at an odd address. */
static qmm_status aligned_data(qmm_llm_model *m, const st_tensor *t, size_t align, void **out)
{
    if (((uintptr_t)t->data % align) == 0) {
        *out = (void *)t->data; /* read-only by contract; the mapping is copy-on-write */
        return QMM_OK;
    }
    qmm_status st = llm_model_alloc(m, (size_t)t->nbytes, out);
    if (st) return st;
    memcpy(*out, t->data, (size_t)t->nbytes);
    return QMM_OK;
}

/* prefix.weight U32 [n, k/8], prefix.scales and prefix.biases BF16 [n, k/g] -> a W4 view, with
 * g the layer's group size in config.json. */
static qmm_status bind_w4(qmm_llm_model *m, const llm_quant *q, const char *prefix, int64_t n,
                          int64_t k, qmm_w4 *w)
{
    char name[LLM_NAME_MAX], why[96];
    const st_tensor *tw, *ts, *tb;
    int g;
    qmm_status st = llm_quant_group(q, prefix, &g);
    if (st) return st;
    if (k % g)
        return qmm_fail(QMM_ERR_SHAPE, "layer '%s': in_features %lld is not a multiple of its "
                        "group size %d (config.json)", prefix, (long long)k, g);
    snprintf(why, sizeof why, "from config.json, 4 bits, group size %d", g);
    snprintf(name, sizeof name, "%s.weight", prefix);
    if ((st = expect_tensor(m, name, ST_U32, 2, n, k / 8, why, &tw))) return st;
    snprintf(name, sizeof name, "%s.scales", prefix);
    if ((st = expect_tensor(m, name, ST_BF16, 2, n, k / g, why, &ts))) return st;
    snprintf(name, sizeof name, "%s.biases", prefix);
    if ((st = expect_tensor(m, name, ST_BF16, 2, n, k / g, why, &tb))) return st;
    void *p, *s, *b;
    if ((st = aligned_data(m, tw, 4, &p)) || (st = aligned_data(m, ts, 2, &s)) ||
        (st = aligned_data(m, tb, 2, &b)))
        return st;
    memset(w, 0, sizeof *w);
    qmm_w4_view(w, n, k, g, p, s, b);
    m->weight_bytes += (size_t)(tw->nbytes + ts->nbytes + tb->nbytes);
    return QMM_OK;
}

/* A norm weight [len]: BF16 as is; F16 or F32 converted to bf16 (norms are tiny). */
static qmm_status bind_norm(qmm_llm_model *m, const char *name, int64_t len, const qmm_bf16 **out)
{
    const st_tensor *t = st_find(&m->set, name);
    if (!t) return qmm_fail(QMM_ERR_NOT_FOUND, "tensor '%s' is missing from the checkpoint", name);
    if (t->ndim != 1 || t->shape[0] != len ||
        (t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F32)) {
        char got[128];
        st_shape_string(t->ndim, t->shape, got, sizeof got);
        return qmm_fail(QMM_ERR_FORMAT, "tensor '%s' is %s %s, want BF16 [%lld] (from config.json)",
                        name, st_dtype_name(t->dtype), got, (long long)len);
    }
    qmm_status st;
    void *p;
    if (t->dtype == ST_BF16) {
        if ((st = aligned_data(m, t, 2, &p))) return st;
    } else {
        if ((st = llm_model_alloc(m, (size_t)len * sizeof(qmm_bf16), &p))) return st;
        qmm_bf16 *o = p;
        for (int64_t i = 0; i < len; i++) o[i] = qmm_f32_to_bf16(st_float_at(t, i));
    }
    *out = p;
    m->weight_bytes += (size_t)t->nbytes;
    return QMM_OK;
}

static qmm_status bind_all(qmm_llm_model *m, const llm_quant *q)
{
    const qmm_llm_config *c = &m->cfg;
    char name[LLM_NAME_MAX];
    qmm_status st;
    if ((st = bind_w4(m, q, LLM_EMBED_PREFIX, c->vocab_size, c->hidden_size, &m->embed)))
        return st;
    if (c->tie_word_embeddings) {
        m->lm_head = m->embed;
    } else if ((st = bind_w4(m, q, LLM_HEAD_PREFIX, c->vocab_size, c->hidden_size,
                             &m->lm_head))) {
        return st;
    }
    if ((st = bind_norm(m, LLM_FINAL_NORM, c->hidden_size, &m->final_norm))) return st;
    for (int64_t l = 0; l < c->num_layers; l++) {
        for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
            int64_t n, k;
            qmm_llm_linear_shape(c, (qmm_llm_linear)i, &n, &k);
            if ((st = llm_linear_prefix(l, (qmm_llm_linear)i, name, sizeof name))) return st;
            if ((st = bind_w4(m, q, name, n, k, &m->layers[l].lin[i]))) return st;
        }
        for (int i = 0; i < QMM_LLM_NORM_COUNT; i++) {
            if ((st = llm_norm_name(l, (qmm_llm_norm)i, name, sizeof name))) return st;
            if ((st = bind_norm(m, name, llm_norm_len(c, (qmm_llm_norm)i), &m->layers[l].norm[i])))
                return st;
        }
    }
    return QMM_OK;
}

qmm_status qmm_llm_model_load(const char *path, qmm_llm_model **out)
{
    return qmm_llm_model_load_mode(path, QMM_LLM_LOAD_MAP, out);
}

/* A model of config c: its quantization from the config file cfg_path, or from cfg[cfg_len]
 * when cfg_path is NULL; its tensors from the file at path (copied into memory when copy), or
 * from image[image_len] when path is NULL. Nothing is left behind on error. */
static qmm_status load_with(const qmm_llm_config *c, const char *cfg_path, const char *cfg,
                            size_t cfg_len, const char *path, int copy, const unsigned char *image,
                            size_t image_len, qmm_llm_model **out)
{
    qmm_llm_model *m;
    qmm_status st = llm_model_new(c, &m);
    if (st) return st;
    llm_quant q;
    st = cfg_path ? llm_quant_load(cfg_path, m->cfg.group_size, &q)
                  : llm_quant_parse(cfg, cfg_len, m->cfg.group_size, &q);
    if (!st) st = path ? st_open_ex(path, copy, &m->set) : st_open_image(image, image_len, "image", &m->set);
    if (!st) st = bind_all(m, &q);
    llm_quant_free(&q);
    if (st) {
        qmm_llm_model_destroy(m);
        return st;
    }
    *out = m;
    qmm_clear_error();
    return QMM_OK;
}

qmm_status qmm_llm_model_load_mode(const char *path, qmm_llm_load_mode mode, qmm_llm_model **out)
{
    if (!path || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_model_load: NULL argument");
    *out = NULL;
    if (mode != QMM_LLM_LOAD_MAP && mode != QMM_LLM_LOAD_COPY)
        return qmm_fail(QMM_ERR_ARG, "qmm_llm_model_load: unknown load mode %d", (int)mode);
    char dir[LLM_PATH_MAX], cfg_path[LLM_PATH_MAX];
    if (access(path, F_OK)) /* name the path given, not a config.json guessed beside it */
        return qmm_fail(QMM_ERR_NOT_FOUND, "%s: no such file or directory", path);
    qmm_status st = llm_checkpoint_dir(path, dir, sizeof dir);
    if (st) return st;
    if ((st = llm_path_join(dir, "config.json", cfg_path, sizeof cfg_path))) return st;
    qmm_llm_config c;
    if ((st = qmm_llm_config_load(cfg_path, &c))) return st;
    return load_with(&c, cfg_path, NULL, 0, path, mode == QMM_LLM_LOAD_COPY, NULL, 0, out);
}

qmm_status llm_model_load_image(const char *cfg, size_t cfg_len, const unsigned char *image,
                                size_t image_len, qmm_llm_model **out)
{
    if (!cfg || !out) return qmm_fail(QMM_ERR_NULL, "llm_model_load_image: NULL argument");
    *out = NULL;
    qmm_llm_config c;
    qmm_status st = qmm_llm_config_parse(cfg, cfg_len, &c);
    if (st) return st;
    return load_with(&c, NULL, cfg, cfg_len, NULL, 0, image, image_len, out);
}

qmm_status qmm_llm_model_open(const char *spec, uint64_t seed, qmm_llm_model **out)
{
    if (!spec || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_model_open: NULL argument");
    qmm_llm_config c;
    /* "synthetic:NAME" always means the preset; a bare NAME only when no such file or
     * directory exists (an existing path always wins) */
    int explicit_preset = !strncmp(spec, "synthetic:", 10);
    const char *name = explicit_preset ? spec + 10 : spec;
    /* NAME-g64 and NAME-g32: the preset quantized in groups of 64 or 32 (mlx_lm.convert's
     * default is 64) */
    size_t len = strlen(name), base = len;
    int group = 0;
    if (len > 4 && (!strcmp(name + len - 4, "-g64") || !strcmp(name + len - 4, "-g32")))
        base = len - 4, group = name[len - 2] == '6' ? 64 : 32;
    if (explicit_preset || access(spec, F_OK))
        for (int i = 0; qmm_llm_preset_name(i); i++)
            if (strlen(qmm_llm_preset_name(i)) == base && !strncmp(name, qmm_llm_preset_name(i), base)) {
                qmm_llm_config_preset(qmm_llm_preset_name(i), &c);
                if (group) c.group_size = group;
                return qmm_llm_model_synthetic(&c, seed, out);
            }
    if (explicit_preset) {
        char list[256] = "";
        for (int i = 0; qmm_llm_preset_name(i); i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     qmm_llm_preset_name(i));
        return qmm_fail(QMM_ERR_NOT_FOUND, "no preset '%s' (presets: %s)", name, list);
    }
    if (!strchr(spec, '/') && access(spec, F_OK)) /* a bare name: neither preset nor path */
        return qmm_fail(QMM_ERR_NOT_FOUND, "'%s' is neither a preset (synthetic:NAME) nor an "
                        "existing checkpoint path", spec);
    return qmm_llm_model_load(spec, out);
}
