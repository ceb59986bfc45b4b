/* grad_bench.c — per-step cost of each gradient transform (znorm, centralize, clip_norm,
 * clip_value) and of layer telemetry at log_every = 50, on the Fashion-MNIST MLP step
 * (784-256-128-10 ReLU, batch 128, SGD momentum), as on/off ratios of the step time.
 *
 * One training loop per contender and rep; inside it a transform is on every other step,
 * telemetry on the first step of every other block of 50 (the same model, data and load;
 * a slow spell of the machine, which can last a block, falls on both). Each step times its
 * stretch from the end of backward to the end of the step: the update alone when off; the
 * contender and the update when on, as a run makes them (the last transform's map applied
 * by the update, eng_grad_apply). The row is 1 + (median on-stretch - median off-stretch,
 * never less than the contender's own calls) / the median off-step time (see measure); the
 * absolute column adds the same ratio of the minima, which load inflates least. "on" for telemetry = eng_telem_before/after on the first step of each on-block
 * (1 in 50 steps, as log_every = 50 does); the sink's cost (the store) is not part of it.
 * Output: "ENV key value" and "ROW<TAB>section<TAB>label<TAB>median<TAB>min<TAB>max<TAB>
 * absolute<TAB>goal<TAB>verdict" lines for tests/bench/run.sh.
 * --in-place: every transform in place, its map not handed to the update (what that saves).
 * usage: grad_bench [--quick] [--reps N] [--data DIR] [--in-place] */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/internal.h"
#include "bench.h"

#define BLOCK 50
enum { C_ZNORM, C_CENTRALIZE, C_CLIP_NORM, C_CLIP_VALUE, C_TELEMETRY, N_CONTENDERS };
static const char *const names[N_CONTENDERS] = { "znorm", "centralize", "clip_norm", "clip_value", "telemetry (log_every 50)" };

typedef struct {
    eng_experiment *ex;
    eng_dataset *ds;
    eng_model *m;
    eng_optim *o;
    eng_batcher *b;
    eng_grad *g;
    eng_telem *t;
    double lr;
    int in_place;       /* --in-place: the maps not handed to the update */
} bench_ctx;

/* Momentum SGD's learning rate for each contender: znorm gives every tensor unit std, and
 * at the others' 0.05 its steps killed every ReLU within a few hundred steps (all later
 * gradients exactly 0, the momentum decaying through subnormals: a bench of that times
 * zeros and subnormal arithmetic); 1e-4 is samples/gradient-lab.ini's sgd-znorm. */
static const double lr_of[N_CONTENDERS] = { 1e-4, 0.05, 0.05, 0.05, 0.05 };

static int setup(const char *dir, int n_train, bench_ctx *c)
{
    char path[] = "/tmp/nnbench-grad-bench-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) { fprintf(stderr, "grad_bench: mkstemp: %s\n", strerror(errno)); return -1; }
    FILE *f = fdopen(fd, "w");
    if (!f) { close(fd); unlink(path); return -1; }
    fprintf(f, "[data]\nsource = idx\npath = %s\nn = %d\nn_test = 1\nnormalize = scale\n"
               "[model]\nlayers = dense:256:relu, dense:128:relu, dense:10\ninit = he\n"
               "[train]\noptimizer = momentum\nlr = 0.05\nmomentum = 0.9\nbatch = 128\n", dir, n_train);
    fclose(f);
    int rc = eng_experiment_load(path, NULL, 0, &c->ex);
    unlink(path);
    if (rc) { fprintf(stderr, "grad_bench: %s\n", eng_error()); return -1; }
    eng_config *cfg = &c->ex->variants[0];
    rc = eng_data_load(&cfg->data, 1, &c->ds);
    if (!rc) rc = eng_batcher_create(c->ds, 128, 1, 0, 1, &c->b);
    if (rc) fprintf(stderr, "grad_bench: %s\n", eng_error());
    return rc;
}

static void free_model(bench_ctx *c)
{
    eng_grad_free(c->g);
    eng_telem_free(c->t);
    eng_optim_free(c->o);
    eng_model_free(c->m);
    c->g = NULL;
    c->t = NULL;
    c->o = NULL;
    c->m = NULL;
}

/* A fresh model (the same initial parameters each time), optimizer and contender `who`. */
static int fresh_model(bench_ctx *c, int who)
{
    free_model(c);
    eng_config *cfg = &c->ex->variants[0];
    eng_train_config tc = cfg->train;
    tc.lr = c->lr = lr_of[who];
    int rc = eng_model_build(&cfg->model, c->ds->in_shape, c->ds->n_classes, 128, 1, NULL, &c->m);
    if (!rc) rc = eng_model_prepare_gemms(c->m, 128, 1);
    if (!rc) rc = eng_optim_create(&tc, eng_model_n_params(c->m), &c->o);
    const eng_grad_kind kinds[4] = { ENG_GRAD_ZNORM, ENG_GRAD_CENTRALIZE, ENG_GRAD_CLIP_NORM, ENG_GRAD_CLIP_VALUE };
    if (!rc && who < C_TELEMETRY) {
        tc.n_gradient = 1;
        tc.gradient[0] = kinds[who];
        tc.znorm_eps = 1e-8;
        tc.clip_norm = 1.0;
        tc.clip_value = 0.01; /* small enough to clamp for real */
        rc = eng_grad_create(&tc, c->m, NULL, &c->g);
    }
    if (!rc && who == C_TELEMETRY) rc = eng_telem_create(c->m, NULL, &c->t);
    if (rc) fprintf(stderr, "grad_bench: %s\n", eng_error());
    return rc;
}

static void teardown(bench_ctx *c)
{
    free_model(c);
    eng_batcher_destroy(c->b);
    eng_data_free(c->ds);
    eng_experiment_free(c->ex);
}

/* The model still trains after a contender's steps: a finite loss and fewer than half of
 * its gradients exactly 0 (a dead ReLU net has nearly all of them 0), else the figure
 * would not be a training step's. */
static void check_alive(bench_ctx *c, int who, double loss)
{
    const float *g = eng_model_grads(c->m);
    size_t n = eng_model_n_params(c->m), zeros = 0;
    for (size_t i = 0; i < n; i++) zeros += g[i] == 0.0f;
    if (isfinite(loss) && 2 * zeros < n) return;
    fprintf(stderr, "grad_bench: %s at lr %g: the model stopped training (loss %g, %zu of %zu gradients 0); "
            "its steps are not a training step's\n", names[who], c->lr, loss, zeros, n);
    exit(1);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

/* `steps` steps; a transform on every other step, telemetry on the first step of every
 * other block of BLOCK (on and off steps in blocks of their own sampled different spells
 * of the machine). Each step's stretch after backward (the update, and on an on-step the
 * contender) is timed on its own, and the contender's own calls within it; its time is the
 * median on-stretch less the median off-stretch, but never less than the median of its
 * own calls; the ratio is 1 + that / (median off-step time): a loaded machine disturbs it
 * far less than a difference of two whole-step times (that one is returned in *whole, for
 * context). The floor: in some processes (the same binary, even pinned to one CPU) the
 * plain update read the gradient backward had just written at 41-49 us instead of 26-30,
 * and a transform whose pass read it first took that wait away from the update, so that
 * centralize read as costing nothing. Telemetry runs once per on-block: its time per step
 * is its time per call / BLOCK. */
static double measure(bench_ctx *c, int who, int steps, double *own, double *step, double *whole, double *minratio)
{
    static double t_on[4096], t_off[4096], u_on[4096], u_off[4096], p_on[4096];
    int n_on = 0, n_off = 0, n_uon = 0;
    double loss = 0;
    if (fresh_model(c, who)) exit(1);
    for (int s = 0; s < steps; s++) {
        int first = s % BLOCK == 0;
        int on = who == C_TELEMETRY ? (s / BLOCK) % 2 == 1 : s % 2 == 1;
        eng_batch b;
        if (eng_batcher_next(c->b, &b)) { fprintf(stderr, "grad_bench: %s\n", eng_error()); exit(1); }
        double t0 = now_s();
        loss = eng_model_forward(c->m, b.x, b.rows, b.y, NULL, NULL);
        eng_model_backward(c->m);
        double a0 = now_s();
        if (on && who == C_TELEMETRY && first) eng_telem_before(c->t);
        if (on && who < C_TELEMETRY) eng_grad_apply(c->g, c->in_place ? NULL : c->o);
        double a1 = now_s();
        eng_optim_step(c->o, eng_model_params(c->m), eng_model_grads(c->m), c->lr);
        double a2 = now_s();
        if (on && who == C_TELEMETRY && first) eng_telem_after(c->t);
        double t1 = now_s();
        if (b.rows != 128) continue;  /* the epoch's short last batch: not the step measured */
        if (on) {
            t_on[n_on++] = t1 - t0;
            if (who < C_TELEMETRY || first) {
                p_on[n_uon] = (a1 - a0) + (t1 - a2);
                u_on[n_uon++] = t1 - a0;
            }
        } else {
            u_off[n_off] = t1 - a0;
            t_off[n_off++] = t1 - t0;
        }
    }
    check_alive(c, who, loss);
    double per = who == C_TELEMETRY ? BLOCK : 1;
    /* the fastest of each: what an unloaded machine approaches */
    *minratio = 1.0 + fmax(min_of(u_on, n_uon) - min_of(u_off, n_off), min_of(p_on, n_uon)) / per / min_of(t_off, n_off);
    *own = fmax(median(u_on, n_uon) - median(u_off, n_off), median(p_on, n_uon));
    *step = median(t_off, n_off);
    *whole = median(t_on, n_on) / *step;
    return 1.0 + *own / per / *step;
}

int main(int argc, char **argv)
{
    int quick = 0, reps = 5, in_place = 0;
    const char *dir = "/usr/share/datasets/fashion-mnist";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--in-place")) in_place = 1;
        else { fprintf(stderr, "usage: grad_bench [--quick] [--reps N] [--data DIR] [--in-place]\n"); return 2; }
    }
    if (reps < 1 || reps > 64) reps = 5;
    /* One BLAS thread: the step time the ratios divide by is then the least noisy one. */
    openblas_set_num_threads(1);
    bench_ctx c;
    memset(&c, 0, sizeof c);
    c.in_place = in_place;
    if (setup(dir, 10000, &c)) { teardown(&c); return 1; }
    printf("ENV\tgrad_bench_threads\t1\n");
    if (in_place) printf("ENV\tgrad_bench_maps\tin place (--in-place)\n");
    int steps = quick ? 4 * BLOCK : 8 * BLOCK;
    double ratio[N_CONTENDERS][64], own[N_CONTENDERS][64], step[N_CONTENDERS][64], whole[N_CONTENDERS][64];
    double mins[N_CONTENDERS][64];
    double warm_own, warm_step, warm_whole, warm_min;
    measure(&c, C_ZNORM, 2 * BLOCK, &warm_own, &warm_step, &warm_whole, &warm_min);
    for (int r = 0; r < reps; r++)
        for (int w = 0; w < N_CONTENDERS; w++) {
            ratio[w][r] = measure(&c, w, steps, &own[w][r], &step[w][r], &whole[w][r], &mins[w][r]);
            fprintf(stderr, "grad_bench: rep %d %s: %.4f (of minima %.4f), own %.1f us, step %.3f ms, whole-step on/off %.4f\n",
                    r + 1, names[w], ratio[w][r], mins[w][r], 1e6 * own[w][r], 1e3 * step[w][r], whole[w][r]);
        }
    size_t n_params = eng_model_n_params(c.m);
    for (int w = 0; w < N_CONTENDERS; w++) {
        stats s = stats_of(ratio[w], reps), so = stats_of(own[w], reps), ss = stats_of(step[w], reps);
        stats sw = stats_of(whole[w], reps), sm = stats_of(mins[w], reps);
        double goal = w == C_TELEMETRY ? 1.01 : 1.02;
        char label[128], abs[256], goal_s[32];
        snprintf(label, sizeof label, "gradient %s: step on / off (MLP 784-256-128-10, b128, 1T)", names[w]);
        snprintf(abs, sizeof abs, "%s %.1f us per %s; step %.2f ms; ratio of minima %.4f; whole-step on/off %.3f; "
                 "momentum lr %g; %zu params", w == C_TELEMETRY ? "telemetry" : "transform", 1e6 * so.med,
                 w == C_TELEMETRY ? "logged step" : "step", 1e3 * ss.med, sm.med, sw.med, lr_of[w], n_params);
        snprintf(goal_s, sizeof goal_s, "<= %.2f", goal);
        printf("ROW\t11\t%s\t%.4f\t%.4f\t%.4f\t%s\t%s\t%s\n", label, s.med, s.min, s.max, abs, goal_s,
               s.med <= goal ? "met" : "MISSED");
    }
    teardown(&c);
    return 0;
}
