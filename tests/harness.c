#include "harness.h"
#include "internal.h"
#include "cpu/threads.h"
#include "llm/hf_random.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <time.h>

static uint64_t g_seed, g_state;
static int g_failed_now, g_skipped_now;
static char g_skip_why[256];
static const char *g_case;

uint64_t test_seed(void) { return g_seed; }

uint64_t test_rand_u64(void) { return qmm_splitmix64(&g_state); }

double test_rand_uniform(double lo, double hi) { return lo + (hi - lo) * qmm_unit_f64(&g_state); }

double test_rand_normal(void)
{
    double u1 = test_rand_uniform(1e-12, 1.0), u2 = test_rand_uniform(0.0, 1.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void test_fill_bf16(qmm_bf16 *x, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) x[i] = qmm_f32_to_bf16((float)(scale * test_rand_normal()));
}

void test_random_w4(qmm_w4 *w, double scale_lo, double scale_hi)
{
    for (size_t i = 0; i < w->packed_count; i++) w->packed[i] = (uint32_t)test_rand_u64();
    for (size_t i = 0; i < w->scales_count; i++) {
        double s = test_rand_uniform(scale_lo, scale_hi);
        if (test_rand_u64() & 1) s = -s;
        w->scales[i] = qmm_f32_to_bf16((float)s);
        /* bias centres the group: about -7.5*s, jittered */
        w->biases[i] = qmm_f32_to_bf16((float)(-7.5 * s + 0.25 * s * test_rand_normal()));
    }
}

/* c = a·Wᵀ in fp64 of the dequantized weights; with |a| and |w| (abs 1); or the sum of the
 * squared terms, Σ (a·w)² (abs 2). Every output is one thread's sum over j in order, so the
 * result does not depend on the thread count; the threads take W's rows (a large reference
 * took most of gpu_kernels' two minutes on one core), and A is converted once a block of its
 * rows (exact: bf16 → f32). */
typedef struct f64_job {
    const float *a; /* rows i0 … i0 + mb − 1 of A, as f32 (|a| for abs) */
    int64_t mb, i0;
    const qmm_w4 *w;
    double *c;
    int abs, threads;
} f64_job;

static void matmul_f64_rows(void *arg, int t)
{
    const f64_job *jb = arg;
    const qmm_w4 *w = jb->w;
    const int64_t n = w->n, k = w->k, gs = w->group, g = k / gs;
    double *row = malloc((size_t)k * sizeof *row);
    if (!row) abort(); /* a test harness: no way to report it to the caller */
    for (int64_t r = n * t / jb->threads; r < n * (t + 1) / jb->threads; r++) {
        for (int64_t j = 0; j < k; j++) {
            uint32_t q = (w->packed[r * (k / 8) + j / 8] >> (4 * (j % 8))) & 0xF;
            double s = qmm_bf16_to_f32(w->scales[r * g + j / gs]);
            double b = qmm_bf16_to_f32(w->biases[r * g + j / gs]);
            row[j] = jb->abs ? fabs(s * q + b) : s * q + b;
        }
        for (int64_t i = 0; i < jb->mb; i++) {
            const float *x = jb->a + i * k;
            double acc = 0;
            for (int64_t j = 0; j < k; j++) {
                const double tv = (double)x[j] * row[j];
                acc += jb->abs == 2 ? tv * tv : tv;
            }
            jb->c[(jb->i0 + i) * n + r] = acc;
        }
    }
    free(row);
}

static void matmul_f64(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, double *c, int abs)
{
    const int64_t k = w->k, block = 64;
    if (m < 1 || w->n < 1) return;
    int threads = qmm_cpu_online();
    if (threads > 32) threads = 32;
    if (threads > w->n) threads = (int)w->n;
    float *af = malloc((size_t)(m < block ? m : block) * (size_t)k * sizeof *af);
    if (!af) abort();
    for (int64_t i0 = 0; i0 < m; i0 += block) {
        const int64_t mb = m - i0 < block ? m - i0 : block;
        for (int64_t e = 0; e < mb * k; e++) {
            const float x = qmm_bf16_to_f32(a[i0 * k + e]);
            af[e] = abs ? fabsf(x) : x;
        }
        f64_job jb = {af, mb, i0, w, c, abs, threads};
        qmm_parallel_run(threads, matmul_f64_rows, &jb);
    }
    free(af);
}

void test_matmul_f64(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, double *c) { matmul_f64(a, m, w, c, 0); }

void test_matmul_abs_f64(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, double *c) { matmul_f64(a, m, w, c, 1); }

void test_matmul_sq_f64(const qmm_bf16 *a, int64_t m, const qmm_w4 *w, double *c) { matmul_f64(a, m, w, c, 2); }

double test_rel_frob_bf16(const qmm_bf16 *got, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double g = qmm_bf16_to_f32(got[i]);
        if (!isfinite(g)) return INFINITY;
        num += (g - ref[i]) * (g - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double test_rel_frob_f32(const float *got, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i];
        if (!isfinite(g)) return INFINITY;
        num += (g - ref[i]) * (g - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "    FAIL %s:%d [%s] ", file, line, g_case ? g_case : "?");
    vfprintf(stdout, fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    g_failed_now = 1;
}

int test_failed_now(void) { return g_failed_now; }

void test_skip_all(const char *why)
{
    printf("SKIP: %s\n", why);
    printf("0 passed, 0 failed, all skipped\n");
    fflush(stdout);
    exit(77);
}

int test_gpu_required(void)
{
    const char *v = getenv("QMM_REQUIRE_GPU");
    return v && !strcmp(v, "1");
}

void test_skip_no_gpu(const char *why)
{
    if (!test_gpu_required()) test_skip_all(why);
    printf("FAIL: QMM_REQUIRE_GPU=1 and no usable GPU: %s\n", why);
    printf("0 passed, 1 failed\n");
    fflush(stdout);
    exit(1);
}

void test_skip_case(const char *why)
{
    g_skipped_now = 1;
    snprintf(g_skip_why, sizeof g_skip_why, "%s", why);
}

int test_main(int argc, char **argv, const test_case *cases, int count)
{
    const char *filter = NULL;
    int have_seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            g_seed = strtoull(argv[++i], NULL, 0);
            have_seed = 1;
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
            filter = argv[++i];
        } else if (!strcmp(argv[i], "--list")) {
            for (int c = 0; c < count; c++) printf("%s\n", cases[c].name);
            return 0;
        } else {
            fprintf(stderr, "usage: %s [--seed N] [--filter SUBSTR] [--list]\n", argv[0]);
            return 2;
        }
    }
    if (!have_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        g_seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
    }
    printf("%s: seed %llu (rerun with --seed %llu)\n", argv[0], (unsigned long long)g_seed,
           (unsigned long long)g_seed);
    int passed = 0, failed = 0, skipped = 0;
    for (int c = 0; c < count; c++) {
        if (filter && !strstr(cases[c].name, filter)) continue;
        g_case = cases[c].name;
        g_failed_now = g_skipped_now = 0;
        g_state = g_seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(c + 1));
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cases[c].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6;
        if (g_skipped_now && !g_failed_now)
            printf("skip %s: %s (%.1f ms)\n", cases[c].name, g_skip_why, ms);
        else
            printf("%-4s %s (%.1f ms)\n", g_failed_now ? "FAIL" : "ok", cases[c].name, ms);
        fflush(stdout);
        if (g_failed_now) failed++;
        else if (g_skipped_now) skipped++;
        else passed++;
    }
    if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else printf("%d passed, %d failed\n", passed, failed);
    if (filter && passed + failed + skipped == 0) { /* a misspelt filter would pass, silently */
        fprintf(stderr, "%s: no case matches --filter '%s' (--list shows them)\n", argv[0], filter);
        return 2;
    }
    /* nothing ran but skips: the program skipped, as test_skip_all's 77 says */
    return failed ? 1 : passed == 0 && skipped ? 77 : 0;
}

int test_plan_equal(const qmm_plan *a, const qmm_plan *b)
{
    return a->path == b->path && a->split == b->split && a->base_blocks == b->base_blocks &&
           a->blocks == b->blocks && a->tile_m == b->tile_m && a->tile_n == b->tile_n &&
           a->k_per_split == b->k_per_split && a->predicted_us == b->predicted_us &&
           a->config == b->config && a->stages == b->stages &&
           a->workspace_bytes == b->workspace_bytes && a->rest_tiles == b->rest_tiles &&
           a->rest_split == b->rest_split;
}

int test_make_tmpdir(char *out, size_t size, const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, size, "%s/qmm_%s_XXXXXX", base && *base ? base : "/tmp", tag);
    if (mkdtemp(out)) return 1;
    test_fail(__FILE__, __LINE__, "mkdtemp failed");
    return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

void test_rm_tree(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

qmm_llm_model *test_checkpoint_model(const qmm_llm_config *c)
{
    char dir[512], hf[600], mlx[600];
    if (!test_make_tmpdir(dir, sizeof dir, "model")) return NULL;
    snprintf(hf, sizeof hf, "%s/hf", dir);
    snprintf(mlx, sizeof mlx, "%s/mlx", dir);
    mkdir(hf, 0755);
    qmm_llm_model *m = NULL;
    qmm_status st = llm_write_random_hf(hf, c, test_rand_u64(), ST_BF16);
    if (!st) st = qmm_llm_quantize_checkpoint(hf, mlx, NULL);
    if (!st) st = qmm_llm_model_load(mlx, &m);
    CHECKF(st == QMM_OK, "making the model: %s", qmm_last_error());
    test_rm_tree(dir);
    return m;
}

qmm_llm_model *test_synthetic_model(const qmm_llm_config *c, uint64_t seed)
{
    qmm_llm_model *m = NULL;
    CHECK_OK(qmm_llm_model_synthetic(c, seed, &m));
    return m;
}

qmm_llm_cuda_session *test_cuda_session(const qmm_llm_model *m, int64_t max_seq,
                                        const qmm_llm_cuda_options *o)
{
    qmm_llm_cuda_options d = qmm_llm_cuda_options_default();
    qmm_llm_cuda_session *s = NULL;
    qmm_status st = qmm_llm_cuda_session_create(m, max_seq, o ? o : &d, &s);
    CHECKF(st == QMM_OK, "cuda session: %s (%s)", qmm_last_error(), qmm_status_name(st));
    return s;
}

int test_near_tie(const float *ref, int64_t n, int32_t got, double *gap)
{
    int32_t best;
    qmm_llm_argmax(ref, n, &best);
    double g = (double)ref[best] - ref[got];
    if (gap) *gap = g;
    return got == best || g <= 0.02 * fmax(1.0, fabs(ref[best]));
}

int test_llm_init(test_llm *t, qmm_llm_model *m, int n)
{
    memset(t, 0, sizeof *t);
    if (!(t->m = m)) return 0;
    t->V = qmm_llm_model_config(m)->vocab_size;
    t->ids = malloc((size_t)n * sizeof *t->ids);
    t->a = malloc((size_t)t->V * sizeof *t->a), t->b = malloc((size_t)t->V * sizeof *t->b);
    test_random_ids(t->ids, n, t->V);
    return 1;
}

double test_decode_pair(test_llm *f, qmm_llm_cuda_session *s, qmm_llm_cuda_session *ref, int steps,
                        double tol, const char *what, int ci)
{
    double worst = 0;
    for (int i = 0; i < steps; i++) {
        int32_t ts, tr;
        CHECK_OK(qmm_llm_cuda_decode(s, f->ids[i], f->a, &ts));
        CHECK_OK(qmm_llm_cuda_decode(ref, f->ids[i], f->b, &tr));
        double err = test_rel_err_f32(f->a, f->b, f->V);
        if (err > worst) worst = err;
        CHECKF(err <= tol, "config %d, position %d: %s vs reference rel err %.3g", ci, i, what, err);
        double gap = 0; /* another token only as a near tie under the reference logits */
        CHECKF(ts == tr || test_near_tie(f->b, f->V, ts, &gap),
               "config %d, position %d: tokens %d vs %d, gap %.4g", ci, i, ts, tr, gap);
    }
    CHECK(qmm_llm_cuda_position(s) == steps);
    return worst;
}

void test_llm_free(test_llm *t)
{
    qmm_llm_model_destroy(t->m);
    free(t->ids), free(t->a), free(t->b);
    memset(t, 0, sizeof *t);
}

void test_random_ids(int32_t *ids, int n, int64_t vocab)
{
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(test_rand_u64() % (uint64_t)vocab);
}

void test_require_gpu(const char *what)
{
    int count = 0;
    char why[256] = "";
    qmm_cuda_device_count(&count, why, sizeof why);
    if (count > 0) return;
    char msg[512];
    snprintf(msg, sizeof msg, "no CUDA device (%s): %s", why[0] ? why : "none found", what);
    test_skip_no_gpu(msg);
}

qmm_cuda_ctx *test_gpu_context(void)
{
    qmm_cuda_ctx *ctx = NULL;
    qmm_gpu_info info;
    if (qmm_cuda_create(0, NULL, &ctx) != QMM_OK || qmm_cuda_info(ctx, &info) != QMM_OK) {
        printf("cannot create a CUDA context: %s\n", qmm_last_error());
        exit(1);
    }
    printf("GPU: %s, sm_%d%d, %d SMs, driver %d, runtime %d; tiled blocks/SM %d %d %d\n",
           info.name, info.cc_major, info.cc_minor, info.sm_count, info.driver_version,
           info.runtime_version, info.tiled_blocks_per_sm[0], info.tiled_blocks_per_sm[1],
           info.tiled_blocks_per_sm[2]);
    return ctx;
}

double test_rel_err_f32(const float *got, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

void test_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        test_fail(__FILE__, __LINE__, "cannot write %s", path);
        return;
    }
    fputs(text, f);
    fclose(f);
}

unsigned char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    *len = b ? fread(b, 1, (size_t)(n > 0 ? n : 0), f) : 0;
    fclose(f);
    return b;
}
