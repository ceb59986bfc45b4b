/* cmd_store.c — the commands that read the database: list, show, compare (table + terminal
 * chart), report, export, delete. */
#include <errno.h>
#include <stddef.h>
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

/* ---- list -------------------------------------------------------------------------- */

static const char list_help[] =
    "usage: nnbench list [--status S] [--grep TEXT] [--sort COLUMN] [--desc] [--limit N] [--json] [--db PATH]\n\n"
    "One row per stored run: id, name/variant, status, optimizer, dataset, final train loss,\n"
    "best test accuracy, duration and start time, fitted to the terminal's width (names cut\n"
    "in the middle; the last columns go first).\n\n"
    "  --status S      running | finished | failed | diverged | interrupted | crashed\n"
    "  --grep TEXT     runs whose name, variant, optimizer, dataset, file or model contain TEXT\n"
    "  --sort COLUMN   id name variant status optimizer dataset loss acc duration started\n"
    "                  steps samples_per_s (default id); --desc reverses\n"
    "  --limit N       at most N rows (without --sort: the newest N)\n"
    "  --json          the runs' stored rows as JSON (every field, no table)\n"
    "  --db PATH       the database (default $NNBENCH_DB or ./nnbench.db)\n";

void cmd_list_help(FILE *f) { fputs(list_help, f); }

typedef struct { const char *db, *status, *grep, *sort, *limit; int desc, json; } list_opts;
static const cli_opt list_opt[] = {
    CLI_OPT_VALUE("--db", NULL, list_opts, db), CLI_OPT_VALUE("--status", NULL, list_opts, status),
    CLI_OPT_VALUE("--grep", NULL, list_opts, grep), CLI_OPT_VALUE("--sort", NULL, list_opts, sort),
    CLI_OPT_VALUE("--limit", NULL, list_opts, limit), CLI_OPT_FLAG("--desc", NULL, list_opts, desc),
    CLI_OPT_FLAG("--json", NULL, list_opts, json),
};
const cli_spec cmd_list_spec = { "list", cmd_list_help, list_opt, CLI_N(list_opt) };

/* list's --status, --limit and --sort into a store filter; 0, or the usage error's status. */
static int list_filter(const list_opts *o, store_list_filter *f)
{
    *f = (store_list_filter){ .status = -1, .grep = o->grep, .sort = o->sort, .desc = o->desc };
    if (o->status) {
        store_run_status st;
        if (store_status_parse(o->status, &st)) {
            const char *names[STORE_RUN_N_STATUS];
            for (int i = 0; i < STORE_RUN_N_STATUS; i++) names[i] = store_status_name((store_run_status)i);
            return cli_value_error("list", "--status", o->status, names, STORE_RUN_N_STATUS);
        }
        f->status = (int)st;
    }
    if (o->limit) {
        char *end;
        f->limit = strtol(o->limit, &end, 10);
        if (*end || f->limit <= 0) return cli_usage_error("list", "--limit wants a positive number, got '%s'", o->limit);
    }
    if (o->sort) {
        size_t nc = 0;
        int ok = 0;
        for (; store_sort_columns[nc]; nc++) ok |= !strcasecmp(o->sort, store_sort_columns[nc]);
        if (!ok) return cli_value_error("list", "--sort", o->sort, store_sort_columns, nc);
    }
    return 0;
}

int cmd_list(int argc, char **argv)
{
    list_opts o = { 0 };
    int n_pos, rc = cli_parse(&cmd_list_spec, &o, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    if (n_pos) return cli_usage_error("list", "unexpected argument '%s'", argv[1]);
    const char *db = o.db, *sort = o.sort;
    int desc = o.desc;
    store_list_filter f;
    if ((rc = list_filter(&o, &f))) return rc;
    const char *path = cli_db_path(db);
    store *s;
    rc = store_open(path, 0, &s);
    if (rc == STORE_ENOTFOUND && o.json) { store_runs_json(path, NULL, 0, stdout); return 0; }
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
    if (o.json) { store_runs_json(path, runs, n, stdout); free(runs); return 0; }
    if (!n) {
        if (!total) printf("No runs in %s yet.\nMake one with:  nnbench run samples/spirals-mlp.ini%s%s\n",
                           path, db ? " --db " : "", db ? db : "");
        else printf("No run matches (%lld run%s in %s).\n", total, total == 1 ? "" : "s", path);
        free(runs);
        return 0;
    }
    /* Fitted to the terminal (80 columns fit): the name keeps up to 24 cells and is cut in
     * the middle; other columns shrink, then drop from the right. */
    enum { NC = 9 };
    static const char *const head[NC] = { "ID", "NAME/VARIANT", "STATUS", "OPTIMIZER", "DATASET",
                                          "LOSS", "BEST ACC", "DURATION", "STARTED" };
    static const int right[NC] = { 1, 0, 0, 0, 0, 1, 1, 1, 0 };
    /* 0: never shrunk (numbers are not cut); 80 columns: 2+19+8+6+5+9+8+8 and gaps */
    static const int mins[NC] = { 0, 19, 8, 6, 5, 0, 0, 0, 16 };
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
    /* Whole names while up to the duration fits; else names cut to 19 cells. */
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
    "usage: nnbench show RUN [--db PATH] [--ops N] [--json]\n\n"
    "Everything about one run: config (resolved keys), system, final and best metrics, the top\n"
    "ops by self time (--ops N rows, default 10; % bw and bound from the calibration kept\n"
    "with the run, and the warnings of a profiled run) and the Newton solver summary if any.\n"
    "RUN is an id from nnbench list, or 'last'. --json: everything stored about the run\n"
    "(config, system, metric series, ops, profile, solver events) as the JSON report has it.\n";

void cmd_show_help(FILE *f) { fputs(show_help, f); }

static void print_solver(const store_solver_event *ev, size_t n, const char *indent)
{
    store_solver_summary sum;
    char lines[3][256];
    store_solver_summarize(ev, n, &sum);
    int k = store_solver_summary_lines(&sum, lines);
    for (int i = 0; i < k; i++) printf("%s%s\n", indent, lines[i]);
}

/* The top ops (the op-table model, as everywhere), with "% bw" and "bound" from the
 * calibration stored when the run started, the warnings of its stored profile (the ones
 * `run --profile` printed) and, for a data-parallel run, the load imbalance in one line. */
static void print_ops(store *s, const store_run *r, const store_kv *sys, size_t nsys, const store_op_row *ops,
                      size_t n, size_t max_rows)
{
    store_profile prof;
    int have = !store_profile_get(s, r->id, &prof);
    store_run_perf pf;
    store_run_perf_get(r, sys, nsys, have ? &prof : NULL, &pf);
    store_op_row *all = NULL;
    size_t na = 0;
    prof_balance bal;
    prof_balance_get(NULL, 0, &bal);
    char warn[1024] = "";
    if (!store_op_stats_get(s, r->id, -1, &all, &na)) {
        prof_balance_get(all, na, &bal);
        store_run_warnings(all, na, have ? &prof : NULL, &pf, warn, sizeof warn);
    }
    free(all);
    prof_table t;
    store_op_table_init(&t, ops, n, have ? &prof : NULL, &pf);
    t.ranks = &bal;
    prof_table_print(stdout, &t, max_rows, 28, "  ");
    if (max_rows < n) printf("  (%zu of %zu ops shown; --ops N for more)\n", max_rows, n);
    char a[64];
    if (have) {
        printf("  profiler: %lld events, overhead %s", (long long)prof.events, prof_fmt_duration(a, sizeof a, prof.overhead_ns * 1e-9));
        if (prof.counters_note[0]) printf("; %s", cli_text(prof.counters_note));
        printf("\n");
    }
    char line[400];
    if (store_run_perf_line(&t, &pf, line, sizeof line)[0]) printf("  %s\n", line);
    for (char *w = warn, *nl; *w && (nl = strchr(w, '\n')); w = nl + 1) {
        *nl = 0;   /* names come from the database: made visible */
        printf("  Warning: %s\n", cli_text(w));
    }
    if (prof_balance_line(&bal, line, sizeof line)[0]) printf("  %s\n", line);
}

/* Which of a stored run's resolved keys are not defaults: set[i] = 1 when its file, its
 * variant or --set gave params[i] (a stored value the file alone does not resolve to). The
 * file is read again from the text stored with the run. 0 ok; -1 when that text no longer
 * loads (set[] then all 1). */
static int config_set_keys(store *s, long long run, const store_kv *params, size_t n, int *set)
{
    for (size_t i = 0; i < n; i++) set[i] = 1;
    store_run r;
    store_run_init(&r);
    eng_experiment *ex = NULL;
    int rc = -1;
    if (!store_run_get(s, run, &r) && r.exp_text &&
        !eng_experiment_load_text(r.exp_path, r.exp_text, NULL, 0, &ex) &&
        (!r.variant[0] || !eng_experiment_select(ex, r.variant)) && ex->n_variants == 1) {
        const eng_config *cfg = &ex->variants[0];
        for (size_t i = 0; i < n; i++) {
            const eng_kv *kv = NULL;
            for (size_t k = 0; k < cfg->n_kv && !kv; k++)
                if (!strcmp(cfg->kv[k].key, params[i].key)) kv = &cfg->kv[k];
            /* line 0: the key's default; a stored value the file does not give: --set */
            set[i] = !kv || kv->line != 0 || strcmp(kv->value, params[i].value) != 0;
        }
        rc = 0;
    }
    eng_experiment_free(ex);
    store_run_clear(&r);
    return rc;
}

/* The resolved keys, those the file, its variant or --set gave first (marked *), then the
 * defaults: a run sets a dozen of its ~120 keys. */
static void print_config(store *s, long long id, const store_kv *params, size_t np)
{
    int *set = calloc(np ? np : 1, sizeof *set);
    if (!set) { fprintf(stderr, "nnbench: out of memory\n"); return; }
    int known = !config_set_keys(s, id, params, np, set);
    size_t n_set = 0;
    for (size_t i = 0; i < np; i++) n_set += (size_t)set[i];
    if (known) printf("\nconfig (* set by the file, its variant or --set: %zu of %zu keys; then the defaults)\n", n_set, np);
    else printf("\nconfig (the stored file no longer loads: defaults cannot be told apart)\n");
    for (int pass = 1; pass >= 0; pass--)
        for (size_t i = 0; i < np; i++)
            if (set[i] == pass)
                printf("%s %-32s %s\n", known && pass ? "*" : " ", cli_text(params[i].key), cli_text(params[i].value));
    if (!np) printf("  (no keys stored)\n");
    free(set);
}

typedef struct { const char *db, *ops; int json; } show_opts;
static const cli_opt show_opt[] = { CLI_OPT_VALUE("--db", NULL, show_opts, db), CLI_OPT_VALUE("--ops", NULL, show_opts, ops),
                                    CLI_OPT_FLAG("--json", NULL, show_opts, json) };
const cli_spec cmd_show_spec = { "show", cmd_show_help, show_opt, CLI_N(show_opt) };

int cmd_show(int argc, char **argv)
{
    show_opts o = { 0 };
    int n_pos, rc = cli_parse(&cmd_show_spec, &o, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    if (n_pos > 1) return cli_usage_error("show", "one run at a time ('%s' is extra); use compare for several", argv[2]);
    const char *db = o.db, *spec = n_pos ? argv[1] : NULL, *ops_s = o.ops;
    if (!spec) return cli_usage_error("show", "which run? give an id from nnbench list%s", "");
    long max_ops = ops_s ? atol(ops_s) : 10;
    if (max_ops <= 0) return cli_usage_error("show", "--ops wants a positive number, got '%s'", ops_s);
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
    int rrc = store_run_resolve(s, spec, &id);
    if (rrc) {
        /* 'abc' is a usage error (2); a well-formed id that is not stored is not (1) */
        fprintf(stderr, "nnbench show: %s\n", cli_text(store_error()));
        code = rrc == STORE_EINVAL ? 2 : 1;
        goto out;
    }
    if (o.json) {
        if (store_report_json(s, &id, 1, stdout)) fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
        else code = 0;
        goto out;
    }
    if (store_run_get(s, id, &r) || store_params_get(s, id, &params, &np) ||
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

    print_config(s, id, params, np);
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
        print_ops(s, &r, sys, ns, ops, nops, (size_t)max_ops);
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
    "                       [--no-color] [--json] [--db PATH]\n\n"
    "A side-by-side table, one column per run (the same rows and words as the workbench's\n"
    "Compare screen and the reports): results; wall time, quantum time (simulated), hybrid\n"
    "time (simulated) and steps / time to the target on both clocks; the config keys that\n"
    "differ (--all-keys: all); the top ops. Then a terminal line chart of one metric.\n"
    "Runs that differ in data.seq_len (samples/attention-scaling.ini) add the scaling view:\n"
    "step time, attention time and memory, peak memory per n and variant, each with its\n"
    "fitted log-log exponent, and log-log charts of the attention's time and memory.\n\n"
    "  --last-batch  the runs of the newest batch (one `nnbench run`, or one all-variants New run)\n"
    "  --metric KEY  train_loss (also 'loss'), test_loss, train_acc, test_acc ('acc'), lr, ...\n"
    "  --x AXIS      step (default), time (wall seconds) or hybrid_time (Q-Newton clock, simulated)\n"
    "  --x-scale S   linear (default), log, or norm: each run's x divided by its own last x, so\n"
    "                a 72 ms run and a 3 s run both span the chart\n"
    "  --target V    steps/time until the metric first reaches V (<= for losses, >= otherwise);\n"
    "                default: each run's experiment target_loss for train_loss\n"
    "  --no-color    no colours (also NO_COLOR): series told apart by marker glyphs\n"
    "  --json        everything stored about the runs as JSON (the JSON report; two runs: their\n"
    "                op diff too) instead of the table and chart\n";

void cmd_compare_help(FILE *f) { fputs(compare_help, f); }

static const char *metric_alias(const char *m)
{
    if (!strcmp(m, "loss")) return "train_loss";
    if (!strcmp(m, "acc") || !strcmp(m, "accuracy")) return "test_acc";
    return m;
}

const char **cli_one_run_set_keys(store *s, long long id, store_kv **params, size_t *n_set)
{
    size_t np = 0;
    *n_set = 0;
    if (store_params_get(s, id, params, &np)) return NULL;
    int *set = calloc(np ? np : 1, sizeof *set);
    const char **keys = calloc(np ? np : 1, sizeof *keys);
    if (set && keys && !config_set_keys(s, id, *params, np, set)) {
        for (size_t i = 0; i < np; i++) if (set[i]) keys[(*n_set)++] = (*params)[i].key;
    } else {
        free(keys);
        keys = NULL;
    }
    free(set);
    return keys;
}

typedef struct { const char *db, *metric, *x, *target, *height, *x_scale; int all_keys, last_batch, no_color, json; } compare_opts;
static const cli_opt compare_opt[] = {
    CLI_OPT_VALUE("--db", NULL, compare_opts, db), CLI_OPT_VALUE("--metric", NULL, compare_opts, metric),
    CLI_OPT_VALUE("--x", NULL, compare_opts, x), CLI_OPT_VALUE("--target", NULL, compare_opts, target),
    CLI_OPT_VALUE("--height", NULL, compare_opts, height), CLI_OPT_VALUE("--x-scale", NULL, compare_opts, x_scale),
    CLI_OPT_FLAG("--all-keys", NULL, compare_opts, all_keys), CLI_OPT_FLAG("--last-batch", NULL, compare_opts, last_batch),
    CLI_OPT_FLAG("--no-color", NULL, compare_opts, no_color), CLI_OPT_FLAG("--json", NULL, compare_opts, json),
};
const cli_spec cmd_compare_spec = { "compare", cmd_compare_help, compare_opt, CLI_N(compare_opt) };

/* The scaling view when the runs hold two sizes or more (docs/attention.md): a table per
 * measure with the fitted exponents, then log-log charts of the attention's time and
 * memory, one line per variant. */
static int print_scaling(const store_compare *c, int tw, int utf8, int color, int height)
{
    store_scaling *sc;
    if (store_scaling_build(c, &sc)) { fprintf(stderr, "nnbench: %s\n", cli_text(store_error())); return 1; }
    char **lines = NULL;
    size_t nl = 0;
    int rc = sc->n_xs < 2 ? 0 : tui_scaling_lines(sc, tw - 1, utf8, &lines, &nl);
    for (size_t i = 0; i < nl; i++) printf("%s\n", lines[i]);
    tui_lines_free(lines, nl);
    tui_series *ser = calloc(sc->n_series ? sc->n_series : 1, sizeof *ser);
    char (*labels)[96] = calloc(sc->n_series ? sc->n_series : 1, sizeof *labels);
    static const store_scale_measure shown[] = { STORE_SCALE_ATTN, STORE_SCALE_ATTN_MEM };
    for (size_t k = 0; !rc && sc->n_xs >= 2 && ser && labels && k < sizeof shown / sizeof *shown; k++) {
        size_t ns = tui_scaling_series(sc, shown[k], ser, labels, sc->n_series);
        char title[160];
        tui_chart_opts o = { .width = tw > 160 ? 160 : tw, .height = height, .utf8 = utf8, .mono = !color };
        tui_scaling_chart_opts(shown[k], &o, title, sizeof title);
        tui_canvas cv;
        printf("\n");
        if (tui_chart_draw(ser, ns, &o, &cv) == 0) {
            tui_canvas_print(stdout, &cv, color);
            tui_canvas_free(&cv);
        }
    }
    if (sc->n_xs >= 2 && (!ser || !labels)) rc = -1;
    free(ser);
    free(labels);
    store_scaling_free(sc);
    if (rc) fprintf(stderr, "nnbench: out of memory\n");
    return rc ? 1 : 0;
}

int cmd_compare(int argc, char **argv)
{
    compare_opts opt = { .metric = "train_loss", .x = "step", .x_scale = "linear" };
    int n_pos, rc = cli_parse(&cmd_compare_spec, &opt, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    const char *db = opt.db, *metric = opt.metric, *xaxis = opt.x, *target_s = opt.target, *height_s = opt.height;
    const char *xscale_s = opt.x_scale;
    int all_keys = opt.all_keys, last_batch = opt.last_batch, no_color = opt.no_color;
    char **specs = argv + 1;
    size_t nspec = (size_t)n_pos;
    int xmode = !strcmp(xaxis, "step") ? 0 : !strcmp(xaxis, "time") || !strcmp(xaxis, "wall") ? 1
              : !strcmp(xaxis, "hybrid_time") || !strcmp(xaxis, "hybrid") ? 2 : -1;
    static const char *const axes[] = { "step", "time", "hybrid_time" }, *const scales[] = { "linear", "log", "norm" };
    if (xmode < 0) return cli_value_error("compare", "--x", xaxis, axes, 3);
    int xscale = !strcmp(xscale_s, "linear") ? TUI_X_LINEAR : !strcmp(xscale_s, "log") ? TUI_X_LOG
               : !strcmp(xscale_s, "norm") || !strcmp(xscale_s, "normalised") || !strcmp(xscale_s, "normalized") ? TUI_X_NORM : -1;
    if (xscale < 0) return cli_value_error("compare", "--x-scale", xscale_s, scales, 3);
    double target = NAN;
    if (target_s) {
        char *end;
        target = strtod(target_s, &end);
        if (*end || !isfinite(target)) { return cli_usage_error("compare", "--target wants a number, got '%s'", target_s); }
    }
    int height = height_s ? atoi(height_s) : 18;
    if (height < 8) { return cli_usage_error("compare", "--height wants a number >= 8, got '%s'", height_s); }
    if (last_batch && nspec) {
        return cli_usage_error("compare", "--last-batch picks the runs itself ('%s' is extra)", specs[0]);
    }
    if (!last_batch && nspec < 1) { return cli_usage_error("compare", "which runs? give two or more ids from nnbench list, or --last-batch%s", ""); }
    metric = metric_alias(metric);
    store *s = cli_open_store(db, 0);
    if (!s) { return 1; }
    int code = 1;
    long long *ids = NULL;
    size_t n = nspec;
    store_compare *c = NULL;
    store_kv *params = NULL;
    const char **set_keys = NULL;
    if (last_batch) {
        if (store_last_batch(s, &ids, &n)) { fprintf(stderr, "nnbench: %s\n", cli_text(store_error())); goto out; }
    } else if (!(ids = cli_resolve_runs(s, specs, nspec))) {
        goto out;
    }
    if (opt.json) {
        if (store_report_json(s, ids, n, stdout)) fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
        else code = 0;
        goto out;
    }
    store_cmp_opts co = { .all_keys = all_keys, .metric = metric, .target = target };
    /* One run: nothing differs; its keys not at their default are what tells it apart
     * (with --all-keys: first, marked). */
    if (n == 1) co.set_keys = set_keys = cli_one_run_set_keys(s, ids[0], &params, &co.n_set_keys);
    if (store_compare_load(s, ids, n, &co, &c)) { fprintf(stderr, "nnbench: %s\n", cli_text(store_error())); goto out; }
    if (!c->have_metric) {
        char **keys;
        size_t nk;
        fprintf(stderr, "nnbench compare: no run has metric '%s'", metric);
        if (!store_metric_keys(s, ids[0], &keys, &nk)) {
            const char *near = cli_suggest(metric, (const char *const *)keys, nk);
            if (near) fprintf(stderr, "; did you mean '%s'?", near);
            fprintf(stderr, " (run %lld has:", ids[0]);
            for (size_t k = 0; k < nk; k++) fprintf(stderr, " %s", keys[k]);
            fprintf(stderr, ")");
            store_strings_free(keys, nk);
        }
        fprintf(stderr, "\n");
        code = 2;
        goto out;
    }
    int tw = cli_term_width(), utf8 = cli_use_utf8(), color = cli_use_color() && !no_color;
    if (c->common_name[0]) printf("%s: %zu run%s\n", c->common_name, c->n, c->n == 1 ? "" : "s");
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
    code = print_scaling(c, tw, utf8, color, height);
out:
    store_compare_free(c);
    free(set_keys);
    free(params);
    free(ids);
    store_close(s);
    return code;
}

/* ---- report / export --------------------------------------------------------------- */

static const char report_help[] =
    "usage: nnbench report RUN... | --last-batch  -o FILE [--db PATH]\n\n"
    "Writes a report of the runs; the format follows FILE's extension:\n"
    "  .md    Markdown tables (runs, differing config, metrics, op profiles, solver, system)\n"
    "  .html  one self-contained page: the same tables plus inline SVG line charts of every\n"
    "         metric against step and against wall time\n"
    "  .json  everything stored about the runs\n"
    "  .csv   the metrics in long format (run,name,variant,key,step,epoch,wall_s,hybrid_s,value)\n";

void cmd_report_help(FILE *f) { fputs(report_help, f); }

static const char export_help[] =
    "usage: nnbench export RUN... | --last-batch  -o FILE.csv [--db PATH]\n"
    "       nnbench export RUN... | --last-batch  --tensorboard DIR [--db PATH]\n\n"
    "Writes the metrics of the runs as CSV in long format:\n"
    "  run,name,variant,key,step,epoch,wall_s,hybrid_s,value\n"
    "(-o - writes to standard output).\n\n"
    "--tensorboard DIR writes TensorBoard event files instead, one directory per run\n"
    "(DIR/run<ID>-<name>/events.out.tfevents.*): every metric as a scalar, the layer\n"
    "telemetry also as histograms over the layers (see docs/monitoring.md).\n";

void cmd_export_help(FILE *f) { fputs(export_help, f); }

/* export --tensorboard: one event-file directory per run; reads only. */
static int export_tensorboard(store *s, const long long *ids, size_t n, const char *dir)
{
    int code = 0;
    for (size_t i = 0; i < n; i++) {
        char err[600];
        if (monitor_tb_export(s, ids[i], dir, err, sizeof err)) {
            fprintf(stderr, "nnbench export: run %lld: %s\n", ids[i], cli_text(err));
            code = 1;
        }
    }
    if (!code) fprintf(stderr, "wrote TensorBoard event files under %s (%zu run%s)\n", dir, n, n == 1 ? "" : "s");
    return code;
}

typedef struct { const char *db, *out, *tb; int last_batch; } report_opts;
static const cli_opt report_opt[] = { CLI_OPT_VALUE("--db", NULL, report_opts, db), CLI_OPT_VALUE("--output", "-o", report_opts, out),
                                      CLI_OPT_FLAG("--last-batch", NULL, report_opts, last_batch) };
const cli_spec cmd_report_spec = { "report", cmd_report_help, report_opt, CLI_N(report_opt) };
static const cli_opt export_opt[] = { CLI_OPT_VALUE("--db", NULL, report_opts, db), CLI_OPT_VALUE("--output", "-o", report_opts, out),
                                      CLI_OPT_VALUE("--tensorboard", NULL, report_opts, tb),
                                      CLI_OPT_FLAG("--last-batch", NULL, report_opts, last_batch) };
const cli_spec cmd_export_spec = { "export", cmd_export_help, export_opt, CLI_N(export_opt) };

static int report_like(int argc, char **argv, int export)
{
    const char *cmd = export ? "export" : "report";
    report_opts o = { 0 };
    int n_pos, rc = cli_parse(export ? &cmd_export_spec : &cmd_report_spec, &o, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    const char *db = o.db, *out = o.out;
    char **specs = argv + 1;
    size_t n = (size_t)n_pos;
    if (o.last_batch && n) return cli_usage_error(cmd, "--last-batch picks the runs itself ('%s' is extra)", specs[0]);
    if (!n && !o.last_batch) { return cli_usage_error(cmd, "which runs? give ids from nnbench list, or --last-batch%s", ""); }
    if (o.tb && out) return cli_usage_error(cmd, "-o and --tensorboard: give one of them%s", "");
    if (!out && !o.tb) { return cli_usage_error(cmd, "where to? give -o FILE%s", export ? ".csv (or --tensorboard DIR)" : ".{md,html,json,csv}"); }
    if (!export && out) {
        const char *ext = strrchr(out, '.');
        if (!ext || (strcasecmp(ext, ".md") && strcasecmp(ext, ".html") && strcasecmp(ext, ".htm") &&
                     strcasecmp(ext, ".json") && strcasecmp(ext, ".csv"))) {
            return cli_usage_error(cmd, "cannot tell the format of '%s': use .md, .html, .json or .csv", out);
        }
    }
    store *s = cli_open_store(db, 0);
    if (!s) { return 1; }
    long long *ids = NULL;
    if (o.last_batch && store_last_batch(s, &ids, &n)) {
        fprintf(stderr, "nnbench: %s\n", cli_text(store_error()));
        ids = NULL;
    } else if (!o.last_batch) {
        ids = cli_resolve_runs(s, specs, n);
    }
    int code = 1;
    if (ids && o.tb) {
        code = export_tensorboard(s, ids, n, o.tb);
    } else if (ids) {
        rc = 0;
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

typedef struct { const char *db; int yes, force; } delete_opts;
static const cli_opt delete_opt[] = {
    CLI_OPT_VALUE("--db", NULL, delete_opts, db), CLI_OPT_FLAG("--yes", "-y", delete_opts, yes),
    CLI_OPT_FLAG("--force", NULL, delete_opts, force),
};
const cli_spec cmd_delete_spec = { "delete", cmd_delete_help, delete_opt, CLI_N(delete_opt) };

int cmd_delete(int argc, char **argv)
{
    delete_opts o = { 0 };
    int n_pos, rc = cli_parse(&cmd_delete_spec, &o, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    const char *db = o.db;
    int yes = o.yes, force = o.force;
    char **specs = argv + 1;
    size_t n = (size_t)n_pos;
    if (!n) { return cli_usage_error("delete", "which runs? give ids from nnbench list%s", ""); }
    if (!yes && !isatty(STDIN_FILENO)) {
        fprintf(stderr, "nnbench delete: standard input is not a terminal, so I cannot ask; "
                        "add --yes to delete without asking\n");
        return 2;
    }
    store *s = cli_open_store(db, STORE_OPEN_WRITE);
    if (!s) { return 1; }
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
    store_close(s);
    return code;
}
