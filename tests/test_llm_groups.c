/* Checkpoints in groups of 32, 64 and 128: quantize-checkpoint --group-size writes what the
 * loader (and MLX) reads, with the tokenizer files beside it; the CPU forward runs every group
 * size; and every way config.json can disagree with the tensors about the quantization (group
 * size, bits, per-layer entries, a group that does not divide K) is a clear error naming the
 * tensor or layer. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "llm/hf_random.h"
#include "llm/model.h"

static const qmm_llm_config tiny = {256, 512, 2, 4, 2, 64, 1000, 512, 1e6, 1e-6, 0, 128};

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *t = calloc(1, 1 << 16);
    size_t n = fread(t, 1, (1 << 16) - 1, f);
    t[n] = 0;
    fclose(f);
    return t;
}

/* dir/config.json with its first `from` replaced by `to` (saved as the original in *orig). */
static int edit_config(const char *dir, const char *orig, const char *from, const char *to)
{
    char path[700], out[1 << 16];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *at = strstr(orig, from);
    CHECKF(at != NULL, "config.json has no '%s'", from);
    if (!at) return 0;
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - orig), orig, to, at + strlen(from));
    test_write_text(path, out);
    return 1;
}

/* A random HF checkpoint of c (with tokenizer files) in dir/hf, quantized into dir/<name>. */
static int quantize(const char *dir, const qmm_llm_config *c, int group, const char *name)
{
    char hf[600], out[600], path[700];
    snprintf(hf, sizeof hf, "%s/hf", dir);
    snprintf(out, sizeof out, "%s/%s", dir, name);
    struct stat sb;
    if (stat(hf, &sb)) {
        mkdir(hf, 0755);
        qmm_status st = llm_write_random_hf(hf, c, test_rand_u64(), ST_BF16);
        CHECKF(st == QMM_OK, "writing the HF checkpoint: %s", qmm_last_error());
        if (st) return 0;
        snprintf(path, sizeof path, "%s/tokenizer.json", hf);
        test_write_text(path, "{\"version\": \"1.0\", \"model\": {}}\n");
        snprintf(path, sizeof path, "%s/generation_config.json", hf);
        test_write_text(path, "{\"do_sample\": false}\n");
    }
    qmm_status st = qmm_llm_quantize_checkpoint_group(hf, out, group, NULL);
    CHECKF(st == QMM_OK, "quantize-checkpoint --group-size %d: %s", group, qmm_last_error());
    return st == QMM_OK;
}

/* Every group size through the writer, the loader and the CPU forward. */
static void writer_and_loader_per_group(void)
{
    char dir[512];
    if (!test_make_tmpdir(dir, sizeof dir, "groups")) return;
    const int groups[] = {32, 64, 128};
    int32_t ids[5] = {1, 7, 300, 999, 42}, first[3] = {-1, -1, -1};
    for (int gi = 0; gi < 3; gi++) {
        int g = groups[gi];
        char name[32], path[700];
        snprintf(name, sizeof name, "g%d", g);
        if (!quantize(dir, &tiny, g, name)) break;
        snprintf(path, sizeof path, "%s/%s/config.json", dir, name);
        char *cfg = read_text(path);
        char want[200];
        snprintf(want, sizeof want, "\"quantization\": {\"group_size\": %d, \"bits\": 4, "
                 "\"mode\": \"affine\"}, \"quantization_config\": {\"group_size\": %d", g, g);
        CHECKF(cfg && strstr(cfg, want), "g%d: config.json lacks %s", g, want);
        free(cfg);
        /* the tokenizer and generation files are copied; tokenizer_config.json was absent */
        snprintf(path, sizeof path, "%s/%s/tokenizer.json", dir, name);
        char *tok = read_text(path);
        CHECK(tok && !strcmp(tok, "{\"version\": \"1.0\", \"model\": {}}\n"));
        free(tok);
        snprintf(path, sizeof path, "%s/%s/generation_config.json", dir, name);
        CHECK((tok = read_text(path)) != NULL);
        free(tok);
        snprintf(path, sizeof path, "%s/%s/tokenizer_config.json", dir, name);
        CHECK(read_text(path) == NULL);

        snprintf(path, sizeof path, "%s/%s", dir, name);
        qmm_llm_model *m = NULL;
        CHECK_OK(qmm_llm_model_load(path, &m));
        if (!m) continue;
        const qmm_w4 *w;
        CHECK(qmm_llm_model_config(m)->group_size == g);
        CHECK_OK(qmm_llm_model_embedding(m, &w));
        CHECK(w->group == g && w->scales_count == (size_t)(tiny.vocab_size * tiny.hidden_size / g));
        CHECK_OK(qmm_llm_model_lm_head(m, &w));
        CHECK(w->group == g);
        for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
            CHECK_OK(qmm_llm_model_linear(m, 1, (qmm_llm_linear)i, &w));
            CHECK(w->group == g);
            CHECK_OK(qmm_w4_validate(w));
        }
        qmm_llm_cpu_session *s = NULL;
        CHECK_OK(qmm_llm_cpu_session_create(m, 16, 0, &s));
        int32_t out[4];
        if (s) CHECK_OK(qmm_llm_cpu_generate(s, ids, 5, 4, out, NULL));
        first[gi] = s ? out[0] : -1;
        CHECK(first[gi] >= 0 && first[gi] < tiny.vocab_size);
        qmm_llm_cpu_session_destroy(s);
        qmm_llm_model_destroy(m);
    }
    printf("    first greedy token at groups of 32, 64, 128: %d %d %d\n", first[0], first[1],
           first[2]);
    /* bad group sizes never create the output */
    char hf[600], out[600];
    snprintf(hf, sizeof hf, "%s/hf", dir);
    snprintf(out, sizeof out, "%s/g48", dir);
    CHECK_STATUS(qmm_llm_quantize_checkpoint_group(hf, out, 48, NULL), QMM_ERR_ARG);
    struct stat sb;
    CHECK(stat(out, &sb) != 0);
    test_rm_tree(dir);
}

/* config.json against the tensors of a g64 checkpoint (K = 320 for q/k/v/gate/up, so a group of
 * 128 does not divide it). */
static void config_disagrees_with_tensors(void)
{
    char dir[512], mlx[600], path[700];
    if (!test_make_tmpdir(dir, sizeof dir, "groups")) return;
    qmm_llm_config c = tiny;
    c.hidden_size = 320;
    c.num_heads = 5;
    c.num_kv_heads = 1;
    c.group_size = 64;
    if (!quantize(dir, &c, 64, "mlx")) {
        test_rm_tree(dir);
        return;
    }
    snprintf(mlx, sizeof mlx, "%s/mlx", dir);
    snprintf(path, sizeof path, "%s/config.json", mlx);
    char *orig = read_text(path);
    const char *q = "\"quantization\": {\"group_size\": 64, \"bits\": 4, \"mode\": \"affine\"}, "
                    "\"quantization_config\": {\"group_size\": 64, \"bits\": 4, \"mode\": "
                    "\"affine\"}";
    const struct {
        const char *to;
        qmm_status want;
        const char *named; /* the tensor or layer the message must name */
    } cases[] = {
        /* the checkpoint as written */
        {NULL, QMM_OK, ""},
        /* groups of 32 claimed: the scales are [N, K/64] */
        {"\"quantization\": {\"group_size\": 32, \"bits\": 4}", QMM_ERR_FORMAT,
         "model.embed_tokens.scales"},
        /* groups of 128 do not divide K = 320 (the config check catches it first) */
        {"\"quantization\": {\"group_size\": 128, \"bits\": 4}", QMM_ERR_SHAPE, "hidden_size"},
        {"\"quantization\": {\"group_size\": 64, \"bits\": 8}", QMM_ERR_UNSUPPORTED, "bits"},
        {"\"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.1.mlp.up_proj\": "
         "{\"group_size\": 64, \"bits\": 3}}", QMM_ERR_UNSUPPORTED, "model.layers.1.mlp.up_proj"},
        {"\"quantization\": {\"group_size\": 64, \"bits\": 4, \"lm_head\": false}",
         QMM_ERR_UNSUPPORTED, "lm_head"},
        {"\"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.0.mlp.down_proj\": "
         "{\"group_size\": 128, \"bits\": 4}}", QMM_ERR_FORMAT, "model.layers.0.mlp.down_proj.scales"},
        {"\"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.0.self_attn.q_proj\": "
         "{\"group_size\": 128, \"bits\": 4}}", QMM_ERR_SHAPE, "model.layers.0.self_attn.q_proj"},
        {"\"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.1.self_attn.v_proj\": "
         "{\"group_size\": 48}}", QMM_ERR_UNSUPPORTED, "model.layers.1.self_attn.v_proj"},
        {"\"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.1.self_attn.v_proj\": "
         "{\"group_size\": 64, \"bits\": 4, \"mode\": \"mxfp4\"}}", QMM_ERR_UNSUPPORTED,
         "model.layers.1.self_attn.v_proj"},
        {"\"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.1.self_attn.v_proj\": "
         "7}", QMM_ERR_FORMAT, "model.layers.1.self_attn.v_proj"},
        /* per-layer entries that agree with the tensors load */
        {"\"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.1.self_attn.v_proj\": "
         "{\"group_size\": 64, \"bits\": 4, \"mode\": \"affine\"}, \"lm_head\": true}", QMM_OK, ""},
    };
    for (size_t i = 0; orig && i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].to && !edit_config(mlx, orig, q, cases[i].to)) continue;
        if (!cases[i].to) test_write_text(path, orig);
        qmm_llm_model *m = (qmm_llm_model *)1;
        qmm_status st = qmm_llm_model_load(mlx, &m);
        CHECKF(st == cases[i].want, "case %zu: got %s (%s), want %s", i, qmm_status_name(st),
               qmm_last_error(), qmm_status_name(cases[i].want));
        CHECKF(strstr(qmm_last_error(), cases[i].named) != NULL, "case %zu: '%s' does not name %s",
               i, qmm_last_error(), cases[i].named);
        if (st) {
            printf("    %s: %s\n", qmm_status_name(st), qmm_last_error());
            CHECK(m == NULL);
        } else {
            qmm_llm_model_destroy(m);
        }
    }
    free(orig);
    test_rm_tree(dir);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, writer_and_loader_per_group, config_disagrees_with_tensors);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
