/* qmm plan: print split-K plans, for one shape or for every projection of a model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common/common.h"
#include "qmm.h"

#define MAX_TOKENS 16

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm plan --model NAME [--policy seed|device] [--tokens 16,32,64,128,2048]\n"
            "       qmm plan --m M --n N --k K [--policy seed|device] [--table sm90|generic]\n"
            "  Prints the plan (path and K split) for each projection of a model at each token\n"
            "  count M, as 'base blocks→split', or every plan field for one shape.\n"
            "  models: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b\n"
            "  --policy seed    the reference rule (32x32 tiles, target 320, cap 16; default)\n"
            "  --policy device  the plan qmm_cuda_matmul runs (qmm_plan_call): on GPU 0's\n"
            "                   description, or without a GPU on the shipped tuning table (sm90)\n"
            "  --table T        plan on the shipped table's entry T (sm90, generic), GPU or not\n");
}

/* ---- models: the linear layers of one decoder layer (K = in_features, N = out_features) ---- */

/* Prints s left-aligned in `width` terminal columns (s may hold the 3-byte UTF-8 '→'). */
static void cell(const char *s, int width)
{
    int cols = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) cols += (*c & 0xC0) != 0x80;
    printf("%s%*s", s, width > cols ? width - cols : 0, "");
}

/* ---- a model's table: one row a projection, one column a token count ---- */

/* One cell: the plan of C[m, n] = A[m, k] · Wᵀ written into out. */
typedef qmm_status (*cell_fn)(const void *ctx, int64_t m, int64_t n, int64_t k, char *out,
                              size_t len);

static int plan_table(const char *model, const int64_t *tokens, int nt, int width, cell_fn fn,
                      const void *ctx)
{
    bench_proj ps[QMM_LLM_LINEAR_COUNT];
    int np = bench_projections(model, ps);
    cell("proj", 6);
    cell("K→N", 13);
    for (int t = 0; t < nt; t++) {
        char h[32];
        snprintf(h, sizeof h, "M=%lld", (long long)tokens[t]);
        cell(h, t + 1 < nt ? width : 0); /* no trailing blanks */
    }
    printf("\n");
    for (int i = 0; i < np; i++) {
        char kn[48], c[64];
        snprintf(kn, sizeof kn, "%lld→%lld", (long long)ps[i].k, (long long)ps[i].n);
        cell(ps[i].name, 6);
        cell(kn, 13);
        for (int t = 0; t < nt; t++) {
            qmm_status st = fn(ctx, tokens[t], ps[i].n, ps[i].k, c, sizeof c);
            if (st) {
                fprintf(stderr, "\nqmm plan: %s: %s\n", qmm_status_name(st), qmm_last_error());
                return 1;
            }
            cell(c, t + 1 < nt ? width : 0);
        }
        printf("\n");
    }
    return 0;
}

/* ---- seed policy ---- */

static qmm_status seed_cell(const void *ctx, int64_t m, int64_t n, int64_t k, char *out, size_t len)
{
    qmm_plan pl;
    qmm_status st = qmm_plan_seed(m, n, k, (const qmm_plan_params *)ctx, &pl);
    if (st) return st;
    if (pl.path == QMM_PATH_MATVEC) snprintf(out, len, "matvec");
    else snprintf(out, len, "%lld→%d", (long long)pl.base_blocks, pl.split);
    return QMM_OK;
}

static int seed_model(const char *model, const int64_t *tokens, int nt)
{
    qmm_plan_params pp = qmm_plan_seed_params();
    printf("%s, seed policy: tile %dx%d, target %d blocks, cap %d, matvec for M <= %d\n",
           model, pp.tile_m, pp.tile_n, pp.target_blocks, pp.max_split, pp.matvec_max_m);
    printf("cells: base blocks→split (matvec: the decode kernel, K not split)\n\n");
    return plan_table(model, tokens, nt, 10, seed_cell, &pp);
}

static void print_plan(const qmm_plan *pl)
{
    printf("  path          %s\n", qmm_path_name(pl->path));
    printf("  split         %d\n", pl->split);
    printf("  base_blocks   %lld\n", (long long)pl->base_blocks);
    printf("  blocks        %lld\n", (long long)pl->blocks);
    printf("  tile          %dx%d\n", pl->tile_m, pl->tile_n);
    printf("  k_per_split   %d\n", pl->k_per_split);
    printf("  config        %d\n", pl->config);
    printf("  stages        %d\n", pl->stages);
    printf("  workspace     %zu bytes\n", pl->workspace_bytes);
    if (pl->predicted_us < 0) printf("  predicted_us  none\n");
    else printf("  predicted_us  %.2f\n", pl->predicted_us);
}

static int seed_shape(int64_t m, int64_t n, int64_t k)
{
    qmm_plan_params pp = qmm_plan_seed_params();
    qmm_plan pl;
    qmm_status st = qmm_plan_seed(m, n, k, &pp, &pl);
    if (st) {
        fprintf(stderr, "qmm plan: %s: %s\n", qmm_status_name(st), qmm_last_error());
        return 1;
    }
    printf("M=%lld N=%lld K=%lld, seed policy (tile %dx%d, target %d, cap %d, matvec M <= %d)\n",
           (long long)m, (long long)n, (long long)k, pp.tile_m, pp.tile_n, pp.target_blocks,
           pp.max_split, pp.matvec_max_m);
    print_plan(&pl);
    return 0;
}

/* ---- device policy: qmm_plan_call on GPU 0's description, or the shipped table ---- */

/* table: NULL = GPU 0 when there is one, else the shipped sm90 table; "sm90" or "generic" =
 * that entry of the shipped table (no GPU needed). */
static qmm_status device_desc(const char *table, qmm_device_desc *d, char *what, size_t len)
{
    int count = 0;
    char why[256] = "", note[300] = "";
    if (!table) {
        qmm_status st = qmm_cuda_device_count(&count, why, sizeof why);
        if (st == QMM_OK && count > 0) {
            qmm_cuda_ctx *ctx = NULL;
            qmm_gpu_info gi;
            if ((st = qmm_cuda_create(0, NULL, &ctx)) || (st = qmm_cuda_info(ctx, &gi)) ||
                (st = qmm_cuda_device_desc(ctx, d))) {
                qmm_cuda_destroy(ctx);
                return st;
            }
            qmm_cuda_destroy(ctx);
            snprintf(what, len, "GPU 0: %s (%d SMs), tuning table %s", gi.name, gi.sm_count,
                     d->family);
            return QMM_OK;
        }
        table = "sm90";
        snprintf(note, sizeof note, "; no GPU here: %s", st ? qmm_last_error() : why);
    }
    int major = !strcmp(table, "sm90") ? 9 : !strcmp(table, "generic") ? 0 : -1;
    if (major < 0) {
        fprintf(stderr, "qmm plan: --table must be sm90 or generic, not '%s'\n", table);
        return QMM_ERR_ARG;
    }
    qmm_status st = qmm_tune_desc(major, 0, 0, d);
    if (st == QMM_OK)
        snprintf(what, len, "the shipped tuning table %s (%d SMs%s)", d->family, d->gpu.sms, note);
    return st;
}

static qmm_status device_cell(const void *ctx, int64_t m, int64_t n, int64_t k, char *out,
                              size_t len)
{
    qmm_plan pl;
    qmm_status st = qmm_plan_call((const qmm_device_desc *)ctx, m, n, k, NULL, &pl);
    if (st != QMM_OK) return st;
    if (pl.path == QMM_PATH_WGMMA || pl.path == QMM_PATH_STREAMK) /* no prediction: its grid */
        snprintf(out, len, "%s/%d/%lldx%dx%d", qmm_path_name(pl.path), pl.split,
                 (long long)pl.blocks, pl.tile_m, pl.tile_n);
    else
        snprintf(out, len, "%s/%d/%.1f", qmm_path_name(pl.path), pl.split, pl.predicted_us);
    return st;
}

/* One shape (model == NULL) or a model's table; returns the exit code. */
static int device_plans(const char *table, const char *model,
                        const int64_t *tokens, int nt, int64_t m, int64_t n, int64_t k)
{
    qmm_device_desc d;
    char what[512];
    qmm_status st = device_desc(table, &d, what, sizeof what);
    if (st == QMM_ERR_ARG && table) return 2;
    if (st) goto fail;
    printf("device policy on %s\n", what);
    qmm_plan pl;
    if (!model) {
        if ((st = qmm_plan_call(&d, m, n, k, NULL, &pl))) goto fail;
        printf("M=%lld N=%lld K=%lld\n", (long long)m, (long long)n, (long long)k);
        print_plan(&pl);
        return 0;
    }
    printf("%s: cells path/split/predicted µs (wgmma, streamk: path/split/CTAs x token tile x "
           "weight rows)\n\n", model);
    return plan_table(model, tokens, nt, 22, device_cell, &d);
fail:
    fprintf(stderr, "qmm plan: %s: %s\n", qmm_status_name(st), qmm_last_error());
    return 1;
}

/* ---- arguments ---- */

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end) return 0;
    *out = v;
    return 1;
}

/* "16,32,64" -> tokens; returns the count, 0 on a malformed list */
static int parse_tokens(const char *s, int64_t *tokens)
{
    int nt = 0;
    while (*s && nt < MAX_TOKENS) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 1 || (*end && *end != ',')) return 0;
        tokens[nt++] = v;
        s = *end ? end + 1 : end;
    }
    return *s ? 0 : nt;
}

int cmd_plan(int argc, char **argv)
{
    const char *model = NULL, *policy = "seed", *table = NULL;
    int64_t tokens[MAX_TOKENS] = {16, 32, 64, 128, 2048}, m = 0, n = 0, k = 0;
    int nt = 5, have_shape = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        }
        int ok = v != NULL;
        if (ok && !strcmp(o, "--model")) model = v;
        else if (ok && !strcmp(o, "--policy")) policy = v;
        else if (ok && !strcmp(o, "--table")) table = v;
        else if (ok && !strcmp(o, "--tokens")) ok = (nt = parse_tokens(v, tokens)) > 0;
        else if (ok && !strcmp(o, "--m")) ok = parse_i64(v, &m), have_shape = 1;
        else if (ok && !strcmp(o, "--n")) ok = parse_i64(v, &n), have_shape = 1;
        else if (ok && !strcmp(o, "--k")) ok = parse_i64(v, &k), have_shape = 1;
        else ok = 0;
        if (!ok) {
            fprintf(stderr, "qmm plan: bad option '%s'%s%s\n", o, v ? " " : "", v ? v : "");
            usage(stderr);
            return 2;
        }
        i++;
    }
    int device = !strcmp(policy, "device");
    if (!device && strcmp(policy, "seed")) {
        fprintf(stderr, "qmm plan: --policy must be seed or device, not '%s'\n", policy);
        return 2;
    }
    if (!model == !have_shape) {
        fprintf(stderr, "qmm plan: give either --model NAME or --m M --n N --k K\n");
        usage(stderr);
        return 2;
    }
    if (have_shape)
        return device ? device_plans(table, NULL, NULL, 0, m, n, k) : seed_shape(m, n, k);
    qmm_llm_config cfg;
    if (qmm_llm_config_preset(model, &cfg) != QMM_OK) {
        fprintf(stderr, "qmm plan: unknown model '%s' (qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b)\n",
                model);
        return 2;
    }
    return device ? device_plans(table, model, tokens, nt, 0, 0, 0)
                  : seed_model(model, tokens, nt);
}
