/* ops_v2.c — schema v4: op_stats' cpu_ns/faults/csw columns; a v1 database (written before
 * them) still opens, keeps its rows (new columns unknown), and takes new rows with them. */
#include "util.h"

#include <sqlite3.h>

#include "../../store/internal.h"

static char dir[512];

static int setup(void **st) { (void)st; tmp_dir(dir, sizeof dir); return 0; }
static int teardown(void **st) { (void)st; rm_rf(dir); return 0; }

static void exec_ok(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK) fprintf(stderr, "sql: %s: %s\n", sql, err ? err : "?");
    sqlite3_free(err);
    assert_int_equal(rc, SQLITE_OK);
}

static void test_v1_database_migrates(void **st)
{
    (void)st;
    char p[600];
    snprintf(p, sizeof p, "%s/v1.db", dir);
    /* A database as a v1 build left it: the v1 schema, one run with one op row. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    char *v1 = strdup(store_schema_sql);       /* the schema before versions 3 and 4 */
    char *later = strstr(v1, "-- ---- version 3");
    assert_non_null(later);
    *later = 0;
    exec_ok(db, v1);
    free(v1);
    exec_ok(db, "PRAGMA user_version = 1;"
                "INSERT INTO runs(id,name,status,started) VALUES(1,'old','finished',1.0);"
                "INSERT INTO op_stats(run,name,layer,kind,calls,total_ns,self_ns,cycles) "
                "VALUES(1,'dense.fwd','dense1',0,3,3000,3000,NULL);");
    sqlite3_close(db);

    store *s;
    assert_int_equal(store_open(p, 0, &s), STORE_OK);
    store_op_row *rows;
    size_t n;
    assert_int_equal(store_op_stats_get(s, 1, -1, &rows, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].name, "dense.fwd");
    assert_int_equal(rows[0].calls, 3);
    assert_int_equal(rows[0].cpu_ns, -1); /* not measured by v1: unknown, not zero */
    assert_int_equal(rows[0].faults, -1);
    assert_int_equal(rows[0].csw, -1);
    free(rows);

    /* A reader read the v1 file as it is; a writer migrates it, and new rows keep what was
     * counted and NULL for what was not. */
    store_close(s);
    assert_int_equal(store_open(p, STORE_OPEN_WRITE, &s), STORE_OK);
    store_op_row o[2];
    memset(o, 0, sizeof o);
    for (int i = 0; i < 2; i++) {
        snprintf(o[i].name, sizeof o[i].name, "op%d", i);
        o[i].calls = 1;
        o[i].self_ns = o[i].total_ns = 1000 + i;
        o[i].cycles = o[i].instructions = o[i].l1d_miss = o[i].l2_miss = o[i].l3_miss = o[i].fp_ops = -1;
    }
    o[0].cpu_ns = 1900;
    o[0].faults = 16384;
    o[0].csw = 7;
    o[1].cpu_ns = 500;
    o[1].faults = o[1].csw = -1;
    assert_int_equal(store_op_stats_put(s, 1, o, 2, NULL), STORE_OK);
    assert_int_equal(store_op_stats_get(s, 1, -1, &rows, &n), STORE_OK);
    assert_int_equal(n, 2);
    const store_op_row *a = !strcmp(rows[0].name, "op0") ? &rows[0] : &rows[1];
    const store_op_row *b = a == &rows[0] ? &rows[1] : &rows[0];
    assert_int_equal(a->cpu_ns, 1900);
    assert_int_equal(a->faults, 16384);
    assert_int_equal(a->csw, 7);
    assert_int_equal(b->cpu_ns, 500);
    assert_int_equal(b->faults, -1);
    assert_int_equal(b->csw, -1);
    free(rows);
    store_close(s);

    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT (SELECT user_version FROM pragma_user_version), "
                                            "(SELECT count(*) FROM op_stats WHERE faults IS NULL)", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), STORE_SCHEMA_VERSION);
    assert_int_equal(sqlite3_column_int(q, 1), 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

int test_store_ops_v2(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_database_migrates),
    };
    return cmocka_run_group_tests_name("store op_stats v2", tests, setup, teardown);
}
