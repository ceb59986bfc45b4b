/* sink.c — tui/runner_store.c driven with synthetic engine events: every event lands in the
 * right table, statuses map, a read-only database is refused before any run. */
#include "util.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../quantum/quantum.h"
#include "../../store/store.h"
#include "../../tui/cli.h"

static char dir[512];

static int setup(void **st) { (void)st; tmp_dir(dir, sizeof dir); return 0; }
static int teardown(void **st) { (void)st; rm_rf(dir); return 0; }

static eng_kv kvs[3] = { { "experiment.seed", "7", 2 }, { "train.lr", "0.05", 9 },
                         { "train.optimizer", "adam", 8 } };

static void fake_config(eng_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->name, sizeof cfg->name, "spirals-mlp");
    snprintf(cfg->variant, sizeof cfg->variant, "adam");
    snprintf(cfg->path, sizeof cfg->path, "samples/spirals-mlp.ini");
    cfg->seed = 7;
    cfg->target_loss = 0.2;
    cfg->kv = kvs;
    cfg->n_kv = 3;
}

/* Plays one run through the sink; status is the run_end status. */
static long long play(cli_store_sink *cs, eng_run_status status, int with_profile)
{
    eng_sink s = cli_store_sink_get(cs);
    eng_config cfg;
    fake_config(&cfg);
    eng_run_info info = { .cfg = &cfg, .experiment_text = "[experiment]\nname = spirals-mlp\n",
                          .dataset = "spirals", .model_summary = "dense(2->16) tanh, dense(16->2)",
                          .n_params = 82, .threads = 1, .total_steps = 100, .n_train = 800,
                          .n_test = 200 };
    assert_int_equal(s.run_begin(s.ud, &info), 0);
    for (long i = 1; i <= 100; i++) {
        eng_metric m = { .step = i, .epoch = (int)(i / 10), .wall_s = i * 0.001, .hybrid_s = i * 0.002,
                         .key = "train_loss", .value = 1.0 / (double)i };
        assert_int_equal(s.metric(s.ud, &m), 0);
        if (i % 10 == 0) {
            m.key = "test_acc";
            m.value = 0.5 + (double)i / 1000;
            assert_int_equal(s.metric(s.ud, &m), 0);
        }
        s.progress(s.ud, i, 100, (int)(i / 10), 1.0 / (double)i, 1e4);
    }
    qm_solve_event ev = { .step = 3, .block = 1, .n = 16, .kappa_used = 1e3, .kappa_exact = NAN,
                          .route = QM_ROUTE_QUANTUM, .simulated_quantum_ns = 5e4, .residual = 1e-3 };
    assert_int_equal(s.solver(s.ud, &ev), 0);
    if (with_profile) {
        prof_row rows[2] = { { .name = "dense.fwd", .layer = "dense1", .kind = PROF_OP, .calls = 100,
                               .total_ns = 2000000, .self_ns = 1500000, .flops = 6400, .cycles = -1,
                               .instructions = -1, .l1d_miss = -1, .l2_miss = -1, .l3_miss = -1,
                               .fp_ops = -1, .self_mem = 64, .peak_mem = 4096 },
                             { .name = "forward", .kind = PROF_PHASE, .calls = 100, .total_ns = 3000000,
                               .self_ns = 100000, .cycles = -1, .instructions = -1, .l1d_miss = -1,
                               .l2_miss = -1, .l3_miss = -1, .fp_ops = -1 } };
        prof_summary sum = { .total_self_ns = 1600000, .events = 400, .hw_counters = 0,
                             .counters_note = "no hardware counters: PAPI reports 0 (VM)",
                             .peak_bytes = 123456, .peak_rss = 7654321 };
        assert_int_equal(s.op_stats(s.ud, rows, 2, &sum), 0);
    }
    eng_run_result res = { .status = status, .steps = 100, .epochs = 10, .wall_s = 0.1, .hybrid_s = 0.2,
                           .final_train_loss = 0.01, .best_train_loss = 0.01, .final_test_loss = NAN,
                           .final_test_acc = 0.6, .best_test_acc = 0.6, .samples_per_s = 8e5,
                           .steps_to_target = 5, .wall_to_target = 0.005, .hybrid_to_target = 0.01,
                           .peak_bytes = 123456, .peak_rss = 7654321, .solves = 1, .quantum_solves = 1,
                           .kappa_first = 1e3, .kappa_last = NAN,
                           .error = status == ENG_RUN_DIVERGED ? "diverged at step 101: loss is nan" : NULL };
    s.run_end(s.ud, &res);
    return cli_store_sink_run_id(cs);
}

static void test_sink_writes_everything(void **st)
{
    (void)st;
    char p[600];
    snprintf(p, sizeof p, "%s/sink.db", dir);
    char err[600];
    cli_store_sink *cs = cli_store_sink_open(p, err, sizeof err);
    assert_non_null(cs);
    assert_int_equal(cli_store_sink_run_id(cs), 0);
    long long a = play(cs, ENG_RUN_FINISHED, 1);
    long long b = play(cs, ENG_RUN_DIVERGED, 0);
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    assert_int_equal(cli_store_sink_close(cs, NULL, 0), 0);

    store *s;
    assert_int_equal(store_open(p, STORE_OPEN_READONLY, &s), STORE_OK);
    store_run r;
    assert_int_equal(store_run_get(s, a, &r), STORE_OK);
    assert_string_equal(r.name, "spirals-mlp");
    assert_string_equal(r.variant, "adam");
    assert_string_equal(r.optimizer, "adam");
    assert_string_equal(r.dataset, "spirals");
    assert_string_equal(r.version, NNBENCH_VERSION);
    assert_string_equal(r.exp_text, "[experiment]\nname = spirals-mlp\n");
    assert_int_equal(r.status, STORE_RUN_FINISHED);
    assert_int_equal(r.n_params, 82);
    assert_int_equal(r.steps, 100);
    assert_int_equal(r.steps_to_target, 5);
    assert_true(fabs(r.target_loss - 0.2) < 1e-12);
    assert_true(fabs(r.samples_per_s - 8e5) < 1e-6);
    assert_true(isnan(r.final_test_loss));
    assert_true(isnan(r.kappa_last));
    assert_int_equal(r.peak_rss, 7654321);
    store_run_clear(&r);
    assert_int_equal(store_run_get(s, b, &r), STORE_OK);
    assert_int_equal(r.status, STORE_RUN_DIVERGED);
    assert_string_equal(r.error, "diverged at step 101: loss is nan");
    store_run_clear(&r);

    store_kv *kv;
    size_t n;
    assert_int_equal(store_params_get(s, a, &kv, &n), STORE_OK);
    assert_int_equal(n, 3);
    assert_string_equal(kv[1].key, "train.lr");
    assert_string_equal(kv[1].value, "0.05");
    free(kv);
    assert_int_equal(store_sysinfo_get(s, a, &kv, &n), STORE_OK);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(kv[i].key, "cores")) { seen++; assert_true(atoi(kv[i].value) >= 1); }
        if (!strcmp(kv[i].key, "blas_core")) { seen++; assert_true(strlen(kv[i].value) > 0); }
        if (!strcmp(kv[i].key, "cpu")) seen++;
        if (!strcmp(kv[i].key, "papi_hw_counters")) { seen++; assert_string_equal(kv[i].value, "0"); }
        if (!strcmp(kv[i].key, "counters_note")) seen++;
    }
    assert_int_equal(seen, 5);
    free(kv);
    store_series sr;
    assert_int_equal(store_metric_get(s, a, "train_loss", &sr), STORE_OK);
    assert_int_equal(sr.n, 100);
    assert_true(fabs(sr.hybrid[99] - 0.2) < 1e-12);
    store_series_free(&sr);
    assert_int_equal(store_metric_get(s, b, "test_acc", &sr), STORE_OK);
    assert_int_equal(sr.n, 10);
    store_series_free(&sr);
    store_op_row *ops;
    assert_int_equal(store_op_stats_get(s, a, -1, &ops, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_string_equal(ops[0].name, "dense.fwd");
    assert_int_equal(ops[0].peak_mem, 4096);
    assert_int_equal(ops[1].kind, PROF_PHASE);
    free(ops);
    assert_int_equal(store_op_stats_get(s, a, PROF_OP, &ops, &n), STORE_OK);
    assert_int_equal(n, 1);
    free(ops);
    store_solver_event *ev;
    assert_int_equal(store_solver_events_get(s, a, &ev, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].route, QM_ROUTE_QUANTUM);
    assert_true(isnan(ev[0].kappa_exact));
    free(ev);
    store_close(s);
}

/* A caller that never delivers run_end (it bailed out) does not leave a 'running' row. */
static void test_sink_close_without_end(void **st)
{
    (void)st;
    char p[600];
    snprintf(p, sizeof p, "%s/noend.db", dir);
    char err[600];
    cli_store_sink *cs = cli_store_sink_open(p, err, sizeof err);
    assert_non_null(cs);
    eng_sink s = cli_store_sink_get(cs);
    eng_config cfg;
    fake_config(&cfg);
    eng_run_info info = { .cfg = &cfg, .dataset = "spirals", .n_params = 1 };
    assert_int_equal(s.run_begin(s.ud, &info), 0);
    eng_metric m = { .step = 1, .key = "train_loss", .value = 0.3 };
    assert_int_equal(s.metric(s.ud, &m), 0);
    long long id = cli_store_sink_run_id(cs);
    assert_int_equal(cli_store_sink_close(cs, NULL, 0), 0);
    store *db;
    assert_int_equal(store_open(p, 0, &db), STORE_OK);
    store_run r;
    assert_int_equal(store_run_get(db, id, &r), STORE_OK);
    assert_int_equal(r.status, STORE_RUN_FAILED);
    assert_int_equal(r.steps, 1);
    store_run_clear(&r);
    store_close(db);
}

static void test_sink_refuses_read_only(void **st)
{
    (void)st;
    char p[600];
    snprintf(p, sizeof p, "%s/ro.db", dir);
    char err[600];
    cli_store_sink *cs = cli_store_sink_open(p, err, sizeof err);
    assert_non_null(cs);
    assert_int_equal(cli_store_sink_close(cs, NULL, 0), 0);
    chmod(p, 0444);
    assert_null(cli_store_sink_open(p, err, sizeof err));
    assert_non_null(strstr(err, "read-only"));
    chmod(p, 0644);
    snprintf(p, sizeof p, "%s/garbage.db", dir);
    FILE *f = fopen(p, "w");
    fputs("this is not a database, it is a shopping list: eggs, milk, bread, butter, cheese\n"
          "and a few more words so that the file is longer than the SQLite header\n", f);
    fclose(f);
    long sz0, sz1;
    uint64_t h = file_digest(p, &sz0);
    assert_null(cli_store_sink_open(p, err, sizeof err));
    assert_non_null(strstr(err, "garbage.db"));
    assert_true(file_digest(p, &sz1) == h && sz0 == sz1);
}

int test_store_sink(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sink_writes_everything),
        cmocka_unit_test(test_sink_close_without_end),
        cmocka_unit_test(test_sink_refuses_read_only),
    };
    return cmocka_run_group_tests_name("store_sink", tests, setup, teardown);
}
