/* Status names and messages (from the one X-macro list in qmm.h), and the per-thread detail. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[512];

const char *qmm_status_name(qmm_status s)
{
    switch (s) {
#define QMM_X_NAME(e, name, msg) \
    case e: return name;
        QMM_STATUS_LIST(QMM_X_NAME)
#undef QMM_X_NAME
    default: return "unknown-status";
    }
}

const char *qmm_status_string(qmm_status s)
{
    switch (s) {
#define QMM_X_MSG(e, name, msg) \
    case e: return msg;
        QMM_STATUS_LIST(QMM_X_MSG)
#undef QMM_X_MSG
    default: return "unknown status code";
    }
}

const char *qmm_last_error(void) { return last_error; }

void qmm_clear_error(void) { last_error[0] = 0; }

qmm_status qmm_fail(qmm_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

double qmm_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void qmm_buf_put(qmm_buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}
