/* SPDX-License-Identifier: Apache-2.0 */
/* common/yield_gate: holds while busy, lets go when busy ends, at the bound, or on stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "common/yield_gate.h"

struct busy_for {
    int calls, busy_calls; /* busy for the first busy_calls calls */
    atomic_bool *stop_at;  /* set on the busy_calls-th call instead (may be NULL) */
};

static bool busy_counted(void *ctx)
{
    struct busy_for *b = ctx;
    b->calls++;
    if (b->stop_at && b->calls == b->busy_calls)
        atomic_store(b->stop_at, true);
    return b->stop_at || b->calls <= b->busy_calls;
}

static void test_open_gates_do_not_hold(void **state)
{
    struct busy_for b = {.busy_calls = 100};
    struct yield_gate none = {0}, g = {.busy = busy_counted, .ctx = &b, .max_wait = USEC_PER_SEC};
    (void)state;
    assert_false(yield_gate_wait(NULL, USEC_PER_SEC, NULL));
    assert_false(yield_gate_wait(&none, USEC_PER_SEC, NULL));
    assert_false(yield_gate_wait(&g, 0, NULL)); /* nothing left of the bound */
    assert_int_equal(b.calls, 0);
    b.busy_calls = 0;
    assert_false(yield_gate_wait(&g, USEC_PER_SEC, NULL)); /* asked once, not busy */
    assert_int_equal(b.calls, 1);
}

static void test_holds_until_not_busy(void **state)
{
    struct busy_for b = {.busy_calls = 3};
    struct yield_gate g = {.busy = busy_counted, .ctx = &b, .max_wait = 60 * USEC_PER_SEC};
    usec_t t0 = clock_now();
    (void)state;
    assert_true(yield_gate_wait(&g, g.max_wait, NULL));
    assert_int_equal(b.calls, 4); /* three busy answers, one sleep after each, then open */
    assert_true(clock_now() - t0 >= 3 * YIELD_GATE_STEP);
}

static void test_bound_and_stop(void **state)
{
    atomic_bool stop;
    struct busy_for forever = {.busy_calls = 1 << 30};
    struct busy_for stopping = {.busy_calls = 2, .stop_at = &stop};
    struct yield_gate g = {.busy = busy_counted, .ctx = &forever, .max_wait = 60 * USEC_PER_SEC};
    usec_t t0 = clock_now();
    (void)state;
    assert_true(yield_gate_wait(&g, 70 * USEC_PER_MSEC, NULL)); /* busy throughout */
    assert_true(clock_now() - t0 >= 70 * USEC_PER_MSEC);
    assert_true(forever.calls >= 1 && forever.calls <= 5); /* one per step at most */
    atomic_init(&stop, false);
    g.ctx = &stopping;
    assert_true(yield_gate_wait(&g, 60 * USEC_PER_SEC, &stop)); /* stop ends it, not 60 s */
    assert_int_equal(stopping.calls, 2);
    assert_false(yield_gate_wait(&g, 60 * USEC_PER_SEC, &stop)); /* stopped: no hold */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_gates_do_not_hold),
        cmocka_unit_test(test_holds_until_not_busy),
        cmocka_unit_test(test_bound_and_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
