/* The text layer on small files written here: tokenizer (BPE merges, added tokens, invalid UTF-8,
 * streaming decode, malformed files), the chat template, generation_config.json, and sampling
 * (the distribution against a plain re-derivation, the sampler's draws against the distribution).
 * The real Qwen3 tokenizer is tested against HF tokenizers by tests/text/tokenizer_ref.sh. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char g_dir[256];

static void write_file(const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* The ByteLevel alphabet entry of byte b, JSON-escaped, into out. */
static void bytelevel(unsigned b, char *out)
{
    unsigned cp = b, n = 0;
    for (unsigned x = 0; x <= b; x++) {
        int printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
        if (x == b) cp = printable ? b : 256 + n;
        n += !printable;
    }
    if (cp == '"' || cp == '\\') sprintf(out, "\\%c", cp);
    else if (cp < 0x80) sprintf(out, "%c", cp);
    else sprintf(out, "%c%c", 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F));
}

/* A tiny tokenizer.json: bytes 0-255, merges (ids 256..263), added tokens 264..268.
 * extra_model / extra_added / regex let cases break one part. */
static char *tiny_json(const char *model_type, const char *added_flags, const char *regex,
                       int drop_byte, const char *extra_merge)
{
    static const char *merges[][2] = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"},
                                      {"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}, {"l", "d"}};
    size_t cap = 1 << 16;
    char *s = malloc(cap), *p = s;
    p += sprintf(p, "{\"added_tokens\": [");
    const char *added[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"};
    for (int i = 0; i < 5; i++)
        p += sprintf(p, "%s{\"id\": %d, \"content\": \"%s\", \"special\": %s%s}", i ? ", " : "",
                     264 + i, added[i], i < 3 ? "true" : "false", i == 2 ? added_flags : "");
    p += sprintf(p, "], \"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": "
                 "\"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
                 "\"%s\"}, \"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\", \"use_regex\": "
                 "false}]}, \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"%s\", "
                 "\"vocab\": {", regex, model_type);
    int first = 1;
    for (unsigned b = 0; b < 256; b++) {
        if ((int)b == drop_byte) continue;
        char e[8];
        bytelevel(b, e);
        p += sprintf(p, "%s\"%s\": %u", first ? "" : ", ", e, b);
        first = 0;
    }
    for (int i = 0; i < 8; i++) p += sprintf(p, ", \"%s%s\": %d", merges[i][0], merges[i][1], 256 + i);
    p += sprintf(p, "}, \"merges\": [");
    for (int i = 0; i < 8; i++) p += sprintf(p, "%s[\"%s\", \"%s\"]", i ? ", " : "", merges[i][0], merges[i][1]);
    if (extra_merge) p += sprintf(p, ", %s", extra_merge);
    sprintf(p, "]}}");
    return s;
}

#define QWEN_REGEX                                                                         \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "            \
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"

static const char *CHAT_CONFIG =
    "{\"chat_template\": \"{{'<|im_start|>'}}{% if enable_thinking %}<think>{% endif %}\"}";

static qmm_tokenizer *load_tiny(void)
{
    char *j = tiny_json("BPE", "", QWEN_REGEX, -1, NULL);
    write_file("tokenizer.json", j);
    write_file("tokenizer_config.json", CHAT_CONFIG);
    free(j);
    qmm_tokenizer *t = NULL;
    CHECK_OK(qmm_tokenizer_load(g_dir, &t));
    return t;
}

static void expect_ids(const qmm_tokenizer *t, const char *text, size_t len, const int32_t *want,
                       int64_t nw)
{
    int32_t *ids = NULL;
    int64_t n = -1;
    CHECK_OK(qmm_tokenizer_encode(t, text, len, &ids, &n));
    int same = n == nw;
    for (int64_t i = 0; same && i < n; i++) same = ids[i] == want[i];
    CHECKF(same, "encode(\"%s\"): %lld ids, first %d; want %lld ids, first %d", text,
           (long long)n, n > 0 ? ids[0] : -1, (long long)nw, nw > 0 ? want[0] : -1);
    free(ids);
}

static void test_bpe_and_added_tokens(void)
{
    qmm_tokenizer *t = load_tiny();
    if (!t) return;
    CHECK(qmm_tokenizer_vocab_size(t) == 269);
    static const struct {
        const char *text;
        int32_t ids[12];
        int n;
    } cases[] = {
        {"hello world", {259, 262, 263}, 3},     /* merges by rank, "Ġwor" + "ld" */
        {"hello", {259}, 1},
        {"hhello", {104, 259}, 2},               /* leftmost lowest rank: (h,e) at 1 */
        {"a<|im_end|>b", {97, 266, 98}, 3},      /* added tokens before BPE */
        {"<|im_end|><|im_start|>", {266, 265}, 2},
        {"<|im_end", {60, 124, 105, 109, 95, 101, 110, 100}, 8}, /* not whole: plain text */
        {"<think>hello</think>", {267, 259, 268}, 3},
        {"a\xff" "b", {97, 255, 98}, 3},         /* an invalid byte: its byte token */
        {"", {0}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_ids(t, cases[i].text, strlen(cases[i].text), cases[i].ids, cases[i].n);
    int32_t id = -1;
    CHECK_OK(qmm_tokenizer_token_id(t, "<|im_end|>", &id));
    CHECK(id == 266);
    CHECK_OK(qmm_tokenizer_token_id(t, "Ġw", &id));
    CHECK(id == 260);
    CHECK_STATUS(qmm_tokenizer_token_id(t, "nope", &id), QMM_ERR_NOT_FOUND);
    CHECK(qmm_tokenizer_is_special(t, 266) && !qmm_tokenizer_is_special(t, 267));
    char *s = NULL;
    size_t len = 0;
    int32_t bad[] = {97, 269};
    CHECK_STATUS(qmm_tokenizer_decode(t, bad, 2, &s, &len), QMM_ERR_RANGE);
    int32_t neg[] = {-1};
    CHECK_STATUS(qmm_tokenizer_decode(t, neg, 1, &s, &len), QMM_ERR_RANGE);
    qmm_tokenizer_destroy(t);
}

/* Random byte strings, invalid UTF-8 included: decode(encode(s)) == s (NFC-stable inputs). */
static void test_roundtrip_random_bytes(void)
{
    qmm_tokenizer *t = load_tiny();
    if (!t) return;
    static const char *pieces[] = {"hello", " world", "  ", "\n", "'s", "12", "!?", "\xe4\xb8\x96",
                                   "\xf0\x9f\x98\x80", "\xff", "\xc3", "\x80", "<|im_end|>",
                                   "<think>", "\t", "x"};
    for (int c = 0; c < 300; c++) {
        char buf[512];
        size_t n = 0;
        int parts = (int)(test_rand_u64() % 20);
        for (int i = 0; i < parts; i++) {
            const char *p = pieces[test_rand_u64() % (sizeof pieces / sizeof pieces[0])];
            memcpy(buf + n, p, strlen(p));
            n += strlen(p);
        }
        int32_t *ids = NULL;
        int64_t ni = 0;
        char *back = NULL;
        size_t bl = 0;
        CHECK_OK(qmm_tokenizer_encode(t, buf, n, &ids, &ni));
        CHECK_OK(qmm_tokenizer_decode(t, ids, ni, &back, &bl));
        CHECKF(bl == n && !memcmp(back, buf, n), "case %d: round trip differs (%zu vs %zu bytes)",
               c, bl, n);
        free(ids);
        free(back);
        if (test_failed_now()) break;
    }
    qmm_tokenizer_destroy(t);
}

/* Streaming: only whole characters come out, whatever the token boundaries. */
static void test_stream_decoder(void)
{
    qmm_tokenizer *t = load_tiny();
    if (!t) return;
    const char *text = "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80!";
    int32_t *ids = NULL;
    int64_t n = 0;
    CHECK_OK(qmm_tokenizer_encode(t, text, strlen(text), &ids, &n));
    qmm_text_stream *s = NULL;
    CHECK_OK(qmm_text_stream_create(t, &s));
    char out[256];
    size_t at = 0;
    for (int64_t i = 0; s && i < n; i++) {
        const char *p;
        size_t l;
        CHECK_OK(qmm_text_stream_push(s, ids[i], &p, &l));
        /* each piece starts and ends on character boundaries */
        CHECKF(l == 0 || (((unsigned char)p[0] & 0xC0) != 0x80), "piece %lld starts mid-character", (long long)i);
        memcpy(out + at, p, l);
        at += l;
    }
    const char *p;
    size_t l;
    CHECK_OK(qmm_text_stream_flush(s, &p, &l));
    CHECK(l == 0);
    CHECK(at == strlen(text) && !memcmp(out, text, at));
    /* a stray continuation byte, and a lead byte left at the end: U+FFFD each */
    int32_t bad[] = {0x80, 104, 0xE4};
    at = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(qmm_text_stream_push(s, bad[i], &p, &l));
        memcpy(out + at, p, l);
        at += l;
    }
    CHECK_OK(qmm_text_stream_flush(s, &p, &l));
    memcpy(out + at, p, l);
    at += l;
    CHECK(at == 7 && !memcmp(out, "\xef\xbf\xbdh\xef\xbf\xbd", 7));
    CHECK_STATUS(qmm_text_stream_push(s, 9999, &p, &l), QMM_ERR_RANGE);
    qmm_text_stream_destroy(s);
    free(ids);
    qmm_tokenizer_destroy(t);
}

/* Malformed or unsupported files: a clear error, never a crash. */
static void test_bad_files(void)
{
    static const struct {
        const char *what;
        const char *model_type, *added_flags, *regex, *merge;
        int drop_byte;
        qmm_status want;
    } cases[] = {
        {"WordPiece", "WordPiece", "", QWEN_REGEX, NULL, -1, QMM_ERR_UNSUPPORTED},
        {"lstrip added token", "BPE", ", \"lstrip\": true", QWEN_REGEX, NULL, -1, QMM_ERR_UNSUPPORTED},
        {"bad regex", "BPE", "", "(unclosed", NULL, -1, QMM_ERR_FORMAT},
        {"merge of unknown tokens", "BPE", "", QWEN_REGEX, "[\"zz\", \"q\"]", -1, QMM_ERR_FORMAT},
        {"merge not a pair", "BPE", "", QWEN_REGEX, "[\"h\"]", -1, QMM_ERR_FORMAT},
        {"a byte without a token", "BPE", "", QWEN_REGEX, NULL, 'q', QMM_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *j = tiny_json(cases[i].model_type, cases[i].added_flags, cases[i].regex,
                            cases[i].drop_byte, cases[i].merge);
        write_file("tokenizer.json", j);
        free(j);
        qmm_tokenizer *t = NULL;
        qmm_status st = qmm_tokenizer_load(g_dir, &t);
        CHECKF(st == cases[i].want, "%s: %s (%s), want %s", cases[i].what, qmm_status_name(st),
                   qmm_last_error(), qmm_status_name(cases[i].want));
        CHECKF(st || t, "%s: no tokenizer", cases[i].what);
        qmm_tokenizer_destroy(t);
    }
    /* every prefix of a valid file is malformed (or, at full length, fine) */
    char *j = tiny_json("BPE", "", QWEN_REGEX, -1, NULL);
    size_t n = strlen(j);
    for (size_t cut = 0; cut < n; cut += 1 + n / 97) {
        char save = j[cut];
        j[cut] = 0;
        write_file("tokenizer.json", j);
        j[cut] = save;
        qmm_tokenizer *t = NULL;
        CHECKF(qmm_tokenizer_load(g_dir, &t) == QMM_ERR_FORMAT, "prefix of %zu bytes", cut);
        qmm_tokenizer_destroy(t);
    }
    free(j);
    qmm_tokenizer *t = NULL;
    CHECK_STATUS(qmm_tokenizer_load("/nonexistent/dir/tokenizer.json", &t), QMM_ERR_NOT_FOUND);
}

static void test_chat_template(void)
{
    qmm_tokenizer *t = load_tiny();
    if (!t) return;
    static const struct {
        int count, gen, think;
        const char *want;
    } cases[] = {
        {2, 1, 1, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
                  "<|im_start|>assistant\n"},
        {2, 1, 0, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
        /* an earlier reply loses its reasoning */
        {4, 1, 1, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
                  "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n"
                  "<|im_start|>assistant\n"},
        /* the last reply after the last user message keeps it */
        {5, 0, 1, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
                  "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\nR2\n</think>\n\nA2<|im_end|>\n"},
    };
    qmm_chat_message m[5] = {{"system", "S"},
                             {"user", "U1"},
                             {"assistant", "<think>\nR1\n</think>\n\nA1"},
                             {"user", "U2"},
                             {"assistant", "<think>\n\nR2\n\n</think>\n\n\nA2"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = NULL;
        size_t len = 0;
        CHECK_OK(qmm_chat_render(t, m, cases[i].count, cases[i].gen, cases[i].think, &s, &len));
        CHECKF(s && !strcmp(s, cases[i].want) && len == strlen(cases[i].want),
               "case %zu:\n%s\nwant:\n%s", i, s ? s : "(null)", cases[i].want);
        free(s);
    }
    qmm_chat_message bad = {"robot", "x"};
    char *s = NULL;
    size_t len = 0;
    CHECK_STATUS(qmm_chat_render(t, &bad, 1, 1, 1, &s, &len), QMM_ERR_ARG);
    qmm_tokenizer_destroy(t);
    write_file("tokenizer_config.json", "{\"chat_template\": \"{{ messages }}\"}");
    t = NULL;
    CHECK_OK(qmm_tokenizer_load(g_dir, &t));
    CHECK_STATUS(qmm_chat_render(t, m, 2, 1, 1, &s, &len), QMM_ERR_UNSUPPORTED);
    qmm_tokenizer_destroy(t);
}

static void test_generation_config(void)
{
    static const struct {
        const char *gen, *cfg;
        qmm_status want;
        double temperature, top_p, min_p;
        int64_t top_k;
        int eos_count, eos0, eos1;
    } cases[] = {
        {NULL, NULL, QMM_OK, 0, 1, 0, 0, 0, 0, 0},
        {"{\"do_sample\": true, \"temperature\": 0.6, \"top_k\": 20, \"top_p\": 0.95, "
         "\"eos_token_id\": [151645, 151643]}", NULL, QMM_OK, 0.6, 0.95, 0, 20, 2, 151645, 151643},
        {"{\"do_sample\": true}", "{\"eos_token_id\": 7}", QMM_OK, 1, 1, 0, 50, 1, 7, 0},
        {"{\"temperature\": 0.6, \"eos_token_id\": 3}", NULL, QMM_OK, 0, 1, 0, 0, 1, 3, 0},
        {"{\"do_sample\": true, \"min_p\": 0.1}", NULL, QMM_OK, 1, 1, 0.1, 50, 0, 0, 0},
        {"{\"eos_token_id\": \"x\"}", NULL, QMM_ERR_FORMAT, 0, 0, 0, 0, 0, 0, 0},
        {"{\"top_p\": 1.5}", NULL, QMM_ERR_FORMAT, 0, 0, 0, 0, 0, 0, 0},
        {"[1, 2]", NULL, QMM_ERR_FORMAT, 0, 0, 0, 0, 0, 0, 0},
        {"{\"temperature\": ", NULL, QMM_ERR_FORMAT, 0, 0, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/generation_config.json", g_dir);
        unlink(p);
        snprintf(p, sizeof p, "%s/config.json", g_dir);
        unlink(p);
        if (cases[i].gen) write_file("generation_config.json", cases[i].gen);
        if (cases[i].cfg) write_file("config.json", cases[i].cfg);
        qmm_generation_config g;
        memset(&g, 0xA5, sizeof g);
        qmm_status st = qmm_generation_config_load(g_dir, &g);
        CHECKF(st == cases[i].want, "case %zu: %s, want %s", i, qmm_status_name(st),
               qmm_status_name(cases[i].want));
        if (st || cases[i].want) continue;
        CHECKF(fabs(g.sampling.temperature - cases[i].temperature) < 1e-12 &&
               fabs(g.sampling.top_p - cases[i].top_p) < 1e-12 &&
               fabs(g.sampling.min_p - cases[i].min_p) < 1e-12 &&
               g.sampling.top_k == cases[i].top_k && g.eos_count == cases[i].eos_count &&
               (g.eos_count < 1 || g.eos[0] == cases[i].eos0) &&
               (g.eos_count < 2 || g.eos[1] == cases[i].eos1),
               "case %zu: T %g k %lld p %g min_p %g, %d eos", i, g.sampling.temperature,
               (long long)g.sampling.top_k, g.sampling.top_p, g.sampling.min_p, g.eos_count);
    }
}

/* ---- sampling ------------------------------------------------------------------------------ */

/* The distribution by its definition, in the plainest code: sort everything, cut, renormalize. */
static void ref_probs(const float *l, int n, const qmm_sampling *s, double *out)
{
    int idx[256];
    double p[256], mx = -INFINITY, z = 0;
    for (int i = 0; i < n; i++) if (!isnan(l[i]) && l[i] > mx) mx = l[i];
    memset(out, 0, (size_t)n * sizeof *out);
    if (s->temperature == 0) {
        int best = 0;
        while (isnan(l[best])) best++;
        for (int i = 0; i < n; i++) if (!isnan(l[i]) && l[i] > l[best]) best = i;
        out[best] = 1;
        return;
    }
    for (int i = 0; i < n; i++) p[i] = isnan(l[i]) ? 0 : exp((l[i] - mx) / s->temperature);
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 0; i < n; i++) /* selection sort: by p descending, then id ascending */
        for (int j = i + 1; j < n; j++)
            if (p[idx[j]] > p[idx[i]] || (p[idx[j]] == p[idx[i]] && idx[j] < idx[i])) {
                int t = idx[i]; idx[i] = idx[j]; idx[j] = t;
            }
    int keep = 0;
    while (keep < n && p[idx[keep]] > 0) keep++;
    if (s->top_k > 0 && s->top_k < keep) { /* HF: every token as likely as the k-th stays */
        double kth = p[idx[s->top_k - 1]];
        int k = 0;
        while (k < keep && p[idx[k]] >= kth) k++;
        keep = k;
    }
    for (int i = 0; i < keep; i++) z += p[idx[i]];
    if (s->top_p < 1) {
        double before = 0;
        int k = 0;
        while (k < keep && (k == 0 || before < s->top_p * z)) before += p[idx[k++]];
        keep = k;
    }
    if (s->min_p > 0) {
        int k = 1;
        while (k < keep && p[idx[k]] >= s->min_p * p[idx[0]]) k++;
        keep = k;
    }
    z = 0;
    for (int i = 0; i < keep; i++) z += p[idx[i]];
    for (int i = 0; i < keep; i++) out[idx[i]] = p[idx[i]] / z;
}

static const qmm_sampling sampling_cases[] = {
    {0, 0, 1, 0},     {1, 0, 1, 0},     {0.7, 0, 1, 0},  {1, 5, 1, 0},   {1, 1, 1, 0},
    {1, 0, 0.9, 0},   {1, 0, 0.05, 0},  {1, 0, 1, 0.2},  {0.6, 20, 0.95, 0}, {1.5, 8, 0.8, 0.05},
    {3, 0, 1, 0},
};

static void random_logits(float *l, int n, int with_ties)
{
    for (int i = 0; i < n; i++) l[i] = (float)(2.0 * test_rand_normal());
    if (with_ties)
        for (int i = 0; i < n; i += 7) l[i] = l[0]; /* equal values: the tie rules matter */
}

static void test_sampling_distribution(void)
{
    enum { N = 64 };
    float l[N], probs[N];
    double want[N];
    for (size_t c = 0; c < sizeof sampling_cases / sizeof sampling_cases[0]; c++)
        for (int ties = 0; ties < 2; ties++) {
            const qmm_sampling *s = &sampling_cases[c];
            random_logits(l, N, ties);
            l[3] = NAN; /* a NaN logit never has mass */
            for (int i = 0; i < N; i++) probs[i] = -1;
            CHECK_OK(qmm_sampling_probs(l, N, s, probs));
            ref_probs(l, N, s, want);
            double worst = 0, sum = 0;
            for (int i = 0; i < N; i++) {
                worst = fmax(worst, fabs(probs[i] - want[i]));
                sum += probs[i];
            }
            CHECKF(worst < 1e-6 && fabs(sum - 1) < 1e-5 && probs[3] == 0,
                   "T %g k %lld p %g min_p %g ties %d: max |diff| %.3g, sum %.6f", s->temperature,
                   (long long)s->top_k, s->top_p, s->min_p, ties, worst, sum);
        }
    float nan_l[4] = {NAN, NAN, NAN, NAN};
    CHECK_STATUS(qmm_sampling_probs(nan_l, 4, &sampling_cases[1], probs), QMM_ERR_RANGE);
    qmm_sampling bad[] = {{-1, 0, 1, 0}, {1, -1, 1, 0}, {1, 0, 0, 0}, {1, 0, 1.5, 0}, {1, 0, 1, 2}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_STATUS(qmm_sampling_probs(l, N, &bad[i], probs), QMM_ERR_ARG);
}

/* The sampler's draws follow qmm_sampling_probs: every token's frequency within 5 sigma. */
static void test_sampler_draws(void)
{
    enum { N = 40, DRAWS = 200000 };
    float l[N], probs[N];
    static int count[N];
    for (size_t c = 0; c < sizeof sampling_cases / sizeof sampling_cases[0]; c++) {
        const qmm_sampling *s = &sampling_cases[c];
        random_logits(l, N, c % 2);
        CHECK_OK(qmm_sampling_probs(l, N, s, probs));
        qmm_sampler *sp = NULL;
        CHECK_OK(qmm_sampler_create(N, s, test_rand_u64(), &sp));
        if (!sp) return;
        memset(count, 0, sizeof count);
        for (int d = 0; d < DRAWS; d++) {
            int32_t id = -1;
            qmm_sampler_sample(sp, l, &id);
            if (id >= 0 && id < N) count[id]++;
        }
        qmm_sampler_destroy(sp);
        /* tokens expected fewer than 25 times are pooled into one bucket: the normal
         * approximation of a count holds for large expected counts only (a token of
         * p = 1e-6 drawn 3 times in 200 000 is "6 sigma" but not rare) */
        double worst = 0, tail_p = 0, tail_n = 0;
        for (int i = 0; i < N; i++) {
            double f = (double)count[i] / DRAWS, p = probs[i];
            double sigma = sqrt(p * (1 - p) / DRAWS) + 1e-9;
            if (p == 0) CHECKF(count[i] == 0, "case %zu: token %d drawn without mass", c, i);
            else if (p * DRAWS < 25) tail_p += p, tail_n += count[i];
            else worst = fmax(worst, fabs(f - p) / sigma);
        }
        if (tail_p * DRAWS >= 25)
            worst = fmax(worst, fabs(tail_n / DRAWS - tail_p) / sqrt(tail_p * (1 - tail_p) / DRAWS));
        else /* a tail this thin is too rare to count: a handful of draws at most */
            CHECKF(tail_n <= 25 + 5 * sqrt(25.0), "case %zu: %g draws in the thin tail", c, tail_n);
        CHECKF(worst < 5, "case %zu (T %g k %lld p %g min_p %g): a frequency is %.1f sigma off",
               c, s->temperature, (long long)s->top_k, s->top_p, s->min_p, worst);
    }
    /* the same seed, the same draws */
    qmm_sampler *a = NULL, *b = NULL;
    CHECK_OK(qmm_sampler_create(N, &sampling_cases[1], 42, &a));
    CHECK_OK(qmm_sampler_create(N, &sampling_cases[1], 42, &b));
    int same = a && b;
    for (int d = 0; same && d < 100; d++) {
        int32_t x, y;
        qmm_sampler_sample(a, l, &x);
        qmm_sampler_sample(b, l, &y);
        same = x == y;
    }
    CHECK(same);
    qmm_sampler_destroy(a);
    qmm_sampler_destroy(b);
}

static void test_version(void)
{
    const char *v = qmm_version();
    int a, b, c;
    CHECK(v && sscanf(v, "%d.%d.%d", &a, &b, &c) == 3);
}

int main(int argc, char **argv)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/qmm_test_text_%d", (int)getpid());
    mkdir(g_dir, 0755);
    static const test_case cases[] = {
        {"bpe_and_added_tokens", test_bpe_and_added_tokens},
        {"roundtrip_random_bytes", test_roundtrip_random_bytes},
        {"stream_decoder", test_stream_decoder},
        {"bad_files", test_bad_files},
        {"chat_template", test_chat_template},
        {"generation_config", test_generation_config},
        {"sampling_distribution", test_sampling_distribution},
        {"sampler_draws", test_sampler_draws},
        {"version", test_version},
    };
    int rc = test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd)) rc = rc ? rc : 0;
    return rc;
}
