/* Placeholder until issue 7 lands: replaced by the real benchmark. */
#include <stdio.h>
#include "commands.h"

int bench_overlap_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "qmm bench overlap: this benchmark arrives with issue 7\n");
    return 2;
}
