/* chart.c — line charts on a cell canvas: braille dots (2x4 per cell) or ASCII markers,
 * nice-number axes, legend, log-y and TensorBoard-style smoothing. No curses here.
 */
#include "chart.h"
#include "../profiler/profiler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GAP_OK(v) (isfinite(v))

const char *const tui_x_scale_names[TUI_X_N_SCALES] = { "linear", "log", "normalised" };

/* ---- small pieces ------------------------------------------------------------------ */

unsigned tui_braille_bit(int dx, int dy)
{
    /* Unicode's braille numbering: dots 1-3 and 7 down the left column, 4-6 and 8 down
     * the right one; bit k is dot k+1. */
    static const unsigned bits[2][4] = { { 0x01, 0x02, 0x04, 0x40 }, { 0x08, 0x10, 0x20, 0x80 } };
    if (dx < 0 || dx > 1 || dy < 0 || dy > 3) return 0;
    return bits[dx][dy];
}

int tui_utf8_put(uint32_t cp, char *b)
{
    int n;
    if (cp < 0x80) { b[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { b[0] = (char)(0xc0 | (cp >> 6)); b[1] = (char)(0x80 | (cp & 0x3f)); n = 2; }
    else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12)); b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f)); n = 3;
    } else {
        b[0] = (char)(0xf0 | (cp >> 18)); b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); b[3] = (char)(0x80 | (cp & 0x3f)); n = 4;
    }
    b[n] = 0;
    return n;
}

int tui_series_ansi(int series)
{
    static const int col[] = { 36, 33, 35, 32, 31, 34 };
    if (series < 0) return 39;
    return col[series % 6];
}

char tui_series_marker(int series)
{
    static const char mk[] = "*+ox#@";
    if (series < 0) return ' ';
    return mk[series % 6];
}

void tui_smooth_ema(const double *in, double *out, size_t n, double weight)
{
    /* TensorBoard's smoothing: an EMA started at 0 and divided by (1 - w^k) so the first
     * points are not dragged towards zero; non-finite points pass through untouched. */
    if (!(weight > 0) || weight >= 1) {
        if (out != in) memmove(out, in, n * sizeof *out);
        return;
    }
    double last = 0, wk = 1;
    for (size_t i = 0; i < n; i++) {
        double v = in[i];
        if (!isfinite(v)) { out[i] = v; continue; }
        last = last * weight + (1 - weight) * v;
        wk *= weight;
        out[i] = last / (1 - wk);
    }
}

static double nice_num(double x, int round_it)
{
    double e = floor(log10(x)), f = x / pow(10, e), nf;
    if (round_it) nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    else nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    return nf * pow(10, e);
}

int tui_nice_ticks(double lo, double hi, int max_ticks, double *ticks, double *step)
{
    if (max_ticks < 2) max_ticks = 2;
    if (!(hi > lo)) { ticks[0] = lo; if (step) *step = 1; return 1; }
    double range = nice_num(hi - lo, 0);
    double st = nice_num(range / (max_ticks - 1), 1);
    /* Rounding may leave one tick too many: widen the step until they fit. */
    for (;;) {
        double first = ceil(lo / st - 1e-9) * st;
        int k = 0;
        for (double t = first; t <= hi + st * 1e-9; t = first + st * ++k)
            if (k >= max_ticks) break;
        if (k <= max_ticks) break;
        st = nice_num(st * 1.5, 1);
    }
    double first = ceil(lo / st - 1e-9) * st;
    int k = 0;
    for (; k < max_ticks; k++) {
        double t = first + st * k;
        if (t > hi + st * 1e-9) break;
        ticks[k] = fabs(t) < st * 1e-9 ? 0 : t;
    }
    if (step) *step = st;
    return k;
}

void tui_tick_label(double v, double step, char *buf, size_t n)
{
    double a = fabs(v);
    if (v == 0) { snprintf(buf, n, "0"); return; }
    if (a >= 1e12 || !isfinite(v)) { snprintf(buf, n, "%.1e", v); return; }
    if (a >= 1e9) { snprintf(buf, n, "%.3gG", v / 1e9); return; }
    if (a >= 1e6) { snprintf(buf, n, "%.3gM", v / 1e6); return; }
    if (a >= 1e4) { snprintf(buf, n, "%.3gk", v / 1e3); return; }
    int d = step > 0 ? (int)-floor(log10(step) + 1e-9) : 2;
    if (d < 0) d = 0;
    if (d > 4 || a < 1e-4) { snprintf(buf, n, "%.1e", v); return; }
    snprintf(buf, n, "%.*f", d, v);
}

/* ---- canvas ------------------------------------------------------------------------ */

void tui_canvas_free(tui_canvas *c)
{
    if (!c) return;
    free(c->cells);
    c->cells = NULL;
    c->w = c->h = 0;
}

static void put(tui_canvas *c, int x, int y, uint32_t ch, int series)
{
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
    c->cells[(size_t)y * c->w + x].ch = ch;
    c->cells[(size_t)y * c->w + x].series = (int8_t)series;
}

static uint32_t utf8_next(const char **ps)
{
    const unsigned char *s = (const unsigned char *)*ps;
    uint32_t cp = s[0];
    int n = 1;
    if (cp >= 0xf0 && s[1] && s[2] && s[3]) { cp = ((cp & 7u) << 18) | ((s[1] & 0x3fu) << 12) | ((s[2] & 0x3fu) << 6) | (s[3] & 0x3fu); n = 4; }
    else if (cp >= 0xe0 && s[1] && s[2]) { cp = ((cp & 15u) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu); n = 3; }
    else if (cp >= 0xc0 && s[1]) { cp = ((cp & 31u) << 6) | (s[1] & 0x3fu); n = 2; }
    else if (cp >= 0x80) cp = '?';
    *ps += n;
    return cp;
}

/* Writes text from column x, clipped at column xmax (exclusive); returns the end column. */
/* Labels are run names and metric keys from the database: control and bidi characters
 * go on the canvas as \x1b, \u202e (prof_text_visible), never raw. */
static int put_text(tui_canvas *c, int x, int y, const char *s, int series, int xmax, int utf8)
{
    char vis[512];
    s = prof_text_visible(vis, sizeof vis, s);
    while (*s && x < xmax) {
        uint32_t cp = utf8_next(&s);
        if (!utf8 && cp >= 0x80) cp = '?';
        put(c, x++, y, cp, series);
    }
    return x;
}

static int text_len(const char *s)
{
    char vis[512];
    s = prof_text_visible(vis, sizeof vis, s);
    int n = 0;
    while (*s) { utf8_next(&s); n++; }
    return n;
}

/* ---- plotting ---------------------------------------------------------------------- */

typedef struct {
    int pw, ph;            /* plot area in cells */
    int dw, dh;            /* plot area in dots (braille) or cells (ascii) */
    unsigned char *bits;   /* per cell: braille dot bits / ascii "set" flag */
    int8_t *owner;         /* per cell: last series drawn there */
    int utf8;
} plot;

static void plot_dot(plot *p, int x, int y, int series)
{
    if (x < 0 || y < 0 || x >= p->dw || y >= p->dh) return;
    int cx = p->utf8 ? x / 2 : x, cy = p->utf8 ? y / 4 : y;
    size_t i = (size_t)cy * p->pw + cx;
    p->bits[i] |= p->utf8 ? (unsigned char)tui_braille_bit(x % 2, y % 4) : 1;
    p->owner[i] = (int8_t)series;
}

static void plot_line(plot *p, int x0, int y0, int x1, int y1, int series)
{
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
        plot_dot(p, x0, y0, series);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) { err += dy; x0 += sx; }
        if (e2 <= dx) { err += dx; y0 += sy; }
    }
}

static double ty(double v, int log_y)
{
    if (!isfinite(v)) return NAN;
    if (log_y) return v > 0 ? log10(v) : NAN;
    return v;
}

/* One chart being drawn: its stages (layout, transformed data, y ticks, plot, axes, header
 * and legend) share it. */
typedef struct {
    const tui_series *s;
    size_t ns;
    const tui_chart_opts *o;
    int W, H, utf8, cellplot;
    int header, legend_rows;
    int ph, pw, gw, x0, top;     /* plot area in cells; y label width; plot origin */
    double **xs, **ys;           /* transformed (smoothed, logged, scaled) copies of each series */
    double xmin, xmax, ymin, ymax;
    int have_data;
    double yt[32], ystep;        /* y ticks and their labels */
    int nyt;
    char ylab[32][24];
    plot p;
} chart;

/* Legend rows: entries ("━━ label  ") wrap at the width, at most 3 rows. */
int tui_chart_legend_rows(const tui_series *s, size_t ns, int W)
{
    int rows = 0, x = 0;
    for (size_t i = 0; i < ns; i++) {
        if (!s[i].label || !*s[i].label) continue;
        int l = 3 + text_len(s[i].label) + 2;
        if (!rows || (x + l > W - 8 && x > 0)) { rows++; x = 0; }
        x += l;
    }
    return rows > 3 ? 3 : rows;
}

/* The transformed copies of every series and the data range (widened when flat). -1 when
 * out of memory. */
static int chart_transform(chart *c)
{
    const tui_chart_opts *o = c->o;
    const tui_series *s = c->s;
    c->xmin = INFINITY; c->xmax = -INFINITY; c->ymin = INFINITY; c->ymax = -INFINITY;
    c->ys = calloc(c->ns ? c->ns : 1, sizeof *c->ys);
    c->xs = calloc(c->ns ? c->ns : 1, sizeof *c->xs);
    if (!c->ys || !c->xs) return -1;
    for (size_t i = 0; i < c->ns; i++) {
        double *ys = c->ys[i] = malloc((s[i].n ? s[i].n : 1) * sizeof(double));
        double *xs = c->xs[i] = malloc((s[i].n ? s[i].n : 1) * sizeof(double));
        if (!ys || !xs) return -1;
        if (s[i].n) tui_smooth_ema(s[i].y, ys, s[i].n, o->smooth);
        double xm = 0;
        for (size_t k = 0; k < s[i].n; k++) {
            double x = s[i].x ? s[i].x[k] : (double)k;
            if (isfinite(x) && x > xm) xm = x;
        }
        for (size_t k = 0; k < s[i].n; k++) {
            double x = s[i].x ? s[i].x[k] : (double)k;
            if (o->x_scale == TUI_X_LOG) x = x > 0 ? log10(x) : NAN;
            else if (o->x_scale == TUI_X_NORM) x = xm > 0 ? x / xm : NAN;
            xs[k] = x;
        }
        for (size_t k = 0; k < s[i].n; k++) {
            double x = xs[k], y = ty(ys[k], o->log_y);
            ys[k] = y;
            if (!GAP_OK(y) || !isfinite(x)) continue;
            if (x < c->xmin) c->xmin = x;
            if (x > c->xmax) c->xmax = x;
            if (y < c->ymin) c->ymin = y;
            if (y > c->ymax) c->ymax = y;
        }
    }
    c->have_data = isfinite(c->xmin) && isfinite(c->ymin);
    if (!c->have_data) { c->xmin = 0; c->xmax = 1; c->ymin = 0; c->ymax = 1; }
    if (c->xmax == c->xmin) { c->xmin -= 0.5; c->xmax += 0.5; }
    if (c->ymax == c->ymin) {
        double d = fabs(c->ymin) > 0 ? fabs(c->ymin) * 0.1 : 1;
        c->ymin -= d; c->ymax += d;
    }
    return 0;
}

/* y ticks: nice numbers; the y range is widened to whole steps so the top and bottom rows
 * carry labels. Sets the label width gw. */
static void chart_yticks(chart *c)
{
    int max_yt = c->ph / 2 + 1;
    if (max_yt > 8) max_yt = 8;
    tui_nice_ticks(c->ymin, c->ymax, max_yt, c->yt, &c->ystep);
    double ystep = c->ystep;
    if (c->o->log_y && ystep < 1 && c->ymax - c->ymin >= 1) ystep = c->ystep = 1;
    c->ymin = floor(c->ymin / ystep + 1e-9) * ystep;
    c->ymax = ceil(c->ymax / ystep - 1e-9) * ystep;
    int nyt = 0;
    for (double t = c->ymin; t <= c->ymax + ystep * 1e-6 && nyt < 32; t = c->ymin + ystep * ++nyt)
        c->yt[nyt] = fabs(t) < ystep * 1e-9 ? 0 : t;
    /* Too many rows of labels for the height: keep every other one. */
    while (nyt > max_yt + 1) {
        int m = 0;
        for (int i = 0; i < nyt; i += 2) c->yt[m++] = c->yt[i];
        nyt = m;
    }
    c->nyt = nyt;
    c->gw = 1;
    for (int i = 0; i < nyt; i++) {
        double v = c->o->log_y ? pow(10, c->yt[i]) : c->yt[i];
        if (c->o->log_y) snprintf(c->ylab[i], sizeof c->ylab[i], "%.3g", v);
        else tui_tick_label(v, ystep, c->ylab[i], sizeof c->ylab[i]);
        int l = (int)strlen(c->ylab[i]);
        if (l > c->gw) c->gw = l;
    }
    if (c->gw > 10) c->gw = 10;
}

/* The canvas, blank, with every series drawn in the plot area. -1 when out of memory. */
static int chart_plot(chart *c, tui_canvas *out)
{
    int W = c->W, H = c->H, pw = c->pw, ph = c->ph;
    out->w = W; out->h = H;
    out->cells = malloc((size_t)W * H * sizeof *out->cells);
    plot *p = &c->p;
    *p = (plot){ .pw = pw, .ph = ph, .dw = !c->cellplot ? pw * 2 : pw, .dh = !c->cellplot ? ph * 4 : ph,
                 .utf8 = !c->cellplot };
    p->bits = calloc((size_t)pw * ph, 1);
    p->owner = malloc((size_t)pw * ph);
    if (!out->cells || !p->bits || !p->owner) {
        free(p->bits); free(p->owner); tui_canvas_free(out);
        return -1;
    }
    for (int i = 0; i < W * H; i++) { out->cells[i].ch = ' '; out->cells[i].series = -1; }
    memset(p->owner, -1, (size_t)pw * ph);
    for (size_t i = 0; i < c->ns; i++) {
        int have_prev = 0, px = 0, py = 0;
        for (size_t k = 0; k < c->s[i].n; k++) {
            double x = c->xs[i][k], y = c->ys[i][k];
            if (!GAP_OK(y) || !isfinite(x)) { have_prev = 0; continue; }
            int dx = (int)lround((x - c->xmin) / (c->xmax - c->xmin) * (p->dw - 1));
            int dy = (int)lround((c->ymax - y) / (c->ymax - c->ymin) * (p->dh - 1));
            if (have_prev) plot_line(p, px, py, dx, dy, (int)i);
            else plot_dot(p, dx, dy, (int)i);
            px = dx; py = dy; have_prev = 1;
        }
    }
    for (int cy = 0; cy < ph; cy++)
        for (int cx = 0; cx < pw; cx++) {
            size_t i = (size_t)cy * pw + cx;
            if (!p->bits[i]) continue;
            uint32_t ch = !c->cellplot ? tui_braille_char(p->bits[i]) : (uint32_t)tui_series_marker(p->owner[i]);
            put(out, c->x0 + cx, c->top + cy, ch, p->owner[i]);
        }
    free(p->bits);
    free(p->owner);
    p->bits = NULL;
    p->owner = NULL;
    return 0;
}

/* The axes and the y labels. */
static void chart_yaxis(const chart *c, tui_canvas *out)
{
    int utf8 = c->utf8, gw = c->gw, top = c->top;
    uint32_t vline = utf8 ? 0x2502 : '|', hline = utf8 ? 0x2500 : '-', corner = utf8 ? 0x2514 : '+';
    uint32_t ytick = utf8 ? 0x2524 : '+';
    for (int cy = 0; cy < c->ph; cy++) put(out, gw, top + cy, vline, -1);
    int axis_row = top + c->ph;
    put(out, gw, axis_row, corner, -1);
    for (int cx = 0; cx < c->pw; cx++) put(out, c->x0 + cx, axis_row, hline, -1);
    int last_row = -1;
    for (int i = c->nyt - 1; i >= 0; i--) {
        int dy = (int)lround((c->ymax - c->yt[i]) / (c->ymax - c->ymin) * (c->p.dh - 1));
        int cy = !c->cellplot ? dy / 4 : dy;
        if (cy == last_row) continue;
        last_row = cy;
        int l = (int)strlen(c->ylab[i]);
        if (l > gw) l = gw;
        put_text(out, gw - l, top + cy, c->ylab[i], -1, gw, utf8);
        put(out, gw, top + cy, ytick, -1);
    }
}

/* x ticks: labels centred under their column, dropped where they would collide; the axis
 * name at the right end. */
static void chart_xaxis(const chart *c, tui_canvas *out)
{
    const tui_chart_opts *o = c->o;
    int W = c->W, x0 = c->x0, utf8 = c->utf8, axis_row = c->top + c->ph;
    uint32_t xtick = utf8 ? 0x252c : '+';
    double xt[16], xstep;
    int max_xt = c->pw / 10 + 1;
    if (max_xt > 12) max_xt = 12;
    int nxt = tui_nice_ticks(c->xmin, c->xmax, max_xt, xt, &xstep);
    int free_from = 0, lab_row = axis_row + 1, lab_end = W;
    /* The axis name keeps its place at the right end; tick labels yield to it. */
    if (o->x_label && *o->x_label && W - text_len(o->x_label) > x0 + 4) {
        lab_end = W - text_len(o->x_label) - 1;
        put_text(out, lab_end + 1, lab_row, o->x_label, -1, W, utf8);
    }
    if (o->x_scale == TUI_X_LOG && xstep < 1 && c->xmax - c->xmin >= 1) {
        /* Decades only: 0.1, 1, 10, ... */
        nxt = 0;
        for (double t = ceil(c->xmin - 1e-9); t <= c->xmax + 1e-9 && nxt < 16; t += 1) xt[nxt++] = t;
        while (nxt > max_xt) {
            int m = 0;
            for (int i = 0; i < nxt; i += 2) xt[m++] = xt[i];
            nxt = m;
        }
    }
    for (int i = 0; i < nxt; i++) {
        char b[24];
        if (o->x_scale == TUI_X_LOG) snprintf(b, sizeof b, "%.3g", pow(10, xt[i]));
        else tui_tick_label(xt[i], xstep, b, sizeof b);
        int dx = (int)lround((xt[i] - c->xmin) / (c->xmax - c->xmin) * (c->p.dw - 1));
        int cx = x0 + (!c->cellplot ? dx / 2 : dx);
        int l = (int)strlen(b), start = cx - l / 2;
        if (start < x0 - 1) start = x0 - 1;
        /* A label that would run into the axis name is left out, not pushed left: moved
         * away from its tick it would read as the next one ("8 9 hybrid time (s)"). Labels
         * keep two cells between them. */
        if (start + l > lab_end || start < free_from) continue;
        put(out, cx, axis_row, xtick, -1);
        put_text(out, start, lab_row, b, -1, W, utf8);
        free_from = start + l + 2;
    }
}

/* The y label and title above, the legend below, "no data yet" in the middle. */
static void chart_labels(const chart *c, tui_canvas *out)
{
    const tui_chart_opts *o = c->o;
    int W = c->W, H = c->H, utf8 = c->utf8;
    if (c->header) {
        int x = 0;
        if (o->y_label && *o->y_label) x = put_text(out, 0, 0, o->y_label, -1, W, utf8) + 2;
        if (o->title && *o->title) {
            int l = text_len(o->title), cx = c->x0 + (c->pw - l) / 2;
            put_text(out, cx > x ? cx : x, 0, o->title, -1, W, utf8);
        }
    }
    if (c->legend_rows) {
        int row = H - c->legend_rows, x = 0;
        for (size_t i = 0; i < c->ns && row < H; i++) {
            const tui_series *s = &c->s[i];
            if (!s->label || !*s->label) continue;
            int l = 3 + text_len(s->label) + 2;
            if (x > 0 && x + l > W - 8) {
                if (++row >= H) break;
                x = 0;
            }
            /* Without colour the legend shows the series' marker, as the plot does. */
            uint32_t m = c->cellplot ? (uint32_t)tui_series_marker((int)i) : 0x2501;
            put(out, x, row, m, (int)i);
            put(out, x + 1, row, m, (int)i);
            x = put_text(out, x + 3, row, s->label, (int)i, W, utf8) + 2;
        }
    }
    if (!c->have_data) {
        const char *msg = "no data yet";
        int l = (int)strlen(msg);
        put_text(out, c->x0 + (c->pw - l) / 2, c->top + c->ph / 2, msg, -1, W, utf8);
    }
}

int tui_chart_draw(const tui_series *s, size_t ns, const tui_chart_opts *o, tui_canvas *out)
{
    memset(out, 0, sizeof *out);
    chart *c = calloc(1, sizeof *c);
    if (!c) return -1;
    *c = (chart){ .s = s, .ns = ns, .o = o, .W = o->width, .H = o->height, .utf8 = o->utf8,
                  .cellplot = !o->utf8 || o->mono };
    c->legend_rows = tui_chart_legend_rows(s, ns, c->W);
    c->header = (o->title && *o->title) || (o->y_label && *o->y_label);
    c->top = c->header;
    c->ph = c->H - c->header - 2 - c->legend_rows;
    int rc = -1;
    if (c->W < 20 || c->ph < 2) goto done;
    if (chart_transform(c)) goto done;
    chart_yticks(c);
    c->pw = c->W - c->gw - 1;
    c->x0 = c->gw + 1;
    if (c->pw < 8 || chart_plot(c, out)) goto done;
    chart_yaxis(c, out);
    chart_xaxis(c, out);
    chart_labels(c, out);
    rc = 0;
done:
    for (size_t i = 0; c->ys && i < ns; i++) free(c->ys[i]);
    for (size_t i = 0; c->xs && i < ns; i++) free(c->xs[i]);
    free(c->ys);
    free(c->xs);
    free(c);
    return rc;
}

void tui_canvas_print(FILE *f, const tui_canvas *c, int ansi)
{
    for (int y = 0; y < c->h; y++) {
        const tui_cell *row = c->cells + (size_t)y * c->w;
        int end = c->w;
        while (end > 0 && row[end - 1].ch == ' ') end--;
        int cur = -1;
        for (int x = 0; x < end; x++) {
            int s = row[x].ch == ' ' ? cur : row[x].series;
            if (ansi && s != cur) {
                if (s < 0) fputs("\033[0m", f);
                else fprintf(f, "\033[%dm", tui_series_ansi(s));
                cur = s;
            }
            char b[8];
            tui_utf8_put(row[x].ch, b);
            fputs(b, f);
        }
        if (ansi && cur >= 0) fputs("\033[0m", f);
        fputc('\n', f);
    }
}

void tui_sparkline(const double *v, size_t n, int utf8, char *buf, size_t cap)
{
    static const char *const bars[8] = { "\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
                                         "\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88" };
    static const char ascii[8] = { '_', '.', '.', '-', '=', '=', '*', '#' };
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) { if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i]; }
    size_t o = 0;
    if (cap) buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        /* a flat series sits in the middle: no rise or fall to show */
        int k = !isfinite(v[i]) ? -1 : hi > lo ? (int)((v[i] - lo) / (hi - lo) * 7 + 0.5) : 3;
        const char *c = k < 0 ? " " : utf8 ? bars[k] : (char[2]){ ascii[k], 0 };
        size_t l = strlen(c);
        if (o + l + 1 > cap) break;
        memcpy(buf + o, c, l + 1);
        o += l;
    }
}
