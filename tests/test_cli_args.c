/* The qmm tool's integer arguments (issue 17, defect 2): values that overflowed a buffer size or
 * a token count, were truncated, or silently became a default must be refused with exit code 2
 * and a message, before anything is loaded. A tiny checkpoint then runs for real. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"
#include "llm/hf_random.h"

#ifndef QMM_CLI
#define QMM_CLI "qmm"
#endif

static char g_dir[512];

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Runs `qmm ARGS` with its output in g_dir/out.txt; returns the exit code (-signal if killed). */
static int run(const char *args, char *out, size_t size)
{
    char cmd[2048], path[700];
    snprintf(path, sizeof path, "%s/out.txt", g_dir);
    snprintf(cmd, sizeof cmd, "timeout 120 %s %s > %s 2>&1", QMM_CLI, args, path);
    int st = system(cmd);
    out[0] = 0;
    FILE *f = fopen(path, "rb");
    if (f) {
        size_t n = fread(out, 1, size - 1, f);
        out[n] = 0;
        fclose(f);
    }
    if (st == -1) return -1000;
    if (WIFSIGNALED(st)) return -WTERMSIG(st);
    return WEXITSTATUS(st);
}

static void bad_integers_are_refused(void)
{
    static const char *cases[] = {
        "--prompt-len 4611686018427387905",
        "--prompt-len 99999999999999999999999",
        "--prompt-len 0",
        "--prompt-len -5",
        "--prompt-len 12abc",
        "--prompt-len ''",
        "--prompt-len ' 7'",
        "--prompt-len 4 --max-new-tokens 9223372036854775807",
        "--prompt-len 4 --max-new-tokens -1",
        "--prompt-len 4 --threads 99999999999",
        "--prompt-len 4 --threads -1",
        "--prompt-len 4 --max-seq -1",
        "--prompt-len 4 --max-seq 0",
        "--prompt-len 4 --max-seq 18446744073709551616",
        "--prompt-len 4 --buffers 0 --offload-weights",
        "--prompt-len 4 --buffers 4294967297 --offload-weights",
        "--prompt-len 4 --seed 1e9",
        "--prompt-ids ''",
        "--prompt-ids 1,,2",
        "--prompt-ids 1,2,",
    };
    char out[8192];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "run --model qwen3-0.6b --device cpu %s", cases[i]);
        int rc = run(args, out, sizeof out);
        printf("    %-58s -> %d\n", cases[i], rc);
        CHECKF(rc == 2, "%s: exit %d, want 2; output:\n%.500s", cases[i], rc, out);
        CHECKF(strstr(out, "qmm run:") != NULL, "%s: no message", cases[i]);
        CHECKF(!strstr(out, "model "), "%s: the model was loaded", cases[i]);
    }
}

/* The choice options take only their listed values, refused with the choices named before anything
 * is loaded; --decode defaults to fused (the session line on CUDA, the help text here). */
static void bad_choices_are_refused(void)
{
    static const char *cases[][2] = {
        {"run --prompt-len 4 --decode bogus", "'bogus' for --decode: want one of fused, persistent"},
        {"run --prompt-len 4 --decode Persistent", "'Persistent' for --decode"},
        {"run --prompt-len 4 --decode ''", "'' for --decode"},
        {"run --prompt-len 4 --decode", "--decode needs a value"},
        {"run --prompt-len 4 --offload-weights --decode persistent", "needs resident weights"},
        {"chat --decode bogus", "qmm chat: bad value 'bogus' for --decode"},
        {"run --prompt-len 4 --pdl maybe", "'maybe' for --pdl: want one of off, on"},
    };
    char out[8192];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "%.4s --model qwen3-0.6b --device cpu %s", cases[i][0],
                 cases[i][0] + 4);
        int rc = run(args, out, sizeof out);
        printf("    %-58s -> %d\n", cases[i][0], rc);
        CHECKF(rc == 2, "%s: exit %d, want 2; output:\n%.500s", cases[i][0], rc, out);
        CHECKF(strstr(out, cases[i][1]) != NULL, "%s: no '%s' in:\n%.500s", cases[i][0],
               cases[i][1], out);
        CHECKF(!strstr(out, "model "), "%s: the model was loaded", cases[i][0]);
    }
    int rc = run("run --help", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "--decode fused (default)") != NULL);
}

static void unknown_model_is_named(void)
{
    char out[8192];
    int rc = run("run --model qwen3-5b --prompt-len 2 --device cpu", out, sizeof out);
    printf("    %s", out);
    CHECK(rc == 2); /* the exit-code rule: a missing model is the environment */
    CHECK(strstr(out, "neither a preset") != NULL && !strstr(out, "config.json"));
}

static void tiny_checkpoint_runs(void)
{
    static const qmm_llm_config tiny = {128, 128, 1, 1, 1, 128, 64, 64, 1e6, 1e-6, 1, 128};
    char hf[600], mlx[600], args[1400], out[8192];
    snprintf(hf, sizeof hf, "%s/hf", g_dir);
    snprintf(mlx, sizeof mlx, "%s/mlx", g_dir);
    mkdir(hf, 0755);
    CHECK_OK(llm_write_random_hf(hf, &tiny, 5, ST_BF16));
    CHECK_OK(qmm_llm_quantize_checkpoint(hf, mlx, NULL));
    snprintf(args, sizeof args, "run --model %s --prompt-len 5 --max-new-tokens 3 --device cpu "
             "--threads 1 --max-seq 8", mlx);
    int rc = run(args, out, sizeof out);
    CHECKF(rc == 0, "exit %d:\n%s", rc, out);
    CHECK(strstr(out, "generated (3):") != NULL);
    /* --decode persistent is accepted; the CPU engine has no decode kernels to choose from, so
     * the same tokens come out */
    char ref[128] = "";
    const char *gen = strstr(out, "generated (3):");
    if (gen) sscanf(gen, "%127[^\n]", ref);
    snprintf(args, sizeof args, "run --model %s --prompt-len 5 --max-new-tokens 3 --device cpu "
             "--threads 1 --max-seq 8 --decode persistent", mlx);
    rc = run(args, out, sizeof out);
    CHECKF(rc == 0, "exit %d:\n%s", rc, out);
    CHECKF(ref[0] && strstr(out, ref) != NULL, "want '%s' in:\n%s", ref, out);
    /* a max-seq too small for prompt + new tokens is the session's error, not a crash */
    snprintf(args, sizeof args, "run --model %s --prompt-len 5 --max-new-tokens 3 --device cpu "
             "--threads 1 --max-seq 6", mlx);
    rc = run(args, out, sizeof out);
    CHECKF(rc == 2, "exit %d:\n%s", rc, out); /* the exit-code rule: a usage error */
    /* more positions than the config allows */
    snprintf(args, sizeof args, "run --model %s --prompt-len 100 --device cpu --threads 1", mlx);
    rc = run(args, out, sizeof out);
    CHECKF(rc == 2, "exit %d:\n%s", rc, out);
}

int main(int argc, char **argv)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/qmm_cli_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) return 1;
    TEST_TABLE(cases, bad_integers_are_refused, bad_choices_are_refused, unknown_model_is_named,
               tiny_checkpoint_runs);
    int rc = test_main(argc, argv, cases, TEST_COUNT(cases));
    nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
