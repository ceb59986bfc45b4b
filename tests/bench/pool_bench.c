/* pool_bench.c — the engine's worker pool (engine/pool.c) measured: how long a worker takes
 * to start a slab after the caller posts it (spinning: the job follows the last within
 * microseconds; asleep: after a 5 ms gap), and where splitting a memory-bound loop over 2
 * threads starts to pay (a relu-like pass and the momentum update at 2k..1M floats, 1 vs
 * 2 threads interleaved). ENG_POOL_GRAIN (engine/internal.h) comes from the second table.
 * The third: the momentum update of one 784 x 256 W (the Fashion MLP's first layer) at 2
 * threads, each thread taking half of every row (a cut by columns) or half of the rows (the
 * cut the engine makes, eng_optim_set_matrices), against one thread. The fourth: what the
 * caller's slab of a K cut (its rows of that W) leaves in the rows after its end, which are
 * the worker's: how long the worker then takes to write them (as its update does), after
 * the caller's slab ran a oneDNN or OpenBLAS sgemm, a plain read, or nothing. First, the
 * core-to-core round trip of a cache line (prof_core_round_trip_ns), which says what any line crossing
 * between the two threads costs on this placement of the cores.
 * Figures mean something only on an idle machine.
 * Usage: pool_bench [--reps N] [--hold US: the caller's own slab, default 50] */
#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../../engine/gemm_internal.h"
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

/* ---- what a K slab's GEMM leaves in the rows after its end ---------------------------- */

enum { SEAM_NOTHING, SEAM_READ, SEAM_OPENBLAS, SEAM_ONEDNN, SEAM_N };
#define SEAM_BAND 128 /* rows timed: the first SEAM_BAND after the seam, then the next */

typedef struct {
    float *w, *x, *c;
    eng_optim *o;                /* momentum over W (a zero gradient): the worker's writes */
    int rows, cols, batch, half; /* W is rows x cols; the caller's K slab: rows [0, half) */
    int how;
    pthread_t caller;
    atomic_int worker_in; /* the worker took slab 1 of the job in hand */
    double near_us, far_us; /* the worker's update of rows [half, +BAND), then [+BAND, +2 BAND) */
} seam_ctx;

static volatile float seam_sink;

/* Reads one float of each 64-byte line of rows [r0, r1) of W (into seam_sink). */
static void seam_read_rows(const seam_ctx *c, int r0, int r1)
{
    float acc = 0.0f;
    for (size_t i = (size_t)r0 * (size_t)c->cols; i < (size_t)r1 * (size_t)c->cols; i += 16) acc += c->w[i];
    seam_sink = acc;
}

/* Slab 0 of a seam job waits until the worker has taken slab 1 (2 ms at most), so that the
 * caller cannot take it; slab 1 says whether it runs on a worker. */
static int seam_hold(seam_ctx *c, int s)
{
    if (!s) {
        double t0 = now_s();
        while (!atomic_load(&c->worker_in) && now_s() - t0 < 2e-3) {}
        return 1;
    }
    if (pthread_equal(pthread_self(), c->caller)) return 0;
    atomic_store(&c->worker_in, 1);
    return 1;
}

/* Job 1: the worker reads its rows [half, rows) (as its own slab of the product would); the
 * caller, once the worker is in, runs its K slab (rows [0, half) of W) as `how` says. */
static void seam_first(void *ctx, int s, int nslab)
{
    (void)nslab;
    seam_ctx *c = ctx;
    if (!seam_hold(c, s)) return;
    if (s) {
        seam_read_rows(c, c->half, c->rows);
        return;
    }
    gemm_call g = { 0, 0, c->batch, c->cols, c->half, 1.0f, c->x, c->rows, c->w, c->cols, 0.0f, c->c, c->cols,
                    ENG_SPLIT_AUTO, NULL };
    if (c->how == SEAM_READ)
        seam_read_rows(c, 0, c->half);
    else if (c->how == SEAM_OPENBLAS)
        eng_gemm_run(ENG_GEMM_OPENBLAS, &g);
    else if (c->how == SEAM_ONEDNN)
        eng_gemm_run(ENG_GEMM_ONEDNN, &g);
}

/* Job 2: the worker updates the first SEAM_BAND rows after the seam, then the next
 * (eng_optim_step_range from inside a slab runs on that slab's thread). */
static void seam_second(void *ctx, int s, int nslab)
{
    (void)nslab;
    seam_ctx *c = ctx;
    if (!seam_hold(c, s) || !s) return;
    size_t band = (size_t)SEAM_BAND * (size_t)c->cols, at = (size_t)c->half * (size_t)c->cols;
    double t0 = now_s();
    eng_optim_step_range(c->o, at, at + band);
    double t1 = now_s();
    eng_optim_step_range(c->o, at + band, at + 2 * band);
    c->near_us = (t1 - t0) * 1e6;
    c->far_us = (now_s() - t1) * 1e6;
}

/* Microseconds for the worker to write the rows after the caller's K slab, per way the
 * caller's slab ran, interleaved; Fashion's first layer: W 784 x 256, batch 128. */
static void seam_table(int reps)
{
    static const char *const name[SEAM_N] = { "nothing", "a plain read of its rows", "OpenBLAS sgemm",
                                               "oneDNN sgemm" };
    seam_ctx c = { .rows = 784, .cols = 256, .batch = 128 };
    size_t lo, hi;
    eng_split_range((size_t)c.rows, ENG_SPLIT_UNIT, 0, 2, &lo, &hi); /* the engine's K cut of this W */
    c.half = (int)hi;
    printf("\nthe rows after a K slab: a %d x %d W cut by K as the engine cuts the Fashion MLP's first layer at\n"
           "2 threads (the caller's slab rows 0..%d, the worker's %d..%d); the caller's slab runs as below\n"
           "while the worker reads its rows, then the worker updates the %d rows after the seam and the next\n"
           "%d (momentum, as its update does): us, median of %d reps\n", c.rows, c.cols, c.half - 1, c.half,
           c.rows - 1, SEAM_BAND, SEAM_BAND, reps);
    eng_train_config tc = { .optimizer = ENG_OPT_MOMENTUM, .lr = 0.0, .momentum = 0.9 };
    if (eng_optim_create(&tc, (size_t)c.rows * c.cols, &c.o)) return;
    c.w = prof_calloc((size_t)c.rows * c.cols, 4);
    c.x = prof_calloc((size_t)c.batch * c.rows, 4);
    c.c = prof_calloc((size_t)c.batch * c.cols, 4);
    float *g = prof_calloc((size_t)c.rows * c.cols, 4);
    double t[SEAM_N][2][64];
    int n[SEAM_N] = { 0 };
    openblas_set_num_threads(1);
    for (int r = 0; r < reps * 4 && n[SEAM_ONEDNN] < reps; r++)
        for (int how = 0; how < SEAM_N; how++) {
            c.how = how, c.caller = pthread_self(), c.near_us = c.far_us = -1;
            atomic_store(&c.worker_in, 0);
            if (!eng_pool_run(2, seam_first, &c) || !atomic_load(&c.worker_in)) continue;
            atomic_store(&c.worker_in, 0);
            eng_optim_step_begin(c.o, c.w, g, 0.0);
            if (!eng_pool_run(2, seam_second, &c) || c.near_us < 0) continue;
            if (n[how] < 64) t[how][0][n[how]] = c.near_us, t[how][1][n[how]] = c.far_us, n[how]++;
        }
    char near[32], far[32];
    snprintf(near, sizeof near, "rows +0..%d", SEAM_BAND - 1);
    snprintf(far, sizeof far, "+%d..%d", SEAM_BAND, 2 * SEAM_BAND - 1);
    printf("%-28s %12s %12s   %s\n", "the caller's slab ran", near, far, "(reps)");
    for (int how = 0; how < SEAM_N; how++) {
        if (!n[how]) {
            printf("%-28s %12s %12s   (no rep had the worker)\n", name[how], "-", "-");
            continue;
        }
        printf("%-28s %12.2f %12.2f   (%d)\n", name[how], stats_of(t[how][0], n[how]).med, stats_of(t[how][1], n[how]).med,
               n[how]);
    }
    prof_free(c.w), prof_free(c.x), prof_free(c.c), prof_free(g);
    eng_optim_free(c.o);
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
    seam_table(reps < 9 ? reps : 9);
    return 0;
}
