/* The shared matmul problem of the GPU kernel tests (matmul_prob.h). */
#include "matmul_prob.h"

#ifdef QMM_HAVE_CUDA
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

prob_style prob_setup = {NULL, 64, 1};

int prob_init(prob *p, int64_t m, int64_t n, int64_t k) { return prob_init_g(p, m, n, k, QMM_GROUP); }

int prob_init_g(prob *p, int64_t m, int64_t n, int64_t k, int group)
{
    memset(p, 0, sizeof *p);
    p->m = m, p->n = n, p->k = k;
    if (qmm_w4_alloc_group(n, k, group, &p->w) != QMM_OK) return 0;
    test_random_w4(&p->w, 0.002, 0.02);
    p->a = malloc((size_t)(m * k) * sizeof *p->a);
    p->out = malloc((size_t)(m * n) * sizeof *p->out);
    if (!p->a || !p->out) return 0;
    test_fill_bf16(p->a, (size_t)(m * k), 1.0);
    if (qmm_cuda_weight_upload(prob_setup.ctx, &p->w, &p->dw) != QMM_OK) return 0;
    if (prob_setup.fixed_workspace) {
        p->ws_bytes = (size_t)32 * m * n * 4 + 256; /* up to split 32 in f32 */
        size_t dense = (size_t)n * k * 2 + ((size_t)33 << 20);
        if (p->ws_bytes < dense) p->ws_bytes = dense;
        if (cudaMalloc(&p->ws, p->ws_bytes) != cudaSuccess) return 0;
    }
    if (cudaMalloc((void **)&p->a_dev, (size_t)(m * k) * 2) != cudaSuccess ||
        cudaMalloc((void **)&p->c_dev, (size_t)(m * n) * 2) != cudaSuccess)
        return 0;
    cudaMemcpy(p->a_dev, p->a, (size_t)(m * k) * 2, cudaMemcpyHostToDevice);
    /* fp64 reference on every row for small M, on 24 rows spread over M (the last included) */
    int all = m <= prob_setup.full_rows;
    p->rows = all ? (int)m : 24;
    p->row_idx = malloc(sizeof(int64_t) * (size_t)p->rows);
    for (int i = 0; i < p->rows; i++)
        p->row_idx[i] = all ? i : (i == p->rows - 1 ? m - 1 : (int64_t)(test_rand_u64() % (uint64_t)m));
    prob_reference(p);
    return 1;
}

int prob_init_shared_pair(prob *p, prob *q, int64_t m, int64_t n, int64_t k, int group)
{
    memset(q, 0, sizeof *q);
    if (!prob_init_g(p, m, n, k, group)) return 0;
    const int per = 128 / group;
    for (int64_t i = 0; i < n * (k / group); i++) { /* group i copies its block's first */
        p->w.scales[i] = p->w.scales[i - i % per];
        p->w.biases[i] = p->w.biases[i - i % per];
    }
    prob_reference(p);
    qmm_cuda_weight_free(p->dw);
    p->dw = NULL;
    if (qmm_cuda_weight_upload(prob_setup.ctx, &p->w, &p->dw) != QMM_OK || !prob_init(q, m, n, k))
        return 0;
    memcpy(q->w.packed, p->w.packed, p->w.packed_count * 4);
    for (int64_t i = 0; i < n * (k / 128); i++)
        q->w.scales[i] = p->w.scales[i * per], q->w.biases[i] = p->w.biases[i * per];
    qmm_cuda_weight_free(q->dw);
    q->dw = NULL;
    if (qmm_cuda_weight_upload(prob_setup.ctx, &q->w, &q->dw) != QMM_OK) return 0;
    return cudaMemcpy(q->a_dev, p->a_dev, (size_t)(m * k) * 2, cudaMemcpyDeviceToDevice) ==
           cudaSuccess;
}

void prob_reference(prob *p)
{
    const int64_t k = p->k, n = p->n;
    qmm_bf16 *asub = malloc((size_t)p->rows * (size_t)k * 2);
    for (int i = 0; i < p->rows; i++) memcpy(asub + i * k, p->a + p->row_idx[i] * k, (size_t)k * 2);
    free(p->ref);
    p->ref = malloc(sizeof(double) * (size_t)p->rows * (size_t)n);
    test_matmul_f64(asub, p->rows, &p->w, p->ref);
    /* Outputs that cancel (a sum far below the sum of its terms' sizes) make ||ref|| a poor
     * scale: the bf16 rounding of paths that round the weight is relative to the terms. The
     * floor is the terms' own size ||sqrt(Σ (a·w)²)||, about ||ref|| for random data of many
     * outputs, which also holds where one term dominates a cancelling sum (its weight's rounding
     * alone is 2^-9 of it). The earlier floor ||Σ|a||w||| / (2 sqrt K), never above this one
     * (Cauchy-Schwarz), let the tiled and dense paths at M = N = 1, K = 128 exceed 1e-2 in
     * 0.9 % of random problems (2.3e-2 at worst, as a device run did); with this one none of
     * 400 000 emulated did (9.6e-3 at worst; NOTES.md, the eighteenth session). */
    double *sq_ref = malloc(sizeof(double) * (size_t)p->rows * (size_t)n), sq = 0;
    test_matmul_sq_f64(asub, p->rows, &p->w, sq_ref);
    for (int64_t i = 0; i < (int64_t)p->rows * n; i++) sq += sq_ref[i];
    p->floor = sqrt(sq);
    free(sq_ref);
    free(asub);
}

void prob_free(prob *p)
{
    qmm_cuda_weight_free(p->dw);
    cudaFree(p->a_dev), cudaFree(p->c_dev), cudaFree(p->ws);
    qmm_w4_free(&p->w);
    free(p->a), free(p->out), free(p->row_idx), free(p->ref);
    memset(p, 0, sizeof *p);
}

qmm_status prob_run(prob *p, const qmm_cuda_options *o, qmm_bf16 *out, qmm_plan *plan)
{
    void *ws = p->ws;
    size_t bytes = p->ws_bytes;
    if (!prob_setup.fixed_workspace) {
        qmm_status st = qmm_cuda_workspace_size(prob_setup.ctx, p->m, p->n, p->k, o, &bytes);
        if (st != QMM_OK) return st;
        if (bytes && cudaMalloc(&ws, bytes) != cudaSuccess) return QMM_ERR_NOMEM;
    }
    cudaMemset(p->c_dev, p->zero_poison ? 0x00 : 0xFF, (size_t)(p->m * p->n) * 2);
    qmm_status st = qmm_cuda_matmul(prob_setup.ctx, p->a_dev, p->m, p->dw, p->c_dev, ws, bytes, o, plan);
    cudaError_t e = cudaDeviceSynchronize();
    if (ws != p->ws) cudaFree(ws);
    if (st != QMM_OK) return st;
    if (e != cudaSuccess) {
        printf("    kernel failed: %s\n", cudaGetErrorString(e));
        return QMM_ERR_CUDA;
    }
    cudaMemcpy(out, p->c_dev, (size_t)(p->m * p->n) * 2, cudaMemcpyDeviceToHost);
    return QMM_OK;
}

double prob_check(const prob *p, const qmm_bf16 *out, double tol, const char *what)
{
    for (int64_t i = 0; i < p->m * p->n; i++)
        if (!isfinite(qmm_bf16_to_f32(out[i]))) {
            test_fail(__FILE__, __LINE__, "%s M=%lld N=%lld K=%lld: element %lld (row %lld) not finite",
                      what, (long long)p->m, (long long)p->n, (long long)p->k, (long long)i,
                      (long long)(i / p->n));
            return INFINITY;
        }
    qmm_bf16 *sub = malloc((size_t)p->rows * (size_t)p->n * 2);
    for (int i = 0; i < p->rows; i++) memcpy(sub + i * p->n, out + p->row_idx[i] * p->n, (size_t)p->n * 2);
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)p->rows * (size_t)p->n; i++) {
        double d = qmm_bf16_to_f32(sub[i]) - p->ref[i];
        num += d * d;
        den += p->ref[i] * p->ref[i];
    }
    double err = sqrt(num) / fmax(sqrt(den), p->floor);
    free(sub);
    CHECKF(err <= tol, "%s: M=%lld N=%lld K=%lld rel err %.3e > %.1e", what, (long long)p->m,
           (long long)p->n, (long long)p->k, err, tol);
    return err;
}

int prob_qwen3_projections(prob_proj *out, int distinct)
{
    qmm_llm_config c;
    if (qmm_llm_config_preset("qwen3-4b", &c) != QMM_OK) return 0;
    int count = 0;
    for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
        prob_proj x = {qmm_llm_linear_name((qmm_llm_linear)i), 0, 0};
        if (qmm_llm_linear_shape(&c, (qmm_llm_linear)i, &x.n, &x.k) != QMM_OK) return 0;
        int seen = 0;
        for (int j = 0; distinct && j < count; j++) seen |= out[j].n == x.n && out[j].k == x.k;
        if (!seen) out[count++] = x;
    }
    return count;
}
#endif
