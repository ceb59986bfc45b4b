/* loop.h — the one training loop (loop.c): a task says what one step computes, named slots
 * change the computation at fixed places, and the loop does the rest (phases, metrics,
 * evaluation, checkpoints, the result, the sink protocol). eng_run_train sets it up for a
 * dense model (train.c) or a graph (graph/gnn.c gives the task).
 *
 * One step, in this order (a NULL slot is skipped):
 *
 *   task.next → task.forward → task.backward → reduce → telemetry.before →
 *   transforms → update → telemetry.after → (log: metrics, extra.at_log, telemetry record)
 *   → task.evaluate → (epoch end: extra.at_epoch) → checkpoint → progress
 *
 * The slots change what is computed (an all-reduce before a clip is not a clip before an
 * all-reduce), so their order is the loop's, not a hook list's. */
#ifndef ENG_LOOP_H
#define ENG_LOOP_H

#include <stdatomic.h>

#include "internal.h"

/* One step's batch, as the task made it. */
typedef struct {
    int rows;                   /* rows this process trains on (0: a rank's empty share) */
    int global_rows;            /* rows of the whole batch over the ranks (= rows alone) */
    int epoch;                  /* the epoch this batch belongs to (0-based) */
    int last_in_epoch;
    void *data;                 /* the task's own batch (eng_batch for a dense model) */
} eng_loop_batch;

/* One evaluation: what the task measured (NAN where it has no such split). */
typedef struct {
    double test_loss, test_acc, val_acc;
    int has_test, has_val;
} eng_loop_eval;

/* What is trained. Every function gets `self`. */
typedef struct {
    void *self;
    int classification;         /* accuracy metrics are emitted */
    int can_eval;               /* it has something to evaluate on */
    /* The batch of step s (0-based); *bytes: what the data phase moved (profiler). */
    int (*next)(void *self, long s, eng_loop_batch *b, uint64_t *bytes);
    /* Mean loss over the batch's rows; *correct: rows classified right. */
    double (*forward)(void *self, eng_loop_batch *b, int *correct);
    /* Gradients of the last forward into the task's gradient buffer. With a reduce slot,
     * weighted by w and calling ready(ud, ...) as layers' gradients complete. */
    void (*backward)(void *self, eng_loop_batch *b, float w, eng_grads_ready ready, void *ud);
    void (*evaluate)(void *self, eng_loop_eval *e);
} eng_loop_task;

typedef struct eng_loop eng_loop;

/* The slots. Each is a struct with its own ud; NULL = not in this run. */
typedef struct {
    void *ud;
    void (*begin)(void *ud);                            /* before backward */
    eng_grads_ready ready;                              /* handed to the task's backward */
    void *ready_ud;                                     /* ready's first argument */
    /* After backward: sums gradients, loss and correct over the ranks; sets *stop when a
     * rank asked to stop (then the step ends interrupted). */
    int (*reduce)(void *ud, double *loss, int *correct, eng_loop_batch *b, int *stop);
} eng_loop_reduce;

typedef struct {
    void *ud;
    void (*apply)(void *ud);                            /* the gradient transforms, in order */
} eng_loop_transform;

typedef struct {
    void *ud;
    void (*before)(void *ud);                           /* raw gradient, parameters before */
    void (*after)(void *ud);                            /* after the update */
    void (*record)(void *ud, eng_telemetry *rec);       /* the log step's values */
} eng_loop_telemetry;

typedef struct {
    void *ud;
    /* Step s+1 (1-based) with learning rate lr; *hybrid_extra: Q-Newton clock excess. */
    int (*step)(void *ud, eng_loop *lp, long s, double lr, double *hybrid_extra);
    void (*finish)(void *ud, eng_run_result *res);      /* may be NULL */
    /* Optional (NULL: not offered): the update fused into backward. When nothing between
     * backward and the update needs the gradient of the step (no reduce, no transforms, no
     * telemetry at this step), the loop calls begin(ud, lr) before backward and hands
     * ready to the task's backward, which calls it as layers' gradients complete (a
     * task may ignore it); step then updates only what ready did not reach. */
    void (*begin)(void *ud, double lr);
    eng_grads_ready ready;
} eng_loop_update;

typedef struct {
    void *ud;
    /* The record of parameters, optimizer state and L into *data (owned by ud). */
    int (*write)(void *ud, const eng_loop_state *L, const void **data, size_t *len);
} eng_loop_checkpoint;

enum { ENG_LOOP_AT_BEGIN, ENG_LOOP_AT_LOG, ENG_LOOP_AT_EPOCH };
typedef struct {
    void *ud;
    /* Metrics of the task or a slot beyond the loop's own: once before step 1, on every
     * log step, at every epoch end. emit(lp, key, value) sends one. */
    int (*emit)(void *ud, eng_loop *lp, int when);
} eng_loop_metrics;

typedef struct {
    const eng_loop_reduce *reduce;
    const eng_loop_transform *transforms;
    const eng_loop_telemetry *telemetry;
    const eng_loop_update *update;
    const eng_loop_checkpoint *checkpoint;
    const eng_loop_metrics *extra;
} eng_loop_slots;

enum { ENG_PH_DATA, ENG_PH_FORWARD, ENG_PH_BACKWARD, ENG_PH_OPTIMIZER, ENG_PH_EVAL, ENG_PH_STEP,
       ENG_PH_CHECKPOINT, ENG_N_PHASES };

/* The run around the loop: its config, profiler scopes (-1 when off), stop flag, and the
 * buffers the loop's messages go to. */
typedef struct {
    const eng_config *cfg;
    prof_t *prof;
    int ph[ENG_N_PHASES];
    int track_step, track_sps;  /* the trace's step time and samples/s counters (-1: none) */
    long total_steps;
    atomic_int *stop;
    const eng_run_info *info;   /* for run_begin; resumed_* are filled from the state */
    char *err;
    size_t errcap;
} eng_loop_env;

/* Registers the loop's phase scopes in env->ph (all -1 without a profiler). */
int eng_loop_phases(prof_t *prof, int ph[ENG_N_PHASES]);

/* Trains env->total_steps steps from `state` (NULL: from step 0; else a checkpoint's loop
 * state, restored as it is). Fills *res and follows the sink protocol (run_begin, metrics,
 * telemetry, checkpoints, progress, op_stats, run_end). Returns ENG_OK or the error. */
int eng_loop_run(const eng_loop_env *env, const eng_loop_task *task, const eng_loop_slots *slots,
                 const eng_loop_state *state, const eng_sink *sink, eng_run_result *res);

/* A run whose set-up failed after create (before run_begin: no sink call): failed, with
 * eng_error() as its message. Returns rc. */
int eng_loop_refuse(const eng_loop_env *env, eng_run_result *res, int rc);

/* From a slot: one metric at the current step; the batch of the step; the sink. */
int eng_loop_emit(eng_loop *lp, const char *key, double value);
const eng_loop_batch *eng_loop_current(const eng_loop *lp);
const eng_sink *eng_loop_sink(const eng_loop *lp);

/* ---- the slots every task can use (loop.c) ---- */

/* update: a first-order optimizer over one parameter and one gradient buffer. */
typedef struct {
    eng_optim *opt;
    float *params;
    const float *grads;
    size_t n;                   /* parameters (the fused update's extent) */
    size_t fused_lo;            /* fused step under way: [fused_lo, n) is updated; else n + 1 */
} eng_loop_optim;
eng_loop_update eng_loop_optim_slot(eng_loop_optim *o);
/* transforms: train.gradient, the last transform's maps handed to the update's optimizer
 * `to` (eng_grad_apply; NULL: applied in place); telemetry: train.telemetry. */
typedef struct {
    eng_grad *grad;
    eng_optim *to;
} eng_loop_grad;
eng_loop_transform eng_loop_grad_slot(eng_loop_grad *g);
eng_loop_telemetry eng_loop_telem_slot(eng_telem *t);
/* checkpoint: the record of view (identity and arrays) with the loop state, into one
 * buffer allocated and paged in at init (no allocation or first-touch page fault in the
 * loop). Free with eng_loop_record_free. */
typedef struct {
    eng_ckpt view;
    void *buf;
    size_t len;
} eng_loop_record;
int eng_loop_record_init(eng_loop_record *rec, const eng_ckpt *view);
void eng_loop_record_free(eng_loop_record *rec);
eng_loop_checkpoint eng_loop_record_slot(eng_loop_record *rec);

/* Hands the profiler's rows to the sink's op_stats, once per run before run_end. */
int eng_sink_op_stats(prof_t *p, const eng_sink *sink);

#endif
