/* balance.c — dist.balance = measured (eng_dist_balance, engine/dist.c): shares follow the
 * ranks' measured time per row; a partition from 0 to 1; unchanged until every rank has
 * been measured; a rank that measured nothing keeps its estimate; one long step moves an
 * estimate by at most 30%; every rank keeps at least a quarter of an even share. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../engine/dist.h"

static void assert_partition(const double *cuts, int n)
{
    assert_true(cuts[0] == 0.0);
    assert_true(cuts[n] == 1.0);
    for (int r = 0; r < n; r++) assert_true(cuts[r + 1] >= cuts[r]);
}

static void test_balance_follows_speed(void **state)
{
    (void)state;
    double ema[2] = { 0, 0 }, cuts[3] = { 0, 0.5, 1 };
    /* rank 1 takes twice as long per row: it converges to a third of the batch */
    for (int s = 0; s < 40; s++) {
        float t[2] = { 10.0f, 20.0f };
        eng_dist_balance(ema, t, 2, cuts);
        assert_partition(cuts, 2);
    }
    assert_float_equal(cuts[1], 2.0 / 3.0, 1e-9);
    assert_float_equal(ema[0], 10.0, 1e-9);
    /* the same again, speeds swapped: the shares swap */
    for (int s = 0; s < 40; s++) {
        float t[2] = { 20.0f, 10.0f };
        eng_dist_balance(ema, t, 2, cuts);
    }
    assert_float_equal(cuts[1], 1.0 / 3.0, 1e-6);
}

static void test_balance_waits_for_every_rank(void **state)
{
    (void)state;
    double ema[3] = { 0, 0, 0 }, cuts[4] = { 0, 1.0 / 3, 2.0 / 3, 1 };
    float t[3] = { 5.0f, 0.0f, 15.0f };   /* rank 1 measured nothing (no rows, first step) */
    eng_dist_balance(ema, t, 3, cuts);
    assert_float_equal(cuts[1], 1.0 / 3, 0);
    assert_float_equal(cuts[2], 2.0 / 3, 0);
    assert_float_equal(ema[0], 5.0, 0);
    assert_float_equal(ema[1], 0.0, 0);
    float t2[3] = { 5.0f, 5.0f, NAN };     /* not finite: ignored, the estimate kept */
    eng_dist_balance(ema, t2, 3, cuts);
    assert_float_equal(ema[2], 15.0, 0);
    /* speeds 1/5, 1/5, 1/15: shares 3/7, 3/7, 1/7 */
    assert_float_equal(cuts[1], 3.0 / 7, 1e-12);
    assert_float_equal(cuts[2], 6.0 / 7, 1e-12);
    assert_partition(cuts, 3);
}

static void test_balance_outliers_and_floor(void **state)
{
    (void)state;
    double ema[2] = { 0, 0 }, cuts[3] = { 0, 0.5, 1 };
    float t[2] = { 10.0f, 10.0f };
    eng_dist_balance(ema, t, 2, cuts);
    assert_float_equal(cuts[1], 0.5, 1e-12);
    /* one step 100x longer on rank 0 (an evaluation): held to 2x, then smoothed by 0.3 */
    float spike[2] = { 1000.0f, 10.0f };
    eng_dist_balance(ema, spike, 2, cuts);
    assert_float_equal(ema[0], 13.0, 1e-9);
    assert_true(cuts[1] > 0.4);
    /* a rank 100x slower for good still keeps a quarter of an even share */
    for (int s = 0; s < 200; s++) {
        float slow[2] = { 10.0f, 1000.0f };
        eng_dist_balance(ema, slow, 2, cuts);
    }
    assert_float_equal(cuts[1], 1 - 0.125, 1e-12);
    assert_partition(cuts, 2);
    /* 4 ranks, two of them far slower: both at the floor (1/16), the others share 7/8 */
    double e4[4] = { 0 }, c4[5] = { 0, 0.25, 0.5, 0.75, 1 };
    float t4[4] = { 1.0f, 3.0f, 500.0f, 40.0f };
    eng_dist_balance(e4, t4, 4, c4);
    assert_float_equal(c4[1], 0.875 * 0.75, 1e-12);
    assert_float_equal(c4[2] - c4[1], 0.875 * 0.25, 1e-12);
    assert_float_equal(c4[3] - c4[2], 0.0625, 1e-12);
    assert_float_equal(c4[4] - c4[3], 0.0625, 1e-12);
    assert_partition(c4, 4);
}

/* The rows a rank's share can hold: the even cut's within a row; under measured shares
 * from the floor (a quarter of an even share) up to all but the others' floors. Checked
 * against the cuts eng_dist_balance makes at its extremes, rounded as the batcher rounds. */
static void test_rows_range(void **state)
{
    (void)state;
    int lo, hi;
    eng_dist_rows_range(128, 2, 0, &lo, &hi);
    assert_true(lo <= 64 && hi >= 64 && hi - lo <= 2);
    eng_dist_rows_range(128, 3, 0, &lo, &hi);
    assert_true(lo <= 42 && hi >= 43 && hi - lo <= 3);
    eng_dist_rows_range(96, 1, 0, &lo, &hi);
    assert_true(lo <= 96 && hi == 96);
    for (int n = 2; n <= 4; n++)
        for (int g = 16; g <= 256; g += 40) {
            eng_dist_rows_range(g, n, 1, &lo, &hi);
            double ema[4] = { 0 }, cuts[5];
            float t[4] = { 1.0f, 1000.0f, 1000.0f, 1000.0f };  /* rank 0 fast: the others at the floor */
            for (int r = 0; r <= n; r++) cuts[r] = (double)r / n;
            eng_dist_balance(ema, t, n, cuts);
            for (int r = 0; r < n; r++) {
                long rows = lround(g * cuts[r + 1]) - lround(g * cuts[r]);
                if (rows < lo || rows > hi) fail_msg("%d ranks, batch %d: rank %d has %ld rows, outside [%d, %d]", n, g, r, rows, lo, hi);
            }
        }
}

int test_engine_balance(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balance_follows_speed),
        cmocka_unit_test(test_balance_waits_for_every_rank),
        cmocka_unit_test(test_balance_outliers_and_floor),
        cmocka_unit_test(test_rows_range),
    };
    return cmocka_run_group_tests_name("engine_balance", tests, NULL, NULL);
}
