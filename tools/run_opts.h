/* Options of `qmm run` and `qmm chat` (one parser, strict values) and the text setup they share:
 * model, tokenizer, generation settings, device. */
#ifndef QMM_TOOLS_RUN_OPTS_H
#define QMM_TOOLS_RUN_OPTS_H

#include <stdio.h>

#include "qmm.h"

typedef struct run_opts {
    const char *model, *tokenizer, *ids_arg, *prompt, *system, *device;
    long long prompt_len, max_new, max_seq, seed, threads, buffers, top_k;
    double temperature, top_p, min_p;
    int have_max_new, have_temperature, have_top_k, have_top_p, have_min_p, have_seed;
    int split_k, graph, fuse, pdl, offload, resident, json, think, chat_template;
    int persistent; /* --decode: 0 fused (default), 1 persistent */
} run_opts;

/* Parse argv[1..argc) for command cmd ("run" or "chat"); returns -1 to go on, else the exit code
 * (--help printed: 0; a bad option: 2 with the reason on stderr). */
int run_parse(const char *cmd, int argc, char **argv, run_opts *o, void (*usage)(FILE *));

/* 1 when --device asks for CUDA (auto: a GPU is present); -1 on a bad value (message printed). */
int run_use_cuda(const char *cmd, const run_opts *o);

typedef struct text_setup {
    qmm_llm_model *model;
    qmm_tokenizer *tok;
    qmm_generation_config gc;
    int use_cuda;
} text_setup;

/* Open the model, its tokenizer (from the model's directory or --tokenizer) and generation
 * settings (generation_config.json, overridden by the sampling flags). Returns -1 on success,
 * else the exit code after printing why. text_close frees what it opened. */
int text_open(const char *cmd, const run_opts *o, text_setup *s);
void text_close(text_setup *s);

int run_ids(const run_opts *o);   /* run_ids.c: token ids in and out (and weight streaming) */
int run_text(const run_opts *o);  /* run_text.c: --prompt TEXT, streamed */

#endif
