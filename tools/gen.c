/* Text generation over either backend (see gen.h). */
#include "gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

qmm_status gen_open(gen_engine *e, const qmm_llm_model *m, int use_cuda, int64_t max_seq,
                    int threads, const qmm_llm_cuda_options *o)
{
    memset(e, 0, sizeof *e);
    e->vocab = qmm_llm_model_config(m)->vocab_size;
    e->max_seq = max_seq;
    e->logits = malloc((size_t)e->vocab * sizeof *e->logits);
    if (!e->logits) return QMM_ERR_NOMEM;
    qmm_status st = use_cuda ? qmm_llm_cuda_session_create(m, max_seq, o, &e->cuda)
                             : qmm_llm_cpu_session_create(m, max_seq, threads, &e->cpu);
    if (st) gen_close(e);
    return st;
}

void gen_close(gen_engine *e)
{
    qmm_llm_cpu_session_destroy(e->cpu);
    qmm_llm_cuda_session_destroy(e->cuda);
    free(e->logits);
    memset(e, 0, sizeof *e);
}

int64_t gen_position(const gen_engine *e)
{
    return e->cuda ? qmm_llm_cuda_position(e->cuda) : qmm_llm_cpu_position(e->cpu);
}

qmm_status gen_reset(gen_engine *e)
{
    return e->cuda ? qmm_llm_cuda_reset(e->cuda) : qmm_llm_cpu_reset(e->cpu);
}

qmm_status gen_feed(gen_engine *e, const int32_t *ids, int64_t n)
{
    /* one token: the decode step (on CUDA the captured graph) */
    if (e->cuda)
        return n == 1 ? qmm_llm_cuda_decode(e->cuda, ids[0], e->logits, NULL)
                      : qmm_llm_cuda_prefill(e->cuda, ids, n, e->logits, NULL);
    return n == 1 ? qmm_llm_cpu_decode(e->cpu, ids[0], e->logits)
                  : qmm_llm_cpu_prefill(e->cpu, ids, n, e->logits);
}

static int is_eos(const qmm_generation_config *gc, int32_t id)
{
    for (int i = 0; i < gc->eos_count; i++)
        if (gc->eos[i] == id) return 1;
    return 0;
}

qmm_status gen_run(gen_engine *e, const int32_t *prompt, int64_t n, int64_t max_new,
                   qmm_sampler *sp, const qmm_generation_config *gc, const qmm_tokenizer *tok,
                   FILE *out, gen_result *r)
{
    memset(r, 0, sizeof *r);
    r->prompt_tokens = n;
    r->ids = malloc((size_t)(max_new > 0 ? max_new : 1) * sizeof *r->ids);
    qmm_text_stream *ts = NULL;
    qmm_status st = r->ids ? qmm_text_stream_create(tok, &ts) : QMM_ERR_NOMEM;
    double t0 = cli_now_ms();
    if (!st) st = gen_feed(e, prompt, n);
    r->prefill_ms = cli_now_ms() - t0;
    double t1 = 0;
    const char *text;
    size_t len;
    for (int64_t i = 0; !st && i < max_new; i++) {
        if (i > 0 && (st = gen_feed(e, &r->ids[i - 1], 1))) break;
        /* ids past the tokenizer's (a model's padding rows) have no text: never sample them */
        for (int64_t v = qmm_tokenizer_vocab_size(tok); v < e->vocab; v++) e->logits[v] = -INFINITY;
        int32_t id;
        if ((st = qmm_sampler_sample(sp, e->logits, &id))) break;
        r->ids[r->new_tokens++] = id;
        if (i == 0) {
            t1 = cli_now_ms();
            r->first_token_ms = t1 - t0;
        }
        if (is_eos(gc, id)) {
            r->stopped_at_eos = 1;
            r->eos_id = id;
            break;
        }
        if ((st = qmm_text_stream_push(ts, id, &text, &len))) break;
        if (out && len) {
            fwrite(text, 1, len, out);
            fflush(out);
        }
    }
    if (!st && !qmm_text_stream_flush(ts, &text, &len) && out && len) fwrite(text, 1, len, out);
    if (out) fflush(out);
    if (r->new_tokens > 0) r->decode_ms = cli_now_ms() - t1;
    qmm_text_stream_destroy(ts);
    return st;
}

void gen_summary(FILE *f, const gen_result *r)
{
    double gen_s = r->decode_ms * 1e-3;
    fprintf(f, "prompt %lld tokens, first token %.1f ms, prompt %.1f tok/s, generated %lld tokens "
            "at %.1f tok/s (%s)\n", (long long)r->prompt_tokens, r->first_token_ms,
            r->prefill_ms > 0 ? r->prompt_tokens / (r->prefill_ms * 1e-3) : 0.0,
            (long long)r->new_tokens,
            r->new_tokens > 1 && gen_s > 0 ? (r->new_tokens - 1) / gen_s : 0.0,
            r->stopped_at_eos ? "stopped at EOS" : "length limit");
}
