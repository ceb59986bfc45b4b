/* compare1.c — the comparison of one run (store/compare.c): given its keys not at their
 * default, only those are its config rows; with all keys, those come first, marked as
 * differing, then the rest in key order (what `compare ID` and the workbench show). And
 * the Time section's pool row, from the pool figures a run of 2+ threads stores. */
#include "util.h"

#include <math.h>
#include <string.h>

#include "../../store/store.h"

static void config_rows(const store_compare *c, const char **labels, int *differs, size_t *n)
{
    *n = 0;
    for (size_t r = 0; r < c->n_rows; r++)
        if (c->rows[r].section == STORE_CMP_CONFIG) {
            labels[*n] = c->rows[r].label;
            differs[(*n)++] = c->rows[r].differs;
        }
}

/* A fresh database in a new directory (dir, for rm_rf) holding n runs named run0.., ids in id. */
static store *runs_db(char *dir, size_t cap, long long *id, int n)
{
    char path[512];
    tmp_dir(dir, cap);
    snprintf(path, sizeof path, "%s/c.db", dir);
    store *s;
    assert_int_equal(store_open(path, STORE_OPEN_CREATE, &s), STORE_OK);
    for (int i = 0; i < n; i++) {
        store_run r;
        store_run_init(&r);
        snprintf(r.name, sizeof r.name, "run%d", i);
        assert_int_equal(store_run_begin(s, &r, &id[i]), STORE_OK);
    }
    return s;
}

static void test_one_run_set_keys_first(void **st)
{
    (void)st;
    char dir[256];
    long long id;
    store *s = runs_db(dir, sizeof dir, &id, 1);
    store_kv kv[3] = { { "a.default", "1" }, { "b.set", "2" }, { "c.default", "3" } };
    assert_int_equal(store_params_put(s, id, kv, 3), STORE_OK);
    const char *set[] = { "b.set" };
    store_cmp_opts o = { .metric = "train_loss", .target = NAN, .set_keys = set, .n_set_keys = 1 };
    store_compare *c;
    assert_int_equal(store_compare_load(s, &id, 1, &o, &c), STORE_OK);
    const char *l[8];
    int d[8];
    size_t n;
    config_rows(c, l, d, &n);
    assert_int_equal(n, 1);                /* only the key not at its default */
    assert_string_equal(l[0], "b.set");
    assert_true(c->config_set_only);
    o.all_keys = 1;
    assert_int_equal(store_compare_rows(c, &o), STORE_OK);
    config_rows(c, l, d, &n);
    assert_int_equal(n, 3);
    assert_string_equal(l[0], "b.set");    /* first, marked */
    assert_int_equal(d[0], 1);
    assert_string_equal(l[1], "a.default");
    assert_int_equal(d[1], 0);
    assert_string_equal(l[2], "c.default");
    assert_int_equal(d[2], 0);
    assert_true(c->config_set_first);
    /* without the set keys (the stored file no longer loads): every key, in key order */
    o.set_keys = NULL;
    o.n_set_keys = 0;
    assert_int_equal(store_compare_rows(c, &o), STORE_OK);
    config_rows(c, l, d, &n);
    assert_int_equal(n, 3);
    assert_string_equal(l[0], "a.default");
    assert_false(c->config_set_first);
    store_compare_free(c);
    store_close(s);
    rm_rf(dir);
}

/* The cell of row `label` for run i; NULL when there is no such row. */
static const char *cell(const store_compare *c, const char *label, size_t i)
{
    for (size_t r = 0; r < c->n_rows; r++)
        if (!strcmp(c->rows[r].label, label)) return c->rows[r].cells[i];
    return NULL;
}

static void test_pool_waits_row(void **st)
{
    (void)st;
    char dir[256];
    long long id[3];
    store *s = runs_db(dir, sizeof dir, id, 3);
    /* 100 steps of 0.05 s in all, 2.1 ms of waits: 21 us a step, 4.2% of it */
    store_kv kv[4] = { { STORE_SYS_POOL_STEPS, "100" }, { STORE_SYS_POOL_STEP_S, "0.05" },
                       { STORE_SYS_POOL_JOINS, "900" }, { STORE_SYS_POOL_WAIT_S, "0.0021" } };
    assert_int_equal(store_sysinfo_put(s, id[0], kv, 4), STORE_OK);
    /* a broken record (no step time) gives no figure, as a run of 1 thread (id[2]) */
    assert_int_equal(store_sysinfo_put(s, id[1], kv + 3, 1), STORE_OK);
    store_cmp_opts o = { .metric = "train_loss", .target = NAN };
    store_compare *c;
    assert_int_equal(store_compare_load(s, id, 3, &o, &c), STORE_OK);
    assert_non_null(cell(c, "pool waits/step", 0));
    assert_string_equal(cell(c, "pool waits/step", 0), "21 us 4.2%");
    assert_string_equal(cell(c, "pool waits/step", 1), "-");
    assert_string_equal(cell(c, "pool waits/step", 2), "-");
    store_compare_free(c);
    store_close(s);
    rm_rf(dir);
}

int test_store_compare1(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_one_run_set_keys_first),
                                        cmocka_unit_test(test_pool_waits_row) };
    return cmocka_run_group_tests_name("store_compare1", tests, NULL, NULL);
}
