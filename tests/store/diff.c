/* diff.c — the op diff of two runs (store/diff.c): rows matched on name, layer and kind;
 * self time per step from each run's own step count; the shares add up to 1; rows of one
 * run only named so; sorted by contribution; ranks apart; an unprofiled run is a note;
 * JSON and CSV complete; and the same through a real database (store_diff_load). */
#include "util.h"

#include <math.h>

#include "../../store/store.h"

static prof_row row(const char *name, const char *layer, prof_kind kind, uint64_t calls, uint64_t self_ns)
{
    prof_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s", name);
    snprintf(r.layer, sizeof r.layer, "%s", layer);
    r.kind = kind;
    r.calls = calls;
    r.self_ns = r.total_ns = self_ns;
    r.flops = 1000;
    r.bytes = 4000;
    r.cycles = r.instructions = r.l1d_miss = r.l2_miss = r.l3_miss = r.fp_ops = -1;
    r.cpu_ns = r.faults = r.csw = r.task_clock_ns = r.migrations = -1;
    return r;
}

/* A comparison of two runs made by hand: what store_diff_build reads of it. */
typedef struct {
    store_compare c;
    store_run runs[2];
    char label[2][256];
} fake_cmp;

static void fake(fake_cmp *f, long steps_a, long steps_b)
{
    memset(f, 0, sizeof *f);
    store_run_init(&f->runs[0]);
    store_run_init(&f->runs[1]);
    f->runs[0].id = 1;
    f->runs[1].id = 2;
    f->runs[0].steps = steps_a;
    f->runs[1].steps = steps_b;
    snprintf(f->label[0], sizeof f->label[0], "#1 a");
    snprintf(f->label[1], sizeof f->label[1], "#2 b");
    f->c.n = 2;
    f->c.runs = f->runs;
    f->c.label = f->label;
}

static store_diff *build(fake_cmp *f, const prof_row *a, size_t na, const prof_row *b, size_t nb)
{
    const prof_row *rows[2] = { a, b };
    size_t n[2] = { na, nb };
    store_diff *d = NULL;
    assert_int_equal(store_diff_build(&f->c, 0, 1, rows, n, NULL, &d), STORE_OK);
    assert_non_null(d);
    return d;
}

static const store_diff_row *find(const store_diff *d, const char *name, const char *layer)
{
    for (size_t i = 0; i < d->n; i++) {
        const prof_row *x = d->rows[i].a ? d->rows[i].a : d->rows[i].b;
        if (!strcmp(x->name, name) && !strcmp(x->layer, layer)) return &d->rows[i];
    }
    return NULL;
}

static void test_shares_and_only_in_one(void **st)
{
    (void)st;
    fake_cmp f;
    fake(&f, 100, 100);
    /* A: 10 steps (its step row); B: 20 steps. */
    prof_row a[] = { row("step", "", PROF_STEP, 10, 1000000), row("dense.fwd", "d1", PROF_OP, 10, 5000000),
                     row("relu.fwd", "d1", PROF_OP, 10, 2000000), row("forward", "", PROF_PHASE, 10, 300000) };
    prof_row b[] = { row("forward", "", PROF_PHASE, 20, 600000), row("dense.fwd", "d1", PROF_OP, 20, 4000000),
                     row("gelu.fwd", "d1", PROF_OP, 20, 8000000), row("step", "", PROF_STEP, 20, 2000000) };
    store_diff *d = build(&f, a, 4, b, 4);
    assert_int_equal(d->steps[0], 10);
    assert_int_equal(d->steps[1], 20);
    assert_int_equal(d->n, 5);
    /* per step: A 0.1+0.5+0.2+0.03 = 0.83 ms, B 0.1+0.2+0.4+0.03 = 0.73 ms */
    assert_true(fabs(d->step_s[0] - 830e-6) < 1e-12);
    assert_true(fabs(d->step_s[1] - 730e-6) < 1e-12);
    double share = 0, delta = 0;
    for (size_t i = 0; i < d->n; i++) { share += d->rows[i].share; delta += d->rows[i].delta_s; }
    assert_true(fabs(share - 1) < 1e-12);
    assert_true(fabs(delta - d->delta_s) < 1e-15);
    const store_diff_row *relu = find(d, "relu.fwd", "d1"), *gelu = find(d, "gelu.fwd", "d1"), *dense = find(d, "dense.fwd", "d1");
    assert_non_null(relu);
    assert_non_null(gelu);
    assert_non_null(dense);
    assert_non_null(relu->a);
    assert_null(relu->b);
    assert_null(gelu->a);
    assert_non_null(gelu->b);
    assert_true(fabs(dense->delta_s - (200e-6 - 500e-6)) < 1e-12);
    char b1[96];
    assert_string_equal(store_diff_cell(d, relu, STORE_DIFF_COL_ONLY, b1, sizeof b1), "only A");
    assert_string_equal(store_diff_cell(d, gelu, STORE_DIFF_COL_ONLY, b1, sizeof b1), "only B");
    assert_string_equal(store_diff_cell(d, gelu, STORE_DIFF_COL_SELF_A, b1, sizeof b1), "-");
    assert_string_equal(store_diff_cell(d, dense, STORE_DIFF_COL_DELTA, b1, sizeof b1), "-300 us");
    assert_string_equal(store_diff_cell(d, dense, STORE_DIFF_COL_CALLS, b1, sizeof b1), "1 -> 1");
    assert_true(d->show[STORE_DIFF_COL_ONLY]);
    assert_false(d->show[STORE_DIFF_COL_IPC]);   /* no run counted cycles */
    assert_true(isnan(store_diff_value(d, gelu, STORE_DIFF_COL_CALLS, 0)));
    assert_true(fabs(store_diff_value(d, gelu, STORE_DIFF_COL_CALLS, 1) - 1) < 1e-12);
    /* sorted by |B - A|, largest first: gelu +0.4 ms, dense -0.3 ms, relu -0.2 ms, ... */
    assert_ptr_equal(&d->rows[0], gelu);
    assert_ptr_equal(&d->rows[1], dense);
    assert_ptr_equal(&d->rows[2], relu);
    for (size_t i = 1; i < d->n; i++) assert_true(fabs(d->rows[i - 1].delta_s) >= fabs(d->rows[i].delta_s));
    store_diff_free(d);
}

static void test_equal_profiles_and_ranks(void **st)
{
    (void)st;
    fake_cmp f;
    fake(&f, 7, 7);   /* no step rows: runs.steps */
    prof_row a[] = { row("dense.fwd", "d1", PROF_OP, 7, 700), row("rank1:dense.fwd", "d1", PROF_OP, 7, 1400) };
    store_diff *d = build(&f, a, 2, a, 2);
    assert_int_equal(d->steps[0], 7);
    assert_int_equal(d->n, 2);   /* rank 1's row is its own */
    assert_true(d->delta_s == 0);
    char b[96];
    for (size_t i = 0; i < d->n; i++) {
        assert_true(isnan(d->rows[i].share));
        assert_string_equal(store_diff_cell(d, &d->rows[i], STORE_DIFF_COL_SHARE, b, sizeof b), "-");
        assert_string_equal(store_diff_cell(d, &d->rows[i], STORE_DIFF_COL_DELTA, b, sizeof b), "0 s");
        assert_string_equal(store_diff_cell(d, &d->rows[i], STORE_DIFF_COL_NAME, b, sizeof b), "dense.fwd");
    }
    assert_true(d->show[STORE_DIFF_COL_RANK]);
    assert_false(d->show[STORE_DIFF_COL_ONLY]);
    assert_string_equal(d->note, "");
    store_diff_free(d);
}

static void test_unprofiled_and_formats(void **st)
{
    (void)st;
    fake_cmp f;
    fake(&f, 5, 5);
    prof_row b[] = { row("dense.fwd", "d\x1b[2J", PROF_OP, 5, 5000), row("=sum(A1)", "", PROF_OP, 5, 100) };
    store_diff *d = build(&f, NULL, 0, b, 2);
    assert_non_null(strstr(d->note, "#1 a was not profiled"));
    assert_int_equal(d->n, 2);
    char buf[96];
    assert_non_null(strstr(store_diff_cell(d, &d->rows[0], STORE_DIFF_COL_LAYER, buf, sizeof buf), "\\x1b"));
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    assert_int_equal(store_diff_csv(d, m), STORE_OK);
    fclose(m);
    size_t lines = 0;
    for (char *p = text; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 1 + d->n);
    assert_non_null(strstr(text, "\"'=sum(A1)\""));      /* the formula guard */
    assert_null(strchr(text, '\x1b'));
    free(text);
    m = open_memstream(&text, &len);
    assert_int_equal(store_diff_json(d, m), STORE_OK);
    fclose(m);
    assert_non_null(strstr(text, "\"only_in\":\"B\""));
    assert_non_null(strstr(text, "\"note\":\"#1 a was not profiled"));
    assert_null(strchr(text, '\x1b'));
    free(text);
    store_diff_free(d);
}

/* Through a database: two runs with op rows, the comparison, then the diff. */
static void test_load(void **st)
{
    (void)st;
    char dir[512], path[600];
    tmp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/d.db", dir);
    store *s;
    assert_int_equal(store_open(path, STORE_OPEN_CREATE, &s), STORE_OK);
    long long ids[2];
    for (int k = 0; k < 2; k++) {
        store_run r;
        store_run_init(&r);
        snprintf(r.name, sizeof r.name, "exp");
        snprintf(r.variant, sizeof r.variant, "%s", k ? "b" : "a");
        assert_int_equal(store_run_begin(s, &r, &ids[k]), STORE_OK);
        prof_row rows[] = { row("step", "", PROF_STEP, 4, 400), row("dense.fwd", "d1", PROF_OP, 4, k ? 4000 : 8000),
                            row(k ? "only.b" : "only.a", "", PROF_OP, 4, 40) };
        assert_int_equal(store_op_stats_put(s, ids[k], rows, 3, NULL), STORE_OK);
        r.status = STORE_RUN_FINISHED;
        r.steps = 4;
        assert_int_equal(store_run_end(s, ids[k], &r), STORE_OK);
    }
    store_compare *c;
    assert_int_equal(store_compare_load(s, ids, 2, NULL, &c), STORE_OK);
    store_diff *d;
    assert_int_equal(store_diff_load(s, c, 0, 1, &d), STORE_OK);
    assert_int_equal(d->n, 4);
    assert_int_equal(d->steps[0], 4);
    assert_true(fabs(d->delta_s - (-4000e-9 / 4)) < 1e-15);
    assert_null(find(d, "only.a", "")->b);
    assert_null(find(d, "only.b", "")->a);
    store_diff_free(d);
    assert_int_equal(store_diff_load(s, c, 0, 2, &d), STORE_EINVAL);   /* not one of the compared runs */
    assert_null(d);
    store_compare_free(c);
    store_close(s);
    rm_rf(dir);
}

int test_store_diff(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shares_and_only_in_one),
        cmocka_unit_test(test_equal_profiles_and_ranks),
        cmocka_unit_test(test_unprofiled_and_formats),
        cmocka_unit_test(test_load),
    };
    return cmocka_run_group_tests_name("store_diff", tests, NULL, NULL);
}
