/*
 * The persistent decode step (one kernel for all layers and the head, decode_persistent.cu) on
 * synthetic Qwen3 models: one with hd 64 and 2 query heads a KV head, one with hd 128 and 4,
 * one wide enough that row blocks are split over several CTAs (the last-arriving CTA's
 * fixup in CTA order), and one with Qwen3-14B's 5 query heads a KV head (hd 128):
 *   - against the reference step (unfused kernels, reference attention) over 300 teacher-forced
 *     positions, one attention block and then split contexts: logits within 2e-2, greedy
 *     tokens equal or a near tie;
 *   - bitwise the same logits in two sessions, in graph and eager mode (no result depends on
 *     timing: the fixups add parts in CTA order, the phase counters reset between steps);
 *   - 3 000 chained steps: the position advances by one a step and no device memory is taken;
 *   - a session it cannot serve (weight streaming) is refused with QMM_ERR_UNSUPPORTED.
 * Skips (exit 77) without a GPU or without CUDA in this build.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifndef QMM_HAVE_CUDA
int main(void) { test_skip_no_gpu("this build has no CUDA backend (nvcc was not found)"); }
#else
#include <cuda_runtime.h>

/* hidden, intermediate, layers, heads, kv heads, head_dim, vocab, max positions, theta, eps, tied */
static const qmm_llm_config tiny = {256, 512, 2, 4, 2, 64, 1000, 12000, 1e6, 1e-6, 1, 128};
static const qmm_llm_config tiny4 = {512, 1024, 2, 8, 2, 128, 2000, 4096, 1e6, 1e-6, 1, 128};
static const qmm_llm_config wide = {1024, 2816, 3, 8, 2, 128, 3000, 4096, 1e6, 1e-6, 0, 128};
/* Qwen3-14B's attention geometry: 5 query heads per KV head, hd 128 */
static const qmm_llm_config tiny5 = {512, 1024, 2, 10, 2, 128, 2000, 4096, 1e6, 1e-6, 1, 128};
#define NCFGS 4
static const qmm_llm_config *const cfgs[NCFGS] = {&tiny, &tiny4, &wide, &tiny5};

static qmm_llm_cuda_session *session(const qmm_llm_model *m, int64_t max_seq, int persistent,
                                     int graph, int attention_ref)
{
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    o.persistent_decode = persistent, o.use_graph = graph, o.attention_ref = attention_ref;
    return test_cuda_session(m, max_seq, &o);
}

static qmm_llm_model *synthetic(const qmm_llm_config *c)
{
    return test_synthetic_model(c, test_rand_u64());
}

static void matches_reference_step(void)
{
    for (int ci = 0; ci < NCFGS; ci++) {
        enum { STEPS = 300 };
        test_llm f;
        if (!test_llm_init(&f, synthetic(cfgs[ci]), STEPS)) continue;
        qmm_llm_cuda_session *ps = session(f.m, 1000, 1, 1, 0), *rs = session(f.m, 1000, 0, 1, 1);
        const double worst = ps && rs ? test_decode_pair(&f, ps, rs, STEPS, 2e-2, "persistent", ci) : 0;
        printf("    config %d: %d positions, worst logits rel err %.3g\n", ci, STEPS, worst);
        qmm_llm_cuda_session_destroy(ps);
        qmm_llm_cuda_session_destroy(rs);
        test_llm_free(&f);
    }
}

static void bitwise_between_sessions_and_modes(void)
{
    for (int ci = 0; ci < NCFGS; ci++) {
        test_llm f;
        if (!test_llm_init(&f, synthetic(cfgs[ci]), 150)) continue;
        qmm_llm_cuda_session *g = session(f.m, 400, 1, 1, 0), *e = session(f.m, 400, 1, 0, 0);
        if (g && e) {
            qmm_llm_cuda_kernels kn;
            CHECK_OK(qmm_llm_cuda_session_kernels(g, &kn));
            CHECKF(!strcmp(kn.decode_step, "persistent") && !strcmp(kn.decode_attention, "persistent"),
                   "config %d: decode step %s, attention %s", ci, kn.decode_step, kn.decode_attention);
            int32_t t1 = 0, t2 = 0;
            CHECK_OK(qmm_llm_cuda_prefill(g, f.ids, 150, f.a, &t1));
            CHECK_OK(qmm_llm_cuda_prefill(e, f.ids, 150, f.b, &t2));
            for (int step = 0; step < 20; step++) {
                CHECK_OK(qmm_llm_cuda_decode(g, t1, f.a, &t1));
                CHECK_OK(qmm_llm_cuda_decode(e, t2, f.b, &t2));
                CHECKF(!memcmp(f.a, f.b, (size_t)f.V * 4) && t1 == t2,
                       "config %d, step %d: graph and eager persistent steps differ", ci, step);
            }
        }
        qmm_llm_cuda_session_destroy(g);
        qmm_llm_cuda_session_destroy(e);
        test_llm_free(&f);
    }
}

static void chained_steps(void)
{
    qmm_llm_model *m = synthetic(&tiny4);
    if (!m) return;
    enum { N = 16, STEPS = 3000 };
    int32_t *seq = malloc((N + 2) * 4), *out = malloc((STEPS + 1) * 4);
    test_random_ids(seq, N, tiny4.vocab_size);
    qmm_llm_cuda_session *s = session(m, N + STEPS + 8, 1, 1, 0);
    if (s && seq && out) {
        CHECK_OK(qmm_llm_cuda_generate(s, seq, N, 100, out, NULL));
        CHECK_OK(qmm_llm_cuda_reset(s));
        size_t free0 = 0, free1 = 0, total = 0;
        CHECK(cudaMemGetInfo(&free0, &total) == cudaSuccess);
        CHECK_OK(qmm_llm_cuda_generate(s, seq, N, STEPS + 1, out, NULL));
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        CHECK(cudaMemGetInfo(&free1, &total) == cudaSuccess);
        CHECKF(free1 + (1u << 20) >= free0, "device memory shrank by %zu bytes", free0 - free1);
        CHECKF(qmm_llm_cuda_position(s) == N + STEPS, "position %lld after %d steps",
               (long long)qmm_llm_cuda_position(s), STEPS);
    }
    qmm_llm_cuda_session_destroy(s);
    free(seq), free(out);
    qmm_llm_model_destroy(m);
}

static void unsupported_sessions_refused(void)
{
    qmm_llm_model *m = synthetic(&tiny);
    if (!m) return;
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    o.persistent_decode = 1, o.offload_weights = 1;
    qmm_llm_cuda_session *s = NULL;
    qmm_status st = qmm_llm_cuda_session_create(m, 64, &o, &s);
    CHECKF(st == QMM_ERR_UNSUPPORTED && !s, "weight streaming with the persistent step: %s",
           qmm_status_string(st));
    printf("    refused: %s\n", qmm_last_error());
    o = qmm_llm_cuda_options_default();
    o.persistent_decode = 1, o.fuse_projections = 0;
    st = qmm_llm_cuda_session_create(m, 64, &o, &s);
    CHECKF(st == QMM_ERR_UNSUPPORTED && !s, "separate projections with the persistent step: %s",
           qmm_status_string(st));
    qmm_llm_cuda_session_destroy(s);
    qmm_llm_model_destroy(m);
}

TEST_GPU_MAIN("the persistent decode step is not tested here", matches_reference_step,
              bitwise_between_sessions_and_modes, chained_steps, unsupported_sessions_refused)
#endif
