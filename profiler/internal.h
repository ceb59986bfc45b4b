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
/* Test hook: while set, prof_now_ns returns *wall and the process CPU clock reads *cpu
 * (both advanced by the test), as a real read would: each read adds cpu_read_ns to *cpu
 * and returns the value halfway through. Profilers created meanwhile take cpu_read_ns as
 * the cost of one read (it sets how often short scopes read it). NULL, NULL restores the
 * real clocks. Single-threaded tests only. */
void prof_internal_fake_clocks(const volatile uint64_t *wall, volatile uint64_t *cpu, double cpu_read_ns);
/* Test hook: every later call of every scope of p is a sampled one (reads the CPU clock
 * and, where faults/csw come from it, getrusage), as scopes longer than the gap are. */
void prof_internal_sample_every_call(prof_t *p);
/* profiler.c -> mem.c: the wall clock part of it. */
void prof_internal_fake_wall(const volatile uint64_t *wall);
/* The one header of a Chrome trace (profiler.c's prof_trace_write and trace_merge.c):
 * {"displayTimeUnit":"ms","otherData":{"generator":"nnbench profiler", other(j, ctx)...},
 * "traceEvents":[ -- the object and the array are left open for the caller's events. */
void prof_internal_trace_head(prof_json *j, void (*other)(prof_json *j, const void *ctx), const void *ctx);
/* Test hook: the deadline of prof_core_round_trip_ns (placement.c); 0 restores 200 ms. */
void prof_internal_round_trip_deadline(uint64_t ns);
/* Sets the message prof_error() returns (error.c). */
void prof_internal_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Why this machine has no hardware counters, in PAPI's own words (profiler.c). */
void prof_internal_no_counters_reason(char *buf, size_t n);
/* What decides which counters a profiler counts, gathered by setup (profiler.c); tests
 * inject them to check the wording of each machine shape on any machine. */
typedef struct {
    int off;                  /* counters = none */
    int explicit_list;        /* a counters list was given (else the default set) */
    int papi_ok;
    const char *papi_error;
    const char *forced;       /* components NNBENCH_PAPI_DISABLE switched off, or "" */
    int pe_found, pe_disabled;/* PAPI's perf_event component: compiled in / disabled */
    const char *pe_reason;    /* PAPI's reason when disabled */
    int pe_listed;            /* counters the component LISTS (usable or not) */
    int hw_tried, hw_added, sw_tried, sw_added;
    const char *hw_used, *sw_used;   /* names added */
    const char *hw_error, *sw_error; /* first PAPI error of a failed add */
    int probe_hw, probe_sw;   /* perf_event_open of a hardware / software event: 0 opens,
                                 else errno; -1 not asked */
    int in_vm;
    int paranoid;             /* kernel.perf_event_paranoid, INT_MIN unknown */
} prof_counter_facts;
/* The "hardware events: ..." and "software events: ..." notes for these facts. */
void prof_internal_explain(const prof_counter_facts *f, char *hw, size_t hn, char *sw, size_t sn);
/* Sets up the default counter set as prof_create would, reports it, and releases it. */
void prof_internal_counters_probe(int *hw, int *sw, char *hw_note, size_t hn, char *sw_note, size_t sn);

/* (error.c) snprintf for messages where cutting a long PAPI string or path short is fine. */
void prof_internal_say(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
