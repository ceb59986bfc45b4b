/* qlsa.c — the simulated quantum linear solver: Jennings et al.'s query count, the
 * tomography readout count, the output with its precision error, and row pruning. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double qm_query_count(double alpha, double kappa, double eps)
{
    /* Jennings, Lostaglio, Pallister, Sornborger, Subasi (2023), as the Q-Newton code
     * writes it; divided by the success probability 0.39 - 0.204 eps. alpha appears
     * once, where the block encoding enters (the reference multiplies by alpha again). */
    const double e = 2.718281828459045, pi = 3.141592653589793;
    double l = log(2 * kappa + 3);
    double q = (1741 * alpha * e / 500) * sqrt(kappa * kappa + 1) *
                   ((133.0 / 125 + 4 / (25 * cbrt(kappa))) * pi * l + 1) +
               (351.0 / 50) * l * l * (log(451 * l * l / eps) + 1) + alpha * kappa * log(32 / eps);
    return q / (0.39 - 0.204 * eps);
}

double qm_tomography_reps(int n, double eps)
{
    double r = ceil(QM_TOMOGRAPHY_C * n / (eps * eps));
    return r < 1 ? 1 : r;
}

void qm_qlsa_output(int n, const double *x_exact, double eps, uint64_t *rng, double *x_out)
{
    double xn = 0;
    for (int i = 0; i < n; i++) xn += x_exact[i] * x_exact[i];
    xn = sqrt(xn);
    if (x_out != x_exact) memcpy(x_out, x_exact, (size_t)n * sizeof *x_out);
    if (xn == 0 || eps == 0) return;
    /* A Gaussian vector normalised is uniform on the sphere. Two passes over the stream
     * (norm, then add) keep this allocation-free. */
    uint64_t start = *rng;
    double un = 0;
    for (int pass = 0; pass < 2; pass++) {
        *rng = start;
        for (int i = 0; i < n; i++) {
            double u1 = qm_rng_uniform(rng), u2 = qm_rng_uniform(rng);
            if (u1 < 1e-300) u1 = 1e-300;
            double z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
            if (pass == 0) un += z * z;
            else x_out[i] += eps * xn * z / un;
        }
        if (pass == 0) {
            un = sqrt(un);
            if (un == 0) return;
        }
    }
}

/* The k-th largest of v[0..m) (1-based k), by quickselect; v is reordered. */
static double kth_largest(double *v, int m, int k)
{
    int lo = 0, hi = m - 1, want = k - 1;
    while (lo < hi) {
        double piv = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] > piv) i++;
            while (v[j] < piv) j--;
            if (i <= j) { double t = v[i]; v[i] = v[j]; v[j] = t; i++; j--; }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
    return v[want];
}

int qm_max_row_nnz(int n, const double *A)
{
    int d = 0;
    for (int i = 0; i < n; i++) {
        int c = 0;
        for (int j = 0; j < n; j++) c += A[(size_t)i * n + j] != 0;
        if (c > d) d = c;
    }
    return d;
}

size_t qm_prune_rows_work(int n)
{
    /* A row of |A_ij| for the selection, then the n x n keep mask, one byte each. */
    return n <= 0 ? 0 : (size_t)n + ((size_t)n * n + sizeof(double) - 1) / sizeof(double);
}

int qm_prune_rows(int n, const double *A, int k, double *out, double *work)
{
    if (n <= 0) return 0;
    if (k <= 0) k = 1;
    if (k >= n) {
        if (out != A) memcpy(out, A, (size_t)n * n * sizeof *out);
        return qm_max_row_nnz(n, out);
    }
    double *own = work ? NULL : prof_malloc(qm_prune_rows_work(n) * sizeof *own);
    if (!work && !own) return qm_fail(QM_ENOMEM, "qm_prune_rows: out of memory for n = %d", n);
    double *v = work ? work : own;
    unsigned char *mask = (unsigned char *)(v + n);
    memset(mask, 0, (size_t)n * n);
    for (int i = 0; i < n; i++) {
        const double *row = A + (size_t)i * n;
        for (int j = 0; j < n; j++) v[j] = fabs(row[j]);
        double thr = kth_largest(v, n, k);
        int kept = 0;
        for (int j = 0; j < n; j++) if (fabs(row[j]) > thr) { mask[(size_t)i * n + j] = 1; kept++; }
        for (int j = 0; j < n && kept < k; j++)
            if (fabs(row[j]) == thr) { mask[(size_t)i * n + j] = 1; kept++; }
    }
    int d = 0;
    for (int i = 0; i < n; i++) {
        int c = 0;
        for (int j = 0; j < n; j++) {
            /* The diagonal always stays: it carries the shift, and a row without it could
             * be left empty (a singular system no solver, quantum or not, can take). */
            int keep = i == j || (mask[(size_t)i * n + j] & mask[(size_t)j * n + i]);
            double a = A[(size_t)i * n + j];
            out[(size_t)i * n + j] = keep ? a : 0;
            c += keep && a != 0;
        }
        if (c > d) d = c;
    }
    prof_free(own);
    return d;
}
