/* checkpoint.c — a run's checkpoints (opaque engine records kept as BLOBs), reopening a
 * run to resume it, and int8 quantization records with their op profiles. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int prep(store *s, const char *sql, sqlite3_stmt **st, const char *what)
{
    int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
    return rc == SQLITE_OK ? STORE_OK : store_sql_fail(s, rc, what);
}

static int run_step(store *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? STORE_OK : store_sql_fail(s, rc, what);
}

/* Steps q to the end, decoding each row into a growing array of elem-byte records
 * (*out malloc'd, free()); finalizes q. */
static int collect(store *s, sqlite3_stmt *q, size_t elem, void (*decode)(sqlite3_stmt *, void *), void **out,
                   size_t *n, const char *what)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            void *nb = realloc(*out, cap * elem);
            if (!nb) { rc = SQLITE_NOMEM; break; }
            *out = nb;
        }
        decode(q, (char *)*out + elem * (*n)++);
    }
    sqlite3_finalize(q);
    if (rc == SQLITE_DONE) return STORE_OK;
    free(*out);
    *out = NULL;
    *n = 0;
    return rc == SQLITE_NOMEM ? store_fail(STORE_ENOMEM, "%s: out of memory", what) : store_sql_fail(s, rc, what);
}

static void bind_real_or_null(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
    else sqlite3_bind_null(st, i);
}

/* store_checkpoint_put is the writer's (writer.c). */

int store_checkpoint_get(store *s, long long run, store_checkpoint *meta, void **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    if (s->version < 3)   /* checkpoints came with schema v3 */
        return store_fail(STORE_ENOTFOUND, "run %lld has no checkpoint: %s was written by an nnbench from before "
                          "checkpoints (schema v%d)", run, s->path, s->version);
    sqlite3_stmt *q;
    int st = prep(s, "SELECT step,epoch,created,bytes,data FROM checkpoints WHERE run=?1 "
                     "ORDER BY step DESC LIMIT 1", &q, "reading a checkpoint");
    if (st) return st;
    sqlite3_bind_int64(q, 1, run);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_DONE) {
        sqlite3_finalize(q);
        return store_fail(STORE_ENOTFOUND, "run %lld has no checkpoint in %s (runs store them from this "
                          "version on, at train.checkpoint_every and at the end)", run, s->path);
    }
    if (rc != SQLITE_ROW) { sqlite3_finalize(q); return store_sql_fail(s, rc, "reading a checkpoint"); }
    memset(meta, 0, sizeof *meta);
    meta->run = run;
    meta->step = (long)sqlite3_column_int64(q, 0);
    meta->epoch = sqlite3_column_int(q, 1);
    meta->created = col_real(q, 2);
    int n = sqlite3_column_bytes(q, 4);
    const void *b = sqlite3_column_blob(q, 4);
    meta->bytes = n;
    *data = malloc(n > 0 ? (size_t)n : 1);
    if (!*data) { sqlite3_finalize(q); return store_fail(STORE_ENOMEM, "out of memory for a checkpoint of %d bytes", n); }
    if (n > 0) memcpy(*data, b, (size_t)n);
    *len = (size_t)n;
    sqlite3_finalize(q);
    return STORE_OK;
}

static void decode_checkpoint(sqlite3_stmt *q, void *out)
{
    store_checkpoint *c = out;
    c->run = sqlite3_column_int64(q, 0);
    c->step = (long)sqlite3_column_int64(q, 1);
    c->epoch = sqlite3_column_int(q, 2);
    c->created = col_real(q, 3);
    c->bytes = col_count(q, 4);
}

int store_checkpoints_list(store *s, long long run, store_checkpoint **out, size_t *n)
{
    if (s->version < 3) { *out = NULL; *n = 0; return STORE_OK; }  /* older file, read as it is */
    sqlite3_stmt *q;
    int st = prep(s, "SELECT run,step,epoch,created,bytes FROM checkpoints WHERE run=?1 ORDER BY step DESC",
                  &q, "listing checkpoints");
    if (st) { *out = NULL; *n = 0; return st; }
    sqlite3_bind_int64(q, 1, run);
    return collect(s, q, sizeof **out, decode_checkpoint, (void **)out, n, "listing checkpoints");
}

int store_run_resumable(store_run_status st)
{
    return st == STORE_RUN_CRASHED || st == STORE_RUN_INTERRUPTED || st == STORE_RUN_FAILED;
}

/* The run's status as the write transaction sees it: another process may have resumed (or
 * finished) it since the caller last read it. */
static int status_now(store *s, long long run, store_run_status *out)
{
    sqlite3_stmt *q;
    int st = prep(s, "SELECT status FROM runs WHERE id=?1", &q, "reopening a run");
    if (st) return st;
    sqlite3_bind_int64(q, 1, run);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(q, 0);
        if (!name || store_status_parse(name, out)) *out = STORE_RUN_RUNNING; /* unknown: never reopened */
    }
    sqlite3_finalize(q);
    if (rc == SQLITE_DONE) return store_fail(STORE_ENOTFOUND, "no run %lld in %s", run, s->path);
    return rc == SQLITE_ROW ? STORE_OK : store_sql_fail(s, rc, "reopening a run");
}

int store_run_reopen(store *s, long long run, long from_step, const char *const *keys)
{
    if (s->readonly) return store_fail(STORE_EREADONLY, "resuming run %lld: %s was opened read-only", run, s->path);
    int st = store_flush(s);
    if (st) return st;
    if ((st = store_txn_begin(s))) return st;
    /* Checked inside the write transaction (BEGIN IMMEDIATE): two resumes of one crashed
     * run both pass their first check, and only the first to get here may reopen it. */
    store_run_status now;
    if ((st = status_now(s, run, &now))) goto fail;
    if (!store_run_resumable(now)) {
        st = store_fail(STORE_EINVAL, "run %lld is already %s (another process resumed it); nothing resumed", run,
                        store_status_name(now));
        goto fail;
    }
    sqlite3_stmt *q;
    if ((st = prep(s, "UPDATE runs SET status='running', error=NULL, ended=NULL, host=?2, pid=?3 WHERE id=?1",
                   &q, "reopening a run"))) goto fail;
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_text(q, 2, s->host, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(q, 3, (sqlite3_int64)getpid());
    if ((st = run_step(s, q, "reopening a run"))) goto fail;
    static const char *const drops[] = { "DELETE FROM metrics WHERE run=?1 AND step>?2",
                                         "DELETE FROM solver_events WHERE run=?1 AND step>?2" };
    for (size_t i = 0; i < sizeof drops / sizeof drops[0]; i++) {
        if ((st = prep(s, drops[i], &q, "reopening a run"))) goto fail;
        sqlite3_bind_int64(q, 1, run);
        sqlite3_bind_int64(q, 2, from_step);
        if ((st = run_step(s, q, "reopening a run"))) goto fail;
    }
    for (size_t i = 0; keys && keys[i]; i++) {
        if ((st = prep(s, "DELETE FROM metrics WHERE run=?1 AND step=?2 AND key=?3", &q, "reopening a run"))) goto fail;
        sqlite3_bind_int64(q, 1, run);
        sqlite3_bind_int64(q, 2, from_step);
        sqlite3_bind_text(q, 3, keys[i], -1, SQLITE_STATIC);
        if ((st = run_step(s, q, "reopening a run"))) goto fail;
    }
    return store_txn_commit(s);
fail:
    store_txn_rollback(s);
    return st;
}

int store_quant_put(store *s, const store_quant *qr, const store_quant_op *ops, size_t n, long long *id)
{
    if (s->readonly) return store_fail(STORE_EREADONLY, "storing a quantization: %s was opened read-only", s->path);
    int st = store_txn_begin(s);
    if (st) return st;
    sqlite3_stmt *q;
    if ((st = prep(s, "INSERT INTO quantizations(run,created,step,scheme,calibrate,kernel,fp32_bytes,int8_bytes,"
                      "fp32_loss,int8_loss,fp32_acc,int8_acc,fp32_sps_b1,int8_sps_b1,fp32_sps_b128,int8_sps_b128) "
                      "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)", &q, "storing a quantization")))
        goto fail;
    sqlite3_bind_int64(q, 1, qr->run);
    sqlite3_bind_double(q, 2, isfinite(qr->created) ? qr->created : store_unix_now());
    sqlite3_bind_int64(q, 3, qr->step);
    sqlite3_bind_text(q, 4, qr->scheme, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(q, 5, qr->calibrate);
    sqlite3_bind_text(q, 6, qr->kernel, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(q, 7, qr->fp32_bytes);
    sqlite3_bind_int64(q, 8, qr->int8_bytes);
    const double reals[] = { qr->fp32_loss, qr->int8_loss, qr->fp32_acc, qr->int8_acc, qr->fp32_sps_b1,
                             qr->int8_sps_b1, qr->fp32_sps_b128, qr->int8_sps_b128 };
    for (int i = 0; i < 8; i++) bind_real_or_null(q, 9 + i, reals[i]);
    if ((st = run_step(s, q, "storing a quantization"))) goto fail;
    long long qid = sqlite3_last_insert_rowid(s->db);
    if ((st = prep(s, "INSERT INTO quant_ops(quant,name,layer,calls,total_ns,self_ns) VALUES(?1,?2,?3,?4,?5,?6)",
                   &q, "storing a quantization's profile"))) goto fail;
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(q, 1, qid);
        sqlite3_bind_text(q, 2, ops[i].name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(q, 3, ops[i].layer, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(q, 4, ops[i].calls);
        sqlite3_bind_int64(q, 5, ops[i].total_ns);
        sqlite3_bind_int64(q, 6, ops[i].self_ns);
        int rc = sqlite3_step(q);
        sqlite3_reset(q);
        if (rc != SQLITE_DONE) { sqlite3_finalize(q); st = store_sql_fail(s, rc, "storing a quantization's profile"); goto fail; }
    }
    sqlite3_finalize(q);
    if ((st = store_txn_commit(s))) return st;
    if (id) *id = qid;
    return STORE_OK;
fail:
    store_txn_rollback(s);
    return st;
}

static void decode_quant(sqlite3_stmt *q, void *out)
{
    store_quant *r = out;
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(q, 0);
    r->run = sqlite3_column_int64(q, 1);
    r->created = col_real(q, 2);
    r->step = (long)col_count(q, 3);
    col_text(q, 4, r->scheme, sizeof r->scheme);
    r->calibrate = (long)col_count(q, 5);
    col_text(q, 6, r->kernel, sizeof r->kernel);
    r->fp32_bytes = col_count(q, 7);
    r->int8_bytes = col_count(q, 8);
    double *reals[] = { &r->fp32_loss, &r->int8_loss, &r->fp32_acc, &r->int8_acc, &r->fp32_sps_b1,
                        &r->int8_sps_b1, &r->fp32_sps_b128, &r->int8_sps_b128 };
    for (int i = 0; i < 8; i++) *reals[i] = col_real(q, 9 + i);
}

int store_quants_list(store *s, long long run, store_quant **out, size_t *n)
{
    if (s->version < 3) { *out = NULL; *n = 0; return STORE_OK; }
    sqlite3_stmt *q;
    int st = prep(s, "SELECT id,run,created,step,scheme,calibrate,kernel,fp32_bytes,int8_bytes,fp32_loss,int8_loss,"
                     "fp32_acc,int8_acc,fp32_sps_b1,int8_sps_b1,fp32_sps_b128,int8_sps_b128 "
                     "FROM quantizations WHERE run=?1 ORDER BY id DESC", &q, "listing quantizations");
    if (st) { *out = NULL; *n = 0; return st; }
    sqlite3_bind_int64(q, 1, run);
    return collect(s, q, sizeof **out, decode_quant, (void **)out, n, "listing quantizations");
}

static void decode_quant_op(sqlite3_stmt *q, void *out)
{
    store_quant_op *o = out;
    memset(o, 0, sizeof *o);
    col_text(q, 0, o->name, sizeof o->name);
    col_text(q, 1, o->layer, sizeof o->layer);
    o->kind = PROF_OP;
    o->calls = (uint64_t)sqlite3_column_int64(q, 2);
    o->total_ns = (uint64_t)sqlite3_column_int64(q, 3);
    o->self_ns = (uint64_t)sqlite3_column_int64(q, 4);
    /* not stored: not counted */
    o->cycles = o->instructions = o->l1d_miss = o->l2_miss = o->l3_miss = o->fp_ops = -1;
    o->task_clock_ns = o->faults = o->csw = o->migrations = o->cpu_ns = -1;
}

int store_quant_ops_get(store *s, long long quant, store_quant_op **ops, size_t *n)
{
    if (s->version < 3) { *ops = NULL; *n = 0; return STORE_OK; }
    sqlite3_stmt *q;
    int st = prep(s, "SELECT name,layer,calls,total_ns,self_ns FROM quant_ops WHERE quant=?1 ORDER BY self_ns DESC",
                  &q, "reading a quantization's profile");
    if (st) { *ops = NULL; *n = 0; return st; }
    sqlite3_bind_int64(q, 1, quant);
    return collect(s, q, sizeof **ops, decode_quant_op, (void **)ops, n, "reading a quantization's profile");
}
