/* qmm Qwen3 engine (included by qmm.h; do not include directly). */
#ifndef QMM_LLM_H
#define QMM_LLM_H
#endif /* QMM_LLM_H */
