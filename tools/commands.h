/* Subcommands of the qmm tool: each lives in its own file and returns a process exit code. */
#ifndef QMM_TOOLS_COMMANDS_H
#define QMM_TOOLS_COMMANDS_H

int cmd_plan(int argc, char **argv);      /* cmd_plan.c: print split-K plans */
int cmd_info(int argc, char **argv);      /* cmd_info.c: build, CPU and GPU facts */
int cmd_matmul(int argc, char **argv);    /* cmd_matmul.c: quantize, multiply, check, time */
int cmd_perf(int argc, char **argv);      /* cmd_perf.c: performance model tables */
int cmd_perf_tp(int argc, char **argv);   /* cmd_perf_tp.c: tensor-parallel decode, on paper */
int cmd_bench(int argc, char **argv);     /* cmd_bench.c: operator / e2e / overlap benchmarks */
int cmd_run(int argc, char **argv);       /* cmd_run.c: run a Qwen3 model */
int cmd_chat(int argc, char **argv);      /* cmd_chat.c: multi-turn chat on stdin/stdout */
int cmd_tokenize(int argc, char **argv);  /* cmd_tokenize.c: text <-> token ids */
int cmd_quantize_checkpoint(int argc, char **argv); /* cmd_quantize_checkpoint.c */

/* parse_int.c: s is a decimal integer in [lo, hi] (nothing else, no overflow) -> *out, 1;
 * otherwise 0 and *out unchanged. */
int parse_int_arg(const char *s, long long lo, long long hi, long long *out);

/* `qmm bench` subcommands, dispatched by cmd_bench.c */
int bench_ops_main(int argc, char **argv); /* bench_ops.c: per-projection operator benchmark */
int bench_e2e_main(int argc, char **argv); /* bench_e2e.c: whole-model prefill/decode benchmark */
int bench_overlap_main(int argc, char **argv); /* bench_overlap.c: copy/compute pipeline */

/* A table of subcommands and its dispatcher (commands.c): runs the one named by argv[1] with
 * argv + 1, or prints the table (--help: to stdout, exit 0; none or unknown: stderr, exit 2). */
typedef struct command {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;
int dispatch(const char *tool, const char *what, const command *table, int count, int argc,
             char **argv);

#endif

