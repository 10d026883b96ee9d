/* The strict JSON reader and Qwen3 config.json parsing, presets and validation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/hf_random.h"
#include "llm/json.h"

static qmm_status parse(const char *s, json_doc *d) { return json_parse(s, strlen(s), d); }

static void json_valid_documents(void)
{
    static const char *ok[] = {
        "{}", "[]", " \n\t{ } \r\n", "0", "-0", "12", "-7.5e-3", "1E+2", "true", "false", "null",
        "\"\"", "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", "\"\\u00e9\\ud83d\\ude00\"", "\"h\xc3\xa9\"",
        "{\"a\": [1, 2, {\"b\": null}], \"c\": \"d\"}", "[[[[[]]]]]",
        "{\"a\":1,\"b\":2,\"ab\":3}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        json_doc d;
        qmm_status st = parse(ok[i], &d);
        CHECKF(st == QMM_OK, "valid JSON #%zu '%s' rejected: %s", i, ok[i], qmm_last_error());
        json_free(&d);
    }
}

static void json_invalid_documents(void)
{
    static const char *bad[] = {
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "-", "1.", ".5",
        "1e", "1e+", "+1", "\"abc", "\"a\nb\"", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"",
        "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\u0000\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"",
        "\"\xf5\x80\x80\x80\"", "\"\xe2\x82\"", "tru", "nul", "{} {}", "[1] x",
        "{\"a\":1,\"a\":2}", "1e999", "[1 2]", "{\"a\":1 \"b\":2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_doc d;
        qmm_status st = parse(bad[i], &d);
        CHECKF(st == QMM_ERR_FORMAT, "invalid JSON #%zu '%s' gave %s", i, bad[i],
               qmm_status_name(st));
        CHECK(d.nodes == NULL && d.count == 0);
        json_free(&d);
    }
    /* nesting: 64 levels are fine, 65 are not */
    char deep[200];
    for (int depth = 64; depth <= 65; depth++) {
        int n = 0;
        for (int i = 0; i < depth; i++) deep[n++] = '[';
        for (int i = 0; i < depth; i++) deep[n++] = ']';
        deep[n] = 0;
        json_doc d;
        qmm_status st = parse(deep, &d);
        CHECKF((st == QMM_OK) == (depth <= JSON_MAX_DEPTH), "depth %d -> %s", depth,
               qmm_status_name(st));
        json_free(&d);
    }
    /* text with an embedded NUL is not JSON */
    json_doc d;
    CHECK_STATUS(json_parse("{}\0", 3, &d), QMM_ERR_FORMAT);
}

static void json_values_and_traversal(void)
{
    json_doc d;
    const char *t = "{\"n\": -9223372036854775808, \"big\": 9223372036854775808, \"f\": 2.5e3,"
                    " \"s\": \"x\\u00e9\", \"arr\": [1, [2, 3], {\"k\": true}], \"z\": false}";
    CHECK_OK(parse(t, &d));
    uint32_t n = json_member(&d, 0, "n"), big = json_member(&d, 0, "big"),
             f = json_member(&d, 0, "f"), s = json_member(&d, 0, "s"),
             arr = json_member(&d, 0, "arr"), z = json_member(&d, 0, "z");
    CHECK(n && d.nodes[n].is_int && d.nodes[n].i == INT64_MIN);
    CHECK(big && !d.nodes[big].is_int && json_num(&d.nodes[big]) == 9223372036854775808.0);
    CHECK(f && !d.nodes[f].is_int && json_num(&d.nodes[f]) == 2500.0);
    CHECK(s && d.nodes[s].str_len == 3 && !memcmp(d.nodes[s].str, "x\xc3\xa9", 3));
    CHECK(z && d.nodes[z].type == JSON_BOOL && d.nodes[z].boolean == 0);
    CHECK(!json_member(&d, 0, "missing"));
    CHECK(arr && d.nodes[arr].type == JSON_ARRAY && d.nodes[arr].count == 3);
    int count = 0;
    json_type types[3];
    for (uint32_t c = json_first(&d, arr); c; c = json_next(&d, arr, c)) types[count++] = d.nodes[c].type;
    CHECK(count == 3);
    CHECK(types[0] == JSON_NUMBER && types[1] == JSON_ARRAY && types[2] == JSON_OBJECT);
    json_free(&d);
}

/* The real Qwen3-4B config.json (transformers 4.51 style), abridged only in its order. */
static const char qwen3_4b_json[] =
    "{\n  \"architectures\": [\"Qwen3ForCausalLM\"],\n  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": 151643,\n  \"eos_token_id\": 151645,\n"
    "  \"head_dim\": 128,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": 2560,\n"
    "  \"initializer_range\": 0.02,\n  \"intermediate_size\": 9728,\n"
    "  \"max_position_embeddings\": 40960,\n  \"max_window_layers\": 36,\n"
    "  \"model_type\": \"qwen3\",\n  \"num_attention_heads\": 32,\n  \"num_hidden_layers\": 36,\n"
    "  \"num_key_value_heads\": 8,\n  \"rms_norm_eps\": 1e-06,\n  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 1000000,\n  \"sliding_window\": null,\n  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n  \"transformers_version\": \"4.51.0\",\n"
    "  \"use_cache\": true,\n  \"use_sliding_window\": false,\n  \"vocab_size\": 151936\n}\n";

static int same_config(const qmm_llm_config *a, const qmm_llm_config *b)
{
    return a->hidden_size == b->hidden_size && a->intermediate_size == b->intermediate_size &&
           a->num_layers == b->num_layers && a->num_heads == b->num_heads &&
           a->num_kv_heads == b->num_kv_heads && a->head_dim == b->head_dim &&
           a->vocab_size == b->vocab_size &&
           a->max_position_embeddings == b->max_position_embeddings &&
           a->rope_theta == b->rope_theta && a->rms_norm_eps == b->rms_norm_eps &&
           a->tie_word_embeddings == b->tie_word_embeddings;
}

static void config_qwen3_4b_matches_preset(void)
{
    qmm_llm_config c, p;
    CHECK_OK(qmm_llm_config_parse(qwen3_4b_json, strlen(qwen3_4b_json), &c));
    CHECK_OK(qmm_llm_config_preset("qwen3-4b", &p));
    CHECK(same_config(&c, &p));
    CHECK(c.hidden_size == 2560 && c.intermediate_size == 9728 && c.num_layers == 36);
    CHECK(c.num_heads == 32 && c.num_kv_heads == 8 && c.head_dim == 128);
    CHECK(c.vocab_size == 151936 && c.rope_theta == 1e6 && c.rms_norm_eps == 1e-6);
    CHECK(c.tie_word_embeddings == 1);
}

static void config_presets(void)
{
    const struct {
        const char *name;
        int64_t h, inter, layers, heads, kv;
        int tied;
    } want[] = {
        {"qwen3-0.6b", 1024, 3072, 28, 16, 8, 1},
        {"qwen3-1.7b", 2048, 6144, 28, 16, 8, 1},
        {"qwen3-4b", 2560, 9728, 36, 32, 8, 1},
        {"qwen3-8b", 4096, 12288, 36, 32, 8, 0},
        {"qwen3-14b", 5120, 17408, 40, 40, 8, 0},
        {"qwen3-32b", 5120, 25600, 64, 64, 8, 0},
    };
    const int nwant = (int)(sizeof want / sizeof want[0]);
    int count = 0;
    while (qmm_llm_preset_name(count)) count++;
    CHECK(count == nwant);
    for (int i = 0; i < nwant; i++) {
        qmm_llm_config c;
        CHECK_OK(qmm_llm_config_preset(want[i].name, &c));
        CHECK_OK(qmm_llm_config_validate(&c));
        CHECKF(c.hidden_size == want[i].h && c.intermediate_size == want[i].inter &&
                   c.num_layers == want[i].layers && c.num_heads == want[i].heads &&
                   c.num_kv_heads == want[i].kv && c.tie_word_embeddings == want[i].tied &&
                   c.head_dim == 128 && c.vocab_size == 151936,
               "preset %s", want[i].name);
        /* config.json text of the preset parses back to the same config */
        char text[4096];
        qmm_llm_config back;
        CHECK_OK(llm_config_json(&c, text, sizeof text));
        CHECK_OK(qmm_llm_config_parse(text, strlen(text), &back));
        CHECK(same_config(&c, &back));
    }
    qmm_llm_config c;
    CHECK_STATUS(qmm_llm_config_preset("qwen3-99b", &c), QMM_ERR_NOT_FOUND);
    CHECK(qmm_llm_preset_name(-1) == NULL);
}

static void config_shapes(void)
{
    qmm_llm_config c;
    qmm_llm_config_preset("qwen3-4b", &c);
    const int64_t want[QMM_LLM_LINEAR_COUNT][2] = {{4096, 2560}, {1024, 2560}, {1024, 2560},
                                                   {2560, 4096}, {9728, 2560}, {9728, 2560},
                                                   {2560, 9728}};
    for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
        int64_t n, k;
        CHECK_OK(qmm_llm_linear_shape(&c, (qmm_llm_linear)i, &n, &k));
        CHECKF(n == want[i][0] && k == want[i][1], "%s: [%lld, %lld]",
               qmm_llm_linear_name((qmm_llm_linear)i), (long long)n, (long long)k);
    }
    int64_t n, k;
    CHECK_STATUS(qmm_llm_linear_shape(&c, QMM_LLM_LINEAR_COUNT, &n, &k), QMM_ERR_ARG);
    CHECK(qmm_llm_linear_name(QMM_LLM_LINEAR_COUNT) == NULL);
}

/* Replace the first occurrence of from in the 4B config with to and parse. */
static qmm_status parse_edited(const char *from, const char *to, qmm_llm_config *c)
{
    const char *at = strstr(qwen3_4b_json, from);
    if (!at) return QMM_ERR_ARG;
    char buf[4096];
    size_t pre = (size_t)(at - qwen3_4b_json);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)pre, qwen3_4b_json, to, at + strlen(from));
    return qmm_llm_config_parse(buf, strlen(buf), c);
}

static void config_errors(void)
{
    qmm_llm_config c;
    const struct {
        const char *from, *to;
        qmm_status want;
    } cases[] = {
        {"\"hidden_size\": 2560", "\"hidden_sizes\": 2560", QMM_ERR_NOT_FOUND},
        {"\"hidden_size\": 2560", "\"hidden_size\": \"2560\"", QMM_ERR_FORMAT},
        {"\"hidden_size\": 2560", "\"hidden_size\": 2560.5", QMM_ERR_FORMAT},
        {"\"hidden_size\": 2560", "\"hidden_size\": 2500", QMM_ERR_SHAPE},
        {"\"hidden_size\": 2560", "\"hidden_size\": -2560", QMM_ERR_RANGE},
        {"\"num_key_value_heads\": 8", "\"num_key_value_heads\": 7", QMM_ERR_SHAPE},
        {"\"head_dim\": 128", "\"head_dim\": 127", QMM_ERR_SHAPE},
        {"\"intermediate_size\": 9728", "\"intermediate_size\": 9729", QMM_ERR_SHAPE},
        {"\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"yarn\"}", QMM_ERR_UNSUPPORTED},
        {"\"model_type\": \"qwen3\"", "\"model_type\": \"llama\"", QMM_ERR_UNSUPPORTED},
        {"\"attention_bias\": false", "\"attention_bias\": true", QMM_ERR_UNSUPPORTED},
        {"\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1", QMM_ERR_FORMAT},
        {"\"rope_theta\": 1000000", "\"rope_theta\": 0.5", QMM_ERR_RANGE},
        {"\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": 0", QMM_ERR_RANGE},
        {"\"vocab_size\": 151936", "\"vocab_size\": 151936,", QMM_ERR_FORMAT},
        {"\"use_cache\": true", "\"quantization\": {\"group_size\": 16, \"bits\": 4}",
         QMM_ERR_UNSUPPORTED},
        {"\"use_cache\": true", "\"quantization\": {\"group_size\": 100, \"bits\": 4}",
         QMM_ERR_UNSUPPORTED},
        {"\"use_cache\": true", "\"quantization\": {\"group_size\": 64, \"bits\": 3}",
         QMM_ERR_UNSUPPORTED},
        {"\"use_cache\": true", "\"quantization\": {\"group_size\": 64, \"bits\": 4, "
         "\"mode\": \"mxfp4\"}", QMM_ERR_UNSUPPORTED},
        {"\"use_cache\": true", "\"quantization\": {\"group_size\": 64, \"bits\": 4}, "
         "\"quantization_config\": {\"group_size\": 128, \"bits\": 4}", QMM_ERR_FORMAT},
        {"\"use_cache\": true", "\"quantization\": {\"group_size\": 64, \"bits\": 4}", QMM_OK},
        {"\"use_cache\": true", "\"quantization_config\": {\"group_size\": 32, \"bits\": 4}",
         QMM_OK},
        {"\"use_cache\": true", "\"quantization\": {\"group_size\": 128, \"bits\": 8}",
         QMM_ERR_UNSUPPORTED},
        {"\"use_cache\": true", "\"quantization\": {\"group_size\": 128, \"bits\": 4}", QMM_OK},
        {"\"use_cache\": true", "\"rope_parameters\": {\"rope_type\": \"yarn\"}",
         QMM_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qmm_status st = parse_edited(cases[i].from, cases[i].to, &c);
        CHECKF(st == cases[i].want, "edit %zu (%s -> %s) gave %s (%s), want %s", i,
               cases[i].from, cases[i].to, qmm_status_name(st), qmm_last_error(),
               qmm_status_name(cases[i].want));
        if (st) CHECKF(qmm_last_error()[0] != 0, "edit %zu left no message", i);
    }
    /* the group size: from "quantization", else "quantization_config", else 128 */
    CHECK_OK(parse_edited("\"use_cache\": true", "\"quantization\": {\"group_size\": 64, "
                          "\"bits\": 4, \"mode\": \"affine\"}", &c));
    CHECK(c.group_size == 64);
    CHECK_OK(parse_edited("\"use_cache\": true", "\"quantization_config\": {\"group_size\": 32, "
                          "\"bits\": 4}", &c));
    CHECK(c.group_size == 32);
    CHECK_OK(parse_edited("\"use_cache\": true", "\"use_cache\": false", &c));
    CHECK(c.group_size == 128);
    /* a width that fits groups of 64 but not of 128: refused when quantized in groups of 128,
     * read as groups of 64 when config.json names no quantization (a bf16 checkpoint) */
    CHECK_STATUS(parse_edited("\"intermediate_size\": 9728", "\"intermediate_size\": 9664, "
                              "\"quantization\": {\"group_size\": 128, \"bits\": 4}", &c),
                 QMM_ERR_SHAPE);
    CHECK_OK(parse_edited("\"intermediate_size\": 9728", "\"intermediate_size\": 9664", &c));
    CHECK(c.group_size == 64);
    /* transformers 5 puts rope_theta inside rope_parameters */
    CHECK_OK(parse_edited("\"rope_theta\": 1000000", "\"rope_parameters\": {\"rope_type\": "
                          "\"default\", \"rope_theta\": 5000}", &c));
    CHECK(c.rope_theta == 5000.0);
    /* defaults: head_dim = hidden / heads, kv heads = heads, untied */
    const char *min = "{\"hidden_size\": 1024, \"intermediate_size\": 2048, "
                      "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 10}";
    CHECK_OK(qmm_llm_config_parse(min, strlen(min), &c));
    CHECK(c.head_dim == 128 && c.num_kv_heads == 8 && c.tie_word_embeddings == 0);
    CHECK(c.rope_theta == 10000.0 && c.rms_norm_eps == 1e-6);
    CHECK_STATUS(qmm_llm_config_parse("[1]", 3, &c), QMM_ERR_FORMAT);
    CHECK_STATUS(qmm_llm_config_load("/nonexistent/config.json", &c), QMM_ERR_NOT_FOUND);
    CHECK_STATUS(qmm_llm_config_validate(NULL), QMM_ERR_NULL);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, json_valid_documents, json_invalid_documents, json_values_and_traversal,
               config_qwen3_4b_matches_preset, config_presets, config_shapes, config_errors);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
