/* qmm bench e2e: the per-kernel breakdowns (eager events and in-graph stamps) as the child's
 * JSON lines and the parent's markdown tables, and the small JSON readers both halves use. */
#ifndef QMM_TOOLS_BENCH_E2E_PROFILE_H
#define QMM_TOOLS_BENCH_E2E_PROFILE_H

#include <stddef.h>
#include <stdio.h>

#include "bench_ops.h"
#include "qmm.h"

/* The copy ceiling measured on the H200 (bench/NOTES.md): the denominator of the in-graph
 * profile's "of ceiling" only when a run could not measure its own GPU's, and then labelled as
 * the H200's. */
#define E2E_COPY_CEILING_GBS 3920.0

/* A number after "key": in a JSON line (NAN when absent). */
double e2e_json_num(const char *line, const char *key);
/* The string after "key": into out[size] (empty when absent). */
void e2e_json_str(const char *line, const char *key, char *out, size_t size);

/* Child: "<tag> {json}\n" on stdout. */
void e2e_print_profile(const char *tag, const qmm_llm_profile *p);
/* The graph profile with the copy ceiling measured in the same process (copy->measured 0: not
 * measured, copy->note says why), "<tag> {json}\n" on f. */
void e2e_print_graph_profile(FILE *f, const char *tag, const qmm_llm_graph_profile *p,
                             const bench_ceiling *copy);

/* Parent: markdown tables of those JSON objects (nothing when json is empty). */
void e2e_profile_md(FILE *f, const char *title, const char *json);
/* The fractions divide by the JSON's measured copy ceiling; without one (a failed measurement, an
 * older child), by E2E_COPY_CEILING_GBS, and the text says it is the H200's, not measured. */
void e2e_graph_profile_md(FILE *f, const char *title, const char *json);

#endif
