/* wb_draw.c — drawing helpers every workbench screen shares: colours, fitted text, bars,
 * chart canvases and the chart toggles, scrolling text, the op table. No state of its own. */
#include "wb.h"

#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

const double wb_smooth_levels[3] = { 0, 0.6, 0.9 };
const char *const wb_metric_keys[4] = { "train_loss", "test_loss", "train_acc", "test_acc" };
const char *const wb_x_names[3] = { "step", "wall time (s)", "hybrid time (s)" };

double wb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}


void wb_colours_init(wb_app *a)
{
    if (!a->color) return;
    start_color();
    use_default_colors();
    short cols[6] = { COLOR_CYAN, COLOR_YELLOW, COLOR_MAGENTA, COLOR_GREEN, COLOR_RED, COLOR_BLUE };
    for (int i = 0; i < 6; i++) init_pair((short)(1 + i), cols[i], -1);
    init_pair(WB_PAIR_TITLE, COLOR_BLACK, COLOR_CYAN);
    init_pair(WB_PAIR_STATUS, COLOR_BLACK, COLOR_WHITE);
    init_pair(WB_PAIR_GOOD, COLOR_GREEN, -1);
    init_pair(WB_PAIR_BAD, COLOR_RED, -1);
    init_pair(WB_PAIR_WARN, COLOR_YELLOW, -1);
    init_pair(WB_PAIR_RUNNING, COLOR_CYAN, -1);
    init_pair(WB_PAIR_DIM, COLOR_BLUE, -1);
    /* the Layers heat map, cold to hot: blue, cyan, green, yellow, red, magenta */
    static const short bg[WB_HEAT_LEVELS] = { COLOR_BLUE, COLOR_BLUE, COLOR_CYAN, COLOR_CYAN, COLOR_GREEN,
                                              COLOR_GREEN, COLOR_YELLOW, COLOR_YELLOW, COLOR_RED, COLOR_MAGENTA };
    for (int i = 0; i < WB_HEAT_LEVELS; i++) init_pair((short)(WB_PAIR_HEAT + i), COLOR_BLACK, bg[i]);
}

int wb_series_attr(wb_app *a, int s)
{
    if (s < 0) return 0;
    if (!a->color) return s == 0 ? A_BOLD : 0;
    return COLOR_PAIR(1 + s % 6);
}

int wb_status_attr(wb_app *a, int st)
{
    if (!a->color) return st == STORE_RUN_RUNNING ? A_BOLD : st >= STORE_RUN_FAILED ? A_UNDERLINE : 0;
    switch (st) {
    case STORE_RUN_RUNNING: return COLOR_PAIR(WB_PAIR_RUNNING) | A_BOLD;
    case STORE_RUN_FINISHED: return COLOR_PAIR(WB_PAIR_GOOD);
    case STORE_RUN_INTERRUPTED: return COLOR_PAIR(WB_PAIR_WARN);
    default: return COLOR_PAIR(WB_PAIR_BAD);
    }
}

/* ---- drawing helpers --------------------------------------------------------------- */

void wb_text(wb_app *a, int y, int x, int w, int right, const char *s)
{
    if (w <= 0 || y < 0 || y >= a->rows || x >= a->cols) return;
    if (x + w > a->cols) w = a->cols - x;
    char buf[2048];
    tui_fit(s, w, right, a->utf8, buf, sizeof buf);
    mvaddstr(y, x, buf);
}

void wb_fill(wb_app *a, int y, int x, int w)
{
    if (y < 0 || y >= a->rows) return;
    if (x + w > a->cols) w = a->cols - x;
    for (int i = 0; i < w; i++) mvaddch(y, x + i, ' ');
}

void wb_draw_canvas(wb_app *a, int y, int x, const tui_canvas *c)
{
    for (int r = 0; r < c->h && y + r < a->rows; r++) {
        move(y + r, x);
        for (int k = 0; k < c->w && x + k < a->cols; k++) {
            const tui_cell *e = &c->cells[r * c->w + k];
            char b[8];
            tui_utf8_put(e->ch, b);
            int at = wb_series_attr(a, e->series);
            if (at) attron(at);
            addstr(b);
            if (at) attroff(at);
        }
    }
}

void wb_bar(wb_app *a, int y, int x, int w, double frac)
{
    if (!(frac > 0)) frac = 0;
    if (frac > 1) frac = 1;
    int eighths = (int)lround(frac * w * 8);
    move(y, x);
    for (int i = 0; i < w; i++) {
        int e = eighths - i * 8;
        if (e >= 8) addstr(a->utf8 ? "\xe2\x96\x88" : "#");
        else if (e > 0 && a->utf8) {
            char b[8];
            tui_utf8_put(0x2590 - e, b); /* U+258F (1/8) .. U+2589 (7/8) */
            addstr(b);
        } else addch(e >= 4 ? '#' : ' ');
    }
}

int wb_scroll_key(tui_action act, int *scroll, int total, int page)
{
    int s = *scroll;
    switch (act) {
    case TUI_ACT_UP: s--; break;
    case TUI_ACT_DOWN: s++; break;
    case TUI_ACT_PGUP: s -= page; break;
    case TUI_ACT_PGDN: s += page; break;
    case TUI_ACT_HOME: s = 0; break;
    case TUI_ACT_END: s = total; break;
    default: return 0;
    }
    if (s > total - page) s = total - page;
    if (s < 0) s = 0;
    *scroll = s;
    return 1;
}

int wb_draw_lines(wb_app *a, char **lines, size_t n, int y0, int y1, int *scroll)
{
    int page = y1 - y0 + 1;
    /* Lines that do not fit give up the last row to the position ("13-29/30"): drawn on
     * a text row it would cover the row's last cell. */
    int scrolls = (int)n > page && page > 1;
    if (scrolls) page--;
    if (*scroll > (int)n - page) *scroll = (int)n - page;
    if (*scroll < 0) *scroll = 0;
    for (int r = 0; r < page; r++) {
        size_t i = (size_t)(*scroll + r);
        if (i < n) wb_text(a, y0 + r, 1, a->cols - 2, 0, lines[i]);
    }
    if (scrolls) {
        char b[48];
        snprintf(b, sizeof b, "%d-%d/%zu", *scroll + 1, *scroll + page < (int)n ? *scroll + page : (int)n, n);
        attron(A_DIM);
        wb_text(a, y1, a->cols - 1 - (int)strlen(b), (int)strlen(b), 1, b);
        attroff(A_DIM);
    }
    return page;
}

void wb_draw_op_table(wb_app *a, const prof_table *t, int y, int page, int scroll)
{
    /* the model's shown columns, with the self-share bar after "self %" */
    tui_col cols[PROF_COL_N + 1];
    int map[PROF_COL_N + 1], ncol = 0, w[PROF_COL_N + 1];
    /* Widths from the cells: numbers are never cut (a column that does not fit is dropped
     * from the right), names keep at least their model minimum before anything is dropped. */
    for (int c = 0; c < PROF_COL_N; c++) {
        if (!t->show[c]) continue;
        const prof_col_def *d = &prof_cols[c];
        int want = tui_text_width(d->title);
        for (size_t i = 0; i < t->n; i++) {
            char cell[256];
            int cw = tui_text_width(prof_table_cell(t, &t->rows[i], (prof_col)c, cell, sizeof cell));
            if (cw > want) want = cw;
        }
        if (!d->right && want > d->width) want = d->width;
        int min = d->right || want < d->min_width ? want : d->min_width;
        cols[ncol] = (tui_col){ d->title, want, min, d->right, 0 };
        map[ncol++] = c;
        /* the bar takes the width left over, and gives it back first when short */
        if (c == PROF_COL_SELF_PCT) { cols[ncol] = (tui_col){ "", 10, 4, 0, 1 }; map[ncol++] = -1; }
    }
    int vis = tui_table_layout(cols, ncol, a->cols - 2, 1, w);
    int x = 1;
    attron(A_BOLD | A_UNDERLINE);
    for (int c = 0; c < vis; c++) {
        wb_text(a, y, x, w[c], cols[c].right, cols[c].title);
        if (map[c] >= 0) wb_header_add(a, y, x, w[c], prof_col_sort((prof_col)map[c]));   /* a click sorts */
        x += w[c] + 1;
    }
    attroff(A_BOLD | A_UNDERLINE);
    for (int r = 0; r < page && scroll + r < (int)t->n; r++) {
        const store_op_row *o = &t->rows[scroll + r];
        double frac = prof_table_self_share(t, o);
        x = 1;
        for (int c = 0; c < vis; c++) {
            char cell[256];
            if (map[c] < 0) {
                attron(wb_series_attr(a, 0));
                wb_bar(a, y + 1 + r, x, w[c], frac);
                attroff(wb_series_attr(a, 0));
            } else {
                wb_text(a, y + 1 + r, x, w[c], cols[c].right, prof_table_cell(t, o, (prof_col)map[c], cell, sizeof cell));
            }
            x += w[c] + 1;
        }
    }
}


const double *wb_pick_x(int axis, const double *step, const double *wall, const double *hybrid)
{
    return axis == 1 ? wall : axis == 2 ? hybrid : step;
}

void wb_chart_at(wb_app *a, int y, int x, int w, int h, const tui_series *s, size_t ns,
                 const char *title, const char *ylab, int log_y)
{
    tui_chart_opts o = {
        .width = w, .height = h, .utf8 = a->utf8, .mono = !a->color, .log_y = log_y, .x_scale = a->x_scale,
        .smooth = wb_smooth_levels[a->smooth_idx], .x_label = wb_x_names[a->x_axis],
        .y_label = ylab, .title = title,
    };
    tui_canvas c;
    if (tui_chart_draw(s, ns, &o, &c)) {
        wb_text(a, y, x, w, 0, "(chart: not enough room)");
        return;
    }
    wb_draw_canvas(a, y, x, &c);
    tui_canvas_free(&c);
}

void wb_toggles_text(wb_app *a, char *b, size_t n)
{
    snprintf(b, n, "x: %s%s  y: %s  smoothing: %s", wb_x_names[a->x_axis],
             a->x_scale == TUI_X_LOG ? " (log)" : a->x_scale == TUI_X_NORM ? " (normalised per run)" : "",
             a->log_y ? "log" : "linear",
             a->smooth_idx ? (a->smooth_idx == 1 ? "0.6" : "0.9") : "off");
}

int wb_chart_toggle(wb_app *a, tui_action act)
{
    switch (act) {
    case TUI_ACT_LOG_Y: a->log_y = !a->log_y; return 1;
    case TUI_ACT_X_AXIS: a->x_axis = (a->x_axis + 1) % 3; return 1;
    case TUI_ACT_X_SCALE: a->x_scale = (a->x_scale + 1) % TUI_X_N_SCALES; return 1;
    case TUI_ACT_SMOOTH: a->smooth_idx = (a->smooth_idx + 1) % 3; return 1;
    default: return 0;
    }
}

/* Clickable column titles: the last drawn header row and its spans (a click sorts). */
void wb_header_add(wb_app *a, int y, int x, int w, int key)
{
    if (a->hdr_n >= (int)(sizeof a->hdr_key / sizeof a->hdr_key[0])) return;
    a->hdr_y = y;
    a->hdr_x0[a->hdr_n] = x;
    a->hdr_x1[a->hdr_n] = x + w;
    a->hdr_key[a->hdr_n++] = key;
}

int wb_header_hit(const wb_app *a, int y, int x)
{
    if (y != a->hdr_y) return -1;
    for (int i = 0; i < a->hdr_n; i++)
        if (x >= a->hdr_x0[i] && x < a->hdr_x1[i]) return a->hdr_key[i];
    return -1;
}
