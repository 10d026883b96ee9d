/* `qmm bench ops`: CUDA-event timing of a batch of calls, eager and as a CUDA graph replay. */
#ifdef QMM_HAVE_CUDA

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "bench_gpu.h"

#define BENCH_MAX_CALLS 20000 /* a graph larger than this is not needed to reach any target */

static int run_batch(cudaStream_t s, bench_enqueue_fn fn, void *user, int calls, char *why,
                     size_t why_len)
{
    (void)s;
    for (int i = 0; i < calls; i++)
        if (fn(user, i, why, why_len)) return -1;
    return 0;
}

/* One batch between two events, in µs per call; < 0 when a call failed. */
static double timed_batch(cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, bench_enqueue_fn fn,
                          void *user, int calls, char *why, size_t why_len)
{
    CK(cudaEventRecord(e0, s));
    if (run_batch(s, fn, user, calls, why, why_len)) {
        CK(cudaStreamSynchronize(s));
        return -1.0;
    }
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return 1000.0 * ms / calls;
}

/* Capture `calls` calls into an executable graph; 0 or -1 (why says). */
static int capture(cudaStream_t s, bench_enqueue_fn fn, void *user, int calls,
                   cudaGraphExec_t *exec, char *why, size_t why_len)
{
    cudaGraph_t graph = NULL;
    /* Thread-local mode: a call that would synchronise or touch the legacy stream while being
     * captured fails loudly instead of running outside the graph and faking a fast time. */
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    int bad = run_batch(s, fn, user, calls, why, why_len);
    cudaError_t e = cudaStreamEndCapture(s, &graph);
    if (bad || e != cudaSuccess || !graph) {
        if (!bad)
            snprintf(why, why_len, "graph capture failed: %s (%s)", cudaGetErrorString(e),
                     cudaGetErrorName(e));
        if (graph) cudaGraphDestroy(graph);
        (void)cudaGetLastError(); /* capture errors are not sticky: clear and go on */
        return -1;
    }
    CK(cudaGraphInstantiate(exec, graph, 0));
    CK(cudaGraphDestroy(graph));
    return 0;
}

int bench_time_calls(cudaStream_t s, bench_enqueue_fn fn, void *user, const bench_timing_req *q,
                     bench_time *out, char *why, size_t why_len)
{
    int copies = q->copies > 0 ? q->copies : 1;
    int reps = q->reps >= 1 ? q->reps : 1;
    double *sample = malloc(sizeof *sample * (size_t)reps);
    if (!sample) {
        snprintf(why, why_len, "out of host memory");
        return -1;
    }
    cudaEvent_t *ev = malloc(sizeof *ev * (size_t)(reps + 1));
    if (!ev) {
        free(sample);
        snprintf(why, why_len, "out of host memory");
        return -1;
    }
    for (int r = 0; r <= reps; r++) CK(cudaEventCreate(&ev[r]));
    cudaEvent_t e0 = ev[0], e1 = ev[1];
    cudaGraphExec_t exec = NULL;
    int rc = -1;

    /* Warm up (first-call setup, clocks) with every copy once, then estimate a call's time. */
    int calls = q->min_calls > copies ? q->min_calls : copies;
    calls = (calls + copies - 1) / copies * copies;
    if (run_batch(s, fn, user, calls, why, why_len)) goto done;
    CK(cudaStreamSynchronize(s));
    double est = timed_batch(s, e0, e1, fn, user, calls, why, why_len);
    if (est < 0) goto done;

    /* Enough calls that a replay lasts >= target_us (event resolution ~0.5 µs) and every copy is
     * used equally: between two uses of a copy, all the others pass through the L2. */
    if (est * calls < q->target_us) {
        double want = ceil(q->target_us / (est > 1e-3 ? est : 1e-3));
        calls = want > BENCH_MAX_CALLS ? BENCH_MAX_CALLS : (int)want;
        calls = (calls + copies - 1) / copies * copies;
    }

    for (int r = 0; r < reps; r++) {
        sample[r] = timed_batch(s, e0, e1, fn, user, calls, why, why_len);
        if (sample[r] < 0) goto done;
    }
    bench_summary(sample, reps, &out->eager_med, &out->eager_min, &out->eager_max);

    if (capture(s, fn, user, calls, &exec, why, why_len)) goto done;
    CK(cudaGraphUpload(exec, s));
    CK(cudaGraphLaunch(exec, s)); /* untimed replay: the first one pays the graph's setup */
    CK(cudaStreamSynchronize(s));
    /* Replays back to back with an event between each, synchronised once at the end: the GPU
     * never idles before a timed replay, so the device-side graph launch latency is not counted
     * in full (only the gap between two replays, like the gaps between calls inside one). */
    CK(cudaGraphLaunch(exec, s));
    CK(cudaEventRecord(ev[0], s));
    for (int r = 0; r < reps; r++) {
        CK(cudaGraphLaunch(exec, s));
        CK(cudaEventRecord(ev[r + 1], s));
    }
    CK(cudaEventSynchronize(ev[reps]));
    for (int r = 0; r < reps; r++) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, ev[r], ev[r + 1]));
        sample[r] = 1000.0 * ms / calls;
    }
    bench_summary(sample, reps, &out->graph_med, &out->graph_min, &out->graph_max);
    out->calls = calls;
    out->copies = copies;
    out->reps = reps;
    rc = 0;
done:
    if (exec) CK(cudaGraphExecDestroy(exec));
    for (int r = 0; r <= reps; r++) CK(cudaEventDestroy(ev[r]));
    free(ev);
    free(sample);
    return rc;
}

#else
typedef int bench_timing_unused; /* CUDA builds only */
#endif
