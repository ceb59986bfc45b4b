/* norm.c (tests) — batch norm and residual blocks: finite-difference gradients of the
 * batchnorm, res_fork and res_add ops (identity and projection shortcuts) and of whole
 * residual models, train/eval behaviour and running statistics, the layer syntax and its
 * errors, FLOP/byte formulas, checkpoints carrying the running statistics, Newton's refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/internal.h"
#include "../../engine/newton.h"
#include "../../engine/rng.h"
#include "kinks.h"

#define EPS 1e-2f
#define TOL 5e-3

static void fill_normal(float *v, size_t n, uint64_t seed, double scale)
{
    eng_rng r;
    eng_rng_seed(&r, seed, 7);
    for (size_t i = 0; i < n; i++) v[i] = (float)(scale * eng_rng_normal(&r));
}

/* max |a - n| / max(|a| + |n|, 1e-2) over count values, printed. */
static double rel_diff(const char *what, const float *a, const double *num, size_t count)
{
    double worst = 0.0;
    for (size_t i = 0; i < count; i++) {
        double den = fabs(a[i]) + fabs(num[i]);
        double d = fabs(a[i] - num[i]) / (den < 1e-2 ? 1e-2 : den);
        if (d > worst) worst = d;
    }
    printf("  %-34s max rel diff %.2e over %zu values\n", what, worst, count);
    return worst;
}

/* ---- ops in isolation: objective sum(r · y) of a forward --------------------------------- */

typedef struct {
    eng_node *nodes[2];   /* run forward in order, backward in reverse */
    int n_nodes, rows;
    const float *y;       /* the output the objective reads */
    float *r;
    size_t ny;
} chain;

static double objective(const chain *c)
{
    for (int i = 0; i < c->n_nodes; i++) eng_ops[c->nodes[i]->op].forward(c->nodes[i], c->rows);
    double s = 0.0;
    for (size_t i = 0; i < c->ny; i++) s += (double)c->r[i] * c->y[i];
    return s;
}

/* Central differences of the objective w.r.t. the count floats at v vs the analytic ones. */
static double fd_check(const chain *c, const char *what, float *v, const float *analytic, size_t count)
{
    double *num = calloc(count, sizeof(double));
    for (size_t i = 0; i < count; i++) {
        float keep = v[i];
        v[i] = keep + EPS; double fp = objective(c);
        v[i] = keep - EPS; double fm = objective(c);
        v[i] = keep;
        num[i] = (fp - fm) / (2.0 * (double)EPS);
    }
    double d = rel_diff(what, analytic, num, count);
    free(num);
    return d;
}

/* fd_check of "LABEL PART" into *worst. */
static void fd_part(const chain *c, const char *label, const char *part, float *v, const float *analytic, size_t count,
                    double *worst)
{
    char what[96];
    snprintf(what, sizeof what, "%s %s", label, part);
    double d = fd_check(c, what, v, analytic, count);
    if (d > *worst) *worst = d;
}

static float *copy_of(const float *a, size_t n)
{
    float *c = malloc(n * sizeof(float));
    memcpy(c, a, n * sizeof(float));
    return c;
}

typedef struct { eng_node n; float *x, *y, *dx, *dy, *w, *b, *dw, *db, *stats, *save; } bn_case;

static void bn_make(bn_case *t, const int shape[3], int rows, int training)
{
    memset(t, 0, sizeof *t);
    eng_node *n = &t->n;
    n->op = ENG_OP_BATCHNORM;
    memcpy(n->in_shape, shape, sizeof n->in_shape);
    memcpy(n->out_shape, shape, sizeof n->out_shape);
    n->in_size = n->out_size = (size_t)shape[0] * shape[1] * shape[2];
    size_t e = (size_t)rows * n->in_size, C = (size_t)eng_bn_channels(n);
    n->x = t->x = calloc(e, sizeof(float)); n->y = t->y = calloc(e, sizeof(float));
    n->dx = t->dx = calloc(e, sizeof(float)); n->dy = t->dy = calloc(e, sizeof(float));
    n->w = t->w = calloc(C, sizeof(float)); n->b = t->b = calloc(C, sizeof(float));
    n->dw = t->dw = calloc(C, sizeof(float)); n->db = t->db = calloc(C, sizeof(float));
    n->stats = t->stats = calloc(2 * C, sizeof(float)); n->save = t->save = calloc(2 * C, sizeof(float));
    n->n_w = n->n_b = C;
    n->training = training;
    fill_normal(t->x, e, 1, 1.5);
    for (size_t i = 0; i < e; i++) t->x[i] += (float)(i % C) * 0.5f; /* channel means differ */
    fill_normal(t->w, C, 2, 0.5);
    for (size_t c = 0; c < C; c++) { t->w[c] += 1.0f; t->stats[C + c] = 1.0f + 0.25f * (float)c; t->stats[c] = 0.1f * (float)c; }
    fill_normal(t->b, C, 3, 0.5);
}

static void bn_free(bn_case *t)
{
    free(t->x); free(t->y); free(t->dx); free(t->dy); free(t->w); free(t->b);
    free(t->dw); free(t->db); free(t->stats); free(t->save);
}

static double bn_grad(const int shape[3], int rows, int training, const char *label)
{
    bn_case t;
    bn_make(&t, shape, rows, training);
    size_t e = (size_t)rows * t.n.in_size, C = t.n.n_w;
    float *r = malloc(e * sizeof(float));
    fill_normal(r, e, 4, 1.0);
    chain c = { { &t.n }, 1, rows, t.y, r, e };
    objective(&c);
    memcpy(t.dy, r, e * sizeof(float));
    eng_ops[ENG_OP_BATCHNORM].backward(&t.n, rows);
    float *ax = copy_of(t.dx, e), *aw = copy_of(t.dw, C), *ab = copy_of(t.db, C);
    double worst = 0.0;
    fd_part(&c, label, "d/dx", t.x, ax, e, &worst);
    fd_part(&c, label, "d/dgamma", t.w, aw, C, &worst);
    fd_part(&c, label, "d/dbeta", t.b, ab, C, &worst);
    free(ax); free(aw); free(ab); free(r);
    bn_free(&t);
    return worst;
}

static void test_bn_grad(void **state)
{
    (void)state;
    int conv[3] = { 3, 4, 5 }, flat[3] = { 1, 1, 6 };
    assert_true(bn_grad(conv, 3, 1, "batchnorm conv train") < TOL);
    assert_true(bn_grad(flat, 5, 1, "batchnorm flat train") < TOL);
    assert_true(bn_grad(conv, 3, 0, "batchnorm conv eval") < TOL);
    assert_true(bn_grad(flat, 5, 0, "batchnorm flat eval") < TOL);
}

/* Values: training output has mean beta and std |gamma| per channel and moves the running
 * statistics by the momentum towards the batch's (unbiased variance); evaluation uses the
 * running ones and changes nothing. */
static void test_bn_values(void **state)
{
    (void)state;
    int shape[3] = { 2, 3, 3 };
    int rows = 4;
    bn_case t;
    bn_make(&t, shape, rows, 1);
    size_t hw = 9, cnt = (size_t)rows * hw;
    float old[4];
    memcpy(old, t.stats, sizeof old);
    eng_ops[ENG_OP_BATCHNORM].forward(&t.n, rows);
    for (int c = 0; c < 2; c++) {
        double m = 0, v = 0, my = 0, vy = 0;
        for (int r = 0; r < rows; r++)
            for (size_t k = 0; k < hw; k++) {
                size_t i = (size_t)r * 18 + (size_t)c * hw + k;
                m += t.x[i]; my += t.y[i];
            }
        m /= (double)cnt; my /= (double)cnt;
        for (int r = 0; r < rows; r++)
            for (size_t k = 0; k < hw; k++) {
                size_t i = (size_t)r * 18 + (size_t)c * hw + k;
                v += (t.x[i] - m) * (t.x[i] - m); vy += (t.y[i] - my) * (t.y[i] - my);
            }
        v /= (double)cnt; vy /= (double)cnt;
        assert_true(fabs(my - t.b[c]) < 1e-5);
        assert_true(fabs(sqrt(vy) - fabs(t.w[c]) * sqrt(v / (v + 1e-5))) < 1e-4);
        assert_true(fabs(t.stats[c] - (0.9 * old[c] + 0.1 * m)) < 1e-5);
        assert_true(fabs(t.stats[2 + c] - (0.9 * old[2 + c] + 0.1 * v * (double)cnt / (double)(cnt - 1))) < 1e-5);
    }
    float keep[4];
    memcpy(keep, t.stats, sizeof keep);
    t.n.training = 0;
    eng_ops[ENG_OP_BATCHNORM].forward(&t.n, rows);
    assert_memory_equal(keep, t.stats, sizeof keep);
    for (size_t i = 0; i < (size_t)rows * 18; i++) {
        int c = (int)((i % 18) / hw);
        double want = t.w[c] * (t.x[i] - keep[c]) / sqrt(keep[2 + c] + 1e-5) + t.b[c];
        assert_true(fabs(t.y[i] - want) < 1e-5);
    }
    bn_free(&t);
}

/* ---- batchnorm against the scalar implementation it replaced ----------------------------
 * ref_bn_fwd / ref_bn_bwd are the loops eng_bn_fwd / eng_bn_bwd had before they were
 * vectorised (float lanes within a plane, a one-pass merge of the planes' moments): two
 * passes in double per channel, element by element. The new code sums in a different
 * order, so they agree to rounding: max |new - old| / (|old| + 1) stays below 1e-5 on every
 * output (y, dx, dgamma, dbeta, running statistics), on the sample ResNet's plane sizes
 * (28x28, 14x14, 7x7), on planes smaller than the 16 lanes (the two-pass path) and on flat
 * features. On a channel whose mean (1000) dwarfs its spread (0.01), where a one-pass sum
 * of squares would cancel, y is held to the value computed in double instead: the old
 * a·x + b (b = beta - mean·a) cancelled there (off by 1.5e-2), and so would a·(x - mean) with
 * the mean rounded to float (4e-3); the new code subtracts the mean in two float parts. */

static void ref_bn_fwd(eng_node *n, int rows, int exact, float *y)
{
    int C = eng_bn_channels(n);
    size_t hw = n->in_size / (size_t)C, cnt = (size_t)rows * hw;
    for (int c = 0; c < C; c++) {
        double s = 0.0, q = 0.0, mean, var;
        for (int r = 0; r < rows; r++)
            for (size_t k = 0; k < hw; k++) s += n->x[(size_t)r * n->in_size + (size_t)c * hw + k];
        mean = s / (double)cnt;
        for (int r = 0; r < rows; r++)
            for (size_t k = 0; k < hw; k++) {
                double e = n->x[(size_t)r * n->in_size + (size_t)c * hw + k] - mean;
                q += e * e;
            }
        var = q / (double)cnt;
        if (!n->training) { mean = n->stats[c]; var = n->stats[C + c]; }
        float inv = (float)(1.0 / sqrt(var + (double)ENG_BN_EPS));
        float a = n->w[c] * inv, b = n->b[c] - (float)mean * a;
        for (int r = 0; r < rows; r++)
            for (size_t k = 0; k < hw; k++) {
                size_t i = (size_t)r * n->in_size + (size_t)c * hw + k;
                y[i] = exact ? (float)(n->w[c] * (n->x[i] - mean) / sqrt(var + (double)ENG_BN_EPS) + n->b[c])
                             : a * n->x[i] + b;
            }
    }
}

/* The old backward, from the mean and 1/std in n->save (which the new forward wrote). */
static void ref_bn_bwd(const eng_node *n, int rows, float *dx, float *dw, float *db)
{
    int C = eng_bn_channels(n);
    size_t hw = n->in_size / (size_t)C, cnt = (size_t)rows * hw;
    for (int c = 0; c < C; c++) {
        float mean = n->save[c], inv = n->save[C + c];
        double sdy = 0.0, sdyx = 0.0;
        for (int r = 0; r < rows; r++)
            for (size_t k = 0; k < hw; k++) {
                size_t i = (size_t)r * n->in_size + (size_t)c * hw + k;
                sdy += n->dy[i];
                sdyx += (double)n->dy[i] * ((n->x[i] - mean) * inv);
            }
        db[c] = (float)sdy;
        dw[c] = (float)sdyx;
        float k1 = n->w[c] * inv;
        float mdy = n->training ? (float)(sdy / (double)cnt) : 0.0f;
        float mdyx = n->training ? (float)(sdyx / (double)cnt) : 0.0f;
        for (int r = 0; r < rows; r++)
            for (size_t k = 0; k < hw; k++) {
                size_t i = (size_t)r * n->in_size + (size_t)c * hw + k;
                dx[i] = k1 * (n->dy[i] - mdy - (n->x[i] - mean) * inv * mdyx);
            }
    }
}

/* max |a - b| / (|b| + 1) over count values, printed under what. */
static double ref_diff(const char *label, const char *what, const float *a, const float *b, size_t count)
{
    double worst = 0.0;
    for (size_t i = 0; i < count; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs(b[i]) + 1.0);
        if (d > worst) worst = d;
    }
    printf("  %-26s %-8s max |new - old| / (|old| + 1) %.2e over %zu values\n", label, what, worst, count);
    return worst;
}

static double bn_vs_ref(const int shape[3], int rows, int training, float offset, float spread, int exact,
                        const char *label)
{
    bn_case t;
    bn_make(&t, shape, rows, training);
    size_t e = (size_t)rows * t.n.in_size, C = t.n.n_w;
    if (offset != 0.0f)
        for (size_t i = 0; i < e; i++) t.x[i] = offset + spread * t.x[i];
    float *ry = malloc(e * sizeof(float)), *rdx = malloc(e * sizeof(float));
    float *rdw = malloc(C * sizeof(float)), *rdb = malloc(C * sizeof(float)), *st0 = copy_of(t.stats, 2 * C);
    ref_bn_fwd(&t.n, rows, exact, ry);
    eng_ops[ENG_OP_BATCHNORM].forward(&t.n, rows);
    /* the running statistics the old code would have left, from its moments */
    float *rst = copy_of(st0, 2 * C);
    if (training) {
        size_t hw = t.n.in_size / C, cnt = (size_t)rows * hw;
        for (size_t c = 0; c < C; c++) {
            double s = 0.0, q = 0.0;
            for (int r = 0; r < rows; r++)
                for (size_t k = 0; k < hw; k++) s += t.x[(size_t)r * t.n.in_size + c * hw + k];
            for (int r = 0; r < rows; r++)
                for (size_t k = 0; k < hw; k++) {
                    double d = t.x[(size_t)r * t.n.in_size + c * hw + k] - s / (double)cnt;
                    q += d * d;
                }
            rst[c] = 0.9f * st0[c] + 0.1f * (float)(s / (double)cnt);
            rst[C + c] = 0.9f * st0[C + c] + 0.1f * (float)(q / (double)(cnt - 1));
        }
    }
    fill_normal(t.dy, e, 5, 1.0);
    ref_bn_bwd(&t.n, rows, rdx, rdw, rdb);
    eng_ops[ENG_OP_BATCHNORM].backward(&t.n, rows);
    double worst = 0.0, d;
    if ((d = ref_diff(label, exact ? "y (exact)" : "y", t.y, ry, e)) > worst) worst = d;
    if ((d = ref_diff(label, "dx", t.dx, rdx, e)) > worst) worst = d;
    if ((d = ref_diff(label, "dgamma", t.dw, rdw, C)) > worst) worst = d;
    if ((d = ref_diff(label, "dbeta", t.db, rdb, C)) > worst) worst = d;
    if ((d = ref_diff(label, "stats", t.stats, rst, 2 * C)) > worst) worst = d;
    free(ry); free(rdx); free(rdw); free(rdb); free(st0); free(rst);
    bn_free(&t);
    return worst;
}

static void test_bn_matches_old(void **state)
{
    (void)state;
    int s28[3] = { 4, 28, 28 }, s14[3] = { 8, 14, 14 }, s7[3] = { 16, 7, 7 }, s3[3] = { 3, 3, 3 }, flat[3] = { 1, 1, 10 };
    const double tol = 1e-5;
    for (int training = 1; training >= 0; training--) {
        const char *mode = training ? "train" : "eval";
        char l[64];
        snprintf(l, sizeof l, "4x28x28 x6 %s", mode);
        assert_true(bn_vs_ref(s28, 6, training, 0.0f, 1.0f, 0, l) < tol);
        snprintf(l, sizeof l, "8x14x14 x9 %s", mode);
        assert_true(bn_vs_ref(s14, 9, training, 0.0f, 1.0f, 0, l) < tol);
        snprintf(l, sizeof l, "16x7x7 x64 %s", mode);
        assert_true(bn_vs_ref(s7, 64, training, 0.0f, 1.0f, 0, l) < tol);
        snprintf(l, sizeof l, "3x3x3 x5 %s", mode);
        assert_true(bn_vs_ref(s3, 5, training, 0.0f, 1.0f, 0, l) < tol);
        snprintf(l, sizeof l, "flat 10 x7 %s", mode);
        assert_true(bn_vs_ref(flat, 7, training, 0.0f, 1.0f, 0, l) < tol);
    }
    assert_true(bn_vs_ref(s14, 9, 1, 1000.0f, 0.01f, 1, "8x14x14 mean 1000 sd .01") < tol);
}

/* Batch norm splits its channels over the pool's threads: 1 and 2 threads give the same
 * bits (each channel is computed alike whichever thread runs it), forward in training and
 * evaluation (with the running statistics it updates) and backward; the 2-thread pass posts
 * a pool job (the post hook counts them, whoever runs the slabs). */
static atomic_int bn_posts;
static void bn_count_post(void) { atomic_fetch_add(&bn_posts, 1); }

static void bn_outputs(bn_case *t, int rows, float *out)
{
    size_t e = (size_t)rows * t->n.in_size, C = t->n.n_w;
    float *dy0 = copy_of(t->dy, e);
    eng_ops[ENG_OP_BATCHNORM].forward(&t->n, rows);
    eng_ops[ENG_OP_BATCHNORM].backward(&t->n, rows);
    memcpy(out, t->y, e * sizeof(float));
    memcpy(out + e, t->dx, e * sizeof(float));
    memcpy(out + 2 * e, t->dw, C * sizeof(float));
    memcpy(out + 2 * e + C, t->db, C * sizeof(float));
    memcpy(out + 2 * e + 2 * C, t->stats, 2 * C * sizeof(float));
    memcpy(t->dy, dy0, e * sizeof(float));
    free(dy0);
}

static void test_bn_threads_same_bits(void **state)
{
    (void)state;
    int keep = eng_pool_threads();
    static const int shapes[][3] = { { 16, 28, 28 }, { 3, 28, 28 } }; /* 3: slabs of 1 and 2 channels */
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int training = 1; training >= 0; training--) {
            bn_case t[2];
            float *out[2];
            size_t e = 8 * (size_t)shapes[i][0] * shapes[i][1] * shapes[i][2], tot = 2 * e + 4 * (size_t)shapes[i][0];
            for (int k = 0; k < 2; k++) {
                bn_make(&t[k], shapes[i], 8, training);
                fill_normal(t[k].dy, e, 9, 1.0);
                out[k] = malloc(tot * sizeof(float));
                eng_pool_set_threads(k + 1);
                atomic_store(&bn_posts, 0);
                atomic_store(&eng_pool_post_hook, bn_count_post);
                bn_outputs(&t[k], 8, out[k]);
                atomic_store(&eng_pool_post_hook, NULL);
                if (k) assert_int_equal(atomic_load(&bn_posts), 2); /* forward and backward */
            }
            printf("  batchnorm %dx%dx%d %s: 1 and 2 threads, %zu values, the same bits\n", shapes[i][0], shapes[i][1],
                   shapes[i][2], training ? "training" : "evaluation", tot);
            assert_memory_equal(out[0], out[1], tot * sizeof(float));
            for (int k = 0; k < 2; k++) { free(out[k]); bn_free(&t[k]); }
        }
    eng_pool_set_threads(keep);
}

/* res_fork + res_add as one block with no layers between: y = x + P(s) where x (the branch
 * output) and s (the fork's input) are independent inputs here. */
typedef struct { eng_node fork, add; float *s, *x, *y, *ds, *dx, *dy, *dskip, *w, *b, *dw, *db, *col, *dcol; } res_case;

static void res_make(res_case *t, const int in[3], const int out[3], int rows)
{
    memset(t, 0, sizeof *t);
    eng_node *f = &t->fork, *a = &t->add;
    f->op = ENG_OP_RES_FORK; a->op = ENG_OP_RES_ADD;
    memcpy(f->in_shape, in, sizeof f->in_shape); memcpy(f->out_shape, in, sizeof f->out_shape);
    memcpy(a->in_shape, out, sizeof a->in_shape); memcpy(a->out_shape, out, sizeof a->out_shape);
    f->in_size = f->out_size = (size_t)in[0] * in[1] * in[2];
    a->in_size = a->out_size = (size_t)out[0] * out[1] * out[2];
    a->peer = f;
    size_t es = (size_t)rows * f->in_size, ey = (size_t)rows * a->out_size;
    f->x = t->s = calloc(es, sizeof(float)); f->dx = t->ds = calloc(es, sizeof(float));
    a->x = t->x = calloc(ey, sizeof(float)); a->y = t->y = calloc(ey, sizeof(float));
    a->dx = t->dx = calloc(ey, sizeof(float)); a->dy = t->dy = calloc(ey, sizeof(float));
    fill_normal(t->s, es, 11, 1.0);
    fill_normal(t->x, ey, 12, 1.0);
    if (!memcmp(in, out, 3 * sizeof(int))) {
        a->dskip = f->dskip = a->dy;
        return;
    }
    int C, F, P, Pin;
    eng_res_dims(in, &C, &Pin);
    eng_res_dims(out, &F, &P);
    a->stride = eng_res_proj_stride(in, out);
    assert_true(a->stride > 0);
    a->n_w = (size_t)F * C; a->n_b = (size_t)F;
    a->w = t->w = calloc(a->n_w, sizeof(float)); a->b = t->b = calloc(a->n_b, sizeof(float));
    a->dw = t->dw = calloc(a->n_w, sizeof(float)); a->db = t->db = calloc(a->n_b, sizeof(float));
    a->col = t->col = calloc((size_t)rows * C * P, sizeof(float));
    a->dcol = t->dcol = calloc(eng_res_proj_dcol_floats(a, (size_t)rows), sizeof(float));
    a->dskip = f->dskip = t->dskip = calloc(es, sizeof(float));
    fill_normal(t->w, a->n_w, 13, 0.7);
    fill_normal(t->b, a->n_b, 14, 0.7);
}

static void res_free(res_case *t)
{
    free(t->s); free(t->x); free(t->y); free(t->ds); free(t->dx); free(t->dy); free(t->dskip);
    free(t->w); free(t->b); free(t->dw); free(t->db); free(t->col); free(t->dcol);
}

static double res_grad(const int in[3], const int out[3], int rows, const char *label)
{
    res_case t;
    res_make(&t, in, out, rows);
    size_t es = (size_t)rows * t.fork.in_size, ey = (size_t)rows * t.add.out_size;
    float *r = malloc(ey * sizeof(float));
    fill_normal(r, ey, 15, 1.0);
    chain c = { { &t.fork, &t.add }, 2, rows, t.y, r, ey };
    objective(&c);
    memcpy(t.dy, r, ey * sizeof(float));
    memset(t.ds, 0, es * sizeof(float));     /* what the block's first layer would have written */
    eng_ops[ENG_OP_RES_ADD].backward(&t.add, rows);
    eng_ops[ENG_OP_RES_FORK].backward(&t.fork, rows);
    float *ax = copy_of(t.dx, ey), *as = copy_of(t.ds, es);
    double worst = 0.0;
    fd_part(&c, label, "d/dx (branch)", t.x, ax, ey, &worst);
    fd_part(&c, label, "d/dshortcut", t.s, as, es, &worst);
    if (t.w) {
        float *aw = copy_of(t.dw, t.add.n_w), *ab = copy_of(t.db, t.add.n_b);
        fd_part(&c, label, "d/dW", t.w, aw, t.add.n_w, &worst);
        fd_part(&c, label, "d/db", t.b, ab, t.add.n_b, &worst);
        free(aw); free(ab);
    }
    free(ax); free(as); free(r);
    res_free(&t);
    return worst;
}

static void test_res_grad(void **state)
{
    (void)state;
    int a[3] = { 3, 4, 4 }, b[3] = { 5, 2, 2 }, c[3] = { 2, 5, 5 }, d[3] = { 4, 3, 3 };
    int f1[3] = { 1, 1, 6 }, f2[3] = { 1, 1, 4 };
    assert_true(res_grad(a, a, 3, "res identity") < TOL);
    assert_true(res_grad(a, b, 3, "res proj 3x4x4->5x2x2 s2") < TOL);
    assert_true(res_grad(c, d, 2, "res proj 2x5x5->4x3x3 s2 (odd)") < TOL);
    assert_true(res_grad(a, (int[3]){ 6, 4, 4 }, 2, "res proj 3x4x4->6x4x4 s1") < TOL);
    assert_true(res_grad(f1, f2, 3, "res proj flat 6->4") < TOL);
    assert_int_equal(eng_res_proj_stride(c, d), 2);
    assert_int_equal(eng_res_proj_stride(a, (int[3]){ 3, 3, 3 }), 0); /* 4 -> 3: no stride fits */
}

/* The projection shortcut runs one GEMM per product for all rows (the shortcut gathered
 * channel-major): y, dW, db and dL/dshortcut agree with the per-row definition, computed
 * here in double, on the ResNet's two projections and an odd strided one, with a batch and
 * then a smaller one (the last partial batch) on the same buffers. */
static double max_rel(const float *got, const double *want, size_t n)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        if (!(d <= worst)) worst = d;
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    }
    return scale > 0 ? worst / scale : worst;
}

static void proj_reference(const res_case *t, int rows, double *y, double *dw, double *db, double *ds)
{
    const eng_node *a = &t->add, *f = &t->fork;
    int C = f->in_shape[0], H = f->in_shape[1], W = f->in_shape[2], F = a->out_shape[0];
    int OH = a->out_shape[1], OW = a->out_shape[2], S = a->stride;
    memset(dw, 0, (size_t)F * C * sizeof(double));
    memset(db, 0, (size_t)F * sizeof(double));
    memset(ds, 0, (size_t)rows * f->in_size * sizeof(double));
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < F; o++)
            for (int p = 0; p < OH * OW; p++) {
                size_t yi = (size_t)r * a->out_size + (size_t)o * OH * OW + p;
                double acc = (double)t->x[yi] + t->b[o], g = t->dy[yi];
                db[o] += g;
                for (int c = 0; c < C; c++) {
                    size_t si = (size_t)r * f->in_size + ((size_t)c * H + (size_t)(p / OW) * S) * W + (size_t)(p % OW) * S;
                    acc += (double)t->w[o * C + c] * t->s[si];
                    dw[o * C + c] += g * t->s[si];
                    ds[si] += (double)t->w[o * C + c] * g;
                }
                y[yi] = acc;
            }
}

static void test_res_proj_batched(void **state)
{
    (void)state;
    static const struct { int in[3], out[3]; const char *what; } cs[] = {
        { { 16, 28, 28 }, { 32, 14, 14 }, "resnet 16x28x28->32x14x14" },
        { { 32, 14, 14 }, { 64, 7, 7 }, "resnet 32x14x14->64x7x7" },
        { { 3, 9, 7 }, { 5, 5, 4 }, "3x9x7->5x5x4 s2 (odd)" },
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        res_case t;
        res_make(&t, cs[i].in, cs[i].out, 6);
        size_t es = 6 * t.fork.in_size, ey = 6 * t.add.out_size;
        fill_normal(t.dy, ey, 31, 1.0);
        double *y = malloc(ey * sizeof(double)), *dw = malloc(t.add.n_w * sizeof(double));
        double *db = malloc(t.add.n_b * sizeof(double)), *ds = malloc(es * sizeof(double));
        for (int rows = 6; rows >= 3; rows -= 3) {
            proj_reference(&t, rows, y, dw, db, ds);
            eng_ops[ENG_OP_RES_ADD].forward(&t.add, rows);
            eng_ops[ENG_OP_RES_ADD].backward(&t.add, rows);
            size_t ny = (size_t)rows * t.add.out_size, ns = (size_t)rows * t.fork.in_size;
            double e[4] = { max_rel(t.y, y, ny), max_rel(t.dw, dw, t.add.n_w), max_rel(t.db, db, t.add.n_b),
                            max_rel(t.dskip, ds, ns) };
            printf("  projection %-28s %d rows: rel err y %.2e dW %.2e db %.2e dshortcut %.2e\n", cs[i].what, rows, e[0],
                   e[1], e[2], e[3]);
            for (int k = 0; k < 4; k++) assert_true(e[k] < 1e-5);
        }
        free(y); free(dw); free(db); free(ds);
        res_free(&t);
    }
}

/* ---- whole models from the .ini syntax ---------------------------------------------------- */

static eng_experiment *load_layers(const char *layers, const char *extra)
{
    char text[2048];
    snprintf(text, sizeof text, "[data]\nsource = spirals\n[model]\nlayers = %s\n%s", layers, extra ? extra : "");
    eng_experiment *ex = NULL;
    if (eng_experiment_load_text("norm-test.ini", text, NULL, 0, &ex)) fail_msg("%s", eng_error());
    return ex;
}

/* The model of `layers` (and the extra .ini text) for inputs of shape in; *ex keeps its
 * config (free both). */
static eng_model *build(const char *layers, const char *extra, const int in[3], int n_out, int rows, eng_experiment **ex)
{
    *ex = load_layers(layers, extra);
    eng_model *m = NULL;
    if (eng_model_build(&(*ex)->variants[0].model, in, n_out, rows, 7, NULL, &m)) fail_msg("%s", eng_error());
    return m;
}

/* Numeric gradient of the loss w.r.t. every parameter and input vs backward (training
 * mode: batch statistics). A central difference whose sides put a relu on the other side
 * of its kink than the base point is not a derivative: that value is skipped (counted). */
static double model_grad(const char *label, const char *layers, const int in[3], int n_out, int rows)
{
    eng_experiment *ex;
    eng_model *m = build(layers, NULL, in, n_out, rows, &ex);
    assert_int_equal(eng_model_enable_input_grad(m), ENG_OK);
    size_t in_size = (size_t)in[0] * in[1] * in[2], np = eng_model_n_params(m), nx = (size_t)rows * in_size;
    float *x = malloc(nx * sizeof(float));
    int32_t y[16];
    fill_normal(x, nx, 21, 1.0);
    for (int i = 0; i < rows; i++) y[i] = i % n_out;
    float *p = eng_model_params(m);
    for (size_t i = 0; i < np; i++) p[i] += 0.2f * (float)((i * 7919) % 13) / 13.0f - 0.1f;
    eng_model_forward(m, x, rows, y, NULL, NULL);
    uint64_t base = kink_signature(m);
    eng_model_backward(m);
    float *ag = copy_of(eng_model_grads(m), np), *ax = copy_of(m->dinput, nx);
    double *ng = calloc(np, sizeof(double)), *nxg = calloc(nx, sizeof(double));
    size_t skipped = 0, total = np + nx;
    for (int which = 0; which < 2; which++) {
        float *v = which ? x : p;
        double *g = which ? nxg : ng;
        const float *a = which ? ax : ag;
        for (size_t i = 0; i < (which ? nx : np); i++) {
            float keep = v[i];
            v[i] = keep + EPS; double fp = eng_model_forward(m, x, rows, y, NULL, NULL);
            int crossed = kink_signature(m) != base;
            v[i] = keep - EPS; double fm = eng_model_forward(m, x, rows, y, NULL, NULL);
            crossed |= kink_signature(m) != base;
            v[i] = keep;
            g[i] = crossed ? (double)a[i] : (fp - fm) / (2.0 * (double)EPS);
            skipped += (size_t)crossed;
        }
    }
    assert_true(skipped * 4 < total); /* most values checked */
    printf("  model %s: %s\n  %zu of %zu differences skipped (crossed a relu kink)\n", label, eng_model_summary(m),
           skipped, total);
    char what[96];
    snprintf(what, sizeof what, "%s d/dparams", label);
    double w1 = rel_diff(what, ag, ng, np);
    snprintf(what, sizeof what, "%s d/dinput", label);
    double w2 = rel_diff(what, ax, nxg, nx);
    free(x); free(ag); free(ax); free(ng); free(nxg);
    eng_model_free(m);
    eng_experiment_free(ex);
    return w1 > w2 ? w1 : w2;
}

static void test_model_grad(void **state)
{
    (void)state;
    int img[3] = { 2, 6, 6 }, flat[3] = { 1, 1, 5 };
    /* a block first (the shortcut is the model's input), a projection block, nested blocks */
    assert_true(model_grad("resnet", "res(conv:2:3:pad=1, bn:tanh, conv:2:3:pad=1, bn):tanh, "
                           "res(conv:3:3:pad=1:stride=2, bn:tanh, conv:3:3:pad=1):tanh, gap, dense:3",
                           img, 3, 4) < TOL);
    assert_true(model_grad("nested", "conv:3:3:pad=1:tanh, res(res(conv:3:3:pad=1:tanh), conv:3:3:pad=1):tanh, flatten, dense:3",
                           img, 3, 3) < TOL);
    assert_true(model_grad("dense-res", "dense:6, bn:tanh, res(dense:6:tanh, dense:6), res(dense:4:tanh):tanh, dense:3",
                           flat, 3, 5) < TOL);
    /* relus, which run in place after bn and a residual sum (model.c); seeded, so whether a
     * difference crosses a kink is fixed: none does here */
    assert_true(model_grad("dense-res-relu", "dense:6, bn:relu, res(dense:6, bn:relu, dense:6, bn):relu, dense:3",
                           flat, 3, 5) < TOL);
}

/* Evaluation mode: the output depends on the running statistics only (two forwards of
 * different batches agree on the shared rows) and leaves them untouched. */
static void test_model_train_eval(void **state)
{
    (void)state;
    int in[3] = { 1, 1, 3 };
    eng_experiment *ex;
    eng_model *m = build("dense:4, bn:tanh, dense:2", NULL, in, 2, 8, &ex);
    assert_int_equal(m->n_stats, 8);
    for (int c = 0; c < 4; c++) { assert_true(m->stats[c] == 0.0f); assert_true(m->stats[4 + c] == 1.0f); }
    float x[24];
    int32_t y[8] = { 0 };
    fill_normal(x, 24, 3, 1.0);
    eng_model_forward(m, x, 8, y, NULL, NULL);
    assert_true(m->stats[0] != 0.0f);          /* training moved them */
    float keep[8], l4[8];
    memcpy(keep, m->stats, sizeof keep);
    eng_model_forward(m, x, 4, y, NULL, NULL);
    memcpy(l4, m->logits, sizeof l4);
    eng_model_forward(m, x, 8, y, NULL, NULL);
    assert_memory_not_equal(l4, m->logits, sizeof l4); /* batch statistics: rows affect each other */
    eng_model_set_training(m, 0);
    memcpy(keep, m->stats, sizeof keep);
    eng_model_forward(m, x, 4, y, NULL, NULL);
    memcpy(l4, m->logits, sizeof l4);
    eng_model_forward(m, x, 8, y, NULL, NULL);
    assert_memory_equal(l4, m->logits, sizeof l4);
    assert_memory_equal(keep, m->stats, sizeof keep);
    eng_model_free(m);
    eng_experiment_free(ex);
}

/* auto init: He before batch norm (std sqrt(2/64) = 0.177 here; Xavier would give 0.079) */
static void test_init_before_bn(void **state)
{
    (void)state;
    int in[3] = { 1, 1, 64 };
    eng_experiment *ex;
    eng_model *m = build("dense:256, bn:relu, dense:2", NULL, in, 2, 4, &ex);
    double s2 = 0;
    for (size_t i = 0; i < m->layers[0].n_w; i++) s2 += (double)m->layers[0].w[i] * m->layers[0].w[i];
    double sd = sqrt(s2 / (double)m->layers[0].n_w);
    printf("  dense before bn: weight std %.4f (He %.4f)\n", sd, sqrt(2.0 / 64));
    assert_true(fabs(sd - sqrt(2.0 / 64)) < 0.01);
    for (int c = 0; c < 256; c++) assert_true(m->layers[1].w[c] == 1.0f && m->layers[1].b[c] == 0.0f);
    eng_model_free(m);
    eng_experiment_free(ex);
}

static void expect_layers_error(const char *layers, const char *want)
{
    char text[1024];
    snprintf(text, sizeof text, "[model]\nlayers = %s\n", layers);
    eng_experiment *ex = NULL;
    assert_int_equal(eng_experiment_load_text("e.ini", text, NULL, 0, &ex), ENG_EINVAL);
    if (!strstr(eng_error(), want)) fail_msg("'%s': got '%s', want '%s'", layers, eng_error(), want);
}

static void test_syntax(void **state)
{
    (void)state;
    eng_experiment *ex = load_layers("conv:4:3:pad=1, bn:relu, res( conv:4:3:pad=1, bn:relu, conv:4:3:pad=1, bn ):relu,\n"
                                     "  res(conv:8:3:pad=1:stride=2, bn), gap, dense:2", NULL);
    const eng_model_config *mc = &ex->variants[0].model;
    static const eng_layer_kind want[] = { ENG_LAYER_CONV, ENG_LAYER_BN, ENG_LAYER_RES_BEGIN, ENG_LAYER_CONV, ENG_LAYER_BN,
                                           ENG_LAYER_CONV, ENG_LAYER_BN, ENG_LAYER_RES, ENG_LAYER_RES_BEGIN, ENG_LAYER_CONV,
                                           ENG_LAYER_BN, ENG_LAYER_RES, ENG_LAYER_GAP, ENG_LAYER_DENSE };
    assert_int_equal(mc->n_layers, 14);
    for (int i = 0; i < 14; i++) assert_int_equal(mc->layers[i].kind, want[i]);
    assert_int_equal(mc->layers[1].act, ENG_ACT_RELU);
    assert_int_equal(mc->layers[7].act, ENG_ACT_RELU);
    assert_int_equal(mc->layers[11].act, ENG_ACT_NONE);
    int in[3] = { 1, 8, 8 };
    eng_model *m;
    assert_int_equal(eng_model_build(mc, in, 2, 4, 1, NULL, &m), ENG_OK);
    const char *s = eng_model_summary(m);
    printf("  %s\n", s);
    assert_non_null(strstr(s, "bn(4) relu, res(conv(4x8x8->4x8x8 k3 p1"));
    assert_non_null(strstr(s, "bn(4)) relu, res(conv(4x8x8->8x4x4 k3 p1 s2"));
    assert_non_null(strstr(s, "bn(8) + proj 1x1 s2), gap"));
    assert_string_equal(m->layers[2].name, "res1.in");
    assert_string_equal(m->layers[7].name, "res1");
    assert_string_equal(m->layers[11].name, "res2");
    /* 8 + 8 (bn1, bn2) + 8 (bn3) + 16 (bn4) running statistics; the projection W [8 x 4] + b */
    assert_int_equal(m->n_stats, 8 + 8 + 8 + 16);
    assert_int_equal(m->layers[11].n_w, 32);
    eng_model_free(m);
    eng_experiment_free(ex);

    expect_layers_error("res(dense:4, dense:2", "'res(' opened at layer 1 is not closed: add ')'");
    expect_layers_error("dense:4), dense:2", "')' after layer 1 closes no 'res('");
    expect_layers_error("res(), dense:2", "a residual block needs at least one layer inside res( )");
    expect_layers_error("res(dense:4):swish, dense:2", "a residual block ends with ')' or '):ACT'");
    expect_layers_error("res(dense:4) dense:2", "expected ',' after the residual block ending at layer 3");
    expect_layers_error("dense:4,, dense:2", "layer 2 is empty");
    expect_layers_error("dense:4, dense:2,", "layer 3 is empty");
    expect_layers_error("bn:relu:3, dense:2", "expected bn or bn:ACT");
    expect_layers_error("res(res(res(res(res(dense:2))))), dense:2", "residual blocks nest at most 4 deep");
    /* a shape no projection can match: 8x8 -> 7x7 */
    ex = load_layers("res(conv:2:2), gap, dense:2", NULL);
    assert_int_equal(eng_model_build(&ex->variants[0].model, in, 2, 4, 1, NULL, &m), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "no 1x1 projection shortcut with a stride can match"));
    eng_experiment_free(ex);
}

static eng_node shaped(eng_op_id op, const int in[3], const int out[3])
{
    eng_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    memcpy(n.in_shape, in, sizeof n.in_shape);
    memcpy(n.out_shape, out, sizeof n.out_shape);
    n.in_size = (size_t)in[0] * in[1] * in[2];
    n.out_size = (size_t)out[0] * out[1] * out[2];
    return n;
}

static void test_flops_bytes(void **state)
{
    (void)state;
    float dummy = 0;
    int a[3] = { 4, 6, 6 }, b[3] = { 8, 3, 3 };
    eng_node bn = shaped(ENG_OP_BATCHNORM, a, a);
    uint64_t e = 10 * 144;
    bn.training = 1;
    assert_int_equal(eng_ops[ENG_OP_BATCHNORM].flops(&bn, 10, ENG_FWD), 10 * e);
    assert_int_equal(eng_ops[ENG_OP_BATCHNORM].bytes(&bn, 10, ENG_FWD), 12 * e); /* 36-float planes: one pass for the moments */
    assert_int_equal(eng_ops[ENG_OP_BATCHNORM].flops(&bn, 10, ENG_BWD), 4 * e);  /* no dx */
    bn.dx = &dummy;
    assert_int_equal(eng_ops[ENG_OP_BATCHNORM].flops(&bn, 10, ENG_BWD), 9 * e);
    assert_int_equal(eng_ops[ENG_OP_BATCHNORM].bytes(&bn, 10, ENG_BWD), 20 * e);
    bn.training = 0;
    assert_int_equal(eng_ops[ENG_OP_BATCHNORM].flops(&bn, 10, ENG_FWD), 4 * e);
    assert_int_equal(eng_ops[ENG_OP_BATCHNORM].flops(&bn, 10, ENG_BWD), 9 * e);
    eng_node bn9 = shaped(ENG_OP_BATCHNORM, b, b); /* 9-float planes: two passes */
    bn9.training = 1;
    assert_int_equal(eng_ops[ENG_OP_BATCHNORM].bytes(&bn9, 10, ENG_FWD), 16 * 10 * 72);

    eng_node fork = shaped(ENG_OP_RES_FORK, a, a);
    assert_int_equal(eng_ops[ENG_OP_RES_FORK].flops(&fork, 10, ENG_FWD), 0);
    assert_int_equal(eng_ops[ENG_OP_RES_FORK].flops(&fork, 10, ENG_BWD), 0); /* no dx */
    fork.dx = &dummy;
    assert_int_equal(eng_ops[ENG_OP_RES_FORK].flops(&fork, 10, ENG_BWD), e);
    assert_int_equal(eng_ops[ENG_OP_RES_FORK].bytes(&fork, 10, ENG_BWD), 12 * e);

    eng_node id = shaped(ENG_OP_RES_ADD, a, a);
    id.peer = &fork;
    assert_int_equal(eng_ops[ENG_OP_RES_ADD].flops(&id, 10, ENG_FWD), e);
    assert_int_equal(eng_ops[ENG_OP_RES_ADD].bytes(&id, 10, ENG_FWD), 12 * e);
    id.dx = &dummy;
    assert_int_equal(eng_ops[ENG_OP_RES_ADD].bytes(&id, 10, ENG_BWD), 8 * e);

    eng_node pr = shaped(ENG_OP_RES_ADD, b, b);
    pr.peer = &fork;
    pr.w = &dummy; pr.dskip = &dummy; pr.dx = &dummy;
    pr.stride = 2; pr.n_w = 32; pr.n_b = 8;
    /* C 4, F 8, P 9: GEMM 2·8·4·9 = 576, bias + add 2·72 = 144 per row */
    assert_int_equal(eng_ops[ENG_OP_RES_ADD].flops(&pr, 10, ENG_FWD), 10 * (576 + 144));
    assert_int_equal(eng_ops[ENG_OP_RES_ADD].flops(&pr, 10, ENG_BWD), 10 * (576 + 72 + 576));
    /* e 720, cp 360: gather, GEMM, y = x + T + b; dx, gathered dy, dW, W^T·D, dskip */
    assert_int_equal(eng_ops[ENG_OP_RES_ADD].bytes(&pr, 10, ENG_FWD), 4 * (4 * 720 + 3 * 360 + 32 + 8));
    assert_int_equal(eng_ops[ENG_OP_RES_ADD].bytes(&pr, 10, ENG_BWD),
                     4 * (2 * 720 + 3 * 720 + 360 + 32 + (32 + 720 + 4 * 360 + 1440)));
    eng_gemm_shape g[ENG_OP_MAX_GEMMS];
    assert_int_equal(eng_ops[ENG_OP_RES_ADD].gemms(&pr, 10, g), 3);
    /* one GEMM for the 10 rows */
    assert_true(g[0].M == 8 && g[0].N == 90 && g[0].K == 4 && g[0].calls == 1);
    fork.dx = NULL; /* the block starts the model: no shortcut gradient, no third GEMM */
    assert_int_equal(eng_ops[ENG_OP_RES_ADD].gemms(&pr, 10, g), 2);
    assert_int_equal(eng_ops[ENG_OP_RES_ADD].flops(&pr, 10, ENG_BWD), 10 * (576 + 72));
}

/* ---- checkpoints and runs ----------------------------------------------------------------- */

static void test_ckpt_stats(void **state)
{
    (void)state;
    float p[5] = { 1, 2, 3, 4, 5 }, st[4] = { 0.5f, -1, 2, 3 }, p2[5], st2[4];
    eng_ckpt c = { .seed = 1, .total_steps = 10, .n_params = 5, .n_train = 4, .batch = 2, .params = p,
                   .n_stats = 4, .stats = st };
    size_t len = eng_ckpt_size(&c);
    unsigned char *buf = malloc(len);
    assert_int_equal(eng_ckpt_write(&c, buf, len), len);
    eng_ckpt d = c;
    d.params = p2; d.stats = st2;
    assert_int_equal(eng_ckpt_read(&d, buf, len, 1), ENG_OK);
    assert_memory_equal(st, st2, sizeof st);
    assert_int_equal(eng_ckpt_read(&d, buf, len, 0), ENG_OK);
    d.n_stats = 2;   /* another model */
    assert_int_equal(eng_ckpt_read(&d, buf, len, 1), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "holds 4 batch-norm statistics, the model has 2"));
    /* a record without statistics for a model with batch norm */
    eng_ckpt o = c;
    o.n_stats = 0; o.stats = NULL;
    size_t ol = eng_ckpt_size(&o);
    unsigned char *ob = malloc(ol);
    eng_ckpt_write(&o, ob, ol);
    d.n_stats = 4;
    assert_int_equal(eng_ckpt_read(&d, ob, ol, 1), ENG_EINVAL);
    /* truncated in the statistics */
    assert_int_equal(eng_ckpt_read(&d, buf, len - 4, 1), ENG_EFORMAT);
    free(buf); free(ob);
}

/* A run's checkpoint loaded into a fresh run (as eval and export do) gives the same test
 * loss: the running statistics come with the parameters. */
static int keep_ck(void *ud, const eng_checkpoint *ck)
{
    void **out = ud;
    free(out[0]);
    out[0] = malloc(ck->len);
    memcpy(out[0], ck->data, ck->len);
    out[1] = (void *)(uintptr_t)ck->len;
    return 0;
}

static void test_run_load_stats(void **state)
{
    (void)state;
    eng_experiment *ex = load_layers("dense:16, bn:tanh, res(dense:16, bn:tanh, dense:16, bn):tanh, dense:2",
                                     "[train]\noptimizer = adam\nlr = 0.01\nbatch = 32\nepochs = 2\nthreads = 1\n");
    eng_run *a, *b;
    void *ck[2] = { NULL, NULL };
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &a), ENG_OK);
    eng_sink s = { .ud = ck, .checkpoint = keep_ck };
    assert_int_equal(eng_run_train(a, &s), ENG_OK);
    double la, aa, lb, ab, l0, a0;
    assert_int_equal(eng_run_evaluate(a, &la, &aa), ENG_OK);
    assert_int_equal(eng_run_create(&ex->variants[0], ex->text, NULL, &b), ENG_OK);
    /* b never trains: its evaluation prepares its GEMM classes itself (a's were replaced
     * when b was created), so that it runs on the backends a ran on */
    long unprepared = eng_gemm_unprepared_calls();
    assert_int_equal(eng_run_evaluate(b, &l0, &a0), ENG_OK);
    assert_int_equal(eng_run_load_params(b, ck[0], (size_t)(uintptr_t)ck[1]), ENG_OK);
    assert_int_equal(eng_run_evaluate(b, &lb, &ab), ENG_OK);
    assert_int_equal(eng_gemm_unprepared_calls(), unprepared);
    printf("  test loss: trained %.6f, fresh %.6f, loaded %.6f\n", la, l0, lb);
    assert_true(la == lb && aa == ab);
    assert_true(la != l0);
    eng_run_destroy(a);
    eng_run_destroy(b);
    free(ck[0]);
    eng_experiment_free(ex);
}

static void expect_newton_refusal(const char *layers, const char *want)
{
    int in[3] = { 1, 1, 2 };
    eng_experiment *ex;
    eng_model *m = build(layers, "[train]\noptimizer = newton\n", in, 2, 8, &ex);
    eng_newton *nt = NULL;
    assert_int_equal(eng_newton_create(&ex->variants[0], m, NULL, &nt), ENG_EINVAL);
    if (!strstr(eng_error(), want)) fail_msg("got '%s', want '%s'", eng_error(), want);
    eng_model_free(m);
    eng_experiment_free(ex);
}

static void test_newton_refuses(void **state)
{
    (void)state;
    expect_newton_refusal("dense:4, bn:tanh, dense:2", "newton: layer bn1 is a batch-norm layer");
    expect_newton_refusal("dense:4, res(dense:4:tanh), dense:2", "newton: layer res1.in is a residual-block layer");
}

int test_engine_norm(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bn_grad),
        cmocka_unit_test(test_bn_values),
        cmocka_unit_test(test_bn_matches_old),
        cmocka_unit_test(test_bn_threads_same_bits),
        cmocka_unit_test(test_res_grad),
        cmocka_unit_test(test_res_proj_batched),
        cmocka_unit_test(test_model_grad),
        cmocka_unit_test(test_model_train_eval),
        cmocka_unit_test(test_init_before_bn),
        cmocka_unit_test(test_syntax),
        cmocka_unit_test(test_flops_bytes),
        cmocka_unit_test(test_ckpt_stats),
        cmocka_unit_test(test_run_load_stats),
        cmocka_unit_test(test_newton_refuses),
    };
    return cmocka_run_group_tests_name("engine_norm", tests, NULL, NULL);
}
