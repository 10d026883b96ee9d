/* Random unquantized Hugging Face style Qwen3 checkpoints, for tests and demos of the writer. */
#ifndef QMM_LLM_HF_RANDOM_H
#define QMM_LLM_HF_RANDOM_H

#include "llm/safetensors.h"
#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* config.json text of c (Qwen3ForCausalLM keys) into out[size]. */
qmm_status llm_config_json(const qmm_llm_config *c, char *out, size_t size);

/* dir/config.json and dir/model.safetensors with seeded random weights in dtype (ST_BF16 or
 * ST_F32): linears ~ normal(0, 1/sqrt(K)), embedding ~ normal(0, 4/sqrt(hidden)), norms 1 ± 0.1.
 * dir must exist. */
qmm_status llm_write_random_hf(const char *dir, const qmm_llm_config *c, uint64_t seed,
                               st_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif
