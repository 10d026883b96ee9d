/* `qmm bench e2e`: the options shared by the parent (bench_e2e.c) and the child process that
 * runs one measurement (bench_e2e_child.c). */
#ifndef QMM_TOOLS_BENCH_E2E_H
#define QMM_TOOLS_BENCH_E2E_H

#include <stdint.h>

#define MAX_LENS 16
#define MAX_REPEATS 64

typedef struct e2e_args {
    const char *model, *out_md, *out_json;
    int64_t in_len[MAX_LENS], out_len[MAX_LENS];
    int nlen, nout;
    int variants[2], nvar; /* split-K on (1) / off (0), in order */
    int warmup, repeats, profile, verify;
    int cpu; /* --device cpu: the CPU reference forward (no verify, no profile) */
    int fuse; /* --fuse on (default): stacked q|k|v and gate|up weights in every variant */
    int pdl;  /* --pdl on (default): engine kernels with programmatic dependent launch */
    int persistent; /* --decode persistent: one kernel a decode step (default: fused) */
    int64_t max_seq; /* --max-seq: the session's positions (0: prompt + new - 1, the least) */
    long long seed;
} e2e_args;

/* The child: one model, one session, warm-ups, one timed generation, results on stdout. */
int e2e_child_main(const e2e_args *a, int split_k);

#endif
