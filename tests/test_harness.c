/* The harness's own exit codes, each in a child process (they exit): a case's skip
 * (test_skip_case: counted apart, 77 only when every case skipped) and the GPU skips under
 * QMM_REQUIRE_GPU=1 (test_skip_no_gpu and test_require_gpu fail, test_skip_all still skips). */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* The exit code of fn run in a child (-1 when it did not exit); its output is dropped, so its
 * expected FAIL and SKIP lines do not read as this program's (QMM_TEST_VERBOSE=1 keeps them). */
static int child_rc(void (*fn)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        const char *v = getenv("QMM_TEST_VERBOSE");
        if (!(v && !strcmp(v, "1")) && !freopen("/dev/null", "w", stdout)) _exit(125);
        fn();
        exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static void c_pass(void) { CHECK(1); }
static void c_skip(void) { test_skip_case("nothing to run it on"); }
static void c_skip_then_fail(void)
{
    test_skip_case("skipped");
    CHECKF(0, "a failure after the skip (expected)");
}

static const test_case *g_table;
static int g_count;
static void run_table(void)
{
    char name[] = "child", *argv[] = {name, NULL};
    exit(test_main(1, argv, g_table, g_count));
}
static int table_rc(const test_case *t, int n)
{
    g_table = t, g_count = n;
    return child_rc(run_table);
}

static void case_skips_are_counted_apart(void)
{
    TEST_TABLE(mixed, c_pass, c_skip);
    TEST_TABLE(all_skip, c_skip, c_skip);
    TEST_TABLE(failed, c_skip, c_skip_then_fail);
    int rc = table_rc(mixed, TEST_COUNT(mixed));
    CHECKF(rc == 0, "a pass and a skip: exit %d, want 0", rc);
    rc = table_rc(all_skip, TEST_COUNT(all_skip));
    CHECKF(rc == 77, "every case skipped: exit %d, want 77 (a skipped program)", rc);
    rc = table_rc(failed, TEST_COUNT(failed));
    CHECKF(rc == 1, "a skip, then a failed check: exit %d, want 1", rc);
}

static void skip_no_gpu(void) { test_skip_no_gpu("no GPU (expected)"); }
static void skip_all(void) { test_skip_all("needs two GPUs (expected)"); }
static void require_gpu(void) { test_require_gpu("nothing (expected)"); }
/* exit 1 with a device; CUDA only in children (a process must not fork after initializing it) */
static void have_gpu(void)
{
    int count = 0;
    char why[256] = "";
    qmm_cuda_device_count(&count, why, sizeof why);
    exit(count > 0);
}

static void gpu_skips_under_require_gpu(void)
{
    unsetenv("QMM_REQUIRE_GPU");
    int rc = child_rc(skip_no_gpu);
    CHECKF(rc == 77, "no GPU, QMM_REQUIRE_GPU unset: exit %d, want 77", rc);
    setenv("QMM_REQUIRE_GPU", "0", 1);
    rc = child_rc(skip_no_gpu);
    CHECKF(rc == 77, "no GPU, QMM_REQUIRE_GPU=0: exit %d, want 77", rc);
    setenv("QMM_REQUIRE_GPU", "1", 1);
    rc = child_rc(skip_no_gpu);
    CHECKF(rc == 1, "no GPU, QMM_REQUIRE_GPU=1: exit %d, want 1", rc);
    rc = child_rc(skip_all); /* a two-GPU test on one GPU still skips */
    CHECKF(rc == 77, "test_skip_all under QMM_REQUIRE_GPU=1: exit %d, want 77", rc);
    /* test_require_gpu on this machine: returns (exit 0) with a GPU, fails without one */
    const int gpu = child_rc(have_gpu);
    CHECK(gpu == 0 || gpu == 1);
    rc = child_rc(require_gpu);
    CHECKF(rc == (gpu == 1 ? 0 : 1), "test_require_gpu (GPU: %s) under QMM_REQUIRE_GPU=1: exit %d",
           gpu == 1 ? "yes" : "no", rc);
    unsetenv("QMM_REQUIRE_GPU");
    if (gpu == 0) {
        rc = child_rc(require_gpu);
        CHECKF(rc == 77, "test_require_gpu without a GPU: exit %d, want 77", rc);
    }
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, case_skips_are_counted_apart, gpu_skips_under_require_gpu);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
