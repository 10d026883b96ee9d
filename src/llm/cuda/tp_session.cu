/*
 * A tensor-parallel session (tp.h) and the forward's collectives (tp_session.h).
 *
 * Megatron-style: a rank's shard model has its query / KV heads and its MLP slice, so the
 * engine's unfused forward runs on it unchanged except at four points:
 *   - the embedding: each rank looks up only its vocabulary rows (zeros elsewhere) and an fp32
 *     all-reduce of the residual rows assembles the lookup, exactly (one rank contributes each);
 *   - after o and after down: an NCCL all-reduce (sum) of the bf16 partial products, before the
 *     residual add. bf16, not fp32: half the bytes on the critical path of every layer, and the
 *     engine's projections already round their outputs to bf16 (at t = 2 the sum of two bf16
 *     partials is rounded once more, the only arithmetic difference from t = 1);
 *   - the head: each rank writes its vocabulary slice of the logits into the full logits
 *     buffer, an in-place all-gather completes it, and the unchanged argmax runs on the whole
 *     vocabulary on every rank (same token everywhere; ties resolve as at t = 1).
 * The fused decode step (RMSNorm and the residual add folded into the matvecs) needs the whole
 * residual inside the matvec's epilogue, so a TP session takes the unfused step; PDL is off
 * (a programmatic edge into or out of an NCCL kernel is not something we can rely on).
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
    const int blocks = k / 128;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        int word, bit;
        qmm_w4_device_position(j % 128, &word, &bit);
        const uint32_t q = (packed[qmm_w4_device_offset(row, j / 128, blocks) + word] >> bit) & 0xFu;
        const uint32_t v = sb[(int64_t)(j >> gshift) * n_pad + row];
        out[j] = __fmaf_rn(qmm::bf16_lo(v), (float)q, qmm::bf16_hi(v));
    }
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

void *llm_tp_head_out(qmm_llm_cuda_session *s)
{
    return s->logits + (size_t)s->tp->rank * (size_t)s->tp->vocab_count;
}

qmm_status llm_tp_gather_logits(qmm_llm_cuda_session *s)
{
    return tp_comm_allgather_bf16(s->tp->comm, s->logits, (size_t)s->tp->vocab_count, s->stream);
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
    o.pdl = 0;
    return llm_cuda_session_make(shard, max_seq, &o, tp, out);
}
