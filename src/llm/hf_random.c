/* Random Hugging Face style checkpoints (see hf_random.h). */
#include "llm/hf_random.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "llm/model.h"
#include "llm/st_writer.h"

qmm_status llm_config_json(const qmm_llm_config *c, char *out, size_t size)
{
    int n = snprintf(out, size,
                     "{\n  \"architectures\": [\"Qwen3ForCausalLM\"],\n"
                     "  \"model_type\": \"qwen3\",\n  \"hidden_act\": \"silu\",\n"
                     "  \"attention_bias\": false,\n  \"rope_scaling\": null,\n"
                     "  \"torch_dtype\": \"bfloat16\",\n"
                     "  \"hidden_size\": %lld,\n  \"intermediate_size\": %lld,\n"
                     "  \"num_hidden_layers\": %lld,\n  \"num_attention_heads\": %lld,\n"
                     "  \"num_key_value_heads\": %lld,\n  \"head_dim\": %lld,\n"
                     "  \"vocab_size\": %lld,\n  \"max_position_embeddings\": %lld,\n"
                     "  \"rope_theta\": %.17g,\n  \"rms_norm_eps\": %.17g,\n"
                     "  \"tie_word_embeddings\": %s\n}\n",
                     (long long)c->hidden_size, (long long)c->intermediate_size,
                     (long long)c->num_layers, (long long)c->num_heads, (long long)c->num_kv_heads,
                     (long long)c->head_dim, (long long)c->vocab_size,
                     (long long)c->max_position_embeddings, c->rope_theta, c->rms_norm_eps,
                     c->tie_word_embeddings ? "true" : "false");
    if (n < 0 || (size_t)n >= size) return qmm_fail(QMM_ERR_RANGE, "config text too long");
    return QMM_OK;
}

typedef struct rng {
    uint64_t s;
} rng;

static double rng_unit(rng *r)
{
    /* + half a step: never 0, for log() */
    return ((double)(qmm_splitmix64(&r->s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double rng_normal(rng *r)
{
    return sqrt(-2.0 * log(rng_unit(r))) * cos(6.283185307179586 * rng_unit(r));
}

/* Fill n elements of dtype with normal(0, sd) (sd = 0: 1 +- 0.1 uniform, for norms). */
static void fill(void *p, st_dtype dtype, size_t n, double sd, rng *r)
{
    for (size_t i = 0; i < n; i++) {
        double v = sd > 0 ? sd * rng_normal(r) : 1.0 + 0.1 * (2.0 * rng_unit(r) - 1.0);
        if (dtype == ST_F32) ((float *)p)[i] = (float)v;
        else ((qmm_bf16 *)p)[i] = qmm_f32_to_bf16((float)v);
    }
}

qmm_status llm_write_random_hf(const char *dir, const qmm_llm_config *c, uint64_t seed,
                               st_dtype dtype)
{
    qmm_status st = qmm_llm_config_validate(c);
    if (st) return st;
    if (dtype != ST_BF16 && dtype != ST_F32)
        return qmm_fail(QMM_ERR_DTYPE, "random checkpoints are BF16 or F32");
    size_t nl = (size_t)c->num_layers;
    size_t count = 2 + (c->tie_word_embeddings ? 0 : 1) + nl * (QMM_LLM_LINEAR_COUNT + QMM_LLM_NORM_COUNT);
    st_entry *e = calloc(count, sizeof *e);
    void **data = calloc(count, sizeof *data);
    double *sd = calloc(count, sizeof *sd);
    if (!e || !data || !sd) {
        free(e), free(data), free(sd);
        return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    }
    size_t i = 0;
    char name[LLM_NAME_MAX];
#define ADD(nm, d0, d1, nd, s)                                   \
    do {                                                         \
        snprintf(e[i].name, sizeof e[i].name, "%s", nm);         \
        e[i].dtype = dtype;                                      \
        e[i].ndim = nd;                                          \
        e[i].shape[0] = d0;                                      \
        e[i].shape[1] = d1;                                      \
        sd[i] = s;                                               \
        i++;                                                     \
    } while (0)
    double emb_sd = 4.0 / sqrt((double)c->hidden_size);
    ADD(LLM_EMBED_PREFIX ".weight", c->vocab_size, c->hidden_size, 2, emb_sd);
    if (!c->tie_word_embeddings) ADD(LLM_HEAD_PREFIX ".weight", c->vocab_size, c->hidden_size, 2, emb_sd);
    ADD(LLM_FINAL_NORM, c->hidden_size, 0, 1, 0.0);
    for (int64_t l = 0; l < c->num_layers; l++) {
        for (int j = 0; j < QMM_LLM_LINEAR_COUNT; j++) {
            int64_t n, k;
            qmm_llm_linear_shape(c, (qmm_llm_linear)j, &n, &k);
            llm_linear_prefix(l, (qmm_llm_linear)j, name, sizeof name);
            char full[LLM_NAME_MAX + 8];
            snprintf(full, sizeof full, "%s.weight", name);
            ADD(full, n, k, 2, 1.0 / sqrt((double)k));
        }
        for (int j = 0; j < QMM_LLM_NORM_COUNT; j++) {
            llm_norm_name(l, (qmm_llm_norm)j, name, sizeof name);
            ADD(name, llm_norm_len(c, (qmm_llm_norm)j), 0, 1, 0.0);
        }
    }
#undef ADD
    rng r = {seed};
    for (i = 0; i < count && !st; i++) {
        size_t n = (size_t)e[i].shape[0] * (size_t)(e[i].ndim == 2 ? e[i].shape[1] : 1);
        data[i] = malloc(n * st_dtype_size(dtype));
        if (!data[i]) st = qmm_fail(QMM_ERR_NOMEM, "out of memory");
        else fill(data[i], dtype, n, sd[i], &r);
    }
    char path[LLM_PATH_MAX], cfg[4096];
    if (!st) st = llm_path_join(dir, "model.safetensors", path, sizeof path);
    if (!st) st = st_write_file(path, e, (const void *const *)data, count, "pt");
    if (!st) st = llm_config_json(c, cfg, sizeof cfg);
    if (!st) st = llm_path_join(dir, "config.json", path, sizeof path);
    if (!st) {
        llm_tmpfile f;
        st = llm_tmp_create(&f, path);
        if (!st) st = llm_tmp_write(&f, cfg, strlen(cfg));
        if (!st) st = llm_tmp_publish(&f);
        llm_tmp_discard(&f);
    }
    for (i = 0; i < count; i++) free(data[i]);
    free(e), free(data), free(sd);
    return st;
}
