/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/buf: appends, the limit (all-or-nothing), consume, steal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/buf.h"
#include "common/xalloc.h"

static void test_empty(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 16);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_string_equal(buf_str(&b), "");
    buf_reset(&b);
    buf_consume(&b, 5);
    assert_int_equal(b.len, 0);
    char *s = buf_steal(&b);
    assert_string_equal(s, "");
    xfree(s);
    buf_done(&b);
    buf_done(&b); /* idempotent */
}

static void test_appends(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1024);
    assert_int_equal(buf_puts(&b, "ab"), 0);
    assert_int_equal(buf_putc(&b, 'c'), 0);
    assert_int_equal(buf_append(&b, "d\0e", 3), 0);
    assert_int_equal(buf_printf(&b, "-%d-%s", 42, "x"), 0);
    assert_int_equal(b.len, 11);
    assert_memory_equal(b.data, "abcd\0e-42-x", 12); /* NUL-terminated too */
    assert_int_equal(buf_append(&b, NULL, 0), 0);
    assert_int_equal(b.len, 11);
    buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(buf_str(&b), "");
    assert_non_null(b.data); /* memory kept */
    buf_done(&b);
}

static void test_growth(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1u << 20);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(buf_printf(&b, "%04d", i % 10000), 0);
    assert_int_equal(b.len, 40000);
    assert_memory_equal(b.data + 39996, "9999", 4);
    assert_int_equal(b.data[b.len], '\0');
    assert_true(b.cap > b.len);
    buf_done(&b);
}

static void test_limit(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 8);
    assert_int_equal(buf_puts(&b, "12345"), 0);
    /* Over the limit: -E2BIG and nothing appended. */
    assert_int_equal(buf_puts(&b, "6789"), -E2BIG);
    assert_string_equal(buf_str(&b), "12345");
    assert_int_equal(buf_printf(&b, "%s", "abcd"), -E2BIG);
    assert_string_equal(buf_str(&b), "12345");
    /* Exactly at the limit is fine, one more byte is not. */
    assert_int_equal(buf_puts(&b, "678"), 0);
    assert_int_equal(b.len, 8);
    assert_int_equal(buf_putc(&b, 'x'), -E2BIG);
    assert_int_equal(buf_append(&b, "x", SIZE_MAX), -E2BIG);
    assert_string_equal(buf_str(&b), "12345678");
    assert_true(b.cap <= 9); /* never allocates past limit + NUL */
    buf_done(&b);

    buf_init(&b, 0);
    assert_int_equal(buf_putc(&b, 'x'), -E2BIG);
    assert_int_equal(buf_append(&b, "", 0), 0);
    assert_string_equal(buf_str(&b), "");
    buf_done(&b);
}

static void test_unlimited(void **state)
{
    (void)state;
    /* A limit of SIZE_MAX must not wrap when computing the allocation size. */
    struct buf b;
    buf_init(&b, SIZE_MAX);
    for (int i = 0; i < 100; i++)
        assert_int_equal(buf_puts(&b, "0123456789"), 0);
    assert_int_equal(b.len, 1000);
    assert_true(b.cap > 1000);
    assert_memory_equal(b.data + 990, "0123456789", 11);
    buf_done(&b);
}

static void test_consume(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(buf_puts(&b, "hello world"), 0);
    buf_consume(&b, 6);
    assert_string_equal(buf_str(&b), "world");
    assert_int_equal(b.len, 5);
    buf_consume(&b, 0);
    assert_string_equal(buf_str(&b), "world");
    buf_consume(&b, 99);
    assert_int_equal(b.len, 0);
    assert_string_equal(buf_str(&b), "");
    buf_done(&b);
}

static void test_steal(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(buf_puts(&b, "mine"), 0);
    char *s = buf_steal(&b);
    assert_string_equal(s, "mine");
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.limit, 64); /* still usable */
    assert_int_equal(buf_puts(&b, "again"), 0);
    assert_string_equal(buf_str(&b), "again");
    xfree(s);
    buf_done(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),     cmocka_unit_test(test_appends),
        cmocka_unit_test(test_growth),    cmocka_unit_test(test_limit),
        cmocka_unit_test(test_unlimited), cmocka_unit_test(test_consume),
        cmocka_unit_test(test_steal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
