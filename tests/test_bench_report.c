/* The report writers of `qmm bench ops` (tools/bench_report_*.c), on results made up here (no
 * GPU): every row of the markdown's main table has the header's cell count, and the roofline
 * column of the markdown, the CSV and the JSON is the larger of % copy and % bf16 (issue 11 asks
 * for % of the W4 roofline per cell). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ops.h"
#include "harness.h"

/* A passing row: µs per call, bytes and flops of a call. */
static bench_result row(const char *contender, int64_t m, double us, double bytes, double flops)
{
    bench_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.proj, sizeof r.proj, "q");
    snprintf(r.contender, sizeof r.contender, "%s", contender);
    r.k = 2560, r.n = 4096, r.m = m;
    r.path = strcmp(contender, "cublas") ? QMM_PATH_WGMMA : -1;
    r.split = 1;
    r.status = BENCH_PASS;
    r.t.graph_med = r.t.graph_min = r.t.graph_max = r.t.eager_med = us;
    r.t.calls = 20, r.t.copies = 8, r.t.reps = 9;
    r.bytes = bytes, r.flops = flops;
    r.plan_path = QMM_PATH_WGMMA, r.plan_split = 1;
    r.predicted_us = r.run_predicted_us = -1;
    return r;
}

typedef struct fixture {
    bench_results rs;
    bench_meta meta;
    bench_ceilings ceil;
    bench_model_setup model;
    bench_report report;
} fixture;

/* Two cells: M = 16 bound by bytes (3 MB in 2 µs: 1 500 GB/s of 4 000, 37.5 %; 0.5 TFLOP/s),
 * M = 2048 bound by flops (40 TFLOP in 100 µs: 400 of 800 TFLOP/s, 50 %; 5 MB: 1.25 %). */
static void fixture_init(fixture *x)
{
    memset(x, 0, sizeof *x);
    bench_result rows[] = {row("auto", 16, 2.0, 3e6, 1e6), row("cublas", 16, 4.0, 12e6, 1e6),
                           row("auto", 2048, 100.0, 5e6, 4e10), row("cublas", 2048, 90.0, 5e6, 4e10)};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        CHECK(bench_results_push(&x->rs, &rows[i]) != NULL);
    snprintf(x->meta.gpu, sizeof x->meta.gpu, "made up");
    x->ceil.copy.value = 4000.0, x->ceil.cublas.value = 800.0;
    snprintf(x->model.why, sizeof x->model.why, "not in this test");
    x->report = (bench_report){.meta = &x->meta, .ceil = &x->ceil, .rs = &x->rs,
                               .model = &x->model};
}

/* The text fn writes, NUL-terminated (the caller frees it). */
static char *written(void (*fn)(FILE *, const bench_report *), const bench_report *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    if (!f) return NULL;
    fn(f, r);
    fclose(f);
    return buf;
}

static int cells_of(const char *line)
{
    int n = -1;
    for (const char *p = line; *p && *p != '\n'; p++) n += *p == '|';
    return n;
}

/* The value in the cell whose header is `name` of the table row starting with `start`. */
static double md_cell(const char *md, const char *name, const char *start)
{
    const char *hdr = strstr(md, "| proj | K→N |"), *line = strstr(md, start);
    if (!hdr || !line) return NAN;
    const char *at = strstr(hdr, name);
    if (!at) return NAN;
    int col = 0;
    for (const char *p = hdr; p < at; p++) col += *p == '|';
    const char *p = line; /* the cell's opening bar: the col-th of the line */
    for (int i = 1; i < col && p; i++) p = strchr(p + 1, '|');
    return p ? atof(p + 1) : NAN;
}

static void markdown_rows_match_the_header(void)
{
    fixture x;
    fixture_init(&x);
    char *md = written(bench_write_md, &x.report);
    const char *hdr = md ? strstr(md, "| proj | K→N |") : NULL;
    CHECK(hdr != NULL);
    if (hdr) {
        int want = cells_of(hdr), rows = 0;
        for (const char *p = strchr(hdr, '\n'); p && p[1] == '|'; p = strchr(p + 1, '\n')) {
            CHECKF(cells_of(p + 1) == want, "a row has %d cells, the header %d", cells_of(p + 1),
                   want);
            rows++;
        }
        CHECK(rows == 3); /* the separator and the two cells */
        CHECK(fabs(md_cell(md, "% W4 roofline", "| q | 2560→4096 | 16 |") - 38) < 1e-9);
        CHECK(fabs(md_cell(md, "% W4 roofline", "| q | 2560→4096 | 2048 |") - 50) < 1e-9);
        CHECK(fabs(md_cell(md, "% copy", "| q | 2560→4096 | 16 |") - 38) < 1e-9);
    }
    free(md);
    bench_results_free(&x.rs);
}

/* The field after p's next comma, NULL at the end of the text. */
static const char *next_field(const char *p)
{
    const char *c = p ? strchr(p, ',') : NULL;
    return c ? c + 1 : NULL;
}

/* pct_roofline of every CSV row against % copy and % bf16 computed here. */
static void csv_and_json_report_the_roofline(void)
{
    fixture x;
    fixture_init(&x);
    char *csv = written(bench_write_csv, &x.report);
    const char *hdr = csv ? strstr(csv, "proj,k,n,m,") : NULL;
    CHECK(hdr != NULL);
    int col = -1, i = 0;
    for (const char *p = hdr; p && *p != '\n'; p = next_field(p), i++)
        if (!strncmp(p, "pct_roofline,", 13)) col = i;
    CHECK(col >= 0);
    int rows = 0;
    for (const char *line = hdr ? strchr(hdr, '\n') : NULL; line && line[1]; line = strchr(line + 1, '\n')) {
        const char *p = line + 1;
        for (int c = 0; c < col && p; c++) p = next_field(p);
        if (rows >= (int)x.rs.n) { /* more CSV rows than results: CHECK(rows == 4) says so */
            rows++;
            continue;
        }
        const bench_result *r = &x.rs.v[rows++];
        double us = r->t.graph_med, want = 100.0 * fmax(r->bytes / (us * 1e3) / 4000.0,
                                                        r->flops / (us * 1e6) / 800.0);
        CHECKF(p && fabs(atof(p) - want) < 1e-3 * want, "row %d: pct_roofline %g, want %g", rows,
               p ? atof(p) : NAN, want);
    }
    CHECK(rows == 4);
    free(csv);
    char *json = written(bench_write_json, &x.report);
    CHECK(json && strstr(json, "\"pct_roofline\": 37.5") && strstr(json, "\"pct_roofline\": 50"));
    free(json);
    bench_results_free(&x.rs);
}

/* Field count of a CSV line (no quoted commas in these rows). */
static int fields_of(const char *line)
{
    int n = 1;
    for (const char *p = line; *p && *p != '\n'; p++) n += *p == ',';
    return n;
}

/* The text of column `name` (of header `hdr`) in the CSV row `row`, at most cap - 1 chars. */
static void csv_cell(const char *hdr, const char *row, const char *name, char *out, size_t cap)
{
    int col = -1, i = 0;
    const size_t len = strlen(name);
    for (const char *p = hdr; p && *p != '\n'; p = next_field(p), i++)
        if (!strncmp(p, name, len) && (p[len] == ',' || p[len] == '\n')) col = i;
    const char *p = col >= 0 ? row : NULL;
    for (int c = 0; c < col && p; c++) p = next_field(p);
    size_t n = p ? strcspn(p, ",\n") : 0;
    if (n >= cap) n = cap - 1;
    memcpy(out, p ? p : "", n);
    out[n] = 0;
}

/* A plan with tiles aside (qmm_plan.rest_tiles, _split) reaches all three reports: the CSV's
 * plan_rest_tiles / plan_rest_split (every row as wide as the header), the JSON's, and the
 * markdown's plan cell ("wgmma/3+1r8"). */
static void reports_carry_the_tiles_aside(void)
{
    fixture x;
    fixture_init(&x);
    for (size_t i = 0; i < x.rs.n; i++)
        x.rs.v[i].plan_split = 3, x.rs.v[i].plan_rest_tiles = 1, x.rs.v[i].plan_rest_split = 8;
    char *csv = written(bench_write_csv, &x.report);
    const char *hdr = csv ? strstr(csv, "proj,k,n,m,") : NULL;
    CHECK(hdr != NULL);
    int rows = 0;
    for (const char *line = hdr ? strchr(hdr, '\n') : NULL; line && line[1]; line = strchr(line + 1, '\n')) {
        char tiles[32], ways[32];
        csv_cell(hdr, line + 1, "plan_rest_tiles", tiles, sizeof tiles);
        csv_cell(hdr, line + 1, "plan_rest_split", ways, sizeof ways);
        CHECKF(fields_of(line + 1) == fields_of(hdr), "row %d: %d fields, the header %d", rows,
               fields_of(line + 1), fields_of(hdr));
        CHECKF(!strcmp(tiles, "1") && !strcmp(ways, "8"), "row %d: tiles aside '%s', split '%s'", rows,
               tiles, ways);
        rows++;
    }
    CHECK(rows == 4);
    char *json = written(bench_write_json, &x.report), *md = written(bench_write_md, &x.report);
    CHECK(json && strstr(json, "\"plan_rest_tiles\": 1") && strstr(json, "\"plan_rest_split\": 8"));
    CHECK(md && strstr(md, "wgmma/3+1r8"));
    free(csv);
    free(json);
    free(md);
    bench_results_free(&x.rs);
}

/* The experiments' switches reach both reports when set, and neither when not (a run's files
 * must say what it ran with: bench/results/HISTORY.md, "Experiments and switches"). */
static void reports_name_the_experiments_switches(void)
{
    fixture x;
    fixture_init(&x);
    static const char *const names[] = {"QMM_MV_ROUNDS", "QMM_DECODE_ATTN", "QMM_PREFILL_ATTN"};
    char keep[3][64];
    int had[3];
    for (int i = 0; i < 3; i++) { /* the caller's values, restored at the end */
        const char *v = getenv(names[i]);
        had[i] = v != NULL;
        snprintf(keep[i], sizeof keep[i], "%s", v ? v : "");
        unsetenv(names[i]);
    }
    char *csv = written(bench_write_csv, &x.report), *md = written(bench_write_md, &x.report);
    char *json = written(bench_write_json, &x.report);
    CHECK(csv && !strstr(csv, "# environment:"));
    CHECK(md && !strstr(md, "| environment |"));
    CHECK(json && strstr(json, "\"environment\": \"\""));
    free(csv);
    free(md);
    free(json);
    setenv("QMM_MV_ROUNDS", "1", 1);
    csv = written(bench_write_csv, &x.report);
    md = written(bench_write_md, &x.report);
    json = written(bench_write_json, &x.report);
    const char *line = csv ? strstr(csv, "# environment: QMM_MV_ROUNDS=1\n") : NULL;
    CHECK(line != NULL);
    CHECK(line && strstr(csv, "proj,k,n,m,") > line); /* a header line, before the columns */
    CHECK(md && strstr(md, "| environment | `QMM_MV_ROUNDS=1` |"));
    CHECK(json && strstr(json, "\"environment\": \"QMM_MV_ROUNDS=1\""));
    free(csv);
    free(md);
    free(json);
    for (int i = 0; i < 3; i++) {
        if (had[i]) setenv(names[i], keep[i], 1);
        else unsetenv(names[i]);
    }
    bench_results_free(&x.rs);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, markdown_rows_match_the_header, csv_and_json_report_the_roofline,
               reports_carry_the_tiles_aside, reports_name_the_experiments_switches);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
