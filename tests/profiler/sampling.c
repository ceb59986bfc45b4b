/* sampling.c — CMocka tests of the cpu column's sampling and of the correction for the
 * clock reads' own CPU time: on fake clocks (the test moves the wall and the process CPU
 * clock itself; each CPU clock read uses CPU as a syscall does), so what is sampled and
 * what it sums to are exact on any machine, at any load. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../../profiler/internal.h"

static volatile uint64_t wall_ns, cpu_ns;

/* A profiler on the fake clocks, a CPU clock read costing read_ns (so short scopes sample
 * once per 1000 x read_ns of their wall time). */
static prof_t *fake_prof(double read_ns)
{
    wall_ns = cpu_ns = 1000000000u;
    prof_internal_fake_clocks(&wall_ns, &cpu_ns, read_ns);
    prof_t *p = prof_create(&(prof_options){ .quiet = 1, .counters = "none" });
    assert_non_null(p);
    return p;
}

static void real_clocks(prof_t *p)
{
    prof_destroy(p);
    prof_internal_fake_clocks(NULL, NULL, 0);
}

/* One call of scope id lasting dur_ns of wall time with `cores` cores busy. */
static void call(prof_t *p, int id, uint64_t dur_ns, double cores)
{
    prof_begin(p, id);
    wall_ns += dur_ns;
    cpu_ns += (uint64_t)(cores * (double)dur_ns);
    prof_end(p, id, 0, 0);
}

/* The profile by scope (malloc'd). */
static prof_row *rows_of(prof_t *p, size_t *n)
{
    prof_row *rows = NULL;
    assert_int_equal(prof_rows(p, PROF_BY_SCOPE, &rows, n), 0);
    return rows;
}

static const prof_row *row_named(const prof_row *rows, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name)) return &rows[i];
    fail_msg("no row %s", name);
    return NULL;
}

/* Short calls of uneven length at a steady 1.5 cores: only a few calls read the clock,
 * yet the scaled cpu_ns is the whole CPU time (1.5 x the wall), to rounding. A long scope
 * reads it on every call. */
static void test_sampled_cpu_sums_right(void **state)
{
    (void)state;
    prof_t *p = fake_prof(100); /* a gap of 200 us of a scope's time between samples */
    int shortc = prof_register(p, "short", NULL, PROF_OP), longc = prof_register(p, "long", NULL, PROF_OP);
    uint64_t wall = 0;
    for (int i = 0; i < 5000; i++) {
        uint64_t d = 2000 + 1000 * (uint64_t)(i % 13); /* 2-14 us */
        call(p, shortc, d, 1.5);
        wall += d;
    }
    for (int i = 0; i < 20; i++) call(p, longc, 300000, 1.5); /* 300 us: above the gap */
    prof_summary s;
    prof_summary_get(p, &s);
    size_t n;
    prof_row *rows = rows_of(p, &n);
    const prof_row *sr = row_named(rows, n, "short"), *lr = row_named(rows, n, "long");
    double want = 1.5 * (double)wall, got = (double)sr->cpu_ns;
    uint64_t short_reads = s.cpu_reads - 20;
    printf("short: %llu calls, %llu sampled (wall %.1f ms), cpu %.4f ms for %.4f ms; long: %llu of 20 sampled\n",
           (unsigned long long)sr->calls, (unsigned long long)short_reads, (double)wall / 1e6, got / 1e6,
           want / 1e6, (unsigned long long)(s.cpu_reads - short_reads));
    assert_int_equal(sr->total_ns, wall);
    assert_true(got > want * 0.999 && got < want * 1.001);
    /* a sampled call's reads cost 2 x 100 ns here, so a gap is 1000 x 200 ns = 200 us of
     * the scope's time: over its 40 ms the first call plus ~200, far fewer than 5000 */
    assert_true(short_reads >= 100 && short_reads <= 400);
    assert_int_equal(lr->cpu_ns, (int64_t)(1.5 * 20 * 300000));
    free(rows);
    real_clocks(p);
}

/* Calls whose cores alternate (1 on even calls, 3 on odd ones, 50 us each) while a gap is
 * exactly 4 calls: a sample every 4th call would see only one parity and report 1.00 or
 * 3.00; the jittered gaps see both, and the estimate is within 10% of the true 2.00. */
static void test_sampling_does_not_alias(void **state)
{
    (void)state;
    prof_t *p = fake_prof(100);
    int id = prof_register(p, "alternating", NULL, PROF_OP);
    for (int i = 0; i < 20000; i++) call(p, id, 50000, i % 2 ? 3.0 : 1.0);
    size_t n;
    prof_row *rows = rows_of(p, &n);
    double cpu = (double)rows[0].cpu_ns / (double)rows[0].total_ns;
    printf("alternating 1/3 cores: cpu %.3f (true 2.000)\n", cpu);
    assert_true(cpu > 1.8 && cpu < 2.2);
    free(rows);
    real_clocks(p);
}

/* The first call of every scope reads the clock, so a scope called once has a cpu value,
 * and a scope that never ran has none. That value is the scope's CPU time only: the 1 us of
 * CPU its two reads add inside the interval (half of each) is taken off. */
static void test_first_call_sampled(void **state)
{
    (void)state;
    prof_t *p = fake_prof(1000);
    int once = prof_register(p, "once", NULL, PROF_PHASE);
    prof_register(p, "never", NULL, PROF_PHASE);
    call(p, once, 500, 2.0);
    size_t n;
    prof_row *rows = rows_of(p, &n);
    assert_int_equal(row_named(rows, n, "once")->cpu_ns, 1000);
    assert_int_equal(row_named(rows, n, "never")->cpu_ns, 0);
    free(rows);
    real_clocks(p);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* K iterations of three nested empty scopes (step > phase > op) on p (NULL: profiling off);
 * their wall time. */
static uint64_t nested_loop(prof_t *p, const int id[3], int k)
{
    uint64_t t0 = mono_ns();
    for (int i = 0; i < k; i++) {
        PROF_BEGIN(p, id[0]);
        PROF_BEGIN(p, id[1]);
        PROF_BEGIN(p, id[2]);
        PROF_END(p, id[2], 10, 40);
        PROF_END(p, id[1], 0, 0);
        PROF_END(p, id[0], 0, 0);
    }
    return mono_ns() - t0;
}

/* The footer's overhead is what the profiler really costs, on the real clocks, with the
 * default counters (on a VM without perf events faults and csw come from getrusage, two
 * more syscalls per sampled call, which the estimate once left out: it read 0.56 of the
 * truth here). Every call sampled (the costly case), timed from outside against the same
 * loop with profiling off, rounds interleaved; the quickest round is the one other jobs
 * disturbed least. */
static void test_overhead_estimate_truthful(void **state)
{
    (void)state;
    prof_t *p = prof_create(&(prof_options){ .quiet = 1 });
    assert_non_null(p);
    int id[3] = { prof_register(p, "step", NULL, PROF_STEP), prof_register(p, "forward", NULL, PROF_PHASE),
                  prof_register(p, "op", NULL, PROF_OP) };
    prof_internal_sample_every_call(p);
    enum { K = 200, ROUNDS = 25 };
    double best_on = 1e30, est_at_best = 0, best_off = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        prof_summary a, b;
        prof_summary_get(p, &a);
        double on = (double)nested_loop(p, id, K);
        prof_summary_get(p, &b);
        double off = (double)nested_loop(NULL, id, K);
        if (off < best_off) best_off = off;
        if (on < best_on) { best_on = on; est_at_best = (double)(b.overhead_ns - a.overhead_ns); }
    }
    double measured = best_on - best_off, ratio = est_at_best / measured;
    prof_summary s;
    prof_summary_get(p, &s);
    printf("  %d x 3 sampled scopes: measured %.1f us, footer's estimate %.1f us (ratio %.2f); %s\n", K,
           measured / 1e3, est_at_best / 1e3, ratio, s.sw_note);
    assert_true(s.cpu_reads >= (uint64_t)(3 * K * ROUNDS));
    assert_true(ratio > 0.75 && ratio < 1.33);
    prof_destroy(p);
}

int test_profiler_sampling(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampled_cpu_sums_right),
        cmocka_unit_test(test_sampling_does_not_alias),
        cmocka_unit_test(test_first_call_sampled),
        cmocka_unit_test(test_overhead_estimate_truthful),
    };
    return cmocka_run_group_tests_name("profiler cpu sampling", tests, NULL, NULL);
}
