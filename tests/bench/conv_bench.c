/* conv_bench.c — section 14 of `make bench`: the fast conv2d algorithms against im2col +
 * sgemm on one conv layer at a time (batch 32, 1 BLAS thread, forward + backward with dx):
 *  - Winograd F(2x2,3x3) and F(4x4,3x3) on ResNet-style 3x3 pad 1 layers: the multiplication
 *    ratio (direct multiplications / the algorithm's element-wise ones, counted from its
 *    tiles: 2.25x and 4x in theory, less where edge tiles overhang) and the time ratio;
 *  - FFT on a K = 5 and a K = 7 layer: the time ratio.
 * Time ratios are im2col / algorithm (above 1: the algorithm is faster), per rep, the two
 * interleaved; each timing is the best of 3 passes, in this thread's CPU time: with one
 * BLAS thread all the work runs here, and other loads on a shared machine inflate CPU time
 * far less than wall time (the absolute figures are still only those of this machine).
 * Output: "ENV key value" and "ROW<TAB>section<TAB>label<TAB>median<TAB>min<TAB>max<TAB>
 * absolute<TAB>goal<TAB>verdict" lines for tests/bench/run.sh.
 * usage: conv_bench [--quick] [--reps N] */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/conv_internal.h"
#include "../../engine/rng.h"
#include "bench.h"

#define BATCH 32
#define PASSES 3

typedef struct { int C, H, F, K; eng_conv_algo algo; } layer;

static const layer layers[] = {
    { 16, 28, 16, 3, ENG_CONV_WINOGRAD }, { 32, 14, 32, 3, ENG_CONV_WINOGRAD },
    { 16, 28, 16, 3, ENG_CONV_WINOGRAD4 }, { 32, 14, 32, 3, ENG_CONV_WINOGRAD4 },
    { 16, 28, 16, 5, ENG_CONV_FFT }, { 16, 28, 16, 7, ENG_CONV_FFT },
};

typedef struct { eng_node n; float *buf[6]; } bench_node;

/* A "same" (pad (K-1)/2, stride 1) conv node of BATCH rows with random x, W, dy. */
static int node_make(bench_node *b, const layer *L)
{
    memset(b, 0, sizeof *b);
    eng_node *n = &b->n;
    n->op = ENG_OP_CONV2D;
    n->in_shape[0] = L->C; n->in_shape[1] = n->in_shape[2] = L->H;
    n->out_shape[0] = L->F; n->out_shape[1] = n->out_shape[2] = L->H;
    n->in_size = (size_t)L->C * L->H * L->H;
    n->out_size = (size_t)L->F * L->H * L->H;
    n->kernel = L->K;
    n->pad = (L->K - 1) / 2;
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
    char shape[64];
    snprintf(shape, sizeof shape, "%dx%dx%d->%d k%d p%d, batch %d", L->C, L->H, L->H, L->F, L->K, b.n.pad, BATCH);
    if (L->algo != ENG_CONV_FFT) {
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
    node_free(&b);
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
    printf("ENV\tconv_bench_threads\t1\n");
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) bench_layer(&layers[i], reps);
    return 0;
}
