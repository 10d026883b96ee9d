/* Stacked projection weights of the fused engine (q|k|v, gate|up), built on the host before
 * upload (CPU code, so that the CI tests can check the layouts the GPU matvecs rely on). */
#ifndef QMM_LLM_STACK_W4_H
#define QMM_LLM_STACK_W4_H

#include "qmm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* parts[n] (same K) stacked along N into a new host weight (qmm_w4_free it). chunk > 0: the
 * parts (all with the same N, a multiple of chunk) interleaved in chunks of `chunk` rows
 * (part 0 rows 0..chunk-1, part 1 rows 0..chunk-1, part 0 rows chunk.., ...). */
qmm_status llm_stack_w4(const qmm_w4 *const *parts, int n, qmm_w4 *out);
qmm_status llm_stack_w4_chunked(const qmm_w4 *const *parts, int n, int64_t chunk, qmm_w4 *out);
/* Rows of gate and up interleaved in the fused gate|up weight (0: stacked [gate; up]): one
 * 128-row block of the matvec then holds both halves of 64 SwiGLU outputs. */
int64_t llm_gate_up_chunk(const qmm_llm_config *c);

#ifdef __cplusplus
}
#endif

#endif
