/*
 * The decode matvec's CTA shapes on the Qwen3-4B projections: every (tiles a CTA R, cluster C)
 * the kernel accepts, beside the launcher's own choice (auto) and the read floor, as graph
 * medians over cold weight copies (the `qmm bench ops` protocol), with each shape's output
 * compared to auto's (they differ by summation order only).
 *
 *   mv_shapes [M ...]        CSV on stdout: proj,m,shape,W,R,C,ctas,us,read_us,max_rel_diff
 *                            (shape: auto = the launcher's choice, forced = one of the others)
 *   environment: MV_PROJ=name (one projection), MV_AUTO_ONLY=1 (the launcher's shape only),
 *                MV_WARPS4=1 (the forced shapes in CTAs of 4 warps, m <= 8), MV_HASH=1 (a hash
 *                of each output's bits on stderr, to compare two builds bit for bit; no timing),
 *                MV_PRE_WAIT=n (groups a warp requests before the dependency wait; the kernel's
 *                default 2), MV_MODELS=1 (the other Qwen3 models' projections instead of 4B's, to
 *                check a shape rule beyond the shapes it was fitted on)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <algorithm>

#include "qmm.h"
#include "qmm_cuda.h"
#include "cuda/kernels.h"
#include <cublas_v2.h> /* C++ declarations first: bench_gpu.h includes it inside extern "C" */
extern "C" {
#include "harness.h"
#include "bench_read.h"
#include "bench_gpu.h"
}

/* CK: tools/common/common.h (bench_die on a CUDA error) */

#ifdef QMM_MV_TRACE /* an experiment build (matvec.cu): per-CTA phase clocks of one cold launch */
namespace qmm {
cudaError_t matvec_trace_read(unsigned long long *out, int max_ctas, int *ctas);
}
static void print_trace(const char *name, int m)
{
    std::vector<unsigned long long> t((size_t)8192 * 8);
    int ctas = 0;
    CK(qmm::matvec_trace_read(t.data(), 8192, &ctas));
    unsigned long long g0 = ~0ull;
    for (int b = 0; b < ctas; b++) g0 = std::min(g0, t[b * 8]);
    const char *label[8] = {"entry", "", "loads issued", "staged", "group 0", "loop done", "reduced", "end"};
    fprintf(stderr, "trace %s m=%d ctas=%d (us from the first CTA's entry; clocks at 1.98 GHz)\n", name, m, ctas);
    for (int i : {0, 2, 3, 4, 5, 6, 7}) {
        std::vector<double> v;
        for (int b = 0; b < ctas; b++)
            v.push_back((t[b * 8] - g0) * 1e-3 + (i ? t[b * 8 + i] / 1980.0 : 0.0));
        std::sort(v.begin(), v.end());
        fprintf(stderr, "  %-13s min %6.2f  p10 %6.2f  med %6.2f  p90 %6.2f  max %6.2f\n", label[i], v[0],
                v[v.size() / 10], v[v.size() / 2], v[v.size() * 9 / 10], v.back());
    }
}
#endif

struct Proj {
    const char *name;
    int n, k, epi;
};
static const Proj projs[] = {
    {"qkv", 6144, 2560, qmm::MV_EPI_STORE},    {"q", 4096, 2560, qmm::MV_EPI_STORE},
    {"k", 1024, 2560, qmm::MV_EPI_STORE},      {"o", 2560, 4096, qmm::MV_EPI_STORE},
    {"gate", 9728, 2560, qmm::MV_EPI_STORE},   {"gate_up", 19456, 2560, qmm::MV_EPI_SWIGLU},
    {"down", 2560, 9728, qmm::MV_EPI_STORE},   {"head", 151936, 2560, qmm::MV_EPI_STORE},
};
/* Qwen3-0.6B, 1.7B, 8B, 14B and 32B (hidden, q heads × 128, 8 KV heads × 128, intermediate):
 * q, k, o, gate and down where they differ from a shape listed before, then the stacked ones */
static const Proj other_projs[] = {
    {"0.6b_q", 2048, 1024, qmm::MV_EPI_STORE},  {"0.6b_k", 1024, 1024, qmm::MV_EPI_STORE},
    {"0.6b_o", 1024, 2048, qmm::MV_EPI_STORE},  {"0.6b_gate", 3072, 1024, qmm::MV_EPI_STORE},
    {"0.6b_down", 1024, 3072, qmm::MV_EPI_STORE}, {"1.7b_q", 2048, 2048, qmm::MV_EPI_STORE},
    {"1.7b_k", 1024, 2048, qmm::MV_EPI_STORE},  {"1.7b_gate", 6144, 2048, qmm::MV_EPI_STORE},
    {"1.7b_down", 2048, 6144, qmm::MV_EPI_STORE}, {"8b_q", 4096, 4096, qmm::MV_EPI_STORE},
    {"8b_k", 1024, 4096, qmm::MV_EPI_STORE},    {"8b_gate", 12288, 4096, qmm::MV_EPI_STORE},
    {"8b_down", 4096, 12288, qmm::MV_EPI_STORE}, {"14b_q", 5120, 5120, qmm::MV_EPI_STORE},
    {"14b_k", 1024, 5120, qmm::MV_EPI_STORE},   {"14b_gate", 17408, 5120, qmm::MV_EPI_STORE},
    {"14b_down", 5120, 17408, qmm::MV_EPI_STORE}, {"32b_q", 8192, 5120, qmm::MV_EPI_STORE},
    {"32b_o", 5120, 8192, qmm::MV_EPI_STORE},   {"32b_gate", 25600, 5120, qmm::MV_EPI_STORE},
    {"32b_down", 5120, 25600, qmm::MV_EPI_STORE},
    /* the decode step's stacked q|k|v and gate|up (SwiGLU) of each */
    {"0.6b_qkv", 4096, 1024, qmm::MV_EPI_STORE}, {"0.6b_gate_up", 6144, 1024, qmm::MV_EPI_SWIGLU},
    {"1.7b_qkv", 4096, 2048, qmm::MV_EPI_STORE}, {"1.7b_gate_up", 12288, 2048, qmm::MV_EPI_SWIGLU},
    {"8b_qkv", 6144, 4096, qmm::MV_EPI_STORE},   {"8b_gate_up", 24576, 4096, qmm::MV_EPI_SWIGLU},
    {"14b_qkv", 7168, 5120, qmm::MV_EPI_STORE},  {"14b_gate_up", 34816, 5120, qmm::MV_EPI_SWIGLU},
    {"32b_qkv", 10240, 5120, qmm::MV_EPI_STORE}, {"32b_gate_up", 51200, 5120, qmm::MV_EPI_SWIGLU},
};

/* µs a launch of fn(copy) as `qmm bench ops` times it (tools/bench_timing.c): graph replays of
 * calls rotating over the cold copies, median of 7. */
template <typename F> static int enqueue(void *user, int call, char *why, size_t why_len)
{
    F &fn = *static_cast<F *>(user);
    cudaError_t e = fn(call);
    if (e != cudaSuccess) snprintf(why, why_len, "%s", cudaGetErrorString(e));
    return e != cudaSuccess;
}
template <typename F> static double time_graph(cudaStream_t st, int copies, F fn)
{
    const bench_timing_req q = {copies, copies, 7, 50.0};
    bench_time t;
    char why[256];
    if (bench_time_calls(st, enqueue<F>, &fn, &q, &t, why, sizeof why)) {
        fprintf(stderr, "mv_shapes: timing failed: %s\n", why);
        exit(1);
    }
    return t.graph_med;
}

int main(int argc, char **argv)
{
    std::vector<int> ms;
    for (int i = 1; i < argc; i++) ms.push_back(atoi(argv[i]));
    if (ms.empty()) ms = {1};
    qmm_cuda_ctx *ctx;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    if (qmm_cuda_create(0, st, &ctx)) {
        fprintf(stderr, "qmm_cuda_create: %s\n", qmm_last_error());
        return 1;
    }
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    uint32_t *sink;
    CK(cudaMalloc(&sink, 64));
    printf("proj,m,shape,W,R,C,ctas,us,read_us,max_rel_diff\n");
    const char *only = getenv("MV_PROJ");       /* one projection */
    const int auto_only = getenv("MV_AUTO_ONLY") != NULL; /* the launcher's shape alone */
    const int warps4 = getenv("MV_WARPS4") != NULL;       /* forced shapes in CTAs of 4 warps */
    const int pre_wait = getenv("MV_PRE_WAIT") ? atoi(getenv("MV_PRE_WAIT")) : 0; /* 0: the default */
    const bool others = getenv("MV_MODELS") != NULL;
    const Proj *first = others ? std::begin(other_projs) : std::begin(projs);
    const Proj *last = others ? std::end(other_projs) : std::end(projs);
    for (const Proj *it = first; it != last; ++it) {
        const Proj &pj = *it;
        if (only && strcmp(only, pj.name)) continue;
        qmm_w4 w;
        qmm_w4_alloc(pj.n, pj.k, &w);
        test_random_w4(&w, 0.002, 0.02);
        const double bytes = (double)pj.n * pj.k * 0.53125;
        const int copies = std::min(256, std::max(4, (int)ceil(400e6 / bytes)));
        std::vector<qmm_cuda_weight *> cw(copies);
        for (int i = 0; i < copies; i++)
            if (qmm_cuda_weight_upload(ctx, &w, &cw[i])) {
                fprintf(stderr, "upload: %s\n", qmm_last_error());
                return 1;
            }
        const double read_us = time_graph(st, copies, [&](int i) {
            return bench_read_weight(cw[i], sms, sink, st) ? cudaErrorUnknown : cudaSuccess;
        });
        for (int m : ms) {
            std::vector<qmm_bf16> ha((size_t)m * pj.k);
            test_fill_bf16(ha.data(), ha.size(), 1.0);
            __nv_bfloat16 *a, *c;
            const int ncol = pj.epi == qmm::MV_EPI_SWIGLU ? pj.n / 2 : pj.n;
            CK(cudaMalloc(&a, ha.size() * 2));
            CK(cudaMalloc(&c, (size_t)m * ncol * 2));
            CK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
            std::vector<uint16_t> ref((size_t)m * ncol), got(ref.size());
            for (int v = -1; v < (auto_only ? 0 : 16); v++) {
                const int shape = v;
                const int R = shape < 0 ? 0 : 1 << (shape / 4), C = shape < 0 ? 0 : 1 << (shape % 4);
                auto launch = [&](int i) {
                    qmm::MatvecArgs p = qmm::matvec_args(qmm::weight_dev(cw[i]));
                    p.a = a, p.lda = pj.k, p.m = m, p.c = c, p.ldc = ncol, p.epi = pj.epi;
                    p.tiles_per_cta = R, p.cluster = C, p.pre_wait = pre_wait;
                    if (R && warps4) p.warps = 4;
                    return qmm::launch_matvec_ex(p, qmm::matvec_scratch(ctx), true, st);
                };
                CK(cudaMemset(c, 0xFF, (size_t)m * ncol * 2));
                if (launch(0) != cudaSuccess) {
                    cudaGetLastError();
                    continue; /* a shape the kernel does not take here */
                }
                CK(cudaStreamSynchronize(st));
                CK(cudaMemcpy(got.data(), c, got.size() * 2, cudaMemcpyDeviceToHost));
                double diff = 0, mag = 0;
                if (shape < 0) ref = got;
                for (size_t i = 0; i < got.size(); i++) {
                    float x, y;
                    uint32_t ux = (uint32_t)got[i] << 16, uy = (uint32_t)ref[i] << 16;
                    memcpy(&x, &ux, 4), memcpy(&y, &uy, 4);
                    diff = std::max(diff, (double)fabsf(x - y));
                    mag = std::max(mag, (double)fabsf(y));
                    if (!isfinite(x)) diff = INFINITY;
                }
                if (getenv("MV_HASH")) { /* the output's bits, to compare two builds */
                    uint32_t h = 2166136261u;
                    for (uint16_t x : got) h = (h ^ x) * 16777619u;
                    fprintf(stderr, "hash %s m=%d shape=%d %08x\n", pj.name, m, shape, h);
                }
                const double us = getenv("MV_HASH") ? 0.0 : time_graph(st, copies, launch);
#ifdef QMM_MV_TRACE
                if (shape < 0) { /* one more launch on a copy the timing left cold */
                    CK(cudaStreamSynchronize(st));
                    CK(launch(copies / 2));
                    CK(cudaStreamSynchronize(st));
                    print_trace(pj.name, m);
                }
#endif
                const int tiles = pj.n / 16 + (pj.n % 128 ? 8 - pj.n / 16 % 8 : 0);
                int pw = R && warps4 ? 4 : 8, pr = R, pc = C;
                if (shape < 0) {
                    qmm::MatvecArgs p = qmm::matvec_args(qmm::weight_dev(cw[0]));
                    p.a = a, p.lda = pj.k, p.m = m, p.c = c, p.ldc = ncol, p.epi = pj.epi;
                    qmm::matvec_choose_shape(p, qmm::matvec_scratch(ctx), &pw, &pr, &pc);
                }
                printf("%s,%d,%s,%d,%d,%d,%d,%.2f,%.2f,%.2e\n", pj.name, m, shape < 0 ? "auto" : "forced",
                       pw, pr, pc, tiles / pr * pc, us, read_us, diff / (mag > 0 ? mag : 1));
                fflush(stdout);
            }
            cudaFree(a), cudaFree(c);
        }
        for (auto x : cw) qmm_cuda_weight_free(x);
        qmm_w4_free(&w);
    }
    return 0;
}
