/* cmp_scaling.c — the scaling view (store/scaling.c) in the terminal: one table per measure
 * (n down, a column per variant, the fitted exponent last) and the log-log chart series
 * with the exponent in their legend; `compare` and the Compare screen draw the same. */
#include "tui.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SC_LW 10   /* the n column */
#define SC_CW 14   /* widest series column */

/* One row: label, then one right-aligned cell per series. */
static int scale_row(char ***lines, size_t *n, const char *label, char (*cells)[64], size_t ns, int cw, int utf8)
{
    char row[2048], fit[256];
    size_t o = 0;
    tui_fit(label, SC_LW, 0, utf8, fit, sizeof fit);
    o += (size_t)snprintf(row, sizeof row, "  %s", fit);
    for (size_t k = 0; k < ns && o + 1 < sizeof row; k++) {
        tui_fit(cells[k], cw - 1, 1, utf8, fit, sizeof fit);
        int w = snprintf(row + o, sizeof row - o, " %s", fit);
        if (w < 0) break;
        o += (size_t)w < sizeof row - o ? (size_t)w : sizeof row - o - 1;
    }
    return tui_lines_add(lines, n, "%s", row);
}

/* The table of one measure: a heading, the series names, a row per n, the exponents. */
static int scale_table(const store_scaling *s, store_scale_measure m, int cw, int utf8, char ***lines, size_t *n)
{
    char (*cells)[64] = calloc(s->n_series ? s->n_series : 1, sizeof *cells);
    if (!cells) return -1;
    int rc = tui_lines_add(lines, n, "%s", "") ||
             tui_lines_add(lines, n, "%s: %s", store_scale_defs[m].title, store_scale_defs[m].doc);
    for (size_t k = 0; k < s->n_series; k++) snprintf(cells[k], 64, "%s", s->series[k].label);
    rc = rc || scale_row(lines, n, "n", cells, s->n_series, cw, utf8);
    for (size_t j = 0; j < s->n_xs && !rc; j++) {
        char lab[32];
        snprintf(lab, sizeof lab, "%.0f", s->xs[j]);
        for (size_t k = 0; k < s->n_series; k++) store_scale_cell(&s->series[k], s->xs[j], m, cells[k], 64);
        rc = scale_row(lines, n, lab, cells, s->n_series, cw, utf8);
    }
    for (size_t k = 0; k < s->n_series; k++) store_fit_text(&s->series[k].fit[m], cells[k], 64);
    rc = rc || scale_row(lines, n, "exponent", cells, s->n_series, cw, utf8);
    /* what was not fitted, or fitted without some points, is said under the table */
    for (size_t k = 0; k < s->n_series && !rc; k++)
        if (s->series[k].fit[m].note[0])
            rc = tui_lines_add(lines, n, "  %s: %s", s->series[k].label, s->series[k].fit[m].note);
    free(cells);
    return rc ? -1 : 0;
}

int tui_scaling_lines(const store_scaling *s, int width, int utf8, char ***lines, size_t *n)
{
    if (s->n_xs < 2) return s->note[0] ? tui_lines_add(lines, n, "%s", s->note) : 0;
    int cw = s->n_series ? (width - 2 - SC_LW) / (int)s->n_series : SC_CW;
    if (cw > SC_CW) cw = SC_CW;
    if (cw < 6) cw = 6;
    if (tui_lines_add(lines, n, "%s", "") ||
        tui_lines_add(lines, n, "Scaling against n (%s): one series per variant, exponent = least-squares slope of "
                                "log y on log n", s->x_key))
        return -1;
    if (s->note[0] && tui_lines_add(lines, n, "  %s", s->note)) return -1;
    for (int m = 0; m < STORE_SCALE_N; m++)
        if (scale_table(s, (store_scale_measure)m, cw, utf8, lines, n)) return -1;
    return 0;
}

size_t tui_scaling_series(const store_scaling *s, store_scale_measure m, tui_series *out, char (*labels)[96], size_t cap)
{
    size_t k = 0;
    for (; k < s->n_series && k < cap; k++) {
        const store_scale_series *sr = &s->series[k];
        char e[32];
        snprintf(labels[k], 96, "%s n^%s", sr->label, store_fit_text(&sr->fit[m], e, sizeof e));
        out[k] = (tui_series){ .label = labels[k], .x = sr->x, .y = sr->y[m], .n = sr->n };
    }
    return k;
}

void tui_scaling_chart_opts(store_scale_measure m, tui_chart_opts *o, char *title, size_t cap)
{
    snprintf(title, cap, "%s against n, log-log (legend: the fitted exponent)", store_scale_defs[m].title);
    o->x_scale = TUI_X_LOG;
    o->log_y = 1;
    o->smooth = 0;
    o->x_label = "n";
    o->y_label = store_scale_defs[m].bytes ? "bytes" : "seconds";
    o->title = title;
}
