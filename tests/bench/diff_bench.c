/* diff_bench.c — what `nnbench diff A B` costs on two runs of 10k steps each (built through
 * the store API: 4 metrics per step, a profile of 2 ranks x 40 scopes each): open the
 * database read-only, the comparison, the diff, its text lines and its JSON, per repetition.
 * Output: ENV and ROW lines for tests/bench/run.sh (section 13); the row is the median time
 * over the 100 ms goal. Figures taken on a loaded machine say little: take them idle.
 * usage: diff_bench [--quick] [--reps N] [DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../../store/store.h"
#include "../../tui/tui.h"
#include "bench.h"

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

static int die(const char *what)
{
    fprintf(stderr, "diff_bench: %s: %s\n", what, store_error());
    return 1;
}

/* One run of `steps` steps: 4 metric points per step and a 2-rank profile. */
static int make_run(store *s, int k, long steps, long long *id)
{
    store_run r;
    store_run_init(&r);
    snprintf(r.name, sizeof r.name, "diff-bench");
    snprintf(r.variant, sizeof r.variant, "%s", k ? "b" : "a");
    if (store_run_begin(s, &r, id)) return -1;
    static const char *const keys[] = { "train_loss", "train_acc", "lr", "samples_per_s" };
    for (long st = 1; st <= steps; st++) {
        double v[4] = { 1.0 / (double)st, 1 - 1.0 / (double)st, 0.1, 1e5 };
        if (store_metrics_add(s, *id, st, (int)(st / 100), 1e-3 * (double)st, NAN, keys, v, 4)) return -1;
    }
    static const char *const ops[] = { "dense.fwd", "dense.bwd", "bias.fwd", "bias.bwd", "relu.fwd", "relu.bwd",
                                       "softmax_xent.fwd", "softmax_xent.bwd", "allreduce", "adam.update" };
    prof_row rows[2 * 40];
    size_t n = 0;
    for (int rank = 0; rank < 2; rank++)
        for (int layer = 0; layer < 4; layer++)
            for (int o = 0; o < 10; o++) {
                prof_row *x = &rows[n++];
                memset(x, 0, sizeof *x);
                snprintf(x->name, sizeof x->name, "%s%s", rank ? "rank1:" : "", layer == 3 && o == 0 ? "step" : ops[o]);
                if (!(layer == 3 && o == 0)) snprintf(x->layer, sizeof x->layer, "dense%d", layer + 1);
                x->kind = layer == 3 && o == 0 ? PROF_STEP : PROF_OP;
                x->calls = (uint64_t)steps;
                x->self_ns = x->total_ns = (uint64_t)steps * (uint64_t)(1000 + 37 * o + 101 * layer + (k ? 13 * o : 0));
                x->flops = (uint64_t)steps * 100000;
                x->bytes = (uint64_t)steps * 40000;
                x->cycles = x->instructions = x->l1d_miss = x->l2_miss = x->l3_miss = x->fp_ops = -1;
                x->cpu_ns = x->faults = x->csw = x->task_clock_ns = x->migrations = -1;
                x->peak_mem = 1 << 20;
            }
    if (store_op_stats_put(s, *id, rows, n, NULL)) return -1;
    r.status = STORE_RUN_FINISHED;
    r.steps = steps;
    return store_run_end(s, *id, &r);
}

/* The work of `nnbench diff A B` (text and JSON), without the process start. */
static int one_diff(const char *path, const long long ids[2], FILE *sink, size_t *rows)
{
    store *s;
    store_compare *c = NULL;
    store_diff *d = NULL;
    char **lines = NULL;
    size_t nl = 0;
    if (store_open(path, 0, &s)) return -1;
    store_cmp_opts co = { .target = NAN };
    int st = store_compare_load(s, ids, 2, &co, &c);
    if (!st) st = store_diff_load(s, c, 0, 1, &d);
    if (!st) st = tui_diff_lines(d, 200, 1, 0, &lines, &nl) ? STORE_ENOMEM : store_diff_json(d, sink);
    if (!st) *rows = d->n;
    tui_lines_free(lines, nl);
    store_diff_free(d);
    store_compare_free(c);
    store_close(s);
    return st;
}

int main(int argc, char **argv)
{
    int reps = 5;   /* --quick is accepted and changes nothing: the row takes a second */
    const char *dir = "/tmp";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) continue;
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else dir = argv[i];
    }
    if (reps < 1 || reps > 64) reps = 5;
    long steps = 10000;
    char path[1100];
    snprintf(path, sizeof path, "%s/nnbench-diff-bench-%d.db", dir, (int)getpid());
    store *s;
    long long ids[2];
    if (store_open(path, STORE_OPEN_CREATE, &s)) return die("create");
    for (int k = 0; k < 2; k++)
        if (make_run(s, k, steps, &ids[k])) { store_close(s); return die("building the runs"); }
    store_close(s);
    FILE *sink = fopen("/dev/null", "w");
    if (!sink) return 1;
    double wall[64], cpu[64];
    size_t rows = 0;
    if (one_diff(path, ids, sink, &rows)) return die("diff");   /* warm the page cache */
    for (int r = 0; r < reps; r++) {
        double t0 = now_s(), c0 = cpu_s();
        if (one_diff(path, ids, sink, &rows)) return die("diff");
        wall[r] = 1e3 * (now_s() - t0);
        cpu[r] = 1e3 * (cpu_s() - c0);
        fprintf(stderr, "diff_bench: rep %d: %.2f ms wall, %.2f ms CPU, %zu rows\n", r + 1, wall[r], cpu[r], rows);
    }
    fclose(sink);
    bench_remove_db(path);
    stats w = stats_of(wall, reps), c = stats_of(cpu, reps);
    printf("ENV\tdiff_bench_steps\t%ld\n", steps);
    printf("ROW\t13\tnnbench diff A B, two runs of %ldk steps (2 ranks x 40 scopes): time / 100 ms goal\t%.4f\t%.4f\t%.4f\t"
           "%.1f ms wall (%.1f..%.1f), %.1f ms CPU; %zu rows; open + compare + diff + text + JSON\t< 1.00\t%s\n",
           steps / 1000, w.med / 100, w.min / 100, w.max / 100, w.med, w.min, w.max, c.med, rows,
           w.med < 100 ? "met" : "MISSED");
    return 0;
}
