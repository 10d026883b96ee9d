/* Placeholder until issue 5 lands: replaced by the real subcommand. */
#include <stdio.h>
#include "commands.h"

int cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "qmm: this subcommand arrives with issue 5\n");
    return 2;
}
