/* estimate.c — condition-number estimators: the Frobenius/determinant bound (log form),
 * LAPACK's dpocon, Gershgorin bounds and the exact kappa_2 from eigenvalues. */
#include "internal.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../profiler/profiler.h"

/* Row-major symmetric storage is column-major with the triangles swapped, so every LAPACK
 * call below is column-major on the upper triangle: no transposed copies. */

double qm_log_fro2(int n, const double *A)
{
    /* Scaled sum of squares (as dnrm2 does): huge or tiny entries neither overflow nor
     * underflow before the log is taken. */
    double scale = 0, ssq = 1;
    for (size_t i = 0; i < (size_t)n * n; i++) {
        double v = fabs(A[i]);
        if (v == 0) continue;
        if (scale < v) { ssq = 1 + ssq * (scale / v) * (scale / v); scale = v; }
        else ssq += (v / scale) * (v / scale);
    }
    return scale == 0 ? -INFINITY : 2 * log(scale) + log(ssq);
}

/* kappa from log t, t = (n/||A||_F^2)^n det^2 in [0, 1]:
 * sqrt((1+x)/(1-x)) with x = sqrt(1-t) equals (1+x)/sqrt(t), which stays accurate as
 * x -> 1 (t -> 0), where 1-x would cancel. */
static double fro_from_logt(double logt)
{
    if (isnan(logt)) return NAN;
    if (logt == -INFINITY) return INFINITY;
    if (logt > 0) logt = 0; /* AM-GM gives t <= 1; only rounding exceeds it */
    double x = sqrt(-expm1(logt));
    double lk = log1p(x) - 0.5 * logt;
    double k = exp(lk);
    return k < 1 ? 1 : k;
}

double qm_kappa_fro_formula(int n, double fro2, double log_abs_det)
{
    if (n <= 0 || !(fro2 > 0)) return INFINITY;
    return fro_from_logt(n * (log((double)n) - log(fro2)) + 2 * log_abs_det);
}

int qm_sym_has_nan(int n, const double *A)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++)
            if (isnan(A[(size_t)i * n + j])) return 1;
    return 0;
}

size_t qm_kappa_fro_work(int n)
{
    return n <= 0 ? 0 : (size_t)n * n + qm_ints_in_doubles((size_t)n);
}

int qm_kappa_fro(int n, const double *A, double *kappa, double *ns, double *work)
{
    uint64_t t0 = prof_now_ns();
    if (n <= 0) return qm_fail(QM_EINVAL, "qm_kappa_fro: n = %d, expected n >= 1", n);
    size_t nn = (size_t)n * n;
    double *own = work ? NULL : prof_malloc(qm_kappa_fro_work(n) * sizeof *own);
    if (!work && !own) return qm_fail(QM_ENOMEM, "qm_kappa_fro: out of memory for n = %d", n);
    double *lu = work ? work : own;
    lapack_int *ipiv = (lapack_int *)(lu + nn);
    memcpy(lu, A, nn * sizeof *lu);
    double logfro2 = qm_log_fro2(n, A);
    /* The transpose has the same determinant and Frobenius norm. */
    lapack_int info = LAPACKE_dgetrf(LAPACK_COL_MAJOR, n, n, lu, n, ipiv);
    double logdet = 0;
    if (info > 0) logdet = -INFINITY;
    else for (int i = 0; i < n; i++) logdet += log(fabs(lu[(size_t)i * n + i]));
    prof_free(own);
    if (info < 0) return qm_fail(QM_EINVAL, "qm_kappa_fro: dgetrf argument %d invalid", (int)-info);
    *kappa = logfro2 == -INFINITY ? INFINITY
                                  : fro_from_logt(n * (log((double)n) - logfro2) + 2 * logdet);
    if (ns) *ns = (double)(prof_now_ns() - t0);
    return QM_OK;
}

double qm_kappa_fro_from_chol(int n, double log_fro2, const double *L)
{
    double logdet = 0;
    for (int i = 0; i < n; i++) logdet += 2 * log(L[(size_t)i * n + i]);
    return log_fro2 == -INFINITY ? INFINITY : fro_from_logt(n * (log((double)n) - log_fro2) + 2 * logdet);
}

double qm_kappa_fro_chol(int n, const double *A, const double *L, double *ns)
{
    uint64_t t0 = prof_now_ns();
    double k = qm_kappa_fro_from_chol(n, qm_log_fro2(n, A), L);
    if (ns) *ns = (double)(prof_now_ns() - t0);
    return k;
}

size_t qm_kappa_lapack_chol_work(int n)
{
    return n <= 0 ? 0 : (size_t)3 * n + qm_ints_in_doubles((size_t)n);
}

double qm_kappa_lapack_from_chol(int n, double anorm, const double *L, double *work)
{
    lapack_int *iwork = (lapack_int *)(work + (size_t)3 * n);
    double rcond = 0;
    lapack_int info = LAPACKE_dpocon_work(LAPACK_COL_MAJOR, 'U', n, L, n, anorm, &rcond, work, iwork);
    return info != 0 ? NAN : rcond > 0 ? 1 / rcond : INFINITY;
}

double qm_kappa_lapack_chol(int n, const double *A, const double *L, double *ns, double *work)
{
    uint64_t t0 = prof_now_ns();
    double *own = work || n < 0 ? NULL : prof_malloc(qm_kappa_lapack_chol_work(n) * sizeof *own);
    if (!work) work = own;
    double k = NAN;
    if (work) {
        /* 1-norm of a symmetric matrix: the largest absolute column (= row) sum. */
        double anorm = 0;
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int j = 0; j < n; j++) s += fabs(A[(size_t)i * n + j]);
            if (s > anorm) anorm = s;
        }
        k = qm_kappa_lapack_from_chol(n, anorm, L, work);
    }
    prof_free(own);
    if (ns) *ns = (double)(prof_now_ns() - t0);
    return k;
}

double qm_kappa_gersh_psd(int n, const double *A, double mu, double *ns)
{
    uint64_t t0 = prof_now_ns();
    double r = 0;
    for (int i = 0; i < n; i++) {
        double s = 0;
        const double *row = A + (size_t)i * n;
        for (int j = 0; j < n; j++) s += fabs(row[j]);
        if (s > r) r = s;
    }
    double k = qm_gersh_psd_from(r, mu);
    if (ns) *ns = (double)(prof_now_ns() - t0);
    return k;
}

double qm_kappa_gersh_sym(int n, const double *B, double *ns)
{
    uint64_t t0 = prof_now_ns();
    double hi = -INFINITY, lo = INFINITY;
    for (int i = 0; i < n; i++) {
        const double *row = B + (size_t)i * n;
        double r = 0;
        for (int j = 0; j < n; j++) if (j != i) r += fabs(row[j]);
        if (row[i] + r > hi) hi = row[i] + r;
        if (row[i] - r < lo) lo = row[i] - r;
    }
    double k = qm_gersh_sym_from(lo, hi);
    if (ns) *ns = (double)(prof_now_ns() - t0);
    return k;
}

/* dsyevd's optimal workspace for eigenvalues only (what LAPACKE_dsyevd would allocate):
 * a query, which allocates nothing. */
static void syevd_sizes(int n, lapack_int *lwork, lapack_int *liwork)
{
    double a = 0, w = 0, wq = 0;
    lapack_int iq = 0;
    lapack_int info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'N', 'U', n, &a, n > 1 ? n : 1, &w, &wq, -1, &iq, -1);
    *lwork = info == 0 && wq >= 1 ? (lapack_int)wq : 2 * n + 1;
    *liwork = info == 0 && iq >= 1 ? iq : 1;
}

size_t qm_kappa_exact_work(int n)
{
    if (n <= 0) return 0;
    lapack_int lw, liw;
    syevd_sizes(n, &lw, &liw);
    return (size_t)n * n + (size_t)n + (size_t)lw + qm_ints_in_doubles((size_t)liw);
}

double qm_kappa_from_eigvals(int n, const double *w, double mu)
{
    double mn = INFINITY, mx = 0;
    for (int i = 0; i < n; i++) {
        double v = fabs(w[i] + mu);
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    return mn > 0 ? mx / mn : INFINITY;
}

int qm_sym_eigvals(int n, const double *A, double *w, double *work)
{
    if (n <= 0) return qm_fail(QM_EINVAL, "qm_kappa_exact: n = %d, expected n >= 1", n);
    size_t nn = (size_t)n * n;
    lapack_int lwork, liwork;
    syevd_sizes(n, &lwork, &liwork);
    double *own = work ? NULL : prof_malloc(qm_kappa_exact_work(n) * sizeof *own);
    if (!work && !own) return qm_fail(QM_ENOMEM, "qm_kappa_exact: out of memory for n = %d", n);
    double *a = work ? work : own, *wk = a + nn + n;
    lapack_int *iwk = (lapack_int *)(wk + lwork);
    memcpy(a, A, nn * sizeof *a);
    lapack_int info = qm_sym_has_nan(n, a) ? -5
                    : LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'N', 'U', n, a, n, w, wk, lwork, iwk, liwork);
    prof_free(own);
    if (info != 0) return qm_fail(QM_EINVAL, "qm_kappa_exact: dsyevd failed (info %d)", (int)info);
    return QM_OK;
}

int qm_kappa_exact(int n, const double *A, double *kappa, double *ns, double *work)
{
    uint64_t t0 = prof_now_ns();
    if (n <= 0) return qm_fail(QM_EINVAL, "qm_kappa_exact: n = %d, expected n >= 1", n);
    double *own = work ? NULL : prof_malloc(qm_kappa_exact_work(n) * sizeof *own);
    if (!work && !own) return qm_fail(QM_ENOMEM, "qm_kappa_exact: out of memory for n = %d", n);
    double *wk = work ? work : own, *w = wk + (size_t)n * n; /* the layout qm_sym_eigvals uses */
    int rc = qm_sym_eigvals(n, A, w, wk);
    if (rc == QM_OK) *kappa = qm_kappa_from_eigvals(n, w, 0);
    prof_free(own);
    if (ns) *ns = (double)(prof_now_ns() - t0);
    return rc;
}
