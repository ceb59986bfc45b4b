/* placement.c — CMocka tests of the core round trip (profiler/placement.c): the classes and
 * words at fixed figures, the median, a measurement on whatever this machine is, one cut
 * short by its deadline, and the failure path forced by pinning both threads to one CPU. */
#include <math.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../profiler/internal.h"

static double seconds_since(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) + 1e-9 * (double)(b.tv_nsec - a->tv_nsec);
}

static void test_placement_words(void **state)
{
    (void)state;
    assert_string_equal(prof_placement_class(119), "shared cache");
    assert_string_equal(prof_placement_class(PROF_SHARED_CACHE_NS - 0.5), "shared cache");
    assert_string_equal(prof_placement_class(PROF_SHARED_CACHE_NS), "apart");
    assert_string_equal(prof_placement_class(947), "apart");
    assert_string_equal(prof_placement_class(NAN), "unmeasured");
    char t[256];
    prof_placement_text(119, t, sizeof t);
    assert_non_null(strstr(t, "CPUs sharing a last-level cache"));
    assert_non_null(strstr(t, "119 ns"));
    prof_placement_text(947, t, sizeof t);
    assert_non_null(strstr(t, "CPUs not sharing a last-level cache"));
    assert_non_null(strstr(t, "947 ns"));
    prof_placement_text(NAN, t, sizeof t);
    assert_non_null(strstr(t, "not measured"));
    char small[16];
    prof_placement_text(947, small, sizeof small); /* cut, still a string */
    assert_true(strlen(small) < sizeof small);
}

static void test_median(void **state)
{
    (void)state;
    double odd[] = { 5, 1, 3 }, even[] = { 4, 1, 3, 2 }, one[] = { 7 };
    assert_true(prof_median(odd, 3) == 3);
    assert_true(prof_median(even, 4) == 2.5);
    assert_true(odd[0] == 1 && odd[2] == 5); /* sorted in place */
    assert_true(prof_median(one, 1) == 7);
    assert_true(isnan(prof_median(NULL, 0)));
}

/* Whatever the machine: a figure above 0 (and below a second), or NAN when the two threads
 * did not get two CPUs in time; never a hang (the deadline is 200 ms). */
static void test_round_trip_measures(void **state)
{
    (void)state;
    struct timespec a;
    clock_gettime(CLOCK_MONOTONIC, &a);
    double ns = prof_core_round_trip_ns(400);
    double s = seconds_since(&a);
    assert_true(isnan(ns) || (ns > 0 && ns < 1e9));
    assert_true(s < 1.0);
    printf("  core round trip here: %.0f ns (%s), measured in %.1f ms\n", ns, prof_placement_class(ns), s * 1e3);
    double one = prof_core_round_trip_ns(0); /* one block at least */
    assert_true(isnan(one) || (one > 0 && one <= 100000));
}

/* More passes than the deadline allows (10^7, ~4 s at 400 ns): it stops at the deadline
 * (20 ms here) and gives the median of the blocks done by then, or NAN on a machine so
 * busy that fewer than 16 were; either way at the deadline, not after every pass. */
static void test_round_trip_deadline_keeps_blocks(void **state)
{
    (void)state;
    prof_internal_round_trip_deadline(20000000ull);
    struct timespec a;
    clock_gettime(CLOCK_MONOTONIC, &a);
    double ns = prof_core_round_trip_ns(10000000);
    double s = seconds_since(&a);
    prof_internal_round_trip_deadline(0);
    assert_true(isnan(ns) || (ns > 0 && ns <= 100000));
    assert_true(s < 0.5);
    printf("  10^7 passes asked, 20 ms allowed: %.0f ns after %.0f ms\n", ns, s * 1e3);
}

/* Both threads on one CPU: every pass waits for the scheduler to switch them, 2000 passes
 * cannot finish in 200 ms, and the measurement says NAN instead of a figure of the
 * scheduler's time slices. */
static void test_round_trip_one_cpu_fails(void **state)
{
    (void)state;
    cpu_set_t old, one;
    if (sched_getaffinity(0, sizeof old, &old)) skip();
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &old)) { CPU_SET(c, &one); break; }
    if (sched_setaffinity(0, sizeof one, &one)) skip();
    double ns = prof_core_round_trip_ns(2000);
    assert_int_equal(sched_setaffinity(0, sizeof old, &old), 0);
    assert_true(isnan(ns));
    assert_string_equal(prof_placement_class(ns), "unmeasured");
}

int test_profiler_placement(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_placement_words),
        cmocka_unit_test(test_round_trip_measures),
        cmocka_unit_test(test_round_trip_deadline_keeps_blocks),
        cmocka_unit_test(test_round_trip_one_cpu_fails),
    };
    return cmocka_run_group_tests_name("profiler_placement", tests, NULL, NULL);
}
