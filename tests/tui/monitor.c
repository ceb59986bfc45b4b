/* monitor.c — the live monitor (tui/monitor.c, monitor_tb.c): label escaping, addresses,
 * the snapshot that never makes the training thread wait, the event-file framing, and a
 * monitor that cannot start failing the variant before anything trains. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
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
    unsigned char *b = malloc(1 << 16);
    *n = fread(b, 1, 1 << 16, fp);
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
    };
    return cmocka_run_group_tests_name("tui_monitor", t, NULL, NULL);
}
