/* bench.h — what every benchmark program shares: a monotonic clock, median/min/max of
 * repetitions, and the log-log slope that turns timings into a scaling exponent. */
#ifndef NNBENCH_BENCH_H
#define NNBENCH_BENCH_H

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../store/store.h"

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct { double med, min, max; } stats;

/* Median, min and max of the first n (at most 64) values. */
static inline stats stats_of(const double *v, int n)
{
    double s[64];
    if (n > 64) n = 64;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    stats r = { n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]), s[0], s[n - 1] };
    return r;
}

/* The core-to-core round trip: two threads pass a counter back and forth `rounds` times, so
 * each pass moves its cache line to the other core and back. ~100 ns when the two cores
 * share a last-level cache; several hundred when they do not. A VM's two vCPUs may be moved
 * between such placements while it runs, and every cut of work over two threads pays this
 * for each line that crosses. NAN when the second thread cannot be started. */
typedef struct { atomic_long flag; long rounds; } bench_pingpong;

static inline void *bench_pingpong_peer(void *arg)
{
    bench_pingpong *p = arg;
    for (long i = 0; i < p->rounds; i++) {
        while (atomic_load_explicit(&p->flag, memory_order_acquire) != 2 * i + 1) {}
        atomic_store_explicit(&p->flag, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static inline double core_round_trip_ns(long rounds)
{
    bench_pingpong p = { 0, rounds };
    pthread_t t;
    if (pthread_create(&t, NULL, bench_pingpong_peer, &p)) return NAN;
    double t0 = now_s();
    for (long i = 0; i < rounds; i++) {
        atomic_store_explicit(&p.flag, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&p.flag, memory_order_acquire) != 2 * i + 2) {}
    }
    double dt = now_s() - t0;
    pthread_join(t, NULL);
    return dt / (double)rounds * 1e9;
}

/* Removes a bench's temporary database and its -wal and -shm. */
static inline void bench_remove_db(const char *path)
{
    char aux[2100];
    unlink(path);
    snprintf(aux, sizeof aux, "%s-wal", path);
    unlink(aux);
    snprintf(aux, sizeof aux, "%s-shm", path);
    unlink(aux);
}

/* Least-squares slope of log(y) against log(x): y ~ c x^slope, by the one fit the views
 * use (store_fit_power); NAN when it cannot be fitted. */
static inline double fit_exponent(const double *x, const double *y, int m)
{
    store_fit f;
    store_fit_power(x, y, m > 0 ? (size_t)m : 0, &f);
    return f.exponent;
}

#endif
