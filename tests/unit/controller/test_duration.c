/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: Go-syntax duration flags (controller/duration.h), table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>

#include "controller/duration.h"

static void test_valid(void **state)
{
    static const struct {
        const char *in;
        usec_t want;
    } v[] = {
        {"0", 0},
        {"0s", 0},
        {"15s", 15 * USEC_PER_SEC},
        {"1m", 60 * USEC_PER_SEC},
        {"500ms", 500 * USEC_PER_MSEC},
        {"1h30m", 5400 * USEC_PER_SEC},
        {"1m30s", 90 * USEC_PER_SEC},
        {"1.5s", 1500 * USEC_PER_MSEC},
        {".5s", 500 * USEC_PER_MSEC},
        {"2.s", 2 * USEC_PER_SEC},
        {"0.25h", 900 * USEC_PER_SEC},
        {"1.0000000001s", USEC_PER_SEC}, /* digits past nanoseconds are dropped */
        {"1.00000000000000000000000000001s", USEC_PER_SEC},
        {"250us", 250},
        {"250\xc2\xb5s", 250},
        {"250\xce\xbcs", 250},
        {"1500ns", 1},
        {"10m", 600 * USEC_PER_SEC},
        {"1h1m1s1ms1us", 3661 * USEC_PER_SEC + USEC_PER_MSEC + 1},
        {"8784h", LIMIT_CTRL_DURATION},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        usec_t got = 12345;
        if (ctrl_duration_parse(v[i].in, &got) != 0)
            fail_msg("%s: refused", v[i].in);
        if (got != v[i].want)
            fail_msg("%s: got %llu us, want %llu", v[i].in, (unsigned long long)got,
                     (unsigned long long)v[i].want);
    }
}

static void test_invalid(void **state)
{
    static const char *const v[] = {
        "",
        "s",
        "15",
        "1.5",
        "-1s",
        "+1s",
        "1x",
        "1 s",
        "1s ",
        " 1s",
        ".s",
        "1..5s",
        "1sm",
        "1d",
        "5S",
        "8785h",
        "99999999999999999999h",
        "1e3s",
        "1,5s",
        "m1",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        usec_t got = 777;
        if (ctrl_duration_parse(v[i], &got) != -EINVAL)
            fail_msg("\"%s\": accepted", v[i]);
        assert_int_equal(got, 777);
    }
    assert_int_equal(ctrl_duration_parse(NULL, NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
