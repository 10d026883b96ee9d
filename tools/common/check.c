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

int bench_have_gpu(const char *tool, int device)
{
    int count = 0;
    char why[256] = "";
    if (qmm_cuda_device_count(&count, why, sizeof why) == QMM_OK && device >= 0 && device < count)
        return 1;
    fprintf(stderr, "%s: no usable CUDA device %d (%d found): %s\n", tool, device, count,
            why[0] ? why : qmm_last_error());
    return 0;
}
