/* qmm plan: print split-K plans, for one shape or for every projection of a model. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qmm.h"

#define MAX_TOKENS 16

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm plan --model NAME [--policy seed|device] [--tokens 16,32,64,128,2048]\n"
            "                [--json]\n"
            "       qmm plan --m M --n N --k K [--policy seed|device] [--json]\n"
            "  Prints the plan (path and K split) for each projection of a model at each token\n"
            "  count M, as 'base blocks→split', or every plan field for one shape.\n"
            "  models: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b\n"
            "  --policy seed    the reference rule (32x32 tiles, target 320, cap 16; default)\n"
            "  --policy device  this GPU's plan from the performance model (needs CUDA and a GPU)\n"
            "  --json           the plans as one JSON object\n"
            "  exit: 0 ok, 2 usage or environment (bad shape, unknown model, no GPU)\n");
}

/* ---- models: the linear layers of one decoder layer (K = in_features, N = out_features) ---- */

typedef struct model_shapes {
    const char *name;
    int64_t hidden, intermediate, q_out, kv_out; /* q_out = heads * 128, kv_out = kv heads * 128 */
} model_shapes;

static const model_shapes models[] = {
    {"qwen3-0.6b", 1024, 3072, 2048, 1024},
    {"qwen3-1.7b", 2048, 6144, 2048, 1024},
    {"qwen3-4b", 2560, 9728, 4096, 1024},
    {"qwen3-8b", 4096, 12288, 4096, 1024},
};

typedef struct proj {
    const char *name;
    int64_t k, n;
} proj;

static int model_projs(const model_shapes *ms, proj out[7])
{
    proj p[7] = {{"q", ms->hidden, ms->q_out},         {"k", ms->hidden, ms->kv_out},
                 {"v", ms->hidden, ms->kv_out},        {"o", ms->q_out, ms->hidden},
                 {"gate", ms->hidden, ms->intermediate}, {"up", ms->hidden, ms->intermediate},
                 {"down", ms->intermediate, ms->hidden}};
    memcpy(out, p, sizeof p);
    return 7;
}

/* Prints s left-aligned in `width` terminal columns (s may hold the 3-byte UTF-8 '→'). */
static void cell(const char *s, int width)
{
    int cols = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) cols += (*c & 0xC0) != 0x80;
    printf("%s%*s", s, width > cols ? width - cols : 0, "");
}

static int g_json; /* --json: plans as JSON objects instead of tables */
static int g_json_first = 1;

static void plan_json(const char *proj, int64_t m, int64_t n, int64_t k, const qmm_plan *pl)
{
    printf("%s{", g_json_first ? "" : ", ");
    g_json_first = 0;
    if (proj) printf("\"proj\": \"%s\", ", proj);
    printf("\"m\": %lld, \"n\": %lld, \"k\": %lld, \"path\": \"%s\", \"split\": %d, "
           "\"base_blocks\": %lld, \"blocks\": %lld, \"tile_m\": %d, \"tile_n\": %d, "
           "\"k_per_split\": %d, \"config\": %d, \"predicted_us\": ", (long long)m,
           (long long)n, (long long)k, qmm_path_name(pl->path), pl->split,
           (long long)pl->base_blocks, (long long)pl->blocks, pl->tile_m, pl->tile_n,
           pl->k_per_split, pl->config);
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

/* ---- seed policy ---- */

static int seed_model(const model_shapes *ms, const int64_t *tokens, int nt)
{
    qmm_plan_params pp = qmm_plan_seed_params();
    proj ps[7];
    int np = model_projs(ms, ps);
    if (g_json) {
        json_open(ms->name, "seed");
        for (int i = 0; i < np; i++)
            for (int t = 0; t < nt; t++) {
                qmm_plan pl;
                qmm_status st = qmm_plan_seed(tokens[t], ps[i].n, ps[i].k, &pp, &pl);
                if (st) {
                    fprintf(stderr, "\nqmm plan: %s: %s\n", qmm_status_name(st), qmm_last_error());
                    return EXIT_USAGE;
                }
                plan_json(ps[i].name, tokens[t], ps[i].n, ps[i].k, &pl);
            }
        printf("]}\n");
        return EXIT_OK;
    }
    printf("%s, seed policy: tile %dx%d, target %d blocks, cap %d, matvec for M <= %d\n",
           ms->name, pp.tile_m, pp.tile_n, pp.target_blocks, pp.max_split, pp.matvec_max_m);
    printf("cells: base blocks→split (matvec: the decode kernel, K not split)\n\n");
    cell("proj", 6);
    cell("K→N", 13);
    for (int t = 0; t < nt; t++) {
        char h[32];
        snprintf(h, sizeof h, "M=%lld", (long long)tokens[t]);
        cell(h, t + 1 < nt ? 10 : 0); /* no trailing blanks */
    }
    printf("\n");
    for (int i = 0; i < np; i++) {
        char kn[48];
        snprintf(kn, sizeof kn, "%lld→%lld", (long long)ps[i].k, (long long)ps[i].n);
        cell(ps[i].name, 6);
        cell(kn, 13);
        for (int t = 0; t < nt; t++) {
            qmm_plan pl;
            qmm_status st = qmm_plan_seed(tokens[t], ps[i].n, ps[i].k, &pp, &pl);
            if (st) {
                fprintf(stderr, "\nqmm plan: %s: %s\n", qmm_status_name(st), qmm_last_error());
                return EXIT_USAGE;
            }
            char c[48];
            if (pl.path == QMM_PATH_MATVEC) snprintf(c, sizeof c, "matvec");
            else snprintf(c, sizeof c, "%lld→%d", (long long)pl.base_blocks, pl.split);
            cell(c, t + 1 < nt ? 10 : 0);
        }
        printf("\n");
    }
    return 0;
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
        return EXIT_USAGE;
    }
    if (g_json) {
        json_open(NULL, "seed");
        plan_json(NULL, m, n, k, &pl);
        printf("]}\n");
        return EXIT_OK;
    }
    printf("M=%lld N=%lld K=%lld, seed policy (tile %dx%d, target %d, cap %d, matvec M <= %d)\n",
           (long long)m, (long long)n, (long long)k, pp.tile_m, pp.tile_n, pp.target_blocks,
           pp.max_split, pp.matvec_max_m);
    print_plan(&pl);
    return 0;
}

/* ---- device policy: the CUDA backend's planner on GPU 0 ---- */

/* One shape (ms == NULL) or a model's table; returns the exit code. */
static int device_plans(const model_shapes *ms, const int64_t *tokens, int nt, int64_t m,
                        int64_t n, int64_t k)
{
    int count = 0;
    char why[256] = "";
    qmm_status st = qmm_cuda_device_count(&count, why, sizeof why);
    if (st || count == 0) {
        fprintf(stderr, "qmm plan: device policy needs a CUDA build and a GPU (%s)\n",
                st ? qmm_last_error() : why);
        return 2;
    }
    qmm_cuda_ctx *ctx = NULL;
    qmm_gpu_info gi;
    if ((st = qmm_cuda_create(0, NULL, &ctx)) || (st = qmm_cuda_info(ctx, &gi))) goto fail;
    qmm_cuda_options opt = qmm_cuda_options_default();
    opt.policy = QMM_POLICY_DEVICE;
    qmm_plan pl;
    if (g_json) {
        json_open(ms ? ms->name : NULL, "device");
        proj ps[7];
        int np = ms ? model_projs(ms, ps) : 1;
        for (int i = 0; i < np; i++)
            for (int t = 0; t < (ms ? nt : 1); t++) {
                int64_t pm = ms ? tokens[t] : m, pn = ms ? ps[i].n : n, pk = ms ? ps[i].k : k;
                if ((st = qmm_cuda_plan(ctx, pm, pn, pk, &opt, &pl))) goto fail;
                plan_json(ms ? ps[i].name : NULL, pm, pn, pk, &pl);
            }
        printf("], \"gpu\": \"%s\", \"sms\": %d}\n", gi.name, gi.sm_count);
        qmm_cuda_destroy(ctx);
        return EXIT_OK;
    }
    printf("device policy on GPU 0: %s (%d SMs)\n", gi.name, gi.sm_count);
    if (!ms) {
        if ((st = qmm_cuda_plan(ctx, m, n, k, &opt, &pl))) goto fail;
        printf("M=%lld N=%lld K=%lld\n", (long long)m, (long long)n, (long long)k);
        print_plan(&pl);
        qmm_cuda_destroy(ctx);
        return 0;
    }
    proj ps[7];
    int np = model_projs(ms, ps);
    printf("%s: cells path/split/predicted µs\n\n", ms->name);
    cell("proj", 6);
    cell("K→N", 13);
    for (int t = 0; t < nt; t++) {
        char h[32];
        snprintf(h, sizeof h, "M=%lld", (long long)tokens[t]);
        cell(h, t + 1 < nt ? 22 : 0);
    }
    printf("\n");
    for (int i = 0; i < np; i++) {
        char kn[48];
        snprintf(kn, sizeof kn, "%lld→%lld", (long long)ps[i].k, (long long)ps[i].n);
        cell(ps[i].name, 6);
        cell(kn, 13);
        for (int t = 0; t < nt; t++) {
            if ((st = qmm_cuda_plan(ctx, tokens[t], ps[i].n, ps[i].k, &opt, &pl))) goto fail;
            char c[64];
            snprintf(c, sizeof c, "%s/%d/%.1f", qmm_path_name(pl.path), pl.split, pl.predicted_us);
            cell(c, t + 1 < nt ? 22 : 0);
        }
        printf("\n");
    }
    qmm_cuda_destroy(ctx);
    return 0;
fail:
    fprintf(stderr, "qmm plan: %s: %s\n", qmm_status_name(st), qmm_last_error());
    qmm_cuda_destroy(ctx);
    return EXIT_USAGE;
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
    const char *model = NULL, *policy = "seed";
    int64_t tokens[MAX_TOKENS] = {16, 32, 64, 128, 2048};
    long long m = 0, n = 0, k = 0;
    int nt = 5, have_shape = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return EXIT_OK;
        }
        if (!strcmp(o, "--json")) {
            g_json = 1;
            continue;
        }
        if (strcmp(o, "--model") && strcmp(o, "--policy") && strcmp(o, "--tokens") &&
            strcmp(o, "--m") && strcmp(o, "--n") && strcmp(o, "--k"))
            return cli_unknown("plan", o);
        if (!(v = cli_value("plan", argc, argv, &i))) return EXIT_USAGE;
        int ok = 1;
        if (!strcmp(o, "--model")) model = v;
        else if (!strcmp(o, "--policy")) policy = v;
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
    if (!device && strcmp(policy, "seed")) {
        fprintf(stderr, "qmm plan: --policy must be seed or device, not '%s'\n", policy);
        return 2;
    }
    if (!model == !have_shape || (have_shape && (!m || !n || !k))) {
        fprintf(stderr, "qmm plan: give either --model NAME or all of --m M --n N --k K\n");
        return EXIT_USAGE;
    }
    if (have_shape) return device ? device_plans(NULL, NULL, 0, m, n, k) : seed_shape(m, n, k);
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (!strcmp(model, models[i].name))
            return device ? device_plans(&models[i], tokens, nt, 0, 0, 0)
                          : seed_model(&models[i], tokens, nt);
    fprintf(stderr, "qmm plan: unknown model '%s' (qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b)\n",
            model);
    return 2;
}
