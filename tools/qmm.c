/* qmm — command-line front end. Each subcommand has its own file; this one only dispatches. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qmm.h"

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
    {"run", cmd_run, "run a Qwen3 model: a text prompt streamed to text, or token ids in and out"},
    {"chat", cmd_chat, "multi-turn chat with a Qwen3 model (stdin/stdout, KV cache kept)"},
    {"tokenize", cmd_tokenize, "text <-> token ids with a model's tokenizer.json"},
    {"quantize-checkpoint", cmd_quantize_checkpoint,
     "bf16/f32 safetensors -> MLX 4-bit g128 safetensors"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: qmm <command> [options]   (qmm <command> --help for each)\n"
               "       qmm --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-20s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nexit status (every command): 0 ok; 1 a check failed (results differ from the\n"
               "reference or the expected tokens); 2 usage or environment (a bad option or value,\n"
               "a missing or malformed file, no GPU where one is required, out of memory).\n");
}

/* The library's progress reports drawn as a bar on stderr (cli_progress: terminals only). */
static void progress(void *ctx, const char *what, double done, double total)
{
    (void)ctx;
    if (done >= total) cli_progress_end();
    else cli_progress(what, done, total);
}

int main(int argc, char **argv)
{
    qmm_set_progress(progress, NULL);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("qmm %s\n", qmm_version());
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            int rc = commands[i].fn(argc - 1, argv + 1);
            cli_progress_end(); /* a bar left by work that failed half way */
            return rc;
        }
    fprintf(stderr, "qmm: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
