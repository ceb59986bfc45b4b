/* pipeline_bench.c — row 8 of `make bench`: the input pipeline on Fashion-MNIST
 * (samples/input-pipeline.ini). (a) loading the decoded, normalised set from data.cache vs
 * decoding the gz IDX files, every page touched in both; (b) data.wait as a share of step
 * time when the source is throttled to about the compute rate (0.9x: measured first, in
 * this run), read on the training thread (stall) vs two batches ahead (prefetch depth 2).
 *
 * usage: pipeline_bench SAMPLE.ini [--quick] [--reps N]
 * Output: "ROW<TAB>7<TAB>label<TAB>median<TAB>min<TAB>max<TAB>absolute<TAB>goal<TAB>verdict".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/engine.h"
#include "bench.h"

#define MAX_REPS 16

static eng_experiment *load(const char *sample, const char *variant, const char *const *sets, size_t n)
{
    eng_experiment *ex = NULL;
    if (eng_experiment_load(sample, sets, n, &ex) || eng_experiment_select(ex, variant)) {
        fprintf(stderr, "pipeline_bench: %s\n", eng_error());
        exit(1);
    }
    return ex;
}

/* Loads the data of cfg (cache on or off), touches every value, frees; seconds. */
static double time_load(const eng_data_config *dc, uint64_t seed)
{
    double t0 = now_s();
    eng_dataset *ds = NULL;
    if (eng_data_load(dc, seed, &ds)) { fprintf(stderr, "pipeline_bench: %s\n", eng_error()); exit(1); }
    /* One value per 4 KB page: every page is mapped and read, without timing an add loop. */
    double sum = 0;
    for (size_t i = 0; i < (size_t)ds->n_train * ds->in_size; i += 1024) sum += ds->x_train[i] + 1;
    for (size_t i = 0; i < (size_t)ds->n_test * ds->in_size; i += 1024) sum += ds->x_test[i];
    for (int i = 0; i < ds->n_train; i += 1024) sum += ds->y_train[i];
    double t = now_s() - t0;
    if (!(sum > 0)) { fprintf(stderr, "pipeline_bench: empty dataset\n"); exit(1); }
    eng_data_free(ds);
    return t;
}

typedef struct { double wait_s, data_s, step_s, sps; long steps; } run_fig;

static run_fig train(const char *sample, const char *variant, const char *const *sets, size_t n)
{
    eng_experiment *ex = load(sample, variant, sets, n);
    prof_t *p = prof_create(&(prof_options){ .quiet = 1 });
    eng_run *r = NULL;
    if (!p || eng_run_create(&ex->variants[0], NULL, p, &r) || eng_run_train(r, NULL)) {
        fprintf(stderr, "pipeline_bench: %s: %s\n", variant, eng_error());
        exit(1);
    }
    run_fig f = { 0 };
    prof_row *rows = NULL;
    size_t nr = 0;
    prof_rows(p, PROF_BY_SCOPE, &rows, &nr);
    for (size_t i = 0; i < nr; i++) {
        if (!strcmp(rows[i].name, "data.wait")) f.wait_s = 1e-9 * (double)rows[i].total_ns;
        if (!strcmp(rows[i].name, "data")) f.data_s = 1e-9 * (double)rows[i].total_ns;
        if (!strcmp(rows[i].name, "step")) { f.step_s = 1e-9 * (double)rows[i].total_ns; f.steps = (long)rows[i].calls; }
    }
    free(rows);
    f.sps = eng_run_result_get(r)->samples_per_s;
    eng_run_destroy(r);
    prof_destroy(p);
    eng_experiment_free(ex);
    return f;
}

static void row(const char *label, const double *v, int n, const char *abs, const char *goal, int met)
{
    stats s = stats_of(v, n);
    printf("ROW\t8\t%s\t%.4f\t%.4f\t%.4f\t%s\t%s\t%s\n", label, s.med, s.min, s.max, abs, goal,
           goal[0] == '-' ? "info" : met ? "met" : "MISSED");
}

int main(int argc, char **argv)
{
    const char *sample = NULL;
    int reps = 5, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else sample = argv[i];
    }
    if (!sample) { fprintf(stderr, "usage: pipeline_bench SAMPLE.ini [--quick] [--reps N]\n"); return 2; }
    if (reps < 1) reps = 1;
    if (reps > MAX_REPS) reps = MAX_REPS;
    char cdir[] = "/tmp/nnbench-bench-cache-XXXXXX";
    if (!mkdtemp(cdir)) { perror("mkdtemp"); return 1; }
    setenv("NNBENCH_CACHE_DIR", cdir, 1);

    /* (a) cache load vs gz decode, interleaved; the first cached load writes the file. */
    eng_experiment *ex = load(sample, "cached", NULL, 0);
    eng_data_config dc = ex->variants[0].data;
    uint64_t seed = ex->variants[0].seed;
    eng_experiment_free(ex);
    time_load(&dc, seed);
    double dec[MAX_REPS], hit[MAX_REPS], ratio[MAX_REPS];
    for (int k = 0; k < reps; k++) {
        fprintf(stderr, "pipeline_bench: load rep %d/%d\n", k + 1, reps);
        dc.cache = 0;
        dec[k] = time_load(&dc, seed);
        dc.cache = 1;
        hit[k] = time_load(&dc, seed);
        ratio[k] = dec[k] / hit[k];
    }
    char abs[256];
    snprintf(abs, sizeof abs, "gz decode %.0f ms, cache %.1f ms (70k images, every page read)",
             1e3 * stats_of(dec, reps).med, 1e3 * stats_of(hit, reps).med);
    row("data: gz IDX decode / cache load (Fashion-MNIST)", ratio, reps, abs, ">= 10", stats_of(ratio, reps).med >= 10);

    /* (b) each rep: the compute step (unthrottled, no prefetch) sets the source's rate
     * for the two throttled runs that follow it (load on the machine drifts). */
    char steps[64], rate[64];
    snprintf(steps, sizeof steps, "train.max_steps=%d", quick ? 150 : 300);
    const char *base[] = { steps, "data.cache=true", "data.read_mbps=0" };
    const char *thr[] = { steps, "data.cache=true", rate };
    double w_stall[MAX_REPS], w_pre[MAX_REPS], speed[MAX_REPS], comp[MAX_REPS];
    double batch_bytes = 128.0 * (784 * 4 + 4), mbps = 0;
    for (int k = 0; k < reps; k++) {
        run_fig c = train(sample, "stall", base, 3);
        comp[k] = (c.step_s - c.data_s) / (double)c.steps;
        mbps = batch_bytes / (0.9 * comp[k]) / 1e6;
        snprintf(rate, sizeof rate, "data.read_mbps=%.3f", mbps);
        fprintf(stderr, "pipeline_bench: throttled rep %d/%d (%.0f MB/s)\n", k + 1, reps, mbps);
        run_fig s = train(sample, "stall", thr, 3);
        run_fig p = train(sample, "prefetch2", thr, 3);
        w_stall[k] = s.wait_s / s.step_s;
        w_pre[k] = p.wait_s / p.step_s;
        speed[k] = p.sps / s.sps;
    }
    double compute = stats_of(comp, reps).med;
    snprintf(abs, sizeof abs, "source at 0.9x compute: %.0f MB/s, %.2f ms/batch vs %.2f ms/step (medians)",
             batch_bytes / (0.9 * compute) / 1e6, 1e3 * 0.9 * compute, 1e3 * compute);
    row("data.wait / step time, prefetch depth 2, source at ~compute rate", w_pre, reps, abs, "< 0.05",
        stats_of(w_pre, reps).med < 0.05);
    snprintf(abs, sizeof abs, "stall: data.wait %.1f%% of step time", 100 * stats_of(w_stall, reps).med);
    row("samples/s, prefetch depth 2 / stall (same source)", speed, reps, abs, "-", 0);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cdir);
    if (system(cmd)) fprintf(stderr, "pipeline_bench: could not remove %s\n", cdir);
    return 0;
}
