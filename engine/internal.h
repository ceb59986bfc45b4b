/* internal.h — the engine's private structures: the op table, the nodes a model runs, its
 * layers and buffers. Shared by the engine files (ops.c, model.c, train.c, newton.c) and the
 * engine tests; not part of the public API (engine.h).
 *
 * A model is a list of LAYERS (what the user wrote: dense:16:tanh, conv:8:5:relu, pool,
 * flatten) compiled into a list of NODES, one per op call, run in order:
 *     dense:16:tanh  ->  [dense] [bias] [tanh]
 *     conv:8:5:relu  ->  [conv2d] [bias] [relu]
 *     pool           ->  [maxpool]          flatten -> [flatten]
 *     bn:relu        ->  [batchnorm] [relu]
 *     res(A, B):relu ->  [res_fork] A's nodes B's nodes [res_add] [relu]   (two layers,
 *                        res1.in and res1; res_add reads the fork's input as the shortcut)
 * followed by one loss node ([softmax_xent] or [mse]) that reads the last layer's output
 * (the logits). Every node is run by ONE function (model.c: run_node), which is where the
 * profiler scopes and the FLOP/byte counters attach.
 *
 * Memory: all parameters live in m->params (one contiguous buffer), all gradients in
 * m->grads (same layout); activations, activation gradients and workspaces in one arena
 * sized for m->max_batch rows at build time. Nothing is allocated by forward, backward or
 * an optimizer step. Tensors are float32, row-major, one row per sample; a row of a
 * [C,H,W] activation is stored C-major (NCHW per sample).
 *
 * ---- Contract for Newton (engine/newton.c) and train.c ---------------------------------
 * Walk the layers in order: for (int i = 0; i < m->n_layers; i++) { eng_layer *L = &m->layers[i]; }
 * For a dense layer (L->kind == ENG_LAYER_DENSE), after eng_model_forward(m, x, rows, ...):
 *   L->in_size, L->out_size        in and out (a multi-dimensional input is used flat)
 *   L->w   = m->params + L->w_off  W, [in_size x out_size] row-major: z = x·W + b
 *   L->b   = m->params + L->b_off  b, [out_size]   (b_off == w_off + in*out)
 *   L->dw, L->db                   the same places in m->grads (valid after a backward)
 *   L->x   [rows x in_size]        the layer's input in the last forward (for layer 0 this
 *                                  is the caller's x: it must still be alive)
 *   L->z   [rows x out_size]       pre-activation x·W + b of the last forward
 *   L->a   [rows x out_size]       post-activation act(z); == L->z when L->act == ENG_ACT_NONE,
 *                                  and when L->act == ENG_ACT_RELU: the relu runs in place, so
 *                                  z then holds act(z) too (model.c, node_aliases)
 *   L->act                         the activation kind (eng_act_derivs gives act', act'')
 *   L->dz, L->da                   dLoss/dz and dLoss/da of the last backward ([rows x out]);
 *                                  one buffer for a relu, which then holds dLoss/dz
 * A maxk layer (L->act == ENG_ACT_MAXK) is the exception: its L->a / L->da hold the CBSR
 * values [rows x k] (column indices in its maxk node's idx), and the next dense layer's
 * weight node is a cbsr_dense op (engine/sparse.c); Newton refuses such models.
 * The last layer's a (m->logits) feeds the loss. After eng_model_backward:
 *   m->dlogits [rows x n_out]      dL/dlogits of the MEAN loss: row i holds
 *                                  (p_i - onehot(y_i)) / rows for softmax_xent and
 *                                  2 (out_i - t_i) / (rows * n_out) for mse; multiply by
 *                                  rows to get one sample's own loss gradient.
 *   m->probs   [rows x n_out]      softmax probabilities of the last forward (softmax_xent
 *                                  only; NULL for mse). Valid after eng_model_forward.
 *   m->rows                        rows of the last forward.
 * eng_model_backward_from(m, v) back-propagates an arbitrary dL/dlogits v [rows x n_out]
 * through the layers (not the loss) into m->grads and every L->dz/L->da: use it for
 * Jacobian-vector products (Gauss-Newton, Fisher with sampled labels).
 * Parameter layout: layers in order, each W then b; a layer without parameters (pool,
 * flatten, res_fork, an identity res) has n_w == n_b == 0; bn: W = gamma [C], b = beta [C];
 * a res with a projection shortcut: W [F x C], b [F]. Batch norm's running statistics are
 * not parameters: they live in m->stats (checkpointed beside the parameters).
 */
#ifndef NNBENCH_ENGINE_INTERNAL_H
#define NNBENCH_ENGINE_INTERNAL_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core.h"

/* ---- one function per instruction-set path (isa.c) -----------------------------------
 * A kernel is written once as an always-inline NAME_body; ENG_ISA_KERNEL(NAME, (params),
 * (args)) compiles it once per path (no target attribute: the build's baseline, SSE2 on
 * x86-64; target("avx2"); target("avx512f")) and makes the table NAME_isa[ENG_ISA_N] that
 * callers index with eng_isa_current(). ENG_ISA_KERNEL_AVX2 stops at AVX2 (its avx512 entry
 * is the avx2 function). Every path gives the same bits because nothing is fused: the
 * bodies write no fma(), and -std=c11 means -ffp-contract=off, so GCC never contracts a*b+c
 * into an FMA even where the target has one (AVX-512F does; built with -ffp-contract=fast
 * and target("avx2,fma"), test_act_path_bits and test_cbsr_kernel fail). -DNNBENCH_NO_CLONES
 * builds the baseline only. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(NNBENCH_NO_CLONES)
#define ENG_ISA_X86 1
#define ENG_ISA_STAMP(name, params, args, attr, sfx) attr static void name##_##sfx params { name##_body args; }
#define ENG_ISA_KERNEL(name, params, args)                                                  \
    ENG_ISA_STAMP(name, params, args, , generic)                                            \
    ENG_ISA_STAMP(name, params, args, __attribute__((target("avx2"))), avx2)                \
    ENG_ISA_STAMP(name, params, args, __attribute__((target("avx512f"))), avx512)           \
    static void (*const name##_isa[ENG_ISA_N]) params = { name##_generic, name##_avx2, name##_avx512 };
#define ENG_ISA_KERNEL_AVX2(name, params, args)                                             \
    ENG_ISA_STAMP(name, params, args, , generic)                                            \
    ENG_ISA_STAMP(name, params, args, __attribute__((target("avx2"))), avx2)                \
    static void (*const name##_isa[ENG_ISA_N]) params = { name##_generic, name##_avx2, name##_avx2 };
#else
#define ENG_ISA_X86 0
#define ENG_ISA_KERNEL(name, params, args)                                                  \
    static void name##_generic params { name##_body args; }                                 \
    static void (*const name##_isa[ENG_ISA_N]) params = { name##_generic, name##_generic, name##_generic };
#define ENG_ISA_KERNEL_AVX2 ENG_ISA_KERNEL
#endif
#define ENG_ISA_BODY static inline __attribute__((always_inline)) void
/* Forgets the chosen path: the next kernel call or eng_isa_init reads NNBENCH_ISA again
 * (tests of the variable). */
void eng_isa_reset(void);

/* ---- asking for lines to write (isa.c reads the CPU) ----------------------------------
 * At 2+ threads a loop often writes lines the other core holds: the rows of a W both cores
 * read before its update, the batch buffer the other core read in the step before. A store
 * to such a line waits for it, one line at a time as the store buffer drains; PREFETCHW
 * asks for lines owned, many in flight, ahead of the stores. A hint: it changes no result.
 * eng_prefetch_w issues PREFETCHW when the CPU has it (CPUID PRFCHW: every AVX2 AMD and
 * Intel CPU from Broadwell on), else a plain prefetch. eng_prefetchw_set(0) forces the
 * plain prefetch, 1 PREFETCHW where the CPU has it (never where it has not), -1 goes back
 * to what the CPU has; it returns the setting in force (tests, benches). */
extern int eng_prefetchw_on;
int eng_prefetchw_set(int on);
static inline void eng_prefetch_w(const void *p)
{
#if ENG_ISA_X86
    if (__atomic_load_n(&eng_prefetchw_on, __ATOMIC_RELAXED)) {
        __asm__ volatile("prefetchw %0" ::"m"(*(const char *)p));
        return;
    }
#endif
    __builtin_prefetch(p, 1, 3);
}
/* Every 64-byte line [p, p + bytes) touches. */
static inline void eng_prefetch_w_range(const void *p, size_t bytes)
{
    const char *c = p, *end = c + bytes;
    for (c = (const char *)((uintptr_t)c & ~(uintptr_t)63); c < end; c += 64) eng_prefetch_w(c);
}

/* ---- branch-free float helpers (ops.c's activations, attention.c's softmax) ---------- */
#include <string.h>

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

/* c ? a : b on bits. A float ?: stays a branch at -O2: with trapping math GCC will not
 * if-convert a compare that may raise "invalid", and the loop then does not vectorize. */
static inline float select_f(int c, float a, float b)
{
    uint32_t m = -(uint32_t)c;
    return u2f((f2u(a) & m) | (f2u(b) & ~m));
}

/* exp(x) for x <= 0 (and NaN), subnormal results included. x = -m ln2 + r
 * with m = round(-x log2 e) read from the mantissa of a float shifted by 1.5*2^23 (no
 * float-to-int conversion, which is undefined for NaN); r by Cody-Waite (ln2 = HI + LO,
 * m * HI exact); e^r = 1 + r + r^2 Q(r) on |r| <= ln2/2 (Chebyshev fit, error 8e-9).
 * 2^-m is applied as two normal powers of two so results down to 2^-149 stay right. */
#define EXP_SHIFT 12582912.0f          /* 1.5 * 2^23 */
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO (-2.12194440054690583e-4f)
static inline float exp_nonpos(float x)
{
    x = select_f(x < -104.0f, -104.0f, x); /* exp(-104) rounds to 0; keeps m in [0, 150] */
    float t = EXP_SHIFT - x * EXP_LOG2E;
    uint32_t m = f2u(t) - f2u(EXP_SHIFT);
    float mf = t - EXP_SHIFT;
    float r = (x + mf * EXP_LN2_HI) + mf * EXP_LN2_LO;
    float q = 1.392617611993558e-3f;
    q = q * r + 8.363173074513711e-3f;
    q = q * r + 4.1666554662050534e-2f;
    q = q * r + 1.666657702559799e-1f;
    q = q * r + 0.5f;
    float p = 1.0f + (r + (r * r) * q);
    uint32_t m1 = m >> 1, m2 = m - m1;
    return p * u2f((127u - m1) << 23) * u2f((127u - m2) << 23);
}

/* ---- ops --------------------------------------------------------------------------- */

/* Op ids are persisted by number (profiles in SQLite): append only, never renumber. */
typedef enum {
    ENG_OP_DENSE = 0,
    ENG_OP_BIAS = 1,
    ENG_OP_RELU = 2,
    ENG_OP_TANH = 3,
    ENG_OP_SIGMOID = 4,
    ENG_OP_GELU = 5,
    ENG_OP_SOFTMAX_XENT = 6,
    ENG_OP_MSE = 7,
    ENG_OP_CONV2D = 8,
    ENG_OP_MAXPOOL = 9,
    ENG_OP_FLATTEN = 10,
    ENG_OP_MAXK = 11,          /* sparse.c: top-k per row, output in CBSR */
    ENG_OP_CBSR_DENSE = 12,    /* sparse.c: CBSR input x dense W */
    ENG_OP_AGGREGATE = 13,     /* gnn.c: GraphSAGE self + mean of neighbours over a block */
    ENG_OP_AVGPOOL = 14,       /* KxK mean, stride S */
    ENG_OP_GAP = 15,           /* global average pooling: per channel mean over H x W */
    /* sequence ops (attention.c): one row is [n positions x d features] */
    ENG_OP_EMBED = 16,         /* per-position linear projection + bias (token/patch embedding) */
    ENG_OP_POSENC = 17,        /* + positional encoding (sinusoidal table or learned) */
    ENG_OP_LAYERNORM = 18,     /* per-position layer normalization with gain and shift */
    ENG_OP_ATTN_QKV = 19,      /* per-position projection to Q, K, V */
    ENG_OP_ATTN_SCORES = 20,   /* per head Q·K^T / sqrt(d_head) */
    ENG_OP_ATTN_SOFTMAX = 21,  /* row softmax of the scores, in place */
    ENG_OP_ATTN_WSUM = 22,     /* per head probabilities · V */
    ENG_OP_ATTN_OUT = 23,      /* output projection of the heads' concatenation */
    ENG_OP_LINFORMER_PROJ = 24,/* K, V projected along the sequence to k rows: E^T K, F^T V */
    ENG_OP_RESADD = 25,        /* residual: y = x + the block input */
    ENG_OP_FFN = 26,           /* per-position linear + bias (the encoder's MLP) */
    ENG_OP_MEANPOOL = 27,      /* mean over the positions */
    ENG_OP_LSH_HASH = 28,      /* Reformer LSH: buckets by random rotations, sorted, chunked key lists */
    ENG_OP_BATCHNORM = 29,     /* norm.c: per channel (or feature) batch normalization */
    ENG_OP_RES_FORK = 30,      /* residual.c: where a shortcut leaves; backward adds its gradient */
    ENG_OP_RES_ADD = 31,       /* residual.c: y = x + shortcut (identity or 1x1 projection) */
    ENG_OP_COUNT
} eng_op_id;

typedef enum { ENG_FWD = 0, ENG_BWD = 1 } eng_dir;

typedef struct eng_node eng_node;

/* ---- the fp32 GEMM entry point (gemm.c) ----------------------------------------------
 * Every fp32 GEMM of the engine goes through eng_sgemm: C[M x N] = alpha·op(A)·op(B) +
 * beta·C, row-major, op(X) = X (t = 0) or X^T (t = 1), lda/ldb/ldc the row strides of the
 * matrices as stored (cblas' conventions). Each shape class (transposes and the binary
 * magnitude of M, N, K) is served by the backend eng_gemm_prepare chose for it: OpenBLAS
 * (the core it runs), or oneDNN's dnnl_sgemm; a class nobody prepared runs on OpenBLAS. */
void eng_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
               int ldb, float beta, float *C, int ldc);
/* The same, with the cut of a call threaded over the pool chosen: AUTO cuts the longer side
 * of C; ROWS cuts rows (when each slab keeps 16, else as AUTO), so that every slab writes
 * one contiguous block (two cores writing alternate pieces of every row of C, the
 * prefetchers of each pull the other's lines back and forth: an update of 784 x 256 cut by
 * columns took over 10x as long as one cut by rows, build/bench/pool_bench). The OpenBLAS
 * backend threads its own way. */
typedef enum { ENG_SPLIT_AUTO = 0, ENG_SPLIT_ROWS = 1 } eng_split;
void eng_sgemm_split(eng_split split, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc);
/* Work on rows of C done right after a GEMM computed them (a dense layer's bias and
 * activation, or the backward of those below it: ops.c): rows(ctx, s, r0, r1) runs once
 * for every slab s of a cut by rows, on the thread that computed rows [r0, r1) of C, while
 * they are in its cache, and then last(ctx) once (if set), on whichever thread finished
 * last, after every slab's rows. Edges are on ENG_SPLIT_UNIT rows; slab 0 is the calling
 * thread's (pool.c). A call not cut by rows (by columns, whole, or on OpenBLAS) runs the
 * rows after the product, split over the pool by rows like an elementwise op (ew: rows x N
 * of ENG_EW_SPLIT_MIN floats or more). done is gemm.c's. */
typedef struct {
    void (*rows)(void *ctx, int s, size_t r0, size_t r1);
    void (*last)(void *ctx);
    void *ctx;
    atomic_int done;
} eng_rows_after;
void eng_sgemm_split_after(eng_split split, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                           int lda, const float *B, int ldb, float beta, float *C, int ldc, eng_rows_after *after);
/* C[M x N] = A[M x K] · B[K x N] (no transposes, beta 0) with K cut over the pool's
 * threads: slab t multiplies columns K_t of A by rows K_t of B into C or its partial in
 * work, then the partials are added by rows, in slab order (the same bits every run at a
 * thread count; not those of the uncut product; `after`, or NULL, runs in the adding
 * job's slabs). Thread t thereby reads only rows K_t of
 * B, the rows of a dense layer's W whose gradient it computes (eng_sgemm_split ROWS) and
 * whose update it makes (eng_optim_set_matrices): W, its gradient and the optimizer's
 * state stay in that core's cache from step to step. Needs eng_sgemm_ksplit_floats(M, N,
 * K) floats of work (0: the cut does not pay, or one thread); with less, or on a class
 * not served by oneDNN, or from inside a slab, it is eng_sgemm_split(ROWS, ...). */
size_t eng_sgemm_ksplit_floats(int M, int N, int K);
void eng_sgemm_ksplit(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
                      float *work, size_t work_floats, eng_rows_after *after);

/* One GEMM an op issues (the shapes eng_gemm_prepare measures before a run). calls: how
 * often it runs relative to the others (0 counts as 1): with several threads the backend
 * serving the whole model is the one with the least time over the calls, so an epoch's
 * one short last batch must not weigh as much as its hundreds of full ones. */
typedef struct {
    int ta, tb, M, N, K;
    double calls;
} eng_gemm_shape;
#define ENG_OP_MAX_GEMMS 4
/* Chooses the backend of every shape class among shapes[n] for `threads` threads under
 * pol (gemm_choose.c): cached results where the cache has them, a probe in a child process
 * for the rest; fills the class table eng_sgemm reads. ENG_EINVAL when no backend passed
 * its check on some class. */
int eng_gemm_prepare(eng_gemm_policy pol, int threads, const eng_gemm_shape *shapes, int n);
/* Counts eng_gemm_prepare calls: a run that prepared at generation g finds its classes in
 * the table while the generation is still g (another run's prepare replaces them). */
unsigned eng_gemm_generation(void);
/* The classes of shapes[n] joined to the last prepared ones, prepared again under the last
 * policy and thread count (auto at eng_gemm_threads before any prepare): for timing a
 * choice between code paths (conv.c's auto) on the GEMMs a run would give them. */
int eng_gemm_prepare_add(const eng_gemm_shape *shapes, int n);
void eng_gemm_set_threads(int n);
int eng_gemm_threads(void);

/* ---- the worker pool (pool.c) ------------------------------------------------------------
 * One pool for the GEMM slabs and the elementwise loops. eng_pool_run(nslab, fn, ctx) runs
 * fn(ctx, s, nslab) once for every s in [0, nslab) (s = 0 always on the caller, s = i on
 * worker i when it comes in time, else on the caller or another worker) and returns 1; it returns 0 without running
 * anything when nslab is not in 2..ENG_POOL_MAX or the pool is driven already (a call from
 * inside a slab, or from another thread): the caller then does the work itself, unsplit.
 * eng_pool_for(n, grain, fn, ctx) runs fn(ctx, lo, hi) over [0, n) in at most
 * eng_pool_threads() ranges of at least `grain` each (edges on multiples of 16), or in one
 * call. A loop whose elements are independent gives the same bits either way. */
#define ENG_POOL_MAX 8
typedef void (*eng_pool_fn)(void *ctx, int slab, int nslab);
typedef void (*eng_pool_range_fn)(void *ctx, size_t lo, size_t hi);
int eng_pool_run(int nslab, eng_pool_fn fn, void *ctx);
/* Slab s of nslab over [0, len): [*lo, *hi), whole units, the same cut for every caller, so
 * that jobs cut alike give each thread the same part: a GEMM's rows or K (gemm.c), the
 * update's rows of W (optim.c), a batch's rows (eng_pool_for, the gather) all cut
 * [0, len) in ENG_SPLIT_UNIT units (16 floats: a line; 16 rows). */
#define ENG_SPLIT_UNIT 16
void eng_split_range(size_t len, size_t unit, int s, int nslab, size_t *lo, size_t *hi);
void eng_pool_for(size_t n, size_t grain, eng_pool_range_fn fn, void *ctx);
/* Threads eng_pool_for splits over (1..ENG_POOL_MAX; eng_gemm_prepare sets it to the run's
 * count when the GEMMs run on the pool, else 1). */
void eng_pool_set_threads(int n);
int eng_pool_threads(void);
/* The idle task: a worker that has waited a few microseconds for a job calls fn(ctx)
 * until the next job comes, again and again while it returns 1 (it did a piece of work:
 * each call must be short, a few microseconds, and never block), every few dozen pauses
 * while it returns 0. One task at a time: set returns 0 when another is set. NULL fn
 * clears it, and returns once no worker is inside it. */
typedef int (*eng_pool_idle_fn)(void *ctx);
int eng_pool_set_idle(eng_pool_idle_fn fn, void *ctx);
/* Slabs run by workers so far (not by callers): tests and benches see whether they helped. */
long eng_pool_worker_slabs(void);
/* Jobs split so far (eng_pool_run calls that ran), process-wide, and the time their callers
 * waited after running their own slabs until the other threads' were done: what two
 * threads lose to the hand-over and to one half taking longer than the other (a run reports
 * its steps' share: eng_run_result.pool). */
void eng_pool_join_stats(long *joins, double *wait_s);
/* Test hooks (tests/engine/pool.c holds a thread at a chosen point with them; NULL in a
 * run): the claim hook gets the pool's state at each claim attempt, before the job is read;
 * the post hook runs after a job is written and before it is published. */
typedef void (*eng_pool_claim_hook_fn)(uint64_t state);
typedef void (*eng_pool_post_hook_fn)(void);
extern _Atomic(eng_pool_claim_hook_fn) eng_pool_claim_hook;
extern _Atomic(eng_pool_post_hook_fn) eng_pool_post_hook;
/* The smallest range (floats) a memory-bound loop is split into: 32 KiB of input, a few
 * microseconds of one core's bandwidth, against the ~2 us a hand-over may cost (gemm.c's
 * split_count assumes the same). An estimate: tests/bench/pool_bench.c measures the
 * crossover, and only an idle machine gives figures to tune it by. */
#define ENG_POOL_GRAIN 8192
/* An elementwise op over fewer floats than this runs on the calling thread (ops.c): split,
 * each slab costs a hand-over. Larger ones split by rows, the cut the dense layers' GEMMs
 * give their outputs (ENG_SPLIT_ROWS), so each thread finds its rows in its own cache. On
 * the Fashion MLP at 2 threads, 16384 gave 196k samples/s against 170k for 65536 (the
 * 128 x 256 and 128 x 128 activations on the caller; medians of 7 interleaved runs). */
#define ENG_EW_SPLIT_MIN 16384
/* The GEMM shapes one forward + backward of m on `rows` rows issues; the count written. */
int eng_model_gemm_shapes(const eng_model *m, int rows, eng_gemm_shape *out, int cap);
/* The dense layers' weight matrices (in x out at offset off of the parameters, in order),
 * whose GEMMs are cut by rows of W (eng_optim_set_matrices); the count written. */
int eng_model_dense_matrices(const eng_model *m, size_t *off, int *rows, int *cols, int cap);
/* Readies the model for the GEMM's thread count (eng_gemm_set_threads, called before): a
 * dense layer whose W holds at least ENG_KSPLIT_MIN_W floats gets its forward's K cut
 * (eng_sgemm_ksplit) and the work it needs; at one thread, none. ENG_ENOMEM. */
#define ENG_KSPLIT_MIN_W 65536
int eng_model_plan_ksplit(eng_model *m);
/* Fuses (on = 1, what eng_model_build does) or unfuses each dense node's bias and
 * activation into its GEMMs (ops.c, "fused into a dense layer's GEMMs"). Unfused, a
 * bias's backward sums its rows in one pass instead of by blocks: its gradient's last bits
 * differ. ENG_ENOMEM (the blocks of a fused bias's backward). */
int eng_model_set_fusion(eng_model *m, int on);

/* ---- small shared helpers (common.c) -------------------------------------------------- */
/* $NNBENCH_CACHE_DIR, else $XDG_CACHE_HOME/nnbench, else ~/.cache/nnbench. */
int eng_cache_dir(char *buf, size_t cap);
/* mkdir -p; 0 or -1 (errno). */
int eng_mkdirs(const char *dir);
/* The path that re-executes this program (into buf): /proc/self/exe, or under a tool
 * such as valgrind, the file the process was started from (gemm_probe.c). */
void eng_self_exe(char *buf, size_t cap);
/* Measured choices kept per machine, so that runs on one machine repeat bit for bit: the
 * value stored for key in the cache directory's file `name` (1 found, 0 not), and storing
 * one (failures are silent: the choice is measured again next time). */
int eng_choice_get(const char *name, const char *key, char *val, size_t cap);
void eng_choice_put(const char *name, const char *key, const char *val);
/* Every line of the choices file `name` whose key begins with prefix, in file order (the
 * last of a key is the one in force): fn gets the rest of the key and the value. The
 * lines read. */
int eng_choice_each(const char *name, const char *prefix, void (*fn)(void *ud, const char *rest, const char *val),
                    void *ud);

/* One entry of the op table (ops.c). forward/backward work on `rows` rows of the node's
 * buffers; flops/bytes are the software counters of one such call, from shapes only
 * (formulas documented in ops.c). */
typedef struct {
    const char *name;        /* "dense", "conv2d", ...; profiler scopes are name.fwd/.bwd */
    void (*forward)(eng_node *n, int rows);
    void (*backward)(eng_node *n, int rows);
    uint64_t (*flops)(const eng_node *n, int rows, eng_dir dir);
    uint64_t (*bytes)(const eng_node *n, int rows, eng_dir dir);
    /* The eng_sgemm calls one forward + backward of `rows` rows makes (at most
     * ENG_OP_MAX_GEMMS distinct shapes, written to out); the count. NULL: none. */
    int (*gemms)(const eng_node *n, int rows, eng_gemm_shape *out);
} eng_op;

extern const eng_op eng_ops[ENG_OP_COUNT];

/* A node: one op applied to one layer's tensors. Self-contained, so tests can build one
 * by hand and call eng_ops[op].forward/backward on it. */
struct eng_node {
    eng_op_id op;
    int layer;                  /* index into m->layers; -1 for the loss node */
    int in_shape[3], out_shape[3]; /* C,H,W of one row */
    size_t in_size, out_size;   /* per row */
    int kernel, pad, stride;    /* conv2d: K, zero padding per side, stride (>= 1); avgpool: K, S */
    const float *x;             /* input  [rows x in_size] */
    float *y;                   /* output [rows x out_size]; == x for bias and flatten (in place) */
    float *dx;                  /* dL/dx, written by backward; NULL = not needed (first layer) */
    float *dy;                  /* dL/dy, read by backward; == dx for bias and flatten */
    float *w, *b, *dw, *db;     /* dense: W [in x out], b [out]; conv2d: W [F x C*K*K], b [F];
                                 * bias op: b, db only */
    size_t n_w, n_b;
    int32_t *argmax;            /* maxpool: index into the row of x, per output element */
    /* CBSR (compressed balanced sparse row): every row holds exactly k values and their k
     * column indices, ascending. maxk writes y = values [rows x k] and idx [rows x k] (its
     * dy is [rows x k] too); cbsr_dense reads x = values, idx = the maxk node's idx, and its
     * dx is dL/dvalues [rows x k]. in_size/out_size stay the dense (logical) widths. */
    int k;
    int32_t *idx;
    /* aggregate: the block whose destinations are the rows (x has its n_src rows) */
    const struct eng_block *blk;
    /* conv2d workspace for `chunk` rows at a time: col [C*K*K x chunk*P] and dcol (same
     * size). col_kept: col is this node's own and still holds the last forward's im2col
     * (the whole batch fit in one chunk), so backward need not rebuild it; otherwise col
     * is shared by the conv nodes and backward rebuilds it. */
    float *col, *dcol;
    int chunk, col_kept;
    eng_conv_algo conv_algo;    /* conv2d: the algorithm that runs (never auto) */
    /* conv2d under winograd/fft: the profiler and its scopes of the algorithm's stages per
     * direction (eng_conv_register_stages); prof NULL = stages not profiled. dense: the
     * profiler of its fused nodes (fuse_fwd below) */
    prof_t *prof;
    int prof_stage[2][4];
    /* conv2d under onednn: its layer record (layout, workspace, primitive sets), found on
     * the first pass and kept; process-lived, owned by conv_onednn.c (NULL: not yet) */
    struct eng_dnconv *dn;
    /* loss nodes: x = logits, dx = dL/dlogits, y = softmax probabilities (softmax_xent) */
    const int32_t *labels;      /* class per row, or NULL */
    const float *targets;       /* [rows x out_size] targets, or NULL */
    double loss;                /* mean loss of the last forward */
    int correct;                /* rows whose argmax matched the label (labels only) */
    /* sequence ops (attention.c): the encoder's attention state; resadd's block input
     * (skip->x, its gradient skip->dx); accum: backward adds into dx (a residual's
     * other path wrote it first); ws: layernorm's mean and 1/std per position, or the
     * sinusoidal table [n x d] */
    struct eng_attn *attn;
    const struct eng_node *skip;
    int accum;
    float *ws;
    /* dense with a large W at several threads: the forward's K-cut partials
     * (eng_sgemm_ksplit; the model's one block, set by eng_model_plan_ksplit), or NULL */
    float *kwork;
    size_t kwork_floats;
    /* Nodes fused into a dense node's GEMMs (model.c plans it, ops.c runs it): fuse_fwd,
     * the bias and activation after it, run on each slab's rows of y right after the
     * slab computed them; fuse_bwd, the activation and bias before it, run on each slab's
     * rows of dx (NULL: none). fused: ENG_FUSED_FWD / _BWD, this node's forward / backward
     * runs inside such a dense node's (eng_node_run skips it). bpart: a fused bias's
     * backward, the column sums of each block of ENG_SPLIT_UNIT rows [blocks x n_b], added
     * in block order: the same bits at any thread count. A dense node's prof (above) is
     * the profiler that times its fused nodes, on the training thread's slab. */
    struct eng_node *fuse_fwd[2], *fuse_bwd[2];
    int fused;
    float *bpart;
    /* profiler scope ids (-1 when profiling is off) */
    int prof_fwd, prof_bwd;
    /* batchnorm: running mean [C] then running variance [C] (in m->stats), the last
     * training forward's batch mean and 1/sqrt(var + eps) [C] each in save; training: the
     * mode of the next forward (1: batch statistics, updating the running ones) */
    float *stats, *save;
    int training;
    /* res_add: peer is the block's res_fork node (the shortcut is peer->x); dskip [rows x
     * peer->in_size] is dL/dshortcut, written by res_add's backward and added by the fork's.
     * With a projection (w != NULL): W [F x C], b [F], stride; col holds the strided
     * shortcut of the last forward channel-major [C x rows*P], dcol the GEMMs' products
     * (eng_res_proj_dcol_floats). */
    struct eng_node *peer;
    float *dskip;
};

/* The GEMM shapes of node nd's forward + backward on `rows` rows (eng_ops[].gemms), and of
 * its last, shorter chunk when it works in chunks of rows (conv); appended to out up to
 * cap, the count written. What every caller of eng_gemm_prepare collects its shapes with. */
static inline int eng_node_gemm_shapes(const eng_node *nd, int rows, eng_gemm_shape *out, int cap)
{
    int n = 0, last = nd->chunk > 0 && rows > nd->chunk ? rows % nd->chunk : 0;
    for (int part = 0; eng_ops[nd->op].gemms && part < (last ? 2 : 1); part++) {
        eng_gemm_shape g[ENG_OP_MAX_GEMMS];
        int k = eng_ops[nd->op].gemms(nd, part ? last : rows, g);
        for (int j = 0; j < k && n < cap; j++) out[n++] = g[j];
    }
    return n;
}

/* One encoder layer's attention (attention.c): where its nodes find Q, K, V and put their
 * gradients. Per sample: Q is n rows of the QKV buffer (row stride 3d); K and V are m rows
 * with row stride ldkv, kv_row floats apart per sample: in QKV itself (full: m = n) or in
 * the Linformer projection's output (m = k, ldkv = d). Probabilities are [heads x n x m]. */
typedef struct eng_attn {
    eng_attn_kind kind;
    int n, m, d, heads;
    float *qkv, *dqkv;          /* [B x n x 3d]: Q | K | V per position, and the gradient */
    float *k, *v, *dk, *dv;     /* the first sample's K and V (and gradients) */
    int ldkv;
    size_t kv_row;
    /* LSH (m = rounds x 2 x chunk key slots per query): the key positions of each query
     * [B x heads x n x m], -1 = masked; keys are the queries themselves (shared QK) */
    int32_t *idx;
    int buckets, rounds, chunk;
} eng_attn;

/* attention.c: the sequence ops (entries of eng_ops; formulas in attention.c). seqlin serves
 * embed, attn_qkv, attn_out and ffn (per-position linear + bias). */
#define ENG_SEQ_OP_DECL(p)                                                                  \
    void eng_##p##_fwd(eng_node *n, int rows);                                               \
    void eng_##p##_bwd(eng_node *n, int rows);                                               \
    uint64_t eng_##p##_flops(const eng_node *n, int rows, eng_dir dir);                      \
    uint64_t eng_##p##_bytes(const eng_node *n, int rows, eng_dir dir);
ENG_SEQ_OP_DECL(seqlin)
ENG_SEQ_OP_DECL(posenc)
ENG_SEQ_OP_DECL(layernorm)
ENG_SEQ_OP_DECL(attn_scores)
ENG_SEQ_OP_DECL(attn_softmax)
ENG_SEQ_OP_DECL(attn_wsum)
ENG_SEQ_OP_DECL(linformer)
ENG_SEQ_OP_DECL(resadd)
ENG_SEQ_OP_DECL(meanpool)
ENG_SEQ_OP_DECL(lsh_hash)
int eng_seqlin_gemms(const eng_node *n, int rows, eng_gemm_shape *g);
int eng_attn_scores_gemms(const eng_node *n, int rows, eng_gemm_shape *g);
int eng_attn_wsum_gemms(const eng_node *n, int rows, eng_gemm_shape *g);
int eng_linformer_gemms(const eng_node *n, int rows, eng_gemm_shape *g);


/* Elementwise derivatives of an activation at pre-activation z with a = act(z):
 * d1 = act'(z), d2 = act''(z), n elements. Either output may be NULL. (For Newton.) */
void eng_act_derivs(eng_act act, const float *z, const float *a, size_t n, float *d1, float *d2);
/* The op that implements an activation (ENG_OP_RELU, ...); -1 for ENG_ACT_NONE. */
int eng_act_op(eng_act act);
const char *eng_act_name(eng_act act); /* "relu", "tanh", ... "" for none */

/* sparse.c: the MaxK and CBSR x dense ops (entries of eng_ops) and their plain kernels,
 * exposed for the tests and benches. Shapes in the comments; B = rows. */
void eng_maxk_fwd(eng_node *n, int rows);
void eng_maxk_bwd(eng_node *n, int rows);
uint64_t eng_maxk_flops(const eng_node *n, int rows, eng_dir dir);
uint64_t eng_maxk_bytes(const eng_node *n, int rows, eng_dir dir);
void eng_cbsr_dense_fwd(eng_node *n, int rows);
void eng_cbsr_dense_bwd(eng_node *n, int rows);
uint64_t eng_cbsr_dense_flops(const eng_node *n, int rows, eng_dir dir);
uint64_t eng_cbsr_dense_bytes(const eng_node *n, int rows, eng_dir dir);
/* top-k of each row of x [B x d] -> val, idx [B x k] (ties: the lower column wins) */
void eng_maxk_select(const float *x, int rows, int d, int k, float *val, int32_t *idx);
/* y [B x out] = CBSR(val, idx; k per row) · W [d x out]; pack: ENG_CBSR_PACK_FLOATS(d)
 * floats of scratch, 64-byte aligned for speed (a tile of W's columns, copied where L1
 * keeps it; cbsr_dense nodes have it as ws) */
#define ENG_CBSR_PACK_FLOATS(d) ((size_t)(d) * 32)
void eng_cbsr_mm(const float *val, const int32_t *idx, int rows, int k, const float *w, int d, int out, float *y,
                 float *pack);
/* dval [B x k] = dy [B x out] · W^T at the kept columns; dw [d x out] = CBSR^T · dy
 * (dw is overwritten; either output may be NULL); pack as eng_cbsr_mm's (dw's tile) */
void eng_cbsr_mm_bwd(const float *val, const int32_t *idx, int rows, int k, const float *w, int d, int out,
                     const float *dy, float *dval, float *dw, float *pack);

/* gnn.c: the aggregate op. y [n_dst x 2·in] = [x_dst | mean of x over each destination's
 * sampled neighbours]; x dense [n_src x in] or CBSR (k > 0: values + idx). */
void eng_aggregate_fwd(eng_node *n, int rows);
void eng_aggregate_bwd(eng_node *n, int rows);
uint64_t eng_aggregate_flops(const eng_node *n, int rows, eng_dir dir);
uint64_t eng_aggregate_bytes(const eng_node *n, int rows, eng_dir dir);

/* conv.c: the conv2d op (zero padding, stride; im2col + sgemm, or for stride 1 direct,
 * Winograd or FFT, by n->conv_algo), exposed for the op table, the model and the tests. */
void eng_conv_fwd(eng_node *n, int rows);
void eng_conv_bwd(eng_node *n, int rows);
uint64_t eng_conv_flops(const eng_node *n, int rows, eng_dir dir);
uint64_t eng_conv_bytes(const eng_node *n, int rows, eng_dir dir);
int eng_conv_gemms(const eng_node *n, int rows, eng_gemm_shape *g);
/* Prepares (eng_gemm_prepare_add) the GEMM classes of every GEMM-based algorithm the node
 * can run on `rows` rows, its last shorter chunk included: what auto times them on, and
 * what a bench comparing them gives each. */
int eng_conv_prepare_gemms(eng_node *n, int rows);
/* Floats of n->col (and of n->dcol) the node needs for `chunk` rows under either algorithm. */
size_t eng_conv_ws_floats(const eng_node *n, int chunk);
/* Sets n->conv_algo from the requested one: a forced algorithm the layer cannot run falls
 * back to im2col (eng_conv_fallback says why); auto times `reps` forward + backward passes
 * of `rows` rows with each algorithm the node can run (its buffers must be wired; their
 * contents are overwritten; the GEMM-based ones on prepared classes) and keeps the
 * fastest, cached per machine and shape. Makes the FFT plans of an fft node. ENG_OK, or
 * ENG_EINVAL (FFTW could not plan, or no GEMM backend passed its check) with a message. */
int eng_conv_select(eng_node *n, eng_conv_algo want, int rows, int reps);
/* Why the node cannot run algo ("" when it can): "needs a 3x3 kernel and stride 1". */
const char *eng_conv_fallback(const eng_node *n, eng_conv_algo algo);
/* The model summary's algorithm note of a conv layer built with want (model.c). */
int eng_conv_tag(const eng_node *n, eng_conv_algo want, char *s, size_t cap);
/* "im2col", "direct", "auto", "winograd", "winograd4", "fft". */
const char *eng_conv_algo_name(eng_conv_algo a);
/* Registers the profiler scopes of the node's algorithm stages (none for im2col/direct)
 * under layer; -1 when the scope table is full. */
int eng_conv_register_stages(prof_t *prof, eng_node *n, const char *layer);

/* norm.c: the batchnorm op (ENG_BN_EPS inside the square root, running statistics updated
 * with momentum ENG_BN_MOMENTUM and the unbiased batch variance, as PyTorch's BatchNorm). */
#define ENG_BN_EPS 1e-5f
#define ENG_BN_MOMENTUM 0.1f
void eng_bn_fwd(eng_node *n, int rows);
void eng_bn_bwd(eng_node *n, int rows);
uint64_t eng_bn_flops(const eng_node *n, int rows, eng_dir dir);
uint64_t eng_bn_bytes(const eng_node *n, int rows, eng_dir dir);
/* Channels a batchnorm node normalises: C of a C x H x W input, or every feature of a flat
 * (1 x 1 x N) one. */
int eng_bn_channels(const eng_node *n);

/* residual.c: the res_fork and res_add ops. */
void eng_res_fork_fwd(eng_node *n, int rows);
void eng_res_fork_bwd(eng_node *n, int rows);
uint64_t eng_res_fork_flops(const eng_node *n, int rows, eng_dir dir);
uint64_t eng_res_fork_bytes(const eng_node *n, int rows, eng_dir dir);
void eng_res_add_fwd(eng_node *n, int rows);
void eng_res_add_bwd(eng_node *n, int rows);
uint64_t eng_res_add_flops(const eng_node *n, int rows, eng_dir dir);
uint64_t eng_res_add_bytes(const eng_node *n, int rows, eng_dir dir);
int eng_res_add_gemms(const eng_node *n, int rows, eng_gemm_shape *g);
/* Channels and positions of a residual shape: C x (H·W), or N x 1 for a flat one. */
void eng_res_dims(const int shape[3], int *C, int *P);
/* The projection stride taking a shortcut of shape in to out (1x1 conv: (H-1)/S + 1 == OH
 * and the same for W), or 0 when there is none. */
int eng_res_proj_stride(const int in[3], const int out[3]);
/* A projection res_add's dcol for `rows` rows (floats): the filter-major product [F x rows·P]
 * (16-aligned), then the shortcut's gradient [C x rows·P] (residual.c). */
size_t eng_res_proj_dcol_floats(const eng_node *n, size_t rows);

/* model.c: runs one node through the op table inside its profiler scope (prof may be NULL):
 * the one call site of every op, also for graph models (gnn.c). */
void eng_node_run(prof_t *prof, eng_node *n, eng_dir dir, int rows);
#define ENG_FUSED_FWD 1
#define ENG_FUSED_BWD 2

/* ---- layers and the model ---------------------------------------------------------- */

typedef struct {
    eng_layer_kind kind;
    eng_act act;
    char name[24];              /* "dense1", "conv2", "pool1", "flatten1" (count per kind) */
    int in_shape[3], out_shape[3];
    size_t in_size, out_size;   /* per row */
    int kernel, pad, stride;    /* conv */
    size_t w_off, n_w, b_off, n_b; /* offsets/counts in params and grads */
    float *w, *b, *dw, *db;     /* NULL when the layer has no parameters */
    const float *x;             /* input of the last forward [rows x in_size] */
    float *z, *dz;              /* pre-activation and its gradient [rows x out_size] */
    float *a, *da;              /* post-activation and its gradient (== z, dz without act) */
    int node_first, n_nodes;    /* its nodes: m->nodes[node_first .. +n_nodes) */
    int res_begin;              /* res: the index of its block's res( layer */
} eng_layer;

/* an encoder layer takes up to 13 nodes (attention.c); room for 8 of them */
#define ENG_MAX_NODES (3 * ENG_MAX_LAYERS + 1 + 8 * 13)

struct eng_model {
    eng_model_config cfg;
    int in_shape[3];
    size_t in_size;
    int n_out;
    int max_batch;
    int n_layers;
    eng_layer layers[ENG_MAX_LAYERS];
    int n_nodes;                /* layer nodes + the loss node (last) */
    eng_node nodes[ENG_MAX_NODES];
    eng_attn attn[ENG_MAX_LAYERS]; /* encoder layer i's attention state (attention.c) */
    eng_node *loss;             /* == &nodes[n_nodes - 1] */
    float *params, *grads;      /* n_params each */
    size_t n_params;
    const float *logits;        /* the last layer's output [rows x n_out] */
    float *dlogits;             /* dL/dlogits [rows x n_out] (see the contract above) */
    float *probs;               /* softmax probabilities, or NULL for mse */
    float *dinput;              /* dL/dx of the input when eng_model_enable_input_grad ran */
    int rows;                   /* rows of the last forward */
    prof_t *prof;               /* NULL = profiling off */
    void *arena;                /* activations + workspaces: one block */
    float *kwork;               /* the dense forwards' K-cut partials (eng_model_plan_ksplit) */
    float *bpart;               /* the fused biases' backward blocks (eng_model_set_fusion) */
    int32_t *iarena;            /* argmax indices: one block */
    float *stats;               /* batchnorm running mean and variance, per bn layer in order */
    size_t n_stats;
    int training;               /* eng_model_set_training */
    char summary[2048];
};

/* attention.c: the sequence layers' side of model.c (ENG_LAYER_SEQ). plan: checks the
 * layer, adds its nodes, sets its output shape, name and parameter count (one block,
 * n_b = 0). ws_floats: the node's workspace for max_batch rows. wire: after the buffers
 * are carved, points the layer's nodes at their parameters, attention state and block
 * input. init: its parameter block. summary: its part of the model summary. charge: the
 * attention buffers' bytes into their scopes' memory column (prof may be NULL). */
/* nodes.c: a zeroed node for op with these shapes (sizes from the shapes, no profiler
 * scopes yet); eng_model_add_node appends one to m (the caller checked the room). */
void eng_node_init(eng_node *n, eng_op_id op, int layer, const int in_shape[3], const int out_shape[3]);
eng_node *eng_model_add_node(eng_model *m, eng_op_id op, int layer, const int in_shape[3], const int out_shape[3]);
int eng_seq_plan(eng_model *m, const eng_layer_spec *sp, int i, eng_layer *L, const int shape[3], int out[3]);
size_t eng_seq_ws_floats(const eng_node *n, int max_batch);
void eng_seq_wire(eng_model *m, eng_layer *L);
void eng_seq_init(eng_model *m, eng_layer *L, uint64_t seed, int i);
int eng_seq_summary(const eng_model *m, const eng_layer *L, char *s, size_t cap);
void eng_seq_charge(eng_model *m);
/* Parses model.attention ("full", "linformer:k=K", "lsh:buckets=B:rounds=R") into mc's
 * attn fields; -1 with why. */
int eng_attn_parse(const char *s, eng_model_config *mc, char *why, size_t cap);
/* config.c's layer parser hands it names it does not know: 1 = not a sequence layer,
 * 0 = parsed into L, -1 = a sequence layer written wrong (why says how to write it). */
int eng_seq_layer_parse(char *const *parts, int np, eng_layer_spec *L, char *why, size_t cap);

/* Makes backward also compute dL/d(input) into m->dinput [max_batch x in_size]. Allocates
 * once (outside any training step); for gradient checks and input-sensitivity studies. */
int eng_model_enable_input_grad(eng_model *m);
/* Back-propagates dlogits [m->rows x n_out] (instead of the loss gradient) through the
 * layers of the last forward; overwrites m->grads, every layer's dz/da and m->dlogits. */
void eng_model_backward_from(eng_model *m, const float *dlogits);
/* After each node of a backward: the gradients from index `from` to the end are final
 * (data-parallel buckets start their all-reduce then). The last call has from = 0. */
typedef void (*eng_grads_ready)(void *ud, size_t from);
/* eng_model_backward of w times the mean loss: dL/dlogits is scaled by w before it goes
 * down, so every gradient comes out multiplied by w (data-parallel ranks weight their
 * share of the global batch this way, for free); ready may be NULL. */
void eng_model_backward_weighted(eng_model *m, float w, eng_grads_ready ready, void *ud);
/* The calls ready would get from a backward, without one (a rank with no rows: its
 * collectives must match the other ranks'). */
void eng_model_grads_ready(eng_model *m, eng_grads_ready ready, void *ud);

/* The optimizer's state, for checkpoints: m and v (NULL when the kind has none, n_params
 * floats each) and the step count t, all writable. */
void eng_optim_state(eng_optim *o, float **m, float **v, long **t);

/* ---- checkpoints (checkpoint.c) ---------------------------------------------------- */

/* The training loop's own state between steps: what a resumed run needs, besides the
 * parameters, optimizer and batch order, to log exactly what an uninterrupted run logs. */
typedef struct {
    long step;                  /* steps done */
    int epoch;                  /* epochs done */
    double wall, hybrid_extra;  /* wall clock so far; Q-Newton clock excess */
    double train_time, epoch_train_time;
    long total_rows, epoch_rows;
    double int_loss, int_rows, int_correct, last_lr;
    double final_train_loss, best_train_loss, final_test_loss, final_test_acc, best_test_acc;
    long steps_to_target;
    double wall_to_target, hybrid_to_target;
    /* the steps' pool figures so far (eng_run_result.pool), kept by records of format 3 on */
    long pool_steps, pool_joins;
    double pool_step_s, pool_wait_s;
} eng_loop_state;

/* What a checkpoint holds and where reading puts it. Writing reads every pointer; reading
 * checks the identity fields against the ones given and fills the arrays and loop. */
typedef struct {
    uint64_t seed;
    long total_steps;
    uint64_t n_params;
    int n_train, batch, optimizer;
    float *params;              /* n_params */
    float *m, *v;               /* n_params each, or NULL (the optimizer has none) */
    long *opt_t;                /* optimizer step count, or NULL */
    eng_loop_state loop;
    uint64_t n_stats;           /* batchnorm running statistics (0 and NULL: none) */
    float *stats;
} eng_ckpt;

/* Bytes of the record for c's shape. */
size_t eng_ckpt_size(const eng_ckpt *c);
/* Writes the record into buf (cap >= eng_ckpt_size); returns the bytes written. */
size_t eng_ckpt_write(const eng_ckpt *c, void *buf, size_t cap);
/* The checksum a record of format version writes at offset 24, over its bytes from 32 on:
 * FNV-1a 64 for version 1, XXH64 (seed 0) from version 2. */
uint64_t eng_ckpt_checksum(unsigned version, const void *p, size_t n);
/* Checks magic, version, length and checksum, then that the record belongs to a run of
 * c's shape (seed, parameters, optimizer, training set, batch), and fills c's arrays
 * and loop. ENG_EFORMAT / ENG_EINVAL with what differs. With params_only, only the
 * parameters are read (c->m, c->v, c->opt_t are ignored; optimizer and batch unchecked). */
int eng_ckpt_read(eng_ckpt *c, const void *buf, size_t len, int params_only);

/* ---- gradient transforms and telemetry (gradient.c) -------------------------------- */

/* The kernels, on one tensor each (exposed for the tests and the bench):
 *   znorm:       g = (g - mean(g)) / (std(g) + eps), std over the n elements (population);
 *                two passes; n < 2 leaves g unchanged (a z-score of one number is undefined)
 *   centralize:  g[r,c] -= mean over the fan-in. by_col = 1 for a dense W [in x out] (the fan-in
 *                of output c is column c), 0 for a conv W [F x C*K*K] (row r); colsum holds
 *                cols floats of scratch (by_col only)
 *   sumsq:       sum of g_i^2 (double), scale: g *= s, clamp: g = min(max(g, -lim), lim) */
void eng_grad_znorm(float *g, size_t n, float eps);
void eng_grad_centralize(float *g, size_t rows, size_t cols, int by_col, float *colsum);
double eng_grad_sumsq(const float *g, size_t n);
void eng_grad_scale(float *g, size_t n, float s);
void eng_grad_clamp(float *g, size_t n, float lim);
/* Mean, variance (population), sum of squares and max |g| of n floats in one vectorised
 * pass; any output may be NULL. */
void eng_grad_stats(const float *g, size_t n, double *mean, double *var, double *sumsq, double *maxabs);

/* Telemetry of a model (keys in engine.h, eng_telemetry). On a log step: eng_telem_before
 * after backward and before any transform (gradient statistics, zero fractions, a copy of
 * the parameters), eng_telem_after after the optimizer step (update ratios). Buffers are
 * allocated at create; the two calls allocate nothing. Free with eng_telem_free. */
typedef struct eng_telem eng_telem;
int eng_telem_create(eng_model *m, prof_t *prof, eng_telem **out);
void eng_telem_before(eng_telem *t);
void eng_telem_after(eng_telem *t);
/* Fills the record's n, keys and values (valid until the next eng_telem_before). */
void eng_telem_record(const eng_telem *t, eng_telemetry *rec);
void eng_telem_free(eng_telem *t);

/* What the transforms and telemetry see of a model, dense or graph: per layer its weight
 * and bias tensors (in params / grads), W's shape for centralize, and its activation
 * output of the last forward (rows: *a_rows, width a_width; a NULL: no activation). */
typedef struct {
    char name[24];
    float *w, *dw, *b, *db;
    size_t n_w, n_b, w_off, b_off;
    size_t w_rows, w_cols;      /* W [rows x cols] */
    int by_col;                 /* centralize's fan-in: 1 = a column (dense W [in x out]), 0 = a row */
    int one_block;              /* W is several tensors in one block (sequence layers): no centralize */
    int no_centre;              /* batch norm's gamma, one weight per channel: no fan-in to centre */
    const float *a;
    size_t a_width;
    const int *a_rows;
} eng_param_layer;
typedef struct {
    int n_layers;
    eng_param_layer layers[ENG_MAX_LAYERS];
    float *params, *grads;
    size_t n_params;
} eng_param_view;
/* The view of a dense model (gradient.c). */
void eng_model_param_view(eng_model *m, eng_param_view *v);
/* As eng_grad_create and eng_telem_create, over any model's view (copied). */
int eng_grad_create_view(const eng_train_config *tc, const eng_param_view *v, prof_t *prof, eng_grad **out);
int eng_telem_create_view(const eng_param_view *v, prof_t *prof, eng_telem **out);

/* Seed stream of the parameter initialisation; layer i uses stream ENG_STREAM_INIT + i, so
 * adding a layer at the end leaves the earlier layers' weights unchanged. */
#define ENG_STREAM_INIT 0x494e4954ull

#endif
