/* The op table's GPU backends: every CUDA path of the matmul, the row gather, and each engine
 * kernel through its C entry (src/llm/cuda/ops_entry.h). Each run uploads the case's tensors,
 * launches on the default stream, synchronizes and downloads the outputs. */
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "tune/sm90.h"

#ifndef QMM_HAVE_CUDA
const op_backend *ops_gpu_backends(int *n) { *n = 0; return NULL; }
int ops_gpu_available(char *why, size_t len)
{
    snprintf(why, len, "this build has no CUDA backend (nvcc was not found)");
    return 0;
}
void ops_gpu_shutdown(void) {}
#else
#include <cuda_runtime.h>

#include "llm/cuda/ops_entry.h"

static qmm_cuda_ctx *ctx;
static char msg[512];

static const char *cuda_msg(const char *what, cudaError_t e)
{
    snprintf(msg, sizeof msg, "%s: %s", what, cudaGetErrorString(e));
    return msg;
}

/* ---- tensors on the device ---- */

typedef struct dev_tensors {
    void *p[OP_MAX_TENSORS];
} dev_tensors;

static size_t bytes_of(const tensor *t) { return t->count * (t->type == T_BF16 ? 2 : 4); }

static void dev_free(op_data *d, dev_tensors *dv)
{
    for (int i = 0; i < d->nt; i++) cudaFree(dv->p[i]);
    memset(dv, 0, sizeof *dv);
}

static const char *dev_upload(op_data *d, dev_tensors *dv)
{
    memset(dv, 0, sizeof *dv);
    for (int i = 0; i < d->nt; i++) {
        cudaError_t e = cudaMalloc(&dv->p[i], bytes_of(&d->t[i]) ? bytes_of(&d->t[i]) : 4);
        if (e == cudaSuccess) /* outputs too: the poison goes to the device */
            e = cudaMemcpy(dv->p[i], d->t[i].host, bytes_of(&d->t[i]), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            dev_free(d, dv);
            return cuda_msg("upload", e);
        }
    }
    return NULL;
}

/* Wait for the launch (launch status e), download every output, free. */
static const char *dev_finish(op_data *d, dev_tensors *dv, cudaError_t e)
{
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    for (int i = 0; i < d->nt && e == cudaSuccess; i++)
        if (d->t[i].role != T_IN)
            e = cudaMemcpy(d->t[i].host, dv->p[i], bytes_of(&d->t[i]), cudaMemcpyDeviceToHost);
    dev_free(d, dv);
    return e == cudaSuccess ? NULL : cuda_msg("kernel", e);
}

static void *D(op_data *d, dev_tensors *dv, const char *name)
{
    return dv->p[op_tensor(d, name) - d->t];
}

/* ---- matmul: one backend per path ---- */

enum { MM_AUTO, MM_MATVEC, MM_TILED, MM_SPLITK, MM_SPLITK_F32, MM_DENSE, MM_WGMMA, MM_WGMMA_SPLIT,
       MM_STREAMK, MM_WGMMA_SPLIT_WS };

static const char *gpu_matmul(op_data *d, int variant)
{
    const op_case *c = d->c;
    qmm_cuda_options o = qmm_cuda_options_default();
    static const qmm_path paths[] = {QMM_PATH_AUTO,   QMM_PATH_MATVEC, QMM_PATH_TILED,
                                     QMM_PATH_SPLITK, QMM_PATH_SPLITK, QMM_PATH_DENSE,
                                     QMM_PATH_WGMMA,  QMM_PATH_WGMMA,  QMM_PATH_STREAMK,
                                     QMM_PATH_WGMMA};
    o.path = paths[variant];
    o.group = d->w.group; /* the exact workspace of this weight's plan */
    if (variant == MM_MATVEC) {
        qmm_device_desc desc;
        if (qmm_cuda_device_desc(ctx, &desc)) { /* an error, not the skip below */
            snprintf(msg, sizeof msg, "qmm_cuda_device_desc: %s", qmm_last_error());
            return msg;
        }
        if (c->m > desc.matvec_limit_m) return OP_SKIP_PREFIX "M beyond the matvec kernel's limit";
    }
    if (variant == MM_WGMMA) o.split = 1; /* the unsplit schedule */
    if (variant == MM_SPLITK || variant == MM_SPLITK_F32 || variant == MM_WGMMA_SPLIT) {
        o.split = qmm_split_align(c->k, 4);
        if (o.split < 2) return OP_SKIP_PREFIX "K = 128 does not split";
        o.partial_type = variant == MM_SPLITK_F32 ? QMM_F32 : QMM_BF16;
    }
    if (variant == MM_WGMMA_SPLIT_WS) { /* more partitions than a cluster holds: the workspace */
        o.split = qmm_split_align(c->k, 12);
        if (o.split <= QMM_SM90_MAX_CLUSTER) return OP_SKIP_PREFIX "K too short for 9+ partitions";
    }
    qmm_cuda_weight *w = NULL;
    size_t ws_bytes = 0;
    void *ws = NULL;
    dev_tensors dv;
    const char *err = NULL;
    if (qmm_cuda_weight_upload(ctx, &d->w, &w) || qmm_cuda_workspace_size(ctx, c->m, c->n, c->k, &o, &ws_bytes))
        err = qmm_last_error();
    if (!err && ws_bytes && cudaMalloc(&ws, ws_bytes) != cudaSuccess) err = "workspace cudaMalloc failed";
    if (!err && !(err = dev_upload(d, &dv))) {
        qmm_plan plan;
        qmm_status st = qmm_cuda_matmul(ctx, D(d, &dv, "a"), c->m, w, D(d, &dv, "c"), ws, ws_bytes, &o, &plan);
        if (st) {
            snprintf(msg, sizeof msg, "qmm_cuda_matmul: %s", qmm_last_error());
            dev_free(d, &dv);
            err = msg;
        } else {
            err = dev_finish(d, &dv, cudaSuccess);
        }
    }
    cudaFree(ws);
    qmm_cuda_weight_free(w);
    return err;
}

/* The case's weight into *w and its tensors into dv: NULL, or why not (nothing left behind). */
static const char *upload_weight_and_tensors(op_data *d, qmm_cuda_weight **w, dev_tensors *dv)
{
    *w = NULL;
    if (qmm_cuda_weight_upload(ctx, &d->w, w)) return qmm_last_error();
    const char *err = dev_upload(d, dv);
    if (err) {
        qmm_cuda_weight_free(*w);
        *w = NULL;
    }
    return err;
}

/* ---- the row gather: the library's entry (0) and the engine's embedding lookup (1) ---- */

static const char *gpu_rows(op_data *d, int engine)
{
    const op_case *c = d->c;
    qmm_cuda_weight *w;
    dev_tensors dv;
    const char *err = upload_weight_and_tensors(d, &w, &dv);
    if (err) return err;
    cudaError_t e = cudaSuccess;
    if (engine) {
        e = (cudaError_t)llm_op_embed(w, D(d, &dv, "ids"), D(d, &dv, "pos"), (int)c->m,
                                      D(d, &dv, "out"), NULL);
    } else if (qmm_cuda_dequantize_rows(ctx, w, (int32_t *)D(d, &dv, "ids") + c->pos, c->m,
                                        D(d, &dv, "out"), NULL)) {
        snprintf(msg, sizeof msg, "qmm_cuda_dequantize_rows: %s", qmm_last_error());
        dev_free(d, &dv);
        qmm_cuda_weight_free(w);
        return msg;
    }
    err = dev_finish(d, &dv, e);
    qmm_cuda_weight_free(w);
    return err;
}

/* ---- the fused decode matvecs (decode_fused.cu's epilogues) ---- */

/* variant = 16·R + C: a forced CTA shape (0: the launcher's), + 512 for CTAs of 4 warps instead
 * of 8, + 1024 for the activations staged in rounds (an experiment, from two tokens; without it
 * the row runs the default staging whatever QMM_MV_ROUNDS says), + 2048 for 3 groups a warp
 * requested before the dependency wait instead of 2; skipped where the kernel does
 * not take it: SwiGLU needs gate and up tiles (R >= 2), a rank needs a group (C <= K/128), 4 warps
 * take at most 8 tokens, and the shared memory (matvec.cu MvSmem: staged rows, warp sums, 8
 * ranks' sums) must fit 227 KB. */
static const char *gpu_matvec_fused(op_data *d, int variant)
{
    const op_case *c = d->c;
    const int shape = variant % 1024, R = shape % 512 / 16, C = shape % 16, groups = (int)(c->k / 128);
    if (variant & 1024 && c->m == 1) return OP_SKIP_PREFIX "the rounds start at two tokens";
    if (shape && c->flag == 2 && R == 1) return OP_SKIP_PREFIX "SwiGLU takes R >= 2";
    if (shape & 512 && c->m > 8) return OP_SKIP_PREFIX "4-warp CTAs take at most 8 tokens";
    if (shape && C > groups) return OP_SKIP_PREFIX "more ranks than groups";
    if (shape) {
        const int64_t kr = (groups + C - 1) / C, toks = c->m <= 8 ? 8 : 16;
        const int64_t smem = (c->m * (kr * 128 + 8) * 2 + 15) / 16 * 16 + 8 * toks * 16 * 4 +
                             8 * c->m * R * 16 * 4 + 72 + (variant & 1024 ? 32 : 0);
        if (smem > 227 * 1024) return OP_SKIP_PREFIX "the staged rows exceed shared memory";
    }
    qmm_cuda_weight *w;
    dev_tensors dv;
    const char *err = upload_weight_and_tensors(d, &w, &dv);
    if (err) return err;
    int e;
    if (c->flag == 3)
        e = llm_op_matvec_fused(ctx, w, (int)c->m, 3, D(d, &dv, "a"), c->k, NULL, c->n,
                                D(d, &dv, "y"), NULL, NULL, NULL, NULL, 0, 0, 0.f, variant);
    else if (c->flag == 1)
        e = llm_op_matvec_fused(ctx, w, (int)c->m, 1, D(d, &dv, "a"), c->k, NULL, c->n,
                                D(d, &dv, "x"), D(d, &dv, "g"), D(d, &dv, "xg"), D(d, &dv, "ss"),
                                NULL, 0, 0, 0.f, variant);
    else
        e = llm_op_matvec_fused(ctx, w, (int)c->m, c->flag, D(d, &dv, "xg"), c->k, D(d, &dv, "c"),
                                c->flag == 2 ? c->n / 2 : c->n, NULL, NULL, NULL, NULL,
                                D(d, &dv, "ss"), (int)((c->k + 15) / 16), (int)c->k, OP_EPS,
                                variant);
    err = dev_finish(d, &dv, (cudaError_t)e);
    qmm_cuda_weight_free(w);
    return err;
}

/* ---- the attention and o in one kernel (attention_o_fused.cu, an experiment) ---- */

static const char *gpu_attn_o(op_data *d, int variant)
{
    (void)variant;
    const op_case *c = d->c;
    qmm_cuda_weight *w;
    dev_tensors dv;
    const char *err = upload_weight_and_tensors(d, &w, &dv);
    if (err) return err;
    /* the kernel's support is a rule on the shapes: a case says which answer it expects (flag
     * 2: refused), so a shape it should take and refuses fails instead of skipping */
    const int supported = llm_op_attention_o_fused_supported(w, c->heads, c->kv_heads, c->hd);
    const int must_refuse = c->flag == 2;
    if (!supported || must_refuse) {
        const char *what = !must_refuse ? "the kernel refuses one of its own shapes"
                           : supported  ? "the kernel takes a shape it must refuse"
                                        : "refused, as it must be";
        snprintf(msg, sizeof msg, "%sheads %d/%d, hd %d, n %lld: %s", must_refuse && !supported ? OP_SKIP_PREFIX : "",
                 c->heads, c->kv_heads, c->hd, (long long)c->n, what);
        dev_free(d, &dv);
        qmm_cuda_weight_free(w);
        return msg;
    }
    int e = llm_op_attention_o_fused(w, D(d, &dv, "q"), D(d, &dv, "k"), D(d, &dv, "v"), D(d, &dv, "qw"),
                                     D(d, &dv, "kw"), D(d, &dv, "cos"), D(d, &dv, "sin"), OP_EPS,
                                     D(d, &dv, "pos"), c->heads, c->kv_heads, c->hd, d->max_seq,
                                     D(d, &dv, "kc"), D(d, &dv, "vc"), D(d, &dv, "x"), D(d, &dv, "g"),
                                     D(d, &dv, "xg"), D(d, &dv, "ss"));
    err = dev_finish(d, &dv, (cudaError_t)e);
    qmm_cuda_weight_free(w);
    return err;
}

/* ---- engine kernels ---- */

/* The cache rows outside [pos, pos + m) bitwise as they were (the tolerance of kc would hide a
 * stray row). */
static const char *cache_untouched(op_data *d)
{
    const op_case *c = d->c;
    const char *names[2] = {"kc", "vc"};
    for (int n = 0; n < 2; n++) {
        const tensor *t = op_tensor(d, names[n]);
        const qmm_bf16 *got = t->host, *was = t->init;
        for (int h = 0; h < c->kv_heads; h++)
            for (int64_t p = 0; p < d->max_seq; p++) {
                if (p >= c->pos && p < c->pos + c->m) continue;
                size_t at = ((size_t)h * (size_t)d->max_seq + (size_t)p) * (size_t)c->hd;
                if (memcmp(got + at, was + at, (size_t)c->hd * 2)) {
                    snprintf(msg, sizeof msg, "%s row %lld of KV head %d changed (written: "
                             "%lld..%lld)", names[n], (long long)p, h, (long long)c->pos,
                             (long long)(c->pos + c->m - 1));
                    return msg;
                }
            }
    }
    return NULL;
}

static const char *gpu_engine(op_data *d, int variant)
{
    const op_case *c = d->c;
    const int64_t qw = (int64_t)c->heads * c->hd, kvw = (int64_t)c->kv_heads * c->hd;
    /* the cluster kernel (variant 100 + splits, 100: the most the device holds) */
    const int cluster = c->op == OP_DECODE_FUSED && variant >= 100;
    const int most = cluster ? llm_op_attention_decode_cluster_splits(c->kv_heads, c->hd,
                                                                       c->heads / c->kv_heads)
                             : 0;
    if (cluster && variant > 100 && variant - 100 < c->heads / c->kv_heads)
        return OP_SKIP_PREFIX "the cluster kernel takes at least as many splits as query heads a KV head";
    if (cluster && (most == 0 || variant - 100 > most))
        return OP_SKIP_PREFIX "this GPU does not hold the cluster kernel's clusters";
    if (c->op == OP_ATTN_PREFILL && variant >= 3 && !llm_op_attention_prefill_wgmma_supported(c->hd))
        return OP_SKIP_PREFIX "the warpgroup-MMA prefill attention takes hd 128 on sm_90 only";
    dev_tensors dv;
    const char *err = dev_upload(d, &dv);
    if (err) return err;
    void *partials = NULL;
    int e = 0;
    switch (c->op) {
    case OP_ADD_RMSNORM:
        e = c->flag == 2 ? llm_op_add_rmsnorm_f32(D(d, &dv, "x"), D(d, &dv, "add"), D(d, &dv, "w"),
                                                  c->n, OP_EPS, (int)c->m, D(d, &dv, "h"))
                         : llm_op_add_rmsnorm(D(d, &dv, "x"), c->flag ? D(d, &dv, "add") : NULL,
                                              D(d, &dv, "w"), c->n, OP_EPS, (int)c->m, D(d, &dv, "h"));
        break;
    case OP_QK_NORM_ROPE:
        e = llm_op_qk_norm_rope(variant, D(d, &dv, "q"), D(d, &dv, "k"), D(d, &dv, "v"), qw, kvw,
                                D(d, &dv, "qw"), D(d, &dv, "kw"), D(d, &dv, "cos"), D(d, &dv, "sin"),
                                D(d, &dv, "pos"), (int)c->m, c->heads, c->kv_heads, c->hd, OP_EPS,
                                d->max_seq, D(d, &dv, "kc"), D(d, &dv, "vc"));
        break;
    case OP_SWIGLU:
        e = llm_op_swiglu(D(d, &dv, "gate"), D(d, &dv, "up"), c->m, c->n, c->n, D(d, &dv, "out"));
        break;
    case OP_ATTN_PREFILL:
        e = llm_op_attention_prefill(variant, D(d, &dv, "q"), qw, D(d, &dv, "kc"), D(d, &dv, "vc"),
                                     D(d, &dv, "pos"), (int)c->m, c->heads, c->kv_heads, c->hd,
                                     d->max_seq, D(d, &dv, "out"));
        break;
    case OP_ATTN_DECODE:
        e = cudaMalloc(&partials, (size_t)c->heads * (size_t)variant * (size_t)(c->hd + 2) * 4);
        if (e == 0)
            e = llm_op_attention_decode(D(d, &dv, "q"), D(d, &dv, "kc"), D(d, &dv, "vc"),
                                        D(d, &dv, "pos"), c->heads, c->kv_heads, c->hd, d->max_seq,
                                        variant, partials, D(d, &dv, "out"));
        break;
    case OP_DECODE_FUSED:
        if (cluster) {
            e = llm_op_attention_decode_cluster(
                D(d, &dv, "q"), D(d, &dv, "k"), D(d, &dv, "v"), D(d, &dv, "qw"), D(d, &dv, "kw"),
                D(d, &dv, "cos"), D(d, &dv, "sin"), OP_EPS, D(d, &dv, "pos"), c->heads,
                c->kv_heads, c->hd, d->max_seq, variant > 100 ? variant - 100 : most,
                D(d, &dv, "kc"), D(d, &dv, "vc"), D(d, &dv, "out"));
            break;
        }
        e = cudaMalloc(&partials, (size_t)c->heads * (size_t)variant * (size_t)(c->hd + 2) * 4);
        if (e == 0)
            e = llm_op_attention_decode_fused(
                D(d, &dv, "q"), D(d, &dv, "k"), D(d, &dv, "v"), D(d, &dv, "qw"), D(d, &dv, "kw"),
                D(d, &dv, "cos"), D(d, &dv, "sin"), OP_EPS, D(d, &dv, "pos"), c->heads,
                c->kv_heads, c->hd, d->max_seq, variant, D(d, &dv, "kc"), D(d, &dv, "vc"),
                partials, D(d, &dv, "counters"), D(d, &dv, "out"));
        break;
    case OP_ARGMAX:
        if (variant == 0) {
            e = llm_op_argmax_advance(D(d, &dv, "logits"), c->n, D(d, &dv, "tokens"),
                                      D(d, &dv, "pos"), (int)c->m, D(d, &dv, "err"));
            break;
        }
        /* the two-stage form: partials (value, index) per block, then the finish */
        e = cudaMalloc(&partials, (size_t)llm_op_argmax_blocks(c->n) * 8);
        if (e == 0)
            e = llm_op_argmax_two_stage(D(d, &dv, "logits"), c->n, partials,
                                        (int *)partials + llm_op_argmax_blocks(c->n),
                                        D(d, &dv, "tokens"), D(d, &dv, "pos"), (int)c->m,
                                        D(d, &dv, "err"));
        break;
    default:
        break;
    }
    err = dev_finish(d, &dv, (cudaError_t)e);
    cudaFree(partials);
    if (!err && c->op == OP_QK_NORM_ROPE) err = cache_untouched(d);
    return err;
}

/* ---- the backend rows: adding a kernel means adding a row here ---- */

#define MATMUL(name, variant) {name, OP_MATMUL, gpu_matmul, variant, 1}
#define ENGINE(name, op, variant) {name, op, gpu_engine, variant, 1}
static const op_backend gpu_backends[] = {
    MATMUL("cuda_auto", MM_AUTO), MATMUL("cuda_matvec", MM_MATVEC), MATMUL("cuda_tiled", MM_TILED),
    MATMUL("cuda_splitk", MM_SPLITK), MATMUL("cuda_splitk_f32", MM_SPLITK_F32),
    MATMUL("cuda_dense", MM_DENSE), MATMUL("cuda_wgmma", MM_WGMMA),
    MATMUL("cuda_wgmma_splitk", MM_WGMMA_SPLIT), MATMUL("cuda_wgmma_splitk_ws", MM_WGMMA_SPLIT_WS),
    MATMUL("cuda_streamk", MM_STREAMK),
    {"cuda_rows", OP_ROWS, gpu_rows, 0, 1}, {"engine_embed", OP_ROWS, gpu_rows, 1, 1},
    ENGINE("engine", OP_ADD_RMSNORM, 0), ENGINE("engine", OP_QK_NORM_ROPE, 0),
    ENGINE("engine_pdl", OP_QK_NORM_ROPE, 1), ENGINE("engine", OP_SWIGLU, 0),
    ENGINE("engine_fp32", OP_ATTN_PREFILL, 0), ENGINE("engine_mma", OP_ATTN_PREFILL, 1),
    ENGINE("engine_mma_pdl", OP_ATTN_PREFILL, 2), ENGINE("engine_wgmma", OP_ATTN_PREFILL, 3),
    ENGINE("engine_wgmma_pdl", OP_ATTN_PREFILL, 4), ENGINE("engine_wgmma_pipe", OP_ATTN_PREFILL, 5),
    ENGINE("engine_wgmma_pipe_pdl", OP_ATTN_PREFILL, 6),
    ENGINE("engine_split1", OP_ATTN_DECODE, 1), ENGINE("engine_split4", OP_ATTN_DECODE, 4),
    ENGINE("engine_fused_s1", OP_DECODE_FUSED, 1), ENGINE("engine_fused_s8", OP_DECODE_FUSED, 8),
    ENGINE("engine_cluster_s4", OP_DECODE_FUSED, 104), ENGINE("engine_cluster_s8", OP_DECODE_FUSED, 108),
    ENGINE("engine_cluster", OP_DECODE_FUSED, 100),
    ENGINE("engine", OP_ARGMAX, 0), ENGINE("engine_2stage", OP_ARGMAX, 1),
    {"cuda_matvec", OP_MATVEC_FUSED, gpu_matvec_fused, 0, 1},
    /* forced (R tiles, C ranks): the tile map, the SwiGLU pairing, ranks and warps without groups */
    {"cuda_mv_r1c1", OP_MATVEC_FUSED, gpu_matvec_fused, 16 + 1, 1},
    {"cuda_mv_r1c4", OP_MATVEC_FUSED, gpu_matvec_fused, 16 + 4, 1},
    {"cuda_mv_r2c2", OP_MATVEC_FUSED, gpu_matvec_fused, 32 + 2, 1},
    {"cuda_mv_r2c8", OP_MATVEC_FUSED, gpu_matvec_fused, 32 + 8, 1},
    {"cuda_mv_r4c4", OP_MATVEC_FUSED, gpu_matvec_fused, 64 + 4, 1},
    {"cuda_mv_r8c1", OP_MATVEC_FUSED, gpu_matvec_fused, 128 + 1, 1},
    {"cuda_mv_r8c8", OP_MATVEC_FUSED, gpu_matvec_fused, 128 + 8, 1},
    /* 4-warp CTAs (m <= 8): a warp a tile, two, four */
    {"cuda_mv4_r4c1", OP_MATVEC_FUSED, gpu_matvec_fused, 512 + 64 + 1, 1},
    {"cuda_mv4_r2c2", OP_MATVEC_FUSED, gpu_matvec_fused, 512 + 32 + 2, 1},
    {"cuda_mv4_r1c4", OP_MATVEC_FUSED, gpu_matvec_fused, 512 + 16 + 4, 1},
    {"cuda_mv4_r2c8", OP_MATVEC_FUSED, gpu_matvec_fused, 512 + 32 + 8, 1},
    /* the staging in rounds (NOTES row 182): 8, 2, 1 parts a tile, so 1 to 5 rounds a launch */
    {"cuda_mv_rounds", OP_MATVEC_FUSED, gpu_matvec_fused, 1024, 1},
    {"cuda_mv_rounds_r1c1", OP_MATVEC_FUSED, gpu_matvec_fused, 1024 + 16 + 1, 1},
    {"cuda_mv_rounds_r4c2", OP_MATVEC_FUSED, gpu_matvec_fused, 1024 + 64 + 2, 1},
    {"cuda_mv_rounds_r8c1", OP_MATVEC_FUSED, gpu_matvec_fused, 1024 + 128 + 1, 1},
    {"cuda_mv4_rounds_r2c4", OP_MATVEC_FUSED, gpu_matvec_fused, 1024 + 512 + 32 + 4, 1},
    /* 3 groups a warp requested before the dependency wait, as the decode step's gate|up */
    {"cuda_mv_pre3", OP_MATVEC_FUSED, gpu_matvec_fused, 2048, 1},
    {"cuda_attn_o", OP_ATTN_O, gpu_attn_o, 0, 1},
};

const op_backend *ops_gpu_backends(int *n)
{
    *n = (int)(sizeof gpu_backends / sizeof gpu_backends[0]);
    return gpu_backends;
}

int ops_gpu_available(char *why, size_t len)
{
    if (ctx) return 1;
    int count = 0;
    qmm_cuda_device_count(&count, why, len);
    if (count == 0) return 0;
    if (qmm_cuda_create(0, NULL, &ctx) != QMM_OK) {
        snprintf(why, len, "cannot create a CUDA context: %s", qmm_last_error());
        return 0;
    }
    return 1;
}

void ops_gpu_shutdown(void)
{
    qmm_cuda_destroy(ctx);
    ctx = NULL;
}
#endif
