/* batcher.c — minibatches of the training set: a seeded permutation per epoch, rows
 * gathered into preallocated buffers, optionally one batch ahead on a second thread. */
#include "data_internal.h"

#include <pthread.h>
#include <string.h>

#include "rng.h"

enum { SLOT_FREE, SLOT_READY, SLOT_HELD };

struct eng_batcher {
    const eng_dataset *ds;
    int n, batch, bpe, shuffle, full;
    /* Producer side: only the thread that gathers (the caller without prefetch) touches
     * these, so the order of batches never depends on thread timing. */
    eng_rng rng;
    int32_t *perm;
    long produced;
    /* Two slots: with prefetch the producer fills one while the caller holds the other. */
    float *x[2];
    int32_t *y[2];
    float *t[2];
    eng_batch meta[2];
    int state[2];
    long consumed;
    int held;             /* slot the caller holds, -1 none */
    int prefetch;         /* 1 when the thread runs */
    int stop;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* Gathers the next batch (in the global order) into slot s. */
static void produce(eng_batcher *b, int s)
{
    const eng_dataset *ds = b->ds;
    long k = b->produced++;
    int epoch = (int)(k / b->bpe), i = (int)(k % b->bpe);
    if (i == 0 && b->shuffle)
        for (int j = b->n - 1; j > 0; j--) {
            int r = (int)eng_rng_below(&b->rng, (uint64_t)j + 1);
            int32_t tmp = b->perm[j]; b->perm[j] = b->perm[r]; b->perm[r] = tmp;
        }
    int start = i * b->batch;
    int rows = b->n - start < b->batch ? b->n - start : b->batch;
    size_t d = ds->in_size, nt = (size_t)ds->n_targets;
    for (int r = 0; r < rows; r++) {
        size_t src = (size_t)b->perm[start + r];
        memcpy(b->x[s] + (size_t)r * d, ds->x_train + src * d, d * sizeof(float));
        if (b->y[s]) b->y[s][r] = ds->y_train[src];
        if (b->t[s]) memcpy(b->t[s] + (size_t)r * nt, ds->t_train + src * nt, nt * sizeof(float));
    }
    b->meta[s] = (eng_batch){ .x = b->x[s], .y = b->y[s], .t = b->t[s], .rows = rows,
                              .epoch = epoch, .last_in_epoch = i == b->bpe - 1 };
}

static void *prefetch_main(void *arg)
{
    eng_batcher *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        int s = (int)(b->produced % 2);
        while (!b->stop && b->state[s] != SLOT_FREE) pthread_cond_wait(&b->cv, &b->mu);
        if (b->stop) break;
        pthread_mutex_unlock(&b->mu);
        produce(b, s);
        pthread_mutex_lock(&b->mu);
        b->state[s] = SLOT_READY;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

int eng_batcher_create(const eng_dataset *ds, int batch, int shuffle, int prefetch,
                       uint64_t seed, eng_batcher **out)
{
    *out = NULL;
    if (!ds || ds->n_train < 1)
        return eng_fail(ENG_EINVAL, "batcher: the training set is empty");
    eng_batcher *b = prof_calloc(1, sizeof *b);
    if (!b) return eng_fail(ENG_ENOMEM, "batcher: out of memory");
    b->ds = ds;
    b->n = ds->n_train;
    b->full = batch <= 0 || batch >= b->n;
    b->batch = b->full ? b->n : batch;
    b->bpe = (b->n + b->batch - 1) / b->batch;
    b->shuffle = shuffle && !b->full;
    b->held = -1;
    eng_rng_seed(&b->rng, seed, ENG_STREAM_DATA_SHUFFLE);
    if (b->full) {
        /* The whole set in its stored order, served in place: nothing to gather, and a
         * full-batch gradient does not depend on the order of rows. */
        b->meta[0] = (eng_batch){ .x = ds->x_train, .y = ds->y_train, .t = ds->t_train,
                                  .rows = b->n, .last_in_epoch = 1 };
        *out = b;
        return ENG_OK;
    }
    b->perm = prof_malloc((size_t)b->n * sizeof(int32_t));
    int ok = b->perm != NULL;
    for (int i = 0; ok && i < b->n; i++) b->perm[i] = i;
    int slots = prefetch ? 2 : 1;
    for (int s = 0; ok && s < slots; s++) {
        b->x[s] = prof_malloc((size_t)b->batch * ds->in_size * sizeof(float));
        ok = b->x[s] != NULL;
        if (ok && ds->y_train) ok = (b->y[s] = prof_malloc((size_t)b->batch * sizeof(int32_t))) != NULL;
        if (ok && ds->t_train)
            ok = (b->t[s] = prof_malloc((size_t)b->batch * (size_t)ds->n_targets * sizeof(float))) != NULL;
    }
    if (!ok) {
        eng_batcher_destroy(b);
        return eng_fail(ENG_ENOMEM, "batcher: out of memory for batches of %d rows", b->batch);
    }
    if (prefetch) {
        pthread_mutex_init(&b->mu, NULL);
        pthread_cond_init(&b->cv, NULL);
        int err = pthread_create(&b->thread, NULL, prefetch_main, b);
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

int eng_batcher_next(eng_batcher *b, eng_batch *out)
{
    if (b->full) {
        *out = b->meta[0];
        out->epoch = (int)b->consumed++;
        return ENG_OK;
    }
    if (!b->prefetch) {
        produce(b, 0);
        *out = b->meta[0];
        return ENG_OK;
    }
    pthread_mutex_lock(&b->mu);
    if (b->held >= 0) {                      /* the previous batch is no longer in use */
        b->state[b->held] = SLOT_FREE;
        pthread_cond_broadcast(&b->cv);
    }
    int s = (int)(b->consumed % 2);
    while (b->state[s] != SLOT_READY) pthread_cond_wait(&b->cv, &b->mu);
    b->state[s] = SLOT_HELD;
    b->held = s;
    b->consumed++;
    *out = b->meta[s];
    pthread_mutex_unlock(&b->mu);
    return ENG_OK;
}

int eng_batcher_batches_per_epoch(const eng_batcher *b) { return b->bpe; }

void eng_batcher_destroy(eng_batcher *b)
{
    if (!b) return;
    if (b->prefetch) {
        pthread_mutex_lock(&b->mu);
        b->stop = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thread, NULL);
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
    }
    for (int s = 0; s < 2; s++) { prof_free(b->x[s]); prof_free(b->y[s]); prof_free(b->t[s]); }
    prof_free(b->perm);
    prof_free(b);
}
