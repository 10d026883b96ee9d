/* `qmm bench ops` command-line arguments: defaults, parsing, usage. Pure (no CUDA). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ops.h"

#define QWEN3_COUNT QMM_LLM_LINEAR_COUNT

/* The seven projections of a Qwen3-4B layer (K in_features → N out_features). */
static int qwen3_4b(bench_shape out[QWEN3_COUNT])
{
    bench_proj p[QWEN3_COUNT];
    if (bench_projections("qwen3-4b", p) != QWEN3_COUNT) return 0;
    for (int i = 0; i < QWEN3_COUNT; i++) {
        snprintf(out[i].name, sizeof out[i].name, "%.15s", p[i].name);
        out[i].k = p[i].k, out[i].n = p[i].n;
    }
    return QWEN3_COUNT;
}

/* powers of two, and 33, 100 and 200: real prompt lengths leave the last token tile partly
 * empty, which the powers of two never show (NOTES.md rows 200, 203) */
static const int64_t default_ms[] = {1, 2, 4, 8, 16, 32, 33, 64, 100, 128, 200, 256, 512, 1024, 2048};

void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: qmm bench ops [options]\n"
            "Times every Qwen3-4B projection over M beside cuBLAS bf16 and qmm's own paths, each\n"
            "checked against the CPU reference first (DESIGN.md §8). Markdown table on stdout.\n\n"
            "  --proj LIST        projections among q,k,v,o,gate,up,down (default all; 'none')\n"
            "  --shape K,N        an extra shape, repeatable; given without --proj, only these run\n"
            "  --m LIST           M values (default 1,2,4,8,16,32,33,64,100,128,200,256,512,\n"
            "                     1024,2048)\n"
            "  --calls N          at least N calls per graph (default 20; raised so a replay\n"
            "                     lasts >= --target-us and covers every weight copy)\n"
            "  --reps N           timed replays and eager batches (default 9, at least 7)\n"
            "  --target-us X      shortest graph replay, µs (default 50)\n"
            "  --hot              time one weight copy (L2-hot) instead of rotating cold copies\n"
            "  --stages           also time the tiled kernel at pipeline stages 1, 2, 3, 4\n"
            "  --group LIST       weight group sizes among 32,64,128 (default 128); each shape runs\n"
            "                     at each, the others named e.g. q-g64 beside q\n"
            "  --no-ceilings      skip measuring copy bandwidth and cuBLAS 8192^3; use the\n"
            "                     DESIGN defaults (4200 GB/s, 720 TFLOP/s) for the %% columns\n"
            "  --device N         CUDA device (default 0)\n"
            "  --seed N           random data seed (default: fresh, printed)\n"
            "  --max-copies-mb X  device memory cap per family of weight copies (default 1024)\n"
            "  --threads N        CPU reference threads (default: all cores)\n"
            "  --policy P         plan policy of the auto contender: device (default) or seed\n"
            "  --model-bps N      resident blocks per SM for the model (default: qmm_cuda_info)\n"
            "  --out FILE.md      also write the markdown report here\n"
            "  --csv FILE         write every contender as CSV (metadata in '#' lines)\n"
            "  --json FILE        write metadata, ceilings, results and the model fit as JSON\n"
            "  --commit STR       git commit to record (default: env QMM_COMMIT)\n");
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_f64(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

/* "1,2,4" -> ms[]; every M in [1, 1<<20]. */
static int parse_m_list(const char *s, bench_opts *o)
{
    char buf[512];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    o->m_count = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->m_count == BENCH_MAX_MS) return -1;
        if (parse_i64(t, 1, (int64_t)1 << 20, &o->ms[o->m_count])) return -1;
        o->m_count++;
    }
    return o->m_count > 0 ? 0 : -1;
}

/* "q,k" -> the chosen projections appended in the canonical order; "none" -> none. */
static int parse_proj_list(const char *s, int *want)
{
    if (!strcmp(s, "none")) return 0;
    bench_shape qwen[QWEN3_COUNT];
    if (!qwen3_4b(qwen)) return -1;
    char buf[256];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < QWEN3_COUNT; i++)
            if (!strcmp(t, qwen[i].name)) want[i] = found = 1;
        if (!found) {
            fprintf(stderr, "qmm bench ops: unknown projection '%s' (q,k,v,o,gate,up,down)\n", t);
            return -1;
        }
    }
    return 0;
}

/* "K,N" -> a shape named "KxN"; K a multiple of 128. */
static int parse_shape(const char *s, bench_shape *sh)
{
    char buf[64];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    char *comma = strchr(buf, ',');
    if (!comma) return -1;
    *comma = '\0';
    int64_t k, n;
    if (parse_i64(buf, 128, (int64_t)1 << 20, &k) || parse_i64(comma + 1, 1, (int64_t)1 << 20, &n))
        return -1;
    if (k % QMM_GROUP) {
        fprintf(stderr, "qmm bench ops: --shape K = %lld is not a multiple of 128\n", (long long)k);
        return -1;
    }
    snprintf(sh->name, sizeof sh->name, "%lldx%lld", (long long)k, (long long)n);
    sh->k = k;
    sh->n = n;
    return 0;
}

static void set_defaults(bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->m_count = (int)(sizeof default_ms / sizeof default_ms[0]);
    memcpy(o->ms, default_ms, sizeof default_ms);
    o->calls = 20;
    o->reps = 9;
    o->target_replay_us = 50.0;
    o->measure_ceilings = 1;
    o->max_copies_mb = 1024.0;
    o->policy = QMM_POLICY_DEVICE;
    o->groups[0] = QMM_GROUP;
    o->group_count = 1;
}

/* "64,128" -> groups[] in the given order, each of 32, 64, 128 once. */
static int parse_group_list(const char *s, bench_opts *o)
{
    char buf[64];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    o->group_count = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t g;
        if (parse_i64(t, 32, 128, &g) || !QMM_GROUP_OK(g) || o->group_count == 3) return -1;
        for (int i = 0; i < o->group_count; i++)
            if (o->groups[i] == g) return -1;
        o->groups[o->group_count++] = (int)g;
    }
    return o->group_count > 0 ? 0 : -1;
}

int bench_parse_args(int argc, char **argv, bench_opts *o)
{
    set_defaults(o);
    int want[QWEN3_COUNT] = {0};
    int proj_given = 0;
    bench_shape extra[BENCH_MAX_SHAPES];
    int extra_count = 0;
    /* the numeric options: their range and where the value goes (an int or a double) */
    const struct {
        const char *flag;
        double lo, hi;
        int *i;
        double *d;
    } nums[] = {
        {"--calls", 1, 100000, &o->calls, NULL},
        {"--reps", BENCH_MIN_REPS, 10000, &o->reps, NULL},
        {"--target-us", 1.0, 1e6, NULL, &o->target_replay_us},
        {"--device", 0, 1024, &o->device, NULL},
        {"--max-copies-mb", 1.0, 1e7, NULL, &o->max_copies_mb},
        {"--threads", 0, 4096, &o->cpu_threads, NULL},
        {"--model-bps", 1, 64, &o->model_blocks_per_sm, NULL},
    };

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t iv;
        int bad = 0, takes_value = 1, num = -1;
        for (int j = 0; j < (int)(sizeof nums / sizeof nums[0]); j++)
            if (!strcmp(a, nums[j].flag)) num = j;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            bench_usage(stdout);
            return 1;
        } else if (!strcmp(a, "--hot")) {
            o->hot = 1, takes_value = 0;
        } else if (!strcmp(a, "--stages")) {
            o->stages_sweep = 1, takes_value = 0;
        } else if (!strcmp(a, "--no-ceilings")) {
            o->measure_ceilings = 0, takes_value = 0;
        } else if (!v) {
            fprintf(stderr, "qmm bench ops: %s needs a value (or is unknown; see --help)\n", a);
            return -1;
        } else if (!strcmp(a, "--proj")) {
            proj_given = 1;
            bad = parse_proj_list(v, want);
        } else if (!strcmp(a, "--shape")) {
            bad = extra_count == BENCH_MAX_SHAPES - QWEN3_COUNT || parse_shape(v, &extra[extra_count]);
            if (!bad) extra_count++;
        } else if (!strcmp(a, "--m")) {
            bad = parse_m_list(v, o);
        } else if (!strcmp(a, "--group")) {
            bad = parse_group_list(v, o);
        } else if (num >= 0 && nums[num].d) {
            bad = parse_f64(v, nums[num].lo, nums[num].hi, nums[num].d);
        } else if (num >= 0) {
            bad = parse_i64(v, (int64_t)nums[num].lo, (int64_t)nums[num].hi, &iv);
            if (!bad) *nums[num].i = (int)iv;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 0);
            bad = errno || end == v || *end;
            o->seed = s;
            o->seed_given = 1;
        } else if (!strcmp(a, "--policy")) {
            if (!strcmp(v, "device")) o->policy = QMM_POLICY_DEVICE;
            else if (!strcmp(v, "seed")) o->policy = QMM_POLICY_SEED;
            else bad = 1;
        } else if (!strcmp(a, "--out")) {
            o->out_md = v;
        } else if (!strcmp(a, "--csv")) {
            o->out_csv = v;
        } else if (!strcmp(a, "--json")) {
            o->out_json = v;
        } else if (!strcmp(a, "--commit")) {
            o->commit = v;
        } else {
            fprintf(stderr, "qmm bench ops: unknown option '%s' (see --help)\n", a);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "qmm bench ops: bad value '%s' for %s (see --help)\n", v ? v : "", a);
            return -1;
        }
        if (takes_value) i++;
    }

    /* Projections: all by default; with --shape and no --proj, only the given shapes. */
    o->shape_count = 0;
    bench_shape qwen[QWEN3_COUNT];
    if (!qwen3_4b(qwen)) return -1;
    for (int i = 0; i < QWEN3_COUNT; i++)
        if (proj_given ? want[i] : extra_count == 0) o->shapes[o->shape_count++] = qwen[i];
    for (int i = 0; i < extra_count; i++) o->shapes[o->shape_count++] = extra[i];
    if (o->shape_count == 0) {
        fprintf(stderr, "qmm bench ops: no shapes selected\n");
        return -1;
    }
    /* each shape at each group size, side by side: q, q-g64, k, k-g64, ... */
    if (o->shape_count * o->group_count > BENCH_MAX_SHAPES) {
        fprintf(stderr, "qmm bench ops: %d shapes x %d group sizes: at most %d cases\n",
                o->shape_count, o->group_count, BENCH_MAX_SHAPES);
        return -1;
    }
    bench_shape base[BENCH_MAX_SHAPES];
    int nb = o->shape_count;
    memcpy(base, o->shapes, sizeof base);
    o->shape_count = 0;
    for (int i = 0; i < nb; i++)
        for (int g = 0; g < o->group_count; g++) {
            bench_shape *sh = &o->shapes[o->shape_count++];
            *sh = base[i];
            sh->group = o->groups[g];
            if (sh->group != QMM_GROUP) {
                size_t len = strlen(sh->name);
                if (len + 5 >= sizeof sh->name) len = sizeof sh->name - 6; /* room for "-g64" */
                snprintf(sh->name + len, sizeof sh->name - len, "-g%d", sh->group);
            }
        }
    return 0;
}
