/* internal.h — private to quantum/: the error setter and a few shared helpers. */
#ifndef NNBENCH_QUANTUM_INTERNAL_H
#define NNBENCH_QUANTUM_INTERNAL_H

#include <math.h>

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

/* Solves B x = b in place (x holds b) with the lower factor L of B as dpotrf leaves it
 * (row-major lower; the other triangle is never read): two triangular solves (dtrsv,
 * several times faster than dpotrs's dtrsm for one right-hand side at these sizes). */
void qm_potrs(int n, const double *L, double *x);

/* ---- the estimators' formulas, for callers that have the matrix's sums already (the
 * scheduler gathers them in one pass that also chooses the shift) ---------------------- */

/* log ||A||_F^2 of the full n x n A, scaled so that neither huge nor tiny entries over- or
 * underflow (-INFINITY for a zero matrix). */
double qm_log_fro2(int n, const double *A);
/* The Frobenius/determinant bound from log ||A||_F^2 and A's Cholesky factor L. */
double qm_kappa_fro_from_chol(int n, double log_fro2, const double *L);
/* dpocon from the factor L and ||A||_1; work: qm_kappa_lapack_chol_work(n) doubles. NAN if
 * dpocon refuses. */
double qm_kappa_lapack_from_chol(int n, double anorm, const double *L, double *work);
/* The eigenvalues of symmetric A (its lower triangle), ascending, into w[n] (dsyevd on a
 * copy in work: qm_kappa_exact_work(n) doubles, or NULL to allocate); and kappa_2 of
 * A + mu I from them. With work given, w may be work + n*n (qm_kappa_exact's layout). */
int qm_sym_eigvals(int n, const double *A, double *w, double *work);
double qm_kappa_from_eigvals(int n, const double *w, double mu);
/* Gershgorin: for PSD A shifted by mu, from R = max_i sum_j |A_ij|; for any symmetric B,
 * from the disc edges lo = min_i (B_ii - r_i), hi = max_i (B_ii + r_i). */
static inline double qm_gersh_psd_from(double R, double mu) { return mu > 0 ? 1 + R / mu : INFINITY; }
static inline double qm_gersh_sym_from(double lo, double hi) { return lo > 0 ? hi / lo : INFINITY; }

#endif
