/* sched.c — the Q-Newton scheduler: for each block it factors, estimates kappa, predicts
 * classical (measured cost model) and quantum (query count) time, routes, and records. */
#include "internal.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../profiler/profiler.h"

struct qm_sched {
    qm_sched_opts o;
    qm_chol_model model;
    uint64_t rng;
    int cap;                 /* workspaces hold cap x cap */
    double *B, *L, *P, *x, *t;  /* B: the shifted block, built only where a path needs it whole;
                                 * L: its factor; P: the pruned matrix (prune_ratio < 1 only) */
    double *r;               /* [cap] off-diagonal absolute row sums of the block (the scan) */
    int64_t *nz;             /* [cap] off-diagonal nonzeros per row (the scan) */
    double *eig;             /* [cap] eigenvalues of the block (exact estimator on only) */
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
    prof_free(s->B); prof_free(s->L); prof_free(s->P); prof_free(s->x); prof_free(s->t);
    prof_free(s->r); prof_free(s->nz); prof_free(s->eig);
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
    prof_free(s->B); prof_free(s->L); prof_free(s->P); prof_free(s->x); prof_free(s->t);
    prof_free(s->r); prof_free(s->nz); prof_free(s->eig);
    int pr = s->o.prune_ratio < 1;
    s->B = prof_malloc(nn * sizeof(double));
    s->L = prof_malloc(nn * sizeof(double));
    s->P = pr ? prof_malloc(nn * sizeof(double)) : NULL;
    s->x = prof_malloc((size_t)n * sizeof(double));
    s->t = prof_malloc((size_t)n * sizeof(double));
    s->r = prof_malloc((size_t)n * sizeof(double));
    s->nz = prof_malloc((size_t)n * sizeof(int64_t));
    s->eig = s->o.exact_kappa_max_n > 0 ? prof_malloc((size_t)n * sizeof(double)) : NULL;
    if (!s->B || !s->L || (pr && !s->P) || !s->x || !s->t || !s->r || !s->nz ||
        (s->o.exact_kappa_max_n > 0 && !s->eig)) {
        s->cap = 0;
        return qm_fail(QM_ENOMEM, "scheduler: out of memory for a %dx%d block", n, n);
    }
    /* Touched here, once: the first write to fresh pages faults them in (tens of ms for a
     * 1024 block on a VM), which belongs to setting up, not to the first solve's timings. */
    memset(s->L, 0, nn * sizeof(double));
    memset(s->B, 0, nn * sizeof(double));
    s->cap = n;
    return QM_OK;
}

static double max_abs(int n, const double *A)
{
    double m = 0;
    for (size_t i = 0; i < (size_t)n * n; i++) {
        double v = fabs(A[i]);
        m = v > m ? v : m; /* not fmax: its NaN rules keep it scalar and several times slower */
    }
    return m;
}

/* B = A + mu I, whole, from A's lower triangle (the only one the solve reads). */
static void shifted(int n, const double *A, double mu, double *B)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) B[(size_t)i * n + j] = B[(size_t)j * n + i] = A[(size_t)i * n + j];
        B[(size_t)i * n + i] = A[(size_t)i * n + i] + mu;
    }
}

/* ---- the scan: one pass over the block -------------------------------------------------
 * What the shift choice, the estimators and the QLSA's alpha need of the matrix is a row
 * sum, a maximum, a sum of squares or a count over the off-diagonal entries; one pass over
 * the lower triangle (all the solve reads: A is symmetric) gathers them all and copies it
 * (the factorisation's input), so nothing else reads the block before dpotrf. Row i's
 * entries A_ij, j < i, count for row i and, by symmetry, for row j (added to r[j]).
 * In GCC vector extensions of two doubles (one SSE2 register on the x86-64 baseline; wider
 * ones compile to stack traffic without AVX), two of each per step: -O2 does not vectorise
 * floating-point reductions, and a scalar pass costs a quarter of dpotrf at n = 256. */

typedef double v2d __attribute__((vector_size(16)));
typedef int64_t v2i __attribute__((vector_size(16)));

#if defined(__SSE2__)
/* maxpd: one instruction where the portable select below takes four. */
static inline v2d vmax(v2d a, v2d b) { return (v2d)_mm_max_pd((__m128d)a, (__m128d)b); }
#else
static inline v2d vmax(v2d a, v2d b)
{
    v2i gt = a > b;
    return (v2d)((gt & (v2i)a) | (~gt & (v2i)b));
}
#endif

typedef struct {
    double sum, ssq, max, min; /* of |a_j|, a_j^2, |a_j|, |a_j| over the row segment */
} row_stats;

#if defined(__SSE2__)
static inline v2d vmin(v2d a, v2d b) { return (v2d)_mm_min_pd((__m128d)a, (__m128d)b); }
#else
static inline v2d vmin(v2d a, v2d b)
{
    v2i lt = a < b;
    return (v2d)((lt & (v2i)a) | (~lt & (v2i)b));
}
#endif

/* Row i's lower segment a[0..i): copied to out, its sums returned, and |a_j| added to
 * col[j] (row j's sum, by symmetry). Zeros are only detected here (the minimum |a_j|):
 * counting them per row and column would cost a third of the pass for the dense blocks
 * that have none. The accumulators are locals: stores through out or col could alias
 * them and force every one through memory. */
static row_stats scan_lower_row(const double *restrict a, double *restrict out, int len, double *restrict col)
{
    const v2i absmask = { INT64_MAX, INT64_MAX };
    const v2d zero = { 0, 0 }, inf = { INFINITY, INFINITY };
    v2d sum0 = zero, sum1 = zero, ssq0 = zero, ssq1 = zero, mx0 = zero, mx1 = zero, mn0 = inf, mn1 = inf;
    int j = 0;
    for (; j + 4 <= len; j += 4) {
        v2d v0, v1, c0, c1;
        memcpy(&v0, a + j, sizeof v0);
        memcpy(&v1, a + j + 2, sizeof v1);
        memcpy(out + j, &v0, sizeof v0);
        memcpy(out + j + 2, &v1, sizeof v1);
        v2d av0 = (v2d)((v2i)v0 & absmask), av1 = (v2d)((v2i)v1 & absmask);
        mx0 = vmax(av0, mx0);
        mx1 = vmax(av1, mx1);
        mn0 = vmin(av0, mn0);
        mn1 = vmin(av1, mn1);
        sum0 += av0;
        sum1 += av1;
        ssq0 += v0 * v0;
        ssq1 += v1 * v1;
        memcpy(&c0, col + j, sizeof c0);
        memcpy(&c1, col + j + 2, sizeof c1);
        c0 += av0;
        c1 += av1;
        memcpy(col + j, &c0, sizeof c0);
        memcpy(col + j + 2, &c1, sizeof c1);
    }
    v2d sum = sum0 + sum1, ssq = ssq0 + ssq1, mx = vmax(mx0, mx1), mn = vmin(mn0, mn1);
    row_stats r = { sum[0] + sum[1], ssq[0] + ssq[1], mx[0] > mx[1] ? mx[0] : mx[1], mn[0] < mn[1] ? mn[0] : mn[1] };
    for (; j < len; j++) {
        double v = a[j], av = fabs(v);
        out[j] = v;
        if (av > r.max) r.max = av;
        if (av < r.min) r.min = av;
        r.sum += av;
        r.ssq += v * v;
        col[j] += av;
    }
    return r;
}

/* s->nz: the off-diagonal nonzeros of each row, counted (a second pass over the lower
 * triangle, only for a block that has zeros: ReLU's dead units give whole zero rows). */
static void count_nonzeros(qm_sched *s, int n, const double *A)
{
    for (int i = 0; i < n; i++) s->nz[i] = 0;
    for (int i = 0; i < n; i++) {
        const double *row = A + (size_t)i * n;
        for (int j = 0; j < i; j++) {
            int nz = row[j] != 0;
            s->nz[i] += nz;
            s->nz[j] += nz;
        }
    }
}

typedef struct {
    double off_max, off_ssq; /* max |A_ij| and sum A_ij^2 over i != j */
    double amax;             /* max |A_ij| */
    double lmin_lo;          /* a lower bound on lambda_min(A): the larger of Gershgorin's
                              * min_i (A_ii - r_i) and Wolkowicz-Styan's m - s sqrt(n-1),
                              * m = tr(A)/n, s^2 = ||A||_F^2/n - m^2 (tighter for dense blocks) */
    double dmin;             /* min_i A_ii */
    double R;                /* max_i (|A_ii| + r_i) = ||A||_1 */
} scan_t;

/* Scans the lower triangle of A (a non-finite entry is refused, naming it), fills s->r
 * (r_i, the off-diagonal absolute row sums) and s->nz, and copies it into s->L. */
static int scan_block(qm_sched *s, int block, int n, const double *A, scan_t *sc)
{
    double mx = 0, mn = INFINITY, ssq = 0;
    memset(s->r, 0, (size_t)n * sizeof *s->r);
    for (int i = 0; i < n; i++) {
        const double *row = A + (size_t)i * n;
        row_stats rs = scan_lower_row(row, s->L + (size_t)i * n, i, s->r);
        double d = row[i];
        if (!isfinite(rs.sum + rs.ssq + d)) /* a NaN or inf entry, or finite ones whose sums overflow */
            for (int j = 0; j <= i; j++)
                if (!isfinite(row[j]))
                    return qm_fail(QM_EINVAL, "block %d (%dx%d): curvature entry (%d,%d) is %g", block, n, n, i, j, row[j]);
        s->L[(size_t)i * n + i] = d;
        s->r[i] += rs.sum;
        mx = rs.max > mx ? rs.max : mx;
        mn = rs.min < mn ? rs.min : mn;
        ssq += 2 * rs.ssq;
    }
    if (mn == 0) count_nonzeros(s, n, A);
    else for (int i = 0; i < n; i++) s->nz[i] = n - 1;
    double dmax = 0, glo = INFINITY, tr = 0, dssq = 0;
    sc->dmin = INFINITY;
    sc->R = 0;
    for (int i = 0; i < n; i++) {
        double d = A[(size_t)i * n + i], r = s->r[i];
        dmax = fabs(d) > dmax ? fabs(d) : dmax;
        if (d - r < glo) glo = d - r;
        tr += d;
        dssq += d * d;
        if (d < sc->dmin) sc->dmin = d;
        if (fabs(d) + r > sc->R) sc->R = fabs(d) + r;
    }
    sc->off_max = mx;
    sc->off_ssq = ssq;
    double m = tr / n, s2 = (ssq + dssq) / n - m * m;
    sc->lmin_lo = fmax(glo, m - sqrt(fmax(s2, 0) * (n - 1))); /* fmax: a NaN (overflow) loses */
    sc->amax = mx > dmax ? mx : dmax;
    return QM_OK;
}

/* What depends on the shift, from the scan at O(n): B = A + mu I. */
typedef struct {
    double ssq, bmax;  /* ||B||_F^2 and max |B_ij| */
    double anorm;      /* ||B||_1 */
    double lo, hi;     /* Gershgorin disc edges of B */
    int dnz;           /* most nonzeros in a row of B */
} shifted_t;

static shifted_t shifted_stats(const qm_sched *s, int n, const double *A, double mu, const scan_t *sc)
{
    shifted_t t = { sc->off_ssq, sc->off_max, 0, INFINITY, -INFINITY, 0 };
    for (int i = 0; i < n; i++) {
        double b = A[(size_t)i * n + i] + mu, ab = fabs(b), r = s->r[i];
        int nz = (int)s->nz[i] + (b != 0);
        t.ssq += b * b;
        if (ab > t.bmax) t.bmax = ab;
        if (ab + r > t.anorm) t.anorm = ab + r;
        if (b - r < t.lo) t.lo = b - r;
        if (b + r > t.hi) t.hi = b + r;
        if (nz > t.dnz) t.dnz = nz;
    }
    return t;
}

/* ---- the shift and the factorisation ---------------------------------------------------- */

/* L = the lower triangle of M + mu I (copied from M unless L holds it already: the scan
 * copied it), then dpotrf (the _work form: the scan has checked for NaN already). 1 if
 * positive definite. */
static int factor_shifted(int n, const double *M, double mu, int copy, double *L)
{
    if (copy)
        for (int i = 0; i < n; i++) memcpy(L + (size_t)i * n, M + (size_t)i * n, (size_t)(i + 1) * sizeof *L);
    for (int i = 0; i < n; i++) L[(size_t)i * n + i] = M[(size_t)i * n + i] + mu;
    return LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', n, L, n) == 0;
}

typedef struct {
    double mu;          /* in: the first shift to factor with; out: the one that passed (or the last tried) */
    double safe;        /* a shift proved enough (Gershgorin), taken after a failure; NAN: none */
    double first_raise; /* the ladder's first rung from a zero shift, with 1e-12 max|M_ij| */
    double amax;        /* max |M_ij| */
    double curv_floor;  /* the curvature test: g'x >= curv_floor x'x */
    int raise, check;   /* raise the shift on failure; run the curvature test */
    int copied;         /* L holds M's lower triangle already (the first try need not copy it) */
    int tries, raised;  /* out: factorisations run; the shift ended above the first one asked for */
} shift_plan;

/* The x10 ladder: the shift after mu (from zero: first_raise, at least 1e-12 max|M_ij|). */
static double ladder_next(double mu, double first_raise, double amax)
{
    double floor_mu = fmax(first_raise, fmax(1e-12 * amax, 1e-300));
    return mu < floor_mu ? floor_mu : mu * 10;
}

/* Factors M + mu I into L (and, when p->check, solves x = (M + mu I)^-1 g) until it is
 * positive definite and the direction passes the curvature test x'Bx / x'x = g'x / x'x >=
 * curv_floor. A failure moves mu to p->safe when that is larger, else up the ladder (x10,
 * or to first_raise from zero).
 * Why the test: for a positive semi-definite M, x'Bx/x'x >= lambda_min(B) >= mu, so it
 * never fires; for an indefinite M, Cholesky succeeds as soon as mu > -lambda_min(M),
 * which can leave lambda_min(B) arbitrarily close to 0 and x = B^-1 g arbitrarily long
 * (one such solve, clipped to +-clip, wrecks a whole layer). Passing it bounds the step
 * as a shift of 2 curv_floor would: ||x|| <= ||g|| / curv_floor. It costs O(n), given x.
 * Returns 1 if positive definite (x solved if check), 0 if not (raise off or 80 tries). */
static int factor_until_safe(int n, const double *M, const double *g, shift_plan *p, double *L, double *x)
{
    for (int t = 0; t < 80; t++) {
        p->tries++;
        if (factor_shifted(n, M, p->mu, !(p->copied && t == 0), L)) {
            if (!p->check) return 1;
            memcpy(x, g, (size_t)n * sizeof *x);
            qm_potrs(n, L, x);
            double gx = cblas_ddot(n, g, 1, x, 1), xx = cblas_ddot(n, x, 1, x, 1);
            if (!p->raise || xx == 0 || gx >= p->curv_floor * xx) return 1;
        } else if (!p->raise) {
            return 0;
        }
        double next = ladder_next(p->mu, p->first_raise, p->amax);
        p->mu = p->safe > p->mu && p->safe < next ? p->safe : next;
        p->raised = 1;
    }
    return 0;
}

/* The shift for B = A + mu I, chosen before factoring from the scan, and the factor.
 * The configured shift mu0 comes first, unless a diagonal entry A_ii <= -mu0 makes B
 * certainly indefinite; then, and after any failure of mu0, it is mu = mu0/2 - l, l the
 * scan's lower bound on lambda_min(A) (Gershgorin or Wolkowicz-Styan): every eigenvalue of
 * B is then >= mu0/2, so the factor succeeds and the curvature test passes by
 * construction, in one factorisation. Only rounding can fail that; the x10 ladder follows. A block the caller knows is PSD is
 * positive definite at any mu0 > 0, and keeps the ladder for mu0 = 0 (a tiny raise makes a
 * singular PSD block definite; Gershgorin's would be far too large). */
static int choose_shift_and_factor(qm_sched *s, int n, const double *A, int psd, double mu0, const double *g,
                                   const scan_t *sc, double lmin, qm_solve_event *ev)
{
    const qm_sched_opts *o = &s->o;
    int check = !psd && o->raise_shift;
    shift_plan p = { .mu = mu0, .safe = NAN, .first_raise = 0, .amax = sc->amax, .curv_floor = 0.5 * mu0,
                     .raise = o->raise_shift, .check = check, .copied = 1 };
    if (check && !isnan(lmin)) {
        /* lambda_min known exactly: skip the rungs of the ladder that cannot be positive
         * definite, and go on up the ladder (curvature test) from there, as the ladder alone
         * would: the same shift, without the failed factorisations. */
        for (int t = 0; t < 80 && !(p.mu + lmin > 0); t++) p.mu = ladder_next(p.mu, 0, sc->amax);
        p.raised = p.mu > mu0;
    } else {
        if (check && isfinite(sc->lmin_lo)) p.safe = 0.5 * mu0 - sc->lmin_lo;
        if (check && sc->dmin + mu0 <= 0 && p.safe > mu0) {
            p.mu = p.safe;
            p.raised = 1;
        }
    }
    int pd = factor_until_safe(n, A, g, &p, s->L, s->x);
    ev->shift = p.mu;
    ev->shift_raised = p.raised;
    ev->factorizations = p.tries;
    return pd;
}

/* The block shifted, whole (LDL^T, CG, the exact estimator and pruning need it): built once
 * per solve, on first use. */
static const double *whole_shifted(qm_sched *s, int n, const double *A, double mu, int *built)
{
    if (!*built) shifted(n, A, mu, s->B);
    *built = 1;
    return s->B;
}

/* log ||B||_F^2: the scan's sum unless entries are so large or small that their squares
 * over- or underflow; then the scaled sum over the whole matrix. */
static double log_fro2_of_shifted(qm_sched *s, int n, const double *A, double mu, const shifted_t *t, int *built)
{
    if (t->bmax == 0) return -INFINITY;
    if (isfinite(t->ssq) && t->bmax > 1e-140 && t->bmax < 1e140) return log(t->ssq);
    return qm_log_fro2(n, whole_shifted(s, n, A, mu, built));
}

/* Every estimator, each timed; pd: s->L holds the factor of B. */
static void estimate_all(qm_sched *s, int n, const double *A, int psd, double mu, int pd, const scan_t *sc,
                         const shifted_t *t, int have_eig, int *built, qm_solve_event *ev)
{
    uint64_t t0 = prof_now_ns();
    if (pd) {
        ev->kappa_fro = qm_kappa_fro_from_chol(n, log_fro2_of_shifted(s, n, A, mu, t, built), s->L);
        ev->est_fro_ns = (double)(prof_now_ns() - t0);
        t0 = prof_now_ns();
        ev->kappa_lapack = qm_kappa_lapack_from_chol(n, t->anorm, s->L, s->w);
        ev->est_lapack_ns = (double)(prof_now_ns() - t0);
    } else {
        double k;
        if (qm_kappa_fro(n, whole_shifted(s, n, A, mu, built), &k, &ev->est_fro_ns, s->w) == QM_OK) ev->kappa_fro = k;
    }
    t0 = prof_now_ns();
    ev->kappa_gersh = psd && mu > 0 ? qm_gersh_psd_from(sc->R, mu) : qm_gersh_sym_from(t->lo, t->hi);
    ev->est_gersh_ns = (double)(prof_now_ns() - t0);
    if (have_eig) ev->kappa_exact = qm_kappa_from_eigvals(n, s->eig, mu); /* est_exact_ns: the eigenvalues' */
    ev->est_ns = ev->est_fro_ns + ev->est_lapack_ns + ev->est_gersh_ns + ev->est_exact_ns;
}

/* The quantum route: d = the QLSA's output for B, or for the pruned matrix P (NULL: not
 * pruned); 1 if routed. */
static int quantum_direction(qm_sched *s, int n, const double *P, double mu, double mu0, const double *g,
                             int needs_factor, double *d, qm_solve_event *ev)
{
    uint64_t ts = prof_now_ns();
    const double *xe = s->x;
    int ok = 1;
    if (P) {
        /* Pruning can make the matrix indefinite or nearly singular, and then its solution
         * is no Newton direction at all (an ascent, or one direction blown up that the
         * QLSA's error then spreads over every coordinate). The pruned system gets the
         * classical system's treatment: its shift is raised (from mu, x10) until it is
         * positive definite and its direction passes the curvature test. */
        shift_plan p = { .mu = 0, .safe = NAN, .first_raise = mu, .amax = max_abs(n, P), .curv_floor = 0.5 * mu0,
                         .raise = 1, .check = 1, .copied = 0 };
        ok = factor_until_safe(n, P, g, &p, s->L, s->t);
        ev->qlsa_extra_shift = p.mu;
        xe = s->t;
    }
    if (!ok) {
        /* The pruned system could not be made positive definite: no QLSA takes it. The
         * failed attempt is simulation work, so it stays off the hybrid clock. */
        ev->route = QM_ROUTE_CLASSICAL;
        ev->pred_quantum_ns = INFINITY;
        ev->hybrid_delta_ns = -(double)(prof_now_ns() - ts);
        return 0;
    }
    qm_qlsa_output(n, xe, s->o.precision, &s->rng, d);
    double overhead = (double)(prof_now_ns() - ts);
    ev->simulated_quantum_ns = ev->pred_quantum_ns;
    /* What the QLSA replaces: the classical work past what the quantum route needs too (the
     * scan always; the factor when an estimate or the curvature test reads it). */
    double replaced = ev->measured_classical_ns - (needs_factor ? ev->factor_ns : ev->scan_ns);
    if (replaced < 0) replaced = 0;
    ev->hybrid_delta_ns = ev->simulated_quantum_ns - replaced - overhead;
    return 1;
}

/* The classical solve, really run, into s->x (with the curvature test it is solved already). */
static int classical_solve(qm_sched *s, int block, int n, const double *A, double mu, int pd, int check,
                           const double *g, int *built, qm_solve_event *ev)
{
    int rc = QM_OK;
    if (!pd) {
        rc = qm_solve_ldlt(n, whole_shifted(s, n, A, mu, built), g, s->x, NULL, s->w);
        if (rc) return qm_fail(rc, "block %d: %s", block, qm_error());
    } else if (s->o.classical == QM_SOLVER_CG) {
        rc = qm_solve_cg(n, whole_shifted(s, n, A, mu, built), g, s->x, 1e-10, 10 * n + 100, &ev->cg_iters, NULL, s->w);
        if (rc && rc != QM_ENOCONV) return qm_fail(rc, "block %d: %s", block, qm_error());
    } else if (!check) {
        qm_cholesky_solve(n, s->L, g, s->x, NULL);
    }
    return QM_OK;
}

int qm_sched_solve(qm_sched *s, long step, int block, int n, const double *A, int psd,
                   double shift, const double *g, double *d, qm_solve_event *ev)
{
    uint64_t t_call = prof_now_ns();
    memset(ev, 0, sizeof *ev);
    ev->step = step;
    ev->block = block;
    ev->n = n;
    ev->kappa_fro = ev->kappa_lapack = ev->kappa_gersh = ev->kappa_exact = ev->kappa_used = NAN;
    ev->route = QM_ROUTE_CLASSICAL;
    if (n <= 0) return qm_fail(QM_EINVAL, "block %d: size %d, expected >= 1", block, n);
    if (!(shift >= 0)) return qm_fail(QM_EINVAL, "block %d: shift %g, expected >= 0", block, shift);
    int rc = reserve(s, n);
    if (rc) return rc;
    const qm_sched_opts *o = &s->o;

    /* 1. One scan of the block, the shift chosen from it, and the factor of B = A + mu I
     * (with the direction, when the curvature test needs it): all of it is the classical
     * cost, as are any failed attempts (a classical solver pays them too). */
    /* The exact estimator (blocks up to exact_kappa_max_n) runs first: with lambda_min
     * known, the shift needs no bound (its time stays the estimator's, est_exact_ns). Before
     * the scan, which leaves the copy to factor in cache. A NaN is the scan's to report. */
    int have_eig = 0;
    if (n <= o->exact_kappa_max_n) {
        uint64_t te = prof_now_ns();
        have_eig = !qm_sym_has_nan(n, A) && qm_sym_eigvals(n, A, s->eig, s->w) == QM_OK;
        ev->est_exact_ns = (double)(prof_now_ns() - te);
    }
    scan_t sc = { 0 };
    uint64_t t0 = prof_now_ns();
    if ((rc = scan_block(s, block, n, A, &sc))) return rc;
    ev->scan_ns = (double)(prof_now_ns() - t0);
    ev->factor_ns = ev->scan_ns;
    int check = !psd && o->raise_shift;
    t0 = prof_now_ns();
    int pd = choose_shift_and_factor(s, n, A, psd, shift, g, &sc, have_eig ? s->eig[0] : NAN, ev);
    ev->factor_ns += (double)(prof_now_ns() - t0);
    double mu = ev->shift;
    if (!pd && o->raise_shift)
        return qm_fail(QM_ENOTPD, "block %d (%dx%d): not positive definite even with shift %g", block, n, n, mu);
    shifted_t st = shifted_stats(s, n, A, mu, &sc);
    int built = 0; /* s->B holds A + mu I */

    /* 2. Every estimator, each timed (the Frobenius and Gershgorin ones read the scan). */
    estimate_all(s, n, A, psd, mu, pd, &sc, &st, have_eig, &built, ev);
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
    if ((rc = classical_solve(s, block, n, A, mu, pd, check, g, &built, ev))) return rc;
    double solve_ns = (double)(prof_now_ns() - t0);
    ev->measured_classical_ns = (o->classical == QM_SOLVER_CG && pd ? 0 : ev->factor_ns) + solve_ns;

    /* 4. Predictions. The QLSA gets the (pruned) shifted matrix. */
    const double *P = NULL;
    if (o->prune_ratio < 1 && o->policy != QM_POLICY_CLASSICAL) {
        int k = (int)floor(o->prune_ratio * n);
        int dnz = qm_prune_rows(n, whole_shifted(s, n, A, mu, &built), k < 1 ? 1 : k, s->P, s->w);
        if (dnz < 0) return dnz;
        P = s->P;
        ev->nnz_per_row = dnz;
        ev->alpha = dnz * max_abs(n, P);
    } else {
        ev->nnz_per_row = st.dnz;
        ev->alpha = st.dnz * st.bmax;
    }
    ev->queries = qm_query_count(ev->alpha, kused, o->precision);
    ev->readout_reps = o->readout == QM_READOUT_TOMOGRAPHY ? qm_tomography_reps(n, o->precision) : 1;
    ev->pred_quantum_ns = ev->queries * ev->readout_reps * o->query_time_ns;
    if (isnan(ev->pred_quantum_ns)) ev->pred_quantum_ns = INFINITY;
    ev->pred_classical_ns = s->model.valid ? qm_chol_model_predict(&s->model, n) : NAN;
    ev->route = qm_decide(o->policy, kused, o->kappa_max, ev->pred_quantum_ns, ev->pred_classical_ns);
    if (ev->route == QM_ROUTE_QUANTUM && !isfinite(ev->pred_quantum_ns)) ev->route = QM_ROUTE_CLASSICAL;

    /* 5. The direction used. The QLSA's output is simulated: the exact solution of the
     * system it was given, plus its precision error. */
    int routed = ev->route == QM_ROUTE_QUANTUM && quantum_direction(s, n, P, mu, shift, g, needs_factor, d, ev);
    if (!routed) memcpy(d, s->x, (size_t)n * sizeof *d);

    /* 6. Residual of the direction used against the unpruned system, from A's lower
     * triangle: (A + mu I) d - g. */
    double gn = cblas_dnrm2(n, g, 1);
    memcpy(s->t, g, (size_t)n * sizeof *s->t);
    cblas_dsymv(CblasRowMajor, CblasLower, n, 1.0, A, n, d, 1, -1.0, s->t, 1);
    cblas_daxpy(n, mu, d, 1, s->t, 1);
    ev->residual = gn > 0 ? cblas_dnrm2(n, s->t, 1) / gn : cblas_dnrm2(n, s->t, 1);
    ev->total_ns = (double)(prof_now_ns() - t_call);
    return QM_OK;
}
