/* The library's version (the CMake project version) and the progress hook. */
#include "internal.h"

#ifndef QMM_VERSION_STRING
#define QMM_VERSION_STRING "unknown"
#endif

const char *qmm_version(void) { return QMM_VERSION_STRING; }

/* The progress hook (qmm_set_progress): process-wide, set by the application before work. */
static qmm_progress_fn g_progress;
static void *g_progress_ctx;

void qmm_set_progress(qmm_progress_fn fn, void *ctx)
{
    g_progress = fn;
    g_progress_ctx = ctx;
}

void qmm_progress(const char *what, double done, double total)
{
    if (g_progress) g_progress(g_progress_ctx, what, done, total);
}
