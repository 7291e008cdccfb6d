/* SPDX-License-Identifier: Apache-2.0 */
/* The late-bound configuration's token cache: a pool member's token is cached when the
 * member is made and dropped when it is delivered or the Sandbox goes (lb_forget, from
 * the Sandbox's delete event): members deleted unclaimed, or claimed without env, used
 * to stay cached until the cache's bound, after which no new token was cached. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>

#include "controller/latebind_deliver.h"

static void test_forget(void **state)
{
    (void)state;
    struct lb_state *s = lb_state_new(false, 0);
    lb__cache_put(s, "ns", "p-abc12", "token-1");
    lb__cache_put(s, "ns", "p-def34", "token-2");
    lb__cache_put(s, "other", "p-abc12", "token-3");
    assert_int_equal(lb_cached(s), 3);
    lb_forget(s, "ns", "p-abc12");
    assert_int_equal(lb_cached(s), 2);
    lb_forget(s, "ns", "p-abc12"); /* gone already: nothing */
    lb_forget(s, "ns", "never");
    assert_int_equal(lb_cached(s), 2);
    lb_forget(s, "other", "p-abc12");
    lb_forget(s, "ns", "p-def34");
    assert_int_equal(lb_cached(s), 0);
    lb_forget(NULL, "ns", "x"); /* no late binding configured */
    lb_state_free(s);
}

/* A pool member's token is cached before its create (so the member's delete event always
 * comes after it): a name that has an entry is a live member's, whose token is kept, and
 * the bound is reported, not silently ignored. */
static void test_put_keeps_entry(void **state)
{
    (void)state;
    struct lb_state *s = lb_state_new(false, 0);
    assert_int_equal(lb__cache_put(s, "ns", "p-abc12", "token-1"), 0);
    assert_int_equal(lb__cache_put(s, "ns", "p-abc12", "token-2"), -EEXIST);
    assert_int_equal(lb_cached(s), 1);
    lb_forget(s, "ns", "p-abc12");
    assert_int_equal(lb__cache_put(s, "ns", "p-abc12", "token-2"), 0);
    assert_int_equal(lb_cached(s), 1);
    lb_state_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forget),
        cmocka_unit_test(test_put_keeps_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
