/* tui.h — private header of the workbench: table layout and text fitting, run sorting
 * and filtering, and the one key table behind the help screen, the status bar and the
 * docs/workbench.md's key list. Nothing here draws; wb_app.c does (ncurses).
 */
#ifndef NNBENCH_TUI_H
#define NNBENCH_TUI_H

#include <stddef.h>
#include <stdio.h>

#include "../store/store.h"
#include "chart.h"
#include "text.h"

/* ---- text and tables --------------------------------------------------------------- */

/* Display width of UTF-8 text, one cell per code point (the workbench shows names,
 * numbers and box drawing; no double-width scripts are expected). */
int tui_text_width(const char *s);
/* Fits s into exactly width cells: padded with spaces (right-aligned if right), or cut
 * with an ellipsis ("…" with utf8, "~" without) when too long. Control and bidi
 * characters are shown as \x1b, \u202e (prof_text_visible), never sent to the terminal. Writes at most outsz bytes
 * (always NUL-terminated); returns the number of cells written. */
int tui_fit(const char *s, int width, int right, int utf8, char *out, size_t outsz);

typedef struct {
    const char *title;
    int want;     /* natural width: widest cell or title */
    int min;      /* never shrunk below this (unless it is the only column) */
    int right;    /* right-aligned (numbers) */
    int flex;     /* takes the width left over, and gives width first when short */
} tui_col;

/* Widths for columns in `width` cells with `gap` spaces between columns: natural widths
 * when they fit (leftover to the first flex column), else flex columns shrink first, then
 * every column down to its minimum, then columns are dropped from the right. Returns the
 * number of columns shown (>= 1 when n >= 1); w[i] of hidden columns is 0. */
int tui_table_layout(const tui_col *cols, int n, int width, int gap, int *w);

/* ---- the runs table ---------------------------------------------------------------- */

typedef enum {
    TUI_RC_ID, TUI_RC_NAME, TUI_RC_STATUS, TUI_RC_OPT, TUI_RC_DATA, TUI_RC_LOSS,
    TUI_RC_ACC, TUI_RC_DURATION, TUI_RC_STARTED, TUI_RC_COUNT
} tui_run_col;
extern const char *const tui_run_col_names[TUI_RC_COUNT];

/* Text of one cell of a run's row (now: for the duration of running runs). */
void tui_run_cell(const store_run *r, tui_run_col c, double now, char *buf, size_t n);
/* Seconds a run took (or has taken so far); NAN if unknown. */
double tui_run_duration(const store_run *r, double now);
/* Stable sort by column; unknown values (NAN) last in either order; ties by id. */
void tui_runs_sort(store_run *runs, size_t n, tui_run_col col, int desc);
/* Filter text: space-separated terms, all of which must match. "word" matches any of
 * name, variant, status, optimizer, dataset, model, file (case-insensitive substring);
 * "field:word" one field (id name variant status opt data model file); "!term" negates. */
int tui_run_matches(const store_run *r, const char *filter);
/* Keeps the matching runs in order, compacting in place; returns the new count. */
size_t tui_runs_filter(store_run *runs, size_t n, const char *filter);

/* Unix time in seconds with sub-second precision (runs store started/ended this way). */
double tui_unix_now(void);
/* Numbers, durations and sizes: prof_fmt_num / prof_fmt_duration / prof_fmt_bytes
 * (profiler/profiler.h), the one set of formats. */

/* ---- the comparison (store_compare) as text, for `compare` and the Compare screen ---- */

/* Widths of the label column and of each run's column for width cells: names get the
 * room first (the label column gives way before run columns shrink). With all_keys the
 * rows keep 3 cells for the "  *" that marks a key that differs. */
void tui_compare_widths(const store_compare *c, int width, int all_keys, int *lw, int *cw);
/* One row: the label, then each run's cell right-aligned, cut with an ellipsis; tail
 * (may be NULL) appended. */
void tui_compare_row_text(const store_compare *c, const char *label, char (*cells)[64], int lw, int cw, int utf8,
                          const char *tail, char *out, size_t cap);
/* Every row of c as lines, with section headings ("Results", "Time", "Config (keys that
 * differ)", ...). Free with tui_lines_free. 0 ok, -1 out of memory. */
int tui_compare_lines(const store_compare *c, int width, int utf8, int all_keys, char ***lines, size_t *n);
void tui_lines_free(char **l, size_t n);
void tui_lines_clear(char ***l, size_t *n);   /* frees and empties the list */
/* Appends a printf-formatted line (tabs expanded to 4 columns, CRs dropped) to the list
 * *l of *n lines. 0 ok, -1 out of memory (the list is unchanged). */
int tui_lines_add(char ***l, size_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Bytes of s that fill at most width cells: cut at the last space that fits (at the width
 * when one word is longer; one character at least), never inside a UTF-8 character; all
 * of s when it fits. Skip the spaces after the cut to start the next line. */
int tui_wrap_cut(const char *s, int width);
/* Appends text as lines of at most width cells, cut at spaces (tui_wrap_cut), the lines
 * after the first indented by indent spaces. 0 ok, -1 out of memory. */
int tui_lines_wrap(char ***l, size_t *n, const char *text, int width, int indent);
/* A run's name in chart legends: "#3 adam" (the shared experiment name is in the title). */
void tui_compare_legend(const store_compare *c, size_t i, char *buf, size_t n);

/* The op diff of two runs (store_diff) as lines: A and B, a note, the summary, then the
 * table in width cells (max_rows 0 = every row). The `diff` command and the Compare screen
 * of two runs. 0 ok, -1 out of memory. (cmd_diff.c) */
int tui_diff_lines(const store_diff *d, int width, int utf8, size_t max_rows, char ***lines, size_t *n);

/* The scaling view of a comparison (store_scaling) as lines: a heading, then per measure a
 * table with a row per n, a column per variant and the fitted exponent last, and what was
 * not fitted; only the note when the runs hold fewer than 2 sizes. 0 ok, -1 out of
 * memory. (cmp_scaling.c) */
int tui_scaling_lines(const store_scaling *s, int width, int utf8, char ***lines, size_t *n);
/* The chart series of measure m, one per variant (x = n), each labelled "full n^2.03" in
 * labels (96 bytes each); at most cap. Returns how many. */
size_t tui_scaling_series(const store_scaling *s, store_scale_measure m, tui_series *out, char (*labels)[96], size_t cap);
/* Log-log axes, labels and a title (written into title) for measure m's chart. */
void tui_scaling_chart_opts(store_scale_measure m, tui_chart_opts *o, char *title, size_t cap);

/* ---- keys -------------------------------------------------------------------------- */

enum {
    TUI_SCR_RUNS = 1, TUI_SCR_RUN = 2, TUI_SCR_COMPARE = 4, TUI_SCR_NEW = 8,
    TUI_SCR_HELP = 16, TUI_SCR_ALL = 31,
};

typedef enum {
    TUI_ACT_NONE, TUI_ACT_UP, TUI_ACT_DOWN, TUI_ACT_PGUP, TUI_ACT_PGDN, TUI_ACT_HOME,
    TUI_ACT_END, TUI_ACT_LEFT, TUI_ACT_RIGHT, TUI_ACT_OPEN, TUI_ACT_BACK, TUI_ACT_TAB_NEXT,
    TUI_ACT_TAB_PREV, TUI_ACT_MARK, TUI_ACT_COMPARE, TUI_ACT_NEW, TUI_ACT_FILTER,
    TUI_ACT_SORT, TUI_ACT_SORT_ORDER, TUI_ACT_DELETE, TUI_ACT_REFRESH, TUI_ACT_HELP,
    TUI_ACT_QUIT, TUI_ACT_LOG_Y, TUI_ACT_X_AXIS, TUI_ACT_SMOOTH, TUI_ACT_ALL_KEYS,
    TUI_ACT_METRIC, TUI_ACT_EDIT, TUI_ACT_START, TUI_ACT_STOP, TUI_ACT_X_SCALE, TUI_ACT_CLEAR_MARKS,
    TUI_ACT_TAB_N, TUI_ACT_REVERT, TUI_ACT_RESUME, TUI_ACT_QUANTIZE, TUI_ACT_GROUP,
    TUI_ACT_SORT_PICK,
} tui_action;

#define TUI_KEY_CODES 8
typedef struct {
    int keys[TUI_KEY_CODES]; /* key codes (curses KEY_* or characters); 0 ends the list */
    const char *label;    /* how the help and the docs spell the keys: "j / ↓" */
    const char *label_ascii; /* the same for terminals without UTF-8 (NULL = label) */
    tui_action action;
    unsigned screens;     /* TUI_SCR_* where the key works */
    const char *help;     /* one line for the help screen and the docs */
    const char *hint;     /* short word for the status bar, NULL = not shown there */
} tui_key;

extern const tui_key tui_keys[];
extern const size_t tui_n_keys;

/* The action of key on screen (TUI_ACT_NONE if the key does nothing there). */
tui_action tui_key_action(int key, unsigned screen);
/* The entry for an action on a screen, or NULL. */
const tui_key *tui_key_for(tui_action a, unsigned screen);
/* "Runs, Run" for a screen mask. */
void tui_screens_names(unsigned screens, char *buf, size_t n);
/* The status bar line of a screen: "Enter open  / filter  ...", cut to width cells.
 * Returns the cells used. */
int tui_status_hints(unsigned screen, int utf8, int width, char *buf, size_t n);
/* The same, offering only the keys offers(ud, action) says do something now (a tab
 * without a chart offers no chart keys); offers NULL offers every key of the screen. */
int tui_status_hints_if(unsigned screen, int utf8, int width, int (*offers)(void *ud, tui_action act), void *ud,
                        char *buf, size_t n);
/* The key table as a Markdown table (the docs/workbench.md's key list). */
void tui_keys_markdown(FILE *f);

/* The keys of stored run id not at their default (pointers into *params, which the caller
 * frees with the result), or NULL when they cannot be told (the stored file no longer
 * loads: a one-run compare then shows every key). What a one-run compare shows first and
 * marks: `compare ID` and the workbench's Compare of one run. (cmd_store.c) */
const char **cli_one_run_set_keys(store *s, long long id, store_kv **params, size_t *n_set);

#endif
