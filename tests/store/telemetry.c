/* telemetry.c — layer-telemetry records through the engine's sink tee into the store sink:
 * every key of a record becomes a metric point of that step (600 keys, more than the old
 * 128-key limit; NaN kept as NaN), across records larger than one flush buffer. */
#include "util.h"

#include <math.h>

#include "../../store/store.h"
#include "../../tui/cli.h"

static char dir[512];

static int setup(void **st) { (void)st; tmp_dir(dir, sizeof dir); return 0; }
static int teardown(void **st) { (void)st; rm_rf(dir); return 0; }

static void test_record_to_metrics(void **st)
{
    (void)st;
    char db[600], err[256];
    snprintf(db, sizeof db, "%s/t.db", dir);
    cli_store_sink *cs = cli_store_sink_open(db, err, sizeof err);
    assert_non_null(cs);
    eng_sink store_sink = cli_store_sink_get(cs);
    eng_sink_tee tee = { .sinks = { NULL, &store_sink }, .n = 2 };
    eng_sink s = eng_sink_tee_make(&tee);
    eng_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "lab");
    eng_run_info info = { .cfg = &cfg, .dataset = "x", .model_summary = "m", .total_steps = 20 };
    assert_int_equal(s.run_begin(s.ud, &info), 0);
    /* 600 keys x 10 steps: more points than one flush buffer holds at a time */
    enum { NK = 600 };
    static char names[NK][32];
    static const char *keys[NK];
    static double vals[NK];
    for (int k = 0; k < NK; k++) {
        snprintf(names[k], sizeof names[k], "grad_norm/dense%d.W", k + 1);
        keys[k] = names[k];
    }
    for (long step = 2; step <= 20; step += 2) {
        for (int k = 0; k < NK; k++) vals[k] = k == 5 ? NAN : (double)step * 1000 + k;
        eng_telemetry t = { .step = step, .epoch = 0, .wall_s = 0.1 * (double)step, .hybrid_s = 0.1 * (double)step,
                            .n = NK, .keys = keys, .values = vals };
        assert_int_equal(s.telemetry(s.ud, &t), 0);
    }
    eng_run_result res = { .status = ENG_RUN_FINISHED, .steps = 20, .final_test_acc = NAN, .best_test_acc = NAN,
                           .final_test_loss = NAN, .wall_to_target = NAN, .hybrid_to_target = NAN,
                           .steps_to_target = -1, .kappa_first = NAN, .kappa_last = NAN };
    s.run_end(s.ud, &res);
    long long id = cli_store_sink_run_id(cs);
    assert_int_equal(cli_store_sink_close(cs, NULL, 0), 0);

    store *r;
    assert_int_equal(store_open(db, STORE_OPEN_READONLY, &r), STORE_OK);
    char **mk;
    size_t n;
    assert_int_equal(store_metric_keys(r, id, &mk, &n), STORE_OK);
    assert_int_equal(n, NK);
    store_strings_free(mk, n);
    store_series sr;
    assert_int_equal(store_metric_get(r, id, "grad_norm/dense600.W", &sr), STORE_OK);
    assert_int_equal(sr.n, 10);
    assert_int_equal(sr.step[9], 20);
    assert_true(sr.value[9] == 20 * 1000 + 599);
    store_series_free(&sr);
    assert_int_equal(store_metric_get(r, id, "grad_norm/dense6.W", &sr), STORE_OK);
    assert_true(isnan(sr.value[0]));
    store_series_free(&sr);
    store_close(r);
}

int test_store_telemetry(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_record_to_metrics) };
    return cmocka_run_group_tests_name("store_telemetry", tests, setup, teardown);
}
