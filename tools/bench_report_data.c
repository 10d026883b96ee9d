/* `qmm bench ops`: machine-readable reports (CSV with '#' metadata lines, JSON) and the atomic
 * file writer. Pure (no CUDA). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ops.h"

static const char *path_label(const bench_result *r)
{
    return r->path == -2 ? "read" : r->path < 0 ? "cublas" : qmm_path_name((qmm_path)r->path);
}

static double gbps_of(const bench_result *r)
{
    return r->status == BENCH_PASS ? r->bytes / (r->t.graph_med * 1e3) : NAN;
}

static double tflops_of(const bench_result *r)
{
    return r->status == BENCH_PASS ? r->flops / (r->t.graph_med * 1e6) : NAN;
}

/* ---- CSV ---- */

/* % of the roofline of the row's own bytes and flops: its time over the longer of bytes / copy
 * ceiling and flops / bf16 ceiling, i.e. the larger of % copy and % bf16 (for qmm's rows the
 * W4 roofline of issue 11; for cuBLAS's, bf16 weights). */
static double roofline_pct(double gbps, double tflops, const bench_ceilings *c)
{
    return 100.0 * fmax(gbps / c->copy.value, tflops / c->cublas.value);
}

static void csv_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, ",%.6g", v);
    else fputs(",", f);
}

/* A CSV field: quoted, inner quotes doubled. */
static void csv_str(FILE *f, const char *s)
{
    fputs(",\"", f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        if (*s != '\n' && *s != '\r') fputc(*s, f);
    }
    fputc('"', f);
}

/* The experiments' switches this process runs with (README, "Experiments"), "NAME=value" each,
 * space-separated; "" when none is set. */
const char *bench_experiment_env(void)
{
    static const char *const names[] = {"QMM_MV_ROUNDS", "QMM_DECODE_ATTN", "QMM_DECODE_ATTN_O",
                                        "QMM_PREFILL_ATTN"};
    static char buf[256];
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && n < sizeof buf)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%.40s", n ? " " : "", names[i], v);
    }
    return buf;
}

void bench_write_csv(FILE *f, const bench_report *r)
{
    const bench_meta *m = r->meta;
    const bench_ceilings *c = r->ceil;
    fprintf(f, "# qmm bench ops\n# gpu: %s\n# compute_capability: %d.%d\n# sms: %d\n"
               "# l2_bytes: %lld\n# sm_clock_khz: %d\n# mem_clock_khz: %d\n# mem_bus_bits: %d\n"
               "# driver_version: %d\n# runtime_version: %d\n# cublas_version: %d\n"
               "# commit: %s\n# date: %s\n# seed: %llu\n# weights: %s\n# reps: %d\n"
               "# calls_min: %d\n# copy_gbps: %.1f (%s)\n# cublas_tflops: %.1f (%s)\n"
               "# command: %s\n",
            m->gpu, m->cc_major, m->cc_minor, m->sms, m->l2_bytes, m->sm_clock_khz,
            m->mem_clock_khz, m->mem_bus_bits, m->driver_version, m->runtime_version,
            m->cublas_version, m->commit, m->date, (unsigned long long)m->seed,
            m->hot ? "hot" : "cold", m->reps, m->calls_min, c->copy.value,
            c->copy.measured ? "measured" : "default", c->cublas.value,
            c->cublas.measured ? "measured" : "default", m->command);
    if (*bench_experiment_env()) fprintf(f, "# environment: %s\n", bench_experiment_env());
    fprintf(f, "proj,k,n,m,contender,path,split,stages,tile_m,tile_n,config,status,rel_err,checked_rows,"
               "graph_med_us,graph_min_us,graph_max_us,eager_med_us,eager_min_us,eager_max_us,"
               "calls,copies,reps,bytes,flops,gbps,pct_copy,tflops,pct_cublas_peak,pct_roofline,plan_path,"
               "plan_split,plan_rest_tiles,plan_rest_split,predicted_us,run_predicted_us,why\n");
    for (size_t i = 0; i < r->rs->n; i++) {
        const bench_result *x = &r->rs->v[i];
        int pass = x->status == BENCH_PASS;
        fprintf(f, "%s,%lld,%lld,%lld,%s,%s,%d,%d,%d,%d,%d,%s", x->proj, (long long)x->k,
                (long long)x->n, (long long)x->m, x->contender, path_label(x), x->split, x->stages,
                x->tile_m, x->tile_n, x->config, pass ? "pass" : "fail");
        csv_num(f, x->rel_err);
        fprintf(f, ",%d", x->checked_rows);
        double t[6] = {x->t.graph_med, x->t.graph_min, x->t.graph_max,
                       x->t.eager_med, x->t.eager_min, x->t.eager_max};
        for (int j = 0; j < 6; j++) csv_num(f, pass ? t[j] : NAN);
        fprintf(f, ",%d,%d,%d", x->t.calls, x->t.copies, x->t.reps);
        csv_num(f, x->bytes);
        csv_num(f, x->flops);
        double g = gbps_of(x), tf = tflops_of(x);
        csv_num(f, g);
        csv_num(f, 100.0 * g / c->copy.value);
        csv_num(f, tf);
        csv_num(f, 100.0 * tf / c->cublas.value);
        csv_num(f, roofline_pct(g, tf, c));
        fprintf(f, ",%s,%d,%d,%d", x->plan_path > 0 ? qmm_path_name((qmm_path)x->plan_path) : "",
                x->plan_split, x->plan_rest_tiles, x->plan_rest_split);
        csv_num(f, x->predicted_us >= 0 ? x->predicted_us : NAN);
        csv_num(f, x->run_predicted_us >= 0 ? x->run_predicted_us : NAN);
        csv_str(f, x->why);
        fputc('\n', f);
    }
}

/* ---- JSON ---- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.6g", v);
    else fputs("null", f);
}

/* "key": value pairs; the first of an object passes first = 1. */
static void jk(FILE *f, int *first, const char *key)
{
    fprintf(f, "%s\"%s\": ", *first ? "" : ", ", key);
    *first = 0;
}
static void jstr(FILE *f, int *first, const char *key, const char *v)
{
    jk(f, first, key);
    json_str(f, v);
}
static void jnum(FILE *f, int *first, const char *key, double v)
{
    jk(f, first, key);
    json_num(f, v);
}
static void jint(FILE *f, int *first, const char *key, long long v)
{
    jk(f, first, key);
    fprintf(f, "%lld", v);
}

/* NAME_UNIT, NAME_min_UNIT, NAME_max_UNIT, NAME_measured, NAME_note */
static void json_ceiling(FILE *f, int *first, const char *name, const char *unit,
                         const bench_ceiling *x)
{
    char key[64];
    snprintf(key, sizeof key, "%s_%s", name, unit);
    jnum(f, first, key, x->value);
    snprintf(key, sizeof key, "%s_min_%s", name, unit);
    jnum(f, first, key, x->min);
    snprintf(key, sizeof key, "%s_max_%s", name, unit);
    jnum(f, first, key, x->max);
    snprintf(key, sizeof key, "%s_measured", name);
    jint(f, first, key, x->measured);
    snprintf(key, sizeof key, "%s_note", name);
    jstr(f, first, key, x->note);
}

static void json_meta(FILE *f, const bench_report *r)
{
    const bench_meta *m = r->meta;
    const bench_ceilings *c = r->ceil;
    int fi = 1;
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", m->cc_major, m->cc_minor);
    fprintf(f, "  \"meta\": {");
    jstr(f, &fi, "gpu", m->gpu);
    jstr(f, &fi, "compute_capability", cc);
    jint(f, &fi, "sms", m->sms);
    jint(f, &fi, "l2_bytes", m->l2_bytes);
    jint(f, &fi, "sm_clock_khz", m->sm_clock_khz);
    jint(f, &fi, "mem_clock_khz", m->mem_clock_khz);
    jint(f, &fi, "mem_bus_bits", m->mem_bus_bits);
    jint(f, &fi, "driver_version", m->driver_version);
    jint(f, &fi, "runtime_version", m->runtime_version);
    jint(f, &fi, "cublas_version", m->cublas_version);
    jstr(f, &fi, "commit", m->commit);
    jstr(f, &fi, "date", m->date);
    jk(f, &fi, "seed");
    fprintf(f, "%llu", (unsigned long long)m->seed);
    jstr(f, &fi, "weights", m->hot ? "hot" : "cold");
    jint(f, &fi, "reps", m->reps);
    jint(f, &fi, "calls_min", m->calls_min);
    jstr(f, &fi, "command", m->command);
    jstr(f, &fi, "environment", bench_experiment_env());
    fprintf(f, "},\n  \"ceilings\": {");
    fi = 1;
    json_ceiling(f, &fi, "copy", "gbps", &c->copy);
    json_ceiling(f, &fi, "cublas", "tflops", &c->cublas);
    fprintf(f, "},\n");
}

static void json_result(FILE *f, const bench_result *x, const bench_ceilings *c)
{
    int fi = 1, pass = x->status == BENCH_PASS;
    double g = gbps_of(x), tf = tflops_of(x);
    fprintf(f, "    {");
    jstr(f, &fi, "proj", x->proj);
    jint(f, &fi, "k", x->k);
    jint(f, &fi, "n", x->n);
    jint(f, &fi, "m", x->m);
    jstr(f, &fi, "contender", x->contender);
    jstr(f, &fi, "path", path_label(x));
    jint(f, &fi, "split", x->split);
    jint(f, &fi, "stages", x->stages);
    jint(f, &fi, "tile_m", x->tile_m);
    jint(f, &fi, "tile_n", x->tile_n);
    jint(f, &fi, "config", x->config);
    jstr(f, &fi, "status", pass ? "pass" : "fail");
    jnum(f, &fi, "rel_err", x->rel_err);
    jint(f, &fi, "checked_rows", x->checked_rows);
    jnum(f, &fi, "graph_med_us", pass ? x->t.graph_med : NAN);
    jnum(f, &fi, "graph_min_us", pass ? x->t.graph_min : NAN);
    jnum(f, &fi, "graph_max_us", pass ? x->t.graph_max : NAN);
    jnum(f, &fi, "eager_med_us", pass ? x->t.eager_med : NAN);
    jnum(f, &fi, "eager_min_us", pass ? x->t.eager_min : NAN);
    jnum(f, &fi, "eager_max_us", pass ? x->t.eager_max : NAN);
    jint(f, &fi, "calls", x->t.calls);
    jint(f, &fi, "copies", x->t.copies);
    jint(f, &fi, "reps", x->t.reps);
    jnum(f, &fi, "bytes", x->bytes);
    jnum(f, &fi, "flops", x->flops);
    jnum(f, &fi, "gbps", g);
    jnum(f, &fi, "pct_copy", 100.0 * g / c->copy.value);
    jnum(f, &fi, "tflops", tf);
    jnum(f, &fi, "pct_cublas_peak", 100.0 * tf / c->cublas.value);
    jnum(f, &fi, "pct_roofline", roofline_pct(g, tf, c));
    jstr(f, &fi, "plan_path", x->plan_path > 0 ? qmm_path_name((qmm_path)x->plan_path) : "");
    jint(f, &fi, "plan_split", x->plan_split);
    jint(f, &fi, "plan_rest_tiles", x->plan_rest_tiles);
    jint(f, &fi, "plan_rest_split", x->plan_rest_split);
    jnum(f, &fi, "predicted_us", x->predicted_us >= 0 ? x->predicted_us : NAN);
    jnum(f, &fi, "run_predicted_us", x->run_predicted_us >= 0 ? x->run_predicted_us : NAN);
    jstr(f, &fi, "why", x->why);
    fprintf(f, "}");
}

static void json_model(FILE *f, const bench_report *r)
{
    const bench_model_setup *ms = r->model;
    const bench_calibration *cal = r->cal;
    int fi = 1;
    fprintf(f, "  \"model\": {");
    jint(f, &fi, "ok", ms && ms->ok);
    if (!ms || !ms->ok) {
        jstr(f, &fi, "why", ms ? ms->why : "not set up");
        fprintf(f, "}\n");
        return;
    }
    jint(f, &fi, "sms", ms->gpu.sms);
    jnum(f, &fi, "peak_tflops", ms->gpu.peak_tflops);
    jnum(f, &fi, "bandwidth_tbs", ms->gpu.bandwidth_tbs);
    jnum(f, &fi, "launch_us", ms->gpu.launch_us);
    jint(f, &fi, "blocks_per_sm", ms->kern.blocks_per_sm);
    jnum(f, &fi, "compute_efficiency", ms->kern.compute_efficiency);
    fprintf(f, ", \"calibration\": {");
    int fc = 1;
    jint(f, &fc, "ok", cal->ok);
    jint(f, &fc, "points", cal->points);
    jnum(f, &fc, "compute_efficiency", cal->efficiency);
    jnum(f, &fc, "launch_us", cal->launch_us);
    jnum(f, &fc, "rms_err_pct_before", cal->rms_before);
    jnum(f, &fc, "rms_err_pct_after", cal->rms_after);
    jnum(f, &fc, "worst_err_pct_before", cal->worst_before);
    jnum(f, &fc, "worst_err_pct_after", cal->worst_after);
    fprintf(f, "},\n    \"points\": [");
    for (int i = 0; i < r->npts; i++) {
        const bench_model_point *p = &r->pts[i];
        int fp = 1;
        fprintf(f, "%s\n      {", i ? "," : "");
        jstr(f, &fp, "proj", p->proj);
        jint(f, &fp, "m", p->m);
        jint(f, &fp, "n", p->n);
        jint(f, &fp, "k", p->k);
        jint(f, &fp, "split", p->split);
        jint(f, &fp, "tile_m", p->tile_m);
        jint(f, &fp, "tile_n", p->tile_n);
        jint(f, &fp, "blocks_per_sm", p->blocks_per_sm);
        jnum(f, &fp, "measured_us", p->measured_us);
        jnum(f, &fp, "planner_us", p->planner_us >= 0 ? p->planner_us : NAN);
        jnum(f, &fp, "model_us", p->model_us);
        jnum(f, &fp, "calibrated_us", p->calib_us);
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
}

void bench_write_json(FILE *f, const bench_report *r)
{
    fprintf(f, "{\n");
    json_meta(f, r);
    fprintf(f, "  \"results\": [");
    for (size_t i = 0; i < r->rs->n; i++) {
        fprintf(f, "%s\n", i ? "," : "");
        json_result(f, &r->rs->v[i], r->ceil);
    }
    fprintf(f, "\n  ],\n");
    json_model(f, r);
    fprintf(f, "}\n");
}

int bench_write_file(const char *path, void (*fn)(FILE *, const bench_report *),
                     const bench_report *r)
{
    size_t len = strlen(path) + 8;
    char *tmp = malloc(len);
    if (!tmp) return -1;
    snprintf(tmp, len, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "qmm bench ops: cannot write %s\n", tmp);
        free(tmp);
        return -1;
    }
    fn(f, r);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "qmm bench ops: writing %s failed\n", path);
        remove(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
