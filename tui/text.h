/* text.h — fitting UTF-8 text into terminal cells (tui_table.c): what the workbench and
 * the CLI's tables share. No store or curses types, so any tui/ file may include it. */
#ifndef NNBENCH_TUI_TEXT_H
#define NNBENCH_TUI_TEXT_H

#include <stddef.h>

/* Display width of UTF-8 text, one cell per code point (the workbench shows names,
 * numbers and box drawing; no double-width scripts are expected). */
int tui_text_width(const char *s);
/* Fits s into exactly width cells: padded with spaces (right-aligned if right), or cut
 * with an ellipsis ("…" with utf8, "~" without) when too long. Writes at most outsz bytes
 * (always NUL-terminated); returns the number of cells written. */
int tui_fit(const char *s, int width, int right, int utf8, char *out, size_t outsz);

/* tui_fit, but a text too long keeps its start and its end ("qnew…brid"). */
int tui_fit_middle(const char *s, int width, int right, int utf8, char *out, size_t outsz);

#endif
