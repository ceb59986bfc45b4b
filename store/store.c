/* store.c — opening the database (path and header checks, read-only look first, version
 * check, migrations, crash marking) and the run records written on the caller's connection
 * (begin, config, op stats, end, status, delete) in retried transactions; metric points and
 * solver events go through the writer thread (writer.c). */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

int store_migrate_with(store *s, const char *const *migs, int n)
{
    int st = store_txn_begin(s);
    if (st) return st;
    long long v;
    /* Re-read inside the write lock: another process may have migrated meanwhile. */
    if ((st = query_int(s, "PRAGMA user_version", &v))) goto fail;
    if (v < 0) {
        st = store_fail(STORE_ENOTDB, "%s has schema version %lld; no nnbench writes a negative "
                        "version, so it is not an nnbench database (or it was damaged): it was left "
                        "untouched — give another file with --db", s->path, v);
        goto fail;
    }
    if (v > n) {
        st = store_fail(STORE_EVERSION, "%s has schema version %lld, newer than this nnbench "
                        "understands (%d): upgrade nnbench or use another --db", s->path, v, n);
        goto fail;
    }
    /* migs[0] creates a new database whole, at the latest version: the later steps are
     * for databases written by older builds. */
    for (int i = (int)v; i < (v == 0 ? 1 : n); i++) {
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

/* What is at path, by stat() alone: nothing outside SQLite may open the database file
 * (or its -wal/-shm) in a process that may hold a connection to it, because close() of
 * any descriptor drops every POSIX lock the process holds on the file (SQLite's "How To
 * Corrupt An SQLite Database File", 2.2). The header is read through SQLite's own file
 * handle instead (check_header). */
static int check_path(const char *path, int *exists)
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
    if (!S_ISREG(sb.st_mode))
        return store_fail(STORE_EIO, "%s is not a regular file (a device, pipe or socket), so it "
                          "cannot hold a database; give a file path with --db", path);
    return STORE_OK;
}

/* The first 100 bytes, read through the connection's own file handle before SQLite reads
 * anything: a file that is not a database is refused before SQLite could treat a stray
 * journal next to it as one to roll back into it. */
static int check_header(store *s)
{
    sqlite3_file *f = NULL;
    if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK || !f || !f->pMethods)
        return store_fail(STORE_EIO, "cannot read database %s (no file handle)", s->path);
    sqlite3_int64 size = 0;
    if (f->pMethods->xFileSize(f, &size) != SQLITE_OK)
        return store_fail(STORE_EIO, "cannot read database %s: %s", s->path, strerror(errno));
    if (size == 0) return STORE_OK;
    unsigned char hdr[100];
    int rc = f->pMethods->xRead(f, hdr, (int)sizeof hdr, 0);
    if (rc != SQLITE_OK || memcmp(hdr, "SQLite format 3", 16))
        return store_fail(STORE_ENOTDB, "%s is not an SQLite database (bad header); it was left "
                          "untouched — give another file with --db", s->path);
    return STORE_OK;
}

/* Writable for us AND not marked read-only: root passes access(W_OK) on a chmod 444
 * file, but a user who removed every write bit asked for a read-only database. */
static int path_writable(const char *path)
{
    struct stat sb;
    return access(path, W_OK) == 0 && stat(path, &sb) == 0 && (sb.st_mode & 0222);
}

static void dir_of(char *dir, size_t cap, const char *path)
{
    snprintf(dir, cap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, cap, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
}

static int dir_writable(const char *path)
{
    char dir[1024];
    dir_of(dir, sizeof dir, path);
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
    return check_header(s);
}

/* What a probe sees; one statement = one read transaction, so another process creating
 * the schema at the same moment is seen either entirely or not at all. */
typedef struct {
    long long version, n_tables, n_ours, runs_cols;
} probe_result;

#define N_OUR_TABLES 7
#define N_RUNS_KEY_COLS 8

static int probe(store *s, probe_result *p)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "SELECT (SELECT user_version FROM pragma_user_version), "
                                "(SELECT count(*) FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'), "
                                "(SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                                "('runs','params','metrics','op_stats','run_profile','solver_events',"
                                "'system_info')), "
                                "(SELECT count(*) FROM pragma_table_info('runs') WHERE name IN ('id','name',"
                                "'variant','status','started','exp_text','host','pid'))", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        p->version = sqlite3_column_int64(st, 0);
        p->n_tables = sqlite3_column_int64(st, 1);
        p->n_ours = sqlite3_column_int64(st, 2);
        p->runs_cols = sqlite3_column_int64(st, 3);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? STORE_OK : store_sql_fail(s, rc, "reading the database");
}

/* Ours, empty (version 0, no tables: a new file to create the schema in), or refused. */
static int judge(const store *s, const probe_result *p)
{
    if (p->version < 0)
        return store_fail(STORE_ENOTDB, "%s has schema version %lld; no nnbench writes a negative "
                          "version, so it is not an nnbench database (or it was damaged): it was left "
                          "untouched — give another file with --db", s->path, p->version);
    if (p->version > STORE_SCHEMA_VERSION)
        return store_fail(STORE_EVERSION, "%s has schema version %lld, written by a newer nnbench "
                          "(this one understands up to %d): upgrade nnbench or use another --db",
                          s->path, p->version, STORE_SCHEMA_VERSION);
    if ((p->version == 0 && p->n_tables > 0) ||
        (p->version > 0 && (p->n_ours < N_OUR_TABLES || p->runs_cols < N_RUNS_KEY_COLS)))
        return store_fail(STORE_ENOTDB, "%s is an SQLite database but not an nnbench one (its tables "
                          "are not nnbench's); it was left untouched — give another file with --db", s->path);
    return STORE_OK;
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

/* A read-only connection: the file is only looked at (no migration, no journal mode
 * change, no crash marking; closing it never checkpoints). */
static int open_for_reading(store *s, probe_result *p)
{
    int st = sqlite_open(s, 1, 0, 0);
    if (!st) st = probe(s, p);
    if (st == STORE_EIO) {
        /* A WAL database whose -shm cannot be created (read-only file or directory):
         * immutable mode reads the main file without any locking or shared memory. */
        st = sqlite_open(s, 1, 1, 0);
        if (!st) st = probe(s, p);
    }
    if (!st) st = judge(s, p);
    if (!st) s->version = (int)p->version;
    return st;
}

/* The read-write connection of a writer: WAL, foreign keys, migrations, crash marking. */
static int open_for_writing(store *s, int create, probe_result *p)
{
    int st = sqlite_open(s, 0, 0, create);
    if (!st) st = probe(s, p);
    if (!st) st = judge(s, p);
    if (st) return st;
    char mode[16] = "";
    int rc;
    /* Switching a new file to WAL needs it to itself: while another process creates the
     * same file, SQLite may answer BUSY at once (no busy handler where waiting could
     * deadlock), so the switch is retried for as long as the busy timeout. */
    for (int waited = 0;; waited += 10) {
        sqlite3_stmt *jm;
        rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &jm, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(jm)) == SQLITE_ROW) {
            snprintf(mode, sizeof mode, "%s", (const char *)sqlite3_column_text(jm, 0));
            rc = SQLITE_OK;
        }
        sqlite3_finalize(jm);
        if ((rc & 0xff) != SQLITE_BUSY || waited >= BUSY_TIMEOUT_MS) break;
        sqlite3_sleep(10);
    }
    if (rc != SQLITE_OK) return store_sql_fail(s, rc, "switching to WAL mode");
    if (strcmp(mode, "wal"))
        return store_fail(STORE_EIO, "%s: cannot use WAL mode (journal mode stays '%s'); is it "
                          "on a network file system?", s->path, mode);
    /* NORMAL in WAL mode: a commit survives the process being killed (only a power
     * loss can undo the last commits), at a fraction of FULL's fsyncs. */
    if ((st = exec(s, "PRAGMA synchronous=NORMAL", "setting synchronous"))) return st;
    /* Migrations run with foreign keys off (a table rebuild drops the parent table). */
    if ((st = exec(s, "PRAGMA foreign_keys=OFF", "preparing the schema check"))) return st;
    if (p->version < STORE_SCHEMA_VERSION &&
        (st = store_migrate_with(s, store_migrations, store_n_migrations)))
        return st;
    if ((st = exec(s, "PRAGMA foreign_keys=ON", "enabling foreign keys"))) return st;
    s->version = STORE_SCHEMA_VERSION;
    return mark_crashed(s);
}

int store_open(const char *path, int flags, store **out)
{
    *out = NULL;
    if (!path || !*path) return store_fail(STORE_EINVAL, "no database path given");
    if ((flags & STORE_OPEN_READONLY) && (flags & (STORE_OPEN_CREATE | STORE_OPEN_WRITE)))
        return store_fail(STORE_EINVAL, "a database cannot be opened read-only for writing");
    int exists, st = check_path(path, &exists);
    if (st) return st;
    int write = (flags & (STORE_OPEN_CREATE | STORE_OPEN_WRITE)) != 0;
    if (!exists && !(flags & STORE_OPEN_CREATE))
        return store_fail(STORE_ENOTFOUND, "no database at %s yet: store a run first, e.g. "
                          "nnbench run samples/spirals-mlp.ini --db %s", path, path);
    if (!exists) {
        char dir[1024];
        struct stat sb;
        dir_of(dir, sizeof dir, path);
        if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
            return store_fail(STORE_EIO, "cannot create database %s: the directory %s does not exist; "
                              "create it (mkdir -p %s) or give another --db", path, dir, dir);
    }
    if (write && !(exists ? path_writable(path) && dir_writable(path) : dir_writable(path)))
        return store_fail(STORE_EREADONLY, "database %s is read-only (%s not writable): runs cannot be "
                          "stored there; use --db with a writable path or --no-db", path,
                          exists && !path_writable(path) ? "the file is" : "its directory is");
    store *s = calloc(1, sizeof *s);
    if (!s) return store_fail(STORE_ENOMEM, "out of memory opening %s", path);
    snprintf(s->path, sizeof s->path, "%s", path);
    if (gethostname(s->host, sizeof s->host - 1)) snprintf(s->host, sizeof s->host, "localhost");
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->work, &ca);
    pthread_cond_init(&s->done, &ca);
    pthread_condattr_destroy(&ca);

    probe_result p = { 0 };
    /* A file that exists is looked at read-only first: a database that is not ours is
     * refused before a read-write connection could change a byte of it (a WAL file is
     * checkpointed into the database when its last writer closes). */
    if (exists) st = open_for_reading(s, &p);
    if (!st && write) {
        st = open_for_writing(s, (flags & STORE_OPEN_CREATE) != 0, &p);
    } else if (!st && p.version == 0) {
        st = store_fail(STORE_ENOTFOUND, "no nnbench runs in %s yet (an empty database): store a run "
                        "first, e.g. nnbench run samples/spirals-mlp.ini --db %s", path, path);
    } else if (!st && !s->immutable && path_writable(path) && dir_writable(path)) {
        /* Our database, for reading: a read-write connection that only reads (query_only), so
         * that, when it is the last one, closing it removes the -wal and -shm files as a
         * writer's would instead of leaving them behind. */
        st = sqlite_open(s, 0, 0, 0);
        if (!st) st = exec(s, "PRAGMA query_only=1", "opening the database for reading");
        s->readonly = 1;
    }
    if (st) {
        sqlite3_close_v2(s->db);
        s->db = NULL;
        store_close(s);
        return st;
    }
    *out = s;
    return STORE_OK;
}

int store_is_readonly(const store *s) { return s->readonly; }
const char *store_path(const store *s) { return s->path; }

void store_close(store *s)
{
    if (!s) return;
    store_writer_close(s);
    sqlite3_close_v2(s->db);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->done);
    pthread_mutex_destroy(&s->mu);
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

/* Binds the summary columns in the order of SUMMARY_SET starting at parameter i. */
#define SUMMARY_SET                                                                           \
    "steps=?%d,epochs=?%d,wall_s=?%d,hybrid_s=?%d,final_train_loss=?%d,best_train_loss=?%d,"  \
    "final_test_loss=?%d,final_test_acc=?%d,best_test_acc=?%d,samples_per_s=?%d,"             \
    "steps_to_target=?%d,wall_to_target=?%d,hybrid_to_target=?%d,peak_bytes=?%d,peak_rss=?%d,"\
    "solves=?%d,quantum_solves=?%d,kappa_first=?%d,kappa_last=?%d"

static int bind_summary(sqlite3_stmt *st, int i, const store_run *r)
{
    store_bind_count(st, i++, r->steps);
    store_bind_count(st, i++, r->epochs);
    store_bind_real(st, i++, r->wall_s);
    store_bind_real(st, i++, r->hybrid_s);
    store_bind_real(st, i++, r->final_train_loss);
    store_bind_real(st, i++, r->best_train_loss);
    store_bind_real(st, i++, r->final_test_loss);
    store_bind_real(st, i++, r->final_test_acc);
    store_bind_real(st, i++, r->best_test_acc);
    store_bind_real(st, i++, r->samples_per_s);
    store_bind_count(st, i++, r->steps_to_target);
    store_bind_real(st, i++, r->wall_to_target);
    store_bind_real(st, i++, r->hybrid_to_target);
    store_bind_count(st, i++, r->peak_bytes);
    store_bind_count(st, i++, r->peak_rss);
    store_bind_count(st, i++, r->solves);
    store_bind_count(st, i++, r->quantum_solves);
    store_bind_real(st, i++, r->kappa_first);
    store_bind_real(st, i++, r->kappa_last);
    return i;
}

int store_run_begin(store *s, const store_run *r, long long *id)
{
    int st = writable(s, "storing a run");
    if (st) return st;
    static const char sql[] =
        "INSERT INTO runs(name,variant,exp_path,exp_text,seed,status,started,host,pid,version,"
        "optimizer,dataset,model,n_params,threads,total_steps,n_train,n_test,target_loss,data_fingerprint) "
        "VALUES(?1,?2,?3,?4,?5,'running',?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)";
    sqlite3_stmt *ins;
    if ((st = store_txn_begin(s))) return st;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &ins, NULL);
    if (rc != SQLITE_OK) { st = store_sql_fail(s, rc, "storing a run"); store_txn_rollback(s); return st; }
    sqlite3_bind_text(ins, 1, r->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(ins, 2, r->variant, -1, SQLITE_TRANSIENT);
    store_bind_text(ins, 3, r->exp_path);
    store_bind_text(ins, 4, r->exp_text);
    sqlite3_bind_int64(ins, 5, (sqlite3_int64)r->seed);
    sqlite3_bind_double(ins, 6, isfinite(r->started) ? r->started : store_unix_now());
    store_bind_text(ins, 7, r->host[0] ? r->host : s->host);
    sqlite3_bind_int64(ins, 8, r->pid ? r->pid : (long)getpid());
    store_bind_text(ins, 9, r->version);
    store_bind_text(ins, 10, r->optimizer);
    store_bind_text(ins, 11, r->dataset);
    store_bind_text(ins, 12, r->model);
    store_bind_count(ins, 13, r->n_params);
    store_bind_count(ins, 14, r->threads);
    store_bind_count(ins, 15, r->total_steps);
    store_bind_count(ins, 16, r->n_train);
    store_bind_count(ins, 17, r->n_test);
    store_bind_real(ins, 18, r->target_loss);
    store_bind_text(ins, 19, r->data_fingerprint);
    rc = sqlite3_step(ins);
    sqlite3_finalize(ins);
    if (rc != SQLITE_DONE) { st = store_sql_fail(s, rc, "storing a run"); store_txn_rollback(s); return st; }
    *id = sqlite3_last_insert_rowid(s->db);
    if ((st = store_txn_commit(s))) return st;
    pthread_mutex_lock(&s->mu);
    if (s->n_prog < STORE_MAX_PROGRESS) {
        store_progress *p = &s->prog[s->n_prog++];
        memset(p, 0, sizeof *p);
        p->run = *id;
        p->steps = -1;
        p->epoch = -1;
        p->wall = p->hybrid = p->train_loss = p->best_train_loss = NAN;
        p->test_loss = p->test_acc = p->best_test_acc = p->sps = NAN;
    }
    pthread_mutex_unlock(&s->mu);
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
        st = store_step_done(s, s->db, ins, table);
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
                                "l2_miss,l3_miss,fp_ops,self_mem,peak_mem,cpu_ns,faults,csw) VALUES(?1,"
                                "?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,"
                                "?21,?22)", -1, &ins, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO run_profile(run,total_self_ns,"
                                "overhead_ns,events,hw_counters,counters_note,counters_used,peak_bytes,"
                                "live_bytes,total_alloc_bytes,peak_rss,peak_gflops) VALUES(?1,?2,?3,?4,"
                                "?5,?6,?7,?8,?9,?10,?11,?12)", -1, &prof, NULL);
    if (rc != SQLITE_OK) { st = store_sql_fail(s, rc, "storing op stats"); goto done; }
    sqlite3_bind_int64(del, 1, run);
    if ((st = store_step_done(s, s->db, del, "storing op stats"))) goto done;
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
            if (j >= 7) store_bind_count(ins, 5 + j, v[j]);
            else sqlite3_bind_int64(ins, 5 + j, v[j]);
        sqlite3_bind_int64(ins, 18, o->self_mem);
        sqlite3_bind_int64(ins, 19, o->peak_mem);
        store_bind_count(ins, 20, o->cpu_ns);
        store_bind_count(ins, 21, o->faults);
        store_bind_count(ins, 22, o->csw);
        st = store_step_done(s, s->db, ins, "storing op stats");
    }
    if (!st && sum) {
        sqlite3_bind_int64(prof, 1, run);
        sqlite3_bind_int64(prof, 2, sum->total_self_ns);
        sqlite3_bind_int64(prof, 3, sum->overhead_ns);
        sqlite3_bind_int64(prof, 4, sum->events);
        sqlite3_bind_int(prof, 5, sum->hw_counters);
        store_bind_text(prof, 6, sum->counters_note);
        store_bind_text(prof, 7, sum->counters_used);
        sqlite3_bind_int64(prof, 8, sum->peak_bytes);
        sqlite3_bind_int64(prof, 9, sum->live_bytes);
        sqlite3_bind_int64(prof, 10, sum->total_alloc_bytes);
        sqlite3_bind_int64(prof, 11, sum->peak_rss);
        store_bind_real(prof, 12, sum->peak_gflops);
        st = store_step_done(s, s->db, prof, "storing the profile summary");
    }
done:
    sqlite3_finalize(del);
    sqlite3_finalize(ins);
    sqlite3_finalize(prof);
    if (st) { store_txn_rollback(s); return st; }
    return store_txn_commit(s);
}

void store_progress_drop(store *s, long long run)
{
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_prog; i++)
        if (s->prog[i].run == run) {
            s->prog[i] = s->prog[--s->n_prog];
            break;
        }
    pthread_mutex_unlock(&s->mu);
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
    store_bind_text(up, 2, r->error);
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
    store_progress_drop(s, run);
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
    store_bind_text(up, 3, error);
    sqlite3_bind_double(up, 4, store_unix_now());
    for (int i = 0; i < BUSY_RETRIES && (rc = sqlite3_step(up)) == SQLITE_BUSY; i++) sqlite3_reset(up);
    sqlite3_finalize(up);
    if (rc != SQLITE_DONE) return store_sql_fail(s, rc, "changing a run's status");
    if (sqlite3_changes(s->db) == 0)
        return store_fail(STORE_ENOTFOUND, "no run %lld in %s", run, s->path);
    if (status != STORE_RUN_RUNNING) store_progress_drop(s, run);
    return STORE_OK;
}

/* Whether the process writing a 'running' run may still be at it: on this host, its pid is
 * alive; on another host we cannot tell, so it may. */
static int writer_alive(store *s, const char *host, long pid)
{
    if (!host || strcmp(host, s->host)) return 1;
    return pid > 0 && !pid_gone(host, s->host, pid);
}

int store_runs_delete(store *s, const long long *ids, size_t n, int flags)
{
    int st = writable(s, "deleting runs");
    if (st) return st;
    if ((st = store_flush(s))) return st;
    if ((st = store_txn_begin(s))) return st;
    sqlite3_stmt *chk = NULL, *del = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT status, host, pid FROM runs WHERE id=?1", -1, &chk, NULL);
    /* Foreign keys (ON DELETE CASCADE) take every row of the run with it. */
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(s->db, "DELETE FROM runs WHERE id=?1", -1, &del, NULL);
    if (rc != SQLITE_OK) { st = store_sql_fail(s, rc, "deleting runs"); goto done; }
    for (size_t i = 0; i < n && !st; i++) {
        sqlite3_bind_int64(chk, 1, ids[i]);
        rc = sqlite3_step(chk);
        if (rc == SQLITE_DONE) { st = store_fail(STORE_ENOTFOUND, "no run %lld in %s; nothing was deleted", ids[i], s->path); break; }
        if (rc != SQLITE_ROW) { st = store_sql_fail(s, rc, "deleting runs"); break; }
        const char *status = (const char *)sqlite3_column_text(chk, 0);
        const char *host = (const char *)sqlite3_column_text(chk, 1);
        long pid = (long)sqlite3_column_int64(chk, 2);
        if (!(flags & STORE_DELETE_FORCE) && status && !strcmp(status, "running") && writer_alive(s, host, pid)) {
            st = store_fail(STORE_ELIVE, "run %lld is still being written by process %ld on %s: stop it first "
                            "(Ctrl-C, or K in the workbench), or delete it anyway with --force (its writer then "
                            "stores nothing more of it); nothing was deleted", ids[i], pid, host ? host : "?");
            sqlite3_reset(chk);
            break;
        }
        sqlite3_reset(chk);
        sqlite3_bind_int64(del, 1, ids[i]);
        st = store_step_done(s, s->db, del, "deleting runs");
    }
done:
    sqlite3_finalize(chk);
    sqlite3_finalize(del);
    if (st) { store_txn_rollback(s); return st; }
    if ((st = store_txn_commit(s))) return st;
    for (size_t i = 0; i < n; i++) store_progress_drop(s, ids[i]);
    return STORE_OK;
}
