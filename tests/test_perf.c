/* The pipeline schedule model: the document's numbers, exact; its properties on random cases;
 * the seeded jitter case where a third buffer helps; the text Gantt chart; argument checks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Constant-time pipeline; seg may be NULL. */
static qmm_model_schedule run_const(double l, double c, double s, int n, int b,
                                    qmm_model_segment *seg)
{
    qmm_model_pipeline p = {n, b, {l, c, s}, {NULL, NULL, NULL}};
    qmm_model_schedule r = {0};
    CHECK_OK(qmm_model_schedule_run(&p, seg, seg ? (size_t)3 * n : 0, &r));
    return r;
}

static void test_document_totals(void)
{
    static const struct {
        double l, c, s, want[3];
    } cases[] = {
        {2, 3, 1, {31, 21, 21}},     /* compute-heavy */
        {3, 1.5, 1, {28, 20.5, 20.5}}, /* copy-heavy */
        {1, 1, 1, {13, 8, 8}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int b = 1; b <= 3; b++) {
            qmm_model_schedule r = run_const(cases[i].l, cases[i].c, cases[i].s, 6, b, NULL);
            CHECKF(r.total == cases[i].want[b - 1], "times (%g,%g,%g), %d buffers: %g, want %g",
                   cases[i].l, cases[i].c, cases[i].s, b, r.total, cases[i].want[b - 1]);
        }
}

static void test_closed_form(void)
{
    /* Compute-bound: the document's formula is exact for every buffer count. */
    for (int b = 1; b <= 3; b++) {
        qmm_model_schedule r = run_const(2, 3, 1, 6, b, NULL);
        CHECK(r.closed_form == (b == 1 ? 31 : 21));
        CHECK(r.closed_form_exact);
    }
    /* Copy-bound: l + n*max + s = 3 + 18 + 1 = 22 against the simulated 20.5. */
    qmm_model_schedule one = run_const(3, 1.5, 1, 6, 1, NULL);
    CHECK(one.closed_form == 28 && one.closed_form_exact);
    for (int b = 2; b <= 3; b++) {
        qmm_model_schedule r = run_const(3, 1.5, 1, 6, b, NULL);
        CHECKF(r.closed_form == 22 && !r.closed_form_exact, "b=%d: closed %g exact %d", b,
               r.closed_form, r.closed_form_exact);
    }
    qmm_model_schedule eq = run_const(1, 1, 1, 6, 2, NULL);
    CHECK(eq.closed_form == 8 && eq.closed_form_exact);
}

static void test_segments_and_busy(void)
{
    qmm_model_segment seg[18];
    /* Two buffers, (2,3,1): compute runs back to back from t = 2; load 2 waits for compute 0. */
    qmm_model_schedule r = run_const(2, 3, 1, 6, 2, seg);
    for (int i = 0; i < 6; i++) {
        CHECKF(seg[6 + i].start == 2 + 3 * i && seg[6 + i].end == 5 + 3 * i, "compute %d", i);
        CHECKF(seg[12 + i].start == 5 + 3 * i && seg[12 + i].end == 6 + 3 * i, "store %d", i);
    }
    CHECK(seg[0].start == 0 && seg[0].end == 2 && seg[1].start == 2 && seg[1].end == 4);
    CHECK(seg[2].start == 5 && seg[2].end == 7); /* buffer 0 is free at 5 */
    CHECK(r.busy[0] == 12 && r.busy[1] == 18 && r.busy[2] == 6);
    CHECK(r.idle[0] == 9 && r.idle[1] == 3 && r.idle[2] == 15);
    CHECK(r.stall[1] == 0);
    /* One buffer: the compute engine waits for each load after the first (5 gaps of 2). */
    qmm_model_schedule one = run_const(2, 3, 1, 6, 1, seg);
    CHECK(one.stall[1] == 10 && one.idle[1] == 13);
    CHECK(seg[1].start == 5 && seg[6 + 1].start == 7);
    /* Without a segment array, the same totals. */
    qmm_model_schedule again = run_const(2, 3, 1, 6, 1, NULL);
    CHECK(again.total == one.total && again.stall[1] == one.stall[1]);
}

static double rnd_time(void)
{
    /* Some zeros and ties, to reach the corners. */
    double u = test_rand_uniform(0, 1);
    if (u < 0.05) return 0;
    if (u < 0.15) return 1;
    return test_rand_uniform(0, 5);
}

static void test_more_buffers_never_slower(void)
{
    /* Raising b only relaxes the load's constraint, so every event moves earlier or stays. */
    for (int trial = 0; trial < 300; trial++) {
        int n = 1 + (int)(test_rand_u64() % 40);
        double *t = malloc((size_t)3 * n * sizeof *t);
        for (int i = 0; i < 3 * n; i++) t[i] = rnd_time();
        int constant = trial % 3 == 0;
        qmm_model_pipeline p = {n, 1, {rnd_time(), rnd_time(), rnd_time()}, {NULL, NULL, NULL}};
        if (!constant)
            for (int e = 0; e < 3; e++) p.per_tile[e] = t + (size_t)e * n;
        double prev = INFINITY;
        for (int b = 1; b <= n + 2; b++) {
            p.buffers = b;
            qmm_model_schedule r;
            CHECK_OK(qmm_model_schedule_run(&p, NULL, 0, &r));
            CHECKF(r.total <= prev, "trial %d n=%d b=%d: %g after %g", trial, n, b, r.total,
                   prev);
            /* b >= n: the buffer never binds, so nothing changes after b = n. */
            if (b > n) CHECKF(r.total == prev, "trial %d n=%d b=%d", trial, n, b);
            prev = r.total;
        }
        free(t);
    }
}

static void test_constant_times_formula(void)
{
    /* b >= 2, constant times: one tile's path plus (n-1) periods of the slowest engine. */
    for (int trial = 0; trial < 500; trial++) {
        double l = rnd_time(), c = rnd_time(), s = rnd_time();
        int n = 1 + (int)(test_rand_u64() % 50), b = 2 + (int)(test_rand_u64() % 4);
        qmm_model_schedule r = run_const(l, c, s, n, b, NULL);
        double want = l + c + s + (n - 1) * fmax(l, fmax(c, s));
        CHECKF(fabs(r.total - want) <= 1e-9 * fmax(1, want),
               "(%g,%g,%g) n=%d b=%d: %g, want %g", l, c, s, n, b, r.total, want);
        /* b = 1 alternates load and compute; stores keep up while s <= l + c. */
        qmm_model_schedule one = run_const(l, c, s, n, 1, NULL);
        if (s <= l + c)
            CHECKF(fabs(one.total - (n * (l + c) + s)) <= 1e-9 * fmax(1, one.total),
                   "(%g,%g,%g) n=%d b=1: %g", l, c, s, n, one.total);
        /* l + n*max + s against l + c + s + (n-1)*max: exact iff compute is the slowest. */
        double mx = fmax(l, s);
        if (c >= mx || mx - c > 1e-6)
            CHECKF(r.closed_form_exact == (c >= mx), "(%g,%g,%g) n=%d: exact flag %d", l, c, s,
                   n, r.closed_form_exact);
    }
}

static void test_jitter_third_buffer(void)
{
    /* Seeded: (2,3,1) x (1 + 0.3u), 6 tiles, seed 8. A slow load behind a fast compute
     * stalls with two buffers; a third absorbs it. (The CLI's default jitter seed.) */
    double base[3] = {2, 3, 1}, t[18];
    CHECK_OK(qmm_model_jitter_times(base, 6, 0.3, 8, t, 18));
    double total[4];
    for (int b = 1; b <= 3; b++) {
        qmm_model_pipeline p = {6, b, {0, 0, 0}, {t, t + 6, t + 12}};
        qmm_model_schedule r;
        CHECK_OK(qmm_model_schedule_run(&p, NULL, 0, &r));
        total[b] = r.total;
    }
    printf("    jitter seed 8: %.4f / %.4f / %.4f for 1 / 2 / 3 buffers\n", total[1], total[2],
           total[3]);
    CHECK(fabs(total[1] - 29.3652) < 1e-4);
    CHECK(fabs(total[2] - 19.1509) < 1e-4);
    CHECK(fabs(total[3] - 18.8208) < 1e-4);
    CHECK(total[3] < total[2] - 0.3);
    /* With constant times the third buffer changes nothing. */
    CHECK(run_const(2, 3, 1, 6, 3, NULL).total == run_const(2, 3, 1, 6, 2, NULL).total);
}

static void test_jitter_times(void)
{
    double base[3] = {2, 3, 0}, a[30], b[30];
    CHECK_OK(qmm_model_jitter_times(base, 10, 0.25, 42, a, 30));
    CHECK_OK(qmm_model_jitter_times(base, 10, 0.25, 42, b, 30));
    CHECK(!memcmp(a, b, sizeof a)); /* same seed, same times */
    int differs = 0;
    for (int e = 0; e < 3; e++)
        for (int i = 0; i < 10; i++) {
            double x = a[e * 10 + i];
            CHECKF(x >= base[e] * 0.75 && (x < base[e] * 1.25 || base[e] == 0), "e%d i%d: %g", e,
                   i, x);
        }
    CHECK_OK(qmm_model_jitter_times(base, 10, 0.25, 43, b, 30));
    for (int i = 0; i < 20; i++) differs |= a[i] != b[i];
    CHECK(differs);
    CHECK_OK(qmm_model_jitter_times(base, 10, 0, 43, b, 30)); /* no jitter: the base times */
    for (int i = 0; i < 10; i++) CHECK(b[i] == 2 && b[10 + i] == 3 && b[20 + i] == 0);
}

static void test_gantt(void)
{
    /* constant times (load, compute, store), tiles, buffers; time per column, width; the chart
     * (its first rows when shorter), into a buffer of exactly 3 rows of width + 1 */
    static const struct {
        double l, c, s;
        int tiles, buffers;
        double unit;
        int width;
        const char *want;
    } cases[] = {
        {2, 3, 1, 6, 2, 0.5, 42, "00001111..2222..3333..4444..5555..........\n"
                                 "....000000111111222222333333444444555555..\n"
                                 "..........00....11....22....33....44....55\n"},
        {2, 3, 1, 6, 1, 1, 31, "00...11...22...33...44...55....\n"
                               "..000..111..222..333..444..555.\n"
                               ".....0....1....2....3....4....5\n"},
        {1, 1, 1, 12, 2, 1, 14, "012345678901..\n"}, /* twelve tiles: digits wrap to tile % 10 */
    };
    qmm_model_segment seg[36];
    char buf[3 * 43 + 1];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_const(cases[i].l, cases[i].c, cases[i].s, cases[i].tiles, cases[i].buffers, seg);
        size_t size = 3 * (size_t)(cases[i].width + 1) + 1;
        CHECK_OK(qmm_model_gantt(seg, cases[i].tiles, cases[i].unit, cases[i].width, buf, size));
        CHECKF(!strncmp(buf, cases[i].want, strlen(cases[i].want)), "case %zu got:\n%s", i, buf);
    }
    run_const(2, 3, 1, 6, 1, seg);
    const size_t one = 3 * 32 + 1;
    CHECK_STATUS(qmm_model_gantt(seg, 6, 1, 31, buf, one - 1), QMM_ERR_WORKSPACE);
    CHECK_STATUS(qmm_model_gantt(seg, 6, 0, 31, buf, one), QMM_ERR_RANGE);
    CHECK_STATUS(qmm_model_gantt(seg, 6, 1, 0, buf, one), QMM_ERR_ARG);
    CHECK_STATUS(qmm_model_gantt(NULL, 6, 1, 31, buf, one), QMM_ERR_NULL);
}

static void test_arguments(void)
{
    qmm_model_schedule r;
    qmm_model_segment seg[18];
    qmm_model_pipeline p = {6, 2, {2, 3, 1}, {NULL, NULL, NULL}};
    CHECK_STATUS(qmm_model_schedule_run(NULL, NULL, 0, &r), QMM_ERR_NULL);
    CHECK_STATUS(qmm_model_schedule_run(&p, NULL, 0, NULL), QMM_ERR_NULL);
    CHECK_STATUS(qmm_model_schedule_run(&p, seg, 17, &r), QMM_ERR_SIZE_MISMATCH);
    CHECK(strstr(qmm_last_error(), "seg_count") != NULL);
    p.tiles = 0;
    CHECK_STATUS(qmm_model_schedule_run(&p, NULL, 0, &r), QMM_ERR_ARG);
    p.tiles = 6;
    p.buffers = 0;
    CHECK_STATUS(qmm_model_schedule_run(&p, NULL, 0, &r), QMM_ERR_ARG);
    p.buffers = 2;
    p.time[1] = -1;
    CHECK_STATUS(qmm_model_schedule_run(&p, NULL, 0, &r), QMM_ERR_RANGE);
    p.time[1] = NAN;
    CHECK_STATUS(qmm_model_schedule_run(&p, NULL, 0, &r), QMM_ERR_RANGE);
    double arr[6] = {1, 1, 1, INFINITY, 1, 1};
    p.time[1] = 3;
    p.per_tile[2] = arr;
    CHECK_STATUS(qmm_model_schedule_run(&p, NULL, 0, &r), QMM_ERR_RANGE);
    CHECK(strstr(qmm_last_error(), "store") != NULL);
    arr[3] = 1;
    CHECK_OK(qmm_model_schedule_run(&p, seg, 18, &r));
    CHECK(strcmp(qmm_last_error(), "") == 0);
    double base[3] = {1, 1, 1}, t[6];
    CHECK_STATUS(qmm_model_jitter_times(base, 2, 1.0, 1, t, 6), QMM_ERR_RANGE);
    CHECK_STATUS(qmm_model_jitter_times(base, 2, -0.1, 1, t, 6), QMM_ERR_RANGE);
    CHECK_STATUS(qmm_model_jitter_times(base, 2, 0.1, 1, t, 5), QMM_ERR_SIZE_MISMATCH);
    CHECK_STATUS(qmm_model_jitter_times(NULL, 2, 0.1, 1, t, 6), QMM_ERR_NULL);
    CHECK(!strcmp(qmm_model_engine_name(QMM_ENGINE_COMPUTE), "compute"));
    CHECK(!strcmp(qmm_model_engine_name(3), "?"));
}

TEST_TABLE(cases, test_document_totals, test_closed_form, test_segments_and_busy,
           test_more_buffers_never_slower, test_constant_times_formula, test_jitter_third_buffer,
           test_jitter_times, test_gantt, test_arguments);

int main(int argc, char **argv)
{
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
