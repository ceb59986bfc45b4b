/* calib.c — the stored peak-sgemm calibration (nnbench sysinfo --calibrate) that the profile
 * table's "% peak" column is measured against: where it lives, reading it, writing it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

int prof_calibration_path(char *buf, size_t n)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int len;
    if (xdg && *xdg) len = snprintf(buf, n, "%s/nnbench/calibration", xdg);
    else if (home && *home) len = snprintf(buf, n, "%s/.cache/nnbench/calibration", home);
    else return -1;
    return len > 0 && (size_t)len < n ? 0 : -1;
}

int prof_calibration_load(prof_calibration *c)
{
    memset(c, 0, sizeof *c);
    char path[512];
    if (prof_calibration_path(path, sizeof path)) return 1;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return 1;
        prof_internal_errorf("profiler: cannot read calibration '%s': %s", path, strerror(errno));
        return -1;
    }
    char line[256];
    int lineno = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        char key[64], val[128];
        if (sscanf(line, " %63[a-z_] = %127[^\n]", key, val) != 2) { bad = lineno; break; }
        if (!strcmp(key, "peak_gflops")) c->peak_gflops = atof(val);
        else if (!strcmp(key, "mean_gflops")) c->mean_gflops = atof(val);
        else if (!strcmp(key, "m")) c->m = atoi(val);
        else if (!strcmp(key, "n")) c->n = atoi(val);
        else if (!strcmp(key, "k")) c->k = atoi(val);
        else if (!strcmp(key, "reps")) c->reps = atoi(val);
        else if (!strcmp(key, "threads")) c->threads = atoi(val);
        else if (!strcmp(key, "core")) prof_internal_say(c->core, sizeof c->core, "%s", val);
        else if (!strcmp(key, "when")) prof_internal_say(c->when, sizeof c->when, "%s", val);
        else if (!strcmp(key, "bw_gbs")) c->bw_gbs = atof(val);
        else if (!strcmp(key, "bw_mib")) c->bw_mib = atoi(val);
    }
    fclose(f);
    if (bad || !(c->peak_gflops > 0)) {
        if (bad)
            prof_internal_errorf("profiler: calibration '%s' line %d is not 'key = value'; rerun "
                    "nnbench sysinfo --calibrate", path, bad);
        else
            prof_internal_errorf("profiler: calibration '%s' has no positive peak_gflops; rerun "
                    "nnbench sysinfo --calibrate", path);
        memset(c, 0, sizeof *c);
        return -1;
    }
    return 0;
}

static int mkdirs(char *path)
{
    for (char *s = path + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        int rc = mkdir(path, 0755);
        *s = '/';
        if (rc && errno != EEXIST) return -1;
    }
    return 0;
}

int prof_calibration_save(const prof_calibration *c)
{
    char path[512], tmp[540];
    if (prof_calibration_path(path, sizeof path)) {
        prof_internal_errorf("profiler: no place for the calibration: set XDG_CACHE_HOME or HOME");
        return -1;
    }
    if (mkdirs(path)) {
        prof_internal_errorf("profiler: cannot create the directory of '%s': %s", path, strerror(errno));
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        prof_internal_errorf("profiler: cannot write calibration '%s': %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "# nnbench calibration: best cblas_sgemm rate of this machine (nnbench sysinfo --calibrate)\n"
               "peak_gflops = %.3f\nmean_gflops = %.3f\nm = %d\nn = %d\nk = %d\nreps = %d\n"
               "threads = %d\ncore = %s\nwhen = %s\nbw_gbs = %.3f\nbw_mib = %d\n",
            c->peak_gflops, c->mean_gflops, c->m, c->n, c->k, c->reps, c->threads, c->core, c->when,
            c->bw_gbs, c->bw_mib);
    int werr = ferror(f);
    if (fclose(f) || werr || rename(tmp, path)) {
        prof_internal_errorf("profiler: writing calibration '%s' failed: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}


int prof_membw_measure(int mib, int reps, double *best_gbs)
{
    *best_gbs = 0;
    if (mib < 1 || reps < 1) {
        prof_internal_errorf("profiler: memory bandwidth: %d MiB x %d reps: both must be >= 1", mib, reps);
        return -1;
    }
    size_t n = (size_t)mib * 1024 * 1024 / sizeof(float);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) {
        free(a); free(b); free(c);
        prof_internal_errorf("profiler: memory bandwidth: cannot allocate 3 x %d MiB", mib);
        return -1;
    }
    /* touch every page first so that page faults are not timed as bandwidth */
    for (size_t i = 0; i < n; i++) { a[i] = 0.0f; b[i] = 1.0f; c[i] = 2.0f; }
    volatile float scalar = 3.0f;  /* not a constant the compiler could fold */
    float s = scalar;
    double best = 0;
    for (int r = 0; r <= reps; r++) {  /* rep 0 warms up and is not counted */
        double t0 = prof_now_s();
        for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        double dt = prof_now_s() - t0;
        double gbs = dt > 0 ? 3.0 * (double)n * sizeof(float) / dt / 1e9 : 0;
        if (r > 0 && gbs > best) best = gbs;
    }
    /* read the result back so the triad is not dead code */
    volatile float sink = a[n / 2] + a[n - 1];
    (void)sink;
    free(a); free(b); free(c);
    if (!(best > 0)) {
        prof_internal_errorf("profiler: memory bandwidth: the clock did not advance over %d MiB", mib);
        return -1;
    }
    *best_gbs = best;
    return 0;
}
