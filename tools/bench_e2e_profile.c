/* qmm bench e2e: per-kernel breakdowns, printed by the child as JSON and by the parent as
 * markdown (see bench_e2e_profile.h). */
#include "bench_e2e_profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double e2e_json_num(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(line, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

void e2e_json_str(const char *line, const char *key, char *out, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    const char *p = strstr(line, pat);
    out[0] = 0;
    if (!p) return;
    p += strlen(pat);
    const char *e = strchr(p, '"');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= size) n = size - 1;
    memcpy(out, p, n);
    out[n] = 0;
}

void e2e_print_profile(const char *tag, const qmm_llm_profile *p)
{
    printf("%s {\"total_ms\": %.6f, \"entries\": [", tag, p->total_ms);
    for (int i = 0; i < p->count; i++)
        printf("%s{\"name\": \"%s\", \"ms\": %.6f, \"launches\": %d}", i ? ", " : "", p->name[i],
               p->ms[i], p->launches[i]);
    printf("]}\n");
}

/* The copy ceiling's fields of the graph JSON (before "entries": a reader finds them first). The
 * note is a CUDA message or ours: quotes and control characters become ' and space, so it stays
 * one JSON string that e2e_json_str reads whole. */
static void print_copy_ceiling(FILE *f, const bench_ceiling *c)
{
    char note[sizeof c->note];
    size_t k = 0;
    for (const char *p = c->note; *p && k + 1 < sizeof note; p++)
        note[k++] = *p == '"' || *p == '\\' ? '\'' : (unsigned char)*p < 0x20 ? ' ' : *p;
    note[k] = 0;
    if (c->measured && isfinite(c->value) && isfinite(c->min) && isfinite(c->max)) /* valid JSON */
        fprintf(f, "\"copy_measured\": 1, \"copy_gbs\": %.1f, \"copy_gbs_min\": %.1f, "
                "\"copy_gbs_max\": %.1f, ", c->value, c->min, c->max);
    else
        fprintf(f, "\"copy_measured\": 0, \"copy_gbs\": null, ");
    fprintf(f, "\"copy_note\": \"%s\", ", note);
}

void e2e_print_graph_profile(FILE *f, const char *tag, const qmm_llm_graph_profile *p,
                             const bench_ceiling *copy)
{
    fprintf(f, "%s {\"kernels_per_step\": %d, \"steps\": %d, \"context\": %lld, \"pdl\": %d, "
            "\"stamped_us\": %.3f, \"event_us\": %.3f, ",
            tag, p->kernels_per_step, p->steps, (long long)p->context, p->pdl, p->stamped_us,
            p->event_us);
    print_copy_ceiling(f, copy);
    fprintf(f, "\"entries\": [");
    for (int i = 0; i < p->count; i++)
        fprintf(f, "%s{\"name\": \"%s\", \"stamped\": %d, \"launches\": %d, \"us\": %.3f, "
                "\"bytes\": %.0f}", i ? ", " : "", p->name[i], p->stamped[i], p->launches[i],
                p->us[i], p->bytes[i]);
    fprintf(f, "]}\n");
}

/* Markdown table of one profile JSON ({"total_ms": x, "entries": [{"name","ms","launches"}]}). */
void e2e_profile_md(FILE *f, const char *title, const char *json)
{
    if (!json[0]) return;
    double total = e2e_json_num(json, "total_ms");
    fprintf(f, "\n%s (eager, CUDA events around each kernel family; total %.3f ms)\n\n", title,
            total);
    fprintf(f, "| kernels | ms | share | launches |\n|---|---:|---:|---:|\n");
    const char *p = strstr(json, "[");
    while (p && (p = strstr(p, "{\"name\": \""))) {
        char name[64];
        e2e_json_str(p, "name", name, sizeof name);
        double ms = e2e_json_num(p, "ms"), l = e2e_json_num(p, "launches");
        fprintf(f, "| %s | %.4f | %.1f%% | %.0f |\n", name, ms, total > 0 ? 100 * ms / total : 0, l);
        p++;
    }
}

/* The denominator of the fractions and the sentence that names it: the copy ceiling the child
 * measured (*measured = 1), else the H200's constant, said to be that. Returns the GB/s. */
static double copy_ceiling_md(FILE *f, const char *json, int *measured)
{
    double gbs = e2e_json_num(json, "copy_gbs");
    *measured = e2e_json_num(json, "copy_measured") > 0 && gbs > 0; /* NAN when absent */
    if (*measured) {
        const double lo = e2e_json_num(json, "copy_gbs_min"), hi = e2e_json_num(json, "copy_gbs_max");
        fprintf(f, "Ceiling: the %.2f TB/s device copy, measured in this run", gbs / 1e3);
        if (lo > 0 && hi > 0) /* NAN when absent */
            fprintf(f, " (%.2f - %.2f TB/s over its replays)", lo / 1e3, hi / 1e3);
        fprintf(f, ".\n\n");
        return gbs;
    }
    char note[160];
    e2e_json_str(json, "copy_note", note, sizeof note);
    fprintf(f, "Ceiling: NOT measured in this run (%s): \"of H200 copy\" divides by the %.2f TB/s "
            "copy measured on an H200 (bench/NOTES.md), not on this GPU.\n\n",
            note[0] ? note : "the profile carries no measurement", E2E_COPY_CEILING_GBS / 1e3);
    return E2E_COPY_CEILING_GBS;
}

void e2e_graph_profile_md(FILE *f, const char *title, const char *json)
{
    if (!json[0]) return;
    double stamped = e2e_json_num(json, "stamped_us"), ev = e2e_json_num(json, "event_us");
    fprintf(f, "\n%s (in the CUDA graph, PDL %s: %%globaltimer at each engine kernel's first "
            "start, PDL wait and last end, and at each matvec's last end; median of %.0f steps "
            "after %.0f positions)\n\n",
            title, e2e_json_num(json, "pdl") > 0 ? "on" : "off", e2e_json_num(json, "steps"),
            e2e_json_num(json, "context"));
    fprintf(f, "Kernels per step: %.0f. Step: %.1f us stamped, %.1f us by CUDA events (%.0f "
            "tok/s). Kernel rows run from the PDL wait to the last block's end; matvec rows from "
            "the previous stamped kernel's end to their own last block's end (their weights stream "
            "before their wait); rows between kernels from the previous stamped kernel's end to "
            "the next one's wait (launch gaps included). ",
            e2e_json_num(json, "kernels_per_step"), stamped, ev, ev > 0 ? 1e6 / ev : 0.0);
    int measured = 0;
    const double ceiling = copy_ceiling_md(f, json, &measured);
    fprintf(f, "| part of the step | launches | us | share | MB moved | GB/s | %s |\n"
               "|---|---:|---:|---:|---:|---:|---:|\n", measured ? "of ceiling" : "of H200 copy");
    const char *p = strstr(json, "[");
    while (p && (p = strstr(p, "{\"name\": \""))) {
        char raw[64], name[128];
        e2e_json_str(p, "name", raw, sizeof raw);
        size_t k = 0; /* "q|k|v matvec": escape the pipes of a markdown cell */
        for (const char *c = raw; *c && k + 2 < sizeof name; c++) {
            if (*c == '|') name[k++] = '\\';
            name[k++] = *c;
        }
        name[k] = 0;
        double us = e2e_json_num(p, "us"), bytes = e2e_json_num(p, "bytes");
        double l = e2e_json_num(p, "launches"), gbs = us > 0 ? bytes / (us * 1e3) : 0;
        fprintf(f, "| %s%s | %.0f | %.1f | %.1f%% | %.2f | %.0f | %.0f%% |\n", name,
                e2e_json_num(p, "stamped") > 0 ? "" : " (between kernels)", l, us,
                stamped > 0 ? 100 * us / stamped : 0, bytes / 1e6, gbs,
                100 * gbs / ceiling);
        p++;
    }
}
