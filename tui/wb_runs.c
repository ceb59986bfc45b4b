/* wb_runs.c — the workbench's first screen: the runs of the database, filtered, sorted,
 * marked for Compare, deleted; opens Run, Compare and New run. */
#include "wb.h"

#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- Runs screen ------------------------------------------------------------------- */

/* The run under the cursor, or NULL when the list is empty. */
static const store_run *selected_run(wb_app *a)
{
    return a->n_view && a->sel >= 0 && a->sel < (int)a->n_view ? &a->view[a->sel] : NULL;
}

static void rebuild_view(wb_app *a)
{
    long long keep = a->n_view && a->sel < (int)a->n_view ? a->view[a->sel].id : 0;
    free(a->view);
    a->view = NULL;
    a->n_view = 0;
    if (a->n_all) {
        a->view = malloc(a->n_all * sizeof *a->view);
        if (!a->view) return;
        memcpy(a->view, a->all, a->n_all * sizeof *a->view);
        a->n_view = tui_runs_filter(a->view, a->n_all, a->filter);
        tui_runs_sort(a->view, a->n_view, (tui_run_col)a->sort_col, a->sort_desc);
    }
    a->sel = 0;
    for (size_t i = 0; i < a->n_view; i++)
        if (a->view[i].id == keep) a->sel = (int)i;
}

void wb_reload_runs(wb_app *a)
{
    store_run *runs = NULL;
    size_t n = 0;
    if (store_runs_list(a->db, NULL, &runs, &n)) {
        wb_message(a, "cannot list runs: %s", store_error());
        return;
    }
    free(a->all);
    a->all = runs;
    a->n_all = n;
    /* Drop marks of runs that are gone (deleted elsewhere). */
    int m = 0;
    for (int i = 0; i < a->n_marked; i++)
        for (size_t k = 0; k < n; k++)
            if (runs[k].id == a->marked[i]) { a->marked[m++] = a->marked[i]; break; }
    a->n_marked = m;
    rebuild_view(a);
}

static int is_marked(wb_app *a, long long id)
{
    for (int i = 0; i < a->n_marked; i++)
        if (a->marked[i] == id) return 1;
    return 0;
}

static const char *sort_arrow(const wb_app *a)
{
    return a->utf8 ? (a->sort_desc ? "\xe2\x96\xbc" : "\xe2\x96\xb2") : (a->sort_desc ? "v" : "^");
}

static void runs_draw(wb_app *a)
{
    /* rows-2 holds the footer (counts, filter, marks): the table ends above it. */
    int y0 = 2, y1 = a->rows - 2, page = y1 - y0;
    if (a->n_all == 0) {
        const char *l[] = {
            "No runs in this database yet.",
            "",
            "Press n to start a sample run (samples/spirals-mlp.ini trains in seconds),",
            "or run `nnbench run FILE` in another terminal: its runs appear here live.",
            "",
            "Press ? for help, q to quit.",
        };
        int y = a->rows / 2 - 3;
        for (int i = 0; i < 6; i++) {
            int w = (int)strlen(l[i]), x = (a->cols - w) / 2;
            if (i == 0) attron(A_BOLD);
            wb_text(a, y + i, x > 0 ? x : 0, w, 0, l[i]);
            if (i == 0) attroff(A_BOLD);
        }
        return;
    }
    tui_col cols[TUI_RC_COUNT + 1];
    /* Names first: the name column keeps up to 22 cells while the others shrink and then
     * drop from the right (80 columns: id, name, status, optimizer, dataset, loss, acc);
     * a name cut keeps its start and end ("newton-vs-s…ton-hybrid"). Numbers (min 0 =
     * their natural width) are never cut. */
    static const int mins[TUI_RC_COUNT] = { 0, 22, 8, 6, 5, 0, 0, 0, 10 };
    double now = tui_unix_now();
    cols[0] = (tui_col){ "", 1, 1, 0, 0 };
    for (int c = 0; c < TUI_RC_COUNT; c++) {
        int want = (int)strlen(tui_run_col_names[c]) + 1;
        for (size_t i = 0; i < a->n_view; i++) {
            char b[256];
            tui_run_cell(&a->view[i], (tui_run_col)c, now, b, sizeof b);
            int w = tui_text_width(b);
            if (w > want) want = w;
        }
        if (want > 40) want = 40;
        int right = c == TUI_RC_ID || c == TUI_RC_LOSS || c == TUI_RC_ACC || c == TUI_RC_DURATION;
        int min = mins[c] && mins[c] < want ? mins[c] : want;
        cols[c + 1] = (tui_col){ tui_run_col_names[c], want, min, right, c == TUI_RC_NAME };
    }
    int w[TUI_RC_COUNT + 1];
    int vis = tui_table_layout(cols, TUI_RC_COUNT + 1, a->cols - 2, 2, w);
    /* header */
    attron(A_BOLD | A_UNDERLINE);
    int x = 1;
    a->sort_shown = vis - 1;
    for (int c = 0; c < vis; c++) {
        char h[80];
        /* A narrowed title gives way to the arrow, never the arrow to the title. */
        if (c > 0 && c - 1 == a->sort_col && w[c] > 1) {
            char fit[64];
            if (tui_text_width(cols[c].title) < w[c]) snprintf(fit, sizeof fit, "%s", cols[c].title);
            else tui_fit(cols[c].title, w[c] - 1, 0, a->utf8, fit, sizeof fit);
            snprintf(h, sizeof h, "%s%s", fit, sort_arrow(a));
        } else snprintf(h, sizeof h, "%s", cols[c].title);
        wb_text(a, 1, x, w[c], cols[c].right, h);
        if (c > 0) wb_header_add(a, 1, x, w[c], c - 1);   /* a click sorts by it */
        x += w[c] + 2;
    }
    attroff(A_BOLD | A_UNDERLINE);
    if (a->n_view == 0) {
        char b[256];
        snprintf(b, sizeof b, "No run matches the filter '%s' (%zu runs in all). Press / to change it.", a->filter, a->n_all);
        wb_text(a, y0 + 1, 2, a->cols - 4, 0, b);
        return;
    }
    if (a->sel >= (int)a->n_view) a->sel = (int)a->n_view - 1;
    if (a->sel < 0) a->sel = 0;
    if (a->sel < a->top) a->top = a->sel;
    if (a->sel >= a->top + page) a->top = a->sel - page + 1;
    if (a->top < 0) a->top = 0;
    for (int r = 0; r < page && a->top + r < (int)a->n_view; r++) {
        const store_run *run = &a->view[a->top + r];
        int selected = a->top + r == a->sel;
        if (selected) { attron(A_REVERSE); wb_fill(a, y0 + r, 0, a->cols); }
        x = 1;
        for (int c = 0; c < vis; c++) {
            char b[256];
            if (c == 0) snprintf(b, sizeof b, "%s", is_marked(a, run->id) ? (a->utf8 ? "\xe2\x97\x8f" : "*") : " ");
            else tui_run_cell(run, (tui_run_col)(c - 1), now, b, sizeof b);
            if (c - 1 == TUI_RC_NAME) {
                char fit[256];
                tui_fit_middle(b, w[c], 0, a->utf8, fit, sizeof fit);
                memcpy(b, fit, sizeof fit);
            }
            int at = c - 1 == TUI_RC_STATUS ? wb_status_attr(a, run->status) : 0;
            if (at) attron(at);
            wb_text(a, y0 + r, x, w[c], cols[c].right, b);
            if (at) attroff(at);
            x += w[c] + 2;
        }
        if (selected) attroff(A_REVERSE);
    }
    /* footer line inside the table area: counts, filter, marks */
    char f[256];
    snprintf(f, sizeof f, "%zu/%zu runs%s%s  sorted by %s%s  %d marked", a->n_view, a->n_all,
             a->filter[0] ? "  filter: " : "", a->filter, tui_run_col_names[a->sort_col], sort_arrow(a), a->n_marked);
    attron(A_DIM);
    wb_text(a, a->rows - 2, a->cols - 1 - tui_text_width(f), tui_text_width(f), 1, f);
    attroff(A_DIM);
}

static void filter_changed(wb_app *a, const char *s)
{
    (void)s;
    rebuild_view(a);
}

/* The marked runs the filter lets through, in marking order, into ids (room for 6);
 * *hidden gets how many marks the filter hides. c and d both act on these: what the
 * screen shows. */
static size_t shown_marks(const wb_app *a, long long *ids, int *hidden)
{
    size_t n = 0;
    *hidden = 0;
    for (int i = 0; i < a->n_marked; i++) {
        int shown = 0;
        for (size_t k = 0; k < a->n_view && !shown; k++) shown = a->view[k].id == a->marked[i];
        if (shown) ids[n++] = a->marked[i];
        else (*hidden)++;
    }
    return n;
}

/* c: compares the marked runs the screen shows; marks hidden by the filter are kept and
 * left out, and the message says so. */
static void compare_runs(wb_app *a)
{
    long long ids[6];
    int hidden;
    size_t n = shown_marks(a, ids, &hidden);
    /* one marked run alone is the CLI's `compare ID`; one shown of several marked is likely
     * not what was meant */
    if (n < 1 || (n == 1 && hidden)) {
        if (hidden) wb_message(a, "%zu marked run%s shown, %d hidden by the filter: clear it (Esc) or mark more", n,
                               n == 1 ? "" : "s", hidden);
        else wb_message(a, "mark 1 to 6 runs with Space first (%d marked)", a->n_marked);
        return;
    }
    wb_open_compare_ids(a, ids, (int)n);
    if (hidden && wb_compare_panel.st)
        wb_message(a, "comparing the %zu marked runs shown; %d more marked are hidden by the filter", n, hidden);
}

/* Deletes what the screen shows: the marked runs the filter lets through (marks hidden by
 * the filter are kept and the prompt says so), else the selected run. */
static void delete_runs(wb_app *a)
{
    long long ids[6];
    int hidden;
    size_t n = shown_marks(a, ids, &hidden);
    if (!n && !hidden && a->n_view) ids[n++] = a->view[a->sel].id;
    if (!n) {
        if (hidden) wb_message(a, "the %d marked run%s hidden by the filter; clear it (Esc) to delete them", hidden,
                               hidden == 1 ? " is" : "s are");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < a->n_all; k++)
            if (a->all[k].id == ids[i] && a->all[k].status == STORE_RUN_RUNNING &&
                a->live.run_id == ids[i] && wb_live_running(a)) {
                wb_message(a, "run #%lld is training: stop it first (K)", ids[i]);
                return;
            }
    }
    char list[128] = "";
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s#%lld", i ? ", " : "", ids[i]);
    }
    char keep[96] = "";
    if (hidden) snprintf(keep, sizeof keep, " (%d marked, hidden by the filter, stay)", hidden);
    if (!wb_confirm(a, "Delete run%s %s%s? This cannot be undone.", n > 1 ? "s" : "", list, keep)) return;
    if (store_runs_delete(a->db, ids, n, 0)) wb_message(a, "delete failed: %s", store_error());
    else wb_message(a, "deleted %s", list);
    wb_reload_runs(a); /* drops the marks of the deleted runs, keeps the hidden ones */
}

static int runs_key(wb_app *a, tui_action act, int ch)
{
    int page = a->rows - 4;
    (void)ch;
    switch (act) {
    case TUI_ACT_UP: a->sel--; break;
    case TUI_ACT_DOWN: a->sel++; break;
    case TUI_ACT_PGUP: a->sel -= page; break;
    case TUI_ACT_PGDN: a->sel += page; break;
    case TUI_ACT_HOME: a->sel = 0; break;
    case TUI_ACT_END: a->sel = (int)a->n_view - 1; break;
    case TUI_ACT_OPEN:
        if (a->n_view) wb_open_run(a, a->view[a->sel].id);
        break;
    case TUI_ACT_MARK: {
        if (!a->n_view) break;
        long long id = a->view[a->sel].id;
        int found = -1;
        for (int i = 0; i < a->n_marked; i++)
            if (a->marked[i] == id) found = i;
        if (found >= 0) {
            memmove(&a->marked[found], &a->marked[found + 1], (size_t)(a->n_marked - found - 1) * sizeof a->marked[0]);
            a->n_marked--;
        } else if (a->n_marked < 6) a->marked[a->n_marked++] = id;
        else wb_message(a, "at most 6 runs can be compared");
        a->sel++;
        break;
    }
    case TUI_ACT_COMPARE:
        compare_runs(a);
        break;
    case TUI_ACT_NEW: wb_open_new(a); break;
    case TUI_ACT_FILTER:
        wb_prompt(a, "filter (words, field:word, !word; the list follows as you type)", a->filter, sizeof a->filter, filter_changed);
        rebuild_view(a);
        break;
    case TUI_ACT_SORT:
        /* A new column starts ascending; S flips it. s cycles the columns the table shows
         * (at 80 columns the last ones are dropped: sorting by them would move rows for a
         * reason nobody can see). */
        a->sort_col = (a->sort_col + 1) % (a->sort_shown > 0 && a->sort_shown < TUI_RC_COUNT ? a->sort_shown : TUI_RC_COUNT);
        a->sort_desc = 0;
        rebuild_view(a);
        wb_message(a, "sorted by %s", tui_run_col_names[a->sort_col]);
        break;
    case TUI_ACT_SORT_ORDER:
        a->sort_desc = !a->sort_desc;
        rebuild_view(a);
        break;
    case TUI_ACT_SORT_PICK: {
        /* the columns the table shows, as s cycles them */
        int n = a->sort_shown > 0 && a->sort_shown < TUI_RC_COUNT ? a->sort_shown : TUI_RC_COUNT;
        int k = wb_pick(a, "sort the runs by", tui_run_col_names, n, a->sort_col);
        if (k >= 0) {
            wb_sort_by(&a->sort_col, &a->sort_desc, k);
            rebuild_view(a);
        }
        break;
    }
    case TUI_ACT_DELETE: delete_runs(a); break;
    case TUI_ACT_CLEAR_MARKS:
        wb_message(a, "%d mark%s cleared", a->n_marked, a->n_marked == 1 ? "" : "s");
        a->n_marked = 0;
        break;
    case TUI_ACT_REFRESH: wb_reload_runs(a); wb_message(a, "reloaded %zu runs", a->n_all); break;
    case TUI_ACT_STOP: wb_stop_key(a, selected_run(a)); break;
    case TUI_ACT_BACK:
        if (a->filter[0]) { a->filter[0] = 0; rebuild_view(a); }
        break;
    default: return 0;
    }
    if (a->sel >= (int)a->n_view) a->sel = (int)a->n_view - 1;
    if (a->sel < 0) a->sel = 0;
    return 1;
}

/* A click on a run's row selects it; on the selected row, opens it (as Enter); on a column
 * title, sorts by it. */
static void runs_click(wb_app *a, int y, int x)
{
    int key = wb_header_hit(a, y, x);
    if (key >= 0) {   /* a column title: sort by it, again: reversed */
        wb_sort_by(&a->sort_col, &a->sort_desc, key);
        rebuild_view(a);
        return;
    }
    int r = y - 2, idx = a->top + r;   /* rows start at 2 (runs_draw) */
    if (r < 0 || y > a->rows - 3 || idx >= (int)a->n_view) return;
    if (idx == a->sel) wb_open_run(a, a->view[idx].id);
    else a->sel = idx;
}

/* K is offered while something can be stopped: the workbench's job or the selected run
 * when another nnbench process of this host runs it. */
static int runs_offers(wb_app *a, tui_action act)
{
    return act != TUI_ACT_STOP || wb_stop_offered(a, selected_run(a));
}

wb_panel wb_runs_panel = { .title = "Runs", .screen = TUI_SCR_RUNS, .draw = runs_draw, .key = runs_key,
                           .reload = wb_reload_runs, .offers = runs_offers,
                           .click = runs_click };
