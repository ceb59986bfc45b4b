/* monitor.c — the run's live state as a sink, published as snapshots, and the Prometheus
 * endpoint that formats them (text exposition 0.0.4, served by libmicrohttpd's own thread).
 * See monitor.h for why the training thread never waits. */
#include "monitor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../quantum/quantum.h"

#define MON_KEYS_MAX 128
#define MON_OPS_MAX 512

/* What a scrape shows, in three parts: the per-step figures (up to n_keys), copied at every
 * publication; the metric keys and values, copied when a metric came; the op rows, when
 * ops_live handed new ones (about once a second). */
typedef struct {
    long step, total_steps;
    int epoch, world, ended;
    double loss, sps;              /* progress: this step's loss, samples/s so far */
    double wall_s, hybrid_s;       /* at the last metric point */
    long solves[2];                /* Newton solves by route (classical, quantum) */
    double solve_s[2];             /* measured classical / simulated quantum solve time */
    double kappa;                  /* the last routing estimate */
    size_t n_keys, dropped_keys;
    char keys[MON_KEYS_MAX][64];
    double vals[MON_KEYS_MAX];     /* last value of each metric key */
    size_t n_ops;
    prof_row ops[MON_OPS_MAX];
} mon_snap;

struct monitor {
    char run[200];                 /* the `run` label: name or name/variant */
    int rank;
    mon_snap work;                 /* the training thread's own */
    int keys_dirty, ops_dirty;     /* parts of work not published yet */
    pthread_mutex_t lock;          /* guards pub; the training thread only try-locks it */
    mon_snap pub;
    struct MHD_Daemon *httpd;
    int port;
    monitor_tb *tb;
    double tb_flushed, t0_unix;
    char tb_err[256];
};

/* ---- the sink (training thread) ------------------------------------------------------- */

static void publish(monitor *m)
{
    if (pthread_mutex_trylock(&m->lock)) return; /* a scrape is copying: the next one carries it */
    memcpy(&m->pub, &m->work, offsetof(mon_snap, n_keys));
    if (m->keys_dirty)
        memcpy(&m->pub.n_keys, &m->work.n_keys, offsetof(mon_snap, n_ops) - offsetof(mon_snap, n_keys));
    if (m->ops_dirty) {
        m->pub.n_ops = m->work.n_ops;
        memcpy(m->pub.ops, m->work.ops, m->work.n_ops * sizeof m->work.ops[0]);
    }
    m->keys_dirty = m->ops_dirty = 0;
    pthread_mutex_unlock(&m->lock);
}

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A failed event-file write keeps the run going; the first reason is kept for the end. */
static void tb_check(monitor *m, int rc)
{
    if (rc && !m->tb_err[0]) snprintf(m->tb_err, sizeof m->tb_err, "tensorboard: a write failed: %s", strerror(errno));
}

/* TensorBoard reads what is flushed; once a second keeps the writes few. */
static void tb_maybe_flush(monitor *m)
{
    double t = now_mono();
    if (t - m->tb_flushed < 1.0) return;
    m->tb_flushed = t;
    tb_check(m, monitor_tb_flush(m->tb));
}

static int on_begin(void *ud, const eng_run_info *info)
{
    monitor *m = ud;
    m->work.total_steps = info->total_steps;
    m->work.step = info->resumed_step;
    publish(m);
    return 0;
}

static int on_metric(void *ud, const eng_metric *e)
{
    monitor *m = ud;
    mon_snap *w = &m->work;
    w->step = e->step > w->step ? e->step : w->step;
    w->epoch = e->epoch;
    w->wall_s = e->wall_s;
    w->hybrid_s = e->hybrid_s;
    size_t k = 0;
    while (k < w->n_keys && strcmp(w->keys[k], e->key)) k++;
    if (k == w->n_keys && k < MON_KEYS_MAX && strlen(e->key) < sizeof w->keys[0])
        snprintf(w->keys[w->n_keys++], sizeof w->keys[0], "%s", e->key);
    if (k < w->n_keys) w->vals[k] = e->value;
    else w->dropped_keys++;
    m->keys_dirty = 1;
    publish(m);
    if (m->tb) {
        tb_check(m, monitor_tb_scalar(m->tb, e->key, e->step, m->t0_unix + e->wall_s, e->value));
        tb_maybe_flush(m);
    }
    return 0;
}

static int on_solver(void *ud, const struct qm_solve_event *ev)
{
    monitor *m = ud;
    int q = ev->route == QM_ROUTE_QUANTUM;
    m->work.solves[q]++;
    m->work.solve_s[q] += (q ? ev->simulated_quantum_ns : ev->measured_classical_ns) * 1e-9;
    m->work.kappa = ev->kappa_used;
    publish(m);
    return 0;
}

static int on_telemetry(void *ud, const eng_telemetry *t)
{
    monitor *m = ud;
    if (m->tb) {
        tb_check(m, monitor_tb_telemetry(m->tb, t->step, m->t0_unix + t->wall_s, t->keys, t->values, t->n));
        tb_maybe_flush(m);
    }
    return 0;
}

static void on_progress(void *ud, long step, long total, int epoch, double loss, double sps)
{
    monitor *m = ud;
    m->work.step = step;
    m->work.total_steps = total;
    m->work.epoch = epoch;
    m->work.loss = loss;
    m->work.sps = sps;
    publish(m);
}

static void on_ops(void *ud, const prof_row *rows, size_t n)
{
    monitor *m = ud;
    if (n > MON_OPS_MAX) n = MON_OPS_MAX;
    memcpy(m->work.ops, rows, n * sizeof *rows);
    m->work.n_ops = n;
    m->ops_dirty = 1;
    publish(m);
}

static void on_end(void *ud, const eng_run_result *res)
{
    monitor *m = ud;
    m->work.ended = 1;
    m->work.step = res->steps;
    publish(m);
    if (m->tb) tb_check(m, monitor_tb_flush(m->tb));
}

/* The final op rows (profiled runs): the last ops_live may be up to a second old. */
static int on_stats(void *ud, const prof_row *rows, size_t n, const prof_summary *sum)
{
    on_ops(ud, rows, n);
    return 0;
}

eng_sink monitor_sink(monitor *m)
{
    if (!m) return (eng_sink){ 0 };
    return (eng_sink){ .ud = m, .run_begin = on_begin, .metric = on_metric, .solver = on_solver,
                       .telemetry = on_telemetry, .progress = on_progress, .run_end = on_end,
                       .op_stats = on_stats, .ops_live = m->httpd ? on_ops : NULL,
                       .ops_live_every_s = m->httpd ? 1.0 : 0 };
}

/* ---- exposition text (HTTP thread) --------------------------------------------------- */

const char *monitor_prom_label(char *b, size_t cap, const char *s)
{
    size_t o = 0, n = strlen(s);
    for (size_t i = 0; i < n && o + 7 < cap;) {
        size_t l = prof_utf8_decode(s + i, n - i, NULL);
        if (!l) { memcpy(b + o, "\xef\xbf\xbd", 3); o += 3; i++; continue; } /* U+FFFD */
        if (s[i] == '\\' || s[i] == '"') { b[o++] = '\\'; b[o++] = s[i]; }
        else if (s[i] == '\n') { b[o++] = '\\'; b[o++] = 'n'; }
        else { memcpy(b + o, s + i, l); o += l; }
        i += l;
    }
    if (cap) b[o < cap ? o : cap - 1] = 0;
    return b;
}

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
    const char *labels;            /* run="...",rank="N" */
} mon_buf;

static void put(mon_buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = b->oom ? 0 : vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (b->oom || k < 0) { b->oom = 1; return; }
        if ((size_t)k < b->cap - b->n) { b->n += (size_t)k; return; }
        char *q = realloc(b->p, b->cap * 2 + (size_t)k);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = b->cap * 2 + (size_t)k;
    }
}

/* "# HELP"/"# TYPE" lines of one metric family. */
static void family(mon_buf *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample of a family without labels of its own; a NaN (not known yet) is left out. */
static void sample(mon_buf *b, const char *name, const char *type, const char *help, double v)
{
    if (isnan(v)) return;
    family(b, name, type, help);
    put(b, "%s{%s} %.17g\n", name, b->labels, v);
}

static int is_comm(const char *name) { return !strncmp(name, "allreduce", 9); }

/* The profile's figures: data.wait, all-reduce, compute, and per op counters. */
static void put_profile(mon_buf *b, const mon_snap *s)
{
    double wait = 0, comm = 0, comm_bytes = 0, step = 0, steps = 0;
    for (size_t i = 0; i < s->n_ops; i++) {
        const prof_row *r = &s->ops[i];
        if (r->kind == PROF_STEP) { step += r->total_ns * 1e-9; steps += (double)r->calls; }
        else if (!strcmp(r->name, "data.wait")) wait += r->total_ns * 1e-9;
        else if (is_comm(r->name)) { comm += r->total_ns * 1e-9; comm_bytes += (double)r->bytes; }
    }
    if (!s->n_ops) return;
    sample(b, "nnbench_step_seconds_total", "counter", "Time in profiled steps.", step);
    sample(b, "nnbench_profiled_steps_total", "counter", "Profiled steps.", steps);
    sample(b, "nnbench_data_wait_seconds_total", "counter", "Time the training thread waited for batches (data.wait).", wait);
    sample(b, "nnbench_data_wait_share", "gauge", "data.wait as a share of step time.", step > 0 ? wait / step : NAN);
    sample(b, "nnbench_allreduce_seconds_total", "counter", "Time in all-reduce scopes (transfer and wait).", comm);
    sample(b, "nnbench_allreduce_bytes_total", "counter", "Bytes all-reduced by this rank.", comm_bytes);
    sample(b, "nnbench_compute_seconds_total", "counter", "Step time minus all-reduce: this rank's compute.", step - comm);
    static const char *const names[2] = { "nnbench_op_seconds_total", "nnbench_op_calls_total" };
    static const char *const helps[2] = { "Self time of each op.", "Calls of each op." };
    for (int f = 0; f < 2; f++) {
        family(b, names[f], "counter", helps[f]);
        for (size_t i = 0; i < s->n_ops; i++) {
            const prof_row *r = &s->ops[i];
            if (r->kind != PROF_OP) continue;
            char op[160], layer[100];
            put(b, "%s{%s,op=\"%s\",layer=\"%s\"} %.17g\n", names[f], b->labels,
                monitor_prom_label(op, sizeof op, r->name), monitor_prom_label(layer, sizeof layer, r->layer),
                f ? (double)r->calls : r->self_ns * 1e-9);
        }
    }
}

static const char *const named_keys[][3] = {
    { "train_loss", "nnbench_train_loss", "Training loss at the last log step." },
    { "train_acc", "nnbench_train_accuracy", "Training accuracy at the last log step." },
    { "lr", "nnbench_learning_rate", "Learning rate at the last log step." },
    { "samples_per_s", "nnbench_epoch_samples_per_second", "Samples per second of the last epoch." },
};

static void put_metrics(mon_buf *b, const mon_snap *s)
{
    for (size_t k = 0; k < sizeof named_keys / sizeof named_keys[0]; k++)
        for (size_t i = 0; i < s->n_keys; i++)
            if (!strcmp(s->keys[i], named_keys[k][0])) sample(b, named_keys[k][1], "gauge", named_keys[k][2], s->vals[i]);
    family(b, "nnbench_metric", "gauge", "Last value of each metric the run logs, by key.");
    for (size_t i = 0; i < s->n_keys; i++) {
        char key[200];
        if (!isnan(s->vals[i]))
            put(b, "nnbench_metric{%s,key=\"%s\"} %.17g\n", b->labels, monitor_prom_label(key, sizeof key, s->keys[i]), s->vals[i]);
    }
    sample(b, "nnbench_metric_keys_dropped", "gauge", "Metric keys not shown (more than the monitor keeps).", (double)s->dropped_keys);
}

static void put_newton(mon_buf *b, const mon_snap *s)
{
    sample(b, "nnbench_wall_clock_seconds", "gauge", "Wall time of the run at the last metric point.", s->wall_s);
    sample(b, "nnbench_hybrid_clock_seconds", "gauge", "Q-Newton hybrid clock (wall time with simulated quantum solves).", s->hybrid_s);
    if (!s->solves[0] && !s->solves[1]) return;
    static const char *const route[2] = { "classical", "quantum" };
    family(b, "nnbench_solves_total", "counter", "Newton linear solves by route.");
    for (int q = 0; q < 2; q++) put(b, "nnbench_solves_total{%s,route=\"%s\"} %ld\n", b->labels, route[q], s->solves[q]);
    family(b, "nnbench_solve_seconds_total", "counter", "Solve time by route: measured classical, simulated quantum.");
    for (int q = 0; q < 2; q++) put(b, "nnbench_solve_seconds_total{%s,route=\"%s\"} %.17g\n", b->labels, route[q], s->solve_s[q]);
    sample(b, "nnbench_kappa", "gauge", "Condition-number estimate of the last routed solve.", s->kappa);
}

static char *format_snap(const monitor *m, const mon_snap *s)
{
    char run[sizeof m->run * 3 + 8], labels[sizeof run + 32];
    snprintf(labels, sizeof labels, "run=\"%s\",rank=\"%d\"", monitor_prom_label(run, sizeof run, m->run), m->rank);
    mon_buf b = { .p = malloc(8192), .cap = 8192, .labels = labels };
    if (!b.p) return NULL;
    sample(&b, "nnbench_step", "gauge", "Optimizer steps done.", (double)s->step);
    sample(&b, "nnbench_steps", "gauge", "Steps the run will take.", (double)s->total_steps);
    sample(&b, "nnbench_epoch", "gauge", "Current epoch.", s->epoch);
    sample(&b, "nnbench_running", "gauge", "1 while the run trains, 0 once it ended.", !s->ended);
    sample(&b, "nnbench_world_size", "gauge", "MPI ranks of the run (1 without mpirun).", s->world);
    sample(&b, "nnbench_step_loss", "gauge", "Loss of the last step's batch.", s->step ? s->loss : NAN);
    sample(&b, "nnbench_samples_per_second", "gauge", "Training samples per second so far.", s->step ? s->sps : NAN);
    put_metrics(&b, s);
    put_profile(&b, s);
    put_newton(&b, s);
    sample(&b, "nnbench_memory_live_bytes", "gauge", "Bytes the engine has allocated now.", (double)prof_mem_live());
    sample(&b, "nnbench_memory_peak_bytes", "gauge", "Peak of the engine's allocated bytes.", (double)prof_mem_peak());
    sample(&b, "nnbench_process_peak_rss_bytes", "gauge", "Peak resident set size of the process.", (double)prof_peak_rss());
    if (b.oom) { free(b.p); return NULL; }
    return b.p;
}

char *monitor_prom_text(monitor *m)
{
    mon_snap *s = malloc(sizeof *s);
    if (!s) return NULL;
    pthread_mutex_lock(&m->lock);
    memcpy(s, &m->pub, offsetof(mon_snap, ops) + m->pub.n_ops * sizeof m->pub.ops[0]);
    pthread_mutex_unlock(&m->lock);
    char *t = format_snap(m, s);
    free(s);
    return t;
}

/* ---- the endpoint ---------------------------------------------------------------------- */

static enum MHD_Result serve(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *data, size_t *data_size, void **con_cls)
{
    monitor *m = cls;
    static const char nf[] = "nnbench serves /metrics only\n";
    char *text = NULL;
    unsigned code = MHD_HTTP_OK;
    struct MHD_Response *r;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    } else if (strcmp(url, "/metrics")) {
        code = MHD_HTTP_NOT_FOUND;
        r = MHD_create_response_from_buffer(sizeof nf - 1, (void *)nf, MHD_RESPMEM_PERSISTENT);
    } else if (!(text = monitor_prom_text(m))) {
        code = MHD_HTTP_INTERNAL_SERVER_ERROR;
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    } else {
        r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (r) MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    }
    if (!r) { free(text); return MHD_NO; }
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

int monitor_addr_parse(const char *v, int rank, char *host, size_t hcap, int *port_out, char *err, size_t cap)
{
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v) {
        snprintf(err, cap, "monitor.metrics = '%s': expected HOST:PORT, e.g. 127.0.0.1:9100", v);
        return ENG_EINVAL;
    }
    size_t hl = (size_t)(colon - v);
    if (v[0] == '[' && hl >= 2 && v[hl - 1] == ']') { v++; hl -= 2; } /* [::1]:9100 */
    if (hl >= hcap) { snprintf(err, cap, "monitor.metrics: the host is too long"); return ENG_EINVAL; }
    memcpy(host, v, hl);
    host[hl] = 0;
    long ports[256];
    size_t np = 0;
    for (const char *p = colon + 1;; p++) {
        char *end;
        errno = 0;
        long n = strtol(p, &end, 10);
        if (end == p || errno || n < 1 || n > 65535 || (*end && *end != ',') || np == 256) {
            snprintf(err, cap, "monitor.metrics = '%s': '%s' is not a port (1..65535; or one port per rank, comma-separated)", colon + 1, p);
            return ENG_EINVAL;
        }
        ports[np++] = n;
        if (!*end) break;
        p = end;
    }
    if (np > 1 && (size_t)rank >= np) {
        snprintf(err, cap, "monitor.metrics = '%s': no port for rank %d; give one per rank, or one base port", colon + 1, rank);
        return ENG_EINVAL;
    }
    long port = np > 1 ? ports[rank] : ports[0] + rank;
    if (port > 65535) {
        snprintf(err, cap, "monitor.metrics: rank %d would serve on port %ld, past 65535; choose a lower port", rank, port);
        return ENG_EINVAL;
    }
    *port_out = (int)port;
    return 0;
}

/* Binds and listens here, not in libmicrohttpd, so that "address in use" reaches the user. */
static int listen_on(const char *host, int port, char *err, size_t cap)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai;
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g) { snprintf(err, cap, "monitor.metrics: cannot resolve '%s': %s", host, gai_strerror(g)); return -1; }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* a variant's restart */
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 16)) {
        snprintf(err, cap, "monitor.metrics: cannot serve on %s:%d: %s%s", host, port, strerror(errno),
                 errno == EADDRINUSE ? " (another process has the port: choose another with --metrics HOST:PORT)" : "");
        if (fd >= 0) close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

static int start_http(monitor *m, const char *addr, char *err, size_t cap)
{
    char host[128];
    int rc = monitor_addr_parse(addr, m->rank, host, sizeof host, &m->port, err, cap);
    if (rc) return rc;
    int fd = listen_on(host, m->port, err, cap);
    if (fd < 0) return ENG_EIO;
    m->httpd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, serve, m,
                                MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, 16u,
                                MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!m->httpd) {
        close(fd);
        snprintf(err, cap, "monitor.metrics: the HTTP server (libmicrohttpd) did not start on %s:%d", host, m->port);
        return ENG_EIO;
    }
    return 0;
}

int monitor_open(const eng_config *cfg, int rank, monitor **out, char *err, size_t cap)
{
    *out = NULL;
    int tb = cfg->monitor.tensorboard[0] && rank == 0;
    if (!cfg->monitor.metrics[0] && !tb) return 0;
    monitor *m = calloc(1, sizeof *m);
    if (!m) { snprintf(err, cap, "monitor: out of memory"); return ENG_ENOMEM; }
    pthread_mutex_init(&m->lock, NULL);
    if (cfg->variant[0]) snprintf(m->run, sizeof m->run, "%s/%s", cfg->name, cfg->variant);
    else snprintf(m->run, sizeof m->run, "%s", cfg->name);
    m->rank = rank;
    m->work.world = eng_dist_world();
    m->work.loss = m->work.sps = m->work.kappa = NAN;
    m->work.wall_s = m->work.hybrid_s = NAN;
    m->pub = m->work;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    m->t0_unix = ts.tv_sec + ts.tv_nsec * 1e-9;
    m->tb_flushed = now_mono();
    int rc = 0;
    if (cfg->monitor.metrics[0]) rc = start_http(m, cfg->monitor.metrics, err, cap);
    if (!rc && tb) {
        char sub[sizeof m->run];
        snprintf(sub, sizeof sub, "%s", m->run);
        if (!(m->tb = monitor_tb_open(cfg->monitor.tensorboard, sub, err, cap))) rc = ENG_EIO;
    }
    if (rc) { monitor_close(m, NULL, 0); return rc; }
    *out = m;
    return 0;
}

void monitor_test_hold(monitor *m, int hold)
{
    if (hold) pthread_mutex_lock(&m->lock);
    else pthread_mutex_unlock(&m->lock);
}

int monitor_port(const monitor *m) { return m && m->httpd ? m->port : 0; }

int monitor_close(monitor *m, char *err, size_t cap)
{
    if (!m) return 0;
    if (m->httpd) MHD_stop_daemon(m->httpd);
    int rc = 0;
    if (m->tb) rc = monitor_tb_close(m->tb, err, cap);
    if (!rc && m->tb_err[0]) {
        if (err) snprintf(err, cap, "%s", m->tb_err);
        rc = -1;
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
    return rc;
}
