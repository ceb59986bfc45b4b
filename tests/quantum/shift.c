/* shift.c — the scheduler's shift choice (issue 21): a block whose estimate predicts that
 * the configured shift must fail is factored once, at the shift its lower bound on
 * lambda_min gives (Gershgorin or Wolkowicz-Styan), with no failed
 * Cholesky before it; a failure the estimate could not predict costs one retry, not a
 * ladder of them; and whichever way the shift was chosen, the direction solves the shifted
 * system and every recorded figure matches an independent computation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "../../quantum/quantum.h"
#include "util.h"

static const qm_chol_model flat = { 0, 0, 1e6, 1 };

static qm_sched *classical(void)
{
    qm_sched_opts o = qm_sched_defaults();
    o.policy = QM_POLICY_CLASSICAL;
    o.model = &flat;
    qm_sched *s = NULL;
    assert_int_equal(qm_sched_create(&o, &s), QM_OK);
    return s;
}


static double amax_of(int n, const double *A)
{
    double m = 0;
    for (int i = 0; i < n * n; i++) m = fmax(m, fabs(A[i]));
    return m;
}

/* What an exact tanh-layer Hessian block looks like to the solver: dense, indefinite, and
 * with diagonal entries below -shift (the s'' term), so Cholesky at the configured shift
 * must fail at once: a Gram part X X^T / m plus a diagonal of mixed sign. */
static void hessian_like(int n, uint64_t seed, double *A)
{
    int m = 6;
    double *X = malloc((size_t)n * m * sizeof *X);
    for (int i = 0; i < n * m; i++) X[i] = 2 * tq_uniform(&seed) - 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {
            double v = 0;
            for (int k = 0; k < m; k++) v += X[i * m + k] * X[j * m + k];
            A[i * n + j] = A[j * n + i] = v / m;
        }
    for (int i = 0; i < n; i++) A[i * n + i] += i % 3 == 0 ? -0.8 : 0.1;
    free(X);
}

/* The direction solves (A + shift I) d = g (own matrix-vector product, full A), passes the
 * curvature test, and every recorded estimate equals the standalone estimator's on the
 * shifted matrix. */
static void check_solution(int n, const double *A, const double *g, const double *d, double mu0,
                           const qm_solve_event *ev)
{
    double mu = ev->shift, rr = 0, gg = 0, dbd = 0, dd = 0;
    for (int i = 0; i < n; i++) {
        double bd = mu * d[i];
        for (int j = 0; j < n; j++) bd += A[i * n + j] * d[j];
        rr += (bd - g[i]) * (bd - g[i]);
        gg += g[i] * g[i];
        dbd += d[i] * bd;
        dd += d[i] * d[i];
    }
    double res = sqrt(rr / gg);
    if (!(res < 1e-10)) fail_msg("||(A + %g I) d - g|| / ||g|| = %.3g, want < 1e-10", mu, res);
    if (!(fabs(ev->residual - res) < 1e-12)) fail_msg("recorded residual %.3g, recomputed %.3g", ev->residual, res);
    if (!(dbd >= 0.5 * mu0 * dd)) fail_msg("curvature d'Bd/d'd = %g < shift/2 = %g", dbd / dd, 0.5 * mu0);

    double *B = malloc((size_t)n * n * sizeof *B), *L = malloc((size_t)n * n * sizeof *L);
    memcpy(B, A, (size_t)n * n * sizeof *B);
    for (int i = 0; i < n; i++) B[i * n + i] += mu;
    assert_int_equal(qm_cholesky(n, B, L, NULL), QM_OK);
    struct { const char *what; double got, want; } k[] = {
        { "kappa_gersh", ev->kappa_gersh, qm_kappa_gersh_sym(n, B, NULL) },
        { "kappa_lapack", ev->kappa_lapack, qm_kappa_lapack_chol(n, B, L, NULL, NULL) },
        { "kappa_fro", ev->kappa_fro, qm_kappa_fro_chol(n, B, L, NULL) },
        { "alpha", ev->alpha, n * amax_of(n, B) },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!(k[i].got == k[i].want || fabs(k[i].got - k[i].want) <= 1e-9 * fabs(k[i].want)))
            fail_msg("%s recorded %.17g, the standalone estimate on A + %g I gives %.17g", k[i].what, k[i].got, mu, k[i].want);
    assert_true(ev->nnz_per_row == n);
    assert_true(ev->kappa_used == ev->kappa_lapack); /* not PSD: routed by dpocon */
    free(B);
    free(L);
}

/* The issue-21 regression: the estimate predicts the shift, so there is no retry (the x10
 * ladder this replaces failed at the configured shift, and at each rung below the one that
 * held). */
static void predicted_shift_factors_once(void **state)
{
    (void)state;
    int n = 96;
    double *A = malloc((size_t)n * n * sizeof *A), *g = malloc(n * sizeof *g), *d = malloc(n * sizeof *d);
    hessian_like(n, 3, A);
    for (int i = 0; i < n; i++) g[i] = sin(0.7 * i + 1);
    double mu0 = 5e-3 * amax_of(n, A);
    qm_sched *s = classical();
    qm_solve_event ev;
    assert_int_equal(qm_sched_solve(s, 1, 0, n, A, 0, mu0, g, d, &ev), QM_OK);
    double want = 0.5 * mu0 - tq_lmin_lower_bound(n, A);
    print_message("predicted: shift %.4g (configured %.4g, from the bound %.4g), %d factorisation(s), scan %.0f ns of %.0f ns\n",
                  ev.shift, mu0, want, ev.factorizations, ev.scan_ns, ev.measured_classical_ns);
    if (ev.factorizations != 1) fail_msg("%d factorisations: the estimate predicted the shift, a retry is waste", ev.factorizations);
    assert_int_equal(ev.shift_raised, 1);
    assert_true(fabs(ev.shift - want) <= 1e-12 * want);
    assert_true(ev.scan_ns > 0 && ev.scan_ns <= ev.factor_ns && ev.factor_ns <= ev.measured_classical_ns);
    assert_true(ev.total_ns >= ev.measured_classical_ns + ev.est_ns);
    check_solution(n, A, g, d, mu0, &ev);
    qm_sched_free(s);
    free(A); free(g); free(d);
}

/* Indefinite with a positive diagonal: nothing cheap predicts the failure, so the
 * configured shift is tried and the x10 ladder follows, as before, but never above the
 * bound's shift (which cannot fail); the result is as correct. A PSD block is factored once
 * at the configured shift, as before. */
static void unpredicted_failure_climbs_the_capped_ladder(void **state)
{
    (void)state;
    int n = 40;
    double *lam = malloc(n * sizeof *lam), *A = malloc((size_t)n * n * sizeof *A), *g = malloc(n * sizeof *g),
           *d = malloc(n * sizeof *d);
    for (int i = 0; i < n; i++) lam[i] = i == 0 ? -3 : 1.0 + 0.25 * i; /* one eigenvalue -3, diagonal > 0 */
    tq_spectral(n, lam, 9, A);
    for (int i = 0; i < n; i++) g[i] = cos(1.3 * i);
    double mu0 = 1e-2, dmin = INFINITY;
    for (int i = 0; i < n; i++) dmin = fmin(dmin, A[i * n + i]);
    assert_true(dmin + mu0 > 0); /* the premise: the diagonal does not give it away */
    qm_sched *s = classical();
    qm_solve_event ev;
    assert_int_equal(qm_sched_solve(s, 1, 0, n, A, 0, mu0, g, d, &ev), QM_OK);
    print_message("unpredicted: shift %.4g after %d factorisations (bound's shift %.4g)\n", ev.shift,
                  ev.factorizations, 0.5 * mu0 - tq_lmin_lower_bound(n, A));
    /* lambda_min = -3: 0.01, 0.1 and 1 fail, 10 holds (below the bound's 13.5) */
    assert_int_equal(ev.factorizations, 4);
    assert_true(fabs(ev.shift - 10) <= 1e-12 * 10 && 10 < 0.5 * mu0 - tq_lmin_lower_bound(n, A));
    check_solution(n, A, g, d, mu0, &ev);
    /* PSD: once, unraised */
    for (int i = 0; i < n; i++) lam[i] = 0.5 + i;
    tq_spectral(n, lam, 10, A);
    assert_int_equal(qm_sched_solve(s, 2, 0, n, A, 1, mu0, g, d, &ev), QM_OK);
    assert_int_equal(ev.factorizations, 1);
    assert_int_equal(ev.shift_raised, 0);
    assert_true(ev.shift == mu0);
    qm_sched_free(s);
    free(lam); free(A); free(g); free(d);
}

/* With the exact estimator on (blocks up to quantum.exact_kappa_max_n), lambda_min is known
 * before the factorisation: the shift is the ladder's (the smallest mu0 10^k that makes the
 * block positive definite, what the ladder alone found by failing below it), reached with
 * one factorisation, and kappa_exact is of the block shifted by it. */
static void exact_eigenvalues_give_the_ladder_shift(void **state)
{
    (void)state;
    int n = 64;
    double *A = malloc((size_t)n * n * sizeof *A), *g = malloc(n * sizeof *g), *d = malloc(n * sizeof *d),
           *w = malloc(n * sizeof *w), *c = malloc((size_t)n * n * sizeof *c);
    hessian_like(n, 5, A);
    for (int i = 0; i < n; i++) g[i] = sin(0.3 * i + 2);
    double mu0 = 5e-3 * amax_of(n, A);
    memcpy(c, A, (size_t)n * n * sizeof *c);
    assert_int_equal(LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'N', 'L', n, c, n, w), 0);
    double rung = mu0;
    while (!(rung + w[0] > 0)) rung *= 10;
    qm_sched_opts o = qm_sched_defaults();
    o.policy = QM_POLICY_CLASSICAL;
    o.model = &flat;
    o.exact_kappa_max_n = n;
    qm_sched *s = NULL;
    assert_int_equal(qm_sched_create(&o, &s), QM_OK);
    qm_solve_event ev;
    assert_int_equal(qm_sched_solve(s, 1, 0, n, A, 0, mu0, g, d, &ev), QM_OK);
    print_message("exact: lambda_min %.4g, shift %.4g (rung %.4g), %d factorisation(s)\n", w[0], ev.shift, rung,
                  ev.factorizations);
    assert_int_equal(ev.factorizations, 1);
    assert_true(fabs(ev.shift - rung) <= 1e-12 * rung);
    double kmax = 0, kmin = INFINITY;
    for (int i = 0; i < n; i++) { kmax = fmax(kmax, fabs(w[i] + rung)); kmin = fmin(kmin, fabs(w[i] + rung)); }
    assert_true(fabs(ev.kappa_exact - kmax / kmin) <= 1e-8 * kmax / kmin);
    check_solution(n, A, g, d, mu0, &ev);
    qm_sched_free(s);
    free(A); free(g); free(d); free(w); free(c);
}

int test_quantum_shift(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(predicted_shift_factors_once),
        cmocka_unit_test(unpredicted_failure_climbs_the_capped_ladder),
        cmocka_unit_test(exact_eigenvalues_give_the_ladder_shift),
    };
    return cmocka_run_group_tests_name("quantum_shift", tests, NULL, NULL);
}
