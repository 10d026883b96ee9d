/* Tensor-parallel weight shards (issue 16, CPU): the Qwen3-14B/32B presets, each rank's ranges,
 * shards that reassemble bit for bit, row-parallel partial sums and column-parallel concatenation
 * equal to the unsliced matmul, the fused gate|up interleave sliced per rank, and bad requests
 * that fail cleanly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "llm/stack_w4.h"
#include "llm/tp_slice.h"

static const int groups[] = {32, 64, 128};
static const int ranks_list[] = {1, 2, 4, 8};

/* A small Qwen3 shape every t in ranks_list and every group divides: 16 heads of 64 (q width
 * 1024; 2 heads a rank at t = 8 is 128 columns of o), 8 KV heads, intermediate 1024, and a
 * vocabulary of 1003 (prime: an uneven vocabulary split). */
static qmm_llm_config tiny_config(int group)
{
    qmm_llm_config c = {256, 1024, 1, 16, 8, 64, 1003, 64, 1e6, 1e-6, 0, group};
    return c;
}

/* The unsliced [n, k] weight of a kind under c. */
static void kind_shape(const qmm_llm_config *c, int kind, int64_t *n, int64_t *k)
{
    if (kind == TP_VOCAB) {
        *n = c->vocab_size, *k = c->hidden_size;
        return;
    }
    qmm_llm_linear_shape(c, (qmm_llm_linear)kind, n, k);
}

/* A fresh random weight of a kind (0 and a failed case when it cannot be made). */
static int random_weight(const qmm_llm_config *c, int kind, qmm_w4 *w)
{
    int64_t n, k;
    kind_shape(c, kind, &n, &k);
    qmm_status st = qmm_w4_alloc_group(n, k, (int)c->group_size, w);
    CHECKF(st == QMM_OK, "alloc [%lld, %lld]: %s", (long long)n, (long long)k, qmm_last_error());
    if (st) return 0;
    test_random_w4(w, 0.01, 0.05);
    return 1;
}

/* A weight like w filled with a poison pattern (reassembly must overwrite every element). */
static int poisoned_like(const qmm_w4 *w, qmm_w4 *p)
{
    if (qmm_w4_alloc_group(w->n, w->k, w->group, p)) return 0;
    memset(p->packed, 0xA5, p->packed_count * sizeof *p->packed);
    for (size_t i = 0; i < p->scales_count; i++) p->scales[i] = p->biases[i] = TEST_POISON_BF16;
    return 1;
}

/* Write shard s (of cut at range r) back into its place in dst. */
static void place(qmm_w4 *dst, const qmm_w4 *s, tp_cut cut, tp_range r)
{
    const int64_t g = dst->group, dw = dst->k / 8, dg = dst->k / g;
    const int64_t sw = s->k / 8, sg = s->k / g;
    for (int64_t row = 0; row < s->n; row++) {
        int64_t drow = cut == TP_CUT_ROWS ? r.lo + row : row;
        int64_t w0 = cut == TP_CUT_ROWS ? 0 : r.lo / 8, g0 = cut == TP_CUT_ROWS ? 0 : r.lo / g;
        memcpy(dst->packed + drow * dw + w0, s->packed + row * sw, (size_t)sw * 4);
        memcpy(dst->scales + drow * dg + g0, s->scales + row * sg, (size_t)sg * 2);
        memcpy(dst->biases + drow * dg + g0, s->biases + row * sg, (size_t)sg * 2);
    }
}

static int same_w4(const qmm_w4 *a, const qmm_w4 *b)
{
    return a->n == b->n && a->k == b->k && a->group == b->group &&
           !memcmp(a->packed, b->packed, a->packed_count * 4) &&
           !memcmp(a->scales, b->scales, a->scales_count * 2) &&
           !memcmp(a->biases, b->biases, a->biases_count * 2);
}

/* The ranks' plans of c at t (0 and a failed case on error). */
static int plans(const qmm_llm_config *c, int t, tp_rank_plan *p)
{
    for (int r = 0; r < t; r++) {
        qmm_status st = tp_plan_rank(c, t, r, &p[r]);
        CHECKF(st == QMM_OK, "plan t = %d rank %d: %s", t, r, qmm_last_error());
        if (st) return 0;
    }
    return 1;
}

static void presets_14b_32b_shapes(void)
{
    const struct {
        const char *name;
        int64_t h, inter, layers, heads, kv;
    } want[] = {{"qwen3-14b", 5120, 17408, 40, 40, 8}, {"qwen3-32b", 5120, 25600, 64, 64, 8}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        qmm_llm_config c;
        CHECK_OK(qmm_llm_config_preset(want[i].name, &c));
        CHECK_OK(qmm_llm_config_validate(&c));
        CHECKF(c.hidden_size == want[i].h && c.intermediate_size == want[i].inter &&
                   c.num_layers == want[i].layers && c.num_heads == want[i].heads &&
                   c.num_kv_heads == want[i].kv && c.head_dim == 128 && c.vocab_size == 151936 &&
                   c.max_position_embeddings == 40960 && c.rope_theta == 1e6 &&
                   c.rms_norm_eps == 1e-6 && c.tie_word_embeddings == 0 && c.group_size == 128,
               "preset %s", want[i].name);
        const int64_t q = want[i].heads * 128, kv = want[i].kv * 128, h = want[i].h,
                      in = want[i].inter;
        const int64_t shape[QMM_LLM_LINEAR_COUNT][2] = {{q, h}, {kv, h}, {kv, h}, {h, q},
                                                        {in, h}, {in, h}, {h, in}};
        for (int l = 0; l < QMM_LLM_LINEAR_COUNT; l++) {
            int64_t n, k;
            CHECK_OK(qmm_llm_linear_shape(&c, (qmm_llm_linear)l, &n, &k));
            CHECKF(n == shape[l][0] && k == shape[l][1], "%s %s: [%lld, %lld]", want[i].name,
                   qmm_llm_linear_name((qmm_llm_linear)l), (long long)n, (long long)k);
        }
    }
    /* the unknown-preset message lists the new ones */
    qmm_llm_config c;
    EXPECT_FAIL(qmm_llm_config_preset("qwen3-99b", &c), QMM_ERR_NOT_FOUND);
    CHECK(strstr(qmm_last_error(), "qwen3-14b") && strstr(qmm_last_error(), "qwen3-32b"));
}

/* Every preset at t = 1, 2, 4, 8: ranges tile each dimension in rank order, heads split evenly. */
static void plan_ranges_tile_presets(void)
{
    for (int i = 0; qmm_llm_preset_name(i); i++) {
        qmm_llm_config c;
        CHECK_OK(qmm_llm_config_preset(qmm_llm_preset_name(i), &c));
        for (size_t ti = 0; ti < sizeof ranks_list / sizeof ranks_list[0]; ti++) {
            int t = ranks_list[ti];
            /* what must divide, checked here independently of tp_plan_rank */
            int64_t g = c.group_size, q = c.num_heads * c.head_dim, in = c.intermediate_size;
            int ok = c.num_heads % t == 0 && c.num_kv_heads % t == 0 && q % t == 0 &&
                     (q / t) % g == 0 && in % t == 0 && (in / t) % g == 0;
            tp_rank_plan p[8];
            if (!ok) { /* e.g. qwen3-4b at t = 8: 9728 / 8 = 1216 is not whole groups of 128 */
                EXPECT_FAIL(tp_plan_rank(&c, t, 0, &p[0]), QMM_ERR_ARG);
                continue;
            }
            if (!plans(&c, t, p)) continue;
            for (int kind = 0; kind < TP_KIND_COUNT; kind++) {
                int64_t n, k, next = 0;
                kind_shape(&c, kind, &n, &k);
                for (int r = 0; r < t; r++) {
                    CHECK(p[r].rank == r && p[r].ranks == t && p[r].cut[kind] == p[0].cut[kind]);
                    CHECKF(p[r].range[kind].lo == next && p[r].range[kind].count >= 1,
                           "%s t=%d rank %d %s", qmm_llm_preset_name(i), t, r, tp_kind_name(kind));
                    next = p[r].range[kind].lo + p[r].range[kind].count;
                    if (p[r].cut[kind] == TP_CUT_COLS)
                        CHECK(p[r].range[kind].lo % c.group_size == 0 &&
                              p[r].range[kind].count % c.group_size == 0);
                }
                CHECKF(next == (p[0].cut[kind] == TP_CUT_ROWS ? n : k), "%s t=%d %s covers %lld",
                       qmm_llm_preset_name(i), t, tp_kind_name(kind), (long long)next);
            }
            for (int r = 0; r < t; r++)
                CHECK(p[r].heads * t == c.num_heads && p[r].kv_heads * t == c.num_kv_heads &&
                      p[r].intermediate * t == c.intermediate_size);
        }
    }
    /* known numbers: qwen3-32b at t = 2, qwen3-14b at t = 8 (rank 3) */
    qmm_llm_config c;
    tp_rank_plan p;
    CHECK_OK(qmm_llm_config_preset("qwen3-32b", &c));
    CHECK_OK(tp_plan_rank(&c, 2, 1, &p));
    CHECK(p.heads == 32 && p.kv_heads == 4 && p.intermediate == 12800);
    CHECK(p.range[QMM_LLM_Q].lo == 4096 && p.range[QMM_LLM_Q].count == 4096);
    CHECK(p.range[QMM_LLM_K].lo == 512 && p.range[QMM_LLM_V].count == 512);
    CHECK(p.cut[QMM_LLM_O] == TP_CUT_COLS && p.range[QMM_LLM_O].lo == 4096);
    CHECK(p.cut[QMM_LLM_DOWN] == TP_CUT_COLS && p.range[QMM_LLM_DOWN].lo == 12800);
    CHECK(p.range[TP_VOCAB].lo == 75968 && p.range[TP_VOCAB].count == 75968);
    CHECK_OK(qmm_llm_config_preset("qwen3-14b", &c));
    CHECK_OK(tp_plan_rank(&c, 8, 3, &p));
    CHECK(p.heads == 5 && p.kv_heads == 1 && p.intermediate == 2176);
    CHECK(p.range[QMM_LLM_Q].lo == 3 * 640 && p.range[QMM_LLM_K].lo == 3 * 128);
    CHECK(p.range[QMM_LLM_GATE].lo == 3 * 2176 && p.range[TP_VOCAB].lo == 3 * 18992);
    /* an uneven vocabulary: 1003 = 4 * 250 + 3 */
    c = tiny_config(64);
    int64_t want[4] = {251, 251, 251, 250};
    for (int r = 0; r < 4; r++) {
        CHECK_OK(tp_plan_rank(&c, 4, r, &p));
        CHECK(p.range[TP_VOCAB].count == want[r] && p.range[TP_VOCAB].lo == 251 * r);
    }
}

/* For every group, t and weight kind: the t shards, put back in place, are the original. */
static void shards_reassemble_bitwise(void)
{
    for (size_t gi = 0; gi < 3; gi++)
        for (size_t ti = 0; ti < 4; ti++) {
            qmm_llm_config c = tiny_config(groups[gi]);
            int t = ranks_list[ti];
            tp_rank_plan p[8];
            if (!plans(&c, t, p)) continue;
            for (int kind = 0; kind < TP_KIND_COUNT; kind++) {
                qmm_w4 w, back;
                if (!random_weight(&c, kind, &w)) continue;
                if (!poisoned_like(&w, &back)) {
                    qmm_w4_free(&w);
                    CHECK(0);
                    continue;
                }
                for (int r = 0; r < t; r++) {
                    qmm_w4 s;
                    qmm_status st = tp_slice_w4(&w, p[r].cut[kind], p[r].range[kind], &s);
                    CHECKF(st == QMM_OK, "g%d t=%d %s rank %d: %s", groups[gi], t,
                           tp_kind_name(kind), r, qmm_last_error());
                    if (st) continue;
                    CHECK_OK(qmm_w4_validate(&s));
                    int64_t want = p[r].range[kind].count;
                    CHECK(p[r].cut[kind] == TP_CUT_ROWS ? s.n == want && s.k == w.k
                                                        : s.k == want && s.n == w.n);
                    place(&back, &s, p[r].cut[kind], p[r].range[kind]);
                    qmm_w4_free(&s);
                }
                CHECKF(same_w4(&w, &back), "g%d t=%d %s: shards do not reassemble", groups[gi],
                       t, tp_kind_name(kind));
                qmm_w4_free(&w);
                qmm_w4_free(&back);
            }
        }
}

/* The activation columns [lo, lo + count) of a[m, k]. */
static qmm_bf16 *columns(const qmm_bf16 *a, int64_t m, int64_t k, tp_range r)
{
    qmm_bf16 *x = malloc((size_t)(m * r.count) * sizeof *x);
    if (x)
        for (int64_t i = 0; i < m; i++)
            memcpy(x + i * r.count, a + i * k + r.lo, (size_t)r.count * 2);
    return x;
}

/* o and down: the sum over ranks of x_r · W_rᵀ (fp64) is the unsliced product. */
static void row_parallel_sums_to_full(void)
{
    const int64_t m = 3;
    for (size_t gi = 0; gi < 3; gi++)
        for (size_t ti = 0; ti < 4; ti++) {
            qmm_llm_config c = tiny_config(groups[gi]);
            int t = ranks_list[ti];
            tp_rank_plan p[8];
            if (!plans(&c, t, p)) continue;
            const int kinds[] = {QMM_LLM_O, QMM_LLM_DOWN};
            for (int ki = 0; ki < 2; ki++) {
                int kind = kinds[ki];
                qmm_w4 w;
                if (!random_weight(&c, kind, &w)) continue;
                qmm_bf16 *a = malloc((size_t)(m * w.k) * sizeof *a);
                double *full = malloc((size_t)(m * w.n) * sizeof *full);
                double *sum = calloc((size_t)(m * w.n), sizeof *sum);
                double *part = malloc((size_t)(m * w.n) * sizeof *part);
                CHECK(a && full && sum && part);
                if (a && full && sum && part) {
                    test_fill_bf16(a, (size_t)(m * w.k), 1.0);
                    test_matmul_f64(a, m, &w, full);
                    for (int r = 0; r < t; r++) {
                        qmm_w4 s;
                        CHECK(p[r].cut[kind] == TP_CUT_COLS);
                        if (tp_slice_w4(&w, p[r].cut[kind], p[r].range[kind], &s)) {
                            CHECKF(0, "slice: %s", qmm_last_error());
                            continue;
                        }
                        qmm_bf16 *x = columns(a, m, w.k, p[r].range[kind]);
                        for (int64_t i = 0; i < m * w.n; i++) part[i] = NAN; /* poison */
                        if (x) test_matmul_f64(x, m, &s, part);
                        for (int64_t i = 0; i < m * w.n; i++) sum[i] += part[i];
                        free(x);
                        qmm_w4_free(&s);
                    }
                    double num = 0, den = 0;
                    for (int64_t i = 0; i < m * w.n; i++)
                        num += (sum[i] - full[i]) * (sum[i] - full[i]), den += full[i] * full[i];
                    double rel = sqrt(num / den);
                    CHECKF(rel <= 1e-6, "g%d t=%d %s: rel error %.3g (NaN: a rank missing)",
                           groups[gi], t, tp_kind_name(kind), rel);
                }
                free(a), free(full), free(sum), free(part);
                qmm_w4_free(&w);
            }
        }
}

/* q, k, v, gate, up and the LM head: the ranks' outputs (qmm_matmul_ref, bf16), side by side, are
 * the unsliced output bit for bit. */
static void column_parallel_concatenates(void)
{
    const int64_t m = 2;
    for (size_t gi = 0; gi < 3; gi++)
        for (size_t ti = 0; ti < 4; ti++) {
            qmm_llm_config c = tiny_config(groups[gi]);
            int t = ranks_list[ti];
            tp_rank_plan p[8];
            if (!plans(&c, t, p)) continue;
            for (int kind = 0; kind < TP_KIND_COUNT; kind++) {
                if (kind == QMM_LLM_O || kind == QMM_LLM_DOWN) continue;
                qmm_w4 w;
                if (!random_weight(&c, kind, &w)) continue;
                qmm_bf16 *a = malloc((size_t)(m * w.k) * sizeof *a);
                qmm_bf16 *full = malloc((size_t)(m * w.n) * sizeof *full);
                qmm_bf16 *cat = malloc((size_t)(m * w.n) * sizeof *cat);
                qmm_bf16 *part = malloc((size_t)(m * w.n) * sizeof *part);
                CHECK(a && full && cat && part);
                if (a && full && cat && part) {
                    test_fill_bf16(a, (size_t)(m * w.k), 1.0);
                    for (int64_t i = 0; i < m * w.n; i++) full[i] = cat[i] = TEST_POISON_BF16;
                    CHECK_OK(qmm_matmul_ref(a, m, &w, full));
                    for (int r = 0; r < t; r++) {
                        qmm_w4 s;
                        tp_range rr = p[r].range[kind];
                        CHECK(p[r].cut[kind] == TP_CUT_ROWS);
                        if (tp_slice_w4(&w, TP_CUT_ROWS, rr, &s)) {
                            CHECKF(0, "slice: %s", qmm_last_error());
                            continue;
                        }
                        for (int64_t i = 0; i < m * rr.count; i++) part[i] = TEST_POISON_BF16;
                        CHECK_OK(qmm_matmul_ref(a, m, &s, part));
                        for (int64_t i = 0; i < m; i++)
                            memcpy(cat + i * w.n + rr.lo, part + i * rr.count,
                                   (size_t)rr.count * 2);
                        qmm_w4_free(&s);
                    }
                    CHECKF(!memcmp(cat, full, (size_t)(m * w.n) * 2),
                           "g%d t=%d %s: concatenated shards differ from the unsliced output",
                           groups[gi], t, tp_kind_name(kind));
                }
                free(a), free(full), free(cat), free(part);
                qmm_w4_free(&w);
            }
        }
}

/* The fused decode step's SwiGLU under tensor parallelism (decode_fused_tp.cu): each rank
 * interleaves its own gate and up rows in chunks of 64 (llm_gate_up_chunk of the shard's config),
 * and that must be the rank's contiguous row range of the whole model's interleaved gate|up, so
 * that output column j of rank r is intermediate index r·I/t + j (the columns of its down slice).
 * Every preset's valid split keeps whole chunks (the fused step applies); a split of 96 rows a
 * rank (groups of 32) does not: chunk 0, and interleaving by 64 is refused. */
static void gate_up_interleave_slices_per_rank(void)
{
    for (int i = 0; qmm_llm_preset_name(i); i++) {
        qmm_llm_config c;
        CHECK_OK(qmm_llm_config_preset(qmm_llm_preset_name(i), &c));
        for (size_t ti = 0; ti < sizeof ranks_list / sizeof ranks_list[0]; ti++) {
            tp_rank_plan p;
            if (tp_plan_rank(&c, ranks_list[ti], 0, &p)) continue; /* not a valid split */
            qmm_llm_config sc = c;
            sc.intermediate_size = p.intermediate;
            CHECKF(llm_gate_up_chunk(&sc) == 64, "%s t=%d: %lld rows a rank, chunk %lld",
                   qmm_llm_preset_name(i), ranks_list[ti], (long long)p.intermediate,
                   (long long)llm_gate_up_chunk(&sc));
        }
    }
    for (size_t gi = 0; gi < 3; gi++)
        for (size_t ti = 0; ti < 4; ti++) {
            qmm_llm_config c = tiny_config(groups[gi]);
            const int t = ranks_list[ti];
            tp_rank_plan p[8];
            if (!plans(&c, t, p)) continue;
            qmm_w4 gate, up, full;
            if (!random_weight(&c, QMM_LLM_GATE, &gate)) continue;
            if (!random_weight(&c, QMM_LLM_UP, &up)) {
                qmm_w4_free(&gate);
                continue;
            }
            const qmm_w4 *whole[2] = {&gate, &up};
            CHECK_OK(llm_stack_w4_chunked(whole, 2, llm_gate_up_chunk(&c), &full));
            for (int r = 0; r < t && !test_failed_now(); r++) {
                qmm_llm_config sc = c;
                sc.intermediate_size = p[r].intermediate;
                qmm_w4 sg, su, mine, cut;
                CHECK(p[r].range[QMM_LLM_GATE].lo == p[r].range[QMM_LLM_UP].lo &&
                      p[r].range[QMM_LLM_GATE].count == p[r].intermediate);
                CHECK_OK(tp_slice_w4(&gate, TP_CUT_ROWS, p[r].range[QMM_LLM_GATE], &sg));
                CHECK_OK(tp_slice_w4(&up, TP_CUT_ROWS, p[r].range[QMM_LLM_UP], &su));
                const qmm_w4 *parts[2] = {&sg, &su};
                CHECK_OK(llm_stack_w4_chunked(parts, 2, llm_gate_up_chunk(&sc), &mine));
                const tp_range rr = {2 * p[r].range[QMM_LLM_GATE].lo, 2 * p[r].intermediate};
                CHECK_OK(tp_slice_w4(&full, TP_CUT_ROWS, rr, &cut));
                CHECKF(same_w4(&mine, &cut), "g%d t=%d rank %d: the rank's gate|up is not rows "
                       "[%lld, +%lld) of the whole interleaved weight", groups[gi], t, r,
                       (long long)rr.lo, (long long)rr.count);
                qmm_w4_free(&sg), qmm_w4_free(&su), qmm_w4_free(&mine), qmm_w4_free(&cut);
            }
            qmm_w4_free(&gate), qmm_w4_free(&up), qmm_w4_free(&full);
        }
    /* 192 intermediate rows at t = 2 in groups of 32: 96 a rank, not whole chunks of 64 */
    qmm_llm_config c = tiny_config(32);
    c.intermediate_size = 192;
    tp_rank_plan p;
    CHECK_OK(tp_plan_rank(&c, 2, 1, &p));
    qmm_llm_config sc = c;
    sc.intermediate_size = p.intermediate;
    CHECK(p.intermediate == 96 && llm_gate_up_chunk(&sc) == 0);
    qmm_w4 a, b, out;
    if (!qmm_w4_alloc_group(96, 256, 32, &a)) {
        if (!qmm_w4_alloc_group(96, 256, 32, &b)) {
            const qmm_w4 *parts[2] = {&a, &b};
            EXPECT_FAIL(llm_stack_w4_chunked(parts, 2, 64, &out), QMM_ERR_ARG);
            EXPECT_FAIL(llm_stack_w4_chunked(NULL, 2, 64, &out), QMM_ERR_NULL);
            qmm_w4_free(&b);
        }
        qmm_w4_free(&a);
    }
}

/* Requests that cannot be honoured fail with a message and leave *out as it was. */
static void bad_requests(void)
{
    qmm_llm_config c;
    tp_rank_plan p, before;
    memset(&before, 0x5A, sizeof before);
    const struct {
        const char *preset;
        int t, rank;
        const char *msg; /* a substring of the message */
    } plans_bad[] = {
        {"qwen3-8b", 0, 0, "t = 0"},
        {"qwen3-8b", -2, 0, "t = -2"},
        {"qwen3-8b", 2, 2, "rank 2"},
        {"qwen3-8b", 2, -1, "rank -1"},
        {"qwen3-8b", 3, 0, "num_attention_heads = 32"},
        {"qwen3-14b", 16, 0, "num_attention_heads = 40"},
        {"qwen3-8b", 16, 0, "num_key_value_heads = 8"},
        {"qwen3-32b", 32, 0, "num_key_value_heads = 8"},
        {"qwen3-8b", 2048, 0, "t = 2048"},
        {"qwen3-4b", 8, 0, "intermediate_size / t = 1216"},
    };
    for (size_t i = 0; i < sizeof plans_bad / sizeof plans_bad[0]; i++) {
        CHECK_OK(qmm_llm_config_preset(plans_bad[i].preset, &c));
        p = before;
        EXPECT_FAIL(tp_plan_rank(&c, plans_bad[i].t, plans_bad[i].rank, &p), QMM_ERR_ARG);
        CHECKF(strstr(qmm_last_error(), plans_bad[i].msg) != NULL, "%s t=%d: '%s' lacks '%s'",
               plans_bad[i].preset, plans_bad[i].t, qmm_last_error(), plans_bad[i].msg);
        CHECK(!memcmp(&p, &before, sizeof p));
    }
    /* down's share not whole groups: intermediate 384 at t = 2 is 192 columns a rank */
    qmm_llm_config odd = {384, 384, 1, 48, 24, 16, 100, 64, 1e6, 1e-6, 0, 128};
    CHECK_OK(qmm_llm_config_validate(&odd));
    EXPECT_FAIL(tp_plan_rank(&odd, 2, 0, &p), QMM_ERR_ARG);
    CHECKF(strstr(qmm_last_error(), "intermediate_size / t = 192") &&
               strstr(qmm_last_error(), "group size 128"), "%s", qmm_last_error());
    /* o's share: 24 heads of 16 = 384 columns, 192 a rank at t = 2 */
    odd.intermediate_size = 768, odd.num_heads = 24, odd.num_kv_heads = 8;
    CHECK_OK(qmm_llm_config_validate(&odd));
    EXPECT_FAIL(tp_plan_rank(&odd, 2, 0, &p), QMM_ERR_ARG);
    CHECKF(strstr(qmm_last_error(), "num_attention_heads * head_dim / t = 192"), "%s",
           qmm_last_error());
    /* fewer vocabulary rows than ranks (everything else divides) */
    odd.num_heads = 48, odd.vocab_size = 1;
    CHECK_OK(qmm_llm_config_validate(&odd));
    EXPECT_FAIL(tp_plan_rank(&odd, 2, 0, &p), QMM_ERR_ARG);
    CHECKF(strstr(qmm_last_error(), "vocab_size = 1"), "%s", qmm_last_error());
    CHECK_OK(tp_plan_rank(&odd, 1, 0, &p));
    c.num_heads = 0; /* an invalid config is the config's error */
    CHECK(tp_plan_rank(&c, 1, 0, &p) != QMM_OK);
    EXPECT_FAIL(tp_plan_rank(NULL, 1, 0, &p), QMM_ERR_NULL);

    /* slices: a cut inside a group, out-of-range ranges, a bad cut */
    for (size_t gi = 0; gi < 3; gi++) {
        int g = groups[gi];
        qmm_w4 w, s, keep;
        if (qmm_w4_alloc_group(5, 4 * g, g, &w)) {
            CHECK(0);
            continue;
        }
        test_random_w4(&w, 0.01, 0.05);
        memset(&keep, 0x5A, sizeof keep);
        const struct {
            tp_cut cut;
            tp_range r;
            long long boundary; /* the column the message names; -1: not a group error */
        } bad[] = {
            {TP_CUT_COLS, {8, g}, 8},              /* starts inside group 0 */
            {TP_CUT_COLS, {g, g / 2}, g + g / 2},  /* ends inside group 1 */
            {TP_CUT_COLS, {0, 4 * g + g}, -1},      /* past the end */
            {TP_CUT_COLS, {0, 0}, -1},              /* empty */
            {TP_CUT_ROWS, {4, 2}, -1},              /* rows 4..5 of 5 */
            {TP_CUT_ROWS, {-1, 2}, -1},
            {TP_CUT_ROWS, {1, INT64_MAX}, -1},      /* lo + count overflows */
            {(tp_cut)7, {0, 1}, -1},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            s = keep;
            EXPECT_FAIL(tp_slice_w4(&w, bad[i].cut, bad[i].r, &s), QMM_ERR_ARG);
            CHECK(!memcmp(&s, &keep, sizeof s));
            if (bad[i].boundary >= 0) {
                char want[64], grp[64];
                snprintf(want, sizeof want, "column %lld", bad[i].boundary);
                snprintf(grp, sizeof grp, "group of %d columns", g);
                CHECKF(strstr(qmm_last_error(), want) && strstr(qmm_last_error(), grp),
                       "g%d case %zu: '%s'", g, i, qmm_last_error());
            }
        }
        /* a cut on a group boundary of a g-group weight that is not one of a larger group */
        if (g < 128) {
            tp_range r = {g, g};
            CHECK_OK(tp_slice_w4(&w, TP_CUT_COLS, r, &s));
            qmm_w4_free(&s);
        }
        EXPECT_FAIL(tp_slice_w4(NULL, TP_CUT_ROWS, (tp_range){0, 1}, &s), QMM_ERR_NULL);
        EXPECT_FAIL(tp_slice_w4(&w, TP_CUT_ROWS, (tp_range){0, 1}, NULL), QMM_ERR_NULL);
        qmm_w4_free(&w);
    }
    CHECK(tp_kind_name(TP_VOCAB) && !strcmp(tp_kind_name(QMM_LLM_DOWN), "down_proj"));
    CHECK(tp_kind_name(-1) == NULL && tp_kind_name(TP_KIND_COUNT) == NULL);
}

/* The CUDA engine's own condition on a split: every rank's K in whole blocks of 128 columns.
 * Qwen3-4B in groups of 64 plans at t = 8 (down's 1 216 columns a rank are whole groups of 64)
 * and is refused here with the dimension named; what passes here passes tp_plan_rank. */
static void cuda_blocks(void)
{
    qmm_llm_config c;
    CHECK_OK(qmm_llm_config_preset("qwen3-4b", &c));
    c.group_size = 64;
    tp_rank_plan p;
    CHECK_OK(tp_plan_rank(&c, 8, 0, &p));
    EXPECT_FAIL(tp_check_cuda_blocks(&c, 8), QMM_ERR_SHAPE);
    CHECKF(strstr(qmm_last_error(), "t = 8") && strstr(qmm_last_error(), "down_proj's K") &&
               strstr(qmm_last_error(), "= 1216"), "%s", qmm_last_error());
    for (int t = 1; t <= 4; t *= 2) CHECK_OK(tp_check_cuda_blocks(&c, t));
    /* o's share: 24 heads of 16 = 384 columns, 96 a rank at t = 4, whole groups of 32 */
    qmm_llm_config odd = {384, 768, 1, 24, 8, 16, 100, 64, 1e6, 1e-6, 0, 32};
    CHECK_OK(qmm_llm_config_validate(&odd));
    CHECK_OK(tp_plan_rank(&odd, 4, 0, &p));
    EXPECT_FAIL(tp_check_cuda_blocks(&odd, 4), QMM_ERR_SHAPE);
    CHECKF(strstr(qmm_last_error(), "o_proj's K") && strstr(qmm_last_error(), "= 96"), "%s",
           qmm_last_error());
    /* hidden_size, every rank's K of q|k|v and gate|up: 320 columns are whole groups of 32 */
    qmm_llm_config narrow = {320, 768, 1, 8, 8, 16, 100, 64, 1e6, 1e-6, 0, 32};
    CHECK_OK(qmm_llm_config_validate(&narrow));
    CHECK_OK(tp_plan_rank(&narrow, 2, 0, &p));
    EXPECT_FAIL(tp_check_cuda_blocks(&narrow, 2), QMM_ERR_SHAPE);
    CHECKF(strstr(qmm_last_error(), "hidden_size = 320"), "%s", qmm_last_error());
    /* a plan tp_plan_rank refuses is refused with its message */
    CHECK_OK(qmm_llm_config_preset("qwen3-8b", &c));
    EXPECT_FAIL(tp_check_cuda_blocks(&c, 3), QMM_ERR_ARG);
    CHECK(strstr(qmm_last_error(), "num_attention_heads = 32") != NULL);
    EXPECT_FAIL(tp_check_cuda_blocks(NULL, 2), QMM_ERR_NULL);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, presets_14b_32b_shapes, plan_ranges_tile_presets, shards_reassemble_bitwise,
               row_parallel_sums_to_full, column_parallel_concatenates,
               gate_up_interleave_slices_per_rank, bad_requests, cuda_blocks);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
