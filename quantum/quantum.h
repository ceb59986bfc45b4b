/* quantum.h — condition-number estimators, classical solvers, the simulated quantum
 * linear solver (QLSA) and the Q-Newton scheduler that routes each linear system.
 * The one public header of quantum/; knows matrices and vectors, never models.
 */
#ifndef NNBENCH_QUANTUM_H
#define NNBENCH_QUANTUM_H

#include <stddef.h>
#include <stdint.h>

/* Persisted by number: append-only. */
typedef enum { QM_ROUTE_CLASSICAL = 0, QM_ROUTE_QUANTUM = 1 } qm_route;

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
    int shift_raised;      /* 1 if Cholesky needed a larger shift than configured */
} qm_solve_event;

#endif
