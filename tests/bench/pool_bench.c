/* pool_bench.c — the engine's worker pool (engine/pool.c) measured: how long a worker takes
 * to start a slab after the caller posts it (spinning: the job follows the last within
 * microseconds; asleep: after a 5 ms gap), and where splitting a memory-bound loop over 2
 * threads starts to pay (a relu-like pass and the momentum update at 2k..1M floats, 1 vs
 * 2 threads interleaved). ENG_POOL_GRAIN (engine/internal.h) comes from the second table.
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
    double lat[64];
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
    double t[2][64];
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

int main(int argc, char **argv)
{
    int reps = 31;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--hold")) hold_s = atof(argv[i + 1]) * 1e-6;
    if (reps < 3) reps = 3;
    if (reps > 64) reps = 64;
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
    return 0;
}
