/* data_codes.c — the training inputs kept as bytes when they are bytes. A batch is gathered
 * from rows scattered over the training set, and each row costs a miss the hardware cannot
 * foresee: a Fashion-MNIST batch of 128 float rows (400 KB) took 48-77 us a step, about
 * half of what the MLP's step spent outside its GEMMs. When every training value is (float)(c · k)
 * for a byte c and one scale k (IDX images as read, or scaled by 1/255), the dataset keeps a
 * byte copy beside the floats: the batcher reads a quarter of the bytes, can ask for the
 * whole batch at once, and decodes each row to the loader's own values ((float)(c · k),
 * the byte in double times k rounded once; computed as c / m in float where that gives the
 * same bits for every byte: exact_divisor), so the batch holds the very floats of x_train.
 *
 * The copy is checked value by value when it is made: data that are not bytes (a CSV, a
 * standardised or synthetic set) get none, and nothing is decoded that would not give back
 * its float bit for bit. */
#include "data_internal.h"

#include <string.h>

#include "../internal.h"

/* The scales a byte-valued input is read with (data_idx.c): raw, and scale's x/255. */
static const double code_scales[] = { 1.0, 1.0 / 255.0 };

/* The byte nearest x / k, clamped to [0, 255] (NaN to 0): the only candidate for a code of
 * x, which decoding then confirms or refutes. */
static inline int32_t nearest_code(float x, float inv)
{
    float q = x * inv + 0.5f;
    q = select_f(q > 0.0f, q, 0.0f); /* selects on bits: a float ?: is a branch at -O2 */
    q = select_f(q < 255.0f, q, 255.0f);
    return (int32_t)q;
}

/* The divisor m with (float)(c * k) == (float)c / m for every byte c, 0 when there is none
 * known: a float division is one vector instruction per 16 values where the double product
 * takes six (docs/data.md has what it saves a step). Exact for k = 1/255 because c/255's
 * bits repeat every 8 places, so no double result of c * k lies on or next to a float's
 * rounding midpoint; tests/engine/data.c (test_data_decode_paths) checks every byte on
 * every path, and would catch a product by the rounded reciprocal instead. */
static float exact_divisor(double k) { return k == 1.0 ? 1.0f : k == 1.0 / 255.0 ? 255.0f : 0.0f; }

/* The byte c decoded as the batcher decodes it (eng_data_decode: c / m in float when m is
 * an exact divisor, else c · k in double rounded once): the same bits on every path. */
static inline float decoded(int32_t c, double k, float m) { return m != 0.0f ? (float)c / m : (float)(c * k); }

/* A block of CODE_BLOCK values as codes: out[i] the byte nearest x[i] / k, and *diff the OR
 * of the bits by which each decodes to something other than x[i] (0: every value is its
 * code's). One pass over x, vectorised at each path's width (a constant count; a loop
 * for m and one for 0, so that neither tests m per value). Decoding each block back
 * with the batcher's kernel and comparing was most of a cache hit: Fashion-MNIST's cache
 * load in bench row 8 went 46.4 -> 36.6 ms with this pass. */
#define CODE_BLOCK 4096
ENG_ISA_BODY encode_block_body(const float *restrict x, float inv, double k, float m, uint8_t *restrict out,
                               uint32_t *restrict diff)
{
    uint32_t d = 0;
#define ENCODE_LOOP(M)                                                                        \
    for (size_t i = 0; i < CODE_BLOCK; i++) {                                                 \
        int32_t c = nearest_code(x[i], inv);                                                  \
        d |= f2u(decoded(c, k, M)) ^ f2u(x[i]);                                               \
        out[i] = (uint8_t)c;                                                                  \
    }
    if (m != 0.0f) ENCODE_LOOP(m)
    else ENCODE_LOOP(0.0f)
#undef ENCODE_LOOP
    *diff = d;
}
ENG_ISA_KERNEL(encode_block, (const float *restrict x, float inv, double k, float m, uint8_t *restrict out,
                              uint32_t *restrict diff), (x, inv, k, m, out, diff))

/* Values [0, n) of x as codes of scale k: 1 when each is the decoded value of the byte
 * written to out bit for bit, else 0 (out is then partly written). */
static int encode(const float *restrict x, size_t n, double k, uint8_t *restrict out)
{
    const float inv = (float)(1.0 / k), m = exact_divisor(k);
    size_t at = 0;
    for (uint32_t d; at + CODE_BLOCK <= n; at += CODE_BLOCK) {
        encode_block_isa[eng_isa_current()](x + at, inv, k, m, out + at, &d);
        if (d) return 0;
    }
    for (; at < n; at++) {
        int32_t c = nearest_code(x[at], inv);
        if (f2u(decoded(c, k, m)) != f2u(x[at])) return 0;
        out[at] = (uint8_t)c;
    }
    return 1;
}

int eng_data_code_scale_known(double k)
{
    for (size_t j = 0; j < sizeof code_scales / sizeof code_scales[0]; j++)
        if (k == code_scales[j]) return 1;
    return 0;
}

void eng_data_codes_build(eng_dataset *ds)
{
    eng_data_codes_free(ds);
    size_t n = (size_t)ds->n_train * ds->in_size;
    if (!ds->x_train || !n) return;
    /* The scale that gives the first nonzero value back (any works for zeros alone). */
    size_t first = 0;
    while (first < n && ds->x_train[first] == 0.0f) first++;
    double k = code_scales[0];
    for (size_t j = 0; j < sizeof code_scales / sizeof code_scales[0]; j++) {
        uint8_t c;
        if (first < n && encode(ds->x_train + first, 1, code_scales[j], &c)) { k = code_scales[j]; break; }
    }
    /* A block first, so that data that are not bytes cost neither the copy nor a pass. */
    size_t head = n < CODE_BLOCK ? n : CODE_BLOCK;
    uint8_t probe[CODE_BLOCK];
    if (!encode(ds->x_train, head, k, probe)) return;
    uint8_t *codes = prof_malloc(n);
    if (!codes) return; /* the batcher gathers the floats */
    eng_data_advise_huge(codes, n);
    memcpy(codes, probe, head);
    if (!encode(ds->x_train + head, n - head, k, codes + head)) { prof_free(codes); return; }
    ds->x_codes = codes;
    ds->x_code_scale = k;
}

/* ---- decoding: one function per instruction-set path ---------------------------------- */

ENG_ISA_BODY decode_scalar(const uint8_t *restrict c, size_t n, double k, float m, float *restrict out)
{
    for (size_t i = 0; i < n; i++) out[i] = decoded(c[i], k, m);
}

#if ENG_ISA_X86
#include <immintrin.h>
/* x86-64's baseline: 4 bytes to 4 ints, then to floats divided by m, or to two pairs of
 * doubles times k, to 4 floats. */
static void decode_generic(const uint8_t *restrict c, size_t n, double k, float m, float *restrict out)
{
    const __m128d kv = _mm_set1_pd(k);
    const __m128 mv = _mm_set1_ps(m);
    const __m128i z = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        int32_t w;
        memcpy(&w, c + i, 4);
        __m128i v = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(w), z), z);
        if (m != 0.0f) {
            _mm_storeu_ps(out + i, _mm_div_ps(_mm_cvtepi32_ps(v), mv));
            continue;
        }
        __m128 lo = _mm_cvtpd_ps(_mm_mul_pd(_mm_cvtepi32_pd(v), kv));
        __m128 hi = _mm_cvtpd_ps(_mm_mul_pd(_mm_cvtepi32_pd(_mm_srli_si128(v, 8)), kv));
        _mm_storeu_ps(out + i, _mm_movelh_ps(lo, hi));
    }
    decode_scalar(c + i, n - i, k, m, out + i);
}

__attribute__((target("avx2"))) static void decode_avx2(const uint8_t *restrict c, size_t n, double k, float m,
                                                        float *restrict out)
{
    const __m256d kv = _mm256_set1_pd(k);
    const __m256 mv = _mm256_set1_ps(m);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(c + i)));
        if (m != 0.0f) {
            _mm256_storeu_ps(out + i, _mm256_div_ps(_mm256_cvtepi32_ps(v), mv));
            continue;
        }
        __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(v)), kv));
        __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1)), kv));
        _mm256_storeu_ps(out + i, _mm256_set_m128(hi, lo));
    }
    decode_scalar(c + i, n - i, k, m, out + i);
}

__attribute__((target("avx512f"))) static void decode_avx512(const uint8_t *restrict c, size_t n, double k, float m,
                                                             float *restrict out)
{
    const __m512d kv = _mm512_set1_pd(k);
    const __m512 mv = _mm512_set1_ps(m);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(c + i)));
        if (m != 0.0f) {
            _mm512_storeu_ps(out + i, _mm512_div_ps(_mm512_cvtepi32_ps(v), mv));
            continue;
        }
        __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(v)), kv));
        __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(v, 1)), kv));
        _mm512_storeu_pd((double *)(void *)(out + i),
                         _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
    }
    decode_scalar(c + i, n - i, k, m, out + i);
}
static void (*const decode_isa[ENG_ISA_N])(const uint8_t *restrict, size_t, double, float, float *restrict) = {
    decode_generic, decode_avx2, decode_avx512
};
#else
static void decode_generic(const uint8_t *restrict c, size_t n, double k, float m, float *restrict out)
{
    decode_scalar(c, n, k, m, out);
}
static void (*const decode_isa[ENG_ISA_N])(const uint8_t *restrict, size_t, double, float, float *restrict) = {
    decode_generic, decode_generic, decode_generic
};
#endif

void eng_data_decode(const uint8_t *restrict c, size_t n, double k, float *restrict out)
{
    decode_isa[eng_isa_current()](c, n, k, exact_divisor(k), out);
}
