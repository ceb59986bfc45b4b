/* chart.h — terminal line charts on a cell canvas: Unicode braille (2x4 dots per cell)
 * or an ASCII fallback, with axes, tick labels and a legend. The same canvas is printed
 * with ANSI colours by the CLI (compare) and drawn with ncurses colour pairs by the TUI.
 */
#ifndef NNBENCH_TUI_CHART_H
#define NNBENCH_TUI_CHART_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    const char *label;
    const double *x, *y;  /* n points; NaN y values are gaps */
    size_t n;
} tui_series;

/* How x is scaled: as it is, log10 (non-positive x skipped), or each series divided by
 * its own largest x (so runs of very different lengths share the width). */
enum { TUI_X_LINEAR, TUI_X_LOG, TUI_X_NORM, TUI_X_N_SCALES };
extern const char *const tui_x_scale_names[TUI_X_N_SCALES]; /* "linear", "log", "normalised" */

typedef struct {
    int width, height;    /* canvas size in cells, axes and legend included */
    int utf8;             /* 1: braille cells; 0: ASCII markers */
    int mono;             /* no colour: series drawn with their own marker glyph (as in
                             ASCII mode) so they are told apart without colour */
    int log_y;            /* log10 y axis (non-positive values skipped) */
    int x_scale;          /* TUI_X_* */
    double smooth;        /* 0 = none; else EMA weight in [0,1) with TensorBoard's debiasing */
    const char *x_label, *y_label, *title;
} tui_chart_opts;

typedef struct {
    uint32_t ch;          /* Unicode code point */
    int8_t series;        /* index of the series drawn here, -1 for axes/labels/blank */
} tui_cell;

typedef struct {
    int w, h;
    tui_cell *cells;      /* w*h, row-major */
} tui_canvas;

/* The legend wraps onto up to 3 rows when the labels do not fit one. */
/* Draws the chart into a newly allocated canvas (free with tui_canvas_free). 0 ok,
 * -1 if the size is too small or memory ran out. */
int tui_chart_draw(const tui_series *s, size_t ns, const tui_chart_opts *o, tui_canvas *out);
/* The rows the legend of these series takes in a chart of width W (0 to 3); a chart of
 * height H plots on H - 3 - this rows (title row, x axis and its labels). */
int tui_chart_legend_rows(const tui_series *s, size_t ns, int W);
/* v[0..n) as a one-line sparkline, one cell per value scaled between their min and max
 * ("▁▂▃▅▇█"; ASCII "_.-=*#" without utf8; non-finite values a space). buf gets a
 * NUL-terminated string (at most cap bytes). */
void tui_sparkline(const double *v, size_t n, int utf8, char *buf, size_t cap);
void tui_canvas_free(tui_canvas *c);
/* Prints the canvas as UTF-8 text; with ansi, series get distinct ANSI colours. */
void tui_canvas_print(FILE *f, const tui_canvas *c, int ansi);

/* Exponential moving average with TensorBoard's bias correction; out may equal in. */
void tui_smooth_ema(const double *in, double *out, size_t n, double weight);

/* ---- building blocks, exposed for tests and the workbench ---------------------------- */

/* Braille dot bit for the dot at (dx in 0..1, dy in 0..3 from the top) of one cell. */
unsigned tui_braille_bit(int dx, int dy);
/* The code point of a braille cell with the given dot bits (U+2800 + bits). */
static inline uint32_t tui_braille_char(unsigned bits) { return 0x2800u + (bits & 0xffu); }
/* Up to max_ticks "nice" ticks (1, 2, 5 x 10^k) covering [lo, hi]: fills ticks[] and
 * returns their count; *step gets the spacing. */
int tui_nice_ticks(double lo, double hi, int max_ticks, double *ticks, double *step);
/* A short label for a tick value ("0.25", "1.5k", "2e-05") into buf of size n. */
void tui_tick_label(double v, double step, char *buf, size_t n);
/* UTF-8 bytes of a code point into buf (>= 5 bytes, NUL-terminated); returns the length. */
int tui_utf8_put(uint32_t cp, char *buf);
/* ANSI foreground colour number (30-37) of a series index; the workbench uses the same
 * order for its colour pairs so the CLI and the TUI agree. */
int tui_series_ansi(int series);
/* The marker of a series in ASCII mode and in the legend of ASCII charts. */
char tui_series_marker(int series);

#endif
