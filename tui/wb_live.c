/* wb_live.c — the workbench's live worker: one background thread at a time (a New run batch
 * through runner_run, or the Run screen's Resume/Quantize), the sink that feeds its progress,
 * curves and op rows to the screen under a mutex, and its start, stop, join and free. */
#include "cli.h"
#include "runner.h"
#include "wb.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
}

/* The op rows so far: the engine hands them over between steps (ops_live), twice a second. */
static void live_ops_now(void *ud, const prof_row *rows, size_t n) { live_ops(ud, rows, n, NULL); }

eng_sink wb_live_sink(wb_live *l)
{
    return (eng_sink){ .ud = l, .run_begin = live_begin, .metric = live_metric, .op_stats = live_ops,
                       .progress = live_progress, .ops_live = live_ops_now, .ops_live_every_s = 0.5 };
}

/* The runner's hooks for New run: stop requests, the current run for K, each variant's
 * result line. */
typedef struct {
    wb_live *l;
    char result[512], last_bad[512];
    char note[480];           /* the variant's data note (a damaged cache rebuilt), "" if none */
    int last_rc;
} nr_state;

static int nr_begin(void *ud, size_t v, const eng_config *cfg)
{
    nr_state *n = ud;
    (void)cfg;
    pthread_mutex_lock(&n->l->mu);
    int stop = n->l->stop_requested;
    n->l->variant_idx = (int)v;
    pthread_mutex_unlock(&n->l->mu);
    return stop;
}

static void nr_running(void *ud, eng_run *run)
{
    nr_state *n = ud;
    pthread_mutex_lock(&n->l->mu);
    n->l->run = run;
    if (run && n->l->stop_requested) eng_run_request_stop(run);
    pthread_mutex_unlock(&n->l->mu);
    const char *note = run ? eng_run_data_note(run) : NULL;
    if (run) snprintf(n->note, sizeof n->note, "%s", note ? note : "");
}

static void nr_done(void *ud, const runner_variant *o, prof_t *prof)
{
    nr_state *n = ud;
    wb_live *l = n->l;
    (void)prof;
    n->last_rc = o->rc;
    pthread_mutex_lock(&l->mu);
    if (o->run_id) {
        l->run_id = o->run_id;
        if (l->n_batch < WB_MAX_COMPARE) l->batch[l->n_batch++] = o->run_id;
    }
    char d[32];
    if (o->store_error[0] && o->rc != ENG_ESINK)
        snprintf(n->result, sizeof n->result, "run %.60s %s but was not stored: %.300s", l->label,
                 o->created ? eng_run_status_name(o->res.status) : "failed", o->store_error);
    else if (o->rc == ENG_OK)
        snprintf(n->result, sizeof n->result, "run #%lld %s finished: %ld steps in %s, loss %.4g", o->run_id, l->label,
                 o->res.steps, prof_fmt_duration(d, sizeof d, o->res.wall_s), o->res.final_train_loss);
    else if (o->created)
        snprintf(n->result, sizeof n->result, "run #%lld %.60s %s: %.300s", o->run_id, l->label,
                 eng_run_status_name(o->res.status), o->error);
    else
        snprintf(n->result, sizeof n->result, "%.60s: %.400s", o->cfg->variant[0] ? o->cfg->variant : o->cfg->name, o->error);
    size_t len = strlen(n->result);
    if (o->created && n->note[0] && len + 10 < sizeof n->result)   /* the note is said once, with the result */
        snprintf(n->result + len, sizeof n->result - len, "; note: %s", n->note);
    pthread_mutex_unlock(&l->mu);
    if ((o->rc != ENG_OK && o->rc != ENG_ESTOPPED) || o->store_error[0])
        snprintf(n->last_bad, sizeof n->last_bad, "%s", n->result);
}

void *wb_live_train(void *arg)
{
    wb_live *l = arg;
    eng_experiment *ex = l->ex;
    nr_state n = { .l = l };
    cli_store_sink *st = cli_store_sink_open(l->db_path, n.result, sizeof n.result);
    int rc = st ? ENG_OK : ENG_EIO;
    if (st) {
        eng_sink live_sink = wb_live_sink(l);
        runner_hooks h = { .ud = &n, .begin = nr_begin, .running = nr_running, .done = nr_done, .sink = &live_sink };
        runner_summary sum;
        runner_run(ex, st, &h, &sum);
        rc = n.last_rc;
        size_t bad = sum.failed + sum.config_errors;
        /* As on the CLI, a variant that fails or diverges does not stop the batch. */
        if (ex->n_variants > 1 && sum.ran > 1 && bad && !sum.stopped)
            snprintf(n.result, sizeof n.result, "batch: %zu finished, %zu not (last: %.400s)", sum.finished, bad, n.last_bad);
        else if (ex->n_variants > 1 && sum.finished > 1 && !bad && !sum.stopped) {
            char last[512];
            snprintf(last, sizeof last, "%s", n.result);
            snprintf(n.result, sizeof n.result, "batch: %zu runs finished (c compares them); last: %.400s", sum.finished, last);
        }
        char cerr[700];
        if (cli_store_sink_close(st, cerr, sizeof cerr)) snprintf(n.result, sizeof n.result, "%.500s", cerr);
    }
    eng_experiment_free(ex);
    pthread_mutex_lock(&l->mu);
    l->ex = NULL;
    l->rc = rc;
    if (n.result[0]) snprintf(l->result, sizeof l->result, "%s", n.result);
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
}

void wb_live_summary(wb_app *a, char *buf, size_t n)
{
    wb_live *l = &a->live;
    buf[0] = 0;
    if (!wb_live_running(a)) return;
    pthread_mutex_lock(&l->mu);
    const char *mark = a->utf8 ? "\xe2\x96\xb6" : ">";
    if (l->total > 0) snprintf(buf, n, "%s %s %.0f%%", mark, l->label, 100.0 * (double)l->step / (double)l->total);
    else snprintf(buf, n, "%s %s", mark, l->label); /* a job without steps (quantize) */
    pthread_mutex_unlock(&l->mu);
}

/* Forgets the previous run's status line, curves and op table (so they do not stand
 * under an error as if they were its result). */
void wb_live_clear(wb_live *l)
{
    pthread_mutex_lock(&l->mu);
    l->finished = 0;
    l->result[0] = 0;
    free(l->ops);
    l->ops = NULL;
    l->n_ops = 0;
    for (int i = 0; i < WB_LIVE_N; i++) l->live[i].n = 0;
    pthread_mutex_unlock(&l->mu);
}

int wb_live_launch(wb_app *a, void *(*fn)(void *), const char *label, int n_variants)
{
    wb_live_clear(&a->live);
    wb_live *l = &a->live;
    pthread_mutex_lock(&l->mu);
    snprintf(l->db_path, sizeof l->db_path, "%s", a->db_path);
    l->stop_requested = 0;
    l->finished = 0;
    l->running = 1;
    l->run_id = 0;
    l->n_batch = 0;
    l->step = 0;
    l->total = 0;
    l->loss = NAN;
    l->sps = 0;
    l->t_start = wb_now();
    l->n_variants = n_variants;
    l->result[0] = 0;
    snprintf(l->label, sizeof l->label, "%s", label);
    for (int i = 0; i < WB_LIVE_N; i++) l->live[i].n = 0;
    pthread_mutex_unlock(&l->mu);
    if (prof_thread_create(&l->th, NULL, fn, l)) {
        l->running = 0;
        return -1;
    }
    l->thread_started = 1;
    return 0;
}
