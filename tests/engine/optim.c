/* optim.c (tests) — optimizers on problems with a known optimum, their first steps by hand,
 * weight decay (L2 vs decoupled), learning-rate schedules at chosen steps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../engine/internal.h"

/* Quadratic bowl f(w) = 1/2 sum a_i (w_i - c_i)^2 with curvatures 1..10: minimiser c. */
#define N 8
static const float A[N] = { 1, 2, 3, 4, 5, 6, 8, 10 };
static const float C[N] = { 1, -2, 0.5f, 3, -1, 0, 2, -0.25f };

static void bowl_grad(const float *w, float *g)
{
    for (int i = 0; i < N; i++) g[i] = A[i] * (w[i] - C[i]);
}

/* Runs `steps` steps from w = 0 with the config's lr schedule; returns max |w - want|. */
static double run_bowl(const eng_train_config *tc, long steps, const float *want, const char *label)
{
    eng_optim *o;
    assert_int_equal(eng_optim_create(tc, N, &o), ENG_OK);
    float w[N] = { 0 }, g[N];
    for (long s = 0; s < steps; s++) {
        bowl_grad(w, g);
        eng_optim_step(o, w, g, eng_lr_at(tc, s, steps));
    }
    eng_optim_free(o);
    double err = 0.0;
    for (int i = 0; i < N; i++) if (fabs(w[i] - want[i]) > err) err = fabs(w[i] - want[i]);
    printf("  %-22s %5ld steps: max |w - w*| = %.2e\n", label, steps, err);
    return err;
}

static void test_converge(void **state)
{
    (void)state;
    eng_train_config sgd = { .optimizer = ENG_OPT_SGD, .lr = 0.15 };
    assert_true(run_bowl(&sgd, 300, C, "sgd") < 1e-4);
    eng_train_config mom = { .optimizer = ENG_OPT_MOMENTUM, .lr = 0.02, .momentum = 0.9 };
    assert_true(run_bowl(&mom, 400, C, "momentum") < 1e-4);
    mom.nesterov = 1;
    assert_true(run_bowl(&mom, 400, C, "nesterov") < 1e-4);
    /* Adam's steps stay ~lr in size: a cosine decay to 0 lets it settle */
    eng_train_config adam = { .optimizer = ENG_OPT_ADAM, .lr = 0.1, .beta1 = 0.9, .beta2 = 0.999,
                              .eps = 1e-8, .schedule = ENG_SCHED_COSINE, .min_lr = 0.0 };
    assert_true(run_bowl(&adam, 3000, C, "adam + cosine") < 1e-3);
    adam.optimizer = ENG_OPT_ADAMW;
    assert_true(run_bowl(&adam, 3000, C, "adamw (wd 0) + cosine") < 1e-3);
}

static void test_l2_optimum(void **state)
{
    (void)state;
    /* with L2 weight decay the minimiser of f + wd/2 |w|^2 is a c / (a + wd) */
    float want[N];
    double wd = 0.5;
    for (int i = 0; i < N; i++) want[i] = (float)(A[i] * C[i] / (A[i] + wd));
    eng_train_config sgd = { .optimizer = ENG_OPT_SGD, .lr = 0.15, .weight_decay = wd };
    assert_true(run_bowl(&sgd, 400, want, "sgd + L2") < 1e-4);
    eng_train_config mom = { .optimizer = ENG_OPT_MOMENTUM, .lr = 0.02, .momentum = 0.9, .weight_decay = wd };
    assert_true(run_bowl(&mom, 500, want, "momentum + L2") < 1e-4);
}

/* f = w^2/2 in one dimension, w0 = 1, lr 0.1, mu 0.9: two steps by hand. */
static void test_momentum_by_hand(void **state)
{
    (void)state;
    eng_train_config tc = { .optimizer = ENG_OPT_MOMENTUM, .lr = 0.1, .momentum = 0.9 };
    double want[2][2] = { { 0.9, 0.72 }, { 0.81, 0.5751 } }; /* classical, Nesterov */
    for (int nest = 0; nest < 2; nest++) {
        tc.nesterov = nest;
        eng_optim *o;
        assert_int_equal(eng_optim_create(&tc, 1, &o), ENG_OK);
        float w = 1.0f, g;
        for (int s = 0; s < 2; s++) {
            g = w;
            eng_optim_step(o, &w, &g, 0.1);
            printf("  %s step %d: w = %.6f (want %.6f)\n", nest ? "nesterov" : "classical", s + 1, w, want[nest][s]);
            assert_true(fabs(w - want[nest][s]) < 1e-6);
        }
        eng_optim_free(o);
    }
}

static void test_adam_by_hand(void **state)
{
    (void)state;
    /* the bias-corrected first step moves each weight by lr in the direction of -sign(g) */
    eng_train_config tc = { .optimizer = ENG_OPT_ADAM, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8 };
    eng_optim *o;
    assert_int_equal(eng_optim_create(&tc, 3, &o), ENG_OK);
    float w[3] = { 1, 1, 1 }, g[3] = { 5, -0.01f, 300 };
    eng_optim_step(o, w, g, 0.1);
    assert_true(fabs(w[0] - 0.9) < 1e-6 && fabs(w[1] - 1.1) < 1e-5 && fabs(w[2] - 0.9) < 1e-6);
    eng_optim_free(o);
}

static void test_adamw_decoupled(void **state)
{
    (void)state;
    /* zero gradient, w = 4, lr 0.1, wd 0.01: AdamW shrinks w by lr*wd*w only; Adam with L2
     * sees g = wd*w and takes a full lr-sized step */
    eng_train_config tc = { .optimizer = ENG_OPT_ADAMW, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                            .weight_decay = 0.01 };
    eng_optim *o;
    float w = 4.0f, g = 0.0f;
    assert_int_equal(eng_optim_create(&tc, 1, &o), ENG_OK);
    eng_optim_step(o, &w, &g, 0.1);
    eng_optim_free(o);
    printf("  adamw: w = %.6f (want 3.996), ", w);
    assert_true(fabs(w - 3.996) < 1e-6);
    tc.optimizer = ENG_OPT_ADAM;
    w = 4.0f;
    assert_int_equal(eng_optim_create(&tc, 1, &o), ENG_OK);
    eng_optim_step(o, &w, &g, 0.1);
    eng_optim_free(o);
    printf("adam + L2: w = %.6f (want 3.9)\n", w);
    assert_true(fabs(w - 3.9) < 1e-5);
}

static void test_nesterov_differs(void **state)
{
    (void)state;
    eng_train_config tc = { .optimizer = ENG_OPT_MOMENTUM, .lr = 0.02, .momentum = 0.9 };
    float w1[N] = { 0 }, w2[N] = { 0 }, g[N];
    eng_optim *a, *b;
    assert_int_equal(eng_optim_create(&tc, N, &a), ENG_OK);
    tc.nesterov = 1;
    assert_int_equal(eng_optim_create(&tc, N, &b), ENG_OK);
    double f1 = 0, f2 = 0;
    for (int s = 0; s < 20; s++) {
        bowl_grad(w1, g); eng_optim_step(a, w1, g, 0.02);
        bowl_grad(w2, g); eng_optim_step(b, w2, g, 0.02);
    }
    for (int i = 0; i < N; i++) {
        f1 += 0.5 * A[i] * (w1[i] - C[i]) * (w1[i] - C[i]);
        f2 += 0.5 * A[i] * (w2[i] - C[i]) * (w2[i] - C[i]);
    }
    printf("  after 20 steps: classical f = %.5f, nesterov f = %.5f\n", f1, f2);
    assert_memory_not_equal(w1, w2, sizeof w1);
    eng_optim_free(a);
    eng_optim_free(b);
}

static void test_create_errors(void **state)
{
    (void)state;
    eng_optim *o;
    eng_train_config tc = { .optimizer = ENG_OPT_NEWTON, .lr = 1 };
    assert_int_equal(eng_optim_create(&tc, 4, &o), ENG_EINVAL);
    assert_null(o);
    printf("  %s\n", eng_error());
    assert_non_null(strstr(eng_error(), "eng_newton_create"));
    tc = (eng_train_config){ .optimizer = ENG_OPT_ADAM, .beta1 = 0.9, .beta2 = 0.999, .eps = 0 };
    assert_int_equal(eng_optim_create(&tc, 4, &o), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "eps must be > 0"));
    tc = (eng_train_config){ .optimizer = ENG_OPT_MOMENTUM, .momentum = 1.0 };
    assert_int_equal(eng_optim_create(&tc, 4, &o), ENG_EINVAL);
    tc = (eng_train_config){ .optimizer = ENG_OPT_SGD, .weight_decay = -1 };
    assert_int_equal(eng_optim_create(&tc, 4, &o), ENG_EINVAL);
}

/* eng_optim_defer refuses a map outside the parameters and a map past the list's end (the
 * caller then applies it itself); a step takes the maps handed before it and only those. */
static void test_defer_limits(void **state)
{
    (void)state;
    eng_optim *o;
    eng_train_config tc = { .optimizer = ENG_OPT_SGD, .lr = 1 };
    assert_int_equal(eng_optim_create(&tc, 4, &o), ENG_OK);
    eng_optim_map m = { .off = 2, .n = 3, .cols = 3, .mu = 0.0f, .s = 2.0f };
    assert_int_equal(eng_optim_defer(o, &m), -1);            /* [2, 5) of 4 */
    m = (eng_optim_map){ .off = 5, .n = 0, .cols = 1, .s = 1.0f };
    assert_int_equal(eng_optim_defer(o, &m), -1);
    m = (eng_optim_map){ .off = 0, .n = 4, .cols = 0, .sub = A };
    assert_int_equal(eng_optim_defer(o, &m), -1);            /* a centring map needs its columns */
    m = (eng_optim_map){ .off = 0, .n = 3, .cols = 2, .sub = A };
    assert_int_equal(eng_optim_defer(o, &m), -1);            /* and whole rows */
    m = (eng_optim_map){ .off = 1, .n = 0, .cols = 1, .mu = 0.5f, .s = 2.0f };  /* empty: maps nothing */
    for (int i = 0; i < ENG_OPTIM_MAX_MAPS; i++) assert_int_equal(eng_optim_defer(o, &m), 0);
    assert_int_equal(eng_optim_defer(o, &m), -1);
    float w[4] = { 0 }, g[4] = { 1, 1, 1, 1 };
    eng_optim_step(o, w, g, 1.0);
    for (int i = 0; i < 4; i++) assert_true(w[i] == -1.0f);
    m = (eng_optim_map){ .off = 0, .n = 4, .cols = 4, .mu = 0.0f, .s = 3.0f };
    assert_int_equal(eng_optim_defer(o, &m), 0);             /* the list is free again */
    eng_optim_step(o, w, g, 1.0);
    for (int i = 0; i < 4; i++) assert_true(w[i] == -4.0f);
    eng_optim_step(o, w, g, 1.0);                            /* and this step has no map */
    for (int i = 0; i < 4; i++) assert_true(w[i] == -5.0f);
    eng_optim_free(o);
}

static void test_step_allocates_nothing(void **state)
{
    (void)state;
    eng_train_config tc = { .optimizer = ENG_OPT_ADAMW, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1 };
    eng_optim *o;
    assert_int_equal(eng_optim_create(&tc, N, &o), ENG_OK);
    float w[N] = { 0 }, g[N];
    size_t live = prof_mem_live();
    prof_mem_reset_peak();
    for (int s = 0; s < 10; s++) { bowl_grad(w, g); eng_optim_step(o, w, g, 0.01); }
    assert_int_equal(prof_mem_peak(), live);
    eng_optim_free(o);
}

#define LR_IS(tc, step, total, want)                                                     \
    do {                                                                                  \
        double got_ = eng_lr_at(&(tc), (step), (total));                                 \
        if (fabs(got_ - (want)) > 1e-12) {                                               \
            printf("  lr at %ld of %ld: got %.12g, want %.12g\n", (long)(step), (long)(total), got_, (double)(want)); \
            fail();                                                                       \
        }                                                                                 \
    } while (0)

static void test_schedules(void **state)
{
    (void)state;
    eng_train_config tc = { .lr = 0.1, .schedule = ENG_SCHED_CONSTANT };
    LR_IS(tc, 0, 100, 0.1); LR_IS(tc, 99, 100, 0.1);

    tc.schedule = ENG_SCHED_STEP; tc.step_size = 30; tc.gamma = 0.5;
    LR_IS(tc, 0, 100, 0.1); LR_IS(tc, 29, 100, 0.1); LR_IS(tc, 30, 100, 0.05);
    LR_IS(tc, 60, 100, 0.025); LR_IS(tc, 99, 100, 0.0125);

    tc.schedule = ENG_SCHED_COSINE; tc.min_lr = 0.0;
    LR_IS(tc, 0, 100, 0.1); LR_IS(tc, 50, 100, 0.05); LR_IS(tc, 100, 100, 0.0);
    LR_IS(tc, 25, 100, 0.05 * (1.0 + cos(M_PI / 4)));
    tc.min_lr = 0.01;
    LR_IS(tc, 50, 100, 0.055);

    tc.schedule = ENG_SCHED_LINEAR; tc.min_lr = 0.01;
    LR_IS(tc, 0, 100, 0.1); LR_IS(tc, 50, 100, 0.055); LR_IS(tc, 100, 100, 0.01); LR_IS(tc, 500, 100, 0.01);

    /* warm-up over 10 steps, then cosine over the remaining 100 */
    tc.schedule = ENG_SCHED_COSINE; tc.min_lr = 0.0; tc.warmup = 10;
    LR_IS(tc, 0, 110, 0.01); LR_IS(tc, 4, 110, 0.05); LR_IS(tc, 9, 110, 0.1);
    LR_IS(tc, 10, 110, 0.1); LR_IS(tc, 60, 110, 0.05);
    /* warm-up with the step schedule counts decay steps after the warm-up */
    tc.schedule = ENG_SCHED_STEP; tc.step_size = 30; tc.gamma = 0.5;
    LR_IS(tc, 39, 110, 0.1); LR_IS(tc, 40, 110, 0.05);
}

/* A whole model trained to a known optimum: XOR (4 points) is fitted exactly. */
static void test_train_xor(void **state)
{
    (void)state;
    eng_model_config mc = { .n_layers = 2, .loss = ENG_LOSS_SOFTMAX_XENT };
    mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 8, .act = ENG_ACT_TANH };
    mc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 2 };
    int in[3] = { 1, 1, 2 };
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 2, 4, 7, NULL, &m), ENG_OK);
    eng_train_config tc = { .optimizer = ENG_OPT_ADAM, .lr = 0.05, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8 };
    eng_optim *o;
    assert_int_equal(eng_optim_create(&tc, eng_model_n_params(m), &o), ENG_OK);
    float x[8] = { 0, 0, 0, 1, 1, 0, 1, 1 };
    int32_t y[4] = { 0, 1, 1, 0 };
    double first = 0, loss = 0;
    int correct = 0;
    for (int s = 0; s < 500; s++) {
        loss = eng_model_forward(m, x, 4, y, NULL, &correct);
        if (!s) first = loss;
        eng_model_backward(m);
        eng_optim_step(o, eng_model_params(m), eng_model_grads(m), tc.lr);
    }
    printf("  xor: loss %.4f -> %.5f, %d/4 correct\n", first, loss, correct);
    assert_true(loss < 0.01);
    assert_int_equal(correct, 4);
    eng_optim_free(o);
    eng_model_free(m);
}

int test_engine_optim(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_converge),
        cmocka_unit_test(test_l2_optimum),
        cmocka_unit_test(test_momentum_by_hand),
        cmocka_unit_test(test_adam_by_hand),
        cmocka_unit_test(test_adamw_decoupled),
        cmocka_unit_test(test_nesterov_differs),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_defer_limits),
        cmocka_unit_test(test_step_allocates_nothing),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_train_xor),
    };
    return cmocka_run_group_tests_name("engine_optim", tests, NULL, NULL);
}
