/* Decode under tensor parallelism, on paper: bytes a rank reads plus the collectives (see
 * tp_model.h). A prediction; nothing here is measured. */
#include <math.h>

#include "internal.h"
#include "llm/tp_slice.h"
#include "perf/tp_model.h"

tp_decode_params tp_decode_defaults(void)
{
    tp_decode_params p;
    qmm_model_gpu_preset("h200-measured", &p.gpu);
    p.link.bandwidth_gbs = TP_LINK_GBS_MEASURED;
    p.link.latency_us = TP_LINK_US_MEASURED;
    p.gpu.launch_us = 2.6;
    p.hbm_fraction = 0.66;
    p.context = 1024;
    p.kernels_per_layer = 5;
    return p;
}

static int finite_pos(double v) { return isfinite(v) && v > 0; }

static qmm_status check_link(const tp_link *l)
{
    if (!finite_pos(l->bandwidth_gbs))
        return qmm_fail(QMM_ERR_ARG, "tp model: link bandwidth %g GB/s must be finite and > 0",
                        l->bandwidth_gbs);
    if (!isfinite(l->latency_us) || l->latency_us < 0)
        return qmm_fail(QMM_ERR_ARG, "tp model: link latency %g µs must be finite and >= 0",
                        l->latency_us);
    return QMM_OK;
}

qmm_status tp_allreduce_us(const tp_link *l, int ranks, double bytes, double *us)
{
    if (!l || !us) return qmm_fail(QMM_ERR_NULL, "tp_allreduce_us: NULL argument");
    qmm_status st = check_link(l);
    if (st) return st;
    if (ranks < 1) return qmm_fail(QMM_ERR_ARG, "tp model: t = %d ranks; want >= 1", ranks);
    if (!isfinite(bytes) || bytes < 0)
        return qmm_fail(QMM_ERR_ARG, "tp model: %g bytes to reduce", bytes);
    /* a ring moves 2 (t - 1) / t of the message over each GPU's link */
    *us = ranks == 1 ? 0.0
                     : l->latency_us + 2.0 * (ranks - 1) / ranks * bytes / (l->bandwidth_gbs * 1e3);
    return QMM_OK;
}

qmm_status tp_decode_predict(const qmm_llm_config *c, int ranks, const tp_decode_params *p,
                             tp_decode_estimate *out)
{
    if (!c || !p || !out) return qmm_fail(QMM_ERR_NULL, "tp_decode_predict: NULL argument");
    tp_rank_plan plan; /* t's divisibility, and the vocabulary share of rank 0 (the largest) */
    qmm_status st = tp_plan_rank(c, ranks, 0, &plan);
    if (st) return st;
    if ((st = tp_check_cuda_blocks(c, ranks))) return st; /* a split the CUDA engine runs */
    if ((st = check_link(&p->link))) return st;
    if (!finite_pos(p->gpu.bandwidth_tbs) || !isfinite(p->gpu.launch_us) || p->gpu.launch_us < 0)
        return qmm_fail(QMM_ERR_ARG, "tp model: GPU bandwidth %g TB/s and launch %g µs must be "
                        "finite, > 0 and >= 0", p->gpu.bandwidth_tbs, p->gpu.launch_us);
    if (!(p->hbm_fraction > 0 && p->hbm_fraction <= 1))
        return qmm_fail(QMM_ERR_ARG, "tp model: hbm_fraction %g must be in (0, 1]",
                        p->hbm_fraction);
    if (p->context < 0 || p->context > c->max_position_embeddings)
        return qmm_fail(QMM_ERR_ARG, "tp model: context %lld is outside [0, %lld]",
                        (long long)p->context, (long long)c->max_position_embeddings);
    if (p->kernels_per_layer < 1 || p->kernels_per_layer > 1000)
        return qmm_fail(QMM_ERR_ARG, "tp model: %d kernels a layer", p->kernels_per_layer);

    const double g = (double)(c->group_size ? c->group_size : QMM_GROUP);
    const double w4 = 0.5 + 4.0 / g; /* bytes a weight: 4 bits, a bf16 scale and bias a group */
    double layer = 0; /* weights of one layer's linears, all ranks */
    for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
        int64_t n, k;
        qmm_llm_linear_shape(c, (qmm_llm_linear)i, &n, &k);
        layer += (double)n * (double)k;
    }
    const double L = (double)c->num_layers, h = (double)c->hidden_size;
    /* norms (bf16, every rank a full copy): two of hidden, q and k norms of head_dim */
    const double norms = L * (2 * h + 2 * (double)c->head_dim) * 2 + h * 2;
    tp_decode_estimate e = {0};
    e.ranks = ranks;
    e.weight_bytes = L * layer * w4 / ranks +
                     (double)plan.range[TP_VOCAB].count * h * w4 /* LM head share */ + norms;
    e.kv_bytes = 2.0 * L * (double)plan.kv_heads * (double)c->head_dim * (double)p->context * 2;
    e.memory_us = (e.weight_bytes + e.kv_bytes) / (p->gpu.bandwidth_tbs * p->hbm_fraction * 1e6);
    e.launch_us = L * p->kernels_per_layer * p->gpu.launch_us;
    if ((st = tp_allreduce_us(&p->link, ranks, 2 * h, &e.allreduce_us))) return st;
    if (ranks > 1) {
        /* o and down in each layer, the embedding row; the argmax all-gather pays the latency */
        e.collectives = 2 * (int)c->num_layers + 2;
        e.comm_us = (e.collectives - 1) * e.allreduce_us + p->link.latency_us;
    }
    e.total_us = e.memory_us + e.launch_us + e.comm_us;
    e.tokens_per_s = 1e6 / e.total_us;
    e.comm_share = e.comm_us / e.total_us;
    *out = e;
    return QMM_OK;
}
