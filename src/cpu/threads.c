/* Fork-join over pthreads: start threads-1 workers, work on the caller too, join. A pool that
 * outlives the call would save ~20 µs per call; not worth its complexity at these sizes. */
#include <pthread.h>
#include <unistd.h>

#include "threads.h"

int qmm_cpu_online(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > QMM_MAX_THREADS ? QMM_MAX_THREADS : (int)n;
}

typedef struct worker {
    void (*fn)(void *arg, int t);
    void *arg;
    int t;
} worker;

static void *worker_main(void *p)
{
    worker *w = p;
    w->fn(w->arg, w->t);
    return NULL;
}

void qmm_parallel_run(int threads, void (*fn)(void *arg, int t), void *arg)
{
    if (threads < 1) threads = 1;
    if (threads > QMM_MAX_THREADS) threads = QMM_MAX_THREADS;
    pthread_t tid[QMM_MAX_THREADS];
    worker work[QMM_MAX_THREADS];
    int started[QMM_MAX_THREADS];
    for (int t = 1; t < threads; t++) {
        work[t] = (worker){fn, arg, t};
        started[t] = pthread_create(&tid[t], NULL, worker_main, &work[t]) == 0;
    }
    fn(arg, 0);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else fn(arg, t);
    }
}
