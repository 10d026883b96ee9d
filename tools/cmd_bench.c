/* `qmm bench <what>`: dispatch to the benchmark named by the first argument. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} benches[] = {
    {"ops", bench_ops_main, "every Qwen3-4B projection over M: qmm paths beside cuBLAS bf16"},
    {"e2e", bench_e2e_main, "whole-model prefill and decode"},
    {"overlap", bench_overlap_main, "chunked host<->device pipeline with 1, 2, 3 buffers vs the model"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: qmm bench <benchmark> [options]   (qmm bench <benchmark> --help)\n\n");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        fprintf(f, "  %-8s %s\n", benches[i].name, benches[i].help);
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        if (!strcmp(argv[1], benches[i].name)) return benches[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "qmm bench: unknown benchmark '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
