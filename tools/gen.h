/* Text generation for `qmm run --prompt` and `qmm chat`: one engine over the CPU or CUDA session,
 * and a streaming loop (sample, print whole characters, stop at EOS). */
#ifndef QMM_TOOLS_GEN_H
#define QMM_TOOLS_GEN_H

#include <stdio.h>

#include "qmm.h"

typedef struct gen_engine {
    qmm_llm_cpu_session *cpu;
    qmm_llm_cuda_session *cuda;
    float *logits;  /* [vocab]: the logits after the last token fed */
    int64_t vocab;
    int64_t max_seq;
} gen_engine;

/* A session of max_seq positions on the CPU (threads) or CUDA (o). */
qmm_status gen_open(gen_engine *e, const qmm_llm_model *m, int use_cuda, int64_t max_seq,
                    int threads, const qmm_llm_cuda_options *o);
void gen_close(gen_engine *e);
int64_t gen_position(const gen_engine *e);
qmm_status gen_reset(gen_engine *e);
/* Run ids[n] at the next positions; e->logits gets the last one's logits. */
qmm_status gen_feed(gen_engine *e, const int32_t *ids, int64_t n);

typedef struct gen_result {
    int64_t prompt_tokens;
    int64_t new_tokens;   /* EOS included when it stopped there */
    int stopped_at_eos;
    int32_t eos_id;       /* the EOS token that stopped it (not fed to the model) */
    double first_token_ms; /* prompt fed + first token sampled */
    double prefill_ms;    /* the prompt's forward alone */
    double decode_ms;     /* the remaining tokens: forward + sampling + printing */
    int32_t *ids;         /* the new tokens (malloc'd, new_tokens of them) */
} gen_result;

/* Feed prompt[n], then sample up to max_new tokens, each fed back except the last; stream their
 * text to out (NULL: silent) as they come; stop after an EOS id of gc (not printed). */
qmm_status gen_run(gen_engine *e, const int32_t *prompt, int64_t n, int64_t max_new,
                   qmm_sampler *sp, const qmm_generation_config *gc, const qmm_tokenizer *tok,
                   FILE *out, gen_result *r);

/* "prompt 12 tokens, first token 35.2 ms, prompt 341.0 tok/s, generated 16 tokens at 52.3
 * tok/s (stopped at EOS)" on f. */
void gen_summary(FILE *f, const gen_result *r);

#endif
