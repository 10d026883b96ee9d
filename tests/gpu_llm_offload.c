/* Weight streaming in the Qwen3 CUDA engine: with offload_buffers b in {1, 2, 3} the logits are
 * bitwise those of the resident session (prefill and 8 decode steps, graph and eager, separate
 * and fused projections, chunked prefill, Qwen3-0.6B shapes), the generated tokens match,
 * option errors answer a status, and the streaming figures are reported. In a build without
 * CUDA the options answer QMM_ERR_UNSUPPORTED, then the test skips; without a GPU it skips. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* 5 layers: b = 1, 2, 3 each leave some layers to stream and 5 is a multiple of none */
static const qmm_llm_config tiny5 = {256, 512, 5, 4, 2, 64, 1000, 1024, 1e6, 1e-6, 1, 128};

#ifndef QMM_HAVE_CUDA
int main(void)
{
    qmm_llm_model *m = NULL;
    qmm_status st = qmm_llm_model_synthetic(&tiny5, 1, &m);
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    o.offload_weights = 1;
    o.offload_buffers = 2;
    qmm_llm_cuda_session *s = (qmm_llm_cuda_session *)&o; /* must come back NULL */
    qmm_llm_offload_stats os;
    int ok = st == QMM_OK && qmm_llm_cuda_session_create(m, 16, &o, &s) == QMM_ERR_UNSUPPORTED &&
             s == NULL && qmm_llm_cuda_offload_stats(NULL, &os) == QMM_ERR_UNSUPPORTED;
    qmm_llm_model_destroy(m);
    if (!ok) {
        fprintf(stderr, "FAIL: a build without CUDA must answer QMM_ERR_UNSUPPORTED to weight "
                        "streaming\n");
        return 1;
    }
    test_skip_no_gpu("this build has no CUDA backend (nvcc was not found); checked only that the "
                     "offload options answer QMM_ERR_UNSUPPORTED");
}
#else


static qmm_llm_cuda_session *session(const qmm_llm_model *m, int64_t max_seq, int buffers,
                                     int graph, int fuse, int64_t chunk)
{
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    o.use_graph = graph;
    o.fuse_projections = fuse;
    o.max_chunk = chunk;
    o.offload_weights = buffers > 0;
    o.offload_buffers = buffers;
    qmm_llm_cuda_session *s = NULL;
    qmm_status st = qmm_llm_cuda_session_create(m, max_seq, &o, &s);
    CHECKF(st == QMM_OK, "session (buffers %d): %s (%s)", buffers, qmm_last_error(),
           qmm_status_name(st));
    return s;
}

/* Prefill n random ids then `steps` greedy decode steps on a resident and a streamed session;
 * every step's logits must be bit-for-bit equal, and so must the tokens. */
static void compare(const qmm_llm_model *m, int n, int steps, int buffers, int graph, int fuse,
                    int64_t chunk, const char *what)
{
    const int64_t V = qmm_llm_model_config(m)->vocab_size;
    int32_t *ids = malloc((size_t)n * 4);
    float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4);
    test_random_ids(ids, n, V);
    qmm_llm_cuda_session *rs = session(m, n + steps + 1, 0, graph, fuse, chunk);
    qmm_llm_cuda_session *os = session(m, n + steps + 1, buffers, graph, fuse, chunk);
    if (rs && os && a && b && ids) {
        int32_t ta = -1, tb = -2;
        CHECK_OK(qmm_llm_cuda_prefill(rs, ids, n, a, &ta));
        CHECK_OK(qmm_llm_cuda_prefill(os, ids, n, b, &tb));
        CHECKF(!memcmp(a, b, (size_t)V * 4) && ta == tb,
               "%s, b = %d: prefill logits or token differ (%d vs %d)", what, buffers, ta, tb);
        for (int i = 0; i < steps && !test_failed_now(); i++) {
            int32_t na = -1, nb = -2;
            CHECK_OK(qmm_llm_cuda_decode(rs, ta, a, &na));
            CHECK_OK(qmm_llm_cuda_decode(os, tb, b, &nb));
            CHECKF(!memcmp(a, b, (size_t)V * 4) && na == nb,
                   "%s, b = %d: decode step %d logits or token differ (%d vs %d)", what, buffers,
                   i, na, nb);
            ta = na, tb = nb;
        }
        /* the chained generate as well */
        int32_t ga[9], gb[9];
        CHECK_OK(qmm_llm_cuda_reset(rs));
        CHECK_OK(qmm_llm_cuda_reset(os));
        CHECK_OK(qmm_llm_cuda_generate(rs, ids, n, steps + 1 > 9 ? 9 : steps + 1, ga, NULL));
        CHECK_OK(qmm_llm_cuda_generate(os, ids, n, steps + 1 > 9 ? 9 : steps + 1, gb, NULL));
        CHECKF(!memcmp(ga, gb, (size_t)(steps + 1 > 9 ? 9 : steps + 1) * 4),
               "%s, b = %d: generated tokens differ", what, buffers);
        printf("    %s, b = %d: prefill %d + %d steps bitwise equal\n", what, buffers, n, steps);
    }
    qmm_llm_cuda_session_destroy(rs);
    qmm_llm_cuda_session_destroy(os);
    free(ids), free(a), free(b);
}

static void tiny_bitwise_equal(void)
{
    qmm_llm_model *m = NULL;
    CHECK_OK(qmm_llm_model_synthetic(&tiny5, 11, &m));
    if (!m) return;
    for (int b = 1; b <= 3; b++) {
        compare(m, 13, 8, b, 1, 0, 0, "tiny, graph");
        compare(m, 13, 8, b, 0, 0, 0, "tiny, eager");
        compare(m, 13, 8, b, 1, 1, 0, "tiny, fused");
    }
    compare(m, 21, 8, 2, 1, 0, 4, "tiny, chunks of 4");
    compare(m, 1, 8, 5, 1, 0, 0, "tiny, b = layers");
    qmm_llm_model_destroy(m);
}

static void preset_bitwise_equal(void)
{
    qmm_llm_model *m = NULL;
    CHECK_OK(qmm_llm_model_open("qwen3-0.6b", 5, &m));
    if (!m) return;
    for (int b = 1; b <= 3; b++) compare(m, 7, 8, b, 1, 0, 0, "qwen3-0.6b");
    qmm_llm_model_destroy(m);
}

static void options_stats_and_profile(void)
{
    qmm_llm_model *m = NULL;
    CHECK_OK(qmm_llm_model_synthetic(&tiny5, 3, &m));
    if (!m) return;
    qmm_llm_cuda_options o = qmm_llm_cuda_options_default();
    CHECK(o.offload_weights == 0 && o.offload_buffers == 2);
    o.offload_weights = 1;
    qmm_llm_cuda_session *s = NULL;
    o.offload_buffers = 0;
    CHECK_STATUS(qmm_llm_cuda_session_create(m, 16, &o, &s), QMM_ERR_ARG);
    CHECK(s == NULL);
    o.offload_buffers = -3;
    CHECK_STATUS(qmm_llm_cuda_session_create(m, 16, &o, &s), QMM_ERR_ARG);
    /* buffers 0 is fine while streaming is off */
    o.offload_weights = 0;
    o.offload_buffers = 0;
    CHECK_OK(qmm_llm_cuda_session_create(m, 16, &o, &s));
    qmm_llm_offload_stats st;
    if (s) {
        CHECK_OK(qmm_llm_cuda_offload_stats(s, &st));
        CHECK(st.buffers == 0 && st.layer_bytes == 0 && st.slot_bytes == 0);
    }
    qmm_llm_cuda_session_destroy(s);
    s = NULL;
    CHECK_STATUS(qmm_llm_cuda_offload_stats(NULL, &st), QMM_ERR_NULL);
    /* more slots than layers: one per layer */
    o.offload_weights = 1;
    o.offload_buffers = 100;
    CHECK_OK(qmm_llm_cuda_session_create(m, 16, &o, &s));
    if (s) {
        CHECK_OK(qmm_llm_cuda_offload_stats(s, &st));
        CHECK(st.buffers == (int)tiny5.num_layers);
        CHECK(st.layer_bytes > 0 && st.slot_bytes == st.layer_bytes * (size_t)st.buffers);
        CHECK(st.h2d_gbs > 0 && st.upload_ms > 0);
        printf("    tiny layer image %zu bytes, H2D %.1f GB/s, %.4f ms a layer\n", st.layer_bytes,
               st.h2d_gbs, st.upload_ms);
        int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        qmm_llm_profile pp, pd;
        CHECK_OK(qmm_llm_cuda_profile(s, ids, 8, &pp, &pd));
        CHECK(pp.count > 5 && pd.count > 5 && pp.total_ms > 0 && pd.total_ms > 0);
        CHECK(qmm_llm_cuda_position(s) == 0);
    }
    qmm_llm_cuda_session_destroy(s);
    qmm_llm_model_destroy(m);
}

TEST_GPU_MAIN("weight streaming is not tested here", tiny_bitwise_equal, preset_bitwise_equal,
              options_stats_and_profile)
#endif
