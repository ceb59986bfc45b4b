/* monitor.c — the live monitor (tui/monitor.c, monitor_tb.c): label escaping, addresses,
 * the snapshot that never makes the training thread wait, the event-file framing, the event
 * writer thread (the same bytes as the synchronous encoder wrote, a full queue, close, a full
 * disk), and a monitor that cannot start failing the variant before anything trains. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../tui/monitor.h"
#include "../../quantum/quantum.h"
#include "../../tui/runner.h"

static void test_prom_label(void **st)
{
    (void)st;
    char b[128];
    assert_string_equal(monitor_prom_label(b, sizeof b, "plain/run-1"), "plain/run-1");
    assert_string_equal(monitor_prom_label(b, sizeof b, "a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    /* An invalid byte becomes U+FFFD; a valid multi-byte character stays. */
    assert_string_equal(monitor_prom_label(b, sizeof b, "x\xff" "y\xc3\xa9"), "x\xef\xbf\xbdy\xc3\xa9");
    /* Cut short, never in the middle of an escape. */
    char s[10];
    monitor_prom_label(s, sizeof s, "\"\"\"\"\"\"\"\"");
    assert_true(strlen(s) % 2 == 0);
}

static void test_addr_parse(void **st)
{
    (void)st;
    char host[64], err[256];
    int port = 0;
    assert_int_equal(monitor_addr_parse("127.0.0.1:9100", 0, host, sizeof host, &port, err, sizeof err), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 9100);
    assert_int_equal(monitor_addr_parse("127.0.0.1:9100", 3, host, sizeof host, &port, err, sizeof err), 0);
    assert_int_equal(port, 9103); /* PORT + rank */
    assert_int_equal(monitor_addr_parse("localhost:9100,9200", 1, host, sizeof host, &port, err, sizeof err), 0);
    assert_int_equal(port, 9200); /* the ports given, one per rank */
    assert_int_equal(monitor_addr_parse("[::1]:9100", 0, host, sizeof host, &port, err, sizeof err), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(monitor_addr_parse("localhost:9100,9200", 2, host, sizeof host, &port, err, sizeof err), ENG_EINVAL);
    assert_non_null(strstr(err, "no port for rank 2"));
    assert_int_equal(monitor_addr_parse("9100", 0, host, sizeof host, &port, err, sizeof err), ENG_EINVAL);
    assert_non_null(strstr(err, "expected HOST:PORT"));
    assert_int_equal(monitor_addr_parse("h:70000", 0, host, sizeof host, &port, err, sizeof err), ENG_EINVAL);
    assert_int_equal(monitor_addr_parse("h:9x", 0, host, sizeof host, &port, err, sizeof err), ENG_EINVAL);
    assert_int_equal(monitor_addr_parse("h:65535", 1, host, sizeof host, &port, err, sizeof err), ENG_EINVAL);
    assert_non_null(strstr(err, "past 65535"));
}

static void test_crc32c(void **st)
{
    (void)st;
    assert_int_equal(monitor_crc32c("123456789", 9), 0xE3069283u); /* the CRC-32C check value */
    assert_int_equal(monitor_crc32c("", 0), 0);
    uint32_t c = 0xE3069283u, m = monitor_crc_mask(c);
    uint32_t back = m - 0xa282ead8u;
    assert_int_equal((back >> 17) | (back << 15), c);
}

static char *tmpdir_make(void)
{
    char *d = strdup("/tmp/nnbench-monitor-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void rm_tree(const char *d)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    assert_int_equal(system(cmd), 0);
}

/* A monitor of run name/variant writing event files under dir (no endpoint: its text is
 * read with monitor_prom_text). */
static monitor *open_in(const char *dir, const char *name, const char *variant)
{
    eng_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "%s", name);
    snprintf(cfg.variant, sizeof cfg.variant, "%s", variant);
    snprintf(cfg.monitor.tensorboard, sizeof cfg.monitor.tensorboard, "%s", dir);
    monitor *m = NULL;
    char err[512];
    if (monitor_open(&cfg, 0, &m, err, sizeof err)) fail_msg("%s", err);
    assert_non_null(m);
    return m;
}

static void on_alarm(int sig) { (void)sig; fail_msg("the sink waited for the snapshot lock"); }

static void test_snapshot_never_waits(void **st)
{
    (void)st;
    char *dir = tmpdir_make(), err[512];
    monitor *m = open_in(dir, "snap", "");
    eng_sink s = monitor_sink(m);
    s.progress(s.ud, 5, 100, 1, 0.5, 10.0);
    char *t = monitor_prom_text(m);
    assert_non_null(strstr(t, "nnbench_step{run=\"snap\",rank=\"0\"} 5\n"));
    free(t);
    /* A scrape holds the lock: the sink returns at once (a wait would hang until the alarm)
     * and the scrape then shows the last snapshot it could take. */
    signal(SIGALRM, on_alarm);
    alarm(5);
    monitor_test_hold(m, 1);
    s.progress(s.ud, 6, 100, 1, 0.4, 10.0);
    eng_metric e = { .step = 6, .epoch = 1, .key = "train_loss", .value = 0.4 };
    assert_int_equal(s.metric(s.ud, &e), 0);
    monitor_test_hold(m, 0);
    alarm(0);
    t = monitor_prom_text(m);
    assert_non_null(strstr(t, "nnbench_step{run=\"snap\",rank=\"0\"} 5\n"));
    assert_null(strstr(t, "nnbench_train_loss"));
    free(t);
    /* The next step's publication carries the metric that came while the lock was held. */
    s.progress(s.ud, 7, 100, 1, 0.3, 10.0);
    t = monitor_prom_text(m);
    assert_non_null(strstr(t, "nnbench_step{run=\"snap\",rank=\"0\"} 7\n"));
    assert_non_null(strstr(t, "nnbench_train_loss{run=\"snap\",rank=\"0\"} 0.40000000000000002\n"));
    free(t);
    assert_int_equal(monitor_close(m, err, sizeof err), 0);
    rm_tree(dir);
    free(dir);
}

/* Metric keys as labels, and the Newton series from solver events. */
static void test_metric_and_newton_series(void **st)
{
    (void)st;
    char *dir = tmpdir_make(), err[512];
    monitor *m = open_in(dir, "n\"1", "q");
    eng_sink s = monitor_sink(m);
    eng_metric e = { .step = 4, .epoch = 1, .wall_s = 2.0, .hybrid_s = 2.5, .key = "train_loss", .value = 0.75 };
    assert_int_equal(s.metric(s.ud, &e), 0);
    e.key = "odd\"key\n";
    e.value = 3;
    assert_int_equal(s.metric(s.ud, &e), 0);
    struct qm_solve_event q;
    memset(&q, 0, sizeof q);
    q.route = QM_ROUTE_QUANTUM;
    q.simulated_quantum_ns = 5e8;
    q.kappa_used = 42;
    assert_int_equal(s.solver(s.ud, &q), 0);
    q.route = QM_ROUTE_CLASSICAL;
    q.measured_classical_ns = 1e9;
    assert_int_equal(s.solver(s.ud, &q), 0);
    char *t = monitor_prom_text(m);
    const char *L = "{run=\"n\\\"1/q\",rank=\"0\"";
    char want[256];
    const char *const lines[] = { "nnbench_train_loss%s} 0.75\n", "nnbench_metric%s,key=\"odd\\\"key\\n\"} 3\n",
                                  "nnbench_hybrid_clock_seconds%s} 2.5\n", "nnbench_solves_total%s,route=\"quantum\"} 1\n",
                                  "nnbench_solve_seconds_total%s,route=\"classical\"} 1\n", "nnbench_kappa%s} 42\n",
                                  "# TYPE nnbench_solves_total counter\n" };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        snprintf(want, sizeof want, lines[i], L);
        if (!strstr(t, want)) fail_msg("missing: %s\nin:\n%s", want, t);
    }
    free(t);
    assert_int_equal(monitor_close(m, err, sizeof err), 0);
    rm_tree(dir);
    free(dir);
}

/* Reads the one event file under dir/sub into a malloc'd buffer. */
static unsigned char *read_events(const char *dir, const char *sub, size_t *n)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    DIR *d = opendir(p);
    assert_non_null(d);
    struct dirent *e;
    char f[1000] = "";
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "events.out.tfevents.", 20)) snprintf(f, sizeof f, "%s/%s", p, e->d_name);
    closedir(d);
    FILE *fp = fopen(f, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    rewind(fp);
    unsigned char *b = malloc((size_t)size + 1);
    *n = fread(b, 1, (size_t)size, fp);
    fclose(fp);
    return b;
}

static uint32_t le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static void test_tb_frames_and_tags(void **st)
{
    (void)st;
    char *dir = tmpdir_make(), err[512];
    monitor_tb *w = monitor_tb_open(dir, "../evil run", err, sizeof err);
    assert_non_null(w);
    assert_int_equal(monitor_tb_scalar(w, "loss\n\"x\xff", 3, 1e9, 0.25), 0);
    assert_int_equal(monitor_tb_close(w, err, sizeof err), 0);
    size_t n, records = 0;
    unsigned char *b = read_events(dir, "_._evil_run", &n); /* never outside dir, never hidden */
    for (size_t at = 0; at < n; records++) {
        assert_true(at + 12 <= n);
        uint64_t len = le32(b + at) | (uint64_t)le32(b + at + 4) << 32;
        assert_int_equal(le32(b + at + 8), monitor_crc_mask(monitor_crc32c(b + at, 8)));
        assert_true(at + 16 + len <= n);
        assert_int_equal(le32(b + at + 12 + len), monitor_crc_mask(monitor_crc32c(b + at + 12, len)));
        at += 16 + len;
    }
    assert_int_equal(records, 2); /* file_version, then the scalar */
    assert_non_null(memmem(b, n, "brain.Event:2", 13));
    assert_non_null(memmem(b, n, "loss_\"x\xef\xbf\xbd", 9)); /* newline made '_', 0xff U+FFFD */
    free(b);
    /* Writers opened in the same second by one process each get their own file (the
     * name holds the second and the pid: the later ones take a suffix). */
    monitor_tb *w2 = monitor_tb_open(dir, "same", err, sizeof err), *w3 = monitor_tb_open(dir, "same", err, sizeof err);
    assert_non_null(w2);
    assert_non_null(w3);
    assert_int_equal(monitor_tb_close(w2, err, sizeof err), 0);
    assert_int_equal(monitor_tb_close(w3, err, sizeof err), 0);
    /* A directory that cannot be made fails with the reason. */
    assert_null(monitor_tb_open("/dev/null/x", "r", err, sizeof err));
    assert_non_null(strstr(err, "cannot write event files under '/dev/null/x/r'"));
    rm_tree(dir);
    free(dir);
}

/* ---- the writer thread: the same bytes as before, a full queue, close, a full disk ---- */

/* A fixed sequence of scalars, telemetry records and flushes (hostile tags, NaN and
 * infinite values, one-value and equal-value histograms), as a live run writes them. */
static void tb_golden_sequence(monitor_tb *w)
{
    static const char *const keys[] = { "grad_norm/d1.W", "grad_norm/d1.b", "update_ratio/d1.W", "grad_norm/d2.W",
                                        "update_ratio/d2.W", "zero_frac/d1", "plain", "grad_max/\xff\x01" };
    static const char *const tags[] = { "train_loss", "lr", "loss\n\"x\xff", "t\xc3\xa4g/\xc3\xbc" };
    for (long s = 0; s < 60; s++) {
        double wall = 1.7e9 + s * 0.015625;
        for (int t = 0; t < 4; t++) {
            double v = t == 2 && s == 7 ? NAN : t == 3 && s == 9 ? -INFINITY : (double)(s * 37 % 11) / (t + 1.5) - 2;
            monitor_tb_scalar(w, tags[t], s, wall, v);
        }
        if (s % 5 == 0) {
            double vals[8];
            for (int i = 0; i < 8; i++) vals[i] = s == 10 ? 0.5 : (double)((s + 3) * (i + 7) % 13) / 8 - 0.7;
            if (s == 20) vals[1] = NAN;
            monitor_tb_telemetry(w, s, wall + 0.001, keys, vals, s == 25 ? 1 : s == 30 ? 0 : 8);
        }
        if (s % 17 == 0) monitor_tb_flush(w);
    }
}

/* An event writer in a new temporary directory (*dir, malloc'd). */
static monitor_tb *tb_in_tmp(const char *sub, char **dir)
{
    char err[512];
    *dir = tmpdir_make();
    monitor_tb *w = monitor_tb_open(*dir, sub, err, sizeof err);
    if (!w) fail_msg("%s", err);
    return w;
}

/* The sequence's records (all after file_version) came to 19917 bytes with CRC32C 0xD5F59897
 * from the synchronous encoder the writer thread replaced (main at 4acaf50): the queue and
 * the thread change when the records are written, never a byte of them. */
static void test_tb_same_bytes_as_before(void **st)
{
    (void)st;
    char *dir, err[512];
    monitor_tb *w = tb_in_tmp("golden", &dir);
    tb_golden_sequence(w);
    assert_int_equal(monitor_tb_close(w, err, sizeof err), 0);
    assert_string_equal(err, "");
    size_t n;
    unsigned char *b = read_events(dir, "golden", &n);
    assert_true(n > 16);
    size_t first = 16 + le32(b); /* the file_version record: its wall time is now */
    assert_int_equal(n - first, 19917);
    assert_int_equal(monitor_crc32c(b + first, n - first), 0xD5F59897u);
    free(b);
    rm_tree(dir);
    free(dir);
}

/* The next record of b[*at..n) (CRCs checked): its step, and the tag and value of its scalar
 * (tag "" for file_version, value NAN for a histogram). 0 at the end. */
static int next_record(const unsigned char *b, size_t n, size_t *at, long *step, char *tag, size_t cap, float *value)
{
    if (*at >= n) return 0;
    assert_true(*at + 16 <= n);
    size_t len = le32(b + *at), p = *at + 12, end = p + len;
    assert_int_equal(le32(b + *at + 8), monitor_crc_mask(monitor_crc32c(b + *at, 8)));
    assert_true(end + 4 <= n);
    assert_int_equal(le32(b + end), monitor_crc_mask(monitor_crc32c(b + p, len)));
    *at = end + 4;
    *step = 0, tag[0] = 0, *value = NAN;
    /* Event: 1 wall (fixed64), 2 step (varint), 3 file_version / 5 summary (length). In a
     * summary: 1 value, 1 tag, 2 simple_value (fixed32) or 5 histo; all lengths < 128 here. */
    p += 9;
    if (b[p] == 0x10) {
        p++;
        for (int s = 0; b[p - 1] & 0x80 || s == 0; s += 7) *step |= (long)(b[p++] & 0x7f) << s;
    }
    if (b[p] != 0x2a) return 1; /* file_version */
    p += 4; /* 0x2a len 0x0a len */
    assert_int_equal(b[p], 0x0a);
    size_t tl = b[p + 1];
    snprintf(tag, cap, "%.*s", (int)tl, (const char *)b + p + 2);
    p += 2 + tl;
    if (b[p] == 0x15) memcpy(value, b + p + 1, 4);
    return 1;
}

static const char *const q_tags[] = { "loss", "lr", "grad_norm/a", "grad_norm/b" };

/* Queue items of entry i of a test sequence: every 100th is a two-key telemetry record. */
static long q_items(long i) { return i % 100 == 99 ? 2 : 1; }

/* Queues entry i of the test sequence: a scalar, or every 100th a telemetry record. */
static int q_put(monitor_tb *w, long i)
{
    if (i % 100 == 99) {
        double v[2] = { (double)i, (double)i + 0.5 };
        return monitor_tb_telemetry(w, i, 1e9 + i, q_tags + 2, v, 2);
    }
    return monitor_tb_scalar(w, q_tags[i % 2], i, 1e9 + i, (double)i);
}

/* Every item 0..n-1 in order: a scalar per item, a telemetry record its two scalars and one
 * histogram. */
static void check_in_order(const char *dir, const char *sub, long n)
{
    size_t len, at = 0;
    unsigned char *b = read_events(dir, sub, &len);
    long step, i = 0, k = 0;
    char tag[64];
    float v;
    assert_true(next_record(b, len, &at, &step, tag, sizeof tag, &v));
    assert_string_equal(tag, ""); /* file_version */
    while (next_record(b, len, &at, &step, tag, sizeof tag, &v)) {
        assert_int_equal(step, i);
        if (i % 100 != 99) {
            assert_string_equal(tag, q_tags[i % 2]);
            assert_true(v == (float)i);
            i++;
            continue;
        }
        const char *want = k == 2 ? "grad_norm" : q_tags[2 + k];
        if (strcmp(tag, want)) fail_msg("record of item %ld: tag '%s', want '%s'", i, tag, want);
        if (k < 2) assert_true(v == (float)(i + 0.5 * k));
        else assert_true(isnan(v));
        if (++k == 3) k = 0, i++;
    }
    assert_int_equal(i, n);
    free(b);
}

/* Holds the writer and queues entries from `from` on until the queue is full; the next entry. */
static long hold_and_fill(monitor_tb *w, long from)
{
    monitor_tb_test_hold(w, 1);
    long n = from, items = 0;
    for (; items + q_items(n) <= MONITOR_TB_QUEUE; items += q_items(n++)) assert_int_equal(q_put(w, n), 0);
    assert_int_equal(items, MONITOR_TB_QUEUE); /* full, and no put waited */
    return n;
}

typedef struct { monitor_tb *w; long from, to; atomic_int done; } q_producer;

static void *q_produce(void *arg)
{
    q_producer *p = arg;
    for (long i = p->from; i < p->to; i++)
        if (q_put(p->w, i)) break;
    atomic_store(&p->done, 1);
    return NULL;
}

/* Waits (10 s at most) until the producer has waited for room want times. */
static void wait_behind(monitor_tb *w, long want)
{
    for (int t = 0; t < 10000 && monitor_tb_behind(w) < want; t++) usleep(1000);
    assert_int_equal(monitor_tb_behind(w), want);
}

/* The writer held: the queue fills, the producer waits for room (not dropping, counted),
 * and once the writer goes on everything arrives in order. */
static void test_tb_full_queue_waits(void **st)
{
    (void)st;
    char *dir, err[512];
    monitor_tb *w = tb_in_tmp("full", &dir);
    long n = hold_and_fill(w, 0);
    assert_int_equal(monitor_tb_behind(w), 0);
    q_producer p = { .w = w, .from = n, .to = n + 1 }; /* more could fall behind again */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, q_produce, &p), 0);
    wait_behind(w, 1);
    assert_false(atomic_load(&p.done)); /* it waits: nothing was dropped to make room */
    monitor_tb_test_hold(w, 0);
    pthread_join(t, NULL);
    assert_int_equal(monitor_tb_close(w, err, sizeof err), 0);
    assert_string_equal(err, "tensorboard: the writer fell behind 1 times (the training thread waited for room in its queue)");
    check_in_order(dir, "full", p.to);
    rm_tree(dir);
    free(dir);
}

/* Close with a full queue and the writer held: it writes everything first. A flush wakes
 * the writer by itself (no full queue, no close). */
static void test_tb_close_drains(void **st)
{
    (void)st;
    char *dir, err[512];
    monitor_tb *w = tb_in_tmp("drain", &dir);
    assert_int_equal(q_put(w, 0), 0);
    assert_int_equal(monitor_tb_flush(w), 0);
    size_t len = 0;
    for (int t = 0; t < 10000 && len <= 40; t++) { /* file_version alone is 40 bytes */
        free(read_events(dir, "drain", &len));
        usleep(1000);
    }
    assert_true(len > 40); /* file_version and the scalar are in the file */
    long n = hold_and_fill(w, 1);
    assert_int_equal(monitor_tb_close(w, err, sizeof err), 0);
    assert_string_equal(err, "");
    check_in_order(dir, "drain", n);
    rm_tree(dir);
    free(dir);
}

/* A full disk under the writer: the producer hears it at a later put (ENOSPC), nothing more
 * is queued, and close fails naming the file. */
static void test_tb_write_error(void **st)
{
    (void)st;
    char *dir, err[512];
    monitor_tb *w = tb_in_tmp("disk", &dir);
    monitor_tb_test_hold(w, 1);
    assert_int_equal(monitor_tb_test_full(w), 0);
    assert_int_equal(q_put(w, 0), 0);
    assert_int_equal(monitor_tb_flush(w), 0);
    monitor_tb_test_hold(w, 0);
    int rc = 0;
    for (int t = 0; t < 10000 && !rc; t++) {
        rc = monitor_tb_scalar(w, "loss", 1, 1e9, 1);
        if (!rc) usleep(1000);
    }
    assert_int_equal(rc, -1);
    assert_int_equal(errno, ENOSPC);
    assert_int_equal(monitor_tb_flush(w), -1);
    assert_int_equal(monitor_tb_close(w, err, sizeof err), -1);
    char want[700];
    snprintf(want, sizeof want, "tensorboard: %s/disk/events.out.tfevents.", dir);
    assert_memory_equal(err, want, strlen(want));
    assert_non_null(strstr(err, ": No space left on device"));
    rm_tree(dir);
    free(dir);
}

/* ---- a monitor that cannot start: the variant fails before training, nothing runs ---- */

typedef struct { int metrics, running, done, rc, failed; char error[512]; } rec;
static int r_metric(void *ud, const eng_metric *e) { (void)e; ((rec *)ud)->metrics++; return 0; }
static void r_running(void *ud, eng_run *run) { (void)run; ((rec *)ud)->running++; }
static void r_done(void *ud, const runner_variant *o, prof_t *p)
{
    rec *r = ud;
    (void)p;
    r->done++;
    r->rc = o->rc;
    r->failed = o->monitor_failed;
    snprintf(r->error, sizeof r->error, "%s", o->error);
}

static void run_with(const char *key, const char *value, rec *r)
{
    char text[1024];
    snprintf(text, sizeof text,
             "[experiment]\nname = mon\n[data]\nsource = spirals\nn = 100\n[model]\nlayers = dense:4:relu, dense:2\n"
             "[train]\nmax_steps = 5\n[monitor]\n%s = %s\n", key, value);
    char path[] = "/tmp/nnbench-monitor-ini-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    eng_experiment *ex = NULL;
    if (eng_experiment_load(path, NULL, 0, &ex)) fail_msg("%s", eng_error());
    unlink(path);
    eng_sink mine = { .ud = r, .metric = r_metric };
    runner_hooks h = { .ud = r, .running = r_running, .done = r_done, .sink = &mine };
    runner_summary sum;
    runner_run(ex, NULL, &h, &sum);
    eng_experiment_free(ex);
}

static void test_monitor_fails_before_training(void **st)
{
    (void)st;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    char v[64];
    snprintf(v, sizeof v, "127.0.0.1:%d", ntohs(a.sin_port));
    rec r = { 0 };
    run_with("metrics", v, &r);
    close(fd);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.rc, ENG_EIO);
    assert_true(r.failed);
    assert_int_equal(r.running, 0); /* no run was created */
    assert_int_equal(r.metrics, 0);
    assert_non_null(strstr(r.error, "Address already in use"));
    rec t = { 0 };
    run_with("tensorboard", "/dev/null/tb", &t);
    assert_int_equal(t.rc, ENG_EIO);
    assert_int_equal(t.running, 0);
    assert_non_null(strstr(t.error, "/dev/null/tb"));
    rec u = { 0 };
    run_with("metrics", "nonsense", &u);
    assert_int_equal(u.rc, ENG_EINVAL);
    assert_non_null(strstr(u.error, "monitor.metrics = 'nonsense'"));
}

int test_tui_monitor(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_prom_label), cmocka_unit_test(test_addr_parse), cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_snapshot_never_waits), cmocka_unit_test(test_tb_frames_and_tags),
        cmocka_unit_test(test_monitor_fails_before_training), cmocka_unit_test(test_metric_and_newton_series),
        cmocka_unit_test(test_tb_same_bytes_as_before), cmocka_unit_test(test_tb_full_queue_waits),
        cmocka_unit_test(test_tb_close_drains), cmocka_unit_test(test_tb_write_error),
    };
    return cmocka_run_group_tests_name("tui_monitor", t, NULL, NULL);
}
