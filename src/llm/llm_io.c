/* File helpers: whole-file reads, mappings, paths (POSIX). */
#include "llm/llm_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Open a regular file for reading: *fd and *sb on success, a status naming the file otherwise.
 * O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; fstat then refuses it. */
static qmm_status open_regular(const char *path, int *fd, struct stat *sb)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (*fd < 0)
        return qmm_fail(errno == ENOENT ? QMM_ERR_NOT_FOUND : QMM_ERR_IO, "cannot open %s: %s",
                        path, strerror(errno));
    if (fstat(*fd, sb) || !S_ISREG(sb->st_mode)) {
        close(*fd);
        return qmm_fail(QMM_ERR_IO, "%s is not a regular file", path);
    }
    int fl = fcntl(*fd, F_GETFL);
    if (fl >= 0) fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK);
    return QMM_OK;
}

/* n bytes of fd into buf (from the current offset); what names the file in messages. */
static qmm_status read_exact(int fd, void *buf, size_t n, const char *what)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
        ssize_t r = read(fd, (char *)buf + got, want);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return qmm_fail(QMM_ERR_IO, "cannot read %s: %s", what,
                            r ? strerror(errno) : "short read (the file shrank?)");
        got += (size_t)r;
    }
    return QMM_OK;
}

qmm_status llm_read_file(const char *path, size_t max_bytes, char **text, size_t *len)
{
    if (!path || !text || !len) return qmm_fail(QMM_ERR_NULL, "llm_read_file: NULL argument");
    int fd;
    struct stat sb;
    qmm_status st = open_regular(path, &fd, &sb);
    if (st != QMM_OK) return st;
    if ((uint64_t)sb.st_size > max_bytes) {
        close(fd);
        return qmm_fail(QMM_ERR_RANGE, "%s is %lld bytes, more than the %zu allowed", path,
                        (long long)sb.st_size, max_bytes);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return qmm_fail(QMM_ERR_NOMEM, "out of memory reading %s", path);
    }
    st = read_exact(fd, buf, n, path);
    close(fd);
    if (st) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return QMM_OK;
}

qmm_status llm_map_file(const char *path, llm_mapping *m)
{
    return llm_load_file(path, 0, m);
}

qmm_status llm_load_file(const char *path, int copy, llm_mapping *m)
{
    if (!path || !m) return qmm_fail(QMM_ERR_NULL, "llm_load_file: NULL argument");
    m->addr = NULL;
    m->len = 0;
    m->kind = LLM_MAPPED;
    int fd;
    struct stat sb;
    qmm_status st = open_regular(path, &fd, &sb);
    if (st != QMM_OK) return st;
    if (sb.st_size == 0) {
        close(fd);
        return QMM_OK;
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX / 2) {
        close(fd);
        return qmm_fail(QMM_ERR_RANGE, "%s is too large to map", path);
    }
    if (copy) {
        /* page-aligned like a mapping, so tensors keep the alignment the file gives them */
        void *buf = NULL;
        if (posix_memalign(&buf, 4096, (size_t)sb.st_size)) {
            close(fd);
            return qmm_fail(QMM_ERR_NOMEM, "out of memory copying %s (%lld bytes)", path,
                            (long long)sb.st_size);
        }
        st = read_exact(fd, buf, (size_t)sb.st_size, path);
        close(fd);
        if (st) {
            free(buf);
            return st;
        }
        m->addr = buf;
        m->len = (size_t)sb.st_size;
        m->kind = LLM_COPIED;
        return QMM_OK;
    }
    void *a = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (a == MAP_FAILED) return qmm_fail(QMM_ERR_IO, "cannot map %s: %s", path, strerror(e));
    m->addr = a;
    m->len = (size_t)sb.st_size;
    return QMM_OK;
}

void llm_unmap(llm_mapping *m)
{
    if (m && m->addr && m->kind == LLM_MAPPED) munmap(m->addr, m->len);
    if (m && m->kind == LLM_COPIED) free(m->addr);
    if (m) {
        m->addr = NULL;
        m->len = 0;
    }
}

qmm_status llm_path_join(const char *dir, const char *name, char *out, size_t size)
{
    size_t dl = strlen(dir);
    int n = snprintf(out, size, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", name);
    if (n < 0 || (size_t)n >= size)
        return qmm_fail(QMM_ERR_RANGE, "path %s/%s is too long", dir, name);
    return QMM_OK;
}

int llm_exists(const char *path)
{
    struct stat sb;
    return path && !stat(path, &sb);
}

int llm_is_dir(const char *path)
{
    struct stat sb;
    return path && !stat(path, &sb) && S_ISDIR(sb.st_mode);
}

qmm_status llm_dirname(const char *path, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        if (size < 2) return qmm_fail(QMM_ERR_RANGE, "no room for a directory name");
        memcpy(out, ".", 2);
        return QMM_OK;
    }
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= size) return qmm_fail(QMM_ERR_RANGE, "path %s is too long", path);
    memcpy(out, path, n);
    out[n] = 0;
    return QMM_OK;
}

qmm_status llm_checkpoint_dir(const char *path, char *out, size_t size)
{
    if (!llm_is_dir(path) && !llm_exists(path))
        return qmm_fail(QMM_ERR_NOT_FOUND, "%s: no such file or directory", path);
    if (!llm_is_dir(path)) return llm_dirname(path, out, size);
    if (strlen(path) >= size) return qmm_fail(QMM_ERR_RANGE, "path too long");
    strcpy(out, path);
    return QMM_OK;
}

qmm_status llm_tmp_create(llm_tmpfile *f, const char *final_path)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    char dir[LLM_PATH_MAX];
    qmm_status st = llm_dirname(final_path, dir, sizeof dir);
    if (st) return st;
    const char *base = strrchr(final_path, '/');
    base = base ? base + 1 : final_path;
    int n = snprintf(f->tmp, sizeof f->tmp, "%s/.%s.tmp.XXXXXX", dir, base);
    if (n < 0 || (size_t)n >= sizeof f->tmp || strlen(final_path) >= sizeof f->final)
        return qmm_fail(QMM_ERR_RANGE, "path %s is too long", final_path);
    strcpy(f->final, final_path);
    f->fd = mkostemp(f->tmp, O_CLOEXEC);
    if (f->fd < 0)
        return qmm_fail(QMM_ERR_IO, "cannot create a temporary file in %s: %s", dir, strerror(errno));
    f->live = 1;
    /* mkstemp makes 0600; a checkpoint is an ordinary readable file */
    if (fchmod(f->fd, 0644))
        return qmm_fail(QMM_ERR_IO, "cannot set the mode of %s: %s", f->tmp, strerror(errno));
    return QMM_OK;
}

qmm_status llm_tmp_write(llm_tmpfile *f, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(f->fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return qmm_fail(QMM_ERR_IO, "cannot write %s: %s", f->tmp, strerror(errno));
        c += w;
        n -= (size_t)w;
    }
    return QMM_OK;
}

qmm_status llm_tmp_sync(llm_tmpfile *f)
{
    if (f->fd < 0) return QMM_OK;
    int bad = fsync(f->fd);
    int e = errno;
    bad |= close(f->fd);
    f->fd = -1;
    if (bad) return qmm_fail(QMM_ERR_IO, "cannot flush %s: %s", f->tmp, strerror(e));
    return QMM_OK;
}

qmm_status llm_tmp_publish(llm_tmpfile *f)
{
    qmm_status st = llm_tmp_sync(f);
    if (st) return st;
    if (rename(f->tmp, f->final))
        return qmm_fail(QMM_ERR_IO, "cannot rename %s to %s: %s", f->tmp, f->final, strerror(errno));
    f->live = 0;
    char dir[LLM_PATH_MAX];
    if (!llm_dirname(f->final, dir, sizeof dir)) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd); /* best effort: makes the rename itself durable */
            close(dfd);
        }
    }
    return QMM_OK;
}

void llm_tmp_discard(llm_tmpfile *f)
{
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    if (f->live) unlink(f->tmp);
    f->live = 0;
}

qmm_status llm_tmpdir_create(const char *final_dir, char *tmp, size_t size)
{
    char parent[LLM_PATH_MAX];
    qmm_status st = llm_dirname(final_dir, parent, sizeof parent);
    if (st) return st;
    const char *base = strrchr(final_dir, '/');
    base = base ? base + 1 : final_dir;
    int n = snprintf(tmp, size, "%s/.%s.tmp.XXXXXX", parent, base);
    if (n < 0 || (size_t)n >= size) return qmm_fail(QMM_ERR_RANGE, "path %s is too long", final_dir);
    if (!mkdtemp(tmp))
        return qmm_fail(QMM_ERR_IO, "cannot create a temporary directory in %s: %s", parent,
                        strerror(errno));
    if (chmod(tmp, 0755)) { /* mkdtemp makes 0700; the output is an ordinary directory */
        int e = errno;
        rmdir(tmp);
        return qmm_fail(QMM_ERR_IO, "cannot set the mode of %s: %s", tmp, strerror(e));
    }
    return QMM_OK;
}

qmm_status llm_tmpdir_publish(const char *tmp, const char *final_dir)
{
    if (rename(tmp, final_dir))
        return qmm_fail(QMM_ERR_IO, "cannot rename %s to %s: %s", tmp, final_dir, strerror(errno));
    char parent[LLM_PATH_MAX];
    if (!llm_dirname(final_dir, parent, sizeof parent)) {
        int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd); /* best effort: makes the rename itself durable */
            close(dfd);
        }
    }
    return QMM_OK;
}

void llm_tmpdir_discard(const char *tmp)
{
    DIR *d = opendir(tmp);
    if (d) {
        struct dirent *e;
        char path[LLM_PATH_MAX];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                !llm_path_join(tmp, e->d_name, path, sizeof path))
                unlink(path); /* only files are ever written there */
        closedir(d);
    }
    rmdir(tmp);
}
