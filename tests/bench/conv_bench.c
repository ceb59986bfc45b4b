/* conv_bench.c — section 14 of `make bench`: the fast conv2d algorithms against im2col +
 * sgemm on one conv layer at a time (batch 32, 1 BLAS thread, forward + backward with dx):
 *  - Winograd F(2x2,3x3) and F(4x4,3x3) on ResNet-style 3x3 pad 1 layers: the multiplication
 *    ratio (direct multiplications / the algorithm's element-wise ones, counted from its
 *    tiles: 2.25x and 4x in theory, less where edge tiles overhang) and the time ratio;
 *  - FFT on a K = 5 and a K = 7 layer: the time ratio;
 *  - oneDNN's primitives (onednn) on the Fashion CNN's two layers and two ResNet layers, in
 *    each layout (plain NCHW; blocked: oneDNN's formats with reorders): the time ratio, and
 *    the convolution's GFLOP/s over the machine's GEMM rate (the faster of OpenBLAS's and
 *    oneDNN's sgemm on 512^3, single thread);
 *  - the Fashion CNN's two layers as its model runs them (the first computes no dx), every
 *    algorithm they can run interleaved: the fastest one's GFLOP/s over the GEMM rate per
 *    rep, issue 21's goal (>= 0.5), so that it is held against whatever is fastest.
 * Every algorithm's GEMMs run on the backend eng_gemm_prepare chose for their shape class
 * (eng_conv_prepare_gemms), as in a run.
 * Time ratios are im2col / algorithm (above 1: the algorithm is faster), per rep, the two
 * interleaved; each timing is the best of 3 passes, in this thread's CPU time: with one
 * BLAS thread all the work runs here, and other loads on a shared machine inflate CPU time
 * far less than wall time (the absolute figures are still only those of this machine).
 * Output: "ENV key value" and "ROW<TAB>section<TAB>label<TAB>median<TAB>min<TAB>max<TAB>
 * absolute<TAB>goal<TAB>verdict" lines for tests/bench/run.sh.
 * usage: conv_bench [--quick] [--reps N] */
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/conv_internal.h"
#include "../../engine/rng.h"
#include "bench.h"

#define BATCH 32
#define PASSES 3

/* valid: no padding (the Fashion CNN's layers); else "same". blocked: onednn's layout;
 * first: (bench_fastest) a model's first layer, which computes no dx */
typedef struct { int C, H, F, K; eng_conv_algo algo; int valid, blocked, first; } layer;

static const layer layers[] = {
    { 16, 28, 16, 3, ENG_CONV_WINOGRAD, 0, 0, 0 }, { 32, 14, 32, 3, ENG_CONV_WINOGRAD, 0, 0, 0 },
    { 16, 28, 16, 3, ENG_CONV_WINOGRAD4, 0, 0, 0 }, { 32, 14, 32, 3, ENG_CONV_WINOGRAD4, 0, 0, 0 },
    { 16, 28, 16, 5, ENG_CONV_FFT, 0, 0, 0 }, { 16, 28, 16, 7, ENG_CONV_FFT, 0, 0, 0 },
    { 1, 28, 6, 5, ENG_CONV_ONEDNN, 1, 0, 0 }, { 1, 28, 6, 5, ENG_CONV_ONEDNN, 1, 1, 0 },
    { 6, 12, 16, 5, ENG_CONV_ONEDNN, 1, 0, 0 }, { 6, 12, 16, 5, ENG_CONV_ONEDNN, 1, 1, 0 },
    { 16, 28, 16, 3, ENG_CONV_ONEDNN, 0, 0, 0 }, { 16, 28, 16, 3, ENG_CONV_ONEDNN, 0, 1, 0 },
    { 32, 14, 32, 3, ENG_CONV_ONEDNN, 0, 0, 0 }, { 32, 14, 32, 3, ENG_CONV_ONEDNN, 0, 1, 0 },
};

static double gemm_rate; /* GFLOP/s, main */

typedef struct { eng_node n; float *buf[6]; } bench_node;

/* A "same" (pad (K-1)/2, stride 1) conv node of BATCH rows with random x, W, dy. */
static int node_make(bench_node *b, const layer *L)
{
    memset(b, 0, sizeof *b);
    eng_node *n = &b->n;
    n->op = ENG_OP_CONV2D;
    n->in_shape[0] = L->C; n->in_shape[1] = n->in_shape[2] = L->H;
    int OH = L->valid ? L->H - L->K + 1 : L->H;
    n->out_shape[0] = L->F; n->out_shape[1] = n->out_shape[2] = OH;
    n->in_size = (size_t)L->C * L->H * L->H;
    n->out_size = (size_t)L->F * OH * OH;
    n->kernel = L->K;
    n->pad = L->valid ? 0 : (L->K - 1) / 2;
    n->stride = 1;
    n->chunk = BATCH;
    n->col_kept = 1;
    n->n_w = (size_t)L->F * L->C * L->K * L->K;
    size_t ws = eng_conv_ws_floats(n, BATCH), sz[6] = { BATCH * n->in_size, BATCH * n->in_size, BATCH * n->out_size,
                                                         BATCH * n->out_size, n->n_w, n->n_w };
    for (int i = 0; i < 6; i++) b->buf[i] = malloc(sz[i] * sizeof(float));
    n->col = malloc(ws * sizeof(float));
    n->dcol = malloc(ws * sizeof(float));
    for (int i = 0; i < 6; i++)
        if (!b->buf[i]) return -1;
    if (!n->col || !n->dcol) return -1;
    n->x = b->buf[0]; n->dx = b->buf[1]; n->y = b->buf[2]; n->dy = b->buf[3]; n->w = b->buf[4]; n->dw = b->buf[5];
    /* every algorithm's GEMMs on the backend chosen for their class, as a run gives them */
    if (eng_conv_prepare_gemms(n, BATCH)) {
        fprintf(stderr, "conv_bench: %s\n", eng_error());
        return -1;
    }
    eng_rng r;
    eng_rng_seed(&r, 7, 0);
    for (size_t i = 0; i < sz[0]; i++) b->buf[0][i] = (float)eng_rng_normal(&r);
    for (size_t i = 0; i < sz[3]; i++) b->buf[3][i] = (float)eng_rng_normal(&r);
    for (size_t i = 0; i < sz[4]; i++) b->buf[4][i] = (float)(0.1 * eng_rng_normal(&r));
    return 0;
}

static void node_free(bench_node *b)
{
    for (int i = 0; i < 6; i++) free(b->buf[i]);
    free(b->n.col);
    free(b->n.dcol);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The best of PASSES forward + backward passes under algo, CPU seconds. */
static double time_algo(eng_node *n, eng_conv_algo algo)
{
    n->conv_algo = algo;
    double best = 1e300;
    for (int p = 0; p < PASSES; p++) {
        double t0 = cpu_s();
        eng_conv_fwd(n, BATCH);
        eng_conv_bwd(n, BATCH);
        double t = cpu_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

static void bench_layer(const layer *L, int reps)
{
    bench_node b;
    const char *name = eng_conv_algo_name(L->algo);
    if (node_make(&b, L) || eng_fft_prepare(&b.n)) {
        fprintf(stderr, "conv_bench: out of memory or no FFT plan for %dx%dx%d k%d\n", L->C, L->H, L->H, L->K);
        node_free(&b);
        exit(1);
    }
    char shape[64], label[32];
    snprintf(shape, sizeof shape, "%dx%dx%d->%d k%d p%d, batch %d", L->C, L->H, L->H, L->F, L->K, b.n.pad, BATCH);
    if (L->algo == ENG_CONV_ONEDNN) {
        if (*eng_conv_fallback(&b.n, ENG_CONV_ONEDNN)) {
            fprintf(stderr, "conv_bench: oneDNN cannot run %s: %s\n", shape, eng_conv_fallback(&b.n, ENG_CONV_ONEDNN));
            node_free(&b);
            exit(1);
        }
        eng_dnconv_force_layout(&b.n, L->blocked);
        snprintf(label, sizeof label, "onednn %s", eng_dnconv_layout_name(&b.n));
        name = label;
    }
    if (L->algo == ENG_CONV_WINOGRAD || L->algo == ENG_CONV_WINOGRAD4) {
        int m = L->algo == ENG_CONV_WINOGRAD ? 2 : 4;
        double direct = (double)b.n.out_size / L->F * L->K * L->K * L->C * L->F;
        double mr = direct / (double)eng_wino_mults(&b.n, m);
        printf("ROW\t14\tconv %s: multiplications direct / F(%dx%d,3x3)\t%.3f\t%.3f\t%.3f\tcounted from the tiles "
               "(theory %.2fx)\t-\tinfo\n", shape, m, m, mr, mr, mr, m == 2 ? 2.25 : 4.0);
    }
    double ratio[64], ta[64], tb[64];
    time_algo(&b.n, ENG_CONV_IM2COL); /* warm-up of both */
    time_algo(&b.n, L->algo);
    for (int k = 0; k < reps; k++) {
        ta[k] = time_algo(&b.n, ENG_CONV_IM2COL);
        tb[k] = time_algo(&b.n, L->algo);
        ratio[k] = ta[k] / tb[k];
        fprintf(stderr, "conv_bench: %s %s rep %d: im2col %.2f ms, %s %.2f ms\n", shape, name, k + 1, 1e3 * ta[k], name,
                1e3 * tb[k]);
    }
    stats s = stats_of(ratio, reps), a = stats_of(ta, reps), t = stats_of(tb, reps);
    printf("ROW\t14\tconv %s: time im2col / %s (fwd + bwd)\t%.3f\t%.3f\t%.3f\tim2col %.2f ms, %s %.2f ms (CPU)\t-\tinfo\n", shape,
           name, s.med, s.min, s.max, 1e3 * a.med, name, 1e3 * t.med);
    if (L->algo == ENG_CONV_ONEDNN) {
        /* fwd + bwd with dx: 3 times the forward's multiply-adds */
        double gf = 3.0 * (double)eng_conv_flops(&b.n, BATCH, ENG_FWD) * 1e-9, r[64];
        for (int k = 0; k < reps; k++) r[k] = gf / tb[k] / gemm_rate;
        stats g = stats_of(r, reps);
        printf("ROW\t14\tconv %s: %s GFLOP/s / GEMM rate\t%.3f\t%.3f\t%.3f\t%.1f of %.1f GFLOP/s\t-\tinfo\n", shape, name,
               g.med, g.min, g.max, g.med * gemm_rate, gemm_rate);
    }
    node_free(&b);
}

/* The Fashion CNN's layers as its model runs them: the goal row of section 14. */
static const layer fashion[] = { { 1, 28, 6, 5, ENG_CONV_AUTO, 1, 0, 1 }, { 6, 12, 16, 5, ENG_CONV_AUTO, 1, 0, 0 } };

/* Every algorithm, onednn in both layouts; those the layer cannot run are left out. */
static const struct { eng_conv_algo algo; int blocked; const char *name; } cands[] = {
    { ENG_CONV_IM2COL, 0, "im2col" }, { ENG_CONV_DIRECT, 0, "direct" },
    { ENG_CONV_WINOGRAD, 0, "winograd" }, { ENG_CONV_WINOGRAD4, 0, "winograd4" },
    { ENG_CONV_FFT, 0, "fft" }, { ENG_CONV_ONEDNN, 0, "onednn plain" }, { ENG_CONV_ONEDNN, 1, "onednn blocked" },
};
#define N_CANDS (sizeof cands / sizeof cands[0])

static double time_cand(eng_node *n, size_t i)
{
    if (cands[i].algo == ENG_CONV_ONEDNN) eng_dnconv_force_layout(n, cands[i].blocked);
    return time_algo(n, cands[i].algo);
}

/* Issue 21's goal on layer L: per rep every algorithm it can run, interleaved, and the
 * fastest one's GFLOP/s (the convolution's FLOPs: forward, dW, and dx unless L is a first
 * layer) over the GEMM rate; the row names the algorithm with the lowest median time and
 * every algorithm's median. */
static void bench_fastest(const layer *L, int reps)
{
    bench_node b;
    if (node_make(&b, L) || eng_fft_prepare(&b.n)) {
        fprintf(stderr, "conv_bench: out of memory or no FFT plan for %dx%dx%d k%d\n", L->C, L->H, L->H, L->K);
        node_free(&b);
        exit(1);
    }
    if (L->first) b.n.dx = NULL;
    int ok[N_CANDS];
    double t[N_CANDS][64], best[64], r[64];
    for (size_t i = 0; i < N_CANDS; i++) {
        ok[i] = !*eng_conv_fallback(&b.n, cands[i].algo);
        if (ok[i]) time_cand(&b.n, i); /* warm-up */
    }
    for (int k = 0; k < reps; k++) {
        best[k] = 1e300;
        for (size_t i = 0; i < N_CANDS; i++)
            if (ok[i]) {
                t[i][k] = time_cand(&b.n, i);
                if (t[i][k] < best[k]) best[k] = t[i][k];
            }
    }
    double gf = (L->first ? 2.0 : 3.0) * (double)eng_conv_flops(&b.n, BATCH, ENG_FWD) * 1e-9;
    for (int k = 0; k < reps; k++) r[k] = gf / best[k] / gemm_rate;
    char times[400];
    size_t used = 0, win = 0;
    double wmed = 1e300;
    for (size_t i = 0; i < N_CANDS; i++) {
        if (!ok[i]) continue;
        double med = stats_of(t[i], reps).med;
        if (med < wmed) { wmed = med; win = i; }
        used += (size_t)snprintf(times + used, sizeof times - used, "%s%s %.3f", used ? ", " : "", cands[i].name, 1e3 * med);
    }
    stats g = stats_of(r, reps);
    printf("ROW\t14\tconv %dx%dx%d->%d k%d p0, batch %d%s: fastest algorithm GFLOP/s / GEMM rate\t%.3f\t%.3f\t%.3f\t"
           "%s %.1f of %.1f GFLOP/s (CPU); medians ms: %s\t>= 0.5\t%s\n",
           L->C, L->H, L->H, L->F, L->K, BATCH, L->first ? " (first layer: no dx)" : "", g.med, g.min, g.max,
           cands[win].name, g.med * gemm_rate, gemm_rate, times, g.med >= 0.5 ? "met" : "MISSED");
    node_free(&b);
}

/* The faster of OpenBLAS's and oneDNN's sgemm on 512^3 (the best of 5 calls each, CPU
 * time, one thread), GFLOP/s: the rate the convolutions are held against. */
static double machine_gemm_rate(void)
{
    enum { S = 512 };
    float *a = malloc(3 * S * S * sizeof(float));
    if (!a) { fprintf(stderr, "conv_bench: out of memory\n"); exit(1); }
    for (size_t i = 0; i < 3 * (size_t)S * S; i++) a[i] = (float)(i % 7) * 0.1f;
    double best = 1e300;
    omp_set_num_threads(1); /* this thread's CPU time must be all of the work */
    for (int lib = 0; lib < 2; lib++)
        for (int k = 0; k < 5; k++) {
            double t0 = cpu_s();
            if (lib) dnnl_sgemm('N', 'N', S, S, S, 1.0f, a, S, a + S * S, S, 0.0f, a + 2 * S * S, S);
            else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, S, S, 1.0f, a, S, a + S * S, S, 0.0f, a + 2 * S * S, S);
            double t = cpu_s() - t0;
            if (t < best) best = t;
        }
    free(a);
    return 2.0 * S * S * S / best * 1e-9;
}

int main(int argc, char **argv)
{
    int reps = 5, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: conv_bench [--quick] [--reps N]\n");
            return 2;
        }
    }
    if (quick && reps > 3) reps = 3;
    if (reps < 1 || reps > 64) {
        fprintf(stderr, "conv_bench: --reps must be 1..64\n");
        return 2;
    }
    openblas_set_num_threads(1);
    if (eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, 1, NULL, 0)) {
        fprintf(stderr, "conv_bench: %s\n", eng_error());
        return 1;
    }
    printf("ENV\tconv_bench_threads\t1\n");
    gemm_rate = machine_gemm_rate();
    printf("ENV\tconv_bench_gemm_gflops\t%.1f\n", gemm_rate);
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) bench_layer(&layers[i], reps);
    for (size_t i = 0; i < sizeof fashion / sizeof fashion[0]; i++) bench_fastest(&fashion[i], reps);
    return 0;
}
