/* The CUDA forward against the CPU reference forward on tiny Qwen3 checkpoints written by the
 * writer (and on synthetic Qwen3-0.6B / 4B shapes): last-position logits within 2e-2, the same
 * greedy tokens (or a documented near tie), decode == longer prefill, graph == eager, split-K on
 * vs off, chunked prefill, long-context decode splits, errors, the profile. Skips without a GPU. */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "llm/cuda/ops_entry.h" /* llm_op_attention_prefill_wgmma_supported */
#include "llm/hf_random.h"

static const qmm_llm_config tiny = {256, 512, 2, 4, 2, 64, 1000, 1024, 1e6, 1e-6, 1, 128};
/* Qwen3-14B's attention geometry (5 query heads per KV head, hd 128) at a small width */
static const qmm_llm_config tiny5 = {512, 1024, 2, 10, 2, 128, 1000, 1024, 1e6, 1e-6, 1, 128};


static qmm_llm_cuda_session *gpu_session(const qmm_llm_model *m, int64_t max_seq, int split_k,
                                         int graph, int64_t chunk)
{
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    o.split_k = split_k, o.use_graph = graph, o.max_chunk = chunk;
    return test_cuda_session(m, max_seq, &o);
}

/* Prefill n tokens on both backends; compare the last-position logits and the next token. */
static void compare_prefill(const qmm_llm_model *m, int n, const char *what)
{
    const qmm_llm_config *c = qmm_llm_model_config(m);
    int64_t V = c->vocab_size;
    int32_t *ids = malloc((size_t)n * 4);
    test_random_ids(ids, n, V);
    float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4);
    qmm_llm_cpu_session *cs = NULL;
    qmm_llm_cuda_session *gs = gpu_session(m, n + 4, 1, 1, 0);
    CHECK_OK(qmm_llm_cpu_session_create(m, n + 4, 0, &cs));
    if (cs && gs) {
        int32_t next = -1;
        CHECK_OK(qmm_llm_cpu_prefill(cs, ids, n, a));
        CHECK_OK(qmm_llm_cuda_prefill(gs, ids, n, b, &next));
        double err = test_rel_err_f32(b, a, V), gap;
        printf("    %s, prefill %d: logits rel err %.3g\n", what, n, err);
        CHECKF(err <= 2e-2, "%s: logits rel err %.3g", what, err);
        CHECKF(test_near_tie(a, V, next, &gap), "%s: GPU picked %d, CPU logit gap %.4g", what, next, gap);
        CHECK(qmm_llm_cuda_position(gs) == n);
    }
    qmm_llm_cpu_session_destroy(cs);
    qmm_llm_cuda_session_destroy(gs);
    free(ids), free(a), free(b);
}

static void tiny_prefill_matches_cpu(void)
{
    qmm_llm_model *m = test_checkpoint_model(&tiny);
    if (!m) return;
    compare_prefill(m, 1, "tiny");
    compare_prefill(m, 13, "tiny");
    compare_prefill(m, 100, "tiny");
    qmm_llm_model_destroy(m);
    m = test_checkpoint_model(&tiny5);
    if (!m) return;
    compare_prefill(m, 13, "tiny5 (5 query heads per KV head)");
    compare_prefill(m, 200, "tiny5 (5 query heads per KV head)");
    qmm_llm_model_destroy(m);
}

static void untied_mha_hd128_matches_cpu(void)
{
    qmm_llm_config c = tiny;
    c.tie_word_embeddings = 0;
    c.num_kv_heads = 4;
    c.head_dim = 128;
    qmm_llm_model *m = test_checkpoint_model(&c);
    if (!m) return;
    compare_prefill(m, 9, "untied, 4 KV heads, hd 128");
    qmm_llm_model_destroy(m);
}

/* 16 greedy steps: the GPU's chained generate against the CPU's, step by step. */
static void greedy_tokens_match_cpu_on(const qmm_llm_config *c)
{
    enum { N = 7, STEPS = 16 };
    test_llm f;
    if (!test_llm_init(&f, test_checkpoint_model(c), N)) return;
    int32_t gpu[STEPS], cpu[STEPS];
    qmm_llm_cuda_session *gs = gpu_session(f.m, N + STEPS, 1, 1, 0);
    qmm_llm_cpu_session *cs = NULL;
    CHECK_OK(qmm_llm_cpu_session_create(f.m, N + STEPS, 0, &cs));
    if (gs && cs) {
        qmm_llm_timing t;
        CHECK_OK(qmm_llm_cuda_generate(gs, f.ids, N, STEPS, gpu, &t));
        CHECK(t.prefill_ms > 0 && t.decode_ms > 0);
        /* the CPU follows the GPU's tokens, so one near tie does not derail the comparison */
        float *logits = f.a;
        CHECK_OK(qmm_llm_cpu_prefill(cs, f.ids, N, logits));
        int same = 0;
        for (int i = 0; i < STEPS; i++) {
            qmm_llm_argmax(logits, f.V, &cpu[i]);
            double gap;
            if (gpu[i] == cpu[i]) same++;
            else if (test_near_tie(logits, f.V, gpu[i], &gap))
                printf("    step %d: GPU %d, CPU %d: a near tie (CPU logits differ by %.4g)\n", i,
                       gpu[i], cpu[i], gap);
            else
                test_fail(__FILE__, __LINE__, "step %d: GPU %d, CPU %d, CPU logit gap %.4g", i,
                          gpu[i], cpu[i], gap);
            if (i + 1 < STEPS) CHECK_OK(qmm_llm_cpu_decode(cs, gpu[i], logits));
        }
        printf("    %lld/%lld heads: %d of %d greedy tokens identical\n", (long long)c->num_heads,
               (long long)c->num_kv_heads, same, STEPS);
    }
    qmm_llm_cuda_session_destroy(gs);
    qmm_llm_cpu_session_destroy(cs);
    test_llm_free(&f);
}

static void greedy_tokens_match_cpu(void)
{
    greedy_tokens_match_cpu_on(&tiny);
    greedy_tokens_match_cpu_on(&tiny5);
}

/* prefill(n) + decode == prefill(n + 1) at the last position, on the GPU */
static void decode_equals_longer_prefill(void)
{
    enum { N = 20 };
    test_llm f;
    if (!test_llm_init(&f, test_checkpoint_model(&tiny), N + 1)) return;
    qmm_llm_cuda_session *s = gpu_session(f.m, 64, 1, 1, 0);
    if (s) {
        int32_t na, nb;
        CHECK_OK(qmm_llm_cuda_prefill(s, f.ids, N, NULL, NULL));
        CHECK_OK(qmm_llm_cuda_decode(s, f.ids[N], f.a, &na));
        CHECK_OK(qmm_llm_cuda_reset(s));
        CHECK_OK(qmm_llm_cuda_prefill(s, f.ids, N + 1, f.b, &nb));
        double err = test_rel_err_f32(f.a, f.b, f.V), gap;
        printf("    decode vs prefill of n + 1: rel err %.3g\n", err);
        /* the decode is the fused step (RMSNorm's scale applied after the matvec, the residual
         * adds in its epilogues), the prefill the unfused composition on the wgmma kernel: two
         * roundings of the same model, each checked against the CPU elsewhere; the model-level
         * budget applies (0.0080 before the fused step, 0.0102 after, H200, 2026-11-30) */
        CHECKF(err <= 2e-2, "rel err %.3g", err);
        CHECKF(na == nb || test_near_tie(f.b, f.V, na, &gap), "tokens %d vs %d", na, nb);
    }
    qmm_llm_cuda_session_destroy(s);
    test_llm_free(&f);
}

/* The graph replays exactly the eager kernels: bitwise equal logits and tokens. */
static void graph_decode_equals_eager_on(const qmm_llm_config *c)
{
    test_llm f;
    if (!test_llm_init(&f, test_checkpoint_model(c), 5)) return;
    qmm_llm_cuda_session *g = gpu_session(f.m, 64, 1, 1, 0), *e = gpu_session(f.m, 64, 1, 0, 0);
    if (g && e) {
        int32_t tg = 0, te = 0;
        CHECK_OK(qmm_llm_cuda_prefill(g, f.ids, 5, NULL, &tg));
        CHECK_OK(qmm_llm_cuda_prefill(e, f.ids, 5, NULL, &te));
        CHECK(tg == te);
        for (int step = 0; step < 8; step++) {
            CHECK_OK(qmm_llm_cuda_decode(g, tg, f.a, &tg));
            CHECK_OK(qmm_llm_cuda_decode(e, te, f.b, &te));
            CHECKF(!memcmp(f.a, f.b, (size_t)f.V * 4) && tg == te, "step %d: graph and eager differ",
                   step);
        }
        int32_t og[10], oe[10];
        CHECK_OK(qmm_llm_cuda_reset(g));
        CHECK_OK(qmm_llm_cuda_reset(e));
        CHECK_OK(qmm_llm_cuda_generate(g, f.ids, 5, 10, og, NULL));
        CHECK_OK(qmm_llm_cuda_generate(e, f.ids, 5, 10, oe, NULL));
        CHECK(!memcmp(og, oe, sizeof og));
        /* generate twice from a reset: the same tokens */
        CHECK_OK(qmm_llm_cuda_reset(g));
        CHECK_OK(qmm_llm_cuda_generate(g, f.ids, 5, 10, oe, NULL));
        CHECK(!memcmp(og, oe, sizeof og));
    }
    qmm_llm_cuda_session_destroy(g);
    qmm_llm_cuda_session_destroy(e);
    test_llm_free(&f);
}

static void graph_decode_equals_eager(void)
{
    graph_decode_equals_eager_on(&tiny);
    graph_decode_equals_eager_on(&tiny5);
}

static void split_k_off_and_chunking(void)
{
    enum { N = 40 };
    test_llm f;
    if (!test_llm_init(&f, test_checkpoint_model(&tiny), N)) return;
    float *c = malloc((size_t)f.V * 4);
    qmm_llm_cuda_session *on = gpu_session(f.m, 64, 1, 1, 0), *off = gpu_session(f.m, 64, 0, 1, 0);
    qmm_llm_cuda_session *chunked = gpu_session(f.m, 64, 1, 1, 16); /* 16 + 16 + 8 rows */
    if (on && off && chunked) {
        CHECK_OK(qmm_llm_cuda_prefill(on, f.ids, N, f.a, NULL));
        CHECK_OK(qmm_llm_cuda_prefill(off, f.ids, N, f.b, NULL));
        CHECK_OK(qmm_llm_cuda_prefill(chunked, f.ids, N, c, NULL));
        double e1 = test_rel_err_f32(f.b, f.a, f.V), e2 = test_rel_err_f32(c, f.a, f.V);
        printf("    split-K off vs on: %.3g; chunked vs whole: %.3g\n", e1, e2);
        CHECK(e1 <= 2e-2 && e2 <= 2e-2);
    }
    qmm_llm_cuda_session_destroy(on);
    qmm_llm_cuda_session_destroy(off);
    qmm_llm_cuda_session_destroy(chunked);
    free(c);
    test_llm_free(&f);
}

/* A long context: the decode attention splits the sequence (max_seq 1000 -> 8 splits + combine). */
static void long_context_decode_matches_cpu(void)
{
    enum { N = 700 };
    test_llm f;
    if (!test_llm_init(&f, test_checkpoint_model(&tiny), N)) return;
    qmm_llm_cuda_session *gs = gpu_session(f.m, 1000, 1, 1, 0);
    qmm_llm_cpu_session *cs = NULL;
    CHECK_OK(qmm_llm_cpu_session_create(f.m, 1000, 0, &cs));
    if (gs && cs) {
        int32_t next;
        CHECK_OK(qmm_llm_cpu_prefill(cs, f.ids, N, f.a));
        CHECK_OK(qmm_llm_cuda_prefill(gs, f.ids, N, f.b, &next));
        double err = test_rel_err_f32(f.b, f.a, f.V), gap;
        printf("    prefill %d: rel err %.3g\n", N, err);
        CHECK(err <= 2e-2);
        for (int step = 0; step < 3; step++) {
            CHECK_OK(qmm_llm_cpu_decode(cs, next, f.a));
            CHECK_OK(qmm_llm_cuda_decode(gs, next, f.b, &next));
            err = test_rel_err_f32(f.b, f.a, f.V);
            printf("    decode at %d: rel err %.3g\n", N + step, err);
            CHECK(err <= 2e-2);
            CHECK(test_near_tie(f.a, f.V, next, &gap));
        }
    }
    qmm_llm_cuda_session_destroy(gs);
    qmm_llm_cpu_session_destroy(cs);
    test_llm_free(&f);
}

/* The warpgroup-MMA prefill attention runs here (hd 128 on sm_90). */
static int wgmma_prefill_runs(int64_t hd)
{
#ifdef QMM_HAVE_CUDA
    return llm_op_attention_prefill_wgmma_supported((int)hd);
#else
    (void)hd;
    return 0;
#endif
}

/* A CUDA session whose prefill attention is the one QMM_PREFILL_ATTN=mode names ("mma", the
 * mma.sync kernel; "wgmma" or "wgmma_pipe", the warpgroup-MMA kernel's schedules), read at
 * creation (the caller's value is restored); NULL where the warpgroup-MMA kernel does not run. */
static qmm_llm_cuda_session *wgmma_attention_session(qmm_llm_model *m, int64_t hd, const char *mode)
{
    if (!wgmma_prefill_runs(hd)) return NULL;
    const char *env = getenv("QMM_PREFILL_ATTN");
    char *saved = env ? strdup(env) : NULL;
    setenv("QMM_PREFILL_ATTN", mode, 1);
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    qmm_llm_cuda_session *s = test_cuda_session(m, 640, &o);
    if (saved) setenv("QMM_PREFILL_ATTN", saved, 1);
    else unsetenv("QMM_PREFILL_ATTN");
    free(saved);
    return s;
}

/* The tensor-core prefill attention (default) against the fp32 CUDA-core kernel, on prompts that
 * cover partial row blocks and several key tiles; both head dims. At hd 128 on sm_90, where the
 * default is the warpgroup-MMA kernel a tile at a time (bench/NOTES.md row 180), the mma.sync
 * kernel and both warpgroup-MMA schedules (row 181: pipelined), each forced, the same way. */
static void tensor_core_attention_matches_fp32(void)
{
    const int64_t hds[2] = {64, 128};
    int wgmma_ran = 0;
    for (int i = 0; i < 2; i++) {
        qmm_llm_config c = tiny;
        c.head_dim = hds[i];
        qmm_llm_model *m = test_synthetic_model(&c, 11 + (uint64_t)i);
        if (!m) continue;
        const int lens[3] = {2, 77, 300};
        for (int li = 0; li < 3; li++) {
            int n = lens[li];
            int32_t *ids = malloc((size_t)n * 4);
            test_random_ids(ids, n, c.vocab_size);
            float *a = malloc((size_t)c.vocab_size * 4), *b = malloc((size_t)c.vocab_size * 4);
            float *w = malloc((size_t)c.vocab_size * 4);
            qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
            qmm_llm_cuda_session *tc = test_cuda_session(m, 640, &o);
            static const char *modes[3] = {"mma", "wgmma", "wgmma_pipe"};
            qmm_llm_cuda_session *wg[3] = {wgmma_attention_session(m, c.head_dim, modes[0]),
                                           wgmma_attention_session(m, c.head_dim, modes[1]),
                                           wgmma_attention_session(m, c.head_dim, modes[2])};
            o.attention_ref = 1;
            qmm_llm_cuda_session *ref = test_cuda_session(m, 640, &o);
            if (tc && ref) {
                /* a first chunk, then a second one at a non-zero position */
                CHECK_OK(qmm_llm_cuda_prefill(tc, ids, n, NULL, NULL));
                CHECK_OK(qmm_llm_cuda_prefill(ref, ids, n, NULL, NULL));
                CHECK_OK(qmm_llm_cuda_prefill(tc, ids, n, a, NULL));
                CHECK_OK(qmm_llm_cuda_prefill(ref, ids, n, b, NULL));
                double err = test_rel_err_f32(a, b, c.vocab_size);
                printf("    hd %lld, 2 x %d rows: tensor-core vs fp32 attention rel err %.3g\n",
                       (long long)hds[i], n, err);
                /* logits after 2 layers; the tensor-core kernel rounds P to bf16 for P·V, so
                 * this sits near 1e-2: the model-level budget (2e-2) applies */
                CHECKF(err <= 2e-2, "rel err %.3g", err);
                /* the session names the kernels it runs: the default, the reference */
                qmm_llm_cuda_kernels kn;
                CHECK_OK(qmm_llm_cuda_session_kernels(tc, &kn));
                const char *want = wgmma_prefill_runs(c.head_dim) ? "wgmma_by_length" : "mma";
                CHECKF(getenv("QMM_PREFILL_ATTN") || !strcmp(kn.prefill_attention, want),
                       "default prefill attention %s, not %s", kn.prefill_attention, want);
                CHECK_OK(qmm_llm_cuda_session_kernels(ref, &kn));
                CHECK(!strcmp(kn.prefill_attention, "reference") &&
                      !strcmp(kn.decode_attention, "reference"));
                for (int k = 0; k < 3; k++) {
                    if (!wg[k]) continue;
                    /* the session runs the kernel it was asked for (row 181's selection bug:
                     * wgmma_pipe sessions ran the tile-at-a-time kernel, same bits) */
                    CHECK_OK(qmm_llm_cuda_session_kernels(wg[k], &kn));
                    CHECKF(!strcmp(kn.prefill_attention, modes[k]), "QMM_PREFILL_ATTN=%s ran %s",
                           modes[k], kn.prefill_attention);
                    CHECK_OK(qmm_llm_cuda_prefill(wg[k], ids, n, NULL, NULL));
                    CHECK_OK(qmm_llm_cuda_prefill(wg[k], ids, n, w, NULL));
                    err = test_rel_err_f32(w, b, c.vocab_size);
                    printf("    hd %lld, 2 x %d rows: QMM_PREFILL_ATTN=%s vs fp32 attention rel "
                           "err %.3g\n", (long long)hds[i], n, modes[k], err);
                    CHECKF(err <= 2e-2, "prefill attention %s: rel err %.3g", modes[k], err);
                    wgmma_ran++;
                }
            }
            qmm_llm_cuda_session_destroy(tc);
            for (int k = 0; k < 3; k++) qmm_llm_cuda_session_destroy(wg[k]);
            qmm_llm_cuda_session_destroy(ref);
            free(ids), free(a), free(b), free(w);
        }
        qmm_llm_model_destroy(m);
    }
    if (!wgmma_ran) printf("    the warpgroup-MMA attention: not on this GPU (sm_90, hd 128)\n");
}

/* Stacked q|k|v and gate|up weights compute the same projections as the separate ones. */
static void fused_projections_match_separate(void)
{
    enum { N = 24 };
    test_llm f;
    if (!test_llm_init(&f, test_checkpoint_model(&tiny), N)) return;
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    o.fuse_projections = 0; /* fused is the default */
    qmm_llm_cuda_session *sep = test_cuda_session(f.m, 64, &o);
    o.fuse_projections = 1;
    qmm_llm_cuda_session *fus = test_cuda_session(f.m, 64, &o);
    if (sep && fus) {
        int32_t ts, tf;
        CHECK_OK(qmm_llm_cuda_prefill(sep, f.ids, N, f.a, &ts));
        CHECK_OK(qmm_llm_cuda_prefill(fus, f.ids, N, f.b, &tf));
        double err = test_rel_err_f32(f.b, f.a, f.V), gap;
        printf("    prefill %d: fused vs separate rel err %.3g\n", N, err);
        CHECK(err <= 1e-2);
        CHECK(ts == tf || test_near_tie(f.a, f.V, tf, &gap));
        for (int step = 0; step < 4; step++) {
            /* both sessions take the same token (the separate one's previous choice) */
            const int32_t in = ts;
            CHECK_OK(qmm_llm_cuda_decode(sep, in, f.a, &ts));
            CHECK_OK(qmm_llm_cuda_decode(fus, in, f.b, &tf));
            err = test_rel_err_f32(f.b, f.a, f.V);
            printf("    decode step %d: fused vs separate rel err %.3g\n", step, err);
            CHECK(err <= 1e-2);
        }
    }
    qmm_llm_cuda_session_destroy(sep);
    qmm_llm_cuda_session_destroy(fus);
    test_llm_free(&f);
}

static void errors_and_profile(void)
{
    qmm_llm_model *m = test_synthetic_model(&tiny, 9);
    if (!m) return;
    qmm_llm_cuda_session *s = gpu_session(m, 16, 1, 1, 0);
    if (s) {
        int32_t ids[20] = {0};
        float logits[1000];
        CHECK_STATUS(qmm_llm_cuda_prefill(s, ids, 17, logits, NULL), QMM_ERR_RANGE);
        int32_t bad[2] = {3, 1000};
        CHECK_STATUS(qmm_llm_cuda_prefill(s, bad, 2, logits, NULL), QMM_ERR_RANGE);
        CHECK_STATUS(qmm_llm_cuda_decode(s, -1, logits, NULL), QMM_ERR_RANGE);
        CHECK(qmm_llm_cuda_position(s) == 0);
        int32_t out[8];
        CHECK_STATUS(qmm_llm_cuda_generate(s, ids, 10, 8, out, NULL), QMM_ERR_RANGE);
        CHECK_OK(qmm_llm_cuda_generate(s, ids, 9, 8, out, NULL));
        qmm_llm_profile pp, pd;
        CHECK_OK(qmm_llm_cuda_profile(s, ids, 8, &pp, &pd));
        CHECK(pp.count > 5 && pd.count > 5 && pp.total_ms > 0 && pd.total_ms > 0);
        int has_attention = 0;
        for (int i = 0; i < pd.count; i++) has_attention |= !strcmp(pd.name[i], "attention");
        CHECK(has_attention);
        CHECK(qmm_llm_cuda_position(s) == 0);
    }
    qmm_llm_cuda_session_destroy(s);
    qmm_llm_cuda_session *t = NULL;
    CHECK_STATUS(qmm_llm_cuda_session_create(m, tiny.max_position_embeddings + 1, NULL, &t),
                 QMM_ERR_RANGE);
    qmm_llm_model_destroy(m);
}

/* Real widths (synthetic weights): Qwen3-0.6B (2 query heads per KV head) and Qwen3-4B (4). */
static void synthetic_presets_match_cpu(void)
{
    const char *names[] = {"qwen3-0.6b", "qwen3-4b"};
    for (int i = 0; i < 2; i++) {
        qmm_llm_model *m = NULL;
        CHECK_OK(qmm_llm_model_open(names[i], 7, &m));
        if (!m) continue;
        compare_prefill(m, 3, names[i]);
        qmm_llm_model_destroy(m);
    }
}

TEST_GPU_MAIN("the Qwen3 CUDA forward is not tested here", tiny_prefill_matches_cpu,
              untied_mha_hd128_matches_cpu, greedy_tokens_match_cpu, decode_equals_longer_prefill,
              graph_decode_equals_eager, split_k_off_and_chunking, long_context_decode_matches_cpu,
              tensor_core_attention_matches_fp32, fused_projections_match_separate,
              errors_and_profile, synthetic_presets_match_cpu)
