/* qmm plan: print plans, for one shape or for every projection of a model. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "common/common.h"
#include "plan.h"
#include "plan_sm90.h"
#include "qmm.h"

#define MAX_TOKENS 16

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm plan --model NAME [--policy seed|device] [--tokens 16,32,64,128,2048]\n"
            "                [--table sm90|h100|generic] [--group G] [--json]\n"
            "       qmm plan --m M --n N --k K [--policy seed|device] [--table T] [--group G] [--json]\n"
            "  Prints the plan (path and K split) for each projection of a model at each token\n"
            "  count M, as 'base blocks→split', or every plan field for one shape.\n"
            "  models: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, qwen3-14b, qwen3-32b\n"
            "  --policy seed    the reference rule (32x32 tiles, target 320, cap 16; default)\n"
            "  --policy device  what qmm_cuda_matmul runs (qmm_plan_call): on GPU 0's\n"
            "                   description, or without a GPU on the shipped tuning table (sm90)\n"
            "  --table T        plan on the shipped table's entry T (sm90, generic), GPU or not;\n"
            "                   h100: sm90 with the corrections a context makes on an H100\n"
            "  --group G        device policy: a weight in groups of G = 32, 64, 128 (default;\n"
            "                   every group size plans alike)\n"
            "  --json           the plans as one JSON object\n"
            "  exit: 0 ok, 2 usage or environment (bad shape, unknown model, bad table)\n");
}

/* Prints s left-aligned in `width` terminal columns (s may hold the 3-byte UTF-8 '→'), at least
 * one blank after it unless width is 0 (the last cell). */
static void cell(const char *s, int width)
{
    int cols = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) cols += (*c & 0xC0) != 0x80;
    printf("%s%*s", s, width > cols ? width - cols : width ? 1 : 0, "");
}

/* ---- one plan per (projection, M): as a table cell or a JSON object ---- */

/* The plan of C[m, n] = A[m, k] · Wᵀ under the policy in ctx. */
typedef qmm_status (*plan_fn)(const void *ctx, int64_t m, int64_t n, int64_t k, qmm_plan *out);
/* Its table cell. */
typedef void (*cell_fn)(const qmm_plan *pl, char *out, size_t len);

static int g_json; /* --json: plans as JSON objects instead of tables */
static int g_group; /* --group: the weight's group size for the device policy (0 = 128) */
static int g_json_first = 1;

static void plan_json(const char *proj, int64_t m, int64_t n, int64_t k, const qmm_plan *pl)
{
    printf("%s{", g_json_first ? "" : ", ");
    g_json_first = 0;
    if (proj) printf("\"proj\": \"%s\", ", proj);
    printf("\"m\": %lld, \"n\": %lld, \"k\": %lld, \"path\": \"%s\", \"split\": %d, "
           "\"base_blocks\": %lld, \"blocks\": %lld, \"tile_m\": %d, \"tile_n\": %d, "
           "\"k_per_split\": %d, \"config\": %d, \"stages\": %d, \"workspace_bytes\": %zu, "
           "\"rest_tiles\": %d, \"rest_split\": %d, \"predicted_us\": ",
           (long long)m, (long long)n, (long long)k,
           qmm_path_name(pl->path), pl->split, (long long)pl->base_blocks, (long long)pl->blocks,
           pl->tile_m, pl->tile_n, pl->k_per_split, pl->config, pl->stages, pl->workspace_bytes,
           pl->rest_tiles, pl->rest_split);
    if (pl->predicted_us < 0) printf("null}");
    else printf("%.3f}", pl->predicted_us);
}

static void json_open(const char *model, const char *policy)
{
    printf("{\"model\": ");
    if (model) printf("\"%s\"", model);
    else printf("null");
    printf(", \"policy\": \"%s\", \"plans\": [", policy);
}

static int fail(qmm_status st)
{
    fprintf(stderr, "qmm plan: %s: %s\n", qmm_status_name(st), qmm_last_error());
    return EXIT_USAGE;
}

/* A model's projections x token counts: a table (cells of width `width`) or JSON objects. */
static int model_plans(const char *model, const int64_t *tokens, int nt, int width, plan_fn fn,
                       cell_fn fmt, const void *ctx)
{
    bench_proj ps[QMM_LLM_LINEAR_COUNT];
    int np = bench_projections(model, ps);
    if (!g_json) {
        cell("proj", 6);
        cell("K→N", 13);
        for (int t = 0; t < nt; t++) {
            char h[32];
            snprintf(h, sizeof h, "M=%lld", (long long)tokens[t]);
            cell(h, t + 1 < nt ? width : 0); /* no trailing blanks */
        }
        printf("\n");
    }
    for (int i = 0; i < np; i++) {
        char kn[48], c[64];
        snprintf(kn, sizeof kn, "%lld→%lld", (long long)ps[i].k, (long long)ps[i].n);
        if (!g_json) cell(ps[i].name, 6), cell(kn, 13);
        for (int t = 0; t < nt; t++) {
            qmm_plan pl;
            qmm_status st = fn(ctx, tokens[t], ps[i].n, ps[i].k, &pl);
            if (st) return fail(st);
            if (g_json) {
                plan_json(ps[i].name, tokens[t], ps[i].n, ps[i].k, &pl);
                continue;
            }
            fmt(&pl, c, sizeof c);
            cell(c, t + 1 < nt ? width : 0);
        }
        if (!g_json) printf("\n");
    }
    return EXIT_OK;
}

static void print_plan(const qmm_plan *pl)
{
    printf("  path          %s\n", qmm_path_name(pl->path));
    printf("  split         %d\n", pl->split);
    printf("  base_blocks   %lld\n", (long long)pl->base_blocks);
    printf("  blocks        %lld\n", (long long)pl->blocks);
    if (pl->rest_tiles)
        printf("  aside         %d tile(s), split %d ways\n", pl->rest_tiles, pl->rest_split);
    printf("  tile          %dx%d\n", pl->tile_m, pl->tile_n);
    printf("  k_per_split   %d\n", pl->k_per_split);
    printf("  config        %d\n", pl->config);
    printf("  stages        %d\n", pl->stages);
    printf("  workspace     %zu bytes\n", pl->workspace_bytes);
    if (pl->predicted_us < 0) printf("  predicted_us  none\n");
    else printf("  predicted_us  %.2f\n", pl->predicted_us);
}

/* One shape: JSON or every field. */
static int shape_plan(plan_fn fn, const void *ctx, const char *policy, int64_t m, int64_t n,
                      int64_t k)
{
    qmm_plan pl;
    qmm_status st = fn(ctx, m, n, k, &pl);
    if (st) return fail(st);
    if (g_json) {
        json_open(NULL, policy);
        plan_json(NULL, m, n, k, &pl);
        return EXIT_OK;
    }
    printf("M=%lld N=%lld K=%lld\n", (long long)m, (long long)n, (long long)k);
    print_plan(&pl);
    return EXIT_OK;
}

/* ---- seed policy ---- */

static qmm_status seed_plan(const void *ctx, int64_t m, int64_t n, int64_t k, qmm_plan *out)
{
    return qmm_plan_seed(m, n, k, (const qmm_plan_params *)ctx, out);
}

static void seed_cell(const qmm_plan *pl, char *out, size_t len)
{
    if (pl->path == QMM_PATH_MATVEC) snprintf(out, len, "matvec");
    else snprintf(out, len, "%lld→%d", (long long)pl->base_blocks, pl->split);
}

static int seed_plans(const char *model, const int64_t *tokens, int nt, int64_t m, int64_t n,
                      int64_t k)
{
    qmm_plan_params pp = qmm_plan_seed_params();
    if (g_json) {
        if (model) json_open(model, "seed");
    } else {
        printf("%s, seed policy: tile %dx%d, target %d blocks, cap %d, matvec for M <= %d\n",
               model ? model : "one shape", pp.tile_m, pp.tile_n, pp.target_blocks, pp.max_split,
               pp.matvec_max_m);
        if (model) printf("cells: base blocks→split (matvec: the decode kernel, K not split)\n\n");
    }
    int rc = model ? model_plans(model, tokens, nt, 10, seed_plan, seed_cell, &pp)
                   : shape_plan(seed_plan, &pp, "seed", m, n, k);
    if (g_json && rc == EXIT_OK) printf("]}\n");
    return rc;
}

/* ---- device policy: qmm_plan_call on GPU 0's description, or the shipped table ---- */

/* table: NULL = GPU 0 when there is one, else the shipped sm90 table; "sm90" or "generic" =
 * that entry of the shipped table (no GPU needed); "h100" = sm90 with what a context corrects by
 * an H100's name (qmm_tune_for_gpu), so its plans can be read without one. */
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
    const int h100 = !strcmp(table, "h100");
    int major = !strcmp(table, "sm90") || h100 ? 9 : !strcmp(table, "generic") ? 0 : -1;
    if (major < 0) return QMM_ERR_ARG;
    qmm_status st = qmm_tune_desc(major, 0, 0, d);
    if (st == QMM_OK && h100) qmm_tune_for_gpu(d, "H100");
    if (st == QMM_OK)
        snprintf(what, len, "the shipped tuning table %s%s (%d SMs%s)", d->family,
                 h100 ? " with an H100's corrections" : "", d->gpu.sms, note);
    return st;
}

static qmm_status device_plan(const void *ctx, int64_t m, int64_t n, int64_t k, qmm_plan *out)
{
    qmm_cuda_options o = qmm_cuda_options_default();
    o.group = g_group;
    return qmm_plan_call((const qmm_device_desc *)ctx, m, n, k, &o, out);
}

static void device_cell(const qmm_plan *pl, char *out, size_t len)
{
    char rest[32] = ""; /* tiles aside and their split (plan_sm90.c) */
    if (pl->rest_tiles > 0) snprintf(rest, sizeof rest, "+%dr%d", pl->rest_tiles, pl->rest_split);
    if (pl->path == QMM_PATH_WGMMA || pl->path == QMM_PATH_STREAMK) /* its grid, then µs */
        snprintf(out, len, "%s/%d%s/%lldx%dx%d%s/%.1f", qmm_path_name(pl->path), pl->split, rest,
                 (long long)pl->blocks, pl->tile_m, pl->tile_n,
                 pl->path == QMM_PATH_WGMMA && pl->config == QMM_SM90_PAIRED_64 ? "p" : "",
                 pl->predicted_us);
    else
        snprintf(out, len, "%s/%d/%.1f", qmm_path_name(pl->path), pl->split, pl->predicted_us);
}

static int device_plans(const char *table, const char *model, const int64_t *tokens, int nt,
                        int64_t m, int64_t n, int64_t k)
{
    qmm_device_desc d;
    char what[512];
    qmm_status st = device_desc(table, &d, what, sizeof what);
    if (st == QMM_ERR_ARG && table) {
        fprintf(stderr, "qmm plan: --table must be sm90, h100 or generic, not '%s'\n", table);
        return EXIT_USAGE;
    }
    if (st) return fail(st);
    if (g_json) {
        if (model) json_open(model, "device");
    } else {
        printf("device policy on %s%s\n", what, g_group == 32   ? ", groups of 32"
                                                  : g_group == 64 ? ", groups of 64"
                                                                  : "");
        for (int c = 0; d.wgmma_min_m > 0 && c < QMM_MAX_WGMMA_CONFIGS; c++) {
            int tn = 0, wg = 0;
            if (!qmm_sm90_config(c, &tn, &wg, NULL)) break;
            printf("wgmma TN %3d WG %d, %d a SM: resident CTAs in clusters of 2..%d:", tn, wg,
                   qmm_sm90_blocks_per_sm(c), QMM_MAX_WGMMA_CLUSTER);
            for (int s = 2; s <= QMM_MAX_WGMMA_CLUSTER; s++) printf(" %d", d.wgmma_cluster_ctas[c][s]);
            printf("\n");
        }
        if (d.wgmma_min_m > 0 && d.wgmma_alt_min_tile > 0)
            printf("wgmma: clusters also in the other block height from %d-token tiles\n",
                   d.wgmma_alt_min_tile);
        if (d.wgmma_min_m > 0 && d.wgmma_rest_min_tile > 0)
            printf("wgmma: one wave of clusters and the tiles left aside from %d-token tiles\n",
                   d.wgmma_rest_min_tile);
        if (model)
            printf("%s: cells path/split/predicted µs (wgmma, streamk: path/split/CTAs x token "
                   "tile x weight rows/predicted µs; rows p: the 64-token tile's 128-row "
                   "blocks two CTAs a SM; split+TrS: T tiles aside, split S ways)\n\n", model);
    }
    int rc = model ? model_plans(model, tokens, nt, 30, device_plan, device_cell, &d)
                   : shape_plan(device_plan, &d, "device", m, n, k);
    if (g_json && rc == EXIT_OK) /* h100: the family's table with an H100's corrections */
        printf("], \"table\": \"%s\", \"sms\": %d}\n", table && !strcmp(table, "h100") ? "h100" : d.family,
               d.gpu.sms);
    return rc;
}

/* ---- arguments ---- */

/* "16,32,64" -> tokens; returns the count, 0 on a malformed list */
static int parse_tokens(const char *s, int64_t *tokens)
{
    int nt = 0;
    while (*s && nt < MAX_TOKENS) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 1 || v > INT32_MAX || (*end && *end != ',')) return 0;
        tokens[nt++] = v;
        s = *end ? end + 1 : end;
    }
    return *s ? 0 : nt;
}

int cmd_plan(int argc, char **argv)
{
    const char *model = NULL, *policy = "seed", *table = NULL;
    int64_t tokens[MAX_TOKENS] = {16, 32, 64, 128, 2048};
    long long m = 0, n = 0, k = 0;
    int nt = 5, have_shape = 0;
    static const char *const known[] = {"--model", "--policy", "--tokens", "--table",
                                        "--m", "--n", "--k", "--group", NULL};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        if (cli_is_help(o)) { usage(stdout); return EXIT_OK; }
        if (!strcmp(o, "--json")) { g_json = 1; continue; }
        if (!(v = cli_known_value("plan", known, argc, argv, &i))) return EXIT_USAGE;
        int ok = 1;
        if (!strcmp(o, "--model")) model = v;
        else if (!strcmp(o, "--policy")) policy = v;
        else if (!strcmp(o, "--table")) table = v;
        else if (!strcmp(o, "--group")) {
            long long g = 0;
            if ((ok = cli_int("plan", o, v, 32, 128, &g)) && !QMM_GROUP_OK(g)) {
                fprintf(stderr, "qmm plan: bad value '%s' for --group: 32, 64 or 128\n", v);
                ok = 0;
            }
            g_group = (int)g;
        }
        else if (!strcmp(o, "--tokens")) {
            if (!(ok = (nt = parse_tokens(v, tokens)) > 0))
                fprintf(stderr, "qmm plan: bad value '%s' for --tokens: want up to %d "
                        "comma-separated integers in [1, %d]\n", v, MAX_TOKENS, INT32_MAX);
        } else {
            ok = cli_int("plan", o, v, 1, INT32_MAX, !strcmp(o, "--m") ? &m : !strcmp(o, "--n") ? &n : &k);
            have_shape = 1;
        }
        if (!ok) return EXIT_USAGE;
    }
    int device = !strcmp(policy, "device");
    if (!device && g_group && g_group != QMM_GROUP) {
        fprintf(stderr, "qmm plan: --group applies to --policy device (the seed rule has no "
                "group)\n");
        return EXIT_USAGE;
    }
    if (!device && strcmp(policy, "seed")) {
        fprintf(stderr, "qmm plan: --policy must be seed or device, not '%s'\n", policy);
        return EXIT_USAGE;
    }
    if (!model == !have_shape || (have_shape && (!m || !n || !k))) {
        fprintf(stderr, "qmm plan: give either --model NAME or all of --m M --n N --k K\n");
        return EXIT_USAGE;
    }
    bench_proj ps[QMM_LLM_LINEAR_COUNT];
    if (model && !bench_projections(model, ps)) {
        fprintf(stderr, "qmm plan: unknown model '%s' (qwen3-0.6b, qwen3-1.7b, qwen3-4b, "
                "qwen3-8b, qwen3-14b, qwen3-32b)\n", model);
        return EXIT_USAGE;
    }
    return device ? device_plans(table, model, tokens, nt, m, n, k)
                  : seed_plans(model, tokens, nt, m, n, k);
}
