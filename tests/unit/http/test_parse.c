/* SPDX-License-Identifier: Apache-2.0 */
/* Request/response head parser: valid and hostile inputs, limits, incremental feeding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "http/parse.h"

/* Parses req in one go; returns the HTTP status an error maps to, 200 when complete,
 * or 0 when incomplete. */
static int status_of(const char *req, size_t len, struct http_head *h)
{
    struct http_parse_err e = {0};
    int r = http_parse_request(req, len, 0, h, &e);
    if (r < 0) {
        assert_non_null(e.msg);
        return e.status;
    }
    return r > 0 ? 200 : 0;
}

static int status_c(const char *req)
{
    struct http_head h;
    return status_of(req, strlen(req), &h);
}

static void test_simple_get(void **state)
{
    (void)state;
    const char *req =
        "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: h\r\nX-Foo:  bar \t\r\nEmpty:\r\n\r\nREST";
    struct http_head h;
    int r = http_parse_request(req, strlen(req), 0, &h, NULL);
    assert_int_equal(r, (int)strlen(req) - 4);
    assert_true(str_eq_c(h.method, "GET"));
    assert_true(str_eq_c(h.target, "/a/b?x=1&y=2"));
    assert_true(str_eq_c(h.path, "/a/b"));
    assert_true(str_eq_c(h.query, "x=1&y=2"));
    assert_int_equal(h.minor_version, 1);
    assert_int_equal(h.num_headers, 3);
    assert_true(str_eq_c(h.headers[1].name, "X-Foo"));
    assert_true(str_eq_c(h.headers[1].value, "bar"));
    assert_int_equal(h.headers[2].value.len, 0);
    assert_true(str_eq_c(http_head_find(&h, "x-FOO")->value, "bar"));
    assert_null(http_head_find(&h, "nope"));
    assert_int_equal(h.body, HTTP_BODY_NONE);
    assert_true(h.keep_alive);
    assert_false(h.expect_continue);
}

static void test_semantics(void **state)
{
    (void)state;
    struct http_head h;
    const char *r1 = "POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n"
                     "Content-Length: 12\r\nExpect: 100-Continue\r\nConnection: close\r\n\r\n";
    assert_int_equal(status_of(r1, strlen(r1), &h), 200);
    assert_int_equal(h.body, HTTP_BODY_LENGTH);
    assert_int_equal(h.content_length, 12);
    assert_true(h.expect_continue);
    assert_false(h.keep_alive);

    const char *r2 = "POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_int_equal(status_of(r2, strlen(r2), &h), 200);
    assert_int_equal(h.body, HTTP_BODY_CHUNKED);

    const char *r3 = "GET / HTTP/1.0\r\n\r\n";
    assert_int_equal(status_of(r3, strlen(r3), &h), 200);
    assert_false(h.keep_alive);
    assert_int_equal(h.minor_version, 0);

    const char *r4 = "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\nExpect: 100-continue\r\n\r\n";
    assert_int_equal(status_of(r4, strlen(r4), &h), 200);
    assert_true(h.keep_alive);
    assert_false(h.expect_continue); /* ignored for HTTP/1.0 */

    const char *r5 = "GET http://example:80/p/q?z HTTP/1.1\r\nHost: h\r\n"
                     "Connection: keep-alive, Upgrade\r\n\r\n";
    assert_int_equal(status_of(r5, strlen(r5), &h), 200);
    assert_true(str_eq_c(h.path, "/p/q"));
    assert_true(str_eq_c(h.query, "z"));
    assert_true(h.upgrade);

    const char *r6 = "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_int_equal(status_of(r6, strlen(r6), &h), 200);
    assert_true(str_eq_c(h.path, "*"));

    const char *r7 = "GET HTTPS://h HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(status_of(r7, strlen(r7), &h), 200);
    assert_true(str_eq_c(h.path, "/"));
    assert_int_equal(h.body, HTTP_BODY_NONE);
}

static void test_leading_crlf_skipped(void **state)
{
    (void)state;
    struct http_head h;
    const char *req = "\r\n\r\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_int_equal(http_parse_request(req, strlen(req), 0, &h, NULL), (int)strlen(req));
    assert_true(str_eq_c(h.path, "/x"));
    assert_int_equal(status_c("\r\n"), 0);
    assert_int_equal(status_c("\n"), 400);
}

struct bad_case {
    const char *req;
    int status;
    size_t len; /* 0: strlen(req) */
};

#define NUL_CASE "GET / HTTP/1.1\r\nHost: h\r\nA: \x00\r\n\r\n"

#define H        "Host: h\r\n"
static const struct bad_case bad_cases[] = {
    {"get / HTTP/1.1\r\n" H "\r\n", 200}, /* methods are case-sensitive tokens */
    {"G(T / HTTP/1.1\r\n" H "\r\n", 400},
    {" GET / HTTP/1.1\r\n" H "\r\n", 400},
    {"GET  / HTTP/1.1\r\n" H "\r\n", 400},
    {"GET\t/ HTTP/1.1\r\n" H "\r\n", 400},
    {"GET / HTTP/1.1 \r\n" H "\r\n", 400},
    {"GET /\r\n\r\n", 400},
    {"GET / http/1.1\r\n" H "\r\n", 400},
    {"GET / HTTP/1.x\r\n" H "\r\n", 400},
    {"GET / HTTP/11\r\n" H "\r\n", 400},
    {"GET / HTTP/2.0\r\n" H "\r\n", 505},
    {"GET / HTTP/1.2\r\n" H "\r\n", 505},
    {"GET / HTTP/0.9\r\n" H "\r\n", 505},
    {"GET /a#b HTTP/1.1\r\n" H "\r\n", 400},
    {"GET /\x7f HTTP/1.1\r\n" H "\r\n", 400},
    {"GET /\xc3\xa9 HTTP/1.1\r\n" H "\r\n", 400},
    {"GET a/b HTTP/1.1\r\n" H "\r\n", 400},
    {"GET * HTTP/1.1\r\n" H "\r\n", 400},
    {"GET http:/// HTTP/1.1\r\n" H "\r\n", 400},
    {"GET / HTTP/1.1\n" H "\r\n", 400},
    {"GET / HTTP/1.1\r\r\n" H "\r\n", 400},
    {"GET / HTTP/1.1\r\n\r\n", 400},        /* no Host */
    {"GET / HTTP/1.1\r\n" H H "\r\n", 400}, /* two Host */
    {"GET / HTTP/1.0\r\n" H H "\r\n", 400},
    {"GET / HTTP/1.1\r\n" H "Foo : bar\r\n\r\n", 400}, /* space before colon */
    {"GET / HTTP/1.1\r\n" H ": bar\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\n" H "Foo bar\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\n" H "F\"o: bar\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\n" H "Foo: bar\r\n baz\r\n\r\n", 400}, /* obs-fold */
    {"GET / HTTP/1.1\r\n Foo: bar\r\n" H "\r\n", 400},
    {"GET / HTTP/1.1\r\n" H "Foo: b\rar\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\n" H "Foo: bar\n\r\n", 400},
    {"GET / HTTP/1.1\r\n" H "Foo: b\x01r\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\n" H "Foo: b\x7fr\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\n" H "Foo: \xff\xfe\r\n\r\n", 200}, /* obs-text is allowed */
    {"POST / HTTP/1.1\r\n" H "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n", 400},
    {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked, gzip\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip, chunked\r\n\r\n", 501},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked, chunked\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
     400},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: xchunked\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked,\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding:\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: \"chunked\"\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Transfer-Encoding: Chunked\r\n\r\n", 200},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 1, 1\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Content-Length: +1\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Content-Length: -1\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 0x10\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 1 2\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Content-Length:\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Content-Length: 99999999999999999999\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\n" H "Content-Length:  7 \r\n\r\n", 200},
    {"CONNECT h:443 HTTP/1.1\r\n" H "\r\n", 200},
    {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400}, /* TLS on a plain port: early */
    {NUL_CASE, 400, sizeof(NUL_CASE) - 1},
};

static void test_bad_requests(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++) {
        const struct bad_case *c = &bad_cases[i];
        size_t len = c->len ? c->len : strlen(c->req);
        struct http_head h;
        int st = status_of(c->req, len, &h);
        if (st != c->status)
            fail_msg("case %zu (%s): status %d, want %d", i, c->req, st, c->status);
    }
}

/* Every prefix gives "need more" or the final error, and the whole gives the one-shot
 * result, whatever the previous length hint was. */
static void check_incremental(const char *req, size_t len)
{
    struct http_head h1, h2;
    struct http_parse_err e1 = {0}, e2 = {0};
    int want = http_parse_request(req, len, 0, &h1, &e1);
    size_t last = 0;
    for (size_t k = 1; k <= len; k++) {
        char *copy = xmalloc(k); /* exact size so ASan catches reads past the end */
        memcpy(copy, req, k);
        int r = http_parse_request(copy, k, last, &h2, &e2);
        xfree(copy);
        if (k < len && want > 0)
            assert_int_equal(r, 0);
        if (k < len && want < 0 && r != 0) {
            assert_int_equal(r, want);
            assert_int_equal(e2.status, e1.status);
        }
        if (k == len) {
            assert_int_equal(r, want);
            if (r > 0)
                assert_int_equal(h2.num_headers, h1.num_headers);
        }
        last = r == 0 ? k : 0;
    }
}

static void test_incremental_every_split(void **state)
{
    (void)state;
    static const char *valid[] = {
        "GET /a?b HTTP/1.1\r\nHost: h\r\nA: b\r\nCookie: c=d\r\n\r\n",
        "\r\nPOST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.0\r\n\r\n",
    };
    for (size_t i = 0; i < ARRAY_SIZE(valid); i++)
        check_incremental(valid[i], strlen(valid[i]));
    for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++)
        check_incremental(bad_cases[i].req,
                          bad_cases[i].len ? bad_cases[i].len : strlen(bad_cases[i].req));
}

static void test_limits(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1u << 20);
    /* exactly LIMIT_HTTP_HEADERS fields is fine, one more is 431 */
    assert_int_equal(buf_puts(&b, "GET / HTTP/1.1\r\nHost: h\r\n"), 0);
    for (unsigned i = 1; i < LIMIT_HTTP_HEADERS; i++)
        assert_int_equal(buf_printf(&b, "X-%u: v\r\n", i), 0);
    size_t at = b.len;
    assert_int_equal(buf_puts(&b, "\r\n"), 0);
    struct http_head h;
    assert_int_equal(status_of(b.data, b.len, &h), 200);
    assert_int_equal(h.num_headers, LIMIT_HTTP_HEADERS);
    b.len = at;
    assert_int_equal(buf_puts(&b, "X-last: v\r\n\r\n"), 0);
    assert_int_equal(status_of(b.data, b.len, &h), 431);

    /* a long request line: 414 even before it is complete */
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "GET /"), 0);
    for (unsigned i = 0; i < LIMIT_HTTP_REQUEST_LINE; i++)
        assert_int_equal(buf_putc(&b, 'a'), 0);
    assert_int_equal(status_of(b.data, b.len, &h), 414);
    assert_int_equal(buf_puts(&b, " HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    assert_int_equal(status_of(b.data, b.len, &h), 414);

    /* a header section past the limit: 431 whether complete or not */
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "GET / HTTP/1.1\r\nHost: h\r\nBig: "), 0);
    while (b.len <= LIMIT_HTTP_HEADER_BYTES)
        assert_int_equal(buf_putc(&b, 'v'), 0);
    assert_int_equal(status_of(b.data, b.len, &h), 431);
    assert_int_equal(buf_puts(&b, "\r\n\r\n"), 0);
    assert_int_equal(status_of(b.data, b.len, &h), 431);
    buf_done(&b);
}

static int resp_status(const char *s, unsigned flags, struct http_head *h)
{
    struct http_parse_err e = {0};
    int r = http_parse_response(s, strlen(s), 0, flags, h, &e);
    return r < 0 ? -e.status : r > 0 ? h->status : 0;
}

static void test_responses(void **state)
{
    (void)state;
    struct http_head h;
    assert_int_equal(resp_status("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 0, &h), 200);
    assert_int_equal(h.body, HTTP_BODY_LENGTH);
    assert_int_equal(h.content_length, 5);
    assert_true(str_eq_c(h.reason, "OK"));
    assert_true(h.keep_alive);
    assert_int_equal(
        resp_status("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", HTTP_PARSE_RESP_TO_HEAD, &h),
        200);
    assert_int_equal(h.body, HTTP_BODY_NONE);
    assert_int_equal(resp_status("HTTP/1.1 204 No Content\r\n\r\n", 0, &h), 204);
    assert_int_equal(h.body, HTTP_BODY_NONE);
    assert_int_equal(
        resp_status("HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n\r\n", 0, &h), 101);
    assert_true(h.upgrade);
    assert_int_equal(resp_status("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0, &h),
                     200);
    assert_int_equal(h.body, HTTP_BODY_CHUNKED);
    assert_int_equal(resp_status("HTTP/1.0 200 OK\r\n\r\n", 0, &h), 200);
    assert_int_equal(h.body, HTTP_BODY_UNTIL_CLOSE);
    assert_false(h.keep_alive);
    assert_int_equal(resp_status("HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", 0, &h), 404);
    assert_int_equal(h.reason.len, 0);
    assert_int_equal(resp_status("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", 0, &h), 0);
    assert_int_equal(resp_status("HTTP/1.1 20", 0, &h), 0);
    assert_int_equal(resp_status("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n",
                                 0, &h),
                     -400);
    /* another coding than chunked is refused (its bytes would reach the client as the
     * content), chunked last or not */
    assert_int_equal(
        resp_status("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, &h), -502);
    assert_int_equal(resp_status("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, &h),
                     -502);
    assert_int_equal(resp_status("HTTP/1.1 2000 OK\r\n\r\n", 0, &h), -400);
    assert_int_equal(resp_status("HTTP/1.1 099 OK\r\n\r\n", 0, &h), -400);
    assert_int_equal(resp_status("HTTX/1.1 200 OK\r\n\r\n", 0, &h), -400);
    assert_int_equal(resp_status("HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", 0, &h), -400);
    assert_int_equal(resp_status("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
                                 "Content-Length: 2\r\n\r\n",
                                 0, &h),
                     -400);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_get),
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_leading_crlf_skipped),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_incremental_every_split),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_responses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
