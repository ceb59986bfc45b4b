/* cmd_sysinfo.c — `nnbench sysinfo [--calibrate] [--json]`: CPU, PAPI components and which
 * counters work (and why not), BLAS core and threads; --calibrate measures peak sgemm GFLOP/s. */
#include <cblas.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void cmd_sysinfo_help(FILE *f)
{
    fprintf(f, "usage: nnbench sysinfo [--calibrate [--size N] [--reps N]] [--json]\n\n"
               "Shows the CPU, the PAPI version and components, how many hardware counters\n"
               "PAPI lists, which hardware and software events the profiler can really count\n"
               "(and, if none, why not), the BLAS library, core and threads, and the stored\n"
               "calibration.\n\n"
               "  --calibrate  time an N x N x N sgemm (default 1024) REPS times (default 10) on\n"
               "               the fastest verified backend, keep the best rate as this machine's\n"
               "               peak GFLOP/s (the profile table's \"%% peak\" column), saved in\n"
               "               $XDG_CACHE_HOME/nnbench/calibration (or ~/.cache/nnbench/calibration);\n"
               "               and redo the GEMM backend choice: forget the cached choices of this\n"
               "               machine and measure the Fashion MLP's shapes at 1..threads threads;\n"
               "               and measure memory bandwidth (one-thread STREAM triad over three\n"
               "               64 MiB buffers, best of 5, GB/s), kept in the same file\n"
               "  --json       the same as one JSON object\n");
}

/* Triad buffers of 64 MiB each (192 MiB in all): far beyond any last-level cache of today,
 * so the triad streams from DRAM. */
enum { SYSINFO_BW_MIB = 64, SYSINFO_BW_REPS = 5 };

/* Best and mean rate of n^3 sgemm over reps (after one warm-up call), through the engine's
 * GEMM entry point: the backend chosen for that shape class on this machine. */
static int calibrate(int n, int reps, prof_calibration *c)
{
    char backend[32];
    memset(c, 0, sizeof *c);
    int threads = openblas_get_num_threads();
    if (eng_gemm_square_rate(n, reps, threads, &c->peak_gflops, &c->mean_gflops, backend, sizeof backend)) {
        fprintf(stderr, "nnbench sysinfo: %s\n", cli_text(eng_error()));
        return 1;
    }
    c->m = c->n = c->k = n;
    c->reps = reps;
    c->threads = threads;
    if (strcmp(backend, "openblas")) snprintf(c->core, sizeof c->core, "%.20s", backend);
    else snprintf(c->core, sizeof c->core, "openblas %.20s", openblas_get_corename());
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(c->when, sizeof c->when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    c->bw_mib = SYSINFO_BW_MIB;
    if (prof_membw_measure(c->bw_mib, SYSINFO_BW_REPS, &c->bw_gbs)) {
        fprintf(stderr, "nnbench sysinfo: %s\n", cli_text(prof_error()));
        return 1;
    }
    return 0;
}

/* Where two threads of a process run here, measured when sysinfo runs (before any
 * calibration leaves OpenBLAS's threads spinning); one CPU: nothing to measure. */
typedef struct {
    int cpus;
    double ns;        /* prof_core_round_trip_ns; NAN when not measured */
    char text[256];   /* prof_placement_text */
} placement_fact;

static void placement_measure(placement_fact *f)
{
    f->cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    f->ns = f->cpus > 1 ? prof_core_round_trip_ns(2000) : NAN;
    if (f->cpus > 1) prof_placement_text(f->ns, f->text, sizeof f->text);
    else snprintf(f->text, sizeof f->text, "one CPU online: threads share it");
}

static void print_json(const prof_sysinfo *si, int have_cal, const prof_calibration *cal,
                       const char *cal_path, const char *coretype, const placement_fact *pl)
{
    prof_json j;
    prof_json_begin(&j, stdout, 0);
    prof_json_object(&j);
    prof_json_key(&j, "cpu");
    prof_json_object(&j);
    prof_json_kstr(&j, "model", si->cpu_model);
    prof_json_kstr(&j, "vendor", si->vendor);
    prof_json_kint(&j, "cores", si->cores);
    prof_json_kint(&j, "sockets", si->sockets);
    prof_json_kint(&j, "mhz", si->mhz);
    prof_json_key(&j, "vm");
    prof_json_bool(&j, si->in_vm);
    prof_json_kstr(&j, "vm_vendor", si->vm_vendor);
    prof_json_close(&j);
    prof_json_key(&j, "papi");
    prof_json_object(&j);
    prof_json_key(&j, "ok");
    prof_json_bool(&j, si->papi_ok);
    prof_json_kstr(&j, "version", si->papi_version);
    prof_json_kstr(&j, "error", si->papi_error);
    prof_json_kint(&j, "hw_counters", si->hw_counters);
    prof_json_kstr(&j, "no_counters_reason", si->hw_counters ? "" : si->no_counters_reason);
    prof_json_kint(&j, "hw_events_usable", si->hw_usable);
    prof_json_kstr(&j, "hw_events", si->hw_note);
    prof_json_kint(&j, "sw_events_usable", si->sw_usable);
    prof_json_kstr(&j, "sw_events", si->sw_note);
    prof_json_key(&j, "presets_available");
    prof_json_array(&j);
    char presets[512];
    snprintf(presets, sizeof presets, "%s", si->presets_available);
    for (char *save = NULL, *t = strtok_r(presets, ",", &save); t; t = strtok_r(NULL, ",", &save))
        prof_json_str(&j, t);
    prof_json_close(&j);
    prof_json_kstr(&j, "clock", si->clock);
    prof_json_key(&j, "components");
    prof_json_array(&j);
    for (int i = 0; i < si->n_components; i++) {
        const prof_component *c = &si->components[i];
        prof_json_object(&j);
        prof_json_kstr(&j, "name", c->name);
        prof_json_kstr(&j, "description", c->description);
        prof_json_key(&j, "enabled");
        prof_json_bool(&j, !c->disabled);
        prof_json_kstr(&j, "disabled_reason", c->disabled_reason);
        prof_json_kint(&j, "counters", c->counters);
        prof_json_kint(&j, "native_events", c->native_events);
        prof_json_close(&j);
    }
    prof_json_close(&j);
    prof_json_close(&j);
    prof_json_key(&j, "blas");
    prof_json_object(&j);
    prof_json_kstr(&j, "library", "OpenBLAS");
    prof_json_kstr(&j, "config", openblas_get_config());
    prof_json_kstr(&j, "core", openblas_get_corename());
    prof_json_kint(&j, "threads", openblas_get_num_threads());
    prof_json_kstr(&j, "OPENBLAS_CORETYPE", coretype);
    prof_json_kstr(&j, "core_choice", eng_openblas_core_note());
    prof_json_close(&j);
    char gemm[2048];
    eng_gemm_cached(gemm, sizeof gemm);
    prof_json_kstr(&j, "gemm", gemm);
    eng_mpi_transport_cached(gemm, sizeof gemm);
    prof_json_kstr(&j, "mpi_transport", gemm);
    prof_json_key(&j, "placement");
    prof_json_object(&j);
    prof_json_kint(&j, "cpus", pl->cpus);
    prof_json_key(&j, "round_trip_ns");
    if (isnan(pl->ns)) prof_json_null(&j);
    else prof_json_numg(&j, pl->ns, 4);
    prof_json_kstr(&j, "class", pl->cpus > 1 ? prof_placement_class(pl->ns) : "one cpu");
    prof_json_kstr(&j, "text", pl->text);
    prof_json_close(&j);
    prof_json_key(&j, "calibration");
    if (!have_cal) {
        prof_json_null(&j);
    } else {
        prof_json_object(&j);
        prof_json_kstr(&j, "path", cal_path);
        prof_json_key(&j, "peak_gflops");
        prof_json_numg(&j, cal->peak_gflops, 6);
        prof_json_key(&j, "mean_gflops");
        prof_json_numg(&j, cal->mean_gflops, 6);
        prof_json_kint(&j, "m", cal->m);
        prof_json_kint(&j, "n", cal->n);
        prof_json_kint(&j, "k", cal->k);
        prof_json_kint(&j, "reps", cal->reps);
        prof_json_kint(&j, "threads", cal->threads);
        prof_json_kstr(&j, "core", cal->core);
        prof_json_kstr(&j, "when", cal->when);
        prof_json_key(&j, "bw_gbs");
        prof_json_numg(&j, cal->bw_gbs, 6);
        prof_json_kint(&j, "bw_mib", cal->bw_mib);
        prof_json_close(&j);
    }
    prof_json_close(&j);
    prof_json_end(&j);
}

static void print_text(const prof_sysinfo *si, int have_cal, const prof_calibration *cal,
                       const char *cal_path, const char *coretype, const placement_fact *pl)
{
    printf("CPU:         %s", si->cpu_model[0] ? si->cpu_model : "(unknown)");
    if (si->vendor[0]) printf(" (%s)", si->vendor);
    printf("\n             %d cores", si->cores);
    if (si->sockets) printf(", %d socket(s), %d thread(s) per core", si->sockets, si->threads_per_core);
    if (si->mhz) printf(", %d MHz", si->mhz);
    if (si->in_vm) printf(", virtual machine (%s)", si->vm_vendor[0] ? si->vm_vendor : "unknown vendor");
    printf("\n");
    if (!si->papi_ok) {
        printf("PAPI:        unavailable: %s\n", si->papi_error);
    } else {
        printf("PAPI:        %s, %d components\n", si->papi_version, si->n_components);
        for (int i = 0; i < si->n_components; i++) {
            const prof_component *c = &si->components[i];
            printf("  %-18s ", c->name);
            if (c->disabled) printf("disabled: %s\n", c->disabled_reason);
            else printf("enabled, %d counters, %d native events\n", c->counters, c->native_events);
        }
    }
    printf("Hardware counters listed by PAPI: %d", si->hw_counters);
    if (!si->hw_counters) printf(" (%s)", si->no_counters_reason);
    /* What the profiler's default set really counts (listed counters may all be unusable). */
    printf("\nCounted: %s\n         %s\n", si->hw_note, si->sw_note);
    printf("         cpu: the process CPU clock (every thread), around each scope (every Nth call of short ones)\n");
    printf("Preset events that work: %s\n", si->n_presets_available ? si->presets_available : "none");
    printf("Clock:       %s\n", si->clock);
    printf("Software counters (PAPI SDE): sde:::nnbench::flops, bytes, live_bytes, peak_bytes, alloc_bytes\n");
    printf("BLAS:        OpenBLAS (%s)\n             core %s, %d threads, OPENBLAS_CORETYPE=%s\n",
           openblas_get_config(), openblas_get_corename(), openblas_get_num_threads(),
           coretype[0] ? coretype : "(unset)");
    printf("             core choice: %s\n", eng_openblas_core_note());
    char gemm[2048];
    eng_gemm_cached(gemm, sizeof gemm);
    printf("GEMM:        fp32 backends openblas, onednn; per shape class the fastest that passed its check\n");
    for (char *line = strtok(gemm, "\n"); line; line = strtok(NULL, "\n")) printf("             %s\n", line);
    /* the engine's vectorised kernels (engine/isa.c): the path in use, and why */
    const char *forced = getenv("NNBENCH_ISA");
    int isa_bad = eng_isa_init();
    printf("Kernels:     %s (widest here: %s; %s)\n", eng_isa_name(eng_isa_current()), eng_isa_name(eng_isa_best()),
           isa_bad ? eng_error() : forced && *forced ? "forced by NNBENCH_ISA" : "NNBENCH_ISA unset");
    printf("Placement:   %s\n", pl->text);
    eng_mpi_transport_cached(gemm, sizeof gemm);
    printf("MPI:         shared-memory transport of data-parallel ranks, the fastest that passed its check\n");
    for (char *line = strtok(gemm, "\n"); line; line = strtok(NULL, "\n")) printf("             %s\n", line);
    if (have_cal)
        printf("Calibration: peak sgemm %.1f GFLOP/s (mean %.1f), %dx%dx%d, best of %d, %d threads, "
               "core %s, %s\n             %s\n", cal->peak_gflops, cal->mean_gflops, cal->m, cal->n,
               cal->k, cal->reps, cal->threads, cal->core, cal->when, cal_path);
    if (have_cal && cal->bw_gbs > 0)
        printf("             memory bandwidth %.1f GB/s (STREAM triad, 1 thread, 3 x %d MiB)\n", cal->bw_gbs, cal->bw_mib);
    else if (have_cal)
        printf("             memory bandwidth: not measured (rerun nnbench sysinfo --calibrate)\n");
    else
        printf("Calibration: none (nnbench sysinfo --calibrate measures the peak sgemm rate)\n");
}

typedef struct { int calibrate, json, size, reps; } sysinfo_opts;

/* --size N (1..8192) and --reps N (1..1000): the calibration's sgemm. */
static int sysinfo_int(void *opts, const char *cmd, const char *name, char **vals)
{
    sysinfo_opts *o = opts;
    int size = !strcmp(name, "--size"), max = size ? 8192 : 1000;
    char *end;
    long v = strtol(vals[0], &end, 10);
    if (*end || v < 1 || v > max) {
        fprintf(stderr, "nnbench %s: %s '%s': expected an integer in 1..%d\n", cmd, name, vals[0], max);
        return 2;
    }
    if (size) o->size = (int)v;
    else o->reps = (int)v;
    return 0;
}

static const cli_opt sysinfo_opt[] = {
    CLI_OPT_FLAG("--calibrate", NULL, sysinfo_opts, calibrate), CLI_OPT_FLAG("--json", NULL, sysinfo_opts, json),
    CLI_OPT_CALL("--size", sysinfo_int, 1), CLI_OPT_CALL("--reps", sysinfo_int, 1),
};
const cli_spec cmd_sysinfo_spec = { "sysinfo", cmd_sysinfo_help, sysinfo_opt, CLI_N(sysinfo_opt) };

int cmd_sysinfo(int argc, char **argv)
{
    sysinfo_opts o = { .size = 1024, .reps = 10 };
    int n_pos, rc = cli_parse(&cmd_sysinfo_spec, &o, argc, argv, &n_pos);
    if (rc >= 0) return rc;
    if (n_pos) {
        fprintf(stderr, "nnbench sysinfo: unexpected argument '%s' (see nnbench sysinfo --help)\n", argv[1]);
        return 2;
    }
    int do_cal = o.calibrate, json = o.json, size = o.size, reps = o.reps;
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    if (!coretype) coretype = "";
    prof_calibration cal;
    char cal_path[512] = "";
    prof_calibration_path(cal_path, sizeof cal_path);
    placement_fact pl;
    placement_measure(&pl);
    if (do_cal) {
        if (!json)
            fprintf(stderr, "calibrating: the GEMM backends on the Fashion MLP's shapes, then sgemm %dx%dx%d, %d reps, "
                    "%d threads ...\n", size, size, size, reps, openblas_get_num_threads());
        char lines[1024];
        if (eng_gemm_calibrate(openblas_get_num_threads(), lines, sizeof lines)) {
            fprintf(stderr, "nnbench sysinfo: %s\n", cli_text(eng_error()));
            return 1;
        }
        if (!json) fputs(lines, stdout);
        if (calibrate(size, reps, &cal)) return 1;
        if (prof_calibration_save(&cal)) {
            fprintf(stderr, "nnbench sysinfo: %s\n", cli_text(prof_error()));
            return 1;
        }
    }
    rc = prof_calibration_load(&cal);
    if (rc < 0) fprintf(stderr, "nnbench sysinfo: %s\n", cli_text(prof_error()));
    prof_sysinfo si;
    prof_sysinfo_get(&si);
    if (json) print_json(&si, rc == 0, &cal, cal_path, coretype, &pl);
    else print_text(&si, rc == 0, &cal, cal_path, coretype, &pl);
    return 0;
}
