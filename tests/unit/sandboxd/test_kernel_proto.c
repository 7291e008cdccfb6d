/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel driver protocol: the bounded line splitter fed in every split (overlong
 * lines dropped and reported once, the next line intact) and the event checker (known
 * types with well-typed fields pass, rebuilt with only their fields; anything else fails). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/xalloc.h"
#include "sandboxd/kernel_proto.h"

struct sink {
    struct buf lines; /* "<line>|" per line, "#" per cut */
    int n, cuts;
};

static void on_line(void *ctx, const char *line, size_t n, bool cut)
{
    struct sink *s = ctx;
    if (cut) {
        s->cuts++;
        (void)buf_putc(&s->lines, '#');
        return;
    }
    s->n++;
    (void)buf_append(&s->lines, line, n);
    (void)buf_putc(&s->lines, '|');
}

static void feed_split(const char *in, size_t max, size_t piece, struct sink *s)
{
    struct sbd_kline l;
    sbd_kline_init(&l, max);
    buf_init(&s->lines, 1 << 16);
    s->n = s->cuts = 0;
    size_t len = strlen(in);
    for (size_t i = 0; i < len; i += piece)
        sbd_kline_feed(&l, in + i, len - i < piece ? len - i : piece, on_line, s);
    sbd_kline_done(&l);
}

static void test_lines_every_split(void **state)
{
    (void)state;
    const char *in = "a\n\nbcd\n0123456789\nxy\npart";
    for (size_t piece = 1; piece <= strlen(in); piece++) {
        struct sink s;
        feed_split(in, 5, piece, &s);
        assert_string_equal(buf_str(&s.lines), "a||bcd|#xy|");
        assert_int_equal(s.n, 4);
        assert_int_equal(s.cuts, 1);
        buf_done(&s.lines);
    }
}

static void test_line_at_limit_and_reset(void **state)
{
    (void)state;
    struct sink s;
    feed_split("12345\n123456\n", 5, 64, &s);
    assert_string_equal(buf_str(&s.lines), "12345|#");
    buf_done(&s.lines);
    struct sbd_kline l;
    sbd_kline_init(&l, 16);
    buf_init(&s.lines, 1024);
    s.n = s.cuts = 0;
    sbd_kline_feed(&l, "old-partial", 11, on_line, &s);
    sbd_kline_reset(&l);
    sbd_kline_feed(&l, "new\n", 4, on_line, &s);
    assert_string_equal(buf_str(&s.lines), "new|");
    /* trim frees a large empty buffer, keeps a pending partial line, and feeding goes on */
    sbd_kline_feed(&l, "part", 4, on_line, &s);
    sbd_kline_trim(&l, 0);
    assert_int_equal(l.line.len, 4);
    sbd_kline_feed(&l, "ial\n", 4, on_line, &s);
    sbd_kline_trim(&l, 0);
    assert_null(l.line.data);
    assert_int_equal(l.line.cap, 0);
    sbd_kline_feed(&l, "after\n", 6, on_line, &s);
    assert_string_equal(buf_str(&s.lines), "new|partial|after|");
    sbd_kline_done(&l);
    buf_done(&s.lines);
}

static void expect_ok(const char *line, enum sbd_kevent kind, const char *canonical)
{
    json_t *ev = NULL;
    enum sbd_kevent k = 0;
    assert_int_equal(sbd_kevent_parse(line, strlen(line), &ev, &k), 0);
    assert_int_equal(k, kind);
    char *s = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, canonical);
    xfree(s); /* jansson allocates with malloc */
    json_decref(ev);
}

static void test_events_valid(void **state)
{
    (void)state;
    /* a driver that sends no "started" events (an older one) says nothing of them */
    expect_ok("{\"type\":\"ready\",\"pid\":5}", SBD_KEV_READY,
              "{\"started_events\":false,\"type\":\"ready\"}");
    expect_ok("{\"type\":\"ready\",\"pid\":5,\"started_events\":true}", SBD_KEV_READY,
              "{\"started_events\":true,\"type\":\"ready\"}");
    expect_ok("{\"type\":\"ready\",\"started_events\":\"yes\"}", SBD_KEV_READY,
              "{\"started_events\":false,\"type\":\"ready\"}");
    expect_ok("{\"type\":\"started\",\"x\":1}", SBD_KEV_STARTED, "{\"type\":\"started\"}");
    expect_ok("{\"type\":\"stdout\",\"text\":\"hi\\n\",\"junk\":1}", SBD_KEV_STDOUT,
              "{\"text\":\"hi\\n\",\"type\":\"stdout\"}");
    expect_ok("{\"type\":\"stderr\",\"text\":\"\"}", SBD_KEV_STDERR,
              "{\"text\":\"\",\"type\":\"stderr\"}");
    expect_ok("{\"type\":\"result\",\"data\":{\"text/plain\":\"42\"},\"is_main\":true}",
              SBD_KEV_RESULT,
              "{\"data\":{\"text/plain\":\"42\"},\"is_main\":true,\"type\":\"result\"}");
    expect_ok("{\"type\":\"result\",\"data\":{}}", SBD_KEV_RESULT,
              "{\"data\":{},\"is_main\":false,\"type\":\"result\"}");
    expect_ok("{\"type\":\"display\",\"data\":{\"image/png\":\"iVBO\"}}", SBD_KEV_DISPLAY,
              "{\"data\":{\"image/png\":\"iVBO\"},\"type\":\"display\"}");
    expect_ok("{\"type\":\"error\",\"name\":\"E\",\"value\":\"v\",\"traceback\":\"t\"}",
              SBD_KEV_ERROR,
              "{\"name\":\"E\",\"traceback\":\"t\",\"type\":\"error\",\"value\":\"v\"}");
    expect_ok("{\"type\":\"truncated\"}", SBD_KEV_TRUNCATED, "{\"type\":\"truncated\"}");
    expect_ok("{\"type\":\"end\",\"execution_count\":3,\"truncated\":true}", SBD_KEV_END,
              "{\"execution_count\":3,\"truncated\":true,\"type\":\"end\"}");
}

static void test_events_invalid(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "not json",
        "[1]",
        "{}",
        "{\"type\":5}",
        "{\"type\":\"unknown\"}",
        "{\"type\":\"stdout\"}",
        "{\"type\":\"stdout\",\"text\":7}",
        "{\"type\":\"result\",\"data\":{\"text/plain\":1}}",
        "{\"type\":\"display\",\"data\":\"x\"}",
        "{\"type\":\"error\",\"name\":\"E\",\"value\":\"v\"}",
        "{\"type\":\"end\"}",
        "{\"type\":\"end\",\"execution_count\":-1}",
        "{\"type\":\"stdout\",\"text\":\"a\",\"type\":\"stderr\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *ev = (json_t *)1;
        enum sbd_kevent k = 0;
        assert_int_equal(sbd_kevent_parse(bad[i], strlen(bad[i]), &ev, &k), -EINVAL);
        assert_ptr_equal(ev, (json_t *)1); /* untouched on failure */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_every_split),
        cmocka_unit_test(test_line_at_limit_and_reset),
        cmocka_unit_test(test_events_valid),
        cmocka_unit_test(test_events_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
