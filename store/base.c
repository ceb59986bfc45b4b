/* base.c — what every store file shares, on any connection: the error message and SQL
 * failures, statuses, clocks, retried transactions, binding and stepping, and the writer
 * thread's own read-write connection. Calls no other store file, so store.c (opening,
 * run records) and writer.c (the batched writer) both build on it without a circle. */
#include "internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- errors, statuses, clocks ------------------------------------------------------ */

static _Thread_local char err_msg[1536];

const char *store_error(void) { return err_msg; }

int store_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return code;
}

int store_sql_fail(store *s, int rc, const char *what)
{
    return store_sql_fail_on(s, s ? s->db : NULL, rc, what);
}

int store_sql_fail_on(store *s, sqlite3 *db, int rc, const char *what)
{
    const char *txt = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    const char *path = s ? s->path : "?";
    switch (rc & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
        return store_fail(STORE_ENOTDB, "%s: %s is not a usable nnbench database (%s); "
                          "pass another file with --db", what, path, txt);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return store_fail(STORE_EBUSY, "%s: %s stayed locked by another process (%s); "
                          "try again when the other writer is done", what, path, txt);
    case SQLITE_READONLY:
        return store_fail(STORE_EREADONLY, "%s: %s is read-only (%s)", what, path, txt);
    case SQLITE_NOMEM:
        return store_fail(STORE_ENOMEM, "%s: out of memory", what);
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
        return store_fail(STORE_EIO, "%s: %s: %s", what, path, txt);
    default:
        return store_fail(STORE_ESQL, "%s: %s: %s", what, path, txt);
    }
}

const char *store_status_name(store_run_status s)
{
    static const char *const names[STORE_RUN_N_STATUS] = {
        "running", "finished", "failed", "diverged", "interrupted", "crashed" };
    return (unsigned)s < STORE_RUN_N_STATUS ? names[s] : "?";
}

int store_status_parse(const char *name, store_run_status *out)
{
    for (int i = 0; i < STORE_RUN_N_STATUS; i++)
        if (name && !strcmp(name, store_status_name((store_run_status)i))) {
            *out = (store_run_status)i;
            return STORE_OK;
        }
    return store_fail(STORE_EINVAL, "unknown status '%s' (expected running, finished, failed, "
                      "diverged, interrupted or crashed)", name ? name : "");
}

uint64_t store_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double store_unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void store_run_init(store_run *r)
{
    memset(r, 0, sizeof *r);
    r->status = STORE_RUN_RUNNING;
    r->started = r->ended = r->target_loss = NAN;
    r->wall_s = r->hybrid_s = NAN;
    r->final_train_loss = r->best_train_loss = r->final_test_loss = NAN;
    r->final_test_acc = r->best_test_acc = r->samples_per_s = NAN;
    r->wall_to_target = r->hybrid_to_target = r->kappa_first = r->kappa_last = NAN;
    r->n_params = r->peak_bytes = r->peak_rss = -1;
    r->threads = r->n_train = r->n_test = r->epochs = -1;
    r->total_steps = r->steps = r->steps_to_target = r->solves = r->quantum_solves = -1;
}

void store_run_clear(store_run *r)
{
    free(r->exp_text);
    r->exp_text = NULL;
}

/* ---- transactions ------------------------------------------------------------------ */

int store_txn_begin_on(store *s, sqlite3 *db)
{
    int rc = SQLITE_OK;
    for (int i = 0; i < BUSY_RETRIES; i++) {
        rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
    }
    return rc == SQLITE_OK ? STORE_OK : store_sql_fail_on(s, db, rc, "starting a write");
}

int store_txn_commit_on(store *s, sqlite3 *db)
{
    int rc = SQLITE_OK;
    for (int i = 0; i < BUSY_RETRIES; i++) {
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_BUSY) break;
    }
    if (rc != SQLITE_OK) {
        int st = store_sql_fail_on(s, db, rc, "committing");
        store_txn_rollback_on(db);
        return st;
    }
    return STORE_OK;
}

void store_txn_rollback_on(sqlite3 *db)
{
    if (!sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

int store_txn_begin(store *s) { return store_txn_begin_on(s, s->db); }
int store_txn_commit(store *s) { return store_txn_commit_on(s, s->db); }
void store_txn_rollback(store *s) { store_txn_rollback_on(s->db); }

int store_connect_rw(store *s, sqlite3 **db)
{
    int rc = sqlite3_open_v2(s->path, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(*db, BUSY_TIMEOUT_MS);
        /* Foreign keys off: this is the writer thread's connection, see internal.h. */
        rc = sqlite3_exec(*db, "PRAGMA foreign_keys=OFF; PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
    }
    if (rc == SQLITE_OK) return STORE_OK;
    int st = store_sql_fail_on(s, *db, rc, "opening the database for writing");
    sqlite3_close_v2(*db);
    *db = NULL;
    return st;
}

void store_bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v && *v) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, i);
}

/* NaN/Inf become NULL: SQLite has no NaN, and NULL reads back as "unknown". */
void store_bind_real(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
    else sqlite3_bind_null(st, i);
}

/* Counts documented as -1 when unknown. */
void store_bind_count(sqlite3_stmt *st, int i, long long v)
{
    if (v >= 0) sqlite3_bind_int64(st, i, v);
    else sqlite3_bind_null(st, i);
}

int store_step_done(store *s, sqlite3 *db, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? STORE_OK : store_sql_fail_on(s, db, rc, what);
}
