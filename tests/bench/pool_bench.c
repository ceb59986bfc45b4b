/* pool_bench.c — the engine's worker pool (engine/pool.c) measured: how long a worker takes
 * to start a slab after the caller posts it (spinning: the job follows the last within
 * microseconds; asleep: after a 5 ms gap), and where splitting a memory-bound loop over 2
 * threads starts to pay (a relu-like pass and the momentum update at 2k..1M floats, 1 vs
 * 2 threads interleaved). ENG_POOL_GRAIN (engine/internal.h) comes from the second table.
 * The third: the momentum update of one 784 x 256 W (the Fashion MLP's first layer) at 2
 * threads, each thread taking half of every row (a cut by columns) or half of the rows (the
 * cut the engine makes, eng_optim_set_matrices), against one thread. First, the
 * core-to-core round trip of a cache line (prof_core_round_trip_ns), which says what any line crossing
 * between the two threads costs on this placement of the cores.
 * Figures mean something only on an idle machine.
 * Usage: pool_bench [--reps N] [--hold US: the caller's own slab, default 50] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../../engine/internal.h"
#include "bench.h"

static double hold_s = 50e-6; /* --hold US */

typedef struct {
    double posted, worker_start;
    pthread_t caller;
} wake_ctx;

static void wake_slab(void *ctx, int s, int nslab)
{
    (void)s, (void)nslab;
    wake_ctx *w = ctx;
    double t = now_s();
    if (!pthread_equal(pthread_self(), w->caller)) {
        w->worker_start = t;
        return;
    }
    /* the caller's slab lasts hold_s, so a worker that is awake takes the other */
    while (now_s() - t < hold_s) {}
}

/* Median microseconds from posting a 2-slab job to a worker starting its slab, after a gap
 * of gap_s; jobs the caller ran alone (no worker came in time) are counted apart. */
static void wake_latency(double gap_s, int reps, const char *label)
{
    double lat[64] = { 0 };
    int n = 0, alone = 0;
    for (int r = 0; r < reps && n < 64; r++) {
        if (gap_s > 0) {
            struct timespec nap = { 0, (long)(gap_s * 1e9) };
            nanosleep(&nap, NULL);
        }
        wake_ctx w = { 0, 0, pthread_self() };
        w.posted = now_s();
        eng_pool_run(2, wake_slab, &w);
        if (w.worker_start > 0) lat[n++] = (w.worker_start - w.posted) * 1e6;
        else alone++;
    }
    stats s = stats_of(lat, n);
    printf("%-34s %8.2f %8.2f %8.2f   %d of %d jobs the caller ran alone\n", label, n ? s.med : 0, n ? s.min : 0,
           n ? s.max : 0, alone, reps);
}

typedef struct {
    float *x, *y, *m;
    int update;
} loop_ctx;

static void loop_range(void *ctx, size_t lo, size_t hi)
{
    loop_ctx *c = ctx;
    float *restrict x = c->x, *restrict y = c->y, *restrict m = c->m;
    if (c->update)
        for (size_t i = lo; i < hi; i++) {
            float v = 0.9f * m[i] + x[i];
            m[i] = v;
            y[i] -= 0.05f * v;
        }
    else
        for (size_t i = lo; i < hi; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* Microseconds per pass at 1 and 2 threads (grain 1: always split at 2), interleaved. */
static void split_gain(size_t n, int update, int reps)
{
    loop_ctx c = { calloc(n, 4), calloc(n, 4), calloc(n, 4), update };
    double t[2][64] = { { 0 } };
    int calls = (int)(4000000 / n) + 1;
    for (int r = 0; r < reps && r < 64; r++)
        for (int th = 1; th <= 2; th++) {
            eng_pool_set_threads(th);
            eng_pool_for(n, 1, loop_range, &c); /* warm */
            double t0 = now_s();
            for (int k = 0; k < calls; k++) eng_pool_for(n, 1, loop_range, &c);
            t[th - 1][r] = (now_s() - t0) / calls * 1e6;
        }
    stats a = stats_of(t[0], reps), b = stats_of(t[1], reps);
    printf("%-10s %8zu %10.2f %10.2f %8.2f\n", update ? "momentum" : "relu", n, a.med, b.med, a.med / b.med);
    free(c.x), free(c.y), free(c.m);
    eng_pool_set_threads(1);
}

typedef struct {
    eng_optim *o;
    int rows, cols, by_cols;
} cut_ctx;

/* Slab s updates its columns of every row, or its rows; eng_optim_step_range from inside a
 * slab runs on that slab's thread (the pool is driven already). */
static void cut_slab(void *ctx, int s, int nslab)
{
    const cut_ctx *c = ctx;
    size_t lo, hi;
    eng_split_range((size_t)(c->by_cols ? c->cols : c->rows), ENG_SPLIT_UNIT, s, nslab, &lo, &hi);
    if (!c->by_cols) eng_optim_step_range(c->o, lo * c->cols, hi * c->cols);
    else
        for (int r = 0; r < c->rows; r++) eng_optim_step_range(c->o, (size_t)r * c->cols + lo, (size_t)r * c->cols + hi);
}

/* Microseconds per momentum update of a rows x cols W: 1 thread, 2 cut by rows, 2 cut by
 * columns, interleaved. */
static void cut_update(int rows, int cols, int reps)
{
    size_t n = (size_t)rows * cols;
    eng_train_config tc = { .optimizer = ENG_OPT_MOMENTUM, .lr = 0.01, .momentum = 0.9 };
    eng_optim *o;
    if (eng_optim_create(&tc, n, &o)) return;
    float *w = prof_calloc(n, 4), *g = prof_calloc(n, 4);
    double t[3][64] = { { 0 } };
    for (int r = 0; r < reps && r < 64; r++)
        for (int v = 0; v < 3; v++) {
            cut_ctx c = { o, rows, cols, v == 2 };
            double t0 = now_s();
            for (int k = 0; k < 200; k++) {
                eng_optim_step_begin(o, w, g, 0.01);
                if (v == 0 || !eng_pool_run(2, cut_slab, &c)) cut_slab(&c, 0, 1);
            }
            t[v][r] = (now_s() - t0) / 200 * 1e6;
        }
    stats a = stats_of(t[0], reps), b = stats_of(t[1], reps), c = stats_of(t[2], reps);
    printf("%4d x %-4d %10.2f %12.2f %12.2f\n", rows, cols, a.med, b.med, c.med);
    prof_free(w), prof_free(g);
    eng_optim_free(o);
}

int main(int argc, char **argv)
{
    int reps = 31;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--hold")) hold_s = atof(argv[i + 1]) * 1e-6;
    if (reps < 3) reps = 3;
    if (reps > 64) reps = 64;
    double trip[64];
    for (int r = 0; r < reps; r++) trip[r] = prof_core_round_trip_ns(20000);
    stats st = stats_of(trip, reps);
    printf("core-to-core round trip of a cache line: median %.0f ns (%.0f..%.0f) over %d reps (~100 ns: the two\n"
           "cores share a last-level cache; several hundred: they do not, and every line a cut moves costs that)\n\n",
           st.med, st.min, st.max, reps);
    printf("pool wake-up: us from posting a job to a worker starting its slab (the caller's slab: %.0f us)\n", hold_s * 1e6);
    printf("%-34s %8s %8s %8s\n", "", "median", "min", "max");
    eng_pool_run(2, wake_slab, &(wake_ctx){ 0, 0, pthread_self() }); /* start the worker */
    wake_latency(0, reps, "worker spinning (back to back)");
    wake_latency(200e-6, reps, "worker spinning (200 us gap)");
    wake_latency(5e-3, reps, "worker asleep (5 ms gap)");
    printf("\nsplit over 2 threads: us per pass, median of %d interleaved reps\n", reps);
    printf("%-10s %8s %10s %10s %8s\n", "loop", "floats", "1T", "2T", "1T/2T");
    for (int update = 0; update <= 1; update++)
        for (size_t n = 2048; n <= (1u << 20); n *= 2) split_gain(n, update, reps < 9 ? reps : 9);
    split_gain(235146, 1, reps < 9 ? reps : 9); /* the Fashion MLP's parameters */
    printf("\nmomentum update of one W: us per update, median of %d interleaved reps\n", reps < 9 ? reps : 9);
    printf("%-11s %10s %12s %12s\n", "W", "1T", "2T by rows", "2T by cols");
    cut_update(784, 256, reps < 9 ? reps : 9);
    return 0;
}
