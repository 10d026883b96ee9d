/* Shared pieces of the qmm subcommands: strict value parsing, the exit-code rule, JSON strings,
 * and a progress bar that only draws on a terminal. */
#ifndef QMM_TOOLS_CLI_H
#define QMM_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Exit codes, the same for every command (qmm --help states the rule). */
enum { EXIT_OK = 0, EXIT_CHECK = 1, EXIT_USAGE = 2 };

/* A whole decimal integer in [lo, hi]: no trailing characters, no overflow. 1 on success; on
 * failure prints "qmm CMD: bad value 'V' for FLAG: want an integer in [lo, hi]" and returns 0. */
int cli_int(const char *cmd, const char *flag, const char *v, long long lo, long long hi,
            long long *out);
/* A finite number in [lo, hi]; as cli_int. */
int cli_double(const char *cmd, const char *flag, const char *v, double lo, double hi,
               double *out);
/* v must be one of the NULL-terminated choices; *out = its index. As cli_int on failure. */
int cli_choice(const char *cmd, const char *flag, const char *v, const char *const *choices,
               int *out);
/* "on"/"off" -> 1/0 (cli_choice). */
int cli_on_off(const char *cmd, const char *flag, const char *v, int *out);

/* The value of option argv[*i] (argv[*i + 1]), advancing *i; NULL after printing
 * "qmm CMD: FLAG needs a value" when there is none. */
const char *cli_value(const char *cmd, int argc, char **argv, int *i);
/* "qmm CMD: unknown option X" plus the hint to run --help; returns EXIT_USAGE. */
int cli_unknown(const char *cmd, const char *opt);
/* "--help" or "-h". */
int cli_is_help(const char *arg);
/* The value of option argv[*i] when it is one of `known` (NULL-terminated), advancing *i; NULL
 * after printing why (cli_unknown: also when it is the last argument; cli_value). */
const char *cli_known_value(const char *cmd, const char *const *known, int argc, char **argv,
                            int *i);

/* s as a JSON string literal (quotes, escapes; invalid UTF-8 bytes as \u00XX). */
void cli_json_string(FILE *f, const char *s, size_t n);

/* A progress bar on stderr, drawn only when stderr is a terminal and the work has taken longer
 * than a second. cli_progress(what, done, total); cli_progress_end() clears the line. */
void cli_progress(const char *what, double done, double total);
void cli_progress_end(void);

double cli_now_ms(void);

#endif
