/* wb_keys.c — the workbench's one key table: it decides what a key does on each screen and
 * is printed as the help screen, the status bar and the docs/workbench.md's key list.
 */
#include "tui.h"

#include <curses.h>
#include <string.h>

#define ESC 27
#define CTRL(c) ((c) & 0x1f)

#define NAV (TUI_SCR_RUNS | TUI_SCR_RUN | TUI_SCR_COMPARE | TUI_SCR_NEW | TUI_SCR_HELP)

const tui_key tui_keys[] = {
    { { KEY_UP, 'k' }, "↑ / k", "Up / k", TUI_ACT_UP, NAV, "move up (scroll in text views)", NULL },
    { { KEY_DOWN, 'j' }, "↓ / j", "Down / j", TUI_ACT_DOWN, NAV, "move down", NULL },
    { { KEY_PPAGE, CTRL('b') }, "PgUp", NULL, TUI_ACT_PGUP, NAV, "one page up", NULL },
    { { KEY_NPAGE, CTRL('f') }, "PgDn", NULL, TUI_ACT_PGDN, NAV, "one page down", NULL },
    { { KEY_HOME, 'g' }, "Home / g", NULL, TUI_ACT_HOME, NAV, "first row", NULL },
    { { KEY_END, 'G' }, "End / G", NULL, TUI_ACT_END, NAV, "last row", NULL },
    { { KEY_LEFT, 'h' }, "← / h", "Left / h", TUI_ACT_LEFT, TUI_SCR_NEW, "previous choice of the selected field", NULL },
    { { KEY_RIGHT, 'l' }, "→ / l", "Right / l", TUI_ACT_RIGHT, TUI_SCR_NEW, "next choice of the selected field", NULL },
    { { KEY_LEFT, 'h' }, "← / h", "Left / h", TUI_ACT_TAB_PREV, TUI_SCR_RUN, "previous tab", NULL },
    { { KEY_RIGHT, 'l' }, "→ / l", "Right / l", TUI_ACT_TAB_NEXT, TUI_SCR_RUN, "next tab", NULL },
    { { '1', '2', '3', '4', '5', '6', '7' }, "1 - 7", NULL, TUI_ACT_TAB_N, TUI_SCR_RUN,
      "tab by number (Curves, Profile, Solver, Config, System, Layers, Int8)", NULL },
    { { '\n', '\r', KEY_ENTER }, "Enter", NULL, TUI_ACT_OPEN, TUI_SCR_RUNS, "open the selected run", "open" },
    { { '\n', '\r', KEY_ENTER }, "Enter", NULL, TUI_ACT_EDIT, TUI_SCR_NEW, "edit the selected field, or start on [Start]", "edit" },
    { { ESC, KEY_BACKSPACE, 127, 8 }, "Esc / Backspace", NULL, TUI_ACT_BACK, TUI_SCR_RUNS | TUI_SCR_RUN | TUI_SCR_COMPARE | TUI_SCR_NEW | TUI_SCR_HELP, "back to the previous screen (on Runs: clear the filter)", "back" },
    { { '\t' }, "Tab", NULL, TUI_ACT_TAB_NEXT, TUI_SCR_RUN, "next tab", "tab" },
    { { KEY_BTAB }, "Shift-Tab", NULL, TUI_ACT_TAB_PREV, TUI_SCR_RUN, "previous tab", NULL },
    { { ' ' }, "Space", NULL, TUI_ACT_MARK, TUI_SCR_RUNS, "mark / unmark a run for Compare (1 to 6)", "mark" },
    { { 'c' }, "c", NULL, TUI_ACT_COMPARE, TUI_SCR_RUNS, "compare the marked runs the screen shows (as d deletes them)", "compare" },
    { { 'c' }, "c", NULL, TUI_ACT_COMPARE, TUI_SCR_NEW, "compare the runs the last start made (all variants: the batch)", "compare" },
    { { 'n' }, "n", NULL, TUI_ACT_NEW, TUI_SCR_RUNS, "new run: pick a sample and a variant, edit keys, start", "new" },
    { { '/' }, "/", NULL, TUI_ACT_FILTER, TUI_SCR_RUNS, "filter runs (words; field:word, e.g. status:finished; !word excludes)", "filter" },
    { { '/' }, "/", NULL, TUI_ACT_FILTER, TUI_SCR_RUN, "Config and System tabs: find text (case-insensitive; again: the next match)", "find" },
    { { 's' }, "s", NULL, TUI_ACT_SORT, TUI_SCR_RUNS | TUI_SCR_RUN, "sort by the next column (Runs; Profile tab)", "sort" },
    { { 'b' }, "b", NULL, TUI_ACT_GROUP, TUI_SCR_RUN, "Profile tab: rows by op and layer / op / layer / phase (as run --profile-by)", "by" },
    { { 'S' }, "S", NULL, TUI_ACT_SORT_ORDER, TUI_SCR_RUNS | TUI_SCR_RUN, "reverse the sort order", NULL },
    { { 'o' }, "o", NULL, TUI_ACT_SORT_PICK, TUI_SCR_RUNS | TUI_SCR_RUN, "sort by: a list of the sortable columns, the current one marked (Runs; Profile tab); a click on a column title sorts by it, again reverses", NULL },
    { { 'd', KEY_DC }, "d / Delete", NULL, TUI_ACT_DELETE, TUI_SCR_RUNS, "delete the marked runs the screen shows (else the selected one), after confirmation", "delete" },
    { { 'u' }, "u", NULL, TUI_ACT_CLEAR_MARKS, TUI_SCR_RUNS, "clear all marks", NULL },
    { { 'u', KEY_DC }, "u / Delete", NULL, TUI_ACT_REVERT, TUI_SCR_NEW, "undo the edit of the selected key (back to the file's value)", "undo" },
    { { 'r', CTRL('l') }, "r", NULL, TUI_ACT_REFRESH, TUI_SCR_RUNS | TUI_SCR_RUN | TUI_SCR_COMPARE, "reload from the database and redraw", NULL },
    { { 'L' }, "L", NULL, TUI_ACT_LOG_Y, TUI_SCR_RUN | TUI_SCR_COMPARE | TUI_SCR_NEW, "charts: log / linear y axis", "log-y" },
    { { 'x' }, "x", NULL, TUI_ACT_X_AXIS, TUI_SCR_RUN | TUI_SCR_COMPARE | TUI_SCR_NEW, "charts: x axis step / wall time / hybrid time", "x-axis" },
    { { 'X' }, "X", NULL, TUI_ACT_X_SCALE, TUI_SCR_RUN | TUI_SCR_COMPARE | TUI_SCR_NEW, "charts: x scale linear / log / normalised per run (each run's x divided by its own last x)", "x-scale" },
    { { 'm' }, "m", NULL, TUI_ACT_SMOOTH, TUI_SCR_RUN | TUI_SCR_COMPARE | TUI_SCR_NEW, "charts: smoothing off / 0.6 / 0.9 (EMA, debiased)", "smooth" },
    { { 'v' }, "v", NULL, TUI_ACT_METRIC, TUI_SCR_COMPARE | TUI_SCR_RUN, "Compare: chart the next metric (losses, accuracies, then scaling against n when the runs differ in it, then layer telemetry keys); Layers tab: the next statistic; Profile tab of a data-parallel run: one rank at a time, or all", "metric" },
    { { 'a' }, "a", NULL, TUI_ACT_ALL_KEYS, TUI_SCR_COMPARE, "Compare: all config keys / only differing ones", "all-keys" },
    { { 'R' }, "R", NULL, TUI_ACT_RESUME, TUI_SCR_RUN, "resume this crashed, interrupted or failed run from its last checkpoint, into the same run id (asks first; says why when it cannot)", "resume" },
    { { 'Q' }, "Q", NULL, TUI_ACT_QUANTIZE, TUI_SCR_RUN, "int8-quantize this finished run's final checkpoint (asks calibration samples and scheme); the Int8 tab shows fp32 vs int8", "quantize" },
    { { 'K' }, "K", NULL, TUI_ACT_STOP, TUI_SCR_NEW | TUI_SCR_RUNS | TUI_SCR_RUN, "stop the run (or resume, quantization) in progress, or the selected run another nnbench process of this host runs (SIGINT to its pid); asks first, says why when it cannot", "stop" },
    { { '?', KEY_F(1) }, "? / F1", NULL, TUI_ACT_HELP, TUI_SCR_RUNS | TUI_SCR_RUN | TUI_SCR_COMPARE | TUI_SCR_NEW, "this help", "help" },
    { { 'q', CTRL('c') }, "q", NULL, TUI_ACT_QUIT, TUI_SCR_ALL, "quit (asks if a run is in progress)", "quit" },
};
const size_t tui_n_keys = sizeof tui_keys / sizeof tui_keys[0];

tui_action tui_key_action(int key, unsigned screen)
{
    for (size_t i = 0; i < tui_n_keys; i++) {
        if (!(tui_keys[i].screens & screen)) continue;
        for (int k = 0; k < TUI_KEY_CODES && tui_keys[i].keys[k]; k++)
            if (tui_keys[i].keys[k] == key) return tui_keys[i].action;
    }
    return TUI_ACT_NONE;
}

const tui_key *tui_key_for(tui_action a, unsigned screen)
{
    for (size_t i = 0; i < tui_n_keys; i++)
        if (tui_keys[i].action == a && (tui_keys[i].screens & screen)) return &tui_keys[i];
    return NULL;
}

void tui_screens_names(unsigned s, char *buf, size_t n)
{
    static const char *names[] = { "Runs", "Run", "Compare", "New run", "Help" };
    size_t o = 0;
    buf[0] = 0;
    if ((s & TUI_SCR_ALL) == TUI_SCR_ALL) { snprintf(buf, n, "all"); return; }
    for (int i = 0; i < 5; i++) {
        if (!(s & (1u << i))) continue;
        int k = snprintf(buf + o, n - o, "%s%s", o ? ", " : "", names[i]);
        if (k < 0 || (size_t)k >= n - o) break;
        o += (size_t)k;
    }
}

static const char *key_label(const tui_key *k, int utf8)
{
    return !utf8 && k->label_ascii ? k->label_ascii : k->label;
}

/* "K hint" for the status bar: first alternative of the key label only. */
static int hint_item(const tui_key *k, int utf8, int first, char *item, size_t n)
{
    char lab[32];
    snprintf(lab, sizeof lab, "%s", key_label(k, utf8));
    char *sp = strstr(lab, " / ");
    if (sp) *sp = 0;
    return snprintf(item, n, "%s%s %s", first ? "" : "  ", lab, k->hint);
}

int tui_status_hints(unsigned screen, int utf8, int width, char *buf, size_t n)
{
    return tui_status_hints_if(screen, utf8, width, NULL, NULL, buf, n);
}

int tui_status_hints_if(unsigned screen, int utf8, int width, int (*offers)(void *ud, tui_action act), void *ud,
                        char *buf, size_t n)
{
    size_t o = 0;
    int used = 0;
    buf[0] = 0;
    /* "? help" always stays: the other hints get the width it leaves. */
    const tui_key *help = tui_key_for(TUI_ACT_HELP, screen);
    char hitem[64] = "";
    if (help && help->hint) hint_item(help, utf8, 0, hitem, sizeof hitem);
    int hcells = tui_text_width(hitem);
    for (size_t i = 0; i < tui_n_keys; i++) {
        const tui_key *k = &tui_keys[i];
        if (!k->hint || !(k->screens & screen) || k == help) continue;
        if (offers && !offers(ud, k->action)) continue;
        char item[64];
        int len = hint_item(k, utf8, !used, item, sizeof item);
        int cells = tui_text_width(item);
        if (used + cells + hcells > width || o + (size_t)len >= n) break;
        memcpy(buf + o, item, (size_t)len + 1);
        o += (size_t)len;
        used += cells;
    }
    if (hitem[0]) {
        const char *h = used ? hitem : hitem + 2;
        size_t len = strlen(h);
        if (used + tui_text_width(h) <= width && o + len < n) {
            memcpy(buf + o, h, len + 1);
            used += tui_text_width(h);
        }
    }
    return used;
}

void tui_keys_markdown(FILE *f)
{
    fprintf(f, "| Key | Where | What it does |\n|---|---|---|\n");
    for (size_t i = 0; i < tui_n_keys; i++) {
        const tui_key *k = &tui_keys[i];
        char where[64];
        tui_screens_names(k->screens & ~(unsigned)TUI_SCR_HELP, where, sizeof where);
        if ((k->screens & (TUI_SCR_ALL & ~(unsigned)TUI_SCR_HELP)) == (TUI_SCR_ALL & ~(unsigned)TUI_SCR_HELP))
            snprintf(where, sizeof where, "everywhere");
        fprintf(f, "| `%s` | %s | %s |\n", k->label, where, k->help);
    }
}
