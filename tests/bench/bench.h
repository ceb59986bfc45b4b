/* bench.h — what every benchmark program shares: a monotonic clock, median/min/max of
 * repetitions, and the log-log slope that turns timings into a scaling exponent. */
#ifndef NNBENCH_BENCH_H
#define NNBENCH_BENCH_H

#include <math.h>
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
