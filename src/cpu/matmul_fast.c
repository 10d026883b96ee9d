/* The fast CPU matmul: same function as the reference (fp32 accumulation), all cores.
 *
 * A is converted to f32 once, in micro-panels of MR rows interleaved along K, so the inner loop
 * reads it contiguously. The output is cut into panels of NR columns (NR rows of W); a work item
 * is one panel over one K partition. Its W rows are dequantized once into a per-thread scratch
 * panel [K, NR] (through a 16-entry table per group: the same fmaf(scale, q, bias) values as the
 * reference, 16 fmaf per group of 32, 64 or 128 weights), then every MR-row slice of A is multiplied against it
 * with MR x NR independent fp32 accumulators held in 16-byte vector registers (GCC vector
 * extensions: portable C that becomes SSE on x86-64 and NEON on AArch64).
 *
 * Each accumulator sums its K range in column order with the products rounded first, exactly
 * like the reference, so an unsplit run matches it bit for bit (the tests only rely on the
 * tolerance, in case a compiler fuses the multiply-add). When there are too
 * few panels to keep every thread busy, K is split into group-aligned partitions across
 * threads; each writes an f32 partial plane and the planes are summed in partition order, so
 * results never depend on which thread ran what (deterministic). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "cpu.h"
#include "threads.h"

#define NR QMM_CPU_NR
#define MR QMM_CPU_MR
#define MIN_MACS_PER_THREAD (1 << 16) /* below this a thread costs more than it saves */

typedef float v4f __attribute__((vector_size(16)));
_Static_assert(NR == 8 && MR == 4, "micro_tile is written for 4 x 8 tiles");

qmm_cpu_schedule qmm_cpu_schedule_for(int64_t m, int64_t n, int64_t k, int group, int threads)
{
    qmm_cpu_schedule s;
    if (threads <= 0) threads = qmm_cpu_online();
    if (threads > QMM_MAX_THREADS) threads = QMM_MAX_THREADS;
    double macs = (double)m * (double)n * (double)k;
    if (macs < (double)MIN_MACS_PER_THREAD * threads)
        threads = macs < 2.0 * MIN_MACS_PER_THREAD ? 1 : (int)(macs / MIN_MACS_PER_THREAD);
    s.panels = (n + NR - 1) / NR;
    s.split = 1;
    /* Fewer than two panels per thread leaves cores idle (or unbalanced): split K instead. */
    if (threads > 1 && s.panels < 2 * (int64_t)threads) {
        int64_t want = (2 * (int64_t)threads + s.panels - 1) / s.panels;
        int64_t groups = group > 0 ? k / group : 1;
        if (groups < 1) groups = 1;
        s.split = (int)(want < groups ? want : groups);
    }
    int64_t items = s.panels * s.split;
    s.threads = items < threads ? (int)items : threads;
    return s;
}

typedef struct job {
    const qmm_w4 *w;
    const float *ap;      /* A as f32: [ceil(M/MR)][K][MR], rows past M are zero */
    int64_t m, n, k;
    qmm_cpu_schedule sched;
    qmm_bf16 *c;          /* split == 1: the output [M, N] */
    float *partial;       /* split > 1: [split][M, N] partial planes */
    float **scratch;      /* per thread: a W panel [K, NR] */
    atomic_llong next;    /* next work item to take */
} job;

/* First column of K partition p (group aligned; partitions differ by at most one group). */
static int64_t part_start(int64_t k, int group, int split, int p)
{
    int64_t groups = k / group;
    return groups * p / split * group;
}

// wp is [k1-k0, NR]: wp[j-k0][r] = W[n0+r][j], zero for rows past N
static void dequant_panel(const qmm_w4 *w, int64_t n0, int64_t k0, int64_t k1, float *wp)
{
    int64_t k = w->k, gs = w->group, groups = k / gs;
    for (int r = 0; r < NR; r++) {
        int64_t row = n0 + r;
        if (row >= w->n) {
            for (int64_t j = k0; j < k1; j++) wp[(j - k0) * NR + r] = 0.0f;
            continue;
        }
        for (int64_t g = k0 / gs; g < k1 / gs; g++) {
            float s = qmm_bf16_to_f32(w->scales[row * groups + g]);
            float b = qmm_bf16_to_f32(w->biases[row * groups + g]);
            float table[16];
            for (int q = 0; q < 16; q++) table[q] = fmaf(s, (float)q, b);
            const uint32_t *words = w->packed + row * (k / 8) + g * (gs / 8);
            float *out = wp + (g * gs - k0) * NR + r;
            for (int i = 0; i < gs / 8; i++) {
                uint32_t word = words[i];
                for (int c = 0; c < 8; c++) out[(i * 8 + c) * NR] = table[(word >> (4 * c)) & 0xFu];
            }
        }
    }
}

// ap is [kc, MR], wp is [kc, NR]: acc[r][j] = Σ_k ap[k][r] * wp[k][j], k in order
static void micro_tile(const float *ap, const float *wp, int64_t kc, float acc[MR][NR])
{
    /* 4 rows x 2 halves of 4 columns: eight 16-byte vectors, which every x86-64 (SSE) and
     * AArch64 (NEON) compiler keeps in registers; wider generic vectors get spilled on SSE. */
    v4f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
    for (int64_t k = 0; k < kc; k++) {
        v4f w0, w1;
        memcpy(&w0, wp + k * NR, sizeof w0);
        memcpy(&w1, wp + k * NR + 4, sizeof w1);
        const float *a = ap + k * MR;
        c00 += a[0] * w0;
        c01 += a[0] * w1;
        c10 += a[1] * w0;
        c11 += a[1] * w1;
        c20 += a[2] * w0;
        c21 += a[2] * w1;
        c30 += a[3] * w0;
        c31 += a[3] * w1;
    }
    memcpy(acc[0], &c00, sizeof c00);
    memcpy(acc[0] + 4, &c01, sizeof c01);
    memcpy(acc[1], &c10, sizeof c10);
    memcpy(acc[1] + 4, &c11, sizeof c11);
    memcpy(acc[2], &c20, sizeof c20);
    memcpy(acc[2] + 4, &c21, sizeof c21);
    memcpy(acc[3], &c30, sizeof c30);
    memcpy(acc[3] + 4, &c31, sizeof c31);
}

/* One work item: output columns [n0, n0+NR) over K partition p, for all rows of A. */
static void run_item(job *jb, float *wp, int64_t item)
{
    int split = jb->sched.split;
    int64_t n0 = item / split * NR;
    int p = (int)(item % split);
    int gs = jb->w->group;
    int64_t k0 = part_start(jb->k, gs, split, p), k1 = part_start(jb->k, gs, split, p + 1);
    dequant_panel(jb->w, n0, k0, k1, wp);

    int64_t cols = jb->n - n0 < NR ? jb->n - n0 : NR;
    for (int64_t m0 = 0; m0 < jb->m; m0 += MR) {
        float acc[MR][NR];
        micro_tile(jb->ap + m0 * jb->k + k0 * MR, wp, k1 - k0, acc);
        int64_t rows = jb->m - m0 < MR ? jb->m - m0 : MR;
        for (int64_t r = 0; r < rows; r++) {
            size_t at = (size_t)((m0 + r) * jb->n + n0);
            if (split == 1) {
                for (int64_t j = 0; j < cols; j++) jb->c[at + j] = qmm_f32_to_bf16(acc[r][j]);
            } else {
                float *plane = jb->partial + (size_t)p * (size_t)(jb->m * jb->n);
                memcpy(plane + at, acc[r], (size_t)cols * sizeof(float));
            }
        }
    }
}

static void worker(void *arg, int t)
{
    job *jb = arg;
    int64_t items = jb->sched.panels * jb->sched.split;
    for (;;) {
        int64_t item = atomic_fetch_add(&jb->next, 1);
        if (item >= items) return;
        run_item(jb, jb->scratch[t], item);
    }
}

// ap is [ceil(M/MR)][K][MR] f32 from a [M, K] bf16; rows past M are zero
static void pack_a(const qmm_bf16 *a, int64_t m, int64_t k, float *ap)
{
    for (int64_t m0 = 0; m0 < m; m0 += MR)
        for (int64_t j = 0; j < k; j++)
            for (int r = 0; r < MR; r++)
                ap[m0 * k + j * MR + r] = m0 + r < m ? qmm_bf16_to_f32(a[(m0 + r) * k + j]) : 0.0f;
}

// c[i][n] = bf16(Σ_p partial[p][i][n]) over p in order; partial is [split][M, N]
static void reduce_parts(const float *partial, int split, size_t mn, qmm_bf16 *c)
{
    for (size_t i = 0; i < mn; i++) {
        float acc = partial[i];
        for (int p = 1; p < split; p++) acc += partial[(size_t)p * mn + i];
        c[i] = qmm_f32_to_bf16(acc);
    }
}

// a is [M, K] bf16, w is [N, K] W4 (groups of g), c is [M, N] bf16: c = a · wᵀ
qmm_status qmm_matmul_cpu(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, qmm_bf16 *c,
                          int threads)
{
    qmm_clear_error();
    qmm_status st = qmm_cpu_check_matmul("qmm_matmul_cpu", a, m, w, c);
    if (st) return st;

    job jb = {.w = w, .m = m, .n = w->n, .k = w->k, .c = c};
    jb.sched = qmm_cpu_schedule_for(m, w->n, w->k, w->group, threads);
    int split = jb.sched.split, nthreads = jb.sched.threads;
    /* partitions hold floor or ceil of groups/split groups: scratch for the longer */
    int64_t kmax = (w->k / w->group + split - 1) / split * w->group;

    /* Everything is allocated before anything is written, so a failure leaves c untouched. */
    size_t mpad = (size_t)((m + MR - 1) / MR * MR), ap_bytes, plane_bytes = 0;
    int ok = qmm_mul_size(mpad, (size_t)w->k * sizeof(float), &ap_bytes);
    if (ok && split > 1)
        ok = qmm_mul_size((size_t)m * (size_t)w->n * sizeof(float), (size_t)split, &plane_bytes);
    if (!ok)
        return qmm_fail(QMM_ERR_OVERFLOW, "qmm_matmul_cpu: scratch for M = %lld, K = %lld "
                        "overflows size_t", (long long)m, (long long)w->k);
    float *scratch[QMM_MAX_THREADS] = {0};
    float *ap = malloc(ap_bytes), *partial = split > 1 ? malloc(plane_bytes) : NULL;
    ok = ap && (split == 1 || partial);
    for (int t = 0; t < nthreads; t++) {
        scratch[t] = malloc((size_t)kmax * NR * sizeof(float));
        ok = ok && scratch[t];
    }
    if (ok) {
        jb.ap = ap;
        jb.partial = partial;
        jb.scratch = scratch;
        atomic_init(&jb.next, 0);
        pack_a(a, m, w->k, ap);
        qmm_parallel_run(nthreads, worker, &jb);
        if (split > 1) reduce_parts(partial, split, (size_t)m * (size_t)w->n, c);
    }
    for (int t = 0; t < nthreads; t++) free(scratch[t]);
    free(partial);
    free(ap);
    if (!ok) return qmm_fail(QMM_ERR_NOMEM, "qmm_matmul_cpu: no memory for scratch buffers");
    return QMM_OK;
}
