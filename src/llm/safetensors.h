/*
 * safetensors reading: a file is u64 little-endian header length N, N bytes of JSON header
 * {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data
 * buffer (offsets are relative to its start). Everything in the header is validated against the
 * file's size before any tensor is handed out; a checkpoint may be one file or shards listed by
 * model.safetensors.index.json ({"weight_map": {tensor: file}}).
 */
#ifndef QMM_LLM_SAFETENSORS_H
#define QMM_LLM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "llm/json.h"
#include "llm/llm_io.h"
#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum st_dtype {
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_U16,
    ST_I16,
    ST_F16,
    ST_BF16,
    ST_U32,
    ST_I32,
    ST_F32,
    ST_U64,
    ST_I64,
    ST_F64,
    ST_F8_E4M3,
    ST_F8_E5M2,
    ST_DTYPE_COUNT
} st_dtype;

const char *st_dtype_name(st_dtype t);
size_t st_dtype_size(st_dtype t);

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER ((uint64_t)100 << 20) /* the format's own limit: 100 MB */

typedef struct st_tensor {
    const char *name;          /* NUL-terminated, owned by the header's JSON document */
    size_t name_len;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t nbytes;           /* product(shape) * dtype size, checked against data_offsets */
    const unsigned char *data; /* inside the file image */
    int file;                  /* which file of a set */
} st_tensor;

typedef struct st_header {
    st_tensor *tensors; /* in header order */
    size_t count;
    json_doc doc;       /* owns the names */
} st_header;

/* Parse and validate a whole file image buf[len]; what names it in messages. */
qmm_status st_parse(const unsigned char *buf, size_t len, const char *what, st_header *out);
void st_header_free(st_header *h);

/* All tensors of a checkpoint (one file or shards), mapped read-only. */
typedef struct st_set {
    int nfiles;
    char **paths;
    llm_mapping *maps;
    st_header *headers;
    const st_tensor **sorted; /* by name, for lookup */
    size_t count;
    int copy;                 /* files are read into memory instead of mapped */
} st_set;

/* path: a .safetensors file, a model.safetensors.index.json, or a directory holding either
 * (the index wins when both exist). */
qmm_status st_open(const char *path, st_set *set);
/* copy = 1: read every file into private memory (immune to the files changing afterwards)
 * instead of mapping it. */
qmm_status st_open_ex(const char *path, int copy, st_set *set);
/* One file image held by the caller (it must outlive the set); what names it in messages. */
qmm_status st_open_image(const unsigned char *buf, size_t len, const char *what, st_set *set);
/* NULL when absent. */
const st_tensor *st_find(const st_set *set, const char *name);
void st_close(st_set *set);

/* "[2, 3]" into out[size] for messages. */
/* Element i of a float tensor (F32, F16 or BF16) as a float; the caller checked dtype and size. */
float st_float_at(const st_tensor *t, int64_t i);
void st_shape_string(int ndim, const int64_t *shape, char *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif
