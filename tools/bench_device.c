/* `qmm bench ops`: the machine facts printed with every table (DESIGN §8, STYLE lesson 9). */
#ifdef QMM_HAVE_CUDA

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_gpu.h"

/* The command line, each argument quoted when it holds a space. */
static void join_command(char *out, size_t size, int argc, char **argv)
{
    size_t used = (size_t)snprintf(out, size, "qmm bench");
    for (int i = 0; i < argc && used < size; i++) {
        const char *q = strchr(argv[i], ' ') ? "'" : "";
        used += (size_t)snprintf(out + used, size - used, " %s%s%s", q, argv[i], q);
    }
}

void bench_meta_fill(bench_meta *m, const bench_opts *o, int argc, char **argv)
{
    memset(m, 0, sizeof *m);
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, o->device));
    snprintf(m->gpu, sizeof m->gpu, "%.127s", p.name);
    m->cc_major = p.major;
    m->cc_minor = p.minor;
    m->sms = p.multiProcessorCount;
    m->l2_bytes = p.l2CacheSize;
    m->mem_bus_bits = p.memoryBusWidth;
    /* CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain. */
    CK(cudaDeviceGetAttribute(&m->sm_clock_khz, cudaDevAttrClockRate, o->device));
    CK(cudaDeviceGetAttribute(&m->mem_clock_khz, cudaDevAttrMemoryClockRate, o->device));
    CK(cudaDriverGetVersion(&m->driver_version));
    CK(cudaRuntimeGetVersion(&m->runtime_version));

    const char *commit = o->commit ? o->commit : getenv("QMM_COMMIT");
    snprintf(m->commit, sizeof m->commit, "%s", commit && *commit ? commit : "unknown");
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    join_command(m->command, sizeof m->command, argc, argv);
    m->seed = o->seed;
    m->hot = o->hot;
    m->reps = o->reps;
    m->calls_min = o->calls;
}

#else
typedef int bench_device_unused; /* CUDA builds only */
#endif
