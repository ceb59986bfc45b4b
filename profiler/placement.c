/* placement.c — where two threads of this process run relative to each other, measured:
 * the round trip of one cache line between them. Two threads pass a counter back and
 * forth, so each pass moves its line to the other CPU and back. ~100 ns when the two CPUs
 * share a last-level cache; several hundred when they do not (two chiplets, or a VM's
 * vCPUs on distant cores), and then every line that a cut of work over two threads moves
 * costs that much: the same 2-thread step runs 1.2x or 1.8x the 1-thread one depending on
 * it (docs/performance.md). A VM may move its vCPUs between such placements while it runs,
 * so a run records the placement it started on. */
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* A measurement must finish within this (it takes 1-4 ms when both threads have a CPU,
 * ~40 ms when they share one with a spinning third): two threads that do not get two CPUs
 * in time (one CPU online, or a loaded machine) make it fail instead of spinning on. */
#define DEADLINE_NS 200000000ull
/* Blocks that must be done by the deadline for a figure (fewer when fewer were asked),
 * and the longest figure that is a cache line's round trip: a scheduler's time slice is
 * milliseconds. */
#define MIN_BLOCKS 16
#define MAX_TRIP_NS 100000.0

static uint64_t deadline_ns = DEADLINE_NS; /* prof_internal_round_trip_deadline */

void prof_internal_round_trip_deadline(uint64_t ns) { deadline_ns = ns ? ns : DEADLINE_NS; }

/* CLOCK_MONOTONIC itself, not prof_now_ns (clock.c, the one clock of everything else):
 * that may be PAPI's (~1.2 us a call here, longer than the passes it would time) or a
 * test's fake one, which would stop the deadline and the blocks' times. */
static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct {
    atomic_long flag;   /* 2i+1: the caller's i-th pass; 2i+2: the peer's answer */
    long rounds;
    atomic_int late;    /* a side gave up: the other stops too */
} pingpong;

/* Spins until flag reads want; -1 (and late set) past the deadline or when the other side
 * gave up. The clock is read every 1024 spins only. */
static int await(pingpong *p, long want, uint64_t deadline)
{
    unsigned spins = 0;
    while (atomic_load_explicit(&p->flag, memory_order_acquire) != want) {
        if (atomic_load_explicit(&p->late, memory_order_relaxed)) return -1;
        if (!(++spins & 1023u) && mono_ns() > deadline) {
            atomic_store(&p->late, 1);
            return -1;
        }
    }
    return 0;
}

/* The caller's pass i: hand the line over, wait for it to come back. */
static int pass(pingpong *p, long i, uint64_t deadline)
{
    atomic_store_explicit(&p->flag, 2 * i + 1, memory_order_release);
    return await(p, 2 * i + 2, deadline);
}

static void *peer(void *arg)
{
    pingpong *p = arg;
    uint64_t deadline = mono_ns() + deadline_ns;
    for (long i = 0; i <= p->rounds; i++) {
        if (await(p, 2 * i + 1, deadline)) return NULL;
        atomic_store_explicit(&p->flag, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double prof_median(double *v, size_t n)
{
    if (!n) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double prof_core_round_trip_ns(long rounds)
{
    long blocks = rounds / PROF_ROUND_TRIP_BLOCK;
    if (blocks < 1) blocks = 1;
    double *t = malloc((size_t)blocks * sizeof *t);
    if (!t) return NAN;
    pingpong p = { .rounds = blocks * PROF_ROUND_TRIP_BLOCK };
    pthread_t th;
    if (prof_thread_create(&th, NULL, peer, &p)) { free(t); return NAN; }
    uint64_t deadline = mono_ns() + deadline_ns;
    int ok = !pass(&p, 0, deadline);   /* untimed: waits for the peer to start */
    long done = 0;                     /* blocks timed whole */
    for (; ok && done < blocks; done++) {
        uint64_t t0 = mono_ns();
        for (long i = 1 + done * PROF_ROUND_TRIP_BLOCK; ok && i <= (done + 1) * PROF_ROUND_TRIP_BLOCK; i++)
            ok = !pass(&p, i, deadline);
        if (!ok) break;
        t[done] = (double)(mono_ns() - t0) / PROF_ROUND_TRIP_BLOCK;
    }
    atomic_store(&p.late, 1);          /* a peer still waiting (the deadline hit) stops */
    pthread_join(th, NULL);
    /* Past the deadline on a busy machine, the blocks done so far still tell, when there
     * are enough of them and their median is a cache line's, not a time slice's. */
    double ns = done >= (blocks < MIN_BLOCKS ? blocks : MIN_BLOCKS) ? prof_median(t, (size_t)done) : NAN;
    free(t);
    return ns <= MAX_TRIP_NS ? ns : NAN;
}

const char *prof_placement_class(double ns)
{
    if (isnan(ns)) return "unmeasured";
    return ns < PROF_SHARED_CACHE_NS ? "shared cache" : "apart";
}

void prof_placement_text(double ns, char *buf, size_t cap)
{
    if (isnan(ns))
        prof_internal_say(buf, cap, "not measured: the two threads did not get two CPUs within %.0f ms (one CPU "
                          "online, or a loaded machine)", DEADLINE_NS / 1e6);
    else if (ns < PROF_SHARED_CACHE_NS)
        prof_internal_say(buf, cap, "CPUs sharing a last-level cache (a cache line's round trip between two threads: %.0f "
                          "ns)", ns);
    else
        prof_internal_say(buf, cap, "CPUs not sharing a last-level cache (a cache line's round trip between two "
                          "threads: %.0f ns): every line a split op moves between them costs that", ns);
}
