/* Writing safetensors: the header is laid out up front from the entries (offsets contiguous, in
 * the given order, data start padded to 8 bytes), then each tensor's bytes follow in order. */
#ifndef QMM_LLM_ST_WRITER_H
#define QMM_LLM_ST_WRITER_H

#include "llm/llm_io.h"
#include "llm/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct st_entry {
    char name[320]; /* room for a 256-byte prefix plus a suffix */
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
} st_entry;

typedef struct st_writer {
    llm_tmpfile file;
    const st_entry *entries;
    size_t count, next;
    uint64_t *sizes;  /* bytes of each entry */
    uint64_t bytes;   /* whole file */
} st_writer;

/* Start final_path (written to a temporary): validates the entries and writes the header.
 * format (may be NULL) goes to __metadata__.format ("mlx" for MLX checkpoints). */
qmm_status st_writer_open(st_writer *w, const char *final_path, const st_entry *entries,
                          size_t count, const char *format);
/* The next tensor's bytes; n must equal its size. */
qmm_status st_writer_put(st_writer *w, const void *data, uint64_t n);
/* After every tensor was put: fsync and close the temporary (publish with llm_tmp_publish). */
qmm_status st_writer_finish(st_writer *w);
/* Drop everything (the temporary is removed unless it was published). */
void st_writer_discard(st_writer *w);

/* Everything in one call for small files: open, put each data[i], finish, publish. */
qmm_status st_write_file(const char *path, const st_entry *entries, const void *const *data,
                         size_t count, const char *format);

#ifdef __cplusplus
}
#endif

#endif
