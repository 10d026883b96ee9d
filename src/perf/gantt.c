/* A schedule as text: one row per engine, a tile's digit where the engine works, '.' where it
 * waits. The document animates this; a fixed-width chart is what a terminal and a test can read. */
#include <math.h>

#include "internal.h"

// seg is [3, tiles] engine-major; buf receives 3 rows of cols characters + '\n', then NUL
qmm_status qmm_model_gantt(const qmm_model_segment *seg, int tiles, double dt, int cols,
                           char *buf, size_t size)
{
    if (!seg || !buf) return qmm_fail(QMM_ERR_NULL, "gantt: seg or buf is NULL");
    if (tiles < 1) return qmm_fail(QMM_ERR_ARG, "gantt: tiles = %d, need >= 1", tiles);
    if (!(dt > 0) || !isfinite(dt)) return qmm_fail(QMM_ERR_RANGE, "gantt: dt = %g, need > 0", dt);
    if (cols < 1) return qmm_fail(QMM_ERR_ARG, "gantt: cols = %d, need >= 1", cols);
    size_t need = (size_t)QMM_MODEL_ENGINES * ((size_t)cols + 1) + 1;
    if (size < need)
        return qmm_fail(QMM_ERR_WORKSPACE, "gantt: buffer of %zu bytes, need %zu", size, need);

    char *p = buf;
    for (int e = 0; e < QMM_MODEL_ENGINES; e++) {
        const qmm_model_segment *row = seg + (size_t)e * tiles;
        int i = 0; /* segments of one engine are in time order, so one cursor suffices */
        for (int c = 0; c < cols; c++) {
            double t = (c + 0.5) * dt;
            while (i < tiles && row[i].end <= t) i++;
            *p++ = (i < tiles && row[i].start <= t) ? (char)('0' + i % 10) : '.';
        }
        *p++ = '\n';
    }
    *p = 0;
    qmm_clear_error();
    return QMM_OK;
}
