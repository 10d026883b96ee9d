/* qmm — command-line front end. Each subcommand has its own file; this one only dispatches. */
#include "commands.h"

static const command commands[] = {
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

int main(int argc, char **argv)
{
    return dispatch("qmm", "command", commands, (int)(sizeof commands / sizeof commands[0]), argc,
                    argv);
}
