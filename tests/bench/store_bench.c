/* store_bench.c — what storing costs: metric points logged per second through the store's
 * batched writer, the list query on a database of 10k runs, and reading two 100k-point
 * curves for compare. Prints figures; asserts nothing about time.
 * usage: store_bench [--quick] [--points] [DIR]   (DIR for the temporary databases, default /tmp;
 * --points: the logging phase only, e.g. for valgrind --tool=callgrind) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../../store/store.h"
#include "bench.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds of this process: on a loaded machine wall time mostly measures the others. */
static double cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}


static int die(const char *what)
{
    fprintf(stderr, "store_bench: %s: %s\n", what, store_error());
    return 1;
}

static long long begin_run(store *s, int i, const char *opt)
{
    store_run r;
    store_run_init(&r);
    snprintf(r.name, sizeof r.name, "bench-%d", i % 50);
    snprintf(r.variant, sizeof r.variant, "%s", opt);
    snprintf(r.optimizer, sizeof r.optimizer, "%s", opt);
    snprintf(r.dataset, sizeof r.dataset, i % 3 ? "spirals" : "fashion-mnist");
    long long id = 0;
    if (store_run_begin(s, &r, &id)) return -1;
    return id;
}

static int end_run(store *s, long long id, long steps, double loss)
{
    store_run e;
    store_run_init(&e);
    e.status = STORE_RUN_FINISHED;
    e.steps = steps;
    e.wall_s = steps * 1e-4;
    e.final_train_loss = loss;
    e.best_test_acc = 1 - loss;
    e.samples_per_s = 1e5;
    return store_run_end(s, id, &e);
}

/* Four metrics per step, like a run logging train loss/acc, lr and throughput. added_s gets
 * the wall time the caller spent adding (what a training thread pays; the writer thread
 * does the rest). */
static double added_s;
static int log_points(store *s, long long id, long points)
{
    double t0 = now();
    static const char *const keys[] = { "train_loss", "train_acc", "lr", "samples_per_s" };
    for (long i = 0; i < points; i++) {
        long step = i / 4 + 1;
        if (store_metric_add(s, id, step, (int)(step / 1000), step * 1e-4, step * 1e-4, keys[i & 3],
                             1.0 / (double)step))
            return -1;
    }
    added_s = now() - t0;
    return store_flush(s);
}

int main(int argc, char **argv)
{
    int quick = 0, points_only = 0;
    const char *dir = "/tmp";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--points")) points_only = 1;
        else dir = argv[i];
    }
    long n_points = quick ? 200000 : 1000000, n_runs = quick ? 2000 : 10000, n_curve = quick ? 20000 : 100000;
    char path[1024];
    snprintf(path, sizeof path, "%s/nnbench-store-bench-%d.db", dir, (int)getpid());

    /* 1. logging throughput */
    store *s;
    if (store_open(path, STORE_OPEN_CREATE, &s)) return die("open");
    long long id = begin_run(s, 0, "sgd");
    if (id < 0) return die("run");
    double t0 = now(), c0 = cpu();
    if (log_points(s, id, n_points)) return die("logging");
    double t1 = now(), c1 = cpu();
    printf("store_bench: logged %ld metric points in %.3f s: %.0f points/s wall, %.0f points/s per CPU second "
           "(batched, WAL, synchronous=NORMAL; writer thread); the caller spent %.3f s adding them: %.0f points/s\n",
           n_points, t1 - t0, n_points / (t1 - t0), n_points / (c1 - c0), added_s, n_points / added_s);
    end_run(s, id, n_points / 4, 0.1);
    if (points_only) {
        store_close(s);
        bench_remove_db(path);
        return 0;
    }

    /* 2. compare's read: two runs x n_curve points of one metric */
    long long a = begin_run(s, 1, "sgd"), b = begin_run(s, 2, "adam");
    for (long i = 1; i <= n_curve; i++) {
        if (store_metric_add(s, a, i, 0, i * 1e-4, i * 1e-4, "train_loss", 1.0 / i) ||
            store_metric_add(s, b, i, 0, i * 1e-4, i * 1e-4, "train_loss", 2.0 / i))
            return die("curves");
    }
    end_run(s, a, n_curve, 0.1);
    end_run(s, b, n_curve, 0.2);
    store_close(s);
    t0 = now();
    c0 = cpu();
    if (store_open(path, STORE_OPEN_READONLY, &s)) return die("reopen");
    store_series sa, sb;
    store_run ra, rb;
    if (store_run_get(s, a, &ra) || store_run_get(s, b, &rb) || store_metric_get(s, a, "train_loss", &sa) ||
        store_metric_get(s, b, "train_loss", &sb))
        return die("reading curves");
    t1 = now();
    c1 = cpu();
    printf("store_bench: compare's read of 2 runs x %zu points: %.1f ms wall, %.1f ms CPU (open + 2 runs + 2 series)\n",
           sa.n, (t1 - t0) * 1e3, (c1 - c0) * 1e3);
    store_series_free(&sa);
    store_series_free(&sb);
    store_run_clear(&ra);
    store_run_clear(&rb);
    store_close(s);
    bench_remove_db(path);

    /* 3. list on a database of n_runs runs (each with 40 metric points) */
    if (store_open(path, STORE_OPEN_CREATE, &s)) return die("open list db");
    t0 = now();
    const char *opts[] = { "sgd", "momentum", "adam", "newton" };
    for (long i = 0; i < n_runs; i++) {
        long long r = begin_run(s, (int)i, opts[i & 3]);
        if (r < 0 || log_points(s, r, 40) || end_run(s, r, 10, 1.0 / (i + 2))) return die("filling");
    }
    double fill = now() - t0;
    store_close(s);
    double best = INFINITY, sum = 0, cbest = INFINITY;
    int reps = 5;
    size_t n = 0;
    for (int k = 0; k < reps; k++) {
        t0 = now();
        c0 = cpu();
        if (store_open(path, 0, &s)) return die("open for list");
        store_run *runs;
        store_list_filter f = { .status = -1, .sort = "loss" };
        if (store_runs_list(s, &f, &runs, &n)) return die("list");
        free(runs);
        store_close(s);
        double dt = now() - t0, dc = cpu() - c0;
        if (dc < cbest) cbest = dc;
        sum += dt;
        if (dt < best) best = dt;
    }
    printf("store_bench: list of %zu runs (open + query sorted by loss + close): best %.1f ms wall (%.1f ms CPU), "
           "mean %.1f ms (filled in %.1f s)\n", n, best * 1e3, cbest * 1e3, sum / reps * 1e3, fill);
    bench_remove_db(path);
    return 0;
}
