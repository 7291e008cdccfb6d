/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile watch streams at the default limits: a frame just over LIMIT_KUBE_WATCH_FRAME
 * fed in chunks (refused without buffering past the limit), nesting far deeper than
 * jansson accepts, a flood of tiny events, events with wrong field types, and ERROR
 * events (410 means relist, anything else is a protocol error). None may crash, and
 * each gets the documented error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/linebuf.h"
#include "kube/watch.h"

static int count_event(void *ctx, const struct kube_event *ev)
{
    (void)ev;
    (*(size_t *)ctx)++;
    return 0;
}

static int count_frame(void *ctx, const char *frame, size_t len)
{
    (void)frame;
    (void)len;
    (*(size_t *)ctx)++;
    return 0;
}

static void test_oversized_frame_in_chunks(void **state)
{
    struct linebuf lb;
    size_t frames = 0, chunk = 64 * 1024, fed = 0;
    char *buf = xmalloc(chunk);
    int r = 0;
    (void)state;
    memset(buf, 'x', chunk);
    linebuf_init(&lb, 0); /* LIMIT_KUBE_WATCH_FRAME */
    while (r == 0 && fed <= LIMIT_KUBE_WATCH_FRAME + chunk) {
        r = linebuf_feed(&lb, buf, chunk, count_frame, &frames);
        assert_true(linebuf_pending(&lb) <= LIMIT_KUBE_WATCH_FRAME);
        fed += chunk;
    }
    assert_int_equal(r, -E2BIG);
    assert_true(fed <= LIMIT_KUBE_WATCH_FRAME + chunk);
    assert_int_equal(frames, 0);
    /* After a reset the stream works again. */
    linebuf_reset(&lb);
    assert_int_equal(linebuf_feed(&lb, "{}\n", 3, count_frame, &frames), 0);
    assert_int_equal(frames, 1);
    linebuf_done(&lb);
    xfree(buf);
}

static void test_deep_nesting(void **state)
{
    size_t n = 200000, events = 0;
    struct buf b;
    (void)state;
    buf_init(&b, 4 * n + 64);
    assert_int_equal(buf_puts(&b, "{\"type\":\"ADDED\",\"object\":{\"a\":"), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(buf_putc(&b, '['), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(buf_putc(&b, ']'), 0);
    assert_int_equal(buf_puts(&b, "}}\n"), 0);
    struct kube_watch *w = kube_watch_new(0, count_event, &events);
    assert_int_equal(kube_watch_feed(w, b.data, b.len), -EPROTO);
    assert_int_equal(events, 0);
    assert_true(kube_watch_error(w)->message[0] != '\0');
    kube_watch_free(w);
    buf_done(&b);
}

static void test_event_flood(void **state)
{
    const char *ev =
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"resourceVersion\":\"7\"}}}\n";
    size_t n = 100000, events = 0, len = strlen(ev);
    struct buf b;
    (void)state;
    buf_init(&b, n * len + 1);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(buf_append(&b, ev, len), 0);
    struct kube_watch *w = kube_watch_new(0, count_event, &events);
    /* Odd-sized chunks, so that frames straddle every boundary. */
    for (size_t off = 0; off < b.len; off += 4093)
        assert_int_equal(kube_watch_feed(w, b.data + off, b.len - off < 4093 ? b.len - off : 4093),
                         0);
    assert_int_equal(events, n);
    assert_string_equal(kube_watch_rv(w), "7");
    kube_watch_free(w);
    buf_done(&b);
}

static void test_wrong_types(void **state)
{
    static const char *const bad[] = {
        "{\"type\":7,\"object\":{}}",
        "{\"type\":\"ADDED\",\"object\":\"str\"}",
        "{\"type\":\"ADDED\",\"object\":null}",
        "{\"type\":[\"ADDED\"],\"object\":{}}",
        "[\"ADDED\",{}]",
        "{\"type\":\"added\",\"object\":{}}",
        "{\"type\":\"ADDED\\u0000\",\"object\":{}}",
        "\"just a string\"",
        "{\"type\":\"ADDED\",\"object\":{}} trailing",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t events = 0;
        struct kube_watch *w = kube_watch_new(0, count_event, &events);
        char frame[256];
        (void)snprintf(frame, sizeof(frame), "%s\n", bad[i]);
        assert_int_equal(kube_watch_feed(w, frame, strlen(frame)), -EPROTO);
        assert_int_equal(events, 0);
        kube_watch_free(w);
    }
}

static void test_error_events(void **state)
{
    static const struct {
        const char *frame;
        int want;
    } cases[] = {
        {"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}"
         "\n",
         -ESTALE},
        {"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"reason\":\"Gone\"}}\n", -ESTALE},
        {"{\"type\":\"ERROR\",\"object\":{\"code\":500,\"message\":\"etcd down\"}}\n", -EPROTO},
        {"{\"type\":\"ERROR\",\"object\":{\"code\":\"410\"}}\n", -EPROTO},
        {"{\"type\":\"ERROR\",\"object\":{\"code\":99999999999999999999}}\n", -EPROTO},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t events = 0;
        struct kube_watch *w = kube_watch_new(0, count_event, &events);
        assert_int_equal(kube_watch_feed(w, cases[i].frame, strlen(cases[i].frame)), cases[i].want);
        assert_int_equal(events, 0);
        kube_watch_free(w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oversized_frame_in_chunks),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_event_flood),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_error_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
