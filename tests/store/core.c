/* core.c — the store itself: schema file vs embedded copy, migrations and version refusal,
 * status transitions and crash marking, batching, queries, non-database and read-only files. */
#include "util.h"

#include <math.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../store/internal.h"

static char dir[512];

static int setup(void **st) { (void)st; tmp_dir(dir, sizeof dir); return 0; }
static int teardown(void **st) { (void)st; rm_rf(dir); return 0; }

static void db_path(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", dir, name); }

/* Opens path with a plain SQLite connection (as "any SQLite client" would). */
static sqlite3 *raw(const char *path)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    return db;
}

static long long raw_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static long long new_run(store *s, const char *name, const char *variant)
{
    store_run r;
    store_run_init(&r);
    snprintf(r.name, sizeof r.name, "%s", name);
    snprintf(r.variant, sizeof r.variant, "%s", variant);
    snprintf(r.optimizer, sizeof r.optimizer, "sgd");
    snprintf(r.dataset, sizeof r.dataset, "spirals");
    r.exp_text = "[experiment]\nname = x\n";
    long long id = 0;
    assert_int_equal(store_run_begin(s, &r, &id), STORE_OK);
    assert_true(id > 0);
    return id;
}

/* ---- schema and migrations --------------------------------------------------------- */

/* The build embeds schema.sql (scripts/embed_schema.awk): escaping kept every byte. */
static void test_schema_file_matches_embedded(void **st)
{
    (void)st;
    FILE *f = fopen("store/schema.sql", "rb");
    assert_non_null(f); /* tests run from the repo root (tests/run.sh) */
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    assert_string_equal(buf, store_schema_sql);
}

static void test_fresh_db_has_schema(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "fresh.db");
    store *s;
    assert_int_equal(store_open(p, 0, &s), STORE_ENOTFOUND); /* read commands never create */
    assert_non_null(strstr(store_error(), "nnbench run"));
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    assert_false(store_is_readonly(s));
    store_close(s);
    sqlite3 *db = raw(p);
    assert_int_equal(raw_int(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                                 "('runs','params','metrics','op_stats','run_profile','solver_events','system_info')"), 7);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name='metrics' AND sql LIKE '%WITHOUT ROWID%'"), 1);
    sqlite3_stmt *jm;
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &jm, NULL);
    assert_int_equal(sqlite3_step(jm), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(jm, 0), "wal");
    sqlite3_finalize(jm);
    sqlite3_close(db);
}

static void test_migrate_from_v0(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "v0.db");
    /* A v0 database: valid SQLite, user_version 0, no nnbench tables (what an empty file
     * created by `sqlite3 x.db 'VACUUM'` or a pre-versioning build looks like). */
    sqlite3 *db = raw(p);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=0; VACUUM;", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    store *s;
    /* A read command does not turn it into an nnbench database (issue 10, case 6). */
    long sz0, sz1;
    uint64_t h0 = file_digest(p, &sz0);
    assert_int_equal(store_open(p, 0, &s), STORE_ENOTFOUND);
    assert_non_null(strstr(store_error(), "no nnbench runs"));
    assert_true(file_digest(p, &sz1) == h0 && sz0 == sz1);
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long id = new_run(s, "m", "");
    assert_int_equal(id, 1);
    store_close(s);
    db = raw(p);
    assert_int_equal(raw_int(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM runs"), 1);
    sqlite3_close(db);
}

/* This build's migrations plus one more (a hypothetical next version) in migs[16];
 * returns that next version. */
static int migrations_plus(const char **migs, const char *extra)
{
    const int next = store_n_migrations + 1;
    assert_true(next <= 16);
    for (int i = 0; i < store_n_migrations; i++) migs[i] = store_migrations[i];
    migs[next - 1] = extra;
    return next;
}

static void test_migration_chain_keeps_data(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "chain.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long id = new_run(s, "keep", "me");
    assert_int_equal(store_metric_add(s, id, 1, 0, 0.1, 0.1, "train_loss", 0.5), STORE_OK);
    assert_int_equal(store_flush(s), STORE_OK);
    /* A hypothetical next version that adds a column: the framework applies only what is
     * missing. */
    const char *migs[16];
    const int next = migrations_plus(migs, "ALTER TABLE runs ADD COLUMN tags TEXT;");
    assert_int_equal(store_migrate_with(s, migs, next), STORE_OK);
    assert_int_equal(store_migrate_with(s, migs, next), STORE_OK); /* idempotent */
    /* Going back is refused. */
    assert_int_equal(store_migrate_with(s, migs, next - 1), STORE_EVERSION);
    store_close(s);
    sqlite3 *db = raw(p);
    assert_int_equal(raw_int(db, "PRAGMA user_version"), next);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM runs WHERE name='keep' AND tags IS NULL"), 1);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM metrics"), 1);
    sqlite3_close(db);
    /* This build refuses the newer file with a clear message and does not touch it. */
    long sz0, sz1;
    uint64_t h0 = file_digest(p, &sz0);
    assert_int_equal(store_open(p, 0, &s), STORE_EVERSION);
    assert_non_null(strstr(store_error(), "newer nnbench"));
    assert_int_equal(store_open(p, STORE_OPEN_CREATE | STORE_OPEN_WRITE, &s), STORE_EVERSION);
    assert_true(file_digest(p, &sz1) == h0 && sz0 == sz1);
}

static void test_failed_migration_rolls_back(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "badmig.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    const char *migs[16];
    const int next = migrations_plus(migs, "CREATE TABLE t(x); SELECT * FROM no_such_table;");
    assert_int_equal(store_migrate_with(s, migs, next), STORE_ESQL);
    char what[64];
    snprintf(what, sizeof what, "migrating schema v%d to v%d", next - 1, next);
    assert_non_null(strstr(store_error(), what));
    store_close(s);
    sqlite3 *db = raw(p);
    assert_int_equal(raw_int(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name='t'"), 0);
    sqlite3_close(db);
}

/* v1 -> v2: run ids stop being reused, and rows a deleted run left behind (foreign keys
 * were off in v1, so a writer could add rows after the delete) go, instead of being
 * inherited by the next run that got the same id (issue 10, case 4). */
static void test_migrate_v1_to_v2(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "v1.db");
    sqlite3 *db = raw(p);
    /* The v1 schema: schema.sql without AUTOINCREMENT and without the later versions' parts. */
    char *v1 = strdup(store_schema_sql);
    char *later = strstr(v1, "-- ---- version 3");
    assert_non_null(later);
    *later = 0;
    char *ai = strstr(v1, " AUTOINCREMENT");
    assert_non_null(ai);
    memmove(ai, ai + strlen(" AUTOINCREMENT"), strlen(ai + strlen(" AUTOINCREMENT")) + 1);
    assert_int_equal(sqlite3_exec(db, v1, NULL, NULL, NULL), SQLITE_OK);
    free(v1);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=1; PRAGMA journal_mode=WAL;"
                                  "INSERT INTO runs(id,name,started,status) VALUES(1,'a',1,'finished'),(2,'b',2,'finished');"
                                  "INSERT INTO metrics(run,key,step,value) VALUES(1,'train_loss',1,0.5),(2,'train_loss',1,0.4),"
                                  "(3,'train_loss',7,9.9);"
                                  "INSERT INTO params(run,key,value) VALUES(2,'train.lr','0.1'),(3,'train.lr','9');",
                                  NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long id = new_run(s, "c", "");
    assert_int_equal(id, 4); /* not 3: run 3 left rows behind, its id is not given out */
    store_close(s);
    db = raw(p);
    assert_int_equal(raw_int(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name='runs' AND sql LIKE '%AUTOINCREMENT%'"), 1);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name='checkpoints'"), 1);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM runs"), 3);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM metrics WHERE run IN (1,2)"), 2);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM metrics WHERE run NOT IN (SELECT id FROM runs)"), 0);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM params WHERE run NOT IN (SELECT id FROM runs)"), 0);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM params WHERE run=2"), 1);
    sqlite3_close(db);
}

/* A negative user_version is refused (it indexed store_migrations out of bounds: issue 10,
 * case 5), by readers and writers, and the file is not touched. */
static void test_negative_version(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "neg.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    new_run(s, "n", "");
    store_close(s);
    const long long versions[] = { -1, -1000000, -2147483648LL };
    for (int i = 0; i < 3; i++) {
        sqlite3 *db = raw(p);
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version=%lld", versions[i]);
        assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        long sz0, sz1;
        uint64_t h0 = file_digest(p, &sz0);
        assert_int_equal(store_open(p, 0, &s), STORE_ENOTDB);
        assert_non_null(strstr(store_error(), "negative"));
        assert_int_equal(store_open(p, STORE_OPEN_CREATE | STORE_OPEN_WRITE, &s), STORE_ENOTDB);
        assert_true(file_digest(p, &sz1) == h0 && sz0 == sz1);
    }
    /* store_migrate_with on its own refuses it too. */
    sqlite3 *db = raw(p);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=0", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(store_open(p, STORE_OPEN_WRITE, &s), STORE_ENOTDB); /* v0 with tables: not ours */
}

/* ---- files that are not (our) databases -------------------------------------------- */

static void expect_untouched_refusal(const char *p, int flags, int code)
{
    long sz0, sz1;
    uint64_t h0 = file_digest(p, &sz0);
    store *s = NULL;
    assert_int_equal(store_open(p, flags, &s), code);
    assert_null(s);
    assert_true(strlen(store_error()) > 10);
    assert_true(file_digest(p, &sz1) == h0);
    assert_int_equal(sz0, sz1);
    char aux[700];
    snprintf(aux, sizeof aux, "%s-wal", p);
    assert_int_equal(access(aux, F_OK), -1);
    snprintf(aux, sizeof aux, "%s-journal", p);
    assert_int_equal(access(aux, F_OK), -1);
}

static void test_not_a_database(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "notes.txt");
    FILE *f = fopen(p, "w");
    for (int i = 0; i < 200; i++) fprintf(f, "line %d of some text file\n", i);
    fclose(f);
    expect_untouched_refusal(p, 0, STORE_ENOTDB);
    expect_untouched_refusal(p, STORE_OPEN_CREATE | STORE_OPEN_WRITE, STORE_ENOTDB);
    assert_non_null(strstr(store_error(), "not an SQLite database"));
    /* Shorter than a header. */
    db_path(p, sizeof p, "tiny");
    f = fopen(p, "w");
    fputs("SQLite", f);
    fclose(f);
    expect_untouched_refusal(p, STORE_OPEN_CREATE, STORE_ENOTDB);
}

static void test_corrupt_database(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "corrupt.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long id = new_run(s, "c", "");
    for (int i = 0; i < 3000; i++) store_metric_add(s, id, i, 0, i, i, "train_loss", 1.0 / (i + 1));
    store_close(s);
    /* Keep the header, scribble over every page after the first. */
    FILE *f = fopen(p, "r+b");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    assert_true(size > 8192);
    fseek(f, 4096, SEEK_SET);
    for (long i = 4096; i < size; i++) fputc((int)((i * 7919) & 0xff), f);
    fclose(f);
    long sz0, sz1;
    uint64_t h0 = file_digest(p, &sz0);
    int rc = store_open(p, 0, &s);
    if (rc == STORE_OK) {
        /* Page 1 survived, so opening may work; reading the scribbled pages must not. */
        store_run *runs;
        size_t n;
        store_series sr;
        int r1 = store_runs_list(s, NULL, &runs, &n);
        int r2 = store_metric_get(s, id, "train_loss", &sr);
        if (!r1) free(runs);
        if (!r2) store_series_free(&sr);
        assert_true(r1 == STORE_ENOTDB || r2 == STORE_ENOTDB);
        assert_non_null(strstr(store_error(), "not a usable nnbench database"));
        store_close(s);
    } else {
        assert_int_equal(rc, STORE_ENOTDB);
    }
    assert_true(file_digest(p, &sz1) == h0 && sz0 == sz1);
}

static void test_foreign_sqlite_db(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "foreign.db");
    sqlite3 *db = raw(p);
    sqlite3_exec(db, "CREATE TABLE customers(id, name); INSERT INTO customers VALUES(1,'a');", NULL, NULL, NULL);
    sqlite3_close(db);
    expect_untouched_refusal(p, STORE_OPEN_CREATE | STORE_OPEN_WRITE, STORE_ENOTDB);
    assert_non_null(strstr(store_error(), "not an nnbench one"));
}

static void test_directory_as_db(void **st)
{
    (void)st;
    store *s;
    assert_int_equal(store_open(dir, STORE_OPEN_CREATE, &s), STORE_EIO);
    assert_non_null(strstr(store_error(), "directory"));
}

/* Deleting a run whose writer is alive is refused unless forced; forced, the writer stops
 * storing it cleanly (no orphan rows) and the id is never given out again (case 4). */
static void test_delete_live_run(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "live.db");
    store *s, *other;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long done = new_run(s, "done", ""), live = new_run(s, "live", "");
    store_run end;
    store_run_init(&end);
    end.status = STORE_RUN_FINISHED;
    assert_int_equal(store_run_end(s, done, &end), STORE_OK);
    for (int i = 1; i <= 50; i++) assert_int_equal(store_metric_add(s, live, i, 0, 0, 0, "train_loss", 1), STORE_OK);
    assert_int_equal(store_flush(s), STORE_OK);
    /* `nnbench delete` in another process: refused, nothing deleted. */
    assert_int_equal(store_open(p, STORE_OPEN_WRITE, &other), STORE_OK);
    long long both[2] = { done, live };
    assert_int_equal(store_runs_delete(other, both, 2, 0), STORE_ELIVE);
    assert_non_null(strstr(store_error(), "--force"));
    long long cnt;
    assert_int_equal(store_run_count(other, &cnt), STORE_OK);
    assert_int_equal(cnt, 2);
    assert_int_equal(store_runs_delete(other, &done, 1, 0), STORE_OK);
    assert_int_equal(store_runs_delete(other, &live, 1, STORE_DELETE_FORCE), STORE_OK);
    /* The writer goes on logging; what it still had of the run is dropped, and then it is told. */
    for (int i = 51; i <= 100; i++) store_metric_add(s, live, i, 0, 0, 0, "train_loss", 1);
    assert_int_equal(store_flush(s), STORE_OK);
    assert_int_equal(store_metric_add(s, live, 101, 0, 0, 0, "train_loss", 1), STORE_ENOTFOUND);
    assert_non_null(strstr(store_error(), "deleted"));
    assert_int_equal(store_run_end(s, live, &end), STORE_ENOTFOUND);
    /* No row names the deleted runs, and a new run gets a new id. */
    long long next = new_run(s, "next", "");
    assert_true(next > live && next > done);
    store_close(s);
    store_close(other);
    sqlite3 *db = raw(p);
    const char *tables[] = { "metrics", "params", "op_stats", "run_profile", "solver_events", "system_info" };
    for (int t = 0; t < 6; t++) {
        char q[128];
        snprintf(q, sizeof q, "SELECT count(*) FROM %s WHERE run NOT IN (SELECT id FROM runs)", tables[t]);
        assert_int_equal(raw_int(db, q), 0);
    }
    assert_int_equal(raw_int(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check='ok'"), 1);
    sqlite3_close(db);
}

/* ---- statuses ---------------------------------------------------------------------- */

static void test_status_names(void **st)
{
    (void)st;
    const char *names[] = { "running", "finished", "failed", "diverged", "interrupted", "crashed" };
    for (int i = 0; i < 6; i++) {
        assert_string_equal(store_status_name((store_run_status)i), names[i]);
        store_run_status s;
        assert_int_equal(store_status_parse(names[i], &s), STORE_OK);
        assert_int_equal((int)s, i);
    }
    store_run_status s;
    assert_int_equal(store_status_parse("done", &s), STORE_EINVAL);
    assert_string_equal(store_status_name((store_run_status)42), "?");
}

static void test_status_transitions(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "status.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long a = new_run(s, "a", "fin"), b = new_run(s, "a", "div"), c = new_run(s, "a", "int");
    store_run r;
    assert_int_equal(store_run_get(s, a, &r), STORE_OK);
    assert_int_equal(r.status, STORE_RUN_RUNNING);
    assert_true(isnan(r.ended));
    assert_int_equal(r.pid, (long)getpid());
    assert_string_equal(r.exp_text, "[experiment]\nname = x\n");
    store_run_clear(&r);
    for (int i = 1; i <= 10; i++) store_metric_add(s, a, i, 0, i * 0.1, i * 0.1, "train_loss", 1.0 / i);
    store_run end;
    store_run_init(&end);
    end.status = STORE_RUN_FINISHED;
    end.steps = 10;
    end.final_train_loss = 0.1;
    end.steps_to_target = -1;
    assert_int_equal(store_run_end(s, a, &end), STORE_OK);
    store_run_init(&end);
    end.status = STORE_RUN_DIVERGED;
    snprintf(end.error, sizeof end.error, "diverged at step 7: loss is nan");
    assert_int_equal(store_run_end(s, b, &end), STORE_OK);
    assert_int_equal(store_run_set_status(s, c, STORE_RUN_INTERRUPTED, "stopped by Ctrl-C at step 3"), STORE_OK);
    assert_int_equal(store_run_set_status(s, 999, STORE_RUN_FAILED, NULL), STORE_ENOTFOUND);
    assert_int_equal(store_run_get(s, a, &r), STORE_OK);
    assert_int_equal(r.status, STORE_RUN_FINISHED);
    assert_false(isnan(r.ended));
    assert_int_equal(r.steps, 10);
    assert_int_equal(r.steps_to_target, -1);
    assert_true(isnan(r.wall_to_target));
    store_run_clear(&r);
    assert_int_equal(store_run_get(s, b, &r), STORE_OK);
    assert_int_equal(r.status, STORE_RUN_DIVERGED);
    assert_string_equal(r.error, "diverged at step 7: loss is nan");
    store_run_clear(&r);
    assert_int_equal(store_run_get(s, c, &r), STORE_OK);
    assert_int_equal(r.status, STORE_RUN_INTERRUPTED);
    store_run_clear(&r);
    store_close(s);
}

/* A pid that certainly belongs to no process: a child that has exited and been reaped. */
static long dead_pid(void)
{
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return (long)p;
}

static void test_crash_marking(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "crash.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    store_run r;
    store_run_init(&r);
    snprintf(r.name, sizeof r.name, "dead");
    r.pid = dead_pid();
    long long dead, other, alive;
    assert_int_equal(store_run_begin(s, &r, &dead), STORE_OK);
    for (int i = 1; i <= 5; i++) store_metric_add(s, dead, i, 0, i, i, "train_loss", 1.0);
    assert_int_equal(store_flush(s), STORE_OK);
    snprintf(r.host, sizeof r.host, "some-other-host");
    assert_int_equal(store_run_begin(s, &r, &other), STORE_OK);
    alive = new_run(s, "alive", "");
    store_close(s);
    /* A read-only look already reports the dead one as crashed, without writing. */
    assert_int_equal(store_open(p, STORE_OPEN_READONLY, &s), STORE_OK);
    assert_true(store_is_readonly(s));
    store_run g;
    assert_int_equal(store_run_get(s, dead, &g), STORE_OK);
    assert_int_equal(g.status, STORE_RUN_CRASHED);
    store_run_clear(&g);
    store_close(s);
    sqlite3 *db = raw(p);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM runs WHERE status='running'"), 3);
    sqlite3_close(db);
    /* A read command does not write either (issue 10, case 6). */
    assert_int_equal(store_open(p, 0, &s), STORE_OK);
    assert_true(store_is_readonly(s));
    store_close(s);
    /* The next writer's open marks it, keeps its metrics, and leaves the others alone. */
    assert_int_equal(store_open(p, STORE_OPEN_WRITE, &s), STORE_OK);
    store_close(s);
    db = raw(p);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM runs WHERE status='crashed' AND error LIKE '%step 5%'"), 1);
    char q[128];
    snprintf(q, sizeof q, "SELECT status='crashed' FROM runs WHERE id=%lld", dead);
    assert_int_equal(raw_int(db, q), 1);
    snprintf(q, sizeof q, "SELECT status='running' FROM runs WHERE id=%lld", other);
    assert_int_equal(raw_int(db, q), 1); /* another host's process cannot be checked */
    snprintf(q, sizeof q, "SELECT status='running' FROM runs WHERE id=%lld", alive);
    assert_int_equal(raw_int(db, q), 1); /* this process is alive */
    snprintf(q, sizeof q, "SELECT count(*) FROM metrics WHERE run=%lld", dead);
    assert_int_equal(raw_int(db, q), 5);
    sqlite3_close(db);
}

/* ---- batching ---------------------------------------------------------------------- */

/* raw_int until it returns want, for up to ms milliseconds; the last value read. */
static long long raw_int_wait(sqlite3 *db, const char *sql, long long want, int ms)
{
    long long v = raw_int(db, sql);
    for (int t = 0; v != want && t < ms; t += 10) {
        usleep(10 * 1000);
        v = raw_int(db, sql);
    }
    return v;
}

static void test_batching(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "batch.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long id = new_run(s, "b", "");
    sqlite3 *db = raw(p);
    /* Points are written by the store's writer thread within STORE_FLUSH_MS of being
     * added, with no further call from the caller (a training step may take long). */
    for (int i = 1; i <= 100; i++) assert_int_equal(store_metric_add(s, id, i, 0, 0, 0, "train_loss", 1), STORE_OK);
    assert_int_equal(raw_int_wait(db, "SELECT count(*) FROM metrics", 100, 5 * STORE_FLUSH_MS), 100);
    /* The progress columns follow the flushes (list shows live runs). */
    char q[128];
    snprintf(q, sizeof q, "SELECT steps FROM runs WHERE id=%lld", id);
    assert_int_equal(raw_int(db, q), 100);
    /* store_flush writes everything buffered before it returns. */
    for (int i = 101; i <= 100 + STORE_FLUSH_POINTS; i++)
        store_metric_add(s, id, i, 0, 0, 0, "train_loss", 1);
    assert_int_equal(store_flush(s), STORE_OK);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM metrics"), 100 + STORE_FLUSH_POINTS);
    assert_int_equal(raw_int(db, q), 100 + STORE_FLUSH_POINTS);
    /* Status changes flush first. */
    store_metric_add(s, id, 100000, 0, 0, 0, "test_acc", 0.9);
    assert_int_equal(store_run_set_status(s, id, STORE_RUN_INTERRUPTED, "stop"), STORE_OK);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM metrics WHERE key='test_acc'"), 1);
    /* Close flushes too. */
    store_solver_event ev = { .step = 1, .block = 0, .n = 4, .kappa_used = 10, .route = 1,
                              .kappa_exact = NAN };
    assert_int_equal(store_solver_event_add(s, id, &ev), STORE_OK);
    store_close(s);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM solver_events WHERE kappa_exact IS NULL AND route=1"), 1);
    sqlite3_close(db);
}

/* Another process holding the write lock does not stop the caller: adding points never
 * waits for the database (store time is not training time, issue 10 case 8); the points
 * land once the lock is free. The other process holds its lock until told to let go (or
 * 10 s), so a build that waits in store_metric_add sees the lock gone before it returns. */
static void test_writer_off_the_caller(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "offthread.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long id = new_run(s, "w", "");
    lock_holder h = lock_holder_start(p);
    for (int i = 1; i <= 20000; i++) {
        assert_int_equal(store_metric_add(s, id, i, 0, 0, 0, "train_loss", 1.0 / i), STORE_OK);
        if (i % 2000 == 0) usleep(50 * 1000); /* a training loop: several flush intervals */
    }
    sqlite3 *db = raw(p);
    /* Still locked by the other process: nothing of it committed, none of ours either. */
    assert_int_equal(raw_int(db, "SELECT count(*) FROM params WHERE key='lock'"), 0);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM metrics"), 0);
    lock_holder_release(&h);
    assert_int_equal(store_flush(s), STORE_OK);
    store_close(s);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM metrics"), 20000);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM params WHERE key='lock'"), 1);
    sqlite3_close(db);
}

/* A write that finds the database locked waits (busy timeout) instead of failing. */
static void test_locked_writer_waits(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "lock.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long id = new_run(s, "l", "");
    pid_t child = fork();
    if (child == 0) {
        sqlite3 *db;
        sqlite3_open(p, &db);
        sqlite3_exec(db, "BEGIN IMMEDIATE; INSERT INTO params VALUES(1,'lock','1');", NULL, NULL, NULL);
        usleep(700 * 1000);
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(db);
        _exit(0);
    }
    usleep(200 * 1000);
    for (int i = 0; i < 10; i++) store_metric_add(s, id, i, 0, 0, 0, "train_loss", 1);
    /* The run ends while the lock is held: its points and end record wait and land. */
    store_run end;
    store_run_init(&end);
    end.status = STORE_RUN_FINISHED;
    assert_int_equal(store_run_end(s, id, &end), STORE_OK);
    waitpid(child, NULL, 0);
    store_close(s);
    sqlite3 *db = raw(p);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM metrics"), 10);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM runs WHERE status='finished'"), 1);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM params WHERE key='lock'"), 1);
    sqlite3_close(db);
}

/* Several processes creating and writing the same new file at once: all succeed, no row
 * is lost (the schema check must see another creator's schema whole or not at all). */
static void test_concurrent_create(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "race.db");
    enum { KIDS = 4, POINTS = 3000 };
    pid_t kids[KIDS];
    for (int k = 0; k < KIDS; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            store *s;
            if (store_open(p, STORE_OPEN_CREATE | STORE_OPEN_WRITE, &s)) { fprintf(stderr, "%s\n", store_error()); _exit(3); }
            store_run r;
            store_run_init(&r);
            snprintf(r.name, sizeof r.name, "kid%d", k);
            long long id;
            if (store_run_begin(s, &r, &id)) { fprintf(stderr, "%s\n", store_error()); _exit(4); }
            for (int i = 1; i <= POINTS; i++)
                if (store_metric_add(s, id, i, 0, i, i, "train_loss", 1.0 / i)) { fprintf(stderr, "%s\n", store_error()); _exit(5); }
            store_run e;
            store_run_init(&e);
            e.status = STORE_RUN_FINISHED;
            if (store_run_end(s, id, &e)) { fprintf(stderr, "%s\n", store_error()); _exit(6); }
            store_close(s);
            _exit(0);
        }
    }
    for (int k = 0; k < KIDS; k++) {
        int status;
        waitpid(kids[k], &status, 0);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    sqlite3 *db = raw(p);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM runs WHERE status='finished'"), KIDS);
    assert_int_equal(raw_int(db, "SELECT count(*) FROM metrics"), KIDS * POINTS);
    sqlite3_close(db);
}

/* ---- queries ----------------------------------------------------------------------- */

static void fill(store *s, long long *ids)
{
    const char *opts[] = { "sgd", "adam", "newton" };
    for (int r = 0; r < 3; r++) {
        store_run run;
        store_run_init(&run);
        snprintf(run.name, sizeof run.name, "exp%d", r);
        snprintf(run.variant, sizeof run.variant, "%s", opts[r]);
        snprintf(run.optimizer, sizeof run.optimizer, "%s", opts[r]);
        snprintf(run.dataset, sizeof run.dataset, r == 2 ? "fashion-mnist" : "spirals");
        run.started = 1700000000.0 + r;
        assert_int_equal(store_run_begin(s, &run, &ids[r]), STORE_OK);
        store_kv kv[2] = { { "train.lr", "0.1" }, { "train.optimizer", "" } };
        snprintf(kv[1].value, sizeof kv[1].value, "%s", opts[r]);
        assert_int_equal(store_params_put(s, ids[r], kv, 2), STORE_OK);
        store_kv sys[1] = { { "cores", "2" } };
        assert_int_equal(store_sysinfo_put(s, ids[r], sys, 1), STORE_OK);
        for (int i = 1; i <= 50; i++) {
            store_metric_add(s, ids[r], i, i / 10, i * 0.01, i * 0.02, "train_loss", (r + 1.0) / i);
            if (i % 10 == 0) store_metric_add(s, ids[r], i, i / 10, i * 0.01, i * 0.02, "test_acc", 0.5 + r * 0.1 + i * 0.001);
        }
        if (r == 1) store_metric_add(s, ids[r], 51, 5, 0.51, 0.51, "train_loss", NAN);
        store_run end;
        store_run_init(&end);
        end.status = r == 1 ? STORE_RUN_DIVERGED : STORE_RUN_FINISHED;
        end.steps = 50;
        end.wall_s = 0.5 + r;
        end.final_train_loss = (r + 1.0) / 50;
        end.best_test_acc = 0.55 + r * 0.1;
        end.samples_per_s = 1000.0 * (r + 1);
        assert_int_equal(store_run_end(s, ids[r], &end), STORE_OK);
    }
    store_op_row ops[2] = { { .name = "dense.fwd", .layer = "dense1", .kind = 0, .calls = 50,
                              .total_ns = 5000, .self_ns = 4000, .flops = 1000, .cycles = -1,
                              .instructions = -1, .l1d_miss = -1, .l2_miss = -1, .l3_miss = -1,
                              .fp_ops = -1 },
                            { .name = "softmax", .layer = "", .kind = 0, .calls = 50,
                              .total_ns = 9000, .self_ns = 9000, .cycles = 123, .instructions = 456,
                              .l1d_miss = -1, .l2_miss = -1, .l3_miss = -1, .fp_ops = -1 } };
    store_profile prof = { .total_self_ns = 13000, .events = 200, .hw_counters = 0,
                           .counters_note = "no hardware counters: PAPI reports 0 (VM)" };
    assert_int_equal(store_op_stats_put(s, ids[0], ops, 2, &prof), STORE_OK);
    store_solver_event ev[2] = { { .step = 2, .block = 1, .n = 8, .kappa_used = 50, .route = 1 },
                                 { .step = 1, .block = 0, .n = 8, .kappa_used = 5, .route = 0 } };
    store_solver_event_add(s, ids[2], &ev[0]);
    store_solver_event_add(s, ids[2], &ev[1]);
    assert_int_equal(store_flush(s), STORE_OK);
}

/* The per-run reads of fill()'s runs: params, system facts, metric keys and series, op
 * rows, profile, solver events. */
static void check_run_reads(store *s, const long long *ids)
{
    size_t n;
    store_kv *kv;
    assert_int_equal(store_params_get(s, ids[1], &kv, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_string_equal(kv[0].key, "train.lr");
    assert_string_equal(kv[1].value, "adam");
    free(kv);
    assert_int_equal(store_sysinfo_get(s, ids[1], &kv, &n), STORE_OK);
    assert_int_equal(n, 1);
    free(kv);

    char **keys;
    assert_int_equal(store_metric_keys(s, ids[0], &keys, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_string_equal(keys[0], "test_acc");
    assert_string_equal(keys[1], "train_loss");
    store_strings_free(keys, n);

    store_series sr;
    assert_int_equal(store_metric_get(s, ids[1], "train_loss", &sr), STORE_OK);
    assert_int_equal(sr.n, 51);
    assert_int_equal(sr.step[0], 1);
    assert_int_equal(sr.step[49], 50);
    assert_true(fabs(sr.value[9] - 2.0 / 10) < 1e-12);
    assert_true(fabs(sr.wall[9] - 0.1) < 1e-12);
    assert_true(fabs(sr.hybrid[9] - 0.2) < 1e-12);
    assert_int_equal(sr.epoch[9], 1);
    assert_true(isnan(sr.value[50])); /* NaN stored as NULL, read back as NaN */
    store_series_free(&sr);
    assert_int_equal(store_metric_get(s, ids[1], "nope", &sr), STORE_OK);
    assert_int_equal(sr.n, 0);
    store_series_free(&sr);

    store_op_row *ops;
    assert_int_equal(store_op_stats_get(s, ids[0], -1, &ops, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_string_equal(ops[0].name, "softmax"); /* by self time */
    assert_int_equal(ops[0].cycles, 123);
    assert_int_equal(ops[1].cycles, -1);
    assert_int_equal(ops[1].flops, 1000);
    free(ops);
    assert_int_equal(store_op_stats_get(s, ids[1], -1, &ops, &n), STORE_OK);
    assert_int_equal(n, 0);
    free(ops);
    store_profile prof;
    assert_int_equal(store_profile_get(s, ids[0], &prof), STORE_OK);
    assert_string_equal(prof.counters_note, "no hardware counters: PAPI reports 0 (VM)");
    assert_int_equal(prof.events, 200);
    assert_int_equal(store_profile_get(s, ids[1], &prof), STORE_ENOTFOUND);

    store_solver_event *ev;
    assert_int_equal(store_solver_events_get(s, ids[2], &ev, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ev[0].step, 1);
    assert_int_equal(ev[1].route, 1);
    assert_true(isnan(ev[0].kappa_exact) || ev[0].kappa_exact == 0);
    free(ev);
}

static void test_queries(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "query.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long ids[3];
    fill(s, ids);
    store_run *runs;
    size_t n;
    assert_int_equal(store_runs_list(s, NULL, &runs, &n), STORE_OK);
    assert_int_equal(n, 3);
    assert_int_equal(runs[0].id, ids[0]);
    assert_null(runs[0].exp_text);
    assert_string_equal(runs[2].optimizer, "newton");
    free(runs);
    store_list_filter f = { .status = STORE_RUN_FINISHED, .sort = "loss", .desc = 1 };
    assert_int_equal(store_runs_list(s, &f, &runs, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(runs[0].id, ids[2]);
    free(runs);
    f = (store_list_filter){ .status = -1, .grep = "MNIST" };
    assert_int_equal(store_runs_list(s, &f, &runs, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(runs[0].id, ids[2]);
    free(runs);
    f = (store_list_filter){ .status = -1, .sort = "samples_per_s", .desc = 1, .limit = 2 };
    assert_int_equal(store_runs_list(s, &f, &runs, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(runs[0].id, ids[2]);
    assert_int_equal(runs[1].id, ids[1]);
    free(runs);
    f.sort = "bogus";
    assert_int_equal(store_runs_list(s, &f, &runs, &n), STORE_EINVAL);
    assert_non_null(strstr(store_error(), "bogus"));
    long long cnt;
    assert_int_equal(store_run_count(s, &cnt), STORE_OK);
    assert_int_equal(cnt, 3);

    long long id;
    assert_int_equal(store_run_resolve(s, "last", &id), STORE_OK);
    assert_int_equal(id, ids[2]);
    char spec[32];
    snprintf(spec, sizeof spec, "#%lld", ids[1]);
    assert_int_equal(store_run_resolve(s, spec, &id), STORE_OK);
    assert_int_equal(id, ids[1]);
    assert_int_equal(store_run_resolve(s, "77", &id), STORE_ENOTFOUND);
    assert_int_equal(store_run_resolve(s, "x1", &id), STORE_EINVAL);
    assert_int_equal(store_run_resolve(s, "-3", &id), STORE_EINVAL);

    check_run_reads(s, ids);

    /* Watch token: changes on our writes and on another process's. */
    uint64_t t0, t1, t2;
    assert_int_equal(store_watch_token(s, &t0), STORE_OK);
    assert_int_equal(store_watch_token(s, &t1), STORE_OK);
    assert_true(t0 == t1);
    sqlite3 *db = raw(p);
    sqlite3_exec(db, "UPDATE runs SET name='renamed' WHERE id=1", NULL, NULL, NULL);
    sqlite3_close(db);
    assert_int_equal(store_watch_token(s, &t2), STORE_OK);
    assert_true(t2 != t1);

    /* Delete: all rows of the run go; a missing id deletes nothing. */
    long long bad[2] = { ids[0], 4242 };
    assert_int_equal(store_runs_delete(s, bad, 2, 0), STORE_ENOTFOUND);
    assert_int_equal(store_run_count(s, &cnt), STORE_OK);
    assert_int_equal(cnt, 3);
    assert_int_equal(store_runs_delete(s, ids, 1, 0), STORE_OK);
    assert_int_equal(store_run_count(s, &cnt), STORE_OK);
    assert_int_equal(cnt, 2);
    store_run r;
    assert_int_equal(store_run_get(s, ids[0], &r), STORE_ENOTFOUND);
    store_close(s);
    db = raw(p);
    const char *tables[] = { "metrics", "params", "op_stats", "run_profile", "system_info" };
    for (int t = 0; t < 5; t++) {
        char q[128];
        snprintf(q, sizeof q, "SELECT count(*) FROM %s WHERE run=%lld", tables[t], ids[0]);
        assert_int_equal(raw_int(db, q), 0);
    }
    sqlite3_close(db);
}

/* ---- read-only --------------------------------------------------------------------- */

static void test_read_only(void **st)
{
    (void)st;
    char p[600];
    db_path(p, sizeof p, "ro.db");
    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    long long ids[3];
    fill(s, ids);
    store_close(s);
    chmod(p, 0444);
    long sz0, sz1;
    uint64_t h0 = file_digest(p, &sz0);
    assert_int_equal(store_open(p, STORE_OPEN_CREATE | STORE_OPEN_WRITE, &s), STORE_EREADONLY);
    assert_non_null(strstr(store_error(), "read-only"));
    assert_int_equal(store_open(p, 0, &s), STORE_OK);
    assert_true(store_is_readonly(s));
    store_run *runs;
    size_t n;
    assert_int_equal(store_runs_list(s, NULL, &runs, &n), STORE_OK);
    assert_int_equal(n, 3);
    free(runs);
    store_series sr;
    assert_int_equal(store_metric_get(s, ids[0], "train_loss", &sr), STORE_OK);
    assert_int_equal(sr.n, 50);
    store_series_free(&sr);
    long long id;
    store_run r;
    store_run_init(&r);
    assert_int_equal(store_run_begin(s, &r, &id), STORE_EREADONLY);
    assert_int_equal(store_runs_delete(s, ids, 1, 0), STORE_EREADONLY);
    store_close(s);
    assert_true(file_digest(p, &sz1) == h0 && sz0 == sz1);
    /* Read-only directory as well (no -shm can be created next to the file). */
    chmod(dir, 0555);
    assert_int_equal(store_open(p, 0, &s), STORE_OK);
    assert_int_equal(store_runs_list(s, NULL, &runs, &n), STORE_OK);
    assert_int_equal(n, 3);
    free(runs);
    store_close(s);
    chmod(dir, 0755);
    /* As an unprivileged user for real (root bypasses permissions): fork and drop. */
    if (geteuid() == 0) {
        pid_t c = fork();
        if (c == 0) {
            if (setgid(65534) || setuid(65534)) _exit(3);
            store *u;
            if (store_open(p, STORE_OPEN_CREATE | STORE_OPEN_WRITE, &u) != STORE_EREADONLY) _exit(4);
            if (store_open(p, 0, &u)) _exit(5);
            store_run *rr;
            size_t nn;
            if (store_runs_list(u, NULL, &rr, &nn) || nn != 3) _exit(6);
            free(rr);
            store_close(u);
            _exit(0);
        }
        int status;
        waitpid(c, &status, 0);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_true(file_digest(p, &sz1) == h0 && sz0 == sz1);
}

int test_store_core(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_file_matches_embedded),
        cmocka_unit_test(test_fresh_db_has_schema),
        cmocka_unit_test(test_migrate_from_v0),
        cmocka_unit_test(test_migration_chain_keeps_data),
        cmocka_unit_test(test_failed_migration_rolls_back),
        cmocka_unit_test(test_migrate_v1_to_v2),
        cmocka_unit_test(test_negative_version),
        cmocka_unit_test(test_not_a_database),
        cmocka_unit_test(test_corrupt_database),
        cmocka_unit_test(test_foreign_sqlite_db),
        cmocka_unit_test(test_directory_as_db),
        cmocka_unit_test(test_delete_live_run),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_status_transitions),
        cmocka_unit_test(test_crash_marking),
        cmocka_unit_test(test_batching),
        cmocka_unit_test(test_writer_off_the_caller),
        cmocka_unit_test(test_locked_writer_waits),
        cmocka_unit_test(test_concurrent_create),
        cmocka_unit_test(test_queries),
        cmocka_unit_test(test_read_only),
    };
    return cmocka_run_group_tests_name("store_core", tests, setup, teardown);
}
