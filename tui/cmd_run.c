/* cmd_run.c — `nnbench run FILE`: trains every variant of an experiment file, shows live
 * progress on a terminal, prints a summary (table or JSON), profiles and stores the runs. */
#include <cblas.h>
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../store/store.h"
#include "cli.h"
#include "runner.h"
#include "text.h"

void cmd_run_help(FILE *f)
{
    fprintf(f,
        "usage: nnbench run FILE [options]\n\n"
        "Trains every variant of the experiment file FILE (or the one named) and prints a\n"
        "summary, one row per variant. Runs are stored in the database unless --no-db.\n\n"
        "options:\n"
        "  --variant NAME        run only this variant\n"
        "  --set SECTION.KEY=V   override a key in every variant (repeatable),\n"
        "                        e.g. --set train.lr=0.1\n"
        "  --seed N              same as --set experiment.seed=N\n"
        "  --metrics HOST:PORT   serve Prometheus /metrics while training (rank k of\n"
        "                        mpirun: PORT+k); same as --set monitor.metrics=...\n"
        "  --tensorboard DIR     write TensorBoard event files under DIR while training;\n"
        "                        same as --set monitor.tensorboard=DIR\n"
        "  --json                print the summary as JSON instead of a table\n"
        "  --db PATH             database file (default $NNBENCH_DB or ./nnbench.db)\n"
        "  --no-db               do not store the runs\n"
        "  --profile             profile every op; print a table after each variant\n"
        "  --profile-sort KEY    self, total, calls, avg, flops, bytes, mem, name,\n"
        "                        gflops, intensity (FLOP/B), gbps\n"
        "                        (default self; gflops = the GFLOP/s column)\n"
        "  --profile-rows N      rows of the profile table (default 25, 0 = all)\n"
        "  --profile-by G        op, layer, phase, scope (default op)\n"
        "  --trace FILE.json     write a Chrome trace (Perfetto) of a window of steps\n"
        "  --trace-steps A:B     the trace's steps, inclusive, 1-based (default 1:5)\n"
        "  --report FILE         after all variants, a comparison report\n"
        "                        (.md .html .json .csv)\n"
        "  --keys                print every experiment-file key as a Markdown table\n"
        "  --ranks N             data-parallel on N MPI ranks: runs mpirun -np N on this\n"
        "                        command (also: mpirun -np N nnbench run FILE; rank 0\n"
        "                        prints and stores)\n\n"
        "Exit status: 0 all variants finished; 1 a variant failed or diverged; 2 bad\n"
        "usage or configuration; 128+N stopped by signal N: 130 Ctrl-C, 143 SIGTERM, 129\n"
        "SIGHUP (the run stops at the next step, keeps what it logged and is stored as\n"
        "interrupted).\n");
}

/* ---- live progress on a terminal ------------------------------------------------------ */

typedef struct {
    int tty;
    const char *label;
    double last_draw, t0;
    double acc;           /* last train_acc, NAN if none */
    int threads;
    int drawn;
} progress;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int pr_begin(void *ud, const eng_run_info *info)
{
    progress *p = ud;
    p->threads = info->threads;
    p->t0 = mono_s();
    p->last_draw = 0;
    p->acc = NAN;
    /* what serves the GEMMs, on a terminal; a backend skipped for failing its check always */
    if (p->tty && info->gemm) fprintf(stderr, "%s: kernels %s\n", cli_text(p->label), info->gemm);
    if (info->gemm_notes && info->gemm_notes[0]) fprintf(stderr, "%s: note: %s\n", cli_text(p->label), info->gemm_notes);
    if (p->tty && info->threads > 1) {
        char where[256];
        prof_placement_text(info->core_round_trip_ns, where, sizeof where);
        fprintf(stderr, "%s: %d threads, placement: %s\n", cli_text(p->label), info->threads, where);
    }
    return 0;
}

static int pr_metric(void *ud, const eng_metric *m)
{
    progress *p = ud;
    if (!strcmp(m->key, "train_acc")) p->acc = m->value;
    return 0;
}

static void pr_progress(void *ud, long step, long total, int epoch, double loss, double sps)
{
    progress *p = ud;
    if (!p->tty) return;
    double now = mono_s();
    if (now - p->last_draw < 0.1 && step != total) return; /* at most ~10 redraws a second */
    p->last_draw = now;
    double el = now - p->t0, eta = step > 0 ? el * (double)(total - step) / (double)step : 0;
    char acc[32] = "";
    if (!isnan(p->acc)) snprintf(acc, sizeof acc, "  acc %.3f", p->acc);
    fprintf(stderr, "\r\033[K%s  epoch %d  step %ld/%ld  loss %.4g%s  %.0f samples/s  ETA %d:%02d",
            cli_text(p->label), epoch + 1, step, total, loss, acc, sps, (int)(eta / 60), (int)eta % 60);
    fflush(stderr);
    p->drawn = 1;
}

static void pr_end(void *ud, const eng_run_result *res)
{
    progress *p = ud;
    if (p->tty && p->drawn) { fprintf(stderr, "\r\033[K"); fflush(stderr); }
    p->drawn = 0;
}

static int dist_rank; /* this process's MPI rank; 0 without mpirun */

/* This process runs no variant: says why (rank 0's stderr is the console; the others'
 * reason reaches it through the agreement before the first step, eng_dist_agree). */
static void leave_job(const char *why)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", why);
    fprintf(stderr, "%s\n", cli_text(msg));
    eng_dist_agree(NULL, msg);
}

/* A data-parallel job that broke (a rank died, rank 0 perhaps): rank 0 may be gone with its
 * run still 'running'. A rank of the same host opening the database for writing runs the
 * store's crash marking (the run of a process that is gone is recorded as crashed, with
 * that reason); rank 0's process is reaped by mpirun before it tears the job down, and
 * the marking leaves a live rank 0's run alone. Ranks of other hosts cannot see rank 0's
 * process or may not reach the file: there the next writer of the database records it. */
static void record_rank0_gone(const char *db_path)
{
    store *db = NULL;
    if (!store_open(db_path, STORE_OPEN_WRITE, &db)) store_close(db);
}

/* ---- the summary ------------------------------------------------------------------------ */

typedef struct {
    char variant[128];
    const char *optimizer;
    eng_run_status status;
    char error[512];
    int created;
    eng_run_result res;
    int threads;
    double target;
    long long run_id;
    prof_row *ops;    /* --json --profile: the op table, as printed (by --profile-by, sorted) */
    size_t n_ops;
    char warnings[1024]; /* prof_perf_warnings of the run's profile, one per line */
} row;

static const char *opt_name(eng_optimizer o)
{
    static const char *const n[] = { "sgd", "momentum", "adam", "adamw", "newton" };
    return (unsigned)o < 5 ? n[o] : "?";
}

/* At 2+ threads: the jobs a step split over the worker pool and what the training thread
 * waited at their ends for the other threads' slabs (eng_run_result.pool); nothing when no
 * variant split any. */
static void print_pool(const row *rows, size_t n, int wv, int utf8)
{
    int any = 0;
    for (size_t i = 0; i < n; i++) any |= rows[i].created && rows[i].res.pool.joins > 0;
    if (!any) return;
    char v[96];
    tui_fit("variant", wv, 0, utf8, v, sizeof v);
    printf("\n%s  %7s  %14s  %11s  %7s\n", v, "threads", "pool jobs/step", "waited/step", "of step");
    for (size_t i = 0; i < n; i++) {
        const eng_run_result *s = &rows[i].res;
        if (!rows[i].created || s->pool.joins <= 0 || s->pool.step_s <= 0) continue;
        double steps = (double)s->pool.steps;
        char jobs[32], waited[32], share[32];
        snprintf(jobs, sizeof jobs, "%.1f", (double)s->pool.joins / steps);
        snprintf(waited, sizeof waited, "%.1f us", s->pool.wait_s / steps * 1e6);
        snprintf(share, sizeof share, "%.1f%%", 100.0 * s->pool.wait_s / s->pool.step_s);
        tui_fit_middle(rows[i].variant, wv, 0, utf8, v, sizeof v);
        printf("%s  %7d  %14s  %11s  %7s\n", v, rows[i].threads, jobs, waited, share);
    }
    printf("(waited: at the ends of the split jobs, for the other threads' slabs)\n");
}

/* The summary after a run, in 80 columns: one table of results (the test loss for every
 * run, so a regression run has its test metric too, and the training throughput), and one
 * of the clocks when there is a target or a Newton run. The optimizer is left to list and
 * compare: with it the row would not fit. Formats of store.h (the same as list, compare,
 * reports and the workbench). */
static void print_table(const row *rows, size_t n)
{
    int any_newton = 0, any_target = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(rows[i].optimizer, "newton")) any_newton = 1;
        if (rows[i].target > 0) any_target = 1;
    }
    int wv = 7;
    for (size_t i = 0; i < n; i++) if ((int)strlen(rows[i].variant) > wv) wv = (int)strlen(rows[i].variant);
    int cap = cli_term_width() - 1 - 67; /* the other columns take 67 */
    cap = cap < 12 ? 12 : cap > 32 ? 32 : cap;
    if (wv > cap) wv = cap;
    int utf8 = cli_use_utf8();
    char v[96];
    tui_fit("variant", wv, 0, utf8, v, sizeof v);
    printf("%s  %-11s %6s %9s %9s %8s %9s %7s\n", v, "status", "steps", "loss", "test loss", "test acc", "samples/s",
           "wall");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        const eng_run_result *s = &r->res;
        char fl[32], tl[32], acc[32], sps[32], t[32];
        prof_fmt_num(fl, sizeof fl, r->created ? s->final_train_loss : NAN);
        prof_fmt_num(tl, sizeof tl, r->created ? s->final_test_loss : NAN);
        prof_fmt_num(acc, sizeof acc, r->created ? s->final_test_acc : NAN);
        if (r->created && isfinite(s->samples_per_s) && s->samples_per_s > 0)
            snprintf(sps, sizeof sps, "%.0f", s->samples_per_s);
        else snprintf(sps, sizeof sps, "-");
        prof_fmt_duration(t, sizeof t, r->created ? s->wall_s : NAN);
        tui_fit_middle(r->variant, wv, 0, utf8, v, sizeof v);
        printf("%s  %-11s %6ld %9s %9s %8s %9s %7s\n", v, eng_run_status_name(r->status), r->created ? s->steps : 0L,
               fl, tl, acc, sps, t);
    }
    for (size_t i = 0; i < n; i++)
        if (rows[i].created && rows[i].res.gemm_unprepared_calls > 0)
            printf("warning: %s: %ld GEMM calls had a shape class that no calibration measured; OpenBLAS served them "
                   "unchosen (a bug: report the model and its batch size)\n",
                   rows[i].variant, rows[i].res.gemm_unprepared_calls);
    print_pool(rows, n, wv, utf8);
    int world = eng_dist_world();
    if (world > 1) printf("ran data-parallel on %d MPI ranks (samples/s counts rank 0's share of each batch)\n", world);
    if (!any_newton && !any_target) return;
    /* Clocks: (sim) marks the simulated ones, as everywhere. */
    tui_fit("variant", wv, 0, utf8, v, sizeof v);
    printf("\n%s  %12s  %7s  %10s  %9s  %12s\n", v, "(sim) hybrid", "quantum", "steps->tgt", "wall->tgt",
           "(sim) h->tgt");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        const eng_run_result *s = &r->res;
        int reached = r->created && s->steps_to_target >= 0;
        int nt = r->created && !strcmp(r->optimizer, "newton") && s->solves > 0;
        char hy[32], qs[32], st[32], tt[32], ht[32];
        prof_fmt_duration(hy, sizeof hy, r->created ? s->hybrid_s : NAN);
        if (nt) snprintf(qs, sizeof qs, "%.1f%%", 100.0 * (double)s->quantum_solves / (double)s->solves);
        else snprintf(qs, sizeof qs, "-");
        if (reached) snprintf(st, sizeof st, "%ld", s->steps_to_target);
        else snprintf(st, sizeof st, "%s", r->target > 0 ? "never" : "-");
        prof_fmt_duration(tt, sizeof tt, reached ? s->wall_to_target : NAN);
        prof_fmt_duration(ht, sizeof ht, reached ? s->hybrid_to_target : NAN);
        tui_fit_middle(r->variant, wv, 0, utf8, v, sizeof v);
        printf("%s  %12s  %7s  %10s  %9s  %12s\n", v, hy, qs, st, tt, ht);
    }
}

static void json_num(prof_json *j, const char *key, double v)
{
    prof_json_key(j, key);
    prof_json_numg(j, v, 10);
}

static void print_json(const eng_experiment *ex, const row *rows, size_t n, int exit_code)
{
    prof_json j;
    prof_json_begin(&j, stdout, 1);
    prof_json_object(&j);
    prof_json_kstr(&j, "file", ex->path);
    prof_json_kstr(&j, "experiment", ex->n_variants ? ex->variants[0].name : "");
    prof_json_kint(&j, "exit_status", exit_code);
    prof_json_key(&j, "variants");
    prof_json_array(&j);
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        const eng_run_result *s = &r->res;
        double na = NAN;
        prof_json_object(&j);
        prof_json_kstr(&j, "variant", r->variant);
        prof_json_kstr(&j, "optimizer", r->optimizer);
        prof_json_kstr(&j, "status", eng_run_status_name(r->status));
        prof_json_key(&j, "error");
        if (r->error[0]) prof_json_str(&j, r->error); else prof_json_null(&j);
        prof_json_key(&j, "run_id");
        if (r->run_id > 0) prof_json_int(&j, r->run_id); else prof_json_null(&j);
        prof_json_kint(&j, "threads", r->threads);
        json_num(&j, "steps", r->created ? (double)s->steps : 0);
        json_num(&j, "epochs", r->created ? (double)s->epochs : 0);
        json_num(&j, "final_train_loss", r->created ? s->final_train_loss : na);
        json_num(&j, "best_train_loss", r->created ? s->best_train_loss : na);
        json_num(&j, "final_test_loss", r->created ? s->final_test_loss : na);
        json_num(&j, "final_test_acc", r->created ? s->final_test_acc : na);
        json_num(&j, "best_test_acc", r->created ? s->best_test_acc : na);
        json_num(&j, "wall_s", r->created ? s->wall_s : na);
        json_num(&j, "hybrid_s", r->created ? s->hybrid_s : na);
        json_num(&j, "samples_per_s", r->created ? s->samples_per_s : na);
        json_num(&j, "target_loss", r->target > 0 ? r->target : na);
        json_num(&j, "steps_to_target", r->created && s->steps_to_target >= 0 ? (double)s->steps_to_target : na);
        json_num(&j, "wall_to_target", r->created ? s->wall_to_target : na);
        json_num(&j, "hybrid_to_target", r->created ? s->hybrid_to_target : na);
        json_num(&j, "peak_bytes", r->created ? (double)s->peak_bytes : na);
        json_num(&j, "peak_rss", r->created ? (double)s->peak_rss : na);
        json_num(&j, "gemm_unprepared_calls", r->created ? (double)s->gemm_unprepared_calls : na);
        json_num(&j, "pool_steps", r->created ? (double)s->pool.steps : na);
        json_num(&j, "pool_step_s", r->created ? s->pool.step_s : na);
        json_num(&j, "pool_joins", r->created ? (double)s->pool.joins : na);
        json_num(&j, "pool_wait_s", r->created ? s->pool.wait_s : na);
        json_num(&j, "solves", r->created ? (double)s->solves : na);
        json_num(&j, "quantum_solves", r->created ? (double)s->quantum_solves : na);
        json_num(&j, "kappa_first", r->created ? s->kappa_first : na);
        json_num(&j, "kappa_last", r->created ? s->kappa_last : na);
        if (r->ops) {
            prof_json_key(&j, "ops");
            store_op_rows_json(&j, r->ops, r->n_ops);
            prof_json_key(&j, "warnings");
            prof_json_array(&j);
            char warn[sizeof r->warnings];
            snprintf(warn, sizeof warn, "%s", r->warnings);
            for (char *save = NULL, *w = strtok_r(warn, "\n", &save); w; w = strtok_r(NULL, "\n", &save))
                prof_json_str(&j, w);
            prof_json_close(&j);
        }
        prof_json_close(&j);
    }
    prof_json_close(&j);
    prof_json_close(&j);
    prof_json_end(&j);
}

static void print_keys_markdown(void)
{
    printf("| key | type | default | meaning |\n|---|---|---|---|\n");
    for (const eng_key_doc *d = eng_key_docs; d->key; d++) {
        printf("| `%s` | %s | %s%s%s | ", d->key, d->type, d->def[0] && d->def[0] != '(' ? "`" : "",
               d->def[0] ? d->def : "\"\"", d->def[0] && d->def[0] != '(' ? "`" : "");
        for (const char *c = d->help; *c; c++) {
            if (*c == '|') fputs("\\|", stdout);
            else putchar(*c);
        }
        printf(" |\n");
    }
}

/* "out.json" + "sgd" -> "out-sgd.json" */
static void suffixed(char *out, size_t cap, const char *path, const char *variant)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) { snprintf(out, cap, "%s-%s", path, variant); return; }
    snprintf(out, cap, "%.*s-%s%s", (int)(dot - path), path, variant, dot);
}

/* ---- the command ------------------------------------------------------------------------ */

static int run_main(int argc, char **argv);

/* Data-parallel --trace: every rank wrote its own file (rank k: PATH.rankk); once all have,
 * rank 0 joins them into PATH, one process row per rank. */
static void merge_rank_traces(const char *path)
{
    if (eng_dist_barrier()) { fprintf(stderr, "nnbench run: --trace: %s\n", eng_error()); return; }
    if (dist_rank != 0) return;
    int n = eng_dist_world();
    char **srcs = calloc((size_t)n, sizeof *srcs), **labels = calloc((size_t)n, sizeof *labels);
    int ok = srcs && labels;
    for (int k = 0; ok && k < n; k++) {
        size_t len = strlen(path) + 32;
        ok = (srcs[k] = malloc(len)) && (labels[k] = malloc(32));
        if (!ok) break;
        if (k) snprintf(srcs[k], len, "%s.rank%d", path, k);
        else snprintf(srcs[k], len, "%s", path);
        snprintf(labels[k], 32, "nnbench rank %d", k);
    }
    if (!ok) fprintf(stderr, "nnbench run: --trace: out of memory joining the ranks' traces\n");
    else if (prof_trace_merge(path, (const char *const *)srcs, (const char *const *)labels, (size_t)n))
        fprintf(stderr, "nnbench run: --trace: %s (the ranks' own files are kept)\n", prof_error());
    else
        for (int k = 1; k < n; k++) remove(srcs[k]);
    for (int k = 0; k < n; k++) { if (srcs) free(srcs[k]); if (labels) free(labels[k]); }
    free(srcs);
    free(labels);
}

/* ---- the runner's hooks (runner.h): rows, messages, profile tables, traces ---------- */

typedef struct {
    row *rows;
    size_t n_rows;
    long long *ids;
    size_t n_ids;
    int any_failed, any_config;
    progress *pr;
    FILE *side;
    int profile, json;
    const char *trace;
    long trace_a, trace_b;
    prof_group pgroup;
    prof_sort psort;
    const char *prof_by_s, *prof_sort_s;
    long prof_rows_n;
    const char *db_path;
    int has_db;              /* the runs are stored */
    size_t n_variants;
    char trace_path[600], rank_path[640];
} run_ctx;

static int run_begin(void *ud, size_t v, const eng_config *cfg)
{
    run_ctx *c = ud;
    (void)v;
    if (cli_stop_signal()) return 1;
    row *r = &c->rows[c->n_rows++];
    snprintf(r->variant, sizeof r->variant, "%s", cfg->variant[0] ? cfg->variant : cfg->name);
    r->optimizer = opt_name(cfg->train.optimizer);
    r->target = cfg->target_loss;
    r->status = ENG_RUN_FAILED;
    c->pr->label = r->variant;
    return 0;
}

static int run_profile(void *ud, size_t v, const eng_config *cfg, prof_options *po)
{
    run_ctx *c = ud;
    (void)v;
    if (!c->profile && !cfg->profile.enabled && !c->trace) return 0;
    *po = (prof_options){ .counters = cfg->profile.counters, .trace_first = c->trace_a, .trace_last = c->trace_b };
    /* not quiet: the once-per-process "no hardware counters" notice is said (run_done) */
    if (c->trace) {
        if (c->n_variants > 1) suffixed(c->trace_path, sizeof c->trace_path, c->trace, c->rows[c->n_rows - 1].variant);
        else snprintf(c->trace_path, sizeof c->trace_path, "%s", c->trace);
        po->trace_path = c->trace_path;
        if (dist_rank != 0) { /* merged into rank 0's file after the variant */
            snprintf(c->rank_path, sizeof c->rank_path, "%s.rank%d", c->trace_path, dist_rank);
            po->trace_path = c->rank_path;
        }
    }
    return 1;
}

static void run_running(void *ud, eng_run *run)
{
    run_ctx *c = ud;
    cli_stop_target(run);
    const char *note = run ? eng_run_data_note(run) : NULL;
    if (note) fprintf(stderr, "variant %s: note: %s\n", c->rows[c->n_rows - 1].variant, cli_text(note));
}

static void run_done(void *ud, const runner_variant *o, prof_t *prof)
{
    run_ctx *c = ud;
    row *r = &c->rows[c->n_rows - 1];
    const eng_config *cfg = o->cfg;
    snprintf(r->error, sizeof r->error, "%s", o->error);
    fputs(o->prof_warnings, stderr); /* the profiler never prints: we say its warnings */
    if (!o->created) {
        if (o->rc == ENG_ESTOPPED) r->status = ENG_RUN_INTERRUPTED; /* stopped while its graph was built */
        fprintf(stderr, "variant %s: %s\n", r->variant, cli_text(r->error));
        if (o->rc == ENG_EINVAL && !o->profiler_failed) c->any_config = 1;
        else c->any_failed = 1;
        return;
    }
    r->created = 1;
    r->res = o->res;
    r->status = o->res.status;
    r->threads = c->pr->threads;
    if (o->rc == ENG_ESINK && c->has_db) {
        c->any_failed = 1; /* the store's own words follow: "not stored in DB: why" */
    } else if (o->rc && o->rc != ENG_ESTOPPED) {
        fprintf(stderr, "variant %s: %s\n", r->variant, cli_text(r->error));
        c->any_failed = 1;
    } else if (o->rc == ENG_ESTOPPED) {
        fprintf(stderr, "variant %s: %s\n", r->variant, cli_text(r->error));
    }
    if (o->store_warning[0]) fprintf(stderr, "variant %s: warning: %s\n", r->variant, cli_text(o->store_warning));
    if (o->monitor_warning[0]) fprintf(stderr, "variant %s: warning: %s\n", r->variant, cli_text(o->monitor_warning));
    /* "stored" only once the end record is committed; any store error is exit 1. */
    const char *serr = o->store_error[0] ? o->store_error : o->rc == ENG_ESINK && c->has_db ? o->error : NULL;
    if (serr) {
        fprintf(stderr, "variant %s: not stored in %s: %s\n", r->variant, c->db_path, cli_text(serr));
        if (!r->error[0]) snprintf(r->error, sizeof r->error, "not stored: %.490s", serr);
        c->any_failed = 1;
    } else if (o->run_id > 0) {
        r->run_id = o->run_id;
        c->ids[c->n_ids++] = o->run_id;
        fprintf(c->side, "variant %s: stored as run %lld in %s\n", r->variant, o->run_id, c->db_path);
    }
    if (prof && (c->profile || cfg->profile.enabled)) { /* --trace alone: no table */
        prof_row *prow = NULL;
        size_t pn = 0;
        if (!prof_rows(prof, c->pgroup, &prow, &pn)) {
            prof_summary sum;
            prof_summary_get(prof, &sum);
            prof_rows_sort(prow, pn, c->psort);
            fprintf(c->side, "\nprofile of variant %s (by %s, sorted by %s):\n", r->variant, c->prof_by_s, c->prof_sort_s);
            prof_print_table(c->side, prow, pn, &sum, c->psort, (size_t)c->prof_rows_n);
            /* from every scope, whatever --profile-by shows (data.wait is a phase) */
            prof_row *scopes = NULL;
            size_t ns = 0;
            if (!prof_rows(prof, PROF_BY_SCOPE, &scopes, &ns))
                prof_perf_warnings(scopes, ns, sum.total_self_ns, r->threads, openblas_get_corename(),
                              eng_isa_name(eng_isa_best()), r->warnings, sizeof r->warnings);
            free(scopes);
            for (char *w = r->warnings, *nl; *w && (nl = strchr(w, '\n')); w = nl + 1)
                fprintf(c->side, "Warning: %.*s\n", (int)(nl - w), w);
            fprintf(c->side, "\n");
            if (c->json && !r->ops) { r->ops = prow; r->n_ops = pn; prow = NULL; }
            free(prow);
        } else {
            fprintf(stderr, "variant %s: profile: %s\n", r->variant, cli_text(prof_error()));
        }
    }
    if (o->trace_tried) {
        int werr = o->trace_error[0] != 0;
        if (werr) {
            fprintf(stderr, "variant %s: %s\n", r->variant, cli_text(o->trace_error));
            c->any_failed = 1;
        }
        if (eng_dist_world() > 1) merge_rank_traces(c->trace_path); /* every rank joins the barrier */
        if (!werr)
            fprintf(c->side, "variant %s: trace of steps %ld-%ld written to %s\n", r->variant, c->trace_a, c->trace_b,
                    c->trace_path);
    }
}

/* ---- options ------------------------------------------------------------------------ */

typedef struct {
    const char *variant, *db, *report, *trace, *ranks;
    const char *prof_sort_s, *prof_by_s;
    int json, no_db, profile;
    long prof_rows_n, trace_a, trace_b;
    const char **sets;       /* --set and --seed, in order (sized for argc) */
    size_t n_sets;
    char seed_set[64], metrics_set[1024], tb_set[1024];
} run_opts;

static int opt_set(void *opts, const char *cmd, const char *name, char **vals)
{
    run_opts *o = opts;
    if (!strcmp(name, "--seed")) {
        snprintf(o->seed_set, sizeof o->seed_set, "experiment.seed=%s", vals[0]);
        o->sets[o->n_sets++] = o->seed_set;
    } else if (!strcmp(name, "--metrics") || !strcmp(name, "--tensorboard")) {
        char *set = name[2] == 'm' ? o->metrics_set : o->tb_set;
        snprintf(set, sizeof o->metrics_set, "monitor.%s=%s", name + 2, vals[0]);
        o->sets[o->n_sets++] = set;
    } else {
        o->sets[o->n_sets++] = vals[0];
    }
    return 0;
}

/* --profile-sort, --profile-by and --profile-rows also turn profiling on. */
static int opt_profile(void *opts, const char *cmd, const char *name, char **vals)
{
    run_opts *o = opts;
    o->profile = 1;
    if (!strcmp(name, "--profile-sort")) o->prof_sort_s = vals[0];
    else if (!strcmp(name, "--profile-by")) o->prof_by_s = vals[0];
    else {
        char *end;
        o->prof_rows_n = strtol(vals[0], &end, 10);
        if (*end || o->prof_rows_n < 0) {
            fprintf(stderr, "nnbench %s: --profile-rows: expected a number >= 0, got '%s'\n", cmd, vals[0]);
            return 2;
        }
    }
    return 0;
}

static int opt_trace_steps(void *opts, const char *cmd, const char *name, char **vals)
{
    run_opts *o = opts;
    char *end;
    o->trace_a = strtol(vals[0], &end, 10);
    if (*end == ':') o->trace_b = strtol(end + 1, &end, 10);
    if (*end || o->trace_a < 1 || o->trace_b < o->trace_a) {
        fprintf(stderr, "nnbench %s: %s: expected A:B with 1 <= A <= B, got '%s'\n", cmd, name, vals[0]);
        return 2;
    }
    return 0;
}

static const cli_opt run_opt[] = {
    CLI_OPT_VALUE("--variant", NULL, run_opts, variant), CLI_OPT_CALL("--set", opt_set, 1),
    CLI_OPT_CALL("--seed", opt_set, 1), CLI_OPT_CALL("--metrics", opt_set, 1),
    CLI_OPT_CALL("--tensorboard", opt_set, 1), CLI_OPT_FLAG("--json", NULL, run_opts, json),
    CLI_OPT_VALUE("--db", NULL, run_opts, db), CLI_OPT_FLAG("--no-db", NULL, run_opts, no_db),
    CLI_OPT_FLAG("--profile", NULL, run_opts, profile), CLI_OPT_CALL("--profile-sort", opt_profile, 1),
    CLI_OPT_CALL("--profile-by", opt_profile, 1), CLI_OPT_CALL("--profile-rows", opt_profile, 1),
    CLI_OPT_VALUE("--trace", NULL, run_opts, trace), CLI_OPT_CALL("--trace-steps", opt_trace_steps, 1),
    CLI_OPT_VALUE("--report", NULL, run_opts, report), CLI_OPT_VALUE("--ranks", NULL, run_opts, ranks),
    CLI_OPT_ACTION("--keys", print_keys_markdown),
};
const cli_spec cmd_run_spec = { "run", cmd_run_help, run_opt, CLI_N(run_opt) };

int cmd_run(int argc, char **argv)
{
    int at = cli_option_at(&cmd_run_spec, argc, argv, "--ranks");
    if (at > 0) {
        if (at + 1 >= argc) { fprintf(stderr, "nnbench run: --ranks needs a value\n"); return 2; }
        return cli_mpirun_self(argc, argv, at);
    }
    int world = 1;
    if (eng_dist_init(&dist_rank, &world)) { fprintf(stderr, "nnbench run: %s\n", eng_error()); return 1; }
    if (dist_rank != 0) {
        /* Rank 0 alone talks to the console: the others' output would repeat it. */
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) return 1;
    }
    int code = run_main(argc, argv);
    fflush(NULL);
    eng_dist_finalize(code);
    return code;
}

/* Reads the options and checks those that need no file; the experiment file is argv[1]
 * after it. -1 to go on (o->sets to free), else the exit status (nothing left to free). */
static int run_parse(int argc, char **argv, run_opts *o, prof_sort *psort, prof_group *pgroup)
{
    memset(o, 0, sizeof *o);
    o->prof_sort_s = "self";
    o->prof_by_s = "op";
    o->prof_rows_n = 25;
    o->trace_a = 1;
    o->trace_b = 5;
    o->sets = calloc((size_t)argc + 1, sizeof *o->sets);
    if (!o->sets) { fprintf(stderr, "nnbench run: out of memory\n"); return 1; }
    int n_pos, code = cli_parse(&cmd_run_spec, o, argc, argv, &n_pos);
    if (code < 0) {
        if (!n_pos)
            fprintf(stderr, "nnbench run: which experiment file? usage: nnbench run FILE (see nnbench run --help)\n");
        else if (n_pos > 1)
            fprintf(stderr, "nnbench run: one experiment file at a time (got '%s' and '%s')\n", argv[1], argv[2]);
        else if (prof_sort_parse(o->prof_sort_s, psort)) {
            const char *names[PROF_SORT_N];
            for (int i = 0; i < PROF_SORT_N; i++) names[i] = prof_sort_name((prof_sort)i);
            cli_value_error("run", "--profile-sort", o->prof_sort_s, names, PROF_SORT_N);
        } else if (prof_group_parse(o->prof_by_s, pgroup)) {
            const char *names[] = { prof_group_name(PROF_BY_OP), prof_group_name(PROF_BY_LAYER),
                                    prof_group_name(PROF_BY_PHASE), prof_group_name(PROF_BY_SCOPE) };
            cli_value_error("run", "--profile-by", o->prof_by_s, names, 4);
        }
        else if (o->report && o->no_db)
            fprintf(stderr, "nnbench run: --report reads the stored runs; it cannot be used with --no-db\n");
        else
            return -1;
        code = 2;
    }
    free(o->sets);
    o->sets = NULL;
    return code;
}

/* Before any training: an unwritable --trace or --report is found out now, and neither may
 * be the database. 0 or the exit status. */
static int run_check_outputs(const run_opts *o, const eng_experiment *ex, const char *db_path)
{
    for (size_t v = 0; v <= ex->n_variants; v++) {
        char path[600], err[700];
        const char *what = v < ex->n_variants ? "--trace" : "--report";
        const eng_config *cfg = v < ex->n_variants ? &ex->variants[v] : NULL;
        if (cfg && !o->trace) continue;
        if (!cfg && !o->report) continue;
        if (cfg && ex->n_variants > 1) suffixed(path, sizeof path, o->trace, cfg->variant[0] ? cfg->variant : cfg->name);
        else snprintf(path, sizeof path, "%s", cfg ? o->trace : o->report);
        if (cli_output_check(o->no_db ? NULL : db_path, path, err, sizeof err)) {
            fprintf(stderr, "nnbench run: %s: %s; nothing was trained\n", what, err);
            return 2;
        }
    }
    return 0;
}

/* After training: the report of the stored runs (the store flushed and closed first, as
 * the report reads the database), then the store closed. Returns code, made 1 by a
 * failure when it was 0. */
static int run_finish(const run_opts *o, cli_store_sink *db_sink, const char *db_path, const long long *ids,
                      size_t n_ids, FILE *side, int code)
{
    char cerr[700];
    if (o->report && n_ids == 0) {
        fprintf(stderr, "nnbench run: --report %s: no run was stored\n", o->report);
        if (!code) code = 1;
    } else if (o->report) {
        if (cli_store_sink_close(db_sink, cerr, sizeof cerr)) { fprintf(stderr, "nnbench: %s\n", cerr); if (!code) code = 1; }
        db_sink = NULL;
        if (cli_report_write(db_path, ids, n_ids, o->report)) { if (!code) code = 1; }
        else fprintf(side, "report of %zu run%s written to %s\n", n_ids, n_ids == 1 ? "" : "s", o->report);
    }
    if (cli_store_sink_close(db_sink, cerr, sizeof cerr)) { fprintf(stderr, "nnbench: %s\n", cerr); if (!code) code = 1; }
    return code;
}

/* Trains every variant of ex into db_sink (NULL: not stored), prints the summary, writes
 * the report; returns the exit status. */
static int run_train(run_opts *o, prof_sort psort, prof_group pgroup, eng_experiment *ex, cli_store_sink *db_sink,
                     const char *db_path, int rank_db)
{
    row *rows = calloc(ex->n_variants, sizeof *rows);
    long long *ids = calloc(ex->n_variants, sizeof *ids);
    if (!rows || !ids) {
        fprintf(stderr, "nnbench run: out of memory\n");
        free(rows); free(ids);
        cli_store_sink_close(db_sink, NULL, 0);
        return 1;
    }
    /* SIGTERM and SIGHUP (kill, a closed terminal) stop the run as Ctrl-C does: the tail
     * is flushed and the run is stored as interrupted. */
    cli_stop_install(eng_dist_world() > 1);

    progress pr = { .tty = isatty(STDERR_FILENO), .acc = NAN };
    eng_sink pr_sink = { .ud = &pr, .run_begin = pr_begin, .metric = pr_metric,
                         .progress = pr_progress, .run_end = pr_end };
    FILE *side = o->json ? stderr : stdout; /* stdout carries only JSON under --json */
    run_ctx rc_ = { .rows = rows, .ids = ids, .pr = &pr, .side = side, .profile = o->profile, .json = o->json, .trace = o->trace,
                    .trace_a = o->trace_a, .trace_b = o->trace_b, .pgroup = pgroup, .psort = psort,
                    .prof_by_s = o->prof_by_s, .prof_sort_s = o->prof_sort_s, .prof_rows_n = o->prof_rows_n,
                    .db_path = db_path, .has_db = db_sink != NULL, .n_variants = ex->n_variants };
    runner_hooks hooks = { .ud = &rc_, .begin = run_begin, .profile = run_profile, .running = run_running,
                           .done = run_done, .sink = &pr_sink };
    runner_summary rsum;
    runner_run(ex, db_sink, &hooks, &rsum);
    if (rank_db && eng_dist_broken()) record_rank0_gone(db_path);
    cli_stop_restore();

    int code = cli_stop_signal() ? 128 + cli_stop_signal() : rc_.any_config ? 2 : rc_.any_failed ? 1 : 0;
    if (o->json) print_json(ex, rows, rc_.n_rows, code);
    else print_table(rows, rc_.n_rows);
    fflush(stdout);
    code = run_finish(o, db_sink, db_path, ids, rc_.n_ids, side, code);
    for (size_t i = 0; i < rc_.n_rows; i++) free(rows[i].ops);
    free(rows);
    free(ids);
    return code;
}

static int run_main(int argc, char **argv)
{
    run_opts o;
    prof_sort psort;
    prof_group pgroup;
    int code = run_parse(argc, argv, &o, &psort, &pgroup);
    if (code >= 0) return code;
    eng_experiment *ex = NULL;
    int bad = eng_experiment_load(argv[1], o.sets, o.n_sets, &ex);
    free(o.sets);
    if (bad || (o.variant && eng_experiment_select(ex, o.variant))) {
        leave_job(eng_error());
        eng_experiment_free(ex);
        return 2;
    }
    int rank_db = dist_rank != 0 && !o.no_db; /* rank 0 stores in db_path; this rank may record it gone */
    if (dist_rank != 0) { o.no_db = 1; o.report = NULL; } /* rank 0 stores the runs */
    /* The store is opened before any training: a read-only or corrupt database refuses now,
     * and so are the output files. */
    const char *db_path = cli_db_path(o.db);
    code = run_check_outputs(&o, ex, db_path);
    cli_store_sink *db_sink = NULL;
    if (!code && !o.no_db) {
        char err[600];
        db_sink = cli_store_sink_open(db_path, err, sizeof err);
        if (!db_sink) { fprintf(stderr, "nnbench: %s\n", cli_text(err)); code = 1; }
    }
    if (!code) code = run_train(&o, psort, pgroup, ex, db_sink, db_path, rank_db);
    eng_experiment_free(ex);
    return code;
}
