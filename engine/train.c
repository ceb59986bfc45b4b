/* train.c — one run: data, model and optimizer from a config, the training loop with its
 * profiler phases, metrics and the two clocks (wall, hybrid), and the run result. */
#include "engine.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/data_internal.h"
#include "graph/graph.h"
#include "dist.h"
#include "internal.h"
#include "newton.h"

enum { PH_DATA, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_EVAL, PH_STEP, PH_CHECKPOINT, N_PHASES };
static const char *const phase_names[N_PHASES] = { "data", "forward", "backward", "optimizer", "eval", "step",
                                                   "checkpoint" };

struct eng_run {
    eng_config cfg;               /* a copy; kv copied too, so the run owns what it reports */
    char *text;
    eng_dataset *ds;
    eng_model *m;
    eng_optim *opt;
    eng_newton *nt;
    eng_grad *grad;               /* NULL when no gradient transform is configured */
    eng_telem *telem;             /* NULL unless train.telemetry */
    eng_batcher *b;
    eng_gnn *gnn;                 /* data.source = graph: the graph run does the work (gnn.c) */
    eng_dist *dist;               /* under mpirun with N > 1 ranks, else NULL */
    prof_t *prof;
    int ph[N_PHASES];             /* profiler scope ids, -1 when off */
    int wait_scope, gather_scope; /* the batcher's data.wait / data.gather scopes, -1 when off */
    int batch, bpe, threads, n_out;
    long total_steps;
    atomic_int stop;
    int trained;
    void *ckpt_buf;               /* one checkpoint record, allocated at create (not newton) */
    size_t ckpt_len;
    int resumed;                  /* eng_run_resume ran: start from `resume` */
    eng_loop_state resume;
    eng_run_result res;
    char err[512];
    char data_fp[ENG_DATA_FP_MAX];  /* eng_data_fingerprint of ds ("" for graph data) */
    char data_note[1400];            /* eng_data_cache_damage at load, "" when none */
    char gemm[256], gemm_classes[1024]; /* what serves the model's GEMMs (eng_gemm_describe) */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void eng_run_destroy(eng_run *r)
{
    if (!r) return;
    eng_batcher_destroy(r->b);
    eng_gnn_free(r->gnn);
    eng_dist_free(r->dist);
    prof_free(r->ckpt_buf);
    if (r->nt) eng_newton_free(r->nt);
    eng_grad_free(r->grad);
    eng_telem_free(r->telem);
    eng_optim_free(r->opt);
    eng_model_free(r->m);
    eng_data_free(r->ds);
    prof_free(r->cfg.kv);
    prof_free(r->text);
    prof_free(r);
}

/* Labels are class indices, so one bad label (200 among 0..9) makes "201 classes". When
 * the labels past the model's last layer are a few scattered values, not most of the
 * classes up to the largest, the largest is a bad label: name it and where it is, rather
 * than suggest a 201-way output layer. */
static int check_labels(const eng_config *cfg, const eng_dataset *ds)
{
    const eng_model_config *mc = &cfg->model;
    if (!ds->classification || !mc->n_layers || mc->layers[mc->n_layers - 1].kind != ENG_LAYER_DENSE) return ENG_OK;
    int k = mc->layers[mc->n_layers - 1].units;
    if (k < 2 || k >= ds->n_classes) return ENG_OK;
    unsigned char *seen = calloc((size_t)ds->n_classes, 1);
    if (!seen) return eng_fail(ENG_ENOMEM, "run: out of memory");
    int distinct = 0, beyond = 0;
    for (int part = 0; part < 2; part++) {
        const int32_t *y = part ? ds->y_test : ds->y_train;
        int n = part ? ds->n_test : ds->n_train;
        for (int i = 0; y && i < n; i++)
            if (y[i] >= 0 && y[i] < ds->n_classes && !seen[y[i]]) { seen[y[i]] = 1; distinct++; beyond += y[i] >= k; }
    }
    free(seen);
    /* Labels past the layer's outputs that fill most of the classes up to the largest:
     * really more classes than outputs, and the model's own message says so. */
    if (2 * beyond >= ds->n_classes - k) return ENG_OK;
    return eng_fail(ENG_EFORMAT, "%s: label %d (at %s) is outside the %d classes the model's last layer "
                    "(dense:%d) gives; the data uses %d distinct labels: fix that label (class indices are "
                    "0..%d), or if the classes really go up to %d, end the layers with dense:%d",
                    ds->name, ds->n_classes - 1, ds->label_max_at[0] ? ds->label_max_at : "?", k, k, distinct,
                    k - 1, ds->n_classes - 1, ds->n_classes);
}

/* The batcher with the input pipeline's options; its waits (throttled reads, waits for
 * the prefetch thread) and its own copies are the data phase's data.wait and data.gather. */
static int create_batcher(eng_run *r, long start)
{
    const eng_data_config *dc = &r->cfg.data;
    eng_batcher_options o = { .shuffle = dc->shuffle, .prefetch = dc->prefetch,
                              .depth = dc->prefetch_depth > 0 ? dc->prefetch_depth : 1,
                              .read_mbps = dc->read_mbps, .read_latency_ms = dc->read_latency_ms,
                              .prof = r->prof, .wait_scope = -1, .gather_scope = -1,
                              .shard_rank = eng_dist_rank(), .shard_size = eng_dist_world(),
                              .start = start };
    char why[256];
    if (eng_augment_parse(dc->augment, &o.augment, why, sizeof why))
        return eng_fail(ENG_EINVAL, "%s: data.augment: %s", r->cfg.path, why);
    if (r->prof && r->wait_scope < 0) {  /* once per run: a resume makes a second batcher */
        r->wait_scope = prof_register(r->prof, "data.wait", NULL, PROF_PHASE);
        r->gather_scope = prof_register(r->prof, "data.gather", NULL, PROF_PHASE);
        if (r->wait_scope < 0 || r->gather_scope < 0)
            return eng_fail(ENG_EINVAL, "run: the profiler's scope table is full (%s)", prof_error());
    }
    o.wait_scope = r->wait_scope;
    o.gather_scope = r->gather_scope;
    return eng_batcher_create_opts(r->ds, r->batch, &o, r->cfg.seed, &r->b);
}

/* Data-parallel (mpirun, N > 1): the all-reduce state, and the world size among the run's
 * resolved keys (dist.world_size, stored with them; absent = 1 process). */
static int create_dist(eng_run *r)
{
    if (r->cfg.train.optimizer == ENG_OPT_NEWTON)
        return eng_fail(ENG_EINVAL, "%s: train.optimizer = newton does not run data-parallel; run it without mpirun "
                        "(or with -np 1)", r->cfg.path);
    if (r->cfg.dist.bucket_kb > 0 && r->cfg.dist.compress != ENG_COMPRESS_NONE)
        return eng_fail(ENG_EINVAL, "%s: dist.bucket_kb = %d needs dist.compress = none (the compressed collectives "
                        "send the whole gradient at once); set one of them back", r->cfg.path, r->cfg.dist.bucket_kb);
    int rc = eng_dist_create(&r->cfg.dist, eng_model_n_params(r->m), r->prof, &r->stop, &r->dist);
    if (rc) return rc;
    eng_kv *kv = prof_malloc((r->cfg.n_kv + 1) * sizeof *kv);
    if (!kv) return eng_fail(ENG_ENOMEM, "run: out of memory");
    if (r->cfg.n_kv) memcpy(kv, r->cfg.kv, r->cfg.n_kv * sizeof *kv);
    eng_kv *w = &kv[r->cfg.n_kv];
    memset(w, 0, sizeof *w);
    snprintf(w->key, sizeof w->key, "dist.world_size");
    snprintf(w->value, sizeof w->value, "%d", eng_dist_world());
    size_t at = r->cfg.n_kv;                 /* keep the list sorted by key */
    while (at > 0 && strcmp(kv[at - 1].key, w->key) > 0) at--;
    eng_kv tmp = *w;
    memmove(kv + at + 1, kv + at, (r->cfg.n_kv - at) * sizeof *kv);
    kv[at] = tmp;
    prof_free(r->cfg.kv);
    r->cfg.kv = kv;
    r->cfg.n_kv++;
    return ENG_OK;
}

/* The checkpoint's view of this run: identity, and where its arrays live. */
static void ckpt_view(eng_run *r, eng_ckpt *ck)
{
    memset(ck, 0, sizeof *ck);
    ck->seed = r->cfg.seed;
    ck->total_steps = r->total_steps;
    ck->n_params = eng_model_n_params(r->m);
    ck->n_train = r->ds->n_train;
    ck->batch = r->batch;
    ck->optimizer = (int)r->cfg.train.optimizer;
    ck->params = eng_model_params(r->m);
    if (r->opt) eng_optim_state(r->opt, &ck->m, &ck->v, &ck->opt_t);
}

int eng_run_create(const eng_config *cfg, const char *experiment_text, prof_t *prof, eng_run **out)
{
    *out = NULL;
    /* Peak bytes are per run: the dataset, model and workspaces allocated from here on. */
    prof_mem_reset_peak();
    eng_run *r = prof_calloc(1, sizeof *r);
    if (!r) return eng_fail(ENG_ENOMEM, "run: out of memory");
    r->cfg = *cfg;
    r->cfg.kv = NULL;
    if (cfg->n_kv) {
        r->cfg.kv = prof_malloc(cfg->n_kv * sizeof *cfg->kv);
        if (!r->cfg.kv) { eng_run_destroy(r); return eng_fail(ENG_ENOMEM, "run: out of memory"); }
        memcpy(r->cfg.kv, cfg->kv, cfg->n_kv * sizeof *cfg->kv);
    }
    if (experiment_text) {
        size_t n = strlen(experiment_text) + 1;
        r->text = prof_malloc(n);
        if (!r->text) { eng_run_destroy(r); return eng_fail(ENG_ENOMEM, "run: out of memory"); }
        memcpy(r->text, experiment_text, n);
    }
    r->prof = prof;
    atomic_init(&r->stop, 0);
    for (int i = 0; i < N_PHASES; i++) r->ph[i] = -1;
    r->wait_scope = r->gather_scope = -1;

    const eng_train_config *tc = &r->cfg.train;
    /* OpenBLAS's thread count is process-wide: a variant with threads = 0 gets the count the
     * environment gave, not whatever an earlier variant of the same process set. */
    static int env_threads;
    if (!env_threads) env_threads = openblas_get_num_threads();
    int want = tc->threads > 0 ? tc->threads : env_threads;
    if (openblas_get_num_threads() != want) openblas_set_num_threads(want);
    r->threads = openblas_get_num_threads();

    if (r->cfg.data.source == ENG_DATA_GRAPH) {
        int grc = eng_gnn_create(&r->cfg, prof, &r->gnn);
        if (grc) { eng_run_destroy(r); return grc; }
        *out = r;
        return ENG_OK;
    }
    int rc = eng_data_load(&r->cfg.data, r->cfg.seed, &r->ds);
    if (rc) { eng_run_destroy(r); return rc; }
    const eng_dataset *ds = r->ds;
    eng_data_fingerprint(ds, r->data_fp, sizeof r->data_fp);
    const char *note = eng_data_cache_damage();
    if (note) snprintf(r->data_note, sizeof r->data_note, "%s", note);
    if (r->cfg.model.loss == ENG_LOSS_SOFTMAX_XENT && !ds->classification) {
        eng_fail(ENG_EINVAL, "%s: model.loss = softmax_xent needs a classification dataset, but %s has "
                 "real-valued targets; set loss = mse (or data.regression = false for class labels)",
                 cfg->path, ds->name);
        eng_run_destroy(r);
        return ENG_EINVAL;
    }
    if (ds->n_train < 1) { eng_run_destroy(r); return eng_fail(ENG_EINVAL, "%s: the training set is empty", cfg->path); }
    r->n_out = ds->classification ? ds->n_classes : ds->n_targets;
    r->batch = tc->batch <= 0 || tc->batch > ds->n_train ? ds->n_train : tc->batch;

    if ((rc = check_labels(&r->cfg, ds))) { eng_run_destroy(r); return rc; }
    rc = eng_model_build(&r->cfg.model, ds->in_shape, r->n_out, r->batch, r->cfg.seed, prof, &r->m);
    if (rc == ENG_EINVAL && !strncmp(eng_error(), "model: layer ", 13)) {
        /* a layer that does not fit the data's shape: say which line to change */
        char msg[1024], loc[700];
        snprintf(msg, sizeof msg, "%s", eng_error());
        eng_config_where(&r->cfg, "model.layers", loc, sizeof loc);
        eng_fail(rc, "%s: key 'layers': %s", loc, msg);
    }
    if (rc) { eng_run_destroy(r); return rc; }
    if (tc->optimizer == ENG_OPT_NEWTON) rc = eng_newton_create(&r->cfg, r->m, prof, &r->nt);
    else rc = eng_optim_create(tc, eng_model_n_params(r->m), &r->opt);
    if (rc) { eng_run_destroy(r); return rc; }
    if (tc->n_gradient > 0 && tc->optimizer == ENG_OPT_NEWTON) {
        /* the message first: tc lives in r */
        rc = eng_fail(ENG_EINVAL, "%s: train.gradient = %s: gradient transforms apply to first-order optimizers; "
                      "newton computes its own direction (set gradient = none or another optimizer)",
                      cfg->path, eng_grad_kind_name(tc->gradient[0]));
        eng_run_destroy(r);
        return rc;
    }
    if (tc->n_gradient > 0 && (rc = eng_grad_create(tc, r->m, prof, &r->grad))) { eng_run_destroy(r); return rc; }
    if (tc->telemetry && (rc = eng_telem_create(r->m, prof, &r->telem))) { eng_run_destroy(r); return rc; }
    rc = create_batcher(r, 0);
    if (!rc && eng_dist_world() > 1) rc = create_dist(r);
    if (rc) { eng_run_destroy(r); return rc; }
    r->bpe = eng_batcher_batches_per_epoch(r->b);
    r->total_steps = tc->max_steps > 0 ? tc->max_steps : (long)tc->epochs * r->bpe;
    if (!r->nt) {
        eng_ckpt ck;
        ckpt_view(r, &ck);
        r->ckpt_len = eng_ckpt_size(&ck);
        if (!(r->ckpt_buf = prof_malloc(r->ckpt_len))) {
            eng_run_destroy(r);
            return eng_fail(ENG_ENOMEM, "run: out of memory for a checkpoint of %zu bytes", r->ckpt_len);
        }
    }

    if (prof)
        for (int i = 0; i < N_PHASES; i++) {
            r->ph[i] = prof_register(prof, phase_names[i], NULL, i == PH_STEP ? PROF_STEP : PROF_PHASE);
            if (r->ph[i] < 0) {
                eng_run_destroy(r);
                return eng_fail(ENG_EINVAL, "run: the profiler's scope table is full (%s)", prof_error());
            }
        }
    *out = r;
    return ENG_OK;
}

const eng_run_result *eng_run_result_get(const eng_run *r) { return &r->res; }
eng_model *eng_run_model(eng_run *r) { return r->m; }
const eng_dataset *eng_run_dataset(const eng_run *r) { return r->ds; }
const char *eng_run_data_fingerprint(const eng_run *r) { return r->data_fp; }
const char *eng_run_data_note(const eng_run *r) { return r->data_note[0] ? r->data_note : NULL; }

int eng_run_resume(eng_run *r, const void *data, size_t len)
{
    if (r->trained) return eng_fail(ENG_EINVAL, "resume: the run has already trained");
    if (r->nt) return eng_fail(ENG_EINVAL, "resume: newton runs write no checkpoints (their solver state is not serialised)");
    eng_ckpt ck;
    ckpt_view(r, &ck);
    int rc = eng_ckpt_read(&ck, data, len, 0);
    if (rc) return rc;
    if (ck.loop.step < 0 || ck.loop.step > r->total_steps)
        return eng_fail(ENG_EFORMAT, "checkpoint: step %ld is outside this run's 0..%ld", ck.loop.step, r->total_steps);
    /* The batch order of an uninterrupted run from the checkpoint's step on. */
    eng_batcher_destroy(r->b);
    r->b = NULL;
    rc = create_batcher(r, ck.loop.step);
    if (rc) return rc;
    r->resume = ck.loop;
    r->resumed = 1;
    return ENG_OK;
}

int eng_run_load_params(eng_run *r, const void *data, size_t len)
{
    eng_ckpt ck;
    ckpt_view(r, &ck);
    return eng_ckpt_read(&ck, data, len, 1);
}

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

void eng_run_request_stop(eng_run *r)
{
    if (r) atomic_store(&r->stop, 1);
}

/* Mean loss and accuracy over the test set, in chunks of the model's batch size. */
static void evaluate(eng_run *r, double *loss, double *acc);
int eng_run_evaluate(eng_run *r, double *loss, double *acc)
{
    if (r->ds->n_test < 1) return eng_fail(ENG_EINVAL, "evaluate: the run's data has no test set");
    evaluate(r, loss, acc);
    return isfinite(*loss) ? ENG_OK : eng_fail(ENG_EDIVERGED, "evaluate: the test loss is not finite");
}

static void evaluate(eng_run *r, double *loss, double *acc)
{
    const eng_dataset *ds = r->ds;
    double sum = 0;
    long correct = 0;
    int nt = ds->n_targets > 0 ? ds->n_targets : 1;
    for (int i = 0; i < ds->n_test; i += r->batch) {
        int rows = ds->n_test - i < r->batch ? ds->n_test - i : r->batch;
        int c = 0;
        double l = eng_model_forward(r->m, ds->x_test + (size_t)i * ds->in_size, rows,
                                     ds->y_test ? ds->y_test + i : NULL,
                                     ds->t_test ? ds->t_test + (size_t)i * nt : NULL,
                                     ds->classification ? &c : NULL);
        sum += l * rows;
        correct += c;
    }
    *loss = sum / ds->n_test;
    *acc = ds->classification ? (double)correct / ds->n_test : NAN;
}

/* Bytes the "data" phase moved for batch b: the rows copied into the batch buffer (inputs
 * and labels or targets; the copy's size, not read + write). 0 when the batch is the
 * stored set served in place (full batch). With prefetch only the rows this thread copied
 * itself count (caller_rows: those the prefetch thread had not got to); the others were
 * copied on the prefetch thread, outside this phase. */
static uint64_t gather_bytes(const eng_run *r, const eng_batch *b, long caller_rows)
{
    const eng_dataset *ds = r->ds;
    if (b->x == ds->x_train) return 0;
    size_t per_row = ds->in_size * sizeof(float) +
                     (ds->classification ? sizeof(int32_t) : (size_t)ds->n_targets * sizeof(float));
    return (uint64_t)(r->cfg.data.prefetch ? caller_rows : b->rows) * per_row;
}

/* Marks the run diverged at step index s (0-based) with a non-finite loss. */
static int diverged(eng_run *r, eng_run_result *res, long s, double loss)
{
    res->status = ENG_RUN_DIVERGED;
    snprintf(r->err, sizeof r->err, "diverged at step %ld: loss is %s", s + 1, isnan(loss) ? "nan" : "inf");
    return ENG_EDIVERGED;
}

typedef struct {
    eng_run *r;
    const eng_sink *sink;
    double t0, hybrid_extra;
    long step;
    int epoch;
    long ckpt_step;       /* step of the last checkpoint taken (-1: none) */
} loop_ctx;

/* Serialises L (the loop state after step L->step) with the parameters and optimizer state
 * and hands the record to the sink. */
static int take_checkpoint(loop_ctx *c, const eng_loop_state *L)
{
    eng_run *r = c->r;
    if (!r->ckpt_buf || !c->sink || !c->sink->checkpoint || c->ckpt_step == L->step) return 0;
    double t = now_s();
    PROF_BEGIN(r->prof, r->ph[PH_CHECKPOINT]);
    eng_ckpt ck;
    ckpt_view(r, &ck);
    ck.loop = *L;
    size_t n = eng_ckpt_write(&ck, r->ckpt_buf, r->ckpt_len);
    eng_checkpoint e = { .step = L->step, .epoch = L->epoch, .data = r->ckpt_buf, .len = n };
    int rc = c->sink->checkpoint(c->sink->ud, &e);
    PROF_END(r->prof, r->ph[PH_CHECKPOINT], 0, n);
    r->res.checkpoint_s += now_s() - t;
    r->res.checkpoints++;
    r->res.checkpoint_bytes = n;
    c->ckpt_step = L->step;
    return rc ? ENG_ESINK : 0;
}

static int emit(loop_ctx *c, const char *key, double value, double wall)
{
    if (!c->sink || !c->sink->metric) return 0;
    eng_metric m = { .step = c->step, .epoch = c->epoch, .wall_s = wall,
                     .hybrid_s = wall + c->hybrid_extra, .key = key, .value = value };
    /* Any non-zero answer is a sink failure; its message is already in eng_error(). */
    return c->sink->metric(c->sink->ud, &m) ? ENG_ESINK : 0;
}

/* dist.balance = measured: each rank's share of the global batch, as batch_share/rankR. */
static int emit_shares(const eng_run *r, loop_ctx *c, double wall)
{
    if (!r->dist || r->cfg.dist.balance != ENG_BALANCE_MEASURED) return 0;
    const double *cuts = eng_dist_cuts(r->dist);
    for (int k = 0; k < eng_dist_world(); k++) {
        char key[32];
        snprintf(key, sizeof key, "batch_share/rank%d", k);
        int rc = emit(c, key, cuts[k + 1] - cuts[k], wall);
        if (rc) return rc;
    }
    return 0;
}

/* Chooses the GEMM backend of every shape class the model issues: training batches, the
 * last short batch and the test chunks. */
static int prepare_gemm(eng_run *r)
{
    eng_gemm_shape sh[4 * ENG_MAX_NODES * ENG_OP_MAX_GEMMS];
    const eng_dataset *ds = r->ds;
    /* rows of the calls and how many of them an epoch makes (evaluation included) */
    int rows[3] = { r->batch, ds->n_train % r->batch, ds->n_test % r->batch };
    double calls[3] = { (double)(ds->n_train / r->batch) + (double)(ds->n_test / r->batch), 1, 1 };
    int n = 0;
    for (int i = 0; i < 3; i++) {
        if (rows[i] <= 0) continue;
        int k = eng_model_gemm_shapes(r->m, rows[i], sh + n, (int)(sizeof sh / sizeof sh[0]) - n);
        for (int j = n; j < n + k; j++) sh[j].calls = calls[i];
        n += k;
    }
    int rc = eng_gemm_prepare(r->cfg.train.gemm, r->threads, sh, n);
    if (rc) return rc;
    eng_gemm_describe(r->gemm, sizeof r->gemm);
    eng_gemm_describe_classes(r->gemm_classes, sizeof r->gemm_classes);
    return ENG_OK;
}

int eng_run_train(eng_run *r, const eng_sink *sink)
{
    if (r->trained) return eng_fail(ENG_EINVAL, "run: already trained; create a new run");
    r->trained = 1;
    if (r->gnn) {
        return eng_gnn_train(r->gnn, r->text, r->threads, sink, &r->stop, &r->res, r->err, sizeof r->err);
    }
    const eng_config *cfg = &r->cfg;
    const eng_train_config *tc = &cfg->train;
    const eng_dataset *ds = r->ds;
    prof_t *p = r->prof;
    double ops_live_t = now_s();
    eng_run_result *res = &r->res;
    *res = (eng_run_result){ .status = ENG_RUN_RUNNING, .final_train_loss = NAN, .best_train_loss = NAN,
                             .final_test_loss = NAN, .final_test_acc = NAN, .best_test_acc = NAN,
                             .steps_to_target = -1, .wall_to_target = NAN, .hybrid_to_target = NAN,
                             .kappa_first = NAN, .kappa_last = NAN };
    int rc = prepare_gemm(r);
    if (rc) {
        snprintf(r->err, sizeof r->err, "%s", eng_error());
        res->status = ENG_RUN_FAILED;
        res->error = r->err;
        return rc;
    }
    eng_run_info info = { .cfg = cfg, .experiment_text = r->text, .dataset = ds->name,
                          .model_summary = eng_model_summary(r->m), .n_params = eng_model_n_params(r->m),
                          .threads = r->threads, .total_steps = r->total_steps,
                          .n_train = ds->n_train, .n_test = ds->n_test, .gemm = r->gemm,
                          .gemm_classes = r->gemm_classes, .gemm_notes = eng_gemm_notes(),
                          .data_fingerprint = r->data_fp };
    loop_ctx c = { .r = r, .sink = sink, .ckpt_step = -1 };
    const eng_loop_state *R = r->resumed ? &r->resume : NULL;
    if (R) {
        info.resumed_step = R->step;
        info.resumed_partial = R->int_rows > 0;
    }
    if (sink && sink->run_begin && sink->run_begin(sink->ud, &info)) {
        rc = ENG_ESINK;
        snprintf(r->err, sizeof r->err, "%s", eng_error());
        res->status = ENG_RUN_FAILED;
        res->error = r->err;
        if (sink->run_end) sink->run_end(sink->ud, res);
        return rc;
    }

    float *params = eng_model_params(r->m);
    const float *grads = eng_model_grads(r->m);
    double train_time = 0, epoch_train_time = 0;  /* training only: evaluation excluded */
    long total_rows = 0, epoch_rows = 0;
    double int_loss = 0, int_rows = 0, int_correct = 0; /* the current logging interval */
    double last_lr = tc->lr;
    c.t0 = now_s();
    long s0 = 0;
    if (R) {
        s0 = c.step = res->steps = R->step;
        c.epoch = res->epochs = R->epoch;
        c.t0 -= R->wall;
        c.hybrid_extra = R->hybrid_extra;
        c.ckpt_step = R->step;
        train_time = R->train_time; epoch_train_time = R->epoch_train_time;
        total_rows = R->total_rows; epoch_rows = R->epoch_rows;
        int_loss = R->int_loss; int_rows = R->int_rows; int_correct = R->int_correct;
        last_lr = R->last_lr;
        res->final_train_loss = R->final_train_loss; res->best_train_loss = R->best_train_loss;
        res->final_test_loss = R->final_test_loss; res->final_test_acc = R->final_test_acc;
        res->best_test_acc = R->best_test_acc; res->steps_to_target = R->steps_to_target;
        res->wall_to_target = R->wall_to_target; res->hybrid_to_target = R->hybrid_to_target;
    }
    /* The loop state after the step just done, as a checkpoint records it. */
#define LOOP_STATE(L)                                                                                     \
    eng_loop_state L = { .step = c.step, .epoch = res->epochs, .wall = now_s() - c.t0,                   \
                         .hybrid_extra = c.hybrid_extra, .train_time = train_time,                        \
                         .epoch_train_time = epoch_train_time, .total_rows = total_rows,                  \
                         .epoch_rows = epoch_rows, .int_loss = int_loss, .int_rows = int_rows,            \
                         .int_correct = int_correct, .last_lr = last_lr,                                  \
                         .final_train_loss = res->final_train_loss, .best_train_loss = res->best_train_loss, \
                         .final_test_loss = res->final_test_loss, .final_test_acc = res->final_test_acc,  \
                         .best_test_acc = res->best_test_acc, .steps_to_target = res->steps_to_target,    \
                         .wall_to_target = res->wall_to_target, .hybrid_to_target = res->hybrid_to_target }

    /* Data-parallel: every rank starts its first step together, having agreed that all
     * of them set up the same config (a rank that could not gives its reason here, so the
     * stored run has it), and the profiler marks that instant so that the ranks' traces
     * line up when joined. */
    if (r->dist) {
        if ((rc = eng_dist_agree(cfg, NULL))) {
            res->status = ENG_RUN_FAILED;
            snprintf(r->err, sizeof r->err, "before the first step: %s", eng_error());
        }
        if (p) prof_clock_sync(p);
    }
    for (long s = s0; s < r->total_steps && !rc; s++) {
        if (!r->dist && atomic_load(&r->stop)) {  /* data-parallel: agreed after forward */
            if (s > 0) { /* keep what was trained: resume continues from here */
                LOOP_STATE(L);
                if (take_checkpoint(&c, &L)) { rc = ENG_ESINK; break; }
            }
            res->status = ENG_RUN_INTERRUPTED;
            snprintf(r->err, sizeof r->err, "interrupted at step %ld of %ld (stop requested)", s, r->total_steps);
            rc = ENG_ESTOPPED;
            break;
        }
        double ts = now_s();
        if (p) prof_step(p, s + 1);
        PROF_BEGIN(p, r->ph[PH_STEP]);

        eng_batch b;
        long by_thread = 0, caller_before = 0, caller_after = 0;
        if (p && r->cfg.data.prefetch) eng_batcher_gather_counts(r->b, &by_thread, &caller_before);
        PROF_BEGIN(p, r->ph[PH_DATA]);
        rc = eng_batcher_next(r->b, &b);
        if (p && r->cfg.data.prefetch) eng_batcher_gather_counts(r->b, &by_thread, &caller_after);
        PROF_END(p, r->ph[PH_DATA], 0, rc ? 0 : gather_bytes(r, &b, caller_after - caller_before));
        if (rc) {
            PROF_END(p, r->ph[PH_STEP], 0, 0);
            res->status = ENG_RUN_FAILED;
            snprintf(r->err, sizeof r->err, "%s", eng_error());
            break;
        }
        c.epoch = b.epoch;

        int correct = 0;
        PROF_BEGIN(p, r->ph[PH_FORWARD]);
        /* A rank's share of a small last batch may be empty (data-parallel only). */
        double loss = b.rows ? eng_model_forward(r->m, b.x, b.rows, b.y, b.t, ds->classification ? &correct : NULL) : 0;
        PROF_END(p, r->ph[PH_FORWARD], 0, 0);
        /* Data-parallel: the global loss, and so divergence, is known after backward. */
        if (!r->dist && !isfinite(loss)) {
            PROF_END(p, r->ph[PH_STEP], 0, 0);
            rc = diverged(r, res, s, loss);
            break;
        }

        PROF_BEGIN(p, r->ph[PH_BACKWARD]);
        /* Data-parallel: each rank's gradients come out weighted by its share of the
         * global batch, so that their sum (the all-reduce) is the global mean gradient. */
        if (r->dist) eng_dist_backward_begin(r->dist, eng_model_grads(r->m));
        if (b.rows && r->dist) {
            eng_model_backward_weighted(r->m, (float)b.rows / (float)b.global_rows, eng_dist_grads_ready, r->dist);
        } else if (b.rows) {
            eng_model_backward(r->m);
        } else {
            memset(eng_model_grads(r->m), 0, eng_model_n_params(r->m) * sizeof(float));
            /* no rows, but the same bucket collectives as the other ranks */
            if (r->dist) eng_model_grads_ready(r->m, eng_dist_grads_ready, r->dist);
        }
        PROF_END(p, r->ph[PH_BACKWARD], 0, 0);
        if (r->dist) {
            int stop = 0;
            rc = eng_dist_step(r->dist, eng_model_grads(r->m), &loss, &correct, b.rows, b.global_rows, &stop);
            if (!rc && stop) {
                PROF_END(p, r->ph[PH_STEP], 0, 0);
                res->status = ENG_RUN_INTERRUPTED;
                snprintf(r->err, sizeof r->err, "interrupted at step %ld of %ld (stop requested)", s, r->total_steps);
                rc = ENG_ESTOPPED;
                break;
            }
            if (rc) {
                PROF_END(p, r->ph[PH_STEP], 0, 0);
                res->status = ENG_RUN_FAILED;
                snprintf(r->err, sizeof r->err, "step %ld: %s", s + 1, eng_error());
                break;
            }
            if (!isfinite(loss)) {
                PROF_END(p, r->ph[PH_STEP], 0, 0);
                rc = diverged(r, res, s, loss);
                break;
            }
            b.rows = b.global_rows;  /* from here on the step counts the whole batch */
            if (r->cfg.dist.balance == ENG_BALANCE_MEASURED) {
                const double *cuts = eng_dist_cuts(r->dist);
                eng_batcher_set_share(r->b, cuts[eng_dist_rank()], cuts[eng_dist_rank() + 1]);
            }
        }

        double lr = eng_lr_at(tc, s, r->total_steps);
        last_lr = lr;
        /* telemetry sees the raw gradient and the update the optimizer made of it */
        int log_step = (s + 1) % tc->log_every == 0 || s + 1 == r->total_steps;
        if (r->telem && log_step) eng_telem_before(r->telem);
        PROF_BEGIN(p, r->ph[PH_OPTIMIZER]);
        if (r->grad) eng_grad_apply(r->grad);
        if (r->nt) {
            double delta = 0, kappa = NAN;
            rc = eng_newton_step(r->nt, &b, lr, s + 1, sink, &delta, &kappa);
            c.hybrid_extra += delta;
            if (isnan(res->kappa_first)) res->kappa_first = kappa;
            res->kappa_last = kappa;
        } else {
            eng_optim_step(r->opt, params, grads, lr);
        }
        PROF_END(p, r->ph[PH_OPTIMIZER], 0, 0);
        if (r->telem && log_step) eng_telem_after(r->telem);
        PROF_END(p, r->ph[PH_STEP], 0, 0);
        double dt = now_s() - ts;
        if (rc) {
            res->status = ENG_RUN_FAILED;
            snprintf(r->err, sizeof r->err, "step %ld: %s", s + 1, eng_error());
            break;
        }

        c.step = s + 1;
        res->steps = c.step;
        res->epochs = b.epoch + (b.last_in_epoch ? 1 : 0);
        train_time += dt;
        epoch_train_time += dt;
        total_rows += b.rows;
        epoch_rows += b.rows;
        int_loss += loss * b.rows;
        int_rows += b.rows;
        int_correct += correct;
        int last = c.step == r->total_steps;
        double wall = now_s() - c.t0;

        if (c.step % tc->log_every == 0 || last) {
            double l = int_loss / int_rows;
            if ((rc = emit(&c, "train_loss", l, wall))) break;
            if (ds->classification && (rc = emit(&c, "train_acc", int_correct / int_rows, wall))) break;
            if ((rc = emit(&c, "lr", lr, wall))) break;
            if ((rc = emit_shares(r, &c, wall))) break;
            if (r->telem && sink && sink->telemetry) {
                eng_telemetry rec = { .step = c.step, .epoch = c.epoch, .wall_s = wall, .hybrid_s = wall + c.hybrid_extra };
                eng_telem_record(r->telem, &rec);
                if (sink->telemetry(sink->ud, &rec)) { rc = ENG_ESINK; break; }
            }
            res->final_train_loss = l;
            if (!(l >= res->best_train_loss)) res->best_train_loss = l;
            if (cfg->target_loss > 0 && res->steps_to_target < 0 && l <= cfg->target_loss) {
                res->steps_to_target = c.step;
                res->wall_to_target = wall;
                res->hybrid_to_target = wall + c.hybrid_extra;
            }
            int_loss = int_rows = int_correct = 0;
        }
        if (ds->n_test > 0 && ((tc->eval_every > 0 && c.step % tc->eval_every == 0) ||
                               (tc->eval_every == 0 && b.last_in_epoch) || last)) {
            double tl, ta;
            PROF_BEGIN(p, r->ph[PH_EVAL]);
            evaluate(r, &tl, &ta);
            PROF_END(p, r->ph[PH_EVAL], 0, 0);
            wall = now_s() - c.t0;
            if ((rc = emit(&c, "test_loss", tl, wall))) break;
            if (ds->classification && (rc = emit(&c, "test_acc", ta, wall))) break;
            res->final_test_loss = tl;
            res->final_test_acc = ta;
            if (ds->classification && !(ta <= res->best_test_acc)) res->best_test_acc = ta;
        }
        if (b.last_in_epoch) {
            if (epoch_train_time > 0 && (rc = emit(&c, "samples_per_s", epoch_rows / epoch_train_time, wall))) break;
            epoch_rows = 0;
            epoch_train_time = 0;
        }
        if ((tc->checkpoint_every > 0 && c.step % tc->checkpoint_every == 0) ||
            (tc->checkpoint_every == 0 && b.last_in_epoch) || last) {
            LOOP_STATE(L);
            if ((rc = take_checkpoint(&c, &L))) break;
        }
        if (sink && sink->progress)
            sink->progress(sink->ud, c.step, r->total_steps, c.epoch, loss,
                           train_time > 0 ? total_rows / train_time : 0);
        /* Live op rows: between steps no scope is open, so the profiler can be read. */
        if (p && sink && sink->ops_live && sink->ops_live_every_s > 0) {
            double t = now_s();
            if (t - ops_live_t >= sink->ops_live_every_s) {
                prof_row *rows;
                size_t nrows;
                if (!prof_rows(p, PROF_BY_SCOPE, &rows, &nrows)) {
                    sink->ops_live(sink->ud, rows, nrows);
                    free(rows);
                }
                ops_live_t = t;
            }
        }
    }
#undef LOOP_STATE
    double wall = now_s() - c.t0;

    if (rc == ENG_ESINK || (rc && res->status == ENG_RUN_RUNNING)) {
        res->status = ENG_RUN_FAILED;
        snprintf(r->err, sizeof r->err, "%s", eng_error());
    }
    /* Steps of an unfinished logging interval still count for the final loss. */
    if (int_rows > 0 && rc != ENG_ESINK) {
        double l = int_loss / int_rows;
        emit(&c, "train_loss", l, wall);
        if (ds->classification) emit(&c, "train_acc", int_correct / int_rows, wall);
        emit(&c, "lr", last_lr, wall);
        res->final_train_loss = l;
        if (!(l >= res->best_train_loss)) res->best_train_loss = l;
    }
    if (res->status == ENG_RUN_RUNNING) res->status = ENG_RUN_FINISHED;
    res->wall_s = wall;
    res->hybrid_s = wall + c.hybrid_extra;
    res->samples_per_s = train_time > 0 ? total_rows / train_time : 0;
    res->peak_bytes = prof_mem_peak();
    res->peak_rss = prof_peak_rss();
    if (r->nt) eng_newton_counts(r->nt, &res->solves, &res->quantum_solves);
    res->error = res->status == ENG_RUN_FINISHED ? NULL : r->err;

    if (rc != ENG_ESINK && eng_sink_op_stats(p, sink) && rc == ENG_OK) {
        rc = ENG_ESINK;
        res->status = ENG_RUN_FAILED;
        snprintf(r->err, sizeof r->err, "%s", eng_error());
        res->error = r->err;
    }
    if (sink && sink->run_end) sink->run_end(sink->ud, res);
    if (rc == ENG_OK) return ENG_OK;
    /* Leave the run's own message for the caller (eng_error()). */
    eng_fail(rc, "%s", r->err);
    return rc;
}
