/* qmm run: a Qwen3 model on a text prompt (streamed text out) or on token ids (ids out, timings,
 * weight streaming). Options are parsed in run_opts.c; the two modes live in run_text.c and
 * run_ids.c. */
#include <stdio.h>

#include "commands.h"
#include "run_opts.h"
#include "tp_cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm run --model DIR|FILE|synthetic:PRESET\n"
            "               (--prompt TEXT | --prompt-ids 1,2,3 | --prompt-len N)\n"
            "               [--max-new-tokens N] [--device cpu|cuda|auto] [--seed S] [--json]\n"
            "               [--temperature T] [--top-k K] [--top-p P] [--min-p P]\n"
            "               [--think on|off] [--system TEXT] [--chat-template on|off]\n"
            "               [--tokenizer DIR] [--split-k on|off] [--graph on|off] [--fuse on|off]\n"
            "               [--pdl on|off] [--decode fused|persistent]\n"
            "               [--threads T] [--max-seq N]\n"
            "               [--offload-weights [--buffers B] [--resident on|off]]\n"
            "               [--tp N]   (tensor parallelism on N GPUs: qmm run --tp 1 --help)\n"
            "  --model: a checkpoint directory (config.json + MLX 4-bit safetensors), a\n"
            "      .safetensors file, or synthetic:qwen3-0.6b|1.7b|4b|8b (random weights from\n"
            "      --seed; -g64 or -g32 after the name: in groups of 64 or 32, not 128; a bare\n"
            "      preset name works when no such path exists)\n"
            "  --prompt TEXT: tokenized with the model's tokenizer.json (or --tokenizer DIR), through\n"
            "      the Qwen3 chat template when tokenizer_config.json has one (--chat-template off:\n"
            "      the raw text; --think off: thinking disabled); the text streams to stdout, a\n"
            "      summary (time to first token, prompt and generation tok/s) goes to stderr;\n"
            "      generation stops at an end-of-sequence id of generation_config.json (or\n"
            "      config.json). Default --max-new-tokens 256\n"
            "  sampling: defaults from generation_config.json (greedy when it has no do_sample);\n"
            "      --temperature 0 is greedy; --top-k 0, --top-p 1, --min-p 0 turn each off; --seed\n"
            "      fixes the draws\n"
            "  --prompt-ids / --prompt-len N (N random ids from --seed): greedy, token ids in and\n"
            "      out with prefill and decode timings (default --max-new-tokens 16)\n"
            "  --json: one JSON object on stdout instead of the text or the ids\n"
            "  --split-k off: the unsplit tiled kernel for every prefill projection (CUDA)\n"
            "  --fuse on (default): q|k|v and gate|up as one stacked weight each (CUDA; 4 matmuls\n"
            "      a layer); off: 7 separate projections\n"
            "  --pdl on (default): the engine's kernels with programmatic dependent launch (CUDA)\n"
            "  --decode fused (default): each decode step is five kernels a layer; persistent: one\n"
            "      kernel for all layers and the LM head (CUDA, one GPU; needs resident weights of\n"
            "      groups of 128 and --fuse on, else the session fails)\n"
            "  --max-seq: KV cache positions (default prompt + new tokens)\n"
            "  --offload-weights: stream the layers' weights from pinned host memory into B\n"
            "      device slots (default 2) while earlier layers compute (CUDA; token ids only)\n"
            "  --resident on (default with offload): first run the resident session: its tokens\n"
            "      must match, its profile gives the per-layer compute time of the prediction\n"
            "  exit: 0 ok, 1 the streamed tokens differ from the resident run's, 2 usage or\n"
            "      environment (bad option, missing file, no GPU, out of memory)\n");
}

int cmd_run(int argc, char **argv)
{
    const char *tp = NULL; /* --tp N: tensor parallelism, one process per GPU (tp_cli.c) */
    if (!tp_cli_take("run", &argc, argv, &tp)) return 2;
    if (tp) return tp_run_main(tp, argc, argv);
    run_opts o;
    int rc = run_parse("run", argc, argv, &o, usage);
    if (rc >= 0) return rc;
    return o.prompt ? run_text(&o) : run_ids(&o);
}
