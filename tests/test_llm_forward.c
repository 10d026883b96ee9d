/* The CPU reference forward: a tiny Qwen3 written as a checkpoint by the writer, loaded back and
 * run against an independent fp64 computation; prefill/decode consistency; errors; synthetic
 * presets stay finite. */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "llm/hf_random.h"

static const qmm_llm_config tiny = {256, 512, 2, 4, 2, 64, 1000, 512, 1e6, 1e-6, 1, 128};

/* ---- an independent fp64 forward: dequantized weights, no rounding anywhere ---- */

typedef struct ref64 {
    const qmm_llm_model *m;
    const qmm_llm_config *c;
    int64_t len;   /* positions cached */
    double *kc, *vc; /* [layers][kv_heads][max][hd] */
    int64_t max;
} ref64;

static double w_at(const qmm_w4 *w, int64_t n, int64_t j)
{
    uint32_t q = (w->packed[n * (w->k / 8) + j / 8] >> (4 * (j % 8))) & 0xF;
    int64_t g = n * (w->k / QMM_GROUP) + j / QMM_GROUP;
    return (double)qmm_bf16_to_f32(w->scales[g]) * q + (double)qmm_bf16_to_f32(w->biases[g]);
}

static void lin(const qmm_w4 *w, const double *x, double *y)
{
    for (int64_t n = 0; n < w->n; n++) {
        double acc = 0;
        for (int64_t j = 0; j < w->k; j++) acc += w_at(w, n, j) * x[j];
        y[n] = acc;
    }
}

static void rms(const double *x, const qmm_bf16 *w, int64_t n, double eps, double *y)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv * qmm_bf16_to_f32(w[i]);
}

static void norm_rope(double *v, const qmm_bf16 *w, int64_t hd, double eps, double theta, int64_t pos)
{
    double t[1024];
    rms(v, w, hd, eps, t);
    int64_t half = hd / 2;
    for (int64_t i = 0; i < half; i++) {
        double a = (double)pos * pow(theta, -(double)(2 * i) / (double)hd);
        v[i] = t[i] * cos(a) - t[i + half] * sin(a);
        v[i + half] = t[i + half] * cos(a) + t[i] * sin(a);
    }
}

/* One token at position r->len; logits[vocab] out. */
static void ref_step(ref64 *r, int32_t id, double *logits)
{
    const qmm_llm_config *c = r->c;
    const qmm_llm_model *m = r->m;
    int64_t H = c->hidden_size, hd = c->head_dim, I = c->intermediate_size;
    int64_t nh = c->num_heads, nkv = c->num_kv_heads, pos = r->len;
    double *x = calloc((size_t)H, 8), *h = calloc((size_t)H, 8);
    double *q = calloc((size_t)(nh * hd), 8), *k = calloc((size_t)(nkv * hd), 8);
    double *v = calloc((size_t)(nkv * hd), 8), *att = calloc((size_t)(nh * hd), 8);
    double *o = calloc((size_t)H, 8), *g = calloc((size_t)I, 8), *u = calloc((size_t)I, 8);
    double *sc = calloc((size_t)(pos + 1), 8);
    const qmm_w4 *emb, *head, *w;
    qmm_llm_model_embedding(m, &emb);
    qmm_llm_model_lm_head(m, &head);
    for (int64_t j = 0; j < H; j++) x[j] = w_at(emb, id, j);
    for (int64_t l = 0; l < c->num_layers; l++) {
        const qmm_bf16 *nw;
        qmm_llm_model_norm(m, l, QMM_LLM_INPUT_NORM, &nw);
        rms(x, nw, H, c->rms_norm_eps, h);
        qmm_llm_model_linear(m, l, QMM_LLM_Q, &w), lin(w, h, q);
        qmm_llm_model_linear(m, l, QMM_LLM_K, &w), lin(w, h, k);
        qmm_llm_model_linear(m, l, QMM_LLM_V, &w), lin(w, h, v);
        const qmm_bf16 *qn, *kn;
        qmm_llm_model_norm(m, l, QMM_LLM_Q_NORM, &qn);
        qmm_llm_model_norm(m, l, QMM_LLM_K_NORM, &kn);
        for (int64_t i = 0; i < nh; i++) norm_rope(q + i * hd, qn, hd, c->rms_norm_eps, c->rope_theta, pos);
        for (int64_t i = 0; i < nkv; i++) {
            norm_rope(k + i * hd, kn, hd, c->rms_norm_eps, c->rope_theta, pos);
            double *kd = r->kc + ((l * nkv + i) * r->max + pos) * hd;
            double *vd = r->vc + ((l * nkv + i) * r->max + pos) * hd;
            memcpy(kd, k + i * hd, (size_t)hd * 8);
            memcpy(vd, v + i * hd, (size_t)hd * 8);
        }
        for (int64_t i = 0; i < nh; i++) {
            int64_t kv = i / (nh / nkv);
            const double *K = r->kc + (l * nkv + kv) * r->max * hd;
            const double *V = r->vc + (l * nkv + kv) * r->max * hd;
            double mx = -INFINITY, sum = 0;
            for (int64_t p = 0; p <= pos; p++) {
                double s = 0;
                for (int64_t d = 0; d < hd; d++) s += q[i * hd + d] * K[p * hd + d];
                sc[p] = s / sqrt((double)hd);
                if (sc[p] > mx) mx = sc[p];
            }
            for (int64_t p = 0; p <= pos; p++) sum += (sc[p] = exp(sc[p] - mx));
            for (int64_t d = 0; d < hd; d++) {
                double a = 0;
                for (int64_t p = 0; p <= pos; p++) a += sc[p] * V[p * hd + d];
                att[i * hd + d] = a / sum;
            }
        }
        qmm_llm_model_linear(m, l, QMM_LLM_O, &w), lin(w, att, o);
        for (int64_t j = 0; j < H; j++) x[j] += o[j];
        qmm_llm_model_norm(m, l, QMM_LLM_POST_ATTN_NORM, &nw);
        rms(x, nw, H, c->rms_norm_eps, h);
        qmm_llm_model_linear(m, l, QMM_LLM_GATE, &w), lin(w, h, g);
        qmm_llm_model_linear(m, l, QMM_LLM_UP, &w), lin(w, h, u);
        for (int64_t j = 0; j < I; j++) g[j] = g[j] / (1.0 + exp(-g[j])) * u[j];
        qmm_llm_model_linear(m, l, QMM_LLM_DOWN, &w), lin(w, g, o);
        for (int64_t j = 0; j < H; j++) x[j] += o[j];
    }
    const qmm_bf16 *fn;
    qmm_llm_model_final_norm(m, &fn);
    rms(x, fn, H, c->rms_norm_eps, h);
    lin(head, h, logits);
    r->len++;
    free(x), free(h), free(q), free(k), free(v), free(att), free(o), free(g), free(u), free(sc);
}

static void check_against_fp64(const qmm_llm_config *c, int prompt, int steps)
{
    qmm_llm_model *m = test_checkpoint_model(c);
    if (!m) return;
    int64_t max = prompt + steps + 1;
    ref64 r = {m, qmm_llm_model_config(m), 0, NULL, NULL, max};
    size_t cache = (size_t)(c->num_layers * c->num_kv_heads * max * c->head_dim);
    r.kc = calloc(cache, 8);
    r.vc = calloc(cache, 8);
    double *want = malloc((size_t)c->vocab_size * 8);
    float *got = malloc((size_t)c->vocab_size * 4);
    int32_t ids[64];
    test_random_ids(ids, prompt, c->vocab_size);
    qmm_llm_cpu_session *s = NULL;
    CHECK_OK(qmm_llm_cpu_session_create(m, max, 0, &s));
    if (s) {
        CHECK_OK(qmm_llm_cpu_prefill(s, ids, prompt, got));
        for (int i = 0; i < prompt; i++) ref_step(&r, ids[i], want);
        double worst = 0;
        for (int step = 0; step <= steps; step++) {
            double err = test_rel_frob_f32(got, want, (size_t)c->vocab_size);
            printf("    %d layers, position %d: logits rel err %.3g\n", (int)c->num_layers,
                   prompt + step - 1, err);
            if (err > worst) worst = err;
            if (step == steps) break;
            int32_t next;
            CHECK_OK(qmm_llm_argmax(got, c->vocab_size, &next));
            CHECK_OK(qmm_llm_cpu_decode(s, next, got));
            ref_step(&r, next, want);
        }
        /* bf16 roundings of the activations between ops: about 1% after a few layers */
        CHECKF(worst < 3e-2, "worst logits rel err %.3g vs the fp64 computation", worst);
    }
    qmm_llm_cpu_session_destroy(s);
    free(r.kc), free(r.vc), free(want), free(got);
    qmm_llm_model_destroy(m);
}

static void one_layer_matches_fp64(void)
{
    qmm_llm_config c = tiny;
    c.num_layers = 1;
    check_against_fp64(&c, 5, 3);
}

static void tiny_model_matches_fp64(void) { check_against_fp64(&tiny, 11, 4); }

static void untied_gqa1_matches_fp64(void)
{
    qmm_llm_config c = tiny;
    c.tie_word_embeddings = 0;
    c.num_kv_heads = 4; /* plain multi-head attention */
    c.head_dim = 128;
    check_against_fp64(&c, 6, 2);
}

/* prefill(n) + decode(id) gives the logits of prefill(n + 1) at its last position */
static void prefill_then_decode_equals_longer_prefill(void)
{
    qmm_llm_model *m = test_checkpoint_model(&tiny);
    if (!m) return;
    enum { N = 13 };
    int32_t ids[N + 1];
    test_random_ids(ids, N + 1, tiny.vocab_size);
    float *a = malloc(4 * 1000), *b = malloc(4 * 1000), *first = malloc(4 * 1000);
    qmm_llm_cpu_session *s1, *s2;
    /* the same thread count: the same rows are then summed in the same order in both */
    CHECK_OK(qmm_llm_cpu_session_create(m, 64, 2, &s1));
    CHECK_OK(qmm_llm_cpu_session_create(m, 64, 2, &s2));
    /* s1's own logits of the N + 1 prompt, which its reset must reproduce bit for bit below */
    CHECK_OK(qmm_llm_cpu_prefill(s1, ids, N + 1, first));
    CHECK_OK(qmm_llm_cpu_reset(s1));
    CHECK_OK(qmm_llm_cpu_prefill(s1, ids, N, NULL));
    CHECK_OK(qmm_llm_cpu_decode(s1, ids[N], a));
    CHECK_OK(qmm_llm_cpu_prefill(s2, ids, N + 1, b));
    CHECK(qmm_llm_cpu_position(s1) == N + 1 && qmm_llm_cpu_position(s2) == N + 1);
    double num = 0, den = 0, maxd = 0;
    for (int i = 0; i < 1000; i++) {
        num += (double)(a[i] - b[i]) * (a[i] - b[i]);
        den += (double)b[i] * b[i];
        if (fabs(a[i] - b[i]) > maxd) maxd = fabs(a[i] - b[i]);
    }
    double rel = sqrt(num / den);
    printf("    decode vs longer prefill: rel %.3g, max |diff| %.3g\n", rel, maxd);
    /* the CPU matmul's summation order may depend on M, so bf16 roundings can differ a little */
    CHECKF(rel < 1e-2, "rel %.3g", rel);
    /* another session, the same prompt and threads: the same bits */
    CHECKF(!memcmp(first, b, 4 * 1000), "two sessions' logits of the same prompt differ");
    /* reset reuses the cache from position 0 and reproduces the first run (the same session,
     * rows and threads: bitwise, whatever decode's rounding did) */
    CHECK_OK(qmm_llm_cpu_reset(s1));
    CHECK_OK(qmm_llm_cpu_prefill(s1, ids, N + 1, a));
    CHECKF(!memcmp(a, first, 4 * 1000), "after reset the prompt's logits differ from the first run");
    qmm_llm_cpu_session_destroy(s1);
    qmm_llm_cpu_session_destroy(s2);
    free(a), free(b), free(first);
    qmm_llm_model_destroy(m);
}

/* A prompt longer than one internal chunk (256 rows) equals the same prompt fed in two calls. */
static void chunked_prefill(void)
{
    qmm_llm_config c = tiny;
    c.num_layers = 1;
    qmm_llm_model *m = NULL;
    CHECK_OK(qmm_llm_model_synthetic(&c, 5, &m));
    if (!m) return;
    enum { N = 300 };
    int32_t *ids = malloc(N * sizeof *ids);
    test_random_ids(ids, N, c.vocab_size);
    float *a = malloc(4 * 1000), *b = malloc(4 * 1000);
    qmm_llm_cpu_session *s;
    CHECK_OK(qmm_llm_cpu_session_create(m, N, 0, &s));
    CHECK_OK(qmm_llm_cpu_prefill(s, ids, N, a));
    CHECK_OK(qmm_llm_cpu_reset(s));
    CHECK_OK(qmm_llm_cpu_prefill(s, ids, 100, NULL));
    CHECK_OK(qmm_llm_cpu_prefill(s, ids + 100, N - 100, b));
    double num = 0, den = 0;
    for (int i = 0; i < 1000; i++) {
        num += (double)(a[i] - b[i]) * (a[i] - b[i]);
        den += (double)b[i] * b[i];
        CHECK(isfinite(a[i]));
    }
    CHECKF(sqrt(num / den) < 1e-2, "chunked vs split prefill rel %.3g", sqrt(num / den));
    qmm_llm_cpu_session_destroy(s);
    free(ids), free(a), free(b);
    qmm_llm_model_destroy(m);
}

static void bad_inputs(void)
{
    qmm_llm_model *m = NULL;
    CHECK_OK(qmm_llm_model_synthetic(&tiny, 1, &m));
    if (!m) return;
    qmm_llm_cpu_session *s = NULL;
    CHECK_STATUS(qmm_llm_cpu_session_create(m, 0, 0, &s), QMM_ERR_RANGE);
    CHECK_STATUS(qmm_llm_cpu_session_create(m, tiny.max_position_embeddings + 1, 0, &s),
                 QMM_ERR_RANGE);
    CHECK_STATUS(qmm_llm_cpu_session_create(NULL, 8, 0, &s), QMM_ERR_NULL);
    CHECK_OK(qmm_llm_cpu_session_create(m, 8, 0, &s));
    if (!s) goto done;
    int32_t ids[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    float logits[1000];
    CHECK_STATUS(qmm_llm_cpu_prefill(s, ids, 9, logits), QMM_ERR_RANGE); /* longer than context */
    CHECK(strstr(qmm_last_error(), "context") != NULL);
    CHECK(qmm_llm_cpu_position(s) == 0);
    CHECK_STATUS(qmm_llm_cpu_prefill(s, ids, 0, logits), QMM_ERR_ARG);
    CHECK_STATUS(qmm_llm_cpu_prefill(s, NULL, 1, logits), QMM_ERR_NULL);
    int32_t bad[3] = {1, 1000, 2};
    CHECK_STATUS(qmm_llm_cpu_prefill(s, bad, 3, logits), QMM_ERR_RANGE);
    bad[1] = -1;
    CHECK_STATUS(qmm_llm_cpu_prefill(s, bad, 3, logits), QMM_ERR_RANGE);
    CHECK(qmm_llm_cpu_position(s) == 0);
    CHECK_OK(qmm_llm_cpu_prefill(s, ids, 8, logits)); /* exactly fills the context */
    CHECK_STATUS(qmm_llm_cpu_decode(s, 5, logits), QMM_ERR_RANGE);
    CHECK(qmm_llm_cpu_position(s) == 8);
    CHECK_OK(qmm_llm_cpu_reset(s));
    int32_t out[8];
    CHECK_STATUS(qmm_llm_cpu_generate(s, ids, 4, 6, out, NULL), QMM_ERR_RANGE); /* 4 + 5 > 8 */
    CHECK_OK(qmm_llm_cpu_generate(s, ids, 4, 5, out, NULL));                   /* 4 + 4 = 8 */
    CHECK_STATUS(qmm_llm_cpu_generate(s, ids, 4, 0, out, NULL), QMM_ERR_ARG);
done:
    qmm_llm_cpu_session_destroy(s);
    qmm_llm_model_destroy(m);
}

static void generate_is_greedy_and_timed(void)
{
    qmm_llm_model *m = test_checkpoint_model(&tiny);
    if (!m) return;
    int32_t ids[6], out[10], again[10];
    test_random_ids(ids, 6, tiny.vocab_size);
    qmm_llm_cpu_session *s;
    CHECK_OK(qmm_llm_cpu_session_create(m, 32, 0, &s));
    qmm_llm_timing t;
    CHECK_OK(qmm_llm_cpu_generate(s, ids, 6, 10, out, &t));
    CHECK(t.prompt_tokens == 6 && t.new_tokens == 10 && t.prefill_ms > 0 && t.decode_ms > 0);
    CHECK(qmm_llm_prefill_tok_s(&t) > 0 && qmm_llm_decode_tok_s(&t) > 0);
    CHECK(qmm_llm_cpu_position(s) == 15);
    /* by hand: prefill, argmax, decode the argmax, ... */
    CHECK_OK(qmm_llm_cpu_reset(s));
    float logits[1000];
    CHECK_OK(qmm_llm_cpu_prefill(s, ids, 6, logits));
    for (int i = 0; i < 10; i++) {
        CHECK_OK(qmm_llm_argmax(logits, 1000, &again[i]));
        if (i < 9) CHECK_OK(qmm_llm_cpu_decode(s, again[i], logits));
    }
    CHECK(!memcmp(out, again, sizeof out));
    printf("    tokens:");
    for (int i = 0; i < 10; i++) printf(" %d", out[i]);
    printf("\n");
    qmm_llm_cpu_session_destroy(s);
    qmm_llm_model_destroy(m);
}

static void argmax_rules(void)
{
    float x[5] = {1, 3, NAN, 3, 2};
    int32_t i = -1;
    CHECK_OK(qmm_llm_argmax(x, 5, &i));
    CHECK(i == 1); /* lowest index of the tie; NaN never wins */
    float n[2] = {NAN, NAN};
    CHECK_STATUS(qmm_llm_argmax(n, 2, &i), QMM_ERR_RANGE);
    float inf[3] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK_OK(qmm_llm_argmax(inf, 3, &i));
    CHECK(i == 0);
    CHECK_STATUS(qmm_llm_argmax(x, 0, &i), QMM_ERR_ARG);
    qmm_llm_timing t = {32, 33, 4.0, 320.0};
    CHECK(fabs(qmm_llm_prefill_tok_s(&t) - 8000.0) < 1e-9);
    CHECK(fabs(qmm_llm_decode_tok_s(&t) - 100.0) < 1e-9);
    t.new_tokens = 1;
    CHECK(qmm_llm_decode_tok_s(&t) == 0.0);
}

/* A real preset's shapes with synthetic weights: activations stay finite and logits spread. */
static void synthetic_preset_stays_finite(void)
{
    qmm_llm_model *m = NULL;
    CHECK_OK(qmm_llm_model_open("qwen3-0.6b", 3, &m));
    if (!m) return;
    const qmm_llm_config *c = qmm_llm_model_config(m);
    CHECK(c->num_layers == 28);
    qmm_llm_cpu_session *s;
    CHECK_OK(qmm_llm_cpu_session_create(m, 8, 0, &s));
    float *logits = malloc((size_t)c->vocab_size * 4);
    int32_t ids[3] = {9707, 11, 1879};
    int32_t out[3];
    CHECK_OK(qmm_llm_cpu_prefill(s, ids, 3, logits));
    double ss = 0;
    int finite = 1;
    for (int64_t i = 0; i < c->vocab_size; i++) {
        finite &= isfinite(logits[i]);
        ss += (double)logits[i] * logits[i];
    }
    double rms_l = sqrt(ss / (double)c->vocab_size);
    printf("    qwen3-0.6b synthetic: logits rms %.3f\n", rms_l);
    CHECK(finite);
    CHECKF(rms_l > 0.5 && rms_l < 50, "logits rms %.3g", rms_l);
    CHECK_OK(qmm_llm_cpu_reset(s));
    CHECK_OK(qmm_llm_cpu_generate(s, ids, 3, 3, out, NULL));
    qmm_llm_cpu_session_destroy(s);
    free(logits);
    qmm_llm_model_destroy(m);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, one_layer_matches_fp64, tiny_model_matches_fp64, untied_gqa1_matches_fp64,
               prefill_then_decode_equals_longer_prefill, chunked_prefill, bad_inputs,
               generate_is_greedy_and_timed, argmax_rules, synthetic_preset_stays_finite);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
