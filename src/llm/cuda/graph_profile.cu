/*
 * The decode step as it runs in its CUDA graph: a copy of the decode graph whose engine kernels
 * write %globaltimer stamps (pdl.cuh) is replayed after a prefill, and each step is cut into
 * engine kernels (from the return of their PDL wait to their last block's end) and the work
 * between them (the previous engine kernel's end to the next one's wait: the matmuls, or a bare
 * launch gap). The fused step's matvecs are stamped as well and run from the previous stamped
 * kernel's end to their own end: their CTAs stream weights before their wait, so the wait is not
 * where their work starts. Per family: median over the steps of the per-step sum.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/cuda/session.h"

#define MAX_STEPS 1000

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Index of family `name` (stamped or not) in out, added when new; -1 when out is full. */
static int family(qmm_llm_graph_profile *out, const char *name, int stamped)
{
    for (int i = 0; i < out->count; i++)
        if (out->stamped[i] == stamped && !strcmp(out->name[i], name)) return i;
    if (out->count == QMM_LLM_GRAPH_PROFILE_MAX) return -1;
    out->name[out->count] = name;
    out->stamped[out->count] = stamped;
    return out->count++;
}

/* Replay the stamped graph `steps` times; vals[f * steps + step] gets family f's time. */
static qmm_status replay(qmm_llm_cuda_session *s, cudaGraphExec_t g, const llm_stamp_plan *sp,
                         const int *fk, const int *fb, int gap_family, int steps,
                         qmm_llm_graph_profile *out, double *vals, double *stamped_us,
                         double *event_us)
{
    const size_t bytes = (size_t)sp->count * 4 * sizeof(unsigned long long);
    unsigned long long *init = (unsigned long long *)malloc(bytes);
    unsigned long long *got = (unsigned long long *)malloc(bytes);
    if (!init || !got) {
        free(init), free(got);
        return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < sp->count; i++) {
        init[4 * i] = init[4 * i + 1] = ~0ull;
        init[4 * i + 2] = init[4 * i + 3] = 0;
    }
    qmm_status st = QMM_OK;
#ifdef QMM_MV_PHASES /* experiment build (NOTES row 195): a matvec row split at its CTAs' phases */
    double *ph = (double *)calloc((size_t)out->count * 4 * (size_t)steps, sizeof(double));
    if (!ph) st = qmm_fail(QMM_ERR_NOMEM, "out of memory");
#endif
    for (int step = 0; step < steps && !st; step++) {
        cudaError_t e = cudaMemcpyAsync(s->d_stamps, init, bytes, cudaMemcpyHostToDevice, s->stream);
        if (e == cudaSuccess) e = cudaEventRecord(s->ev[0], s->stream);
        if (e == cudaSuccess) e = cudaGraphLaunch(g, s->stream);
        if (e == cudaSuccess) e = cudaEventRecord(s->ev[1], s->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(got, s->d_stamps, bytes, cudaMemcpyDeviceToHost, s->stream);
        if (e == cudaSuccess && s->tp) { /* bounded: a peer may be gone */
            if ((st = llm_sync(s))) break;
        } else if (e == cudaSuccess) {
            e = cudaStreamSynchronize(s->stream);
        }
        float ms = 0;
        if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, s->ev[0], s->ev[1]);
        if (e != cudaSuccess) {
            st = qmm_fail(QMM_ERR_CUDA, "profiled decode step %d: %s", step, cudaGetErrorString(e));
            break;
        }
        event_us[step] = 1e3 * ms;
        for (int f = 0; f < out->count; f++) vals[f * steps + step] = 0;
        unsigned long long first = ~0ull; /* the earliest start: matvec slots have none */
        for (int i = 0; i < sp->count; i++) {
            const unsigned long long *t = got + 4 * i;
            if (t[0] < first) first = t[0];
            /* a matvec stamps only its end, from the previous slot's end (a matvec in slot 0
             * would have no start: the engine's steps begin with a stamped norm); a slot left
             * unstamped cannot happen */
            if (t[2] == 0 || (sp->from_prev[i] ? i == 0 : t[1] == ~0ull)) continue;
            const unsigned long long prev_end = i > 0 ? got[4 * (i - 1) + 2] : 0;
            if (sp->from_prev[i]) {
                if (fk[i] >= 0 && t[2] > prev_end)
                    vals[fk[i] * steps + step] += 1e-3 * (double)(t[2] - prev_end);
#ifdef QMM_MV_PHASES /* first start, first and last return from the wait, last end */
                const unsigned long long at[4] = {t[0], t[1], t[3], t[2]};
                const bool stamped = t[0] != ~0ull && t[1] != ~0ull && t[3] != 0; /* matvec.cu's too */
                for (int k = 0; k < 4 && fk[i] >= 0 && stamped; k++)
                    ph[((size_t)fk[i] * 4 + k) * steps + step] += 1e-3 * (double)(long long)(at[k] - prev_end);
#endif
                continue;
            }
            if (fk[i] >= 0) vals[fk[i] * steps + step] += 1e-3 * (double)(t[2] - t[1]);
            if (i == 0) continue;
            const double gap = t[1] > prev_end ? 1e-3 * (double)(t[1] - prev_end) : 0.0;
            const int f = fb[i] >= 0 ? fb[i] : gap_family;
            if (f >= 0) vals[f * steps + step] += gap;
        }
        const unsigned long long last = got[4 * (sp->count - 1) + 2];
        stamped_us[step] = last > first && first != ~0ull ? 1e-3 * (double)(last - first) : 0.0;
    }
#ifdef QMM_MV_PHASES
    if (!st) {
        fprintf(stderr, "matvec phases (QMM_MV_PHASES build), us a step from the previous stamped "
                        "kernel's end, summed over the step's launches, median of %d steps:\n", steps);
        for (int f = 0; f < out->count; f++) {
            if (out->stamped[f] != 2) continue;
            double m[4];
            for (int k = 0; k < 4; k++) m[k] = median(ph + ((size_t)f * 4 + k) * steps, steps);
            fprintf(stderr, "  %-16s first start %9.1f  first past wait %9.1f  last past wait %9.1f  "
                            "last end %9.1f\n", out->name[f], m[0], m[1], m[2], m[3]);
        }
    }
    free(ph);
#endif
    free(init), free(got);
    return st;
}

extern "C" qmm_status qmm_llm_cuda_profile_graph(qmm_llm_cuda_session *s, const int32_t *ids,
                                                 int64_t n, int steps,
                                                 qmm_llm_graph_profile *out)
{
    if (!s || !ids || !out) return qmm_fail(QMM_ERR_NULL, "qmm_llm_cuda_profile_graph: NULL argument");
    memset(out, 0, sizeof *out);
    if (steps < 1 || steps > MAX_STEPS)
        return qmm_fail(QMM_ERR_ARG, "steps = %d must be in [1, %d]", steps, MAX_STEPS);
    qmm_status st = qmm_llm_cuda_reset(s);
    if (st) return st;
    if ((st = llm_check_ids(s, ids, n, steps))) return st;
    llm_stamp_plan *sp = (llm_stamp_plan *)calloc(1, sizeof *sp);
    double *vals = (double *)malloc(sizeof(double) * QMM_LLM_GRAPH_PROFILE_MAX * (size_t)steps);
    double *su = (double *)malloc(sizeof(double) * (size_t)steps);
    double *eu = (double *)malloc(sizeof(double) * (size_t)steps);
    int *fk = (int *)malloc(sizeof(int) * LLM_STAMP_SLOTS), *fb = (int *)malloc(sizeof(int) * LLM_STAMP_SLOTS);
    cudaGraphExec_t g = NULL;
    if (!sp || !vals || !su || !eu || !fk || !fb) st = qmm_fail(QMM_ERR_NOMEM, "out of memory");
    if (!st) st = llm_put_ids(s, ids, n);
    if (!st) st = llm_enqueue_prefill(s, n);
    if (!st) {
        s->pos += n;
        s->splan = sp;
        /* the bucket of the last profiled step (the row at n + steps - 1), exact at every
         * earlier one too: a session sized for a long context profiles what it runs here */
        st = llm_cuda_capture_decode(s, llm_decode_splits_of_step(s, n + steps - 1), &g,
                                     &out->kernels_per_step);
        s->splan = NULL;
    }
    int gap_family = -1;
    if (!st) {
        if (sp->count < 1) st = qmm_fail(QMM_ERR_UNSUPPORTED, "the decode graph has no stamped kernel");
        for (int i = 0; i < sp->count && !st; i++) {
            fb[i] = sp->before[i] ? family(out, sp->before[i], 0) : -1;
            if (i > 0 && !sp->before[i] && gap_family < 0)
                gap_family = family(out, "launch gaps", 0);
            fk[i] = family(out, sp->name[i], sp->from_prev[i] ? 2 : 1);
            if (fk[i] >= 0) {
                out->launches[fk[i]]++;
                out->bytes[fk[i]] += sp->bytes[i];
            }
            if (fb[i] >= 0) {
                out->launches[fb[i]] += sp->before_launches[i];
                out->bytes[fb[i]] += sp->before_bytes[i];
            }
        }
    }
    if (!st) st = replay(s, g, sp, fk, fb, gap_family, steps, out, vals, su, eu);
    if (!st) {
        for (int f = 0; f < out->count; f++) out->us[f] = median(vals + (size_t)f * steps, steps);
        out->stamped_us = median(su, steps);
        out->event_us = median(eu, steps);
        out->steps = steps;
        out->context = n;
        out->pdl = s->pdl;
    }
    if (g) cudaGraphExecDestroy(g);
    free(sp), free(vals), free(su), free(eu), free(fk), free(fb);
    qmm_status rs = qmm_llm_cuda_reset(s);
    if (st) {
        memset(out, 0, sizeof *out);
        return st;
    }
    if (!rs) qmm_clear_error();
    return rs;
}
