/* sysinfo.c — what PAPI says about this machine (components, counters, presets, the clock)
 * and the CPU model; the calibration is in calib.c. */
#include <errno.h>
#include <stdarg.h>
#include <papi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static void copy(char *dst, size_t n, const char *src) { prof_internal_say(dst, n, "%s", src ? src : ""); }

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
