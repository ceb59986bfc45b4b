/* sched.c — the Q-Newton scheduler: for each block it factors, estimates kappa, predicts
 * classical (measured cost model) and quantum (query count) time, routes, and records. */
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../profiler/profiler.h"

struct qm_sched {
    qm_sched_opts o;
    qm_chol_model model;
    uint64_t rng;
    int cap;                 /* workspaces hold cap x cap */
    double *B, *L, *P, *S, *x, *t;  /* P: pruned matrix, S: it shifted (prune_ratio < 1 only) */
    double *w;               /* the estimators', solvers' and pruning's scratch: wcap doubles */
    size_t wcap;
};

qm_sched_opts qm_sched_defaults(void)
{
    return (qm_sched_opts){ .policy = QM_POLICY_HYBRID, .kappa_max = 1e4, .precision = 1e-2,
                            .query_time_ns = 1.0, .readout = QM_READOUT_NONE,
                            .exact_kappa_max_n = 0, .prune_ratio = 1.0,
                            .routing = QM_KAPPA_AUTO, .raise_shift = 1,
                            .classical = QM_SOLVER_CHOLESKY, .seed = 1, .model = NULL };
}

qm_route qm_decide(qm_policy p, double kappa, double kappa_max, double pred_quantum_ns,
                   double pred_classical_ns)
{
    switch (p) {
    case QM_POLICY_QUANTUM: return QM_ROUTE_QUANTUM;
    case QM_POLICY_THRESHOLD: return kappa <= kappa_max ? QM_ROUTE_QUANTUM : QM_ROUTE_CLASSICAL;
    case QM_POLICY_HYBRID:
        return kappa <= kappa_max && pred_quantum_ns < pred_classical_ns ? QM_ROUTE_QUANTUM
                                                                          : QM_ROUTE_CLASSICAL;
    case QM_POLICY_CLASSICAL:
    default: return QM_ROUTE_CLASSICAL;
    }
}

int qm_sched_create(const qm_sched_opts *o, qm_sched **out)
{
    *out = NULL;
    if ((unsigned)o->policy > QM_POLICY_HYBRID) return qm_fail(QM_EINVAL, "quantum.policy: unknown value %d", (int)o->policy);
    if (!(o->precision > 0 && o->precision < 1))
        return qm_fail(QM_EINVAL, "quantum.precision = %g: expected 0 < eps < 1", o->precision);
    if (!(o->query_time_ns >= 0)) return qm_fail(QM_EINVAL, "quantum.query_time_ns = %g: expected >= 0", o->query_time_ns);
    if (!(o->kappa_max >= 1)) return qm_fail(QM_EINVAL, "quantum.kappa_max = %g: expected >= 1", o->kappa_max);
    if (!(o->prune_ratio > 0 && o->prune_ratio <= 1))
        return qm_fail(QM_EINVAL, "newton.prune_ratio = %g: expected 0 < r <= 1", o->prune_ratio);
    qm_sched *s = prof_calloc(1, sizeof *s);
    if (!s) return qm_fail(QM_ENOMEM, "scheduler: out of memory");
    s->o = *o;
    s->rng = o->seed ^ 0x51a7e5c0ffee1234ull;
    if (o->model) s->model = *o->model;
    else {
        /* Every policy predicts classical time: the events record it either way. */
        int rc = qm_chol_model_load(NULL, &s->model, NULL);
        if (rc) { prof_free(s); return rc; }
    }
    s->o.model = NULL;
    *out = s;
    return QM_OK;
}

void qm_sched_free(qm_sched *s)
{
    if (!s) return;
    prof_free(s->B); prof_free(s->L); prof_free(s->P); prof_free(s->S); prof_free(s->x); prof_free(s->t);
    prof_free(s->w);
    prof_free(s);
}

const qm_chol_model *qm_sched_model(const qm_sched *s) { return &s->model; }

/* Scratch one solve of size n may need: only what these options can reach (the LAPACK
 * workspace queries allocate nothing, and dsyevd's and dsysv's optima are asked for this
 * n rather than assumed to grow with n). */
static size_t scratch_need(const qm_sched_opts *o, int n)
{
    size_t need = qm_kappa_lapack_chol_work(n);
    if (n <= o->exact_kappa_max_n && qm_kappa_exact_work(n) > need) need = qm_kappa_exact_work(n);
    /* Only with raise_shift off does a block stay indefinite: LU bound and LDL^T. */
    if (!o->raise_shift && qm_kappa_fro_work(n) > need) need = qm_kappa_fro_work(n);
    if (!o->raise_shift && qm_solve_ldlt_work(n) > need) need = qm_solve_ldlt_work(n);
    if (o->classical == QM_SOLVER_CG && qm_solve_cg_work(n) > need) need = qm_solve_cg_work(n);
    if (o->prune_ratio < 1 && qm_prune_rows_work(n) > need) need = qm_prune_rows_work(n);
    return need;
}

static int reserve(qm_sched *s, int n)
{
    size_t need = scratch_need(&s->o, n);
    if (need > s->wcap) {
        prof_free(s->w);
        s->w = prof_malloc(need * sizeof(double));
        s->wcap = s->w ? need : 0;
        if (!s->w) return qm_fail(QM_ENOMEM, "scheduler: out of memory for a %dx%d block's scratch", n, n);
    }
    if (n <= s->cap) return QM_OK;
    size_t nn = (size_t)n * n;
    prof_free(s->B); prof_free(s->L); prof_free(s->P); prof_free(s->S); prof_free(s->x); prof_free(s->t);
    int pr = s->o.prune_ratio < 1;
    s->B = prof_malloc(nn * sizeof(double));
    s->L = prof_malloc(nn * sizeof(double));
    s->P = pr ? prof_malloc(nn * sizeof(double)) : NULL;
    s->S = pr ? prof_malloc(nn * sizeof(double)) : NULL;
    s->x = prof_malloc((size_t)n * sizeof(double));
    s->t = prof_malloc((size_t)n * sizeof(double));
    if (!s->B || !s->L || (pr && (!s->P || !s->S)) || !s->x || !s->t) {
        s->cap = 0;
        return qm_fail(QM_ENOMEM, "scheduler: out of memory for a %dx%d block", n, n);
    }
    s->cap = n;
    return QM_OK;
}

static double max_abs(int n, const double *A)
{
    double m = 0;
    for (size_t i = 0; i < (size_t)n * n; i++) m = fmax(m, fabs(A[i]));
    return m;
}

static void shifted(int n, const double *A, double mu, double *B)
{
    memcpy(B, A, (size_t)n * n * sizeof *B);
    for (int i = 0; i < n; i++) B[(size_t)i * n + i] += mu;
}

/* Factors B = M + mu I (B, L: n x n workspaces) and, when check is on, solves B x = g,
 * raising mu (x10, or to first_raise from a zero shift) until B is positive definite and
 * the direction passes the curvature test x'Bx / x'x = g'x / x'x >= curv_floor.
 * Why the test: for a positive semi-definite M, x'Bx/x'x >= lambda_min(B) >= mu, so it
 * never fires; for an indefinite M, Cholesky succeeds as soon as mu > -lambda_min(M),
 * which can leave lambda_min(B) arbitrarily close to 0 and x = B^-1 g arbitrarily long
 * (one such solve, clipped to +-clip, wrecks a whole layer). Passing it bounds the step
 * as a shift of 2 curv_floor would: ||x|| <= ||g|| / curv_floor. It costs O(n), given x.
 * Returns 1 if B is positive definite (x solved if check), 0 if not (raise off or 80
 * tries), with *mu and *raised updated. */
static int shift_until_safe(int n, const double *M, double first_raise, int raise, int check,
                            double curv_floor, const double *g, double *mu, int *raised,
                            double *B, double *L, double *x)
{
    double amax = max_abs(n, M);
    for (int tries = 0; tries < 80; tries++) {
        shifted(n, M, *mu, B);
        if (qm_cholesky(n, B, L, NULL) == QM_OK) {
            if (!check) return 1;
            memcpy(x, g, (size_t)n * sizeof *x);
            qm_potrs(n, L, x);
            double gx = cblas_ddot(n, g, 1, x, 1), xx = cblas_ddot(n, x, 1, x, 1);
            if (!raise || xx == 0 || gx >= curv_floor * xx) return 1;
        } else if (!raise) {
            return 0;
        }
        double floor_mu = fmax(first_raise, fmax(1e-12 * amax, 1e-300));
        *mu = *mu < floor_mu ? floor_mu : *mu * 10;
        *raised = 1;
    }
    return 0;
}

int qm_sched_solve(qm_sched *s, long step, int block, int n, const double *A, int psd,
                   double shift, const double *g, double *d, qm_solve_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->step = step;
    ev->block = block;
    ev->n = n;
    ev->kappa_fro = ev->kappa_lapack = ev->kappa_gersh = ev->kappa_exact = ev->kappa_used = NAN;
    ev->route = QM_ROUTE_CLASSICAL;
    if (n <= 0) return qm_fail(QM_EINVAL, "block %d: size %d, expected >= 1", block, n);
    if (!(shift >= 0)) return qm_fail(QM_EINVAL, "block %d: shift %g, expected >= 0", block, shift);
    for (size_t i = 0; i < (size_t)n * n; i++)
        if (!isfinite(A[i]))
            return qm_fail(QM_EINVAL, "block %d (%dx%d): curvature entry (%zu,%zu) is %g", block, n, n,
                           i / n, i % n, A[i]);
    int rc = reserve(s, n);
    if (rc) return rc;
    const qm_sched_opts *o = &s->o;

    /* 1. Factor B = A + mu I, raising mu until it is positive definite and, when A may be
     * indefinite, until the direction passes the curvature test (shift_until_safe): the
     * shift is chosen with the solve, so that solve is part of the factor cost here. Failed
     * attempts are part of the classical cost: a classical solver pays them too. */
    double mu = shift;
    int check = !psd && o->raise_shift;
    uint64_t t0 = prof_now_ns();
    int pd = shift_until_safe(n, A, 0, o->raise_shift, check, 0.5 * shift, g, &mu, &ev->shift_raised,
                              s->B, s->L, s->x);
    ev->factor_ns = (double)(prof_now_ns() - t0);
    ev->shift = mu;
    if (!pd && o->raise_shift)
        return qm_fail(QM_ENOTPD, "block %d (%dx%d): not positive definite even with shift %g", block, n, n, mu);

    /* 2. Every estimator, each timed. */
    if (pd) {
        ev->kappa_fro = qm_kappa_fro_chol(n, s->B, s->L, &ev->est_fro_ns);
        ev->kappa_lapack = qm_kappa_lapack_chol(n, s->B, s->L, &ev->est_lapack_ns, s->w);
    } else {
        double k;
        if (qm_kappa_fro(n, s->B, &k, &ev->est_fro_ns, s->w) == QM_OK) ev->kappa_fro = k;
    }
    ev->kappa_gersh = psd && mu > 0 ? qm_kappa_gersh_psd(n, A, mu, &ev->est_gersh_ns)
                                    : qm_kappa_gersh_sym(n, s->B, &ev->est_gersh_ns);
    if (n <= o->exact_kappa_max_n) {
        double k;
        if (qm_kappa_exact(n, s->B, &k, &ev->est_exact_ns, s->w) == QM_OK) ev->kappa_exact = k;
    }
    ev->est_ns = ev->est_fro_ns + ev->est_lapack_ns + ev->est_gersh_ns + ev->est_exact_ns;

    qm_kappa_kind kind = o->routing;
    if (kind == QM_KAPPA_AUTO) kind = psd && mu > 0 ? QM_KAPPA_GERSH : QM_KAPPA_LAPACK;
    double kused = kind == QM_KAPPA_FRO ? ev->kappa_fro : kind == QM_KAPPA_LAPACK ? ev->kappa_lapack
                 : kind == QM_KAPPA_GERSH ? ev->kappa_gersh : ev->kappa_exact;
    if (isnan(kused)) { kind = QM_KAPPA_FRO; kused = ev->kappa_fro; }
    ev->kappa_kind = kind;
    ev->kappa_used = kused;
    /* Estimates read off the factor cost the factor, and so does a shift chosen by the
     * curvature test (with its solve): on the quantum route they stay. */
    int needs_factor = kind == QM_KAPPA_FRO || kind == QM_KAPPA_LAPACK || check;

    /* 3. The classical solve, really run. */
    t0 = prof_now_ns();
    if (!pd) {
        rc = qm_solve_ldlt(n, s->B, g, s->x, NULL, s->w);
        if (rc) return qm_fail(rc, "block %d: %s", block, qm_error());
    } else if (o->classical == QM_SOLVER_CG) {
        rc = qm_solve_cg(n, s->B, g, s->x, 1e-10, 10 * n + 100, &ev->cg_iters, NULL, s->w);
        if (rc && rc != QM_ENOCONV) return qm_fail(rc, "block %d: %s", block, qm_error());
    } else if (!check) {
        qm_cholesky_solve(n, s->L, g, s->x, NULL);
    }
    double solve_ns = (double)(prof_now_ns() - t0);
    ev->measured_classical_ns = (o->classical == QM_SOLVER_CG && pd ? 0 : ev->factor_ns) + solve_ns;

    /* 4. Predictions. The QLSA gets the (pruned) shifted matrix. */
    const double *Q = s->B;
    int dnz;
    if (o->prune_ratio < 1 && o->policy != QM_POLICY_CLASSICAL) {
        int k = (int)floor(o->prune_ratio * n);
        if (k < 1) k = 1;
        dnz = qm_prune_rows(n, s->B, k, s->P, s->w);
        if (dnz < 0) return dnz;
        Q = s->P;
    } else {
        dnz = qm_max_row_nnz(n, s->B);
    }
    ev->nnz_per_row = dnz;
    ev->alpha = dnz * max_abs(n, Q);
    ev->queries = qm_query_count(ev->alpha, kused, o->precision);
    ev->readout_reps = o->readout == QM_READOUT_TOMOGRAPHY ? qm_tomography_reps(n, o->precision) : 1;
    ev->pred_quantum_ns = ev->queries * ev->readout_reps * o->query_time_ns;
    if (isnan(ev->pred_quantum_ns)) ev->pred_quantum_ns = INFINITY;
    ev->pred_classical_ns = s->model.valid ? qm_chol_model_predict(&s->model, n) : NAN;
    ev->route = qm_decide(o->policy, kused, o->kappa_max, ev->pred_quantum_ns, ev->pred_classical_ns);
    if (ev->route == QM_ROUTE_QUANTUM && !isfinite(ev->pred_quantum_ns)) ev->route = QM_ROUTE_CLASSICAL;

    /* 5. The direction used. The QLSA's output is simulated: the exact solution of the
     * system it was given, plus its precision error. */
    int routed = 0;
    if (ev->route == QM_ROUTE_QUANTUM) {
        uint64_t ts = prof_now_ns();
        const double *xe = s->x;
        int ok = 1;
        if (Q != s->B) {
            /* Pruning can make the matrix indefinite or nearly singular, and then its
             * solution is no Newton direction at all (an ascent, or one direction blown up
             * that the QLSA's error then spreads over every coordinate). The pruned system
             * gets the classical system's treatment: its shift is raised (from mu, x10)
             * until it is positive definite and its direction passes the curvature test. */
            double extra = 0;
            int raised = 0;
            ok = shift_until_safe(n, Q, mu, 1, 1, 0.5 * shift, g, &extra, &raised, s->S, s->L, s->t);
            ev->qlsa_extra_shift = extra;
            xe = s->t;
        }
        if (ok) {
            qm_qlsa_output(n, xe, o->precision, &s->rng, d);
            double overhead = (double)(prof_now_ns() - ts);
            ev->simulated_quantum_ns = ev->pred_quantum_ns;
            double replaced = ev->measured_classical_ns - (needs_factor ? ev->factor_ns : 0);
            if (replaced < 0) replaced = 0;
            ev->hybrid_delta_ns = ev->simulated_quantum_ns - replaced - overhead;
            routed = 1;
        } else {
            /* The pruned system could not be made positive definite: no QLSA takes it.
             * The failed attempt is simulation work, so it stays off the hybrid clock. */
            ev->route = QM_ROUTE_CLASSICAL;
            ev->pred_quantum_ns = INFINITY;
            ev->hybrid_delta_ns = -(double)(prof_now_ns() - ts);
        }
    }
    if (!routed) memcpy(d, s->x, (size_t)n * sizeof *d);

    /* 6. Residual of the direction used against the unpruned system. */
    double gn = cblas_dnrm2(n, g, 1);
    memcpy(s->t, g, (size_t)n * sizeof *s->t);
    cblas_dsymv(CblasRowMajor, CblasLower, n, 1.0, s->B, n, d, 1, -1.0, s->t, 1);
    ev->residual = gn > 0 ? cblas_dnrm2(n, s->t, 1) / gn : cblas_dnrm2(n, s->t, 1);
    return QM_OK;
}
