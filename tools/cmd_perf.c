/* qmm perf — the performance model's tables (include/qmm_perf.h):
 *   qmm perf schedule ...   pipeline schedules of three engines, with a text Gantt chart
 *   qmm perf splitk ...     split-K waves: the wave-count model beside the refined model */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "cli.h"
#include "qmm.h"

#define MAX_LIST 64

/* ---- argument helpers ---------------------------------------------------------------------- */

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno) return 0;
    *out = v;
    return 1;
}

static int parse_int(const char *s, int *out)
{
    int64_t v;
    if (!parse_i64(s, &v) || v < -2147483647 || v > 2147483647) return 0;
    *out = (int)v;
    return 1;
}

static int parse_f64(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

static int is_known(const char *o, const char *const *known)
{
    for (int i = 0; known[i]; i++)
        if (!strcmp(o, known[i])) return 1;
    return 0;
}

/* "1,2,3" or "1-16" or a mix ("1,4,6-8"), each >= 1; returns the count, 0 on a bad list. */
static int parse_list(const char *s, int *out, int cap)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p) return 0;
        if (*end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
            if (end == p) return 0;
        }
        if (lo < 1 || hi < lo || hi > 1000000) return 0;
        for (long v = lo; v <= hi; v++) {
            if (n == cap) return 0;
            out[n++] = (int)v;
        }
        if (*end == ',') end++;
        else if (*end) return 0;
        p = end;
    }
    return n;
}

static int bad_value(const char *opt, const char *val)
{
    fprintf(stderr, "qmm perf: bad value '%s' for %s\n", val, opt);
    return 2;
}

/* ---- qmm perf schedule -------------------------------------------------------------------- */

static void schedule_usage(FILE *f)
{
    fprintf(f,
            "usage: qmm perf schedule [--load T] [--compute T] [--store T] [--tiles N]\n"
            "                          [--buffers LIST] [--jitter J --seed S] [--width COLS]\n"
            "                          [--segments] [--no-gantt]\n\n"
            "Simulates three in-order engines (copy in, compute, copy out) over N tiles with\n"
            "b buffers, event by event, for each b in LIST, and prints the total beside the\n"
            "closed form (b = 1: n(l+c)+s; b >= 2: l + n*max + s), each engine's\n"
            "busy / idle / stall time, and a Gantt chart (tile digits where an engine works,\n"
            "'.' where it waits).\n\n"
            "  --load, --compute, --store T  per-tile times (default 2, 3, 1: the textbook\n"
            "                                compute-heavy case; 3, 1.5, 1 is its copy-heavy one)\n"
            "  --tiles N                     tiles (default 6)\n"
            "  --buffers LIST                buffer counts, e.g. 1,2,3 or 1-4 (default 1,2,3)\n"
            "  --jitter J                    per-tile times t*(1 + J*u), u uniform in [-1, 1),\n"
            "                                0 <= J < 1 (default 0: constant times)\n"
            "  --seed S                      seed of the jitter (default 8)\n"
            "  --width COLS                  chart width in columns (default 80)\n"
            "  --segments                    also print every segment's start and end\n"
            "  --no-gantt                    table only\n");
}

static void print_ruler(double dt, int cols)
{
    char line[1100];
    int len = cols < 1000 ? cols : 1000;
    memset(line, ' ', (size_t)len + 60);
    int last = -1;
    for (int c = 0; c < len; c += 10) {
        char lab[32];
        int w = snprintf(lab, sizeof lab, "%.4g", c * dt);
        if (c <= last) continue;
        memcpy(line + c, lab, (size_t)w);
        last = c + w;
    }
    int end = last > len ? last : len;
    line[end] = 0;
    while (end > 0 && line[end - 1] == ' ') line[--end] = 0;
    printf("  %-8s %s\n", "time", line);
}

static int schedule_main(int argc, char **argv)
{
    double base[QMM_MODEL_ENGINES] = {2, 3, 1}, jitter = 0;
    int tiles = 6, width = 80, segments = 0, gantt = 1;
    int bufs[MAX_LIST] = {1, 2, 3}, nbufs = 3;
    int64_t seed = 8;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            schedule_usage(stdout);
            return 0;
        }
        if (!strcmp(o, "--segments")) { segments = 1; continue; }
        if (!strcmp(o, "--no-gantt")) { gantt = 0; continue; }
        static const char *const known[] = {"--load", "--compute", "--store", "--tiles",
                                            "--buffers", "--jitter", "--seed", "--width", NULL};
        if (!is_known(o, known)) return cli_unknown("model schedule", o);
        if (i + 1 >= argc) {
            fprintf(stderr, "qmm perf schedule: %s needs a value\n", o);
            return 2;
        }
        const char *v = argv[++i];
        int ok;
        if (!strcmp(o, "--load")) ok = parse_f64(v, &base[QMM_ENGINE_LOAD]);
        else if (!strcmp(o, "--compute")) ok = parse_f64(v, &base[QMM_ENGINE_COMPUTE]);
        else if (!strcmp(o, "--store")) ok = parse_f64(v, &base[QMM_ENGINE_STORE]);
        else if (!strcmp(o, "--tiles")) ok = parse_int(v, &tiles) && tiles >= 1 && tiles <= 100000;
        else if (!strcmp(o, "--buffers")) ok = (nbufs = parse_list(v, bufs, MAX_LIST)) > 0;
        else if (!strcmp(o, "--jitter")) ok = parse_f64(v, &jitter);
        else if (!strcmp(o, "--seed")) ok = parse_i64(v, &seed);
        else if (!strcmp(o, "--width")) ok = parse_int(v, &width) && width >= 10 && width <= 1000;
        else {
            fprintf(stderr, "qmm perf schedule: unknown option %s\n", o);
            schedule_usage(stderr);
            return 2;
        }
        if (!ok) return bad_value(o, v);
    }

    size_t count = (size_t)3 * tiles;
    double *times = malloc(count * sizeof *times);
    qmm_model_segment *seg = malloc((size_t)nbufs * count * sizeof *seg);
    qmm_model_schedule *res = malloc((size_t)nbufs * sizeof *res);
    int rc = 2; /* out of memory or a model error: environment or usage */
    if (!times || !seg || !res) {
        fprintf(stderr, "qmm perf schedule: out of memory\n");
        goto done;
    }
    qmm_model_pipeline p = {tiles, 1, {base[0], base[1], base[2]}, {NULL, NULL, NULL}};
    if (jitter > 0) {
        if (qmm_model_jitter_times(base, tiles, jitter, (uint64_t)seed, times, count) != QMM_OK) {
            fprintf(stderr, "qmm perf schedule: %s\n", qmm_last_error());
            rc = 2;
            goto done;
        }
        for (int e = 0; e < QMM_MODEL_ENGINES; e++) p.per_tile[e] = times + (size_t)e * tiles;
    }
    double longest = 0;
    for (int j = 0; j < nbufs; j++) {
        p.buffers = bufs[j];
        if (qmm_model_schedule_run(&p, seg + (size_t)j * count, count, &res[j]) != QMM_OK) {
            fprintf(stderr, "qmm perf schedule: %s\n", qmm_last_error());
            rc = 2;
            goto done;
        }
        if (res[j].total > longest) longest = res[j].total;
    }

    printf("pipeline: %d tiles, load %g, compute %g, store %g", tiles, base[0], base[1], base[2]);
    if (jitter > 0)
        printf(" (each time x (1 + %g*u), u uniform in [-1, 1), seed %lld)\n", jitter,
               (long long)seed);
    else
        printf(" (constant times)\n");
    printf("\n%7s %10s %11s  %-18s %-18s %-26s %s\n", "buffers", "simulated", "closed-form",
           "closed vs sim", "load busy/idle", "compute busy/idle/stall", "store busy/idle");
    for (int j = 0; j < nbufs; j++) {
        const qmm_model_schedule *r = &res[j];
        char note[32] = "equal";
        if (!r->closed_form_exact)
            snprintf(note, sizeof note, "differs by %+.3g", r->closed_form - r->total);
        char l[64], c[96], s[64];
        snprintf(l, sizeof l, "%.4g / %.4g", r->busy[0], r->idle[0]);
        snprintf(c, sizeof c, "%.4g / %.4g / %.4g", r->busy[1], r->idle[1], r->stall[1]);
        snprintf(s, sizeof s, "%.4g / %.4g", r->busy[2], r->idle[2]);
        printf("%7d %10.6g %11.6g  %-18s %-18s %-26s %s\n", bufs[j], r->total, r->closed_form,
               note, l, c, s);
    }
    for (int j = 1; j < nbufs; j++)
        if (res[j].total < res[0].total)
            printf("speed-up of %d buffers over %d: %.3f\n", bufs[j], bufs[0],
                   res[0].total / res[j].total);
    printf("(closed form: b = 1: n(l+c)+s; b >= 2: l + n*max(l,c,s) + s, from the engine means;\n"
           " exact when compute is the slowest engine and times are constant; off when a copy\n"
           " engine sets the pace or the times vary)\n");

    if (segments)
        for (int j = 0; j < nbufs; j++) {
            const qmm_model_segment *sg = seg + (size_t)j * count;
            printf("\nsegments, %d buffer%s:\n  tile %17s %17s %17s\n", bufs[j],
                   bufs[j] == 1 ? "" : "s", "load", "compute", "store");
            for (int i = 0; i < tiles; i++) {
                printf("  %4d", i);
                for (int e = 0; e < QMM_MODEL_ENGINES; e++)
                    printf("  %7.4g - %-7.4g", sg[e * tiles + i].start, sg[e * tiles + i].end);
                printf("\n");
            }
        }

    if (gantt && longest > 0) {
        /* Whole columns per time unit when the run fits, so integer times stay readable. */
        double dt = longest <= width ? 1.0 / floor(width / longest) : longest / width;
        size_t cap = (size_t)3 * ((size_t)width + 2) + 1;
        char *buf = malloc(cap);
        if (!buf) {
            fprintf(stderr, "qmm perf schedule: out of memory\n");
            goto done;
        }
        for (int j = 0; j < nbufs; j++) {
            int cols = (int)ceil(res[j].total / dt - 1e-9);
            if (cols < 1) cols = 1;
            if (cols > width + 1) cols = width + 1;
            if (qmm_model_gantt(seg + (size_t)j * count, tiles, dt, cols, buf, cap) != QMM_OK) {
                fprintf(stderr, "qmm perf schedule: %s\n", qmm_last_error());
                free(buf);
                goto done;
            }
            printf("\n%d buffer%s: total %.6g (one column = %.4g)\n", bufs[j],
                   bufs[j] == 1 ? "" : "s", res[j].total, dt);
            const char *row = buf;
            for (int e = 0; e < QMM_MODEL_ENGINES; e++) {
                const char *nl = strchr(row, '\n');
                printf("  %-8s %.*s\n", qmm_model_engine_name(e), (int)(nl - row), row);
                row = nl + 1;
            }
            print_ruler(dt, cols);
        }
        free(buf);
    }
    rc = 0;
done:
    free(times);
    free(seg);
    free(res);
    return rc;
}

/* ---- qmm perf splitk ---------------------------------------------------------------------- */

static void splitk_usage(FILE *f)
{
    fprintf(f,
            "usage: qmm perf splitk [--gpu NAME] [--m M --n N --k K] [--splits LIST]\n"
            "                        [--model NAME --tokens M] [kernel options]\n\n"
            "Split-K waves for C[M, N] = A[M, K] . W[N, K]^T. For one shape: a table per split\n"
            "with the wave-count model (tiles = ceil(M/bm)*ceil(N/bn), waves = ceil(tiles*s/SMs),\n"
            "compute by waves + 8*M*N*s bytes of fp32 partials) beside the refined model\n"
            "(max(compute, operand floor) + launch + partials + reduce launch), best of each\n"
            "marked '*', then a Stream-K estimate. With --model: the best group-aligned split\n"
            "of each projection at M = --tokens.\n\n"
            "  --gpu NAME          a100, h100, h200, h200-measured (default h200)\n"
            "  --m, --n, --k       shape (default 512, 512, 16384: a long-K example)\n"
            "  --splits LIST       splits to tabulate, e.g. 1,4,6,7,12 or 1-16 (default 1-16)\n"
            "  --bm, --bn          wave-count model tile (default 128, 128)\n"
            "  --model NAME        the seven projections of qwen3-0.6b, qwen3-1.7b, qwen3-4b,\n"
            "                      qwen3-8b, qwen3-14b or qwen3-32b (W4 weights)\n"
            "  --tokens M          rows M for --model (default 32)\n"
            "  --max-split S       largest split the searches try (default 16)\n"
            "  --align A           --model: splits keep K %% (s*A) == 0 (default 128; 0 = any)\n"
            "refined model kernel (defaults: preset 'document' for a shape, 'w4' for --model):\n"
            "  --kernel NAME       document (the wave-count model's kernel: 128x128, bf16 W, fp32 partials, efficiency 1) or\n"
            "                      w4 (64x64, W4 at 0.53125 B/weight, bf16 partials,\n"
            "                      efficiency 0.5)\n"
            "  --tile-m, --tile-n  refined model tile\n"
            "  --tile-k K          K per main-loop iteration (Stream-K work unit)\n"
            "  --blocks-per-sm B   resident blocks per SM\n"
            "  --efficiency F      achievable fraction of peak, (0, 1]\n"
            "  --weights bf16|w4   weight bytes: 2 or 0.53125 per weight\n"
            "  --partials bf16|f32 partial plane type\n"
            "  --launch-us T       per-kernel launch overhead (GPU preset: 2)\n"
            "  --fixup-us T        Stream-K fixup cost per partial\n");
}

static void print_gpu_kernel(const qmm_gpu_caps *g, const qmm_model_kernel *kn)
{
    printf("gpu %s: %d SMs, %g TFLOP/s, %g TB/s, launch %g us\n", g->name, g->sms,
           g->peak_tflops, g->bandwidth_tbs, g->launch_us);
    printf("refined kernel: tile %dx%d (k %d), %d block%s/SM, efficiency %g, A %g B, W %g B, "
           "C %g B per element, %s partials, fixup %g us\n",
           kn->tile_m, kn->tile_n, kn->tile_k, kn->blocks_per_sm,
           kn->blocks_per_sm == 1 ? "" : "s", kn->compute_efficiency, kn->a_bytes_per_elem,
           kn->weight_bytes_per_elem, kn->c_bytes_per_elem,
           kn->partial_type == QMM_F32 ? "f32" : "bf16", kn->fixup_us);
}

static int fail_model(void)
{
    fprintf(stderr, "qmm perf splitk: %s\n", qmm_last_error());
    return 2;
}

static void print_streamk(const qmm_model_estimate *e)
{
    printf("Stream-K (refined kernel): %.2f us = max(compute %.2f, memory %.2f) + launch %.2f + "
           "fixup %.2f; %lld workers, %lld of %lld tiles split, longest fixup chain %lld\n",
           e->total_us, e->compute_us, e->memory_us, e->launch_us, e->reduction_us,
           (long long)e->blocks, (long long)e->split_tiles, (long long)e->tiles,
           (long long)e->max_peers);
}

// a is [M, K], w is [N, K]: one table row per split
static int splitk_shape(const qmm_gpu_caps *g, const qmm_model_kernel *kn, int64_t m, int64_t n,
                        int64_t k, int bm, int bn, const int *splits, int count, int max_split)
{
    qmm_model_estimate doc[MAX_LIST], ref[MAX_LIST];
    int best_doc = 0, best_ref = 0;
    for (int i = 0; i < count; i++) {
        if (qmm_model_splitk_document(g, m, n, k, bm, bn, splits[i], &doc[i]) != QMM_OK ||
            qmm_model_splitk_refined(g, kn, m, n, k, splits[i], &ref[i]) != QMM_OK)
            return fail_model();
        if (doc[i].total_us < doc[best_doc].total_us) best_doc = i;
        if (ref[i].total_us < ref[best_ref].total_us) best_ref = i;
    }
    print_gpu_kernel(g, kn);
    printf("shape M=%lld N=%lld K=%lld; document tile %dx%d\n\n", (long long)m, (long long)n,
           (long long)k, bm, bn);
    printf("%6s | %-30s | %s\n", "", "document model", "refined model (us)");
    printf("%6s | %6s %5s %10s   | %6s %5s %8s %8s %8s %7s %9s\n", "splits", "blocks", "waves",
           "time us", "blocks", "waves", "compute", "memory", "reduce", "launch", "total");
    for (int i = 0; i < count; i++)
        printf("%6d | %6lld %5lld %10.2f %s | %6lld %5lld %8.2f %8.2f %8.2f %7.2f %9.2f%s\n",
               splits[i], (long long)doc[i].blocks, (long long)doc[i].waves, doc[i].total_us,
               i == best_doc ? "*" : " ", (long long)ref[i].blocks, (long long)ref[i].waves,
               ref[i].compute_us, ref[i].memory_us, ref[i].reduction_us, ref[i].launch_us,
               ref[i].total_us, i == best_ref ? " *" : "");
    printf("\nmemory floor: A %.3g + W %.3g + C %.3g = %.4g MB over %g TB/s = %.2f us "
           "(the document model ignores it)\n",
           (double)m * k * kn->a_bytes_per_elem / 1e6,
           (double)n * k * kn->weight_bytes_per_elem / 1e6,
           (double)m * n * kn->c_bytes_per_elem / 1e6, ref[0].operand_bytes / 1e6,
           g->bandwidth_tbs, ref[0].memory_us);
    qmm_model_estimate bd, br, sk;
    if (qmm_model_best_split_document(g, m, n, k, bm, bn, max_split, &bd) != QMM_OK ||
        qmm_model_best_split(g, kn, m, n, k, max_split, 0, &br) != QMM_OK ||
        qmm_model_streamk(g, kn, m, n, k, &sk) != QMM_OK)
        return fail_model();
    printf("best over s = 1..%d: document s = %d (%lld blocks, %lld wave%s, %.2f us); "
           "refined s = %d (%.2f us)\n",
           max_split, bd.split, (long long)bd.blocks, (long long)bd.waves,
           bd.waves == 1 ? "" : "s", bd.total_us, br.split, br.total_us);
    print_streamk(&sk);
    return 0;
}

static int splitk_model(const qmm_gpu_caps *g, const qmm_model_kernel *kn, const char *model,
                        int64_t m, int max_split, int align)
{
    qmm_llm_config cfg; /* the engine's presets: the same shapes as qmm plan and qmm run */
    if (qmm_llm_config_preset(model, &cfg)) {
        fprintf(stderr, "qmm perf splitk: unknown model '%s' (qwen3-0.6b, qwen3-1.7b, qwen3-4b, "
                "qwen3-8b, qwen3-14b, qwen3-32b)\n", model);
        return 2;
    }
    print_gpu_kernel(g, kn);
    printf("%s projections at M = %lld tokens; splits 1..%d", model, (long long)m, max_split);
    if (align > 0) printf(" with K %% (s*%d) == 0", align);
    printf("\n\n%-5s %12s %6s %9s | %5s %6s %5s %9s %8s %-6s | %8s | %9s\n", "proj", "K->N",
           "tiles", "s=1 us", "best", "blocks", "waves", "best us", "memory", "bound", "doc s",
           "stream-k");
    double sum1 = 0, sumb = 0, sumk = 0;
    for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
        int64_t k, n;
        qmm_llm_linear_shape(&cfg, (qmm_llm_linear)i, &n, &k);
        qmm_model_estimate one, best, doc, sk;
        if (qmm_model_splitk_refined(g, kn, m, n, k, 1, &one) != QMM_OK ||
            qmm_model_best_split(g, kn, m, n, k, max_split, align, &best) != QMM_OK ||
            qmm_model_best_split_document(g, m, n, k, kn->tile_m, kn->tile_n, max_split, &doc) !=
                QMM_OK ||
            qmm_model_streamk(g, kn, m, n, k, &sk) != QMM_OK)
            return fail_model();
        char shape[32];
        snprintf(shape, sizeof shape, "%lld->%lld", (long long)k, (long long)n);
        printf("%-5s %12s %6lld %9.2f | %5d %6lld %5lld %9.2f %8.2f %-6s | %8d | %9.2f\n",
               qmm_llm_linear_name((qmm_llm_linear)i), shape, (long long)one.tiles, one.total_us, best.split,
               (long long)best.blocks, (long long)best.waves, best.total_us, best.memory_us,
               best.memory_bound ? "memory" : "comp", doc.split, sk.total_us);
        sum1 += one.total_us;
        sumb += best.total_us;
        sumk += sk.total_us;
    }
    printf("\none layer's seven projections: unsplit %.2f us, best split %.2f us, "
           "Stream-K %.2f us\n", sum1, sumb, sumk);
    printf("(refined model; 'doc s' is the document model's best split with the same tile, "
           "any s)\n");
    return 0;
}

static int set_bytes_type(const char *v, double *bytes)
{
    if (!strcmp(v, "bf16")) *bytes = 2.0;
    else if (!strcmp(v, "w4")) *bytes = 0.53125;
    else return 0;
    return 1;
}

static int splitk_main(int argc, char **argv)
{
    const char *gpu_name = "h200", *model = NULL, *kernel_name = NULL;
    int64_t m = 512, n = 512, k = 16384, tokens = 32;
    int bm = 128, bn = 128, max_split = 16, align = QMM_GROUP;
    int splits[MAX_LIST], nsplits = 0;
    /* Kernel overrides, applied after the preset; < 0 / NULL: keep the preset's value. */
    int tile_m = -1, tile_n = -1, tile_k = -1, bps = -1;
    double eff = -1, wbytes = -1, launch = -1, fixup = -1;
    const char *partials = NULL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            splitk_usage(stdout);
            return 0;
        }
        static const char *const known[] = {
            "--gpu", "--model", "--kernel", "--m", "--n", "--k", "--tokens", "--splits", "--bm",
            "--bn", "--max-split", "--align", "--tile-m", "--tile-n", "--tile-k",
            "--blocks-per-sm", "--efficiency", "--weights", "--partials", "--launch-us",
            "--fixup-us", NULL};
        if (!is_known(o, known)) return cli_unknown("model splitk", o);
        if (i + 1 >= argc) {
            fprintf(stderr, "qmm perf splitk: %s needs a value\n", o);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1;
        if (!strcmp(o, "--gpu")) gpu_name = v;
        else if (!strcmp(o, "--model")) model = v;
        else if (!strcmp(o, "--kernel")) kernel_name = v;
        else if (!strcmp(o, "--m")) ok = parse_i64(v, &m);
        else if (!strcmp(o, "--n")) ok = parse_i64(v, &n);
        else if (!strcmp(o, "--k")) ok = parse_i64(v, &k);
        else if (!strcmp(o, "--tokens")) ok = parse_i64(v, &tokens);
        else if (!strcmp(o, "--splits")) ok = (nsplits = parse_list(v, splits, MAX_LIST)) > 0;
        else if (!strcmp(o, "--bm")) ok = parse_int(v, &bm);
        else if (!strcmp(o, "--bn")) ok = parse_int(v, &bn);
        else if (!strcmp(o, "--max-split")) ok = parse_int(v, &max_split) && max_split <= 4096;
        else if (!strcmp(o, "--align")) ok = parse_int(v, &align);
        else if (!strcmp(o, "--tile-m")) ok = parse_int(v, &tile_m);
        else if (!strcmp(o, "--tile-n")) ok = parse_int(v, &tile_n);
        else if (!strcmp(o, "--tile-k")) ok = parse_int(v, &tile_k);
        else if (!strcmp(o, "--blocks-per-sm")) ok = parse_int(v, &bps);
        else if (!strcmp(o, "--efficiency")) ok = parse_f64(v, &eff);
        else if (!strcmp(o, "--weights")) ok = set_bytes_type(v, &wbytes);
        else if (!strcmp(o, "--partials")) ok = !strcmp(v, "bf16") || !strcmp(v, "f32");
        else if (!strcmp(o, "--launch-us")) ok = parse_f64(v, &launch);
        else if (!strcmp(o, "--fixup-us")) ok = parse_f64(v, &fixup);
        else {
            fprintf(stderr, "qmm perf splitk: unknown option %s\n", o);
            splitk_usage(stderr);
            return 2;
        }
        if (!ok) return bad_value(o, v);
        if (!strcmp(o, "--partials")) partials = v;
    }

    qmm_gpu_caps g;
    qmm_model_kernel kn;
    if (qmm_model_gpu_preset(gpu_name, &g) != QMM_OK ||
        qmm_model_kernel_preset(kernel_name ? kernel_name : model ? "w4" : "document", &kn) !=
            QMM_OK)
        return fail_model();
    if (tile_m >= 0) kn.tile_m = tile_m;
    if (tile_n >= 0) kn.tile_n = tile_n;
    if (tile_k >= 0) kn.tile_k = tile_k;
    if (bps >= 0) kn.blocks_per_sm = bps;
    if (eff >= 0) kn.compute_efficiency = eff;
    if (wbytes >= 0) kn.weight_bytes_per_elem = wbytes;
    if (partials) kn.partial_type = strcmp(partials, "f32") ? QMM_BF16 : QMM_F32;
    if (launch >= 0) g.launch_us = launch;
    if (fixup >= 0) kn.fixup_us = fixup;

    if (model) return splitk_model(&g, &kn, model, tokens, max_split, align);
    if (nsplits == 0)
        for (nsplits = 0; nsplits < 16; nsplits++) splits[nsplits] = nsplits + 1;
    return splitk_shape(&g, &kn, m, n, k, bm, bn, splits, nsplits, max_split);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static void model_usage(FILE *f)
{
    fprintf(f, "usage: qmm perf <schedule|splitk|tp> [options]   (--help on each)\n"
               "  schedule   copy/compute/store pipeline: totals per buffer count, Gantt chart\n"
               "  splitk     split-K waves: wave-count model and refined model, best split;\n"
               "             a Qwen3 model's projections with --model qwen3-4b --tokens M\n"
               "  tp         decode under tensor parallelism, t = 1, 2, 4, 8 (a prediction)\n");
}

int cmd_perf(int argc, char **argv)
{
    if (argc < 2) {
        model_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        model_usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "schedule")) return schedule_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "splitk")) return splitk_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "tp")) return cmd_perf_tp(argc - 1, argv + 1);
    fprintf(stderr, "qmm perf: unknown subcommand '%s'\n", argv[1]);
    model_usage(stderr);
    return 2;
}
