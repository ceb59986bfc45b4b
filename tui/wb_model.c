/* wb_model.c — the Run screen's actions on a run's model: Resume (a crashed, interrupted or
 * failed run from its last checkpoint into the same run id, through runner_resume: the
 * path of `nnbench resume`) and Quantize (cli_quantize, runner_quant.c: `nnbench quantize`),
 * both on the workbench's worker thread (wb_live), and the Int8 tab, which shows a run's
 * quantizations fp32 against int8 with the int8 path's op profile.
 */
#include "model_load.h"
#include "runner.h"
#include "wb.h"

#include <curses.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- worker side -------------------------------------------------------------------- */

static int job_begin(void *ud, size_t v, const eng_config *cfg)
{
    wb_live *l = ud;
    (void)v;
    (void)cfg;
    pthread_mutex_lock(&l->mu);
    int stop = l->stop_requested;
    pthread_mutex_unlock(&l->mu);
    return stop;
}

static void job_running(void *ud, eng_run *run)
{
    wb_live *l = ud;
    pthread_mutex_lock(&l->mu);
    l->run = run;
    if (run && l->stop_requested) eng_run_request_stop(run);
    pthread_mutex_unlock(&l->mu);
}

static void job_end(wb_live *l, int rc, long long run, const char *result)
{
    pthread_mutex_lock(&l->mu);
    l->rc = rc;
    l->run_id = run;
    snprintf(l->result, sizeof l->result, "%s", result);
    l->running = 0;
    l->finished = 1;
    pthread_mutex_unlock(&l->mu);
}

static void *resume_worker(void *arg)
{
    wb_live *l = arg;
    wb_job *job = &l->job;
    eng_sink live = wb_live_sink(l);
    runner_hooks h = { .ud = l, .begin = job_begin, .running = job_running, .sink = &live };
    runner_resumed r;
    runner_resume(l->db_path, job->spec, &h, &r);
    const runner_variant *o = &r.out;
    char msg[512];
    if (!o->created)
        snprintf(msg, sizeof msg, "run #%lld not resumed: %.440s", job->run, o->error);
    else if (o->store_error[0])
        snprintf(msg, sizeof msg, "run #%lld resumed but not stored completely: %.400s", job->run, o->store_error);
    else if (o->rc == ENG_OK)
        snprintf(msg, sizeof msg, "run #%lld resumed from step %ld: finished at step %ld, loss %.4g%s", r.run_id,
                 r.from_step, o->res.steps, o->res.final_train_loss,
                 r.data_warning[0] ? "; warning: its data could not be checked (stored by an older nnbench)" : "");
    else
        snprintf(msg, sizeof msg, "run #%lld resumed from step %ld: %s at step %ld%s%.380s", r.run_id, r.from_step,
                 eng_run_status_name(o->res.status), o->res.steps, o->error[0] ? ": " : "", o->error);
    job_end(l, o->rc, job->run, msg);
    return NULL;
}

static void quant_stage(void *ud, const char *stage)
{
    wb_live *l = ud;
    wb_job *job = &l->job;
    pthread_mutex_lock(&l->mu);
    snprintf(job->stage, sizeof job->stage, "%s", stage);
    snprintf(l->label, sizeof l->label, "quantize #%lld: %.150s", job->run, stage);
    pthread_mutex_unlock(&l->mu);
}

static void *quant_worker(void *arg)
{
    wb_live *l = arg;
    wb_job *job = &l->job;
    cli_quant_result q;
    int code = cli_quantize(l->db_path, job->spec, &job->o, 1, quant_stage, l, &q);
    char msg[512];
    if (code)
        snprintf(msg, sizeof msg, "run #%lld not quantized: %.440s", job->run, q.error);
    else
        snprintf(msg, sizeof msg, "quantization #%lld of run #%lld stored: test acc %.4f -> %.4f, bytes x%.3f (Int8 tab)",
                 q.rec.id, job->run, q.rec.fp32_acc, q.rec.int8_acc,
                 q.rec.fp32_bytes > 0 ? (double)q.rec.int8_bytes / (double)q.rec.fp32_bytes : NAN);
    cli_quant_result_free(&q);
    pthread_mutex_lock(&l->mu);
    job->stage[0] = 0;
    pthread_mutex_unlock(&l->mu);
    job_end(l, code ? ENG_EINVAL : ENG_OK, job->run, msg);
    return NULL;
}

/* ---- UI side ------------------------------------------------------------------------- */

/* The job's result as a message once it is over (called as the Run screen draws). */
static void announce(wb_app *a)
{
    wb_job *job = &a->live.job;
    if (job->kind == WB_JOB_NONE || job->announced || wb_live_running(a)) return;
    pthread_mutex_lock(&a->live.mu);
    int done = a->live.finished && a->live.run_id == job->run; /* not a later New run's */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", a->live.result);
    pthread_mutex_unlock(&a->live.mu);
    if (!done) return;
    job->announced = 1;
    job->gen++;
    wb_message(a, "%s", msg);
}

/* The newest checkpoint of run r (NULL-safe): 1 if it has one. */
static int last_checkpoint(wb_app *a, long long run, store_checkpoint *out)
{
    store_checkpoint *ck = NULL;
    size_t n = 0;
    int have = !store_checkpoints_list(a->db, run, &ck, &n) && n;
    if (have) *out = ck[0];
    free(ck);
    return have;
}

const char *wb_resume_refusal(wb_app *a, const store_run *r, char *buf, size_t cap)
{
    if (runner_resume_refusal(r, buf, cap)) return buf;
    store_checkpoint ck;
    if (!last_checkpoint(a, r->id, &ck)) {
        snprintf(buf, cap, "run #%lld has no checkpoint to resume from (%s)", r->id,
                 !strcmp(r->optimizer, "newton") ? "newton runs take none: their solver state is not serialised"
                                                 : "it stopped before its first one, or was written before checkpoints");
        return buf;
    }
    return NULL;
}

/* Why Quantize is not offered for r, or NULL. */
const char *wb_quant_refusal(wb_app *a, const store_run *r, char *buf, size_t cap)
{
    store_checkpoint ck;
    if (r->status != STORE_RUN_FINISHED)
        snprintf(buf, cap, "run #%lld is %s; Quantize takes a finished run's final checkpoint", r->id,
                 store_status_name(r->status));
    else if (!last_checkpoint(a, r->id, &ck))
        snprintf(buf, cap, "run #%lld has no checkpoint (%s)", r->id,
                 !strcmp(r->optimizer, "newton") ? "newton runs take none" : "written before checkpoints");
    else if (ck.step != r->steps)
        snprintf(buf, cap, "run #%lld's last checkpoint is at step %ld, not at its last step %ld", r->id, ck.step, r->steps);
    else
        return NULL;
    return buf;
}

static int start_resume(wb_app *a, const store_run *r)
{
    wb_job *job = &a->live.job;
    char why[512];
    if (wb_live_running(a)) { wb_message(a, "a run is in progress (K stops it); resume after it"); return 1; }
    if (wb_resume_refusal(a, r, why, sizeof why)) { wb_message(a, "Resume not offered: %s", why); return 1; }
    store_checkpoint ck;
    if (!last_checkpoint(a, r->id, &ck)) return 1;
    if (!wb_confirm(a, "Resume run #%lld (%s) from its checkpoint at step %ld of %ld?", r->id,
                    store_status_name(r->status), ck.step, r->total_steps))
        return 1;
    job->kind = WB_JOB_RESUME;
    job->run = r->id;
    job->from_step = ck.step;
    job->announced = 0;
    snprintf(job->spec, sizeof job->spec, "%lld", r->id);
    char label[96];
    snprintf(label, sizeof label, "resume #%lld", r->id);
    if (wb_live_launch(a, resume_worker, label, 1)) { job->kind = WB_JOB_NONE; wb_message(a, "cannot start the worker thread"); return 1; }
    wb_message(a, "resuming run #%lld from step %ld (K stops it)", r->id, ck.step);
    a->msg_live = 1;
    return 1;
}

static int start_quantize(wb_app *a, const store_run *r)
{
    wb_job *job = &a->live.job;
    char why[512];
    if (wb_live_running(a)) { wb_message(a, "a run is in progress (K stops it); quantize after it"); return 1; }
    if (wb_quant_refusal(a, r, why, sizeof why)) { wb_message(a, "Quantize not offered: %s", why); return 1; }
    char nbuf[32] = "1000", sbuf[32] = "percentile";
    if (!wb_prompt(a, "Quantize: calibration samples (Enter: 1000) ", nbuf, sizeof nbuf, NULL)) return 1;
    char *end;
    long n = strtol(nbuf, &end, 10);
    if (end == nbuf || *end || n < 1 || n > 10000000) {
        wb_message(a, "calibration samples: expected a number from 1 to 10000000, got '%s'", nbuf);
        return 1;
    }
    if (!wb_prompt(a, "Quantize: scheme, minmax or percentile (Enter: percentile) ", sbuf, sizeof sbuf, NULL)) return 1;
    eng_qscheme scheme;
    if (!strcmp(sbuf, "minmax")) scheme = ENG_QSCHEME_MINMAX;
    else if (!strcmp(sbuf, "percentile")) scheme = ENG_QSCHEME_PERCENTILE;
    else { wb_message(a, "scheme: expected minmax or percentile, got '%s'", sbuf); return 1; }
    job->kind = WB_JOB_QUANT;
    job->run = r->id;
    job->o = (cli_qopts){ .calibrate = (int)n, .scheme = scheme, .kernel = NULL };
    job->announced = 0;
    snprintf(job->stage, sizeof job->stage, "starting");
    snprintf(job->spec, sizeof job->spec, "%lld", r->id);
    char label[96];
    snprintf(label, sizeof label, "quantize #%lld", r->id);
    if (wb_live_launch(a, quant_worker, label, 1)) { job->kind = WB_JOB_NONE; wb_message(a, "cannot start the worker thread"); return 1; }
    wb_message(a, "quantizing run #%lld (%ld calibration samples, %s)", r->id, n, cli_qscheme_name(scheme));
    a->msg_live = 1;
    return 2;
}

/* ---- K: stop the workbench's job, or a run another process on this host runs ---------- */

/* Why r cannot be stopped from here, or NULL when its process is an nnbench of this host:
 * the pid is checked to be alive and to be nnbench (a pid reused by another program after
 * a crash must never be signalled). */
static const char *stop_refusal(const store_run *r, char *buf, size_t cap)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    if (r->status != STORE_RUN_RUNNING)
        snprintf(buf, cap, "run #%lld is %s: nothing to stop", r->id, store_status_name(r->status));
    else if (strcmp(r->host, host))
        snprintf(buf, cap, "run #%lld runs on host %.64s (pid %ld): stop it there", r->id, r->host, r->pid);
    else if (r->pid <= 0 || (pid_t)r->pid == getpid() || kill((pid_t)r->pid, 0))
        snprintf(buf, cap, "run #%lld: no process %ld on this host (r reloads its status)", r->id, r->pid);
    else {
        char path[64], argv0[256] = "";
        snprintf(path, sizeof path, "/proc/%ld/cmdline", r->pid);
        FILE *f = fopen(path, "r");
        if (f) { if (!fgets(argv0, sizeof argv0, f)) argv0[0] = 0; fclose(f); }
        const char *base = strrchr(argv0, '/');
        base = base ? base + 1 : argv0;
        if (strncmp(base, "nnbench", 7)) {
            snprintf(buf, cap, "run #%lld: pid %ld is not nnbench (%.60s); not stopped", r->id, r->pid, base);
            return buf;
        }
        return NULL;
    }
    return buf;
}

int wb_stop_offered(wb_app *a, const store_run *r)
{
    char why[256];
    return wb_live_running(a) || (r && !stop_refusal(r, why, sizeof why));
}

void wb_stop_key(wb_app *a, const store_run *r)
{
    char why[512];
    if (wb_live_running(a)) {
        if (wb_confirm(a, "Stop the run in progress?")) {
            wb_live_stop(a);
            wb_message(a, "stopping at the next step (a quantization runs to its end)");
            a->msg_live = 1;
        }
        return;
    }
    if (!r) { wb_message(a, "nothing in progress"); return; }
    if (stop_refusal(r, why, sizeof why)) { wb_message(a, "nothing stopped: %s", why); return; }
    if (!wb_confirm(a, "Stop run #%lld (pid %ld on this host, started from another terminal)?", r->id, r->pid)) return;
    if (kill((pid_t)r->pid, SIGINT))
        wb_message(a, "run #%lld: cannot signal pid %ld: %s", r->id, r->pid, strerror(errno));
    else
        wb_message(a, "run #%lld: SIGINT sent to pid %ld; it stops at the next step", r->id, r->pid);
}

int wb_model_key(wb_app *a, tui_action act, const store_run *r)
{
    switch (act) {
    case TUI_ACT_RESUME: return start_resume(a, r);
    case TUI_ACT_QUANTIZE: return start_quantize(a, r);
    case TUI_ACT_STOP: wb_stop_key(a, r); return 1;
    default: return 0;
    }
}

/* ---- the Int8 tab ------------------------------------------------------------------------ */

static double ratio(double i8, double f) { return f > 0 && isfinite(i8) ? i8 / f : NAN; }

/* One quantization, fp32 and int8 side by side, and its op profile. */
static void add_quant(wb_app *a, wb_quant_view *qv, const store_quant *q)
{
    char f[32], i[32], x[32];
    tui_lines_add(&qv->l, &qv->n, "Quantization #%lld: %s, %ld calibration samples, of the checkpoint at step %ld", q->id, q->scheme,
        q->calibrate, q->step);
    tui_lines_add(&qv->l, &qv->n, "  int8 kernel: %s", q->kernel);
    tui_lines_add(&qv->l, &qv->n, "  %-22s %14s %14s %12s", "", "fp32", "int8", "int8/fp32");
    tui_lines_add(&qv->l, &qv->n, "  %-22s %14s %14s %12.3f", "model bytes", prof_fmt_bytes(f, sizeof f, (double)q->fp32_bytes),
        prof_fmt_bytes(i, sizeof i, (double)q->int8_bytes), ratio((double)q->int8_bytes, (double)q->fp32_bytes));
    tui_lines_add(&qv->l, &qv->n, "  %-22s %14s %14s", "test loss", prof_fmt_num(f, sizeof f, q->fp32_loss), prof_fmt_num(i, sizeof i, q->int8_loss));
    if (isfinite(q->fp32_acc)) {
        snprintf(x, sizeof x, "%+.2f pt", 100.0 * (q->int8_acc - q->fp32_acc));
        tui_lines_add(&qv->l, &qv->n, "  %-22s %14.4f %14.4f %12s", "test accuracy", q->fp32_acc, q->int8_acc, x);
    }
    tui_lines_add(&qv->l, &qv->n, "  %-22s %14.0f %14.0f %12.2f", "samples/s, batch 1", q->fp32_sps_b1, q->int8_sps_b1, ratio(q->int8_sps_b1, q->fp32_sps_b1));
    tui_lines_add(&qv->l, &qv->n, "  %-22s %14.0f %14.0f %12.2f", "samples/s, batch 128", q->fp32_sps_b128, q->int8_sps_b128,
        ratio(q->int8_sps_b128, q->fp32_sps_b128));
    store_quant_op *ops = NULL;
    size_t n = 0;
    if (store_quant_ops_get(a->db, q->id, &ops, &n) || !n) { free(ops); tui_lines_add(&qv->l, &qv->n, "  (no int8 op profile stored)"); return; }
    tui_lines_add(&qv->l, &qv->n, "%s", "");
    tui_lines_add(&qv->l, &qv->n, "  int8 path profile (test set, by self time):");
    /* the op table of run --profile, show and the Profile tab, as text lines */
    prof_table t;
    prof_table_init(&t, ops, n, 0, 0);
    /* the store keeps name, layer, calls, total and self of these rows: no blank columns */
    t.show[PROF_COL_GFLOPS] = t.show[PROF_COL_BYTES] = t.show[PROF_COL_GBPS] = t.show[PROF_COL_SELF_MEM] = t.show[PROF_COL_PEAK_MEM] = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&text, &len);
    if (mf) {
        prof_table_print(mf, &t, 0, 24, "  ");
        fclose(mf);
        char *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) tui_lines_add(&qv->l, &qv->n, "%s", l);
    }
    free(text);
    free(ops);
}

static void qv_load(wb_app *a, wb_quant_view *qv, const store_run *r)
{
    tui_lines_clear(&qv->l, &qv->n);
    qv->run = r->id;
    qv->gen = a->live.job.gen;
    qv->at = wb_now();
    char why[512];
    const char *no = wb_quant_refusal(a, r, why, sizeof why);
    if (no) tui_lines_add(&qv->l, &qv->n, "Quantize (Q) is not offered: %s.", no);
    else tui_lines_add(&qv->l, &qv->n, "Q quantizes the final checkpoint to int8 (as nnbench quantize %lld).", r->id);
    store_quant *q = NULL;
    size_t n = 0;
    if (store_quants_list(a->db, r->id, &q, &n) || !n) {
        free(q);
        tui_lines_add(&qv->l, &qv->n, "%s", "");
        tui_lines_add(&qv->l, &qv->n, "No int8 quantization of this run yet.");
        return;
    }
    tui_lines_add(&qv->l, &qv->n, "%s", "");
    add_quant(a, qv, &q[0]);
    if (n > 1) {
        tui_lines_add(&qv->l, &qv->n, "%s", "");
        tui_lines_add(&qv->l, &qv->n, "Earlier quantizations (fp32 -> int8):");
        char fb[32], ib[32];
        for (size_t k = 1; k < n; k++)
            tui_lines_add(&qv->l, &qv->n, "  #%lld %s, %ld samples, %s: bytes %s -> %s, acc %.4f -> %.4f, batch 128 x%.2f", q[k].id, q[k].scheme,
                q[k].calibrate, q[k].kernel, prof_fmt_bytes(fb, sizeof fb, (double)q[k].fp32_bytes),
                prof_fmt_bytes(ib, sizeof ib, (double)q[k].int8_bytes), q[k].fp32_acc, q[k].int8_acc,
                ratio(q[k].int8_sps_b128, q[k].fp32_sps_b128));
    }
    free(q);
}

int wb_quant_rows(const wb_quant_view *qv) { return (int)qv->n; }

void wb_quant_free(wb_quant_view *qv)
{
    tui_lines_clear(&qv->l, &qv->n);
    qv->run = -1;
}

void wb_quant_draw(wb_app *a, wb_quant_view *qv, const store_run *r, int y0, int y1, int *scroll)
{
    const wb_job *job = &a->live.job;
    announce(a);
    if (qv->run != r->id || qv->gen != job->gen || wb_now() - qv->at > 2.0) qv_load(a, qv, r);
    int y = y0;
    if (job->kind == WB_JOB_QUANT && job->run == r->id && wb_live_running(a)) {
        pthread_mutex_lock(&a->live.mu);
        char line[256];
        snprintf(line, sizeof line, "%s quantizing: %s ...", a->utf8 ? "\xe2\x96\xb6" : ">", job->stage);
        pthread_mutex_unlock(&a->live.mu);
        attron(A_BOLD);
        wb_text(a, y++, 1, a->cols - 2, 0, line);
        attroff(A_BOLD);
    }
    if (y <= y1) wb_draw_lines(a, qv->l, qv->n, y, y1, scroll);
}

void wb_model_tick(wb_app *a) { announce(a); }
