/* clock.c — the one wall clock of nnbench (prof_now_ns / prof_now_s): CLOCK_MONOTONIC, or
 * PAPI_get_real_nsec where the profiler found it cheap, or a test's fake. A leaf: the
 * profiler, the allocator and the calibration all read it, and it reads none of them.
 * (placement.c alone reads CLOCK_MONOTONIC directly: its sub-microsecond blocks and its
 * deadline need the real clock, whatever this one is set to.) */
#include <papi.h>
#include <stdatomic.h>
#include <time.h>

#include "internal.h"

static atomic_int clock_papi;
static const volatile uint64_t *fake_wall; /* prof_internal_fake_clocks (tests) */

void prof_internal_clock_use_papi(int on)
{
    atomic_store_explicit(&clock_papi, on, memory_order_relaxed);
}

void prof_internal_fake_wall(const volatile uint64_t *wall) { fake_wall = wall; }

uint64_t prof_now_ns(void)
{
    if (fake_wall) return *fake_wall;
    if (atomic_load_explicit(&clock_papi, memory_order_relaxed))
        return (uint64_t)PAPI_get_real_nsec();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double prof_now_s(void) { return 1e-9 * (double)prof_now_ns(); }
