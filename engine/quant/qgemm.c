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
