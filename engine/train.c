/* train.c — one run: from a config, the task (a dense model here, or a graph: graph/gnn.c)
 * and the slots it asks for, trained by the one loop (loop.c); resume and the accessors. */
#include "engine.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"
#include "graph/graph.h"
#include "dist.h"
#include "internal.h"
#include "loop.h"
#include "newton.h"

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
    eng_gnn *gnn;                 /* data.source = graph: the graph is the task (graph/gnn.c) */
    eng_dist *dist;               /* under mpirun with N > 1 ranks, else NULL */
    prof_t *prof;
    int ph[ENG_N_PHASES];         /* the loop's profiler scope ids, -1 when off */
    int wait_scope, gather_scope; /* the batcher's data.wait / data.gather scopes, -1 when off */
    int track_step, track_sps;    /* the trace's step time and samples/s counters, -1 when off */
    int batch, bpe, threads, n_out;
    long total_steps;
    atomic_int stop;
    int trained;
    /* the loop's slots (loop.h) and what they point at */
    eng_loop_slots slots;
    eng_loop_reduce reduce;
    eng_loop_grad grad_slot;      /* the transforms and the optimizer their last maps go to */
    eng_loop_transform transforms;
    eng_loop_telemetry telemetry;
    eng_loop_update update;
    eng_loop_checkpoint checkpoint;
    eng_loop_metrics extra;
    eng_loop_optim optim;
    eng_loop_record record;       /* one checkpoint record, allocated at create (not newton) */
    eng_batch cur;                /* the dense task's batch of the step */
    double kappa_first, kappa_last;
    int resumed;                  /* eng_run_resume ran: start from `resume` */
    eng_loop_state resume;
    eng_run_result res;
    char err[512];
    char data_fp[ENG_DATA_FP_MAX];  /* eng_data_fingerprint of ds ("" for graph data) */
    char data_note[1400];            /* eng_data_cache_damage at load, "" when none */
    char gemm[256], gemm_classes[1024]; /* what serves the model's GEMMs (eng_gemm_describe) */
    unsigned gemm_gen;            /* eng_gemm_generation after prepare_gemm; 0 = never */
};

void eng_run_destroy(eng_run *r)
{
    if (!r) return;
    eng_batcher_destroy(r->b);
    eng_gnn_free(r->gnn);
    eng_dist_free(r->dist);
    eng_loop_record_free(&r->record);
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
    ck->n_params = r->gnn ? eng_gnn_n_params(r->gnn) : eng_model_n_params(r->m);
    ck->n_train = r->gnn ? eng_gnn_split_size(r->gnn, ENG_SPLIT_TRAIN) : r->ds->n_train;
    ck->batch = r->batch;
    ck->optimizer = (int)r->cfg.train.optimizer;
    ck->params = r->gnn ? eng_gnn_params(r->gnn) : eng_model_params(r->m);
    ck->n_stats = r->gnn ? 0 : r->m->n_stats;
    ck->stats = r->gnn ? NULL : r->m->stats;
    if (r->opt) eng_optim_state(r->opt, &ck->m, &ck->v, &ck->opt_t);
}

/* The dense run's data, model and update (optimizer or Newton). */
static int create_dense(eng_run *r)
{
    const eng_config *cfg = &r->cfg;
    const eng_train_config *tc = &cfg->train;
    int rc = eng_data_load(&cfg->data, cfg->seed, &r->ds);
    if (rc) return rc;
    const eng_dataset *ds = r->ds;
    eng_data_fingerprint(ds, r->data_fp, sizeof r->data_fp);
    const char *note = eng_data_cache_damage();
    if (note) snprintf(r->data_note, sizeof r->data_note, "%s", note);
    if (cfg->model.loss == ENG_LOSS_SOFTMAX_XENT && !ds->classification)
        return eng_fail(ENG_EINVAL, "%s: model.loss = softmax_xent needs a classification dataset, but %s has "
                        "real-valued targets; set loss = mse (or data.regression = false for class labels)",
                        cfg->path, ds->name);
    if (ds->n_train < 1) return eng_fail(ENG_EINVAL, "%s: the training set is empty", cfg->path);
    r->n_out = ds->classification ? ds->n_classes : ds->n_targets;
    r->batch = tc->batch <= 0 || tc->batch > ds->n_train ? ds->n_train : tc->batch;
    if ((rc = check_labels(cfg, ds))) return rc;
    rc = eng_model_build(&cfg->model, ds->in_shape, r->n_out, r->batch, cfg->seed, r->prof, &r->m);
    if (rc == ENG_EINVAL && !strncmp(eng_error(), "model: layer ", 13)) {
        /* a layer that does not fit the data's shape: say which line to change */
        char msg[1024], loc[700];
        snprintf(msg, sizeof msg, "%s", eng_error());
        eng_config_where(cfg, "model.layers", loc, sizeof loc);
        eng_fail(rc, "%s: key 'layers': %s", loc, msg);
    }
    if (rc) return rc;
    if (tc->optimizer == ENG_OPT_NEWTON) rc = eng_newton_create(cfg, r->m, r->prof, &r->nt);
    else if ((rc = eng_optim_create(tc, eng_model_n_params(r->m), &r->opt)) == ENG_OK) {
        /* each thread updates the rows of W it computed the gradient of */
        size_t off[ENG_OPTIM_MAX_MATS];
        int rows[ENG_OPTIM_MAX_MATS], cols[ENG_OPTIM_MAX_MATS];
        eng_optim_set_matrices(r->opt, off, rows, cols, eng_model_dense_matrices(r->m, off, rows, cols, ENG_OPTIM_MAX_MATS));
    }
    if (rc) return rc;
    if (tc->n_gradient > 0 && tc->optimizer == ENG_OPT_NEWTON)
        return eng_fail(ENG_EINVAL, "%s: train.gradient = %s: gradient transforms apply to first-order optimizers; "
                        "newton computes its own direction (set gradient = none or another optimizer)",
                        cfg->path, eng_grad_kind_name(tc->gradient[0]));
    return ENG_OK;
}

/* The dense run's batches (and data-parallel state): after the slots, as before. */
static int create_batches(eng_run *r)
{
    const eng_train_config *tc = &r->cfg.train;
    int rc = create_batcher(r, 0);
    if (!rc && eng_dist_world() > 1) rc = create_dist(r);
    if (rc) return rc;
    r->bpe = eng_batcher_batches_per_epoch(r->b);
    r->total_steps = tc->max_steps > 0 ? tc->max_steps : (long)tc->epochs * r->bpe;
    return ENG_OK;
}

/* The graph run: the graph task (graph/gnn.c) and its optimizer. */
static int create_graph(eng_run *r)
{
    int rc = eng_gnn_create(&r->cfg, r->prof, &r->gnn);
    if (rc) return rc;
    r->batch = eng_gnn_batch(r->gnn);
    r->total_steps = eng_gnn_total_steps(r->gnn);
    return eng_optim_create(&r->cfg.train, eng_gnn_n_params(r->gnn), &r->opt);
}

/* The slots the config asks for, the same for every task: transforms, telemetry, update
 * (the optimizer, unless Newton set its own) and checkpoint. */
static int create_slots(eng_run *r)
{
    const eng_train_config *tc = &r->cfg.train;
    eng_param_view v;
    if (r->gnn) eng_gnn_param_view(r->gnn, &v);
    else eng_model_param_view(r->m, &v);
    int rc;
    if (tc->n_gradient > 0) {
        if ((rc = eng_grad_create_view(tc, &v, r->prof, &r->grad))) return rc;
        /* transforms come with a first-order optimizer only (Newton refuses them) */
        r->grad_slot = (eng_loop_grad){ .grad = r->grad, .to = r->opt };
        r->transforms = eng_loop_grad_slot(&r->grad_slot);
        r->slots.transforms = &r->transforms;
    }
    if (tc->telemetry) {
        if ((rc = eng_telem_create_view(&v, r->prof, &r->telem))) return rc;
        r->telemetry = eng_loop_telem_slot(r->telem);
        r->slots.telemetry = &r->telemetry;
    }
    if (r->opt) {
        r->optim = (eng_loop_optim){ .opt = r->opt, .params = v.params, .grads = v.grads, .n = v.n_params };
        r->update = eng_loop_optim_slot(&r->optim);
        r->slots.update = &r->update;
    }
    return ENG_OK;
}

/* Newton runs write no checkpoints (their solver state is not serialised). */
static int create_checkpoint(eng_run *r)
{
    if (r->nt) return ENG_OK;
    eng_ckpt ck;
    ckpt_view(r, &ck);
    int rc = eng_loop_record_init(&r->record, &ck);
    if (rc) return rc;
    r->checkpoint = eng_loop_record_slot(&r->record);
    r->slots.checkpoint = &r->checkpoint;
    return ENG_OK;
}

/* A copy of the config (kv too) and the experiment text: the run owns what it reports. */
static int copy_config(eng_run *r, const eng_config *cfg, const char *experiment_text)
{
    r->cfg = *cfg;
    r->cfg.kv = NULL;
    if (cfg->n_kv) {
        r->cfg.kv = prof_malloc(cfg->n_kv * sizeof *cfg->kv);
        if (!r->cfg.kv) return eng_fail(ENG_ENOMEM, "run: out of memory");
        memcpy(r->cfg.kv, cfg->kv, cfg->n_kv * sizeof *cfg->kv);
    }
    if (experiment_text) {
        size_t n = strlen(experiment_text) + 1;
        r->text = prof_malloc(n);
        if (!r->text) return eng_fail(ENG_ENOMEM, "run: out of memory");
        memcpy(r->text, experiment_text, n);
    }
    return ENG_OK;
}

int eng_run_create(const eng_config *cfg, const char *experiment_text, prof_t *prof, eng_run **out)
{
    *out = NULL;
    /* Peak bytes are per run: the dataset, model and workspaces allocated from here on. */
    prof_mem_reset_peak();
    eng_run *r = prof_calloc(1, sizeof *r);
    if (!r) return eng_fail(ENG_ENOMEM, "run: out of memory");
    r->prof = prof;
    atomic_init(&r->stop, 0);
    for (int i = 0; i < ENG_N_PHASES; i++) r->ph[i] = -1;
    r->wait_scope = r->gather_scope = -1;
    int rc = copy_config(r, cfg, experiment_text);
    if (rc) { eng_run_destroy(r); return rc; }

    /* OpenBLAS's thread count is process-wide: a variant with threads = 0 gets the count the
     * environment gave, not whatever an earlier variant of the same process set. */
    static int env_threads;
    if (!env_threads) env_threads = openblas_get_num_threads();
    int want = r->cfg.train.threads > 0 ? r->cfg.train.threads : env_threads;
    if (openblas_get_num_threads() != want) openblas_set_num_threads(want);
    r->threads = openblas_get_num_threads();
    /* This run's GEMM policy and threads, no class yet: what conv2d's auto times its
     * candidates under while the model is built (eng_gemm_prepare_add); prepare_gemm then
     * chooses for the model's own shapes. */
    rc = eng_gemm_prepare(r->cfg.train.gemm, r->threads, NULL, 0);
    if (rc) { eng_run_destroy(r); return rc; }

    if (r->cfg.data.source == ENG_DATA_GRAPH) rc = create_graph(r);
    else rc = create_dense(r);
    if (!rc) rc = create_slots(r);
    if (!rc && !r->gnn) rc = create_batches(r);
    if (!rc) rc = create_checkpoint(r);
    if (!rc) rc = eng_loop_phases(prof, r->ph);
    if (rc) { eng_run_destroy(r); return rc; }
    /* counter tracks of the trace (each rank's own, in its process row) */
    r->track_step = prof_counter_register(prof, "step_time", "ms");
    r->track_sps = prof_counter_register(prof, "throughput", "samples_per_s");
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
    if (!r->gnn) {  /* the graph task orders each epoch's seeds from the step alone */
        /* The batch order of an uninterrupted run from the checkpoint's step on. */
        eng_batcher_destroy(r->b);
        r->b = NULL;
        if ((rc = create_batcher(r, ck.loop.step))) return rc;
    }
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

void eng_run_request_stop(eng_run *r)
{
    if (r) atomic_store(&r->stop, 1);
}

/* Mean loss and accuracy over the test set, in chunks of the model's batch size. */
static void evaluate(eng_run *r, double *loss, double *acc);
static int prepare_gemm(eng_run *r);
int eng_run_evaluate(eng_run *r, double *loss, double *acc)
{
    if (!r->ds) return eng_fail(ENG_EINVAL, "evaluate: a graph run is evaluated by its training loop (val_acc, test_acc)");
    if (r->ds->n_test < 1) return eng_fail(ENG_EINVAL, "evaluate: the run's data has no test set");
    /* a run that did not train here (eval, quantize), or whose classes another run's
     * prepare has replaced since: its GEMMs on the backends chosen for them */
    if (r->gemm_gen != eng_gemm_generation()) {
        int rc = prepare_gemm(r);
        if (rc) return rc;
    }
    evaluate(r, loss, acc);
    return isfinite(*loss) ? ENG_OK : eng_fail(ENG_EDIVERGED, "evaluate: the test loss is not finite");
}

static void evaluate(eng_run *r, double *loss, double *acc)
{
    const eng_dataset *ds = r->ds;
    double sum = 0;
    long correct = 0;
    int nt = ds->n_targets > 0 ? ds->n_targets : 1;
    /* batch norm uses its running statistics here and leaves them as they are */
    eng_model_set_training(r->m, 0);
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
    eng_model_set_training(r->m, 1);
    *loss = sum / ds->n_test;
    *acc = ds->classification ? (double)correct / ds->n_test : NAN;
}

/* Bytes the "data" phase moved for batch b: the rows copied into the batch buffer (inputs
 * and labels or targets; the copy's size, not read + write). 0 when the batch is the
 * stored set served in place (full batch). With batches gathered ahead only the rows this
 * thread copied itself count (caller_rows: those the prefetch thread, or the pool's idle
 * workers, had not got to); the others were copied outside this phase. */
static uint64_t gather_bytes(const eng_run *r, const eng_batch *b, long caller_rows)
{
    const eng_dataset *ds = r->ds;
    if (b->x == ds->x_train) return 0;
    size_t per_row = ds->in_size * sizeof(float) +
                     (ds->classification ? sizeof(int32_t) : (size_t)ds->n_targets * sizeof(float));
    return (uint64_t)(eng_batcher_prefetching(r->b) ? caller_rows : b->rows) * per_row;
}

/* ---- the dense task and its slots (loop.h) --------------------------------------------- */

static int dense_next(void *self, long s, eng_loop_batch *lb, uint64_t *bytes)
{
    eng_run *r = self;
    eng_batch *b = &r->cur;
    long by_thread = 0, caller_before = 0, caller_after = 0;
    int counts = r->prof && eng_batcher_prefetching(r->b);
    if (counts) eng_batcher_gather_counts(r->b, &by_thread, &caller_before);
    int rc = eng_batcher_next(r->b, b);
    if (counts) eng_batcher_gather_counts(r->b, &by_thread, &caller_after);
    if (rc) return rc;
    *bytes = gather_bytes(r, b, caller_after - caller_before);
    *lb = (eng_loop_batch){ .rows = b->rows, .global_rows = b->global_rows, .epoch = b->epoch,
                            .last_in_epoch = b->last_in_epoch, .data = b };
    return ENG_OK;
}

static double dense_forward(void *self, eng_loop_batch *lb, int *correct)
{
    eng_run *r = self;
    const eng_batch *b = lb->data;
    return eng_model_forward(r->m, b->x, b->rows, b->y, b->t, r->ds->classification ? correct : NULL);
}

static void dense_backward(void *self, eng_loop_batch *lb, float w, eng_grads_ready ready, void *ud)
{
    eng_run *r = self;
    if (lb->rows && ready) {
        eng_model_backward_weighted(r->m, w, ready, ud);
    } else if (lb->rows) {
        eng_model_backward(r->m);
    } else {
        memset(eng_model_grads(r->m), 0, eng_model_n_params(r->m) * sizeof(float));
        /* no rows, but the same bucket collectives as the other ranks */
        if (ready) eng_model_grads_ready(r->m, ready, ud);
    }
}

static void dense_evaluate(void *self, eng_loop_eval *e)
{
    evaluate(self, &e->test_loss, &e->test_acc);
    e->has_test = 1;
}

static void dist_begin(void *ud)
{
    eng_run *r = ud;
    eng_dist_backward_begin(r->dist, eng_model_grads(r->m));
}

static int dist_reduce(void *ud, double *loss, int *correct, eng_loop_batch *b, int *stop)
{
    eng_run *r = ud;
    int rc = eng_dist_step(r->dist, eng_model_grads(r->m), loss, correct, b->rows, b->global_rows, stop);
    if (!rc && !*stop && r->cfg.dist.balance == ENG_BALANCE_MEASURED) {
        const double *cuts = eng_dist_cuts(r->dist);
        eng_batcher_set_share(r->b, cuts[eng_dist_rank()], cuts[eng_dist_rank() + 1]);
    }
    return rc;
}

/* dist.balance = measured: each rank's share of the global batch, as batch_share/rankR. */
static int dist_shares(void *ud, eng_loop *lp, int when)
{
    eng_run *r = ud;
    if (when != ENG_LOOP_AT_LOG || !r->dist || r->cfg.dist.balance != ENG_BALANCE_MEASURED) return 0;
    const double *cuts = eng_dist_cuts(r->dist);
    for (int k = 0; k < eng_dist_world(); k++) {
        char key[32];
        snprintf(key, sizeof key, "batch_share/rank%d", k);
        int rc = eng_loop_emit(lp, key, cuts[k + 1] - cuts[k]);
        if (rc) return rc;
    }
    return 0;
}

static int newton_update(void *ud, eng_loop *lp, long s, double lr, double *hybrid_extra)
{
    eng_run *r = ud;
    double kappa = NAN;
    int rc = eng_newton_step(r->nt, eng_loop_current(lp)->data, lr, s + 1, eng_loop_sink(lp), hybrid_extra, &kappa);
    if (isnan(r->kappa_first)) r->kappa_first = kappa;
    r->kappa_last = kappa;
    return rc;
}

static void newton_finish(void *ud, eng_run_result *res)
{
    eng_run *r = ud;
    res->kappa_first = r->kappa_first;
    res->kappa_last = r->kappa_last;
    eng_newton_counts(r->nt, &res->solves, &res->quantum_solves);
}

/* The dense model's task and the slots its config asks for. */
static void dense_setup(eng_run *r, eng_run_info *info, eng_loop_task *task)
{
    const eng_dataset *ds = r->ds;
    *info = (eng_run_info){ .cfg = &r->cfg, .experiment_text = r->text, .dataset = ds->name,
                            .model_summary = eng_model_summary(r->m), .n_params = eng_model_n_params(r->m),
                            .threads = r->threads, .total_steps = r->total_steps,
                            .n_train = ds->n_train, .n_test = ds->n_test, .gemm = r->gemm,
                            .gemm_classes = r->gemm_classes, .gemm_notes = eng_gemm_notes(),
                            .data_fingerprint = r->data_fp };
    *task = (eng_loop_task){ .self = r, .classification = ds->classification, .can_eval = ds->n_test > 0,
                             .next = dense_next, .forward = dense_forward, .backward = dense_backward,
                             .evaluate = dense_evaluate };
    r->kappa_first = r->kappa_last = NAN;
    if (r->dist) {
        r->reduce = (eng_loop_reduce){ .ud = r, .begin = dist_begin, .ready = eng_dist_grads_ready,
                                       .ready_ud = r->dist, .reduce = dist_reduce };
        r->extra = (eng_loop_metrics){ .ud = r, .emit = dist_shares };
        r->slots.reduce = &r->reduce;
        r->slots.extra = &r->extra;
    }
    if (r->nt) {
        r->update = (eng_loop_update){ .ud = r, .step = newton_update, .finish = newton_finish };
        r->slots.update = &r->update;
    }
}

/* Under mpirun, the rows a rank's share of a global batch of `global` rows can hold
 * (eng_dist_rows_range), one count per power-of-two class of rows (eng_gemm_class) and the
 * range's two ends, into rows[]; the count written. */
static int rank_rows(const eng_run *r, int global, int *rows, int cap)
{
    int lo, hi, n = 0;
    eng_dist_rows_range(global, eng_dist_world(), r->cfg.dist.balance == ENG_BALANCE_MEASURED, &lo, &hi);
    if (lo < 1) lo = 1;
    if (n < cap && lo <= hi) rows[n++] = lo;
    for (int p = 1; p <= hi && n < cap; p *= 2)
        if (p > lo) rows[n++] = p;
    if (n < cap && hi > lo) rows[n++] = hi;
    return n;
}

/* The GEMM shapes of the dense model: training batches, the last short batch and the test
 * chunks; under mpirun also each rank's share of the training batches, whatever
 * dist.balance makes of it (a class left out would run on OpenBLAS unmeasured: measured
 * shares once moved a rank into one, at half speed, and then gave it ever fewer rows).
 * The count written to sh. */
enum { MAX_ROWS = 40, MAX_SHAPES = MAX_ROWS * ENG_MAX_NODES * ENG_OP_MAX_GEMMS };
static int dense_shapes(const eng_run *r, eng_gemm_shape *sh)
{
    const eng_dataset *ds = r->ds;
    /* rows of the calls and how many of them an epoch makes (evaluation included) */
    int rows[MAX_ROWS] = { r->batch, ds->n_train % r->batch, ds->n_test % r->batch };
    double calls[MAX_ROWS] = { (double)(ds->n_train / r->batch) + (double)(ds->n_test / r->batch), 1, 1 };
    int nr = 3, n = 0;
    if (eng_dist_world() > 1)
        for (int g = 0; g < 2; g++) {
            int k = rows[g] > 0 ? rank_rows(r, rows[g], rows + nr, MAX_ROWS - nr) : 0;
            for (int i = nr; i < nr + k; i++) calls[i] = g ? 1 : (double)(ds->n_train / r->batch);
            nr += k;
        }
    for (int i = 0; i < nr; i++) {
        if (rows[i] <= 0) continue;
        int k = eng_model_gemm_shapes(r->m, rows[i], sh + n, MAX_SHAPES - n);
        for (int j = n; j < n + k; j++) sh[j].calls = calls[i];
        n += k;
    }
    return n;
}

/* Chooses the GEMM backend of every shape class the run issues (the dense model's, or the
 * graph task's) and records the choice. */
static int prepare_gemm(eng_run *r)
{
    eng_gemm_shape *sh = malloc(MAX_SHAPES * sizeof *sh);
    if (!sh) return eng_fail(ENG_ENOMEM, "gemm: out of memory for the model's shapes");
    int n = r->gnn ? eng_gnn_gemm_shapes(r->gnn, sh, MAX_SHAPES) : dense_shapes(r, sh);
    int rc = eng_gemm_prepare(r->cfg.train.gemm, r->threads, sh, n);
    free(sh);
    if (!rc && r->m) rc = eng_model_plan_ksplit(r->m);
    if (rc) return rc;
    eng_gemm_describe(r->gemm, sizeof r->gemm);
    eng_gemm_describe_classes(r->gemm_classes, sizeof r->gemm_classes);
    r->gemm_gen = eng_gemm_generation();
    return ENG_OK;
}

int eng_run_train(eng_run *r, const eng_sink *sink)
{
    if (r->trained) return eng_fail(ENG_EINVAL, "run: already trained; create a new run");
    r->trained = 1;
    eng_run_info info;
    eng_loop_task task;
    int rc = ENG_OK;
    /* Where the split ops will run (2000 round trips, 1-4 ms): before the GEMM choice,
     * whose calls leave OpenBLAS's threads spinning for a while. */
    double trip = r->threads > 1 ? prof_core_round_trip_ns(2000) : NAN;
    if (r->gnn) {
        rc = prepare_gemm(r);
        eng_gnn_task(r->gnn, &task, &r->extra);
        r->slots.extra = &r->extra;
        info = (eng_run_info){ .cfg = &r->cfg, .experiment_text = r->text, .dataset = eng_gnn_name(r->gnn),
                               .model_summary = eng_gnn_summary(r->gnn), .n_params = eng_gnn_n_params(r->gnn),
                               .threads = r->threads, .total_steps = r->total_steps,
                               .n_train = eng_gnn_split_size(r->gnn, ENG_SPLIT_TRAIN),
                               .n_test = eng_gnn_split_size(r->gnn, ENG_SPLIT_TEST), .gemm = r->gemm,
                               .gemm_classes = r->gemm_classes, .gemm_notes = eng_gemm_notes() };
    } else {
        rc = prepare_gemm(r);
        /* at 2+ threads on the pool: the next batch in its workers' idle time */
        if (!rc) eng_batcher_gather_on_pool(r->b);
        dense_setup(r, &info, &task);
    }
    info.core_round_trip_ns = trip;
    eng_loop_env env = { .cfg = &r->cfg, .prof = r->prof, .total_steps = r->total_steps, .stop = &r->stop,
                         .info = &info, .err = r->err, .errcap = sizeof r->err };
    memcpy(env.ph, r->ph, sizeof env.ph);
    env.track_step = r->track_step;
    env.track_sps = r->track_sps;
    if (rc) return eng_loop_refuse(&env, &r->res, rc);  /* before run_begin: the sink has seen nothing */
    return eng_loop_run(&env, &task, &r->slots, r->resumed ? &r->resume : NULL, sink, &r->res);
}
