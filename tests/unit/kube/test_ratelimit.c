/* SPDX-License-Identifier: Apache-2.0 */
/* Token bucket arithmetic with an injected clock, and blocking waiters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/limits.h"
#include "kube/ratelimit.h"

#define MS USEC_PER_MSEC

static void test_burst_then_rate(void **state)
{
    (void)state;
    struct kube_ratelimit rl;
    usec_t t0 = 1000 * USEC_PER_SEC;
    kube_ratelimit_init(&rl, 10, 3, t0);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 0);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 0);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 0);
    /* the bucket is empty: each further caller waits one more 100 ms slot (in order) */
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 100 * MS);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 200 * MS);
    /* 250 ms refill 2.5 tokens: the debt of 2 is paid and half a token is missing */
    assert_int_equal(kube_ratelimit_reserve(&rl, t0 + 250 * MS), 50 * MS);
    /* a long pause refills only up to the burst */
    usec_t t1 = t0 + 100 * USEC_PER_SEC;
    for (int i = 0; i < 3; i++)
        assert_int_equal(kube_ratelimit_reserve(&rl, t1), 0);
    assert_int_equal(kube_ratelimit_reserve(&rl, t1), 100 * MS);
    /* a clock reading older than the last one does not refill */
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 200 * MS);
    kube_ratelimit_done(&rl);
}

static void test_defaults(void **state)
{
    (void)state;
    struct kube_ratelimit rl;
    kube_ratelimit_init(&rl, 0, 0, 0); /* unlimited */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(kube_ratelimit_reserve(&rl, 0), 0);
    kube_ratelimit_done(&rl);
    kube_ratelimit_init(&rl, 5, 0, 0); /* burst defaults to qps */
    for (int i = 0; i < 5; i++)
        assert_int_equal(kube_ratelimit_reserve(&rl, 0), 0);
    assert_int_equal(kube_ratelimit_reserve(&rl, 0), 200 * MS);
    kube_ratelimit_done(&rl);
    kube_ratelimit_init(&rl, 0.5, 0, 0); /* burst at least 1 */
    assert_int_equal(kube_ratelimit_reserve(&rl, 0), 0);
    assert_int_equal(kube_ratelimit_reserve(&rl, 0), 2 * USEC_PER_SEC);
    kube_ratelimit_done(&rl);
}

static void *waiter(void *arg)
{
    usec_t waited;
    assert_int_equal(kube_ratelimit_wait_by(arg, 0, NULL, &waited), 0);
    return NULL;
}

static void test_threads_are_paced(void **state)
{
    (void)state;
    struct kube_ratelimit rl;
    pthread_t th[8];
    kube_ratelimit_init(&rl, 200, 1, clock_now());
    usec_t start = clock_now();
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&th[i], NULL, waiter, &rl), 0);
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    /* 1 token at once, 7 more at 5 ms each: no one can finish before 35 ms */
    assert_true(clock_now() - start >= 35 * MS);
    kube_ratelimit_done(&rl);
}

/* A token due after the deadline is refused and not taken: the debt stays what it was;
 * one given back is there for the next caller. */
static void test_reserve_by_deadline(void **state)
{
    struct kube_ratelimit rl;
    usec_t t0 = 1000 * USEC_PER_SEC, wait = 1;
    (void)state;
    kube_ratelimit_init(&rl, 10, 1, t0);
    assert_int_equal(kube_ratelimit_reserve_by(&rl, t0, t0 + 50 * MS, &wait), 0);
    assert_int_equal(wait, 0);
    /* the next is due in 100 ms: refused by a 50 ms deadline, three times */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kube_ratelimit_reserve_by(&rl, t0, t0 + 50 * MS, &wait), -ETIMEDOUT);
        assert_int_equal(wait, 0);
    }
    /* nothing was taken by them: still due in 100 ms, not 400 */
    assert_int_equal(kube_ratelimit_reserve_by(&rl, t0, t0 + 100 * MS, &wait), 0);
    assert_int_equal(wait, 100 * MS);
    /* given back: the following one waits 100 ms again, not 200 */
    kube_ratelimit_unreserve(&rl, t0 + 100 * MS, t0);
    assert_int_equal(kube_ratelimit_reserve_by(&rl, t0, 0, &wait), 0);
    assert_int_equal(wait, 100 * MS);
    /* one already due gives back nothing; never above the burst */
    kube_ratelimit_unreserve(&rl, t0 + 100 * MS, t0 + 150 * MS);
    kube_ratelimit_unreserve(&rl, t0 + 100 * MS, t0 + 100 * MS);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0 + 150 * MS), 50 * MS);
    kube_ratelimit_done(&rl);
    kube_ratelimit_init(&rl, 10, 1, t0);
    kube_ratelimit_unreserve(&rl, t0 + 100 * MS, t0);
    kube_ratelimit_unreserve(&rl, t0 + 100 * MS, t0);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 0);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 100 * MS);
    kube_ratelimit_done(&rl);
}

/* A reservation given back with later ones behind it gives back nothing: they were
 * promised their times counting on its token, so the rate holds (each cancel used to let
 * one request more through). The latest one's comes back whole. */
static void test_unreserve_counts_later(void **state)
{
    struct kube_ratelimit rl;
    usec_t t0 = 1000 * USEC_PER_SEC;
    (void)state;
    kube_ratelimit_init(&rl, 10, 1, t0);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 0);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 100 * MS);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0), 200 * MS);
    /* the middle one cancels: the third still goes at 200 ms, so the next is at 300 */
    kube_ratelimit_unreserve(&rl, t0 + 100 * MS, t0 + 10 * MS);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0 + 10 * MS), 290 * MS);
    /* the latest cancels: the next takes its place */
    kube_ratelimit_unreserve(&rl, t0 + 300 * MS, t0 + 10 * MS);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0 + 10 * MS), 290 * MS);
    /* two latest in a row, newest first: both come back */
    kube_ratelimit_unreserve(&rl, t0 + 300 * MS, t0 + 20 * MS);
    kube_ratelimit_unreserve(&rl, t0 + 200 * MS, t0 + 20 * MS);
    assert_int_equal(kube_ratelimit_reserve(&rl, t0 + 20 * MS), 180 * MS);
    kube_ratelimit_done(&rl);
}

struct cancel_wait {
    struct kube_ratelimit *rl;
    atomic_bool cancel;
    atomic_bool returned;
    int r;
};

static void *cancelled_waiter(void *arg)
{
    struct cancel_wait *w = arg;
    usec_t waited;
    w->r = kube_ratelimit_wait_by(w->rl, 0, &w->cancel, &waited);
    atomic_store(&w->returned, true);
    return NULL;
}

/* A wait of an hour ends at its cancel flag (-ECANCELED) and gives its token back. */
static void test_wait_by_cancel(void **state)
{
    struct kube_ratelimit rl;
    struct cancel_wait w = {.rl = &rl};
    pthread_t th;
    usec_t wait, at;
    (void)state;
    kube_ratelimit_init(&rl, 1.0 / 3600, 1, clock_now());
    assert_int_equal(kube_ratelimit_reserve(&rl, clock_now()), 0);
    assert_int_equal(pthread_create(&th, NULL, cancelled_waiter, &w), 0);
    clock_sleep(100 * MS);
    assert_false(atomic_load(&w.returned)); /* it waits */
    atomic_store(&w.cancel, true);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(w.r, -ECANCELED);
    /* its token is back: the next is due in about an hour, not two */
    at = clock_now();
    assert_int_equal(kube_ratelimit_reserve_by(&rl, at, 0, &wait), 0);
    assert_true(wait <= 3600 * USEC_PER_SEC);
    assert_true(wait > 3500 * USEC_PER_SEC);
    /* set before: no wait, nothing taken */
    atomic_store(&w.cancel, true);
    kube_ratelimit_unreserve(&rl, at + wait, clock_now());
    assert_int_equal(kube_ratelimit_wait_by(&rl, 0, &w.cancel, &wait), -ECANCELED);
    assert_int_equal(kube_ratelimit_reserve_by(&rl, clock_now(), 0, &wait), 0);
    assert_true(wait <= 3600 * USEC_PER_SEC);
    kube_ratelimit_done(&rl);
}

/* A tiny rate's wait is capped, not an overflow (which turned into no wait at all). */
static void test_tiny_rate_capped(void **state)
{
    struct kube_ratelimit rl;
    (void)state;
    kube_ratelimit_init(&rl, 1e-15, 1, 0);
    assert_int_equal(kube_ratelimit_reserve(&rl, 0), 0);
    assert_int_equal(kube_ratelimit_reserve(&rl, 0), LIMIT_KUBE_THROTTLE_MAX);
    kube_ratelimit_done(&rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_rate),        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_threads_are_paced),      cmocka_unit_test(test_reserve_by_deadline),
        cmocka_unit_test(test_unreserve_counts_later), cmocka_unit_test(test_wait_by_cancel),
        cmocka_unit_test(test_tiny_rate_capped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
