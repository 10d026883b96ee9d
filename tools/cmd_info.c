/* qmm info: what this build and this machine have (CPUs, CUDA devices). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "qmm.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: qmm info [--json]\n"
               "  Prints the qmm version and build, the CPU, and every CUDA device with the facts\n"
               "  the planner uses (SMs, L2, clocks, driver and runtime versions).\n"
               "  --json: the same as one JSON object. exit: 0 ok, 2 a device could not be queried\n");
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

static void json_info(const char *cpu)
{
    int count = 0;
    char why[256] = "";
    qmm_status st = qmm_cuda_device_count(&count, why, sizeof why);
    printf("{\"version\": \"%s\", \"cuda_built\": %s, \"cpu\": ", qmm_version(),
           qmm_cuda_built() ? "true" : "false");
    cli_json_string(stdout, cpu, strlen(cpu));
    printf(", \"online_cpus\": %ld, \"gpus\": [", sysconf(_SC_NPROCESSORS_ONLN));
    for (int d = 0; !st && d < count; d++) {
        qmm_cuda_ctx *ctx = NULL;
        qmm_gpu_info gi;
        if (qmm_cuda_create(d, NULL, &ctx) || qmm_cuda_info(ctx, &gi)) {
            printf("%s{\"index\": %d, \"error\": ", d ? ", " : "", d);
            cli_json_string(stdout, qmm_last_error(), strlen(qmm_last_error()));
            printf("}");
        } else {
            printf("%s{\"index\": %d, \"name\": ", d ? ", " : "", d);
            cli_json_string(stdout, gi.name, strlen(gi.name));
            printf(", \"cc\": \"%d.%d\", \"sms\": %d, \"l2_bytes\": %lld, \"sm_clock_mhz\": %d, "
                   "\"mem_clock_mhz\": %d, \"bus_bits\": %d, \"driver\": %d, \"runtime\": %d}",
                   gi.cc_major, gi.cc_minor, gi.sm_count, (long long)gi.l2_bytes,
                   gi.clock_khz / 1000, gi.mem_clock_khz / 1000, gi.mem_bus_bits,
                   gi.driver_version, gi.runtime_version);
        }
        qmm_cuda_destroy(ctx);
    }
    printf("], \"cuda_note\": ");
    const char *note = st ? qmm_last_error() : why;
    cli_json_string(stdout, note, strlen(note));
    printf("}\n");
}

int cmd_info(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return EXIT_OK;
        }
        if (!strcmp(argv[i], "--json")) {
            json = 1;
            continue;
        }
        return cli_unknown("info", argv[i]);
    }
    char model[256];
    cpu_model(model, sizeof model);
    if (json) {
        json_info(model);
        return EXIT_OK;
    }
    printf("qmm %s\n", qmm_version());
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
        return EXIT_USAGE;
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
            rc = EXIT_USAGE;
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
