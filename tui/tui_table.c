/* tui_table.c — text fitting and column layout for the workbench's tables, and the runs
 * table's cells, sorting and filtering (pure functions, tested off-screen).
 */
#include "tui.h"
#include "../profiler/profiler.h"

#include <ctype.h>
#include <math.h>
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

int tui_text_width(const char *s)
{
    int w = 0;
    while (*s) { s += utf8_len((const unsigned char *)s); w++; }
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

void tui_fmt_ns(double ns, char *b, size_t n)
{
    if (!isfinite(ns) || ns < 0) snprintf(b, n, "-");
    else if (ns < 1e3) snprintf(b, n, "%.0f ns", ns);
    else if (ns < 1e6) snprintf(b, n, "%.1f us", ns / 1e3);
    else if (ns < 1e9) snprintf(b, n, "%.2f ms", ns / 1e6);
    else snprintf(b, n, "%.2f s", ns / 1e9);
}

double tui_unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double tui_run_duration(const store_run *r, double now)
{
    if (isfinite(r->started) && isfinite(r->ended) && r->ended >= r->started) return r->ended - r->started;
    if (r->status == STORE_RUN_RUNNING && isfinite(r->started) && now >= r->started) return now - r->started;
    if (isfinite(r->wall_s) && r->wall_s >= 0) return r->wall_s;
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
    case TUI_RC_STATUS: snprintf(b, n, "%s", store_status_name(r->status)); break;
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
    case TUI_RC_DURATION: store_fmt_duration(b, n, tui_run_duration(r, now)); break;
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

/* qsort is not stable and has no context argument: sort an index with the column in a
 * static (the workbench sorts on one thread). */
static tui_run_col sort_col;
static int sort_desc;

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

static int cmp_runs(const void *pa, const void *pb)
{
    const store_run *a = pa, *b = pb;
    int c = 0;
    char x[256], y[256];
    switch (sort_col) {
    case TUI_RC_ID: break;
    case TUI_RC_NAME:
        tui_run_cell(a, TUI_RC_NAME, 0, x, sizeof x);
        tui_run_cell(b, TUI_RC_NAME, 0, y, sizeof y);
        c = cmp_str(x, y, sort_desc);
        break;
    case TUI_RC_STATUS: c = cmp_str(store_status_name(a->status), store_status_name(b->status), sort_desc); break;
    case TUI_RC_OPT: c = cmp_str(a->optimizer, b->optimizer, sort_desc); break;
    case TUI_RC_DATA: c = cmp_str(a->dataset, b->dataset, sort_desc); break;
    case TUI_RC_LOSS: c = cmp_num(a->final_train_loss, b->final_train_loss, sort_desc); break;
    case TUI_RC_ACC: c = cmp_num(a->best_test_acc, b->best_test_acc, sort_desc); break;
    case TUI_RC_DURATION: {
        double now = tui_unix_now();
        c = cmp_num(tui_run_duration(a, now), tui_run_duration(b, now), sort_desc);
        break;
    }
    case TUI_RC_STARTED: c = cmp_num(a->started, b->started, sort_desc); break;
    default: break;
    }
    if (c) return c;
    if (a->id != b->id) return (a->id < b->id ? -1 : 1) * (sort_col == TUI_RC_ID && sort_desc ? -1 : 1);
    return 0;
}

void tui_runs_sort(store_run *runs, size_t n, tui_run_col col, int desc)
{
    sort_col = col;
    sort_desc = desc;
    /* Ties fall back to the id, which is unique, so the order is total and stable. */
    qsort(runs, n, sizeof *runs, cmp_runs);
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
