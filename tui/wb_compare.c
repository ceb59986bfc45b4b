/* wb_compare.c — the Compare screen: store_compare (store/compare.c) rendered as the CLI
 * renders it, with a chart of one metric (or layer telemetry key) of every run; runs that
 * differ in the sequence length add the scaling view (store/scaling.c): its tables, and
 * in the v cycle log-log charts of each measure against n, one line per variant. */
#include "wb.h"

#include <curses.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- Compare screen: store_compare rendered as the CLI renders it ------------------- */

typedef struct {
    long long ids[WB_MAX_COMPARE];
    int n;
    store_compare *c;
    double *xstep[WB_MAX_COMPARE];  /* step as double, per run, for the chart */
    /* < 4: index into wb_metric_keys; then the scaling measures (n_scale of them); then
     * tkeys[metric - 4 - n_scale] */
    int metric;
    char **tkeys;            /* layer telemetry keys of the runs ("grad_norm/dense1.W", ...) */
    size_t n_tkeys;
    store_scaling *sc;       /* the scaling view of the runs */
    int n_scale;             /* STORE_SCALE_N when the runs hold 2 sizes or more, else 0 */
    int all_keys;
    /* one run: its keys not at their default, shown first and marked (as `compare ID`);
     * set_keys point into set_params; NULL when the stored file no longer loads */
    store_kv *set_params;
    const char **set_keys;
    size_t n_set_keys;
    int scroll, page;        /* page: the table rows the last draw showed */
    char **lines;
    size_t n_lines;
} cmp_state;

#define CV ((cmp_state *)wb_compare_panel.st)

static void cmp_unload(cmp_state *cv)
{
    for (int i = 0; i < WB_MAX_COMPARE; i++) { free(cv->xstep[i]); cv->xstep[i] = NULL; }
    store_strings_free(cv->tkeys, cv->n_tkeys);
    cv->tkeys = NULL;
    cv->n_tkeys = 0;
    store_compare_free(cv->c);
    cv->c = NULL;
    store_scaling_free(cv->sc);
    cv->sc = NULL;
    tui_lines_free(cv->lines, cv->n_lines);
    cv->lines = NULL;
    cv->n_lines = 0;
    free(cv->set_keys);
    free(cv->set_params);
    cv->set_keys = NULL;
    cv->set_params = NULL;
    cv->n_set_keys = 0;
}

/* The compare options of the screen's state: those of `compare` (one run: its keys not at
 * their default, alone, or first and marked with all keys). */
static store_cmp_opts cmp_opts(const cmp_state *cv, const char *metric)
{
    store_cmp_opts o = { .all_keys = cv->all_keys, .metric = metric, .target = NAN };
    if (cv->n == 1) {
        o.set_keys = cv->set_keys;
        o.n_set_keys = cv->n_set_keys;
    }
    return o;
}

/* The side-by-side table as text lines (rebuilt on load, toggles and resize). */
static void cmp_build_lines(wb_app *a, cmp_state *cv)
{
    tui_lines_free(cv->lines, cv->n_lines);
    cv->lines = NULL;
    cv->n_lines = 0;
    if (cv->c && tui_compare_lines(cv->c, a->cols - 2, a->utf8, cv->all_keys, &cv->lines, &cv->n_lines))
        wb_message(a, "out of memory");
    if (cv->n_scale && tui_scaling_lines(cv->sc, a->cols - 2, a->utf8, &cv->lines, &cv->n_lines))
        wb_message(a, "out of memory");
    /* Two runs: the op diff of the second against the first follows, as `nnbench diff`. */
    store_diff *d = NULL;
    if (!cv->c || cv->n != 2) return;
    if (store_diff_load(a->db, cv->c, 0, 1, &d)) { wb_message(a, "diff: %s", store_error()); return; }
    if (tui_lines_add(&cv->lines, &cv->n_lines, "%s", "") || tui_lines_add(&cv->lines, &cv->n_lines, "%s", "Op diff (B - A)") ||
        tui_diff_lines(d, a->cols - 2, a->utf8, 0, &cv->lines, &cv->n_lines))
        wb_message(a, "out of memory");
    store_diff_free(d);
}

/* The scaling measure the chart shows, or -1 for a metric. */
static int cmp_scale(const cmp_state *cv)
{
    return cv->metric >= 4 && cv->metric < 4 + cv->n_scale ? cv->metric - 4 : -1;
}

/* The metric key the comparison loads (the scaling charts keep train_loss loaded). */
static const char *cmp_metric_name(const cmp_state *cv)
{
    if (cv->metric < 4) return wb_metric_keys[cv->metric];
    return cmp_scale(cv) >= 0 ? wb_metric_keys[0] : cv->tkeys[cv->metric - 4 - cv->n_scale];
}

/* Builds the scaling view of the loaded comparison; the chart index keeps pointing at the
 * same kind of thing when the view comes or goes (a run deleted meanwhile). */
static void cmp_load_scaling(wb_app *a, cmp_state *cv, int scale, int tkey)
{
    cv->n_scale = 0;
    if (store_scaling_build(cv->c, &cv->sc)) wb_message(a, "scaling: %s", store_error());
    else if (cv->sc->n_xs >= 2) cv->n_scale = STORE_SCALE_N;
    if (scale >= 0) cv->metric = cv->n_scale ? 4 + scale : 0;
    if (tkey >= 0) cv->metric = 4 + cv->n_scale + tkey;
}

static int cmp_load(wb_app *a, cmp_state *cv)
{
    char keep[128] = "";     /* the telemetry key shown, kept across the reload */
    int scale = cmp_scale(cv);
    if (cv->metric >= 4 + cv->n_scale && (size_t)(cv->metric - 4 - cv->n_scale) < cv->n_tkeys)
        snprintf(keep, sizeof keep, "%s", cmp_metric_name(cv));
    cmp_unload(cv);
    /* Runs deleted meanwhile drop out. */
    int m = 0;
    for (int i = 0; i < cv->n; i++) {
        store_run r;
        if (store_run_get(a->db, cv->ids[i], &r)) continue;
        store_run_clear(&r);
        cv->ids[m++] = cv->ids[i];
    }
    cv->n = m;
    if (!m) return -1;
    /* the layer telemetry keys of these runs follow the four metrics in the v cycle */
    cv->n_tkeys = wb_layers_metric_keys(a->db, cv->ids, m, &cv->tkeys);
    int tk = -1;             /* the kept telemetry key in the new list */
    for (size_t k = 0; keep[0] && k < cv->n_tkeys; k++)
        if (!strcmp(cv->tkeys[k], keep)) tk = (int)k;
    if (keep[0] && tk < 0) cv->metric = 0;
    if (m == 1) cv->set_keys = cli_one_run_set_keys(a->db, cv->ids[0], &cv->set_params, &cv->n_set_keys);
    store_cmp_opts o = cmp_opts(cv, tk >= 0 ? cv->tkeys[tk] : wb_metric_keys[cv->metric < 4 ? cv->metric : 0]);
    if (store_compare_load(a->db, cv->ids, (size_t)m, &o, &cv->c)) {
        wb_message(a, "compare: %s", store_error());
        return -1;
    }
    cmp_load_scaling(a, cv, scale, tk);
    for (int i = 0; i < m; i++) {
        const store_series *sr = &cv->c->metric[i];
        cv->xstep[i] = malloc((sr->n ? sr->n : 1) * sizeof(double));
        for (size_t k = 0; cv->xstep[i] && k < sr->n; k++) cv->xstep[i][k] = (double)sr->step[k];
    }
    cmp_build_lines(a, cv);
    return 0;
}

void wb_open_compare_ids(wb_app *a, const long long *ids, int n)
{
    if (n < 1) { wb_message(a, "nothing to compare"); return; }
    cmp_state *cv = calloc(1, sizeof *cv);
    if (!cv) { wb_message(a, "out of memory"); return; }
    if (n > WB_MAX_COMPARE) n = WB_MAX_COMPARE;
    memcpy(cv->ids, ids, (size_t)n * sizeof *ids);
    cv->n = n;
    if (cmp_load(a, cv) || cv->n < 1) {
        if (!a->msg[0]) wb_message(a, "the runs to compare are gone");
        cmp_unload(cv);
        free(cv);
        return;
    }
    if (wb_compare_panel.st) { cmp_unload(CV); free(CV); }
    wb_compare_panel.st = cv;
    wb_push(a, &wb_compare_panel);
    /* The chart toggles are the workbench's, shared with the Run screen: when they are not
     * the defaults, say so as Compare opens rather than draw a hybrid-time log chart
     * nobody asked for here. */
    if (a->x_axis || a->log_y || a->x_scale || a->smooth_idx) {
        char tg[160];
        wb_toggles_text(a, tg, sizeof tg);
        wb_message(a, "charts as set before: %s (x, X, L, m change them)", tg);
    }
}


/* The chart's height: half the screen, its plot at least CMP_PLOT_MIN rows while the table
 * keeps CMP_TABLE_MIN. Where the legend's full labels would leave the plot shorter, the
 * legend names runs by id only (the table's header names them in the same colours). */
#define CMP_PLOT_MIN 8
#define CMP_TABLE_MIN 6
static int cmp_chart_height(wb_app *a, tui_series *s, int n, char (*labels)[192])
{
    int avail = a->rows - 4, h = avail / 2, w = a->cols - 2;
    if (h < 9) h = 9;
    if (h - 3 - tui_chart_legend_rows(s, (size_t)n, w) < CMP_PLOT_MIN)
        for (int i = 0; i < n; i++) {
            char *sp = strchr(labels[i], ' ');
            if (sp) *sp = 0;
        }
    int need = 3 + tui_chart_legend_rows(s, (size_t)n, w) + CMP_PLOT_MIN;
    if (h < need) h = need < avail - CMP_TABLE_MIN ? need : (avail - CMP_TABLE_MIN > h ? avail - CMP_TABLE_MIN : h);
    return h;
}

/* The chart of the chosen metric, one line per run; returns its height. */
static int cmp_metric_chart(wb_app *a, cmp_state *cv)
{
    const store_compare *c = cv->c;
    tui_series s[WB_MAX_COMPARE];
    char labels[WB_MAX_COMPARE][192];
    for (int i = 0; i < cv->n; i++) {
        const store_series *sr = &c->metric[i];
        tui_compare_legend(c, (size_t)i, labels[i], sizeof labels[i]);
        /* Keep series index = run index so colours match the table's header. */
        s[i].label = labels[i];
        s[i].x = sr->n && cv->xstep[i] ? wb_pick_x(a->x_axis, cv->xstep[i], sr->wall, sr->hybrid) : NULL;
        s[i].y = sr->value;
        s[i].n = s[i].x ? sr->n : 0;
    }
    int h = cmp_chart_height(a, s, cv->n, labels);
    wb_chart_at(a, 2, 1, a->cols - 2, h, s, (size_t)cv->n, cmp_metric_name(cv), cmp_metric_name(cv),
             a->log_y && (cv->metric < 2 || (cv->metric >= 4 && strncmp(cmp_metric_name(cv), "grad_mean/", 10))));
    return h;
}

/* The scaling chart of measure m: log-log, one line per variant, the fitted exponent in
 * the legend (the workbench's x and y toggles do not apply: the axes are n and the
 * measure, both logarithmic). Returns its height. */
static int cmp_scaling_chart(wb_app *a, cmp_state *cv, store_scale_measure m)
{
    tui_series s[WB_MAX_COMPARE];
    char labels[WB_MAX_COMPARE][96], title[160];
    size_t ns = tui_scaling_series(cv->sc, m, s, labels, WB_MAX_COMPARE);
    int h = (a->rows - 4) / 2;
    if (h < 9) h = 9;
    tui_chart_opts o = { .width = a->cols - 2, .height = h, .utf8 = a->utf8, .mono = !a->color };
    tui_scaling_chart_opts(m, &o, title, sizeof title);
    tui_canvas cvs;
    if (tui_chart_draw(s, ns, &o, &cvs)) {
        wb_text(a, 2, 1, a->cols - 2, 0, "(chart: not enough room)");
        return h;
    }
    wb_draw_canvas(a, 2, 1, &cvs);
    tui_canvas_free(&cvs);
    return h;
}

static void cmp_draw(wb_app *a)
{
    cmp_state *cv = CV;
    store_compare *c = cv->c;
    char t[512], tg[160];
    wb_toggles_text(a, tg, sizeof tg);
    int scale = cmp_scale(cv);
    snprintf(t, sizeof t, "%s%s%d run%s   %s: %s (v%s%s)   %s", c->common_name, c->common_name[0] ? ": " : "", cv->n,
             cv->n == 1 ? "" : "s", scale >= 0 ? "scaling" : "metric", scale >= 0 ? store_scale_defs[scale].title : cmp_metric_name(cv),
             cv->n_scale ? ", then scaling against n" : "", cv->n_tkeys ? ", then layer telemetry" : "",
             scale >= 0 ? "x: n (log)  y: log" : tg);
    attron(A_DIM);
    wb_text(a, 1, 1, a->cols - 2, 0, t);
    attroff(A_DIM);
    int ty = 2 + (scale >= 0 ? cmp_scaling_chart(a, cv, (store_scale_measure)scale) : cmp_metric_chart(a, cv));
    /* Table header row in series colours, then the scrolling body. */
    if (cv->n_lines > 0) {
        int lw, cw;
        tui_compare_widths(c, a->cols - 2, cv->all_keys, &lw, &cw);
        attron(A_BOLD);
        wb_text(a, ty, 1, lw, 0, "run");
        for (int i = 0; i < cv->n; i++) {
            char b[32];
            snprintf(b, sizeof b, "#%lld", c->runs[i].id);
            attron(wb_series_attr(a, i));
            wb_text(a, ty, 1 + lw + i * cw + 1, cw - 1, 1, b);
            attroff(wb_series_attr(a, i));
        }
        attroff(A_BOLD);
        cv->page = wb_draw_lines(a, cv->lines + 1, cv->n_lines - 1, ty + 1, a->rows - 2, &cv->scroll);
    }
}

static int cmp_key(wb_app *a, tui_action act, int ch)
{
    (void)ch;
    cmp_state *cv = CV;
    switch (act) {
    case TUI_ACT_METRIC: cv->metric = (cv->metric + 1) % (4 + cv->n_scale + (int)cv->n_tkeys); cmp_load(a, cv); return 1;
    case TUI_ACT_ALL_KEYS:
        cv->all_keys = !cv->all_keys;
        if (cv->c) {
            store_cmp_opts o = cmp_opts(cv, cmp_metric_name(cv));
            store_compare_rows(cv->c, &o);
        }
        cmp_build_lines(a, cv);
        return 1;
    case TUI_ACT_REFRESH: cmp_load(a, cv); return 1;
    default: break;
    }
    if (wb_chart_toggle(a, act)) return 1;
    return wb_scroll_key(act, &cv->scroll, (int)cv->n_lines - 1, cv->page > 0 ? cv->page : 1);
}

static void cmp_resize(wb_app *a) { if (CV && CV->c) cmp_build_lines(a, CV); }

static void cmp_reload(wb_app *a)
{
    cmp_state *cv = CV;
    int running = 0;
    for (int i = 0; cv->c && i < cv->n; i++) running |= cv->c->runs[i].status == STORE_RUN_RUNNING;
    if (running) cmp_load(a, cv);
}

static void cmp_leave(wb_app *a)
{
    (void)a;
    if (!CV) return;
    cmp_unload(CV);
    free(CV);
    wb_compare_panel.st = NULL;
}

wb_panel wb_compare_panel = { .title = "Compare", .screen = TUI_SCR_COMPARE, .draw = cmp_draw, .key = cmp_key,
                              .resize = cmp_resize, .leave = cmp_leave, .reload = cmp_reload };

