/* `qmm bench ops`: device copies of one weight, so timed calls read it from HBM (cold), as in a
 * real model where 36 layers of weights evict each other from the L2. */
#ifdef QMM_HAVE_CUDA

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gpu.h"

/* Every copy is used once per graph replay, so the count bounds the graph size: Qwen3-4B's
 * smallest weight (k/v in W4, 1.4 MB) needs 181; only tiny --shape weights reach the cap. */
#define MAX_COPIES 512

/* Copies of `bytes` each totalling >= 4x the L2, at most --max-copies-mb and MAX_COPIES (and at
 * least one). */
static int copies_needed(size_t bytes, long long l2, const bench_opts *o, const char *what)
{
    if (o->hot) return 1;
    double need = ceil(4.0 * (double)l2 / (double)bytes);
    double cap = floor(o->max_copies_mb * 1048576.0 / (double)bytes);
    if (need < 2) need = 2;
    if (cap > MAX_COPIES) cap = MAX_COPIES;
    if (cap < 1) cap = 1;
    if (need > cap) {
        fprintf(stderr, "qmm bench ops: WARNING: %.0f %s copies allowed (--max-copies-mb %.0f, at "
                        "most %d): %.1fx the L2, want 4x; weights partly L2-resident\n",
                cap, what, o->max_copies_mb, MAX_COPIES, cap * (double)bytes / (double)l2);
        need = cap;
    }
    return (int)need;
}

void bench_copies_create(bench_copies *cp, qmm_cuda_ctx *ctx, const qmm_w4 *w,
                         const qmm_bf16 *w_bf16, long long l2_bytes, const bench_opts *o)
{
    memset(cp, 0, sizeof *cp);
    size_t w4_total = 0;
    CKQ(qmm_w4_sizes_group(w->n, w->k, w->group, NULL, NULL, &w4_total));
    cp->w4_logical_bytes = w4_total;
    cp->bf16_bytes = (size_t)w->n * (size_t)w->k * sizeof(qmm_bf16);
    int n4 = copies_needed(w4_total, l2_bytes, o, "W4");
    int nb = copies_needed(cp->bf16_bytes, l2_bytes, o, "bf16");
    cp->w4 = calloc((size_t)n4, sizeof *cp->w4);
    cp->bf16 = calloc((size_t)nb, sizeof *cp->bf16);
    if (!cp->w4 || !cp->bf16) bench_die("calloc", "out of host memory", __FILE__, __LINE__);

    bench_set_activity("uploading %d W4 copies of %lldx%lld", n4, (long long)w->n, (long long)w->k);
    for (int i = 0; i < n4; i++) {
        CKQ(qmm_cuda_weight_upload(ctx, w, &cp->w4[i]));
        cp->n_w4 = i + 1;
    }
    cp->w4_bytes = qmm_cuda_weight_bytes(cp->w4[0]);
    bench_set_activity("uploading %d bf16 copies of %lldx%lld", nb, (long long)w->n,
                       (long long)w->k);
    for (int i = 0; i < nb; i++) {
        CK(cudaMalloc(&cp->bf16[i], cp->bf16_bytes));
        cp->n_bf16 = i + 1;
        CK(cudaMemcpy(cp->bf16[i], w_bf16, cp->bf16_bytes, cudaMemcpyHostToDevice));
    }
    CK(cudaDeviceSynchronize()); /* uploads may run on other streams: finish before timing */
}

void bench_copies_free(bench_copies *cp)
{
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < cp->n_w4; i++) qmm_cuda_weight_free(cp->w4[i]);
    for (int i = 0; i < cp->n_bf16; i++) CK(cudaFree(cp->bf16[i]));
    free(cp->w4);
    free(cp->bf16);
    memset(cp, 0, sizeof *cp);
}

#else
typedef int bench_copies_unused; /* CUDA builds only */
#endif
