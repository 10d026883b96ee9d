/* Replays the fuzzing inputs of tests/fuzz/ through the checkpoint parsers: the seed corpus
 * (tests/fuzz/corpus/) and regress.bin, the fuzzer's minimized corpus (records of u32 LE length +
 * bytes; 412 inputs, 402 edges, from 17 M runs of fuzz_safetensors.c without a crash). Any future
 * crasher is appended there. Every input must return a status and hand out tensors inside it. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/safetensors.h"

/* The tests/fuzz directory, from this file's path (the build compiles it by absolute path). */
static void fuzz_dir(char *out, size_t size)
{
    snprintf(out, size, "%s", __FILE__);
    char *slash = strrchr(out, '/');
    if (slash) snprintf(slash, size - (size_t)(slash - out), "/fuzz");
}

static int replay(const unsigned char *data, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    int ok = 1;
    st_header h;
    if (st_parse(buf, size, "replay", &h) == QMM_OK) {
        for (size_t i = 0; i < h.count; i++)
            if (h.tensors[i].data < buf || h.tensors[i].data + h.tensors[i].nbytes > buf + size) ok = 0;
        st_header_free(&h);
    } else if (!qmm_last_error()[0]) {
        ok = 0; /* a failure must say why */
    }
    qmm_llm_config c;
    (void)qmm_llm_config_parse((const char *)buf, size, &c);
    free(buf);
    return ok;
}

static void seed_corpus(void)
{
    char dir[1024], path[2048];
    fuzz_dir(dir, sizeof dir);
    strncat(dir, "/corpus", sizeof dir - strlen(dir) - 1);
    DIR *d = opendir(dir);
    if (!d) { /* committed: a missing corpus is a broken checkout, not a pass */
        test_fail(__FILE__, __LINE__, "cannot open %s (the committed seed corpus)", dir);
        return;
    }
    int files = 0, accepted = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        unsigned char *b = test_read_file(path, &len);
        if (!b) continue;
        files++;
        CHECKF(replay(b, len), "%s", e->d_name);
        st_header h;
        if (strstr(e->d_name, ".safetensors") && st_parse(b, len, e->d_name, &h) == QMM_OK) {
            accepted++;
            st_header_free(&h);
        }
        free(b);
    }
    closedir(d);
    printf("    %d seed files, %d valid safetensors\n", files, accepted);
    CHECK(files >= 6 && accepted >= 4);
}

static void minimized_corpus(void)
{
    char dir[1024], path[1100];
    fuzz_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/regress.bin", dir);
    size_t len;
    unsigned char *b = test_read_file(path, &len);
    if (!b) { /* committed, as the corpus */
        test_fail(__FILE__, __LINE__, "cannot read %s (the committed minimized corpus)", path);
        return;
    }
    size_t at = 0;
    int count = 0;
    while (at + 4 <= len) {
        uint32_t n = (uint32_t)b[at] | (uint32_t)b[at + 1] << 8 | (uint32_t)b[at + 2] << 16 |
                     (uint32_t)b[at + 3] << 24;
        at += 4;
        if (n > len - at) {
            test_fail(__FILE__, __LINE__, "regress.bin is truncated at record %d", count);
            break;
        }
        CHECKF(replay(b + at, n), "record %d", count);
        at += n;
        count++;
    }
    printf("    %d minimized inputs replayed\n", count);
    CHECK(count >= 100);
    free(b);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, seed_corpus, minimized_corpus);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
