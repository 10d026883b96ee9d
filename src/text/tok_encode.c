/* Encoding: added tokens first, then per text run NFC, the pre-tokenizer split and BPE. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "internal.h"
#include "text/tok_internal.h"

typedef struct ids_buf {
    int32_t *v;
    int64_t n, cap;
    int32_t *sym;     /* BPE scratch: symbols of the current piece */
    uint32_t *rank;   /* rank of the pair (sym[i], sym[i+1]) */
    int32_t *next, *prev;
    size_t scratch;   /* symbols the scratch holds */
    struct heap_e { uint32_t rank; int32_t pos, merged; } *heap;
    size_t heap_n;
} ids_buf;

static int push_id(ids_buf *b, int32_t id)
{
    if (b->n == b->cap) {
        int64_t cap = b->cap ? b->cap * 2 : 256;
        int32_t *v = realloc(b->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = id;
    return 0;
}

static int reserve_scratch(ids_buf *b, size_t n)
{
    if (n <= b->scratch) return 0;
    size_t c = n < 256 ? 256 : n;
    int32_t *s = realloc(b->sym, c * sizeof *s);
    if (s) b->sym = s;
    uint32_t *r = realloc(b->rank, c * sizeof *r);
    if (r) b->rank = r;
    int32_t *nx = realloc(b->next, c * sizeof *nx);
    if (nx) b->next = nx;
    int32_t *pv = realloc(b->prev, c * sizeof *pv);
    if (pv) b->prev = pv;
    struct heap_e *h = realloc(b->heap, 2 * c * sizeof *h); /* every merge pushes at most 2 */
    if (h) b->heap = h;
    if (!s || !r || !nx || !pv || !h) return -1;
    b->scratch = c;
    return 0;
}

#define NO_RANK UINT32_MAX

static uint32_t pair_rank(const qmm_tokenizer *t, int32_t a, int32_t b, int32_t *merged)
{
    uint32_t r;
    return tok_pairs_get(&t->merges, a, b, &r, merged) ? r : NO_RANK;
}

/* Short pieces: repeatedly merge the lowest-ranked pair (leftmost on ties), O(n^2). */
static int bpe_short(const qmm_tokenizer *t, ids_buf *b, size_t n)
{
    int32_t *s = b->sym, merged;
    uint32_t *r = b->rank;
    for (size_t i = 0; i + 1 < n; i++) r[i] = pair_rank(t, s[i], s[i + 1], &merged);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (r[i] < r[best]) best = i;
        if (r[best] == NO_RANK) break;
        pair_rank(t, s[best], s[best + 1], &s[best]);
        memmove(s + best + 1, s + best + 2, (n - best - 2) * sizeof *s);
        memmove(r + best + 1, r + best + 2, (n > best + 2 ? n - best - 3 : 0) * sizeof *r);
        n--;
        if (best > 0) r[best - 1] = pair_rank(t, s[best - 1], s[best], &merged);
        if (best + 1 < n) r[best] = pair_rank(t, s[best], s[best + 1], &merged);
    }
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad |= push_id(b, s[i]);
    return bad;
}

/* Min-heap on (rank, pos): the order HF tokenizers merges in. */
static int heap_less(const struct heap_e *x, const struct heap_e *y)
{
    return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

static void heap_push(ids_buf *b, struct heap_e e)
{
    size_t i = b->heap_n++;
    while (i > 0 && heap_less(&e, &b->heap[(i - 1) / 2])) {
        b->heap[i] = b->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    b->heap[i] = e;
}

static struct heap_e heap_pop(ids_buf *b)
{
    struct heap_e top = b->heap[0], last = b->heap[--b->heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= b->heap_n) break;
        if (c + 1 < b->heap_n && heap_less(&b->heap[c + 1], &b->heap[c])) c++;
        if (!heap_less(&b->heap[c], &last)) break;
        b->heap[i] = b->heap[c];
        i = c;
    }
    if (b->heap_n) b->heap[i] = last;
    return top;
}

static void heap_pair(const qmm_tokenizer *t, ids_buf *b, int32_t pos)
{
    int32_t nx = b->next[pos], merged;
    if (nx < 0) return;
    uint32_t r = pair_rank(t, b->sym[pos], b->sym[nx], &merged);
    if (r != NO_RANK) heap_push(b, (struct heap_e){r, pos, merged});
}

/* Long pieces (whitespace runs, long words): the same merges through a heap, O(n log n). */
static int bpe_long(const qmm_tokenizer *t, ids_buf *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        b->prev[i] = (int32_t)i - 1;
        b->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    b->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) heap_pair(t, b, (int32_t)i);
    while (b->heap_n) {
        struct heap_e e = heap_pop(b);
        int32_t right = b->next[e.pos], merged;
        if (b->sym[e.pos] < 0 || right < 0) continue; /* merged away, or now last */
        if (pair_rank(t, b->sym[e.pos], b->sym[right], &merged) == NO_RANK ||
            merged != e.merged)
            continue; /* stale: the pair changed since it was pushed */
        b->sym[e.pos] = merged;
        b->sym[right] = -1;
        b->next[e.pos] = b->next[right];
        if (b->next[right] >= 0) b->prev[b->next[right]] = e.pos;
        if (b->prev[e.pos] >= 0) heap_pair(t, b, b->prev[e.pos]);
        heap_pair(t, b, e.pos);
    }
    int bad = 0;
    for (int32_t i = 0; i >= 0; i = b->next[i]) bad |= push_id(b, b->sym[i]);
    return bad;
}

static int bpe_piece(const qmm_tokenizer *t, ids_buf *b, const unsigned char *p, size_t n)
{
    if (reserve_scratch(b, n)) return -1;
    for (size_t i = 0; i < n; i++) b->sym[i] = t->byte_id[p[i]];
    if (n == 1) return push_id(b, b->sym[0]);
    return n <= 64 ? bpe_short(t, b, n) : bpe_long(t, b, n);
}

/* A valid UTF-8 run: NFC, then the pre-tokenizer's pieces (matches and the gaps between). */
static qmm_status encode_run(const qmm_tokenizer *t, ids_buf *b, pcre2_match_data *md,
                             const unsigned char *s, size_t n)
{
    unsigned char *norm = NULL;
    int ascii = 1;
    for (size_t i = 0; i < n && ascii; i++) ascii = s[i] < 0x80;
    if (!ascii) {
        utf8proc_ssize_t m = utf8proc_map(s, (utf8proc_ssize_t)n, &norm,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (m < 0) return qmm_fail(QMM_ERR_NOMEM, "tokenizer: NFC: %s", utf8proc_errmsg(m));
        s = norm;
        n = (size_t)m;
    }
    size_t at = 0;
    qmm_status st = QMM_OK;
    while (at < n && !st) {
        int rc = pcre2_match(t->re, s, n, at, PCRE2_NO_UTF_CHECK, md, NULL);
        size_t ms = n, me = n;
        if (rc >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            ms = ov[0];
            me = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            st = qmm_fail(QMM_ERR_RANGE, "tokenizer: regex match failed (%d)", rc);
            break;
        }
        if (ms > at && bpe_piece(t, b, s + at, ms - at)) st = qmm_fail(QMM_ERR_NOMEM, "encode");
        if (me > ms && bpe_piece(t, b, s + ms, me - ms)) st = qmm_fail(QMM_ERR_NOMEM, "encode");
        if (me == ms && rc >= 0) { /* an empty match: step one character */
            size_t k = ms + 1;
            while (k < n && (s[k] & 0xC0) == 0x80) k++;
            if (bpe_piece(t, b, s + ms, k - ms)) st = qmm_fail(QMM_ERR_NOMEM, "encode");
            me = k;
        }
        at = me;
    }
    free(norm);
    return st;
}

/* Length of the valid UTF-8 character at s[0..n), 0 when invalid (overlong, surrogate, > 10FFFF,
 * truncated): the same rule as Python's and PCRE2's. */
static size_t utf8_valid_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t l = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!l || l > n) return 0;
    for (size_t i = 1; i < l; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
    if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogates */
    if (c == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
    if (c == 0xF4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
    return l;
}

/* Text between added tokens: valid runs encoded alone, each invalid byte its byte token. */
static qmm_status encode_text(const qmm_tokenizer *t, ids_buf *b, pcre2_match_data *md,
                              const unsigned char *s, size_t n)
{
    size_t at = 0;
    while (at < n) {
        size_t e = at, l;
        while (e < n && (l = utf8_valid_len(s + e, n - e))) e += l;
        if (e > at) {
            qmm_status st = encode_run(t, b, md, s + at, e - at);
            if (st) return st;
        }
        if (e < n && push_id(b, t->byte_id[s[e]])) return qmm_fail(QMM_ERR_NOMEM, "encode");
        at = e < n ? e + 1 : n;
    }
    return QMM_OK;
}

/* The longest added token starting at s[0..n) (the list is sorted longest first), or NULL. */
static const tok_added *added_at(const qmm_tokenizer *t, const char *s, size_t n)
{
    for (int i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        if (a->len <= n && a->text[0] == s[0] && !memcmp(a->text, s, a->len)) return a;
    }
    return NULL;
}

qmm_status qmm_tokenizer_encode(const qmm_tokenizer *t, const char *text, size_t len,
                                int32_t **ids, int64_t *n)
{
    if (!t || (!text && len) || !ids || !n)
        return qmm_fail(QMM_ERR_NULL, "qmm_tokenizer_encode: NULL argument");
    ids_buf b;
    memset(&b, 0, sizeof b);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    qmm_status st = md ? QMM_OK : qmm_fail(QMM_ERR_NOMEM, "qmm_tokenizer_encode: out of memory");
    size_t start = 0;
    for (size_t i = 0; i < len && !st;) {
        const tok_added *a = t->added_first[(unsigned char)text[i]] ? added_at(t, text + i, len - i)
                                                                   : NULL;
        if (!a) {
            i++;
            continue;
        }
        st = encode_text(t, &b, md, (const unsigned char *)text + start, i - start);
        if (!st && push_id(&b, a->id)) st = qmm_fail(QMM_ERR_NOMEM, "encode");
        i += a->len;
        start = i;
    }
    if (!st) st = encode_text(t, &b, md, (const unsigned char *)text + start, len - start);
    pcre2_match_data_free(md);
    free(b.sym);
    free(b.rank);
    free(b.next);
    free(b.prev);
    free(b.heap);
    if (st) {
        free(b.v);
        return st;
    }
    *ids = b.v;
    *n = b.n;
    qmm_clear_error();
    return QMM_OK;
}
