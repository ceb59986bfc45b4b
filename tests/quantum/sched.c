/* sched.c — the scheduler: the routing rule of every policy on a table of cases, and whole
 * solves (events filled, QLSA error, hybrid clock delta, shift raising for indefinite and
 * nearly singular systems, LDL^T, singular, pruned systems). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../profiler/profiler.h"
#include "../../quantum/quantum.h"
#include "util.h"

static void decide_table(void **state)
{
    (void)state;
    static const struct { qm_policy p; double kappa, kmax, pq, pc; qm_route want; } cases[] = {
        { QM_POLICY_CLASSICAL, 1, 1e4, 1, 1e9, QM_ROUTE_CLASSICAL },
        { QM_POLICY_CLASSICAL, 1e9, 1e4, 1, 1e9, QM_ROUTE_CLASSICAL },
        { QM_POLICY_QUANTUM, 1e9, 1e4, 1e9, 1, QM_ROUTE_QUANTUM },
        { QM_POLICY_QUANTUM, NAN, 1e4, 1e9, 1, QM_ROUTE_QUANTUM },
        { QM_POLICY_THRESHOLD, 10, 1e4, 1e9, 1, QM_ROUTE_QUANTUM },   /* cost ignored */
        { QM_POLICY_THRESHOLD, 1e4, 1e4, 1e9, 1, QM_ROUTE_QUANTUM },  /* <= is inclusive */
        { QM_POLICY_THRESHOLD, 1.0001e4, 1e4, 1, 1e9, QM_ROUTE_CLASSICAL },
        { QM_POLICY_THRESHOLD, NAN, 1e4, 1, 1e9, QM_ROUTE_CLASSICAL },
        { QM_POLICY_THRESHOLD, INFINITY, 1e4, 1, 1e9, QM_ROUTE_CLASSICAL },
        { QM_POLICY_HYBRID, 10, 1e4, 1, 2, QM_ROUTE_QUANTUM },
        { QM_POLICY_HYBRID, 10, 1e4, 2, 2, QM_ROUTE_CLASSICAL },     /* strictly cheaper */
        { QM_POLICY_HYBRID, 10, 1e4, 3, 2, QM_ROUTE_CLASSICAL },
        { QM_POLICY_HYBRID, 2e4, 1e4, 1, 2, QM_ROUTE_CLASSICAL },    /* cheap but kappa too big */
        { QM_POLICY_HYBRID, NAN, 1e4, 1, 2, QM_ROUTE_CLASSICAL },
        { QM_POLICY_HYBRID, 10, 1e4, 1, NAN, QM_ROUTE_CLASSICAL },   /* no classical prediction */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qm_route r = qm_decide(cases[i].p, cases[i].kappa, cases[i].kmax, cases[i].pq, cases[i].pc);
        if (r != cases[i].want) fail_msg("case %zu: policy %d kappa %g: route %d, want %d", i, cases[i].p, cases[i].kappa, r, cases[i].want);
    }
}

/* 1e6 ns for every classical solve: the tests decide the crossover, not the machine. */
static const qm_chol_model flat_model = { 0, 0, 1e6, 1 };

typedef struct { int n; double *A, *g, *d, *x, mu; } fixture;

/* A PSD with eigenvalues in [0, 9 mu]: kappa_2(A + mu I) = 10. */
static fixture make_fixture(int n)
{
    fixture f = { n, malloc(n * n * sizeof(double)), malloc(n * sizeof(double)),
                  malloc(n * sizeof(double)), malloc(n * sizeof(double)), 0.1 };
    double *lam = calloc((size_t)n, sizeof *lam);
    for (int i = 0; i < n; i++) lam[i] = 9 * f.mu * i / (n - 1);
    tq_spectral(n, lam, 77, f.A);
    free(lam);
    for (int i = 0; i < n; i++) f.g[i] = sin(i + 1.0);
    double *B = malloc(n * n * sizeof *B);
    memcpy(B, f.A, n * n * sizeof *B);
    for (int i = 0; i < n; i++) B[i * n + i] += f.mu;
    assert_int_equal(qm_solve_cholesky(n, B, f.g, f.x, NULL), QM_OK);
    free(B);
    return f;
}
static void free_fixture(fixture *f) { free(f->A); free(f->g); free(f->d); free(f->x); }

static double rel_diff(int n, const double *a, const double *b)
{
    double d = 0, bn = 0;
    for (int i = 0; i < n; i++) { d += (a[i] - b[i]) * (a[i] - b[i]); bn += b[i] * b[i]; }
    return sqrt(d / bn);
}

static qm_sched *make(qm_policy p, double qt, void (*tweak)(qm_sched_opts *))
{
    qm_sched_opts o = qm_sched_defaults();
    o.policy = p;
    o.query_time_ns = qt;
    o.model = &flat_model;
    if (tweak) tweak(&o);
    qm_sched *s = NULL;
    assert_int_equal(qm_sched_create(&o, &s), QM_OK);
    return s;
}

static void exact_on(qm_sched_opts *o) { o->exact_kappa_max_n = 64; }

static void solve_classical_event(void **state)
{
    (void)state;
    fixture f = make_fixture(24);
    qm_sched *s = make(QM_POLICY_CLASSICAL, 1, exact_on);
    qm_solve_event ev;
    assert_int_equal(qm_sched_solve(s, 7, 3, f.n, f.A, 1, f.mu, f.g, f.d, &ev), QM_OK);
    assert_int_equal(ev.step, 7);
    assert_int_equal(ev.block, 3);
    assert_int_equal(ev.n, 24);
    assert_int_equal(ev.route, QM_ROUTE_CLASSICAL);
    assert_true(rel_diff(f.n, f.d, f.x) < 1e-12);
    assert_true(ev.residual < 1e-12);
    assert_true(fabs(ev.kappa_exact - 10) < 1e-8);
    assert_true(ev.kappa_fro >= 10 && ev.kappa_lapack >= 10 && ev.kappa_gersh >= 10);
    assert_int_equal(ev.kappa_kind, QM_KAPPA_GERSH);
    assert_true(ev.kappa_used == ev.kappa_gersh);
    assert_true(ev.est_ns == ev.est_fro_ns + ev.est_lapack_ns + ev.est_gersh_ns + ev.est_exact_ns);
    assert_true(ev.measured_classical_ns > 0 && ev.factor_ns > 0 && ev.factor_ns <= ev.measured_classical_ns);
    assert_true(ev.pred_classical_ns == 1e6);
    assert_true(ev.simulated_quantum_ns == 0 && ev.hybrid_delta_ns == 0);
    assert_true(ev.shift == f.mu && ev.shift_raised == 0);
    assert_true(ev.nnz_per_row == 24);
    assert_true(ev.queries > 0 && ev.pred_quantum_ns == ev.queries * 1.0);
    qm_sched_free(s);
    /* exact estimator off by default */
    s = make(QM_POLICY_CLASSICAL, 1, NULL);
    assert_int_equal(qm_sched_solve(s, 1, 0, f.n, f.A, 1, f.mu, f.g, f.d, &ev), QM_OK);
    assert_true(isnan(ev.kappa_exact) && ev.est_exact_ns == 0);
    qm_sched_free(s);
    free_fixture(&f);
}

static void solve_quantum_error_and_clock(void **state)
{
    (void)state;
    fixture f = make_fixture(24);
    qm_sched *s = make(QM_POLICY_QUANTUM, 2.5, NULL);
    qm_solve_event ev;
    assert_int_equal(qm_sched_solve(s, 1, 0, f.n, f.A, 1, f.mu, f.g, f.d, &ev), QM_OK);
    assert_int_equal(ev.route, QM_ROUTE_QUANTUM);
    double e = rel_diff(f.n, f.d, f.x);
    if (fabs(e - 1e-2) > 1e-9) fail_msg("QLSA error %g, want eps = 1e-2", e);
    /* kappa 10: the residual is between eps/kappa and eps*kappa */
    assert_true(ev.residual > 1e-3 && ev.residual < 1e-1);
    assert_true(ev.simulated_quantum_ns == ev.pred_quantum_ns);
    assert_true(ev.pred_quantum_ns == ev.queries * 2.5);
    assert_true(fabs(ev.queries - qm_query_count(ev.alpha, ev.kappa_used, 1e-2)) < 1e-9 * ev.queries);
    /* hybrid clock: the simulated time replaces the measured solve but its scan (Gershgorin
     * routing needs no factor; the scan gives kappa and alpha), minus the simulation's own
     * work */
    double replaced = ev.measured_classical_ns - ev.scan_ns;
    assert_true(ev.scan_ns > 0 && ev.scan_ns < ev.measured_classical_ns);
    assert_true(ev.hybrid_delta_ns <= ev.simulated_quantum_ns - replaced);
    assert_true(ev.hybrid_delta_ns > ev.simulated_quantum_ns - replaced - 1e9);
    /* a second solve draws a different error direction */
    double *d1 = malloc(f.n * sizeof *d1);
    memcpy(d1, f.d, f.n * sizeof *d1);
    assert_int_equal(qm_sched_solve(s, 2, 0, f.n, f.A, 1, f.mu, f.g, f.d, &ev), QM_OK);
    assert_memory_not_equal(d1, f.d, f.n * sizeof *d1);
    free(d1);
    qm_sched_free(s);
    free_fixture(&f);
}

static void kmax_5(qm_sched_opts *o) { o->kappa_max = 5; }
static void kmax_1e3(qm_sched_opts *o) { o->kappa_max = 1e3; }
static void tomo(qm_sched_opts *o) { o->readout = QM_READOUT_TOMOGRAPHY; }

static void solve_threshold_and_hybrid(void **state)
{
    (void)state;
    fixture f = make_fixture(16);
    qm_solve_event ev;
    struct { qm_policy p; double qt; void (*tw)(qm_sched_opts *); qm_route want; } cases[] = {
        { QM_POLICY_THRESHOLD, 1e9, kmax_1e3, QM_ROUTE_QUANTUM },  /* kappa_gersh ~ 10-ish */
        { QM_POLICY_THRESHOLD, 1e-9, kmax_5, QM_ROUTE_CLASSICAL },
        { QM_POLICY_HYBRID, 1e-6, kmax_1e3, QM_ROUTE_QUANTUM },    /* cheap queries */
        { QM_POLICY_HYBRID, 1e6, kmax_1e3, QM_ROUTE_CLASSICAL },   /* expensive queries */
        { QM_POLICY_HYBRID, 1e-6, kmax_5, QM_ROUTE_CLASSICAL },    /* kappa above max */
        { QM_POLICY_HYBRID, 1e-2, tomo, QM_ROUTE_CLASSICAL },      /* readout makes it dear */
        { QM_POLICY_HYBRID, 1e-2, NULL, QM_ROUTE_QUANTUM },        /* same without readout */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qm_sched *s = make(cases[i].p, cases[i].qt, cases[i].tw);
        assert_int_equal(qm_sched_solve(s, 1, 0, f.n, f.A, 1, f.mu, f.g, f.d, &ev), QM_OK);
        if (ev.route != cases[i].want)
            fail_msg("case %zu: route %d, want %d (kappa %g, pred q %g c %g)", i, ev.route, cases[i].want,
                     ev.kappa_used, ev.pred_quantum_ns, ev.pred_classical_ns);
        if (cases[i].tw == tomo) {
            assert_true(ev.readout_reps == 16 / 1e-4);
            assert_true(fabs(ev.pred_quantum_ns - ev.queries * ev.readout_reps * 1e-2) < 1e-6 * ev.pred_quantum_ns);
        } else {
            assert_true(ev.readout_reps == 1);
        }
        qm_sched_free(s);
    }
    free_fixture(&f);
}

static void no_raise(qm_sched_opts *o) { o->raise_shift = 0; }
static void lapack_routing(qm_sched_opts *o) { o->routing = QM_KAPPA_LAPACK; }

static void indefinite_and_singular_blocks(void **state)
{
    (void)state;
    int n = 12;
    double *lam = malloc(n * sizeof *lam), *A = malloc(n * n * sizeof *A), *g = malloc(n * sizeof *g),
           *d = malloc(n * sizeof *d);
    for (int i = 0; i < n; i++) lam[i] = -2 + 7.0 * i / (n - 1); /* [-2, 5], indefinite */
    tq_spectral(n, lam, 5, A);
    for (int i = 0; i < n; i++) g[i] = 1;
    qm_solve_event ev;
    /* raise_shift on: Cholesky succeeds once the shift passes 2 */
    qm_sched *s = make(QM_POLICY_CLASSICAL, 1, NULL);
    assert_int_equal(qm_sched_solve(s, 1, 0, n, A, 0, 1e-3, g, d, &ev), QM_OK);
    assert_int_equal(ev.shift_raised, 1);
    assert_true(ev.shift > 2 && ev.shift < 20);
    assert_true(ev.residual < 1e-10);
    assert_int_equal(ev.kappa_kind, QM_KAPPA_LAPACK); /* not psd: no Gershgorin routing */
    qm_sched_free(s);
    /* raise_shift off: LDL^T solves the indefinite system as given */
    s = make(QM_POLICY_CLASSICAL, 1, no_raise);
    assert_int_equal(qm_sched_solve(s, 1, 0, n, A, 0, 1e-3, g, d, &ev), QM_OK);
    assert_int_equal(ev.shift_raised, 0);
    assert_true(ev.shift == 1e-3);
    assert_true(ev.residual < 1e-10);
    assert_true(isnan(ev.kappa_lapack));
    assert_int_equal(ev.kappa_kind, QM_KAPPA_FRO);
    /* singular without shift: QM_ESINGULAR */
    double *S = calloc(n * n, sizeof *S);
    for (int i = 0; i < n; i++) S[i * n + i] = i < 2 ? 0 : 1; /* exactly singular */
    assert_int_equal(qm_sched_solve(s, 1, 0, n, S, 1, 0, g, d, &ev), QM_ESINGULAR);
    assert_non_null(strstr(qm_error(), "singular"));
    qm_sched_free(s);
    /* singular PSD with raising: shifted to positive definite and recorded */
    s = make(QM_POLICY_CLASSICAL, 1, NULL);
    assert_int_equal(qm_sched_solve(s, 1, 0, n, S, 1, 0, g, d, &ev), QM_OK);
    assert_int_equal(ev.shift_raised, 1);
    assert_true(ev.shift > 0);
    assert_true(ev.residual < 1e-10);
    assert_true(ev.nnz_per_row == 1); /* zeros off the diagonal: counted, not assumed dense */
    qm_sched_free(s);
    /* non-finite entries are an error, not an endless shift raise (the lower triangle is
     * what the solve reads: A is symmetric) */
    S[5 * n] = NAN;
    s = make(QM_POLICY_CLASSICAL, 1, NULL);
    assert_int_equal(qm_sched_solve(s, 1, 4, n, S, 1, 0.1, g, d, &ev), QM_EINVAL);
    assert_non_null(strstr(qm_error(), "block 4"));
    assert_non_null(strstr(qm_error(), "entry (5,0) is nan"));
    qm_sched_free(s);
    /* routing by the dpocon estimate on a PSD block when asked */
    fixture f = make_fixture(10);
    s = make(QM_POLICY_QUANTUM, 0, lapack_routing);
    assert_int_equal(qm_sched_solve(s, 1, 0, f.n, f.A, 1, f.mu, f.g, f.d, &ev), QM_OK);
    assert_int_equal(ev.kappa_kind, QM_KAPPA_LAPACK);
    assert_true(ev.kappa_used == ev.kappa_lapack);
    /* the factor stays on the hybrid clock: only the triangular solves are replaced */
    assert_true(ev.hybrid_delta_ns <= -(ev.measured_classical_ns - ev.factor_ns) + 1e-9);
    qm_sched_free(s);
    free_fixture(&f);
    free(lam); free(A); free(g); free(d); free(S);
}

static double norm2(int n, const double *v)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i] * v[i];
    return sqrt(s);
}

/* An indefinite block whose negative eigenvalue the configured shift only just covers:
 * Cholesky succeeds, but B = A + mu I has an eigenvalue 1e-6 mu, and x = B^-1 g is 1e6
 * times longer than a shift-mu step. The curvature test raises the shift (to 10 mu, or to
 * mu/2 - l, l the Gershgorin or Wolkowicz-Styan bound on lambda_min, if that is smaller: it
 * passes by construction); a PSD block with a large
 * null space (eigenvalues exactly 0, so lambda_min(B) = mu) is left alone even when the
 * caller does not say it is PSD. */

static void near_singular_shift_is_raised(void **state)
{
    (void)state;
    int n = 16;
    double mu = 0.1;
    double *lam = malloc(n * sizeof *lam), *A = malloc(n * n * sizeof *A), *g = malloc(n * sizeof *g),
           *d = malloc(n * sizeof *d);
    for (int i = 0; i < n; i++) lam[i] = i == 0 ? -mu * (1 - 1e-6) : 1.0 + i;
    tq_spectral(n, lam, 11, A);
    for (int i = 0; i < n; i++) g[i] = cos(i + 0.5);
    double gn = norm2(n, g);
    qm_solve_event ev;
    qm_sched *s = make(QM_POLICY_CLASSICAL, 1, NULL);
    double want = fmin(10 * mu, 0.5 * mu - tq_lmin_lower_bound(n, A)); /* the next rung, capped by the bound */
    assert_int_equal(qm_sched_solve(s, 1, 0, n, A, 0, mu, g, d, &ev), QM_OK);
    assert_int_equal(ev.shift_raised, 1);
    assert_int_equal(ev.factorizations, 2); /* mu passed Cholesky, failed the test */
    assert_true(fabs(ev.shift - want) <= 1e-12 * want);
    assert_true(ev.residual < 1e-10);
    /* the bound the test promises: ||d|| <= 2 ||g|| / mu */
    if (!(norm2(n, d) <= 2 * gn / mu)) fail_msg("||d|| = %g > 2||g||/mu = %g", norm2(n, d), 2 * gn / mu);
    qm_sched_free(s);
    /* the QLSA gets the raised system too: its error is eps of a bounded solution */
    s = make(QM_POLICY_QUANTUM, 1, NULL);
    assert_int_equal(qm_sched_solve(s, 1, 0, n, A, 0, mu, g, d, &ev), QM_OK);
    assert_int_equal(ev.route, QM_ROUTE_QUANTUM);
    assert_true(fabs(ev.shift - want) <= 1e-12 * want);
    assert_true(norm2(n, d) <= 2 * gn / mu * 1.01);
    /* the raise needs the solve: on the quantum route nothing classical is replaced */
    assert_true(ev.hybrid_delta_ns <= ev.simulated_quantum_ns + 1e-9);
    qm_sched_free(s);
    /* raise_shift off: solved as given (the old behaviour, kept on request) */
    s = make(QM_POLICY_CLASSICAL, 1, no_raise);
    assert_int_equal(qm_sched_solve(s, 1, 0, n, A, 0, mu, g, d, &ev), QM_OK);
    assert_int_equal(ev.shift_raised, 0);
    assert_true(norm2(n, d) > 1e3 * gn / mu);
    qm_sched_free(s);
    /* PSD, rank 4: never raised, whatever psd says */
    for (int i = 0; i < n; i++) lam[i] = i < 4 ? 1.0 + i : 0;
    tq_spectral(n, lam, 12, A);
    for (int psd = 0; psd <= 1; psd++) {
        s = make(QM_POLICY_CLASSICAL, 1, NULL);
        assert_int_equal(qm_sched_solve(s, 1, 0, n, A, psd, mu, g, d, &ev), QM_OK);
        assert_int_equal(ev.shift_raised, 0);
        assert_true(ev.shift == mu);
        qm_sched_free(s);
    }
    free(lam); free(A); free(g); free(d);
}

static void prune_quarter(qm_sched_opts *o) { o->prune_ratio = 0.25; }

/* Pruning a low-rank PSD matrix (X X^T, X 12x3: what Gauss-Newton blocks look like) to 3
 * entries per row makes it indefinite: any kept path i-j-k whose (i,k) was dropped can be.
 * The QLSA's system then gets a raised shift; its direction stays bounded and is a
 * descent direction (LDL^T on the indefinite pruned matrix gave neither). */
static void pruned_indefinite_gets_shift(void **state)
{
    (void)state;
    int n = 12, r = 3;
    double *A = malloc(n * n * sizeof *A), *X = malloc(n * r * sizeof *X), *g = malloc(n * sizeof *g),
           *d = malloc(n * sizeof *d);
    uint64_t seed = 1;
    for (int i = 0; i < n * r; i++) X[i] = 2 * tq_uniform(&seed) - 1;
    double amax = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double v = 0;
            for (int k = 0; k < r; k++) v += X[i * r + k] * X[j * r + k];
            A[i * n + j] = v;
            amax = fmax(amax, fabs(v));
        }
    double mu = 5e-3 * amax;
    for (int i = 0; i < n; i++) g[i] = sin(3.0 * i + 1);
    double gn = norm2(n, g);
    qm_sched *s = make(QM_POLICY_QUANTUM, 1, prune_quarter);
    qm_solve_event ev;
    assert_int_equal(qm_sched_solve(s, 1, 0, n, A, 1, mu, g, d, &ev), QM_OK);
    assert_int_equal(ev.route, QM_ROUTE_QUANTUM);
    assert_int_equal(ev.shift_raised, 0); /* the unpruned system is PSD + shift */
    assert_true(ev.qlsa_extra_shift >= mu);
    double gd = 0;
    for (int i = 0; i < n; i++) gd += g[i] * d[i];
    assert_true(gd > 0); /* d is subtracted: a descent direction */
    if (!(norm2(n, d) <= 2 * gn / mu * 1.01)) fail_msg("||d|| = %g > 2||g||/mu = %g", norm2(n, d), 2 * gn / mu);
    print_message("pruned to 3 of 12: extra shift %g on top of %g, ||d|| %.3g (bound %.3g)\n", ev.qlsa_extra_shift,
                  ev.shift, norm2(n, d), 2 * gn / mu);
    qm_sched_free(s);
    free(A); free(X); free(g); free(d);
}

static void pruned_quantum_route(void **state)
{
    (void)state;
    fixture f = make_fixture(20);
    qm_sched *s = make(QM_POLICY_QUANTUM, 1, prune_quarter);
    qm_solve_event ev;
    assert_int_equal(qm_sched_solve(s, 1, 0, f.n, f.A, 1, f.mu, f.g, f.d, &ev), QM_OK);
    assert_true(ev.nnz_per_row >= 1 && ev.nnz_per_row <= 6); /* k = 5, plus the diagonal */
    /* the QLSA solved the pruned system: further from the exact solution than eps */
    double e = rel_diff(f.n, f.d, f.x);
    assert_true(e > 1e-2);
    print_message("prune 0.25: d = %g, error vs unpruned solution %.3g, residual %.3g\n", ev.nnz_per_row, e, ev.residual);
    qm_sched_free(s);
    free_fixture(&f);
}

static void cg_solver(qm_sched_opts *o) { o->classical = QM_SOLVER_CG; }
static void exact_prune(qm_sched_opts *o) { o->exact_kappa_max_n = 64; o->prune_ratio = 0.25; }

/* No allocation inside a training step: once a block size has been solved, solving it
 * (or a smaller one) again allocates nothing, whatever path the options take: every
 * estimator with the pruned quantum route, LDL^T with the LU bound on an indefinite
 * block, conjugate gradient. The first solve must allocate (the counter works), and the
 * repeat must give the same classical direction (the scratch is not stale). */
static void repeat_solve_allocates_nothing(void **state)
{
    (void)state;
    fixture f = make_fixture(24);
    int n = 12;
    double *lam = malloc(n * sizeof *lam), *Aind = malloc(n * n * sizeof *Aind);
    for (int i = 0; i < n; i++) lam[i] = -2 + 7.0 * i / (n - 1);
    tq_spectral(n, lam, 5, Aind);
    double d1[24];
    struct { const char *what; qm_policy p; void (*tweak)(qm_sched_opts *); int n; const double *A; int psd; } cases[] = {
        { "exact + prune, quantum", QM_POLICY_QUANTUM, exact_prune, f.n, f.A, 1 },
        { "exact, classical", QM_POLICY_CLASSICAL, exact_on, f.n, f.A, 1 },
        { "ldlt, indefinite", QM_POLICY_CLASSICAL, no_raise, n, Aind, 0 },
        { "cg", QM_POLICY_HYBRID, cg_solver, f.n, f.A, 1 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        qm_sched *s = make(cases[c].p, 1, cases[c].tweak);
        qm_solve_event ev;
        int m = cases[c].n;
        size_t t0 = prof_mem_total();
        assert_int_equal(qm_sched_solve(s, 1, 0, m, cases[c].A, cases[c].psd, f.mu, f.g, d1, &ev), QM_OK);
        size_t t1 = prof_mem_total();
        if (!(t1 > t0)) fail_msg("%s: the first solve allocated nothing (%zu bytes): counter not working?", cases[c].what, t1 - t0);
        assert_int_equal(qm_sched_solve(s, 2, 0, m, cases[c].A, cases[c].psd, f.mu, f.g, f.d, &ev), QM_OK);
        assert_int_equal(qm_sched_solve(s, 3, 0, m / 2, cases[c].A, cases[c].psd, f.mu, f.g, f.d, &ev), QM_OK);
        assert_int_equal(qm_sched_solve(s, 4, 0, m, cases[c].A, cases[c].psd, f.mu, f.g, f.d, &ev), QM_OK);
        size_t t2 = prof_mem_total();
        if (t2 != t1) fail_msg("%s: repeat solves allocated %zu bytes", cases[c].what, t2 - t1);
        if (ev.route == QM_ROUTE_CLASSICAL) assert_memory_equal(d1, f.d, (size_t)m * sizeof *d1);
        print_message("%s: first solve allocated %zu bytes, repeats 0\n", cases[c].what, t1 - t0);
        qm_sched_free(s);
    }
    free(lam); free(Aind);
    free_fixture(&f);
}

static void bad_options(void **state)
{
    (void)state;
    qm_sched_opts o = qm_sched_defaults();
    o.model = &flat_model;
    qm_sched *s;
    o.precision = 0;
    assert_int_equal(qm_sched_create(&o, &s), QM_EINVAL);
    assert_non_null(strstr(qm_error(), "quantum.precision"));
    o = qm_sched_defaults();
    o.model = &flat_model;
    o.prune_ratio = 1.5;
    assert_int_equal(qm_sched_create(&o, &s), QM_EINVAL);
    assert_non_null(strstr(qm_error(), "prune_ratio"));
}

int test_quantum_sched(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decide_table),
        cmocka_unit_test(solve_classical_event),
        cmocka_unit_test(solve_quantum_error_and_clock),
        cmocka_unit_test(solve_threshold_and_hybrid),
        cmocka_unit_test(indefinite_and_singular_blocks),
        cmocka_unit_test(pruned_quantum_route),
        cmocka_unit_test(near_singular_shift_is_raised),
        cmocka_unit_test(pruned_indefinite_gets_shift),
        cmocka_unit_test(repeat_solve_allocates_nothing),
        cmocka_unit_test(bad_options),
    };
    return cmocka_run_group_tests_name("quantum_sched", tests, NULL, NULL);
}
