/* cmd_help.c — the table of `nnbench` commands, and everything generated from it: the
 * top-level usage, "did you mean" for mistyped commands and options, the man page and the
 * bash completion script. A command's options are the `--words` of its own --help text, so
 * help, suggestions, man page and completion cannot drift apart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const cli_command commands[] = {
    { "run", cmd_run, cmd_run_help, "train every variant of an experiment file and store the runs" },
    { "list", cmd_list, cmd_list_help, "list stored runs" },
    { "show", cmd_show, cmd_show_help, "config, system, metrics, ops and solver summary of one run" },
    { "compare", cmd_compare, cmd_compare_help, "side-by-side table and chart of several runs" },
    { "diff", cmd_diff, cmd_diff_help, "op-by-op profile of two runs: what makes B faster or slower than A" },
    { "solves", cmd_solves, cmd_solves_help, "the Newton linear solves of a run and how each was routed" },
    { "report", cmd_report, cmd_report_help, "write a report of runs" },
    { "export", cmd_export, cmd_export_help, "metrics of runs as CSV (long format)" },
    { "delete", cmd_delete, cmd_delete_help, "delete runs from the database" },
    { "project", cmd_project, cmd_project_help, "model a run's data-parallel scaling to N nodes (alpha-beta ring all-reduce)" },
    { "allreduce", cmd_allreduce, cmd_allreduce_help, "measure MPI all-reduces here; fit the alpha-beta model" },
    { "sysinfo", cmd_sysinfo, cmd_sysinfo_help, "CPU, PAPI counters, BLAS; calibrate peak sgemm GFLOP/s" },
    { "resume", cmd_resume, cmd_resume_help, "continue a crashed or interrupted run from its last checkpoint" },
    { "eval", cmd_eval, cmd_eval_help, "evaluate a stored model on its test set or a file" },
    { "quantize", cmd_quantize, cmd_quantize_help, "int8 post-training quantization: fp32 vs int8 bytes, accuracy, speed" },
    { "export-model", cmd_export_model, cmd_export_model_help, "the int8 model as a self-contained C file" },
    { "tui", cmd_tui, cmd_tui_help, "the ncurses workbench (also: nnbench with no arguments)" },
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

const cli_command *cli_commands(size_t *n)
{
    *n = N_COMMANDS;
    return commands;
}

const cli_command *cli_command_find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

void cli_usage(FILE *f)
{
    fprintf(f, "nnbench %s — a terminal workbench for neural-network training experiments\n\n"
               "usage: nnbench [COMMAND] [ARGS]   (no command: the workbench on ./nnbench.db)\n\n"
               "commands:\n", NNBENCH_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n  nnbench help COMMAND   usage of one command\n"
               "  nnbench --version\n\n"
               "The database is ./nnbench.db unless --db PATH or NNBENCH_DB says otherwise.\n");
}

/* ---- words of a help text ------------------------------------------------------------- */

/* The help text of c as a malloc'd string (NULL when out of memory). */
static char *help_text(const cli_command *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    c->help(f);
    if (fclose(f)) { free(buf); return NULL; }
    return buf;
}

/* The distinct `--option` words of c's help text, in order of appearance, as one
 * malloc'd block: *words[i] point into it. Returns the count (0 when none or no memory). */
static size_t option_words(const cli_command *c, char ***words)
{
    *words = NULL;
    char *t = help_text(c);
    if (!t) return 0;
    size_t n = 0, cap = 0;
    char **w = NULL;
    for (char *p = t; (p = strstr(p, "--")); ) {
        /* an option starts a word: at the text's start or after space, '[' or '(' */
        int starts = p == t || strchr(" \t\n[(|", p[-1]);
        char *e = p + 2;
        while ((*e >= 'a' && *e <= 'z') || (*e >= '0' && *e <= '9') || *e == '-') e++;
        if (!starts || e == p + 2) { p = e; continue; }
        char end = *e;
        *e = 0;
        int seen = 0;
        for (size_t i = 0; i < n && !seen; i++) seen = !strcmp(w[i], p);
        if (!seen) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                char **nw = realloc(w, cap * sizeof *nw);
                if (!nw) { *e = end; break; }
                w = nw;
            }
            w[n++] = p;
        }
        p = e + (end != 0);
    }
    if (!n) { free(w); free(t); return 0; }
    /* words point into t: keep t alive as the block after the pointers */
    char **block = malloc(n * sizeof *block + sizeof(char *));
    if (!block) { free(w); free(t); return 0; }
    memcpy(block, w, n * sizeof *w);
    block[n] = t;
    free(w);
    *words = block;
    return n;
}

static void option_words_free(char **words, size_t n)
{
    if (!words) return;
    free(words[n]);
    free(words);
}

/* ---- did you mean ----------------------------------------------------------------------- */

/* Optimal string alignment distance (Damerau-Levenshtein with adjacent transpositions). */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return (size_t)-1;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

const char *cli_suggest(const char *word, const char *const *cands, size_t n)
{
    /* a typo: at most 1 edit for short words, 2 from 6 characters on; a unique prefix too */
    size_t len = strlen(word), limit = len >= 6 ? 2 : 1, best = (size_t)-1;
    const char *pick = NULL, *prefix = NULL;
    size_t n_prefix = 0;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, cands[i]);
        if (d < best) { best = d; pick = cands[i]; }
        if (len >= 3 && !strncmp(cands[i], word, len)) { prefix = cands[i]; n_prefix++; }
    }
    if (n_prefix == 1) return prefix;
    return pick && best <= limit ? pick : NULL;
}

int cli_unknown_command(const char *name)
{
    const char *names[N_COMMANDS];
    for (size_t i = 0; i < N_COMMANDS; i++) names[i] = commands[i].name;
    const char *s = cli_suggest(name, names, N_COMMANDS);
    if (s) fprintf(stderr, "nnbench: no command '%s'; did you mean '%s'? (see nnbench --help)\n", name, s);
    else fprintf(stderr, "nnbench: no command '%s'; see nnbench --help\n", name);
    return 2;
}

int cli_unknown_option(const char *cmd, const char *opt)
{
    const cli_command *c = cli_command_find(cmd);
    char **words = NULL;
    size_t n = c ? option_words(c, &words) : 0;
    /* "--profil=x" is judged by its name */
    char name[128];
    snprintf(name, sizeof name, "%s", opt);
    char *eq = strchr(name, '=');
    if (eq) *eq = 0;
    const char *s = n ? cli_suggest(name, (const char *const *)words, n) : NULL;
    if (s) fprintf(stderr, "nnbench %s: unknown option '%s'; did you mean '%s'? (see nnbench %s --help)\n",
                   cmd, opt, s, cmd);
    else fprintf(stderr, "nnbench %s: unknown option '%s' (see nnbench %s --help)\n", cmd, opt, cmd);
    option_words_free(words, n);
    return 2;
}

/* ---- man page and bash completion ------------------------------------------------------- */

/* roff-safe text: a leading '.' or '\'' would be a request; backslashes need doubling. */
static void roff_text(FILE *f, const char *s)
{
    int bol = 1;
    for (; *s; s++) {
        if (bol && (*s == '.' || *s == '\'')) fputs("\\&", f);
        if (*s == '\\') fputs("\\e", f);
        else if (*s == '-') fputs("\\-", f);
        else fputc(*s, f);
        bol = *s == '\n';
    }
}

static void man_page(FILE *f)
{
    fprintf(f, ".TH NNBENCH 1 \"\" \"nnbench %s\" \"User Commands\"\n", NNBENCH_VERSION);
    fputs(".SH NAME\nnnbench \\- a terminal workbench for neural\\-network training experiments\n"
          ".SH SYNOPSIS\n.B nnbench\n[\\fICOMMAND\\fR] [\\fIARGS\\fR]\n"
          ".SH DESCRIPTION\n"
          "nnbench trains models on its own engine, profiles every op, runs Newton's method with a\n"
          "simulated Q\\-Newton hybrid quantum/classical scheduler, and stores every run in SQLite so\n"
          "runs can be compared side by side, in an ncurses workbench (\\fBnnbench\\fR with no\n"
          "arguments) or headless with saved reports.\n"
          ".SH COMMANDS\n", f);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        fprintf(f, ".SS %s\n", commands[i].name);
        roff_text(f, commands[i].summary);
        fputs(".\n.PP\n.nf\n", f);
        char *t = help_text(&commands[i]);
        if (t) roff_text(f, t);
        free(t);
        fputs(".fi\n", f);
    }
    fputs(".SH ENVIRONMENT\n.TP\n.B NNBENCH_DB\nthe database when \\fB\\-\\-db\\fR is not given "
          "(default \\fI./nnbench.db\\fR)\n.TP\n.B NO_COLOR\nmonochrome output and workbench\n"
          ".SH EXIT STATUS\n0 success; 1 a run failed or diverged, or the database refused; "
          "2 bad usage or configuration; 128+N stopped by signal N (130 for Ctrl\\-C).\n"
          ".SH SEE ALSO\nThe documentation in the docs/ folder of the source: experiments, data, "
          "engine, profiling, store, qnewton, workbench, performance, testing, architecture.\n", f);
}

static void bash_completion(FILE *f)
{
    fputs("# bash completion for nnbench (generated by `nnbench help --bash-completion`)\n"
          "_nnbench() {\n"
          "    local cur prev cmd\n"
          "    cur=${COMP_WORDS[COMP_CWORD]}\n"
          "    prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "    cmd=${COMP_WORDS[1]}\n"
          "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
          "        COMPREPLY=( $(compgen -W \"", f);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "%s%s", i ? " " : "", commands[i].name);
    fputs(" help --help --version --db --no-color\" -- \"$cur\") )\n"
          "        return\n"
          "    fi\n"
          "    case $prev in\n"
          "        --db|-o|--report|--trace) COMPREPLY=( $(compgen -f -- \"$cur\") ); return ;;\n"
          "    esac\n"
          "    local opts=\n"
          "    case $cmd in\n", f);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        char **w;
        size_t n = option_words(&commands[i], &w);
        fprintf(f, "        %s) opts=\"", commands[i].name);
        for (size_t j = 0; j < n; j++) fprintf(f, "%s%s", j ? " " : "", w[j]);
        fputs("\" ;;\n", f);
        option_words_free(w, n);
    }
    fputs("        help) COMPREPLY=( $(compgen -W \"", f);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "%s%s", i ? " " : "", commands[i].name);
    fputs("\" -- \"$cur\") ); return ;;\n"
          "    esac\n"
          "    if [[ $cur == -* ]]; then\n"
          "        COMPREPLY=( $(compgen -W \"$opts\" -- \"$cur\") )\n"
          "    elif [ \"$cmd\" = run ]; then\n"
          "        COMPREPLY=( $(compgen -f -X '!*.ini' -- \"$cur\") $(compgen -d -- \"$cur\") )\n"
          "    fi\n"
          "}\n"
          "complete -o filenames -F _nnbench nnbench\n", f);
}

int cmd_help(int argc, char **argv)
{
    if (argc < 2) { cli_usage(stdout); return 0; }
    if (!strcmp(argv[1], "--man")) { man_page(stdout); return 0; }
    if (!strcmp(argv[1], "--bash-completion")) { bash_completion(stdout); return 0; }
    const cli_command *c = cli_command_find(argv[1]);
    if (!c) return cli_unknown_command(argv[1]);
    c->help(stdout);
    return 0;
}
