/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/str: slices, comparisons, trimming, cutting, strict
 * parsers (numbers, booleans) and the bounded copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>

#include "common/str.h"
#include "common/xalloc.h"

static void test_make_and_eq(void **state)
{
    (void)state;
    struct str a = STR_LIT("abc");
    assert_int_equal(a.len, 3);
    assert_int_equal(str_c(NULL).len, 0);
    assert_int_equal(STR_NULL.len, 0);
    assert_true(str_eq(a, str_c("abc")));
    assert_false(str_eq(a, str_c("abd")));
    assert_false(str_eq(a, str_c("ab")));
    assert_true(str_eq(STR_NULL, str_c("")));
    assert_true(str_eq(str_make("abcdef", 3), a));
    assert_true(str_eq_c(a, "abc"));
    assert_false(str_eq_c(a, "ABC"));
    assert_true(str_eq_nocase(a, str_c("AbC")));
    assert_false(str_eq_nocase(a, str_c("AbD")));
    assert_false(str_eq_nocase(a, str_c("AbCd")));
    assert_true(str_eq(str_make("a\0b", 3), str_make("a\0b", 3)));
    assert_false(str_eq(str_make("a\0b", 3), str_make("a\0c", 3)));
}

static void test_prefix_suffix(void **state)
{
    (void)state;
    struct str s = STR_LIT("/v1/files/x");
    assert_true(str_has_prefix(s, STR_LIT("/v1/")));
    assert_true(str_has_prefix(s, STR_NULL));
    assert_false(str_has_prefix(s, STR_LIT("/v2/")));
    assert_false(str_has_prefix(STR_LIT("/v"), STR_LIT("/v1")));
    assert_true(str_has_suffix(s, STR_LIT("/x")));
    assert_true(str_has_suffix(s, STR_NULL));
    assert_false(str_has_suffix(s, STR_LIT("/y")));
    assert_false(str_has_suffix(STR_LIT("x"), STR_LIT("/x")));
}

static void test_trim_index_cut(void **state)
{
    (void)state;
    assert_true(str_eq_c(str_trim(STR_LIT(" \t a b \r\n")), "a b"));
    assert_int_equal(str_trim(STR_LIT(" \t\r\n ")).len, 0);
    assert_int_equal(str_trim(STR_NULL).len, 0);
    assert_int_equal(str_index(STR_LIT("a=b=c"), '='), 1);
    assert_int_equal(str_index(STR_LIT("abc"), '='), -1);
    assert_int_equal(str_index(STR_NULL, '='), -1);

    struct str head, tail;
    assert_true(str_cut(STR_LIT("k=v=w"), '=', &head, &tail));
    assert_true(str_eq_c(head, "k"));
    assert_true(str_eq_c(tail, "v=w"));
    assert_true(str_cut(STR_LIT("k="), '=', &head, &tail));
    assert_true(str_eq_c(head, "k"));
    assert_int_equal(tail.len, 0);
    assert_false(str_cut(STR_LIT("kv"), '=', &head, &tail));
    assert_true(str_eq_c(head, "kv"));
    assert_int_equal(tail.len, 0);
    assert_false(str_cut(STR_NULL, '=', &head, &tail));
    assert_int_equal(head.len, 0);
}

static void test_dup(void **state)
{
    (void)state;
    char *s = str_dup(str_make("hello", 4));
    assert_string_equal(s, "hell");
    xfree(s);
    s = str_dup(STR_NULL);
    assert_string_equal(s, "");
    xfree(s);
}

static void test_u64(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_int_equal(str_to_u64(STR_LIT("0"), &v), 0);
    assert_true(v == 0);
    assert_int_equal(str_to_u64(STR_LIT("18446744073709551615"), &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(cstr_to_u64("00042", &v), 0);
    assert_true(v == 42);
    v = 7;
    assert_int_equal(str_to_u64(STR_LIT("18446744073709551616"), &v), -ERANGE);
    assert_int_equal(str_to_u64(STR_LIT("99999999999999999999"), &v), -ERANGE);
    static const char *const bad[] = {"", "-1", "+1", " 1", "1 ", "1a", "0x10", "1.5"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(cstr_to_u64(bad[i], &v), -EINVAL);
    assert_int_equal(str_to_u64(str_make("123", 2), &v), 0); /* slice, not the C string */
    assert_true(v == 12);
}

static void test_i64(void **state)
{
    (void)state;
    int64_t v = 7;
    assert_int_equal(cstr_to_i64("-9223372036854775808", &v), 0);
    assert_true(v == INT64_MIN);
    assert_int_equal(cstr_to_i64("9223372036854775807", &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(cstr_to_i64("+12", &v), 0);
    assert_true(v == 12);
    assert_int_equal(cstr_to_i64("-0", &v), 0);
    assert_true(v == 0);
    v = 7;
    assert_int_equal(cstr_to_i64("9223372036854775808", &v), -ERANGE);
    assert_int_equal(cstr_to_i64("-9223372036854775809", &v), -ERANGE);
    assert_int_equal(cstr_to_i64("-", &v), -EINVAL);
    assert_int_equal(cstr_to_i64("--1", &v), -EINVAL);
    assert_int_equal(cstr_to_i64("", &v), -EINVAL);
    assert_int_equal(cstr_to_i64("1-", &v), -EINVAL);
    assert_true(v == 7);
}

static void test_hex(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_int_equal(str_hex_to_u64(STR_LIT("1a"), &v), 0);
    assert_true(v == 26);
    assert_int_equal(str_hex_to_u64(STR_LIT("FfFfFfFfFfFfFfFf"), &v), 0);
    assert_true(v == UINT64_MAX);
    /* Leading zeros do not count towards the 16 digits. */
    assert_int_equal(str_hex_to_u64(STR_LIT("00000000000000000001"), &v), 0);
    assert_true(v == 1);
    v = 7;
    assert_int_equal(str_hex_to_u64(STR_LIT("10000000000000000"), &v), -ERANGE);
    assert_int_equal(str_hex_to_u64(STR_LIT(""), &v), -EINVAL);
    assert_int_equal(str_hex_to_u64(STR_LIT("0x1"), &v), -EINVAL);
    assert_int_equal(str_hex_to_u64(STR_LIT("1g"), &v), -EINVAL);
    assert_int_equal(str_hex_to_u64(STR_LIT("12 "), &v), -EINVAL);
    assert_int_equal(str_hex_to_u64(STR_LIT("-1"), &v), -EINVAL);
    assert_true(v == 7);
}

static void test_bool(void **state)
{
    (void)state;
    static const char *const yes[] = {"1", "t", "T", "true", "True", "TRUE"};
    static const char *const no[] = {"0", "f", "F", "false", "False", "FALSE"};
    static const char *const bad[] = {"", "yes", "no", "on", "tRUE", " true", "true ", "2", "10"};
    bool v = false;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        v = false;
        assert_int_equal(cstr_to_bool(yes[i], &v), 0);
        assert_true(v);
        assert_int_equal(cstr_to_bool(no[i], &v), 0);
        assert_false(v);
    }
    v = true;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(cstr_to_bool(bad[i], &v), -EINVAL);
        assert_true(v); /* untouched */
    }
    assert_int_equal(cstr_to_bool(NULL, &v), -EINVAL);
}

static void test_copy(void **state)
{
    (void)state;
    char b[6];
    assert_int_equal(str_copy(b, sizeof(b), "hello"), 0);
    assert_string_equal(b, "hello");
    assert_int_equal(str_copy(b, sizeof(b), "hello!"), -E2BIG);
    assert_string_equal(b, "hello");
    assert_int_equal(str_copy(b, sizeof(b), ""), 0);
    assert_string_equal(b, "");
    assert_int_equal(str_copy(b, 1, "x"), -E2BIG);
    assert_string_equal(b, "");
    b[0] = 'q';
    assert_int_equal(str_copy(b, 0, "x"), -E2BIG);
    assert_int_equal(b[0], 'q'); /* size 0: nothing written */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_and_eq),
        cmocka_unit_test(test_prefix_suffix),
        cmocka_unit_test(test_trim_index_cut),
        cmocka_unit_test(test_dup),
        cmocka_unit_test(test_u64),
        cmocka_unit_test(test_i64),
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_bool),
        cmocka_unit_test(test_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
