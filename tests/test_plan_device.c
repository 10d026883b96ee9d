/* The device split-K policy (pure function): properties on the shipped H200 description. */
#include <string.h>

#include "harness.h"

/* the shipped tuning table's sm_90 entry (H200: 132 SMs, its occupancy, the fitted rates) */
static qmm_device_desc h200(void)
{
    qmm_device_desc d;
    if (qmm_tune_desc(9, 0, 0, &d) != QMM_OK) memset(&d, 0, sizeof d);
    return d;
}

static const int64_t shapes[][2] = {{2560, 4096}, {2560, 1024}, {4096, 2560}, {2560, 9728},
                                    {9728, 2560}, {128, 1}, {256, 1032}};

static void properties(void)
{
    qmm_device_desc d = h200();
    for (int s = 0; s < 7; s++)
        for (int64_t m = 1; m <= 8192; m = m < 16 ? m + 1 : m * 2) {
            int64_t k = shapes[s][0], n = shapes[s][1];
            qmm_plan p;
            CHECK_OK(qmm_plan_device(m, n, k, &d, &p));
            CHECK(p.predicted_us > 0);
            if (m <= 8) {
                CHECKF(p.path == QMM_PATH_MATVEC, "M=%lld: %s", (long long)m, qmm_path_name(p.path));
                continue;
            }
            if (p.path == QMM_PATH_DENSE) { /* the model's pick over the best tiled plan */
                CHECK(m >= d.dense_min_m && p.split == 1 && p.k_per_split == k);
                continue;
            }
            const qmm_tile_config *c = &d.config[p.config];
            CHECK(p.tile_m == c->tile_m && p.tile_n == c->tile_n);
            CHECK(p.split >= 1 && p.split <= d.max_split && k % ((int64_t)p.split * 128) == 0);
            CHECK(p.k_per_split * p.split == k && p.k_per_split / 128 >= (p.split > 1 ? d.min_k_tiles : 1));
            CHECK((p.split > 1) == (p.path == QMM_PATH_SPLITK));
            CHECK(p.blocks == p.base_blocks * p.split);
            if (p.split > 1)
                CHECKF(p.blocks <= (int64_t)d.gpu.sms * c->blocks_per_sm, "K=%lld N=%lld M=%lld: %lld blocks",
                       (long long)k, (long long)n, (long long)m, (long long)p.blocks);
            if (p.base_blocks >= (int64_t)d.gpu.sms * c->blocks_per_sm) CHECK(p.split == 1);
            /* the chosen split is the model's best among the aligned candidates */
            for (int sp = 1; sp <= p.split; sp++) {
                if ((k / 128) % sp) continue;
                qmm_plan alt = p;
                alt.split = sp;
                alt.path = sp > 1 ? QMM_PATH_SPLITK : QMM_PATH_TILED;
                CHECK(qmm_plan_predict_us(m, n, k, &d, &alt) >= p.predicted_us * 0.999);
            }
        }
}

static void splits_underfilled_kv(void)
{
    qmm_device_desc d = h200();
    qmm_plan p;
    CHECK_OK(qmm_plan_device(32, 1024, 2560, &d, &p));
    printf("    k/v M=32: config %d split %d blocks %lld predicted %.2f us\n", p.config, p.split,
           (long long)p.blocks, p.predicted_us);
    CHECK(p.split > 1);
    CHECK_OK(qmm_plan_device(2048, 4096, 2560, &d, &p));
    CHECK(p.split == 1 && p.path == QMM_PATH_DENSE);
    d.dense_tflops = 0; /* no dense path: a full grid runs unsplit */
    CHECK_OK(qmm_plan_device(2048, 4096, 2560, &d, &p));
    CHECK(p.split == 1 && p.path == QMM_PATH_TILED);
}

static void bad_input(void)
{
    qmm_device_desc d = h200();
    qmm_plan p;
    memset(&p, 0x5A, sizeof p);
    qmm_plan before = p;
    CHECK_STATUS(qmm_plan_device(32, 1024, 2560, NULL, &p), QMM_ERR_NULL);
    CHECK_STATUS(qmm_plan_device(32, 1024, 2560, &d, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_plan_device(0, 1024, 2560, &d, &p), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_plan_device(32, 1024, 100, &d, &p), QMM_ERR_SHAPE);
    d.gpu.sms = 0;
    CHECK_STATUS(qmm_plan_device(32, 1024, 2560, &d, &p), QMM_ERR_ARG);
    d = h200();
    d.config_count = 9;
    CHECK_STATUS(qmm_plan_device(32, 1024, 2560, &d, &p), QMM_ERR_ARG);
    d = h200();
    d.gpu.bandwidth_tbs = 0;
    CHECK_STATUS(qmm_plan_device(32, 1024, 2560, &d, &p), QMM_ERR_ARG);
    d = h200();
    d.tiled_tflops = 1.0 / 0.0; /* non-finite rates would make every prediction equal */
    CHECK_STATUS(qmm_plan_device(32, 1024, 2560, &d, &p), QMM_ERR_ARG);
    d = h200();
    d.gpu.launch_us = 0.0 / 0.0;
    CHECK_STATUS(qmm_plan_device(32, 1024, 2560, &d, &p), QMM_ERR_ARG);
    d = h200();
    d.config[1].stages = 0;
    CHECK_STATUS(qmm_plan_device(32, 1024, 2560, &d, &p), QMM_ERR_ARG);
    d = h200();
    d.matvec_limit_m = d.matvec_max_m - 1; /* the planner would pick a matvec the kernel refuses */
    CHECK_STATUS(qmm_plan_device(32, 1024, 2560, &d, &p), QMM_ERR_ARG);
    CHECK(memcmp(&p, &before, sizeof p) == 0);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, properties, splits_underfilled_kv, bad_input);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
