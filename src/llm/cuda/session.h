/* The CUDA session's state, shared by session.cu (setup), forward.cu (the graph of one forward)
 * and run.cu (prefill / decode / generate / profile). C++ only. */
#ifndef QMM_LLM_CUDA_SESSION_H
#define QMM_LLM_CUDA_SESSION_H

#include <cuda_runtime.h>

#include "cuda/cuda_try.h"
#include "internal.h"
#include "llm/cuda/llm_kernels.cuh"
#include "llm/cuda/tp_session.h"
#include "llm/decode_bucket.h"
#include "llm/model.h"
#include "llm/stack_w4.h"


/* Event marks of an eagerly profiled forward: the time between mark i-1 and mark i is charged to
 * name[i]. */
#define LLM_PROF_EVENTS 2048
struct llm_prof {
    cudaEvent_t ev[LLM_PROF_EVENTS];
    const char *name[LLM_PROF_EVENTS];
    int count;
};

/* Captured forwards of a prefill chunk size, so repeated prompts of one length replay a graph. */
#define LLM_PREFILL_GRAPHS 8
struct llm_graph_entry {
    int m, final;
    cudaGraphExec_t exec;
};

/* Timestamps of a profiled decode graph (graph_profile.cu): while that graph is captured, the
 * forward gives each engine kernel the next slot of 4 uint64 (pdl.cuh) and notes its name, the
 * bytes it moves, and the unstamped work (matmuls) launched since the previous stamped kernel.
 * The decode step's matvecs are stamped too (from_prev): their time runs from the previous
 * stamped kernel's end to their own end, since their CTAs start streaming before their wait. */
#define LLM_STAMP_SLOTS 512
struct llm_stamp_plan {
    int count;
    const char *name[LLM_STAMP_SLOTS];
    double bytes[LLM_STAMP_SLOTS];
    const char *before[LLM_STAMP_SLOTS]; /* NULL: nothing ran in between */
    double before_bytes[LLM_STAMP_SLOTS];
    int before_launches[LLM_STAMP_SLOTS];
    unsigned char from_prev[LLM_STAMP_SLOTS]; /* a matvec: timed from the previous slot's end */
    /* the unstamped work since the last slot */
    const char *pend_name;
    double pend_bytes;
    int pend_launches;
};

struct llm_cuda_layer {
    qmm_cuda_weight *lin[QMM_LLM_LINEAR_COUNT]; /* fused: only O and DOWN */
    qmm_cuda_weight *qkv, *gate_up;             /* fused: [q; k; v] and [gate; up] rows */
    qmm_llm::bf16 *norm[QMM_LLM_NORM_COUNT]; /* device copies */
};

/* Weight streaming (offload_weights): every layer's device image lives in pinned host memory,
 * layer l is uploaded into slot l % buffers on the copy stream. Slot i's handles wrap fixed
 * offsets of slot i, so only the bytes move. Events: ready[i] (copy stream, the upload into
 * slot i ended), free_[i] (compute stream, the layer in slot i had its last use); fork / join
 * bring the copy stream into the compute stream's order (and into a graph capture). */
struct llm_offload {
    int buffers;
    int pieces;                  /* weights per layer: 7, or 4 with fused projections */
    size_t layer_bytes;          /* one layer image, 256-byte aligned pieces back to back */
    unsigned char *host;         /* pinned [layers, layer_bytes] */
    unsigned char *slots;        /* device [buffers, layer_bytes] */
    llm_cuda_layer *slot_w;      /* [buffers]: wrapped handles (norms unused) */
    cudaStream_t copy;
    cudaEvent_t *ready, *free_;  /* [buffers] */
    cudaEvent_t fork, join;
    double h2d_gbs;
};


/* Build the host images, the slots and their handles, and measure the upload bandwidth. */
qmm_status llm_offload_create(qmm_llm_cuda_session *s);
void llm_offload_destroy(qmm_llm_cuda_session *s);
/* Forward hooks (launches only, capturable): begin queues the first uploads, before_layer makes
 * the compute stream wait for layer l's slot, after_layer queues the upload of layer l + buffers
 * into the slot layer l just released, end joins the copy stream back. */
qmm_status llm_offload_begin(qmm_llm_cuda_session *s);
qmm_status llm_offload_before_layer(qmm_llm_cuda_session *s, int l);
qmm_status llm_offload_after_layer(qmm_llm_cuda_session *s, int l);
qmm_status llm_offload_end(qmm_llm_cuda_session *s);

struct qmm_llm_cuda_session {
    const qmm_llm_model *m;
    qmm_llm_config cfg;
    int device;
    cudaStream_t stream;
    qmm_cuda_ctx *ctx;
    int split_k, use_graph, attention_ref, fuse;
    int pdl;                     /* engine kernels launched with programmatic dependent launch */
    int sm_count;
    llm_offload *off;            /* NULL: every weight resident */
    llm_tp *tp;                  /* NULL: one GPU; else this rank's share (tp_session.cu) */
    struct llm_persistent *pd;   /* NULL: the fused step; else the persistent one's state */
    int64_t max_seq, chunk, pos; /* pos mirrors *d_pos between calls */

    llm_cuda_layer *layers;
    qmm_cuda_weight *head;       /* the LM head (the embedding's W4 when tied) */
    qmm_llm::bf16 *final_norm;
    qmm_cuda_weight *embed;      /* row lookups (qmm_cuda_dequantize_rows): the head when tied */
    qmm_llm::bf16 *norm_buf;     /* every norm weight, one allocation */
    float *cos_t, *sin_t;        /* [max_seq, hd/2] */
    qmm_llm::bf16 *kc, *vc;      /* [layers, kv_heads, max_seq, hd] */
    int32_t *d_pos, *d_tokens, *d_err; /* tokens: [max_seq + 1], the token at each position */

    float *x;                    /* [chunk, hidden] residual */
    qmm_llm::bf16 *h, *att, *proj, *logits;
    /* projection outputs; fused, q/k/v (gate/up) are column ranges of one buffer */
    qmm_llm::bf16 *q, *k, *v, *gate, *up, *act;
    int64_t q_stride, kv_stride, gu_stride;
    int64_t gu_chunk;            /* fused gate|up rows interleaved in chunks of this (0: [gate; up]) */
    float *d_ss;                 /* decode: Σx² per 16-row tile of the residual (fused RMSNorm) */
    float *partials;             /* decode attention splits [heads, max(nsplit, nsplit_fused), hd + 2] */
    int nsplit;                  /* splits of the reference decode attention (attention_ref) */
    int nsplit_fused;            /* grid splits of the fused decode attention */
    int attn_cluster;            /* 1: its launches of 4 splits or more (and at least a split a
                                  * query head) are the cluster kernel's (QMM_DECODE_ATTN=cluster:
                                  * attention_decode_cluster.cu, llm_fused_attention) */
    int attn_o_fused;            /* 1: the decode attention and o matvec as one kernel
                                  * (QMM_DECODE_ATTN_O=fused, an experiment: attention_o_fused.cu;
                                  * sessions of one split only, so every step takes it) */
    int prefill_wgmma;           /* prefill attention by the warpgroup-MMA kernel
                                  * (attention_prefill_wgmma.cu): 1 a tile at a time, 2 pipelined,
                                  * 3 by length (the default at hd 128 on sm_90: pipelined from
                                  * LLM_PREFILL_PIPE_MIN_M tokens a forward); 0 the mma.sync kernel
                                  * (QMM_PREFILL_ATTN=mma, or where it does not run) */
    int nsplit_step;             /* its splits in the forward being enqueued: nsplit_fused, or a
                                  * bucket's while that bucket's graph is captured */
    int *counters;               /* [kv_heads] arrivals per KV head (fused decode attention) */
    float *pair_v;               /* argmax stage 1 pairs [npairs] */
    int *pair_i;
    int npairs;
    unsigned long long *d_stamps; /* [LLM_STAMP_SLOTS][4] (allocated when profiling) */
    llm_stamp_plan *splan;       /* non-NULL only while a stamped graph is captured */
    void *ws;                    /* qmm_cuda_matmul workspace */
    size_t ws_bytes;

    qmm_llm::bf16 *h_logits;     /* pinned host staging */
    int32_t *h_tokens;
    cudaEvent_t ev[3];
    cudaGraphExec_t decode_graph;    /* the decode step at nsplit_fused: any context */
    /* the decode step at bucket_splits[i] attention splits, replayed only at contexts where it
     * gives decode_graph's bits (decode_bucket.h) */
    cudaGraphExec_t bucket_graph[LLM_DECODE_BUCKETS];
    int bucket_splits[LLM_DECODE_BUCKETS], nbuckets;
    llm_graph_entry graphs[LLM_PREFILL_GRAPHS];
    int ngraphs, next_evict;
};

/* Enqueue one forward of m rows at the device position: final = 1 runs the head and the argmax
 * (which writes the next token and advances the position by m); final = 0 only advances.
 * prof (may be NULL) gets an event after every kernel family. Launches only: capturable. */
qmm_status llm_cuda_forward(qmm_llm_cuda_session *s, int m, int final, llm_prof *prof);

/* The sizes a forward works with (forward.cu, decode_fused.cu): hidden, head dim, heads, KV heads,
 * layers, intermediate, RMSNorm eps, one layer's cache (elements), the decode attention's bytes
 * (in-graph profile). */
struct llm_dims {
    int H, hd, heads, kvh, L;
    int64_t I;
    float eps;
    size_t layer_cache;
    double attn_bytes;
};
static inline llm_dims llm_dims_of(const qmm_llm_cuda_session *s)
{
    const qmm_llm_config *c = &s->cfg;
    llm_dims d;
    d.H = (int)c->hidden_size, d.hd = (int)c->head_dim, d.heads = (int)c->num_heads;
    d.kvh = (int)c->num_kv_heads, d.L = (int)c->num_layers;
    d.I = c->intermediate_size;
    d.eps = (float)c->rms_norm_eps;
    d.layer_cache = (size_t)d.kvh * (size_t)s->max_seq * (size_t)d.hd;
    d.attn_bytes = 4.0 * (double)(s->pos + 1) * d.kvh * d.hd +
                   2.0 * (double)(d.heads + 4 * d.kvh + d.heads) * d.hd;
    return d;
}

/* The fused decode step (decode_fused.cu): one row, final, resident fused weights of groups of
 * 128, the fused attention; RMSNorm folded into the matvecs that read the normed rows, the
 * residual adds into the o and down matvecs, SwiGLU into gate|up: five kernels a layer. */
bool llm_decode_fusable(const qmm_llm_cuda_session *s);
/* The attention + o kernel (attention_o_fused.cu) takes every layer of s's fused decode step:
 * its shapes, one GPU, weights resident (decode_fused.cu). */
bool llm_attention_o_fusable(const qmm_llm_cuda_session *s);

/* From this many tokens a forward the default prefill attention (prefill_wgmma 3) takes the
 * pipelined schedule: it was 1.6-4.5 % slower at 128-256 tokens, even at 512 and 0.5-3.7 % faster
 * from 1 024 (bench/NOTES.md rows 185-186, an H100). A prefill forward's graph is captured per
 * row count, so the choice goes by the forward's rows, not by the positions before them. */
#define LLM_PREFILL_PIPE_MIN_M 1024
static inline bool llm_prefill_pipelined(const qmm_llm_cuda_session *s, int m)
{
    return s->prefill_wgmma == 2 || (s->prefill_wgmma == 3 && m >= LLM_PREFILL_PIPE_MIN_M);
}
qmm_status llm_cuda_decode_fused(qmm_llm_cuda_session *s, llm_prof *prof);
/* The persistent decode step (decode_persistent.cu): one kernel for every layer and the head,
 * between the embedding and the argmax. create checks the session can take it (resident fused
 * weights of groups of 128, one GPU) and allocates its state into s->pd. */
qmm_status llm_persistent_create(qmm_llm_cuda_session *s);
void llm_persistent_destroy(qmm_llm_cuda_session *s);
qmm_status llm_cuda_decode_persistent(qmm_llm_cuda_session *s, llm_prof *prof);
/* One matvec of a fused step (decode_fused.cu): w's arrays into p (m = 1), launched with the
 * context's SM count, PDL when asked. */
namespace qmm { struct MatvecArgs; }
qmm_status llm_fused_matvec(qmm_llm_cuda_session *s, qmm::MatvecArgs p, const qmm_cuda_weight *w,
                            const char *name, bool pdl);
/* A fused-step matvec that reads the normed row s->h (decode_fused.cu): with fold, the RMSNorm
 * scale comes from the residual's Σx² per 16-row tile (s->d_ss); without (layer 0, whose input
 * norm is a kernel of its own) h is already normed. The caller sets the epilogue and output. */
qmm::MatvecArgs llm_fused_normed_input(const qmm_llm_cuda_session *s, bool fold);
/* Layer l's fused decode attention (qk-norm, RoPE, cache append, split-KV) on s->q|k|v into
 * s->att, launched as ln says. */
cudaError_t llm_fused_attention(qmm_llm_cuda_session *s, int64_t l, const qmm_llm::llm_launch *ln);
/* The same step in a tensor-parallel session (decode_fused_tp.cu): column-parallel q|k|v and
 * gate|up, row-parallel o and down into fp32 partials, their all-reduce, then one residual-add
 * kernel that leaves the next norm folded into the next matvec. */
qmm_status llm_tp_decode_fused(qmm_llm_cuda_session *s, llm_prof *prof);
/* forward.cu's helpers: an eager-profile event; how the next engine kernel launches (PDL,
 * in-graph timestamp slot); a matmul's bytes for the in-graph profile. */
void llm_mark(llm_prof *p, cudaStream_t stream, const char *name);
const qmm_llm::llm_launch *llm_launch_as(qmm_llm_cuda_session *s, qmm_llm::llm_launch *ln, const char *name,
                                double bytes);
void llm_note_matmul(qmm_llm_cuda_session *s, int m, const qmm_cuda_weight *w, const char *name);
/* Unstamped work (a collective) of `bytes` before the next stamped kernel, profiled as `name`. */
void llm_note_unstamped(qmm_llm_cuda_session *s, const char *name, double bytes);
/* A decode matvec's in-graph timestamp slot (MatvecArgs::stamp), noted with its name and bytes;
 * NULL outside a stamped capture. */
unsigned long long *llm_stamp_matvec(qmm_llm_cuda_session *s, const qmm_cuda_weight *w, const char *name);
/* The final forward's greedy token (two-stage argmax, launched as llm_launch_as says); the device
 * position advances by m. */
cudaError_t llm_launch_argmax(qmm_llm_cuda_session *s, int m);

/* Wait for the session's stream; under tensor parallelism with the collectives' timeout. */
qmm_status llm_sync(qmm_llm_cuda_session *s);

/* The forward of m rows at device position pos (the host's count of it) through a cached graph
 * (capturing it the first time; a decode step: the graph of its context's bucket) or eagerly. */
qmm_status llm_cuda_run_forward(qmm_llm_cuda_session *s, int m, int final, int64_t pos);

/* Capture llm_cuda_forward(m, final) into an executable graph; kernel_nodes (may be NULL)
 * receives the number of kernels in it. */
qmm_status llm_cuda_capture(qmm_llm_cuda_session *s, int m, int final, cudaGraphExec_t *out,
                            int *kernel_nodes);
/* The same for the decode step with the fused attention launched at `splits` splits (the
 * session's nsplit_fused, or a bucket's); eager forwards keep nsplit_fused. */
qmm_status llm_cuda_capture_decode(qmm_llm_cuda_session *s, int splits, cudaGraphExec_t *out,
                                   int *kernel_nodes);
/* The attention splits of the decode graph the step of the row at pos replays (decode_bucket.h). */
int llm_decode_splits_of_step(const qmm_llm_cuda_session *s, int64_t pos);
/* Destroy decode_graph and every bucket's graph (session teardown, a TP abort). */
void llm_destroy_decode_graphs(qmm_llm_cuda_session *s);

/* Shared by run.cu and graph_profile.cu: tokens into the device history at the current
 * position, and the prefill forwards of n tokens already there. */
qmm_status llm_put_ids(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n);
qmm_status llm_enqueue_prefill(qmm_llm_cuda_session *s, int64_t n);
qmm_status llm_check_ids(const qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                         int64_t extra);

#endif
