/* Tensor-parallel shards: which rows or columns each rank holds, and copying them out. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "llm/tp_slice.h"

/* More ranks than any head count qmm accepts (config: <= 1024 heads) can never divide it. */
#define TP_MAX_RANKS 1024

const char *tp_kind_name(int kind)
{
    if (kind == TP_VOCAB) return "embed_tokens/lm_head";
    return kind >= 0 && kind < TP_VOCAB ? qmm_llm_linear_name((qmm_llm_linear)kind) : NULL;
}

/* t must divide what, and (when group > 0) the share what/t must be whole quantization groups
 * because a row-parallel weight is cut there. */
static qmm_status divides(const char *what, int64_t v, int t, int64_t group, const char *why)
{
    if (v % t)
        return qmm_fail(QMM_ERR_ARG, "tensor parallelism: t = %d does not divide %s = %lld (%s)",
                        t, what, (long long)v, why);
    if (group > 0 && (v / t) % group)
        return qmm_fail(QMM_ERR_ARG, "tensor parallelism: t = %d gives %s / t = %lld columns a "
                        "rank, not a multiple of the quantization group size %lld (the row-"
                        "parallel cut would fall inside a group)",
                        t, what, (long long)(v / t), (long long)group);
    return QMM_OK;
}

qmm_status tp_plan_rank(const qmm_llm_config *c, int ranks, int rank, tp_rank_plan *out)
{
    if (!c || !out) return qmm_fail(QMM_ERR_NULL, "tp_plan_rank: NULL argument");
    if (ranks < 1 || ranks > TP_MAX_RANKS)
        return qmm_fail(QMM_ERR_ARG, "tensor parallelism: t = %d ranks; want 1 to %d", ranks,
                        TP_MAX_RANKS);
    if (rank < 0 || rank >= ranks)
        return qmm_fail(QMM_ERR_ARG, "tensor parallelism: rank %d is outside [0, %d)", rank,
                        ranks);
    qmm_status st = qmm_llm_config_validate(c);
    if (st) return st;
    int64_t g = c->group_size ? c->group_size : QMM_GROUP;
    int64_t q_width = c->num_heads * c->head_dim;
    if ((st = divides("num_attention_heads", c->num_heads, ranks, 0, "each rank takes whole "
                      "query heads")) ||
        (st = divides("num_key_value_heads", c->num_kv_heads, ranks, 0, "KV heads are split, "
                      "not replicated")) ||
        (st = divides("num_attention_heads * head_dim", q_width, ranks, g, "o_proj's K")) ||
        (st = divides("intermediate_size", c->intermediate_size, ranks, g, "down_proj's K")))
        return st;
    if (c->vocab_size < ranks)
        return qmm_fail(QMM_ERR_ARG, "tensor parallelism: t = %d is more than vocab_size = %lld "
                        "(every rank needs a vocabulary row)", ranks, (long long)c->vocab_size);

    tp_rank_plan p;
    memset(&p, 0, sizeof p);
    p.rank = rank, p.ranks = ranks;
    p.heads = c->num_heads / ranks;
    p.kv_heads = c->num_kv_heads / ranks;
    p.intermediate = c->intermediate_size / ranks;
    tp_range q = {rank * p.heads * c->head_dim, p.heads * c->head_dim};
    tp_range kv = {rank * p.kv_heads * c->head_dim, p.kv_heads * c->head_dim};
    tp_range mlp = {rank * p.intermediate, p.intermediate};
    /* the vocabulary need not divide: the first V % t ranks take one row more */
    int64_t base = c->vocab_size / ranks, extra = c->vocab_size % ranks;
    tp_range vocab = {rank * base + (rank < extra ? rank : extra), base + (rank < extra)};
    const struct {
        tp_cut cut;
        tp_range r;
    } k[TP_KIND_COUNT] = {
        [QMM_LLM_Q] = {TP_CUT_ROWS, q},      [QMM_LLM_K] = {TP_CUT_ROWS, kv},
        [QMM_LLM_V] = {TP_CUT_ROWS, kv},     [QMM_LLM_O] = {TP_CUT_COLS, q},
        [QMM_LLM_GATE] = {TP_CUT_ROWS, mlp}, [QMM_LLM_UP] = {TP_CUT_ROWS, mlp},
        [QMM_LLM_DOWN] = {TP_CUT_COLS, mlp}, [TP_VOCAB] = {TP_CUT_ROWS, vocab},
    };
    for (int i = 0; i < TP_KIND_COUNT; i++) p.cut[i] = k[i].cut, p.range[i] = k[i].r;
    *out = p;
    return QMM_OK;
}

qmm_status tp_check_cuda_blocks(const qmm_llm_config *c, int ranks)
{
    tp_rank_plan p;
    qmm_status st = tp_plan_rank(c, ranks, 0, &p);
    if (st) return st;
    /* every rank's K (the ranks' shares are equal): the column-parallel linears read hidden_size,
     * o and down their share of the row-parallel cut */
    const struct {
        const char *what;
        int64_t k;
    } ks[] = {{"hidden_size", c->hidden_size},
              {"num_attention_heads * head_dim / t (o_proj's K)", p.heads * c->head_dim},
              {"intermediate_size / t (down_proj's K)", p.intermediate}};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (ks[i].k % 128)
            return qmm_fail(QMM_ERR_SHAPE, "tensor parallelism on CUDA: t = %d gives %s = %lld, "
                            "not a multiple of 128 (the CUDA kernels read K in blocks of 128 "
                            "columns, whatever the group size)",
                            ranks, ks[i].what, (long long)ks[i].k);
    return QMM_OK;
}

qmm_status tp_slice_w4(const qmm_w4 *w, tp_cut cut, tp_range r, qmm_w4 *out)
{
    if (!w || !out) return qmm_fail(QMM_ERR_NULL, "tp_slice_w4: NULL argument");
    qmm_status st = qmm_w4_validate(w);
    if (st) return st;
    if (cut != TP_CUT_ROWS && cut != TP_CUT_COLS)
        return qmm_fail(QMM_ERR_ARG, "tp_slice_w4: cut %d is neither rows nor columns", (int)cut);
    const char *dim = cut == TP_CUT_ROWS ? "rows" : "columns";
    int64_t extent = cut == TP_CUT_ROWS ? w->n : w->k;
    if (r.count < 1 || r.lo < 0 || r.lo > extent - r.count)
        return qmm_fail(QMM_ERR_ARG, "tp_slice_w4: %s [%lld, %lld + %lld) are not a non-empty "
                        "range inside the weight's %lld %s", dim, (long long)r.lo,
                        (long long)r.lo, (long long)r.count, (long long)extent, dim);
    const int64_t g = w->group;
    if (cut == TP_CUT_COLS) {
        int64_t bad = r.lo % g ? r.lo : (r.lo + r.count) % g ? r.lo + r.count : -1;
        if (bad >= 0)
            return qmm_fail(QMM_ERR_ARG, "row-parallel slice of a [%lld, %lld] weight: the "
                            "boundary at column %lld falls inside a quantization group of %lld "
                            "columns (cuts must be multiples of %lld)", (long long)w->n,
                            (long long)w->k, (long long)bad, (long long)g, (long long)g);
    }
    int64_t n = cut == TP_CUT_ROWS ? r.count : w->n, k = cut == TP_CUT_ROWS ? w->k : r.count;
    qmm_w4 s;
    if ((st = qmm_w4_alloc_group(n, k, (int)g, &s))) return st;
    /* per source row: words and groups of the whole row, then of the shard's row */
    const int64_t wk = w->k / 8, gk = w->k / g, sk = k / 8, sg = k / g;
    if (cut == TP_CUT_ROWS) {
        memcpy(s.packed, w->packed + r.lo * wk, (size_t)(n * wk) * sizeof *s.packed);
        memcpy(s.scales, w->scales + r.lo * gk, (size_t)(n * gk) * sizeof *s.scales);
        memcpy(s.biases, w->biases + r.lo * gk, (size_t)(n * gk) * sizeof *s.biases);
    } else {
        const int64_t w0 = r.lo / 8, g0 = r.lo / g; /* lo is a group boundary, so a word one */
        for (int64_t row = 0; row < n; row++) {
            memcpy(s.packed + row * sk, w->packed + row * wk + w0, (size_t)sk * sizeof *s.packed);
            memcpy(s.scales + row * sg, w->scales + row * gk + g0, (size_t)sg * sizeof *s.scales);
            memcpy(s.biases + row * sg, w->biases + row * gk + g0, (size_t)sg * sizeof *s.biases);
        }
    }
    *out = s;
    return QMM_OK;
}
