/* ops.c — every op of the engine (forward, backward, FLOP and byte counts) and the one op
 * table that model.c dispatches through. Shapes are per row; B below is the rows of a call.
 *
 * Software counters (what the profiler gets for one call; 4 bytes per float or int32):
 * FLOPs count the arithmetic of each op's formula, one per add/mul/compare/divide and one
 * per exp/tanh/log. The tanh, sigmoid and GELU kernels below spend ~30-40 float operations
 * on what counts as one, so that FLOP figures stay comparable across implementations.
 * Bytes count every tensor an op reads or writes once, including the workspaces the
 * implementation materialises (im2col), so bytes/FLOP is the intensity of
 * this implementation rather than of an ideal one.
 *
 *  op            dir  FLOPs                              bytes / 4
 *  dense         fwd  2·B·in·out                         B·in + in·out + B·out
 *                bwd  2·B·in·out  (+2·B·in·out for dx)   B·in + B·out + in·out  (+ B·out + in·out + B·in for dx)
 *  bias          fwd  B·n                                2·B·n + nb
 *                bwd  B·n                                B·n + nb        (dx == dy: no copy)
 *  relu          fwd  B·n                                2·B·n
 *                bwd  B·n                                3·B·n
 *  tanh          fwd  B·n                                2·B·n
 *                bwd  3·B·n                              3·B·n
 *  sigmoid       fwd  3·B·n                              2·B·n
 *                bwd  3·B·n                              3·B·n
 *  gelu          fwd  9·B·n                              2·B·n
 *                bwd  18·B·n                             3·B·n
 *  softmax_xent  fwd  B·(5K+4)  labels | B·(9K+2) targets    2·B·K + B | 3·B·K
 *                bwd  B·(K+1)   labels | B·2K     targets    2·B·K + B | 3·B·K
 *  mse           fwd  3·B·T                              B·T + B (labels) | 2·B·T
 *                bwd  2·B·T                              2·B·T + B (labels) | 3·B·T
 *  conv2d        fwd  2·B·F·CKK·P                        B·CHW + 2·B·CKK·P + F·CKK + B·F·P
 *                bwd  2·B·F·CKK·P                        B·F·P + B·CKK·P + F·CKK
 *                                                        (+ B·CHW + B·CKK·P when im2col is rebuilt)
 *                     (+2·B·F·CKK·P + B·CKK·P for dx)    (+ F·CKK + B·F·P + B·CKK·P + B·CHW + 2·B·CKK·P for dx)
 *                (im2col above; the direct algorithm's bytes are in engine/conv.c, direct_bytes,
 *                 and its dx counts 2·B·F·CKK·P FLOPs: no col2im sums)
 *  maxpool       fwd  3·B·O                              6·B·O
 *                bwd  0                                  B·in + 3·B·O
 *  avgpool       fwd  B·O·K²                             B·in + B·O
 *                bwd  B·O·(K²+1)                         2·B·in + B·O     (zero dx, then add)
 *  gap           fwd  B·C·H·W                            B·(C·H·W + C)
 *                bwd  B·C                                B·(C·H·W + C)
 *  flatten       both 0                                  0
 *  maxk, cbsr_dense                                      see sparse.c
 *  aggregate                                             see gnn.c
 *  embed, posenc, layernorm, attn_*, linformer_proj, resadd, ffn, meanpool   see attention.c
 * with n = elements per row, nb = bias length, K = classes, T = targets per row,
 * conv: C,H,W input, F filters, KxK kernel, P = OH·OW output positions with
 * OH = (H + 2·pad - K)/stride + 1 (OW alike), CKK = C·K·K, CHW = C·H·W;
 * pool: O = outputs per row (maxpool C·(H/2)·(W/2); avgpool C·OH·OW with OH = (H-K)/S + 1),
 * in = C·H·W. The pooling ops' backward counts 0 when they are the first layer (no dx).
 */
/* The elementwise loops are memory-bound; GCC vectorizes only at -O3 by default (clang at
 * -O2). Vectorizing never reassociates float sums without -ffast-math, so results are the
 * same bits either way. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif

#include "internal.h"
#include "lanes.h"

#include <math.h>
#include <string.h>

#define U64(x) ((uint64_t)(x))

/* ---- dense: y[B,out] = x[B,in] · W[in,out] -------------------------------------------- */

/* The bias and activation nodes fused into a dense node's GEMMs (defined below). */
typedef struct {
    eng_rows_after after;
    const eng_node *dense;
    eng_node *const *n; /* fuse_fwd (bias, act) or fuse_bwd (act, bias) */
    int rows;
    eng_dir dir;
} fuse_job;
static eng_rows_after *fuse_begin(fuse_job *f, const eng_node *dense, eng_node *const *nodes, int rows, eng_dir dir);

static void dense_fwd(eng_node *n, int rows)
{
    int in = (int)n->in_size, out = (int)n->out_size;
    fuse_job f;
    eng_rows_after *after = fuse_begin(&f, n, n->fuse_fwd, rows, ENG_FWD);
    if (n->kwork) eng_sgemm_ksplit(rows, out, in, n->x, in, n->w, out, n->y, out, n->kwork, n->kwork_floats, after);
    else eng_sgemm_split_after(ENG_SPLIT_ROWS, 0, 0, rows, out, in, 1.0f, n->x, in, n->w, out, 0.0f, n->y, out, after);
}

/* dW[in,out] = x^T dy; dx[B,in] = dy W^T. Both cut by rows: dW's are W's rows, the ones
 * the forward's K cut and the update give the same thread (eng_model_plan_ksplit). */
static void dense_bwd(eng_node *n, int rows)
{
    int in = (int)n->in_size, out = (int)n->out_size;
    eng_sgemm_split(ENG_SPLIT_ROWS, 1, 0, in, out, rows, 1.0f, n->x, in, n->dy, out, 0.0f, n->dw, out);
    if (!n->dx) return;
    fuse_job f;
    eng_rows_after *after = fuse_begin(&f, n, n->fuse_bwd, rows, ENG_BWD);
    eng_sgemm_split_after(ENG_SPLIT_ROWS, 0, 1, rows, in, out, 1.0f, n->dy, out, n->w, out, 0.0f, n->dx, in, after);
}

static int dense_gemms(const eng_node *n, int rows, eng_gemm_shape *g)
{
    int in = (int)n->in_size, out = (int)n->out_size;
    g[0] = (eng_gemm_shape){ 0, 0, rows, out, in, 1 };
    g[1] = (eng_gemm_shape){ 1, 0, in, out, rows, 1 };
    g[2] = (eng_gemm_shape){ 0, 1, rows, in, out, 1 };
    return n->dx ? 3 : 2;
}

static uint64_t dense_flops(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t f = 2 * U64(rows) * n->in_size * n->out_size;
    return dir == ENG_FWD ? f : (n->dx ? 2 * f : f);
}

static uint64_t dense_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t xin = U64(rows) * n->in_size, yout = U64(rows) * n->out_size;
    uint64_t w = U64(n->in_size) * n->out_size;
    uint64_t e = xin + w + yout;
    if (dir == ENG_BWD && n->dx) e *= 2;
    return 4 * e;
}

/* ---- bias: y[B, nb, s] += b[nb], in place (dense: s = 1; conv: s = H*W) ------------- */

/* Rows [lo, hi) of y += b. The bias, relu and their backward loops run over activations
 * in L1 and L2, which narrow vectors cannot keep busy: each is compiled per ISA path
 * (ENG_ISA_KERNEL, internal.h; element-wise, so the same bits on each). */
ENG_ISA_BODY bias_fwd_k_body(const eng_node *n, size_t lo, size_t hi)
{
    size_t nb = n->n_b, s = n->out_size / nb;
    const float *restrict b = n->b;
    for (size_t r = lo; r < hi; r++) {
        float *restrict y = n->y + r * n->out_size;
        if (s == 1)
            for (size_t c = 0; c < nb; c++) y[c] += b[c];
        else
            for (size_t c = 0; c < nb; c++) lanes_add_scalar(y + c * s, s, b[c]);
    }
}
ENG_ISA_KERNEL(bias_fwd_k, (const eng_node *n, size_t lo, size_t hi), (n, lo, hi))
static void bias_fwd_rows(void *ctx, size_t lo, size_t hi) { bias_fwd_k_isa[eng_isa_current()](ctx, lo, hi); }

/* The grain eng_pool_for gets for a loop of n items of `per` floats each (elems in all): a
 * loop under ENG_EW_SPLIT_MIN floats runs on the calling thread (one range), a larger one
 * splits into slabs of ENG_POOL_GRAIN floats or more. */
static size_t ew_grain(size_t elems, size_t n, size_t per)
{
    if (elems < ENG_EW_SPLIT_MIN) return n;
    return per ? (ENG_POOL_GRAIN + per - 1) / per : 1;
}

/* Rows of a node's output (rows x out_size), split as ew_grain says. */
static size_t rows_grain(const eng_node *n, int rows)
{
    return ew_grain((size_t)rows * n->out_size, (size_t)rows, n->out_size);
}

static void bias_fwd(eng_node *n, int rows) { eng_pool_for((size_t)rows, rows_grain(n, rows), bias_fwd_rows, n); }

typedef struct {
    const eng_node *n;
    int rows;
} bias_job;

/* db[c] for c in [lo, hi): each column sums its rows in row order, however the columns are
 * split, so the bits do not depend on the thread count. */
ENG_ISA_BODY bias_bwd_k_body(const bias_job *j, size_t lo, size_t hi)
{
    const eng_node *n = j->n;
    size_t nb = n->n_b, s = n->out_size / nb;
    float *restrict db = n->db;
    memset(db + lo, 0, (hi - lo) * sizeof(float));
    for (int r = 0; r < j->rows; r++) {
        const float *restrict dy = n->dy + (size_t)r * n->out_size;
        if (s == 1)
            for (size_t c = lo; c < hi; c++) db[c] += dy[c];
        else
            for (size_t c = lo; c < hi; c++) db[c] += lanes_sum(dy + c * s, s);
    }
}
ENG_ISA_KERNEL(bias_bwd_k, (const bias_job *j, size_t lo, size_t hi), (j, lo, hi))
static void bias_bwd_cols(void *ctx, size_t lo, size_t hi) { bias_bwd_k_isa[eng_isa_current()](ctx, lo, hi); }

/* db[c] = sum over rows and positions of dy; dx is dy itself (same buffer). */
static void bias_bwd(eng_node *n, int rows)
{
    bias_job j = { n, rows };
    size_t per_col = (size_t)rows * (n->out_size / n->n_b);
    eng_pool_for(n->n_b, ew_grain((size_t)rows * n->out_size, n->n_b, per_col), bias_bwd_cols, &j);
}

static uint64_t bias_flops(const eng_node *n, int rows, eng_dir dir) { (void)dir; return U64(rows) * n->out_size; }
static uint64_t bias_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = U64(rows) * n->out_size;
    return 4 * ((dir == ENG_FWD ? 2 * e : e) + n->n_b);
}

/* ---- activations: y = f(x) elementwise ------------------------------------------------
 * tanh, sigmoid and GELU are computed by the branch-free float kernels below instead of
 * libm: a libm call per element kept the loops scalar (tanhf cost 13-28 ns per element
 * here, 75% of the spirals tanh MLP's self time). Everything is +,*,/, compares and integer
 * bit operations, so GCC vectorizes each loop; no FMA is used, so the vector and scalar
 * paths give the same bits and nothing depends on the thread count. Accuracy against
 * double-precision libm is asserted by tests/engine/ops.c (test_act_accuracy) and listed
 * in docs/engine.md ("Activation kernels"). NaN in gives NaN out: a NaN fails every compare, so the clamp
 * and the selects pass it on, and each candidate computed from it is NaN. */

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K 0.044715f

/* f2u, u2f, select_f and exp_nonpos live in internal.h (attention.c's softmax uses them too). */

/* sigmoid(z) in *s and 1 - sigmoid(z) = sigmoid(-z) in *c, both to full relative precision:
 * from e = exp(-|z|) <= 1, so nothing overflows and no difference of near-equal values. */
static inline void sigmoid_pair(float z, float *s, float *c)
{
    float e = exp_nonpos(-fabsf(z));
    float big = 1.0f / (1.0f + e), small = e * big;
    int pos = z >= 0.0f;
    *s = select_f(pos, big, small);
    *c = select_f(pos, small, big);
}

static inline float sigmoid_fast(float z)
{
    float s, c;
    sigmoid_pair(z, &s, &c);
    return s;
}

/* tanh|x| = (1 - e) / (1 + e), e = exp(-2|x|), loses nothing to cancellation for |x| >=
 * 0.55 (e <= 1/3); below, |x| + |x|^3 P(x^2) (Chebyshev fit in x^2 on [0, 0.55^2], error
 * 4e-9 relative). Both are computed and one is selected: a branch would stop vectorizing.
 * The sign is copied back as a bit, so tanh(-0) = -0 and tanh(+-inf) = +-1. */
#define TANH_SPLIT 0.55f
static inline float tanh_fast(float x)
{
    float a = fabsf(x);
    float e = exp_nonpos(-2.0f * a);
    float far = (1.0f - e) / (1.0f + e);
    float s = a * a;
    float p = -6.610227831114734e-3f;
    p = p * s + 2.1309388664443474e-2f;
    p = p * s + -5.390942882746055e-2f;
    p = p * s + 1.333311372902087e-1f;
    p = p * s + -3.333333200797698e-1f;
    float near = a + a * (s * p);
    float t = select_f(a < TANH_SPLIT, near, far);
    return u2f(f2u(t) | (f2u(x) & 0x80000000u));
}

/* GELU, tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), evaluated as
 * x sigmoid(2u) (the same function: 1 + tanh(u) = 2 sigmoid(2u)), which keeps full
 * relative precision for negative x where 1 + tanh(u) would cancel. */
static inline float gelu_2u(float x) { return (2.0f * GELU_C) * x * (1.0f + GELU_K * x * x); }

/* The kernels are ~30 float ops per element, so unlike the memory-bound loops they gain
 * from wider vectors: they are compiled for the baseline and for AVX2 (ENG_ISA_KERNEL_AVX2,
 * internal.h), and the path isa.c chose (NNBENCH_ISA, or the CPU's widest) runs. AVX2
 * alone brings no FMA, so both give the same bits; AVX-512 machines run the AVX2 code. */

/* ---- splitting the elementwise loops over the pool ---------------------------------
 * un(e, a, out) or bin(e, a, b, out) over [lo, hi) of every operand: each element is
 * computed alone, so any split gives the same bits. */
typedef void (*ew_unary)(size_t e, const float *restrict a, float *restrict out);
typedef void (*ew_binary)(size_t e, const float *restrict a, const float *restrict b, float *restrict out);
typedef struct {
    ew_unary un;
    ew_binary bin;
    const float *a, *b;
    float *out;
} ew_job;

static void ew_range(void *ctx, size_t lo, size_t hi)
{
    const ew_job *j = ctx;
    if (j->un) j->un(hi - lo, j->a + lo, j->out + lo);
    else j->bin(hi - lo, j->a + lo, j->b + lo, j->out + lo);
}

static void ew_run(const eng_node *n, int rows, ew_unary un, ew_binary bin, const float *a, const float *b, float *out)
{
    ew_job j = { un, bin, a, b, out };
    size_t e = (size_t)rows * n->out_size;
    eng_pool_for(e, ew_grain(e, e, 1), ew_range, &j);
}

/* relu: y = v where gate > 0, else +0, as the bits of v masked, without a branch (the sign
 * pattern is random, and a mispredicted branch per element made relu ~20x slower than
 * memory allows) and without a multiply (which would turn -0 and NaN into other values);
 * a plain loop, which each ISA path vectorises at its width. */
ENG_ISA_BODY pass_if_positive_body(size_t e, const float *v, const float *gate, float *y)
{
    for (size_t i = 0; i < e; i++) {
        uint32_t u;
        memcpy(&u, v + i, sizeof u);
        u &= -(uint32_t)(gate[i] > 0.0f);
        memcpy(y + i, &u, sizeof u);
    }
}
ENG_ISA_KERNEL(pass_if_positive, (size_t e, const float *v, const float *gate, float *y), (e, v, gate, y))
static void relu_fwd_k(size_t e, const float *restrict x, float *restrict y)
{
    pass_if_positive_isa[eng_isa_current()](e, x, x, y);
}
static void relu_bwd_k(size_t e, const float *restrict x, const float *restrict dy, float *restrict dx)
{
    pass_if_positive_isa[eng_isa_current()](e, dy, x, dx);
}

ENG_ISA_BODY tanh_fwd_body(size_t e, const float *restrict x, float *restrict y)
{
    for (size_t i = 0; i < e; i++) y[i] = tanh_fast(x[i]);
}
ENG_ISA_KERNEL_AVX2(tanh_fwd, (size_t e, const float *restrict x, float *restrict y), (e, x, y))
static void tanh_bwd_k(size_t e, const float *restrict y, const float *restrict dy, float *restrict dx)
{
    for (size_t i = 0; i < e; i++) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

ENG_ISA_BODY sigmoid_fwd_body(size_t e, const float *restrict x, float *restrict y)
{
    for (size_t i = 0; i < e; i++) y[i] = sigmoid_fast(x[i]);
}
ENG_ISA_KERNEL_AVX2(sigmoid_fwd, (size_t e, const float *restrict x, float *restrict y), (e, x, y))
static void sigmoid_bwd_k(size_t e, const float *restrict y, const float *restrict dy, float *restrict dx)
{
    for (size_t i = 0; i < e; i++) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

ENG_ISA_BODY gelu_fwd_body(size_t e, const float *restrict xs, float *restrict y)
{
    for (size_t i = 0; i < e; i++) y[i] = xs[i] * sigmoid_fast(gelu_2u(xs[i]));
}
ENG_ISA_KERNEL_AVX2(gelu_fwd, (size_t e, const float *restrict xs, float *restrict y), (e, xs, y))
/* d/dx x s(2u) = s + 2 x s (1 - s) du/dx; with t = tanh(u) this is the textbook
 * 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx, since 1 + t = 2s and 1 - t^2 = 4 s (1 - s). */
static inline float gelu_d1(float x)
{
    float s, c;
    sigmoid_pair(gelu_2u(x), &s, &c);
    float du = GELU_C * (1.0f + 3.0f * GELU_K * x * x);
    return s + 2.0f * x * (s * c) * du;
}
ENG_ISA_BODY gelu_bwd_body(size_t e, const float *restrict x, const float *restrict dy, float *restrict dx)
{
    for (size_t i = 0; i < e; i++) dx[i] = dy[i] * gelu_d1(x[i]);
}
ENG_ISA_KERNEL_AVX2(gelu_bwd, (size_t e, const float *restrict x, const float *restrict dy, float *restrict dx),
                    (e, x, dy, dx))

/* An activation's kernels: the forward y = f(x), and the backward dx = dy · f' computed
 * from its gate, the output (relu, gated on it: a relu in place, model.c, has written it
 * over its input; tanh and sigmoid) or the input (gelu). */
typedef struct {
    ew_unary fwd;
    ew_binary bwd;
    const float *gate;
} act_kernels;

static act_kernels act_of(eng_op_id op, const eng_node *n)
{
    int p = eng_isa_current();
    switch (op) {
    case ENG_OP_TANH: return (act_kernels){ tanh_fwd_isa[p], tanh_bwd_k, n->y };
    case ENG_OP_SIGMOID: return (act_kernels){ sigmoid_fwd_isa[p], sigmoid_bwd_k, n->y };
    case ENG_OP_GELU: return (act_kernels){ gelu_fwd_isa[p], gelu_bwd_isa[p], n->x };
    default: return (act_kernels){ relu_fwd_k, relu_bwd_k, n->y };
    }
}

static void act_run(eng_op_id op, eng_dir dir, eng_node *n, int rows)
{
    act_kernels k = act_of(op, n);
    if (dir == ENG_FWD) ew_run(n, rows, k.fwd, NULL, n->x, NULL, n->y);
    else ew_run(n, rows, NULL, k.bwd, k.gate, n->dy, n->dx);
}
/* The op table's entries (the op named, as a node's op field may not be set) */
#define ACT_ENTRIES(name, OP)                                                                \
    static void name##_fwd(eng_node *n, int rows) { act_run(OP, ENG_FWD, n, rows); }       \
    static void name##_bwd(eng_node *n, int rows) { act_run(OP, ENG_BWD, n, rows); }
ACT_ENTRIES(relu, ENG_OP_RELU)
ACT_ENTRIES(tanh, ENG_OP_TANH)
ACT_ENTRIES(sigmoid, ENG_OP_SIGMOID)
ACT_ENTRIES(gelu, ENG_OP_GELU)

/* Elements [lo, hi) of an activation node, one direction. */
static void act_span(const eng_node *n, eng_dir dir, size_t lo, size_t hi)
{
    act_kernels k = act_of(n->op, n);
    if (dir == ENG_FWD) k.fwd(hi - lo, n->x + lo, n->y + lo);
    else k.bwd(hi - lo, k.gate + lo, n->dy + lo, n->dx + lo);
}

/* ---- bias and activation fused into a dense layer's GEMMs --------------------------------
 * A dense node's forward runs the bias and activation after it (fuse_fwd) on each slab's
 * rows of y, right after the slab's GEMM wrote them, in the same pool job on the same
 * thread; its backward runs the activation and bias before it (fuse_bwd) on each slab's
 * rows of dx. Each a pool job of its own, they cost a hand-over each and, at two threads
 * on cores apart, read rows the other core had just written. The element values are those
 * of the nodes run alone (the same kernels); a fused bias's backward sums its columns per
 * block of ENG_SPLIT_UNIT rows (each slab covers whole blocks), and the last slab to finish
 * adds the blocks in block order: the same bits at any thread count, not those of the
 * bias run alone (all rows in one sum). Slab 0 runs on the training thread (pool.c), so
 * the fused nodes are timed there, inside the dense node's scope. */
/* out[c] = the sum of rows [0, rows) of column c of a (row stride ld), in row order. */
ENG_ISA_BODY col_sums_body(const float *a, size_t ld, size_t rows, size_t nb, float *out)
{
    float *restrict o = out;
    memset(o, 0, nb * sizeof(float));
    for (size_t r = 0; r < rows; r++) {
        const float *restrict row = a + r * ld;
        for (size_t c = 0; c < nb; c++) o[c] += row[c];
    }
}
ENG_ISA_KERNEL(col_sums, (const float *a, size_t ld, size_t rows, size_t nb, float *out), (a, ld, rows, nb, out))

static void bias_blocks(const eng_node *n, size_t r0, size_t r1)
{
    for (size_t b0 = r0; b0 < r1; b0 += ENG_SPLIT_UNIT) {
        size_t b1 = r1 - b0 < ENG_SPLIT_UNIT ? r1 : b0 + ENG_SPLIT_UNIT;
        col_sums_isa[eng_isa_current()](n->dy + b0 * n->out_size, n->out_size, b1 - b0, n->n_b,
                                        n->bpart + b0 / ENG_SPLIT_UNIT * n->n_b);
    }
}

static void fuse_rows(void *ctx, int s, size_t r0, size_t r1)
{
    const fuse_job *f = ctx;
    prof_t *prof = s == 0 ? f->dense->prof : NULL;
    for (int i = 0; i < 2; i++) {
        eng_node *n = f->n[i];
        if (!n) continue;
        int id = f->dir == ENG_FWD ? n->prof_fwd : n->prof_bwd;
        PROF_BEGIN(prof, id);
        if (n->op != ENG_OP_BIAS) act_span(n, f->dir, r0 * n->out_size, r1 * n->out_size);
        else if (f->dir == ENG_FWD) bias_fwd_k_isa[eng_isa_current()](n, r0, r1);
        else bias_blocks(n, r0, r1);
        PROF_END(prof, id, eng_ops[n->op].flops(n, f->rows, f->dir), eng_ops[n->op].bytes(n, f->rows, f->dir));
    }
}

/* After every slab: a fused bias's db, its blocks added in order. */
static void fuse_last(void *ctx)
{
    const fuse_job *f = ctx;
    const eng_node *b = f->n[1];
    size_t blocks = ((size_t)f->rows + ENG_SPLIT_UNIT - 1) / ENG_SPLIT_UNIT;
    col_sums_isa[eng_isa_current()](b->bpart, b->n_b, blocks, b->n_b, b->db);
}

static eng_rows_after *fuse_begin(fuse_job *f, const eng_node *dense, eng_node *const *nodes, int rows, eng_dir dir)
{
    if (!nodes[0] && !nodes[1]) return NULL;
    *f = (fuse_job){ .dense = dense, .n = nodes, .rows = rows, .dir = dir };
    f->after.rows = fuse_rows;
    f->after.last = dir == ENG_BWD && nodes[1] && nodes[1]->op == ENG_OP_BIAS ? fuse_last : NULL;
    f->after.ctx = f;
    atomic_init(&f->after.done, 0);
    return &f->after;
}

static uint64_t act_bytes(const eng_node *n, int rows, eng_dir dir)
{
    return 4 * U64(rows) * n->out_size * (dir == ENG_FWD ? 2 : 3);
}
static uint64_t relu_flops(const eng_node *n, int rows, eng_dir dir) { (void)dir; return U64(rows) * n->out_size; }
static uint64_t tanh_flops(const eng_node *n, int rows, eng_dir dir) { return U64(rows) * n->out_size * (dir == ENG_FWD ? 1 : 3); }
static uint64_t sigmoid_flops(const eng_node *n, int rows, eng_dir dir) { (void)dir; return 3 * U64(rows) * n->out_size; }
static uint64_t gelu_flops(const eng_node *n, int rows, eng_dir dir) { return U64(rows) * n->out_size * (dir == ENG_FWD ? 9 : 18); }

void eng_act_derivs(eng_act act, const float *z, const float *a, size_t n, float *d1, float *d2)
{
    for (size_t i = 0; i < n; i++) {
        float x = z[i], y = a[i], f1, f2;
        switch (act) {
        case ENG_ACT_RELU: f1 = x > 0.0f ? 1.0f : 0.0f; f2 = 0.0f; break;
        case ENG_ACT_TANH: f1 = 1.0f - y * y; f2 = -2.0f * y * f1; break;
        case ENG_ACT_SIGMOID: f1 = y * (1.0f - y); f2 = f1 * (1.0f - 2.0f * y); break;
        case ENG_ACT_GELU: {
            /* t = tanh(u) = s - c and 1 - t^2 = 4 s c, with s = sigmoid(2u), c = 1 - s:
             * the same kernel as the forward, so act' is the derivative of what ran */
            float x2 = x * x, s, c;
            sigmoid_pair(gelu_2u(x), &s, &c);
            float t = s - c, sech2 = 4.0f * s * c;
            float du = GELU_C * (1.0f + 3.0f * GELU_K * x2);
            float ddu = GELU_C * 6.0f * GELU_K * x;
            f1 = s + 0.5f * x * sech2 * du;
            /* d/dx of the above: t' = sech2 du, sech2' = -2 t sech2 du */
            f2 = sech2 * du + 0.5f * x * (-2.0f * t * sech2 * du * du + sech2 * ddu);
            break;
        }
        default: f1 = 1.0f; f2 = 0.0f; break;
        }
        if (d1) d1[i] = f1;
        if (d2) d2[i] = f2;
    }
}

int eng_act_op(eng_act act)
{
    switch (act) {
    case ENG_ACT_RELU: return ENG_OP_RELU;
    case ENG_ACT_TANH: return ENG_OP_TANH;
    case ENG_ACT_SIGMOID: return ENG_OP_SIGMOID;
    case ENG_ACT_GELU: return ENG_OP_GELU;
    case ENG_ACT_MAXK: return ENG_OP_MAXK;
    default: return -1;
    }
}

const char *eng_act_name(eng_act act)
{
    int op = eng_act_op(act);
    return op < 0 ? "" : eng_ops[op].name;
}

/* ---- softmax + cross-entropy (fused), mean over rows ----------------------------------
 * loss = (1/B) sum_r -sum_j t_rj log softmax(z_r)_j, with t_r = onehot(label_r) when labels
 * are given (soft targets otherwise). Stable: log softmax = z - max - log sum exp(z - max).
 * Forward keeps the probabilities (n->y) for backward: dz = (p - t) / B.
 * The exps of the whole batch run as one loop (exp_block): a row of 10 classes is too
 * short to vectorise, and libm's expf kept the loop scalar (5.5 us of a Fashion-MNIST
 * step at 1 thread, 2.7 us after). exp_nonpos is element-wise, so the bits are the same
 * on every ISA path. */

ENG_ISA_BODY exp_block_body(float *restrict p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = exp_nonpos(p[i]);
}
ENG_ISA_KERNEL(exp_block, (float *restrict p, size_t n), (p, n))

/* The largest of z[0..K) (the first, NaNs skipped after z[0]) and where it is. */
static inline float row_max(const float *z, size_t K, size_t *at)
{
    size_t am = 0;
    float m = z[0];
    for (size_t j = 1; j < K; j++)
        if (z[j] > m) { m = z[j]; am = j; }
    *at = am;
    return m;
}

static void xent_fwd(eng_node *n, int rows)
{
    size_t K = n->in_size, am;
    double total = 0.0;
    int correct = 0;
    /* p = z - max of its row (<= 0, or NaN: it passes through to the loss); the max is
     * found again below rather than kept, for want of a row-sized scratch */
    for (int r = 0; r < rows; r++) {
        const float *z = n->x + (size_t)r * K;
        float *p = n->y + (size_t)r * K, m = row_max(z, K, &am);
        for (size_t j = 0; j < K; j++) p[j] = z[j] - m;
    }
    exp_block_isa[eng_isa_current()](n->y, (size_t)rows * K);
    for (int r = 0; r < rows; r++) {
        const float *z = n->x + (size_t)r * K;
        float *p = n->y + (size_t)r * K, m = row_max(z, K, &am);
        float s = 0.0f;
        for (size_t j = 0; j < K; j++) s += p[j];
        float inv = 1.0f / s, ls = logf(s);
        for (size_t j = 0; j < K; j++) p[j] *= inv;
        if (n->labels) {
            int32_t l = n->labels[r];
            total += (double)(ls - z[l] + m);
            correct += (int32_t)am == l;
        } else {
            const float *t = n->targets + (size_t)r * K;
            float lr = 0.0f;
            for (size_t j = 0; j < K; j++) lr -= t[j] * (z[j] - m - ls);
            total += (double)lr;
        }
    }
    n->loss = total / rows;
    n->correct = correct;
}

static void xent_bwd(eng_node *n, int rows)
{
    size_t K = n->in_size;
    float invb = 1.0f / (float)rows;
    for (int r = 0; r < rows; r++) {
        const float *p = n->y + (size_t)r * K;
        float *d = n->dx + (size_t)r * K;
        if (n->labels) {
            for (size_t j = 0; j < K; j++) d[j] = p[j] * invb;
            d[n->labels[r]] -= invb;
        } else {
            const float *t = n->targets + (size_t)r * K;
            for (size_t j = 0; j < K; j++) d[j] = (p[j] - t[j]) * invb;
        }
    }
}

static uint64_t xent_flops(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t K = n->in_size;
    if (dir == ENG_FWD) return U64(rows) * (n->labels ? 5 * K + 4 : 9 * K + 2);
    return U64(rows) * (n->labels ? K + 1 : 2 * K);
}
static uint64_t xent_bytes(const eng_node *n, int rows, eng_dir dir)
{
    (void)dir;
    uint64_t e = U64(rows) * n->in_size;
    return 4 * (n->labels ? 2 * e + U64(rows) : 3 * e);
}

/* ---- mean squared error: loss = (1/(B*T)) sum_r sum_j (y_rj - t_rj)^2 -----------------
 * The mean runs over rows AND targets (as PyTorch's MSELoss), without a 1/2 factor, so
 * dy = 2 (y - t) / (B*T). With labels, t is the one-hot vector of the label. */

static inline float mse_target(const eng_node *n, int r, size_t j)
{
    if (n->labels) return (size_t)n->labels[r] == j ? 1.0f : 0.0f;
    return n->targets[(size_t)r * n->in_size + j];
}

static void mse_fwd(eng_node *n, int rows)
{
    size_t T = n->in_size;
    double total = 0.0;
    int correct = 0;
    for (int r = 0; r < rows; r++) {
        const float *y = n->x + (size_t)r * T;
        float acc = 0.0f;
        for (size_t j = 0; j < T; j++) {
            float d = y[j] - mse_target(n, r, j);
            acc += d * d;
        }
        total += (double)acc;
        if (n->labels) {
            size_t am = 0;
            for (size_t j = 1; j < T; j++)
                if (y[j] > y[am]) am = j;
            correct += (int32_t)am == n->labels[r];
        }
    }
    n->loss = total / ((double)rows * (double)T);
    n->correct = correct;
}

static void mse_bwd(eng_node *n, int rows)
{
    size_t T = n->in_size;
    float scale = 2.0f / ((float)rows * (float)T);
    for (int r = 0; r < rows; r++) {
        const float *y = n->x + (size_t)r * T;
        float *d = n->dx + (size_t)r * T;
        for (size_t j = 0; j < T; j++) d[j] = (y[j] - mse_target(n, r, j)) * scale;
    }
}

static uint64_t mse_flops(const eng_node *n, int rows, eng_dir dir)
{
    return U64(rows) * n->in_size * (dir == ENG_FWD ? 3 : 2);
}
static uint64_t mse_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t e = U64(rows) * n->in_size;
    uint64_t t = n->labels ? U64(rows) : e;
    return 4 * (e + t + (dir == ENG_BWD ? e : 0));
}

/* ---- 2x2 max-pool, stride 2 (odd trailing rows/columns are dropped) ------------------- */

/* Lanes of b where m is set, of a elsewhere (m: a compare's all-ones or zero lanes). */
static inline eng_v4 v4_pick(eng_v4i m, eng_v4 b, eng_v4 a)
{
    eng_v4i ai, bi;
    memcpy(&ai, &a, sizeof ai);
    memcpy(&bi, &b, sizeof bi);
    ai = (bi & m) | (ai & ~m);
    memcpy(&a, &ai, sizeof a);
    return a;
}

/* One output row of OW from input rows x0 and x1 (x0 at index i0 of the sample): the
 * largest of each window's four inputs and its index, ties to the first in the order
 * (0,0) (0,1) (1,0) (1,1) and a NaN first kept (each later "v > best" is false), as
 * sequential compares give them. Four outputs at a time from the even and odd lanes of two
 * 4-float loads of each row (every path: SSE2 or NEON), the rest one by one: the scalar loop
 * took more time than the Fashion CNN's first conv (rows of 12 and 4 outputs there). */
static void pool_row(const float *restrict x0, const float *restrict x1, int32_t i0, int W, int OW,
                     float *restrict y, int32_t *restrict am)
{
    int ow = 0;
    for (; ow + 4 <= OW; ow += 4) {
        eng_v4 t0 = v4_load(x0 + 2 * ow), t1 = v4_load(x0 + 2 * ow + 4);
        eng_v4 u0 = v4_load(x1 + 2 * ow), u1 = v4_load(x1 + 2 * ow + 4);
        eng_v4 bv = V4_SHUFFLE2(t0, t1, 0, 2, 4, 6), b = V4_SHUFFLE2(t0, t1, 1, 3, 5, 7);
        eng_v4 c = V4_SHUFFLE2(u0, u1, 0, 2, 4, 6), d = V4_SHUFFLE2(u0, u1, 1, 3, 5, 7);
        int32_t at = i0 + 2 * ow;
        eng_v4i idx = { at, at + 2, at + 4, at + 6 }, best = idx, m = b > bv;
        best = (m & (idx + 1)) | (~m & best);
        bv = v4_pick(m, b, bv);
        m = c > bv;
        best = (m & (idx + W)) | (~m & best);
        bv = v4_pick(m, c, bv);
        m = d > bv;
        best = (m & (idx + W + 1)) | (~m & best);
        v4_store(y + ow, v4_pick(m, d, bv));
        memcpy(am + ow, &best, sizeof best);
    }
    for (; ow < OW; ow++) {
        int32_t at = i0 + 2 * ow, cand[4] = { at, at + 1, at + W, at + W + 1 }, best = at;
        float bv = x0[2 * ow], v[4] = { bv, x0[2 * ow + 1], x1[2 * ow], x1[2 * ow + 1] };
        for (int k = 1; k < 4; k++) {
            int gt = v[k] > bv; /* selects instead of branches: which element wins is random */
            best = gt ? cand[k] : best;
            bv = gt ? v[k] : bv;
        }
        y[ow] = bv;
        am[ow] = best;
    }
}

static void pool_fwd(eng_node *n, int rows)
{
    int C = n->in_shape[0], H = n->in_shape[1], W = n->in_shape[2];
    int OH = n->out_shape[1], OW = n->out_shape[2];
    for (int r = 0; r < rows; r++) {
        const float *x = n->x + (size_t)r * n->in_size;
        float *y = n->y + (size_t)r * n->out_size;
        int32_t *am = n->argmax + (size_t)r * n->out_size;
        for (int c = 0; c < C; c++)
            for (int oh = 0; oh < OH; oh++) {
                int32_t i0 = (int32_t)((c * H + 2 * oh) * W);
                size_t o = ((size_t)c * OH + oh) * OW;
                pool_row(x + i0, x + i0 + W, i0, W, OW, y + o, am + o);
            }
    }
}

static void pool_bwd(eng_node *n, int rows)
{
    if (!n->dx) return; /* pool as the first layer: nothing below it needs a gradient */
    memset(n->dx, 0, (size_t)rows * n->in_size * sizeof(float));
    for (int r = 0; r < rows; r++) {
        float *dx = n->dx + (size_t)r * n->in_size;
        const float *dy = n->dy + (size_t)r * n->out_size;
        const int32_t *am = n->argmax + (size_t)r * n->out_size;
        /* windows do not overlap, so each input receives at most one gradient */
        for (size_t o = 0; o < n->out_size; o++) dx[am[o]] = dy[o];
    }
}

static uint64_t pool_flops(const eng_node *n, int rows, eng_dir dir)
{
    return dir == ENG_FWD ? 3 * U64(rows) * n->out_size : 0;
}
static uint64_t pool_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t o = U64(rows) * n->out_size;
    if (dir == ENG_BWD && !n->dx) return 0;
    return 4 * (dir == ENG_FWD ? 6 * o : U64(rows) * n->in_size + 3 * o);
}

/* ---- average pooling: KxK windows, stride S, no padding ---------------------------------
 * y = mean of each window (outputs past the last whole window are dropped); backward
 * spreads dy / K^2 over the window, adding where windows overlap (S < K). */

typedef struct { int C, H, W, OH, OW, K, S; } pool_dims;

static pool_dims avgpool_get(const eng_node *n)
{
    return (pool_dims){ n->in_shape[0], n->in_shape[1], n->in_shape[2], n->out_shape[1], n->out_shape[2],
                        n->kernel, n->stride > 0 ? n->stride : n->kernel };
}

/* The loops run window offset (i, j) outside and output column ow inside, so the inner
 * loop is a walk along one input row, on 4-float vectors for S = 1 and 2 (engine/lanes.h);
 * each output still adds its window in the order i, then j, as a per-window loop would. */
#define AVGPOOL_SPAN 256 /* output columns per pass (the accumulator row on the stack) */

/* acc[ow] += src[ow·S] for ow < m; avail = floats readable from src (the rest of the row).
 * S = 2 takes the even lanes of two 4-float loads, while both stay inside the row. */
static void avgpool_row_acc(float *restrict acc, const float *restrict src, int m, int S, size_t avail)
{
    int ow = 0;
    if (S == 1) {
        lanes_add(acc, src, acc, (size_t)m);
        return;
    }
    if (S == 2)
        for (; ow + 4 <= m && 2 * (size_t)ow + 8 <= avail; ow += 4) {
            eng_v4 even = V4_SHUFFLE2(v4_load(src + 2 * ow), v4_load(src + 2 * ow + 4), 0, 2, 4, 6);
            v4_store(acc + ow, v4_load(acc + ow) + even);
        }
    for (; ow < m; ow++) acc[ow] += src[(size_t)ow * S];
}

/* dst[ow·S] += g[ow] for ow < m (the adjoint of avgpool_row_acc). S = 2 adds g interleaved
 * with zeros to 8 floats at a time (the odd ones gain +0). */
static void avgpool_row_spread(float *restrict dst, const float *restrict g, int m, int S, size_t avail)
{
    int ow = 0;
    if (S == 1) {
        lanes_add(dst, g, dst, (size_t)m);
        return;
    }
    if (S == 2)
        for (; ow + 4 <= m && 2 * (size_t)ow + 8 <= avail; ow += 4) {
            eng_v4 gv = v4_load(g + ow), z = { 0 };
            v4_store(dst + 2 * ow, v4_load(dst + 2 * ow) + V4_SHUFFLE2(gv, z, 0, 4, 1, 4));
            v4_store(dst + 2 * ow + 4, v4_load(dst + 2 * ow + 4) + V4_SHUFFLE2(gv, z, 2, 4, 3, 4));
        }
    for (; ow < m; ow++) dst[(size_t)ow * S] += g[ow];
}

static void avgpool_fwd(eng_node *n, int rows)
{
    pool_dims d = avgpool_get(n);
    float inv = 1.0f / (float)(d.K * d.K);
    float acc[AVGPOOL_SPAN];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < d.C; c++) {
            const float *x = n->x + (size_t)r * n->in_size + (size_t)c * d.H * d.W;
            float *y = n->y + (size_t)r * n->out_size + (size_t)c * d.OH * d.OW;
            for (int oh = 0; oh < d.OH; oh++)
                for (int o0 = 0; o0 < d.OW; o0 += AVGPOOL_SPAN) {
                    int m = d.OW - o0 < AVGPOOL_SPAN ? d.OW - o0 : AVGPOOL_SPAN;
                    memset(acc, 0, (size_t)m * sizeof(float));
                    for (int i = 0; i < d.K; i++)
                        for (int j = 0; j < d.K; j++) {
                            size_t at = (size_t)o0 * d.S + j;
                            avgpool_row_acc(acc, x + (size_t)(oh * d.S + i) * d.W + at, m, d.S, (size_t)d.W - at);
                        }
                    for (int ow = 0; ow < m; ow++) y[oh * d.OW + o0 + ow] = acc[ow] * inv;
                }
        }
}

static void avgpool_bwd(eng_node *n, int rows)
{
    if (!n->dx) return; /* the first layer: nothing below it needs a gradient */
    pool_dims d = avgpool_get(n);
    float inv = 1.0f / (float)(d.K * d.K);
    float g[AVGPOOL_SPAN];
    memset(n->dx, 0, (size_t)rows * n->in_size * sizeof(float));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < d.C; c++) {
            float *dx = n->dx + (size_t)r * n->in_size + (size_t)c * d.H * d.W;
            const float *dy = n->dy + (size_t)r * n->out_size + (size_t)c * d.OH * d.OW;
            for (int oh = 0; oh < d.OH; oh++)
                for (int o0 = 0; o0 < d.OW; o0 += AVGPOOL_SPAN) {
                    int m = d.OW - o0 < AVGPOOL_SPAN ? d.OW - o0 : AVGPOOL_SPAN;
                    for (int ow = 0; ow < m; ow++) g[ow] = dy[oh * d.OW + o0 + ow] * inv;
                    for (int i = 0; i < d.K; i++)
                        for (int j = 0; j < d.K; j++) {
                            /* windows overlap when S < K: an input then takes several g's;
                             * within one (i, j) pass the ow's touch distinct inputs */
                            size_t at = (size_t)o0 * d.S + j;
                            avgpool_row_spread(dx + (size_t)(oh * d.S + i) * d.W + at, g, m, d.S, (size_t)d.W - at);
                        }
                }
        }
}

static uint64_t avgpool_flops(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t kk = U64(n->kernel) * n->kernel, o = U64(rows) * n->out_size;
    if (dir == ENG_BWD && !n->dx) return 0;
    return dir == ENG_FWD ? o * kk : o * (kk + 1);
}

static uint64_t avgpool_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t in = U64(rows) * n->in_size, o = U64(rows) * n->out_size;
    if (dir == ENG_BWD && !n->dx) return 0;
    return 4 * (dir == ENG_FWD ? in + o : 2 * in + o);
}

/* ---- global average pooling: y[c] = mean of channel c over H x W ----------------------- */

static void gap_fwd(eng_node *n, int rows)
{
    size_t C = (size_t)n->in_shape[0], HW = n->in_size / C;
    float inv = 1.0f / (float)HW;
    for (int r = 0; r < rows; r++)
        for (size_t c = 0; c < C; c++) n->y[(size_t)r * C + c] = lanes_sum(n->x + (size_t)r * n->in_size + c * HW, HW) * inv;
}

static void gap_bwd(eng_node *n, int rows)
{
    if (!n->dx) return;
    size_t C = (size_t)n->in_shape[0], HW = n->in_size / C;
    float inv = 1.0f / (float)HW;
    for (int r = 0; r < rows; r++)
        for (size_t c = 0; c < C; c++) lanes_fill(n->dx + (size_t)r * n->in_size + c * HW, HW, n->dy[(size_t)r * C + c] * inv);
}

static uint64_t gap_flops(const eng_node *n, int rows, eng_dir dir)
{
    if (dir == ENG_BWD && !n->dx) return 0;
    return dir == ENG_FWD ? U64(rows) * n->in_size : U64(rows) * n->out_size;
}

static uint64_t gap_bytes(const eng_node *n, int rows, eng_dir dir)
{
    if (dir == ENG_BWD && !n->dx) return 0;
    return 4 * U64(rows) * (n->in_size + n->out_size);
}

/* ---- flatten: a view; y and x are the same buffer ------------------------------------- */

static void flat_run(eng_node *n, int rows) { (void)n; (void)rows; }
static uint64_t zero_count(const eng_node *n, int rows, eng_dir dir) { (void)n; (void)rows; (void)dir; return 0; }

/* ---- the op table (indexed by eng_op_id) ---------------------------------------------- */

const eng_op eng_ops[ENG_OP_COUNT] = {
    [ENG_OP_DENSE] = { "dense", dense_fwd, dense_bwd, dense_flops, dense_bytes, dense_gemms },
    [ENG_OP_BIAS] = { "bias", bias_fwd, bias_bwd, bias_flops, bias_bytes, NULL },
    [ENG_OP_RELU] = { "relu", relu_fwd, relu_bwd, relu_flops, act_bytes, NULL },
    [ENG_OP_TANH] = { "tanh", tanh_fwd, tanh_bwd, tanh_flops, act_bytes, NULL },
    [ENG_OP_SIGMOID] = { "sigmoid", sigmoid_fwd, sigmoid_bwd, sigmoid_flops, act_bytes, NULL },
    [ENG_OP_GELU] = { "gelu", gelu_fwd, gelu_bwd, gelu_flops, act_bytes, NULL },
    [ENG_OP_SOFTMAX_XENT] = { "softmax_xent", xent_fwd, xent_bwd, xent_flops, xent_bytes, NULL },
    [ENG_OP_MSE] = { "mse", mse_fwd, mse_bwd, mse_flops, mse_bytes, NULL },
    [ENG_OP_CONV2D] = { "conv2d", eng_conv_fwd, eng_conv_bwd, eng_conv_flops, eng_conv_bytes, eng_conv_gemms },
    [ENG_OP_MAXPOOL] = { "maxpool", pool_fwd, pool_bwd, pool_flops, pool_bytes, NULL },
    [ENG_OP_FLATTEN] = { "flatten", flat_run, flat_run, zero_count, zero_count, NULL },
    [ENG_OP_MAXK] = { "maxk", eng_maxk_fwd, eng_maxk_bwd, eng_maxk_flops, eng_maxk_bytes, NULL },
    [ENG_OP_CBSR_DENSE] = { "cbsr_dense", eng_cbsr_dense_fwd, eng_cbsr_dense_bwd, eng_cbsr_dense_flops,
                            eng_cbsr_dense_bytes, NULL },
    [ENG_OP_AGGREGATE] = { "aggregate", eng_aggregate_fwd, eng_aggregate_bwd, eng_aggregate_flops,
                           eng_aggregate_bytes, NULL },
    [ENG_OP_AVGPOOL] = { "avgpool", avgpool_fwd, avgpool_bwd, avgpool_flops, avgpool_bytes, NULL },
    [ENG_OP_GAP] = { "gap", gap_fwd, gap_bwd, gap_flops, gap_bytes, NULL },
    /* sequence ops: attention.c */
    [ENG_OP_EMBED] = { "embed", eng_seqlin_fwd, eng_seqlin_bwd, eng_seqlin_flops, eng_seqlin_bytes, eng_seqlin_gemms },
    [ENG_OP_POSENC] = { "posenc", eng_posenc_fwd, eng_posenc_bwd, eng_posenc_flops, eng_posenc_bytes, NULL },
    [ENG_OP_LAYERNORM] = { "layernorm", eng_layernorm_fwd, eng_layernorm_bwd, eng_layernorm_flops, eng_layernorm_bytes, NULL },
    [ENG_OP_ATTN_QKV] = { "attn_qkv", eng_seqlin_fwd, eng_seqlin_bwd, eng_seqlin_flops, eng_seqlin_bytes, eng_seqlin_gemms },
    [ENG_OP_ATTN_SCORES] = { "attn_scores", eng_attn_scores_fwd, eng_attn_scores_bwd, eng_attn_scores_flops, eng_attn_scores_bytes, eng_attn_scores_gemms },
    [ENG_OP_ATTN_SOFTMAX] = { "attn_softmax", eng_attn_softmax_fwd, eng_attn_softmax_bwd, eng_attn_softmax_flops, eng_attn_softmax_bytes, NULL },
    [ENG_OP_ATTN_WSUM] = { "attn_wsum", eng_attn_wsum_fwd, eng_attn_wsum_bwd, eng_attn_wsum_flops, eng_attn_wsum_bytes, eng_attn_wsum_gemms },
    [ENG_OP_ATTN_OUT] = { "attn_out", eng_seqlin_fwd, eng_seqlin_bwd, eng_seqlin_flops, eng_seqlin_bytes, eng_seqlin_gemms },
    [ENG_OP_LINFORMER_PROJ] = { "linformer_proj", eng_linformer_fwd, eng_linformer_bwd, eng_linformer_flops, eng_linformer_bytes, eng_linformer_gemms },
    [ENG_OP_RESADD] = { "resadd", eng_resadd_fwd, eng_resadd_bwd, eng_resadd_flops, eng_resadd_bytes, NULL },
    [ENG_OP_FFN] = { "ffn", eng_seqlin_fwd, eng_seqlin_bwd, eng_seqlin_flops, eng_seqlin_bytes, eng_seqlin_gemms },
    [ENG_OP_MEANPOOL] = { "meanpool", eng_meanpool_fwd, eng_meanpool_bwd, eng_meanpool_flops, eng_meanpool_bytes, NULL },
    [ENG_OP_LSH_HASH] = { "lsh_hash", eng_lsh_hash_fwd, eng_lsh_hash_bwd, eng_lsh_hash_flops, eng_lsh_hash_bytes, NULL },
    [ENG_OP_BATCHNORM] = { "batchnorm", eng_bn_fwd, eng_bn_bwd, eng_bn_flops, eng_bn_bytes, NULL },
    [ENG_OP_RES_FORK] = { "res_fork", eng_res_fork_fwd, eng_res_fork_bwd, eng_res_fork_flops, eng_res_fork_bytes, NULL },
    [ENG_OP_RES_ADD] = { "res_add", eng_res_add_fwd, eng_res_add_bwd, eng_res_add_flops, eng_res_add_bytes,
                         eng_res_add_gemms },
};
