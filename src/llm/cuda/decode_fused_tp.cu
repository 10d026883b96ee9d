/*
 * The fused decode step of a tensor-parallel session (tp_session.cu): decode_fused.cu's step on
 * a rank's shard, with the two all-reduces a layer between its kernels,
 *   q|k|v matvec (norm folded) → attention → o matvec (fp32 partial) → all-reduce →
 *   add (x += bf16(y), xg, Σx²) → gate|up matvec (norm folded, SwiGLU) → down matvec (fp32
 *   partial) → all-reduce → add,
 * five engine kernels and two NCCL kernels a layer (the unfused TP step: eight and two).
 * What moves compared with one GPU: the residual epilogue of o and down needs the sum over
 * the ranks, so those matvecs write their unrounded fp32 partial (MV_EPI_STORE_F32), NCCL sums
 * them in fp32, and one kernel (launch_add_norm_fold_f32) rounds the sum to bf16 once, adds it
 * to the residual and writes what the residual epilogue writes on one GPU: xg = bf16(x · γ) of
 * the next norm and Σx² per 16-row tile, which the next column-parallel matvec reads through
 * ss_in. So t = 2 has t = 1's fused arithmetic but for the fp32 order of two sums.
 * SwiGLU slicing: a rank's gate|up weight interleaves *its* gate and up rows in chunks of 64
 * (session.cu, llm_gate_up_chunk of the shard's intermediate size I/t). down's cut must be
 * group-aligned (tp_plan_rank) and the weight upload needs K % 128 == 0, so I/t is a multiple of
 * 128 (a split that is not is refused at upload) and the rank's chunks are whole:
 * the same rows as the contiguous rank slice of the whole model's interleaved weight
 * (test_tp_slice.c), and column j of the rank's SwiGLU output is intermediate index
 * r·I/t + j, the column down's K slice holds.
 * PDL beside NCCL (pdl.cuh's contract): the collectives are plain launches, and a plain launch
 * waits for its whole predecessor, so the matvec that wrote y32 has ended before NCCL reads it.
 * The kernel after a collective is a PDL launch: whether the captured edge is programmatic or
 * not (and whether NCCL's kernel triggers early or only by ending), before griddepcontrol.wait
 * it reads only weights and norm weights, and the wait returns only once the NCCL grid has
 * completed with its writes visible. Buffers reused along the step (y32, xg in h, d_ss) are
 * written only after a wait, and each wait completes a grid that itself waited for its
 * predecessor, so every earlier reader of them has ended. The embedding kernel at the start
 * is a plain launch (the attention's pre-wait reads of *pos and older cache rows rely on it).
 */
#include "cuda/kernels.h"
#include "llm/cuda/session.h"

using namespace qmm_llm;

#define Q_TRY(call)                                                                              \
    do {                                                                                         \
        qmm_status st_ = (call);                                                                 \
        if (st_) return st_;                                                                     \
    } while (0)

/* How an engine kernel of this step launches: the session's in-graph profile slot, PDL per the
 * TP options (the session's own pdl flag is the unfused TP forward's, always off). */
static const llm_launch *as(qmm_llm_cuda_session *s, llm_launch *ln, const char *name,
                            double bytes)
{
    llm_launch_as(s, ln, name, bytes);
    ln->pdl = s->tp->pdl;
    return ln;
}

/* x += bf16(the all-reduced y32); xg = bf16(x · gamma) and Σx² per tile for the next matvec. */
static qmm_status add_fold(qmm_llm_cuda_session *s, const qmm_llm::bf16 *gamma, llm_prof *prof)
{
    const int H = (int)s->cfg.hidden_size;
    llm_launch ln;
    QMM_CUDA_TRY(launch_add_norm_fold_f32(s->x, s->tp->y32, gamma, H, 1, s->h, s->d_ss, s->stream,
                                          as(s, &ln, "add+rmsnorm", 16.0 * H)));
    llm_mark(prof, s->stream, "add+rmsnorm");
    return QMM_OK;
}

/* A row-parallel matvec into this rank's fp32 partial, then the fp32 sum over the ranks (name:
 * the in-graph profile's, mark: the eager profile's). */
static qmm_status row_parallel(qmm_llm_cuda_session *s, const qmm_llm::bf16 *a, int64_t lda,
                               const qmm_cuda_weight *w, const char *name, const char *mark,
                               llm_prof *prof)
{
    const int H = (int)s->cfg.hidden_size;
    qmm::MatvecArgs p = {};
    p.a = a;
    p.lda = lda;
    p.epi = qmm::MV_EPI_STORE_F32;
    p.x = s->tp->y32;
    p.ldc = H;
    Q_TRY(llm_fused_matvec(s, p, w, name, s->tp->pdl != 0));
    llm_mark(prof, s->stream, mark);
    Q_TRY(llm_tp_allreduce_f32(s, s->tp->y32, (size_t)H));
    llm_note_unstamped(s, "all-reduce", 4.0 * H); /* a rank's fp32 partial */
    llm_mark(prof, s->stream, "all-reduce");
    return QMM_OK;
}

qmm_status llm_tp_decode_fused(qmm_llm_cuda_session *s, llm_prof *prof)
{
    const qmm_llm_config *c = &s->cfg;
    const auto [H, hd, heads, kvh, L, I, eps, layer_cache, attn_bytes] = llm_dims_of(s);
    const bool pdl = s->tp->pdl != 0;
    cudaStream_t st = s->stream;
    llm_launch ln;

    llm_mark(prof, st, "start");
    Q_TRY(llm_tp_embed(s, 1)); /* a plain kernel and an fp32 all-reduce */
    llm_mark(prof, st, "embedding");
    /* layer 0's input norm whole; later norms are folded */
    QMM_CUDA_TRY(launch_add_rmsnorm(s->x, NULL, s->layers[0].norm[QMM_LLM_INPUT_NORM], H, eps, 0,
                                    1, s->h, st, as(s, &ln, "rmsnorm", 8.0 * H)));
    llm_mark(prof, st, "rmsnorm");

    for (int l = 0; l < L; l++) {
        const llm_cuda_layer *ly = &s->layers[l];
        qmm::MatvecArgs p = llm_fused_normed_input(s, l > 0);
        p.epi = qmm::MV_EPI_STORE;
        p.c = s->q;
        p.ldc = s->q_stride;
        Q_TRY(llm_fused_matvec(s, p, ly->qkv, "q|k|v matvec", pdl));
        llm_mark(prof, st, "q/k/v matmuls");

        QMM_CUDA_TRY(llm_fused_attention(s, l, as(s, &ln, "attention", attn_bytes)));
        llm_mark(prof, st, "attention");

        Q_TRY(row_parallel(s, s->att, (int64_t)heads * hd, ly->lin[QMM_LLM_O], "o matvec", "o matmul",
                           prof));
        Q_TRY(add_fold(s, ly->norm[QMM_LLM_POST_ATTN_NORM], prof));

        p = llm_fused_normed_input(s, true);
        p.epi = qmm::MV_EPI_SWIGLU;
        p.c = s->act;
        p.ldc = I;
        Q_TRY(llm_fused_matvec(s, p, ly->gate_up, "gate|up matvec", pdl));
        llm_mark(prof, st, "gate/up matmuls");

        Q_TRY(row_parallel(s, s->act, I, ly->lin[QMM_LLM_DOWN], "down matvec", "down matmul", prof));
        Q_TRY(add_fold(s, l + 1 < L ? s->layers[l + 1].norm[QMM_LLM_INPUT_NORM] : s->final_norm,
                       prof));
    }
    /* the head: this rank's vocabulary slice from the final norm's xg, then the gather */
    qmm::MatvecArgs p = llm_fused_normed_input(s, true);
    p.epi = qmm::MV_EPI_STORE;
    p.c = (bf16 *)llm_tp_head_out(s);
    p.ldc = s->tp->vocab_count;
    Q_TRY(llm_fused_matvec(s, p, s->head, "lm head matvec", pdl));
    llm_mark(prof, st, "lm head matmul");
    Q_TRY(llm_tp_gather_logits(s));
    llm_note_unstamped(s, "all-gather", 2.0 * (double)c->vocab_size); /* the bf16 logits */
    llm_mark(prof, st, "all-gather");
    QMM_CUDA_TRY(launch_argmax_partial(s->logits, c->vocab_size, s->pair_v, s->pair_i, st,
                                       as(s, &ln, "argmax", 2.0 * (double)c->vocab_size)));
    QMM_CUDA_TRY(launch_argmax_finish(s->pair_v, s->pair_i, s->npairs, s->d_tokens, s->d_pos, 1,
                                      s->d_err, st, as(s, &ln, "argmax", 8.0 * s->npairs)));
    llm_mark(prof, st, "argmax");
    return QMM_OK;
}
