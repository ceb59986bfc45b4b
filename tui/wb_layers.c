/* wb_layers.c — the Layers tab of the Run screen: a layer x step heat map of one layer
 * telemetry statistic (grad_norm, grad_mean, grad_std, grad_max, update_ratio, zero_frac;
 * v cycles), its colour scale and legend, and a table of every statistic's latest value per
 * tensor. Reads the run's telemetry series from the store (train.telemetry = true). */
#include "wb.h"

#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_STATS WB_LAYER_STATS
static const char *const stat_names[N_STATS] = { "grad_norm", "grad_mean", "grad_std", "grad_max", "update_ratio", "zero_frac" };
/* Positive statistics spanning decades are mapped on log10; the mean and the zero share linearly. */
static const int stat_log[N_STATS] = { 1, 0, 1, 1, 1, 0 };
#define MAX_ROWS WB_LAYER_ROWS

/* Monochrome ramp, low to high; with colours each level also gets a background colour. */
static const char ramp[] = " .:-=+*#%@";
#define N_LEVELS WB_HEAT_LEVELS

void wb_layers_clear(wb_layers_view *lv)
{
    for (int k = 0; k < N_STATS; k++) {
        for (int i = 0; i < lv->n[k]; i++) store_series_free(&lv->s[k][i]);
        lv->n[k] = 0;
    }
}

void wb_layers_load(wb_app *a, wb_layers_view *lv, long long run)
{
    wb_layers_clear(lv);
    char **keys = NULL;
    size_t nk = 0;
    if (store_metric_keys(a->db, run, &keys, &nk)) return;
    for (size_t i = 0; i < nk; i++) {
        const char *slash = strchr(keys[i], '/');
        if (!slash) continue;
        for (int k = 0; k < N_STATS; k++) {
            size_t l = strlen(stat_names[k]);
            if ((size_t)(slash - keys[i]) != l || strncmp(keys[i], stat_names[k], l) || lv->n[k] == MAX_ROWS) continue;
            int j = lv->n[k];
            if (store_metric_get(a->db, run, keys[i], &lv->s[k][j])) { memset(&lv->s[k][j], 0, sizeof lv->s[k][j]); continue; }
            snprintf(lv->name[k][j], sizeof lv->name[k][j], "%s", slash + 1);
            /* insertion in natural order: dense2 before dense10 */
            while (j > 0 && store_natural_cmp(lv->name[k][j - 1], lv->name[k][j]) > 0) {
                char t[40];
                memcpy(t, lv->name[k][j], sizeof t);
                memcpy(lv->name[k][j], lv->name[k][j - 1], sizeof t);
                memcpy(lv->name[k][j - 1], t, sizeof t);
                store_series ts = lv->s[k][j];
                lv->s[k][j] = lv->s[k][j - 1];
                lv->s[k][j - 1] = ts;
                j--;
            }
            lv->n[k]++;
        }
    }
    store_strings_free(keys, nk);
}

int wb_layers_key(wb_app *a, wb_layers_view *lv, tui_action act)
{
    if (act != TUI_ACT_METRIC) return 0;
    for (int i = 1; i <= N_STATS; i++) {
        int k = (lv->stat + i) % N_STATS;
        if (lv->n[k]) { lv->stat = k; break; }
    }
    wb_message(a, "Layers: heat map of %s", stat_names[lv->stat]);
    return 1;
}

static double scaled(int stat, double v)
{
    if (!isfinite(v)) return NAN;
    if (!stat_log[stat]) return v;
    return v > 0 ? log10(v) : NAN;
}

static void cell(wb_app *a, int y, int x, int level)
{
    char c[2] = { level < 0 ? ' ' : ramp[level], 0 };
    int at = a->color && level >= 0 ? COLOR_PAIR(WB_PAIR_HEAT + level) : 0;
    if (at) attron(at);
    mvaddstr(y, x, c);
    if (at) attroff(at);
}

static void fmt_val(double v, char *b, size_t n)
{
    if (!isfinite(v)) snprintf(b, n, "-");
    else snprintf(b, n, "%.3g", v);
}

int wb_layers_rows(const wb_layers_view *lv) { return lv->n[0]; }

void wb_layers_draw(wb_app *a, wb_layers_view *lv, int y0, int y1, int *scroll)
{
    int k = lv->stat;
    if (!lv->n[k])
        for (int i = 0; i < N_STATS && !lv->n[k]; i++) k = lv->stat = i;
    if (!lv->n[k]) {
        wb_text(a, y0 + 1, 2, a->cols - 4, 0, "No layer telemetry in this run: set train.telemetry = true (e.g. samples/gradient-lab.ini).");
        return;
    }
    int nr = lv->n[k];
    /* columns: the steps of the longest series, bucketed to the width */
    const store_series *cols = &lv->s[k][0];
    for (int r = 1; r < nr; r++) if (lv->s[k][r].n > cols->n) cols = &lv->s[k][r];
    double lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < nr; r++)
        for (size_t p = 0; p < lv->s[k][r].n; p++) {
            double v = scaled(k, lv->s[k][r].value[p]);
            if (isfinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; }
        }
    /* zero_frac is a fraction: on its own scale 0..1, an all-zero map reads as the lowest
     * level, not as the middle one a flat range would give. */
    if (k == 5) { lo = 0; hi = 1; }
    char b[256];
    snprintf(b, sizeof b, "Layers: %s%s per %s against step (v: next statistic)", stat_log[k] ? "log10 " : "", stat_names[k],
             k == 5 ? "activation layer" : "tensor");
    attron(A_BOLD);
    wb_text(a, y0, 1, a->cols - 2, 0, b);
    attroff(A_BOLD);
    int lw = 12, x0 = 1 + lw + 1, w = a->cols - x0 - 2;
    if (w < 4 || !cols->n) return;
    /* the heat map takes at most half the height when the table needs room */
    int avail = y1 - y0 - 3, hm = nr < avail / 2 + 1 ? nr : avail / 2 + 1;
    if (hm < 1) hm = 1;
    size_t nc = cols->n;
    int used = nc < (size_t)w ? (int)nc : w;
    for (int r = 0; r < hm && r < nr; r++) {
        int y = y0 + 1 + r;
        wb_text(a, y, 1, lw, 1, lv->name[k][r]);
        const store_series *sr = &lv->s[k][r];
        size_t p = 0;
        for (int c = 0; c < used; c++) {
            /* bucket c covers column steps [c0, c1): its last point */
            size_t c1 = (size_t)(c + 1) * nc / (size_t)used;
            long step = cols->step[c1 - 1];
            double v = NAN;
            while (p < sr->n && sr->step[p] <= step) v = scaled(k, sr->value[p++]);
            int level = -1;
            if (isfinite(v)) {
                /* values take levels 1.. (blank, level 0, is "no value") */
                double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
                level = 1 + (int)(t * (N_LEVELS - 2) + 0.5);
                if (level < 1) level = 1;
                if (level >= N_LEVELS) level = N_LEVELS - 1;
            }
            cell(a, y, x0 + c, level);
        }
    }
    int y = y0 + 1 + hm;
    if (nr > hm) { snprintf(b, sizeof b, "(%d more rows: see the table)", nr - hm); wb_text(a, y++, x0, w, 0, b); }
    snprintf(b, sizeof b, "step %ld", cols->step[0]);
    wb_text(a, y, x0, w / 2, 0, b);
    snprintf(b, sizeof b, "step %ld", cols->step[nc - 1]);
    wb_text(a, y, x0 + w / 2, w - w / 2, 1, b);
    y++;
    /* legend: the ramp from low to high with the range it spans */
    char lo_s[32], hi_s[32];
    fmt_val(lo, lo_s, sizeof lo_s);
    fmt_val(hi, hi_s, sizeof hi_s);
    snprintf(b, sizeof b, "scale: %s%s ", stat_log[k] ? "log10 " : "", lo_s);
    wb_text(a, y, 1, (int)strlen(b), 0, b);
    int lx = 1 + (int)strlen(b);
    for (int i = 1; i < N_LEVELS && lx + i - 1 < a->cols - 2; i++) cell(a, y, lx + i - 1, i);
    snprintf(b, sizeof b, " %s  (blank: no value)", hi_s);
    wb_text(a, y, lx + N_LEVELS - 1, a->cols - lx - N_LEVELS - 1, 0, b);
    y += 2;
    if (y > y1) return;
    /* the latest value of every statistic per tensor (zero_frac under its layer's W) */
    /* the table scrolls (arrows, PgUp/PgDn) when the screen is short */
    int page = y1 - y;
    if (page < 1) page = 1;
    if (*scroll > lv->n[0] - page) *scroll = lv->n[0] - page;
    if (*scroll < 0) *scroll = 0;
    attron(A_BOLD);
    snprintf(b, sizeof b, "%-12s %10s %10s %10s %10s %12s %9s", "tensor", "grad_norm", "grad_mean", "grad_std",
             "grad_max", "update_ratio", "zero_frac");
    wb_text(a, y++, 1, a->cols - 2, 0, b);
    attroff(A_BOLD);
    if (lv->n[0] > page) {
        char pos[48];
        snprintf(pos, sizeof pos, "%d-%d/%d", *scroll + 1, *scroll + page, lv->n[0]);
        wb_text(a, y - 1, a->cols - 2 - (int)strlen(pos), (int)strlen(pos), 1, pos);
    }
    for (int r = *scroll; r < lv->n[0] && y <= y1; r++, y++) {
        const char *t = lv->name[0][r];
        char v[N_STATS][24];
        for (int s = 0; s < N_STATS; s++) {
            double last = NAN;
            char want[40];
            snprintf(want, sizeof want, "%s", t);
            if (s == 5) {
                /* zero_frac is per layer: shown on the layer's W row */
                size_t l = strlen(want);
                if (l < 2 || strcmp(want + l - 2, ".W")) { snprintf(v[s], sizeof v[s], " "); continue; }
                want[l - 2] = 0;
            }
            for (int q = 0; q < lv->n[s]; q++)
                if (!strcmp(lv->name[s][q], want) && lv->s[s][q].n) last = lv->s[s][q].value[lv->s[s][q].n - 1];
            fmt_val(last, v[s], sizeof v[s]);
        }
        snprintf(b, sizeof b, "%-12s %10s %10s %10s %10s %12s %9s", t, v[0], v[1], v[2], v[3], v[4], v[5]);
        wb_text(a, y, 1, a->cols - 2, 0, b);
    }
}

/* ---- telemetry keys as Compare metrics --------------------------------------------- */

size_t wb_layers_metric_keys(store *db, const long long *runs, int n, char ***out)
{
    *out = NULL;
    size_t m = 0, cap = 0;
    char **v = NULL;
    for (int i = 0; i < n; i++) {
        char **keys = NULL;
        size_t nk = 0;
        if (store_metric_keys(db, runs[i], &keys, &nk)) continue;
        for (size_t k = 0; k < nk; k++) {
            if (!strchr(keys[k], '/')) continue;
            size_t j = 0;
            while (j < m && strcmp(v[j], keys[k])) j++;
            if (j < m) continue;
            if (m == cap) {
                size_t nc = cap ? 2 * cap : 64;
                char **nv = realloc(v, nc * sizeof *nv);
                if (!nv) break;
                v = nv;
                cap = nc;
            }
            if (!(v[m] = strdup(keys[k]))) break;
            m++;
        }
        store_strings_free(keys, nk);
    }
    /* statistic first, then natural order of the tensor */
    for (size_t x = 1; x < m; x++)
        for (size_t y = x; y > 0 && store_natural_cmp(v[y - 1], v[y]) > 0; y--) {
            char *t = v[y]; v[y] = v[y - 1]; v[y - 1] = t;
        }
    *out = v;
    return m;
}
