/* isa.c — which instruction-set path the vectorised kernels run (ops.c activations,
 * sparse.c MaxK / CBSR): one choice for the process, made on first use from NNBENCH_ISA or
 * the CPU (__builtin_cpu_supports), and forced by eng_isa_set so that any machine can run
 * (and test) every path it has. Each kernel file keeps one function per path in a table
 * indexed by eng_isa_current(). */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const isa_names[ENG_ISA_N] = { "generic", "avx2", "avx512" };

/* -1: not resolved yet; otherwise an eng_isa. Read on every kernel call, so relaxed atomics
 * only: every path gives the same bits, a race on the first call costs nothing. */
static int isa_cur = -1;
/* Why NNBENCH_ISA was not honoured ("" when it was, or was unset). */
static char isa_env_err[256];

const char *eng_isa_name(eng_isa isa)
{
    return (unsigned)isa < ENG_ISA_N ? isa_names[isa] : "?";
}

int eng_isa_parse(const char *s, eng_isa *out)
{
    for (int i = 0; i < ENG_ISA_N; i++)
        if (!strcmp(s, isa_names[i])) { *out = (eng_isa)i; return ENG_OK; }
    return eng_fail(ENG_EINVAL, "kernel path '%s': expected generic, avx2 or avx512", s);
}

int eng_isa_available(eng_isa isa)
{
    switch (isa) {
    case ENG_ISA_GENERIC: return 1;
#if ENG_ISA_X86
    case ENG_ISA_AVX2: return !!__builtin_cpu_supports("avx2");
    case ENG_ISA_AVX512: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f");
#else
    case ENG_ISA_AVX2: case ENG_ISA_AVX512: return 0;
#endif
    }
    return 0;
}

/* Why a path is not available here. */
static const char *lack(void)
{
    return ENG_ISA_X86 ? "this CPU lacks its instructions"
                       : "this build lacks it (not x86-64 with GCC/clang, or -DNNBENCH_NO_CLONES)";
}

eng_isa eng_isa_best(void)
{
    for (int i = ENG_ISA_N - 1; i > 0; i--)
        if (eng_isa_available((eng_isa)i)) return (eng_isa)i;
    return ENG_ISA_GENERIC;
}

static eng_isa isa_resolve(void)
{
    eng_isa best = eng_isa_best(), want = best;
    const char *env = getenv("NNBENCH_ISA");
    isa_env_err[0] = 0;
    if (env && *env) {
        if (eng_isa_parse(env, &want))
            snprintf(isa_env_err, sizeof isa_env_err,
                     "NNBENCH_ISA=%.40s: unknown kernel path; use generic, avx2 or avx512 (the widest here is %s)",
                     env, eng_isa_name(best));
        else if (!eng_isa_available(want))
            snprintf(isa_env_err, sizeof isa_env_err,
                     "NNBENCH_ISA=%s: %s; use one of generic..%s, or unset it", env, lack(),
                     eng_isa_name(best));
        if (isa_env_err[0]) want = best;
    }
    __atomic_store_n(&isa_cur, (int)want, __ATOMIC_RELAXED);
    return want;
}

#if ENG_ISA_X86
#include <cpuid.h>
#endif

/* Whether the CPU executes PREFETCHW (CPUID 0x80000001 ECX bit 8). */
static int cpu_has_prfchw(void)
{
#if ENG_ISA_X86
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c >> 8 & 1u);
#else
    return 0;
#endif
}

int eng_prefetchw_on;

/* Read once at load, before any thread of the engine starts. */
__attribute__((constructor)) static void prefetchw_init(void) { eng_prefetchw_on = cpu_has_prfchw(); }

int eng_prefetchw_set(int on)
{
    int v = on < 0 ? cpu_has_prfchw() : on > 0 && cpu_has_prfchw();
    __atomic_store_n(&eng_prefetchw_on, v, __ATOMIC_RELAXED);
    return v;
}

eng_isa eng_isa_current(void)
{
    int c = __atomic_load_n(&isa_cur, __ATOMIC_RELAXED);
    return c >= 0 ? (eng_isa)c : isa_resolve();
}

int eng_isa_init(void)
{
    if (__atomic_load_n(&isa_cur, __ATOMIC_RELAXED) < 0) isa_resolve();
    return isa_env_err[0] ? eng_fail(ENG_EINVAL, "%s", isa_env_err) : ENG_OK;
}

int eng_isa_set(eng_isa isa)
{
    if ((unsigned)isa >= ENG_ISA_N)
        return eng_fail(ENG_EINVAL, "kernel path %d: expected generic, avx2 or avx512", (int)isa);
    if (!eng_isa_available(isa))
        return eng_fail(ENG_EINVAL, "kernel path %s: %s (the widest here is %s)", eng_isa_name(isa), lack(),
                        eng_isa_name(eng_isa_best()));
    isa_env_err[0] = 0;
    __atomic_store_n(&isa_cur, (int)isa, __ATOMIC_RELAXED);
    return ENG_OK;
}

void eng_isa_reset(void)
{
    __atomic_store_n(&isa_cur, -1, __ATOMIC_RELAXED);
}
