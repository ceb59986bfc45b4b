/* cli.h — the `nnbench` command's subcommands and the glue between engine and store
 * (private to tui/). main.c dispatches; each cmd_*.c implements one family.
 * Every cmd_* returns the process exit status: 0 ok, 1 failure/diverged, 2 usage/config.
 */
#ifndef NNBENCH_CLI_H
#define NNBENCH_CLI_H

#include <stddef.h>

#include "../engine/engine.h"

int cmd_run(int argc, char **argv);       /* cmd_run.c */
int cmd_sysinfo(int argc, char **argv);   /* cmd_sysinfo.c */
int cmd_list(int argc, char **argv);      /* cmd_store.c */
int cmd_show(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_delete(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_tui(int argc, char **argv);       /* workbench.c */

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
