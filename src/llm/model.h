/* The Qwen3 model object shared by the loader, the synthetic generator and the forwards. */
#ifndef QMM_LLM_MODEL_H
#define QMM_LLM_MODEL_H

#include <stddef.h>

#include "llm/safetensors.h"
#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llm_layer {
    qmm_w4 lin[QMM_LLM_LINEAR_COUNT];
    const qmm_bf16 *norm[QMM_LLM_NORM_COUNT];
} llm_layer;

struct qmm_llm_model {
    qmm_llm_config cfg;
    llm_layer *layers;        /* [num_layers] */
    qmm_w4 embed;             /* [vocab, hidden] */
    qmm_w4 lm_head;           /* a copy of the embed view when tied */
    const qmm_bf16 *final_norm;
    st_set set;               /* the mapped checkpoint (empty for synthetic weights) */
    void **owned;             /* buffers freed with the model */
    size_t owned_count, owned_cap;
    size_t weight_bytes;
    int synthetic;            /* weights generated from a seed, not read from files */
};

/* A model with its config set and zeroed layers. */
qmm_status llm_model_new(const qmm_llm_config *c, qmm_llm_model **out);
/* bytes of 64-byte aligned memory freed with the model. */
qmm_status llm_model_alloc(qmm_llm_model *m, size_t bytes, void **out);
/* Hand p (malloc'd) to m: freed with the model (on error the caller still owns p). */
qmm_status llm_model_adopt(qmm_llm_model *m, void *p);

/* A model from a config.json text and one safetensors image held by the caller (it must outlive
 * the model): the whole load without files, for the fuzz harness. */
qmm_status llm_model_load_image(const char *cfg, size_t cfg_len, const unsigned char *image,
                                size_t image_len, qmm_llm_model **out);

/* Hugging Face / MLX tensor names. prefix of a linear: "model.layers.3.self_attn.q_proj". */
qmm_status llm_linear_prefix(int64_t layer, qmm_llm_linear which, char *out, size_t size);
/* Full name of a layer norm weight: "model.layers.3.input_layernorm.weight". */
qmm_status llm_norm_name(int64_t layer, qmm_llm_norm which, char *out, size_t size);
/* Length of the weight of a layer norm under config c. */
int64_t llm_norm_len(const qmm_llm_config *c, qmm_llm_norm which);

#define LLM_EMBED_PREFIX "model.embed_tokens"
#define LLM_HEAD_PREFIX "lm_head"
#define LLM_FINAL_NORM "model.norm.weight"
#define LLM_NAME_MAX 256

#ifdef __cplusplus
}
#endif

#endif
