/* cmd_solves.c — `nnbench solves RUN`: every Newton linear solve of a run with the
 * condition-number estimate of each estimator, the route the scheduler chose, and the
 * predicted, measured (classical) and simulated (quantum) times, as a table or CSV. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"
#include "cli.h"

static const char solves_help[] =
    "usage: nnbench solves RUN [--route classical|quantum] [--step A:B] [--limit N] [--csv] [--db PATH]\n\n"
    "The Newton linear solves of one run, one row per solve, in step and block order:\n"
    "  step, block, n                  the curvature block and its size\n"
    "  k_det k_lapack k_gersh k_exact  kappa by each estimator ('-' = not computed):\n"
    "                                  determinant bound, LAPACK dpocon, Gershgorin, exact\n"
    "  k_used                          the estimate the scheduler routed on\n"
    "  route                           classical or quantum (simulated QLSA)\n"
    "  pred_c, pred_q                  the cost model's predicted classical / quantum times\n"
    "  time                            measured classical time, or the SIMULATED quantum time\n"
    "                                  (marked 'sim')\n"
    "  resid, shift                    relative residual, the shift added (+ when raised)\n\n"
    "  --route R    only solves routed R\n"
    "  --step A:B   only steps A..B (inclusive)\n"
    "  --limit N    at most N rows (after the filters)\n"
    "  --csv        every stored field as CSV with a header line\n"
    "  --db PATH    the database (default $NNBENCH_DB or ./nnbench.db)\n"
    "RUN is an id from nnbench list, or 'last'.\n";

void cmd_solves_help(FILE *f) { fputs(solves_help, f); }

/* A kappa cell: '-' for an estimator that was not computed (NaN), else 4 significant digits. */
static const char *kcell(char *b, size_t cap, double v)
{
    if (isnan(v)) return "-";
    if (isinf(v)) return "inf";
    snprintf(b, cap, "%.4g", v);
    return b;
}

static const char *tcell(char *b, size_t cap, double ns)
{
    if (!isfinite(ns)) return "-";
    return store_fmt_duration(b, cap, ns * 1e-9);
}

static void print_table(const store_solver_event *ev, size_t n)
{
    printf("%6s %3s %5s %9s %9s %9s %9s %9s %-9s %9s %9s %13s %8s %9s\n", "step", "blk", "n", "k_det",
           "k_lapack", "k_gersh", "k_exact", "k_used", "route", "pred_c", "pred_q", "time", "resid", "shift");
    for (size_t i = 0; i < n; i++) {
        const store_solver_event *e = &ev[i];
        char k[5][32], p1[32], p2[32], t[32], tt[40], sh[40];
        int q = e->route != 0;
        snprintf(tt, sizeof tt, "%s%s", tcell(t, sizeof t, q ? e->simulated_quantum_ns : e->measured_classical_ns),
                 q ? " sim" : "");
        snprintf(sh, sizeof sh, "%.3g%s", e->shift, e->shift_raised ? "+" : "");
        printf("%6ld %3d %5d %9s %9s %9s %9s %9s %-9s %9s %9s %13s %8.2g %9s\n", e->step, e->block, e->n,
               kcell(k[0], 32, e->kappa_fro), kcell(k[1], 32, e->kappa_lapack), kcell(k[2], 32, e->kappa_gersh),
               kcell(k[3], 32, e->kappa_exact), kcell(k[4], 32, e->kappa_used), q ? "quantum" : "classical",
               tcell(p1, sizeof p1, e->pred_classical_ns), tcell(p2, sizeof p2, e->pred_quantum_ns), tt, e->residual,
               sh);
    }
}

/* CSV of every stored field; non-finite values are written as the empty cell. */
static void csv_num(double v, const char *sep)
{
    if (isfinite(v)) printf("%.17g%s", v, sep);
    else printf("%s", sep);
}

static void print_csv(const store_solver_event *ev, size_t n)
{
    printf("step,block,n,nnz_per_row,kappa_det,kappa_lapack,kappa_gersh,kappa_exact,kappa_used,est_ns,route,"
           "pred_classical_ns,pred_quantum_ns,measured_classical_ns,simulated_quantum_ns,residual,shift,shift_raised\n");
    for (size_t i = 0; i < n; i++) {
        const store_solver_event *e = &ev[i];
        printf("%ld,%d,%d,", e->step, e->block, e->n);
        csv_num(e->nnz_per_row, ",");
        csv_num(e->kappa_fro, ",");
        csv_num(e->kappa_lapack, ",");
        csv_num(e->kappa_gersh, ",");
        csv_num(e->kappa_exact, ",");
        csv_num(e->kappa_used, ",");
        csv_num(e->est_ns, ",");
        printf("%s,", e->route ? "quantum" : "classical");
        csv_num(e->pred_classical_ns, ",");
        csv_num(e->pred_quantum_ns, ",");
        csv_num(e->measured_classical_ns, ",");
        csv_num(e->simulated_quantum_ns, ",");
        csv_num(e->residual, ",");
        csv_num(e->shift, ",");
        printf("%d\n", e->shift_raised);
    }
}

int cmd_solves(int argc, char **argv)
{
    const char *db = NULL, *spec = NULL, *route_s = NULL, *step_s = NULL, *limit_s = NULL;
    int csv = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], **val = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { cmd_solves_help(stdout); return 0; }
        if (!strcmp(a, "--csv")) { csv = 1; continue; }
        if (!strcmp(a, "--db")) val = &db;
        else if (!strcmp(a, "--route")) val = &route_s;
        else if (!strcmp(a, "--step")) val = &step_s;
        else if (!strcmp(a, "--limit")) val = &limit_s;
        if (val) {
            if (i + 1 >= argc) {
                fprintf(stderr, "nnbench solves: %s needs a value (see nnbench solves --help)\n", a);
                return 2;
            }
            *val = argv[++i];
            continue;
        }
        if (a[0] == '-' && a[1]) return cli_unknown_option("solves", a);
        if (spec) {
            fprintf(stderr, "nnbench solves: one run at a time ('%s' is extra)\n", a);
            return 2;
        }
        spec = a;
    }
    if (!spec) {
        fprintf(stderr, "nnbench solves: which run? give an id from nnbench list (see nnbench solves --help)\n");
        return 2;
    }
    int route = -1;
    if (route_s) {
        if (!strcmp(route_s, "classical")) route = 0;
        else if (!strcmp(route_s, "quantum")) route = 1;
        else {
            fprintf(stderr, "nnbench solves: --route wants classical or quantum, got '%s'\n", route_s);
            return 2;
        }
    }
    long step_a = 0, step_b = -1, limit = -1;
    if (step_s) {
        char *end;
        step_a = strtol(step_s, &end, 10);
        step_b = step_a;
        if (*end == ':') step_b = strtol(end + 1, &end, 10);
        if (*end || step_a < 0 || step_b < step_a) {
            fprintf(stderr, "nnbench solves: --step wants A or A:B with 0 <= A <= B, got '%s'\n", step_s);
            return 2;
        }
    }
    if (limit_s) {
        char *end;
        limit = strtol(limit_s, &end, 10);
        if (*end || limit <= 0) {
            fprintf(stderr, "nnbench solves: --limit wants a positive number, got '%s'\n", limit_s);
            return 2;
        }
    }
    store *s = cli_open_store(db, 0);
    if (!s) return 1;
    char *specs[1] = { (char *)spec };
    long long *id = cli_resolve_runs(s, specs, 1);
    if (!id) { store_close(s); return 1; }
    store_solver_event *ev = NULL;
    size_t n = 0;
    if (store_solver_events_get(s, *id, &ev, &n)) {
        fprintf(stderr, "nnbench solves: %s\n", cli_text(store_error()));
        free(id);
        store_close(s);
        return 1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (route >= 0 && (ev[i].route != 0) != route) continue;
        if (step_s && (ev[i].step < step_a || ev[i].step > step_b)) continue;
        if (limit > 0 && (long)k >= limit) break;
        ev[k++] = ev[i];
    }
    if (!n) fprintf(stderr, "nnbench solves: run %lld has no linear solves (not a Newton run)\n", *id);
    else if (!k) fprintf(stderr, "nnbench solves: no solve of run %lld matches the filters\n", *id);
    if (k) {
        if (csv) print_csv(ev, k);
        else print_table(ev, k);
    }
    free(ev);
    free(id);
    store_close(s);
    return 0;
}
