/* scaling_bench.c — row 6 of `make bench`: the engine's step time and peak memory as the MLP
 * widens from 1e4 to 1e7 parameters (784-h-h-10, batch 128, SGD momentum), with the fitted
 * exponents (least squares on log-log). BLAS 1-threaded, random inputs (no data loading).
 *
 * Output: "ROW<TAB>6<TAB>label<TAB>median<TAB>min<TAB>max<TAB>absolute<TAB>goal<TAB>verdict"
 * lines for tests/bench/run.sh.
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../engine/core.h"
#include "bench.h"
#include "../../profiler/profiler.h"

#define IN 784
#define OUT 10
#define BATCH 128
#define MAX_SIZES 8
#define MAX_REPS 8

static double params_of(int h) { return (double)IN * h + h + (double)h * h + h + (double)h * OUT + OUT; }

/* The hidden width whose 784-h-h-10 MLP has about `target` parameters. */
static int width_for(double target)
{
    int h = 1;
    while (params_of(h + 1) <= target) h++;
    return params_of(h + 1) - target < target - params_of(h) ? h + 1 : h;
}

/* Builds the model, runs warm-up steps, then times steps for about 0.25 s. *step_s gets the
 * mean step time (forward + backward + optimizer), *peak the engine's peak bytes. */
static int measure(int h, const float *x, const int32_t *y, double *step_s, double *peak, size_t *n_params)
{
    eng_model_config mc;
    memset(&mc, 0, sizeof mc);
    mc.n_layers = 3;
    mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = h, .act = ENG_ACT_RELU };
    mc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = h, .act = ENG_ACT_RELU };
    mc.layers[2] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = OUT, .act = ENG_ACT_NONE };
    mc.loss = ENG_LOSS_SOFTMAX_XENT;
    mc.init = ENG_INIT_HE;
    eng_train_config tc;
    memset(&tc, 0, sizeof tc);
    tc.optimizer = ENG_OPT_MOMENTUM;
    tc.lr = 0.01;
    tc.momentum = 0.9;
    tc.batch = BATCH;

    size_t base = prof_mem_live();
    prof_mem_reset_peak();
    eng_model *m = NULL;
    eng_optim *o = NULL;
    const int in_shape[3] = { 1, 1, IN };
    int rc = eng_model_build(&mc, in_shape, OUT, BATCH, 1, NULL, &m);
    if (!rc) rc = eng_model_prepare_gemms(m, BATCH, 1);
    if (!rc) rc = eng_optim_create(&tc, eng_model_n_params(m), &o);
    if (rc) {
        fprintf(stderr, "scaling_bench: h=%d: %s\n", h, eng_error());
        eng_optim_free(o);
        eng_model_free(m);
        return -1;
    }
    *n_params = eng_model_n_params(m);
    float *p = eng_model_params(m);
    const float *g = eng_model_grads(m);
    for (int k = 0; k < 2; k++) {
        eng_model_forward(m, x, BATCH, y, NULL, NULL);
        eng_model_backward(m);
        eng_optim_step(o, p, g, tc.lr);
    }
    int steps = 0;
    double t0 = now_s(), t = 0;
    do {
        eng_model_forward(m, x, BATCH, y, NULL, NULL);
        eng_model_backward(m);
        eng_optim_step(o, p, g, tc.lr);
        steps++;
        t = now_s() - t0;
    } while (t < 0.25 && steps < 2000);
    *step_s = t / steps;
    *peak = (double)(prof_mem_peak() - base);
    eng_optim_free(o);
    eng_model_free(m);
    return 0;
}

static void row(const char *label, stats r, const char *absolute, const char *goal, const char *verdict)
{
    printf("ROW\t6\t%s\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\n", label, r.med, r.min, r.max, absolute, goal, verdict);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    static const double targets[] = { 1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7 };
    int m = quick ? 5 : 7, reps = quick ? 2 : 3;
    openblas_set_num_threads(1);
    printf("ENV\tscaling_threads\t1\n");

    float *x = malloc(sizeof(float) * BATCH * IN);
    int32_t *y = malloc(sizeof(int32_t) * BATCH);
    if (!x || !y) { free(x); free(y); fprintf(stderr, "scaling_bench: out of memory\n"); return 1; }
    uint64_t s = 12345;
    for (int i = 0; i < BATCH * IN; i++) { s = s * 6364136223846793005ull + 1442695040888963407ull; x[i] = (float)(s >> 40) / (float)(1 << 24); }
    for (int i = 0; i < BATCH; i++) y[i] = i % OUT;

    double step[MAX_REPS][MAX_SIZES], mem[MAX_SIZES], np[MAX_SIZES];
    int failed = 0;
    /* Sizes interleaved within each rep; exponents fitted rep by rep. */
    for (int k = 0; k < reps && !failed; k++)
        for (int i = 0; i < m && !failed; i++) {
            int h = width_for(targets[i]);
            size_t n = 0;
            double peak = 0;
            if (measure(h, x, y, &step[k][i], &peak, &n)) { failed = 1; break; }
            np[i] = (double)n;
            mem[i] = peak;
            fprintf(stderr, "scaling_bench: rep %d: h=%d, %zu params: step %.3f ms, peak %.1f MB (%.1f B/param)\n",
                    k + 1, h, n, step[k][i] * 1e3, peak / 1e6, peak / (double)n);
        }
    free(x);
    free(y);
    if (failed) return 1;

    double e_step[MAX_REPS], e_hi[MAX_REPS], med_step[MAX_SIZES];
    for (int k = 0; k < reps; k++) {
        e_step[k] = fit_exponent(np, step[k], m);
        e_hi[k] = fit_exponent(np + m - 3, step[k] + m - 3, 3);  /* the largest three sizes */
    }
    for (int i = 0; i < m; i++) {
        double v[MAX_REPS];
        for (int k = 0; k < reps; k++) v[k] = step[k][i];
        med_step[i] = stats_of(v, reps).med;
    }
    char abs_[256];
    /* FLOPs of a step: 2 per weight per row forward, 4 backward (dW and dX) = 6 per weight. */
    double gf_lo = 6.0 * np[0] * BATCH / med_step[0] / 1e9, gf_hi = 6.0 * np[m - 1] * BATCH / med_step[m - 1] / 1e9;
    snprintf(abs_, sizeof abs_, "%.0e params: %.3f ms/step (%.0f GFLOP/s); %.0e: %.1f ms/step (%.0f GFLOP/s)",
             np[0], med_step[0] * 1e3, gf_lo, np[m - 1], med_step[m - 1] * 1e3, gf_hi);
    stats se = stats_of(e_step, reps);
    row("step time vs parameters, fitted exponent", se, abs_, "~1 (large)", "info");
    stats sh = stats_of(e_hi, reps);
    snprintf(abs_, sizeof abs_, "the same fitted on the largest three sizes (%.0e..%.0e params)", np[m - 3], np[m - 1]);
    row("step time vs parameters, exponent at the top", sh, abs_, "~1", sh.med > 0.8 && sh.med < 1.2 ? "met" : "off");
    double e_mem = fit_exponent(np, mem, m);
    stats sm = { e_mem, e_mem, e_mem };
    snprintf(abs_, sizeof abs_, "peak engine bytes: %.2f MB at %.0e params (%.1f B/param), %.0f MB at %.0e (%.1f B/param)",
             mem[0] / 1e6, np[0], mem[0] / np[0], mem[m - 1] / 1e6, np[m - 1], mem[m - 1] / np[m - 1]);
    row("peak memory vs parameters, fitted exponent", sm, abs_, "~1", e_mem > 0.8 && e_mem < 1.2 ? "met" : "off");
    return 0;
}
