/*
 * One forward of the Qwen3 decoder on the GPU: the same graph as cpu_session.c, with every
 * projection through qmm_cuda_matmul and the residual add fused into the next RMSNorm.
 * Kernels per layer: q, k, v matmuls (one with fuse_projections), qk-norm + rope + cache write,
 * attention, o matmul, add + rmsnorm, gate and up matmuls (one fused), swiglu, down matmul,
 * add + rmsnorm (with the next layer's input norm; after the last layer the final norm, of the
 * last row only). Layer 0's input rmsnorm follows the embedding.
 * With weight streaming the layer's projections read the slot its weights are uploaded into
 * (offload.cu), after waiting for that upload; the copy stream is forked from the compute
 * stream at the start and joined back before the head, so a capture takes both streams.
 */
#include <string.h>

#include "llm/cuda/session.h"

using namespace qmm_llm;

static void mark(llm_prof *p, cudaStream_t stream, const char *name)
{
    if (!p || p->count >= LLM_PROF_EVENTS) return;
    cudaEventRecord(p->ev[p->count], stream);
    p->name[p->count++] = name;
}

/* c[m, N] = a[m, K] · Wᵀ. split-K off: the same plan with the split held at 1 (AUTO with
 * split = 1), so the control differs from the default only by the split. */
static qmm_status mm(qmm_llm_cuda_session *s, const bf16 *a, int m, const qmm_cuda_weight *w,
                     bf16 *c)
{
    qmm_cuda_options o = qmm_cuda_options_default();
    if (!s->split_k) o.split = 1;
    return qmm_cuda_matmul(s->ctx, (const qmm_bf16 *)a, m, w, (qmm_bf16 *)c, s->ws, s->ws_bytes,
                           &o, NULL);
}

/* Projections that share their input: one stacked weight into out[0] when fused (the outputs
 * are column ranges of it), else part i into out[i]. */
static qmm_status mm_shared(qmm_llm_cuda_session *s, const bf16 *a, int m,
                            const qmm_cuda_weight *stacked, qmm_cuda_weight *const *parts,
                            bf16 *const *out, int n)
{
    if (s->fuse) return mm(s, a, m, stacked, out[0]);
    for (int i = 0; i < n; i++) {
        qmm_status st = mm(s, a, m, parts[i], out[i]);
        if (st) return st;
    }
    return QMM_OK;
}

#define K_TRY QMM_CUDA_TRY /* the one CUDA check (cuda/cuda_try.h) */
#define Q_TRY(call)                                                                              \
    do {                                                                                         \
        qmm_status st_ = (call);                                                                 \
        if (st_) return st_;                                                                     \
    } while (0)

qmm_status llm_cuda_forward(qmm_llm_cuda_session *s, int m, int final, llm_prof *prof)
{
    const qmm_llm_config *c = &s->cfg;
    const int H = (int)c->hidden_size, hd = (int)c->head_dim, heads = (int)c->num_heads;
    const int kvh = (int)c->num_kv_heads, L = (int)c->num_layers;
    const float eps = (float)c->rms_norm_eps;
    const size_t layer_cache = (size_t)kvh * (size_t)s->max_seq * (size_t)hd;
    cudaStream_t st = s->stream;

    mark(prof, st, "start");
    if (s->off) Q_TRY(llm_offload_begin(s));
    K_TRY(launch_embed(s->embed, s->d_tokens, s->d_pos, m, s->x, s->d_err, st));
    mark(prof, st, "embedding");
    K_TRY(launch_add_rmsnorm(s->x, NULL, s->layers[0].norm[QMM_LLM_INPUT_NORM], H, eps, 0, m, s->h,
                             st));
    mark(prof, st, "rmsnorm");
    for (int l = 0; l < L; l++) {
        const llm_cuda_layer *ly = &s->layers[l];
        /* the projections' weights: resident, or the slot layer l streams into */
        const llm_cuda_layer *wl = ly;
        if (s->off) {
            Q_TRY(llm_offload_before_layer(s, l));
            wl = &s->off->slot_w[l % s->off->buffers];
            mark(prof, st, "weight upload wait");
        }
        bf16 *qkv_out[3] = {s->q, s->k, s->v};
        Q_TRY(mm_shared(s, s->h, m, wl->qkv, &wl->lin[QMM_LLM_Q], qkv_out, 3));
        mark(prof, st, "q/k/v matmuls");
        bf16 *kc = s->kc + (size_t)l * layer_cache, *vc = s->vc + (size_t)l * layer_cache;
        K_TRY(launch_qk_norm_rope(s->q, s->k, s->v, s->q_stride, s->kv_stride,
                                  ly->norm[QMM_LLM_Q_NORM], ly->norm[QMM_LLM_K_NORM], s->cos_t,
                                  s->sin_t, s->d_pos, m, heads, kvh, hd, eps, s->max_seq, kc, vc,
                                  st));
        mark(prof, st, "qk-norm+rope+cache");
        if (m == 1)
            K_TRY(launch_attention_decode(s->q, kc, vc, s->d_pos, heads, kvh, hd, s->max_seq,
                                          s->nsplit, s->partials, s->att, st));
        else if (s->attention_ref)
            K_TRY(launch_attention_prefill(s->q, s->q_stride, kc, vc, s->d_pos, m, heads, kvh, hd,
                                           s->max_seq, s->att, st));
        else
            K_TRY(launch_attention_prefill_mma(s->q, s->q_stride, kc, vc, s->d_pos, m, heads, kvh,
                                               hd, s->max_seq, s->att, st));
        mark(prof, st, "attention");
        Q_TRY(mm(s, s->att, m, wl->lin[QMM_LLM_O], s->proj));
        mark(prof, st, "o matmul");
        K_TRY(launch_add_rmsnorm(s->x, s->proj, ly->norm[QMM_LLM_POST_ATTN_NORM], H, eps, 0, m,
                                 s->h, st));
        mark(prof, st, "add+rmsnorm");
        bf16 *gu_out[2] = {s->gate, s->up};
        Q_TRY(mm_shared(s, s->h, m, wl->gate_up, &wl->lin[QMM_LLM_GATE], gu_out, 2));
        mark(prof, st, "gate/up matmuls");
        K_TRY(launch_swiglu(s->gate, s->up, m, c->intermediate_size, s->gu_stride, s->act, st));
        mark(prof, st, "swiglu");
        Q_TRY(mm(s, s->act, m, wl->lin[QMM_LLM_DOWN], s->proj));
        mark(prof, st, "down matmul");
        if (s->off) Q_TRY(llm_offload_after_layer(s, l)); /* the slot is free: next upload */
        if (l + 1 < L) {
            K_TRY(launch_add_rmsnorm(s->x, s->proj, s->layers[l + 1].norm[QMM_LLM_INPUT_NORM], H,
                                     eps, 0, m, s->h, st));
            mark(prof, st, "add+rmsnorm");
        } else if (final) {
            /* only the last row feeds the head: add + final norm of that row, into h[0] */
            K_TRY(launch_add_rmsnorm(s->x, s->proj, s->final_norm, H, eps, m - 1, 1, s->h, st));
            mark(prof, st, "add+rmsnorm");
        }
    }
    if (s->off) Q_TRY(llm_offload_end(s));
    if (final) {
        Q_TRY(mm(s, s->h, 1, s->head, s->logits));
        mark(prof, st, "lm head matmul");
        K_TRY(launch_argmax_advance(s->logits, c->vocab_size, s->d_tokens, s->d_pos, m, s->d_err,
                                    st));
        mark(prof, st, "argmax");
    } else {
        K_TRY(launch_advance(s->d_pos, m, st));
        mark(prof, st, "advance");
    }
    return QMM_OK;
}

qmm_status llm_cuda_capture(qmm_llm_cuda_session *s, int m, int final, cudaGraphExec_t *out)
{
    *out = NULL;
    QMM_CUDA_TRY(cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeRelaxed));
    qmm_status st = llm_cuda_forward(s, m, final, NULL);
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(s->stream, &g);
    if (st) {
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        return st;
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return qmm_fail(QMM_ERR_CUDA, "capturing the forward of %d rows as a CUDA graph failed: %s "
                        "(use_graph = 0 runs it eagerly)", m, cudaGetErrorString(e));
    }
    e = cudaGraphInstantiate(out, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        *out = NULL;
        return qmm_fail(QMM_ERR_CUDA, "instantiating the graph of %d rows failed: %s", m,
                        cudaGetErrorString(e));
    }
    return QMM_OK;
}

qmm_status llm_cuda_run_forward(qmm_llm_cuda_session *s, int m, int final)
{
    if (!s->use_graph) return llm_cuda_forward(s, m, final, NULL);
    if (m == 1 && final && s->decode_graph) {
        QMM_CUDA_TRY(cudaGraphLaunch(s->decode_graph, s->stream));
        return QMM_OK;
    }
    for (int i = 0; i < s->ngraphs; i++)
        if (s->graphs[i].m == m && s->graphs[i].final == final) {
            QMM_CUDA_TRY(cudaGraphLaunch(s->graphs[i].exec, s->stream));
            return QMM_OK;
        }
    cudaGraphExec_t g;
    qmm_status st = llm_cuda_capture(s, m, final, &g);
    if (st) return st;
    int slot;
    if (s->ngraphs < LLM_PREFILL_GRAPHS) {
        slot = s->ngraphs++;
    } else { /* replace the oldest */
        slot = s->next_evict;
        s->next_evict = (s->next_evict + 1) % LLM_PREFILL_GRAPHS;
        cudaGraphExecDestroy(s->graphs[slot].exec);
    }
    s->graphs[slot].m = m;
    s->graphs[slot].final = final;
    s->graphs[slot].exec = g;
    QMM_CUDA_TRY(cudaGraphLaunch(g, s->stream));
    return QMM_OK;
}
