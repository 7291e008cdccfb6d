/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the heap-trim decision (heap_trim_due): once per check period, only after
 * a busy spell, only when the last period was quiet. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "controller/heap_trim.h"

#define S USEC_PER_SEC

static void test_quiet_after_a_busy_spell_trims_once(void **state)
{
    struct heap_trim t = {0};
    (void)state;
    /* first check: the start-up's requests were made in the period before */
    assert_false(heap_trim_due(&t, 10 * S, 5000));
    /* the next period adds 3 requests: quiet, and 5,003 since the last trim */
    assert_true(heap_trim_due(&t, 20 * S, 5003));
    /* quiet again, but nothing happened since the trim */
    assert_false(heap_trim_due(&t, 30 * S, 5003));
    assert_false(heap_trim_due(&t, 40 * S, 5010));
}

static void test_busy_periods_wait_for_the_quiet_one(void **state)
{
    struct heap_trim t = {0};
    (void)state;
    assert_false(heap_trim_due(&t, 10 * S, 1000));
    assert_false(heap_trim_due(&t, 20 * S, 2000));
    assert_false(heap_trim_due(&t, 30 * S, 3000));
    assert_true(heap_trim_due(&t, 40 * S, 3000 + HEAP_TRIM_QUIET));
    /* a second spell, then quiet: trims again */
    assert_false(heap_trim_due(&t, 50 * S, 4000));
    assert_true(heap_trim_due(&t, 60 * S, 4001));
}

static void test_small_spells_do_not_trim(void **state)
{
    struct heap_trim t = {0};
    (void)state;
    assert_false(heap_trim_due(&t, 10 * S, HEAP_TRIM_BUSY - 3 * HEAP_TRIM_QUIET));
    assert_false(heap_trim_due(&t, 20 * S, HEAP_TRIM_BUSY - 2 * HEAP_TRIM_QUIET));
    /* the quiet periods add up to the busy count slowly: a trim once they reach it */
    assert_false(heap_trim_due(&t, 30 * S, HEAP_TRIM_BUSY - HEAP_TRIM_QUIET));
    assert_true(heap_trim_due(&t, 40 * S, HEAP_TRIM_BUSY));
}

static void test_checks_at_most_once_per_period(void **state)
{
    struct heap_trim t = {0};
    (void)state;
    assert_false(heap_trim_due(&t, 10 * S, 5000));
    /* 200 ms later (ctrl_manager_wait's tick): not a check, the counts are not taken */
    assert_false(heap_trim_due(&t, 10 * S + 200 * USEC_PER_MSEC, 5000));
    assert_false(heap_trim_due(&t, 10 * S + HEAP_TRIM_CHECK - 1, 5000));
    assert_true(heap_trim_due(&t, 10 * S + HEAP_TRIM_CHECK, 5000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quiet_after_a_busy_spell_trims_once),
        cmocka_unit_test(test_busy_periods_wait_for_the_quiet_one),
        cmocka_unit_test(test_small_spells_do_not_trim),
        cmocka_unit_test(test_checks_at_most_once_per_period),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
