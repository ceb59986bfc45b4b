/* qgemm.c — the int8 GEMM of the quantized path: C[M x N] (int32) = A[M x Kp] (uint8) ·
 * B[N x Kp]^T (int8) + bias[N], exact in integer arithmetic whatever the path:
 *   scalar  portable C (the reference; the exported model.c has the same loop)
 *   avx2    operands widened to int16 and multiplied with vpmaddwd (int16 x int16 -> int32
 *           pairs, exact; vpmaddubsw would saturate u8*s8 pairs at int16)
 *   vnni    vpdpbusd on ymm (AVX512-VNNI + VL): u8 x s8 quads accumulated into int32, exact
 * Paths are compiled with target attributes and chosen at run time from the CPU (no wider
 * than NNBENCH_ISA, isa.c), or forced (eng_qmodel_set_kernel, --kernel) so every machine
 * can test the ones it has. Kp is a
 * multiple of ENG_QK_ALIGN and B's padding is zero, so A's padding never counts. */
#include "quant_internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

static void gemm_scalar(int M, int N, int Kp, const uint8_t *A, const int8_t *B, const int16_t *B16,
                        const int32_t *bias, int32_t *C, int16_t *A16)
{
    (void)B16; (void)A16;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            const uint8_t *a = A + (size_t)m * Kp;
            const int8_t *b = B + (size_t)n * Kp;
            int32_t acc = bias ? bias[n] : 0;
            for (int k = 0; k < Kp; k++) acc += (int32_t)a[k] * (int32_t)b[k];
            C[(size_t)m * N + n] = acc;
        }
}

#if HAVE_X86
/* Sum of the 8 int32 lanes of each of 4 vectors: {sum(a), sum(b), sum(c), sum(d)}. */
__attribute__((target("avx2"))) static inline __m128i hsum4(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    __m256i abcd = _mm256_hadd_epi32(ab, cd);
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

__attribute__((target("avx2"))) static inline int32_t hsum1(__m256i a)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_hadd_epi32(s, s);
    s = _mm_hadd_epi32(s, s);
    return _mm_cvtsi128_si32(s);
}

/* Stores 4 sums (+ bias) at c[0..3]. */
__attribute__((target("avx2"))) static inline void store4(int32_t *c, __m128i s, const int32_t *bias, int n)
{
    if (bias) s = _mm_add_epi32(s, _mm_loadu_si128((const __m128i *)(bias + n)));
    _mm_storeu_si128((__m128i *)c, s);
}

/* The blocked loops both SIMD paths share, from row m0 on: 2 rows x 4 columns per block
 * (6 loads feed 8 multiply-accumulates), then the leftover columns and row. TA/TB: the
 * operand types as the path reads them, STEP: elements per ymm, MAC(acc, a, b): acc += a·b
 * by lanes of int32. */
#define QGEMM_BLOCKS(TA, TB, STEP, MAC, A, B, m0)                                                     \
    do {                                                                                              \
        for (int m = (m0); m < M; m += 2) {                                                           \
            int two = m + 1 < M; /* the last row of an odd count alone (batch 1: no wasted row) */  \
            const TA *a0 = (A) + (size_t)m * Kp, *a1 = a0 + Kp;                                       \
            int n = 0;                                                                                \
            for (; n + 4 <= N; n += 4) {                                                              \
                const TB *b0 = (B) + (size_t)n * Kp, *b1 = b0 + Kp, *b2 = b1 + Kp, *b3 = b2 + Kp;     \
                __m256i s00 = _mm256_setzero_si256(), s01 = s00, s02 = s00, s03 = s00;                \
                __m256i s10 = s00, s11 = s00, s12 = s00, s13 = s00;                                   \
                for (int k = 0; k < Kp; k += (STEP)) {                                                \
                    __m256i x0 = _mm256_loadu_si256((const __m256i *)(a0 + k));                      \
                    __m256i w0 = _mm256_loadu_si256((const __m256i *)(b0 + k));                      \
                    __m256i w1 = _mm256_loadu_si256((const __m256i *)(b1 + k));                      \
                    __m256i w2 = _mm256_loadu_si256((const __m256i *)(b2 + k));                      \
                    __m256i w3 = _mm256_loadu_si256((const __m256i *)(b3 + k));                      \
                    s00 = MAC(s00, x0, w0); s01 = MAC(s01, x0, w1); s02 = MAC(s02, x0, w2); s03 = MAC(s03, x0, w3); \
                    if (two) {                                                                        \
                        __m256i x1 = _mm256_loadu_si256((const __m256i *)(a1 + k));                  \
                        s10 = MAC(s10, x1, w0); s11 = MAC(s11, x1, w1); s12 = MAC(s12, x1, w2); s13 = MAC(s13, x1, w3); \
                    }                                                                                 \
                }                                                                                     \
                store4(C + (size_t)m * N + n, hsum4(s00, s01, s02, s03), bias, n);                   \
                if (two) store4(C + (size_t)(m + 1) * N + n, hsum4(s10, s11, s12, s13), bias, n);    \
            }                                                                                         \
            for (; n < N; n++) {                                                                      \
                const TB *b0 = (B) + (size_t)n * Kp;                                                  \
                __m256i s0 = _mm256_setzero_si256(), s1 = s0;                                         \
                for (int k = 0; k < Kp; k += (STEP)) {                                                \
                    __m256i w0 = _mm256_loadu_si256((const __m256i *)(b0 + k));                      \
                    s0 = MAC(s0, _mm256_loadu_si256((const __m256i *)(a0 + k)), w0);                 \
                    if (two) s1 = MAC(s1, _mm256_loadu_si256((const __m256i *)(a1 + k)), w0);        \
                }                                                                                     \
                C[(size_t)m * N + n] = hsum1(s0) + (bias ? bias[n] : 0);                              \
                if (two) C[(size_t)(m + 1) * N + n] = hsum1(s1) + (bias ? bias[n] : 0);               \
            }                                                                                         \
        }                                                                                             \
    } while (0)

#define MAC_AVX2(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#define MAC_VNNI(acc, a, b) _mm256_dpbusd_epi32((acc), (a), (b))

/* A is widened to int16 once per call (A16: M x Kp), B16 once per model. */
__attribute__((target("avx2"))) static void gemm_avx2(int M, int N, int Kp, const uint8_t *A, const int8_t *B,
                                                      const int16_t *B16, const int32_t *bias, int32_t *C,
                                                      int16_t *A16)
{
    (void)B;
    for (size_t i = 0; i < (size_t)M * Kp; i += 16)
        _mm256_storeu_si256((__m256i *)(A16 + i), _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(A + i))));
    QGEMM_BLOCKS(int16_t, int16_t, 16, MAC_AVX2, A16, B16, 0);
}

#define VNNI_TARGET __attribute__((target("avx2,avx512f,avx512vl,avx512vnni")))

/* u8 x s8 directly: 4 rows x 4 columns per block (8 loads feed 16 vpdpbusd; 21 of the 32
 * ymm registers AVX-512VL has), the rest by the shared blocks. */
VNNI_TARGET static void gemm_vnni(int M, int N, int Kp, const uint8_t *A, const int8_t *B, const int16_t *B16,
                                  const int32_t *bias, int32_t *C, int16_t *A16)
{
    (void)B16; (void)A16;
    int m4 = N >= 4 ? M / 4 * 4 : 0, n4 = N / 4 * 4;
    for (int m = 0; m < m4; m += 4) {
        const uint8_t *a0 = A + (size_t)m * Kp, *a1 = a0 + Kp, *a2 = a1 + Kp, *a3 = a2 + Kp;
        for (int n = 0; n < n4; n += 4) {
            const int8_t *b0 = B + (size_t)n * Kp;
            __m256i s[4][4];
            for (int i = 0; i < 4; i++)
                for (int jj = 0; jj < 4; jj++) s[i][jj] = _mm256_setzero_si256();
            for (int k = 0; k < Kp; k += 32) {
                __m256i x0 = _mm256_loadu_si256((const __m256i *)(a0 + k));
                __m256i x1 = _mm256_loadu_si256((const __m256i *)(a1 + k));
                __m256i x2 = _mm256_loadu_si256((const __m256i *)(a2 + k));
                __m256i x3 = _mm256_loadu_si256((const __m256i *)(a3 + k));
                for (int jj = 0; jj < 4; jj++) {
                    __m256i w = _mm256_loadu_si256((const __m256i *)(b0 + (size_t)jj * Kp + k));
                    s[0][jj] = MAC_VNNI(s[0][jj], x0, w);
                    s[1][jj] = MAC_VNNI(s[1][jj], x1, w);
                    s[2][jj] = MAC_VNNI(s[2][jj], x2, w);
                    s[3][jj] = MAC_VNNI(s[3][jj], x3, w);
                }
            }
            for (int i = 0; i < 4; i++)
                store4(C + (size_t)(m + i) * N + n, hsum4(s[i][0], s[i][1], s[i][2], s[i][3]), bias, n);
        }
        /* the leftover columns of these rows, one dot product each */
        if (n4 < N) {
            for (int i = 0; i < 4; i++)
                for (int n = n4; n < N; n++) {
                    const uint8_t *ar = A + (size_t)(m + i) * Kp;
                    const int8_t *b0 = B + (size_t)n * Kp;
                    __m256i s0 = _mm256_setzero_si256();
                    for (int k = 0; k < Kp; k += 32)
                        s0 = MAC_VNNI(s0, _mm256_loadu_si256((const __m256i *)(ar + k)),
                                      _mm256_loadu_si256((const __m256i *)(b0 + k)));
                    C[(size_t)(m + i) * N + n] = hsum1(s0) + (bias ? bias[n] : 0);
                }
        }
    }
    QGEMM_BLOCKS(uint8_t, int8_t, 32, MAC_VNNI, A, B, m4);
}
#endif

/* ---- the input's codes: d[i] = eng_qcode(x[i], scale, zp) ------------------------------
 * The vector paths do the formula's IEEE operations (a division, not a reciprocal; floor
 * exact), so they give its codes: the clamp by max(v, 0), which gives 0 for NaN as the
 * formula's `v >= 0 ? ... : 0` does, then min(v, 255). */

static void codes_scalar(const float *x, size_t n, float scale, int zp, uint8_t *d)
{
    for (size_t i = 0; i < n; i++) d[i] = (uint8_t)eng_qcode(x[i], scale, zp);
}

#if HAVE_X86
__attribute__((target("avx2"))) static void codes_avx2(const float *x, size_t n, float scale, int zp, uint8_t *d)
{
    const __m256 s = _mm256_set1_ps(scale), half = _mm256_set1_ps(0.5f), z = _mm256_set1_ps((float)zp);
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i c[4];
        for (int k = 0; k < 4; k++) {
            __m256 u = _mm256_add_ps(_mm256_div_ps(_mm256_loadu_ps(x + i + 8 * k), s), half);
            __m256 v = _mm256_add_ps(_mm256_round_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), z);
            c[k] = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(v, zero), top));
        }
        /* the packs work within 128-bit lanes: the dwords come out in the order 0 4 1 5 2 6 3 7 */
        __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_permutevar8x32_epi32(b, order));
    }
    codes_scalar(x + i, n - i, scale, zp, d + i);
}

__attribute__((target("avx512f"))) static void codes_avx512(const float *x, size_t n, float scale, int zp, uint8_t *d)
{
    const __m512 s = _mm512_set1_ps(scale), half = _mm512_set1_ps(0.5f), z = _mm512_set1_ps((float)zp);
    const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(255.0f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 u = _mm512_add_ps(_mm512_div_ps(_mm512_loadu_ps(x + i), s), half);
        __m512 v = _mm512_add_ps(_mm512_roundscale_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), z);
        __m512i c = _mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(v, zero), top));
        _mm_storeu_si128((__m128i *)(d + i), _mm512_cvtepi32_epi8(c));
    }
    codes_scalar(x + i, n - i, scale, zp, d + i);
}
#endif

void eng_qcodes_row(const float *x, size_t n, float scale, int zp, uint8_t *d)
{
#if HAVE_X86
    switch (eng_isa_current()) {
    case ENG_ISA_AVX512: codes_avx512(x, n, scale, zp, d); return;
    case ENG_ISA_AVX2: codes_avx2(x, n, scale, zp, d); return;
    default: break;
    }
#endif
    codes_scalar(x, n, scale, zp, d);
}

/* ---- requantization of a dense row: y[f] = eng_requant(a[f], mult[f], shift[f], zp, lo) -- */

static void requant_scalar(const int32_t *a, int n, const int32_t *mult, const int32_t *shift, int zp, int lo, uint8_t *y)
{
    for (int f = 0; f < n; f++) y[f] = (uint8_t)eng_requant(a[f], mult[f], shift[f], zp, lo);
}

#if HAVE_X86
/* 4 lanes of int64: the product by vpmuldq (int32 x int32 -> int64, exact), the arithmetic
 * shift as a logical one of the value with its sign flipped in and out (AVX2 has no
 * vpsravq), the clamp by compares. */
__attribute__((target("avx2"))) static void requant_avx2(const int32_t *a, int n, const int32_t *mult, const int32_t *shift,
                                                         int zp, int lo, uint8_t *y)
{
    const __m256i one = _mm256_set1_epi64x(1), zero = _mm256_setzero_si256(), vzp = _mm256_set1_epi64x(zp);
    const __m256i vlo = _mm256_set1_epi64x(lo), vhi = _mm256_set1_epi64x(255);
    const __m256i low_dwords = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    int f = 0;
    for (; f + 4 <= n; f += 4) {
        __m256i av = _mm256_cvtepi32_epi64(_mm_loadu_si128((const __m128i *)(a + f)));
        __m256i mv = _mm256_cvtepi32_epi64(_mm_loadu_si128((const __m128i *)(mult + f)));
        __m256i sv = _mm256_cvtepi32_epi64(_mm_loadu_si128((const __m128i *)(shift + f)));
        __m256i x = _mm256_add_epi64(_mm256_mul_epi32(av, mv), _mm256_sllv_epi64(one, _mm256_sub_epi64(sv, one)));
        __m256i sign = _mm256_cmpgt_epi64(zero, x);
        __m256i v = _mm256_xor_si256(_mm256_srlv_epi64(_mm256_xor_si256(x, sign), sv), sign);
        v = _mm256_add_epi64(v, vzp);
        v = _mm256_blendv_epi8(v, vlo, _mm256_cmpgt_epi64(vlo, v));
        v = _mm256_blendv_epi8(v, vhi, _mm256_cmpgt_epi64(v, vhi));
        __m128i d = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, low_dwords));
        d = _mm_packus_epi16(_mm_packus_epi32(d, d), d);
        int32_t four = _mm_cvtsi128_si32(d);
        memcpy(y + f, &four, 4);
    }
    requant_scalar(a + f, n - f, mult + f, shift + f, zp, lo, y + f);
}

/* 8 lanes of int64 with AVX-512F's vpmuldq, vpsravq, vpmaxsq/vpminsq and vpmovqb. */
__attribute__((target("avx512f"))) static void requant_avx512(const int32_t *a, int n, const int32_t *mult,
                                                              const int32_t *shift, int zp, int lo, uint8_t *y)
{
    const __m512i one = _mm512_set1_epi64(1), vzp = _mm512_set1_epi64(zp);
    const __m512i vlo = _mm512_set1_epi64(lo), vhi = _mm512_set1_epi64(255);
    int f = 0;
    for (; f + 8 <= n; f += 8) {
        __m512i av = _mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)(a + f)));
        __m512i mv = _mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)(mult + f)));
        __m512i sv = _mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)(shift + f)));
        __m512i x = _mm512_add_epi64(_mm512_mul_epi32(av, mv), _mm512_sllv_epi64(one, _mm512_sub_epi64(sv, one)));
        __m512i v = _mm512_add_epi64(_mm512_srav_epi64(x, sv), vzp);
        v = _mm512_min_epi64(_mm512_max_epi64(v, vlo), vhi);
        _mm_storel_epi64((__m128i *)(y + f), _mm512_cvtepi64_epi8(v));
    }
    requant_scalar(a + f, n - f, mult + f, shift + f, zp, lo, y + f);
}
#endif

void eng_qrequant_row(const int32_t *a, int n, const int32_t *mult, const int32_t *shift, int zp, int lo, uint8_t *y)
{
#if HAVE_X86
    switch (eng_isa_current()) {
    case ENG_ISA_AVX512: requant_avx512(a, n, mult, shift, zp, lo, y); return;
    case ENG_ISA_AVX2: requant_avx2(a, n, mult, shift, zp, lo, y); return;
    default: break;
    }
#endif
    requant_scalar(a, n, mult, shift, zp, lo, y);
}

int eng_qgemm_path_available(eng_qgemm_path p)
{
    switch (p) {
    case ENG_QGEMM_SCALAR: return 1;
#if HAVE_X86
    case ENG_QGEMM_AVX2: return __builtin_cpu_supports("avx2");
    case ENG_QGEMM_VNNI:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
    case ENG_QGEMM_AVX2: case ENG_QGEMM_VNNI: return 0;
#endif
    case ENG_QGEMM_ONEDNN: return eng_qgemm_dnnl_available();
    case ENG_QGEMM_AUTO: return 1;
    }
    return 0;
}

const char *eng_qgemm_path_name(eng_qgemm_path p)
{
    static const char *const names[] = { "auto", "scalar", "avx2", "vnni", "onednn" };
    return (unsigned)p < sizeof names / sizeof names[0] ? names[p] : "?";
}

int eng_qgemm_path_parse(const char *s, eng_qgemm_path *out)
{
    for (int p = ENG_QGEMM_AUTO; p <= ENG_QGEMM_ONEDNN; p++)
        if (!strcmp(s, eng_qgemm_path_name((eng_qgemm_path)p))) { *out = (eng_qgemm_path)p; return ENG_OK; }
    return eng_fail(ENG_EINVAL, "int8 kernel '%s': expected auto, scalar, avx2, vnni or onednn", s);
}

/* The fastest own path this CPU has, up to the path of the other kernels (isa.c: so
 * NNBENCH_ISA=avx2 or generic also holds the int8 GEMM to AVX2 or scalar). oneDNN is
 * chosen by measurement, not here. */
eng_qgemm_path eng_qgemm_best_own(void)
{
    eng_isa isa = eng_isa_current();
    if (isa >= ENG_ISA_AVX512 && eng_qgemm_path_available(ENG_QGEMM_VNNI)) return ENG_QGEMM_VNNI;
    if (isa >= ENG_ISA_AVX2 && eng_qgemm_path_available(ENG_QGEMM_AVX2)) return ENG_QGEMM_AVX2;
    return ENG_QGEMM_SCALAR;
}

void eng_qgemm(eng_qgemm_path p, int M, int N, int Kp, const uint8_t *A, const int8_t *B, const int16_t *B16,
               const int32_t *bias, int32_t *C, int16_t *A16)
{
    switch (p) {
#if HAVE_X86
    case ENG_QGEMM_AVX2: gemm_avx2(M, N, Kp, A, B, B16, bias, C, A16); return;
    case ENG_QGEMM_VNNI: gemm_vnni(M, N, Kp, A, B, B16, bias, C, A16); return;
#endif
    default: gemm_scalar(M, N, Kp, A, B, B16, bias, C, A16); return;
    }
}
