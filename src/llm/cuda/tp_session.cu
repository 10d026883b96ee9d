/*
 * A tensor-parallel session (tp.h) and the forward's collectives (tp_session.h).
 *
 * Megatron-style: a rank's shard model has its query / KV heads and its MLP slice, so the
 * engine's unfused forward runs on it unchanged except at four points:
 *   - the embedding: each rank looks up only its vocabulary rows (zeros elsewhere) and an fp32
 *     all-reduce of the residual rows assembles the lookup, exactly (one rank contributes each);
 *   - after o and after down: an NCCL all-reduce (sum) of the partial products, before the
 *     residual add. Decode (and chunks of up to TP_F32_ROWS rows): the matvec writes each
 *     rank's partial in fp32, the all-reduce sums fp32, and the residual add rounds the sum to
 *     bf16 once, as the single-GPU projection rounds its output: t = 2 then differs from t = 1
 *     only by the fp32 summation order (bf16 partials round each partial and the sum, three
 *     roundings for one; on synthetic Qwen3-8B weights, 36 layers, the CPU simulation gives
 *     1.37e-2 with bf16 partials, 0.95e-2 to 1.09e-2 with fp32: test_tp_forward.c says why
 *     not less; the fp32 all-reduce of one decode row is 16 KB, latency-bound like the 8 KB
 *     bf16 one).
 *     Longer prefill chunks keep bf16 partials (the GEMM paths write bf16);
 *   - the head: each rank writes its vocabulary slice of the logits into the full logits
 *     buffer, an in-place all-gather completes it, and the unchanged argmax runs on the whole
 *     vocabulary on every rank (same token everywhere; ties resolve as at t = 1).
 * Decode takes the fused step when it applies (decode_fused_tp.cu: the residual add moves
 * out of the row-parallel matvecs into one kernel after the all-reduce, the norm stays folded
 * into the column-parallel ones; its kernels launch with PDL, see there why that is safe next
 * to NCCL's). The unfused forward (prefill, and decode with fuse_projections = 0) launches
 * plainly.
 * Every collective is enqueued on the session's stream, so the decode step's CUDA graph
 * captures them with the kernels.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels.h"
#include "llm/cuda/session.h"
#include "llm/cuda/tp_session.h"
#include "llm/model.h"
#include "w4_layout.h"

// x [m, k] fp32 = rows of the vocabulary shard [lo, lo + n) of the embedding, zeros for ids
// outside it; an id outside [0, vocab) sets *err (as the single-GPU lookup).
__global__ void tp_embed_kernel(const uint32_t *__restrict__ packed,
                                const uint32_t *__restrict__ sb, int n, int n_pad, int k,
                                int gshift, int64_t lo, int64_t vocab,
                                const int32_t *__restrict__ ids, const int32_t *__restrict__ pos,
                                float *__restrict__ x, int32_t *err)
{
    const int r = blockIdx.x;
    const int64_t id = ids[*pos + r], row = id - lo;
    float *out = x + (int64_t)r * k;
    if (id < 0 || id >= vocab) {
        if (threadIdx.x == 0) *err = 1;
    }
    if (row < 0 || row >= n) {
        for (int j = threadIdx.x; j < k; j += blockDim.x) out[j] = 0.0f;
        return;
    }
    qmm_w4_device_row_f32(packed, sb, row, k, gshift, n_pad, out);
}

qmm_status llm_tp_embed(qmm_llm_cuda_session *s, int m)
{
    const qmm::DevWeight &w = qmm::weight_dev(s->embed);
    const int gshift = w.group == 32 ? 5 : w.group == 64 ? 6 : w.group == 128 ? 7 : 0;
    if (!gshift) return qmm_fail(QMM_ERR_UNSUPPORTED, "embedding group %d", w.group);
    tp_embed_kernel<<<m, 256, 0, s->stream>>>(w.packed, w.sb, (int)w.n, (int)w.n_pad, (int)w.k,
                                               gshift, s->tp->vocab_lo, s->cfg.vocab_size,
                                               s->d_tokens, s->d_pos, s->x, s->d_err);
    QMM_CUDA_TRY(cudaGetLastError());
    return tp_comm_allreduce(s->tp->comm, s->x, (size_t)m * (size_t)s->cfg.hidden_size, 1,
                             s->stream);
}

qmm_status llm_tp_allreduce(qmm_llm_cuda_session *s, void *buf, size_t count)
{
    return tp_comm_allreduce(s->tp->comm, buf, count, 0, s->stream);
}

float *llm_tp_f32_out(qmm_llm_cuda_session *s, int m, const qmm_cuda_weight *w)
{
    if (!s->tp || !s->tp->y32 || m > TP_F32_ROWS) return NULL;
    const qmm::DevWeight &d = qmm::weight_dev(w);
    if (d.n != s->cfg.hidden_size || d.k % 128 || d.n_pad % 128) return NULL;
    return s->tp->y32;
}

qmm_status llm_tp_project_f32(qmm_llm_cuda_session *s, const qmm_llm::bf16 *a, int m,
                              const qmm_cuda_weight *w, float *y32, const char *name)
{
    qmm::MatvecArgs p = qmm::matvec_args(qmm::weight_dev(w));
    p.a = a;
    p.lda = p.k;
    p.m = m;
    p.epi = qmm::MV_EPI_STORE_F32;
    p.x = y32;
    p.ldc = p.n;
    llm_note_matmul(s, m, w, name);
    cudaError_t e = qmm::launch_matvec_ex(p, qmm::matvec_scratch(s->ctx), s->pdl != 0,
                                          s->stream);
    if (e != cudaSuccess)
        return qmm_fail(QMM_ERR_CUDA, "%s (fp32 partial matvec, %d rows): %s", name, m,
                        cudaGetErrorString(e));
    return QMM_OK;
}

qmm_status llm_tp_allreduce_f32(qmm_llm_cuda_session *s, float *y32, size_t count)
{
    return tp_comm_allreduce(s->tp->comm, y32, count, 1, s->stream);
}

qmm_status llm_tp_usable(const qmm_llm_cuda_session *s)
{
    if (s->tp && tp_comm_aborted(s->tp->comm))
        return qmm_fail(QMM_ERR_COMM, "rank %d: the tensor-parallel communicator was aborted "
                        "after a failed collective; the session cannot run", s->tp->rank);
    return QMM_OK;
}

qmm_status llm_tp_sync(qmm_llm_cuda_session *s)
{
    qmm_status st = llm_tp_usable(s);
    if (st) return st;
    if (!(st = tp_comm_sync(s->tp->comm, s->stream))) return QMM_OK;
    /* every graph that captured a collective goes first (an in-flight one is freed when it
     * ends, which the abort lets it do), then the bounded abort; the message stays the wait's */
    llm_destroy_decode_graphs(s);
    for (int i = 0; i < s->ngraphs; i++) cudaGraphExecDestroy(s->graphs[i].exec);
    s->ngraphs = 0, s->next_evict = 0;
    tp_comm_abort(s->tp->comm);
    return st;
}

qmm_status llm_tp_alloc_y32(qmm_llm_cuda_session *s, size_t count)
{
    void *p = NULL;
    qmm_status st = tp_comm_symmetric_buffer(s->tp->comm, count * sizeof(float), &p);
    if (st) return st;
    if (p) {
        s->tp->y32 = (float *)p;
        s->tp->y32_symmetric = 1;
        return QMM_OK;
    }
    if (cudaMalloc(&p, count * sizeof(float)) != cudaSuccess)
        return qmm_fail(QMM_ERR_NOMEM, "tensor-parallel fp32 partials: %zu bytes of device memory",
                        count * sizeof(float));
    s->tp->y32 = (float *)p;
    return QMM_OK;
}

void llm_tp_release(qmm_llm_cuda_session *s)
{
    if (!s->tp) return;
    if (s->tp->y32_symmetric) tp_comm_symmetric_return(s->tp->comm, s->tp->y32);
    else if (s->tp->y32 && !tp_comm_aborted(s->tp->comm)) cudaFree(s->tp->y32);
    free(s->tp);
    s->tp = NULL;
}

void *llm_tp_head_out(qmm_llm_cuda_session *s)
{
    return s->logits + (size_t)s->tp->rank * (size_t)s->tp->vocab_count;
}

qmm_status llm_tp_gather_logits(qmm_llm_cuda_session *s)
{
    return tp_comm_allgather_bf16(s->tp->comm, s->logits, (size_t)s->tp->vocab_count, s->stream);
}

extern "C" int tp_session_decode_fused(const qmm_llm_cuda_session *s)
{
    return s && llm_decode_fusable(s);
}

extern "C" qmm_status tp_session_create(const qmm_llm_model *shard, int64_t max_seq,
                                        const qmm_llm_cuda_options *opt, tp_comm *comm,
                                        qmm_llm_cuda_session **out)
{
    if (!shard || !comm || !out) return qmm_fail(QMM_ERR_NULL, "tp_session_create: NULL argument");
    *out = NULL;
    const qmm_llm_config *c = &shard->cfg;
    const int t = tp_comm_ranks(comm), r = tp_comm_rank(comm);
    qmm_llm_cuda_options o = opt ? *opt : qmm_llm_cuda_options_default();
    if (o.offload_weights)
        return qmm_fail(QMM_ERR_UNSUPPORTED, "tensor parallelism with weight streaming");
    /* the shard's vocabulary rows: equal parts (tp_shard_model checked t | vocab) */
    if (c->vocab_size % t || shard->lm_head.n != c->vocab_size / t ||
        shard->embed.n != c->vocab_size / t)
        return qmm_fail(QMM_ERR_ARG, "tp_session_create: the model is not a shard of %d ranks "
                        "(head %lld rows, embedding %lld rows, vocabulary %lld)", t,
                        (long long)shard->lm_head.n, (long long)shard->embed.n,
                        (long long)c->vocab_size);
    llm_tp *tp = (llm_tp *)calloc(1, sizeof *tp);
    if (!tp) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    tp->comm = comm, tp->rank = r, tp->ranks = t;
    tp->vocab_count = c->vocab_size / t;
    tp->vocab_lo = (int64_t)r * tp->vocab_count;
    o.device = tp_comm_device(comm);
    tp->pdl = o.pdl != 0;
    o.pdl = 0;
    return llm_cuda_session_make(shard, max_seq, &o, tp, out);
}
