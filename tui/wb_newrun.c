/* wb_newrun.c — the New run screen: pick an experiment file and a variant, edit a few
 * keys (they become --set style overrides), start; training runs on a worker thread
 * (wb_live.c) that writes the store and feeds the screen (progress, ETA, live curves, op table).
 */
#include "cli.h"
#include "runner.h"
#include "wb.h"

#include <curses.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The keys a user most often changes before a run, and those that bound it (max_steps);
 * the rest stay as the file says. Only values the user changed become overrides. */
static const char *const edit_keys[] = { "train.epochs", "train.max_steps", "train.lr", "train.batch", "data.n",
                                         "profile.enabled" };
#define N_EDIT ((int)(sizeof edit_keys / sizeof edit_keys[0]))

enum { F_FILE, F_VARIANT, F_KEYS, F_START = F_KEYS + N_EDIT, F_OPEN, F_COMPARE, F_N };

/* The form's state lives in its panel (wb_new_panel.st): made the first time New run
 * opens, kept while the workbench runs (the form remembers the file and the edits),
 * freed by wb_new_free. nv names it. */
typedef struct {
    char dir[PATH_MAX];
    char **files;          /* *.ini in dir, sorted */
    size_t n_files;
    int file_idx;          /* -1 when a typed path is used */
    char path[PATH_MAX];
    eng_experiment *preview; /* the file as loaded without overrides */
    char error[512];
    int variant_idx;       /* n_variants = "all variants" */
    char values[N_EDIT][128];
    int edited[N_EDIT];
    int field;
} new_state;
#define nv (*(new_state *)wb_new_panel.st)

/* ---- the form ---------------------------------------------------------------------- */

void wb_new_free(wb_app *a)
{
    (void)a;
    if (!wb_new_panel.st) return;
    for (size_t i = 0; i < nv.n_files; i++) free(nv.files[i]);
    free(nv.files);
    eng_experiment_free(nv.preview);
    free(wb_new_panel.st);
    wb_new_panel.st = NULL;
}

static int cmp_str(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

static int scan_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    size_t n = 0;
    char **files = NULL;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".ini")) continue;
        char **f = realloc(files, (n + 1) * sizeof *f);
        if (!f) break;
        files = f;
        if ((files[n] = strdup(e->d_name))) n++;
    }
    closedir(d);
    if (!n) { free(files); return 0; }
    qsort(files, n, sizeof *files, cmp_str);
    nv.files = files;
    nv.n_files = n;
    snprintf(nv.dir, sizeof nv.dir, "%s", dir);
    return 1;
}

/* samples/ here, then $NNBENCH_SAMPLES, then next to the binary, then the install. */
static void find_samples(void)
{
    if (nv.n_files) return;
    if (scan_dir("samples")) return;
    const char *env = getenv("NNBENCH_SAMPLES");
    if (env && scan_dir(env)) return;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            char d[PATH_MAX + 32];
            snprintf(d, sizeof d, "%s/../samples", exe);
            if (scan_dir(d)) return;
            snprintf(d, sizeof d, "%s/../share/nnbench/samples", exe);
            if (scan_dir(d)) return;
        }
    }
    scan_dir("/usr/local/share/nnbench/samples");
}

static void load_preview(void)
{
    eng_experiment_free(nv.preview);
    nv.preview = NULL;
    nv.error[0] = 0;
    if (nv.file_idx >= 0 && (size_t)nv.file_idx < nv.n_files)
        if (snprintf(nv.path, sizeof nv.path, "%s/%s", nv.dir, nv.files[nv.file_idx]) >= (int)sizeof nv.path) nv.path[0] = 0;
    if (!nv.path[0]) { snprintf(nv.error, sizeof nv.error, "no experiment file: type a path (Enter on File)"); return; }
    if (eng_experiment_load(nv.path, NULL, 0, &nv.preview)) {
        snprintf(nv.error, sizeof nv.error, "%s", eng_error());
        nv.preview = NULL;
        return;
    }
    if (nv.variant_idx > (int)nv.preview->n_variants) nv.variant_idx = 0;
    for (int i = 0; i < N_EDIT; i++) nv.edited[i] = 0;
}

/* The file's value of edit key i for the selected variant; with all variants selected,
 * the value they share, or NULL when they differ. */
static const char *file_value(int i)
{
    if (!nv.preview || !nv.preview->n_variants) return "";
    size_t from = 0, to = nv.preview->n_variants;
    if (nv.variant_idx < (int)nv.preview->n_variants) { from = (size_t)nv.variant_idx; to = from + 1; }
    const char *v = NULL;
    for (size_t k = from; k < to; k++) {
        const char *w = eng_config_value(&nv.preview->variants[k], edit_keys[i]);
        if (!w) w = "";
        if (v && strcmp(v, w)) return NULL;
        v = w;
    }
    return v ? v : "";
}

static const char *value_of(int i)
{
    if (nv.edited[i]) return nv.values[i];
    const char *v = file_value(i);
    return v ? v : "(differs by variant)";
}

/* The run [ Open run #N ] opens: the last run the worker made (a New run start, or the
 * run a Resume or Quantize worked on). The button, the cursor's range and Enter all read
 * it here, so that a drawn button can always be reached. */
static long long open_id(wb_app *a)
{
    pthread_mutex_lock(&a->live.mu);
    long long id = a->live.run_id;
    pthread_mutex_unlock(&a->live.mu);
    return id;
}

void wb_open_new(wb_app *a)
{
    if (!wb_new_panel.st && !(wb_new_panel.st = calloc(1, sizeof(new_state)))) { wb_message(a, "out of memory"); return; }
    find_samples();
    if (!nv.path[0] && nv.n_files) {
        nv.file_idx = 0;
        for (size_t i = 0; i < nv.n_files; i++)
            if (!strcmp(nv.files[i], "spirals-mlp.ini")) nv.file_idx = (int)i;
        load_preview();
        nv.field = F_START;
    } else if (!nv.path[0]) {
        nv.file_idx = -1;
        snprintf(nv.error, sizeof nv.error, "no samples/ directory found: press Enter on File and type a path");
        nv.field = F_FILE;
    }
    /* After a job (New run, Resume, Quantize) the cursor waits on its Open button, never on
     * Start: j + Enter must not train a run nobody asked for. */
    if (open_id(a) && nv.field == F_START) nv.field = F_OPEN;
    wb_push(a, &wb_new_panel);
}

static void start_run(wb_app *a)
{
    if (wb_live_running(a)) { wb_message(a, "a run is already in progress (K stops it)"); return; }
    if (!nv.preview) { wb_message(a, "%s", nv.error[0] ? nv.error : "no experiment file"); return; }
    char ov[N_EDIT][200];
    const char *ovp[N_EDIT];
    size_t n = 0;
    for (int i = 0; i < N_EDIT; i++)
        if (nv.edited[i]) {
            snprintf(ov[n], sizeof ov[n], "%s=%s", edit_keys[i], nv.values[i]);
            ovp[n] = ov[n];
            n++;
        }
    eng_experiment *ex = NULL;
    if (eng_experiment_load(nv.path, ovp, n, &ex)) {
        snprintf(nv.error, sizeof nv.error, "%s", eng_error());
        wb_live_clear(&a->live);
        return;
    }
    if (nv.variant_idx < (int)nv.preview->n_variants && nv.preview->variants[nv.variant_idx].variant[0] &&
        eng_experiment_select(ex, nv.preview->variants[nv.variant_idx].variant)) {
        snprintf(nv.error, sizeof nv.error, "%s", eng_error());
        eng_experiment_free(ex);
        wb_live_clear(&a->live);
        return;
    }
    nv.error[0] = 0;
    a->live.ex = ex; /* the worker's input; no worker runs now */
    if (wb_live_launch(a, wb_live_train, ex->variants[0].name, (int)ex->n_variants)) {
        eng_experiment_free(ex);
        a->live.ex = NULL;
        wb_message(a, "cannot start the training thread");
        return;
    }
    wb_message(a, "training started");
    a->msg_live = 1;
}

static void draw_field(wb_app *a, int y, int f, const char *label, const char *value, int changed)
{
    int sel = nv.field == f;
    char b[700];
    snprintf(b, sizeof b, "%-18s %s%s", label, value, changed ? "  (edited)" : "");
    if (sel) attron(A_REVERSE);
    wb_text(a, y, 2, a->cols / 2 + 20 < a->cols - 4 ? a->cols / 2 + 20 : a->cols - 4, 0, b);
    if (sel) attroff(A_REVERSE);
}

/* The form: file, variant, the keys, Start, Open, Compare, the error. Returns the next row. */
static int new_draw_form(wb_app *a)
{
    int y = 2;
    char v[PATH_MAX + 128];
    attron(A_BOLD);
    wb_text(a, 1, 1, a->cols - 2, 0, "Start a run: \xe2\x86\x90/\xe2\x86\x92 change a choice, Enter edit a value or start");
    if (!a->utf8) wb_text(a, 1, 1, a->cols - 2, 0, "Start a run: Left/Right change a choice, Enter edit a value or start");
    attroff(A_BOLD);
    if (nv.file_idx >= 0 && (size_t)nv.file_idx < nv.n_files)
        snprintf(v, sizeof v, "%s %s %s   (%d/%zu in %s)", a->utf8 ? "\xe2\x97\x82" : "<", nv.files[nv.file_idx], a->utf8 ? "\xe2\x96\xb8" : ">",
                 nv.file_idx + 1, nv.n_files, nv.dir);
    else snprintf(v, sizeof v, "%s", nv.path[0] ? nv.path : "(type a path)");
    draw_field(a, y++, F_FILE, "File", v, 0);
    if (nv.preview) {
        if (nv.variant_idx < (int)nv.preview->n_variants)
            snprintf(v, sizeof v, "%s %s %s", a->utf8 ? "\xe2\x97\x82" : "<",
                     nv.preview->variants[nv.variant_idx].variant[0] ? nv.preview->variants[nv.variant_idx].variant : "(only one)",
                     a->utf8 ? "\xe2\x96\xb8" : ">");
        else snprintf(v, sizeof v, "%s all %zu variants %s", a->utf8 ? "\xe2\x97\x82" : "<", nv.preview->n_variants, a->utf8 ? "\xe2\x96\xb8" : ">");
    } else snprintf(v, sizeof v, "-");
    draw_field(a, y++, F_VARIANT, "Variant", v, 0);
    for (int i = 0; i < N_EDIT; i++) draw_field(a, y++, F_KEYS + i, edit_keys[i], value_of(i), nv.edited[i]);
    draw_field(a, y++, F_START, "", "[ Start ]", 0);
    wb_live *l = &a->live;
    long long last = open_id(a);
    pthread_mutex_lock(&l->mu);
    int n_batch = l->n_batch, done = !l->running;
    pthread_mutex_unlock(&l->mu);
    if (last) {
        snprintf(v, sizeof v, "[ Open run #%lld ]", last);
        draw_field(a, y, F_OPEN, "", v, 0);
    }
    y++;
    if (n_batch > 1 && done) {
        snprintf(v, sizeof v, "[ Compare this batch: %d runs ]  (c)", n_batch);
        draw_field(a, y++, F_COMPARE, "", v, 0);
    }
    if (nv.error[0]) {
        attron(wb_status_attr(a, STORE_RUN_FAILED));
        wb_text(a, y, 2, a->cols - 4, 0, nv.error);
        attroff(wb_status_attr(a, STORE_RUN_FAILED));
    }
    y++;
    return y;
}

/* What the live part shows, copied under the worker's lock. */
typedef struct {
    int running, have;
    long step, total;
    double loss, sps, t0;
    int vi, nvar, epoch;
    char label[192], result[512];
    wb_series cp[WB_LIVE_N];
    prof_row *ops;
    size_t n_ops;
} live_view;

static void live_view_take(wb_app *a, live_view *lv)
{
    wb_live *l = &a->live;
    memset(lv, 0, sizeof *lv);
    lv->running = wb_live_running(a);
    pthread_mutex_lock(&l->mu);
    int have = lv->have = lv->running || l->finished;
    lv->step = l->step; lv->total = l->total;
    lv->loss = l->loss; lv->sps = l->sps; lv->t0 = l->t_start;
    lv->vi = l->variant_idx; lv->nvar = l->n_variants; lv->epoch = l->epoch;
    snprintf(lv->label, sizeof lv->label, "%s", l->label);
    snprintf(lv->result, sizeof lv->result, "%s", l->result);
    wb_series *cp = lv->cp;
    for (int i = 0; i < WB_LIVE_N && have; i++) {
        size_t n = l->live[i].n;
        cp[i].n = n;
        if (!n) continue;
        cp[i].step = malloc(n * sizeof(double)); cp[i].wall = malloc(n * sizeof(double));
        cp[i].hybrid = malloc(n * sizeof(double)); cp[i].value = malloc(n * sizeof(double));
        if (!cp[i].step || !cp[i].wall || !cp[i].hybrid || !cp[i].value) { cp[i].n = 0; continue; }
        memcpy(cp[i].step, l->live[i].step, n * sizeof(double));
        memcpy(cp[i].wall, l->live[i].wall, n * sizeof(double));
        memcpy(cp[i].hybrid, l->live[i].hybrid, n * sizeof(double));
        memcpy(cp[i].value, l->live[i].value, n * sizeof(double));
    }
    lv->n_ops = have ? l->n_ops : 0;
    lv->ops = lv->n_ops ? malloc(lv->n_ops * sizeof *lv->ops) : NULL;
    if (lv->ops) memcpy(lv->ops, l->ops, lv->n_ops * sizeof *lv->ops);
    else lv->n_ops = 0;
    pthread_mutex_unlock(&l->mu);
}

static void live_view_free(live_view *lv)
{
    wb_series *cp = lv->cp;
    for (int i = 0; i < WB_LIVE_N; i++) { free(cp[i].step); free(cp[i].wall); free(cp[i].hybrid); free(cp[i].value); }
    free(lv->ops);
}

/* The live part from row y: progress, ETA, curves, ops. */
static void new_draw_live(wb_app *a, const live_view *lv, int y)
{
    int running = lv->running;
    long step = lv->step, total = lv->total;
    double loss = lv->loss, sps = lv->sps, t0 = lv->t0;
    int vi = lv->vi, nvar = lv->nvar, epoch = lv->epoch;
    const char *label = lv->label, *result = lv->result;
    const wb_series *cp = lv->cp;
    const prof_row *ops = lv->ops;
    size_t n_ops = lv->n_ops;
    char line[512], eta[32] = "-";
    double frac = total > 0 ? (double)step / (double)total : 0;
    double el = wb_now() - t0;
    if (running && step > 0 && total > step) prof_fmt_duration(eta, sizeof eta, el * (double)(total - step) / (double)step);
    if (running && total <= 0)
        snprintf(line, sizeof line, "%s  (variant %d/%d)  loading the data and building the model...", label, vi + 1, nvar);
    else if (running)
        snprintf(line, sizeof line, "%s  (variant %d/%d)  step %ld/%ld  epoch %d  loss %.4g  %.0f samples/s  ETA %s",
                 label, vi + 1, nvar, step, total, epoch + 1, loss, sps, eta);
    else snprintf(line, sizeof line, "%s", result);
    attron(A_BOLD);
    wb_text(a, y++, 2, a->cols - 4, 0, line);
    attroff(A_BOLD);
    int bw = a->cols - 14;
    attron(wb_series_attr(a, 0));
    wb_bar(a, y, 2, bw, running ? frac : (step > 0 ? frac : 0));
    attroff(wb_series_attr(a, 0));
    snprintf(line, sizeof line, "%5.1f%%", 100 * frac);
    wb_text(a, y++, bw + 3, 8, 0, line);
    y++;
    int rem = a->rows - 2 - y + 1;
    int ops_h = n_ops ? (rem / 3 < 8 ? (rem >= 16 ? 8 : 0) : rem / 3) : 0;
    int ch = rem - ops_h;
    if (ch >= 6) {
        tui_series s[3];
        size_t ns = 0;
        static const char *const nm[3] = { "train loss", "test loss", "test acc" };
        static const int idx[3] = { WB_LIVE_TRAIN_LOSS, WB_LIVE_TEST_LOSS, WB_LIVE_TEST_ACC };
        for (int i = 0; i < 3; i++) {
            if (!cp[idx[i]].n) continue;
            s[ns].label = nm[i];
            s[ns].x = wb_pick_x(a->x_axis, cp[idx[i]].step, cp[idx[i]].wall, cp[idx[i]].hybrid);
            s[ns].y = cp[idx[i]].value;
            s[ns].n = cp[idx[i]].n;
            ns++;
        }
        tui_chart_opts o = { .width = a->cols - 2, .height = ch, .utf8 = a->utf8, .mono = !a->color,
                             .log_y = a->log_y, .x_scale = a->x_scale,
                             .smooth = wb_smooth_levels[a->smooth_idx], .x_label = wb_x_names[a->x_axis],
                             .y_label = "live", .title = "loss / accuracy" };
        tui_canvas c;
        if (!tui_chart_draw(s, ns, &o, &c)) { wb_draw_canvas(a, y, 1, &c); tui_canvas_free(&c); }
        y += ch;
    }
    if (ops_h) {
        /* the op-table model of the Profile tab, its first columns (the profile so far) */
        attron(A_DIM);
        wb_text(a, y++, 1, a->cols - 2, 0, "profile so far (ops by self time)");
        attroff(A_DIM);
        prof_table t;
        prof_table_init(&t, ops, n_ops, 0, 0);
        for (int c = PROF_COL_AVG; c < PROF_COL_N; c++) t.show[c] = c == PROF_COL_CALLS || (c == PROF_COL_CPU && t.show[c]);
        int page = ops_h - 2;
        if (page > a->rows - 2 - y) page = a->rows - 2 - y;
        wb_draw_op_table(a, &t, y, page, 0);
    }
}

static void new_draw(wb_app *a)
{
    int y = new_draw_form(a);
    live_view lv;
    live_view_take(a, &lv);
    if (lv.have) new_draw_live(a, &lv, y);
    live_view_free(&lv);
}

static int new_key(wb_app *a, tui_action act, int ch)
{
    (void)ch;
    pthread_mutex_lock(&a->live.mu);
    int n_batch = a->live.n_batch, done = !a->live.running;
    long long batch[WB_MAX_COMPARE];
    memcpy(batch, a->live.batch, sizeof batch);
    pthread_mutex_unlock(&a->live.mu);
    int can_compare = n_batch > 1 && done;
    long long open = open_id(a);
    int last_field = can_compare ? F_COMPARE : open ? F_OPEN : F_START;
    switch (act) {
    case TUI_ACT_UP: if (nv.field > 0) nv.field--; return 1;
    case TUI_ACT_DOWN: if (nv.field < last_field) nv.field++; return 1;
    case TUI_ACT_HOME: nv.field = 0; return 1;
    case TUI_ACT_END: nv.field = last_field; return 1;
    case TUI_ACT_LEFT:
    case TUI_ACT_RIGHT: {
        int d = act == TUI_ACT_LEFT ? -1 : 1;
        if (nv.field == F_FILE && nv.n_files) {
            nv.file_idx = (nv.file_idx < 0 ? 0 : nv.file_idx + d + (int)nv.n_files) % (int)nv.n_files;
            nv.variant_idx = 0;
            load_preview();
        } else if (nv.field == F_VARIANT && nv.preview) {
            int m = (int)nv.preview->n_variants + (nv.preview->n_variants > 1 ? 1 : 0);
            nv.variant_idx = (nv.variant_idx + d + m) % m;
        }
        return 1;
    }
    case TUI_ACT_EDIT:
        if (nv.field == F_FILE) {
            char buf[PATH_MAX];
            snprintf(buf, sizeof buf, "%s", nv.path);
            if (wb_prompt(a, "experiment file: ", buf, sizeof buf, NULL) && buf[0]) {
                snprintf(nv.path, sizeof nv.path, "%s", buf);
                nv.file_idx = -1;
                nv.variant_idx = 0;
                load_preview();
            }
        } else if (nv.field == F_VARIANT) {
            if (nv.preview) {
                int m = (int)nv.preview->n_variants + (nv.preview->n_variants > 1 ? 1 : 0);
                nv.variant_idx = (nv.variant_idx + 1) % m;
            }
        } else if (nv.field >= F_KEYS && nv.field < F_START) {
            int i = nv.field - F_KEYS;
            char buf[128], label[96];
            const char *fv = file_value(i);
            snprintf(buf, sizeof buf, "%s", nv.edited[i] ? nv.values[i] : fv ? fv : "");
            snprintf(label, sizeof label, "%s = ", edit_keys[i]);
            if (wb_prompt(a, label, buf, sizeof buf, NULL)) {
                /* The file's own value is no override: variants keep theirs. */
                if (fv && !strcmp(buf, fv)) {
                    nv.edited[i] = 0;
                    nv.error[0] = 0;
                    return 1;
                }
                snprintf(nv.values[i], sizeof nv.values[i], "%s", buf);
                nv.edited[i] = 1;
                /* Validate now, with the file's own error message. */
                char ov[256];
                snprintf(ov, sizeof ov, "%s=%s", edit_keys[i], buf);
                const char *ovp[1] = { ov };
                eng_experiment *ex = NULL;
                if (eng_experiment_load(nv.path, ovp, 1, &ex)) snprintf(nv.error, sizeof nv.error, "%s", eng_error());
                else nv.error[0] = 0;
                eng_experiment_free(ex);
            }
        } else if (nv.field == F_START) start_run(a);
        else if (nv.field == F_OPEN && open) wb_open_run(a, open);
        else if (nv.field == F_COMPARE && can_compare) wb_open_compare_ids(a, batch, n_batch);
        return 1;
    case TUI_ACT_COMPARE:
        if (can_compare) wb_open_compare_ids(a, batch, n_batch);
        else if (n_batch > 1) wb_message(a, "the batch is still running");
        else wb_message(a, "start all variants first (Variant: all), then c compares the batch");
        return 1;
    case TUI_ACT_REVERT:
        if (nv.field >= F_KEYS && nv.field < F_START && nv.edited[nv.field - F_KEYS]) {
            nv.edited[nv.field - F_KEYS] = 0;
            nv.error[0] = 0;
            wb_message(a, "%s: back to the file's value", edit_keys[nv.field - F_KEYS]);
        }
        return 1;
    case TUI_ACT_STOP:
        if (!wb_live_running(a)) wb_message(a, "no run in progress");
        else if (wb_confirm(a, "Stop the run in progress?")) { wb_live_stop(a); wb_message(a, "stopping at the next step"); a->msg_live = 1; }
        return 1;
    default: break;
    }
    return wb_chart_toggle(a, act);
}

wb_panel wb_new_panel = { .title = "New run", .screen = TUI_SCR_NEW, .draw = new_draw, .key = new_key };
