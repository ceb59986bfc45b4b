/* query.c — reading runs back: list with filter/sort/limit, one run, its params, system
 * info, metric series, op stats, profile summary and solver events. */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const store_sort_columns[] = { "id", "name", "variant", "status", "optimizer",
                                           "dataset", "loss", "acc", "duration", "started",
                                           "steps", "samples_per_s", NULL };
static const char *const sort_sql[] = { "id", "name", "variant", "status", "optimizer",
                                        "dataset", "final_train_loss", "best_test_acc",
                                        "wall_s", "started", "steps", "samples_per_s" };

void store_decode_run(store *s, sqlite3_stmt *st, store_run *r)
{
    store_run_init(r);
    int i = 0;
    r->id = sqlite3_column_int64(st, i++);
    col_text(st, i++, r->name, sizeof r->name);
    col_text(st, i++, r->variant, sizeof r->variant);
    col_text(st, i++, r->exp_path, sizeof r->exp_path);
    r->seed = (uint64_t)sqlite3_column_int64(st, i++);
    char status[32];
    col_text(st, i++, status, sizeof status);
    if (store_status_parse(status, &r->status)) r->status = STORE_RUN_FAILED;
    col_text(st, i++, r->error, sizeof r->error);
    r->started = col_real(st, i++);
    r->ended = col_real(st, i++);
    col_text(st, i++, r->host, sizeof r->host);
    r->pid = (long)sqlite3_column_int64(st, i++);
    col_text(st, i++, r->version, sizeof r->version);
    col_text(st, i++, r->optimizer, sizeof r->optimizer);
    col_text(st, i++, r->dataset, sizeof r->dataset);
    col_text(st, i++, r->model, sizeof r->model);
    r->n_params = col_count(st, i++);
    r->threads = (int)col_count(st, i++);
    r->total_steps = (long)col_count(st, i++);
    r->n_train = (int)col_count(st, i++);
    r->n_test = (int)col_count(st, i++);
    r->target_loss = col_real(st, i++);
    r->steps = (long)col_count(st, i++);
    r->epochs = (int)col_count(st, i++);
    r->wall_s = col_real(st, i++);
    r->hybrid_s = col_real(st, i++);
    r->final_train_loss = col_real(st, i++);
    r->best_train_loss = col_real(st, i++);
    r->final_test_loss = col_real(st, i++);
    r->final_test_acc = col_real(st, i++);
    r->best_test_acc = col_real(st, i++);
    r->samples_per_s = col_real(st, i++);
    r->steps_to_target = (long)col_count(st, i++);
    r->wall_to_target = col_real(st, i++);
    r->hybrid_to_target = col_real(st, i++);
    r->peak_bytes = col_count(st, i++);
    r->peak_rss = col_count(st, i++);
    r->solves = (long)col_count(st, i++);
    r->quantum_solves = (long)col_count(st, i++);
    r->kappa_first = col_real(st, i++);
    r->kappa_last = col_real(st, i++);
    /* A read-only (or long-lived) connection cannot have marked it: report what it is. */
    if (r->status == STORE_RUN_RUNNING && r->pid > 0 && !strcmp(r->host, s->host) &&
        kill((pid_t)r->pid, 0) == -1 && errno == ESRCH) {
        r->status = STORE_RUN_CRASHED;
        snprintf(r->error, sizeof r->error, "process %ld ended without finishing the run", r->pid);
    }
}

static int prep(store *s, const char *sql, sqlite3_stmt **st)
{
    int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
    return rc == SQLITE_OK ? STORE_OK : store_sql_fail(s, rc, "reading the database");
}

/* Grows *arr (of elem bytes) to hold at least n+1 elements. */
static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) return STORE_OK;
    size_t c = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, c * elem);
    if (!p) return store_fail(STORE_ENOMEM, "out of memory reading the database");
    *arr = p;
    *cap = c;
    return STORE_OK;
}

int store_runs_list(store *s, const store_list_filter *f, store_run **runs, size_t *n)
{
    *runs = NULL;
    *n = 0;
    const char *order = "id";
    if (f && f->sort && *f->sort) {
        order = NULL;
        for (int i = 0; store_sort_columns[i]; i++)
            if (!strcasecmp(f->sort, store_sort_columns[i])) order = sort_sql[i];
        if (!order)
            return store_fail(STORE_EINVAL, "unknown sort column '%s' (id, name, variant, status, "
                              "optimizer, dataset, loss, acc, duration, started, steps, samples_per_s)",
                              f->sort);
    }
    if (f && f->status >= STORE_RUN_N_STATUS)
        return store_fail(STORE_EINVAL, "invalid status filter %d", f->status);
    char sql[1024];
    /* NULLs (unknown values) sort last either way. */
    snprintf(sql, sizeof sql, "SELECT " STORE_RUN_COLS " FROM runs WHERE (?1 IS NULL OR status=?1) "
             "AND (?2 IS NULL OR instr(lower(name||' '||variant||' '||coalesce(optimizer,'')||' '||"
             "coalesce(dataset,'')||' '||coalesce(exp_path,'')||' '||coalesce(model,'')),lower(?2))>0) "
             "ORDER BY %s IS NULL, %s %s, id %s LIMIT ?3", order, order,
             f && f->desc ? "DESC" : "ASC", f && f->desc ? "DESC" : "ASC");
    sqlite3_stmt *st;
    int e = prep(s, sql, &st);
    if (e) return e;
    if (f && f->status >= 0)
        sqlite3_bind_text(st, 1, store_status_name((store_run_status)f->status), -1, SQLITE_STATIC);
    if (f && f->grep && *f->grep) sqlite3_bind_text(st, 2, f->grep, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, f && f->limit > 0 ? f->limit : -1);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((e = grow((void **)runs, &cap, *n, sizeof **runs))) break;
        store_decode_run(s, st, &(*runs)[(*n)++]);
    }
    sqlite3_finalize(st);
    if (!e && rc != SQLITE_DONE) e = store_sql_fail(s, rc, "listing runs");
    if (e) { free(*runs); *runs = NULL; *n = 0; }
    return e;
}

int store_run_count(store *s, long long *n)
{
    sqlite3_stmt *st;
    int e = prep(s, "SELECT count(*) FROM runs", &st);
    if (e) return e;
    int rc = sqlite3_step(st);
    *n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? STORE_OK : store_sql_fail(s, rc, "counting runs");
}

int store_run_get(store *s, long long id, store_run *out)
{
    store_run_init(out);
    sqlite3_stmt *st;
    int e = prep(s, "SELECT " STORE_RUN_COLS ",exp_text,data_fingerprint FROM runs WHERE id=?1", &st);
    if (e) return e;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        store_decode_run(s, st, out);
        const unsigned char *t = sqlite3_column_text(st, 40);
        if (t && !(out->exp_text = strdup((const char *)t)))
            e = store_fail(STORE_ENOMEM, "out of memory reading run %lld", id);
        const unsigned char *fp = sqlite3_column_text(st, 41);
        if (fp) snprintf(out->data_fingerprint, sizeof out->data_fingerprint, "%s", (const char *)fp);
    } else if (rc == SQLITE_DONE) {
        e = store_fail(STORE_ENOTFOUND, "no run %lld in %s (see nnbench list)", id, s->path);
    } else {
        e = store_sql_fail(s, rc, "reading a run");
    }
    sqlite3_finalize(st);
    return e;
}

int store_run_resolve(store *s, const char *spec, long long *id)
{
    if (!spec || !*spec) return store_fail(STORE_EINVAL, "empty run id");
    long long v;
    if (!strcmp(spec, "last")) {
        sqlite3_stmt *st;
        int e = prep(s, "SELECT max(id) FROM runs", &st);
        if (e) return e;
        int rc = sqlite3_step(st);
        int null = rc != SQLITE_ROW || sqlite3_column_type(st, 0) == SQLITE_NULL;
        v = null ? 0 : sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        if (rc != SQLITE_ROW) return store_sql_fail(s, rc, "finding the last run");
        if (null) return store_fail(STORE_ENOTFOUND, "no runs in %s yet", s->path);
        *id = v;
        return STORE_OK;
    }
    const char *p = spec[0] == '#' ? spec + 1 : spec;
    char *end;
    errno = 0;
    v = strtoll(p, &end, 10);
    if (!*p || *end || errno || v <= 0)
        return store_fail(STORE_EINVAL, "'%s' is not a run id (a positive number as shown by "
                          "nnbench list, or 'last')", spec);
    sqlite3_stmt *st;
    int e = prep(s, "SELECT 1 FROM runs WHERE id=?1", &st);
    if (e) return e;
    sqlite3_bind_int64(st, 1, v);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) return store_fail(STORE_ENOTFOUND, "no run %lld in %s (see nnbench list)", v, s->path);
    if (rc != SQLITE_ROW) return store_sql_fail(s, rc, "finding a run");
    *id = v;
    return STORE_OK;
}

static int get_kv(store *s, long long run, const char *table, store_kv **kv, size_t *n)
{
    *kv = NULL;
    *n = 0;
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT key, value FROM %s WHERE run=?1 ORDER BY key", table);
    sqlite3_stmt *st;
    int e = prep(s, sql, &st);
    if (e) return e;
    sqlite3_bind_int64(st, 1, run);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((e = grow((void **)kv, &cap, *n, sizeof **kv))) break;
        store_kv *o = &(*kv)[(*n)++];
        col_text(st, 0, o->key, sizeof o->key);
        col_text(st, 1, o->value, sizeof o->value);
    }
    sqlite3_finalize(st);
    if (!e && rc != SQLITE_DONE) e = store_sql_fail(s, rc, table);
    if (e) { free(*kv); *kv = NULL; *n = 0; }
    return e;
}

int store_params_get(store *s, long long run, store_kv **kv, size_t *n)
{
    return get_kv(s, run, "params", kv, n);
}

int store_sysinfo_get(store *s, long long run, store_kv **kv, size_t *n)
{
    return get_kv(s, run, "system_info", kv, n);
}

void store_strings_free(char **v, size_t n)
{
    if (!v) return;
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

int store_metric_keys(store *s, long long run, char ***keys, size_t *n)
{
    *keys = NULL;
    *n = 0;
    sqlite3_stmt *st;
    /* Distinct keys from the (run,key,step) index: a skip-scan, not a full read. */
    int e = prep(s, "SELECT DISTINCT key FROM metrics WHERE run=?1 ORDER BY key", &st);
    if (e) return e;
    sqlite3_bind_int64(st, 1, run);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((e = grow((void **)keys, &cap, *n, sizeof **keys))) break;
        /* NULL in a damaged file (or one another client wrote) despite NOT NULL: "" */
        const unsigned char *t = sqlite3_column_text(st, 0);
        char *k = strdup(t ? (const char *)t : "");
        if (!k) { e = store_fail(STORE_ENOMEM, "out of memory"); break; }
        (*keys)[(*n)++] = k;
    }
    sqlite3_finalize(st);
    if (!e && rc != SQLITE_DONE) e = store_sql_fail(s, rc, "reading metric keys");
    if (e) { store_strings_free(*keys, *n); *keys = NULL; *n = 0; }
    return e;
}

void store_series_free(store_series *sr)
{
    free(sr->step);
    free(sr->epoch);
    free(sr->wall);
    free(sr->hybrid);
    free(sr->value);
    memset(sr, 0, sizeof *sr);
}

int store_metric_get(store *s, long long run, const char *key, store_series *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st;
    int e = prep(s, "SELECT step, epoch, wall, hybrid, value FROM metrics WHERE run=?1 AND key=?2 "
                    "ORDER BY step", &st);
    if (e) return e;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (out->n == cap) {
            size_t c = cap ? cap * 2 : 256;
            long *a = realloc(out->step, c * sizeof *a);
            if (a) out->step = a;
            int *b = realloc(out->epoch, c * sizeof *b);
            if (b) out->epoch = b;
            double *w = realloc(out->wall, c * sizeof *w);
            if (w) out->wall = w;
            double *h = realloc(out->hybrid, c * sizeof *h);
            if (h) out->hybrid = h;
            double *v = realloc(out->value, c * sizeof *v);
            if (v) out->value = v;
            if (!a || !b || !w || !h || !v) { e = store_fail(STORE_ENOMEM, "out of memory reading metric %s", key); break; }
            cap = c;
        }
        size_t i = out->n++;
        out->step[i] = (long)sqlite3_column_int64(st, 0);
        out->epoch[i] = sqlite3_column_int(st, 1);
        out->wall[i] = col_real(st, 2);
        out->hybrid[i] = col_real(st, 3);
        out->value[i] = col_real(st, 4);
    }
    sqlite3_finalize(st);
    if (!e && rc != SQLITE_DONE) e = store_sql_fail(s, rc, "reading metrics");
    if (e) store_series_free(out);
    return e;
}

int store_op_stats_get(store *s, long long run, int kind, store_op_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st;
    /* cpu_ns, faults, csw came with schema v4: NULL (unknown) in an older file read as it is */
    int e = prep(s, s->version >= 4
                        ? "SELECT name,layer,kind,calls,total_ns,self_ns,min_ns,max_ns,flops,bytes,cycles,"
                          "instructions,l1d_miss,l2_miss,l3_miss,fp_ops,self_mem,peak_mem,cpu_ns,faults,csw FROM op_stats "
                          "WHERE run=?1 AND (?2 < 0 OR kind=?2) ORDER BY self_ns DESC, rowid"
                        : "SELECT name,layer,kind,calls,total_ns,self_ns,min_ns,max_ns,flops,bytes,cycles,"
                          "instructions,l1d_miss,l2_miss,l3_miss,fp_ops,self_mem,peak_mem,NULL,NULL,NULL FROM op_stats "
                          "WHERE run=?1 AND (?2 < 0 OR kind=?2) ORDER BY self_ns DESC, rowid", &st);
    if (e) return e;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int(st, 2, kind);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((e = grow((void **)rows, &cap, *n, sizeof **rows))) break;
        store_op_row *o = &(*rows)[(*n)++];
        col_text(st, 0, o->name, sizeof o->name);
        col_text(st, 1, o->layer, sizeof o->layer);
        o->kind = (prof_kind)sqlite3_column_int(st, 2);
        /* times and counts the profiler keeps unsigned; never negative in a file we wrote */
        uint64_t *u[] = { &o->calls, &o->total_ns, &o->self_ns, &o->min_ns, &o->max_ns, &o->flops, &o->bytes };
        for (int j = 0; j < 7; j++) {
            int64_t x = col_count(st, 3 + j);
            *u[j] = x > 0 ? (uint64_t)x : 0;
        }
        int64_t *v[] = { &o->cycles, &o->instructions, &o->l1d_miss, &o->l2_miss, &o->l3_miss, &o->fp_ops,
                         &o->self_mem, &o->peak_mem, &o->cpu_ns, &o->faults, &o->csw };
        for (int j = 0; j < 11; j++) *v[j] = col_count(st, 10 + j);
        o->task_clock_ns = o->migrations = -1;   /* not stored */
    }
    sqlite3_finalize(st);
    if (!e && rc != SQLITE_DONE) e = store_sql_fail(s, rc, "reading op stats");
    if (e) { free(*rows); *rows = NULL; *n = 0; }
    else prof_rows_sort(*rows, *n, PROF_SORT_SELF);   /* the one order of op tables */
    return e;
}

int store_profile_get(store *s, long long run, store_profile *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st;
    int e = prep(s, "SELECT total_self_ns,overhead_ns,events,hw_counters,counters_note,counters_used,"
                    "peak_bytes,live_bytes,total_alloc_bytes,peak_rss,peak_gflops FROM run_profile "
                    "WHERE run=?1", &st);
    if (e) return e;
    sqlite3_bind_int64(st, 1, run);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        out->total_self_ns = sqlite3_column_int64(st, 0);
        out->overhead_ns = sqlite3_column_int64(st, 1);
        out->events = sqlite3_column_int64(st, 2);
        out->hw_counters = sqlite3_column_int(st, 3);
        col_text(st, 4, out->counters_note, sizeof out->counters_note);
        col_text(st, 5, out->counters_used, sizeof out->counters_used);
        out->peak_bytes = sqlite3_column_int64(st, 6);
        out->live_bytes = sqlite3_column_int64(st, 7);
        out->total_alloc_bytes = sqlite3_column_int64(st, 8);
        out->peak_rss = sqlite3_column_int64(st, 9);
        out->peak_gflops = col_real(st, 10);
    } else if (rc == SQLITE_DONE) {
        e = store_fail(STORE_ENOTFOUND, "run %lld has no profile (it ran without profiling)", run);
    } else {
        e = store_sql_fail(s, rc, "reading the profile");
    }
    sqlite3_finalize(st);
    return e;
}

int store_solver_events_get(store *s, long long run, store_solver_event **ev, size_t *n)
{
    *ev = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int e = prep(s, "SELECT step,block,n,nnz_per_row,kappa_fro,kappa_lapack,kappa_gersh,kappa_exact,"
                    "kappa_used,est_ns,route,pred_classical_ns,pred_quantum_ns,measured_classical_ns,"
                    "simulated_quantum_ns,residual,shift,shift_raised FROM solver_events WHERE run=?1 "
                    "ORDER BY step, block, rowid", &st);
    if (e) return e;
    sqlite3_bind_int64(st, 1, run);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((e = grow((void **)ev, &cap, *n, sizeof **ev))) break;
        store_solver_event *o = &(*ev)[(*n)++];
        o->step = (long)sqlite3_column_int64(st, 0);
        o->block = sqlite3_column_int(st, 1);
        o->n = sqlite3_column_int(st, 2);
        double *d[] = { &o->nnz_per_row, &o->kappa_fro, &o->kappa_lapack, &o->kappa_gersh,
                        &o->kappa_exact, &o->kappa_used, &o->est_ns };
        for (int j = 0; j < 7; j++) *d[j] = col_real(st, 3 + j);
        o->route = sqlite3_column_int(st, 10);
        double *d2[] = { &o->pred_classical_ns, &o->pred_quantum_ns, &o->measured_classical_ns,
                         &o->simulated_quantum_ns, &o->residual, &o->shift };
        for (int j = 0; j < 6; j++) *d2[j] = col_real(st, 11 + j);
        o->shift_raised = sqlite3_column_int(st, 17);
    }
    sqlite3_finalize(st);
    if (!e && rc != SQLITE_DONE) e = store_sql_fail(s, rc, "reading solver events");
    if (e) { free(*ev); *ev = NULL; *n = 0; }
    return e;
}
