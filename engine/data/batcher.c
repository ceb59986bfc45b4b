/* batcher.c — minibatches of the training set: a seeded permutation per epoch, rows
 * gathered into preallocated buffers (augmented and read through a throttled source when
 * asked), optionally up to prefetch_depth batches ahead on a second thread, or one batch
 * ahead in the engine's pool workers' idle time (eng_batcher_gather_on_pool). */
#include "data_internal.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "../internal.h"
#include "../rng.h"

/* A slot is FREE (may be filled), FILLING (its batch is claimed), READY (complete, not
 * yet handed out) or HELD (handed out; freed by the next eng_batcher_next). */
enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD };
#define MAX_SLOTS (ENG_PREFETCH_MAX + 1)
#define SHARE_RING (MAX_SLOTS + 1)

struct eng_batcher {
    const eng_dataset *ds;
    int n, batch, bpe, shuffle, full, chunk, nslots;
    int shard_rank, shard_size;
    /* Shares set during the run (eng_batcher_set_share): entry k % SHARE_RING holds batch
     * share_batch's fractions; a batch without its entry is split evenly. */
    long share_batch[SHARE_RING];
    double share_lo[SHARE_RING], share_hi[SHARE_RING];
    uint64_t seed;
    eng_augment aug;
    eng_throttle *thr;    /* NULL = unthrottled */
    int64_t latency_ns;   /* per batch read */
    size_t row_bytes;     /* bytes of one gathered row: inputs + label or targets */
    prof_t *prof;         /* the caller's profiler (its thread only), or NULL */
    int wait_scope, gather_scope;
    int queue_track;      /* the trace's "prefetch_queue batches" counter, -1 none */
    /* The order: rng and perm change only when a batch is set up, and batches are set up
     * and completed strictly one after another in index order (one batch in flight at a
     * time), so the batches and shuffles never depend on which thread gathered or when. */
    eng_rng rng;
    int32_t *perm;
    long produced;        /* index of the next batch to claim */
    /* nslots = depth + 1 slots (ring): the caller holds one while the others are filled. */
    float *x[MAX_SLOTS];
    int32_t *y[MAX_SLOTS];
    float *t[MAX_SLOTS];
    eng_batch meta[MAX_SLOTS];
    int state[MAX_SLOTS];
    uint64_t slot_pos[MAX_SLOTS]; /* stream position of each slot's first row (augmentation) */
    long consumed;
    int held;             /* slot the caller holds, -1 none */
    /* The batch in flight (prefetch): its rows are copied in chunks claimed from cursor
     * by the prefetch thread and, when it asks for the batch before it is complete, by the
     * caller too; whoever copies the last row marks the slot READY. cursor holds the
     * batch's generation (its index, low 32 bits) above the next row, so a copier that
     * comes late, when its batch is complete and the next one already open, claims
     * nothing of the next. */
    int gathering;        /* a batch is claimed and not complete */
    int fill_slot, fill_open, fill_start, fill_rows;
    uint32_t fill_gen;
    atomic_ullong cursor;
    atomic_int done_rows;
    atomic_long completed;    /* batches complete so far (they complete in index order) */
    int waiting;              /* threads in pthread_cond_wait: signal only when > 0 */
    int wake_pending;         /* a state change to signal once the mutex is released */
    atomic_long rows_by_thread, rows_by_caller;
    int prefetch;         /* 1 when batches are gathered ahead: by the thread, or on the pool */
    int on_pool;          /* ahead by the pool's idle workers (eng_batcher_gather_on_pool), no thread */
    int stop;
    pthread_t thread;
    pthread_mutex_t mu;   /* guards everything above that is not atomic, under prefetch */
    pthread_cond_t cv;
};

/* Sets up batch k in slot s: the epoch's shuffle if k starts one, its rows and meta. The
 * caller has claimed k and the previous batch is complete, so nothing reads perm now. */
static void setup(eng_batcher *b, long k, int s)
{
    int epoch = (int)(k / b->bpe), i = (int)(k % b->bpe);
    if (i == 0 && b->shuffle)
        for (int j = b->n - 1; j > 0; j--) {
            int r = (int)eng_rng_below(&b->rng, (uint64_t)j + 1);
            int32_t tmp = b->perm[j]; b->perm[j] = b->perm[r]; b->perm[r] = tmp;
        }
    int start = i * b->batch;
    int global = b->n - start < b->batch ? b->n - start : b->batch;
    int lo = (int)((long)global * b->shard_rank / b->shard_size);
    int hi = (int)((long)global * (b->shard_rank + 1) / b->shard_size);
    int e = (int)(k % SHARE_RING);
    if (b->share_batch[e] == k) {
        /* every rank rounds the same products: one rank's hi is the next one's lo */
        lo = (int)lround(global * b->share_lo[e]);
        hi = (int)lround(global * b->share_hi[e]);
    }
    b->fill_start = start + lo;
    b->fill_rows = hi - lo;
    b->slot_pos[s] = (uint64_t)k * (uint64_t)b->batch + (uint64_t)lo;
    b->meta[s] = (eng_batch){ .x = b->x[s], .y = b->y[s], .t = b->t[s], .rows = b->fill_rows,
                              .epoch = epoch, .last_in_epoch = i == b->bpe - 1, .global_rows = global };
}

/* Bytes of rows a copy asks for ahead of the one it copies: the rows are scattered over the
 * training set (tens to hundreds of MB, mapped in 4 KiB pages), so each one starts with a
 * TLB and a cache miss the hardware prefetcher cannot foresee; with many rows asked for at
 * once their misses overlap. A Fashion-MNIST batch of byte rows (100 KB) is asked for
 * whole; float rows 40 at a time. */
#define GATHER_AHEAD_BYTES (128u << 10)

/* Rows of the batch buffer asked for writing ahead of the one copied (eng_prefetch_w): at 2
 * threads the other core read them in the step before. */
#define GATHER_OWN_AHEAD 2

/* Copies rows [r0, r1) of the batch set up at start into slot s: from the byte copy when
 * the dataset has one (data_codes.c), decoded to the floats of x_train. */
static void copy_span(eng_batcher *b, int s, int start, int r0, int r1)
{
    const eng_dataset *ds = b->ds;
    size_t d = ds->in_size, esz = ds->x_codes ? 1 : sizeof(float);
    const char *base = ds->x_codes ? (const char *)ds->x_codes : (const char *)ds->x_train;
    int ahead = r0;
    for (int r = r0; r < r1 && r < r0 + GATHER_OWN_AHEAD; r++)
        eng_prefetch_w_range(b->x[s] + (size_t)r * d, d * sizeof(float));
    for (int r = r0; r < r1; r++) {
        for (; ahead < r1 && (size_t)(ahead - r) * d * esz < GATHER_AHEAD_BYTES; ahead++) {
            const char *row = base + (size_t)b->perm[start + ahead] * d * esz;
            for (size_t off = 0; off < d * esz; off += 64) __builtin_prefetch(row + off);
        }
        if (r + GATHER_OWN_AHEAD < r1)
            eng_prefetch_w_range(b->x[s] + (size_t)(r + GATHER_OWN_AHEAD) * d, d * sizeof(float));
        size_t src = (size_t)b->perm[start + r] * d;
        float *dst = b->x[s] + (size_t)r * d;
        if (ds->x_codes) eng_data_decode(ds->x_codes + src, d, ds->x_code_scale, dst);
        else memcpy(dst, ds->x_train + src, d * sizeof(float));
    }
}

typedef struct {
    eng_batcher *b;
    int s, start, r0, r1;
} span_job;

/* Slab t of the pool copies rows eng_split_range(r1 - r0) t of the batch, as a dense first
 * layer's forward cuts them when it does not cut K: whole rows, so that no line of the
 * buffer is written by both cores (a cut by columns, the columns a
 * dense first layer's K cut gives each thread, had both cores write halves of every row,
 * and their prefetchers pulled the lines at the seam back and forth: docs/engine.md,
 * "Threads"). */
static void copy_rows_slab(void *ctx, int t, int nslab)
{
    const span_job *j = ctx;
    size_t lo, hi;
    eng_split_range((size_t)(j->r1 - j->r0), ENG_SPLIT_UNIT, t, nslab, &lo, &hi);
    copy_span(j->b, j->s, j->start, j->r0 + (int)lo, j->r0 + (int)hi);
}

/* Copies rows [r0, r1) of the batch set up at start into slot s: over the engine's pool by
 * rows when no prefetch thread gathers (the training thread then waits for the copy). */
static void copy_rows(eng_batcher *b, int s, int start, int r0, int r1)
{
    const eng_dataset *ds = b->ds;
    size_t d = ds->in_size, nt = (size_t)ds->n_targets;
    int aug = eng_augment_on(&b->aug);
    span_job j = { b, s, start, r0, r1 };
    if (aug)
        for (int r = r0; r < r1; r++)
            eng_augment_row(&b->aug, ds->in_shape, b->seed, b->slot_pos[s] + (uint64_t)r,
                            ds->x_train + (size_t)b->perm[start + r] * d, b->x[s] + (size_t)r * d);
    else if (b->prefetch || (size_t)(r1 - r0) * d < ENG_EW_SPLIT_MIN || !eng_pool_run(eng_pool_threads(), copy_rows_slab, &j))
        copy_span(b, s, start, r0, r1);
    for (int r = r0; r < r1; r++) {
        size_t src = (size_t)b->perm[start + r];
        if (b->y[s]) b->y[s][r] = ds->y_train[src];
        if (b->t[s]) memcpy(b->t[s] + (size_t)r * nt, ds->t_train + src * nt, nt * sizeof(float));
    }
}

/* Waking the other thread is deferred until the mutex is released (unlock()): woken
 * while the waker still holds the mutex, it would run, block on the mutex at once and have
 * to be woken again. With b->mu held. */
static void wake(eng_batcher *b)
{
    if (b->waiting) b->wake_pending = 1;
}

static void unlock(eng_batcher *b)
{
    int w = b->wake_pending;
    b->wake_pending = 0;
    pthread_mutex_unlock(&b->mu);
    if (w) pthread_cond_broadcast(&b->cv);
}

static void wait_cv(eng_batcher *b)
{
    if (b->wake_pending) { b->wake_pending = 0; pthread_cond_broadcast(&b->cv); }
    b->waiting++;
    pthread_cond_wait(&b->cv, &b->mu);
    b->waiting--;
}

/* Copies chunks of batch gen (slot s, set up at start, rows long) until none is left to
 * claim; called without the mutex, with s/start/rows/gen read under it. Returns 1 if this
 * call copied the batch's last rows. */
static int copy_chunks(eng_batcher *b, int s, int start, int rows, uint32_t gen, atomic_long *count, int max)
{
    unsigned long long cur = atomic_load(&b->cursor);
    for (int n = 0; n < max; n++) {
        if ((uint32_t)(cur >> 32) != gen) return 0;
        int r0 = (int)(uint32_t)cur;
        if (r0 >= rows) return 0;
        int r1 = r0 + b->chunk < rows ? r0 + b->chunk : rows;
        if (!atomic_compare_exchange_weak(&b->cursor, &cur, ((unsigned long long)gen << 32) | (uint32_t)r1))
            continue;                              /* cur now holds the other side's claim */
        /* Only the training thread's own copies and reads are profiled (the profiler is
         * its own); the prefetch thread's are hidden behind training, or show as waits. */
        prof_t *p = count == &b->rows_by_caller ? b->prof : NULL;
        PROF_BEGIN(p, b->gather_scope);
        copy_rows(b, s, start, r0, r1);
        PROF_END(p, b->gather_scope, 0, (uint64_t)(r1 - r0) * b->row_bytes);
        atomic_fetch_add_explicit(count, r1 - r0, memory_order_relaxed);
        /* seq_cst read-modify-write: the last adder sees every other chunk's copies */
        if (atomic_fetch_add(&b->done_rows, r1 - r0) + (r1 - r0) == rows) return 1;
        cur = atomic_load(&b->cursor);
    }
    return 0;
}

/* With b->mu held: helps fill the open batch (up to max chunks), and completes it if this
 * side copied last. */
static void help_fill(eng_batcher *b, atomic_long *count, int max)
{
    int s = b->fill_slot, start = b->fill_start, rows = b->fill_rows;
    uint32_t gen = b->fill_gen;
    unlock(b);
    int last = copy_chunks(b, s, start, rows, gen, count, max);
    pthread_mutex_lock(&b->mu);
    if (last) {
        b->state[s] = SLOT_READY;
        b->gathering = 0;
        b->fill_open = 0;
        atomic_fetch_add(&b->completed, 1);
        wake(b);
    }
}

/* With b->mu held, no batch in flight and the next slot free: claims the next batch, sets
 * it up (mutex released) and opens it to helpers; 1 if there are rows to copy (b->mu held
 * either way). */
static int claim_open(eng_batcher *b, atomic_long *count)
{
    long k = b->produced++;
    int s = (int)(k % b->nslots);
    b->gathering = 1;
    b->fill_slot = s;
    b->fill_gen = (uint32_t)k;
    b->state[s] = SLOT_FILLING;
    unlock(b);
    setup(b, k, s);
    if (b->thr) {
        /* The whole batch is read from the throttled source before its rows are copied
         * (one sleep per batch: per-chunk sleeps would each overshoot by the timer slack).
         * Helpers meanwhile wait for it, and that wait is data.wait. */
        prof_t *p = count == &b->rows_by_caller ? b->prof : NULL;
        PROF_BEGIN(p, b->wait_scope);
        eng_throttle_read(b->thr, (size_t)b->fill_rows * b->row_bytes, b->latency_ns);
        PROF_END(p, b->wait_scope, 0, 0);
    }
    atomic_store(&b->done_rows, 0);
    atomic_store(&b->cursor, (unsigned long long)(uint32_t)k << 32);
    pthread_mutex_lock(&b->mu);
    if (b->fill_rows == 0) {               /* an empty shard: nothing to copy, complete now */
        b->state[s] = SLOT_READY;
        b->gathering = 0;
        atomic_fetch_add(&b->completed, 1);
        wake(b);
        return 0;
    }
    b->fill_open = 1;
    wake(b);
    return 1;
}

/* claim_open, then copy chunks of it until none is left. */
static void claim_and_fill(eng_batcher *b, atomic_long *count)
{
    if (claim_open(b, count)) help_fill(b, count, INT_MAX);
}

/* The pool's idle workers (eng_batcher_gather_on_pool): one piece of the prefetch thread's
 * work per call, never waiting: the next batch claimed and set up, or one chunk of it
 * copied. The training thread copies whatever they have not when it asks for the batch. */
static int idle_gather(void *arg)
{
    eng_batcher *b = arg;
    if (pthread_mutex_trylock(&b->mu)) return 0;
    int did = 0;
    if (!b->gathering) {
        if (b->state[b->produced % b->nslots] == SLOT_FREE) {
            claim_open(b, &b->rows_by_thread);
            did = 1;
        }
    } else if (b->fill_open && (int)(uint32_t)atomic_load(&b->cursor) < b->fill_rows) {
        help_fill(b, &b->rows_by_thread, 1);
        did = 1;
    }
    unlock(b);
    return did;
}

/* The prefetch thread: as soon as the next slot is free (the caller took the batch before
 * it) and the previous batch is complete, it gathers the next batch. */
static void *prefetch_main(void *arg)
{
    eng_batcher *b = arg;
#ifdef SCHED_BATCH
    /* Linux: a SCHED_BATCH thread does not preempt the running thread when it is woken.
     * Without this, freeing a slot woke this thread onto the training thread's core, where
     * it preempted training for the length of a gather: the waker paid for the prefetch.
     * Best effort (same nice level, no privilege needed); without it prefetch still works. */
    struct sched_param sp = { .sched_priority = 0 };
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->stop && (b->gathering || b->state[b->produced % b->nslots] != SLOT_FREE))
            wait_cv(b);
        if (b->stop) break;
        claim_and_fill(b, &b->rows_by_thread);
    }
    unlock(b);
    return NULL;
}

int eng_batcher_create(const eng_dataset *ds, int batch, int shuffle, int prefetch,
                       uint64_t seed, eng_batcher **out)
{
    eng_batcher_options o = { .shuffle = shuffle, .prefetch = prefetch, .depth = 1,
                              .wait_scope = -1, .gather_scope = -1 };
    return eng_batcher_create_opts(ds, batch, &o, seed, out);
}

int eng_batcher_create_at(const eng_dataset *ds, int batch, int shuffle, int prefetch,
                          uint64_t seed, long start, eng_batcher **out)
{
    eng_batcher_options o = { .shuffle = shuffle, .prefetch = prefetch, .depth = 1,
                              .wait_scope = -1, .gather_scope = -1, .start = start };
    return eng_batcher_create_opts(ds, batch, &o, seed, out);
}

/* Slot s's buffers (freed by eng_batcher_destroy, whatever was allocated); 0: out of memory. */
static int alloc_slot(eng_batcher *b, int s)
{
    const eng_dataset *ds = b->ds;
    if (!(b->x[s] = prof_malloc((size_t)b->batch * ds->in_size * sizeof(float)))) return 0;
    if (ds->y_train && !(b->y[s] = prof_malloc((size_t)b->batch * sizeof(int32_t)))) return 0;
    if (ds->t_train && !(b->t[s] = prof_malloc((size_t)b->batch * (size_t)ds->n_targets * sizeof(float)))) return 0;
    return 1;
}

/* The batch order depends only on the seed and the batch index (see struct eng_batcher),
 * so starting at batch k replays the shuffles of the epochs begun before k, without
 * gathering, before the prefetch thread exists. */
static void seek(eng_batcher *b, long k)
{
    long epochs_begun = (k + b->bpe - 1) / b->bpe;
    if (b->shuffle)
        for (long e = 0; e < epochs_begun; e++)
            for (int j = b->n - 1; j > 0; j--) {
                int r = (int)eng_rng_below(&b->rng, (uint64_t)j + 1);
                int32_t tmp = b->perm[j]; b->perm[j] = b->perm[r]; b->perm[r] = tmp;
            }
    b->produced = b->consumed = k;
    atomic_store(&b->completed, k);
}

int eng_batcher_create_opts(const eng_dataset *ds, int batch, const eng_batcher_options *o,
                            uint64_t seed, eng_batcher **out)
{
    *out = NULL;
    int shuffle = o->shuffle, prefetch = o->prefetch;
    if (!ds || ds->n_train < 1)
        return eng_fail(ENG_EINVAL, "batcher: the training set is empty");
    if (prefetch && (o->depth < 1 || o->depth > ENG_PREFETCH_MAX))
        return eng_fail(ENG_EINVAL, "data.prefetch_depth: expected 1 to %d, got %d", ENG_PREFETCH_MAX, o->depth);
    if (eng_augment_on(&o->augment) && (ds->in_shape[1] < 2 || ds->in_shape[2] < 2))
        return eng_fail(ENG_EINVAL, "data.augment: shifts and flips need image data (C,H,W with H, W > 1), "
                        "but %s has flat rows of %zu features; set augment = none", ds->name, ds->in_size);
    eng_batcher *b = prof_calloc(1, sizeof *b);
    if (!b) return eng_fail(ENG_ENOMEM, "batcher: out of memory");
    b->ds = ds;
    b->n = ds->n_train;
    b->seed = seed;
    b->aug = o->augment;
    b->prof = o->prof;
    b->wait_scope = o->wait_scope;
    b->gather_scope = o->gather_scope;
    /* With prefetch, the trace shows how many batches were ready when one was asked for
     * (0: training waits on data). Registering again (a resume) gives the same track. */
    b->queue_track = o->prefetch && o->prof ? prof_counter_register(o->prof, "prefetch_queue", "batches") : -1;
    b->latency_ns = (int64_t)(o->read_latency_ms * 1e6);
    b->row_bytes = ds->in_size * sizeof(float) +
                   (ds->y_train ? sizeof(int32_t) : (size_t)ds->n_targets * sizeof(float));
    b->nslots = prefetch ? o->depth + 1 : 1;
    b->shard_size = o->shard_size > 1 ? o->shard_size : 1;
    b->shard_rank = b->shard_size > 1 ? o->shard_rank : 0;
    for (int e = 0; e < SHARE_RING; e++) b->share_batch[e] = -1;
    if (o->read_mbps > 0 || b->latency_ns > 0) {
        if (!(b->thr = eng_throttle_new(o->read_mbps))) {
            prof_free(b);
            return eng_fail(ENG_ENOMEM, "batcher: out of memory");
        }
    }
    /* A full batch is served in place unless every step must read or transform it. */
    b->full = (batch <= 0 || batch >= b->n) && !b->thr && !eng_augment_on(&b->aug) && b->shard_size == 1;
    b->batch = b->full ? b->n : batch;
    b->bpe = (b->n + b->batch - 1) / b->batch;
    b->shuffle = shuffle && !b->full;
    b->held = -1;
    eng_rng_seed(&b->rng, seed, ENG_STREAM_DATA_SHUFFLE);
    /* ~16 KB of inputs per chunk: small enough that a gather preempted mid-chunk holds
     * little back, large enough that claiming a chunk costs nothing next to copying it. */
    size_t row_bytes = ds->in_size * sizeof(float);
    b->chunk = row_bytes >= 16384 ? 1 : (int)(16384 / row_bytes);
    atomic_init(&b->cursor, 0);
    atomic_init(&b->completed, 0);
    atomic_init(&b->done_rows, 0);
    atomic_init(&b->rows_by_thread, 0);
    atomic_init(&b->rows_by_caller, 0);
    if (b->full) {
        /* The whole set in its stored order, served in place: nothing to gather, and a
         * full-batch gradient does not depend on the order of rows. */
        b->meta[0] = (eng_batch){ .x = ds->x_train, .y = ds->y_train, .t = ds->t_train,
                                  .rows = b->n, .last_in_epoch = 1, .global_rows = b->n };
        b->consumed = o->start;
        *out = b;
        return ENG_OK;
    }
    b->perm = prof_malloc((size_t)b->n * sizeof(int32_t));
    int ok = b->perm != NULL;
    for (int i = 0; ok && i < b->n; i++) b->perm[i] = i;
    for (int s = 0; ok && s < b->nslots; s++) ok = alloc_slot(b, s);
    if (!ok) {
        eng_batcher_destroy(b);
        return eng_fail(ENG_ENOMEM, "batcher: out of memory for batches of %d rows", b->batch);
    }
    if (o->start > 0) seek(b, o->start);
    if (prefetch) {
        pthread_mutex_init(&b->mu, NULL);
        pthread_cond_init(&b->cv, NULL);
        int err = prof_thread_create(&b->thread, NULL, prefetch_main, b);
        if (err) {
            pthread_mutex_destroy(&b->mu);
            pthread_cond_destroy(&b->cv);
            eng_batcher_destroy(b);
            return eng_fail(ENG_ENOMEM, "batcher: cannot start the prefetch thread: %s",
                            strerror(err));
        }
        b->prefetch = 1;
    }
    *out = b;
    return ENG_OK;
}

/* With b->mu held: the batch the caller needs is in flight on the thread with nothing
 * left to claim (its last chunks are being copied) or being set up. Sleeping on the
 * condition variable would give up the core, and on a loaded machine getting it back can
 * take milliseconds, far longer than the chunks take; so spin, mutex released, for up to
 * SPIN_NS for batch k to complete. Returns 1 if it did (b->mu is held again either way). */
#define SPIN_NS 50000L
void (*eng_batcher_test_pause)(void);

static int spin_until_complete(eng_batcher *b, long k)
{
    unlock(b);
    uint64_t t0 = prof_now_ns();
    int done = 0;
    for (long i = 1; !(done = atomic_load(&b->completed) > k); i++)
        if (i % 64 == 0 && prof_now_ns() - t0 > SPIN_NS) break;
    if (!done && eng_batcher_test_pause) eng_batcher_test_pause();
    pthread_mutex_lock(&b->mu);
    return done;
}

/* What the caller does next for batch consumed (slot s), decided with b->mu held. */
enum { NEXT_READY, NEXT_CLAIM, NEXT_HELP, NEXT_WAIT };
static int next_action(eng_batcher *b, int s)
{
    if (b->state[s] == SLOT_READY) return NEXT_READY;
    /* The thread has not claimed it (it did not get a core in time, as on a loaded
     * machine): gather it here. */
    if (!b->gathering && b->produced == b->consumed) return NEXT_CLAIM;
    /* Half done: copy the remaining chunks alongside. */
    if (b->gathering && b->fill_open && b->fill_slot == s &&
        (int)(uint32_t)atomic_load(&b->cursor) < b->fill_rows)
        return NEXT_HELP;
    /* Being set up, or its last chunks being copied, on the thread. */
    return NEXT_WAIT;
}

int eng_batcher_next(eng_batcher *b, eng_batch *out)
{
    if (b->full) {
        *out = b->meta[0];
        out->epoch = (int)b->consumed++;
        return ENG_OK;
    }
    if (!b->prefetch) {
        setup(b, b->produced++, 0);
        if (b->thr) {
            PROF_BEGIN(b->prof, b->wait_scope);
            eng_throttle_read(b->thr, (size_t)b->fill_rows * b->row_bytes, b->latency_ns);
            PROF_END(b->prof, b->wait_scope, 0, 0);
        }
        PROF_BEGIN(b->prof, b->gather_scope);
        copy_rows(b, 0, b->fill_start, 0, b->fill_rows);
        PROF_END(b->prof, b->gather_scope, 0, (uint64_t)b->fill_rows * b->row_bytes);
        *out = b->meta[0];
        return ENG_OK;
    }
    pthread_mutex_lock(&b->mu);
    if (b->held >= 0) {                      /* the previous batch is no longer in use */
        b->state[b->held] = SLOT_FREE;
        b->held = -1;
        wake(b);
    }
    int s = (int)(b->consumed % b->nslots);
    if (b->queue_track >= 0)   /* completed is atomic; consumed is the caller's own */
        prof_counter(b->prof, b->queue_track, (double)(atomic_load(&b->completed) - b->consumed));
    /* Block only while the batch is complete but for chunks already being copied. */
    for (int a; (a = next_action(b, s)) != NEXT_READY;) {
        if (a == NEXT_CLAIM)
            claim_and_fill(b, &b->rows_by_caller);
        else if (a == NEXT_HELP)
            help_fill(b, &b->rows_by_caller, INT_MAX);
        else {
            /* Waiting for the prefetch thread: the stall data.wait measures. The spin
             * releases the mutex, so the thread may have completed this batch, and the
             * next, meanwhile, waking nobody: decide again before sleeping. */
            PROF_BEGIN(b->prof, b->wait_scope);
            if (!spin_until_complete(b, b->consumed) && next_action(b, s) == NEXT_WAIT) wait_cv(b);
            PROF_END(b->prof, b->wait_scope, 0, 0);
        }
    }
    b->state[s] = SLOT_HELD;
    b->held = s;
    b->consumed++;
    *out = b->meta[s];
    unlock(b);
    return ENG_OK;
}

int eng_batcher_gather_on_pool(eng_batcher *b)
{
    if (b->full || b->prefetch || b->thr || b->produced != b->consumed || eng_pool_threads() < 2 || !alloc_slot(b, 1))
        return 0; /* (a slot half allocated is freed with the batcher) */
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->nslots = 2;
    atomic_store(&b->completed, b->produced);
    b->prefetch = b->on_pool = 1;
    if (eng_pool_set_idle(idle_gather, b)) return 1;
    /* another batcher has the pool's idle time: gather as before */
    b->prefetch = b->on_pool = 0;
    b->nslots = 1;
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    return 0;
}

int eng_batcher_prefetching(const eng_batcher *b) { return b->prefetch; }

long eng_batcher_set_share(eng_batcher *b, double lo, double hi)
{
    if (b->full || b->shard_size < 2) return -1;
    if (b->prefetch) pthread_mutex_lock(&b->mu);
    /* The caller holds batch c (handed out last); slot c % nslots is freed when it asks for
     * c + 1, so batch c + nslots, which reuses that slot, is the first one not yet set up
     * on any rank, whatever its prefetch thread has done. */
    long c = (b->prefetch ? b->consumed : b->produced) - 1, k = c + b->nslots;
    int e = (int)(k % SHARE_RING);
    b->share_batch[e] = k;
    b->share_lo[e] = lo < 0 ? 0 : lo;
    b->share_hi[e] = hi > 1 ? 1 : hi < lo ? lo : hi;
    if (b->prefetch) pthread_mutex_unlock(&b->mu);
    return k;
}

void eng_batcher_gather_counts(eng_batcher *b, long *by_thread, long *by_caller)
{
    *by_thread = *by_caller = 0;
    if (!b->prefetch) return;
    *by_thread = atomic_load(&b->rows_by_thread);
    *by_caller = atomic_load(&b->rows_by_caller);
}

int eng_batcher_batches_per_epoch(const eng_batcher *b) { return b->bpe; }

void eng_batcher_destroy(eng_batcher *b)
{
    if (!b) return;
    if (b->on_pool) {
        eng_pool_set_idle(NULL, NULL); /* returns once no worker is in idle_gather */
    } else if (b->prefetch) {
        pthread_mutex_lock(&b->mu);
        b->stop = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thread, NULL);
    }
    if (b->prefetch) {
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
    }
    for (int s = 0; s < MAX_SLOTS; s++) { prof_free(b->x[s]); prof_free(b->y[s]); prof_free(b->t[s]); }
    prof_free(b->perm);
    eng_throttle_free(b->thr);
    prof_free(b);
}
