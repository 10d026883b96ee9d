/*
 * The fused decode step: one token through the Qwen3 decoder in five kernels a layer,
 *   q|k|v matvec → attention (qk-norm, RoPE, cache append, split-KV) → o matvec (+ residual)
 *   → gate|up matvec (+ SwiGLU) → down matvec (+ residual),
 * every matvec the library's decode kernel (src/cuda/matvec.cu) with an epilogue:
 *   - RMSNorm is split between producer and consumer: the matvec that adds into the residual x
 *     also writes xg = bf16(x · γ) (γ: the next norm's weight) and Σx² of each 16-row tile;
 *     the matvec that reads xg scales its result by 1/sqrt(mean(x²) + eps) from those sums;
 *   - SwiGLU: gate and up rows are interleaved in chunks of 64 (session.cu), so each row block
 *     of the gate|up matvec holds both halves of 64 outputs.
 * With weight streaming the matvecs read the slot the layer is uploaded into (offload.cu), as in
 * the unfused forward.
 * The same arithmetic as the unfused forward up to rounding: the norm's scale is applied after
 * the matmul instead of before the bf16 rounding of the normed row (tests: gpu_llm, the op
 * table's fused rows).
 */
#if defined(QMM_EXP_MV_SHAPE) || defined(QMM_EXP_MV_PRE) /* the experiments below */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#endif
#include "cuda/kernels.h"
#include "llm/cuda/session.h"

using namespace qmm_llm;

bool llm_decode_fusable(const qmm_llm_cuda_session *s)
{
    const qmm_llm_config *c = &s->cfg;
    /* tensor-parallel (decode_fused_tp.cu): the fp32 partials' buffer, and a residual row and
     * norm weights (8-byte aligned in norm_buf) the folding add kernel takes
     * (launch_add_norm_fold_f32) */
    const bool tp_ok = !s->tp || (s->tp->y32 && !s->off && c->hidden_size <= 32768 &&
                                  c->head_dim % 4 == 0);
    return tp_ok && s->fuse && !s->attention_ref && s->gu_chunk == 64 &&
           c->hidden_size % 128 == 0 && (c->num_heads * c->head_dim) % 8 == 0;
}

qmm::MatvecArgs llm_fused_normed_input(const qmm_llm_cuda_session *s, bool fold)
{
    const int H = (int)s->cfg.hidden_size;
    qmm::MatvecArgs p = {};
    p.a = s->h;
    p.lda = H;
    if (fold) {
        p.ss_in = s->d_ss;
        p.ss_blocks = H / 16;
        p.norm_dim = H;
        p.eps = (float)s->cfg.rms_norm_eps;
    }
    return p;
}

cudaError_t llm_fused_attention(qmm_llm_cuda_session *s, int64_t l, const qmm_llm::llm_launch *ln)
{
    const auto [H, hd, heads, kvh, L, I, eps, layer_cache, attn_bytes] = llm_dims_of(s);
    const llm_cuda_layer *ly = &s->layers[l];
    /* the cluster kernel where the session takes it (session.cu), at 4 splits and more and at
     * least one half a query head (its one-split path); the fused kernel for the rest, which
     * gives the same bits where their buckets are replayed */
    if (s->attn_cluster && s->nsplit_step >= 4 && s->nsplit_step >= heads / kvh)
        return launch_attention_decode_cluster(
            s->q, s->k, s->v, ly->norm[QMM_LLM_Q_NORM], ly->norm[QMM_LLM_K_NORM], s->cos_t,
            s->sin_t, eps, s->d_pos, heads, kvh, hd, s->max_seq, s->nsplit_step,
            s->kc + (size_t)l * layer_cache, s->vc + (size_t)l * layer_cache, s->att, s->stream, ln);
    return launch_attention_decode_fused(
        s->q, s->k, s->v, ly->norm[QMM_LLM_Q_NORM], ly->norm[QMM_LLM_K_NORM], s->cos_t, s->sin_t,
        eps, s->d_pos, heads, kvh, hd, s->max_seq, s->nsplit_step, s->kc + (size_t)l * layer_cache,
        s->vc + (size_t)l * layer_cache, s->partials, s->counters, s->att, s->stream, ln);
}

/* One matvec of the step: the weight's arrays into p, the context's scratch, PDL or not. */
qmm_status llm_fused_matvec(qmm_llm_cuda_session *s, qmm::MatvecArgs p, const qmm_cuda_weight *w,
                            const char *name, bool pdl)
{
    const qmm::MatvecArgs wa = qmm::matvec_args(qmm::weight_dev(w));
    p.packed = wa.packed, p.sb = wa.sb, p.n = wa.n, p.k = wa.k, p.n_pad = wa.n_pad;
    p.group = wa.group;
    p.m = 1;
    p.stamp = llm_stamp_matvec(s, w, name); /* in a stamped capture; else NULL */
    cudaError_t e = qmm::launch_matvec_ex(p, qmm::matvec_scratch(s->ctx), pdl, s->stream);
    if (e != cudaSuccess)
        return qmm_fail(QMM_ERR_CUDA, "%s (fused decode matvec): %s", name, cudaGetErrorString(e));
    return QMM_OK;
}

#if defined(QMM_EXP_MV_SHAPE) || defined(QMM_EXP_MV_PRE)
/* The experiments' index of a decode matvec: 0 q|k|v, 1 o, 2 gate|up, 3 down, -1 another. */
static int exp_index(const char *name)
{
    static const char *const names[4] = {"q|k|v matvec", "o matvec", "gate|up matvec", "down matvec"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}
#endif

#ifdef QMM_EXP_MV_SHAPE
/* Experiment build (NOTES row 196): a decode matvec's CTA shape forced from the environment,
 * "W,R,C" (warps, tiles a CTA, CTAs a cluster) in QMM_QKV_SHAPE, QMM_O_SHAPE, QMM_GATEUP_SHAPE
 * or QMM_DOWN_SHAPE; the launcher refuses a shape it does not take. Said once on stderr. */
static void exp_shape(qmm::MatvecArgs &p, const char *name)
{
    static const char *const envs[4] = {"QMM_QKV_SHAPE", "QMM_O_SHAPE", "QMM_GATEUP_SHAPE", "QMM_DOWN_SHAPE"};
    static int said[4];
    const int i = exp_index(name);
    const char *v = i < 0 ? NULL : getenv(envs[i]);
    int w, r, c;
    if (!v || sscanf(v, "%d,%d,%d", &w, &r, &c) != 3) return;
    p.warps = w, p.tiles_per_cta = r, p.cluster = c;
    if (!said[i]++) fprintf(stderr, "QMM_EXP_MV_SHAPE: %s forced to %d warps, R %d, C %d\n", name, w, r, c);
}
#endif

#ifdef QMM_EXP_MV_PRE
/* Experiment build (NOTES row 239): the groups a warp of one decode matvec requests before its
 * dependency wait (MatvecArgs::pre_wait, 1-3) from QMM_QKV_PRE, QMM_O_PRE, QMM_GATEUP_PRE or
 * QMM_DOWN_PRE. Said once on stderr. */
static void exp_pre(qmm::MatvecArgs &p, const char *name)
{
    static const char *const envs[4] = {"QMM_QKV_PRE", "QMM_O_PRE", "QMM_GATEUP_PRE", "QMM_DOWN_PRE"};
    static int said[4];
    const int i = exp_index(name);
    const char *v = i < 0 ? NULL : getenv(envs[i]);
    if (!v) return;
    p.pre_wait = atoi(v);
    if (!said[i]++) fprintf(stderr, "QMM_EXP_MV_PRE: %s requests %d groups a warp before its wait\n", name, p.pre_wait);
}
#endif

static qmm_status mv(qmm_llm_cuda_session *s, qmm::MatvecArgs p, const qmm_cuda_weight *w,
                     const char *name)
{
#ifdef QMM_EXP_MV_SHAPE
    exp_shape(p, name);
#endif
#ifdef QMM_EXP_MV_PRE
    exp_pre(p, name);
#endif
    return llm_fused_matvec(s, p, w, name, true);
}

/* The o matvec's arguments for the attention + o kernel: weight w's arrays, the residual epilogue
 * of p (x, xg, Σx², γ), one row. */
static qmm::MatvecArgs attention_o_args(qmm::MatvecArgs p, const qmm_cuda_weight *w)
{
    const qmm::MatvecArgs wa = qmm::matvec_args(qmm::weight_dev(w));
    p.packed = wa.packed, p.sb = wa.sb, p.n = wa.n, p.k = wa.k, p.n_pad = wa.n_pad;
    p.group = wa.group;
    p.m = 1;
    return p;
}

bool llm_attention_o_fusable(const qmm_llm_cuda_session *s)
{
    if (!llm_decode_fusable(s) || s->off || s->tp || s->cfg.num_layers < 1) return false;
    qmm::MatvecArgs p = {};
    p.epi = qmm::MV_EPI_RESIDUAL;
    p.ldc = s->cfg.hidden_size;
    for (int64_t l = 0; l < s->cfg.num_layers; l++)
        if (!attention_o_fused_supported((int)s->cfg.head_dim, (int)s->cfg.num_heads, (int)s->cfg.num_kv_heads,
                                         attention_o_args(p, s->layers[l].lin[QMM_LLM_O])))
            return false;
    return true;
}

/* The attention of layer l and its o projection (the residual epilogue in p) as one kernel
 * (attention_o_fused.cu), profiled as the attention with o's weight bytes. */
static qmm_status attention_and_o(qmm_llm_cuda_session *s, int64_t l, qmm::MatvecArgs p,
                                  const qmm_cuda_weight *w, double attn_bytes)
{
    const auto [H, hd, heads, kvh, L, I, eps, layer_cache, ab] = llm_dims_of(s);
    const llm_cuda_layer *ly = &s->layers[l];
    p = attention_o_args(p, w);
    llm_launch ln;
    const double bytes = attn_bytes + (double)p.n_pad * p.k / 2 + (double)p.n_pad * (p.k / 128) * 4;
    cudaError_t e = launch_attention_o_fused(
        s->q, s->k, s->v, ly->norm[QMM_LLM_Q_NORM], ly->norm[QMM_LLM_K_NORM], s->cos_t, s->sin_t, eps,
        s->d_pos, heads, kvh, hd, s->max_seq, s->kc + (size_t)l * layer_cache, s->vc + (size_t)l * layer_cache,
        p, s->stream, llm_launch_as(s, &ln, "attention", bytes));
    if (e != cudaSuccess)
        return qmm_fail(QMM_ERR_CUDA, "attention and o matvec (QMM_DECODE_ATTN_O=fused): %s", cudaGetErrorString(e));
    return QMM_OK;
}

qmm_status llm_cuda_decode_fused(qmm_llm_cuda_session *s, llm_prof *prof)
{
    const qmm_llm_config *c = &s->cfg;
    const auto [H, hd, heads, kvh, L, I, eps, layer_cache, attn_bytes] = llm_dims_of(s);
    const int ssb = H / 16; /* Σx² per 16-row tile of the residual */
    cudaStream_t st = s->stream;
    llm_launch ln;
    qmm_status q;
#define Q_TRY(call)                                                                              \
    do {                                                                                         \
        qmm_status st_ = (call);                                                                 \
        if (st_) return st_;                                                                     \
    } while (0)

    llm_mark(prof, st, "start");
    if (s->off) Q_TRY(llm_offload_begin(s));
    QMM_CUDA_TRY(launch_embed(s->embed, s->d_tokens, s->d_pos, 1, s->x, s->d_err, st));
    llm_mark(prof, st, "embedding");
    /* layer 0's input norm as in the unfused forward; later norms are folded */
    QMM_CUDA_TRY(launch_add_rmsnorm(s->x, NULL, s->layers[0].norm[QMM_LLM_INPUT_NORM], H, eps, 0,
                                    1, s->h, st, llm_launch_as(s, &ln, "rmsnorm", 8.0 * H)));
    llm_mark(prof, st, "rmsnorm");

    qmm::MatvecArgs residual = {}; /* x += y; xg and Σx² for the next norm */
    residual.epi = qmm::MV_EPI_RESIDUAL;
    residual.x = s->x;
    residual.ldc = H;
    residual.xg = s->h;
    residual.ss_out = s->d_ss;
    residual.ss_out_blocks = ssb;

    for (int l = 0; l < L; l++) {
        const llm_cuda_layer *ly = &s->layers[l];
        const llm_cuda_layer *wl = ly; /* the weights: resident, or the slot layer l streams into */
        if (s->off) {
            Q_TRY(llm_offload_before_layer(s, l));
            wl = &s->off->slot_w[l % s->off->buffers];
            llm_mark(prof, st, "weight upload wait");
        }
        qmm::MatvecArgs p = llm_fused_normed_input(s, l > 0);
        p.epi = qmm::MV_EPI_STORE;
        p.c = s->q;
        p.ldc = s->q_stride;
        if ((q = mv(s, p, wl->qkv, "q|k|v matvec"))) return q;
        llm_mark(prof, st, "q/k/v matmuls");

        p = residual;
        p.a = s->att;
        p.lda = (int64_t)heads * hd;
        p.gamma = ly->norm[QMM_LLM_POST_ATTN_NORM];
        if (s->attn_o_fused && s->nsplit_step == 1) { /* the experiment (session.cu) */
            Q_TRY(attention_and_o(s, l, p, wl->lin[QMM_LLM_O], attn_bytes));
            llm_mark(prof, st, "attention");
        } else {
            QMM_CUDA_TRY(llm_fused_attention(s, l, llm_launch_as(s, &ln, "attention", attn_bytes)));
            llm_mark(prof, st, "attention");
            if ((q = mv(s, p, wl->lin[QMM_LLM_O], "o matvec"))) return q;
            llm_mark(prof, st, "o matmul");
        }

        p = llm_fused_normed_input(s, true);
        p.epi = qmm::MV_EPI_SWIGLU;
        p.c = s->act;
        p.ldc = I;
        /* every slot of the one-token kernel requested before the wait (the default is 2): o,
         * the predecessor, ends in an arithmetic burst that leaves HBM idle (NOTES row 231), and
         * a third group a warp streams in it (row 239: decode +1.1 % at 32 positions, +1.4 % at
         * 2 048 on an H100, five rounds; alone, gate was 0.9 % slower with it, row 234) */
        p.pre_wait = 3;
        if ((q = mv(s, p, wl->gate_up, "gate|up matvec"))) return q;
        llm_mark(prof, st, "gate/up matmuls");

        p = residual;
        p.a = s->act;
        p.lda = I;
        p.gamma = l + 1 < L ? s->layers[l + 1].norm[QMM_LLM_INPUT_NORM] : s->final_norm;
        if ((q = mv(s, p, wl->lin[QMM_LLM_DOWN], "down matvec"))) return q;
        llm_mark(prof, st, "down matmul");
        if (s->off) Q_TRY(llm_offload_after_layer(s, l)); /* the slot is free: next upload */
    }
    if (s->off) Q_TRY(llm_offload_end(s));
    qmm::MatvecArgs p = llm_fused_normed_input(s, true); /* the final norm's xg */
    p.epi = qmm::MV_EPI_STORE;
    p.c = s->logits;
    p.ldc = c->vocab_size;
    if ((q = mv(s, p, s->head, "lm head matvec"))) return q;
    llm_mark(prof, st, "lm head matmul");
    QMM_CUDA_TRY(llm_launch_argmax(s, 1));
    llm_mark(prof, st, "argmax");
    return QMM_OK;
}
