/* sparse.c — MaxK (keep the k largest values of each row) and the CBSR x dense multiply
 * that the next layer runs on its output (MaxK-GNN, Peng et al.): both are ops of the one
 * op table (ops.c), with forward, backward and software counters.
 *
 * CBSR holds exactly k values and k column indices per row, the indices ascending, so
 * the next layer's multiply reads k of the d rows of W per row of the batch.
 *
 * Ties: when several values equal the k-th largest, the ones in the lowest columns are
 * kept. NaN in a row: the row keeps its first k columns as they are (the loss is NaN then
 * and the run stops as diverged); nothing is read or written out of bounds.
 *
 * Counters (4 bytes per float or int32), B rows, d dense width, k kept, o = outputs:
 *  op          dir  FLOPs              bytes / 4
 *  maxk        fwd  B·d                B·d + 2·B·k          (one compare per value: the
 *                                                            selection's bisection passes
 *                                                            are implementation, not formula)
 *              bwd  0                  B·d + 2·B·k          (zero dx, scatter dy)
 *  cbsr_dense  fwd  2·B·k·o            2·B·k + d·o + B·o
 *              bwd  2·B·k·o (+2·B·k·o  2·B·k + B·o + d·o (+ d·o + B·k for dvalues)
 *                   for dvalues)
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif

#include "internal.h"

#include <string.h>

#define U64(x) ((uint64_t)(x))

/* The kernels are load-bound loops over rows of W; wider vectors pay. Each is compiled
 * for the baseline, AVX2 and AVX-512 (ENG_ISA_KERNEL, internal.h) and the path isa.c chose
 * runs (NNBENCH_ISA, or the CPU's widest). Nothing is fused into an FMA on any path
 * (internal.h), so every path gives the same bits. */

/* ---- MaxK selection -------------------------------------------------------------------
 * Floats map to unsigned keys in the same order (sign flipped: negative values reversed),
 * so the k-th largest value is found by bisection over keys: the largest key t with
 * count(x >= value(t)) >= k. Each count is a vectorised pass over the row; the search ends
 * early as soon as a threshold leaves exactly k values (the usual case, ~15 passes for
 * d = 256), and at most 32 passes when ties make that impossible. */

static inline uint32_t key_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static inline float value_of(uint32_t key)
{
    uint32_t u = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline __attribute__((always_inline)) int count_ge(const float *restrict x, int d, float t)
{
    int c = 0;
    for (int i = 0; i < d; i++) c += x[i] >= t;
    return c;
}

/* The smallest and largest key of a row, in integer compares (float min/max loops do not
 * vectorize without -ffast-math). NaNs have keys beyond those of -inf and +inf. */
ENG_ISA_BODY key_range(const float *restrict x, int d, uint32_t *lo, uint32_t *hi)
{
    uint32_t a = 0xffffffffu, b = 0;
    for (int i = 0; i < d; i++) {
        uint32_t q = key_of(x[i]);
        a = q < a ? q : a;
        b = q > b ? q : b;
    }
    *lo = a;
    *hi = b;
}

ENG_ISA_BODY select_row(const float *restrict x, int d, int k, float *restrict val, int32_t *restrict idx)
{
    uint32_t lo, hi;
    key_range(x, d, &lo, &hi);
    if (lo < key_of(-__builtin_inff()) || hi > key_of(__builtin_inff())) { /* a NaN */
        for (int j = 0; j < k; j++) { val[j] = x[j]; idx[j] = j; }
        return;
    }
    float t = value_of(lo);
    int exact = k == d;
    while (!exact && lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        float tm = value_of(mid);
        int c = count_ge(x, d, tm);
        /* selects, not branches: which way a pass goes is a coin toss a predictor loses */
        exact = c == k;
        t = exact ? tm : t;
        lo = c > k ? mid : lo;
        hi = c < k ? mid - 1 : hi;
    }
    int j = 0;
    if (exact) {
        /* branch-free compaction: every value is written at slot j, which only advances
         * past a kept one; exactly k are kept, so the loop stops on the k-th, in bounds */
        for (int i = 0; i < d && j < k; i++) {
            val[j] = x[i];
            idx[j] = i;
            j += x[i] >= t;
        }
        return;
    }
    /* ties at the k-th value: keep everything above it, then the lowest columns equal to it */
    t = value_of(lo);
    int above = 0;
    for (int i = 0; i < d; i++) above += x[i] > t;
    int ties = k - above;
    for (int i = 0; i < d && j < k; i++) {
        int take = x[i] > t || (x[i] == t && ties > 0);
        if (x[i] == t && take) ties--;
        if (take) { val[j] = x[i]; idx[j] = i; j++; }
    }
}

ENG_ISA_BODY maxk_select_body(const float *x, int rows, int d, int k, float *val, int32_t *idx)
{
    for (int r = 0; r < rows; r++)
        select_row(x + (size_t)r * d, d, k, val + (size_t)r * k, idx + (size_t)r * k);
}
ENG_ISA_KERNEL(maxk_select, (const float *x, int rows, int d, int k, float *val, int32_t *idx),
               (x, rows, d, k, val, idx))

void eng_maxk_select(const float *x, int rows, int d, int k, float *val, int32_t *idx)
{
    maxk_select_isa[eng_isa_current()](x, rows, d, k, val, idx);
}

void eng_maxk_fwd(eng_node *n, int rows)
{
    eng_maxk_select(n->x, rows, (int)n->in_size, n->k, n->y, n->idx);
}

/* dx [B x d]: dy [B x k] at the kept columns, 0 elsewhere */
void eng_maxk_bwd(eng_node *n, int rows)
{
    if (!n->dx) return;
    size_t d = n->in_size, k = (size_t)n->k;
    memset(n->dx, 0, (size_t)rows * d * sizeof(float));
    for (int r = 0; r < rows; r++) {
        float *dx = n->dx + (size_t)r * d;
        const float *dy = n->dy + (size_t)r * k;
        const int32_t *ix = n->idx + (size_t)r * k;
        for (size_t j = 0; j < k; j++) dx[ix[j]] = dy[j];
    }
}

uint64_t eng_maxk_flops(const eng_node *n, int rows, eng_dir dir)
{
    return dir == ENG_FWD ? U64(rows) * n->in_size : 0;
}

uint64_t eng_maxk_bytes(const eng_node *n, int rows, eng_dir dir)
{
    if (dir == ENG_BWD && !n->dx) return 0;
    return 4 * (U64(rows) * n->in_size + 2 * U64(rows) * (uint64_t)n->k);
}

/* ---- CBSR x dense ---------------------------------------------------------------------
 * One template (sparse_cbsr.inc) stamped per path with the path's native vector width. */

typedef float v4 __attribute__((vector_size(16)));   /* SSE2 (the x86-64 baseline), NEON */
#define VT v4
#define W 4
#define SFX generic
#define ATTR
#include "sparse_cbsr.inc"
#undef VT
#undef W
#undef SFX
#undef ATTR
#if ENG_ISA_X86
typedef float v8 __attribute__((vector_size(32)));   /* AVX2 */
typedef float v16 __attribute__((vector_size(64)));  /* AVX-512 */
#define VT v8
#define W 8
#define SFX avx2
#define ATTR __attribute__((target("avx2")))
#include "sparse_cbsr.inc"
#undef VT
#undef W
#undef SFX
#undef ATTR
#define VT v16
#define W 16
#define SFX avx512
#define ATTR __attribute__((target("avx512f")))
#include "sparse_cbsr.inc"
#undef VT
#undef W
#undef SFX
#undef ATTR
#define CBSR_TABLE(name) { name##_generic, name##_avx2, name##_avx512 }
#else
#define CBSR_TABLE(name) { name##_generic, name##_generic, name##_generic }
#endif

void eng_cbsr_mm(const float *val, const int32_t *idx, int rows, int k, const float *w, int d, int out, float *y,
                 float *pack)
{
    static void (*const path[ENG_ISA_N])(const float *, const int32_t *, int, int, const float *, int, int, float *,
                                         float *) = CBSR_TABLE(cbsr_mm);
    path[eng_isa_current()](val, idx, rows, k, w, d, out, y, pack);
}

void eng_cbsr_mm_bwd(const float *val, const int32_t *idx, int rows, int k, const float *w, int d, int out,
                     const float *dy, float *dval, float *dw, float *pack)
{
    static void (*const path[ENG_ISA_N])(const float *, const int32_t *, int, int, const float *, int, int,
                                         const float *, float *, float *, float *) = CBSR_TABLE(cbsr_mm_bwd);
    path[eng_isa_current()](val, idx, rows, k, w, d, out, dy, dval, dw, pack);
}

void eng_cbsr_dense_fwd(eng_node *n, int rows)
{
    eng_cbsr_mm(n->x, n->idx, rows, n->k, n->w, (int)n->in_size, (int)n->out_size, n->y, n->ws);
}

void eng_cbsr_dense_bwd(eng_node *n, int rows)
{
    eng_cbsr_mm_bwd(n->x, n->idx, rows, n->k, n->w, (int)n->in_size, (int)n->out_size, n->dy, n->dx, n->dw, n->ws);
}

uint64_t eng_cbsr_dense_flops(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t f = 2 * U64(rows) * (uint64_t)n->k * n->out_size;
    return dir == ENG_FWD ? f : (n->dx ? 2 * f : f);
}

uint64_t eng_cbsr_dense_bytes(const eng_node *n, int rows, eng_dir dir)
{
    uint64_t B = U64(rows), k = (uint64_t)n->k, w = U64(n->in_size) * n->out_size;
    if (dir == ENG_FWD) return 4 * (2 * B * k + w + B * n->out_size);
    uint64_t e = 2 * B * k + B * n->out_size + w;
    if (n->dx) e += w + B * k;
    return 4 * e;
}
