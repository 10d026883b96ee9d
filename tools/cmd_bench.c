/* `qmm bench <what>`: dispatch to the benchmark named by the first argument. */
#include "commands.h"
#include "tp_cli.h"

static const command benches[] = {
    {"ops", bench_ops_main, "every Qwen3-4B projection over M: qmm paths beside cuBLAS bf16"},
    {"e2e", bench_e2e_main, "whole-model prefill and decode"},
    {"allreduce", bench_allreduce_main, "NCCL bf16 all-reduce sweep over t GPUs (8 KB..64 MB)"},
    {"overlap", bench_overlap_main, "chunked host<->device pipeline with 1, 2, 3 buffers vs the model"},
};

int cmd_bench(int argc, char **argv)
{
    return dispatch("qmm bench", "benchmark", benches, (int)(sizeof benches / sizeof benches[0]),
                    argc, argv);
}
