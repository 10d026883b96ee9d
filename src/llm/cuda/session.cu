/*
 * CUDA session setup: weights uploaded once (or, with offload_weights, the layers' images kept
 * in pinned host memory and streamed per forward: offload.cu), the bf16 KV cache, every scratch
 * buffer and the matmul workspace allocated here (never later), one eager warm-up step, and the
 * decode step captured as a CUDA graph.
 */
#include <stdlib.h>
#include <string.h>

#include "llm/cpu_ops.h"
#include "llm/cuda/session.h"

using namespace qmm_llm;

template <typename T>
static qmm_status dev_alloc(T **p, size_t count, const char *what)
{
    size_t bytes;
    if (!qmm_mul_size(count ? count : 1, sizeof(T), &bytes))
        return qmm_fail(QMM_ERR_OVERFLOW, "%s: size overflows", what);
    cudaError_t e = cudaMalloc((void **)p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return qmm_fail(e == cudaErrorMemoryAllocation ? QMM_ERR_NOMEM : QMM_ERR_CUDA,
                        "cudaMalloc of %zu bytes for %s: %s", bytes, what, cudaGetErrorString(e));
    }
    return QMM_OK;
}

static qmm_status upload(void *dst, const void *src, size_t bytes)
{
    QMM_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return QMM_OK;
}

extern "C" void qmm_llm_cuda_session_destroy(qmm_llm_cuda_session *s)
{
#ifdef QMM_AD_TRACE
    if (s) qmm_llm::attention_decode_trace_print(); /* the last decode attention's phases */
#endif
    if (!s) return;
    if (s->tp && s->stream && llm_sync(s)) {
        /* aborted (now, after the bounded wait, or before): a collective of the stream may never
         * end, any other wait on the device could hang, and the process is about to exit, so
         * only the host side goes */
        llm_tp_release(s);
        free(s->layers), free(s);
        return;
    }
    llm_tp_release(s);
    cudaSetDevice(s->device);
    if (s->stream) cudaStreamSynchronize(s->stream);
    llm_destroy_decode_graphs(s);
    for (int i = 0; i < s->ngraphs; i++) cudaGraphExecDestroy(s->graphs[i].exec);
    llm_offload_destroy(s);
    llm_persistent_destroy(s);
    if (s->layers) {
        for (int64_t l = 0; l < s->cfg.num_layers; l++) {
            for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) qmm_cuda_weight_free(s->layers[l].lin[i]);
            qmm_cuda_weight_free(s->layers[l].qkv);
            qmm_cuda_weight_free(s->layers[l].gate_up);
        }
        free(s->layers);
    }
    if (s->embed != s->head) qmm_cuda_weight_free(s->embed);
    qmm_cuda_weight_free(s->head);
    void *bufs[] = {s->norm_buf, s->cos_t, s->sin_t,
                    s->kc, s->vc, s->d_pos, s->d_tokens, s->d_err, s->x, s->h, s->q,
                    s->fuse ? NULL : s->k, s->fuse ? NULL : s->v, s->att, s->proj, s->gate,
                    s->fuse ? NULL : s->up, s->act == s->gate ? NULL : s->act, s->logits,
                    s->partials, s->ws, s->counters, s->pair_v, s->pair_i, s->d_stamps};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    if (s->h_logits) cudaFreeHost(s->h_logits);
    if (s->h_tokens) cudaFreeHost(s->h_tokens);
    for (int i = 0; i < 3; i++)
        if (s->ev[i]) cudaEventDestroy(s->ev[i]);
    qmm_cuda_destroy(s->ctx);
    if (s->stream) cudaStreamDestroy(s->stream);
    free(s);
}

/* Splits of the reference decode attention (attention_ref): one range per ~128 cached positions
 * (at most 32), so a long context spreads over kv_heads x nsplit blocks; short contexts need no
 * combine kernel. The default fused kernel sizes its own (attention_decode_splits). */
static int decode_splits(int64_t max_seq)
{
    if (max_seq <= 128) return 1;
    int64_t n = (max_seq + 127) / 128;
    return n > 32 ? 32 : (int)n;
}

static qmm_status upload_stacked(qmm_llm_cuda_session *s, const qmm_w4 *const *parts, int n,
                                 int64_t chunk, qmm_cuda_weight **out)
{
    qmm_w4 w;
    qmm_status st = llm_stack_w4_chunked(parts, n, chunk, &w);
    if (st) return st;
    st = qmm_cuda_weight_upload(s->ctx, &w, out);
    qmm_w4_free(&w);
    return st;
}

static qmm_status upload_weights(qmm_llm_cuda_session *s)
{
    const qmm_llm_model *m = s->m;
    const qmm_llm_config *c = &s->cfg;
    qmm_status st;
    s->layers = (llm_cuda_layer *)calloc((size_t)c->num_layers, sizeof *s->layers);
    if (!s->layers) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    /* streamed layers live in the host images and the slots (llm_offload_create) instead */
    for (int64_t l = 0; l < c->num_layers && !s->off; l++) {
        const qmm_w4 *lin = m->layers[l].lin;
        for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
            if (s->fuse && i != QMM_LLM_O && i != QMM_LLM_DOWN) continue;
            if ((st = qmm_cuda_weight_upload(s->ctx, &lin[i], &s->layers[l].lin[i]))) return st;
        }
        if (s->fuse) {
            const qmm_w4 *qkv[3] = {&lin[QMM_LLM_Q], &lin[QMM_LLM_K], &lin[QMM_LLM_V]};
            const qmm_w4 *gu[2] = {&lin[QMM_LLM_GATE], &lin[QMM_LLM_UP]};
            if ((st = upload_stacked(s, qkv, 3, 0, &s->layers[l].qkv)) ||
                (st = upload_stacked(s, gu, 2, llm_gate_up_chunk(c), &s->layers[l].gate_up)))
                return st;
        }
        qmm_progress("uploading weights", (double)(l + 1), (double)c->num_layers);
    }
    if ((st = qmm_cuda_weight_upload(s->ctx, &m->lm_head, &s->head))) return st;
    /* embedding lookups dequantize rows of the uploaded weight: a tied model's head is its
     * embedding, so no second copy (Qwen3-4B: 206.6 MB less device memory) */
    if (c->tie_word_embeddings) s->embed = s->head;
    else if ((st = qmm_cuda_weight_upload(s->ctx, &m->embed, &s->embed))) return st;
    /* norms: per layer [input H][post H][q hd][k hd], then the final [H] */
    size_t per = (size_t)(2 * c->hidden_size + 2 * c->head_dim);
    size_t total = per * (size_t)c->num_layers + (size_t)c->hidden_size;
    if ((st = dev_alloc(&s->norm_buf, total, "norm weights"))) return st;
    size_t off = 0;
    for (int64_t l = 0; l < c->num_layers; l++)
        for (int i = 0; i < QMM_LLM_NORM_COUNT; i++) {
            size_t n = (size_t)llm_norm_len(c, (qmm_llm_norm)i);
            s->layers[l].norm[i] = s->norm_buf + off;
            if ((st = upload(s->norm_buf + off, m->layers[l].norm[i], n * 2))) return st;
            off += n;
        }
    s->final_norm = s->norm_buf + off;
    return upload(s->final_norm, m->final_norm, (size_t)c->hidden_size * 2);
}

static qmm_status alloc_scratch(qmm_llm_cuda_session *s)
{
    const qmm_llm_config *c = &s->cfg;
    size_t ch = (size_t)s->chunk, H = (size_t)c->hidden_size, hd = (size_t)c->head_dim;
    size_t qd = (size_t)c->num_heads * hd, kvd = (size_t)c->num_kv_heads * hd;
    size_t I = (size_t)c->intermediate_size;
    size_t cache = (size_t)c->num_layers * (size_t)c->num_kv_heads * (size_t)s->max_seq * hd;
    qmm_status st;
    if ((st = dev_alloc(&s->kc, cache, "K cache")) || (st = dev_alloc(&s->vc, cache, "V cache")) ||
        (st = dev_alloc(&s->d_pos, 1, "position")) ||
        (st = dev_alloc(&s->d_tokens, (size_t)s->max_seq + 1, "token history")) ||
        (st = dev_alloc(&s->d_err, 1, "error flag")) ||
        (st = dev_alloc(&s->x, ch * H, "residual")) || (st = dev_alloc(&s->h, ch * H, "normed")) ||
        (st = dev_alloc(&s->att, ch * qd, "attention")) ||
        (st = dev_alloc(&s->proj, ch * H, "projection")) ||
        (st = dev_alloc(&s->logits, (size_t)c->vocab_size, "logits")) ||
        (st = dev_alloc(&s->partials,
                        (size_t)c->num_heads *
                            (size_t)(s->nsplit > s->nsplit_fused ? s->nsplit : s->nsplit_fused) *
                            (hd + 2),
                        "attention partials")) ||
        (st = dev_alloc(&s->counters, (size_t)c->num_kv_heads, "attention split counters")) ||
        (st = dev_alloc(&s->pair_v, (size_t)s->npairs, "argmax pairs")) ||
        (st = dev_alloc(&s->pair_i, (size_t)s->npairs, "argmax pairs")) ||
        (st = dev_alloc(&s->d_stamps, (size_t)LLM_STAMP_SLOTS * 4, "profile timestamps")) ||
        (st = dev_alloc(&s->d_ss, (size_t)(H + 15) / 16, "RMSNorm partial sums")) ||
        (s->tp && (st = llm_tp_alloc_y32(s, (size_t)TP_F32_ROWS * H))))
        return st;
    /* zero from here on: every launch of the fused decode attention leaves them at zero */
    QMM_CUDA_TRY(cudaMemset(s->counters, 0, (size_t)c->num_kv_heads * sizeof(int)));
    if (s->fuse) {
        /* one [chunk, q + 2 kv] and one [chunk, 2 I] output; SwiGLU writes a separate [chunk, I] */
        if ((st = dev_alloc(&s->q, ch * (qd + 2 * kvd), "q|k|v")) ||
            (st = dev_alloc(&s->gate, ch * 2 * I, "gate|up")) ||
            (st = dev_alloc(&s->act, ch * I, "swiglu")))
            return st;
        s->k = s->q + qd;
        s->v = s->q + qd + kvd;
        s->gu_chunk = llm_gate_up_chunk(c);
        s->up = s->gate + (s->gu_chunk ? s->gu_chunk : (int64_t)I);
        s->q_stride = s->kv_stride = (int64_t)(qd + 2 * kvd);
        s->gu_stride = (int64_t)(2 * I);
    } else {
        if ((st = dev_alloc(&s->q, ch * qd, "q")) || (st = dev_alloc(&s->k, ch * kvd, "k")) ||
            (st = dev_alloc(&s->v, ch * kvd, "v")) || (st = dev_alloc(&s->gate, ch * I, "gate")) ||
            (st = dev_alloc(&s->up, ch * I, "up")))
            return st;
        s->act = s->gate; /* SwiGLU in place */
        s->q_stride = (int64_t)qd;
        s->kv_stride = (int64_t)kvd;
        s->gu_stride = (int64_t)I;
    }
    /* the cache starts as zeros, so nothing ever reads uninitialised bits */
    QMM_CUDA_TRY(cudaMemset(s->kc, 0, cache * 2));
    QMM_CUDA_TRY(cudaMemset(s->vc, 0, cache * 2));
    QMM_CUDA_TRY(cudaMemset(s->d_pos, 0, 4));
    QMM_CUDA_TRY(cudaMemset(s->d_err, 0, 4));
    QMM_CUDA_TRY(cudaMemset(s->d_tokens, 0, ((size_t)s->max_seq + 1) * 4));
    QMM_CUDA_TRY(cudaMallocHost((void **)&s->h_logits, (size_t)c->vocab_size * 2));
    QMM_CUDA_TRY(cudaMallocHost((void **)&s->h_tokens, ((size_t)s->max_seq + 1) * 4));
    for (int i = 0; i < 3; i++) QMM_CUDA_TRY(cudaEventCreate(&s->ev[i]));
    return QMM_OK;
}

/* The workspace the largest projection call needs, over every row count a forward may use. */
static qmm_status size_workspace(qmm_llm_cuda_session *s)
{
    const qmm_llm_config *c = &s->cfg;
    size_t need = 0;
    for (int64_t mrows = 1; mrows <= s->chunk; mrows++) {
        qmm_cuda_options o = qmm_cuda_options_default();
        if (!s->split_k) o.split = 1;
        for (int i = 0; i <= QMM_LLM_LINEAR_COUNT + 1; i++) {
            int64_t n = c->vocab_size, k = c->hidden_size;
            if (i < QMM_LLM_LINEAR_COUNT) qmm_llm_linear_shape(c, (qmm_llm_linear)i, &n, &k);
            else if (i == QMM_LLM_LINEAR_COUNT + 1) { /* the fused shapes */
                if (!s->fuse) continue;
                int64_t n2, k2;
                qmm_llm_linear_shape(c, QMM_LLM_GATE, &n2, &k2);
                size_t b = 0;
                qmm_status st = qmm_cuda_workspace_size(s->ctx, mrows, 2 * n2, k2, &o, &b);
                if (st) return st;
                if (b > need) need = b;
                n = (c->num_heads + 2 * c->num_kv_heads) * c->head_dim;
            } else if (mrows > 1) continue; /* the head runs on one row */
            size_t b = 0;
            qmm_status st = qmm_cuda_workspace_size(s->ctx, mrows, n, k, &o, &b);
            if (st) return st;
            if (b > need) need = b;
        }
    }
    s->ws_bytes = need;
    return dev_alloc((unsigned char **)&s->ws, need ? need : 256, "matmul workspace");
}

/* Group sizes (32, 64, 128: the loader's rule; every kernel takes each) decide one thing:
 * projections stack into one weight only with one group size (q|k|v, gate|up). */
static int llm_cuda_stackable(const qmm_llm_model *m)
{
    for (int64_t l = 0; l < m->cfg.num_layers; l++) {
        const qmm_w4 *lin = m->layers[l].lin;
        if (lin[QMM_LLM_K].group != lin[QMM_LLM_Q].group ||
            lin[QMM_LLM_V].group != lin[QMM_LLM_Q].group ||
            lin[QMM_LLM_UP].group != lin[QMM_LLM_GATE].group)
            return 0;
    }
    return 1;
}

void llm_destroy_decode_graphs(qmm_llm_cuda_session *s)
{
    if (s->decode_graph) cudaGraphExecDestroy(s->decode_graph);
    s->decode_graph = NULL;
    for (int i = 0; i < LLM_DECODE_BUCKETS; i++) {
        if (s->bucket_graph[i]) cudaGraphExecDestroy(s->bucket_graph[i]);
        s->bucket_graph[i] = NULL;
    }
    s->nbuckets = 0;
}

/* The cluster-merged decode attention (attention_decode_cluster.cu) instead of the fused kernel's
 * global-memory merge, wherever a step has several splits and the device holds the clusters: an
 * experiment, correct and slower where measured (bench/NOTES.md row 177: −1.2 / −4.4 % decode at
 * 128 / 2 048 positions), on only with QMM_DECODE_ATTN=cluster. The full
 * decode graph and the buckets of 4 splits and more launch it (clusters of half their splits:
 * bit for bit the full graph where each is replayed, as the fused kernel's buckets are); the
 * one-split bucket keeps the fused kernel's one-head blocks (the cluster kernel's one-split path
 * is the same code, for the eager step). Not for the persistent step or the reference
 * attention. */
static int want_cluster_attention(const qmm_llm_cuda_options *o)
{
    const char *e = getenv("QMM_DECODE_ATTN");
    return e && !strcmp(e, "cluster") && !o->persistent_decode && !o->attention_ref;
}

/* The decode attention and the o matvec in one kernel (attention_o_fused.cu; bench/NOTES.md row
 * 202): an experiment, on only with QMM_DECODE_ATTN_O=fused, for a session whose fused attention
 * has one split (max_seq <= 128 positions), so that its eager steps and every decode graph take it
 * alike (its o sums run in another order than the o matvec's); one GPU, weights resident, the
 * fused step, and shapes the kernel takes (llm_attention_o_fusable, after the weights' upload). */
static int want_attention_o_fused(const qmm_llm_cuda_options *o)
{
    const char *e = getenv("QMM_DECODE_ATTN_O");
    return e && !strcmp(e, "fused") && !o->persistent_decode && !o->attention_ref && !o->offload_weights;
}

/* The warpgroup-MMA prefill attention (attention_prefill_wgmma.cu) instead of the mma.sync
 * kernel where it runs (hd 128, compute capability 9.0). By default (3) its tile-at-a-time
 * schedule below LLM_PREFILL_PIPE_MIN_M tokens a forward and the pipelined one from there
 * (session.h); QMM_PREFILL_ATTN=mma (0) takes the mma.sync kernel, =wgmma (1) the tile-at-a-time
 * schedule and =wgmma_pipe (2) the pipelined one at every length. Not with the reference
 * attention. */
static int want_wgmma_prefill(const qmm_llm_cuda_options *o, int hd)
{
    const char *e = getenv("QMM_PREFILL_ATTN");
    if (o->attention_ref || !attention_prefill_wgmma_supported(hd)) return 0;
    if (!e) return 3;
    return !strcmp(e, "mma")          ? 0
           : !strcmp(e, "wgmma")      ? 1
           : !strcmp(e, "wgmma_pipe") ? 2
                                      : 3;
}

/* The decode step's graphs: the full one, and one per context bucket (decode_bucket.h) when the
 * step runs the fused attention (the persistent step sizes its own splits; attention_ref runs
 * the reference kernels). Tensor-parallel sessions too: every rank counts the same positions,
 * so all replay the same bucket, and each graph holds the same collectives in the same order.
 * All captured here rather than on first use: a capture (a node a launch) taken lazily would
 * stall a generation the first time its context crosses into a bucket, and land in a
 * benchmark's timed decode; the cost is at most LLM_DECODE_BUCKETS more graphs held, and their
 * captures at creation (not timed alone: bench/NOTES.md row 151). */
static qmm_status capture_decode_graphs(qmm_llm_cuda_session *s)
{
    qmm_status st = llm_cuda_capture_decode(s, s->nsplit_fused, &s->decode_graph, NULL);
    if (st || s->pd || s->attention_ref) return st;
    int splits[LLM_DECODE_BUCKETS];
    const int n = llm_decode_buckets(s->nsplit_fused, splits);
    for (int i = 0; i < n; i++) {
        if ((st = llm_cuda_capture_decode(s, splits[i], &s->bucket_graph[i], NULL))) return st;
        s->bucket_splits[i] = splits[i];
        s->nbuckets = i + 1;
    }
    return QMM_OK;
}

extern "C" int llm_cuda_decode_buckets(const qmm_llm_cuda_session *s)
{
    return s ? s->nbuckets : 0;
}

extern "C" int llm_cuda_decode_cluster_splits(const qmm_llm_cuda_session *s)
{
    return s && s->attn_cluster ? s->nsplit_fused : 0;
}

extern "C" qmm_status qmm_llm_cuda_session_create(const qmm_llm_model *m, int64_t max_seq,
                                                  const qmm_llm_cuda_options *opt,
                                                  qmm_llm_cuda_session **out)
{
    return llm_cuda_session_make(m, max_seq, opt, NULL, out);
}

qmm_status llm_sync(qmm_llm_cuda_session *s)
{
    if (s->tp) return llm_tp_sync(s);
    QMM_CUDA_TRY(cudaStreamSynchronize(s->stream));
    return QMM_OK;
}

/* The arguments a session refuses before anything is allocated. */
static qmm_status check_make(const qmm_llm_config *c, int64_t max_seq, const qmm_llm_cuda_options *o)
{
    if (max_seq < 1 || max_seq > c->max_position_embeddings || max_seq > INT32_MAX - 1)
        return qmm_fail(QMM_ERR_RANGE, "max_seq = %lld must be in [1, max_position_embeddings = %lld]",
                        (long long)max_seq, (long long)c->max_position_embeddings);
    int group = (int)(c->num_heads / c->num_kv_heads);
    if (!attention_supported((int)c->head_dim, group))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "the CUDA attention handles head_dim 64 or 128 with "
                        "1, 2, 4, 5 or 8 query heads per KV head (got %lld, %d)",
                        (long long)c->head_dim, group);
    if (o->max_chunk < 0) return qmm_fail(QMM_ERR_ARG, "max_chunk = %lld", (long long)o->max_chunk);
    if (o->offload_weights && o->offload_buffers < 1)
        return qmm_fail(QMM_ERR_ARG, "offload_buffers = %d: weight streaming needs at least one "
                        "device layer slot", o->offload_buffers);
    return QMM_OK;
}

qmm_status llm_cuda_session_make(const qmm_llm_model *m, int64_t max_seq,
                                 const qmm_llm_cuda_options *opt, llm_tp *tp,
                                 qmm_llm_cuda_session **out)
{
    if (!m || !out) {
        free(tp);
        return qmm_fail(QMM_ERR_NULL, "qmm_llm_cuda_session_create: NULL argument");
    }
    *out = NULL;
    qmm_llm_cuda_options o = opt ? *opt : qmm_llm_cuda_options_default();
    const qmm_llm_config *c = &m->cfg;
    qmm_status cs = check_make(c, max_seq, &o);
    qmm_llm_cuda_session *s = cs ? NULL : (qmm_llm_cuda_session *)calloc(1, sizeof *s);
    if (!s) {
        free(tp);
        return cs ? cs : qmm_fail(QMM_ERR_NOMEM, "out of memory");
    }
    s->tp = tp; /* freed with the session from here on */
    s->m = m;
    s->cfg = *c;
    s->device = o.device;
    s->split_k = o.split_k != 0;
    s->use_graph = o.use_graph != 0;
    s->attention_ref = o.attention_ref != 0;
    /* mixed groups: the projections one by one */
    s->fuse = o.fuse_projections != 0 && llm_cuda_stackable(m);
    /* weight streaming interleaves event waits between the kernels: keep its launches plain */
    s->pdl = o.pdl != 0 && !o.offload_weights;
    s->max_seq = max_seq;
    s->chunk = o.max_chunk ? o.max_chunk : 4096;
    if (s->chunk > max_seq) s->chunk = max_seq;
    s->nsplit = decode_splits(max_seq);
    s->npairs = argmax_blocks(c->vocab_size);
    if (o.offload_weights) {
        s->off = (llm_offload *)calloc(1, sizeof *s->off);
        if (!s->off) {
            free(s), free(tp);
            return qmm_fail(QMM_ERR_NOMEM, "out of memory");
        }
        s->off->buffers = o.offload_buffers;
    }

    qmm_status st = QMM_OK;
    cudaError_t e = cudaSetDevice(o.device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        cudaGetLastError();
        st = qmm_fail(QMM_ERR_NO_DEVICE, "CUDA device %d: %s", o.device, cudaGetErrorString(e));
    }
    if (!st && cudaDeviceGetAttribute(&s->sm_count, cudaDevAttrMultiProcessorCount, o.device) !=
                   cudaSuccess) {
        cudaGetLastError();
        s->sm_count = 0; /* the split rule's default */
    }
    s->nsplit_fused = attention_decode_splits(max_seq, (int)c->num_kv_heads, s->sm_count);
    if (!st && want_cluster_attention(&o) && s->nsplit_fused > 1) {
        const int group = (int)(c->num_heads / c->num_kv_heads);
        const int n = llm_decode_cluster_splits(
            s->nsplit_fused,
            attention_decode_cluster_splits((int)c->num_kv_heads, (int)c->head_dim, group, s->sm_count),
            group);
        if (n > 0) s->attn_cluster = 1, s->nsplit_fused = n;
    }
    s->nsplit_step = s->nsplit_fused;
    /* not `!st && want(...)`: that is 0 or 1, and turned wgmma_pipe (2) into wgmma (1) until
     * e0c04ac's successor (bench/NOTES.md row 181) */
    s->prefill_wgmma = st ? 0 : want_wgmma_prefill(&o, (int)c->head_dim);
    if (!st) st = qmm_cuda_create(o.device, s->stream, &s->ctx);
    if (!st) st = upload_weights(s);
    if (!st && s->off) st = llm_offload_create(s);
    if (!st) st = alloc_scratch(s);
    s->attn_o_fused = !st && !s->attn_cluster && s->nsplit_fused == 1 && want_attention_o_fused(&o) &&
                      llm_attention_o_fusable(s);
    if (!st) st = size_workspace(s);
    if (!st) {
        /* rope table: the CPU's, bit for bit */
        size_t n = (size_t)max_seq * (size_t)(c->head_dim / 2);
        float *ct = (float *)malloc(n * 4), *sn = (float *)malloc(n * 4);
        if (!ct || !sn) st = qmm_fail(QMM_ERR_NOMEM, "out of memory for the rope table");
        if (!st) {
            llm_rope_table(c->rope_theta, c->head_dim, max_seq, ct, sn);
            if (!(st = dev_alloc(&s->cos_t, n, "rope cos")) && !(st = dev_alloc(&s->sin_t, n, "rope sin")) &&
                !(st = upload(s->cos_t, ct, n * 4)))
                st = upload(s->sin_t, sn, n * 4);
        }
        free(ct);
        free(sn);
    }
    if (!st && o.persistent_decode) st = llm_persistent_create(s);
    if (!st) {
        /* setup copies and memsets went to the legacy stream, which a non-blocking stream does
         * not wait for (and a pageable cudaMemcpy may return before its DMA ends): finish them */
        cudaError_t se = cudaDeviceSynchronize();
        if (se != cudaSuccess)
            st = qmm_fail(QMM_ERR_CUDA, "finishing the uploads: %s", cudaGetErrorString(se));
    }
    if (!st) {
        /* one eager step first: any lazy setup of the kernels happens outside graph capture
         * (with the cluster attention, a second at one split for the fused kernel's buckets) */
        for (int w = 0; w < (s->attn_cluster ? 2 : 1) && !st; w++) {
            s->nsplit_step = w ? 1 : s->nsplit_fused;
            st = llm_cuda_forward(s, 1, 1, NULL);
            s->nsplit_step = s->nsplit_fused;
            if (!st) st = llm_sync(s);
            if (!st) st = qmm_llm_cuda_reset(s);
        }
    }
    if (!st && s->use_graph) st = capture_decode_graphs(s);
    if (st) {
        qmm_llm_cuda_session_destroy(s);
        return st;
    }
    *out = s;
    qmm_clear_error();
    return QMM_OK;
}

extern "C" qmm_status qmm_llm_cuda_reset(qmm_llm_cuda_session *s)
{
    if (!s) return qmm_fail(QMM_ERR_NULL, "session is NULL");
    QMM_CUDA_TRY(cudaSetDevice(s->device));
    QMM_CUDA_TRY(cudaMemsetAsync(s->d_pos, 0, 4, s->stream));
    QMM_CUDA_TRY(cudaMemsetAsync(s->d_err, 0, 4, s->stream));
    qmm_status st = llm_sync(s);
    if (st) return st;
    s->pos = 0;
    return QMM_OK;
}

extern "C" int64_t qmm_llm_cuda_position(const qmm_llm_cuda_session *s) { return s ? s->pos : 0; }

extern "C" qmm_status qmm_llm_cuda_session_kernels(const qmm_llm_cuda_session *s,
                                                  qmm_llm_cuda_kernels *out)
{
    if (!s || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_cuda_session_kernels: NULL argument");
    static const char *const prefill[4] = {"mma", "wgmma", "wgmma_pipe", "wgmma_by_length"};
    out->prefill_attention = s->attention_ref ? "reference" : prefill[s->prefill_wgmma];
    /* the choices of llm_cuda_forward for a decode step, in its order */
    out->decode_step = s->pd ? "persistent" : llm_decode_fusable(s) ? "fused" : "layered";
    out->decode_attention = s->attention_ref ? "reference"
                            : s->pd          ? "persistent"
                            : s->attn_cluster ? "cluster"
                            : s->attn_o_fused ? "fused with o"
                                              : "fused";
    return QMM_OK;
}
