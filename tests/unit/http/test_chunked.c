/* SPDX-License-Identifier: Apache-2.0 */
/* Chunked decoder: framing, every split point, limits and hostile sizes. */
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
#include "http/parse.h"

/* Feeds in pieces of at most step bytes (0: all at once). Returns 1 complete (with the
 * decoded data in out and *ret_used the bytes of the body), 0 incomplete, or the error. */
static int decode(const char *in, size_t len, size_t step, struct buf *out, size_t *ret_used,
                  struct http_parse_err *e)
{
    struct http_chunked c;
    http_chunked_init(&c);
    buf_reset(out);
    size_t off = 0;
    while (off < len) {
        size_t n = step && len - off > step ? step : len - off;
        char *piece = xmalloc(n); /* exact size: ASan catches overreads */
        memcpy(piece, in + off, n);
        size_t used = 0;
        struct str data;
        int r = http_chunked_feed(&c, piece, n, &used, &data, e);
        if (r >= 0)
            assert_int_equal(buf_append(out, data.p, data.len), 0);
        xfree(piece);
        if (r < 0)
            return r;
        assert_true(used > 0 || r == 1);
        off += used;
        if (r == 1) {
            *ret_used = off;
            return 1;
        }
    }
    return 0;
}

static const char body[] = "5\r\nhello\r\n1;ext=\"v\"\r\n \r\n"
                           "1A\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                           "0\r\nTrailer-A: x\r\nB: y\r\n\r\nNEXT";

static void test_decode(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1024);
    size_t used = 0;
    assert_int_equal(decode(body, sizeof(body) - 1, 0, &out, &used, NULL), 1);
    assert_string_equal(buf_str(&out), "hello abcdefghijklmnopqrstuvwxyz");
    assert_int_equal(used, sizeof(body) - 1 - 4);
    buf_done(&out);
}

static void test_every_split(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 1024);
    size_t len = sizeof(body) - 1 - 4;
    for (size_t step = 1; step <= len; step++) {
        size_t used = 0;
        assert_int_equal(decode(body, len, step, &out, &used, NULL), 1);
        assert_string_equal(buf_str(&out), "hello abcdefghijklmnopqrstuvwxyz");
        assert_int_equal(used, len);
    }
    /* two pieces split at every boundary */
    for (size_t k = 0; k <= len; k++) {
        struct http_chunked c;
        http_chunked_init(&c);
        buf_reset(&out);
        const char *parts[2] = {body, body + k};
        size_t lens[2] = {k, len - k};
        int r = 0;
        for (int p = 0; p < 2; p++) {
            size_t off = 0;
            while (off < lens[p] && r == 0) {
                size_t used;
                struct str d;
                r = http_chunked_feed(&c, parts[p] + off, lens[p] - off, &used, &d, NULL);
                assert_true(r >= 0);
                assert_int_equal(buf_append(&out, d.p, d.len), 0);
                off += used;
            }
        }
        assert_int_equal(r, 1);
        assert_string_equal(buf_str(&out), "hello abcdefghijklmnopqrstuvwxyz");
    }
    /* a prefix is incomplete, never an error */
    for (size_t k = 0; k < len; k++) {
        size_t used;
        assert_int_equal(decode(body, k, 0, &out, &used, NULL), 0);
    }
    buf_done(&out);
}

static void test_bad(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int status;
    } cases[] = {
        {"x\r\n", 400},
        {"\r\n", 400},
        {";a\r\n", 400},
        {"-1\r\n", 400},
        {"0x5\r\n", 400},
        {"5 \r\nhello\r\n0\r\n\r\n", 400},
        {" 5\r\nhello\r\n0\r\n\r\n", 400},
        {"5\nhello\r\n0\r\n\r\n", 400},
        {"5\r\nhelloX\r\n0\r\n\r\n", 400},
        {"5\r\nhello\rX0\r\n\r\n", 400},
        {"5\r\nhello\n0\r\n\r\n", 400},
        {"10000000000000000\r\n", 400}, /* 2^64: overflow */
        {"0\r\nA: b\n\r\n", 400},
        {"0\r\n a: b\r\n\r\n", 400},
        {"0\r\nA: \x01\r\n\r\n", 400},
        {"0\r\n\rX", 400},
        {"1;\x01\r\nx\r\n0\r\n\r\n", 400},
    };
    struct buf out;
    buf_init(&out, 1024);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct http_parse_err e = {0};
        size_t used;
        int r = decode(cases[i].in, strlen(cases[i].in), 0, &out, &used, &e);
        if (r >= 0 || e.status != cases[i].status)
            fail_msg("case %zu: r=%d status=%d", i, r, e.status);
    }
    buf_done(&out);
}

static void test_limits(void **state)
{
    (void)state;
    struct buf in, out;
    buf_init(&in, 1u << 20);
    buf_init(&out, 1024);
    struct http_parse_err e;
    size_t used;

    /* the largest 64-bit size parses (the server's body limit rejects it, not us) */
    struct http_chunked c;
    http_chunked_init(&c);
    struct str d;
    assert_int_equal(http_chunked_feed(&c, "ffffffffffffffff\r\n", 18, &used, &d, NULL), 0);
    assert_int_equal(used, 18);
    assert_int_equal(c.remaining, UINT64_MAX);
    /* leading zeros do not overflow */
    static const char lz[] = "00000000000000000001\r\nx\r\n0\r\n\r\n";
    assert_int_equal(decode(lz, strlen(lz), 0, &out, &used, NULL), 1);

    /* a chunk line longer than LIMIT_HTTP_CHUNK_LINE */
    assert_int_equal(buf_puts(&in, "1;"), 0);
    while (in.len < LIMIT_HTTP_CHUNK_LINE)
        assert_int_equal(buf_putc(&in, 'e'), 0);
    assert_int_equal(buf_puts(&in, "\r\nx\r\n0\r\n\r\n"), 0);
    assert_true(decode(in.data, in.len, 0, &out, &used, &e) == -E2BIG);

    /* too many trailer fields */
    buf_reset(&in);
    assert_int_equal(buf_puts(&in, "0\r\n"), 0);
    for (unsigned i = 0; i <= LIMIT_HTTP_HEADERS; i++)
        assert_int_equal(buf_puts(&in, "T: v\r\n"), 0);
    assert_int_equal(buf_puts(&in, "\r\n"), 0);
    assert_true(decode(in.data, in.len, 0, &out, &used, &e) == -E2BIG);
    assert_int_equal(e.status, 431);

    /* a trailer section past the header byte limit */
    buf_reset(&in);
    assert_int_equal(buf_puts(&in, "0\r\nT: "), 0);
    while (in.len <= LIMIT_HTTP_HEADER_BYTES + 8)
        assert_int_equal(buf_putc(&in, 'v'), 0);
    assert_true(decode(in.data, in.len, 0, &out, &used, &e) == -E2BIG);
    buf_done(&in);
    buf_done(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
