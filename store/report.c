/* report.c — reports of stored runs: Markdown tables, one self-contained HTML page with
 * inline SVG charts, JSON with everything stored, CSV of the metrics in long format. */
#include "internal.h"
#include "../profiler/profiler.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

typedef struct {
    store_run r;
    store_kv *params, *sys;
    size_t n_params, n_sys;
    char **keys;
    size_t n_keys;
    store_series *series;       /* one per key */
    store_op_row *ops;          /* kind op, by self time */
    size_t n_ops;
    store_profile prof;
    int has_prof;
    prof_balance balance;       /* across MPI ranks (data-parallel runs), from every kind of row */
    store_run_perf perf;        /* the calibration and machine facts stored with the run */
    char warnings[1024];        /* store_run_warnings: the lines `run --profile` printed */
    store_solver_event *ev;
    size_t n_ev;
    char label[256];            /* the comparison's label: "#3 name/variant [lr=0.1]" */
    store_quant *quants;        /* int8 quantizations, newest first */
    size_t n_quants;
} rep_run;

static void rep_free(rep_run *rr, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rep_run *x = &rr[i];
        store_run_clear(&x->r);
        free(x->params);
        free(x->sys);
        for (size_t k = 0; k < x->n_keys && x->series; k++) store_series_free(&x->series[k]);
        free(x->series);
        store_strings_free(x->keys, x->n_keys);
        free(x->ops);
        free(x->ev);
        free(x->quants);
    }
    free(rr);
}

static int rep_load(store *s, const long long *ids, size_t n, rep_run **out)
{
    rep_run *rr = calloc(n ? n : 1, sizeof *rr);
    if (!rr) return store_fail(STORE_ENOMEM, "out of memory loading runs");
    int st = STORE_OK;
    for (size_t i = 0; i < n && !st; i++) {
        rep_run *x = &rr[i];
        if ((st = store_run_get(s, ids[i], &x->r))) break;
        if ((st = store_params_get(s, ids[i], &x->params, &x->n_params))) break;
        if ((st = store_sysinfo_get(s, ids[i], &x->sys, &x->n_sys))) break;
        if ((st = store_metric_keys(s, ids[i], &x->keys, &x->n_keys))) break;
        x->series = calloc(x->n_keys ? x->n_keys : 1, sizeof *x->series);
        if (!x->series) { st = store_fail(STORE_ENOMEM, "out of memory loading runs"); break; }
        for (size_t k = 0; k < x->n_keys && !st; k++) st = store_metric_get(s, ids[i], x->keys[k], &x->series[k]);
        if (st) break;
        if ((st = store_op_stats_get(s, ids[i], 0, &x->ops, &x->n_ops))) break;
        st = store_profile_get(s, ids[i], &x->prof);
        x->has_prof = st == STORE_OK;
        if (st == STORE_ENOTFOUND) st = STORE_OK;
        if (st) break;
        store_run_perf_get(&x->r, x->sys, x->n_sys, x->has_prof ? &x->prof : NULL, &x->perf);
        store_op_row *all = NULL;
        size_t na = 0;
        if ((st = store_op_stats_get(s, ids[i], -1, &all, &na))) break;
        prof_balance_get(all, na, &x->balance);
        store_run_warnings(all, na, x->has_prof ? &x->prof : NULL, &x->perf, x->warnings, sizeof x->warnings);
        free(all);
        if ((st = store_solver_events_get(s, ids[i], &x->ev, &x->n_ev))) break;
        st = store_quants_list(s, ids[i], &x->quants, &x->n_quants);
    }
    if (st) { rep_free(rr, n); return st; }
    *out = rr;
    return STORE_OK;
}

static const store_series *series_of(const rep_run *x, const char *key)
{
    for (size_t k = 0; k < x->n_keys; k++)
        if (!strcmp(x->keys[k], key)) return &x->series[k];
    return NULL;
}

/* Layer telemetry ("grad_norm/dense1.W", "zero_frac/dense1"): one series per tensor, too
 * many for a chart each; the "Layers" section shows them as one heat map per run. */
static int is_layer_key(const char *key) { return strchr(key, '/') != NULL; }

/* Union of run-level metric keys over the runs, in the one chart order (losses first). */
static size_t all_keys(const rep_run *rr, size_t n, const char **out, size_t cap)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < rr[i].n_keys; k++) {
            if (is_layer_key(rr[i].keys[k])) continue;
            size_t j = 0;
            while (j < m && strcmp(out[j], rr[i].keys[k])) j++;
            if (j == m && m < cap) out[m++] = rr[i].keys[k];
        }
    store_metric_keys_sort(out, m);
    return m;
}

static void final_best(const store_series *sr, const char *key, double *final, double *best)
{
    *final = *best = NAN;
    if (!sr) return;
    int low = store_metric_lower_is_better(key);
    for (size_t i = 0; i < sr->n; i++) {
        double v = sr->value[i];
        *final = v;
        if (isfinite(v) && (isnan(*best) || (low ? v < *best : v > *best))) *best = v;
    }
}

static void run_label(const rep_run *x, char *b, size_t cap) { snprintf(b, cap, "%s", x->label); }

/* ---- escaping ---------------------------------------------------------------------- */

/* Text from the database made inert first (control and bidi characters as \x1b, \u202e;
 * see prof_text_fit), then escaped for the format: a name or a config value can carry
 * <script>, <img onerror=...> or a Markdown link, and must stay text. */
static char *inert(const char *s, char *stack, size_t cap)
{
    size_t need = 4 * strlen(s ? s : "") + 1;   /* an escape is at most 4 times its bytes */
    char *b = need <= cap ? stack : malloc(need);
    if (!b) { stack[0] = '\0'; return stack; }
    prof_text_fit(b, need, s, (size_t)-1, 0);
    return b;
}

static void put_escaped(FILE *f, const char *s, int html)
{
    char stack[1024];
    char *v = inert(s, stack, sizeof stack);
    for (const char *p = v; *p; p++) {
        switch (*p) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs(html ? "&quot;" : "\"", f); break;
        case '\'': fputs(html ? "&#39;" : "'", f); break;
        case '|': fputs(html ? "|" : "\\|", f); break;     /* Markdown table cell */
        case '[': case ']': case '`': case '\\':           /* Markdown links and code */
            if (!html) fputc('\\', f);
            fputc(*p, f);
            break;
        default: fputc(*p, f);
        }
    }
    if (v != stack) free(v);
}

static void put_html(FILE *f, const char *s) { put_escaped(f, s, 1); }
static void put_md(FILE *f, const char *s) { put_escaped(f, s, 0); }

/* ---- CSV --------------------------------------------------------------------------- */

/* Spreadsheets run a cell that starts with = + - @ (or a tab or CR) as a formula: such a
 * text cell gets a leading ' (OWASP's advice on CSV injection). */
static void put_csv_str(FILE *f, const char *s)
{
    char stack[1024];
    char *v = inert(s, stack, sizeof stack);
    int guard = v[0] && strchr("=+-@\t\r", v[0]);
    if (!guard && !strpbrk(v, ",\"\n")) { fputs(v, f); }
    else {
        fputc('"', f);
        if (guard) fputc('\'', f);
        for (const char *p = v; *p; p++) { if (*p == '"') fputc('"', f); fputc(*p, f); }
        fputc('"', f);
    }
    if (v != stack) free(v);
}

static void put_csv_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.9g", v);
}

int store_report_csv(store *s, const long long *ids, size_t n, FILE *f)
{
    fputs("run,name,variant,key,step,epoch,wall_s,hybrid_s,value\n", f);
    for (size_t i = 0; i < n; i++) {
        store_run r;
        int st = store_run_get(s, ids[i], &r);
        if (st) return st;
        store_run_clear(&r);
        /* Streamed straight from SQLite: a 1M-point run needs no memory here. */
        sqlite3_stmt *q;
        int rc = sqlite3_prepare_v2(s->db, "SELECT key, step, epoch, wall, hybrid, value FROM metrics "
                                    "WHERE run=?1 ORDER BY key, step", -1, &q, NULL);
        if (rc != SQLITE_OK) return store_sql_fail(s, rc, "exporting metrics");
        sqlite3_bind_int64(q, 1, ids[i]);
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            fprintf(f, "%lld,", ids[i]);
            put_csv_str(f, r.name);
            fputc(',', f);
            put_csv_str(f, r.variant);
            fputc(',', f);
            put_csv_str(f, (const char *)sqlite3_column_text(q, 0));
            fprintf(f, ",%lld,%d,", (long long)sqlite3_column_int64(q, 1), sqlite3_column_int(q, 2));
            for (int c = 3; c <= 5; c++) {
                if (sqlite3_column_type(q, c) != SQLITE_NULL) put_csv_num(f, sqlite3_column_double(q, c));
                fputc(c < 5 ? ',' : '\n', f);
            }
        }
        sqlite3_finalize(q);
        if (rc != SQLITE_DONE) return store_sql_fail(s, rc, "exporting metrics");
    }
    return ferror(f) ? store_fail(STORE_EIO, "writing CSV failed") : STORE_OK;
}

/* ---- the op diff of two runs (diff.c): one row per scope, the columns of store_diff_cols;
 * an "A -> B" column is two numbers, KEY_a and KEY_b. Raw numbers, never the text cells. */

static int diff_pair(store_diff_col c) { return c >= STORE_DIFF_COL_CALLS && c <= STORE_DIFF_COL_CPU; }
static int diff_text(store_diff_col c) { return c == STORE_DIFF_COL_NAME || c == STORE_DIFF_COL_LAYER || c == STORE_DIFF_COL_ONLY; }

/* The text of a text column: the name without its "rankK:" prefix, the layer, the run a
 * scope is only in ("A", "B"; "" when in both). */
static const char *diff_text_value(const store_diff_row *r, store_diff_col c)
{
    const prof_row *x = r->a ? r->a : r->b;
    const char *base;
    prof_row_rank(x, &base);
    if (c == STORE_DIFF_COL_NAME) return base;
    if (c == STORE_DIFF_COL_LAYER) return x->layer;
    return !r->a ? "B" : !r->b ? "A" : "";
}

int store_diff_csv(const store_diff *d, FILE *f)
{
    fputs("kind", f);
    for (int c = 0; c < STORE_DIFF_N_COLS; c++) {
        if (diff_pair((store_diff_col)c)) fprintf(f, ",%s_a,%s_b", store_diff_cols[c].key, store_diff_cols[c].key);
        else fprintf(f, ",%s", store_diff_cols[c].key);
    }
    fputc('\n', f);
    static const char *const kinds[] = { "op", "phase", "step" };
    for (size_t i = 0; i < d->n; i++) {
        const store_diff_row *r = &d->rows[i];
        const prof_row *x = r->a ? r->a : r->b;
        fputs((unsigned)x->kind < 3 ? kinds[x->kind] : "?", f);
        for (int c = 0; c < STORE_DIFF_N_COLS; c++) {
            fputc(',', f);
            store_diff_col col = (store_diff_col)c;
            if (diff_text(col)) put_csv_str(f, diff_text_value(r, col));
            else if (col == STORE_DIFF_COL_RANK) fprintf(f, "%d", prof_row_rank(x, NULL));
            else if (!diff_pair(col)) put_csv_num(f, store_diff_value(d, r, col, 0));
            else {
                put_csv_num(f, store_diff_value(d, r, col, 0));
                fputc(',', f);
                put_csv_num(f, store_diff_value(d, r, col, 1));
            }
        }
        fputc('\n', f);
    }
    return ferror(f) ? store_fail(STORE_EIO, "writing the diff's CSV failed") : STORE_OK;
}

/* ---- JSON -------------------------------------------------------------------------- */

/* Counts stored as -1 mean "not counted": null. */
static void json_count(prof_json *j, const char *k, long long v)
{
    prof_json_key(j, k);
    if (v >= 0) prof_json_int(j, v); else prof_json_null(j);
}

static void json_kv(prof_json *j, const char *k, const store_kv *kv, size_t n)
{
    prof_json_key(j, k);
    prof_json_object(j);
    for (size_t i = 0; i < n; i++) prof_json_kstr(j, kv[i].key, kv[i].value);
    prof_json_close(j);
}

/* The run's row: identity, status, counts and figures. */
static void json_run_row(prof_json *j, const store_run *r)
{
    prof_json_kint(j, "id", r->id);
    prof_json_kstr(j, "name", r->name);
    prof_json_kstr(j, "variant", r->variant);
    prof_json_kstr(j, "experiment_path", r->exp_path);
    prof_json_kstr(j, "experiment_text", r->exp_text);
    prof_json_key(j, "seed");
    prof_json_uint(j, (unsigned long long)r->seed);
    prof_json_kstr(j, "status", store_status_name(r->status));
    prof_json_key(j, "error");
    if (r->error[0]) prof_json_str(j, r->error); else prof_json_null(j);
    prof_json_knum(j, "started", r->started);
    prof_json_knum(j, "ended", r->ended);
    prof_json_kstr(j, "host", r->host);
    prof_json_kint(j, "pid", r->pid);
    prof_json_kstr(j, "version", r->version);
    prof_json_kstr(j, "optimizer", r->optimizer);
    prof_json_kstr(j, "dataset", r->dataset);
    prof_json_kstr(j, "model", r->model);
    const struct { const char *k; long long v; } counts[] = {
        { "n_params", r->n_params }, { "threads", r->threads }, { "total_steps", r->total_steps },
        { "n_train", r->n_train }, { "n_test", r->n_test }, { "steps", r->steps },
        { "epochs", r->epochs }, { "steps_to_target", r->steps_to_target },
        { "peak_bytes", r->peak_bytes }, { "peak_rss", r->peak_rss }, { "solves", r->solves },
        { "quantum_solves", r->quantum_solves } };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) json_count(j, counts[i].k, counts[i].v);
    const struct { const char *k; double v; } reals[] = {
        { "target_loss", r->target_loss }, { "wall_s", r->wall_s }, { "hybrid_s", r->hybrid_s },
        { "final_train_loss", r->final_train_loss }, { "best_train_loss", r->best_train_loss },
        { "final_test_loss", r->final_test_loss }, { "final_test_acc", r->final_test_acc },
        { "best_test_acc", r->best_test_acc }, { "samples_per_s", r->samples_per_s },
        { "wall_to_target", r->wall_to_target }, { "hybrid_to_target", r->hybrid_to_target },
        { "kappa_first", r->kappa_first }, { "kappa_last", r->kappa_last } };
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) prof_json_knum(j, reals[i].k, reals[i].v);
}

/* Every stored metric series, by key: step, epoch, wall, hybrid time and value arrays. */
static void json_metrics(prof_json *j, const rep_run *x)
{
    prof_json_key(j, "metrics");
    prof_json_object(j);
    for (size_t k = 0; k < x->n_keys; k++) {
        const store_series *sr = &x->series[k];
        prof_json_key(j, x->keys[k]);
        prof_json_object(j);
        prof_json_key(j, "step");
        prof_json_array(j);
        for (size_t i = 0; i < sr->n; i++) prof_json_int(j, sr->step[i]);
        prof_json_close(j);
        prof_json_key(j, "epoch");
        prof_json_array(j);
        for (size_t i = 0; i < sr->n; i++) prof_json_int(j, sr->epoch[i]);
        prof_json_close(j);
        const struct { const char *k; const double *v; } cols[] = {
            { "wall_s", sr->wall }, { "hybrid_s", sr->hybrid }, { "value", sr->value } };
        for (int c = 0; c < 3; c++) {
            prof_json_key(j, cols[c].k);
            prof_json_array(j);
            for (size_t i = 0; i < sr->n; i++) prof_json_num(j, cols[c].v[i]);
            prof_json_close(j);
        }
        prof_json_close(j);
    }
    prof_json_close(j);
}

static void json_ops(prof_json *j, const rep_run *x)
{
    prof_json_key(j, "ops");
    store_op_rows_json(j, x->ops, x->n_ops);
}

void store_op_rows_json(prof_json *j, const store_op_row *ops, size_t n)
{
    prof_json_array(j);
    for (size_t i = 0; i < n; i++) {
        const store_op_row *o = &ops[i];
        prof_json_object(j);
        prof_json_kstr(j, "name", o->name);
        prof_json_kstr(j, "layer", o->layer);
        prof_json_kint(j, "kind", o->kind);
        const struct { const char *k; int64_t v; } v[] = {
            { "calls", o->calls }, { "total_ns", o->total_ns }, { "self_ns", o->self_ns },
            { "min_ns", o->min_ns }, { "max_ns", o->max_ns }, { "flops", o->flops },
            { "bytes", o->bytes }, { "cycles", o->cycles }, { "instructions", o->instructions },
            { "l1d_miss", o->l1d_miss }, { "l2_miss", o->l2_miss }, { "l3_miss", o->l3_miss },
            { "fp_ops", o->fp_ops }, { "self_mem", o->self_mem }, { "peak_mem", o->peak_mem },
            { "cpu_ns", o->cpu_ns }, { "faults", o->faults }, { "csw", o->csw } };
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) json_count(j, v[k].k, v[k].v);
        prof_json_close(j);
    }
    prof_json_close(j);
}

static void json_profile(prof_json *j, const rep_run *x)
{
    prof_json_key(j, "profile");
    if (x->has_prof) {
        const store_profile *p = &x->prof;
        prof_json_object(j);
        prof_json_kint(j, "total_self_ns", (long long)p->total_self_ns);
        prof_json_kint(j, "overhead_ns", (long long)p->overhead_ns);
        prof_json_kint(j, "events", (long long)p->events);
        prof_json_kint(j, "hw_counters", p->hw_counters);
        prof_json_kstr(j, "counters_note", p->counters_note);
        prof_json_kstr(j, "counters_used", p->counters_used);
        prof_json_kint(j, "peak_bytes", (long long)p->peak_bytes);
        prof_json_kint(j, "live_bytes", (long long)p->live_bytes);
        prof_json_kint(j, "total_alloc_bytes", (long long)p->total_alloc_bytes);
        prof_json_kint(j, "peak_rss", (long long)p->peak_rss);
        prof_json_knum(j, "peak_gflops", p->peak_gflops);
        prof_json_close(j);
    } else {
        prof_json_null(j);
    }
    /* the lines `run --profile` printed, from the stored profile (one string each) */
    prof_json_key(j, "warnings");
    prof_json_array(j);
    for (const char *w = x->warnings, *nl; *w && (nl = strchr(w, '\n')); w = nl + 1) prof_json_strn(j, w, (size_t)(nl - w));
    prof_json_close(j);
}

static void json_solver_events(prof_json *j, const rep_run *x)
{
    prof_json_key(j, "solver_events");
    prof_json_array(j);
    for (size_t i = 0; i < x->n_ev; i++) {
        const store_solver_event *e = &x->ev[i];
        prof_json_object(j);
        prof_json_kint(j, "step", e->step);
        prof_json_kint(j, "block", e->block);
        prof_json_kint(j, "n", e->n);
        prof_json_kstr(j, "route", e->route ? "quantum" : "classical");
        prof_json_kint(j, "shift_raised", e->shift_raised);
        const struct { const char *k; double v; } d[] = {
            { "nnz_per_row", e->nnz_per_row }, { "kappa_fro", e->kappa_fro },
            { "kappa_lapack", e->kappa_lapack }, { "kappa_gersh", e->kappa_gersh },
            { "kappa_exact", e->kappa_exact }, { "kappa_used", e->kappa_used }, { "est_ns", e->est_ns },
            { "pred_classical_ns", e->pred_classical_ns }, { "pred_quantum_ns", e->pred_quantum_ns },
            { "measured_classical_ns", e->measured_classical_ns },
            { "simulated_quantum_ns", e->simulated_quantum_ns }, { "residual", e->residual },
            { "shift", e->shift } };
        for (size_t k = 0; k < sizeof d / sizeof d[0]; k++) prof_json_knum(j, d[k].k, d[k].v);
        prof_json_close(j);
    }
    prof_json_close(j);
}

static void json_quants(prof_json *j, const rep_run *x)
{
    prof_json_key(j, "quantizations");
    prof_json_array(j);
    for (size_t i = 0; i < x->n_quants; i++) {
        const store_quant *q = &x->quants[i];
        prof_json_object(j);
        prof_json_kint(j, "id", q->id);
        prof_json_kint(j, "step", q->step);
        prof_json_kstr(j, "scheme", q->scheme);
        prof_json_kint(j, "calibrate", q->calibrate);
        prof_json_kstr(j, "kernel", q->kernel);
        prof_json_kint(j, "fp32_bytes", q->fp32_bytes);
        prof_json_kint(j, "int8_bytes", q->int8_bytes);
        const struct { const char *k; double v; } d[] = {
            { "fp32_loss", q->fp32_loss }, { "int8_loss", q->int8_loss }, { "fp32_acc", q->fp32_acc },
            { "int8_acc", q->int8_acc }, { "fp32_sps_b1", q->fp32_sps_b1 }, { "int8_sps_b1", q->int8_sps_b1 },
            { "fp32_sps_b128", q->fp32_sps_b128 }, { "int8_sps_b128", q->int8_sps_b128 } };
        for (size_t k = 0; k < sizeof d / sizeof d[0]; k++) prof_json_knum(j, d[k].k, d[k].v);
        prof_json_close(j);
    }
    prof_json_close(j);
}

static void json_run(prof_json *j, const rep_run *x)
{
    prof_json_object(j);
    json_run_row(j, &x->r);
    json_kv(j, "params", x->params, x->n_params);
    json_kv(j, "system", x->sys, x->n_sys);
    json_metrics(j, x);
    json_ops(j, x);
    json_profile(j, x);
    json_solver_events(j, x);
    json_quants(j, x);
    prof_json_close(j);
}

static void json_diff(prof_json *jp, const store_diff *d);

static void write_json(FILE *f, const char *db, const rep_run *rr, size_t n, const store_diff *d,
                       const store_scaling *sc)
{
    prof_json j;
    prof_json_begin(&j, f, 0);
    prof_json_object(&j);
    prof_json_kint(&j, "nnbench_report", 1);
    prof_json_kstr(&j, "database", db);
    prof_json_knum(&j, "generated", (double)time(NULL));
    prof_json_kint(&j, "schema_version", STORE_SCHEMA_VERSION);
    prof_json_key(&j, "runs");
    prof_json_array(&j);
    for (size_t i = 0; i < n; i++) json_run(&j, &rr[i]);
    prof_json_close(&j);
    if (d) {
        prof_json_key(&j, "diff");
        json_diff(&j, d);
    }
    if (sc && sc->n_xs >= 2) store_scaling_json(&j, sc);
    prof_json_close(&j);
    prof_json_end(&j);
}

static void json_diff_run(prof_json *j, const char *key, const store_diff *d, int k)
{
    const store_run *r = &d->cmp->runs[k ? d->ib : d->ia];
    prof_json_key(j, key);
    prof_json_object(j);
    prof_json_kint(j, "id", r->id);
    prof_json_kstr(j, "name", r->name);
    prof_json_kstr(j, "variant", r->variant);
    prof_json_kint(j, "steps", d->steps[k]);
    prof_json_knum(j, "self_per_step_s", d->step_s[k]);
    prof_json_close(j);
}

/* The diff as one object into j: `diff --json` alone, and the "diff" of a report's JSON. */
static void json_diff(prof_json *jp, const store_diff *d)
{
#define j (*jp)
    static const char *const kinds[] = { "op", "phase", "step" };
    prof_json_object(&j);
    prof_json_kint(&j, "nnbench_diff", 1);
    json_diff_run(&j, "a", d, 0);
    json_diff_run(&j, "b", d, 1);
    prof_json_knum(&j, "delta_s", d->delta_s);
    prof_json_key(&j, "note");
    if (d->note[0]) prof_json_str(&j, d->note); else prof_json_null(&j);
    prof_json_key(&j, "rows");
    prof_json_array(&j);
    for (size_t i = 0; i < d->n; i++) {
        const store_diff_row *r = &d->rows[i];
        const prof_row *x = r->a ? r->a : r->b;
        prof_json_object(&j);
        prof_json_kstr(&j, "kind", (unsigned)x->kind < 3 ? kinds[x->kind] : "?");
        for (int c = 0; c < STORE_DIFF_N_COLS; c++) {
            store_diff_col col = (store_diff_col)c;
            if (col == STORE_DIFF_COL_ONLY) {
                prof_json_key(&j, store_diff_cols[c].key);
                if (r->a && r->b) prof_json_null(&j); else prof_json_str(&j, diff_text_value(r, col));
            } else if (diff_text(col)) {
                prof_json_kstr(&j, store_diff_cols[c].key, diff_text_value(r, col));
            } else if (col == STORE_DIFF_COL_RANK) {
                prof_json_kint(&j, store_diff_cols[c].key, prof_row_rank(x, NULL));
            } else if (!diff_pair(col)) {
                prof_json_knum(&j, store_diff_cols[c].key, store_diff_value(d, r, col, 0));
            } else {
                prof_json_key(&j, store_diff_cols[c].key);
                prof_json_array(&j);
                prof_json_num(&j, store_diff_value(d, r, col, 0));
                prof_json_num(&j, store_diff_value(d, r, col, 1));
                prof_json_close(&j);
            }
        }
        prof_json_close(&j);
    }
    prof_json_close(&j);
    prof_json_close(&j);
#undef j
}

int store_diff_json(const store_diff *d, FILE *f)
{
    prof_json j;
    prof_json_begin(&j, f, 0);
    json_diff(&j, d);
    return prof_json_end(&j) ? store_fail(STORE_EIO, "writing the diff's JSON failed") : STORE_OK;
}

/* ---- Markdown and HTML share their tables through a tiny table writer -------------- */

typedef struct {
    FILE *f;
    int html;
} tw;

static void tw_open(tw *t, const char *const *head, int n)
{
    if (t->html) {
        fputs("<table>\n<tr>", t->f);
        for (int i = 0; i < n; i++) { fputs("<th>", t->f); put_html(t->f, head[i]); fputs("</th>", t->f); }
        fputs("</tr>\n", t->f);
    } else {
        fputc('|', t->f);
        for (int i = 0; i < n; i++) { fputc(' ', t->f); put_md(t->f, head[i]); fputs(" |", t->f); }
        fputs("\n|", t->f);
        for (int i = 0; i < n; i++) fputs(i ? "---:|" : "---|", t->f);
        fputc('\n', t->f);
    }
}

static void tw_row(tw *t, const char *const *cells, int n)
{
    if (t->html) {
        fputs("<tr>", t->f);
        for (int i = 0; i < n; i++) { fputs(i ? "<td class=\"n\">" : "<td>", t->f); put_html(t->f, cells[i]); fputs("</td>", t->f); }
        fputs("</tr>\n", t->f);
    } else {
        fputc('|', t->f);
        for (int i = 0; i < n; i++) { fputc(' ', t->f); put_md(t->f, cells[i]); fputs(" |", t->f); }
        fputc('\n', t->f);
    }
}

/* A section heading inside a table. */
static void tw_row_head(tw *t, const char *const *cells, int n)
{
    if (t->html) {
        fprintf(t->f, "<tr><th colspan=\"%d\" style=\"text-align:left\">", n);
        put_html(t->f, cells[0]);
        fputs("</th></tr>\n", t->f);
    } else {
        fputc('|', t->f);
        for (int i = 0; i < n; i++) {
            fputc(' ', t->f);
            if (i == 0 && cells[0][0]) { fputs("**", t->f); put_md(t->f, cells[0]); fputs("**", t->f); }
            fputs(" |", t->f);
        }
        fputc('\n', t->f);
    }
}

static void tw_close(tw *t) { fputs(t->html ? "</table>\n" : "\n", t->f); }

static void heading(tw *t, int level, const char *text)
{
    if (t->html) {
        fprintf(t->f, "<h%d>", level);
        put_html(t->f, text);
        fprintf(t->f, "</h%d>\n", level);
    } else {
        for (int i = 0; i < level; i++) fputc('#', t->f);
        fputc(' ', t->f);
        put_md(t->f, text);
        fputs("\n\n", t->f);
    }
}

static void para(tw *t, const char *text)
{
    if (t->html) { fputs("<p>", t->f); put_html(t->f, text); fputs("</p>\n", t->f); }
    else { put_md(t->f, text); fputs("\n\n", t->f); }
}

#define MAXC 16

/* The comparison (store/compare.c), one column per run, as `compare` and the workbench
 * show it. */
static void cmp_table(tw *t, const rep_run *rr, const store_compare *c)
{
    size_t cols = c->n + 1 > MAXC ? MAXC : c->n + 1;
    const char *head[MAXC];
    head[0] = "";
    for (size_t i = 1; i < cols; i++) head[i] = c->label[i - 1];
    tw_open(t, head, (int)cols);
    int sec = -1;
    for (size_t r = 0; r < c->n_rows; r++) {
        const store_cmp_row *x = &c->rows[r];
        /* the header names the runs; of the Run rows only the kernels and the core round
         * trip are not in it */
        int machine = x->section == STORE_CMP_RUN && (!strcmp(x->label, "kernels") || !strcmp(x->label, "core round trip"));
        if (x->section == STORE_CMP_RUN && x->section == (store_cmp_section)sec && !machine) continue;
        if ((int)x->section != sec) {
            sec = (int)x->section;
            if (sec != STORE_CMP_RUN) {
                const char *cells[MAXC] = { sec == STORE_CMP_CONFIG && c->n > 1 ? "Config (keys that differ)"
                                                                               : store_cmp_section_names[sec] };
                for (size_t i = 1; i < cols; i++) cells[i] = "";
                tw_row_head(t, cells, (int)cols);
            }
            if (sec == STORE_CMP_RUN && !machine) continue;
        }
        const char *cells[MAXC];
        cells[0] = x->label;
        for (size_t i = 1; i < cols; i++) cells[i] = x->cells[i - 1];
        tw_row(t, cells, (int)cols);
    }
    tw_close(t);
    int any_config = 0;
    for (size_t r = 0; r < c->n_rows; r++) any_config |= c->rows[r].section == STORE_CMP_CONFIG;
    if (!any_config) para(t, "All runs share the same config.");
    for (int k = 0; k < STORE_CMP_N_NOTES; k++)
        if (c->notes[k][0]) para(t, c->notes[k]);
    if (c->n + 1 > MAXC) {
        char b[160];
        snprintf(b, sizeof b, "(the table shows the first %d of %zu runs)", MAXC - 1, c->n);
        para(t, b);
    }
    for (size_t i = 0; i < c->n; i++)
        if (rr[i].r.error[0]) {
            char b[900];
            snprintf(b, sizeof b, "%s: %s", c->label[i], rr[i].r.error);
            para(t, b);
        }
}

static void metrics_table(tw *t, const rep_run *rr, size_t n)
{
    heading(t, 2, "Metrics");
    const char *head[] = { "run", "metric", "points", "first", "final", "best", "at step" };
    tw_open(t, head, 7);
    const char *keys[64];
    size_t nk = all_keys(rr, n, keys, 64);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < nk; k++) {
            const store_series *sr = series_of(&rr[i], keys[k]);
            if (!sr) continue;
            double fin, best;
            final_best(sr, keys[k], &fin, &best);
            long at = -1;
            for (size_t p = 0; p < sr->n; p++) if (sr->value[p] == best) { at = sr->step[p]; break; }
            char c[7][96];
            run_label(&rr[i], c[0], sizeof c[0]);
            snprintf(c[1], sizeof c[1], "%s", keys[k]);
            snprintf(c[2], sizeof c[2], "%zu", sr->n);
            prof_fmt_num(c[3], sizeof c[3], sr->n ? sr->value[0] : NAN);
            prof_fmt_num(c[4], sizeof c[4], fin);
            prof_fmt_num(c[5], sizeof c[5], best);
            if (at >= 0) snprintf(c[6], sizeof c[6], "%ld", at); else snprintf(c[6], sizeof c[6], "-");
            const char *cells[7];
            for (int j = 0; j < 7; j++) cells[j] = c[j];
            tw_row(t, cells, 7);
        }
    tw_close(t);
}

/* The op-table model (profiler/table.c): the columns, words and cells of `show`, `run
 * --profile` and the Profile tab. */
static void ops_table(tw *t, const rep_run *x, size_t max_rows)
{
    char l[256], h[300];
    run_label(x, l, sizeof l);
    snprintf(h, sizeof h, "Op profile of %s", l);
    heading(t, 3, h);
    if (!x->n_ops) { para(t, "Not profiled."); return; }
    prof_table pt;
    store_op_table_init(&pt, x->ops, x->n_ops, x->has_prof ? &x->prof : NULL, &x->perf);
    pt.ranks = &x->balance;
    const char *head[PROF_COL_N], *cells[PROF_COL_N];
    char c[PROF_COL_N][64];
    int nc = 0;
    for (int k = 0; k < PROF_COL_N; k++)
        if (pt.show[k]) head[nc++] = prof_cols[k].title;
    tw_open(t, head, nc);
    for (size_t i = 0; i < x->n_ops && i < max_rows; i++) {
        nc = 0;
        for (int k = 0; k < PROF_COL_N; k++)
            if (pt.show[k]) cells[nc++] = prof_table_cell(&pt, &x->ops[i], (prof_col)k, c[k], sizeof c[k]);
        tw_row(t, cells, nc);
    }
    tw_close(t);
    char bl[256];
    if (prof_balance_line(&x->balance, bl, sizeof bl)[0]) para(t, bl);
    if (x->has_prof && x->prof.counters_note[0]) para(t, x->prof.counters_note);
    char w[400];
    if (store_run_perf_line(&pt, &x->perf, w, sizeof w)[0]) para(t, w);
    for (const char *p = x->warnings, *nl; *p && (nl = strchr(p, '\n')); p = nl + 1) {
        snprintf(w, sizeof w, "Warning: %.*s", (int)(nl - p), p);
        para(t, w);
    }
}

/* The op diff of the two runs of a report (diff.c), the columns and cells of `nnbench diff`. */
static void diff_table(tw *t, const store_diff *d, size_t max_rows)
{
    char b[600], c[STORE_DIFF_N_COLS][96];
    heading(t, 2, "Op diff (B - A)");
    snprintf(b, sizeof b, "A = %s, B = %s; rows by their part of the step-time difference.",
             d->cmp->label[d->ia], d->cmp->label[d->ib]);
    para(t, b);
    if (d->note[0]) para(t, d->note);
    if (!d->n) return;
    para(t, store_diff_summary(d, b, sizeof b));
    const char *head[STORE_DIFF_N_COLS], *cells[STORE_DIFF_N_COLS];
    int nc = 0;
    for (int k = 0; k < STORE_DIFF_N_COLS; k++)
        if (d->show[k]) head[nc++] = store_diff_cols[k].title;
    tw_open(t, head, nc);
    for (size_t i = 0; i < d->n && i < max_rows; i++) {
        nc = 0;
        for (int k = 0; k < STORE_DIFF_N_COLS; k++)
            if (d->show[k]) cells[nc++] = store_diff_cell(d, &d->rows[i], (store_diff_col)k, c[k], sizeof c[k]);
        tw_row(t, cells, nc);
    }
    tw_close(t);
    if (d->n > max_rows) {
        snprintf(b, sizeof b, "(%zu of %zu rows; nnbench diff %lld %lld shows them all)", max_rows, d->n,
                 d->cmp->runs[d->ia].id, d->cmp->runs[d->ib].id);
        para(t, b);
    }
}

static void solver_summary(tw *t, const rep_run *x)
{
    if (!x->n_ev) return;
    store_solver_summary sum;
    char lines[3][256], b[1200];
    store_solver_summarize(x->ev, x->n_ev, &sum);
    store_solver_summary_lines(&sum, lines);
    snprintf(b, sizeof b, "%s: %s; %s; %s.", x->label, lines[0], lines[1], lines[2]);
    para(t, b);
}

/* ---- SVG charts -------------------------------------------------------------------- */

static const char *const palette[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                       "#8c564b", "#e377c2", "#17becf" };

static double nice_step(double range, int ticks)
{
    double raw = range / ticks, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
}

/* x of point p of a series: step (xmode 0), wall time (1) or hybrid time (2). */
static double xval(const store_series *sr, size_t p, int xmode)
{
    return xmode == 0 ? (double)sr->step[p] : xmode == 1 ? sr->wall[p] : sr->hybrid[p];
}

/* One chart: metric key of every run against step, wall time or hybrid time; log x when
 * the x values span more than two decades (hybrid time from 50 ms to 12 h). At most ~2000
 * points per line (evenly strided) keep the page light for long runs. The legend wraps:
 * each entry's box (class legend-box, sized from its text) is placed where it fits. */
static void svg_chart(FILE *f, const rep_run *rr, size_t n, const char *key, int xmode)
{
    static const char *const xname[3] = { "step", "wall time (s)", "(sim) hybrid time (s)" };
    static const char *const xdata[3] = { "step", "time", "hybrid" };
    static const char *const dash[4] = { "", "6 3", "2 2", "8 3 2 3" };
    const int W = 720, L = 70, R = 20, T = 30, B0 = 46, LH = 16;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY, xpos = INFINITY;
    for (size_t i = 0; i < n; i++) {
        const store_series *sr = series_of(&rr[i], key);
        for (size_t p = 0; sr && p < sr->n; p++) {
            double x = xval(sr, p, xmode), y = sr->value[p];
            if (!isfinite(x) || !isfinite(y)) continue;
            if (x < x0) x0 = x;
            if (x > x1) x1 = x;
            if (x > 0 && x < xpos) xpos = x;
            if (y < y0) y0 = y;
            if (y > y1) y1 = y;
        }
    }
    int logx = xmode != 0 && isfinite(xpos) && x1 / xpos > 100;
    if (logx) { x0 = log10(xpos); x1 = log10(x1); }
    /* Legend layout first: it decides the height. */
    double *lx = calloc(n ? n : 1, sizeof *lx), *ly = calloc(n ? n : 1, sizeof *ly), *lw = calloc(n ? n : 1, sizeof *lw);
    if (!lx || !ly || !lw) { free(lx); free(ly); free(lw); return; }
    int rows = n ? 1 : 0;
    double cx = L;
    for (size_t i = 0; i < n; i++) {
        lw[i] = 18 + 6.6 * (double)strlen(rr[i].label) + 4;
        if (cx > L && cx + lw[i] > W - R) { rows++; cx = L; }
        lx[i] = cx;
        ly[i] = rows - 1;
        cx += lw[i] + 12;
    }
    const int H = T + 240 + B0 + rows * LH + 6;
    const int B = B0 + rows * LH + 6;
    fprintf(f, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" data-metric=\"", W, H, W, H);
    put_html(f, key);
    fprintf(f, "\" data-x=\"%s\" data-log-x=\"%d\" role=\"img\">\n<title>", xdata[xmode], logx);
    put_html(f, key);
    fprintf(f, " against %s%s</title>\n", xname[xmode], logx ? " (log x)" : "");
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", W, H);
    if (!isfinite(x0)) {
        fprintf(f, "<text x=\"%d\" y=\"%d\">no finite values</text>\n</svg></figure>\n", W / 2 - 50, H / 2);
        free(lx); free(ly); free(lw);
        return;
    }
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= y0) { y1 = y0 + (fabs(y0) > 0 ? fabs(y0) * 0.1 : 1); y0 -= (y1 - y0); }
    double pw = W - L - R, ph = H - T - B;
#define SX(v) (L + ((v) - x0) / (x1 - x0) * pw)
#define SY(v) (T + ph - ((v) - y0) / (y1 - y0) * ph)
    fprintf(f, "<g stroke=\"#ccc\" stroke-width=\"1\" font-family=\"sans-serif\" font-size=\"11\" fill=\"#333\">\n");
    double ys = nice_step(y1 - y0, 5);
    for (double v = ceil(y0 / ys) * ys; v <= y1 + ys * 1e-9; v += ys)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\" "
                "stroke=\"none\" text-anchor=\"end\">%.4g</text>\n", L, SY(v), W - R, SY(v), L - 4, SY(v) + 4, v);
    double xs = logx ? (x1 - x0 > 6 ? 2 : 1) : nice_step(x1 - x0, 6);
    for (double v = ceil(x0 / xs - 1e-9) * xs; v <= x1 + xs * 1e-9; v += xs)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" "
                "stroke=\"none\" text-anchor=\"middle\">%.4g</text>\n", SX(v), T, SX(v), T + ph, SX(v),
                T + ph + 14, logx ? pow(10, v) : v);
    fprintf(f, "</g>\n<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"12\" "
            "text-anchor=\"middle\">%s%s</text>\n", L + pw / 2, T + ph + 30, xname[xmode], logx ? ", log scale" : "");
    fprintf(f, "<text x=\"%d\" y=\"18\" font-family=\"sans-serif\" font-size=\"13\" font-weight=\"bold\">", L);
    put_html(f, key);
    fprintf(f, " against %s</text>\n", xname[xmode]);
    size_t np = sizeof palette / sizeof palette[0];
    for (size_t i = 0; i < n; i++) {
        const store_series *sr = series_of(&rr[i], key);
        const char *col = palette[i % np], *da = dash[(i / np) % 4];
        if (sr && sr->n) {
            size_t stride = sr->n > 2000 ? (sr->n + 1999) / 2000 : 1;
            int open = 0;
            for (size_t p = 0; p < sr->n; p += stride) {
                double x = xval(sr, p, xmode), y = sr->value[p];
                if (logx) x = x > 0 ? log10(x) : NAN;
                if (!isfinite(x) || !isfinite(y)) {
                    if (open) fputs("\"/>\n", f);
                    open = 0;
                    continue;
                }
                if (!open) {
                    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s%s%s points=\"", col,
                            da[0] ? " stroke-dasharray=\"" : "", da, da[0] ? "\"" : "");
                    open = 1;
                }
                fprintf(f, "%.1f,%.1f ", SX(x), SY(y));
            }
            if (open) fputs("\"/>\n", f);
        }
        double bx = lx[i], by = T + ph + 38 + ly[i] * LH;
        fprintf(f, "<g class=\"legend\"><rect class=\"legend-box\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" "
                "fill=\"none\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"%s%s%s/>"
                "<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"11\">",
                bx, by, lw[i], LH - 2, bx, by + 7, bx + 14, by + 7, col, da[0] ? " stroke-dasharray=\"" : "", da,
                da[0] ? "\"" : "", bx + 18, by + 11);
        put_html(f, rr[i].label);
        fputs("</text></g>\n", f);
    }
#undef SX
#undef SY
    fputs("</svg></figure>\n", f);
    free(lx); free(ly); free(lw);
}

/* One row per quantization of each run: fp32 -> int8 side by side. */
static void quant_table(tw *t, const rep_run *rr, size_t n)
{
    const char *head[] = { "run", "quantization", "kernel", "bytes fp32 -> int8", "int8/fp32", "test acc fp32 -> int8",
                           "test loss fp32 -> int8", "samples/s batch 1", "samples/s batch 128" };
    tw_open(t, head, 9);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < rr[i].n_quants; k++) {
            const store_quant *q = &rr[i].quants[k];
            char l[256], id[64], by[64], ra[32], acc[64], loss[64], s1[64], s2[64], a[32], b[32];
            run_label(&rr[i], l, sizeof l);
            snprintf(id, sizeof id, "#%lld %s, %ld samples", q->id, q->scheme, q->calibrate);
            snprintf(by, sizeof by, "%s -> %s", prof_fmt_bytes(a, sizeof a, (double)q->fp32_bytes),
                     prof_fmt_bytes(b, sizeof b, (double)q->int8_bytes));
            snprintf(ra, sizeof ra, "%.3f", q->fp32_bytes > 0 ? (double)q->int8_bytes / (double)q->fp32_bytes : NAN);
            snprintf(acc, sizeof acc, "%s -> %s", prof_fmt_num(a, sizeof a, q->fp32_acc), prof_fmt_num(b, sizeof b, q->int8_acc));
            snprintf(loss, sizeof loss, "%s -> %s", prof_fmt_num(a, sizeof a, q->fp32_loss), prof_fmt_num(b, sizeof b, q->int8_loss));
            snprintf(s1, sizeof s1, "%.0f -> %.0f", q->fp32_sps_b1, q->int8_sps_b1);
            snprintf(s2, sizeof s2, "%.0f -> %.0f", q->fp32_sps_b128, q->int8_sps_b128);
            const char *cells[9] = { l, id, q->kernel, by, ra, acc, loss, s1, s2 };
            tw_row(t, cells, 9);
        }
    tw_close(t);
}

/* Five-stop viridis, t in [0, 1]. */
static void heat_colour(double t, char *out, size_t cap)
{
    static const double stops[5][3] = { { 68, 1, 84 }, { 59, 82, 139 }, { 33, 145, 140 }, { 94, 201, 98 }, { 253, 231, 37 } };
    if (!(t >= 0)) t = 0;
    if (t > 1) t = 1;
    double p = t * 4;
    int i = p >= 4 ? 3 : (int)p;
    double u = p - i;
    snprintf(out, cap, "#%02x%02x%02x", (int)(stops[i][0] + u * (stops[i + 1][0] - stops[i][0])),
             (int)(stops[i][1] + u * (stops[i + 1][1] - stops[i][1])), (int)(stops[i][2] + u * (stops[i + 1][2] - stops[i][2])));
}

/* The per-layer gradient-norm chart of one run: a layer x step heat map of log10
 * grad_norm (HTML), or the first, latest and largest norm per tensor (Markdown). */
static void layer_chart(tw *t, const rep_run *x)
{
    const char *rows[256];
    size_t nr = 0;
    for (size_t k = 0; k < x->n_keys && nr < 256; k++)
        if (!strncmp(x->keys[k], "grad_norm/", 10)) rows[nr++] = x->keys[k];
    if (!nr) return;
    for (size_t a = 1; a < nr; a++)
        for (size_t b = a; b > 0 && store_natural_cmp(rows[b - 1], rows[b]) > 0; b--) {
            const char *tmp = rows[b]; rows[b] = rows[b - 1]; rows[b - 1] = tmp;
        }
    char label[256], b[512];
    run_label(x, label, sizeof label);
    if (!t->html) {
        snprintf(b, sizeof b, "%s: L2 norm of each parameter tensor's raw gradient (before any transform).", label);
        para(t, b);
        const char *head[] = { "tensor", "points", "first", "latest", "max" };
        tw_open(t, head, 5);
        for (size_t r = 0; r < nr; r++) {
            const store_series *sr = series_of(x, rows[r]);
            double mx = NAN;
            for (size_t p = 0; p < sr->n; p++) if (isfinite(sr->value[p]) && !(sr->value[p] <= mx)) mx = sr->value[p];
            char c[5][64];
            snprintf(c[0], sizeof c[0], "%s", rows[r] + 10);
            snprintf(c[1], sizeof c[1], "%zu", sr->n);
            prof_fmt_num(c[2], sizeof c[2], sr->n ? sr->value[0] : NAN);
            prof_fmt_num(c[3], sizeof c[3], sr->n ? sr->value[sr->n - 1] : NAN);
            prof_fmt_num(c[4], sizeof c[4], mx);
            const char *cells[5] = { c[0], c[1], c[2], c[3], c[4] };
            tw_row(t, cells, 5);
        }
        tw_close(t);
        return;
    }
    /* the log10 range over the run, and the longest series (its steps are the columns) */
    double lo = INFINITY, hi = -INFINITY;
    const store_series *cols = NULL;
    for (size_t r = 0; r < nr; r++) {
        const store_series *sr = series_of(x, rows[r]);
        if (!cols || sr->n > cols->n) cols = sr;
        for (size_t p = 0; p < sr->n; p++)
            if (sr->value[p] > 0 && isfinite(sr->value[p])) {
                double v = log10(sr->value[p]);
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
    }
    if (!isfinite(lo) || !cols->n) return;
    if (hi - lo < 1e-9) hi = lo + 1;
    size_t nc = cols->n, stride = nc > 200 ? (nc + 199) / 200 : 1, shown = (nc + stride - 1) / stride;
    const double L = 110, T = 30, cw = 600.0 / (double)shown, rh = 14;
    const double W = L + 600 + 90, H = T + rh * (double)nr + 50;
    FILE *f = t->f;
    fprintf(f, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "data-chart=\"layer-grad-norm\" role=\"img\">\n<title>Gradient norm per layer: ", W, H, W, H);
    put_html(f, label);
    fprintf(f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n"
            "<text x=\"%.0f\" y=\"18\" font-family=\"sans-serif\" font-size=\"13\" font-weight=\"bold\">"
            "Gradient norm per layer (log10): ", W, H, L);
    put_html(f, label);
    fputs("</text>\n<g font-family=\"sans-serif\" font-size=\"11\">\n", f);
    for (size_t r = 0; r < nr; r++) {
        const store_series *sr = series_of(x, rows[r]);
        double y = T + rh * (double)r;
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", L - 4, y + rh - 3);
        put_html(f, rows[r] + 10);
        fputs("</text>\n", f);
        /* a series with fewer points than the columns is matched on step */
        size_t p = 0;
        for (size_t c = 0; c < nc; c += stride) {
            long step = cols->step[c];
            while (p < sr->n && sr->step[p] < step) p++;
            if (p >= sr->n || sr->step[p] != step || !(sr->value[p] > 0) || !isfinite(sr->value[p])) continue;
            char col[16];
            heat_colour((log10(sr->value[p]) - lo) / (hi - lo), col, sizeof col);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"/>\n",
                    L + cw * (double)(c / stride), y, cw + 0.3, rh - 1, col);
        }
    }
    double yb = T + rh * (double)nr;
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">step %ld</text><text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">step %ld</text>\n",
            L, yb + 14, cols->step[0], L + 600, yb + 14, cols->step[nc - 1]);
    /* legend: the colour bar and the log10 range it spans */
    for (int i = 0; i < 20; i++) {
        char col[16];
        heat_colour(i / 19.0, col, sizeof col);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"15\" height=\"8\" fill=\"%s\"/>\n", L + 300 + i * 15.0, yb + 24, col);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">log10 |g| %.2f</text><text x=\"%.0f\" y=\"%.0f\">%.2f</text>\n",
            L + 296, yb + 32, lo, L + 604, yb + 32, hi);
    fputs("</g>\n</svg></figure>\n", f);
}

/* ---- the scaling view: time and memory against n, log-log -------------------------- */

/* The log-log chart of measure m: one polyline (with its points marked) per variant,
 * decade ticks on both axes, the fitted exponent in the legend. */
static void svg_scaling_chart(FILE *f, const store_scaling *sc, store_scale_measure m)
{
    /* the legend: four entries a row, under the x axis */
    const int W = 720, L = 80, R = 20, T = 30, B = 56 + 14 * (int)((sc->n_series + 3) / 4), H = T + 240 + B;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (size_t k = 0; k < sc->n_series; k++)
        for (size_t p = 0; p < sc->series[k].n; p++) {
            double x = sc->series[k].x[p], y = sc->series[k].y[m][p];
            if (!(x > 0 && y > 0 && isfinite(y))) continue;
            x0 = fmin(x0, log10(x)); x1 = fmax(x1, log10(x));
            y0 = fmin(y0, log10(y)); y1 = fmax(y1, log10(y));
        }
    const store_scale_def *def = &store_scale_defs[m];
    fprintf(f, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "data-scaling=\"%s\" role=\"img\">\n<title>%s against n (log-log)</title>\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", W, H, W, H, def->key, def->title, W, H);
    if (!isfinite(x0) || !isfinite(y0)) {
        fprintf(f, "<text x=\"%d\" y=\"%d\">no positive values</text>\n</svg></figure>\n", W / 2 - 60, H / 2);
        return;
    }
    /* whole decades around the data, at least one on each axis */
    x0 = floor(x0 * 10) / 10; x1 = ceil(x1 * 10) / 10; y0 = floor(y0); y1 = ceil(y1);
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= y0) y1 = y0 + 1;
    double pw = W - L - R, ph = H - T - B;
#define SX(v) (L + ((v) - x0) / (x1 - x0) * pw)
#define SY(v) (T + ph - ((v) - y0) / (y1 - y0) * ph)
    fputs("<g stroke=\"#ccc\" font-family=\"sans-serif\" font-size=\"11\" fill=\"#333\">\n", f);
    for (double v = y0; v <= y1 + 1e-9; v += 1) {
        char lab[32];
        if (def->bytes) prof_fmt_bytes(lab, sizeof lab, pow(10, v));
        else prof_fmt_duration(lab, sizeof lab, pow(10, v));
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\" stroke=\"none\" "
                "text-anchor=\"end\">%s</text>\n", L, SY(v), W - R, SY(v), L - 4, SY(v) + 4, lab);
    }
    for (size_t j = 0; j < sc->n_xs; j++) {
        double v = log10(sc->xs[j]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" stroke=\"none\" "
                "text-anchor=\"middle\">%.0f</text>\n", SX(v), T, SX(v), T + ph, SX(v), T + ph + 14, sc->xs[j]);
    }
    fprintf(f, "</g>\n<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"12\" text-anchor=\"middle\">"
            "n (%s), log scale</text>\n<text x=\"%d\" y=\"18\" font-family=\"sans-serif\" font-size=\"13\" "
            "font-weight=\"bold\">%s against n, log-log</text>\n", L + pw / 2, T + ph + 30, sc->x_key, L, def->title);
    size_t np = sizeof palette / sizeof palette[0];
    for (size_t k = 0; k < sc->n_series; k++) {
        const store_scale_series *sr = &sc->series[k];
        const char *col = palette[k % np];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", col);
        for (size_t p = 0; p < sr->n; p++)
            if (sr->y[m][p] > 0 && isfinite(sr->y[m][p]))
                fprintf(f, "%.1f,%.1f ", SX(log10(sr->x[p])), SY(log10(sr->y[m][p])));
        fputs("\"/>\n", f);
        for (size_t p = 0; p < sr->n; p++)
            if (sr->y[m][p] > 0 && isfinite(sr->y[m][p]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", SX(log10(sr->x[p])),
                        SY(log10(sr->y[m][p])), col);
        char e[32], lab[80];
        double bx = L + (double)(k % 4) * 160, by = T + ph + 40 + (double)(k / 4) * 14;
        fprintf(f, "<g class=\"legend\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"3\"/><text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"11\">",
                bx, by, bx + 14, by, col, bx + 18, by + 4);
        prof_text_fit(lab, sizeof lab, sr->label, 16, 0);   /* an entry is 160 px wide */
        put_html(f, lab);
        fprintf(f, " n^%s</text></g>\n", store_fit_text(&sr->fit[m], e, sizeof e));
    }
#undef SX
#undef SY
    fputs("</svg></figure>\n", f);
}

/* Per measure a table, n down and a column per variant, the exponents last; notes under
 * it for what was not fitted; in HTML its log-log chart before it. */
static void scaling_section(tw *t, const store_scaling *sc)
{
    char b[640];
    heading(t, 2, "Scaling against n");
    snprintf(b, sizeof b, "n is %s; one series per variant; exponent = least-squares slope of log y on log n "
             "(about 2 for full attention, 1 for Linformer, a little above 1 for LSH).%s%s", sc->x_key,
             sc->note[0] ? " " : "", sc->note);
    para(t, b);
    size_t cols = sc->n_series + 1 > MAXC ? MAXC : sc->n_series + 1;
    for (int m = 0; m < STORE_SCALE_N; m++) {
        snprintf(b, sizeof b, "%s: %s", store_scale_defs[m].title, store_scale_defs[m].doc);
        heading(t, 3, b);
        if (t->html) svg_scaling_chart(t->f, sc, (store_scale_measure)m);
        const char *cells[MAXC];
        char txt[MAXC][64];
        cells[0] = "n";
        for (size_t k = 1; k < cols; k++) cells[k] = sc->series[k - 1].label;
        tw_open(t, cells, (int)cols);
        for (size_t j = 0; j <= sc->n_xs; j++) {
            if (j < sc->n_xs) snprintf(txt[0], sizeof txt[0], "%.0f", sc->xs[j]);
            else snprintf(txt[0], sizeof txt[0], "exponent");
            for (size_t k = 1; k < cols; k++) {
                const store_scale_series *sr = &sc->series[k - 1];
                if (j < sc->n_xs) store_scale_cell(sr, sc->xs[j], (store_scale_measure)m, txt[k], sizeof txt[k]);
                else store_fit_text(&sr->fit[m], txt[k], sizeof txt[k]);
            }
            for (size_t k = 0; k < cols; k++) cells[k] = txt[k];
            tw_row(t, cells, (int)cols);
        }
        tw_close(t);
        for (size_t k = 0; k < sc->n_series; k++)
            if (sc->series[k].fit[m].note[0]) {
                snprintf(b, sizeof b, "%s: %s", sc->series[k].label, sc->series[k].fit[m].note);
                para(t, b);
            }
    }
}

static void write_doc(FILE *f, int html, const char *db, const rep_run *rr, size_t n, const store_compare *c,
                      const store_diff *d, const store_scaling *sc)
{
    tw t = { f, html };
    char when[64];
    store_fmt_time(when, sizeof when, (double)time(NULL), "%Y-%m-%d %H:%M:%S");
    if (html) {
        fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>nnbench report</title>\n"
              "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
              "table{border-collapse:collapse;margin:0.5em 0 1.5em}th,td{border:1px solid #ccc;"
              "padding:3px 8px;font-size:13px}th{background:#f3f3f3}td.n{text-align:right;"
              "font-variant-numeric:tabular-nums}figure{display:inline-block;margin:0.5em}"
              "pre{background:#f7f7f7;padding:0.5em;overflow:auto}</style>\n</head>\n<body>\n", f);
    }
    heading(&t, 1, "nnbench report");
    char b[1400];
    snprintf(b, sizeof b, "%zu run%s from %s, generated %s by nnbench (schema v%d).", n, n == 1 ? "" : "s",
             db, when, STORE_SCHEMA_VERSION);
    para(&t, b);
    if (c->common_name[0]) {
        snprintf(b, sizeof b, "Experiment %s.", c->common_name);
        para(&t, b);
    }
    heading(&t, 2, "Runs");
    cmp_table(&t, rr, c);
    if (sc && sc->n_xs >= 2) scaling_section(&t, sc);
    if (html) {
        /* Losses first; each loss also against the hybrid clock (simulated). */
        const char *keys[64];
        size_t nk = all_keys(rr, n, keys, 64);
        heading(&t, 2, "Charts");
        for (size_t k = 0; k < nk; k++) {
            svg_chart(f, rr, n, keys[k], 0);
            svg_chart(f, rr, n, keys[k], 1);
            if (strstr(keys[k], "loss")) svg_chart(f, rr, n, keys[k], 2);
        }
    }
    metrics_table(&t, rr, n);
    int layers = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < rr[i].n_keys; k++) layers |= !strncmp(rr[i].keys[k], "grad_norm/", 10);
    if (layers) {
        heading(&t, 2, "Layers");
        para(&t, "Gradient norm per layer: the raw gradient of each parameter tensor at every logged step "
                 "(train.telemetry). Every layer series (grad_norm, grad_mean, grad_std, grad_max, "
                 "update_ratio, zero_frac) is in the JSON and CSV reports.");
        for (size_t i = 0; i < n; i++) layer_chart(&t, &rr[i]);
    }
    heading(&t, 2, "Op profiles");
    for (size_t i = 0; i < n; i++) ops_table(&t, &rr[i], html ? 25 : 10);
    if (d) diff_table(&t, d, html ? 40 : 15);
    int anyq = 0;
    for (size_t i = 0; i < n; i++) anyq |= rr[i].n_quants > 0;
    if (anyq) {
        heading(&t, 2, "int8 quantizations");
        quant_table(&t, rr, n);
    }
    int any = 0;
    for (size_t i = 0; i < n; i++) any |= rr[i].n_ev > 0;
    if (any) {
        heading(&t, 2, "Newton solver");
        for (size_t i = 0; i < n; i++) solver_summary(&t, &rr[i]);
    }
    heading(&t, 2, "System");
    for (size_t i = 0; i < n; i++) {
        char l[256];
        run_label(&rr[i], l, sizeof l);
        snprintf(b, sizeof b, "%s: host %s, started %s", l, rr[i].r.host, store_fmt_time(when, sizeof when, rr[i].r.started, "%Y-%m-%d %H:%M:%S"));
        if (i == 0 || n == 1) {
            para(&t, b);
            const char *head[] = { "key", "value" };
            tw_open(&t, head, 2);
            for (size_t k = 0; k < rr[i].n_sys; k++) {
                const char *cells[2] = { rr[i].sys[k].key, rr[i].sys[k].value };
                tw_row(&t, cells, 2);
            }
            tw_close(&t);
        } else {
            para(&t, b);
        }
    }
    if (html) fputs("</body>\n</html>\n", f);
}

/* The scaling view of the runs into *out (NULL for one run): from c when the caller has
 * the comparison, else from one loaded here. */
static int scaling_load(store *s, const long long *ids, size_t n, const store_compare *c, store_scaling **out)
{
    *out = NULL;
    if (n < 2) return STORE_OK;
    store_compare *own = NULL;
    store_cmp_opts co = { .target = NAN };
    int st = c ? STORE_OK : store_compare_load(s, ids, n, &co, &own);
    if (!st) st = store_scaling_build(c ? c : own, out);
    store_compare_free(own);
    return st;
}

int store_report_write(store *s, const long long *ids, size_t n, const char *path)
{
    if (!n) return store_fail(STORE_EINVAL, "no runs to report");
    const char *ext = strrchr(path, '.');
    int kind = !ext ? -1 : !strcasecmp(ext, ".md") ? 0 : !strcasecmp(ext, ".html") || !strcasecmp(ext, ".htm") ? 1
             : !strcasecmp(ext, ".json") ? 2 : !strcasecmp(ext, ".csv") ? 3 : -1;
    if (kind < 0)
        return store_fail(STORE_EINVAL, "report %s: unknown format '%s' (use .md, .html, .json or .csv)",
                          path, ext ? ext : "(no extension)");
    int st = store_output_check(s->path, path);
    if (st) return st;
    rep_run *rr = NULL;
    store_compare *c = NULL;
    store_diff *d = NULL;
    if ((st = kind == 3 ? STORE_OK : rep_load(s, ids, n, &rr))) return st;
    if (kind <= 1 || (kind == 2 && n == 2)) {   /* JSON of two runs: for the diff */
        store_cmp_opts co = { .target = NAN };
        if ((st = store_compare_load(s, ids, n, &co, &c))) { rep_free(rr, n); return st; }
        /* two runs: the op diff of B (the second) against A */
        if (n == 2 && (st = store_diff_load(s, c, 0, 1, &d))) { rep_free(rr, n); store_compare_free(c); return st; }
        for (size_t i = 0; i < n; i++) snprintf(rr[i].label, sizeof rr[i].label, "%s", c->label[i]); /* visible already */
    } else if (rr) {
        for (size_t i = 0; i < n; i++) {
            char full[sizeof rr[i].r.name + sizeof rr[i].r.variant + 32];
            snprintf(full, sizeof full, "#%lld %s%s%s", rr[i].r.id, rr[i].r.name, rr[i].r.variant[0] ? "/" : "",
                     rr[i].r.variant);
            prof_text_fit(rr[i].label, sizeof rr[i].label, full, (size_t)-1, 0);
        }
    }
    /* Written next to the target and renamed: a failed report never leaves half a file. */
    store_output out;
    store_scaling *sc = NULL;
    if ((kind <= 2 && (st = scaling_load(s, ids, n, c, &sc))) || (st = store_output_open(s->path, path, &out))) {
        if (rr) rep_free(rr, n);
        store_diff_free(d);
        store_compare_free(c);
        store_scaling_free(sc);
        return st;
    }
    FILE *f = out.f;
    switch (kind) {
    case 0: write_doc(f, 0, s->path, rr, n, c, d, sc); break;
    case 1: write_doc(f, 1, s->path, rr, n, c, d, sc); break;
    case 2: write_json(f, s->path, rr, n, d, sc); break;
    default: st = store_report_csv(s, ids, n, f); break;
    }
    if (rr) rep_free(rr, n);
    store_diff_free(d);
    store_compare_free(c);
    store_scaling_free(sc);
    return store_output_close(&out, st);
}

int store_report_json(store *s, const long long *ids, size_t n, FILE *f)
{
    if (!n) return store_fail(STORE_EINVAL, "no runs to report");
    rep_run *rr = NULL;
    store_compare *c = NULL;
    store_diff *d = NULL;
    int st = rep_load(s, ids, n, &rr);
    if (!st && n == 2) {
        store_cmp_opts co = { .target = NAN };
        if (!(st = store_compare_load(s, ids, n, &co, &c))) st = store_diff_load(s, c, 0, 1, &d);
    }
    store_scaling *sc = NULL;
    if (!st) st = scaling_load(s, ids, n, c, &sc);
    if (!st) write_json(f, s->path, rr, n, d, sc);
    if (rr) rep_free(rr, n);
    store_diff_free(d);
    store_compare_free(c);
    store_scaling_free(sc);
    if (!st && (fflush(f) || ferror(f))) st = store_fail(STORE_EIO, "writing the JSON: %s", strerror(errno));
    return st;
}

void store_runs_json(const char *db_path, const store_run *runs, size_t n, FILE *f)
{
    prof_json j;
    prof_json_begin(&j, f, 0);
    prof_json_object(&j);
    prof_json_kstr(&j, "database", db_path);
    prof_json_key(&j, "runs");
    prof_json_array(&j);
    for (size_t i = 0; i < n; i++) {
        prof_json_object(&j);
        json_run_row(&j, &runs[i]);
        prof_json_close(&j);
    }
    prof_json_close(&j);
    prof_json_close(&j);
    prof_json_end(&j);
}

/* `nnbench export`: the CSV report alone, through the same safe output file. */
int store_export_csv(store *s, const long long *ids, size_t n, const char *path)
{
    store_output o;
    int st = store_output_open(s->path, path, &o);
    if (st) return st;
    return store_output_close(&o, store_report_csv(s, ids, n, o.f));
}
