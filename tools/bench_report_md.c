/* `qmm bench ops`: the markdown report (what a reader and the README quote). Pure (no CUDA). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ops.h"

#define DASH "–"

/* A cell: the number with `digits` decimals, or "–" when it is missing. */
static const char *num(char *buf, size_t size, double v, int digits)
{
    if (!isfinite(v)) return DASH;
    if (fabs(v) < 0.5 * pow(10.0, -digits)) v = 0.0; /* no "-0" */
    snprintf(buf, size, "%.*f", digits, v);
    return buf;
}

/* µs of a contender: graph median, "FAIL" or "–" when absent. */
static const char *us_cell(char *buf, size_t size, const bench_result *r)
{
    if (!r) return DASH;
    if (r->status != BENCH_PASS) return "FAIL";
    return num(buf, size, r->t.graph_med, 2);
}

static double us_of(const bench_result *r)
{
    return r && r->status == BENCH_PASS ? r->t.graph_med : NAN;
}

static void write_header(FILE *f, const bench_report *r)
{
    const bench_meta *m = r->meta;
    const bench_ceilings *c = r->ceil;
    fprintf(f, "# qmm operator benchmark: W4A16 g128 beside cuBLAS bf16\n\n");
    fprintf(f, "| | |\n|---|---|\n");
    fprintf(f, "| GPU | %s (sm_%d%d, %d SMs, L2 %.0f MiB, SM clock %d MHz, memory clock %d MHz, "
               "%d-bit bus) |\n",
            m->gpu, m->cc_major, m->cc_minor, m->sms, (double)m->l2_bytes / (1024.0 * 1024.0),
            m->sm_clock_khz / 1000, m->mem_clock_khz / 1000, m->mem_bus_bits);
    fprintf(f, "| driver / runtime / cuBLAS | %d / %d / %d |\n", m->driver_version,
            m->runtime_version, m->cublas_version);
    fprintf(f, "| commit | %s |\n| date | %s |\n| seed | %llu |\n", m->commit, m->date,
            (unsigned long long)m->seed);
    fprintf(f, "| weights | %s |\n",
            m->hot ? "hot: one copy, L2-resident after the first call"
                   : "cold: each call uses the next of several copies totalling >= 4x the L2");
    fprintf(f, "| timing | CUDA graph of >= %d calls (a replay >= %.0f µs, every copy used), "
               "median of %d replays, per call; eager = the same calls launched one by one |\n",
            m->calls_min, r->opts ? r->opts->target_replay_us : 0.0, m->reps);
    fprintf(f, "| copy ceiling | %.0f GB/s (%.0f–%.0f) %s |\n", c->copy.value, c->copy.min,
            c->copy.max, c->copy.note);
    fprintf(f, "| bf16 ceiling | %.1f TFLOP/s (%.1f–%.1f) %s |\n", c->cublas.value,
            c->cublas.min, c->cublas.max, c->cublas.note);
    fprintf(f, "| command | `%s` |\n", m->command);
    if (*bench_experiment_env()) fprintf(f, "| environment | `%s` |\n", bench_experiment_env());
    fputc('\n', f);
}

/* Every distinct (proj, m) in result order, as indices of their first row. */
static size_t *case_starts(const bench_results *rs, size_t *count)
{
    size_t *idx = malloc(sizeof *idx * (rs->n ? rs->n : 1)), n = 0;
    if (!idx) return NULL;
    for (size_t i = 0; i < rs->n; i++) {
        int seen = 0;
        for (size_t j = 0; j < n && !seen; j++)
            seen = rs->v[idx[j]].m == rs->v[i].m && !strcmp(rs->v[idx[j]].proj, rs->v[i].proj);
        if (!seen) idx[n++] = i;
    }
    *count = n;
    return idx;
}

static void write_main_table(FILE *f, const bench_report *r, const size_t *cases, size_t ncases)
{
    const bench_results *rs = r->rs;
    fprintf(f, "## Operators (µs per call, graph median)\n\n");
    fprintf(f, "×: speedup (time of the other / time of auto or split-K; > 1 means faster). "
               "GB/s counts packed weights + scales + biases + A + C once; TFLOP/s = 2·M·N·K / "
               "time. %% copy and %% bf16 are of the ceilings above; %% W4 roofline is the larger "
               "of the two: the time of max(bytes / copy ceiling, flops / bf16 ceiling) over auto's."
               "\n\n");
    fprintf(f, "| proj | K→N | M | plan | auto | tiled | split-K@plan | best split-K (s) | matvec "
               "| read | auto ÷ read | dense | cuBLAS | auto eager | auto × cuBLAS | auto × tiled | split-K × tiled "
               "| auto GB/s | %% copy | auto TFLOP/s | %% bf16 | %% W4 roofline | predicted "
               "| pred. error %% | auto min–max |\n");
    fprintf(f, "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
               "---:|---:|---:|---:|---:|---:|---:|---|\n");
    int predicted = 0, within = 0; /* issue 11: the model within 15 % of auto */
    for (size_t c = 0; c < ncases; c++) {
        const bench_result *first = &rs->v[cases[c]];
        const char *p = first->proj;
        int64_t m = first->m;
        const bench_result *au = bench_results_find(rs, p, m, "auto", 0);
        const bench_result *ti = bench_results_find(rs, p, m, "tiled", 0);
        const bench_result *sp = bench_results_find(rs, p, m, "splitk_plan", 0);
        const bench_result *mv = bench_results_find(rs, p, m, "matvec", 0);
        const bench_result *dn = bench_results_find(rs, p, m, "dense", 0);
        const bench_result *rd = bench_results_find(rs, p, m, "read", 0);
        const bench_result *cb = bench_results_find(rs, p, m, "cublas", 0);
        const bench_result *best = bench_results_best_split(rs, p, m);
        char b[19][48];
        char plan[48], bestcell[64], spread[64];
        if (first->plan_path > 0 && first->plan_rest_tiles > 0) /* clusters, and tiles aside × their split */
            snprintf(plan, sizeof plan, "%s/%d+%dr%d", qmm_path_name((qmm_path)first->plan_path),
                     first->plan_split, first->plan_rest_tiles, first->plan_rest_split);
        else if (first->plan_path > 0)
            snprintf(plan, sizeof plan, "%s/%d", qmm_path_name((qmm_path)first->plan_path),
                     first->plan_split);
        else
            snprintf(plan, sizeof plan, DASH);
        if (best)
            snprintf(bestcell, sizeof bestcell, "%.2f (%d)", best->t.graph_med, best->split);
        else
            snprintf(bestcell, sizeof bestcell, DASH);
        double t_au = us_of(au), t_ti = us_of(ti), t_cb = us_of(cb), t_best = us_of(best);
        double gbps = au ? au->bytes / (t_au * 1e3) : NAN;
        double pred = first->predicted_us >= 0 ? first->predicted_us : NAN;
        double pred_err = 100.0 * (pred - t_au) / t_au; /* NAN without either */
        if (isfinite(pred_err)) predicted++, within += fabs(pred_err) <= 15.0;
        double tflops = au ? au->flops / (t_au * 1e6) : NAN;
        if (au && au->status == BENCH_PASS)
            snprintf(spread, sizeof spread, "%.2f–%.2f", au->t.graph_min, au->t.graph_max);
        else
            snprintf(spread, sizeof spread, DASH);
        fprintf(f, "| %s | %lld→%lld | %lld | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                   "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                p, (long long)first->k, (long long)first->n, (long long)m, plan,
                us_cell(b[0], 48, au), us_cell(b[1], 48, ti), us_cell(b[2], 48, sp), bestcell,
                us_cell(b[3], 48, mv), us_cell(b[15], 48, rd), num(b[16], 48, t_au / us_of(rd), 2),
                us_cell(b[14], 48, dn), us_cell(b[4], 48, cb),
                num(b[5], 48, au && au->status == BENCH_PASS ? au->t.eager_med : NAN, 2),
                num(b[6], 48, t_cb / t_au, 2), num(b[7], 48, t_ti / t_au, 2),
                num(b[8], 48, t_ti / t_best, 2), num(b[9], 48, gbps, 0),
                num(b[10], 48, 100.0 * gbps / r->ceil->copy.value, 0), num(b[11], 48, tflops, 1),
                num(b[12], 48, 100.0 * tflops / r->ceil->cublas.value, 0),
                num(b[18], 48, 100.0 * fmax(gbps / r->ceil->copy.value,
                                            tflops / r->ceil->cublas.value), 0),
                num(b[13], 48, pred, 2), num(b[17], 48, pred_err, 0), spread);
    }
    fprintf(f, "\nThe plan's predicted time (qmm_plan.predicted_us) is within 15 %% of auto's "
               "measured time on %d of %d predicted cases.\n\n", within, predicted);
}

static void write_split_table(FILE *f, const bench_report *r, const size_t *cases, size_t ncases)
{
    const bench_results *rs = r->rs;
    fprintf(f, "## Split-K sweep (µs per call, graph median; s = K partitions, 1 = unsplit tiled)\n\n");
    fprintf(f, "| proj | M | plan split | per split | best |\n|---|---:|---:|---|---:|\n");
    for (size_t c = 0; c < ncases; c++) {
        const bench_result *first = &rs->v[cases[c]];
        char line[1024] = "", cell[64];
        size_t used = 0;
        const bench_result *ti = bench_results_find(rs, first->proj, first->m, "tiled", 0);
        if (ti) used += (size_t)snprintf(line + used, sizeof line - used, "1: %s",
                                         us_cell(cell, sizeof cell, ti));
        for (size_t i = 0; i < rs->n && used < sizeof line - 64; i++) {
            const bench_result *s = &rs->v[i];
            if (s->m != first->m || strcmp(s->proj, first->proj) || strcmp(s->contender, "splitk"))
                continue;
            used += (size_t)snprintf(line + used, sizeof line - used, "%s%d: %s", used ? " · " : "",
                                     s->split, us_cell(cell, sizeof cell, s));
        }
        const bench_result *best = bench_results_best_split(rs, first->proj, first->m);
        if (best && ti && ti->status == BENCH_PASS && ti->t.graph_med <= best->t.graph_med)
            best = ti;
        fprintf(f, "| %s | %lld | %d | %s | %s |\n", first->proj, (long long)first->m,
                first->plan_split, used ? line : DASH,
                best ? (snprintf(cell, sizeof cell, "%d", best == ti ? 1 : best->split), cell)
                     : DASH);
    }
    fprintf(f, "\n");
}

static void write_stage_table(FILE *f, const bench_report *r, const size_t *cases, size_t ncases)
{
    const bench_results *rs = r->rs;
    int any = 0;
    for (size_t i = 0; i < rs->n && !any; i++) any = !strncmp(rs->v[i].contender, "tiled_st", 8);
    if (!any) return;
    fprintf(f, "## Tiled pipeline stages (µs per call, graph median)\n\n");
    fprintf(f, "| proj | M | default | 1 | 2 | 3 | 4 |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (size_t c = 0; c < ncases; c++) {
        const bench_result *first = &rs->v[cases[c]];
        char b[5][48], name[24];
        const bench_result *st[5];
        st[0] = bench_results_find(rs, first->proj, first->m, "tiled", 0);
        for (int s = 1; s <= 4; s++) {
            snprintf(name, sizeof name, "tiled_st%d", s);
            st[s] = bench_results_find(rs, first->proj, first->m, name, 0);
        }
        fprintf(f, "| %s | %lld | %s | %s | %s | %s | %s |\n", first->proj, (long long)first->m,
                us_cell(b[0], 48, st[0]), us_cell(b[1], 48, st[1]), us_cell(b[2], 48, st[2]),
                us_cell(b[3], 48, st[3]), us_cell(b[4], 48, st[4]));
    }
    fprintf(f, "\n");
}

static void write_failures(FILE *f, const bench_results *rs)
{
    int any = 0;
    for (size_t i = 0; i < rs->n; i++) {
        const bench_result *r = &rs->v[i];
        if (r->status == BENCH_PASS) continue;
        if (!any) fprintf(f, "## Failures (not timed)\n\n");
        any = 1;
        fprintf(f, "* %s M=%lld %s split=%d stages=%d: %s\n", r->proj, (long long)r->m,
                r->contender, r->split, r->stages, r->why);
    }
    if (any) fprintf(f, "\n");
}

static double err_pct(double pred, double meas) { return 100.0 * (pred - meas) / meas; }

static void write_model(FILE *f, const bench_report *r)
{
    const bench_model_setup *ms = r->model;
    const bench_calibration *cal = r->cal;
    fprintf(f, "## Model vs measurement (refined split-K model, k/v/o/down at M = 16, 32, 64)\n\n");
    if (!ms || !ms->ok) {
        fprintf(f, "Model not available: %s\n\n", ms ? ms->why : "not set up");
        return;
    }
    if (r->npts == 0) {
        fprintf(f, "No points: run k, v, o or down at M = 16, 32 or 64 to compare.\n\n");
        return;
    }
    fprintf(f, "Inputs: %d SMs, peak %.1f TFLOP/s and bandwidth %.3f TB/s (this run's ceilings), "
               "launch %.2f µs; per point the tile and resident blocks/SM of the configuration "
               "that ran; efficiency %.3f, W4 %.5f B/weight, %s partials. \"planner\" is the "
               "library's own prediction (qmm_plan.predicted_us) for the same split.\n\n",
            ms->gpu.sms, ms->gpu.peak_tflops, ms->gpu.bandwidth_tbs, ms->gpu.launch_us,
            ms->kern.compute_efficiency, ms->kern.weight_bytes_per_elem,
            qmm_dtype_name(ms->kern.partial_type));
    fprintf(f, "| proj | M | s | tile | blocks/SM | measured µs | model µs | error %% "
               "| calibrated µs | error %% | planner µs | error %% |\n");
    fprintf(f, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < r->npts; i++) {
        const bench_model_point *p = &r->pts[i];
        char b[6][48];
        double e0 = err_pct(p->model_us, p->measured_us), e1 = err_pct(p->calib_us, p->measured_us);
        double pl = p->planner_us >= 0 ? p->planner_us : NAN;
        fprintf(f, "| %s | %lld | %d | %dx%d | %d | %.2f | %.2f | %s%s | %s | %s | %s | %s |\n",
                p->proj, (long long)p->m, p->split, p->tile_m, p->tile_n,
                p->blocks_per_sm > 0 ? p->blocks_per_sm : ms->kern.blocks_per_sm, p->measured_us,
                p->model_us, num(b[0], 48, e0, 0), fabs(e0) > BENCH_MODEL_ERR_FLAG ? " (!)" : "",
                num(b[1], 48, p->calib_us, 2), num(b[2], 48, e1, 0), num(b[3], 48, pl, 2),
                num(b[4], 48, err_pct(pl, p->measured_us), 0));
    }
    fprintf(f, "\n(!) = off by more than %.0f%%.\n\n", BENCH_MODEL_ERR_FLAG);
    if (cal->ok)
        fprintf(f, "Calibration over %d points (least squares on the relative error): compute "
                   "efficiency %.3f (was %.3f), launch overhead %.2f µs (was %.2f). RMS error "
                   "%.0f%% → %.0f%%, worst %.0f%% → %.0f%%. For the tuning table (src/tune): "
                   "tiled_tflops ≈ %.0f (efficiency × %.0f), gpu.launch_us ≈ %.2f.\n\n",
                cal->points, cal->efficiency, ms->kern.compute_efficiency, cal->launch_us,
                ms->gpu.launch_us, cal->rms_before, cal->rms_after, cal->worst_before,
                cal->worst_after, cal->efficiency * ms->gpu.peak_tflops, ms->gpu.peak_tflops,
                cal->launch_us);
    if (!cal->ok)
        fprintf(f, "Calibration: needs at least two points (%d).\n\n", cal->points);
    else if (cal->efficiency >= 0.999 || cal->launch_us <= 0.0)
        fprintf(f, "The fit stopped at a bound (efficiency <= 1, launch >= 0): the model's shape, "
                   "not only its constants, disagrees with the measurements.\n\n");

    /* What the planner cares about: does the model pick the split that measured fastest? */
    fprintf(f, "| proj | M | measured best s | model best s | calibrated best s |\n"
               "|---|---:|---:|---:|---:|\n");
    for (int i = 0; i < r->npts; i++) {
        const bench_model_point *p = &r->pts[i];
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = !(r->pts[j].m == p->m && !strcmp(r->pts[j].proj, p->proj));
        if (!first) continue;
        int bm = 0, bp = 0, bc = 0;
        double tm = INFINITY, tp = INFINITY, tc = INFINITY;
        for (int j = i; j < r->npts; j++) {
            const bench_model_point *q = &r->pts[j];
            if (q->m != p->m || strcmp(q->proj, p->proj)) continue;
            if (q->measured_us < tm) tm = q->measured_us, bm = q->split;
            if (q->model_us < tp) tp = q->model_us, bp = q->split;
            if (q->calib_us < tc) tc = q->calib_us, bc = q->split;
        }
        fprintf(f, "| %s | %lld | %d | %d | %d |\n", p->proj, (long long)p->m, bm, bp, bc);
    }
    fprintf(f, "\n");
}

void bench_write_md(FILE *f, const bench_report *r)
{
    size_t ncases = 0;
    size_t *cases = case_starts(r->rs, &ncases);
    write_header(f, r);
    if (!cases) {
        fprintf(f, "(out of memory while writing the report)\n");
        return;
    }
    write_main_table(f, r, cases, ncases);
    write_split_table(f, r, cases, ncases);
    write_stage_table(f, r, cases, ncases);
    write_failures(f, r->rs);
    write_model(f, r);
    free(cases);
}
