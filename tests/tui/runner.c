/* runner.c — the one variant loop (tui/runner.c) without a store: every variant runs in
 * order, a diverging one does not stop the batch, the begin hook does, profilers are made
 * only where asked, and each outcome reaches the done hook. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tui/runner.h"

typedef struct {
    int begun, done, profiled, running_calls, metrics;
    int rc[8];
    size_t stop_before;      /* begin returns 1 at this variant (0: never) */
} rec;

static int r_begin(void *ud, size_t v, const eng_config *cfg)
{
    rec *r = ud;
    (void)cfg;
    if (r->stop_before && v == r->stop_before) return 1;
    r->begun++;
    return 0;
}
static void r_running(void *ud, eng_run *run) { (void)run; ((rec *)ud)->running_calls++; }
static void r_done(void *ud, const runner_variant *o, prof_t *prof)
{
    rec *r = ud;
    r->rc[o->index] = o->rc;
    r->profiled += prof != NULL;
    assert_int_equal(o->run_id, 0); /* no store */
    if (o->rc == ENG_EDIVERGED) assert_non_null(strstr(o->error, "diverged"));
    r->done++;
}
static int r_metric(void *ud, const eng_metric *m) { (void)m; ((rec *)ud)->metrics++; return 0; }

static const char *FILE_TEXT =
    "[experiment]\nname = rb\nseed = 3\n[data]\nsource = spirals\nn = 200\n"
    "[model]\nlayers = dense:8:relu, dense:2\n[train]\noptimizer = sgd\nbatch = 0\nmax_steps = 20\nlog_every = 1\n"
    "[variant calm]\ntrain.lr = 0.1\nprofile.enabled = true\n[variant boom]\ntrain.lr = 1e30\n"
    "[variant steady]\ntrain.optimizer = adam\ntrain.lr = 0.01\n";

static void test_runner_batch(void **st)
{
    (void)st;
    char path[] = "/tmp/nnbench-runner-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, FILE_TEXT, strlen(FILE_TEXT)), (ssize_t)strlen(FILE_TEXT));
    close(fd);
    eng_experiment *ex = NULL;
    if (eng_experiment_load(path, NULL, 0, &ex)) fail_msg("%s", eng_error());
    unlink(path);
    rec r = { 0 };
    eng_sink mine = { .ud = &r, .metric = r_metric };
    runner_hooks h = { .ud = &r, .begin = r_begin, .running = r_running, .done = r_done, .sink = &mine };
    runner_summary sum;
    runner_run(ex, NULL, &h, &sum);
    assert_int_equal(sum.ran, 3);
    assert_int_equal(r.done, 3);
    assert_int_equal(r.rc[0], ENG_OK);
    assert_int_equal(r.rc[1], ENG_EDIVERGED);
    assert_int_equal(r.rc[2], ENG_OK);       /* the batch went on after the divergence */
    assert_int_equal(sum.finished, 2);
    assert_int_equal(sum.failed, 1);
    assert_int_equal(r.profiled, 1);         /* profile.enabled only in calm */
    assert_int_equal(r.running_calls, 6);    /* created, then trained, for each */
    assert_true(r.metrics > 20);             /* the caller's sink saw the runs */
    /* The begin hook ends the batch. */
    rec s = { .stop_before = 1 };
    h.ud = &s;
    mine.ud = &s;
    runner_run(ex, NULL, &h, &sum);
    assert_int_equal(sum.ran, 1);
    assert_int_equal(s.done, 1);
    eng_experiment_free(ex);
}

int test_tui_runner(void)
{
    const struct CMUnitTest t[] = { cmocka_unit_test(test_runner_batch) };
    return cmocka_run_group_tests_name("tui_runner", t, NULL, NULL);
}
