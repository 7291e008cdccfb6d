/* SPDX-License-Identifier: Apache-2.0 */
/* Watch event decoding, the stream decoder (framing + resourceVersion tracking + ERROR
 * handling) and the reconnect back-off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/watch.h"

static char *read_fixture(const char *name, size_t *ret_len)
{
    const char *dir = getenv("AS_TEST_DATA");
    assert_non_null(dir);
    char *path = xasprintf("%s/watch/%s", dir, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    struct buf b;
    buf_init(&b, 1u << 20);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        assert_int_equal(buf_append(&b, chunk, n), 0);
    fclose(f);
    xfree(path);
    *ret_len = b.len;
    return buf_steal(&b);
}

static void decode_ok(const char *frame, enum kube_event_type type, const char *rv)
{
    struct kube_event ev = {0};
    struct kube_err err;
    assert_int_equal(kube_event_decode(frame, strlen(frame), &ev, &err), 0);
    assert_int_equal(ev.type, type);
    assert_true(json_is_object(ev.object));
    if (rv)
        assert_string_equal(ev.resource_version, rv);
    else
        assert_null(ev.resource_version);
    kube_event_done(&ev);
    assert_null(ev.object);
}

static void test_decode_each_type(void **state)
{
    (void)state;
    decode_ok("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\"}}}",
              KUBE_EVENT_ADDED, "1");
    decode_ok("{\"object\":{\"metadata\":{\"resourceVersion\":\"2\"}},\"type\":\"MODIFIED\"}",
              KUBE_EVENT_MODIFIED, "2");
    decode_ok("{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"resourceVersion\":\"3\"}}}",
              KUBE_EVENT_DELETED, "3");
    decode_ok("{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"4\"}}}",
              KUBE_EVENT_BOOKMARK, "4");
    decode_ok("{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}",
              KUBE_EVENT_ERROR, NULL);
    assert_string_equal(kube_event_type_name(KUBE_EVENT_BOOKMARK), "BOOKMARK");
    assert_string_equal(kube_event_type_name((enum kube_event_type)99), "UNKNOWN");
}

static void test_decode_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "not json",
        "{\"type\":\"ADDED\",\"object\":{",
        "[1,2,3]",
        "\"ADDED\"",
        "{\"object\":{}}",
        "{\"type\":\"CREATED\",\"object\":{}}",
        "{\"type\":7,\"object\":{}}",
        "{\"type\":\"ADDED\"}",
        "{\"type\":\"ADDED\",\"object\":\"x\"}",
        "{\"type\":\"ADDED\",\"object\":null}",
        "{\"type\":\"ADDED\",\"object\":{}} trailing",
        "",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct kube_event ev = {.type = KUBE_EVENT_BOOKMARK, .object = NULL};
        struct kube_err err = {0};
        assert_int_equal(kube_event_decode(bad[i], strlen(bad[i]), &ev, &err), -EPROTO);
        assert_int_equal(err.code, -EPROTO);
        assert_true(err.message[0] != '\0');
        assert_null(ev.object);
        assert_int_equal(ev.type, KUBE_EVENT_BOOKMARK);
        /* reterr is optional */
        assert_int_equal(kube_event_decode(bad[i], strlen(bad[i]), &ev, NULL), -EPROTO);
    }
    /* the length bounds the parse: a valid prefix of a longer buffer */
    const char *two = "{\"type\":\"ADDED\",\"object\":{}}{\"x\":1}";
    struct kube_event ev = {0};
    assert_int_equal(kube_event_decode(two, 28, &ev, NULL), 0);
    kube_event_done(&ev);
    kube_event_done(NULL);
}

static void test_event_status(void **state)
{
    (void)state;
    struct kube_event ev = {0};
    struct kube_err err;
    const char *gone = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\","
                       "\"message\":\"too old resource version\",\"reason\":\"Expired\","
                       "\"code\":410}}";
    assert_int_equal(kube_event_decode(gone, strlen(gone), &ev, NULL), 0);
    assert_true(kube_event_is_gone(&ev));
    assert_int_equal(kube_event_status(&ev, &err), 0);
    assert_int_equal(err.code, -ESTALE);
    assert_int_equal(err.http_status, 410);
    assert_string_equal(err.reason, "Expired");
    assert_string_equal(err.message, "too old resource version");
    kube_event_done(&ev);

    const char *gone_reason = "{\"type\":\"ERROR\",\"object\":{\"reason\":\"Gone\"}}";
    assert_int_equal(kube_event_decode(gone_reason, strlen(gone_reason), &ev, NULL), 0);
    assert_true(kube_event_is_gone(&ev));
    kube_event_done(&ev);

    const char *internal = "{\"type\":\"ERROR\",\"object\":{\"reason\":\"InternalError\","
                           "\"code\":500}}";
    assert_int_equal(kube_event_decode(internal, strlen(internal), &ev, NULL), 0);
    assert_false(kube_event_is_gone(&ev));
    assert_int_equal(kube_event_status(&ev, &err), 0);
    assert_int_equal(err.code, -EIO);
    assert_int_equal(err.http_status, 500);
    assert_string_equal(err.message, "watch ERROR event");
    kube_event_done(&ev);

    const char *added = "{\"type\":\"ADDED\",\"object\":{\"code\":410}}";
    assert_int_equal(kube_event_decode(added, strlen(added), &ev, NULL), 0);
    assert_false(kube_event_is_gone(&ev));
    assert_int_equal(kube_event_status(&ev, &err), -EINVAL);
    kube_event_done(&ev);
}

/* Records events as "TYPE name rv;" so a run compares as one string. */
struct rec {
    struct buf log;
    int fail_at; /* event number whose callback returns -ECANCELED */
    int n;
};

static int on_event(void *ctx, const struct kube_event *ev)
{
    struct rec *rc = ctx;
    const json_t *md = json_object_get(ev->object, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    rc->n++;
    if (rc->fail_at && rc->n == rc->fail_at)
        return -ECANCELED;
    assert_int_equal(buf_printf(&rc->log, "%s %s %s;", kube_event_type_name(ev->type),
                                name ? name : "-", ev->resource_version),
                     0);
    return 0;
}

static const char *const events_log = "ADDED a 101;MODIFIED a 102;BOOKMARK - 150;DELETED a 151;";

static void test_stream_every_split(void **state)
{
    (void)state;
    size_t len;
    char *data = read_fixture("events.ndjson", &len);
    for (size_t cut = 0; cut <= len; cut++) {
        struct rec rc = {0};
        buf_init(&rc.log, 4096);
        struct kube_watch *w = kube_watch_new(0, on_event, &rc);
        assert_null(kube_watch_rv(w));
        assert_int_equal(kube_watch_feed(w, data, cut), 0);
        assert_int_equal(kube_watch_feed(w, data + cut, len - cut), 0);
        assert_string_equal(buf_str(&rc.log), events_log);
        assert_string_equal(kube_watch_rv(w), "151");
        assert_int_equal(kube_watch_events(w), 4);
        assert_int_equal(kube_watch_error(w)->code, 0);
        kube_watch_free(w);
        buf_done(&rc.log);
    }
    xfree(data);
}

/* The resourceVersion follows every event, a bookmark included. */
static void test_bookmark_advances_rv(void **state)
{
    (void)state;
    struct rec rc = {0};
    buf_init(&rc.log, 4096);
    struct kube_watch *w = kube_watch_new(0, on_event, &rc);
    kube_watch_set_rv(w, "10");
    assert_string_equal(kube_watch_rv(w), "10");
    const char *bm =
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"99\"}}}\n";
    assert_int_equal(kube_watch_feed(w, bm, strlen(bm)), 0);
    assert_string_equal(kube_watch_rv(w), "99");
    /* an event without a resourceVersion keeps the last one */
    const char *norv = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"x\"}}}\n";
    assert_int_equal(kube_watch_feed(w, norv, strlen(norv)), 0);
    assert_string_equal(kube_watch_rv(w), "99");
    kube_watch_set_rv(w, NULL);
    assert_null(kube_watch_rv(w));
    kube_watch_free(w);
    kube_watch_free(NULL);
    buf_done(&rc.log);
}

/* A handler that strips the object's metadata (as a store transform may). */
static int strip_metadata(void *ctx, const struct kube_event *ev)
{
    int *calls = ctx;
    (*calls)++;
    assert_string_equal(ev->resource_version, "4242");
    assert_int_equal(json_object_del(ev->object, "metadata"), 0);
    /* the event's resourceVersion outlives the field it came from */
    assert_string_equal(ev->resource_version, "4242");
    return 0;
}

/* The decoder advances to the event's resourceVersion after a handler dropped it from the
 * object (freed memory read before: ASan's heap-use-after-free). */
static void test_rv_survives_handler(void **state)
{
    int calls = 0;
    struct kube_watch *w = kube_watch_new(0, strip_metadata, &calls);
    const char *ev = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\","
                     "\"resourceVersion\":\"4242\",\"labels\":{\"x\":\"y\"}}}}\n";
    (void)state;
    assert_int_equal(kube_watch_feed(w, ev, strlen(ev)), 0);
    assert_int_equal(calls, 1);
    assert_string_equal(kube_watch_rv(w), "4242");
    kube_watch_free(w);
}

static void test_stream_error_410(void **state)
{
    (void)state;
    size_t len;
    char *data = read_fixture("error_410.ndjson", &len);
    struct rec rc = {0};
    buf_init(&rc.log, 4096);
    struct kube_watch *w = kube_watch_new(0, on_event, &rc);
    assert_int_equal(kube_watch_feed(w, data, len), -ESTALE);
    assert_string_equal(buf_str(&rc.log), "ADDED p1 7;");
    assert_string_equal(kube_watch_rv(w), "7");
    assert_int_equal(kube_watch_error(w)->code, -ESTALE);
    assert_int_equal(kube_watch_error(w)->http_status, 410);
    assert_string_equal(kube_watch_error(w)->reason, "Expired");
    kube_watch_reset(w);
    assert_int_equal(kube_watch_error(w)->code, 0);
    assert_string_equal(kube_watch_rv(w), "7");
    kube_watch_free(w);
    buf_done(&rc.log);
    xfree(data);
}

static void test_stream_other_errors(void **state)
{
    (void)state;
    struct rec rc = {0};
    buf_init(&rc.log, 4096);
    struct kube_watch *w = kube_watch_new(64, on_event, &rc);

    const char *internal = "{\"type\":\"ERROR\",\"object\":{\"code\":500,\"message\":\"boom\"}}\n";
    assert_int_equal(kube_watch_feed(w, internal, strlen(internal)), -EPROTO);
    assert_int_equal(kube_watch_error(w)->http_status, 500);
    assert_string_equal(kube_watch_error(w)->message, "boom");

    /* a malformed line is an error, not a crash, and the decoder recovers after reset */
    kube_watch_reset(w);
    const char *bad = "{\"type\":\"ADDED\",\"obj\n{\"type\":\"ADDED\",\"object\":{}}\n";
    assert_int_equal(kube_watch_feed(w, bad, strlen(bad)), -EPROTO);
    assert_int_equal(rc.n, 0);
    assert_int_equal(kube_watch_error(w)->code, -EPROTO);

    /* an oversized frame */
    kube_watch_reset(w);
    char big[100];
    memset(big, ' ', sizeof(big));
    big[0] = '{';
    assert_int_equal(kube_watch_feed(w, big, sizeof(big)), -E2BIG);
    assert_int_equal(kube_watch_error(w)->code, -E2BIG);

    /* the callback's error is returned */
    kube_watch_reset(w);
    rc.fail_at = 1;
    const char *ok = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"5\"}}}\n";
    assert_int_equal(kube_watch_feed(w, ok, strlen(ok)), -ECANCELED);
    assert_null(kube_watch_rv(w));
    assert_int_equal(kube_watch_events(w), 0);
    rc.fail_at = 0;
    assert_int_equal(kube_watch_feed(w, ok, strlen(ok)), 0);
    assert_string_equal(kube_watch_rv(w), "5");
    kube_watch_free(w);
    buf_done(&rc.log);
}

static void test_backoff(void **state)
{
    (void)state;
    struct kube_backoff b;
    kube_backoff_init(&b, 100, 1000);
    usec_t base = 100;
    for (int i = 0; i < 20; i++) {
        usec_t d = kube_backoff_next(&b);
        assert_true(d >= 100 && d <= 1000);
        assert_true(d >= (base < 1000 ? base : 1000));
        assert_true(d <= base + base / 2);
        base = base * 2 > 1000 ? 1000 : base * 2;
    }
    assert_int_equal(b.cur, 1000);
    kube_backoff_reset(&b);
    usec_t d = kube_backoff_next(&b);
    assert_true(d >= 100 && d <= 150);

    kube_backoff_init(&b, 0, 0);
    assert_int_equal(b.min, LIMIT_KUBE_BACKOFF_MIN);
    for (int i = 0; i < 1000; i++) {
        uint64_t v = kube_backoff_rand(&b, 300, 600);
        assert_true(v >= 300 && v <= 600);
    }
    assert_int_equal(kube_backoff_rand(&b, 5, 5), 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_each_type),     cmocka_unit_test(test_decode_malformed),
        cmocka_unit_test(test_event_status),         cmocka_unit_test(test_stream_every_split),
        cmocka_unit_test(test_bookmark_advances_rv), cmocka_unit_test(test_stream_error_410),
        cmocka_unit_test(test_stream_other_errors),  cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_rv_survives_handler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
