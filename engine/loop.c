/* loop.c — the one training loop (loop.h): steps of a task through the slots in their fixed
 * order, the profiler phases, metrics, evaluation, checkpoints and the run result. */
#include "loop.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct eng_loop {
    const eng_loop_env *env;
    const eng_loop_task *task;
    const eng_loop_slots *sl;
    const eng_sink *sink;
    eng_run_result *res;
    eng_loop_state S;           /* everything a checkpoint restores: the one copy */
    eng_loop_batch b;           /* the step's batch */
    double t0, ops_live_t;
    int epoch;                  /* the current batch's epoch (metrics carry it) */
    long ckpt_step;             /* step of the last checkpoint taken (-1: none) */
    long unprepared0;           /* eng_gemm_unprepared_calls when the run began */
};

static double wall_of(const eng_loop *lp) { return prof_now_s() - lp->t0; }

/* The one place a running loop sets the run's status and message (eng_loop_refuse does it
 * for a run that never began); returns rc. */
static int fail(eng_loop *lp, eng_run_status status, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lp->env->err, lp->env->errcap, fmt, ap);
    va_end(ap);
    lp->res->status = status;
    return rc;
}

int eng_loop_refuse(const eng_loop_env *env, eng_run_result *res, int rc)
{
    snprintf(env->err, env->errcap, "%s", eng_error());
    *res = (eng_run_result){ .status = ENG_RUN_FAILED, .error = env->err };
    return rc;
}

int eng_loop_phases(prof_t *prof, int ph[ENG_N_PHASES])
{
    static const char *const names[ENG_N_PHASES] = { "data", "forward", "backward", "optimizer", "eval", "step",
                                                     "checkpoint" };
    for (int i = 0; i < ENG_N_PHASES; i++) ph[i] = -1;
    if (!prof) return ENG_OK;
    for (int i = 0; i < ENG_N_PHASES; i++)
        if ((ph[i] = prof_register(prof, names[i], NULL, i == ENG_PH_STEP ? PROF_STEP : PROF_PHASE)) < 0)
            return eng_fail(ENG_EINVAL, "run: the profiler's scope table is full (%s)", prof_error());
    return ENG_OK;
}

int eng_loop_emit(eng_loop *lp, const char *key, double value)
{
    const eng_sink *s = lp->sink;
    if (!s || !s->metric) return 0;
    double wall = wall_of(lp);
    eng_metric m = { .step = lp->S.step, .epoch = lp->epoch, .wall_s = wall,
                     .hybrid_s = wall + lp->S.hybrid_extra, .key = key, .value = value };
    /* Any non-zero answer is a sink failure; its message is already in eng_error(). */
    return s->metric(s->ud, &m) ? ENG_ESINK : 0;
}

const eng_loop_batch *eng_loop_current(const eng_loop *lp) { return &lp->b; }
const eng_sink *eng_loop_sink(const eng_loop *lp) { return lp->sink; }

int eng_sink_op_stats(prof_t *p, const eng_sink *sink)
{
    if (!p || !sink || !sink->op_stats) return ENG_OK;
    prof_row *rows = NULL;
    size_t n = 0;
    prof_summary sum;
    int rc = ENG_OK;
    if (!prof_rows(p, PROF_BY_SCOPE, &rows, &n)) {
        prof_summary_get(p, &sum);
        if (sink->op_stats(sink->ud, rows, n, &sum)) rc = ENG_ESINK;
    }
    free(rows);
    return rc;
}

/* Hands the loop state after step S.step to the checkpoint slot and the record to the
 * sink (once per step). */
static int take_checkpoint(eng_loop *lp)
{
    const eng_loop_checkpoint *ck = lp->sl->checkpoint;
    const eng_sink *s = lp->sink;
    if (!ck || !s || !s->checkpoint || lp->ckpt_step == lp->S.step) return 0;
    double t = prof_now_s();
    const int *ph = lp->env->ph;
    PROF_BEGIN(lp->env->prof, ph[ENG_PH_CHECKPOINT]);
    lp->S.wall = t - lp->t0;
    const void *data = NULL;
    size_t n = 0;
    int rc = ck->write(ck->ud, &lp->S, &data, &n);
    if (!rc) {
        eng_checkpoint e = { .step = lp->S.step, .epoch = lp->S.epoch, .data = data, .len = n };
        rc = s->checkpoint(s->ud, &e) ? ENG_ESINK : 0;
    }
    PROF_END(lp->env->prof, ph[ENG_PH_CHECKPOINT], 0, n);
    lp->res->checkpoint_s += prof_now_s() - t;
    lp->res->checkpoints++;
    lp->res->checkpoint_bytes = n;
    lp->ckpt_step = lp->S.step;
    return rc ? ENG_ESINK : 0;
}

static int diverged(eng_loop *lp, long s, double loss)
{
    return fail(lp, ENG_RUN_DIVERGED, ENG_EDIVERGED, "diverged at step %ld: loss is %s", s + 1,
                isnan(loss) ? "nan" : "inf");
}

static int interrupted(eng_loop *lp, long s)
{
    return fail(lp, ENG_RUN_INTERRUPTED, ENG_ESTOPPED, "interrupted at step %ld of %ld (stop requested)", s,
                lp->env->total_steps);
}

/* Forward, backward and the reduce slot of step s; *loss and *correct over the batch.
 * fuse: the update slot's ready goes to backward (loop.h), begun with learning rate lr. */
static int step_gradients(eng_loop *lp, long s, int fuse, double lr, double *loss, int *correct)
{
    const eng_loop_task *t = lp->task;
    const eng_loop_reduce *red = lp->sl->reduce;
    const eng_loop_update *up = lp->sl->update;
    prof_t *p = lp->env->prof;
    const int *ph = lp->env->ph;
    eng_loop_batch *b = &lp->b;
    PROF_BEGIN(p, ph[ENG_PH_FORWARD]);
    /* A rank's share of a small last batch may be empty (data-parallel only). */
    *loss = b->rows ? t->forward(t->self, b, correct) : 0;
    PROF_END(p, ph[ENG_PH_FORWARD], 0, 0);
    /* Data-parallel: the global loss, and so divergence, is known after the reduce. */
    if (!red && !isfinite(*loss)) return diverged(lp, s, *loss);
    PROF_BEGIN(p, ph[ENG_PH_BACKWARD]);
    /* Data-parallel: each rank's gradients come out weighted by its share of the global
     * batch, so that their sum (the all-reduce) is the global mean gradient. */
    if (red) red->begin(red->ud);
    if (fuse) up->begin(up->ud, lr);
    if (red) t->backward(t->self, b, (float)b->rows / (float)b->global_rows, red->ready, red->ready_ud);
    else t->backward(t->self, b, 1.0f, fuse ? up->ready : NULL, fuse ? up->ud : NULL);
    PROF_END(p, ph[ENG_PH_BACKWARD], 0, 0);
    if (!red) return ENG_OK;
    int stop = 0;
    int rc = red->reduce(red->ud, loss, correct, b, &stop);
    if (!rc && stop) return interrupted(lp, s);
    if (rc) return fail(lp, ENG_RUN_FAILED, rc, "step %ld: %s", s + 1, eng_error());
    if (!isfinite(*loss)) return diverged(lp, s, *loss);
    b->rows = b->global_rows;  /* from here on the step counts the whole batch */
    return ENG_OK;
}

/* The update of step s with learning rate lr: telemetry around the transforms and the
 * update slot. */
static int step_update(eng_loop *lp, long s, int log_step, double lr)
{
    const eng_loop_slots *sl = lp->sl;
    prof_t *p = lp->env->prof;
    lp->S.last_lr = lr;
    /* telemetry sees the raw gradient and the update made of it */
    if (sl->telemetry && log_step) sl->telemetry->before(sl->telemetry->ud);
    PROF_BEGIN(p, lp->env->ph[ENG_PH_OPTIMIZER]);
    if (sl->transforms) sl->transforms->apply(sl->transforms->ud);
    double extra = 0;
    int rc = sl->update->step(sl->update->ud, lp, s, lr, &extra);
    lp->S.hybrid_extra += extra;
    PROF_END(p, lp->env->ph[ENG_PH_OPTIMIZER], 0, 0);
    if (sl->telemetry && log_step) sl->telemetry->after(sl->telemetry->ud);
    return rc ? fail(lp, ENG_RUN_FAILED, rc, "step %ld: %s", s + 1, eng_error()) : ENG_OK;
}

/* Step s (0-based) from batch to update, inside the step scope: the one exit. */
static int step_compute(eng_loop *lp, long s, double *loss, int *correct)
{
    const eng_loop_task *t = lp->task;
    prof_t *p = lp->env->prof;
    uint64_t bytes = 0;
    PROF_BEGIN(p, lp->env->ph[ENG_PH_DATA]);
    int rc = t->next(t->self, s, &lp->b, &bytes);
    PROF_END(p, lp->env->ph[ENG_PH_DATA], 0, rc ? 0 : bytes);
    if (rc) return fail(lp, ENG_RUN_FAILED, rc, "%s", eng_error());
    lp->epoch = lp->b.epoch;
    const eng_train_config *tc = &lp->env->cfg->train;
    const eng_loop_slots *sl = lp->sl;
    int log_step = (s + 1) % tc->log_every == 0 || s + 1 == lp->env->total_steps;
    double lr = eng_lr_at(tc, s, lp->env->total_steps);
    /* The update fuses into backward unless something between them needs the step's whole
     * gradient: the reduce, a transform, or telemetry at a log step (which also sees the
     * parameters before the update). */
    int fuse = sl->update->begin && !sl->reduce && !sl->transforms && !(sl->telemetry && log_step);
    if ((rc = step_gradients(lp, s, fuse, lr, loss, correct))) return rc;
    return step_update(lp, s, log_step, lr);
}

static int emit_extra(eng_loop *lp, int when)
{
    const eng_loop_metrics *x = lp->sl->extra;
    return x ? x->emit(x->ud, lp, when) : 0;
}

/* The metrics of a log step: the interval's mean loss, accuracy, lr, the extra slot's and
 * the telemetry record; the best and the time to target. */
static int log_interval(eng_loop *lp, int with_extra)
{
    eng_loop_state *S = &lp->S;
    double l = S->int_loss / S->int_rows;
    int rc = eng_loop_emit(lp, "train_loss", l);
    if (!rc && lp->task->classification) rc = eng_loop_emit(lp, "train_acc", S->int_correct / S->int_rows);
    if (!rc) rc = eng_loop_emit(lp, "lr", S->last_lr);
    if (rc || !with_extra) return rc;
    if ((rc = emit_extra(lp, ENG_LOOP_AT_LOG))) return rc;
    const eng_loop_telemetry *tm = lp->sl->telemetry;
    const eng_sink *s = lp->sink;
    if (tm && s && s->telemetry) {
        double wall = wall_of(lp);
        eng_telemetry rec = { .step = S->step, .epoch = lp->epoch, .wall_s = wall, .hybrid_s = wall + S->hybrid_extra };
        tm->record(tm->ud, &rec);
        if (s->telemetry(s->ud, &rec)) return ENG_ESINK;
    }
    return 0;
}

static void track_loss(eng_loop *lp, double l)
{
    eng_loop_state *S = &lp->S;
    S->final_train_loss = l;
    if (!(l >= S->best_train_loss)) S->best_train_loss = l;
}

static int evaluate(eng_loop *lp)
{
    eng_loop_eval e = { .test_loss = NAN, .test_acc = NAN, .val_acc = NAN };
    PROF_BEGIN(lp->env->prof, lp->env->ph[ENG_PH_EVAL]);
    lp->task->evaluate(lp->task->self, &e);
    PROF_END(lp->env->prof, lp->env->ph[ENG_PH_EVAL], 0, 0);
    int cls = lp->task->classification, rc = 0;
    if (e.has_val && (rc = eng_loop_emit(lp, "val_acc", e.val_acc))) return rc;
    if (e.has_test && (rc = eng_loop_emit(lp, "test_loss", e.test_loss))) return rc;
    if (e.has_test && cls && (rc = eng_loop_emit(lp, "test_acc", e.test_acc))) return rc;
    eng_loop_state *S = &lp->S;
    S->final_test_loss = e.test_loss;
    S->final_test_acc = e.test_acc;
    if (cls && !(e.test_acc <= S->best_test_acc)) S->best_test_acc = e.test_acc;
    return 0;
}

/* After step s+1's update: the counts, then what is due at this step. */
static int step_after(eng_loop *lp, double loss, int correct, double dt)
{
    eng_loop_state *S = &lp->S;
    const eng_loop_batch *b = &lp->b;
    const eng_train_config *tc = &lp->env->cfg->train;
    S->step++;
    S->epoch = b->epoch + (b->last_in_epoch ? 1 : 0);
    S->train_time += dt;
    S->epoch_train_time += dt;
    S->total_rows += b->rows;
    S->epoch_rows += b->rows;
    S->int_loss += loss * b->rows;
    S->int_rows += b->rows;
    S->int_correct += correct;
    int last = S->step == lp->env->total_steps, rc;
    if (S->step % tc->log_every == 0 || last) {
        if ((rc = log_interval(lp, 1))) return rc;
        double l = S->int_loss / S->int_rows;
        track_loss(lp, l);
        double target = lp->env->cfg->target_loss;
        if (target > 0 && S->steps_to_target < 0 && l <= target) {
            S->steps_to_target = S->step;
            S->wall_to_target = wall_of(lp);
            S->hybrid_to_target = S->wall_to_target + S->hybrid_extra;
        }
        S->int_loss = S->int_rows = S->int_correct = 0;
    }
    if (lp->task->can_eval && ((tc->eval_every > 0 && S->step % tc->eval_every == 0) ||
                               (tc->eval_every == 0 && b->last_in_epoch) || last) && (rc = evaluate(lp)))
        return rc;
    if (b->last_in_epoch) {
        if (S->epoch_train_time > 0 && (rc = eng_loop_emit(lp, "samples_per_s", S->epoch_rows / S->epoch_train_time)))
            return rc;
        if ((rc = emit_extra(lp, ENG_LOOP_AT_EPOCH))) return rc;
        S->epoch_rows = 0;
        S->epoch_train_time = 0;
    }
    if (((tc->checkpoint_every > 0 && S->step % tc->checkpoint_every == 0) ||
         (tc->checkpoint_every == 0 && b->last_in_epoch) || last) && (rc = take_checkpoint(lp)))
        return rc;
    return 0;
}

/* Progress and live op rows, between steps (no scope is open: the profiler can be read). */
static void between_steps(eng_loop *lp, double loss)
{
    const eng_sink *s = lp->sink;
    const eng_loop_state *S = &lp->S;
    if (!s) return;
    if (s->progress)
        s->progress(s->ud, S->step, lp->env->total_steps, lp->epoch, loss,
                    S->train_time > 0 ? S->total_rows / S->train_time : 0);
    prof_t *p = lp->env->prof;
    if (!p || !s->ops_live || s->ops_live_every_s <= 0) return;
    double t = prof_now_s();
    if (t - lp->ops_live_t < s->ops_live_every_s) return;
    prof_row *rows;
    size_t nrows;
    if (!prof_rows(p, PROF_BY_SCOPE, &rows, &nrows)) {
        s->ops_live(s->ud, rows, nrows);
        free(rows);
    }
    lp->ops_live_t = t;
}

/* Before step 1 (after run_begin): the clock, the ranks' agreement, the extra slot's
 * figures (not again on a resume: they are stored at step 0). */
static int loop_begin(eng_loop *lp, const eng_loop_state *state)
{
    lp->t0 = prof_now_s() - (state ? state->wall : 0);
    /* Data-parallel: every rank starts its first step together, having agreed that all of
     * them set up the same config (a rank that could not gives its reason here, so the
     * stored run has it), and the profiler marks that instant so that the ranks' traces
     * line up when joined. */
    if (eng_dist_world() > 1) {
        int rc = eng_dist_agree(lp->env->cfg, NULL);
        if (rc) return fail(lp, ENG_RUN_FAILED, rc, "before the first step: %s", eng_error());
        if (lp->env->prof) prof_clock_sync(lp->env->prof);
    }
    return state ? 0 : emit_extra(lp, ENG_LOOP_AT_BEGIN);
}

/* The result from the state and the clocks, once, before run_end. */
static void loop_result(eng_loop *lp, int rc)
{
    eng_run_result *res = lp->res;
    const eng_loop_state *S = &lp->S;
    double wall = wall_of(lp);
    if (rc == ENG_ESINK || (rc && res->status == ENG_RUN_RUNNING)) fail(lp, ENG_RUN_FAILED, rc, "%s", eng_error());
    /* Steps of an unfinished logging interval still count for the final loss. */
    if (S->int_rows > 0 && rc != ENG_ESINK) {
        log_interval(lp, 0);
        track_loss(lp, S->int_loss / S->int_rows);
    }
    if (res->status == ENG_RUN_RUNNING) res->status = ENG_RUN_FINISHED;
    res->steps = S->step;
    res->epochs = S->epoch;
    res->final_train_loss = S->final_train_loss;
    res->best_train_loss = S->best_train_loss;
    res->final_test_loss = S->final_test_loss;
    res->final_test_acc = S->final_test_acc;
    res->best_test_acc = S->best_test_acc;
    res->steps_to_target = S->steps_to_target;
    res->wall_to_target = S->wall_to_target;
    res->hybrid_to_target = S->hybrid_to_target;
    res->wall_s = wall;
    res->hybrid_s = wall + S->hybrid_extra;
    res->samples_per_s = S->train_time > 0 ? S->total_rows / S->train_time : 0;
    res->pool.steps = S->pool_steps;
    res->pool.step_s = S->pool_step_s;
    res->pool.joins = S->pool_joins;
    res->pool.wait_s = S->pool_wait_s;
    res->peak_bytes = prof_mem_peak();
    res->peak_rss = prof_peak_rss();
    res->gemm_unprepared_calls = eng_gemm_unprepared_calls() - lp->unprepared0;
    if (lp->sl->update->finish) lp->sl->update->finish(lp->sl->update->ud, res);
}

/* A step of dt seconds, begun when eng_pool_join_stats said joins, waited: its share of
 * the pool figures (the steps' own; the test set's evaluation runs outside them), kept in
 * the state so that a checkpoint carries them. */
static void count_pool(eng_loop_state *S, double dt, long joins, double waited)
{
    long j;
    double w;
    eng_pool_join_stats(&j, &w);
    S->pool_steps++;
    S->pool_step_s += dt;
    S->pool_joins += j - joins;
    S->pool_wait_s += w - waited;
}

int eng_loop_run(const eng_loop_env *env, const eng_loop_task *task, const eng_loop_slots *slots,
                 const eng_loop_state *state, const eng_sink *sink, eng_run_result *res)
{
    eng_loop lp = { .env = env, .task = task, .sl = slots, .sink = sink, .res = res, .ckpt_step = -1 };
    *res = (eng_run_result){ .status = ENG_RUN_RUNNING, .final_train_loss = NAN, .best_train_loss = NAN,
                             .final_test_loss = NAN, .final_test_acc = NAN, .best_test_acc = NAN,
                             .steps_to_target = -1, .wall_to_target = NAN, .hybrid_to_target = NAN,
                             .kappa_first = NAN, .kappa_last = NAN };
    if (state) {
        lp.S = *state;
        lp.epoch = state->epoch;
        lp.ckpt_step = state->step;
    } else {
        lp.S = (eng_loop_state){ .last_lr = env->cfg->train.lr, .final_train_loss = NAN, .best_train_loss = NAN,
                                 .final_test_loss = NAN, .final_test_acc = NAN, .best_test_acc = NAN,
                                 .steps_to_target = -1, .wall_to_target = NAN, .hybrid_to_target = NAN };
    }
    lp.ops_live_t = prof_now_s();
    lp.unprepared0 = eng_gemm_unprepared_calls();
    eng_run_info info = *env->info;
    if (state) {
        info.resumed_step = state->step;
        info.resumed_partial = state->int_rows > 0;
    }
    if (sink && sink->run_begin && sink->run_begin(sink->ud, &info)) {
        /* nothing was begun: only run_end follows */
        res->error = env->err;
        fail(&lp, ENG_RUN_FAILED, ENG_ESINK, "%s", eng_error());
        if (sink->run_end) sink->run_end(sink->ud, res);
        return eng_fail(ENG_ESINK, "%s", env->err);
    }
    int rc = loop_begin(&lp, state);
    prof_t *p = env->prof;
    for (long s = lp.S.step; s < env->total_steps && !rc; s++) {
        if (!slots->reduce && atomic_load(env->stop)) {  /* data-parallel: agreed in the reduce */
            /* keep what was trained: resume continues from here */
            if (s > 0 && (rc = take_checkpoint(&lp))) break;
            rc = interrupted(&lp, s);
            break;
        }
        double ts = prof_now_s(), loss = 0;
        int correct = 0;
        if (p) prof_step(p, s + 1);
        long joins;
        double waited;
        eng_pool_join_stats(&joins, &waited);
        PROF_BEGIN(p, env->ph[ENG_PH_STEP]);
        rc = step_compute(&lp, s, &loss, &correct);
        PROF_END(p, env->ph[ENG_PH_STEP], 0, 0);
        double dt = prof_now_s() - ts;
        count_pool(&lp.S, dt, joins, waited);
        if (p && dt > 0) {   /* nothing unless the trace's step window is open */
            prof_counter(p, env->track_step, dt * 1e3);
            prof_counter(p, env->track_sps, (double)lp.b.rows / dt);
        }
        if (rc || (rc = step_after(&lp, loss, correct, dt))) break;
        between_steps(&lp, loss);
    }
    loop_result(&lp, rc);
    res->error = res->status == ENG_RUN_FINISHED ? NULL : env->err;
    if (rc != ENG_ESINK && eng_sink_op_stats(p, sink) && rc == ENG_OK) {
        rc = fail(&lp, ENG_RUN_FAILED, ENG_ESINK, "%s", eng_error());
        res->error = env->err;
    }
    if (sink && sink->run_end) sink->run_end(sink->ud, res);
    if (rc == ENG_OK) return ENG_OK;
    /* Leave the run's own message for the caller (eng_error()). */
    return eng_fail(rc, "%s", env->err);
}

/* ---- the slots every task can use ------------------------------------------------------ */

/* The fused update (loop.h): the element update is the same per element whatever the
 * order, so a step updated in slices during backward has the bits of one updated after. */
static void optim_begin(void *ud, double lr)
{
    eng_loop_optim *o = ud;
    eng_optim_step_begin(o->opt, o->params, o->grads, lr);
    o->fused_lo = o->n;
}

/* Gradients [from, n) are final, and backward reads no parameter among them again (each
 * node reads only its own parameters, whose gradients it writes): update the new part. */
static void optim_ready(void *ud, size_t from)
{
    eng_loop_optim *o = ud;
    if (from >= o->fused_lo) return;
    eng_optim_step_range(o->opt, from, o->fused_lo);
    o->fused_lo = from;
}

static int optim_step(void *ud, eng_loop *lp, long s, double lr, double *hybrid_extra)
{
    eng_loop_optim *o = ud;
    if (o->fused_lo <= o->n) eng_optim_step_range(o->opt, 0, o->fused_lo); /* what backward did not reach */
    else eng_optim_step(o->opt, o->params, o->grads, lr);
    o->fused_lo = o->n + 1;
    return ENG_OK;
}

eng_loop_update eng_loop_optim_slot(eng_loop_optim *o)
{
    o->fused_lo = o->n + 1;
    return (eng_loop_update){ .ud = o, .step = optim_step, .begin = optim_begin, .ready = optim_ready };
}

static void grad_apply(void *ud)
{
    eng_loop_grad *g = ud;
    eng_grad_apply(g->grad, g->to);
}
eng_loop_transform eng_loop_grad_slot(eng_loop_grad *g) { return (eng_loop_transform){ .ud = g, .apply = grad_apply }; }

static void telem_before(void *ud) { eng_telem_before(ud); }
static void telem_after(void *ud) { eng_telem_after(ud); }
static void telem_record(void *ud, eng_telemetry *rec) { eng_telem_record(ud, rec); }
eng_loop_telemetry eng_loop_telem_slot(eng_telem *t)
{
    return (eng_loop_telemetry){ .ud = t, .before = telem_before, .after = telem_after, .record = telem_record };
}

int eng_loop_record_init(eng_loop_record *rec, const eng_ckpt *view)
{
    rec->view = *view;
    rec->len = eng_ckpt_size(view);
    if (!(rec->buf = prof_malloc(rec->len)))
        return eng_fail(ENG_ENOMEM, "run: out of memory for a checkpoint of %zu bytes", rec->len);
    /* Paged in now, with the run's other buffers: left to the first checkpoint, its page
     * faults (one per 4 KiB, ~460 for the Fashion MLP's 1.8 MB) cost more than writing the
     * record, in the middle of training. */
    memset(rec->buf, 0, rec->len);
    return ENG_OK;
}

void eng_loop_record_free(eng_loop_record *rec)
{
    prof_free(rec->buf);
    rec->buf = NULL;
}

static int record_write(void *ud, const eng_loop_state *L, const void **data, size_t *len)
{
    eng_loop_record *rec = ud;
    rec->view.loop = *L;
    *len = eng_ckpt_write(&rec->view, rec->buf, rec->len);
    *data = rec->buf;
    return ENG_OK;
}

eng_loop_checkpoint eng_loop_record_slot(eng_loop_record *rec)
{
    return (eng_loop_checkpoint){ .ud = rec, .write = record_write };
}
