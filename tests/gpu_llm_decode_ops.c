/*
 * The decode step's kernels against the CPU operators of cpu_ops.c on fresh random data, outputs
 * (and workspaces) poisoned with NaN first:
 *   fused decode attention vs llm_head_norm_rope (q heads, new k) + the cache append +
 *     llm_attend_row: output relative Frobenius <= 5e-3 (bf16 output; the sums run in another
 *     order), the new K row within 1 bf16 ulp (+1e-5 where RoPE cancels), the new V row and
 *     every other cache row bit for bit (rows past the position stay poisoned: they are never
 *     read or written), the split counters back at zero; the same bits twice and with PDL on
 *     and off;
 *   the cluster-merged decode attention the same way (the fused kernel's cut and merge order
 *     where every split holds one tile, so there the same bits as the fused kernel);
 *   two-stage argmax vs qmm_llm_argmax: the same index (ties, NaN, -inf, all NaN -> error 2);
 *   swiglu vs llm_swiglu and add + rmsnorm vs llm_add_row + llm_rmsnorm_row: the residual bit for
 *     bit, bf16 outputs within 1 ulp (expf and the sum of squares differ in the last bits);
 *     nothing written past the output;
 *   the tensor-parallel fused step's add with the norm folded (add_norm_fold_matches_cpu).
 * Skips (exit 77) without a GPU or without CUDA in this build.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

#ifndef QMM_HAVE_CUDA
int main(void) { test_skip_no_gpu("this build has no CUDA backend (nvcc was not found)"); }
#else
#include <cuda_runtime.h>

#include "llm/cpu_ops.h"
#include "llm/cuda/decode_ops.h"

#define POISON_F32 0x7FC00BADu

/* Kernels run on their own non-blocking stream (PDL is a property of a stream's launches); the
 * copies are synchronous cudaMemcpy on the legacy stream, so every upload is followed by a device
 * synchronisation before the next launch. */
static cudaStream_t g_stream;

/* Device copy of host bytes (NULL on failure, the case is failed). */
static void *up(const void *h, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) {
        test_fail(__FILE__, __LINE__, "cudaMalloc of %zu bytes failed", bytes);
        return NULL;
    }
    if (h) cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize(); /* a pageable copy may return before its DMA lands */
    return d;
}

static void down(void *h, const void *d, size_t bytes)
{
    cudaError_t e = cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
    CHECKF(e == cudaSuccess, "copy back: %s", cudaGetErrorString(e));
}

static void poison_f32(float *x, size_t n)
{
    uint32_t p = POISON_F32;
    for (size_t i = 0; i < n; i++) memcpy(&x[i], &p, 4);
}

static void poison_bf16(qmm_bf16 *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = TEST_POISON_BF16;
}

/* bf16 bit patterns as a monotone integer line: |ord(a) - ord(b)| is the distance in ulps. */
static int32_t ord(qmm_bf16 b) { return b & 0x8000 ? -(int32_t)(b & 0x7FFF) : (int32_t)b; }

static int ulps(qmm_bf16 a, qmm_bf16 b) { return abs(ord(a) - ord(b)); }

/* ---- fused decode attention ---------------------------------------------------------------- */

typedef struct attn_case {
    int hd, group, kv_heads;
    int64_t len, max_seq;
    int nsplit; /* 0: the session rule for 132 SMs */
    int same_as; /* > 0: launched with this many splits too, on the same inputs, for the same bits
                  * (a decode graph's bucket against the session's count: decode_bucket.h) */
    int cluster; /* 1: the cluster kernel (its same_as run: the fused kernel) */
} attn_case;

static int g_cluster_cases; /* cluster cases that ran (not skipped) */

static void run_attention_case(const attn_case *c)
{
    const int hd = c->hd, kvh = c->kv_heads, heads = kvh * c->group, half = hd / 2;
    const int64_t p = c->len - 1, ms = c->max_seq;
    /* the cluster kernel: the case's split count (a bucket's clusters), else the most the
     * device holds */
    const int most_c = c->cluster ? llm_cuda_op_attention_decode_cluster_splits(kvh, hd, c->group, 0) : 0;
    const int nsplit = c->cluster ? (most_c && c->nsplit ? c->nsplit : most_c)
                       : c->nsplit ? c->nsplit
                                   : llm_cuda_op_attention_decode_splits(ms, kvh, 132);
    if (c->cluster && nsplit == 0) {
        printf("    SKIP hd %d, %d query heads per KV head, %d KV heads: this GPU does not hold "
               "%d of the cluster kernel's clusters at once\n", hd, c->group, kvh, kvh);
        return;
    }
    g_cluster_cases += c->cluster;
    /* the cluster kernel has the fused kernel's bits only where every split holds one tile */
    const int compare = c->same_as && (!c->cluster || c->len <= 128 ||
                                       (c->len + 63) / 64 <= (int64_t)nsplit);
    const float eps = 1e-6f;
    const size_t cache_n = (size_t)kvh * (size_t)ms * (size_t)hd;
    const int most = c->same_as > nsplit ? c->same_as : nsplit;
    const size_t part_n = (size_t)heads * (size_t)most * (size_t)(hd + 2);
    printf("    hd %d, %d query heads per KV head, %d KV heads, position %lld of %lld, %d splits%s%s\n",
           hd, c->group, kvh, (long long)p, (long long)ms, nsplit, c->cluster ? " (cluster kernel)" : "",
           compare ? c->cluster ? " (and the fused kernel)" : " (and more)" : "");

    qmm_bf16 *q = malloc((size_t)heads * hd * 2), *k = malloc((size_t)kvh * hd * 2);
    qmm_bf16 *v = malloc((size_t)kvh * hd * 2), *qw = malloc((size_t)hd * 2), *kw = malloc((size_t)hd * 2);
    qmm_bf16 *kc = malloc(cache_n * 2), *vc = malloc(cache_n * 2);
    qmm_bf16 *gkc = malloc(cache_n * 2), *gvc = malloc(cache_n * 2);
    float *cs = malloc((size_t)ms * half * 4), *sn = malloc((size_t)ms * half * 4);
    float *part = malloc(part_n * 4);
    qmm_bf16 *out = malloc((size_t)heads * hd * 2), *out2 = malloc((size_t)heads * hd * 2);
    qmm_bf16 *ref = malloc((size_t)heads * hd * 2), *qr = malloc((size_t)hd * 2);
    float *scores = malloc((size_t)c->len * 4);
    test_fill_bf16(q, (size_t)heads * hd, 1.0);
    test_fill_bf16(k, (size_t)kvh * hd, 1.0);
    test_fill_bf16(v, (size_t)kvh * hd, 1.0);
    for (int i = 0; i < hd; i++) {
        qw[i] = qmm_f32_to_bf16((float)(1.0 + 0.2 * test_rand_normal()));
        kw[i] = qmm_f32_to_bf16((float)(1.0 + 0.2 * test_rand_normal()));
    }
    /* rows before p: data; row p and after: poison (the kernel must write p and never read past) */
    for (int h = 0; h < kvh; h++)
        for (int64_t r = 0; r < ms; r++) {
            size_t at = ((size_t)h * (size_t)ms + (size_t)r) * (size_t)hd;
            if (r < p) {
                test_fill_bf16(kc + at, (size_t)hd, 1.0);
                test_fill_bf16(vc + at, (size_t)hd, 1.0);
            } else {
                poison_bf16(kc + at, (size_t)hd);
                poison_bf16(vc + at, (size_t)hd);
            }
        }
    llm_rope_table(1e6, hd, ms, cs, sn);
    poison_f32(part, part_n);
    poison_bf16(out, (size_t)heads * hd);
    int32_t pos = (int32_t)p;

    void *dq = up(q, (size_t)heads * hd * 2), *dk = up(k, (size_t)kvh * hd * 2);
    void *dv = up(v, (size_t)kvh * hd * 2), *dqw = up(qw, (size_t)hd * 2), *dkw = up(kw, (size_t)hd * 2);
    void *dkc = up(kc, cache_n * 2), *dvc = up(vc, cache_n * 2);
    void *dcs = up(cs, (size_t)ms * half * 4), *dsn = up(sn, (size_t)ms * half * 4);
    void *dpart = up(part, part_n * 4), *dout = up(out, (size_t)heads * hd * 2);
    void *dpos = up(&pos, 4), *dcnt = up(NULL, (size_t)kvh * 4);
    if (dcnt) cudaMemset(dcnt, 0, (size_t)kvh * 4);
    cudaDeviceSynchronize();
    if (!dq || !dk || !dv || !dqw || !dkw || !dkc || !dvc || !dcs || !dsn || !dpart || !dout ||
        !dpos || !dcnt)
        goto done;
    for (int run = 0; run < (compare ? 4 : 3); run++) { /* PDL on, on, off, same_as splits */
        if (run > 0) { /* the same input cache: row p poisoned again, the output too (NaN) */
            cudaMemcpy(dkc, kc, cache_n * 2, cudaMemcpyHostToDevice);
            cudaMemcpy(dvc, vc, cache_n * 2, cudaMemcpyHostToDevice);
            cudaMemset(dout, 0xFF, (size_t)heads * hd * 2);
            cudaDeviceSynchronize();
        }
        if (c->cluster && run != 3)
            CHECK_OK(llm_cuda_op_attention_decode_cluster(dq, dk, dv, dqw, dkw, dcs, dsn, eps, dpos,
                                                          heads, kvh, hd, ms, nsplit, dkc, dvc,
                                                          dout, g_stream, run != 2));
        else
            CHECK_OK(llm_cuda_op_attention_decode(dq, dk, dv, dqw, dkw, dcs, dsn, eps, dpos, heads,
                                                  kvh, hd, ms, run == 3 ? c->same_as : nsplit, dkc,
                                                  dvc, dpart, dcnt, dout, g_stream, run != 2));
        cudaError_t e = cudaDeviceSynchronize();
        CHECKF(e == cudaSuccess, "kernel: %s", cudaGetErrorString(e));
        down(run == 0 ? out : out2, dout, (size_t)heads * hd * 2);
        if (run > 0)
            CHECKF(!memcmp(out, out2, (size_t)heads * hd * 2), "run %d differs from run 0%s", run,
                   run == 2   ? " (PDL off)"
                   : run == 3 ? c->cluster ? " (the fused kernel)" : " (more splits)"
                              : "");
        int cnt[64] = {0};
        down(cnt, dcnt, (size_t)kvh * 4);
        for (int h = 0; h < kvh; h++) CHECKF(cnt[h] == 0, "counter %d left at %d", h, cnt[h]);
    }
    down(gkc, dkc, cache_n * 2);
    down(gvc, dvc, cache_n * 2);

    /* the CPU composition */
    for (int h = 0; h < kvh; h++) {
        size_t at = ((size_t)h * (size_t)ms + (size_t)p) * (size_t)hd;
        llm_head_norm_rope(k + (size_t)h * hd, kw, hd, eps, cs + p * half, sn + p * half, kc + at);
        memcpy(vc + at, v + (size_t)h * hd, (size_t)hd * 2);
    }
    for (int h = 0; h < heads; h++) {
        int g = h / c->group;
        size_t base = (size_t)g * (size_t)ms * (size_t)hd;
        llm_head_norm_rope(q + (size_t)h * hd, qw, hd, eps, cs + p * half, sn + p * half, qr);
        llm_attend_row(qr, kc + base, vc + base, c->len, hd, scores, ref + (size_t)h * hd);
    }
    int worst = 0, other = 0, far = 0;
    for (int h = 0; h < kvh; h++)
        for (int64_t r = 0; r < ms; r++) {
            size_t at = ((size_t)h * (size_t)ms + (size_t)r) * (size_t)hd;
            if (r == p) {
                for (int d = 0; d < hd; d++) {
                    /* 1 bf16 ulp, or 1e-5 absolute where the rotation cancels (a result near 0
                     * carries the operands' fp32 rounding) */
                    float a = qmm_bf16_to_f32(gkc[at + d]), b = qmm_bf16_to_f32(kc[at + d]);
                    int u = ulps(gkc[at + d], kc[at + d]);
                    if (u > worst) worst = u;
                    far += !(fabsf(a - b) <= fabsf(b) / 128.0f + 1e-5f);
                }
                CHECKF(!memcmp(gvc + at, vc + at, (size_t)hd * 2), "new V row of KV head %d", h);
            } else {
                other += memcmp(gkc + at, kc + at, (size_t)hd * 2) != 0;
                other += memcmp(gvc + at, vc + at, (size_t)hd * 2) != 0;
            }
        }
    CHECKF(far == 0, "new K row: %d values beyond 1 ulp + 1e-5 of the CPU (worst %d ulps)", far,
           worst);
    CHECKF(other == 0, "%d cache rows other than the new one changed", other);
    double num = 0, den = 0;
    int finite = 1;
    for (size_t i = 0; i < (size_t)heads * hd; i++) {
        double a = qmm_bf16_to_f32(out[i]), b = qmm_bf16_to_f32(ref[i]);
        finite &= isfinite(a);
        num += (a - b) * (a - b);
        den += b * b;
    }
    double rel = finite && den > 0 ? sqrt(num / den) : INFINITY;
    printf("      output rel err %.3g, new K row within %d ulp\n", rel, worst);
    CHECKF(rel <= 5e-3, "output rel err %.3g > 5e-3", rel);
done:
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dqw), cudaFree(dkw), cudaFree(dkc);
    cudaFree(dvc), cudaFree(dcs), cudaFree(dsn), cudaFree(dpart), cudaFree(dout), cudaFree(dpos);
    cudaFree(dcnt);
    free(q), free(k), free(v), free(qw), free(kw), free(kc), free(vc), free(gkc), free(gvc);
    free(cs), free(sn), free(part), free(out), free(out2), free(ref), free(qr), free(scores);
}

static void attention_decode_matches_cpu(void)
{
    static const attn_case cases[] = {
        /* Qwen3-4B heads: short contexts (one block per KV head), the split boundary, long */
        {128, 4, 8, 1, 64, 0, 0, 0},       {128, 4, 8, 2, 64, 0, 0, 0},
        {128, 4, 8, 33, 64, 0, 0, 0},      {128, 4, 8, 64, 256, 0, 0, 0},
        {128, 4, 8, 65, 256, 0, 0, 0},     {128, 4, 8, 128, 256, 0, 0, 0},
        {128, 4, 8, 129, 256, 0, 0, 0},    {128, 4, 8, 200, 2200, 0, 0, 0},
        {128, 4, 8, 256, 2200, 0, 0, 0},   {128, 4, 8, 257, 2200, 0, 0, 0},
        {128, 4, 8, 2049, 2200, 0, 0, 0},  {128, 4, 8, 5000, 32768, 0, 0, 0},
        {128, 4, 8, 32768, 32768, 0, 0, 0},
        /* one block walking many tiles; the most splits */
        {128, 4, 8, 700, 1024, 1, 0, 0},   {128, 4, 8, 4100, 8192, 64, 0, 0},
        /* other groups and head dims (the test checkpoints use hd 64, 2 per KV head) */
        {64, 2, 2, 1, 16, 0, 0, 0},        {64, 2, 2, 700, 1000, 0, 0, 0},
        {64, 8, 1, 300, 512, 0, 0, 0},     {128, 1, 4, 129, 300, 0, 0, 0},
        {128, 8, 2, 1000, 1024, 0, 0, 0},  {128, 2, 8, 77, 128, 0, 0, 0},
        {128, 8, 2, 3000, 4096, 0, 0, 0}, /* 47 splits of eight heads: the merge walks them all */
        {64, 4, 3, 3000, 3000, 0, 0, 0},
        /* the decode graphs' buckets at and below the end of their reach, against the 33 splits
         * of a session sized for 2200 positions (Qwen3-4B heads, 132 SMs) */
        {128, 4, 8, 100, 2200, 1, 33, 0},  {128, 4, 8, 128, 2200, 1, 33, 0},
        {128, 4, 8, 255, 2200, 4, 33, 0},  {128, 4, 8, 256, 2200, 4, 33, 0},
        {128, 4, 8, 512, 2200, 8, 33, 0},  {128, 4, 8, 1024, 2200, 16, 33, 0},
        {128, 4, 8, 2048, 2200, 32, 33, 0},
        /* the cluster kernel: one split (against the fused kernel's one-head blocks), one tile a
         * split (its bits), then uneven splits of several tiles, other groups and head dims */
        {128, 4, 8, 1, 64, 0, 33, 1},      {128, 4, 8, 128, 2200, 0, 33, 1},
        {128, 4, 8, 129, 2200, 0, 33, 1},  {128, 4, 8, 1024, 2200, 0, 33, 1},
        {128, 4, 8, 1025, 2200, 0, 33, 1}, {128, 4, 8, 2048, 2200, 0, 33, 1},
        {128, 4, 8, 2049, 2200, 0, 0, 1},  {128, 4, 4, 100, 2200, 0, 33, 1},
        {128, 4, 4, 1000, 2200, 0, 33, 1}, {128, 4, 2, 2048, 2200, 0, 33, 1},
        {64, 1, 4, 900, 1000, 0, 16, 1},   {128, 8, 1, 128, 300, 0, 8, 1},
        /* the buckets' smaller clusters (2, 4, 8 CTAs): the fused kernel's bits up to their
         * reach, then several tiles a split */
        {128, 4, 8, 200, 2200, 4, 33, 1},  {128, 4, 8, 256, 2200, 4, 33, 1},
        {128, 4, 8, 500, 2200, 8, 33, 1},  {128, 4, 8, 1000, 2200, 16, 33, 1},
        {128, 4, 8, 2000, 2200, 8, 0, 1},  {64, 2, 2, 250, 1000, 4, 16, 1},
        {128, 8, 2, 100, 2200, 8, 33, 1},  {128, 8, 2, 300, 2200, 8, 33, 1},
        {128, 4, 8, 4100, 8192, 0, 0, 1},  {128, 4, 8, 32768, 32768, 0, 0, 1},
        {64, 2, 2, 700, 1000, 0, 16, 1},   {64, 8, 1, 300, 512, 0, 0, 1},
        {128, 1, 4, 129, 300, 0, 0, 1},    {128, 8, 2, 3000, 4096, 0, 0, 1},
        {64, 4, 3, 3000, 3000, 0, 0, 1},   {128, 2, 8, 77, 128, 0, 4, 1},
        /* Qwen3-14B's 5 query heads a KV head (40/8; 20/4 a rank at t = 2; 10/2 at hd 64): the
         * fused kernel at one split, the split boundary, long contexts and the buckets; the
         * cluster kernel at one split (five one-head halves: clusters of 4 at least), one tile
         * a split, several, and the buckets' clusters of 4 */
        {128, 5, 8, 1, 64, 0, 0, 0},       {128, 5, 8, 128, 256, 0, 0, 0},
        {128, 5, 8, 129, 256, 0, 0, 0},    {128, 5, 8, 2049, 2200, 0, 0, 0},
        {128, 5, 8, 5000, 8192, 0, 0, 0},  {128, 5, 4, 3000, 4096, 0, 0, 0},
        {64, 5, 2, 700, 1000, 0, 0, 0},    {128, 5, 8, 700, 1024, 1, 0, 0},
        {128, 5, 8, 100, 2200, 1, 33, 0},  {128, 5, 8, 255, 2200, 4, 33, 0},
        {128, 5, 8, 1024, 2200, 16, 33, 0},
        {128, 5, 8, 1, 64, 0, 33, 1},      {128, 5, 8, 128, 2200, 0, 33, 1},
        {128, 5, 8, 1024, 2200, 0, 33, 1}, {128, 5, 8, 2049, 2200, 0, 0, 1},
        {128, 5, 4, 1000, 2200, 0, 33, 1}, {128, 5, 8, 200, 2200, 8, 33, 1},
        {128, 5, 8, 500, 2200, 8, 33, 1},  {64, 5, 2, 250, 1000, 8, 16, 1},
        {128, 5, 2, 3000, 4096, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_attention_case(&cases[i]);
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    printf("    %d cluster-kernel cases ran\n", g_cluster_cases);
    CHECKF(major < 9 || g_cluster_cases > 0, "compute capability %d: every cluster case skipped",
           major);
}

/* ---- two-stage argmax ----------------------------------------------------------------------- */

static void run_argmax(const qmm_bf16 *logits, int64_t vocab, const char *what, int pdl)
{
    float *f = malloc((size_t)vocab * 4);
    for (int64_t i = 0; i < vocab; i++) f[i] = qmm_bf16_to_f32(logits[i]);
    int32_t want = -1;
    qmm_status cpu = qmm_llm_argmax(f, vocab, &want);
    const int nb = llm_cuda_op_argmax_blocks(vocab), m = 3;
    int32_t tokens[16], pos = 5, err = 0;
    for (int i = 0; i < 16; i++) tokens[i] = -7;
    void *dl = up(logits, (size_t)vocab * 2), *dv = up(NULL, (size_t)nb * 4), *di = up(NULL, (size_t)nb * 4);
    void *dt = up(tokens, sizeof tokens), *dp = up(&pos, 4), *de = up(&err, 4);
    if (dl && dv && di && dt && dp && de) {
        cudaMemset(dv, 0xFF, (size_t)nb * 4);
        cudaDeviceSynchronize();
        CHECK_OK(llm_cuda_op_argmax(dl, vocab, dv, di, dt, dp, m, de, g_stream, pdl));
        cudaError_t e = cudaDeviceSynchronize();
        CHECKF(e == cudaSuccess, "%s: %s", what, cudaGetErrorString(e));
        down(tokens, dt, sizeof tokens);
        down(&pos, dp, 4);
        down(&err, de, 4);
        CHECKF(pos == 5 + m, "%s: position %d, want %d", what, pos, 5 + m);
        if (cpu == QMM_OK) {
            CHECKF(err == 0 && tokens[5 + m] == want, "%s: GPU %d (err %d), CPU %d", what,
                   tokens[5 + m], err, want);
        } else {
            CHECKF(err == 2 && tokens[5 + m] == 0, "%s: all NaN gave token %d, err %d", what,
                   tokens[5 + m], err);
        }
        for (int i = 0; i < 16; i++)
            if (i != 5 + m) CHECKF(tokens[i] == -7, "%s: token %d overwritten", what, i);
    }
    cudaFree(dl), cudaFree(dv), cudaFree(di), cudaFree(dt), cudaFree(dp), cudaFree(de);
    free(f);
}

static void argmax_matches_cpu(void)
{
    const int64_t vocabs[] = {1, 7, 8, 1000, 2049, 151936};
    for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++) {
        int64_t V = vocabs[vi];
        qmm_bf16 *l = malloc((size_t)V * 2);
        char what[96];
        for (int kind = 0; kind < 5; kind++) {
            test_fill_bf16(l, (size_t)V, 3.0);
            if (kind == 1) { /* ties of the maximum, across blocks: the lowest index wins */
                for (int t = 0; t < 4; t++) l[test_rand_u64() % (uint64_t)V] = qmm_f32_to_bf16(100.0f);
            } else if (kind == 2) { /* NaN never wins */
                for (int64_t i = 0; i < V; i++)
                    if (test_rand_u64() % 4 == 0) l[i] = 0x7FC1;
                l[test_rand_u64() % (uint64_t)V] = 0x7FC1;
            } else if (kind == 3) { /* all -inf: index 0 */
                for (int64_t i = 0; i < V; i++) l[i] = 0xFF80;
            } else if (kind == 4) { /* all NaN: error 2, token 0 */
                for (int64_t i = 0; i < V; i++) l[i] = 0x7FC1;
            }
            snprintf(what, sizeof what, "vocab %lld, kind %d", (long long)V, kind);
            run_argmax(l, V, what, 1);
            run_argmax(l, V, what, 0);
        }
        free(l);
    }
    /* a logits pointer that is not 16-byte aligned is refused before any launch */
    void *d = up(NULL, 64);
    if (d) {
        CHECK_STATUS(llm_cuda_op_argmax((qmm_bf16 *)d + 1, 8, NULL, NULL, NULL, NULL, 1, NULL,
                                        g_stream, 1),
                     QMM_ERR_CUDA);
        cudaFree(d);
    }
}

/* ---- swiglu, add + rmsnorm ------------------------------------------------------------------ */

static void swiglu_matches_cpu(void)
{
    /* rows, width, in_stride, in place (out == gate) */
    static const int64_t cases[][4] = {
        {1, 9728, 19456, 0}, {1, 9728, 9728, 1}, {3, 512, 1024, 0}, {2, 100, 100, 0},
        {5, 256, 256, 1},    {4, 24, 56, 0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int64_t rows = cases[ci][0], w = cases[ci][1], st = cases[ci][2];
        const int inplace = (int)cases[ci][3];
        const size_t in_n = (size_t)(rows * st), out_n = (size_t)(rows * w), guard = 64;
        printf("    rows %lld, width %lld, stride %lld%s\n", (long long)rows, (long long)w,
               (long long)st, inplace ? ", in place" : "");
        /* separate layout (stride == width): gate rows, then up rows; otherwise up starts
         * `width` into each row (the fused [gate | up] output) */
        const size_t up_off = st == w ? in_n : (size_t)w;
        qmm_bf16 *gu = malloc(2 * in_n * 2), *o = malloc((out_n + guard) * 2);
        qmm_bf16 *ref = malloc(out_n * 2), *o2 = malloc((out_n + guard) * 2);
        test_fill_bf16(gu, 2 * in_n, 2.0);
        const qmm_bf16 *gate = gu, *upp = gu + up_off;
        for (int64_t r = 0; r < rows; r++)
            llm_swiglu(gate + r * st, upp + r * st, w, ref + r * w);
        for (int pdl = 1; pdl >= 0; pdl--) {
            poison_bf16(o, out_n + guard);
            void *dg = up(gu, 2 * in_n * 2), *dout = inplace ? NULL : up(o, (out_n + guard) * 2);
            if (!dg || (!inplace && !dout)) {
                cudaFree(dg), cudaFree(dout);
                break;
            }
            qmm_bf16 *dgate = dg, *dup = (qmm_bf16 *)dg + up_off;
            CHECK_OK(llm_cuda_op_swiglu(dgate, dup, rows, w, st, inplace ? dgate : dout, g_stream,
                                        pdl));
            CHECK(cudaDeviceSynchronize() == cudaSuccess);
            if (inplace) {
                down(o, dgate, out_n * 2);
            } else {
                down(o, dout, (out_n + guard) * 2);
                for (size_t i = 0; i < guard; i++)
                    CHECKF(o[out_n + i] == TEST_POISON_BF16, "written past the output at %zu", i);
            }
            int worst = 0;
            for (size_t i = 0; i < out_n; i++) {
                int u = ulps(o[i], ref[i]);
                if (u > worst) worst = u;
            }
            CHECKF(worst <= 1, "%d ulps from llm_swiglu", worst);
            if (pdl) memcpy(o2, o, out_n * 2);
            else CHECKF(!memcmp(o, o2, out_n * 2), "PDL on and off differ");
            cudaFree(dg), cudaFree(dout);
        }
        free(gu), free(o), free(ref), free(o2);
    }
}

static void add_rmsnorm_matches_cpu(void)
{
    /* n, rows in x, rows normed m, row0, with add */
    static const int cases[][5] = {
        {2560, 1, 1, 0, 1}, {2560, 1, 1, 0, 0}, {4096, 3, 3, 0, 1}, {5120, 2, 2, 0, 1},
        {256, 4, 4, 0, 1},  {2560, 4, 1, 3, 1}, {1000, 2, 2, 0, 1}, {1002, 2, 2, 0, 1},
        {40960, 1, 1, 0, 1},
    };
    const float eps = 1e-6f;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int n = cases[ci][0], rows = cases[ci][1], m = cases[ci][2], row0 = cases[ci][3];
        const int with_add = cases[ci][4];
        const size_t xn = (size_t)rows * n, hn = (size_t)m * n, guard = 64;
        printf("    n %d, rows %d..%d%s\n", n, row0, row0 + m - 1, with_add ? ", with add" : "");
        float *x = malloc(xn * 4), *xr = malloc(xn * 4), *xg = malloc(xn * 4);
        qmm_bf16 *a = malloc(xn * 2), *w = malloc((size_t)n * 2), *h = malloc((hn + guard) * 2);
        qmm_bf16 *ref = malloc(hn * 2), *h2 = malloc(hn * 2);
        for (size_t i = 0; i < xn; i++) x[i] = (float)(2.0 * test_rand_normal());
        test_fill_bf16(a, xn, 1.0);
        for (int i = 0; i < n; i++) w[i] = qmm_f32_to_bf16((float)(1.0 + 0.2 * test_rand_normal()));
        memcpy(xr, x, xn * 4);
        for (int r = 0; r < m; r++) {
            float *row = xr + (size_t)(row0 + r) * n;
            if (with_add) llm_add_row(row, a + (size_t)(row0 + r) * n, n);
            llm_rmsnorm_row(row, w, n, eps, ref + (size_t)r * n);
        }
        for (int pdl = 1; pdl >= 0; pdl--) {
            poison_bf16(h, hn + guard);
            void *dx = up(x, xn * 4), *da = up(a, xn * 2), *dw = up(w, (size_t)n * 2);
            void *dh = up(h, (hn + guard) * 2);
            if (dx && da && dw && dh) {
                CHECK_OK(llm_cuda_op_add_rmsnorm(dx, with_add ? da : NULL, dw, n, eps, row0, m, dh,
                                                 g_stream, pdl));
                CHECK(cudaDeviceSynchronize() == cudaSuccess);
                down(xg, dx, xn * 4);
                down(h, dh, (hn + guard) * 2);
                CHECKF(!memcmp(xg, xr, xn * 4), "the residual differs from llm_add_row");
                int worst = 0;
                for (size_t i = 0; i < hn; i++) {
                    int u = ulps(h[i], ref[i]);
                    if (u > worst) worst = u;
                }
                CHECKF(worst <= 1, "%d ulps from llm_rmsnorm_row", worst);
                for (size_t i = 0; i < guard; i++)
                    CHECKF(h[hn + i] == TEST_POISON_BF16, "written past the output at %zu", i);
                if (pdl) memcpy(h2, h, hn * 2);
                else CHECKF(!memcmp(h, h2, hn * 2), "PDL on and off differ");
            }
            cudaFree(dx), cudaFree(da), cudaFree(dw), cudaFree(dh);
        }
        free(x), free(xr), free(xg), free(a), free(w), free(h), free(ref), free(h2);
    }
}

/* The tensor-parallel fused step's add (fp32 all-reduced projection, norm left to the next
 * matvec) vs llm_add_row of the bf16-rounded sum: the residual bit for bit, xg = bf16(x·w) bit
 * for bit, Σx² per 16 elements within 1e-5 relative of the fp64 sum; nothing written past xg
 * or the sums; PDL on and off the same bits; rows not a multiple of 16 refused. */
static void add_norm_fold_matches_cpu(void)
{
    static const int cases[][2] = {{4096, 1}, {5120, 1}, {2560, 3}, {256, 2}, {32768, 1}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int n = cases[ci][0], m = cases[ci][1], tiles = n / 16;
        const size_t xn = (size_t)m * n, sn = (size_t)m * tiles, guard = 64;
        printf("    n %d, %d rows\n", n, m);
        float *x = malloc(xn * 4), *add = malloc(xn * 4), *xr = malloc(xn * 4), *xo = malloc(xn * 4);
        float *ss = malloc((sn + guard) * 4), *ss2 = malloc(sn * 4);
        qmm_bf16 *w = malloc((size_t)n * 2), *xg = malloc((xn + guard) * 2), *xg2 = malloc(xn * 2);
        for (size_t i = 0; i < xn; i++) {
            x[i] = (float)(2.0 * test_rand_normal());
            add[i] = (float)test_rand_normal();
        }
        for (int i = 0; i < n; i++) w[i] = qmm_f32_to_bf16((float)(1.0 + 0.2 * test_rand_normal()));
        memcpy(xr, x, xn * 4);
        for (size_t i = 0; i < xn; i++) xr[i] += qmm_bf16_to_f32(qmm_f32_to_bf16(add[i]));
        for (int pdl = 1; pdl >= 0; pdl--) {
            poison_bf16(xg, xn + guard);
            poison_f32(ss, sn + guard);
            void *dx = up(x, xn * 4), *da = up(add, xn * 4), *dw = up(w, (size_t)n * 2);
            void *dg = up(xg, (xn + guard) * 2), *ds = up(ss, (sn + guard) * 4);
            if (dx && da && dw && dg && ds) {
                CHECK_OK(llm_cuda_op_add_norm_fold_f32(dx, da, dw, n, m, dg, ds, g_stream, pdl));
                CHECK(cudaDeviceSynchronize() == cudaSuccess);
                down(xo, dx, xn * 4);
                down(xg, dg, (xn + guard) * 2);
                down(ss, ds, (sn + guard) * 4);
                CHECKF(!memcmp(xo, xr, xn * 4), "the residual differs from x + bf16(add)");
                size_t bad_g = 0, bad_s = 0;
                for (size_t i = 0; i < xn; i++)
                    bad_g += xg[i] != qmm_f32_to_bf16(xr[i] * qmm_bf16_to_f32(w[i % n]));
                for (size_t t = 0; t < sn; t++) {
                    double ref = 0;
                    for (int j = 0; j < 16; j++) ref += (double)xr[t * 16 + j] * xr[t * 16 + j];
                    bad_s += !(fabs(ss[t] - ref) <= 1e-5 * ref + 1e-30);
                }
                CHECKF(bad_g == 0, "%zu of %zu xg values are not bf16(x·w)", bad_g, xn);
                CHECKF(bad_s == 0, "%zu of %zu tile sums off the fp64 Σx²", bad_s, sn);
                for (size_t i = 0; i < guard; i++) {
                    CHECKF(xg[xn + i] == TEST_POISON_BF16, "written past xg at %zu", i);
                    uint32_t u;
                    memcpy(&u, &ss[sn + i], 4);
                    CHECKF(u == POISON_F32, "written past the sums at %zu", i);
                }
                if (pdl) memcpy(xg2, xg, xn * 2), memcpy(ss2, ss, sn * 4);
                else CHECKF(!memcmp(xg, xg2, xn * 2) && !memcmp(ss, ss2, sn * 4),
                            "PDL on and off differ");
                if (pdl) /* a row that is not whole tiles of 16 */
                    EXPECT_FAIL(llm_cuda_op_add_norm_fold_f32(dx, da, dw, 24, 1, dg, ds, g_stream,
                                                              0),
                                QMM_ERR_CUDA);
            }
            cudaFree(dx), cudaFree(da), cudaFree(dw), cudaFree(dg), cudaFree(ds);
        }
        free(x), free(add), free(xr), free(xo), free(ss), free(ss2), free(w), free(xg), free(xg2);
    }
}

int main(int argc, char **argv)
{
    test_require_gpu("the decode kernels are not tested here");
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess) {
        fprintf(stderr, "FAIL: cudaStreamCreateWithFlags\n");
        return 1;
    }
    TEST_TABLE(cases, attention_decode_matches_cpu, argmax_matches_cpu, swiglu_matches_cpu,
               add_rmsnorm_matches_cpu, add_norm_fold_matches_cpu);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
#endif
