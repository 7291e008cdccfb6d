/* SPDX-License-Identifier: Apache-2.0 */
/* The streaming NDJSON writer against a fake connection: lines pass straight through,
 * queue while the connection is full, go out on the drain, stay within the queue's
 * limit, and are dropped once the connection is gone or detached. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "sandboxd/ndjson.h"

/* A fake connection: takes bytes while below its limit (like http_resp_write). */
struct conn {
    struct buf got;
    size_t limit; /* queued bytes at which it reports "full" */
    size_t writes;
    bool gone;
};

static int conn_write(void *sink, const void *data, size_t len)
{
    struct conn *c = sink;
    c->writes++;
    if (c->gone)
        return -EPIPE;
    if (c->got.len >= c->limit)
        return -EAGAIN;
    assert_int_equal(buf_append(&c->got, data, len), 0);
    return c->got.len >= c->limit ? 1 : 0;
}

/* The connection sent what it held: room again. */
static void conn_drained(struct conn *c, struct buf *sent)
{
    (void)buf_append(sent, c->got.data, c->got.len);
    buf_reset(&c->got);
}

static json_t *ev(int n)
{
    return json_pack("{s:s, s:i}", "type", "n", "n", n);
}

static void test_encode(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(sbd_ndjson_encode(json_pack("{s:s, s:i}", "b", "x", "a", 1), &b), 0);
    assert_string_equal(buf_str(&b), "{\"b\":\"x\",\"a\":1}\n");
    /* too long: nothing half-written */
    json_t *big = json_pack("{s:s}", "k", "0123456789012345678901234567890123456789012345678901");
    assert_int_equal(sbd_ndjson_encode(big, &b), -E2BIG);
    assert_string_equal(buf_str(&b), "{\"b\":\"x\",\"a\":1}\n");
    assert_int_equal(sbd_ndjson_encode(NULL, &b), -E2BIG);
    buf_done(&b);
}

static void test_passes_through(void **state)
{
    (void)state;
    struct conn c = {.limit = 1024};
    buf_init(&c.got, SIZE_MAX);
    struct sbd_ndjson w;
    sbd_ndjson_init_sink(&w, conn_write, &c, 4096);
    assert_int_equal(sbd_ndjson_send(&w, ev(1)), 0);
    assert_int_equal(sbd_ndjson_send(&w, ev(2)), 0);
    assert_false(sbd_ndjson_pending(&w));
    assert_string_equal(buf_str(&c.got), "{\"type\":\"n\",\"n\":1}\n{\"type\":\"n\",\"n\":2}\n");
    assert_int_equal(c.writes, 2);
    sbd_ndjson_done(&w);
    buf_done(&c.got);
}

static void test_back_pressure(void **state)
{
    (void)state;
    struct conn c = {.limit = 30};
    buf_init(&c.got, SIZE_MAX);
    struct buf sent;
    buf_init(&sent, SIZE_MAX);
    struct sbd_ndjson w;
    sbd_ndjson_init_sink(&w, conn_write, &c, 4096);
    assert_int_equal(sbd_ndjson_send(&w, ev(1)), 0); /* 19 bytes */
    assert_int_equal(sbd_ndjson_send(&w, ev(2)), 1); /* taken, now full */
    assert_true(w.blocked);
    assert_false(sbd_ndjson_pending(&w));
    size_t writes = c.writes;
    assert_int_equal(sbd_ndjson_send(&w, ev(3)), 1); /* queued, not offered */
    assert_int_equal(sbd_ndjson_send(&w, ev(4)), 1);
    assert_int_equal(c.writes, writes);
    assert_true(sbd_ndjson_pending(&w));
    assert_int_equal(w.nlines, 2);
    /* a drain while still full keeps the queue */
    assert_int_equal(sbd_ndjson_drain(&w), 1);
    assert_true(sbd_ndjson_pending(&w));
    conn_drained(&c, &sent);
    /* the queue goes out in one write, and that fills the connection again */
    assert_int_equal(sbd_ndjson_drain(&w), 1);
    assert_false(sbd_ndjson_pending(&w));
    assert_int_equal(w.nlines, 0);
    conn_drained(&c, &sent);
    assert_int_equal(sbd_ndjson_drain(&w), 0);
    assert_false(w.blocked);
    assert_string_equal(buf_str(&sent), "{\"type\":\"n\",\"n\":1}\n{\"type\":\"n\",\"n\":2}\n"
                                        "{\"type\":\"n\",\"n\":3}\n{\"type\":\"n\",\"n\":4}\n");
    sbd_ndjson_done(&w);
    buf_done(&c.got);
    buf_done(&sent);
}

static void test_queue_bounded(void **state)
{
    (void)state;
    struct conn c = {.limit = 0}; /* full from the start */
    buf_init(&c.got, SIZE_MAX);
    struct sbd_ndjson w;
    sbd_ndjson_init_sink(&w, conn_write, &c, 40);
    assert_int_equal(sbd_ndjson_send(&w, ev(1)), 1);
    assert_int_equal(sbd_ndjson_send(&w, ev(2)), 1);
    assert_int_equal(w.queue.len, 38);
    assert_int_equal(sbd_ndjson_send(&w, ev(3)), -E2BIG); /* dropped whole */
    assert_int_equal(sbd_ndjson_queue_raw(&w, "\n\n\n", 3), -E2BIG);
    assert_int_equal(sbd_ndjson_queue_raw(&w, "\n", 1), 0);
    assert_int_equal(w.queue.len, 39);
    assert_int_equal(w.nlines, 3);
    assert_int_equal(buf_str(&w.queue)[38], '\n');
    sbd_ndjson_done(&w);
    buf_done(&c.got);
}

static void test_gone_and_detached(void **state)
{
    (void)state;
    struct conn c = {.limit = 1024, .gone = true};
    buf_init(&c.got, SIZE_MAX);
    struct sbd_ndjson w;
    sbd_ndjson_init_sink(&w, conn_write, &c, 4096);
    assert_int_equal(sbd_ndjson_send(&w, ev(1)), -EPIPE);
    sbd_ndjson_detach(&w);
    assert_false(sbd_ndjson_pending(&w));
    size_t writes = c.writes;
    assert_int_equal(sbd_ndjson_send(&w, ev(2)), -EPIPE);
    assert_int_equal(sbd_ndjson_queue_raw(&w, "\n", 1), -EPIPE);
    assert_int_equal(sbd_ndjson_drain(&w), -EPIPE);
    assert_int_equal(c.writes, writes);
    assert_false(sbd_ndjson_pending(&w));
    sbd_ndjson_done(&w);
    buf_done(&c.got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_passes_through),
        cmocka_unit_test(test_back_pressure),
        cmocka_unit_test(test_queue_bounded),
        cmocka_unit_test(test_gone_and_detached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
