/* qmm performance model (included by qmm.h; do not include directly). */
#ifndef QMM_MODEL_H
#define QMM_MODEL_H
#endif /* QMM_MODEL_H */
