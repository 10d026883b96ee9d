/* Strict JSON reader: recursive descent into a flat node array (see json.h). */
#include "llm/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct parser {
    const char *t;
    size_t len, pos;
    json_doc *d;
    uint32_t max_nodes; /* a value needs >= 2 bytes of text: len / 2 + 2 nodes at most */
} parser;

static qmm_status perr(const parser *p, const char *what)
{
    return qmm_fail(QMM_ERR_FORMAT, "JSON: %s at byte %zu", what, p->pos);
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        char c = p->t[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* Append a node; its index goes to *idx. */
static qmm_status new_node(parser *p, json_type type, uint32_t *idx)
{
    json_doc *d = p->d;
    if (d->count == d->cap) {
        if (d->cap >= UINT32_MAX / 2) return perr(p, "too many values");
        /* doubling, but never past what the text can hold: no slack of up to 2x at the end */
        uint32_t cap = d->cap ? d->cap * 2 : 64;
        if (cap > p->max_nodes && d->cap < p->max_nodes) cap = p->max_nodes;
        json_node *n = realloc(d->nodes, (size_t)cap * sizeof *n);
        if (!n) return qmm_fail(QMM_ERR_NOMEM, "JSON: out of memory for %u nodes", cap);
        d->nodes = n;
        d->cap = cap;
    }
    *idx = d->count++;
    json_node *n = &d->nodes[*idx];
    memset(n, 0, sizeof *n);
    n->type = (uint8_t)type;
    if (type == JSON_ARRAY || type == JSON_OBJECT) n->offset = (uint32_t)p->pos;
    return QMM_OK;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at p->pos into *cp. */
static qmm_status read_hex4(parser *p, uint32_t *cp)
{
    if (p->len - p->pos < 4) return perr(p, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->t[p->pos + i]);
        if (h < 0) return perr(p, "bad hex digit in \\u escape");
        v = v * 16 + (uint32_t)h;
    }
    p->pos += 4;
    *cp = v;
    return QMM_OK;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence starting at s[0] (a byte >= 0x80), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;  /* no overlong forms */
        if (c == 0xED) hi = 0x9F;  /* no UTF-16 surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;  /* <= U+10FFFF */
    } else
        return 0;
    if (avail < n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

static qmm_status parse_string(parser *p)
{
    uint32_t idx;
    qmm_status st = new_node(p, JSON_STRING, &idx);
    if (st) return st;
    p->pos++; /* opening quote */
    json_doc *d = p->d;
    char *out = d->strings + d->strings_len;
    size_t o = 0;
    for (;;) {
        if (p->pos >= p->len) return perr(p, "unterminated string");
        unsigned char c = (unsigned char)p->t[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) return perr(p, "control character in string");
        if (c == '\\') {
            p->pos++;
            if (p->pos >= p->len) return perr(p, "unterminated escape");
            char e = p->t[p->pos++];
            switch (e) {
            case '"': out[o++] = '"'; break;
            case '\\': out[o++] = '\\'; break;
            case '/': out[o++] = '/'; break;
            case 'b': out[o++] = '\b'; break;
            case 'f': out[o++] = '\f'; break;
            case 'n': out[o++] = '\n'; break;
            case 'r': out[o++] = '\r'; break;
            case 't': out[o++] = '\t'; break;
            case 'u': {
                uint32_t cp;
                if ((st = read_hex4(p, &cp))) return st;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return perr(p, "lone low surrogate");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (p->len - p->pos < 2 || p->t[p->pos] != '\\' || p->t[p->pos + 1] != 'u')
                        return perr(p, "high surrogate without its pair");
                    p->pos += 2;
                    if ((st = read_hex4(p, &lo))) return st;
                    if (lo < 0xDC00 || lo > 0xDFFF) return perr(p, "bad surrogate pair");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (cp == 0) return perr(p, "NUL character in string");
                /* an escape is >= 6 bytes of text and decodes to <= 4 bytes: the arena suffices */
                o += put_utf8(out + o, cp);
                break;
            }
            default: return perr(p, "unknown escape");
            }
            continue;
        }
        if (c < 0x80) {
            out[o++] = (char)c;
            p->pos++;
            continue;
        }
        size_t n = utf8_seq((const unsigned char *)p->t + p->pos, p->len - p->pos);
        if (!n) return perr(p, "invalid UTF-8 in string");
        memcpy(out + o, p->t + p->pos, n);
        o += n;
        p->pos += n;
    }
    out[o] = 0;
    d->nodes[idx].str = out;
    d->nodes[idx].str_len = (uint32_t)o;
    d->strings_len += o + 1;
    return QMM_OK;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static qmm_status parse_number(parser *p)
{
    uint32_t idx;
    qmm_status st = new_node(p, JSON_NUMBER, &idx);
    if (st) return st;
    size_t start = p->pos;
    int neg = 0, integral = 1;
    if (p->t[p->pos] == '-') {
        neg = 1;
        p->pos++;
    }
    if (p->pos >= p->len || !is_digit(p->t[p->pos])) return perr(p, "bad number");
    if (p->t[p->pos] == '0') {
        p->pos++;
    } else {
        while (p->pos < p->len && is_digit(p->t[p->pos])) p->pos++;
    }
    size_t int_end = p->pos;
    if (p->pos < p->len && p->t[p->pos] == '.') {
        integral = 0;
        p->pos++;
        if (p->pos >= p->len || !is_digit(p->t[p->pos])) return perr(p, "bad fraction");
        while (p->pos < p->len && is_digit(p->t[p->pos])) p->pos++;
    }
    if (p->pos < p->len && (p->t[p->pos] == 'e' || p->t[p->pos] == 'E')) {
        integral = 0;
        p->pos++;
        if (p->pos < p->len && (p->t[p->pos] == '+' || p->t[p->pos] == '-')) p->pos++;
        if (p->pos >= p->len || !is_digit(p->t[p->pos])) return perr(p, "bad exponent");
        while (p->pos < p->len && is_digit(p->t[p->pos])) p->pos++;
    }
    size_t n = p->pos - start;
    if (n >= 128) return perr(p, "number literal too long");
    json_node *node = &p->d->nodes[idx];
    if (integral) {
        /* exact integer, overflow-checked: magnitude up to 2^63 (for the negative end) */
        uint64_t mag = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        int fits = 1;
        for (size_t i = start + (size_t)neg; i < int_end; i++) {
            uint64_t dgt = (uint64_t)(p->t[i] - '0');
            if (mag > (lim - dgt) / 10) {
                fits = 0;
                break;
            }
            mag = mag * 10 + dgt;
        }
        if (fits) {
            /* exact: no strtod (the common case, and the slow one in big headers) */
            node->is_int = 1;
            node->i = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag)
                          : (int64_t)mag;
            return QMM_OK;
        }
    }
    char buf[128];
    memcpy(buf, p->t + start, n);
    buf[n] = 0;
    node->real_ = strtod(buf, NULL);
    if (!isfinite(node->real_)) return perr(p, "number out of range");
    return QMM_OK;
}

static qmm_status parse_literal(parser *p)
{
    static const struct {
        const char *word;
        json_type type;
        int value;
    } lits[] = {{"true", JSON_BOOL, 1}, {"false", JSON_BOOL, 0}, {"null", JSON_NULL, 0}};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(lits[i].word);
        if (p->len - p->pos >= n && !memcmp(p->t + p->pos, lits[i].word, n)) {
            uint32_t idx;
            qmm_status st = new_node(p, lits[i].type, &idx);
            if (st) return st;
            p->d->nodes[idx].boolean = (uint8_t)lits[i].value;
            p->pos += n;
            return QMM_OK;
        }
    }
    return perr(p, "unexpected character");
}

typedef struct key_ref {
    const char *s;
    size_t n;
} key_ref;

static int key_cmp(const void *a, const void *b)
{
    const key_ref *x = a, *y = b;
    return qmm_cmp_bytes(x->s, x->n, y->s, y->n);
}

/* Duplicate keys make a document ambiguous (which tensor is "the" one?), so they are errors. */
static qmm_status check_duplicates(parser *p, uint32_t obj)
{
    json_doc *d = p->d;
    uint32_t n = d->nodes[obj].count;
    if (n < 2) return QMM_OK;
    key_ref *keys = malloc((size_t)n * sizeof *keys);
    if (!keys) return qmm_fail(QMM_ERR_NOMEM, "JSON: out of memory checking %u keys", n);
    uint32_t k = obj + 1;
    for (uint32_t i = 0; i < n; i++) {
        keys[i].s = d->nodes[k].str;
        keys[i].n = d->nodes[k].str_len;
        k = json_end(d, k + 1);
    }
    qsort(keys, n, sizeof *keys, key_cmp);
    qmm_status st = QMM_OK;
    for (uint32_t i = 1; i < n; i++) {
        if (!key_cmp(&keys[i - 1], &keys[i])) {
            st = qmm_fail(QMM_ERR_FORMAT, "JSON: duplicate key \"%.*s\" in the object at byte %zu",
                          (int)(keys[i].n > 200 ? 200 : keys[i].n), keys[i].s,
                          (size_t)d->nodes[obj].offset);
            break;
        }
    }
    free(keys);
    return st;
}

static qmm_status parse_value(parser *p, int depth);

static qmm_status parse_container(parser *p, int depth, int is_object)
{
    if (depth >= JSON_MAX_DEPTH) return perr(p, "nesting too deep");
    uint32_t idx;
    qmm_status st = new_node(p, is_object ? JSON_OBJECT : JSON_ARRAY, &idx);
    if (st) return st;
    char close = is_object ? '}' : ']';
    p->pos++;
    skip_ws(p);
    uint32_t count = 0;
    if (p->pos < p->len && p->t[p->pos] == close) {
        p->pos++;
    } else {
        for (;;) {
            skip_ws(p);
            if (is_object) {
                if (p->pos >= p->len || p->t[p->pos] != '"') return perr(p, "expected a key string");
                if ((st = parse_string(p))) return st;
                skip_ws(p);
                if (p->pos >= p->len || p->t[p->pos] != ':') return perr(p, "expected ':'");
                p->pos++;
            }
            if ((st = parse_value(p, depth + 1))) return st;
            count++;
            skip_ws(p);
            if (p->pos >= p->len) return perr(p, "unterminated container");
            char c = p->t[p->pos++];
            if (c == close) break;
            if (c != ',') {
                p->pos--;
                return perr(p, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        }
    }
    p->d->nodes[idx].count = count;
    p->d->nodes[idx].end_ = p->d->count;
    return is_object ? check_duplicates(p, idx) : QMM_OK;
}

static qmm_status parse_value(parser *p, int depth)
{
    skip_ws(p);
    if (p->pos >= p->len) return perr(p, "unexpected end of text");
    char c = p->t[p->pos];
    if (c == '{') return parse_container(p, depth, 1);
    if (c == '[') return parse_container(p, depth, 0);
    if (c == '"') return parse_string(p);
    if (c == '-' || is_digit(c)) return parse_number(p);
    return parse_literal(p);
}

qmm_status json_parse(const char *text, size_t len, json_doc *doc)
{
    if (!doc) return qmm_fail(QMM_ERR_NULL, "json_parse: doc is NULL");
    memset(doc, 0, sizeof *doc);
    if (!text && len) return qmm_fail(QMM_ERR_NULL, "json_parse: text is NULL");
    if (len >= UINT32_MAX / 2)
        return qmm_fail(QMM_ERR_RANGE, "JSON: a text of %zu bytes is too large", len);
    doc->strings = malloc(len + 1);
    if (!doc->strings) return qmm_fail(QMM_ERR_NOMEM, "JSON: out of memory for %zu bytes", len);
    parser p = {text, len, 0, doc, (uint32_t)(len / 2 + 2)};
    qmm_status st = parse_value(&p, 0);
    if (!st) {
        skip_ws(&p);
        if (p.pos != len) st = perr(&p, "trailing characters after the value");
    }
    if (st) json_free(doc);
    return st;
}

void json_free(json_doc *doc)
{
    if (!doc) return;
    free(doc->nodes);
    free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

uint32_t json_member(const json_doc *d, uint32_t obj, const char *key)
{
    if (!d || obj >= d->count || d->nodes[obj].type != JSON_OBJECT) return 0;
    size_t kl = strlen(key);
    uint32_t k = obj + 1;
    for (uint32_t i = 0; i < d->nodes[obj].count; i++) {
        const json_node *kn = &d->nodes[k];
        if (kn->str_len == kl && !memcmp(kn->str, key, kl)) return k + 1;
        k = json_end(d, k + 1);
    }
    return 0;
}

uint32_t json_first(const json_doc *d, uint32_t parent)
{
    if (!d || parent >= d->count) return 0;
    const json_node *n = &d->nodes[parent];
    if ((n->type != JSON_ARRAY && n->type != JSON_OBJECT) || !n->count) return 0;
    return parent + 1;
}

uint32_t json_next(const json_doc *d, uint32_t parent, uint32_t c)
{
    uint32_t n = json_end(d, c);
    return n < json_end(d, parent) ? n : 0;
}

const char *json_type_name(json_type t)
{
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "boolean";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    case JSON_OBJECT: return "object";
    }
    return "?";
}
