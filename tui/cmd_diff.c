/* cmd_diff.c — `nnbench diff A B`: the op diff of two runs (store_diff, a view of the one
 * comparison and the one op table) as text, JSON or CSV; and its text lines, which the
 * workbench's Compare screen shows under the comparison of two runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"
#include "cli.h"
#include "tui.h"

int tui_diff_lines(const store_diff *d, int width, int utf8, size_t max_rows, char ***lines, size_t *n)
{
    char b[1200];
    if (tui_lines_add(lines, n, "A = %s", d->cmp->label[d->ia]) || tui_lines_add(lines, n, "B = %s", d->cmp->label[d->ib]))
        return -1;
    if (d->note[0] && tui_lines_add(lines, n, "%s", d->note)) return -1;
    if (!d->n) return 0;
    if (tui_lines_add(lines, n, "%s", store_diff_summary(d, b, sizeof b))) return -1;
    size_t shown = max_rows && max_rows < d->n ? max_rows : d->n;
    /* The columns shown, each as wide as its widest cell (tui_table_layout fits them). */
    tui_col cols[STORE_DIFF_N_COLS];
    int map[STORE_DIFF_N_COLS], nc = 0, w[STORE_DIFF_N_COLS];
    for (int c = 0; c < STORE_DIFF_N_COLS; c++) {
        if (!d->show[c]) continue;
        const store_diff_col_def *def = &store_diff_cols[c];
        int tw = tui_text_width(def->title);
        cols[nc] = (tui_col){ .title = def->title, .want = tw, .right = def->right, .flex = c == STORE_DIFF_COL_NAME };
        for (size_t i = 0; i < shown; i++) {
            int cw = tui_text_width(store_diff_cell(d, &d->rows[i], (store_diff_col)c, b, sizeof b));
            if (cw > cols[nc].want) cols[nc].want = cw > 40 ? 40 : cw;
        }
        /* numbers are never cut (as in the op table): a column too wide is left out whole */
        cols[nc].min = def->right ? cols[nc].want : c == STORE_DIFF_COL_NAME ? 12 : 6;
        map[nc++] = c;
    }
    int natural = nc ? nc - 1 : 0;   /* the table is never wider than its cells */
    for (int k = 0; k < nc; k++) natural += cols[k].want;
    int vis = tui_table_layout(cols, nc, width < natural ? width : natural, 1, w);
    for (long i = -1; i < (long)shown; i++) {
        size_t o = 0;
        char fit[512];
        for (int k = 0; k < nc && k < STORE_DIFF_N_COLS && o + 1 < sizeof b; k++) {
            if (!w[k]) continue;
            const char *s = i < 0 ? cols[k].title : store_diff_cell(d, &d->rows[i], (store_diff_col)map[k], fit, sizeof fit);
            char cell[512];
            tui_fit(s, w[k], cols[k].right, utf8, cell, sizeof cell);
            int m = snprintf(b + o, sizeof b - o, "%s%s", o ? " " : "", cell);
            if (m < 0) break;
            o += (size_t)m < sizeof b - o ? (size_t)m : sizeof b - o - 1;
        }
        if (tui_lines_add(lines, n, "%s", b)) return -1;
    }
    if (shown < d->n && tui_lines_add(lines, n, "(%zu of %zu rows; --rows shows more)", shown, d->n)) return -1;
    if (vis < nc) {
        size_t o = (size_t)snprintf(b, sizeof b, "(left out for %d columns:", width);
        for (int k = 0; k < nc && o < sizeof b; k++)
            if (!w[k]) o += (size_t)snprintf(b + o, sizeof b - o, " %s", cols[k].title);
        if (o + 2 < sizeof b) memcpy(b + o, ")", 2);
        if (tui_lines_add(lines, n, "%s", b)) return -1;
    }
    return 0;
}

static const char diff_help[] =
    "usage: nnbench diff A B [--json | --csv] [--rows N] [--db PATH]\n\n"
    "Why is B faster (or slower) than A? Op by op, the two runs' stored profiles: every op,\n"
    "phase and the step scope (each MPI rank's apart), matched on name and layer, with its self\n"
    "time per step in A and in B, the difference B - A and its share of the whole step-time\n"
    "difference (the shares add up to 100%), sorted by that contribution; then calls per step,\n"
    "GFLOP/s, bytes per step and peak memory as A -> B, and the hardware counters where the\n"
    "runs counted them. A scope that ran in one run only is marked \"only A\" / \"only B\".\n"
    "The same diff is at the end of the workbench's Compare screen for two runs, and in\n"
    "`nnbench report` of two runs.\n\n"
    "  A B        run ids from nnbench list ('#12' and 'last' work too)\n"
    "  --json     one JSON object: a, b, delta_s and rows (raw numbers; an \"A -> B\" column is [A, B])\n"
    "  --csv      one line per row (an \"A -> B\" column is two, KEY_a and KEY_b)\n"
    "  --rows N   text: the N largest contributions only (default: all)\n"
    "Exit status: 0 done, 1 a run or the database cannot be read, 2 usage.\n";

void cmd_diff_help(FILE *f) { fputs(diff_help, f); }

static int diff_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "nnbench diff: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see nnbench diff --help)\n");
    return 2;
}

/* Resolves A and B; a spec that is no run id is a usage error (2), a missing run 1. */
static int resolve_two(store *s, char **specs, long long ids[2])
{
    for (int k = 0; k < 2; k++)
        if (store_run_resolve(s, specs[k], &ids[k])) {
            int usage = strstr(store_error(), "is not a run id") != NULL || !specs[k][0];
            fprintf(stderr, "nnbench diff: %s\n", cli_text(store_error()));
            return usage ? 2 : 1;
        }
    return 0;
}

static int diff_print(store *s, const long long ids[2], int format, size_t rows)
{
    store_compare *c = NULL;
    store_diff *d = NULL;
    store_cmp_opts co = { .target = NAN };
    int st = store_compare_load(s, ids, 2, &co, &c);
    if (!st) st = store_diff_load(s, c, 0, 1, &d);
    if (!st && format == 1) st = store_diff_json(d, stdout);
    else if (!st && format == 2) st = store_diff_csv(d, stdout);
    else if (!st) {
        char **lines = NULL;
        size_t nl = 0;
        /* a terminal: its width; a pipe or a file: every column */
        int width = prof_text_columns(stdout) ? cli_term_width() - 1 : 1000;
        if (tui_diff_lines(d, width, cli_use_utf8(), rows, &lines, &nl)) st = STORE_ENOMEM;
        for (size_t i = 0; i < nl; i++) printf("%s\n", lines[i]);
        tui_lines_free(lines, nl);
        for (int k = 0; k < STORE_CMP_N_NOTES; k++)
            if (c->notes[k][0]) printf("%s\n", c->notes[k]);
    }
    if (st) fprintf(stderr, "nnbench diff: %s\n", st == STORE_ENOMEM ? "out of memory" : cli_text(store_error()));
    store_diff_free(d);
    store_compare_free(c);
    return st ? 1 : 0;
}

typedef struct { const char *db, *rows; int json, csv; } diff_opts;
static const cli_opt diff_opt[] = {
    CLI_OPT_VALUE("--db", NULL, diff_opts, db), CLI_OPT_VALUE("--rows", NULL, diff_opts, rows),
    CLI_OPT_FLAG("--json", NULL, diff_opts, json), CLI_OPT_FLAG("--csv", NULL, diff_opts, csv),
};
const cli_spec cmd_diff_spec = { "diff", cmd_diff_help, diff_opt, CLI_N(diff_opt) };

int cmd_diff(int argc, char **argv)
{
    diff_opts o = { 0 };
    int nspec, rc = cli_parse(&cmd_diff_spec, &o, argc, argv, &nspec);
    if (rc >= 0) return rc;
    if (o.json && o.csv) return diff_usage("--json and --csv: give one of them%s", "");
    int format = o.json ? 1 : o.csv ? 2 : 0;
    const char *db = o.db, *rows_s = o.rows;
    char **specs = argv + 1;
    if (nspec > 2) return diff_usage("two runs, A and B ('%s' is a third)", argv[3]);
    if (nspec < 2) return diff_usage("which runs? give two ids from nnbench list: nnbench diff A B%s", "");
    long rows = 0;
    if (rows_s) {
        char *end;
        rows = strtol(rows_s, &end, 10);
        if (*end || end == rows_s || rows < 1) return diff_usage("--rows wants a number >= 1, got '%s'", rows_s);
    }
    /* Read-only (flags 0): a diff never writes the database, so a run being written is read
     * as it stands (WAL: the writer is never waited for). */
    store *s = cli_open_store(db, 0);
    if (!s) return 1;
    long long ids[2];
    int code = resolve_two(s, specs, ids);
    if (!code) code = diff_print(s, ids, format, (size_t)rows);
    store_close(s);
    return code;
}
