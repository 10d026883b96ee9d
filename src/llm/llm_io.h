/* File helpers of the Qwen3 engine: whole-file reads, read-only mappings, path joins. */
#ifndef QMM_LLM_IO_H
#define QMM_LLM_IO_H

#include <stddef.h>

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read a whole file (at most max_bytes) into a malloc'd, NUL-terminated buffer. */
qmm_status llm_read_file(const char *path, size_t max_bytes, char **text, size_t *len);

/* A private, copy-on-write mapping of a whole file: writes (never intended) stay in memory. */
typedef struct llm_mapping {
    unsigned char *addr; /* NULL for an empty file */
    size_t len;
} llm_mapping;

qmm_status llm_map_file(const char *path, llm_mapping *m);
void llm_unmap(llm_mapping *m);

/* dir + "/" + name into out[size]; QMM_ERR_RANGE when it does not fit. */
qmm_status llm_path_join(const char *dir, const char *name, char *out, size_t size);
/* 1 if path is a directory, 0 otherwise (including when it does not exist). */
int llm_is_dir(const char *path);
/* The directory part of path ("." when there is none) into out[size]. */
qmm_status llm_dirname(const char *path, char *out, size_t size);
/* The directory of a checkpoint given as a directory or as one of its files. */
qmm_status llm_checkpoint_dir(const char *path, char *out, size_t size);

#define LLM_PATH_MAX 4096

/* A file written under a temporary name in the directory of its final path, then fsynced and
 * renamed into place, so a reader never sees it half-written. */
typedef struct llm_tmpfile {
    int fd;                  /* -1 once closed */
    int live;                /* the temporary exists on disk */
    char tmp[LLM_PATH_MAX];
    char final[LLM_PATH_MAX];
} llm_tmpfile;

qmm_status llm_tmp_create(llm_tmpfile *f, const char *final_path);
qmm_status llm_tmp_write(llm_tmpfile *f, const void *p, size_t n);
/* fsync and close (the temporary stays until publish or discard). */
qmm_status llm_tmp_sync(llm_tmpfile *f);
/* rename onto the final path and fsync the directory. */
qmm_status llm_tmp_publish(llm_tmpfile *f);
/* close and remove the temporary (safe to call in any state, also after publish). */
void llm_tmp_discard(llm_tmpfile *f);

/* Create a directory (0755) unless it exists. */
qmm_status llm_mkdir(const char *path);

#ifdef __cplusplus
}
#endif

#endif
