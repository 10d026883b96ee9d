/*
 * A tensor-parallel rank's NCCL communicator (tp.h): joining it with a bounded wait, the
 * collectives the forward enqueues, and every wait for them bounded by a timeout after which
 * the communicator is aborted (a peer that died never answers; NCCL alone would spin forever).
 * Built without NCCL (no nccl.h at configure time) every call fails with a clear message.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "llm/cuda/session.h"
#include "llm/cuda/tp_session.h"
#include "llm/tp.h"

#ifdef QMM_HAVE_NCCL
#include <nccl.h>

struct tp_comm {
    ncclComm_t comm;
    int rank, ranks, device;
    double timeout_s;
    int aborted;      /* ncclCommAbort ran: the communicator and its streams are gone */
    void *sym;        /* the symmetric buffer (tp_comm_symmetric_buffer), owned here */
    ncclWindow_t win; /* its registration */
    size_t sym_bytes;
    int sym_used;     /* lent to a session */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double env_seconds(const char *name, double dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    double d = strtod(v, &end);
    return *end || !(d > 0) ? dflt : d;
}

extern "C" int tp_have_nccl(void) { return 1; }
extern "C" int tp_comm_rank(const tp_comm *c) { return c ? c->rank : 0; }
extern "C" int tp_comm_ranks(const tp_comm *c) { return c ? c->ranks : 1; }
int tp_comm_device(const tp_comm *c) { return c ? c->device : 0; }

/* Rank 0: make the id and publish it whole (write beside, then rename). */
static qmm_status publish_id(const char *path, ncclUniqueId *id)
{
    ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess)
        return qmm_fail(QMM_ERR_COMM, "ncclGetUniqueId: %s", ncclGetErrorString(r));
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return qmm_fail(QMM_ERR_IO, "%s: %s", tmp, strerror(errno));
    size_t w = fwrite(id, sizeof *id, 1, f);
    if (fclose(f) || w != 1 || rename(tmp, path))
        return qmm_fail(QMM_ERR_IO, "publishing the NCCL id at %s: %s", path, strerror(errno));
    return QMM_OK;
}

/* Ranks > 0: wait for rank 0's file, up to the deadline; give up early if the launcher died. */
static qmm_status read_id(const char *path, double deadline, ncclUniqueId *id)
{
    pid_t parent = getppid();
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (n == 1) return QMM_OK;
        }
        if (getppid() != parent)
            return qmm_fail(QMM_ERR_COMM, "the launcher died before rank 0 published the NCCL id");
        if (now_s() > deadline)
            return qmm_fail(QMM_ERR_COMM, "rank 0 did not publish the NCCL id at %s in time "
                            "(QMM_TP_INIT_TIMEOUT_S)", path);
        usleep(10000);
    }
}

/* ncclCommInitRank on a helper thread, so the caller can stop waiting at a deadline (the
 * blocking call has no timeout of its own; on a timeout the thread is left behind and the
 * process is expected to exit). */
struct init_job {
    ncclUniqueId id;
    int ranks, rank, device;
    ncclComm_t comm;
    ncclResult_t r;
    cudaError_t ce;
    int done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void *init_thread(void *p)
{
    init_job *j = (init_job *)p;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclInternalError;
    cudaError_t ce = cudaSetDevice(j->device);
    if (ce == cudaSuccess) r = ncclCommInitRank(&comm, j->ranks, j->id, j->rank);
    pthread_mutex_lock(&j->mu);
    j->comm = comm, j->r = r, j->ce = ce, j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

extern "C" qmm_status tp_comm_create(const tp_env *e, int device, tp_comm **out)
{
    if (!e || !out) return qmm_fail(QMM_ERR_NULL, "tp_comm_create: NULL argument");
    *out = NULL;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || device < 0 || device >= ndev) {
        cudaGetLastError();
        return qmm_fail(QMM_ERR_NO_DEVICE, "tensor parallelism: rank %d wants CUDA device %d; "
                        "this machine has %d", e->rank, device, ndev);
    }
    const double init_s = env_seconds("QMM_TP_INIT_TIMEOUT_S", 600.0);
    const double deadline = now_s() + init_s;
    init_job *j = (init_job *)calloc(1, sizeof *j);
    if (!j) return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    j->ranks = e->ranks, j->rank = e->rank, j->device = device;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    qmm_status st = e->rank == 0 ? publish_id(e->id_path, &j->id)
                                 : read_id(e->id_path, deadline, &j->id);
    pthread_t th;
    if (!st && pthread_create(&th, NULL, init_thread, j))
        st = qmm_fail(QMM_ERR_COMM, "cannot start the NCCL init thread");
    if (st) {
        free(j);
        return st;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!j->done && now_s() > deadline) break;
    }
    int done = j->done;
    pthread_mutex_unlock(&j->mu);
    if (!done) { /* the thread still owns j */
        pthread_detach(th);
        return qmm_fail(QMM_ERR_COMM, "rank %d of %d: ncclCommInitRank did not complete within "
                        "%.0f s (a rank died or never started; QMM_TP_INIT_TIMEOUT_S)", e->rank,
                        e->ranks, init_s);
    }
    pthread_join(th, NULL);
    ncclComm_t comm = j->comm;
    ncclResult_t r = j->r;
    cudaError_t ce = j->ce;
    free(j);
    if (ce != cudaSuccess)
        return qmm_fail(QMM_ERR_NO_DEVICE, "CUDA device %d: %s", device, cudaGetErrorString(ce));
    if (r != ncclSuccess)
        return qmm_fail(QMM_ERR_COMM, "rank %d of %d: ncclCommInitRank: %s", e->rank, e->ranks,
                        ncclGetErrorString(r));
    tp_comm *c = (tp_comm *)calloc(1, sizeof *c);
    if (!c) {
        ncclCommDestroy(comm);
        return qmm_fail(QMM_ERR_NOMEM, "out of memory");
    }
    c->comm = comm, c->rank = e->rank, c->ranks = e->ranks, c->device = device;
    c->timeout_s = env_seconds("QMM_TP_TIMEOUT_S", 60.0);
    *out = c;
    return QMM_OK;
}

/* ncclCommAbort / ncclCommDestroy on a helper thread (tp_call_bounded): either can block --
 * NCCL waits until every CUDA graph that captured one of its collectives is destroyed and its
 * launches have ended, and a peer that hangs can keep one in flight -- and a rank must still
 * report its error and exit. Past the wait the thread finishes on its own; the communicator is
 * never touched again. */
struct end_arg {
    ncclComm_t comm;
    int device, abort;
    void *sym;
    ncclWindow_t win;
};

/* The symmetric buffer's window is deregistered (collective) before a destroy; an abort frees
 * it with the communicator. Its memory goes last. */
static void end_comm(void *p)
{
    const end_arg *a = (const end_arg *)p;
    cudaSetDevice(a->device);
    if (a->abort) {
        ncclCommAbort(a->comm);
    } else {
        if (a->win) ncclCommWindowDeregister(a->comm, a->win);
        ncclCommDestroy(a->comm);
    }
    if (a->sym) ncclMemFree(a->sym);
}

static int end_bounded(const tp_comm *c, int abort, double secs)
{
    end_arg a = {c->comm, c->device, abort, c->sym, c->win};
    /* no thread (-1): the communicator is left as it is, the process is about to exit */
    return tp_call_bounded(end_comm, &a, sizeof a, secs) == 1;
}

/* How long ending a communicator may take before the rank gives up on it. */
static double end_seconds(const tp_comm *c) { return c->timeout_s < 10.0 ? 10.0 : c->timeout_s; }

extern "C" void tp_comm_destroy(tp_comm *c)
{
    if (!c) return;
    if (!c->aborted) end_bounded(c, 0, end_seconds(c));
    free(c);
}

int tp_comm_abort(tp_comm *c)
{
    if (!c || c->aborted) return 1;
    c->aborted = 1; /* from here on nothing touches c->comm */
    return end_bounded(c, 1, end_seconds(c));
}

static qmm_status nccl_fail(tp_comm *c, ncclResult_t r, const char *what)
{
    const char *detail = c->aborted ? "" : ncclGetLastError(c->comm);
    return qmm_fail(QMM_ERR_COMM, "rank %d: %s: %s%s%s", c->rank, what, ncclGetErrorString(r),
                    detail && *detail ? ": " : "", detail ? detail : "");
}

qmm_status tp_comm_allreduce(tp_comm *c, void *buf, size_t count, int fp32, cudaStream_t st)
{
    if (c->aborted) return qmm_fail(QMM_ERR_COMM, "rank %d: the communicator was aborted", c->rank);
    ncclResult_t r = ncclAllReduce(buf, buf, count, fp32 ? ncclFloat32 : ncclBfloat16, ncclSum,
                                   c->comm, st);
    return r == ncclSuccess ? QMM_OK : nccl_fail(c, r, "ncclAllReduce");
}

qmm_status tp_comm_allgather_bf16(tp_comm *c, void *full, size_t per_rank, cudaStream_t st)
{
    if (c->aborted) return qmm_fail(QMM_ERR_COMM, "rank %d: the communicator was aborted", c->rank);
    char *recv = (char *)full;
    ncclResult_t r = ncclAllGather(recv + (size_t)c->rank * per_rank * 2, recv, per_rank,
                                   ncclBfloat16, c->comm, st);
    return r == ncclSuccess ? QMM_OK : nccl_fail(c, r, "ncclAllGather");
}

int tp_comm_aborted(const tp_comm *c) { return c && c->aborted; }

/* NCCL's symmetric memory (2.27+): a buffer every rank allocates with ncclMemAlloc and registers
 * as a window with NCCL_WIN_COLL_SYMMETRIC lets collectives on it use NCCL's low-latency
 * symmetric kernels (peers' copies at known addresses: no per-call handshake), which is what a
 * decode step's 16-20 KB all-reduces need. Collective: every rank calls it in the same order,
 * and every decision below is the same on every rank (sessions are made alike). The first call
 * allocates and registers; later sessions borrow the buffer when it is free and large enough,
 * else get plain memory (*out = NULL), as with QMM_TP_SYMMETRIC=0. A failure is an error (a rank
 * that fell back alone would leave its peers waiting in the registration). */
qmm_status tp_comm_symmetric_buffer(tp_comm *c, size_t bytes, void **out)
{
    *out = NULL;
    const char *env = getenv("QMM_TP_SYMMETRIC");
    if (env && !strcmp(env, "0")) return QMM_OK;
    if (c->aborted) return qmm_fail(QMM_ERR_COMM, "rank %d: the communicator was aborted", c->rank);
    if (c->sym) {
        if (!c->sym_used && bytes <= c->sym_bytes) {
            c->sym_used = 1;
            *out = c->sym;
        }
        return QMM_OK;
    }
    void *p = NULL;
    ncclResult_t r = ncclMemAlloc(&p, bytes);
    if (r != ncclSuccess) return nccl_fail(c, r, "ncclMemAlloc (QMM_TP_SYMMETRIC=0 avoids it)");
    r = ncclCommWindowRegister(c->comm, p, bytes, &c->win, NCCL_WIN_COLL_SYMMETRIC);
    if (r != ncclSuccess) {
        ncclMemFree(p);
        c->win = NULL;
        return nccl_fail(c, r, "ncclCommWindowRegister (QMM_TP_SYMMETRIC=0 avoids it)");
    }
    if (cudaMemset(p, 0, bytes) != cudaSuccess)
        return qmm_fail(QMM_ERR_CUDA, "rank %d: clearing the symmetric buffer", c->rank);
    c->sym = p, c->sym_bytes = bytes, c->sym_used = 1;
    *out = p;
    return QMM_OK;
}

void tp_comm_symmetric_return(tp_comm *c, void *p)
{
    if (c && p && p == c->sym) c->sym_used = 0;
}

/* Wait for the stream without blocking in CUDA: a collective whose peer died never ends, so
 * poll the stream and NCCL's error state up to the timeout. Aborting is the caller's next step
 * (tp_comm_abort, after destroying the graphs that captured collectives: NCCL's abort waits for
 * them). */
qmm_status tp_comm_sync(tp_comm *c, cudaStream_t stream)
{
    if (c->aborted) return qmm_fail(QMM_ERR_COMM, "rank %d: the communicator was aborted", c->rank);
    const double t0 = now_s();
    for (long spin = 0;; spin++) {
        cudaError_t e = cudaStreamQuery(stream);
        if (e == cudaSuccess) return QMM_OK;
        if (e != cudaErrorNotReady)
            return qmm_fail(QMM_ERR_CUDA, "rank %d: the stream failed: %s", c->rank,
                            cudaGetErrorString(e));
        ncclResult_t ar = ncclSuccess;
        if (ncclCommGetAsyncError(c->comm, &ar) == ncclSuccess && ar != ncclSuccess &&
            ar != ncclInProgress)
            return nccl_fail(c, ar, "a collective failed");
        if (now_s() - t0 > c->timeout_s)
            return qmm_fail(QMM_ERR_COMM, "rank %d of %d: a collective did not finish within "
                            "%.0f s (a peer died or hangs; QMM_TP_TIMEOUT_S); the communicator "
                            "is aborted", c->rank, c->ranks, c->timeout_s);
        if (spin > 2000) usleep(50);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

extern "C" qmm_status tp_allreduce_sweep(tp_comm *c, const double *bytes, int n, int iters,
                                         int repeats, double *us)
{
    if (!c || !bytes || !us) return qmm_fail(QMM_ERR_NULL, "tp_allreduce_sweep: NULL argument");
    if (n < 1 || iters < 1 || repeats < 1 || repeats > 64)
        return qmm_fail(QMM_ERR_ARG, "tp_allreduce_sweep: n %d, iters %d, repeats %d", n, iters,
                        repeats);
    size_t maxb = 0;
    for (int i = 0; i < n; i++) {
        if (!(bytes[i] >= 2)) return qmm_fail(QMM_ERR_ARG, "all-reduce of %g bytes", bytes[i]);
        if ((size_t)bytes[i] > maxb) maxb = (size_t)bytes[i];
    }
    QMM_CUDA_TRY(cudaSetDevice(c->device));
    void *buf = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t ev[2] = {NULL, NULL};
    qmm_status q = QMM_OK;
    cudaGraphExec_t exec = NULL;
    if (cudaMalloc(&buf, maxb) != cudaSuccess || cudaMemset(buf, 0, maxb) != cudaSuccess ||
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreate(&ev[0]) != cudaSuccess || cudaEventCreate(&ev[1]) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess)
        q = qmm_fail(QMM_ERR_CUDA, "all-reduce sweep setup: %s",
                     cudaGetErrorString(cudaGetLastError()));
    for (int i = 0; i < n && !q; i++) {
        size_t count = (size_t)bytes[i] / 2;
        cudaGraph_t g = NULL;
        if (cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
            q = qmm_fail(QMM_ERR_CUDA, "capturing the all-reduces");
            break;
        }
        for (int k = 0; k < iters && !q; k++) q = tp_comm_allreduce(c, buf, count, 0, st);
        cudaError_t e = cudaStreamEndCapture(st, &g);
        if (!q && e != cudaSuccess)
            q = qmm_fail(QMM_ERR_CUDA, "capturing the all-reduces: %s", cudaGetErrorString(e));
        if (!q && cudaGraphInstantiate(&exec, g, 0) != cudaSuccess)
            q = qmm_fail(QMM_ERR_CUDA, "instantiating the all-reduce graph");
        if (g) cudaGraphDestroy(g);
        double t[64];
        /* one untimed launch, then the timed ones */
        for (int r = -1; r < repeats && !q; r++) {
            if (cudaEventRecord(ev[0], st) != cudaSuccess || cudaGraphLaunch(exec, st) != cudaSuccess ||
                cudaEventRecord(ev[1], st) != cudaSuccess) {
                q = qmm_fail(QMM_ERR_CUDA, "launching the all-reduce graph");
                break;
            }
            if ((q = tp_comm_sync(c, st))) {
                /* the graph first: NCCL's abort waits until no graph holds its collectives */
                cudaGraphExecDestroy(exec), exec = NULL;
                tp_comm_abort(c);
                break;
            }
            float ms = 0;
            cudaEventElapsedTime(&ms, ev[0], ev[1]);
            if (r >= 0) t[r] = 1000.0 * ms / iters;
        }
        if (exec) cudaGraphExecDestroy(exec), exec = NULL;
        if (!q) {
            qsort(t, (size_t)repeats, sizeof t[0], cmp_double);
            us[i] = t[repeats / 2];
        }
    }
    if (!c->aborted) {
        if (ev[0]) cudaEventDestroy(ev[0]);
        if (ev[1]) cudaEventDestroy(ev[1]);
        if (st) cudaStreamDestroy(st);
        if (buf) cudaFree(buf);
    }
    return q;
}

#else /* no NCCL in this build */

#define NO_NCCL                                                                               \
    qmm_fail(QMM_ERR_UNSUPPORTED, "tensor parallelism (--tp > 1) needs NCCL, and this qmm was " \
                                  "built without it (no nccl.h / libnccl at configure time)")

struct tp_comm {
    int rank;
};
extern "C" int tp_have_nccl(void) { return 0; }
extern "C" int tp_comm_rank(const tp_comm *c) { return c ? c->rank : 0; }
extern "C" int tp_comm_ranks(const tp_comm *c) { return c ? 1 : 1; }
int tp_comm_device(const tp_comm *) { return 0; }
extern "C" qmm_status tp_comm_create(const tp_env *e, int device, tp_comm **out)
{
    (void)e, (void)device;
    if (out) *out = NULL;
    return NO_NCCL;
}
extern "C" void tp_comm_destroy(tp_comm *c) { free(c); }
qmm_status tp_comm_allreduce(tp_comm *, void *, size_t, int, cudaStream_t) { return NO_NCCL; }
qmm_status tp_comm_allgather_bf16(tp_comm *, void *, size_t, cudaStream_t) { return NO_NCCL; }
int tp_comm_aborted(const tp_comm *) { return 0; }
qmm_status tp_comm_symmetric_buffer(tp_comm *, size_t, void **out)
{
    *out = NULL;
    return NO_NCCL;
}
void tp_comm_symmetric_return(tp_comm *, void *) {}
qmm_status tp_comm_sync(tp_comm *, cudaStream_t) { return NO_NCCL; }
int tp_comm_abort(tp_comm *) { return 1; }
extern "C" qmm_status tp_allreduce_sweep(tp_comm *, const double *, int, int, int, double *)
{
    return NO_NCCL;
}

#endif
