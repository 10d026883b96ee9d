/* The chunked pipeline's schedule as data, without a GPU: chunking (last chunk ragged), which
 * slot each chunk uses and what each step waits for (one literal table, then properties over
 * many cases: slots never reused before their compute and their download are done, the per-slot
 * events always name the right chunk), the exact simulation beside the model, bad arguments. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { L = QMM_ENGINE_LOAD, C = QMM_ENGINE_COMPUTE, S = QMM_ENGINE_STORE };

/* A uniform plan of m_total rows in chunks of m through b slots; *n gets the chunk count.
 * Returns malloc'd steps (NULL on failure, after a failed CHECK). */
static qmm_pipeline_step *make_plan(int64_t m_total, int64_t m, int b, int *n)
{
    *n = 0;
    qmm_status st = qmm_pipeline_chunk_count(m_total, m, n);
    CHECK_OK(st);
    if (st != QMM_OK) return NULL;
    int64_t *rows = malloc(sizeof *rows * (size_t)*n);
    qmm_pipeline_step *steps = malloc(sizeof *steps * 3 * (size_t)*n);
    CHECK_OK(qmm_pipeline_uniform_rows(m_total, m, rows, (size_t)*n));
    st = qmm_pipeline_plan(rows, *n, b, steps, 3 * (size_t)*n);
    CHECK_OK(st);
    free(rows);
    if (st != QMM_OK) {
        free(steps);
        return NULL;
    }
    return steps;
}

static void test_chunking(void)
{
    static const struct {
        int64_t m_total, m;
        int chunks;
        int64_t last;
    } cases[] = {
        {1, 1, 1, 1},     {1, 7, 1, 1},     {7, 7, 1, 7},       {8, 7, 2, 1},
        {100, 7, 15, 2},  {100, 64, 2, 36}, {333, 100, 4, 33},  {333, 1, 333, 1},
        {64, 64, 1, 64},  {128, 64, 2, 64}, {4096, 512, 8, 512},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = -1;
        CHECK_OK(qmm_pipeline_chunk_count(cases[c].m_total, cases[c].m, &n));
        CHECKF(n == cases[c].chunks, "M=%lld m=%lld: %d chunks, want %d",
               (long long)cases[c].m_total, (long long)cases[c].m, n, cases[c].chunks);
        if (n != cases[c].chunks) continue;
        int64_t *rows = malloc(sizeof *rows * (size_t)n);
        CHECK_OK(qmm_pipeline_uniform_rows(cases[c].m_total, cases[c].m, rows, (size_t)n));
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            CHECK(rows[i] >= 1 && rows[i] <= cases[c].m);
            if (i < n - 1) CHECK(rows[i] == cases[c].m);
            sum += rows[i];
        }
        CHECKF(rows[n - 1] == cases[c].last, "M=%lld m=%lld: last chunk %lld rows, want %lld",
               (long long)cases[c].m_total, (long long)cases[c].m, (long long)rows[n - 1],
               (long long)cases[c].last);
        CHECK(sum == cases[c].m_total);
        free(rows);
    }
}

/* M = 10 in chunks of 4 through 2 slots, every field written out: the plan as the GPU sees it. */
static void test_plan_table(void)
{
    static const struct {
        int chunk, engine, slot;
        int64_t row0, rows;
        int dep_count;
        int dep[3][2]; /* (engine, chunk) */
    } want[] = {
        {0, L, 0, 0, 4, 0, {{0}}},
        {0, C, 0, 0, 4, 1, {{L, 0}}},
        {0, S, 0, 0, 4, 1, {{C, 0}}},
        {1, L, 1, 4, 4, 1, {{L, 0}}},
        {1, C, 1, 4, 4, 2, {{C, 0}, {L, 1}}},
        {1, S, 1, 4, 4, 2, {{S, 0}, {C, 1}}},
        {2, L, 0, 8, 2, 2, {{L, 1}, {C, 0}}},          /* slot 0's A is free after compute 0 */
        {2, C, 0, 8, 2, 3, {{C, 1}, {L, 2}, {S, 0}}},  /* slot 0's C is free after store 0 */
        {2, S, 0, 8, 2, 2, {{S, 1}, {C, 2}}},
    };
    int n;
    qmm_pipeline_step *st = make_plan(10, 4, 2, &n);
    if (!st) return;
    CHECK(n == 3);
    for (int j = 0; j < 9 && n == 3; j++) {
        const qmm_pipeline_step *s = &st[j];
        int ok = s->chunk == want[j].chunk && s->engine == want[j].engine &&
                 s->slot == want[j].slot && s->row0 == want[j].row0 && s->rows == want[j].rows &&
                 s->dep_count == want[j].dep_count;
        for (int d = 0; ok && d < s->dep_count; d++)
            ok = s->dep[d].engine == want[j].dep[d][0] && s->dep[d].chunk == want[j].dep[d][1];
        CHECKF(ok, "step %d (%s %d) differs from the table", j, qmm_model_engine_name(s->engine),
               s->chunk);
    }
    free(st);

    /* one buffer: everything alternates through slot 0 */
    st = make_plan(3, 1, 1, &n);
    if (!st) return;
    for (int j = 0; j < 9; j++) CHECK(st[j].slot == 0);
    CHECK(st[3].dep_count == 2 && st[3].dep[1].engine == C && st[3].dep[1].chunk == 0);
    CHECK(st[4].dep_count == 3 && st[4].dep[2].engine == S && st[4].dep[2].chunk == 0);
    free(st);
}

/* happens[a][b]: step a ends before step b starts, following dependencies transitively
 * (steps indexed e * n + i). Small n only. */
static unsigned char *happens_before(const qmm_pipeline_step *st, int n)
{
    int t = 3 * n;
    unsigned char *h = calloc((size_t)t * (size_t)t, 1);
    for (int j = 0; j < t; j++) { /* issue order is a topological order */
        int me = st[j].engine * n + st[j].chunk;
        for (int d = 0; d < st[j].dep_count; d++) {
            int dep = st[j].dep[d].engine * n + st[j].dep[d].chunk;
            h[(size_t)dep * t + me] = 1;
            for (int a = 0; a < t; a++)
                if (h[(size_t)a * t + dep]) h[(size_t)a * t + me] = 1;
        }
    }
    return h;
}

static void test_plan_properties(void)
{
    static const int64_t totals[] = {1, 2, 7, 10, 33, 100};
    static const int64_t ms[] = {1, 3, 7, 64};
    int cases = 0;
    for (size_t ti = 0; ti < sizeof totals / sizeof totals[0]; ti++)
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
            for (int b = 1; b <= 5; b++) {
                int64_t m_total = totals[ti], m = ms[mi];
                int n;
                qmm_pipeline_step *st = make_plan(m_total, m, b, &n);
                if (!st) return;
                cases++;
                int t = 3 * n;
                /* order, slots, rows */
                int64_t next_row = 0;
                for (int j = 0; j < t; j++) {
                    const qmm_pipeline_step *s = &st[j];
                    CHECK(s->chunk == j / 3 && s->engine == j % 3);
                    CHECK(s->slot == s->chunk % b);
                    CHECK(s->row0 == next_row);
                    CHECK(s->rows >= 1 && s->rows <= m);
                    if (s->engine == S) next_row += s->rows;
                    CHECK(s->dep_count >= 0 && s->dep_count <= QMM_PIPELINE_MAX_DEPS);
                    if (s->chunk > 0)
                        CHECK(s->dep_count >= 1 && s->dep[0].engine == s->engine &&
                              s->dep[0].chunk == s->chunk - 1);
                }
                CHECK(next_row == m_total);
                CHECK(st[t - 1].rows == m_total - (int64_t)(n - 1) * m); /* ragged last */

                /* never reuse a slot before its compute (A free) and its download (C free) */
                unsigned char *h = happens_before(st, n);
                for (int i = 0; i < n; i++)
                    for (int j = 0; j < i; j++) {
                        if (j % b != i % b) continue;
                        CHECKF(h[(size_t)(C * n + j) * t + (L * n + i)],
                               "M=%lld m=%lld b=%d: load %d may start before compute %d ends",
                               (long long)m_total, (long long)m, b, i, j);
                        CHECKF(h[(size_t)(S * n + j) * t + (C * n + i)],
                               "M=%lld m=%lld b=%d: compute %d may overwrite C before store %d",
                               (long long)m_total, (long long)m, b, i, j);
                    }
                /* each chunk flows load -> compute -> store */
                for (int i = 0; i < n; i++)
                    CHECK(h[(size_t)(L * n + i) * t + (C * n + i)] &&
                          h[(size_t)(C * n + i) * t + (S * n + i)]);
                free(h);

                /* per-(engine, slot) events: when a step waits on (e, j), the last record of
                 * event (e, j % b) in issue order is chunk j's */
                int last[3][8];
                memset(last, -1, sizeof last);
                for (int j = 0; j < t; j++) {
                    const qmm_pipeline_step *s = &st[j];
                    for (int d = 0; d < s->dep_count; d++) {
                        const qmm_pipeline_dep *dp = &s->dep[d];
                        if (dp->engine == s->engine) continue; /* stream order, no event */
                        CHECKF(last[dp->engine][dp->chunk % b] == dp->chunk,
                               "b=%d: %s %d waits on %s %d but the slot event holds chunk %d", b,
                               qmm_model_engine_name(s->engine), s->chunk,
                               qmm_model_engine_name(dp->engine), dp->chunk,
                               last[dp->engine][dp->chunk % b]);
                    }
                    last[s->engine][s->slot] = s->chunk;
                }
                free(st);
            }
    printf("    %d plans checked\n", cases);
}

/* Constant times through the exact simulation. */
static double sim_const(double l, double c, double s, int n, int b, qmm_model_segment *seg)
{
    qmm_pipeline_step *st = make_plan(n, 1, b, &n);
    if (!st) return NAN;
    double *t = malloc(sizeof *t * 3 * (size_t)n);
    for (int i = 0; i < n; i++) t[i] = l, t[n + i] = c, t[2 * n + i] = s;
    double total = NAN;
    CHECK_OK(qmm_pipeline_simulate(st, n, t, 3 * (size_t)n, seg, seg ? 3 * (size_t)n : 0, &total));
    free(t);
    free(st);
    return total;
}

static void test_simulate_document(void)
{
    /* the document's numbers: the output-slot dependency never binds here */
    static const struct {
        double l, c, s, want[3];
    } cases[] = {
        {2, 3, 1, {31, 21, 21}},
        {3, 1.5, 1, {28, 20.5, 20.5}},
        {1, 1, 1, {13, 8, 8}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int b = 1; b <= 3; b++) {
            double got = sim_const(cases[i].l, cases[i].c, cases[i].s, 6, b, NULL);
            CHECKF(got == cases[i].want[b - 1], "(%g,%g,%g) b=%d: %g, want %g", cases[i].l,
                   cases[i].c, cases[i].s, b, got, cases[i].want[b - 1]);
        }
    /* a slow download with one buffer: compute 1 must wait for store 0 (the model lets it
     * overwrite the slot): load [0,1] compute [1,2] store [2,5]; load 1 [2,3], compute 1 [5,6],
     * store 1 [6,9] -> 9, where the model says 8 */
    qmm_model_segment seg[6];
    CHECK(sim_const(1, 1, 3, 2, 1, seg) == 9);
    CHECK(seg[3].start == 5 && seg[5].end == 9);
    qmm_model_pipeline p = {2, 1, {1, 1, 3}, {NULL, NULL, NULL}};
    qmm_model_schedule r;
    CHECK_OK(qmm_model_schedule_run(&p, NULL, 0, &r));
    CHECK(r.total == 8);
}

/* Random times: the exact simulation is never earlier than the model (it has the model's
 * dependencies plus one), equal when stores take no time, and its segments respect every
 * dependency. */
static void test_simulate_vs_model(void)
{
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + (int)(test_rand_u64() % 20), b = 1 + (int)(test_rand_u64() % 4);
        int zero_store = trial % 4 == 0;
        qmm_pipeline_step *st = make_plan(n, 1, b, &n);
        if (!st) return;
        double *t = malloc(sizeof *t * 3 * (size_t)n);
        for (int e = 0; e < 3; e++)
            for (int i = 0; i < n; i++)
                t[e * n + i] = (e == S && zero_store) ? 0 : test_rand_uniform(0.1, 3.0);
        qmm_model_segment *seg = malloc(sizeof *seg * 3 * (size_t)n);
        double total;
        CHECK_OK(qmm_pipeline_simulate(st, n, t, 3 * (size_t)n, seg, 3 * (size_t)n, &total));
        qmm_model_pipeline p = {n, b, {0, 0, 0}, {t, t + n, t + 2 * n}};
        qmm_model_schedule r;
        CHECK_OK(qmm_model_schedule_run(&p, NULL, 0, &r));
        CHECKF(total >= r.total - 1e-9, "n=%d b=%d: simulation %g < model %g", n, b, total,
               r.total);
        if (zero_store)
            CHECKF(fabs(total - r.total) <= 1e-9 * total, "n=%d b=%d no store time: %g vs %g", n,
                   b, total, r.total);
        for (int j = 0; j < 3 * n; j++) {
            const qmm_pipeline_step *s = &st[j];
            const qmm_model_segment *me = &seg[s->engine * n + s->chunk];
            CHECK(fabs(me->end - me->start - t[s->engine * n + s->chunk]) < 1e-9);
            for (int d = 0; d < s->dep_count; d++)
                CHECK(me->start >= seg[s->dep[d].engine * n + s->dep[d].chunk].end);
        }
        free(seg);
        free(t);
        free(st);
    }
}

static void test_bad_arguments(void)
{
    int n;
    int64_t rows[4] = {4, 4, 2, 0};
    qmm_pipeline_step st[12];
    CHECK_STATUS(qmm_pipeline_chunk_count(0, 4, &n), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_pipeline_chunk_count(10, 0, &n), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_pipeline_chunk_count(-3, 4, &n), QMM_ERR_SHAPE);
    CHECK_STATUS(qmm_pipeline_chunk_count(10, 4, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_chunk_count((int64_t)1 << 40, 1, &n), QMM_ERR_RANGE);
    CHECK_STATUS(qmm_pipeline_uniform_rows(10, 4, rows, 2), QMM_ERR_SIZE_MISMATCH);
    CHECK_STATUS(qmm_pipeline_uniform_rows(10, 4, NULL, 3), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_plan(rows, 3, 0, st, 9), QMM_ERR_ARG);
    CHECK_STATUS(qmm_pipeline_plan(rows, 0, 2, st, 9), QMM_ERR_ARG);
    CHECK_STATUS(qmm_pipeline_plan(rows, 3, 2, st, 8), QMM_ERR_SIZE_MISMATCH);
    CHECK_STATUS(qmm_pipeline_plan(rows, 4, 2, st, 12), QMM_ERR_SHAPE); /* a chunk of 0 rows */
    CHECK_STATUS(qmm_pipeline_plan(NULL, 3, 2, st, 9), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_plan(rows, 3, 2, NULL, 9), QMM_ERR_NULL);
    CHECK_OK(qmm_pipeline_plan(rows, 3, 2, st, 9));
    CHECK(strcmp(qmm_last_error(), "") == 0);

    double t[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    double total;
    CHECK_STATUS(qmm_pipeline_simulate(st, 3, t, 8, NULL, 0, &total), QMM_ERR_SIZE_MISMATCH);
    qmm_model_segment seg[9];
    CHECK_STATUS(qmm_pipeline_simulate(st, 3, t, 9, seg, 8, &total), QMM_ERR_SIZE_MISMATCH);
    CHECK_STATUS(qmm_pipeline_simulate(NULL, 3, t, 9, NULL, 0, &total), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_simulate(st, 0, t, 9, NULL, 0, &total), QMM_ERR_ARG);
    t[4] = -1;
    CHECK_STATUS(qmm_pipeline_simulate(st, 3, t, 9, NULL, 0, &total), QMM_ERR_RANGE);
    t[4] = NAN;
    CHECK_STATUS(qmm_pipeline_simulate(st, 3, t, 9, NULL, 0, &total), QMM_ERR_RANGE);
    t[4] = 1;
    CHECK_OK(qmm_pipeline_simulate(st, 3, t, 9, seg, 9, NULL));
    /* a plan whose step waits on a later one is rejected, not simulated */
    st[1].dep[0].chunk = 2;
    CHECK_STATUS(qmm_pipeline_simulate(st, 3, t, 9, NULL, 0, &total), QMM_ERR_ARG);
    CHECK(strstr(qmm_last_error(), "has not run") != NULL);
    st[1].dep[0].chunk = 0;
    st[4] = st[1]; /* the same step twice */
    CHECK_STATUS(qmm_pipeline_simulate(st, 3, t, 9, NULL, 0, &total), QMM_ERR_ARG);
}

/* The device entry points' argument checks that need no GPU; without CUDA they say so. */
static void test_device_entry_points(void)
{
    static char dummy;
    qmm_pipeline *p = (qmm_pipeline *)&dummy; /* create must reset it to NULL on failure */
    qmm_bf16 x[4];
    void *ev[6] = {0};
    qmm_model_segment seg[3];
#ifdef QMM_HAVE_CUDA
    CHECK_STATUS(qmm_pipeline_create(NULL, NULL, 4, 2, NULL, &p), QMM_ERR_NULL);
    CHECK(p == NULL);
    CHECK_STATUS(qmm_pipeline_create(NULL, NULL, 4, 2, NULL, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_run(NULL, x, 1, x, NULL, 0), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_run_rows(NULL, x, NULL, 1, x, NULL, 0), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_timeline(NULL, 1, seg, 3), QMM_ERR_NULL);
    CHECK_STATUS(qmm_pipeline_timeline(ev, 1, seg, 3), QMM_ERR_NULL); /* NULL events inside */
    CHECK_STATUS(qmm_pipeline_timeline(ev, 0, seg, 3), QMM_ERR_ARG);
#else
    CHECK_STATUS(qmm_pipeline_create(NULL, NULL, 4, 2, NULL, &p), QMM_ERR_UNSUPPORTED);
    CHECK(p == NULL);
    CHECK(strstr(qmm_last_error(), "CUDA") != NULL);
    CHECK_STATUS(qmm_pipeline_run(NULL, x, 1, x, NULL, 0), QMM_ERR_UNSUPPORTED);
    CHECK_STATUS(qmm_pipeline_run_rows(NULL, x, NULL, 1, x, NULL, 0), QMM_ERR_UNSUPPORTED);
    CHECK_STATUS(qmm_pipeline_timeline(ev, 1, seg, 3), QMM_ERR_UNSUPPORTED);
#endif
    CHECK(qmm_pipeline_device_bytes(NULL) == 0);
    qmm_pipeline_destroy(NULL);
}

TEST_TABLE(cases, test_chunking, test_plan_table, test_plan_properties, test_simulate_document,
           test_simulate_vs_model, test_bad_arguments, test_device_entry_points);

int main(int argc, char **argv)
{
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
