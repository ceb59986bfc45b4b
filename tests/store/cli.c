/* cli.c — the store commands of tui/cmd_store.c run in-process on databases filled through
 * the store API: output, exit codes (0 ok, 1 failure, 2 usage), reports in every format. */
#include "util.h"

#include <fcntl.h>
#include <math.h>
#include <unistd.h>

#include "../../store/store.h"
#include "../../tui/cli.h"

static char dir[512], db[600];
static long long ids[3];
static char out[1 << 20], err[1 << 16];

/* Runs fn(argv) with stdout/stderr captured into out/err and stdin from /dev/null. */
static int run(int (*fn)(int, char **), const char *const *args)
{
    char *argv[32];
    int argc = 0;
    while (args[argc]) { argv[argc] = (char *)args[argc]; argc++; }
    argv[argc] = NULL;
    char po[700], pe[700];
    snprintf(po, sizeof po, "%s/stdout", dir);
    snprintf(pe, sizeof pe, "%s/stderr", dir);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2), si = dup(0);
    int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fi = open("/dev/null", O_RDONLY);
    dup2(fo, 1);
    dup2(fe, 2);
    dup2(fi, 0);
    int rc = fn(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    dup2(si, 0);
    close(so); close(se); close(si); close(fo); close(fe); close(fi);
    FILE *f = fopen(po, "r");
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    f = fopen(pe, "r");
    n = fread(err, 1, sizeof err - 1, f);
    err[n] = 0;
    fclose(f);
    return rc;
}

static void fill(void)
{
    store *s;
    assert_int_equal(store_open(db, STORE_OPEN_CREATE, &s), STORE_OK);
    const char *opts[] = { "sgd", "adam", "newton" };
    for (int r = 0; r < 3; r++) {
        store_run run_;
        store_run_init(&run_);
        snprintf(run_.name, sizeof run_.name, "spirals-mlp");
        snprintf(run_.variant, sizeof run_.variant, "%s", opts[r]);
        snprintf(run_.optimizer, sizeof run_.optimizer, "%s", opts[r]);
        snprintf(run_.dataset, sizeof run_.dataset, "spirals");
        run_.target_loss = 0.2;
        run_.exp_text = "[experiment]\nname = spirals-mlp\n";
        assert_int_equal(store_run_begin(s, &run_, &ids[r]), STORE_OK);
        store_kv kv[3] = { { "train.lr", "0.1" }, { "train.optimizer", "" }, { "data.n", "2000" } };
        snprintf(kv[1].value, sizeof kv[1].value, "%s", opts[r]);
        if (r == 1) snprintf(kv[0].value, sizeof kv[0].value, "0.01");
        assert_int_equal(store_params_put(s, ids[r], kv, 3), STORE_OK);
        store_kv sys[2] = { { "cores", "2" }, { "blas_core", "Haswell" } };
        assert_int_equal(store_sysinfo_put(s, ids[r], sys, 2), STORE_OK);
        for (int i = 1; i <= 200; i++) {
            double loss = (r + 1.0) / i;
            store_metric_add(s, ids[r], i, i / 20, i * 0.001 * (r + 1), i * 0.001 * (r + 1), "train_loss", loss);
            if (i % 20 == 0) store_metric_add(s, ids[r], i, i / 20, i * 0.001 * (r + 1), i * 0.001 * (r + 1), "test_acc", 0.5 + i * 0.002);
        }
        store_run end;
        store_run_init(&end);
        end.status = r == 2 ? STORE_RUN_DIVERGED : STORE_RUN_FINISHED;
        if (r == 2) snprintf(end.error, sizeof end.error, "diverged at step 201: loss is nan");
        end.steps = 200;
        end.epochs = 10;
        end.wall_s = 0.2 * (r + 1);
        end.final_train_loss = (r + 1.0) / 200;
        end.best_test_acc = 0.9;
        end.samples_per_s = 12345;
        end.steps_to_target = 5 * (r + 1);
        end.wall_to_target = 0.005;
        end.peak_bytes = 1 << 20;
        assert_int_equal(store_run_end(s, ids[r], &end), STORE_OK);
    }
    store_op_row ops[1] = { { .name = "dense.fwd", .layer = "dense1", .calls = 200, .total_ns = 2000000,
                              .self_ns = 1800000, .flops = 4000000, .cycles = -1, .instructions = -1,
                              .l1d_miss = -1, .l2_miss = -1, .l3_miss = -1, .fp_ops = -1 } };
    store_profile prof = { .events = 400, .counters_note = "no hardware counters: PAPI reports 0 (VM)" };
    assert_int_equal(store_op_stats_put(s, ids[0], ops, 1, &prof), STORE_OK);
    store_solver_event ev = { .step = 1, .n = 8, .kappa_used = 40, .route = 1, .simulated_quantum_ns = 1e5 };
    assert_int_equal(store_solver_event_add(s, ids[2], &ev), STORE_OK);
    store_close(s);
}

static int setup(void **st)
{
    (void)st;
    tmp_dir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/cli.db", dir);
    fill();
    return 0;
}
static int teardown(void **st) { (void)st; rm_rf(dir); return 0; }

static void test_list(void **st)
{
    (void)st;
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--db", db, NULL }), 0);
    assert_non_null(strstr(out, "NAME/VARIANT"));
    assert_non_null(strstr(out, "spirals-mlp/adam"));
    assert_non_null(strstr(out, "diverged"));
    assert_non_null(strstr(out, "0.005")); /* final loss of run 1 */
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--db", db, "--status", "diverged", NULL }), 0);
    assert_non_null(strstr(out, "spirals-mlp/newton"));
    assert_null(strstr(out, "spirals-mlp/sgd"));
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--db", db, "--grep", "ADAM", NULL }), 0);
    assert_non_null(strstr(out, "spirals-mlp/adam"));
    assert_null(strstr(out, "newton"));
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--db", db, "--sort", "loss", "--desc", "--limit", "1", NULL }), 0);
    assert_non_null(strstr(out, "newton"));
    assert_non_null(strstr(out, "(1 of 3 runs)"));
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--db", db, "--sort", "bogus", NULL }), 2);
    assert_non_null(strstr(err, "bogus"));
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--db", db, "--status", "done", NULL }), 2);
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--db", db, "--limit", "x", NULL }), 2);
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--what", NULL }), 2);
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--help", NULL }), 0);
    assert_non_null(strstr(out, "usage: nnbench list"));
    /* A missing database: a hint, not an error, and no file created. */
    char missing[700];
    snprintf(missing, sizeof missing, "%s/none.db", dir);
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--db", missing, NULL }), 0);
    assert_non_null(strstr(out, "nnbench run samples/spirals-mlp.ini"));
    assert_int_equal(access(missing, F_OK), -1);
    /* NNBENCH_DB is honoured. */
    setenv("NNBENCH_DB", db, 1);
    assert_int_equal(run(cmd_list, (const char *[]){ "list", NULL }), 0);
    assert_non_null(strstr(out, "spirals-mlp/adam"));
    unsetenv("NNBENCH_DB");
}

static void test_show(void **st)
{
    (void)st;
    assert_int_equal(run(cmd_show, (const char *[]){ "show", "1", "--db", db, NULL }), 0);
    assert_non_null(strstr(out, "run 1  spirals-mlp/sgd  finished"));
    assert_non_null(strstr(out, "train.lr"));
    assert_non_null(strstr(out, "blas_core"));
    assert_non_null(strstr(out, "dense.fwd"));
    assert_non_null(strstr(out, "no hardware counters"));
    assert_non_null(strstr(out, "target loss 0.2 reached at step 5"));
    assert_int_equal(run(cmd_show, (const char *[]){ "show", "last", "--db", db, NULL }), 0);
    assert_non_null(strstr(out, "diverged at step 201"));
    assert_non_null(strstr(out, "1 linear solves: 1 routed to the simulated quantum solver, 0 to the classical one"));
    /* both clocks named, the measured time said to cover every solve (issue 27) */
    assert_non_null(strstr(out, "wall clock (measured): all solves computed classically"));
    assert_non_null(strstr(out, "quantum clock (simulated):"));
    assert_int_equal(run(cmd_show, (const char *[]){ "show", "99", "--db", db, NULL }), 1);
    assert_non_null(strstr(err, "no run 99"));
    assert_int_equal(run(cmd_show, (const char *[]){ "show", "--db", db, NULL }), 2);
    assert_int_equal(run(cmd_show, (const char *[]){ "show", "1", "2", "--db", db, NULL }), 2);
}

static void test_compare(void **st)
{
    (void)st;
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "1", "2", "3", "--db", db, NULL }), 0);
    assert_non_null(strstr(out, "train.lr"));
    assert_null(strstr(out, "data.n ")); /* same everywhere: hidden */
    assert_non_null(strstr(out, "samples/s"));
    assert_non_null(strstr(out, "train_loss against step"));
    assert_non_null(strstr(out, "#3 newton")); /* legend: the shared name is in the heading */
    assert_non_null(strstr(out, "spirals-mlp: 3 runs"));
    assert_non_null(strstr(out, "(sim) hybrid time"));
    assert_non_null(strstr(out, "(sim) quantum time"));
    assert_non_null(strstr(out, "(sim) hybrid to target"));
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "--last-batch", "--x-scale", "log", "--db", db, NULL }), 0);
    assert_non_null(strstr(out, "spirals-mlp: 3 runs"));
    assert_non_null(strstr(out, "log x"));
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "--last-batch", "1", "--db", db, NULL }), 2);
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "1", "2", "--x-scale", "cubic", "--db", db, NULL }), 2);
    /* Without colour, series are told apart by their marker, in the plot and the legend. */
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "1", "2", "--no-color", "--db", db, NULL }), 0);
    assert_non_null(strstr(out, "** #1 sgd"));
    assert_non_null(strstr(out, "++ #2 adam"));
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "1", "2", "--all-keys", "--db", db, NULL }), 0);
    assert_non_null(strstr(out, "data.n"));
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "1", "2", "--metric", "acc", "--x", "time",
                                                         "--target", "0.7", "--db", db, NULL }), 0);
    assert_non_null(strstr(out, "test_acc against wall time"));
    assert_non_null(strstr(out, "target test_acc"));
    assert_non_null(strstr(out, ">= 0.7"));
    /* test_acc first reaches 0.7 at step 100 (0.5 + 100*0.002) */
    assert_non_null(strstr(out, "100"));
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "1", "2", "--metric", "nope", "--db", db, NULL }), 2);
    assert_non_null(strstr(err, "train_loss"));
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "1", "2", "--x", "epochs", "--db", db, NULL }), 2);
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "1", "42", "--db", db, NULL }), 1);
    assert_int_equal(run(cmd_compare, (const char *[]){ "compare", "--db", db, NULL }), 2);
}

/* The comparison model itself: one order of rows, labels for runs that share a name, the
 * last batch. */
static void test_compare_model(void **st)
{
    (void)st;
    store *s;
    assert_int_equal(store_open(db, 0, &s), STORE_OK);
    store_compare *c;
    store_cmp_opts o = { .metric = "train_loss", .target = NAN };
    assert_int_equal(store_compare_load(s, ids, 3, &o, &c), STORE_OK);
    assert_string_equal(c->common_name, "spirals-mlp");
    assert_string_equal(c->label[1], "#2 spirals-mlp/adam");
    assert_string_equal(c->short_label[2], "newton");
    for (size_t r = 1; r < c->n_rows; r++) assert_true(c->rows[r - 1].section <= c->rows[r].section);
    int cfg = 0, q = 0;
    for (size_t r = 0; r < c->n_rows; r++) {
        if (c->rows[r].section == STORE_CMP_CONFIG) {
            cfg++;
            assert_true(c->rows[r].differs);
        }
        if (!strcmp(c->rows[r].label, "(sim) quantum time")) {
            q = 1;
            assert_string_equal(c->rows[r].cells[0], "-");
            char d[32];
            assert_string_equal(c->rows[r].cells[2], prof_fmt_duration(d, sizeof d, 1e-4));
        }
    }
    assert_int_equal(cfg, 2); /* train.lr and train.optimizer; data.n is the same */
    assert_true(q);
    o.all_keys = 1;
    assert_int_equal(store_compare_rows(c, &o), STORE_OK);
    cfg = 0;
    for (size_t r = 0; r < c->n_rows; r++) cfg += c->rows[r].section == STORE_CMP_CONFIG;
    assert_int_equal(cfg, 3);
    store_compare_free(c);
    long long *b;
    size_t nb;
    assert_int_equal(store_last_batch(s, &b, &nb), STORE_OK);
    assert_int_equal(nb, 3);
    assert_true(b[0] == ids[0] && b[2] == ids[2]);
    free(b);
    store_close(s);

    /* Two runs with one name: told apart by what differs in their config. */
    char db2[700];
    snprintf(db2, sizeof db2, "%s/same.db", dir);
    assert_int_equal(store_open(db2, STORE_OPEN_CREATE, &s), STORE_OK);
    long long id2[2];
    for (int r = 0; r < 2; r++) {
        store_run x;
        store_run_init(&x);
        snprintf(x.name, sizeof x.name, "nvs");
        snprintf(x.variant, sizeof x.variant, "sgd");
        assert_int_equal(store_run_begin(s, &x, &id2[r]), STORE_OK);
        store_kv kv[2] = { { "train.lr", "0.1" }, { "train.optimizer", "sgd" } };
        if (r) snprintf(kv[0].value, sizeof kv[0].value, "0.5");
        assert_int_equal(store_params_put(s, id2[r], kv, 2), STORE_OK);
        x.status = STORE_RUN_FINISHED;
        assert_int_equal(store_run_end(s, id2[r], &x), STORE_OK);
    }
    assert_int_equal(store_compare_load(s, id2, 2, NULL, &c), STORE_OK);
    assert_string_equal(c->label[0], "#1 nvs/sgd lr=0.1");
    assert_string_equal(c->label[1], "#2 nvs/sgd lr=0.5");
    assert_string_equal(c->short_label[1], "sgd lr=0.5");
    store_compare_free(c);
    /* The same variant again is the next batch. */
    assert_int_equal(store_last_batch(s, &b, &nb), STORE_OK);
    assert_int_equal(nb, 1);
    assert_true(b[0] == id2[1]);
    free(b);
    store_close(s);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    return b;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
    return n;
}

static void test_report_formats(void **st)
{
    (void)st;
    char p[700];
    snprintf(p, sizeof p, "%s/r.html", dir);
    assert_int_equal(run(cmd_report, (const char *[]){ "report", "1", "2", "3", "-o", p, "--db", db, NULL }), 0);
    char *h = slurp(p);
    assert_non_null(strstr(h, "<!DOCTYPE html>"));
    assert_non_null(strstr(h, "</html>"));
    /* One chart per metric against step and one against time, losses also against the
     * hybrid clock; losses first; both clocks and time to target in the table. */
    assert_int_equal(count(h, "<svg"), 5);
    assert_int_equal(count(h, "</svg>"), 5);
    assert_int_equal(count(h, "data-metric=\"train_loss\""), 3);
    assert_int_equal(count(h, "data-metric=\"test_acc\""), 2);
    assert_int_equal(count(h, "<polyline"), 15);
    assert_true(strstr(h, "data-metric=\"train_loss\"") < strstr(h, "data-metric=\"test_acc\""));
    assert_non_null(strstr(h, "data-x=\"hybrid\""));
    assert_non_null(strstr(h, "(sim) hybrid to target"));
    assert_non_null(strstr(h, "wall to target"));
    assert_non_null(strstr(h, "class=\"legend-box\""));
    assert_null(strstr(h, "src=\"http"));
    assert_null(strstr(h, "<script"));
    assert_non_null(strstr(h, "dense.fwd"));
    free(h);
    snprintf(p, sizeof p, "%s/r.md", dir);
    assert_int_equal(run(cmd_report, (const char *[]){ "report", "1", "2", "-o", p, "--db", db, NULL }), 0);
    h = slurp(p);
    assert_non_null(strstr(h, "# nnbench report"));
    assert_non_null(strstr(h, "| train.lr | 0.1 | 0.01 |"));
    free(h);
    snprintf(p, sizeof p, "%s/r.json", dir);
    assert_int_equal(run(cmd_report, (const char *[]){ "report", "3", "-o", p, "--db", db, NULL }), 0);
    h = slurp(p);
    assert_non_null(strstr(h, "\"status\":\"diverged\""));
    assert_non_null(strstr(h, "\"route\":\"quantum\""));
    assert_null(strstr(h, ":nan"));
    assert_null(strstr(h, ",nan"));
    assert_null(strstr(h, "inf,"));
    free(h);
    snprintf(p, sizeof p, "%s/r.csv", dir);
    assert_int_equal(run(cmd_report, (const char *[]){ "report", "1", "-o", p, "--db", db, NULL }), 0);
    h = slurp(p);
    assert_int_equal(count(h, "\n"), 1 + 200 + 10);
    assert_non_null(strstr(h, "run,name,variant,key,step,epoch,wall_s,hybrid_s,value\n"));
    assert_non_null(strstr(h, "1,spirals-mlp,sgd,train_loss,1,0,0.001,0.001,1\n"));
    free(h);
    snprintf(p, sizeof p, "%s/r.pdf", dir);
    assert_int_equal(run(cmd_report, (const char *[]){ "report", "1", "-o", p, "--db", db, NULL }), 2);
    assert_non_null(strstr(err, ".html"));
    assert_int_equal(run(cmd_report, (const char *[]){ "report", "1", "--db", db, NULL }), 2);
    snprintf(p, sizeof p, "%s/no/such/dir/r.md", dir);
    assert_int_equal(run(cmd_report, (const char *[]){ "report", "1", "-o", p, "--db", db, NULL }), 1);
    assert_non_null(strstr(err, "cannot write"));
    /* cli_report_write, as `nnbench run --report` calls it. */
    snprintf(p, sizeof p, "%s/run-report.md", dir);
    assert_int_equal(cli_report_write(db, ids, 3, p), 0);
    assert_int_equal(access(p, F_OK), 0);
}

static void test_export_and_delete(void **st)
{
    (void)st;
    char p[700];
    snprintf(p, sizeof p, "%s/e.csv", dir);
    assert_int_equal(run(cmd_export, (const char *[]){ "export", "2", "3", "-o", p, "--db", db, NULL }), 0);
    char *h = slurp(p);
    assert_int_equal(count(h, "\n"), 1 + 2 * 210);
    free(h);
    assert_int_equal(run(cmd_export, (const char *[]){ "export", "2", "--db", db, NULL }), 2);
    /* stdin is not a terminal: refuse without --yes, delete nothing. */
    assert_int_equal(run(cmd_delete, (const char *[]){ "delete", "2", "--db", db, NULL }), 2);
    assert_non_null(strstr(err, "--yes"));
    assert_int_equal(run(cmd_delete, (const char *[]){ "delete", "2", "77", "--yes", "--db", db, NULL }), 1);
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--db", db, NULL }), 0);
    assert_non_null(strstr(out, "spirals-mlp/adam"));
    assert_int_equal(run(cmd_delete, (const char *[]){ "delete", "2", "--yes", "--db", db, NULL }), 0);
    assert_int_equal(run(cmd_list, (const char *[]){ "list", "--db", db, NULL }), 0);
    assert_null(strstr(out, "spirals-mlp/adam"));
    assert_int_equal(run(cmd_show, (const char *[]){ "show", "2", "--db", db, NULL }), 1);
}

int test_store_cli(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_show),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_compare_model),
        cmocka_unit_test(test_report_formats),
        cmocka_unit_test(test_export_and_delete),
    };
    return cmocka_run_group_tests_name("store_cli", tests, setup, teardown);
}
