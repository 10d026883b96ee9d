/* qmm — command-line front end. Each subcommand has its own file; this one only dispatches. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"plan", cmd_plan, "print the split-K plan for shapes or a model (seed or device policy)"},
    {"info", cmd_info, "what this build and machine have (CPU, CUDA devices)"},
    {"matmul", cmd_matmul, "quantize a random matrix, multiply, check against the reference, time"},
    {"perf", cmd_perf, "performance model: pipeline schedules and split-K waves"},
    {"model", cmd_perf, "the same as perf (its former name)"},
    {"bench", cmd_bench, "benchmarks on the GPU (ops, e2e, overlap)"},
    {"run", cmd_run, "run a Qwen3 model (checkpoint or synthetic preset), token ids in and out"},
    {"quantize-checkpoint", cmd_quantize_checkpoint,
     "bf16/f32 safetensors -> MLX 4-bit g128 safetensors"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: qmm <command> [options]   (qmm <command> --help for each)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-20s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "qmm: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
