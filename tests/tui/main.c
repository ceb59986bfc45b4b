/* main.c — test_tui: charts (scaling, braille encoding, ticks, smoothing), table layout
 * and truncation, run sorting and filtering, the key table. Everything off-screen.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tui/chart.h"
#include "../../tui/cli.h"
#include "../../tui/tui.h"

/* ---- charts ------------------------------------------------------------------------ */

static void test_braille_bits(void **st)
{
    (void)st;
    /* Unicode numbering: dots 1,2,3,7 on the left, 4,5,6,8 on the right. */
    assert_int_equal(tui_braille_bit(0, 0), 0x01);
    assert_int_equal(tui_braille_bit(0, 1), 0x02);
    assert_int_equal(tui_braille_bit(0, 2), 0x04);
    assert_int_equal(tui_braille_bit(0, 3), 0x40);
    assert_int_equal(tui_braille_bit(1, 0), 0x08);
    assert_int_equal(tui_braille_bit(1, 3), 0x80);
    assert_int_equal(tui_braille_bit(2, 0), 0);
    assert_int_equal(tui_braille_char(0), 0x2800);
    assert_int_equal(tui_braille_char(0xff), 0x28ff);
    char b[8];
    assert_int_equal(tui_utf8_put(0x28ff, b), 3);
    assert_string_equal(b, "\xe2\xa3\xbf");
    assert_int_equal(tui_utf8_put('A', b), 1);
    assert_int_equal(tui_utf8_put(0x2502, b), 3);
}

static void test_nice_ticks(void **st)
{
    (void)st;
    double t[16], step;
    int n = tui_nice_ticks(0, 1, 6, t, &step);
    assert_true(n >= 3 && n <= 6);
    assert_float_equal(step, 0.2, 1e-12);
    assert_float_equal(t[0], 0, 1e-12);
    assert_float_equal(t[n - 1], 1, 1e-12);
    n = tui_nice_ticks(3, 997, 5, t, &step);
    assert_true(n <= 5 && n >= 2);
    assert_float_equal(step, 200, 1e-9);
    assert_float_equal(t[0], 200, 1e-9);
    n = tui_nice_ticks(-0.37, 0.52, 4, t, &step);
    assert_true(n <= 4);
    for (int i = 0; i < n; i++) {
        assert_true(t[i] >= -0.37 && t[i] <= 0.52);
        double m = t[i] / step;
        assert_float_equal(m, round(m), 1e-9);
    }
    char b[32];
    tui_tick_label(0.25, 0.05, b, sizeof b); assert_string_equal(b, "0.25");
    tui_tick_label(12000, 2000, b, sizeof b); assert_string_equal(b, "12k");
    tui_tick_label(400, 100, b, sizeof b); assert_string_equal(b, "400");
    tui_tick_label(0, 0.1, b, sizeof b); assert_string_equal(b, "0");
    tui_tick_label(2e-5, 1e-5, b, sizeof b); assert_string_equal(b, "2.0e-05");
    /* A diverged run's axis: no "1.2e+27G". */
    tui_tick_label(1.2e27, 1e26, b, sizeof b); assert_string_equal(b, "1.2e+27");
}

/* Finds the cell holding dots of a series; returns how many cells carry the series. */
static int count_series(const tui_canvas *c, int s)
{
    int k = 0;
    for (int i = 0; i < c->w * c->h; i++)
        if (c->cells[i].series == s) k++;
    return k;
}

static int row_of_text(const tui_canvas *c, const char *text)
{
    for (int y = 0; y < c->h; y++) {
        char line[1024];
        int o = 0;
        for (int x = 0; x < c->w && o < 1000; x++) o += tui_utf8_put(c->cells[y * c->w + x].ch, line + o);
        line[o] = 0;
        if (strstr(line, text)) return y;
    }
    return -1;
}

/* Every x tick label sits under its tick mark (none pushed left against the axis name,
 * where "8 9 hybrid time (s)" read as two ticks a cell apart), two cells apart at least. */
static void test_chart_tick_labels(void **st)
{
    (void)st;
    for (int width = 30; width <= 120; width++) {
        double x[2] = { 0, 9.3 }, y[2] = { 0, 1 };
        tui_series s = { "h", x, y, 2 };
        tui_chart_opts o = { .width = width, .height = 10, .utf8 = 1, .x_label = "hybrid time (s)" };
        tui_canvas c;
        assert_int_equal(tui_chart_draw(&s, 1, &o, &c), 0);
        int axis = -1;
        for (int yy = 0; yy < c.h && axis < 0; yy++)
            for (int xx = 0; xx < c.w; xx++)
                if (c.cells[yy * c.w + xx].ch == 0x2514) { axis = yy; break; }
        assert_true(axis >= 0 && axis + 1 < c.h);
        const tui_cell *lab = &c.cells[(axis + 1) * c.w], *ax = &c.cells[axis * c.w];
        int name_at = c.w - (int)strlen("hybrid time (s)"), prev_end = -9;
        for (int xx = 0; xx < name_at - 1; xx++) {
            if (lab[xx].ch == ' ') continue;
            int from = xx;
            while (xx < name_at - 1 && lab[xx].ch != ' ') xx++;
            int ticked = 0;
            for (int k = from; k < xx; k++) ticked |= ax[k].ch == 0x252c;
            assert_true(ticked);
            assert_true(from - prev_end >= 3);
            prev_end = xx - 1;
        }
        tui_canvas_free(&c);
    }
}

/* The sparkline: one cell per value, lowest to highest bar, a gap for a missing value,
 * ASCII without UTF-8, a flat series in the middle. */
static void test_sparkline(void **st)
{
    (void)st;
    double v[4] = { 1, 2, NAN, 3 };
    char b[64];
    tui_sparkline(v, 4, 1, b, sizeof b);
    assert_string_equal(b, "\xe2\x96\x81\xe2\x96\x85 \xe2\x96\x88");
    tui_sparkline(v, 4, 0, b, sizeof b);
    assert_string_equal(b, "_= #");
    double flat[3] = { 5, 5, 5 };
    tui_sparkline(flat, 3, 0, b, sizeof b);
    assert_string_equal(b, "---");
    tui_sparkline(v, 4, 1, b, 5);   /* room for one bar only: cut between characters */
    assert_string_equal(b, "\xe2\x96\x81");
}

static void test_chart_scaling(void **st)
{
    (void)st;
    /* A rising line from (0,0) to (10,1): the first dot lands bottom-left of the plot,
     * the last top-right; braille cells only hold braille code points. */
    double x[2] = { 0, 10 }, y[2] = { 0, 1 };
    tui_series s = { "up", x, y, 2 };
    tui_chart_opts o = { .width = 40, .height = 12, .utf8 = 1, .x_label = "step" };
    tui_canvas c;
    assert_int_equal(tui_chart_draw(&s, 1, &o, &c), 0);
    assert_int_equal(c.w, 40);
    assert_int_equal(c.h, 12);
    int minx = 99, maxx = -1, miny = 99, maxy = -1, lowleft_y = -1, topright_y = -1;
    for (int yy = 0; yy < c.h; yy++)
        for (int xx = 0; xx < c.w; xx++) {
            tui_cell *e = &c.cells[yy * c.w + xx];
            if (e->series != 0 || (e->ch & 0xff00) != 0x2800) continue;
            if (xx < minx) { minx = xx; lowleft_y = yy; }
            if (xx > maxx) { maxx = xx; topright_y = yy; }
            if (yy < miny) miny = yy;
            if (yy > maxy) maxy = yy;
        }
    assert_true(maxx == c.w - 1);          /* the last sample reaches the right edge */
    assert_true(lowleft_y > topright_y);   /* rising */
    assert_int_equal(miny, 0);             /* y=1 is the top tick row (nice range 0..1) */
    assert_int_equal(maxy, c.h - 4);       /* y=0: last plot row, above axis, labels, legend */
    /* The bottom-left cell holds the lowest-left dot: bit of dot (0,3) = 0x40. */
    assert_true(c.cells[lowleft_y * c.w + minx].ch & 0x40);
    assert_true(row_of_text(&c, "step") == c.h - 2);
    assert_true(row_of_text(&c, "up") == c.h - 1);
    assert_true(row_of_text(&c, "1.0") >= 0);
    tui_canvas_free(&c);

    /* A hostile series label reaches the canvas visibly: no cell holds a control character. */
    tui_series h = { "x\x1b]0;t\x07\xe2\x80\xae", x, y, 2 };
    assert_int_equal(tui_chart_draw(&h, 1, &o, &c), 0);
    for (int k = 0; k < c.w * c.h; k++)
        assert_false(c.cells[k].ch < 0x20 || c.cells[k].ch == 0x202e);
    assert_true(row_of_text(&c, "x\\x1b]0;t\\x07\\u202e") == c.h - 1);
    tui_canvas_free(&c);

    /* Too small: refused, nothing allocated. */
    o.width = 10;
    assert_int_equal(tui_chart_draw(&s, 1, &o, &c), -1);
    assert_null(c.cells);
}

static void test_chart_ascii_gaps_log(void **st)
{
    (void)st;
    double x[6] = { 0, 1, 2, 3, 4, 5 }, y[6] = { 100, 10, NAN, 1, -1, 0.1 };
    double y2[6] = { 1, 1, 1, 1, 1, 1 };
    tui_series s[2] = { { "a", x, y, 6 }, { "b", x, y2, 6 } };
    tui_chart_opts o = { .width = 50, .height = 14, .utf8 = 0, .log_y = 1 };
    tui_canvas c;
    assert_int_equal(tui_chart_draw(s, 2, &o, &c), 0);
    for (int i = 0; i < c.w * c.h; i++) assert_true(c.cells[i].ch < 0x80); /* pure ASCII */
    assert_true(count_series(&c, 0) > 3);
    assert_true(count_series(&c, 1) > 3);
    assert_true(row_of_text(&c, "100") >= 0);  /* decade labels on a log axis */
    assert_true(row_of_text(&c, "0.1") >= 0);
    assert_true(row_of_text(&c, "** a") >= 0); /* ASCII legend markers */
    assert_true(row_of_text(&c, "++ b") >= 0);
    /* Printing with ANSI colours wraps the series in escape codes. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tui_canvas_print(f, &c, 1);
    fclose(f);
    assert_non_null(strstr(buf, "\033[36m"));
    assert_non_null(strstr(buf, "\033[33m"));
    assert_non_null(strstr(buf, "\033[0m"));
    free(buf);
    tui_canvas_free(&c);

    /* No data at all: a framed chart that says so, never a blank box. */
    double nx[1] = { 0 }, ny[1] = { NAN };
    tui_series e = { "none", nx, ny, 1 };
    o.log_y = 0;
    assert_int_equal(tui_chart_draw(&e, 1, &o, &c), 0);
    assert_true(row_of_text(&c, "no data yet") >= 0);
    tui_canvas_free(&c);
}

/* Without colour, UTF-8 charts draw each series with its marker (not braille, which
 * colour alone would tell apart); log x labels decades; normalised x stretches every run
 * over the width; a legend too long for one row wraps instead of being cut. */
static void test_chart_mono_logx_norm_legend(void **st)
{
    (void)st;
    double x1[4] = { 0.001, 0.01, 0.1, 1 }, x2[4] = { 10, 100, 1000, 10000 }, y[4] = { 4, 3, 2, 1 };
    tui_series s[2] = { { "#1 short run", x1, y, 4 }, { "#2 long run", x2, y, 4 } };
    tui_chart_opts o = { .width = 60, .height = 14, .utf8 = 1, .mono = 1, .x_scale = TUI_X_LOG };
    tui_canvas c;
    assert_int_equal(tui_chart_draw(s, 2, &o, &c), 0);
    for (int i = 0; i < c.w * c.h; i++) assert_false((c.cells[i].ch & 0xff00) == 0x2800); /* no braille */
    assert_true(count_series(&c, 0) >= 3);
    assert_true(count_series(&c, 1) >= 3);
    assert_true(row_of_text(&c, "** #1 short run") >= 0);
    assert_true(row_of_text(&c, "++ #2 long run") >= 0);
    assert_true(row_of_text(&c, "0.01") >= 0 || row_of_text(&c, "0.001") >= 0);
    assert_true(row_of_text(&c, "1e+03") >= 0 || row_of_text(&c, "1000") >= 0 || row_of_text(&c, "100") >= 0);
    tui_canvas_free(&c);
    /* Normalised: both runs end at the right edge. */
    double y2[4] = { 8, 7, 6, 5 };
    s[1].y = y2;
    o.x_scale = TUI_X_NORM;
    assert_int_equal(tui_chart_draw(s, 2, &o, &c), 0);
    int right0 = 0, right1 = 0;
    for (int yy = 0; yy < c.h; yy++) {
        right0 |= c.cells[yy * c.w + c.w - 1].series == 0;
        right1 |= c.cells[yy * c.w + c.w - 1].series == 1;
    }
    assert_true(right0 && right1);
    tui_canvas_free(&c);
    /* Eight labels of 20 cells in 60: three legend rows, every label whole. */
    double xx[2] = { 0, 1 }, yy2[2] = { 1, 2 };
    tui_series m[8];
    char lab[8][48];
    for (int i = 0; i < 8; i++) {
        snprintf(lab[i], sizeof lab[i], "#%d run-number-%d", i + 1, i + 1);
        m[i] = (tui_series){ lab[i], xx, yy2, 2 };
    }
    o = (tui_chart_opts){ .width = 60, .height = 16, .utf8 = 1 };
    assert_int_equal(tui_chart_draw(m, 6, &o, &c), 0);
    for (int i = 0; i < 6; i++) assert_true(row_of_text(&c, lab[i]) >= c.h - 3);
    tui_canvas_free(&c);
}

static void test_smoothing(void **st)
{
    (void)st;
    /* Debiasing: a constant series stays exactly constant from the first point. */
    double in[5] = { 2, 2, 2, 2, 2 }, out[5];
    tui_smooth_ema(in, out, 5, 0.9);
    for (int i = 0; i < 5; i++) assert_float_equal(out[i], 2, 1e-12);
    /* Hand-computed for w = 0.5: last = 0.5*last + 0.5*v, divided by 1 - 0.5^k. */
    double v[3] = { 1, 3, NAN }, o[3];
    tui_smooth_ema(v, o, 3, 0.5);
    assert_float_equal(o[0], 1, 1e-12);
    assert_float_equal(o[1], (0.25 + 1.5) / 0.75, 1e-12);
    assert_true(isnan(o[2]));
    /* In place and weight 0 = identity. */
    double w[3] = { 5, 1, 7 };
    tui_smooth_ema(w, w, 3, 0);
    assert_float_equal(w[1], 1, 0);
    tui_smooth_ema(w, w, 3, 0.6);
    assert_float_equal(w[0], 5, 1e-12);
    assert_true(w[1] > 1 && w[1] < 5);
}

/* ---- tables ------------------------------------------------------------------------ */

static void test_fit(void **st)
{
    (void)st;
    char b[64];
    assert_int_equal(tui_fit("spirals", 10, 0, 1, b, sizeof b), 10);
    assert_string_equal(b, "spirals   ");
    tui_fit("0.25", 6, 1, 1, b, sizeof b);
    assert_string_equal(b, "  0.25");
    tui_fit("spirals-mlp/sgd", 8, 0, 1, b, sizeof b);
    assert_string_equal(b, "spirals\xe2\x80\xa6");
    assert_int_equal(tui_text_width(b), 8);
    tui_fit("spirals-mlp/sgd", 8, 0, 0, b, sizeof b);
    assert_string_equal(b, "spirals~");
    tui_fit("abc", 1, 0, 1, b, sizeof b);
    assert_string_equal(b, "\xe2\x80\xa6");
    tui_fit("abc", 0, 0, 1, b, sizeof b);
    assert_string_equal(b, "");
    /* Multi-byte text is cut between code points, never inside one. */
    tui_fit("\xc3\xa9t\xc3\xa9-long", 4, 0, 1, b, sizeof b);
    assert_string_equal(b, "\xc3\xa9t\xc3\xa9\xe2\x80\xa6");
    /* Control and bidi characters reach the screen visibly, never raw. */
    tui_fit("a\x1b[2Jb\xe2\x80\xae", 15, 0, 1, b, sizeof b);
    assert_string_equal(b, "a\\x1b[2Jb\\u202e");
    tui_fit("a\x1b[2Jb", 4, 0, 1, b, sizeof b);       /* the escape goes whole: padded */
    assert_string_equal(b, "a\xe2\x80\xa6  ");
    tui_fit("x\x1b]0;t\x07", 9, 0, 1, b, sizeof b);
    assert_null(strchr(b, '\x1b'));
    assert_null(strchr(b, '\x07'));
    /* Non-UTF-8 terminals get '?' for non-ASCII. */
    tui_fit("\xc3\xa9t\xc3\xa9", 4, 0, 0, b, sizeof b);
    assert_string_equal(b, "?t? ");
    /* A tiny buffer is never overrun. */
    char small[4];
    tui_fit("abcdefgh", 8, 0, 1, small, sizeof small);
    assert_int_equal(strlen(small), 3);
}

/* Long text wraps at spaces within the width, never inside a UTF-8 character, and loses
 * nothing but the spaces at its cuts: compare's notes fit the width (from 79 cells, the
 * whole comparison does: an 80-column terminal). */
static void test_wrap(void **st)
{
    (void)st;
    assert_int_equal(tui_wrap_cut("aaa bbb", 7), 7);
    assert_int_equal(tui_wrap_cut("aaa bbb", 6), 3);
    assert_int_equal(tui_wrap_cut("aaa bbb", 3), 3);
    assert_int_equal(tui_wrap_cut("abcdefgh", 3), 3);      /* one long word: cut at the width */
    assert_int_equal(tui_wrap_cut("abc", 0), 1);           /* one character at least */
    assert_int_equal(tui_wrap_cut("\xc3\xa9\xc3\xa9\xc3\xa9 x", 2), 4);
    assert_int_equal(tui_wrap_cut("", 5), 0);

    store_compare *c = calloc(1, sizeof *c);
    assert_non_null(c);
    const char *note = "note: these runs' threads ran on CPUs placed differently (row \"core round trip\": under "
                       "250 ns they share a last-level cache, over it not): their times compare the placement too";
    snprintf(c->notes[0], sizeof c->notes[0], "%s", note);
    for (int width = 20; width <= 200; width += 59) {
        char **l = NULL, joined[512] = "";
        size_t n = 0, at = 0;
        assert_int_equal(tui_compare_lines(c, width, 1, 0, &l, &n), 0);
        for (size_t i = 0; i < n; i++)
            if (!strncmp(l[i], "note:", 5)) at = i;
        assert_true(at > 0);
        for (size_t i = width >= 79 ? 0 : at; i < n; i++) assert_true(tui_text_width(l[i]) <= width);
        for (size_t i = at; i < n; i++) {
            const char *t = l[i] + strspn(l[i], " ");
            if (i > at) assert_true(l[i][0] == ' ' && l[i][1] == ' ');
            snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s", i > at ? " " : "", t);
        }
        assert_string_equal(joined, note);
        if (width >= tui_text_width(note)) assert_int_equal(n - at, 1);
        else assert_true(n - at >= (size_t)(tui_text_width(note) / width + 1));
        tui_lines_free(l, n);
    }
    free(c);
}

static void test_layout(void **st)
{
    (void)st;
    tui_col c[4] = {
        { "id", 4, 2, 1, 0 }, { "name", 30, 8, 0, 1 }, { "status", 10, 6, 0, 0 }, { "loss", 8, 6, 1, 0 },
    };
    int w[4];
    /* Wide: natural widths, the rest to the flex column. */
    assert_int_equal(tui_table_layout(c, 4, 120, 1, w), 4);
    assert_int_equal(w[0], 4); assert_int_equal(w[2], 10); assert_int_equal(w[3], 8);
    assert_int_equal(w[0] + w[1] + w[2] + w[3] + 3, 120);
    /* Exactly natural. */
    assert_int_equal(tui_table_layout(c, 4, 55, 1, w), 4);
    assert_int_equal(w[1], 30);
    /* Narrower: the flex column gives first. */
    assert_int_equal(tui_table_layout(c, 4, 40, 1, w), 4);
    assert_int_equal(w[1], 15);
    assert_int_equal(w[2], 10);
    /* Narrower still: every column down towards its minimum. */
    assert_int_equal(tui_table_layout(c, 4, 25, 1, w), 4);
    assert_int_equal(w[0] + w[1] + w[2] + w[3] + 3, 25);
    assert_int_equal(w[1], 8);
    for (int i = 0; i < 4; i++) assert_true(w[i] >= c[i].min);
    /* Too narrow for all minimums: columns dropped from the right. */
    int vis = tui_table_layout(c, 4, 15, 1, w);
    assert_true(vis < 4 && vis >= 1);
    int sum = vis - 1;
    for (int i = 0; i < vis; i++) sum += w[i];
    assert_true(sum <= 15);
    assert_int_equal(w[3], 0);
    /* A single column always shows, cut to the width. */
    assert_int_equal(tui_table_layout(c, 4, 1, 1, w), 1);
    assert_int_equal(w[0], 1);
}

static store_run mkrun(long long id, const char *name, const char *variant, int status,
                       const char *opt, double loss, double acc, double started, double ended)
{
    store_run r;
    memset(&r, 0, sizeof r);
    r.id = id;
    snprintf(r.name, sizeof r.name, "%s", name);
    snprintf(r.variant, sizeof r.variant, "%s", variant);
    r.status = (store_run_status)status;
    snprintf(r.optimizer, sizeof r.optimizer, "%s", opt);
    snprintf(r.dataset, sizeof r.dataset, "spirals");
    r.final_train_loss = loss;
    r.best_test_acc = acc;
    r.started = started;
    r.ended = ended;
    r.wall_s = NAN;
    return r;
}

static void make_runs(store_run *r)
{
    r[0] = mkrun(1, "spirals-mlp", "sgd", STORE_RUN_FINISHED, "sgd", 0.30, 0.85, 1000, 1010);
    r[1] = mkrun(2, "spirals-mlp", "adam", STORE_RUN_FINISHED, "adam", 0.05, 0.97, 1020, 1025);
    r[2] = mkrun(3, "xor", "", STORE_RUN_DIVERGED, "newton", NAN, NAN, 1030, 1031);
    r[3] = mkrun(4, "fashion", "momentum", STORE_RUN_FINISHED, "momentum", 0.30, 0.86, 900, 1900);
    snprintf(r[3].dataset, sizeof r[3].dataset, "fashion-mnist");
}

/* A resumed run ended 13.61 s after it started but trained 7.32 s: its duration is the
 * training time, as compare and show give it (issue 27). */
static void test_duration_resumed(void **st)
{
    (void)st;
    store_run r;
    store_run_init(&r);
    r.status = STORE_RUN_FINISHED;
    r.started = 1000;
    r.ended = 1013.61;
    r.wall_s = 7.32;
    assert_true(fabs(tui_run_duration(&r, 2000) - 7.32) < 1e-9);
    r.status = STORE_RUN_RUNNING; /* still running: the clock since it started */
    r.ended = NAN;
    assert_true(fabs(tui_run_duration(&r, 1020) - 20) < 1e-9);
}

static void test_sort(void **st)
{
    (void)st;
    store_run r[4];
    make_runs(r);
    tui_runs_sort(r, 4, TUI_RC_LOSS, 0);
    assert_int_equal(r[0].id, 2);
    assert_int_equal(r[1].id, 1); /* tie 0.30: by id */
    assert_int_equal(r[2].id, 4);
    assert_int_equal(r[3].id, 3); /* NAN last */
    tui_runs_sort(r, 4, TUI_RC_LOSS, 1);
    assert_int_equal(r[0].id, 1);
    assert_int_equal(r[1].id, 4);
    assert_int_equal(r[2].id, 2);
    assert_int_equal(r[3].id, 3); /* NAN still last */
    tui_runs_sort(r, 4, TUI_RC_NAME, 0);
    assert_int_equal(r[0].id, 4); /* fashion */
    assert_int_equal(r[1].id, 2); /* spirals-mlp/adam */
    assert_int_equal(r[3].id, 3); /* xor */
    tui_runs_sort(r, 4, TUI_RC_DURATION, 1);
    assert_int_equal(r[0].id, 4);
    assert_int_equal(r[3].id, 3);
    tui_runs_sort(r, 4, TUI_RC_ID, 1);
    assert_int_equal(r[0].id, 4);
    assert_int_equal(r[3].id, 1);
    tui_runs_sort(r, 4, TUI_RC_STATUS, 0);
    assert_int_equal(r[0].id, 3); /* diverged < finished */
    char b[64];
    tui_run_cell(&r[0], TUI_RC_NAME, 0, b, sizeof b);
    assert_string_equal(b, "xor");
    tui_run_cell(&r[0], TUI_RC_LOSS, 0, b, sizeof b);
    assert_string_equal(b, "-");
    prof_fmt_duration(b, sizeof b, 1000);
    assert_string_equal(b, "16m40s");
    prof_fmt_duration(b, sizeof b, 5.25);
    assert_string_equal(b, "5.25 s");
    prof_fmt_bytes(b, sizeof b, 1536);
    assert_string_equal(b, "1.5 KiB");
}

static void test_filter(void **st)
{
    (void)st;
    store_run r[4];
    make_runs(r);
    assert_true(tui_run_matches(&r[0], ""));
    assert_true(tui_run_matches(&r[0], NULL));
    assert_true(tui_run_matches(&r[0], "SGD"));
    assert_false(tui_run_matches(&r[1], "sgd"));
    assert_true(tui_run_matches(&r[2], "status:div"));
    assert_false(tui_run_matches(&r[0], "status:div"));
    assert_true(tui_run_matches(&r[3], "data:fashion"));
    assert_true(tui_run_matches(&r[0], "spirals !adam"));
    assert_false(tui_run_matches(&r[1], "spirals !adam"));
    assert_true(tui_run_matches(&r[0], "id:1"));
    assert_false(tui_run_matches(&r[0], "id:11"));
    assert_false(tui_run_matches(&r[0], "spirals newton")); /* all terms must match */
    size_t n = tui_runs_filter(r, 4, "spirals");
    assert_int_equal(n, 3); /* ids 1, 2 by name, 3 (xor) by dataset spirals */
    assert_int_equal(r[0].id, 1);
    assert_int_equal(r[2].id, 3);
    n = tui_runs_filter(r, n, "status:finished");
    assert_int_equal(n, 2);
    n = tui_runs_filter(r, n, "nothing-matches-this");
    assert_int_equal(n, 0);
}

/* ---- keys -------------------------------------------------------------------------- */

static int offers_no_chart(void *ud, tui_action act)
{
    (void)ud;
    return act != TUI_ACT_LOG_Y && act != TUI_ACT_X_AXIS && act != TUI_ACT_X_SCALE && act != TUI_ACT_SMOOTH;
}

static void test_keys(void **st)
{
    (void)st;
    /* The keys the issue asks for, on the screens they belong to. */
    assert_int_equal(tui_key_action('j', TUI_SCR_RUNS), TUI_ACT_DOWN);
    assert_int_equal(tui_key_action(KEY_DOWN, TUI_SCR_RUNS), TUI_ACT_DOWN);
    assert_int_equal(tui_key_action('k', TUI_SCR_RUN), TUI_ACT_UP);
    assert_int_equal(tui_key_action(KEY_NPAGE, TUI_SCR_RUNS), TUI_ACT_PGDN);
    assert_int_equal(tui_key_action(KEY_PPAGE, TUI_SCR_RUNS), TUI_ACT_PGUP);
    assert_int_equal(tui_key_action(KEY_HOME, TUI_SCR_RUNS), TUI_ACT_HOME);
    assert_int_equal(tui_key_action(KEY_END, TUI_SCR_RUNS), TUI_ACT_END);
    assert_int_equal(tui_key_action('\n', TUI_SCR_RUNS), TUI_ACT_OPEN);
    assert_int_equal(tui_key_action(27, TUI_SCR_RUN), TUI_ACT_BACK);
    assert_int_equal(tui_key_action(KEY_BACKSPACE, TUI_SCR_COMPARE), TUI_ACT_BACK);
    assert_int_equal(tui_key_action('\t', TUI_SCR_RUN), TUI_ACT_TAB_NEXT);
    assert_int_equal(tui_key_action(KEY_BTAB, TUI_SCR_RUN), TUI_ACT_TAB_PREV);
    assert_int_equal(tui_key_action(' ', TUI_SCR_RUNS), TUI_ACT_MARK);
    assert_int_equal(tui_key_action('c', TUI_SCR_RUNS), TUI_ACT_COMPARE);
    assert_int_equal(tui_key_action('n', TUI_SCR_RUNS), TUI_ACT_NEW);
    assert_int_equal(tui_key_action('/', TUI_SCR_RUNS), TUI_ACT_FILTER);
    assert_int_equal(tui_key_action('s', TUI_SCR_RUNS), TUI_ACT_SORT);
    assert_int_equal(tui_key_action('S', TUI_SCR_RUNS), TUI_ACT_SORT_ORDER);
    assert_int_equal(tui_key_action('d', TUI_SCR_RUNS), TUI_ACT_DELETE);
    assert_int_equal(tui_key_action('r', TUI_SCR_RUNS), TUI_ACT_REFRESH);
    assert_int_equal(tui_key_action('?', TUI_SCR_RUN), TUI_ACT_HELP);
    assert_int_equal(tui_key_action(KEY_F(1), TUI_SCR_RUNS), TUI_ACT_HELP);
    for (unsigned s = 1; s < TUI_SCR_ALL; s <<= 1) assert_int_equal(tui_key_action('q', s), TUI_ACT_QUIT);
    /* Enter means "edit" on New run, "open" on Runs; nothing where it has no meaning. */
    assert_int_equal(tui_key_action('\n', TUI_SCR_NEW), TUI_ACT_EDIT);
    assert_int_equal(tui_key_action(' ', TUI_SCR_RUN), TUI_ACT_NONE);
    assert_int_equal(tui_key_action('Z', TUI_SCR_RUNS), TUI_ACT_NONE);
    /* No key is bound twice on one screen (else the table would lie somewhere). */
    for (size_t i = 0; i < tui_n_keys; i++)
        for (size_t j = i + 1; j < tui_n_keys; j++) {
            if (!(tui_keys[i].screens & tui_keys[j].screens)) continue;
            for (int a = 0; a < 4 && tui_keys[i].keys[a]; a++)
                for (int b = 0; b < 4 && tui_keys[j].keys[b]; b++)
                    if (tui_keys[i].keys[a] == tui_keys[j].keys[b]) fail_msg("key %d bound twice (%s / %s)", tui_keys[i].keys[a], tui_keys[i].help, tui_keys[j].help);
        }
    /* Help and docs/workbench.md come from the same table: every entry appears in the Markdown. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tui_keys_markdown(f);
    fclose(f);
    assert_non_null(strstr(buf, "| Key | Where | What it does |"));
    for (size_t i = 0; i < tui_n_keys; i++) assert_non_null(strstr(buf, tui_keys[i].help));
    assert_non_null(strstr(buf, "| `q` | everywhere |"));
    free(buf);
    /* Status bar: only this screen's keys, cut to the width. */
    char sb[256];
    int used = tui_status_hints(TUI_SCR_RUNS, 1, 200, sb, sizeof sb);
    assert_non_null(strstr(sb, "Enter open"));
    assert_non_null(strstr(sb, "/ filter"));
    assert_null(strstr(sb, "tab"));
    assert_int_equal(used, tui_text_width(sb));
    used = tui_status_hints(TUI_SCR_RUNS, 1, 20, sb, sizeof sb);
    assert_true(used <= 20);
    assert_int_equal(used, tui_text_width(sb));
    /* However narrow, "? help" stays, at the end. */
    for (int w = 6; w <= 80; w++) {
        used = tui_status_hints(TUI_SCR_RUNS, 1, w, sb, sizeof sb);
        assert_true(used <= w);
        size_t l = strlen(sb);
        assert_true(l >= 6 && !strcmp(sb + l - 6, "? help"));
    }
    tui_status_hints(TUI_SCR_RUN, 0, 200, sb, sizeof sb);
    assert_non_null(strstr(sb, "Tab tab"));
    for (const char *p = sb; *p; p++) assert_true((unsigned char)*p < 0x80);
    /* A screen's filter drops the keys that would do nothing; "? help" still ends it. */
    assert_non_null(strstr(sb, "L log-y"));
    tui_status_hints_if(TUI_SCR_RUN, 0, 200, offers_no_chart, NULL, sb, sizeof sb);
    assert_null(strstr(sb, "L log-y"));
    assert_null(strstr(sb, "m smooth"));
    assert_non_null(strstr(sb, "Tab tab"));
    assert_true(strlen(sb) >= 6 && !strcmp(sb + strlen(sb) - 6, "? help"));
    char names[64];
    tui_screens_names(TUI_SCR_RUNS | TUI_SCR_COMPARE, names, sizeof names);
    assert_string_equal(names, "Runs, Compare");
}

/* ---- did you mean -------------------------------------------------------------------- */

static void test_suggest(void **st)
{
    (void)st;
    static const char *const c[] = { "--profile", "--profile-rows", "--profile-sort", "--limit", "--db", "--json" };
    const size_t n = sizeof c / sizeof c[0];
    assert_string_equal(cli_suggest("--profil", c, n), "--profile");     /* a deletion */
    assert_string_equal(cli_suggest("--profiel", c, n), "--profile");    /* a transposition */
    assert_string_equal(cli_suggest("--limt", c, n), "--limit");
    assert_string_equal(cli_suggest("--jsno", c, n), "--json");
    assert_string_equal(cli_suggest("--profile-r", c, n), "--profile-rows"); /* unique prefix */
    assert_string_equal(cli_suggest("--profile-", c, n), "--profile");  /* ambiguous prefix: nearest */
    assert_null(cli_suggest("--verbose", c, n));
    assert_null(cli_suggest("--d", c, 0));
    /* every command of the table is found by name, and a one-letter slip of it suggests it */
    size_t nc;
    const cli_command *cmds = cli_commands(&nc);
    assert_true(nc >= 10);
    for (size_t i = 0; i < nc; i++) {
        assert_ptr_equal(cli_command_find(cmds[i].name), &cmds[i]);
        char typo[32];
        snprintf(typo, sizeof typo, "%sx", cmds[i].name);
        const char *names[64];   /* every command: one past the array would not be found */
        assert_true(nc <= 64);
        for (size_t j = 0; j < nc; j++) names[j] = cmds[j].name;
        assert_string_equal(cli_suggest(typo, names, nc), cmds[i].name);
    }
    assert_null(cli_command_find("nope"));
}

/* ---- the one option parser ----------------------------------------------------------- */

typedef struct { const char *db; int json; const char *pair[2]; int calls; } t_opts;

static int t_pair(void *opts, const char *cmd, const char *name, char **vals)
{
    t_opts *o = opts;
    (void)cmd;
    (void)name;
    o->pair[0] = vals[0];
    o->pair[1] = vals[1];
    o->calls++;
    return strcmp(vals[0], "bad") ? 0 : 2;
}

static void t_help(FILE *f) { fputs("usage: t [--db P] [--json] [--pair A B]\n", f); }

static const cli_opt t_opt[] = {
    CLI_OPT_VALUE("--db", "-d", t_opts, db), CLI_OPT_FLAG("--json", "-j", t_opts, json),
    CLI_OPT_CALL("--pair", t_pair, 2),
};
static const cli_spec t_spec = { "t", t_help, t_opt, CLI_N(t_opt) };

static void test_parse(void **st)
{
    (void)st;
    /* values as `--opt V` and `--opt=V`, the last one kept; positionals moved to the front in order */
    char *a1[] = { "t", "r1", "--db", "x.db", "r2", "-j", "--db=y.db", "--pair", "p", "q", "r3", NULL };
    t_opts o = { 0 };
    int n_pos = -1;
    assert_int_equal(cli_parse(&t_spec, &o, 11, a1, &n_pos), -1);
    assert_int_equal(n_pos, 3);
    assert_string_equal(a1[1], "r1");
    assert_string_equal(a1[2], "r2");
    assert_string_equal(a1[3], "r3");
    assert_string_equal(o.db, "y.db");
    assert_int_equal(o.json, 1);
    assert_int_equal(o.calls, 1);
    assert_string_equal(o.pair[0], "p");
    assert_string_equal(o.pair[1], "q");
    char *a8[] = { "t", "-d=z.db", NULL }; /* an alias takes its value inline too */
    assert_int_equal(cli_parse(&t_spec, &o, 2, a8, &n_pos), -1);
    assert_string_equal(o.db, "z.db");
    assert_int_equal(n_pos, 0);
    /* usage errors exit 2: a missing value (of two), an unknown option, a callback's refusal */
    char *a2[] = { "t", "--pair", "p", NULL };
    assert_int_equal(cli_parse(&t_spec, &o, 3, a2, &n_pos), 2);
    char *a3[] = { "t", "--jsn", NULL };
    assert_int_equal(cli_parse(&t_spec, &o, 2, a3, &n_pos), 2);
    char *a4[] = { "t", "--json=1", NULL }; /* a flag takes no value */
    assert_int_equal(cli_parse(&t_spec, &o, 2, a4, &n_pos), 2);
    char *a5[] = { "t", "--pair", "bad", "q", NULL };
    assert_int_equal(cli_parse(&t_spec, &o, 4, a5, &n_pos), 2);
    /* --help ends the command with 0; "-" alone is an argument */
    char *a6[] = { "t", "-", "-h", "--nope", NULL };
    assert_int_equal(cli_parse(&t_spec, &o, 4, a6, &n_pos), 0);
    /* an option's index, values skipped: "--db --pair" is --db's value, not --pair */
    char *a7[] = { "t", "--db", "--pair", "--pair", "a", "b", NULL };
    assert_int_equal(cli_option_at(&t_spec, 6, a7, "--pair"), 3);
    assert_int_equal(cli_option_at(&t_spec, 6, a7, "--json"), -1);
}

/* Every command's parser takes exactly the options its --help names (man page and bash
 * completion are made from the help text). */
static void test_spec_matches_help(void **st)
{
    (void)st;
    size_t nc;
    const cli_command *cmds = cli_commands(&nc);
    for (size_t i = 0; i < nc; i++) {
        assert_non_null(cmds[i].spec);
        assert_string_equal(cmds[i].spec->cmd, cmds[i].name);
        char why[256] = "";
        int bad = cli_spec_help_mismatch(&cmds[i], why, sizeof why);
        if (bad) fprintf(stderr, "%s\n", why);
        assert_int_equal(bad, 0);
    }
}

int test_tui_runner(void); /* runner.c */
int test_tui_monitor(void); /* monitor.c */

int main(void)
{
    const struct CMUnitTest chart[] = {
        cmocka_unit_test(test_braille_bits), cmocka_unit_test(test_nice_ticks),
        cmocka_unit_test(test_chart_scaling), cmocka_unit_test(test_chart_tick_labels), cmocka_unit_test(test_sparkline), cmocka_unit_test(test_chart_ascii_gaps_log),
        cmocka_unit_test(test_smoothing), cmocka_unit_test(test_chart_mono_logx_norm_legend),
    };
    const struct CMUnitTest table[] = {
        cmocka_unit_test(test_fit), cmocka_unit_test(test_wrap), cmocka_unit_test(test_layout),
        cmocka_unit_test(test_sort), cmocka_unit_test(test_filter), cmocka_unit_test(test_duration_resumed),
    };
    const struct CMUnitTest keys[] = { cmocka_unit_test(test_keys), cmocka_unit_test(test_suggest),
                                       cmocka_unit_test(test_parse), cmocka_unit_test(test_spec_matches_help) };
    int failed = cmocka_run_group_tests_name("tui_chart", chart, NULL, NULL);
    failed += cmocka_run_group_tests_name("tui_table", table, NULL, NULL);
    failed += cmocka_run_group_tests_name("tui_keys", keys, NULL, NULL);
    failed += test_tui_runner();
    failed += test_tui_monitor();
    return failed ? 1 : 0;
}
