/*
 * Weight streaming: the layers' W4 weights stay in pinned host memory as device images and are
 * uploaded layer by layer into a few device slots on a copy stream while earlier layers compute.
 * The kernels read the same bytes as in a resident session (the same image layout behind a
 * wrapped handle), so the logits are bitwise those of the resident run.
 *
 * Order per forward (b slots, L layers), the pipeline model's rule for loads:
 *   upload l (copy stream) starts after upload l-1 and after layer l-b's last use of slot l % b;
 *   layer l (compute stream) starts after upload l.
 */
#include <stdlib.h>
#include <string.h>

#include "llm/cuda/session.h"

#define ALIGN 256

static size_t round_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

/* Shape (n, k) of piece p of a layer: the 7 linears, or with fused projections
 * [q|k|v, o, gate|up, down]. */
static void piece_shape(const qmm_llm_cuda_session *s, int p, int64_t *n, int64_t *k)
{
    const qmm_llm_config *c = &s->cfg;
    if (!s->fuse) {
        qmm_llm_linear_shape(c, (qmm_llm_linear)p, n, k);
        return;
    }
    static const qmm_llm_linear first[4] = {QMM_LLM_Q, QMM_LLM_O, QMM_LLM_GATE, QMM_LLM_DOWN};
    qmm_llm_linear_shape(c, first[p], n, k);
    if (p == 0) *n = (c->num_heads + 2 * c->num_kv_heads) * c->head_dim;
    if (p == 2) *n *= 2;
}

/* The group size of piece p (every layer's, checked by llm_offload_create). */
static int piece_group(const qmm_llm_cuda_session *s, int64_t l, int p)
{
    static const qmm_llm_linear first[4] = {QMM_LLM_Q, QMM_LLM_O, QMM_LLM_GATE, QMM_LLM_DOWN};
    return s->m->layers[l].lin[s->fuse ? first[p] : p].group;
}

/* The handle slot of piece p in a layer's weight set. */
static qmm_cuda_weight **piece_handle(const qmm_llm_cuda_session *s, llm_cuda_layer *w, int p)
{
    if (!s->fuse) return &w->lin[p];
    switch (p) {
    case 0: return &w->qkv;
    case 1: return &w->lin[QMM_LLM_O];
    case 2: return &w->gate_up;
    default: return &w->lin[QMM_LLM_DOWN];
    }
}

/* Offsets of piece p's packed codes and scale/bias planes inside a layer image. */
static qmm_status piece_layout(const qmm_llm_cuda_session *s, int p, size_t *packed_off,
                               size_t *packed_bytes, size_t *sb_off, size_t *sb_bytes)
{
    size_t off = 0;
    for (int i = 0; i <= p; i++) {
        int64_t n, k;
        piece_shape(s, i, &n, &k);
        size_t pb, sb;
        qmm_status st = qmm_w4_device_image_bytes_group(n, k, piece_group(s, 0, i), &pb, &sb);
        if (st) return st;
        *packed_off = off;
        *packed_bytes = pb;
        *sb_off = off + round_up(pb);
        *sb_bytes = sb;
        off = *sb_off + round_up(sb);
    }
    return QMM_OK;
}

/* Layer l's image into dst (layer_bytes of pinned memory). */
static qmm_status build_image(qmm_llm_cuda_session *s, int64_t l, unsigned char *dst)
{
    const qmm_w4 *lin = s->m->layers[l].lin;
    for (int p = 0; p < s->off->pieces; p++) {
        size_t po, pb, so, sb;
        qmm_status st = piece_layout(s, p, &po, &pb, &so, &sb);
        if (st) return st;
        qmm_w4 stacked;
        const qmm_w4 *w = &lin[p];
        int made = 0;
        if (s->fuse) {
            const qmm_w4 *qkv[3] = {&lin[QMM_LLM_Q], &lin[QMM_LLM_K], &lin[QMM_LLM_V]};
            const qmm_w4 *gu[2] = {&lin[QMM_LLM_GATE], &lin[QMM_LLM_UP]};
            if (p == 0 || p == 2) {
                st = p == 0 ? llm_stack_w4(qkv, 3, &stacked)
                            : llm_stack_w4_chunked(gu, 2, llm_gate_up_chunk(&s->cfg), &stacked);
                if (st) return st;
                w = &stacked;
                made = 1;
            } else {
                w = &lin[p == 1 ? QMM_LLM_O : QMM_LLM_DOWN];
            }
        }
        st = qmm_w4_device_image(w, dst + po, pb, dst + so, sb);
        if (made) qmm_w4_free(&stacked);
        if (st) return st;
    }
    return QMM_OK;
}

/* Copy layer j's image into its slot on the copy stream and mark the slot ready. */
static qmm_status upload(qmm_llm_cuda_session *s, int j)
{
    llm_offload *o = s->off;
    int slot = j % o->buffers;
    QMM_CUDA_TRY(cudaMemcpyAsync(o->slots + (size_t)slot * o->layer_bytes,
                                 o->host + (size_t)j * o->layer_bytes, o->layer_bytes,
                                 cudaMemcpyHostToDevice, o->copy));
    QMM_CUDA_TRY(cudaEventRecord(o->ready[slot], o->copy));
    return QMM_OK;
}

/* Host-to-device bandwidth from the pinned images: every layer once into slot 0 (repeated to at
 * least 64 MiB), after one warm-up copy, timed with events on the copy stream. */
static qmm_status measure_h2d(qmm_llm_cuda_session *s)
{
    llm_offload *o = s->off;
    int L = (int)s->cfg.num_layers;
    cudaEvent_t a = NULL, b = NULL;
    qmm_status st = QMM_OK;
    if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess)
        st = qmm_fail(QMM_ERR_CUDA, "cudaEventCreate failed");
    size_t total = 0;
    if (!st && cudaMemcpyAsync(o->slots, o->host, o->layer_bytes, cudaMemcpyHostToDevice,
                               o->copy) != cudaSuccess)
        st = qmm_fail(QMM_ERR_CUDA, "warm-up upload failed");
    if (!st && cudaEventRecord(a, o->copy) != cudaSuccess)
        st = qmm_fail(QMM_ERR_CUDA, "cudaEventRecord failed");
    while (!st && total < ((size_t)64 << 20))
        for (int l = 0; l < L && !st; l++) {
            if (cudaMemcpyAsync(o->slots, o->host + (size_t)l * o->layer_bytes, o->layer_bytes,
                                cudaMemcpyHostToDevice, o->copy) != cudaSuccess)
                st = qmm_fail(QMM_ERR_CUDA, "timed upload failed");
            total += o->layer_bytes;
        }
    float ms = 0;
    if (!st && (cudaEventRecord(b, o->copy) != cudaSuccess ||
                cudaEventSynchronize(b) != cudaSuccess ||
                cudaEventElapsedTime(&ms, a, b) != cudaSuccess))
        st = qmm_fail(QMM_ERR_CUDA, "timing the uploads failed");
    if (!st) o->h2d_gbs = ms > 0 ? (double)total / ((double)ms * 1e6) : 0.0;
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    cudaGetLastError();
    return st;
}

qmm_status llm_offload_create(qmm_llm_cuda_session *s)
{
    llm_offload *o = s->off;
    const int64_t L = s->cfg.num_layers;
    o->pieces = s->fuse ? 4 : QMM_LLM_LINEAR_COUNT;
    if (o->buffers > L) o->buffers = (int)L;
    /* one image layout for every layer: the same group sizes in each */
    for (int64_t l = 1; l < L; l++)
        for (int p = 0; p < o->pieces; p++)
            if (piece_group(s, l, p) != piece_group(s, 0, p))
                return qmm_fail(QMM_ERR_UNSUPPORTED, "weight streaming needs the same group sizes "
                                "in every layer (layer %lld differs from layer 0)", (long long)l);
    size_t po, pb, so, sb;
    qmm_status st = piece_layout(s, o->pieces - 1, &po, &pb, &so, &sb);
    if (st) return st;
    o->layer_bytes = so + round_up(sb);
    size_t host_bytes, slot_bytes;
    if (!qmm_mul_size(o->layer_bytes, (size_t)L, &host_bytes) ||
        !qmm_mul_size(o->layer_bytes, (size_t)o->buffers, &slot_bytes))
        return qmm_fail(QMM_ERR_OVERFLOW, "layer images: size overflows");
    o->ready = (cudaEvent_t *)calloc((size_t)o->buffers, sizeof *o->ready);
    o->free_ = (cudaEvent_t *)calloc((size_t)o->buffers, sizeof *o->free_);
    o->slot_w = (llm_cuda_layer *)calloc((size_t)o->buffers, sizeof *o->slot_w);
    if (!o->ready || !o->free_ || !o->slot_w) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    QMM_CUDA_TRY(cudaStreamCreateWithFlags(&o->copy, cudaStreamNonBlocking));
    for (int i = 0; i < o->buffers; i++) {
        QMM_CUDA_TRY(cudaEventCreateWithFlags(&o->ready[i], cudaEventDisableTiming));
        QMM_CUDA_TRY(cudaEventCreateWithFlags(&o->free_[i], cudaEventDisableTiming));
    }
    QMM_CUDA_TRY(cudaEventCreateWithFlags(&o->fork, cudaEventDisableTiming));
    QMM_CUDA_TRY(cudaEventCreateWithFlags(&o->join, cudaEventDisableTiming));
    cudaError_t e = cudaMallocHost((void **)&o->host, host_bytes);
    if (e != cudaSuccess) {
        o->host = NULL;
        cudaGetLastError();
        return qmm_fail(QMM_ERR_NOMEM, "pinned host memory for the layer images (%zu bytes): %s",
                        host_bytes, cudaGetErrorString(e));
    }
    e = cudaMalloc((void **)&o->slots, slot_bytes);
    if (e != cudaSuccess) {
        o->slots = NULL;
        cudaGetLastError();
        return qmm_fail(e == cudaErrorMemoryAllocation ? QMM_ERR_NOMEM : QMM_ERR_CUDA,
                        "cudaMalloc of %zu bytes for %d layer slots: %s", slot_bytes, o->buffers,
                        cudaGetErrorString(e));
    }
    for (int64_t l = 0; l < L; l++)
        if ((st = build_image(s, l, o->host + (size_t)l * o->layer_bytes))) return st;
    /* each slot's handles: the same offsets as the image, at the slot's base */
    for (int i = 0; i < o->buffers; i++) {
        unsigned char *base = o->slots + (size_t)i * o->layer_bytes;
        for (int p = 0; p < o->pieces; p++) {
            int64_t n, k;
            piece_shape(s, p, &n, &k);
            if ((st = piece_layout(s, p, &po, &pb, &so, &sb)) ||
                (st = qmm_cuda_weight_wrap_group(s->ctx, n, k, piece_group(s, 0, p), base + po,
                                                 base + so, piece_handle(s, &o->slot_w[i], p))))
                return st;
        }
    }
    return measure_h2d(s);
}

void llm_offload_destroy(qmm_llm_cuda_session *s)
{
    llm_offload *o = s->off;
    if (!o) return;
    if (o->copy) cudaStreamSynchronize(o->copy);
    if (o->slot_w)
        for (int i = 0; i < o->buffers; i++) {
            for (int p = 0; p < QMM_LLM_LINEAR_COUNT; p++)
                qmm_cuda_weight_free(o->slot_w[i].lin[p]);
            qmm_cuda_weight_free(o->slot_w[i].qkv);
            qmm_cuda_weight_free(o->slot_w[i].gate_up);
        }
    for (int i = 0; i < o->buffers; i++) {
        if (o->ready && o->ready[i]) cudaEventDestroy(o->ready[i]);
        if (o->free_ && o->free_[i]) cudaEventDestroy(o->free_[i]);
    }
    if (o->fork) cudaEventDestroy(o->fork);
    if (o->join) cudaEventDestroy(o->join);
    if (o->slots) cudaFree(o->slots);
    if (o->host) cudaFreeHost(o->host);
    if (o->copy) cudaStreamDestroy(o->copy);
    free(o->slot_w);
    free(o->ready);
    free(o->free_);
    free(o);
    s->off = NULL;
}

qmm_status llm_offload_begin(qmm_llm_cuda_session *s)
{
    llm_offload *o = s->off;
    /* everything before this forward (its last use of every slot included) precedes the uploads;
     * under capture this also brings the copy stream into the graph */
    QMM_CUDA_TRY(cudaEventRecord(o->fork, s->stream));
    QMM_CUDA_TRY(cudaStreamWaitEvent(o->copy, o->fork, 0));
    for (int j = 0; j < o->buffers; j++) {
        qmm_status st = upload(s, j);
        if (st) return st;
    }
    return QMM_OK;
}

qmm_status llm_offload_before_layer(qmm_llm_cuda_session *s, int l)
{
    llm_offload *o = s->off;
    QMM_CUDA_TRY(cudaStreamWaitEvent(s->stream, o->ready[l % o->buffers], 0));
    return QMM_OK;
}

qmm_status llm_offload_after_layer(qmm_llm_cuda_session *s, int l)
{
    llm_offload *o = s->off;
    int next = l + o->buffers;
    if (next >= s->cfg.num_layers) return QMM_OK;
    int slot = l % o->buffers;
    QMM_CUDA_TRY(cudaEventRecord(o->free_[slot], s->stream));
    QMM_CUDA_TRY(cudaStreamWaitEvent(o->copy, o->free_[slot], 0));
    return upload(s, next);
}

qmm_status llm_offload_end(qmm_llm_cuda_session *s)
{
    llm_offload *o = s->off;
    QMM_CUDA_TRY(cudaEventRecord(o->join, o->copy));
    QMM_CUDA_TRY(cudaStreamWaitEvent(s->stream, o->join, 0));
    return QMM_OK;
}

extern "C" qmm_status qmm_llm_cuda_offload_stats(const qmm_llm_cuda_session *s,
                                                 qmm_llm_offload_stats *out)
{
    if (!s || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_cuda_offload_stats: NULL argument");
    memset(out, 0, sizeof *out);
    const llm_offload *o = s->off;
    if (!o) return QMM_OK;
    out->buffers = o->buffers;
    out->layer_bytes = o->layer_bytes;
    out->slot_bytes = o->layer_bytes * (size_t)o->buffers;
    out->h2d_gbs = o->h2d_gbs;
    out->upload_ms = o->h2d_gbs > 0 ? (double)o->layer_bytes / (o->h2d_gbs * 1e6) : 0.0;
    return QMM_OK;
}
