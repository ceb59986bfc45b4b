/* tui_newrun.c — the New run screen: pick an experiment file and a variant, edit a few
 * keys (they become --set style overrides), start; training runs on a worker thread
 * that writes the store and feeds the screen (progress, ETA, live curves, op table).
 */
#include "cli.h"
#include "wb.h"

#include <curses.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The keys a user most often changes before a run; the rest stay as the file says. */
static const char *const edit_keys[] = { "train.epochs", "train.lr", "train.batch", "data.n", "profile.enabled" };
#define N_EDIT ((int)(sizeof edit_keys / sizeof edit_keys[0]))

enum { F_FILE, F_VARIANT, F_KEYS, F_START = F_KEYS + N_EDIT, F_OPEN, F_N };

static struct {
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
} nv;

/* ---- live state (worker side) ------------------------------------------------------ */

static void series_push(wb_series *s, const eng_metric *m)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        double *a = realloc(s->step, cap * sizeof *a), *b, *c, *d;
        if (!a) return;
        s->step = a;
        if (!(b = realloc(s->wall, cap * sizeof *b))) return;
        s->wall = b;
        if (!(c = realloc(s->hybrid, cap * sizeof *c))) return;
        s->hybrid = c;
        if (!(d = realloc(s->value, cap * sizeof *d))) return;
        s->value = d;
        s->cap = cap;
    }
    s->step[s->n] = (double)m->step;
    s->wall[s->n] = m->wall_s;
    s->hybrid[s->n] = m->hybrid_s;
    s->value[s->n] = m->value;
    s->n++;
}

static int live_begin(void *ud, const eng_run_info *info)
{
    wb_live *l = ud;
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < WB_LIVE_N; i++) l->live[i].n = 0;
    free(l->ops);
    l->ops = NULL;
    l->n_ops = 0;
    l->total = info->total_steps;
    l->step = 0;
    l->loss = NAN;
    l->sps = 0;
    l->t_start = wb_now();
    snprintf(l->label, sizeof l->label, "%s%s%s", info->cfg->name, info->cfg->variant[0] ? "/" : "", info->cfg->variant);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

static int live_metric(void *ud, const eng_metric *m)
{
    wb_live *l = ud;
    static const char *const keys[WB_LIVE_N] = { "train_loss", "test_loss", "train_acc", "test_acc" };
    for (int i = 0; i < WB_LIVE_N; i++)
        if (!strcmp(m->key, keys[i])) {
            pthread_mutex_lock(&l->mu);
            series_push(&l->live[i], m);
            pthread_mutex_unlock(&l->mu);
        }
    return 0;
}

static int live_ops(void *ud, const prof_row *rows, size_t n, const prof_summary *sum)
{
    wb_live *l = ud;
    (void)sum;
    prof_row *c = malloc((n ? n : 1) * sizeof *c);
    if (!c) return 0; /* the live view is a nicety: never fail the run for it */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) /* ops only: phases would double-count their time */
        if (rows[i].kind == PROF_OP) c[m++] = rows[i];
    pthread_mutex_lock(&l->mu);
    free(l->ops);
    l->ops = c;
    l->n_ops = m;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

static void live_progress(void *ud, long step, long total, int epoch, double loss, double sps)
{
    wb_live *l = ud;
    pthread_mutex_lock(&l->mu);
    l->step = step;
    l->total = total;
    l->epoch = epoch;
    l->loss = loss;
    l->sps = sps;
    pthread_mutex_unlock(&l->mu);
    /* The op table while the run goes: progress comes between steps, on the training
     * thread, with no scope open, so the profiler can be read here; twice a second is
     * plenty for a screen and costs the run nothing measurable. */
    double now = wb_now();
    if (l->prof && now - l->ops_t >= 0.5) {
        prof_row *rows;
        size_t n;
        if (!prof_rows(l->prof, PROF_BY_SCOPE, &rows, &n)) {
            live_ops(l, rows, n, NULL);
            free(rows);
        }
        l->ops_t = now;
    }
}

static void *worker(void *arg)
{
    wb_live *l = arg;
    eng_experiment *ex = l->ex;
    char result[512] = "";
    cli_store_sink *st = cli_store_sink_open(l->db_path, result, sizeof result);
    int rc = 0;
    if (!st) rc = ENG_EIO;
    eng_sink live_sink = { .ud = l, .run_begin = live_begin, .metric = live_metric, .op_stats = live_ops,
                           .progress = live_progress };
    eng_sink store_sink = { 0 };
    if (st) store_sink = cli_store_sink_get(st);
    eng_sink_tee tee = { .sinks = { &live_sink, &store_sink }, .n = 2 };
    eng_sink sink = eng_sink_tee_make(&tee);
    for (size_t v = 0; st && v < ex->n_variants; v++) {
        pthread_mutex_lock(&l->mu);
        int stop = l->stop_requested;
        l->variant_idx = (int)v;
        pthread_mutex_unlock(&l->mu);
        if (stop) break;
        const eng_config *cfg = &ex->variants[v];
        prof_t *prof = NULL;
        if (cfg->profile.enabled) {
            prof_options po = { .counters = cfg->profile.counters, .quiet = 1 };
            prof = prof_create(&po);
            if (!prof) { snprintf(result, sizeof result, "profiler: %s", prof_error()); rc = ENG_EINVAL; break; }
        }
        eng_run *run = NULL;
        rc = eng_run_create(cfg, ex->text, prof, &run);
        if (rc) {
            snprintf(result, sizeof result, "%s", eng_error());
            prof_destroy(prof);
            break;
        }
        pthread_mutex_lock(&l->mu);
        l->run = run;
        if (l->stop_requested) eng_run_request_stop(run);
        pthread_mutex_unlock(&l->mu);
        l->prof = prof;
        l->ops_t = wb_now();
        rc = eng_run_train(run, &sink);
        l->prof = NULL;
        const eng_run_result *res = eng_run_result_get(run);
        long long id = cli_store_sink_run_id(st);
        pthread_mutex_lock(&l->mu);
        l->run = NULL;
        l->run_id = id;
        if (!l->first_id) l->first_id = id;
        const char *serr = cli_store_sink_error(st);
        if (serr && rc != ENG_ESINK)
            snprintf(result, sizeof result, "run %s %s but was not stored: %s", l->label,
                     eng_run_status_name(res->status), serr);
        else if (rc == ENG_OK)
            snprintf(result, sizeof result, "run #%lld %s finished: %ld steps in %.1f s, loss %.4g", id, l->label,
                     res->steps, res->wall_s, res->final_train_loss);
        else
            snprintf(result, sizeof result, "run #%lld %s %s: %s", id, l->label, eng_run_status_name(res->status),
                     res->error ? res->error : eng_error());
        pthread_mutex_unlock(&l->mu);
        eng_run_destroy(run);
        prof_destroy(prof);
        if (rc) break;
    }
    if (st) cli_store_sink_close(st);
    eng_experiment_free(ex);
    pthread_mutex_lock(&l->mu);
    l->ex = NULL;
    l->rc = rc;
    if (result[0]) snprintf(l->result, sizeof l->result, "%s", result);
    l->running = 0;
    l->finished = 1;
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- live state (UI side) ---------------------------------------------------------- */

static void reap(wb_app *a)
{
    wb_live *l = &a->live;
    if (!l->thread_started) return;
    pthread_mutex_lock(&l->mu);
    int done = l->finished;
    pthread_mutex_unlock(&l->mu);
    if (done) {
        pthread_join(l->th, NULL);
        l->thread_started = 0;
    }
}

int wb_live_running(wb_app *a)
{
    reap(a);
    return a->live.thread_started;
}

void wb_live_stop(wb_app *a)
{
    wb_live *l = &a->live;
    pthread_mutex_lock(&l->mu);
    l->stop_requested = 1;
    if (l->run) eng_run_request_stop(l->run);
    pthread_mutex_unlock(&l->mu);
}

void wb_live_join(wb_app *a)
{
    if (a->live.thread_started) {
        pthread_join(a->live.th, NULL);
        a->live.thread_started = 0;
    }
}

void wb_live_free(wb_app *a)
{
    wb_live *l = &a->live;
    for (int i = 0; i < WB_LIVE_N; i++) {
        free(l->live[i].step); free(l->live[i].wall); free(l->live[i].hybrid); free(l->live[i].value);
        memset(&l->live[i], 0, sizeof l->live[i]);
    }
    free(l->ops);
    l->ops = NULL;
    for (size_t i = 0; i < nv.n_files; i++) free(nv.files[i]);
    free(nv.files);
    nv.files = NULL;
    nv.n_files = 0;
    eng_experiment_free(nv.preview);
    nv.preview = NULL;
}

void wb_live_summary(wb_app *a, char *buf, size_t n)
{
    wb_live *l = &a->live;
    buf[0] = 0;
    if (!wb_live_running(a)) return;
    pthread_mutex_lock(&l->mu);
    double pct = l->total > 0 ? 100.0 * (double)l->step / (double)l->total : 0;
    snprintf(buf, n, "%s %s %.0f%%", a->utf8 ? "\xe2\x96\xb6" : ">", l->label, pct);
    pthread_mutex_unlock(&l->mu);
}

/* ---- the form ---------------------------------------------------------------------- */

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

static const eng_config *preview_cfg(void)
{
    if (!nv.preview || !nv.preview->n_variants) return NULL;
    int v = nv.variant_idx < (int)nv.preview->n_variants ? nv.variant_idx : 0;
    return &nv.preview->variants[v];
}

static const char *value_of(int i)
{
    if (nv.edited[i]) return nv.values[i];
    const eng_config *c = preview_cfg();
    if (c)
        for (size_t k = 0; k < c->n_kv; k++)
            if (!strcmp(c->kv[k].key, edit_keys[i])) return c->kv[k].value;
    return "";
}

void wb_open_new(wb_app *a)
{
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
    if (eng_experiment_load(nv.path, ovp, n, &ex)) { snprintf(nv.error, sizeof nv.error, "%s", eng_error()); return; }
    if (nv.variant_idx < (int)nv.preview->n_variants && nv.preview->variants[nv.variant_idx].variant[0] &&
        eng_experiment_select(ex, nv.preview->variants[nv.variant_idx].variant)) {
        snprintf(nv.error, sizeof nv.error, "%s", eng_error());
        eng_experiment_free(ex);
        return;
    }
    nv.error[0] = 0;
    wb_live *l = &a->live;
    pthread_mutex_lock(&l->mu);
    l->ex = ex;
    snprintf(l->db_path, sizeof l->db_path, "%s", a->db_path);
    l->stop_requested = 0;
    l->finished = 0;
    l->running = 1;
    l->run_id = 0;
    l->first_id = 0;
    l->step = 0;
    l->total = 0;
    l->loss = NAN;
    l->sps = 0;
    l->t_start = wb_now();
    l->n_variants = (int)ex->n_variants;
    l->result[0] = 0;
    snprintf(l->label, sizeof l->label, "%s", ex->variants[0].name);
    for (int i = 0; i < WB_LIVE_N; i++) l->live[i].n = 0;
    pthread_mutex_unlock(&l->mu);
    if (pthread_create(&l->th, NULL, worker, l)) {
        eng_experiment_free(ex);
        l->ex = NULL;
        l->running = 0;
        wb_message(a, "cannot start the training thread");
        return;
    }
    l->thread_started = 1;
    wb_message(a, "training started");
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

static void new_draw(wb_app *a)
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
    pthread_mutex_lock(&l->mu);
    long long last = l->first_id;
    pthread_mutex_unlock(&l->mu);
    if (last) {
        snprintf(v, sizeof v, "[ Open run #%lld ]", last);
        draw_field(a, y, F_OPEN, "", v, 0);
    }
    y++;
    if (nv.error[0]) {
        attron(wb_status_attr(a, STORE_RUN_FAILED));
        wb_text(a, y, 2, a->cols - 4, 0, nv.error);
        attroff(wb_status_attr(a, STORE_RUN_FAILED));
    }
    y++;

    /* Live part: progress, ETA, curves, ops. Copies are taken under the lock. */
    int running = wb_live_running(a);
    pthread_mutex_lock(&l->mu);
    int have = running || l->finished;
    long step = l->step, total = l->total;
    double loss = l->loss, sps = l->sps, t0 = l->t_start;
    int vi = l->variant_idx, nvar = l->n_variants, epoch = l->epoch;
    char label[192], result[512];
    snprintf(label, sizeof label, "%s", l->label);
    snprintf(result, sizeof result, "%s", l->result);
    wb_series cp[WB_LIVE_N];
    memset(cp, 0, sizeof cp);
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
    size_t n_ops = have ? l->n_ops : 0;
    prof_row *ops = n_ops ? malloc(n_ops * sizeof *ops) : NULL;
    if (ops) memcpy(ops, l->ops, n_ops * sizeof *ops);
    else n_ops = 0;
    pthread_mutex_unlock(&l->mu);

    if (have) {
        char line[512], eta[32] = "-";
        double frac = total > 0 ? (double)step / (double)total : 0;
        double el = wb_now() - t0;
        if (running && step > 0 && total > step) store_fmt_duration(eta, sizeof eta, el * (double)(total - step) / (double)step);
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
            tui_chart_opts o = { .width = a->cols - 2, .height = ch, .utf8 = a->utf8, .log_y = a->log_y,
                                 .smooth = wb_smooth_levels[a->smooth_idx], .x_label = wb_x_names[a->x_axis],
                                 .y_label = "live", .title = "loss / accuracy" };
            tui_canvas c;
            if (!tui_chart_draw(s, ns, &o, &c)) { wb_draw_canvas(a, y, 1, &c); tui_canvas_free(&c); }
            y += ch;
        }
        if (ops_h) {
            attron(A_BOLD | A_UNDERLINE);
            snprintf(line, sizeof line, "%-24s %-10s %10s %10s %8s", "op (profile so far)", "layer", "self", "total", "calls");
            wb_text(a, y++, 1, a->cols - 2, 0, line);
            attroff(A_BOLD | A_UNDERLINE);
            for (int r = 0; r < ops_h - 1 && (size_t)r < n_ops && y < a->rows - 1; r++) {
                char s1[32], s2[32];
                tui_fmt_ns((double)ops[r].self_ns, s1, sizeof s1);
                tui_fmt_ns((double)ops[r].total_ns, s2, sizeof s2);
                snprintf(line, sizeof line, "%-24s %-10s %10s %10s %8llu", ops[r].name, ops[r].layer, s1, s2,
                         (unsigned long long)ops[r].calls);
                wb_text(a, y++, 1, a->cols - 2, 0, line);
            }
        }
    }
    for (int i = 0; i < WB_LIVE_N; i++) { free(cp[i].step); free(cp[i].wall); free(cp[i].hybrid); free(cp[i].value); }
    free(ops);
}

static int new_key(wb_app *a, tui_action act, int ch)
{
    (void)ch;
    int last_field = a->live.first_id ? F_OPEN : F_START;
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
            snprintf(buf, sizeof buf, "%s", value_of(i));
            snprintf(label, sizeof label, "%s = ", edit_keys[i]);
            if (wb_prompt(a, label, buf, sizeof buf, NULL)) {
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
        else if (nv.field == F_OPEN && a->live.first_id) wb_open_run(a, a->live.first_id);
        return 1;
    case TUI_ACT_STOP:
        if (!wb_live_running(a)) wb_message(a, "no run in progress");
        else if (wb_confirm(a, "Stop the run in progress?")) { wb_live_stop(a); wb_message(a, "stopping at the next step"); }
        return 1;
    default: break;
    }
    switch (act) {
    case TUI_ACT_LOG_Y: a->log_y = !a->log_y; return 1;
    case TUI_ACT_X_AXIS: a->x_axis = (a->x_axis + 1) % 3; return 1;
    case TUI_ACT_SMOOTH: a->smooth_idx = (a->smooth_idx + 1) % 3; return 1;
    default: return 0;
    }
}

wb_panel wb_new_panel = { .title = "New run", .screen = TUI_SCR_NEW, .draw = new_draw, .key = new_key };
