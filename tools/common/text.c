/* Text buffers, files, arguments and run metadata for the tools. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"

void bench_tprintf(bench_text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = t->cap - t->len;
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (t->p && (size_t)n < room) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        char *q = realloc(t->p, cap);
        if (!q) bench_die("realloc", "out of memory for a report", __FILE__, __LINE__);
        t->p = q, t->cap = cap;
    }
}

void bench_write_text(const char *tool, const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        fprintf(stderr, "%s: cannot write %s: %s\n", tool, path, strerror(errno));
        exit(1);
    }
}

int bench_parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

void bench_commit(const char *given, char *out, size_t size)
{
    const char *env = getenv("QMM_COMMIT"); /* set where there is no .git (the device copy) */
    const char *c = given && *given ? given : env && *env ? env : NULL;
    if (c) {
        snprintf(out, size, "%s", c);
        return;
    }
    snprintf(out, size, "unknown");
    FILE *g = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (!g) return;
    char line[80];
    if (fgets(line, sizeof line, g) && line[0] != '\n') {
        line[strcspn(line, "\n")] = 0;
        snprintf(out, size, "%s", line);
    }
    pclose(g);
}

void bench_date_utc(char *out, size_t size)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
