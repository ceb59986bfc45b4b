/* gemm.c (tests) — the fp32 GEMM entry point (engine/gemm*.c): every backend forced on
 * every transpose, padded strides, alpha/beta and thread count against a double reference;
 * the probe's verdicts (a backend made to compute a wrong element, or to crash, is skipped
 * with a note and the run goes on with the other); the per-machine cache (written once,
 * read back without a probe, an unreadable line reported and rewritten); one backend for
 * the whole model with threads; the config key. Speed is never asserted: machines differ. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "../../engine/gemm_internal.h"
#include "../../profiler/profiler.h"

static char cache_dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(cache_dir, sizeof cache_dir, "/tmp/nnbench-gemm-XXXXXX");
    if (!mkdtemp(cache_dir)) return -1;
    setenv("NNBENCH_CACHE_DIR", cache_dir, 1);
    unsetenv("NNBENCH_GEMM_FAIL");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    if (system(cmd)) return -1;
    unsetenv("NNBENCH_CACHE_DIR");
    unsetenv("NNBENCH_GEMM_FAIL");
    eng_gemm_classes_clear();
    eng_gemm_set_threads(1);
    return 0;
}

static float rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

/* Max |C - reference| / (sum of |terms| + |beta C0|) over the whole output, and whether the
 * padding columns of C are untouched. */
static double check_one(eng_gemm_backend be, eng_split split, int ta, int tb, int M, int N, int K, int *pad_ok)
{
    int lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
    size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4), *C0 = malloc(nc * 4);
    uint32_t s = 42u;
    for (size_t i = 0; i < na; i++) A[i] = rnd(&s);
    for (size_t i = 0; i < nb; i++) B[i] = rnd(&s);
    for (size_t i = 0; i < nc; i++) C0[i] = C[i] = rnd(&s);
    for (int c = 0; c < ENG_GEMM_CLASSES; c++) eng_gemm_class_set(c, be);
    eng_sgemm_split(split, ta, tb, M, N, K, 0.75f, A, lda, B, ldb, -0.5f, C, ldc);
    double worst = 0;
    *pad_ok = 1;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                sum += a * b;
                mag += fabs(a * b);
            }
            double c0 = C0[(size_t)i * ldc + j], ref = 0.75 * sum - 0.5 * c0;
            double e = fabs(C[(size_t)i * ldc + j] - ref) / (0.75 * mag + 0.5 * fabs(c0) + 1e-30);
            if (!(e <= worst)) worst = e;
        }
        for (int j = N; j < ldc; j++)
            if (C[(size_t)i * ldc + j] != C0[(size_t)i * ldc + j]) *pad_ok = 0;
    }
    free(A), free(B), free(C), free(C0);
    eng_gemm_classes_clear();
    return worst;
}

/* Every backend, forced, on every transpose and both cuts (the longer side, rows),
 * with 1 to 4 threads (3: the pool splits rows or columns into uneven slabs) and shapes
 * that split and that do not. */
static void test_backends_agree(void **state)
{
    (void)state;
    static const int shapes[][3] = { { 1, 1, 1 }, { 7, 5, 3 }, { 130, 70, 33 }, { 20, 300, 64 }, { 257, 9, 129 } };
    for (int be = 0; be < ENG_GEMM_NB; be++)
        for (int th = 1; th <= 4; th++) {
            eng_gemm_set_threads(th);
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int t = 0; t < 4 * 2; t++) {
                    int pad_ok;
                    eng_split sp = (eng_split)(t / 4);
                    double e = check_one((eng_gemm_backend)be, sp, t >> 1 & 1, t & 1, shapes[s][0], shapes[s][1],
                                         shapes[s][2], &pad_ok);
                    if (e > ENG_GEMM_TOL || !pad_ok)
                        print_error("%s %d threads cut %d t=%d %dx%dx%d: error %g, padding %s\n",
                                    eng_gemm_backend_name((eng_gemm_backend)be), th, (int)sp, t & 3, shapes[s][0],
                                    shapes[s][1], shapes[s][2], e, pad_ok ? "kept" : "written");
                    assert_true(e <= ENG_GEMM_TOL);
                    assert_true(pad_ok);
                }
        }
    eng_gemm_set_threads(1);
}

static atomic_int posts;
static void count_post(void) { atomic_fetch_add(&posts, 1); }

/* C = A B through the K cut, on backend be for every class; the pool jobs it posted. */
static int ksplit_run(eng_gemm_backend be, int M, int N, int K, const float *A, const float *B, float *C, int ldc,
                      float *work, size_t cap)
{
    for (int c = 0; c < ENG_GEMM_CLASSES; c++) eng_gemm_class_set(c, be);
    atomic_store(&posts, 0);
    atomic_store(&eng_pool_post_hook, count_post);
    eng_sgemm_ksplit(M, N, K, A, K + 1, B, N + 2, C, ldc, work, cap, NULL);
    atomic_store(&eng_pool_post_hook, NULL);
    eng_gemm_classes_clear();
    return atomic_load(&posts);
}

/* The K cut (eng_sgemm_ksplit) at 1 to 4 threads: within the tolerance of a double reference
 * with padded strides, the same bits on a second call, and two pool jobs (the parts, then
 * their sum) where it cuts. Where it does not (one thread, too little work space, a class
 * OpenBLAS serves) it posts no K job and gives the bits of eng_sgemm_split(ROWS). */
static void test_ksplit(void **state)
{
    (void)state;
    enum { M = 37, N = 50, K = 300, LDC = N + 3 };
    float *A = malloc(sizeof(float) * M * (K + 1)), *B = malloc(sizeof(float) * K * (N + 2));
    float *C = malloc(sizeof(float) * M * LDC), *C2 = malloc(sizeof(float) * M * LDC), *R = malloc(sizeof(float) * M * LDC);
    float *work = malloc(sizeof(float) * 3 * M * N);
    uint32_t s = 7u;
    for (int i = 0; i < M * (K + 1); i++) A[i] = rnd(&s);
    for (int i = 0; i < K * (N + 2); i++) B[i] = rnd(&s);
    for (int th = 1; th <= 4; th++) {
        eng_gemm_set_threads(th);
        size_t need = eng_sgemm_ksplit_floats(M, N, K);
        assert_int_equal(need, th == 1 ? 0 : (size_t)(th - 1) * M * N);
        for (int i = 0; i < M * LDC; i++) C[i] = C2[i] = R[i] = -7.0f; /* the padding must stay */
        int jobs = ksplit_run(ENG_GEMM_ONEDNN, M, N, K, A, B, C, LDC, work, need);
        assert_int_equal(jobs, th == 1 ? 0 : 2);
        ksplit_run(ENG_GEMM_ONEDNN, M, N, K, A, B, C2, LDC, work, need);
        assert_memory_equal(C, C2, sizeof(float) * M * LDC);
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                double sum = 0, mag = 0;
                for (int k = 0; k < K; k++) {
                    double t = (double)A[i * (K + 1) + k] * B[k * (N + 2) + j];
                    sum += t, mag += fabs(t);
                }
                assert_true(fabs(C[i * LDC + j] - sum) <= ENG_GEMM_TOL * mag);
            }
            for (int j = N; j < LDC; j++) assert_true(C[i * LDC + j] == -7.0f);
        }
        /* not cut: short work space, then OpenBLAS serving the class */
        for (int k = 0; k < 2; k++) {
            eng_gemm_backend be = k ? ENG_GEMM_OPENBLAS : ENG_GEMM_ONEDNN;
            ksplit_run(be, M, N, K, A, B, C, LDC, work, k ? need : need ? need - 1 : 0);
            for (int c = 0; c < ENG_GEMM_CLASSES; c++) eng_gemm_class_set(c, be);
            eng_sgemm_split(ENG_SPLIT_ROWS, 0, 0, M, N, K, 1.0f, A, K + 1, B, N + 2, 0.0f, R, LDC);
            eng_gemm_classes_clear();
            assert_memory_equal(C, R, sizeof(float) * M * LDC);
        }
    }
    eng_gemm_set_threads(1);
    free(A), free(B), free(C), free(C2), free(R), free(work);
}

/* ---- work on C's rows after the product (eng_rows_after) ----------------------------------
 * Each backend forced, 1 to 4 threads, a call cut by rows, one cut by columns (too few rows
 * for every thread), one left whole, and the K cut: every row is handed over once, on
 * 16-row edges, already computed (as the reference has it), slab 0 on the calling thread;
 * `last` runs once, after every row. */
#define AFTER_MAX_M 160
typedef struct {
    eng_rows_after a;
    const float *C;
    const double *ref;
    int M, N, ldc;
    pthread_t caller;
    atomic_int seen[AFTER_MAX_M];
    atomic_int handed, lasts, rows_at_last, bad;
} after_ctx;

static void after_rows_cb(void *ctx, int s, size_t r0, size_t r1)
{
    after_ctx *x = ctx;
    if (r0 % ENG_SPLIT_UNIT || (r1 % ENG_SPLIT_UNIT && r1 != (size_t)x->M) || r1 > (size_t)x->M || r0 > r1 ||
        (s == 0 && !pthread_equal(pthread_self(), x->caller)))
        atomic_fetch_add(&x->bad, 1);
    for (size_t r = r0; r < r1 && r < AFTER_MAX_M; r++) {
        atomic_fetch_add(&x->seen[r], 1);
        for (int j = 0; j < x->N; j++) {
            double want = x->ref[r * (size_t)x->N + j];
            if (fabs(x->C[r * (size_t)x->ldc + j] - want) > 1e-4 * (1.0 + fabs(want))) atomic_fetch_add(&x->bad, 1);
        }
    }
    atomic_fetch_add(&x->handed, (int)(r1 - r0));
}

static void after_last_cb(void *ctx)
{
    after_ctx *x = ctx;
    atomic_fetch_add(&x->lasts, 1);
    atomic_store(&x->rows_at_last, atomic_load(&x->handed));
}

static void test_after_rows(void **state)
{
    (void)state;
    static const int shapes[][4] = { { 128, 64, 50, 0 }, { 20, 300, 64, 0 }, { 7, 5, 3, 0 }, { 150, 40, 400, 1 } };
    float *A = malloc(sizeof(float) * AFTER_MAX_M * 400), *B = malloc(sizeof(float) * 400 * 300);
    float *C = malloc(sizeof(float) * AFTER_MAX_M * 301), *work = malloc(sizeof(float) * 3 * AFTER_MAX_M * 300);
    double *ref = malloc(sizeof(double) * AFTER_MAX_M * 300);
    uint32_t sd = 3u;
    for (int i = 0; i < AFTER_MAX_M * 400; i++) A[i] = rnd(&sd);
    for (int i = 0; i < 400 * 300; i++) B[i] = rnd(&sd);
    for (int be = 0; be < ENG_GEMM_NB; be++)
        for (int th = 1; th <= 4; th++)
            for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
                int M = shapes[k][0], N = shapes[k][1], K = shapes[k][2], ldc = N + 1;
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double sum = 0;
                        for (int q = 0; q < K; q++) sum += (double)A[i * K + q] * B[q * N + j];
                        ref[i * N + j] = sum;
                    }
                static after_ctx x;
                memset(&x, 0, sizeof x);
                x = (after_ctx){ .a = { .rows = after_rows_cb, .last = after_last_cb, .ctx = &x }, .C = C, .ref = ref,
                                 .M = M, .N = N, .ldc = ldc, .caller = pthread_self() };
                for (int c = 0; c < ENG_GEMM_CLASSES; c++) eng_gemm_class_set(c, (eng_gemm_backend)be);
                eng_gemm_set_threads(th);
                eng_pool_set_threads(th);
                if (shapes[k][3])
                    eng_sgemm_ksplit(M, N, K, A, K, B, N, C, ldc, work, (size_t)3 * AFTER_MAX_M * 300, &x.a);
                else
                    eng_sgemm_split_after(ENG_SPLIT_ROWS, 0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, ldc, &x.a);
                eng_gemm_classes_clear();
                int once = 1;
                for (int r = 0; r < M; r++) once &= atomic_load(&x.seen[r]) == 1;
                if (!once || atomic_load(&x.bad) || atomic_load(&x.lasts) != 1 || atomic_load(&x.rows_at_last) != M)
                    fail_msg("%s, %d threads, %dx%dx%d%s: rows once %d, bad %d, last %d times after %d rows",
                             eng_gemm_backend_name((eng_gemm_backend)be), th, M, N, K, shapes[k][3] ? " (K cut)" : "",
                             once, atomic_load(&x.bad), atomic_load(&x.lasts), atomic_load(&x.rows_at_last));
            }
    eng_gemm_set_threads(1);
    eng_pool_set_threads(1);
    free(A), free(B), free(C), free(work), free(ref);
}

static const eng_gemm_shape mlp[] = { { 0, 0, 128, 256, 784, 1 }, { 1, 0, 784, 256, 128, 1 }, { 0, 1, 128, 784, 256, 1 },
                                      { 0, 0, 128, 10, 128, 1 } };
#define N_MLP ((int)(sizeof mlp / sizeof mlp[0]))

static long cache_mtime_ns(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/gemm-choices", cache_dir);
    struct stat st;
    return stat(p, &st) ? -1 : st.st_mtim.tv_sec * 1000000000L + st.st_mtim.tv_nsec;
}

/* Both backends pass here (any machine: they are correct libraries); the choice and the
 * cache follow; a second prepare reads the cache and starts no probe. */
static void test_prepare_and_cache(void **state)
{
    (void)state;
    assert_int_equal(eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, 1, mlp, N_MLP), ENG_OK);
    assert_string_equal(eng_gemm_notes(), "");
    char d[512], cl[1024];
    eng_gemm_describe(d, sizeof d);
    eng_gemm_describe_classes(cl, sizeof cl);
    printf("  %s\n  %s\n", d, cl);
    assert_non_null(strstr(d, "/4 shape classes; auto, 1 thread"));
    assert_non_null(strstr(cl, "NN 128x256x784"));
    /* a record too small for every class keeps whole entries (a prefix of the full text
     * that ends where an entry ends) and says how many are left */
    char small[120];
    eng_gemm_describe_classes(small, sizeof small);
    printf("  %s\n", small);
    const char *tail = strstr(small, "and ");
    int left = 0;
    assert_non_null(tail);
    assert_int_equal(sscanf(tail, "and %d more classes", &left), 1);
    assert_int_equal(strcmp(tail + strlen(tail) - strlen("more classes"), "more classes"), 0);
    size_t kept = tail > small ? (size_t)(tail - small) - 2 : 0; /* before "; and" */
    assert_int_equal(strncmp(small, cl, kept), 0);
    assert_true(kept == 0 || cl[kept] == ';');
    int entries = 0;
    for (size_t i = 0; kept && i < kept; i++) entries += small[i] == ';';
    entries += kept > 0;
    assert_true(left >= 1 && entries + left == N_MLP);
    long t1 = cache_mtime_ns();
    assert_true(t1 > 0);
    usleep(20000);
    assert_int_equal(eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, 1, mlp, N_MLP), ENG_OK);
    assert_int_equal(cache_mtime_ns(), t1); /* nothing new measured, nothing written */
    /* forced: every class on the forced backend */
    assert_int_equal(eng_gemm_prepare(ENG_GEMM_POLICY_ONEDNN, 1, mlp, N_MLP), ENG_OK);
    for (int i = 0; i < N_MLP; i++)
        assert_int_equal(eng_gemm_class_get(eng_gemm_class(mlp[i].ta, mlp[i].tb, mlp[i].M, mlp[i].N, mlp[i].K)),
                         ENG_GEMM_ONEDNN);
    eng_gemm_describe(d, sizeof d);
    assert_non_null(strstr(d, "onednn 4/4 shape classes; onednn forced"));
    /* a call of a prepared class is not counted; one of a class no prepare measured is
     * (M = 40 rows: another power-of-two class than the prepared 128) */
    float *a = calloc(128 * 784, sizeof *a), *b = calloc(784 * 256, sizeof *b), *c = calloc(128 * 256, sizeof *c);
    assert_true(a && b && c);
    long before = eng_gemm_unprepared_calls();
    eng_sgemm(0, 0, 128, 256, 784, 1.0f, a, 784, b, 256, 0.0f, c, 256);
    assert_int_equal(eng_gemm_unprepared_calls(), before);
    eng_sgemm(0, 0, 40, 256, 784, 1.0f, a, 784, b, 256, 0.0f, c, 256);
    assert_int_equal(eng_gemm_unprepared_calls(), before + 1);
    free(a), free(b), free(c);
    /* with threads, one backend serves the whole model */
    assert_int_equal(eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, 2, mlp, N_MLP), ENG_OK);
    eng_gemm_backend first = eng_gemm_class_get(eng_gemm_class(0, 0, 128, 256, 784));
    for (int i = 1; i < N_MLP; i++)
        assert_int_equal(eng_gemm_class_get(eng_gemm_class(mlp[i].ta, mlp[i].tb, mlp[i].M, mlp[i].N, mlp[i].K)), first);
}

/* A backend that fails its check (wrong element; a crash) is skipped with a note; the
 * other serves; a cache line that does not parse is reported and measured again. */
static void check_skipped(const char *fail, const char *status)
{
    setenv("NNBENCH_GEMM_FAIL", fail, 1);
    char sub[64];
    snprintf(sub, sizeof sub, "/tmp/nnbench-gemm-%s-XXXXXX", status);
    assert_non_null(mkdtemp(sub));
    setenv("NNBENCH_CACHE_DIR", sub, 1);
    assert_int_equal(eng_gemm_prepare(ENG_GEMM_POLICY_ONEDNN, 1, mlp, N_MLP), ENG_OK);
    printf("  %s: %s\n", fail, eng_gemm_notes());
    char want[128];
    snprintf(want, sizeof want, "onednn failed its check on 4 of 4 shape classes (%s)", status);
    assert_non_null(strstr(eng_gemm_notes(), want));
    for (int i = 0; i < N_MLP; i++)
        assert_int_equal(eng_gemm_class_get(eng_gemm_class(mlp[i].ta, mlp[i].tb, mlp[i].M, mlp[i].N, mlp[i].K)),
                         ENG_GEMM_OPENBLAS);
    /* both failing: the run cannot go on, and says which shape */
    setenv("NNBENCH_GEMM_FAIL", "openblas,onednn", 1);
    char c[160];
    snprintf(c, sizeof c, "rm -rf %s", sub);
    assert_int_equal(system(c), 0);
    assert_int_equal(eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, 1, mlp, 1), ENG_EINVAL);
    assert_non_null(strstr(eng_error(), "no backend passed its check on NN 128x256x784"));
    assert_int_equal(system(c), 0);
    unsetenv("NNBENCH_GEMM_FAIL");
    setenv("NNBENCH_CACHE_DIR", cache_dir, 1);
}

static void test_failing_backend_skipped(void **state)
{
    (void)state;
    check_skipped("onednn", "wrong");
    check_skipped("onednn:crash", "crashed");
}

static void test_cache_damage(void **state)
{
    (void)state;
    char p[128];
    snprintf(p, sizeof p, "%s/gemm-choices", cache_dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("v1\tgarbage\n", f);
    fclose(f);
    assert_int_equal(eng_gemm_prepare(ENG_GEMM_POLICY_AUTO, 1, mlp, 1), ENG_OK);
    assert_non_null(strstr(eng_gemm_cache_warning(), "gemm-choices:1: unreadable line dropped"));
    assert_non_null(strstr(eng_gemm_notes(), "gemm-choices:1: unreadable line dropped")); /* the run says so */
    f = fopen(p, "r");
    assert_non_null(f);
    char line[1024];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        assert_null(strstr(line, "garbage"));
        lines++;
    }
    fclose(f);
    assert_int_equal(lines, 2); /* one class, two backends */
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

/* A signal handled while a thread is inside a GEMM kernel: Debian oneDNN 2.6's dnnl_sgemm,
 * interrupted by a handler on the thread's own stack, corrupted the heap (profiler/signals.c).
 * Each backend, forced, at 1 and 2 threads, computes the Fashion
 * MLP's first product 400 times under a 37 us interval timer whose handler is set as
 * nnbench sets its own (prof_signal_set): every result the bits of the first, with malloc
 * and free between the calls, and signals that did arrive. */
static void test_signals_during_gemm(void **state)
{
    (void)state;
    enum { M = 128, N = 256, K = 784, CALLS = 400 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N), *C0 = malloc(sizeof(float) * M * N);
    assert_non_null(A), assert_non_null(B), assert_non_null(C), assert_non_null(C0);
    uint32_t s = 7u;
    for (int i = 0; i < M * K; i++) A[i] = rnd(&s);
    for (int i = 0; i < K * N; i++) B[i] = rnd(&s);
    struct sigaction old;
    assert_int_equal(prof_signal_set(SIGALRM, on_alarm, SA_RESTART, &old), 0);
    for (int be = 0; be < ENG_GEMM_NB; be++)
        for (int th = 1; th <= 2; th++) {
            eng_gemm_set_threads(th);
            for (int c = 0; c < ENG_GEMM_CLASSES; c++) eng_gemm_class_set(c, (eng_gemm_backend)be);
            eng_sgemm_split(ENG_SPLIT_ROWS, 0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C0, N);
            alarms = 0;
            struct itimerval on = { { 0, 37 }, { 0, 37 } }, off = { { 0, 0 }, { 0, 0 } };
            assert_int_equal(setitimer(ITIMER_REAL, &on, NULL), 0);
            int same = 1;
            for (int r = 0; r < CALLS; r++) {
                void *p = malloc(1000 + (size_t)(r % 5000));
                eng_sgemm_split(ENG_SPLIT_ROWS, 0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
                free(p);
                if (memcmp(C, C0, sizeof(float) * M * N)) same = 0;
            }
            setitimer(ITIMER_REAL, &off, NULL);
            if (!same) print_error("%s at %d threads: a result changed under signals\n",
                                   eng_gemm_backend_name((eng_gemm_backend)be), th);
            assert_true(same);
            assert_true(alarms > 0);
            eng_gemm_classes_clear();
        }
    sigaction(SIGALRM, &old, NULL);
    eng_gemm_set_threads(1);
    free(A), free(B), free(C), free(C0);
}

int test_engine_gemm(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backends_agree),
        cmocka_unit_test(test_ksplit),
        cmocka_unit_test(test_after_rows),
        cmocka_unit_test(test_prepare_and_cache),
        cmocka_unit_test(test_failing_backend_skipped),
        cmocka_unit_test(test_cache_damage),
        cmocka_unit_test(test_signals_during_gemm),
    };
    return cmocka_run_group_tests_name("engine_gemm", tests, setup, teardown);
}
