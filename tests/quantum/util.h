/* util.h — helpers shared by the quantum tests: test matrices with a known spectrum. */
#ifndef NNBENCH_TESTS_QUANTUM_UTIL_H
#define NNBENCH_TESTS_QUANTUM_UTIL_H

#include <lapacke.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline double tq_uniform(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

/* A = Q diag(lambda) Q^T with Q a random orthogonal matrix (QR of a random matrix). */
static inline void tq_spectral(int n, const double *lambda, uint64_t seed, double *A)
{
    double *q = malloc((size_t)n * n * sizeof *q), *tau = malloc((size_t)n * sizeof *tau);
    for (int i = 0; i < n * n; i++) q[i] = 2 * tq_uniform(&seed) - 1;
    LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, n, n, q, n, tau);
    LAPACKE_dorgqr(LAPACK_ROW_MAJOR, n, n, n, q, n, tau);
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += q[i * n + k] * lambda[k] * q[j * n + k];
            A[i * n + j] = A[j * n + i] = s;
        }
    free(q);
    free(tau);
}

/* The lower bound on lambda_min(A) the scheduler takes its shift from, the slow way: the
 * larger of Gershgorin's min_i (A_ii - sum_{j != i} |A_ij|) and Wolkowicz-Styan's
 * m - s sqrt(n - 1), m = tr(A)/n, s^2 = ||A||_F^2/n - m^2. */
static inline double tq_lmin_lower_bound(int n, const double *A)
{
    double lo = INFINITY, tr = 0, f2 = 0;
    for (int i = 0; i < n; i++) {
        double r = 0;
        for (int j = 0; j < n; j++) {
            if (j != i) r += fabs(A[i * n + j]);
            f2 += A[i * n + j] * A[i * n + j];
        }
        lo = fmin(lo, A[i * n + i] - r);
        tr += A[i * n + i];
    }
    double m = tr / n;
    return fmax(lo, m - sqrt((f2 / n - m * m) * (n - 1)));
}

#endif
