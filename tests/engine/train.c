/* train.c — tests of the training loop: bit-identical loss curves for one seed, a tiny
 * problem reaching a low loss, divergence, stop requests, sink failures, metrics, profiling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/core.h"
#include "../../engine/engine.h"
#include "../../engine/internal.h"

static char path[256];

static eng_experiment *load(const char *text, const char *const *sets, size_t n_sets)
{
    if (path[0]) unlink(path);
    snprintf(path, sizeof path, "/tmp/nnbench-train-XXXXXX.ini");
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    eng_experiment *ex = NULL;
    if (eng_experiment_load(path, sets, n_sets, &ex)) fail_msg("%s", eng_error());
    return ex;
}

static int teardown(void **state)
{
    (void)state;
    if (path[0]) unlink(path);
    path[0] = '\0';
    return 0;
}

/* A sink that records what it is told. */
typedef struct {
    double losses[4096];
    size_t n_loss;
    int n_begin, n_end, n_test_acc, n_sps, n_lr, n_ops;
    long last_progress;
    eng_run_info info;
    eng_run_status end_status;
    eng_run *stop_run;      /* request a stop at progress step stop_at */
    long stop_at;
    int fail_metric_at;     /* fail the n-th metric (1-based), 0 never */
    int n_metrics;
    int saw_forward_phase;
    int n_ops_live;         /* live op snapshots (ops_live) */
    int live_saw_dense;
} rec;

static int rec_begin(void *ud, const eng_run_info *info) { rec *r = ud; r->n_begin++; r->info = *info; return 0; }
static int rec_metric(void *ud, const eng_metric *m)
{
    rec *r = ud;
    r->n_metrics++;
    if (r->fail_metric_at && r->n_metrics == r->fail_metric_at) { eng_fail(ENG_ESINK, "test sink: disk full"); return -1; }
    if (!strcmp(m->key, "train_loss") && r->n_loss < 4096) r->losses[r->n_loss++] = m->value;
    if (!strcmp(m->key, "test_acc")) r->n_test_acc++;
    if (!strcmp(m->key, "samples_per_s")) r->n_sps++;
    if (!strcmp(m->key, "lr")) r->n_lr++;
    assert_true(m->wall_s >= 0);
    assert_true(m->hybrid_s == m->wall_s);  /* no Newton: the clocks agree */
    return 0;
}
static int rec_ops(void *ud, const prof_row *rows, size_t n, const prof_summary *sum)
{
    rec *r = ud;
    r->n_ops++;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, "forward") && rows[i].kind == PROF_PHASE && rows[i].calls > 0) r->saw_forward_phase = 1;
    return 0;
}
static void rec_progress(void *ud, long step, long total, int epoch, double loss, double sps)
{
    rec *r = ud;
    assert_int_equal(step, r->last_progress + 1);
    r->last_progress = step;
    if (r->stop_run && step == r->stop_at) eng_run_request_stop(r->stop_run);
}
static void rec_end(void *ud, const eng_run_result *res) { rec *r = ud; r->n_end++; r->end_status = res->status; }
static void rec_ops_live(void *ud, const prof_row *rows, size_t n)
{
    rec *r = ud;
    r->n_ops_live++;
    for (size_t i = 0; i < n; i++) r->live_saw_dense |= !strncmp(rows[i].name, "dense", 5) && rows[i].calls > 0;
}

static eng_sink rec_sink(rec *r)
{
    return (eng_sink){ .ud = r, .run_begin = rec_begin, .metric = rec_metric, .op_stats = rec_ops,
                       .progress = rec_progress, .run_end = rec_end };
}

static const char *SPIRALS =
    "[experiment]\nseed = 5\ntarget_loss = 0.3\n"
    "[data]\nsource = spirals\nn = 400\nnoise = 0.05\n"
    "[model]\nlayers = dense:16:tanh, dense:16:tanh, dense:2\ninit = he\n"
    "[train]\noptimizer = adam\nlr = 0.01\nbatch = 32\nepochs = 5\n";

static void run_once(const eng_config *c, const char *text, rec *r, int expect_rc)
{
    eng_run *run = NULL;
    if (eng_run_create(c, text, NULL, &run)) fail_msg("%s", eng_error());
    eng_sink s = rec_sink(r);
    assert_int_equal(eng_run_train(run, &s), expect_rc);
    eng_run_destroy(run);
}

static void test_determinism(void **state)
{
    (void)state;
    eng_experiment *ex = load(SPIRALS, NULL, 0);
    static rec a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    run_once(&ex->variants[0], ex->text, &a, ENG_OK);
    run_once(&ex->variants[0], ex->text, &b, ENG_OK);
    assert_int_equal(a.n_loss, 50); /* 320 train rows / 32 = 10 steps x 5 epochs, log_every 1 */
    assert_int_equal(a.n_loss, b.n_loss);
    assert_memory_equal(a.losses, b.losses, a.n_loss * sizeof a.losses[0]);
    eng_experiment_free(ex);

    /* gathering batches on a second thread changes nothing */
    const char *pf[] = { "data.prefetch=true" };
    ex = load(SPIRALS, pf, 1);
    memset(&b, 0, sizeof b);
    run_once(&ex->variants[0], ex->text, &b, ENG_OK);
    assert_int_equal(a.n_loss, b.n_loss);
    assert_memory_equal(a.losses, b.losses, a.n_loss * sizeof a.losses[0]);
    eng_experiment_free(ex);

    /* another seed gives another curve */
    const char *sets[] = { "experiment.seed=6" };
    ex = load(SPIRALS, sets, 1);
    static rec c;
    memset(&c, 0, sizeof c);
    run_once(&ex->variants[0], ex->text, &c, ENG_OK);
    assert_int_equal(c.n_loss, a.n_loss);
    assert_true(memcmp(a.losses, c.losses, a.n_loss * sizeof a.losses[0]) != 0);
    eng_experiment_free(ex);
}

/* The update fused into backward (engine/loop.c) has the bits of the update after it:
 * telemetry at every step (log_every = 1) keeps the loop on the unfused path, which must
 * end on the same parameters, at 1 and 2 threads, for a dense + batch norm + residual
 * model under momentum with weight decay and under Adam. */
/* Trains text with sets; its parameters into *out (n of them); *cut (when not NULL): the
 * first node is a dense layer whose forward cuts K (eng_model_plan_ksplit). */
static void params_after(const char *text, const char *const *sets, size_t n_sets, float **out, size_t *n, int *cut)
{
    eng_experiment *ex = load(text, sets, n_sets);
    eng_run *run = NULL;
    if (eng_run_create(&ex->variants[0], ex->text, NULL, &run)) fail_msg("%s", eng_error());
    assert_int_equal(eng_run_train(run, NULL), ENG_OK);
    eng_model *m = eng_run_model(run);
    if (cut) *cut = m->nodes[0].op == ENG_OP_DENSE && m->nodes[0].kwork != NULL;
    *n = eng_model_n_params(m);
    *out = malloc(*n * sizeof(float));
    memcpy(*out, eng_model_params(m), *n * sizeof(float));
    eng_run_destroy(run);
    eng_experiment_free(ex);
}

static void trained_params(const char *const *sets, size_t n_sets, float **out, size_t *n)
{
    static const char *const text =
        "[experiment]\nseed = 3\n"
        "[data]\nsource = spirals\nn = 300\nnoise = 0.05\n"
        "[model]\nlayers = dense:16, bn:relu, res(dense:16:tanh, dense:16), dense:2\n"
        "[train]\noptimizer = momentum\nlr = 0.05\nweight_decay = 0.001\nbatch = 32\nepochs = 3\n";
    params_after(text, sets, n_sets, out, n, NULL);
}

static void test_fused_update_same_bits(void **state)
{
    (void)state;
    static const char *const opt[2] = { "train.optimizer=momentum", "train.optimizer=adam" };
    static const char *const thr[2] = { "train.threads=1", "train.threads=2" };
    for (int o = 0; o < 2; o++)
        for (int t = 0; t < 2; t++) {
            const char *fused[] = { opt[o], thr[t] }, *plain[] = { opt[o], thr[t], "train.telemetry=true" };
            float *a, *b;
            size_t na, nb;
            trained_params(fused, 2, &a, &na);
            trained_params(plain, 3, &b, &nb);
            assert_int_equal(na, nb);
            if (memcmp(a, b, na * sizeof(float))) fail_msg("%s, %s: the fused update differs from the plain one", opt[o], thr[t]);
            free(a);
            free(b);
        }
}

/* A dense layer with a large W at 2 threads has its forward's K cut (eng_sgemm_ksplit),
 * its gradient and update cut by the same rows: training then gives the same parameters on
 * every run, fused update or not, and stays within rounding of 1 thread (the K cut sums in
 * another order). At 1 thread nothing is cut. */
static void ksplit_params(const char *threads, const char *telemetry, float **out, size_t *n, int *cut)
{
    static const char *const text =
        "[experiment]\nseed = 5\n"
        "[data]\nsource = blobs\nn = 400\nfeatures = 300\nclasses = 3\n"
        "[model]\nlayers = dense:256:relu, dense:3\n"
        "[train]\noptimizer = momentum\nlr = 0.01\nbatch = 64\nepochs = 2\ngemm = onednn\n";
    const char *sets[] = { threads, telemetry };
    params_after(text, sets, 2, out, n, cut);
}

static void test_dense_ksplit_threads(void **state)
{
    (void)state;
    float *one, *two, *again, *plain;
    size_t n1, n2, n3, n4;
    int cut1, cut2, cut3, cut4;
    ksplit_params("train.threads=1", "train.telemetry=false", &one, &n1, &cut1);
    ksplit_params("train.threads=2", "train.telemetry=false", &two, &n2, &cut2);
    ksplit_params("train.threads=2", "train.telemetry=false", &again, &n3, &cut3);
    ksplit_params("train.threads=2", "train.telemetry=true", &plain, &n4, &cut4);
    assert_false(cut1);
    assert_true(cut2 && cut3 && cut4);
    assert_true(n1 == n2 && n2 == n3 && n3 == n4);
    assert_memory_equal(two, again, n2 * sizeof(float));
    assert_memory_equal(two, plain, n2 * sizeof(float));
    double worst = 0, big = 0;
    for (size_t i = 0; i < n1; i++) {
        if (fabs(one[i] - two[i]) > worst) worst = fabs(one[i] - two[i]);
        if (fabs(one[i]) > big) big = fabs(one[i]);
    }
    print_message("1 vs 2 threads (K cut): largest parameter difference %.3g of %.3g\n", worst, big);
    assert_true(worst <= 1e-4 * big);
    free(one), free(two), free(again), free(plain);
}

static void test_learns_and_reports(void **state)
{
    (void)state;
    const char *sets[] = { "train.epochs=150", "train.log_every=5" };
    eng_experiment *ex = load(SPIRALS, sets, 2);
    static rec r;
    memset(&r, 0, sizeof r);
    eng_run *run = NULL;
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &run), ENG_OK);
    eng_sink s = rec_sink(&r);
    assert_int_equal(eng_run_train(run, &s), ENG_OK);
    const eng_run_result *res = eng_run_result_get(run);
    assert_int_equal(res->status, ENG_RUN_FINISHED);
    assert_null(res->error);
    assert_int_equal(res->steps, 1500);
    assert_int_equal(res->epochs, 150);
    print_message("spirals 400 points, 1500 Adam steps: final train loss %.4f, test acc %.3f\n",
                  res->final_train_loss, res->final_test_acc);
    assert_true(res->final_train_loss < 0.1);
    assert_true(res->best_train_loss <= res->final_train_loss);
    assert_true(res->final_test_acc >= 0.95);
    assert_true(res->best_test_acc >= res->final_test_acc);
    assert_true(res->steps_to_target > 0 && res->steps_to_target < 1500);
    assert_true(res->wall_to_target > 0 && res->wall_to_target <= res->wall_s);
    assert_true(res->samples_per_s > 0);
    assert_true(res->peak_bytes > 0);
    assert_true(isnan(res->kappa_first));
    /* the sink saw it all */
    assert_int_equal(r.n_begin, 1);
    assert_int_equal(r.n_end, 1);
    assert_int_equal(r.end_status, ENG_RUN_FINISHED);
    assert_int_equal(r.n_loss, 300);
    assert_int_equal(r.n_lr, 300);
    assert_int_equal(r.n_test_acc, 150);  /* once per epoch, the last one doubling as the final */
    assert_int_equal(r.n_sps, 150);
    assert_int_equal(r.last_progress, 1500);
    assert_int_equal(r.info.total_steps, 1500);
    assert_int_equal(r.info.n_train, 320);
    assert_int_equal(r.info.n_test, 80);
    assert_true(r.info.threads >= 1);
    assert_string_equal(r.info.dataset, "spirals");
    assert_non_null(r.info.experiment_text);
    assert_string_equal(r.info.experiment_text, ex->text);
    assert_int_equal(r.n_ops, 0); /* not profiled */
    eng_run_destroy(run);
    eng_experiment_free(ex);
}

static void test_diverges(void **state)
{
    (void)state;
    /* linear regression with a step size far past 2/L: the loss grows geometrically */
    const char *sets[] = { "data.source=linreg", "model.loss=mse", "model.layers=dense:1",
                           "train.optimizer=sgd", "train.lr=10" };
    eng_experiment *ex = load(SPIRALS, sets, 5);
    static rec r;
    memset(&r, 0, sizeof r);
    eng_run *run = NULL;
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &run), ENG_OK);
    eng_sink s = rec_sink(&r);
    assert_int_equal(eng_run_train(run, &s), ENG_EDIVERGED);
    assert_non_null(strstr(eng_error(), "diverged at step "));
    const eng_run_result *res = eng_run_result_get(run);
    assert_int_equal(res->status, ENG_RUN_DIVERGED);
    assert_non_null(res->error);
    char want[64];
    snprintf(want, sizeof want, "diverged at step %ld: loss is ", res->steps + 1);
    assert_memory_equal(res->error, want, strlen(want));
    assert_true(!strcmp(res->error + strlen(want), "nan") || !strcmp(res->error + strlen(want), "inf"));
    assert_int_equal(r.n_end, 1);
    assert_int_equal(r.end_status, ENG_RUN_DIVERGED);
    eng_run_destroy(run);
    eng_experiment_free(ex);
}

static void test_stop_request(void **state)
{
    (void)state;
    const char *sets[] = { "train.epochs=50" };
    eng_experiment *ex = load(SPIRALS, sets, 1);
    static rec r;
    memset(&r, 0, sizeof r);
    eng_run *run = NULL;
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &run), ENG_OK);
    r.stop_run = run;
    r.stop_at = 17;
    eng_sink s = rec_sink(&r);
    assert_int_equal(eng_run_train(run, &s), ENG_ESTOPPED);
    const eng_run_result *res = eng_run_result_get(run);
    assert_int_equal(res->status, ENG_RUN_INTERRUPTED);
    assert_int_equal(res->steps, 17);   /* stopped at the next step boundary */
    assert_non_null(res->error);
    assert_int_equal(r.end_status, ENG_RUN_INTERRUPTED);
    assert_true(isfinite(res->final_train_loss));
    /* a run trains once */
    assert_int_equal(eng_run_train(run, &s), ENG_EINVAL);
    eng_run_destroy(run);
    eng_experiment_free(ex);
}

static void test_sink_failure(void **state)
{
    (void)state;
    eng_experiment *ex = load(SPIRALS, NULL, 0);
    static rec r;
    memset(&r, 0, sizeof r);
    r.fail_metric_at = 7;
    eng_run *run = NULL;
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &run), ENG_OK);
    eng_sink s = rec_sink(&r);
    assert_int_equal(eng_run_train(run, &s), ENG_ESINK);
    assert_string_equal(eng_error(), "test sink: disk full");
    const eng_run_result *res = eng_run_result_get(run);
    assert_int_equal(res->status, ENG_RUN_FAILED);
    assert_string_equal(res->error, "test sink: disk full");
    assert_int_equal(r.end_status, ENG_RUN_FAILED);
    assert_true(res->steps < 50);
    eng_run_destroy(run);
    eng_experiment_free(ex);
}

static void test_run_create_errors(void **state)
{
    (void)state;
    /* the last layer must match the classes: the model says so */
    const char *sets[] = { "model.layers=dense:8:tanh,dense:3" };
    eng_experiment *ex = load(SPIRALS, sets, 1);
    eng_run *run = (eng_run *)0x1;
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &run), ENG_EINVAL);
    assert_null(run);
    assert_non_null(strstr(eng_error(), "dense:2"));
    eng_experiment_free(ex);

    /* a layer that does not fit the data's shape is reported where the layers were set */
    const char *conv_sets[] = { "model.layers=conv:2:5:pad=1, flatten, dense:2" };
    ex = load(SPIRALS, conv_sets, 1);
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &run), ENG_EINVAL);
    assert_null(run);
    printf("  %s\n", eng_error());
    assert_non_null(strstr(eng_error(), "--set model.layers=conv:2:5:pad=1, flatten, dense:2: key 'layers': "
                                        "model: layer 1 (conv1): a 5x5 kernel with pad 1 does not fit its 1x1x2 input"));
    eng_experiment_free(ex);

    /* softmax_xent on a CSV with real-valued targets is only known once the data is read */
    char csv[] = "/tmp/nnbench-train-XXXXXX.csv";
    int fd = mkstemps(csv, 4);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("a,b,y\n", f);
    for (int i = 0; i < 20; i++) fprintf(f, "%d,%d,%.2f\n", i, i * 2, i * 0.5);
    fclose(f);
    char text[512];
    snprintf(text, sizeof text, "[data]\nsource = csv\npath = %s\nheader = true\n[model]\nlayers = dense:2\n", csv);
    ex = load(text, NULL, 0);
    /* regression = false (default) reads the targets as class labels 0..9.5: not integers */
    int rc = eng_run_create(&ex->variants[0], ex->text, NULL, &run);
    assert_int_not_equal(rc, ENG_OK);
    eng_experiment_free(ex);
    snprintf(text, sizeof text, "[data]\nsource = csv\npath = %s\nheader = true\nregression = true\n"
                                "[model]\nlayers = dense:1\nloss = mse\n", csv);
    ex = load(text, NULL, 0);
    /* flip the loss after validation, as a caller building configs by hand might */
    ex->variants[0].model.loss = ENG_LOSS_SOFTMAX_XENT;
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &run), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "softmax_xent needs a classification dataset"));
    ex->variants[0].model.loss = ENG_LOSS_MSE;
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &run), ENG_OK);
    static rec r;
    memset(&r, 0, sizeof r);
    eng_sink s = rec_sink(&r);
    assert_int_equal(eng_run_train(run, &s), ENG_OK);
    assert_int_equal(r.n_test_acc, 0); /* regression: no accuracy */
    assert_true(isnan(eng_run_result_get(run)->final_test_acc));
    assert_true(isfinite(eng_run_result_get(run)->final_test_loss));
    eng_run_destroy(run);
    eng_experiment_free(ex);
    unlink(csv);
}

static void test_profiled_run(void **state)
{
    (void)state;
    eng_experiment *ex = load(SPIRALS, NULL, 0);
    prof_t *p = prof_create(&(prof_options){ .counters = "", .quiet = 1 });
    if (!p) fail_msg("%s", prof_error());
    eng_run *run = NULL;
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, p, &run), ENG_OK);
    static rec r;
    memset(&r, 0, sizeof r);
    eng_sink s = rec_sink(&r);
    /* Live op rows through the sink, as often as asked (here: every step), through a tee
     * whose other sink does not want them. */
    s.ops_live = rec_ops_live;
    s.ops_live_every_s = 1e-9;
    eng_sink quiet = { 0 };
    eng_sink_tee tee = { .sinks = { &s, &quiet }, .n = 2 };
    eng_sink both = eng_sink_tee_make(&tee);
    assert_true(both.ops_live != NULL && both.ops_live_every_s == 1e-9);
    assert_int_equal(eng_run_train(run, &both), ENG_OK);
    assert_int_equal(r.n_ops, 1);
    assert_int_equal(r.saw_forward_phase, 1);
    assert_true(r.n_ops_live >= 40); /* 50 steps; a snapshot after each, clock permitting */
    assert_true(r.live_saw_dense);
    eng_run_destroy(run);
    prof_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(prof_rows(p, PROF_BY_PHASE, &rows, &n), 0);
    int phases = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, "data") || !strcmp(rows[i].name, "forward") || !strcmp(rows[i].name, "backward") ||
            !strcmp(rows[i].name, "optimizer")) {
            assert_int_equal(rows[i].calls, 50);
            phases++;
        }
    assert_int_equal(phases, 4);
    free(rows);
    prof_destroy(p);
    eng_experiment_free(ex);
}

/* The "data" phase's bytes over a profiled SPIRALS run with the given --set overrides. */
static uint64_t data_phase_bytes(const char *const *sets, size_t n_sets)
{
    eng_experiment *ex = load(SPIRALS, sets, n_sets);
    prof_t *p = prof_create(&(prof_options){ .counters = "", .quiet = 1 });
    if (!p) fail_msg("%s", prof_error());
    eng_run *run = NULL;
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, p, &run), ENG_OK);
    assert_int_equal(eng_run_train(run, NULL), ENG_OK);
    eng_run_destroy(run);
    prof_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(prof_rows(p, PROF_BY_PHASE, &rows, &n), 0);
    uint64_t bytes = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, "data")) bytes = rows[i].bytes;
    free(rows);
    prof_destroy(p);
    eng_experiment_free(ex);
    assert_true(bytes != UINT64_MAX);
    return bytes;
}

static void test_data_phase_bytes(void **state)
{
    (void)state;
    /* 320 training points x 5 epochs gathered, each 2 floats + an int32 label */
    assert_int_equal(data_phase_bytes(NULL, 0), 320 * 5 * (2 * 4 + 4));
    /* batch 100: 3 x 100 + 20 rows per epoch, the same total */
    const char *b100[] = { "train.batch=100" };
    assert_int_equal(data_phase_bytes(b100, 1), 320 * 5 * (2 * 4 + 4));
    /* regression targets are floats: x (1 float) + t (1 float) */
    const char *reg[] = { "data.source=sine", "model.loss=mse", "model.layers=dense:8:tanh, dense:1" };
    assert_int_equal(data_phase_bytes(reg, 3), 320 * 5 * (4 + 4));
    /* full batch: the stored set is served in place, nothing copied */
    const char *full[] = { "train.batch=0" };
    assert_int_equal(data_phase_bytes(full, 1), 0);
    /* prefetch: only the rows the training thread copied itself (the prefetch thread had
     * not got to them) count; the rest are copied outside the phase */
    const char *pre[] = { "data.prefetch=true" };
    uint64_t pb = data_phase_bytes(pre, 1);
    assert_true(pb <= 320 * 5 * (2 * 4 + 4));
    assert_int_equal(pb % (2 * 4 + 4), 0);              /* whole rows */
}

int test_engine_train(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_determinism, teardown),
        cmocka_unit_test_teardown(test_learns_and_reports, teardown),
        cmocka_unit_test_teardown(test_diverges, teardown),
        cmocka_unit_test_teardown(test_stop_request, teardown),
        cmocka_unit_test_teardown(test_sink_failure, teardown),
        cmocka_unit_test_teardown(test_run_create_errors, teardown),
        cmocka_unit_test_teardown(test_profiled_run, teardown),
        cmocka_unit_test_teardown(test_data_phase_bytes, teardown),
        cmocka_unit_test_teardown(test_fused_update_same_bits, teardown),
        cmocka_unit_test_teardown(test_dense_ksplit_threads, teardown),
    };
    return cmocka_run_group_tests_name("engine_train", tests, NULL, NULL);
}
