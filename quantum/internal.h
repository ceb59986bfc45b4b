/* internal.h — private to quantum/: the error setter and a few shared helpers. */
#ifndef NNBENCH_QUANTUM_INTERNAL_H
#define NNBENCH_QUANTUM_INTERNAL_H

#include "quantum.h"
#include "../profiler/profiler.h" /* prof_malloc & co: every allocation is counted */

int qm_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* splitmix64: the QLSA's error directions and calibration matrices. */
static inline uint64_t qm_rng_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double qm_rng_uniform(uint64_t *x) { return (double)(qm_rng_next(x) >> 11) * 0x1.0p-53; }

/* Most nonzeros in any row of the n x n matrix A: the d in the QLSA's alpha = d max|A_ij|. */
int qm_max_row_nnz(int n, const double *A);

/* Doubles that hold m lapack_ints (pivots, integer workspaces) inside a double scratch. */
static inline size_t qm_ints_in_doubles(size_t m)
{
    return (m * sizeof(int64_t) + sizeof(double) - 1) / sizeof(double);
}

/* LAPACKE's non-_work drivers check the (upper, column-major) triangle for NaN and report
 * it as argument `arg` invalid; the _work ones used with caller scratch do not, so this
 * keeps their messages. 1 if any entry A[i*n+j], j <= i, is NaN. */
int qm_sym_has_nan(int n, const double *A);

/* Solves with the factor from qm_cholesky into x (b may equal x). */
void qm_potrs(int n, const double *L, double *x);

#endif
