/* qmm tokenize: text -> token ids with a model's tokenizer.json (and ids -> text). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qmm.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qmm tokenize --model DIR|tokenizer.json [--text TEXT | --file F | --decode IDS]\n"
            "                    [--chat [--think on|off]] [--json]\n"
            "  Encodes TEXT (or the file F, or stdin when neither is given) with the tokenizer\n"
            "  and prints the ids comma-separated (the form --prompt-ids takes); --decode 1,2,3\n"
            "  prints the text of ids instead. --chat: the text as one user message through the\n"
            "  Qwen3 chat template with the generation prompt. --json: {\"ids\": [...],\n"
            "  \"tokens\": [...]} (each token's text) or {\"text\": ...}.\n"
            "  exit: 0 ok, 2 usage or environment (missing or malformed file, bad id)\n");
}

static char *read_stream(FILE *f, size_t *len)
{
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc(cap + 1);
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) {
                free(buf);
                return NULL;
            }
            buf = b;
            cap *= 2;
        }
    }
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

static int decode_ids(const qmm_tokenizer *t, const char *arg, int json)
{
    int64_t cap = 16, n = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    for (const char *p = arg; ids && *p;) {
        char num[32];
        size_t l = strcspn(p, ", ");
        long long v;
        if (l == 0 || l >= sizeof num) {
            p += strspn(p, ", ");
            if (l >= sizeof num) { free(ids); ids = NULL; }
            continue;
        }
        memcpy(num, p, l);
        num[l] = 0;
        if (!cli_int("tokenize", "--decode", num, 0, INT32_MAX, &v)) {
            free(ids);
            return EXIT_USAGE;
        }
        if (n == cap) {
            int32_t *g = realloc(ids, (size_t)(cap *= 2) * sizeof *g);
            if (!g) { free(ids); ids = NULL; break; }
            ids = g;
        }
        ids[n++] = (int32_t)v;
        p += l;
    }
    char *text = NULL;
    size_t len = 0;
    qmm_status st = ids ? qmm_tokenizer_decode(t, ids, n, &text, &len) : QMM_ERR_NOMEM;
    free(ids);
    if (st) {
        fprintf(stderr, "qmm tokenize: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
        return EXIT_USAGE;
    }
    if (json) {
        printf("{\"text\": ");
        cli_json_string(stdout, text, len);
        printf("}\n");
    } else {
        fwrite(text, 1, len, stdout);
        printf("\n");
    }
    free(text);
    return EXIT_OK;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text_arg = NULL, *file = NULL, *dec = NULL;
    int json = 0, chat = 0, think = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        static const char *const known[] = {"--model", "--text", "--file", "--decode", "--think",
                                            NULL};
        if (cli_is_help(a)) { usage(stdout); return EXIT_OK; }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--chat")) { chat = 1; continue; }
        if (!(v = cli_known_value("tokenize", known, argc, argv, &i))) return EXIT_USAGE;
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--text")) text_arg = v;
        else if (!strcmp(a, "--file")) file = v;
        else if (!strcmp(a, "--decode")) dec = v;
        else if (!cli_on_off("tokenize", a, v, &think)) return EXIT_USAGE;
    }
    if (!model || !!text_arg + !!file + !!dec > 1) {
        fprintf(stderr, "qmm tokenize: %s\n", !model ? "--model is required"
                        : "give at most one of --text, --file, --decode");
        return EXIT_USAGE;
    }
    qmm_tokenizer *t = NULL;
    qmm_status st = qmm_tokenizer_load(model, &t);
    if (st) {
        fprintf(stderr, "qmm tokenize: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
        return EXIT_USAGE;
    }
    if (dec) {
        int rc = decode_ids(t, dec, json);
        qmm_tokenizer_destroy(t);
        return rc;
    }
    size_t len = 0;
    char *text = NULL;
    if (text_arg) {
        len = strlen(text_arg);
        text = malloc(len + 1);
        if (text) memcpy(text, text_arg, len + 1);
    } else {
        FILE *f = file ? fopen(file, "rb") : stdin;
        if (!f) {
            fprintf(stderr, "qmm tokenize: cannot open %s\n", file);
            qmm_tokenizer_destroy(t);
            return EXIT_USAGE;
        }
        text = read_stream(f, &len);
        if (file) fclose(f);
    }
    if (text && chat) {
        qmm_chat_message m = {"user", text};
        char *rendered = NULL;
        st = qmm_chat_render(t, &m, 1, 1, think, &rendered, &len);
        free(text);
        text = rendered;
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    if (!st) st = text ? qmm_tokenizer_encode(t, text, len, &ids, &n) : QMM_ERR_NOMEM;
    if (st) {
        fprintf(stderr, "qmm tokenize: %s (%s)\n", qmm_last_error(), qmm_status_name(st));
    } else if (json) {
        printf("{\"ids\": [");
        for (int64_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
        printf("], \"tokens\": [");
        for (int64_t i = 0; i < n; i++) {
            char *s = NULL;
            size_t sl = 0;
            qmm_tokenizer_decode(t, &ids[i], 1, &s, &sl);
            printf("%s", i ? ", " : "");
            cli_json_string(stdout, s ? s : "", sl);
            free(s);
        }
        printf("]}\n");
    } else {
        for (int64_t i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
        printf("\n");
    }
    free(ids);
    free(text);
    qmm_tokenizer_destroy(t);
    return st ? EXIT_USAGE : EXIT_OK;
}
