/* sysinfo.c — what PAPI says about this machine (components, counters, presets) and the
 * stored peak-sgemm calibration that the profile table's "% peak" column is measured against. */
#include <errno.h>
#include <stdarg.h>
#include <papi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

static void copy(char *dst, size_t n, const char *src) { prof_internal_say(dst, n, "%s", src ? src : ""); }

__attribute__((format(printf, 1, 2)))
static void set_err(const char *fmt, ...)
{
    /* prof_error() reads the message through the profiler's thread-local buffer. */
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    prof_internal_set_error(msg);
}

int prof_calibration_load(prof_calibration *c)
{
    memset(c, 0, sizeof *c);
    char path[512];
    if (prof_calibration_path(path, sizeof path)) return 1;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return 1;
        set_err("profiler: cannot read calibration '%s': %s", path, strerror(errno));
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
        else if (!strcmp(key, "core")) copy(c->core, sizeof c->core, val);
        else if (!strcmp(key, "when")) copy(c->when, sizeof c->when, val);
    }
    fclose(f);
    if (bad || !(c->peak_gflops > 0)) {
        if (bad)
            set_err("profiler: calibration '%s' line %d is not 'key = value'; rerun "
                    "nnbench sysinfo --calibrate", path, bad);
        else
            set_err("profiler: calibration '%s' has no positive peak_gflops; rerun "
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
        set_err("profiler: no place for the calibration: set XDG_CACHE_HOME or HOME");
        return -1;
    }
    if (mkdirs(path)) {
        set_err("profiler: cannot create the directory of '%s': %s", path, strerror(errno));
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        set_err("profiler: cannot write calibration '%s': %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "# nnbench calibration: best cblas_sgemm rate of this machine (nnbench sysinfo --calibrate)\n"
               "peak_gflops = %.3f\nmean_gflops = %.3f\nm = %d\nn = %d\nk = %d\nreps = %d\n"
               "threads = %d\ncore = %s\nwhen = %s\n",
            c->peak_gflops, c->mean_gflops, c->m, c->n, c->k, c->reps, c->threads, c->core, c->when);
    int werr = ferror(f);
    if (fclose(f) || werr || rename(tmp, path)) {
        set_err("profiler: writing calibration '%s' failed: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The one /proc/cpuinfo parser: the first "model name" line. */
int prof_cpu_model(char *out, size_t cap)
{
    if (cap) out[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon || strncmp(line, "model name", 10)) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        colon[strcspn(colon, "\n")] = 0;
        copy(out, cap, colon);
        found = 1;
    }
    fclose(f);
    return found ? 0 : -1;
}

static void cpuinfo_fallback(prof_sysinfo *s)
{
    s->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    prof_cpu_model(s->cpu_model, sizeof s->cpu_model);
}

int prof_sysinfo_get(prof_sysinfo *s)
{
    memset(s, 0, sizeof *s);
    const char *why = NULL;
    cpuinfo_fallback(s);
    copy(s->clock, sizeof s->clock, prof_internal_clock_note());
    if (!prof_internal_papi_ready(&why)) {
        copy(s->papi_error, sizeof s->papi_error, why);
        copy(s->no_counters_reason, sizeof s->no_counters_reason, why);
        prof_internal_counters_probe(&s->hw_usable, &s->sw_usable, s->hw_note, sizeof s->hw_note,
                                     s->sw_note, sizeof s->sw_note);
        return -1;
    }
    s->papi_ok = 1;
    snprintf(s->papi_version, sizeof s->papi_version, "%d.%d.%d.%d",
             PAPI_VERSION_MAJOR(PAPI_VERSION), PAPI_VERSION_MINOR(PAPI_VERSION),
             PAPI_VERSION_REVISION(PAPI_VERSION), PAPI_VERSION_INCREMENT(PAPI_VERSION));
    const PAPI_hw_info_t *hw = PAPI_get_hardware_info();
    if (hw) {
        /* /proc/cpuinfo's model name is more specific than PAPI's in VMs ("AMD EPYC"). */
        if (!s->cpu_model[0]) copy(s->cpu_model, sizeof s->cpu_model, hw->model_string);
        copy(s->vendor, sizeof s->vendor, hw->vendor_string);
        s->cores = hw->totalcpus > 0 ? hw->totalcpus : s->cores;
        s->threads_per_core = hw->threads;
        s->sockets = hw->sockets;
        s->mhz = hw->cpu_max_mhz;
        s->in_vm = hw->virtualized;
        copy(s->vm_vendor, sizeof s->vm_vendor, hw->virtual_vendor_string);
        for (size_t n = strlen(s->vm_vendor); n && s->vm_vendor[n - 1] == ' '; n--) s->vm_vendor[n - 1] = 0;
    }
    int nc = PAPI_num_components();
    for (int i = 0; i < nc && s->n_components < 16; i++) {
        const PAPI_component_info_t *ci = PAPI_get_component_info(i);
        if (!ci) continue;
        prof_component *c = &s->components[s->n_components++];
        copy(c->name, sizeof c->name, ci->name);
        copy(c->description, sizeof c->description, ci->description);
        c->disabled = ci->disabled;
        copy(c->disabled_reason, sizeof c->disabled_reason, ci->disabled ? ci->disabled_reason : "");
        c->counters = ci->disabled ? 0 : ci->num_cntrs;
        c->native_events = ci->num_native_events;
        c->preset_events = ci->num_preset_events;
        /* Only CPU components count as hardware counters (the sde component has "counters" too). */
        if (!ci->disabled && !strcmp(ci->name, "perf_event")) s->hw_counters += ci->num_cntrs;
    }
    if (s->hw_counters == 0) {
        prof_internal_no_counters_reason(s->no_counters_reason, sizeof s->no_counters_reason);
    }
    /* Listed is not usable (a VM without a PMU lists counters and can add no event): say
     * what the profiler's default set really gets, by setting it up the same way. */
    prof_internal_counters_probe(&s->hw_usable, &s->sw_usable, s->hw_note, sizeof s->hw_note,
                                 s->sw_note, sizeof s->sw_note);
    /* A preset "works" when it can be added to an event set on this machine. */
    int code = PAPI_PRESET_MASK;
    if (PAPI_enum_event(&code, PAPI_ENUM_FIRST) == PAPI_OK) {
        do {
            if (PAPI_query_event(code) != PAPI_OK) continue;
            int es = PAPI_NULL;
            if (PAPI_create_eventset(&es) != PAPI_OK) break;
            if (PAPI_add_event(es, code) == PAPI_OK) {
                char name[PAPI_MAX_STR_LEN];
                if (PAPI_event_code_to_name(code, name) == PAPI_OK) {
                    size_t len = strlen(s->presets_available);
                    snprintf(s->presets_available + len, sizeof s->presets_available - len, "%s%s",
                             len ? "," : "", name);
                    s->n_presets_available++;
                }
            }
            PAPI_cleanup_eventset(es);
            PAPI_destroy_eventset(&es);
        } while (PAPI_enum_event(&code, PAPI_ENUM_EVENTS) == PAPI_OK);
    }
    return 0;
}
