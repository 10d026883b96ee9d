/* The tokenizer object: loading from a model directory, lookups and decoding. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "llm/llm_io.h"
#include "text/tok_internal.h"

#define MAX_TOKENIZER_BYTES ((size_t)256 << 20) /* Qwen3's is 11 MB */
#define MAX_CONFIG_BYTES ((size_t)16 << 20)

/* tokenizer_config.json: is its chat_template the Qwen3 one (ChatML with the thinking switch)? */
static qmm_status read_chat_template(qmm_tokenizer *t, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    qmm_status st = llm_read_file(path, MAX_CONFIG_BYTES, &text, &len);
    if (st == QMM_ERR_NOT_FOUND) {
        qmm_clear_error();
        return QMM_OK; /* no template: chat is unavailable, the rest works */
    }
    if (st) return st;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root) return qmm_fail(QMM_ERR_FORMAT, "%s: malformed JSON", path);
    const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    t->chat_qwen3 = cJSON_IsString(tpl) && strstr(tpl->valuestring, "<|im_start|>") &&
                    strstr(tpl->valuestring, "enable_thinking") &&
                    strstr(tpl->valuestring, "<think>");
    cJSON_Delete(root);
    return QMM_OK;
}

qmm_status qmm_tokenizer_load(const char *path, qmm_tokenizer **out)
{
    if (!path || !out) return qmm_fail(QMM_ERR_NULL, "qmm_tokenizer_load: NULL argument");
    char file[LLM_PATH_MAX], dir[LLM_PATH_MAX], cfg[LLM_PATH_MAX];
    qmm_status st;
    if (llm_is_dir(path)) {
        st = llm_path_join(path, "tokenizer.json", file, sizeof file);
        if (!st) st = llm_path_join(path, "", dir, sizeof dir);
        if (!st) dir[strlen(dir) - 1] = 0;
    } else {
        st = strlen(path) < sizeof file ? QMM_OK : qmm_fail(QMM_ERR_RANGE, "path too long");
        if (!st) strcpy(file, path);
        if (!st) st = llm_dirname(path, dir, sizeof dir);
    }
    if (!st) st = llm_path_join(dir, "tokenizer_config.json", cfg, sizeof cfg);
    if (st) return st;
    char *json = NULL;
    size_t len = 0;
    st = llm_read_file(file, MAX_TOKENIZER_BYTES, &json, &len);
    if (st) return st;
    qmm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) st = qmm_fail(QMM_ERR_NOMEM, "qmm_tokenizer_load: out of memory");
    if (!st) st = tok_build(t, json, len, file);
    free(json);
    if (!st) st = read_chat_template(t, cfg);
    if (st) {
        qmm_tokenizer_destroy(t);
        return st;
    }
    *out = t;
    qmm_clear_error();
    return QMM_OK;
}

void qmm_tokenizer_destroy(qmm_tokenizer *t)
{
    if (!t) return;
    tok_map_free(&t->vocab);
    tok_pairs_free(&t->merges);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].text);
    free(t->added);
    free(t->off);
    free(t->len);
    free(t->bytes);
    free(t->special);
    pcre2_code_free(t->re);
    free(t);
}

int64_t qmm_tokenizer_vocab_size(const qmm_tokenizer *t) { return t ? t->n_ids : 0; }

qmm_status qmm_tokenizer_token_id(const qmm_tokenizer *t, const char *token, int32_t *id)
{
    if (!t || !token || !id) return qmm_fail(QMM_ERR_NULL, "qmm_tokenizer_token_id: NULL argument");
    size_t l = strlen(token);
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].len == l && !memcmp(t->added[i].text, token, l)) {
            *id = t->added[i].id;
            return QMM_OK;
        }
    if (tok_map_get(&t->vocab, token, l, id)) return QMM_OK;
    return qmm_fail(QMM_ERR_NOT_FOUND, "no token \"%.60s\" in the vocabulary", token);
}

int qmm_tokenizer_is_special(const qmm_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_ids && t->special[id];
}

static qmm_status check_id(const qmm_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_ids || !t->len[id])
        return qmm_fail(QMM_ERR_RANGE, "token id %d is not in the vocabulary (%lld ids)", id,
                        (long long)t->n_ids);
    return QMM_OK;
}

qmm_status qmm_tokenizer_decode(const qmm_tokenizer *t, const int32_t *ids, int64_t n,
                                char **text, size_t *len)
{
    if (!t || (!ids && n) || !text || !len)
        return qmm_fail(QMM_ERR_NULL, "qmm_tokenizer_decode: NULL argument");
    if (n < 0) return qmm_fail(QMM_ERR_ARG, "qmm_tokenizer_decode: n = %lld", (long long)n);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        qmm_status st = check_id(t, ids[i]);
        if (st) return st;
        total += t->len[ids[i]]; /* each <= 4 GB total arena: no overflow for sane n */
        if (total > ((size_t)1 << 40)) return qmm_fail(QMM_ERR_OVERFLOW, "decode: too long");
    }
    char *s = malloc(total + 1);
    if (!s) return qmm_fail(QMM_ERR_NOMEM, "qmm_tokenizer_decode: out of memory");
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        memcpy(s + at, t->bytes + t->off[ids[i]], t->len[ids[i]]);
        at += t->len[ids[i]];
    }
    s[at] = 0;
    *text = s;
    *len = at;
    qmm_clear_error();
    return QMM_OK;
}

/* ---- incremental decoding ---------------------------------------------------------------- */

struct qmm_text_stream {
    const qmm_tokenizer *t;
    unsigned char held[4];
    int n_held;
    char *out;
    size_t cap;
};

qmm_status qmm_text_stream_create(const qmm_tokenizer *t, qmm_text_stream **out)
{
    if (!t || !out) return qmm_fail(QMM_ERR_NULL, "qmm_text_stream_create: NULL argument");
    qmm_text_stream *s = calloc(1, sizeof *s);
    if (!s) return qmm_fail(QMM_ERR_NOMEM, "qmm_text_stream_create: out of memory");
    s->t = t;
    *out = s;
    return QMM_OK;
}

void qmm_text_stream_destroy(qmm_text_stream *s)
{
    if (!s) return;
    free(s->out);
    free(s);
}

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Bytes a character starting with c needs, 0 when c cannot start one. */
static int utf8_need(unsigned char c)
{
    return c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
           : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
}

/* Could held[0..n) still become a valid character? (second-byte ranges as in tok_encode.c) */
static int utf8_prefix_ok(const unsigned char *h, int n)
{
    int need = utf8_need(h[0]);
    if (!need || n > need) return 0;
    for (int i = 1; i < n; i++)
        if ((h[i] & 0xC0) != 0x80) return 0;
    if (n >= 2 && ((h[0] == 0xE0 && h[1] < 0xA0) || (h[0] == 0xED && h[1] >= 0xA0) ||
                   (h[0] == 0xF0 && h[1] < 0x90) || (h[0] == 0xF4 && h[1] >= 0x90)))
        return 0;
    return 1;
}

static void emit(qmm_text_stream *s, size_t *at, const void *p, size_t n)
{
    memcpy(s->out + *at, p, n);
    *at += n;
}

/* Feed bytes: whole characters go out, an incomplete tail is held, impossible bytes become
 * U+FFFD (one each). out must have room for 3 * (n + 4). */
static void feed(qmm_text_stream *s, const unsigned char *p, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++) {
        s->held[s->n_held++] = p[i];
        while (s->n_held && !utf8_prefix_ok(s->held, s->n_held)) {
            /* the first held byte can never start this character: replace it, retry the rest */
            emit(s, at, REPLACEMENT, 3);
            memmove(s->held, s->held + 1, (size_t)--s->n_held);
        }
        if (s->n_held && s->n_held == utf8_need(s->held[0])) {
            emit(s, at, s->held, (size_t)s->n_held);
            s->n_held = 0;
        }
    }
}

static qmm_status room(qmm_text_stream *s, size_t n)
{
    size_t need = 3 * (n + 4);
    if (need <= s->cap) return QMM_OK;
    char *o = realloc(s->out, need);
    if (!o) return qmm_fail(QMM_ERR_NOMEM, "text stream: out of memory");
    s->out = o;
    s->cap = need;
    return QMM_OK;
}

qmm_status qmm_text_stream_push(qmm_text_stream *s, int32_t id, const char **text, size_t *len)
{
    if (!s || !text || !len) return qmm_fail(QMM_ERR_NULL, "qmm_text_stream_push: NULL argument");
    qmm_status st = check_id(s->t, id);
    if (!st) st = room(s, s->t->len[id]);
    if (st) return st;
    size_t at = 0;
    feed(s, (const unsigned char *)s->t->bytes + s->t->off[id], s->t->len[id], &at);
    *text = s->out;
    *len = at;
    return QMM_OK;
}

qmm_status qmm_text_stream_flush(qmm_text_stream *s, const char **text, size_t *len)
{
    if (!s || !text || !len) return qmm_fail(QMM_ERR_NULL, "qmm_text_stream_flush: NULL argument");
    qmm_status st = room(s, 4);
    if (st) return st;
    size_t at = 0;
    if (s->n_held) emit(s, &at, REPLACEMENT, 3);
    s->n_held = 0;
    *text = s->out;
    *len = at;
    return QMM_OK;
}
