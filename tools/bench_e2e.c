/*
 * qmm bench e2e: whole-model greedy prefill + decode on the GPU, split-K on against its unsplit
 * control. Protocol (DESIGN.md §8, issue 6):
 *   - correctness first: one process checks the GPU forward against the CPU reference on a short
 *     prompt (last-position logits, relative error <= 2e-2) before anything is timed;
 *   - every repeat runs in a fresh process (this binary re-executed with --child): the model is
 *     made, the session created, `warmup` untimed generations run, then one timed generation;
 *   - variants alternate in order within each repeat (on, off, on, off, ...);
 *   - medians over repeats (min and max beside them); prefill tok/s = prompt tokens / time of the
 *     forward that yields the first token (head and argmax included); decode tok/s =
 *     (new tokens - 1) / time of the remaining single-token steps (CUDA events);
 *   - optional per-kernel breakdown of one prefill and one decode step (--profile); the in-graph
 *     one's fractions are of the copy ceiling the profiled child measured on its GPU.
 * Markdown (--out) and JSON (--json) carry the GPU, driver, runtime, commit, date and command.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_e2e.h"
#include "bench_e2e_profile.h"
#include "commands.h"
#include "tp_cli.h"
#include "common/common.h"
#include "qmm.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm bench e2e [--model PRESET|DIR] [--input-len 32,128,2048]\n"
            "                     [--output-len 33,129,129 | N] [--warmup 2] [--repeats 4]\n"
            "                     [--split-k on,off] [--seed S] [--profile] [--no-verify]\n"
            "                     [--out FILE.md] [--json FILE.json] [--device cuda|cpu]\n"
            "                     [--fuse on|off] [--pdl on|off] [--tp 1,2]\n"
            "                     [--decode fused|persistent] [--max-seq N]\n"
            "  each repeat runs in a fresh process; variants alternate; medians are reported\n"
            "  --max-seq sizes every session for N positions (default: prompt + new - 1, the\n"
            "  least; an application sized for the model's context passes that)\n"
            "  --device cpu times the CPU reference forward instead (split-K does not apply)\n"
            "  --tp 1,2 runs the tensor-parallel driver, with options of its own (see\n"
            "  `qmm bench e2e --tp 1,2 --help`)\n");
}

static int parse_list(const char *s, int64_t *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 1) return -1;
        out[n++] = v;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return *s ? -1 : n;
}

static int parse_variants(const char *s, e2e_args *a)
{
    a->nvar = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (a->nvar == 2) return 0;
        if (!strcmp(tok, "on")) a->variants[a->nvar++] = 1;
        else if (!strcmp(tok, "off")) a->variants[a->nvar++] = 0;
        else return 0;
    }
    return a->nvar > 0;
}

/* ---- the parent ---- */

typedef struct run_out {
    double prefill_ms, decode_ms;
    unsigned hash;
    char gpu[256];
    int sm_count, driver, runtime;
    char cc[16];
    size_t weight_bytes;
    char prof_prefill[8192], prof_decode[8192], prof_graph[8192];
    char verify[256];
    char kernels[3][32]; /* prefill attention, decode step, decode attention (the session's names) */
} run_out;

/* Copy src (up to its newline) into dst[size], truncating. */
static void copy_line(char *dst, size_t size, const char *src)
{
    size_t n = strcspn(src, "\n");
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* Run this binary as a child with extra arguments; parse its RESULT / PROFILE / VERIFY lines. */
static int spawn(const e2e_args *a, int64_t in, int64_t outn, int split_k, int profile, int verify,
                 run_out *r)
{
    int fds[2];
    if (pipe(fds)) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDOUT_FILENO);
        close(fds[1]);
        char sin[32], sout[32], sw[16], sseed[32], scap[32];
        snprintf(sin, sizeof sin, "%lld", (long long)in);
        snprintf(sout, sizeof sout, "%lld", (long long)outn);
        snprintf(sw, sizeof sw, "%d", a->warmup);
        snprintf(sseed, sizeof sseed, "%lld", a->seed);
        char *argv[32];
        int k = 0;
        argv[k++] = "qmm";
        argv[k++] = "bench";
        argv[k++] = "e2e";
        argv[k++] = "--child";
        argv[k++] = "--model";
        argv[k++] = (char *)a->model;
        argv[k++] = "--input-len";
        argv[k++] = sin;
        argv[k++] = "--output-len";
        argv[k++] = sout;
        argv[k++] = "--warmup";
        argv[k++] = sw;
        argv[k++] = "--seed";
        argv[k++] = sseed;
        argv[k++] = "--split-k";
        argv[k++] = split_k ? "on" : "off";
        if (profile) argv[k++] = "--profile";
        if (a->cpu) {
            argv[k++] = "--device";
            argv[k++] = "cpu";
        }
        argv[k++] = "--fuse";
        argv[k++] = a->fuse ? "on" : "off";
        argv[k++] = "--pdl";
        argv[k++] = a->pdl ? "on" : "off";
        argv[k++] = "--decode";
        argv[k++] = a->persistent ? "persistent" : "fused";
        if (a->max_seq > 0) {
            snprintf(scap, sizeof scap, "%lld", (long long)a->max_seq);
            argv[k++] = "--max-seq";
            argv[k++] = scap;
        }
        if (verify) argv[k++] = "--verify";
        argv[k] = NULL;
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    char line[16384];
    memset(r, 0, sizeof *r);
    r->prefill_ms = r->decode_ms = NAN;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "RESULT ", 7)) {
            r->prefill_ms = e2e_json_num(line, "prefill_ms");
            r->decode_ms = e2e_json_num(line, "decode_ms");
            r->hash = (unsigned)e2e_json_num(line, "tokens_hash");
            r->sm_count = (int)e2e_json_num(line, "sm_count");
            r->driver = (int)e2e_json_num(line, "driver");
            r->runtime = (int)e2e_json_num(line, "runtime");
            r->weight_bytes = (size_t)e2e_json_num(line, "weight_bytes");
            e2e_json_str(line, "gpu", r->gpu, sizeof r->gpu);
            e2e_json_str(line, "cc", r->cc, sizeof r->cc);
            e2e_json_str(line, "prefill_attention", r->kernels[0], sizeof r->kernels[0]);
            e2e_json_str(line, "decode_step", r->kernels[1], sizeof r->kernels[1]);
            e2e_json_str(line, "decode_attention", r->kernels[2], sizeof r->kernels[2]);
        } else if (!strncmp(line, "PROFILE_PREFILL ", 16)) {
            copy_line(r->prof_prefill, sizeof r->prof_prefill, line + 16);
        } else if (!strncmp(line, "PROFILE_DECODE ", 15)) {
            copy_line(r->prof_decode, sizeof r->prof_decode, line + 15);
        } else if (!strncmp(line, "PROFILE_GRAPH ", 14)) {
            copy_line(r->prof_graph, sizeof r->prof_graph, line + 14);
        } else if (!strncmp(line, "VERIFY ", 7)) {
            copy_line(r->verify, sizeof r->verify, line + 7);
        }
    }
    if (f) fclose(f);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* median, min, max of v[n] (tools/common) */
static double stat_of(const double *v, int n, int which)
{
    double r[3];
    bench_summary(v, n, &r[0], &r[1], &r[2]);
    return r[which];
}
#define median(v, n) stat_of(v, n, 0)
#define vmin(v, n) stat_of(v, n, 1)
#define vmax(v, n) stat_of(v, n, 2)

typedef struct cell {
    double prefill[MAX_REPEATS], decode[MAX_REPEATS];
    int n;
    unsigned hash;
    int hash_varies;
    char prof_prefill[8192], prof_decode[8192], prof_graph[8192];
    char kernels[3][32];
    int kernels_vary; /* the repeats' sessions named other kernels */
} cell;

/* A cell's medians (ms) and throughputs: prompt tokens over the prefill, the new tokens after
 * the first over the decode steps. */
typedef struct cell_stats {
    int64_t in, out;
    double prefill_ms, decode_ms, prefill_tps, decode_tps;
} cell_stats;

static cell_stats stats_of(const e2e_args *a, const cell *c, int li)
{
    cell_stats s;
    s.in = a->in_len[li];
    s.out = a->nout == 1 ? a->out_len[0] : a->out_len[li];
    s.prefill_ms = median(c->prefill, c->n);
    s.decode_ms = median(c->decode, c->n);
    s.prefill_tps = (double)s.in / (s.prefill_ms * 1e-3);
    s.decode_tps = s.out > 1 ? (double)(s.out - 1) / (s.decode_ms * 1e-3) : 0.0;
    return s;
}

/* The kernels the sessions said they ran (qmm_llm_cuda_session_kernels): one line when every
 * cell's sessions agree, else a list by cell; a cell whose repeats disagreed is flagged. */
static void e2e_kernels_md(FILE *md, const e2e_args *a, const cell (*cells)[2])
{
    int same = 1;
    for (int li = 0; li < a->nlen; li++)
        for (int v = 0; v < a->nvar; v++)
            same &= !cells[li][v].kernels_vary &&
                    !memcmp(cells[li][v].kernels, cells[0][0].kernels, sizeof cells[0][0].kernels);
    fprintf(md, "Kernels (as the sessions name them):");
    const int nlen = same ? 1 : a->nlen, nvar = same ? 1 : a->nvar;
    for (int li = 0; li < nlen; li++)
        for (int v = 0; v < nvar; v++) {
            const cell *c = &cells[li][v];
            if (!same)
                fprintf(md, "%s %lld tokens, split-K %s:", li || v ? ";" : "",
                        (long long)a->in_len[li], a->variants[v] ? "on" : "off");
            fprintf(md, " prefill attention %s, decode step %s, decode attention %s%s",
                    c->kernels[0], c->kernels[1], c->kernels[2],
                    c->kernels_vary ? " (VARIED across repeats)" : "");
        }
    fprintf(md, ".  \n");
}

static int parent_main(const e2e_args *a, int argc, char **argv)
{
    static cell cells[MAX_LENS][2];
    memset(cells, 0, sizeof cells);
    run_out r, meta;
    memset(&meta, 0, sizeof meta);
    char verify[256];
    snprintf(verify, sizeof verify, "%s", a->cpu ? "not needed (the CPU forward is the reference)"
                                                 : "skipped (--no-verify)");
    if (a->verify) {
        fprintf(stderr, "verifying the GPU forward against the CPU reference...\n");
        int rc = spawn(a, 8, 1, 1, 0, 1, &r);
        if (rc) {
            fprintf(stderr, "qmm bench e2e: verification failed (%s); nothing timed\n",
                    r.verify[0] ? r.verify : "see above");
            return 1;
        }
        snprintf(verify, sizeof verify, "%s", r.verify);
        fprintf(stderr, "  %s\n", verify);
    }
    for (int rep = 0; rep < a->repeats; rep++) {
        for (int li = 0; li < a->nlen; li++) {
            int64_t out = a->nout == 1 ? a->out_len[0] : a->out_len[li];
            for (int v = 0; v < a->nvar; v++) {
                int sk = a->variants[v];
                int prof = a->profile && rep == 0;
                int rc = spawn(a, a->in_len[li], out, sk, prof, 0, &r);
                if (rc || isnan(r.prefill_ms)) {
                    fprintf(stderr, "qmm bench e2e: child (input %lld, split-K %s) failed with "
                            "status %d\n", (long long)a->in_len[li], sk ? "on" : "off", rc);
                    return 1;
                }
                cell *c = &cells[li][v];
                if (c->n && c->hash != r.hash) c->hash_varies = 1;
                c->hash = r.hash;
                if (c->n && memcmp(c->kernels, r.kernels, sizeof r.kernels)) c->kernels_vary = 1;
                memcpy(c->kernels, r.kernels, sizeof r.kernels);
                c->prefill[c->n] = r.prefill_ms;
                c->decode[c->n++] = r.decode_ms;
                if (prof) {
                    snprintf(c->prof_prefill, sizeof c->prof_prefill, "%s", r.prof_prefill);
                    snprintf(c->prof_decode, sizeof c->prof_decode, "%s", r.prof_decode);
                    snprintf(c->prof_graph, sizeof c->prof_graph, "%s", r.prof_graph);
                }
                if (!meta.gpu[0]) meta = r;
                fprintf(stderr, "  repeat %d, %lld -> %lld, split-K %s: prefill %.3f ms, decode "
                        "%.3f ms\n", rep + 1, (long long)a->in_len[li], (long long)out,
                        sk ? "on" : "off", r.prefill_ms, r.decode_ms);
            }
        }
    }

    char commit[80], date[32];
    bench_commit(NULL, commit, sizeof commit);
    bench_date_utc(date, sizeof date);
    char cmd[2048] = "qmm";
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(cmd);
        snprintf(cmd + l, sizeof cmd - l, " %s", i == 0 ? "bench e2e" : argv[i]);
    }

    FILE *md = a->out_md ? fopen(a->out_md, "w") : stdout;
    if (!md) {
        fprintf(stderr, "qmm bench e2e: cannot write %s\n", a->out_md);
        return 1;
    }
    fprintf(md, "# qmm end to end: %s, batch 1, greedy\n\n", a->model);
    if (a->cpu)
        fprintf(md, "Device: %s; commit %s; %s.  \n", meta.gpu, commit, date);
    else
        fprintf(md, "GPU: %s (sm_%s, %d SMs), driver %d, CUDA runtime %d; commit %s; %s.  \n",
                meta.gpu, meta.cc, meta.sm_count, meta.driver, meta.runtime, commit, date);
    fprintf(md, "Weights: %.3f GB (%s). Command: `%s`  \n", (double)meta.weight_bytes / 1e9,
            strchr(a->model, '/') ? "checkpoint" : "synthetic, seeded", cmd);
    fprintf(md, "Correctness before timing: GPU vs CPU reference, 8-token prompt: %s  \n", verify);
    if (!a->cpu)
        fprintf(md, "Projections: %s. Engine kernels: PDL %s. Decode step: %s.  \n",
                a->fuse ? "fused (q|k|v and gate|up stacked, 4 matmuls a layer)"
                        : "separate (7 matmuls a layer)", a->pdl ? "on" : "off",
                a->persistent ? "persistent (one kernel for all layers and the head)"
                              : "fused (five kernels a layer)");
    const char *attn = getenv("QMM_DECODE_ATTN"); /* experiments' switches (session.cu) */
    if (!a->cpu && attn)
        fprintf(md, "Environment: QMM_DECODE_ATTN=%s (cluster: the cluster-merged decode attention "
                    "where a session has more than one split and the GPU holds its clusters).  \n",
                attn);
    const char *attn_o = getenv("QMM_DECODE_ATTN_O");
    if (!a->cpu && attn_o)
        fprintf(md, "Environment: QMM_DECODE_ATTN_O=%s (fused: the decode attention and the o "
                    "projection in one kernel, in sessions of at most 128 positions whose shapes "
                    "it takes).  \n",
                attn_o);
    const char *prefill = getenv("QMM_PREFILL_ATTN");
    if (!a->cpu && prefill)
        fprintf(md, "Environment: QMM_PREFILL_ATTN=%s (mma: the mma.sync prefill attention; wgmma: "
                    "the warpgroup-MMA one a tile at a time; wgmma_pipe: pipelined; the default: "
                    "the pipelined one from 1 024 tokens a forward; where the head dim is 128 and "
                    "the GPU is sm_90).  \n",
                prefill);
    const char *rounds = getenv("QMM_MV_ROUNDS");
    if (!a->cpu && rounds)
        fprintf(md, "Environment: QMM_MV_ROUNDS=%s (1: matvecs of 2-16 tokens stage their "
                    "activations in rounds; one-token decode is not affected).  \n",
                rounds);
    if (!a->cpu) e2e_kernels_md(md, a, cells);
    if (a->max_seq > 0)
        fprintf(md, "Sessions sized for %lld positions (--max-seq).  \n", (long long)a->max_seq);
    else
        fprintf(md, "Sessions sized for prompt + new - 1 positions (the least).  \n");
    fprintf(md, "Protocol: each repeat a fresh process (%d untimed generations, then one timed); "
            "variants alternate; median of %d [min - max]. Prefill tok/s = prompt tokens / time "
            "of the forward that yields the first token; decode tok/s = (new tokens - 1) / time "
            "of the remaining steps (%s).\n\n",
            a->warmup, a->repeats,
            a->cpu ? "host clock"
                   : "CUDA events; decode steps replay the CUDA graph of their context's bucket");
    fprintf(md, "| prompt -> new | split-K | prefill ms | prefill tok/s | decode ms | decode tok/s "
                "|\n|---|---|---:|---:|---:|---:|\n");
    for (int li = 0; li < a->nlen; li++) {
        for (int v = 0; v < a->nvar; v++) {
            const cell *c = &cells[li][v];
            cell_stats st = stats_of(a, c, li);
            fprintf(md, "| %lld -> %lld | %s | %.3f [%.3f - %.3f] | %.0f | %.2f [%.2f - %.2f] | "
                    "%.1f |\n", (long long)st.in, (long long)st.out,
                    a->cpu ? "n/a" : a->variants[v] ? "on" : "off", st.prefill_ms,
                    vmin(c->prefill, c->n), vmax(c->prefill, c->n), st.prefill_tps, st.decode_ms,
                    vmin(c->decode, c->n), vmax(c->decode, c->n), st.decode_tps);
        }
        if (a->nvar == 2) {
            double on = median(cells[li][a->variants[0] ? 0 : 1].prefill, cells[li][0].n);
            double off = median(cells[li][a->variants[0] ? 1 : 0].prefill, cells[li][0].n);
            fprintf(md, "| | on / off | prefill speedup %.3fx | | | |\n", off / on);
        }
    }
    int varies = 0;
    for (int li = 0; li < a->nlen; li++)
        for (int v = 0; v < a->nvar; v++) varies |= cells[li][v].hash_varies;
    fprintf(md, "\nGreedy tokens %s across repeats.\n",
            varies ? "DIFFERED" : "were identical (hash per cell)");
    for (int li = 0; li < a->nlen; li++)
        for (int v = 0; v < a->nvar; v++) {
            char title[128];
            snprintf(title, sizeof title, "### Prefill of %lld tokens, split-K %s",
                     (long long)a->in_len[li], a->variants[v] ? "on" : "off");
            e2e_profile_md(md, title, cells[li][v].prof_prefill);
            snprintf(title, sizeof title, "### One decode step after %lld tokens, split-K %s",
                     (long long)a->in_len[li], a->variants[v] ? "on" : "off");
            e2e_profile_md(md, title, cells[li][v].prof_decode);
            snprintf(title, sizeof title, "### Decode step after %lld tokens, split-K %s",
                     (long long)a->in_len[li], a->variants[v] ? "on" : "off");
            e2e_graph_profile_md(md, title, cells[li][v].prof_graph);
        }
    if (md != stdout) fclose(md);

    if (a->out_json) {
        FILE *j = fopen(a->out_json, "w");
        if (!j) {
            fprintf(stderr, "qmm bench e2e: cannot write %s\n", a->out_json);
            return 1;
        }
        fprintf(j, "{\n  \"benchmark\": \"e2e\",\n  \"model\": \"%s\",\n  \"command\": \"%s\",\n",
                a->model, cmd);
        fprintf(j, "  \"gpu\": {\"name\": \"%s\", \"cc\": \"%s\", \"sm_count\": %d, \"driver\": %d, "
                "\"runtime\": %d},\n", meta.gpu, meta.cc, meta.sm_count, meta.driver, meta.runtime);
        fprintf(j, "  \"commit\": \"%s\",\n  \"date\": \"%s\",\n  \"weight_bytes\": %zu,\n", commit,
                date, meta.weight_bytes);
        fprintf(j, "  \"warmup\": %d,\n  \"repeats\": %d,\n  \"verify\": %s,\n", a->warmup,
                a->repeats, a->verify ? verify : "null");
        fprintf(j, "  \"device\": \"%s\",\n  \"fused_projections\": %s,\n  \"pdl\": %s,\n",
                a->cpu ? "cpu" : "cuda", a->fuse ? "true" : "false", a->pdl ? "true" : "false");
        fprintf(j, "  \"decode_step\": \"%s\",\n", a->persistent ? "persistent" : "fused");
        if (a->max_seq > 0) fprintf(j, "  \"max_seq\": %lld,\n", (long long)a->max_seq);
        else fprintf(j, "  \"max_seq\": null,\n"); /* prompt + new - 1 a cell */
        fprintf(j, "  \"results\": [\n");
        int first = 1;
        for (int li = 0; li < a->nlen; li++) {
            for (int v = 0; v < a->nvar; v++) {
                const cell *c = &cells[li][v];
                cell_stats st = stats_of(a, c, li);
                fprintf(j, "%s    {\"input_len\": %lld, \"output_len\": %lld, \"split_k\": \"%s\", "
                        "\"prefill_ms_median\": %.6f, \"decode_ms_median\": %.6f, "
                        "\"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"prefill_ms\": [",
                        first ? "" : ",\n", (long long)st.in, (long long)st.out,
                        a->cpu ? "n/a" : a->variants[v] ? "on" : "off", st.prefill_ms,
                        st.decode_ms, st.prefill_tps, st.decode_tps);
                for (int i = 0; i < c->n; i++) fprintf(j, "%s%.6f", i ? ", " : "", c->prefill[i]);
                fprintf(j, "], \"decode_ms\": [");
                for (int i = 0; i < c->n; i++) fprintf(j, "%s%.6f", i ? ", " : "", c->decode[i]);
                fprintf(j, "], \"tokens_identical\": %s", c->hash_varies ? "false" : "true");
                fprintf(j, ", \"kernels\": {\"prefill_attention\": \"%s\", \"decode_step\": \"%s\", "
                        "\"decode_attention\": \"%s\", \"varied\": %s}", c->kernels[0], c->kernels[1],
                        c->kernels[2], c->kernels_vary ? "true" : "false");
                if (c->hash_varies) fprintf(j, ", \"tokens_hash\": null"); /* one would mislead */
                else fprintf(j, ", \"tokens_hash\": %u", c->hash);
                fprintf(j, ", \"profile_prefill\": %s, \"profile_decode\": %s, "
                        "\"profile_graph\": %s}", c->prof_prefill[0] ? c->prof_prefill : "null",
                        c->prof_decode[0] ? c->prof_decode : "null",
                        c->prof_graph[0] ? c->prof_graph : "null");
                first = 0;
            }
        }
        fprintf(j, "\n  ]\n}\n");
        fclose(j);
    }
    return 0;
}

int bench_e2e_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* tensor parallelism: its own driver (tp_bench.c) */
        if (!strcmp(argv[i], "--tp")) return tp_bench_e2e_main(argc, argv);
    e2e_args a;
    memset(&a, 0, sizeof a);
    a.model = "qwen3-4b";
    a.in_len[0] = 32, a.in_len[1] = 128, a.in_len[2] = 2048, a.nlen = 3;
    a.out_len[0] = 33, a.out_len[1] = 129, a.out_len[2] = 129, a.nout = 3;
    a.variants[0] = 1, a.variants[1] = 0, a.nvar = 2;
    a.warmup = 2, a.repeats = 4, a.seed = 1;
    a.fuse = 1, a.pdl = 1;
    int child = 0, split_k = 1, verify_child = 0;
    a.verify = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(o, "--child")) {
            child = 1;
        } else if (!strcmp(o, "--profile")) {
            a.profile = 1;
        } else if (!strcmp(o, "--verify")) {
            verify_child = 1;
        } else if (!strcmp(o, "--no-verify")) {
            a.verify = 0;
        } else if (!v) {
            bad = 1;
        } else {
            i++;
            if (!strcmp(o, "--model")) a.model = v;
            else if (!strcmp(o, "--input-len")) bad = (a.nlen = parse_list(v, a.in_len, MAX_LENS)) < 1;
            else if (!strcmp(o, "--output-len")) bad = (a.nout = parse_list(v, a.out_len, MAX_LENS)) < 1;
            else if (!strcmp(o, "--warmup")) a.warmup = atoi(v), bad = a.warmup < 0;
            else if (!strcmp(o, "--repeats")) a.repeats = atoi(v), bad = a.repeats < 1 || a.repeats > MAX_REPEATS;
            else if (!strcmp(o, "--seed")) a.seed = atoll(v);
            else if (!strcmp(o, "--max-seq")) {
                long long ms = 0;
                bad = !parse_int_arg(v, 1, INT64_MAX, &ms);
                a.max_seq = ms;
            }
            else if (!strcmp(o, "--out")) a.out_md = v;
            else if (!strcmp(o, "--json")) a.out_json = v;
            else if (!strcmp(o, "--fuse")) {
                bad = strcmp(v, "on") && strcmp(v, "off");
                a.fuse = !strcmp(v, "on");
            } else if (!strcmp(o, "--pdl")) {
                bad = strcmp(v, "on") && strcmp(v, "off");
                a.pdl = !strcmp(v, "on");
            } else if (!strcmp(o, "--decode")) {
                bad = strcmp(v, "fused") && strcmp(v, "persistent");
                a.persistent = !strcmp(v, "persistent");
            } else if (!strcmp(o, "--device")) {
                bad = strcmp(v, "cpu") && strcmp(v, "cuda");
                a.cpu = !strcmp(v, "cpu");
            }
            else if (!strcmp(o, "--split-k")) {
                bad = !parse_variants(v, &a);
                split_k = a.variants[0];
            } else {
                fprintf(stderr, "qmm bench e2e: unknown option %s\n", o);
                usage(stderr);
                return 2;
            }
        }
        if (bad) {
            fprintf(stderr, "qmm bench e2e: bad or missing value for %s\n", o);
            return 2;
        }
    }
    if (a.nout != 1 && a.nout != a.nlen) {
        fprintf(stderr, "qmm bench e2e: --output-len needs one value or one per input length\n");
        return 2;
    }
    for (int i = 0; i < a.nlen && a.max_seq > 0; i++) {
        const int64_t need = a.in_len[i] + (a.nout == 1 ? a.out_len[0] : a.out_len[i]) - 1;
        if (need > a.max_seq) {
            fprintf(stderr, "qmm bench e2e: --max-seq %lld holds no %lld-token prompt with its "
                    "new tokens (%lld positions)\n", (long long)a.max_seq, (long long)a.in_len[i],
                    (long long)need);
            return 2;
        }
    }
    if (child) {
        a.verify = verify_child;
        return e2e_child_main(&a, split_k);
    }
    if (a.cpu) {
        a.verify = 0; /* the CPU forward is the reference */
        a.variants[0] = 1, a.nvar = 1; /* split-K is a GPU schedule */
    } else {
        int count = 0;
        char why[256] = "";
        qmm_cuda_device_count(&count, why, sizeof why);
        if (count == 0) {
            fprintf(stderr, "qmm bench e2e: needs a CUDA GPU (%s); --device cpu times the CPU "
                    "reference\n", why);
            return 1;
        }
    }
    return parent_main(&a, argc, argv);
}
