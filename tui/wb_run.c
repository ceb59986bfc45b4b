/* wb_run.c — the Run screen of the workbench: one stored run in tabs (Curves, Profile,
 * Solver, Config, System, Layers, Int8), read from the store; its state lives in its panel. */
#include "wb.h"

#include <curses.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* A stored metric with its x axes as doubles, ready for the chart. */
typedef struct {
    store_series s;
    double *xstep;
} wb_metric;

static void metric_free(wb_metric *m)
{
    store_series_free(&m->s);
    free(m->xstep);
    memset(m, 0, sizeof *m);
}

static void metric_load(store *db, long long id, const char *key, wb_metric *m)
{
    memset(m, 0, sizeof *m);
    if (store_metric_get(db, id, key, &m->s)) { memset(&m->s, 0, sizeof m->s); return; }
    m->xstep = malloc((m->s.n ? m->s.n : 1) * sizeof(double));
    if (!m->xstep) { store_series_free(&m->s); m->s.n = 0; return; }
    for (size_t i = 0; i < m->s.n; i++) m->xstep[i] = (double)m->s.step[i];
}

/* ---- Run screen -------------------------------------------------------------------- */

enum { TAB_CURVES, TAB_PROFILE, TAB_SOLVER, TAB_CONFIG, TAB_SYSTEM, TAB_LAYERS, TAB_INT8, TAB_N };
static const char *const tab_names[TAB_N] = { "Curves", "Profile", "Solver", "Config", "System", "Layers", "Int8" };

/* The Run screen's state lives in its panel (wb_run_panel.st), made when the screen opens
 * and freed when it is left; rv names it. */
#define SPS_N 16
typedef struct {
    long long id;
    int have;
    store_run run;
    wb_metric m[4];
    store_op_row *ops;       /* the Profile tab's rows, grouped as group says */
    size_t n_ops;
    store_op_row *scopes;    /* every stored row (ops, phases, step), for the groupings */
    size_t n_scopes;
    int group;               /* Profile rows: 0 op and layer, 1 op, 2 layer, 3 phase (b) */
    /* samples/s of a running run, one reading per new step count the store showed (the
     * store keeps the latest only): the summary's sparkline; whoever runs it */
    double sps[SPS_N];
    int n_sps;
    long sps_step;
    char find[128];          /* the Config/System tabs' last search (/) */
    store_profile prof;
    int have_prof;
    store_run_perf perf;     /* calibration and machine facts stored with the run */
    char warnings[1024];     /* store_run_warnings: what `run --profile` warned, one per line */
    store_solver_event *ev;
    size_t n_ev;
    char **cfg, **sys;       /* text of the Config and System tabs */
    size_t n_cfg, n_sys;
    int tab, scroll;
    int page;                /* rows of the scrolling part, as last drawn */
    int op_sort, op_desc;    /* a prof_sort; 1: reversed */
    int rank_view;           /* Profile tab of a data-parallel run: -1 every rank, grouped; k: rank k */
    prof_balance balance;    /* across ranks, from every kind of row */
    wb_layers_view layers;   /* the Layers tab */
    wb_quant_view quant;     /* the Int8 tab */
} run_state;
#define rv (*(run_state *)wb_run_panel.st)

/* The Profile tab's groupings (b): as stored (each op in each layer), then the rows of
 * `run --profile-by op|layer|phase`, made from the stored rows by the profiler's one
 * grouping (prof_rows_group). */
static const prof_group group_by[4] = { PROF_BY_SCOPE, PROF_BY_OP, PROF_BY_LAYER, PROF_BY_PHASE };
static const char *const group_names[4] = { "op and layer", "op", "layer", "phase" };

static void profile_regroup(wb_app *a)
{
    store_op_row *g = NULL;
    size_t n = 0;
    if (prof_rows_group(rv.scopes, rv.n_scopes, group_by[rv.group], &g, &n)) {
        wb_message(a, "%s", prof_error());
        return;
    }
    if (group_by[rv.group] == PROF_BY_SCOPE) {   /* as stored: the op rows only */
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (g[i].kind == PROF_OP) g[m++] = g[i];
        n = m;
    }
    free(rv.ops);
    rv.ops = g;
    rv.n_ops = n;
}

static void run_unload(void)
{
    store_run_clear(&rv.run);
    for (int i = 0; i < 4; i++) metric_free(&rv.m[i]);
    free(rv.ops);
    free(rv.scopes);
    free(rv.ev);
    rv.ops = NULL; rv.scopes = NULL; rv.ev = NULL; rv.n_ops = rv.n_scopes = rv.n_ev = 0;
    rv.warnings[0] = 0;
    memset(&rv.perf, 0, sizeof rv.perf);
    tui_lines_clear(&rv.cfg, &rv.n_cfg);
    tui_lines_clear(&rv.sys, &rv.n_sys);
    wb_layers_clear(&rv.layers);
    wb_quant_free(&rv.quant);
    rv.have = 0;
}

/* Graph runs (issue 16): the sampler's and the partition's figures, stored as metrics,
 * listed with their last value on the System tab. */
static void run_graph_figures(wb_app *a, long long id)
{
    static const char *const prefixes[] = { "graph_", "partition_", "sampler_", "sampled_" };
    char **keys = NULL;
    size_t nk = 0, shown = 0;
    if (store_metric_keys(a->db, id, &keys, &nk)) return;
    for (size_t i = 0; i < nk; i++) {
        int match = 0;
        for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++)
            match |= !strncmp(keys[i], prefixes[p], strlen(prefixes[p]));
        store_series sr;
        if (!match || store_metric_get(a->db, id, keys[i], &sr)) continue;
        if (!shown++) {
            tui_lines_add(&rv.sys, &rv.n_sys, "%s", "");
            tui_lines_add(&rv.sys, &rv.n_sys, "Graph (last value; *_modelled = a model of the traffic, not measured):");
        }
        if (sr.n) tui_lines_add(&rv.sys, &rv.n_sys, "  %-40s %.6g", keys[i], sr.value[sr.n - 1]);
        store_series_free(&sr);
    }
    store_strings_free(keys, nk);
}

/* The System tab's lines on the run's checkpoints (and whether R resumes it) and its int8
 * quantizations (the Int8 tab shows them, wb_model.c). */
static void model_lines(wb_app *a, const store_run *r)
{
    store_checkpoint *ck = NULL;
    size_t n = 0;
    char b1[32], why[512];
    if (!store_checkpoints_list(a->db, r->id, &ck, &n) && n) {
        tui_lines_add(&rv.sys, &rv.n_sys, "%s", "");
        tui_lines_add(&rv.sys, &rv.n_sys, "Checkpoints: %zu kept, %s each; last at step %ld (epoch %d)", n,
                  prof_fmt_bytes(b1, sizeof b1, (double)ck[0].bytes), ck[0].step, ck[0].epoch);
    }
    free(ck);
    if (r->status == STORE_RUN_CRASHED || r->status == STORE_RUN_INTERRUPTED || r->status == STORE_RUN_FAILED) {
        if (wb_resume_refusal(a, r, why, sizeof why)) tui_lines_add(&rv.sys, &rv.n_sys, "  Resume not offered: %s", why);
        else tui_lines_add(&rv.sys, &rv.n_sys, "  R resumes it from there (as nnbench resume %lld)", r->id);
    }
    store_quant *q = NULL;
    if (!store_quants_list(a->db, r->id, &q, &n) && n)
        tui_lines_add(&rv.sys, &rv.n_sys, "int8 quantizations: %zu (the Int8 tab shows them, fp32 vs int8)", n);
    free(q);
}

/* Adds "  key   value" to the System tab, the value in lines of at most cols - 2 cells
 * (the screen's width when the run was opened; cut at spaces, continued under the value's
 * column): a long value (why counters are missing, the GEMM shape classes) is read whole
 * instead of being cut. */
#define SYS_KEY_W 24
static void add_kv(const char *key, const char *value, int cols)
{
    const int col = 2 + SYS_KEY_W + 1, width = (cols < 80 ? 80 : cols) - 2 - col;
    const char *p = value;
    int first = 1;
    do {
        int len = tui_wrap_cut(p, width);
        if (first) tui_lines_add(&rv.sys, &rv.n_sys, "  %-*s %.*s", SYS_KEY_W, key, len, p);
        else tui_lines_add(&rv.sys, &rv.n_sys, "%*s%.*s", col, "", len, p);
        for (p += len; *p == ' '; p++) {}
        first = 0;
    } while (*p);
}

static void run_load(wb_app *a)
{
    long long id = rv.id;
    run_unload();
    rv.id = id;
    if (store_run_get(a->db, id, &rv.run)) {
        wb_message(a, "run #%lld: %s", id, store_error());
        return;
    }
    rv.have = 1;
    if (rv.run.status == STORE_RUN_RUNNING && rv.run.steps != rv.sps_step && isfinite(rv.run.samples_per_s)) {
        if (rv.n_sps == SPS_N) memmove(rv.sps, rv.sps + 1, (SPS_N - 1) * sizeof rv.sps[0]);
        else rv.n_sps++;
        rv.sps[rv.n_sps - 1] = rv.run.samples_per_s;
        rv.sps_step = rv.run.steps;
    }
    for (int i = 0; i < 4; i++) metric_load(a->db, id, wb_metric_keys[i], &rv.m[i]);
    memset(&rv.balance, 0, sizeof rv.balance);
    rv.balance.imbalance = NAN;
    if (!store_op_stats_get(a->db, id, -1, &rv.scopes, &rv.n_scopes)) prof_balance_get(rv.scopes, rv.n_scopes, &rv.balance);
    else { rv.scopes = NULL; rv.n_scopes = 0; }
    if (rv.rank_view >= rv.balance.ranks) rv.rank_view = -1;
    profile_regroup(a);
    rv.have_prof = store_profile_get(a->db, id, &rv.prof) == 0;
    if (store_solver_events_get(a->db, id, &rv.ev, &rv.n_ev)) { rv.ev = NULL; rv.n_ev = 0; }
    wb_layers_load(a, &rv.layers, id);

    store_kv *kv = NULL;
    size_t n = 0;
    tui_lines_add(&rv.cfg, &rv.n_cfg, "Resolved configuration (%s%s%s):", rv.run.name, rv.run.variant[0] ? " / " : "", rv.run.variant);
    if (!store_params_get(a->db, id, &kv, &n)) {
        for (size_t i = 0; i < n; i++) tui_lines_add(&rv.cfg, &rv.n_cfg, "  %-28s = %s", kv[i].key, kv[i].value);
        if (!n) tui_lines_add(&rv.cfg, &rv.n_cfg, "  (no keys stored)");
        free(kv);
    }
    tui_lines_add(&rv.cfg, &rv.n_cfg, "%s", "");
    tui_lines_add(&rv.cfg, &rv.n_cfg, "Experiment file: %s", rv.run.exp_path[0] ? rv.run.exp_path : "(none)");
    if (rv.run.exp_text) {
        const char *p = rv.run.exp_text;
        while (*p) {
            const char *e = strchr(p, '\n');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            tui_lines_add(&rv.cfg, &rv.n_cfg, "  %.*s", (int)l, p);
            p += l + (e ? 1 : 0);
        }
    } else tui_lines_add(&rv.cfg, &rv.n_cfg, "  (text not stored)");

    const store_run *r = &rv.run;
    char b1[32], b2[32];
    tui_lines_add(&rv.sys, &rv.n_sys, "Run #%lld on %s (pid %ld), nnbench %s", r->id, r->host, r->pid, r->version);
    tui_lines_add(&rv.sys, &rv.n_sys, "  model       %s", r->model);
    tui_lines_add(&rv.sys, &rv.n_sys, "  dataset     %s  (%d train, %d test)", r->dataset, r->n_train, r->n_test);
    tui_lines_add(&rv.sys, &rv.n_sys, "  threads     %d   seed %llu", r->threads, (unsigned long long)r->seed);
    prof_fmt_bytes(b1, sizeof b1, (double)r->peak_bytes);
    prof_fmt_bytes(b2, sizeof b2, (double)r->peak_rss);
    tui_lines_add(&rv.sys, &rv.n_sys, "  memory      engine peak %s, process peak RSS %s", r->peak_bytes >= 0 ? b1 : "-", r->peak_rss >= 0 ? b2 : "-");
    if (r->error[0]) tui_lines_add(&rv.sys, &rv.n_sys, "  error       %s", r->error);
    tui_lines_add(&rv.sys, &rv.n_sys, "%s", "");
    tui_lines_add(&rv.sys, &rv.n_sys, "System:");
    kv = NULL; n = 0;
    if (store_sysinfo_get(a->db, id, &kv, &n)) kv = NULL, n = 0;
    else if (!n) tui_lines_add(&rv.sys, &rv.n_sys, "  (no system facts stored)");
    for (size_t i = 0; i < n; i++) add_kv(kv[i].key, kv[i].value, a->cols);
    store_run_perf_get(&rv.run, kv, n, rv.have_prof ? &rv.prof : NULL, &rv.perf);
    store_run_warnings(rv.scopes, rv.n_scopes, rv.have_prof ? &rv.prof : NULL, &rv.perf, rv.warnings, sizeof rv.warnings);
    free(kv);
    if (rv.have_prof) {
        char hw[840];
        snprintf(hw, sizeof hw, "%d%s%s", rv.prof.hw_counters, rv.prof.counters_note[0] ? "  " : "", rv.prof.counters_note);
        add_kv("hardware counters", hw, a->cols);
    }
    run_graph_figures(a, id);
    model_lines(a, r);
}

void wb_open_run(wb_app *a, long long id)
{
    if (!wb_run_panel.st && !(wb_run_panel.st = calloc(1, sizeof(run_state)))) { wb_message(a, "out of memory"); return; }
    if (rv.id != id) { rv.tab = TAB_CURVES; rv.scroll = 0; rv.rank_view = -1; rv.n_sps = 0; rv.sps_step = 0; }
    rv.id = id;
    a->open_id = id;
    run_load(a);
    if (!rv.have) { run_unload(); free(wb_run_panel.st); wb_run_panel.st = NULL; return; }
    wb_push(a, &wb_run_panel);
}

static void run_summary(wb_app *a, int y)
{
    const store_run *r = &rv.run;
    char d[32], line[1024], loss[32], acc[32];
    prof_fmt_duration(d, sizeof d, tui_run_duration(r, tui_unix_now()));
    snprintf(loss, sizeof loss, isfinite(r->final_train_loss) ? "%.4g" : "-", r->final_train_loss);
    snprintf(acc, sizeof acc, isfinite(r->best_test_acc) ? "%.3f" : "-", r->best_test_acc);
    snprintf(line, sizeof line, "#%lld %s%s%s  %s  ", r->id, r->name, r->variant[0] ? "/" : "", r->variant,
             r->optimizer);
    int x = 1;
    attron(A_BOLD);
    wb_text(a, y, x, tui_text_width(line), 0, line);
    attroff(A_BOLD);
    x += tui_text_width(line);
    const char *st = store_status_name(r->status);
    attron(wb_status_attr(a, r->status));
    wb_text(a, y, x, (int)strlen(st), 0, st);
    attroff(wb_status_attr(a, r->status));
    x += (int)strlen(st);
    /* As many whole items as fit (80 columns: the last ones go first, never half of one). */
    char items[5][128];
    char spark[SPS_N * 3 + 1] = "", eta[32] = "-";
    if (r->status == STORE_RUN_RUNNING && r->total_steps > 0) {
        /* htop-style progress from the store: any process's run */
        double el = tui_run_duration(r, tui_unix_now());
        if (r->steps > 0 && r->total_steps > r->steps && el > 0)
            prof_fmt_duration(eta, sizeof eta, el * (double)(r->total_steps - r->steps) / (double)r->steps);
        snprintf(items[0], 128, "step %ld/%ld %.0f%%  ETA %s", r->steps, r->total_steps,
                 100.0 * (double)r->steps / (double)r->total_steps, eta);
        tui_sparkline(rv.sps, (size_t)rv.n_sps, a->utf8, spark, sizeof spark);
    } else snprintf(items[0], 128, "steps %ld", r->steps);
    snprintf(items[1], 64, "loss %s", loss);
    snprintf(items[2], 64, "best acc %s", acc);
    snprintf(items[3], 64, "%s", d);
    snprintf(items[4], 128, "%.0f samples/s%s%s", isfinite(r->samples_per_s) ? r->samples_per_s : 0.0, spark[0] ? " " : "",
             spark);
    line[0] = 0;
    /* a run in progress shows its pace right after its progress */
    static const int done_order[5] = { 0, 1, 2, 3, 4 }, live_order[5] = { 0, 4, 1, 2, 3 };
    const int *order = spark[0] ? live_order : done_order;
    for (int i = 0; i < 5; i++) {
        size_t l = strlen(line);
        if (x + (int)l + 2 + tui_text_width(items[order[i]]) > a->cols - 1) break;
        snprintf(line + l, sizeof line - l, "  %s", items[order[i]]);
    }
    wb_text(a, y, x, a->cols - x - 1, 0, line);
}

static void draw_tabs(wb_app *a, int y)
{
    int x = 1;
    for (int t = 0; t < TAB_N; t++) {
        char b[32];
        snprintf(b, sizeof b, " %s ", tab_names[t]);
        if (t == rv.tab) attron(A_REVERSE | A_BOLD);
        wb_text(a, y, x, (int)strlen(b), 0, b);
        if (t == rv.tab) attroff(A_REVERSE | A_BOLD);
        x += (int)strlen(b) + 1;
    }
}

/* A click on the tab row (row 1) picks the tab under it, laid out as draw_tabs does; on a
 * column title of the Profile tab's op table, sorts by it. */
static void run_click(wb_app *a, int y, int x)
{
    int key = rv.tab == TAB_PROFILE ? wb_header_hit(a, y, x) : -1;
    if (key >= 0) {   /* a column title of the op table: sort by it, again: reversed */
        wb_sort_by(&rv.op_sort, &rv.op_desc, key);
        return;
    }
    if (y != 1) return;
    int from = 1;
    for (int t = 0; t < TAB_N; t++) {
        int w = (int)strlen(tab_names[t]) + 2;
        if (x >= from && x < from + w) { rv.tab = t; rv.scroll = 0; rv.page = 0; return; }
        from += w + 1;
    }
}

static size_t curve_series(wb_app *a, wb_metric *m, const int *idx, int n, const char *const *labels, tui_series *out)
{
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        wb_metric *mm = &m[idx[i]];
        if (!mm->s.n) continue;
        out[k].label = labels[i];
        out[k].x = wb_pick_x(a->x_axis, mm->xstep, mm->s.wall, mm->s.hybrid);
        out[k].y = mm->s.value;
        out[k].n = mm->s.n;
        k++;
    }
    return k;
}

static void draw_curves(wb_app *a, int y0, int y1)
{
    char t[128];
    wb_toggles_text(a, t, sizeof t);
    attron(A_DIM);
    wb_text(a, y0, 1, a->cols - 2, 0, t);
    attroff(A_DIM);
    y0++;
    int h = y1 - y0 + 1, w = a->cols - 2;
    tui_series s[2];
    static const int li[2] = { 0, 1 }, ai[2] = { 2, 3 };
    static const char *const ll[2] = { "train loss", "test loss" }, *const al[2] = { "train acc", "test acc" };
    size_t nl = curve_series(a, rv.m, li, 2, ll, s);
    tui_series sa[2];
    size_t na = curve_series(a, rv.m, ai, 2, al, sa);
    if (!nl && !na) {
        wb_text(a, y0 + h / 2, 2, w - 2, 0, rv.run.status == STORE_RUN_RUNNING ? "No metrics yet: the run has just started." : "This run logged no metrics.");
        return;
    }
    if (na && nl) {
        int h1 = h / 2;
        wb_chart_at(a, y0, 1, w, h1, s, nl, "loss", "loss", a->log_y);
        wb_chart_at(a, y0 + h1, 1, w, h - h1, sa, na, "accuracy", "accuracy", 0);
    } else if (nl) wb_chart_at(a, y0, 1, w, h, s, nl, "loss", "loss", a->log_y);
    else wb_chart_at(a, y0, 1, w, h, sa, na, "accuracy", "accuracy", 0);
}

/* Profile: the op-table model (profiler/table.c: the columns and words of `show`, `run
 * --profile` and the reports), sortable, with a bar of each row's self share; a
 * data-parallel run's ranks grouped (or one rank, v) under the load imbalance. */

/* The rows shown, in order: sorted, grouped by rank or one rank only, maybe reversed.
 * malloc'd (NULL when empty or out of memory). */
static store_op_row *profile_rows(size_t *n)
{
    *n = 0;
    store_op_row *v = malloc((rv.n_ops ? rv.n_ops : 1) * sizeof *v);
    if (!v) return NULL;
    prof_rows_sort(rv.ops, rv.n_ops, (prof_sort)rv.op_sort);
    int ranks = rv.balance.ranks > 1 ? rv.balance.ranks : 1;
    for (int k = 0; k < ranks; k++) {
        if (rv.rank_view >= 0 && k != rv.rank_view) continue;
        for (size_t i = 0; i < rv.n_ops; i++)
            if (ranks == 1 || prof_row_rank(&rv.ops[i], NULL) == k) v[(*n)++] = rv.ops[i];
    }
    if (rv.op_desc)
        for (size_t i = 0; i < *n / 2; i++) { store_op_row t = v[i]; v[i] = v[*n - 1 - i]; v[*n - 1 - i] = t; }
    return v;
}

static void draw_profile(wb_app *a, int y0, int y1)
{
    if (!rv.n_ops) {
        wb_text(a, y0 + 1, 2, a->cols - 4, 0, rv.run.status == STORE_RUN_RUNNING
                    ? "The op profile is stored when the run ends."
                    : "This run was not profiled (profile.enabled = false). Start one with profiling from New run.");
        return;
    }
    size_t n = 0;
    store_op_row *rows = profile_rows(&n);
    if (!rows) return;
    prof_table t;
    store_op_table_init(&t, rows, n, rv.have_prof ? &rv.prof : NULL, &rv.perf);
    if (rv.balance.ranks > 1) {
        t.show[PROF_COL_RANK] = 1;   /* also when one rank is shown */
        t.ranks = &rv.balance;       /* self % of each rank's own profile */
    }
    char sum[1100], pk[32], ov[32], tt[32];
    prof_fmt_bytes(pk, sizeof pk, rv.have_prof ? (double)rv.prof.peak_bytes : NAN);
    prof_fmt_duration(ov, sizeof ov, (rv.have_prof ? (double)rv.prof.overhead_ns : NAN) * 1e-9);
    prof_fmt_duration(tt, sizeof tt, t.self_total_ns * 1e-9);
    snprintf(sum, sizeof sum, "by %s, sorted by %s%s   self total %s   profiler overhead %s   peak memory %s   %s",
             group_names[rv.group], prof_sort_name((prof_sort)rv.op_sort), rv.op_desc ? " (reversed)" : "", tt, ov, pk,
             /* what is counted and why not (hardware, then software events) */
             rv.have_prof && rv.prof.counters_note[0] ? rv.prof.counters_note : "counters: not recorded");
    attron(A_DIM);
    wb_text(a, y0, 1, a->cols - 2, 0, sum);
    attroff(A_DIM);
    if (rv.balance.ranks > 1) {
        /* per-rank rows: which ranks are shown, and the imbalance (prof_balance_line, as `show`) */
        char bl[256], l[400], which[32];
        if (rv.rank_view < 0) snprintf(which, sizeof which, "all %d, grouped", rv.balance.ranks);
        else snprintf(which, sizeof which, "%d of %d", rv.rank_view, rv.balance.ranks);
        snprintf(l, sizeof l, "ranks: %s (v)   %s", which, prof_balance_line(&rv.balance, bl, sizeof bl));
        wb_text(a, ++y0, 1, a->cols - 2, 0, l);
    }
    /* the warnings of `run --profile` and `show`, from the stored profile */
    attron(A_BOLD);
    for (const char *w = rv.warnings, *nl; *w && (nl = strchr(w, '\n')) && y0 + 2 < y1; w = nl + 1) {
        char l[400];
        snprintf(l, sizeof l, "Warning: %.*s", (int)(nl - w), w);
        wb_text(a, ++y0, 1, a->cols - 2, 0, l);
    }
    attroff(A_BOLD);
    int page = y1 - y0 - 1;
    rv.page = page;
    if (rv.scroll > (int)n - page) rv.scroll = (int)n - page;
    if (rv.scroll < 0) rv.scroll = 0;
    wb_draw_op_table(a, &t, y0 + 1, page, rv.scroll);
    free(rows);
}

/* The kappa chart's series. A step solves one system per block; drawn as one series the
 * line jumps between the blocks' kappas at every step and fills a solid band. Up to
 * KAPPA_SERIES blocks get a series each ("block 2"); more are summed up per step as the
 * largest and the smallest kappa over the blocks. ev is sorted by (step, block); buf holds
 * 2 * KAPPA_SERIES * n doubles (x then y of each series). Returns the number of series. */
#define KAPPA_SERIES 6
static size_t kappa_series(const store_solver_event *ev, size_t n, double *buf, tui_series *s, char (*labels)[48])
{
    int nb = 0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].block + 1 > nb) nb = ev[i].block + 1;
    size_t ns = nb <= KAPPA_SERIES ? (size_t)nb : 2, cnt[KAPPA_SERIES] = { 0 };
    for (size_t i = 0; i < n; i++) {
        double kappa = ev[i].kappa_used, step = (double)ev[i].step;
        for (size_t k = 0; k < ns; k++) {
            double *x = buf + 2 * k * n, *y = buf + (2 * k + 1) * n;
            size_t *c = &cnt[k];
            if (nb <= KAPPA_SERIES) {
                if ((int)k == ev[i].block) { x[*c] = step; y[(*c)++] = kappa; }
            } else if (!*c || x[*c - 1] != step) { x[*c] = step; y[(*c)++] = kappa; }
            else if (k ? kappa < y[*c - 1] : kappa > y[*c - 1]) y[*c - 1] = kappa;
        }
    }
    for (size_t k = 0; k < ns; k++) {
        if (nb <= KAPPA_SERIES) snprintf(labels[k], sizeof labels[k], "block %zu", k);
        else snprintf(labels[k], sizeof labels[k], "%s of %d blocks", k ? "min" : "max", nb);
        s[k] = (tui_series){ labels[k], buf + 2 * k * n, buf + (2 * k + 1) * n, cnt[k] };
    }
    return ns;
}

static void draw_solver(wb_app *a, int y0, int y1)
{
    if (!rv.n_ev) {
        char b[256];
        snprintf(b, sizeof b, "No Newton solves in this run (optimizer: %s). Solver data appears for train.optimizer = newton.",
                 rv.run.optimizer[0] ? rv.run.optimizer : "?");
        wb_text(a, y0 + 1, 2, a->cols - 4, 0, b);
        return;
    }
    double *buf = malloc(2 * KAPPA_SERIES * rv.n_ev * sizeof *buf);
    if (!buf) return;
    tui_series s[KAPPA_SERIES];
    char labels[KAPPA_SERIES][48];
    size_t ns = kappa_series(rv.ev, rv.n_ev, buf, s, labels);
    /* The words of `show` and the reports (store_solver_summary_lines). */
    store_solver_summary sum;
    char sl[3][256], l[512], b1[32], b2[32], b3[32], b4[32];
    store_solver_summarize(rv.ev, rv.n_ev, &sum);
    store_solver_summary_lines(&sum, sl);
    wb_text(a, y0, 1, a->cols - 2, 0, sl[0]);
    snprintf(l, sizeof l, "%s; wall %s, (sim) hybrid %s", sl[1], prof_fmt_duration(b1, sizeof b1, rv.run.wall_s),
             prof_fmt_duration(b2, sizeof b2, rv.run.hybrid_s));
    wb_text(a, y0 + 1, 1, a->cols - 2, 0, l);
    y0++;
    wb_text(a, y0 + 1, 1, a->cols - 2, 0, sl[2]);
    int h = (y1 - y0 - 1) / 2;
    if (h < 8) h = 8;
    tui_chart_opts o = { .width = a->cols - 2, .height = h, .utf8 = a->utf8, .mono = !a->color, .log_y = 1,
                         .x_label = "step", .y_label = "kappa used (log)" };
    tui_canvas c;
    if (!tui_chart_draw(s, ns, &o, &c)) { wb_draw_canvas(a, y0 + 2, 1, &c); tui_canvas_free(&c); }
    free(buf);
    int ty = y0 + 2 + h;
    attron(A_BOLD | A_UNDERLINE);
    snprintf(l, sizeof l, "%7s %5s %5s %10s %-9s %10s %10s %10s %10s %9s", "step", "block", "n", "kappa", "route",
             "pred cls", "pred qtm", "measured", "simulated", "residual");
    wb_text(a, ty, 1, a->cols - 2, 0, l);
    attroff(A_BOLD | A_UNDERLINE);
    int page = y1 - ty;
    rv.page = page;
    if (rv.scroll > (int)rv.n_ev - page) rv.scroll = (int)rv.n_ev - page;
    if (rv.scroll < 0) rv.scroll = 0;
    for (int r = 0; r < page && rv.scroll + r < (int)rv.n_ev; r++) {
        const store_solver_event *e = &rv.ev[rv.scroll + r];
        prof_fmt_duration(b1, sizeof b1, (e->pred_classical_ns) * 1e-9); prof_fmt_duration(b2, sizeof b2, (e->pred_quantum_ns) * 1e-9);
        prof_fmt_duration(b3, sizeof b3, (e->measured_classical_ns) * 1e-9); prof_fmt_duration(b4, sizeof b4, (e->simulated_quantum_ns) * 1e-9);
        snprintf(l, sizeof l, "%7ld %5d %5d %10.3g %-9s %10s %10s %10s %10s %9.2g", e->step, e->block, e->n,
                 e->kappa_used, e->route ? "quantum" : "classical", b1, b2, b3, b4, e->residual);
        wb_text(a, ty + 1 + r, 1, a->cols - 2, 0, l);
    }
}

static void run_draw(wb_app *a)
{
    if (!rv.have) { wb_text(a, 2, 2, a->cols - 4, 0, "This run is no longer in the database (deleted?). Esc goes back."); return; }
    draw_tabs(a, 1);
    run_summary(a, 2);
    int y0 = 3, y1 = a->rows - 2;
    switch (rv.tab) {
    case TAB_CURVES: draw_curves(a, y0, y1); break;
    case TAB_PROFILE: draw_profile(a, y0, y1); break;
    case TAB_SOLVER: draw_solver(a, y0, y1); break;
    case TAB_CONFIG: rv.page = wb_draw_lines(a, rv.cfg, rv.n_cfg, y0, y1, &rv.scroll); break;
    case TAB_SYSTEM: rv.page = wb_draw_lines(a, rv.sys, rv.n_sys, y0, y1, &rv.scroll); break;
    case TAB_LAYERS: rv.page = y1 - y0 + 1; wb_layers_draw(a, &rv.layers, y0, y1, &rv.scroll); break;
    case TAB_INT8: rv.page = y1 - y0 + 1; wb_quant_draw(a, &rv.quant, &rv.run, y0, y1, &rv.scroll); break;
    }
    wb_model_tick(a);
}

/* / on the Config and System tabs: scrolls to the next line (after the top one, then from
 * the start) holding the text, case-insensitive; Enter on the prompt's old text finds
 * the next match. */
static void find_text(wb_app *a)
{
    char **l = rv.tab == TAB_CONFIG ? rv.cfg : rv.tab == TAB_SYSTEM ? rv.sys : NULL;
    size_t n = rv.tab == TAB_CONFIG ? rv.n_cfg : rv.n_sys;
    if (!l) { wb_message(a, "/ finds text on the Config and System tabs"); return; }
    if (!wb_prompt(a, "find (case-insensitive; Enter again: the next match)", rv.find, sizeof rv.find, NULL) || !rv.find[0])
        return;
    for (size_t k = 1; k <= n; k++) {
        size_t i = ((size_t)(rv.scroll > 0 ? rv.scroll : 0) + k) % n;   /* k == n: the top line */
        if (strcasestr(l[i], rv.find)) {
            rv.scroll = (int)i;
            wb_message(a, "'%s': line %zu of %zu", rv.find, i + 1, n);
            return;
        }
    }
    wb_message(a, "'%s' is not on this tab", rv.find);
}

static int run_key(wb_app *a, tui_action act, int ch)
{
    /* The page of the tab as drawn: End/G then shows the last row (the Solver tab's table
     * sits under its chart, so its page is shorter than the screen). */
    int page = rv.page > 0 ? rv.page : a->rows - 5;
    switch (act) {
    case TUI_ACT_TAB_N:
        if (ch >= '1' && ch < '1' + TAB_N) { rv.tab = ch - '1'; rv.scroll = 0; rv.page = 0; }
        return 1;
    case TUI_ACT_TAB_NEXT: rv.tab = (rv.tab + 1) % TAB_N; rv.scroll = 0; return 1;
    case TUI_ACT_TAB_PREV: rv.tab = (rv.tab + TAB_N - 1) % TAB_N; rv.scroll = 0; return 1;
    case TUI_ACT_REFRESH: run_load(a); wb_message(a, "reloaded run #%lld", rv.id); return 1;
    case TUI_ACT_FILTER: find_text(a); return 1;
    case TUI_ACT_SORT:
        if (rv.tab != TAB_PROFILE) { wb_message(a, "s sorts the Profile tab's op table"); return 1; }
        rv.op_sort = (rv.op_sort + 1) % PROF_SORT_N;
        wb_message(a, "ops sorted by %s", prof_sort_name((prof_sort)rv.op_sort));
        return 1;
    case TUI_ACT_SORT_ORDER: rv.op_desc = !rv.op_desc; return 1;
    case TUI_ACT_SORT_PICK: {
        if (rv.tab != TAB_PROFILE) { wb_message(a, "o sorts the Profile tab's op table"); return 1; }
        const char *names[PROF_SORT_N];
        for (int k = 0; k < PROF_SORT_N; k++) names[k] = prof_sort_name((prof_sort)k);
        int k = wb_pick(a, "sort the ops by", names, PROF_SORT_N, rv.op_sort);
        if (k >= 0) wb_sort_by(&rv.op_sort, &rv.op_desc, k);
        return 1;
    }
    case TUI_ACT_GROUP:
        if (rv.tab != TAB_PROFILE) { wb_message(a, "b groups the Profile tab's rows"); return 1; }
        if (rv.balance.ranks > 1) { wb_message(a, "a data-parallel run's rows stay per rank (v: one rank at a time)"); return 1; }
        rv.group = (rv.group + 1) % 4;
        rv.scroll = 0;
        profile_regroup(a);
        wb_message(a, "Profile rows by %s", group_names[rv.group]);
        return 1;
    case TUI_ACT_METRIC:
        if (rv.tab == TAB_PROFILE) {
            if (rv.balance.ranks < 2) { wb_message(a, "v shows one rank at a time in a data-parallel run's profile"); return 1; }
            rv.rank_view = rv.rank_view + 1 >= rv.balance.ranks ? -1 : rv.rank_view + 1;
            rv.scroll = 0;
            return 1;
        }
        if (rv.tab != TAB_LAYERS) { wb_message(a, "v cycles the Layers tab's statistic and the Profile tab's rank"); return 1; }
        return wb_layers_key(a, &rv.layers, act);
    case TUI_ACT_STOP: wb_stop_key(a, rv.have ? &rv.run : NULL); return 1;
    case TUI_ACT_RESUME: case TUI_ACT_QUANTIZE:
        if (rv.have && wb_model_key(a, act, &rv.run) == 2) { rv.tab = TAB_INT8; rv.scroll = 0; }
        return 1;
    default: break;
    }
    if (wb_chart_toggle(a, act)) return 1;
    int total = rv.tab == TAB_CONFIG ? (int)rv.n_cfg : rv.tab == TAB_SYSTEM ? (int)rv.n_sys
              : rv.tab == TAB_PROFILE ? (int)rv.n_ops : rv.tab == TAB_SOLVER ? (int)rv.n_ev
              : rv.tab == TAB_LAYERS ? wb_layers_rows(&rv.layers) : rv.tab == TAB_INT8 ? wb_quant_rows(&rv.quant) : 0;
    /* the Layers table clamps the scroll to its own height when it draws */
    return wb_scroll_key(act, &rv.scroll, total, rv.tab == TAB_LAYERS ? 1 : page);
}

static void run_reload(wb_app *a)
{
    /* Only a run still being written changes under us. */
    if (rv.have && rv.run.status == STORE_RUN_RUNNING) run_load(a);
    else if (rv.have) {
        store_run r;
        if (store_run_get(a->db, rv.id, &r)) run_load(a); /* deleted */
        else {
            if (r.status != rv.run.status) run_load(a);
            store_run_clear(&r);
        }
    }
}

static void run_leave(wb_app *a)
{
    (void)a;
    run_unload();
    free(wb_run_panel.st);
    wb_run_panel.st = NULL;
}

/* The status bar offers what the tab and the run can do: sort on Profile, v where it
 * cycles something, chart keys on Curves (the only tab with the shared chart toggles),
 * R/Q only when this run can be resumed/quantized, K when something can be stopped. */
static int run_offers(wb_app *a, tui_action act)
{
    char why[512];
    switch (act) {
    case TUI_ACT_SORT: case TUI_ACT_SORT_ORDER: case TUI_ACT_SORT_PICK: return rv.tab == TAB_PROFILE;
    case TUI_ACT_GROUP: return rv.tab == TAB_PROFILE && rv.n_ops && rv.balance.ranks < 2;
    case TUI_ACT_FILTER: return rv.tab == TAB_CONFIG || rv.tab == TAB_SYSTEM;
    case TUI_ACT_METRIC: return rv.tab == TAB_LAYERS || (rv.tab == TAB_PROFILE && rv.balance.ranks >= 2);
    case TUI_ACT_LOG_Y: case TUI_ACT_X_AXIS: case TUI_ACT_X_SCALE: case TUI_ACT_SMOOTH: return rv.tab == TAB_CURVES;
    case TUI_ACT_RESUME: return rv.have && !wb_live_running(a) && !wb_resume_refusal(a, &rv.run, why, sizeof why);
    case TUI_ACT_QUANTIZE: return rv.have && !wb_live_running(a) && !wb_quant_refusal(a, &rv.run, why, sizeof why);
    case TUI_ACT_STOP: return wb_stop_offered(a, rv.have ? &rv.run : NULL);
    default: return 1;
    }
}

/* The System tab's text is wrapped to the width: made again for the new one. */
static void run_resize(wb_app *a) { if (rv.have) run_load(a); }

wb_panel wb_run_panel = { .title = "Run", .screen = TUI_SCR_RUN, .draw = run_draw, .key = run_key,
                          .leave = run_leave, .reload = run_reload, .offers = run_offers, .resize = run_resize,
                          .click = run_click };
