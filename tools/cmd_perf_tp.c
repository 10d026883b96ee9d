/* qmm perf tp: decode under tensor parallelism predicted on paper (src/perf/tp_model.h), with the
 * link measured on two H200s as its default; nothing here runs on a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "perf/tp_model.h"
#include "qmm.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm perf tp [--model NAME] [--ranks 1,2,4,8] [--context N] [--gpu NAME]\n"
            "                   [--link-gbs B] [--link-us U] [--kernels-per-layer K]\n"
            "                   [--hbm-fraction F]\n"
            "  PREDICTION, not a measurement: batch-1 decode of a Qwen3 preset split over t\n"
            "  GPUs (Megatron tensor parallelism): the bytes a rank reads (its W4 shard and\n"
            "  its KV heads' cache) over HBM bandwidth, kernel launches, and the all-reduces of\n"
            "  the bf16 hidden vector (2 * hidden bytes, twice a layer) on the critical path.\n"
            "  --model NAME          a preset (default qwen3-32b)\n"
            "  --ranks LIST          tensor-parallel sizes (default 1,2,4,8)\n"
            "  --context N           tokens in the KV cache (default 1024)\n"
            "  --gpu NAME            HBM bandwidth and launch cost (default h200-measured)\n"
            "  --link-gbs B          NVLink bandwidth a GPU a direction, GB/s (default %.0f,\n"
            "                        measured: qmm bench allreduce on two H200s)\n"
            "  --link-us U           fixed cost of one all-reduce, µs (default %.1f; measured)\n"
            "  --kernels-per-layer K launches a layer in the decode graph (default 5, as today)\n"
            "  --hbm-fraction F      of the GPU's bandwidth the decode kernels reach (default\n"
            "                        0.40: fit to the measured Qwen3-4B step at t = 1)\n",
            TP_LINK_GBS_MEASURED, TP_LINK_US_MEASURED);
}

static int parse_pos(const char *s, double *out)
{
    char *end = NULL;
    double v = s && *s ? strtod(s, &end) : NAN;
    if (!end || *end || !isfinite(v) || v < 0) return 0;
    *out = v;
    return 1;
}

int cmd_perf_tp(int argc, char **argv)
{
    tp_decode_params p = tp_decode_defaults();
    const char *model = "qwen3-32b", *gpu = "h200-measured";
    int ranks[16] = {1, 2, 4, 8}, nr = 4;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "qmm perf tp: %s needs a value\n", o);
            return 2;
        }
        const char *v = argv[++i];
        long long n = 0;
        int ok = 1;
        if (!strcmp(o, "--model")) model = v;
        else if (!strcmp(o, "--gpu")) gpu = v;
        else if (!strcmp(o, "--context")) ok = parse_int_arg(v, 0, 1 << 24, &n), p.context = n;
        else if (!strcmp(o, "--kernels-per-layer"))
            ok = parse_int_arg(v, 1, 1000, &n), p.kernels_per_layer = (int)n;
        else if (!strcmp(o, "--link-gbs")) ok = parse_pos(v, &p.link.bandwidth_gbs);
        else if (!strcmp(o, "--link-us")) ok = parse_pos(v, &p.link.latency_us);
        else if (!strcmp(o, "--hbm-fraction")) ok = parse_pos(v, &p.hbm_fraction);
        else if (!strcmp(o, "--ranks")) {
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            nr = 0;
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && ok;
                 t = strtok_r(NULL, ",", &save)) {
                ok = nr < 16 && parse_int_arg(t, 1, 1024, &n);
                if (ok) ranks[nr++] = (int)n;
            }
            ok = ok && nr > 0;
        } else {
            fprintf(stderr, "qmm perf tp: unknown option '%s'\n", o);
            usage(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "qmm perf tp: bad value '%s' for %s\n", v, o);
            return 2;
        }
    }
    qmm_llm_config c;
    double launch = p.gpu.launch_us; /* the preset supplies bandwidth; the graph's launch cost */
    if (qmm_llm_config_preset(model, &c) || qmm_model_gpu_preset(gpu, &p.gpu)) {
        fprintf(stderr, "qmm perf tp: %s\n", qmm_last_error());
        return 2;
    }
    p.gpu.launch_us = launch;
    int dflt = p.link.bandwidth_gbs == TP_LINK_GBS_MEASURED && p.link.latency_us == TP_LINK_US_MEASURED;
    printf("PREDICTION (paper model, nothing measured): %s decode, batch 1, context %lld, "
           "W4 g%lld\n", model, (long long)p.context, (long long)c.group_size);
    printf("gpu %s: HBM %.2f TB/s at %.2f, %.1f µs a kernel x %d a layer; link %.0f GB/s a "
           "direction, %.1f µs an all-reduce%s\n\n", gpu, p.gpu.bandwidth_tbs, p.hbm_fraction,
           p.gpu.launch_us, p.kernels_per_layer, p.link.bandwidth_gbs, p.link.latency_us,
           dflt ? " (measured on two H200s; more GPUs or nodes not measured)" : "");
    printf("%3s %10s %9s %9s %8s %4s %8s %9s %9s %8s %7s %6s\n", "t", "weights/GB", "kv/MB",
           "mem µs", "launch", "coll", "AR µs", "comm µs", "token µs", "tok/s", "speedup",
           "comm%");
    double t1 = 0;
    int rc = 0;
    for (int i = 0; i < nr; i++) {
        tp_decode_estimate e;
        if (tp_decode_predict(&c, ranks[i], &p, &e)) {
            printf("%3d  not possible: %s\n", ranks[i], qmm_last_error());
            rc = 1;
            continue;
        }
        if (ranks[i] == 1) t1 = e.total_us;
        char sp[16] = "-";
        if (t1 > 0) snprintf(sp, sizeof sp, "%.2fx", t1 / e.total_us);
        printf("%3d %10.3f %9.1f %9.1f %8.1f %4d %8.2f %9.1f %9.1f %8.1f %7s %5.1f%%\n", ranks[i],
               e.weight_bytes / 1e9, e.kv_bytes / 1e6, e.memory_us, e.launch_us, e.collectives,
               e.allreduce_us, e.comm_us, e.total_us, e.tokens_per_s, sp, 100 * e.comm_share);
    }
    return rc;
}
