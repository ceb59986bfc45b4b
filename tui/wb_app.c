/* wb_app.c — `nnbench tui`: the ncurses workbench's frame — terminal set-up and
 * restore (exit, Ctrl-C, crash signals), the panel stack, status bar, dialogs, resize,
 * the Runs screen and the help screen. Other screens: wb_screens.c, wb_newrun.c.
 */
#include "cli.h"
#include "wb.h"

#include <curses.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const double wb_smooth_levels[3] = { 0, 0.6, 0.9 };
const char *const wb_x_names[3] = { "step", "wall time (s)", "hybrid time (s)" };

static volatile sig_atomic_t got_sigint, got_sigterm;
static volatile sig_atomic_t curses_on;

/* ---- terminal --------------------------------------------------------------------- */

static void on_crash(int sig)
{
    /* endwin is not async-signal-safe, but a crashing process has nothing left to lose
     * and a terminal left in raw mode is worse (htop does the same). */
    if (curses_on) endwin();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_int(int sig)
{
    if (sig == SIGINT) got_sigint = 1;
    else got_sigterm = 1;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_int;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_RESETHAND;
    int crash[] = { SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL };
    for (size_t i = 0; i < sizeof crash / sizeof crash[0]; i++) sigaction(crash[i], &sa, NULL);
}

static void restore_signals(void)
{
    int all[] = { SIGINT, SIGTERM, SIGHUP, SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) signal(all[i], SIG_DFL);
}

double wb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Colour pairs: 1-6 the chart series (same order as tui_series_ansi), then UI roles. */
enum { PAIR_TITLE = 10, PAIR_STATUS, PAIR_GOOD, PAIR_BAD, PAIR_WARN, PAIR_RUNNING, PAIR_DIM };

static void init_colours(wb_app *a)
{
    if (!a->color) return;
    start_color();
    use_default_colors();
    short cols[6] = { COLOR_CYAN, COLOR_YELLOW, COLOR_MAGENTA, COLOR_GREEN, COLOR_RED, COLOR_BLUE };
    for (int i = 0; i < 6; i++) init_pair((short)(1 + i), cols[i], -1);
    init_pair(PAIR_TITLE, COLOR_BLACK, COLOR_CYAN);
    init_pair(PAIR_STATUS, COLOR_BLACK, COLOR_WHITE);
    init_pair(PAIR_GOOD, COLOR_GREEN, -1);
    init_pair(PAIR_BAD, COLOR_RED, -1);
    init_pair(PAIR_WARN, COLOR_YELLOW, -1);
    init_pair(PAIR_RUNNING, COLOR_CYAN, -1);
    init_pair(PAIR_DIM, COLOR_BLUE, -1);
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
    case STORE_RUN_RUNNING: return COLOR_PAIR(PAIR_RUNNING) | A_BOLD;
    case STORE_RUN_FINISHED: return COLOR_PAIR(PAIR_GOOD);
    case STORE_RUN_INTERRUPTED: return COLOR_PAIR(PAIR_WARN);
    default: return COLOR_PAIR(PAIR_BAD);
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

void wb_draw_lines(wb_app *a, char **lines, size_t n, int y0, int y1, int *scroll)
{
    int page = y1 - y0 + 1;
    if (*scroll > (int)n - page) *scroll = (int)n - page;
    if (*scroll < 0) *scroll = 0;
    char b[48] = "";
    if ((int)n > page)
        snprintf(b, sizeof b, "%d-%d/%zu", *scroll + 1, *scroll + page < (int)n ? *scroll + page : (int)n, n);
    for (int r = 0; r < page; r++) {
        size_t i = (size_t)(*scroll + r);
        /* The last row leaves room for the position, never drawn over text. */
        int w = a->cols - 2 - (r == page - 1 && b[0] ? (int)strlen(b) + 1 : 0);
        if (i < n) wb_text(a, y0 + r, 1, w, 0, lines[i]);
    }
    if (b[0]) {
        attron(A_DIM);
        wb_text(a, y1, a->cols - 1 - (int)strlen(b), (int)strlen(b), 1, b);
        attroff(A_DIM);
    }
}

void wb_message(wb_app *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->msg, sizeof a->msg, fmt, ap);
    va_end(ap);
    a->msg_until = wb_now() + 4;
}

/* ---- panel stack ------------------------------------------------------------------- */

void wb_push(wb_app *a, wb_panel *p)
{
    if (a->depth < 8) a->stack[a->depth++] = p;
}

void wb_pop(wb_app *a)
{
    if (a->depth <= 1) return;
    wb_panel *p = a->stack[--a->depth];
    if (p->leave) p->leave(a);
}

static wb_panel *top_panel(wb_app *a) { return a->stack[a->depth - 1]; }

/* ---- frame ------------------------------------------------------------------------- */

static void draw_title(wb_app *a)
{
    wb_panel *p = top_panel(a);
    int at = a->color ? COLOR_PAIR(PAIR_TITLE) : A_REVERSE;
    attron(at);
    wb_fill(a, 0, 0, a->cols);
    char left[256], live[192];
    snprintf(left, sizeof left, " nnbench %s \xe2\x80\x94 %s", NNBENCH_VERSION, p->title);
    if (!a->utf8) snprintf(left, sizeof left, " nnbench %s - %s", NNBENCH_VERSION, p->title);
    wb_live_summary(a, live, sizeof live);
    char right[800];
    snprintf(right, sizeof right, "%s%s%s ", live, *live ? "  " : "", a->db_path);
    int rw = tui_text_width(right), lw = tui_text_width(left);
    if (rw > a->cols - lw - 1) rw = a->cols - lw - 1;
    wb_text(a, 0, 0, lw < a->cols ? lw : a->cols, 0, left);
    if (rw > 0) wb_text(a, 0, a->cols - rw, rw, 1, right);
    attroff(at);
}

static void draw_status(wb_app *a)
{
    int at = a->color ? COLOR_PAIR(PAIR_STATUS) : A_REVERSE;
    attron(at);
    wb_fill(a, a->rows - 1, 0, a->cols);
    if (a->msg[0] && wb_now() < a->msg_until) {
        wb_text(a, a->rows - 1, 1, a->cols - 2, 0, a->msg);
    } else {
        char b[512];
        a->msg[0] = 0;
        tui_status_hints(top_panel(a)->screen, a->utf8, a->cols - 2, b, sizeof b);
        wb_text(a, a->rows - 1, 1, a->cols - 2, 0, b);
    }
    attroff(at);
}

static void draw_too_small(wb_app *a)
{
    erase();
    char l1[128], l2[128];
    snprintf(l1, sizeof l1, "Terminal too small: %dx%d.", a->cols, a->rows);
    snprintf(l2, sizeof l2, "Please enlarge it to at least 80x24 (q quits).");
    int y = a->rows / 2 - 1;
    if (y < 0) y = 0;
    int x1 = (a->cols - (int)strlen(l1)) / 2, x2 = (a->cols - (int)strlen(l2)) / 2;
    wb_text(a, y, x1 > 0 ? x1 : 0, a->cols, 0, l1);
    wb_text(a, y + 1, x2 > 0 ? x2 : 0, a->cols, 0, l2);
}

static void draw_all(wb_app *a)
{
    if (a->too_small) { draw_too_small(a); refresh(); return; }
    erase();
    draw_title(a);
    top_panel(a)->draw(a);
    draw_status(a);
    refresh();
}

/* The one resize function: every KEY_RESIZE lands here. */
static void on_resize(wb_app *a)
{
    getmaxyx(stdscr, a->rows, a->cols);
    a->too_small = a->rows < 24 || a->cols < 80;
    for (int i = 0; i < a->depth; i++)
        if (a->stack[i]->resize) a->stack[i]->resize(a);
    clearok(curscr, TRUE);
}

/* The terminal is gone (its window closed, tmux killed): getch then returns ERR at once,
 * forever, and a loop that waits for a key would spin. SIGHUP is not always delivered
 * (only the foreground process group of the session gets it). */
static int term_gone(void)
{
    struct pollfd pf = { .fd = STDIN_FILENO, .events = POLLIN };
    return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* Keys for modal loops: handles resize itself; returns ERR on timeout, and Esc (cancel)
 * when a stop signal came or the terminal is gone, so no modal outlives its terminal. */
static int modal_getch(wb_app *a)
{
    int ch = getch();
    if (ch == KEY_RESIZE) on_resize(a);
    if (ch == ERR && term_gone()) got_sigterm = 1;
    if (got_sigterm) return 27;
    return ch;
}

/* A framed box of h x w cells at (y, x), filled, over the screen: the confirmation box and
 * the text-entry prompt. Returns the attribute its text is drawn with. */
static int modal_box(wb_app *a, int y, int x, int h, int w)
{
    int at = a->color ? COLOR_PAIR(PAIR_STATUS) : A_REVERSE;
    attron(at);
    for (int r = 0; r < h; r++) wb_fill(a, y + r, x, w);
    attroff(at);
    attron(at | A_BOLD);
    mvhline(y, x + 1, a->utf8 ? ACS_HLINE : '-', w - 2);
    mvhline(y + h - 1, x + 1, a->utf8 ? ACS_HLINE : '-', w - 2);
    mvvline(y + 1, x, a->utf8 ? ACS_VLINE : '|', h - 2);
    mvvline(y + 1, x + w - 1, a->utf8 ? ACS_VLINE : '|', h - 2);
    mvaddch(y, x, a->utf8 ? ACS_ULCORNER : '+');
    mvaddch(y, x + w - 1, a->utf8 ? ACS_URCORNER : '+');
    mvaddch(y + h - 1, x, a->utf8 ? ACS_LLCORNER : '+');
    mvaddch(y + h - 1, x + w - 1, a->utf8 ? ACS_LRCORNER : '+');
    attroff(at | A_BOLD);
    return at;
}

int wb_confirm(wb_app *a, const char *fmt, ...)
{
    char q[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    for (;;) {
        draw_all(a);
        if (!a->too_small) {
            /* A framed box over the screen; the question wraps at spaces (up to 3 lines). */
            int w = tui_text_width(q) + 6;
            if (w < 30) w = 30;
            if (w > a->cols - 4) w = a->cols - 4;
            char lines[3][256];
            int nl = 0;
            const char *p = q;
            while (*p && nl < 3) {
                int room = w - 6, len = (int)strlen(p), cut = len;
                if (tui_text_width(p) > room) {
                    cut = 0;
                    for (int i = 0, cells = 0; p[i] && cells <= room; i++) {
                        if (((unsigned char)p[i] & 0xc0) != 0x80) cells++;
                        if (p[i] == ' ' && cells <= room) cut = i;
                    }
                    if (!cut) cut = room;
                }
                snprintf(lines[nl++], sizeof lines[0], "%.*s", cut, p);
                p += cut;
                while (*p == ' ') p++;
            }
            int h = nl + 3, y = a->rows / 2 - h / 2, x = (a->cols - w) / 2;
            int at = modal_box(a, y, x, h, w);
            attron(at);
            for (int i = 0; i < nl; i++) wb_text(a, y + 1 + i, x + 3, w - 6, 0, lines[i]);
            wb_text(a, y + 1 + nl, x + 3, w - 6, 0, "y = yes   n / Esc = no");
            attroff(at);
            refresh();
        }
        int ch = modal_getch(a);
        if (got_sigint) { got_sigint = 0; return 0; }
        if (ch == 'y' || ch == 'Y') return 1;
        if (ch == 'n' || ch == 'N' || ch == 27 || ch == 'q') return 0;
    }
}

int wb_prompt(wb_app *a, const char *label, char *buf, size_t n, void (*on_change)(wb_app *, const char *))
{
    char orig[512];
    snprintf(orig, sizeof orig, "%s", buf);
    size_t len = strlen(buf);
    curs_set(1);
    for (;;) {
        draw_all(a);
        if (!a->too_small) {
            /* A framed box just above the screen's footer row and the status bar (which keeps
             * its hints and "? help"): the question, the input (its tail when long), the keys.
             * What the screen shows under it (the runs a filter keeps) stays in view above. */
            int w = tui_text_width(label) + 6;
            if (w < 60) w = 60;
            if (w > a->cols - 4) w = a->cols - 4;
            int h = 5, y = a->rows - 2 - h, x = (a->cols - w) / 2, room = w - 8;
            int at = modal_box(a, y, x, h, w);
            attron(at);
            wb_text(a, y + 1, x + 3, w - 6, 0, label);
            const char *show = buf;
            int bw = tui_text_width(buf);
            while (bw > room && *show) {   /* long input: its tail, whole characters */
                show++;
                while (((unsigned char)*show & 0xc0) == 0x80) show++;
                bw = tui_text_width(show);
            }
            wb_text(a, y + 2, x + 3, 2, 0, ">");
            wb_text(a, y + 2, x + 5, room, 0, show);
            wb_text(a, y + 3, x + 3, w - 6, 0, "Enter = ok   Esc = cancel   Ctrl-U = clear");
            attroff(at);
            move(y + 2, x + 5 + bw);
            refresh();
        }
        int ch = modal_getch(a);
        if (got_sigint) { got_sigint = 0; ch = 27; }
        if (ch == ERR || ch == KEY_RESIZE) continue;
        if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) { curs_set(0); return 1; }
        if (ch == 27) {
            snprintf(buf, n, "%s", orig);
            if (on_change) on_change(a, buf);
            curs_set(0);
            return 0;
        }
        if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
            /* Remove one whole UTF-8 character. */
            while (len > 0 && ((unsigned char)buf[len - 1] & 0xc0) == 0x80) len--;
            if (len > 0) len--;
            buf[len] = 0;
        } else if (ch == 21) { /* Ctrl-U */
            len = 0; buf[0] = 0;
        } else if (ch >= 32 && ch < 256 && len + 1 < n) {
            buf[len++] = (char)ch;
            buf[len] = 0;
        } else continue;
        if (on_change) on_change(a, buf);
    }
}

/* ---- Runs screen ------------------------------------------------------------------- */

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
    for (int c = 0; c < vis; c++) {
        char h[64];
        if (c > 0 && c - 1 == a->sort_col)
            snprintf(h, sizeof h, "%s%s", cols[c].title, a->utf8 ? (a->sort_desc ? "\xe2\x96\xbc" : "\xe2\x96\xb2") : (a->sort_desc ? "v" : "^"));
        else snprintf(h, sizeof h, "%s", cols[c].title);
        wb_text(a, 1, x, w[c], cols[c].right, h);
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
    snprintf(f, sizeof f, "%zu/%zu runs%s%s%s  %d marked", a->n_view, a->n_all, a->filter[0] ? "  filter: " : "",
             a->filter, "", a->n_marked);
    attron(A_DIM);
    wb_text(a, a->rows - 2, a->cols - 1 - tui_text_width(f), tui_text_width(f), 1, f);
    attroff(A_DIM);
}

static void filter_changed(wb_app *a, const char *s)
{
    (void)s;
    rebuild_view(a);
}

/* Deletes what the screen shows: the marked runs the filter lets through (marks hidden by
 * the filter are kept and the prompt says so), else the selected run. */
static void delete_runs(wb_app *a)
{
    long long ids[6];
    size_t n = 0;
    int hidden = 0;
    for (int i = 0; i < a->n_marked; i++) {
        int shown = 0;
        for (size_t k = 0; k < a->n_view && !shown; k++) shown = a->view[k].id == a->marked[i];
        if (shown) ids[n++] = a->marked[i];
        else hidden++;
    }
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
        if (a->n_marked < 2) wb_message(a, "mark 2 to 6 runs with Space first (%d marked)", a->n_marked);
        else wb_open_compare(a);
        break;
    case TUI_ACT_NEW: wb_open_new(a); break;
    case TUI_ACT_FILTER:
        wb_prompt(a, "filter (words, field:word, !word; the list follows as you type)", a->filter, sizeof a->filter, filter_changed);
        rebuild_view(a);
        break;
    case TUI_ACT_SORT:
        /* A new column starts ascending; S flips it. */
        a->sort_col = (a->sort_col + 1) % TUI_RC_COUNT;
        a->sort_desc = 0;
        rebuild_view(a);
        wb_message(a, "sorted by %s", tui_run_col_names[a->sort_col]);
        break;
    case TUI_ACT_SORT_ORDER:
        a->sort_desc = !a->sort_desc;
        rebuild_view(a);
        break;
    case TUI_ACT_DELETE: delete_runs(a); break;
    case TUI_ACT_CLEAR_MARKS:
        wb_message(a, "%d mark%s cleared", a->n_marked, a->n_marked == 1 ? "" : "s");
        a->n_marked = 0;
        break;
    case TUI_ACT_REFRESH: wb_reload_runs(a); wb_message(a, "reloaded %zu runs", a->n_all); break;
    case TUI_ACT_STOP:
        if (!wb_live_running(a)) wb_message(a, "no run in progress");
        else if (wb_confirm(a, "Stop the run in progress?")) wb_live_stop(a);
        break;
    case TUI_ACT_BACK:
        if (a->filter[0]) { a->filter[0] = 0; rebuild_view(a); }
        break;
    default: return 0;
    }
    if (a->sel >= (int)a->n_view) a->sel = (int)a->n_view - 1;
    if (a->sel < 0) a->sel = 0;
    return 1;
}

wb_panel wb_runs_panel = { .title = "Runs", .screen = TUI_SCR_RUNS, .draw = runs_draw, .key = runs_key };

/* ---- Help screen ------------------------------------------------------------------- */

static int help_scroll;
static unsigned help_for;

static void help_draw(wb_app *a)
{
    char **lines = calloc(tui_n_keys + 8, sizeof *lines);
    size_t n = 0;
    char where[64];
    if (!lines) return;
    tui_screens_names(help_for, where, sizeof where);
    lines[n] = malloc(160);
    if (lines[n]) snprintf(lines[n++], 160, "Keys on the %s screen (others in brackets):", where);
    lines[n] = strdup("");
    if (lines[n]) n++;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < tui_n_keys; i++) {
            const tui_key *k = &tui_keys[i];
            int here = (k->screens & help_for) != 0;
            if (here != (pass == 0)) continue;
            char *l = malloc(256);
            if (!l) continue;
            const char *lab = !a->utf8 && k->label_ascii ? k->label_ascii : k->label;
            tui_screens_names(k->screens & ~(unsigned)TUI_SCR_HELP, where, sizeof where);
            char padded[96];
            tui_fit(lab, 18, 0, a->utf8, padded, sizeof padded);
            if (here) snprintf(l, 256, "  %s %s", padded, k->help);
            else snprintf(l, 256, "  %s %s  [%s]", padded, k->help, where);
            if (!a->utf8) { char b[256]; tui_fit(l, 250, 0, 0, b, sizeof b); snprintf(l, 256, "%s", b); }
            lines[n++] = l;
        }
    attron(A_BOLD);
    wb_text(a, 1, 1, a->cols - 2, 0, "Help");
    attroff(A_BOLD);
    wb_draw_lines(a, lines, n, 2, a->rows - 2, &help_scroll);
    for (size_t i = 0; i < n; i++) free(lines[i]);
    free(lines);
}

static int help_key(wb_app *a, tui_action act, int ch)
{
    (void)ch;
    if (act == TUI_ACT_BACK || act == TUI_ACT_HELP) { wb_pop(a); return 1; }
    return wb_scroll_key(act, &help_scroll, (int)tui_n_keys + 2, a->rows - 3);
}

wb_panel wb_help_panel = { .title = "Help", .screen = TUI_SCR_HELP, .draw = help_draw, .key = help_key };

/* ---- main loop --------------------------------------------------------------------- */

static int want_quit(wb_app *a)
{
    if (wb_live_running(a)) {
        if (!wb_confirm(a, "A run is in progress. Stop it and quit?")) return 0;
        wb_live_stop(a);
    }
    return 1;
}

static void loop(wb_app *a)
{
    while (!a->quit) {
        double now = wb_now();
        if (now - a->last_poll >= 0.5) {
            uint64_t tok = 0;
            a->last_poll = now;
            if (!store_watch_token(a->db, &tok) && tok != a->token) {
                a->token = tok;
                wb_reload_runs(a);
                /* Screens showing one run reload it when the database moved. */
                wb_panel *p = top_panel(a);
                if (p->reload) p->reload(a);
            }
        }
        draw_all(a);
        int ch = getch();
        if (ch == ERR && term_gone()) got_sigterm = 1;
        if (got_sigterm) { wb_live_stop(a); a->quit = 1; break; }
        if (got_sigint) {
            got_sigint = 0;
            if (want_quit(a)) a->quit = 1;
            continue;
        }
        if (ch == ERR) continue;
        if (ch == KEY_RESIZE) { on_resize(a); continue; }
        wb_panel *p = top_panel(a);
        if (a->too_small) {
            if (ch == 'q' && want_quit(a)) a->quit = 1;
            continue;
        }
        tui_action act = tui_key_action(ch, p->screen);
        a->msg[0] = 0;
        if (p->key(a, act, ch)) continue;
        switch (act) {
        case TUI_ACT_QUIT:
            if (want_quit(a)) a->quit = 1;
            break;
        case TUI_ACT_HELP:
            help_for = p->screen;
            help_scroll = 0;
            wb_push(a, &wb_help_panel);
            break;
        case TUI_ACT_BACK: wb_pop(a); break;
        default: break;
        }
    }
}

void cmd_tui_help(FILE *f)
{
    fprintf(f, "usage: nnbench tui [--db PATH] [--no-color]\n\n"
               "The ncurses workbench on the database (default ./nnbench.db, or $NNBENCH_DB).\n"
               "Press ? inside for the keys. NO_COLOR in the environment also gives monochrome.\n"
               "  --keys-markdown   print the key table as Markdown (for docs/workbench.md) and exit\n");
}

int cmd_tui(int argc, char **argv)
{
    const char *db_flag = NULL;
    int no_color = getenv("NO_COLOR") && *getenv("NO_COLOR");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--db") && i + 1 < argc) db_flag = argv[++i];
        else if (!strncmp(argv[i], "--db=", 5)) db_flag = argv[i] + 5;
        else if (!strcmp(argv[i], "--no-color")) no_color = 1;
        else if (!strcmp(argv[i], "--keys-markdown")) { tui_keys_markdown(stdout); return 0; }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { cmd_tui_help(stdout); return 0; }
        else if (!strcmp(argv[i], "tui")) continue; /* `nnbench --db X` passes argv from main */
        else {
            if (argv[i][0] == '-') return cli_unknown_option("tui", argv[i]);
            fprintf(stderr, "nnbench tui: unexpected argument '%s' (see nnbench tui --help)\n", argv[i]);
            return 2;
        }
    }
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "nnbench tui: needs a terminal (stdin and stdout must be a tty); "
                        "for scripts use `nnbench list`, `show`, `compare`\n");
        return 2;
    }
    static wb_app app;
    wb_app *a = &app;
    memset(a, 0, sizeof *a);
    snprintf(a->db_path, sizeof a->db_path, "%s", cli_db_path(db_flag));
    if (store_open(a->db_path, STORE_OPEN_CREATE, &a->db)) {
        /* A read-only place still deserves a look at its runs. */
        if (store_open(a->db_path, 0, &a->db)) {
            fprintf(stderr, "nnbench tui: %s\n", store_error());
            return 1;
        }
    }
    pthread_mutex_init(&a->live.mu, NULL);
    a->sort_col = TUI_RC_ID;
    a->sort_desc = 1;
    a->smooth_idx = 0;
    a->token = 0;
    a->last_poll = -1;

    setlocale(LC_ALL, "");
    const char *cs = nl_langinfo(CODESET);
    a->utf8 = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
    set_escdelay(25);
    install_signals();
    if (!initscr()) {
        restore_signals();
        store_close(a->db);
        fprintf(stderr, "nnbench tui: cannot initialise the terminal (TERM=%s)\n", getenv("TERM") ? getenv("TERM") : "");
        return 1;
    }
    curses_on = 1;
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    timeout(100);
    a->color = !no_color && has_colors();
    init_colours(a);
    wb_push(a, &wb_runs_panel);
    on_resize(a);
    wb_reload_runs(a);
    loop(a);
    wb_live_join(a);
    curses_on = 0;
    endwin();
    restore_signals();
    while (a->depth > 1) wb_pop(a);
    wb_live_free(a);
    free(a->all);
    free(a->view);
    store_close(a->db);
    return 0;
}
