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

/* A whole file's image: a private, copy-on-write mapping (writes, never intended, stay in
 * memory), a private copy read into memory, or a caller's buffer (borrowed, never freed).
 * A mapping reads the file on use: a file truncated afterwards raises SIGBUS on access. */
typedef enum llm_image_kind { LLM_MAPPED = 0, LLM_COPIED, LLM_BORROWED } llm_image_kind;
typedef struct llm_mapping {
    unsigned char *addr; /* NULL for an empty file */
    size_t len;
    llm_image_kind kind;
} llm_mapping;

qmm_status llm_map_file(const char *path, llm_mapping *m);
/* copy = 0: llm_map_file; 1: read the whole file into (page-aligned) memory. */
qmm_status llm_load_file(const char *path, int copy, llm_mapping *m);
void llm_unmap(llm_mapping *m);

/* dir + "/" + name into out[size]; QMM_ERR_RANGE when it does not fit. */
qmm_status llm_path_join(const char *dir, const char *name, char *out, size_t size);
/* 1 if path exists (stat, which never blocks on a FIFO), 0 otherwise. */
int llm_exists(const char *path);
/* 1 if path is a directory, 0 otherwise (including when it does not exist). */
int llm_is_dir(const char *path);
/* The directory part of path ("." when there is none) into out[size]. */
qmm_status llm_dirname(const char *path, char *out, size_t size);
/* The directory of a checkpoint given as a directory or as one of its files (QMM_ERR_NOT_FOUND
 * when the path does not exist). */
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

/* A directory that appears complete or not at all: a temporary directory beside final_dir
 * (tmp[size] receives its path), filled, then renamed onto final_dir (which must not exist or
 * be empty); discard removes it and the files in it. */
qmm_status llm_tmpdir_create(const char *final_dir, char *tmp, size_t size);
qmm_status llm_tmpdir_publish(const char *tmp, const char *final_dir);
void llm_tmpdir_discard(const char *tmp);

#ifdef __cplusplus
}
#endif

#endif
