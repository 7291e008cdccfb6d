/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/clock: RFC 3339 formatting and strict parsing, deadlines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>

#include "common/clock.h"

#define T_2026 ((usec_t)1796000523 * USEC_PER_SEC) /* 2026-11-30T01:02:03Z */

static void test_format(void **state)
{
    (void)state;
    char b[40];
    clock_format_rfc3339(0, b, sizeof(b));
    assert_string_equal(b, "1970-01-01T00:00:00.000000Z");
    clock_format_rfc3339(T_2026 + 4, b, sizeof(b));
    assert_string_equal(b, "2026-11-30T01:02:03.000004Z");
    clock_format_rfc3339_sec(T_2026 + 999999, b, sizeof(b));
    assert_string_equal(b, "2026-11-30T01:02:03Z");
    clock_format_rfc3339_sec((usec_t)1709251199 * USEC_PER_SEC, b, sizeof(b));
    assert_string_equal(b, "2024-02-29T23:59:59Z");
    /* A short buffer is cut, never overrun. */
    char small[11];
    clock_format_rfc3339(T_2026, small, sizeof(small));
    assert_string_equal(small, "2026-11-30");
}

static void expect_parse(const char *s, usec_t want)
{
    usec_t got = 1;
    assert_int_equal(clock_parse_rfc3339(s, &got), 0);
    assert_true(got == want);
}

static void test_parse(void **state)
{
    (void)state;
    expect_parse("2026-11-30T01:02:03Z", T_2026);
    expect_parse("2026-11-30t01:02:03z", T_2026);
    expect_parse("2026-11-30 01:02:03Z", T_2026);
    expect_parse("2026-11-30T01:02:03.5Z", T_2026 + 500000);
    expect_parse("2026-11-30T01:02:03.000004Z", T_2026 + 4);
    expect_parse("2026-11-30T01:02:03.123456789Z", T_2026 + 123456); /* ns truncated */
    expect_parse("2026-11-30T02:02:03+01:00", T_2026);
    expect_parse("2026-11-29T19:32:03-05:30", T_2026);
    expect_parse("2026-11-30T01:02:03.25+00:00", T_2026 + 250000);
    expect_parse("1970-01-01T00:00:00Z", 0);
    expect_parse("2024-02-29T23:59:59Z", (usec_t)1709251199 * USEC_PER_SEC);
    expect_parse("2000-02-29T00:00:00Z", (usec_t)(946684800 + 59 * 86400) * USEC_PER_SEC);
}

static void test_parse_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "2026-11-30",
        "2026-11-30T01:02:03",
        "2026-11-30T01:02Z",
        "26-11-30T01:02:03Z",
        "2026-1-30T01:02:03Z",
        "2026/11/30T01:02:03Z",
        "2026-11-30X01:02:03Z",
        "2026-00-10T01:02:03Z",
        "2026-13-01T00:00:00Z",
        "2026-11-00T00:00:00Z",
        "2026-11-31T00:00:00Z",
        "2026-02-29T00:00:00Z", /* not a leap year */
        "1900-02-29T00:00:00Z", /* nor this */
        "2026-11-30T24:00:00Z",
        "2026-11-30T01:60:00Z",
        "2026-11-30T01:02:61Z",
        "2026-11-30T01:02:03.Z",
        "2026-11-30T01:02:03.5",
        "2026-11-30T01:02:03+1:00",
        "2026-11-30T01:02:03+01",
        "2026-11-30T01:02:03+0100",
        "2026-11-30T01:02:03+24:00",
        "2026-11-30T01:02:03+01:60",
        "2026-11-30T01:02:03Zjunk",
        "2026-11-30T01:02:03+01:00x",
        " 2026-11-30T01:02:03Z",
        "1969-12-31T23:59:59Z", /* before the epoch: not representable */
        "1970-01-01T00:30:00+01:00",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        usec_t v = 42;
        if (clock_parse_rfc3339(bad[i], &v) != -EINVAL)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_true(v == 42); /* untouched on failure */
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    char b[40];
    srand(7);
    for (int i = 0; i < 2000; i++) {
        /* Up to about year 2200. */
        usec_t t = ((usec_t)rand() << 31 ^ (usec_t)rand()) % ((usec_t)7258118400 * USEC_PER_SEC);
        usec_t back = 0;
        clock_format_rfc3339(t, b, sizeof(b));
        assert_int_equal(clock_parse_rfc3339(b, &back), 0);
        assert_true(back == t);
        clock_format_rfc3339_sec(t, b, sizeof(b));
        assert_int_equal(clock_parse_rfc3339(b, &back), 0);
        assert_true(back == t - t % USEC_PER_SEC);
    }
}

static void test_monotonic_and_deadlines(void **state)
{
    (void)state;
    usec_t a = clock_now();
    clock_sleep(1000);
    usec_t b = clock_now();
    assert_true(b >= a + 1000);
    assert_true(clock_wall_now() > (usec_t)1600000000 * USEC_PER_SEC);

    struct timespec now, dl;
    (void)clock_gettime(CLOCK_MONOTONIC, &now);
    clock_deadline_mono(2 * USEC_PER_SEC + 999999, &dl);
    assert_true(dl.tv_nsec >= 0 && dl.tv_nsec < 1000000000);
    long long diff_us = ((long long)dl.tv_sec - now.tv_sec) * 1000000 +
                        ((long long)dl.tv_nsec - now.tv_nsec) / 1000;
    assert_true(diff_us >= 2999999 && diff_us < 2999999 + 1000000);
    (void)clock_gettime(CLOCK_REALTIME, &now);
    clock_deadline_realtime(500 * USEC_PER_MSEC, &dl);
    assert_true(dl.tv_nsec >= 0 && dl.tv_nsec < 1000000000);
    diff_us = ((long long)dl.tv_sec - now.tv_sec) * 1000000 +
              ((long long)dl.tv_nsec - now.tv_nsec) / 1000;
    assert_true(diff_us >= 500000 && diff_us < 1500000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_monotonic_and_deadlines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
