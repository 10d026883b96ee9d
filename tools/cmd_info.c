/* qmm info: what this build and this machine have (CPUs, CUDA devices). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "qmm.h"

#define QMM_TOOL_VERSION "0.1.0"

static void usage(FILE *f)
{
    fprintf(f, "usage: qmm info\n"
               "  Prints the qmm version and build, the CPU, and every CUDA device with the facts\n"
               "  the planner uses (SMs, L2, clocks, driver and runtime versions).\n");
}

/* The CPU's model name from /proc/cpuinfo, or "unknown". */
static void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (colon && !strncmp(line, "model name", 10)) {
            colon += 1 + (colon[1] == ' ');
            colon[strcspn(colon, "\n")] = 0;
            snprintf(out, len, "%s", colon);
            break;
        }
    }
    fclose(f);
}

static void version_text(int v, char *out, size_t len)
{
    if (v <= 0) snprintf(out, len, "unknown");
    else snprintf(out, len, "%d.%d", v / 1000, v % 1000 / 10);
}

int cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "qmm info: unknown option '%s'\n", argv[i]);
        usage(stderr);
        return 2;
    }
    char model[256];
    cpu_model(model, sizeof model);
    printf("qmm %s\n", QMM_TOOL_VERSION);
#if defined(__VERSION__)
    printf("build      C compiler %s, CUDA backend %s\n", __VERSION__,
           qmm_cuda_built() ? "built" : "not built");
#else
    printf("build      CUDA backend %s\n", qmm_cuda_built() ? "built" : "not built");
#endif
    printf("cpu        %s, %ld online CPUs\n", model, sysconf(_SC_NPROCESSORS_ONLN));

    int count = 0;
    char why[256] = "";
    qmm_status st = qmm_cuda_device_count(&count, why, sizeof why);
    if (st) {
        printf("cuda       error: %s: %s\n", qmm_status_name(st), qmm_last_error());
        return 1;
    }
    if (count == 0) {
        printf("cuda       no devices (%s)\n", why);
        return 0;
    }
    printf("cuda       %d device%s\n", count, count == 1 ? "" : "s");
    int rc = 0;
    for (int d = 0; d < count; d++) {
        qmm_cuda_ctx *ctx = NULL;
        qmm_gpu_info gi;
        if ((st = qmm_cuda_create(d, NULL, &ctx)) || (st = qmm_cuda_info(ctx, &gi))) {
            printf("gpu %d      error: %s: %s\n", d, qmm_status_name(st), qmm_last_error());
            qmm_cuda_destroy(ctx);
            rc = 1;
            continue;
        }
        char drv[32], rt[32];
        version_text(gi.driver_version, drv, sizeof drv);
        version_text(gi.runtime_version, rt, sizeof rt);
        printf("gpu %d      %s, compute capability %d.%d, %d SMs, L2 %.1f MiB, "
               "shared memory per block (opt-in) %d KiB\n",
               d, gi.name, gi.cc_major, gi.cc_minor, gi.sm_count, gi.l2_bytes / 1048576.0,
               gi.smem_per_block_optin / 1024);
        printf("           SM clock %d MHz, memory clock %d MHz, bus %d bits, driver %s, "
               "runtime %s\n",
               gi.clock_khz / 1000, gi.mem_clock_khz / 1000, gi.mem_bus_bits, drv, rt);
        qmm_cuda_destroy(ctx);
    }
    return rc;
}
