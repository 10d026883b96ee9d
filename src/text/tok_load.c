/* tokenizer.json -> the tokenizer's tables. The file is untrusted: every field is type-checked,
 * ids are bounded, and anything this tokenizer would not reproduce exactly is refused by name. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "text/tok_internal.h"

#define MAX_IDS (1 << 24) /* far above any real vocabulary; bounds the per-id tables */

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int is_true(const cJSON *o, const char *key)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* An id: a JSON integer in [0, MAX_IDS). */
static int id_of(const cJSON *v, int32_t *id)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= MAX_IDS ||
        v->valuedouble != (double)(int32_t)v->valuedouble)
        return 0;
    *id = (int32_t)v->valuedouble;
    return 1;
}

/* Decode a UTF-8 code point at s[0..n); its length, or 0 when malformed. */
static int utf8_cp(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n >= 1 && s[0] < 0x80) { *cp = s[0]; return 1; }
    if (n >= 2 && (s[0] & 0xE0) == 0xC0 && (s[1] & 0xC0) == 0x80) {
        *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
        return *cp >= 0x80 ? 2 : 0;
    }
    if (n >= 3 && (s[0] & 0xF0) == 0xE0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
        *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return *cp >= 0x800 ? 3 : 0;
    }
    return 0; /* the ByteLevel alphabet stays below U+0800 */
}

/* A vocabulary entry in the ByteLevel alphabet -> its bytes (out has room for strlen(s)). */
static int bytelevel_decode(const int16_t cp_byte[512], const char *s, char *out, size_t *n)
{
    size_t len = strlen(s), k = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int l = utf8_cp((const unsigned char *)s + i, len - i, &cp);
        if (!l || cp >= 512 || cp_byte[cp] < 0) return 0;
        out[k++] = (char)cp_byte[cp];
        i += (size_t)l;
    }
    *n = k;
    return 1;
}

static qmm_status check_kinds(const cJSON *root, const char *what, const char **pattern)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *type = str_of(model, "type");
    if (!cJSON_IsObject(model) || !type)
        return qmm_fail(QMM_ERR_FORMAT, "%s: no \"model\" object with a \"type\"", what);
    if (strcmp(type, "BPE"))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "%s: model type %s (only BPE)", what, type);
    const char *pre = str_of(model, "continuing_subword_prefix");
    const char *suf = str_of(model, "end_of_word_suffix");
    if (is_true(model, "byte_fallback") || (pre && *pre) || (suf && *suf) ||
        cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(model, "dropout")))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "%s: BPE with byte fallback, dropout, a subword "
                        "prefix or a word suffix", what);
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (norm && !cJSON_IsNull(norm) && (!str_of(norm, "type") || strcmp(str_of(norm, "type"), "NFC")))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "%s: normalizer other than NFC", what);
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (dec && !cJSON_IsNull(dec) && (!str_of(dec, "type") || strcmp(str_of(dec, "type"), "ByteLevel")))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "%s: decoder other than ByteLevel", what);
    /* pre-tokenizer: Sequence [Split(Regex, Isolated), ByteLevel(use_regex = false)] */
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(seq, "pretokenizers");
    const cJSON *split = cJSON_GetArrayItem(list, 0), *bl = cJSON_GetArrayItem(list, 1);
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    const char *beh = str_of(split, "behavior");
    if (!str_of(seq, "type") || strcmp(str_of(seq, "type"), "Sequence") ||
        cJSON_GetArraySize(list) != 2 || !str_of(split, "type") ||
        strcmp(str_of(split, "type"), "Split") || !str_of(pat, "Regex") || !beh ||
        strcmp(beh, "Isolated") || is_true(split, "invert") || !str_of(bl, "type") ||
        strcmp(str_of(bl, "type"), "ByteLevel") || is_true(bl, "use_regex") ||
        is_true(bl, "add_prefix_space"))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "%s: pre-tokenizer other than Sequence[Split(regex, "
                        "Isolated), ByteLevel(use_regex false)] (Qwen's)", what);
    *pattern = str_of(pat, "Regex");
    return QMM_OK;
}

static qmm_status compile_regex(qmm_tokenizer *t, const char *pattern, const char *what)
{
    int err;
    PCRE2_SIZE at;
    t->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                          &at, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return qmm_fail(QMM_ERR_FORMAT, "%s: pre-tokenizer regex at offset %zu: %s", what,
                        (size_t)at, (const char *)msg);
    }
    pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* without JIT the interpreter runs: slower */
    return QMM_OK;
}

static int cmp_added(const void *a, const void *b)
{
    const tok_added *x = a, *y = b;
    return x->len != y->len ? (x->len < y->len ? 1 : -1) : (x->id > y->id) - (x->id < y->id);
}

static qmm_status load_added(qmm_tokenizer *t, const cJSON *root, const char *what)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), *e;
    if (list && !cJSON_IsArray(list) && !cJSON_IsNull(list))
        return qmm_fail(QMM_ERR_FORMAT, "%s: added_tokens is not a list", what);
    int n = cJSON_GetArraySize(list);
    t->added = calloc((size_t)(n ? n : 1), sizeof *t->added);
    if (!t->added) return qmm_fail(QMM_ERR_NOMEM, "%s: out of memory", what);
    cJSON_ArrayForEach(e, list) {
        const char *s = str_of(e, "content");
        int32_t id;
        if (!s || !*s || !id_of(cJSON_GetObjectItemCaseSensitive(e, "id"), &id))
            return qmm_fail(QMM_ERR_FORMAT, "%s: added token %d needs a content and an id in "
                            "[0, %d)", what, t->n_added, MAX_IDS);
        if (is_true(e, "lstrip") || is_true(e, "rstrip") || is_true(e, "single_word") ||
            is_true(e, "normalized"))
            return qmm_fail(QMM_ERR_UNSUPPORTED, "%s: added token %s is lstrip, rstrip, "
                            "single_word or normalized", what, s);
        tok_added *a = &t->added[t->n_added++];
        a->len = strlen(s);
        a->text = malloc(a->len + 1);
        if (!a->text) return qmm_fail(QMM_ERR_NOMEM, "%s: out of memory", what);
        memcpy(a->text, s, a->len + 1);
        a->id = id;
        a->special = is_true(e, "special");
        t->added_first[(unsigned char)s[0]] = 1;
        if (id >= t->n_ids) t->n_ids = (int64_t)id + 1;
    }
    qsort(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added);
    return QMM_OK;
}

/* merges: ["a b", ...] (older files) or [["a", "b"], ...]. */
static qmm_status load_merges(qmm_tokenizer *t, const cJSON *merges, const char *what)
{
    int n = cJSON_GetArraySize(merges), rank = 0;
    if (tok_pairs_init(&t->merges, (size_t)n)) return qmm_fail(QMM_ERR_NOMEM, "%s: merges", what);
    const cJSON *e;
    char *buf = NULL;
    size_t cap = 0;
    qmm_status st = QMM_OK;
    cJSON_ArrayForEach(e, merges) {
        const char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        if (cJSON_IsString(e)) {
            const char *sp = strchr(e->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                a = e->valuestring;
                la = (size_t)(sp - a);
                b = sp + 1;
                lb = strlen(b);
            }
        } else if (cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
            a = cJSON_GetArrayItem(e, 0)->valuestring;
            b = cJSON_GetArrayItem(e, 1)->valuestring;
            la = strlen(a);
            lb = strlen(b);
        }
        if (!a || !la || !lb) {
            st = qmm_fail(QMM_ERR_FORMAT, "%s: merge %d is not a pair of tokens", what, rank);
            break;
        }
        if (la + lb > cap) {
            cap = (la + lb) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) { st = qmm_fail(QMM_ERR_NOMEM, "%s: out of memory", what); break; }
            buf = nb;
        }
        memcpy(buf, a, la);
        memcpy(buf + la, b, lb);
        int32_t ia, ib, im;
        if (!tok_map_get(&t->vocab, a, la, &ia) || !tok_map_get(&t->vocab, b, lb, &ib) ||
            !tok_map_get(&t->vocab, buf, la + lb, &im)) {
            st = qmm_fail(QMM_ERR_FORMAT, "%s: merge %d (%.*s %.*s) uses a token missing from "
                          "the vocabulary", what, rank, (int)la, a, (int)lb, b);
            break;
        }
        if (tok_pairs_put(&t->merges, ia, ib, (uint32_t)rank, im) < 0) {
            st = qmm_fail(QMM_ERR_NOMEM, "%s: merges", what);
            break;
        }
        rank++;
    }
    free(buf);
    return st;
}

/* Per id: its bytes (the vocabulary's in ByteLevel, an added token's content verbatim). */
static qmm_status build_bytes(qmm_tokenizer *t, const cJSON *vocab, size_t total,
                              const char *what)
{
    uint32_t byte_cp[256];
    int16_t cp_byte[512];
    tok_bytelevel_table(byte_cp);
    memset(cp_byte, 0xff, sizeof cp_byte);
    for (int b = 0; b < 256; b++) cp_byte[byte_cp[b]] = (int16_t)b;
    for (int i = 0; i < t->n_added; i++) total += t->added[i].len;
    if (total >= UINT32_MAX) return qmm_fail(QMM_ERR_FORMAT, "%s: tokens too long", what);
    t->off = calloc((size_t)t->n_ids, sizeof *t->off);
    t->len = calloc((size_t)t->n_ids, sizeof *t->len);
    t->special = calloc((size_t)t->n_ids, 1);
    t->bytes = malloc(total + 1);
    if (!t->off || !t->len || !t->special || !t->bytes)
        return qmm_fail(QMM_ERR_NOMEM, "%s: out of memory", what);
    size_t at = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        size_t n;
        int32_t id = (int32_t)e->valuedouble;
        if (!bytelevel_decode(cp_byte, e->string, t->bytes + at, &n))
            return qmm_fail(QMM_ERR_FORMAT, "%s: vocabulary entry %d is outside the ByteLevel "
                            "alphabet", what, id);
        t->off[id] = (uint32_t)at;
        t->len[id] = (uint32_t)n;
        at += n;
    }
    for (int i = 0; i < t->n_added; i++) { /* an added token wins over a vocabulary entry */
        const tok_added *a = &t->added[i];
        memcpy(t->bytes + at, a->text, a->len);
        t->off[a->id] = (uint32_t)at;
        t->len[a->id] = (uint32_t)a->len;
        t->special[a->id] = (uint8_t)a->special;
        at += a->len;
    }
    /* every byte needs its token, or some text could not be encoded */
    for (int b = 0; b < 256; b++) {
        char s[4];
        int l = byte_cp[b] < 0x80 ? (s[0] = (char)byte_cp[b], 1)
                                  : (s[0] = (char)(0xC0 | (byte_cp[b] >> 6)),
                                     s[1] = (char)(0x80 | (byte_cp[b] & 0x3F)), 2);
        if (!tok_map_get(&t->vocab, s, (size_t)l, &t->byte_id[b]))
            return qmm_fail(QMM_ERR_FORMAT, "%s: no vocabulary entry for byte 0x%02x", what, b);
    }
    return QMM_OK;
}

qmm_status tok_build(qmm_tokenizer *t, const char *json, size_t len, const char *what)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        return qmm_fail(QMM_ERR_FORMAT, "%s: malformed JSON near byte %lld", what,
                        at && at >= json && at <= json + len ? (long long)(at - json) : -1LL);
    }
    const char *pattern = NULL;
    qmm_status st = check_kinds(root, what, &pattern);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!st && (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)))
        st = qmm_fail(QMM_ERR_FORMAT, "%s: model.vocab must be an object, model.merges a list", what);
    size_t total = 0;
    if (!st && tok_map_init(&t->vocab, (size_t)cJSON_GetArraySize(vocab)))
        st = qmm_fail(QMM_ERR_NOMEM, "%s: out of memory", what);
    const cJSON *e;
    if (!st) cJSON_ArrayForEach(e, vocab) {
        int32_t id;
        size_t l = strlen(e->string);
        if (!l || !id_of(e, &id)) {
            st = qmm_fail(QMM_ERR_FORMAT, "%s: vocabulary entry \"%.40s\" needs an id in [0, %d)",
                          what, e->string, MAX_IDS);
            break;
        }
        int r = tok_map_put(&t->vocab, e->string, l, id);
        if (r <= 0) {
            st = r < 0 ? qmm_fail(QMM_ERR_NOMEM, "%s: out of memory", what)
                       : qmm_fail(QMM_ERR_FORMAT, "%s: token \"%.40s\" appears twice", what,
                                  e->string);
            break;
        }
        total += l;
        if (id >= t->n_ids) t->n_ids = (int64_t)id + 1;
    }
    if (!st) st = load_added(t, root, what);
    if (!st) st = load_merges(t, merges, what);
    if (!st) st = build_bytes(t, vocab, total, what);
    if (!st) st = compile_regex(t, pattern, what);
    cJSON_Delete(root);
    return st;
}
