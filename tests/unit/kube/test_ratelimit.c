/* SPDX-License-Identifier: Apache-2.0 */
/* Token bucket arithmetic with an injected clock, and blocking waiters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <pthread.h>

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
    (void)kube_ratelimit_wait(arg);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_rate),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_threads_are_paced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
