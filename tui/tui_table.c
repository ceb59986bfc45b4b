/* tui_table.c — text fitting and column layout for the workbench's tables, and the runs
 * table's cells, sorting and filtering (pure functions, tested off-screen).
 */
#include "tui.h"
#include "../profiler/profiler.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- text -------------------------------------------------------------------------- */

static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80) return 1;
    size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 1;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return i; /* truncated sequence: stop at it */
    return n;
}

/* Terminal cells of the character of l bytes at s (a wide one takes two). */
static int char_cells(const char *s, size_t l)
{
    uint32_t c;
    return prof_utf8_decode(s, l, &c) == l ? prof_text_cell_width(c) : 1;
}

int tui_text_width(const char *s)
{
    int w = 0;
    for (size_t l; *s; s += l) { l = utf8_len((const unsigned char *)s); w += char_cells(s, l); }
    return w;
}

int tui_fit(const char *s, int width, int right, int utf8, char *out, size_t outsz)
{
    if (!outsz) return 0;
    out[0] = 0;
    if (width <= 0) return 0;
    /* Names, config values and messages come from files and the database: whatever they
     * hold, the screen shows control and bidi characters as \x1b, \u202e, and a cut never
     * splits such an escape or a UTF-8 character. */
    char vis[2048];
    int tw = (int)prof_text_fit(vis, sizeof vis, s, (size_t)-1, 0), cut = tw > width;
    int kept = cut ? (int)prof_text_fit(vis, sizeof vis, s, (size_t)(width - 1), 0) : tw;
    int pad = width - kept - cut;
    size_t o = 0;
#define ROOM(k) (o + (k) < outsz)
    if (right)
        for (int i = 0; i < pad && ROOM(1); i++) out[o++] = ' ';
    for (const char *p = vis; *p;) {
        size_t l = utf8_len((const unsigned char *)p);
        if (!utf8 && (unsigned char)*p >= 0x80) { if (ROOM(1)) out[o++] = '?'; p += l; continue; }
        if (!ROOM(l)) break;
        memcpy(out + o, p, l);
        o += l; p += l;
    }
    if (cut) {
        if (utf8 && ROOM(3)) { memcpy(out + o, "\xe2\x80\xa6", 3); o += 3; }
        else if (!utf8 && ROOM(1)) out[o++] = '~';
    }
    if (!right)
        for (int i = 0; i < pad && ROOM(1); i++) out[o++] = ' ';
#undef ROOM
    out[o] = 0;
    return width;
}

int tui_fit_middle(const char *s, int width, int right, int utf8, char *out, size_t outsz)
{
    int tw = tui_text_width(s);
    if (tw <= width || width < 5) return tui_fit(s, width, right, utf8, out, outsz);
    int tail = (width - 1) / 2, head = width - 1 - tail;
    char b[1024];
    size_t o = 0;
    const char *p = s;
    /* whole characters (a wide one is two cells) while they fit in head, then in tail */
    for (int used = 0; *p;) {
        size_t l = utf8_len((const unsigned char *)p);
        int w = char_cells(p, l);
        if (used + w > head || o + l + 4 >= sizeof b) break;
        memcpy(b + o, p, l);
        o += l; p += l; used += w;
    }
    if (utf8) { memcpy(b + o, "\xe2\x80\xa6", 3); o += 3; }
    else b[o++] = '~';
    p = s;
    for (int rest = tw; *p && rest > tail;) {
        size_t l = utf8_len((const unsigned char *)p);
        rest -= char_cells(p, l);
        p += l;
    }
    snprintf(b + o, sizeof b - o, "%s", p);
    return tui_fit(b, width, right, utf8, out, outsz);
}

int tui_table_layout(const tui_col *c, int n, int width, int gap, int *w)
{
    if (n <= 0) return 0;
    int vis = n;
    for (;;) {
        int need = gap * (vis - 1);
        for (int i = 0; i < vis; i++) { w[i] = c[i].want > 0 ? c[i].want : 1; need += w[i]; }
        for (int i = vis; i < n; i++) w[i] = 0;
        if (need <= width) {
            int extra = width - need;
            for (int i = 0; i < vis && extra > 0; i++)
                if (c[i].flex) { w[i] += extra; extra = 0; }
            return vis;
        }
        /* Shrink one cell at a time from the column with the most room above its
         * minimum, flex columns first, so the widths stay balanced. */
        int over = need - width;
        for (int pass = 0; pass < 2 && over > 0; pass++) {
            while (over > 0) {
                int best = -1, slack = 0;
                for (int i = 0; i < vis; i++) {
                    if (pass == 0 && !c[i].flex) continue;
                    int m = c[i].min > 0 ? c[i].min : 1, s = w[i] - m;
                    if (s > slack) { slack = s; best = i; }
                }
                if (best < 0) break;
                w[best]--; over--;
            }
        }
        if (over <= 0) return vis;
        if (vis == 1) { w[0] = width > 0 ? width : 0; return 1; }
        vis--;
    }
}

/* ---- runs -------------------------------------------------------------------------- */

const char *const tui_run_col_names[TUI_RC_COUNT] = {
    "id", "name", "status", "optimizer", "dataset", "loss", "acc", "duration", "started",
};

double tui_unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A run that ended: its training wall time (wall_s), the figure compare and show give; a
 * resumed run's ended - started would count the time it sat interrupted. */
double tui_run_duration(const store_run *r, double now)
{
    if (r->status != STORE_RUN_RUNNING && isfinite(r->wall_s) && r->wall_s >= 0) return r->wall_s;
    if (isfinite(r->started) && isfinite(r->ended) && r->ended >= r->started) return r->ended - r->started;
    if (r->status == STORE_RUN_RUNNING && isfinite(r->started) && now >= r->started) return now - r->started;
    return NAN;
}

void tui_run_cell(const store_run *r, tui_run_col c, double now, char *b, size_t n)
{
    switch (c) {
    case TUI_RC_ID: snprintf(b, n, "%lld", r->id); break;
    case TUI_RC_NAME:
        if (r->variant[0]) snprintf(b, n, "%s/%s", r->name, r->variant);
        else snprintf(b, n, "%s", r->name);
        break;
    case TUI_RC_STATUS:
        /* a run in progress says how far it is, whoever runs it (the store keeps steps) */
        if (r->status == STORE_RUN_RUNNING && r->total_steps > 0)
            snprintf(b, n, "running %.0f%%", 100.0 * (double)r->steps / (double)r->total_steps);
        else snprintf(b, n, "%s", store_status_name(r->status));
        break;
    case TUI_RC_OPT: snprintf(b, n, "%s", r->optimizer[0] ? r->optimizer : "-"); break;
    case TUI_RC_DATA: snprintf(b, n, "%s", r->dataset[0] ? r->dataset : "-"); break;
    case TUI_RC_LOSS:
        if (isfinite(r->final_train_loss)) snprintf(b, n, "%.4g", r->final_train_loss);
        else snprintf(b, n, "-");
        break;
    case TUI_RC_ACC:
        if (isfinite(r->best_test_acc)) snprintf(b, n, "%.3f", r->best_test_acc);
        else snprintf(b, n, "-");
        break;
    case TUI_RC_DURATION: prof_fmt_duration(b, n, tui_run_duration(r, now)); break;
    case TUI_RC_STARTED: {
        if (!isfinite(r->started)) { snprintf(b, n, "-"); break; }
        time_t t = (time_t)r->started;
        struct tm tm;
        localtime_r(&t, &tm);
        strftime(b, n, "%m-%d %H:%M", &tm); /* the year rarely matters; the width does */
        break;
    }
    default: snprintf(b, n, "?");
    }
}

/* The sort order, handed to qsort_r. */
typedef struct {
    tui_run_col col;
    int desc;
    double now;
} run_sort;

static int cmp_num(double a, double b, int desc)
{
    int na = !isfinite(a), nb = !isfinite(b);
    if (na || nb) return na - nb; /* unknown last in either order */
    if (a < b) return desc ? 1 : -1;
    if (a > b) return desc ? -1 : 1;
    return 0;
}

static int cmp_str(const char *a, const char *b, int desc)
{
    int c = strcasecmp(a, b);
    return desc ? -c : c;
}

static int cmp_runs(const void *pa, const void *pb, void *ctx)
{
    const store_run *a = pa, *b = pb;
    const run_sort *o = ctx;
    int c = 0;
    char x[256], y[256];
    switch (o->col) {
    case TUI_RC_ID: break;
    case TUI_RC_NAME:
        tui_run_cell(a, TUI_RC_NAME, 0, x, sizeof x);
        tui_run_cell(b, TUI_RC_NAME, 0, y, sizeof y);
        c = cmp_str(x, y, o->desc);
        break;
    case TUI_RC_STATUS: c = cmp_str(store_status_name(a->status), store_status_name(b->status), o->desc); break;
    case TUI_RC_OPT: c = cmp_str(a->optimizer, b->optimizer, o->desc); break;
    case TUI_RC_DATA: c = cmp_str(a->dataset, b->dataset, o->desc); break;
    case TUI_RC_LOSS: c = cmp_num(a->final_train_loss, b->final_train_loss, o->desc); break;
    case TUI_RC_ACC: c = cmp_num(a->best_test_acc, b->best_test_acc, o->desc); break;
    case TUI_RC_DURATION: c = cmp_num(tui_run_duration(a, o->now), tui_run_duration(b, o->now), o->desc); break;
    case TUI_RC_STARTED: c = cmp_num(a->started, b->started, o->desc); break;
    default: break;
    }
    if (c) return c;
    if (a->id != b->id) return (a->id < b->id ? -1 : 1) * (o->col == TUI_RC_ID && o->desc ? -1 : 1);
    return 0;
}

void tui_runs_sort(store_run *runs, size_t n, tui_run_col col, int desc)
{
    run_sort o = { col, desc, tui_unix_now() };
    /* Ties fall back to the id, which is unique, so the order is total and stable. */
    qsort_r(runs, n, sizeof *runs, cmp_runs, &o);
}

static int has_ci(const char *hay, const char *needle)
{
    return strcasestr(hay, needle) != NULL;
}

static int term_matches(const store_run *r, const char *t)
{
    char name[256];
    tui_run_cell(r, TUI_RC_NAME, 0, name, sizeof name);
    const char *colon = strchr(t, ':');
    if (colon && colon > t) {
        size_t fl = (size_t)(colon - t);
        const char *v = colon + 1;
        char id[32];
        snprintf(id, sizeof id, "%lld", r->id);
#define FIELD(nm) (fl == strlen(nm) && !strncasecmp(t, nm, fl))
        if (FIELD("id")) return !strcmp(id, v);
        if (FIELD("name")) return has_ci(r->name, v);
        if (FIELD("variant")) return has_ci(r->variant, v);
        if (FIELD("status")) return has_ci(store_status_name(r->status), v);
        if (FIELD("opt") || FIELD("optimizer")) return has_ci(r->optimizer, v);
        if (FIELD("data") || FIELD("dataset")) return has_ci(r->dataset, v);
        if (FIELD("model")) return has_ci(r->model, v);
        if (FIELD("file")) return has_ci(r->exp_path, v);
#undef FIELD
        /* Not a known field: treat the whole term as text. */
    }
    return has_ci(name, t) || has_ci(store_status_name(r->status), t) || has_ci(r->optimizer, t) ||
           has_ci(r->dataset, t) || has_ci(r->model, t) || has_ci(r->exp_path, t);
}

int tui_run_matches(const store_run *r, const char *filter)
{
    if (!filter) return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", filter);
    char *save = NULL;
    for (char *t = strtok_r(buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        int neg = 0;
        if (*t == '!') { neg = 1; t++; }
        if (!*t) continue;
        if (term_matches(r, t) == neg) return 0;
    }
    return 1;
}

size_t tui_runs_filter(store_run *runs, size_t n, const char *filter)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (tui_run_matches(&runs[i], filter)) {
            if (m != i) runs[m] = runs[i];
            m++;
        }
    return m;
}

/* ---- the comparison as text --------------------------------------------------------- */

int tui_lines_add(char ***l, size_t *n, const char *fmt, ...)
{
    char b[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    char **nl = realloc(*l, (*n + 1) * sizeof *nl);
    if (!nl) return -1;
    *l = nl;
    /* Tabs would break column arithmetic: expand them. */
    char t[8192];
    size_t o = 0;
    for (const char *p = b; *p && o + 8 < sizeof t; p++) {
        if (*p == '\t') do t[o++] = ' '; while (o % 4);
        else if (*p != '\r') t[o++] = *p;
    }
    t[o] = 0;
    if (!(nl[*n] = strdup(t))) return -1;
    (*n)++;
    return 0;
}

int tui_wrap_cut(const char *s, int width)
{
    int cells = 0, space = 0;
    size_t i = 0;
    while (s[i]) {
        if (s[i] == ' ') space = (int)i;   /* the text before it fits */
        size_t l = utf8_len((const unsigned char *)s + i);
        int w = char_cells(s + i, l);
        if (cells + w > width) return space > 0 ? space : i > 0 ? (int)i : (int)l;
        cells += w;
        i += l;
    }
    return (int)i;
}

int tui_lines_wrap(char ***l, size_t *n, const char *text, int width, int indent)
{
    if (width - indent < 8) indent = 0;   /* a narrow screen: no room to indent */
    for (const char *p = text; *p;) {
        int first = p == text, len = tui_wrap_cut(p, first ? width : width - indent);
        if (tui_lines_add(l, n, "%*s%.*s", first ? 0 : indent, "", len, p)) return -1;
        for (p += len; *p == ' '; p++) {}
    }
    return 0;
}

void tui_compare_widths(const store_compare *c, int width, int all_keys, int *lw, int *cw)
{
    int n = c->n ? (int)c->n : 1;
    if (all_keys) width -= 3;
    int l = 8;
    for (size_t r = 0; r < c->n_rows; r++) {
        int w = tui_text_width(c->rows[r].label);
        if (w > l) l = w;
    }
    if (l > 24) l = 24;
    /* Runs first: the label column gives way down to 18 cells before run columns shrink
     * below 12 (6 runs in the workbench's 78 columns: 18 + 6 x 10). */
    int col = (width - l) / n;
    while (col < 12 && l > 18) { l--; col = (width - l) / n; }
    if (col > 30) col = 30;
    if (col < 4) col = 4;
    *lw = l;
    *cw = col;
}

void tui_compare_row_text(const store_compare *c, const char *label, char (*cells)[64], int lw, int cw, int utf8,
                          const char *tail, char *out, size_t cap)
{
    /* Names are cut in the middle: "qnew…brid" and "qnew…ntum" stay apart. */
    int middle = !strcmp(label, "name");
    char fit[512];
    size_t o = 0;
    out[0] = 0;
    tui_fit(label, lw, 0, utf8, fit, sizeof fit);
    int w = snprintf(out, cap, "%s", fit);
    if (w > 0) o = (size_t)w < cap ? (size_t)w : cap - 1;
    for (size_t i = 0; i < c->n && o + 1 < cap; i++) {
        if (middle) tui_fit_middle(cells[i], cw - 1, 1, utf8, fit, sizeof fit);
        else tui_fit(cells[i], cw - 1, 1, utf8, fit, sizeof fit);
        w = snprintf(out + o, cap - o, " %s", fit);
        if (w < 0) break;
        o += (size_t)w < cap - o ? (size_t)w : cap - o - 1;
    }
    if (tail && o + 1 < cap) snprintf(out + o, cap - o, "%s", tail);
}

/* What the config rows are, in the section's heading. */
static const char *config_words(const store_compare *c, int all_keys)
{
    return all_keys && c->config_set_first ? "all keys; * not at their default, first"
         : all_keys ? "all keys" : c->config_set_only ? "keys not at their default" : "keys that differ";
}

int tui_compare_lines(const store_compare *c, int width, int utf8, int all_keys, char ***lines, size_t *n)
{
    *lines = NULL;
    *n = 0;
    int lw, cw;
    tui_compare_widths(c, width, all_keys, &lw, &cw);
    char row[4096], head[160];
    int sec = -1, any_config = 0;
    for (size_t r = 0; r < c->n_rows; r++) {
        const store_cmp_row *x = &c->rows[r];
        if ((int)x->section != sec) {
            /* A config section with no rows still says so. */
            if (sec < STORE_CMP_CONFIG && (int)x->section > STORE_CMP_CONFIG && tui_lines_add(lines, n, "%s", "") == 0) {
                snprintf(head, sizeof head, "%s (%s)", store_cmp_section_names[STORE_CMP_CONFIG],
                         config_words(c, all_keys));
                if (tui_lines_add(lines, n, "%s", head) || tui_lines_add(lines, n, "%s", "  (all runs share the same config)")) return -1;
            }
            sec = (int)x->section;
            if (sec != STORE_CMP_RUN) {
                if (tui_lines_add(lines, n, "%s", "")) return -1;
                if (sec == STORE_CMP_CONFIG)
                    snprintf(head, sizeof head, "%s (%s)", store_cmp_section_names[sec], config_words(c, all_keys));
                else snprintf(head, sizeof head, "%s", store_cmp_section_names[sec]);
                if (tui_lines_add(lines, n, "%s", head)) return -1;
            }
        }
        any_config |= x->section == STORE_CMP_CONFIG;
        tui_compare_row_text(c, x->label, x->cells, lw, cw, utf8, x->differs && all_keys ? "  *" : NULL, row, sizeof row);
        if (tui_lines_add(lines, n, "%s", row)) return -1;
    }
    if (!any_config && sec < STORE_CMP_CONFIG) {
        snprintf(head, sizeof head, "%s (%s)", store_cmp_section_names[STORE_CMP_CONFIG], config_words(c, all_keys));
        if (tui_lines_add(lines, n, "%s", "") || tui_lines_add(lines, n, "%s", head) || tui_lines_add(lines, n, "%s", "  (all runs share the same config)")) return -1;
    }
    for (int k = 0, first = 1; k < STORE_CMP_N_NOTES; k++) {
        if (!c->notes[k][0]) continue;
        if (first && tui_lines_add(lines, n, "%s", "")) return -1;
        if (tui_lines_wrap(lines, n, c->notes[k], width, 2)) return -1;
        first = 0;
    }
    return 0;
}

void tui_lines_free(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++) free(l[i]);
    free(l);
}

void tui_lines_clear(char ***l, size_t *n)
{
    tui_lines_free(*l, *n);
    *l = NULL;
    *n = 0;
}

void tui_compare_legend(const store_compare *c, size_t i, char *buf, size_t n)
{
    snprintf(buf, n, "#%lld %s", c->runs[i].id, c->short_label[i]);
}
