/* qmm's tokenizer against Hugging Face `tokenizers` on the real Qwen3 files: the cases file from
 * tokenizer_cases.py (input bytes, reference ids, expected decode) must match exactly, and the
 * encode speed is measured on the same benchmark text as the reference.
 * The chat template written in C must give the text jinja2 renders from tokenizer_config.json.
 * usage: tokenizer_ref TOKENIZER_JSON CASES BENCH_TEXT CHAT_CASES  (tokenizer_ref.sh runs it) */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "internal.h"
#include "llm/llm_io.h"

static const char *g_json, *g_cases, *g_bench, *g_chat;
static qmm_tokenizer *g_tok;

/* The whole file, NUL-terminated; NULL and a failed case when it cannot be read. */
static char *read_all(const char *path, size_t *len)
{
    char *text = NULL;
    qmm_status st = llm_read_file(path, (size_t)1 << 30, &text, len);
    CHECKF(st == QMM_OK, "cannot read %s: %s", path, qmm_last_error());
    return text;
}

static size_t unhex(const char *h, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        sscanf(h + i, "%2x", &v);
        out[k++] = (char)v;
    }
    return k;
}

static void show(const char *what, const char *s, size_t n)
{
    fprintf(stderr, "  %s: \"", what);
    for (size_t i = 0; i < n && i < 200; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) fputc(c, stderr);
        else fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, "\"\n");
}

static void test_reference_cases(void)
{
    size_t len;
    char *all = read_all(g_cases, &len);
    if (!all) return;
    int cases = 0, bad = 0, stable = 0;
    char *buf = malloc(len + 1), *dec_want = malloc(len + 1);
    for (char *line = all; line && *line;) {
        char *nl = strchr(line, '\n'), *t1 = strchr(line, '\t');
        char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!nl || !t1 || !t2 || t2 > nl) {
            CHECKF(0, "malformed line %d of %s", cases + 1, g_cases);
            break;
        }
        size_t n = unhex(line, (size_t)(t1 - line), buf);
        size_t dn = unhex(t2 + 1, (size_t)(nl - t2 - 1), dec_want);
        int64_t want[8192], nw = 0;
        for (char *p = t1 + 1; p < t2 && nw < 8192;) {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p) break;
            want[nw++] = v;
            p = e;
        }
        int32_t *ids = NULL;
        int64_t ni = -1;
        qmm_status st = qmm_tokenizer_encode(g_tok, buf, n, &ids, &ni);
        int same = !st && ni == nw;
        for (int64_t i = 0; same && i < ni; i++) same = ids[i] == want[i];
        char *dec = NULL;
        size_t dlen = 0;
        int round = !st && !qmm_tokenizer_decode(g_tok, ids, ni, &dec, &dlen) && dlen == dn &&
                    !memcmp(dec, dec_want, dn);
        /* the expected decode is NFC(input) (input when NFC-stable, as most are) */
        stable += dn == n && !memcmp(dec_want, buf, n);
        if (!same || !round) {
            bad++;
            test_fail(__FILE__, __LINE__, "case %d: %s%s", cases + 1, same ? "" : "ids differ ",
                      round ? "" : "decode differs");
            show("input", buf, n);
            fprintf(stderr, "  want:");
            for (int64_t i = 0; i < nw && i < 40; i++) fprintf(stderr, " %lld", (long long)want[i]);
            fprintf(stderr, "\n  got: ");
            for (int64_t i = 0; i < ni && i < 40; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n");
        }
        free(ids);
        free(dec);
        cases++;
        line = nl + 1;
    }
    printf("  %d reference cases, %d differ; decode(encode(s)) == s for the %d NFC-stable ones, "
           "== NFC(s) for the others\n", cases, bad, stable);
    CHECKF(cases >= 200, "only %d cases", cases);
    free(buf);
    free(dec_want);
    free(all);
}

/* Each line: add_generation_prompt, enable_thinking, (hex role, hex content)..., hex expected. */
static void test_chat_template(void)
{
    size_t len;
    char *all = read_all(g_chat, &len);
    if (!all) return;
    int cases = 0;
    for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n")) {
        char *field[64];
        int nf = 0;
        for (char *p = line; p && nf < 64; nf++) {
            field[nf] = p;
            p = strchr(p, '\t');
            if (p) *p++ = 0;
        }
        if (nf < 5 || nf % 2 == 0) {
            CHECKF(0, "malformed chat case %d", cases + 1);
            break;
        }
        qmm_chat_message m[30];
        char *text[64];
        int nm = (nf - 3) / 2;
        for (int i = 2; i < nf; i++) {
            size_t l = strlen(field[i]);
            text[i] = malloc(l / 2 + 1);
            text[i][unhex(field[i], l, text[i])] = 0;
        }
        for (int i = 0; i < nm; i++) m[i] = (qmm_chat_message){text[2 + 2 * i], text[3 + 2 * i]};
        char *got = NULL;
        size_t glen = 0;
        CHECK_OK(qmm_chat_render(g_tok, m, nm, atoi(field[0]), atoi(field[1]), &got, &glen));
        const char *want = text[nf - 1];
        CHECKF(got && !strcmp(got, want), "chat case %d (gen %s, think %s): got\n%s\nwant\n%s",
               cases + 1, field[0], field[1], got ? got : "(null)", want);
        free(got);
        for (int i = 2; i < nf; i++) free(text[i]);
        cases++;
    }
    printf("  %d chat renderings equal jinja2's\n", cases);
    CHECK(cases >= 20);
    free(all);
}

static void test_encode_speed(void)
{
    size_t len;
    char *text = read_all(g_bench, &len);
    if (!text) return;
    double best = 1e30;
    int64_t n = 0;
    for (int r = 0; r < 3; r++) {
        int32_t *ids = NULL;
        double t0 = (qmm_now_ms() * 1e-3);
        CHECK_OK(qmm_tokenizer_encode(g_tok, text, len, &ids, &n));
        double dt = (qmm_now_ms() * 1e-3) - t0;
        if (dt < best) best = dt;
        free(ids);
    }
    printf("  qmm encode (1 thread): %.2f MB in %.1f ms = %.2f MB/s, %lld tokens\n", len / 1e6,
           best * 1e3, len / 1e6 / best, (long long)n);
    free(text);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s TOKENIZER_JSON CASES BENCH_TEXT CHAT_CASES [harness options]\n",
                argv[0]);
        return 2;
    }
    g_json = argv[1];
    g_cases = argv[2];
    g_bench = argv[3];
    g_chat = argv[4];
    double t0 = (qmm_now_ms() * 1e-3);
    qmm_status st = qmm_tokenizer_load(g_json, &g_tok);
    if (st) {
        fprintf(stderr, "FAIL: load %s: %s\n", g_json, qmm_last_error());
        return 1;
    }
    printf("loaded %s (%lld ids) in %.0f ms\n", g_json, (long long)qmm_tokenizer_vocab_size(g_tok),
           ((qmm_now_ms() * 1e-3) - t0) * 1e3);
    static const test_case cases[] = {
        {"reference_cases", test_reference_cases},
        {"chat_template", test_chat_template},
        {"encode_speed", test_encode_speed},
    };
    argv[4] = argv[0];
    int rc = test_main(argc - 4, argv + 4, cases, 3);
    qmm_tokenizer_destroy(g_tok);
    return rc;
}
