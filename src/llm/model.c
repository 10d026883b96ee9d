/* The model object: creation, owned memory, accessors, tensor names. */
#include "llm/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

qmm_status llm_model_new(const qmm_llm_config *c, qmm_llm_model **out)
{
    qmm_status st = qmm_llm_config_validate(c);
    if (st) return st;
    qmm_llm_model *m = calloc(1, sizeof *m);
    if (!m) return qmm_fail(QMM_ERR_NOMEM, "out of memory for the model");
    m->cfg = *c;
    if (!m->cfg.group_size) m->cfg.group_size = QMM_GROUP;
    m->layers = calloc((size_t)c->num_layers, sizeof *m->layers);
    if (!m->layers) {
        free(m);
        return qmm_fail(QMM_ERR_NOMEM, "out of memory for %lld layers", (long long)c->num_layers);
    }
    *out = m;
    return QMM_OK;
}

/* Room for one more owned pointer. */
static qmm_status owned_reserve(qmm_llm_model *m)
{
    if (m->owned_count == m->owned_cap) {
        size_t cap = m->owned_cap ? m->owned_cap * 2 : 64;
        void **o = realloc(m->owned, cap * sizeof *o);
        if (!o) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
        m->owned = o;
        m->owned_cap = cap;
    }
    return QMM_OK;
}

qmm_status llm_model_adopt(qmm_llm_model *m, void *p)
{
    qmm_status st = owned_reserve(m);
    if (st) return st;
    m->owned[m->owned_count++] = p;
    return QMM_OK;
}

qmm_status llm_model_alloc(qmm_llm_model *m, size_t bytes, void **out)
{
    qmm_status st = owned_reserve(m);
    if (st) return st;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes) return qmm_fail(QMM_ERR_OVERFLOW, "allocation of %zu bytes", bytes);
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) return qmm_fail(QMM_ERR_NOMEM, "out of memory for %zu bytes", bytes);
    m->owned[m->owned_count++] = p;
    *out = p;
    return QMM_OK;
}

void qmm_llm_model_destroy(qmm_llm_model *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->owned_count; i++) free(m->owned[i]);
    free(m->owned);
    st_close(&m->set);
    free(m->layers);
    free(m);
}

const qmm_llm_config *qmm_llm_model_config(const qmm_llm_model *m) { return m ? &m->cfg : NULL; }

size_t qmm_llm_model_weight_bytes(const qmm_llm_model *m) { return m ? m->weight_bytes : 0; }

int qmm_llm_model_is_synthetic(const qmm_llm_model *m) { return m && m->synthetic; }

/* layer and index in range (count: linears or norms of a layer) */
static qmm_status check_part(const qmm_llm_model *m, const void *out, int64_t layer, int which,
                             int count, const char *what)
{
    if (!m || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_model_%s: NULL argument", what);
    if (layer < 0 || layer >= m->cfg.num_layers || which < 0 || which >= count)
        return qmm_fail(QMM_ERR_RANGE, "layer %lld / %s %d out of range", (long long)layer, what,
                        which);
    return QMM_OK;
}

qmm_status qmm_llm_model_linear(const qmm_llm_model *m, int64_t layer, qmm_llm_linear which,
                                const qmm_w4 **out)
{
    qmm_status st = check_part(m, out, layer, (int)which, QMM_LLM_LINEAR_COUNT, "linear");
    if (st == QMM_OK) *out = &m->layers[layer].lin[which];
    return st;
}

qmm_status qmm_llm_model_norm(const qmm_llm_model *m, int64_t layer, qmm_llm_norm which,
                              const qmm_bf16 **out)
{
    qmm_status st = check_part(m, out, layer, (int)which, QMM_LLM_NORM_COUNT, "norm");
    if (st == QMM_OK) *out = m->layers[layer].norm[which];
    return st;
}

qmm_status qmm_llm_model_embedding(const qmm_llm_model *m, const qmm_w4 **out)
{
    if (!m || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_model_embedding: NULL argument");
    *out = &m->embed;
    return QMM_OK;
}

qmm_status qmm_llm_model_lm_head(const qmm_llm_model *m, const qmm_w4 **out)
{
    if (!m || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_model_lm_head: NULL argument");
    *out = &m->lm_head;
    return QMM_OK;
}

qmm_status qmm_llm_model_final_norm(const qmm_llm_model *m, const qmm_bf16 **out)
{
    if (!m || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_model_final_norm: NULL argument");
    *out = m->final_norm;
    return QMM_OK;
}

qmm_status llm_linear_prefix(int64_t layer, qmm_llm_linear which, char *out, size_t size)
{
    const char *name = qmm_llm_linear_name(which);
    if (!name) return qmm_fail(QMM_ERR_ARG, "linear %d out of range", (int)which);
    const char *block = which <= QMM_LLM_O ? "self_attn" : "mlp";
    int n = snprintf(out, size, "model.layers.%lld.%s.%s", (long long)layer, block, name);
    if (n < 0 || (size_t)n >= size) return qmm_fail(QMM_ERR_RANGE, "tensor name too long");
    return QMM_OK;
}

qmm_status llm_norm_name(int64_t layer, qmm_llm_norm which, char *out, size_t size)
{
    static const char *names[] = {"input_layernorm", "post_attention_layernorm",
                                  "self_attn.q_norm", "self_attn.k_norm"};
    if ((unsigned)which >= QMM_LLM_NORM_COUNT)
        return qmm_fail(QMM_ERR_ARG, "norm %d out of range", (int)which);
    int n = snprintf(out, size, "model.layers.%lld.%s.weight", (long long)layer, names[which]);
    if (n < 0 || (size_t)n >= size) return qmm_fail(QMM_ERR_RANGE, "tensor name too long");
    return QMM_OK;
}

int64_t llm_norm_len(const qmm_llm_config *c, qmm_llm_norm which)
{
    return which == QMM_LLM_Q_NORM || which == QMM_LLM_K_NORM ? c->head_dim : c->hidden_size;
}
