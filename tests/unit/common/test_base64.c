/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/base64: RFC 4648 vectors both ways, whitespace and optional
 * padding, every kind of bad input, and the buffer limit (nothing half-appended). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/base64.h"

/* RFC 4648 §10. */
static const char *const vectors[][2] = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

static void test_vectors(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 64);
    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        buf_reset(&b);
        assert_int_equal(base64_encode(vectors[i][0], strlen(vectors[i][0]), &b), 0);
        assert_non_null(b.data);
        assert_string_equal(b.data, vectors[i][1]);
        assert_int_equal(b.len, BASE64_LEN(strlen(vectors[i][0])));
        buf_reset(&b);
        assert_int_equal(base64_decode(vectors[i][1], strlen(vectors[i][1]), &b), 0);
        assert_non_null(b.data);
        assert_string_equal(b.data, vectors[i][0]);
    }
    buf_done(&b);
}

static void test_binary_roundtrip(void **state)
{
    (void)state;
    unsigned char raw[256];
    for (size_t i = 0; i < sizeof(raw); i++)
        raw[i] = (unsigned char)(255 - i);
    struct buf enc, dec;
    buf_init(&enc, 1024);
    buf_init(&dec, 1024);
    assert_int_equal(base64_encode(raw, sizeof(raw), &enc), 0);
    assert_non_null(strchr(enc.data, '+'));
    assert_non_null(strchr(enc.data, '/'));
    assert_int_equal(base64_decode(enc.data, enc.len, &dec), 0);
    assert_int_equal(dec.len, sizeof(raw));
    assert_memory_equal(dec.data, raw, sizeof(raw));
    buf_done(&enc);
    buf_done(&dec);
}

static void test_lenient_forms(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 16);
    assert_int_equal(base64_decode("aGVs\nbG8=", 9, &b), 0); /* whitespace skipped */
    assert_string_equal(b.data, "hello");
    buf_reset(&b);
    assert_int_equal(base64_decode(" aG Vs\r\n\tbG8= ", 14, &b), 0);
    assert_string_equal(b.data, "hello");
    buf_reset(&b);
    assert_int_equal(base64_decode("aGVsbG8", 7, &b), 0); /* padding optional */
    assert_string_equal(b.data, "hello");
    buf_reset(&b);
    assert_int_equal(base64_decode("aGVsbA", 6, &b), 0);
    assert_string_equal(b.data, "hell");
    buf_done(&b);
}

static void test_bad_input(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "a",                       /* a dangling sextet */
        "aGVsb",                   /* the same after a full quantum */
        "aG=V",                    /* data after padding */
        "a$bc",                    /* outside the alphabet */
        "aGVs-A==",                /* the URL-safe alphabet is not accepted */
        "aGVsbA===", "=", "aGVs=", /* padding after a complete quantum */
    };
    struct buf b;
    buf_init(&b, 16);
    assert_int_equal(buf_puts(&b, "keep"), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(base64_decode(bad[i], strlen(bad[i]), &b), -EINVAL);
        assert_string_equal(b.data, "keep"); /* nothing half-appended */
    }
    assert_int_equal(base64_decode("a\0bc", 4, &b), -EINVAL); /* an embedded NUL */
    buf_done(&b);
}

static void test_limit(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 7);
    assert_int_equal(buf_puts(&b, "ab"), 0);
    assert_int_equal(base64_encode("hello", 5, &b), -E2BIG); /* needs 8 more */
    assert_string_equal(b.data, "ab");
    assert_int_equal(base64_decode("aGVsbG8h", 8, &b), -E2BIG); /* 6 bytes, 5 free */
    assert_string_equal(b.data, "ab");
    assert_int_equal(base64_decode("aGVsbG8=", 8, &b), 0); /* 5 bytes fit exactly */
    assert_string_equal(b.data, "abhello");
    buf_done(&b);

    buf_init(&b, 0); /* empty input still leaves a string */
    assert_int_equal(base64_decode("", 0, &b), 0);
    assert_non_null(b.data);
    assert_int_equal(base64_encode("", 0, &b), 0);
    assert_string_equal(b.data, "");
    buf_done(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),       cmocka_unit_test(test_binary_roundtrip),
        cmocka_unit_test(test_lenient_forms), cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
