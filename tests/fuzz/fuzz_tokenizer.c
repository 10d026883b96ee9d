/*
 * libFuzzer harness for the tokenizer: the bytes are parsed as a tokenizer.json (tok_build, the
 * loader's whole path after the file read), and encoded then decoded with a tokenizer built from
 * the seed file tests/fuzz/corpus_tokenizer/tiny.json (a small Qwen-style BPE): decode(encode(x))
 * must give back x for ASCII x, and every call must return a status without touching memory
 * outside its buffers.
 *
 * Build and run (from the repository root; clang 14 here):
 *   clang -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
 *     -fno-sanitize-recover=all -Iinclude -Isrc tests/fuzz/fuzz_tokenizer.c src/text/tok_*.c src/text/tokenizer.c \
 *     src/llm/llm_io.c src/status.c $(pkg-config --cflags --libs libpcre2-8 libutf8proc libcjson) \
 *     -lm -o /tmp/fuzz_tokenizer
 *   mkdir -p /tmp/fuzz_tok && cp -r tests/fuzz/corpus_tokenizer/. /tmp/fuzz_tok/
 *   QMM_FUZZ_TOKENIZER=tests/fuzz/corpus_tokenizer/tiny.json \
 *     /tmp/fuzz_tokenizer -max_total_time=300 -max_len=8192 /tmp/fuzz_tok
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static qmm_tokenizer *g_tiny;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_tiny) {
        const char *p = getenv("QMM_FUZZ_TOKENIZER");
        if (!p || qmm_tokenizer_load(p, &g_tiny)) {
            fprintf(stderr, "set QMM_FUZZ_TOKENIZER to a tokenizer.json\n");
            abort();
        }
    }
    char *buf = malloc(size ? size : 1); /* exactly size bytes: ASan sees any read past them */
    if (!buf) return 0;
    memcpy(buf, data, size);
    qmm_tokenizer *t = calloc(1, sizeof *t);
    if (t) {
        tok_build(t, buf, size, "fuzz");
        qmm_tokenizer_destroy(t);
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    if (!qmm_tokenizer_encode(g_tiny, buf, size, &ids, &n)) {
        char *back = NULL;
        size_t len = 0;
        if (qmm_tokenizer_decode(g_tiny, ids, n, &back, &len)) abort();
        int ascii = 1;
        for (size_t i = 0; i < size && ascii; i++) ascii = (unsigned char)buf[i] < 0x80;
        if (ascii && (len != size || memcmp(back, buf, size))) abort();
        free(back);
        free(ids);
    }
    free(buf);
    return 0;
}
