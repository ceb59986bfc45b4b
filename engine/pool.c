/* pool.c — the engine's one worker pool: the GEMM slabs of gemm.c and the elementwise loops
 * (bias, activations, the optimizer update) run on it, so that at T threads the training
 * thread is one of T and no second set of threads competes with the first.
 *
 * A job is nslab slabs of one function. Slab 0 is the caller's and slab i worker i's, so that
 * consecutive jobs cut alike (a GEMM and the bias and optimizer loops after it) find their
 * data in the cache of the core that wrote it; but a slab is only run once claimed (one CAS
 * on generation|claimed bits), and after its own slab the caller claims every slab still
 * unclaimed, so a worker that is asleep, or descheduled on a busy machine, delays nothing:
 * the caller runs its slab. A worker started during a job claims its slab if still there.
 * Workers spin up to SPIN_ITERS pauses for the next job (about a millisecond: a training
 * step's gaps between jobs are shorter, and waking a sleeping thread cost a VM more than a
 * slab saved: the Fashion MLP at 2 threads ran 112k samples/s with 200 pauses, 157k with
 * 4000, 172k with 40000), then sleep on a condition variable, so a busy machine loses at
 * most that. One caller drives the pool at a time: a nested call (from inside a slab) or a
 * concurrent one (another thread) gets 0 from eng_pool_run and runs its work unsplit. */
#include "internal.h"

#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define SPIN_ITERS 40000

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    /* generation << 32 | one bit per claimed slab; the bits from nslab up are set when the
     * job is posted, so a finished job has every bit set and nothing to claim even for a
     * thread that reads the next job's fields, which are written before its generation. */
    _Atomic uint64_t state;
    atomic_int finished;     /* slabs of the current generation completed */
    atomic_int busy;         /* a caller drives the pool */
    atomic_int sleepers;     /* workers in (or entering) the wait on `wake` */
    atomic_int waiting;      /* the caller sleeps on `done` */
    /* The job: atomics because a worker may read them while the caller, having seen every
     * slab of the previous generation finished, writes the next; such a reader's CAS on
     * `state` then fails and it reads again. */
    _Atomic(eng_pool_fn) fn;
    _Atomic(void *) ctx;
    atomic_int nslab;
    int nthreads;            /* workers started */
    atomic_long slabs_by_workers; /* slabs run by workers (tests and benches: did they help) */
    atomic_long joins;            /* eng_pool_join_stats: jobs split (the caller's own thread) */
    atomic_llong join_wait_ns;    /* and how long it waited after its slabs for the others' */
} pool = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER,
            /* generation 0 posts nothing: every bit claimed, or a worker started before the
             * first job would claim a slab of no job and call a NULL function */
            .state = 0xffffffffu };

static int pool_threads = 1; /* eng_pool_set_threads */

/* The idle task (eng_pool_set_idle): fn and ctx, and how many workers are inside it. */
static _Atomic(eng_pool_idle_fn) idle_fn;
static _Atomic(void *) idle_ctx;
static atomic_int idle_inside;
/* A worker spinning for a job calls the idle task after this many pauses without one (a
 * few microseconds: the gaps between a step's jobs are shorter), then every IDLE_EVERY
 * while the task has nothing to do (each call may take a lock). */
#define IDLE_AFTER 100
#define IDLE_EVERY 64

_Atomic(eng_pool_claim_hook_fn) eng_pool_claim_hook;
_Atomic(eng_pool_post_hook_fn) eng_pool_post_hook;

void eng_pool_set_threads(int n) { pool_threads = n < 1 ? 1 : n > ENG_POOL_MAX ? ENG_POOL_MAX : n; }
int eng_pool_threads(void) { return pool_threads; }
long eng_pool_worker_slabs(void) { return atomic_load(&pool.slabs_by_workers); }

void eng_pool_join_stats(long *joins, double *wait_s)
{
    *joins = atomic_load_explicit(&pool.joins, memory_order_relaxed);
    *wait_s = (double)atomic_load_explicit(&pool.join_wait_ns, memory_order_relaxed) * 1e-9;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static unsigned gen_of(uint64_t st) { return (unsigned)(st >> 32); }

/* Claims slab `want` of generation gen (-1: the first unclaimed one; -2: the first
 * unclaimed one after slab 0) and reads its job;
 * the slab, or -1 when it is taken, beyond the job, or the generation is over (*nslab 0
 * then). A successful CAS proves the job was read inside its generation: the caller
 * rewrites it only after every bit was claimed and every slab finished. */
static int claim(unsigned gen, int want, eng_pool_fn *fn, void **ctx, int *nslab)
{
    uint64_t st = atomic_load_explicit(&pool.state, memory_order_acquire);
    for (;;) {
        eng_pool_claim_hook_fn hook = atomic_load_explicit(&eng_pool_claim_hook, memory_order_relaxed);
        if (hook) hook(st);
        *nslab = 0;
        if (gen_of(st) != gen) return -1;
        *fn = atomic_load_explicit(&pool.fn, memory_order_relaxed);
        *ctx = atomic_load_explicit(&pool.ctx, memory_order_relaxed);
        *nslab = atomic_load_explicit(&pool.nslab, memory_order_relaxed);
        uint32_t free_bits = ~(uint32_t)st & (want == -2 ? ~1u : ~0u);
        if (!free_bits) return -1;
        int s = want < 0 ? __builtin_ctz(free_bits) : want;
        if (s >= 32 || !(free_bits >> s & 1u)) return -1;
        if (atomic_compare_exchange_weak_explicit(&pool.state, &st, st | (uint64_t)1 << s, memory_order_acq_rel,
                                                  memory_order_acquire))
            return s;
    }
}

/* Runs slab s of the job and counts it finished; a worker finishing the last one wakes a
 * caller that sleeps. */
static void run_slab(eng_pool_fn fn, void *ctx, int s, int n, int worker)
{
    fn(ctx, s, n);
    if (worker) atomic_fetch_add_explicit(&pool.slabs_by_workers, 1, memory_order_relaxed);
    /* seq_cst with the caller's store of `waiting`: one of the two sees the other */
    if (atomic_fetch_add(&pool.finished, 1) + 1 == n && worker && atomic_load(&pool.waiting)) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_signal(&pool.done);
        pthread_mutex_unlock(&pool.mu);
    }
}

/* Participant `me` (0: the caller) runs its own slab of gen if still unclaimed, then every
 * slab nobody has claimed yet. Slab 0 is the caller's alone: it finds its data in the
 * caller's cache, and what a slab 0 does on the training thread (ops.c profiles the work
 * fused into a GEMM's slabs there) never runs on a worker. A caller that is late delays
 * nothing by that: the job ends only when it is back. */
static void work(unsigned gen, int me)
{
    eng_pool_fn fn;
    void *ctx;
    int n, s;
    if ((s = claim(gen, me, &fn, &ctx, &n)) >= 0) run_slab(fn, ctx, s, n, me > 0);
    else if (me > 0 && me >= n)
        return; /* no slab of its own: taking one would move it off its owner's core */
    while ((s = claim(gen, me > 0 ? -2 : -1, &fn, &ctx, &n)) >= 0) run_slab(fn, ctx, s, n, me > 0);
}

/* One call of the idle task, if one is set; whether it did some work. seq_cst with
 * eng_pool_set_idle: a worker that counts itself inside after the task was cleared and the
 * count read reads the cleared task. */
static int run_idle(void)
{
    atomic_fetch_add(&idle_inside, 1);
    eng_pool_idle_fn fn = atomic_load(&idle_fn);
    int did = fn ? fn(atomic_load(&idle_ctx)) : 0;
    atomic_fetch_sub(&idle_inside, 1);
    return did;
}

/* Setters serialise on a mutex; a worker reads fn, then ctx, counted inside: ctx is written
 * before fn, and a clear waits for every worker inside, so none pairs one task's fn with
 * another's ctx. */
int eng_pool_set_idle(eng_pool_idle_fn fn, void *ctx)
{
    static pthread_mutex_t set_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&set_mu);
    int ok = !fn || !atomic_load(&idle_fn);
    if (ok && fn) {
        atomic_store(&idle_ctx, ctx);
        atomic_store(&idle_fn, fn);
    } else if (ok) {
        atomic_store(&idle_fn, NULL);
        while (atomic_load(&idle_inside)) cpu_relax();
    }
    pthread_mutex_unlock(&set_mu);
    return ok;
}

/* The first generation after `seen`: spin (running the idle task while there is none),
 * then sleep. The count of sleepers is raised before the generation is read again under
 * the mutex (seq_cst, as the caller's publish then read of it), so either the caller sees
 * a sleeper and broadcasts under the mutex, or this thread sees the new generation and does
 * not sleep. */
static unsigned wait_gen(unsigned seen)
{
    unsigned g;
    for (int spins = 0, next_idle = IDLE_AFTER; spins < SPIN_ITERS; spins++) {
        if ((g = gen_of(atomic_load_explicit(&pool.state, memory_order_acquire))) != seen) return g;
        if (spins >= next_idle && atomic_load_explicit(&idle_fn, memory_order_relaxed)) {
            if (run_idle()) spins = next_idle = IDLE_AFTER; /* working: stay awake */
            else next_idle = spins + IDLE_EVERY;
            continue;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&pool.mu);
    atomic_fetch_add(&pool.sleepers, 1);
    while ((g = gen_of(atomic_load(&pool.state))) == seen) pthread_cond_wait(&pool.wake, &pool.mu);
    atomic_fetch_sub(&pool.sleepers, 1);
    pthread_mutex_unlock(&pool.mu);
    return g;
}

static void *pool_main(void *arg)
{
    int me = (int)(intptr_t)arg; /* its slab: 1.. */
    omp_set_num_threads(1);      /* oneDNN slabs run single-threaded here (gemm.c) */
    /* Whatever generation is current when the worker starts is either over (nothing left
     * to claim) or shared with it: claiming needs no head count of workers. */
    unsigned seen = gen_of(atomic_load(&pool.state)) - 1;
    for (;;) {
        seen = wait_gen(seen);
        work(seen, me);
    }
    return NULL;
}

/* Starts workers up to n - 1 (once; they live as long as the process); a thread that
 * cannot be started leaves its slabs to the others. */
static void pool_grow(int n)
{
    if (n > ENG_POOL_MAX) n = ENG_POOL_MAX;
    if (__atomic_load_n(&pool.nthreads, __ATOMIC_ACQUIRE) >= n - 1) return; /* every call after the first */
    pthread_mutex_lock(&pool.mu);
    while (pool.nthreads < n - 1) {
        pthread_attr_t at;
        pthread_t tid;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = prof_thread_create(&tid, &at, pool_main, (void *)(intptr_t)(pool.nthreads + 1));
        pthread_attr_destroy(&at);
        if (rc) break;
        __atomic_store_n(&pool.nthreads, pool.nthreads + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&pool.mu);
}

int eng_pool_run(int nslab, eng_pool_fn fn, void *ctx)
{
    if (nslab < 2 || nslab > ENG_POOL_MAX || atomic_exchange(&pool.busy, 1)) return 0;
    pool_grow(nslab);
    unsigned gen = gen_of(atomic_load_explicit(&pool.state, memory_order_relaxed)) + 1;
    atomic_store_explicit(&pool.finished, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&pool.ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&pool.nslab, nslab, memory_order_relaxed);
    eng_pool_post_hook_fn hook = atomic_load_explicit(&eng_pool_post_hook, memory_order_relaxed);
    if (hook) hook();
    /* publishes the job (seq_cst: see wait_gen) */
    atomic_store(&pool.state, (uint64_t)gen << 32 | (uint32_t)~((1u << nslab) - 1u));
    if (atomic_load(&pool.sleepers)) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.mu);
    }
    work(gen, 0);
    uint64_t own_done = prof_now_ns();
    /* Every slab is claimed; wait for those workers still run. */
    for (int spins = 0; atomic_load_explicit(&pool.finished, memory_order_acquire) < nslab && spins < SPIN_ITERS * 4; spins++)
        cpu_relax();
    if (atomic_load_explicit(&pool.finished, memory_order_acquire) < nslab) {
        pthread_mutex_lock(&pool.mu);
        atomic_store(&pool.waiting, 1);
        while (atomic_load(&pool.finished) < nslab) pthread_cond_wait(&pool.done, &pool.mu);
        atomic_store(&pool.waiting, 0);
        pthread_mutex_unlock(&pool.mu);
    }
    /* relaxed: counts read between jobs (the busy flag orders the callers) */
    atomic_fetch_add_explicit(&pool.join_wait_ns, (long long)(prof_now_ns() - own_done), memory_order_relaxed);
    atomic_fetch_add_explicit(&pool.joins, 1, memory_order_relaxed);
    atomic_store_explicit(&pool.busy, 0, memory_order_release);
    return 1;
}

/* ---- ranges ------------------------------------------------------------------------------ */

void eng_split_range(size_t len, size_t unit, int s, int nslab, size_t *lo, size_t *hi)
{
    size_t per = (len + (size_t)nslab - 1) / (size_t)nslab;
    size_t chunk = (per + unit - 1) / unit * unit;
    *lo = (size_t)s * chunk < len ? (size_t)s * chunk : len;
    *hi = *lo + chunk < len ? *lo + chunk : len;
}

typedef struct {
    eng_pool_range_fn fn;
    void *ctx;
    size_t n;
    int cut; /* the slabs [0, n) is cut into (eng_split_range); the trailing ones may be empty */
} range_job;

static void range_slab(void *p, int s, int nslab)
{
    (void)nslab;
    const range_job *j = p;
    size_t lo, hi;
    eng_split_range(j->n, ENG_SPLIT_UNIT, s, j->cut, &lo, &hi);
    if (lo < hi) j->fn(j->ctx, lo, hi);
}

void eng_pool_for(size_t n, size_t grain, eng_pool_range_fn fn, void *ctx)
{
    size_t nslab = grain ? n / grain : n;
    if (nslab > (size_t)pool_threads) nslab = (size_t)pool_threads;
    if (nslab >= 2) {
        /* Slab edges on whole 64-byte lines of floats: two threads never write one line. */
        size_t lo, chunk;
        eng_split_range(n, ENG_SPLIT_UNIT, 0, (int)nslab, &lo, &chunk);
        range_job j = { fn, ctx, n, (int)nslab };
        if (eng_pool_run((int)((n + chunk - 1) / chunk), range_slab, &j)) return;
    }
    fn(ctx, 0, n);
}
