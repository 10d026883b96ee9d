/* Internal helpers shared by the library's files (not part of the public API). */
#ifndef QMM_INTERNAL_H
#define QMM_INTERNAL_H

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record a failure's detail for qmm_last_error() and return s, so callers can write
 *   if (k % 128) return qmm_fail(QMM_ERR_SHAPE, "K = %lld is not a multiple of 128", k); */
qmm_status qmm_fail(qmm_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Clear the detail (called at the start of public entry points that succeed). */
void qmm_clear_error(void);

/* Report progress to the hook of qmm_set_progress (nothing when none is set). */
void qmm_progress(const char *what, double done, double total);

/* a*b into *out; 0 on overflow. */
static inline int qmm_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > (size_t)-1 / a) return 0;
    *out = a * b;
    return 1;
}

#ifdef __cplusplus
}
#endif

#endif
