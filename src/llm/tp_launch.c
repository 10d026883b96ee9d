/* The tensor-parallel launcher: one process per rank, its environment, and the end of the run
 * when one rank dies (tp.h). POSIX only; no CUDA here, so CI tests every error path. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "internal.h"
#include "llm/tp.h"

#define TP_RANKS_MAX 64

static int parse_int(const char *s, long lo, long hi, int *out)
{
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

qmm_status tp_env_read(tp_env *e, int *is_rank)
{
    if (!e || !is_rank) return qmm_fail(QMM_ERR_NULL, "tp_env_read: NULL argument");
    *is_rank = 0;
    const char *r = getenv("QMM_TP_RANK"), *t = getenv("QMM_TP_RANKS"), *id = getenv("QMM_TP_ID");
    if (!r) return QMM_OK;
    tp_env v;
    memset(&v, 0, sizeof v);
    if (!parse_int(t, 1, TP_RANKS_MAX, &v.ranks))
        return qmm_fail(QMM_ERR_ARG, "QMM_TP_RANKS = '%s': want 1 to %d", t ? t : "(unset)",
                        TP_RANKS_MAX);
    if (!parse_int(r, 0, v.ranks - 1, &v.rank))
        return qmm_fail(QMM_ERR_ARG, "QMM_TP_RANK = '%s': want 0 to %d", r, v.ranks - 1);
    if (!id || !*id || strlen(id) >= sizeof v.id_path)
        return qmm_fail(QMM_ERR_ARG, "QMM_TP_ID: want the path of the ncclUniqueId file (shorter "
                        "than %zu bytes)", sizeof v.id_path);
    strcpy(v.id_path, id);
    *e = v;
    *is_rank = 1;
    return QMM_OK;
}

qmm_status tp_parse_list(const char *s, int *out, int max, int *n)
{
    if (!s || !out || !n) return qmm_fail(QMM_ERR_NULL, "tp_parse_list: NULL argument");
    int k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > TP_RANKS_MAX || (*end && *end != ','))
            return qmm_fail(QMM_ERR_ARG, "--tp '%s': want a comma-separated list of rank counts "
                            "in [1, %d]", s, TP_RANKS_MAX);
        for (int i = 0; i < k; i++)
            if (out[i] == v) return qmm_fail(QMM_ERR_ARG, "--tp '%s': %ld twice", s, v);
        if (k == max) return qmm_fail(QMM_ERR_ARG, "--tp '%s': more than %d entries", s, max);
        out[k++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end && !*p) return qmm_fail(QMM_ERR_ARG, "--tp '%s': trailing comma", s);
    }
    if (!k) return qmm_fail(QMM_ERR_ARG, "--tp: empty list");
    *n = k;
    return QMM_OK;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The environment of a rank: the launcher's, without any QMM_TP_* of its own, plus the rank's
 * variables (and NCCL_NVLS_ENABLE=0 unless set). Built before fork: between fork and exec the
 * child of a threaded process (the CUDA runtime starts threads) may only make async-signal-safe
 * calls, and malloc is not one. NULL when out of memory; free with free_env. */
extern char **environ;
static char **rank_env(int rank, int ranks, const char *idp)
{
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 5, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    int nvls = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(environ[i], "QMM_TP_RANK=", 12) || !strncmp(environ[i], "QMM_TP_RANKS=", 13) ||
            !strncmp(environ[i], "QMM_TP_ID=", 10))
            continue;
        nvls |= !strncmp(environ[i], "NCCL_NVLS_ENABLE=", 17);
        if (!(env[k++] = strdup(environ[i]))) goto fail;
    }
    char buf[600];
    snprintf(buf, sizeof buf, "QMM_TP_RANK=%d", rank);
    if (!(env[k++] = strdup(buf))) goto fail;
    snprintf(buf, sizeof buf, "QMM_TP_RANKS=%d", ranks);
    if (!(env[k++] = strdup(buf))) goto fail;
    snprintf(buf, sizeof buf, "QMM_TP_ID=%s", idp);
    if (!(env[k++] = strdup(buf))) goto fail;
    if (!nvls && !(env[k++] = strdup("NCCL_NVLS_ENABLE=0"))) goto fail;
    return env;
fail:
    for (size_t i = 0; i < k; i++) free(env[i]);
    free(env);
    return NULL;
}

static void free_env(char **env)
{
    for (size_t i = 0; env && env[i]; i++) free(env[i]);
    free(env);
}

/* The child between fork and exec: async-signal-safe calls only. */
static void child(const char *exe, char *const argv[], char *const env[], int quiet, pid_t parent,
                  const char *why, size_t why_len)
{
    /* die with the launcher (it may have died between fork and here); a process group of its
     * own, so ending a rank ends what it started too */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setpgid(0, 0);
    if (getppid() != parent) _exit(127);
    if (quiet) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, STDOUT_FILENO), close(fd);
    }
    execve(exe, argv, env);
    ssize_t w = write(STDERR_FILENO, why, why_len);
    (void)w;
    _exit(127);
}

/* The launcher's temp directory and what the ranks left in it (the id, files beside it). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        char path[PATH_MAX];
        for (struct dirent *e; (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

static void describe(int rank, int status, char *msg, size_t size, int *code)
{
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(msg, size, "rank %d died: killed by signal %d (%s)", rank, sig, strsignal(sig));
        *code = 128 + sig;
    } else {
        snprintf(msg, size, "rank %d died: exit status %d", rank, WEXITSTATUS(status));
        *code = WEXITSTATUS(status);
    }
}

qmm_status tp_launch(int ranks, const char *exe, char *const argv[], int quiet_others,
                     int timeout_s, int *first_code)
{
    if (!exe || !argv || !argv[0]) return qmm_fail(QMM_ERR_NULL, "tp_launch: NULL argument");
    if (ranks < 1 || ranks > TP_RANKS_MAX)
        return qmm_fail(QMM_ERR_ARG, "tp_launch: %d ranks; want 1 to %d", ranks, TP_RANKS_MAX);
    if (timeout_s < 0) return qmm_fail(QMM_ERR_ARG, "tp_launch: timeout %d s", timeout_s);
    char dir[] = "/tmp/qmm-tp-XXXXXX";
    if (!mkdtemp(dir))
        return qmm_fail(QMM_ERR_IO, "tensor parallelism: cannot make a temp directory for the "
                        "NCCL id: %s", strerror(errno));
    char idp[64];
    snprintf(idp, sizeof idp, "%s/nccl-id", dir);
    pid_t pids[TP_RANKS_MAX];
    int alive[TP_RANKS_MAX] = {0}, left = 0;
    pid_t self = getpid();
    fflush(stdout), fflush(stderr); /* nothing buffered is written twice */
    qmm_status st = QMM_OK;
    char msg[256] = "";
    int code = 0;
    for (int r = 0; r < ranks; r++) {
        char **env = rank_env(r, ranks, idp), why[256];
        int wn = snprintf(why, sizeof why, "tensor parallelism: rank %d: cannot run %s\n", r, exe);
        pid_t p = env ? fork() : -1;
        if (p == 0)
            child(exe, argv, env, quiet_others && r > 0, self, why,
                  wn > 0 && (size_t)wn < sizeof why ? (size_t)wn : strlen(why));
        int err = errno, oom = !env;
        free_env(env);
        if (p < 0) {
            st = qmm_fail(QMM_ERR_COMM, "tensor parallelism: cannot start rank %d: %s", r,
                          oom ? "out of memory" : strerror(err));
            code = 127;
            break;
        }
        setpgid(p, p); /* as the child does: no window where a kill of the group misses it */
        pids[r] = p, alive[r] = 1, left++;
    }
    const double t0 = now_s();
    int failed = st != QMM_OK;
    for (int r = 0; r < ranks && failed; r++)
        if (alive[r]) kill(-pids[r], SIGKILL);
    while (left > 0) {
        int status = 0;
        pid_t p = waitpid(-1, &status, failed ? 0 : WNOHANG);
        if (p < 0 && errno == EINTR) continue;
        if (p < 0) break; /* no children left: nothing more to reap */
        if (p == 0) {     /* all running: check the clock */
            if (timeout_s > 0 && now_s() - t0 > timeout_s) {
                snprintf(msg, sizeof msg, "tensor parallelism: %d rank(s) still running after "
                         "the %d s limit", left, timeout_s);
                code = 124;
                failed = 1;
                for (int r = 0; r < ranks; r++)
                    if (alive[r]) kill(-pids[r], SIGKILL);
            } else {
                usleep(20000);
            }
            continue;
        }
        int r = 0;
        while (r < ranks && !(alive[r] && pids[r] == p)) r++;
        if (r == ranks) continue; /* not ours */
        alive[r] = 0, left--;
        int bad = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        if (bad && !failed) {
            describe(r, status, msg, sizeof msg, &code);
            failed = 1;
            /* the others would wait in a collective for a peer that is gone */
            for (int o = 0; o < ranks; o++)
                if (alive[o]) kill(-pids[o], SIGKILL);
        }
    }
    remove_dir(dir);
    if (first_code) *first_code = code;
    if (failed && !st) st = qmm_fail(QMM_ERR_COMM, "%s", msg);
    return st;
}
