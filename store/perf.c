/* perf.c — what a stored run's op table and warnings need beyond its rows: the calibration
 * the run started with and the machine facts it ran on (system_info), read back in one
 * place for `show`, the reports and the workbench's Profile tab. */
#include "internal.h"
#include "../profiler/profiler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A positive finite number stored as text, else 0 (absent: a run stored before the key). */
static double kv_positive(const store_kv *sys, size_t n, const char *key)
{
    const char *v = store_kv_find(sys, n, key);
    char *end;
    double x = v ? strtod(v, &end) : 0;
    return v && end != v && !*end && isfinite(x) && x > 0 ? x : 0;
}

void store_run_perf_get(const store_run *r, const store_kv *sys, size_t n, const store_profile *prof,
                        store_run_perf *out)
{
    memset(out, 0, sizeof *out);
    /* run_profile's peak (written at the end) for runs stored before the start-time keys */
    out->peak_gflops = kv_positive(sys, n, STORE_SYS_CALIB_PEAK);
    if (!(out->peak_gflops > 0) && prof && prof->peak_gflops > 0) out->peak_gflops = prof->peak_gflops;
    out->bw_gbs = kv_positive(sys, n, STORE_SYS_CALIB_BW);
    out->gemm_threads = r ? r->threads : 0;
    const char *core = store_kv_find(sys, n, "blas_core"), *isa = store_kv_find(sys, n, STORE_SYS_CPU_ISA);
    snprintf(out->blas_core, sizeof out->blas_core, "%s", core ? core : "");
    snprintf(out->cpu_isa, sizeof out->cpu_isa, "%s", isa ? isa : "");
}

void store_op_table_init(prof_table *t, const store_op_row *rows, size_t n, const store_profile *prof,
                         const store_run_perf *pf)
{
    prof_table_init(t, rows, n, prof ? (uint64_t)prof->total_self_ns : 0, pf->peak_gflops);
    prof_table_set_bw(t, pf->bw_gbs, 1);
}

int store_run_warnings(const store_op_row *scopes, size_t n, const store_profile *prof, const store_run_perf *pf,
                       char *out, size_t cap)
{
    return prof_perf_warnings(scopes, n, prof ? (uint64_t)prof->total_self_ns : 0, pf->gemm_threads, pf->blas_core,
                         pf->cpu_isa, out, cap);
}

const char *store_run_perf_line(const prof_table *t, const store_run_perf *pf, char *b, size_t cap)
{
    if (!cap) return b;
    b[0] = 0;
    if (!t->show[PROF_COL_BOUND]) return b;
    if (pf->bw_gbs > 0 && pf->peak_gflops > 0)
        snprintf(b, cap, "bound: compute above the ridge point %.3g FLOP/B = %.1f GFLOP/s peak / %.1f GB/s memory "
                 "bandwidth (stored when the run started), else memory", pf->peak_gflops / pf->bw_gbs,
                 pf->peak_gflops, pf->bw_gbs);
    else
        snprintf(b, cap, "%% bw, bound: - (no memory bandwidth stored with this run: it predates that, or the "
                 "machine was not calibrated; nnbench sysinfo --calibrate)");
    return b;
}
