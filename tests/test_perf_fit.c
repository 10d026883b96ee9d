/* The shipped H200 description's predictions and plans against measured H200 cells (issue 11:
 * the model within 15 % on >= 80 % of cells, the plan within 5 % of the best measured
 * configuration on >= 95 %). Reads the committed bench results (QMM_SOURCE_DIR): the
 * twenty-fifth session's final build, `r2-final/ops_final.csv` — every contender of the five
 * Qwen3-4B projections at M = 1, 8, 9, 16, 128, 256, 384, 512, 1024, 2048 (32 and 64 are left
 * out: their tiles or plans changed since, see `fit_run`) (the wgmma model's constants were
 * fitted to the seventeenth session's run of the same cells with five other shapes, NOTES.md row
 * 119, all but wide_kblock_us, row 161; the matvec's and the dense path's to medians over runs
 * that include this one, row 165) — and the same build's second pass `r2-final/ops_new2.csv`
 * (M = 9..2048), a check of the runs' noise. Those runs' stream-K rows of the 256-token tile with
 * more tiles than CTAs ran the schedule before row 162 (no whole-tile first part): five forced
 * cells, no auto cell but gate at M = 1024. Beside them, session 43's H200 run at M = 1…2048
 * (17-48 and 64 included) of 8f893c9, before rows 217 and 219 (its k at 17-64 tokens 3-5 %
 * slower than today's kernel, its gate at 49-64 from the build of row 219's plan), and session
 * 42's H100 run.
 * Each cell is planned again and its prediction compared with the measurement of that schedule
 * (the auto row, or the forced contender that ran the same schedule, or the "wgmma" contender,
 * the wgmma family's own plan, where it ran it); a schedule nobody measured
 * counts as a miss. The tables are printed; a description with its model constants scaled must
 * fail the criterion. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "plan.h"

#ifndef QMM_SOURCE_DIR
#define QMM_SOURCE_DIR "."
#endif
#define RUN QMM_SOURCE_DIR "/bench/results/2026-12-04-session25/"

#define MAX_CELLS 4096
typedef struct cell {
    char proj[32], contender[32], path[32];
    int64_t m, n, k;
    int tile_m, tile_n, split;
    int config; /* the plan's table row (-1: the run's CSV has none) */
    int rest, rest_split; /* the plan's tiles aside and their split (plan_rest_tiles,
                           * plan_rest_split; 0 where the CSV has none: before session 46 no
                           * table planned them) */
    double meas;
} cell;

/* Column index of `name` in a CSV header line (fields up to `why` hold no commas), -1 if none. */
static int column(const char *header, const char *name)
{
    int i = 0;
    for (const char *p = header; *p; i++) {
        size_t len = strcspn(p, ",\r\n");
        if (len == strlen(name) && !strncmp(p, name, len)) return i;
        p += len;
        if (*p != ',') break;
        p++;
    }
    return -1;
}

static void field(const char *line, int idx, char *out, size_t cap)
{
    const char *p = line;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, ',');
        if (p) p++;
    }
    size_t len = p ? strcspn(p, ",\r\n") : 0;
    if (len >= cap) len = cap - 1;
    memcpy(out, p ? p : "", len);
    out[len] = 0;
}

/* Appends the passing rows of `path`; returns how many. */
static int read_cells(const char *path, cell *v, int *count)
{
    FILE *f = fopen(path, "r");
    CHECKF(f != NULL, "cannot open %s", path);
    if (!f) return 0;
    static const char *names[] = {"proj", "k", "n", "m", "contender", "path", "tile_m", "tile_n",
                                  "graph_med_us", "status", "split"};
    int col[11], col_config = -1, col_rest = -1, col_rest_split = -1, have = 0, added = 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        if (!have) {
            for (int i = 0; i < 11; i++) {
                col[i] = column(line, names[i]);
                CHECKF(col[i] >= 0, "%s: no column %s", path, names[i]);
            }
            col_config = column(line, "config");
            col_rest = column(line, "plan_rest_tiles");
            col_rest_split = column(line, "plan_rest_split");
            have = 1;
            continue;
        }
        char x[11][32];
        for (int i = 0; i < 11; i++) field(line, col[i], x[i], sizeof x[i]);
        if (strcmp(x[9], "pass") || *count >= MAX_CELLS) continue;
        cell *c = &v[(*count)++];
        snprintf(c->proj, sizeof c->proj, "%s", x[0]);
        snprintf(c->contender, sizeof c->contender, "%s", x[4]);
        snprintf(c->path, sizeof c->path, "%s", x[5]);
        c->k = atoll(x[1]), c->n = atoll(x[2]), c->m = atoll(x[3]);
        c->tile_m = atoi(x[6]), c->tile_n = atoi(x[7]), c->split = atoi(x[10]);
        char cf[32] = "-1";
        if (col_config >= 0) field(line, col_config, cf, sizeof cf);
        c->config = atoi(cf);
        char rt[32] = "0", rs[32] = "0";
        if (col_rest >= 0) field(line, col_rest, rt, sizeof rt);
        if (col_rest_split >= 0) field(line, col_rest_split, rs, sizeof rs);
        c->rest = atoi(rt), c->rest_split = atoi(rs);
        c->meas = atof(x[8]);
        added++;
    }
    fclose(f);
    return added;
}

/* The bench's options for a contender (tools/bench_case.c). */
static qmm_cuda_options options_of(const cell *c)
{
    qmm_cuda_options o = qmm_cuda_options_default();
    if (!strcmp(c->contender, "wgmma_s1")) o.path = QMM_PATH_WGMMA, o.split = 1;
    if (!strcmp(c->contender, "wgmma")) o.path = QMM_PATH_WGMMA;
    if (!strcmp(c->contender, "streamk")) o.path = QMM_PATH_STREAMK;
    if (!strcmp(c->contender, "cluster")) o.path = QMM_PATH_WGMMA, o.split = c->split;
    return o;
}

/* The cells of one run; each overlay in turn (a later H200 run of a changed kernel row)
 * replaces every row of the (projection, M) pairs it holds, and each addition brings the pairs
 * the run lacks (token counts it never timed); the token counts in `stale` (a kernel row or a
 * plan changed since the run, measured by a later run) are left out, and where `projs` is set
 * only those projections are kept (up and v repeat gate's and k's shapes). */
#define MAX_OVERLAYS 4
#define MAX_STALE 4
typedef struct dataset {
    const char *path, *overlays[MAX_OVERLAYS], *additions[MAX_OVERLAYS]; /* NULL-terminated */
    int64_t stale[MAX_STALE];                  /* 0-terminated */
    const char *projs;                         /* e.g. ",q,k,o,gate,down,"; NULL: all */
    cell rows[MAX_CELLS];
    int n_rows;
} dataset;

/* Left out of session 25's runs: M = 32, whose 32-token tile runs three CTAs a SM since session
 * 42 (NOTES.md row 213), and M = 64, whose tiles changed in session 37 (row 199: q, k, o, down;
 * its H200 overlay served until session 43) and whose gate plan in session 43 (row 219: the
 * 128-row blocks two CTAs a SM, which no forced contender of these runs ran; their one-a-SM
 * clusters have the same tile and split). Session 43's H200 run (below) has both. */
static dataset fit_run = {.path = RUN "r2-final/ops_final.csv", .stale = {32, 64}},
               second_pass = {.path = RUN "r2-final/ops_new2.csv", .stale = {32, 64}};

static int same_pair(const cell *a, const cell *b) { return a->m == b->m && !strcmp(a->proj, b->proj); }

static void apply_overlay(dataset *ds, const char *overlay)
{
    static cell over[MAX_CELLS];
    static char base_has[MAX_CELLS];
    int n_over = 0, kept = 0;
    read_cells(overlay, over, &n_over);
    CHECKF(n_over > 0, "%s: no rows", overlay);
    for (int j = 0; j < n_over; j++) { /* the overlay's M = 33...56 are not the base's cells */
        base_has[j] = 0;
        for (int i = 0; i < ds->n_rows && !base_has[j]; i++) base_has[j] = same_pair(&over[j], &ds->rows[i]);
    }
    for (int i = 0; i < ds->n_rows; i++) {
        int replaced = 0;
        for (int j = 0; j < n_over && !replaced; j++) replaced = same_pair(&over[j], &ds->rows[i]);
        if (!replaced) ds->rows[kept++] = ds->rows[i];
    }
    ds->n_rows = kept;
    for (int j = 0; j < n_over && ds->n_rows < MAX_CELLS; j++)
        if (base_has[j]) ds->rows[ds->n_rows++] = over[j];
}

/* The rows of `path` whose (projection, M) pair the dataset does not hold yet. */
static void apply_addition(dataset *ds, const char *path)
{
    static cell add[MAX_CELLS];
    int n_add = 0, n_base = ds->n_rows, added = 0;
    read_cells(path, add, &n_add);
    CHECKF(n_add > 0, "%s: no rows", path);
    for (int j = 0; j < n_add; j++) {
        int held = 0;
        for (int i = 0; i < n_base && !held; i++) held = same_pair(&add[j], &ds->rows[i]);
        if (held) continue;
        CHECKF(ds->n_rows < MAX_CELLS, "%s: more than %d rows", path, MAX_CELLS);
        if (ds->n_rows < MAX_CELLS) ds->rows[ds->n_rows++] = add[j], added++;
    }
    CHECKF(added > 0, "%s: adds no (projection, M) pair", path);
}

static const dataset *load(dataset *ds)
{
    if (ds->n_rows) return ds;
    read_cells(ds->path, ds->rows, &ds->n_rows);
    for (int i = 0; i < MAX_OVERLAYS && ds->overlays[i]; i++) apply_overlay(ds, ds->overlays[i]);
    for (int i = 0; i < MAX_OVERLAYS && ds->additions[i]; i++) apply_addition(ds, ds->additions[i]);
    int kept = 0;
    for (int i = 0; i < ds->n_rows; i++) {
        int stale = 0;
        for (int j = 0; j < MAX_STALE && ds->stale[j]; j++) stale |= ds->rows[i].m == ds->stale[j];
        char name[40];
        snprintf(name, sizeof name, ",%s,", ds->rows[i].proj);
        stale |= ds->projs && !strstr(ds->projs, name);
        if (!stale) ds->rows[kept++] = ds->rows[i];
    }
    ds->n_rows = kept;
    return ds;
}

/* Row c ran the wgmma kernel's table row of plan p: the same tile and split can be two rows (the
 * 64-token tile's 128-row blocks one or two CTAs a SM: the paired row, NOTES.md row 208); runs
 * whose CSV has no config column are taken at their tile. */
static int same_config(const cell *c, const qmm_plan *p)
{
    return c->config < 0 || (p->path != QMM_PATH_WGMMA && p->path != QMM_PATH_STREAMK) || c->config == p->config;
}

/* The "wgmma" contender's row for (proj, m) where it ran plan p's schedule (it runs the wgmma
 * family's own plan, which AUTO takes where the table sends it there), or "t128"'s (the family's
 * plan on 128-token tiles from the wide tile's M on, which AUTO takes where it is one wave of
 * clusters: NOTES.md row 251), or NULL. */
static const cell *wgmma_contender(const dataset *ds, const char *proj, int64_t m,
                                   const qmm_plan *p)
{
    if (p->rest_tiles) return NULL; /* the runs do not say whether it set tiles aside */
    for (int i = 0; i < ds->n_rows; i++) {
        const cell *c = &ds->rows[i];
        if (c->m == m && !strcmp(c->proj, proj) &&
            (!strcmp(c->contender, "wgmma") || !strcmp(c->contender, "t128")) &&
            !strcmp(c->path, qmm_path_name(p->path)) && c->split == p->split &&
            c->tile_m == p->tile_m && c->tile_n == p->tile_n && same_config(c, p))
            return c;
    }
    return NULL;
}

/* The contender that ran plan p's schedule for (proj, m), or NULL. */
static const cell *measured_schedule(const dataset *ds, const char *proj, int64_t m,
                                     const qmm_plan *p)
{
    const char *want = NULL;
    int split = 0;
    if (p->rest_tiles) return NULL; /* no forced contender sets tiles aside (bench_case.c) */
    switch (p->path) {
    case QMM_PATH_MATVEC: want = "matvec"; break;
    case QMM_PATH_DENSE: want = "dense"; break;
    case QMM_PATH_STREAMK: want = "streamk"; break;
    case QMM_PATH_WGMMA:
        want = p->split == 1 ? "wgmma_s1" : "cluster";
        split = p->split == 1 ? 0 : p->split;
        break;
    default: return NULL;
    }
    for (int i = 0; i < ds->n_rows; i++) {
        const cell *c = &ds->rows[i];
        if (c->m != m || strcmp(c->proj, proj) || strcmp(c->contender, want) || (split && c->split != split))
            continue;
        if (p->path != QMM_PATH_MATVEC && p->path != QMM_PATH_DENSE &&
            (p->tile_m != c->tile_m || p->tile_n != c->tile_n || !same_config(c, p)))
            break;
        return c;
    }
    const int wgmma = p->path == QMM_PATH_WGMMA || p->path == QMM_PATH_STREAMK;
    return wgmma ? wgmma_contender(ds, proj, m, p) : NULL;
}

/* The measured row of plan p for the auto row c: c itself where it ran p (the only measurement
 * of a schedule no forced contender runs, e.g. clusters of 64-row blocks of 128 tokens, or one
 * wave of clusters with tiles aside), else the forced contender that ran p's schedule. */
static const cell *measured_plan(const dataset *ds, const cell *c, const qmm_plan *p)
{
    if (!strcmp(c->path, qmm_path_name(p->path)) && c->split == p->split && c->rest == p->rest_tiles &&
        c->rest_split == p->rest_split &&
        (p->path == QMM_PATH_MATVEC || p->path == QMM_PATH_DENSE ||
         (c->tile_m == p->tile_m && c->tile_n == p->tile_n && same_config(c, p))))
        return c;
    return measured_schedule(ds, c->proj, c->m, p);
}

/* Predicted / measured - 1 of every row whose contender is `which` ("auto": the default plan's
 * schedule, looked up among the contenders; else that forced contender's own row); prints the
 * table; returns the share within 15 % and the count in *n. */
static double score(const dataset *ds, const qmm_device_desc *d, const char *which, int *n,
                    int print)
{
    int within = 0, count = 0;
    if (print)
        printf("    %-5s %5s %-9s %-8s %9s %9s %7s\n", "proj", "M", "contender", "plan", "measured",
               "predicted", "error");
    for (int i = 0; i < ds->n_rows; i++) {
        const cell *c = &ds->rows[i];
        const int is_auto = !strcmp(which, "auto");
        if (is_auto ? strcmp(c->contender, "auto")
                    : strcmp(c->contender, "wgmma_s1") && strcmp(c->contender, "streamk") &&
                          strcmp(c->contender, "cluster"))
            continue;
        count++;
        qmm_cuda_options o = options_of(c);
        qmm_plan p;
        double err = NAN, meas = NAN;
        const char *why = "";
        const cell *ran = NULL;
        if (qmm_plan_call(d, c->m, c->n, c->k, &o, &p) != QMM_OK)
            why = "no plan";
        else if (!(ran = is_auto ? measured_plan(ds, c, &p) : c) ||
                 strcmp(qmm_path_name(p.path), ran->path) ||
                 (strcmp(ran->path, "matvec") && strcmp(ran->path, "dense") &&
                  (p.tile_m != ran->tile_m || p.tile_n != ran->tile_n || !same_config(ran, &p))))
            why = "schedule not measured";
        else if (p.predicted_us > 0)
            meas = ran->meas, err = p.predicted_us / meas - 1;
        else
            why = "no prediction";
        int ok = fabs(err) <= 0.15; /* false for NAN */
        within += ok;
        char name[48];
        snprintf(name, sizeof name, "%s%.0d", c->contender, /* cluster2 .. cluster8 */
                 strcmp(c->contender, "cluster") ? 0 : c->split);
        if (print)
            printf("    %-5s %5lld %-9s %-8s %9.2f %9.2f %+6.1f%% %s%s\n", c->proj, (long long)c->m,
                   name, qmm_path_name(p.path), meas, p.predicted_us, 100 * err, ok ? "" : "MISS ",
                   why);
    }
    *n = count;
    return count ? (double)within / count : 0;
}

static qmm_device_desc h200(void)
{
    qmm_device_desc d;
    memset(&d, 0, sizeof d);
    CHECK_OK(qmm_tune_desc(9, 0, 0, &d));
    return d;
}

/* Issue 11: >= 80 % of the auto cells within 15 % (what `qmm bench ops` prints beside
 * measured). 49 of 50 (32 and 64 left out; k at 1 024 plans the 128-token tile's clusters of 2
 * since NOTES.md row 251, a schedule this run did not time: 50 of 50 before); 55 of 55 before
 * session 43, with M = 32 60 of 60
 * from session 27 to 41 (NOTES.md row 165) and 49
 * of 60 before, when the dense path's six at M = 1024 / 2048 (+37…+78 %: 400 TFLOP/s and two
 * launches) and the matvec's five at M = 1 / 8 (+15…+32 %: its fifth-session model) missed.
 * Both models are now fitted to medians over several runs that include this one; fitted
 * without it, the dense path's constants (820 TFLOP/s, 4.52 µs, 2.92 TB/s) still put all 60
 * dense cells of its two passes within 15 %. */
static void auto_cells_within_15(void)
{
    const dataset *ds = load(&fit_run);
    qmm_device_desc d = h200();
    int n = 0;
    double share = score(ds, &d, "auto", &n, 1);
    CHECK(n == 50); /* 5 projections x M = 1, 8, 9, 16, 128, 256, 384, 512, 1024, 2048 (32, 64: stale) */
    printf("    auto cells within 15 %%: %.0f of %d (%.0f %%)\n", share * n, n, 100 * share);
    CHECKF(share >= 0.80, "auto cells within 15 %%: %.0f %%, want >= 80 %%", 100 * share);
}

/* The wgmma kernel's model on every forced schedule it was measured with (M = 1..2048, 32 and 64
 * left out): 301 of 310 within 15 % (97 %; 345 of 355 with M = 64, 376 of 390 on the kernels
 * before session 42 with M = 32, whose misses included stream-K at q / k / o / down M = 32); a
 * guard at what is reached. */
static void wgmma_contenders_within_15(void)
{
    const dataset *ds = load(&fit_run);
    qmm_device_desc d = h200();
    int n = 0;
    double share = score(ds, &d, "forced", &n, 1);
    CHECK(n == 310); /* 5 projections x (10 M x 2 (unsplit, stream-K) + 6 M x 7 cluster splits) */
    printf("    wgmma_s1, streamk, cluster cells within 15 %%: %.0f of %d (%.0f %%)\n", share * n, n,
           100 * share);
    CHECKF(share >= 0.90, "wgmma contenders within 15 %%: %.0f %%, want >= 90 %%", 100 * share);
}

/* Plans within 5 % of the best measured configuration (every qmm contender of the cell: matvec,
 * tiled, split-K, dense, the wgmma schedules); prints the table, returns how many. */
static int plans_within_5(const dataset *ds, const qmm_device_desc *d, int *cells)
{
    int within = 0;
    *cells = 0;
    for (int i = 0; i < ds->n_rows; i++) {
        const cell *c = &ds->rows[i];
        if (strcmp(c->contender, "auto")) continue;
        (*cells)++;
        qmm_plan p;
        CHECK_OK(qmm_plan_call(d, c->m, c->n, c->k, NULL, &p));
        const cell *ran = measured_plan(ds, c, &p);
        double best = INFINITY;
        const char *best_name = "";
        int best_split = 0;
        for (int j = 0; j < ds->n_rows; j++) {
            const cell *o = &ds->rows[j];
            if (o->m != c->m || strcmp(o->proj, c->proj) || !strcmp(o->contender, "auto") ||
                !strcmp(o->contender, "cublas") || !strcmp(o->contender, "read") ||
                !strcmp(o->contender, "wgmma"))
                continue;
            if (o->meas < best) best = o->meas, best_name = o->contender, best_split = o->split;
        }
        int ok = ran && ran->meas <= 1.05 * best;
        within += ok;
        printf("    %-5s %5lld plan %-8s %d  %8.2f µs  best %-8s %d %8.2f µs %s\n", c->proj,
               (long long)c->m, qmm_path_name(p.path), p.split, ran ? ran->meas : NAN, best_name,
               best_split, best, ok ? "" : ran ? "MISS" : "MISS (not measured)");
    }
    return within;
}

/* Issue 11: the plan within 5 % of the best measured configuration on >= 95 % of cells: 48 of
 * 50 (the misses: down M = 2048, whose dense row took 153.6 and the same schedule's other row
 * 145.2; k at 1 024, whose clusters of 2 of 128-token tiles (row 251) this run did not time; 53 of 55 with M = 64 until session 42, whose other miss was k at M = 64, clusters of 7
 * 4.87 µs against clusters of 6 4.60; 58 of 60 with M = 32 until session 41; down M = 1024, the
 * dense path by the table then, 87.0 µs where stream-K took 82.2, is planned as stream-K since
 * session 30). k at M = 384 / 512 ran the dense path by the table until session 27 and missed
 * too. */
static void plan_within_5_of_best(void)
{
    const dataset *ds = load(&fit_run);
    qmm_device_desc d = h200();
    int cells = 0, within = plans_within_5(ds, &d, &cells);
    CHECK(cells == 50);
    printf("    plans within 5 %% of the best measured: %d of %d\n", within, cells);
    CHECKF(within >= 0.95 * cells, "plans within 5 %% of the best: %d of %d, want >= 95 %%", within,
           cells);
}

/* The same build's second pass (M = 9..2048, 32 and 64 left out): both criteria again. 39 of 40
 * auto cells within 15 %, 39 of 40 plans within 5 % (k at 1 024 untimed, as above; 40 and 40
 * before row 251), 282 of 290 forced (with M = 64 until session
 * 42: 45, 44 and 326 of 335). */
static void second_pass_meets_both(void)
{
    const dataset *ds = load(&second_pass);
    qmm_device_desc d = h200();
    int n = 0, nf = 0, cells = 0;
    double share = score(ds, &d, "auto", &n, 0), forced = score(ds, &d, "forced", &nf, 0);
    int within = plans_within_5(ds, &d, &cells);
    CHECK(n == 40 && cells == 40 && nf == 290); /* 5 projections x M = 9, 16, 128, 256, 384, 512, 1024, 2048 */
    printf("    second pass: auto cells within 15 %%: %.0f of %d; forced %.0f of %d; "
           "plans within 5 %%: %d of %d\n", share * n, n, forced * nf, nf, within, cells);
    CHECKF(share >= 0.80, "second pass: auto cells within 15 %%: %.0f %%", 100 * share);
    CHECKF(forced >= 0.90, "second pass: wgmma contenders within 15 %%: %.0f %%", 100 * forced);
    CHECKF(within >= 0.95 * cells, "second pass: plans within 5 %%: %d of %d", within, cells);
}

/* An H100's run of session 42's build (the 24-, 32- and 48-token 64-row tiles three CTAs a SM,
 * NOTES.md row 213; every contender at M = 1…2048, seven projections), with q, k, o, gate, down
 * at 128, 256, 384, 512 tokens from session 46's H100 run of the build that planned tiles aside
 * (NOTES.md row 230; its auto rows ran o and down at 256 so, the only measurement of them), and
 * at 144 and 200 tokens, which neither run timed, the landed build's first pair of session 46's
 * r4 (o and down set a tile aside there, where the pair gains most): the shipped description
 * with an H100's corrections, as a context on that GPU plans, meets both criteria there too:
 * 118 of 122 auto cells within 15 % (k/v at M = 9 / 16 +15.1 %), 119 of 122 plans within 5 %
 * (k/v at M = 64 in clusters of 7 against 6, q at 2 048's unsplit row against the same
 * schedule's forced one; k/v at 1 024 missed too, on the dense path, until row 251 planned the
 * 128-token tile split in 2 there, which the "t128" contender timed). */
#define RUN42 QMM_SOURCE_DIR "/bench/results/2026-12-06-session42/landed/"
#define RUN46 QMM_SOURCE_DIR "/bench/results/2026-12-06-session46/"
static dataset h100_run = {.path = RUN42 "ops_full.csv", .overlays = {RUN46 "r1/opsr_r1.csv"},
                           .additions = {RUN46 "r4/o_n1.csv"}};

/* The H200's run of 8f893c9 (session 43's first H200 call: every contender at M =
 * 1…2048; q, k, o, gate, down, whose shapes up and v repeat), with gate and down at M = 64 from
 * the same call's build that plans the 64-token tile's 128-row blocks two CTAs a SM on the H200
 * too (NOTES.md row 219: gate in clusters of 3 instead of stream-K): the shipped description meets
 * both criteria on the GPU it describes. 78 of 80 auto cells within 15 % (gate at M = 1 on the
 * matvec +15.3 %, at 2 048 −15.7 %), 79 of 80 plans within 5 % (k at M = 64 in clusters of 7
 * against 6; k at 1 024 missed on the dense path until row 251 planned the 128-token tile split
 * in 2, the "t128" contender's 11.98 µs against 12.68). */
#define RUN43 QMM_SOURCE_DIR "/bench/results/2026-12-06-session43/h200/"
static dataset h200_run = {.path = RUN43 "ops_full.csv", .overlays = {RUN43 "ops_p1.csv"},
                           .projs = ",q,k,o,gate,down,"};

/* Both criteria on one GPU's run (`gpu` names it in the lines printed), `want` cells of each. */
static void run_meets_both(const dataset *ds, const qmm_device_desc *d, const char *gpu, int want)
{
    int n = 0, cells = 0;
    double share = score(ds, d, "auto", &n, 0);
    int within = plans_within_5(ds, d, &cells);
    CHECKF(n == want && cells == want, "%s: %d auto cells, %d plans, want %d", gpu, n, cells, want);
    printf("    %s: auto cells within 15 %%: %.0f of %d; plans within 5 %%: %d of %d\n", gpu, share * n, n,
           within, cells);
    CHECKF(share >= 0.80, "%s: auto cells within 15 %%: %.0f %%", gpu, 100 * share);
    CHECKF(within >= 0.95 * cells, "%s: plans within 5 %%: %d of %d", gpu, within, cells);
}

static void h200_run_meets_both(void)
{
    const qmm_device_desc d = h200();
    /* 5 projections x M = 1, 8, 9, 16, 17, 24, 32, 40, 48, 64, 128, 256, 384, 512, 1024, 2048 */
    run_meets_both(load(&h200_run), &d, "H200", 80);
}

static void h100_run_meets_both(void)
{
    qmm_device_desc d = h200();
    qmm_tune_for_gpu(&d, "NVIDIA H100 80GB HBM3");
    /* 7 projections x the same M, and q, k, o, gate, down at 144 and 200 */
    run_meets_both(load(&h100_run), &d, "H100", 122);
}

/* The criterion can fail: a model off by 1.3x either way, or missing, is caught. */
static void broken_models_fail(void)
{
    const dataset *ds = load(&fit_run);
    static const double scale[] = {0.0, 0.75, 1.3};
    for (int i = 0; i < 3; i++) {
        qmm_device_desc d = h200();
        double *w[] = {&d.wgmma_model.fixed_us, &d.wgmma_model.fill_us_per_kb,
                       &d.wgmma_model.stage_us, &d.wgmma_model.us_per_mflop,
                       &d.wgmma_model.issue_us, &d.wgmma_model.round_trip_us,
                       &d.wgmma_model.partial_us_per_mb, &d.wgmma_model.cluster_us,
                       &d.wgmma_model.cluster_us_per_kb, &d.wgmma_model.wide_kblock_us,
                       &d.matvec_fixed_us,
                       &d.matvec_row_token_ns, &d.dense_fixed_us};
        for (size_t j = 0; j < sizeof w / sizeof w[0]; j++) *w[j] *= scale[i];
        double *rate[] = {&d.matvec_tbs, &d.dense_tflops, &d.dense_dequant_tbs};
        for (size_t j = 0; j < sizeof rate / sizeof rate[0]; j++)
            *rate[j] = scale[i] > 0 ? *rate[j] / scale[i] : 0; /* 0: no matvec or dense model */
        int na = 0, nb = 0;
        double a = score(ds, &d, "auto", &na, 0), b = score(ds, &d, "forced", &nb, 0);
        printf("    constants x %.2f: auto %.0f %%, wgmma contenders %.0f %% within 15 %%\n",
               scale[i], 100 * a, 100 * b);
        CHECKF(a < 0.80 && b < 0.90, "constants x %.2f still pass (%.2f, %.2f)", scale[i], a, b);
    }
}

/* The model's own argument checks: bad schedules and an all-zero model give -1. */
static void model_rejects_bad_input(void)
{
    qmm_device_desc d = h200();
    const qmm_wgmma_model *c = &d.wgmma_model, zero = {0};
    CHECK(qmm_model_wgmma_us(c, 132, 16, 4096, 20, 16, 1, 3, 320, 0, 0) > 0);
    CHECK(qmm_model_wgmma_us(c, 132, 16, 4096, 20, 16, 1, 3, 64, 1, 0) > 0);
    CHECK(qmm_model_wgmma_us(c, 132, 16, 4096, 20, 16, 1, 3, 128, 2, 0) > 0);
    CHECK(qmm_model_wgmma_us(&zero, 132, 16, 4096, 20, 16, 1, 3, 320, 0, 0) < 0);
    CHECK(qmm_model_wgmma_us(NULL, 132, 16, 4096, 20, 16, 1, 3, 320, 0, 0) < 0);
    CHECK(qmm_model_wgmma_us(c, 132, 16, 4096, 20, 16, 1, 3, 65, 1, 0) < 0);   /* not tiles x split */
    CHECK(qmm_model_wgmma_us(c, 132, 16, 4096, 20, 16, 1, 3, 400, 0, 0) < 0);  /* more than resident */
    CHECK(qmm_model_wgmma_us(c, 132, 16, 4096, 20, 16, 1, 3, 64, 21, 0) < 0);  /* split > groups */
    CHECK(qmm_model_wgmma_us(c, 0, 16, 4096, 20, 16, 1, 3, 64, 1, 0) < 0);
    qmm_device_desc bad = d;
    bad.wgmma_model.stage_us = NAN;
    qmm_plan p;
    CHECK_STATUS(qmm_plan_call(&bad, 16, 4096, 2560, NULL, &p), QMM_ERR_ARG);
    bad = d;
    bad.matvec_tbs = -1;
    CHECK_STATUS(qmm_plan_call(&bad, 1, 4096, 2560, NULL, &p), QMM_ERR_ARG);
    bad = d;
    bad.dense_dequant_tbs = INFINITY;
    CHECK_STATUS(qmm_plan_call(&bad, 2048, 4096, 2560, NULL, &p), QMM_ERR_ARG);
    bad = d;
    bad.dense_fixed_us = -1;
    CHECK_STATUS(qmm_plan_call(&bad, 2048, 4096, 2560, NULL, &p), QMM_ERR_ARG);
}

/* The 256-token tile's schedule in the model, by one constant at a time (the others 0): down at
 * M = 2048 is 160 tiles of 76 k-blocks. Stream-K over 132 CTAs: the 128-token tile's busiest CTA
 * has ceil(320 · 76 / 132) = 185 k-blocks; the 256-token tile's one whole tile (76) and then
 * ceil(28 · 76 / 132) = 17 of the leftover (NOTES.md row 162). Unsplit: two waves of 76, and
 * wide_kblock_us on each k-block of the 256-token chain only. */
static void model_counts_the_wide_tile(void)
{
    qmm_wgmma_model stage = {0}, wide = {0};
    stage.stage_us = 1.0, wide.wide_kblock_us = 1.0;
    CHECK(fabs(qmm_model_wgmma_us(&stage, 132, 2048, 2560, 76, 128, 2, 1, 132, 0, 0) - 185.0) < 1e-9);
    CHECK(fabs(qmm_model_wgmma_us(&stage, 132, 2048, 2560, 76, 256, 2, 1, 132, 0, 0) - 93.0) < 1e-9);
    CHECK(fabs(qmm_model_wgmma_us(&wide, 132, 2048, 2560, 76, 256, 2, 1, 160, 1, 0) - 152.0) < 1e-9);
    CHECK(qmm_model_wgmma_us(&wide, 132, 2048, 2560, 76, 128, 2, 1, 320, 1, 0) == 0.0);
    /* whole tiles only (264 = 2 x 132): two a CTA, nothing left to spread */
    CHECK(fabs(qmm_model_wgmma_us(&stage, 132, 2048, 4224, 20, 256, 2, 1, 132, 0, 0) - 40.0) < 1e-9);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, auto_cells_within_15, wgmma_contenders_within_15, plan_within_5_of_best,
               second_pass_meets_both, h200_run_meets_both, h100_run_meets_both, broken_models_fail, model_rejects_bad_input,
               model_counts_the_wide_tile);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
