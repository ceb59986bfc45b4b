/* cmd_help.c — the table of `nnbench` commands, and everything generated from it: the
 * top-level usage, "did you mean" for mistyped commands, the man page and the bash
 * completion script. Each entry names the command's option spec, which the one parser
 * (cli_opts.c) reads argv by and the completion offers; cli_spec_help_mismatch (tested)
 * keeps the spec and the --words of the --help text (the man page) the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const cli_command commands[] = {
    { "run", cmd_run, cmd_run_help, "train every variant of an experiment file and store the runs", &cmd_run_spec },
    { "list", cmd_list, cmd_list_help, "list stored runs", &cmd_list_spec },
    { "show", cmd_show, cmd_show_help, "config, system, metrics, ops and solver summary of one run", &cmd_show_spec },
    { "compare", cmd_compare, cmd_compare_help, "side-by-side table and chart of several runs", &cmd_compare_spec },
    { "diff", cmd_diff, cmd_diff_help, "op-by-op profile of two runs: what makes B faster or slower than A", &cmd_diff_spec },
    { "solves", cmd_solves, cmd_solves_help, "the Newton linear solves of a run and how each was routed", &cmd_solves_spec },
    { "report", cmd_report, cmd_report_help, "write a report of runs", &cmd_report_spec },
    { "export", cmd_export, cmd_export_help, "metrics of runs as CSV (long format)", &cmd_export_spec },
    { "delete", cmd_delete, cmd_delete_help, "delete runs from the database", &cmd_delete_spec },
    { "project", cmd_project, cmd_project_help, "model a run's data-parallel scaling to N nodes (alpha-beta ring all-reduce)", &cmd_project_spec },
    { "allreduce", cmd_allreduce, cmd_allreduce_help, "measure MPI all-reduces here; fit the alpha-beta model", &cmd_allreduce_spec },
    { "sysinfo", cmd_sysinfo, cmd_sysinfo_help, "CPU, PAPI counters, BLAS; calibrate peak sgemm GFLOP/s", &cmd_sysinfo_spec },
    { "resume", cmd_resume, cmd_resume_help, "continue a crashed or interrupted run from its last checkpoint", &cmd_resume_spec },
    { "eval", cmd_eval, cmd_eval_help, "evaluate a stored model on its test set or a file", &cmd_eval_spec },
    { "quantize", cmd_quantize, cmd_quantize_help, "int8 post-training quantization: fp32 vs int8 bytes, accuracy, speed", &cmd_quantize_spec },
    { "export-model", cmd_export_model, cmd_export_model_help, "the int8 model as a self-contained C file", &cmd_export_model_spec },
    { "tui", cmd_tui, cmd_tui_help, "the ncurses workbench (also: nnbench with no arguments)", &cmd_tui_spec },
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

int cli_unknown_command(const char *name)
{
    const char *names[N_COMMANDS];
    for (size_t i = 0; i < N_COMMANDS; i++) names[i] = commands[i].name;
    const char *s = cli_suggest(name, names, N_COMMANDS);
    if (s) fprintf(stderr, "nnbench: no command '%s'; did you mean '%s'? (see nnbench --help)\n", name, s);
    else fprintf(stderr, "nnbench: no command '%s'; see nnbench --help\n", name);
    return 2;
}

/* Whether each mention of option w in c's help is another command's ("... nnbench
 * allreduce --ranks 2" in project's help): "nnbench OTHER" earlier on the same line. */
static int cross_reference(const cli_command *c, const char *w)
{
    char *t = help_text(c);
    int other = t != NULL, any = 0;
    size_t lw = strlen(w);
    for (char *p = t; other && p && (p = strstr(p, w)); p += lw) {
        if ((p[lw] >= 'a' && p[lw] <= 'z') || p[lw] == '-') continue; /* a longer word */
        any = 1;
        char *bol = p;
        while (bol > t && bol[-1] != '\n') bol--;
        other = 0;
        for (char *q = bol; q < p && (q = strstr(q, "nnbench ")) && q < p; q += 8) {
            size_t ln = strlen(c->name);
            if (strncmp(q + 8, c->name, ln) || (q[8 + ln] != ' ' && q[8 + ln] != '\n')) other = 1;
        }
    }
    free(t);
    return any && other;
}

int cli_spec_help_mismatch(const cli_command *c, char *why, size_t cap)
{
    char **words = NULL;
    size_t n = option_words(c, &words);
    const cli_spec *sp = c->spec;
    int bad = 0;
    /* every documented option is parsed ... */
    for (size_t i = 0; i < n && !bad; i++) {
        int found = 0;
        for (size_t k = 0; k < sp->n_opts && !found; k++)
            found = !strcmp(words[i], sp->opts[k].name) || (sp->opts[k].alias && !strcmp(words[i], sp->opts[k].alias));
        if (!found && strcmp(words[i], "--help") && !cross_reference(c, words[i]))
            { snprintf(why, cap, "%s: --help names %s, the parser does not", c->name, words[i]); bad = 1; }
    }
    /* ... and every parsed --option is documented (by itself or its alias) */
    for (size_t k = 0; k < sp->n_opts && !bad; k++) {
        const cli_opt *o = &sp->opts[k];
        int found = strncmp(o->name, "--", 2) != 0; /* "-o" is not a --word */
        for (size_t i = 0; i < n && !found; i++) found = !strcmp(words[i], o->name);
        if (!found && o->alias) {
            char *t = help_text(c);
            found = t && strstr(t, o->alias);
            free(t);
        }
        if (!found) { snprintf(why, cap, "%s: the parser takes %s, --help does not name it", c->name, o->name); bad = 1; }
    }
    option_words_free(words, n);
    return bad;
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

/* Every variable nnbench reads (tests/e2e/cli_terms.sh checks the list against the source's
 * getenv calls): the man page's ENVIRONMENT. */
static const char *const environment[][2] = {
    { "NNBENCH_DB", "the database when --db is not given (default ./nnbench.db)" },
    { "NNBENCH_CACHE_DIR", "where the data cache and the GEMM backend choices are kept "
                           "(else $XDG_CACHE_HOME/nnbench, else ~/.cache/nnbench)" },
    { "NNBENCH_SAMPLES", "where the workbench's New run looks for experiment files after ./samples" },
    { "NNBENCH_ISA", "generic, avx2 or avx512: the kernel path of nnbench's own kernels (default: the best "
                     "this CPU has)" },
    { "NNBENCH_OPENBLAS_SELECT", "off keeps OpenBLAS's core as loaded; force measures the candidates again, even "
                                 "when OPENBLAS_CORETYPE is set" },
    { "NNBENCH_OPENBLAS_CANDIDATES", "the OpenBLAS cores measured at start (comma-separated)" },
    { "NNBENCH_OPENBLAS_CHOSE", "set by nnbench itself when it re-executes with the core it chose" },
    { "NNBENCH_MPI_TRANSPORT", "the shared-memory transport of Open MPI ranks: auto (measured once per machine, the "
                               "default), library, copy or copy-256k (docs/scale.md)" },
    { "NNBENCH_PAPI_DISABLE", "PAPI components to disable before PAPI starts (perf_event, ...)" },
    { "NNBENCH_GEMM_PROBE", "internal: makes the process a GEMM probe child" },
    { "NNBENCH_GEMM_FAIL", "tests: makes a GEMM backend's check fail (onednn, onednn:crash)" },
    { "NNBENCH_MPI_TRANSPORT_FAIL", "tests: makes an MPI transport's check fail (library, copy, copy-256k)" },
    { "NNBENCH_TEST_HOLD_RESUME", "tests: holds a resume between its checks (PATH.held, then waits for PATH)" },
    { "NNBENCH_TEST_HOLD_CKPT_WRITE", "tests: holds the store's writer on a checkpoint it took (PATH.held, then waits for PATH)" },
    { "OPENBLAS_CORETYPE", "OpenBLAS's kernel core; set, nnbench keeps it (see NNBENCH_OPENBLAS_SELECT)" },
    { "OPENBLAS_NUM_THREADS", "GEMM threads when train.threads = 0" },
    { "NO_COLOR", "monochrome output and workbench" },
    { "COLUMNS", "the width of tables when the output is not a terminal (default 100)" },
};

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
    fputs(".SH ENVIRONMENT\n", f);
    for (size_t i = 0; i < sizeof environment / sizeof *environment; i++) {
        fprintf(f, ".TP\n.B %s\n", environment[i][0]);
        roff_text(f, environment[i][1]);
        fputs("\n", f);
    }
    fputs(".SH EXIT STATUS\n0 success; 1 a run failed or diverged, or the database refused; "
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
          "        --set) compopt -o nospace 2>/dev/null; COMPREPLY=( $(compgen -W \"", f);
    /* the config keys as KEY=, from the one key table */
    for (size_t i = 0; eng_key_docs[i].key; i++) fprintf(f, "%s%s=", i ? " " : "", eng_key_docs[i].key);
    fputs("\" -- \"$cur\") ); return ;;\n"
          "    esac\n"
          "    local opts=\n"
          "    case $cmd in\n", f);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        const cli_spec *sp = commands[i].spec;
        fprintf(f, "        %s) opts=\"", commands[i].name);
        for (size_t j = 0, k = 0; j < sp->n_opts; j++)
            if (!strncmp(sp->opts[j].name, "--", 2)) fprintf(f, "%s%s", k++ ? " " : "", sp->opts[j].name);
        fputs("\" ;;\n", f);
    }
    fputs("        help) COMPREPLY=( $(compgen -W \"", f);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "%s%s", i ? " " : "", commands[i].name);
    fputs("\" -- \"$cur\") ); return ;;\n"
          "    esac\n"
          "    if [[ $cur == -* ]]; then\n"
          "        COMPREPLY=( $(compgen -W \"$opts\" -- \"$cur\") )\n"
          "    elif [ \"$cmd\" = run ]; then\n"
          "        COMPREPLY=( $(compgen -f -X '!*.ini' -- \"$cur\") $(compgen -d -- \"$cur\") )\n"
          "    else\n"
          "        case $cmd in\n"
          "        show|compare|diff|solves|report|export|delete|project|resume|eval|quantize|export-model)\n"
          "            # run ids of the database named on the line (--db), else the default one\n"
          "            local db= i\n"
          "            for ((i = 1; i < COMP_CWORD; i++)); do\n"
          "                [ \"${COMP_WORDS[i]}\" = --db ] && db=${COMP_WORDS[i+1]}\n"
          "            done\n"
          "            COMPREPLY=( $(compgen -W \"last $(nnbench list ${db:+--db \"$db\"} 2>/dev/null |\n"
          "                awk '$1 ~ /^[0-9]+$/ { print $1 }')\" -- \"$cur\") ) ;;\n"
          "        esac\n"
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
