/* internal.h — private to profiler/: what its files share and callers never see. */
#ifndef NNBENCH_PROFILER_INTERNAL_H
#define NNBENCH_PROFILER_INTERNAL_H

#include "profiler.h"

/* mem.c -> profiler.c: n bytes were just allocated (0: a block was freed); live is the
 * process-wide live count after it. */
void prof_internal_charge(size_t n, size_t live);
/* profiler.c -> mem.c: PAPI is initialised, so prof_now_ns may use PAPI_get_real_nsec. */
void prof_internal_clock_use_papi(int on);
/* Initialises PAPI (and registers the SDEs) once per process; 1 if PAPI works, else 0 and
 * *why (if why) says why. */
int prof_internal_papi_ready(const char **why);
/* The clock in use and why ("PAPI_get_real_nsec (25 ns per call)" or the fallback reason). */
const char *prof_internal_clock_note(void);
/* Sets the message prof_error() returns (for sysinfo.c). */
void prof_internal_set_error(const char *msg);

/* Why this machine has no hardware counters, in PAPI's own words (profiler.c). */
void prof_internal_no_counters_reason(char *buf, size_t n);
/* snprintf for messages where cutting a long PAPI string or path short is fine. */
void prof_internal_say(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
