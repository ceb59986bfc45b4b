/* cmd_tui.c — `nnbench tui`: its options, the database, then the workbench's frame
 * (wb_app.c) with the Runs screen first; what the workbench kept is freed here. */
#include "cli.h"
#include "wb.h"

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

int cmd_tui(int argc, char **argv)
{
    const char *db_flag = NULL;
    int no_color = getenv("NO_COLOR") && *getenv("NO_COLOR");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--db") && i + 1 < argc) db_flag = argv[++i];
        else if (!strncmp(argv[i], "--db=", 5)) db_flag = argv[i] + 5;
        else if (!strcmp(argv[i], "--no-color")) no_color = 1;
        else if (!strcmp(argv[i], "--keys-markdown")) { tui_keys_markdown(stdout); return 0; }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { cmd_tui_help(stdout); return 0; }
        else if (!strcmp(argv[i], "tui")) continue; /* `nnbench --db X` passes argv from main */
        else {
            if (argv[i][0] == '-') return cli_unknown_option("tui", argv[i]);
            fprintf(stderr, "nnbench tui: unexpected argument '%s' (see nnbench tui --help)\n", argv[i]);
            return 2;
        }
    }
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
