/* quantum.h — condition-number estimators, classical solvers, the simulated quantum
 * linear solver (QLSA) and the Q-Newton scheduler that routes each linear system.
 * The one public header of quantum/; knows matrices and vectors, never models.
 *
 * How to use (matrices are float64, row-major, n x n; symmetric where stated):
 *   qm_sched *s;
 *   qm_sched_opts o = qm_sched_defaults();   // policy, kappa_max, eps, query time, ...
 *   o.policy = QM_POLICY_HYBRID;
 *   if (qm_sched_create(&o, &s)) { fprintf(stderr, "%s\n", qm_error()); ... }
 *   qm_solve_event ev;
 *   qm_sched_solve(s, step, block, n, H, psd, shift, g, d, &ev);  // d = (H + shift I)^-1 g
 *   qm_sched_free(s);
 * Everything that is measured is timed with prof_now_ns(); everything quantum is a model,
 * and the event says which is which (measured_classical_ns vs simulated_quantum_ns).
 *
 * Errors: functions return a qm_status (0 = ok) and leave a message in qm_error()
 * (thread-local). No function here prints or exits.
 */
#ifndef NNBENCH_QUANTUM_H
#define NNBENCH_QUANTUM_H

#include <stddef.h>
#include <stdint.h>

/* Persisted by number: append-only. */
typedef enum { QM_ROUTE_CLASSICAL = 0, QM_ROUTE_QUANTUM = 1 } qm_route;

/* Which estimate routing used (persisted by number: append-only). */
typedef enum {
    QM_KAPPA_AUTO = 0,   /* options only: gersh for PSD blocks, lapack otherwise */
    QM_KAPPA_FRO = 1,    /* Frobenius/determinant bound */
    QM_KAPPA_LAPACK = 2, /* dpocon 1-norm estimate */
    QM_KAPPA_GERSH = 3,  /* Gershgorin bound */
    QM_KAPPA_EXACT = 4,  /* eigenvalues */
} qm_kappa_kind;

/* One linear solve H d = g, as recorded for the store (one row of solver_events).
 * Kappa fields are NAN when that estimator was not run. Times in ns. */
typedef struct qm_solve_event {
    long step;
    int block;
    int n;
    double nnz_per_row;
    double kappa_fro;      /* Frobenius/determinant bound (Q-Newton reference formula) */
    double kappa_lapack;   /* LAPACK dpocon estimate */
    double kappa_gersh;    /* Gershgorin bound */
    double kappa_exact;    /* from eigenvalues (small blocks only) */
    double kappa_used;     /* the estimate routing used */
    double est_ns;         /* time spent estimating */
    qm_route route;
    double pred_classical_ns, pred_quantum_ns;
    double measured_classical_ns; /* the classical solve, really run and timed */
    double simulated_quantum_ns;  /* cost model (queries * query_time_ns [+ readout]); 0 if routed classical */
    double residual;       /* ||H d - g|| / ||g|| of the direction used */
    double shift;          /* diagonal shift applied (regularisation + any raise) */
    int shift_raised;      /* 1 if the shift used is larger than configured */
    /* ---- added by quantum/ (not required by the store; persist if wanted) ---- */
    double est_fro_ns, est_lapack_ns, est_gersh_ns, est_exact_ns; /* each estimator's cost (est_ns is their sum) */
    double factor_ns;      /* scan, shift choice and Cholesky factorisation(s), inside measured_classical_ns */
    double queries;        /* Q(alpha, kappa_used, eps) per circuit run (also when routed classical) */
    double readout_reps;   /* circuit runs: 1 (readout none) or the tomography count */
    double alpha;          /* d * max|A_ij| of the matrix given to the QLSA */
    double hybrid_delta_ns;/* this solve's change to the hybrid clock (0 if routed classical) */
    qm_kappa_kind kappa_kind; /* which estimate kappa_used is */
    int cg_iters;          /* conjugate-gradient iterations (classical solver cg), else 0 */
    double qlsa_extra_shift; /* quantum route, pruned: shift added to the pruned system on top
                              * of `shift` to make it positive definite and pass the curvature
                              * test (0: none needed) */
    int factorizations;    /* Cholesky factorisations of the block run: 1, unless the first
                            * shift tried failed (each further one is a retry) */
    double scan_ns;        /* the one pass over the block (row sums, norms, nonzeros, the lower
                            * triangle copied) that the shift is chosen from; inside factor_ns */
    double total_ns;       /* the whole qm_sched_solve call */
} qm_solve_event;

/* ---- errors ------------------------------------------------------------------------ */

typedef enum {
    QM_OK = 0,
    QM_EINVAL = -1,     /* bad argument or option */
    QM_ENOMEM = -2,
    QM_ENOTPD = -3,     /* Cholesky failed: the matrix is not positive definite */
    QM_ESINGULAR = -4,  /* the matrix is singular (LDL^T found a zero pivot) */
    QM_EIO = -5,        /* the cost-model file could not be written */
    QM_ENOCONV = -6,    /* conjugate gradient did not reach the tolerance */
} qm_status;

const char *qm_error(void);

/* ---- condition-number estimators ----------------------------------------------------
 * Each returns kappa (>= 1, +INFINITY for a singular matrix) and, through *ns (may be
 * NULL), the time it took. All take a symmetric n x n A unless stated.
 * Scratch: a function with a `double *work` argument needs qm_<name>_work(n) doubles
 * there, owned by the caller (the scheduler reserves them once, so a solve allocates
 * nothing); work = NULL makes the function allocate and free them itself (standalone use,
 * tests). The *_work(n) sizes are for every n' <= n too. */

/* The bound of Merikoski et al. used by Q-Newton: kappa_2 <= sqrt((1+x)/(1-x)),
 * x = sqrt(1 - (n/||A||_F^2)^n det(A)^2), from log|det A| (log form, so neither the power
 * nor the determinant over/underflows). Exact for n = 2. Pure formula: */
double qm_kappa_fro_formula(int n, double fro2, double log_abs_det);
/* Same, from the matrix: LU (dgetrf) on a copy in work; A need not be symmetric. */
size_t qm_kappa_fro_work(int n);
int qm_kappa_fro(int n, const double *A, double *kappa, double *ns, double *work);
/* Same, from a Cholesky factor L (lower, row-major, as qm_cholesky leaves it) of A. */
double qm_kappa_fro_chol(int n, const double *A, const double *L, double *ns);
/* LAPACK dpocon: estimate of kappa_1 = ||A||_1 ||A^-1||_1 from the Cholesky factor L of
 * A. For symmetric A, kappa_2 <= kappa_1 <= n kappa_2 (dpocon estimates ||A^-1||_1 from
 * below, usually within a factor 3). */
size_t qm_kappa_lapack_chol_work(int n);
double qm_kappa_lapack_chol(int n, const double *A, const double *L, double *ns, double *work);
/* Gershgorin bound for B = A + mu I with A symmetric positive SEMI-definite and mu > 0:
 * kappa_2(B) <= 1 + R/mu, R = max_i sum_j |A_ij| (the proof is in docs/qnewton.md, "Condition-number estimators").
 * A is the UNSHIFTED matrix. */
double qm_kappa_gersh_psd(int n, const double *A, double mu, double *ns);
/* Gershgorin bound for any symmetric B: (max_i B_ii + r_i) / (min_i B_ii - r_i),
 * r_i = sum_{j!=i} |B_ij|; +INFINITY when the lower disc edge is <= 0 (no bound). */
double qm_kappa_gersh_sym(int n, const double *B, double *ns);
/* Exact kappa_2 = max|lambda| / min|lambda| from the eigenvalues (dsyevd on a copy in
 * work; the size includes dsyevd's optimal workspace, from a LAPACK workspace query). */
size_t qm_kappa_exact_work(int n);
int qm_kappa_exact(int n, const double *A, double *kappa, double *ns, double *work);

/* ---- classical solvers (really run; *ns gets the time, may be NULL) ---------------- */

/* Cholesky: L (n*n, caller's buffer) gets the lower factor of A (upper part zeroed);
 * QM_ENOTPD if A is not positive definite. */
int qm_cholesky(int n, const double *A, double *L, double *ns);
/* x = A^-1 b from the factor of qm_cholesky (two dtrsv: as dpotrs, without its dtrsm overhead). */
void qm_cholesky_solve(int n, const double *L, const double *b, double *x, double *ns);
/* Factor + solve in one call (dpotrf + qm_cholesky_solve). */
int qm_solve_cholesky(int n, const double *A, const double *b, double *x, double *ns);
/* LDL^T with Bunch-Kaufman pivoting (dsysv on a copy in work, with dsysv's optimal
 * workspace), for symmetric indefinite A. QM_ESINGULAR when a pivot is exactly zero. */
size_t qm_solve_ldlt_work(int n);
int qm_solve_ldlt(int n, const double *A, const double *b, double *x, double *ns, double *work);
/* Conjugate gradient for symmetric positive definite A from x = 0, until
 * ||b - A x|| <= tol ||b|| or maxit iterations (*iters gets the count). QM_ENOCONV if the
 * tolerance was not reached (x holds the last iterate). work: qm_solve_cg_work(n) doubles
 * or NULL, as for the estimators. */
size_t qm_solve_cg_work(int n);
int qm_solve_cg(int n, const double *A, const double *b, double *x, double tol, int maxit,
                int *iters, double *ns, double *work);

/* ---- the simulated quantum linear solver --------------------------------------------- */

/* Query count of the QLSA of Jennings et al. (2023), as the Q-Newton reference computes
 * it, but with alpha multiplied once (the reference multiplies the whole count by alpha a
 * second time). alpha = d * max|A_ij|, d nonzeros per row. alpha = 1, eps = 1e-2:
 * Q(1) = 862.6, Q(10) = 5693, Q(100) = 5.695e4. */
double qm_query_count(double alpha, double kappa, double eps);
/* Circuit runs needed to read the n-vector out by tomography to l2 error eps:
 * QM_TOMOGRAPHY_C * n / eps^2 (at least 1). */
#define QM_TOMOGRAPHY_C 1.0
double qm_tomography_reps(int n, double eps);
/* The QLSA's output: x_exact + eps ||x_exact|| u, u a unit vector in a random direction
 * drawn from *rng (a splitmix64 state, advanced). Relative error is exactly eps. */
void qm_qlsa_output(int n, const double *x_exact, double eps, uint64_t *rng, double *x_out);

/* Keeps the k largest |A_ij| of each row (ties: the lower column), and of those only the
 * (i,j) whose mirror (j,i) row j kept too, so the result is symmetric and no row has more
 * than k nonzeros (a union would let popular columns fill whole rows); the diagonal is
 * always kept (then a row has at most k + 1). out may equal A. work: qm_prune_rows_work(n)
 * doubles (a row buffer and the keep mask) or NULL, as for the estimators.
 * Returns the largest number of nonzeros in a row (the sparsity d), or QM_ENOMEM. */
size_t qm_prune_rows_work(int n);
int qm_prune_rows(int n, const double *A, int k, double *out, double *work);

/* ---- this machine's Cholesky cost model (a n^3 + b n^2 + c ns) ---------------------- */

typedef struct {
    double a, b, c;
    int valid;
} qm_chol_model;

/* Least squares on relative error (each row divided by its time), m >= 3 points. */
int qm_chol_model_fit(const int *n, const double *ns, int m, qm_chol_model *out);
double qm_chol_model_predict(const qm_chol_model *m, int n);
/* Times dpotrf+dpotrs on random SPD matrices of several sizes (a second or two) and fits. */
int qm_chol_model_calibrate(qm_chol_model *out);
/* The model file: $XDG_CACHE_HOME/nnbench/cholesky-model, else ~/.cache/nnbench/... */
int qm_chol_model_path(char *buf, size_t len);
/* Reads the model from path (NULL = qm_chol_model_path()); if it is absent, unreadable or
 * was made for another BLAS core/thread count, calibrates and writes it (*calibrated = 1).
 * A write failure is not fatal: the model is still returned (message in qm_error()). */
int qm_chol_model_load(const char *path, qm_chol_model *out, int *calibrated);

/* ---- the scheduler ------------------------------------------------------------------ */

/* Values match eng_qpolicy / eng_readout. */
typedef enum { QM_POLICY_CLASSICAL = 0, QM_POLICY_QUANTUM = 1, QM_POLICY_THRESHOLD = 2,
               QM_POLICY_HYBRID = 3 } qm_policy;
typedef enum { QM_READOUT_NONE = 0, QM_READOUT_TOMOGRAPHY = 1 } qm_readout;
typedef enum { QM_SOLVER_CHOLESKY = 0, QM_SOLVER_CG = 1 } qm_solver;

typedef struct {
    qm_policy policy;
    double kappa_max;         /* threshold/hybrid: quantum only if kappa_used <= this */
    double precision;         /* eps of the QLSA */
    double query_time_ns;     /* cost of one QLSA query */
    qm_readout readout;
    int exact_kappa_max_n;    /* run the exact estimator for n <= this (0 = never) */
    double prune_ratio;       /* quantum route keeps floor(r*n) entries per row (1 = all) */
    qm_kappa_kind routing;    /* which estimate routes; AUTO: gersh if psd, else lapack */
    int raise_shift;          /* 1: raise the shift until Cholesky succeeds (see qm_sched_solve); 0: LDL^T */
    qm_solver classical;      /* cholesky (default) or cg */
    uint64_t seed;            /* QLSA error directions */
    const qm_chol_model *model; /* NULL: qm_chol_model_load(NULL) at create */
} qm_sched_opts;

qm_sched_opts qm_sched_defaults(void);

/* The routing rule, alone: classical -> classical; quantum -> quantum; threshold ->
 * quantum iff kappa <= kappa_max; hybrid -> quantum iff kappa <= kappa_max and
 * pred_quantum_ns < pred_classical_ns. A NaN kappa never routes quantum (except policy
 * quantum). */
qm_route qm_decide(qm_policy p, double kappa, double kappa_max, double pred_quantum_ns,
                   double pred_classical_ns);

typedef struct qm_sched qm_sched;
/* Free with qm_sched_free. May calibrate the cost model (see qm_chol_model_load). */
int qm_sched_create(const qm_sched_opts *o, qm_sched **out);
void qm_sched_free(qm_sched *s);
const qm_chol_model *qm_sched_model(const qm_sched *s);

/* Solves (A + shift I) d = g for one block and fills *ev. A: symmetric n x n, unshifted,
 * not modified; only its lower triangle is read (as LAPACK does; the upper one is taken
 * to mirror it), and a non-finite entry there is QM_EINVAL.
 * psd: the caller knows A is positive semi-definite (Gauss-Newton, Fisher), which makes
 * the Gershgorin bound valid. With raise_shift on, the shift mu must make the Cholesky
 * factorisation succeed and, when A may be indefinite (psd = 0), give a direction
 * x = (A + mu I)^-1 g with x'(A + mu I)x >= (shift/2) x'x: Cholesky alone accepts any mu
 * above -lambda_min(A), which can leave the system nearly singular and x huge; the test
 * bounds ||x|| <= 2 ||g|| / shift (it never fires for a PSD A). mu is shift unless a
 * diagonal entry <= -shift makes that certainly fail; then, or once shift has failed, it is
 * shift/2 - min_i (A_ii - sum_{j!=i} |A_ij|) (Gershgorin: every eigenvalue of A + mu I is
 * then >= shift/2, one factorisation); only rounding can fail that, and the x10 raises of
 * a PSD block follow (ev->factorizations counts every attempt).
 * With raise_shift off an indefinite matrix is solved by LDL^T as given, and a singular
 * one is QM_ESINGULAR.
 * The classical solve always runs (it gives the QLSA its exact solution); on the quantum
 * route d is the QLSA's output for the (pruned) matrix. A pruned matrix gets the same
 * shift raising and test (from the final shift on; the extra is in qlsa_extra_shift); one
 * that cannot be made positive definite is routed classical (pred_quantum_ns = +inf).
 * Allocation: the workspaces (matrices and every estimator's and solver's scratch) grow
 * to the largest block once; a solve no larger than an earlier one allocates nothing. */
int qm_sched_solve(qm_sched *s, long step, int block, int n, const double *A, int psd,
                   double shift, const double *g, double *d, qm_solve_event *ev);

#endif
