/* cmd_solves.c — `nnbench solves RUN`: every Newton linear solve of a run with the
 * condition-number estimate of each estimator, the route the scheduler chose, and the
 * predicted, measured (classical) and simulated (quantum) times, as a table or CSV. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../profiler/profiler.h"
#include "../store/store.h"
#include "cli.h"

static const char solves_help[] =
    "usage: nnbench solves RUN [--route classical|quantum] [--step A:B] [--limit N] [--csv | --json]\n"
    "                      [--db PATH]\n\n"
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
    "  --json       every stored field as JSON ({\"run\": N, \"solves\": [...]}; null = not computed)\n"
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
    return prof_fmt_duration(b, cap, ns * 1e-9);
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

/* Every stored field of a solve, in one order for CSV and JSON. */
typedef enum { F_LONG, F_INT, F_REAL, F_ROUTE } field_kind;
static const struct { const char *name; field_kind kind; size_t off; } fields[] = {
#define FLD(name, kind, member) { name, kind, offsetof(store_solver_event, member) }
    FLD("step", F_LONG, step), FLD("block", F_INT, block), FLD("n", F_INT, n),
    FLD("nnz_per_row", F_REAL, nnz_per_row), FLD("kappa_det", F_REAL, kappa_fro),
    FLD("kappa_lapack", F_REAL, kappa_lapack), FLD("kappa_gersh", F_REAL, kappa_gersh),
    FLD("kappa_exact", F_REAL, kappa_exact), FLD("kappa_used", F_REAL, kappa_used), FLD("est_ns", F_REAL, est_ns),
    FLD("route", F_ROUTE, route), FLD("pred_classical_ns", F_REAL, pred_classical_ns),
    FLD("pred_quantum_ns", F_REAL, pred_quantum_ns), FLD("measured_classical_ns", F_REAL, measured_classical_ns),
    FLD("simulated_quantum_ns", F_REAL, simulated_quantum_ns), FLD("residual", F_REAL, residual),
    FLD("shift", F_REAL, shift), FLD("shift_raised", F_INT, shift_raised),
#undef FLD
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

static double real_at(const store_solver_event *e, size_t f) { return *(const double *)((const char *)e + fields[f].off); }
static long long int_at(const store_solver_event *e, size_t f)
{
    const char *p = (const char *)e + fields[f].off;
    return fields[f].kind == F_LONG ? *(const long *)p : *(const int *)p;
}

/* CSV: a header line, then one line per solve; a value not computed (NaN) is the empty cell. */
static void print_csv(const store_solver_event *ev, size_t n)
{
    for (size_t f = 0; f < N_FIELDS; f++) printf("%s%s", fields[f].name, f + 1 < N_FIELDS ? "," : "\n");
    for (size_t i = 0; i < n; i++)
        for (size_t f = 0; f < N_FIELDS; f++) {
            const char *sep = f + 1 < N_FIELDS ? "," : "\n";
            if (fields[f].kind == F_ROUTE) printf("%s%s", ev[i].route ? "quantum" : "classical", sep);
            else if (fields[f].kind != F_REAL) printf("%lld%s", int_at(&ev[i], f), sep);
            else if (isfinite(real_at(&ev[i], f))) printf("%.17g%s", real_at(&ev[i], f), sep);
            else printf("%s", sep);
        }
}

/* JSON: {"run": N, "solves": [{field: value, ...}, ...]}; a value not computed is null. */
static int print_json(long long run, const store_solver_event *ev, size_t n)
{
    prof_json j;
    prof_json_begin(&j, stdout, 1);
    prof_json_object(&j);
    prof_json_kint(&j, "run", run);
    prof_json_key(&j, "solves");
    prof_json_array(&j);
    for (size_t i = 0; i < n; i++) {
        prof_json_object(&j);
        for (size_t f = 0; f < N_FIELDS; f++) {
            if (fields[f].kind == F_ROUTE) prof_json_kstr(&j, fields[f].name, ev[i].route ? "quantum" : "classical");
            else if (fields[f].kind != F_REAL) prof_json_kint(&j, fields[f].name, int_at(&ev[i], f));
            else prof_json_knum(&j, fields[f].name, real_at(&ev[i], f));
        }
        prof_json_close(&j);
    }
    prof_json_close(&j);
    prof_json_close(&j);
    if (prof_json_end(&j)) {
        fprintf(stderr, "nnbench solves: writing JSON: %s\n", prof_error());
        return 1;
    }
    return 0;
}

typedef struct { const char *db, *route, *step, *limit; int csv, json; } solves_opts;
static const cli_opt solves_opt[] = {
    CLI_OPT_VALUE("--db", NULL, solves_opts, db), CLI_OPT_VALUE("--route", NULL, solves_opts, route),
    CLI_OPT_VALUE("--step", NULL, solves_opts, step), CLI_OPT_VALUE("--limit", NULL, solves_opts, limit),
    CLI_OPT_FLAG("--csv", NULL, solves_opts, csv), CLI_OPT_FLAG("--json", NULL, solves_opts, json),
};
const cli_spec cmd_solves_spec = { "solves", cmd_solves_help, solves_opt, CLI_N(solves_opt) };

int cmd_solves(int argc, char **argv)
{
    solves_opts o = { 0 };
    int n_pos, rc = cli_parse(&cmd_solves_spec, &o, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    if (n_pos > 1) {
        fprintf(stderr, "nnbench solves: one run at a time ('%s' is extra)\n", argv[2]);
        return 2;
    }
    const char *db = o.db, *spec = n_pos ? argv[1] : NULL, *route_s = o.route, *step_s = o.step, *limit_s = o.limit;
    int csv = o.csv, json = o.json;
    if (!spec) {
        fprintf(stderr, "nnbench solves: which run? give an id from nnbench list (see nnbench solves --help)\n");
        return 2;
    }
    if (csv && json) {
        fprintf(stderr, "nnbench solves: --csv or --json, not both\n");
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
    rc = 0;
    if (json) rc = print_json(*id, ev, k);       /* an empty list too: a script reads it */
    else if (k && csv) print_csv(ev, k);
    else if (k) print_table(ev, k);
    free(ev);
    free(id);
    store_close(s);
    return rc;
}
