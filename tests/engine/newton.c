/* newton.c (tests) — Newton curvature against finite differences of a float64 reference
 * gradient and against closed forms, and one Newton step on a convex quadratic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lapacke.h>

#include "../../engine/internal.h"
#include "../../engine/newton.h"
#include "../../quantum/quantum.h"

/* ---- a float64 reference MLP (independent of engine/newton.c) ---------------------- */

static double ref_act(eng_act a, double z, double *d1)
{
    switch (a) {
    case ENG_ACT_TANH: { double t = tanh(z); *d1 = 1 - t * t; return t; }
    case ENG_ACT_SIGMOID: { double s = 1 / (1 + exp(-z)); *d1 = s * (1 - s); return s; }
    case ENG_ACT_RELU: *d1 = z > 0; return z > 0 ? z : 0;
    case ENG_ACT_GELU: {
        const double c = 0.7978845608028654, k = 0.044715;
        double t = tanh(c * (z + k * z * z * z));
        *d1 = 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * k * z * z);
        return 0.5 * z * (1 + t);
    }
    default: *d1 = 1; return z;
    }
}

/* Mean loss over the batch and its gradient wrt theta (all parameters, model layout).
 * Only dense layers (the tests build no others). rows <= 16, widths <= 16. */
static double ref_loss_grad(const eng_model *m, const double *theta, const float *x, int rows,
                            const int32_t *y, const float *t, double *grad)
{
    enum { MAXW = 16, MAXR = 16 };
    double A[ENG_MAX_LAYERS + 1][MAXR][MAXW], D1[ENG_MAX_LAYERS][MAXR][MAXW];
    int nl = m->n_layers, k = m->n_out;
    for (int r = 0; r < rows; r++)
        for (size_t i = 0; i < m->layers[0].in_size; i++) A[0][r][i] = x[r * m->layers[0].in_size + i];
    for (int l = 0; l < nl; l++) {
        const eng_layer *L = &m->layers[l];
        const double *W = theta + L->w_off, *b = theta + L->b_off;
        for (int r = 0; r < rows; r++)
            for (size_t j = 0; j < L->out_size; j++) {
                double z = b[j];
                for (size_t i = 0; i < L->in_size; i++) z += A[l][r][i] * W[i * L->out_size + j];
                A[l + 1][r][j] = ref_act(L->act, z, &D1[l][r][j]);
            }
    }
    double loss = 0, G[MAXR][MAXW];
    for (int r = 0; r < rows; r++) {
        const double *o = A[nl][r];
        if (y) {
            double mx = o[0], s = 0;
            for (int j = 1; j < k; j++) mx = fmax(mx, o[j]);
            for (int j = 0; j < k; j++) s += exp(o[j] - mx);
            loss += -(o[y[r]] - mx - log(s));
            for (int j = 0; j < k; j++) G[r][j] = (exp(o[j] - mx) / s - (j == y[r])) / rows;
        } else {
            for (int j = 0; j < k; j++) {
                double e = o[j] - t[r * k + j];
                loss += e * e / k;
                G[r][j] = 2 * e / k / rows;
            }
        }
    }
    if (grad) {
        memset(grad, 0, m->n_params * sizeof *grad);
        for (int l = nl - 1; l >= 0; l--) {
            const eng_layer *L = &m->layers[l];
            const double *W = theta + L->w_off;
            double *gW = grad + L->w_off, *gb = grad + L->b_off, Gp[MAXR][MAXW];
            for (int r = 0; r < rows; r++) {
                for (size_t j = 0; j < L->out_size; j++) {
                    double dz = G[r][j] * D1[l][r][j];
                    gb[j] += dz;
                    for (size_t i = 0; i < L->in_size; i++) gW[i * L->out_size + j] += A[l][r][i] * dz;
                    G[r][j] = dz;
                }
                for (size_t i = 0; i < L->in_size; i++) {
                    double s = 0;
                    for (size_t j = 0; j < L->out_size; j++) s += G[r][j] * W[i * L->out_size + j];
                    Gp[r][i] = s;
                }
            }
            memcpy(G, Gp, sizeof G);
        }
    }
    return loss / rows;
}

/* Hessian of the mean loss by central differences of the reference gradient. */
static double *fd_hessian(const eng_model *m, const float *x, int rows, const int32_t *y, const float *t)
{
    size_t P = m->n_params;
    double *th = malloc(P * sizeof *th), *gp = malloc(P * sizeof *gp), *gm = malloc(P * sizeof *gm),
           *H = malloc(P * P * sizeof *H);
    for (size_t i = 0; i < P; i++) th[i] = m->params[i];
    const double h = 1e-5;
    for (size_t p = 0; p < P; p++) {
        double s = th[p];
        th[p] = s + h; ref_loss_grad(m, th, x, rows, y, t, gp);
        th[p] = s - h; ref_loss_grad(m, th, x, rows, y, t, gm);
        th[p] = s;
        for (size_t i = 0; i < P; i++) H[i * P + p] = (gp[i] - gm[i]) / (2 * h);
    }
    free(th); free(gp); free(gm);
    return H;
}

/* ---- fixtures ------------------------------------------------------------------------ */

typedef struct {
    eng_model *m;
    eng_config cfg;
    float x[16 * 16];
    int32_t y[16];
    float t[16 * 4];
    int rows;
    eng_batch b;
} net;

static void net_make(net *n, const eng_layer_spec *layers, int nl, int in, int out, eng_loss_kind loss,
                     int rows, uint64_t seed)
{
    memset(n, 0, sizeof *n);
    eng_model_config mc = { .n_layers = nl, .loss = loss };
    memcpy(mc.layers, layers, nl * sizeof *layers);
    int shape[3] = { 1, 1, in };
    assert_int_equal(eng_model_build(&mc, shape, out, rows, seed, NULL, &n->m), ENG_OK);
    n->rows = rows;
    uint64_t s = seed * 7 + 1;
    for (int i = 0; i < rows * in; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        n->x[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 2 - 1);
    }
    for (int r = 0; r < rows; r++) {
        n->y[r] = r % out;
        for (int j = 0; j < out; j++) n->t[r * out + j] = (float)sin(r + 2.0 * j);
    }
    n->b = (eng_batch){ .x = n->x, .rows = rows, .y = loss == ENG_LOSS_SOFTMAX_XENT ? n->y : NULL,
                        .t = loss == ENG_LOSS_MSE ? n->t : NULL };
    double l = eng_model_forward(n->m, n->x, rows, n->b.y, n->b.t, NULL);
    assert_true(isfinite(l));
    eng_model_backward(n->m);
    n->cfg.seed = 1;
    n->cfg.newton = (eng_newton_config){ .curvature = ENG_CURV_HESSIAN, .blocks = ENG_BLOCKS_LAYER,
                                         .normalization_epsilon = 5e-3, .damping = 1e-10, .prune_ratio = 1,
                                         .clip = 100, .max_block = 4096 };
    n->cfg.quantum = (eng_quantum_config){ .policy = ENG_QPOLICY_CLASSICAL, .kappa_max = 1e4, .precision = 1e-2,
                                           .query_time_ns = 100, .readout = ENG_READOUT_NONE,
                                           .exact_kappa_max_n = 64 };
}

/* max |H_block - Href[off.., off..]| / max |Href block| over every block of nt. */
static double compare_blocks(net *n, eng_newton *nt, int nblocks, const double *Href, const char *what)
{
    size_t P = n->m->n_params;
    double *H = malloc(P * P * sizeof *H), worst = 0;
    for (int bi = 0; bi < nblocks; bi++) {
        int bn;
        size_t off;
        assert_int_equal(eng_newton_curvature(nt, &n->b, bi, H, &bn, &off), ENG_OK);
        double diff = 0, mag = 0;
        for (int i = 0; i < bn; i++)
            for (int j = 0; j < bn; j++) {
                double r = Href[(off + i) * P + off + j];
                diff = fmax(diff, fabs(H[(size_t)i * bn + j] - r));
                mag = fmax(mag, fabs(r));
            }
        double rel = diff / (mag > 0 ? mag : 1);
        printf("  %-28s block %d (%3d): max rel err %.2e\n", what, bi, bn, rel);
        worst = fmax(worst, rel);
    }
    free(H);
    return worst;
}

static void hessian_vs_fd(const eng_layer_spec *ls, int nl, int in, int out, eng_loss_kind loss, const char *what)
{
    net n;
    net_make(&n, ls, nl, in, out, loss, 7, 3);
    double *Hfd = fd_hessian(n.m, n.x, n.rows, n.b.y, n.b.t);
    for (int full = 0; full < 2; full++) {
        n.cfg.newton.blocks = full ? ENG_BLOCKS_FULL : ENG_BLOCKS_LAYER;
        eng_newton *nt;
        assert_int_equal(eng_newton_create(&n.cfg, n.m, NULL, &nt), ENG_OK);
        char label[64];
        snprintf(label, sizeof label, "%s %s", what, full ? "full" : "layer");
        double err = compare_blocks(&n, nt, full ? 1 : 2 * nl, Hfd, label);
        if (!(err < 1e-4)) fail_msg("%s: exact Hessian vs finite differences: rel err %.3g >= 1e-4", label, err);
        eng_newton_free(nt);
    }
    free(Hfd);
    eng_model_free(n.m);
}

static void hessian_softmax_vs_fd(void **state)
{
    (void)state;
    const eng_layer_spec ls[] = { { .kind = ENG_LAYER_DENSE, .units = 4, .act = ENG_ACT_TANH }, { .kind = ENG_LAYER_DENSE, .units = 3, .act = ENG_ACT_SIGMOID },
                                  { .kind = ENG_LAYER_DENSE, .units = 3, .act = ENG_ACT_NONE } };
    hessian_vs_fd(ls, 3, 3, 3, ENG_LOSS_SOFTMAX_XENT, "tanh-sigmoid softmax");
    const eng_layer_spec lg[] = { { .kind = ENG_LAYER_DENSE, .units = 5, .act = ENG_ACT_GELU }, { .kind = ENG_LAYER_DENSE, .units = 2, .act = ENG_ACT_NONE } };
    hessian_vs_fd(lg, 2, 4, 2, ENG_LOSS_SOFTMAX_XENT, "gelu softmax");
}

static void hessian_mse_vs_fd(void **state)
{
    (void)state;
    const eng_layer_spec ls[] = { { .kind = ENG_LAYER_DENSE, .units = 5, .act = ENG_ACT_TANH }, { .kind = ENG_LAYER_DENSE, .units = 2, .act = ENG_ACT_NONE } };
    hessian_vs_fd(ls, 2, 3, 2, ENG_LOSS_MSE, "tanh mse");
}

/* Gauss-Newton: equal to the Hessian's diagonal blocks for relu nets (s'' = 0), the layer
 * recursion and the full R-operator agree on the diagonal blocks, and it is PSD. */
static void gauss_newton_consistent(void **state)
{
    (void)state;
    const eng_layer_spec lr[] = { { .kind = ENG_LAYER_DENSE, .units = 6, .act = ENG_ACT_RELU }, { .kind = ENG_LAYER_DENSE, .units = 3, .act = ENG_ACT_NONE } };
    net n;
    net_make(&n, lr, 2, 3, 3, ENG_LOSS_SOFTMAX_XENT, 8, 5);
    double *Hfd = fd_hessian(n.m, n.x, n.rows, n.y, NULL);
    n.cfg.newton.curvature = ENG_CURV_GAUSS_NEWTON;
    eng_newton *nt;
    assert_int_equal(eng_newton_create(&n.cfg, n.m, NULL, &nt), ENG_OK);
    double err = compare_blocks(&n, nt, 4, Hfd, "gauss-newton relu = hessian");
    assert_true(err < 1e-4);
    eng_newton_free(nt);
    free(Hfd);
    eng_model_free(n.m);

    const eng_layer_spec lt[] = { { .kind = ENG_LAYER_DENSE, .units = 4, .act = ENG_ACT_TANH }, { .kind = ENG_LAYER_DENSE, .units = 3, .act = ENG_ACT_NONE } };
    net_make(&n, lt, 2, 3, 3, ENG_LOSS_SOFTMAX_XENT, 8, 6);
    size_t P = n.m->n_params;
    double *Hf = malloc(P * P * sizeof *Hf);
    n.cfg.newton.curvature = ENG_CURV_GAUSS_NEWTON;
    n.cfg.newton.blocks = ENG_BLOCKS_FULL;
    assert_int_equal(eng_newton_create(&n.cfg, n.m, NULL, &nt), ENG_OK);
    int bn;
    size_t off;
    assert_int_equal(eng_newton_curvature(nt, &n.b, 0, Hf, &bn, &off), ENG_OK);
    eng_newton_free(nt);
    double *w = malloc(P * sizeof *w), *Hc = malloc(P * P * sizeof *Hc);
    memcpy(Hc, Hf, P * P * sizeof *Hc);
    /* PSD: smallest eigenvalue >= -1e-12 * largest */
    assert_int_equal(LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', (int)P, Hc, (int)P, w), 0);
    printf("  gauss-newton full: eigenvalues %.3g .. %.3g\n", w[0], w[P - 1]);
    assert_true(w[0] >= -1e-12 * w[P - 1]);
    n.cfg.newton.blocks = ENG_BLOCKS_LAYER;
    assert_int_equal(eng_newton_create(&n.cfg, n.m, NULL, &nt), ENG_OK);
    err = compare_blocks(&n, nt, 4, Hf, "gauss-newton layer vs full");
    assert_true(err < 1e-12);
    eng_newton_free(nt);
    /* and on tanh it differs from the exact Hessian */
    double *Hfd2 = fd_hessian(n.m, n.x, n.rows, n.y, NULL), dmax = 0;
    for (size_t i = 0; i < P * P; i++) dmax = fmax(dmax, fabs(Hfd2[i] - Hf[i]));
    assert_true(dmax > 1e-4);
    free(Hfd2); free(w); free(Hc); free(Hf);
    eng_model_free(n.m);
}

/* Fisher: mean of per-sample gradient outer products (reference gradients of single rows). */
static void fisher_vs_per_sample(void **state)
{
    (void)state;
    const eng_layer_spec ls[] = { { .kind = ENG_LAYER_DENSE, .units = 4, .act = ENG_ACT_TANH }, { .kind = ENG_LAYER_DENSE, .units = 3, .act = ENG_ACT_NONE } };
    net n;
    net_make(&n, ls, 2, 3, 3, ENG_LOSS_SOFTMAX_XENT, 9, 8);
    size_t P = n.m->n_params;
    double *F = calloc(P * P, sizeof *F), *th = malloc(P * sizeof *th), *g = malloc(P * sizeof *g);
    for (size_t i = 0; i < P; i++) th[i] = n.m->params[i];
    for (int r = 0; r < n.rows; r++) {
        ref_loss_grad(n.m, th, n.x + r * 3, 1, n.y + r, NULL, g);
        for (size_t i = 0; i < P; i++)
            for (size_t j = 0; j < P; j++) F[i * P + j] += g[i] * g[j] / n.rows;
    }
    n.cfg.newton.curvature = ENG_CURV_FISHER;
    for (int full = 0; full < 2; full++) {
        n.cfg.newton.blocks = full ? ENG_BLOCKS_FULL : ENG_BLOCKS_LAYER;
        eng_newton *nt;
        assert_int_equal(eng_newton_create(&n.cfg, n.m, NULL, &nt), ENG_OK);
        double err = compare_blocks(&n, nt, full ? 1 : 4, F, full ? "fisher full" : "fisher layer");
        assert_true(err < 1e-12);
        eng_newton_free(nt);
    }
    free(F); free(th); free(g);
    eng_model_free(n.m);
}

/* Linear regression, mse: H_W = 2 X^T X / n (the engine's mse is mean (o - t)^2, whose
 * Hessian is twice that of 1/2 mean (o - t)^2), H_b = 2. */
static void closed_form_linear_regression(void **state)
{
    (void)state;
    const eng_layer_spec ls[] = { { .kind = ENG_LAYER_DENSE, .units = 1, .act = ENG_ACT_NONE } };
    net n;
    net_make(&n, ls, 1, 4, 1, ENG_LOSS_MSE, 12, 9);
    eng_newton *nt;
    assert_int_equal(eng_newton_create(&n.cfg, n.m, NULL, &nt), ENG_OK);
    double H[16];
    int bn;
    size_t off;
    assert_int_equal(eng_newton_curvature(nt, &n.b, 0, H, &bn, &off), ENG_OK);
    assert_int_equal(bn, 4);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double s = 0;
            for (int r = 0; r < 12; r++) s += (double)n.x[r * 4 + i] * n.x[r * 4 + j];
            assert_true(fabs(H[i * 4 + j] - 2 * s / 12) < 1e-14);
        }
    assert_int_equal(eng_newton_curvature(nt, &n.b, 1, H, &bn, &off), ENG_OK);
    assert_int_equal(bn, 1);
    assert_true(fabs(H[0] - 2) < 1e-15);
    eng_newton_free(nt);
    eng_model_free(n.m);
}

/* Logistic regression as a 2-class softmax: the (output 0, output 0) sub-block of H_W is
 * X^T diag(p(1-p)) X / n and the (0, 1) sub-block its negative. */
static void closed_form_logistic_regression(void **state)
{
    (void)state;
    const eng_layer_spec ls[] = { { .kind = ENG_LAYER_DENSE, .units = 2, .act = ENG_ACT_NONE } };
    net n;
    net_make(&n, ls, 1, 3, 2, ENG_LOSS_SOFTMAX_XENT, 10, 10);
    eng_newton *nt;
    assert_int_equal(eng_newton_create(&n.cfg, n.m, NULL, &nt), ENG_OK);
    double H[36], p[10];
    int bn;
    size_t off;
    assert_int_equal(eng_newton_curvature(nt, &n.b, 0, H, &bn, &off), ENG_OK);
    assert_int_equal(bn, 6);
    const float *W = n.m->params, *b = n.m->params + 6;
    for (int r = 0; r < 10; r++) {
        double z0 = b[0], z1 = b[1];
        for (int i = 0; i < 3; i++) { z0 += (double)n.x[r * 3 + i] * W[i * 2]; z1 += (double)n.x[r * 3 + i] * W[i * 2 + 1]; }
        p[r] = 1 / (1 + exp(z1 - z0));
    }
    double worst = 0;
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            double s = 0;
            for (int r = 0; r < 10; r++) s += (double)n.x[r * 3 + i] * p[r] * (1 - p[r]) * n.x[r * 3 + k];
            s /= 10;
            worst = fmax(worst, fabs(H[(i * 2 + 0) * 6 + k * 2 + 0] - s));
            worst = fmax(worst, fabs(H[(i * 2 + 0) * 6 + k * 2 + 1] + s));
            worst = fmax(worst, fabs(H[(i * 2 + 1) * 6 + k * 2 + 1] - s));
        }
    printf("  logistic regression: max |H - X^T diag(p(1-p)) X / n| = %.2e\n", worst);
    assert_true(worst < 1e-12);
    eng_newton_free(nt);
    eng_model_free(n.m);
}

static int count_events(void *ud, const struct qm_solve_event *ev)
{
    int *c = ud;
    (*c)++;
    assert_true(ev->n > 0);
    return 0;
}

/* One Newton step with lr 1 on linear least squares (full block, no shift) lands on the
 * normal-equations solution. */
static void one_step_solves_quadratic(void **state)
{
    (void)state;
    const eng_layer_spec ls[] = { { .kind = ENG_LAYER_DENSE, .units = 1, .act = ENG_ACT_NONE } };
    net n;
    net_make(&n, ls, 1, 3, 1, ENG_LOSS_MSE, 16, 11);
    for (int r = 0; r < 16; r++) n.t[r] = (float)(0.5 * n.x[r * 3] - 1.5 * n.x[r * 3 + 1] + 0.25 + 0.1 * sin(r));
    eng_model_forward(n.m, n.x, 16, NULL, n.t, NULL);
    eng_model_backward(n.m);
    n.cfg.newton.blocks = ENG_BLOCKS_FULL;
    n.cfg.newton.normalization_epsilon = 0;
    eng_newton *nt;
    assert_int_equal(eng_newton_create(&n.cfg, n.m, NULL, &nt), ENG_OK);
    int events = 0;
    eng_sink sink = { .ud = &events, .solver = count_events };
    double delta = -1, kappa = 0;
    assert_int_equal(eng_newton_step(nt, &n.b, 1.0, 1, &sink, &delta, &kappa), ENG_OK);
    assert_int_equal(events, 1);
    assert_true(delta == 0); /* classical policy: the hybrid clock is the wall clock */
    assert_true(isfinite(kappa) && kappa >= 1);
    long solves, q;
    eng_newton_counts(nt, &solves, &q);
    assert_int_equal(solves, 1);
    assert_int_equal(q, 0);
    /* normal equations [X 1]^T [X 1] w = [X 1]^T t in double */
    double A[16] = { 0 }, rhs[4] = { 0 };
    for (int r = 0; r < 16; r++) {
        double row[4] = { n.x[r * 3], n.x[r * 3 + 1], n.x[r * 3 + 2], 1 };
        for (int i = 0; i < 4; i++) {
            rhs[i] += row[i] * n.t[r];
            for (int j = 0; j < 4; j++) A[i * 4 + j] += row[i] * row[j];
        }
    }
    double wls[4];
    assert_int_equal(qm_solve_cholesky(4, A, rhs, wls, NULL), QM_OK);
    double err = 0;
    for (int i = 0; i < 4; i++) err = fmax(err, fabs(n.m->params[i] - wls[i]));
    printf("  one Newton step: max |w - w_ls| = %.2e\n", err);
    assert_true(err < 1e-5);
    /* and the gradient there vanishes */
    eng_model_forward(n.m, n.x, 16, NULL, n.t, NULL);
    eng_model_backward(n.m);
    for (int i = 0; i < 4; i++) assert_true(fabs(n.m->grads[i]) < 1e-5);
    eng_newton_free(nt);
    eng_model_free(n.m);
}

/* The quantum route in the engine: every solve routed, hybrid clock moved, counts. */
static void quantum_route_counts(void **state)
{
    (void)state;
    const eng_layer_spec ls[] = { { .kind = ENG_LAYER_DENSE, .units = 4, .act = ENG_ACT_TANH }, { .kind = ENG_LAYER_DENSE, .units = 2, .act = ENG_ACT_NONE } };
    net n;
    net_make(&n, ls, 2, 2, 2, ENG_LOSS_SOFTMAX_XENT, 8, 12);
    n.cfg.quantum.policy = ENG_QPOLICY_QUANTUM;
    n.cfg.quantum.query_time_ns = 1000;
    eng_newton *nt;
    assert_int_equal(eng_newton_create(&n.cfg, n.m, NULL, &nt), ENG_OK);
    float before[64];
    memcpy(before, n.m->params, n.m->n_params * sizeof(float));
    double delta = 0, kappa = 0;
    assert_int_equal(eng_newton_step(nt, &n.b, 0.1, 1, NULL, &delta, &kappa), ENG_OK);
    long solves, q;
    eng_newton_counts(nt, &solves, &q);
    assert_int_equal(solves, 4);
    assert_int_equal(q, 4);
    assert_true(delta > 0); /* 1 us per query: far slower than these tiny Cholesky solves */
    assert_memory_not_equal(before, n.m->params, n.m->n_params * sizeof(float));
    eng_newton_free(nt);
    eng_model_free(n.m);
}

static void refuses_big_blocks_and_conv(void **state)
{
    (void)state;
    const eng_layer_spec ls[] = { { .kind = ENG_LAYER_DENSE, .units = 4, .act = ENG_ACT_TANH }, { .kind = ENG_LAYER_DENSE, .units = 2, .act = ENG_ACT_NONE } };
    net n;
    net_make(&n, ls, 2, 3, 2, ENG_LOSS_SOFTMAX_XENT, 4, 13);
    n.cfg.newton.max_block = 10;
    eng_newton *nt = (eng_newton *)1;
    assert_int_equal(eng_newton_create(&n.cfg, n.m, NULL, &nt), ENG_EINVAL);
    assert_null(nt);
    printf("  %s\n", eng_error());
    assert_non_null(strstr(eng_error(), "newton.max_block = 10"));
    assert_non_null(strstr(eng_error(), "dense1.W has 12 parameters"));
    eng_model_free(n.m);

    eng_model_config mc = { .n_layers = 3, .loss = ENG_LOSS_SOFTMAX_XENT };
    mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_CONV, .units = 2, .kernel = 3, .act = ENG_ACT_RELU };
    mc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_FLATTEN, .units = 0, .kernel = 0, .act = ENG_ACT_NONE };
    mc.layers[2] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 2, .act = ENG_ACT_NONE };
    int shape[3] = { 1, 6, 6 };
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, shape, 2, 4, 1, NULL, &m), ENG_OK);
    assert_int_equal(eng_newton_create(&n.cfg, m, NULL, &nt), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "convolution"));
    eng_model_free(m);
}

static char cache_dir[64];

static int setup(void **state)
{
    (void)state;
    /* The scheduler calibrates its Cholesky model into the cache: keep it out of $HOME. */
    snprintf(cache_dir, sizeof cache_dir, "/tmp/nnbench-newton-XXXXXX");
    if (!mkdtemp(cache_dir)) return -1;
    setenv("XDG_CACHE_HOME", cache_dir, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int test_engine_newton(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hessian_softmax_vs_fd),
        cmocka_unit_test(hessian_mse_vs_fd),
        cmocka_unit_test(gauss_newton_consistent),
        cmocka_unit_test(fisher_vs_per_sample),
        cmocka_unit_test(closed_form_linear_regression),
        cmocka_unit_test(closed_form_logistic_regression),
        cmocka_unit_test(one_step_solves_quadratic),
        cmocka_unit_test(quantum_route_counts),
        cmocka_unit_test(refuses_big_blocks_and_conv),
    };
    return cmocka_run_group_tests_name("engine_newton", tests, setup, teardown);
}
