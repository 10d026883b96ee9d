/* The per-layer quantization of an MLX checkpoint: config.json's "quantization" object holds the
 * default {group_size, bits} and, when mlx_lm quantized some layers differently, entries named by
 * the layer's path ("model.layers.3.mlp.down_proj": {...} or false for a layer left unquantized). */
#ifndef QMM_LLM_QUANT_CONFIG_H
#define QMM_LLM_QUANT_CONFIG_H

#include <stdint.h>

#include "llm/json.h"
#include "qmm.h"

typedef struct llm_quant {
    json_doc doc;
    uint32_t obj;       /* the "quantization" (or "quantization_config") object; 0 when absent */
    int64_t group;      /* the default group size (the config's) */
} llm_quant;

/* Read config.json at cfg_path; default_group is the parsed config's group_size. */
qmm_status llm_quant_load(const char *cfg_path, int64_t default_group, llm_quant *q);
/* The same from config.json's text. */
qmm_status llm_quant_parse(const char *text, size_t len, int64_t default_group, llm_quant *q);
/* The group size of the layer whose tensors start with prefix; QMM_ERR_UNSUPPORTED naming the
 * layer when config.json gives it other bits, another mode or no quantization. */
qmm_status llm_quant_group(const llm_quant *q, const char *prefix, int *group);
void llm_quant_free(llm_quant *q);

#endif
