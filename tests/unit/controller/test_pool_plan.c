/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the warm-pool plan, expectations and refill bucket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "common/limits.h"
#include "controller/pool_expect.h"
#include "controller/pool_plan.h"

#define S USEC_PER_SEC

static void test_fill_and_terminating(void **state)
{
    struct pool_member m[3] = {{.ready = true, .created = 1}, {.terminating = true}, {0}};
    struct pool_plan_in in = {
        .m = m, .n = 3, .desired = 5, .max_batch = 300, .grace = 10 * S, .now = 100 * S};
    struct pool_plan p;
    (void)state;
    pool_plan_compute(&in, &p);
    /* 2 active + 1 terminating count against the target: only 2 more. */
    assert_int_equal(p.active, 2);
    assert_int_equal(p.ready, 1);
    assert_int_equal(p.terminating, 1);
    assert_int_equal(p.create, 2);
    assert_int_equal(p.ndel, 0);
    pool_plan_done(&p);
    in.max_batch = 1;
    pool_plan_compute(&in, &p);
    assert_int_equal(p.create, 1);
    pool_plan_done(&p);
}

static void test_unready_held_and_stuck(void **state)
{
    struct pool_member m[3] = {
        {.created = 95 * S},                        /* within the grace */
        {.created = 10 * S, .unschedulable = true}, /* past it, unschedulable: held */
        {.created = 10 * S},                        /* past it: stuck, replaced */
    };
    struct pool_plan_in in = {
        .m = m, .n = 3, .desired = 3, .max_batch = 300, .grace = 10 * S, .now = 100 * S};
    struct pool_plan p;
    (void)state;
    pool_plan_compute(&in, &p);
    assert_int_equal(p.active, 2);
    assert_int_equal(p.held, 1);
    assert_int_equal(p.ndel, 1);
    assert_int_equal(p.del[0], 2);
    assert_int_equal(p.create, 0); /* the stuck one's delete still counts */
    assert_int_equal(p.requeue, 5 * S + 2 * S);
    pool_plan_done(&p);
}

/* Deletions of stale, other-template and stuck members are capped by max_batch like the
 * excess ones; those left over stay counted as they are for a later pass. Before, a pool of
 * 1000 stale members under Recreate sent 1000 DELETEs in one pass. */
static void test_deletes_capped(void **state)
{
    struct pool_member m[6] = {
        {.ready = true, .created = 1 * S, .stale = true},
        {.ready = true, .created = 1 * S, .stale = true},
        {.ready = true, .created = 1 * S, .other_template = true},
        {.created = 1 * S}, /* stuck past the grace */
        {.created = 1 * S},
        {.ready = true, .created = 1 * S},
    };
    struct pool_plan_in in = {.m = m,
                              .n = 6,
                              .desired = 6,
                              .max_batch = 2,
                              .recreate = true,
                              .grace = 10 * S,
                              .now = 100 * S};
    struct pool_plan p;
    (void)state;
    pool_plan_compute(&in, &p);
    assert_int_equal(p.ndel, 2);
    assert_int_equal(p.del[0], 0);
    assert_int_equal(p.del[1], 1);
    assert_int_equal(p.terminating, 2);
    assert_int_equal(p.active, 4); /* the other-template and stuck ones wait their turn */
    assert_int_equal(p.create, 0);
    pool_plan_done(&p);
    /* the excess shares the batch: one stale member, then one of the two excess */
    m[1].stale = m[2].other_template = false;
    m[3].ready = m[4].ready = true;
    in.n = 4;
    in.desired = 1;
    pool_plan_compute(&in, &p);
    assert_int_equal(p.ndel, 2);
    assert_int_equal(p.del[0], 0);
    pool_plan_done(&p);
}

static void test_excess_and_stale(void **state)
{
    struct pool_member m[4] = {
        {.ready = true, .created = 1 * S},
        {.ready = true, .created = 3 * S},
        {.ready = false, .created = 2 * S},
        {.ready = true, .created = 4 * S, .stale = true},
    };
    struct pool_plan_in in = {
        .m = m, .n = 4, .desired = 2, .max_batch = 300, .grace = 100 * S, .now = 5 * S};
    struct pool_plan p;
    (void)state;
    pool_plan_compute(&in, &p); /* OnReplenish: stale stays, excess 2: unready, then newest */
    assert_int_equal(p.ndel, 2);
    assert_int_equal(p.del[0], 2);
    assert_int_equal(p.del[1], 3);
    pool_plan_done(&p);
    in.recreate = true; /* Recreate: stale goes first, then 1 excess */
    pool_plan_compute(&in, &p);
    assert_int_equal(p.ndel, 2);
    assert_int_equal(p.del[0], 3);
    assert_int_equal(p.del[1], 2);
    pool_plan_done(&p);
}

static void test_expectations(void **state)
{
    struct pool_expect *x = pool_expect_new(60 * S);
    (void)state;
    assert_true(pool_expect_try_creations(x, "ns/p", NULL, 3, 0));
    assert_false(
        pool_expect_try_creations(x, "ns/p", NULL, 3, 1)); /* in flight: no double create */
    assert_true(pool_expect_try_creations(x, "ns/other", NULL, 1, 1));
    pool_expect_lower_creations(x, "ns/p", NULL, 2);
    assert_int_equal(pool_expect_pending_creations(x, "ns/p"), 1);
    assert_false(pool_expect_satisfied(x, "ns/p", NULL, 2));
    pool_expect_lower_creations(x, "ns/p", NULL, 5);
    assert_true(pool_expect_satisfied(x, "ns/p", NULL, 2));
    pool_expect_deletion(x, "ns/p", "u1", 3);
    assert_true(pool_expect_deleting(x, "ns/p", "u1", 3));
    assert_false(pool_expect_try_creations(x, "ns/p", NULL, 1, 3));
    pool_expect_deletion_observed(x, "ns/p", "u1");
    assert_true(pool_expect_satisfied(x, "ns/p", NULL, 4));
    /* A lost event: the record expires. */
    assert_true(pool_expect_try_creations(x, "ns/p", NULL, 1, 10));
    assert_false(pool_expect_satisfied(x, "ns/p", NULL, 10 + 59 * S));
    assert_true(pool_expect_satisfied(x, "ns/p", NULL, 10 + 61 * S));
    pool_expect_free(x);
}

/* A member of the template the pool used before is replaced under OnReplenish too, and
 * counts as going (the refill does not wait for it). */
static void test_other_template_replaced(void **state)
{
    struct pool_member m[2] = {
        {.ready = true, .created = 1 * S},
        {.ready = true, .created = 2 * S, .stale = true, .other_template = true},
    };
    struct pool_plan_in in = {
        .m = m, .n = 2, .desired = 2, .max_batch = 300, .grace = 100 * S, .now = 5 * S};
    struct pool_plan p;
    (void)state;
    pool_plan_compute(&in, &p);
    assert_int_equal(p.ndel, 1);
    assert_int_equal(p.del[0], 1);
    assert_int_equal(p.active, 1);
    assert_int_equal(p.terminating, 1);
    pool_plan_done(&p);
}

/* A pool made again under its name: the first one's creates are not its own. */
static void test_expectations_by_uid(void **state)
{
    struct pool_expect *x = pool_expect_new(60 * S);
    (void)state;
    assert_true(pool_expect_try_creations(x, "ns/p", "old", 2, 0));
    /* the new pool is not held by the old one's creates, and records its own */
    assert_true(pool_expect_satisfied(x, "ns/p", "new", 1));
    assert_true(pool_expect_try_creations(x, "ns/p", "new", 1, 1));
    pool_expect_lower_creations(x, "ns/p", "old", 1); /* the old one's create seen */
    assert_int_equal(pool_expect_pending_creations(x, "ns/p"), 1);
    assert_false(pool_expect_satisfied(x, "ns/p", "new", 2));
    pool_expect_lower_creations(x, "ns/p", "new", 1);
    assert_true(pool_expect_satisfied(x, "ns/p", "new", 2));
    pool_expect_free(x);
}

static void test_bucket(void **state)
{
    struct pool_bucket b = {0};
    usec_t wait = 0;
    (void)state;
    assert_int_equal(pool_bucket_take(&b, 0, 50, 0, &wait), 50); /* unpaced */
    assert_int_equal(pool_bucket_take(&b, 10, 50, 0, &wait), 10);
    assert_int_equal(pool_bucket_take(&b, 10, 5, 0, &wait), 0);
    assert_int_equal(wait, 100 * USEC_PER_MSEC);
    assert_int_equal(pool_bucket_take(&b, 10, 5, 300 * USEC_PER_MSEC, &wait), 3);
    pool_bucket_refund(&b, 10, 3);
    assert_int_equal(pool_bucket_take(&b, 10, 5, 300 * USEC_PER_MSEC, &wait), 3);
    /* a tiny rate (an annotation of 1e-300): the wait is bounded, not an overflowed cast */
    struct pool_bucket t = {.tokens = 0, .last = 0, .init = true};
    assert_int_equal(pool_bucket_take(&t, 1e-300, 1, 1, &wait), 0);
    assert_int_equal(wait, LIMIT_EXT_REFILL_WAIT);
    assert_int_equal(pool_bucket_take(&t, 0.001, 1, 2, &wait), 0); /* 1000 s: under the bound */
    assert_true(wait > 999 * USEC_PER_SEC && wait <= 1000 * USEC_PER_SEC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_and_terminating), cmocka_unit_test(test_unready_held_and_stuck),
        cmocka_unit_test(test_excess_and_stale),     cmocka_unit_test(test_deletes_capped),
        cmocka_unit_test(test_expectations),         cmocka_unit_test(test_other_template_replaced),
        cmocka_unit_test(test_expectations_by_uid),  cmocka_unit_test(test_bucket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
