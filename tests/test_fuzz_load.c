/* The whole-load fuzz target (tests/fuzz/fuzz_load.c) without libFuzzer: its seeds must load
 * fully and generate; then a bounded mutation loop (config, header, data, lengths) runs through
 * the same harness: every input must end in tokens or a status with a message (crashes, leaks
 * and stray reads are the sanitizers' to catch in the ASan build). Budget: QMM_FUZZ_SECONDS
 * (default 10) and QMM_FUZZ_RUNS (default 20000), whichever ends first; the seed is printed.
 * tests/fuzz/load_regress.bin, when present, holds crashers found since (u32 LE length + bytes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "internal.h"

#define FUZZ_LOAD_NO_ENTRY
#include "fuzz/fuzz_load.c"
#include "fuzz/load_seeds.c"

static void seeds_load_and_generate(void)
{
    unsigned char *b;
    size_t n;
    int count = 0;
    for (int i = 0; (n = fuzz_load_seed(i, &b)); i++, count++) {
        int rc = fuzz_load_one(b, n);
        printf("    seed %d: %zu bytes -> %s\n", i, n, rc == 1 ? "loaded, 2 tokens" : qmm_last_error());
        CHECKF(rc == 1, "seed %d does not load fully: %s", i, qmm_last_error());
        free(b);
    }
    CHECK(count >= 5);
}

/* An input as its three parts, mutated part by part and reassembled with consistent lengths
 * (mostly: sometimes a length field is corrupted on purpose). */
typedef struct parts {
    unsigned char *p[3]; /* config, header, data */
    size_t n[3];
} parts;

static void split_seed(const unsigned char *b, size_t len, parts *x)
{
    const char *cfg = NULL;
    const unsigned char *img = NULL;
    size_t cl = 0, il = 0;
    if (!fuzz_load_split(b, len, &cfg, &cl, &img, &il)) abort(); /* seeds always split */
    size_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | img[i];
    const unsigned char *src[3] = {(const unsigned char *)cfg, img + 8, img + 8 + hl};
    size_t n[3] = {cl, hl, il - 8 - hl};
    for (int k = 0; k < 3; k++) {
        x->n[k] = n[k];
        x->p[k] = malloc(n[k] + 64);
        memcpy(x->p[k], src[k], n[k]);
    }
}

static const char *numbers[] = {"0", "-1", "1", "3", "7", "128", "255", "4294967296",
                                "9223372036854775807", "-9223372036854775808", "1e308", "0.5",
                                "18446744073709551616", "65536", "1024"};
static const unsigned char bytes[] = {0, 0xFF, '"', ',', '[', ']', '{', '}', ':', '9', '-', 0x80,
                                      '\\', 'e', ' '};

static void mutate_part(unsigned char **pp, size_t *np)
{
    unsigned char *p = *pp;
    size_t n = *np;
    int op = (int)(test_rand_u64() % 6);
    size_t at = n ? (size_t)(test_rand_u64() % n) : 0;
    if (op == 0 && n) {
        p[at] ^= (unsigned char)(1u << (test_rand_u64() % 8));
    } else if (op == 1 && n) {
        p[at] = bytes[test_rand_u64() % sizeof bytes];
    } else if (op == 2 && n) {
        /* the digit run around at becomes an interesting number */
        size_t b = at, e = at;
        while (b > 0 && (p[b - 1] >= '0' && p[b - 1] <= '9')) b--;
        while (e < n && p[e] >= '0' && p[e] <= '9') e++;
        const char *s = numbers[test_rand_u64() % (sizeof numbers / sizeof numbers[0])];
        size_t sl = strlen(s), nn = n - (e - b) + sl;
        unsigned char *q = malloc(nn + 64);
        memcpy(q, p, b);
        memcpy(q + b, s, sl);
        memcpy(q + b + sl, p + e, n - e);
        free(p);
        *pp = q;
        *np = nn;
    } else if (op == 3 && n) {
        *np = at; /* truncate */
    } else if (op == 4 && n) {
        size_t len = 1 + (size_t)(test_rand_u64() % 16);
        if (len > n - at) len = n - at;
        memmove(p + at, p + at + len, n - at - len);
        *np = n - len;
    } else if (n) {
        size_t len = 1 + (size_t)(test_rand_u64() % 32);
        if (len > n - at) len = n - at;
        unsigned char *q = malloc(n + len + 64);
        memcpy(q, p, at + len);
        memcpy(q + at + len, p + at, n - at); /* the span twice */
        free(p);
        *pp = q;
        *np = n + len;
    }
}

static unsigned char *assemble(const parts *x, size_t *len)
{
    size_t cl = x->n[0] > 65535 ? 65535 : x->n[0], hl = x->n[1];
    *len = 2 + cl + 8 + hl + x->n[2];
    unsigned char *b = malloc(*len);
    b[0] = (unsigned char)cl, b[1] = (unsigned char)(cl >> 8);
    memcpy(b + 2, x->p[0], cl);
    uint64_t h = hl;
    if (test_rand_u64() % 16 == 0) h += (uint64_t)(test_rand_u64() % 5) - 2; /* a lying length */
    for (int i = 0; i < 8; i++) b[2 + cl + i] = (unsigned char)(h >> (8 * i));
    memcpy(b + 2 + cl + 8, x->p[1], hl);
    memcpy(b + 2 + cl + 8 + hl, x->p[2], x->n[2]);
    return b;
}

static void mutation_loop(void)
{
    const char *es = getenv("QMM_FUZZ_SECONDS"), *er = getenv("QMM_FUZZ_RUNS");
    double budget = es ? atof(es) : 10.0;
    long runs_max = er ? atol(er) : 20000;
    unsigned char *seed[16];
    size_t seed_len[16];
    int nseeds = 0;
    while (nseeds < 16 && (seed_len[nseeds] = fuzz_load_seed(nseeds, &seed[nseeds]))) nseeds++;
    long runs = 0, loaded = 0, refused = 0;
    double t0 = (qmm_now_ms() * 1e-3);
    while (runs < runs_max && (qmm_now_ms() * 1e-3) - t0 < budget && !test_failed_now()) {
        parts x;
        int s = (int)(test_rand_u64() % (uint64_t)nseeds);
        split_seed(seed[s], seed_len[s], &x);
        int muts = 1 + (int)(test_rand_u64() % 3);
        for (int m = 0; m < muts; m++) {
            /* mostly the config and the header: the data is just weights */
            uint64_t r = test_rand_u64() % 10;
            int part = r < 3 ? 0 : r < 9 ? 1 : 2;
            mutate_part(&x.p[part], &x.n[part]);
        }
        size_t len;
        unsigned char *b = assemble(&x, &len);
        int rc = fuzz_load_one(b, len);
        CHECKF(rc >= 0, "run %ld: a failure without a message", runs);
        if (rc == 1) loaded++;
        else refused++;
        runs++;
        free(b);
        for (int k = 0; k < 3; k++) free(x.p[k]);
    }
    printf("    %ld mutated inputs in %.1f s: %ld loaded and generated, %ld refused\n", runs,
           (qmm_now_ms() * 1e-3) - t0, loaded, refused);
    CHECK(runs > 0 && loaded > 0 && refused > 0);
    for (int i = 0; i < nseeds; i++) free(seed[i]);
}

static void regressions(void)
{
    char path[1100];
    snprintf(path, sizeof path, "%s", __FILE__);
    char *slash = strrchr(path, '/');
    if (slash) snprintf(slash, sizeof path - (size_t)(slash - path), "/fuzz/load_regress.bin");
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("    (no load_regress.bin: no crasher found so far)\n");
        return;
    }
    int count = 0;
    unsigned char len4[4];
    while (fread(len4, 1, 4, f) == 4) {
        uint32_t n = (uint32_t)len4[0] | (uint32_t)len4[1] << 8 | (uint32_t)len4[2] << 16 |
                     (uint32_t)len4[3] << 24;
        unsigned char *b = malloc(n ? n : 1);
        if (fread(b, 1, n, f) != n) {
            free(b);
            test_fail(__FILE__, __LINE__, "load_regress.bin is truncated at record %d", count);
            break;
        }
        CHECKF(fuzz_load_one(b, n) >= 0, "record %d", count);
        free(b);
        count++;
    }
    fclose(f);
    printf("    %d recorded inputs replayed\n", count);
}

int main(int argc, char **argv)
{
    TEST_TABLE(cases, seeds_load_and_generate, mutation_loop, regressions);
    return test_main(argc, argv, cases, TEST_COUNT(cases));
}
