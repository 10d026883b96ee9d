/* qmm quantize-checkpoint: bf16/f16/f32 Hugging Face Qwen3 safetensors -> MLX 4-bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "qmm.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: qmm quantize-checkpoint --in DIR|model.safetensors|index.json --out DIR\n"
               "                               [--group-size 32|64|128]\n"
               "  reads config.json beside the input; writes DIR/model.safetensors (MLX 4-bit,\n"
               "  groups of 128 unless --group-size; mlx_lm.convert's default is 64) and\n"
               "  DIR/config.json, and copies tokenizer.json, tokenizer_config.json and\n"
               "  generation_config.json when present, atomically (nothing is left on error)\n");
}

int cmd_quantize_checkpoint(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    int group = 128;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--in") && strcmp(argv[i], "--out") && strcmp(argv[i], "--group-size"))
            return cli_unknown("quantize-checkpoint", argv[i]);
        if (i + 1 >= argc) {
            fprintf(stderr, "qmm quantize-checkpoint: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--in")) in = argv[++i];
        else if (!strcmp(argv[i], "--out")) out = argv[++i];
        else if (!strcmp(argv[i], "--group-size")) {
            long long g = 0;
            if (!cli_int("quantize-checkpoint", "--group-size", argv[++i], 32, 128, &g) ||
                (g != 32 && g != 64 && g != 128)) {
                fprintf(stderr, "qmm quantize-checkpoint: --group-size must be 32, 64 or 128 "
                                "(got %s)\n", argv[i]);
                return 2;
            }
            group = (int)g;
        }
        else {
            fprintf(stderr, "qmm quantize-checkpoint: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!in || !out) {
        fprintf(stderr, "qmm quantize-checkpoint: both --in and --out are required\n");
        return 2;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    qmm_llm_quantize_report r;
    qmm_status st = qmm_llm_quantize_checkpoint_group(in, out, group, &r);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (st) {
        fprintf(stderr, "qmm quantize-checkpoint: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
        return 2; /* a missing or malformed input: usage or environment */
    }
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    printf("wrote %s/model.safetensors (%.1f MB, groups of %d) and %s/config.json in %.1f s\n",
           out, (double)r.bytes / 1e6, group, out, s);
    printf("%lld tensors quantized (worst relative error %.4f), %lld norms copied, "
           "%lld input tensors not used by the engine\n",
           (long long)r.quantized, r.worst_rel_frob, (long long)r.copied, (long long)r.ignored);
    return 0;
}
