/* Placeholder until issue 6 lands: replaced by the real subcommand. */
#include <stdio.h>
#include "commands.h"

int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "qmm: this subcommand arrives with issue 6\n");
    return 2;
}
