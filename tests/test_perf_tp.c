/* The tensor-parallel decode model (src/perf/tp_model.h, a prediction): the all-reduce formula,
 * the bytes a rank reads, the measured t = 1 step it is fit to, and bad parameters. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "perf/tp_model.h"

static int near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b); }

static void allreduce_formula(void)
{
    /* random links and sizes against the ring formula written out */
    for (int i = 0; i < 50; i++) {
        tp_link l = {test_rand_uniform(10, 1000), test_rand_uniform(0, 20)};
        int t = 1 + (int)(test_rand_u64() % 16);
        double bytes = test_rand_uniform(0, 1e8), us = -1;
        CHECK_OK(tp_allreduce_us(&l, t, bytes, &us));
        double want =
            t == 1 ? 0 : l.latency_us + 2.0 * (t - 1) / t * bytes / (l.bandwidth_gbs * 1e3);
        CHECKF(near(us, want, 1e-12) || (want == 0 && us == 0), "t=%d: %g vs %g", t, us, want);
    }
    /* 10240 bytes (qwen3-32b's hidden in bf16) at t = 2 on 450 GB/s, 8 µs: 8 + 10240/450e3 */
    tp_link l = {450, 8};
    double us;
    CHECK_OK(tp_allreduce_us(&l, 2, 10240, &us));
    CHECK(near(us, 8.0 + 10240.0 / 450e3, 1e-12));
}

static void decode_bytes_and_totals(void)
{
    tp_decode_params p = tp_decode_defaults();
    qmm_llm_config c;
    CHECK_OK(qmm_llm_config_preset("qwen3-32b", &c));
    tp_decode_estimate e1, e;
    CHECK_OK(tp_decode_predict(&c, 1, &p, &e1));
    /* by hand: 64 layers of 5120*(8192 + 2*1024) + 8192*5120 + 3*25600*5120 weights, the head
     * 151936*5120, at 0.5 + 4/128 bytes; norms 64*(2*5120 + 2*128)*2 + 5120*2 bytes */
    double layer = 5120.0 * (8192 + 2048) + 8192.0 * 5120 + 3 * 25600.0 * 5120;
    double w = (64 * layer + 151936.0 * 5120) * 0.53125 + 64 * (2 * 5120 + 256) * 2.0 + 10240;
    CHECKF(near(e1.weight_bytes, w, 1e-12), "%.6g vs %.6g", e1.weight_bytes, w);
    CHECK(near(e1.kv_bytes, 2.0 * 64 * 8 * 128 * 1024 * 2, 1e-12));
    CHECK(e1.collectives == 0 && e1.comm_us == 0 && e1.allreduce_us == 0);
    CHECK(near(e1.memory_us, (e1.weight_bytes + e1.kv_bytes) / (4.2e6 * 0.66), 1e-12));
    CHECK(near(e1.total_us, e1.memory_us + e1.launch_us, 1e-12) && near(e1.launch_us, 64 * 5 * 2.6, 1e-12));
    for (int t = 2; t <= 8; t *= 2) {
        CHECK_OK(tp_decode_predict(&c, t, &p, &e));
        CHECK(e.ranks == t && e.collectives == 2 * 64 + 2);
        CHECK(near(e.kv_bytes, e1.kv_bytes / t, 1e-12));
        CHECK(e.weight_bytes < e1.weight_bytes / t * 1.01 && e.weight_bytes > e1.weight_bytes / t);
        CHECK(near(e.comm_us, 129 * e.allreduce_us + p.link.latency_us, 1e-12));
        CHECK(near(e.total_us, e.memory_us + e.launch_us + e.comm_us, 1e-12));
        CHECK(e.comm_share > 0 && e.comm_share < 1);
        CHECK(near(e.tokens_per_s, 1e6 / e.total_us, 1e-12));
    }
    /* a free link gives the ideal split of the memory time */
    p.link.latency_us = 0, p.link.bandwidth_gbs = 1e12;
    CHECK_OK(tp_decode_predict(&c, 2, &p, &e));
    CHECK(e.comm_us < 1e-3 && near(e.memory_us, e1.memory_us / 2, 0.01));
}

/* The measurements the defaults are fit to and checked against (two H200s, commit 55c1747,
 * bench/results/2026-12-01-session4/tp-x2/e2e.csv, 32-token prompt, decode ms a token): t = 1
 * (fit, within 5 %) and t = 2 with the fused TP step's 7 kernels a layer (the 15 %). */
static void fit_to_measured_steps(void)
{
    static const struct {
        const char *preset;
        int t, kernels;
        double us;
    } cells[] = {{"qwen3-8b", 1, 5, 1930.75}, {"qwen3-32b", 1, 5, 6997.96},
                 {"qwen3-8b", 2, 7, 1916.76}, {"qwen3-32b", 2, 7, 5332.84}};
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
        tp_decode_params p = tp_decode_defaults();
        p.context = 32;
        p.kernels_per_layer = cells[i].kernels;
        qmm_llm_config c;
        tp_decode_estimate e;
        CHECK_OK(qmm_llm_config_preset(cells[i].preset, &c));
        CHECK_OK(tp_decode_predict(&c, cells[i].t, &p, &e));
        CHECKF(near(e.total_us, cells[i].us, cells[i].t == 1 ? 0.05 : 0.15),
               "%s t = %d: predicted %.0f µs, measured %.0f", cells[i].preset, cells[i].t,
               e.total_us, cells[i].us);
    }
}

static void bad_parameters(void)
{
    qmm_llm_config c;
    CHECK_OK(qmm_llm_config_preset("qwen3-8b", &c));
    const tp_decode_params good = tp_decode_defaults();
    tp_decode_estimate e, keep;
    memset(&keep, 0x5A, sizeof keep);
    const struct {
        int field;
        double v;
    } bad[] = {{0, 0}, {0, -1}, {0, NAN}, {1, -1}, {1, INFINITY}, {2, 0}, {2, 1.5},
               {3, -1}, {3, 1e9}, {4, 0}, {5, 0}, {6, -1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tp_decode_params p = good;
        switch (bad[i].field) {
        case 0: p.link.bandwidth_gbs = bad[i].v; break;
        case 1: p.link.latency_us = bad[i].v; break;
        case 2: p.hbm_fraction = bad[i].v; break;
        case 3: p.context = (int64_t)bad[i].v; break;
        case 4: p.kernels_per_layer = (int)bad[i].v; break;
        case 5: p.gpu.bandwidth_tbs = bad[i].v; break;
        case 6: p.gpu.launch_us = bad[i].v; break;
        }
        e = keep;
        EXPECT_FAIL(tp_decode_predict(&c, 2, &p, &e), QMM_ERR_ARG);
        CHECKF(!memcmp(&e, &keep, sizeof e), "case %zu wrote its output", i);
    }
    e = keep;
    EXPECT_FAIL(tp_decode_predict(&c, 0, &good, &e), QMM_ERR_ARG);
    EXPECT_FAIL(tp_decode_predict(&c, 3, &good, &e), QMM_ERR_ARG); /* 32 heads */
    CHECK(strstr(qmm_last_error(), "num_attention_heads"));
    CHECK(!memcmp(&e, &keep, sizeof e));
    EXPECT_FAIL(tp_decode_predict(NULL, 1, &good, &e), QMM_ERR_NULL);
    double us;
    tp_link l = {450, 8};
    EXPECT_FAIL(tp_allreduce_us(&l, 0, 1, &us), QMM_ERR_ARG);
    EXPECT_FAIL(tp_allreduce_us(&l, 2, -1, &us), QMM_ERR_ARG);
    EXPECT_FAIL(tp_allreduce_us(NULL, 2, 1, &us), QMM_ERR_NULL);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, allreduce_formula, decode_bytes_and_totals, fit_to_measured_steps,
               bad_parameters);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
