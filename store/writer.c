/* writer.c — metric points, solver events and checkpoints: buffered by the caller (the
 * training thread) and written by a thread of the store's own on a connection of its own, so
 * that waiting for the disk or for another process's write lock is never training time. A
 * point waits at most STORE_FLUSH_MS / 2 before its transaction starts; a checkpoint starts
 * one at once, and is committed in the same transaction as every point buffered before it. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WAIT_NS ((uint64_t)STORE_FLUSH_MS * 500000u)   /* half of STORE_FLUSH_MS */
#define RETRY_NS ((uint64_t)STORE_FLUSH_MS * 1000000u) /* after a failed write */

/* ---- buffers (all under s->mu) ----------------------------------------------------- */

static store_progress *progress_of(store *s, long long run)
{
    for (int i = 0; i < s->n_prog; i++)
        if (s->prog[i].run == run) return &s->prog[i];
    return NULL;
}

static int key_index(store *s, const char *key)
{
    for (int i = s->n_keys - 1; i >= 0; i--)
        if (!strcmp(s->keys[i], key)) return i;
    if (s->n_keys == STORE_MAX_KEYS)
        return store_fail(STORE_EINVAL, "too many distinct metric keys (max %d) at '%s'",
                          STORE_MAX_KEYS, key);
    if (!(s->keys[s->n_keys] = strdup(key))) return store_fail(STORE_ENOMEM, "out of memory");
    return s->n_keys++;
}

static int is_gone(const store *s, long long run)
{
    for (int i = 0; i < s->n_gone; i++)
        if (s->gone[i] == run) return 1;
    return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static void *writer_main(void *arg);

/* Checks before buffering a point of run (s->mu held); starts the writer on first use. */
static int before_add(store *s, long long run, const char *what)
{
    if (is_gone(s, run))
        return store_fail(STORE_ENOTFOUND, "%s: run %lld was deleted from %s while it was being "
                          "written (nnbench delete --force); nothing more of it is stored", what, run, s->path);
    if (s->werr && s->buf.n_pts + s->buf.n_solves >= STORE_MAX_PENDING)
        return store_fail(s->werr, "%s: %zu points wait in memory because %s cannot be written: %s",
                          what, s->buf.n_pts + s->buf.n_solves, s->path, s->werr_msg);
    if (s->writer_on) return STORE_OK;
    int st = store_connect_rw(s, &s->wdb);
    if (st) return st;
    int rc = prof_thread_create(&s->writer, NULL, writer_main, s);
    if (rc) {
        sqlite3_close_v2(s->wdb);
        s->wdb = NULL;
        return store_fail(STORE_ENOMEM, "%s: cannot start the store's writer thread: %s", what, strerror(rc));
    }
    s->writer_on = 1;
    return STORE_OK;
}

/* After buffering (s->mu held): wakes the writer for its timer or a full batch. */
static void after_add(store *s)
{
    size_t n = s->buf.n_pts + s->buf.n_solves;
    if (!s->first_ns) {
        s->first_ns = store_now_ns();
        pthread_cond_signal(&s->work);
    } else if (n == STORE_FLUSH_POINTS) {
        pthread_cond_signal(&s->work);
    }
}

/* Buffers one point (s->mu held, before_add passed). */
static int add_point(store *s, long long run, long step, int epoch, double wall_s, double hybrid_s,
                     const char *key, double value)
{
    if (!key || !*key) return store_fail(STORE_EINVAL, "metric without a key at step %ld", step);
    int k = key_index(s, key);
    if (k >= 0 && grow((void **)&s->buf.pts, &s->buf.cap_pts, s->buf.n_pts + 1, sizeof *s->buf.pts))
        k = store_fail(STORE_ENOMEM, "out of memory buffering metrics");
    if (k < 0) return k;
    s->buf.pts[s->buf.n_pts++] = (store_point){ run, step, epoch, k, wall_s, hybrid_s, value };
    store_progress *p = progress_of(s, run);
    if (p) {
        p->dirty = 1;
        if (step > p->steps) p->steps = step;
        if (epoch > p->epoch) p->epoch = epoch;
        if (isfinite(wall_s)) p->wall = wall_s;
        if (isfinite(hybrid_s)) p->hybrid = hybrid_s;
        if (!strcmp(key, "train_loss")) {
            p->train_loss = value;
            if (isfinite(value) && !(value >= p->best_train_loss)) p->best_train_loss = value;
        } else if (!strcmp(key, "test_loss")) {
            p->test_loss = value;
        } else if (!strcmp(key, "test_acc")) {
            p->test_acc = value;
            if (isfinite(value) && !(value <= p->best_test_acc)) p->best_test_acc = value;
        } else if (!strcmp(key, "samples_per_s")) {
            p->sps = value;
        }
    }
    return STORE_OK;
}

int store_metric_add(store *s, long long run, long step, int epoch, double wall_s,
                     double hybrid_s, const char *key, double value)
{
    return store_metrics_add(s, run, step, epoch, wall_s, hybrid_s, &key, &value, 1);
}

int store_metrics_add(store *s, long long run, long step, int epoch, double wall_s,
                      double hybrid_s, const char *const *keys, const double *values, size_t n)
{
    if (s->readonly)
        return store_fail(STORE_EREADONLY, "storing a metric: database %s was opened read-only", s->path);
    pthread_mutex_lock(&s->mu);
    int st = before_add(s, run, "storing a metric");
    for (size_t i = 0; i < n && !st; i++) st = add_point(s, run, step, epoch, wall_s, hybrid_s, keys[i], values[i]);
    if (!st) after_add(s);   /* one record: the writer sees it whole */
    pthread_mutex_unlock(&s->mu);
    return st;
}

int store_solver_event_add(store *s, long long run, const store_solver_event *ev)
{
    if (s->readonly)
        return store_fail(STORE_EREADONLY, "storing a solver event: database %s was opened read-only", s->path);
    pthread_mutex_lock(&s->mu);
    int st = before_add(s, run, "storing a solver event");
    if (!st && grow((void **)&s->buf.solves, &s->buf.cap_solves, s->buf.n_solves + 1, sizeof *s->buf.solves))
        st = store_fail(STORE_ENOMEM, "out of memory buffering solver events");
    if (st) { pthread_mutex_unlock(&s->mu); return st; }
    s->buf.solves[s->buf.n_solves++] = (store_pending_solve){ run, *ev };
    after_add(s);
    pthread_mutex_unlock(&s->mu);
    return STORE_OK;
}

/* Checkpoint buffers of CK_HUGE bytes or more are whole 2 MiB blocks of their own, marked
 * for transparent huge pages where the kernel has them: the first copy into a fresh one
 * then faults once per 2 MiB instead of once per 4 KiB page (a fresh 1.8 MB buffer: ~460
 * faults, 9 ms of training-thread CPU on the loaded 2-core VM; 0.3-0.6 ms in huge pages).
 * Smaller ones come from malloc. The size alone says which (ck_free_buf). */
#define CK_HUGE ((size_t)1 << 20)
#define CK_BLOCK ((size_t)2 << 20)

static unsigned char *ck_alloc(size_t len, size_t *cap)
{
    if (len < CK_HUGE) {
        *cap = len;
        return malloc(len ? len : 1);
    }
    size_t n = (len + CK_BLOCK - 1) / CK_BLOCK * CK_BLOCK;
    /* one block more than needed, then the unaligned ends unmapped: huge pages need 2 MiB
     * alignment */
    unsigned char *m = mmap(NULL, n + CK_BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    size_t head = (CK_BLOCK - (uintptr_t)m % CK_BLOCK) % CK_BLOCK;
    if (head) munmap(m, head);
    munmap(m + head + n, CK_BLOCK - head);
#ifdef MADV_HUGEPAGE
    madvise(m + head, n, MADV_HUGEPAGE);   /* advice only: without THP, ordinary pages */
#endif
    *cap = n;
    return m + head;
}

static void ck_free_buf(unsigned char *data, size_t cap)
{
    if (!data) return;
    if (cap < CK_HUGE) free(data);
    else munmap(data, cap);
}

/* A buffer that no record is in any more goes back to the free ones (s->mu held). */
static void ck_release(store *s, unsigned char *data, size_t cap)
{
    if (!data) return;
    if (s->n_ck_free < STORE_CKPT_BUFS) s->ck_free[s->n_ck_free++] = (store_ckbuf){ data, cap };
    else ck_free_buf(data, cap);
}

/* A free buffer for len bytes (s->mu held): one large enough if there is one, else any
 * (the caller grows it), else none. */
static store_ckbuf ck_take(store *s, size_t len)
{
    if (!s->n_ck_free) return (store_ckbuf){ NULL, 0 };
    int k = 0;
    for (int i = 0; i < s->n_ck_free; i++)
        if (s->ck_free[i].cap >= len) { k = i; break; }
    store_ckbuf b = s->ck_free[k];
    s->ck_free[k] = s->ck_free[--s->n_ck_free];
    return b;
}

/* A checkpoint is copied into a free buffer of the store's, then waits in buf.ck for the
 * writer; the writer gives the buffer back once the record is committed, so from the
 * second checkpoint on the copy lands in memory already paged in (a fresh 1.8 MB buffer
 * costs ~460 page faults on the training thread). The caller only ever writes into a
 * buffer taken from the free ones, never into the one the writer is reading (spare.ck).
 * One waiting record per store: a newer checkpoint of the same run replaces one that was
 * not written yet (the writer was behind, e.g. another process held the write lock) and
 * its buffer is free again, so at most three buffers exist (copying, waiting, being
 * written) and the training thread never waits for the database. */
int store_checkpoint_put(store *s, long long run, long step, int epoch, const void *data, size_t len)
{
    if (s->readonly) return store_fail(STORE_EREADONLY, "storing a checkpoint: %s was opened read-only", s->path);
    pthread_mutex_lock(&s->mu);
    int other = s->buf.ck.full && s->buf.ck.run != run;
    pthread_mutex_unlock(&s->mu);
    /* Only a record of the same run may be replaced: another run's is written first. */
    int st = other ? store_flush(s) : STORE_OK;
    if (st) return st;
    pthread_mutex_lock(&s->mu);
    st = before_add(s, run, "storing a checkpoint");
    store_ckbuf b = st ? (store_ckbuf){ NULL, 0 } : ck_take(s, len);
    if (!st && b.cap < len) s->ck_allocs++;
    pthread_mutex_unlock(&s->mu);
    if (!st && b.cap < len) {   /* its old bytes are not needed: no realloc copy */
        ck_free_buf(b.data, b.cap);
        if (!(b.data = ck_alloc(len, &b.cap))) {
            b.cap = 0;
            st = store_fail(STORE_ENOMEM, "storing a checkpoint: out of memory for a copy of %zu bytes", len);
        }
    }
    if (!st && len) memcpy(b.data, data, len);
    pthread_mutex_lock(&s->mu);
    if (!st) {
        store_pending_ckpt *c = &s->buf.ck;
        ck_release(s, c->data, c->cap);   /* replaced before the writer reached it */
        *c = (store_pending_ckpt){ .full = 1, .run = run, .step = step, .epoch = epoch,
                                   .created = store_unix_now(), .data = b.data, .len = len, .cap = b.cap };
        pthread_cond_signal(&s->work);
    } else {
        ck_release(s, b.data, b.cap);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* ---- the writer's transaction (no lock held: the batch is the writer's alone) ------- */

static int prepare_writers(store *s)
{
    sqlite3 *db = s->wdb;
    int rc = SQLITE_OK;
    if (!s->ins_metric)
        rc = sqlite3_prepare_v3(db, "INSERT OR REPLACE INTO metrics(run,step,epoch,wall,hybrid,key,value) "
                                "VALUES(?1,?2,?3,?4,?5,?6,?7)", -1, SQLITE_PREPARE_PERSISTENT,
                                &s->ins_metric, NULL);
    if (rc == SQLITE_OK && !s->ins_solver)
        rc = sqlite3_prepare_v3(db, "INSERT INTO solver_events(run,step,block,n,nnz_per_row,"
                                "kappa_fro,kappa_lapack,kappa_gersh,kappa_exact,kappa_used,est_ns,route,"
                                "pred_classical_ns,pred_quantum_ns,measured_classical_ns,"
                                "simulated_quantum_ns,residual,shift,shift_raised) VALUES(?1,?2,?3,?4,?5,"
                                "?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)", -1,
                                SQLITE_PREPARE_PERSISTENT, &s->ins_solver, NULL);
    if (rc == SQLITE_OK && !s->upd_progress)
        rc = sqlite3_prepare_v3(db, "UPDATE runs SET steps=?2,epochs=?3,wall_s=?4,hybrid_s=?5,"
                                "final_train_loss=?6,best_train_loss=?7,final_test_loss=?8,"
                                "final_test_acc=?9,best_test_acc=?10,samples_per_s=?11 "
                                "WHERE id=?1 AND status='running'", -1, SQLITE_PREPARE_PERSISTENT,
                                &s->upd_progress, NULL);
    if (rc == SQLITE_OK && !s->ins_ckpt)
        rc = sqlite3_prepare_v3(db, "INSERT OR REPLACE INTO checkpoints(run,step,epoch,created,bytes,data) "
                                "VALUES(?1,?2,?3,?4,?5,?6)", -1, SQLITE_PREPARE_PERSISTENT, &s->ins_ckpt, NULL);
    if (rc == SQLITE_OK && !s->del_ckpt)
        rc = sqlite3_prepare_v3(db, "DELETE FROM checkpoints WHERE run=?1 AND step NOT IN "
                                "(SELECT step FROM checkpoints WHERE run=?1 ORDER BY step DESC LIMIT ?2)", -1,
                                SQLITE_PREPARE_PERSISTENT, &s->del_ckpt, NULL);
    if (rc == SQLITE_OK && !s->run_exists)
        rc = sqlite3_prepare_v3(db, "SELECT 1 FROM runs WHERE id=?1", -1, SQLITE_PREPARE_PERSISTENT,
                                &s->run_exists, NULL);
    return rc == SQLITE_OK ? STORE_OK : store_sql_fail_on(s, db, rc, "preparing writes");
}

/* Which runs of a batch still exist (inside the write transaction): a run deleted while it
 * was written (delete --force) loses its remaining points instead of leaving orphans. */
typedef struct {
    long long run[32];
    int ok[32];
    int n;
} run_cache;

static int run_alive(store *s, run_cache *c, long long run, long long *gone, int *n_gone, int *st)
{
    for (int i = 0; i < c->n; i++)
        if (c->run[i] == run) return c->ok[i];
    sqlite3_bind_int64(s->run_exists, 1, run);
    int rc = sqlite3_step(s->run_exists);
    sqlite3_reset(s->run_exists);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) { *st = store_sql_fail_on(s, s->wdb, rc, "storing metrics"); return 0; }
    int ok = rc == SQLITE_ROW;
    if (!ok && *n_gone < STORE_MAX_GONE) gone[(*n_gone)++] = run;
    if (c->n < 32) { c->run[c->n] = run; c->ok[c->n++] = ok; }
    return ok;
}

static int write_batch(store *s, const store_batch *b, long long *gone, int *n_gone)
{
    int st = prepare_writers(s);
    if (st) return st;
    if ((st = store_txn_begin_on(s, s->wdb))) return st;
    run_cache cache = { .n = 0 };
    sqlite3_stmt *m = s->ins_metric;
    for (size_t i = 0; i < b->n_pts && !st; i++) {
        const store_point *p = &b->pts[i];
        if (!run_alive(s, &cache, p->run, gone, n_gone, &st)) continue;
        sqlite3_bind_int64(m, 1, p->run);
        sqlite3_bind_int64(m, 2, p->step);
        sqlite3_bind_int(m, 3, p->epoch);
        store_bind_real(m, 4, p->wall);
        store_bind_real(m, 5, p->hybrid);
        sqlite3_bind_text(m, 6, s->keys[p->key], -1, SQLITE_STATIC);
        store_bind_real(m, 7, p->value);
        st = store_step_done(s, s->wdb, m, "storing metrics");
    }
    sqlite3_stmt *v = s->ins_solver;
    for (size_t i = 0; i < b->n_solves && !st; i++) {
        const store_solver_event *e = &b->solves[i].ev;
        if (!run_alive(s, &cache, b->solves[i].run, gone, n_gone, &st)) continue;
        sqlite3_bind_int64(v, 1, b->solves[i].run);
        sqlite3_bind_int64(v, 2, e->step);
        sqlite3_bind_int(v, 3, e->block);
        sqlite3_bind_int(v, 4, e->n);
        store_bind_real(v, 5, e->nnz_per_row);
        store_bind_real(v, 6, e->kappa_fro);
        store_bind_real(v, 7, e->kappa_lapack);
        store_bind_real(v, 8, e->kappa_gersh);
        store_bind_real(v, 9, e->kappa_exact);
        store_bind_real(v, 10, e->kappa_used);
        store_bind_real(v, 11, e->est_ns);
        sqlite3_bind_int(v, 12, e->route);
        store_bind_real(v, 13, e->pred_classical_ns);
        store_bind_real(v, 14, e->pred_quantum_ns);
        store_bind_real(v, 15, e->measured_classical_ns);
        store_bind_real(v, 16, e->simulated_quantum_ns);
        store_bind_real(v, 17, e->residual);
        store_bind_real(v, 18, e->shift);
        sqlite3_bind_int(v, 19, e->shift_raised);
        st = store_step_done(s, s->wdb, v, "storing solver events");
    }
    const store_pending_ckpt *c = &b->ck;
    if (c->full && !st && run_alive(s, &cache, c->run, gone, n_gone, &st)) {
        sqlite3_stmt *q = s->ins_ckpt;
        sqlite3_bind_int64(q, 1, c->run);
        sqlite3_bind_int64(q, 2, c->step);
        sqlite3_bind_int(q, 3, c->epoch);
        sqlite3_bind_double(q, 4, c->created);
        sqlite3_bind_int64(q, 5, (sqlite3_int64)c->len);
        sqlite3_bind_blob64(q, 6, c->data ? (const void *)c->data : "", (sqlite3_uint64)c->len, SQLITE_STATIC);
        st = store_step_done(s, s->wdb, q, "storing a checkpoint");
        sqlite3_clear_bindings(q);
        if (!st) {
            q = s->del_ckpt;
            sqlite3_bind_int64(q, 1, c->run);
            sqlite3_bind_int(q, 2, STORE_CHECKPOINTS_KEPT);
            st = store_step_done(s, s->wdb, q, "dropping old checkpoints");
        }
    }
    sqlite3_stmt *u = s->upd_progress;
    for (int i = 0; i < b->n_prog && !st; i++) {
        const store_progress *p = &b->prog[i];
        sqlite3_bind_int64(u, 1, p->run);
        store_bind_count(u, 2, p->steps);
        store_bind_count(u, 3, p->epoch < 0 ? -1 : p->epoch + 1);
        store_bind_real(u, 4, p->wall);
        store_bind_real(u, 5, p->hybrid);
        store_bind_real(u, 6, p->train_loss);
        store_bind_real(u, 7, p->best_train_loss);
        store_bind_real(u, 8, p->test_loss);
        store_bind_real(u, 9, p->test_acc);
        store_bind_real(u, 10, p->best_test_acc);
        store_bind_real(u, 11, p->sps);
        st = store_step_done(s, s->wdb, u, "updating run progress");
    }
    if (st) { store_txn_rollback_on(s->wdb); return st; }
    return store_txn_commit_on(s, s->wdb);
}

/* ---- the writer thread -------------------------------------------------------------- */

/* Moves the filling buffer (and the dirty progress rows) into spare (s->mu held). */
static void take_batch(store *s)
{
    store_batch t = s->spare;
    s->spare = s->buf;
    s->buf = t;
    s->buf.n_pts = s->buf.n_solves = 0;
    s->buf.ck.full = 0;
    s->spare.n_prog = 0;
    for (int i = 0; i < s->n_prog; i++)
        if (s->prog[i].dirty) {
            s->spare.prog[s->spare.n_prog++] = s->prog[i];
            s->prog[i].dirty = 0;
        }
    s->first_ns = 0;
}

/* A failed batch goes back in front of what was buffered meanwhile (s->mu held). */
static void put_back(store *s)
{
    store_batch *b = &s->spare, *f = &s->buf;
    for (int i = 0; i < b->n_prog; i++) {
        store_progress *p = progress_of(s, b->prog[i].run);
        if (p) p->dirty = 1;
    }
    if (grow((void **)&b->pts, &b->cap_pts, b->n_pts + f->n_pts, sizeof *b->pts) ||
        grow((void **)&b->solves, &b->cap_solves, b->n_solves + f->n_solves, sizeof *b->solves))
        return; /* out of memory: the failed batch is lost, the newer points are kept */
    /* Its checkpoint waits again unless a newer one came meanwhile (then it is dropped). */
    if (f->ck.full) {
        store_pending_ckpt t = b->ck;
        b->ck = f->ck;
        f->ck = t;
    }
    if (f->n_pts) memcpy(b->pts + b->n_pts, f->pts, f->n_pts * sizeof *f->pts);
    if (f->n_solves) memcpy(b->solves + b->n_solves, f->solves, f->n_solves * sizeof *f->solves);
    b->n_pts += f->n_pts;
    b->n_solves += f->n_solves;
    store_batch t = *f;
    *f = *b;
    *b = t;
    if (f->n_pts || f->n_solves) s->first_ns = store_now_ns();
}

static void wait_until(store *s, uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u) };
    pthread_cond_timedwait(&s->work, &s->mu, &ts);
}

void store_test_hold(const char *var)
{
    const char *path = getenv(var);
    if (!path || !*path) return;
    char held[1100];
    snprintf(held, sizeof held, "%s.held", path);
    FILE *f = fopen(held, "w");
    if (f) fclose(f);
    struct timespec tick = { 0, 10000000 };
    for (int i = 0; i < 6000 && access(path, F_OK); i++) nanosleep(&tick, NULL);
}

static void *writer_main(void *arg)
{
    store *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int pending = s->buf.n_pts || s->buf.n_solves || s->buf.ck.full;
        uint64_t want = s->req_gen;
        if (!pending) {
            if (s->done_gen != want) {
                s->done_gen = want;
                s->werr = STORE_OK;
                pthread_cond_broadcast(&s->done);
            }
            if (s->stop) break;
            pthread_cond_wait(&s->work, &s->mu);
            continue;
        }
        int asked = want != s->done_gen || s->stop;
        uint64_t due = s->buf.ck.full ? 0 : s->first_ns + WAIT_NS; /* a checkpoint goes at once */
        if (s->retry_ns > due) due = s->retry_ns;
        if (!asked && s->buf.n_pts + s->buf.n_solves < STORE_FLUSH_POINTS && store_now_ns() < due) {
            wait_until(s, due);
            continue;
        }
        int stopping = s->stop;
        take_batch(s);
        pthread_mutex_unlock(&s->mu);
        /* tests/store/checkpoint.c: the checkpoint's buffer is the writer's from here until the
         * commit; a held writer lets a test hand over more checkpoints meanwhile */
        if (s->spare.ck.full) store_test_hold("NNBENCH_TEST_HOLD_CKPT_WRITE");
        long long gone[STORE_MAX_GONE];
        int n_gone = 0;
        int st = write_batch(s, &s->spare, gone, &n_gone);
        char msg[sizeof s->werr_msg];
        if (st) snprintf(msg, sizeof msg, "%s", store_error());
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < n_gone; i++)
            if (!is_gone(s, gone[i]) && s->n_gone < STORE_MAX_GONE) s->gone[s->n_gone++] = gone[i];
        if (st) {
            put_back(s);
            if (!s->werr) s->werr_new = 1; /* reported once per run of failures */
            s->werr = st;
            snprintf(s->werr_msg, sizeof s->werr_msg, "%s", msg);
            s->retry_ns = store_now_ns() + RETRY_NS;
        } else {
            s->werr = STORE_OK;
            s->retry_ns = 0;
        }
        s->spare.n_pts = s->spare.n_solves = 0;
        s->spare.n_prog = 0;
        /* written, or dropped for a newer one by put_back: its buffer is free again */
        ck_release(s, s->spare.ck.data, s->spare.ck.cap);
        s->spare.ck = (store_pending_ckpt){ .full = 0 };
        s->done_gen = want;
        pthread_cond_broadcast(&s->done);
        if (stopping && st) break; /* the last attempt failed: the caller saw store_flush's error */
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- flushing ----------------------------------------------------------------------- */

/* The writer's last error, now reported to the caller (s->mu held). */
static int writer_error(store *s)
{
    s->werr_new = 0;
    return s->werr ? store_fail(s->werr, "%s", s->werr_msg) : STORE_OK;
}

int store_flush(store *s)
{
    if (s->readonly) return STORE_OK;
    pthread_mutex_lock(&s->mu);
    int st = STORE_OK;
    if (s->writer_on) {
        uint64_t g = ++s->req_gen;
        pthread_cond_signal(&s->work);
        while (s->done_gen < g) pthread_cond_wait(&s->done, &s->mu);
        st = writer_error(s);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

int store_flush_due(store *s)
{
    if (s->readonly) return STORE_OK;
    pthread_mutex_lock(&s->mu);
    int st = s->werr_new ? writer_error(s) : STORE_OK;
    pthread_mutex_unlock(&s->mu);
    return st;
}

void store_writer_close(store *s)
{
    if (s->writer_on) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->writer, NULL);
        s->writer_on = 0;
    }
    sqlite3_finalize(s->ins_metric);
    sqlite3_finalize(s->ins_solver);
    sqlite3_finalize(s->upd_progress);
    sqlite3_finalize(s->run_exists);
    sqlite3_finalize(s->ins_ckpt);
    sqlite3_finalize(s->del_ckpt);
    s->ins_metric = s->ins_solver = s->upd_progress = s->run_exists = s->ins_ckpt = s->del_ckpt = NULL;
    sqlite3_close_v2(s->wdb);
    s->wdb = NULL;
    for (int i = 0; i < s->n_keys; i++) free(s->keys[i]);
    s->n_keys = 0;
    free(s->buf.pts);
    free(s->buf.solves);
    free(s->spare.pts);
    free(s->spare.solves);
    ck_free_buf(s->buf.ck.data, s->buf.ck.cap);
    ck_free_buf(s->spare.ck.data, s->spare.ck.cap);
    for (int i = 0; i < s->n_ck_free; i++) ck_free_buf(s->ck_free[i].data, s->ck_free[i].cap);
    s->n_ck_free = 0;
    memset(&s->buf, 0, sizeof s->buf);
    memset(&s->spare, 0, sizeof s->spare);
}
