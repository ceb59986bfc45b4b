/* diff.c — the op diff of two runs ("why is B faster?"): a view of the one comparison
 * (compare.c) and the one op-table model (profiler/table.c). Rows, their order, the
 * columns and their words live here; `nnbench diff`, the Compare screen and the reports
 * render them (JSON and CSV in report.c). */
#include "internal.h"
#include "../profiler/profiler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const store_diff_col_def store_diff_cols[STORE_DIFF_N_COLS] = {
    [STORE_DIFF_COL_NAME] = { "name", "name", "the scope, as the op table names it (op, phase or step)", 0, 0 },
    [STORE_DIFF_COL_LAYER] = { "layer", "layer", "the layer of an op (- for phases)", 0, 1 },
    [STORE_DIFF_COL_RANK] = { "rank", "rank", "the MPI rank whose profile the row is (data-parallel runs)", 1, 1 },
    [STORE_DIFF_COL_SHARE] = { "share", "share", "the row's part of the step-time difference B - A (the shares add up to 100%)", 1, 0 },
    [STORE_DIFF_COL_DELTA] = { "B-A /step", "delta_s", "self time per step of B minus that of A", 1, 0 },
    [STORE_DIFF_COL_SELF_A] = { "self/step A", "self_per_step_a_s", "A's self time in the scope per step", 1, 0 },
    [STORE_DIFF_COL_SELF_B] = { "self/step B", "self_per_step_b_s", "B's self time in the scope per step", 1, 0 },
    [STORE_DIFF_COL_CALLS] = { "calls/step A->B", "calls_per_step", "times the scope ran per step", 1, 0 },
    [STORE_DIFF_COL_GFLOPS] = { "GFLOP/s A->B", "gflops", "FLOPs counted from shapes / total time (the op table's GFLOP/s)", 1, 0 },
    [STORE_DIFF_COL_BYTES] = { "bytes/step A->B", "bytes_per_step", "bytes read and written per step, counted from shapes", 1, 0 },
    [STORE_DIFF_COL_MEM] = { "peak mem A->B", "peak_mem", "peak live bytes while the scope was open", 1, 0 },
    [STORE_DIFF_COL_IPC] = { "IPC A->B", "ipc", "instructions / cycles (hardware counters, where counted)", 1, 1 },
    [STORE_DIFF_COL_L1MISS] = { "L1 miss/kFLOP A->B", "l1_miss_per_kflop", "L1 data-cache misses per 1000 FLOPs (hardware counters)", 1, 1 },
    [STORE_DIFF_COL_CPU] = { "cpu A->B", "cpu", "CPU time of every thread / wall time (1.00 = one core)", 1, 1 },
    [STORE_DIFF_COL_ONLY] = { "in", "only_in", "\"only A\" / \"only B\": the scope ran in one run only", 0, 1 },
};

void store_diff_free(store_diff *d)
{
    if (!d) return;
    free(d->ops[0]);
    free(d->ops[1]);
    free(d->rows);
    free(d);
}

static int key_cmp(const prof_row *a, const prof_row *b)
{
    int c = strcmp(a->name, b->name);
    if (!c) c = strcmp(a->layer, b->layer);
    if (!c) c = (int)a->kind - (int)b->kind;
    return c;
}

static int key_cmp_v(const void *a, const void *b) { return key_cmp(a, b); }

/* Largest |difference| first; then name and layer so equal rows keep one order. */
static int contrib_cmp(const void *va, const void *vb)
{
    const store_diff_row *a = va, *b = vb;
    double x = fabs(a->delta_s), y = fabs(b->delta_s);
    if (x != y) return x < y ? 1 : -1;
    return key_cmp(a->a ? a->a : a->b, b->a ? b->a : b->b);
}

/* The step count of a run: its own `step` scope's calls (rank 0), else the run's steps. */
static long run_steps(const prof_row *rows, size_t n, const store_run *r)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].kind == PROF_STEP && !strcmp(rows[i].name, "step") && rows[i].calls > 0) return (long)rows[i].calls;
    return r && r->steps > 0 ? r->steps : 1;
}

static void show_columns(store_diff *d)
{
    for (int c = 0; c < STORE_DIFF_N_COLS; c++) d->show[c] = !store_diff_cols[c].optional;
    static const struct { store_diff_col d; prof_col p; } opt[] = {
        { STORE_DIFF_COL_LAYER, PROF_COL_LAYER }, { STORE_DIFF_COL_RANK, PROF_COL_RANK },
        { STORE_DIFF_COL_IPC, PROF_COL_IPC }, { STORE_DIFF_COL_L1MISS, PROF_COL_L1MISS },
        { STORE_DIFF_COL_CPU, PROF_COL_CPU } };
    for (size_t k = 0; k < sizeof opt / sizeof opt[0]; k++)
        d->show[opt[k].d] = d->table[0].show[opt[k].p] || d->table[1].show[opt[k].p];
    for (size_t i = 0; i < d->n; i++) d->show[STORE_DIFF_COL_ONLY] |= !d->rows[i].a || !d->rows[i].b;
}

/* Matches the rows of A and B (both sorted by key) into d->rows. */
static int match_rows(store_diff *d)
{
    size_t na = d->n_ops[0], nb = d->n_ops[1], i = 0, j = 0;
    d->rows = calloc(na + nb ? na + nb : 1, sizeof *d->rows);
    if (!d->rows) return -1;
    double per[2] = { 1.0 / (double)d->steps[0], 1.0 / (double)d->steps[1] };
    while (i < na || j < nb) {
        const prof_row *a = i < na ? &d->ops[0][i] : NULL, *b = j < nb ? &d->ops[1][j] : NULL;
        int c = !a ? 1 : !b ? -1 : key_cmp(a, b);
        store_diff_row *r = &d->rows[d->n++];
        r->a = c <= 0 ? a : NULL;
        r->b = c >= 0 ? b : NULL;
        i += c <= 0;
        j += c >= 0;
        r->self_a_s = r->a ? (double)r->a->self_ns * 1e-9 * per[0] : 0;
        r->self_b_s = r->b ? (double)r->b->self_ns * 1e-9 * per[1] : 0;
        r->delta_s = r->self_b_s - r->self_a_s;
        d->step_s[0] += r->self_a_s;
        d->step_s[1] += r->self_b_s;
    }
    /* The total is the sum of the rows, so the shares add up to 1 whatever the summary
     * row of the profile says (an older file, a run stopped before its summary). */
    d->delta_s = d->step_s[1] - d->step_s[0];
    for (size_t k = 0; k < d->n; k++)
        d->rows[k].share = d->delta_s != 0 ? d->rows[k].delta_s / d->delta_s : NAN;
    qsort(d->rows, d->n, sizeof *d->rows, contrib_cmp);
    return 0;
}

int store_diff_build(const store_compare *c, size_t a, size_t b, const prof_row *const rows[2],
                     const size_t n_rows[2], const long steps[2], store_diff **out)
{
    *out = NULL;
    if (!c || a >= c->n || b >= c->n) return store_fail(STORE_EINVAL, "diff: runs A and B must be two of the compared runs");
    store_diff *d = calloc(1, sizeof *d);
    if (!d) return store_fail(STORE_ENOMEM, "out of memory for the diff");
    d->cmp = c;
    d->ia = a;
    d->ib = b;
    size_t idx[2] = { a, b };
    for (int k = 0; k < 2; k++) {
        d->n_ops[k] = n_rows[k];
        d->ops[k] = malloc((n_rows[k] ? n_rows[k] : 1) * sizeof *d->ops[k]);
        if (!d->ops[k]) { store_diff_free(d); return store_fail(STORE_ENOMEM, "out of memory for the diff"); }
        if (n_rows[k]) memcpy(d->ops[k], rows[k], n_rows[k] * sizeof *rows[k]);
        d->steps[k] = steps && steps[k] > 0 ? steps[k] : run_steps(rows[k], n_rows[k], &c->runs[idx[k]]);
        qsort(d->ops[k], d->n_ops[k], sizeof *d->ops[k], key_cmp_v);
        /* the op-table model over the same rows: the per-run cells are its cells */
        prof_table_init(&d->table[k], d->ops[k], d->n_ops[k], 0, 0);
    }
    if (match_rows(d)) { store_diff_free(d); return store_fail(STORE_ENOMEM, "out of memory for the diff"); }
    show_columns(d);
    for (int k = 0; k < 2; k++)
        if (!n_rows[k])
            snprintf(d->note + strlen(d->note), sizeof d->note - strlen(d->note), "%s%.150s was not profiled "
                     "(no op rows: [profile] enabled = false, or still running)", d->note[0] ? "; " : "", c->label[idx[k]]);
    *out = d;
    return STORE_OK;
}

int store_diff_load(store *s, const store_compare *c, size_t a, size_t b, store_diff **out)
{
    *out = NULL;
    if (!c || a >= c->n || b >= c->n) return store_fail(STORE_EINVAL, "diff: runs A and B must be two of the compared runs");
    prof_row *rows[2] = { NULL, NULL };
    size_t n[2] = { 0, 0 };
    int st = store_op_stats_get(s, c->runs[a].id, -1, &rows[0], &n[0]);
    if (!st) st = store_op_stats_get(s, c->runs[b].id, -1, &rows[1], &n[1]);
    if (!st) st = store_diff_build(c, a, b, (const prof_row *const *)rows, n, NULL, out);
    free(rows[0]);
    free(rows[1]);
    return st;
}

/* "+1.20 ms" / "-300 us": prof_fmt_duration shows "-" for negative times. */
static const char *signed_duration(char *b, size_t cap, double s)
{
    char t[32];
    if (!isfinite(s) || fabs(s) < 0.5e-9) return prof_fmt_duration(b, cap, isfinite(s) ? 0 : s); /* no "-0 ns" */
    prof_fmt_duration(t, sizeof t, fabs(s));
    snprintf(b, cap, "%s%s", s > 0 ? "+" : s < 0 ? "-" : "", t);
    return b;
}

/* "A -> B" of one op-table column, or of a per-step count. */
static const char *pair(const store_diff *d, const store_diff_row *r, prof_col pc, int per_step, char *b, size_t cap)
{
    char x[2][48];
    const prof_row *row[2] = { r->a, r->b };
    for (int k = 0; k < 2; k++) {
        if (!row[k]) { snprintf(x[k], sizeof x[k], "-"); continue; }
        double v = pc == PROF_COL_CALLS ? (double)row[k]->calls : (double)row[k]->bytes;
        if (!per_step) prof_table_cell(&d->table[k], row[k], pc, x[k], sizeof x[k]);
        else if (pc == PROF_COL_CALLS) prof_fmt_num(x[k], sizeof x[k], v / (double)d->steps[k]);
        else if (v > 0) prof_fmt_bytes(x[k], sizeof x[k], v / (double)d->steps[k]);
        else snprintf(x[k], sizeof x[k], "-");
    }
    snprintf(b, cap, "%s -> %s", x[0], x[1]);
    return b;
}

const char *store_diff_cell(const store_diff *d, const store_diff_row *r, store_diff_col col, char *b, size_t cap)
{
    const prof_row *any = r->a ? r->a : r->b;
    const prof_table *t = &d->table[r->a ? 0 : 1];
    switch (col) {
    case STORE_DIFF_COL_NAME: return prof_table_cell(t, any, PROF_COL_NAME, b, cap);
    case STORE_DIFF_COL_LAYER: return prof_table_cell(t, any, PROF_COL_LAYER, b, cap);
    case STORE_DIFF_COL_RANK: return prof_table_cell(t, any, PROF_COL_RANK, b, cap);
    case STORE_DIFF_COL_SHARE:
        if (isnan(r->share)) snprintf(b, cap, "-");
        else snprintf(b, cap, "%.1f%%", 100.0 * r->share);
        return b;
    case STORE_DIFF_COL_DELTA: return signed_duration(b, cap, r->delta_s);
    case STORE_DIFF_COL_SELF_A: return r->a ? prof_fmt_duration(b, cap, r->self_a_s) : prof_fmt_duration(b, cap, NAN);
    case STORE_DIFF_COL_SELF_B: return r->b ? prof_fmt_duration(b, cap, r->self_b_s) : prof_fmt_duration(b, cap, NAN);
    case STORE_DIFF_COL_CALLS: return pair(d, r, PROF_COL_CALLS, 1, b, cap);
    case STORE_DIFF_COL_GFLOPS: return pair(d, r, PROF_COL_GFLOPS, 0, b, cap);
    case STORE_DIFF_COL_BYTES: return pair(d, r, PROF_COL_BYTES, 1, b, cap);
    case STORE_DIFF_COL_MEM: return pair(d, r, PROF_COL_PEAK_MEM, 0, b, cap);
    case STORE_DIFF_COL_IPC: return pair(d, r, PROF_COL_IPC, 0, b, cap);
    case STORE_DIFF_COL_L1MISS: return pair(d, r, PROF_COL_L1MISS, 0, b, cap);
    case STORE_DIFF_COL_CPU: return pair(d, r, PROF_COL_CPU, 0, b, cap);
    case STORE_DIFF_COL_ONLY: snprintf(b, cap, "%s", !r->a ? "only B" : !r->b ? "only A" : ""); return b;
    case STORE_DIFF_N_COLS: break;
    }
    snprintf(b, cap, "-");
    return b;
}

const char *store_diff_summary(const store_diff *d, char *b, size_t cap)
{
    char x[32], y[32], z[32], pct[32] = "";
    if (d->step_s[0] > 0) snprintf(pct, sizeof pct, " (%+.1f%%)", 100.0 * d->delta_s / d->step_s[0]);
    snprintf(b, cap, "self time per step: A %s (%ld steps) -> B %s (%ld steps): B-A %s%s",
             prof_fmt_duration(x, sizeof x, d->step_s[0]), d->steps[0], prof_fmt_duration(y, sizeof y, d->step_s[1]),
             d->steps[1], signed_duration(z, sizeof z, d->delta_s), pct);
    return b;
}

double store_diff_value(const store_diff *d, const store_diff_row *r, store_diff_col col, int run)
{
    const prof_row *x = run ? r->b : r->a;
    double steps = (double)d->steps[run ? 1 : 0];
    switch (col) {
    case STORE_DIFF_COL_SHARE: return r->share;
    case STORE_DIFF_COL_DELTA: return r->delta_s;
    case STORE_DIFF_COL_SELF_A: return r->a ? r->self_a_s : NAN;
    case STORE_DIFF_COL_SELF_B: return r->b ? r->self_b_s : NAN;
    default: break;
    }
    if (!x) return NAN;
    double total = (double)x->total_ns;
    switch (col) {
    case STORE_DIFF_COL_CALLS: return (double)x->calls / steps;
    case STORE_DIFF_COL_GFLOPS: return x->flops && x->total_ns ? (double)x->flops / total : NAN;
    case STORE_DIFF_COL_BYTES: return (double)x->bytes / steps;
    case STORE_DIFF_COL_MEM: return x->peak_mem >= 0 ? (double)x->peak_mem : NAN;
    case STORE_DIFF_COL_IPC: return x->cycles > 0 && x->instructions >= 0 ? (double)x->instructions / (double)x->cycles : NAN;
    case STORE_DIFF_COL_L1MISS: return x->l1d_miss >= 0 && x->flops ? (double)x->l1d_miss * 1000.0 / (double)x->flops : NAN;
    case STORE_DIFF_COL_CPU: return x->cpu_ns >= 0 && x->total_ns ? (double)x->cpu_ns / total : NAN;
    default: return NAN;
    }
}
