/* wb_help.c — the help screen: the keys of the screen it was opened from (first) and of the
 * others, from the one key table (wb_keys.c). */
#include "wb.h"

#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- Help screen ------------------------------------------------------------------- */

static int help_scroll;
static int help_page = 1; /* the rows the last draw showed (the position takes a row) */
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
    help_page = wb_draw_lines(a, lines, n, 2, a->rows - 2, &help_scroll);
    for (size_t i = 0; i < n; i++) free(lines[i]);
    free(lines);
}

static int help_key(wb_app *a, tui_action act, int ch)
{
    (void)ch;
    if (act == TUI_ACT_BACK || act == TUI_ACT_HELP) { wb_pop(a); return 1; }
    return wb_scroll_key(act, &help_scroll, (int)tui_n_keys + 2, help_page);
}

wb_panel wb_help_panel = { .title = "Help", .screen = TUI_SCR_HELP, .draw = help_draw, .key = help_key };

void wb_open_help(wb_app *a, unsigned screen)
{
    help_for = screen;
    help_scroll = 0;
    wb_push(a, &wb_help_panel);
}
