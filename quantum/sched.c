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
    double *B, *L, *P, *x, *t;
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
    qm_sched *s = calloc(1, sizeof *s);
    if (!s) return qm_fail(QM_ENOMEM, "scheduler: out of memory");
    s->o = *o;
    s->rng = o->seed ^ 0x51a7e5c0ffee1234ull;
    if (o->model) s->model = *o->model;
    else {
        /* Every policy predicts classical time: the events record it either way. */
        int rc = qm_chol_model_load(NULL, &s->model, NULL);
        if (rc) { free(s); return rc; }
    }
    s->o.model = NULL;
    *out = s;
    return QM_OK;
}

void qm_sched_free(qm_sched *s)
{
    if (!s) return;
    free(s->B); free(s->L); free(s->P); free(s->x); free(s->t);
    free(s);
}

const qm_chol_model *qm_sched_model(const qm_sched *s) { return &s->model; }

static int reserve(qm_sched *s, int n)
{
    if (n <= s->cap) return QM_OK;
    size_t nn = (size_t)n * n;
    free(s->B); free(s->L); free(s->P); free(s->x); free(s->t);
    s->B = malloc(nn * sizeof(double));
    s->L = malloc(nn * sizeof(double));
    s->P = s->o.prune_ratio < 1 ? malloc(nn * sizeof(double)) : NULL;
    s->x = malloc((size_t)n * sizeof(double));
    s->t = malloc((size_t)n * sizeof(double));
    if (!s->B || !s->L || (s->o.prune_ratio < 1 && !s->P) || !s->x || !s->t) {
        s->cap = 0;
        return qm_fail(QM_ENOMEM, "scheduler: out of memory for a %dx%d block", n, n);
    }
    s->cap = n;
    return QM_OK;
}

static void shifted(int n, const double *A, double mu, double *B)
{
    memcpy(B, A, (size_t)n * n * sizeof *B);
    for (int i = 0; i < n; i++) B[(size_t)i * n + i] += mu;
}

static int max_row_nnz(int n, const double *A)
{
    int d = 0;
    for (int i = 0; i < n; i++) {
        int c = 0;
        for (int j = 0; j < n; j++) c += A[(size_t)i * n + j] != 0;
        if (c > d) d = c;
    }
    return d;
}

static double max_abs(int n, const double *A)
{
    double m = 0;
    for (size_t i = 0; i < (size_t)n * n; i++) m = fmax(m, fabs(A[i]));
    return m;
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

    /* 1. Factor B = A + mu I, raising mu until it is positive definite. Failed attempts
     * are part of the classical cost: a classical solver pays them too. */
    double amax = max_abs(n, A), mu = shift;
    int pd = 0;
    uint64_t t0 = prof_now_ns();
    for (int tries = 0; tries < 80; tries++) {
        shifted(n, A, mu, s->B);
        if (qm_cholesky(n, s->B, s->L, NULL) == QM_OK) { pd = 1; break; }
        if (!o->raise_shift) break;
        double floor_mu = fmax(1e-12 * amax, 1e-300);
        mu = mu < floor_mu ? floor_mu : mu * 10;
        ev->shift_raised = 1;
    }
    ev->factor_ns = (double)(prof_now_ns() - t0);
    ev->shift = mu;
    if (!pd && o->raise_shift)
        return qm_fail(QM_ENOTPD, "block %d (%dx%d): not positive definite even with shift %g", block, n, n, mu);

    /* 2. Every estimator, each timed. */
    if (pd) {
        ev->kappa_fro = qm_kappa_fro_chol(n, s->B, s->L, &ev->est_fro_ns);
        ev->kappa_lapack = qm_kappa_lapack_chol(n, s->B, s->L, &ev->est_lapack_ns);
    } else {
        double k;
        if (qm_kappa_fro(n, s->B, &k, &ev->est_fro_ns) == QM_OK) ev->kappa_fro = k;
    }
    ev->kappa_gersh = psd && mu > 0 ? qm_kappa_gersh_psd(n, A, mu, &ev->est_gersh_ns)
                                    : qm_kappa_gersh_sym(n, s->B, &ev->est_gersh_ns);
    if (n <= o->exact_kappa_max_n) {
        double k;
        if (qm_kappa_exact(n, s->B, &k, &ev->est_exact_ns) == QM_OK) ev->kappa_exact = k;
    }
    ev->est_ns = ev->est_fro_ns + ev->est_lapack_ns + ev->est_gersh_ns + ev->est_exact_ns;

    qm_kappa_kind kind = o->routing;
    if (kind == QM_KAPPA_AUTO) kind = psd && mu > 0 ? QM_KAPPA_GERSH : QM_KAPPA_LAPACK;
    double kused = kind == QM_KAPPA_FRO ? ev->kappa_fro : kind == QM_KAPPA_LAPACK ? ev->kappa_lapack
                 : kind == QM_KAPPA_GERSH ? ev->kappa_gersh : ev->kappa_exact;
    if (isnan(kused)) { kind = QM_KAPPA_FRO; kused = ev->kappa_fro; }
    ev->kappa_kind = kind;
    ev->kappa_used = kused;
    /* Estimates read off the factor cost the factor: on the quantum route it stays. */
    int needs_factor = kind == QM_KAPPA_FRO || kind == QM_KAPPA_LAPACK;

    /* 3. The classical solve, really run. */
    t0 = prof_now_ns();
    if (!pd) {
        rc = qm_solve_ldlt(n, s->B, g, s->x, NULL);
        if (rc) return qm_fail(rc, "block %d: %s", block, qm_error());
    } else if (o->classical == QM_SOLVER_CG) {
        rc = qm_solve_cg(n, s->B, g, s->x, 1e-10, 10 * n + 100, &ev->cg_iters, NULL);
        if (rc && rc != QM_ENOCONV) return qm_fail(rc, "block %d: %s", block, qm_error());
    } else {
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
        dnz = qm_prune_rows(n, s->B, k, s->P);
        if (dnz < 0) return dnz;
        Q = s->P;
    } else {
        dnz = max_row_nnz(n, s->B);
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
            ok = qm_solve_cholesky(n, Q, g, s->t, NULL) == QM_OK || qm_solve_ldlt(n, Q, g, s->t, NULL) == QM_OK;
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
            /* The pruned system is singular: no QLSA takes it. The failed attempt is
             * simulation work, so it stays off the hybrid clock. */
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
