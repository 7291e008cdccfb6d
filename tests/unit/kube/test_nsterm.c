/* SPDX-License-Identifier: Apache-2.0 */
/* The table of namespaces seen terminating: marks, expiry and its bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "kube/nsterm.h"

#define T0 ((usec_t)1000 * USEC_PER_SEC)

static void test_mark_and_expire(void **state)
{
    (void)state;
    struct kube_nsterm t;
    kube_nsterm_init(&t);
    assert_int_equal(kube_nsterm_check(&t, "a", T0), -1);
    kube_nsterm_mark(&t, "a", T0);
    assert_int_equal(kube_nsterm_check(&t, "a", T0), 0);
    assert_int_equal(kube_nsterm_check(&t, "a", T0 + 500), 500);
    assert_int_equal(kube_nsterm_check(&t, "b", T0), -1); /* only the one named */
    assert_int_equal(kube_nsterm_check(&t, "", T0), -1);
    assert_int_equal(kube_nsterm_check(&t, NULL, T0), -1);
    /* a second refusal extends the time */
    kube_nsterm_mark(&t, "a", T0 + KUBE_NSTERM_TTL - 1);
    assert_int_equal(kube_nsterm_check(&t, "a", T0 + KUBE_NSTERM_TTL + 5), 6);
    /* and it ends KUBE_NSTERM_TTL after the last one: a namespace made again is served */
    assert_int_equal(kube_nsterm_check(&t, "a", T0 + 2 * KUBE_NSTERM_TTL - 1), -1);
    assert_int_equal(kube_nsterm_check(&t, "a", T0 + 2 * KUBE_NSTERM_TTL + 1), -1);
    kube_nsterm_done(&t);
}

/* The longer memory: creates are answered locally for KUBE_NSTERM_TTL, while "refused
 * within a window" holds for up to KUBE_NSTERM_MEMORY after the last refusal. */
static void test_seen_within(void **state)
{
    (void)state;
    struct kube_nsterm t;
    kube_nsterm_init(&t);
    assert_int_equal(kube_nsterm_seen(&t, "a", T0, KUBE_NSTERM_MEMORY), -1);
    kube_nsterm_mark(&t, "a", T0);
    usec_t later = T0 + KUBE_NSTERM_TTL + 1;
    assert_int_equal(kube_nsterm_check(&t, "a", later), -1); /* creates go out again */
    assert_int_equal(kube_nsterm_seen(&t, "a", later, KUBE_NSTERM_MEMORY), KUBE_NSTERM_TTL + 1);
    assert_int_equal(kube_nsterm_seen(&t, "a", later, KUBE_NSTERM_TTL), -1); /* window */
    /* a window past the memory is the memory */
    assert_int_equal(kube_nsterm_seen(&t, "a", T0 + KUBE_NSTERM_MEMORY, 2 * KUBE_NSTERM_MEMORY),
                     -1);
    /* the slot was freed: a new refusal starts over */
    kube_nsterm_mark(&t, "a", T0 + KUBE_NSTERM_MEMORY + 5);
    assert_int_equal(kube_nsterm_check(&t, "a", T0 + KUBE_NSTERM_MEMORY + 5), 0);
    assert_int_equal(kube_nsterm_seen(&t, "b", later, KUBE_NSTERM_MEMORY), -1);
    assert_int_equal(kube_nsterm_seen(&t, NULL, later, KUBE_NSTERM_MEMORY), -1);
    kube_nsterm_done(&t);
}

static void test_names(void **state)
{
    (void)state;
    struct kube_nsterm t;
    char longest[KUBE_NSTERM_NAME + 1], over[KUBE_NSTERM_NAME + 2];
    kube_nsterm_init(&t);
    memset(longest, 'x', KUBE_NSTERM_NAME);
    longest[KUBE_NSTERM_NAME] = '\0';
    memset(over, 'y', KUBE_NSTERM_NAME + 1);
    over[KUBE_NSTERM_NAME + 1] = '\0';
    kube_nsterm_mark(&t, longest, T0);
    kube_nsterm_mark(&t, over, T0);
    kube_nsterm_mark(&t, "", T0);
    kube_nsterm_mark(&t, NULL, T0);
    assert_int_equal(kube_nsterm_check(&t, longest, T0), 0);
    assert_int_equal(kube_nsterm_check(&t, over, T0), -1); /* not a namespace name */
    /* a prefix is another name */
    longest[KUBE_NSTERM_NAME - 1] = '\0';
    assert_int_equal(kube_nsterm_check(&t, longest, T0), -1);
    kube_nsterm_done(&t);
}

/* More namespaces than slots: the one that expires first makes room, the rest stay. */
static void test_bounded(void **state)
{
    (void)state;
    struct kube_nsterm t;
    char ns[32];
    kube_nsterm_init(&t);
    for (int i = 0; i < KUBE_NSTERM_SLOTS + 8; i++) {
        (void)snprintf(ns, sizeof(ns), "ns-%d", i);
        kube_nsterm_mark(&t, ns, T0 + (usec_t)i);
    }
    int kept = 0;
    for (int i = 0; i < KUBE_NSTERM_SLOTS + 8; i++) {
        (void)snprintf(ns, sizeof(ns), "ns-%d", i);
        long long ago = kube_nsterm_check(&t, ns, T0 + KUBE_NSTERM_SLOTS + 8);
        if (i < 8)
            assert_int_equal(ago, -1); /* the eight oldest went */
        else
            assert_int_equal(ago, KUBE_NSTERM_SLOTS + 8 - i);
        kept += ago >= 0;
    }
    assert_int_equal(kept, KUBE_NSTERM_SLOTS);
    /* an expired slot is reused before a live one is dropped */
    assert_int_equal(kube_nsterm_check(&t, "ns-8", T0 + 8 + KUBE_NSTERM_TTL), -1);
    kube_nsterm_mark(&t, "fresh", T0 + 9);
    assert_int_equal(kube_nsterm_check(&t, "ns-9", T0 + 10), 1);
    assert_int_equal(kube_nsterm_check(&t, "fresh", T0 + 10), 1);
    kube_nsterm_done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mark_and_expire),
        cmocka_unit_test(test_seen_within),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
