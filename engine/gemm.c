/* gemm.c — the one fp32 GEMM entry point of the engine (eng_sgemm) and its backends:
 * OpenBLAS (whatever core it runs) and oneDNN's dnnl_sgemm. Which backend serves a call
 * is looked up per shape class in a table that eng_gemm_prepare (gemm_probe.c) fills with
 * verified, measured choices; an unprepared class runs on OpenBLAS.
 *
 * oneDNN threads through OpenMP, whose libgomp workers spin-wait: under load from another
 * process its 2-thread calls collapsed to under 1 GFLOP/s on small shapes. So oneDNN is
 * always called single-threaded here, and with T threads the output is cut into T slabs run
 * by T-1 pool threads of our own plus the caller; the pool spins a bounded while (the next
 * GEMM of a step usually follows within it) and then sleeps. */
#include "gemm_internal.h"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* ---- the class table ------------------------------------------------------------------ */

static unsigned char class_backend[ENG_GEMM_CLASSES]; /* eng_gemm_backend + 1; 0 = unprepared */

static int log2_bucket(int x)
{
    if (x <= 1) return 0;
    int b = 31 - __builtin_clz((unsigned)x);
    return b > 15 ? 15 : b;
}

int eng_gemm_class(int ta, int tb, int M, int N, int K)
{
    return (((ta ? 2 : 0) + (tb ? 1 : 0)) * 16 + log2_bucket(M)) * 256 + log2_bucket(N) * 16 + log2_bucket(K);
}

void eng_gemm_class_set(int cls, eng_gemm_backend be)
{
    if (cls >= 0 && cls < ENG_GEMM_CLASSES) class_backend[cls] = (unsigned char)(be + 1);
}

void eng_gemm_classes_clear(void) { memset(class_backend, 0, sizeof class_backend); }

eng_gemm_backend eng_gemm_class_get(int cls)
{
    int v = cls >= 0 && cls < ENG_GEMM_CLASSES ? class_backend[cls] : 0;
    return v ? (eng_gemm_backend)(v - 1) : ENG_GEMM_OPENBLAS;
}

/* ---- OpenBLAS ----------------------------------------------------------------------- */

static void run_openblas(const gemm_call *c)
{
    cblas_sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans, c->tb ? CblasTrans : CblasNoTrans, c->M, c->N,
                c->K, c->alpha, c->A, c->lda, c->B, c->ldb, c->beta, c->C, c->ldc);
}

/* ---- oneDNN, single-threaded per slab --------------------------------------------------- */

static int dnnl_one(const gemm_call *c)
{
    return dnnl_sgemm(c->ta ? 'T' : 'N', c->tb ? 'T' : 'N', c->M, c->N, c->K, c->alpha, c->A, c->lda, c->B,
                      c->ldb, c->beta, c->C, c->ldc) == dnnl_success ? 0 : -1;
}

/* Slab s of nslab: rows of C (and of op(A)) when M is the longer side, else columns. */
static gemm_call slab(const gemm_call *c, int s, int nslab)
{
    gemm_call p = *c;
    int by_rows = c->M >= c->N;
    int len = by_rows ? c->M : c->N;
    int unit = by_rows ? 8 : 16; /* keep slabs on whole vector widths */
    int per = (len + nslab - 1) / nslab;
    int chunk = (per + unit - 1) / unit * unit;
    int lo = s * chunk, hi = lo + chunk < len ? lo + chunk : len;
    if (lo > len) lo = len;
    if (by_rows) {
        p.M = hi - lo;
        p.A = c->ta ? c->A + lo : c->A + (size_t)lo * (size_t)c->lda;
        p.C = c->C + (size_t)lo * (size_t)c->ldc;
    } else {
        p.N = hi - lo;
        p.B = c->tb ? c->B + (size_t)lo * (size_t)c->ldb : c->B + lo;
        p.C = c->C + lo;
    }
    return p;
}

/* The pool: workers wait for a new generation, run their slab, count down `left`. They
 * spin up to SPIN_ITERS pauses (about a millisecond: a training step's gaps between GEMMs
 * are shorter, and waking a sleeping thread cost a VM more than the slab saved: the
 * Fashion MLP at 2 threads ran 112k samples/s with 200 pauses, 157k with 4000, 172k with
 * 40000), then sleep on a condition variable, so a busy machine loses at most that. */
#define POOL_MAX 8
#define SPIN_ITERS 40000
static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_uint gen;
    atomic_int left;
    atomic_int failed;
    atomic_int busy;
    int nthreads;       /* workers started (the caller is one more slab) */
    unsigned start_gen[POOL_MAX]; /* gen when each worker started: it joins the next one */
    int nslab;
    gemm_call call;
    pthread_t tid[POOL_MAX];
} pool = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER };

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *pool_main(void *arg)
{
    int me = (int)(intptr_t)arg; /* slab index, 1.. */
    omp_set_num_threads(1);
    /* A worker started while the pool had fewer must not take part in a call posted
     * before it existed: that call counted only the workers it knew (`left`). */
    pthread_mutex_lock(&pool.mu);
    unsigned seen = pool.start_gen[me - 1];
    pthread_mutex_unlock(&pool.mu);
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen && spins < SPIN_ITERS) {
            cpu_relax();
            spins++;
        }
        if (g == seen) {
            pthread_mutex_lock(&pool.mu);
            while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen)
                pthread_cond_wait(&pool.wake, &pool.mu);
            pthread_mutex_unlock(&pool.mu);
        }
        seen = g;
        if (me < pool.nslab) {
            gemm_call p = slab(&pool.call, me, pool.nslab);
            if ((p.M > 0 && p.N > 0) && dnnl_one(&p)) atomic_store(&pool.failed, 1);
        }
        if (atomic_fetch_sub_explicit(&pool.left, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
    return NULL;
}

/* Starts workers up to n - 1 (once; they live as long as the process). */
static int pool_grow(int n)
{
    if (n > POOL_MAX) n = POOL_MAX;
    int have = __atomic_load_n(&pool.nthreads, __ATOMIC_ACQUIRE);
    if (have >= n - 1) return have + 1; /* every call after the first: no lock */
    pthread_mutex_lock(&pool.mu);
    while (pool.nthreads < n - 1) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pool.start_gen[pool.nthreads] = atomic_load(&pool.gen);
        int rc = pthread_create(&pool.tid[pool.nthreads], &at, pool_main, (void *)(intptr_t)(pool.nthreads + 1));
        pthread_attr_destroy(&at);
        if (rc) break;
        __atomic_store_n(&pool.nthreads, pool.nthreads + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&pool.mu);
    return pool.nthreads + 1;
}

static int gemm_threads = 1; /* eng_gemm_set_threads */

void eng_gemm_set_threads(int n) { gemm_threads = n < 1 ? 1 : n > POOL_MAX ? POOL_MAX : n; }
int eng_gemm_threads(void) { return gemm_threads; }

/* Worth splitting: every slab keeps enough work to pay a wake-up (~2 us). */
static int split_count(const gemm_call *c, int want)
{
    double flops = 2.0 * c->M * (double)c->N * c->K;
    int len = c->M >= c->N ? c->M : c->N;
    int n = want;
    while (n > 1 && (flops / n < 2e5 || len / n < 16)) n--;
    return n;
}

static int run_onednn(const gemm_call *c)
{
    /* The int8 path (qgemm_dnnl.c) sets this thread's OpenMP count; fp32 runs one thread. */
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
    int n = split_count(c, gemm_threads);
    if (n > 1) {
        int have = pool_grow(n);
        if (have < n) n = have;
    }
    /* One caller at a time drives the pool; another thread meanwhile runs unsplit. */
    if (n <= 1 || atomic_exchange(&pool.busy, 1)) return dnnl_one(c);
    pool.call = *c;
    pool.nslab = n;
    atomic_store(&pool.failed, 0);
    /* Under the mutex: pool_grow adds workers under it, so `left` counts exactly the
     * workers that will see this generation. */
    pthread_mutex_lock(&pool.mu);
    atomic_store_explicit(&pool.left, pool.nthreads, memory_order_release);
    atomic_fetch_add_explicit(&pool.gen, 1, memory_order_release);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    gemm_call p = slab(c, 0, n);
    int rc = p.M > 0 && p.N > 0 ? dnnl_one(&p) : 0;
    int spins = 0;
    while (atomic_load_explicit(&pool.left, memory_order_acquire) > 0 && spins < SPIN_ITERS * 4) {
        cpu_relax();
        spins++;
    }
    if (atomic_load_explicit(&pool.left, memory_order_acquire) > 0) {
        pthread_mutex_lock(&pool.mu);
        while (atomic_load_explicit(&pool.left, memory_order_acquire) > 0) pthread_cond_wait(&pool.done, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
    rc = rc || atomic_load(&pool.failed) ? -1 : 0;
    atomic_store(&pool.busy, 0);
    return rc;
}

int eng_gemm_run(eng_gemm_backend be, const gemm_call *c)
{
    if (c->M <= 0 || c->N <= 0) return 0;
    if (be == ENG_GEMM_ONEDNN) return run_onednn(c);
    run_openblas(c);
    return 0;
}

void eng_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
               int ldb, float beta, float *C, int ldc)
{
    gemm_call c = { ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc };
    int v = class_backend[eng_gemm_class(ta, tb, M, N, K)];
    /* dnnl_sgemm fails only in its argument checks, before it writes C; should that ever
     * happen, OpenBLAS does the call. */
    if (v == ENG_GEMM_ONEDNN + 1 && run_onednn(&c) == 0) return;
    run_openblas(&c);
}
