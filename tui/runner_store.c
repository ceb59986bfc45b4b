/* runner_store.c — the adapter that writes a run's engine events into the store: it turns
 * eng_run_info / eng_metric / prof_row / qm_solve_event / eng_run_result into store records. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../quantum/quantum.h"
#include "../store/store.h"
#include "cli.h"

const char *cli_db_path(const char *flag_value)
{
    if (flag_value && *flag_value) return flag_value;
    const char *env = getenv("NNBENCH_DB");
    return env && *env ? env : "./nnbench.db";
}

/* Run statuses are persisted by number; the store mirrors the engine's enum (it may not
 * include engine/), and this adapter, which sees both, keeps them from drifting apart. */
_Static_assert(STORE_RUN_RUNNING == (int)ENG_RUN_RUNNING && STORE_RUN_FINISHED == (int)ENG_RUN_FINISHED &&
               STORE_RUN_FAILED == (int)ENG_RUN_FAILED && STORE_RUN_DIVERGED == (int)ENG_RUN_DIVERGED &&
               STORE_RUN_INTERRUPTED == (int)ENG_RUN_INTERRUPTED && STORE_RUN_CRASHED == (int)ENG_RUN_CRASHED,
               "store_run_status must equal eng_run_status number for number");
/* solver_events.route is stored as a number: 0 classical, 1 quantum (store.h). */
_Static_assert(QM_ROUTE_CLASSICAL == 0 && QM_ROUTE_QUANTUM == 1, "qm_route is stored by number: 0 classical, 1 quantum");

struct cli_store_sink {
    store *db;
    long long run;         /* current (or last) run id */
    int active;            /* run_begin seen, run_end not yet */
    int stored;            /* the run's end record is committed */
    char err[700];         /* why the current (or last) run is not (completely) stored */
    char warning[600];     /* the first flush that failed (and was retried) in this run */
    long long resume_run;  /* > 0: the next run_begin continues this run (resume) */
};

/* Copies with truncation (the store's fields are smaller than some engine strings). */
static void scopy(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
}

static void kv_set(store_kv *kv, size_t *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void kv_set(store_kv *kv, size_t *n, const char *key, const char *fmt, ...)
{
    store_kv *o = &kv[(*n)++];
    scopy(o->key, sizeof o->key, key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->value, sizeof o->value, fmt, ap);
    va_end(ap);
}

/* The calibration in force when the run starts (its peak and memory bandwidth), kept with
 * the run so that show, reports and the workbench class its ops later; none when the
 * machine was never calibrated (or the file is unreadable: `sysinfo` says why). */
static void put_calibration(store_kv *kv, size_t *n)
{
    prof_calibration cal;
    if (prof_calibration_load(&cal)) return;
    if (cal.peak_gflops > 0) kv_set(kv, n, STORE_SYS_CALIB_PEAK, "%.6g", cal.peak_gflops);
    if (cal.bw_gbs > 0) kv_set(kv, n, STORE_SYS_CALIB_BW, "%.6g", cal.bw_gbs);
}

/* Facts about this machine that explain a run's speed (see BENCH-NOTES.md). */
static int put_system(store *db, long long run, int threads, const eng_run_info *info)
{
    store_kv kv[24];
    size_t n = 0;
    char cpu[256];
    if (prof_cpu_model(cpu, sizeof cpu)) snprintf(cpu, sizeof cpu, "unknown");
    kv_set(kv, &n, "cpu", "%s", cpu);
    kv_set(kv, &n, "cores", "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    struct utsname u;
    if (!uname(&u)) kv_set(kv, &n, "kernel", "%s %s %s", u.sysname, u.release, u.machine);
    const char *core = openblas_get_corename();
    kv_set(kv, &n, "blas", "OpenBLAS");
    kv_set(kv, &n, "blas_core", "%s", core ? core : "unknown");
    kv_set(kv, &n, "blas_threads", "%d", threads > 0 ? threads : openblas_get_num_threads());
    const char *ct = getenv("OPENBLAS_CORETYPE");
    kv_set(kv, &n, "env.OPENBLAS_CORETYPE", "%s", ct ? ct : "(unset)");
    const char *nt = getenv("OPENBLAS_NUM_THREADS");
    kv_set(kv, &n, "env.OPENBLAS_NUM_THREADS", "%s", nt ? nt : "(unset)");
    kv_set(kv, &n, "blas_core_choice", "%s", eng_openblas_core_note());
    if (info && info->gemm) kv_set(kv, &n, "gemm", "%s", info->gemm);
    if (info && info->gemm_classes) kv_set(kv, &n, "gemm_classes", "%s", info->gemm_classes);
    if (info && info->gemm_notes && info->gemm_notes[0]) kv_set(kv, &n, "gemm_notes", "%s", info->gemm_notes);
    if (info && info->threads > 1) {
        /* the class and the figure: compare flags runs whose classes differ */
        char where[256];
        prof_placement_text(info->core_round_trip_ns, where, sizeof where);
        kv_set(kv, &n, STORE_SYS_PLACEMENT, "%s", where);
        if (!isnan(info->core_round_trip_ns)) kv_set(kv, &n, STORE_SYS_ROUND_TRIP, "%.0f", info->core_round_trip_ns);
    }
    if (eng_dist_world() > 1) kv_set(kv, &n, "mpi_transport", "%s", eng_mpi_transport_note());
    kv_set(kv, &n, "nnbench_version", "%s", NNBENCH_VERSION);
    kv_set(kv, &n, STORE_SYS_CPU_ISA, "%s", eng_isa_name(eng_isa_best()));
    put_calibration(kv, &n);
    return store_sysinfo_put(db, run, kv, n);
}

static int fail_sink(cli_store_sink *s, const char *what)
{
    if (!s->err[0]) snprintf(s->err, sizeof s->err, "%s", store_error());
    eng_fail(ENG_ESINK, "storing the run (%s): %s", what, store_error());
    return -1;
}

/* A resumed run continues its own row: what it logged after the checkpoint is dropped
 * (it is logged again), and so are the partial-interval points an interruption logged.
 * s->run is set only once the run is reopened: cli_store_sink_run_id then tells the caller
 * whether anything was resumed. */
static int reopen(cli_store_sink *s, const eng_run_info *info)
{
    static const char *const partial[] = { "train_loss", "train_acc", "lr", NULL };
    long long run = s->resume_run;
    s->resume_run = 0;
    if (store_run_reopen(s->db, run, info->resumed_step, info->resumed_partial ? partial : NULL))
        return fail_sink(s, "reopening the run");
    s->run = run;
    s->active = 1;
    return 0;
}

static int on_begin(void *ud, const eng_run_info *info)
{
    cli_store_sink *s = ud;
    if (s->resume_run > 0) return reopen(s, info);
    const eng_config *cfg = info->cfg;
    s->warning[0] = 0;
    store_run r;
    store_run_init(&r);
    scopy(r.name, sizeof r.name, cfg->name);
    scopy(r.variant, sizeof r.variant, cfg->variant);
    scopy(r.exp_path, sizeof r.exp_path, cfg->path);
    r.exp_text = (char *)info->experiment_text; /* only read by store_run_begin */
    r.seed = cfg->seed;
    scopy(r.version, sizeof r.version, NNBENCH_VERSION);
    const char *opt = eng_config_value(cfg, "train.optimizer");
    scopy(r.optimizer, sizeof r.optimizer, opt ? opt : "");
    scopy(r.dataset, sizeof r.dataset, info->dataset ? info->dataset : "");
    scopy(r.model, sizeof r.model, info->model_summary ? info->model_summary : "");
    r.n_params = (long long)info->n_params;
    r.threads = info->threads;
    r.total_steps = info->total_steps;
    r.n_train = info->n_train;
    r.n_test = info->n_test;
    r.target_loss = cfg->target_loss > 0 ? cfg->target_loss : NAN;
    scopy(r.data_fingerprint, sizeof r.data_fingerprint, info->data_fingerprint ? info->data_fingerprint : "");
    s->run = 0;
    s->stored = 0;
    s->err[0] = 0;
    if (store_run_begin(s->db, &r, &s->run)) return fail_sink(s, "run start");
    s->active = 1;
    store_kv *kv = calloc(cfg->n_kv ? cfg->n_kv : 1, sizeof *kv);
    if (!kv) return fail_sink(s, "out of memory");
    for (size_t i = 0; i < cfg->n_kv; i++) {
        scopy(kv[i].key, sizeof kv[i].key, cfg->kv[i].key);
        scopy(kv[i].value, sizeof kv[i].value, cfg->kv[i].value);
    }
    int rc = store_params_put(s->db, s->run, kv, cfg->n_kv);
    free(kv);
    if (rc) return fail_sink(s, "config");
    if (put_system(s->db, s->run, info->threads, info)) return fail_sink(s, "system info");
    return 0;
}

static int on_metric(void *ud, const eng_metric *m)
{
    cli_store_sink *s = ud;
    if (store_metric_add(s->db, s->run, m->step, m->epoch, m->wall_s, m->hybrid_s, m->key, m->value))
        return fail_sink(s, "metric");
    return 0;
}

/* A telemetry record is one step's points: buffered together, written in one transaction. */
static int on_telemetry(void *ud, const eng_telemetry *t)
{
    cli_store_sink *s = ud;
    if (store_metrics_add(s->db, s->run, t->step, t->epoch, t->wall_s, t->hybrid_s, t->keys, t->values, t->n))
        return fail_sink(s, "telemetry");
    return 0;
}

static int on_ops(void *ud, const prof_row *rows, size_t n, const prof_summary *sum)
{
    cli_store_sink *s = ud;
    store_profile p;
    memset(&p, 0, sizeof p);
    if (sum) {
        p.total_self_ns = (int64_t)sum->total_self_ns;
        p.overhead_ns = (int64_t)sum->overhead_ns;
        p.events = (int64_t)sum->events;
        p.hw_counters = sum->hw_counters;
        scopy(p.counters_note, sizeof p.counters_note, sum->counters_note);
        scopy(p.counters_used, sizeof p.counters_used, sum->counters_used);
        p.peak_bytes = (int64_t)sum->peak_bytes;
        p.live_bytes = (int64_t)sum->live_bytes;
        p.total_alloc_bytes = (int64_t)sum->total_alloc_bytes;
        p.peak_rss = (int64_t)sum->peak_rss;
        p.peak_gflops = sum->peak_gflops;
    }
    /* the store keeps the profiler's rows as they are (store_op_row is prof_row) */
    int rc = store_op_stats_put(s->db, s->run, rows, n, sum ? &p : NULL);
    if (rc) return fail_sink(s, "op stats");
    if (sum) {
        store_kv kv[3];
        size_t k = 0;
        kv_set(kv, &k, "papi_hw_counters", "%d", sum->hw_counters);
        if (sum->counters_note[0]) kv_set(kv, &k, "counters_note", "%s", sum->counters_note);
        if (sum->counters_used[0]) kv_set(kv, &k, "counters_used", "%s", sum->counters_used);
        if (store_sysinfo_put(s->db, s->run, kv, k)) return fail_sink(s, "counter info");
    }
    return 0;
}

static int on_solver(void *ud, const struct qm_solve_event *ev)
{
    cli_store_sink *s = ud;
    store_solver_event e = {
        .step = ev->step, .block = ev->block, .n = ev->n, .nnz_per_row = ev->nnz_per_row,
        .kappa_fro = ev->kappa_fro, .kappa_lapack = ev->kappa_lapack,
        .kappa_gersh = ev->kappa_gersh, .kappa_exact = ev->kappa_exact,
        .kappa_used = ev->kappa_used, .est_ns = ev->est_ns, .route = (int)ev->route,
        .pred_classical_ns = ev->pred_classical_ns, .pred_quantum_ns = ev->pred_quantum_ns,
        .measured_classical_ns = ev->measured_classical_ns,
        .simulated_quantum_ns = ev->simulated_quantum_ns, .residual = ev->residual,
        .shift = ev->shift, .shift_raised = ev->shift_raised,
    };
    if (store_solver_event_add(s->db, s->run, &e)) return fail_sink(s, "solver event");
    return 0;
}

/* Called every step: pushes buffered points out once they are STORE_FLUSH_MS old, so a
 * slow step (or a kill) never holds back what was logged before it. */
static void on_progress(void *ud, long step, long total, int epoch, double loss, double sps)
{
    cli_store_sink *s = ud;
    /* Not printed here (this is the training thread, maybe under the workbench's screen):
     * kept for the caller, who says it (cli_store_sink_warning). */
    if (s->active && store_flush_due(s->db) && !s->warning[0])
        snprintf(s->warning, sizeof s->warning, "%.500s (retried)", store_error());
}

static int on_checkpoint(void *ud, const eng_checkpoint *ck)
{
    cli_store_sink *s = ud;
    if (store_checkpoint_put(s->db, s->run, ck->step, ck->epoch, ck->data, ck->len)) return fail_sink(s, "checkpoint");
    return 0;
}

/* At 2+ threads, what the training thread waited at the pool's joins (eng_run_result.pool),
 * beside the placement in the system record: compare's "pool waits/step". */
static int put_pool(store *db, long long run, const eng_run_result *res)
{
    if (res->pool.steps <= 0 || res->pool.joins <= 0) return 0;
    store_kv kv[4];
    size_t n = 0;
    kv_set(kv, &n, STORE_SYS_POOL_STEPS, "%ld", res->pool.steps);
    kv_set(kv, &n, STORE_SYS_POOL_STEP_S, "%.9g", res->pool.step_s);
    kv_set(kv, &n, STORE_SYS_POOL_JOINS, "%ld", res->pool.joins);
    kv_set(kv, &n, STORE_SYS_POOL_WAIT_S, "%.9g", res->pool.wait_s);
    return store_sysinfo_put(db, run, kv, n);
}

static void on_end(void *ud, const eng_run_result *res)
{
    cli_store_sink *s = ud;
    if (!s->active) return;
    s->active = 0;
    store_run r;
    store_run_init(&r);
    r.status = (store_run_status)res->status; /* same numbers by contract (store.h) */
    scopy(r.error, sizeof r.error, res->error ? res->error : "");
    r.steps = res->steps;
    r.epochs = res->epochs;
    r.wall_s = res->wall_s;
    r.hybrid_s = res->hybrid_s;
    r.final_train_loss = res->final_train_loss;
    r.best_train_loss = res->best_train_loss;
    r.final_test_loss = res->final_test_loss;
    r.final_test_acc = res->final_test_acc;
    r.best_test_acc = res->best_test_acc;
    r.samples_per_s = res->samples_per_s;
    r.steps_to_target = res->steps_to_target;
    r.wall_to_target = res->steps_to_target >= 0 ? res->wall_to_target : NAN;
    r.hybrid_to_target = res->steps_to_target >= 0 ? res->hybrid_to_target : NAN;
    r.peak_bytes = (long long)res->peak_bytes;
    r.peak_rss = (long long)res->peak_rss;
    r.solves = res->solves;
    r.quantum_solves = res->quantum_solves;
    r.kappa_first = res->kappa_first;
    r.kappa_last = res->kappa_last;
    if (put_pool(s->db, s->run, res) && !s->err[0]) snprintf(s->err, sizeof s->err, "%s", store_error());
    /* store_run_end waits for the writer to commit every point, then writes the end record,
     * both retried while another process holds the lock (busy timeout x retries). */
    if (store_run_end(s->db, s->run, &r)) {
        if (!s->err[0]) snprintf(s->err, sizeof s->err, "%s", store_error());
    } else if (!s->err[0]) {
        s->stored = 1;
    }
}

cli_store_sink *cli_store_sink_open(const char *db_path, char *err, size_t errlen)
{
    cli_store_sink *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (store_open(db_path, STORE_OPEN_CREATE | STORE_OPEN_WRITE, &s->db)) {
        snprintf(err, errlen, "%s", store_error());
        free(s);
        return NULL;
    }
    return s;
}

eng_sink cli_store_sink_get(cli_store_sink *s)
{
    return (eng_sink){ .ud = s, .run_begin = on_begin, .metric = on_metric, .op_stats = on_ops,
                       .solver = on_solver, .telemetry = on_telemetry, .progress = on_progress, .run_end = on_end,
                       .checkpoint = on_checkpoint };
}

int cli_output_check(const char *db_path, const char *out, char *err, size_t cap)
{
    if (store_output_check(db_path, out)) {
        snprintf(err, cap, "%s", store_error());
        return -1;
    }
    struct stat sb;
    if (!stat(out, &sb)) {
        if (S_ISDIR(sb.st_mode)) { snprintf(err, cap, "%s is a directory; give a file name", out); return -1; }
        if (access(out, W_OK)) { snprintf(err, cap, "cannot write %s: %s", out, strerror(errno)); return -1; }
        return 0;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        snprintf(err, cap, "cannot write %s: the directory %s does not exist", out, dir);
        return -1;
    }
    if (access(dir, W_OK)) {
        snprintf(err, cap, "cannot write %s: the directory %s is not writable (%s)", out, dir, strerror(errno));
        return -1;
    }
    return 0;
}

void cli_store_sink_resume(cli_store_sink *s, long long run) { s->resume_run = run; }

long long cli_store_sink_run_id(const cli_store_sink *s) { return s ? s->run : 0; }

const char *cli_store_sink_warning(const cli_store_sink *s)
{
    return s && s->warning[0] ? s->warning : NULL;
}

const char *cli_store_sink_error(const cli_store_sink *s)
{
    if (!s || s->stored) return NULL;
    return s->err[0] ? s->err : "the run's end was not recorded";
}

int cli_store_sink_close(cli_store_sink *s, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    if (!s) return 0;
    /* A run that never saw run_end (the caller bailed out) must not stay 'running'. */
    if (s->active)
        store_run_set_status(s->db, s->run, STORE_RUN_FAILED, "the run ended without a result");
    int rc = store_flush(s->db) ? -1 : 0;
    if (rc && err && cap) snprintf(err, cap, "could not write the last metrics: %s", store_error());
    store_close(s->db);
    free(s);
    return rc;
}
