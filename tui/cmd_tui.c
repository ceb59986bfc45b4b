/* cmd_tui.c — `nnbench tui`: its options, the database, then the workbench's frame
 * (wb_app.c) with the Runs screen first; what the workbench kept is freed here. */
#include "cli.h"
#include "wb.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cmd_tui_help(FILE *f)
{
    fprintf(f, "usage: nnbench tui [--db PATH] [--no-color]\n\n"
               "The ncurses workbench on the database (default ./nnbench.db, or $NNBENCH_DB).\n"
               "Press ? inside for the keys. NO_COLOR in the environment also gives monochrome.\n"
               "  --keys-markdown   print the key table as Markdown (for docs/workbench.md) and exit\n");
}

typedef struct { const char *db; int no_color; } tui_opts;
static void keys_markdown(void) { tui_keys_markdown(stdout); }
static const cli_opt tui_opt[] = {
    CLI_OPT_VALUE("--db", NULL, tui_opts, db), CLI_OPT_FLAG("--no-color", NULL, tui_opts, no_color),
    CLI_OPT_ACTION("--keys-markdown", keys_markdown),
};
const cli_spec cmd_tui_spec = { "tui", cmd_tui_help, tui_opt, CLI_N(tui_opt) };

int cmd_tui(int argc, char **argv)
{
    tui_opts o = { 0 };
    int n_pos, rc = cli_parse(&cmd_tui_spec, &o, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    for (int i = 1; i <= n_pos; i++) {
        if (!strcmp(argv[i], "tui")) continue; /* `nnbench --db X` passes argv from main */
        fprintf(stderr, "nnbench tui: unexpected argument '%s' (see nnbench tui --help)\n", argv[i]);
        return 2;
    }
    const char *db_flag = o.db;
    int no_color = o.no_color || (getenv("NO_COLOR") && *getenv("NO_COLOR"));
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "nnbench tui: needs a terminal (stdin and stdout must be a tty); "
                        "for scripts use `nnbench list`, `show`, `compare`\n");
        return 2;
    }
    static wb_app app;
    wb_app *a = &app;
    memset(a, 0, sizeof *a);
    snprintf(a->db_path, sizeof a->db_path, "%s", cli_db_path(db_flag));
    if (store_open(a->db_path, STORE_OPEN_CREATE, &a->db)) {
        /* A read-only place still deserves a look at its runs. */
        if (store_open(a->db_path, 0, &a->db)) {
            fprintf(stderr, "nnbench tui: %s\n", store_error());
            return 1;
        }
    }
    pthread_mutex_init(&a->live.mu, NULL);
    a->sort_col = TUI_RC_ID;
    a->sort_desc = 1;
    a->smooth_idx = 0;
    a->token = 0;
    a->last_poll = -1;

    wb_push(a, &wb_runs_panel);
    a->open_help = wb_open_help;
    if (wb_app_run(a, no_color)) {
        store_close(a->db);
        return 1;
    }
    while (a->depth > 1) wb_pop(a);
    wb_live_free(a);
    wb_new_free(a);
    free(a->all);
    free(a->view);
    store_close(a->db);
    return 0;
}
