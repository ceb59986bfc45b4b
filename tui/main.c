/* main.c — the `nnbench` command: global options, help and dispatch to subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *usage;
    const char *summary;
} command;

static const command commands[] = {
    { "run", cmd_run, "run FILE [--variant NAME] [--set key=value ...] [--seed N] [--json] [--db PATH] [--no-db] [--profile ...] [--trace FILE] [--report FILE]",
      "train every variant of an experiment file and store the runs" },
    { "list", cmd_list, "list [--status S] [--grep TEXT] [--sort COLUMN] [--limit N] [--db PATH]",
      "list stored runs" },
    { "show", cmd_show, "show RUN [--db PATH]", "config, system, metrics, ops and solver summary of one run" },
    { "compare", cmd_compare, "compare RUN RUN... [--metric KEY] [--x step|time|hybrid_time] [--target V] [--all-keys]",
      "side-by-side table and chart of several runs" },
    { "report", cmd_report, "report RUN... -o FILE.{md,html,json,csv}", "write a report of runs" },
    { "export", cmd_export, "export RUN... -o FILE.csv", "metrics of runs as CSV (long format)" },
    { "delete", cmd_delete, "delete RUN... [--yes]", "delete runs from the database" },
    { "sysinfo", cmd_sysinfo, "sysinfo [--calibrate]", "CPU, PAPI counters, BLAS; calibrate peak sgemm GFLOP/s" },
    { "resume", cmd_resume, "resume RUN [--db PATH]", "continue a crashed or interrupted run from its last checkpoint" },
    { "eval", cmd_eval, "eval RUN [--data FILE [--labels FILE]] [--json]", "evaluate a stored model on its test set or a file" },
    { "quantize", cmd_quantize, "quantize RUN [--calibrate N] [--scheme minmax|percentile] [--kernel K] [--json]", "int8 post-training quantization: fp32 vs int8 bytes, accuracy, speed" },
    { "export-model", cmd_export_model, "export-model RUN --int8 -o FILE.c [--prefix NAME] [--vectors N FILE]", "the int8 model as a self-contained C file" },
    { "tui", cmd_tui, "tui [--db PATH] [--no-color]", "the ncurses workbench (also: nnbench with no arguments)" },
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "nnbench %s — a terminal workbench for neural-network training experiments\n\n"
               "usage: nnbench [COMMAND] [ARGS]   (no command: the workbench on ./nnbench.db)\n\n"
               "commands:\n", NNBENCH_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n  nnbench help COMMAND   usage of one command\n"
               "  nnbench --version\n\n"
               "The database is ./nnbench.db unless --db PATH or NNBENCH_DB says otherwise.\n");
}

static const command *find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        char *targv[] = { "tui", NULL };
        return cmd_tui(1, targv);
    }
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
    if (!strcmp(a, "--version") || !strcmp(a, "-V")) { printf("nnbench %s\n", NNBENCH_VERSION); return 0; }
    if (!strcmp(a, "help")) {
        if (argc < 3) { usage(stdout); return 0; }
        const command *c = find(argv[2]);
        if (!c) { fprintf(stderr, "nnbench: no command '%s'; see nnbench --help\n", argv[2]); return 2; }
        /* Each command prints its full help for --help. */
        char *hargv[] = { (char *)c->name, "--help", NULL };
        return c->fn(2, hargv);
    }
    if (a[0] == '-' && strcmp(a, "--db") && strcmp(a, "--no-color")) {
        fprintf(stderr, "nnbench: unknown option '%s'; see nnbench --help\n", a);
        return 2;
    }
    if (a[0] == '-') /* `nnbench --db X` opens the workbench there */
        return cmd_tui(argc, argv);
    const command *c = find(a);
    if (!c) { fprintf(stderr, "nnbench: no command '%s'; see nnbench --help\n", a); return 2; }
    return c->fn(argc - 1, argv + 1);
}
