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
#if ENG_ISA_X86
#include <immintrin.h>
#endif

#define U64(x) ((uint64_t)(x))

/* The kernels are load-bound loops over rows of W; wider vectors pay. Each is compiled
 * for the baseline, AVX2 and AVX-512 (ENG_ISA_KERNEL, internal.h) and the path isa.c chose
 * runs (NNBENCH_ISA, or the CPU's widest). Nothing is fused into an FMA on any path
 * (internal.h), so every path gives the same bits. */

/* ---- MaxK selection -------------------------------------------------------------------
 * Floats map to unsigned keys in the same order (sign flipped: negative values reversed),
 * so the k-th largest value is found by a search over keys: the largest key t with
 * count(x >= value(t)) >= k. Each count is a vectorised pass over the row; the search ends
 * as soon as a threshold leaves exactly k values (the usual case). It counts first at the
 * first row's threshold, then where the two counts that bracket k interpolate to, and
 * halves the range whenever a step did not (sel_step): a few passes for d = 256 where
 * halving alone took ~15, and about 64 at most when ties leave no exact threshold. The
 * first count shares its pass with the row's key range, and rows are searched SEL_ROWS at
 * a time in lockstep (select_rows). */

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
 * vectorize without -ffast-math; NaNs have keys beyond those of -inf and +inf), and in the
 * same pass the search's first count, at t: one pass over the row fewer. */
ENG_ISA_BODY key_range_count(const float *restrict x, int d, float t, uint32_t *lo, uint32_t *hi, int *count)
{
    uint32_t a = 0xffffffffu, b = 0;
    int c = 0;
    for (int i = 0; i < d; i++) {
        uint32_t q = key_of(x[i]);
        a = q < a ? q : a;
        b = q > b ? q : b;
        c += x[i] >= t;
    }
    *lo = a;
    *hi = b;
    *count = c;
}

/* The exact case's compaction, 16 values at a time (AVX-512: compress in a register, then
 * store as many lanes as were kept): the values >= t and their columns, in column order,
 * as the scalar loop writes them. Exactly k pass, so nothing is written past val[k - 1].
 * The scalar loop, one value at a time through its slot j, cost as much as a few counts,
 * and the search now takes a few. */
#if ENG_ISA_X86
__attribute__((target("avx512f"))) static void maxk_compact16(const float *x, int d, float t, float *val,
                                                              int32_t *idx)
{
    const __m512 tv = _mm512_set1_ps(t);
    __m512i col = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int i = 0, j = 0;
    for (; i + 16 <= d; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __mmask16 keep = _mm512_cmp_ps_mask(v, tv, _CMP_GE_OQ);
        __mmask16 first = (__mmask16)((1u << __builtin_popcount(keep)) - 1u);
        _mm512_mask_storeu_ps(val + j, first, _mm512_maskz_compress_ps(keep, v));
        _mm512_mask_storeu_epi32(idx + j, first, _mm512_maskz_compress_epi32(keep, col));
        j += __builtin_popcount(keep);
        col = _mm512_add_epi32(col, _mm512_set1_epi32(16));
    }
    for (; i < d; i++)
        if (x[i] >= t) { val[j] = x[i]; idx[j] = i; j++; }
}
#endif

/* The next key to count at in (lo, hi], where count(lo) = c_lo > k and count(hi + 1) =
 * c_hi < k: where the line through the two counts crosses k + 1/2 (the counts near the
 * k-th value are nearly linear in the key within an octave, so this lands near it in a few
 * steps), or the middle when `halve` (interpolation that stalls, as across octaves or on a
 * skewed row, then still halves the range every other step). */
static inline uint32_t next_key(uint32_t lo, uint32_t hi, int c_lo, int c_hi, int k, int halve)
{
    uint64_t span = (uint64_t)hi - lo; /* >= 1 */
    uint64_t step = span / 2 + 1;
    if (!halve) {
        double f = ((double)c_lo - (k + 0.5)) / (double)(c_lo - c_hi);
        step = (uint64_t)(f * (double)(span + 1));
        step = step < 1 ? 1 : step > span ? span : step;
    }
    return lo + (uint32_t)step;
}

/* One row's search for its k-th largest value. It keeps count(value(lo)) > k and
 * count(value(hi + 1)) < k and ends at a threshold that leaves exactly k (any such gives
 * the same set), or, when ties make that impossible, at lo == hi: the k-th value's key,
 * however it got there. Its first count is at the hint, the first row's threshold (a
 * layer's rows are alike), then by interpolation (next_key). */
typedef struct {
    uint32_t lo, hi, mid;
    int c_lo, c_hi, halve, exact, nan;
    int first, c_hint; /* the first count is the hint's, c_hint, taken in sel_begin's pass */
    uint64_t last_span;
    float t;
} sel_row;

/* The row's key range and NaN check, and its count at the hint in the same pass. */
ENG_ISA_BODY sel_begin(sel_row *s, const float *restrict x, int d, int k, uint32_t hint)
{
    key_range_count(x, d, value_of(hint), &s->lo, &s->hi, &s->c_hint);
    s->nan = s->lo < key_of(-__builtin_inff()) || s->hi > key_of(__builtin_inff());
    s->t = value_of(s->lo);
    s->exact = k == d;
    s->c_lo = d;
    s->c_hi = 0;
    s->halve = 0;
    s->first = 0;
    s->last_span = (uint64_t)s->hi - s->lo;
    if (!s->nan && !s->exact && s->lo < s->hi && hint > s->lo && hint <= s->hi) {
        s->mid = hint;
        s->first = 1;
    }
}

static inline int sel_open(const sel_row *s) { return !s->nan && !s->exact && s->lo < s->hi; }

/* Where the next count goes (the hint's, already counted, first). */
static inline float sel_at(sel_row *s, int k)
{
    if (!s->first) s->mid = next_key(s->lo, s->hi, s->c_lo, s->c_hi, k, s->halve);
    return value_of(s->mid);
}

/* The count c at value_of(mid) narrows the range. */
static inline void sel_step(sel_row *s, int c, int k)
{
    float tm = value_of(s->mid);
    /* selects, not branches: which way a pass goes is a coin toss a predictor loses */
    s->exact = c == k;
    s->t = s->exact ? tm : s->t;
    s->lo = c > k ? s->mid : s->lo;
    s->c_lo = c > k ? c : s->c_lo;
    s->hi = c < k ? s->mid - 1 : s->hi;
    s->c_hi = c < k ? c : s->c_hi;
    /* a step that did not halve the range: the next one halves it */
    uint64_t span = (uint64_t)s->hi - s->lo;
    s->halve = !s->halve && 2 * span > s->last_span;
    s->last_span = span;
    s->first = 0;
}

/* The row's k values and columns once its search has ended. */
ENG_ISA_BODY sel_finish(const sel_row *s, const float *restrict x, int d, int k, float *restrict val,
                        int32_t *restrict idx, int compact16)
{
    if (s->nan) {
        for (int j = 0; j < k; j++) { val[j] = x[j]; idx[j] = j; }
        return;
    }
    float t = s->t;
#if ENG_ISA_X86
    if (s->exact && compact16) {
        maxk_compact16(x, d, t, val, idx);
        return;
    }
#endif
    int j = 0;
    if (s->exact) {
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
    t = value_of(s->lo);
    int above = 0;
    for (int i = 0; i < d; i++) above += x[i] > t;
    int ties = k - above;
    for (int i = 0; i < d && j < k; i++) {
        int take = x[i] > t || (x[i] == t && ties > 0);
        if (x[i] == t && take) ties--;
        if (take) { val[j] = x[i]; idx[j] = i; j++; }
    }
}

/* Rows [r0, r0 + n) searched in lockstep, n <= SEL_ROWS: each pass counts every open row
 * once, and those counts are independent, so the core runs the rows' chains of dependent
 * counts side by side; one row at a time, each pass waited on the one before (its
 * reduction, the next key's division), and that wait was most of the selection. */
#define SEL_ROWS 8
ENG_ISA_BODY select_rows(const float *x, int r0, int n, int d, int k, float *val, int32_t *idx, uint32_t *hint,
                         int compact16)
{
    sel_row s[SEL_ROWS];
    for (int q = 0; q < n; q++) sel_begin(&s[q], x + (size_t)(r0 + q) * d, d, k, *hint);
    for (int open = 1; open;) {
        open = 0;
        for (int q = 0; q < n; q++) {
            if (!sel_open(&s[q])) continue;
            float tm = sel_at(&s[q], k);
            sel_step(&s[q], s[q].first ? s[q].c_hint : count_ge(x + (size_t)(r0 + q) * d, d, tm), k);
            open |= sel_open(&s[q]);
        }
    }
    if (!*hint && !s[0].nan) *hint = s[0].exact ? key_of(s[0].t) : s[0].lo;
    for (int q = 0; q < n; q++)
        sel_finish(&s[q], x + (size_t)(r0 + q) * d, d, k, val + (size_t)(r0 + q) * k, idx + (size_t)(r0 + q) * k,
                   compact16);
}

/* compact16: the AVX-512 path is the one running (eng_maxk_select), so the compaction
 * takes 16 at a time. The first row alone sets the hint: a hint fixed per call leaves the
 * rows independent (the previous row's threshold, a closer guess, made them one chain). */
ENG_ISA_BODY maxk_select_body(const float *x, int rows, int d, int k, float *val, int32_t *idx, int compact16)
{
    uint32_t hint = 0; /* no key is below it: the first row starts by interpolation and sets it */
    for (int r = 0; r < rows;) {
        int n = !hint ? 1 : rows - r < SEL_ROWS ? rows - r : SEL_ROWS;
        select_rows(x, r, n, d, k, val, idx, &hint, compact16);
        r += n;
    }
}
ENG_ISA_KERNEL(maxk_select, (const float *x, int rows, int d, int k, float *val, int32_t *idx, int compact16),
               (x, rows, d, k, val, idx, compact16))

void eng_maxk_select(const float *x, int rows, int d, int k, float *val, int32_t *idx)
{
    eng_isa p = eng_isa_current();
    maxk_select_isa[p](x, rows, d, k, val, idx, p == ENG_ISA_AVX512);
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
/* 16 of a row's dvalues, dval[q] = g . W[ix[q], :] for q < 16 (out a multiple of 16), with
 * the bits of every path: lane l of q's accumulator sums g[c] W[ix[q], c] over c = l mod 16
 * in c order (a product, then an add), and dval[q] = ((0 + lane 0) + lane 1) + ... + lane 15.
 * Summed one dot at a time, those 16 dependent adds cost more than the products (dvalues
 * was the pair's largest part, bench row 7); transposed 16 x 16, lane l of all sixteen
 * accumulators is one vector, and the sixteen chains advance together. */
__attribute__((target("avx512f"))) static void cbsr_dots16(const float *g, const float *w, const int32_t *ix,
                                                           int out, float *dval)
{
    __m512 a[16], t[16], u[16], col[16];
    const float *wr[16];
#pragma GCC unroll 16
    for (int q = 0; q < 16; q++) {
        wr[q] = w + (size_t)ix[q] * (size_t)out;
        a[q] = _mm512_setzero_ps();
    }
    for (int c = 0; c < out; c += 16) {
        __m512 g0 = _mm512_loadu_ps(g + c);
#pragma GCC unroll 16
        for (int q = 0; q < 16; q++) a[q] = _mm512_add_ps(a[q], _mm512_mul_ps(g0, _mm512_loadu_ps(wr[q] + c)));
    }
    /* per 128-bit lane m: t pairs rows, u[4b + p] holds rows 4b..4b+3 at column 4m + p */
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    /* col[j]: column j of the 16 accumulators, row q in lane q */
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        __m512 x0 = _mm512_shuffle_f32x4(u[p], u[4 + p], 0x88), x1 = _mm512_shuffle_f32x4(u[p], u[4 + p], 0xdd);
        __m512 y0 = _mm512_shuffle_f32x4(u[8 + p], u[12 + p], 0x88), y1 = _mm512_shuffle_f32x4(u[8 + p], u[12 + p], 0xdd);
        col[p] = _mm512_shuffle_f32x4(x0, y0, 0x88);
        col[8 + p] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
        col[4 + p] = _mm512_shuffle_f32x4(x1, y1, 0x88);
        col[12 + p] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
    }
    __m512 s = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int l = 0; l < 16; l++) s = _mm512_add_ps(s, col[l]);
    _mm512_storeu_ps(dval, s);
}
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
