/* lanes.h — the element-wise loops and sums of the memory-bound ops (batch norm, residual
 * adds, pooling, bias gradients) over contiguous floats, written with GCC vector types of
 * ENG_LANES floats so that they vectorise at -O2 (whose cost model leaves loops of unknown
 * trip count scalar). A sum keeps ENG_LANES partial sums, adds the tail into the first
 * lanes and folds them in a fixed order, so its result does not depend on the vector width
 * the compiler picked: every ISA path gives the same bits (no FMA: -std=c11 means
 * -ffp-contract=off). Private to engine/. */
#ifndef NNBENCH_ENGINE_LANES_H
#define NNBENCH_ENGINE_LANES_H

#include <stddef.h>
#include <string.h>

#define ENG_LANES 16

typedef float eng_lanes __attribute__((vector_size(ENG_LANES * sizeof(float))));

/* Vectors of this size are never passed or returned by value (that would change the ABI
 * when the baseline lacks AVX-512): loads, stores and splats are macros on variables. */
#define LANES_LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define LANES_STORE(p, v) memcpy((p), &(v), sizeof(v))
#define LANES_SPLAT(v, a) ((v) = (eng_lanes){ 0 } + (a))

/* Folds the partial sums v, plus tail[0..nt) added into lanes 0..nt-1, in a fixed order. */
static inline float lanes_fold(const eng_lanes *v, const float *tail, size_t nt)
{
    float t[ENG_LANES];
    memcpy(t, v, sizeof t);
    for (size_t j = 0; j < nt; j++) t[j] += tail[j];
    for (int w = ENG_LANES / 2; w > 0; w /= 2)
        for (int i = 0; i < w; i++) t[i] += t[i + w];
    return t[0];
}

/* sum x[0..n) */
static inline float lanes_sum(const float *restrict x, size_t n)
{
    eng_lanes acc = { 0 };
    size_t k = 0;
    for (; k + ENG_LANES <= n; k += ENG_LANES) {
        eng_lanes v;
        LANES_LOAD(v, x + k);
        acc += v;
    }
    return lanes_fold(&acc, x + k, n - k);
}

/* y[k] = a[k] + b[k] (y may be a or b) */
static inline void lanes_add(const float *a, const float *b, float *y, size_t n)
{
    eng_lanes va, vb;
    size_t k = 0;
    for (; k + ENG_LANES <= n; k += ENG_LANES) {
        LANES_LOAD(va, a + k);
        LANES_LOAD(vb, b + k);
        va += vb;
        LANES_STORE(y + k, va);
    }
    for (; k < n; k++) y[k] = a[k] + b[k];
}

#endif
