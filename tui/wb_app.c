/* wb_app.c — the ncurses workbench's frame: terminal set-up and restore (exit, Ctrl-C,
 * crash signals), the panel stack, title and status bar, dialogs, resize, the main loop.
 * It names no screen: cmd_tui.c pushes the first one, panels push the others.
 */
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
    /* On an alternate stack (profiler/signals.c), which a crash from a stack overflow
     * needs as well. */
    prof_signal_set(SIGINT, on_int, 0, NULL);
    prof_signal_set(SIGTERM, on_int, 0, NULL);
    prof_signal_set(SIGHUP, on_int, 0, NULL);
    int crash[] = { SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL };
    for (size_t i = 0; i < sizeof crash / sizeof crash[0]; i++) prof_signal_set(crash[i], on_crash, SA_RESETHAND, NULL);
}

static void restore_signals(void)
{
    int all[] = { SIGINT, SIGTERM, SIGHUP, SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) signal(all[i], SIG_DFL);
}

void wb_message(wb_app *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->msg, sizeof a->msg, fmt, ap);
    va_end(ap);
    a->msg_until = wb_now() + 4;
    a->msg_live = 0;
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
    int at = a->color ? COLOR_PAIR(WB_PAIR_TITLE) : A_REVERSE;
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

static int panel_offers(void *ud, tui_action act)
{
    wb_app *a = ud;
    wb_panel *p = top_panel(a);
    return !p->offers || p->offers(a, act);
}

static void draw_status(wb_app *a)
{
    int at = a->color ? COLOR_PAIR(WB_PAIR_STATUS) : A_REVERSE;
    attron(at);
    wb_fill(a, a->rows - 1, 0, a->cols);
    /* "training started" must not outlive the training: a job's message ends with it */
    if (a->msg_live && !wb_live_running(a)) a->msg[0] = 0;
    if (a->msg[0] && wb_now() < a->msg_until) {
        wb_text(a, a->rows - 1, 1, a->cols - 2, 0, a->msg);
    } else {
        char b[512];
        a->msg[0] = 0;
        tui_status_hints_if(top_panel(a)->screen, a->utf8, a->cols - 2, panel_offers, a, b, sizeof b);
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
    a->hdr_y = -1;
    a->hdr_n = 0;
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
    int at = a->color ? COLOR_PAIR(WB_PAIR_STATUS) : A_REVERSE;
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
                int cut = tui_wrap_cut(p, w - 6);
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

void wb_sort_by(int *cur, int *desc, int key)
{
    if (key < 0) return;
    if (*cur == key) *desc = !*desc;
    else { *cur = key; *desc = 0; }
}

/* The picker's row under a click, or -1 (its box as wb_pick lays it out). */
static int pick_hit(int y0, int x0, int w, int n, int y, int x)
{
    return x > x0 && x < x0 + w - 1 && y > y0 && y <= y0 + n ? y - y0 - 1 : -1;
}

int wb_pick(wb_app *a, const char *title, const char *const *items, int n, int cur)
{
    int sel = cur >= 0 && cur < n ? cur : 0;
    for (;;) {
        draw_all(a);
        int w = tui_text_width(title) + 6, h = n + 3;
        for (int i = 0; i < n; i++)
            if (tui_text_width(items[i]) + 10 > w) w = tui_text_width(items[i]) + 10;
        if (w < 34) w = 34;
        if (h > a->rows - 2) h = a->rows - 2;
        int shown = h - 3, y = (a->rows - h) / 2, x = (a->cols - w) / 2, top = sel >= shown ? sel - shown + 1 : 0;
        if (!a->too_small) {
            int at = modal_box(a, y, x, h, w);
            attron(at);
            char t[160];
            snprintf(t, sizeof t, " %s ", title);
            wb_text(a, y, x + 2, tui_text_width(t), 0, t);
            for (int i = 0; i < shown && top + i < n; i++) {
                char l[160];
                /* ">" the cursor; the current key marked, as the footer's arrow marks it */
                snprintf(l, sizeof l, "%s %s %s", top + i == sel ? ">" : " ",
                         top + i == cur ? (a->utf8 ? "\xe2\x97\x8f" : "*") : " ", items[top + i]);
                if (top + i == sel) attron(A_BOLD | A_UNDERLINE);
                wb_text(a, y + 1 + i, x + 2, w - 4, 0, l);
                if (top + i == sel) attroff(A_BOLD | A_UNDERLINE);
            }
            wb_text(a, y + h - 2, x + 3, w - 6, 0, "Enter = sort   Esc = cancel");
            attroff(at);
            refresh();
        }
        int ch = modal_getch(a);
        if (got_sigint) { got_sigint = 0; return -1; }
        if (ch == 27 || ch == 'q') return -1;
        if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) return sel;
        if ((ch == KEY_UP || ch == 'k') && sel > 0) sel--;
        if ((ch == KEY_DOWN || ch == 'j') && sel < n - 1) sel++;
        MEVENT ev;
        if (ch == KEY_MOUSE && getmouse(&ev) == OK && (ev.bstate & (BUTTON1_PRESSED | BUTTON1_CLICKED))) {
            int i = pick_hit(y, x, w, shown, ev.y, ev.x);
            if (i >= 0 && top + i < n) return top + i;
        }
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
                /* The first screen (the runs list) always follows the database; the one
                 * on top too when it shows stored data. */
                wb_panel *base = a->stack[0], *p = top_panel(a);
                if (base->reload) base->reload(a);
                if (p != base && p->reload) p->reload(a);
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
        if (ch == KEY_MOUSE) {
            MEVENT ev;
            if (getmouse(&ev) == OK && (ev.bstate & (BUTTON1_PRESSED | BUTTON1_CLICKED)) && p->click && !a->too_small) {
                a->msg[0] = 0;
                p->click(a, ev.y, ev.x);
            }
            continue;
        }
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
            if (a->open_help) a->open_help(a, p->screen);
            break;
        case TUI_ACT_BACK: wb_pop(a); break;
        default: break;
        }
    }
}

int wb_app_run(wb_app *a, int no_color)
{
    setlocale(LC_ALL, "");
    const char *cs = nl_langinfo(CODESET);
    a->utf8 = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
    set_escdelay(25);
    install_signals();
    if (!initscr()) {
        restore_signals();
        fprintf(stderr, "nnbench tui: cannot initialise the terminal (TERM=%s)\n", getenv("TERM") ? getenv("TERM") : "");
        return 1;
    }
    curses_on = 1;
    prof_signals_onstack(); /* ncurses' own: SIGWINCH, SIGTSTP */
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    /* Clicks select rows and tabs (as htop); each press is reported at once (no click
     * timing), so a click is never held back waiting for a double click. */
    mousemask(BUTTON1_PRESSED | BUTTON1_CLICKED, NULL);
    mouseinterval(0);
    curs_set(0);
    timeout(100);
    a->color = !no_color && has_colors();
    wb_colours_init(a);
    on_resize(a);
    if (a->stack[0]->reload) a->stack[0]->reload(a);
    loop(a);
    wb_live_join(a);
    curses_on = 0;
    endwin();
    restore_signals();
    return 0;
}
