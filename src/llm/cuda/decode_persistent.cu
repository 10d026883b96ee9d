/*
 * The persistent decode step (issue 12): one token through every layer and the LM head in a
 * single launch of one CTA a SM, between the embedding and the argmax.
 *
 * Why: the fused step (decode_fused.cu) runs five kernels a layer. Each matvec is a few
 * microseconds of weights with a launch, a ramp and a tail, and HBM idles in between: in the
 * graph the matvecs moved 47 % of the copy ceiling although each alone runs within 1.2-1.4× of
 * the `read` floor (bench/NOTES.md, rows 48-56). Here a producer warp per SM streams the whole
 * step's weights, phase after phase, through a ring of shared memory and never waits for
 * activations, so a phase's weights arrive while the consumers still wait for the one before.
 *
 * Phases: per layer q|k|v, attention, o (+ residual), gate|up (+ SwiGLU), down (+ residual);
 * then the LM head. A matvec's weight is cut into pieces (128-row block, 128-column block), each
 * 8 KB of codes and 512 B of scale|bias, contiguous in the device layout (w4_layout.h). CTA c of
 * G takes pieces [cP/G, (c+1)P/G) in row-block-major order (stream-K over the grid). A row block
 * split over several CTAs is finished by the last to arrive, which adds their partial sums in
 * CTA order: results do not depend on timing, only on G (the SM count). The attention is the
 * fused kernel's block (attention_decode_block.cuh), one (KV head, split) a unit.
 *
 * Phases wait for each other through counters in global memory (a release by the finishing
 * CTA, an acquire by the waiting one): a phase can start when the one before has finished all
 * its row blocks (KV heads); by induction every earlier phase has too, and every reader of a
 * buffer a phase overwrites has finished reading it. Inputs that other CTAs wrote are read
 * through L2 (ld.global.cg). The kernel needs all G CTAs resident (a cooperative launch).
 *
 * Numerics: RMSNorm as llm_rmsnorm_row (normed row rounded to bf16 before the matmul, unlike the
 * fused step that scales after it); the matvec in fp32 from exact codes, y = Σ_groups
 * s·(Σ a·(128 + q) − 128·Σa) + b·Σa; SwiGLU and the residual add as the CPU's; the attention as
 * the fused kernel's.
 */
#include <stdlib.h>

#include <vector>

#include "cuda/kernels.h"
#include "llm/cuda/decode_persistent.cuh"
#include "llm/cuda/session.h"

using namespace qmm_llm;

struct llm_persistent {
    PdLayer *layers;   /* device [L] */
    float *partials;   /* [ctas][2][128] */
    unsigned *rb_count, *done;
    unsigned *first;   /* device [5][ctas + 1] (decode_persistent.cuh) */
    int ctas, rb_stride, nsplit;
    size_t smem;
    void (*kernel)(const PdArgs);
    unsigned long long *trace; /* QMM_PD_TRACE builds */
};

#ifdef QMM_PD_TRACE
#include <stdio.h>
#include <algorithm>
/* Experiment build: the last step's phase stamps, summarised on stderr at session end (the
 * median CTA's wait end, staged input, loop end and end, the last CTA's end, µs from the first
 * CTA's start; the median time warp 0 waited for full stages). */
static void pd_trace_dump(const llm_persistent *pd, int L)
{
    const size_t n = (size_t)pd->ctas * 1024 * 8;
    std::vector<unsigned long long> t(n);
    if (cudaMemcpy(t.data(), pd->trace, n * 8, cudaMemcpyDeviceToHost) != cudaSuccess) return;
    unsigned long long t0 = ~0ull;
    for (int c = 0; c < pd->ctas; c++) t0 = std::min(t0, t[((size_t)c * 1024 + 1023) * 8]);
    static const char *kind[5] = {"qkv", "attn", "o", "gu", "down"};
    fprintf(stderr, "pd_trace: phase layer kind  wait_end staged loop_end end_med end_max "
                    "full_wait_med (us)\n");
    for (int ph = 0; ph <= L * PD_PHASES; ph++) {
        std::vector<double> w, st, e, le, fw;
        for (int c = 0; c < pd->ctas; c++) {
            const unsigned long long *r = &t[((size_t)c * 1024 + ph) * 8];
            if (!r[0] || r[0] < t0) continue;
            /* the attention phase has no staging: its column stays 0 */
            w.push_back((r[1] - t0) / 1e3), st.push_back(r[2] > t0 ? (r[2] - t0) / 1e3 : 0.0);
            e.push_back((r[3] - t0) / 1e3);
            le.push_back(r[4] > t0 ? (r[4] - t0) / 1e3 : 0.0), fw.push_back(r[5] / 1e3);
        }
        if (e.empty()) continue;
        auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
        fprintf(stderr, "pd_trace: %3d %2d %-5s %8.2f %8.2f %8.2f %8.2f %8.2f %6.2f (%zu CTAs)\n",
                ph, ph / PD_PHASES, ph == L * PD_PHASES ? "head" : kind[ph % PD_PHASES], med(w),
                med(st), med(le), med(e), *std::max_element(e.begin(), e.end()), med(fw), e.size());
    }
}
#endif

static PdMatrix pd_matrix(const qmm_cuda_weight *w)
{
    const qmm::DevWeight &d = qmm::weight_dev(w);
    PdMatrix m;
    m.packed = d.packed;
    m.sb = d.sb;
    m.n_pad = d.n_pad;
    m.n = (int)d.n;
    m.kb = (int)(d.k / 128);
    m.nrb = (int)(d.n_pad / 128);
    return m;
}

static bool pd_matrix_ok(const qmm_cuda_weight *w, int64_t n, int64_t k)
{
    const qmm::DevWeight &d = qmm::weight_dev(w);
    return d.group == 128 && d.n == n && d.k == k && k % 128 == 0 && d.n_pad % 128 == 0 &&
           d.n_pad / 128 < (1 << 20);
}

template <int HD, int G>
static void (*pd_kernel_of())(const PdArgs)
{
    return pd_decode_kernel<HD, G>;
}

static void (*pd_pick(int hd, int group, size_t *attn_bytes))(const PdArgs)
{
#define PD_CASE(HD_, G_)                                                                        \
    if (hd == HD_ && group == G_) {                                                              \
        *attn_bytes = ad_layout<HD_, G_>::BYTES;                                                 \
        return pd_kernel_of<HD_, G_>();                                                          \
    }
    PD_CASE(128, 1) PD_CASE(128, 2) PD_CASE(128, 4) PD_CASE(128, 5) PD_CASE(128, 8)
    PD_CASE(64, 1) PD_CASE(64, 2) PD_CASE(64, 4) PD_CASE(64, 5) PD_CASE(64, 8)
#undef PD_CASE
    return nullptr;
}

void llm_persistent_destroy(qmm_llm_cuda_session *s)
{
    llm_persistent *pd = s->pd;
    if (!pd) return;
#ifdef QMM_PD_TRACE
    if (pd->trace) {
        cudaStreamSynchronize(s->stream);
        pd_trace_dump(pd, (int)s->cfg.num_layers);
    }
    cudaFree(pd->trace);
#endif
    cudaFree(pd->layers);
    cudaFree(pd->partials);
    cudaFree(pd->rb_count);
    cudaFree(pd->done);
    cudaFree(pd->first);
    free(pd);
    s->pd = NULL;
}

/* Whether the session can take the persistent step, and why not (for the option's error). */
static const char *pd_unsupported(const qmm_llm_cuda_session *s)
{
    const qmm_llm_config *c = &s->cfg;
    if (s->tp) return "tensor parallelism";
    if (s->off) return "weight streaming";
    if (!llm_decode_fusable(s)) return "a session without the fused decode step";
    if (c->hidden_size > PD_NORM_MAX) return "a hidden size over 8192";
    if (c->hidden_size % 128 || (c->num_heads * c->head_dim) % 128 || c->intermediate_size % 128)
        return "hidden size, heads x head_dim or intermediate size not in whole 128-blocks";
    const int64_t H = c->hidden_size, A = c->num_heads * c->head_dim;
    const int64_t KV = c->num_kv_heads * c->head_dim, I = c->intermediate_size;
    for (int64_t l = 0; l < c->num_layers; l++) {
        const llm_cuda_layer *ly = &s->layers[l];
        if (!pd_matrix_ok(ly->qkv, A + 2 * KV, H) || !pd_matrix_ok(ly->lin[QMM_LLM_O], H, A) ||
            !pd_matrix_ok(ly->gate_up, 2 * I, H) || !pd_matrix_ok(ly->lin[QMM_LLM_DOWN], H, I))
            return "a projection that is not one W4 weight of groups of 128";
        for (int i = 0; i < QMM_LLM_NORM_COUNT; i++)
            if ((uintptr_t)ly->norm[i] % 4) return "a norm weight not 4-byte aligned";
    }
    if (!pd_matrix_ok(s->head, c->vocab_size, H)) return "an LM head not of groups of 128";
    if ((uintptr_t)s->final_norm % 4) return "a norm weight not 4-byte aligned";
    return NULL;
}

qmm_status llm_persistent_create(qmm_llm_cuda_session *s)
{
    const qmm_llm_config *c = &s->cfg;
    const char *why = pd_unsupported(s);
    if (why) return qmm_fail(QMM_ERR_UNSUPPORTED, "the persistent decode step does not take %s", why);
    size_t attn_bytes = 0;
    void (*kernel)(const PdArgs) = pd_pick((int)c->head_dim, (int)(c->num_heads / c->num_kv_heads),
                                           &attn_bytes);
    if (!kernel)
        return qmm_fail(QMM_ERR_UNSUPPORTED, "the persistent decode step: head_dim %lld, group %lld",
                        (long long)c->head_dim, (long long)(c->num_heads / c->num_kv_heads));
    llm_persistent *pd = (llm_persistent *)calloc(1, sizeof *pd);
    if (!pd) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    s->pd = pd;
    pd->kernel = kernel;

    /* the ring takes what the consumers' shared memory leaves */
    const int L = (int)c->num_layers;
    int kb_max = (int)(c->hidden_size / 128), nrb_max = 0;
    const int64_t I = c->intermediate_size, A = c->num_heads * c->head_dim;
    if (I / 128 > kb_max) kb_max = (int)(I / 128);
    if (A / 128 > kb_max) kb_max = (int)(A / 128);
    std::vector<PdLayer> h(L);
    for (int l = 0; l < L; l++) {
        const llm_cuda_layer *ly = &s->layers[l];
        PdLayer &p = h[l];
        p.qkv = pd_matrix(ly->qkv);
        p.o = pd_matrix(ly->lin[QMM_LLM_O]);
        p.gu = pd_matrix(ly->gate_up);
        p.down = pd_matrix(ly->lin[QMM_LLM_DOWN]);
        p.in_norm = ly->norm[QMM_LLM_INPUT_NORM];
        p.post_norm = ly->norm[QMM_LLM_POST_ATTN_NORM];
        p.q_norm = ly->norm[QMM_LLM_Q_NORM];
        p.k_norm = ly->norm[QMM_LLM_K_NORM];
        const size_t layer_cache = (size_t)c->num_kv_heads * (size_t)s->max_seq * (size_t)c->head_dim;
        p.kc = s->kc + (size_t)l * layer_cache;
        p.vc = s->vc + (size_t)l * layer_cache;
        const int nrbs[4] = {p.qkv.nrb, p.o.nrb, p.gu.nrb, p.down.nrb};
        for (int i = 0; i < 4; i++) nrb_max = nrbs[i] > nrb_max ? nrbs[i] : nrb_max;
    }
    const PdMatrix head = pd_matrix(s->head);
    if (head.nrb > nrb_max) nrb_max = head.nrb;
    size_t uni = (size_t)kb_max * (PD_PERM_WORDS * 4 + 4);
    if (attn_bytes > uni) uni = attn_bytes;
    int dev = 0, optin = 0, sms = 0;
    QMM_CUDA_TRY(cudaGetDevice(&dev));
    QMM_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    QMM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (sms < 1 || sms > 4096) return qmm_fail(QMM_ERR_UNSUPPORTED, "%d SMs", sms);
    /* every layer has the same shapes (checked above): one range table a weight */
    const PdMatrix shapes[5] = {h[0].qkv, h[0].o, h[0].gu, h[0].down, head};
    std::vector<unsigned> first(5 * (size_t)(sms + 1));
    for (int w = 0; w < 5; w++) {
        const uint64_t P = (uint64_t)shapes[w].nrb * (uint64_t)shapes[w].kb;
        if (P * (uint64_t)(sms + 1) >= (1ull << 32))
            return qmm_fail(QMM_ERR_UNSUPPORTED, "the persistent decode step: a weight of %llu "
                            "pieces", (unsigned long long)P);
        for (int cc = 0; cc <= sms; cc++) first[(size_t)w * (sms + 1) + cc] = (unsigned)(P * cc / sms);
    }
    const size_t fixed = (256 + 32 + 128) * 4 + (5 * (size_t)(sms + 1) + 3) / 4 * 16 + (uni + 127) / 128 * 128;
    pd->smem = (size_t)PD_STAGES * (PD_PIECE + 16) + fixed;
    if (pd->smem > (size_t)optin)
        return qmm_fail(QMM_ERR_UNSUPPORTED, "the persistent decode step needs %zu bytes of shared "
                        "memory a block; the device has %d", pd->smem, optin);
    QMM_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)pd->smem));
    int per_sm = 0;
    QMM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, PD_THREADS, pd->smem));
    if (per_sm < 1)
        return qmm_fail(QMM_ERR_UNSUPPORTED, "the persistent decode kernel does not fit on a SM");
    pd->ctas = sms;
    /* one attention unit a CTA at most: splits that fill the grid once */
    int ns = pd->ctas / (int)c->num_kv_heads;
    if (ns < 1) ns = 1;
    pd->nsplit = ns < s->nsplit_fused ? ns : s->nsplit_fused;
    pd->rb_stride = nrb_max;
    const size_t phases = (size_t)L * PD_PHASES + 1;
    cudaError_t e = cudaMalloc((void **)&pd->layers, sizeof(PdLayer) * (size_t)L);
    if (e == cudaSuccess) e = cudaMalloc((void **)&pd->partials, (size_t)pd->ctas * 2 * 128 * 4);
    if (e == cudaSuccess) e = cudaMalloc((void **)&pd->rb_count, phases * (size_t)nrb_max * 4);
    if (e == cudaSuccess) e = cudaMalloc((void **)&pd->done, (phases + 1) * 4);
    if (e == cudaSuccess) e = cudaMemcpy(pd->layers, h.data(), sizeof(PdLayer) * (size_t)L, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemset(pd->rb_count, 0, phases * (size_t)nrb_max * 4);
    if (e == cudaSuccess) e = cudaMemset(pd->done, 0, (phases + 1) * 4);
    if (e == cudaSuccess) e = cudaMalloc((void **)&pd->first, first.size() * 4);
    if (e == cudaSuccess) e = cudaMemcpy(pd->first, first.data(), first.size() * 4, cudaMemcpyHostToDevice);
#ifdef QMM_PD_TRACE
    if (e == cudaSuccess) e = cudaMalloc((void **)&pd->trace, (size_t)pd->ctas * 1024 * 8 * 8);
    if (e == cudaSuccess) e = cudaMemset(pd->trace, 0, (size_t)pd->ctas * 1024 * 8 * 8);
#endif
    if (e != cudaSuccess) {
        cudaGetLastError();
        return qmm_fail(e == cudaErrorMemoryAllocation ? QMM_ERR_NOMEM : QMM_ERR_CUDA,
                        "the persistent decode step's buffers: %s", cudaGetErrorString(e));
    }
    return QMM_OK;
}

qmm_status llm_cuda_decode_persistent(qmm_llm_cuda_session *s, llm_prof *prof)
{
    const qmm_llm_config *c = &s->cfg;
    const llm_persistent *pd = s->pd;
    cudaStream_t st = s->stream;
    llm_mark(prof, st, "start");
    QMM_CUDA_TRY(launch_embed(s->embed, s->d_tokens, s->d_pos, 1, s->x, s->d_err, st));
    llm_mark(prof, st, "embedding");

    PdArgs a = {};
    a.layers = pd->layers;
    a.L = (int)c->num_layers;
    a.head = pd_matrix(s->head);
    a.final_norm = s->final_norm;
    a.x = s->x;
    a.q = s->q, a.k = s->k, a.v = s->v;
    a.att = s->att, a.act = s->act, a.logits = s->logits;
    a.cos_t = s->cos_t, a.sin_t = s->sin_t;
    a.pos = s->d_pos;
    a.max_seq = s->max_seq;
    a.nsplit = pd->nsplit;
    a.kvh = (int)c->num_kv_heads;
    a.eps = (float)c->rms_norm_eps;
    a.att_partials = s->partials;
    a.att_counters = s->counters;
    a.partials = pd->partials;
    a.rb_count = pd->rb_count;
    a.rb_stride = pd->rb_stride;
    a.done = pd->done;
    a.trace = pd->trace;
    a.first = pd->first;

    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(pd->ctas);
    cfg.blockDim = dim3(PD_THREADS);
    cfg.dynamicSmemBytes = pd->smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeCooperative;
    at[0].val.cooperative = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    QMM_CUDA_TRY(cudaLaunchKernelEx(&cfg, pd->kernel, a));
    llm_mark(prof, st, "persistent step (all layers, lm head)");

    QMM_CUDA_TRY(llm_launch_argmax(s, 1));
    llm_mark(prof, st, "argmax");
    return QMM_OK;
}
