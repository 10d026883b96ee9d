/*
 * Where a wgmma launch's time goes: each schedule of one projection timed as `qmm bench ops`
 * times it (graph medians over cold weight copies), and, in the experiment build
 * (-DQMM_SM90_TRACE, gemm_sm90.cu), one more launch traced per CTA: when the producer had
 * issued its first stages and its last copy, when the consumers had their first stage, finished
 * the loop and stored, and per k-block the cycles the consumers spent waiting for a stage
 * (full), dequantizing, and waiting for their wgmmas, and the producer for a free stage (empty).
 *
 *   sm90_trace PROJ M [SCHEDULE ...]   SCHEDULE: auto | auto-r (no tiles aside) | s1 (unsplit) |
 *                                      sk (stream-K) | cS (split S; cSr: one wave of clusters and
 *                                      the tiles left aside); s1 and cS take xR for R weight rows a tile (the
 *                                      options' rows: c3x128); default: auto s1 sk
 *   stdout: proj,m,schedule,path,split,ctas,rest (tiles aside x their split),us,output_hash (FNV-1a of the bf16 output); the trace on stderr (trace build, where the
 *   environment's QMM_SM90_EXP sets the kernel's experiment knobs)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "qmm.h"
#include "qmm_cuda.h"
#include <cublas_v2.h> /* C++ declarations first: bench_gpu.h includes it inside extern "C" */
extern "C" {
#include "harness.h"
#include "bench_gpu.h"
}

#ifdef QMM_SM90_TRACE
namespace qmm {
cudaError_t sm90_trace_read(unsigned long long *out, int max_ctas, int *ctas);
}
enum { ENTRY, SMID, P_FIRST, P_EMPTY, P_LAST, C_FIRST, C_FULL, C_MMA, C_DEQ, C_DONE, C_STORED, KB, P_W0, P_WALL,
       P_PDL, C_BAR1, C_SUMMED, C_ISSUE, P_SYNC, P_REGS, SLOTS };
static void print_trace(const char *proj, int m, const char *sched)
{
    std::vector<unsigned long long> t((size_t)4096 * SLOTS);
    int ctas = 0;
    CK(qmm::sm90_trace_read(t.data(), 4096, &ctas));
    /* where the CTAs ran: SMs used and the most CTAs on one SM (cluster placement, NOTES row 266) */
    std::vector<int> per_sm(1024, 0);
    int used = 0, most = 0;
    for (int b = 0; b < ctas; b++) {
        const unsigned long long id = t[(size_t)b * SLOTS + SMID];
        if (id >= per_sm.size()) continue;
        used += per_sm[id]++ == 0;
        most = std::max(most, per_sm[id]);
    }
    fprintf(stderr, "placement %s m=%d %s: %d CTAs on %d SMs, at most %d on one SM\n", proj, m, sched, ctas,
            used, most);
    unsigned long long g0 = ~0ull;
    for (int b = 0; b < ctas; b++) g0 = std::min(g0, t[(size_t)b * SLOTS + ENTRY]);
    fprintf(stderr, "trace %s m=%d %s ctas=%d (µs from the first CTA's entry, clocks at 1.98 GHz; "
                    "per k-block in ns)\n", proj, m, sched, ctas);
    struct Row {
        const char *label;
        int slot;
        bool per_kb;
    };
    const Row rows[] = {{"entry", -1, false},          {"producer past block barrier", P_SYNC, false},
                        {"producer registers freed", P_REGS, false}, {"producer first weights", P_W0, false},
                        {"producer all weights", P_WALL, false}, {"producer past pdl wait", P_PDL, false},
                        {"producer stages issued", P_FIRST, false},
                        {"producer last copy", P_LAST, false}, {"consumer first stage", C_FIRST, false},
                        {"consumer loop done", C_DONE, false}, {"cluster ready", C_BAR1, false},
                        {"cluster received", C_SUMMED, false},   {"consumer stored", C_STORED, false},
                        {"k-blocks", KB, false},            {"/kb wait full", C_FULL, true},
                        {"/kb dequantize", C_DEQ, true},    {"/kb wait wgmma", C_MMA, true},
                        {"/kb issue span", C_ISSUE, true},
                        {"/kb producer wait empty", P_EMPTY, true},
                        {"/kb loop (first..done)", -2, true}};
    for (const Row &r : rows) {
        std::vector<double> v;
        for (int b = 0; b < ctas; b++) {
            const unsigned long long *x = &t[(size_t)b * SLOTS];
            const double kb = x[KB] ? (double)x[KB] : 1.0, entry_us = (x[ENTRY] - g0) * 1e-3;
            if (r.slot == -1) v.push_back(entry_us);
            else if (r.slot == KB) v.push_back((double)x[KB]);
            else if (r.slot == -2) v.push_back((double)(x[C_DONE] - x[C_FIRST]) / 1.98 / kb);
            else if (r.per_kb) v.push_back((double)x[r.slot] / 1.98 / kb);
            else v.push_back(entry_us + x[r.slot] / 1980.0);
        }
        std::sort(v.begin(), v.end());
        fprintf(stderr, "  %-24s min %8.2f  p10 %8.2f  med %8.2f  p90 %8.2f  max %8.2f\n", r.label, v[0],
                v[v.size() / 10], v[v.size() / 2], v[v.size() * 9 / 10], v.back());
    }
}
#endif

struct Proj {
    const char *name;
    int n, k;
};
static const Proj projs[] = {{"q", 4096, 2560}, {"k", 1024, 2560}, {"o", 2560, 4096},
                             {"gate", 9728, 2560}, {"down", 2560, 9728}, {"qkv", 6144, 2560}};

struct Call {
    qmm_cuda_ctx *ctx;
    std::vector<qmm_cuda_weight *> *w;
    const qmm_bf16 *a;
    int m;
    qmm_bf16 *c;
    void *ws;
    size_t ws_bytes;
    qmm_cuda_options opt;
};
static int enqueue(void *user, int call, char *why, size_t why_len)
{
    Call &k = *static_cast<Call *>(user);
    if (qmm_cuda_matmul(k.ctx, k.a, k.m, (*k.w)[call % k.w->size()], k.c, k.ws, k.ws_bytes, &k.opt, NULL)) {
        snprintf(why, why_len, "%s", qmm_last_error());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: sm90_trace PROJ M [auto|auto-r|s1|sk|cS|cSr ...]\n");
        return 2;
    }
    const Proj *pj = nullptr;
    for (const Proj &x : projs)
        if (!strcmp(x.name, argv[1])) pj = &x;
    const int m = atoi(argv[2]);
    if (!pj || m < 1) {
        fprintf(stderr, "sm90_trace: unknown projection %s or bad M %s\n", argv[1], argv[2]);
        return 2;
    }
    /* the schedules named after the shape, else all three (built in one go: GCC 12 warned
     * -Wfree-nonheap-object, a false positive, on the assignment of an initializer list) */
    static const char *const all_scheds[] = {"auto", "s1", "sk"};
    const std::vector<const char *> scheds =
        argc > 3 ? std::vector<const char *>(argv + 3, argv + argc)
                 : std::vector<const char *>(all_scheds, all_scheds + 3);

    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    qmm_cuda_ctx *ctx;
    if (qmm_cuda_create(0, st, &ctx)) {
        fprintf(stderr, "qmm_cuda_create: %s\n", qmm_last_error());
        return 1;
    }
    qmm_w4 w;
    qmm_w4_alloc(pj->n, pj->k, &w);
    test_random_w4(&w, 0.002, 0.02);
    const double bytes = (double)pj->n * pj->k * 0.53125;
    const int copies = std::min(256, std::max(4, (int)ceil(400e6 / bytes)));
    std::vector<qmm_cuda_weight *> cw(copies);
    for (auto &x : cw)
        if (qmm_cuda_weight_upload(ctx, &w, &x)) {
            fprintf(stderr, "upload: %s\n", qmm_last_error());
            return 1;
        }
    std::vector<qmm_bf16> ha((size_t)m * pj->k);
    test_fill_bf16(ha.data(), ha.size(), 1.0);
    qmm_bf16 *a, *c;
    CK(cudaMalloc(&a, ha.size() * 2));
    CK(cudaMalloc(&c, (size_t)m * pj->n * 2));
    CK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));

    printf("proj,m,schedule,path,split,ctas,rest,us,output_hash\n");
    for (const char *sc : scheds) {
        qmm_cuda_options o = qmm_cuda_options_default();
        if (const char *x = strchr(sc, 'x')) o.rows = atoi(x + 1);
        if (!strncmp(sc, "s1", 2) && (!sc[2] || sc[2] == 'x')) o.path = QMM_PATH_WGMMA, o.split = 1;
        else if (!strcmp(sc, "sk")) o.path = QMM_PATH_STREAMK;
        else if (sc[0] == 'c') o.path = QMM_PATH_WGMMA, o.split = atoi(sc + 1), o.rest = strchr(sc, 'r') ? 1 : 0;
        else if (!strcmp(sc, "auto-r")) o.rest = -1; /* the plan without tiles aside */
        else if (strcmp(sc, "auto")) {
            fprintf(stderr, "sm90_trace: unknown schedule %s\n", sc);
            return 2;
        }
        qmm_plan plan;
        size_t ws_bytes = 0;
        if (qmm_cuda_plan(ctx, m, pj->n, pj->k, &o, &plan) ||
            qmm_cuda_workspace_size(ctx, m, pj->n, pj->k, &o, &ws_bytes)) {
            printf("%s,%d,%s,refused,,,,,\n", pj->name, m, sc);
            fprintf(stderr, "sm90_trace: %s: %s\n", sc, qmm_last_error());
            continue;
        }
        void *ws = nullptr;
        if (ws_bytes) CK(cudaMalloc(&ws, ws_bytes));
        Call call = {ctx, &cw, a, m, c, ws, ws_bytes, o};
        const bench_timing_req q = {copies, copies, 7, 50.0};
        bench_time t;
        char why[256];
        /* the first schedule timed twice, the first time discarded: timed once it read 1-4 %
         * above the same schedule measured later in the sweep (NOTES.md, session 40) */
        for (int pass = sc == scheds[0] ? 0 : 1; pass < 2; pass++)
            if (bench_time_calls(st, enqueue, &call, &q, &t, why, sizeof why)) {
                fprintf(stderr, "sm90_trace: timing failed: %s\n", why);
                return 1;
            }
        /* FNV-1a of the output of the last call: a knob (QMM_SM90_EXP) must not change a schedule's bits */
        CK(cudaStreamSynchronize(st));
        std::vector<uint16_t> out((size_t)m * pj->n);
        CK(cudaMemcpy(out.data(), c, out.size() * 2, cudaMemcpyDeviceToHost));
        unsigned long long h = 1469598103934665603ull;
        for (uint16_t x : out) h = (h ^ x) * 1099511628211ull;
        printf("%s,%d,%s,%d,%d,%d,%dx%d,%.2f,%016llx\n", pj->name, m, sc, (int)plan.path, plan.split, (int)plan.blocks,
               plan.rest_tiles, plan.rest_split, t.graph_med, h);
        fflush(stdout);
#ifdef QMM_SM90_TRACE
        CK(cudaStreamSynchronize(st));
        char w2[256];
        if (enqueue(&call, copies / 2, w2, sizeof w2)) return 1; /* a copy the timing left cold */
        CK(cudaStreamSynchronize(st));
        print_trace(pj->name, m, sc);
#endif
        if (ws) cudaFree(ws);
    }
    cudaFree(a), cudaFree(c);
    for (auto x : cw) qmm_cuda_weight_free(x);
    qmm_w4_free(&w);
    qmm_cuda_destroy(ctx);
    return 0;
}
