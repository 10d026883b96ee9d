/* safetensors: header parsing with full validation, single files and sharded sets. */
#include "llm/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1},     [ST_U8] = {"U8", 1},   [ST_I8] = {"I8", 1},
    [ST_U16] = {"U16", 2},       [ST_I16] = {"I16", 2}, [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2},     [ST_U32] = {"U32", 4}, [ST_I32] = {"I32", 4},
    [ST_F32] = {"F32", 4},       [ST_U64] = {"U64", 8}, [ST_I64] = {"I64", 8},
    [ST_F64] = {"F64", 8},       [ST_F8_E4M3] = {"F8_E4M3", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *st_dtype_name(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? dtypes[t].name : "?"; }
size_t st_dtype_size(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? dtypes[t].size : 0; }

void st_shape_string(int ndim, const int64_t *shape, char *out, size_t size)
{
    size_t o = 0;
    int n = snprintf(out, size, "[");
    o = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < ndim && o < size; i++) {
        n = snprintf(out + o, size - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
        if (n < 0) break;
        o += (size_t)n;
    }
    if (o < size) snprintf(out + o, size - o, "]");
}

/* Names in messages are clipped: a hostile header may hold megabyte-long keys. */
#define NAME_FMT "'%.*s'"
#define NAME_ARG(s, n) (int)((n) > 120 ? 120 : (n)), (s)

static qmm_status parse_tensor(const json_doc *d, uint32_t key, uint32_t val, uint64_t data_len,
                               const unsigned char *data, const char *what, st_tensor *t)
{
    const json_node *k = &d->nodes[key];
    memset(t, 0, sizeof *t);
    t->name = k->str;
    t->name_len = k->str_len;
    if (d->nodes[val].type != JSON_OBJECT)
        return qmm_fail(QMM_ERR_FORMAT, "%s: entry " NAME_FMT " is not an object", what,
                        NAME_ARG(k->str, k->str_len));
    uint32_t dt = json_member(d, val, "dtype"), sh = json_member(d, val, "shape"),
             off = json_member(d, val, "data_offsets");
    if (!dt || !sh || !off)
        return qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT " lacks %s", what,
                        NAME_ARG(k->str, k->str_len),
                        !dt ? "\"dtype\"" : !sh ? "\"shape\"" : "\"data_offsets\"");
    if (d->nodes[dt].type != JSON_STRING)
        return qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT ": dtype is not a string", what,
                        NAME_ARG(k->str, k->str_len));
    int found = 0;
    for (int i = 0; i < ST_DTYPE_COUNT; i++) {
        if (!strcmp(d->nodes[dt].str, dtypes[i].name) &&
            d->nodes[dt].str_len == strlen(dtypes[i].name)) {
            t->dtype = (st_dtype)i;
            found = 1;
        }
    }
    if (!found)
        return qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT ": unknown dtype \"%.20s\"", what,
                        NAME_ARG(k->str, k->str_len), d->nodes[dt].str);

    const json_node *shn = &d->nodes[sh];
    if (shn->type != JSON_ARRAY || shn->count > ST_MAX_DIMS)
        return qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT ": shape must be an array of at "
                        "most %d sizes", what, NAME_ARG(k->str, k->str_len), ST_MAX_DIMS);
    t->ndim = (int)shn->count;
    /* elements, overflow-checked; every size below 2^62 keeps the product check simple */
    uint64_t elems = 1;
    int overflow = 0, i = 0;
    for (uint32_t c = json_first(d, sh); c; c = json_next(d, sh, c), i++) {
        const json_node *v = &d->nodes[c];
        if (v->type != JSON_NUMBER || !v->is_int || v->i < 0)
            return qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT ": shape entries must be "
                            "integers >= 0", what, NAME_ARG(k->str, k->str_len));
        t->shape[i] = v->i;
        if (v->i && elems > UINT64_MAX / (uint64_t)v->i) overflow = 1;
        else elems *= (uint64_t)v->i;
    }
    size_t esz = dtypes[t->dtype].size;
    if (overflow || elems > UINT64_MAX / esz)
        return qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT ": shape overflows", what,
                        NAME_ARG(k->str, k->str_len));
    t->nbytes = elems * esz;

    const json_node *on = &d->nodes[off];
    if (on->type != JSON_ARRAY || on->count != 2)
        return qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT ": data_offsets must be "
                        "[begin, end]", what, NAME_ARG(k->str, k->str_len));
    const json_node *b = &d->nodes[off + 1], *e = &d->nodes[json_end(d, off + 1)];
    if (b->type != JSON_NUMBER || !b->is_int || b->i < 0 || e->type != JSON_NUMBER ||
        !e->is_int || e->i < 0)
        return qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT ": data_offsets must be "
                        "integers >= 0", what, NAME_ARG(k->str, k->str_len));
    uint64_t begin = (uint64_t)b->i, end = (uint64_t)e->i;
    if (begin > end || end > data_len)
        return qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT ": data_offsets [%llu, %llu] "
                        "outside the %llu-byte data buffer", what, NAME_ARG(k->str, k->str_len),
                        (unsigned long long)begin, (unsigned long long)end,
                        (unsigned long long)data_len);
    if (end - begin != t->nbytes)
        return qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT ": %llu bytes in data_offsets but "
                        "its %s shape needs %llu", what, NAME_ARG(k->str, k->str_len),
                        (unsigned long long)(end - begin), dtypes[t->dtype].name,
                        (unsigned long long)t->nbytes);
    t->data = data + begin;
    return QMM_OK;
}

typedef struct span {
    uint64_t begin, end;
    size_t tensor;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* The format requires the tensors to tile the data buffer: sorted by offset, each begins where
 * the previous ended, the last ends at the buffer's end. Overlaps (two tensors sharing bytes)
 * and gaps (bytes no tensor owns) are refused. */
static qmm_status check_tiling(const st_header *h, const unsigned char *data, uint64_t data_len,
                               const char *what)
{
    if (!h->count) {
        if (data_len)
            return qmm_fail(QMM_ERR_FORMAT, "%s: %llu data bytes but no tensor", what,
                            (unsigned long long)data_len);
        return QMM_OK;
    }
    span *sp = malloc(h->count * sizeof *sp);
    if (!sp) return qmm_fail(QMM_ERR_NOMEM, "%s: out of memory", what);
    for (size_t i = 0; i < h->count; i++) {
        sp[i].begin = (uint64_t)(h->tensors[i].data - data);
        sp[i].end = sp[i].begin + h->tensors[i].nbytes;
        sp[i].tensor = i;
    }
    qsort(sp, h->count, sizeof *sp, span_cmp);
    qmm_status st = QMM_OK;
    uint64_t at = 0;
    for (size_t i = 0; i < h->count && !st; i++) {
        if (sp[i].begin != at) {
            const st_tensor *t = &h->tensors[sp[i].tensor];
            st = qmm_fail(QMM_ERR_FORMAT, "%s: tensor " NAME_FMT " starts at byte %llu of the data "
                          "buffer, but the tensors before it end at %llu (%s)", what,
                          NAME_ARG(t->name, t->name_len), (unsigned long long)sp[i].begin,
                          (unsigned long long)at, sp[i].begin < at ? "overlap" : "gap");
        }
        at = sp[i].end;
    }
    if (!st && at != data_len)
        st = qmm_fail(QMM_ERR_FORMAT, "%s: the tensors end at byte %llu of the %llu-byte data "
                      "buffer (trailing bytes)", what, (unsigned long long)at,
                      (unsigned long long)data_len);
    free(sp);
    return st;
}

qmm_status st_parse(const unsigned char *buf, size_t len, const char *what, st_header *out)
{
    if (!out || (!buf && len)) return qmm_fail(QMM_ERR_NULL, "st_parse: NULL argument");
    memset(out, 0, sizeof *out);
    if (!what) what = "safetensors";
    if (len < 8)
        return qmm_fail(QMM_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file", what,
                        len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    if (hlen > len - 8)
        return qmm_fail(QMM_ERR_FORMAT, "%s: header length %llu is longer than the %zu bytes "
                        "that follow it", what, (unsigned long long)hlen, len - 8);
    if (hlen > ST_MAX_HEADER)
        return qmm_fail(QMM_ERR_FORMAT, "%s: header length %llu exceeds the 100 MB limit", what,
                        (unsigned long long)hlen);
    if (hlen < 2) return qmm_fail(QMM_ERR_FORMAT, "%s: header of %llu bytes", what,
                                  (unsigned long long)hlen);
    const unsigned char *data = buf + 8 + hlen;
    uint64_t data_len = (uint64_t)len - 8 - hlen;

    qmm_status st = json_parse((const char *)buf + 8, (size_t)hlen, &out->doc);
    if (st) {
        char detail[300];
        snprintf(detail, sizeof detail, "%s", qmm_last_error());
        return qmm_fail(st, "%s: header: %s", what, detail);
    }
    const json_doc *d = &out->doc;
    if (d->nodes[0].type != JSON_OBJECT) {
        st_header_free(out);
        return qmm_fail(QMM_ERR_FORMAT, "%s: header is not a JSON object", what);
    }
    out->tensors = calloc(d->nodes[0].count ? d->nodes[0].count : 1, sizeof *out->tensors);
    if (!out->tensors) {
        st_header_free(out);
        return qmm_fail(QMM_ERR_NOMEM, "%s: out of memory", what);
    }
    for (uint32_t k = json_first(d, 0); k; k = json_next(d, 0, k + 1)) {
        uint32_t v = k + 1;
        if (!strcmp(d->nodes[k].str, "__metadata__") && d->nodes[k].str_len == 12) {
            if (d->nodes[v].type == JSON_NULL) continue; /* mx.save_safetensors without metadata */
            if (d->nodes[v].type != JSON_OBJECT) {
                st_header_free(out);
                return qmm_fail(QMM_ERR_FORMAT, "%s: __metadata__ is not an object", what);
            }
            for (uint32_t mk = json_first(d, v); mk; mk = json_next(d, v, mk + 1)) {
                if (d->nodes[mk + 1].type != JSON_STRING) {
                    st_header_free(out);
                    return qmm_fail(QMM_ERR_FORMAT, "%s: __metadata__ values must be strings",
                                    what);
                }
            }
            continue;
        }
        st = parse_tensor(d, k, v, data_len, data, what, &out->tensors[out->count]);
        if (st) {
            st_header_free(out);
            return st;
        }
        out->count++;
    }
    st = check_tiling(out, data, data_len, what);
    if (st) st_header_free(out);
    return st;
}

void st_header_free(st_header *h)
{
    if (!h) return;
    free(h->tensors);
    json_free(&h->doc);
    memset(h, 0, sizeof *h);
}

/* ---- sets of files ---- */

static int tensor_cmp(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Add one file to the set (map or copy it, parse); image: a caller's buffer instead of a file. */
static qmm_status add_file(st_set *s, const char *path, const unsigned char *image, size_t len)
{
    int i = s->nfiles;
    char **paths = realloc(s->paths, (size_t)(i + 1) * sizeof *paths);
    if (paths) s->paths = paths;
    llm_mapping *maps = realloc(s->maps, (size_t)(i + 1) * sizeof *maps);
    if (maps) s->maps = maps;
    st_header *hs = realloc(s->headers, (size_t)(i + 1) * sizeof *hs);
    if (hs) s->headers = hs;
    if (!paths || !maps || !hs) return qmm_fail(QMM_ERR_NOMEM, "out of memory opening %s", path);
    s->paths[i] = strdup(path);
    if (!s->paths[i]) return qmm_fail(QMM_ERR_NOMEM, "out of memory opening %s", path);
    memset(&s->maps[i], 0, sizeof s->maps[i]);
    memset(&s->headers[i], 0, sizeof s->headers[i]);
    s->nfiles = i + 1;
    qmm_status st = QMM_OK;
    if (image) {
        s->maps[i].addr = (unsigned char *)image; /* read only; never freed */
        s->maps[i].len = len;
        s->maps[i].kind = LLM_BORROWED;
    } else if ((st = llm_load_file(path, s->copy, &s->maps[i]))) {
        return st;
    }
    st = st_parse(s->maps[i].addr, s->maps[i].len, path, &s->headers[i]);
    if (st) return st;
    for (size_t t = 0; t < s->headers[i].count; t++) s->headers[i].tensors[t].file = i;
    return QMM_OK;
}

/* Build the sorted lookup over all files; a name in two files is an error. */
static qmm_status build_index(st_set *s)
{
    size_t total = 0;
    for (int i = 0; i < s->nfiles; i++) total += s->headers[i].count;
    s->sorted = malloc((total ? total : 1) * sizeof *s->sorted);
    if (!s->sorted) return qmm_fail(QMM_ERR_NOMEM, "out of memory indexing tensors");
    s->count = 0;
    for (int i = 0; i < s->nfiles; i++)
        for (size_t t = 0; t < s->headers[i].count; t++)
            s->sorted[s->count++] = &s->headers[i].tensors[t];
    qsort(s->sorted, s->count, sizeof *s->sorted, tensor_cmp);
    for (size_t i = 1; i < s->count; i++)
        if (!tensor_cmp(&s->sorted[i - 1], &s->sorted[i]))
            return qmm_fail(QMM_ERR_FORMAT, "tensor " NAME_FMT " appears in both %s and %s",
                            NAME_ARG(s->sorted[i]->name, s->sorted[i]->name_len),
                            s->paths[s->sorted[i - 1]->file], s->paths[s->sorted[i]->file]);
    return QMM_OK;
}

/* A shard name from an index must be a plain file name in the same directory. */
static int safe_shard_name(const char *n)
{
    return n[0] && !strchr(n, '/') && strcmp(n, ".") && strcmp(n, "..") && strlen(n) < 1024;
}

/* One weight_map value (a shard name) and where it was first mentioned. */
typedef struct shard_ref {
    const char *name;
    size_t len;
    size_t order; /* entry index of the first mention */
    int file;     /* index in the set once opened */
} shard_ref;

static int shard_cmp(const void *a, const void *b)
{
    const shard_ref *x = a, *y = b;
    int c = qmm_cmp_bytes(x->name, x->len, y->name, y->len);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

static int order_cmp(const void *a, const void *b)
{
    const shard_ref *x = *(const shard_ref *const *)a, *y = *(const shard_ref *const *)b;
    return (x->order > y->order) - (x->order < y->order);
}

/* The distinct shard names of the weight_map, sorted by name (sorting, not a scan per entry:
 * millions of entries over thousands of shards stay fast); each shard opened once, in
 * first-mention order. */
static qmm_status open_shards(st_set *s, const json_doc *d, uint32_t wm, const char *index_path,
                              const char *dir, shard_ref **out, size_t *out_count)
{
    size_t n = d->nodes[wm].count, i = 0;
    shard_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    if (!refs) return qmm_fail(QMM_ERR_NOMEM, "%s: out of memory", index_path);
    for (uint32_t k = json_first(d, wm); k; k = json_next(d, wm, k + 1), i++) {
        const json_node *f = &d->nodes[k + 1];
        if (f->type != JSON_STRING || !safe_shard_name(f->str)) {
            free(refs);
            return qmm_fail(QMM_ERR_FORMAT, "%s: weight_map entry " NAME_FMT " must name a file "
                            "in the same directory", index_path,
                            NAME_ARG(d->nodes[k].str, d->nodes[k].str_len));
        }
        refs[i] = (shard_ref){f->str, f->str_len, i, -1};
    }
    qsort(refs, n, sizeof *refs, shard_cmp);
    size_t distinct = 0;
    for (i = 0; i < n; i++)
        if (!distinct || refs[distinct - 1].len != refs[i].len ||
            memcmp(refs[distinct - 1].name, refs[i].name, refs[i].len))
            refs[distinct++] = refs[i]; /* the first of a run has the smallest order */
    if (distinct > 4096) {
        free(refs);
        return qmm_fail(QMM_ERR_FORMAT, "%s: more than 4096 shards", index_path);
    }
    shard_ref **by_order = malloc((distinct ? distinct : 1) * sizeof *by_order);
    if (!by_order) {
        free(refs);
        return qmm_fail(QMM_ERR_NOMEM, "%s: out of memory", index_path);
    }
    for (i = 0; i < distinct; i++) by_order[i] = &refs[i];
    qsort(by_order, distinct, sizeof *by_order, order_cmp);
    qmm_status st = QMM_OK;
    char path[LLM_PATH_MAX];
    for (i = 0; i < distinct && !st; i++) {
        if ((st = llm_path_join(dir, by_order[i]->name, path, sizeof path))) break;
        by_order[i]->file = s->nfiles;
        st = add_file(s, path, NULL, 0);
    }
    free(by_order);
    if (st) {
        free(refs);
        return st;
    }
    *out = refs;
    *out_count = distinct;
    return QMM_OK;
}

static qmm_status open_index(st_set *s, const char *index_path)
{
    char dir[LLM_PATH_MAX];
    qmm_status st = llm_dirname(index_path, dir, sizeof dir);
    if (st) return st;
    char *text;
    size_t len;
    if ((st = llm_read_file(index_path, 256u << 20, &text, &len))) return st;
    json_doc d;
    st = json_parse(text, len, &d);
    free(text);
    if (st) {
        char detail[300];
        snprintf(detail, sizeof detail, "%s", qmm_last_error());
        return qmm_fail(st, "%s: %s", index_path, detail);
    }
    uint32_t wm = d.nodes[0].type == JSON_OBJECT ? json_member(&d, 0, "weight_map") : 0;
    if (!wm || d.nodes[wm].type != JSON_OBJECT) {
        json_free(&d);
        return qmm_fail(QMM_ERR_FORMAT, "%s: no \"weight_map\" object", index_path);
    }
    shard_ref *shards = NULL;
    size_t nshards = 0;
    st = open_shards(s, &d, wm, index_path, dir, &shards, &nshards);
    if (!st) st = build_index(s);
    /* every mapped name must really be in the shard the index names */
    for (uint32_t k = json_first(&d, wm); k && !st; k = json_next(&d, wm, k + 1)) {
        const json_node *name = &d.nodes[k], *f = &d.nodes[k + 1];
        st_tensor key = {0};
        key.name = name->str;
        key.name_len = name->str_len;
        const st_tensor *kp = &key;
        const st_tensor **hit = NULL;
        if (s->count) hit = bsearch(&kp, s->sorted, s->count, sizeof *s->sorted, tensor_cmp);
        /* order 0 sorts before (or equal to) every mention of the same name */
        shard_ref want = {f->str, f->str_len, 0, -1};
        const shard_ref *sh = NULL;
        size_t lo = 0, hi = nshards;
        while (lo < hi) { /* lower bound of want's name among the distinct shards */
            size_t mid = lo + (hi - lo) / 2;
            if (shard_cmp(&shards[mid], &want) < 0) lo = mid + 1;
            else hi = mid;
        }
        if (lo < nshards && shards[lo].len == want.len && !memcmp(shards[lo].name, want.name, want.len))
            sh = &shards[lo];
        if (!hit || !sh || (*hit)->file != sh->file)
            /* the names first: a long index path would push them out of the message */
            st = qmm_fail(QMM_ERR_FORMAT, "weight_map puts " NAME_FMT " in %.200s, which does "
                          "not hold it (%s)", NAME_ARG(name->str, name->str_len), f->str,
                          index_path);
    }
    free(shards);
    json_free(&d);
    return st;
}

const st_tensor *st_find(const st_set *set, const char *name)
{
    if (!set || !name || !set->count) return NULL;
    st_tensor key = {0};
    key.name = name;
    key.name_len = strlen(name);
    const st_tensor *kp = &key;
    const st_tensor **hit = bsearch(&kp, set->sorted, set->count, sizeof *set->sorted, tensor_cmp);
    return hit ? *hit : NULL;
}

void st_close(st_set *set)
{
    if (!set) return;
    for (int i = 0; i < set->nfiles; i++) {
        st_header_free(&set->headers[i]);
        llm_unmap(&set->maps[i]);
        free(set->paths[i]);
    }
    free(set->paths);
    free(set->maps);
    free(set->headers);
    free(set->sorted);
    memset(set, 0, sizeof *set);
}

qmm_status st_open(const char *path, st_set *set) { return st_open_ex(path, 0, set); }

qmm_status st_open_image(const unsigned char *buf, size_t len, const char *what, st_set *set)
{
    if (!set || (!buf && len) || !what) return qmm_fail(QMM_ERR_NULL, "st_open_image: NULL argument");
    memset(set, 0, sizeof *set);
    qmm_status st = add_file(set, what, buf, len);
    if (!st) st = build_index(set);
    if (st) st_close(set);
    return st;
}

qmm_status st_open_ex(const char *path, int copy, st_set *set)
{
    if (!path || !set) return qmm_fail(QMM_ERR_NULL, "st_open: NULL argument");
    memset(set, 0, sizeof *set);
    set->copy = copy;
    char buf[LLM_PATH_MAX];
    qmm_status st;
    const char *index = NULL, *single = NULL;
    if (llm_is_dir(path)) {
        if ((st = llm_path_join(path, "model.safetensors.index.json", buf, sizeof buf))) return st;
        /* stat, not open: opening a FIFO would block (the open itself refuses non-files) */
        if (llm_exists(buf)) {
            index = buf;
        } else {
            if ((st = llm_path_join(path, "model.safetensors", buf, sizeof buf))) return st;
            if (!llm_exists(buf))
                return qmm_fail(QMM_ERR_NOT_FOUND, "%s holds neither model.safetensors nor "
                                "model.safetensors.index.json", path);
            single = buf;
        }
    } else if (ends_with(path, ".json")) {
        index = path;
    } else {
        single = path;
    }
    if (index) {
        st = open_index(set, index);
    } else {
        st = add_file(set, single, NULL, 0);
        if (!st) st = build_index(set);
    }
    if (st) st_close(set);
    return st;
}

float st_float_at(const st_tensor *t, int64_t i)
{
    if (t->dtype == ST_F32) {
        float v;
        memcpy(&v, t->data + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, t->data + 2 * i, 2);
    return t->dtype == ST_BF16 ? qmm_bf16_to_f32(h) : qmm_f16_to_f32(h);
}
