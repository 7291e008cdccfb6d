/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: raising the soft open-file limit (common/fdlimit.h): up to what is asked,
 * capped at the hard limit, never lowered, the old limit reported. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>

#include "common/fdlimit.h"

static rlim_t soft(void)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    return rl.rlim_cur;
}

static void test_raise(void **state)
{
    struct rlimit start, old;
    (void)state;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &start), 0);
    if (start.rlim_max != RLIM_INFINITY && start.rlim_max < 512)
        skip();
    struct rlimit low = {.rlim_cur = 256, .rlim_max = start.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    assert_int_equal(fdlimit_raise(400, &old), 0);
    assert_int_equal(old.rlim_cur, 256);
    assert_int_equal(soft(), 400);
    assert_int_equal(fdlimit_raise(300, NULL), 0); /* never lowered */
    assert_int_equal(soft(), 400);
    if (start.rlim_max != RLIM_INFINITY) {
        assert_int_equal(fdlimit_raise(start.rlim_max + 1000, NULL), 0); /* capped */
        assert_int_equal(soft(), start.rlim_max);
    }
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &start), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_raise)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
