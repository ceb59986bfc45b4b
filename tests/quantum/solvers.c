/* solvers.c — the classical solvers: Cholesky, LDL^T, conjugate gradient, and their
 * failure cases (indefinite, singular, no convergence). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../quantum/quantum.h"
#include "util.h"

static double resid(int n, const double *A, const double *x, const double *b)
{
    double r = 0, bn = 0;
    for (int i = 0; i < n; i++) {
        double s = -b[i];
        for (int j = 0; j < n; j++) s += A[i * n + j] * x[j];
        r += s * s;
        bn += b[i] * b[i];
    }
    return sqrt(r / bn);
}

static void make_spd(int n, double kappa, uint64_t seed, double *A)
{
    double *lam = malloc(n * sizeof *lam);
    for (int i = 0; i < n; i++) lam[i] = pow(kappa, (double)i / (n - 1));
    tq_spectral(n, lam, seed, A);
    free(lam);
}

static void cholesky_solves(void **state)
{
    (void)state;
    int n = 50;
    double *A = malloc(n * n * sizeof *A), *b = malloc(n * sizeof *b), *x = malloc(n * sizeof *x);
    make_spd(n, 100, 3, A);
    uint64_t s = 9;
    for (int i = 0; i < n; i++) b[i] = tq_uniform(&s) - 0.5;
    double ns = -1;
    assert_int_equal(qm_solve_cholesky(n, A, b, x, &ns), QM_OK);
    assert_true(ns > 0);
    double r = resid(n, A, x, b);
    if (r > 1e-12) fail_msg("cholesky residual %g", r);
    free(A); free(b); free(x);
}

static void cholesky_rejects_indefinite(void **state)
{
    (void)state;
    const double A[4] = { 1, 2, 2, 1 }; /* eigenvalues 3, -1 */
    double L[4], b[2] = { 1, 0 }, x[2];
    assert_int_equal(qm_cholesky(2, A, L, NULL), QM_ENOTPD);
    assert_int_equal(qm_solve_cholesky(2, A, b, x, NULL), QM_ENOTPD);
    assert_non_null(strstr(qm_error(), "not positive definite"));
    /* LDL^T solves it */
    assert_int_equal(qm_solve_ldlt(2, A, b, x, NULL, NULL), QM_OK);
    assert_true(resid(2, A, x, b) < 1e-14);
}

static void ldlt_indefinite_and_singular(void **state)
{
    (void)state;
    int n = 30;
    double *lam = malloc(n * sizeof *lam), *A = malloc(n * n * sizeof *A), *b = malloc(n * sizeof *b),
           *x = malloc(n * sizeof *x);
    for (int i = 0; i < n; i++) lam[i] = (i % 2 ? -1 : 1) * (1 + i);
    tq_spectral(n, lam, 5, A);
    for (int i = 0; i < n; i++) b[i] = i;
    assert_int_equal(qm_solve_ldlt(n, A, b, x, NULL, NULL), QM_OK);
    assert_true(resid(n, A, x, b) < 1e-12);
    const double S[4] = { 1, 1, 1, 1 };
    double bs[2] = { 1, 2 }, xs[2];
    assert_int_equal(qm_solve_ldlt(2, S, bs, xs, NULL, NULL), QM_ESINGULAR);
    assert_non_null(strstr(qm_error(), "singular"));
    free(lam); free(A); free(b); free(x);
}

static void cg_counts_iterations(void **state)
{
    (void)state;
    int n = 60, it = -1;
    double *A = malloc(n * n * sizeof *A), *b = malloc(n * sizeof *b), *x = malloc(n * sizeof *x);
    /* Few distinct eigenvalues: CG converges in that many steps. */
    double *lam = malloc(n * sizeof *lam);
    for (int i = 0; i < n; i++) lam[i] = 1 + i % 4;
    tq_spectral(n, lam, 11, A);
    for (int i = 0; i < n; i++) b[i] = 1 + 0.1 * i;
    double ns = -1;
    assert_int_equal(qm_solve_cg(n, A, b, x, 1e-10, 1000, &it, &ns, NULL), QM_OK);
    assert_true(resid(n, A, x, b) <= 1e-10 * 1.0001);
    assert_true(it >= 1 && it <= 6);
    assert_true(ns > 0);
    /* ill-conditioned, capped iterations: QM_ENOCONV with the count */
    make_spd(n, 1e8, 12, A);
    assert_int_equal(qm_solve_cg(n, A, b, x, 1e-14, 5, &it, NULL, NULL), QM_ENOCONV);
    assert_int_equal(it, 5);
    /* indefinite: p^T A p = 0 on the first step is detected, not divided by */
    const double D[4] = { 1, 0, 0, -1 };
    double bd[2] = { 1, 1 }, xd[2];
    assert_int_equal(qm_solve_cg(2, D, bd, xd, 1e-10, 100, &it, NULL, NULL), QM_ENOTPD);
    assert_int_equal(it, 0);
    free(A); free(b); free(x); free(lam);
}

int test_quantum_solvers(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cholesky_solves),
        cmocka_unit_test(cholesky_rejects_indefinite),
        cmocka_unit_test(ldlt_indefinite_and_singular),
        cmocka_unit_test(cg_counts_iterations),
    };
    return cmocka_run_group_tests_name("quantum_solvers", tests, NULL, NULL);
}
