/* A call that may block forever, waited for at most a bound (tp.h): the communicator's abort and
 * destroy (NCCL can wait on a peer that hangs, or on graphs still holding its collectives), so a
 * rank still reports its error and exits. POSIX threads only: CI tests it without a GPU. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/tp.h"

typedef struct bounded_job {
    void (*fn)(void *);
    int done, detached;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Alignas(max_align_t) unsigned char arg[]; /* the caller's argument, copied */
} bounded_job;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *bounded_thread(void *p)
{
    bounded_job *j = p;
    j->fn(j->arg);
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    const int detached = j->detached;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (detached) { /* the caller stopped waiting: the job is this thread's to free */
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
    }
    return NULL;
}

int tp_call_bounded(void (*fn)(void *), const void *arg, size_t arg_size, double seconds)
{
    if (!fn || (arg_size && !arg)) return -1;
    bounded_job *j = calloc(1, sizeof *j + arg_size);
    if (!j) return -1;
    j->fn = fn;
    if (arg_size) memcpy(j->arg, arg, arg_size);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, bounded_thread, j)) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
        return -1;
    }
    pthread_detach(th);
    const double deadline = mono_s() + (seconds > 0 ? seconds : 0);
    pthread_mutex_lock(&j->mu);
    while (!j->done && mono_s() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    const int done = j->done;
    j->detached = !done;
    pthread_mutex_unlock(&j->mu);
    if (done) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
    }
    return done;
}
