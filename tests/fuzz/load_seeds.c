/* Seeds of the whole-load fuzz target: tiny MLX checkpoints written in memory, with variations
 * the loader has separate code for (tied or untied head, GQA, BF16/F16/F32 norms, metadata,
 * reversed tensor order, an unpadded header that misaligns the U32 codes, a quantization block).
 * Built with -DLOAD_SEEDS_MAIN it writes them as files: load_seeds DIR. */
#include "load_seeds.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "llm/hf_random.h"
#include "llm/model.h"
#include "qmm.h"

typedef struct seed_spec {
    qmm_llm_config c;
    const char *norm_dtype; /* "BF16", "F16", "F32" */
    int metadata, reverse, unpadded, quant_block;
} seed_spec;

static const seed_spec specs[] = {
    {{128, 128, 1, 1, 1, 128, 16, 64, 1e6, 1e-6, 1, 128}, "BF16", 0, 0, 0, 0},
    {{128, 256, 2, 2, 1, 64, 8, 64, 1e6, 1e-6, 0, 128}, "F32", 1, 0, 0, 0},
    {{128, 128, 1, 2, 2, 64, 12, 32, 1e4, 1e-5, 1, 128}, "F16", 1, 1, 0, 0},
    {{128, 128, 1, 1, 1, 128, 10, 16, 1e6, 1e-6, 1, 128}, "BF16", 0, 0, 1, 0},
    {{256, 128, 1, 4, 2, 64, 9, 16, 1e6, 1e-6, 0, 128}, "BF16", 1, 1, 1, 1},
};
#define SPEC_COUNT ((int)(sizeof specs / sizeof specs[0]))

typedef struct tensor {
    char name[LLM_NAME_MAX + 16];
    const char *dtype;
    int ndim;
    int64_t d0, d1;
    size_t bytes;
} tensor;

typedef struct buf {
    unsigned char *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 4096;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static int add_linear(tensor *t, int n, const char *prefix, int64_t rows, int64_t k)
{
    snprintf(t[n].name, sizeof t[n].name, "%s.weight", prefix);
    t[n].dtype = "U32", t[n].ndim = 2, t[n].d0 = rows, t[n].d1 = k / 8;
    t[n].bytes = (size_t)(rows * k / 2);
    n++;
    for (int sb = 0; sb < 2; sb++, n++) {
        snprintf(t[n].name, sizeof t[n].name, "%s.%s", prefix, sb ? "biases" : "scales");
        t[n].dtype = "BF16", t[n].ndim = 2, t[n].d0 = rows, t[n].d1 = k / 128;
        t[n].bytes = (size_t)(rows * (k / 128) * 2);
    }
    return n;
}

static int add_norm(tensor *t, int n, const char *name, int64_t len, const char *dtype)
{
    snprintf(t[n].name, sizeof t[n].name, "%s", name);
    t[n].dtype = dtype, t[n].ndim = 1, t[n].d0 = len;
    t[n].bytes = (size_t)len * (strcmp(dtype, "F32") ? 2 : 4);
    return n + 1;
}

/* Random bytes of one tensor: codes anywhere, scales ~ +-0.01, biases ~ -7.5 * scale, norms 1. */
static void fill(const tensor *t, unsigned char *p, uint64_t *rng)
{
    if (!strcmp(t->dtype, "U32")) {
        for (size_t i = 0; i < t->bytes; i++) p[i] = (unsigned char)qmm_splitmix64(rng);
        return;
    }
    int scales = strstr(t->name, ".scales") != NULL, biases = strstr(t->name, ".biases") != NULL;
    size_t esz = strcmp(t->dtype, "F32") ? 2 : 4;
    for (size_t i = 0; i < t->bytes / esz; i++) {
        float v = 1.0f + 0.05f * (float)((int)(qmm_splitmix64(rng) % 200) - 100) / 100.0f;
        if (scales || biases) {
            float s = 0.01f * (float)(1 + qmm_splitmix64(rng) % 4) * (qmm_splitmix64(rng) & 1 ? 1.0f : -1.0f);
            v = scales ? s : -7.5f * s;
        }
        if (esz == 4) {
            memcpy(p + 4 * i, &v, 4);
        } else {
            uint16_t h = !strcmp(t->dtype, "F16") ? qmm_f32_to_f16(v) : qmm_f32_to_bf16(v);
            memcpy(p + 2 * i, &h, 2);
        }
    }
}

size_t fuzz_load_seed(int i, unsigned char **out)
{
    if (i < 0 || i >= SPEC_COUNT) return 0;
    const seed_spec *sp = &specs[i];
    const qmm_llm_config *c = &sp->c;
    int cap = 4 + (int)c->num_layers * (3 * QMM_LLM_LINEAR_COUNT + QMM_LLM_NORM_COUNT) + 8;
    tensor *t = calloc((size_t)cap, sizeof *t);
    int n = 0;
    char name[LLM_NAME_MAX];
    n = add_linear(t, n, LLM_EMBED_PREFIX, c->vocab_size, c->hidden_size);
    if (!c->tie_word_embeddings) n = add_linear(t, n, LLM_HEAD_PREFIX, c->vocab_size, c->hidden_size);
    n = add_norm(t, n, LLM_FINAL_NORM, c->hidden_size, sp->norm_dtype);
    for (int64_t l = 0; l < c->num_layers; l++) {
        for (int k = 0; k < QMM_LLM_LINEAR_COUNT; k++) {
            int64_t rows, kk;
            qmm_llm_linear_shape(c, (qmm_llm_linear)k, &rows, &kk);
            llm_linear_prefix(l, (qmm_llm_linear)k, name, sizeof name);
            n = add_linear(t, n, name, rows, kk);
        }
        for (int k = 0; k < QMM_LLM_NORM_COUNT; k++) {
            llm_norm_name(l, (qmm_llm_norm)k, name, sizeof name);
            n = add_norm(t, n, name, llm_norm_len(c, (qmm_llm_norm)k), sp->norm_dtype);
        }
    }
    /* header: tensors in data order (reversed in the JSON when asked) */
    size_t *off = calloc((size_t)n + 1, sizeof *off);
    for (int k = 0; k < n; k++) off[k + 1] = off[k] + t[k].bytes;
    buf h = {0}, o = {0};
    puts_(&h, "{");
    if (sp->metadata) puts_(&h, "\"__metadata__\":{\"format\":\"mlx\"},");
    for (int j = 0; j < n; j++) {
        int k = sp->reverse ? n - 1 - j : j;
        char e[LLM_NAME_MAX + 160], shape[64];
        if (t[k].ndim == 2) snprintf(shape, sizeof shape, "[%lld,%lld]", (long long)t[k].d0, (long long)t[k].d1);
        else snprintf(shape, sizeof shape, "[%lld]", (long long)t[k].d0);
        snprintf(e, sizeof e, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                 j ? "," : "", t[k].name, t[k].dtype, shape, off[k], off[k + 1]);
        puts_(&h, e);
    }
    puts_(&h, "}");
    /* padded: the data starts 8-aligned; unpadded: an odd header misaligns the U32 codes */
    if (!sp->unpadded) while ((8 + h.len) % 8) puts_(&h, " ");
    else if (h.len % 2 == 0) puts_(&h, " ");
    char base[2048], cfg[2400];
    llm_config_json(c, base, sizeof base);
    if (sp->quant_block)
        snprintf(cfg, sizeof cfg, "{\"quantization\": {\"group_size\": 128, \"bits\": 4}, "
                 "\"rope_parameters\": {\"rope_type\": \"default\"},%s", strchr(base, '{') + 1);
    else
        snprintf(cfg, sizeof cfg, "%s", base);
    uint16_t cl = (uint16_t)strlen(cfg);
    unsigned char cl2[2] = {(unsigned char)cl, (unsigned char)(cl >> 8)};
    put(&o, cl2, 2);
    put(&o, cfg, cl);
    unsigned char hl[8];
    for (int k = 0; k < 8; k++) hl[k] = (unsigned char)((uint64_t)h.len >> (8 * k));
    put(&o, hl, 8);
    put(&o, h.p, h.len);
    uint64_t rng = 0x5EED0000u + (uint64_t)i;
    for (int k = 0; k < n; k++) {
        unsigned char *p = malloc(t[k].bytes ? t[k].bytes : 1);
        fill(&t[k], p, &rng);
        put(&o, p, t[k].bytes);
        free(p);
    }
    free(h.p);
    free(off);
    free(t);
    *out = o.p;
    return o.len;
}

int fuzz_load_split(const unsigned char *data, size_t size, const char **cfg, size_t *cfg_len,
                    const unsigned char **image, size_t *image_len)
{
    if (size < 2) return 0;
    size_t cl = (size_t)data[0] | (size_t)data[1] << 8;
    if (cl > size - 2) return 0;
    *cfg = (const char *)data + 2;
    *cfg_len = cl;
    *image = data + 2 + cl;
    *image_len = size - 2 - cl;
    return 1;
}

#ifdef LOAD_SEEDS_MAIN
int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: load_seeds DIR\n");
        return 2;
    }
    unsigned char *b;
    size_t n;
    for (int i = 0; (n = fuzz_load_seed(i, &b)); i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%d", argv[1], i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(b, 1, n, f) != n) return 1;
        fclose(f);
        free(b);
    }
    return 0;
}
#endif
