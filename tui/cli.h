/* cli.h — the `nnbench` command's subcommands and the glue between engine and store
 * (private to tui/). main.c dispatches; each cmd_*.c implements one family.
 * Every cmd_* returns the process exit status: 0 ok, 1 failure/diverged, 2 usage/config.
 */
#ifndef NNBENCH_CLI_H
#define NNBENCH_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "../engine/engine.h"

/* Each command and the function that prints its full help (whose `--words` are the
 * command's options for suggestions, the man page and the completion script). */
int cmd_run(int argc, char **argv);       /* cmd_run.c */
void cmd_run_help(FILE *f);
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
int cmd_solves(int argc, char **argv);    /* cmd_solves.c */
void cmd_solves_help(FILE *f);
int cmd_tui(int argc, char **argv);       /* workbench.c */
void cmd_tui_help(FILE *f);
int cmd_help(int argc, char **argv);      /* cmd_help.c: help [COMMAND | --man | --bash-completion] */

/* The command table (cmd_help.c). */
typedef struct {
    const char *name;
    int (*fn)(int, char **);
    void (*help)(FILE *);
    const char *summary;
} cli_command;
const cli_command *cli_commands(size_t *n);
const cli_command *cli_command_find(const char *name);
void cli_usage(FILE *f);
/* The candidate closest to word if it is a likely typo (or a unique prefix), else NULL. */
const char *cli_suggest(const char *word, const char *const *cands, size_t n);
/* Print "unknown command/option ... did you mean ..." on stderr; return exit status 2. */
int cli_unknown_command(const char *name);
int cli_unknown_option(const char *cmd, const char *opt);

/* Store access shared by the read commands (cmd_store.c): open for reading (writable when
 * allowed so crashed runs get marked), and resolve run specs ("12", "#12", "last"). Both
 * print the reason and return NULL on failure; the ids are malloc'd. */
struct store;
struct store *cli_open_store(const char *db_flag, int flags);
long long *cli_resolve_runs(struct store *s, char **specs, size_t n);

/* The database path (store_sink.c): --db PATH (removed from argv by the caller), else $NNBENCH_DB,
 * else "./nnbench.db". */
const char *cli_db_path(const char *flag_value);

/* Store sink (store_sink.c): opens/creates the database and returns a sink that writes
 * each run and its events. NULL on error, with the reason in err (nothing is printed:
 * the workbench shows it on screen, the CLI on stderr). */
typedef struct cli_store_sink cli_store_sink;
cli_store_sink *cli_store_sink_open(const char *db_path, char *err, size_t errlen);
eng_sink cli_store_sink_get(cli_store_sink *s);
/* Id of the run being (or last) written, 0 before the first run_begin. */
long long cli_store_sink_run_id(const cli_store_sink *s);
void cli_store_sink_close(cli_store_sink *s);

/* s made safe to print on a terminal: control and bidi characters shown as \x1b, \u202e
 * (prof_text_visible). Returns one of 8 static buffers used in turn, so up to 8 calls may
 * appear in one printf; at most 2047 bytes. (cmd_store.c) */
const char *cli_text(const char *s);

/* Writes a report of the given runs to path; format from the extension (.md .html .json
 * .csv). Prints the reason and returns non-zero on error. (cmd_store.c) */
int cli_report_write(const char *db_path, const long long *run_ids, size_t n, const char *path);

#endif
