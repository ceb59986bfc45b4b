/* gemm_internal.h — what gemm.c (the entry point, the backends, the class table) and
 * gemm_probe.c (verification, timing, the per-machine cache, the OpenBLAS core) share. */
#ifndef NNBENCH_ENGINE_GEMM_INTERNAL_H
#define NNBENCH_ENGINE_GEMM_INTERNAL_H

#include "internal.h"

/* Backends, by number in the cache file and the class table: append only. */
typedef enum { ENG_GEMM_OPENBLAS = 0, ENG_GEMM_ONEDNN = 1, ENG_GEMM_NB } eng_gemm_backend;

typedef struct {
    int ta, tb, M, N, K;
    float alpha;
    const float *A;
    int lda;
    const float *B;
    int ldb;
    float beta;
    float *C;
    int ldc;
    int split; /* how a threaded call cuts C: ENG_SPLIT_AUTO (the longer side) or _ROWS (eng_split) */
    eng_rows_after *after; /* work on C's rows after the product (internal.h), or NULL */
} gemm_call;

/* Classes: transposes x log2 buckets (0..15) of M, N and K. */
#define ENG_GEMM_CLASSES (4 * 16 * 16 * 16)
int eng_gemm_class(int ta, int tb, int M, int N, int K);
void eng_gemm_class_set(int cls, eng_gemm_backend be);
eng_gemm_backend eng_gemm_class_get(int cls);
void eng_gemm_classes_clear(void);
/* Runs c on backend be with eng_gemm_threads() threads; 0 ok, -1 the backend refused. */
int eng_gemm_run(eng_gemm_backend be, const gemm_call *c);
const char *eng_gemm_backend_name(eng_gemm_backend be);

/* What the probe found for one backend on one shape (numbers persist in the cache file). */
typedef enum { ENG_GEMM_OK = 0, ENG_GEMM_WRONG = 1, ENG_GEMM_REFUSED = 2, ENG_GEMM_CRASHED = 3, ENG_GEMM_HUNG = 4 } eng_gemm_status;
typedef struct {
    eng_gemm_status status;
    double gflops;   /* measured, when OK */
    double max_err;  /* worst relative error of the check (error / sum of |terms|) */
} eng_gemm_result;
/* A backend passes when no checked output is further than this from the double reference:
 * fp32 accumulation stays orders of magnitude below it; bf16 or a wrong kernel do not. */
#define ENG_GEMM_TOL 1e-4
/* Verifies shapes[n] on every backend b with want[b] in a child process (OpenBLAS core
 * `core`, or NULL for the inherited one) at `threads` threads, and times those that pass,
 * interleaved; res[i][b] gets each outcome (status -1: not probed), core_out the core the
 * child ran (may be NULL). A backend that crashes or hangs fails that shape and the later
 * ones; the others go on in a new child. ENG_EIO when no child could be started. */
int eng_gemm_probe(const int *want, const char *core, int threads, const eng_gemm_shape *shapes, int n,
                   eng_gemm_result (*res)[ENG_GEMM_NB], char *core_out, size_t core_cap);
/* Why the last prepare dropped a line of the cache file ("" when it did not). */
const char *eng_gemm_cache_warning(void);


/* The child's LAPACK check (a Cholesky through dpotrf and dgemm) on `core` (NULL: as
 * inherited); 0 passed. */
int eng_gemm_probe_lapack(const char *core);

#endif
