/* The op table's data and references: fresh random tensors per case; the references are the
 * definitions (fp64 for the matmul, qmm_dequantize_row_f32 for rows, cpu_ops.c for the engine). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/cpu_ops.h"
#include "ops.h"

#define T(name) op_tensor(d, name)
#define BF(name) ((qmm_bf16 *)T(name)->host)
#define F32(name) ((float *)T(name)->host)
#define I32(name) ((int32_t *)T(name)->host)

/* norm weights near 1, as trained models have */
static void near_one(tensor *t)
{
    for (size_t i = 0; i < t->count; i++)
        ((qmm_bf16 *)t->host)[i] = qmm_f32_to_bf16((float)(1.0 + 0.2 * test_rand_normal()));
}

static void make_cache(op_data *d, const op_case *c, t_role role)
{
    size_t cache = (size_t)c->kv_heads * (size_t)d->max_seq * (size_t)c->hd;
    op_add(d, "kc", T_BF16, role, cache, 1.0);
    op_add(d, "vc", T_BF16, role, cache, 1.0);
    op_add(d, "pos", T_I32, T_IN, 1, 0)->tol = 0;
    I32("pos")[0] = (int32_t)c->pos;
}

/* m rows of q (role q_role), k, v; the norm weights, the RoPE table, a cache to append to */
static void make_rope(op_data *d, const op_case *c, t_role q_role)
{
    size_t m = (size_t)c->m, qw = (size_t)c->heads * c->hd, kvw = (size_t)c->kv_heads * c->hd;
    op_add(d, "q", T_BF16, q_role, m * qw, 1.0);
    op_add(d, "k", T_BF16, T_IN, m * kvw, 1.0);
    op_add(d, "v", T_BF16, T_IN, m * kvw, 1.0);
    near_one(op_add(d, "qw", T_BF16, T_IN, (size_t)c->hd, 0));
    near_one(op_add(d, "kw", T_BF16, T_IN, (size_t)c->hd, 0));
    op_add(d, "cos", T_F32, T_IN, (size_t)d->max_seq * c->hd / 2, 0);
    op_add(d, "sin", T_F32, T_IN, (size_t)d->max_seq * c->hd / 2, 0);
    llm_rope_table(1e6, c->hd, d->max_seq, F32("cos"), F32("sin"));
    make_cache(d, c, T_INOUT);
    T("vc")->tol = 0; /* v is copied */
}

void ops_make(op_data *d)
{
    const op_case *c = d->c;
    size_t m = (size_t)c->m, n = (size_t)c->n, k = (size_t)c->k;
    size_t qw = (size_t)c->heads * c->hd;
    d->max_seq = c->pos + c->m + 3; /* not a multiple of any tile: the kernels take any length */
    switch (c->op) {
    case OP_MATMUL:
        qmm_w4_alloc_group(c->n, c->k, c->group ? c->group : QMM_GROUP, &d->w);
        test_random_w4(&d->w, 0.002, 0.02);
        op_add(d, "a", T_BF16, T_IN, m * k, 1.0);
        op_add(d, "c", T_BF16, T_OUT, m * n, 0);
        break;
    case OP_ROWS:
        qmm_w4_alloc_group(c->n, c->k, c->group ? c->group : QMM_GROUP, &d->w);
        test_random_w4(&d->w, 0.002, 0.02);
        op_add(d, "ids", T_I32, T_IN, (size_t)c->pos + m, 0);
        for (size_t i = 0; i < (size_t)c->pos + m; i++)
            I32("ids")[i] = (int32_t)(test_rand_u64() % (uint64_t)c->n);
        I32("ids")[c->pos] = (int32_t)c->n - 1; /* the last row */
        op_add(d, "pos", T_I32, T_IN, 1, 0);
        I32("pos")[0] = (int32_t)c->pos;
        op_add(d, "out", T_F32, T_OUT, m * k, 0);
        break;
    case OP_ADD_RMSNORM:
        op_add(d, "x", T_F32, T_INOUT, m * n, 1.0)->tol = 0; /* one fp32 add: exact */
        op_add(d, "add", c->flag == 2 ? T_F32 : T_BF16, T_IN, m * n, 1.0);
        near_one(op_add(d, "w", T_BF16, T_IN, n, 0));
        op_add(d, "h", T_BF16, T_OUT, m * n, 0);
        break;
    case OP_QK_NORM_ROPE: /* q rotated in place; the cache rows to be written poisoned */
        make_rope(d, c, T_INOUT);
        for (int h = 0; h < c->kv_heads; h++)
            for (size_t i = 0; i < m * (size_t)c->hd; i++) {
                size_t at = ((size_t)h * (size_t)d->max_seq + (size_t)c->pos) * (size_t)c->hd + i;
                BF("kc")[at] = BF("vc")[at] = TEST_POISON_BF16;
            }
        break;
    case OP_DECODE_FUSED: /* the new row's q, k, v; the cache holds pos earlier positions */
        make_rope(d, c, T_IN);
        op_add(d, "counters", T_I32, T_INOUT, (size_t)c->kv_heads, 0)->tol = 0; /* zero after */
        op_add(d, "out", T_BF16, T_OUT, qw, 0);
        break;
    case OP_ATTN_O: /* OP_DECODE_FUSED's inputs, then OP_MATVEC_FUSED's residual (k = heads·hd) */
        make_rope(d, c, T_IN);
        qmm_w4_alloc(c->n, c->k, &d->w);
        test_random_w4(&d->w, 0.002, 0.02);
        op_add(d, "x", T_F32, T_INOUT, n, 1.0);
        near_one(op_add(d, "g", T_BF16, T_IN, n, 0));
        op_add(d, "xg", T_BF16, T_OUT, n, 0);
        op_add(d, "ss", T_F32, T_OUT, (n + 15) / 16, 0);
        break;
    case OP_MATVEC_FUSED: {
        qmm_w4_alloc_group(c->n, c->k, c->group ? c->group : QMM_GROUP, &d->w);
        test_random_w4(&d->w, 0.002, 0.02);
        if (c->flag == 3) { /* y[m, n] = a·Wᵀ, fp32: only the accumulation's rounding */
            op_add(d, "a", T_BF16, T_IN, m * k, 1.0);
            op_add(d, "y", T_F32, T_OUT, m * n, 0)->tol = 1e-4; /* bf16 output: ~1e-3 */
            break;
        }
        if (c->flag == 1) { /* x[m, n] += a·Wᵀ; the next norm's xg and Σx² per 16 rows */
            op_add(d, "a", T_BF16, T_IN, m * k, 1.0);
            op_add(d, "x", T_F32, T_INOUT, m * n, 1.0);
            near_one(op_add(d, "g", T_BF16, T_IN, n, 0));
            op_add(d, "xg", T_BF16, T_OUT, m * n, 0);
            op_add(d, "ss", T_F32, T_OUT, m * (size_t)((n + 15) / 16), 0);
            break;
        }
        /* rmsnorm(x)·γ as the kernel gets it: xg = bf16(x·γ) and Σx² per 16 columns */
        const size_t blocks = (k + 15) / 16;
        op_add(d, "x", T_F32, T_IN, m * k, 1.0);
        near_one(op_add(d, "g", T_BF16, T_IN, k, 0));
        op_add(d, "xg", T_BF16, T_IN, m * k, 0);
        op_add(d, "ss", T_F32, T_IN, m * blocks, 0);
        for (size_t r = 0; r < m; r++)
            for (size_t j = 0; j < k; j++) {
                float x = F32("x")[r * k + j];
                BF("xg")[r * k + j] = qmm_f32_to_bf16(x * qmm_bf16_to_f32(BF("g")[j]));
                F32("ss")[r * blocks + j / 16] += x * x;
            }
        op_add(d, "c", T_BF16, T_OUT, c->flag == 2 ? m * n / 2 : m * n, 0);
        break;
    }
    case OP_SWIGLU:
        op_add(d, "gate", T_BF16, T_IN, m * n, 2.0);
        op_add(d, "up", T_BF16, T_IN, m * n, 1.0);
        op_add(d, "out", T_BF16, T_OUT, m * n, 0);
        break;
    case OP_ATTN_PREFILL:
    case OP_ATTN_DECODE:
        op_add(d, "q", T_BF16, T_IN, m * qw, 1.0);
        make_cache(d, c, T_IN);
        op_add(d, "out", T_BF16, T_OUT, m * qw, 0);
        break;
    case OP_ARGMAX: {
        op_add(d, "logits", T_BF16, T_IN, n, 3.0);
        qmm_bf16 *l = BF("logits");
        if (c->m > 1) { /* ties keep the lowest index; NaN never wins */
            l[n / 2] = l[n / 3] = qmm_f32_to_bf16(100.0f);
            l[n / 4] = qmm_f32_to_bf16(NAN);
        }
        op_add(d, "tokens", T_I32, T_INOUT, (size_t)c->pos + m + 1, 0)->tol = 0;
        for (size_t i = 0; i < (size_t)c->pos + m + 1; i++) I32("tokens")[i] = (int32_t)i;
        op_add(d, "pos", T_I32, T_INOUT, 1, 0)->tol = 0;
        I32("pos")[0] = (int32_t)c->pos;
        op_add(d, "err", T_I32, T_INOUT, 1, 0)->tol = 0;
        break;
    }
    default:
        break;
    }
}

/* causal GQA attention of row r at position pos + r over pos + r + 1 cached positions */
static void attend(op_data *d, int64_t r)
{
    const op_case *c = d->c;
    const int64_t hd = c->hd, group = c->heads / c->kv_heads, qw = (int64_t)c->heads * hd;
    float *scores = malloc((size_t)d->max_seq * sizeof *scores);
    for (int h = 0; h < c->heads; h++) {
        size_t base = (size_t)(h / group) * (size_t)d->max_seq * (size_t)hd;
        llm_attend_row(BF("q") + r * qw + h * hd, BF("kc") + base, BF("vc") + base, c->pos + r + 1,
                       hd, scores, BF("out") + r * qw + h * hd);
    }
    free(scores);
}

/* the decode step: q, k rotated at pos; k, v appended; attention over 0..pos into out */
static void decode_fused_into(op_data *d, qmm_bf16 *out)
{
    const op_case *c = d->c;
    const int64_t hd = c->hd, half = hd / 2, p = c->pos, group = c->heads / c->kv_heads;
    const float *cr = F32("cos") + p * half, *sr = F32("sin") + p * half;
    qmm_bf16 *q = malloc((size_t)c->heads * (size_t)hd * 2);
    float *scores = malloc((size_t)d->max_seq * sizeof *scores);
    for (int h = 0; h < c->heads; h++)
        llm_head_norm_rope(BF("q") + h * hd, BF("qw"), hd, OP_EPS, cr, sr, q + h * hd);
    for (int h = 0; h < c->kv_heads; h++) {
        size_t at = ((size_t)h * (size_t)d->max_seq + (size_t)p) * (size_t)hd;
        llm_head_norm_rope(BF("k") + h * hd, BF("kw"), hd, OP_EPS, cr, sr, BF("kc") + at);
        memcpy(BF("vc") + at, BF("v") + h * hd, (size_t)hd * 2);
    }
    for (int h = 0; h < c->heads; h++) {
        size_t base = (size_t)(h / group) * (size_t)d->max_seq * (size_t)hd;
        llm_attend_row(q + h * hd, BF("kc") + base, BF("vc") + base, p + 1, hd, scores, out + h * hd);
    }
    free(q), free(scores);
}
static void decode_fused(op_data *d) { decode_fused_into(d, BF("out")); }

/* x[r] += bf16(y[r]); xg = bf16(x·g); ss = Σx² per 16 (the residual epilogue, rows m × n) */
static void residual_ref(op_data *d, const qmm_bf16 *y, int64_t m, int64_t n)
{
    const int64_t blocks = (n + 15) / 16;
    for (int64_t r = 0; r < m; r++) {
        float *x = F32("x") + r * n;
        llm_add_row(x, y + r * n, n);
        for (int64_t b = 0; b < blocks; b++) F32("ss")[r * blocks + b] = 0.f;
        for (int64_t j = 0; j < n; j++) {
            BF("xg")[r * n + j] = qmm_f32_to_bf16(x[j] * qmm_bf16_to_f32(BF("g")[j]));
            F32("ss")[r * blocks + j / 16] += x[j] * x[j];
        }
    }
}

/* the attention (its bf16 output), then the o matmul (bf16) and the residual epilogue */
static void attn_o(op_data *d)
{
    const op_case *c = d->c;
    qmm_bf16 *a = malloc((size_t)c->k * 2), *y = malloc((size_t)c->n * 2);
    double *yd = malloc((size_t)c->n * sizeof *yd);
    decode_fused_into(d, a);
    test_matmul_f64(a, 1, &d->w, yd);
    for (int64_t i = 0; i < c->n; i++) y[i] = qmm_f32_to_bf16((float)yd[i]);
    residual_ref(d, y, 1, c->n);
    free(a), free(y), free(yd);
    op_ref_from_host(d);
}

/* The fused decode matvecs as the composition of the CPU ops: rmsnorm then the matmul (its bf16
 * output), then SwiGLU; or the matmul (bf16), the residual add, and the next norm's inputs. */
static void matvec_fused(op_data *d)
{
    const op_case *c = d->c;
    const int64_t m = c->m, n = c->n, k = c->k;
    if (c->flag == 3) { /* fp64 of the dequantized weights: unrounded, as the kernel's fp32 */
        test_matmul_f64(BF("a"), m, &d->w, T("y")->ref);
        return;
    }
    qmm_bf16 *a = malloc((size_t)(m * k) * 2), *y = malloc((size_t)(m * n) * 2);
    double *yd = malloc((size_t)(m * n) * sizeof *yd);
    if (c->flag == 1) memcpy(a, BF("a"), (size_t)(m * k) * 2);
    else
        for (int64_t r = 0; r < m; r++) llm_rmsnorm_row(F32("x") + r * k, BF("g"), k, OP_EPS, a + r * k);
    test_matmul_f64(a, m, &d->w, yd);
    for (int64_t i = 0; i < m * n; i++) y[i] = qmm_f32_to_bf16((float)yd[i]);
    if (c->flag == 0) {
        memcpy(BF("c"), y, (size_t)(m * n) * 2);
    } else if (c->flag == 2) { /* gate rows 128·j + 0..63, up rows 128·j + 64..127 */
        const int64_t half = n / 2;
        qmm_bf16 *g = malloc((size_t)half * 2), *u = malloc((size_t)half * 2);
        for (int64_t r = 0; r < m; r++) {
            for (int64_t j = 0; j < half; j++) {
                g[j] = y[r * n + (j / 64) * 128 + j % 64];
                u[j] = y[r * n + (j / 64) * 128 + 64 + j % 64];
            }
            llm_swiglu(g, u, half, BF("c") + r * half);
        }
        free(g), free(u);
    } else {
        residual_ref(d, y, m, n);
    }
    free(a), free(y), free(yd);
    op_ref_from_host(d);
}

void ops_reference(op_data *d)
{
    const op_case *c = d->c;
    const int64_t m = c->m, n = c->n, k = c->k, hd = c->hd, half = hd / 2;
    switch (c->op) {
    case OP_MATMUL: /* fp64 of the dequantized weights: no rounding but the inputs' */
        test_matmul_f64(BF("a"), m, &d->w, T("c")->ref);
        return;
    case OP_ROWS:
        for (int64_t r = 0; r < m; r++)
            qmm_dequantize_row_f32(&d->w, I32("ids")[c->pos + r], F32("out") + r * k);
        break;
    case OP_ADD_RMSNORM: {
        qmm_bf16 *add = c->flag == 2 ? malloc((size_t)n * 2) : NULL; /* bf16(the fp32 add) */
        for (int64_t r = 0; r < m; r++) {
            if (c->flag == 2) {
                for (int64_t j = 0; j < n; j++) add[j] = qmm_f32_to_bf16(F32("add")[r * n + j]);
                llm_add_row(F32("x") + r * n, add, n);
            } else if (c->flag) {
                llm_add_row(F32("x") + r * n, BF("add") + r * n, n);
            }
            llm_rmsnorm_row(F32("x") + r * n, BF("w"), n, OP_EPS, BF("h") + r * n);
        }
        free(add);
        break;
    }
    case OP_QK_NORM_ROPE:
        for (int64_t r = 0; r < m; r++) {
            int64_t p = c->pos + r;
            const float *cr = F32("cos") + p * half, *sr = F32("sin") + p * half;
            for (int h = 0; h < c->heads; h++) {
                qmm_bf16 *qh = BF("q") + (r * c->heads + h) * hd;
                llm_head_norm_rope(qh, BF("qw"), hd, OP_EPS, cr, sr, qh);
            }
            for (int h = 0; h < c->kv_heads; h++) {
                size_t at = ((size_t)h * (size_t)d->max_seq + (size_t)p) * (size_t)hd;
                llm_head_norm_rope(BF("k") + (r * c->kv_heads + h) * hd, BF("kw"), hd, OP_EPS, cr,
                                   sr, BF("kc") + at);
                memcpy(BF("vc") + at, BF("v") + (r * c->kv_heads + h) * hd, (size_t)hd * 2);
            }
        }
        break;
    case OP_SWIGLU:
        llm_swiglu(BF("gate"), BF("up"), m * n, BF("out"));
        break;
    case OP_ATTN_PREFILL:
    case OP_ATTN_DECODE:
        for (int64_t r = 0; r < m; r++) attend(d, r);
        break;
    case OP_DECODE_FUSED:
        decode_fused(d);
        break;
    case OP_MATVEC_FUSED:
        matvec_fused(d);
        return;
    case OP_ATTN_O:
        attn_o(d);
        return;
    case OP_ARGMAX: {
        float *f = malloc((size_t)n * sizeof *f);
        for (int64_t i = 0; i < n; i++) f[i] = qmm_bf16_to_f32(BF("logits")[i]);
        int32_t best = -1;
        CHECK_OK(qmm_llm_argmax(f, n, &best));
        free(f);
        I32("tokens")[c->pos + m] = best;
        I32("pos")[0] += (int32_t)m;
        break;
    }
    default:
        break;
    }
    op_ref_from_host(d);
}
