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
int cmd_resume(int argc, char **argv);    /* cmd_model.c */
int cmd_eval(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_export_model(int argc, char **argv);

/* `show`'s lines on a run's checkpoints and int8 quantizations (cmd_model.c). */
struct store;
void cli_show_model(struct store *s, long long run);

/* The database path (store_sink.c): --db PATH (removed from argv by the caller), else $NNBENCH_DB,
 * else "./nnbench.db". */
const char *cli_db_path(const char *flag_value);

/* Store sink (store_sink.c): opens/creates the database and returns a sink that writes
 * each run and its events. NULL on error, with the reason in err (nothing is printed:
 * the workbench shows it on screen, the CLI on stderr). */
typedef struct cli_store_sink cli_store_sink;
cli_store_sink *cli_store_sink_open(const char *db_path, char *err, size_t errlen);
eng_sink cli_store_sink_get(cli_store_sink *s);
/* The next run the sink sees continues stored run `run` (nnbench resume) instead of
 * adding a new one. */
void cli_store_sink_resume(cli_store_sink *s, long long run);
/* Id of the run being (or last) written, 0 before the first run_begin. */
long long cli_store_sink_run_id(const cli_store_sink *s);
void cli_store_sink_close(cli_store_sink *s);

/* Writes a report of the given runs to path; format from the extension (.md .html .json
 * .csv). Prints the reason and returns non-zero on error. (cmd_store.c) */
int cli_report_write(const char *db_path, const long long *run_ids, size_t n, const char *path);

#endif
