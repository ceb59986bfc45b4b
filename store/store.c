/* store.c — opening the database (header check, read-only fallback, version check,
 * migrations, crash marking) and writing runs with batched, retried transactions. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    const char *txt = s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
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

/* SQLite's busy handler already waits up to the busy timeout per attempt; a few more
 * attempts ride out a writer that holds the lock for long (e.g. a big delete). */
#define BUSY_TIMEOUT_MS 5000
#define BUSY_RETRIES 6

int store_txn_begin(store *s)
{
    int rc = SQLITE_OK;
    for (int i = 0; i < BUSY_RETRIES; i++) {
        rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
    }
    return rc == SQLITE_OK ? STORE_OK : store_sql_fail(s, rc, "starting a write");
}

int store_txn_commit(store *s)
{
    int rc = SQLITE_OK;
    for (int i = 0; i < BUSY_RETRIES; i++) {
        rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_BUSY) break;
    }
    if (rc != SQLITE_OK) {
        int st = store_sql_fail(s, rc, "committing");
        store_txn_rollback(s);
        return st;
    }
    return STORE_OK;
}

void store_txn_rollback(store *s)
{
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

static int exec(store *s, const char *sql, const char *what)
{
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? STORE_OK : store_sql_fail(s, rc, what);
}

static int query_int(store *s, const char *sql, long long *out)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) return store_sql_fail(s, rc, "reading the database");
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) { *out = sqlite3_column_int64(st, 0); rc = SQLITE_OK; }
    else if (rc == SQLITE_DONE) { *out = 0; rc = SQLITE_OK; }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? STORE_OK : store_sql_fail(s, rc, "reading the database");
}

/* ---- migrations -------------------------------------------------------------------- */

/* v0 -> v1: the first schema (store/schema.sql). Later versions append an ALTER/CREATE
 * script here and bump STORE_SCHEMA_VERSION; schema.sql always shows the latest. */
const char *const store_migrations[] = { store_schema_sql };
const int store_n_migrations = sizeof store_migrations / sizeof store_migrations[0];

int store_migrate_with(store *s, const char *const *migs, int n)
{
    int st = store_txn_begin(s);
    if (st) return st;
    long long v;
    /* Re-read inside the write lock: another process may have migrated meanwhile. */
    if ((st = query_int(s, "PRAGMA user_version", &v))) goto fail;
    if (v < 0 || v > n) {
        st = store_fail(STORE_EVERSION, "%s has schema version %lld, newer than this nnbench "
                        "understands (%d): upgrade nnbench or use another --db", s->path, v, n);
        goto fail;
    }
    for (int i = (int)v; i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, "migrating schema v%d to v%d", i, i + 1);
        if ((st = exec(s, migs[i], what))) goto fail;
    }
    if (v < n) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", n);
        if ((st = exec(s, sql, "setting the schema version"))) goto fail;
    }
    return store_txn_commit(s);
fail:
    store_txn_rollback(s);
    return st;
}

/* ---- opening ----------------------------------------------------------------------- */

/* Looks at the first bytes ourselves so that SQLite never writes to a file that is not
 * a database (SQLite would happily treat some garbage as a journal to roll back). */
static int check_header(const char *path, int *exists)
{
    struct stat sb;
    *exists = 0;
    if (stat(path, &sb)) {
        if (errno == ENOENT) return STORE_OK;
        return store_fail(STORE_EIO, "cannot access database %s: %s", path, strerror(errno));
    }
    *exists = 1;
    if (S_ISDIR(sb.st_mode))
        return store_fail(STORE_EIO, "%s is a directory, not a database file; "
                          "give a file path with --db", path);
    if (sb.st_size == 0) return STORE_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return store_fail(STORE_EIO, "cannot read database %s: %s", path, strerror(errno));
    unsigned char hdr[100];
    ssize_t got = read(fd, hdr, sizeof hdr);
    close(fd);
    if (got < (ssize_t)sizeof hdr || memcmp(hdr, "SQLite format 3", 16))
        return store_fail(STORE_ENOTDB, "%s is not an SQLite database (bad header); it was left "
                          "untouched — give another file with --db", path);
    return STORE_OK;
}

/* Writable for us AND not marked read-only: root passes access(W_OK) on a chmod 444
 * file, but a user who removed every write bit asked for a read-only database. */
static int path_writable(const char *path)
{
    struct stat sb;
    return access(path, W_OK) == 0 && stat(path, &sb) == 0 && (sb.st_mode & 0222);
}

static int dir_writable(const char *path)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    return path_writable(dir);
}

static void uri_escape(char *out, size_t cap, const char *path)
{
    size_t o = 0;
    o += (size_t)snprintf(out, cap, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p && o + 4 < cap; p++) {
        if (*p == '%' || *p == '?' || *p == '#' || *p < 0x21 || *p >= 0x7f)
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", *p);
        else
            out[o++] = (char)*p;
    }
    out[o] = 0;
    snprintf(out + o, cap - o, "?immutable=1");
}

static int sqlite_open(store *s, int readonly, int immutable, int create)
{
    if (s->db) { sqlite3_close_v2(s->db); s->db = NULL; }
    int fl = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    char uri[3200];
    const char *name = s->path;
    if (immutable) { uri_escape(uri, sizeof uri, s->path); name = uri; fl |= SQLITE_OPEN_URI; }
    int rc = sqlite3_open_v2(name, &s->db, fl | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) return store_sql_fail(s, rc, "opening the database");
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    s->readonly = readonly;
    s->immutable = immutable;
    return STORE_OK;
}

/* Reads user_version and touches the schema so that a broken file fails here, before
 * anything is written. */
static int probe(store *s, long long *version, long long *n_tables, long long *n_ours)
{
    /* One statement = one read transaction: another process creating the schema at the
     * same moment is seen either entirely or not at all. */
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "SELECT (SELECT user_version FROM pragma_user_version), "
                                "(SELECT count(*) FROM sqlite_master WHERE type='table'), "
                                "(SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                                "('runs','params','metrics','op_stats','run_profile','solver_events',"
                                "'system_info'))", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        *version = sqlite3_column_int64(st, 0);
        *n_tables = sqlite3_column_int64(st, 1);
        *n_ours = sqlite3_column_int64(st, 2);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? STORE_OK : store_sql_fail(s, rc, "reading the database");
}

static int pid_gone(const char *host, const char *my_host, long pid)
{
    if (!host || strcmp(host, my_host) || pid <= 0) return 0;
    return kill((pid_t)pid, 0) == -1 && errno == ESRCH;
}

/* Runs left 'running' by a process of this host that no longer exists crashed. */
static int mark_crashed(store *s)
{
    sqlite3_stmt *sel = NULL, *upd = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT id, host, pid, steps FROM runs WHERE status='running'",
                                -1, &sel, NULL);
    if (rc != SQLITE_OK) return store_sql_fail(s, rc, "looking for crashed runs");
    long long ids[256];
    long steps[256], pids[256];
    size_t n = 0;
    while ((rc = sqlite3_step(sel)) == SQLITE_ROW && n < 256) {
        const char *host = (const char *)sqlite3_column_text(sel, 1);
        long pid = (long)sqlite3_column_int64(sel, 2);
        if (pid_gone(host, s->host, pid)) {
            ids[n] = sqlite3_column_int64(sel, 0);
            pids[n] = pid;
            steps[n++] = sqlite3_column_type(sel, 3) == SQLITE_NULL ? 0 : (long)sqlite3_column_int64(sel, 3);
        }
    }
    sqlite3_finalize(sel);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return store_sql_fail(s, rc, "looking for crashed runs");
    if (!n) return STORE_OK;
    int st = store_txn_begin(s);
    if (st) return st;
    rc = sqlite3_prepare_v2(s->db, "UPDATE runs SET status='crashed', error=?2, "
                            "ended=coalesce(started+wall_s, started) WHERE id=?1 AND status='running'",
                            -1, &upd, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        char why[256];
        snprintf(why, sizeof why, "process %ld on %s ended without finishing the run "
                 "(killed or crashed); data up to step %ld was kept", pids[i], s->host, steps[i]);
        sqlite3_bind_int64(upd, 1, ids[i]);
        sqlite3_bind_text(upd, 2, why, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(upd);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        sqlite3_reset(upd);
    }
    sqlite3_finalize(upd);
    if (rc != SQLITE_OK) { st = store_sql_fail(s, rc, "marking crashed runs"); store_txn_rollback(s); return st; }
    return store_txn_commit(s);
}

int store_open(const char *path, int flags, store **out)
{
    *out = NULL;
    if (!path || !*path) return store_fail(STORE_EINVAL, "no database path given");
    if ((flags & STORE_OPEN_READONLY) && (flags & (STORE_OPEN_CREATE | STORE_OPEN_WRITE)))
        return store_fail(STORE_EINVAL, "a database cannot be opened read-only for writing");
    int exists, st = check_header(path, &exists);
    if (st) return st;
    if (!exists && !(flags & STORE_OPEN_CREATE))
        return store_fail(STORE_ENOTFOUND, "no database at %s yet: store a run first, e.g. "
                          "nnbench run samples/spirals-mlp.ini --db %s", path, path);
    store *s = calloc(1, sizeof *s);
    if (!s) return store_fail(STORE_ENOMEM, "out of memory opening %s", path);
    snprintf(s->path, sizeof s->path, "%s", path);
    if (gethostname(s->host, sizeof s->host - 1)) snprintf(s->host, sizeof s->host, "localhost");

    int writable = exists ? path_writable(path) && dir_writable(path) : dir_writable(path);
    int readonly = (flags & STORE_OPEN_READONLY) || !writable;
    if (readonly && (flags & (STORE_OPEN_WRITE | STORE_OPEN_CREATE))) {
        store_fail(STORE_EREADONLY, "database %s is read-only (%s not writable): runs cannot be "
                   "stored there; use --db with a writable path or --no-db", path,
                   exists && !path_writable(path) ? "the file is" : "its directory is");
        free(s);
        return STORE_EREADONLY;
    }
    long long version = 0, n_tables = 0, n_ours = 0;
    st = sqlite_open(s, readonly, 0, (flags & STORE_OPEN_CREATE) != 0);
    if (!st) st = probe(s, &version, &n_tables, &n_ours);
    if (st == STORE_EIO && readonly) {
        /* A WAL database whose -shm cannot be created (read-only file or directory):
         * immutable mode reads the main file without any locking or shared memory. */
        st = sqlite_open(s, 1, 1, 0);
        if (!st) st = probe(s, &version, &n_tables, &n_ours);
    }
    if (st) goto fail;
    if (version > STORE_SCHEMA_VERSION) {
        st = store_fail(STORE_EVERSION, "%s has schema version %lld, written by a newer nnbench "
                        "(this one understands up to %d): upgrade nnbench or use another --db",
                        path, version, STORE_SCHEMA_VERSION);
        goto fail;
    }
    if (version < 0) {   /* found by fuzzing: migrations were indexed by it */
        st = store_fail(STORE_ENOTDB, "%s has schema version %lld, which no nnbench writes: not an nnbench "
                        "database; it was left untouched — give another file with --db", path, version);
        goto fail;
    }
    if (version == 0 && n_tables > n_ours) {
        st = store_fail(STORE_ENOTDB, "%s is an SQLite database but not an nnbench one (it has "
                        "other tables); it was left untouched — give another file with --db", path);
        goto fail;
    }
    if (readonly) {
        if (version < STORE_SCHEMA_VERSION) {
            st = store_fail(version == 0 ? STORE_ENOTDB : STORE_EREADONLY,
                            "%s has schema version %lld and is read-only, so it cannot be migrated to "
                            "v%d: open it once with write access", path, version, STORE_SCHEMA_VERSION);
            goto fail;
        }
    } else {
        char mode[16] = "";
        sqlite3_stmt *jm;
        int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &jm, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(jm)) == SQLITE_ROW) {
            snprintf(mode, sizeof mode, "%s", (const char *)sqlite3_column_text(jm, 0));
            rc = SQLITE_OK;
        }
        sqlite3_finalize(jm);
        if (rc != SQLITE_OK) { st = store_sql_fail(s, rc, "switching to WAL mode"); goto fail; }
        if (strcmp(mode, "wal")) {
            st = store_fail(STORE_EIO, "%s: cannot use WAL mode (journal mode stays '%s'); is it "
                            "on a network file system?", path, mode);
            goto fail;
        }
        /* NORMAL in WAL mode: a commit survives the process being killed (only a power
         * loss can undo the last commits), at a fraction of FULL's fsyncs. */
        if ((st = exec(s, "PRAGMA synchronous=NORMAL", "setting synchronous"))) goto fail;
        if (version < STORE_SCHEMA_VERSION &&
            (st = store_migrate_with(s, store_migrations, store_n_migrations)))
            goto fail;
        if ((st = mark_crashed(s))) goto fail;
    }
    s->last_flush_ns = store_now_ns();
    *out = s;
    return STORE_OK;
fail:
    sqlite3_close_v2(s->db);
    free(s);
    return st;
}

int store_is_readonly(const store *s) { return s->readonly; }
const char *store_path(const store *s) { return s->path; }

void store_close(store *s)
{
    if (!s) return;
    if (!s->readonly) store_flush(s);
    sqlite3_finalize(s->ins_metric);
    sqlite3_finalize(s->ins_solver);
    sqlite3_finalize(s->upd_progress);
    sqlite3_close_v2(s->db);
    for (int i = 0; i < s->n_keys; i++) free(s->keys[i]);
    free(s->pts);
    free(s->solves);
    free(s);
}

int store_watch_token(store *s, uint64_t *token)
{
    long long dv, maxid;
    int st = query_int(s, "PRAGMA data_version", &dv);
    if (!st) st = query_int(s, "SELECT coalesce(max(id),0) FROM runs", &maxid);
    if (st) return st;
    uint64_t h = (uint64_t)dv * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)sqlite3_total_changes64(s->db) * 0xC2B2AE3D27D4EB4Full;
    h ^= (uint64_t)maxid << 17;
    *token = h;
    return STORE_OK;
}

/* ---- writing ----------------------------------------------------------------------- */

static int writable(store *s, const char *what)
{
    if (s->readonly)
        return store_fail(STORE_EREADONLY, "%s: database %s was opened read-only", what, s->path);
    return STORE_OK;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v && *v) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, i);
}

/* NaN/Inf become NULL: SQLite has no NaN, and NULL reads back as "unknown". */
static void bind_real(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
    else sqlite3_bind_null(st, i);
}

/* Counts documented as -1 when unknown. */
static void bind_count(sqlite3_stmt *st, int i, long long v)
{
    if (v >= 0) sqlite3_bind_int64(st, i, v);
    else sqlite3_bind_null(st, i);
}

static int step_done(store *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? STORE_OK : store_sql_fail(s, rc, what);
}

/* Binds the summary columns in the order of SUMMARY_SET starting at parameter i. */
#define SUMMARY_SET                                                                           \
    "steps=?%d,epochs=?%d,wall_s=?%d,hybrid_s=?%d,final_train_loss=?%d,best_train_loss=?%d,"  \
    "final_test_loss=?%d,final_test_acc=?%d,best_test_acc=?%d,samples_per_s=?%d,"             \
    "steps_to_target=?%d,wall_to_target=?%d,hybrid_to_target=?%d,peak_bytes=?%d,peak_rss=?%d,"\
    "solves=?%d,quantum_solves=?%d,kappa_first=?%d,kappa_last=?%d"

static int bind_summary(sqlite3_stmt *st, int i, const store_run *r)
{
    bind_count(st, i++, r->steps);
    bind_count(st, i++, r->epochs);
    bind_real(st, i++, r->wall_s);
    bind_real(st, i++, r->hybrid_s);
    bind_real(st, i++, r->final_train_loss);
    bind_real(st, i++, r->best_train_loss);
    bind_real(st, i++, r->final_test_loss);
    bind_real(st, i++, r->final_test_acc);
    bind_real(st, i++, r->best_test_acc);
    bind_real(st, i++, r->samples_per_s);
    bind_count(st, i++, r->steps_to_target);
    bind_real(st, i++, r->wall_to_target);
    bind_real(st, i++, r->hybrid_to_target);
    bind_count(st, i++, r->peak_bytes);
    bind_count(st, i++, r->peak_rss);
    bind_count(st, i++, r->solves);
    bind_count(st, i++, r->quantum_solves);
    bind_real(st, i++, r->kappa_first);
    bind_real(st, i++, r->kappa_last);
    return i;
}

int store_run_begin(store *s, const store_run *r, long long *id)
{
    int st = writable(s, "storing a run");
    if (st) return st;
    static const char sql[] =
        "INSERT INTO runs(name,variant,exp_path,exp_text,seed,status,started,host,pid,version,"
        "optimizer,dataset,model,n_params,threads,total_steps,n_train,n_test,target_loss) "
        "VALUES(?1,?2,?3,?4,?5,'running',?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18)";
    sqlite3_stmt *ins;
    if ((st = store_txn_begin(s))) return st;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &ins, NULL);
    if (rc != SQLITE_OK) { st = store_sql_fail(s, rc, "storing a run"); store_txn_rollback(s); return st; }
    sqlite3_bind_text(ins, 1, r->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(ins, 2, r->variant, -1, SQLITE_TRANSIENT);
    bind_text(ins, 3, r->exp_path);
    bind_text(ins, 4, r->exp_text);
    sqlite3_bind_int64(ins, 5, (sqlite3_int64)r->seed);
    sqlite3_bind_double(ins, 6, isfinite(r->started) ? r->started : store_unix_now());
    bind_text(ins, 7, r->host[0] ? r->host : s->host);
    sqlite3_bind_int64(ins, 8, r->pid ? r->pid : (long)getpid());
    bind_text(ins, 9, r->version);
    bind_text(ins, 10, r->optimizer);
    bind_text(ins, 11, r->dataset);
    bind_text(ins, 12, r->model);
    bind_count(ins, 13, r->n_params);
    bind_count(ins, 14, r->threads);
    bind_count(ins, 15, r->total_steps);
    bind_count(ins, 16, r->n_train);
    bind_count(ins, 17, r->n_test);
    bind_real(ins, 18, r->target_loss);
    rc = sqlite3_step(ins);
    sqlite3_finalize(ins);
    if (rc != SQLITE_DONE) { st = store_sql_fail(s, rc, "storing a run"); store_txn_rollback(s); return st; }
    *id = sqlite3_last_insert_rowid(s->db);
    if ((st = store_txn_commit(s))) return st;
    if (s->n_prog < STORE_MAX_PROGRESS) {
        store_progress *p = &s->prog[s->n_prog++];
        memset(p, 0, sizeof *p);
        p->run = *id;
        p->steps = -1;
        p->epoch = -1;
        p->wall = p->hybrid = p->train_loss = p->best_train_loss = NAN;
        p->test_loss = p->test_acc = p->best_test_acc = p->sps = NAN;
    }
    return STORE_OK;
}

static int put_kv(store *s, long long run, const store_kv *kv, size_t n, const char *table)
{
    int st = writable(s, "storing run details");
    if (st) return st;
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO %s(run,key,value) VALUES(?1,?2,?3)", table);
    if ((st = store_txn_begin(s))) return st;
    sqlite3_stmt *ins;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &ins, NULL);
    if (rc != SQLITE_OK) { st = store_sql_fail(s, rc, table); store_txn_rollback(s); return st; }
    for (size_t i = 0; i < n && !st; i++) {
        sqlite3_bind_int64(ins, 1, run);
        sqlite3_bind_text(ins, 2, kv[i].key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(ins, 3, kv[i].value, -1, SQLITE_TRANSIENT);
        st = step_done(s, ins, table);
    }
    sqlite3_finalize(ins);
    if (st) { store_txn_rollback(s); return st; }
    return store_txn_commit(s);
}

int store_params_put(store *s, long long run, const store_kv *kv, size_t n)
{
    return put_kv(s, run, kv, n, "params");
}

int store_sysinfo_put(store *s, long long run, const store_kv *kv, size_t n)
{
    return put_kv(s, run, kv, n, "system_info");
}

static store_progress *progress_of(store *s, long long run)
{
    for (int i = 0; i < s->n_prog; i++)
        if (s->prog[i].run == run) return &s->prog[i];
    return NULL;
}

static int key_index(store *s, const char *key)
{
    for (int i = s->n_keys - 1; i >= 0; i--)
        if (!strcmp(s->keys[i], key)) return i;
    if (s->n_keys == STORE_MAX_KEYS)
        return store_fail(STORE_EINVAL, "too many distinct metric keys (max %d) at '%s'",
                          STORE_MAX_KEYS, key);
    if (!(s->keys[s->n_keys] = strdup(key))) return store_fail(STORE_ENOMEM, "out of memory");
    return s->n_keys++;
}

static int maybe_flush(store *s)
{
    if (s->n_pts + s->n_solves >= STORE_FLUSH_POINTS) return store_flush(s);
    return store_flush_due(s);
}

int store_flush_due(store *s)
{
    if (s->readonly || (!s->n_pts && !s->n_solves)) return STORE_OK;
    if (store_now_ns() - s->last_flush_ns >= (uint64_t)STORE_FLUSH_MS * 1000000u)
        return store_flush(s);
    return STORE_OK;
}

int store_metric_add(store *s, long long run, long step, int epoch, double wall_s,
                     double hybrid_s, const char *key, double value)
{
    int st = writable(s, "storing a metric");
    if (st) return st;
    if (!key || !*key) return store_fail(STORE_EINVAL, "metric without a key at step %ld", step);
    int k = key_index(s, key);
    if (k < 0) return k;
    if (s->n_pts == s->cap_pts) {
        size_t cap = s->cap_pts ? s->cap_pts * 2 : 1024;
        store_point *p = realloc(s->pts, cap * sizeof *p);
        if (!p) return store_fail(STORE_ENOMEM, "out of memory buffering metrics");
        s->pts = p;
        s->cap_pts = cap;
    }
    s->pts[s->n_pts++] = (store_point){ run, step, epoch, k, wall_s, hybrid_s, value };
    store_progress *p = progress_of(s, run);
    if (p) {
        p->dirty = 1;
        if (step > p->steps) p->steps = step;
        if (epoch > p->epoch) p->epoch = epoch;
        if (isfinite(wall_s)) p->wall = wall_s;
        if (isfinite(hybrid_s)) p->hybrid = hybrid_s;
        if (!strcmp(key, "train_loss")) {
            p->train_loss = value;
            if (isfinite(value) && !(value >= p->best_train_loss)) p->best_train_loss = value;
        } else if (!strcmp(key, "test_loss")) {
            p->test_loss = value;
        } else if (!strcmp(key, "test_acc")) {
            p->test_acc = value;
            if (isfinite(value) && !(value <= p->best_test_acc)) p->best_test_acc = value;
        } else if (!strcmp(key, "samples_per_s")) {
            p->sps = value;
        }
    }
    return maybe_flush(s);
}

int store_solver_event_add(store *s, long long run, const store_solver_event *ev)
{
    int st = writable(s, "storing a solver event");
    if (st) return st;
    if (s->n_solves == s->cap_solves) {
        size_t cap = s->cap_solves ? s->cap_solves * 2 : 256;
        store_pending_solve *p = realloc(s->solves, cap * sizeof *p);
        if (!p) return store_fail(STORE_ENOMEM, "out of memory buffering solver events");
        s->solves = p;
        s->cap_solves = cap;
    }
    s->solves[s->n_solves++] = (store_pending_solve){ run, *ev };
    return maybe_flush(s);
}

static int prepare_writers(store *s)
{
    int rc = SQLITE_OK;
    if (!s->ins_metric)
        rc = sqlite3_prepare_v3(s->db, "INSERT OR REPLACE INTO metrics(run,step,epoch,wall,hybrid,key,value) "
                                "VALUES(?1,?2,?3,?4,?5,?6,?7)", -1, SQLITE_PREPARE_PERSISTENT,
                                &s->ins_metric, NULL);
    if (rc == SQLITE_OK && !s->ins_solver)
        rc = sqlite3_prepare_v3(s->db, "INSERT INTO solver_events(run,step,block,n,nnz_per_row,"
                                "kappa_fro,kappa_lapack,kappa_gersh,kappa_exact,kappa_used,est_ns,route,"
                                "pred_classical_ns,pred_quantum_ns,measured_classical_ns,"
                                "simulated_quantum_ns,residual,shift,shift_raised) VALUES(?1,?2,?3,?4,?5,"
                                "?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)", -1,
                                SQLITE_PREPARE_PERSISTENT, &s->ins_solver, NULL);
    if (rc == SQLITE_OK && !s->upd_progress)
        rc = sqlite3_prepare_v3(s->db, "UPDATE runs SET steps=?2,epochs=?3,wall_s=?4,hybrid_s=?5,"
                                "final_train_loss=?6,best_train_loss=?7,final_test_loss=?8,"
                                "final_test_acc=?9,best_test_acc=?10,samples_per_s=?11 "
                                "WHERE id=?1 AND status='running'", -1, SQLITE_PREPARE_PERSISTENT,
                                &s->upd_progress, NULL);
    return rc == SQLITE_OK ? STORE_OK : store_sql_fail(s, rc, "preparing writes");
}

static int write_pending(store *s)
{
    int st = STORE_OK;
    sqlite3_stmt *m = s->ins_metric;
    for (size_t i = 0; i < s->n_pts && !st; i++) {
        const store_point *p = &s->pts[i];
        sqlite3_bind_int64(m, 1, p->run);
        sqlite3_bind_int64(m, 2, p->step);
        sqlite3_bind_int(m, 3, p->epoch);
        bind_real(m, 4, p->wall);
        bind_real(m, 5, p->hybrid);
        sqlite3_bind_text(m, 6, s->keys[p->key], -1, SQLITE_STATIC);
        bind_real(m, 7, p->value);
        st = step_done(s, m, "storing metrics");
    }
    sqlite3_stmt *v = s->ins_solver;
    for (size_t i = 0; i < s->n_solves && !st; i++) {
        const store_solver_event *e = &s->solves[i].ev;
        sqlite3_bind_int64(v, 1, s->solves[i].run);
        sqlite3_bind_int64(v, 2, e->step);
        sqlite3_bind_int(v, 3, e->block);
        sqlite3_bind_int(v, 4, e->n);
        bind_real(v, 5, e->nnz_per_row);
        bind_real(v, 6, e->kappa_fro);
        bind_real(v, 7, e->kappa_lapack);
        bind_real(v, 8, e->kappa_gersh);
        bind_real(v, 9, e->kappa_exact);
        bind_real(v, 10, e->kappa_used);
        bind_real(v, 11, e->est_ns);
        sqlite3_bind_int(v, 12, e->route);
        bind_real(v, 13, e->pred_classical_ns);
        bind_real(v, 14, e->pred_quantum_ns);
        bind_real(v, 15, e->measured_classical_ns);
        bind_real(v, 16, e->simulated_quantum_ns);
        bind_real(v, 17, e->residual);
        bind_real(v, 18, e->shift);
        sqlite3_bind_int(v, 19, e->shift_raised);
        st = step_done(s, v, "storing solver events");
    }
    sqlite3_stmt *u = s->upd_progress;
    for (int i = 0; i < s->n_prog && !st; i++) {
        store_progress *p = &s->prog[i];
        if (!p->dirty) continue;
        sqlite3_bind_int64(u, 1, p->run);
        bind_count(u, 2, p->steps);
        bind_count(u, 3, p->epoch < 0 ? -1 : p->epoch + 1);
        bind_real(u, 4, p->wall);
        bind_real(u, 5, p->hybrid);
        bind_real(u, 6, p->train_loss);
        bind_real(u, 7, p->best_train_loss);
        bind_real(u, 8, p->test_loss);
        bind_real(u, 9, p->test_acc);
        bind_real(u, 10, p->best_test_acc);
        bind_real(u, 11, p->sps);
        st = step_done(s, u, "updating run progress");
    }
    return st;
}

int store_flush(store *s)
{
    if (s->readonly) return STORE_OK;
    s->last_flush_ns = store_now_ns();
    if (!s->n_pts && !s->n_solves) return STORE_OK;
    int st = prepare_writers(s);
    if (st) return st;
    if ((st = store_txn_begin(s))) return st;
    if ((st = write_pending(s))) { store_txn_rollback(s); return st; }
    if ((st = store_txn_commit(s))) return st;
    s->n_pts = s->n_solves = 0;
    for (int i = 0; i < s->n_prog; i++) s->prog[i].dirty = 0;
    return STORE_OK;
}

int store_op_stats_put(store *s, long long run, const store_op_row *rows, size_t n,
                       const store_profile *sum)
{
    int st = writable(s, "storing op stats");
    if (st) return st;
    if ((st = store_txn_begin(s))) return st;
    sqlite3_stmt *del = NULL, *ins = NULL, *prof = NULL;
    int rc = sqlite3_prepare_v2(s->db, "DELETE FROM op_stats WHERE run=?1", -1, &del, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, "INSERT INTO op_stats(run,name,layer,kind,calls,total_ns,"
                                "self_ns,min_ns,max_ns,flops,bytes,cycles,instructions,l1d_miss,"
                                "l2_miss,l3_miss,fp_ops,self_mem,peak_mem) VALUES(?1,?2,?3,?4,?5,?6,?7,"
                                "?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)", -1, &ins, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO run_profile(run,total_self_ns,"
                                "overhead_ns,events,hw_counters,counters_note,counters_used,peak_bytes,"
                                "live_bytes,total_alloc_bytes,peak_rss,peak_gflops) VALUES(?1,?2,?3,?4,"
                                "?5,?6,?7,?8,?9,?10,?11,?12)", -1, &prof, NULL);
    if (rc != SQLITE_OK) { st = store_sql_fail(s, rc, "storing op stats"); goto done; }
    sqlite3_bind_int64(del, 1, run);
    if ((st = step_done(s, del, "storing op stats"))) goto done;
    for (size_t i = 0; i < n && !st; i++) {
        const store_op_row *o = &rows[i];
        sqlite3_bind_int64(ins, 1, run);
        sqlite3_bind_text(ins, 2, o->name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(ins, 3, o->layer, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(ins, 4, o->kind);
        const int64_t v[] = { o->calls, o->total_ns, o->self_ns, o->min_ns, o->max_ns, o->flops,
                              o->bytes, o->cycles, o->instructions, o->l1d_miss, o->l2_miss,
                              o->l3_miss, o->fp_ops };
        for (int j = 0; j < 13; j++)
            if (j >= 7) bind_count(ins, 5 + j, v[j]);
            else sqlite3_bind_int64(ins, 5 + j, v[j]);
        sqlite3_bind_int64(ins, 18, o->self_mem);
        sqlite3_bind_int64(ins, 19, o->peak_mem);
        st = step_done(s, ins, "storing op stats");
    }
    if (!st && sum) {
        sqlite3_bind_int64(prof, 1, run);
        sqlite3_bind_int64(prof, 2, sum->total_self_ns);
        sqlite3_bind_int64(prof, 3, sum->overhead_ns);
        sqlite3_bind_int64(prof, 4, sum->events);
        sqlite3_bind_int(prof, 5, sum->hw_counters);
        bind_text(prof, 6, sum->counters_note);
        bind_text(prof, 7, sum->counters_used);
        sqlite3_bind_int64(prof, 8, sum->peak_bytes);
        sqlite3_bind_int64(prof, 9, sum->live_bytes);
        sqlite3_bind_int64(prof, 10, sum->total_alloc_bytes);
        sqlite3_bind_int64(prof, 11, sum->peak_rss);
        bind_real(prof, 12, sum->peak_gflops);
        st = step_done(s, prof, "storing the profile summary");
    }
done:
    sqlite3_finalize(del);
    sqlite3_finalize(ins);
    sqlite3_finalize(prof);
    if (st) { store_txn_rollback(s); return st; }
    return store_txn_commit(s);
}

static void progress_drop(store *s, long long run)
{
    for (int i = 0; i < s->n_prog; i++)
        if (s->prog[i].run == run) {
            s->prog[i] = s->prog[--s->n_prog];
            return;
        }
}

int store_run_end(store *s, long long run, const store_run *r)
{
    int st = writable(s, "finishing a run");
    if (st) return st;
    if ((st = store_flush(s))) return st;
    char sql[1024];
    snprintf(sql, sizeof sql, "UPDATE runs SET status=?1,error=?2,ended=?3," SUMMARY_SET " WHERE id=?23",
             4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22);
    if ((st = store_txn_begin(s))) return st;
    sqlite3_stmt *up;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &up, NULL);
    if (rc != SQLITE_OK) { st = store_sql_fail(s, rc, "finishing a run"); store_txn_rollback(s); return st; }
    sqlite3_bind_text(up, 1, store_status_name(r->status), -1, SQLITE_STATIC);
    bind_text(up, 2, r->error);
    sqlite3_bind_double(up, 3, isfinite(r->ended) ? r->ended : store_unix_now());
    bind_summary(up, 4, r);
    sqlite3_bind_int64(up, 23, run);
    rc = sqlite3_step(up);
    sqlite3_finalize(up);
    if (rc != SQLITE_DONE) { st = store_sql_fail(s, rc, "finishing a run"); store_txn_rollback(s); return st; }
    if (sqlite3_changes(s->db) == 0) {
        store_txn_rollback(s);
        return store_fail(STORE_ENOTFOUND, "run %lld is not in %s (deleted meanwhile?)", run, s->path);
    }
    if ((st = store_txn_commit(s))) return st;
    progress_drop(s, run);
    return STORE_OK;
}

int store_run_set_status(store *s, long long run, store_run_status status, const char *error)
{
    int st = writable(s, "changing a run's status");
    if (st) return st;
    if ((unsigned)status >= STORE_RUN_N_STATUS)
        return store_fail(STORE_EINVAL, "invalid run status %d", (int)status);
    if ((st = store_flush(s))) return st;
    sqlite3_stmt *up;
    int rc = sqlite3_prepare_v2(s->db, "UPDATE runs SET status=?2, error=?3, "
                                "ended=CASE WHEN ?2='running' THEN NULL ELSE ?4 END WHERE id=?1",
                                -1, &up, NULL);
    if (rc != SQLITE_OK) return store_sql_fail(s, rc, "changing a run's status");
    sqlite3_bind_int64(up, 1, run);
    sqlite3_bind_text(up, 2, store_status_name(status), -1, SQLITE_STATIC);
    bind_text(up, 3, error);
    sqlite3_bind_double(up, 4, store_unix_now());
    for (int i = 0; i < BUSY_RETRIES && (rc = sqlite3_step(up)) == SQLITE_BUSY; i++) sqlite3_reset(up);
    sqlite3_finalize(up);
    if (rc != SQLITE_DONE) return store_sql_fail(s, rc, "changing a run's status");
    if (sqlite3_changes(s->db) == 0)
        return store_fail(STORE_ENOTFOUND, "no run %lld in %s", run, s->path);
    if (status != STORE_RUN_RUNNING) progress_drop(s, run);
    return STORE_OK;
}

int store_runs_delete(store *s, const long long *ids, size_t n)
{
    int st = writable(s, "deleting runs");
    if (st) return st;
    if ((st = store_flush(s))) return st;
    static const char *const tables[] = { "metrics", "params", "op_stats", "run_profile",
                                          "solver_events", "system_info" };
    if ((st = store_txn_begin(s))) return st;
    sqlite3_stmt *chk = NULL, *del[7] = { 0 };
    int rc = sqlite3_prepare_v2(s->db, "SELECT 1 FROM runs WHERE id=?1", -1, &chk, NULL);
    for (int t = 0; t < 7 && rc == SQLITE_OK; t++) {
        char sql[96];
        snprintf(sql, sizeof sql, "DELETE FROM %s WHERE %s=?1", t < 6 ? tables[t] : "runs",
                 t < 6 ? "run" : "id");
        rc = sqlite3_prepare_v2(s->db, sql, -1, &del[t], NULL);
    }
    if (rc != SQLITE_OK) { st = store_sql_fail(s, rc, "deleting runs"); goto done; }
    for (size_t i = 0; i < n && !st; i++) {
        sqlite3_bind_int64(chk, 1, ids[i]);
        rc = sqlite3_step(chk);
        sqlite3_reset(chk);
        if (rc == SQLITE_DONE) { st = store_fail(STORE_ENOTFOUND, "no run %lld in %s; nothing was deleted", ids[i], s->path); break; }
        if (rc != SQLITE_ROW) { st = store_sql_fail(s, rc, "deleting runs"); break; }
        for (int t = 0; t < 7 && !st; t++) {
            sqlite3_bind_int64(del[t], 1, ids[i]);
            st = step_done(s, del[t], "deleting runs");
        }
    }
done:
    sqlite3_finalize(chk);
    for (int t = 0; t < 7; t++) sqlite3_finalize(del[t]);
    if (st) { store_txn_rollback(s); return st; }
    if ((st = store_txn_commit(s))) return st;
    for (size_t i = 0; i < n; i++) progress_drop(s, ids[i]);
    return STORE_OK;
}
