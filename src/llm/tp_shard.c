/* A rank's shard of a whole model (tp.h): the sliced linears, the vocabulary rows of the
 * embedding and LM head, copies of the norms; all owned by the shard model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "llm/model.h"
#include "llm/tp.h"
#include "llm/tp_slice.h"

/* The slice of w as a weight owned by m. */
static qmm_status slice_into(qmm_llm_model *m, const qmm_w4 *w, tp_cut cut, tp_range r,
                             const char *what, int64_t layer, qmm_w4 *out)
{
    qmm_w4 s;
    qmm_status st = tp_slice_w4(w, cut, r, &s);
    if (st) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", qmm_last_error());
        return qmm_fail(st, "layer %lld %s: %s", (long long)layer, what, detail);
    }
    void *parts[3] = {s.packed, s.scales, s.biases};
    for (int i = 0; i < 3; i++)
        if ((st = llm_model_adopt(m, parts[i]))) {
            for (int j = i; j < 3; j++) free(parts[j]);
            return st;
        }
    m->weight_bytes += s.packed_count * 4 + (s.scales_count + s.biases_count) * 2;
    *out = s;
    return QMM_OK;
}

static qmm_status copy_norm(qmm_llm_model *m, const qmm_bf16 *src, int64_t n, const qmm_bf16 **out)
{
    void *p;
    qmm_status st = llm_model_alloc(m, (size_t)n * 2, &p);
    if (st) return st;
    memcpy(p, src, (size_t)n * 2);
    m->weight_bytes += (size_t)n * 2;
    *out = p;
    return QMM_OK;
}

static qmm_status build(const qmm_llm_model *full, const tp_rank_plan *p, qmm_llm_model *s)
{
    const qmm_llm_config *c = &full->cfg;
    qmm_status st;
    for (int64_t l = 0; l < c->num_layers; l++) {
        for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++)
            if ((st = slice_into(s, &full->layers[l].lin[i], p->cut[i], p->range[i],
                                 tp_kind_name(i), l, &s->layers[l].lin[i])))
                return st;
        for (int i = 0; i < QMM_LLM_NORM_COUNT; i++)
            if ((st = copy_norm(s, full->layers[l].norm[i], llm_norm_len(c, (qmm_llm_norm)i),
                                &s->layers[l].norm[i])))
                return st;
    }
    if ((st = copy_norm(s, full->final_norm, c->hidden_size, &s->final_norm))) return st;
    if ((st = slice_into(s, &full->lm_head, TP_CUT_ROWS, p->range[TP_VOCAB], "lm_head", -1,
                         &s->lm_head)))
        return st;
    /* tied: the head is the embedding (the session uploads it once) */
    if (c->tie_word_embeddings) s->embed = s->lm_head;
    else if ((st = slice_into(s, &full->embed, TP_CUT_ROWS, p->range[TP_VOCAB], "embed_tokens",
                              -1, &s->embed)))
        return st;
    return QMM_OK;
}

qmm_status tp_shard_model(const qmm_llm_model *full, int ranks, int rank, qmm_llm_model **out)
{
    if (!full || !out) return qmm_fail(QMM_ERR_NULL, "tp_shard_model: NULL argument");
    const qmm_llm_config *c = &full->cfg;
    tp_rank_plan p;
    qmm_status st = tp_plan_rank(c, ranks, rank, &p);
    if (st) return st;
    if (c->vocab_size % ranks)
        return qmm_fail(QMM_ERR_UNSUPPORTED, "tensor parallelism: t = %d does not divide "
                        "vocab_size = %lld (the logits are gathered in equal parts)", ranks,
                        (long long)c->vocab_size);
    qmm_llm_config sc = *c;
    sc.num_heads = p.heads;
    sc.num_kv_heads = p.kv_heads;
    sc.intermediate_size = p.intermediate;
    qmm_llm_model *s = NULL;
    if ((st = llm_model_new(&sc, &s))) return st;
    s->synthetic = full->synthetic;
    if ((st = build(full, &p, s))) {
        qmm_llm_model_destroy(s);
        return st;
    }
    *out = s;
    return QMM_OK;
}
