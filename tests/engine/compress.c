/* compress.c — the kernels of the gradient compression (engine/dist.c), on every
 * instruction-set path. fp16: exact round trips of all 63488 finite halves and the
 * infinities, round-to-nearest-even at every midpoint between neighbours, overflow, and
 * the same bits as the generic path on random floats and sums. int8: the same bits as the
 * generic path (residuals, codes, the largest magnitude, the sums), ties rounded away from
 * zero, the error-feedback bound |residual| <= scale / 2, and lengths that are no
 * multiple of the vector width. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../engine/dist.h"
#include "isa_paths.h"

static int is_nan_half(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

static void test_fp16_paths(void **state)
{
    eng_isa before = isa_force_or_skip(state);
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *back);
    float *f = malloc(N * sizeof *f);
    assert_non_null(h);
    assert_non_null(back);
    assert_non_null(f);
    size_t n = 0;
    for (uint32_t i = 0; i < N; i++)
        if (!is_nan_half((uint16_t)i)) h[n++] = (uint16_t)i;
    assert_int_equal(n, 63488 + 2);   /* every finite half (2 signs x 31 exponents x 1024), +-inf */
    eng_fp16_to_float(h, f, n);
    eng_fp16_from_float(f, back, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(back[i], h[i]);
    /* every midpoint between neighbouring positive finite halves goes to the even one, and
     * the floats just either side of it to their own neighbour */
    size_t m = 0;
    for (uint16_t a = 0; a < 0x7bffu; a++) {
        uint16_t pair[2] = { a, (uint16_t)(a + 1) };
        float v[2];
        eng_fp16_to_float(pair, v, 2);
        float mid = 0.5f * (v[0] + v[1]);   /* exact: floats carry 13 more bits */
        float probe[3] = { mid, nextafterf(mid, 0), nextafterf(mid, INFINITY) };
        uint16_t got[3];
        eng_fp16_from_float(probe, got, 3);
        assert_int_equal(got[0], (a & 1) ? a + 1 : a);
        assert_int_equal(got[1], a);
        assert_int_equal(got[2], a + 1);
        m++;
    }
    assert_int_equal(m, 0x7bff);
    /* overflow: 65504 is the largest half; from 65520 on it rounds to infinity */
    float big[4] = { 65504.0f, 65519.99f, 65520.0f, -1e9f };
    uint16_t hb[4];
    eng_fp16_from_float(big, hb, 4);
    assert_int_equal(hb[0], 0x7bffu);
    assert_int_equal(hb[1], 0x7bffu);
    assert_int_equal(hb[2], 0x7c00u);
    assert_int_equal(hb[3], 0xfc00u);
    /* random floats over the whole range and their sums: the bits of the generic path */
    uint32_t seed = 12345;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        uint32_t u = seed & 0x8fffffffu;   /* exponents up to 2^31 x 2^-127 .. overflow, subnormals */
        memcpy(&f[i], &u, 4);
    }
    uint16_t *g = malloc(N * sizeof *g), *s1 = malloc(N * sizeof *s1), *s2 = malloc(N * sizeof *s2);
    assert_non_null(g);
    assert_non_null(s1);
    assert_non_null(s2);
    eng_fp16_from_float(f, h, N);
    ISA_UNDER(ENG_ISA_GENERIC, eng_fp16_from_float(f, g, N));
    assert_memory_equal(h, g, N * sizeof *h);
    memcpy(s1, h, N * sizeof *h);
    memcpy(s2, h, N * sizeof *h);
    eng_fp16_add(g + 1, s1, N - 1);
    ISA_UNDER(ENG_ISA_GENERIC, eng_fp16_add(g + 1, s2, N - 1));
    for (int i = 0; i < N; i++)
        if (!is_nan_half(s1[i]) || !is_nan_half(s2[i])) assert_int_equal(s1[i], s2[i]);
    printf("  fp16 %s: %zu halves round-trip, %zu midpoints to even, random conversions and sums match generic\n",
           eng_isa_name(eng_isa_current()), n, m);
    free(h); free(back); free(f); free(g); free(s1); free(s2);
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

static void test_int8_paths(void **state)
{
    eng_isa before = isa_force_or_skip(state);
    enum { N = 100003 };   /* not a multiple of 4 or 8: the scalar tails run too */
    float *g = malloc(N * sizeof *g), *r1 = malloc(N * sizeof *r1), *r2 = malloc(N * sizeof *r2);
    float *a1 = malloc(N * sizeof *a1), *a2 = malloc(N * sizeof *a2);
    int8_t *q1 = malloc(N), *q2 = malloc(N);
    assert_true(g && r1 && r2 && a1 && a2 && q1 && q2);
    uint32_t seed = 777;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        /* magnitudes over six decades, both signs; every 97th a gradient of exactly 0 */
        float u = (float)(seed >> 8) / 16777216.0f;
        g[i] = i % 97 ? (seed & 1 ? -1.0f : 1.0f) * u * powf(10.0f, (float)(i % 6) - 4.0f) : 0.0f;
        r1[i] = r2[i] = (float)((int)(seed >> 20) - 2048) * 1e-6f;   /* last step's residual */
    }
    float m1 = eng_int8_residual_add(r1, g, N), m2;
    ISA_UNDER(ENG_ISA_GENERIC, m2 = eng_int8_residual_add(r2, g, N));
    assert_true(m1 == m2);
    assert_memory_equal(r1, r2, N * sizeof *r1);
    double scale = m1 / 127.0;
    float before_q[8];
    memcpy(before_q, r1, sizeof before_q);
    eng_int8_quantize(r1, q1, N, scale);
    ISA_UNDER(ENG_ISA_GENERIC, eng_int8_quantize(r2, q2, N, scale));
    assert_memory_equal(q1, q2, N);
    assert_memory_equal(r1, r2, N * sizeof *r1);
    for (int i = 0; i < N; i++) {
        assert_true(q1[i] >= -127 && q1[i] <= 127);
        assert_true(fabs((double)r1[i]) <= scale / 2 * (1 + 1e-6));
    }
    for (int i = 0; i < 8; i++) assert_float_equal(before_q[i], (float)(q1[i] * scale) + r1[i], 1e-6 * m1);
    /* ties go away from zero on every path: 2.5 -> 3, -2.5 -> -3, 0.5 -> 1, -0.5 -> -1 */
    float tie[9] = { 2.5f, -2.5f, 0.5f, -0.5f, 126.5f, -126.5f, 127.0f, -0.0f, 1.49999988f };
    int8_t tq[9];
    eng_int8_quantize(tie, tq, 9, 1.0);
    const int8_t want[9] = { 3, -3, 1, -1, 127, -127, 127, 0, 1 };
    assert_memory_equal(tq, want, 9);
    assert_true(tie[0] == -0.5f && tie[1] == 0.5f && tie[6] == 0.0f);
    /* the sums of the ranks' blocks */
    for (int i = 0; i < N; i++) a1[i] = a2[i] = g[i];
    eng_int8_accumulate(a1, q1, N, 0.015625f * 3);
    ISA_UNDER(ENG_ISA_GENERIC, eng_int8_accumulate(a2, q1, N, 0.015625f * 3));
    assert_memory_equal(a1, a2, N * sizeof *a1);
    printf("  int8 %s: residuals, codes, max and sums of %d values match generic\n",
           eng_isa_name(eng_isa_current()), N);
    free(g); free(r1); free(r2); free(a1); free(a2); free(q1); free(q2);
    assert_int_equal(eng_isa_set(before), ENG_OK);
}

int test_engine_compress(void)
{
    const struct CMUnitTest tests[] = { ISA_PATH_TESTS(test_fp16_paths), ISA_PATH_TESTS(test_int8_paths) };
    return cmocka_run_group_tests_name("engine_compress", tests, NULL, NULL);
}
