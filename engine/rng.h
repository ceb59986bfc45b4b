/* rng.h — the engine's seeded random numbers (xoshiro256**, seeded by splitmix64):
 * the same seed gives the same stream on every machine. Private to engine/. */
#ifndef NNBENCH_ENGINE_RNG_H
#define NNBENCH_ENGINE_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct { uint64_t s[4]; } eng_rng;

static inline uint64_t eng_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* stream lets one seed feed independent generators (data, init, shuffle, ...). */
static inline void eng_rng_seed(eng_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ull);
    for (int i = 0; i < 4; i++) r->s[i] = eng_splitmix64(&x);
}

static inline uint64_t eng_rng_next(eng_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform in [0, 1). */
static inline double eng_rng_uniform(eng_rng *r) { return (double)(eng_rng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform integer in [0, n). */
static inline uint64_t eng_rng_below(eng_rng *r, uint64_t n) { return (uint64_t)(eng_rng_uniform(r) * (double)n); }

/* Standard normal (Box-Muller; one value per call keeps the stream simple). */
static inline double eng_rng_normal(eng_rng *r)
{
    double u1 = eng_rng_uniform(r), u2 = eng_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
