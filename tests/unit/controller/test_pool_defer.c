/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the warm-pool refill deferral (pool_defer_check) and of the pool status
 * pacing (pool_status_wait). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "controller/pool_plan.h"

#define MS   USEC_PER_MSEC
#define MAX  (1000 * MS)
#define TICK (100 * MS)

static void test_no_claims_waiting_creates_at_once(void **state)
{
    struct pool_defer d = {0};
    (void)state;
    assert_int_equal(pool_defer_check(&d, false, 5000 * MS, MAX, TICK), 0);
    assert_false(d.active);
}

static void test_waits_in_rechecks_up_to_the_bound(void **state)
{
    struct pool_defer d = {0};
    (void)state;
    assert_int_equal(pool_defer_check(&d, true, 5000 * MS, MAX, TICK), TICK);
    assert_int_equal(pool_defer_check(&d, true, 5050 * MS, MAX, TICK), TICK);
    /* the last re-check lands exactly on the bound, not past it */
    assert_int_equal(pool_defer_check(&d, true, 5950 * MS, MAX, TICK), 50 * MS);
    assert_int_equal(pool_defer_check(&d, true, 6000 * MS, MAX, TICK), 0);
    /* the pass after the bound created; the next pass waits afresh */
    assert_int_equal(pool_defer_check(&d, true, 6001 * MS, MAX, TICK), TICK);
}

static void test_total_wait_is_bounded(void **state)
{
    struct pool_defer d = {0};
    usec_t now = 10000 * MS, start = now, w;
    int passes = 0;
    (void)state;
    /* claims wait throughout: following every returned delay reaches the bound */
    while ((w = pool_defer_check(&d, true, now, MAX, TICK)) != 0 && passes < 100) {
        assert_true(w <= TICK);
        now += w;
        passes++;
    }
    assert_int_equal(now - start, MAX);
    assert_int_equal(passes, 10);
}

static void test_claims_drained_ends_the_wait(void **state)
{
    struct pool_defer d = {0};
    (void)state;
    assert_int_equal(pool_defer_check(&d, true, 1000 * MS, MAX, TICK), TICK);
    assert_int_equal(pool_defer_check(&d, true, 1900 * MS, MAX, TICK), TICK);
    assert_int_equal(pool_defer_check(&d, false, 1950 * MS, MAX, TICK), 0);
    /* a new wait starts from scratch, not from the old start */
    assert_int_equal(pool_defer_check(&d, true, 1960 * MS, MAX, TICK), TICK);
    assert_int_equal(pool_defer_check(&d, true, 2900 * MS, MAX, TICK), 60 * MS);
}

static void test_disabled_and_clock_step(void **state)
{
    struct pool_defer d = {0};
    (void)state;
    assert_int_equal(pool_defer_check(&d, true, 1000 * MS, 0, TICK), 0);
    /* no re-check interval: wait out the bound in one go */
    assert_int_equal(pool_defer_check(&d, true, 1000 * MS, MAX, 0), MAX);
    /* a start in the future (clock went back) restarts the wait instead of underflowing */
    assert_int_equal(pool_defer_check(&d, true, 500 * MS, MAX, 0), MAX);
    assert_int_equal(pool_defer_check(&d, true, 1500 * MS, MAX, 0), 0);
}

static void test_status_pacing(void **state)
{
    (void)state;
    /* never written by this process, or urgent: at once */
    assert_int_equal(pool_status_wait(0, 5000 * MS, MAX, false), 0);
    assert_int_equal(pool_status_wait(4990 * MS, 5000 * MS, MAX, true), 0);
    /* a count change soon after a write waits for the rest of the interval */
    assert_int_equal(pool_status_wait(4990 * MS, 5000 * MS, MAX, false), 990 * MS);
    assert_int_equal(pool_status_wait(4990 * MS, 5989 * MS, MAX, false), 1 * MS);
    assert_int_equal(pool_status_wait(4990 * MS, 5990 * MS, MAX, false), 0);
    /* a clock before the last write does not hold the write back */
    assert_int_equal(pool_status_wait(6000 * MS, 5000 * MS, MAX, false), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_pacing),
        cmocka_unit_test(test_no_claims_waiting_creates_at_once),
        cmocka_unit_test(test_waits_in_rechecks_up_to_the_bound),
        cmocka_unit_test(test_total_wait_is_bounded),
        cmocka_unit_test(test_claims_drained_ends_the_wait),
        cmocka_unit_test(test_disabled_and_clock_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
