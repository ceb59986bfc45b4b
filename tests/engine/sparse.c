/* sparse.c (tests) — MaxK and the CBSR x dense op: selection against a sort-based
 * reference (ties, k = d, NaN rows) and the vectorised kernels against scalar references,
 * each under every instruction-set path this CPU has (and the same bits on each),
 * finite-difference gradients of both ops and of a whole maxk model, layer parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/internal.h"
#include "../../engine/rng.h"
#include "isa_paths.h"

static void fill(float *v, size_t n, eng_rng *r, double scale)
{
    for (size_t i = 0; i < n; i++) v[i] = (float)(scale * eng_rng_normal(r));
}

/* Reference top-k of one row: k passes, each taking the largest value not yet taken,
 * the lowest column among equals; then the chosen columns in ascending order. */
static void ref_select(const float *x, int d, int k, float *val, int32_t *idx)
{
    char *taken = calloc((size_t)d, 1);
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < d; i++)
            if (!taken[i] && (best < 0 || x[i] > x[best])) best = i;
        taken[best] = 1;
    }
    int j = 0;
    for (int i = 0; i < d; i++)
        if (taken[i]) { val[j] = x[i]; idx[j] = i; j++; }
    free(taken);
}

static void check_select(const float *x, int rows, int d, int k)
{
    float *val = malloc(sizeof(float) * rows * k), *rv = malloc(sizeof(float) * k);
    int32_t *idx = malloc(sizeof(int32_t) * rows * k), *ri = malloc(sizeof(int32_t) * k);
    eng_maxk_select(x, rows, d, k, val, idx);
    for (int r = 0; r < rows; r++) {
        ref_select(x + (size_t)r * d, d, k, rv, ri);
        for (int j = 0; j < k; j++) {
            assert_int_equal(idx[(size_t)r * k + j], ri[j]);
            assert_memory_equal(&val[(size_t)r * k + j], &rv[j], sizeof(float));
        }
    }
    free(val); free(rv); free(idx); free(ri);
}

static void test_maxk_select(void **state)
{
    eng_isa before = isa_force_or_skip(state);
    eng_rng r;
    eng_rng_seed(&r, 3, 3);
    int shapes[][3] = { { 16, 256, 32 }, { 5, 7, 1 }, { 5, 7, 7 }, { 9, 100, 50 }, { 3, 1, 1 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], d = shapes[s][1], k = shapes[s][2];
        float *x = malloc(sizeof(float) * rows * d);
        fill(x, (size_t)rows * d, &r, 1.0);
        check_select(x, rows, d, k);
        /* rows of scales 1e-3..1e3, every third shifted below -50: the search's first count,
         * at the first row's threshold, lands far off or outside the row's range */
        for (int i = 0; i < rows * d; i++) {
            int row = i / d;
            x[i] = (float)(eng_rng_normal(&r) * pow(10.0, row % 7 - 3)) - (row % 3 == 1 ? 50.0f : 0.0f);
        }
        check_select(x, rows, d, k);
        /* ties: values from a handful of levels, zeros of both signs, infinities */
        for (int i = 0; i < rows * d; i++) {
            x[i] = (float)((int)eng_rng_below(&r, 4) - 1);
            if (x[i] == 0.0f && (i & 1)) x[i] = -0.0f;
        }
        if (d > 3) { x[0] = INFINITY; x[1] = -INFINITY; }
        check_select(x, rows, d, k);
        free(x);
    }
    /* a row with a NaN keeps its first k columns (in bounds, deterministic) */
    float x[8] = { 1, 2, NAN, 4, 5, 6, 7, 8 }, val[3];
    int32_t idx[3];
    eng_maxk_select(x, 1, 8, 3, val, idx);
    for (int j = 0; j < 3; j++) assert_int_equal(idx[j], j);
    /* NaN rows among rows searched together: the first (no row has set the hint yet) and
     * one inside a later group; the others as the reference selects them */
    enum { NR = 21, ND = 40, NK = 6 };
    float *xs = malloc(sizeof(float) * NR * ND), nv[NR * NK];
    int32_t ni[NR * NK];
    fill(xs, (size_t)NR * ND, &r, 1.0);
    xs[3] = NAN;
    xs[(size_t)13 * ND + 17] = NAN;
    eng_maxk_select(xs, NR, ND, NK, nv, ni);
    for (int row = 0; row < NR; row++) {
        float rv[NK];
        int32_t ri[NK];
        int nan_row = row == 0 || row == 13;
        if (!nan_row) ref_select(xs + (size_t)row * ND, ND, NK, rv, ri);
        for (int j = 0; j < NK; j++) assert_int_equal(ni[row * NK + j], nan_row ? j : ri[j]);
    }
    free(xs);
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

/* Scalar references of the CBSR kernels. */
static void ref_mm(const float *val, const int32_t *idx, int rows, int k, const float *w, int out, float *y)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < out; c++) {
            double a = 0;
            for (int j = 0; j < k; j++) a += (double)val[r * k + j] * w[(size_t)idx[r * k + j] * out + c];
            y[(size_t)r * out + c] = (float)a;
        }
}

/* |a - b| / max(|a| + |b|, 1): the terms are of order 1, so a float sum of k of them may
 * cancel to near 0 while carrying an absolute error of k ulps of 1 */
static double max_rel(const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double den = fabs(a[i]) + fabs(b[i]);
        double e = fabs((double)a[i] - b[i]) / (den < 1.0 ? 1.0 : den);
        if (e > worst) worst = e;
    }
    return worst;
}

static void test_cbsr_kernel(void **state)
{
    eng_isa before = isa_force_or_skip(state), p = eng_isa_current();
    eng_rng r;
    eng_rng_seed(&r, 4, 4);
    /* out: tiles of 2 W columns, of W and the scalar tail; rows in fours and the leftover
     * ones; W's tiles packed (the first shape: rows x k >= 2 d) and read in place (the rest);
     * dvalues sixteen at a time (AVX-512, out a multiple of 16: the first and last shapes,
     * the last with 5 left over) */
    int shapes[][4] = { { 33, 256, 32, 256 }, { 7, 50, 5, 70 }, { 4, 10, 3, 10 }, { 2, 300, 17, 129 }, { 5, 64, 37, 48 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], d = shapes[s][1], k = shapes[s][2], out = shapes[s][3];
        float *x = malloc(sizeof(float) * rows * d), *w = malloc(sizeof(float) * d * out);
        float *val = malloc(sizeof(float) * rows * k), *y = malloc(sizeof(float) * rows * out);
        float *yr = malloc(sizeof(float) * rows * out), *dy = malloc(sizeof(float) * rows * out);
        float *dval = malloc(sizeof(float) * rows * k), *rdval = malloc(sizeof(float) * rows * k);
        float *dw = malloc(sizeof(float) * d * out), *rdw = calloc((size_t)d * out, sizeof(float));
        int32_t *idx = malloc(sizeof(int32_t) * rows * k);
        float *pack = malloc(sizeof(float) * ENG_CBSR_PACK_FLOATS(d));
        fill(x, (size_t)rows * d, &r, 1.0);
        fill(w, (size_t)d * out, &r, 1.0);
        fill(dy, (size_t)rows * out, &r, 1.0);
        eng_maxk_select(x, rows, d, k, val, idx);
        eng_cbsr_mm(val, idx, rows, k, w, d, out, y, pack);
        ref_mm(val, idx, rows, k, w, out, yr);
        double e1 = max_rel(y, yr, (size_t)rows * out);
        eng_cbsr_mm_bwd(val, idx, rows, k, w, d, out, dy, dval, dw, pack);
        /* reference backward: through the dense equivalent x_sparse^T dy and dy W^T */
        for (int q = 0; q < rows; q++)
            for (int j = 0; j < k; j++) {
                double a = 0;
                for (int c = 0; c < out; c++) a += (double)dy[(size_t)q * out + c] * w[(size_t)idx[q * k + j] * out + c];
                rdval[q * k + j] = (float)a;
                for (int c = 0; c < out; c++)
                    rdw[(size_t)idx[q * k + j] * out + c] += val[q * k + j] * dy[(size_t)q * out + c];
            }
        double e2 = max_rel(dval, rdval, (size_t)rows * k), e3 = max_rel(dw, rdw, (size_t)d * out);
        printf("  cbsr %s %dx%d k=%d out=%d: fwd %.2e, dvalues %.2e, dW %.2e (max rel vs scalar)\n",
               eng_isa_name(p), rows, d, k, out, e1, e2, e3);
        assert_true(e1 < 1e-5 && e2 < 1e-5 && e3 < 1e-5);
        /* no FMA on any path: the generic path's bits exactly (y, dvalues and dW reuse yr,
         * rdval and rdw) */
        ISA_UNDER(ENG_ISA_GENERIC, eng_cbsr_mm(val, idx, rows, k, w, d, out, yr, pack));
        ISA_UNDER(ENG_ISA_GENERIC, eng_cbsr_mm_bwd(val, idx, rows, k, w, d, out, dy, rdval, rdw, pack));
        assert_memory_equal(y, yr, sizeof(float) * rows * out);
        assert_memory_equal(dval, rdval, sizeof(float) * rows * k);
        assert_memory_equal(dw, rdw, sizeof(float) * d * out);
        free(x); free(w); free(val); free(y); free(yr); free(dy); free(dval); free(rdval);
        free(dw); free(rdw); free(idx); free(pack);
    }
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

/* ---- finite differences of the two ops through the op table ---------------------------- */

#define EPS 1e-3
#define TOL 5e-3

/* objective: sum(rw * y) of a node's forward; the node reads x0 (copied to xb) */
typedef struct {
    eng_node *n;
    int rows;
    const float *x0;
    float *xb;
    size_t nx, ny;
    const float *rw;
} fd;

static double fd_obj(fd *f)
{
    memcpy(f->xb, f->x0, f->nx * sizeof(float));
    eng_ops[f->n->op].forward(f->n, f->rows);
    double s = 0;
    for (size_t i = 0; i < f->ny; i++) s += (double)f->rw[i] * f->n->y[i];
    return s;
}

static double fd_compare(const char *what, fd *f, float *v, size_t n, const float *ana)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        float keep = v[i];
        v[i] = keep + (float)EPS; double p = fd_obj(f);
        v[i] = keep - (float)EPS; double m = fd_obj(f);
        v[i] = keep;
        double num = (p - m) / (2 * EPS), den = fabs(num) + fabs(ana[i]);
        double e = fabs(num - ana[i]) / (den < 1e-2 ? 1e-2 : den);
        if (e > worst) worst = e;
    }
    printf("  %-28s max rel diff %.2e over %zu values\n", what, worst, n);
    return worst;
}

static void test_grad_maxk(void **state)
{
    (void)state;
    enum { R = 4, D = 9, KK = 3 };
    eng_rng r;
    eng_rng_seed(&r, 5, 5);
    /* distinct values, 0.1 apart at least: a step of EPS never changes the selection */
    float x0[R * D], xb[R * D], val[R * KK], dval[R * KK], dx[R * D], rw[R * KK];
    int32_t idx[R * KK];
    for (int q = 0; q < R; q++)
        for (int i = 0; i < D; i++) x0[q * D + i] = 0.1f * (float)((i * 5 + q) % D) - 0.4f;
    fill(rw, R * KK, &r, 1.0);
    eng_node n;
    memset(&n, 0, sizeof n);
    n.op = ENG_OP_MAXK; n.in_size = n.out_size = D; n.k = KK;
    n.x = xb; n.y = val; n.idx = idx; n.dy = dval; n.dx = dx;
    fd f = { &n, R, x0, xb, R * D, R * KK, rw };
    fd_obj(&f);
    memcpy(dval, rw, sizeof rw);
    eng_ops[ENG_OP_MAXK].backward(&n, R);
    assert_true(fd_compare("maxk d/dx", &f, x0, R * D, dx) < TOL);
    /* the gradient reaches the kept columns only */
    int nonzero = 0;
    for (int i = 0; i < R * D; i++) nonzero += dx[i] != 0.0f;
    assert_true(nonzero <= R * KK);
}

static void test_grad_cbsr_dense(void **state)
{
    (void)state;
    enum { R = 13, D = 20, KK = 4, O = 37 };  /* packed tiles of columns on every path, and rows past the fours */
    eng_rng r;
    eng_rng_seed(&r, 6, 6);
    float x[R * D], v0[R * KK], vb[R * KK], w[D * O], dw[D * O], y[R * O], rw[R * O], dv[R * KK];
    float pack[ENG_CBSR_PACK_FLOATS(D)];
    int32_t idx[R * KK];
    fill(x, R * D, &r, 1.0);
    fill(w, D * O, &r, 0.5);
    fill(rw, R * O, &r, 1.0);
    eng_maxk_select(x, R, D, KK, v0, idx);
    eng_node n;
    memset(&n, 0, sizeof n);
    n.op = ENG_OP_CBSR_DENSE; n.in_size = D; n.out_size = O; n.k = KK;
    n.x = vb; n.idx = idx; n.y = y; n.w = w; n.dw = dw; n.n_w = D * O; n.dy = rw; n.dx = dv; n.ws = pack;
    fd f = { &n, R, v0, vb, R * KK, R * O, rw };
    fd_obj(&f);
    eng_ops[ENG_OP_CBSR_DENSE].backward(&n, R);
    assert_true(fd_compare("cbsr_dense d/dvalues", &f, v0, R * KK, dv) < TOL);
    assert_true(fd_compare("cbsr_dense d/dW", &f, w, D * O, dw) < TOL);
    /* counters: 2·B·k·o per multiply, dvalues doubling the backward */
    assert_int_equal(eng_ops[ENG_OP_CBSR_DENSE].flops(&n, R, ENG_FWD), 2u * R * KK * O);
    assert_int_equal(eng_ops[ENG_OP_CBSR_DENSE].flops(&n, R, ENG_BWD), 4u * R * KK * O);
    assert_int_equal(eng_ops[ENG_OP_CBSR_DENSE].bytes(&n, R, ENG_FWD), 4u * (2 * R * KK + D * O + R * O));
}

/* ---- a whole model: dense:maxk -> dense, against the same model's finite differences --- */

static uint64_t selection_of(const eng_model *m)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < m->n_nodes; i++) {
        const eng_node *n = &m->nodes[i];
        if (n->op != ENG_OP_MAXK) continue;
        for (size_t e = 0; e < (size_t)m->rows * n->k; e++) h = (h ^ (uint64_t)n->idx[e]) * 1099511628211ull;
    }
    return h;
}

static void test_grad_model_maxk(void **state)
{
    (void)state;
    eng_model_config mc = { 0 };
    mc.n_layers = 3;
    mc.loss = ENG_LOSS_SOFTMAX_XENT;
    mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 8, .kernel = 0, .act = ENG_ACT_MAXK, .k = 3 };
    mc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 5, .kernel = 0, .act = ENG_ACT_TANH };
    mc.layers[2] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 3, .kernel = 0, .act = ENG_ACT_NONE };
    int in[3] = { 1, 1, 4 }, rows = 3;
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 3, rows, 11, NULL, &m), ENG_OK);
    printf("  %s\n", eng_model_summary(m));
    assert_non_null(strstr(eng_model_summary(m), "maxk3"));
    assert_int_equal(m->nodes[3].op, ENG_OP_CBSR_DENSE);
    eng_rng r;
    eng_rng_seed(&r, 12, 12);
    float x[12];
    int32_t lab[3] = { 0, 2, 1 };
    fill(x, 12, &r, 1.0);
    float *p = eng_model_params(m);
    size_t np = eng_model_n_params(m);
    fill(p, np, &r, 0.5);
    eng_model_forward(m, x, rows, lab, NULL, NULL);
    eng_model_backward(m);
    uint64_t base = selection_of(m);
    float *ag = malloc(np * sizeof(float));
    memcpy(ag, eng_model_grads(m), np * sizeof(float));
    double worst = 0;
    size_t skipped = 0;
    for (size_t i = 0; i < np; i++) {
        float keep = p[i];
        p[i] = keep + (float)EPS; double fp = eng_model_forward(m, x, rows, lab, NULL, NULL);
        int kink = selection_of(m) != base;
        p[i] = keep - (float)EPS; double fm = eng_model_forward(m, x, rows, lab, NULL, NULL);
        kink |= selection_of(m) != base;
        p[i] = keep;
        if (kink) { skipped++; continue; }
        double num = (fp - fm) / (2 * EPS), den = fabs(num) + fabs(ag[i]);
        double e = fabs(num - ag[i]) / (den < 1e-2 ? 1e-2 : den);
        if (e > worst) worst = e;
    }
    printf("  maxk model d/dparams: max rel diff %.2e over %zu values (%zu skipped: selection changed)\n",
           worst, np, skipped);
    assert_true(worst < 1e-2);
    assert_true(skipped * 10 < np);
    free(ag);
    eng_model_free(m);

    /* maxk must feed a dense layer and keep 1..units */
    mc.n_layers = 1;
    mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 3, .kernel = 0, .act = ENG_ACT_MAXK, .k = 2 };
    assert_int_equal(eng_model_build(&mc, in, 3, rows, 1, NULL, &m), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "followed by a dense layer"));
    mc.n_layers = 2;
    mc.layers[0].k = 9;
    assert_int_equal(eng_model_build(&mc, in, 3, rows, 1, NULL, &m), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "1 <= k <= 3"));
}

static void test_maxk_layer_parsing(void **state)
{
    (void)state;
    const char *good[] = { "dense:16:maxk4, dense:2", "dense:16:maxk:4, dense:2" };
    for (int i = 0; i < 2; i++) {
        char set[128];
        snprintf(set, sizeof set, "model.layers=%s", good[i]);
        const char *ov[] = { set };
        eng_experiment *ex;
        assert_int_equal(eng_experiment_load("samples/spirals-mlp.ini", ov, 1, &ex), ENG_OK);
        assert_int_equal(ex->variants[0].model.layers[0].act, ENG_ACT_MAXK);
        assert_int_equal(ex->variants[0].model.layers[0].k, 4);
        eng_experiment_free(ex);
    }
    const char *bad[] = { "model.layers=dense:16:maxk17, dense:2", "model.layers=dense:16:maxk0, dense:2",
                          "model.layers=dense:16:maxk, dense:2" };
    for (int i = 0; i < 3; i++) {
        eng_experiment *ex;
        assert_int_not_equal(eng_experiment_load("samples/spirals-mlp.ini", &bad[i], 1, &ex), ENG_OK);
        assert_non_null(strstr(eng_error(), "maxkK"));
    }
}

int test_engine_sparse(void)
{
    const struct CMUnitTest tests[] = {
        ISA_PATH_TESTS(test_maxk_select),
        ISA_PATH_TESTS(test_cbsr_kernel),
        cmocka_unit_test(test_grad_maxk),
        cmocka_unit_test(test_grad_cbsr_dense),
        cmocka_unit_test(test_grad_model_maxk),
        cmocka_unit_test(test_maxk_layer_parsing),
    };
    return cmocka_run_group_tests_name("engine_sparse", tests, NULL, NULL);
}
