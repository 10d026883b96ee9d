/* Qwen3 config: config.json parsing, built-in presets, validation, projection shapes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "llm/json.h"
#include "llm/llm_io.h"

/* The published Qwen3 dense configs (Hugging Face Qwen/Qwen3-*: config.json). */
static const struct {
    const char *name;
    qmm_llm_config c;
} presets[] = {
    {"qwen3-0.6b", {1024, 3072, 28, 16, 8, 128, 151936, 40960, 1e6, 1e-6, 1, 128}},
    {"qwen3-1.7b", {2048, 6144, 28, 16, 8, 128, 151936, 40960, 1e6, 1e-6, 1, 128}},
    {"qwen3-4b", {2560, 9728, 36, 32, 8, 128, 151936, 40960, 1e6, 1e-6, 1, 128}},
    {"qwen3-8b", {4096, 12288, 36, 32, 8, 128, 151936, 40960, 1e6, 1e-6, 0, 128}},
    {"qwen3-14b", {5120, 17408, 40, 40, 8, 128, 151936, 40960, 1e6, 1e-6, 0, 128}},
    {"qwen3-32b", {5120, 25600, 64, 64, 8, 128, 151936, 40960, 1e6, 1e-6, 0, 128}},
};
#define PRESET_COUNT ((int)(sizeof presets / sizeof presets[0]))

const char *qmm_llm_preset_name(int i)
{
    return i >= 0 && i < PRESET_COUNT ? presets[i].name : NULL;
}

qmm_status qmm_llm_config_preset(const char *name, qmm_llm_config *out)
{
    if (!name || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_config_preset: NULL argument");
    for (int i = 0; i < PRESET_COUNT; i++) {
        if (!strcmp(name, presets[i].name)) {
            *out = presets[i].c;
            return QMM_OK;
        }
    }
    return qmm_fail(QMM_ERR_NOT_FOUND,
                    "no preset named '%s' (known: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, "
                    "qwen3-14b, qwen3-32b)", name);
}

/* Upper bounds keep every derived byte count far from overflow (and reject nonsense early). */
#define MAX_WIDTH (1 << 20)
#define MAX_LAYERS 4096
#define MAX_VOCAB (1 << 24)
#define MAX_POSITIONS (1 << 24)

qmm_status qmm_llm_config_validate(const qmm_llm_config *c)
{
    if (!c) return qmm_fail(QMM_ERR_NULL, "config is NULL");
    const struct {
        const char *name;
        int64_t v, lo, hi;
    } r[] = {
        {"hidden_size", c->hidden_size, 32, MAX_WIDTH},
        {"intermediate_size", c->intermediate_size, 32, MAX_WIDTH},
        {"num_hidden_layers", c->num_layers, 1, MAX_LAYERS},
        {"num_attention_heads", c->num_heads, 1, 1024},
        {"num_key_value_heads", c->num_kv_heads, 1, 1024},
        {"head_dim", c->head_dim, 2, 1024},
        {"vocab_size", c->vocab_size, 1, MAX_VOCAB},
        {"max_position_embeddings", c->max_position_embeddings, 1, MAX_POSITIONS},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        if (r[i].v < r[i].lo || r[i].v > r[i].hi)
            return qmm_fail(QMM_ERR_RANGE, "config: %s = %lld is outside [%lld, %lld]", r[i].name,
                            (long long)r[i].v, (long long)r[i].lo, (long long)r[i].hi);
    int64_t g = c->group_size ? c->group_size : QMM_GROUP;
    if (!QMM_GROUP_OK(g))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "config: quantization group_size = %lld is not "
                        "supported (32, 64 or 128)", (long long)g);
    if (c->hidden_size % g)
        return qmm_fail(QMM_ERR_SHAPE, "config: hidden_size = %lld is not a multiple of the group "
                        "size %lld", (long long)c->hidden_size, (long long)g);
    if (c->intermediate_size % g)
        return qmm_fail(QMM_ERR_SHAPE, "config: intermediate_size = %lld is not a multiple of the "
                        "group size %lld", (long long)c->intermediate_size, (long long)g);
    if (c->head_dim % 2)
        return qmm_fail(QMM_ERR_SHAPE, "config: head_dim = %lld is odd (RoPE rotates halves)",
                        (long long)c->head_dim);
    if (c->num_heads % c->num_kv_heads)
        return qmm_fail(QMM_ERR_SHAPE,
                        "config: num_attention_heads = %lld is not a multiple of "
                        "num_key_value_heads = %lld",
                        (long long)c->num_heads, (long long)c->num_kv_heads);
    if ((c->num_heads * c->head_dim) % g)
        return qmm_fail(QMM_ERR_SHAPE,
                        "config: num_attention_heads * head_dim = %lld is not a multiple of the "
                        "group size %lld (the o projection's K)",
                        (long long)(c->num_heads * c->head_dim), (long long)g);
    if (c->num_heads * c->head_dim > MAX_WIDTH)
        return qmm_fail(QMM_ERR_RANGE, "config: num_attention_heads * head_dim is too large");
    if (!(c->rope_theta > 1.0) || !isfinite(c->rope_theta))
        return qmm_fail(QMM_ERR_RANGE, "config: rope_theta = %g must be finite and > 1",
                        c->rope_theta);
    if (!(c->rms_norm_eps > 0.0) || !(c->rms_norm_eps < 1.0))
        return qmm_fail(QMM_ERR_RANGE, "config: rms_norm_eps = %g must be in (0, 1)",
                        c->rms_norm_eps);
    if (c->tie_word_embeddings != 0 && c->tie_word_embeddings != 1)
        return qmm_fail(QMM_ERR_RANGE, "config: tie_word_embeddings must be 0 or 1");
    return QMM_OK;
}

const char *qmm_llm_linear_name(qmm_llm_linear which)
{
    static const char *names[] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                  "gate_proj", "up_proj", "down_proj"};
    return (unsigned)which < QMM_LLM_LINEAR_COUNT ? names[which] : NULL;
}

qmm_status qmm_llm_linear_shape(const qmm_llm_config *c, qmm_llm_linear which, int64_t *n,
                                int64_t *k)
{
    if (!c || !n || !k) return qmm_fail(QMM_ERR_NULL, "qmm_llm_linear_shape: NULL argument");
    int64_t q = c->num_heads * c->head_dim, kv = c->num_kv_heads * c->head_dim;
    switch (which) {
    case QMM_LLM_Q: *n = q, *k = c->hidden_size; break;
    case QMM_LLM_K:
    case QMM_LLM_V: *n = kv, *k = c->hidden_size; break;
    case QMM_LLM_O: *n = c->hidden_size, *k = q; break;
    case QMM_LLM_GATE:
    case QMM_LLM_UP: *n = c->intermediate_size, *k = c->hidden_size; break;
    case QMM_LLM_DOWN: *n = c->hidden_size, *k = c->intermediate_size; break;
    default: return qmm_fail(QMM_ERR_ARG, "linear %d is out of range", (int)which);
    }
    return QMM_OK;
}

/* ---- config.json ---- */

typedef struct cfg_reader {
    const json_doc *d;
    uint32_t root;
} cfg_reader;

/* dflt of a member that must be present. A sentinel, not "any negative": a default derived
 * from another (bad) member may be negative, and the message must then name that member. */
#define REQUIRED INT64_MIN

/* An integer member; absent -> *out = dflt (an error when dflt is REQUIRED). */
static qmm_status get_int(const cfg_reader *r, const char *key, int64_t dflt, int64_t *out)
{
    uint32_t v = json_member(r->d, r->root, key);
    if (!v) {
        if (dflt == REQUIRED)
            return qmm_fail(QMM_ERR_NOT_FOUND, "config.json: \"%s\" is missing", key);
        *out = dflt;
        return QMM_OK;
    }
    const json_node *n = &r->d->nodes[v];
    if (n->type != JSON_NUMBER || !n->is_int)
        return qmm_fail(QMM_ERR_FORMAT, "config.json: \"%s\" must be an integer (got a %s)", key,
                        json_type_name(n->type));
    *out = n->i;
    return QMM_OK;
}

static qmm_status get_num(const cfg_reader *r, uint32_t obj, const char *key, double dflt,
                          double *out, int *found)
{
    uint32_t v = json_member(r->d, obj, key);
    if (found) *found = v != 0;
    if (!v) {
        *out = dflt;
        return QMM_OK;
    }
    const json_node *n = &r->d->nodes[v];
    if (n->type != JSON_NUMBER)
        return qmm_fail(QMM_ERR_FORMAT, "config.json: \"%s\" must be a number (got a %s)", key,
                        json_type_name(n->type));
    *out = json_num(n);
    return QMM_OK;
}

/* A string member equal to want (when present). */
static qmm_status expect_string(const cfg_reader *r, const char *key, const char *want)
{
    uint32_t v = json_member(r->d, r->root, key);
    if (!v) return QMM_OK;
    const json_node *n = &r->d->nodes[v];
    if (n->type != JSON_STRING)
        return qmm_fail(QMM_ERR_FORMAT, "config.json: \"%s\" must be a string", key);
    if (strcmp(n->str, want))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "config.json: %s \"%.100s\" is not supported (want \"%s\")",
                        key, n->str, want);
    return QMM_OK;
}

/* MLX writes {"group_size": g, "bits": 4[, "mode": "affine"], per-layer entries} under
 * "quantization" (and a copy under "quantization_config"); *group gets g (0 when the key is
 * absent). Other bits or modes are formats this engine cannot read. */
static qmm_status check_quantization(const cfg_reader *r, const char *key, int64_t *group)
{
    *group = 0;
    uint32_t q = json_member(r->d, r->root, key);
    if (!q || r->d->nodes[q].type == JSON_NULL) return QMM_OK;
    if (r->d->nodes[q].type != JSON_OBJECT)
        return qmm_fail(QMM_ERR_FORMAT, "config.json: \"%s\" must be an object", key);
    cfg_reader sub = {r->d, q};
    int64_t g, b;
    qmm_status st;
    if ((st = get_int(&sub, "group_size", 64, &g)) || (st = get_int(&sub, "bits", 4, &b)))
        return st;
    if (b != QMM_BITS)
        return qmm_fail(QMM_ERR_UNSUPPORTED, "config.json: %s.bits = %lld; qmm reads 4-bit "
                        "weights only", key, (long long)b);
    if (!QMM_GROUP_OK(g))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "config.json: %s.group_size = %lld; qmm reads "
                        "groups of 32, 64 or 128", key, (long long)g);
    uint32_t mode = json_member(r->d, q, "mode");
    if (mode && (r->d->nodes[mode].type != JSON_STRING || strcmp(r->d->nodes[mode].str, "affine")))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "config.json: %s mode must be \"affine\"", key);
    *group = g;
    return QMM_OK;
}

static qmm_status parse_doc(const json_doc *d, qmm_llm_config *c)
{
    if (d->nodes[0].type != JSON_OBJECT)
        return qmm_fail(QMM_ERR_FORMAT, "config.json: the top level must be an object");
    cfg_reader r = {d, 0};
    qmm_status st;
    if ((st = expect_string(&r, "model_type", "qwen3")) ||
        (st = expect_string(&r, "hidden_act", "silu")))
        return st;
    if ((st = get_int(&r, "hidden_size", REQUIRED, &c->hidden_size)) ||
        (st = get_int(&r, "intermediate_size", REQUIRED, &c->intermediate_size)) ||
        (st = get_int(&r, "num_hidden_layers", REQUIRED, &c->num_layers)) ||
        (st = get_int(&r, "num_attention_heads", REQUIRED, &c->num_heads)) ||
        (st = get_int(&r, "vocab_size", REQUIRED, &c->vocab_size)))
        return st;
    /* before the defaults derived from them */
    if (c->num_heads < 1)
        return qmm_fail(QMM_ERR_RANGE, "config.json: num_attention_heads = %lld must be >= 1",
                        (long long)c->num_heads);
    if (c->hidden_size < 1)
        return qmm_fail(QMM_ERR_RANGE, "config.json: hidden_size = %lld must be >= 1",
                        (long long)c->hidden_size);
    if ((st = get_int(&r, "num_key_value_heads", c->num_heads, &c->num_kv_heads)) ||
        (st = get_int(&r, "max_position_embeddings", 32768, &c->max_position_embeddings)))
        return st;
    if ((st = get_int(&r, "head_dim", c->hidden_size / c->num_heads, &c->head_dim))) return st;

    /* rope_theta at the top level (transformers 4.x) or inside rope_parameters (5.x). */
    int found = 0;
    if ((st = get_num(&r, 0, "rope_theta", 10000.0, &c->rope_theta, &found))) return st;
    uint32_t rp = json_member(d, 0, "rope_parameters");
    if (rp && d->nodes[rp].type == JSON_OBJECT) {
        uint32_t type = json_member(d, rp, "rope_type");
        if (type && (d->nodes[type].type != JSON_STRING || strcmp(d->nodes[type].str, "default")))
            return qmm_fail(QMM_ERR_UNSUPPORTED,
                            "config.json: rope_parameters.rope_type must be \"default\"");
        if (!found && (st = get_num(&r, rp, "rope_theta", 10000.0, &c->rope_theta, NULL)))
            return st;
    } else if (rp && d->nodes[rp].type != JSON_NULL) {
        return qmm_fail(QMM_ERR_FORMAT, "config.json: \"rope_parameters\" must be an object");
    }
    uint32_t rs = json_member(d, 0, "rope_scaling");
    if (rs && d->nodes[rs].type != JSON_NULL)
        return qmm_fail(QMM_ERR_UNSUPPORTED,
                        "config.json: rope_scaling is set; only plain RoPE is implemented");
    if ((st = get_num(&r, 0, "rms_norm_eps", 1e-6, &c->rms_norm_eps, NULL))) return st;

    c->tie_word_embeddings = 0; /* Qwen3Config's default */
    uint32_t t = json_member(d, 0, "tie_word_embeddings");
    if (t) {
        if (d->nodes[t].type != JSON_BOOL)
            return qmm_fail(QMM_ERR_FORMAT, "config.json: \"tie_word_embeddings\" must be a boolean");
        c->tie_word_embeddings = d->nodes[t].boolean;
    }
    uint32_t ab = json_member(d, 0, "attention_bias");
    if (ab && (d->nodes[ab].type != JSON_BOOL || d->nodes[ab].boolean))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "config.json: attention_bias must be false for Qwen3");
    int64_t g1, g2;
    if ((st = check_quantization(&r, "quantization", &g1)) ||
        (st = check_quantization(&r, "quantization_config", &g2)))
        return st;
    if (g1 && g2 && g1 != g2)
        return qmm_fail(QMM_ERR_FORMAT, "config.json: quantization.group_size = %lld but "
                        "quantization_config.group_size = %lld", (long long)g1, (long long)g2);
    /* no quantization entry (a bf16 checkpoint, the writer's input): the largest group that
     * divides every K, so widths that only fit groups of 64 or 32 still parse */
    c->group_size = g1 ? g1 : g2;
    int64_t q_width; /* unvalidated sizes: the product may overflow (validate names them) */
    int q_ok = !__builtin_mul_overflow(c->num_heads, c->head_dim, &q_width);
    for (int64_t g = QMM_GROUP; !c->group_size && g >= 32; g /= 2)
        if (c->hidden_size % g == 0 && c->intermediate_size % g == 0 && q_ok && q_width % g == 0)
            c->group_size = g;
    if (!c->group_size) c->group_size = 32; /* validate names the width that does not fit */
    return qmm_llm_config_validate(c);
}

qmm_status qmm_llm_config_parse(const char *json, size_t len, qmm_llm_config *out)
{
    if (!json || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_config_parse: NULL argument");
    json_doc d;
    qmm_status st = json_parse(json, len, &d);
    if (st) return st;
    qmm_llm_config c;
    memset(&c, 0, sizeof c);
    st = parse_doc(&d, &c);
    json_free(&d);
    if (!st) *out = c;
    return st;
}

qmm_status qmm_llm_config_load(const char *path, qmm_llm_config *out)
{
    if (!path || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_config_load: NULL argument");
    char *text = NULL;
    size_t len = 0;
    qmm_status st = llm_read_file(path, 16u << 20, &text, &len);
    if (st) return st;
    st = qmm_llm_config_parse(text, len, out);
    free(text);
    if (st) {
        /* prefix the file name to the parser's detail */
        char detail[400];
        snprintf(detail, sizeof detail, "%s", qmm_last_error());
        return qmm_fail(st, "%s: %s", path, detail);
    }
    return QMM_OK;
}
