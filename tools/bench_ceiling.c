/* `qmm bench ops`: the ceilings the % columns divide by, measured in the same run: a
 * device-to-device copy kernel (the memory roof a streaming kernel can reach; cudaMemcpy uses
 * the slower copy engines) and cuBLAS bf16 at 8192³ (the tensor-core roof). */
#ifdef QMM_HAVE_CUDA

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gpu.h"

/* The copy kernel, in PTX because the tools are plain C: the runtime JIT-compiles it for the GPU
 * at load time (cudaLibraryLoadData). Grid-stride over 16-byte vectors, four independent loads in
 * flight per thread before their stores (enough bytes in flight to cover HBM latency), then a tail
 * loop one vector at a time. Params: dst, src (16-byte aligned), n = count of 16-byte vectors. */
static const char copy_ptx[] =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry qmm_bench_copy16(.param .u64 p_dst, .param .u64 p_src, .param .u64 p_n)\n"
    "{\n"
    "    .reg .pred %p<3>;\n"
    "    .reg .b32 %r<5>;\n"
    "    .reg .b64 %rd<20>;\n"
    "    .reg .b32 %x<16>;\n"
    "    ld.param.u64 %rd1, [p_dst];\n"
    "    ld.param.u64 %rd2, [p_src];\n"
    "    ld.param.u64 %rd3, [p_n];\n"
    "    cvta.to.global.u64 %rd1, %rd1;\n"
    "    cvta.to.global.u64 %rd2, %rd2;\n"
    "    mov.u32 %r1, %ctaid.x;\n"
    "    mov.u32 %r2, %ntid.x;\n"
    "    mov.u32 %r3, %tid.x;\n"
    "    mov.u32 %r4, %nctaid.x;\n"
    "    cvt.u64.u32 %rd4, %r3;\n"
    "    mad.wide.u32 %rd4, %r1, %r2, %rd4;\n"      /* i = ctaid * ntid + tid */
    "    mul.wide.u32 %rd5, %r4, %r2;\n"            /* stride = nctaid * ntid (vectors) */
    "    shl.b64 %rd6, %rd5, 4;\n"                  /* stride in bytes */
    "    mul.lo.u64 %rd7, %rd5, 3;\n"
    "    shl.b64 %rd8, %rd5, 2;\n"
    "MAIN:\n"                                       /* while (i + 3*stride < n): 4 vectors */
    "    add.u64 %rd9, %rd4, %rd7;\n"
    "    setp.ge.u64 %p1, %rd9, %rd3;\n"
    "    @%p1 bra TAIL;\n"
    "    shl.b64 %rd10, %rd4, 4;\n"
    "    add.u64 %rd11, %rd2, %rd10;\n"
    "    add.u64 %rd12, %rd1, %rd10;\n"
    "    add.u64 %rd13, %rd11, %rd6;\n"
    "    add.u64 %rd14, %rd13, %rd6;\n"
    "    add.u64 %rd15, %rd14, %rd6;\n"
    "    ld.global.v4.u32 {%x0, %x1, %x2, %x3}, [%rd11];\n"
    "    ld.global.v4.u32 {%x4, %x5, %x6, %x7}, [%rd13];\n"
    "    ld.global.v4.u32 {%x8, %x9, %x10, %x11}, [%rd14];\n"
    "    ld.global.v4.u32 {%x12, %x13, %x14, %x15}, [%rd15];\n"
    "    add.u64 %rd16, %rd12, %rd6;\n"
    "    add.u64 %rd17, %rd16, %rd6;\n"
    "    add.u64 %rd18, %rd17, %rd6;\n"
    "    st.global.v4.u32 [%rd12], {%x0, %x1, %x2, %x3};\n"
    "    st.global.v4.u32 [%rd16], {%x4, %x5, %x6, %x7};\n"
    "    st.global.v4.u32 [%rd17], {%x8, %x9, %x10, %x11};\n"
    "    st.global.v4.u32 [%rd18], {%x12, %x13, %x14, %x15};\n"
    "    add.u64 %rd4, %rd4, %rd8;\n"
    "    bra.uni MAIN;\n"
    "TAIL:\n"                                       /* while (i < n): 1 vector */
    "    setp.ge.u64 %p2, %rd4, %rd3;\n"
    "    @%p2 bra DONE;\n"
    "    shl.b64 %rd10, %rd4, 4;\n"
    "    add.u64 %rd11, %rd2, %rd10;\n"
    "    add.u64 %rd12, %rd1, %rd10;\n"
    "    ld.global.v4.u32 {%x0, %x1, %x2, %x3}, [%rd11];\n"
    "    st.global.v4.u32 [%rd12], {%x0, %x1, %x2, %x3};\n"
    "    add.u64 %rd4, %rd4, %rd5;\n"
    "    bra.uni TAIL;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n";

#define COPY_BYTES ((size_t)1 << 30)
#define COPY_THREADS 256
#define WINDOW_BYTES ((size_t)1 << 20)
/* check_copy's three windows fit without overlapping from here up (its middle one starts
 * 193 KiB past the half, so they need bytes / 2 + 193 KiB + 1 MiB <= bytes - 1 MiB: 4.4 MiB) */
#define COPY_MIN_BYTES (8 * WINDOW_BYTES)
#define GEMM_N 8192

static void default_ceiling(bench_ceiling *x, double value)
{
    x->value = x->min = x->max = value;
    x->measured = 0;
    snprintf(x->note, sizeof x->note, "DESIGN §8 default, not measured");
}

void bench_default_ceilings(bench_ceilings *c)
{
    memset(c, 0, sizeof *c);
    default_ceiling(&c->copy, BENCH_DEFAULT_COPY_GBPS);
    default_ceiling(&c->cublas, BENCH_DEFAULT_CUBLAS_TFLOPS);
}

/* Time fn (graphs of calls, median of reps) into x: rate = work / per-call time in µs, at the
 * median, the slowest and the fastest replay. 0, or -1 (why says). */
static int time_ceiling(cudaStream_t s, bench_enqueue_fn fn, void *arg, int reps, double work,
                        bench_ceiling *x, bench_time *t, char *why, size_t why_len)
{
    bench_timing_req q = {10, 1, reps, 0.0};
    if (bench_time_calls(s, fn, arg, &q, t, why, why_len)) return -1;
    x->value = work / t->graph_med;
    x->min = work / t->graph_max;
    x->max = work / t->graph_min;
    x->measured = 1;
    return 0;
}

/* The DESIGN default stays; say why on stderr and in the note. */
static void ceiling_failed(bench_ceiling *x, const char *what, double value, const char *unit,
                           const char *why)
{
    fprintf(stderr, "qmm bench ops: WARNING: %s ceiling not measured (%s); using the DESIGN "
                    "default %.0f %s\n", what, why, value, unit);
    snprintf(x->note, sizeof x->note, "DESIGN §8 default: measurement failed (%.100s)", why);
}

static dim3 d3(unsigned x)
{
    dim3 d = {x, 1, 1};
    return d;
}

typedef struct copy_call {
    cudaKernel_t kernel;
    cudaStream_t s;
    void *dst;
    const void *src;
    size_t bytes; /* of each buffer: a multiple of 16, at least COPY_MIN_BYTES */
    unsigned long long n16;
    int blocks;
} copy_call;

static int enqueue_copy(void *user, int call, char *why, size_t why_len)
{
    copy_call *x = user;
    (void)call;
    void *args[] = {&x->dst, &x->src, &x->n16};
    /* A cudaKernel_t from cudaLibraryGetKernel is launched like a function symbol. */
    cudaError_t e = cudaLaunchKernel((const void *)x->kernel, d3((unsigned)x->blocks),
                                     d3(COPY_THREADS), args, 0, x->s);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "copy kernel launch: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* A recognisable pattern for window w of the copy check. */
static uint32_t pattern(size_t i, int w) { return (uint32_t)(i * 2654435761u) ^ ((uint32_t)w << 28) ^ 0x5bd1e995u; }

/* Run the copy once and compare three 1 MiB windows (start, an odd middle, end) of dst with src:
 * an indexing slip in either loop shows up there. 0 or -1 (note says). */
static int check_copy(copy_call *x, char *note, size_t note_len)
{
    const size_t offs[3] = {0, x->bytes / 2 + 12345 * 16, x->bytes - WINDOW_BYTES};
    size_t words = WINDOW_BYTES / 4;
    uint32_t *h = malloc(WINDOW_BYTES);
    if (!h) {
        snprintf(note, note_len, "out of host memory");
        return -1;
    }
    for (int w = 0; w < 3; w++) {
        for (size_t i = 0; i < words; i++) h[i] = pattern(i, w);
        CK(cudaMemcpyAsync((char *)x->src + offs[w], h, WINDOW_BYTES, cudaMemcpyHostToDevice, x->s));
        CK(cudaStreamSynchronize(x->s)); /* h is rewritten for the next window */
    }
    CK(cudaMemsetAsync(x->dst, 0, x->bytes, x->s));
    char why[160] = "";
    int rc = enqueue_copy(x, 0, why, sizeof why);
    if (rc) {
        snprintf(note, note_len, "%s", why);
        (void)cudaGetLastError();
        free(h);
        return -1;
    }
    CK(cudaStreamSynchronize(x->s));
    for (int w = 0; w < 3 && !rc; w++) {
        CK(cudaMemcpyAsync(h, (char *)x->dst + offs[w], WINDOW_BYTES, cudaMemcpyDeviceToHost, x->s));
        CK(cudaStreamSynchronize(x->s));
        for (size_t i = 0; i < words; i++)
            if (h[i] != pattern(i, w)) {
                snprintf(note, note_len, "copy kernel wrote wrong data (window %d word %zu)", w, i);
                rc = -1;
                break;
            }
    }
    free(h);
    return rc;
}

/* Device memory for the copy, or 0 after clearing the error: out of memory is not sticky, and a
 * ceiling that cannot be measured is reported, not fatal (bench e2e measures next to a model). */
static void *copy_buffer(size_t bytes, char *note, size_t note_len)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) return p;
    (void)cudaGetLastError();
    snprintf(note, note_len, "cudaMalloc of %zu MiB: %s", bytes >> 20, cudaGetErrorString(e));
    return NULL;
}

/* Time the loaded copy kernel into c (reps replays of a graph of 10); 0 or -1 (note says why). */
static int time_copy(copy_call *x, int reps, bench_ceiling *c, char *note, size_t note_len)
{
    void *src = copy_buffer(x->bytes, note, note_len);
    void *dst = src ? copy_buffer(x->bytes, note, note_len) : NULL;
    x->src = src;
    x->dst = dst;
    int rc = -1;
    if (dst) {
        bench_set_activity("copy ceiling: checking the copy kernel (%d blocks x %d threads)",
                           x->blocks, COPY_THREADS);
        rc = check_copy(x, note, note_len);
    }
    if (rc == 0) {
        bench_set_activity("copy ceiling: timing %zu MiB copies", x->bytes >> 20);
        bench_time t;
        const double gb_moved = 2e-9 * (double)x->bytes; /* read + write */
        rc = time_ceiling(x->s, enqueue_copy, x, reps, gb_moved * 1e6, c, &t, note, note_len);
        if (rc == 0)
            snprintf(c->note, sizeof c->note,
                     "measured: kernel copy of %zu MiB, read+write bytes / time, graph of %d, "
                     "median of %d (%d blocks x %d threads)",
                     x->bytes >> 20, t.calls, t.reps, x->blocks, COPY_THREADS);
    }
    CK(cudaStreamSynchronize(x->s));
    if (src) CK(cudaFree(src));
    if (dst) CK(cudaFree(dst));
    return rc;
}

/* Load the PTX copy kernel and time it over bytes into c; 0, or -1 with c untouched but for a
 * measured = 0 (note says why). */
static int copy_ceiling(cudaStream_t s, int sms, size_t bytes, int reps, bench_ceiling *c,
                        char *note, size_t note_len)
{
    cudaLibrary_t lib = NULL;
    copy_call x = {0};
    x.s = s;
    x.bytes = bytes;
    x.n16 = bytes / 16;
    int rc = -1;
    c->measured = 0;
    bench_set_activity("copy ceiling: loading the PTX copy kernel");
    cudaError_t e = cudaLibraryLoadData(&lib, copy_ptx, NULL, NULL, 0, NULL, NULL, 0);
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&x.kernel, lib, "qmm_bench_copy16");
    if (e != cudaSuccess) {
        snprintf(note, note_len, "PTX copy kernel unavailable: %s (%s)", cudaGetErrorString(e),
                 cudaGetErrorName(e));
        (void)cudaGetLastError();
    } else {
        /* One full wave of resident blocks; the grid-stride loop does the rest. */
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)x.kernel,
                                                          COPY_THREADS, 0) != cudaSuccess ||
            per_sm < 1) {
            (void)cudaGetLastError();
            per_sm = 2048 / COPY_THREADS;
        }
        x.blocks = sms * per_sm;
        rc = time_copy(&x, reps, c, note, note_len);
    }
    if (lib) CK(cudaLibraryUnload(lib));
    return rc;
}

static void measure_copy(cudaStream_t s, int sms, const bench_opts *o, bench_ceilings *c)
{
    char note[160] = "";
    if (copy_ceiling(s, sms, COPY_BYTES, o->reps, &c->copy, note, sizeof note))
        ceiling_failed(&c->copy, "copy", BENCH_DEFAULT_COPY_GBPS, "GB/s", note);
}

int bench_measure_copy_ceiling(int device, size_t bytes, int reps, bench_ceiling *c)
{
    memset(c, 0, sizeof *c);
    if (bytes < COPY_MIN_BYTES || bytes % 16 || reps < 1) {
        snprintf(c->note, sizeof c->note, "bad request: %zu bytes (a multiple of 16, at least "
                 "%zu), %d replays (at least 1)", bytes, (size_t)COPY_MIN_BYTES, reps);
        return -1;
    }
    int sms = 0;
    char note[160] = "";
    cudaStream_t s = NULL;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    /* a stream of its own: graph capture refuses the legacy default stream */
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int rc = -1;
    if (e != cudaSuccess) {
        snprintf(note, sizeof note, "CUDA device %d: %s (%s)", device, cudaGetErrorString(e),
                 cudaGetErrorName(e));
        (void)cudaGetLastError();
    } else {
        rc = copy_ceiling(s, sms, bytes, reps, c, note, sizeof note);
        CK(cudaStreamDestroy(s));
    }
    if (rc) snprintf(c->note, sizeof c->note, "%s", note);
    return rc;
}

typedef struct gemm_call {
    bench_cublas *cb;
    const void *a, *b;
    void *c;
} gemm_call;

static int enqueue_gemm(void *user, int call, char *why, size_t why_len)
{
    gemm_call *x = user;
    (void)call;
    cublasStatus_t st = bench_cublas_matmul(x->cb, x->a, GEMM_N, x->b, GEMM_N, GEMM_N, x->c);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, why_len, "cublasGemmEx 8192^3: %s", cublasGetStatusString(st));
        return -1;
    }
    return 0;
}

/* Spot-check 16 elements of C = A·Bᵀ against fp64 dot products (bf16 output rounding and fp32
 * accumulation allowed for, relative to the sum of |terms|). */
static int check_gemm(const qmm_bf16 *a, const qmm_bf16 *b, const void *c_dev, cudaStream_t s)
{
    for (int t = 0; t < 16; t++) {
        size_t i = (size_t)(t * 523 + 7) % GEMM_N, j = (size_t)(t * 1237 + 3) % GEMM_N;
        double dot = 0, mag = 0;
        for (size_t k = 0; k < GEMM_N; k++) {
            double p = (double)qmm_bf16_to_f32(a[i * GEMM_N + k]) * qmm_bf16_to_f32(b[j * GEMM_N + k]);
            dot += p;
            mag += fabs(p);
        }
        qmm_bf16 got;
        CK(cudaMemcpyAsync(&got, (const qmm_bf16 *)c_dev + i * GEMM_N + j, sizeof got,
                           cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        double g = qmm_bf16_to_f32(got);
        if (!isfinite(g) || fabs(g - dot) > 1e-2 * fabs(dot) + 1e-3 * mag) {
            fprintf(stderr, "qmm bench ops: cuBLAS 8192^3 C[%zu][%zu] = %g, expected %g\n", i, j,
                    g, dot);
            return -1;
        }
    }
    return 0;
}

static void measure_cublas(cudaStream_t s, bench_cublas *cb, const bench_opts *o, bench_rng *rng,
                           bench_ceilings *c)
{
    size_t count = (size_t)GEMM_N * GEMM_N, bytes = count * sizeof(qmm_bf16);
    qmm_bf16 *ha = malloc(bytes), *hb = malloc(bytes);
    if (!ha || !hb) {
        free(ha);
        free(hb);
        fprintf(stderr, "qmm bench ops: WARNING: no host memory for the cuBLAS ceiling\n");
        return;
    }
    bench_set_activity("cuBLAS ceiling: uploading 8192x8192 random bf16 operands");
    bench_random_bf16(rng, ha, count);
    bench_random_bf16(rng, hb, count);
    gemm_call x = {cb, NULL, NULL, NULL};
    void *da, *db, *dc;
    CK(cudaMalloc(&da, bytes));
    CK(cudaMalloc(&db, bytes));
    CK(cudaMalloc(&dc, bytes));
    CK(cudaMemcpyAsync(da, ha, bytes, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(db, hb, bytes, cudaMemcpyHostToDevice, s));
    CK(cudaMemsetAsync(dc, 0xFF, bytes, s));
    x.a = da;
    x.b = db;
    x.c = dc;
    char why[160] = "";
    int rc = enqueue_gemm(&x, 0, why, sizeof why);
    if (rc == 0) {
        CK(cudaStreamSynchronize(s));
        rc = check_gemm(ha, hb, dc, s);
        if (rc) snprintf(why, sizeof why, "cuBLAS 8192^3 result wrong");
    }
    if (rc == 0) {
        bench_set_activity("cuBLAS ceiling: timing bf16 8192^3");
        bench_time t;
        const double tflop = 2e-12 * GEMM_N * (double)GEMM_N * GEMM_N;
        rc = time_ceiling(s, enqueue_gemm, &x, o->reps, tflop * 1e6, &c->cublas, &t, why,
                          sizeof why);
        if (rc == 0)
            snprintf(c->cublas.note, sizeof c->cublas.note,
                     "measured: cublasGemmEx bf16 in/out, fp32 compute, 8192^3 random data, "
                     "graph of %d, median of %d", t.calls, t.reps);
    }
    if (rc) ceiling_failed(&c->cublas, "cuBLAS", BENCH_DEFAULT_CUBLAS_TFLOPS, "TFLOP/s", why);
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dc));
    free(ha);
    free(hb);
}

void bench_measure_ceilings(cudaStream_t s, bench_cublas *cb, const bench_opts *o, bench_rng *rng,
                            bench_ceilings *c)
{
    bench_default_ceilings(c);
    if (!o->measure_ceilings) return;
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    measure_copy(s, sms, o, c);
    measure_cublas(s, cb, o, rng, c);
}

#else
typedef int bench_ceiling_unused; /* CUDA builds only */
#endif
