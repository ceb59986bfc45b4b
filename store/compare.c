/* compare.c — the one comparison of stored runs: which rows, in which order, with which
 * words; `nnbench compare`, the workbench's Compare screen and the reports render it.
 * Also the batch of the newest run, the metric order of charts and the solver summary. */
#include "internal.h"
#include "../profiler/profiler.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const store_cmp_section_names[STORE_CMP_N_SECTIONS] = {
    "Run", "Results", "Time ((sim): simulated clock, the quantum solver's modelled time)", "Config",
    "Top ops by self time" };

const char *store_kv_find(const store_kv *kv, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(kv[i].key, key)) return kv[i].value;
    return NULL;
}

int store_metric_lower_is_better(const char *key) { return strstr(key, "loss") || strstr(key, "err"); }

static int metric_rank(const char *k)
{
    if (!strcmp(k, "train_loss")) return 0;
    if (!strcmp(k, "test_loss")) return 1;
    if (strstr(k, "loss")) return 2;
    if (!strcmp(k, "train_acc")) return 3;
    if (!strcmp(k, "test_acc")) return 4;
    if (strstr(k, "acc")) return 5;
    return 6;
}

static int metric_cmp(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int rx = metric_rank(x), ry = metric_rank(y);
    return rx != ry ? rx - ry : strcmp(x, y);
}

void store_metric_keys_sort(const char **keys, size_t n) { qsort(keys, n, sizeof *keys, metric_cmp); }

/* ---- solver summary ---------------------------------------------------------------- */

void store_solver_summarize(const store_solver_event *ev, size_t n, store_solver_summary *o)
{
    memset(o, 0, sizeof *o);
    o->kappa_first = o->kappa_last = o->kappa_min = o->kappa_max = NAN;
    o->solves = n;
    double ksum = 0;
    size_t kn = 0;
    long cur = n ? ev[0].step : 0;
    for (size_t i = 0; i <= n; i++) {
        /* Per-step means, as the engine's kappa_first/kappa_last are. */
        if (i == n || ev[i].step != cur) {
            if (kn) {
                double m = ksum / (double)kn;
                if (isnan(o->kappa_first)) o->kappa_first = m;
                o->kappa_last = m;
            }
            if (i == n) break;
            cur = ev[i].step;
            ksum = 0;
            kn = 0;
        }
        const store_solver_event *e = &ev[i];
        o->quantum += e->route != 0;
        o->raised += e->shift_raised != 0;
        if (isfinite(e->measured_classical_ns)) o->measured_classical_s += e->measured_classical_ns * 1e-9;
        if (isfinite(e->pred_classical_ns)) o->pred_classical_s += e->pred_classical_ns * 1e-9;
        if (isfinite(e->pred_quantum_ns)) o->pred_quantum_s += e->pred_quantum_ns * 1e-9;
        if (isfinite(e->simulated_quantum_ns)) o->simulated_quantum_s += e->simulated_quantum_ns * 1e-9;
        if (isfinite(e->residual) && e->residual > o->worst_residual) o->worst_residual = e->residual;
        if (isfinite(e->kappa_used)) {
            ksum += e->kappa_used;
            kn++;
            if (isnan(o->kappa_min) || e->kappa_used < o->kappa_min) o->kappa_min = e->kappa_used;
            if (isnan(o->kappa_max) || e->kappa_used > o->kappa_max) o->kappa_max = e->kappa_used;
        }
    }
}

int store_solver_summary_lines(const store_solver_summary *s, char l[3][256])
{
    char a[32], b[32], c[32], d[32];
    /* Every solve is computed classically (the routed ones too: the simulation needs the
     * answer), so the measured time covers all of them; say so, and name both clocks. */
    snprintf(l[0], 256, "%zu linear solves: %zu routed to the simulated quantum solver, %zu to the classical one; "
             "%zu needed a larger shift", s->solves, s->quantum, s->solves - s->quantum, s->raised);
    snprintf(l[1], 256, "wall clock (measured): all solves computed classically, %s (model %s); "
             "quantum clock (simulated): %s for the %zu routed (model, for all: %s)",
             prof_fmt_duration(a, sizeof a, s->measured_classical_s), prof_fmt_duration(b, sizeof b, s->pred_classical_s),
             prof_fmt_duration(c, sizeof c, s->simulated_quantum_s), s->quantum,
             prof_fmt_duration(d, sizeof d, s->pred_quantum_s));
    snprintf(l[2], 256, "kappa used (mean of a step's solves): first %s, last %s; range %s..%s; worst residual %.3g",
             prof_fmt_num(a, sizeof a, s->kappa_first), prof_fmt_num(b, sizeof b, s->kappa_last),
             prof_fmt_num(c, sizeof c, s->kappa_min), prof_fmt_num(d, sizeof d, s->kappa_max), s->worst_residual);
    return 3;
}

/* ---- the last batch ---------------------------------------------------------------- */

int store_last_batch(store *s, long long **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    store_list_filter f = { .status = -1, .sort = "id", .desc = 1, .limit = 256 };
    store_run *runs;
    size_t m;
    int st = store_runs_list(s, &f, &runs, &m);
    if (st) return st;
    if (!m) { free(runs); return store_fail(STORE_ENOTFOUND, "no runs in %s yet", s->path); }
    const store_run *last = &runs[0];
    size_t k = 1;
    /* Newest first: the batch goes back while the same process wrote the same file and
     * no variant repeats (a repeat is the previous batch of the same file). */
    while (k < m) {
        const store_run *r = &runs[k];
        if (r->pid != last->pid || strcmp(r->host, last->host) || strcmp(r->exp_path, last->exp_path) ||
            strcmp(r->name, last->name) || !r->variant[0])
            break;
        int seen = 0;
        for (size_t j = 0; j < k && !seen; j++) seen = !strcmp(runs[j].variant, r->variant);
        if (seen) break;
        k++;
    }
    long long *out = malloc(k * sizeof *out);
    if (!out) { free(runs); return store_fail(STORE_ENOMEM, "out of memory"); }
    for (size_t j = 0; j < k; j++) out[j] = runs[k - 1 - j].id;
    free(runs);
    *ids = out;
    *n = k;
    return STORE_OK;
}

/* ---- the comparison ---------------------------------------------------------------- */

void store_compare_free(store_compare *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        store_run_clear(&c->runs[i]);
        if (c->params) free(c->params[i]);
        if (c->ops) free(c->ops[i]);
        if (c->metric) store_series_free(&c->metric[i]);
    }
    for (size_t r = 0; r < c->n_rows; r++) free(c->rows[r].cells);
    free(c->rows);
    free(c->runs);
    free(c->label);
    free(c->short_label);
    free(c->params);
    free(c->n_params);
    free(c->ops);
    free(c->n_ops);
    free(c->self_total_ns);
    free(c->quantum_s);
    free(c->metric);
    free(c->kernels);
    free(c->placement);
    free(c->pool);
    free(c);
}

/* The kernels cell: the GEMM choice up to its first ';' ("onednn 8/8 shape classes") made
 * short, and the OpenBLAS core; "-" for runs stored before the choice was recorded. */
static void kernels_cell(const store_kv *sys, size_t n, char *out, size_t cap)
{
    const char *g = store_kv_find(sys, n, "gemm"), *core = store_kv_find(sys, n, "blas_core");
    if (!g) { snprintf(out, cap, "%s%.40s", core ? "openblas " : "-", core ? core : ""); return; }
    size_t len = strcspn(g, ";");
    const char *sc = strstr(g, " shape classes");
    if (sc && (size_t)(sc - g) < len) len = (size_t)(sc - g);
    snprintf(out, cap, "%.*s, %.20s", (int)(len > 40 ? 40 : len), g, core ? core : "?");
}

/* The placement cell of a run of 2+ threads: the round trip of a cache line between two
 * of its threads at its start ("441 ns": a figure, so that a page's example matches on any
 * machine); "not measured" when it could not be; "-" at 1 thread or for older runs. */
static void placement_cell(const store_kv *sys, size_t n, char *out, size_t cap)
{
    const char *where = store_kv_find(sys, n, STORE_SYS_PLACEMENT), *rt = store_kv_find(sys, n, STORE_SYS_ROUND_TRIP);
    if (!where) snprintf(out, cap, "-");
    else if (!rt) snprintf(out, cap, "not measured");
    else snprintf(out, cap, "%.0f ns", strtod(rt, NULL));
}

/* The pool cell of a run of 2+ threads: its training thread's waits a step at the ends of
 * the split jobs, and their share of the step time; "-" at 1 thread or for older runs. */
static void pool_cell(const store_kv *sys, size_t n, char *out, size_t cap)
{
    const char *steps = store_kv_find(sys, n, STORE_SYS_POOL_STEPS), *step_s = store_kv_find(sys, n, STORE_SYS_POOL_STEP_S),
               *wait_s = store_kv_find(sys, n, STORE_SYS_POOL_WAIT_S);
    double k = steps ? strtod(steps, NULL) : 0, t = step_s ? strtod(step_s, NULL) : 0, w = wait_s ? strtod(wait_s, NULL) : -1;
    if (k > 0 && t > 0 && w >= 0) snprintf(out, cap, "%.0f us %.1f%%", 1e6 * w / k, 100 * w / t);
    else snprintf(out, cap, "-");
}

/* The MPI transport a data-parallel run ran on, from its system record's mpi_transport:
 * the candidate's name ("copy-256k (...): ..."), or what the user set ("as set by
 * VAR=value"); "" for a run of one process (or stored before transports were recorded). */
static void transport_of(const store_kv *sys, size_t n, char *out, size_t cap)
{
    const char *t = store_kv_find(sys, n, "mpi_transport");
    size_t len = !t ? 0 : !strncmp(t, "as set by ", 10) ? strcspn(t, "(;") : strcspn(t, " ;(");
    snprintf(out, cap, "%.*s", (int)len, t ? t : "");
}

/* What the runs ran on: kernels, placement and pool cells, and a note when kernels,
 * placements or MPI transports differ.
 * Placements differ when the round trips of two runs that have one (2+ threads, measured)
 * lie on both sides of PROF_SHARED_CACHE_NS and at least 2x apart: a figure moving within
 * its class, or across the line by a little, is not flagged. */
static void machine_load(store_compare *c, store *s, const long long *ids)
{
    int kdiffer = 0, tdiffer = 0;
    double lo = INFINITY, hi = -INFINITY;
    char first_tr[128] = "";
    for (size_t i = 0; i < c->n; i++) {
        store_kv *sys = NULL;
        size_t ns = 0;
        char tr[128];
        if (store_sysinfo_get(s, ids[i], &sys, &ns)) ns = 0;
        transport_of(sys, ns, tr, sizeof tr);
        if (tr[0] && !first_tr[0]) snprintf(first_tr, sizeof first_tr, "%s", tr);
        else if (tr[0]) tdiffer |= strcmp(tr, first_tr) != 0;
        kernels_cell(sys, ns, c->kernels[i], sizeof c->kernels[i]);
        placement_cell(sys, ns, c->placement[i], sizeof c->placement[i]);
        pool_cell(sys, ns, c->pool[i], sizeof c->pool[i]);
        const char *rt = store_kv_find(sys, ns, STORE_SYS_ROUND_TRIP);
        double trip = rt ? strtod(rt, NULL) : NAN;
        if (trip > 0) lo = fmin(lo, trip), hi = fmax(hi, trip);
        free(sys);
        kdiffer |= i && strcmp(c->kernels[i], c->kernels[0]);
    }
    memset(c->notes, 0, sizeof c->notes);
    if (kdiffer)
        snprintf(c->notes[STORE_CMP_NOTE_KERNELS], sizeof c->notes[0],
                 "note: these runs ran on different kernels (row \"kernels\"): their times compare the kernels too");
    if (lo < PROF_SHARED_CACHE_NS && hi >= PROF_SHARED_CACHE_NS && hi >= 2 * lo)
        snprintf(c->notes[STORE_CMP_NOTE_PLACEMENT], sizeof c->notes[0],
                 "note: these runs' threads ran on CPUs placed differently (row \"core round trip\": under %.0f ns "
                 "they share a last-level cache, over it not): their times compare the placement too",
                 PROF_SHARED_CACHE_NS);
    if (tdiffer)
        snprintf(c->notes[STORE_CMP_NOTE_TRANSPORT], sizeof c->notes[0],
                 "note: these runs' MPI ranks moved their gradients by different transports (nnbench show: "
                 "mpi_transport): their times compare the transports too");
}

/* A key's last dotted part ("train.lr" -> "lr"), enough in a label. */
static const char *key_tail(const char *k)
{
    const char *d = strrchr(k, '.');
    return d ? d + 1 : k;
}

static int same_name(const store_run *a, const store_run *b)
{
    return !strcmp(a->name, b->name) && !strcmp(a->variant, b->variant);
}

/* Up to two config keys that tell run i apart from the runs sharing its name. */
static void collision_suffix(const store_compare *c, size_t i, char *b, size_t cap)
{
    b[0] = 0;
    size_t o = 0;
    int shown = 0;
    for (size_t k = 0; k < c->n_params[i] && shown < 2; k++) {
        const char *key = c->params[i][k].key, *v = c->params[i][k].value;
        int differs = 0;
        for (size_t j = 0; j < c->n && !differs; j++) {
            if (j == i || !same_name(&c->runs[i], &c->runs[j])) continue;
            const char *w = store_kv_find(c->params[j], c->n_params[j], key);
            differs = !w || strcmp(v, w);
        }
        if (!differs) continue;
        int w = snprintf(b + o, cap - o, " %s=%s", key_tail(key), v);
        if (w < 0 || (size_t)w >= cap - o) break;
        o += (size_t)w;
        shown++;
    }
}

static void make_labels(store_compare *c)
{
    int common = c->n > 0;
    for (size_t i = 1; i < c->n && common; i++) common = !strcmp(c->runs[i].name, c->runs[0].name);
    snprintf(c->common_name, sizeof c->common_name, "%s", common ? c->runs[0].name : "");
    for (size_t i = 0; i < c->n; i++) {
        const store_run *r = &c->runs[i];
        char suf[128] = "";
        for (size_t j = 0; j < c->n; j++)
            if (j != i && same_name(r, &c->runs[j])) { collision_suffix(c, i, suf, sizeof suf); break; }
        snprintf(c->label[i], sizeof c->label[i], "#%lld %.80s%s%.60s%.90s", r->id, r->name, r->variant[0] ? "/" : "",
                 r->variant, suf);
        const char *sfx = suf[0] == ' ' ? suf + 1 : suf;
        if (common && r->variant[0])
            snprintf(c->short_label[i], sizeof c->short_label[i], "%.60s%.90s", r->variant, suf);
        else if (common)
            snprintf(c->short_label[i], sizeof c->short_label[i], "%.90s", sfx[0] ? sfx : r->name);
        else
            snprintf(c->short_label[i], sizeof c->short_label[i], "%.60s%s%.40s%.50s", r->name, r->variant[0] ? "/" : "",
                     r->variant, suf);
    }
    /* Names are shown as they are stored: control and bidi characters made visible (a
     * database may hold what an older nnbench let through), cut between characters. */
    char tmp[sizeof c->common_name];
    snprintf(tmp, sizeof tmp, "%s", c->common_name);
    prof_text_fit(c->common_name, sizeof c->common_name, tmp, (size_t)-1, 0);
    for (size_t i = 0; i < c->n; i++) {
        char t[sizeof c->label[i]];
        snprintf(t, sizeof t, "%s", c->label[i]);
        prof_text_fit(c->label[i], sizeof c->label[i], t, (size_t)-1, 0);
        snprintf(t, sizeof t, "%s", c->short_label[i]);
        prof_text_fit(c->short_label[i], sizeof c->short_label[i], t, (size_t)-1, 0);
    }
}

static store_cmp_row *row_add(store_compare *c, size_t *cap, store_cmp_section sec, const char *label)
{
    if (c->n_rows == *cap) {
        size_t nc = *cap ? *cap * 2 : 48;
        store_cmp_row *nr = realloc(c->rows, nc * sizeof *nr);
        if (!nr) return NULL;
        c->rows = nr;
        *cap = nc;
    }
    store_cmp_row *r = &c->rows[c->n_rows];
    memset(r, 0, sizeof *r);
    r->cells = calloc(c->n ? c->n : 1, sizeof *r->cells);
    if (!r->cells) return NULL;
    r->section = sec;
    snprintf(r->label, sizeof r->label, "%s", label);
    c->n_rows++;
    return r;
}

/* First point of sr at or past target (<= for losses, >= otherwise); -1 if none. */
static long reach(const store_series *sr, const char *key, double target)
{
    int low = store_metric_lower_is_better(key);
    for (size_t p = 0; p < sr->n; p++)
        if (isfinite(sr->value[p]) && (low ? sr->value[p] <= target : sr->value[p] >= target)) return (long)p;
    return -1;
}

/* The rows of each section; -1 out of memory. */
#define ROW(sec, label) do { if (!(w = row_add(c, cap, sec, label))) return -1; } while (0)
#define EACH for (size_t i = 0; i < c->n; i++)

static int rows_run(store_compare *c, size_t *cap)
{
    store_cmp_row *w;
    char lab[64], a[32], b[32];
    ROW(STORE_CMP_RUN, "run");
    EACH snprintf(w->cells[i], 64, "#%lld", c->runs[i].id);
    ROW(STORE_CMP_RUN, "name");
    EACH prof_text_fit(w->cells[i], 64, c->short_label[i], 63, 0);
    ROW(STORE_CMP_RUN, "status");
    EACH snprintf(w->cells[i], 64, "%s", store_status_name(c->runs[i].status));
    ROW(STORE_CMP_RUN, "optimizer");
    EACH prof_text_fit(w->cells[i], 64, c->runs[i].optimizer[0] ? c->runs[i].optimizer : "-", 63, 0);
    ROW(STORE_CMP_RUN, "dataset");
    EACH prof_text_fit(w->cells[i], 64, c->runs[i].dataset[0] ? c->runs[i].dataset : "-", 63, 0);
    ROW(STORE_CMP_RUN, "kernels");
    EACH prof_text_fit(w->cells[i], 64, c->kernels[i], 63, 0);
    w->differs = c->notes[STORE_CMP_NOTE_KERNELS][0] != 0;
    ROW(STORE_CMP_RUN, "core round trip");
    EACH prof_text_fit(w->cells[i], 64, c->placement[i], 63, 0);
    w->differs = c->notes[STORE_CMP_NOTE_PLACEMENT][0] != 0;

    static const struct { const char *label; size_t off; } reals[] = {
        { "final train loss", offsetof(store_run, final_train_loss) },
        { "best train loss", offsetof(store_run, best_train_loss) },
        { "final test loss", offsetof(store_run, final_test_loss) },
        { "final test acc", offsetof(store_run, final_test_acc) },
        { "best test acc", offsetof(store_run, best_test_acc) },
    };
    for (size_t k = 0; k < sizeof reals / sizeof reals[0]; k++) {
        ROW(STORE_CMP_RESULT, reals[k].label);
        EACH prof_fmt_num(w->cells[i], 64, *(const double *)((const char *)&c->runs[i] + reals[k].off));
    }
    if (c->metric_key[0] && strcmp(c->metric_key, "train_loss") && strcmp(c->metric_key, "test_acc")) {
        snprintf(lab, sizeof lab, "%.40s final / best", c->metric_key);
        ROW(STORE_CMP_RESULT, lab);
        int low = store_metric_lower_is_better(c->metric_key);
        EACH {
            const store_series *sr = &c->metric[i];
            double fin = NAN, best = NAN;
            for (size_t p = 0; p < sr->n; p++) {
                double v = sr->value[p];
                fin = v;
                if (isfinite(v) && (isnan(best) || (low ? v < best : v > best))) best = v;
            }
            snprintf(w->cells[i], 64, "%s / %s", prof_fmt_num(a, sizeof a, fin), prof_fmt_num(b, sizeof b, best));
        }
    }
    ROW(STORE_CMP_RESULT, "steps");
    EACH { if (c->runs[i].steps >= 0) snprintf(w->cells[i], 64, "%ld", c->runs[i].steps); else snprintf(w->cells[i], 64, "-"); }
    ROW(STORE_CMP_RESULT, "samples/s");
    EACH { if (isfinite(c->runs[i].samples_per_s)) snprintf(w->cells[i], 64, "%.0f", c->runs[i].samples_per_s); else snprintf(w->cells[i], 64, "-"); }
    ROW(STORE_CMP_RESULT, "peak mem (engine)");
    EACH prof_fmt_bytes(w->cells[i], 64, c->runs[i].peak_bytes >= 0 ? (double)c->runs[i].peak_bytes : NAN);
    ROW(STORE_CMP_RESULT, "peak RSS");
    EACH prof_fmt_bytes(w->cells[i], 64, c->runs[i].peak_rss >= 0 ? (double)c->runs[i].peak_rss : NAN);
    ROW(STORE_CMP_RESULT, "quantum/all solves");
    EACH { if (c->runs[i].solves > 0) snprintf(w->cells[i], 64, "%ld/%ld", c->runs[i].quantum_solves, c->runs[i].solves); else snprintf(w->cells[i], 64, "-"); }

    return 0;
}

static int rows_time(store_compare *c, const store_cmp_opts *o, size_t *cap)
{
    store_cmp_row *w;
    char lab[64];
    ROW(STORE_CMP_TIME, "wall time");
    EACH prof_fmt_duration(w->cells[i], 64, c->runs[i].wall_s);
    ROW(STORE_CMP_TIME, "pool waits/step");
    EACH snprintf(w->cells[i], 64, "%s", c->pool[i]);
    ROW(STORE_CMP_TIME, "(sim) quantum time");
    EACH prof_fmt_duration(w->cells[i], 64, c->quantum_s[i]);
    ROW(STORE_CMP_TIME, "(sim) hybrid time");
    EACH prof_fmt_duration(w->cells[i], 64, c->runs[i].hybrid_s);
    /* Time to target: with an explicit target on the chosen metric, from its series;
     * else each run's own experiment target on train_loss, as the run recorded it. */
    int explicit_t = isfinite(o->target) && c->metric_key[0];
    int low = explicit_t ? store_metric_lower_is_better(c->metric_key) : 1;
    snprintf(lab, sizeof lab, "target %.40s", explicit_t ? c->metric_key : "train_loss");
    ROW(STORE_CMP_TIME, lab);
    EACH {
        double t = explicit_t ? o->target : c->runs[i].target_loss;
        if (isfinite(t)) snprintf(w->cells[i], 64, "%s %g", low ? "<=" : ">=", t);
        else snprintf(w->cells[i], 64, "-");
    }
    store_cmp_row *rs, *rw, *rh;
    ROW(STORE_CMP_TIME, "steps to target"); rs = w;
    ROW(STORE_CMP_TIME, "wall to target"); rw = w;
    ROW(STORE_CMP_TIME, "(sim) hybrid to target"); rh = w;
    EACH {
        const store_run *r = &c->runs[i];
        long step = -1;
        double wall = NAN, hybrid = NAN;
        if (explicit_t) {
            const store_series *sr = &c->metric[i];
            long p = reach(sr, c->metric_key, o->target);
            if (p >= 0) { step = sr->step[p]; wall = sr->wall[p]; hybrid = sr->hybrid[p]; }
        } else if (r->steps_to_target >= 0) {
            step = r->steps_to_target; wall = r->wall_to_target; hybrid = r->hybrid_to_target;
        }
        if (!explicit_t && !isfinite(r->target_loss)) snprintf(rs->cells[i], 64, "-");
        else if (step < 0) snprintf(rs->cells[i], 64, "never");
        else snprintf(rs->cells[i], 64, "%ld", step);
        prof_fmt_duration(rw->cells[i], 64, step < 0 ? NAN : wall);
        prof_fmt_duration(rh->cells[i], 64, step < 0 ? NAN : hybrid);
    }

    return 0;
}

static int rows_config(store_compare *c, const store_cmp_opts *o, size_t *cap)
{
    c->config_set_only = c->n == 1 && !o->all_keys && o->set_keys;
    c->config_set_first = c->n == 1 && o->all_keys && o->set_keys;
    store_cmp_row *w;
    /* Config: the union of keys in key order (every run's list is sorted by key). */
    const char **keys = NULL;
    size_t nk = 0, kcap = 0;
    EACH for (size_t k = 0; k < c->n_params[i]; k++) {
        const char *key = c->params[i][k].key;
        size_t j = 0;
        while (j < nk && strcmp(keys[j], key)) j++;
        if (j < nk) continue;
        if (nk == kcap) {
            size_t nc = kcap ? kcap * 2 : 64;
            const char **nkp = realloc(keys, nc * sizeof *nkp);
            if (!nkp) { free(keys); return -1; }
            keys = nkp;
            kcap = nc;
        }
        keys[nk++] = key;
    }
    for (size_t x = 1; x < nk; x++)
        for (size_t y = x; y > 0 && strcmp(keys[y - 1], keys[y]) > 0; y--) {
            const char *t = keys[y]; keys[y] = keys[y - 1]; keys[y - 1] = t;
        }
    /* One run with its keys not at their default: those first, marked as differing (the
     * `*` of all keys), then, with all keys, the defaults. */
    int one_set = c->n == 1 && o->set_keys != NULL;
    for (int pass = one_set; pass >= 0; pass--)
        for (size_t k = 0; k < nk; k++) {
            int differs = 0, is_set = 0;
            const char *v0 = store_kv_find(c->params[0], c->n_params[0], keys[k]);
            for (size_t j = 1; j < c->n && !differs; j++) {
                const char *vj = store_kv_find(c->params[j], c->n_params[j], keys[k]);
                differs = !v0 || !vj ? v0 != vj : strcmp(v0, vj) != 0;
            }
            for (size_t j = 0; one_set && j < o->n_set_keys && !is_set; j++) is_set = !strcmp(o->set_keys[j], keys[k]);
            if (one_set && (is_set != pass || (!pass && !o->all_keys))) continue;
            if (!one_set && !differs && !o->all_keys && c->n > 1) continue;
            if (!(w = row_add(c, cap, STORE_CMP_CONFIG, keys[k]))) { free(keys); return -1; }
            w->differs = one_set ? is_set : differs;
            EACH {
                const char *v = store_kv_find(c->params[i], c->n_params[i], keys[k]);
                prof_text_fit(w->cells[i], 64, v ? v : "-", 63, 0);
            }
        }
    free(keys);

    return 0;
}

static int rows_ops(store_compare *c, size_t *cap)
{
    store_cmp_row *w;
    char lab[64];
    for (int k = 0; k < 3; k++) {
        int any = 0;
        EACH any |= (size_t)k < c->n_ops[i];
        if (!any) break;
        snprintf(lab, sizeof lab, "top op %d (self %%)", k + 1);
        ROW(STORE_CMP_OPS, lab);
        EACH {
            if ((size_t)k >= c->n_ops[i]) { snprintf(w->cells[i], 64, k ? "-" : "(not profiled)"); continue; }
            /* the op table's name and self % (profiler/table.c) */
            prof_table t;
            char nm[64], pct[16];
            prof_table_init(&t, c->ops[i], c->n_ops[i], c->self_total_ns[i], 0);
            int rank = prof_row_rank(&c->ops[i][k], NULL);   /* data-parallel: whose op it is */
            char rk[24] = "", ly[40] = "";
            if (rank > 0) snprintf(rk, sizeof rk, " rank %d", rank);
            /* the layer: one op name splits into a row per layer (dense.bwd twice) */
            if (c->ops[i][k].layer[0]) snprintf(ly, sizeof ly, " (%.32s)", c->ops[i][k].layer);
            snprintf(w->cells[i], 64, "%.24s%.10s%.16s %.10s", prof_table_cell(&t, &c->ops[i][k], PROF_COL_NAME, nm, sizeof nm),
                     rk, ly, prof_table_cell(&t, &c->ops[i][k], PROF_COL_SELF_PCT, pct, sizeof pct));
        }
    }
    return 0;
}
#undef ROW
#undef EACH

int store_compare_rows(store_compare *c, const store_cmp_opts *o)
{
    store_cmp_opts dflt = { .target = NAN };
    if (!o) o = &dflt;
    for (size_t r = 0; r < c->n_rows; r++) free(c->rows[r].cells);
    free(c->rows);
    c->rows = NULL;
    c->n_rows = 0;
    size_t cap = 0;
    if (rows_run(c, &cap) || rows_time(c, o, &cap) || rows_config(c, o, &cap) || rows_ops(c, &cap))
        return store_fail(STORE_ENOMEM, "out of memory comparing runs");
    return STORE_OK;
}

int store_compare_load(store *s, const long long *ids, size_t n, const store_cmp_opts *o, store_compare **out)
{
    *out = NULL;
    if (!n) return store_fail(STORE_EINVAL, "no runs to compare");
    store_compare *c = calloc(1, sizeof *c);
    if (!c) return store_fail(STORE_ENOMEM, "out of memory comparing runs");
    c->runs = calloc(n, sizeof *c->runs);
    c->label = calloc(n, sizeof *c->label);
    c->short_label = calloc(n, sizeof *c->short_label);
    c->params = calloc(n, sizeof *c->params);
    c->n_params = calloc(n, sizeof *c->n_params);
    c->ops = calloc(n, sizeof *c->ops);
    c->n_ops = calloc(n, sizeof *c->n_ops);
    c->self_total_ns = calloc(n, sizeof *c->self_total_ns);
    c->quantum_s = calloc(n, sizeof *c->quantum_s);
    c->metric = calloc(n, sizeof *c->metric);
    c->kernels = calloc(n, sizeof *c->kernels);
    c->placement = calloc(n, sizeof *c->placement);
    c->pool = calloc(n, sizeof *c->pool);
    if (!c->runs || !c->label || !c->short_label || !c->params || !c->n_params || !c->ops || !c->n_ops ||
        !c->self_total_ns || !c->quantum_s || !c->metric || !c->kernels || !c->placement || !c->pool) {
        store_compare_free(c);
        return store_fail(STORE_ENOMEM, "out of memory comparing runs");
    }
    snprintf(c->metric_key, sizeof c->metric_key, "%s", o && o->metric && *o->metric ? o->metric : "train_loss");
    int st = STORE_OK;
    for (size_t i = 0; i < n && !st; i++) {
        store_run_init(&c->runs[i]);
        c->n = i + 1;
        if ((st = store_run_get(s, ids[i], &c->runs[i]))) break;
        free(c->runs[i].exp_text);
        c->runs[i].exp_text = NULL;
        if ((st = store_params_get(s, ids[i], &c->params[i], &c->n_params[i]))) break;
        if ((st = store_op_stats_get(s, ids[i], 0, &c->ops[i], &c->n_ops[i]))) break;
        store_profile prof;
        if (!store_profile_get(s, ids[i], &prof)) c->self_total_ns[i] = (uint64_t)prof.total_self_ns;
        if ((st = store_metric_get(s, ids[i], c->metric_key, &c->metric[i]))) break;
        c->have_metric |= c->metric[i].n > 0;
        store_solver_event *ev;
        size_t nev;
        if ((st = store_solver_events_get(s, ids[i], &ev, &nev))) break;
        store_solver_summary sum;
        store_solver_summarize(ev, nev, &sum);
        c->quantum_s[i] = nev ? sum.simulated_quantum_s : NAN;
        free(ev);
    }
    if (!st) {
        machine_load(c, s, ids);
        make_labels(c);
        st = store_compare_rows(c, o);
    }
    if (st) { store_compare_free(c); return st; }
    *out = c;
    return STORE_OK;
}
