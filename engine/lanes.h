/* lanes.h — the element-wise loops and sums of the memory-bound ops (batch norm, residual
 * adds, global average pooling, bias) over contiguous floats, written with GCC
 * vector types of 4 floats (SSE2, the x86-64 baseline) so that they vectorise at -O2, whose
 * cost model leaves loops of unknown trip count scalar. (Wider vector types spill to the
 * stack when the baseline lacks the registers.) A sum keeps ENG_LANES = 16 partial sums in
 * four named vectors a0..a3 (an array of them would live in memory), folds them in a fixed
 * order and adds the tail after, so its result does not depend on the instructions the
 * compiler picked (no FMA: -std=c11 means -ffp-contract=off). Private to
 * engine/. */
#ifndef NNBENCH_ENGINE_LANES_H
#define NNBENCH_ENGINE_LANES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ENG_LANES 16

typedef float eng_v4 __attribute__((vector_size(4 * sizeof(float))));
typedef int32_t eng_v4i __attribute__((vector_size(4 * sizeof(int32_t))));

static inline eng_v4 v4_load(const float *p)
{
    eng_v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void v4_store(float *p, eng_v4 v) { memcpy(p, &v, sizeof v); }

static inline eng_v4 v4_splat(float a) { return (eng_v4){ a, a, a, a }; }

/* V4_SHUFFLE2(a, b, i, j, k, l): lanes i, j, k, l of the 8 lanes of a then b (GCC and clang
 * spell it differently). */
#if defined(__clang__)
#define V4_SHUFFLE2(a, b, i, j, k, l) __builtin_shufflevector((a), (b), i, j, k, l)
#else
#define V4_SHUFFLE2(a, b, i, j, k, l) __builtin_shuffle((a), (b), (eng_v4i){ i, j, k, l })
#endif

/* BODY(q, off) for the four quarters q = 0..3 of the 16-float block at k: a sum's loop body
 * names its accumulators a##q (and b##q for a second sum). */
#define LANES_BLOCK(BODY, k) BODY(0, (k)) BODY(1, (k) + 4) BODY(2, (k) + 8) BODY(3, (k) + 12)

/* The sum of the 16 lanes of a0..a3, folded in a fixed order, then of tail[0..nt). */
static inline float lanes_fold(eng_v4 a0, eng_v4 a1, eng_v4 a2, eng_v4 a3, const float *tail, size_t nt)
{
    eng_v4 v = (a0 + a2) + (a1 + a3);
    float s = (v[0] + v[2]) + (v[1] + v[3]);
    for (size_t j = 0; j < nt; j++) s += tail[j];
    return s;
}

/* sum x[0..n) */
static inline float lanes_sum(const float *restrict x, size_t n)
{
    eng_v4 a0 = { 0 }, a1 = a0, a2 = a0, a3 = a0;
    size_t k = 0;
#define LANES_SUM_Q(q, o) a##q += v4_load(x + (o));
    for (; k + ENG_LANES <= n; k += ENG_LANES) { LANES_BLOCK(LANES_SUM_Q, k) }
#undef LANES_SUM_Q
    return lanes_fold(a0, a1, a2, a3, x + k, n - k);
}

/* y[k] = a[k] + b[k] (y may be a or b) */
static inline void lanes_add(const float *a, const float *b, float *y, size_t n)
{
    size_t k = 0;
    for (; k + 4 <= n; k += 4) v4_store(y + k, v4_load(a + k) + v4_load(b + k));
    for (; k < n; k++) y[k] = a[k] + b[k];
}

/* y[k] += a */
static inline void lanes_add_scalar(float *y, size_t n, float a)
{
    eng_v4 va = v4_splat(a);
    size_t k = 0;
    for (; k + 4 <= n; k += 4) v4_store(y + k, v4_load(y + k) + va);
    for (; k < n; k++) y[k] += a;
}

/* y[k] = a */
static inline void lanes_fill(float *y, size_t n, float a)
{
    eng_v4 va = v4_splat(a);
    size_t k = 0;
    for (; k + 4 <= n; k += 4) v4_store(y + k, va);
    for (; k < n; k++) y[k] = a;
}

#endif
