/* conv.c (tests) — the fast conv2d algorithms (Winograd F(2x2,3x3) and F(4x4,3x3), FFT,
 * oneDNN's primitives in both layouts):
 * each forced, against a direct convolution in double, forward (y) and backward (dx, dW),
 * on the samples' layer shapes; finite differences through each; the fallback of a forced
 * algorithm a layer cannot run; their profiled stages. (db is the bias op's, the same for
 * every algorithm: tests/engine/ops.c.) The "conv error" lines this prints are the table of
 * docs/convolution.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/conv_internal.h"
#include "../../engine/internal.h"
#include "../../engine/rng.h"
#include "isa_paths.h"

/* Error bounds, relative to the largest |value| of the tensor (x ~ N(0,1), W ~ N(0,
 * 1/(C·K·K)), dy ~ N(0,1)); the measured worst cases are in docs/convolution.md. F(2x2)
 * rounds a little more than a GEMM; F(4x4)'s transforms hold 4, 5, 8 and 1/6, ~10x more;
 * the FFT's error grows with log of the plane size, not with K. */
#define REL_GEMM 1e-6 /* im2col: the baseline, each sum rounded once per term */
/* direct sums each output's C·K·K terms in one chain per vector lane (392 on 8x14x14 k7,
 * where the GEMM's kernels split the sum in blocks): up to 1.06e-6 seen, so twice the
 * GEMM bound */
#define REL_DIRECT 2e-6
#define REL_WINOGRAD 2e-6
#define REL_WINOGRAD4 2e-5
#define REL_FFT 2e-6
/* oneDNN picks its kernels per CPU (a GEMM-based one on NCHW, JIT direct ones on its blocked
 * formats, whose dW sums over rows and threads in an order of its own): twice the GEMM
 * bound, as on this machine its blocked layout reached 0.9e-6 */
#define REL_ONEDNN 2e-6

typedef struct { int C, H, W, F, K, pad, rows, chunk; const char *what; int st; } conv_case;

/* The Fashion CNN's two convolutions (samples/fashion-mnist-cnn.ini), ResNet-style 3x3 pad 1
 * layers at 28x28 and 14x14 with 16 and 32 channels, K = 5 and 7 "same" layers, and small
 * ones with partial tiles and pad 2. chunk < rows splits the rows (dW accumulates across
 * chunks); chunk == rows keeps the forward's transforms for backward. */
static const conv_case cases[] = {
    { 1, 28, 28, 6, 5, 0, 3, 2, "fashion conv1 1x28x28 k5", 1 },
    { 6, 12, 12, 16, 5, 0, 3, 3, "fashion conv2 6x12x12 k5", 1 },
    { 16, 28, 28, 16, 3, 1, 2, 2, "resnet 16x28x28 k3 p1", 1 },
    { 16, 14, 14, 32, 3, 1, 3, 2, "resnet 16x14x14->32 k3 p1", 1 },
    { 32, 14, 14, 32, 3, 1, 2, 1, "resnet 32x14x14 k3 p1", 1 },
    { 3, 7, 9, 5, 3, 0, 3, 2, "3x7x9 k3 p0 (partial tiles)", 1 },
    { 2, 6, 5, 3, 3, 2, 2, 2, "2x6x5 k3 p2", 1 },
    { 16, 14, 14, 16, 5, 2, 2, 2, "16x14x14 k5 p2", 1 },
    { 8, 14, 14, 16, 7, 3, 2, 1, "8x14x14 k7 p3", 1 },
    /* a ResNet downsampling layer and an odd size whose last window row is dropped: only
     * im2col and onednn run strides */
    { 16, 28, 28, 32, 3, 1, 3, 2, "resnet 16x28x28->32 k3 p1 s2", 2 },
    { 3, 9, 8, 4, 3, 0, 2, 2, "3x9x8 k3 s2 (dropped edge)", 2 },
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* blocked: for onednn, its own formats with reorders (1) or NCHW as stored (0) */
static const struct { eng_conv_algo algo; double rel; int blocked; const char *name; } algos[] = {
    { ENG_CONV_IM2COL, REL_GEMM, 0, "im2col" }, { ENG_CONV_DIRECT, REL_DIRECT, 0, "direct" },
    { ENG_CONV_WINOGRAD, REL_WINOGRAD, 0, "winograd" }, { ENG_CONV_WINOGRAD4, REL_WINOGRAD4, 0, "winograd4" },
    { ENG_CONV_FFT, REL_FFT, 0, "fft" }, { ENG_CONV_ONEDNN, REL_ONEDNN, 0, "onednn" },
    { ENG_CONV_ONEDNN, REL_ONEDNN, 1, "onednn-blk" },
};
#define N_ALGOS (sizeof algos / sizeof algos[0])

/* A conv2d node with its buffers, set up by hand. */
typedef struct {
    eng_node n;
    int rows;
    float *x, *y, *dx, *dy;
} conv_node;

static void node_make(conv_node *c, const conv_case *k, int chunk)
{
    memset(c, 0, sizeof *c);
    eng_node *n = &c->n;
    n->op = ENG_OP_CONV2D;
    n->in_shape[0] = k->C; n->in_shape[1] = k->H; n->in_shape[2] = k->W;
    int st = k->st;
    n->out_shape[0] = k->F;
    n->out_shape[1] = (k->H + 2 * k->pad - k->K) / st + 1;
    n->out_shape[2] = (k->W + 2 * k->pad - k->K) / st + 1;
    n->in_size = (size_t)k->C * k->H * k->W;
    n->out_size = (size_t)n->out_shape[0] * n->out_shape[1] * n->out_shape[2];
    n->kernel = k->K;
    n->pad = k->pad;
    n->stride = st;
    n->chunk = chunk;
    n->col_kept = chunk >= k->rows;
    n->n_w = (size_t)k->F * k->C * k->K * k->K;
    c->rows = k->rows;
    c->x = calloc((size_t)k->rows * n->in_size, sizeof(float));
    c->dx = calloc((size_t)k->rows * n->in_size, sizeof(float));
    c->y = calloc((size_t)k->rows * n->out_size, sizeof(float));
    c->dy = calloc((size_t)k->rows * n->out_size, sizeof(float));
    n->x = c->x; n->dx = c->dx; n->y = c->y; n->dy = c->dy;
    n->w = calloc(n->n_w, sizeof(float));
    n->dw = calloc(n->n_w, sizeof(float));
    n->col = calloc(eng_conv_ws_floats(n, chunk), sizeof(float));
    n->dcol = calloc(eng_conv_ws_floats(n, chunk), sizeof(float));
    assert_true(c->x && c->dx && c->y && c->dy && n->w && n->dw && n->col && n->dcol);
}

static void node_free(conv_node *c)
{
    free(c->x); free(c->dx); free(c->y); free(c->dy);
    free(c->n.w); free(c->n.dw); free(c->n.col); free(c->n.dcol);
}

static void fill(float *v, size_t n, eng_rng *r, double scale)
{
    for (size_t i = 0; i < n; i++) v[i] = (float)(scale * eng_rng_normal(r));
}

/* Runs algorithm a of the table on the node (onednn: in its layout). */
static void use_algo(conv_node *c, size_t a)
{
    c->n.conv_algo = algos[a].algo;
    if (algos[a].algo == ENG_CONV_ONEDNN) eng_dnconv_force_layout(&c->n, algos[a].blocked);
}

/* y, dx, dW of the node's x, w, dy by the definition, in double. */
static void reference(const conv_node *c, double *y, double *dx, double *dw)
{
    const eng_node *n = &c->n;
    int C = n->in_shape[0], H = n->in_shape[1], W = n->in_shape[2], F = n->out_shape[0];
    int OH = n->out_shape[1], OW = n->out_shape[2], K = n->kernel, pad = n->pad, st = n->stride;
    memset(y, 0, (size_t)c->rows * n->out_size * sizeof(double));
    memset(dx, 0, (size_t)c->rows * n->in_size * sizeof(double));
    memset(dw, 0, n->n_w * sizeof(double));
    for (int r = 0; r < c->rows; r++)
        for (int f = 0; f < F; f++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    size_t yi = r * n->out_size + ((size_t)f * OH + oh) * OW + ow;
                    double acc = 0.0, g = c->dy[yi];
                    for (int ch = 0; ch < C; ch++)
                        for (int i = 0; i < K; i++)
                            for (int j = 0; j < K; j++) {
                                int ih = oh * st - pad + i, iw = ow * st - pad + j;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                size_t xi = r * n->in_size + ((size_t)ch * H + ih) * W + iw;
                                size_t wi = (((size_t)f * C + ch) * K + i) * K + j;
                                acc += (double)n->w[wi] * c->x[xi];
                                dx[xi] += (double)n->w[wi] * g;
                                dw[wi] += g * c->x[xi];
                            }
                    y[yi] = acc;
                }
}

/* Max |got - want| and that over max |want|; prints one "conv error" line. */
static double rel_err(const char *algo, const char *what, const char *part, const float *got, const double *want, size_t n)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        if (d > worst || isnan(d)) worst = isnan(d) ? INFINITY : d;
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    }
    double rel = scale > 0 ? worst / scale : worst;
    printf("  conv error %-9s %-28s %-2s max abs %.2e  rel %.2e (of max |value| %.3g)\n", algo, what, part, worst, rel,
           scale);
    return rel;
}

/* Algorithms a_lo .. a_hi - 1 of the table on case k, forward and backward against the
 * reference (one "conv error" line per tensor); worst[a] keeps each one's worst relative
 * error. Algorithms the case's layer cannot run are skipped. */
static void check_case(const conv_case *k, uint64_t seed, size_t a_lo, size_t a_hi, double *worst)
{
    conv_node c;
    node_make(&c, k, k->chunk);
    eng_rng r;
    eng_rng_seed(&r, seed, 0);
    size_t ny = (size_t)c.rows * c.n.out_size, nx = (size_t)c.rows * c.n.in_size;
    fill(c.x, nx, &r, 1.0);
    fill(c.n.w, c.n.n_w, &r, 1.0 / sqrt((double)c.n.n_w / k->F));
    fill(c.dy, ny, &r, 1.0);
    double *y = malloc(ny * sizeof(double)), *dx = malloc(nx * sizeof(double)), *dw = malloc(c.n.n_w * sizeof(double));
    reference(&c, y, dx, dw);
    float *dy0 = malloc(ny * sizeof(float));
    memcpy(dy0, c.dy, ny * sizeof(float));
    for (size_t a = a_lo; a < a_hi; a++) {
        if (*eng_conv_fallback(&c.n, algos[a].algo)) continue;
        const char *name = algos[a].name;
        use_algo(&c, a);
        memset(c.y, 0xff, ny * sizeof(float)); /* NaN: every output must be written */
        memset(c.dx, 0xff, nx * sizeof(float));
        memset(c.n.dw, 0xff, c.n.n_w * sizeof(float));
        eng_conv_fwd(&c.n, c.rows);
        memcpy(c.dy, dy0, ny * sizeof(float));
        eng_conv_bwd(&c.n, c.rows);
        double e[3] = { rel_err(name, k->what, "y", c.y, y, ny), rel_err(name, k->what, "dx", c.dx, dx, nx),
                        rel_err(name, k->what, "dW", c.n.dw, dw, c.n.n_w) };
        for (int i = 0; i < 3; i++)
            if (!(e[i] <= worst[a])) worst[a] = e[i];
    }
    free(y); free(dx); free(dw); free(dy0);
    node_free(&c);
}

/* Each algorithm forced (im2col and direct too, as the baseline), on every case it can run, forward and backward against the
 * reference; the worst relative error of each algorithm over all cases and tensors must
 * stay within its bound. */
static void test_conv_algos_vs_reference(void **state)
{
    (void)state;
    double worst[N_ALGOS] = { 0 };
    for (size_t i = 0; i < N_CASES; i++) check_case(&cases[i], 300 + i, 0, N_ALGOS, worst);
    for (size_t a = 0; a < N_ALGOS; a++) {
        printf("  conv error %-9s worst relative error %.2e (bound %.0e)\n", algos[a].name, worst[a],
               algos[a].rel);
        assert_true(worst[a] <= algos[a].rel);
    }
}

/* The Winograd transforms are compiled per instruction-set path and are lane-wise (no
 * FMA contraction under -std=c11), so every path gives the generic path's bits: y, dx, dW
 * on a ResNet layer and on one with partial tiles, both tile sizes. */
static void test_conv_winograd_path_bits(void **state)
{
    eng_isa before = isa_force_or_skip(state), p = eng_isa_current();
    static const size_t which[] = { 3, 5 };
    for (size_t w = 0; w < sizeof which / sizeof which[0]; w++)
        for (int m = 2; m <= 4; m += 2) {
            conv_node c;
            node_make(&c, &cases[which[w]], cases[which[w]].chunk);
            eng_rng r;
            eng_rng_seed(&r, 500 + w, (uint64_t)m);
            size_t ny = (size_t)c.rows * c.n.out_size, nx = (size_t)c.rows * c.n.in_size, tot = ny + nx + c.n.n_w;
            fill(c.x, nx, &r, 1.0);
            fill(c.n.w, c.n.n_w, &r, 0.2);
            float *dy0 = malloc(ny * sizeof(float)), *want = malloc(tot * sizeof(float)), *got = malloc(tot * sizeof(float));
            fill(dy0, ny, &r, 1.0);
            c.n.conv_algo = m == 2 ? ENG_CONV_WINOGRAD : ENG_CONV_WINOGRAD4;
            for (int pass = 0; pass < 2; pass++) {
                float *out = pass ? got : want;
                memcpy(c.dy, dy0, ny * sizeof(float));
                if (pass) { eng_conv_fwd(&c.n, c.rows); eng_conv_bwd(&c.n, c.rows); }
                else ISA_UNDER(ENG_ISA_GENERIC, (eng_conv_fwd(&c.n, c.rows), eng_conv_bwd(&c.n, c.rows)));
                memcpy(out, c.y, ny * sizeof(float));
                memcpy(out + ny, c.dx, nx * sizeof(float));
                memcpy(out + ny + nx, c.n.dw, c.n.n_w * sizeof(float));
            }
            if (memcmp(want, got, tot * sizeof(float)))
                fail_msg("%s on %s: path %s differs from generic", eng_conv_algo_name(c.n.conv_algo), cases[which[w]].what,
                         eng_isa_name(p));
            printf("  %-9s %-28s %s: %zu values, the generic path's bits\n", eng_conv_algo_name(c.n.conv_algo),
                   cases[which[w]].what, eng_isa_name(p), tot);
            free(dy0); free(want); free(got);
            node_free(&c);
        }
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

/* Finite differences through each algorithm: L = sum y·r, so dL/dx and dL/dW are the
 * backward with dy = r. The op is linear, so a central difference with any step is exact
 * up to the rounding of L; a large step (0.25) keeps that rounding small next to the
 * gradients. Reported as max |analytic - numeric| / max(|analytic| + |numeric|, 1e-2). */
#define FD_STEP 0.25f
#define FD_TOL 2e-3

static double objective(conv_node *c, const float *rw)
{
    eng_conv_fwd(&c->n, c->rows);
    double s = 0.0;
    for (size_t i = 0; i < (size_t)c->rows * c->n.out_size; i++) s += (double)c->y[i] * rw[i];
    return s;
}

static double fd_compare(conv_node *c, float *v, const float *ana, size_t n, const float *rw)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        float keep = v[i];
        v[i] = keep + FD_STEP;
        double fp = objective(c, rw);
        v[i] = keep - FD_STEP;
        double fm = objective(c, rw);
        v[i] = keep;
        double num = (fp - fm) / (2.0 * FD_STEP), den = fabs(ana[i]) + fabs(num);
        double d = fabs(ana[i] - num) / (den < 1e-2 ? 1e-2 : den);
        if (d > worst) worst = d;
    }
    return worst;
}

static const conv_case fd_cases[] = {
    { 2, 6, 6, 3, 3, 1, 2, 1, "2x6x6 k3 p1", 1 },
    { 2, 5, 7, 2, 3, 0, 2, 2, "2x5x7 k3 p0", 1 },
    { 2, 8, 8, 2, 5, 2, 2, 1, "2x8x8 k5 p2", 1 },
    { 2, 7, 7, 2, 3, 1, 2, 1, "2x7x7 k3 p1 s2", 2 },
};
#define N_FD_CASES (sizeof fd_cases / sizeof fd_cases[0])

/* Finite differences of algorithm a on case k (skipped where its layer cannot run it). */
static void fd_case(const conv_case *k, size_t a, uint64_t seed)
{
    conv_node c;
    node_make(&c, k, k->chunk);
    if (*eng_conv_fallback(&c.n, algos[a].algo)) { node_free(&c); return; }
    use_algo(&c, a);
    eng_rng r;
    eng_rng_seed(&r, seed, a);
    size_t ny = (size_t)c.rows * c.n.out_size, nx = (size_t)c.rows * c.n.in_size;
    float *rw = malloc(ny * sizeof(float)), *gx = malloc(nx * sizeof(float)), *gw = malloc(c.n.n_w * sizeof(float));
    fill(c.x, nx, &r, 1.0);
    fill(c.n.w, c.n.n_w, &r, 0.5);
    fill(rw, ny, &r, 1.0);
    eng_conv_fwd(&c.n, c.rows);
    memcpy(c.dy, rw, ny * sizeof(float));
    eng_conv_bwd(&c.n, c.rows);
    memcpy(gx, c.dx, nx * sizeof(float));
    memcpy(gw, c.n.dw, c.n.n_w * sizeof(float));
    double ex = fd_compare(&c, c.x, gx, nx, rw), ew = fd_compare(&c, c.n.w, gw, c.n.n_w, rw);
    printf("  finite differences %-9s %-12s d/dx %.2e  d/dW %.2e\n", algos[a].name, k->what, ex, ew);
    assert_true(ex < FD_TOL && ew < FD_TOL);
    free(rw); free(gx); free(gw);
    node_free(&c);
}

static void test_conv_algos_finite_diff(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_FD_CASES; i++)
        for (size_t a = 0; a < N_ALGOS; a++) fd_case(&fd_cases[i], a, 400 + i);
}

/* direct's own edges: a batch of 1, a last chunk shorter than the others, fewer rows than
 * the chunk (an epoch's partial last batch), C and F past one block of 6 filters (dW and
 * dx blocks), pad K-1 (dx then pads dy by 0), a 1x1 kernel on one row, 16 channels into
 * 6 filters (dx by channels in lanes: its dy rows without their right border). */
static const conv_case direct_cases[] = {
    { 1, 28, 28, 6, 5, 0, 1, 1, "fashion conv1, batch of 1", 1 },
    { 6, 12, 12, 16, 5, 0, 5, 2, "fashion conv2, 5 rows by 2", 1 },
    { 6, 12, 12, 16, 5, 0, 3, 4, "fashion conv2, 3 of 4 rows", 1 },
    { 8, 13, 11, 13, 3, 1, 3, 3, "8x13x11->13 k3 p1", 1 },
    { 2, 5, 4, 3, 4, 3, 2, 2, "2x5x4 k4 p3", 1 },
    { 3, 1, 17, 7, 1, 0, 3, 2, "3x1x17 k1", 1 },
    { 16, 6, 6, 6, 5, 2, 2, 2, "16x6x6->6 k5 p2 (dx by channels in lanes)", 1 },
};
#define DIRECT_ALGO 1 /* direct's index in algos[] */

/* The direct kernels on each ISA path, forced (they fuse multiply-adds on avx2 and avx512,
 * so the paths agree to rounding, not bits): against the reference on every stride-1 case
 * and direct's own edges within its bound, through finite differences, and a layer
 * without dx (a first layer: no dx pass) gives the same dW. */
static void test_conv_direct_paths(void **state)
{
    eng_isa before = isa_force_or_skip(state);
    assert_int_equal(strcmp(algos[DIRECT_ALGO].name, "direct"), 0);
    double worst[N_ALGOS] = { 0 };
    for (size_t i = 0; i < N_CASES; i++) check_case(&cases[i], 600 + i, DIRECT_ALGO, DIRECT_ALGO + 1, worst);
    for (size_t i = 0; i < sizeof direct_cases / sizeof direct_cases[0]; i++)
        check_case(&direct_cases[i], 650 + i, DIRECT_ALGO, DIRECT_ALGO + 1, worst);
    printf("  conv error direct on %s: worst relative error %.2e (bound %.0e)\n", eng_isa_name(eng_isa_current()),
           worst[DIRECT_ALGO], REL_DIRECT);
    assert_true(worst[DIRECT_ALGO] <= REL_DIRECT);
    for (size_t i = 0; i < N_FD_CASES; i++) fd_case(&fd_cases[i], DIRECT_ALGO, 700 + i);
    conv_node c;
    node_make(&c, &cases[0], cases[0].chunk);
    eng_rng r;
    eng_rng_seed(&r, 720, 0);
    size_t ny = (size_t)c.rows * c.n.out_size, nw = c.n.n_w;
    fill(c.x, (size_t)c.rows * c.n.in_size, &r, 1.0);
    fill(c.n.w, nw, &r, 0.2);
    fill(c.dy, ny, &r, 1.0);
    float *dw = malloc(nw * sizeof(float));
    c.n.conv_algo = ENG_CONV_DIRECT;
    eng_conv_bwd(&c.n, c.rows);
    memcpy(dw, c.n.dw, nw * sizeof(float));
    c.n.dx = NULL;
    memset(c.n.dw, 0xff, nw * sizeof(float));
    eng_conv_bwd(&c.n, c.rows);
    assert_memory_equal(dw, c.n.dw, nw * sizeof(float));
    free(dw);
    node_free(&c);
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

/* ---- through the model: the key, the fallback and its note, the stages' scopes -------- */

static eng_model_config conv_model(int F, int K, int pad, int stride, eng_conv_algo algo)
{
    eng_model_config mc = { 0 };
    mc.n_layers = 3;
    mc.layers[0] = (eng_layer_spec){ .kind = ENG_LAYER_CONV, .units = F, .kernel = K, .pad = pad, .stride = stride,
                                     .act = ENG_ACT_RELU };
    mc.layers[1].kind = ENG_LAYER_FLATTEN;
    mc.layers[2] = (eng_layer_spec){ .kind = ENG_LAYER_DENSE, .units = 2 };
    mc.loss = ENG_LOSS_SOFTMAX_XENT;
    mc.conv_algo = algo;
    return mc;
}

/* conv1: F filters 3x3 pad 1 under algo; conv2: F2 filters 3x3 pad 1 stride 2; a dense head. */
static eng_model_config two_conv_model(int F, int F2, eng_conv_algo algo)
{
    eng_model_config mc = conv_model(F, 3, 1, 1, algo);
    mc.n_layers = 4;
    mc.layers[3] = mc.layers[2];
    mc.layers[2] = mc.layers[1];
    mc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_CONV, .units = F2, .kernel = 3, .pad = 1, .stride = 2 };
    return mc;
}

/* A cache directory of the test's own (auto's picks and onednn's layouts are stored
 * there), and its removal. */
static void cache_begin(char *dir)
{
    assert_non_null(mkdtemp(dir));
    setenv("NNBENCH_CACHE_DIR", dir, 1);
}

static void cache_end(const char *dir)
{
    char path[80];
    snprintf(path, sizeof path, "%s/conv-choices", dir);
    unlink(path);
    rmdir(dir);
    unsetenv("NNBENCH_CACHE_DIR");
}

/* A forced algorithm the layer cannot run falls back to im2col, and the model summary
 * (stored with the run) says so and why; one it can run is kept and named; a layer's
 * :algo=X overrides model.conv_algo. auto never picks what the layer cannot run. */
static void test_conv_fallback(void **state)
{
    (void)state;
    char dir[] = "/tmp/nnbench-convalgo-XXXXXX";
    cache_begin(dir);
    static const struct { int K, pad, stride; eng_conv_algo algo, runs; const char *note; } cases_fb[] = {
        { 5, 2, 1, ENG_CONV_WINOGRAD, ENG_CONV_IM2COL, "k5 p2 im2col (winograd needs a 3x3 kernel and stride 1))" },
        { 5, 0, 1, ENG_CONV_WINOGRAD4, ENG_CONV_IM2COL, "k5 im2col (winograd4 needs a 3x3 kernel and stride 1))" },
        { 3, 1, 2, ENG_CONV_WINOGRAD, ENG_CONV_IM2COL, "k3 p1 s2 im2col (winograd needs a 3x3 kernel and stride 1))" },
        { 3, 1, 2, ENG_CONV_FFT, ENG_CONV_IM2COL, "k3 p1 s2 im2col (fft needs stride 1))" },
        { 3, 1, 1, ENG_CONV_WINOGRAD, ENG_CONV_WINOGRAD, "k3 p1 winograd)" },
        { 3, 0, 1, ENG_CONV_WINOGRAD4, ENG_CONV_WINOGRAD4, "k3 winograd4)" },
        { 5, 2, 1, ENG_CONV_FFT, ENG_CONV_FFT, "k5 p2 fft)" },
        { 5, 2, 1, ENG_CONV_ONEDNN, ENG_CONV_ONEDNN, "k5 p2 onednn)" },
        { 3, 1, 2, ENG_CONV_ONEDNN, ENG_CONV_ONEDNN, "k3 p1 s2 onednn)" },
    };
    int in[3] = { 2, 9, 9 };
    for (size_t i = 0; i < sizeof cases_fb / sizeof cases_fb[0]; i++) {
        eng_model_config mc = conv_model(3, cases_fb[i].K, cases_fb[i].pad, cases_fb[i].stride, cases_fb[i].algo);
        eng_model *m;
        assert_int_equal(eng_model_build(&mc, in, 2, 4, 1, NULL, &m), ENG_OK);
        printf("  %s forced: %s\n", eng_conv_algo_name(cases_fb[i].algo), eng_model_summary(m));
        assert_int_equal(m->nodes[0].conv_algo, cases_fb[i].runs);
        assert_non_null(strstr(eng_model_summary(m), cases_fb[i].note));
        eng_model_free(m);
    }
    /* a layer's :algo=X wins over model.conv_algo, falling back the same way */
    eng_model_config pl = two_conv_model(3, 2, ENG_CONV_WINOGRAD);
    pl.layer_algo[0] = pl.layer_algo[1] = 1 + ENG_CONV_FFT;
    eng_model *pm;
    assert_int_equal(eng_model_build(&pl, in, 2, 4, 1, NULL, &pm), ENG_OK);
    printf("  per layer: %s\n", eng_model_summary(pm));
    assert_int_equal(pm->nodes[pm->layers[0].node_first].conv_algo, ENG_CONV_FFT);
    assert_int_equal(pm->nodes[pm->layers[1].node_first].conv_algo, ENG_CONV_IM2COL);
    assert_non_null(strstr(eng_model_summary(pm), "k3 p1 fft) relu, conv(3x9x9->2x5x5 k3 p1 s2 im2col (fft needs stride 1))"));
    eng_model_free(pm);

    /* auto on a 5x5 layer: whatever is fastest here, never Winograd */
    eng_model_config mc = conv_model(3, 5, 2, 1, ENG_CONV_AUTO);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 2, 4, 1, NULL, &m), ENG_OK);
    printf("  auto: %s\n", eng_model_summary(m));
    assert_true(m->nodes[0].conv_algo != ENG_CONV_WINOGRAD && m->nodes[0].conv_algo != ENG_CONV_WINOGRAD4);
    assert_non_null(strstr(eng_model_summary(m), eng_conv_algo_name(m->nodes[0].conv_algo)));
    eng_model_free(m);
    cache_end(dir);
}

/* A machine where oneDNN fails (forced by NNBENCH_ONEDNN_CONV_FAIL): a forced onednn
 * runs im2col and the summary says why; auto never picks it, on stride 1 or 2. */
static void test_conv_onednn_fails(void **state)
{
    (void)state;
    char dir[] = "/tmp/nnbench-convdnn-XXXXXX";
    cache_begin(dir);
    setenv("NNBENCH_ONEDNN_CONV_FAIL", "1", 1);
    int in[3] = { 2, 9, 9 };
    static const struct { int stride; eng_conv_algo want; const char *note; } fc[] = {
        { 1, ENG_CONV_ONEDNN, "k3 p1 im2col (onednn failed: NNBENCH_ONEDNN_CONV_FAIL is set))" },
        { 2, ENG_CONV_ONEDNN, "k3 p1 s2 im2col (onednn failed: NNBENCH_ONEDNN_CONV_FAIL is set))" },
        { 1, ENG_CONV_AUTO, NULL },
        { 2, ENG_CONV_AUTO, NULL },
    };
    for (size_t i = 0; i < sizeof fc / sizeof fc[0]; i++) {
        eng_model_config mc = conv_model(3, 3, 1, fc[i].stride, fc[i].want);
        eng_model *m;
        assert_int_equal(eng_model_build(&mc, in, 2, 4, 1, NULL, &m), ENG_OK);
        printf("  oneDNN failing, %s: %s\n", eng_conv_algo_name(fc[i].want), eng_model_summary(m));
        assert_int_not_equal(m->nodes[0].conv_algo, ENG_CONV_ONEDNN);
        if (fc[i].note) assert_non_null(strstr(eng_model_summary(m), fc[i].note));
        eng_model_free(m);
    }
    unsetenv("NNBENCH_ONEDNN_CONV_FAIL");
    cache_end(dir);
}

static const prof_row *row_in(const prof_row *rows, size_t n, const char *name, const char *layer)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name) && !strcmp(rows[i].layer, layer)) return &rows[i];
    return NULL;
}

static const prof_row *row_named(const prof_row *rows, size_t n, const char *name) { return row_in(rows, n, name, "conv1"); }

/* Each fast algorithm's stages are scopes of their own inside conv2d.fwd/.bwd: one call
 * per op call here (one chunk), and the op's self time is its total minus theirs, so the
 * op table adds nothing twice. */
static void test_conv_stage_scopes(void **state)
{
    (void)state;
    static const struct { eng_conv_algo algo; const char *stages[4]; } st[] = {
        { ENG_CONV_WINOGRAD, { "winograd.input", "winograd.filter", "winograd.gemm", "winograd.output" } },
        { ENG_CONV_WINOGRAD4, { "winograd4.input", "winograd4.filter", "winograd4.gemm", "winograd4.output" } },
        { ENG_CONV_FFT, { "fft.fft", "fft.product", "fft.ifft", NULL } },
    };
    int in[3] = { 2, 8, 8 };
    for (size_t a = 0; a < sizeof st / sizeof st[0]; a++) {
        prof_t *p = prof_create(&(prof_options){ .counters = "", .quiet = 1 });
        assert_non_null(p);
        eng_model_config mc = conv_model(4, 3, 1, 1, st[a].algo);
        eng_model *m;
        assert_int_equal(eng_model_build(&mc, in, 2, 4, 1, p, &m), ENG_OK);
        float x[4 * 128];
        int32_t lab[4] = { 0, 1, 0, 1 };
        for (int i = 0; i < 4 * 128; i++) x[i] = (float)((i * 7) % 11) / 11.0f;
        for (int k = 0; k < 2; k++) {
            eng_model_forward(m, x, 4, lab, NULL, NULL);
            eng_model_backward(m);
        }
        prof_row *rows;
        size_t n;
        assert_int_equal(prof_rows(p, PROF_BY_SCOPE, &rows, &n), 0);
        for (int dir = 0; dir < 2; dir++) {
            char name[48];
            snprintf(name, sizeof name, "conv2d.%s", dir ? "bwd" : "fwd");
            const prof_row *op = row_named(rows, n, name);
            assert_non_null(op);
            uint64_t stages = 0;
            for (int s = 0; s < 4 && st[a].stages[s]; s++) {
                snprintf(name, sizeof name, "%s.%s", st[a].stages[s], dir ? "bwd" : "fwd");
                const prof_row *r = row_named(rows, n, name);
                if (!r) fail_msg("no scope %s under conv1", name);
                assert_true(r->calls >= 2);
                stages += r->total_ns;
            }
            printf("  %-9s conv2d.%s: total %llu ns, stages %llu ns, self %llu ns\n", eng_conv_algo_name(st[a].algo),
                   dir ? "bwd" : "fwd", (unsigned long long)op->total_ns, (unsigned long long)stages,
                   (unsigned long long)op->self_ns);
            assert_true(stages <= op->total_ns);
            assert_int_equal(op->self_ns, op->total_ns - stages);
        }
        free(rows);
        eng_model_free(m);
        prof_destroy(p);
    }
}

/* Trains 2 steps of m on 4 rows of a fixed input (in_size floats each). */
static void two_steps(eng_model *m, size_t in_size)
{
    float *x = malloc(4 * in_size * sizeof(float));
    int32_t lab[4] = { 0, 1, 0, 1 };
    for (size_t i = 0; i < 4 * in_size; i++) x[i] = (float)((i * 7) % 11) / 11.0f;
    for (int k = 0; k < 2; k++) {
        eng_model_forward(m, x, 4, lab, NULL, NULL);
        eng_model_backward(m);
    }
    free(x);
}

/* The profiler's rows (by scope; free them) after two training steps of m, whose input is
 * 2x8x8. */
static prof_row *rows_after_two_steps(eng_model *m, prof_t *p, size_t *n)
{
    two_steps(m, 2 * 8 * 8);
    prof_row *rows;
    assert_int_equal(prof_rows(p, PROF_BY_SCOPE, &rows, n), 0);
    return rows;
}

/* The op row conv2d.fwd (dir 0) or .bwd of layer, after checking its stage scopes: stage
 * s is entered at least twice where want[s], never otherwise (its row may then be
 * missing), and the op's self time is its total minus the stages'. */
static const prof_row *op_with_stages(const prof_row *rows, size_t n, const char *layer, int dir,
                                      const char *const stages[3], const int want[3], uint64_t *in_stages)
{
    const prof_row *op = row_in(rows, n, dir ? "conv2d.bwd" : "conv2d.fwd", layer);
    assert_non_null(op);
    *in_stages = 0;
    for (int s = 0; s < 3 && stages[s]; s++) {
        const prof_row *r = row_in(rows, n, stages[s], layer);
        if (want[s] ? !r || r->calls < 2 : r && r->calls != 0)
            fail_msg("%s %s: %llu calls", layer, stages[s], r ? (unsigned long long)r->calls : 0ULL);
        if (r) *in_stages += r->total_ns;
    }
    assert_int_equal(op->self_ns, op->total_ns - *in_stages);
    return op;
}

/* onednn in the op table: inside conv2d.fwd/.bwd one scope per primitive (forward;
 * backward_data, only where the layer passes a gradient on; backward_weights) and one for
 * the reorders (entered only where the layout has some); the op's self time is its total
 * minus theirs; its FLOPs are the convolution's (eng_conv_flops) per call. */
static void test_conv_onednn_scopes(void **state)
{
    (void)state;
    int in[3] = { 2, 8, 8 };
    char cache[] = "/tmp/nnbench-convdnn-XXXXXX";
    cache_begin(cache);
    for (int blocked = 0; blocked < 2; blocked++) {
        prof_t *p = prof_create(&(prof_options){ .counters = "", .quiet = 1 });
        assert_non_null(p);
        eng_model_config mc = two_conv_model(4, 3, ENG_CONV_ONEDNN);
        eng_model *m;
        assert_int_equal(eng_model_build(&mc, in, 2, 4, 1, p, &m), ENG_OK);
        const eng_node *c[2] = { &m->nodes[m->layers[0].node_first], &m->nodes[m->layers[1].node_first] };
        for (int l = 0; l < 2; l++) {
            assert_int_equal(c[l]->conv_algo, ENG_CONV_ONEDNN);
            eng_dnconv_force_layout(c[l], blocked);
        }
        size_t n;
        prof_row *rows = rows_after_two_steps(m, p, &n);
        static const char *const stages[2][3] = { { "onednn.reorder.fwd", "onednn.forward.fwd", NULL },
                                                  { "onednn.reorder.bwd", "onednn.backward_data.bwd", "onednn.backward_weights.bwd" } };
        for (int l = 0; l < 2; l++)
            for (int dir = 0; dir < 2; dir++) {
                const char *layer = l ? "conv2" : "conv1";
                /* the first layer computes no dx; a plain layout reorders nothing */
                int want[3] = { eng_dnconv_reorders(c[l], 4) > 0, !(l == 0 && dir), 1 };
                uint64_t in_stages;
                const prof_row *op = op_with_stages(rows, n, layer, dir, stages[dir], want, &in_stages);
                for (int s = 0; s < 3 && stages[dir][s]; s++) /* registered even when never entered */
                    assert_non_null(row_in(rows, n, stages[dir][s], layer));
                printf("  onednn %-7s %s %s: %d reorders, total %llu ns, primitives and reorders %llu ns\n",
                       eng_dnconv_layout_name(c[l]), layer, op->name, eng_dnconv_reorders(c[l], 4),
                       (unsigned long long)op->total_ns, (unsigned long long)in_stages);
                assert_true(op->flops == op->calls * eng_conv_flops(c[l], 4, dir ? ENG_BWD : ENG_FWD));
            }
        free(rows);
        eng_model_free(m);
        prof_destroy(p);
    }
    cache_end(cache);
}

/* onednn at 2 threads splits a pass's rows into 2 slabs on the engine's pool (each slab's
 * primitives on one thread, the slabs' dW added after by the engine's own loop), never on
 * oneDNN's OpenMP threads nor OpenBLAS's:
 * every pass posts a pool job (the post hook counts them whoever runs the slabs, so this
 * holds on a loaded machine too) and agrees with 1 thread within rounding, in both layouts.
 * The state the layer keeps between calls (its sets, each slab's memory objects re-pointed
 * per call) must serve any batch size: a full batch, a last partial one, one row, a full
 * one again (bit for bit the first), each against the reference. */
static atomic_int posted;
static void count_post(void) { atomic_fetch_add(&posted, 1); }

/* OpenBLAS's level-1 entry the slabs' dW sums once went through: OpenBLAS splits a vector
 * of more than 10000 floats over its own threads, whose worker then spins beside the
 * pool's (docs/convolution.md, "Threads"). This definition takes the calls of the library
 * linked into this test; each is counted and handed to OpenBLAS's. */
static atomic_int saxpy_calls;
void cblas_saxpy(OPENBLAS_CONST blasint n, OPENBLAS_CONST float alpha, OPENBLAS_CONST float *x,
                 OPENBLAS_CONST blasint incx, float *y, OPENBLAS_CONST blasint incy)
{
    atomic_fetch_add(&saxpy_calls, 1);
    void (*real)(blasint, float, const float *, blasint, float *, blasint);
    *(void **)&real = dlsym(RTLD_NEXT, "cblas_saxpy");
    if (real) real(n, alpha, x, incx, y, incy);
}

static void run_rows_case(conv_node *c, int rows, float *out)
{
    size_t ny = (size_t)rows * c->n.out_size, nx = (size_t)rows * c->n.in_size;
    memset(c->y, 0xff, ny * sizeof(float));
    memset(c->dx, 0xff, nx * sizeof(float));
    memset(c->n.dw, 0xff, c->n.n_w * sizeof(float));
    eng_conv_fwd(&c->n, rows);
    eng_conv_bwd(&c->n, rows);
    memcpy(out, c->y, ny * sizeof(float));
    memcpy(out + ny, c->dx, nx * sizeof(float));
    memcpy(out + ny + nx, c->n.dw, c->n.n_w * sizeof(float));
}

static void test_conv_onednn_threads_rows(void **state)
{
    (void)state;
    int keep = openblas_get_num_threads();
    static const size_t which[] = { 2, 9 }; /* resnet 16x28x28 k3 p1, and its strided layer */
    for (size_t w = 0; w < sizeof which / sizeof which[0]; w++)
        for (int blocked = 0; blocked < 2; blocked++) {
            conv_case k = cases[which[w]];
            k.rows = 7;
            openblas_set_num_threads(2); /* the workspace is sized for 2 slabs */
            conv_node c;
            node_make(&c, &k, 2);        /* chunks of 2 rows: 4 and 3 rows per slab */
            use_algo(&c, 5 + (size_t)blocked);
            eng_rng r;
            eng_rng_seed(&r, 700 + w, (uint64_t)blocked);
            size_t ny = (size_t)c.rows * c.n.out_size, nx = (size_t)c.rows * c.n.in_size, tot = ny + nx + c.n.n_w;
            fill(c.x, nx, &r, 1.0);
            fill(c.n.w, c.n.n_w, &r, 1.0 / sqrt((double)c.n.n_w / k.F));
            fill(c.dy, ny, &r, 1.0);
            float *dy0 = malloc(ny * sizeof(float)), *one = malloc(tot * sizeof(float)), *two = malloc(tot * sizeof(float));
            float *again = malloc(tot * sizeof(float));
            double *y = malloc(ny * sizeof(double)), *dx = malloc(nx * sizeof(double)), *dw = malloc(c.n.n_w * sizeof(double));
            memcpy(dy0, c.dy, ny * sizeof(float));
            openblas_set_num_threads(1);
            run_rows_case(&c, c.rows, one);
            openblas_set_num_threads(2);
            atomic_store(&posted, 0);
            atomic_store(&saxpy_calls, 0);
            atomic_store(&eng_pool_post_hook, count_post);
            memcpy(c.dy, dy0, ny * sizeof(float));
            run_rows_case(&c, c.rows, two);
            atomic_store(&eng_pool_post_hook, NULL);
            if (atomic_load(&posted) < 2) fail_msg("%s: a 2-thread pass posted %d pool jobs", k.what, atomic_load(&posted));
            if (atomic_load(&saxpy_calls))
                fail_msg("%s: a 2-thread pass called cblas_saxpy %d times (OpenBLAS's threads)", k.what,
                         atomic_load(&saxpy_calls));
            double worst = 0.0, scale = 0.0;
            for (size_t i = 0; i < tot; i++) {
                double d = fabs((double)one[i] - two[i]);
                if (!(d <= worst)) worst = d;
                if (fabs(one[i]) > scale) scale = fabs(one[i]);
            }
            printf("  onednn %-7s %-28s 1 vs 2 threads: max abs diff %.2e of max |value| %.3g, %d pool jobs\n",
                   eng_dnconv_layout_name(&c.n), k.what, worst, scale, atomic_load(&posted));
            assert_true(worst <= REL_ONEDNN * scale);
            /* other batch sizes on the kept state, each against the reference */
            static const int sizes[] = { 3, 1, 7 };
            for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; b++) {
                c.rows = sizes[b];
                memcpy(c.dy, dy0, (size_t)c.rows * c.n.out_size * sizeof(float));
                reference(&c, y, dx, dw);
                run_rows_case(&c, c.rows, again);
                size_t my = (size_t)c.rows * c.n.out_size, mx = (size_t)c.rows * c.n.in_size;
                double e = fmax(rel_err("onednn", k.what, "y", again, y, my),
                                fmax(rel_err("onednn", k.what, "dx", again + my, dx, mx),
                                     rel_err("onednn", k.what, "dW", again + my + mx, dw, c.n.n_w)));
                if (!(e <= REL_ONEDNN)) fail_msg("%s, %d rows after %d: rel error %.2e", k.what, c.rows, 7, e);
            }
            assert_memory_equal(again, two, tot * sizeof(float));
            free(dy0); free(one); free(two); free(again); free(y); free(dx); free(dw);
            node_free(&c);
        }
    openblas_set_num_threads(keep);
}

/* direct through the model: its stages in the op table (direct.reorder: packing the
 * filters; direct.forward; direct.backward_weights; direct.backward_data, never entered on
 * a first layer, which computes no dx), the op's self time its total minus theirs, the
 * summary naming it; and auto takes it from the choice cache (algorithm picks are v4
 * entries: a v3 one measured the old direct kernels). */
static void test_conv_direct_model(void **state)
{
    (void)state;
    char cache[] = "/tmp/nnbench-convdir-XXXXXX";
    cache_begin(cache);
    int in[3] = { 2, 8, 8 };
    eng_model_config mc = conv_model(4, 3, 1, 1, ENG_CONV_DIRECT);
    mc.n_layers = 4;
    mc.layers[3] = mc.layers[2];
    mc.layers[2] = mc.layers[1];
    mc.layers[1] = (eng_layer_spec){ .kind = ENG_LAYER_CONV, .units = 3, .kernel = 3, .pad = 1 };
    prof_t *p = prof_create(&(prof_options){ .counters = "", .quiet = 1 });
    assert_non_null(p);
    eng_model *m;
    assert_int_equal(eng_model_build(&mc, in, 2, 4, 1, p, &m), ENG_OK);
    printf("  %s\n", eng_model_summary(m));
    assert_non_null(strstr(eng_model_summary(m), "k3 p1 direct) relu, conv(4x8x8->3x8x8 k3 p1 direct)"));
    size_t n;
    prof_row *rows = rows_after_two_steps(m, p, &n);
    static const char *const stages[2][3] = { { "direct.reorder.fwd", "direct.forward.fwd", NULL },
                                              { "direct.reorder.bwd", "direct.backward_data.bwd", "direct.backward_weights.bwd" } };
    for (int l = 0; l < 2; l++)
        for (int dir = 0; dir < 2; dir++) {
            const char *layer = l ? "conv2" : "conv1";
            int want[3] = { 1, !(l == 0 && dir), 1 }; /* conv1: no dx */
            uint64_t in_stages;
            const prof_row *op = op_with_stages(rows, n, layer, dir, stages[dir], want, &in_stages);
            printf("  direct %s %s: total %llu ns, stages %llu ns\n", layer, op->name, (unsigned long long)op->total_ns,
                   (unsigned long long)in_stages);
        }
    free(rows);
    eng_model_free(m);
    prof_destroy(p);
    /* auto: the cached pick is taken without measuring */
    mc.conv_algo = ENG_CONV_AUTO;
    assert_int_equal(eng_model_build(&mc, in, 2, 4, 1, NULL, &m), ENG_OK);
    char key[400];
    eng_conv_choice_key(&m->nodes[m->layers[1].node_first], 4, "", key, sizeof key);
    assert_int_equal(strncmp(key, "v5 ", 3), 0);
    eng_choice_put("conv-choices", key, "direct");
    eng_conv_choice_key(&m->nodes[m->layers[0].node_first], 4, "", key, sizeof key);
    eng_choice_put("conv-choices", key, "direct");
    eng_model_free(m);
    assert_int_equal(eng_model_build(&mc, in, 2, 4, 1, NULL, &m), ENG_OK);
    printf("  auto, direct cached: %s\n", eng_model_summary(m));
    assert_int_equal(m->nodes[m->layers[0].node_first].conv_algo, ENG_CONV_DIRECT);
    assert_int_equal(m->nodes[m->layers[1].node_first].conv_algo, ENG_CONV_DIRECT);
    eng_model_free(m);
    cache_end(cache);
}

int test_engine_conv(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_algos_vs_reference),
        ISA_PATH_TESTS(test_conv_winograd_path_bits),
        cmocka_unit_test(test_conv_algos_finite_diff),
        ISA_PATH_TESTS(test_conv_direct_paths),
        cmocka_unit_test(test_conv_fallback),
        cmocka_unit_test(test_conv_onednn_fails),
        cmocka_unit_test(test_conv_stage_scopes),
        cmocka_unit_test(test_conv_onednn_scopes),
        cmocka_unit_test(test_conv_onednn_threads_rows),
        cmocka_unit_test(test_conv_direct_model),
    };
    return cmocka_run_group_tests_name("engine_conv", tests, NULL, NULL);
}
