/* pool.c (tests) — the engine's worker pool (engine/pool.c): every slab and every index run
 * exactly once at 1..ENG_POOL_MAX slabs; a call from inside a slab and one from another
 * thread while the pool is driven run unsplit; workers started during a call join it; the
 * split elementwise ops and optimizers give the bits of one thread at 1, 2 and 4 threads.
 * Nothing here depends on the machine's speed or on OpenBLAS/OpenMP settings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../engine/internal.h"

static int teardown(void **state)
{
    (void)state;
    eng_pool_set_threads(1);
    return 0;
}

/* Waits (bounded: a test that would hang fails instead) until *flag >= want. */
static int wait_for(atomic_int *flag, int want)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(flag) < want) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 30) return 0;
        struct timespec nap = { 0, 100000 };
        nanosleep(&nap, NULL);
    }
    return 1;
}

typedef struct {
    atomic_int count[ENG_POOL_MAX];
    int bad_nslab;
} slab_count;

static void count_slab(void *ctx, int s, int nslab)
{
    slab_count *c = ctx;
    if (s < 0 || s >= ENG_POOL_MAX || nslab < 2) c->bad_nslab = 1;
    else atomic_fetch_add(&c->count[s], 1);
}

static void test_every_slab_once(void **state)
{
    (void)state;
    for (int rep = 0; rep < 300; rep++)
        for (int n = 2; n <= ENG_POOL_MAX; n++) {
            slab_count c;
            memset(&c, 0, sizeof c);
            assert_int_equal(eng_pool_run(n, count_slab, &c), 1);
            assert_int_equal(c.bad_nslab, 0);
            for (int s = 0; s < ENG_POOL_MAX; s++) assert_int_equal(atomic_load(&c.count[s]), s < n ? 1 : 0);
        }
    assert_int_equal(eng_pool_run(1, count_slab, NULL), 0); /* nothing to split: the caller's */
}

typedef struct {
    unsigned char *seen;
    atomic_int calls;
    int misaligned;
} range_mark;

static void mark_range(void *ctx, size_t lo, size_t hi)
{
    range_mark *m = ctx;
    atomic_fetch_add(&m->calls, 1);
    if (lo % 16) m->misaligned = 1;
    for (size_t i = lo; i < hi; i++) m->seen[i]++;
}

/* eng_pool_for covers [0, n) exactly once, on whole lines, in at most `threads` ranges of
 * at least `grain` (the last may be shorter). */
static void test_every_index_once(void **state)
{
    (void)state;
    static const size_t sizes[] = { 0, 1, 15, 16, 17, 100, 8191, 8192, 16385, 100003 };
    static const size_t grains[] = { 1, 16, 1000, ENG_POOL_GRAIN };
    static const int threads[] = { 1, 2, 4, ENG_POOL_MAX };
    unsigned char *seen = malloc(100003);
    assert_non_null(seen);
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        eng_pool_set_threads(threads[t]);
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
            for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++) {
                size_t n = sizes[si];
                memset(seen, 0, 100003);
                range_mark m = { seen, 0, 0 };
                eng_pool_for(n, grains[g], mark_range, &m);
                for (size_t i = 0; i < n; i++)
                    if (seen[i] != 1) fail_msg("threads %d n %zu grain %zu: index %zu ran %d times", threads[t], n, grains[g], i, seen[i]);
                size_t most = n / grains[g] < (size_t)threads[t] ? n / grains[g] : (size_t)threads[t];
                assert_true(atomic_load(&m.calls) <= (int)(most > 1 ? most : 1));
                assert_int_equal(m.misaligned, 0);
            }
    }
    free(seen);
}

/* ---- nested and concurrent callers ------------------------------------------------------ */

typedef struct {
    atomic_int nested_ran, nested_calls, unsplit;
} nest_ctx;

static void inner_range(void *ctx, size_t lo, size_t hi)
{
    nest_ctx *c = ctx;
    atomic_fetch_add(&c->nested_calls, 1);
    if (lo == 0 && hi == 100000) atomic_fetch_add(&c->unsplit, 1);
}

static void outer_slab(void *ctx, int s, int nslab)
{
    (void)s, (void)nslab;
    nest_ctx *c = ctx;
    slab_count inner;
    memset(&inner, 0, sizeof inner);
    if (eng_pool_run(2, count_slab, &inner)) atomic_fetch_add(&c->nested_ran, 1);
    eng_pool_for(100000, 16, inner_range, c);
}

/* A call from inside a slab (on the caller or on a worker) gets 0 and runs unsplit. */
static void test_nested_unsplit(void **state)
{
    (void)state;
    eng_pool_set_threads(2);
    for (int rep = 0; rep < 50; rep++) {
        nest_ctx c;
        memset(&c, 0, sizeof c);
        assert_int_equal(eng_pool_run(2, outer_slab, &c), 1);
        assert_int_equal(atomic_load(&c.nested_ran), 0);
        assert_int_equal(atomic_load(&c.nested_calls), 2); /* one whole range per outer slab */
        assert_int_equal(atomic_load(&c.unsplit), 2);
    }
}

typedef struct {
    atomic_int entered, release, started;
    int held; /* slabs that wait for `release` */
} hold_ctx;

/* Slabs below c->held wait until released: the pool stays driven meanwhile. */
static void hold_slab(void *ctx, int s, int nslab)
{
    (void)nslab;
    hold_ctx *c = ctx;
    atomic_fetch_add(&c->started, 1);
    if (s < c->held) {
        atomic_fetch_add(&c->entered, 1);
        wait_for(&c->release, 1);
    }
}

static void *drive(void *arg)
{
    eng_pool_run(2, hold_slab, arg);
    return NULL;
}

/* While one thread drives the pool (held inside a slab), another thread's call returns 0
 * at once and its eng_pool_for runs in one call on that thread. */
static void test_concurrent_unsplit(void **state)
{
    (void)state;
    eng_pool_set_threads(2);
    hold_ctx h;
    memset(&h, 0, sizeof h);
    h.held = 1;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, drive, &h), 0);
    assert_true(wait_for(&h.entered, 1));
    slab_count c;
    memset(&c, 0, sizeof c);
    assert_int_equal(eng_pool_run(2, count_slab, &c), 0);
    assert_int_equal(atomic_load(&c.count[0]) + atomic_load(&c.count[1]), 0);
    nest_ctx n;
    memset(&n, 0, sizeof n);
    eng_pool_for(100000, 16, inner_range, &n);
    assert_int_equal(atomic_load(&n.unsplit), 1);
    atomic_store(&h.release, 1);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&h.started), 2);
    /* driven again from this thread: split as usual */
    assert_int_equal(eng_pool_run(2, count_slab, &c), 1);
}

typedef struct {
    atomic_int arrived;
    int parties;
    atomic_int timed_out;
    atomic_int count[ENG_POOL_MAX];
} barrier_ctx;

/* Every slab waits until `parties` slabs run at once: only distinct threads get there. */
static void barrier_slab(void *ctx, int s, int nslab)
{
    (void)nslab;
    barrier_ctx *b = ctx;
    atomic_fetch_add(&b->count[s], 1);
    atomic_fetch_add(&b->arrived, 1);
    if (!wait_for(&b->arrived, b->parties)) atomic_store(&b->timed_out, 1);
}

/* Workers started by a call (the pool grows from 1 worker to ENG_POOL_MAX - 1 here) join
 * the generation in progress: all ENG_POOL_MAX slabs meet at the barrier, so each ran on
 * its own thread, and each exactly once; the calls after it still count right. */
static void test_worker_started_mid_run(void **state)
{
    (void)state;
    slab_count c;
    memset(&c, 0, sizeof c);
    assert_int_equal(eng_pool_run(2, count_slab, &c), 1); /* at least one worker exists */
    barrier_ctx b;
    memset(&b, 0, sizeof b);
    b.parties = ENG_POOL_MAX;
    assert_int_equal(eng_pool_run(ENG_POOL_MAX, barrier_slab, &b), 1);
    assert_int_equal(atomic_load(&b.timed_out), 0);
    for (int s = 0; s < ENG_POOL_MAX; s++) assert_int_equal(atomic_load(&b.count[s]), 1);
    test_every_slab_once(state);
}

/* Slabs are claimed, not assigned: while whoever took slab 0 waits for all the others, the
 * free threads (the caller included) take them all, however many each. */
typedef struct {
    atomic_int done_others;
    int nslab;
    atomic_int timed_out;
} caller_ctx;

static void others_first_slab(void *ctx, int s, int nslab)
{
    caller_ctx *c = ctx;
    if (s == 0) {
        if (!wait_for(&c->done_others, nslab - 1)) atomic_store(&c->timed_out, 1);
    } else {
        atomic_fetch_add(&c->done_others, 1);
    }
}

static void test_slabs_claimed(void **state)
{
    (void)state;
    for (int n = 2; n <= 4; n++) {
        caller_ctx c = { 0, n, 0 };
        assert_int_equal(eng_pool_run(n, others_first_slab, &c), 1);
        assert_int_equal(atomic_load(&c.timed_out), 0);
        assert_int_equal(atomic_load(&c.done_others), n - 1);
    }
}

/* eng_pool_join_stats: a job counts once, with the time its caller waited after its own
 * slab: here slab 0 returns as soon as a worker has begun slab 1, which then sleeps 20 ms.
 * A call that splits nothing counts nothing. */
static atomic_int join_started;

static void join_slab(void *ctx, int s, int nslab)
{
    (void)nslab;
    atomic_int *timed_out = ctx;
    if (s == 0) {
        if (!wait_for(&join_started, 1)) atomic_store(timed_out, 1);
        return;
    }
    atomic_store(&join_started, 1);
    struct timespec nap = { 0, 20000000 };
    nanosleep(&nap, NULL);
}

static void test_join_stats(void **state)
{
    (void)state;
    long j0, j1, j2;
    double w0, w1, w2;
    atomic_int timed_out = 0;
    atomic_store(&join_started, 0);
    eng_pool_join_stats(&j0, &w0);
    assert_int_equal(eng_pool_run(2, join_slab, &timed_out), 1);
    assert_int_equal(atomic_load(&timed_out), 0);
    eng_pool_join_stats(&j1, &w1);
    assert_int_equal(j1, j0 + 1);
    assert_true(w1 - w0 >= 0.010); /* the caller waited for most of the 20 ms */
    assert_int_equal(eng_pool_run(1, join_slab, &timed_out), 0);
    eng_pool_join_stats(&j2, &w2);
    assert_int_equal(j2, j1);
    assert_true(w2 == w1);
}

/* Slab 0 is the caller's alone: held at its first claim for a few milliseconds after a job
 * is published, the caller still runs slab 0 itself, while the workers run the others (a
 * worker used to take slab 0 after its own). */
static pthread_t s0_caller;
static atomic_int s0_hold, s0_off_caller;

static void hold_caller_claim(uint64_t st)
{
    (void)st;
    if (!pthread_equal(pthread_self(), s0_caller) || !atomic_exchange(&s0_hold, 0)) return;
    struct timespec nap = { 0, 3000000 };
    nanosleep(&nap, NULL);
}

static void note_slab0(void *ctx, int s, int nslab)
{
    (void)nslab;
    if (s == 0 && !pthread_equal(pthread_self(), s0_caller)) atomic_fetch_add(&s0_off_caller, 1);
    count_slab(ctx, s, nslab);
}

static void test_slab0_on_caller(void **state)
{
    (void)state;
    s0_caller = pthread_self();
    atomic_store(&s0_off_caller, 0);
    eng_pool_set_threads(4);
    atomic_store(&eng_pool_claim_hook, hold_caller_claim);
    for (int k = 0; k < 20; k++) {
        slab_count c;
        memset(&c, 0, sizeof c);
        int n = 2 + k % 3;
        atomic_store(&s0_hold, 1);
        assert_int_equal(eng_pool_run(n, note_slab0, &c), 1);
        for (int s = 0; s < n; s++) assert_int_equal(atomic_load(&c.count[s]), 1);
    }
    atomic_store(&eng_pool_claim_hook, NULL);
    assert_int_equal(atomic_load(&s0_off_caller), 0);
}

/* The idle task: a worker that waits for a job runs it (again while it returns 1), jobs
 * still run every slab once while it is busy, a second task is refused (the first keeps its
 * context), and once cleared
 * it is never called again (clearing waits for a worker inside it). */
static atomic_int idle_calls, idle_busy, idle_wrong_ctx;
static int idle_mine, idle_theirs;
static int idle_count(void *ctx)
{
    if (ctx != &idle_mine) atomic_fetch_add(&idle_wrong_ctx, 1);
    atomic_fetch_add(&idle_calls, 1);
    if (!atomic_load(&idle_busy)) return 0;
    struct timespec nap = { 0, 20000 };
    nanosleep(&nap, NULL);
    return 1;
}
static int idle_other(void *ctx) { (void)ctx; return 0; }

static void test_idle_task(void **state)
{
    (void)state;
    eng_pool_set_threads(3);
    atomic_store(&idle_calls, 0);
    atomic_store(&idle_wrong_ctx, 0);
    atomic_store(&idle_busy, 1);
    assert_int_equal(eng_pool_set_idle(idle_count, &idle_mine), 1);
    assert_int_equal(eng_pool_set_idle(idle_other, &idle_theirs), 0); /* refused, and the first kept whole */
    slab_count c;
    memset(&c, 0, sizeof c);
    assert_int_equal(eng_pool_run(3, count_slab, &c), 1); /* wakes the workers */
    assert_true(wait_for(&idle_calls, 20));
    for (int k = 0; k < 50; k++) {
        memset(&c, 0, sizeof c);
        assert_int_equal(eng_pool_run(3, count_slab, &c), 1);
        for (int s = 0; s < 3; s++) assert_int_equal(atomic_load(&c.count[s]), 1);
    }
    assert_int_equal(eng_pool_set_idle(NULL, NULL), 1);
    int after = atomic_load(&idle_calls);
    struct timespec nap = { 0, 3000000 };
    nanosleep(&nap, NULL);
    assert_int_equal(atomic_load(&idle_calls), after);
    assert_int_equal(atomic_load(&idle_wrong_ctx), 0);
    assert_int_equal(eng_pool_set_idle(idle_other, NULL), 1); /* free again */
    assert_int_equal(eng_pool_set_idle(NULL, NULL), 1);
}

/* ---- a worker between two jobs ---------------------------------------------------------
 * A worker that read a finished job's state, then the next job's fields (written before the
 * next generation is published), must find nothing to claim. When only the bits below
 * nslab were tracked, it claimed bit 2 of the finished 2-slab job and ran slab 2 of the
 * next 8-slab job, which was then handed out again: run twice, and the caller counted a
 * slab finished that was not (seen as a stale slab writing into a later job). */
static atomic_int hk_armed, hk_arrived, hk_go, hk_ran;
static pthread_t hk_caller;

static void hold_after_state(uint64_t st)
{
    if (pthread_equal(pthread_self(), hk_caller) || ((uint32_t)st & 3u) != 3u) return;
    if (!atomic_exchange(&hk_armed, 0)) return;
    atomic_store(&hk_arrived, 1);
    wait_for(&hk_go, 1);
}

/* Lets the held worker go while the next job is written but not published, and gives it
 * the time to claim (it runs a slab at once if it can: then hk_ran is set). */
static void release_before_publish(void)
{
    atomic_store(&hk_go, 1);
    for (int i = 0; i < 300 && !atomic_load(&hk_ran); i++) {
        struct timespec nap = { 0, 1000000 };
        nanosleep(&nap, NULL);
    }
}

static void count_and_flag(void *ctx, int s, int nslab)
{
    atomic_store(&hk_ran, 1);
    count_slab(ctx, s, nslab);
}

static void test_worker_between_jobs(void **state)
{
    (void)state;
    hk_caller = pthread_self();
    atomic_store(&hk_arrived, 0);
    atomic_store(&hk_go, 0);
    atomic_store(&hk_ran, 0);
    atomic_store(&eng_pool_claim_hook, hold_after_state);
    slab_count a;
    /* job A, 2 slabs: a worker that finished its slab looks for more after the caller took
     * slab 0, and is held there (a few tries: the caller may come second) */
    for (int tries = 0; tries < 200 && !atomic_load(&hk_arrived); tries++) {
        memset(&a, 0, sizeof a);
        atomic_store(&hk_armed, 1);
        assert_int_equal(eng_pool_run(2, count_slab, &a), 1);
        for (int i = 0; i < 20 && !atomic_load(&hk_arrived); i++) {
            struct timespec nap = { 0, 1000000 };
            nanosleep(&nap, NULL);
        }
        atomic_store(&hk_armed, 0);
    }
    assert_true(atomic_load(&hk_arrived));
    atomic_store(&eng_pool_post_hook, release_before_publish);
    slab_count b;
    memset(&b, 0, sizeof b);
    assert_int_equal(eng_pool_run(ENG_POOL_MAX, count_and_flag, &b), 1);
    atomic_store(&eng_pool_post_hook, NULL);
    atomic_store(&eng_pool_claim_hook, NULL);
    for (int s = 0; s < ENG_POOL_MAX; s++)
        if (atomic_load(&b.count[s]) != 1) fail_msg("slab %d of the 8-slab job ran %d times", s, atomic_load(&b.count[s]));
}

static int teardown_hooks(void **state)
{
    atomic_store(&eng_pool_post_hook, NULL);
    atomic_store(&eng_pool_claim_hook, NULL);
    atomic_store(&hk_go, 1);
    return teardown(state);
}

/* ---- the split ops and optimizers: the bits of one thread -------------------------------- */

static float rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

#define ROWS 297 /* odd: slabs end inside rows; 297 x 300 floats is above ENG_EW_SPLIT_MIN */
#define ROWS_SMALL (ENG_EW_SPLIT_MIN / COLS - 1) /* below it: run on the caller */
#define COLS 300

/* Runs op forward and backward on fixed inputs of `rows` rows at `threads` pool threads into
 * out (y, dx, db concatenated). */
static void run_op(int op, int rows, int threads, float *out)
{
    size_t e = (size_t)rows * COLS;
    float *x = malloc(e * 4), *y = malloc(e * 4), *dy = malloc(e * 4), *dx = malloc(e * 4), *b = malloc(COLS * 4),
          *db = malloc(COLS * 4);
    uint32_t s = 7u;
    for (size_t i = 0; i < e; i++) x[i] = 4.0f * rnd(&s), dy[i] = rnd(&s);
    for (size_t i = 0; i < COLS; i++) b[i] = rnd(&s);
    eng_pool_set_threads(threads);
    eng_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.in_size = n.out_size = COLS;
    if (op == ENG_OP_BIAS) {
        memcpy(y, x, e * 4);
        n.x = n.y = y, n.b = b, n.db = db, n.n_b = COLS, n.dy = n.dx = dy;
    } else {
        n.x = x, n.y = y, n.dy = dy, n.dx = dx;
    }
    eng_ops[op].forward(&n, rows);
    eng_ops[op].backward(&n, rows);
    memcpy(out, y, e * 4);
    memcpy(out + e, op == ENG_OP_BIAS ? dy : dx, e * 4);
    memcpy(out + 2 * e, op == ENG_OP_BIAS ? db : b, COLS * 4);
    free(x), free(y), free(dy), free(dx), free(b), free(db);
    eng_pool_set_threads(1);
}

static void test_ops_same_bits(void **state)
{
    (void)state;
    static const int ops[] = { ENG_OP_BIAS, ENG_OP_RELU, ENG_OP_TANH, ENG_OP_SIGMOID, ENG_OP_GELU };
    size_t len = 2 * (size_t)ROWS * COLS + COLS;
    float *one = malloc(len * 4), *many = malloc(len * 4);
    long before = eng_pool_worker_slabs();
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        run_op(ops[o], ROWS, 1, one);
        for (int t = 2; t <= 4; t += 2) {
            run_op(ops[o], ROWS, t, many);
            if (memcmp(one, many, len * 4)) fail_msg("%s at %d threads differs from 1 thread", eng_ops[ops[o]].name, t);
        }
    }
    printf("  pool workers ran %ld slabs of the split ops\n", eng_pool_worker_slabs() - before);
    free(one), free(many);
}

static atomic_int posts;
static void count_post(void) { atomic_fetch_add(&posts, 1); }

/* Below ENG_EW_SPLIT_MIN floats an elementwise op posts no job at 2 threads (a split cost the
 * Fashion MLP's 128 x 256 relu twice its one-thread time); above it, it does. */
static void test_small_ops_on_caller(void **state)
{
    (void)state;
    static const int ops[] = { ENG_OP_BIAS, ENG_OP_RELU, ENG_OP_TANH, ENG_OP_SIGMOID, ENG_OP_GELU };
    float *out = malloc((2 * (size_t)ROWS * COLS + COLS) * 4);
    atomic_store(&eng_pool_post_hook, count_post);
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        atomic_store(&posts, 0);
        run_op(ops[o], ROWS_SMALL, 2, out);
        if (atomic_load(&posts)) fail_msg("%s over %d x %d floats posted %d pool jobs", eng_ops[ops[o]].name, ROWS_SMALL,
                                          COLS, atomic_load(&posts));
        run_op(ops[o], ROWS, 2, out);
        if (atomic_load(&posts) < 2) fail_msg("%s over %d x %d floats posted %d pool jobs (forward and backward split)",
                                              eng_ops[ops[o]].name, ROWS, COLS, atomic_load(&posts));
    }
    atomic_store(&eng_pool_post_hook, NULL);
    free(out);
}

/* The maps of run_optim: a scalar map inside a piece, a centring by columns over the first
 * matrix, one by rows across the pieces' cut at 40000 and a scalar map to the last
 * parameter (gaps between them). */
enum { MAP_NONE, MAP_DEFER, MAP_BY_HAND };
static void optim_maps(eng_optim_map m[4])
{
    static float colsub[300], rowsub[50];
    uint32_t s = 5u;
    for (int i = 0; i < 300; i++) colsub[i] = rnd(&s);
    for (int i = 0; i < 50; i++) rowsub[i] = rnd(&s);
    m[0] = (eng_optim_map){ .off = 100, .n = 1100, .cols = 1100, .mu = 0.3f, .s = 1.7f };
    m[1] = (eng_optim_map){ .off = 1300, .n = 97 * 300, .cols = 300, .sub = colsub, .mu = 0.0f, .s = 1.0f };
    m[2] = (eng_optim_map){ .off = 39000, .n = 50 * 40, .cols = 40, .sub = rowsub, .by_row = 1, .mu = 0.0f, .s = 1.0f };
    m[3] = (eng_optim_map){ .off = 45001, .n = 5000, .cols = 5000, .mu = -0.1f, .s = 0.6f };
}

/* The maps applied to g as the transforms' own passes would (eng_optim_map's definitions). */
static void maps_by_hand(const eng_optim_map *m, int n, float *g)
{
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < m[k].n; i++) {
            float *x = &g[m[k].off + i];
            size_t r = i / m[k].cols, c = i % m[k].cols;
            if (!m[k].sub) *x = (*x - m[k].mu) * m[k].s;
            else if (m[k].by_row) *x = (*x - m[k].sub[r]) * 1.0f;
            else *x -= m[k].sub[c];
        }
}

/* pieces: each step as eng_optim_step_begin and ranges in descending, uneven slices (as
 * the loop's fused update runs them), else eng_optim_step. maps: none, handed to the step
 * (eng_optim_defer, in reverse order), or applied to the gradient by hand first. */
static void run_optim(eng_optimizer kind, int nesterov, int threads, int pieces, int mats, int maps, float *w)
{
    enum { NP = 50001 };
    eng_train_config tc = { .optimizer = kind, .lr = 0.01, .momentum = 0.9, .nesterov = nesterov, .beta1 = 0.9,
                            .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01 };
    eng_optim *o;
    assert_int_equal(eng_optim_create(&tc, NP, &o), ENG_OK);
    /* weight matrices cut by rows: one inside a piece, one across the pieces' cut at 40000
     * (updated by elements there), one ending at the last parameter */
    static const size_t off[] = { 1300, 39000, 45001 };
    static const int rows[] = { 97, 50, 40 }, cols[] = { 300, 40, 125 };
    if (mats) eng_optim_set_matrices(o, off, rows, cols, 3);
    float *g = malloc(NP * 4);
    uint32_t s = 11u;
    for (int i = 0; i < NP; i++) w[i] = rnd(&s);
    eng_pool_set_threads(threads);
    eng_optim_map m[4];
    optim_maps(m);
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < NP; i++) g[i] = rnd(&s);
        /* the maps of steps 1 and 3 only: a step keeps none of the step before */
        if (maps == MAP_BY_HAND && step != 1) maps_by_hand(m, 4, g);
        for (int k = 3; maps == MAP_DEFER && step != 1 && k >= 0; k--) assert_int_equal(eng_optim_defer(o, &m[k]), 0);
        if (!pieces) {
            eng_optim_step(o, w, g, tc.lr);
            continue;
        }
        static const size_t cuts[] = { NP, 40000, 39999, 1290, 17, 0 };
        eng_optim_step_begin(o, w, g, tc.lr);
        for (size_t c = 0; c + 1 < sizeof cuts / sizeof cuts[0]; c++) eng_optim_step_range(o, cuts[c + 1], cuts[c]);
    }
    eng_pool_set_threads(1);
    eng_optim_free(o);
    free(g);
}

/* eng_split_range: slabs in order, disjoint, covering [0, len), every inner edge on a whole
 * unit; the same cut for the same arguments (the GEMM, the update and the gather rely on it). */
static void test_split_range(void **state)
{
    (void)state;
    static const size_t lens[] = { 0, 1, 15, 16, 17, 100, 784, 1000 };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (int nslab = 1; nslab <= ENG_POOL_MAX; nslab++) {
            size_t at = 0;
            for (int s = 0; s < nslab; s++) {
                size_t lo, hi;
                eng_split_range(lens[i], ENG_SPLIT_UNIT, s, nslab, &lo, &hi);
                assert_int_equal(lo, at);
                assert_true(hi >= lo && hi <= lens[i]);
                if (hi < lens[i]) assert_int_equal(hi % ENG_SPLIT_UNIT, 0);
                at = hi;
            }
            assert_int_equal(at, lens[i]);
        }
}

/* The update gives the bits of one thread updating everything at once on the baseline
 * path: on every ISA path this CPU has (each vectorised alike), at 1, 2 and 4 threads, in
 * pieces as the fused update runs it, and with matrices cut by rows; with maps handed to
 * it (eng_optim_defer), the bits of the maps applied to the gradient first. */
static void test_optim_same_bits(void **state)
{
    (void)state;
    static const struct { eng_optimizer k; int nest; } kinds[] = {
        { ENG_OPT_SGD, 0 }, { ENG_OPT_MOMENTUM, 0 }, { ENG_OPT_MOMENTUM, 1 }, { ENG_OPT_ADAM, 0 }, { ENG_OPT_ADAMW, 0 }
    };
    eng_isa before = eng_isa_current();
    float *one = malloc(50001 * 4), *many = malloc(50001 * 4), *mapped = malloc(50001 * 4);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        assert_int_equal(eng_isa_set(ENG_ISA_GENERIC), ENG_OK);
        eng_prefetchw_set(0); /* the reference asks for no line with PREFETCHW, the rest as the CPU can */
        run_optim(kinds[k].k, kinds[k].nest, 1, 0, 0, MAP_NONE, one);
        run_optim(kinds[k].k, kinds[k].nest, 1, 0, 0, MAP_BY_HAND, mapped);
        eng_prefetchw_set(-1);
        assert_true(memcmp(one, mapped, 50001 * 4) != 0);
        for (int isa = 0; isa < ENG_ISA_N; isa++) {
            if (!eng_isa_available((eng_isa)isa)) continue;
            assert_int_equal(eng_isa_set((eng_isa)isa), ENG_OK);
            for (int t = 1; t <= 4; t *= 2)
                for (int v = 0; v < 8; v++) {
                    int pieces = v & 1, mats = (v >> 1) & 1, maps = v >> 2 ? MAP_DEFER : MAP_NONE;
                    if (t == 1 && !pieces && !mats && !maps && !isa) continue;
                    run_optim(kinds[k].k, kinds[k].nest, t, pieces, mats, maps, many);
                    if (memcmp(maps ? mapped : one, many, 50001 * 4))
                        fail_msg("optimizer %d (nesterov %d) on %s at %d threads%s%s%s differs", kinds[k].k,
                                 kinds[k].nest, eng_isa_name((eng_isa)isa), t, pieces ? " in pieces" : "",
                                 mats ? " with matrices cut by rows" : "",
                                 maps ? " with deferred maps (against the maps applied first)" : "");
                }
        }
    }
    assert_int_equal(eng_isa_set(before), ENG_OK);
    free(one), free(many), free(mapped);
}

int test_engine_pool(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_every_slab_once, teardown),
        cmocka_unit_test_teardown(test_every_index_once, teardown),
        cmocka_unit_test_teardown(test_nested_unsplit, teardown),
        cmocka_unit_test_teardown(test_concurrent_unsplit, teardown),
        cmocka_unit_test_teardown(test_worker_started_mid_run, teardown),
        cmocka_unit_test_teardown(test_slabs_claimed, teardown),
        cmocka_unit_test_teardown(test_worker_between_jobs, teardown_hooks),
        cmocka_unit_test_teardown(test_ops_same_bits, teardown),
        cmocka_unit_test_teardown(test_small_ops_on_caller, teardown_hooks),
        cmocka_unit_test_teardown(test_slab0_on_caller, teardown_hooks),
        cmocka_unit_test_teardown(test_join_stats, teardown),
        cmocka_unit_test_teardown(test_idle_task, teardown),
        cmocka_unit_test(test_split_range),
        cmocka_unit_test_teardown(test_optim_same_bits, teardown),
    };
    return cmocka_run_group_tests_name("engine_pool", tests, NULL, NULL);
}
