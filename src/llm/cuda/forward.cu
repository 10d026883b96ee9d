/*
 * One forward of the Qwen3 decoder on the GPU: the same graph as cpu_session.c, with every
 * projection through qmm_cuda_matmul and the residual add fused into the next RMSNorm.
 * Kernels per layer: q, k, v matmuls (one with fuse_projections, the default), attention, o
 * matmul, add + rmsnorm, gate and up matmuls (one fused), swiglu, down matmul, add + rmsnorm
 * (with the next layer's input norm; after the last layer the final norm, of the last row only).
 * Attention of one row (decode) is one kernel that also does qk-norm + RoPE + the cache append
 * (attention_decode.cu); of several rows (prefill) a qk-norm + rope + cache kernel, then the
 * attention. Layer 0's input rmsnorm follows the embedding; the head is followed by the
 * two-stage argmax. Every engine kernel after the embedding is launched with PDL when s->pdl
 * (pdl.cuh), except the reference attention kernels (attention.cu, the unfused decode).
 * With weight streaming the layer's projections read the slot its weights are uploaded into
 * (offload.cu), after waiting for that upload; the copy stream is forked from the compute
 * stream at the start and joined back before the head, so a capture takes both streams.
 */
#include <stdlib.h>
#include <string.h>

#include "llm/cuda/session.h"

using namespace qmm_llm;

void llm_mark(llm_prof *p, cudaStream_t stream, const char *name)
{
    if (!p || p->count >= LLM_PROF_EVENTS) return;
    cudaEventRecord(p->ev[p->count], stream);
    p->name[p->count++] = name;
}

/* How the next engine kernel is launched: PDL per the session; in a stamped capture also its
 * timestamp slot, noted with its name, its bytes and the unstamped work before it. */
const qmm_llm::llm_launch *llm_launch_as(qmm_llm_cuda_session *s, qmm_llm::llm_launch *ln, const char *name,
                                double bytes)
{
    ln->pdl = s->pdl;
    ln->stamp = NULL;
    llm_stamp_plan *sp = s->splan;
    if (sp && sp->count < LLM_STAMP_SLOTS) {
        int i = sp->count++;
        ln->stamp = s->d_stamps + 4 * (size_t)i;
        sp->name[i] = name;
        sp->bytes[i] = bytes;
        sp->before[i] = sp->pend_name;
        sp->before_bytes[i] = sp->pend_bytes;
        sp->before_launches[i] = sp->pend_launches;
        sp->from_prev[i] = 0;
        sp->pend_name = NULL;
        sp->pend_bytes = 0;
        sp->pend_launches = 0;
    }
    return ln;
}

/* c[m, N] = a[m, K] · Wᵀ. split-K off: the same plan with the split held at 1 (AUTO with
 * split = 1), so the control differs from the default only by the split. name: the family in
 * the in-graph profile. */
/* The greedy token of the logits (two-stage argmax); the position advances by m. */
cudaError_t llm_launch_argmax(qmm_llm_cuda_session *s, int m)
{
    qmm_llm::llm_launch ln;
    const int64_t V = s->cfg.vocab_size;
    cudaError_t e = launch_argmax_partial(s->logits, V, s->pair_v, s->pair_i, s->stream,
                                          llm_launch_as(s, &ln, "argmax", 2.0 * (double)V));
    if (e != cudaSuccess) return e;
    return launch_argmax_finish(s->pair_v, s->pair_i, s->npairs, s->d_tokens, s->d_pos, m, s->d_err,
                                s->stream, llm_launch_as(s, &ln, "argmax", 8.0 * s->npairs));
}

void llm_note_unstamped(qmm_llm_cuda_session *s, const char *name, double bytes)
{
    if (!s->splan) return;
    llm_stamp_plan *sp = s->splan;
    if (!sp->pend_name) sp->pend_name = name;
    sp->pend_bytes += bytes;
    sp->pend_launches++;
}

/* A matmul's bytes for the profile: weights, activations in and out. */
static double matmul_bytes(const qmm_cuda_weight *w, int m)
{
    return (double)qmm_cuda_weight_bytes(w) + 2.0 * m * (double)(qmm_cuda_weight_k(w) + qmm_cuda_weight_n(w));
}

void llm_note_matmul(qmm_llm_cuda_session *s, int m, const qmm_cuda_weight *w, const char *name)
{
    llm_note_unstamped(s, name, matmul_bytes(w, m));
}

unsigned long long *llm_stamp_matvec(qmm_llm_cuda_session *s, const qmm_cuda_weight *w, const char *name)
{
    if (!s->splan) return NULL;
    if (s->splan->count >= LLM_STAMP_SLOTS) { /* out of slots: work between kernels, as before */
        llm_note_matmul(s, 1, w, name);
        return NULL;
    }
    qmm_llm::llm_launch ln;
    llm_launch_as(s, &ln, name, matmul_bytes(w, 1));
    s->splan->from_prev[s->splan->count - 1] = 1;
    return ln.stamp;
}

static qmm_status mm(qmm_llm_cuda_session *s, const bf16 *a, int m, const qmm_cuda_weight *w,
                     bf16 *c, const char *name)
{
    qmm_cuda_options o = qmm_cuda_options_default();
    if (!s->split_k) o.split = 1;
    llm_note_matmul(s, m, w, name);
    return qmm_cuda_matmul(s->ctx, (const qmm_bf16 *)a, m, w, (qmm_bf16 *)c, s->ws, s->ws_bytes,
                           &o, NULL);
}

/* Projections that share their input: one stacked weight into out[0] when fused (the outputs
 * are column ranges of it; profiled as fused_name), else part i into out[i] (as name). */
static qmm_status mm_shared(qmm_llm_cuda_session *s, const bf16 *a, int m,
                            const qmm_cuda_weight *stacked, qmm_cuda_weight *const *parts,
                            bf16 *const *out, int n, const char *fused_name, const char *name)
{
    if (s->fuse) return mm(s, a, m, stacked, out[0], fused_name);
    for (int i = 0; i < n; i++) {
        qmm_status st = mm(s, a, m, parts[i], out[i], name);
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

/* A row-parallel projection (o, down) of a tensor-parallel session: this rank's partial and its
 * all-reduce. *y32: the fp32 sum when the partial was fp32 (tp_session.h, TP_F32_ROWS), else
 * NULL and the bf16 sum is in proj. One GPU: the plain matmul into proj. */
static qmm_status row_parallel(qmm_llm_cuda_session *s, const bf16 *a, int m,
                               const qmm_cuda_weight *w, bf16 *proj, const char *name,
                               llm_prof *prof, const float **y32)
{
    *y32 = NULL;
    float *f = llm_tp_f32_out(s, m, w);
    Q_TRY(f ? llm_tp_project_f32(s, a, m, w, f, name) : mm(s, a, m, w, proj, name));
    llm_mark(prof, s->stream, name);
    if (!s->tp) return QMM_OK;
    const size_t count = (size_t)m * (size_t)s->cfg.hidden_size;
    Q_TRY(f ? llm_tp_allreduce_f32(s, f, count) : llm_tp_allreduce(s, proj, count));
    llm_mark(prof, s->stream, "all-reduce");
    *y32 = f;
    return QMM_OK;
}

/* x += the projection (bf16 proj, or the fp32 sum y32 rounded to bf16), then RMSNorm into h. */
static cudaError_t add_norm(qmm_llm_cuda_session *s, const bf16 *proj, const float *y32,
                            const bf16 *w, int row0, int rows, const llm_launch *ln)
{
    const qmm_llm_config *c = &s->cfg;
    const float eps = (float)c->rms_norm_eps;
    return y32 ? launch_add_rmsnorm_f32(s->x, y32, w, c->hidden_size, eps, row0, rows, s->h,
                                        s->stream, ln)
               : launch_add_rmsnorm(s->x, proj, w, c->hidden_size, eps, row0, rows, s->h,
                                    s->stream, ln);
}

qmm_status llm_cuda_forward(qmm_llm_cuda_session *s, int m, int final, llm_prof *prof)
{
    const auto [H, hd, heads, kvh, L, I, eps, layer_cache, attn_bytes] = llm_dims_of(s);
    const bool fused_attention = m == 1 && !s->attention_ref;
    /* bytes for the in-graph profile (decode: one row) */
    const double norm_bytes = 14.0 * H * m, swiglu_bytes = 6.0 * (double)I * m;
    /* q in and out, k and v in, their cache rows out */
    const double rope_bytes = 4.0 * (heads + 2.0 * kvh) * hd * m;
    cudaStream_t st = s->stream;
    llm_launch ln;
    Q_TRY(llm_tp_usable(s));
    if (m == 1 && final && s->pd) return llm_cuda_decode_persistent(s, prof);
    if (m == 1 && final && llm_decode_fusable(s))
        return s->tp ? llm_tp_decode_fused(s, prof) : llm_cuda_decode_fused(s, prof);

    llm_mark(prof, st, "start");
    if (s->off) Q_TRY(llm_offload_begin(s));
    if (s->tp) {
        Q_TRY(llm_tp_embed(s, m));
    } else {
        K_TRY(launch_embed(s->embed, s->d_tokens, s->d_pos, m, s->x, s->d_err, st));
    }
    llm_mark(prof, st, "embedding");
    K_TRY(launch_add_rmsnorm(s->x, NULL, s->layers[0].norm[QMM_LLM_INPUT_NORM], H, eps, 0, m, s->h,
                             st, llm_launch_as(s, &ln, "rmsnorm", 8.0 * H * m)));
    llm_mark(prof, st, "rmsnorm");
    for (int l = 0; l < L; l++) {
        const llm_cuda_layer *ly = &s->layers[l];
        /* the projections' weights: resident, or the slot layer l streams into */
        const llm_cuda_layer *wl = ly;
        if (s->off) {
            Q_TRY(llm_offload_before_layer(s, l));
            wl = &s->off->slot_w[l % s->off->buffers];
            llm_mark(prof, st, "weight upload wait");
        }
        bf16 *qkv_out[3] = {s->q, s->k, s->v};
        Q_TRY(mm_shared(s, s->h, m, wl->qkv, &wl->lin[QMM_LLM_Q], qkv_out, 3, "q|k|v matmul",
                        "q/k/v matmuls"));
        llm_mark(prof, st, "q/k/v matmuls");
        bf16 *kc = s->kc + (size_t)l * layer_cache, *vc = s->vc + (size_t)l * layer_cache;
        if (fused_attention) {
            K_TRY(llm_fused_attention(s, l, llm_launch_as(s, &ln, "attention", attn_bytes)));
        } else {
            K_TRY(launch_qk_norm_rope(
                s->q, s->k, s->v, s->q_stride, s->kv_stride, ly->norm[QMM_LLM_Q_NORM],
                ly->norm[QMM_LLM_K_NORM], s->cos_t, s->sin_t, s->d_pos, m, heads, kvh, hd, eps,
                s->max_seq, kc, vc, st, llm_launch_as(s, &ln, "qk-norm+rope+cache", rope_bytes)));
            llm_mark(prof, st, "qk-norm+rope+cache");
            if (m == 1)
                K_TRY(launch_attention_decode(s->q, kc, vc, s->d_pos, heads, kvh, hd, s->max_seq,
                                              s->nsplit, s->partials, s->att, st));
            else if (s->attention_ref)
                K_TRY(launch_attention_prefill(s->q, s->q_stride, kc, vc, s->d_pos, m, heads, kvh,
                                               hd, s->max_seq, s->att, st));
            else if (s->prefill_wgmma)
                K_TRY(launch_attention_prefill_wgmma(s->q, s->q_stride, kc, vc, s->d_pos, m, heads,
                                                     kvh, hd, s->max_seq, s->att, st,
                                                     llm_launch_as(s, &ln, "attention", attn_bytes),
                                                     llm_prefill_pipelined(s, m)));
            else
                K_TRY(launch_attention_prefill_mma(s->q, s->q_stride, kc, vc, s->d_pos, m, heads,
                                                   kvh, hd, s->max_seq, s->att, st,
                                                   llm_launch_as(s, &ln, "attention", attn_bytes)));
        }
        llm_mark(prof, st, "attention");
        const float *y32; /* tensor-parallel: the ranks' partial products summed */
        Q_TRY(row_parallel(s, s->att, m, wl->lin[QMM_LLM_O], s->proj, "o matmul", prof, &y32));
        K_TRY(add_norm(s, s->proj, y32, ly->norm[QMM_LLM_POST_ATTN_NORM], 0, m,
                       llm_launch_as(s, &ln, "add+rmsnorm", norm_bytes)));
        llm_mark(prof, st, "add+rmsnorm");
        bf16 *gu_out[2] = {s->gate, s->up};
        Q_TRY(mm_shared(s, s->h, m, wl->gate_up, &wl->lin[QMM_LLM_GATE], gu_out, 2,
                        "gate|up matmul", "gate/up matmuls"));
        llm_mark(prof, st, "gate/up matmuls");
        K_TRY(launch_swiglu(s->gate, s->up, m, I, s->gu_stride, s->gu_chunk, s->act, st,
                            llm_launch_as(s, &ln, "swiglu", swiglu_bytes)));
        llm_mark(prof, st, "swiglu");
        Q_TRY(row_parallel(s, s->act, m, wl->lin[QMM_LLM_DOWN], s->proj, "down matmul", prof,
                           &y32));
        if (s->off) Q_TRY(llm_offload_after_layer(s, l)); /* the slot is free: next upload */
        if (l + 1 < L) {
            K_TRY(add_norm(s, s->proj, y32, s->layers[l + 1].norm[QMM_LLM_INPUT_NORM], 0, m,
                           llm_launch_as(s, &ln, "add+rmsnorm", norm_bytes)));
            llm_mark(prof, st, "add+rmsnorm");
        } else if (final) {
            /* only the last row feeds the head: add + final norm of that row, into h[0] */
            K_TRY(add_norm(s, s->proj, y32, s->final_norm, m - 1, 1,
                           llm_launch_as(s, &ln, "add+rmsnorm", 14.0 * H)));
            llm_mark(prof, st, "add+rmsnorm");
        }
    }
    if (s->off) Q_TRY(llm_offload_end(s));
    if (final) {
        /* tensor-parallel: this rank's vocabulary slice, then the gather of the whole */
        Q_TRY(mm(s, s->h, 1, s->head, s->tp ? (bf16 *)llm_tp_head_out(s) : s->logits,
                 "lm head matmul"));
        llm_mark(prof, st, "lm head matmul");
        if (s->tp) {
            Q_TRY(llm_tp_gather_logits(s));
            llm_mark(prof, st, "all-gather");
        }
        K_TRY(llm_launch_argmax(s, m));
        llm_mark(prof, st, "argmax");
    } else {
        K_TRY(launch_advance(s->d_pos, m, st));
        llm_mark(prof, st, "advance");
    }
    return QMM_OK;
}

/* Kernel nodes of a captured graph (-1 when the graph cannot be read). */
static int count_kernels(cudaGraph_t g)
{
    size_t n = 0;
    if (cudaGraphGetNodes(g, NULL, &n) != cudaSuccess) return -1;
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)malloc(n ? n * sizeof *nodes : 1);
    int count = -1;
    if (nodes && cudaGraphGetNodes(g, nodes, &n) == cudaSuccess) {
        count = 0;
        for (size_t i = 0; i < n; i++) {
            cudaGraphNodeType t;
            if (cudaGraphNodeGetType(nodes[i], &t) == cudaSuccess && t == cudaGraphNodeTypeKernel)
                count++;
        }
    }
    free(nodes);
    return count;
}

qmm_status llm_cuda_capture(qmm_llm_cuda_session *s, int m, int final, cudaGraphExec_t *out,
                            int *kernel_nodes)
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
    if (kernel_nodes) *kernel_nodes = count_kernels(g);
    e = cudaGraphInstantiate(out, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        *out = NULL;
        return qmm_fail(QMM_ERR_CUDA, "instantiating the graph of %d rows failed: %s", m,
                        cudaGetErrorString(e));
    }
    return QMM_OK;
}

qmm_status llm_cuda_capture_decode(qmm_llm_cuda_session *s, int splits, cudaGraphExec_t *out,
                                   int *kernel_nodes)
{
    s->nsplit_step = splits;
    qmm_status st = llm_cuda_capture(s, 1, 1, out, kernel_nodes);
    s->nsplit_step = s->nsplit_fused; /* eager steps keep the session's */
    return st;
}

/* The bucket of the decode step of the row at pos; s->nbuckets: the full graph. */
static int step_bucket(const qmm_llm_cuda_session *s, int64_t pos)
{
    return llm_decode_bucket_of_step(pos, s->bucket_splits, s->nbuckets);
}

int llm_decode_splits_of_step(const qmm_llm_cuda_session *s, int64_t pos)
{
    const int i = step_bucket(s, pos);
    return i < s->nbuckets ? s->bucket_splits[i] : s->nsplit_fused;
}

qmm_status llm_cuda_run_forward(qmm_llm_cuda_session *s, int m, int final, int64_t pos)
{
    qmm_status ust = llm_tp_usable(s); /* an aborted communicator: no graph may run */
    if (ust) return ust;
    if (!s->use_graph) return llm_cuda_forward(s, m, final, NULL);
    if (m == 1 && final && s->decode_graph) { /* a decode step: its bucket's graph */
        const int i = step_bucket(s, pos);
        cudaGraphExec_t step = i < s->nbuckets ? s->bucket_graph[i] : s->decode_graph;
        QMM_CUDA_TRY(cudaGraphLaunch(step, s->stream));
        return QMM_OK;
    }
    for (int i = 0; i < s->ngraphs; i++)
        if (s->graphs[i].m == m && s->graphs[i].final == final) {
            QMM_CUDA_TRY(cudaGraphLaunch(s->graphs[i].exec, s->stream));
            return QMM_OK;
        }
    cudaGraphExec_t g;
    qmm_status st = llm_cuda_capture(s, m, final, &g, NULL);
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
