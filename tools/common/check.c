/* Fatal checks of the tools: what failed, where, and what the tool was doing. */
#include <stdarg.h>
#include <stdlib.h>

#include "common/common.h"

static char activity[256] = "starting";

void bench_set_activity(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(activity, sizeof activity, fmt, ap);
    va_end(ap);
}

void bench_die(const char *call, const char *detail, const char *file, int line)
{
    fflush(stdout);
    fprintf(stderr, "qmm: %s:%d: %s failed: %s\n  while: %s\n", file, line, call, detail, activity);
    exit(1);
}

void *bench_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) bench_die("malloc", "out of host memory", __FILE__, __LINE__);
    return p;
}
