/*
 * bf16/f16/f32 Hugging Face checkpoint -> MLX 4-bit checkpoint (groups of 32, 64 or 128), the
 * files mlx_lm.convert writes: model.safetensors, config.json with "quantization" and
 * "quantization_config", and the tokenizer and generation files copied.
 *
 * Layout of the output: every packed `.weight` first (their sizes are multiples of 64 bytes, so
 * each stays 4-byte aligned), then every `.scales`/`.biases`, then the bf16 norms. Offsets are
 * contiguous, as the safetensors library requires. Each linear is quantized once: its codes are
 * written at once and its scales and biases (1/16 of its bytes) are kept until the second part.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "llm/model.h"
#include "llm/st_writer.h"

typedef struct qlinear {
    char prefix[LLM_NAME_MAX];
    int64_t n, k;
    qmm_bf16 *scales, *biases; /* kept for the second part */
} qlinear;

typedef struct qjob {
    qmm_llm_config cfg;
    int group;          /* columns per quantization group */
    st_set in;
    qlinear *lin;
    size_t nlin;
    char (*norms)[LLM_NAME_MAX];
    int64_t *norm_len;
    size_t nnorm;
    st_entry *entries;
    size_t nentries;
} qjob;

static void add_linear(qjob *j, const char *prefix, int64_t n, int64_t k)
{
    qlinear *l = &j->lin[j->nlin++];
    snprintf(l->prefix, sizeof l->prefix, "%s", prefix);
    l->n = n;
    l->k = k;
}

static qmm_status plan_tensors(qjob *j)
{
    const qmm_llm_config *c = &j->cfg;
    size_t nl = (size_t)c->num_layers;
    j->lin = calloc(nl * QMM_LLM_LINEAR_COUNT + 2, sizeof *j->lin);
    j->norms = calloc(nl * QMM_LLM_NORM_COUNT + 1, sizeof *j->norms);
    j->norm_len = calloc(nl * QMM_LLM_NORM_COUNT + 1, sizeof *j->norm_len);
    if (!j->lin || !j->norms || !j->norm_len) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    char name[LLM_NAME_MAX];
    add_linear(j, LLM_EMBED_PREFIX, c->vocab_size, c->hidden_size);
    if (!c->tie_word_embeddings) add_linear(j, LLM_HEAD_PREFIX, c->vocab_size, c->hidden_size);
    for (int64_t l = 0; l < c->num_layers; l++)
        for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
            int64_t n, k;
            qmm_llm_linear_shape(c, (qmm_llm_linear)i, &n, &k);
            llm_linear_prefix(l, (qmm_llm_linear)i, name, sizeof name);
            add_linear(j, name, n, k);
        }
    snprintf(j->norms[j->nnorm], LLM_NAME_MAX, "%s", LLM_FINAL_NORM);
    j->norm_len[j->nnorm++] = c->hidden_size;
    for (int64_t l = 0; l < c->num_layers; l++)
        for (int i = 0; i < QMM_LLM_NORM_COUNT; i++) {
            llm_norm_name(l, (qmm_llm_norm)i, j->norms[j->nnorm], LLM_NAME_MAX);
            j->norm_len[j->nnorm++] = llm_norm_len(c, (qmm_llm_norm)i);
        }
    /* output entries: packed weights, then scales and biases, then norms */
    j->nentries = 3 * j->nlin + j->nnorm;
    j->entries = calloc(j->nentries, sizeof *j->entries);
    if (!j->entries) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    size_t e = 0;
    for (size_t i = 0; i < j->nlin; i++) {
        st_entry *en = &j->entries[e++];
        snprintf(en->name, sizeof en->name, "%s.weight", j->lin[i].prefix);
        en->dtype = ST_U32;
        en->ndim = 2;
        en->shape[0] = j->lin[i].n;
        en->shape[1] = j->lin[i].k / 8;
    }
    for (size_t i = 0; i < j->nlin; i++)
        for (int sb = 0; sb < 2; sb++) {
            st_entry *en = &j->entries[e++];
            snprintf(en->name, sizeof en->name, "%s.%s", j->lin[i].prefix, sb ? "biases" : "scales");
            en->dtype = ST_BF16;
            en->ndim = 2;
            en->shape[0] = j->lin[i].n;
            en->shape[1] = j->lin[i].k / j->group;
        }
    for (size_t i = 0; i < j->nnorm; i++) {
        st_entry *en = &j->entries[e++];
        snprintf(en->name, sizeof en->name, "%s", j->norms[i]);
        en->dtype = ST_BF16;
        en->ndim = 1;
        en->shape[0] = j->norm_len[i];
    }
    return QMM_OK;
}

static qmm_dtype float_type(st_dtype t)
{
    return t == ST_BF16 ? QMM_BF16 : t == ST_F16 ? QMM_F16 : QMM_F32;
}

/* An input float tensor of the given shape (bf16, f16 or f32). */
static qmm_status input_tensor(const qjob *j, const char *name, int ndim, int64_t d0, int64_t d1,
                               const st_tensor **out)
{
    const st_tensor *t = st_find(&j->in, name);
    if (!t) return qmm_fail(QMM_ERR_NOT_FOUND, "tensor '%s' is missing from the input", name);
    int64_t want[2] = {d0, d1};
    int ok = t->ndim == ndim && (t->dtype == ST_BF16 || t->dtype == ST_F16 || t->dtype == ST_F32);
    for (int i = 0; i < ndim && ok; i++) ok = t->shape[i] == want[i];
    if (!ok) {
        char got[128], exp[128];
        st_shape_string(t->ndim, t->shape, got, sizeof got);
        st_shape_string(ndim, want, exp, sizeof exp);
        return qmm_fail(QMM_ERR_FORMAT, "input tensor '%s' is %s %s, want BF16/F16/F32 %s", name,
                        st_dtype_name(t->dtype), got, exp);
    }
    *out = t;
    return QMM_OK;
}

/* Element data at an address its type can be read from (a copy when the file misaligns it). */
static qmm_status readable(const st_tensor *t, void **copy, const void **data)
{
    *copy = NULL;
    size_t esz = st_dtype_size(t->dtype);
    if ((uintptr_t)t->data % esz == 0) {
        *data = t->data;
        return QMM_OK;
    }
    *copy = malloc((size_t)t->nbytes);
    if (!*copy) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    memcpy(*copy, t->data, (size_t)t->nbytes);
    *data = *copy;
    return QMM_OK;
}

static qmm_status write_all(qjob *j, st_writer *w, qmm_llm_quantize_report *rep)
{
    qmm_status st = QMM_OK;
    char name[LLM_NAME_MAX + 16];
    /* validate every input before the long part, so a bad checkpoint fails fast */
    for (size_t i = 0; i < j->nlin && !st; i++) {
        const st_tensor *t;
        snprintf(name, sizeof name, "%s.weight", j->lin[i].prefix);
        st = input_tensor(j, name, 2, j->lin[i].n, j->lin[i].k, &t);
    }
    for (size_t i = 0; i < j->nnorm && !st; i++) {
        const st_tensor *t;
        st = input_tensor(j, j->norms[i], 1, j->norm_len[i], 0, &t);
    }
    for (size_t i = 0; i < j->nlin && !st; i++) {
        qlinear *l = &j->lin[i];
        const st_tensor *t;
        snprintf(name, sizeof name, "%s.weight", l->prefix);
        input_tensor(j, name, 2, l->n, l->k, &t);
        qmm_w4 q;
        if ((st = qmm_w4_alloc_group(l->n, l->k, j->group, &q))) break;
        void *copy = NULL;
        const void *src = NULL;
        qmm_quant_error err;
        if (!(st = readable(t, &copy, &src))) {
            st = qmm_quantize(src, float_type(t->dtype), &q, &err);
            free(copy);
        }
        if (st) {
            char detail[300];
            snprintf(detail, sizeof detail, "%s", qmm_last_error());
            st = qmm_fail(st, "quantizing '%s': %s", name, detail);
        }
        if (!st) st = st_writer_put(w, q.packed, (uint64_t)q.packed_count * 4);
        if (!st) {
            /* keep scales and biases for the second part; the codes are on disk */
            l->scales = q.scales;
            l->biases = q.biases;
            q.scales = q.biases = NULL;
            rep->quantized++;
            if (err.rel_frob > rep->worst_rel_frob) rep->worst_rel_frob = err.rel_frob;
        }
        qmm_w4_free(&q);
        qmm_progress("quantizing", (double)(i + 1), (double)j->nlin);
    }
    for (size_t i = 0; i < j->nlin && !st; i++) {
        uint64_t bytes = (uint64_t)j->lin[i].n * (uint64_t)(j->lin[i].k / j->group) * 2;
        if (!(st = st_writer_put(w, j->lin[i].scales, bytes))) st = st_writer_put(w, j->lin[i].biases, bytes);
    }
    qmm_bf16 *nb = NULL;
    for (size_t i = 0; i < j->nnorm && !st; i++) {
        const st_tensor *t;
        input_tensor(j, j->norms[i], 1, j->norm_len[i], 0, &t);
        free(nb);
        nb = malloc((size_t)j->norm_len[i] * 2);
        if (!nb) {
            st = qmm_fail(QMM_ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t e = 0; e < j->norm_len[i]; e++) nb[e] = qmm_f32_to_bf16(st_float_at(t, e));
        if (!(st = st_writer_put(w, nb, (uint64_t)j->norm_len[i] * 2))) rep->copied++;
    }
    free(nb);
    return st;
}

/* The input config with "quantization" and its copy "quantization_config" (as mlx_lm's
 * save_config writes them) added right after the opening brace. */
static qmm_status make_config(const char *text, size_t len, int group, char **out,
                              size_t *out_len)
{
    char add[200];
    snprintf(add, sizeof add, "\"quantization\": {\"group_size\": %d, \"bits\": 4, \"mode\": "
             "\"affine\"}, \"quantization_config\": {\"group_size\": %d, \"bits\": 4, "
             "\"mode\": \"affine\"}, ", group, group);
    size_t brace = 0;
    while (brace < len && text[brace] != '{') brace++;
    if (brace == len) return qmm_fail(QMM_ERR_FORMAT, "config.json: no object");
    /* an empty object gets no trailing comma */
    size_t after = brace + 1;
    while (after < len && (text[after] == ' ' || text[after] == '\n' || text[after] == '\r' ||
                           text[after] == '\t'))
        after++;
    int empty = after < len && text[after] == '}';
    size_t addn = strlen(add) - (empty ? 2 : 0);
    char *o = malloc(len + addn + 1);
    if (!o) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    memcpy(o, text, brace + 1);
    memcpy(o + brace + 1, add, addn);
    memcpy(o + brace + 1 + addn, text + brace + 1, len - brace - 1);
    o[len + addn] = 0;
    *out = o;
    *out_len = len + addn;
    return QMM_OK;
}

static void free_job(qjob *j)
{
    for (size_t i = 0; i < j->nlin; i++) {
        free(j->lin[i].scales);
        free(j->lin[i].biases);
    }
    free(j->lin);
    free(j->norms);
    free(j->norm_len);
    free(j->entries);
    st_close(&j->in);
}

/* The files mlx_lm.convert copies beside the weights (when the input has them). */
static const char *const side_files[] = {"tokenizer.json", "tokenizer_config.json",
                                         "generation_config.json"};
#define SIDE_COUNT 3

/* in_dir/name -> a synced temporary for out_dir/name (f->live stays 0 when there is none). */
static qmm_status stage_side_file(const char *in_dir, const char *out_dir, const char *name,
                                  llm_tmpfile *f)
{
    char src[LLM_PATH_MAX], dst[LLM_PATH_MAX];
    qmm_status st;
    if ((st = llm_path_join(in_dir, name, src, sizeof src)) ||
        (st = llm_path_join(out_dir, name, dst, sizeof dst)))
        return st;
    FILE *probe = fopen(src, "rb");
    if (!probe) return QMM_OK;
    fclose(probe);
    char *text = NULL;
    size_t len = 0;
    if ((st = llm_read_file(src, 1u << 30, &text, &len))) return st;
    if (!(st = llm_tmp_create(f, dst)) && !(st = llm_tmp_write(f, text, len)))
        st = llm_tmp_sync(f);
    free(text);
    return st;
}

qmm_status qmm_llm_quantize_checkpoint(const char *in_path, const char *out_dir,
                                       qmm_llm_quantize_report *report)
{
    return qmm_llm_quantize_checkpoint_group(in_path, out_dir, QMM_GROUP, report);
}

qmm_status qmm_llm_quantize_checkpoint_group(const char *in_path, const char *out_dir,
                                             int group, qmm_llm_quantize_report *report)
{
    if (!in_path || !out_dir)
        return qmm_fail(QMM_ERR_NULL, "qmm_llm_quantize_checkpoint: NULL argument");
    if (!QMM_GROUP_OK(group))
        return qmm_fail(QMM_ERR_ARG, "quantize-checkpoint: group size %d is not supported (32, "
                        "64 or 128)", group);
    qmm_llm_quantize_report rep;
    memset(&rep, 0, sizeof rep);
    char in_dir[LLM_PATH_MAX], path[LLM_PATH_MAX];
    qmm_status st = llm_checkpoint_dir(in_path, in_dir, sizeof in_dir);
    if (st) return st;

    /* the config: parsed (and refused if it already describes a quantized model) */
    char *cfg_text = NULL, *cfg_out = NULL;
    size_t cfg_len = 0, cfg_out_len = 0;
    if ((st = llm_path_join(in_dir, "config.json", path, sizeof path)) ||
        (st = llm_read_file(path, 16u << 20, &cfg_text, &cfg_len)))
        return st;
    qjob j;
    memset(&j, 0, sizeof j);
    json_doc d;
    if (!(st = json_parse(cfg_text, cfg_len, &d))) {
        if (d.nodes[0].type == JSON_OBJECT && (json_member(&d, 0, "quantization") ||
                                               json_member(&d, 0, "quantization_config")))
            st = qmm_fail(QMM_ERR_FORMAT, "%s describes an already quantized model", path);
        json_free(&d);
    }
    if (!st) st = qmm_llm_config_parse(cfg_text, cfg_len, &j.cfg);
    j.group = group;
    j.cfg.group_size = group;
    if (!st && (st = qmm_llm_config_validate(&j.cfg))) {
        char detail[300];
        snprintf(detail, sizeof detail, "%s", qmm_last_error());
        st = qmm_fail(st, "%s: cannot quantize in groups of %d: %s", path, group, detail);
    }
    if (!st) st = make_config(cfg_text, cfg_len, group, &cfg_out, &cfg_out_len);
    free(cfg_text);
    /* A new output directory is built as a temporary beside it and renamed at the end, so an
     * error leaves no directory behind; an existing one receives each file atomically. */
    char work[LLM_PATH_MAX], real_in[LLM_PATH_MAX], real_out[LLM_PATH_MAX];
    int fresh = !st && !llm_exists(out_dir);
    if (!st && !fresh && !llm_is_dir(out_dir))
        st = qmm_fail(QMM_ERR_IO, "the output %s exists and is not a directory", out_dir);
    if (!st && realpath(in_dir, real_in) && realpath(out_dir, real_out) && !strcmp(real_in, real_out))
        st = qmm_fail(QMM_ERR_ARG, "the output directory %s is the input's directory", out_dir);
    if (!st && fresh) st = llm_tmpdir_create(out_dir, work, sizeof work);
    if (!st && !fresh) {
        if (strlen(out_dir) >= sizeof work) st = qmm_fail(QMM_ERR_RANGE, "path too long");
        else strcpy(work, out_dir);
    }
    if (st) {
        free(cfg_out);
        return st;
    }

    st_writer w;
    memset(&w, 0, sizeof w);
    w.file.fd = -1;
    llm_tmpfile cf, side[SIDE_COUNT];
    memset(&cf, 0, sizeof cf);
    cf.fd = -1;
    memset(side, 0, sizeof side);
    for (int i = 0; i < SIDE_COUNT; i++) side[i].fd = -1;
    if (!st) st = st_open(in_path, &j.in);
    if (!st) st = plan_tensors(&j);
    if (!st) st = llm_path_join(work, "model.safetensors", path, sizeof path);
    if (!st) st = st_writer_open(&w, path, j.entries, j.nentries, "mlx");
    if (!st) st = write_all(&j, &w, &rep);
    if (!st) st = st_writer_finish(&w);
    if (!st) {
        /* re-read what was written before publishing it */
        st_set check;
        st = st_open(w.file.tmp, &check);
        if (!st && check.count != j.nentries)
            st = qmm_fail(QMM_ERR_FORMAT, "written file holds %zu tensors, want %zu", check.count,
                          j.nentries);
        st_close(&check);
    }
    if (!st) st = llm_path_join(work, "config.json", path, sizeof path);
    if (!st) st = llm_tmp_create(&cf, path);
    if (!st) st = llm_tmp_write(&cf, cfg_out, cfg_out_len);
    if (!st) st = llm_tmp_sync(&cf);
    for (int i = 0; i < SIDE_COUNT && !st; i++)
        st = stage_side_file(in_dir, work, side_files[i], &side[i]);
    if (!st) st = llm_tmp_publish(&w.file);
    if (!st) st = llm_tmp_publish(&cf);
    for (int i = 0; i < SIDE_COUNT && !st; i++)
        if (side[i].live) st = llm_tmp_publish(&side[i]);
    if (!st && fresh) st = llm_tmpdir_publish(work, out_dir);
    rep.bytes = w.bytes;
    if ((int64_t)j.in.count >= rep.quantized + rep.copied)
        rep.ignored = (int64_t)j.in.count - rep.quantized - rep.copied;
    st_writer_discard(&w);
    llm_tmp_discard(&cf);
    for (int i = 0; i < SIDE_COUNT; i++) llm_tmp_discard(&side[i]);
    if (st && fresh) llm_tmpdir_discard(work);
    free(cfg_out);
    free_job(&j);
    if (!st) {
        if (report) *report = rep;
        qmm_clear_error();
    }
    return st;
}
