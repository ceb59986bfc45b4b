/* cmd_store.c — the commands that read the database: list, show, compare (table + terminal
 * chart), report, export, delete; and cli_report_write for `nnbench run --report`. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "../store/store.h"
#include "chart.h"
#include "cli.h"
#include "monitor.h"
#include "tui.h"

/* ---- shared helpers ---------------------------------------------------------------- */

int cli_use_color(void)
{
    const char *nc = getenv("NO_COLOR");
    return isatty(STDOUT_FILENO) && !(nc && *nc);
}

int cli_use_utf8(void)
{
    const char *vars[] = { "LC_ALL", "LC_CTYPE", "LANG" };
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return strcasestr(v, "utf-8") || strcasestr(v, "utf8");
    }
    return 0;
}

int cli_term_width(void)
{
    size_t t = prof_text_columns(stdout);
    if (t >= 40) return (int)t;
    const char *c = getenv("COLUMNS");
    int w = c ? atoi(c) : 0;
    return w >= 40 ? w : 100;
}

static const char *status_color(store_run_status s)
{
    switch (s) {
    case STORE_RUN_FINISHED: return "\033[32m";
    case STORE_RUN_RUNNING: return "\033[36m";
    case STORE_RUN_INTERRUPTED: return "\033[33m";
    case STORE_RUN_CRASHED: return "\033[35m";
    default: return "\033[31m";
    }
}

/* "name/variant", made visible and cut between characters (names come from the database,
 * which any SQLite client can write: they may hold escape sequences). */
static void run_name(const store_run *r, char *b, size_t cap)
{
    char full[sizeof r->name + sizeof r->variant + 2];
    snprintf(full, sizeof full, "%s%s%s", r->name, r->variant[0] ? "/" : "", r->variant);
    prof_text_fit(b, cap, full, (size_t)-1, 0);
}

const char *cli_text(const char *s)
{
    static char ring[8][2048];
    static int k;
    k = (k + 1) % 8;
    return prof_text_visible(ring[k], sizeof ring[k], s ? s : "");
}

/* "--opt VALUE" or "--opt=VALUE" at argv[*i]; 1 if matched (value in *out), -1 if the
 * value is missing, 0 if argv[*i] is another argument. */
static int opt_value(int argc, char **argv, int *i, const char *name, const char **out)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n)) return 0;
    if (a[n] == '=') { *out = a + n + 1; return 1; }
    if (a[n]) return 0;
    if (*i + 1 >= argc) { fprintf(stderr, "nnbench: %s needs a value\n", name); return -1; }
    *out = argv[++*i];
    return 1;
}

static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "nnbench %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see nnbench %s --help)\n", cmd);
    return 2;
}

/* Opens for reading: writable when allowed (so crashed runs get marked), else read-only. */
store *cli_open_store(const char *db_path, int flags)
{
    store *s;
    if (store_open(cli_db_path(db_path), flags, &s)) {
        fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
        return NULL;
    }
    return s;
}

/* Resolves run specs ("12", "#12", "last"); prints the reason on failure. */
long long *cli_resolve_runs(store *s, char **specs, size_t n)
{
    long long *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids) { fprintf(stderr, "nnbench: out of memory\n"); return NULL; }
    for (size_t i = 0; i < n; i++)
        if (store_run_resolve(s, specs[i], &ids[i])) {
            fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
            free(ids);
            return NULL;
        }
    return ids;
}

/* ---- list -------------------------------------------------------------------------- */

static const char list_help[] =
    "usage: nnbench list [--status S] [--grep TEXT] [--sort COLUMN] [--desc] [--limit N] [--db PATH]\n\n"
    "One row per stored run: id, name/variant, status, optimizer, dataset, final train loss,\n"
    "best test accuracy, duration and start time, fitted to the terminal's width (names cut\n"
    "in the middle; the last columns go first).\n\n"
    "  --status S      running | finished | failed | diverged | interrupted | crashed\n"
    "  --grep TEXT     runs whose name, variant, optimizer, dataset, file or model contain TEXT\n"
    "  --sort COLUMN   id name variant status optimizer dataset loss acc duration started\n"
    "                  steps samples_per_s (default id); --desc reverses\n"
    "  --limit N       at most N rows (without --sort: the newest N)\n"
    "  --db PATH       the database (default $NNBENCH_DB or ./nnbench.db)\n";

void cmd_list_help(FILE *f) { fputs(list_help, f); }

int cmd_list(int argc, char **argv)
{
    const char *db = NULL, *status = NULL, *grep = NULL, *sort = NULL, *limit = NULL;
    int desc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(list_help, stdout); return 0; }
        if (!strcmp(a, "--desc")) { desc = 1; continue; }
        if ((m = opt_value(argc, argv, &i, "--db", &db)) || (m = opt_value(argc, argv, &i, "--status", &status)) ||
            (m = opt_value(argc, argv, &i, "--grep", &grep)) || (m = opt_value(argc, argv, &i, "--sort", &sort)) ||
            (m = opt_value(argc, argv, &i, "--limit", &limit))) {
            if (m < 0) return 2;
            continue;
        }
        if (a[0] == '-' && a[1]) return cli_unknown_option("list", a);
        return usage_error("list", "unexpected argument '%s'", a);
    }
    store_list_filter f = { .status = -1, .grep = grep, .sort = sort, .desc = desc };
    if (status) {
        store_run_status st;
        if (store_status_parse(status, &st)) { fprintf(stderr, "nnbench list: %s\n", cli_text(store_error())); return 2; }
        f.status = (int)st;
    }
    if (limit) {
        char *end;
        f.limit = strtol(limit, &end, 10);
        if (*end || f.limit <= 0) return usage_error("list", "--limit wants a positive number, got '%s'", limit);
    }
    if (sort) {
        int ok = 0;
        for (int i = 0; store_sort_columns[i]; i++) ok |= !strcasecmp(sort, store_sort_columns[i]);
        if (!ok) return usage_error("list", "unknown sort column '%s' (id name variant status optimizer "
                                    "dataset loss acc duration started steps samples_per_s)", sort);
    }
    const char *path = cli_db_path(db);
    store *s;
    int rc = store_open(path, 0, &s);
    if (rc == STORE_ENOTFOUND) {
        printf("No runs yet: %s %s.\nMake one with:  nnbench run samples/spirals-mlp.ini%s%s\n",
               path, access(path, F_OK) ? "does not exist" : "holds no nnbench runs", db ? " --db " : "", db ? db : "");
        return 0;
    }
    if (rc) { fprintf(stderr, "nnbench: %s\n", cli_text(store_error())); return 1; }
    /* --limit N without --sort: the newest N, shown oldest first like the rest of the list. */
    int newest = f.limit && !sort;
    if (newest) { f.sort = "id"; f.desc = !desc; }
    store_run *runs;
    size_t n;
    if (store_runs_list(s, &f, &runs, &n)) {
        fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
        store_close(s);
        return 1;
    }
    if (newest && !desc)
        for (size_t i = 0; i < n / 2; i++) { store_run t = runs[i]; runs[i] = runs[n - 1 - i]; runs[n - 1 - i] = t; }
    long long total = 0;
    store_run_count(s, &total);
    store_close(s);
    if (!n) {
        if (!total) printf("No runs in %s yet.\nMake one with:  nnbench run samples/spirals-mlp.ini%s%s\n",
                           path, db ? " --db " : "", db ? db : "");
        else printf("No run matches (%lld runs in %s).\n", total, path);
        free(runs);
        return 0;
    }
    /* Fitted to the terminal (80 columns fit): the name keeps up to 24 cells and is cut in
     * the middle; other columns shrink, then drop from the right. */
    enum { NC = 9 };
    static const char *const head[NC] = { "ID", "NAME/VARIANT", "STATUS", "OPTIMIZER", "DATASET",
                                          "LOSS", "ACC", "DURATION", "STARTED" };
    static const int right[NC] = { 1, 0, 0, 0, 0, 1, 1, 1, 0 };
    /* 0: never shrunk (numbers are not cut); 80 columns: 2+22+8+6+5+9+5+8 and gaps */
    static const int mins[NC] = { 0, 22, 8, 6, 5, 0, 0, 0, 16 };
    char (*cells)[NC][200] = malloc(n * sizeof *cells);
    if (!cells) { free(runs); fprintf(stderr, "nnbench: out of memory\n"); return 1; }
    tui_col cols[NC];
    for (int c = 0; c < NC; c++) cols[c] = (tui_col){ head[c], (int)strlen(head[c]), 0, right[c], 0 };
    for (size_t i = 0; i < n; i++) {
        const store_run *r = &runs[i];
        snprintf(cells[i][0], 200, "%lld", r->id);
        run_name(r, cells[i][1], 200);
        snprintf(cells[i][2], 200, "%s", store_status_name(r->status));
        snprintf(cells[i][3], 200, "%s", r->optimizer[0] ? r->optimizer : "-");
        snprintf(cells[i][4], 200, "%s", r->dataset[0] ? r->dataset : "-");
        prof_fmt_num(cells[i][5], 200, r->final_train_loss);
        prof_fmt_num(cells[i][6], 200, r->best_test_acc);
        prof_fmt_duration(cells[i][7], 200, r->wall_s);
        store_fmt_time(cells[i][8], 200, r->started, "%Y-%m-%d %H:%M");
        for (int c = 0; c < NC; c++) {
            int l = tui_text_width(cells[i][c]);
            if (l > cols[c].want) cols[c].want = l > 40 ? 40 : l;
        }
    }
    for (int c = 0; c < NC; c++) cols[c].min = mins[c] && mins[c] < cols[c].want ? mins[c] : cols[c].want;
    int w[NC];
    /* Whole names while up to the duration fits; else names cut to 22 cells. */
    int full = cols[1].want < 40 ? cols[1].want : 40;
    cols[1].min = full;
    int vis = tui_table_layout(cols, NC, cli_term_width() - 1, 2, w);
    if (vis < NC - 1 && full > mins[1]) {
        cols[1].min = mins[1] < cols[1].want ? mins[1] : cols[1].want;
        vis = tui_table_layout(cols, NC, cli_term_width() - 1, 2, w);
    }
    int color = cli_use_color(), utf8 = cli_use_utf8();
    char fit[512];
    for (int c = 0; c < vis; c++) {
        tui_fit(head[c], c < vis - 1 ? w[c] : tui_text_width(head[c]) < w[c] ? tui_text_width(head[c]) : w[c],
                right[c], utf8, fit, sizeof fit);
        printf("%s%s", fit, c < vis - 1 ? "  " : "\n");
    }
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < vis; c++) {
            if (c == 1) tui_fit_middle(cells[i][c], w[c], 0, utf8, fit, sizeof fit);
            else tui_fit(cells[i][c], w[c], right[c], utf8, fit, sizeof fit);
            if (c == 2 && color) printf("%s", status_color(runs[i].status));
            /* the last column is not padded: no trailing blanks */
            if (c == vis - 1 && !right[c]) { size_t l = strlen(fit); while (l && fit[l - 1] == ' ') fit[--l] = 0; }
            printf("%s", fit);
            if (c == 2 && color) printf("\033[0m");
            fputs(c < vis - 1 ? "  " : "\n", stdout);
        }
    if ((long long)n < total) printf("(%zu of %lld runs)\n", n, total);
    free(cells);
    free(runs);
    return 0;
}

/* ---- show -------------------------------------------------------------------------- */

static const char show_help[] =
    "usage: nnbench show RUN [--db PATH] [--ops N]\n\n"
    "Everything about one run: config (resolved keys), system, final and best metrics, the top\n"
    "ops by self time (--ops N rows, default 10) and the Newton solver summary if any.\n"
    "RUN is an id from nnbench list, or 'last'.\n";

void cmd_show_help(FILE *f) { fputs(show_help, f); }

static void print_solver(const store_solver_event *ev, size_t n, const char *indent)
{
    store_solver_summary sum;
    char lines[3][256];
    store_solver_summarize(ev, n, &sum);
    int k = store_solver_summary_lines(&sum, lines);
    for (int i = 0; i < k; i++) printf("%s%s\n", indent, lines[i]);
}

/* The top ops (the op-table model, as everywhere) and, for a data-parallel run, the load
 * imbalance across ranks in one line. */
static void print_ops(store *s, long long id, const store_op_row *ops, size_t n, size_t max_rows)
{
    store_profile prof;
    int have = !store_profile_get(s, id, &prof);
    store_op_row *all = NULL;
    size_t na = 0;
    prof_balance bal;
    prof_balance_get(NULL, 0, &bal);
    if (!store_op_stats_get(s, id, -1, &all, &na)) prof_balance_get(all, na, &bal);
    free(all);
    prof_table t;
    prof_table_init(&t, ops, n, have ? (uint64_t)prof.total_self_ns : 0, have ? prof.peak_gflops : 0);
    t.ranks = &bal;
    prof_table_print(stdout, &t, max_rows, 28, "  ");
    if (max_rows < n) printf("  (%zu of %zu ops shown; --ops N for more)\n", max_rows, n);
    char a[64];
    if (have) {
        printf("  profiler: %lld events, overhead %s", (long long)prof.events, prof_fmt_duration(a, sizeof a, prof.overhead_ns * 1e-9));
        if (prof.counters_note[0]) printf("; %s", cli_text(prof.counters_note));
        printf("\n");
    }
    char line[256];
    if (prof_balance_line(&bal, line, sizeof line)[0]) printf("  %s\n", line);
}

int cmd_show(int argc, char **argv)
{
    const char *db = NULL, *spec = NULL, *ops_s = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(show_help, stdout); return 0; }
        if ((m = opt_value(argc, argv, &i, "--db", &db)) || (m = opt_value(argc, argv, &i, "--ops", &ops_s))) {
            if (m < 0) return 2;
            continue;
        }
        if (a[0] == '-' && a[1]) return cli_unknown_option("show", a);
        if (spec) return usage_error("show", "one run at a time ('%s' is extra); use compare for several", a);
        spec = a;
    }
    if (!spec) return usage_error("show", "which run? give an id from nnbench list%s", "");
    long max_ops = ops_s ? atol(ops_s) : 10;
    if (max_ops <= 0) return usage_error("show", "--ops wants a positive number, got '%s'", ops_s);
    store *s = cli_open_store(db, 0);
    if (!s) return 1;
    int code = 1;
    long long id;
    store_run r;
    store_run_init(&r);
    store_kv *params = NULL, *sys = NULL;
    size_t np = 0, ns = 0, nk = 0, nops = 0, nev = 0;
    char **keys = NULL;
    store_op_row *ops = NULL;
    store_solver_event *ev = NULL;
    if (store_run_resolve(s, spec, &id) || store_run_get(s, id, &r) || store_params_get(s, id, &params, &np) ||
        store_sysinfo_get(s, id, &sys, &ns) || store_metric_keys(s, id, &keys, &nk) ||
        store_op_stats_get(s, id, 0, &ops, &nops) || store_solver_events_get(s, id, &ev, &nev)) {
        fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
        goto out;
    }
    store_metric_keys_sort((const char **)keys, nk); /* losses first, as in compare and reports */
    char nm[200], a[64], b[64], c[64];
    run_name(&r, nm, sizeof nm);
    int color = cli_use_color();
    printf("run %lld  %s  %s%s%s\n", r.id, nm, color ? status_color(r.status) : "", store_status_name(r.status),
           color ? "\033[0m" : "");
    if (r.error[0]) printf("  error     %s\n", cli_text(r.error));
    printf("  file      %s (seed %llu)\n", r.exp_path[0] ? cli_text(r.exp_path) : "-", (unsigned long long)r.seed);
    printf("  started   %s   ended %s   duration %s\n", store_fmt_time(a, sizeof a, r.started, "%Y-%m-%d %H:%M"), store_fmt_time(b, sizeof b, r.ended, "%Y-%m-%d %H:%M"),
           prof_fmt_duration(c, sizeof c, r.wall_s));
    printf("  host      %s  pid %ld  nnbench %s\n", cli_text(r.host), r.pid, r.version[0] ? cli_text(r.version) : "?");
    if (strstr(r.model, "params]")) printf("  model     %s\n", cli_text(r.model));
    else printf("  model     %s  [%lld params]\n", r.model[0] ? cli_text(r.model) : "-", r.n_params);
    printf("  data      %s  (%d train / %d test)\n", r.dataset[0] ? cli_text(r.dataset) : "-", r.n_train, r.n_test);

    printf("\nconfig\n");
    for (size_t i = 0; i < np; i++) printf("  %-32s %s\n", cli_text(params[i].key), cli_text(params[i].value));
    if (!np) printf("  (no keys stored)\n");
    printf("\nsystem\n");
    for (size_t i = 0; i < ns; i++) printf("  %-32s %s\n", cli_text(sys[i].key), cli_text(sys[i].value));
    if (!ns) printf("  (nothing stored)\n");

    printf("\nresults\n");
    printf("  steps %ld of %ld, epochs %d, %s samples/s, hybrid clock %s\n", r.steps, r.total_steps, r.epochs,
           prof_fmt_num(a, sizeof a, r.samples_per_s), prof_fmt_duration(b, sizeof b, r.hybrid_s));
    printf("  peak memory %s (engine), peak RSS %s\n", prof_fmt_bytes(a, sizeof a, (double)r.peak_bytes),
           prof_fmt_bytes(b, sizeof b, (double)r.peak_rss));
    if (isfinite(r.target_loss)) {
        if (r.steps_to_target >= 0)
            printf("  target loss %.4g reached at step %ld, %s wall, %s hybrid\n", r.target_loss, r.steps_to_target,
                   prof_fmt_duration(a, sizeof a, r.wall_to_target), prof_fmt_duration(b, sizeof b, r.hybrid_to_target));
        else
            printf("  target loss %.4g not reached\n", r.target_loss);
    }
    cli_show_model(s, id);
    printf("  %-16s %8s %12s %12s %12s\n", "metric", "points", "final", "best", "at step");
    for (size_t k = 0; k < nk; k++) {
        store_series sr;
        if (store_metric_get(s, id, keys[k], &sr)) { fprintf(stderr, "nnbench: %s\n", cli_text(store_error())); goto out; }
        double fin = NAN, best = NAN;
        long at = -1;
        int low = store_metric_lower_is_better(keys[k]);
        for (size_t p = 0; p < sr.n; p++) {
            double v = sr.value[p];
            fin = v;
            if (isfinite(v) && (isnan(best) || (low ? v < best : v > best))) { best = v; at = sr.step[p]; }
        }
        char d[32];
        snprintf(d, sizeof d, at >= 0 ? "%ld" : "-", at);
        printf("  %-16s %8zu %12s %12s %12s\n", cli_text(keys[k]), sr.n, prof_fmt_num(a, sizeof a, fin), prof_fmt_num(b, sizeof b, best), d);
        store_series_free(&sr);
    }
    if (!nk) printf("  (no metrics stored)\n");

    printf("\ntop ops by self time\n");
    if (nops) {
        print_ops(s, id, ops, nops, (size_t)max_ops);
    } else {
        printf("  (not profiled)\n");
    }
    if (nev) {
        printf("\nsolver\n");
        print_solver(ev, nev, "  ");
    }
    code = 0;
out:
    store_run_clear(&r);
    free(params);
    free(sys);
    store_strings_free(keys, nk);
    free(ops);
    free(ev);
    store_close(s);
    return code;
}

/* ---- compare ----------------------------------------------------------------------- */

static const char compare_help[] =
    "usage: nnbench compare RUN RUN... | --last-batch  [--metric KEY] [--x step|time|hybrid_time]\n"
    "                       [--x-scale linear|log|norm] [--target V] [--all-keys] [--height N]\n"
    "                       [--no-color] [--db PATH]\n\n"
    "A side-by-side table, one column per run (the same rows and words as the workbench's\n"
    "Compare screen and the reports): results; wall time, quantum time (simulated), hybrid\n"
    "time (simulated) and steps / time to the target on both clocks; the config keys that\n"
    "differ (--all-keys: all); the top ops. Then a terminal line chart of one metric.\n\n"
    "  --last-batch  the runs of the newest batch (one `nnbench run`, or one all-variants New run)\n"
    "  --metric KEY  train_loss (also 'loss'), test_loss, train_acc, test_acc ('acc'), lr, ...\n"
    "  --x AXIS      step (default), time (wall seconds) or hybrid_time (Q-Newton clock, simulated)\n"
    "  --x-scale S   linear (default), log, or norm: each run's x divided by its own last x, so\n"
    "                a 72 ms run and a 3 s run both span the chart\n"
    "  --target V    steps/time until the metric first reaches V (<= for losses, >= otherwise);\n"
    "                default: each run's experiment target_loss for train_loss\n"
    "  --no-color    no colours (also NO_COLOR): series told apart by marker glyphs\n";

void cmd_compare_help(FILE *f) { fputs(compare_help, f); }

static const char *metric_alias(const char *m)
{
    if (!strcmp(m, "loss")) return "train_loss";
    if (!strcmp(m, "acc") || !strcmp(m, "accuracy")) return "test_acc";
    return m;
}

int cmd_compare(int argc, char **argv)
{
    const char *db = NULL, *metric = "train_loss", *xaxis = "step", *target_s = NULL, *height_s = NULL;
    const char *xscale_s = "linear";
    int all_keys = 0, last_batch = 0, no_color = 0;
    char **specs = calloc((size_t)argc, sizeof *specs);
    size_t nspec = 0;
    if (!specs) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(compare_help, stdout); free(specs); return 0; }
        if (!strcmp(a, "--all-keys")) { all_keys = 1; continue; }
        if (!strcmp(a, "--last-batch")) { last_batch = 1; continue; }
        if (!strcmp(a, "--no-color")) { no_color = 1; continue; }
        if ((m = opt_value(argc, argv, &i, "--db", &db)) || (m = opt_value(argc, argv, &i, "--metric", &metric)) ||
            (m = opt_value(argc, argv, &i, "--x", &xaxis)) || (m = opt_value(argc, argv, &i, "--target", &target_s)) ||
            (m = opt_value(argc, argv, &i, "--height", &height_s)) ||
            (m = opt_value(argc, argv, &i, "--x-scale", &xscale_s))) {
            if (m < 0) { free(specs); return 2; }
            continue;
        }
        if (a[0] == '-' && a[1]) { free(specs); return cli_unknown_option("compare", a); }
        specs[nspec++] = argv[i];
    }
    int xmode = !strcmp(xaxis, "step") ? 0 : !strcmp(xaxis, "time") || !strcmp(xaxis, "wall") ? 1
              : !strcmp(xaxis, "hybrid_time") || !strcmp(xaxis, "hybrid") ? 2 : -1;
    if (xmode < 0) { free(specs); return usage_error("compare", "--x wants step, time or hybrid_time, got '%s'", xaxis); }
    int xscale = !strcmp(xscale_s, "linear") ? TUI_X_LINEAR : !strcmp(xscale_s, "log") ? TUI_X_LOG
               : !strcmp(xscale_s, "norm") || !strcmp(xscale_s, "normalised") || !strcmp(xscale_s, "normalized") ? TUI_X_NORM : -1;
    if (xscale < 0) { free(specs); return usage_error("compare", "--x-scale wants linear, log or norm, got '%s'", xscale_s); }
    double target = NAN;
    if (target_s) {
        char *end;
        target = strtod(target_s, &end);
        if (*end || !isfinite(target)) { free(specs); return usage_error("compare", "--target wants a number, got '%s'", target_s); }
    }
    int height = height_s ? atoi(height_s) : 18;
    if (height < 8) { free(specs); return usage_error("compare", "--height wants a number >= 8, got '%s'", height_s); }
    if (last_batch && nspec) {
        int rc = usage_error("compare", "--last-batch picks the runs itself ('%s' is extra)", specs[0]);
        free(specs);
        return rc;
    }
    if (!last_batch && nspec < 1) { free(specs); return usage_error("compare", "which runs? give two or more ids from nnbench list, or --last-batch%s", ""); }
    metric = metric_alias(metric);
    store *s = cli_open_store(db, 0);
    if (!s) { free(specs); return 1; }
    int code = 1;
    long long *ids = NULL;
    size_t n = nspec;
    store_compare *c = NULL;
    if (last_batch) {
        if (store_last_batch(s, &ids, &n)) { fprintf(stderr, "nnbench: %s\n", cli_text(store_error())); goto out; }
    } else if (!(ids = cli_resolve_runs(s, specs, nspec))) {
        goto out;
    }
    store_cmp_opts co = { .all_keys = all_keys, .metric = metric, .target = target };
    if (store_compare_load(s, ids, n, &co, &c)) { fprintf(stderr, "nnbench: %s\n", cli_text(store_error())); goto out; }
    if (!c->have_metric) {
        char **keys;
        size_t nk;
        fprintf(stderr, "nnbench compare: no run has metric '%s'", metric);
        if (!store_metric_keys(s, ids[0], &keys, &nk)) {
            fprintf(stderr, "; run %lld has:", ids[0]);
            for (size_t k = 0; k < nk; k++) fprintf(stderr, " %s", keys[k]);
            store_strings_free(keys, nk);
        }
        fprintf(stderr, "\n");
        code = 2;
        goto out;
    }
    int tw = cli_term_width(), utf8 = cli_use_utf8(), color = cli_use_color() && !no_color;
    if (c->common_name[0]) printf("%s: %zu runs\n", c->common_name, c->n);
    char **lines;
    size_t nl;
    if (tui_compare_lines(c, tw - 1, utf8, all_keys, &lines, &nl)) { fprintf(stderr, "nnbench: out of memory\n"); goto out; }
    for (size_t i = 0; i < nl; i++) printf("%s\n", lines[i]);
    tui_lines_free(lines, nl);

    /* The chart: one line per run, x as asked. */
    tui_series *ser = calloc(n, sizeof *ser);
    double **xs = calloc(n, sizeof *xs);
    char (*legend)[192] = calloc(n, sizeof *legend);
    if (!ser || !xs || !legend) { free(ser); free(xs); free(legend); goto out; }
    for (size_t i = 0; i < n; i++) {
        const store_series *sr = &c->metric[i];
        xs[i] = malloc((sr->n ? sr->n : 1) * sizeof **xs);
        for (size_t p = 0; xs[i] && p < sr->n; p++)
            xs[i][p] = xmode == 0 ? (double)sr->step[p] : xmode == 1 ? sr->wall[p] : sr->hybrid[p];
        tui_compare_legend(c, i, legend[i], sizeof legend[i]);
        ser[i] = (tui_series){ .label = legend[i], .x = xs[i], .y = sr->value, .n = xs[i] ? sr->n : 0 };
    }
    static const char *const xname[3] = { "step", "wall time (s)", "hybrid time (s, simulated)" };
    char title[200], xl[64];
    snprintf(title, sizeof title, "%s against %s%s%s", metric, xscale == TUI_X_NORM ? "fraction of each run's " : "",
             xname[xmode], xscale == TUI_X_LOG ? ", log x" : "");
    snprintf(xl, sizeof xl, "%s%s", xscale == TUI_X_NORM ? "fraction of " : "", xmode == 0 ? "step" : xmode == 1 ? "wall s" : "hybrid s");
    tui_chart_opts o = { .width = tw > 160 ? 160 : tw, .height = height, .utf8 = utf8, .mono = !color,
                         .x_scale = xscale, .x_label = xl, .y_label = metric, .title = title };
    tui_canvas cv;
    printf("\n");
    if (tui_chart_draw(ser, n, &o, &cv) == 0) {
        tui_canvas_print(stdout, &cv, color);
        tui_canvas_free(&cv);
    } else {
        fprintf(stderr, "nnbench compare: the terminal is too small for the chart\n");
    }
    for (size_t i = 0; i < n; i++) free(xs[i]);
    free(xs);
    free(ser);
    free(legend);
    code = 0;
out:
    store_compare_free(c);
    free(ids);
    free(specs);
    store_close(s);
    return code;
}

/* ---- report / export --------------------------------------------------------------- */

int cli_report_write(const char *db_path, const long long *run_ids, size_t n, const char *path)
{
    store *s = cli_open_store(db_path, 0);
    if (!s) return 1;
    int rc = store_report_write(s, run_ids, n, path);
    if (rc) fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
    else fprintf(stderr, "wrote %s (%zu run%s)\n", path, n, n == 1 ? "" : "s");
    store_close(s);
    return rc ? 1 : 0;
}

static const char report_help[] =
    "usage: nnbench report RUN... -o FILE [--db PATH]\n\n"
    "Writes a report of the runs; the format follows FILE's extension:\n"
    "  .md    Markdown tables (runs, differing config, metrics, op profiles, solver, system)\n"
    "  .html  one self-contained page: the same tables plus inline SVG line charts of every\n"
    "         metric against step and against wall time\n"
    "  .json  everything stored about the runs\n"
    "  .csv   the metrics in long format (run,name,variant,key,step,epoch,wall_s,hybrid_s,value)\n";

void cmd_report_help(FILE *f) { fputs(report_help, f); }

static const char export_help[] =
    "usage: nnbench export RUN... -o FILE.csv [--db PATH]\n"
    "       nnbench export RUN... --tensorboard DIR [--db PATH]\n\n"
    "Writes the metrics of the runs as CSV in long format:\n"
    "  run,name,variant,key,step,epoch,wall_s,hybrid_s,value\n"
    "(-o - writes to standard output).\n\n"
    "--tensorboard DIR writes TensorBoard event files instead, one directory per run\n"
    "(DIR/run<ID>-<name>/events.out.tfevents.*): every metric as a scalar, the layer\n"
    "telemetry also as histograms over the layers (see docs/monitoring.md).\n";

void cmd_export_help(FILE *f) { fputs(export_help, f); }

/* export --tensorboard: one event-file directory per run; reads only. */
static int export_tensorboard(const char *db, char **specs, size_t n, const char *dir)
{
    store *s = cli_open_store(db, 0);
    if (!s) return 1;
    long long *ids = cli_resolve_runs(s, specs, n);
    int code = ids ? 0 : 1;
    for (size_t i = 0; ids && i < n; i++) {
        char err[600];
        if (monitor_tb_export(s, ids[i], dir, err, sizeof err)) {
            fprintf(stderr, "nnbench export: run %lld: %s\n", ids[i], cli_text(err));
            code = 1;
        }
    }
    if (!code) fprintf(stderr, "wrote TensorBoard event files under %s (%zu run%s)\n", dir, n, n == 1 ? "" : "s");
    free(ids);
    store_close(s);
    return code;
}

static int report_like(int argc, char **argv, int export)
{
    const char *cmd = export ? "export" : "report";
    const char *db = NULL, *out = NULL, *tb = NULL;
    char **specs = calloc((size_t)argc, sizeof *specs);
    size_t n = 0;
    if (!specs) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(export ? export_help : report_help, stdout); free(specs); return 0; }
        if ((m = opt_value(argc, argv, &i, "--db", &db)) || (m = opt_value(argc, argv, &i, "-o", &out)) ||
            (m = opt_value(argc, argv, &i, "--output", &out)) ||
            (export && (m = opt_value(argc, argv, &i, "--tensorboard", &tb)))) {
            if (m < 0) { free(specs); return 2; }
            continue;
        }
        if (a[0] == '-' && a[1]) { free(specs); return cli_unknown_option(cmd, a); }
        specs[n++] = argv[i];
    }
    if (!n) { free(specs); return usage_error(cmd, "which runs? give ids from nnbench list%s", ""); }
    if (tb && out) { free(specs); return usage_error(cmd, "-o and --tensorboard: give one of them%s", ""); }
    if (tb) {
        int code = export_tensorboard(db, specs, n, tb);
        free(specs);
        return code;
    }
    if (!out) { free(specs); return usage_error(cmd, "where to? give -o FILE%s", export ? ".csv (or --tensorboard DIR)" : ".{md,html,json,csv}"); }
    if (!export) {
        const char *ext = strrchr(out, '.');
        if (!ext || (strcasecmp(ext, ".md") && strcasecmp(ext, ".html") && strcasecmp(ext, ".htm") &&
                     strcasecmp(ext, ".json") && strcasecmp(ext, ".csv"))) {
            free(specs);
            return usage_error(cmd, "cannot tell the format of '%s': use .md, .html, .json or .csv", out);
        }
    }
    store *s = cli_open_store(db, 0);
    if (!s) { free(specs); return 1; }
    long long *ids = cli_resolve_runs(s, specs, n);
    int code = 1;
    if (ids) {
        int rc = 0;
        if (export && !strcmp(out, "-")) {
            rc = store_report_csv(s, ids, n, stdout);
        } else if (export) {
            const char *ext = strrchr(out, '.');
            if (!ext || strcasecmp(ext, ".csv"))
                fprintf(stderr, "nnbench export: note: writing CSV to '%s'\n", out);
            rc = store_export_csv(s, ids, n, out); /* never the database; temp file + rename */
        } else {
            rc = store_report_write(s, ids, n, out);
        }
        if (rc) fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
        if (!rc && strcmp(out, "-")) fprintf(stderr, "wrote %s (%zu run%s)\n", out, n, n == 1 ? "" : "s");
        code = rc ? 1 : 0;
    }
    free(ids);
    free(specs);
    store_close(s);
    return code;
}

int cmd_report(int argc, char **argv) { return report_like(argc, argv, 0); }
int cmd_export(int argc, char **argv) { return report_like(argc, argv, 1); }

/* ---- delete ------------------------------------------------------------------------ */

static const char delete_help[] =
    "usage: nnbench delete RUN... [--yes] [--force] [--db PATH]\n\n"
    "Deletes runs and everything stored with them. Asks first on a terminal; with standard\n"
    "input not a terminal it refuses unless --yes is given. A run still being written by a\n"
    "live process is refused unless --force (its writer then stores nothing more of it).\n"
    "Run ids are never reused.\n";

void cmd_delete_help(FILE *f) { fputs(delete_help, f); }

int cmd_delete(int argc, char **argv)
{
    const char *db = NULL;
    int yes = 0, force = 0;
    char **specs = calloc((size_t)argc, sizeof *specs);
    size_t n = 0;
    if (!specs) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(delete_help, stdout); free(specs); return 0; }
        if (!strcmp(a, "--yes") || !strcmp(a, "-y")) { yes = 1; continue; }
        if (!strcmp(a, "--force")) { force = 1; continue; }
        if ((m = opt_value(argc, argv, &i, "--db", &db))) {
            if (m < 0) { free(specs); return 2; }
            continue;
        }
        if (a[0] == '-' && a[1]) { free(specs); return cli_unknown_option("delete", a); }
        specs[n++] = argv[i];
    }
    if (!n) { free(specs); return usage_error("delete", "which runs? give ids from nnbench list%s", ""); }
    if (!yes && !isatty(STDIN_FILENO)) {
        free(specs);
        fprintf(stderr, "nnbench delete: standard input is not a terminal, so I cannot ask; "
                        "add --yes to delete without asking\n");
        return 2;
    }
    store *s = cli_open_store(db, STORE_OPEN_WRITE);
    if (!s) { free(specs); return 1; }
    int code = 1;
    long long *ids = cli_resolve_runs(s, specs, n);
    if (!ids) goto out;
    if (!yes) {
        printf("Delete %zu run%s:", n, n == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++) {
            store_run r;
            if (!store_run_get(s, ids[i], &r)) {
                char nm[200];
                run_name(&r, nm, sizeof nm);
                printf("%s #%lld %s", i ? "," : "", r.id, nm);
                store_run_clear(&r);
            }
        }
        printf("? [y/N] ");
        fflush(stdout);
        char line[32];
        if (!fgets(line, sizeof line, stdin) || (line[0] != 'y' && line[0] != 'Y')) {
            printf("Nothing deleted.\n");
            code = 0;
            goto out;
        }
    }
    if (store_runs_delete(s, ids, n, force ? STORE_DELETE_FORCE : 0)) {
        fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
        goto out;
    }
    printf("Deleted %zu run%s.\n", n, n == 1 ? "" : "s");
    code = 0;
out:
    free(ids);
    free(specs);
    store_close(s);
    return code;
}
