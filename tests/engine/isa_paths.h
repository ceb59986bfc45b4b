/* isa_paths.h (tests) — runs a kernel test once per instruction-set path (engine/isa.c):
 * ISA_PATH_TESTS(fn) lists fn three times, named "fn (generic)", "fn (avx2)", "fn (avx512)",
 * each with its path as the test's state; isa_force_or_skip forces that path, or skips the
 * test (CMocka skip) saying which instructions this CPU lacks. */
#ifndef NNBENCH_TESTS_ENGINE_ISA_PATHS_H
#define NNBENCH_TESTS_ENGINE_ISA_PATHS_H

#include <stdio.h>

#include "../../engine/engine.h"

static eng_isa isa_path_ids[ENG_ISA_N] = { ENG_ISA_GENERIC, ENG_ISA_AVX2, ENG_ISA_AVX512 };

#define ISA_PATH_TESTS(fn)                                                  \
    { #fn " (generic)", fn, NULL, NULL, &isa_path_ids[ENG_ISA_GENERIC] },   \
    { #fn " (avx2)", fn, NULL, NULL, &isa_path_ids[ENG_ISA_AVX2] },         \
    { #fn " (avx512)", fn, NULL, NULL, &isa_path_ids[ENG_ISA_AVX512] }

/* Forces the path in *state; returns the path in use before (restore it with eng_isa_set
 * at the end). A path this CPU lacks skips the test. */
static inline eng_isa isa_force_or_skip(void **state)
{
    eng_isa want = *(const eng_isa *)*state, before = eng_isa_current();
    if (!eng_isa_available(want)) {
        printf("  skipped: path %s is not available here (%s); the widest here is %s\n", eng_isa_name(want),
               eng_isa_set(want) ? eng_error() : "?", eng_isa_name(eng_isa_best()));
        skip();
    }
    assert_int_equal(eng_isa_set(want), ENG_OK);
    assert_int_equal(eng_isa_current(), want);
    return before;
}

/* Runs one kernel call under a path, then goes back to the path of the test. */
#define ISA_UNDER(isa, call)                                                \
    do {                                                                    \
        eng_isa isa_back_ = eng_isa_current();                              \
        assert_int_equal(eng_isa_set(isa), ENG_OK);                         \
        call;                                                               \
        assert_int_equal(eng_isa_set(isa_back_), ENG_OK);                   \
    } while (0)

#endif
