/* cli.h — the `nnbench` command's subcommands and the glue between engine and store
 * (private to tui/). main.c dispatches; each cmd_*.c implements one family.
 * Every cmd_* returns the process exit status: 0 ok, 1 failure/diverged, 2 usage/config.
 */
#ifndef NNBENCH_CLI_H
#define NNBENCH_CLI_H

#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>

#include "../engine/engine.h"

/* Each command and the function that prints its full help (whose `--words` are the
 * command's options for suggestions, the man page and the completion script). */
int cmd_run(int argc, char **argv);       /* cmd_run.c */
void cmd_run_help(FILE *f);
int cmd_allreduce(int argc, char **argv); /* cmd_project.c */
void cmd_allreduce_help(FILE *f);
int cmd_project(int argc, char **argv);   /* cmd_project.c */
void cmd_project_help(FILE *f);
/* Replaces this process by mpirun -np argv[at+1] running this program with argv minus the
 * two arguments at `at` (--ranks N). Returns only on failure (2 bad N, 1 no mpirun). (cli.c) */
int cli_mpirun_self(int argc, char **argv, int at);
int cmd_sysinfo(int argc, char **argv);   /* cmd_sysinfo.c */
void cmd_sysinfo_help(FILE *f);
int cmd_list(int argc, char **argv);      /* cmd_store.c */
void cmd_list_help(FILE *f);
int cmd_show(int argc, char **argv);
void cmd_show_help(FILE *f);
int cmd_compare(int argc, char **argv);
void cmd_compare_help(FILE *f);
int cmd_report(int argc, char **argv);
void cmd_report_help(FILE *f);
int cmd_delete(int argc, char **argv);
void cmd_delete_help(FILE *f);
int cmd_export(int argc, char **argv);
void cmd_export_help(FILE *f);
int cmd_diff(int argc, char **argv);      /* cmd_diff.c */
void cmd_diff_help(FILE *f);
int cmd_solves(int argc, char **argv);    /* cmd_solves.c */
void cmd_solves_help(FILE *f);
int cmd_tui(int argc, char **argv);       /* cmd_tui.c */
void cmd_tui_help(FILE *f);
int cmd_resume(int argc, char **argv);    /* cmd_model.c */
void cmd_resume_help(FILE *f);
int cmd_eval(int argc, char **argv);
void cmd_eval_help(FILE *f);
int cmd_quantize(int argc, char **argv);  /* cmd_quant.c */
void cmd_quantize_help(FILE *f);
int cmd_export_model(int argc, char **argv);
void cmd_export_model_help(FILE *f);
int cmd_help(int argc, char **argv);      /* cmd_help.c: help [COMMAND | --man | --bash-completion] */
/* Each command's options, for the one parser (cli_parse) and the command table. */
struct cli_spec;
extern const struct cli_spec cmd_run_spec, cmd_allreduce_spec, cmd_project_spec, cmd_sysinfo_spec, cmd_list_spec,
    cmd_show_spec, cmd_compare_spec, cmd_report_spec, cmd_export_spec, cmd_delete_spec, cmd_solves_spec,
    cmd_tui_spec, cmd_resume_spec, cmd_eval_spec, cmd_quantize_spec, cmd_export_model_spec, cmd_diff_spec;

/* ---- the one option parser (cli_opts.c) ---------------------------------------------------
 * A command describes its options once, as a cli_spec over a struct of its own (each option
 * says where its value goes), and the command table lists the spec:
 *
 *     typedef struct { const char *db; int desc; } list_opts;
 *     static const cli_opt list_opt[] = {
 *         { "--db", NULL, CLI_VALUE, offsetof(list_opts, db) },
 *         { "--desc", NULL, CLI_FLAG, offsetof(list_opts, desc) },
 *     };
 *     const cli_spec cmd_list_spec = { "list", cmd_list_help, list_opt, CLI_N(list_opt) };
 *     ...
 *     list_opts o = { 0 };
 *     int n_pos, rc = cli_parse(&cmd_list_spec, &o, argc, argv, &n_pos);
 *     if (rc >= 0) return rc;        // --help printed (0) or a usage error said (2)
 *     // argv[1 .. n_pos] are the positional arguments, in order
 */
typedef enum {
    CLI_FLAG,     /* int at off set to 1 */
    CLI_VALUE,    /* const char * at off: the last value given */
    CLI_CALL,     /* call(opts, cmd, name, vals) for each use, in order: nvals values (0 means
                     1); non-zero: a usage error, already said (exit 2) */
    CLI_ACTION,   /* act() and the command ends with status 0, as --help does */
} cli_opt_kind;

typedef struct {
    const char *name;        /* "--db" */
    const char *alias;       /* "-o", "-y", or NULL */
    cli_opt_kind kind;
    size_t off;              /* FLAG, VALUE: offsetof in the command's options struct */
    int (*call)(void *opts, const char *cmd, const char *name, char **vals);
    void (*act)(void);
    int nvals;               /* CALL: values it takes (--vectors N FILE: 2) */
} cli_opt;

/* The entries of a spec's option table. */
#define CLI_OPT_FLAG(nm, al, T, field) { .name = nm, .alias = al, .kind = CLI_FLAG, .off = offsetof(T, field) }
#define CLI_OPT_VALUE(nm, al, T, field) { .name = nm, .alias = al, .kind = CLI_VALUE, .off = offsetof(T, field) }
#define CLI_OPT_CALL(nm, fn, n) { .name = nm, .kind = CLI_CALL, .call = fn, .nvals = n }
#define CLI_OPT_ACTION(nm, fn) { .name = nm, .kind = CLI_ACTION, .act = fn }
#define CLI_MAX_OPTS 32
#define CLI_N(a) (sizeof(a) / sizeof((a)[0]))

typedef struct cli_spec {
    const char *cmd;         /* "list", for messages */
    void (*help)(FILE *);    /* --help and -h print it on stdout */
    const cli_opt *opts;     /* at most CLI_MAX_OPTS */
    size_t n_opts;
} cli_spec;

/* Reads argv[1..argc-1] by sp into opts: `--opt V` and `--opt=V`, the rest positional, moved
 * to argv[1 .. *n_pos] in their order (argv is permuted). Returns -1 to go on; 0 once --help
 * or an action ran; 2 after saying what is wrong (an unknown option, with "did you mean"
 * from the spec, or a missing value). */
int cli_parse(const cli_spec *sp, void *opts, int argc, char **argv, int *n_pos);
/* The index of option `name` in argv read by sp (values skipped), or -1. */
int cli_option_at(const cli_spec *sp, int argc, char **argv, const char *name);
/* "nnbench CMD: <fmt>" and "(see nnbench CMD --help)" on stderr; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The candidate closest to word if it is a likely typo (or a unique prefix), else NULL. */
const char *cli_suggest(const char *word, const char *const *cands, size_t n);
/* An option's value that is none of cands: says so on stderr with "did you mean" and the
 * choices; returns 2 (usage). */
int cli_value_error(const char *cmd, const char *opt, const char *got, const char *const *cands, size_t n);

/* The command table (cmd_help.c). */
typedef struct {
    const char *name;
    int (*fn)(int, char **);
    void (*help)(FILE *);
    const char *summary;
    const cli_spec *spec;    /* its options (NULL: help, which reads its own words) */
} cli_command;
const cli_command *cli_commands(size_t *n);
const cli_command *cli_command_find(const char *name);
void cli_usage(FILE *f);

/* Print "unknown command ... did you mean ..." on stderr; return exit status 2. */
int cli_unknown_command(const char *name);
/* 0 when c's option spec and the --words of its help text name the same options; else 1
 * with the first difference in why. */
int cli_spec_help_mismatch(const cli_command *c, char *why, size_t cap);

/* Store access shared by the read commands (cli.c): open for reading (writable when
 * allowed so crashed runs get marked), and resolve run specs ("12", "#12", "last"). Both
 * print the reason and return NULL on failure; the ids are malloc'd. */
struct store;
struct store *cli_open_store(const char *db_flag, int flags);
long long *cli_resolve_runs(struct store *s, char **specs, size_t n);

/* The terminal of standard output (cli.c): colour unless NO_COLOR or not a tty,
 * UTF-8 from the locale, width from the tty or $COLUMNS (100 when unknown). */
int cli_use_color(void);
int cli_use_utf8(void);
int cli_term_width(void);

/* `show`'s lines on a run's checkpoints and int8 quantizations (cli.c). */
void cli_show_model(struct store *s, long long run);

/* The database path (runner_store.c): --db PATH (removed from argv by the caller), else $NNBENCH_DB,
 * else "./nnbench.db". */
const char *cli_db_path(const char *flag_value);

/* Store sink (runner_store.c): opens/creates the database and returns a sink that writes
 * each run and its events. NULL on error, with the reason in err (nothing is printed:
 * the workbench shows it on screen, the CLI on stderr). */
typedef struct cli_store_sink cli_store_sink;
cli_store_sink *cli_store_sink_open(const char *db_path, char *err, size_t errlen);
eng_sink cli_store_sink_get(cli_store_sink *s);
/* Id of the run being (or last) written, 0 before the first run_begin. */
long long cli_store_sink_run_id(const cli_store_sink *s);
/* NULL when the last run was stored completely (its end record committed after all its
 * points); else why not, for the caller to report (and exit 1). */
const char *cli_store_sink_error(const cli_store_sink *s);
/* NULL, or the first buffered write of the current run that failed and was retried (the
 * sink never prints: the caller says it). */
const char *cli_store_sink_warning(const cli_store_sink *s);
/* Flushes and closes; NULL is fine. 0 ok; -1 when the last flush failed, with the reason
 * in err (may be NULL). */
int cli_store_sink_close(cli_store_sink *s, char *err, size_t cap);
/* The next run the sink sees continues stored run `run` (nnbench resume) instead of adding
 * a new one. */
void cli_store_sink_resume(cli_store_sink *s, long long run);

/* Stop signals of the training commands (cli_signals.c): cli_stop_install makes SIGINT,
 * SIGTERM and SIGHUP stop the run given to cli_stop_target at its next step (stored as
 * interrupted, with its checkpoint); under mpirun with several ranks (dist_job) SIGTERM
 * aborts the job instead. cli_stop_signal is the signal that stopped us (exit 128 + it), 0
 * if none; cli_stop_restore puts the previous handlers back. */
void cli_stop_install(int dist_job);
void cli_stop_restore(void);
void cli_stop_target(eng_run *r);
int cli_stop_signal(void);

/* Before any training: 0 if out can be written (an existing writable file, or a new one in
 * an existing writable directory) and is not the database at db_path (NULL: no database)
 * or its -wal/-shm; else -1 with the reason in err. (runner_store.c) */
int cli_output_check(const char *db_path, const char *out, char *err, size_t cap);

/* s made safe to print on a terminal: control and bidi characters shown as \x1b, \u202e
 * (prof_text_visible). Returns one of 8 static buffers used in turn, so up to 8 calls may
 * appear in one printf; at most 2047 bytes. (cli.c) */
const char *cli_text(const char *s);

/* Writes a report of the given runs to path; format from the extension (.md .html .json
 * .csv). Prints the reason and returns non-zero on error. (cli.c) */
int cli_report_write(const char *db_path, const long long *run_ids, size_t n, const char *path);

#endif
