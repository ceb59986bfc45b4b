/* gradient.c (tests) — the gradient lab: each transform against its closed form (znorm:
 * mean 0 / std 1; centralize: zero mean per output's fan-in; clip_norm: global norm equals
 * the threshold when above it; clip_value: a clamp), their order in a list, the config
 * list, and the telemetry values on a known gradient, through a run and its sink. */
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

#include "../../engine/internal.h"
#include "isa_paths.h"

/* Deterministic values with a non-zero mean and uneven scale. */
static void fill(float *g, size_t n, unsigned seed, float offset, float scale)
{
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        g[i] = offset + scale * ((float)(s >> 8) / 16777216.0f - 0.5f);
    }
}

static void mean_std(const float *g, size_t n, double *mean, double *std)
{
    double s = 0, q = 0;
    for (size_t i = 0; i < n; i++) s += g[i];
    double m = s / (double)n;
    for (size_t i = 0; i < n; i++) q += (g[i] - m) * (g[i] - m);
    *mean = m;
    *std = sqrt(q / (double)n);
}

static void test_znorm(void **state)
{
    (void)state;
    /* sizes around the vector lanes and the fold block: tails must be handled */
    const size_t sizes[] = { 2, 15, 16, 17, 1000, 1024, 1025, 100003 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        float *g = malloc(n * sizeof *g);
        fill(g, n, (unsigned)k, 0.3f, 0.1f);
        eng_grad_znorm(g, n, 1e-8f);
        double m, s;
        mean_std(g, n, &m, &s);
        printf("  znorm n=%-6zu mean %+.2e std %.6f\n", n, m, s);
        assert_true(fabs(m) < 1e-4);
        assert_true(fabs(s - 1.0) < 1e-3);
        free(g);
    }
    /* a mean 300x the spread: the variance must not cancel away */
    size_t n = 100003;
    float *g = malloc(n * sizeof *g);
    fill(g, n, 9, 3.0f, 0.01f);
    eng_grad_znorm(g, n, 1e-8f);
    double m, s;
    mean_std(g, n, &m, &s);
    printf("  znorm offset 3, spread 0.01: mean %+.2e std %.6f\n", m, s);
    assert_true(fabs(m) < 1e-3 && fabs(s - 1.0) < 1e-3);
    free(g);
    /* one element: left alone; a constant tensor: all zero (no division by zero) */
    float one = 5.0f;
    eng_grad_znorm(&one, 1, 1e-8f);
    assert_true(one == 5.0f);
    float c[40];
    for (int i = 0; i < 40; i++) c[i] = 0.25f;
    eng_grad_znorm(c, 40, 1e-8f);
    for (int i = 0; i < 40; i++) assert_true(c[i] == 0.0f);
}

static void test_centralize(void **state)
{
    (void)state;
    enum { R = 37, C = 23 };
    float g[R * C], orig[R * C], colsum[C];
    fill(g, R * C, 7, 1.5f, 2.0f);
    memcpy(orig, g, sizeof g);
    /* dense W [in x out]: each column (an output's fan-in) gets zero mean */
    eng_grad_centralize(g, R, C, 1, colsum);
    for (int c = 0; c < C; c++) {
        double s = 0, so = 0;
        for (int r = 0; r < R; r++) { s += g[r * C + c]; so += orig[r * C + c]; }
        assert_true(fabs(s / R) < 1e-5);
        /* and differs from the input by exactly that column's mean */
        for (int r = 0; r < R; r++) assert_true(fabs(g[r * C + c] - (orig[r * C + c] - so / R)) < 1e-5);
    }
    /* conv W [F x C*K*K]: each row (a filter's fan-in) gets zero mean */
    memcpy(g, orig, sizeof g);
    eng_grad_centralize(g, R, C, 0, NULL);
    for (int r = 0; r < R; r++) {
        double s = 0;
        for (int c = 0; c < C; c++) s += g[r * C + c];
        assert_true(fabs(s / C) < 1e-5);
    }
    /* a fan-in of one would be zeroed: left alone */
    float row[5] = { 1, 2, 3, 4, 5 };
    eng_grad_centralize(row, 1, 5, 1, colsum);
    eng_grad_centralize(row, 5, 1, 0, NULL);
    assert_true(row[0] == 1 && row[4] == 5);
}

static void test_clip_kernels(void **state)
{
    (void)state;
    enum { N = 1001 };
    float g[N];
    fill(g, N, 3, -0.2f, 4.0f);
    double ref = 0;
    for (int i = 0; i < N; i++) ref += (double)g[i] * g[i];
    assert_true(fabs(eng_grad_sumsq(g, N) - ref) < 1e-6 * ref);
    float o[N];
    memcpy(o, g, sizeof g);
    eng_grad_clamp(g, N, 0.5f);
    for (int i = 0; i < N; i++)
        assert_true(g[i] == (o[i] > 0.5f ? 0.5f : o[i] < -0.5f ? -0.5f : o[i]));
    double mu, var, s2, mx, rmu, rsd;
    eng_grad_stats(o, N, &mu, &var, &s2, &mx);
    mean_std(o, N, &rmu, &rsd);
    double rm = 0;
    for (int i = 0; i < N; i++) if (fabs(o[i]) > rm) rm = fabs(o[i]);
    assert_true(fabs(mu - rmu) < 1e-6);
    assert_true(fabs(sqrt(var) - rsd) < 1e-6 * rsd);
    assert_true(fabs(s2 - ref) < 1e-6 * ref);
    assert_true(mx == rm);
}

/* A two-layer dense model (6 -> 5 -> 3), gradients filled by hand. */
static eng_model *small_model(void)
{
    eng_model_config mc = { .n_layers = 2, .loss = ENG_LOSS_SOFTMAX_XENT };
    mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 5, .act = ENG_ACT_RELU };
    mc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 3 };
    int in[3] = { 1, 1, 6 };
    eng_model *m = NULL;
    assert_int_equal(eng_model_build(&mc, in, 3, 4, 1, NULL, &m), ENG_OK);
    return m;
}

static double global_norm(const eng_model *m)
{
    double s = 0;
    for (size_t i = 0; i < m->n_params; i++) s += (double)m->grads[i] * m->grads[i];
    return sqrt(s);
}

static void test_pipeline(void **state)
{
    (void)state;
    eng_model *m = small_model();
    eng_train_config tc = { .n_gradient = 2, .gradient = { ENG_GRAD_CENTRALIZE, ENG_GRAD_CLIP_NORM },
                            .znorm_eps = 1e-8, .clip_norm = 0.5, .clip_value = 1 };
    eng_grad *g;
    assert_int_equal(eng_grad_create(&tc, m, NULL, &g), ENG_OK);
    fill(m->grads, m->n_params, 11, 0.7f, 3.0f);
    eng_grad_apply(g, NULL);
    /* centralize, then clip: the columns of each W have zero mean AND the norm is 0.5 */
    printf("  centralize, clip_norm 0.5: global norm %.6f\n", global_norm(m));
    assert_true(fabs(global_norm(m) - 0.5) < 1e-5);
    for (int l = 0; l < 2; l++) {
        eng_layer *L = &m->layers[l];
        for (size_t c = 0; c < L->out_size; c++) {
            double s = 0;
            for (size_t r = 0; r < L->in_size; r++) s += L->dw[r * L->out_size + c];
            assert_true(fabs(s) < 1e-5);
        }
    }
    /* below the threshold clip_norm changes nothing */
    float keep[64];
    assert_true(m->n_params <= 64);
    for (size_t i = 0; i < m->n_params; i++) m->grads[i] *= 0.5f;
    memcpy(keep, m->grads, m->n_params * sizeof(float));
    eng_grad_free(g);
    tc = (eng_train_config){ .n_gradient = 1, .gradient = { ENG_GRAD_CLIP_NORM }, .clip_norm = 0.5 };
    assert_int_equal(eng_grad_create(&tc, m, NULL, &g), ENG_OK);
    eng_grad_apply(g, NULL);
    assert_memory_equal(keep, m->grads, m->n_params * sizeof(float));
    eng_grad_free(g);
    /* znorm per tensor: W and b each standardised */
    tc = (eng_train_config){ .n_gradient = 1, .gradient = { ENG_GRAD_ZNORM }, .znorm_eps = 1e-8 };
    assert_int_equal(eng_grad_create(&tc, m, NULL, &g), ENG_OK);
    fill(m->grads, m->n_params, 5, -2.0f, 0.3f);
    eng_grad_apply(g, NULL);
    for (int l = 0; l < 2; l++) {
        double mu, sd;
        mean_std(m->layers[l].dw, m->layers[l].n_w, &mu, &sd);
        assert_true(fabs(mu) < 1e-5 && fabs(sd - 1) < 1e-4);
        mean_std(m->layers[l].db, m->layers[l].n_b, &mu, &sd);
        assert_true(fabs(mu) < 1e-5 && fabs(sd - 1) < 1e-4);
    }
    eng_grad_free(g);
    /* clip_value through the pipeline */
    tc = (eng_train_config){ .n_gradient = 1, .gradient = { ENG_GRAD_CLIP_VALUE }, .clip_value = 0.1 };
    assert_int_equal(eng_grad_create(&tc, m, NULL, &g), ENG_OK);
    eng_grad_apply(g, NULL);
    for (size_t i = 0; i < m->n_params; i++) assert_true(fabsf(m->grads[i]) <= 0.1f);
    eng_grad_free(g);
    /* bad thresholds are refused with the key's name */
    tc = (eng_train_config){ .n_gradient = 1, .gradient = { ENG_GRAD_CLIP_NORM }, .clip_norm = 0 };
    assert_int_equal(eng_grad_create(&tc, m, NULL, &g), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "clip_norm must be > 0"));
    eng_model_free(m);
}

/* A small conv net: a conv layer (centred by rows), a dense one (by columns). */
static eng_model *conv_model(void)
{
    eng_model_config mc = { .n_layers = 3, .loss = ENG_LOSS_SOFTMAX_XENT };
    mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_CONV, .units = 4, .kernel = 3, .act = ENG_ACT_RELU };
    mc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_FLATTEN };
    mc.layers[2] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 3 };
    int in[3] = { 2, 6, 6 };
    eng_model *m = NULL;
    assert_int_equal(eng_model_build(&mc, in, 3, 2, 1, NULL, &m), ENG_OK);
    return m;
}

/* Centralize on a conv net: each filter's fan-in (a row of W [F x C*K*K]) gets zero mean,
 * the dense layer's columns too, and the biases are left alone. */
static void test_centralize_conv(void **state)
{
    (void)state;
    eng_model *m = conv_model();
    eng_train_config tc = { .n_gradient = 1, .gradient = { ENG_GRAD_CENTRALIZE } };
    eng_grad *g;
    assert_int_equal(eng_grad_create(&tc, m, NULL, &g), ENG_OK);
    fill(m->grads, m->n_params, 13, 0.5f, 1.0f);
    float bias[4];
    memcpy(bias, m->layers[0].db, sizeof bias);
    eng_grad_apply(g, NULL);
    const eng_layer *C = &m->layers[0];
    size_t fan = C->n_w / 4;
    assert_int_equal(fan, 2 * 3 * 3);
    for (size_t f = 0; f < 4; f++) {
        double s = 0;
        for (size_t j = 0; j < fan; j++) s += C->dw[f * fan + j];
        assert_true(fabs(s / (double)fan) < 1e-6);
    }
    assert_memory_equal(bias, C->db, sizeof bias);
    const eng_layer *D = &m->layers[2];
    for (size_t c = 0; c < D->out_size; c++) {
        double s = 0;
        for (size_t r = 0; r < D->in_size; r++) s += D->dw[r * D->out_size + c];
        assert_true(fabs(s / (double)D->in_size) < 1e-6);
    }
    eng_grad_free(g);
    eng_model_free(m);
}

/* The transform lists the run-level tests try: each transform alone, and lists whose last
 * transform is a map or not. */
static const struct { int n; eng_grad_kind k[2]; } lists[] = {
    { 1, { ENG_GRAD_ZNORM } }, { 1, { ENG_GRAD_CENTRALIZE } }, { 1, { ENG_GRAD_CLIP_NORM } },
    { 1, { ENG_GRAD_CLIP_VALUE } }, { 2, { ENG_GRAD_CENTRALIZE, ENG_GRAD_ZNORM } },
    { 2, { ENG_GRAD_ZNORM, ENG_GRAD_CLIP_NORM } }, { 2, { ENG_GRAD_CLIP_VALUE, ENG_GRAD_CENTRALIZE } },
};
#define N_LISTS (sizeof lists / sizeof lists[0])

/* Momentum SGD with list i, and its name ("centralize, znorm") in name. */
static eng_train_config list_config(size_t i, char name[64])
{
    eng_train_config tc = { .optimizer = ENG_OPT_MOMENTUM, .lr = 0.01, .momentum = 0.9, .n_gradient = lists[i].n,
                            .znorm_eps = 1e-8, .clip_norm = 0.5, .clip_value = 0.4 };
    memcpy(tc.gradient, lists[i].k, sizeof lists[i].k);
    snprintf(name, 64, "%s%s%s", eng_grad_kind_name(lists[i].k[0]), lists[i].n > 1 ? ", " : "",
             lists[i].n > 1 ? eng_grad_kind_name(lists[i].k[1]) : "");
    return tc;
}

/* Three momentum steps on filled gradients; with `to`, the last transform's maps go to the
 * optimizer (as a run does), else every transform runs in place. The parameters are left
 * in m; *kept: whether, with `to`, the gradient buffer held the last transform's input. */
static void steps_with(eng_model *m, const eng_train_config *tc, int defer, int *kept)
{
    eng_grad *g;
    eng_optim *o;
    assert_int_equal(eng_grad_create(tc, m, NULL, &g), ENG_OK);
    assert_int_equal(eng_optim_create(tc, m->n_params, &o), ENG_OK);
    float *before = malloc(m->n_params * sizeof *before);
    *kept = 1;
    for (int step = 0; step < 3; step++) {
        fill(m->grads, m->n_params, 40u + (unsigned)step, 0.3f, 2.0f);
        eng_grad *first = NULL;
        if (tc->n_gradient > 1) {   /* the buffer as the transforms before the last leave it */
            eng_train_config head = *tc;
            head.n_gradient = tc->n_gradient - 1;
            assert_int_equal(eng_grad_create(&head, m, NULL, &first), ENG_OK);
            float *keep = malloc(m->n_params * sizeof *keep);
            memcpy(keep, m->grads, m->n_params * sizeof *keep);
            eng_grad_apply(first, NULL);
            memcpy(before, m->grads, m->n_params * sizeof *before);
            memcpy(m->grads, keep, m->n_params * sizeof *keep);
            free(keep);
            eng_grad_free(first);
        } else {
            memcpy(before, m->grads, m->n_params * sizeof *before);
        }
        eng_grad_apply(g, defer ? o : NULL);
        if (defer && memcmp(before, m->grads, m->n_params * sizeof *before)) *kept = 0;
        eng_optim_step(o, m->params, m->grads, tc->lr);
    }
    free(before);
    eng_optim_free(o);
    eng_grad_free(g);
}

/* A run hands the last transform's maps to the optimizer (eng_grad_apply with an optimizer):
 * the parameters come out with the bits of every transform applied in place, for each
 * transform alone and in lists, on dense and conv layers; the gradient buffer then holds
 * what the last transform read (unless that is clip_value); and the transforms change the
 * parameters (no transform lost). */
static void test_deferred_same_bits(void **state)
{
    (void)state;
    for (int net = 0; net < 2; net++)
        for (size_t i = 0; i < N_LISTS; i++) {
            char name[64];
            eng_train_config tc = list_config(i, name);
            eng_model *a = net ? conv_model() : small_model(), *b = net ? conv_model() : small_model();
            eng_model *plain = net ? conv_model() : small_model();
            int kept, unused;
            steps_with(a, &tc, 1, &kept);
            steps_with(b, &tc, 0, &unused);
            eng_train_config none = tc;
            none.n_gradient = 0;
            steps_with(plain, &none, 0, &unused);
            if (memcmp(a->params, b->params, a->n_params * sizeof(float)))
                fail_msg("%s net, %s: the deferred maps give other parameters", net ? "conv" : "dense", name);
            /* clip_value's clamp is no map: it runs in place */
            assert_int_equal(kept, lists[i].k[lists[i].n - 1] != ENG_GRAD_CLIP_VALUE);
            assert_true(memcmp(a->params, plain->params, a->n_params * sizeof(float)) != 0);
            eng_model_free(a);
            eng_model_free(b);
            eng_model_free(plain);
        }
}

/* Big enough for the pool: a dense W of 300 x 128 (19 blocks of 16 rows) and a conv W of
 * 64 filters x 288 (18432 floats). */
static eng_model *wide_model(int conv)
{
    eng_model_config mc = { .n_layers = 3, .loss = ENG_LOSS_SOFTMAX_XENT };
    if (conv) mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_CONV, .units = 64, .kernel = 3, .act = ENG_ACT_RELU };
    else mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 128, .act = ENG_ACT_RELU };
    mc.layers[1] = (eng_layer_spec){ .kind = conv ? ENG_LAYER_FLATTEN : ENG_LAYER_DENSE, .units = 20 };
    mc.layers[2] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 3 };
    int in_dense[3] = { 1, 1, 300 }, in_conv[3] = { 32, 4, 4 };
    eng_model *m = NULL;
    assert_int_equal(eng_model_build(&mc, conv ? in_conv : in_dense, 3, 2, 1, NULL, &m), ENG_OK);
    return m;
}

/* The transforms' passes run over the pool (each slab its pieces: chunks of the sums,
 * blocks of 16 rows of the column sums, rows of a conv W) and give the bits of one thread
 * at 2 and 4 threads, for each transform alone and in lists, on dense and conv layers; and
 * znorm's pieces, folded, are the bits of eng_grad_znorm alone. */
static void test_transforms_threads(void **state)
{
    (void)state;
    long slabs0 = eng_pool_worker_slabs();
    for (int conv = 0; conv < 2; conv++)
        for (size_t i = 0; i < N_LISTS; i++) {
            char name[64];
            eng_train_config tc = list_config(i, name);
            eng_model *one = wide_model(conv);
            int kept;
            steps_with(one, &tc, 1, &kept);
            for (int t = 2; t <= 4; t *= 2)
                for (int defer = 0; defer < 2; defer++) {
                    eng_model *many = wide_model(conv);
                    eng_pool_set_threads(t);
                    steps_with(many, &tc, defer, &kept);
                    eng_pool_set_threads(1);
                    if (memcmp(one->params, many->params, one->n_params * sizeof(float)))
                        fail_msg("%s net, %s at %d threads (%s): other parameters than at 1 thread",
                                 conv ? "conv" : "dense", name, t, defer ? "maps in the update" : "in place");
                    eng_model_free(many);
                }
            eng_model_free(one);
        }
    long slabs = eng_pool_worker_slabs() - slabs0;
    printf("  %ld slabs run by pool workers\n", slabs);
    assert_true(slabs > 0);
    /* the pipeline's znorm (its pieces over the pool, folded) against eng_grad_znorm */
    eng_model *m = wide_model(0);
    fill(m->grads, m->n_params, 77, 0.2f, 1.5f);
    float *ref = malloc(m->n_params * sizeof *ref);
    memcpy(ref, m->grads, m->n_params * sizeof *ref);
    for (int l = 0; l < m->n_layers; l++) {
        eng_grad_znorm(ref + (m->layers[l].dw - m->grads), m->layers[l].n_w, 1e-8f);
        eng_grad_znorm(ref + (m->layers[l].db - m->grads), m->layers[l].n_b, 1e-8f);
    }
    eng_train_config tc = { .n_gradient = 1, .gradient = { ENG_GRAD_ZNORM }, .znorm_eps = 1e-8 };
    eng_grad *g;
    assert_int_equal(eng_grad_create(&tc, m, NULL, &g), ENG_OK);
    eng_pool_set_threads(2);
    eng_grad_apply(g, NULL);
    eng_pool_set_threads(1);
    assert_memory_equal(ref, m->grads, m->n_params * sizeof *ref);
    eng_grad_free(g);
    free(ref);
    eng_model_free(m);
}

static const double *value_of(const eng_telemetry *rec, const char *key)
{
    for (size_t i = 0; i < rec->n; i++)
        if (!strcmp(rec->keys[i], key)) return &rec->values[i];
    return NULL;
}

static void test_telemetry_known(void **state)
{
    (void)state;
    eng_model *m = small_model();
    eng_telem *t;
    assert_int_equal(eng_telem_create(m, NULL, &t), ENG_OK);
    /* dense1.W: 30 values, half +2 and half -1 => mean 0.5, std 1.5, max 2, norm sqrt(75) */
    eng_layer *L = &m->layers[0];
    for (size_t i = 0; i < L->n_w; i++) L->dw[i] = i % 2 ? -1.0f : 2.0f;
    for (size_t i = 0; i < L->n_b; i++) L->db[i] = 0.0f;
    m->layers[1].dw[0] = -3.0f;
    /* dense1's relu output: 4 rows x 5 units, 7 exact zeros */
    m->rows = 4;
    for (int i = 0; i < 20; i++) L->a[i] = i < 7 ? 0.0f : 0.5f;
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = 1.0f;
    eng_telem_before(t);
    /* a step of +0.1 on dense1.W only: ||dw|| / ||w|| = 0.1 */
    for (size_t i = 0; i < L->n_w; i++) L->w[i] += 0.1f;
    eng_telem_after(t);
    eng_telemetry rec = { 0 };
    eng_telem_record(t, &rec);
    /* 2 layers x (W, b) x 5 keys + one activation layer (dense2 has none) */
    assert_int_equal(rec.n, 4 * 5 + 1);
    const double *v;
    assert_non_null(v = value_of(&rec, "grad_norm/dense1.W"));
    assert_true(fabs(*v - sqrt(75.0)) < 1e-6);
    assert_true(fabs(*value_of(&rec, "grad_mean/dense1.W") - 0.5) < 1e-6);
    assert_true(fabs(*value_of(&rec, "grad_std/dense1.W") - 1.5) < 1e-6);
    assert_true(*value_of(&rec, "grad_max/dense1.W") == 2.0);
    assert_true(*value_of(&rec, "grad_norm/dense1.b") == 0.0);
    assert_true(fabs(*value_of(&rec, "update_ratio/dense1.W") - 0.1) < 1e-6);
    assert_true(*value_of(&rec, "update_ratio/dense2.W") == 0.0);
    assert_true(fabs(*value_of(&rec, "zero_frac/dense1") - 7.0 / 20.0) < 1e-12);
    assert_null(value_of(&rec, "zero_frac/dense2"));
    assert_true(*value_of(&rec, "grad_max/dense2.W") >= 3.0);
    eng_telem_free(t);
    eng_model_free(m);
}

/* ---- through a run: config list, one telemetry record per log step ------------------- */

/* Loads an experiment from text (a file named after this process); expect_ok = 0 wants
 * ENG_EINVAL and returns NULL. */
static eng_experiment *load(const char *text, int expect_ok)
{
    char p[64];
    snprintf(p, sizeof p, "/tmp/nnbench-grad-test-%d.ini", (int)getpid());
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    eng_experiment *ex = NULL;
    int rc = eng_experiment_load(p, NULL, 0, &ex);
    remove(p);
    if (expect_ok && rc) fail_msg("%s", eng_error());
    if (!expect_ok) assert_int_equal(rc, ENG_EINVAL);
    return ex;
}

typedef struct { int n_rec; long last_step; size_t n; int bad; } tel_rec;

static int on_tel(void *ud, const eng_telemetry *t)
{
    tel_rec *r = ud;
    r->n_rec++;
    r->last_step = t->step;
    r->n = t->n;
    for (size_t i = 0; i < t->n; i++)
        if (!strncmp(t->keys[i], "grad_norm/", 10) && !(t->values[i] >= 0)) r->bad++;
    return 0;
}

static void test_run_config(void **state)
{
    (void)state;
    const char *base =
        "[data]\nsource = spirals\nn = 200\n[model]\nlayers = dense:8:relu, dense:8:tanh, dense:2\n"
        "[train]\noptimizer = adam\nlr = 0.01\nbatch = 20\nmax_steps = 45\nlog_every = 10\n"
        "telemetry = true\ngradient = centralize, clip_norm\nclip_norm = 2\n";
    eng_experiment *ex = load(base, 1);
    const eng_train_config *tc = &ex->variants[0].train;
    assert_int_equal(tc->n_gradient, 2);
    assert_int_equal(tc->gradient[0], ENG_GRAD_CENTRALIZE);
    assert_int_equal(tc->gradient[1], ENG_GRAD_CLIP_NORM);
    assert_true(tc->clip_norm == 2.0);
    eng_run *run;
    if (eng_run_create(&ex->variants[0], NULL, NULL, &run)) fail_msg("%s", eng_error());
    tel_rec tr = { 0 };
    eng_sink sink = { .ud = &tr, .telemetry = on_tel };
    assert_int_equal(eng_run_train(run, &sink), ENG_OK);
    /* steps 10, 20, 30, 40 and the last (45): one record each, 3 layers x 2 x 5 + 2 acts */
    assert_int_equal(tr.n_rec, 5);
    assert_int_equal(tr.last_step, 45);
    assert_int_equal(tr.n, 32);
    assert_int_equal(tr.bad, 0);
    eng_run_destroy(run);
    eng_experiment_free(ex);

    /* an unknown transform names itself and the line */
    load("[model]\nlayers = dense:2\n[train]\ngradient = znorm, zscore\n", 0);
    assert_non_null(strstr(eng_error(), ":4: key 'gradient'"));
    assert_non_null(strstr(eng_error(), "got 'zscore'"));
    load("[model]\nlayers = dense:2\n[train]\ngradient = ,\n", 0);
    ex = load("[model]\nlayers = dense:2\n[train]\ngradient = none\n", 1);
    assert_int_equal(ex->variants[0].train.n_gradient, 0);
    eng_experiment_free(ex);
    /* newton computes its own direction: transforms are refused at run creation */
    ex = load("[data]\nn = 50\n[model]\nlayers = dense:2\n[train]\noptimizer = newton\ngradient = znorm\n", 1);
    assert_int_equal(eng_run_create(&ex->variants[0], NULL, NULL, &run), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "first-order"));
    eng_experiment_free(ex);
}

/* ---- every kernel against a plain double reference, on each ISA path ------------------ */

/* Odd sizes around the vector widths (4, 8, 16), the 32-lane sums and the 1024 fold. */
static const size_t odd_sizes[] = { 1, 2, 3, 5, 7, 9, 15, 17, 31, 33, 63, 65, 1023, 1025, 1057, 4099, 100003 };
#define N_ODD (sizeof odd_sizes / sizeof odd_sizes[0])

/* Random values: mean offset, spread scale, a few large outliers. */
static float *random_tensor(size_t n, unsigned seed, float offset, float scale)
{
    float *g = malloc(n * sizeof *g);
    assert_non_null(g);
    fill(g, n, seed, offset, scale);
    for (size_t i = 7; i < n; i += 97) g[i] *= 40.0f;
    return g;
}

/* max |a - b| over n, and the largest |b| (the scale the tolerance is relative to) */
static double max_diff(const float *a, const double *b, size_t n, double *scale)
{
    double d = 0, sc = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
        if (fabs(b[i]) > sc) sc = fabs(b[i]);
    }
    *scale = sc;
    return d;
}

/* znorm, clip_norm's norm and scale, clip_value and eng_grad_stats against double loops,
 * on tensors of odd sizes; tolerances: 2e-6 of the output's largest value for znorm and
 * the scale (float rounding of one multiply and one subtract), 1e-6 relative for the sums
 * (float partial sums of at most 32 terms per lane, folded into double), exact for the
 * clamp and the max. */
static void test_kernels_vs_double(void **state)
{
    eng_isa before = isa_force_or_skip(state);
    double worst_z = 0, worst_s = 0;
    for (size_t k = 0; k < N_ODD; k++) {
        size_t n = odd_sizes[k];
        float *g = random_tensor(n, (unsigned)(100 + k), k % 2 ? 0.5f : -0.02f, k % 3 ? 0.1f : 3.0f);
        double *ref = malloc(n * sizeof *ref);
        float *o = malloc(n * sizeof *o);
        memcpy(o, g, n * sizeof *o);
        double s = 0, q = 0, mx = 0;
        for (size_t i = 0; i < n; i++) { s += o[i]; mx = fabs(o[i]) > mx ? fabs(o[i]) : mx; }
        double mean = s / (double)n;
        for (size_t i = 0; i < n; i++) q += ((double)o[i] - mean) * ((double)o[i] - mean);
        double sd = sqrt(q / (double)n), sq = 0;
        for (size_t i = 0; i < n; i++) sq += (double)o[i] * o[i];
        /* stats */
        double m2, v2, s2, x2;
        eng_grad_stats(o, n, &m2, &v2, &s2, &x2);
        assert_true(fabs(m2 - mean) <= 1e-6 * (fabs(mean) + sd));
        assert_true(fabs(sqrt(v2) - sd) <= 1e-6 * (sd + fabs(mean)));
        assert_true(fabs(s2 - sq) <= 1e-6 * sq);
        assert_true(x2 == mx);
        assert_true(fabs(eng_grad_sumsq(o, n) - sq) <= 1e-6 * sq);
        /* znorm */
        eng_grad_znorm(g, n, 1e-8f);
        for (size_t i = 0; i < n; i++) ref[i] = n < 2 ? o[i] : ((double)o[i] - mean) / (sd + 1e-8);
        double sc, d = max_diff(g, ref, n, &sc);
        if (d / sc > worst_z) worst_z = d / sc;
        assert_true(d <= 2e-6 * sc);
        /* clip_norm's scale to norm 0.25 */
        memcpy(g, o, n * sizeof *g);
        float f = (float)(0.25 / sqrt(sq));
        eng_grad_scale(g, n, f);
        for (size_t i = 0; i < n; i++) ref[i] = (double)o[i] * f;
        d = max_diff(g, ref, n, &sc);
        if (d / sc > worst_s) worst_s = d / sc;
        assert_true(d <= 2e-6 * sc);
        /* clip_value */
        memcpy(g, o, n * sizeof *g);
        eng_grad_clamp(g, n, 0.05f);
        for (size_t i = 0; i < n; i++) assert_true(g[i] == (o[i] > 0.05f ? 0.05f : o[i] < -0.05f ? -0.05f : o[i]));
        free(g);
        free(ref);
        free(o);
    }
    printf("  path %s: znorm max |diff| %.2e, scale %.2e of the largest output\n", eng_isa_name(eng_isa_current()),
           worst_z, worst_s);
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

/* centralize, dense (by column) and conv (by row), on odd shapes against double means. */
static void test_centralize_vs_double(void **state)
{
    eng_isa before = isa_force_or_skip(state);
    const size_t shapes[][2] = { { 2, 1 }, { 3, 5 }, { 7, 17 }, { 33, 31 }, { 129, 65 }, { 785, 257 }, { 5, 1031 } };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        size_t R = shapes[k][0], C = shapes[k][1], n = R * C;
        for (int by_col = 0; by_col < 2; by_col++) {
            float *g = random_tensor(n, (unsigned)(7 * k + (size_t)by_col), 0.3f, 0.2f);
            float *colsum = malloc(C * sizeof *colsum);
            double *ref = malloc(n * sizeof *ref);
            for (size_t a = 0; a < (by_col ? C : R); a++) {
                size_t len = by_col ? R : C, stride = by_col ? C : 1, base = by_col ? a : a * C;
                double m = 0;
                for (size_t j = 0; j < len; j++) m += g[base + j * stride];
                m /= (double)len;
                for (size_t j = 0; j < len; j++)
                    ref[base + j * stride] = len < 2 ? g[base + j * stride] : g[base + j * stride] - m;
            }
            eng_grad_centralize(g, R, C, by_col, colsum);
            double sc, d = max_diff(g, ref, n, &sc);
            /* float column sums of up to 785 terms: a few ulps of the largest input */
            assert_true(d <= 2e-5 * sc);
            free(g);
            free(colsum);
            free(ref);
        }
    }
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

/* The paths give the same bits: each transform of each odd size on every available path
 * against the baseline. */
static void test_grad_path_bits(void **state)
{
    (void)state;
    eng_isa before = eng_isa_current();
    int checked = 0;
    for (size_t k = 0; k < N_ODD; k++) {
        size_t n = odd_sizes[k];
        float *o = random_tensor(n, (unsigned)(300 + k), 0.1f, 1.0f);
        float *base = malloc(4 * n * sizeof *base), *g = malloc(n * sizeof *g);
        double st_base[4] = { 0 };
        float colsum[67];
        for (int isa = 0; isa < ENG_ISA_N; isa++) {
            if (!eng_isa_available((eng_isa)isa)) continue;
            assert_int_equal(eng_isa_set((eng_isa)isa), ENG_OK);
            float *out[4] = { base, base + n, base + 2 * n, base + 3 * n };
            for (int t = 0; t < 4; t++) {
                float *dst = isa == 0 ? out[t] : g;
                memcpy(dst, o, n * sizeof *dst);
                if (t == 0) eng_grad_znorm(dst, n, 1e-8f);
                if (t == 1) eng_grad_scale(dst, n, 0.37f);
                if (t == 2) eng_grad_clamp(dst, n, 0.2f);
                /* 67 columns: a tile of 4 vectors, single vectors and a scalar tail on every path */
                if (t == 3 && n >= 2 * 67) eng_grad_centralize(dst, n / 67, 67, 1, colsum);
                if (isa) assert_memory_equal(dst, out[t], n * sizeof *dst);
            }
            double st[4];
            eng_grad_stats(o, n, &st[0], &st[1], &st[2], &st[3]);
            if (!isa) memcpy(st_base, st, sizeof st);
            else assert_memory_equal(st, st_base, sizeof st);
            checked += isa > 0;
        }
        free(o);
        free(base);
        free(g);
    }
    printf("  %d size x path comparisons (paths here up to %s)\n", checked, eng_isa_name(eng_isa_best()));
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

int test_engine_gradient(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_znorm),
        cmocka_unit_test(test_centralize),
        cmocka_unit_test(test_clip_kernels),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_centralize_conv),
        cmocka_unit_test(test_deferred_same_bits),
        cmocka_unit_test(test_transforms_threads),
        cmocka_unit_test(test_telemetry_known),
        cmocka_unit_test(test_run_config),
        ISA_PATH_TESTS(test_kernels_vs_double),
        ISA_PATH_TESTS(test_centralize_vs_double),
        cmocka_unit_test(test_grad_path_bits),
    };
    return cmocka_run_group_tests_name("engine_gradient", tests, NULL, NULL);
}
