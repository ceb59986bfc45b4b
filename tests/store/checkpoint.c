/* checkpoint.c — the store's checkpoints and quantizations: a record comes back byte for
 * byte, only the newest two per run are kept, metrics buffered before a checkpoint are on
 * disk with it, reopening a run for resume drops what it logged after the checkpoint,
 * quantization records and their op rows round-trip, and deleting a run deletes them all. */
#include "util.h"

#include "../../store/internal.h"   /* ck_allocs: how many checkpoint buffers were made */
#include "../../store/store.h"

#include <math.h>
#include <sqlite3.h>

static long long mk_run(store *s)
{
    store_run r;
    store_run_init(&r);
    snprintf(r.name, sizeof r.name, "ck");
    long long id = 0;
    assert_int_equal(store_run_begin(s, &r, &id), STORE_OK);
    return id;
}

/* A new database NAME in a new temporary directory dir (600 bytes), its path in p (700). */
static store *open_new(char *dir, char *p, const char *name)
{
    tmp_dir(dir, 600);
    snprintf(p, 700, "%s/%s", dir, name);
    store *s = NULL;
    assert_int_equal(store_open(p, STORE_OPEN_CREATE, &s), STORE_OK);
    return s;
}

static long long count(const char *path, const char *sql)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void test_checkpoints(void **state)
{
    (void)state;
    char dir[600], p[700];
    store *s = open_new(dir, p, "ck.db");
    long long run = mk_run(s);
    store_checkpoint meta;
    void *data;
    size_t len;
    assert_int_equal(store_checkpoint_get(s, run, &meta, &data, &len), STORE_ENOTFOUND);
    assert_non_null(strstr(store_error(), "no checkpoint"));
    unsigned char rec[3000];
    for (int k = 1; k <= 4; k++) {
        for (size_t i = 0; i < sizeof rec; i++) rec[i] = (unsigned char)(i * 7 + k);
        assert_int_equal(store_metric_add(s, run, 10 * k, k, 0.1 * k, 0.1 * k, "train_loss", 1.0 / k), STORE_OK);
        assert_int_equal(store_checkpoint_put(s, run, 10 * k, k, rec, sizeof rec - (size_t)k), STORE_OK);
        /* handed to the writer: committed by the flush, with the point logged before it */
        assert_int_equal(store_flush(s), STORE_OK);
        char q[128];
        snprintf(q, sizeof q, "SELECT count(*) FROM checkpoints WHERE step=%d", 10 * k);
        assert_int_equal(count(p, q), 1);
        snprintf(q, sizeof q, "SELECT count(*) FROM metrics WHERE step=%d", 10 * k);
        assert_int_equal(count(p, q), 1);
    }
    assert_int_equal(count(p, "SELECT count(*) FROM checkpoints"), STORE_CHECKPOINTS_KEPT);
    store_checkpoint *list;
    size_t n;
    assert_int_equal(store_checkpoints_list(s, run, &list, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(list[0].step, 40);
    assert_int_equal(list[1].step, 30);
    assert_int_equal(list[0].bytes, sizeof rec - 4);
    free(list);
    assert_int_equal(store_checkpoint_get(s, run, &meta, &data, &len), STORE_OK);
    assert_int_equal(meta.step, 40);
    assert_int_equal(meta.epoch, 4);
    assert_int_equal(len, sizeof rec - 4);
    assert_memory_equal(data, rec, len);
    free(data);

    /* reopen at step 20: later points go, keys named are dropped at 20 itself */
    assert_int_equal(store_metric_add(s, run, 20, 2, 0.2, 0.2, "lr", 0.1), STORE_OK);
    assert_int_equal(store_run_set_status(s, run, STORE_RUN_CRASHED, "killed"), STORE_OK);
    const char *keys[] = { "lr", NULL };
    assert_int_equal(store_run_reopen(s, run, 20, keys), STORE_OK);
    assert_int_equal(count(p, "SELECT count(*) FROM metrics WHERE step>20"), 0);
    assert_int_equal(count(p, "SELECT count(*) FROM metrics WHERE step=20 AND key='train_loss'"), 1);
    assert_int_equal(count(p, "SELECT count(*) FROM metrics WHERE key='lr'"), 0);
    assert_int_equal(count(p, "SELECT count(*) FROM runs WHERE status='running' AND error IS NULL AND ended IS NULL"), 1);
    assert_int_equal(store_run_reopen(s, 999, 0, NULL), STORE_ENOTFOUND);

    /* a quantization and its ops */
    store_quant qr;
    memset(&qr, 0, sizeof qr);
    qr.run = run;
    qr.created = NAN;
    qr.step = 40;
    snprintf(qr.scheme, sizeof qr.scheme, "minmax");
    qr.calibrate = 100;
    snprintf(qr.kernel, sizeof qr.kernel, "avx2");
    qr.fp32_bytes = 4000;
    qr.int8_bytes = 1010;
    qr.fp32_acc = 0.9; qr.int8_acc = 0.89; qr.fp32_loss = 0.3; qr.int8_loss = NAN;
    qr.fp32_sps_b1 = 1; qr.int8_sps_b1 = 2; qr.fp32_sps_b128 = 3; qr.int8_sps_b128 = 4;
    store_quant_op ops[2] = { { .name = "gemm_s8", .layer = "dense1", .calls = 3, .total_ns = 300, .self_ns = 200 },
                              { .name = "requantize", .layer = "dense1", .calls = 3, .total_ns = 90, .self_ns = 90 } };
    long long qid = 0;
    assert_int_equal(store_quant_put(s, &qr, ops, 2, &qid), STORE_OK);
    store_quant *ql;
    assert_int_equal(store_quants_list(s, run, &ql, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ql[0].id, qid);
    assert_string_equal(ql[0].kernel, "avx2");
    assert_int_equal(ql[0].int8_bytes, 1010);
    assert_true(ql[0].int8_acc == 0.89 && isnan(ql[0].int8_loss) && ql[0].int8_sps_b128 == 4);
    free(ql);
    store_quant_op *ol;
    assert_int_equal(store_quant_ops_get(s, qid, &ol, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_string_equal(ol[0].name, "gemm_s8");   /* by self time */
    assert_int_equal(ol[1].self_ns, 90);
    free(ol);

    /* deleting the run deletes its checkpoints, quantizations and their ops */
    assert_int_equal(store_runs_delete(s, &run, 1, STORE_DELETE_FORCE), STORE_OK);
    assert_int_equal(count(p, "SELECT (SELECT count(*) FROM checkpoints) + (SELECT count(*) FROM quantizations) + "
                              "(SELECT count(*) FROM quant_ops)"), 0);
    store_close(s);
    rm_rf(dir);
}

/* A checkpoint taken while another process holds the write lock does not wait for it: it
 * is copied and handed to the writer thread, the caller goes on (the record it passed may
 * be overwritten at once), and once the lock is free the newest checkpoint lands together
 * with the metrics logged before it. The other process holds its lock until told to let go
 * (or 10 s), so a build that waits in store_checkpoint_put sees the lock gone first. */
static void test_checkpoint_off_the_caller(void **state)
{
    (void)state;
    char dir[600], p[700];
    store *s = open_new(dir, p, "cklock.db");
    long long run = mk_run(s);
    lock_holder h = lock_holder_start(p);
    enum { N = 200000 };
    unsigned char *rec = malloc(N);
    assert_non_null(rec);
    for (int k = 1; k <= 5; k++) {
        for (int i = 0; i < 100; i++)
            assert_int_equal(store_metric_add(s, run, 100 * (k - 1) + i + 1, k, 0, 0, "train_loss", 1.0 / k), STORE_OK);
        memset(rec, k, N);
        assert_int_equal(store_checkpoint_put(s, run, 100 * k, k, rec, N - (size_t)k), STORE_OK);
        memset(rec, 0xee, N); /* the caller's buffer is free again at once */
        usleep(20 * 1000);
    }
    /* still locked: neither the other process's row nor any of ours is committed */
    assert_int_equal(count(p, "SELECT count(*) FROM params WHERE key='lock'"), 0);
    assert_int_equal(count(p, "SELECT count(*) FROM checkpoints"), 0);
    lock_holder_release(&h);
    assert_int_equal(store_flush(s), STORE_OK);
    assert_int_equal(count(p, "SELECT count(*) FROM params WHERE key='lock'"), 1);
    assert_int_equal(count(p, "SELECT count(*) FROM metrics"), 500);
    /* the newest is there whole; an older one the writer had not reached was replaced */
    store_checkpoint meta;
    void *data;
    size_t len;
    assert_int_equal(store_checkpoint_get(s, run, &meta, &data, &len), STORE_OK);
    assert_int_equal(meta.step, 500);
    assert_int_equal(len, N - 5);
    memset(rec, 5, N);
    assert_memory_equal(data, rec, len);
    free(data);
    assert_true(count(p, "SELECT count(*) FROM checkpoints") <= STORE_CHECKPOINTS_KEPT);
    store_close(s);
    free(rec);
    rm_rf(dir);
}

/* Checkpoint step of run, as stored in path: len bytes, every one of them byte. */
static void assert_ck(const char *path, long long run, long step, size_t len, int byte)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT data FROM checkpoints WHERE run=?1 AND step=?2", -1, &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_int64(q, 2, step);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal((size_t)sqlite3_column_bytes(q, 0), len);
    const unsigned char *b = sqlite3_column_blob(q, 0);
    for (size_t i = 0; i < len; i++)
        if (b[i] != byte) fail_msg("step %ld: byte %zu of %zu is %d, the record put had %d", step, i, len, b[i], byte);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

/* Checkpoints of one size, each written before the next: the store copies each into the
 * buffer the previous one used (allocated once, its pages already in memory), not into a
 * new one (the copy into fresh memory was most of a checkpoint's cost on the training
 * thread). */
static void test_checkpoint_buffer_reused(void **state)
{
    (void)state;
    char dir[600], p[700];
    store *s = open_new(dir, p, "ckreuse.db");
    long long run = mk_run(s);
    enum { N = 300000 };
    unsigned char *rec = malloc(N);
    assert_non_null(rec);
    for (int k = 1; k <= 6; k++) {
        memset(rec, k, N);
        assert_int_equal(store_checkpoint_put(s, run, 10 * k, k, rec, N), STORE_OK);
        assert_int_equal(store_flush(s), STORE_OK);
    }
    assert_int_equal(s->ck_allocs, 1);
    /* a larger record (another model; above a MiB: whole 2 MiB blocks) replaces the buffer
     * once, and a smaller one after it goes into the same buffer */
    enum { BIG = 5 * N + 7 };
    unsigned char *big = malloc(BIG);
    assert_non_null(big);
    memset(big, 9, BIG);
    for (int k = 7; k <= 9; k++) {
        size_t n = k < 9 ? BIG : N / 3;
        assert_int_equal(store_checkpoint_put(s, run, 10 * k, k, big, n), STORE_OK);
        assert_int_equal(store_flush(s), STORE_OK);
    }
    assert_int_equal(s->ck_allocs, 2);
    assert_ck(p, run, 80, BIG, 9);
    assert_ck(p, run, 90, N / 3, 9);
    store_close(s);
    free(big);
    free(rec);
    rm_rf(dir);
}

/* The writer is held (NNBENCH_TEST_HOLD_CKPT_WRITE) right after it took checkpoint 1, before
 * it reads a byte of it; three more are handed over meanwhile, the caller's own buffer
 * overwritten after each. None may be copied into the buffer the writer holds: checkpoint 1
 * lands as it was put, the newest lands whole, the ones in between were replaced, and no
 * more than three buffers were ever made. */
static void test_checkpoint_writer_held(void **state)
{
    (void)state;
    char dir[600], p[700], hold[700], held[720];
    store *s = open_new(dir, p, "ckheld.db");
    long long run = mk_run(s);
    snprintf(hold, sizeof hold, "%s/go", dir);
    snprintf(held, sizeof held, "%s.held", hold);
    setenv("NNBENCH_TEST_HOLD_CKPT_WRITE", hold, 1);
    enum { N = 100000 };
    unsigned char *rec = malloc(N);
    assert_non_null(rec);
    for (int k = 1; k <= 4; k++) {
        memset(rec, k, N);
        assert_int_equal(store_metric_add(s, run, 100 * k, k, 0, 0, "train_loss", 1.0 / k), STORE_OK);
        assert_int_equal(store_checkpoint_put(s, run, 100 * k, k, rec, N), STORE_OK);
        memset(rec, 0xee, N);
        if (k == 1)   /* the writer has taken checkpoint 1 and waits */
            for (int i = 0; i < 1000 && access(held, F_OK); i++) usleep(10 * 1000);
        assert_int_equal(access(held, F_OK), 0);
    }
    assert_int_equal(count(p, "SELECT count(*) FROM checkpoints"), 0);
    FILE *f = fopen(hold, "w");   /* let go */
    assert_non_null(f);
    fclose(f);
    assert_int_equal(store_flush(s), STORE_OK);
    unsetenv("NNBENCH_TEST_HOLD_CKPT_WRITE");
    assert_true(s->ck_allocs <= 3);
    assert_ck(p, run, 100, N, 1);
    assert_ck(p, run, 400, N, 4);
    assert_int_equal(count(p, "SELECT count(*) FROM checkpoints WHERE step IN (200, 300)"), 0);
    assert_int_equal(count(p, "SELECT count(*) FROM metrics"), 4);   /* every point before the last one */
    store_close(s);
    free(rec);
    rm_rf(dir);
}

/* Two resumes of one crashed run both pass their first status check; the second to reopen
 * finds the run running (or already finished again) and must change nothing: not the
 * status, not the points the first one logged. The reopen reads the status inside its own
 * write transaction. */
static void test_reopen_only_resumable(void **state)
{
    (void)state;
    char dir[600], p[700];
    store *s = open_new(dir, p, "reopen.db");
    long long run = mk_run(s);
    for (int k = 1; k <= 5; k++)
        assert_int_equal(store_metric_add(s, run, 10 * k, k, 0.1 * k, 0.1 * k, "train_loss", 1.0 / k), STORE_OK);
    assert_int_equal(store_flush(s), STORE_OK);
    static const struct { store_run_status st; const char *name; } cases[] = {
        { STORE_RUN_FINISHED, "finished" }, { STORE_RUN_RUNNING, "running" }, { STORE_RUN_DIVERGED, "diverged" } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(store_run_set_status(s, run, cases[i].st, NULL), STORE_OK);
        assert_int_equal(store_run_reopen(s, run, 20, NULL), STORE_EINVAL);
        char want[64];
        snprintf(want, sizeof want, "is already %s", cases[i].name);
        assert_non_null(strstr(store_error(), want));
        assert_non_null(strstr(store_error(), "nothing resumed"));
        char q[128];
        snprintf(q, sizeof q, "SELECT count(*) FROM runs WHERE status='%s'", cases[i].name);
        assert_int_equal(count(p, q), 1);
        assert_int_equal(count(p, "SELECT count(*) FROM metrics"), 5);   /* none dropped */
    }
    /* crashed, interrupted and failed runs are reopened */
    const store_run_status ok[] = { STORE_RUN_CRASHED, STORE_RUN_INTERRUPTED, STORE_RUN_FAILED };
    for (int i = 0; i < 3; i++) {
        assert_true(store_run_resumable(ok[i]));
        assert_int_equal(store_run_set_status(s, run, ok[i], "stopped"), STORE_OK);
        assert_int_equal(store_run_reopen(s, run, 50 - 10 * i, NULL), STORE_OK);
        assert_int_equal(count(p, "SELECT count(*) FROM runs WHERE status='running'"), 1);
    }
    assert_int_equal(count(p, "SELECT count(*) FROM metrics"), 3);   /* those after step 30 dropped */
    assert_int_equal(store_run_reopen(s, 999, 0, NULL), STORE_ENOTFOUND);
    store_close(s);
    rm_rf(dir);
}

int test_store_checkpoint(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoints),
        cmocka_unit_test(test_checkpoint_off_the_caller),
        cmocka_unit_test(test_checkpoint_buffer_reused),
        cmocka_unit_test(test_checkpoint_writer_held),
        cmocka_unit_test(test_reopen_only_resumable),
    };
    return cmocka_run_group_tests_name("store_checkpoint", tests, NULL, NULL);
}
