/* internal.h — what the files of store/ share: the store struct, error helpers and the
 * migration list. Private to store/ (and its tests). */
#ifndef NNBENCH_STORE_INTERNAL_H
#define NNBENCH_STORE_INTERNAL_H

#include <sqlite3.h>

#include "store.h"

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

struct store {
    sqlite3 *db;
    char path[1024];
    int readonly;
    int immutable;             /* opened with ?immutable=1 (read-only fallback) */
    char host[64];
    sqlite3_stmt *ins_metric, *ins_solver, *upd_progress;
    store_point *pts;
    size_t n_pts, cap_pts;
    store_pending_solve *solves;
    size_t n_solves, cap_solves;
    char *keys[STORE_MAX_KEYS];
    int n_keys;
    store_progress prog[STORE_MAX_PROGRESS];
    int n_prog;
    uint64_t last_flush_ns;
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

/* Forward migrations: store_migrations[v] takes a database from version v to v+1. */
extern const char *const store_migrations[];
extern const int store_n_migrations;
/* Applies migs[from..n-1] in one transaction and sets user_version = n (test hook:
 * lets a test chain its own extra migration). */
int store_migrate_with(store *s, const char *const *migs, int n);

/* The columns of runs read by the queries, and a decoder for one row of them. */
#define STORE_RUN_COLS                                                                       \
    "id,name,variant,exp_path,seed,status,error,started,ended,host,pid,version,optimizer,"   \
    "dataset,model,n_params,threads,total_steps,n_train,n_test,target_loss,steps,epochs,"    \
    "wall_s,hybrid_s,final_train_loss,best_train_loss,final_test_loss,final_test_acc,"       \
    "best_test_acc,samples_per_s,steps_to_target,wall_to_target,hybrid_to_target,"           \
    "peak_bytes,peak_rss,solves,quantum_solves,kappa_first,kappa_last"
void store_decode_run(store *s, sqlite3_stmt *st, store_run *r);

#endif
