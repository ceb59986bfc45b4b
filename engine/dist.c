/* dist.c — data-parallel training on MPI (Open MPI): job start and end, the per-step
 * agreement (global loss, stop, each rank's speed and so its share of the next batches
 * under dist.balance = measured), the gradient all-reduce (fp32, fp16, int8 with error
 * feedback), and the sink that brings every rank's profile to rank 0. The only file of
 * nnbench that includes mpi.h.
 *
 * Every wait is a nonblocking collective polled with MPI_Test: so a job whose rank died
 * ends within dist.timeout_s, or at once when mpirun tears the job down (SIGTERM ->
 * eng_dist_request_abort), and rank 0 can still record the run as failed. */
#include "dist.h"

#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_rank, g_world = 1, g_inited, g_broken;
static volatile sig_atomic_t g_abort;

int eng_dist_world(void) { return g_world; }
int eng_dist_rank(void) { return g_rank; }
int eng_dist_broken(void) { return g_broken; }
void eng_dist_request_abort(void) { g_abort = 1; }

int eng_dist_job_size(void)
{
    /* Open MPI's launcher sets OMPI_COMM_WORLD_SIZE (PMIx-based launchers PMIX_RANK); a
     * plain start never touches MPI (no singleton start-up, nothing for tests to link). */
    const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
    return ws && atoi(ws) > 1 ? atoi(ws) : 1;
}

int eng_dist_start(int *rank, int *world)
{
    /* Open MPI's nonblocking all-reduce (coll/libnbc) picks its algorithm by message size
     * and chose one that took 2.3x the blocking MPI_Allreduce for the MLP's 0.94 MB
     * (429 vs 181 us with 2 ranks here); its ring algorithm matches the blocking call.
     * Set before MPI_Init_thread, unless the user set it. docs/scale.md has the figures. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return eng_fail(ENG_EIO, "mpi: MPI_Init_thread failed (started by mpirun with %d processes)", eng_dist_job_size());
    g_inited = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    *rank = g_rank;
    *world = g_world;
    return ENG_OK;
}

void eng_dist_finalize(int exit_code)
{
    if (!g_inited) return;
    g_inited = 0;
    /* Finalize waits for every rank; after a failure some are gone or stuck: abort. */
    if (g_broken || g_abort) MPI_Abort(MPI_COMM_WORLD, exit_code ? exit_code : 1);
    else MPI_Finalize();
}

/* A collective that could not start leaves the ranks out of step: the job is broken
 * (eng_dist_finalize aborts it instead of waiting in MPI_Finalize). */
static int start_failed(const char *what)
{
    g_broken = 1;
    return eng_fail(ENG_EIO, "mpi: %s could not start on rank %d", what, g_rank);
}

/* Waits for req. Open MPI's nonblocking collectives progress only inside MPI_Test, one
 * fragment at a time, so the first 20 ms test back to back, as a blocking call would;
 * sleeping (or yielding) between tests made a 0.9 MB all-reduce on a loaded machine take
 * 70-240x its blocking time. Later tests come every 100 us. Fails on an
 * MPI error, an abort request or after timeout_s; what names the collective. */
static int wait_req(MPI_Request *req, double timeout_s, const char *what)
{
    double t0 = prof_now_s(), el = 0;
    for (long i = 0;; i++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            g_broken = 1;
            return eng_fail(ENG_EIO, "mpi: %s failed on rank %d: %s", what, g_rank, msg);
        }
        if (done) return ENG_OK;
        if (g_abort) {
            g_broken = 1;
            return eng_fail(ENG_EIO, "mpi: %s on rank %d: the job is being stopped (mpirun: another rank died "
                            "or was killed)", what, g_rank);
        }
        if (i % 64 == 0) el = prof_now_s() - t0;
        if (el > timeout_s) {
            g_broken = 1;
            return eng_fail(ENG_EIO, "mpi: %s on rank %d: the other ranks did not answer in %g s (a rank died "
                            "or hangs; raise dist.timeout_s if steps are that slow)", what, g_rank, timeout_s);
        }
        if (el < 0.02) continue;   /* spin, as a blocking MPI call does: a yield gives the core
                                    * to any other runnable job for a whole time slice */
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
}

/* ---- fp16 ----------------------------------------------------------------------------- */

static uint16_t f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);               /* overflow: inf */
    if (exp <= 0) {                                                  /* subnormal or 0 */
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        int shift = 14 - exp;
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;          /* may carry into exp: fine */
    return (uint16_t)h;
}

static float h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    if (exp == 0) {
        if (!mant) x = sign;
        else {                                                       /* subnormal */
            int e = -1;
            do { mant <<= 1; e++; } while (!(mant & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) x = sign | 0x7f800000u | (mant << 13);
    else x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* The same conversions eight at a time with F16C (every AVX2 CPU has it), round to
 * nearest even as f2h: the same bits for every number and infinity (a NaN stays a NaN,
 * its payload may differ). Used on the avx2 and avx512 paths (engine/isa.c) when the CPU
 * has F16C; NNBENCH_ISA=generic forces the scalar code. The scalar conversions cost
 * ~10 ns an element: the fp16 all-reduce of the MLP took 2.6 ms with them. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define F16C_ATTR __attribute__((target("avx,f16c")))
F16C_ATTR static void f2h_f16c(const float *x, uint16_t *h, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = f2h(x[i]);
}
F16C_ATTR static void h2f_f16c(const uint16_t *h, float *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(h + i))));
    for (; i < n; i++) x[i] = h2f(h[i]);
}
F16C_ATTR static void add_f16c(const uint16_t *a, uint16_t *b, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 s = _mm256_add_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(a + i))),
                                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(b + i))));
        _mm_storeu_si128((__m128i *)(void *)(b + i), _mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) b[i] = f2h(h2f(a[i]) + h2f(b[i]));
}
#include <cpuid.h>
/* CPUID leaf 1, ECX bit 29: clang's __builtin_cpu_supports does not know "f16c" (make fuzz). */
static int use_f16c(void)
{
    unsigned a, b, c = 0, d;
    return eng_isa_current() != ENG_ISA_GENERIC && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#else
static int use_f16c(void) { return 0; }
#define f2h_f16c(x, h, n) ((void)0)
#define h2f_f16c(h, x, n) ((void)0)
#define add_f16c(a, b, n) ((void)0)
#endif

void eng_fp16_from_float(const float *x, uint16_t *h, size_t n)
{
    if (use_f16c()) f2h_f16c(x, h, n);
    else for (size_t i = 0; i < n; i++) h[i] = f2h(x[i]);
}

void eng_fp16_to_float(const uint16_t *h, float *x, size_t n)
{
    if (use_f16c()) h2f_f16c(h, x, n);
    else for (size_t i = 0; i < n; i++) x[i] = h2f(h[i]);
}

void eng_fp16_add(const uint16_t *a, uint16_t *b, size_t n)
{
    if (use_f16c()) add_f16c(a, b, n);
    else for (size_t i = 0; i < n; i++) b[i] = f2h(h2f(a[i]) + h2f(b[i]));
}

/* ---- int8 ------------------------------------------------------------------------------ */

/* The scalar kernels (NNBENCH_ISA=generic) define the bits; the AVX2 ones (used on the
 * avx2 and avx512 paths) give the same: the same float and double operations element by
 * element, no fused multiply-add, max ignoring NaN as the comparison does. */
static float residual_add_scalar(float *res, const float *g, size_t n)
{
    float amax = 0;
    for (size_t i = 0; i < n; i++) {
        float v = g[i] + res[i];
        res[i] = v;
        if (fabsf(v) > amax) amax = fabsf(v);
    }
    return amax;
}

/* Round half away from zero, as lround but without its libm call per element (the
 * compress scope: 1.38 -> 0.82-0.96 ms per call, the same loss); it differs from lround
 * only for x within one double ulp below a half (x + 0.5 rounds up). */
static void quantize_scalar(float *res, int8_t *q, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) {
        double x = res[i] / scale;
        long v = (long)(x + (x < 0 ? -0.5 : 0.5));
        if (v > 127) v = 127;
        if (v < -127) v = -127;
        q[i] = (int8_t)v;
        res[i] -= (float)(v * scale);
    }
}

static void accumulate_scalar(float *g, const int8_t *q, size_t n, float s)
{
    for (size_t i = 0; i < n; i++) g[i] += s * q[i];
}

#if defined(__x86_64__) && defined(__GNUC__)
#define AVX2_ATTR __attribute__((target("avx2")))
AVX2_ATTR static float residual_add_avx2(float *res, const float *g, size_t n)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_add_ps(_mm256_loadu_ps(g + i), _mm256_loadu_ps(res + i));
        _mm256_storeu_ps(res + i, v);
        m = _mm256_max_ps(_mm256_and_ps(v, abs_mask), m);   /* a NaN lane keeps m */
    }
    float lane[8], amax = 0;
    _mm256_storeu_ps(lane, m);
    for (int k = 0; k < 8; k++) if (lane[k] > amax) amax = lane[k];
    float rest = residual_add_scalar(res + i, g + i, n - i);
    return rest > amax ? rest : amax;
}

/* Four at a time in double, as the scalar code: x = res / scale, truncated after adding
 * 0.5 with x's sign, clamped, and res -= float(q * scale). */
AVX2_ATTR static void quantize_avx2(float *res, int8_t *q, size_t n, double scale)
{
    const __m256d sc = _mm256_set1_pd(scale), half = _mm256_set1_pd(0.5), sign = _mm256_set1_pd(-0.0);
    const __m256d hi = _mm256_set1_pd(127.0), lo = _mm256_set1_pd(-127.0);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m128 r = _mm_loadu_ps(res + i);
        __m256d x = _mm256_div_pd(_mm256_cvtps_pd(r), sc);
        __m256d t = _mm256_add_pd(x, _mm256_or_pd(_mm256_and_pd(x, sign), half));
        __m256d v = _mm256_max_pd(_mm256_min_pd(_mm256_round_pd(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), hi), lo);
        __m128i w = _mm256_cvttpd_epi32(v);
        w = _mm_packs_epi16(_mm_packs_epi32(w, w), w);
        int32_t four = _mm_cvtsi128_si32(w);
        memcpy(q + i, &four, 4);
        _mm_storeu_ps(res + i, _mm_sub_ps(r, _mm256_cvtpd_ps(_mm256_mul_pd(v, sc))));
    }
    quantize_scalar(res + i, q + i, n - i, scale);
}

AVX2_ATTR static void accumulate_avx2(float *g, const int8_t *q, size_t n, float s)
{
    const __m256 sv = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int64_t eight;
        memcpy(&eight, q + i, 8);
        __m256 qf = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(eight)));
        _mm256_storeu_ps(g + i, _mm256_add_ps(_mm256_loadu_ps(g + i), _mm256_mul_ps(sv, qf)));
    }
    accumulate_scalar(g + i, q + i, n - i, s);
}
static int use_avx2(void) { return eng_isa_current() != ENG_ISA_GENERIC; }
#else
static int use_avx2(void) { return 0; }
#define residual_add_avx2 residual_add_scalar
#define quantize_avx2 quantize_scalar
#define accumulate_avx2 accumulate_scalar
#endif

float eng_int8_residual_add(float *res, const float *g, size_t n)
{
    return use_avx2() ? residual_add_avx2(res, g, n) : residual_add_scalar(res, g, n);
}

void eng_int8_quantize(float *res, int8_t *q, size_t n, double scale)
{
    if (use_avx2()) quantize_avx2(res, q, n, scale);
    else quantize_scalar(res, q, n, scale);
}

void eng_int8_accumulate(float *g, const int8_t *q, size_t n, float s)
{
    if (use_avx2()) accumulate_avx2(g, q, n, s);
    else accumulate_scalar(g, q, n, s);
}

static void sum_fp16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    eng_fp16_add(in, inout, (size_t)*len);
}

/* ---- the run's state ------------------------------------------------------------------ */

/* Buckets in flight per step at most; past that, what is left goes in the last one. */
#define BUCKETS_MAX 64

struct eng_dist {
    eng_dist_config cfg;
    size_t n;
    prof_t *prof;
    int sc_allreduce, sc_compress, sc_wait;
    atomic_int *stop;
    uint16_t *half;          /* fp16: the gradients as sent */
    float *residual;         /* int8: what rounding left out, added to the next step */
    int8_t *packed;          /* int8: world blocks of [scale (8 bytes), n values] */
    MPI_Op op_fp16;
    unsigned long long bytes;
    float *scal;             /* compressed paths: the step's scalars (eng_dist_spare floats) */
    double *ema, *cuts;      /* the shares: smoothed time per row of each rank; the partition */
    double t_done;           /* when the last step's collective completed (0: none yet) */
    /* dist.bucket_kb: the all-reduces started during backward, on [from, bucket_end) */
    float *g;
    size_t bucket_end;
    MPI_Request breq[BUCKETS_MAX];
    int nbreq, bucket_rc;
};

#define INT8_BLOCK(d) (8 + (d)->n)

int eng_dist_create(const eng_dist_config *dc, size_t n_params, prof_t *prof, atomic_int *stop,
                    eng_dist **out)
{
    *out = NULL;
    if (!g_inited) return eng_fail(ENG_EINVAL, "mpi: not started (eng_dist_init found no mpirun job)");
    if (n_params > (size_t)INT32_MAX - 8)
        return eng_fail(ENG_EINVAL, "mpi: %zu parameters are more than one all-reduce can carry", n_params);
    eng_dist *d = prof_calloc(1, sizeof *d);
    if (!d) return eng_fail(ENG_ENOMEM, "mpi: out of memory");
    d->cfg = *dc;
    if (!(d->cfg.timeout_s > 0)) d->cfg.timeout_s = 30;
    d->n = n_params;
    d->stop = stop;
    d->prof = prof;
    d->sc_allreduce = d->sc_compress = d->sc_wait = -1;
    d->op_fp16 = MPI_OP_NULL;
    int ok = (d->scal = prof_calloc(eng_dist_spare(), sizeof *d->scal)) != NULL &&
         (d->ema = prof_calloc((size_t)g_world, sizeof *d->ema)) != NULL &&
         (d->cuts = prof_malloc(((size_t)g_world + 1) * sizeof *d->cuts)) != NULL;
    for (int r = 0; ok && r <= g_world; r++) d->cuts[r] = (double)r / g_world;
    if (ok && dc->compress == ENG_COMPRESS_FP16) {
        ok = (d->half = prof_malloc(n_params * sizeof *d->half)) != NULL &&
             MPI_Op_create(sum_fp16, 1, &d->op_fp16) == MPI_SUCCESS;
    } else if (ok && dc->compress == ENG_COMPRESS_INT8) {
        ok = (d->residual = prof_calloc(n_params, sizeof *d->residual)) != NULL &&
             (d->packed = prof_malloc((size_t)g_world * INT8_BLOCK(d))) != NULL;
    }
    if (!ok) { eng_dist_free(d); return eng_fail(ENG_ENOMEM, "mpi: out of memory for the step's buffers"); }
    if (prof) {
        d->sc_allreduce = prof_register(prof, "allreduce", NULL, PROF_OP);
        d->sc_wait = prof_register(prof, "allreduce.wait", NULL, PROF_OP);
        if (dc->compress != ENG_COMPRESS_NONE) d->sc_compress = prof_register(prof, "compress", NULL, PROF_OP);
        if (d->sc_allreduce < 0 || d->sc_wait < 0 || (dc->compress != ENG_COMPRESS_NONE && d->sc_compress < 0)) {
            eng_dist_free(d);
            return eng_fail(ENG_EINVAL, "run: the profiler's scope table is full (%s)", prof_error());
        }
    }
    *out = d;
    return ENG_OK;
}

void eng_dist_free(eng_dist *d)
{
    if (!d) return;
    if (d->op_fp16 != MPI_OP_NULL) MPI_Op_free(&d->op_fp16);
    prof_free(d->half);
    prof_free(d->residual);
    prof_free(d->packed);
    prof_free(d->scal);
    prof_free(d->ema);
    prof_free(d->cuts);
    prof_free(d);
}

unsigned long long eng_dist_bytes(const eng_dist *d) { return d ? d->bytes : 0; }

/* Waits at a barrier until every rank has its gradients: the time spent here is load
 * imbalance (allreduce.wait), so that the allreduce scope times the transfer alone. */
static int wait_for_ranks(eng_dist *d)
{
    PROF_BEGIN(d->prof, d->sc_wait);
    MPI_Request req;
    int rc = MPI_Ibarrier(MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS) rc = start_failed("the barrier");
    else rc = wait_req(&req, d->cfg.timeout_s, "waiting for the other ranks' gradients");
    PROF_END(d->prof, d->sc_wait, 0, 0);
    return rc;
}

size_t eng_dist_spare(void) { return 4 + (size_t)g_world; }

/* The step's scalars as floats summed across ranks: the loss sum split into a float and
 * what the float left out (so the global sum keeps ~48 bits, not 24), the correct count
 * (exact in a float up to 2^24), the stop vote, then one slot per rank: this rank's time
 * per row (us) in its own, 0 in the others', so that the sum is every rank's exact value. */
static void pack_scalars(float *t, double loss_sum, int correct, int stop, float per_row_us)
{
    t[0] = (float)loss_sum;
    t[1] = (float)(loss_sum - (double)t[0]);
    t[2] = (float)correct;
    t[3] = stop ? 1.0f : 0.0f;
    for (int r = 0; r < g_world; r++) t[4 + r] = r == g_rank ? per_row_us : 0.0f;
}

static void unpack_scalars(const float *t, double *loss_sum, int *correct, int *stop)
{
    *loss_sum = (double)t[0] + (double)t[1];
    *correct = (int)lroundf(t[2]);
    *stop = t[3] > 0;
}

/* dist.balance = measured. The smoothing 0.3 was picked from 0.1, 0.3 and 0.6 with a
 * throwaway prototype (paired 2-rank Fashion MLP runs; docs/scale.md). A measurement is first held
 * within 2x of the estimate, so one long step (an evaluation, a checkpoint on rank 0)
 * moves it by at most 30%. */
#define BALANCE_SMOOTHING 0.3
#define BALANCE_FLOOR 0.25     /* the smallest share, in even shares: every rank keeps rows */

void eng_dist_balance(double *ema, const float *per_row, int n, double *cuts)
{
    int all = 1;
    for (int r = 0; r < n; r++) {
        double x = per_row[r];
        if (x > 0 && isfinite(x)) {
            if (ema[r] > 0) {
                x = fmin(fmax(x, ema[r] / 2), ema[r] * 2);
                ema[r] += BALANCE_SMOOTHING * (x - ema[r]);
            } else {
                ema[r] = x;
            }
        }
        all &= ema[r] > 0;
    }
    if (!all) return;
    /* Shares proportional to speed (1 / time per row); a rank below the floor gets the
     * floor and the others share the rest in proportion: repeated until no share is
     * below the floor (each pass fixes at least one more rank). */
    double floor = BALANCE_FLOOR / n, share[n];
    int fixed[n];
    for (int r = 0; r < n; r++) fixed[r] = 0;
    for (int changed = 1; changed;) {
        double rest = 1, speed = 0;
        for (int r = 0; r < n; r++) {
            if (fixed[r]) rest -= floor;
            else speed += 1 / ema[r];
        }
        changed = 0;
        for (int r = 0; r < n; r++) {
            share[r] = fixed[r] ? floor : rest * (1 / ema[r]) / speed;
            if (!fixed[r] && share[r] < floor) fixed[r] = changed = 1;
        }
    }
    cuts[0] = 0;
    for (int r = 0; r < n - 1; r++) cuts[r + 1] = fmin(cuts[r] + share[r], 1.0);
    cuts[n] = 1;
}

void eng_dist_rows_range(int global, int world, int measured, int *lo, int *hi)
{
    if (world < 1) world = 1;
    /* a cut at global * c is rounded to a row, so a share of s holds s * global rows +- 1 */
    double least = measured ? BALANCE_FLOOR / world : 1.0 / world;
    double most = measured ? 1 - (world - 1) * least : 1.0 / world;
    int l = (int)floor(least * global) - 1, h = (int)ceil(most * global) + 1;
    *lo = l < 0 ? 0 : l;
    *hi = h > global ? global : h;
}

const double *eng_dist_cuts(const eng_dist *d) { return d->cuts; }

/* ---- buckets (dist.bucket_kb) ----------------------------------------------------------- */

void eng_dist_backward_begin(eng_dist *d, float *g)
{
    d->g = g;
    d->bucket_end = d->n;
    d->nbreq = 0;
    d->bucket_rc = ENG_OK;
}

/* Open MPI moves a nonblocking collective on only inside MPI calls: test the buckets in
 * flight, so that they progress between the layers' backward. */
static void buckets_progress(eng_dist *d)
{
    for (int i = 0; i < d->nbreq && !d->bucket_rc; i++) {
        if (d->breq[i] == MPI_REQUEST_NULL) continue;
        int done = 0;
        if (MPI_Test(&d->breq[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            g_broken = 1;
            d->bucket_rc = eng_fail(ENG_EIO, "mpi: a gradient bucket's all-reduce failed on rank %d", g_rank);
        }
    }
}

static void bucket_start(eng_dist *d, size_t from)
{
    int rc = MPI_Iallreduce(MPI_IN_PLACE, d->g + from, (int)(d->bucket_end - from), MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD, &d->breq[d->nbreq]);
    if (rc != MPI_SUCCESS) { d->bucket_rc = start_failed("a gradient bucket's all-reduce"); return; }
    d->nbreq++;
    d->bucket_end = from;
}

void eng_dist_grads_ready(void *ud, size_t from)
{
    eng_dist *d = ud;
    if (!d->cfg.bucket_kb || d->bucket_rc) return;
    /* the last bucket (down to 0) is started by eng_dist_step, with the step's scalars */
    if (from > 0 && d->nbreq < BUCKETS_MAX - 1 && (d->bucket_end - from) * sizeof(float) >= (size_t)d->cfg.bucket_kb * 1024)
        bucket_start(d, from);
    buckets_progress(d);
}

/* The compressed gradient collectives; the fp32 one is inline in eng_dist_step. */
static int allreduce_fp16(eng_dist *d, float *g, MPI_Request *req)
{
    size_t n = d->n;
    PROF_BEGIN(d->prof, d->sc_compress);
    eng_fp16_from_float(g, d->half, n);
    PROF_END(d->prof, d->sc_compress, 0, 0);
    PROF_BEGIN(d->prof, d->sc_allreduce);
    int rc = MPI_Iallreduce(MPI_IN_PLACE, d->half, (int)n, MPI_UINT16_T, d->op_fp16, MPI_COMM_WORLD, req);
    if (rc == MPI_SUCCESS) rc = wait_req(req, d->cfg.timeout_s, "the fp16 gradient all-reduce");
    else rc = start_failed("the gradient all-reduce");
    PROF_END(d->prof, d->sc_allreduce, 0, n * sizeof(uint16_t));
    d->bytes += n * sizeof(uint16_t);
    if (rc) return rc;
    PROF_BEGIN(d->prof, d->sc_compress);
    eng_fp16_to_float(d->half, g, n);
    PROF_END(d->prof, d->sc_compress, 0, 0);
    return ENG_OK;
}

/* int8 with error feedback: v = g + residual is sent as round(v / s) with one scale
 * s = max|v| / 127; what rounding dropped is kept for the next step. Sums of int8 do
 * not fit int8, so the ranks all-gather their blocks and each sums them in rank order
 * (the same result everywhere). */
static int allgather_int8(eng_dist *d, float *g, MPI_Request *req)
{
    size_t n = d->n;
    PROF_BEGIN(d->prof, d->sc_compress);
    float amax = eng_int8_residual_add(d->residual, g, n);
    double scale = amax > 0 ? amax / 127.0 : 1.0;
    int8_t *mine = d->packed + (size_t)g_rank * INT8_BLOCK(d);
    memcpy(mine, &scale, 8);
    eng_int8_quantize(d->residual, mine + 8, n, scale);
    PROF_END(d->prof, d->sc_compress, 0, 0);
    PROF_BEGIN(d->prof, d->sc_allreduce);
    int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d->packed, (int)INT8_BLOCK(d), MPI_INT8_T,
                            MPI_COMM_WORLD, req);
    if (rc == MPI_SUCCESS) rc = wait_req(req, d->cfg.timeout_s, "the int8 gradient all-gather");
    else rc = start_failed("the gradient all-gather");
    PROF_END(d->prof, d->sc_allreduce, 0, INT8_BLOCK(d));
    d->bytes += INT8_BLOCK(d);
    if (rc) return rc;
    PROF_BEGIN(d->prof, d->sc_compress);
    memset(g, 0, n * sizeof *g);
    for (int r = 0; r < g_world; r++) {
        const int8_t *blk = d->packed + (size_t)r * INT8_BLOCK(d);
        double s;
        memcpy(&s, blk, 8);
        eng_int8_accumulate(g, blk + 8, n, (float)s);
    }
    PROF_END(d->prof, d->sc_compress, 0, 0);
    return ENG_OK;
}

int eng_dist_step(eng_dist *d, float *g, double *loss, int *correct, int rows, int global_rows, int *stop)
{
    size_t n = d->n;
    double t = prof_now_s();
    float per_row_us = d->t_done > 0 && rows > 0 ? (float)(1e6 * (t - d->t_done) / rows) : 0.0f;
    /* Profiled runs only: a barrier costs a round of latency per step. */
    if (d->prof) {
        int rc = wait_for_ranks(d);
        if (rc) return rc;
    }
    /* loss is the mean over this rank's rows; a rank with no rows adds nothing. */
    double loss_sum = rows ? *loss * rows : 0;
    int want_stop = atomic_load(d->stop) != 0;
    MPI_Request req;
    int rc;
    const float *scal;
    if (d->cfg.bucket_kb > 0) {
        /* Buckets: the gradients finished last (the first layers') and the scalars go now;
         * then every bucket is waited for. */
        if ((rc = d->bucket_rc)) return rc;
        pack_scalars(d->scal, loss_sum, *correct, want_stop, per_row_us);
        PROF_BEGIN(d->prof, d->sc_allreduce);
        if (d->bucket_end > 0) bucket_start(d, 0);
        MPI_Request sreq;
        rc = d->bucket_rc;
        if (!rc && MPI_Iallreduce(MPI_IN_PLACE, d->scal, (int)eng_dist_spare(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                  &sreq) != MPI_SUCCESS)
            rc = start_failed("the loss all-reduce");
        for (int i = 0; i < d->nbreq && !rc; i++)
            if (d->breq[i] != MPI_REQUEST_NULL) rc = wait_req(&d->breq[i], d->cfg.timeout_s, "a gradient bucket's all-reduce");
        if (!rc) rc = wait_req(&sreq, d->cfg.timeout_s, "the loss all-reduce");
        PROF_END(d->prof, d->sc_allreduce, 0, (n + eng_dist_spare()) * sizeof(float));
        d->bytes += n * sizeof(float);
        if (rc) return rc;
        scal = d->scal;
    } else if (d->cfg.compress == ENG_COMPRESS_NONE) {
        /* One collective per step: the scalars ride in the gradient buffer's spare tail. */
        pack_scalars(g + n, loss_sum, *correct, want_stop, per_row_us);
        size_t len = n + eng_dist_spare();
        PROF_BEGIN(d->prof, d->sc_allreduce);
        rc = MPI_Iallreduce(MPI_IN_PLACE, g, (int)len, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS) rc = wait_req(&req, d->cfg.timeout_s, "the gradient all-reduce");
        else rc = start_failed("the gradient all-reduce");
        PROF_END(d->prof, d->sc_allreduce, 0, len * sizeof(float));
        d->bytes += n * sizeof(float);
        if (rc) return rc;
        scal = g + n;
    } else {
        /* Compressed gradients cannot carry exact scalars: those go in a small all-reduce
         * started first, so its latency overlaps the gradients' collective. */
        pack_scalars(d->scal, loss_sum, *correct, want_stop, per_row_us);
        MPI_Request sreq;
        if (MPI_Iallreduce(MPI_IN_PLACE, d->scal, (int)eng_dist_spare(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           &sreq) != MPI_SUCCESS)
            return start_failed("the loss all-reduce");
        rc = d->cfg.compress == ENG_COMPRESS_FP16 ? allreduce_fp16(d, g, &req) : allgather_int8(d, g, &req);
        if (!rc) rc = wait_req(&sreq, d->cfg.timeout_s, "the loss all-reduce");
        if (rc) return rc;
        scal = d->scal;
    }
    unpack_scalars(scal, &loss_sum, correct, stop);
    if (d->cfg.balance == ENG_BALANCE_MEASURED) eng_dist_balance(d->ema, scal + 4, g_world, d->cuts);
    *loss = loss_sum / global_rows;
    d->t_done = prof_now_s();
    return ENG_OK;
}

/* ---- agreeing before a variant's first step --------------------------------------------- */

static int g_disagreed;   /* the last agreement failed: no run to exchange profiles of */

#define AGREE_MSG 480
typedef struct {
    uint64_t hash;        /* FNV-1a of config_text */
    int32_t failed;       /* this rank could not set up the variant: msg says why */
    int32_t leaving;      /* ... nor run any variant (its experiment did not load) */
    int32_t text_len;     /* bytes of config_text (0: none) */
    char msg[AGREE_MSG];
} agree_rec;

/* Every resolved key as "key=value\n" (sorted, as cfg->kv is), after the variant's name;
 * without dist.world_size, which only a created run has. NUL-terminated; caller frees. */
static char *config_text(const eng_config *cfg, size_t *len)
{
    size_t line = sizeof cfg->kv->key + sizeof cfg->kv->value + 2, cap = line * (cfg->n_kv + 1);
    char *t = malloc(cap);
    if (!t) return NULL;
    size_t n = (size_t)snprintf(t, cap, "(variant)=%s\n", cfg->variant);
    for (size_t i = 0; i < cfg->n_kv && n < cap; i++)
        if (strcmp(cfg->kv[i].key, "dist.world_size"))
            n += (size_t)snprintf(t + n, cap - n, "%s=%s\n", cfg->kv[i].key, cfg->kv[i].value);
    *len = n < cap ? n : cap - 1;
    return t;
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

/* The value of key (a "key=" prefix) in a config text, up to its newline; NULL if absent. */
static const char *text_value(const char *t, const char *key, size_t klen, int *vlen)
{
    for (const char *p = t; *p;) {
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        if ((size_t)(nl - p) > klen && !strncmp(p, key, klen) && p[klen] == '=') {
            *vlen = (int)(nl - p - (long)klen - 1);
            return p + klen + 1;
        }
        p = nl + 1;
    }
    return NULL;
}

/* The first key (in rank 0's order) whose value differs between rank 0's text a and rank
 * r's text b, or the first key only one of them has. */
static void first_difference(const char *a, const char *b, int r, char *out, size_t cap)
{
    for (int pass = 0; pass < 2; pass++) {
        const char *x = pass ? b : a, *y = pass ? a : b;
        for (const char *p = x; *p;) {
            const char *nl = strchr(p, '\n'), *eq = memchr(p, '=', nl ? (size_t)(nl - p) : 0);
            if (!nl || !eq) break;
            size_t klen = (size_t)(eq - p);
            int xl = (int)(nl - eq - 1), yl = 0;
            const char *yv = text_value(y, p, klen, &yl);
            if (!yv || yl != xl || strncmp(yv, eq + 1, (size_t)xl)) {
                const char *v0 = pass ? yv : eq + 1, *vr = pass ? eq + 1 : yv;
                int l0 = pass ? yl : xl, lr = pass ? xl : yl;
                snprintf(out, cap, "%.*s is '%.*s' on rank 0 but '%.*s' on rank %d", (int)klen, p, v0 ? l0 : 8,
                         v0 ? v0 : "(absent)", vr ? lr : 8, vr ? vr : "(absent)", r);
                return;
            }
            p = nl + 1;
        }
    }
    snprintf(out, cap, "rank %d's keys hash differently from rank 0's", r);
}

/* The ranks' records are in; the first differing rank's config text goes to every rank,
 * and rank 0 names the first key that differs. */
static int disagreement(const agree_rec *all, int differ, char *text, double timeout)
{
    int n = all[differ].text_len;
    char *other = g_rank == differ ? text : malloc((size_t)n + 1);
    if (!other) { g_broken = 1; return eng_fail(ENG_ENOMEM, "mpi: out of memory comparing the ranks' configurations"); }
    MPI_Request req;
    int rc = MPI_Ibcast(other, n, MPI_BYTE, differ, MPI_COMM_WORLD, &req) != MPI_SUCCESS
                 ? start_failed("comparing the ranks' configurations")
                 : wait_req(&req, timeout, "comparing the ranks' configurations");
    other[n] = 0;
    char what[700] = "rank 0 names the key";
    if (!rc && g_rank == 0) first_difference(text, other, differ, what, sizeof what);
    if (other != text) free(other);
    if (rc) return rc;
    return eng_fail(ENG_EINVAL, "mpi: the ranks' configurations differ: %s; every rank must run the same experiment "
                    "(the same file, variant and --set values)", what);
}

int eng_dist_agree(const eng_config *cfg, const char *local_error)
{
    if (!g_inited || g_world < 2) return ENG_OK;
    double timeout = cfg && cfg->dist.timeout_s > 0 ? cfg->dist.timeout_s : 30;
    size_t len = 0;
    char *text = cfg ? config_text(cfg, &len) : NULL;
    agree_rec mine, *all = calloc((size_t)g_world, sizeof *all);
    memset(&mine, 0, sizeof mine);
    mine.failed = local_error || !text;
    mine.leaving = !cfg;
    mine.text_len = text ? (int32_t)len : 0;
    mine.hash = text ? fnv1a(text, len) : 0;
    snprintf(mine.msg, sizeof mine.msg, "%s", local_error ? local_error : text ? "" : "out of memory");
    int rc = ENG_OK;
    MPI_Request req;
    if (!all) rc = start_failed("the agreement before the first step (out of memory)");
    else if (MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD,
                            &req) != MPI_SUCCESS)
        rc = start_failed("the agreement before the first step");
    else
        rc = wait_req(&req, timeout, "the agreement before the first step");
    int differ = -1, failed = -1;
    for (int r = 0; !rc && r < g_world; r++) {
        if (differ < 0 && all[r].text_len && all[0].text_len && all[r].hash != all[0].hash) differ = r;
        if (failed < 0 && all[r].failed) failed = r;
        if (all[r].leaving) g_broken = 1;   /* that rank runs no further variant: the job ends */
    }
    if (!rc && differ > 0) rc = disagreement(all, differ, text, timeout);
    else if (!rc && failed >= 0)
        rc = eng_fail(ENG_EINVAL, "mpi: rank %d could not start: %s", failed, all[failed].msg);
    g_disagreed = rc != ENG_OK;
    free(all);
    free(text);
    return rc;
}

/* ---- the rank sink -------------------------------------------------------------------- */

enum { TAG_ROWS_N = 101, TAG_ROWS = 102 };

static int dist_op_stats(void *ud, const prof_row *rows, size_t n, const prof_summary *sum)
{
    eng_dist_sink_state *st = ud;
    double timeout = 30;
    if (g_rank != 0) {
        if (g_broken || g_disagreed) return 0;
        long long cnt = (long long)n;
        MPI_Request req;
        if (MPI_Isend(&cnt, 1, MPI_LONG_LONG, 0, TAG_ROWS_N, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
            wait_req(&req, timeout, "sending the profile to rank 0"))
            return 0;   /* rank 0 records the run; a lost profile of rank k is not a failure here */
        if (n && (MPI_Isend(rows, (int)(n * sizeof *rows), MPI_BYTE, 0, TAG_ROWS, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
                  wait_req(&req, timeout, "sending the profile to rank 0")))
            return 0;
        return 0;
    }
    const eng_sink *in = st->inner;
    if (!in || !in->op_stats) return 0;
    if (g_broken || g_disagreed) return in->op_stats(in->ud, rows, n, sum);
    /* Rank 0's rows as they are, then every other rank's as "rankK:name". */
    prof_row *all = malloc(n * sizeof *all);
    if (n && !all) return eng_fail(ENG_ESINK, "mpi: out of memory for the profiles");
    memcpy(all, rows, n * sizeof *rows);
    size_t total = n;
    for (int r = 1; r < g_world; r++) {
        long long cnt = 0;
        MPI_Request req;
        if (MPI_Irecv(&cnt, 1, MPI_LONG_LONG, r, TAG_ROWS_N, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
            wait_req(&req, timeout, "receiving a rank's profile"))
            break;
        if (cnt <= 0) continue;
        prof_row *more = realloc(all, (total + (size_t)cnt) * sizeof *all);
        if (!more) { free(all); return eng_fail(ENG_ESINK, "mpi: out of memory for the profiles"); }
        all = more;
        if (MPI_Irecv(all + total, (int)((size_t)cnt * sizeof *all), MPI_BYTE, r, TAG_ROWS, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
            wait_req(&req, timeout, "receiving a rank's profile"))
            break;
        for (size_t i = total; i < total + (size_t)cnt; i++) {
            char nm[sizeof all[i].name];
            snprintf(nm, sizeof nm, "rank%d:%s", r, all[i].name);
            memcpy(all[i].name, nm, sizeof nm);
        }
        total += (size_t)cnt;
    }
    int rc = in->op_stats(in->ud, all, total, sum);
    free(all);
    return rc;
}

#define FWD(name, sig, call)                                                       \
    static int dist_##name sig                                                     \
    {                                                                              \
        eng_dist_sink_state *st = ud;                                              \
        if (g_rank != 0 || !st->inner || !st->inner->name) return 0;               \
        return st->inner->name call;                                               \
    }
FWD(run_begin, (void *ud, const eng_run_info *i), (st->inner->ud, i))
FWD(metric, (void *ud, const eng_metric *m), (st->inner->ud, m))
FWD(solver, (void *ud, const struct qm_solve_event *e), (st->inner->ud, e))
FWD(checkpoint, (void *ud, const eng_checkpoint *c), (st->inner->ud, c))
#undef FWD

static void dist_progress(void *ud, long step, long total, int epoch, double loss, double sps)
{
    eng_dist_sink_state *st = ud;
    if (g_rank == 0 && st->inner && st->inner->progress) st->inner->progress(st->inner->ud, step, total, epoch, loss, sps);
}

static void dist_run_end(void *ud, const eng_run_result *res)
{
    eng_dist_sink_state *st = ud;
    if (g_rank == 0 && st->inner && st->inner->run_end) st->inner->run_end(st->inner->ud, res);
}

eng_sink eng_dist_sink(const eng_sink *inner, eng_dist_sink_state *st)
{
    st->inner = inner;
    if (g_world <= 1) return inner ? *inner : (eng_sink){ 0 };
    return (eng_sink){ .ud = st, .run_begin = dist_run_begin, .metric = dist_metric,
                       .op_stats = dist_op_stats, .solver = dist_solver,
                       .progress = dist_progress, .run_end = dist_run_end, .checkpoint = dist_checkpoint };
}

/* ---- measuring the all-reduce ------------------------------------------------------------ */

int eng_dist_time_allreduce(size_t bytes, int reps, double *median_s)
{
    *median_s = NAN;
    if (!g_inited || g_world < 2) return eng_fail(ENG_EINVAL, "mpi: measuring an all-reduce needs mpirun -np N with N >= 2");
    if (reps < 1) reps = 1;
    if (reps > 256) reps = 256;
    size_t n = bytes / sizeof(float) ? bytes / sizeof(float) : 1;
    if (n > (size_t)INT32_MAX) return eng_fail(ENG_EINVAL, "mpi: %zu bytes are too many for one all-reduce", bytes);
    float *buf = prof_malloc(n * sizeof *buf);
    if (!buf) return eng_fail(ENG_ENOMEM, "mpi: out of memory for %zu bytes", bytes);
    for (size_t i = 0; i < n; i++) buf[i] = 1e-3f * (float)(i % 1000);
    double t[256];
    int rc = ENG_OK;
    for (int k = -1; k < reps && !rc; k++) {    /* k = -1: warm-up (connections, buffers) */
        MPI_Request req;
        if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS || (rc = wait_req(&req, 30, "a barrier"))) {
            if (!rc) rc = eng_fail(ENG_EIO, "mpi: barrier failed");
            break;
        }
        double t0 = prof_now_s();
        if (MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) {
            g_broken = 1;
            rc = eng_fail(ENG_EIO, "mpi: MPI_Allreduce of %zu bytes failed", bytes);
            break;
        }
        /* The slowest rank's time is the collective's. */
        double dt = prof_now_s() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (k >= 0) t[k] = dt;
    }
    prof_free(buf);
    if (rc) return rc;
    *median_s = prof_median(t, (size_t)reps);
    return ENG_OK;
}

int eng_dist_barrier(void)
{
    if (!g_inited || g_world < 2) return ENG_OK;
    MPI_Request req;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS) return start_failed("the barrier");
    return wait_req(&req, 30, "a barrier");
}

/* ---- the transport probe (dist_transport.c chooses) ------------------------------------- */

/* A control variable of the MPI library as it reads it (MPI_T, after MPI_Init): "name=value"
 * into out, its enumeration's name when it has one; 0, or -1 when the library has none. */
static int cvar_text(const char *name, char *out, size_t cap)
{
    int idx, verb, bind, scope, count, nl = 0, dl = 0;
    MPI_Datatype dt;
    MPI_T_enum et;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS ||
        MPI_T_cvar_get_info(idx, NULL, &nl, &verb, &dt, &et, NULL, &dl, &bind, &scope) != MPI_SUCCESS ||
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS)
        return -1;
    long long v = 0;
    int ok;
    if (dt == MPI_INT) { int x; ok = MPI_T_cvar_read(h, &x) == MPI_SUCCESS; v = x; }
    else if (dt == MPI_UNSIGNED) { unsigned x; ok = MPI_T_cvar_read(h, &x) == MPI_SUCCESS; v = x; }
    else if (dt == MPI_UNSIGNED_LONG) { unsigned long x; ok = MPI_T_cvar_read(h, &x) == MPI_SUCCESS; v = (long long)x; }
    else if (dt == MPI_UNSIGNED_LONG_LONG) { unsigned long long x; ok = MPI_T_cvar_read(h, &x) == MPI_SUCCESS; v = (long long)x; }
    else ok = 0;
    MPI_T_cvar_handle_free(&h);
    if (!ok) return -1;
    int items = 0;
    if (et != MPI_T_ENUM_NULL && MPI_T_enum_get_info(et, &items, NULL, &nl) == MPI_SUCCESS)
        for (int i = 0; i < items; i++) {
            char item[64];
            int val, il = sizeof item;
            if (MPI_T_enum_get_item(et, i, &val, item, &il) == MPI_SUCCESS && val == v) {
                snprintf(out, cap, "%s=%s", name, item);
                return 0;
            }
        }
    snprintf(out, cap, "%s=%lld", name, v);
    return 0;
}

int eng_dist_transport_readback(char *buf, size_t cap)
{
    int provided, rc = -1;
    char a[128], b[128];
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return -1;
    if (!cvar_text("btl_vader_single_copy_mechanism", a, sizeof a) && !cvar_text("btl_vader_max_send_size", b, sizeof b))
        rc = snprintf(buf, cap, "%s %s", a, b) < 0 ? -1 : 0;
    MPI_T_finalize();
    return rc;
}

void eng_mpi_library(char *buf, size_t cap)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) len = 0;
    v[len < (int)sizeof v ? len : (int)sizeof v - 1] = '\0';
    v[strcspn(v, ",\n")] = '\0'; /* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
    snprintf(buf, cap, "%s", v[0] ? v : "unknown MPI");
}

int eng_dist_probe_transport(size_t bytes, int reps, int corrupt, double *median_s)
{
    *median_s = NAN;
    if (!g_inited || g_world < 2) return eng_fail(ENG_EINVAL, "mpi: a transport probe needs mpirun -np N with N >= 2");
    size_t n = bytes / sizeof(float) ? bytes / sizeof(float) : 1;
    float *buf = prof_malloc(n * sizeof *buf);
    if (!buf) return eng_fail(ENG_ENOMEM, "mpi: out of memory for %zu bytes", bytes);
    /* small integers (sums under 2^24 up to 1447 ranks): every order of the sum is exact,
     * so one wrong byte shows */
    for (size_t i = 0; i < n; i++) buf[i] = (float)((g_rank + 1) * (int)(1 + i % 16));
    int rc = ENG_OK;
    if (MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) {
        g_broken = 1;
        rc = eng_fail(ENG_EIO, "mpi: MPI_Allreduce of %zu bytes failed", bytes);
    }
    if (!rc && corrupt && g_rank == 0) buf[n / 2] += 1.0f; /* NNBENCH_MPI_TRANSPORT_FAIL: the check must see it */
    long bad = -1;
    for (size_t i = 0; !rc && i < n && bad < 0; i++)
        if (buf[i] != (float)((long)g_world * (g_world + 1) / 2 * (long)(1 + i % 16))) bad = (long)i;
    long worst = bad;
    if (!rc) MPI_Allreduce(&bad, &worst, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    prof_free(buf);
    if (!rc && worst >= 0)
        rc = eng_fail(ENG_EIO, "mpi: the all-reduce of %zu bytes returned a wrong sum (element %ld)", bytes, worst);
    if (rc) return rc;
    return eng_dist_time_allreduce(bytes, reps, median_s);
}
