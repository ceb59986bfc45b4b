/* estimators.c — kappa estimators against the exact kappa_2, the query count against the
 * reference values, the QLSA output error, pruning and the Cholesky cost model. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <unistd.h>

#include "../../quantum/quantum.h"
#include "util.h"

static void near_rel(double got, double want, double tol, const char *what)
{
    double rel = fabs(got - want) / fabs(want);
    if (!(rel <= tol)) fail_msg("%s: got %.10g, want %.10g (rel err %.3g > %.3g)", what, got, want, rel, tol);
}

static void fro_bound_2x2_reference(void **state)
{
    (void)state;
    const double A[4] = { 1, 2, 3, 4 };
    double k, ns = -1;
    assert_int_equal(qm_kappa_fro(2, A, &k, &ns, NULL), QM_OK);
    near_rel(k, 14.933, 1e-4, "fro bound of [[1,2],[3,4]]");
    /* For n = 2 the bound is exact: (15 + sqrt(221)) / 2. */
    near_rel(k, (15 + sqrt(221.0)) / 2, 1e-12, "fro bound exact for n=2");
    assert_true(ns >= 0);
    double ke;
    const double S[4] = { 2, 1, 1, 3 };
    assert_int_equal(qm_kappa_fro(2, S, &k, NULL, NULL), QM_OK);
    assert_int_equal(qm_kappa_exact(2, S, &ke, NULL, NULL), QM_OK);
    near_rel(k, ke, 1e-12, "fro bound = exact on a symmetric 2x2");
}

static void fro_formula_extremes(void **state)
{
    (void)state;
    /* Identity: t = 1, kappa 1 exactly. */
    assert_true(fabs(qm_kappa_fro_formula(100, 100.0, 0.0) - 1) < 1e-12);
    /* Singular: log det = -inf -> +inf, never NaN. */
    assert_true(isinf(qm_kappa_fro_formula(10, 5.0, -INFINITY)));
    /* n = 5000 with det = 1e-3000 (log form): no overflow to NaN, just a huge finite or inf. */
    double k = qm_kappa_fro_formula(5000, 5000.0 * 2, -3000 * log(10.0));
    assert_false(isnan(k));
    assert_true(k > 1e100);
    /* Matrices whose det underflows double: 400x400 diag(1e-2): det = 1e-800. */
    int n = 400;
    double *A = calloc((size_t)n * n, sizeof *A);
    for (int i = 0; i < n; i++) A[i * n + i] = 1e-2;
    assert_int_equal(qm_kappa_fro(n, A, &k, NULL, NULL), QM_OK);
    near_rel(k, 1.0, 1e-9, "fro bound of a scaled identity with underflowing det");
    free(A);
}

/* Q diag(lambda) Q^T with B = A + mu I, A PSD: every bound >= exact, exact == kappa. */
static void estimators_vs_exact(void **state)
{
    (void)state;
    const double kappas[] = { 1, 10, 1e3, 1e6 };
    const int sizes[] = { 6, 40 };
    for (int si = 0; si < 2; si++) {
        int n = sizes[si];
        double *lam = malloc(n * sizeof *lam), *A = malloc((size_t)n * n * sizeof *A),
               *B = malloc((size_t)n * n * sizeof *B), *L = malloc((size_t)n * n * sizeof *L);
        /* One caller-owned scratch for every estimator (as the scheduler passes it); the
         * LU bound is also run allocating its own, and must agree to the bit. */
        size_t wn = qm_kappa_exact_work(n);
        if (qm_kappa_fro_work(n) > wn) wn = qm_kappa_fro_work(n);
        if (qm_kappa_lapack_chol_work(n) > wn) wn = qm_kappa_lapack_chol_work(n);
        double *W = malloc(wn * sizeof *W);
        for (int ki = 0; ki < 4; ki++) {
            double kappa = kappas[ki], mu = 0.5;
            /* eigenvalues of A in [0, mu (kappa - 1)], log-spaced, with an exact zero:
             * B = A + mu I then has kappa_2(B) = kappa exactly. */
            for (int i = 0; i < n; i++)
                lam[i] = i == 0 ? 0 : mu * (kappa - 1) * pow(10.0, -6.0 * (n - 1 - i) / (n - 1));
            lam[n - 1] = mu * (kappa - 1);
            tq_spectral(n, lam, 1000 + n + ki, A);
            memcpy(B, A, (size_t)n * n * sizeof *B);
            for (int i = 0; i < n; i++) B[i * n + i] += mu;
            double ke, ns[4];
            assert_int_equal(qm_kappa_exact(n, B, &ke, &ns[3], W), QM_OK);
            char what[96];
            snprintf(what, sizeof what, "exact kappa n=%d kappa=%g", n, kappa);
            near_rel(ke, kappa, 1e-6, what);
            assert_int_equal(qm_cholesky(n, B, L, NULL), QM_OK);
            double kf = qm_kappa_fro_chol(n, B, L, &ns[0]);
            double kl = qm_kappa_lapack_chol(n, B, L, &ns[1], W);
            double kg = qm_kappa_gersh_psd(n, A, mu, &ns[2]);
            double kgs = qm_kappa_gersh_sym(n, B, NULL);
            double kflu, kflu_own;
            assert_int_equal(qm_kappa_fro(n, B, &kflu, NULL, W), QM_OK);
            assert_int_equal(qm_kappa_fro(n, B, &kflu_own, NULL, NULL), QM_OK);
            assert_memory_equal(&kflu, &kflu_own, sizeof kflu);
            print_message("n=%2d kappa=%-7g exact=%-10.6g fro=%-10.4g lapack=%-10.4g gersh=%-10.4g gersh_sym=%-10.4g\n",
                          n, kappa, ke, kf, kl, kg, kgs);
            double lo = ke * (1 - 1e-9);
            if (!(kf >= lo)) fail_msg("fro bound %g below exact %g (n=%d kappa=%g)", kf, ke, n, kappa);
            if (!(kflu >= lo)) fail_msg("fro bound (LU) %g below exact %g", kflu, ke);
            near_rel(kflu, kf, 1e-6, "fro bound: LU and Cholesky agree");
            if (!(kg >= lo)) fail_msg("gersh bound %g below exact %g (n=%d kappa=%g)", kg, ke, n, kappa);
            if (!(kgs >= lo)) fail_msg("gersh_sym bound %g below exact %g", kgs, ke);
            /* dpocon estimates kappa_1, and for symmetric B kappa_2 <= kappa_1 <= n kappa_2. */
            if (!(kl >= lo)) fail_msg("lapack estimate %g below exact %g (n=%d kappa=%g)", kl, ke, n, kappa);
            if (!(kl <= n * ke * (1 + 1e-9))) fail_msg("lapack estimate %g above n * exact = %g", kl, n * ke);
            for (int i = 0; i < 4; i++) assert_true(ns[i] >= 0);
        }
        free(lam); free(A); free(B); free(L); free(W);
    }
}

static void exact_singular_is_inf(void **state)
{
    (void)state;
    const double S[9] = { 1, 1, 0, 1, 1, 0, 0, 0, 2 };
    double k;
    assert_int_equal(qm_kappa_exact(3, S, &k, NULL, NULL), QM_OK);
    assert_true(k > 1e15);
    assert_int_equal(qm_kappa_fro(3, S, &k, NULL, NULL), QM_OK);
    assert_true(k > 1e15);
}

static void query_count_reference(void **state)
{
    (void)state;
    const double kap[] = { 1, 10, 100, 1e3, 1e4 };
    const double want[] = { 862.6, 5693, 5.695e4, 6.91e5, 8.614e6 };
    for (int i = 0; i < 5; i++) {
        char what[64];
        snprintf(what, sizeof what, "Q(alpha=1, kappa=%g, eps=1e-2)", kap[i]);
        near_rel(qm_query_count(1, kap[i], 1e-2), want[i], 1e-3, what);
    }
    /* alpha enters once: the reference (alpha twice) would give 17791 here. */
    near_rel(qm_query_count(2, 10, 1e-2), 8895.631, 1e-6, "Q(alpha=2, kappa=10)");
    near_rel(qm_query_count(3.5, 100, 1e-3), 182476.40, 1e-6, "Q(alpha=3.5, kappa=100, eps=1e-3)");
    /* monotone in kappa and in 1/eps */
    assert_true(qm_query_count(1, 20, 1e-2) > qm_query_count(1, 10, 1e-2));
    assert_true(qm_query_count(1, 10, 1e-3) > qm_query_count(1, 10, 1e-2));
}

static void tomography_reps(void **state)
{
    (void)state;
    assert_true(qm_tomography_reps(100, 1e-2) == 1e6);
    assert_true(qm_tomography_reps(7, 0.1) == 700);
}

static void qlsa_error_equals_eps(void **state)
{
    (void)state;
    int n = 257;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *y2 = malloc(n * sizeof *y2);
    uint64_t s = 7;
    for (int i = 0; i < n; i++) x[i] = tq_uniform(&s) - 0.3;
    const double eps[] = { 1e-1, 1e-2, 1e-4 };
    for (int e = 0; e < 3; e++) {
        uint64_t rng = 42, rng2 = 42;
        qm_qlsa_output(n, x, eps[e], &rng, y);
        qm_qlsa_output(n, x, eps[e], &rng2, y2);
        double dn = 0, xn = 0;
        for (int i = 0; i < n; i++) { dn += (y[i] - x[i]) * (y[i] - x[i]); xn += x[i] * x[i]; }
        near_rel(sqrt(dn / xn), eps[e], 1e-9, "QLSA relative error");
        assert_memory_equal(y, y2, n * sizeof *y); /* same seed, same output */
        assert_true(rng != 42);                    /* the stream advanced */
        uint64_t rng3 = 43;
        qm_qlsa_output(n, x, eps[e], &rng3, y2);
        assert_memory_not_equal(y, y2, n * sizeof *y);
    }
    /* in place */
    memcpy(y, x, n * sizeof *y);
    uint64_t rng = 1;
    qm_qlsa_output(n, y, 1e-2, &rng, y);
    double dn = 0, xn = 0;
    for (int i = 0; i < n; i++) { dn += (y[i] - x[i]) * (y[i] - x[i]); xn += x[i] * x[i]; }
    near_rel(sqrt(dn / xn), 1e-2, 1e-9, "QLSA relative error in place");
    free(x); free(y); free(y2);
}

static void prune_keeps_largest_symmetric(void **state)
{
    (void)state;
    const double A[16] = { 9, 1, -5, 0.5,
                           1, 8, 2, -3,
                           -5, 2, 7, 0.1,
                           0.5, -3, 0.1, 6 };
    double P[16];
    int d = qm_prune_rows(4, A, 2, P, NULL);
    /* The rest with caller scratch left dirty: the mask must be cleared, not assumed. */
    double W[64];
    assert_true(qm_prune_rows_work(4) <= sizeof W / sizeof W[0]);
    memset(W, 0xff, sizeof W);
    /* row tops: r0 {9,-5}, r1 {8,-3}, r2 {7,-5}, r3 {6,-3}: each mirrored by its partner */
    const double want[16] = { 9, 0, -5, 0,
                              0, 8, 0, -3,
                              -5, 0, 7, 0,
                              0, -3, 0, 6 };
    assert_memory_equal(P, want, sizeof want);
    assert_int_equal(d, 2);
    /* Asymmetric choice: row 0 keeps (0,1) but row 1 does not keep (1,0): both dropped. */
    const double C[9] = { 5, 4, 0.1, 4, 5, 4.5, 0.1, 4.5, 5 };
    d = qm_prune_rows(3, C, 2, P, W);
    const double wantc[9] = { 5, 0, 0, 0, 5, 4.5, 0, 4.5, 5 };
    assert_memory_equal(P, wantc, sizeof wantc);
    assert_int_equal(d, 2);
    /* a row whose largest entries are off the diagonal still keeps its diagonal */
    const double E[9] = { 1, 5, 0, 5, 1, 0.5, 0, 0.5, 1 };
    d = qm_prune_rows(3, E, 1, P, W);
    const double wante[9] = { 1, 5, 0, 5, 1, 0, 0, 0, 1 };
    assert_memory_equal(P, wante, sizeof wante);
    assert_int_equal(d, 2);
    /* k >= n: unchanged */
    d = qm_prune_rows(4, A, 4, P, W);
    assert_memory_equal(P, A, sizeof A);
    assert_int_equal(d, 4);
}

static void cost_model_fit_recovers(void **state)
{
    (void)state;
    int n[6] = { 16, 64, 128, 256, 512, 1024 };
    double t[6];
    for (int i = 0; i < 6; i++) t[i] = 0.02 * n[i] * n[i] * (double)n[i] + 3.0 * n[i] * n[i] + 5000;
    qm_chol_model m;
    assert_int_equal(qm_chol_model_fit(n, t, 6, &m), QM_OK);
    near_rel(m.a, 0.02, 1e-6, "a");
    near_rel(m.b, 3.0, 1e-5, "b");
    near_rel(m.c, 5000, 1e-4, "c");
    near_rel(qm_chol_model_predict(&m, 300), 0.02 * 27e6 + 3 * 9e4 + 5000, 1e-6, "predict(300)");
    assert_int_equal(qm_chol_model_fit(n, t, 2, &m), QM_EINVAL);
}

static void cost_model_calibrates_once(void **state)
{
    (void)state;
    char dir[] = "/tmp/nnbench-qm-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/sub/cholesky-model", dir);
    qm_chol_model m1, m2;
    int cal = -1;
    assert_int_equal(qm_chol_model_load(path, &m1, &cal), QM_OK);
    assert_int_equal(cal, 1);
    assert_int_equal(access(path, R_OK), 0);
    assert_int_equal(qm_chol_model_load(path, &m2, &cal), QM_OK);
    assert_int_equal(cal, 0);
    near_rel(m2.a, m1.a, 1e-12, "reloaded a");
    print_message("cost model: a=%.4g b=%.4g c=%.4g; t(100)=%.0f ns t(500)=%.0f ns t(1000)=%.0f ns\n",
                  m1.a, m1.b, m1.c, qm_chol_model_predict(&m1, 100), qm_chol_model_predict(&m1, 500),
                  qm_chol_model_predict(&m1, 1000));
    assert_true(qm_chol_model_predict(&m1, 1000) > qm_chol_model_predict(&m1, 200));
    /* the env path */
    setenv("XDG_CACHE_HOME", dir, 1);
    assert_int_equal(qm_chol_model_path(path, sizeof path), QM_OK);
    char want[256];
    snprintf(want, sizeof want, "%s/nnbench/cholesky-model", dir);
    assert_string_equal(path, want);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int test_quantum_estimators(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fro_bound_2x2_reference),
        cmocka_unit_test(fro_formula_extremes),
        cmocka_unit_test(estimators_vs_exact),
        cmocka_unit_test(exact_singular_is_inf),
        cmocka_unit_test(query_count_reference),
        cmocka_unit_test(tomography_reps),
        cmocka_unit_test(qlsa_error_equals_eps),
        cmocka_unit_test(prune_keeps_largest_symmetric),
        cmocka_unit_test(cost_model_fit_recovers),
        cmocka_unit_test(cost_model_calibrates_once),
    };
    return cmocka_run_group_tests_name("quantum_estimators", tests, NULL, NULL);
}
