/*
 * The decode step of the CUDA forward as a whole (fused decode attention, two-stage argmax, PDL,
 * the in-graph profile), on synthetic tiny Qwen3 models (two of them also in groups of 64 and 32):
 *   - PDL on and off give the same logits and tokens bit for bit (graph and eager);
 *   - the fused decode attention against the reference kernels (separate qk-norm + rope + cache,
 *     then attention) over 300 teacher-forced steps (one block, then split contexts): logits
 *     within 1e-2, greedy tokens equal or a near tie;
 *   - 10 000 chained decode steps: the position advances by exactly one per step, no device
 *     memory is taken, and the cache they leave is the one a fresh prefill of the same tokens
 *     builds (prefill n + decode == prefill n + 1 at n = 10 016, logits within 1e-2);
 *   - the in-graph profile: the families and counts the forward launches, a breakdown that adds
 *     up to the stamped step, and the session reset afterwards;
 *   - the decode graphs per context bucket (src/llm/decode_bucket.h): graph == eager bit for bit
 *     across the buckets' boundaries, in teacher-forced steps and in generation.
 * Skips (exit 77) without a GPU or without CUDA in this build.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/cuda/decode_ops.h"
#include "llm/decode_bucket.h"

#ifndef QMM_HAVE_CUDA
int main(void) { test_skip_no_gpu("this build has no CUDA backend (nvcc was not found)"); }
#else
#include <cuda_runtime.h>

/* hidden, intermediate, layers, heads, kv heads, head_dim, vocab, max positions, theta, eps, tied */
static const qmm_llm_config tiny = {256, 512, 2, 4, 2, 64, 1000, 12000, 1e6, 1e-6, 1, 128};
/* Qwen3-4B's attention geometry (4 query heads per KV head, hd 128) at a small width */
static const qmm_llm_config tiny4 = {512, 1024, 2, 8, 2, 128, 2000, 4096, 1e6, 1e-6, 1, 128};
/* Qwen3-14B's (5 query heads per KV head, hd 128): heads the mma's columns do not divide */
static const qmm_llm_config tiny5 = {512, 1024, 2, 10, 2, 128, 2000, 4096, 1e6, 1e-6, 1, 128};
/* tiny4 in groups of 64 (mlx_lm.convert's default) and tiny in groups of 32: the fused step's
 * matvecs with two and four scale|bias words a block (NOTES.md row 262) */
static const qmm_llm_config tiny4_g64 = {512, 1024, 2, 8, 2, 128, 2000, 4096, 1e6, 1e-6, 1, 64};
static const qmm_llm_config tiny_g32 = {256, 512, 2, 4, 2, 64, 1000, 12000, 1e6, 1e-6, 1, 32};

static qmm_llm_cuda_session *session(const qmm_llm_model *m, int64_t max_seq, int pdl, int graph,
                                     int attention_ref)
{
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    o.pdl = pdl, o.use_graph = graph, o.attention_ref = attention_ref;
    return test_cuda_session(m, max_seq, &o);
}

static qmm_llm_model *synthetic(const qmm_llm_config *c)
{
    return test_synthetic_model(c, test_rand_u64());
}

static void pdl_on_off_bitwise(void)
{
    const qmm_llm_config *cfgs[5] = {&tiny, &tiny4, &tiny5, &tiny4_g64, &tiny_g32};
    for (int ci = 0; ci < 5; ci++) {
        test_llm f;
        if (!test_llm_init(&f, synthetic(cfgs[ci]), 150)) continue;
        const int64_t V = f.V;
        const int32_t *ids = f.ids;
        float *a = f.a, *b = f.b;
        for (int graph = 1; graph >= 0; graph--) {
            qmm_llm_cuda_session *on = session(f.m, 400, 1, graph, 0), *off = session(f.m, 400, 0, graph, 0);
            if (on && off) {
                int32_t t1 = 0, t2 = 0;
                /* 150-token prompt: the decode steps after it run split attention */
                CHECK_OK(qmm_llm_cuda_prefill(on, ids, 150, a, &t1));
                CHECK_OK(qmm_llm_cuda_prefill(off, ids, 150, b, &t2));
                CHECKF(!memcmp(a, b, (size_t)V * 4) && t1 == t2, "prefill: PDL on and off differ");
                for (int step = 0; step < 6; step++) {
                    CHECK_OK(qmm_llm_cuda_decode(on, t1, a, &t1));
                    CHECK_OK(qmm_llm_cuda_decode(off, t2, b, &t2));
                    CHECKF(!memcmp(a, b, (size_t)V * 4) && t1 == t2,
                           "config %d, graph %d, step %d: PDL on and off differ", ci, graph, step);
                }
                int32_t o1[40], o2[40];
                CHECK_OK(qmm_llm_cuda_reset(on));
                CHECK_OK(qmm_llm_cuda_reset(off));
                CHECK_OK(qmm_llm_cuda_generate(on, ids, 100, 40, o1, NULL));
                CHECK_OK(qmm_llm_cuda_generate(off, ids, 100, 40, o2, NULL));
                CHECKF(!memcmp(o1, o2, sizeof o1), "config %d, graph %d: generated tokens differ",
                       ci, graph);
            }
            qmm_llm_cuda_session_destroy(on);
            qmm_llm_cuda_session_destroy(off);
        }
        test_llm_free(&f);
    }
}

/* Teacher-forced decode from one token: every position goes through the decode path. */
static void fused_attention_matches_reference(void)
{
    const qmm_llm_config *cfgs[5] = {&tiny, &tiny4, &tiny5, &tiny4_g64, &tiny_g32};
    for (int ci = 0; ci < 5; ci++) {
        enum { STEPS = 300 };
        test_llm f;
        if (!test_llm_init(&f, synthetic(cfgs[ci]), STEPS)) continue;
        qmm_llm_cuda_session *fs = session(f.m, 1000, 1, 1, 0), *rs = session(f.m, 1000, 1, 1, 1);
        /* the reference session runs the unfused step: the fused matvecs' rounding (RMSNorm's
         * scale after the matmul) adds to the attention's */
        const double worst = fs && rs ? test_decode_pair(&f, fs, rs, STEPS, 2e-2, "fused", ci) : 0;
        printf("    config %d: %d positions, worst logits rel err %.3g\n", ci, STEPS, worst);
        qmm_llm_cuda_session_destroy(fs);
        qmm_llm_cuda_session_destroy(rs);
        test_llm_free(&f);
    }
}

static void ten_thousand_steps(void)
{
    qmm_llm_model *m = synthetic(&tiny);
    if (!m) return;
    enum { N = 16, STEPS = 10000 };
    const int64_t V = tiny.vocab_size;
    int32_t *seq = malloc((N + STEPS + 2) * 4), *out = malloc((STEPS + 1) * 4);
    test_random_ids(seq, N, V);
    float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4);
    qmm_llm_cuda_session *s = session(m, N + STEPS + 8, 1, 1, 0);
    if (s) {
        /* warm up (graph instantiation, lazy driver state), then measure */
        CHECK_OK(qmm_llm_cuda_generate(s, seq, N, 100, out, NULL));
        CHECK_OK(qmm_llm_cuda_reset(s));
        size_t free0 = 0, free1 = 0, total = 0;
        CHECK(cudaMemGetInfo(&free0, &total) == cudaSuccess);
        CHECK_OK(qmm_llm_cuda_generate(s, seq, N, STEPS + 1, out, NULL));
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        CHECK(cudaMemGetInfo(&free1, &total) == cudaSuccess);
        printf("    device memory free before %zu, after %zu bytes\n", free0, free1);
        CHECKF(free1 + (1u << 20) >= free0, "device memory shrank by %zu bytes over %d steps",
               free0 - free1, STEPS);
        CHECKF(qmm_llm_cuda_position(s) == N + STEPS, "position %lld after %d steps",
               (long long)qmm_llm_cuda_position(s), STEPS);
        for (int i = 0; i <= STEPS; i++) CHECK(out[i] >= 0 && out[i] < V);
        /* prefill n + decode == prefill n + 1 at n = N + STEPS */
        int32_t na = -1, nb = -2;
        CHECK_OK(qmm_llm_cuda_decode(s, out[STEPS], a, &na));
        memcpy(seq + N, out, (STEPS + 1) * 4);
        CHECK_OK(qmm_llm_cuda_reset(s));
        CHECK_OK(qmm_llm_cuda_prefill(s, seq, N + STEPS + 1, b, &nb));
        double err = test_rel_err_f32(a, b, V);
        printf("    after %d decode steps: decode vs prefill of all %d tokens rel err %.3g, tokens "
               "%d / %d\n", STEPS, N + STEPS + 1, err, na, nb);
        CHECKF(err <= 1e-2, "rel err %.3g", err);
        double gap = 0;
        CHECKF(na == nb || test_near_tie(b, V, na, &gap), "tokens %d vs %d, gap %.4g", na, nb, gap);
    }
    qmm_llm_cuda_session_destroy(s);
    free(seq), free(out), free(a), free(b);
    qmm_llm_model_destroy(m);
}

static const qmm_llm_graph_profile *find(const qmm_llm_graph_profile *p, const char *name,
                                         int stamped, int *at)
{
    for (int i = 0; i < p->count; i++)
        if (p->stamped[i] == stamped && !strcmp(p->name[i], name)) {
            *at = i;
            return p;
        }
    return NULL;
}

static void graph_profile_adds_up(void)
{
    qmm_llm_model *m = synthetic(&tiny4);
    if (!m) return;
    const int L = (int)tiny4.num_layers;
    int32_t ids[256]; /* 40 used; a request for 250 must fail on the length, not read past */
    test_random_ids(ids, 256, tiny4.vocab_size);
    for (int pdl = 1; pdl >= 0; pdl--) {
        qmm_llm_cuda_session *s = session(m, 256, pdl, 1, 0);
        if (!s) continue;
        qmm_llm_graph_profile p;
        CHECK_OK(qmm_llm_cuda_profile_graph(s, ids, 40, 20, &p));
        CHECK_STATUS(qmm_llm_cuda_profile_graph(s, ids, 40, 0, &p), QMM_ERR_ARG);
        CHECK_STATUS(qmm_llm_cuda_profile_graph(s, ids, 250, 20, &p), QMM_ERR_RANGE);
        CHECK_OK(qmm_llm_cuda_profile_graph(s, ids, 40, 20, &p));
        double sum = 0;
        printf("    PDL %s: %d kernels a step, stamped %.1f us, events %.1f us\n", pdl ? "on" : "off",
               p.kernels_per_step, p.stamped_us, p.event_us);
        for (int i = 0; i < p.count; i++) {
            printf("      %-16s %s %3d launches %8.2f us %10.0f bytes\n", p.name[i],
                   p.stamped[i] == 2 ? "matvec" : p.stamped[i] ? "kernel" : "before", p.launches[i],
                   p.us[i], p.bytes[i]);
            CHECK(p.us[i] >= 0);
            sum += p.us[i];
        }
        /* the fused decode step (the default): embedding + rmsnorm, per layer 4 matvecs and the
         * attention, head + 2 argmax; each matvec a row of its own, timed from the previous
         * stamped kernel's end (stamped 2), nothing left between kernels but launch gaps */
        int at = -1;
        CHECK(find(&p, "attention", 1, &at) && p.launches[at] == L);
        CHECK(find(&p, "rmsnorm", 1, &at) && p.launches[at] == 1);
        CHECK(!find(&p, "add+rmsnorm", 1, &at) && !find(&p, "swiglu", 1, &at));
        CHECK(find(&p, "argmax", 1, &at) && p.launches[at] == 2);
        static const char *const matvecs[4] = {"q|k|v matvec", "o matvec", "gate|up matvec", "down matvec"};
        for (int i = 0; i < 4; i++)
            CHECKF(find(&p, matvecs[i], 2, &at) && p.launches[at] == L && p.bytes[at] > 0 && p.us[at] > 0,
                   "%s", matvecs[i]);
        CHECK(find(&p, "lm head matvec", 2, &at) && p.launches[at] == 1 && p.bytes[at] > 0 && p.us[at] > 0);
        for (int i = 0; i < p.count; i++) /* no matmul left unstamped */
            CHECKF(p.stamped[i] || !strcmp(p.name[i], "launch gaps"), "%s between kernels", p.name[i]);
        CHECKF(p.kernels_per_step == 5 + 5 * L, "%d kernels a step", p.kernels_per_step);
        CHECKF(sum <= p.stamped_us * 1.01 + 1 && sum >= 0.5 * p.stamped_us,
               "families add up to %.1f us of a %.1f us stamped step", sum, p.stamped_us);
        CHECK(p.event_us >= 0.9 * p.stamped_us && p.steps == 20 && p.context == 40 && p.pdl == pdl);
        CHECK(qmm_llm_cuda_position(s) == 0);
        qmm_llm_cuda_session_destroy(s);
    }
    qmm_llm_model_destroy(m);
}

/* Both sessions' logits (a, b) and tokens the same bits. */
static int same(const test_llm *f, int32_t tg, int32_t te)
{
    return !memcmp(f->a, f->b, (size_t)f->V * 4) && tg == te;
}

/* Sized for 1000 positions, the tiny models' 2 KV heads give the fused attention 16 splits
 * (132 SMs) and decode graphs of 1, 4 and 8 splits beside the full one: steps across 128, 256
 * and 512 positions replay four graphs in turn, each bit for bit the eager step (which keeps
 * the 16 splits). Then sized for 1100 positions with QMM_DECODE_ATTN=cluster (set here): the
 * eager step and the full graph run the cluster-merged kernel (32 or 16 splits, session.cu),
 * which the bucket graphs (clusters of 2 to 8 CTAs; the fused kernel's one-head blocks at one
 * split, and at 4 splits for tiny5, whose 5 one-head halves a cluster of 2 cannot hold) must
 * match bit for bit up to their reach, and the
 * teacher-forced steps go on to 1090 positions, where the full graph replays. Teacher-forced
 * steps (logits and tokens), then, on the same sessions after a reset (twice), generation from
 * position 0 and continued from its end (the host's count of the position picks the graph) and
 * the logits of one more step (the cache generation left). */
static void bucket_graphs_equal_eager(void)
{
    const qmm_llm_config *cfgs[3] = {&tiny, &tiny4, &tiny5};
    enum { P1 = 100, N1 = 60, P2 = 90, N2 = 300 };
    int sms = 0, major = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    const char *env = getenv("QMM_DECODE_ATTN");
    char *saved = env ? strdup(env) : NULL;
    for (int run_case = 0; run_case < 6; run_case++) {
        const int ci = run_case % 3, cluster = run_case >= 3;
        const int MAX_SEQ = cluster ? 1100 : 1000, LONG = cluster ? 1090 : 540;
        const int kvh = (int)cfgs[ci]->num_kv_heads;
        if (cluster) setenv("QMM_DECODE_ATTN", "cluster", 1);
        else unsetenv("QMM_DECODE_ATTN");
        test_llm f;
        if (!test_llm_init(&f, synthetic(cfgs[ci]), LONG)) continue;
        qmm_llm_cuda_session *g = session(f.m, MAX_SEQ, 1, 1, 0);
        qmm_llm_cuda_session *e = session(f.m, MAX_SEQ, 1, 0, 0);
        /* the session's splits: the cluster kernel's, or the fused kernel's rule */
        const int cs = g ? llm_cuda_decode_cluster_splits(g) : 0;
        const int nsplit = cs ? cs : llm_cuda_op_attention_decode_splits(MAX_SEQ, kvh, sms);
        int want[LLM_DECODE_BUCKETS];
        const int nb = llm_decode_buckets(nsplit, want);
        printf("    config %d, %d positions: %d splits%s, %d buckets\n", ci, MAX_SEQ, nsplit,
               cs ? " (cluster kernel)" : "", nb);
        CHECKF(nb >= 3, "config %d: %d buckets at %d splits", ci, nb, nsplit);
        CHECKF(!cluster || major < 9 || cs > 0, "config %d: compute capability %d, but the "
               "session did not take the cluster kernel", ci, major);
        if (g && e) {
            CHECK(llm_cuda_decode_buckets(g) == nb && llm_cuda_decode_buckets(e) == 0);
            CHECK(llm_cuda_decode_cluster_splits(e) == cs);
            qmm_llm_cuda_kernels kn; /* the session names its decode kernels */
            CHECK_OK(qmm_llm_cuda_session_kernels(g, &kn));
            CHECKF(!strcmp(kn.decode_step, "fused") &&
                       !strcmp(kn.decode_attention, cs ? "cluster" : "fused"),
                   "config %d: decode step %s, attention %s", ci, kn.decode_step, kn.decode_attention);
            int32_t tg = -1, te = -2;
            CHECK_OK(qmm_llm_cuda_prefill(g, f.ids, P1, f.a, &tg));
            CHECK_OK(qmm_llm_cuda_prefill(e, f.ids, P1, f.b, &te));
            CHECK(same(&f, tg, te));
            for (int p = P1; p < LONG; p++) { /* contexts P1 + 1 .. LONG */
                CHECK_OK(qmm_llm_cuda_decode(g, f.ids[p], f.a, &tg));
                CHECK_OK(qmm_llm_cuda_decode(e, f.ids[p], f.b, &te));
                if (!same(&f, tg, te)) {
                    CHECKF(0, "config %d, context %d: graph and eager differ", ci, p + 1);
                    break;
                }
            }
            int32_t first[N1 + N2];
            for (int run = 0; run < 2; run++) {
                int32_t og[N1 + N2], oe[N1 + N2];
                CHECK_OK(qmm_llm_cuda_reset(g));
                CHECK_OK(qmm_llm_cuda_reset(e));
                /* contexts P1 + 1 .. P1 + N1 - 1 (across 128), then from P1 + N1 - 1 another
                 * prompt and contexts up to P1 + N1 - 1 + P2 + N2 - 1 = 548 (256 and 512) */
                CHECK_OK(qmm_llm_cuda_generate(g, f.ids, P1, N1, og, NULL));
                CHECK_OK(qmm_llm_cuda_generate(e, f.ids, P1, N1, oe, NULL));
                CHECK_OK(qmm_llm_cuda_generate(g, f.ids + P1, P2, N2, og + N1, NULL));
                CHECK_OK(qmm_llm_cuda_generate(e, f.ids + P1, P2, N2, oe + N1, NULL));
                CHECKF(!memcmp(og, oe, sizeof og), "config %d, run %d: generated tokens differ",
                       ci, run);
                CHECK_OK(qmm_llm_cuda_decode(g, og[N1 + N2 - 1], f.a, &tg));
                CHECK_OK(qmm_llm_cuda_decode(e, oe[N1 + N2 - 1], f.b, &te));
                CHECKF(same(&f, tg, te), "config %d, run %d: the step after generation differs",
                       ci, run);
                if (run == 0) memcpy(first, og, sizeof og);
                else CHECKF(!memcmp(first, og, sizeof og), "config %d: a reset session "
                            "generates other tokens", ci);
            }
        }
        qmm_llm_cuda_session_destroy(g);
        qmm_llm_cuda_session_destroy(e);
        test_llm_free(&f);
    }
    if (saved) setenv("QMM_DECODE_ATTN", saved, 1);
    else unsetenv("QMM_DECODE_ATTN");
    free(saved);
}

/* The attention and the o projection in one kernel (QMM_DECODE_ATTN_O=fused, an experiment: one
 * split, so sessions of at most 128 positions): on tiny4 (Qwen3-4B's attention geometry) its
 * graph and eager steps bit for bit, and both against the reference session's unfused steps
 * (logits within 2e-2, tokens equal or a near tie) over 120 teacher-forced steps; tiny (hd 64)
 * and tiny5 (5 query heads per KV head: no instance) keep the fused kernel. */
static void attention_o_fused_matches_reference(void)
{
    char *saved = getenv("QMM_DECODE_ATTN_O") ? strdup(getenv("QMM_DECODE_ATTN_O")) : NULL;
    setenv("QMM_DECODE_ATTN_O", "fused", 1);
    const qmm_llm_config *cfgs[3] = {&tiny4, &tiny, &tiny5};
    for (int ci = 0; ci < 3; ci++) {
        enum { STEPS = 120 };
        test_llm f;
        if (!test_llm_init(&f, synthetic(cfgs[ci]), STEPS)) continue;
        qmm_llm_cuda_session *g = session(f.m, 128, 1, 1, 0), *e = session(f.m, 128, 1, 0, 0);
        qmm_llm_cuda_session *r = session(f.m, 128, 1, 1, 1);
        qmm_llm_cuda_kernels kg, ke;
        if (g && e && r && !qmm_llm_cuda_session_kernels(g, &kg) && !qmm_llm_cuda_session_kernels(e, &ke)) {
            const char *want = ci == 0 ? "fused with o" : "fused";
            CHECKF(!strcmp(kg.decode_attention, want) && !strcmp(ke.decode_attention, want),
                   "config %d: decode attention %s / %s, want %s", ci, kg.decode_attention,
                   ke.decode_attention, want);
            for (int i = 0; i < STEPS; i++) {
                int32_t tg, te;
                CHECK_OK(qmm_llm_cuda_decode(g, f.ids[i], f.a, &tg));
                CHECK_OK(qmm_llm_cuda_decode(e, f.ids[i], f.b, &te));
                CHECKF(!memcmp(f.a, f.b, (size_t)f.V * 4) && tg == te,
                       "config %d, position %d: graph and eager steps differ", ci, i);
            }
            qmm_llm_cuda_session_destroy(g);
            g = session(f.m, 128, 1, 1, 0);
            const double worst = g ? test_decode_pair(&f, g, r, STEPS, 2e-2, "attention+o", ci) : 0;
            printf("    config %d (%s): %d positions, worst logits rel err %.3g\n", ci, want, STEPS, worst);
        }
        qmm_llm_cuda_session_destroy(g);
        qmm_llm_cuda_session_destroy(e);
        qmm_llm_cuda_session_destroy(r);
        test_llm_free(&f);
    }
    if (saved) setenv("QMM_DECODE_ATTN_O", saved, 1);
    else unsetenv("QMM_DECODE_ATTN_O");
    free(saved);
}

TEST_GPU_MAIN("the decode step is not tested here", pdl_on_off_bitwise,
              fused_attention_matches_reference, ten_thousand_steps, graph_profile_adds_up,
              bucket_graphs_equal_eager, attention_o_fused_matches_reference)
#endif
