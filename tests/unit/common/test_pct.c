/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/pct: what is escaped (unreserved, keep sets, bytes >= 0x80),
 * decoding with and without form '+', every bad escape, and the buffer limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/pct.h"

static void test_encode(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 256);
    assert_int_equal(pct_encode(&b, "aZ09-._~", NULL), 0);
    assert_string_equal(b.data, "aZ09-._~");
    buf_reset(&b);
    assert_int_equal(pct_encode(&b, "a b/c?d=e&f%\xc3\xa9", NULL), 0);
    assert_string_equal(b.data, "a%20b%2Fc%3Fd%3De%26f%25%C3%A9");
    buf_reset(&b);
    assert_int_equal(pct_encode(&b, "dir/a b/c", "/"), 0);
    assert_string_equal(b.data, "dir/a%20b/c");
    buf_reset(&b);
    assert_int_equal(pct_encode(&b, "50% off: \"x\"\n", PCT_KEEP_PRINTABLE), 0);
    assert_string_equal(b.data, "50%25 off: \"x\"%0A");
    buf_reset(&b);
    assert_int_equal(pct_encode(&b, "", NULL), 0);
    assert_int_equal(b.len, 0);
    buf_done(&b);
}

static void test_encode_limit(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 5);
    assert_int_equal(pct_encode(&b, "ab", NULL), 0);
    assert_int_equal(pct_encode(&b, "c d", NULL), -E2BIG); /* "c%20d" does not fit */
    assert_string_equal(b.data, "ab");
    buf_done(&b);
}

static void test_decode(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(pct_decode(str_c("a%20b%2fc%2F+d"), false, &b), 0);
    assert_string_equal(b.data, "a b/c/+d");
    buf_reset(&b);
    assert_int_equal(pct_decode(str_c("a+b%2B"), true, &b), 0);
    assert_string_equal(b.data, "a b+");
    buf_reset(&b);
    assert_int_equal(pct_decode(STR_NULL, false, &b), 0);
    assert_non_null(b.data);
    assert_int_equal(b.len, 0);
    buf_done(&b);
}

static void test_decode_bad(void **state)
{
    (void)state;
    static const char *const bad[] = {"%", "a%2", "%zz", "%2g", "x%00y", "%%41"};
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(buf_puts(&b, "keep"), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(pct_decode(str_c(bad[i]), false, &b), -EINVAL);
        assert_string_equal(b.data, "keep");
    }
    buf_done(&b);

    buf_init(&b, 3);
    assert_int_equal(pct_decode(str_c("ab%63d"), false, &b), -E2BIG);
    assert_int_equal(b.len, 0);
    assert_int_equal(pct_decode(str_c("ab%63"), false, &b), 0);
    assert_string_equal(b.data, "abc");
    buf_done(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_encode_limit),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_decode_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
