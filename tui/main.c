/* main.c — the `nnbench` command: global options and dispatch to the subcommands of
 * cmd_help.c's table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int main(int argc, char **argv)
{
    /* Before anything uses BLAS: may re-execute this program on a faster verified core. */
    eng_openblas_core_select(argv);
    if (argc < 2) {
        char *targv[] = { "tui", NULL };
        return cmd_tui(1, targv);
    }
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { cli_usage(stdout); return 0; }
    if (!strcmp(a, "--version") || !strcmp(a, "-V")) { printf("nnbench %s\n", NNBENCH_VERSION); return 0; }
    if (!strcmp(a, "help")) return cmd_help(argc - 1, argv + 1);
    if (a[0] == '-' && strcmp(a, "--db") && strcmp(a, "--no-color")) {
        static const char *const top[] = { "--help", "--version", "--db", "--no-color" };
        const char *s = cli_suggest(a, top, sizeof top / sizeof top[0]);
        if (s) fprintf(stderr, "nnbench: unknown option '%s'; did you mean '%s'? (see nnbench --help)\n", a, s);
        else fprintf(stderr, "nnbench: unknown option '%s'; see nnbench --help\n", a);
        return 2;
    }
    if (a[0] == '-') /* `nnbench --db X` opens the workbench there */
        return cmd_tui(argc, argv);
    const cli_command *c = cli_command_find(a);
    if (!c) return cli_unknown_command(a);
    return c->fn(argc - 1, argv + 1);
}
