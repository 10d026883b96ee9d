/* The Qwen3 engine's CUDA entry points in a build made without nvcc: each says so. */
#include <string.h>

#include "internal.h"
#include "llm/decode_bucket.h"

#define NO_CUDA                                                                         \
    qmm_fail(QMM_ERR_UNSUPPORTED, "the CUDA forward is not in this qmm: it was built without " \
                                  "CUDA (no nvcc at build time); use the CPU session")

qmm_status qmm_llm_cuda_session_create(const qmm_llm_model *m, int64_t max_seq,
                                       const qmm_llm_cuda_options *opt,
                                       qmm_llm_cuda_session **out)
{
    (void)m, (void)max_seq, (void)opt;
    if (out) *out = NULL;
    return NO_CUDA;
}

void qmm_llm_cuda_session_destroy(qmm_llm_cuda_session *s) { (void)s; }
qmm_status qmm_llm_cuda_reset(qmm_llm_cuda_session *s) { (void)s; return NO_CUDA; }
int64_t qmm_llm_cuda_position(const qmm_llm_cuda_session *s) { (void)s; return 0; }

qmm_status qmm_llm_cuda_session_kernels(const qmm_llm_cuda_session *s, qmm_llm_cuda_kernels *out)
{
    (void)s;
    if (out) memset(out, 0, sizeof *out);
    return NO_CUDA;
}

qmm_status qmm_llm_cuda_prefill(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                float *logits_out, int32_t *next_out)
{
    (void)s, (void)ids, (void)n, (void)logits_out, (void)next_out;
    return NO_CUDA;
}

qmm_status qmm_llm_cuda_decode(qmm_llm_cuda_session *s, int32_t id, float *logits_out,
                               int32_t *next_out)
{
    (void)s, (void)id, (void)logits_out, (void)next_out;
    return NO_CUDA;
}

qmm_status qmm_llm_cuda_generate(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                 int64_t max_new, int32_t *out, qmm_llm_timing *timing)
{
    (void)s, (void)ids, (void)n, (void)max_new, (void)out, (void)timing;
    return NO_CUDA;
}

qmm_status qmm_llm_cuda_profile(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                qmm_llm_profile *prefill, qmm_llm_profile *decode)
{
    (void)s, (void)ids, (void)n, (void)prefill, (void)decode;
    return NO_CUDA;
}

qmm_status qmm_llm_cuda_offload_stats(const qmm_llm_cuda_session *s, qmm_llm_offload_stats *out)
{
    (void)s;
    if (out) memset(out, 0, sizeof *out);
    return NO_CUDA;
}

qmm_status qmm_llm_cuda_profile_graph(qmm_llm_cuda_session *s, const int32_t *ids, int64_t n,
                                      int steps, qmm_llm_graph_profile *out)
{
    (void)s, (void)ids, (void)n, (void)steps;
    if (out) memset(out, 0, sizeof *out);
    return NO_CUDA;
}

int llm_cuda_decode_buckets(const qmm_llm_cuda_session *s) { (void)s; return 0; }
int llm_cuda_decode_cluster_splits(const qmm_llm_cuda_session *s) { (void)s; return 0; }
