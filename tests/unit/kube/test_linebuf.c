/* SPDX-License-Identifier: Apache-2.0 */
/* Watch frame splitter: split frames at every byte boundary, oversize, blank lines, CRLF. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/buf.h"
#include "kube/linebuf.h"

/* Collects frames joined with '|' so a whole run compares as one string. */
struct sink {
    struct buf out;
    int frames;
    int fail_at; /* frame number whose callback returns -EPROTO; 0 = never */
};

static void sink_init(struct sink *s)
{
    buf_init(&s->out, 1u << 20);
    s->frames = 0;
    s->fail_at = 0;
}

static int on_frame(void *ctx, const char *frame, size_t len)
{
    struct sink *s = ctx;
    s->frames++;
    assert_true(len > 0);
    assert_null(memchr(frame, '\n', len));
    if (s->fail_at && s->frames == s->fail_at)
        return -EPROTO;
    if (s->out.len)
        assert_int_equal(buf_putc(&s->out, '|'), 0);
    assert_int_equal(buf_append(&s->out, frame, len), 0);
    return 0;
}

static void test_whole_chunk(void **state)
{
    (void)state;
    struct linebuf lb;
    struct sink s;
    sink_init(&s);
    linebuf_init(&lb, 0);
    const char *in = "{\"a\":1}\n{\"b\":2}\n";
    assert_int_equal(linebuf_feed(&lb, in, strlen(in), on_frame, &s), 0);
    assert_string_equal(buf_str(&s.out), "{\"a\":1}|{\"b\":2}");
    assert_int_equal(linebuf_pending(&lb), 0);
    linebuf_done(&lb);
    buf_done(&s.out);
}

/* Every way of cutting the stream into two chunks, and one byte at a time, gives the
 * same frames. */
static void test_split_every_boundary(void **state)
{
    (void)state;
    const char *in = "{\"type\":\"ADDED\"}\n\r\n{\"x\":\"y\"}\r\n\n{\"last\":true}\n";
    const char *want = "{\"type\":\"ADDED\"}|{\"x\":\"y\"}|{\"last\":true}";
    size_t n = strlen(in);
    for (size_t cut = 0; cut <= n; cut++) {
        struct linebuf lb;
        struct sink s;
        sink_init(&s);
        linebuf_init(&lb, 64);
        assert_int_equal(linebuf_feed(&lb, in, cut, on_frame, &s), 0);
        assert_int_equal(linebuf_feed(&lb, in + cut, n - cut, on_frame, &s), 0);
        assert_string_equal(buf_str(&s.out), want);
        assert_int_equal(linebuf_pending(&lb), 0);
        linebuf_done(&lb);
        buf_done(&s.out);
    }
    struct linebuf lb;
    struct sink s;
    sink_init(&s);
    linebuf_init(&lb, 64);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(linebuf_feed(&lb, in + i, 1, on_frame, &s), 0);
    assert_string_equal(buf_str(&s.out), want);
    assert_int_equal(s.frames, 3);
    linebuf_done(&lb);
    buf_done(&s.out);
}

static void test_partial_is_held(void **state)
{
    (void)state;
    struct linebuf lb;
    struct sink s;
    sink_init(&s);
    linebuf_init(&lb, 0);
    assert_int_equal(linebuf_feed(&lb, "{\"a\":", 5, on_frame, &s), 0);
    assert_int_equal(s.frames, 0);
    assert_int_equal(linebuf_pending(&lb), 5);
    assert_int_equal(linebuf_feed(&lb, "1}", 2, on_frame, &s), 0);
    assert_int_equal(s.frames, 0);
    assert_int_equal(linebuf_feed(&lb, "\n", 1, on_frame, &s), 0);
    assert_int_equal(s.frames, 1);
    assert_string_equal(buf_str(&s.out), "{\"a\":1}");
    linebuf_reset(&lb);
    assert_int_equal(linebuf_feed(&lb, "abc", 3, on_frame, &s), 0);
    linebuf_reset(&lb);
    assert_int_equal(linebuf_pending(&lb), 0);
    assert_int_equal(linebuf_feed(&lb, "d\n", 2, on_frame, &s), 0);
    assert_string_equal(buf_str(&s.out), "{\"a\":1}|d");
    linebuf_done(&lb);
    buf_done(&s.out);
}

static void test_blank_lines_and_crlf(void **state)
{
    (void)state;
    struct linebuf lb;
    struct sink s;
    sink_init(&s);
    linebuf_init(&lb, 0);
    const char *in = "\n\n\r\n  \t\r\nA\r\nB\n\r\n";
    assert_int_equal(linebuf_feed(&lb, in, strlen(in), on_frame, &s), 0);
    assert_string_equal(buf_str(&s.out), "A|B");
    assert_int_equal(s.frames, 2);
    linebuf_done(&lb);
    buf_done(&s.out);
}

/* A frame of exactly the limit passes; one byte more fails, whether it comes in one
 * chunk, with the newline, or without any newline at all (no unbounded growth). */
static void test_oversize(void **state)
{
    (void)state;
    char big[40];
    memset(big, 'x', sizeof(big));
    struct linebuf lb;
    struct sink s;
    sink_init(&s);
    linebuf_init(&lb, 16);

    assert_int_equal(linebuf_feed(&lb, big, 16, on_frame, &s), 0);
    assert_int_equal(linebuf_feed(&lb, "\n", 1, on_frame, &s), 0);
    assert_int_equal(s.frames, 1);
    assert_int_equal(linebuf_feed(&lb, big, 17, on_frame, &s), -E2BIG);
    assert_int_equal(linebuf_pending(&lb), 0);

    char line[19];
    memset(line, 'y', 17);
    line[17] = '\n';
    assert_int_equal(linebuf_feed(&lb, line, 18, on_frame, &s), -E2BIG);
    assert_int_equal(linebuf_feed(&lb, big, 10, on_frame, &s), 0);
    assert_int_equal(linebuf_feed(&lb, big, 7, on_frame, &s), -E2BIG);
    assert_int_equal(linebuf_pending(&lb), 0);
    assert_true(lb.tail.cap <= 17);

    /* after the error the splitter works again for a fresh stream */
    assert_int_equal(linebuf_feed(&lb, "ok\n", 3, on_frame, &s), 0);
    assert_int_equal(s.frames, 2);
    linebuf_done(&lb);
    buf_done(&s.out);
}

static void test_callback_error_stops(void **state)
{
    (void)state;
    struct linebuf lb;
    struct sink s;
    sink_init(&s);
    s.fail_at = 2;
    linebuf_init(&lb, 0);
    const char *in = "a\nb\nc\nd";
    assert_int_equal(linebuf_feed(&lb, in, strlen(in), on_frame, &s), -EPROTO);
    assert_int_equal(s.frames, 2);
    assert_string_equal(buf_str(&s.out), "a");
    assert_int_equal(linebuf_pending(&lb), 0);
    linebuf_done(&lb);
    linebuf_done(NULL);
    buf_done(&s.out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_chunk),     cmocka_unit_test(test_split_every_boundary),
        cmocka_unit_test(test_partial_is_held), cmocka_unit_test(test_blank_lines_and_crlf),
        cmocka_unit_test(test_oversize),        cmocka_unit_test(test_callback_error_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
