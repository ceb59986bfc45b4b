/* internal.h — what the files of store/ share: the store struct, error helpers and the
 * migration list. Private to store/ (and its tests). */
#ifndef NNBENCH_STORE_INTERNAL_H
#define NNBENCH_STORE_INTERNAL_H

#include <pthread.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>

#include "store.h"

/* SQLite's busy handler already waits up to the busy timeout per attempt; a few more
 * attempts ride out a writer that holds the lock for long (e.g. a big delete). */
#define BUSY_TIMEOUT_MS 5000
#define BUSY_RETRIES 6

typedef struct {
    long long run;
    long step;
    int epoch;
    int key;                   /* index into store.keys */
    double wall, hybrid, value;
} store_point;

typedef struct {
    long long run;
    store_solver_event ev;
} store_pending_solve;

/* Live summary of a run being written, pushed into its runs row at each flush. */
typedef struct {
    long long run;
    int dirty;
    long steps;
    int epoch;
    double wall, hybrid;
    double train_loss, best_train_loss, test_loss, test_acc, best_test_acc, sps;
} store_progress;

#define STORE_MAX_KEYS 1024 /* layer telemetry: 5 keys per parameter tensor */
#define STORE_MAX_PROGRESS 8
#define STORE_MAX_GONE 16
/* Points that may wait in memory while the database cannot be written (disk full, locked
 * for long); beyond it store_metric_add fails with the writer's error (~110 MB). */
#define STORE_MAX_PENDING (1u << 21)

/* A checkpoint buffer that holds no record: one of the store's free ones. */
typedef struct {
    unsigned char *data;
    size_t cap;
} store_ckbuf;
#define STORE_CKPT_BUFS 3          /* free checkpoint buffers kept for reuse, at most */

/* A checkpoint record handed to the writer (a copy: the caller's buffer is free at once). */
typedef struct {
    int full;                  /* holds a record not yet written */
    long long run;
    long step;
    int epoch;
    double created;            /* unix seconds, when it was handed over */
    unsigned char *data;       /* cap bytes; back to ck_free once written or replaced */
    size_t len, cap;
} store_pending_ckpt;

/* What the writer thread (writer.c) takes out of the buffer for one transaction. */
typedef struct {
    store_pending_ckpt ck;     /* at most one checkpoint, written after the points */
    store_point *pts;
    size_t n_pts, cap_pts;
    store_pending_solve *solves;
    size_t n_solves, cap_solves;
    store_progress prog[STORE_MAX_PROGRESS];
    int n_prog;
} store_batch;

struct store {
    sqlite3 *db;               /* the caller's connection */
    char path[1024];
    int readonly;
    int immutable;             /* opened with ?immutable=1 (read-only fallback) */
    int version;               /* schema version of the file as opened: a reader reads an
                                * older schema as it is (later tables and columns absent) */
    char host[64];
    /* Buffered points, solver events and run progress: filled by the caller's thread,
     * written by the writer thread on its own connection (wdb). mu guards everything
     * from here down to the end of the struct, except wdb and the statements. */
    pthread_mutex_t mu;
    pthread_cond_t work, done;     /* writer wakes on work; flushers wait on done */
    pthread_t writer;
    int writer_on, stop;
    sqlite3 *wdb;
    sqlite3_stmt *ins_metric, *ins_solver, *upd_progress, *run_exists, *ins_ckpt, *del_ckpt;
    store_batch buf, spare;        /* buf: filling; spare: being written */
    /* Checkpoint buffers in no record: the caller copies the next record into one of them.
     * Each buffer is in exactly one place: here, with a caller copying into it, in buf.ck
     * (waiting) or in spare.ck (the writer's until its batch is done). */
    store_ckbuf ck_free[STORE_CKPT_BUFS];
    int n_ck_free;
    long ck_allocs;                /* checkpoint buffers allocated (or grown) so far */
    char *keys[STORE_MAX_KEYS];
    int n_keys;
    store_progress prog[STORE_MAX_PROGRESS];
    int n_prog;
    uint64_t first_ns;             /* when the oldest buffered point was added (0: none) */
    uint64_t retry_ns;             /* after a failed write: no new attempt before this */
    uint64_t req_gen, done_gen;    /* flush requests made / answered */
    int werr;                      /* status of the writer's last transaction */
    int werr_new;                  /* not yet reported through store_flush_due */
    char werr_msg[1024];
    long long gone[STORE_MAX_GONE];/* runs deleted while being written (points dropped) */
    int n_gone;
};

/* Sets the thread's message (printf-style) and returns code. */
int store_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Maps an SQLite result to a store_status with a message "what: sqlite text (path)". */
int store_sql_fail(store *s, int rc, const char *what);
/* BEGIN IMMEDIATE, retrying while another writer holds the lock; COMMIT; ROLLBACK. */
int store_txn_begin(store *s);
int store_txn_commit(store *s);
void store_txn_rollback(store *s);
uint64_t store_now_ns(void);     /* monotonic */
double store_unix_now(void);     /* wall clock, unix seconds */

/* Writer thread (writer.c): stops it after a last flush and frees the buffers. */
void store_writer_close(store *s);
/* Opens the writer thread's connection to s->path (busy timeout, WAL settings) with
 * foreign keys OFF: the per-row check cost 27% of the instructions per metric point
 * (docs/store.md). write_batch checks instead, once per run and batch and inside the same
 * write transaction, that the run exists; every other connection enforces the keys. */
int store_connect_rw(store *s, sqlite3 **db);
void store_bind_text(sqlite3_stmt *st, int i, const char *v);
void store_bind_real(sqlite3_stmt *st, int i, double v);
void store_bind_count(sqlite3_stmt *st, int i, long long v);
int store_step_done(store *s, sqlite3 *db, sqlite3_stmt *st, const char *what);
int store_txn_begin_on(store *s, sqlite3 *db);
int store_txn_commit_on(store *s, sqlite3 *db);
void store_txn_rollback_on(sqlite3 *db);
int store_sql_fail_on(store *s, sqlite3 *db, int rc, const char *what);
void store_progress_drop(store *s, long long run);

/* Forward migrations: store_migrations[v] takes a database from version v to v+1 (schema.c). */
extern const char *const store_migrations[];
extern const int store_n_migrations;
/* Applies migs[from..n-1] in one transaction and sets user_version = n (test hook:
 * lets a test chain its own extra migration). */
int store_migrate_with(store *s, const char *const *migs, int n);

/* Column readers: NULL reads as NAN / -1 / "". */
static inline double col_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static inline long long col_count(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, i);
}

static inline void col_text(sqlite3_stmt *st, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

/* The columns of runs read by the queries, and a decoder for one row of them. */
#define STORE_RUN_COLS                                                                       \
    "id,name,variant,exp_path,seed,status,error,started,ended,host,pid,version,optimizer,"   \
    "dataset,model,n_params,threads,total_steps,n_train,n_test,target_loss,steps,epochs,"    \
    "wall_s,hybrid_s,final_train_loss,best_train_loss,final_test_loss,final_test_acc,"       \
    "best_test_acc,samples_per_s,steps_to_target,wall_to_target,hybrid_to_target,"           \
    "peak_bytes,peak_rss,solves,quantum_solves,kappa_first,kappa_last"
void store_decode_run(store *s, sqlite3_stmt *st, store_run *r);

#endif
