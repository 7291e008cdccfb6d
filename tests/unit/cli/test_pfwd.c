/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox port-forward: the port spec, the upgrade request and its answer, client
 * frames, and the reader of the server's channel frames (port prefixes, data, errors,
 * fragments, control frames, limits). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "as_version.h"
#include "cli/pfwd.h"
#include "http/ws.h"

/* RFC 6455 section 1.3's example key and its accept value. */
#define KEY    "dGhlIHNhbXBsZSBub25jZQ=="
#define ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static void test_spec(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        int r;
        unsigned local, remote;
    } cases[] = {
        {"8080", 0, 8080, 8080},  {"9000:80", 0, 9000, 80},   {":80", 0, 0, 80},
        {"0:80", 0, 0, 80},       {"65535", 0, 65535, 65535}, {"0", -EINVAL, 0, 0},
        {"80:0", -EINVAL, 0, 0},  {"65536", -EINVAL, 0, 0},   {"70000:80", -EINVAL, 0, 0},
        {"a:80", -EINVAL, 0, 0},  {"80:", -EINVAL, 0, 0},     {"", -EINVAL, 0, 0},
        {"1:2:3", -EINVAL, 0, 0}, {"-1", -EINVAL, 0, 0},      {"80 ", -EINVAL, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned l = 7, r = 7;
        assert_int_equal(cli_pfwd_parse_spec(cases[i].spec, &l, &r), cases[i].r);
        if (cases[i].r == 0) {
            assert_int_equal(l, cases[i].local);
            assert_int_equal(r, cases[i].remote);
        } else {
            assert_int_equal(l, 7); /* untouched on failure */
        }
    }
}

static void test_request(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 4096);
    struct cli_pfwd_req q = {.host_port = "api:6443",
                             .path_prefix = "/k8s/c1/",
                             .ns = "team-a",
                             .pod = "sb-1",
                             .port = 8000,
                             .authorization = "Bearer t",
                             .key = KEY};
    assert_int_equal(cli_pfwd_request(&q, &b), 0);
    const char *want = "GET /k8s/c1/api/v1/namespaces/team-a/pods/sb-1/portforward?ports=8000 "
                       "HTTP/1.1\r\n"
                       "Host: api:6443\r\n"
                       "User-Agent: kubectl-sandbox/" AS_VERSION "\r\n"
                       "Upgrade: websocket\r\n"
                       "Connection: Upgrade\r\n"
                       "Sec-WebSocket-Version: 13\r\n"
                       "Sec-WebSocket-Key: " KEY "\r\n"
                       "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n"
                       "Authorization: Bearer t\r\n\r\n";
    assert_string_equal(buf_str(&b), want);
    /* no token (client certificates), no prefix */
    buf_reset(&b);
    q.authorization = NULL;
    q.path_prefix = "";
    assert_int_equal(cli_pfwd_request(&q, &b), 0);
    assert_non_null(strstr(buf_str(&b), "GET /api/v1/namespaces/team-a/pods/sb-1/portforward"));
    assert_null(strstr(buf_str(&b), "Authorization"));
    /* what would break the request line or the headers */
    const struct cli_pfwd_req bad[] = {
        {.host_port = "h", .path_prefix = "", .ns = "A", .pod = "p", .port = 1, .key = KEY},
        {.host_port = "h", .path_prefix = "", .ns = "n", .pod = "p/x", .port = 1, .key = KEY},
        {.host_port = "h", .path_prefix = "", .ns = "n", .pod = "", .port = 1, .key = KEY},
        {.host_port = "h", .path_prefix = "", .ns = "n", .pod = "p", .port = 0, .key = KEY},
        {.host_port = "h", .path_prefix = "", .ns = "n", .pod = "p", .port = 70000, .key = KEY},
        {.host_port = "h\r\nX: y", .path_prefix = "", .ns = "n", .pod = "p", .port = 1, .key = KEY},
        {.host_port = "h", .path_prefix = "/a b", .ns = "n", .pod = "p", .port = 1, .key = KEY},
        {.host_port = "h",
         .path_prefix = "",
         .ns = "n",
         .pod = "p",
         .port = 1,
         .key = KEY,
         .authorization = "Bearer x\nEvil: 1"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        buf_reset(&b);
        assert_int_equal(cli_pfwd_request(&bad[i], &b), -EINVAL);
    }
    buf_done(&b);
}

static int parse(const char *text, struct cli_pfwd_resp *r)
{
    return cli_pfwd_parse_resp(text, strlen(text), KEY, r);
}

static void test_response(void **state)
{
    (void)state;
    struct cli_pfwd_resp r;
    const char *ok = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: " ACCEPT "\r\n"
                     "sec-websocket-protocol:  v4.channel.k8s.io \r\n\r\n\x82\x03";
    assert_int_equal(parse(ok, &r), 1);
    assert_true(r.upgraded);
    assert_int_equal(r.status, 101);
    assert_int_equal(r.head_len, strlen(ok) - 2); /* the frame bytes after the head */
    /* incomplete: more bytes needed, whatever is there */
    assert_int_equal(cli_pfwd_parse_resp(ok, 40, KEY, &r), 0);
    assert_int_equal(parse("HTTP/1.1 101 Switching", &r), 0);
    /* a wrong accept value, a missing subprotocol, a missing Upgrade */
    assert_int_equal(parse("HTTP/1.1 101 S\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: x\r\n"
                           "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n",
                           &r),
                     1);
    assert_false(r.upgraded);
    assert_non_null(strstr(r.problem, "Accept"));
    assert_int_equal(parse("HTTP/1.1 101 S\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " ACCEPT
                           "\r\n\r\n",
                           &r),
                     1);
    assert_false(r.upgraded);
    assert_non_null(strstr(r.problem, "v4.channel"));
    assert_int_equal(parse("HTTP/1.1 101 S\r\nSec-WebSocket-Accept: " ACCEPT
                           "\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n",
                           &r),
                     1);
    assert_false(r.upgraded);
    assert_int_equal(parse("HTTP/1.1 101 S\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " ACCEPT
                           "\r\nSec-WebSocket-Protocol: channel.k8s.io\r\n\r\n",
                           &r),
                     1);
    assert_false(r.upgraded);
    /* a refusal: the status and where its body starts */
    const char *forbidden = "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n\r\n{}";
    assert_int_equal(parse(forbidden, &r), 1);
    assert_int_equal(r.status, 403);
    assert_false(r.upgraded);
    assert_int_equal(r.head_len, strlen(forbidden) - 2);
    assert_int_equal(r.body_len, -1); /* no Content-Length: read until the close */
    /* the body's length, so the whole Status is read even when it comes late */
    assert_int_equal(parse("HTTP/1.1 404 Not Found\r\ncontent-length:  187 \r\n\r\n", &r), 1);
    assert_int_equal(r.body_len, 187);
    assert_int_equal(parse("HTTP/1.1 404 Not Found\r\nContent-Length: x1\r\n\r\n", &r), 1);
    assert_int_equal(r.body_len, -1);
    /* not HTTP */
    assert_int_equal(parse("SSH-2.0-x\r\n\r\n", &r), -EPROTO);
    assert_int_equal(parse("HTTP/1.1 99 x\r\n\r\n", &r), -EPROTO);
    assert_int_equal(parse("HTTP/1.1 101 S\r\nno colon here\r\n\r\n", &r), -EPROTO);
    static char big[20000];
    memset(big, 'a', sizeof(big) - 1);
    assert_int_equal(parse(big, &r), -EPROTO); /* no end of head in 16 KiB */
}

static void test_frame(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1024);
    const uint8_t mask[4] = {1, 2, 3, 4};
    assert_int_equal(cli_pfwd_frame(HTTP_WS_BINARY, 0, "hi", 2, mask, &b), 0);
    const uint8_t want[] = {0x82, 0x83, 1, 2, 3, 4, 0 ^ 1, 'h' ^ 2, 'i' ^ 3};
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));
    /* 200 bytes: the 16-bit length form; the payload unmasks to channel + data */
    buf_reset(&b);
    char data[200];
    memset(data, 'x', sizeof(data));
    assert_int_equal(cli_pfwd_frame(HTTP_WS_BINARY, 0, data, sizeof(data), mask, &b), 0);
    struct http_ws_frame f;
    assert_int_equal(http_ws_parse_header((uint8_t *)b.data, b.len, 1000, &f), 8);
    assert_true(f.masked && f.fin);
    assert_int_equal(f.len, 201);
    http_ws_unmask((uint8_t *)b.data + 8, 201, f.mask, 0);
    assert_int_equal(b.data[8], 0);
    assert_memory_equal(b.data + 9, data, sizeof(data));
    /* a control frame has no channel byte; a full buffer leaves nothing half-written */
    buf_reset(&b);
    assert_int_equal(cli_pfwd_frame(HTTP_WS_CLOSE, -1, "\x03\xe8", 2, mask, &b), 0);
    assert_int_equal(b.len, 8);
    assert_int_equal((uint8_t)b.data[0], 0x88);
    struct buf small;
    buf_init(&small, 10);
    assert_int_equal(buf_puts(&small, "ab"), 0);
    assert_int_equal(cli_pfwd_frame(HTTP_WS_BINARY, 0, data, 20, mask, &small), -E2BIG);
    assert_int_equal(small.len, 2);
    buf_done(&small);
    buf_done(&b);
}

/* ---- the reader ---------------------------------------------------------------------------- */

struct sink {
    struct buf data;
    int pings;
    int fail; /* error the data callback returns */
};

static int sink_data(void *ctx, const uint8_t *p, size_t n)
{
    struct sink *s = ctx;
    if (s->fail)
        return s->fail;
    return buf_append(&s->data, p, n);
}

static void sink_ping(void *ctx, const uint8_t *p, size_t n)
{
    struct sink *s = ctx;
    (void)p;
    (void)n;
    s->pings++;
}

static const struct cli_pfwd_ops sink_ops = {.data = sink_data, .ping = sink_ping};

static void start(struct cli_pfwd_rx *rx, struct sink *s, uint64_t max)
{
    *s = (struct sink){0};
    buf_init(&s->data, 1 << 20);
    cli_pfwd_rx_init(rx, 8080, max, &sink_ops, s);
}

static void stop(struct cli_pfwd_rx *rx, struct sink *s)
{
    cli_pfwd_rx_done(rx);
    buf_done(&s->data);
}

/* The port prefixes of channels 0 and 1 (8080 = 0x1f90), then "hello" on channel 0. */
static const uint8_t stream[] = {0x82, 3,    0, 0x90, 0x1f, 0x82, 3,   1,   0x90,
                                 0x1f, 0x82, 6, 0,    'h',  'e',  'l', 'l', 'o'};

static void test_rx_data(void **state)
{
    (void)state;
    struct cli_pfwd_rx rx;
    struct sink s;
    start(&rx, &s, 1024);
    assert_int_equal(cli_pfwd_rx_feed(&rx, stream, sizeof(stream)), 0);
    assert_string_equal(buf_str(&s.data), "hello");
    assert_false(cli_pfwd_rx_has_error(&rx));
    stop(&rx, &s);
    /* the same bytes one at a time */
    start(&rx, &s, 1024);
    for (size_t i = 0; i < sizeof(stream); i++)
        assert_int_equal(cli_pfwd_rx_feed(&rx, stream + i, 1), 0);
    assert_string_equal(buf_str(&s.data), "hello");
    /* a fragmented message: binary without FIN, then a continuation */
    const uint8_t frag[] = {0x02, 3, 0, 'a', 'b', 0x89, 1, 'p', 0x80, 2, 'c', 'd'};
    assert_int_equal(cli_pfwd_rx_feed(&rx, frag, sizeof(frag)), 0);
    assert_string_equal(buf_str(&s.data), "helloabcd");
    assert_int_equal(s.pings, 1);
    /* the close frame ends the stream; later bytes are ignored */
    const uint8_t bye[] = {0x88, 2, 0x03, 0xe8, 0x82, 2, 0, 'z'};
    assert_int_equal(cli_pfwd_rx_feed(&rx, bye, sizeof(bye)), 0);
    assert_true(rx.closed);
    assert_int_equal(rx.close_code, 1000);
    assert_string_equal(buf_str(&s.data), "helloabcd");
    stop(&rx, &s);
}

static void test_rx_prefix_split(void **state)
{
    (void)state;
    struct cli_pfwd_rx rx;
    struct sink s;
    start(&rx, &s, 1024);
    /* the prefix split over two frames, data in the second */
    const uint8_t p[] = {0x82, 2, 0, 0x90, 0x82, 3, 0, 0x1f, 'x'};
    assert_int_equal(cli_pfwd_rx_feed(&rx, p, sizeof(p)), 0);
    assert_string_equal(buf_str(&s.data), "x");
    stop(&rx, &s);
}

static void test_rx_error_channel(void **state)
{
    (void)state;
    struct cli_pfwd_rx rx;
    struct sink s;
    start(&rx, &s, 1024);
    assert_int_equal(cli_pfwd_rx_feed(&rx, stream, 10), 0);
    const uint8_t err[] = {0x82, 6, 1, 'o', 'o', 'p', 's', '!'};
    assert_int_equal(cli_pfwd_rx_feed(&rx, err, sizeof(err)), 0);
    assert_true(cli_pfwd_rx_has_error(&rx));
    assert_string_equal(buf_str(&rx.error), "oops!");
    assert_int_equal(s.data.len, 0);
    stop(&rx, &s);
}

static void test_rx_refused(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        uint8_t bytes[16];
        size_t len;
        int r;
    } cases[] = {
        {"wrong port prefix", {0x82, 3, 0, 0x50, 0}, 5, -EPROTO},
        {"channel 2", {0x82, 3, 2, 0x90, 0x1f}, 5, -EPROTO},
        {"text frame (base64 protocol)", {0x81, 3, '0', 'k', 'A'}, 5, -EPROTO},
        {"masked server frame", {0x82, 0x81, 1, 2, 3, 4, 1}, 7, -EPROTO},
        {"continuation of nothing", {0x80, 1, 'x'}, 3, -EPROTO},
        {"new message inside a fragmented one", {0x02, 1, 0, 0x82, 1, 0}, 6, -EPROTO},
        {"reserved bits", {0xc2, 1, 0}, 3, -EPROTO},
        {"frame over the limit", {0x82, 126, 0x04, 0x01}, 4, -E2BIG},
        {"64-bit length with the top bit", {0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1}, 10, -EPROTO},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cli_pfwd_rx rx;
        struct sink s;
        start(&rx, &s, 1024);
        int r = cli_pfwd_rx_feed(&rx, cases[i].bytes, cases[i].len);
        if (r != cases[i].r)
            fail_msg("%s: got %d, want %d", cases[i].what, r, cases[i].r);
        assert_int_equal(s.data.len, 0);
        stop(&rx, &s);
    }
}

static void test_rx_callback_error_and_bounds(void **state)
{
    (void)state;
    struct cli_pfwd_rx rx;
    struct sink s;
    start(&rx, &s, 1024);
    s.fail = -EPIPE;
    assert_int_equal(cli_pfwd_rx_feed(&rx, stream, sizeof(stream)), -EPIPE);
    stop(&rx, &s);
    /* many full-size frames fed in large pieces: nothing grows past one frame */
    start(&rx, &s, 100);
    uint8_t big[102 * 50 + 5];
    memcpy(big, stream, 5);
    for (int i = 0; i < 50; i++) {
        uint8_t *f = big + 5 + i * 102;
        f[0] = 0x82;
        f[1] = 100;
        f[2] = 0;
        memset(f + 3, (int)('a' + i % 26), 99);
    }
    assert_int_equal(cli_pfwd_rx_feed(&rx, big, sizeof(big)), 0);
    assert_int_equal(s.data.len, 99 * 50);
    assert_true(rx.in.len == 0);
    /* an error text over the limit is cut, not an error */
    uint8_t e[3 + 1 + 2];
    const uint8_t pre[] = {0x82, 3, 1, 0x90, 0x1f};
    assert_int_equal(cli_pfwd_rx_feed(&rx, pre, sizeof(pre)), 0);
    for (int i = 0; i < 100; i++) {
        e[0] = 0x82;
        e[1] = 4;
        e[2] = 1;
        memcpy(e + 3, "abc", 3);
        assert_int_equal(cli_pfwd_rx_feed(&rx, e, sizeof(e)), 0);
    }
    assert_true(rx.error.len <= CLI_PFWD_MAX_ERROR);
    assert_int_equal(rx.error.len, 300);
    stop(&rx, &s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_response),
        cmocka_unit_test(test_frame),
        cmocka_unit_test(test_rx_data),
        cmocka_unit_test(test_rx_prefix_split),
        cmocka_unit_test(test_rx_error_channel),
        cmocka_unit_test(test_rx_refused),
        cmocka_unit_test(test_rx_callback_error_and_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
