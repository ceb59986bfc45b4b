/* monitor_bench.c — what the live monitor costs the training it watches: one experiment whose
 * variants differ only in [monitor] (off; Prometheus /metrics scraped every 100 ms by a thread
 * of this process; live TensorBoard event files), run through the one runner, interleaved
 * off / prometheus / tensorboard then tensorboard / prometheus / off in every rep (a drift of
 * the machine's speed weighs on all three alike), profiling and layer telemetry on in all
 * three (so the monitor has op rows and histograms to publish). Rows: training wall time
 * on / off.
 * usage: monitor_bench [--quick] [--reps N]
 * Output: "ROW<TAB>12<TAB>label<TAB>median<TAB>min<TAB>max<TAB>absolute<TAB>goal<TAB>verdict". */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../tui/runner.h"
#include "bench.h"

static int port;
static atomic_int stop_scraper, scrapes;

/* One GET /metrics; 1 when a whole 200 answer came back. */
static int scrape_once(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), ok = 0;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd < 0) return 0;
    if (!connect(fd, (struct sockaddr *)&a, sizeof a)) {
        static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if (write(fd, req, sizeof req - 1) == (ssize_t)sizeof req - 1) {
            char b[4096];
            ssize_t n, first = 1;
            while ((n = read(fd, b, sizeof b)) > 0) {
                if (first) ok = n > 12 && !strncmp(b + 9, "200", 3);
                first = 0;
            }
        }
    }
    close(fd);
    return ok;
}

static void *scraper(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_scraper)) {
        if (scrape_once()) atomic_fetch_add(&scrapes, 1);
        usleep(100000);
    }
    return NULL;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &l)) return -1;
    close(fd);
    return ntohs(a.sin_port);
}

enum { V_OFF, V_PROM, V_TB };

typedef struct {
    const int *slot; /* the experiment's variant i is slot[i] (V_OFF, V_PROM or V_TB) */
    double wall[3];
    int scrapes_at_prom;
    int failed;
    char error[512];
} outcome;

static void on_done(void *ud, const runner_variant *o, prof_t *prof)
{
    outcome *r = ud;
    (void)prof;
    if (o->rc || !o->created) {
        r->failed = 1;
        snprintf(r->error, sizeof r->error, "%s", o->error);
        return;
    }
    r->wall[r->slot[o->index]] = o->res.wall_s;
}

static int on_begin(void *ud, size_t v, const eng_config *cfg)
{
    outcome *r = ud;
    (void)cfg;
    if (v == 2) r->scrapes_at_prom = atomic_load(&scrapes); /* the prometheus variant (1) has ended */
    return 0;
}

static void row(const char *label, double *ratios, int reps, const char *abs)
{
    stats s = stats_of(ratios, reps);
    printf("ROW\t12\t%s\t%.4f\t%.4f\t%.4f\t%s\t<= 1.01\t%s\n", label, s.med, s.min, s.max, abs,
           s.med <= 1.01 ? "met" : "MISSED");
}

int main(int argc, char **argv)
{
    int quick = 0, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    }
    if (reps < 1 || reps > 64) reps = 5;
    char dir[] = "/tmp/nnbench-monitor-bench-XXXXXX", path[128], text[2048], vars[2][400];
    if (!mkdtemp(dir) || (port = free_port()) < 0) { perror("monitor_bench"); return 1; }
    /* the same variants in two orders: slot[e][i] is experiment e's variant i */
    static const int slot[2][3] = { { V_OFF, V_PROM, V_TB }, { V_TB, V_PROM, V_OFF } };
    char off[] = "[variant off]\n", prom_v[120], tb_v[200];
    snprintf(prom_v, sizeof prom_v, "[variant prometheus]\nmonitor.metrics = 127.0.0.1:%d\n", port);
    snprintf(tb_v, sizeof tb_v, "[variant tensorboard]\nmonitor.tensorboard = %s/tb\n", dir);
    snprintf(vars[0], sizeof vars[0], "%s%s%s", off, prom_v, tb_v);
    snprintf(vars[1], sizeof vars[1], "%s%s%s", tb_v, prom_v, off);
    eng_experiment *ex[2] = { NULL, NULL };
    for (int e = 0; e < 2; e++) {
        snprintf(text, sizeof text,
                 "[experiment]\nname = monitor-bench\nseed = 1\n[data]\nsource = spirals\nn = 4000\n"
                 "[model]\nlayers = dense:128:tanh, dense:128:tanh, dense:2\n"
                 "[train]\noptimizer = adam\nlr = 0.001\nbatch = 64\nmax_steps = %d\nlog_every = 10\ntelemetry = true\n"
                 "threads = 1\n[profile]\nenabled = true\n%s", quick ? 1500 : 4000, vars[e]);
        snprintf(path, sizeof path, "%s/e%d.ini", dir, e);
        FILE *f = fopen(path, "w");
        if (!f || fputs(text, f) < 0 || fclose(f)) { perror(path); return 1; }
        if (eng_experiment_load(path, NULL, 0, &ex[e])) { fprintf(stderr, "monitor_bench: %s\n", eng_error()); return 1; }
    }
    pthread_t th;
    pthread_create(&th, NULL, scraper, NULL);
    double prom[64], tb[64], off_s = 0, prom_s = 0, tb_s = 0;
    int code = 0, total_scrapes = 0;
    for (int k = 0; k < reps && !code; k++) {
        fprintf(stderr, "monitor_bench: rep %d/%d\n", k + 1, reps);
        double w[3] = { 0, 0, 0 };
        for (int e = 0; e < 2; e++) {
            outcome r = { .slot = slot[e] };
            int before = atomic_load(&scrapes);
            runner_hooks h = { .ud = &r, .begin = on_begin, .done = on_done };
            runner_summary sum;
            runner_run(ex[e], NULL, &h, &sum);
            if (r.failed) { fprintf(stderr, "monitor_bench: %s\n", r.error); code = 1; break; }
            for (int i = 0; i < 3; i++) w[i] += r.wall[i];
            total_scrapes += r.scrapes_at_prom - before;
        }
        if (code) break;
        prom[k] = w[V_PROM] / w[V_OFF];
        tb[k] = w[V_TB] / w[V_OFF];
        off_s += w[V_OFF] / 2 / reps, prom_s += w[V_PROM] / 2 / reps, tb_s += w[V_TB] / 2 / reps;
    }
    atomic_store(&stop_scraper, 1);
    pthread_join(th, NULL);
    eng_experiment_free(ex[0]);
    eng_experiment_free(ex[1]);
    if (!code) {
        char abs[200];
        snprintf(abs, sizeof abs, "%.2f s on, %.2f s off (means of 2 runs each a rep); %d scrapes answered", prom_s,
                 off_s, total_scrapes);
        row("Prometheus /metrics scraped every 100 ms: training time on / off", prom, reps, abs);
        snprintf(abs, sizeof abs, "%.2f s on, %.2f s off (means of 2 runs each a rep); telemetry every 10 steps", tb_s,
                 off_s);
        row("live TensorBoard event files: training time on / off", tb, reps, abs);
        if (total_scrapes < reps) { fprintf(stderr, "monitor_bench: the endpoint answered %d scrapes\n", total_scrapes); code = 1; }
    }
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    if (system(text)) fprintf(stderr, "monitor_bench: could not remove %s\n", dir);
    return code;
}
