/*
 * The op x backend x shape table. Adding a kernel means adding a backend row (ops_gpu.c) and,
 * for a new op, case rows here. CPU backends run everywhere (CI); the GPU half runs on a GPU and
 * says why it skipped elsewhere. --filter matmul (or rope, attn, ...) picks an op.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---- the table ---- */

/* One row a case; the macros name each op's sizes (op_case holds them all). */
#define MATMUL(name, m, n, k) {name, OP_MATMUL, m, n, k, 0, 0, 0, 0, 0, 1e-2, 0}
#define ROWS(name, m, n, k, pos) {name, OP_ROWS, m, n, k, 0, 0, 0, pos, 0, 0, 0}
/* the same with groups of g columns (32, 64; the plain rows take 128) */
#define MATMUL_G(name, m, n, k, g) {name, OP_MATMUL, m, n, k, 0, 0, 0, 0, 0, 1e-2, g}
#define ROWS_G(name, m, n, k, pos, g) {name, OP_ROWS, m, n, k, 0, 0, 0, pos, 0, 0, g}
#define NORM(name, m, n, add) {name, OP_ADD_RMSNORM, m, n, 0, 0, 0, 0, 0, add, 1e-2, 0}
#define ROPE(name, m, heads, kv, hd, pos) {name, OP_QK_NORM_ROPE, m, 0, 0, heads, kv, hd, pos, 0, 1e-2, 0}
#define SWIGLU(name, m, n) {name, OP_SWIGLU, m, n, 0, 0, 0, 0, 0, 0, 1e-2, 0}
#define PREFILL(name, m, heads, kv, hd, pos) {name, OP_ATTN_PREFILL, m, 0, 0, heads, kv, hd, pos, 0, 2e-2, 0}
#define DECODE(name, heads, kv, hd, pos) {name, OP_ATTN_DECODE, 1, 0, 0, heads, kv, hd, pos, 0, 1e-2, 0}
#define FUSED(name, heads, kv, hd, pos) {name, OP_DECODE_FUSED, 1, 0, 0, heads, kv, hd, pos, 0, 1e-2, 0}
#define ARGMAX(name, m, vocab, pos) {name, OP_ARGMAX, m, vocab, 0, 0, 0, 0, pos, 0, 0, 0}
#define MVF(name, m, n, k, epi) {name, OP_MATVEC_FUSED, m, n, k, 0, 0, 0, 0, epi, 1e-2, 0}
#define MVF_G(name, m, n, k, epi, g) {name, OP_MATVEC_FUSED, m, n, k, 0, 0, 0, 0, epi, 1e-2, g}
#define ATTN_O(name, heads, kv, pos, n) {name, OP_ATTN_O, 1, n, (heads) * 128, heads, kv, 128, pos, 1, 1e-2, 0}
#define ATTN_O_REFUSED(name, heads, kv, pos, n) {name, OP_ATTN_O, 1, n, (heads) * 128, heads, kv, 128, pos, 2, 1e-2, 0}

static const op_case cases[] = {
    /* matmul: Qwen3-4B projections at decode and prefill sizes, each tile configuration, ragged
     * and edge shapes; tolerance 1e-2 against fp64 (relative Frobenius: the N = 1 cases take 13
     * rows, not 3: three values whose terms cancel can exceed it through the bf16 weights'
     * rounding alone — seed 1796111454408511 gave 1.15e-2 on every bf16-weight path) */
    MATMUL("q m1", 1, 4096, 2560), MATMUL("gate m2 (4-warp CTAs)", 2, 9728, 2560),
    MATMUL("kv m8", 8, 1024, 2560), MATMUL("kv m16", 16, 1024, 2560),
    MATMUL("o m17", 17, 2560, 4096), MATMUL("down m9", 9, 2560, 9728),
    MATMUL("m65 (second tile)", 65, 512, 1024), MATMUL("m130 (third tile)", 130, 300, 512),
    MATMUL("m1030 (256-token tiles)", 1030, 130, 384),
    MATMUL("ragged m37", 37, 1000, 384), MATMUL("n1 k128", 13, 1, 128),
    /* groups of 64 (mlx_lm.convert's default) and 32: decode sizes (the matvec, two or four
     * scale|bias words a block), prefill, ragged and edge shapes */
    MATMUL_G("g64 q m1", 1, 4096, 2560, 64), MATMUL_G("g64 kv m8", 8, 1024, 2560, 64),
    MATMUL_G("g64 gate m2 (4-warp CTAs)", 2, 9728, 2560, 64), MATMUL_G("g32 kv m16", 16, 1024, 2560, 32),
    MATMUL_G("g64 o m17", 17, 2560, 4096, 64), MATMUL_G("g64 down m9", 9, 2560, 9728, 64),
    MATMUL_G("g64 m130", 130, 300, 512, 64), MATMUL_G("g64 ragged m37", 37, 1000, 384, 64),
    MATMUL_G("g64 n1 k128", 13, 1, 128, 64),
    MATMUL_G("g32 kv m1", 1, 1024, 2560, 32), MATMUL_G("g32 m65", 65, 512, 1024, 32),
    MATMUL_G("g32 ragged m37", 37, 1000, 384, 32), MATMUL_G("g32 n1 k128", 13, 1, 128, 32),
    /* embedding rows: bitwise with qmm_dequantize_row_f32 */
    ROWS("rows m1", 1, 1000, 2560, 3), ROWS("rows m7 ragged vocab", 7, 333, 256, 0),
    ROWS_G("g64 rows m5", 5, 1000, 2560, 2, 64), ROWS_G("g32 rows m7", 7, 333, 256, 0, 32),
    /* engine operators at Qwen3-4B widths and small ones */
    NORM("norm h2560 m1", 1, 2560, 0), NORM("add+norm h2560 m5", 5, 2560, 1),
    NORM("add+norm h1024 m3", 3, 1024, 1),
    NORM("fp32 add+norm h4096 m1", 1, 4096, 2), NORM("fp32 add+norm h1000 m3", 3, 1000, 2),
    NORM("fp32 add+norm h998 m2 (scalar)", 2, 998, 2),
    /* rope: one warp a head, striding (m 300 and 2048 take several heads a warp); paired loads at
     * hd 128, 256, the general path at other even hd */
    ROPE("rope 32/8 m1 pos7", 1, 32, 8, 128, 7), ROPE("rope 16/8 hd64 m6", 6, 16, 8, 64, 0),
    ROPE("rope 32/8 m37 pos5", 37, 32, 8, 128, 5), ROPE("rope 32/8 m300", 300, 32, 8, 128, 0),
    ROPE("rope 32/8 m2048 pos3", 2048, 32, 8, 128, 3), ROPE("rope 4/2 hd64 m37", 37, 4, 2, 64, 9),
    ROPE("rope 3/1 hd96 m5", 5, 3, 1, 96, 2), ROPE("rope 2/2 hd256 m3", 3, 2, 2, 256, 1),
    ROPE("rope 1/1 hd2 m4", 4, 1, 1, 2, 0), ROPE("rope 5/3 hd1024 m2", 2, 5, 3, 1024, 11),
    /* Qwen3-14B's 5 query heads a KV head (40/8; 10/2 at hd 64) */
    ROPE("rope 40/8 m37 pos5", 37, 40, 8, 128, 5), ROPE("rope 10/2 hd64 m6", 6, 10, 2, 64, 3),
    SWIGLU("swiglu 9728 m1", 1, 9728), SWIGLU("swiglu 100 m3", 3, 100),
    PREFILL("prefill 32/8 m16", 16, 32, 8, 128, 0), PREFILL("prefill 32/8 m70 pos5", 70, 32, 8, 128, 5),
    PREFILL("prefill 8/8 hd64 m9", 9, 8, 8, 64, 3),
    /* the warpgroup-MMA kernel's 128-row blocks: a second block of one row (its second
     * warpgroup idle), of 72 rows over five key tiles, GQA 4:1 at an odd position, two whole
     * blocks without GQA */
    PREFILL("prefill 32/8 m129", 129, 32, 8, 128, 0), PREFILL("prefill 32/8 m200 pos40", 200, 32, 8, 128, 40),
    PREFILL("prefill 8/2 m300 pos77", 300, 8, 2, 128, 77), PREFILL("prefill 4/4 m256", 256, 4, 4, 128, 0),
    /* 5 query heads a KV head (Qwen3-14B: 40/8): ragged row blocks of each kernel, a second
     * 128-row block at an odd position, hd 64 */
    PREFILL("prefill 40/8 m70 pos5", 70, 40, 8, 128, 5), PREFILL("prefill 40/8 m129", 129, 40, 8, 128, 0),
    PREFILL("prefill 10/2 m200 pos41", 200, 10, 2, 128, 41), PREFILL("prefill 10/2 hd64 m37 pos9", 37, 10, 2, 64, 9),
    DECODE("decode 32/8 pos0", 32, 8, 128, 0), DECODE("decode 32/8 pos300", 32, 8, 128, 300),
    DECODE("decode 16/4 hd64 pos37", 16, 4, 64, 37),
    DECODE("decode 40/8 pos0", 40, 8, 128, 0), DECODE("decode 40/8 pos300", 40, 8, 128, 300),
    DECODE("decode 10/2 hd64 pos37", 10, 2, 64, 37),
    FUSED("fused 32/8 pos0", 32, 8, 128, 0), FUSED("fused 32/8 pos200", 32, 8, 128, 200),
    FUSED("fused 16/4 hd64 pos37", 16, 4, 64, 37), FUSED("fused 32/8 pos1100", 32, 8, 128, 1100),
    /* 5 query heads a KV head: one split (a block a query head), the splits' merge at 8 splits
     * (s8) and at the cluster kernel's 8 (clusters of 4, the fewest that hold 5 one-head
     * halves) and its most; hd 64 */
    FUSED("fused 40/8 pos0", 40, 8, 128, 0), FUSED("fused 40/8 pos127", 40, 8, 128, 127),
    FUSED("fused 40/8 pos200", 40, 8, 128, 200), FUSED("fused 40/8 pos1100", 40, 8, 128, 1100),
    FUSED("fused 10/2 hd64 pos37", 10, 2, 64, 37), FUSED("fused 10/2 hd64 pos700", 10, 2, 64, 700),
    ARGMAX("argmax vocab 151936", 1, 151936, 4), ARGMAX("argmax ties m3", 3, 1000, 0),
    /* the fused decode step's matvecs (decode_fused.cu) against the composition of CPU ops */
    MVF("norm·W qkv m1", 1, 6144, 2560, 0), MVF("norm·W head m5 ragged", 5, 1000, 1024, 0),
    MVF("residual o m1", 1, 2560, 4096, 1), MVF("residual m3 n200", 3, 200, 512, 1),
    MVF("residual down m16", 16, 2560, 9728, 1), MVF("residual down m1", 1, 2560, 9728, 1),
    MVF("norm·W m1 ragged n1000 k1152", 1, 1000, 1152, 0),
    MVF("norm·W swiglu m1", 1, 19456, 2560, 2), MVF("norm·W swiglu m11", 11, 384, 256, 2),
    /* two tokens where the launcher's rule takes CTAs of 4 warps (NOTES row 237) */
    MVF("norm·W gate m2 (4 warps)", 2, 9728, 2560, 0), MVF("norm·W swiglu m2 (4 warps)", 2, 19456, 2560, 2),
    /* edges of the kernel's split (forced shapes: ops_gpu.c): one group (K = 128), rows ragged
     * inside a 16-row tile and inside a 128-row block, one row, m = 9 (two token tiles, lanes
     * clamped), m = 16 with a long K, K of 3 and 5 groups (uneven ranks, warps without groups),
     * m = 4 with 20 groups (the staging in rounds: up to five of them) */
    MVF("norm·W k128 m1", 1, 384, 128, 0), MVF("residual k128 m16 n72", 16, 72, 128, 1),
    MVF("norm·W n1 m9", 9, 1, 256, 0), MVF("norm·W m16 k9728 n520", 16, 520, 9728, 0),
    MVF("residual m8 n130 k640", 8, 130, 640, 1), MVF("norm·W swiglu k128 m16", 16, 256, 128, 2),
    MVF("norm·W swiglu m2 k384", 2, 1024, 384, 2), MVF("norm·W m4 k2560 n1024", 4, 1024, 2560, 0),
    /* groups of 64 and 32 (G = 2, 4 scale|bias words a block): each epilogue, one and several
     * tokens, 4-warp CTAs, one block (K = 128), the staging of m = 4 over 20 blocks */
    MVF_G("g64 norm·W qkv m1", 1, 6144, 2560, 0, 64), MVF_G("g64 residual o m1", 1, 2560, 4096, 1, 64),
    MVF_G("g64 norm·W swiglu m1", 1, 19456, 2560, 2, 64), MVF_G("g64 residual down m16", 16, 2560, 9728, 1, 64),
    MVF_G("g64 norm·W gate m2 (4 warps)", 2, 9728, 2560, 0, 64), MVF_G("g64 fp32 m3 n200", 3, 200, 512, 3, 64),
    MVF_G("g64 norm·W m4 k2560 n1024", 4, 1024, 2560, 0, 64), MVF_G("g64 norm·W k128 m1", 1, 384, 128, 0, 64),
    MVF_G("g32 norm·W m1", 1, 1024, 2560, 0, 32), MVF_G("g32 residual m8 n130 k640", 8, 130, 640, 1, 32),
    MVF_G("g32 norm·W swiglu m11", 11, 384, 256, 2, 32), MVF_G("g32 residual k128 m16 n72", 16, 72, 128, 1, 32),
    MVF_G("g32 fp32 o m1", 1, 4096, 2048, 3, 32),
    /* tensor parallelism's fp32 partials of o and down (Qwen3-8B at t = 2) */
    MVF("fp32 o m1", 1, 4096, 2048, 3), MVF("fp32 down m16", 16, 4096, 6144, 3),
    MVF("fp32 m3 n200", 3, 200, 512, 3),
    /* the attention and o in one kernel: Qwen3-4B's shapes at one and two key tiles (its
     * engine's range), four tiles; o of 2 600 rows (21 row blocks: the last cluster's four last
     * CTAs have no rows); two KV heads with o rows ending inside a 128-row block */
    ATTN_O("attn+o 32/8 pos0 n2560", 32, 8, 0, 2560), ATTN_O("attn+o 32/8 pos100 n2560", 32, 8, 100, 2560),
    ATTN_O("attn+o 32/8 pos255 n2560", 32, 8, 255, 2560), ATTN_O("attn+o 32/8 pos7 n2600", 32, 8, 7, 2600),
    ATTN_O("attn+o 8/2 pos37 n520", 8, 2, 37, 520),
    /* 5 query heads a KV head: the kernel must refuse it (flag 2: a skip when it does, a failure
     * when it takes it; the session keeps the fused attention and the o matvec) */
    ATTN_O_REFUSED("attn+o 10/2 pos37 n520 (G 5)", 10, 2, 37, 520),
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- tensors ---- */

static size_t t_size(t_type t) { return t == T_BF16 ? 2 : 4; }

static double t_get(const tensor *t, size_t i)
{
    switch (t->type) {
    case T_BF16: return qmm_bf16_to_f32(((const qmm_bf16 *)t->host)[i]);
    case T_F32: return ((const float *)t->host)[i];
    default: return ((const int32_t *)t->host)[i];
    }
}

tensor *op_tensor(op_data *d, const char *name)
{
    for (int i = 0; i < d->nt; i++)
        if (!strcmp(d->t[i].name, name)) return &d->t[i];
    return NULL;
}

/* A new tensor, filled with normal(0, scale) for inputs (ints: 0) */
tensor *op_add(op_data *d, const char *name, t_type type, t_role role, size_t count, double scale)
{
    if (d->nt >= OP_MAX_TENSORS) {
        fprintf(stderr, "test_ops: case %s has more than %d tensors (ops.h)\n", d->c->name, OP_MAX_TENSORS);
        abort();
    }
    tensor *t = &d->t[d->nt++];
    memset(t, 0, sizeof *t);
    t->name = name, t->type = type, t->role = role, t->count = count;
    t->host = calloc(count ? count : 1, t_size(type));
    t->tol = d->c->tol;
    if (role != T_OUT) {
        if (type == T_BF16) test_fill_bf16(t->host, count, scale);
        if (type == T_F32)
            for (size_t i = 0; i < count; i++) ((float *)t->host)[i] = (float)(scale * test_rand_normal());
    }
    if (role != T_IN) t->ref = calloc(count ? count : 1, sizeof(double));
    return t;
}

/* After the inputs are final: keep a copy of every in/out tensor to restore per backend. */
static void freeze(op_data *d)
{
    for (int i = 0; i < d->nt; i++) {
        tensor *t = &d->t[i];
        if (t->role != T_INOUT) continue;
        t->init = malloc(t->count * t_size(t->type));
        memcpy(t->init, t->host, t->count * t_size(t->type));
    }
}

static void reset_outputs(op_data *d)
{
    for (int i = 0; i < d->nt; i++) {
        tensor *t = &d->t[i];
        if (t->role == T_INOUT) memcpy(t->host, t->init, t->count * t_size(t->type));
        if (t->role != T_OUT) continue;
        for (size_t j = 0; j < t->count; j++) {
            if (t->type == T_BF16) ((qmm_bf16 *)t->host)[j] = TEST_POISON_BF16;
            else if (t->type == T_F32) ((float *)t->host)[j] = NAN;
            else ((int32_t *)t->host)[j] = -777;
        }
    }
}

/* The reference: run on the host tensors, then move the outputs into ref[]. */
void op_ref_from_host(op_data *d)
{
    for (int i = 0; i < d->nt; i++) {
        tensor *t = &d->t[i];
        if (t->role == T_IN) continue;
        for (size_t j = 0; j < t->count; j++) t->ref[j] = t_get(t, j);
    }
}

static void data_free(op_data *d)
{
    for (int i = 0; i < d->nt; i++) free(d->t[i].host), free(d->t[i].init), free(d->t[i].ref);
    qmm_w4_free(&d->w);
}

/* ||got - ref|| / ||ref|| over the finite references; +inf on a NaN/Inf output where the
 * reference is finite, and on a non-finite reference the output does not match (NaN for NaN, the
 * same infinity): left out of the sum, an all-NaN reference would pass any output. tol 0 -> 0
 * when equal, else +inf */
static double compare(const tensor *t, size_t *first_bad)
{
    double num = 0, den = 0;
    *first_bad = (size_t)-1;
    for (size_t i = 0; i < t->count; i++) {
        double g = t_get(t, i), r = t->ref[i];
        if (!isfinite(r)) {
            if (isnan(r) ? !isnan(g) : g != r) return *first_bad = i, INFINITY;
            continue;
        }
        if (!isfinite(g) || (t->tol == 0 && g != r)) return *first_bad = i, INFINITY;
        num += (g - r) * (g - r), den += r * r;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}


/* ---- CPU backends: only the matmul has CPU implementations besides its fp64 definition ---- */

static const char *cpu_matmul(op_data *d, int fast)
{
    qmm_status st = fast ? qmm_matmul_cpu(op_tensor(d, "a")->host, d->c->m, &d->w,
                                          op_tensor(d, "c")->host, 0)
                         : qmm_matmul_ref(op_tensor(d, "a")->host, d->c->m, &d->w,
                                          op_tensor(d, "c")->host);
    return st ? qmm_last_error() : NULL;
}

static const op_backend cpu_backends[] = {
    {"cpu_ref", OP_MATMUL, cpu_matmul, 0, 0},
    {"cpu_fast", OP_MATMUL, cpu_matmul, 1, 0},
};

/* ---- the driver ---- */

static void run_op(op_kind op)
{
    char why[256] = "";
    int gpu = ops_gpu_available(why, sizeof why), ngpu = 0;
    const op_backend *gb = ops_gpu_backends(&ngpu);
    int ran = 0;
    for (int ci = 0; ci < NCASES; ci++) {
        if (cases[ci].op != op) continue;
        op_data d;
        memset(&d, 0, sizeof d);
        d.c = &cases[ci];
        ops_make(&d);
        freeze(&d);
        ops_reference(&d);
        const int ncpu = (int)(sizeof cpu_backends / sizeof cpu_backends[0]);
        for (int bi = 0; bi < ncpu + ngpu; bi++) {
            const op_backend *b = bi < ncpu ? &cpu_backends[bi] : &gb[bi - ncpu];
            if (b->op != op) continue;
            if (b->gpu && !gpu) continue;
            reset_outputs(&d);
            const char *err = b->run(&d, b->variant);
            if (err && !strncmp(err, OP_SKIP_PREFIX, strlen(OP_SKIP_PREFIX))) {
                printf("    %-24s %-16s %s\n", d.c->name, b->name, err);
                continue;
            }
            ran++;
            CHECKF(!err, "%s on %s: %s", d.c->name, b->name, err);
            if (err) continue;
            for (int i = 0; i < d.nt; i++) {
                tensor *t = &d.t[i];
                if (t->role == T_IN) continue;
                size_t bad;
                double e = compare(t, &bad);
                printf("    %-24s %-16s %-6s err %.2e (tol %.0e)\n", d.c->name, b->name, t->name,
                       e, t->tol);
                CHECKF(e <= t->tol, "%s on %s: %s error %.3e > %.0e (first bad element %zu: got %g, want %g)",
                       d.c->name, b->name, t->name, e, t->tol, bad,
                       bad != (size_t)-1 ? t_get(t, bad) : 0.0, bad != (size_t)-1 ? t->ref[bad] : 0.0);
            }
        }
        data_free(&d);
    }
    if (!gpu) printf("    GPU backends skipped: %s\n", why);
    CHECKF(gpu || !test_gpu_required(), "QMM_REQUIRE_GPU=1 but the GPU backends skipped: %s", why);
    /* only the matmul has CPU backends: without a GPU the other ops ran nothing, a skip */
    if (ran == 0 && !gpu) test_skip_case(why);
    CHECKF(ran > 0 || !gpu, "no backend ran");
}

#define OP_CASE(fn, kind) static void fn(void) { run_op(kind); }
OP_CASE(op_matmul, OP_MATMUL)
OP_CASE(op_rows, OP_ROWS)
OP_CASE(op_add_rmsnorm, OP_ADD_RMSNORM)
OP_CASE(op_qk_norm_rope, OP_QK_NORM_ROPE)
OP_CASE(op_swiglu, OP_SWIGLU)
OP_CASE(op_attn_prefill, OP_ATTN_PREFILL)
OP_CASE(op_attn_decode, OP_ATTN_DECODE)
OP_CASE(op_decode_fused, OP_DECODE_FUSED)
OP_CASE(op_argmax, OP_ARGMAX)
OP_CASE(op_matvec_fused, OP_MATVEC_FUSED)
OP_CASE(op_attn_o, OP_ATTN_O)

int main(int argc, char **argv)
{
    TEST_TABLE(tc, op_matmul, op_rows, op_add_rmsnorm, op_qk_norm_rope, op_swiglu, op_attn_prefill,
               op_attn_decode, op_decode_fused, op_argmax, op_matvec_fused, op_attn_o);
    int rc = test_main(argc, argv, tc, TEST_COUNT(tc));
    ops_gpu_shutdown();
    return rc;
}
