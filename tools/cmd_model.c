/* Placeholder until issue 3 lands: replaced by the real subcommand. */
#include <stdio.h>
#include "commands.h"

int cmd_model(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "qmm: this subcommand arrives with issue 3\n");
    return 2;
}
