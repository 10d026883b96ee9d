/* `qmm bench e2e --profile`'s in-graph breakdown (tools/bench_e2e_profile.c), on a profile made
 * up here (no GPU): the child's JSON line carries the copy ceiling it measured, and the parent's
 * markdown divides by that number and says it was measured in this run; without a measurement
 * (a failure, or an older child's line) it divides by the H200's constant and says whose it is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_e2e_profile.h"
#include "harness.h"

/* Two rows: an engine kernel moving 15 MB in 10 us (1 500 GB/s) and the matvecs between kernels,
 * 30 MB in 10 us (3 000 GB/s). */
static qmm_llm_graph_profile made_up_profile(void)
{
    qmm_llm_graph_profile p;
    memset(&p, 0, sizeof p);
    p.count = 2;
    p.name[0] = "attention", p.stamped[0] = 1, p.launches[0] = 36, p.us[0] = 10, p.bytes[0] = 15e6;
    p.name[1] = "q|k|v matvec", p.stamped[1] = 0, p.launches[1] = 36, p.us[1] = 10,
    p.bytes[1] = 30e6;
    p.stamped_us = 20, p.event_us = 21, p.kernels_per_step = 185, p.steps = 20, p.context = 32;
    p.pdl = 1;
    return p;
}

/* The child's line for p and c, NUL-terminated (the caller frees it). */
static char *child_line(const qmm_llm_graph_profile *p, const bench_ceiling *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    if (!f) return NULL;
    e2e_print_graph_profile(f, "PROFILE_GRAPH", p, c);
    fclose(f);
    return buf;
}

/* The parent's markdown of a JSON object, NUL-terminated (the caller frees it). */
static char *parent_md(const char *json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    if (!f) return NULL;
    e2e_graph_profile_md(f, "### Decode step", json);
    fclose(f);
    return buf;
}

/* The JSON object of a child's line: after the tag, without the newline (as the parent keeps
 * it). Points into line, which it modifies. */
static const char *json_of(char *line)
{
    const char *tag = "PROFILE_GRAPH ";
    int tagged = line && !strncmp(line, tag, strlen(tag));
    CHECKF(tagged, "the child's line: %.40s", line ? line : "(none)");
    if (!tagged) return "";
    char *json = line + strlen(tag);
    json[strcspn(json, "\n")] = 0;
    return json;
}

/* Every line of md's table has the header's cell count; returns the number of rows. */
static int rows_match_header(const char *md)
{
    const char *hdr = strstr(md, "| part of the step |");
    CHECK(hdr != NULL);
    if (!hdr) return 0;
    int want = -1, rows = 0;
    for (const char *p = hdr; *p && *p != '\n'; p++) want += *p == '|' && p[-1] != '\\';
    for (const char *line = strchr(hdr, '\n'); line && line[1] == '|'; line = strchr(line + 1, '\n')) {
        int n = -1;
        for (const char *p = line + 1; *p && *p != '\n'; p++) n += *p == '|' && p[-1] != '\\';
        CHECKF(n == want, "row with %d cells under a header of %d: %.60s", n, want, line + 1);
        rows += strncmp(line + 1, "|---", 4) != 0; /* the rule is not a row */
    }
    return rows;
}

/* The report's ceiling sentence, for the log. */
static void print_ceiling_line(const char *md)
{
    const char *c = md ? strstr(md, "Ceiling:") : NULL;
    printf("  %.*s\n", c ? (int)strcspn(c, "\n") : 6, c ? c : "(none)");
}

static void measured_ceiling_is_the_denominator(void)
{
    qmm_llm_graph_profile p = made_up_profile();
    bench_ceiling c = {.value = 3000.0, .min = 2900.0, .max = 3050.0, .measured = 1};
    snprintf(c.note, sizeof c.note, "measured: kernel copy of 1024 MiB, \"graph\" of 10\n");
    char *line = child_line(&p, &c);
    const char *json = json_of(line);
    CHECK(e2e_json_num(json, "copy_measured") == 1);
    CHECK(e2e_json_num(json, "copy_gbs") == 3000.0);
    CHECK(e2e_json_num(json, "copy_gbs_min") == 2900.0);
    CHECK(e2e_json_num(json, "copy_gbs_max") == 3050.0);
    char note[160];
    e2e_json_str(json, "copy_note", note, sizeof note); /* quotes and the newline made harmless */
    CHECKF(!strcmp(note, "measured: kernel copy of 1024 MiB, 'graph' of 10 "), "note: %s", note);
    CHECK(e2e_json_num(json, "stamped_us") == 20.0); /* the rest of the line as before */
    CHECK(strstr(json, "{\"name\": \"q|k|v matvec\", \"stamped\": 0, \"launches\": 36,") != NULL);
    char *md = parent_md(json);
    CHECK(md && strstr(md, "Ceiling: the 3.00 TB/s device copy, measured in this run (2.90 - "
                           "3.05 TB/s over its replays)."));
    CHECK(md && !strstr(md, "H200"));
    CHECK(md && strstr(md, "| GB/s | of ceiling |\n"));
    CHECK(md && strstr(md, "| attention | 36 | 10.0 | 50.0% | 15.00 | 1500 | 50% |\n"));
    CHECK(md && strstr(md, "| q\\|k\\|v matvec (between kernels) | 36 | 10.0 | 50.0% | 30.00 | "
                           "3000 | 100% |\n"));
    CHECK(md && rows_match_header(md) == 2);
    print_ceiling_line(md);
    free(md);
    free(line);
}

static void failed_measurement_says_the_h200s(void)
{
    qmm_llm_graph_profile p = made_up_profile();
    bench_ceiling c = {.measured = 0};
    snprintf(c.note, sizeof c.note, "cudaMalloc of 1024 MiB: out of memory");
    char *line = child_line(&p, &c);
    const char *json = json_of(line);
    CHECK(e2e_json_num(json, "copy_measured") == 0);
    CHECK(strstr(json, "\"copy_gbs\": null, ") != NULL); /* not a number that was not measured */
    CHECK(!strstr(json, "copy_gbs_min"));
    char *md = parent_md(json);
    CHECK(md && strstr(md, "Ceiling: NOT measured in this run (cudaMalloc of 1024 MiB: out of "
                           "memory): \"of H200 copy\" divides by the 3.92 TB/s copy measured on "
                           "an H200 (bench/NOTES.md), not on this GPU."));
    CHECK(md && !strstr(md, "device copy, measured"));
    CHECK(md && strstr(md, "| GB/s | of H200 copy |\n"));
    CHECK(md && strstr(md, "| 1500 | 38% |\n")); /* 1 500 / 3 920 */
    CHECK(md && strstr(md, "| 3000 | 77% |\n"));
    CHECK(md && rows_match_header(md) == 2);
    print_ceiling_line(md);
    free(md);
    free(line);
}

/* A line from before the ceiling was measured (results/ hold such JSON): no fields, no claim. */
static void older_line_without_a_ceiling(void)
{
    const char *json = "{\"kernels_per_step\": 185, \"steps\": 20, \"context\": 32, \"pdl\": 1, "
                       "\"stamped_us\": 20.000, \"event_us\": 21.000, \"entries\": [{\"name\": "
                       "\"attention\", \"stamped\": 1, \"launches\": 36, \"us\": 10.000, "
                       "\"bytes\": 15000000}]}";
    char *md = parent_md(json);
    CHECK(md && strstr(md, "Ceiling: NOT measured in this run (the profile carries no "
                           "measurement)"));
    CHECK(md && strstr(md, "| attention | 36 | 10.0 | 50.0% | 15.00 | 1500 | 38% |\n"));
    CHECK(md && rows_match_header(md) == 1);
    free(md);
}

/* A measured flag without a positive rate (a damaged line) is not a measurement. */
static void measured_flag_needs_a_rate(void)
{
    const char *json = "{\"stamped_us\": 20.000, \"copy_measured\": 1, \"copy_gbs\": 0.0, "
                       "\"entries\": []}";
    char *md = parent_md(json);
    CHECK(md && strstr(md, "Ceiling: NOT measured in this run"));
    CHECK(md && strstr(md, "| of H200 copy |"));
    free(md);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, measured_ceiling_is_the_denominator, failed_measurement_says_the_h200s,
               older_line_without_a_ceiling, measured_flag_needs_a_rate);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
