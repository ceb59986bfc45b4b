/* perf.c — a stored run's performance context (store/perf.c): the calibration kept in
 * system_info when the run started gives the op table's "% bw" and "bound" and the ridge
 * line; a run stored before those keys (an old database) shows "-" in both columns and
 * says why; the warnings come from the stored rows and facts, through a real database. */
#include "util.h"

#include <math.h>

#include "../../store/store.h"

static prof_row row(const char *name, const char *layer, prof_kind kind, uint64_t total_ns)
{
    prof_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s", name);
    snprintf(r.layer, sizeof r.layer, "%s", layer);
    r.kind = kind;
    r.calls = 10;
    r.self_ns = r.total_ns = total_ns;
    r.cycles = r.instructions = r.l1d_miss = r.l2_miss = r.l3_miss = r.fp_ops = -1;
    r.cpu_ns = r.faults = r.csw = r.task_clock_ns = r.migrations = -1;
    return r;
}

static void kv(store_kv *o, const char *key, const char *value)
{
    snprintf(o->key, sizeof o->key, "%s", key);
    snprintf(o->value, sizeof o->value, "%s", value);
}

/* One run written as the runner writes it: rows, a profile, and the system facts given. */
static long long put_run(store *s, const store_kv *sys, size_t nsys)
{
    store_run r;
    store_run_init(&r);
    snprintf(r.name, sizeof r.name, "perf");
    r.threads = 2;
    long long id;
    assert_int_equal(store_run_begin(s, &r, &id), STORE_OK);
    if (nsys) assert_int_equal(store_sysinfo_put(s, id, sys, nsys), STORE_OK);
    /* a GEMM at 16 FLOP/B and 1 GB/s, waiting threads (cpu 0.5 of 2); data.wait 10% */
    prof_row rows[] = { row("step", "", PROF_STEP, 2000000), row("dense.fwd", "d1", PROF_OP, 1000000),
                        row("data.wait", "", PROF_PHASE, 200000) };
    rows[0].self_ns = 800000;
    rows[1].flops = 16000000;
    rows[1].bytes = 1000000;
    rows[1].cpu_ns = 500000;
    store_profile p;
    memset(&p, 0, sizeof p);
    p.total_self_ns = 2000000;
    assert_int_equal(store_op_stats_put(s, id, rows, 3, &p), STORE_OK);
    return id;
}

/* What show, the reports and the Profile tab compute from a stored run. */
typedef struct {
    prof_table t;
    store_op_row *ops, *all;
    size_t n_ops, n_all;
    store_run_perf pf;
    char warn[1024], line[400], bw[32], bound[32];
} shown;

static void show_run(store *s, long long id, shown *o)
{
    memset(o, 0, sizeof *o);
    store_run r;
    store_run_init(&r);
    store_kv *sys = NULL;
    size_t ns = 0;
    store_profile p;
    assert_int_equal(store_run_get(s, id, &r), STORE_OK);
    assert_int_equal(store_sysinfo_get(s, id, &sys, &ns), STORE_OK);
    assert_int_equal(store_profile_get(s, id, &p), STORE_OK);
    assert_int_equal(store_op_stats_get(s, id, 0, &o->ops, &o->n_ops), STORE_OK);
    assert_int_equal(store_op_stats_get(s, id, -1, &o->all, &o->n_all), STORE_OK);
    store_run_perf_get(&r, sys, ns, &p, &o->pf);
    store_op_table_init(&o->t, o->ops, o->n_ops, &p, &o->pf);
    store_run_warnings(o->all, o->n_all, &p, &o->pf, o->warn, sizeof o->warn);
    store_run_perf_line(&o->t, &o->pf, o->line, sizeof o->line);
    assert_int_equal(o->n_ops, 1);
    prof_table_cell(&o->t, &o->ops[0], PROF_COL_BW_PCT, o->bw, sizeof o->bw);
    prof_table_cell(&o->t, &o->ops[0], PROF_COL_BOUND, o->bound, sizeof o->bound);
    free(sys);
    store_run_clear(&r);
}

static void shown_free(shown *o)
{
    free(o->ops);
    free(o->all);
}

/* A new database in a new directory (dir, for rm_rf). */
static store *new_db(char *dir, size_t cap)
{
    char path[512];
    tmp_dir(dir, cap);
    snprintf(path, sizeof path, "%s/p.db", dir);
    store *s;
    assert_int_equal(store_open(path, STORE_OPEN_CREATE, &s), STORE_OK);
    return s;
}

static void test_calibration_stored_with_run(void **st)
{
    (void)st;
    char dir[256];
    store *s = new_db(dir, sizeof dir);
    store_kv sys[4];
    kv(&sys[0], STORE_SYS_CALIB_PEAK, "100");
    kv(&sys[1], STORE_SYS_CALIB_BW, "20");
    kv(&sys[2], "blas_core", "Haswell");
    kv(&sys[3], STORE_SYS_CPU_ISA, "avx2");
    long long id = put_run(s, sys, 4);
    shown o;
    show_run(s, id, &o);
    assert_true(fabs(o.pf.peak_gflops - 100) < 1e-9);
    assert_true(fabs(o.pf.bw_gbs - 20) < 1e-9);
    assert_true(o.t.show[PROF_COL_BW_PCT] && o.t.show[PROF_COL_BOUND]);
    assert_string_equal(o.bw, "5.0%");             /* 1 GB/s of 20 */
    assert_string_equal(o.bound, "compute");       /* 16 FLOP/B above the ridge at 5 */
    assert_non_null(strstr(o.line, "ridge point 5 FLOP/B = 100.0 GFLOP/s peak / 20.0 GB/s"));
    /* the GEMM's waiting threads and the data wait; the core matches the ISA */
    assert_non_null(strstr(o.warn, "dense.fwd: cpu 0.50 below 1 with a 2-thread GEMM"));
    assert_non_null(strstr(o.warn, "data.wait is 10.0% of the steps"));
    assert_null(strstr(o.warn, "BLAS core"));
    shown_free(&o);
    /* a weaker core than the stored ISA */
    kv(&sys[3], STORE_SYS_CPU_ISA, "avx512");
    id = put_run(s, sys, 4);
    show_run(s, id, &o);
    assert_non_null(strstr(o.warn, "the BLAS core Haswell is weaker than this CPU (avx512)"));
    shown_free(&o);
    store_close(s);
    rm_rf(dir);
}

/* A run from before the keys (or an uncalibrated machine): the columns stay, with "-". */
static void test_old_run_shows_dash(void **st)
{
    (void)st;
    char dir[256];
    store *s = new_db(dir, sizeof dir);
    store_kv sys[2];
    kv(&sys[0], "blas_core", "Haswell");
    kv(&sys[1], STORE_SYS_CALIB_BW, "garbage");   /* not a number: as absent */
    long long id = put_run(s, sys, 2);
    shown o;
    show_run(s, id, &o);
    assert_true(o.pf.bw_gbs == 0);
    assert_true(o.t.show[PROF_COL_INTENSITY] && o.t.show[PROF_COL_BW_PCT] && o.t.show[PROF_COL_BOUND]);
    assert_string_equal(o.bw, "-");
    assert_string_equal(o.bound, "-");
    assert_non_null(strstr(o.line, "% bw, bound: - (no memory bandwidth stored with this run"));
    assert_null(strstr(o.warn, "BLAS core"));     /* no ISA stored: no guess */
    shown_free(&o);
    store_close(s);
    rm_rf(dir);
}

int test_store_perf(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calibration_stored_with_run),
        cmocka_unit_test(test_old_run_shows_dash),
    };
    return cmocka_run_group_tests_name("store_perf", tests, NULL, NULL);
}
