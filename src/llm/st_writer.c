/* safetensors writer (see st_writer.h). */
#include "llm/st_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void sb_fmt(qmm_buf *b, const char *fmt, unsigned long long a, unsigned long long c)
{
    char tmp[96];
    int n = snprintf(tmp, sizeof tmp, fmt, a, c);
    qmm_buf_put(b, tmp, (size_t)n);
}

/* A JSON string literal of s. */
static void sb_str(qmm_buf *b, const char *s)
{
    qmm_buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            qmm_buf_put(b, e, 2);
        } else if (c < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", c);
            qmm_buf_put(b, e, 6);
        } else {
            qmm_buf_put(b, (const char *)&c, 1);
        }
    }
    qmm_buf_put(b, "\"", 1);
}

qmm_status st_writer_open(st_writer *w, const char *final_path, const st_entry *entries,
                          size_t count, const char *format)
{
    memset(w, 0, sizeof *w);
    w->file.fd = -1;
    if (!final_path || (!entries && count))
        return qmm_fail(QMM_ERR_NULL, "st_writer_open: NULL argument");
    w->sizes = calloc(count ? count : 1, sizeof *w->sizes);
    if (!w->sizes) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    qmm_buf b = {0};
    qmm_buf_put(&b, "{", 1);
    if (format) {
        qmm_buf_put(&b, "\"__metadata__\":{\"format\":", 25);
        sb_str(&b, format);
        qmm_buf_put(&b, "}", 1);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < count; i++) {
        const st_entry *e = &entries[i];
        size_t esz = st_dtype_size(e->dtype);
        if (!esz || e->ndim < 0 || e->ndim > ST_MAX_DIMS || !e->name[0] ||
            !strcmp(e->name, "__metadata__")) {
            free(b.p);
            st_writer_discard(w);
            return qmm_fail(QMM_ERR_ARG, "st_writer: entry %zu is malformed", i);
        }
        uint64_t bytes = esz;
        for (int d = 0; d < e->ndim; d++) {
            if (e->shape[d] < 0 || (e->shape[d] && bytes > UINT64_MAX / 4 / (uint64_t)e->shape[d])) {
                free(b.p);
                st_writer_discard(w);
                return qmm_fail(QMM_ERR_OVERFLOW, "st_writer: tensor '%s' is too large", e->name);
            }
            bytes *= (uint64_t)e->shape[d];
        }
        w->sizes[i] = bytes;
        if (i || format) qmm_buf_put(&b, ",", 1);
        sb_str(&b, e->name);
        qmm_buf_put(&b, ":{\"dtype\":", 10);
        sb_str(&b, st_dtype_name(e->dtype));
        qmm_buf_put(&b, ",\"shape\":[", 10);
        for (int d = 0; d < e->ndim; d++) {
            char num[32];
            int n = snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)e->shape[d]);
            qmm_buf_put(&b, num, (size_t)n);
        }
        sb_fmt(&b, "],\"data_offsets\":[%llu,%llu]}", off, off + bytes);
        off += bytes;
    }
    qmm_buf_put(&b, "}", 1);
    /* pad with spaces so the data starts at a multiple of 8 bytes (8 + header) */
    while ((b.len % 8) && !b.oom) qmm_buf_put(&b, " ", 1);
    if (b.oom) {
        free(b.p);
        st_writer_discard(w);
        return qmm_fail(QMM_ERR_NOMEM, "out of memory for the header");
    }
    w->entries = entries;
    w->count = count;
    w->bytes = 8 + b.len + off;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)b.len >> (8 * i));
    qmm_status st = llm_tmp_create(&w->file, final_path);
    if (!st) st = llm_tmp_write(&w->file, len8, 8);
    if (!st) st = llm_tmp_write(&w->file, b.p, b.len);
    free(b.p);
    if (st) st_writer_discard(w);
    return st;
}

qmm_status st_writer_put(st_writer *w, const void *data, uint64_t n)
{
    if (w->next >= w->count)
        return qmm_fail(QMM_ERR_ARG, "st_writer: more tensors than declared");
    if (n != w->sizes[w->next])
        return qmm_fail(QMM_ERR_SIZE_MISMATCH, "st_writer: tensor '%s' has %llu bytes, want %llu",
                        w->entries[w->next].name, (unsigned long long)n,
                        (unsigned long long)w->sizes[w->next]);
    qmm_status st = llm_tmp_write(&w->file, data, (size_t)n);
    if (st) return st;
    w->next++;
    return QMM_OK;
}

qmm_status st_writer_finish(st_writer *w)
{
    if (w->next != w->count)
        return qmm_fail(QMM_ERR_ARG, "st_writer: %zu of %zu tensors written", w->next, w->count);
    return llm_tmp_sync(&w->file);
}

void st_writer_discard(st_writer *w)
{
    llm_tmp_discard(&w->file);
    free(w->sizes);
    w->sizes = NULL;
}

qmm_status st_write_file(const char *path, const st_entry *entries, const void *const *data,
                         size_t count, const char *format)
{
    st_writer w;
    qmm_status st = st_writer_open(&w, path, entries, count, format);
    if (st) return st;
    for (size_t i = 0; i < count && !st; i++) st = st_writer_put(&w, data[i], w.sizes[i]);
    if (!st) st = st_writer_finish(&w);
    if (!st) st = llm_tmp_publish(&w.file);
    st_writer_discard(&w);
    return st;
}
