/* ops.c (tests) — finite-difference gradient checks of every op and loss (inputs and
 * parameters), of whole models, the FLOP/byte formulas, seeded init and determinism. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "../../engine/gemm_internal.h"
#include "../../engine/rng.h"
#include "isa_paths.h"
#include "kinks.h"

/* Central differences in float32 with step EPS on inputs of order 1; the reported figure
 * is max |analytic - numeric| / max(|analytic| + |numeric|, FLOOR). */
#define EPS 1e-2f
#define FLOOR 1e-2
#define TOL 5e-3

/* Accuracy bounds of the float activation kernels vs double libm (test_act_accuracy);
 * measured: tanh 1.50 ulp, sigmoid 2.61 ulp, GELU 2.45 ulp for x >= 0, rel 1.03e-6 on
 * [-3, 0] and 1.34e-5 anywhere (there |GELU| < 1e-7: u's float rounding times |2u|). */
#define TANH_ULP 2.0
#define SIGMOID_ULP 3.0
#define GELU_POS_ULP 3.0
#define GELU_REL_NEAR 1.5e-6
#define GELU_REL 2e-5

static void fill_normal(float *v, size_t n, eng_rng *r, double scale)
{
    for (size_t i = 0; i < n; i++) v[i] = (float)(scale * eng_rng_normal(r));
}

/* Keeps values away from 0 (relu's kink): |v| >= 0.1. */
static void push_from_zero(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fabsf(v[i]) < 0.1f) v[i] = v[i] < 0 ? v[i] - 0.1f : v[i] + 0.1f;
}

static double compare(const char *what, const float *ana, const double *num, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double a = ana[i], b = num[i];
        if (isnan(b)) continue; /* skipped: the difference straddled a kink */
        double den = fabs(a) + fabs(b);
        if (den < FLOOR) den = FLOOR;
        double d = fabs(a - b) / den;
        if (d > worst) worst = d;
    }
    printf("  %-28s max rel diff %.2e over %zu values\n", what, worst, n);
    return worst;
}

/* ---- one op in isolation -------------------------------------------------------------- */

typedef struct {
    eng_node n;
    int rows, inplace, is_loss;
    float *x0;                  /* the input, perturbed by the numeric derivative */
    float *xbuf, *ybuf, *gx, *gy, *r, *cw;
} harness;

static void h_init(harness *h, eng_op_id op, int rows, const int in[3], const int out[3], int inplace)
{
    memset(h, 0, sizeof *h);
    h->rows = rows;
    h->inplace = inplace;
    h->is_loss = op == ENG_OP_SOFTMAX_XENT || op == ENG_OP_MSE;
    eng_node *n = &h->n;
    eng_node_init(n, op, 0, in, out);
    size_t xi = rows * n->in_size, yo = rows * n->out_size;
    h->x0 = calloc(xi, sizeof(float));
    h->xbuf = calloc(xi, sizeof(float));
    h->gx = calloc(xi, sizeof(float));
    h->ybuf = calloc(yo, sizeof(float));
    h->gy = calloc(yo, sizeof(float));
    h->r = calloc(yo, sizeof(float));
    n->x = h->xbuf;
    n->dx = h->gx;
    if (inplace) { n->y = h->xbuf; n->dy = h->gx; }
    else { n->y = h->ybuf; n->dy = h->gy; }
}

static void h_free(harness *h)
{
    free(h->x0); free(h->xbuf); free(h->gx); free(h->ybuf); free(h->gy); free(h->r);
    free(h->n.w); free(h->n.b); free(h->n.dw); free(h->n.db); free(h->n.argmax);
    free(h->n.col); free(h->n.dcol);
}

/* The scalar being differentiated: the loss for a loss op, else sum(r * y). */
static double h_objective(harness *h)
{
    eng_node *n = &h->n;
    memcpy(h->xbuf, h->x0, (size_t)h->rows * n->in_size * sizeof(float));
    eng_ops[n->op].forward(n, h->rows);
    if (h->is_loss) return n->loss;
    double s = 0.0;
    for (size_t i = 0; i < (size_t)h->rows * n->out_size; i++) s += (double)h->r[i] * n->y[i];
    return s;
}

static void h_analytic(harness *h)
{
    h_objective(h);
    if (!h->is_loss) memcpy(h->n.dy, h->r, (size_t)h->rows * h->n.out_size * sizeof(float));
    eng_ops[h->n.op].backward(&h->n, h->rows);
}

static double *numeric(harness *h, float *v, size_t count)
{
    double *g = calloc(count, sizeof(double));
    for (size_t i = 0; i < count; i++) {
        float keep = v[i];
        v[i] = keep + EPS;
        double fp = h_objective(h);
        v[i] = keep - EPS;
        double fm = h_objective(h);
        v[i] = keep;
        g[i] = (fp - fm) / (2.0 * (double)EPS);
    }
    return g;
}

/* Checks dx (and dw, db when the node has them); returns the worst relative diff. */
static double h_check(harness *h, const char *label)
{
    eng_node *n = &h->n;
    size_t xi = (size_t)h->rows * n->in_size;
    h_analytic(h);
    float *ax = malloc(xi * sizeof(float)), *aw = NULL, *ab = NULL;
    memcpy(ax, n->dx, xi * sizeof(float));
    if (n->dw) { aw = malloc(n->n_w * sizeof(float)); memcpy(aw, n->dw, n->n_w * sizeof(float)); }
    if (n->db) { ab = malloc(n->n_b * sizeof(float)); memcpy(ab, n->db, n->n_b * sizeof(float)); }
    char what[64];
    double worst = 0.0, d;
    double *g = numeric(h, h->x0, xi);
    snprintf(what, sizeof what, "%s d/dx", label);
    d = compare(what, ax, g, xi); if (d > worst) worst = d;
    free(g);
    if (aw) {
        g = numeric(h, n->w, n->n_w);
        snprintf(what, sizeof what, "%s d/dW", label);
        d = compare(what, aw, g, n->n_w); if (d > worst) worst = d;
        free(g);
    }
    if (ab) {
        g = numeric(h, n->b, n->n_b);
        snprintf(what, sizeof what, "%s d/db", label);
        d = compare(what, ab, g, n->n_b); if (d > worst) worst = d;
        free(g);
    }
    free(ax); free(aw); free(ab);
    return worst;
}

static void h_random(harness *h, uint64_t seed, double scale)
{
    eng_rng r;
    eng_rng_seed(&r, seed, 1);
    fill_normal(h->x0, (size_t)h->rows * h->n.in_size, &r, scale);
    fill_normal(h->r, (size_t)h->rows * h->n.out_size, &r, 1.0);
    if (h->n.w) fill_normal(h->n.w, h->n.n_w, &r, 0.5);
    if (h->n.b) fill_normal(h->n.b, h->n.n_b, &r, 0.5);
}

static void test_grad_dense(void **state)
{
    (void)state;
    harness h;
    int in[3] = { 1, 1, 4 }, out[3] = { 1, 1, 5 };
    h_init(&h, ENG_OP_DENSE, 3, in, out, 0);
    h.n.n_w = 20;
    h.n.w = calloc(20, sizeof(float));
    h.n.dw = calloc(20, sizeof(float));
    h_random(&h, 1, 1.0);
    assert_true(h_check(&h, "dense") < TOL);
    h_free(&h);
}

static void test_grad_bias(void **state)
{
    (void)state;
    /* dense-shaped (one bias per feature) and conv-shaped (one per channel over H*W) */
    int shapes[2][3] = { { 1, 1, 5 }, { 3, 2, 2 } };
    size_t nb[2] = { 5, 3 };
    for (int k = 0; k < 2; k++) {
        harness h;
        h_init(&h, ENG_OP_BIAS, 3, shapes[k], shapes[k], 1);
        h.n.n_b = nb[k];
        h.n.b = calloc(nb[k], sizeof(float));
        h.n.db = calloc(nb[k], sizeof(float));
        h_random(&h, 2 + (uint64_t)k, 1.0);
        assert_true(h_check(&h, k ? "bias (conv)" : "bias (dense)") < TOL);
        h_free(&h);
    }
}

static void check_act(eng_op_id op, const char *label)
{
    harness h;
    int s[3] = { 1, 1, 7 };
    h_init(&h, op, 3, s, s, 0);
    h_random(&h, 10 + (uint64_t)op, 1.5);
    push_from_zero(h.x0, 21);
    assert_true(h_check(&h, label) < TOL);
    h_free(&h);
}

static void test_grad_relu(void **state) { (void)state; check_act(ENG_OP_RELU, "relu"); }
static void test_grad_tanh(void **state) { (void)state; check_act(ENG_OP_TANH, "tanh"); }
static void test_grad_sigmoid(void **state) { (void)state; check_act(ENG_OP_SIGMOID, "sigmoid"); }
static void test_grad_gelu(void **state) { (void)state; check_act(ENG_OP_GELU, "gelu"); }

static void test_act_values(void **state)
{
    (void)state;
    harness h;
    int s[3] = { 1, 1, 6 };
    float x[6] = { -100.0f, -1.0f, 0.0f, 0.5f, 1.0f, 100.0f };
    /* reference values: sigmoid and tanh from libm in double; GELU's tanh form in double */
    for (int op = ENG_OP_RELU; op <= ENG_OP_GELU; op++) {
        h_init(&h, (eng_op_id)op, 1, s, s, 0);
        memcpy(h.xbuf, x, sizeof x);
        eng_ops[op].forward(&h.n, 1);
        for (int i = 0; i < 6; i++) {
            double v = x[i], want;
            switch (op) {
            case ENG_OP_RELU: want = v > 0 ? v : 0; break;
            case ENG_OP_TANH: want = tanh(v); break;
            case ENG_OP_SIGMOID: want = 1.0 / (1.0 + exp(-v)); break;
            default: want = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))); break;
            }
            assert_true(isfinite(h.ybuf[i]));
            assert_true(fabs(h.ybuf[i] - want) <= 1e-6 * (1.0 + fabs(want)));
        }
        h_free(&h);
    }
}

/* ---- accuracy of the float activation kernels against double-precision libm ----------
 * Inputs: 1e6 bit patterns spread evenly over all 2^32 (every binade of both signs,
 * subnormals, +-0, +-inf, NaNs; ~1950 per binade) and 1e6 uniform in [-12, 12], where
 * training lives. Error in ulps of the float nearest the exact value (ulp 2^-149 for
 * subnormals); relative error only where |exact| >= FLT_MIN. Bounds measured: see
 * docs/engine.md, "Activation kernels"; the asserts leave a little room above what was measured. */

#include <float.h>

typedef struct { double ulp, abs, rel, ulp_at, rel_at; long nan_bad, n; } acc_stats;

static double ref_tanh(double v) { return tanh(v); }
static double ref_sigmoid(double v) { return v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v)); }
/* 0.5 v (1 + tanh(u)) written as v / (1 + exp(-2u)): the same function, without double's
 * own cancellation for v < -19. Constants exact (not the float-rounded ones). */
static double ref_gelu(double v)
{
    double u2 = 2.0 * sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
    return u2 >= 0 ? v / (1.0 + exp(-u2)) : v * exp(u2) / (1.0 + exp(u2));
}

static double ulp_of(double v)
{
    int e;
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    if (v == 0.0 || e - 1 < -126) return 0x1p-149;
    return ldexp(1.0, e - 1 - 23);
}

static void acc_add(acc_stats *st, float x, float y, double want)
{
    st->n++;
    if (isnan(want) || isnan(y)) { st->nan_bad += isnan(want) != isnan(y); return; }
    if (isinf(want) || isinf(y)) { st->nan_bad += y != want; return; }
    double d = fabs((double)y - want), u = d / ulp_of(want);
    if (u > st->ulp) { st->ulp = u; st->ulp_at = x; }
    if (d > st->abs) st->abs = d;
    if (fabs(want) >= FLT_MIN && d / fabs(want) > st->rel) { st->rel = d / fabs(want); st->rel_at = x; }
}

/* Runs the op's forward over xs in blocks (the vector loop and its scalar tail both). */
static void acc_sweep(eng_op_id op, double (*ref)(double), const float *xs, size_t n,
                      double lo, double hi, acc_stats *st)
{
    enum { BLK = 4093 };
    static float y[BLK];
    eng_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = op;
    for (size_t i0 = 0; i0 < n; i0 += BLK) {
        size_t m = n - i0 < BLK ? n - i0 : BLK;
        nd.x = (float *)(xs + i0);
        nd.y = y;
        nd.in_size = nd.out_size = m;
        eng_ops[op].forward(&nd, 1);
        for (size_t i = 0; i < m; i++) {
            float x = xs[i0 + i];
            if (!(x >= lo && x <= hi) && !isnan(x)) continue;
            acc_add(st, x, y[i], ref((double)x));
        }
    }
}

static float *acc_inputs(size_t *n)
{
    enum { SPREAD = 1000000, DENSE = 1000000 };
    float *xs = malloc((SPREAD + DENSE) * sizeof(float));
    uint64_t step = (UINT64_C(1) << 32) / SPREAD;
    for (size_t i = 0; i < SPREAD; i++) {
        uint32_t u = (uint32_t)(i * step + (i % 97)); /* the offset varies low mantissa bits */
        memcpy(&xs[i], &u, sizeof u);
    }
    /* the specials, exactly */
    uint32_t sp[8] = { 0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f800000u,
                       0xff800000u, 0x7fc00000u, 0xffc00001u };
    for (int k = 0; k < 8; k++) memcpy(&xs[k * 7919], &sp[k], sizeof sp[k]);
    eng_rng r;
    eng_rng_seed(&r, 77, 1);
    for (size_t i = 0; i < DENSE; i++) xs[SPREAD + i] = (float)(24.0 * eng_rng_uniform(&r) - 12.0);
    *n = SPREAD + DENSE;
    return xs;
}

static void acc_print(const char *what, const acc_stats *st)
{
    printf("  %-24s max %.2f ulp (x=%.9g), max rel %.2e (x=%.9g), max abs %.2e, %ld values\n",
           what, st->ulp, st->ulp_at, st->rel, st->rel_at, st->abs, st->n);
}

static void test_act_accuracy(void **state)
{
    (void)state;
    size_t n;
    float *xs = acc_inputs(&n);
    acc_stats t = { 0 }, s = { 0 }, g = { 0 }, gp = { 0 }, gn = { 0 };
    acc_sweep(ENG_OP_TANH, ref_tanh, xs, n, -INFINITY, INFINITY, &t);
    acc_sweep(ENG_OP_SIGMOID, ref_sigmoid, xs, n, -INFINITY, INFINITY, &s);
    acc_sweep(ENG_OP_GELU, ref_gelu, xs, n, -INFINITY, INFINITY, &g);
    acc_sweep(ENG_OP_GELU, ref_gelu, xs, n, 0.0, INFINITY, &gp);
    acc_sweep(ENG_OP_GELU, ref_gelu, xs, n, -3.0, 0.0, &gn);
    acc_print("tanh", &t);
    acc_print("sigmoid", &s);
    acc_print("gelu", &g);
    acc_print("gelu, x >= 0", &gp);
    acc_print("gelu, -3 <= x <= 0", &gn);
    assert_int_equal(t.nan_bad + s.nan_bad + g.nan_bad, 0); /* NaN in <=> NaN out; infs right */
    assert_true(t.ulp <= TANH_ULP);
    assert_true(s.ulp <= SIGMOID_ULP);
    assert_true(gp.ulp <= GELU_POS_ULP);
    assert_true(gn.rel <= GELU_REL_NEAR);
    assert_true(g.rel <= GELU_REL);
    free(xs);

    /* tanh(-0) = -0; the big-|x| limits exactly */
    float sx[6] = { -0.0f, 0.0f, 1e30f, -1e30f, -200.0f, 200.0f }, sy[6];
    eng_node nd;
    memset(&nd, 0, sizeof nd);
    nd.x = sx; nd.y = sy; nd.in_size = nd.out_size = 6;
    eng_ops[ENG_OP_TANH].forward(&nd, 1);
    assert_true(sy[0] == 0.0f && signbit(sy[0]) && sy[1] == 0.0f && !signbit(sy[1]));
    assert_true(sy[2] == 1.0f && sy[3] == -1.0f);
    eng_ops[ENG_OP_SIGMOID].forward(&nd, 1);
    assert_true(sy[0] == 0.5f && sy[2] == 1.0f && sy[3] == 0.0f && sy[4] == 0.0f && sy[5] == 1.0f);
    eng_ops[ENG_OP_GELU].forward(&nd, 1);
    assert_true(sy[2] == 1e30f && sy[3] == 0.0f && sy[4] == 0.0f && sy[5] == 200.0f);
}

/* The vector loop and the scalar tail give the same bits (no FMA, no reassociation), so a
 * value's activation does not depend on where it sits in a batch or how rows are split;
 * under every instruction-set path. */
static void test_act_position_independent(void **state)
{
    eng_isa before = isa_force_or_skip(state);
    enum { N = 1003 };
    float x[N], y[N], one;
    eng_rng r;
    eng_rng_seed(&r, 5, 2);
    fill_normal(x, N, &r, 4.0);
    for (int op = ENG_OP_TANH; op <= ENG_OP_GELU; op++) {
        eng_node nd;
        memset(&nd, 0, sizeof nd);
        nd.x = x; nd.y = y; nd.in_size = nd.out_size = N;
        eng_ops[op].forward(&nd, 1);
        for (int i = 0; i < N; i++) {
            nd.x = &x[i]; nd.y = &one; nd.in_size = nd.out_size = 1;
            eng_ops[op].forward(&nd, 1);
            assert_memory_equal(&one, &y[i], sizeof one);
        }
    }
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

/* op over n values (bias: as BIAS_ROWS rows of n / BIAS_ROWS, y = x + dy's first row's worth
 * forward, the column sums of dy backward). */
#define BIAS_ROWS 1000
static void act_run(eng_op_id op, int bwd, const float *x, const float *dy, float *out, size_t n)
{
    eng_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = op;
    nd.x = (float *)x;
    nd.in_size = nd.out_size = n;
    int rows = 1;
    if (op == ENG_OP_BIAS) {
        rows = BIAS_ROWS;
        nd.in_size = nd.out_size = nd.n_b = n / BIAS_ROWS;
        nd.b = (float *)dy;
        nd.db = out;
        if (!bwd) memcpy(out, x, n * sizeof(float)); /* in place: y += b */
    }
    if (bwd && op == ENG_OP_RELU) { /* its backward gates on the forward's output */
        nd.y = malloc(n * sizeof(float));
        assert_non_null(nd.y);
        eng_ops[op].forward(&nd, rows);
    }
    if (bwd) { nd.dy = (float *)dy; nd.dx = op == ENG_OP_BIAS ? (float *)dy : out; eng_ops[op].backward(&nd, rows); }
    else { nd.y = out; eng_ops[op].forward(&nd, rows); }
    if (bwd && op == ENG_OP_RELU) free(nd.y);
}

/* Every path gives exactly the bits of the generic path (docs/engine.md promises it: no FMA,
 * no reassociation), over the accuracy test's 2e6 inputs (every binade of both signs,
 * subnormals, +-0, +-inf, NaNs, and [-12, 12]): tanh, sigmoid and gelu forward, gelu
 * backward; relu and bias both ways. test_act_accuracy's ulp bounds therefore hold on
 * every path. */
static void test_act_path_bits(void **state)
{
    eng_isa before = isa_force_or_skip(state), p = eng_isa_current();
    size_t n;
    float *xs = acc_inputs(&n);
    float *dy = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    eng_rng r;
    eng_rng_seed(&r, 8, 1);
    fill_normal(dy, n, &r, 1.0);
    static const struct { eng_op_id op; int bwd; const char *name; } k[] = {
        { ENG_OP_TANH, 0, "tanh" }, { ENG_OP_SIGMOID, 0, "sigmoid" }, { ENG_OP_GELU, 0, "gelu" },
        { ENG_OP_GELU, 1, "gelu backward" }, { ENG_OP_RELU, 0, "relu" }, { ENG_OP_RELU, 1, "relu backward" },
        { ENG_OP_BIAS, 0, "bias" }, { ENG_OP_BIAS, 1, "bias backward" },
    };
    for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
        ISA_UNDER(ENG_ISA_GENERIC, act_run(k[j].op, k[j].bwd, xs, dy, want, n));
        memset(got, 0xa5, n * sizeof(float));
        act_run(k[j].op, k[j].bwd, xs, dy, got, n);
        size_t m = k[j].op == ENG_OP_BIAS && k[j].bwd ? n / BIAS_ROWS : n; /* db: one row */
        for (size_t i = 0; i < m; i++)
            if (memcmp(&want[i], &got[i], sizeof(float)))
                fail_msg("%s on path %s: x=%.9g gives %a, the generic path %a", k[j].name, eng_isa_name(p),
                         (double)xs[i], (double)got[i], (double)want[i]);
        printf("  %-14s %s: %zu values, the same bits as generic\n", k[j].name, eng_isa_name(p), m);
    }
    free(xs); free(dy); free(want); free(got);
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

/* eng_act_derivs (for Newton): act' and act'' against differences of the ops' forward. */
static double act_of(eng_op_id op, double z)
{
    switch (op) {
    case ENG_OP_RELU: return z > 0 ? z : 0;
    case ENG_OP_TANH: return tanh(z);
    case ENG_OP_SIGMOID: return 1.0 / (1.0 + exp(-z));
    default: return 0.5 * z * (1.0 + tanh(sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
    }
}

static void test_act_derivs(void **state)
{
    (void)state;
    eng_act acts[4] = { ENG_ACT_RELU, ENG_ACT_TANH, ENG_ACT_SIGMOID, ENG_ACT_GELU };
    float z[6] = { -3.0f, -1.2f, -0.3f, 0.4f, 1.1f, 2.5f }, a[6], d1[6], d2[6];
    for (int k = 0; k < 4; k++) {
        eng_op_id op = (eng_op_id)eng_act_op(acts[k]);
        for (int i = 0; i < 6; i++) a[i] = (float)act_of(op, z[i]);
        eng_act_derivs(acts[k], z, a, 6, d1, d2);
        double worst = 0.0, h = 1e-4;
        for (int i = 0; i < 6; i++) {
            double n1 = (act_of(op, z[i] + h) - act_of(op, z[i] - h)) / (2 * h);
            double n2 = (act_of(op, z[i] + h) - 2 * act_of(op, z[i]) + act_of(op, z[i] - h)) / (h * h);
            double e = fmax(fabs(d1[i] - n1), fabs(d2[i] - n2));
            if (e > worst) worst = e;
        }
        printf("  %-8s act', act'': max abs diff %.2e\n", eng_act_name(acts[k]), worst);
        assert_true(worst < 1e-4);
    }
    eng_act_derivs(ENG_ACT_NONE, z, z, 6, d1, d2);
    assert_true(d1[0] == 1.0f && d2[0] == 0.0f);
}

static void test_grad_softmax_xent(void **state)
{
    (void)state;
    int s[3] = { 1, 1, 4 };
    int32_t labels[3] = { 2, 0, 3 };
    harness h;
    h_init(&h, ENG_OP_SOFTMAX_XENT, 3, s, s, 0);
    h.n.labels = labels;
    h_random(&h, 20, 2.0);
    assert_true(h_check(&h, "softmax_xent (labels)") < TOL);
    h_free(&h);

    /* soft targets: each row a probability distribution */
    float t[12] = { 0.1f, 0.2f, 0.3f, 0.4f, 1, 0, 0, 0, 0.25f, 0.25f, 0.25f, 0.25f };
    h_init(&h, ENG_OP_SOFTMAX_XENT, 3, s, s, 0);
    h.n.targets = t;
    h_random(&h, 21, 2.0);
    assert_true(h_check(&h, "softmax_xent (targets)") < TOL);
    h_free(&h);
}

static void test_softmax_values(void **state)
{
    (void)state;
    int s[3] = { 1, 1, 3 };
    int32_t labels[2] = { 0, 2 };
    harness h;
    h_init(&h, ENG_OP_SOFTMAX_XENT, 2, s, s, 0);
    h.n.labels = labels;
    /* huge logits must not overflow; row 0 = log-softmax of (1000, 0, -1000) */
    float x[6] = { 1000.0f, 0.0f, -1000.0f, 1.0f, 2.0f, 3.0f };
    memcpy(h.xbuf, x, sizeof x);
    eng_ops[ENG_OP_SOFTMAX_XENT].forward(&h.n, 2);
    double row1 = -(3.0 - log(exp(1.0) + exp(2.0) + exp(3.0)));
    assert_true(isfinite(h.n.loss));
    assert_true(fabs(h.n.loss - (0.0 + row1) / 2.0) < 1e-6);
    assert_int_equal(h.n.correct, 2);
    h_free(&h);
}

/* softmax_xent's forward on every ISA path: the probabilities and the loss have the
 * generic path's bits (its exps run as one vectorised loop, exp_block); each probability
 * is within 6e-7 relative of a double reference (5 ulp); a -inf logit gives 0; a NaN logit makes
 * the loss NaN (the loop's divergence check must see it). */
#define XR 2000
#define XK 10
/* softmax_xent's forward over rows x XK logits with labels: the loss; probabilities in p. */
static double s_xent_run(const float *z, const int32_t *lab, int rows, float *p, int *correct)
{
    eng_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = ENG_OP_SOFTMAX_XENT;
    nd.x = (float *)z;
    nd.y = p;
    nd.in_size = nd.out_size = XK;
    nd.labels = lab;
    eng_ops[ENG_OP_SOFTMAX_XENT].forward(&nd, rows);
    if (correct) *correct = nd.correct;
    return nd.loss;
}

static double xent_ref(const float *z, int l, double *p)
{
    float m = z[0];
    double s = 0.0;
    for (int j = 1; j < XK; j++) m = z[j] > m ? z[j] : m;
    /* from the float differences the op sees: their rounding is the input's, not the op's */
    for (int j = 0; j < XK; j++) s += exp((double)(z[j] - m));
    for (int j = 0; j < XK; j++) p[j] = exp((double)(z[j] - m)) / s;
    return log(s) - (double)(z[l] - m);
}

static void test_softmax_xent_paths(void **state)
{
    eng_isa before = isa_force_or_skip(state), path = eng_isa_current();
    static float z[XR * XK], want[XR * XK], got[XR * XK];
    static int32_t lab[XR];
    eng_rng r;
    eng_rng_seed(&r, 12, 1);
    fill_normal(z, XR * XK, &r, 1.0);
    for (int i = 0; i < XR; i++) {
        lab[i] = (int32_t)(i % XK);
        float scale = (float)ldexp(1.0, i % 12 - 4); /* logit spreads from 1/16 to 128 */
        for (int j = 0; j < XK; j++) z[i * XK + j] *= scale;
    }
    z[5 * XK + 3] = -INFINITY;
    z[7 * XK + 0] = -1e30f; /* exp underflows: 0 */
    double loss_path, loss_gen = 0.0;
    ISA_UNDER(ENG_ISA_GENERIC, loss_gen = s_xent_run(z, lab, XR - 1, want, NULL));
    memset(got, 0xa5, sizeof got);
    loss_path = s_xent_run(z, lab, XR - 1, got, NULL);
    assert_memory_equal(&loss_path, &loss_gen, sizeof loss_path);
    for (int i = 0; i < (XR - 1) * XK; i++)
        if (memcmp(&want[i], &got[i], sizeof(float)))
            fail_msg("softmax_xent on path %s: p[%d] = %a, the generic path %a", eng_isa_name(path), i,
                     (double)got[i], (double)want[i]);
    double worst = 0.0, ref_loss = 0.0, pr[XK];
    for (int i = 0; i < XR - 1; i++) {
        ref_loss += xent_ref(z + i * XK, lab[i], pr);
        for (int j = 0; j < XK; j++) {
            double e = fabs(got[i * XK + j] - pr[j]) / (pr[j] > 1e-30 ? pr[j] : 1.0);
            if (pr[j] > 1e-30 && e > worst) worst = e;
        }
    }
    ref_loss /= XR - 1;
    assert_true(got[5 * XK + 3] == 0.0f && got[7 * XK + 0] == 0.0f);
    assert_true(worst < 6e-7);
    assert_true(fabs(loss_path - ref_loss) < 1e-6 * fmax(1.0, ref_loss));
    printf("  softmax_xent %s: %d rows, the generic path's bits; max rel error %.2e, loss %.9f vs %.9f\n",
           eng_isa_name(path), XR - 1, worst, loss_path, ref_loss);
    z[(XR - 1) * XK + 4] = NAN; /* the last row */
    assert_true(isnan(s_xent_run(z, lab, XR, got, NULL)));
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

static void test_grad_mse(void **state)
{
    (void)state;
    int s[3] = { 1, 1, 3 };
    harness h;
    float t[6] = { 0.5f, -1.0f, 2.0f, 0.0f, 0.3f, -0.2f };
    h_init(&h, ENG_OP_MSE, 2, s, s, 0);
    h.n.targets = t;
    h_random(&h, 30, 1.0);
    assert_true(h_check(&h, "mse (targets)") < TOL);
    /* the value: mean over rows AND targets, no 1/2 */
    memcpy(h.xbuf, (float[]){ 1, 1, 1, 1, 1, 1 }, sizeof t);
    eng_ops[ENG_OP_MSE].forward(&h.n, 2);
    double want = 0.0;
    for (int i = 0; i < 6; i++) want += (1.0 - t[i]) * (1.0 - t[i]);
    assert_true(fabs(h.n.loss - want / 6.0) < 1e-6);
    h_free(&h);

    int32_t labels[2] = { 1, 2 };
    h_init(&h, ENG_OP_MSE, 2, s, s, 0);
    h.n.labels = labels;
    h_random(&h, 31, 1.0);
    assert_true(h_check(&h, "mse (one-hot labels)") < TOL);
    h_free(&h);
}

static void conv_setup_ps(harness *h, int rows, int C, int H, int W, int F, int K, int pad, int st, int chunk)
{
    int in[3] = { C, H, W }, out[3] = { F, (H + 2 * pad - K) / st + 1, (W + 2 * pad - K) / st + 1 };
    h_init(h, ENG_OP_CONV2D, rows, in, out, 0);
    eng_node *n = &h->n;
    n->kernel = K;
    n->pad = pad;
    n->stride = st;
    n->chunk = chunk;
    n->n_w = (size_t)F * C * K * K;
    n->w = calloc(n->n_w, sizeof(float));
    n->dw = calloc(n->n_w, sizeof(float));
    n->col = calloc(eng_conv_ws_floats(n, chunk), sizeof(float));
    n->dcol = calloc(eng_conv_ws_floats(n, chunk), sizeof(float));
}

static void conv_setup(harness *h, int rows, int C, int H, int W, int F, int K, int chunk)
{
    conv_setup_ps(h, rows, C, H, W, F, K, 0, 1, chunk);
}

/* Max |y - direct convolution in double| over the last forward of h (zero padding). */
static double conv_vs_direct(harness *h)
{
    eng_node *n = &h->n;
    int C = n->in_shape[0], H = n->in_shape[1], W = n->in_shape[2], K = n->kernel;
    int F = n->out_shape[0], OH = n->out_shape[1], OW = n->out_shape[2], pad = n->pad, st = n->stride;
    memcpy(h->xbuf, h->x0, (size_t)h->rows * n->in_size * sizeof(float));
    eng_ops[ENG_OP_CONV2D].forward(n, h->rows);
    double worst = 0.0;
    for (int r = 0; r < h->rows; r++)
        for (int f = 0; f < F; f++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double s = 0.0;
                    for (int c = 0; c < C; c++)
                        for (int i = 0; i < K; i++)
                            for (int j = 0; j < K; j++) {
                                int ih = oh * st - pad + i, iw = ow * st - pad + j;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += (double)n->w[((f * C + c) * K + i) * K + j] *
                                     h->x0[(size_t)r * n->in_size + (size_t)(c * H + ih) * W + iw];
                            }
                    double d = fabs(s - n->y[r * n->out_size + ((size_t)f * OH + oh) * OW + ow]);
                    if (d > worst) worst = d;
                }
    return worst;
}

static void test_grad_conv2d(void **state)
{
    (void)state;
    /* chunk 2 of 3 rows: the second sgemm chunk accumulates into dW */
    harness h;
    conv_setup(&h, 3, 2, 5, 6, 3, 3, 2);
    h_random(&h, 40, 1.0);
    assert_true(h_check(&h, "conv2d") < TOL);
    double worst = conv_vs_direct(&h);
    printf("  conv2d vs direct convolution: max abs diff %.2e\n", worst);
    assert_true(worst < 1e-5);
    h_free(&h);

    /* one chunk holding every row, im2col kept from forward for backward */
    conv_setup(&h, 3, 3, 6, 5, 2, 2, 3);
    h.n.col_kept = 1;
    h_random(&h, 41, 1.0);
    assert_true(h_check(&h, "conv2d (kept im2col)") < TOL);
    h_free(&h);
}

/* Padding and stride: K = 3 and 5 with pad 1 and stride 2, and sizes where the last
 * window does not fit (rows/columns dropped), each against finite differences and a
 * direct convolution, in chunks that split the rows. */
static void test_grad_conv2d_pad_stride(void **state)
{
    (void)state;
    static const struct { int C, H, W, F, K, pad, st, rows, chunk; } cases[] = {
        { 2, 5, 6, 3, 3, 1, 1, 3, 2 },   /* "same" 3x3 */
        { 2, 7, 6, 3, 3, 1, 2, 3, 2 },   /* 3x3, pad 1, stride 2 (odd height) */
        { 1, 8, 7, 2, 5, 1, 2, 2, 1 },   /* 5x5, pad 1, stride 2 */
        { 2, 6, 6, 2, 5, 2, 1, 2, 2 },   /* "same" 5x5 */
        { 3, 7, 8, 2, 3, 0, 2, 2, 1 },   /* stride 2 without padding: a column dropped */
        { 1, 5, 4, 2, 2, 1, 3, 3, 3 },   /* stride larger than the kernel: inputs skipped */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        harness h;
        conv_setup_ps(&h, cases[i].rows, cases[i].C, cases[i].H, cases[i].W, cases[i].F, cases[i].K, cases[i].pad,
                      cases[i].st, cases[i].chunk);
        h_random(&h, 70 + i, 1.0);
        char label[64];
        snprintf(label, sizeof label, "conv2d k%d p%d s%d", cases[i].K, cases[i].pad, cases[i].st);
        assert_true(h_check(&h, label) < TOL);
        double worst = conv_vs_direct(&h);
        printf("  %s vs direct convolution: max abs diff %.2e\n", label, worst);
        assert_true(worst < 1e-5);
        h_free(&h);
    }
}

/* ---- the direct convolution (model.conv_algo = direct) -------------------------------- */

/* Stride-1 shapes for the direct algorithm: the Fashion CNN's two convolutions, and padded
 * ones where F is not a multiple of the filter block (6), W and OW not multiples of the
 * vector (4, 8 or 16 floats by path), C > 1, an output row longer than one vector, short
 * rows with an odd number of them (each path is checked against the reference in
 * tests/engine/conv.c, test_conv_direct_paths). */
static const struct { int C, H, W, F, K, pad, rows; const char *what; } dconv_cases[] = {
    { 1, 28, 28, 6, 5, 0, 3, "fashion conv1 1x28x28 k5" },
    { 6, 12, 12, 16, 5, 0, 3, "fashion conv2 6x12x12 k5" },
    { 3, 9, 13, 5, 3, 1, 2, "k3 p1 C3 F5 W13" },
    { 2, 11, 19, 7, 5, 2, 2, "k5 p2 C2 F7 W19" },
    { 5, 6, 35, 3, 3, 2, 2, "k3 p2 C5 F3 W35" },
    { 2, 4, 5, 1, 1, 0, 2, "k1 C2 F1" },
    { 2, 7, 5, 6, 3, 1, 3, "k3 p1 C2 F6 7x5 (odd OH)" },
};
#define DCONV_CASES (sizeof dconv_cases / sizeof dconv_cases[0])

static void dconv_setup(harness *h, size_t i, uint64_t seed)
{
    conv_setup_ps(h, dconv_cases[i].rows, dconv_cases[i].C, dconv_cases[i].H, dconv_cases[i].W, dconv_cases[i].F,
                  dconv_cases[i].K, dconv_cases[i].pad, 1, 2);
    h_random(h, seed, 1.0);
    memcpy(h->n.dy, h->r, (size_t)h->rows * h->n.out_size * sizeof(float));
}

/* One forward + backward of h's node under algo: y, dx, dW concatenated into out. */
static void dconv_pass(harness *h, eng_conv_algo algo, float *out)
{
    eng_node *n = &h->n;
    size_t ny = (size_t)h->rows * n->out_size, nx = (size_t)h->rows * n->in_size;
    n->conv_algo = algo;
    memcpy(h->xbuf, h->x0, nx * sizeof(float));
    memcpy(n->dy, h->r, ny * sizeof(float));
    eng_ops[ENG_OP_CONV2D].forward(n, h->rows);
    eng_ops[ENG_OP_CONV2D].backward(n, h->rows);
    memcpy(out, n->y, ny * sizeof(float));
    memcpy(out + ny, n->dx, nx * sizeof(float));
    memcpy(out + ny + nx, n->dw, n->n_w * sizeof(float));
}

/* Max |a - b| over n values, relative to max |b| (the sums' scale); prints both. */
static double dconv_err(const char *what, const char *part, const float *a, const float *b, size_t n)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > worst) worst = d;
        if (fabs((double)b[i]) > scale) scale = fabs((double)b[i]);
    }
    double rel = scale > 0 ? worst / scale : worst;
    printf("  %-26s %-3s max abs %.2e  rel %.2e (of max |value| %.3g)\n", what, part, worst, rel, scale);
    return rel;
}

/* direct vs im2col + sgemm, forward (y), backward (dx, dW): the same sums in another order,
 * so they agree to float rounding: within 1e-5 of the largest value of each tensor. */
static void test_conv_direct_vs_im2col(void **state)
{
    (void)state;
    for (size_t i = 0; i < DCONV_CASES; i++) {
        harness h;
        dconv_setup(&h, i, 90 + i);
        size_t ny = (size_t)h.rows * h.n.out_size, nx = (size_t)h.rows * h.n.in_size, tot = ny + nx + h.n.n_w;
        float *a = malloc(tot * sizeof(float)), *b = malloc(tot * sizeof(float));
        dconv_pass(&h, ENG_CONV_IM2COL, a);
        dconv_pass(&h, ENG_CONV_DIRECT, b);
        assert_true(dconv_err(dconv_cases[i].what, "y", b, a, ny) < 1e-5);
        assert_true(dconv_err(dconv_cases[i].what, "dx", b + ny, a + ny, nx) < 1e-5);
        assert_true(dconv_err(dconv_cases[i].what, "dW", b + ny + nx, a + ny + nx, h.n.n_w) < 1e-5);
        free(a); free(b);
        h_free(&h);
    }
}

/* Finite differences through the direct path (dx and dW), on shapes that cover padding, F
 * not a multiple of 4 and rows longer than one vector. The op is linear, so a central
 * difference errs only by the float rounding of the objective, which grows with |y|; the
 * generic path's direct loops round each multiply and add (no FMA), about twice as often
 * as the GEMM, so x is drawn at 1/4 scale (d/dx does not depend on x) to keep that noise
 * under TOL. */
static void test_grad_conv2d_direct(void **state)
{
    (void)state;
    static const struct { int C, H, W, F, K, pad; } cases[] = {
        { 2, 5, 6, 3, 3, 1 }, { 2, 6, 6, 2, 5, 2 }, { 1, 4, 18, 5, 3, 1 }, { 2, 6, 7, 4, 3, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        harness h;
        conv_setup_ps(&h, 2, cases[i].C, cases[i].H, cases[i].W, cases[i].F, cases[i].K, cases[i].pad, 1, 2);
        h_random(&h, 130 + i, 0.25);
        h.n.conv_algo = ENG_CONV_DIRECT;
        char label[64];
        snprintf(label, sizeof label, "direct k%d p%d C%d F%d W%d", cases[i].K, cases[i].pad, cases[i].C, cases[i].F,
                 cases[i].W);
        assert_true(h_check(&h, label) < TOL);
        h_free(&h);
    }
}

static void test_grad_maxpool(void **state)
{
    (void)state;
    /* odd height: the last row of the input is dropped and gets zero gradient */
    int in[3] = { 2, 5, 4 }, out[3] = { 2, 2, 2 };
    harness h;
    h_init(&h, ENG_OP_MAXPOOL, 2, in, out, 0);
    h.n.argmax = calloc(2 * 8, sizeof(int32_t));
    h_random(&h, 50, 1.0);
    /* distinct values 0.1 apart, shuffled, so no window has a tie within EPS */
    eng_rng r;
    eng_rng_seed(&r, 51, 0);
    for (int i = 0; i < 80; i++) h.x0[i] = 0.1f * (float)i;
    for (int i = 79; i > 0; i--) {
        int j = (int)eng_rng_below(&r, (uint64_t)i + 1);
        float t = h.x0[i]; h.x0[i] = h.x0[j]; h.x0[j] = t;
    }
    assert_true(h_check(&h, "maxpool") < TOL);
    for (int rr = 0; rr < 2; rr++)
        for (int c = 0; c < 2; c++)
            for (int j = 0; j < 4; j++) assert_true(h.gx[rr * 40 + c * 20 + 4 * 4 + j] == 0.0f);
    h_free(&h);
}

/* Average pooling: tiling windows, overlapping ones (S < K: inputs receive several
 * gradients), windows that skip inputs (S > K) and odd sizes whose last row/column is
 * dropped (zero gradient); each against finite differences and a mean computed here. */
static void test_grad_avgpool(void **state)
{
    (void)state;
    static const struct { int C, H, W, K, S; } cases[] = {
        { 2, 4, 6, 2, 2 }, { 2, 5, 5, 2, 2 }, { 1, 7, 6, 3, 2 }, { 2, 5, 4, 3, 1 }, { 1, 7, 7, 2, 3 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int K = cases[i].K, S = cases[i].S, H = cases[i].H, W = cases[i].W, C = cases[i].C;
        int in[3] = { C, H, W }, out[3] = { C, (H - K) / S + 1, (W - K) / S + 1 };
        harness h;
        h_init(&h, ENG_OP_AVGPOOL, 2, in, out, 0);
        h.n.kernel = K;
        h.n.stride = S;
        h_random(&h, 80 + i, 1.0);
        char label[64];
        snprintf(label, sizeof label, "avgpool k%d s%d %dx%d", K, S, H, W);
        assert_true(h_check(&h, label) < TOL);
        h_objective(&h);                      /* y of the unperturbed input */
        double worst = 0.0;
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < C; c++)
                for (int oh = 0; oh < out[1]; oh++)
                    for (int ow = 0; ow < out[2]; ow++) {
                        double m = 0.0;
                        for (int a = 0; a < K; a++)
                            for (int b = 0; b < K; b++)
                                m += h.x0[(size_t)r * h.n.in_size + (size_t)(c * H + oh * S + a) * W + ow * S + b];
                        double d = fabs(m / (K * K) - h.n.y[(size_t)r * h.n.out_size + (size_t)(c * out[1] + oh) * out[2] + ow]);
                        if (d > worst) worst = d;
                    }
        assert_true(worst < 1e-6);
        h_free(&h);
    }
}

static void test_grad_gap(void **state)
{
    (void)state;
    int in[3] = { 3, 4, 5 }, out[3] = { 3, 1, 1 };
    harness h;
    h_init(&h, ENG_OP_GAP, 2, in, out, 0);
    h_random(&h, 90, 1.0);
    assert_true(h_check(&h, "gap") < TOL);
    h_objective(&h);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++) {
            double m = 0.0;
            for (int k = 0; k < 20; k++) m += h.x0[r * 60 + c * 20 + k];
            assert_true(fabs(m / 20 - h.n.y[r * 3 + c]) < 1e-6);
        }
    h_free(&h);
}

/* relu, bias and gap run on GCC vector lanes (engine/lanes.h) with a scalar tail: on
 * planes of 7x7 and 14x14 (vector body plus a tail of 1 and 4) they give what the scalar
 * loops they replaced gave: relu and bias forward bit for bit (the same operations per
 * element), the sums of bias backward and gap forward to 1e-6 relative (another order). */
static double lanes_worst(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs(b[i]) + 1.0);
        if (d > worst) worst = d;
    }
    return worst;
}

static void check_lane_ops(const int in[3], int rows)
{
    int out1[3] = { in[0], 1, 1 };
    size_t hw = (size_t)in[1] * in[2], C = (size_t)in[0], e = (size_t)rows * C * hw;
    harness h;
    h_init(&h, ENG_OP_RELU, rows, in, in, 0);
    h_random(&h, 77, 1.0);
    memcpy(h.xbuf, h.x0, e * sizeof(float));
    h.xbuf[3] = -0.0f;
    eng_ops[ENG_OP_RELU].forward(&h.n, rows);
    memcpy(h.gy, h.r, e * sizeof(float));
    eng_ops[ENG_OP_RELU].backward(&h.n, rows);
    for (size_t i = 0; i < e; i++) {
        float want = h.xbuf[i] > 0.0f ? h.xbuf[i] : 0.0f, gwant = h.xbuf[i] > 0.0f ? h.gy[i] : 0.0f;
        assert_memory_equal(&h.ybuf[i], &want, sizeof want); /* +0, never -0, where x <= 0 */
        assert_memory_equal(&h.gx[i], &gwant, sizeof gwant);
    }
    h_free(&h);

    h_init(&h, ENG_OP_BIAS, rows, in, in, 0);
    h.n.n_b = C;
    h.n.b = calloc(C, sizeof(float));
    h.n.db = calloc(C, sizeof(float));
    h_random(&h, 78, 1.0);
    memcpy(h.ybuf, h.x0, e * sizeof(float));
    eng_ops[ENG_OP_BIAS].forward(&h.n, rows);
    memcpy(h.gy, h.r, e * sizeof(float));
    eng_ops[ENG_OP_BIAS].backward(&h.n, rows);
    double sum_worst = 0.0;
    for (size_t c = 0; c < C; c++) {
        double s = 0.0;
        for (int r = 0; r < rows; r++)
            for (size_t k = 0; k < hw; k++) {
                size_t i = ((size_t)r * C + c) * hw + k;
                float want = h.x0[i] + h.n.b[c];
                assert_memory_equal(&h.ybuf[i], &want, sizeof want);
                s += h.r[i];
            }
        float sf = (float)s;
        double d = lanes_worst(&h.n.db[c], &sf, 1);
        if (d > sum_worst) sum_worst = d;
    }
    h_free(&h);

    h_init(&h, ENG_OP_GAP, rows, in, out1, 0);
    h_random(&h, 79, 1.0);
    memcpy(h.xbuf, h.x0, e * sizeof(float));
    eng_ops[ENG_OP_GAP].forward(&h.n, rows);
    memcpy(h.gy, h.r, (size_t)rows * C * sizeof(float));
    eng_ops[ENG_OP_GAP].backward(&h.n, rows);
    for (size_t rc = 0; rc < (size_t)rows * C; rc++) {
        double s = 0.0;
        for (size_t k = 0; k < hw; k++) {
            s += h.x0[rc * hw + k];
            float g = h.gy[rc] * (1.0f / (float)hw);
            assert_memory_equal(&h.gx[rc * hw + k], &g, sizeof g);
        }
        float m = (float)(s / (double)hw);
        double d = lanes_worst(&h.ybuf[rc], &m, 1);
        if (d > sum_worst) sum_worst = d;
    }
    printf("  %dx%dx%d x%d: relu, bias fwd, gap bwd bit-exact; bias bwd, gap fwd sums max rel diff %.2e\n", in[0], in[1],
           in[2], rows, sum_worst);
    assert_true(sum_worst < 1e-6);
    h_free(&h);
}

static void test_lane_ops(void **state)
{
    (void)state;
    int s7[3] = { 5, 7, 7 }, s14[3] = { 3, 14, 14 };
    check_lane_ops(s7, 3);
    check_lane_ops(s14, 2);
}

/* avgpool's loops run window offsets outside and output columns inside (vectorised): the
 * forward adds each window in the same order as the per-window loops it replaced (below),
 * so it is bit for bit the same; the backward adds overlapping windows' shares in another
 * order (within 1e-6). K x K windows at stride S over 3 x 15 x 17 planes, 2 rows, and
 * one plane wider than a pass of 256 outputs. */
static void ref_avgpool(const eng_node *n, int rows, float *y, float *dx)
{
    int C = n->in_shape[0], H = n->in_shape[1], W = n->in_shape[2], OH = n->out_shape[1], OW = n->out_shape[2];
    int K = n->kernel, S = n->stride;
    float inv = 1.0f / (float)(K * K);
    memset(dx, 0, (size_t)rows * n->in_size * sizeof(float));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < C; c++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    size_t base = (size_t)r * n->in_size + ((size_t)c * H + (size_t)oh * S) * W + (size_t)ow * S;
                    size_t o = (size_t)r * n->out_size + ((size_t)c * OH + oh) * OW + ow;
                    float acc = 0.0f, g = n->dy[o] * inv;
                    for (int i = 0; i < K; i++)
                        for (int j = 0; j < K; j++) {
                            acc += n->x[base + (size_t)i * W + j];
                            dx[base + (size_t)i * W + j] += g;
                        }
                    y[o] = acc * inv;
                }
}

static void test_avgpool_matches_old(void **state)
{
    (void)state;
    int KSW[4][3] = { { 2, 2, 17 }, { 3, 2, 17 }, { 3, 1, 17 }, { 2, 2, 601 } }; /* 601: 300 outputs, two passes */
    for (int t = 0; t < 4; t++) {
        int K = KSW[t][0], S = KSW[t][1], in[3] = { 3, 15, KSW[t][2] };
        int out[3] = { 3, (15 - K) / S + 1, (in[2] - K) / S + 1 };
        harness h;
        h_init(&h, ENG_OP_AVGPOOL, 2, in, out, 0);
        h.n.kernel = K;
        h.n.stride = S;
        h_random(&h, 60 + (uint64_t)t, 1.0);
        size_t xi = 2 * h.n.in_size, yo = 2 * h.n.out_size;
        memcpy(h.xbuf, h.x0, xi * sizeof(float));
        memcpy(h.gy, h.r, yo * sizeof(float));
        float *ry = malloc(yo * sizeof(float)), *rdx = malloc(xi * sizeof(float));
        ref_avgpool(&h.n, 2, ry, rdx);
        eng_ops[ENG_OP_AVGPOOL].forward(&h.n, 2);
        eng_ops[ENG_OP_AVGPOOL].backward(&h.n, 2);
        assert_memory_equal(h.ybuf, ry, yo * sizeof(float));
        double worst = lanes_worst(h.gx, rdx, xi);
        printf("  avgpool K%d S%d W%d: y bit-exact, dx max rel diff %.2e\n", K, S, in[2], worst);
        assert_true(worst < 1e-6);
        free(ry); free(rdx);
        h_free(&h);
    }
}

static void test_grad_flatten(void **state)
{
    (void)state;
    int in[3] = { 2, 2, 3 }, out[3] = { 1, 1, 12 };
    harness h;
    h_init(&h, ENG_OP_FLATTEN, 2, in, out, 1);
    h_random(&h, 60, 1.0);
    assert_true(h_check(&h, "flatten") < TOL);
    h_free(&h);
}

/* ---- whole models ------------------------------------------------------------------------ */

static eng_model_config cfg_of(const char *layers, eng_loss_kind loss)
{
    eng_model_config mc = { 0 };
    mc.loss = loss;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", layers);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        eng_layer_spec *s = &mc.layers[mc.n_layers++];
        char kind[16] = "", act[16] = "";
        int a = 0, b = 0;
        while (*tok == ' ') tok++;
        char opts[64] = "";
        if (sscanf(tok, "conv:%d:%d:%15[^:]%63s", &a, &b, act, opts) >= 2) {
            s->kind = ENG_LAYER_CONV; s->units = a; s->kernel = b;
            const char *o;
            if ((o = strstr(opts, "pad="))) s->pad = atoi(o + 4);
            if ((o = strstr(opts, "stride="))) s->stride = atoi(o + 7);
        }
        else if (sscanf(tok, "dense:%d:%15s", &a, act) >= 1) { s->kind = ENG_LAYER_DENSE; s->units = a; }
        else if (sscanf(tok, "avgpool:%d:%d", &a, &b) >= 1) { s->kind = ENG_LAYER_AVGPOOL; s->kernel = a; s->stride = b; }
        else if (sscanf(tok, "%15s", kind) == 1 && !strcmp(kind, "pool")) s->kind = ENG_LAYER_POOL;
        else if (!strcmp(kind, "avgpool")) s->kind = ENG_LAYER_AVGPOOL;
        else if (!strcmp(kind, "gap")) s->kind = ENG_LAYER_GAP;
        else s->kind = ENG_LAYER_FLATTEN;
        s->act = !strcmp(act, "relu") ? ENG_ACT_RELU : !strcmp(act, "tanh") ? ENG_ACT_TANH
               : !strcmp(act, "sigmoid") ? ENG_ACT_SIGMOID : !strcmp(act, "gelu") ? ENG_ACT_GELU : ENG_ACT_NONE;
    }
    return mc;
}

/* Numeric gradient of the model's loss w.r.t. every parameter and input, vs backward. */
static double model_check(const char *label, const char *layers, eng_loss_kind loss, const int in[3],
                          int n_out, int rows, float eps)
{
    eng_model_config mc = cfg_of(layers, loss);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, n_out, rows, 99, NULL, &m), ENG_OK);
    assert_int_equal(eng_model_enable_input_grad(m), ENG_OK);
    size_t in_size = (size_t)in[0] * in[1] * in[2], np = eng_model_n_params(m);
    float *x = malloc(rows * in_size * sizeof(float));
    float *t = malloc((size_t)rows * n_out * sizeof(float));
    int32_t *y = malloc(rows * sizeof(int32_t));
    eng_rng r;
    eng_rng_seed(&r, 5, 5);
    fill_normal(x, rows * in_size, &r, 1.0);
    fill_normal(t, (size_t)rows * n_out, &r, 1.0);
    for (int i = 0; i < rows; i++) y[i] = (int32_t)eng_rng_below(&r, (uint64_t)n_out);
    const int32_t *lab = loss == ENG_LOSS_SOFTMAX_XENT ? y : NULL;
    const float *tar = lab ? NULL : t;
    float *p = eng_model_params(m);
    /* biases are 0 after init: give them values so their gradients are exercised */
    fill_normal(p, np, &r, 0.3);
    eng_model_forward(m, x, rows, lab, tar, NULL);
    eng_model_backward(m);
    uint64_t base = kink_signature(m);
    size_t skipped = 0;
    float *ag = malloc(np * sizeof(float)), *ax = malloc(rows * in_size * sizeof(float));
    memcpy(ag, eng_model_grads(m), np * sizeof(float));
    memcpy(ax, m->dinput, rows * in_size * sizeof(float));
    double *ng = calloc(np, sizeof(double)), *nx = calloc(rows * in_size, sizeof(double));
    for (size_t i = 0; i < np; i++) {
        float keep = p[i];
        p[i] = keep + eps; double fp = eng_model_forward(m, x, rows, lab, tar, NULL);
        int kink = kink_signature(m) != base;
        p[i] = keep - eps; double fm = eng_model_forward(m, x, rows, lab, tar, NULL);
        kink |= kink_signature(m) != base;
        p[i] = keep;
        ng[i] = kink ? NAN : (fp - fm) / (2.0 * (double)eps);
        skipped += (size_t)kink;
    }
    for (size_t i = 0; i < rows * in_size; i++) {
        float keep = x[i];
        x[i] = keep + eps; double fp = eng_model_forward(m, x, rows, lab, tar, NULL);
        int kink = kink_signature(m) != base;
        x[i] = keep - eps; double fm = eng_model_forward(m, x, rows, lab, tar, NULL);
        kink |= kink_signature(m) != base;
        x[i] = keep;
        nx[i] = kink ? NAN : (fp - fm) / (2.0 * (double)eps);
        skipped += (size_t)kink;
    }
    char what[96];
    printf("  model %s: %s\n", label, eng_model_summary(m));
    snprintf(what, sizeof what, "%s d/dparams", label);
    double w1 = compare(what, ag, ng, np);
    snprintf(what, sizeof what, "%s d/dinput", label);
    double w2 = compare(what, ax, nx, rows * in_size);
    size_t total = np + rows * in_size;
    printf("  %s: %zu of %zu differences skipped (crossed a relu/max-pool kink)\n", label, skipped, total);
    assert_true(skipped * 10 < total);
    free(x); free(t); free(y); free(ag); free(ax); free(ng); free(nx);
    eng_model_free(m);
    return w1 > w2 ? w1 : w2;
}

static void test_grad_model_cnn(void **state)
{
    (void)state;
    int in[3] = { 2, 8, 8 };
    assert_true(model_check("cnn", "conv:3:3:tanh, pool, flatten, dense:5:relu, dense:3",
                            ENG_LOSS_SOFTMAX_XENT, in, 3, 4, 1e-2f) < TOL);
    assert_true(model_check("cnn-relu", "conv:4:3:relu, pool, conv:2:2:gelu, flatten, dense:3",
                            ENG_LOSS_SOFTMAX_XENT, in, 3, 3, 1e-2f) < TOL);
    /* average pooling and global average pooling inside a model */
    assert_true(model_check("cnn-avgpool-gap", "conv:4:3:tanh:pad=1, avgpool:3:2, conv:3:2:gelu, gap, dense:3",
                            ENG_LOSS_SOFTMAX_XENT, in, 3, 3, 1e-2f) < TOL);
    /* padding and stride inside a model: 8x8 -> 4x4 (k3 p1 s2) -> 4x4 (k3 p1) -> 2x2 */
    assert_true(model_check("cnn-pad-stride", "conv:3:3:tanh:pad=1:stride=2, conv:2:3:gelu:pad=1, pool, flatten, dense:3",
                            ENG_LOSS_SOFTMAX_XENT, in, 3, 3, 1e-2f) < TOL);
}

static void test_grad_model_mlp_mse(void **state)
{
    (void)state;
    int in[3] = { 1, 1, 5 };
    assert_true(model_check("mlp", "dense:6:gelu, dense:4:sigmoid, dense:2",
                            ENG_LOSS_MSE, in, 2, 3, 1e-2f) < TOL);
}

/* A relu runs in place (model.c, node_aliases) after a dense or conv layer's bias, batch
 * norm and a residual sum: its output is its input's buffer, with z's values relu'd, and
 * its backward is in place too. The gradients stay right: test_grad_model_cnn, the relu
 * MLPs of tests/engine/gradient.c and the residual nets of tests/engine/norm.c check them
 * by finite differences. */
static void test_relu_in_place(void **state)
{
    (void)state;
    int in[3] = { 1, 1, 3 };
    eng_model_config mc = cfg_of("dense:4:relu, dense:2", ENG_LOSS_SOFTMAX_XENT);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 2, 5, 7, NULL, &m), ENG_OK);
    float x[15];
    for (int i = 0; i < 15; i++) x[i] = (float)(i % 7) - 3.0f;
    int32_t lab[5] = { 0, 1, 0, 1, 1 };
    eng_model_forward(m, x, 5, lab, NULL, NULL);
    const eng_layer *L = &m->layers[0];
    assert_ptr_equal(L->a, L->z);
    assert_ptr_equal(L->da, L->dz);
    int neg = 0, pos = 0;
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < 4; c++) {
            float z = L->b[c];
            for (int k = 0; k < 3; k++) z += x[r * 3 + k] * L->w[k * 4 + c];
            float want = z > 0.0f ? z : 0.0f, got = L->a[r * 4 + c];
            assert_true(fabsf(got - want) <= 1e-6f * (1.0f + fabsf(want)));
            neg += z < 0.0f;
            pos += z > 0.0f;
        }
    assert_true(neg > 0 && pos > 0); /* both sides of the kink were taken */
    eng_model_free(m);

    /* conv + bias, bn and a residual sum, each with a relu: in place; a tanh: not */
    int img[3] = { 2, 5, 5 };
    eng_model_config cc = { .n_layers = 7, .loss = ENG_LOSS_SOFTMAX_XENT };
    cc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_CONV, .units = 2, .kernel = 3, .pad = 1, .act = ENG_ACT_RELU };
    cc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_BN, .act = ENG_ACT_RELU };
    cc.layers[2] = (eng_layer_spec){ .kind = ENG_LAYER_RES_BEGIN };
    cc.layers[3] = (eng_layer_spec){ .kind = ENG_LAYER_CONV, .units = 2, .kernel = 3, .pad = 1, .act = ENG_ACT_TANH };
    cc.layers[4] = (eng_layer_spec){ .kind = ENG_LAYER_RES, .act = ENG_ACT_RELU };
    cc.layers[5] = (eng_layer_spec){ .kind = ENG_LAYER_FLATTEN };
    cc.layers[6] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 2 };
    assert_int_equal(eng_model_build(&cc, img, 2, 2, 7, NULL, &m), ENG_OK);
    assert_ptr_equal(m->layers[0].a, m->layers[0].z);
    assert_ptr_equal(m->layers[1].a, m->layers[1].z);
    assert_ptr_not_equal(m->layers[3].a, m->layers[3].z);
    assert_ptr_equal(m->layers[4].a, m->layers[4].z);
    eng_model_free(m);
}

static void test_backward_from(void **state)
{
    (void)state;
    /* backward_from with the loss's own dL/dlogits reproduces backward */
    int in[3] = { 1, 1, 3 };
    eng_model_config mc = cfg_of("dense:4:tanh, dense:3", ENG_LOSS_SOFTMAX_XENT);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 3, 4, 1, NULL, &m), ENG_OK);
    float x[12] = { 1, 2, 3, 0, -1, 2, 0.5f, 0.5f, 0.5f, -2, 1, 0 };
    int32_t y[4] = { 0, 1, 2, 1 };
    eng_model_forward(m, x, 4, y, NULL, NULL);
    eng_model_backward(m);
    size_t np = eng_model_n_params(m);
    float *g1 = malloc(np * sizeof(float)), d[12];
    memcpy(g1, m->grads, np * sizeof(float));
    memcpy(d, m->dlogits, sizeof d);
    /* the contract: row i of dlogits is (p_i - onehot) / rows */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            assert_true(fabsf(d[i * 3 + j] - (m->probs[i * 3 + j] - (j == y[i])) / 4.0f) < 1e-7f);
    memset(m->grads, 0, np * sizeof(float));
    eng_model_backward_from(m, d);
    assert_memory_equal(g1, m->grads, np * sizeof(float));
    /* weighted: every gradient times w; a power of two scales exactly (bit for bit), any
     * other w within rounding */
    eng_model_backward_weighted(m, 0.5f, NULL, NULL);
    for (size_t i = 0; i < np; i++) assert_true(m->grads[i] == 0.5f * g1[i]);
    eng_model_backward_weighted(m, 43.0f / 128.0f, NULL, NULL);
    for (size_t i = 0; i < np; i++)
        assert_true(fabsf(m->grads[i] - 43.0f / 128.0f * g1[i]) <= 1e-6f * (1.0f + fabsf(g1[i])));
    eng_model_backward(m);
    assert_memory_equal(g1, m->grads, np * sizeof(float));
    /* the layer views */
    eng_layer *L = &m->layers[0];
    assert_int_equal(L->in_size, 3);
    assert_int_equal(L->out_size, 4);
    assert_ptr_equal(L->w, m->params + L->w_off);
    assert_ptr_equal(L->b, m->params + L->w_off + 12);
    assert_ptr_equal(L->x, x);
    for (int i = 0; i < 16; i++) assert_true(fabsf(L->a[i] - tanhf(L->z[i])) < 1e-6f);
    assert_ptr_equal(m->layers[1].x, L->a);
    assert_ptr_equal(m->layers[1].a, m->layers[1].z);
    assert_ptr_equal(m->logits, m->layers[1].a);
    free(g1);
    eng_model_free(m);
}

/* What a gradient-ready callback saw: each `from`, and whether grads[from..] then already
 * held their final values (data-parallel buckets send them at that moment). */
typedef struct {
    const eng_model *m;
    const float *final;
    size_t from[64];
    int n, early;
} ready_log;

static void log_ready(void *ud, size_t from)
{
    ready_log *l = ud;
    if (l->n < 64) l->from[l->n] = from;
    l->n++;
    size_t np = l->m->n_params;
    if (memcmp(l->m->grads + from, l->final + from, (np - from) * sizeof(float))) l->early++;
}

static void test_backward_ready(void **state)
{
    (void)state;
    /* conv, pool, flatten and dense layers: every node reports, from never grows, ends at 0,
     * and what it reports final is final */
    int in[3] = { 1, 6, 6 };
    eng_model_config mc = cfg_of("conv:3:3:relu, pool:2, flatten, dense:5:tanh, dense:3", ENG_LOSS_SOFTMAX_XENT);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 3, 2, 1, NULL, &m), ENG_OK);
    float x[72];
    for (int i = 0; i < 72; i++) x[i] = sinf((float)i);
    int32_t y[2] = { 0, 2 };
    eng_model_forward(m, x, 2, y, NULL, NULL);
    size_t np = eng_model_n_params(m);
    float *fin = malloc(np * sizeof *fin);
    eng_model_backward_weighted(m, 0.75f, NULL, NULL);
    memcpy(fin, m->grads, np * sizeof *fin);
    memset(m->grads, 0x7f, np * sizeof(float));       /* stale values until backward writes */
    ready_log a = { .m = m, .final = fin };
    eng_model_backward_weighted(m, 0.75f, log_ready, &a);
    assert_memory_equal(m->grads, fin, np * sizeof *fin);
    assert_int_equal(a.n, m->n_nodes - 1);
    assert_int_equal(a.early, 0);
    assert_true(a.from[a.n - 1] == 0);
    for (int i = 1; i < a.n; i++) assert_true(a.from[i] <= a.from[i - 1]);
    assert_true(a.from[0] > 0 && a.from[0] < np);      /* the last layer's bias comes first */
    /* without a backward (a rank with no rows): the same sequence */
    ready_log b = { .m = m, .final = fin };
    eng_model_grads_ready(m, log_ready, &b);
    assert_int_equal(b.n, a.n);
    assert_memory_equal(b.from, a.from, (size_t)a.n * sizeof a.from[0]);
    free(fin);
    eng_model_free(m);
}

/* ---- FLOP and byte formulas ---------------------------------------------------------------- */

static eng_node shaped(eng_op_id op, int c, int h, int w, int oc, int oh, int ow)
{
    eng_node n = { 0 };
    n.op = op;
    n.in_shape[0] = c; n.in_shape[1] = h; n.in_shape[2] = w;
    n.out_shape[0] = oc; n.out_shape[1] = oh; n.out_shape[2] = ow;
    n.in_size = (size_t)c * h * w;
    n.out_size = (size_t)oc * oh * ow;
    return n;
}

/* The max-pool forward against the rule written out one window at a time: the largest of
 * the four inputs in the order (0,0) (0,1) (1,0) (1,1), ties to the first, a NaN kept only
 * when it comes first. Values from {-1, 0, 1, NaN} make ties and NaNs common; widths from 8
 * to 25 (odd ones drop their last column) run the four-at-a-time rows and their tails. */
static void test_maxpool_ties_nan(void **state)
{
    (void)state;
    static const int widths[] = { 8, 9, 10, 17, 24, 25 };
    eng_rng r;
    eng_rng_seed(&r, 61, 0);
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        int C = 2, H = 5, W = widths[wi], OH = H / 2, OW = W / 2, rows = 3;
        eng_node n = shaped(ENG_OP_MAXPOOL, C, H, W, C, OH, OW);
        float *x = malloc((size_t)rows * n.in_size * sizeof *x), *y = malloc((size_t)rows * n.out_size * sizeof *y);
        int32_t *am = malloc((size_t)rows * n.out_size * sizeof *am);
        assert_non_null(x); assert_non_null(y); assert_non_null(am);
        for (size_t i = 0; i < (size_t)rows * n.in_size; i++) {
            int k = (int)eng_rng_below(&r, 4);
            x[i] = k == 3 ? NAN : (float)(k - 1);
        }
        n.x = x; n.y = y; n.argmax = am;
        eng_ops[ENG_OP_MAXPOOL].forward(&n, rows);
        for (int s = 0; s < rows; s++)
            for (int c = 0; c < C; c++)
                for (int oh = 0; oh < OH; oh++)
                    for (int ow = 0; ow < OW; ow++) {
                        const float *xs = x + (size_t)s * n.in_size;
                        int32_t at = (c * H + 2 * oh) * W + 2 * ow, cand[4] = { at, at + 1, at + W, at + W + 1 }, best = at;
                        for (int k = 1; k < 4; k++)
                            if (xs[cand[k]] > xs[best]) best = cand[k];
                        size_t o = (size_t)s * n.out_size + ((size_t)c * OH + oh) * OW + ow;
                        assert_int_equal(am[o], best);
                        assert_memory_equal(&y[o], &xs[best], sizeof(float));
                    }
        free(x); free(y); free(am);
    }
}

static void expect(const eng_node *n, int rows, eng_dir dir, uint64_t flops, uint64_t bytes)
{
    uint64_t f = eng_ops[n->op].flops(n, rows, dir), b = eng_ops[n->op].bytes(n, rows, dir);
    printf("  %-8s %s rows %d: %llu flops, %llu bytes\n", eng_ops[n->op].name, dir ? "bwd" : "fwd", rows,
           (unsigned long long)f, (unsigned long long)b);
    assert_int_equal(f, flops);
    assert_int_equal(b, bytes);
}

static void test_flops_bytes(void **state)
{
    (void)state;
    float dummy;
    /* dense 3 -> 5, 4 rows: 2*4*3*5 flops; x 12 + W 15 + y 20 floats */
    eng_node d = shaped(ENG_OP_DENSE, 1, 1, 3, 1, 1, 5);
    expect(&d, 4, ENG_FWD, 120, 188);
    expect(&d, 4, ENG_BWD, 120, 188);     /* first layer: dW only */
    d.dx = &dummy;
    expect(&d, 4, ENG_BWD, 240, 376);     /* dW and dx */

    /* conv: 1x5x5 input, 2 filters 3x3, 2 rows: P = 9, CKK = 9 */
    eng_node c = shaped(ENG_OP_CONV2D, 1, 5, 5, 2, 3, 3);
    c.kernel = 3;
    /* x 50, col 2*9*9 = 162, W 18, y 2*2*9 = 36 floats */
    expect(&c, 2, ENG_FWD, 648, 1712);    /* 2*2*2*9*9; 4*(50 + 2*162 + 18 + 36) */
    expect(&c, 2, ENG_BWD, 648, 1712);    /* dW, rebuilding im2col: 4*(36 + 162 + 18 + 50 + 162) */
    c.chunk = 2;
    c.col_kept = 1;
    expect(&c, 2, ENG_BWD, 648, 864);     /* dW from the kept im2col: 4*(36 + 162 + 18) */
    c.col_kept = 0;
    c.dx = &dummy;
    expect(&c, 2, ENG_BWD, 1458, 4072);   /* + 648 + 2*9*9; + 4*(18 + 36 + 162 + 50 + 2*162) */

    /* activations: 3 rows of 10 */
    eng_node a = shaped(ENG_OP_RELU, 1, 1, 10, 1, 1, 10);
    expect(&a, 3, ENG_FWD, 30, 240);
    expect(&a, 3, ENG_BWD, 30, 360);
    a.op = ENG_OP_TANH;
    expect(&a, 3, ENG_FWD, 30, 240);
    expect(&a, 3, ENG_BWD, 90, 360);
    a.op = ENG_OP_SIGMOID;
    expect(&a, 3, ENG_FWD, 90, 240);
    expect(&a, 3, ENG_BWD, 90, 360);
    a.op = ENG_OP_GELU;
    expect(&a, 3, ENG_FWD, 270, 240);
    expect(&a, 3, ENG_BWD, 540, 360);

    /* bias over 4 rows of 5: 20 adds; fwd reads y, b and writes y */
    eng_node b = shaped(ENG_OP_BIAS, 1, 1, 5, 1, 1, 5);
    b.n_b = 5;
    expect(&b, 4, ENG_FWD, 20, 4 * (40 + 5));
    expect(&b, 4, ENG_BWD, 20, 4 * (20 + 5));

    /* max-pool 1x4x4 -> 1x2x2, 2 rows */
    eng_node p = shaped(ENG_OP_MAXPOOL, 1, 4, 4, 1, 2, 2);
    p.dx = &dummy;
    expect(&p, 2, ENG_FWD, 24, 192);
    expect(&p, 2, ENG_BWD, 0, 224);

    /* losses: 2 rows of 3 */
    int32_t lab[2] = { 0, 1 };
    eng_node s = shaped(ENG_OP_SOFTMAX_XENT, 1, 1, 3, 1, 1, 3);
    s.labels = lab;
    expect(&s, 2, ENG_FWD, 38, 56);
    expect(&s, 2, ENG_BWD, 8, 56);
    eng_node q = shaped(ENG_OP_MSE, 1, 1, 3, 1, 1, 3);
    q.targets = &dummy;
    expect(&q, 2, ENG_FWD, 18, 48);
    expect(&q, 2, ENG_BWD, 12, 72);

    /* avgpool 2x5x5 -> 2x2x2 with 3x3 windows, stride 2, 3 rows: O = 24 outputs */
    eng_node ap = shaped(ENG_OP_AVGPOOL, 2, 5, 5, 2, 2, 2);
    ap.kernel = 3;
    ap.stride = 2;
    expect(&ap, 3, ENG_BWD, 0, 0);                     /* first layer: no dx, nothing done */
    ap.dx = &dummy;
    expect(&ap, 3, ENG_FWD, 24 * 9, 4 * (150 + 24));
    expect(&ap, 3, ENG_BWD, 24 * 10, 4 * (300 + 24));
    /* gap 3x4x4 -> 3, 2 rows */
    eng_node g = shaped(ENG_OP_GAP, 3, 4, 4, 3, 1, 1);
    g.dx = &dummy;
    expect(&g, 2, ENG_FWD, 96, 4 * (96 + 6));
    expect(&g, 2, ENG_BWD, 6, 4 * (96 + 6));

    eng_node f = shaped(ENG_OP_FLATTEN, 2, 3, 3, 1, 1, 18);
    expect(&f, 5, ENG_FWD, 0, 0);
}

/* The profiler receives the formula's counts at the one call site. */
static void test_profiled_counts(void **state)
{
    (void)state;
    prof_t *p = prof_create(&(prof_options){ .counters = "", .quiet = 1 });
    assert_non_null(p);
    int in[3] = { 1, 1, 3 };
    eng_model_config mc = cfg_of("dense:5:relu, dense:2", ENG_LOSS_SOFTMAX_XENT);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 2, 4, 1, p, &m), ENG_OK);
    float x[12] = { 0 };
    int32_t y[4] = { 0, 1, 0, 1 };
    for (int k = 0; k < 3; k++) {
        eng_model_forward(m, x, 4, y, NULL, NULL);
        eng_model_backward(m);
    }
    prof_row *rows;
    size_t n;
    assert_int_equal(prof_rows(p, PROF_BY_SCOPE, &rows, &n), 0);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(rows[i].name, "dense.fwd") && !strcmp(rows[i].layer, "dense1")) {
            assert_int_equal(rows[i].calls, 3);
            assert_int_equal(rows[i].flops, 3 * 2 * 4 * 3 * 5);
            assert_int_equal(rows[i].bytes, 3 * 4 * (12 + 15 + 20));
            seen++;
        }
        if (!strcmp(rows[i].name, "relu.bwd") && !strcmp(rows[i].layer, "dense1")) {
            assert_int_equal(rows[i].flops, 3 * 20);
            seen++;
        }
        if (!strcmp(rows[i].name, "softmax_xent.fwd") && !strcmp(rows[i].layer, "loss")) seen++;
    }
    assert_int_equal(seen, 3);
    free(rows);
    eng_model_free(m);
    prof_destroy(p);
}

/* ---- bias and activation fused into the dense layers' GEMMs ---------------------------------
 * Fused (what eng_model_build plans) against unfused (eng_model_set_fusion(m, 0)), for each
 * activation, each backend forced, at 1 to 3 threads (the GEMM slabs run the fused nodes on
 * their rows; OpenBLAS, and calls not cut by rows, after the product): the same logits,
 * loss, weight gradients and input gradient bit for bit (the same kernels on the same
 * elements); a fused bias's gradient sums its rows by blocks of 16, so within rounding of
 * the one pass. 37 rows: the last block is short. */
static void fused_pass(eng_model *m, const float *x, const int32_t *y, int rows, float *logits, float *grads,
                       float *dinput)
{
    size_t np = eng_model_n_params(m);
    eng_model_forward(m, x, rows, y, NULL, NULL);
    eng_model_backward(m);
    memcpy(logits, m->logits, (size_t)rows * m->n_out * sizeof(float));
    memcpy(grads, eng_model_grads(m), np * sizeof(float));
    memcpy(dinput, m->dinput, (size_t)rows * m->in_size * sizeof(float));
}

static void test_fused_matches_unfused(void **state)
{
    (void)state;
    static const char *const acts[] = { "relu", "tanh", "sigmoid", "gelu" };
    enum { ROWS = 37, IN = 30, OUT = 3 };
    int in[3] = { 1, 1, IN };
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
        for (int be = 0; be < ENG_GEMM_NB; be++)
            for (int th = 1; th <= 3; th++) {
                char spec[96];
                snprintf(spec, sizeof spec, "dense:48:%s, dense:40:%s, dense:%d", acts[a], acts[a], OUT);
                eng_model_config mc = cfg_of(spec, ENG_LOSS_SOFTMAX_XENT);
                eng_model *m;
                assert_int_equal(eng_model_build(&mc, in, OUT, ROWS, 3, NULL, &m), ENG_OK);
                assert_int_equal(eng_model_enable_input_grad(m), ENG_OK);
                /* dense2 runs dense1's bias and activation backward; dense1 its own forward ones */
                assert_ptr_equal(m->nodes[0].fuse_fwd[0], &m->nodes[1]);
                assert_ptr_equal(m->nodes[0].fuse_fwd[1], &m->nodes[2]);
                assert_ptr_equal(m->nodes[3].fuse_bwd[0], &m->nodes[2]);
                assert_ptr_equal(m->nodes[3].fuse_bwd[1], &m->nodes[1]);
                assert_int_equal(m->nodes[1].fused, ENG_FUSED_FWD | ENG_FUSED_BWD);
                for (int c = 0; c < ENG_GEMM_CLASSES; c++) eng_gemm_class_set(c, (eng_gemm_backend)be);
                eng_gemm_set_threads(th);
                eng_pool_set_threads(th);
                size_t np = eng_model_n_params(m);
                eng_rng r;
                eng_rng_seed(&r, 11, 3);
                fill_normal(eng_model_params(m), np, &r, 0.3); /* biases too */
                float x[ROWS * IN], lf[ROWS * OUT], lu[ROWS * OUT], df[ROWS * IN], du[ROWS * IN];
                int32_t y[ROWS];
                fill_normal(x, ROWS * IN, &r, 1.0);
                for (int i = 0; i < ROWS; i++) y[i] = (int32_t)eng_rng_below(&r, OUT);
                float *gf = malloc(np * sizeof(float)), *gu = malloc(np * sizeof(float));
                fused_pass(m, x, y, ROWS, lf, gf, df);
                assert_int_equal(eng_model_set_fusion(m, 0), ENG_OK);
                assert_null(m->nodes[0].fuse_fwd[0]);
                assert_int_equal(m->nodes[1].fused, 0);
                fused_pass(m, x, y, ROWS, lu, gu, du);
                assert_memory_equal(lf, lu, sizeof lf);
                assert_memory_equal(df, du, sizeof df);
                for (int l = 0; l < m->n_layers; l++) {
                    const eng_layer *L = &m->layers[l];
                    size_t w0 = L->w_off, b0 = L->b_off;
                    assert_memory_equal(gf + w0, gu + w0, L->n_w * sizeof(float));
                    for (size_t i = 0; i < L->n_b; i++) {
                        double e = fabs((double)gf[b0 + i] - gu[b0 + i]);
                        if (e > 1e-6 * (1.0 + fabs(gu[b0 + i])))
                            fail_msg("%s %s %d threads: layer %d bias %zu: fused %.9g, unfused %.9g", acts[a],
                                     eng_gemm_backend_name((eng_gemm_backend)be), th, l, i, gf[b0 + i], gu[b0 + i]);
                    }
                }
                /* and back: fused again gives the first pass's bits */
                assert_int_equal(eng_model_set_fusion(m, 1), ENG_OK);
                fused_pass(m, x, y, ROWS, lu, gu, du);
                assert_memory_equal(lf, lu, sizeof lf);
                assert_memory_equal(gf, gu, np * sizeof(float));
                free(gf), free(gu);
                eng_model_free(m);
                eng_gemm_classes_clear();
            }
    eng_gemm_set_threads(1);
    eng_pool_set_threads(1);
}

/* A fused bias's gradient is the sum of its 16-row blocks' sums, in block order, at any
 * thread count; unfused, one pass over the rows in order. With the last layer's W one-hot
 * (W2[j][j % 3] = 1) its dx is dlogits copied, exactly, whatever the GEMM's blocking, so
 * the bias's dy is known here exactly and both sums can be redone in float. */
static void test_fused_bias_blocks(void **state)
{
    (void)state;
    enum { ROWS = 37, IN = 5, H = 48, OUT = 3 };
    int in[3] = { 1, 1, IN };
    for (int be = 0; be < ENG_GEMM_NB; be++)
        for (int th = 1; th <= 3; th++)
            for (int fused = 1; fused >= 0; fused--) {
                eng_model_config mc = cfg_of("dense:48:relu, dense:3", ENG_LOSS_SOFTMAX_XENT);
                eng_model *m;
                assert_int_equal(eng_model_build(&mc, in, OUT, ROWS, 3, NULL, &m), ENG_OK);
                assert_int_equal(eng_model_set_fusion(m, fused), ENG_OK);
                for (int c = 0; c < ENG_GEMM_CLASSES; c++) eng_gemm_class_set(c, (eng_gemm_backend)be);
                eng_gemm_set_threads(th);
                eng_pool_set_threads(th);
                eng_rng r;
                eng_rng_seed(&r, 21, 4);
                const eng_layer *L1 = &m->layers[0], *L2 = &m->layers[1];
                fill_normal(eng_model_params(m), eng_model_n_params(m), &r, 0.5);
                for (int j = 0; j < H; j++)
                    for (int c = 0; c < OUT; c++) L2->w[j * OUT + c] = c == j % OUT ? 1.0f : 0.0f;
                float x[ROWS * IN];
                int32_t y[ROWS];
                fill_normal(x, ROWS * IN, &r, 1.0);
                for (int i = 0; i < ROWS; i++) y[i] = (int32_t)eng_rng_below(&r, OUT);
                eng_model_forward(m, x, ROWS, y, NULL, NULL);
                eng_model_backward(m);
                for (int j = 0; j < H; j++) {
                    float want = 0.0f, block = 0.0f;
                    for (int i = 0; i < ROWS; i++) {
                        float dy = L1->a[i * H + j] > 0.0f ? m->dlogits[i * OUT + j % OUT] : 0.0f;
                        if (fused) {
                            block += dy;
                            if (i % 16 == 15 || i == ROWS - 1) want += block, block = 0.0f;
                        } else {
                            want += dy;
                        }
                    }
                    if (memcmp(&want, &L1->db[j], sizeof want))
                        fail_msg("%s, %s, %d threads: db[%d] %.9g, the %s sum %.9g", fused ? "fused" : "unfused",
                                 eng_gemm_backend_name((eng_gemm_backend)be), th, j, L1->db[j],
                                 fused ? "block" : "row", want);
                }
                eng_model_free(m);
                eng_gemm_classes_clear();
            }
    eng_gemm_set_threads(1);
    eng_pool_set_threads(1);
}

/* ---- building, init, determinism, no allocation in a step ---------------------------------- */

static void test_build_summary_and_errors(void **state)
{
    (void)state;
    int in[3] = { 1, 1, 2 };
    eng_model_config mc = cfg_of("dense:16:tanh, dense:16:tanh, dense:2", ENG_LOSS_SOFTMAX_XENT);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 2, 8, 1, NULL, &m), ENG_OK);
    assert_string_equal(eng_model_summary(m), "dense(2->16) tanh, dense(16->16) tanh, dense(16->2)  [354 params]");
    assert_int_equal(eng_model_n_params(m), 354);
    /* forward refuses more rows than it was built for, and bad labels */
    float x[18] = { 0 };
    int32_t bad[1] = { 2 };
    assert_true(isnan(eng_model_forward(m, x, 9, bad, NULL, NULL)));
    assert_non_null(strstr(eng_error(), "built for 1 to 8"));
    assert_true(isnan(eng_model_forward(m, x, 1, bad, NULL, NULL)));
    assert_non_null(strstr(eng_error(), "label 2 of row 0"));
    eng_model_free(m);

    mc = cfg_of("dense:16:tanh, dense:3", ENG_LOSS_SOFTMAX_XENT);
    assert_int_equal(eng_model_build(&mc, in, 2, 8, 1, NULL, &m), ENG_EINVAL);
    assert_null(m);
    printf("  %s\n", eng_error());
    assert_non_null(strstr(eng_error(), "end the layers with dense:2"));

    mc = cfg_of("conv:4:3:relu, dense:2", ENG_LOSS_SOFTMAX_XENT);
    assert_int_equal(eng_model_build(&mc, in, 2, 8, 1, NULL, &m), ENG_EINVAL);
    printf("  %s\n", eng_error());
    assert_non_null(strstr(eng_error(), "does not fit"));
    /* padding makes it fit: 1x1x2 padded to 3x4 -> 1x2 */
    mc = cfg_of("conv:4:3:relu:pad=1, dense:2", ENG_LOSS_SOFTMAX_XENT);
    assert_int_equal(eng_model_build(&mc, in, 2, 8, 1, NULL, &m), ENG_OK);
    assert_string_equal(eng_model_summary(m), "conv(1x1x2->4x1x2 k3 p1) relu, dense(8->2)  [58 params]");
    eng_model_free(m);
    /* pooling layers describe themselves; an average pool larger than its input is refused */
    int img8[3] = { 2, 8, 8 };
    mc = cfg_of("conv:4:3:relu:pad=1:stride=2, avgpool:3:1, gap, dense:2", ENG_LOSS_SOFTMAX_XENT);
    assert_int_equal(eng_model_build(&mc, img8, 2, 8, 1, NULL, &m), ENG_OK);
    assert_string_equal(eng_model_summary(m), "conv(2x8x8->4x4x4 k3 p1 s2) relu, avgpool(4x4x4->4x2x2 k3 s1), "
                                              "gap(4x2x2->4), dense(4->2)  [86 params]");
    assert_string_equal(m->layers[1].name, "avgpool1");
    eng_model_free(m);
    mc = cfg_of("conv:4:3:relu:stride=2, avgpool:5:1, dense:2", ENG_LOSS_SOFTMAX_XENT);
    assert_int_equal(eng_model_build(&mc, img8, 2, 8, 1, NULL, &m), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "layer 2 (avgpool1): a 5x5 average pool does not fit its 4x3x3 input"));
    /* values the config parser refuses, built by hand: named, not run */
    mc = cfg_of("conv:4:3:relu:pad=3, dense:2", ENG_LOSS_SOFTMAX_XENT);
    assert_int_equal(eng_model_build(&mc, in, 2, 8, 1, NULL, &m), ENG_EINVAL);
    printf("  %s\n", eng_error());
    assert_non_null(strstr(eng_error(), "needs 0 <= pad < kernel and stride >= 1, got pad=3 stride=0"));
    mc = cfg_of("conv:4:3:relu:pad=1:stride=-1, dense:2", ENG_LOSS_SOFTMAX_XENT);
    assert_int_equal(eng_model_build(&mc, in, 2, 8, 1, NULL, &m), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "got pad=1 stride=-1"));

    int img[3] = { 1, 28, 28 };
    mc = cfg_of("conv:8:5:relu, pool, conv:16:5:relu, pool, flatten, dense:64:relu, dense:10", ENG_LOSS_SOFTMAX_XENT);
    assert_int_equal(eng_model_build(&mc, img, 10, 16, 1, NULL, &m), ENG_OK);
    printf("  %s\n", eng_model_summary(m));
    assert_string_equal(m->layers[2].name, "conv2");
    /* the summary of the defaults is what runs stored before pad and stride existed */
    assert_non_null(strstr(eng_model_summary(m), "conv(1x28x28->8x24x24 k5) relu, pool(8x24x24->8x12x12)"));
    assert_string_equal(m->layers[3].name, "pool2");
    assert_int_equal(m->layers[4].out_size, 16 * 4 * 4);
    eng_model_free(m);
}

/* The Fashion MLP issues exactly the 8 GEMMs the bench's GEMM-only bound times
 * (tests/bench/mlp_bench.c, step_shapes): 3 forward, 3 weight gradients, 2 input gradients
 * and none for the data, so the bound and the engine compare like with like. */
static void test_mlp_gemms_match_bound(void **state)
{
    (void)state;
    static const int want[8][5] = { { 0, 0, 128, 256, 784 }, { 1, 0, 784, 256, 128 }, { 0, 0, 128, 128, 256 },
                                    { 1, 0, 256, 128, 128 }, { 0, 1, 128, 256, 128 }, { 0, 0, 128, 10, 128 },
                                    { 1, 0, 128, 10, 128 },  { 0, 1, 128, 128, 10 } };
    int img[3] = { 1, 28, 28 };
    eng_model_config mc = cfg_of("dense:256:relu, dense:128:relu, dense:10", ENG_LOSS_SOFTMAX_XENT);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, img, 10, 128, 1, NULL, &m), ENG_OK);
    eng_gemm_shape g[16];
    int n = eng_model_gemm_shapes(m, 128, g, 16);
    assert_int_equal(n, 8);
    for (int i = 0; i < 8; i++) {
        int found = 0;
        for (int j = 0; j < n; j++)
            found |= g[j].ta == want[i][0] && g[j].tb == want[i][1] && g[j].M == want[i][2] && g[j].N == want[i][3] &&
                     g[j].K == want[i][4];
        if (!found) fail_msg("the MLP does not issue %c%c %dx%dx%d", want[i][0] ? 'T' : 'N', want[i][1] ? 'T' : 'N',
                             want[i][2], want[i][3], want[i][4]);
    }
    eng_model_free(m);
}

/* model.conv_algo: direct shows in the summary and issues no GEMM; stride 2 falls back to
 * im2col when direct is asked; auto picks by timing and says which (on stride 2 between
 * im2col and onednn). */
static void test_conv_algo_select(void **state)
{
    (void)state;
    int img[3] = { 1, 28, 28 };
    const char *layers = "conv:6:5:relu, pool, conv:16:5:relu, pool, flatten, dense:64:relu, dense:10";
    eng_model_config mc = cfg_of(layers, ENG_LOSS_SOFTMAX_XENT);
    eng_model *m;
    eng_gemm_shape g[32];
    assert_int_equal(eng_model_build(&mc, img, 10, 16, 1, NULL, &m), ENG_OK);
    int n_im2col = eng_model_gemm_shapes(m, 16, g, 32);
    assert_null(strstr(eng_model_summary(m), "direct"));
    eng_model_free(m);
    mc.conv_algo = ENG_CONV_DIRECT;
    assert_int_equal(eng_model_build(&mc, img, 10, 16, 1, NULL, &m), ENG_OK);
    printf("  %s\n", eng_model_summary(m));
    assert_non_null(strstr(eng_model_summary(m), "conv(1x28x28->6x24x24 k5 direct) relu"));
    assert_non_null(strstr(eng_model_summary(m), "conv(6x12x12->16x8x8 k5 direct) relu"));
    /* the dense layers' GEMMs remain; the convs' 2 (conv1: no dx) + 3 shapes are gone */
    int n_direct = eng_model_gemm_shapes(m, 16, g, 32);
    printf("  GEMM shapes: im2col model %d, direct model %d\n", n_im2col, n_direct);
    assert_int_equal(n_im2col - n_direct, 5);
    eng_model_free(m);

    int img8[3] = { 2, 8, 8 };
    mc = cfg_of("conv:4:3:relu:pad=1:stride=2, conv:3:3:relu:pad=1, flatten, dense:2", ENG_LOSS_SOFTMAX_XENT);
    mc.conv_algo = ENG_CONV_DIRECT;
    assert_int_equal(eng_model_build(&mc, img8, 2, 8, 1, NULL, &m), ENG_OK);
    assert_non_null(strstr(eng_model_summary(m), "conv(2x8x8->4x4x4 k3 p1 s2 im2col (direct needs stride 1)) relu, conv(4x4x4->3x4x4 k3 p1 direct) relu"));
    assert_int_equal(m->nodes[m->layers[0].node_first].conv_algo, ENG_CONV_IM2COL);
    eng_model_free(m);

    /* auto: measured once per machine and shape, then read back (runs repeat bit for bit) */
    char dir[] = "/tmp/nnbench-conv-choice-XXXXXX", path[64], line[512];
    assert_non_null(mkdtemp(dir));
    setenv("NNBENCH_CACHE_DIR", dir, 1);
    snprintf(path, sizeof path, "%s/conv-choices", dir);
    mc.conv_algo = ENG_CONV_AUTO;
    assert_int_equal(eng_model_build(&mc, img8, 2, 8, 1, NULL, &m), ENG_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int lines = 0;
    while (fgets(line, sizeof line, f)) lines += strncmp(line, "v5 onednn-layout ", 17) != 0;
    fclose(f);
    assert_int_equal(lines, 2); /* an algorithm per layer (besides oneDNN's layout picks) */
    /* a stored choice is obeyed: write the other algorithm for that key, build again */
    line[strcspn(line, "\t")] = 0;
    int was_direct = m->nodes[m->layers[1].node_first].conv_algo == ENG_CONV_DIRECT;
    eng_model_free(m);
    f = fopen(path, "a");
    assert_non_null(f);
    fprintf(f, "%s\t%s\n", line, was_direct ? "im2col" : "direct");
    fclose(f);
    assert_int_equal(eng_model_build(&mc, img8, 2, 8, 1, NULL, &m), ENG_OK);
    assert_int_equal(m->nodes[m->layers[1].node_first].conv_algo, was_direct ? ENG_CONV_IM2COL : ENG_CONV_DIRECT);
    unlink(path);
    rmdir(dir);
    unsetenv("NNBENCH_CACHE_DIR");
    printf("  auto: %s\n", eng_model_summary(m));
    assert_true(strstr(eng_model_summary(m), "conv(2x8x8->4x4x4 k3 p1 s2 im2col) relu") ||
                strstr(eng_model_summary(m), "conv(2x8x8->4x4x4 k3 p1 s2 onednn) relu"));
    eng_conv_algo picked = m->nodes[m->layers[1].node_first].conv_algo;
    assert_non_null(strstr(eng_model_summary(m), picked == ENG_CONV_DIRECT ? "k3 p1 direct)" : "k3 p1 im2col)"));
    /* timing left nothing behind: the parameters are the seed's, as with a fixed algorithm */
    eng_model *fixed;
    mc.conv_algo = ENG_CONV_IM2COL;
    assert_int_equal(eng_model_build(&mc, img8, 2, 8, 1, NULL, &fixed), ENG_OK);
    assert_memory_equal(eng_model_params(m), eng_model_params(fixed), eng_model_n_params(m) * sizeof(float));
    eng_model_free(fixed);
    eng_model_free(m);
}

static void test_init(void **state)
{
    (void)state;
    int in[3] = { 1, 1, 400 };
    eng_model_config mc = cfg_of("dense:300:relu, dense:100:tanh, dense:10", ENG_LOSS_SOFTMAX_XENT);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 10, 1, 3, NULL, &m), ENG_OK);
    /* He before relu: std sqrt(2/400); Xavier before tanh: uniform within sqrt(6/400) */
    const eng_layer *L0 = &m->layers[0], *L1 = &m->layers[1];
    double s2 = 0.0;
    for (size_t i = 0; i < L0->n_w; i++) s2 += (double)L0->w[i] * L0->w[i];
    double sd = sqrt(s2 / (double)L0->n_w), want = sqrt(2.0 / 400.0);
    printf("  He std %.5f (want %.5f)\n", sd, want);
    assert_true(fabs(sd / want - 1.0) < 0.02);
    double lim = sqrt(6.0 / 400.0), mx = 0.0, ma = 0.0;
    for (size_t i = 0; i < L1->n_w; i++) {
        if (fabs(L1->w[i]) > mx) mx = fabs(L1->w[i]);
        ma += fabs(L1->w[i]);
    }
    ma /= (double)L1->n_w;
    printf("  Xavier max |w| %.5f (limit %.5f), mean |w| %.5f (want %.5f)\n", mx, lim, ma, lim / 2);
    assert_true(mx <= lim && mx > 0.99 * lim);
    assert_true(fabs(ma / (lim / 2) - 1.0) < 0.03);
    for (size_t i = 0; i < L0->n_b; i++) assert_true(L0->b[i] == 0.0f);
    /* forcing Xavier changes the relu layer's init */
    mc.init = ENG_INIT_XAVIER;
    eng_model *m2;
    assert_int_equal(eng_model_build(&mc, in, 10, 1, 3, NULL, &m2), ENG_OK);
    double mx2 = 0.0;
    for (size_t i = 0; i < m2->layers[0].n_w; i++) if (fabs(m2->layers[0].w[i]) > mx2) mx2 = fabs(m2->layers[0].w[i]);
    assert_true(mx2 <= sqrt(6.0 / 700.0));
    eng_model_free(m2);
    eng_model_free(m);
}

static void train_steps(eng_model *m, eng_optim *o, const float *x, const int32_t *y, int rows, double *losses, int n)
{
    for (int k = 0; k < n; k++) {
        losses[k] = eng_model_forward(m, x, rows, y, NULL, NULL);
        eng_model_backward(m);
        eng_optim_step(o, eng_model_params(m), eng_model_grads(m), 0.05);
    }
}

static void test_determinism_and_no_alloc(void **state)
{
    (void)state;
    int in[3] = { 1, 12, 12 };
    eng_model_config mc = cfg_of("conv:4:3:relu, pool, flatten, dense:16:gelu, dense:3", ENG_LOSS_SOFTMAX_XENT);
    eng_train_config tc = { .optimizer = ENG_OPT_ADAM, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8 };
    enum { ROWS = 8 };
    float x[ROWS * 144];
    int32_t y[ROWS];
    eng_rng r;
    eng_rng_seed(&r, 8, 8);
    fill_normal(x, sizeof x / sizeof x[0], &r, 1.0);
    for (int i = 0; i < ROWS; i++) y[i] = i % 3;
    eng_model *a, *b, *c;
    eng_optim *oa, *ob;
    assert_int_equal(eng_model_build(&mc, in, 3, ROWS, 42, NULL, &a), ENG_OK);
    assert_int_equal(eng_model_build(&mc, in, 3, ROWS, 42, NULL, &b), ENG_OK);
    assert_int_equal(eng_model_build(&mc, in, 3, ROWS, 43, NULL, &c), ENG_OK);
    size_t np = eng_model_n_params(a);
    assert_memory_equal(eng_model_params(a), eng_model_params(b), np * sizeof(float));
    assert_memory_not_equal(eng_model_params(a), eng_model_params(c), np * sizeof(float));
    assert_int_equal(eng_optim_create(&tc, np, &oa), ENG_OK);
    assert_int_equal(eng_optim_create(&tc, np, &ob), ENG_OK);
    double la[5], lb[5];
    size_t live = prof_mem_live();
    prof_mem_reset_peak();
    train_steps(a, oa, x, y, ROWS, la, 5);
    assert_int_equal(prof_mem_live(), live);
    assert_int_equal(prof_mem_peak(), live); /* nothing allocated, even temporarily */
    train_steps(b, ob, x, y, ROWS, lb, 5);
    printf("  losses: %.9g %.9g %.9g %.9g %.9g\n", la[0], la[1], la[2], la[3], la[4]);
    assert_memory_equal(la, lb, sizeof la);
    assert_memory_equal(eng_model_params(a), eng_model_params(b), np * sizeof(float));
    assert_true(la[4] < la[0]);
    eng_optim_free(oa); eng_optim_free(ob);
    eng_model_free(a); eng_model_free(b); eng_model_free(c);
}

int test_engine_ops(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_dense),
        cmocka_unit_test(test_grad_bias),
        cmocka_unit_test(test_grad_relu),
        cmocka_unit_test(test_grad_tanh),
        cmocka_unit_test(test_grad_sigmoid),
        cmocka_unit_test(test_grad_gelu),
        cmocka_unit_test(test_act_values),
        cmocka_unit_test(test_act_accuracy),
        ISA_PATH_TESTS(test_act_position_independent),
        ISA_PATH_TESTS(test_act_path_bits),
        cmocka_unit_test(test_act_derivs),
        cmocka_unit_test(test_grad_softmax_xent),
        cmocka_unit_test(test_softmax_values),
        ISA_PATH_TESTS(test_softmax_xent_paths),
        cmocka_unit_test(test_grad_mse),
        cmocka_unit_test(test_grad_conv2d),
        cmocka_unit_test(test_grad_conv2d_pad_stride),
        cmocka_unit_test(test_conv_direct_vs_im2col),
        cmocka_unit_test(test_grad_conv2d_direct),
        cmocka_unit_test(test_mlp_gemms_match_bound),
        cmocka_unit_test(test_conv_algo_select),
        cmocka_unit_test(test_grad_maxpool),
        cmocka_unit_test(test_maxpool_ties_nan),
        cmocka_unit_test(test_grad_avgpool),
        cmocka_unit_test(test_grad_gap),
        cmocka_unit_test(test_lane_ops),
        cmocka_unit_test(test_avgpool_matches_old),
        cmocka_unit_test(test_grad_flatten),
        cmocka_unit_test(test_grad_model_cnn),
        cmocka_unit_test(test_grad_model_mlp_mse),
        cmocka_unit_test(test_relu_in_place),
        cmocka_unit_test(test_backward_from),
        cmocka_unit_test(test_backward_ready),
        cmocka_unit_test(test_flops_bytes),
        cmocka_unit_test(test_profiled_counts),
        cmocka_unit_test(test_fused_matches_unfused),
        cmocka_unit_test(test_fused_bias_blocks),
        cmocka_unit_test(test_build_summary_and_errors),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_determinism_and_no_alloc),
    };
    return cmocka_run_group_tests_name("engine_ops", tests, NULL, NULL);
}
