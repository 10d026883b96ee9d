/* Shared pieces of the qmm subcommands (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cli_int(const char *cmd, const char *flag, const char *v, long long lo, long long hi,
            long long *out)
{
    char *end = NULL;
    errno = 0;
    /* a plain decimal: no leading blanks or '+' (strtoll would take them) */
    int plain = v && (isdigit((unsigned char)v[0]) || (v[0] == '-' && isdigit((unsigned char)v[1])));
    long long x = plain ? strtoll(v, &end, 10) : 0;
    if (!plain || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "qmm %s: bad value '%s' for %s: want an integer in [%lld, %lld]\n", cmd,
                v ? v : "", flag, lo, hi);
        return 0;
    }
    *out = x;
    return 1;
}

int cli_double(const char *cmd, const char *flag, const char *v, double lo, double hi,
               double *out)
{
    char *end = NULL;
    errno = 0;
    double x = v && *v ? strtod(v, &end) : NAN;
    if (!v || !*v || *end || errno || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, "qmm %s: bad value '%s' for %s: want a number in [%g, %g]\n", cmd,
                v ? v : "", flag, lo, hi);
        return 0;
    }
    *out = x;
    return 1;
}

int cli_choice(const char *cmd, const char *flag, const char *v, const char *const *choices,
               int *out)
{
    for (int i = 0; choices[i]; i++)
        if (v && !strcmp(v, choices[i])) {
            *out = i;
            return 1;
        }
    fprintf(stderr, "qmm %s: bad value '%s' for %s: want one of", cmd, v ? v : "", flag);
    for (int i = 0; choices[i]; i++) fprintf(stderr, "%s %s", i ? "," : "", choices[i]);
    fprintf(stderr, "\n");
    return 0;
}

int cli_on_off(const char *cmd, const char *flag, const char *v, int *out)
{
    static const char *const on_off[] = {"off", "on", NULL};
    return cli_choice(cmd, flag, v, on_off, out);
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "qmm %s: %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int cli_unknown(const char *cmd, const char *opt)
{
    fprintf(stderr, "qmm %s: unknown option %s (qmm %s --help lists them)\n", cmd, opt, cmd);
    return EXIT_USAGE;
}

int cli_is_help(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h"); }

const char *cli_known_value(const char *cmd, const char *const *known, int argc, char **argv,
                            int *i)
{
    for (int j = 0; known[j]; j++)
        if (!strcmp(argv[*i], known[j])) return cli_value(cmd, argc, argv, i);
    cli_unknown(cmd, argv[*i]);
    return NULL;
}

void cli_json_string(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else if (c < 0x80) fputc(c, f);
        else {
            /* copy a valid UTF-8 character whole; a stray byte becomes U+FFFD */
            size_t l = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                       : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
            int ok = l && i + l <= n;
            for (size_t k = 1; ok && k < l; k++) ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
            if (ok) {
                fwrite(s + i, 1, l, f);
                i += l - 1;
            } else {
                fputs("\\ufffd", f);
            }
        }
    }
    fputc('"', f);
}

double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static double progress_start = -1, progress_last;
static int progress_drawn;

void cli_progress(const char *what, double done, double total)
{
    double t = cli_now_ms();
    if (progress_start < 0) progress_start = t;
    /* only on a terminal, only for work past a second (QMM_PROGRESS_AFTER_MS: tests), at most
     * ten redraws a second */
    const char *after = getenv("QMM_PROGRESS_AFTER_MS");
    double wait_ms = after ? atof(after) : 1000;
    if (!isatty(STDERR_FILENO) || t - progress_start < wait_ms ||
        (progress_drawn && t - progress_last < 100))
        return;
    progress_last = t;
    double f = total > 0 ? done / total : 0;
    if (f > 1) f = 1;
    int w = 30, fill = (int)(f * w);
    fprintf(stderr, "\r%s [%.*s%*s] %3.0f%% %.1f s", what, fill,
            "##############################", w - fill, "", 100 * f, (t - progress_start) / 1e3);
    progress_drawn = 1;
}

void cli_progress_end(void)
{
    if (progress_drawn) fprintf(stderr, "\r\033[K");
    progress_start = -1;
    progress_drawn = 0;
}
