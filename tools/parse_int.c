/* Strict integer arguments: the whole string a decimal integer inside [lo, hi], or an error. */
#include <errno.h>
#include <stdlib.h>

#include "commands.h"

int parse_int_arg(const char *s, long long lo, long long hi, long long *out)
{
    if (!s || !*s) return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    /* strtoll skips leading blanks and saturates on overflow: refuse both */
    if (errno || *end || end == s || *s == ' ' || *s == '\t' || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}
