/* qmm chunked host<->device pipeline (included by qmm.h; do not include directly). */
#ifndef QMM_PIPELINE_H
#define QMM_PIPELINE_H
#endif /* QMM_PIPELINE_H */
