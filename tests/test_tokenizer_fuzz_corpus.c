/* Replays tests/fuzz/corpus_tokenizer/ through the tokenizer's libFuzzer entry (fuzz_tokenizer.c,
 * linked in by CMakeLists.txt; tests/fuzz/run.sh fuzzes it), as test_llm_fuzz_corpus does for the
 * parsers: each file parsed as a tokenizer.json, then encoded and decoded by the corpus's tiny.json
 * (the entry aborts on a failed ASCII round trip or a failed decode; ascii.txt is the seed that
 * takes the round trip, the others hold non-ASCII bytes). Any future crasher is added to that
 * directory. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "qmm_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* tests/fuzz/corpus_tokenizer, from this file's path (the build compiles it by absolute path) */
static void corpus_dir(char *out, size_t size)
{
    snprintf(out, size, "%s", __FILE__);
    char *slash = strrchr(out, '/');
    if (slash) snprintf(slash, size - (size_t)(slash - out), "/fuzz/corpus_tokenizer");
}

static void tokenizer_corpus(void)
{
    char dir[1024], tiny[1100], path[2048];
    corpus_dir(dir, sizeof dir);
    snprintf(tiny, sizeof tiny, "%s/tiny.json", dir);
    /* the entry's tokenizer; loaded here first so a broken one fails with its reason, not an abort */
    qmm_tokenizer *t = NULL;
    CHECK_OK(qmm_tokenizer_load(tiny, &t));
    qmm_tokenizer_destroy(t);
    if (test_failed_now()) return;
    setenv("QMM_FUZZ_TOKENIZER", tiny, 1);
    DIR *d = opendir(dir);
    if (!d) { /* committed: a missing corpus is a broken checkout, not a pass */
        test_fail(__FILE__, __LINE__, "cannot open %s (the committed tokenizer corpus)", dir);
        return;
    }
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        unsigned char *b = test_read_file(path, &len);
        CHECKF(b != NULL, "cannot read %s", path);
        if (!b) continue;
        printf("    %s (%zu bytes)\n", e->d_name, len);
        fflush(stdout); /* an abort in the entry names the input above it */
        CHECKF(LLVMFuzzerTestOneInput(b, len) == 0, "%s", e->d_name);
        files++;
        free(b);
    }
    closedir(d);
    printf("    %d tokenizer inputs replayed\n", files);
    CHECK(files >= 3);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, tokenizer_corpus);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
