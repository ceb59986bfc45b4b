/* store.h — every run in one SQLite file: schema + migrations, writing runs (batched),
 * and the queries that list, show, compare and report them. The one public header of
 * store/; depends on SQLite, libc and profiler/profiler.h (the profile row, the display
 * formats, the JSON writer, text made inert); it stores plain records, never engine types.
 *
 * Writing a run (what tui/runner_store.c does):
 *   store *db;
 *   if (store_open("nnbench.db", STORE_OPEN_CREATE, &db)) { fprintf(stderr, "%s\n", store_error()); ... }
 *   store_run r; store_run_init(&r); strcpy(r.name, "spirals"); ... 
 *   long long id; store_run_begin(db, &r, &id);           // status 'running', host+pid
 *   store_params_put(db, id, kv, n); store_sysinfo_put(db, id, kv, n);
 *   store_metric_add(db, id, step, epoch, wall, hybrid, "train_loss", 0.69);  // buffered
 *   store_solver_event_add(db, id, &ev);                  // buffered
 *   store_op_stats_put(db, id, rows, n, &profile);
 *   r.status = STORE_RUN_FINISHED; ...summary fields...; store_run_end(db, id, &r);
 *   store_close(db);                                       // flushes
 * Metric points and solver events are buffered (adding never waits for the database) and
 * written by the store's own writer thread, on a connection of its own, in one transaction
 * at most STORE_FLUSH_MS / 2 after the oldest buffered point was added or as soon as the
 * buffer holds STORE_FLUSH_POINTS; store_flush, every status change and close wait until
 * everything buffered before them is committed. A kill -9 loses at most the points of the
 * last STORE_FLUSH_MS (plus a transaction that could not get the lock).
 *
 * Reading (CLI and TUI): store_open(path, 0 or STORE_OPEN_READONLY, &db), then
 * store_runs_list / store_run_get / store_params_get / store_metric_get / ...; poll
 * store_watch_token every ~0.5 s to see writes by other processes.
 *
 * Conventions: functions return a store_status (0 = ok) and leave a message a user can
 * act on in store_error() (thread-local). One store* is used by one thread at a time (the
 * writer thread is the store's own business). Nothing in nnbench opens the database file
 * or its -wal/-shm other than through SQLite: a close() of any descriptor of the file
 * would drop the POSIX locks of every SQLite connection of the process.
 * Arrays a function allocates for the caller are freed with free() unless a *_free is
 * named next to it. Statuses are persisted by name (runs.status TEXT) and their numbers
 * equal eng_run_status; both lists are append-only.
 */
#ifndef NNBENCH_STORE_H
#define NNBENCH_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../profiler/profiler.h"

#define STORE_SCHEMA_VERSION 5   /* PRAGMA user_version written by this build */
#define STORE_FLUSH_POINTS 4096  /* buffered metric points that force a flush */
#define STORE_FLUSH_MS 250       /* max age of buffered points before a flush */

typedef enum {
    STORE_OK = 0,
    STORE_EINVAL = -1,    /* bad argument (unknown sort column, bad status name...) */
    STORE_EIO = -2,       /* cannot open/read/write the file (permissions, disk full) */
    STORE_ENOTDB = -3,    /* the file is not an SQLite database, or is corrupt */
    STORE_EVERSION = -4,  /* the database was written by a newer nnbench */
    STORE_EREADONLY = -5, /* a write was asked of a database opened read-only */
    STORE_EBUSY = -6,     /* still locked by another process after the busy timeout + retries */
    STORE_ENOTFOUND = -7, /* no such run / no such file (without STORE_OPEN_CREATE) */
    STORE_ENOMEM = -8,
    STORE_ESQL = -9,      /* any other SQLite error (message has SQLite's text) */
    STORE_ELIVE = -10,    /* the run is still being written by a live process */
} store_status;

/* The last error message set on this thread ("" if none). */
const char *store_error(void);

/* ---- run statuses: numbers equal eng_run_status; stored as the name ---------------- */
typedef enum {
    STORE_RUN_RUNNING = 0,
    STORE_RUN_FINISHED = 1,
    STORE_RUN_FAILED = 2,
    STORE_RUN_DIVERGED = 3,
    STORE_RUN_INTERRUPTED = 4,
    STORE_RUN_CRASHED = 5,
} store_run_status;
#define STORE_RUN_N_STATUS 6
/* Numbers, durations and sizes read the same everywhere through the profiler's formats
 * (prof_fmt_num, prof_fmt_duration, prof_fmt_bytes); times of day through this one
 * (unix seconds through strftime; "-" for NaN). */
/* strcmp, except that digit runs compare as numbers: "dense2.W" < "dense10.W". */
int store_natural_cmp(const char *a, const char *b);
const char *store_fmt_time(char *b, size_t cap, double unix_s, const char *strftime_fmt);

const char *store_status_name(store_run_status s);          /* "running", ... ; "?" if unknown */
int store_status_parse(const char *name, store_run_status *out); /* 0 ok, STORE_EINVAL */

/* ---- opening ----------------------------------------------------------------------- */
typedef struct store store;

enum {
    /* Create the file (and the schema) if missing; implies writing (STORE_OPEN_WRITE).
     * Without it a missing file is STORE_ENOTFOUND, so read commands never leave an empty
     * database behind. */
    STORE_OPEN_CREATE = 1,
    /* The same as flags 0 (kept for callers that say so). */
    STORE_OPEN_READONLY = 2,
    /* Open for writing: WAL mode, foreign keys, migrations, crash marking. STORE_EREADONLY
     * when the file or its directory is not writable (`nnbench run` refuses before training). */
    STORE_OPEN_WRITE = 4,
};

/* Opens. flags 0 (read commands): only reads — no migration, no journal mode change, no
 * crash marking (runs whose process is gone are still reported as crashed by the queries);
 * an older schema of ours is read as it is; an empty SQLite file is STORE_ENOTFOUND; falls
 * back to SQLite's immutable mode when the file or its directory is not writable.
 * With STORE_OPEN_WRITE/CREATE: WAL, foreign keys on, a 5 s busy timeout (x retries),
 * migrations forward, and 'running' runs of this host whose pid is gone marked crashed.
 * Always: the path must be a regular file (or missing, in an existing directory); its
 * header is read through SQLite's own handle before SQLite reads anything; a file that is
 * not SQLite, an SQLite database that is not nnbench's (tables not ours), a negative
 * user_version (STORE_ENOTDB) and a newer schema (STORE_EVERSION) are refused with the
 * file untouched (it is looked at read-only before any read-write connection exists).
 * *out is freed with store_close. */
int store_open(const char *path, int flags, store **out);
/* Flushes buffered points, stops the writer thread and closes; NULL is fine. The final
 * flush's status is lost: call store_flush first if you need it. */
void store_close(store *s);
int store_is_readonly(const store *s);
const char *store_path(const store *s);
/* The schema of this build (store/schema.sql, embedded), and its version-2 part alone
 * (the v1 -> v2 migration). */
extern const char store_schema_sql[];
/* A value that changes whenever the database content changes, by this connection or by
 * another process (PRAGMA data_version + own changes + max run id). Cheap: poll it. */
int store_watch_token(store *s, uint64_t *token);

/* ---- records ----------------------------------------------------------------------- */

/* One run: what is known at begin, and the summary written at the end (and refreshed
 * at each flush while running). Unknown reals are NAN, unknown counts -1. */
typedef struct {
    long long id;
    char name[128];
    char variant[64];
    char exp_path[512];       /* experiment file */
    char *exp_text;           /* full text of the file; malloc'd, freed by store_run_clear;
                                 store_runs_list leaves it NULL */
    uint64_t seed;
    store_run_status status;
    char error[512];          /* failed/diverged/interrupted/crashed: why */
    double started, ended;    /* unix seconds; ended NAN while running */
    char host[64];            /* filled by store_run_begin when empty */
    long pid;                 /* filled by store_run_begin when 0 */
    char version[32];         /* nnbench version */
    char optimizer[32];
    char dataset[64];
    char model[2048];         /* model summary (a ResNet's runs to a thousand characters) */
    long long n_params;
    int threads;
    long total_steps;         /* planned */
    int n_train, n_test;
    double target_loss;       /* NAN = none */
    /* summary */
    long steps;
    int epochs;
    double wall_s, hybrid_s;
    double final_train_loss, best_train_loss;
    double final_test_loss, final_test_acc, best_test_acc;
    double samples_per_s;
    long steps_to_target;     /* -1: not reached / no target */
    double wall_to_target, hybrid_to_target;
    long long peak_bytes, peak_rss;
    long solves, quantum_solves;
    double kappa_first, kappa_last;
    /* The data's fingerprint (the engine's text, kept as it is; "" when none was stored):
     * written by store_run_begin, read by store_run_get only. */
    char data_fingerprint[160];
} store_run;

/* Sets every field to its "unknown" value (0/""/NAN/-1 as documented above). */
void store_run_init(store_run *r);
/* Frees r->exp_text (and sets it NULL). */
void store_run_clear(store_run *r);

typedef struct {
    char key[64];
    char value[1024];     /* as eng_kv: long model.layers values are kept whole */
} store_kv;

/* One profiler row: the profiler's own row type (hardware counters, cpu_ns, faults, csw
 * -1 when not counted, and in rows of older schemas; task_clock_ns and migrations are not
 * stored and read back as -1). The op-table model (prof_table_*) renders it. */
typedef prof_row store_op_row;

/* The profile summary of a run (mirrors prof_summary). */
typedef struct {
    int64_t total_self_ns, overhead_ns, events;
    int hw_counters;
    char counters_note[800];
    char counters_used[256];
    int64_t peak_bytes, live_bytes, total_alloc_bytes, peak_rss;
    double peak_gflops;
} store_profile;

/* One Newton linear solve (mirrors qm_solve_event; route 0 classical, 1 quantum). */
typedef struct {
    long step;
    int block, n;
    double nnz_per_row;
    double kappa_fro, kappa_lapack, kappa_gersh, kappa_exact, kappa_used;
    double est_ns;
    int route;
    double pred_classical_ns, pred_quantum_ns;
    double measured_classical_ns, simulated_quantum_ns;
    double residual, shift;
    int shift_raised;
} store_solver_event;

/* ---- writing ----------------------------------------------------------------------- */

/* Inserts a run with status 'running' (r->status is ignored), started = now unless set,
 * host/pid = this process unless set. *id gets the new run id. */
int store_run_begin(store *s, const store_run *r, long long *id);
/* Resolved config keys / system facts of a run (replaces existing keys). */
int store_params_put(store *s, long long run, const store_kv *kv, size_t n);
int store_sysinfo_put(store *s, long long run, const store_kv *kv, size_t n);
/* Buffers one metric point (key copied). May flush (see top). */
int store_metric_add(store *s, long long run, long step, int epoch, double wall_s,
                     double hybrid_s, const char *key, double value);
/* Buffers n points of one step (keys[i] = values[i]) together: one flush check after the
 * last, so a record is never split across transactions (unless it alone exceeds
 * STORE_FLUSH_POINTS). */
int store_metrics_add(store *s, long long run, long step, int epoch, double wall_s,
                      double hybrid_s, const char *const *keys, const double *values, size_t n);
int store_solver_event_add(store *s, long long run, const store_solver_event *ev);
/* Waits until everything buffered before the call is committed (the writer retries while
 * another process holds the write lock, busy timeout x retries). On failure the points
 * stay buffered for the next attempt and the writer's error is returned. */
int store_flush(store *s);
/* Never waits: returns the writer's error once when its writes started failing (the sink
 * calls it every step to warn), else STORE_OK. */
int store_flush_due(store *s);
/* Profiler rows + summary of a run (replaces earlier ones); sum may be NULL. */
int store_op_stats_put(store *s, long long run, const store_op_row *rows, size_t n,
                       const store_profile *sum);
/* Flushes, then writes the final status, error, ended (now unless r->ended is set) and
 * every summary field of r (r->id is ignored; run is the id). */
int store_run_end(store *s, long long run, const store_run *r);
/* Flushes, then changes only status + error (error may be NULL). */
int store_run_set_status(store *s, long long run, store_run_status st, const char *error);
/* Deletes runs and all their rows, in one transaction. STORE_ENOTFOUND names the first
 * missing id, STORE_ELIVE the first run still being written by a live process (on this
 * host: its pid exists; on another host: status 'running'); nothing is deleted then.
 * STORE_DELETE_FORCE deletes live runs too: their writer drops what it still has of them
 * and store_metric_add answers STORE_ENOTFOUND from then on. Ids are never reused. */
enum { STORE_DELETE_FORCE = 1 };
int store_runs_delete(store *s, const long long *ids, size_t n, int flags);

/* ---- reading ----------------------------------------------------------------------- */

typedef struct {
    int status;               /* -1 any, else a store_run_status */
    const char *grep;         /* NULL/"": any; else substring (case-insensitive) of
                                 name, variant, optimizer, dataset, exp_path or model */
    const char *sort;         /* NULL = "id"; a column: id name variant status optimizer
                                 dataset loss acc duration started steps samples_per_s */
    int desc;                 /* 1: descending */
    long limit;               /* 0 = all */
} store_list_filter;

/* Sort column names accepted by store_list_filter.sort, NULL-terminated. */
extern const char *const store_sort_columns[];

/* Runs matching f (NULL = all, by id), without exp_text. Free with free(). */
int store_runs_list(store *s, const store_list_filter *f, store_run **runs, size_t *n);
int store_run_count(store *s, long long *n);
/* One run with exp_text; STORE_ENOTFOUND if absent. Release with store_run_clear. */
int store_run_get(store *s, long long id, store_run *out);
/* Parses "12" or "#12" into a run id; also "last" (the highest id). */
int store_run_resolve(store *s, const char *spec, long long *id);

int store_params_get(store *s, long long run, store_kv **kv, size_t *n);   /* by key */
int store_sysinfo_get(store *s, long long run, store_kv **kv, size_t *n);  /* by key */

/* Distinct metric keys of a run, sorted. Free with store_strings_free. */
int store_metric_keys(store *s, long long run, char ***keys, size_t *n);
void store_strings_free(char **v, size_t n);

/* One metric of one run as parallel arrays, by step. Free with store_series_free. */
typedef struct {
    size_t n;
    long *step;
    int *epoch;
    double *wall, *hybrid, *value;   /* value NAN where NaN/Inf was logged */
} store_series;
int store_metric_get(store *s, long long run, const char *key, store_series *out);
void store_series_free(store_series *sr);

/* Profiler rows in the op tables' one order (prof_rows_sort by self time; kind -1 = all
 * kinds); n 0 when the run was not profiled. The summary: STORE_ENOTFOUND when absent. */
int store_op_stats_get(store *s, long long run, int kind, store_op_row **rows, size_t *n);
int store_profile_get(store *s, long long run, store_profile *out);
/* Solver events by (step, block). */
int store_solver_events_get(store *s, long long run, store_solver_event **ev, size_t *n);

/* ---- comparison: the one model behind `compare`, the workbench's Compare screen and the
 * reports (compare.c). Rows come in one order, with one set of words:
 *   run     run, name, status, optimizer, dataset, kernels (what served the fp32 GEMMs),
 *           core round trip (where 2+ threads ran: placement)
 *   result  final/best losses and accuracies, [the chosen metric], steps, samples/s,
 *           peak memory, linear solves
 *   time    wall time, pool waits/step (2+ threads), (sim) quantum time, (sim) hybrid
 *           time, the target, steps / wall time / (sim) hybrid time to the target
 *   config  keys that differ (or all keys), by key
 *   ops     the top 3 ops by self time (name and self % as the op table shows them)
 * Simulated clocks are labelled "(sim)" first, so the mark survives a narrow column.
 */
enum { STORE_CMP_NOTE_KERNELS, STORE_CMP_NOTE_PLACEMENT, STORE_CMP_NOTE_TRANSPORT, STORE_CMP_N_NOTES };
typedef enum {
    STORE_CMP_RUN, STORE_CMP_RESULT, STORE_CMP_TIME, STORE_CMP_CONFIG, STORE_CMP_OPS, STORE_CMP_N_SECTIONS
} store_cmp_section;
extern const char *const store_cmp_section_names[STORE_CMP_N_SECTIONS]; /* "Run", "Results", ... */

typedef struct {
    store_cmp_section section;
    char label[64];
    char (*cells)[64];        /* one per run */
    int differs;              /* config rows: the runs do not all have the same value */
} store_cmp_row;

typedef struct {
    int all_keys;             /* config: every key, not only those that differ */
    const char *metric;       /* NULL/"train_loss": none; else a "KEY final / best" row */
    double target;            /* NAN: each run's target_loss on train_loss; else on metric */
    /* One run: its config keys not at their default (the caller knows which: the store does
     * not know the engine's defaults), the only ones shown, or with all_keys the first ones,
     * marked. NULL: every key, in key order. */
    const char *const *set_keys;
    size_t n_set_keys;
} store_cmp_opts;

typedef struct {
    size_t n;                 /* runs, in the order asked */
    store_run *runs;          /* without exp_text */
    /* "#3 newton-vs-sgd/sgd"; runs that share a name and variant get what differs in
     * their config appended ("#4 newton-vs-sgd/sgd lr=0.1"). */
    char (*label)[256];
    /* The shortest text that tells the runs apart: the variant (plus what differs) when
     * every run has the same experiment name, else name/variant. */
    char (*short_label)[160];
    char common_name[128];    /* the shared experiment name, "" when the names differ */
    store_kv **params;
    size_t *n_params;
    store_op_row **ops;       /* kind op, by self time */
    size_t *n_ops;
    uint64_t *self_total_ns;  /* the whole profile's self time per run, the op table's
                                 denominator of "self %" (0: no profile summary) */
    double *quantum_s;        /* simulated quantum time per run (NAN: no Newton solves) */
    store_series *metric;     /* the chosen metric per run (n 0 when absent) */
    char metric_key[64];
    int have_metric;          /* some run has points of metric_key */
    char (*kernels)[64];      /* "onednn 8/8, Haswell" from the run's system record, or "-" */
    /* "441 ns": where a run of 2+ threads ran, as the round trip of a cache line between
     * two of its threads (STORE_SYS_ROUND_TRIP); "-" at 1 thread or for older runs */
    char (*placement)[64];
    /* "21 us 4.6%": what the training thread of a run of 2+ threads waited a step at the
     * ends of the jobs split over the pool, and its share of the step (STORE_SYS_POOL_*);
     * "-" at 1 thread or for older runs */
    char (*pool)[32];
    /* What every renderer prints under the table, "" when it does not apply:
     * STORE_CMP_NOTE_KERNELS when the runs ran on different kernels (GEMM backend or
     * OpenBLAS core), STORE_CMP_NOTE_PLACEMENT when runs of 2+ threads ran on CPUs placed
     * differently (sharing a cache or not), STORE_CMP_NOTE_TRANSPORT when data-parallel
     * runs moved their gradients by different MPI transports (system record mpi_transport):
     * their times then compare those too. */
    char notes[STORE_CMP_N_NOTES][200];
    store_cmp_row *rows;
    size_t n_rows;
    int config_set_only;      /* the config rows are one run's keys not at their default */
    int config_set_first;     /* one run, all keys: those not at their default first, differs = 1 */
} store_compare;

/* Loads the runs and builds the rows. o may be NULL. Free with store_compare_free. */
int store_compare_load(store *s, const long long *ids, size_t n, const store_cmp_opts *o, store_compare **out);
/* Rebuilds the rows after a change of o (all_keys) without reading the database again. */
int store_compare_rows(store_compare *c, const store_cmp_opts *o);
void store_compare_free(store_compare *c);
/* The value of key in a key/value list (NULL if absent): the one lookup for params,
 * system facts and config rows. */
const char *store_kv_find(const store_kv *kv, size_t n, const char *key);
/* ---- a stored run's performance context (perf.c) ------------------------------------ */
/* system_info keys written when a run starts (tui/runner_store.c): the calibration then in
 * force (`nnbench sysinfo --calibrate`; absent when there was none) and the CPU's widest ISA. */
#define STORE_SYS_CALIB_PEAK "calib_peak_gflops"
#define STORE_SYS_CALIB_BW "calib_bw_gbs"
#define STORE_SYS_CPU_ISA "cpu_isa"
/* Runs of 2 or more threads: where they ran (prof_placement_text) and the round trip of a
 * cache line between two threads at the start, in ns (absent when it could not be measured). */
#define STORE_SYS_PLACEMENT "placement"
#define STORE_SYS_ROUND_TRIP "core_round_trip_ns"
/* Written when a run of 2+ threads ends (eng_run_result.pool, its training steps only):
 * the steps, their seconds, the jobs split over the worker pool, and the seconds the
 * training thread waited at those jobs' ends for the other threads' slabs. */
#define STORE_SYS_POOL_STEPS "pool_steps"
#define STORE_SYS_POOL_STEP_S "pool_step_s"
#define STORE_SYS_POOL_JOINS "pool_joins"
#define STORE_SYS_POOL_WAIT_S "pool_wait_s"
typedef struct {
    double peak_gflops;   /* sgemm peak the run started with; else run_profile's; 0 = none */
    double bw_gbs;        /* memory bandwidth the run started with; 0 = not stored (older runs) */
    int gemm_threads;     /* runs.threads */
    char blas_core[64];   /* "" = not stored */
    char cpu_isa[16];     /* "" = not stored (older runs: no BLAS-core warning) */
} store_run_perf;
/* From a run's row, its system_info and its profile (each may be NULL / n 0). */
void store_run_perf_get(const store_run *r, const store_kv *sys, size_t n, const store_profile *prof,
                        store_run_perf *out);
/* The op-table model over stored rows: prof_table_init with the run's peak, then its
 * bandwidth ("% bw" and "bound" show "-" for a run that stored none). */
void store_op_table_init(prof_table *t, const store_op_row *rows, size_t n, const store_profile *prof,
                         const store_run_perf *pf);
/* The line under a stored run's op table that says what "bound" compares (the ridge
 * point from the stored calibration) or why "% bw" and "bound" are "-"; "" when the table
 * has no bound column. Returns b. */
const char *store_run_perf_line(const prof_table *t, const store_run_perf *pf, char *b, size_t cap);
/* prof_perf_warnings of a stored run: scopes = all its op_stats rows (store_op_stats_get kind -1). */
int store_run_warnings(const store_op_row *scopes, size_t n, const store_profile *prof, const store_run_perf *pf,
                       char *out, size_t cap);
/* The runs of the newest batch: the last run and the runs just before it written by the
 * same process from the same experiment file, one per variant (what one `nnbench run` or
 * one all-variants New run makes). Ascending ids, malloc'd. STORE_ENOTFOUND when empty. */
int store_last_batch(store *s, long long **ids, size_t *n);
/* Orders metric keys as every chart and table shows them: losses first (train_loss,
 * test_loss, other losses), then accuracies, then the rest by name. */
void store_metric_keys_sort(const char **keys, size_t n);
/* Higher is worse for losses and errors ("loss", "err" in the key). */
int store_metric_lower_is_better(const char *key);

/* ---- the op diff of two runs: a view of the comparison above and the op-table model
 * (compare.c), behind `nnbench diff`, the Compare screen with two runs and the reports of
 * two runs. Every profile row of A and B (ops, phases, the step scope; each rank's rows
 * apart) is matched on (name, layer, kind); its self time is taken per step (each run's
 * step count: its `step` scope's calls, else runs.steps), and the difference B - A of
 * that is its contribution to the step-time difference (the sum over rows of self time
 * per step is the step time the profile saw, so the shares add up to 1). Rows are sorted
 * by |difference|, largest first; a row present in one run only says so.
 * Columns: STORE_DIFF_COL_* in this order, with these words, in every renderer; per-run
 * cells read "A -> B" and are the op table's own cells (prof_table_cell). */
typedef enum {
    STORE_DIFF_COL_NAME, STORE_DIFF_COL_LAYER, STORE_DIFF_COL_RANK, STORE_DIFF_COL_SHARE, STORE_DIFF_COL_DELTA,
    STORE_DIFF_COL_SELF_A, STORE_DIFF_COL_SELF_B, STORE_DIFF_COL_CALLS, STORE_DIFF_COL_GFLOPS, STORE_DIFF_COL_BYTES,
    STORE_DIFF_COL_MEM, STORE_DIFF_COL_IPC, STORE_DIFF_COL_L1MISS, STORE_DIFF_COL_CPU, STORE_DIFF_COL_ONLY,
    STORE_DIFF_N_COLS
} store_diff_col;
typedef struct {
    const char *title;        /* "share", "self/step A", ... */
    const char *key;          /* the JSON member / CSV column stem: "share", "self_per_step_a_s" */
    const char *doc;          /* one line for --help and the docs */
    int right;                /* numbers: right-aligned */
    int optional;             /* shown only when some row has the value (store_diff.show) */
} store_diff_col_def;
extern const store_diff_col_def store_diff_cols[STORE_DIFF_N_COLS];

typedef struct {
    const prof_row *a, *b;    /* the row in run A / B; NULL when the run has none */
    double self_a_s, self_b_s;/* self time per step, seconds (0 when absent) */
    double delta_s;           /* self_b_s - self_a_s */
    double share;             /* delta_s / store_diff.delta_s; NAN when that is 0 */
} store_diff_row;

typedef struct {
    const store_compare *cmp; /* the comparison it is a view of (not owned) */
    size_t ia, ib;            /* A and B: indices into cmp->runs */
    store_op_row *ops[2];     /* every row of A and of B (all kinds) */
    size_t n_ops[2];
    prof_table table[2];      /* the op-table model of each run: what the per-run cells are */
    long steps[2];            /* the step count each run's self times are divided by */
    double step_s[2];         /* self time per step of the whole profile */
    double delta_s;           /* step_s[1] - step_s[0]: the total the shares divide */
    store_diff_row *rows;
    size_t n;
    unsigned char show[STORE_DIFF_N_COLS];
    char note[400];           /* why there is nothing to compare, or "" */
} store_diff;

/* Builds the diff of runs c->runs[a] (A) and c->runs[b] (B), reading their profile rows
 * from s; c must outlive *out. A run without a profile gives no rows and a note (not an
 * error). Free with store_diff_free. */
int store_diff_load(store *s, const store_compare *c, size_t a, size_t b, store_diff **out);
/* The same from rows already in memory (the tests, the bench); rows are copied. steps
 * <= 0: the `step` row's calls, else 1. */
int store_diff_build(const store_compare *c, size_t a, size_t b, const prof_row *const rows[2],
                     const size_t n_rows[2], const long steps[2], store_diff **out);
void store_diff_free(store_diff *d);
/* The text of column col of row r into b ("-" where unknown; names made visible). */
const char *store_diff_cell(const store_diff *d, const store_diff_row *r, store_diff_col col, char *b, size_t cap);
/* The number behind a cell, in seconds, counts per step, GFLOP/s, bytes: columns SHARE,
 * DELTA, SELF_A, SELF_B ignore run; the "A -> B" columns give run 0 (A) or 1 (B). NAN where
 * unknown or absent (and for the text columns). */
double store_diff_value(const store_diff *d, const store_diff_row *r, store_diff_col col, int run);
/* The one-line summary: "step time A 1.20 ms -> B 0.95 ms per step: -0.25 ms (-20.8%)". */
const char *store_diff_summary(const store_diff *d, char *b, size_t cap);
/* JSON (one object) and CSV (a header line, then one line per row) of the diff, raw
 * numbers in seconds, counts and bytes; unknown values null / empty. (report.c) */
int store_diff_json(const store_diff *d, FILE *f);
int store_diff_csv(const store_diff *d, FILE *f);

/* The Newton solver of a run in one summary, read by `show`, the Solver tab and reports. */
typedef struct {
    size_t solves, quantum, raised;
    double measured_classical_s, pred_classical_s, pred_quantum_s, simulated_quantum_s;
    double kappa_first, kappa_last;   /* mean kappa_used of the first / last step's solves */
    double kappa_min, kappa_max, worst_residual;
} store_solver_summary;
void store_solver_summarize(const store_solver_event *ev, size_t n, store_solver_summary *out);
/* The summary as up to 3 lines of text (the same words everywhere); returns the count. */
int store_solver_summary_lines(const store_solver_summary *s, char lines[3][256]);
/* ---- scaling: time and memory against a size (scaling.c) --------------------------
 * A view of the comparison: its runs that set STORE_SCALING_X_KEY (n, the sequence length)
 * grouped into one series per variant (the variant without a trailing size: "full-n256"
 * and "full-n512" are series "full"; a run without a variant is named by its experiment),
 * each measure per n, and the exponent of the power law it follows, fitted by least
 * squares of log y on log n (about 2 for full attention, 1 for Linformer, 1 plus a log
 * for LSH). `compare`, the Compare screen and the reports render it when the runs hold
 * two sizes or more (n_xs >= 2). */
#define STORE_SCALING_X_KEY "data.seq_len"

/* y = coef * x^exponent fitted on the points with positive, finite x and y. Returns 1 when
 * fitted, 0 when not (fewer than 2 such points or all at one x): exponent, coef and r2 are
 * NAN then and note says why; note also names points left out of a fit. */
typedef struct {
    double exponent, coef, r2;
    size_t used, dropped;
    char note[160];
} store_fit;
int store_fit_power(const double *x, const double *y, size_t n, store_fit *out);
/* The exponent as every view prints it: "2.03", or "-" when not fitted (never "nan"). */
const char *store_fit_text(const store_fit *f, char *b, size_t cap);

typedef enum { STORE_SCALE_STEP, STORE_SCALE_ATTN, STORE_SCALE_ATTN_MEM, STORE_SCALE_PEAK, STORE_SCALE_N } store_scale_measure;
typedef struct {
    const char *title;        /* "step time", "attention time", ... */
    const char *key;          /* JSON member: "step_s", "attn_s", "attn_bytes", "peak_bytes" */
    const char *doc;          /* where the number comes from */
    int bytes;                /* 1: a size, 0: seconds */
} store_scale_def;
extern const store_scale_def store_scale_defs[STORE_SCALE_N];
/* 1 for the op rows whose self time and memory are "attention": attn_scores, attn_softmax,
 * attn_wsum, linformer_proj, lsh_hash (forward and backward). */
int store_attention_scope(const char *op_name);

typedef struct {
    char label[64];
    size_t n;                 /* points, by x ascending */
    double *x;
    double *y[STORE_SCALE_N]; /* NAN where the run does not say (not profiled, ...) */
    long long *run;           /* the run id of each point */
    store_fit fit[STORE_SCALE_N];
} store_scale_series;

typedef struct {
    char x_key[64];
    store_scale_series *series;
    size_t n_series;
    double *xs;               /* every size of every series, ascending, once */
    size_t n_xs;
    size_t skipped;           /* runs without the key */
    char note[256];           /* why there is no view, or what was left out; "" */
} store_scaling;

/* Builds the view of c (c may be freed afterwards). STORE_ENOMEM only: runs that do not
 * vary the key give n_xs < 2 and a note. Free with store_scaling_free. */
int store_scaling_build(const store_compare *c, store_scaling **out);
void store_scaling_free(store_scaling *s);
/* The measure of series sr at x (NAN when absent), and as text ("1.20 ms", "4.0 MiB", "-"). */
double store_scale_value(const store_scale_series *sr, double x, store_scale_measure m);
const char *store_scale_cell(const store_scale_series *sr, double x, store_scale_measure m, char *b, size_t cap);
/* The member "scaling": {x_key, note, series: [{label, points: [{x, run, step_s, ...}],
 * exponents: {...}, fit_notes: {...}}]} (unknown numbers null). */
void store_scaling_json(prof_json *j, const store_scaling *s);

/* ---- checkpoints and quantizations (checkpoint.c) --------------------------------- */

#define STORE_CHECKPOINTS_KEPT 2   /* per run: the newest ones */

typedef struct {
    long long run;
    long step;                /* steps done when it was taken */
    int epoch;
    double created;           /* unix seconds */
    long long bytes;
} store_checkpoint;

/* Hands a copy of the record (bytes opaque to the store) to the writer thread and returns
 * without waiting for the database: the writer stores it as a BLOB and drops all but the
 * newest STORE_CHECKPOINTS_KEPT of the run, in the same transaction as every point buffered
 * before it (a checkpoint is never on disk without the metrics up to its step). One record
 * waits at most: a newer one of the same run replaces one not yet written. A failed write
 * is reported like a metric's (store_flush_due, store_flush, store_run_end), which also
 * wait for it: after store_flush the checkpoint is committed. */
int store_checkpoint_put(store *s, long long run, long step, int epoch, const void *data, size_t len);
/* A test hook: with the environment variable var set to PATH, creates PATH.held and waits
 * (at most 60 s) for PATH to exist, so that a test holds one side of a race at a named point
 * deterministically (NNBENCH_TEST_HOLD_CKPT_WRITE: the writer on a checkpoint it took;
 * NNBENCH_TEST_HOLD_RESUME: a resume between its checks, tui/runner_resume.c). Unset or
 * empty: returns at once. */
void store_test_hold(const char *var);
/* The newest checkpoint of a run: meta and the record (*data malloc'd: free()).
 * STORE_ENOTFOUND (saying so) when the run has none. */
int store_checkpoint_get(store *s, long long run, store_checkpoint *meta, void **data, size_t *len);
/* A run's checkpoints without their data, newest first. Free with free(). */
int store_checkpoints_list(store *s, long long run, store_checkpoint **out, size_t *n);
/* The statuses a resume may reopen: crashed, interrupted, failed. */
int store_run_resumable(store_run_status st);
/* Resume: makes a run 'running' again for this process (status, error, ended, host, pid)
 * and drops what it logged after step from_step (metrics, solver events); keys
 * (NULL-terminated, may be NULL) are also dropped at from_step itself. All in one write
 * transaction that first reads the status again: STORE_EINVAL ("run 3 is already
 * finished ...; nothing resumed"), with no row changed, when it is not resumable (another
 * process resumed it since the caller looked). */
int store_run_reopen(store *s, long long run, long from_step, const char *const *keys);

/* One quantization of a run (mirrors the quantizations table; NAN/-1 unknown). */
typedef struct {
    long long id, run;
    double created;
    long step;
    char scheme[16];
    long calibrate;
    char kernel[64];
    long long fp32_bytes, int8_bytes;
    double fp32_loss, int8_loss, fp32_acc, int8_acc;
    double fp32_sps_b1, int8_sps_b1, fp32_sps_b128, int8_sps_b128;
} store_quant;

/* A row of a quantization's int8 op profile: the profile row type, of which the store
 * keeps name, layer, calls, total_ns and self_ns (the rest reads back 0, counters -1). */
typedef prof_row store_quant_op;

/* Stores a quantization and its int8 op profile; *id gets its id. */
int store_quant_put(store *s, const store_quant *q, const store_quant_op *ops, size_t n, long long *id);
/* A run's quantizations, newest first. Free with free(). */
int store_quants_list(store *s, long long run, store_quant **out, size_t *n);
/* The op profile of one quantization, by self time. Free with free(). */
int store_quant_ops_get(store *s, long long quant, store_quant_op **ops, size_t *n);

/* ---- reports ---------------------------------------------------------------------- */

/* Writes a report of runs to path, the format from its extension: .md (tables), .html
 * (one self-contained page: tables, an inline SVG line chart per metric against step and
 * against wall time, each run's op profile), .json (everything stored), .csv (metrics in
 * long format: run,name,variant,key,step,epoch,wall,hybrid,value). STORE_EINVAL for an
 * unknown extension, STORE_EIO when the file cannot be written. */
int store_report_write(store *s, const long long *ids, size_t n, const char *path);
/* The JSON of store_report_write (everything stored about the runs; with two runs also
 * their op diff), to an open stream: show --json, compare --json. */
int store_report_json(store *s, const long long *ids, size_t n, FILE *f);
/* Op rows as a JSON array into j, every field (the report's "ops"; run --json --profile). */
void store_op_rows_json(prof_json *j, const store_op_row *ops, size_t n);
/* The runs' rows (no series) as {"database": ..., "runs": [...]}: list --json. */
void store_runs_json(const char *db_path, const store_run *runs, size_t n, FILE *f);
/* The CSV of store_report_write, to an open stream. */
int store_report_csv(store *s, const long long *ids, size_t n, FILE *f);
/* The same CSV to path, whatever its extension (`nnbench export`), as below. */
int store_export_csv(store *s, const long long *ids, size_t n, const char *path);

/* ---- output files (output.c) ------------------------------------------------------ */

/* STORE_EINVAL when out is the database at db_path or its -wal/-shm/-journal (same device
 * and inode: symlinks and hard links are seen through). Every report, export and trace is
 * checked before anything is written. */
int store_output_check(const char *db_path, const char *out);
/* A new temporary file next to path (same directory, the mode path has or would get);
 * store_output_close(o, st) closes it and, when st is STORE_OK and the write succeeded,
 * renames it to path, else removes the temporary file (never path). Returns the status. */
typedef struct {
    FILE *f;
    char path[1024];
    char tmp[1100];
} store_output;
int store_output_open(const char *db_path, const char *path, store_output *o);
int store_output_close(store_output *o, int st);

#endif
