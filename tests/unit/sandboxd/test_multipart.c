/* SPDX-License-Identifier: Apache-2.0 */
/* The streaming multipart parser fed in every split (one byte at a time included), with
 * quoted parameters, skipped parts, transport padding, truncated and malformed bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/xalloc.h"
#include "sandboxd/multipart.h"

struct sink {
    struct buf names, data;
    int parts;
};

static int on_begin(void *ctx, struct str name, struct str filename)
{
    struct sink *s = ctx;
    buf_printf(&s->names, "[%.*s|%.*s]", (int)name.len, name.p, (int)filename.len,
               filename.p ? filename.p : "");
    return str_eq_c(name, "file") ? 1 : 0;
}

static int on_data(void *ctx, struct str data)
{
    struct sink *s = ctx;
    return buf_append(&s->data, data.p, data.len);
}

static int on_end(void *ctx)
{
    ((struct sink *)ctx)->parts++;
    return 0;
}

/* Feeds body in pieces of step bytes; returns the final result. */
static int feed(const char *boundary, const char *body, size_t step, struct sink *s)
{
    struct sbd_multipart m;
    buf_init(&s->names, 4096);
    buf_init(&s->data, 1 << 20);
    s->parts = 0;
    sbd_multipart_init(&m, boundary, on_begin, on_data, on_end, s);
    size_t n = strlen(body), off = 0;
    int r = 0;
    while (r == 0 && off < n) {
        size_t k = n - off < step ? n - off : step;
        r = sbd_multipart_feed(&m, str_make(body + off, k), false);
        off += k;
    }
    if (r == 0)
        r = sbd_multipart_feed(&m, STR_NULL, true);
    sbd_multipart_done(&m);
    return r;
}

static void sink_done(struct sink *s)
{
    buf_done(&s->names);
    buf_done(&s->data);
}

static void test_splits(void **state)
{
    (void)state;
    const char *body = "preamble\r\n--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n"
                       "skip me\r\n--B  \r\nContent-Disposition: form-data; name=\"file\"; "
                       "filename=\"x;\\\"y\\\".txt\"\r\n\r\n--B\r-\r\n--Bx\r\nend\r\n--B--\r\n"
                       "epilogue";
    for (size_t step = 1; step <= strlen(body); step++) {
        struct sink s;
        assert_int_equal(feed("B", body, step, &s), 1);
        assert_string_equal(buf_str(&s.names), "[a|][file|x;\"y\".txt]");
        assert_int_equal(s.data.len, strlen("--B\r-\r\n--Bx\r\nend"));
        assert_memory_equal(s.data.data, "--B\r-\r\n--Bx\r\nend", s.data.len);
        assert_int_equal(s.parts, 1);
        sink_done(&s);
    }
}

static void test_errors(void **state)
{
    (void)state;
    struct sink s;
    /* Ends before the closing delimiter. */
    assert_int_equal(
        feed("B", "--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nab", 3, &s),
        -EPROTO);
    sink_done(&s);
    assert_int_equal(feed("B", "--Bjunk", 2, &s), -EPROTO);
    sink_done(&s);
    assert_int_equal(feed("B", "no boundary at all", 4, &s), -EPROTO);
    sink_done(&s);
    /* Oversized part headers. */
    char *big = xmalloc(40000);
    memset(big, 'h', 39999);
    big[39999] = '\0';
    memcpy(big, "--B\r\nX: ", 8);
    assert_int_equal(feed("B", big, 1000, &s), -E2BIG);
    sink_done(&s);
    xfree(big);
    /* Part headers over the limit whose end is in the same piece: refused as well (the
     * same body got 204 in one piece and 413 split) */
    char *whole = xmalloc(20100);
    memset(whole, 'h', 20099);
    whole[20099] = '\0';
    memcpy(whole, "--B\r\nX: ", 8);
    static const char tail[] = "\r\n\r\ndata\r\n--B--\r\n";
    memcpy(whole + 20099 - (sizeof(tail) - 1), tail, sizeof(tail) - 1);
    for (size_t step = 1000; step <= 40000; step *= 40) {
        assert_int_equal(feed("B", whole, step, &s), -E2BIG);
        sink_done(&s);
    }
    xfree(whole);
    /* An empty part (no headers at all) is accepted and skipped. */
    assert_int_equal(feed("B", "--B\r\n\r\ndata\r\n--B--", 5, &s), 1);
    assert_string_equal(buf_str(&s.names), "[|]");
    sink_done(&s);
}

/* In a quoted filename only \" and \\ are escapes: a\b.txt keeps its backslash. */
static void test_filename_backslash(void **state)
{
    (void)state;
    struct sink s;
    assert_int_equal(feed("B",
                          "--B\r\nContent-Disposition: form-data; name=\"file\"; "
                          "filename=\"a\\b \\\\ \\\"q\\\".txt\"\r\n\r\nx\r\n--B--",
                          7, &s),
                     1);
    assert_string_equal(buf_str(&s.names), "[file|a\\b \\ \"q\".txt]");
    sink_done(&s);
}

/* Thousands of tiny parts in one piece: all seen (the parser's read offset moves; the
 * buffer is compacted once per feed). */
static void test_many_parts(void **state)
{
    (void)state;
    struct buf body;
    struct sink s;
    buf_init(&body, 1 << 22);
    for (int i = 0; i < 20000; i++)
        assert_int_equal(buf_puts(&body, "--B\r\nContent-Disposition: form-data; name=\"n\"\r\n"
                                         "\r\nv\r\n"),
                         0);
    assert_int_equal(buf_puts(&body, "--B\r\nContent-Disposition: form-data; name=\"file\"\r\n"
                                     "\r\nlast\r\n--B--\r\n"),
                     0);
    assert_int_equal(feed("B", buf_str(&body), 1 << 16, &s), 1);
    assert_int_equal(s.parts, 1);
    assert_int_equal(s.data.len, 4);
    assert_memory_equal(s.data.data, "last", 4);
    sink_done(&s);
    buf_done(&body);
}

static void test_boundary_param(void **state)
{
    (void)state;
    char *b = NULL;
    assert_int_equal(sbd_multipart_boundary(STR_LIT("multipart/form-data; boundary=abc"), &b), 0);
    assert_string_equal(b, "abc");
    xfree(b);
    assert_int_equal(
        sbd_multipart_boundary(STR_LIT("Multipart/Form-Data; charset=x; boundary=\"a b\""), &b), 0);
    assert_string_equal(b, "a b");
    xfree(b);
    assert_int_equal(sbd_multipart_boundary(STR_LIT("application/json"), &b), -ENOENT);
    assert_int_equal(sbd_multipart_boundary(STR_LIT("multipart/form-data"), &b), -EINVAL);
    assert_int_equal(sbd_multipart_boundary(STR_LIT("multipart/form-data; boundary="), &b),
                     -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_splits),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_filename_backslash),
        cmocka_unit_test(test_many_parts),
        cmocka_unit_test(test_boundary_param),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
