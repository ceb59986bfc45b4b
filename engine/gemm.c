/* gemm.c — the one fp32 GEMM entry point of the engine (eng_sgemm) and its backends:
 * OpenBLAS (whatever core it runs) and oneDNN's dnnl_sgemm. Which backend serves a call
 * is looked up per shape class in a table that eng_gemm_prepare (gemm_probe.c) fills with
 * verified, measured choices; an unprepared class runs on OpenBLAS.
 *
 * oneDNN threads through OpenMP, whose libgomp workers spin-wait: under load from another
 * process its 2-thread calls collapsed to under 1 GFLOP/s on small shapes. So oneDNN is
 * always called single-threaded here, and with T threads the output is cut into T slabs run
 * on the engine's worker pool (pool.c), the caller included. */
#include "gemm_internal.h"
#include "lanes.h"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <stdatomic.h>
#include <string.h>

/* ---- the class table ------------------------------------------------------------------ */

static unsigned char class_backend[ENG_GEMM_CLASSES]; /* eng_gemm_backend + 1; 0 = unprepared */
static atomic_long unprepared_calls;                   /* eng_gemm_unprepared_calls */

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

static int gemm_threads = 1; /* eng_gemm_set_threads */

static int split_by_rows(const gemm_call *c)
{
    return (c->split == ENG_SPLIT_ROWS && c->M >= 16 * gemm_threads) || c->M >= c->N;
}

/* Slab s of nslab: rows of C (and of op(A)) or columns of C (and of op(B)), as c->split
 * says; [*lo, *hi) the rows or columns. */
static gemm_call slab(const gemm_call *c, int s, int nslab, size_t *lo_out, size_t *hi_out)
{
    gemm_call p = *c;
    int by_rows = split_by_rows(c);
    size_t lo, hi;
    eng_split_range((size_t)(by_rows ? c->M : c->N), ENG_SPLIT_UNIT, s, nslab, &lo, &hi);
    *lo_out = lo;
    *hi_out = hi;
    if (by_rows) {
        p.M = (int)(hi - lo);
        p.A = c->ta ? c->A + lo : c->A + (size_t)lo * (size_t)c->lda;
        p.C = c->C + (size_t)lo * (size_t)c->ldc;
    } else {
        p.N = (int)(hi - lo);
        p.B = c->tb ? c->B + (size_t)lo * (size_t)c->ldb : c->B + lo;
        p.C = c->C + lo;
    }
    return p;
}

void eng_gemm_set_threads(int n) { gemm_threads = n < 1 ? 1 : n > ENG_POOL_MAX ? ENG_POOL_MAX : n; }
int eng_gemm_threads(void) { return gemm_threads; }

/* Worth splitting: every slab keeps enough work to pay a wake-up (~2 us). */
static int split_count(const gemm_call *c, int want)
{
    double flops = 2.0 * c->M * (double)c->N * c->K;
    int len = split_by_rows(c) ? c->M : c->N;
    int n = want;
    while (n > 1 && (flops / n < 2e5 || len / n < 16)) n--;
    return n;
}

/* ---- work on C's rows after the product (eng_rows_after, internal.h) ---------------------- */

/* Slab s of nslab did rows [r0, r1): its part, then `last` if every slab's part is done
 * (seq_cst: the last adder sees every other slab's writes). */
static void after_slab(eng_rows_after *a, int s, int nslab, size_t r0, size_t r1)
{
    a->rows(a->ctx, s, r0, r1);
    if (atomic_fetch_add(&a->done, 1) + 1 == nslab && a->last) a->last(a->ctx);
}

typedef struct {
    eng_rows_after *a;
    size_t M;
} after_job;

static void after_rows_slab(void *ctx, int s, int nslab)
{
    const after_job *j = ctx;
    size_t lo, hi;
    eng_split_range(j->M, ENG_SPLIT_UNIT, s, nslab, &lo, &hi);
    after_slab(j->a, s, nslab, lo, hi);
}

/* The rows of a product not cut by rows: after it, cut by rows as an elementwise op is. */
static void after_whole(eng_rows_after *a, int M, int N)
{
    if (!a) return;
    after_job j = { a, (size_t)M };
    int n = eng_pool_threads();
    atomic_store(&a->done, 0);
    if (n > 1 && (size_t)M * (size_t)N >= ENG_EW_SPLIT_MIN && (size_t)M >= (size_t)n * ENG_SPLIT_UNIT &&
        eng_pool_run(n, after_rows_slab, &j))
        return;
    after_slab(a, 0, 1, 0, (size_t)M);
}

typedef struct {
    const gemm_call *c;
    atomic_int failed;
} gemm_job;

static void gemm_slab(void *ctx, int s, int nslab)
{
    gemm_job *j = ctx;
    size_t lo, hi;
    gemm_call p = slab(j->c, s, nslab, &lo, &hi);
    if (p.M > 0 && p.N > 0 && dnnl_one(&p)) {
        atomic_store(&j->failed, 1); /* no `last`: the caller redoes the whole call */
        return;
    }
    if (j->c->after && split_by_rows(j->c)) after_slab(j->c->after, s, nslab, lo, hi);
}

/* 0, or -1 when oneDNN refused (before writing C; nothing of `after` is left to undo
 * but rows it may redo). */
static int run_onednn(const gemm_call *c)
{
    /* The int8 path (qgemm_dnnl.c) sets this thread's OpenMP count; fp32 runs one thread. */
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
    int n = split_count(c, gemm_threads);
    gemm_job j = { c, 0 };
    if (c->after) atomic_store(&c->after->done, 0);
    /* The pool busy (another caller, or a call from inside a slab): unsplit. */
    if (n > 1 && eng_pool_run(n, gemm_slab, &j)) {
        if (atomic_load(&j.failed)) return -1;
        if (!split_by_rows(c)) after_whole(c->after, c->M, c->N);
        return 0;
    }
    if (dnnl_one(c)) return -1;
    after_whole(c->after, c->M, c->N);
    return 0;
}

int eng_gemm_run(eng_gemm_backend be, const gemm_call *c)
{
    if (c->M <= 0 || c->N <= 0) return 0;
    if (be == ENG_GEMM_ONEDNN) return run_onednn(c);
    run_openblas(c);
    after_whole(c->after, c->M, c->N);
    return 0;
}

/* The class of this shape is served by oneDNN (eng_gemm_prepare chose it, checked). */
static int onednn_serves(int ta, int tb, int M, int N, int K)
{
    return eng_gemm_class_get(eng_gemm_class(ta, tb, M, N, K)) == ENG_GEMM_ONEDNN;
}

long eng_gemm_unprepared_calls(void) { return atomic_load_explicit(&unprepared_calls, memory_order_relaxed); }

void eng_sgemm_split_after(eng_split split, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                           int lda, const float *B, int ldb, float beta, float *C, int ldc, eng_rows_after *after)
{
    gemm_call c = { ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, split, after };
    if (M <= 0 || N <= 0) return;
    int cls = eng_gemm_class(ta, tb, M, N, K);
    if (cls >= 0 && cls < ENG_GEMM_CLASSES && !class_backend[cls])
        atomic_fetch_add_explicit(&unprepared_calls, 1, memory_order_relaxed);
    /* dnnl_sgemm fails only in its argument checks, before it writes C; should that ever
     * happen, OpenBLAS does the call (and `after` every row again). */
    if (eng_gemm_class_get(cls) == ENG_GEMM_ONEDNN && run_onednn(&c) == 0) return;
    run_openblas(&c);
    after_whole(after, M, N);
}

void eng_sgemm_split(eng_split split, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc)
{
    eng_sgemm_split_after(split, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}

void eng_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
               int ldb, float beta, float *C, int ldc)
{
    eng_sgemm_split(ENG_SPLIT_AUTO, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ---- K cut over the pool ------------------------------------------------------------------ */

typedef struct {
    gemm_call c;
    float *work;  /* the partial products of slabs 1.. [M x N] each */
    atomic_int failed;
} ksplit_job;

/* Slab s: A[:, K_s] · B[K_s, :], into C (s = 0) or its own partial. */
static void ksplit_part(void *ctx, int s, int nslab)
{
    ksplit_job *j = ctx;
    gemm_call p = j->c;
    size_t lo, hi;
    eng_split_range((size_t)p.K, ENG_SPLIT_UNIT, s, nslab, &lo, &hi);
    p.A += lo;
    p.B += lo * (size_t)p.ldb;
    p.K = (int)(hi - lo);
    if (s) {
        p.C = j->work + (size_t)(s - 1) * (size_t)p.M * (size_t)p.N;
        p.ldc = p.N;
    }
    if (dnnl_one(&p)) atomic_store(&j->failed, 1);
}

/* Rows of slab s: C += the partials, in slab order (the same bits however rows are cut),
 * then the call's work on those rows. */
static void ksplit_sum(void *ctx, int s, int nslab)
{
    ksplit_job *j = ctx;
    const gemm_call *c = &j->c;
    size_t lo, hi;
    eng_split_range((size_t)c->M, ENG_SPLIT_UNIT, s, nslab, &lo, &hi);
    size_t mn = (size_t)c->M * (size_t)c->N;
    for (size_t r = lo; r < hi; r++)
        for (int k = 1; k < gemm_threads; k++) {
            float *row = c->C + r * (size_t)c->ldc;
            lanes_add(row, j->work + (size_t)(k - 1) * mn + r * (size_t)c->N, row, (size_t)c->N);
        }
    if (c->after) after_slab(c->after, s, nslab, lo, hi);
}

size_t eng_sgemm_ksplit_floats(int M, int N, int K)
{
    if (gemm_threads < 2 || K / gemm_threads < 64 || M < 8) return 0;
    return (size_t)(gemm_threads - 1) * (size_t)M * (size_t)N;
}

void eng_sgemm_ksplit(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
                      float *work, size_t work_floats, eng_rows_after *after)
{
    size_t need = eng_sgemm_ksplit_floats(M, N, K);
    ksplit_job j = { { 0, 0, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, ENG_SPLIT_ROWS, after }, work, 0 };
    if (!onednn_serves(0, 0, M, N, K) || !need || need > work_floats) {
        eng_sgemm_split_after(ENG_SPLIT_ROWS, 0, 0, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, after);
        return;
    }
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
    if (!eng_pool_run(gemm_threads, ksplit_part, &j) || atomic_load(&j.failed)) {
        /* the pool driven already (a nested call), or a slab refused: the whole product */
        eng_sgemm_split_after(ENG_SPLIT_ROWS, 0, 0, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, after);
        return;
    }
    if (after) atomic_store(&after->done, 0);
    if (!eng_pool_run(gemm_threads, ksplit_sum, &j)) ksplit_sum(&j, 0, 1);
}
