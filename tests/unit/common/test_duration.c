/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: the one duration grammar of every binary's flags (common/duration.h),
 * table-driven: Go syntax, bare seconds, syntax errors, negative and too long. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>

#include "common/duration.h"
#include "common/xalloc.h"

/* Go's longest Duration, 2562047h47m16.854775807s, in microseconds. */
#define MAX_USEC (DURATION_MAX_NSEC / 1000)

struct ok_case {
    const char *in;
    usec_t want;
};

static void check_ok(const struct ok_case *v, size_t n, int (*parse)(const char *, usec_t *))
{
    for (size_t i = 0; i < n; i++) {
        usec_t got = 12345;
        int r = parse(v[i].in, &got);
        if (r != 0)
            fail_msg("\"%s\": refused (%d)", v[i].in, r);
        if (got != v[i].want)
            fail_msg("\"%s\": got %llu us, want %llu", v[i].in, (unsigned long long)got,
                     (unsigned long long)v[i].want);
    }
}

static void check_err(const char *const *v, size_t n, int want,
                      int (*parse)(const char *, usec_t *))
{
    for (size_t i = 0; i < n; i++) {
        usec_t got = 777;
        int r = parse(v[i], &got);
        if (r != want)
            fail_msg("\"%s\": got %d, want %d", v[i], r, want);
        assert_int_equal(got, 777); /* untouched on failure */
    }
}

/* Both parsers take every Go duration alike. */
static const struct ok_case go_ok[] = {
    {"0", 0},
    {"+0", 0},
    {"-0", 0},
    {"0s", 0},
    {"-0s", 0},
    {"15s", 15 * USEC_PER_SEC},
    {"+15s", 15 * USEC_PER_SEC},
    {"1m", 60 * USEC_PER_SEC},
    {"300ms", 300 * USEC_PER_MSEC},
    {"1h30m", 5400 * USEC_PER_SEC},
    {"1m30s", 90 * USEC_PER_SEC},
    {"1h2m3.5s", 3723 * USEC_PER_SEC + 500 * USEC_PER_MSEC},
    {"30s1m", 90 * USEC_PER_SEC}, /* any order, as Go */
    {"1s1s", 2 * USEC_PER_SEC},
    {"1.5s", 1500 * USEC_PER_MSEC},
    {".5s", 500 * USEC_PER_MSEC},
    {"2.s", 2 * USEC_PER_SEC},
    {"0.25h", 900 * USEC_PER_SEC},
    {"1.0000000001s", USEC_PER_SEC}, /* below a nanosecond: dropped */
    {"1.00000000000000000000000000001s", USEC_PER_SEC},
    {"0.000000001h", 3}, /* 3.6 us */
    {"250us", 250},
    {"250\xc2\xb5s", 250},
    {"250\xce\xbcs", 250},
    {"1500ns", 1}, /* truncated to microseconds */
    {"999ns", 0},
    {"1h1m1s1ms1us", 3661 * USEC_PER_SEC + USEC_PER_MSEC + 1},
    {"8784h", (usec_t)8784 * 3600 * USEC_PER_SEC},
    {"2562047h47m16.854775807s", MAX_USEC},
    {"9223372036854775807ns", MAX_USEC},
    {"00000000000000000000000001s", USEC_PER_SEC},
};

static void test_go_syntax(void **state)
{
    (void)state;
    check_ok(go_ok, ARRAY_SIZE(go_ok), duration_parse);
    check_ok(go_ok, ARRAY_SIZE(go_ok), duration_parse_secs);
}

static void test_bare_seconds(void **state)
{
    static const struct ok_case v[] = {
        {"30", 30 * USEC_PER_SEC},     {"0.5", 500 * USEC_PER_MSEC},   {".5", 500 * USEC_PER_MSEC},
        {"5.", 5 * USEC_PER_SEC},      {"+5", 5 * USEC_PER_SEC},       {"00", 0},
        {"3600", 3600 * USEC_PER_SEC}, {"1.000001", USEC_PER_SEC + 1},
    };
    static const char *const go_refuses[] = {"30", "0.5", ".5", "00", "1.000001"};
    static const char *const bad[] = {"1m30", "30 ",  " 30", "30 s", "1.5.5", ".",
                                      "1,5",  "0x10", "1e3", "inf",  "nan"};
    (void)state;
    check_ok(v, ARRAY_SIZE(v), duration_parse_secs);
    check_err(go_refuses, ARRAY_SIZE(go_refuses), -EINVAL, duration_parse); /* Go: no unit */
    check_err(bad, ARRAY_SIZE(bad), -EINVAL, duration_parse_secs);
}

static void test_syntax_errors(void **state)
{
    static const char *const v[] = {
        "",     "-",     "+",     "s",     "1x",       "1 s",    "1s ",  " 1s",
        ".s",   "1..5s", "1sm",   "1d",    "5S",       "1e3s",   "1,5s", "m1",
        "--1s", "+-1s",  "1h-1m", "1s+1s", "\xc2\xb5", "1\xc2s", "5MS",  "1_000s",
    };
    (void)state;
    check_err(v, ARRAY_SIZE(v), -EINVAL, duration_parse);
    check_err(v, ARRAY_SIZE(v), -EINVAL, duration_parse_secs);
    assert_int_equal(duration_parse(NULL, NULL), -EINVAL);
    assert_int_equal(duration_parse_secs(NULL, NULL), -EINVAL);
}

static void test_range(void **state)
{
    /* negative, or past Go's longest duration (also within one term) */
    static const char *const v[] = {
        "-1s",
        "-1ns",
        "-1h30m",
        "2562047h47m16.854775808s",
        "9223372036854775808ns",
        "2562048h",
        "99999999999999999999h",
        "99999999999999999999999999999999ns",
        "2562047h2562047h",
        "153722867m1h",
    };
    static const char *const bare[] = {"-1", "-0.5", "9223372037", "99999999999999999999"};
    (void)state;
    check_err(v, ARRAY_SIZE(v), -ERANGE, duration_parse);
    check_err(v, ARRAY_SIZE(v), -ERANGE, duration_parse_secs);
    check_err(bare, ARRAY_SIZE(bare), -ERANGE, duration_parse_secs);
    /* a syntax error after an overflow is still a syntax error */
    assert_int_equal(duration_parse("99999999999999999999hx", &(usec_t){0}), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_go_syntax),
        cmocka_unit_test(test_bare_seconds),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
