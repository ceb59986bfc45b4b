/* solve.c — the classical solvers, really run and timed: Cholesky (dpotrf/dpotrs),
 * LDL^T (dsysv) and conjugate gradient. */
#include "internal.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../profiler/profiler.h"

/* Row-major lower == column-major upper: LAPACK runs column-major on 'U', no copies. */

int qm_cholesky(int n, const double *A, double *L, double *ns)
{
    uint64_t t0 = prof_now_ns();
    if (n <= 0) return qm_fail(QM_EINVAL, "qm_cholesky: n = %d, expected n >= 1", n);
    if (L != A) memcpy(L, A, (size_t)n * n * sizeof *L);
    lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'U', n, L, n);
    if (ns) *ns = (double)(prof_now_ns() - t0);
    if (info > 0)
        return qm_fail(QM_ENOTPD, "Cholesky failed: the %dx%d matrix is not positive definite (leading minor %d)",
                       n, n, (int)info);
    if (info < 0) return qm_fail(QM_EINVAL, "qm_cholesky: dpotrf argument %d invalid", (int)-info);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) L[(size_t)i * n + j] = 0;
    return QM_OK;
}

void qm_potrs(int n, const double *L, double *x)
{
    /* Row-major lower L is column-major upper U with B = U^T U: U^T y = b, then U x = y. */
    cblas_dtrsv(CblasColMajor, CblasUpper, CblasTrans, CblasNonUnit, n, L, n, x, 1);
    cblas_dtrsv(CblasColMajor, CblasUpper, CblasNoTrans, CblasNonUnit, n, L, n, x, 1);
}

void qm_cholesky_solve(int n, const double *L, const double *b, double *x, double *ns)
{
    uint64_t t0 = prof_now_ns();
    if (x != b) memcpy(x, b, (size_t)n * sizeof *x);
    qm_potrs(n, L, x);
    if (ns) *ns = (double)(prof_now_ns() - t0);
}

int qm_solve_cholesky(int n, const double *A, const double *b, double *x, double *ns)
{
    uint64_t t0 = prof_now_ns();
    if (n <= 0) return qm_fail(QM_EINVAL, "qm_solve_cholesky: n = %d, expected n >= 1", n);
    double *L = prof_malloc((size_t)n * n * sizeof *L);
    if (!L) return qm_fail(QM_ENOMEM, "qm_solve_cholesky: out of memory for n = %d", n);
    int rc = qm_cholesky(n, A, L, NULL);
    if (rc == QM_OK) qm_cholesky_solve(n, L, b, x, NULL);
    prof_free(L);
    if (ns) *ns = (double)(prof_now_ns() - t0);
    return rc;
}

/* dsysv's optimal workspace (what LAPACKE_dsysv would allocate): a query, no allocation. */
static lapack_int sysv_lwork(int n)
{
    double a = 0, b = 0, wq = 0;
    lapack_int ipiv = 0;
    lapack_int info = LAPACKE_dsysv_work(LAPACK_COL_MAJOR, 'U', n, 1, &a, n, &ipiv, &b, n, &wq, -1);
    return info == 0 && wq >= 1 ? (lapack_int)wq : 1;
}

size_t qm_solve_ldlt_work(int n)
{
    if (n <= 0) return 0;
    return (size_t)n * n + qm_ints_in_doubles((size_t)n) + (size_t)sysv_lwork(n);
}

static int has_nan(int n, const double *v)
{
    for (int i = 0; i < n; i++) if (isnan(v[i])) return 1;
    return 0;
}

int qm_solve_ldlt(int n, const double *A, const double *b, double *x, double *ns, double *work)
{
    uint64_t t0 = prof_now_ns();
    if (n <= 0) return qm_fail(QM_EINVAL, "qm_solve_ldlt: n = %d, expected n >= 1", n);
    size_t nn = (size_t)n * n;
    lapack_int lwork = sysv_lwork(n);
    double *own = work ? NULL : prof_malloc(qm_solve_ldlt_work(n) * sizeof *own);
    if (!work && !own) return qm_fail(QM_ENOMEM, "qm_solve_ldlt: out of memory for n = %d", n);
    double *a = work ? work : own;
    lapack_int *ipiv = (lapack_int *)(a + nn);
    double *wk = a + nn + qm_ints_in_doubles((size_t)n);
    memcpy(a, A, nn * sizeof *a);
    if (x != b) memcpy(x, b, (size_t)n * sizeof *x);
    /* The NaN checks LAPACKE_dsysv makes (arguments 5 and 8), which _work skips. */
    lapack_int info = qm_sym_has_nan(n, a) ? -5 : has_nan(n, x) ? -8
                    : LAPACKE_dsysv_work(LAPACK_COL_MAJOR, 'U', n, 1, a, n, ipiv, x, n, wk, lwork);
    prof_free(own);
    if (ns) *ns = (double)(prof_now_ns() - t0);
    if (info > 0)
        return qm_fail(QM_ESINGULAR, "LDL^T failed: the %dx%d matrix is singular (zero pivot %d)", n, n, (int)info);
    if (info < 0) return qm_fail(QM_EINVAL, "qm_solve_ldlt: dsysv argument %d invalid", (int)-info);
    return QM_OK;
}

size_t qm_solve_cg_work(int n) { return n <= 0 ? 0 : (size_t)3 * n; }

int qm_solve_cg(int n, const double *A, const double *b, double *x, double tol, int maxit,
                int *iters, double *ns, double *work)
{
    uint64_t t0 = prof_now_ns();
    if (n <= 0 || maxit < 0) return qm_fail(QM_EINVAL, "qm_solve_cg: n = %d, maxit = %d", n, maxit);
    double *own = work ? NULL : prof_malloc(qm_solve_cg_work(n) * sizeof *own);
    if (!work && !own) return qm_fail(QM_ENOMEM, "qm_solve_cg: out of memory for n = %d", n);
    double *r = work ? work : own;
    double *p = r + n, *ap = p + n;
    memset(x, 0, (size_t)n * sizeof *x);
    memcpy(r, b, (size_t)n * sizeof *r);
    memcpy(p, b, (size_t)n * sizeof *p);
    double bnorm = cblas_dnrm2(n, b, 1);
    double rr = cblas_ddot(n, r, 1, r, 1);
    int k = 0, rc = QM_OK;
    while (sqrt(rr) > tol * bnorm) {
        if (k >= maxit) {
            rc = qm_fail(QM_ENOCONV, "conjugate gradient: residual %.3g > tol %.3g after %d iterations",
                         sqrt(rr) / (bnorm > 0 ? bnorm : 1), tol, k);
            break;
        }
        cblas_dsymv(CblasRowMajor, CblasLower, n, 1.0, A, n, p, 1, 0.0, ap, 1);
        double pap = cblas_ddot(n, p, 1, ap, 1);
        if (!(pap > 0)) {
            rc = qm_fail(QM_ENOTPD, "conjugate gradient: p^T A p = %.3g <= 0 at iteration %d: the matrix is not positive definite",
                         pap, k);
            break;
        }
        double alpha = rr / pap;
        cblas_daxpy(n, alpha, p, 1, x, 1);
        cblas_daxpy(n, -alpha, ap, 1, r, 1);
        double rr_new = cblas_ddot(n, r, 1, r, 1);
        double beta = rr_new / rr;
        for (int i = 0; i < n; i++) p[i] = r[i] + beta * p[i];
        rr = rr_new;
        k++;
    }
    prof_free(own);
    if (iters) *iters = k;
    if (ns) *ns = (double)(prof_now_ns() - t0);
    return rc;
}
