/* gemm_core.c — the OpenBLAS core: Debian's OpenBLAS 0.3.21 does not know CPUs newer than
 * itself and runs its generic SSE kernels there (4-6x slower), while some machines set
 * OPENBLAS_CORETYPE because a core computes wrong results or crashes on them. So a core is
 * verified on the machine (GEMM against a double reference, dgemm and a Cholesky through
 * LAPACK) in a child process, timed, and the program re-executes itself with the fastest
 * one — only when the user has not set OPENBLAS_CORETYPE. Cached per CPU model and OpenBLAS
 * version in the cache directory, file openblas-core (eng_choice_get/put). */
#include "gemm_internal.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static char core_note[400];

const char *eng_openblas_core_note(void) { return core_note; }

/* The shapes a core is judged on: the Fashion MLP step's at batch 128, and one square. */
static const eng_gemm_shape core_shapes[] = {
    { 0, 0, 128, 256, 784, 1 }, { 1, 0, 784, 256, 128, 1 }, { 0, 1, 128, 784, 256, 1 },
    { 0, 0, 128, 128, 256, 1 }, { 0, 0, 512, 512, 512, 1 },
};
#define N_CORE_SHAPES ((int)(sizeof core_shapes / sizeof core_shapes[0]))

/* CPU model + OpenBLAS version: what decides which cores exist and work. */
static void core_key(char *buf, size_t cap)
{
    char cpu[200], ver[64] = "";
    if (prof_cpu_model(cpu, sizeof cpu)) snprintf(cpu, sizeof cpu, "unknown");
    sscanf(openblas_get_config(), "%*s %63s", ver);
    snprintf(buf, cap, "%s|openblas-%s", cpu, ver);
    for (char *p = buf; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == ' ') *p = '_';
}

/* The cached choice for this machine (eng_choice_get: file openblas-core): 1 found. */
static int core_cache_get(char *core, size_t cap, double *best, double *loaded)
{
    char key[400], val[160], c[64];
    core_key(key, sizeof key);
    if (!eng_choice_get("openblas-core", key, val, sizeof val) || sscanf(val, "%63s %lf %lf", c, best, loaded) != 3)
        return 0;
    snprintf(core, cap, "%s", c);
    return 1;
}

static void core_cache_put(const char *core, double best, double loaded)
{
    char key[400], val[160];
    core_key(key, sizeof key);
    snprintf(val, sizeof val, "%.63s %.3f %.3f", core, best, loaded);
    eng_choice_put("openblas-core", key, val);
}

/* Candidate cores for this CPU, comma-separated. */
static void candidates(char *buf, size_t cap)
{
    const char *env = getenv("NNBENCH_OPENBLAS_CANDIDATES");
    if (env && *env) { snprintf(buf, cap, "%s", env); return; }
    buf[0] = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    size_t n = 0;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        n += (size_t)snprintf(buf + n, cap - n, "SkylakeX,Cooperlake,");
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "Haswell,Zen,");
    if (n && n <= cap) buf[n - 1] = 0;
#endif
}

/* Verifies and times the core shapes (and LAPACK) on `core` (NULL: as loaded); the rate
 * over all shapes in GFLOP/s, 0 when any check failed; the core the child reported. */
static double core_rate(const char *core, char *ran, size_t cap, const char **why)
{
    eng_gemm_result res[N_CORE_SHAPES][ENG_GEMM_NB];
    const int want[ENG_GEMM_NB] = { [ENG_GEMM_OPENBLAS] = 1 };
    ran[0] = 0;
    *why = "could not be started";
    if (eng_gemm_probe(want, core, 1, core_shapes, N_CORE_SHAPES, res, ran, cap)) return 0;
    double flops = 0, secs = 0;
    for (int i = 0; i < N_CORE_SHAPES; i++) {
        const eng_gemm_shape *s = &core_shapes[i];
        const eng_gemm_result *r = &res[i][ENG_GEMM_OPENBLAS];
        if (r->status != ENG_GEMM_OK) {
            static const char *const w[] = { "", "computed wrong results", "was refused", "crashed", "hung" };
            *why = (int)r->status < 0 ? "was not checked" : w[r->status];
            return 0;
        }
        double f = 2.0 * s->M * (double)s->N * s->K;
        flops += f;
        secs += f / (r->gflops * 1e9);
    }
    if (core && strcasecmp(ran, core)) { *why = "is not known to this OpenBLAS"; return 0; }
    if (eng_gemm_probe_lapack(core)) { *why = "failed its LAPACK check"; return 0; }
    return flops / secs / 1e9;
}

/* Measures the as-loaded core and each candidate; the best into best/cap. */
static void core_measure(int include_loaded, char *best, size_t cap, double *best_rate, double *loaded_rate)
{
    char list[200], ran[64];
    const char *why;
    *best_rate = *loaded_rate = 0;
    best[0] = 0;
    if (include_loaded) {
        *loaded_rate = core_rate(NULL, ran, sizeof ran, &why);
        if (*loaded_rate > 0) snprintf(best, cap, "%s", ran), *best_rate = *loaded_rate;
    }
    candidates(list, sizeof list);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        double r = core_rate(tok, ran, sizeof ran, &why);
        /* a candidate must beat the loaded core clearly: a re-exec is not free */
        if (r > 0 && r > *best_rate * (best[0] && include_loaded ? 1.05 : 1.0)) snprintf(best, cap, "%s", ran), *best_rate = r;
    }
}

static void reexec(char **argv, const char *core)
{
    setenv("OPENBLAS_CORETYPE", core, 1);
    setenv("NNBENCH_OPENBLAS_CHOSE", core, 1);
    char exe[4096];
    eng_self_exe(exe, sizeof exe);
    fflush(NULL);
    execv(exe, argv);
    /* exec failed: go on with the core as loaded */
    unsetenv("OPENBLAS_CORETYPE");
    snprintf(core_note, sizeof core_note, "%s as loaded: re-executing with %s failed", openblas_get_corename(), core);
}

void eng_openblas_core_select(char **argv)
{
    const char *set = getenv("OPENBLAS_CORETYPE"), *chose = getenv("NNBENCH_OPENBLAS_CHOSE");
    const char *mode = getenv("NNBENCH_OPENBLAS_SELECT");
    int force = mode && !strcmp(mode, "force");
    if (chose && *chose) {
        snprintf(core_note, sizeof core_note, "%s, chosen by nnbench (verified and fastest on this CPU)",
                 openblas_get_corename());
        return;
    }
    if (set && *set && !force) {
        snprintf(core_note, sizeof core_note, "%s, as set by OPENBLAS_CORETYPE=%s (respected)", openblas_get_corename(), set);
        return;
    }
    if (mode && !strcmp(mode, "off")) {
        snprintf(core_note, sizeof core_note, "%s as loaded (NNBENCH_OPENBLAS_SELECT=off)", openblas_get_corename());
        return;
    }
    char best[64];
    double rb, rl;
    if (!core_cache_get(best, sizeof best, &rb, &rl) || force) {
        core_measure(!force, best, sizeof best, &rb, &rl);
        if (!best[0]) {
            snprintf(core_note, sizeof core_note, "%s as loaded (no candidate core passed its check)", openblas_get_corename());
            return;
        }
        if (!force) core_cache_put(best, rb, rl);
    }
    if (strcasecmp(best, openblas_get_corename()) || force) reexec(argv, best);
    else snprintf(core_note, sizeof core_note, "%s as loaded (the fastest verified core here)", openblas_get_corename());
}
