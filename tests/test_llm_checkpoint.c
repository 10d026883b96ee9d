/* Checkpoints: the writer (bf16/f32 HF -> MLX 4-bit) round trip on a tiny Qwen3, sharded MLX
 * checkpoints, and every way a checkpoint can disagree with its config (missing tensors, wrong
 * dtypes and shapes, truncated or corrupt files) -> a clear error naming the tensor. */
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "llm/hf_random.h"
#include "llm/model.h"
#include "llm/st_writer.h"

static const qmm_llm_config tiny = {256, 512, 2, 4, 2, 64, 1000, 512, 1e6, 1e-6, 1, 128};



static void sub(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

/* sub, and make that directory (mkdir's result) */
static int sub_dir(char *out, size_t size, const char *dir, const char *name)
{
    sub(out, size, dir, name);
    return mkdir(out, 0755);
}

/* Entries in a directory other than . and .. */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    if (!a || !b) {
        test_fail(__FILE__, __LINE__, "cannot copy %s to %s", from, to);
        if (a) fclose(a);
        if (b) fclose(b);
        return;
    }
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a))) fwrite(buf, 1, n, b);
    fclose(a);
    fclose(b);
}

/* A random HF checkpoint of c in dir/hf, quantized into dir/mlx. */
static int write_mlx(const char *dir, const qmm_llm_config *c, st_dtype dtype,
                     qmm_llm_quantize_report *rep)
{
    char hf[600], mlx[600];
    sub(mlx, sizeof mlx, dir, "mlx");
    if (sub_dir(hf, sizeof hf, dir, "hf")) return 0;
    qmm_status st = llm_write_random_hf(hf, c, test_rand_u64(), dtype);
    CHECKF(st == QMM_OK, "writing the HF checkpoint: %s", qmm_last_error());
    if (st) return 0;
    st = qmm_llm_quantize_checkpoint(hf, mlx, rep);
    CHECKF(st == QMM_OK, "quantize-checkpoint: %s", qmm_last_error());
    return st == QMM_OK;
}

/* A fresh directory (into dir[size]) holding a random HF checkpoint of c in dir/hf, quantized
 * into dir/mlx; 0 (a failed case, the directory removed) when either cannot be made. */
static int make_mlx(char *dir, size_t size, const qmm_llm_config *c, st_dtype dtype,
                    qmm_llm_quantize_report *rep)
{
    if (!test_make_tmpdir(dir, size, "ckpt")) return 0;
    if (!write_mlx(dir, c, dtype, rep)) {
        test_rm_tree(dir);
        return 0;
    }
    return 1;
}

/* What the writer must have produced for one linear: qmm_quantize of the input tensor. */
static void check_linear(const st_set *in, const char *prefix, const qmm_w4 *got)
{
    char name[300];
    snprintf(name, sizeof name, "%s.weight", prefix);
    const st_tensor *t = st_find(in, name);
    CHECKF(t != NULL, "input lacks %s", name);
    if (!t) return;
    qmm_w4 want;
    CHECK_OK(qmm_w4_alloc(got->n, got->k, &want));
    size_t esz = st_dtype_size(t->dtype);
    void *src = malloc((size_t)t->nbytes);
    memcpy(src, t->data, (size_t)t->nbytes);
    CHECK_OK(qmm_quantize(src, esz == 4 ? QMM_F32 : QMM_BF16, &want, NULL));
    CHECKF(!memcmp(want.packed, got->packed, want.packed_count * 4) &&
               !memcmp(want.scales, got->scales, want.scales_count * 2) &&
               !memcmp(want.biases, got->biases, want.biases_count * 2),
           "%s differs from qmm_quantize of the input", prefix);
    free(src);
    qmm_w4_free(&want);
}

static void roundtrip(const qmm_llm_config *c, st_dtype dtype)
{
    char dir[512], path[600];
    qmm_llm_quantize_report rep;
    if (!make_mlx(dir, sizeof dir, c, dtype, &rep)) return;
    int64_t lin = 1 + (c->tie_word_embeddings ? 0 : 1) + c->num_layers * QMM_LLM_LINEAR_COUNT;
    int64_t norms = 1 + c->num_layers * QMM_LLM_NORM_COUNT;
    CHECKF(rep.quantized == lin && rep.copied == norms && rep.ignored == 0,
           "report: %lld quantized, %lld copied, %lld ignored", (long long)rep.quantized,
           (long long)rep.copied, (long long)rep.ignored);
    CHECKF(rep.worst_rel_frob > 0.01 && rep.worst_rel_frob < 0.2, "worst rel error %g",
           rep.worst_rel_frob);
    sub(path, sizeof path, dir, "mlx");
    CHECK(dir_entries(path) == 2); /* model.safetensors + config.json, no temporaries */
    qmm_llm_model *m = NULL;
    CHECK_OK(qmm_llm_model_load(path, &m));
    if (!m) {
        test_rm_tree(dir);
        return;
    }
    const qmm_llm_config *mc = qmm_llm_model_config(m);
    CHECK(mc->hidden_size == c->hidden_size && mc->num_layers == c->num_layers &&
          mc->tie_word_embeddings == c->tie_word_embeddings && mc->vocab_size == c->vocab_size);
    st_set in;
    sub(path, sizeof path, dir, "hf");
    CHECK_OK(st_open(path, &in));
    const qmm_w4 *w, *head;
    CHECK_OK(qmm_llm_model_embedding(m, &w));
    check_linear(&in, "model.embed_tokens", w);
    CHECK_OK(qmm_llm_model_lm_head(m, &head));
    if (c->tie_word_embeddings) CHECK(head->packed == w->packed);
    else check_linear(&in, "lm_head", head);
    char prefix[256];
    for (int64_t l = 0; l < c->num_layers; l++)
        for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
            CHECK_OK(qmm_llm_model_linear(m, l, (qmm_llm_linear)i, &w));
            CHECK_OK(qmm_w4_validate(w));
            llm_linear_prefix(l, (qmm_llm_linear)i, prefix, sizeof prefix);
            check_linear(&in, prefix, w);
            CHECK(((uintptr_t)w->packed % 4) == 0);
        }
    const qmm_bf16 *nw;
    CHECK_OK(qmm_llm_model_norm(m, c->num_layers - 1, QMM_LLM_K_NORM, &nw));
    snprintf(prefix, sizeof prefix, "model.layers.%lld.self_attn.k_norm.weight",
             (long long)(c->num_layers - 1));
    const st_tensor *t = st_find(&in, prefix);
    CHECK(t != NULL);
    if (t) {
        for (int64_t i = 0; i < c->head_dim; i++) {
            float v;
            if (dtype == ST_F32) memcpy(&v, t->data + 4 * i, 4);
            else {
                qmm_bf16 b;
                memcpy(&b, t->data + 2 * i, 2);
                v = qmm_bf16_to_f32(b);
            }
            CHECK(qmm_bf16_to_f32(nw[i]) == qmm_bf16_to_f32(qmm_f32_to_bf16(v)));
        }
    }
    CHECK(qmm_llm_model_weight_bytes(m) > 0);
    CHECK_STATUS(qmm_llm_model_linear(m, c->num_layers, QMM_LLM_Q, &w), QMM_ERR_RANGE);
    st_close(&in);
    qmm_llm_model_destroy(m);
    test_rm_tree(dir);
}

static void roundtrip_tied_bf16(void) { roundtrip(&tiny, ST_BF16); }

static void roundtrip_untied_f32(void)
{
    qmm_llm_config c = tiny;
    c.tie_word_embeddings = 0;
    c.num_layers = 1;
    roundtrip(&c, ST_F32);
}

/* Rewrite dir/mlx/model.safetensors into out_dir with one edit applied to tensor `name`:
 * 'd' drop it, 't' retype (same byte size), 's' swap its two dimensions. */
static void rewrite(const char *mlx_dir, const char *out_dir, const char *name, char edit,
                    st_dtype new_type)
{
    st_set s;
    CHECK_OK(st_open(mlx_dir, &s));
    st_entry *e = calloc(s.count, sizeof *e);
    const void **data = calloc(s.count, sizeof *data);
    size_t n = 0;
    for (size_t i = 0; i < s.count; i++) {
        const st_tensor *t = s.sorted[i];
        int hit = !strcmp(t->name, name);
        if (hit && edit == 'd') continue;
        snprintf(e[n].name, sizeof e[n].name, "%s", t->name);
        e[n].dtype = hit && edit == 't' ? new_type : t->dtype;
        e[n].ndim = t->ndim;
        memcpy(e[n].shape, t->shape, sizeof t->shape);
        if (hit && edit == 's') {
            e[n].shape[0] = t->shape[1];
            e[n].shape[1] = t->shape[0];
        }
        data[n++] = t->data;
    }
    char path[700], cfg[700];
    sub(path, sizeof path, out_dir, "model.safetensors");
    CHECK_OK(st_write_file(path, e, data, n, "mlx"));
    sub(path, sizeof path, mlx_dir, "config.json");
    sub(cfg, sizeof cfg, out_dir, "config.json");
    copy_file(path, cfg);
    free(e);
    free(data);
    st_close(&s);
}

static void load_rejects_bad_checkpoints(void)
{
    char dir[512], mlx[600], bad[600], path[700];
    if (!make_mlx(dir, sizeof dir, &tiny, ST_BF16, NULL)) return;
    sub(mlx, sizeof mlx, dir, "mlx");
    sub_dir(bad, sizeof bad, dir, "bad");
    const struct {
        const char *name;
        char edit;
        st_dtype type;
        qmm_status want;
    } cases[] = {
        {"model.layers.1.mlp.up_proj.scales", 'd', ST_BF16, QMM_ERR_NOT_FOUND},
        {"model.embed_tokens.weight", 'd', ST_BF16, QMM_ERR_NOT_FOUND},
        {"model.layers.0.self_attn.q_norm.weight", 'd', ST_BF16, QMM_ERR_NOT_FOUND},
        {"model.norm.weight", 'd', ST_BF16, QMM_ERR_NOT_FOUND},
        {"model.layers.0.self_attn.q_proj.weight", 't', ST_I32, QMM_ERR_FORMAT},
        {"model.layers.0.mlp.down_proj.biases", 't', ST_F16, QMM_ERR_FORMAT},
        {"model.layers.0.self_attn.k_proj.biases", 's', ST_BF16, QMM_ERR_FORMAT},
        {"model.layers.1.self_attn.o_proj.weight", 's', ST_U32, QMM_ERR_FORMAT},
        {"model.norm.weight", 't', ST_I16, QMM_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite(mlx, bad, cases[i].name, cases[i].edit, cases[i].type);
        qmm_llm_model *m = (qmm_llm_model *)1;
        qmm_status st = qmm_llm_model_load(bad, &m);
        CHECKF(st == cases[i].want, "%c %s: got %s (%s)", cases[i].edit, cases[i].name,
               qmm_status_name(st), qmm_last_error());
        CHECKF(strstr(qmm_last_error(), cases[i].name) != NULL, "message '%s' does not name %s",
               qmm_last_error(), cases[i].name);
        CHECK(m == NULL);
    }
    /* the config disagrees with the tensors */
    rewrite(mlx, bad, "none", 'd', ST_BF16);
    qmm_llm_config wide = tiny;
    wide.hidden_size = 384;
    char text[4096];
    llm_config_json(&wide, text, sizeof text);
    sub(path, sizeof path, bad, "config.json");
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    qmm_llm_model *m;
    CHECK_STATUS(qmm_llm_model_load(bad, &m), QMM_ERR_FORMAT);
    /* no config.json at all */
    remove(path);
    CHECK_STATUS(qmm_llm_model_load(bad, &m), QMM_ERR_NOT_FOUND);
    /* truncated and corrupt files */
    sub(path, sizeof path, mlx, "config.json");
    char cfg[700];
    sub(cfg, sizeof cfg, bad, "config.json");
    copy_file(path, cfg);
    sub(path, sizeof path, mlx, "model.safetensors");
    FILE *in = fopen(path, "rb");
    fseek(in, 0, SEEK_END);
    long size = ftell(in);
    unsigned char *all = malloc((size_t)size);
    fseek(in, 0, SEEK_SET);
    CHECK(fread(all, 1, (size_t)size, in) == (size_t)size);
    fclose(in);
    sub(path, sizeof path, bad, "model.safetensors");
    const long cuts[] = {0, 4, 8, 100, size / 2, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        f = fopen(path, "wb");
        fwrite(all, 1, (size_t)cuts[i], f);
        fclose(f);
        qmm_status st = qmm_llm_model_load(bad, &m);
        CHECKF(st == QMM_ERR_FORMAT, "file cut to %ld of %ld bytes: %s", cuts[i], size,
               qmm_status_name(st));
    }
    /* a header length that claims more than the file has */
    f = fopen(path, "wb");
    unsigned char lie[8] = {0xFF, 0xFF, 0xFF, 0x00, 0, 0, 0, 0};
    fwrite(lie, 1, 8, f);
    fwrite(all + 8, 1, (size_t)size - 8, f);
    fclose(f);
    CHECK_STATUS(qmm_llm_model_load(bad, &m), QMM_ERR_FORMAT);
    /* garbage in the header */
    f = fopen(path, "wb");
    fwrite(all, 1, 8, f);
    for (int i = 0; i < 64; i++) fputc('#', f);
    fwrite(all + 72, 1, (size_t)size - 72, f);
    fclose(f);
    CHECK_STATUS(qmm_llm_model_load(bad, &m), QMM_ERR_FORMAT);
    free(all);
    CHECK_STATUS(qmm_llm_model_load("/nonexistent-dir/x.safetensors", &m), QMM_ERR_NOT_FOUND);
    test_rm_tree(dir);
}

static void sharded_mlx_checkpoint(void)
{
    char dir[512], mlx[600], shard[600], path[700];
    if (!make_mlx(dir, sizeof dir, &tiny, ST_BF16, NULL)) return;
    sub(mlx, sizeof mlx, dir, "mlx");
    sub_dir(shard, sizeof shard, dir, "sharded");
    st_set s;
    CHECK_OK(st_open(mlx, &s));
    /* tensors alternate between two shards; the index maps each */
    size_t half[2] = {0, 0};
    st_entry *e[2] = {calloc(s.count, sizeof(st_entry)), calloc(s.count, sizeof(st_entry))};
    const void **d[2] = {calloc(s.count, sizeof(void *)), calloc(s.count, sizeof(void *))};
    size_t cap = 64 + s.count * 128;
    char *index = malloc(cap);
    size_t o = (size_t)snprintf(index, cap, "{\"metadata\": {}, \"weight_map\": {");
    for (size_t i = 0; i < s.count; i++) {
        int which = (int)(i % 2);
        const st_tensor *t = s.sorted[i];
        st_entry *en = &e[which][half[which]];
        snprintf(en->name, sizeof en->name, "%s", t->name);
        en->dtype = t->dtype;
        en->ndim = t->ndim;
        memcpy(en->shape, t->shape, sizeof t->shape);
        d[which][half[which]++] = t->data;
        o += (size_t)snprintf(index + o, cap - o, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                              i ? ", " : "", t->name, which + 1);
    }
    snprintf(index + o, cap - o, "}}");
    for (int w = 0; w < 2; w++) {
        char name[64];
        snprintf(name, sizeof name, "model-0000%d-of-00002.safetensors", w + 1);
        sub(path, sizeof path, shard, name);
        CHECK_OK(st_write_file(path, e[w], d[w], half[w], "mlx"));
    }
    sub(path, sizeof path, shard, "model.safetensors.index.json");
    FILE *f = fopen(path, "wb");
    fputs(index, f);
    fclose(f);
    char from[700];
    sub(from, sizeof from, mlx, "config.json");
    sub(path, sizeof path, shard, "config.json");
    copy_file(from, path);
    qmm_llm_model *a = NULL, *b = NULL;
    CHECK_OK(qmm_llm_model_load(mlx, &a));
    CHECK_OK(qmm_llm_model_load(shard, &b));
    if (a && b) {
        for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
            const qmm_w4 *x, *y;
            qmm_llm_model_linear(a, 1, (qmm_llm_linear)i, &x);
            qmm_llm_model_linear(b, 1, (qmm_llm_linear)i, &y);
            CHECK(!memcmp(x->packed, y->packed, x->packed_count * 4));
            CHECK(!memcmp(x->scales, y->scales, x->scales_count * 2));
        }
    }
    qmm_llm_model_destroy(a);
    qmm_llm_model_destroy(b);
    free(index);
    for (int w = 0; w < 2; w++) {
        free(e[w]);
        free(d[w]);
    }
    st_close(&s);
    test_rm_tree(dir);
}

static void writer_leaves_nothing_on_error(void)
{
    char dir[512], hf[600], out[600], path[700];
    if (!test_make_tmpdir(dir, sizeof dir, "ckpt")) return;
    sub_dir(hf, sizeof hf, dir, "hf");
    sub(out, sizeof out, dir, "out");
    CHECK_OK(llm_write_random_hf(hf, &tiny, 7, ST_BF16));
    /* drop one input tensor: the writer fails naming it and leaves out/ empty */
    char bad[600];
    sub_dir(bad, sizeof bad, dir, "hf_bad");
    rewrite(hf, bad, "model.layers.1.mlp.gate_proj.weight", 'd', ST_BF16);
    CHECK_STATUS(qmm_llm_quantize_checkpoint(bad, out, NULL), QMM_ERR_NOT_FOUND);
    CHECK(strstr(qmm_last_error(), "model.layers.1.mlp.gate_proj.weight") != NULL);
    /* out/ is not even created (built as a temporary beside it, removed on error) */
    CHECK(dir_entries(out) == -1 && dir_entries(dir) == 2);
    /* a wrong input shape */
    rewrite(hf, bad, "model.layers.0.self_attn.v_proj.weight", 's', ST_BF16);
    CHECK_STATUS(qmm_llm_quantize_checkpoint(bad, out, NULL), QMM_ERR_FORMAT);
    CHECK(dir_entries(out) == -1 && dir_entries(dir) == 2);
    /* an integer input where floats are needed */
    rewrite(hf, bad, "model.norm.weight", 't', ST_I16);
    CHECK_STATUS(qmm_llm_quantize_checkpoint(bad, out, NULL), QMM_ERR_FORMAT);
    CHECK(dir_entries(out) == -1 && dir_entries(dir) == 2);
    /* an existing, empty output directory stays empty */
    mkdir(out, 0755);
    CHECK_STATUS(qmm_llm_quantize_checkpoint(bad, out, NULL), QMM_ERR_FORMAT);
    CHECK(dir_entries(out) == 0 && dir_entries(dir) == 3);
    rmdir(out);
    /* the output of the writer is not accepted as its input again */
    CHECK_OK(qmm_llm_quantize_checkpoint(hf, out, NULL));
    char out2[600];
    sub(out2, sizeof out2, dir, "out2");
    CHECK_STATUS(qmm_llm_quantize_checkpoint(out, out2, NULL), QMM_ERR_FORMAT);
    CHECK(dir_entries(out2) == -1); /* refused before the output directory is made */
    /* the input directory is not an output */
    CHECK_STATUS(qmm_llm_quantize_checkpoint(hf, hf, NULL), QMM_ERR_ARG);
    /* a single-file input path works as well as the directory */
    sub(path, sizeof path, hf, "model.safetensors");
    CHECK_OK(qmm_llm_quantize_checkpoint(path, out2, NULL));
    CHECK(dir_entries(out2) == 2);
    test_rm_tree(dir);
}

static void synthetic_weights(void)
{
    qmm_llm_model *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(qmm_llm_model_synthetic(&tiny, 42, &a));
    CHECK_OK(qmm_llm_model_synthetic(&tiny, 42, &b));
    CHECK_OK(qmm_llm_model_synthetic(&tiny, 43, &c));
    if (!a || !b || !c) goto done;
    int neg = 0, pos = 0, bad_scale = 0, bad_bias = 0;
    for (int64_t l = 0; l < tiny.num_layers; l++)
        for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
            const qmm_w4 *x, *y, *z;
            qmm_llm_model_linear(a, l, (qmm_llm_linear)i, &x);
            qmm_llm_model_linear(b, l, (qmm_llm_linear)i, &y);
            qmm_llm_model_linear(c, l, (qmm_llm_linear)i, &z);
            CHECK_OK(qmm_w4_validate(x));
            CHECK(!memcmp(x->packed, y->packed, x->packed_count * 4));
            CHECK(!memcmp(x->scales, y->scales, x->scales_count * 2));
            CHECK(memcmp(x->packed, z->packed, x->packed_count * 4));
            double amp = 0.217 / sqrt((double)x->k);
            for (size_t g = 0; g < x->scales_count; g++) {
                float s = qmm_bf16_to_f32(x->scales[g]);
                if (s < 0) neg++;
                else pos++;
                bad_scale += !(fabs(s) >= 0.49 * amp && fabs(s) <= 1.51 * amp);
                /* bias = -7.5 s + 0.5 s jitter, jitter in [-1, 1), then rounded to bf16 */
                float bias = qmm_bf16_to_f32(x->biases[g]);
                bad_bias += !(fabs(bias + 7.5f * s) <= 0.53 * fabs(s));
            }
        }
    CHECK(neg > 100 && pos > 100);
    CHECKF(!bad_scale && !bad_bias, "%d scales and %d biases out of range", bad_scale, bad_bias);
    const qmm_bf16 *nw;
    CHECK_OK(qmm_llm_model_norm(a, 0, QMM_LLM_INPUT_NORM, &nw));
    for (int64_t i = 0; i < tiny.hidden_size; i++)
        CHECK(qmm_bf16_to_f32(nw[i]) >= 0.89f && qmm_bf16_to_f32(nw[i]) <= 1.11f);
    const qmm_w4 *e, *h;
    qmm_llm_model_embedding(a, &e);
    qmm_llm_model_lm_head(a, &h);
    CHECK(e->packed == h->packed && e->n == tiny.vocab_size && e->k == tiny.hidden_size);
    qmm_llm_model *p = NULL;
    CHECK_STATUS(qmm_llm_model_open("qwen3-5b", 1, &p), QMM_ERR_NOT_FOUND);
done:
    qmm_llm_model_destroy(a);
    qmm_llm_model_destroy(b);
    qmm_llm_model_destroy(c);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, roundtrip_tied_bf16, roundtrip_untied_f32, load_rejects_bad_checkpoints,
               sharded_mlx_checkpoint, writer_leaves_nothing_on_error, synthetic_weights);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
