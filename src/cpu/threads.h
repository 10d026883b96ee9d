/* A tiny fork-join helper for the CPU backend (not public). */
#ifndef QMM_CPU_THREADS_H
#define QMM_CPU_THREADS_H

#define QMM_MAX_THREADS 256

/* Online CPUs, at least 1. */
int qmm_cpu_online(void);

/* Runs fn(arg, t) for t = 0..threads-1 concurrently, t = 0 on the calling thread, and returns
 * when all have finished. A thread that cannot be created runs its share on the caller
 * afterwards, so the work always completes (only slower). threads is clamped to
 * [1, QMM_MAX_THREADS]. */
void qmm_parallel_run(int threads, void (*fn)(void *arg, int t), void *arg);

#endif
