/* Placeholder until issue 2 lands: replaced by the real subcommand. */
#include <stdio.h>
#include "commands.h"

int cmd_plan(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "qmm: this subcommand arrives with issue 2\n");
    return 2;
}
