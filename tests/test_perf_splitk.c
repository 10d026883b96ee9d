/* The split-K wave models: the document's numbers (A100, H100), the refined model's floor and
 * parts, the best-split rule in both of its regimes, Stream-K, presets and argument checks. */
#include <math.h>
#include <string.h>

#include "harness.h"

#define NEAR(x, want, tol) (fabs((x) - (want)) <= (tol))

static qmm_gpu_caps gpu(const char *name)
{
    qmm_gpu_caps g = {0};
    CHECK_OK(qmm_model_gpu_preset(name, &g));
    return g;
}

static qmm_model_kernel kernel(const char *name)
{
    qmm_model_kernel k = {0};
    CHECK_OK(qmm_model_kernel_preset(name, &k));
    return k;
}

static void test_presets(void)
{
    static const struct {
        const char *name;
        int sms;
        double tflops, tbs;
    } want[] = {
        {"a100", 108, 312, 1.555},
        {"h100", 132, 989.5, 3.35},
        {"h200", 132, 989.5, 4.8},
        {"h200-measured", 132, 720, 4.2},
    };
    int count = 0;
    while (qmm_model_gpu_preset_name(count)) count++;
    CHECK(count == 4);
    for (int i = 0; i < 4; i++) {
        qmm_gpu_caps g = gpu(want[i].name);
        CHECK(!strcmp(qmm_model_gpu_preset_name(i), want[i].name));
        CHECKF(g.sms == want[i].sms && g.peak_tflops == want[i].tflops &&
                   g.bandwidth_tbs == want[i].tbs && g.launch_us >= 0 &&
                   !strcmp(g.name, want[i].name),
               "%s", want[i].name);
    }
    qmm_gpu_caps g;
    CHECK_STATUS(qmm_model_gpu_preset("v100", &g), QMM_ERR_NOT_FOUND);
    CHECK(strstr(qmm_last_error(), "v100") != NULL);
    CHECK_STATUS(qmm_model_gpu_preset(NULL, &g), QMM_ERR_NULL);
    qmm_model_kernel w4 = kernel("w4"), doc = kernel("document");
    CHECK(w4.weight_bytes_per_elem == 0.53125 && w4.partial_type == QMM_BF16 && w4.tile_k == 128);
    CHECK(doc.tile_m == 128 && doc.tile_n == 128 && doc.compute_efficiency == 1 &&
          doc.blocks_per_sm == 1 && doc.partial_type == QMM_F32 && doc.weight_bytes_per_elem == 2);
    CHECK_STATUS(qmm_model_kernel_preset("w8", &w4), QMM_ERR_NOT_FOUND);
}

static void test_document_a100(void)
{
    /* 512x512x16384 on the A100. The 12-split's formula value is 47.157 µs, 47.2 at 0.1 µs
     * (the seed table's "47.1" truncates it). */
    static const struct {
        int s;
        int64_t blocks, waves;
        double exact, table;
    } rows[] = {
        {1, 16, 1, 185.8399, 185.8},   {4, 64, 1, 51.8546, 51.9}, {6, 96, 1, 39.0652, 39.1},
        {7, 112, 2, 62.5377, 62.5},    {12, 192, 2, 47.1571, 47.2},
    };
    qmm_gpu_caps a = gpu("a100");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        qmm_model_estimate e;
        CHECK_OK(qmm_model_splitk_document(&a, 512, 512, 16384, 128, 128, rows[i].s, &e));
        printf("    a100 s=%-2d blocks %3lld waves %lld  %.4f us\n", rows[i].s,
               (long long)e.blocks, (long long)e.waves, e.total_us);
        CHECK(e.split == rows[i].s && e.tiles == 16);
        CHECK(e.blocks == rows[i].blocks && e.waves == rows[i].waves);
        CHECKF(NEAR(e.total_us, rows[i].exact, 5e-4), "s=%d: %.5f", rows[i].s, e.total_us);
        CHECKF(NEAR(round(e.total_us * 10) / 10, rows[i].table, 1e-9), "s=%d: %.5f", rows[i].s,
               e.total_us);
        CHECK(NEAR(e.total_us, e.compute_us + e.reduction_us, 1e-12));
        CHECK(e.memory_us == 0 && e.launch_us == 0 && (rows[i].s > 1) == (e.reduction_us > 0));
        CHECK(NEAR(qmm_model_splitk_document_us(&a, 512, 512, 16384, 128, 128, rows[i].s),
                   e.total_us, 0));
    }
    qmm_model_estimate best;
    CHECK_OK(qmm_model_best_split_document(&a, 512, 512, 16384, 128, 128, 64, &best));
    CHECK(best.split == 6 && best.blocks == 96 && best.waves == 1);
    CHECK(NEAR(best.total_us, 39.0652, 5e-4));
}

static void test_document_h100_h200(void)
{
    qmm_gpu_caps h = gpu("h100");
    qmm_model_estimate best;
    CHECK_OK(qmm_model_best_split_document(&h, 512, 512, 16384, 128, 128, 64, &best));
    CHECKF(best.split == 8 && best.blocks == 128 && best.waves == 1, "best %d", best.split);
    CHECKF(NEAR(best.total_us, 13.96, 0.005), "%.4f", best.total_us);
    /* The H200 has the H100's SMs and peak with more bandwidth: same split, cheaper partials. */
    qmm_gpu_caps h2 = gpu("h200");
    qmm_model_estimate b2;
    CHECK_OK(qmm_model_best_split_document(&h2, 512, 512, 16384, 128, 128, 64, &b2));
    CHECK(b2.split == 8 && NEAR(b2.total_us, 12.4476, 5e-4));
    printf("    h100 best s=8 %.4f us, h200 best s=%d %.4f us\n", best.total_us, b2.split,
           b2.total_us);
}

static void test_refined_floor_h100(void)
{
    /* The document's shape as a bf16 GEMM: A 512x16384, W 512x16384, C 512x512, 2 bytes each:
     * 34,078,720 bytes over 3.35 TB/s = 10.17 µs, which the document model leaves out. */
    qmm_gpu_caps h = gpu("h100");
    qmm_model_kernel doc = kernel("document");
    qmm_model_estimate e;
    CHECK_OK(qmm_model_splitk_refined(&h, &doc, 512, 512, 16384, 8, &e));
    CHECK(e.operand_bytes == 34078720.0);
    CHECKF(NEAR(e.memory_us, 10.1728, 1e-4), "%.5f", e.memory_us);
    CHECK(e.memory_bound); /* 8.95 µs of compute at s = 8 sits under the floor */
    CHECK(NEAR(e.compute_us, 8.9524, 1e-4));
    CHECK(NEAR(e.total_us, e.memory_us + e.launch_us + e.reduction_us, 1e-9));
    CHECK(e.reduction_us > e.launch_us); /* the partials plus the reduce kernel's launch */
    /* With W4 weights (0.53125 B/weight) the floor shrinks to 21,757,952 bytes. */
    doc.weight_bytes_per_elem = 0.53125;
    CHECK_OK(qmm_model_splitk_refined(&h, &doc, 512, 512, 16384, 8, &e));
    CHECK(e.operand_bytes == 16777216.0 + 4456448.0 + 524288.0);
    printf("    h100 floor: bf16 10.17 us, W4 %.2f us\n", e.memory_us);
}

static void test_refined_reduces_to_document(void)
{
    /* Document kernel, no launch cost: wherever compute tops the floor, the two models agree. */
    const char *names[] = {"a100", "h100", "h200", "h200-measured"};
    int agreed = 0;
    for (int gi = 0; gi < 4; gi++) {
        qmm_gpu_caps g = gpu(names[gi]);
        g.launch_us = 0;
        qmm_model_kernel doc = kernel("document");
        for (int s = 1; s <= 24; s++) {
            qmm_model_estimate d, r;
            CHECK_OK(qmm_model_splitk_document(&g, 512, 512, 16384, 128, 128, s, &d));
            CHECK_OK(qmm_model_splitk_refined(&g, &doc, 512, 512, 16384, s, &r));
            CHECK(d.blocks == r.blocks && d.waves == r.waves);
            CHECK(NEAR(d.compute_us, r.compute_us, 1e-9 * d.compute_us));
            CHECK(NEAR(d.reduction_us, r.reduction_us, 1e-9 * d.total_us));
            if (r.compute_us >= r.memory_us) {
                CHECKF(NEAR(d.total_us, r.total_us, 1e-9 * d.total_us), "%s s=%d", names[gi], s);
                agreed++;
            } else {
                CHECK(r.total_us > d.total_us);
            }
        }
    }
    CHECK(agreed > 40);
}

static void test_refined_parts(void)
{
    qmm_gpu_caps g = gpu("h200");
    qmm_model_kernel k = kernel("w4");
    qmm_model_estimate base, e;
    /* Qwen3-4B q projection at M = 32: A 32x2560 bf16, W4 4096x2560, C 32x4096 bf16. */
    CHECK_OK(qmm_model_splitk_refined(&g, &k, 32, 4096, 2560, 1, &base));
    CHECK(base.operand_bytes == 163840.0 + 5570560.0 + 262144.0);
    CHECK(base.tiles == 64 && base.blocks == 64 && base.waves == 1 && base.reduction_us == 0);
    CHECK(NEAR(base.total_us, fmax(base.compute_us, base.memory_us) + g.launch_us, 1e-12));
    /* Split 2: partials in bf16 = 2 planes written + read back, plus the reduce launch. */
    CHECK_OK(qmm_model_splitk_refined(&g, &k, 32, 4096, 2560, 2, &e));
    CHECK(e.partial_bytes == 2.0 * 2 * 32 * 4096 * 2);
    CHECK(NEAR(e.reduction_us, e.partial_bytes / 4.8e6 + g.launch_us, 1e-12));
    CHECK(NEAR(e.compute_us, base.compute_us / 2, 1e-9));
    k.partial_type = QMM_F32; /* fp32 partials cost twice the traffic */
    qmm_model_estimate f;
    CHECK_OK(qmm_model_splitk_refined(&g, &k, 32, 4096, 2560, 2, &f));
    CHECK(f.partial_bytes == 2 * e.partial_bytes);
    /* Efficiency scales compute; blocks per SM widens a wave and slows each block. */
    k.partial_type = QMM_BF16;
    k.compute_efficiency = 0.25;
    CHECK_OK(qmm_model_splitk_refined(&g, &k, 32, 4096, 2560, 1, &f));
    CHECK(NEAR(f.compute_us, 2 * base.compute_us, 1e-9));
    k.compute_efficiency = 0.5;
    k.blocks_per_sm = 2;
    CHECK_OK(qmm_model_splitk_refined(&g, &k, 32, 4096, 2560, 5, &f)); /* 320 blocks, 264 slots */
    CHECK(f.blocks == 320 && f.waves == 2);
    CHECK(NEAR(f.compute_us, 2 * 2 * base.compute_us / 5, 1e-9));
    CHECK_OK(qmm_model_splitk_refined(&g, &k, 32, 4096, 2560, 4, &f)); /* 256 blocks: 1 wave */
    CHECK(f.waves == 1 && NEAR(f.compute_us, 2 * base.compute_us / 4, 1e-9));
    /* Ragged tiles: ceil on both axes. */
    k.blocks_per_sm = 1;
    CHECK_OK(qmm_model_splitk_refined(&g, &k, 65, 129, 128, 1, &f));
    CHECK(f.tiles == 2 * 3);
}

/* The document model's compute of one unsplit block (C) and its reduction per split (R). */
static void doc_terms(const qmm_gpu_caps *g, int64_t m, int64_t n, int64_t k, int bm, int bn,
                      double *c, double *r)
{
    *c = 2.0 * bm * bn * (double)k / (g->peak_tflops * 1e6 / g->sms);
    *r = 8.0 * (double)m * (double)n / (g->bandwidth_tbs * 1e6);
}

static void test_best_split_rule(void)
{
    /* Kind 1, the document's regime: the largest split that keeps one wave. */
    qmm_gpu_caps a = gpu("a100"), h = gpu("h100");
    qmm_model_estimate b;
    CHECK_OK(qmm_model_best_split_document(&a, 512, 512, 16384, 128, 128, 16, &b));
    CHECK(b.split == 108 / 16);
    CHECK_OK(qmm_model_best_split_document(&h, 512, 512, 16384, 128, 128, 16, &b));
    CHECK(b.split == 132 / 16);
    /* Kind 2, the reduction outweighs the saving: a short K keeps the kernel unsplit. */
    CHECK_OK(qmm_model_best_split_document(&a, 512, 512, 256, 128, 128, 16, &b));
    CHECK(b.split == 1);
    /* And in between: K = 1024 stops at s = 3, short of the one-wave limit 6. */
    CHECK_OK(qmm_model_best_split_document(&a, 512, 512, 1024, 128, 128, 16, &b));
    CHECK(b.split == 3);

    /* Random GPUs and shapes. With s1 = floor(SMs/tiles) >= 2, time is C at s = 1, C/s + R*s
     * for 2 <= s <= s1, and any s in (s1, 2*s1] runs two waves: 2C/s + Rs > C/s1 + R*s1.
     * So over s <= 2*s1:
     *   R < C / max(4, s1*(s1-1))  (time still falls at s1)     ->  best = s1;
     *   R > C/4                    (C/s + Rs > C for all s >= 2) ->  best = 1. */
    int kind1 = 0, kind2 = 0;
    for (int trial = 0; trial < 2000; trial++) {
        qmm_gpu_caps g = {"random", 16 + (int)(test_rand_u64() % 200),
                           test_rand_uniform(50, 2000), test_rand_uniform(0.5, 8), 0};
        int bm = 64 << (test_rand_u64() % 2), bn = 64 << (test_rand_u64() % 2);
        int64_t tiles_m = 1 + (int64_t)(test_rand_u64() % 4);
        int64_t tiles_n = 1 + (int64_t)(test_rand_u64() % 8);
        int64_t tiles = tiles_m * tiles_n;
        int s1 = g.sms / (int)tiles;
        if (s1 < 2) continue;
        int64_t m = tiles_m * bm, n = tiles_n * bn;
        int64_t k = (int64_t)128 << (test_rand_u64() % 9);
        if (2 * s1 > k) continue; /* splits stop at K */
        double c, r;
        doc_terms(&g, m, n, k, bm, bn, &c, &r);
        CHECK_OK(qmm_model_best_split_document(&g, m, n, k, bm, bn, 2 * s1, &b));
        if (r < c / fmax(4.0, (double)s1 * (s1 - 1)) * (1 - 1e-9)) {
            CHECKF(b.split == s1, "sms %d tiles %lld k %lld: best %d, s1 %d", g.sms,
                   (long long)tiles, (long long)k, b.split, s1);
            CHECK(b.waves == 1);
            kind1++;
        } else if (r > c / 4 * (1 + 1e-9)) {
            CHECKF(b.split == 1, "sms %d tiles %lld k %lld: best %d", g.sms, (long long)tiles,
                   (long long)k, b.split);
            kind2++;
        }
        /* Spilling into a second wave never pays right away. */
        double t1 = qmm_model_splitk_document_us(&g, m, n, k, bm, bn, s1);
        double t2 = qmm_model_splitk_document_us(&g, m, n, k, bm, bn, s1 + 1);
        CHECKF(t2 > t1, "sms %d tiles %lld k %lld s1 %d: %g then %g", g.sms, (long long)tiles,
               (long long)k, s1, t1, t2);
    }
    printf("    random: %d cases of the one-wave kind, %d of the reduction kind\n", kind1, kind2);
    CHECK(kind1 > 50 && kind2 > 50);
}

static void test_best_split_aligned(void)
{
    qmm_gpu_caps g = gpu("h200");
    qmm_model_kernel k = kernel("w4");
    /* k/v at M = 32: K = 2560 is 20 groups, so s in {1, 2, 4, 5, 10} under 16. */
    qmm_model_estimate b, e;
    CHECK_OK(qmm_model_best_split(&g, &k, 32, 1024, 2560, 16, QMM_GROUP, &b));
    CHECK(2560 % (b.split * 128) == 0);
    for (int s = 1; s <= 16; s++) {
        if (2560 % (s * 128)) continue;
        CHECK_OK(qmm_model_splitk_refined(&g, &k, 32, 1024, 2560, s, &e));
        CHECK(b.total_us <= e.total_us);
    }
    CHECKF(b.split == 5, "best %d", b.split); /* 80 blocks: the largest aligned one-wave split */
    /* Random shapes: every choice aligned, never worse than unsplit. */
    for (int trial = 0; trial < 300; trial++) {
        int64_t m = 1 + (int64_t)(test_rand_u64() % 512);
        int64_t n = 64 * (1 + (int64_t)(test_rand_u64() % 200));
        int64_t kk = 128 * (1 + (int64_t)(test_rand_u64() % 100));
        CHECK_OK(qmm_model_best_split(&g, &k, m, n, kk, 16, QMM_GROUP, &b));
        CHECK_OK(qmm_model_splitk_refined(&g, &k, m, n, kk, 1, &e));
        CHECKF(kk % ((int64_t)b.split * 128) == 0, "K %lld split %d", (long long)kk, b.split);
        CHECK(b.total_us <= e.total_us && b.split >= 1 && b.split <= 16);
    }
    /* align 0 takes any split: the document's shape on the refined document kernel. */
    qmm_gpu_caps a = gpu("a100");
    a.launch_us = 0;
    qmm_model_kernel doc = kernel("document");
    CHECK_OK(qmm_model_best_split(&a, &doc, 512, 512, 16384, 16, 0, &b));
    CHECK(b.split == 6);
    CHECK_STATUS(qmm_model_best_split(&g, &k, 32, 1024, 2500, 16, QMM_GROUP, &b), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_model_best_split(&g, &k, 32, 1024, 2560, 0, QMM_GROUP, &b), QMM_ERR_ARG);
    CHECK_STATUS(qmm_model_best_split(&g, &k, 32, 1024, 2560, 16, -1, &b), QMM_ERR_ARG);
}

static void test_streamk(void)
{
    qmm_gpu_caps h = gpu("h200");
    qmm_model_kernel k = kernel("w4");
    qmm_model_estimate e, one;
    /* 132 tiles of 8 iterations on 132 workers: one whole tile each, nothing to fix up. */
    CHECK_OK(qmm_model_streamk(&h, &k, 64 * 11, 64 * 12, 1024, &e));
    CHECK(e.tiles == 132 && e.blocks == 132 && e.waves == 1);
    CHECK(e.split_tiles == 0 && e.max_peers == 0 && e.reduction_us == 0);
    CHECK_OK(qmm_model_splitk_refined(&h, &k, 64 * 11, 64 * 12, 1024, 1, &one));
    CHECK(NEAR(e.compute_us, one.compute_us, 1e-9) && NEAR(e.total_us, one.total_us, 1e-9));

    /* The document's shape on the A100 with the document kernel (tile_k 64): 16 tiles x 256
     * iterations over 108 workers, shares of 37 or 38. Worker boundaries w*4096/108 meet tile
     * edges only at w = 27, 54, 81, so 107 - 3 = 104 partials, every tile split. */
    qmm_gpu_caps a = gpu("a100");
    qmm_model_kernel doc = kernel("document");
    CHECK_OK(qmm_model_streamk(&a, &doc, 512, 512, 16384, &e));
    CHECK(e.split_tiles == 16 && e.blocks == 108);
    CHECKF(e.partial_bytes == 104.0 * 2 * 128 * 128 * 4, "%g", e.partial_bytes);
    CHECKF(e.max_peers == 7, "%lld", (long long)e.max_peers); /* 256 iterations over ~37.9 */
    double iter_us = 2.0 * 128 * 128 * 64 / (312e6 / 108);
    CHECK(NEAR(e.compute_us, 38 * iter_us, 1e-9));
    /* No partial wave: within one iteration of a perfect share of the work. */
    CHECK(e.compute_us * 108 >= 4096 * iter_us && e.compute_us <= (4096.0 / 108 + 1) * iter_us);
    CHECK(NEAR(e.total_us, fmax(e.compute_us, e.memory_us) + e.launch_us + e.reduction_us, 1e-9));
    /* The fixup's serial part: fixup_us per partial along the longest chain. */
    doc.fixup_us = 1.0;
    qmm_model_estimate f;
    CHECK_OK(qmm_model_streamk(&a, &doc, 512, 512, 16384, &f));
    CHECK(NEAR(f.reduction_us - e.reduction_us, 7.0, 1e-9));

    /* Random shapes: every iteration is shared out, and the counts hang together. */
    for (int trial = 0; trial < 200; trial++) {
        int64_t m = 1 + (int64_t)(test_rand_u64() % 300);
        int64_t n = 1 + (int64_t)(test_rand_u64() % 3000);
        int64_t kk = 128 * (1 + (int64_t)(test_rand_u64() % 40));
        k.blocks_per_sm = 1 + (int)(test_rand_u64() % 3);
        CHECK_OK(qmm_model_streamk(&h, &k, m, n, kk, &e));
        int64_t total = e.tiles * (kk / 128), workers = 132 * k.blocks_per_sm;
        if (workers > total) workers = total;
        CHECK(e.blocks == workers);
        int64_t share = (total + workers - 1) / workers;
        double it = k.blocks_per_sm * 2.0 * 64 * 64 * 128 / (989.5e6 * 0.5 / 132);
        CHECK(NEAR(e.compute_us, share * it, 1e-9 * e.compute_us));
        CHECK(e.split_tiles <= e.tiles && e.split_tiles <= workers - 1);
        /* Worker boundaries are at least floor(T/W) apart; a tile holds L - 1 gaps. */
        CHECK(e.max_peers <= (kk / 128 - 1) / (total / workers) + 1);
        CHECK((e.split_tiles == 0) == (e.partial_bytes == 0));
        /* Brute force: walk every iteration, count the workers each tile meets. */
        int64_t L = kk / 128, w = 0, extra = 0, split = 0, peers_max = 0;
        for (int64_t t = 0; t < e.tiles; t++) {
            int64_t seen = 0, last = -1;
            for (int64_t x = t * L; x < (t + 1) * L; x++) {
                while ((w + 1) * total / workers <= x) w++; /* worker w owns x */
                if (w != last) {
                    seen++;
                    last = w;
                }
            }
            extra += seen - 1;
            split += seen > 1;
            if (seen - 1 > peers_max) peers_max = seen - 1;
        }
        CHECKF(e.split_tiles == split && e.max_peers == peers_max &&
                   e.partial_bytes == 2.0 * extra * 64 * 64 * 2,
               "M %lld N %lld K %lld: split %lld/%lld peers %lld/%lld", (long long)m, (long long)n,
               (long long)kk, (long long)e.split_tiles, (long long)split, (long long)e.max_peers,
               (long long)peers_max);
    }
}

static void test_arguments(void)
{
    qmm_gpu_caps g = gpu("h200");
    qmm_model_kernel k = kernel("w4");
    qmm_model_estimate e;
    CHECK_STATUS(qmm_model_splitk_document(NULL, 1, 1, 128, 128, 128, 1, &e), QMM_ERR_NULL);
    CHECK_STATUS(qmm_model_splitk_document(&g, 1, 1, 128, 128, 128, 1, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_model_splitk_document(&g, 0, 1, 128, 128, 128, 1, &e), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_model_splitk_document(&g, 1, 1, 128, 0, 128, 1, &e), QMM_ERR_ARG);
    CHECK_STATUS(qmm_model_splitk_document(&g, 1, 1, 128, 128, 128, 0, &e), QMM_ERR_ARG);
    CHECK_STATUS(qmm_model_splitk_document(&g, 1, 1, 128, 128, 128, 129, &e), QMM_ERR_ARG);
    CHECK(qmm_model_splitk_document_us(&g, 1, 1, 128, 128, 128, 0) < 0);
    CHECK(strstr(qmm_last_error(), "split") != NULL);
    qmm_gpu_caps bad = g;
    bad.sms = 0;
    CHECK_STATUS(qmm_model_splitk_document(&bad, 1, 1, 128, 128, 128, 1, &e), QMM_ERR_ARG);
    bad = g;
    bad.peak_tflops = 0;
    CHECK_STATUS(qmm_model_splitk_refined(&bad, &k, 1, 1, 128, 1, &e), QMM_ERR_RANGE);
    bad = g;
    bad.bandwidth_tbs = NAN;
    CHECK_STATUS(qmm_model_streamk(&bad, &k, 1, 1, 128, &e), QMM_ERR_RANGE);
    bad = g;
    bad.launch_us = -1;
    CHECK_STATUS(qmm_model_splitk_refined(&bad, &k, 1, 1, 128, 1, &e), QMM_ERR_RANGE);
    qmm_model_kernel kb = k;
    kb.compute_efficiency = 1.5;
    CHECK_STATUS(qmm_model_splitk_refined(&g, &kb, 1, 1, 128, 1, &e), QMM_ERR_RANGE);
    kb = k;
    kb.partial_type = QMM_F16;
    CHECK_STATUS(qmm_model_splitk_refined(&g, &kb, 1, 1, 128, 1, &e), QMM_ERR_DTYPE);
    kb = k;
    kb.blocks_per_sm = 0;
    CHECK_STATUS(qmm_model_splitk_refined(&g, &kb, 1, 1, 128, 1, &e), QMM_ERR_ARG);
    kb = k;
    kb.tile_k = 0;
    CHECK_STATUS(qmm_model_streamk(&g, &kb, 1, 1, 128, &e), QMM_ERR_ARG);
    kb = k;
    kb.weight_bytes_per_elem = 0;
    CHECK_STATUS(qmm_model_splitk_refined(&g, &kb, 1, 1, 128, 1, &e), QMM_ERR_RANGE);
    kb = k;
    kb.fixup_us = -0.5;
    CHECK_STATUS(qmm_model_streamk(&g, &kb, 1, 1, 128, &e), QMM_ERR_RANGE);
    CHECK_STATUS(qmm_model_splitk_refined(&g, NULL, 1, 1, 128, 1, &e), QMM_ERR_NULL);
    CHECK_STATUS(qmm_model_streamk(&g, &k, 1, 1, 128, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_model_best_split_document(&g, 1, 1, 128, 128, 128, 0, &e), QMM_ERR_ARG);
    CHECK_STATUS(qmm_model_best_split_document(&g, 0, 1, 128, 128, 128, 4, &e), QMM_ERR_SHAPE);
    /* Grids too large to count. */
    kb = k;
    kb.tile_m = kb.tile_n = 1;
    CHECK_STATUS(qmm_model_splitk_refined(&g, &kb, INT64_MAX, INT64_MAX, 128, 1, &e),
                 QMM_ERR_OVERFLOW);
    CHECK_STATUS(qmm_model_streamk(&g, &kb, INT64_MAX / 2, 4, (int64_t)1 << 40, &e),
                 QMM_ERR_OVERFLOW);
    /* A success clears the detail. */
    CHECK_OK(qmm_model_splitk_refined(&g, &k, 1, 1, 128, 1, &e));
    CHECK(!strcmp(qmm_last_error(), ""));
}

TEST_TABLE(cases, test_presets, test_document_a100, test_document_h100_h200,
           test_refined_floor_h100, test_refined_reduces_to_document, test_refined_parts,
           test_best_split_rule, test_best_split_aligned, test_streamk, test_arguments);

int main(int argc, char **argv)
{
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
