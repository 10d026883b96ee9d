/* The subcommand dispatcher of `qmm` and `qmm bench`. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static void usage(FILE *f, const char *tool, const char *what, const command *t, int count)
{
    fprintf(f, "usage: %s <%s> [options]   (%s <%s> --help for each)\n\n%ss:\n", tool, what,
            tool, what, what);
    for (int i = 0; i < count; i++) fprintf(f, "  %-20s %s\n", t[i].name, t[i].help);
}

int dispatch(const char *tool, const char *what, const command *table, int count, int argc,
             char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout, tool, what, table, count);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < count; i++)
        if (!strcmp(argv[1], table[i].name)) return table[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown %s '%s'\n", tool, what, argv[1]);
    usage(stderr, tool, what, table, count);
    return 2;
}
