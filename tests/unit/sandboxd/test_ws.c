/* SPDX-License-Identifier: Apache-2.0 */
/* WebSocket: the handshake key (RFC 6455 example), the frame codec, close payloads, and
 * the process API over a real WebSocket (start, stdin as binary and JSON, stdin close,
 * signal, PTY resize, exit and close frame, rejected handshakes, disconnect kills the
 * process). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <sys/socket.h>

#include "common/base64.h"
#include "http/ws.h"
#include "sandboxd/util.h"
#include "sbd_test.h"

static int setup(void **state)
{
    *state = sbd_fixture_start(NULL, 0);
    return 0;
}

static int teardown(void **state)
{
    sbd_fixture_stop(*state);
    return 0;
}

static void test_accept_key_and_codec(void **state)
{
    (void)state;
    char out[HTTP_WS_ACCEPT_LEN + 1];
    http_ws_accept_key(STR_LIT("dGhlIHNhbXBsZSBub25jZQ=="), out);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    uint64_t lens[] = {0, 5, 125, 126, 65535, 65536, 1u << 20};
    uint8_t mask[4] = {1, 2, 3, 4};
    for (size_t i = 0; i < ARRAY_SIZE(lens); i++) {
        uint8_t h[HTTP_WS_MAX_HEADER];
        size_t n = http_ws_build_header(HTTP_WS_BINARY, true, lens[i], mask, h);
        struct http_ws_frame f;
        assert_int_equal(http_ws_parse_header(h, n - 1, UINT64_MAX, &f), 0);
        assert_int_equal(http_ws_parse_header(h, n, UINT64_MAX, &f), (int)n);
        assert_int_equal(f.len, lens[i]);
        assert_true(f.fin && f.masked);
        assert_memory_equal(f.mask, mask, 4);
        assert_int_equal(http_ws_parse_header(h, n, lens[i] ? lens[i] - 1 : 0, &f),
                         lens[i] ? -E2BIG : (int)n);
    }
    uint8_t bad[] = {0xC1, 0x00}; /* RSV1 */
    struct http_ws_frame f;
    assert_int_equal(http_ws_parse_header(bad, 2, 100, &f), -EPROTO);
    uint8_t ping_frag[] = {0x09, 0x00}; /* fragmented control frame */
    assert_int_equal(http_ws_parse_header(ping_frag, 2, 100, &f), -EPROTO);
    uint8_t op3[] = {0x83, 0x00};
    assert_int_equal(http_ws_parse_header(op3, 2, 100, &f), -EPROTO);
    uint8_t data[] = "abcdef";
    http_ws_unmask(data, 6, mask, 0);
    http_ws_unmask(data, 3, mask, 0);
    http_ws_unmask(data + 3, 3, mask, 3);
    assert_memory_equal(data, "abcdef", 6);
}

struct wsc {
    struct test_http_conn c;
    struct buf in;
};

static int wsc_open(struct wsc *w, uint16_t port, const char *extra)
{
    memset(w, 0, sizeof(*w));
    buf_init(&w->in, 64u * 1024 * 1024);
    assert_int_equal(test_http_connect(port, &w->c), 0);
    char req[512];
    snprintf(req, sizeof(req),
             "GET /v1/processes/ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             "%sSec-WebSocket-Version: 13\r\n\r\n",
             extra ? extra : "");
    assert_int_equal(test_http_send_str(&w->c, req), 0);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(test_http_read(&w->c, true, 5 * USEC_PER_SEC, &r), 0);
    int st = r.status;
    if (st == 101) {
        char *acc = test_http_header(&r, "Sec-WebSocket-Accept");
        assert_string_equal(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        xfree(acc);
        /* Bytes after the 101 head are frames. */
        buf_append(&w->in, w->c.in.data, w->c.in.len);
        buf_reset(&w->c.in);
    }
    test_http_resp_done(&r);
    return st;
}

static void wsc_send(struct wsc *w, uint8_t opcode, const void *data, size_t n)
{
    uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78}, h[HTTP_WS_MAX_HEADER];
    size_t hl = http_ws_build_header(opcode, true, n, mask, h);
    uint8_t *p = xmalloc(hl + n + 1);
    memcpy(p, h, hl);
    memcpy(p + hl, data, n);
    http_ws_unmask(p + hl, n, mask, 0);
    assert_int_equal(test_http_send(&w->c, p, hl + n), 0);
    xfree(p);
}

/* Next frame: returns the opcode (payload in *out) or -1 on EOF/timeout. */
static int wsc_recv(struct wsc *w, struct buf *out)
{
    for (;;) {
        struct http_ws_frame f;
        int r = http_ws_parse_header((const uint8_t *)w->in.data, w->in.len, UINT64_MAX, &f);
        if (r > 0 && w->in.len >= f.header_len + f.len) {
            assert_false(f.masked);
            buf_reset(out);
            buf_append(out, w->in.data + f.header_len, (size_t)f.len);
            buf_consume(&w->in, f.header_len + (size_t)f.len);
            return f.opcode;
        }
        struct pollfd pfd = {.fd = w->c.fd, .events = POLLIN};
        if (poll(&pfd, 1, 10000) <= 0)
            return -1;
        char b[65536];
        ssize_t n = read(w->c.fd, b, sizeof(b));
        if (n <= 0)
            return -1;
        buf_append(&w->in, b, (size_t)n);
    }
}

/* Reads events until exit; collects decoded stdout. Returns the exit event. */
/* Reads events until the exit event (returned, or NULL when the socket ended first):
 * stdout into out, the start's id into *ret_id, and each error event's message, followed
 * by '|', into errs (both optional). */
static json_t *wsc_until_exit_errs(struct wsc *w, struct buf *out, uint32_t *ret_id,
                                   struct buf *errs)
{
    struct buf f;
    buf_init(&f, 64u * 1024 * 1024);
    json_t *exit_ev = NULL;
    int op;
    while (!exit_ev && (op = wsc_recv(w, &f)) >= 0) {
        if (op != HTTP_WS_TEXT)
            continue;
        json_t *j = json_loadb(f.data, f.len, 0, NULL);
        const char *t = json_string_value(json_object_get(j, "type"));
        if (strcmp(t, "start") == 0 && ret_id)
            *ret_id = (uint32_t)json_integer_value(json_object_get(j, "id"));
        if (strcmp(t, "stdout") == 0)
            base64_decode(json_string_value(json_object_get(j, "data")),
                          json_string_length(json_object_get(j, "data")), out);
        if (strcmp(t, "exit") == 0)
            exit_ev = json_incref(j);
        if (strcmp(t, "error") == 0 && errs)
            (void)buf_printf(errs, "%s|", json_string_value(json_object_get(j, "message")));
        json_decref(j);
    }
    buf_done(&f);
    return exit_ev;
}

static json_t *wsc_until_exit(struct wsc *w, struct buf *out, uint32_t *ret_id)
{
    return wsc_until_exit_errs(w, out, ret_id, NULL);
}

static void wsc_close(struct wsc *w)
{
    test_http_close(&w->c);
    buf_done(&w->in);
}

static void test_close_payload_check(void **state)
{
    (void)state;
    uint16_t code = 1;
    assert_int_equal(http_ws_check_close(NULL, 0, &code), 0);
    assert_int_equal(code, 0);
    static const struct {
        const char *p;
        size_t n;
        int want;
        uint16_t code;
    } cases[] = {
        {"\x03", 1, -EPROTO, 0}, /* 1-byte payload */
        {"\x03\xe8", 2, 0, 1000},
        {"\x03\xe8ok", 4, 0, 1000},
        {"\x03\xeb", 2, 0, 1003},
        {"\x03\xef", 2, 0, 1007},
        {"\x03\xf6", 2, 0, 1014},
        {"\x0b\xb8", 2, 0, 3000},
        {"\x13\x87", 2, 0, 4999},
        {"\x00\x00", 2, -EPROTO, 0},                 /* 0 */
        {"\x03\xe7", 2, -EPROTO, 0},                 /* 999 */
        {"\x03\xec", 2, -EPROTO, 0},                 /* 1004 */
        {"\x03\xed", 2, -EPROTO, 0},                 /* 1005: never on the wire */
        {"\x03\xee", 2, -EPROTO, 0},                 /* 1006: never on the wire */
        {"\x03\xf7", 2, -EPROTO, 0},                 /* 1015 */
        {"\x0b\xb7", 2, -EPROTO, 0},                 /* 2999 */
        {"\x13\x88", 2, -EPROTO, 0},                 /* 5000 */
        {"\x03\xe8\xc3\xa9", 4, 0, 1000},            /* e-acute */
        {"\x03\xe8\xf0\x9f\x98\x80", 6, 0, 1000},    /* U+1F600 */
        {"\x03\xe8\xff", 3, -EPROTO, 0},             /* not UTF-8 */
        {"\x03\xe8\xc3", 3, -EPROTO, 0},             /* truncated */
        {"\x03\xe8\xc0\xaf", 4, -EPROTO, 0},         /* overlong */
        {"\x03\xe8\xed\xa0\x80", 5, -EPROTO, 0},     /* surrogate */
        {"\x03\xe8\xf4\x90\x80\x80", 6, -EPROTO, 0}, /* past U+10FFFF */
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        code = 1;
        int r = http_ws_check_close((const uint8_t *)cases[i].p, cases[i].n, &code);
        assert_int_equal(r, cases[i].want);
        if (r == 0)
            assert_int_equal(code, cases[i].code);
    }
}

static void test_ws_stdin_roundtrip(void **state)
{
    struct sbd_fixture *f = *state;
    struct wsc w;
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    const char *start = "{\"command\": [\"cat\"]}";
    wsc_send(&w, HTTP_WS_TEXT, start, strlen(start));
    wsc_send(&w, HTTP_WS_BINARY, "raw ", 4);
    const char *js = "{\"type\": \"stdin\", \"data\": \"YjY0IA==\"}";
    wsc_send(&w, HTTP_WS_TEXT, js, strlen(js));
    const char *tx = "{\"type\": \"stdin\", \"text\": \"text\"}";
    wsc_send(&w, HTTP_WS_TEXT, tx, strlen(tx));
    wsc_send(&w, HTTP_WS_PING, "p", 1);
    const char *cl = "{\"type\": \"stdin_close\"}";
    wsc_send(&w, HTTP_WS_TEXT, cl, strlen(cl));
    struct buf out;
    buf_init(&out, 1 << 20);
    json_t *e = wsc_until_exit(&w, &out, NULL);
    assert_non_null(e);
    assert_string_equal(buf_str(&out), "raw b64 text");
    assert_int_equal(json_integer_value(json_object_get(e, "exit_code")), 0);
    json_decref(e);
    struct buf fr;
    buf_init(&fr, 1024);
    int op;
    while ((op = wsc_recv(&w, &fr)) == HTTP_WS_PONG)
        ;
    assert_int_equal(op, HTTP_WS_CLOSE);
    assert_int_equal((uint8_t)fr.data[0] << 8 | (uint8_t)fr.data[1], 1000);
    buf_done(&fr);
    buf_done(&out);
    wsc_close(&w);
}

/* 12 MiB of stdin for a program that reads only after a second: past the 8 MiB queue the
 * socket is no longer read until the queue drains, so every byte arrives (the bytes past
 * the queue used to be dropped). */
static void test_ws_stdin_backpressure(void **state)
{
    struct sbd_fixture *f = *state;
    struct wsc w;
    size_t chunk = 1024u * 1024 - 64, total = 0;
    char *data = xmalloc(chunk);
    memset(data, 'z', chunk);
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    const char *start = "{\"command\": \"sleep 1; wc -c\"}";
    wsc_send(&w, HTTP_WS_TEXT, start, strlen(start));
    for (int i = 0; i < 12; i++, total += chunk)
        wsc_send(&w, HTTP_WS_BINARY, data, chunk);
    const char *cl = "{\"type\": \"stdin_close\"}";
    wsc_send(&w, HTTP_WS_TEXT, cl, strlen(cl));
    xfree(data);
    struct buf out;
    buf_init(&out, 1 << 20);
    json_t *e = wsc_until_exit(&w, &out, NULL);
    assert_non_null(e);
    char want[32];
    snprintf(want, sizeof(want), "%zu\n", total);
    assert_string_equal(buf_str(&out), want);
    json_decref(e);
    buf_done(&out);
    wsc_close(&w);
}

/* A process that never reads its stdin: what the full queue refused is held for the
 * stall time (here 500 ms), then dropped with an error message saying so, and the socket
 * is read again, so a kill sent after the flood still arrives (it waited behind the held
 * stdin for as long as the process lived). */
static void test_ws_stdin_not_read_dropped(void **state)
{
    (void)state;
    struct sbd_fixture_opts o = {.ws_stdin_stall = 500 * USEC_PER_MSEC};
    struct sbd_fixture *f = sbd_fixture_start_with(NULL, 0, &o);
    struct wsc w;
    size_t chunk = 1024u * 1024 - 64;
    char *data = xmalloc(chunk);
    memset(data, 'q', chunk);
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    const char *start = "{\"command\": \"sleep 30\"}";
    wsc_send(&w, HTTP_WS_TEXT, start, strlen(start));
    for (int i = 0; i < 10; i++)
        wsc_send(&w, HTTP_WS_BINARY, data, chunk);
    xfree(data);
    const char *kill = "{\"type\": \"signal\", \"signal\": \"SIGKILL\"}";
    wsc_send(&w, HTTP_WS_TEXT, kill, strlen(kill));
    struct buf fr;
    buf_init(&fr, 64u * 1024 * 1024);
    bool told = false;
    json_t *exit_ev = NULL;
    int op;
    while (!exit_ev && (op = wsc_recv(&w, &fr)) >= 0) {
        if (op != HTTP_WS_TEXT)
            continue;
        json_t *j = json_loadb(fr.data, fr.len, 0, NULL);
        const char *t = json_string_value(json_object_get(j, "type"));
        const char *m = json_string_value(json_object_get(j, "message"));
        if (t && strcmp(t, "error") == 0 && m && strstr(m, "stdin not read"))
            told = true;
        if (t && strcmp(t, "exit") == 0)
            exit_ev = json_incref(j);
        json_decref(j);
    }
    buf_done(&fr);
    assert_non_null(exit_ev);
    assert_true(told);
    assert_int_equal(json_integer_value(json_object_get(exit_ev, "signal")), SIGKILL);
    json_decref(exit_ev);
    wsc_close(&w);
    sbd_fixture_stop(f);
}

static void test_ws_signal_pty(void **state)
{
    struct sbd_fixture *f = *state;
    struct wsc w;
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    const char *start =
        "{\"command\": \"read x; stty size\", \"pty\": {\"cols\": 80, \"rows\": 24}}";
    wsc_send(&w, HTTP_WS_TEXT, start, strlen(start));
    const char *rs = "{\"type\": \"resize\", \"cols\": 120, \"rows\": 40}";
    wsc_send(&w, HTTP_WS_TEXT, rs, strlen(rs));
    wsc_send(&w, HTTP_WS_BINARY, "go\n", 3);
    struct buf out;
    buf_init(&out, 1 << 20);
    json_t *e = wsc_until_exit(&w, &out, NULL);
    assert_non_null(e);
    if (!strstr(buf_str(&out), "40 120")) {
        char *ej = json_dumps(e, JSON_COMPACT);
        print_message("output of the resized PTY: \"%s\", exit %s\n", buf_str(&out), ej);
        xfree(ej);
    }
    assert_non_null(strstr(buf_str(&out), "40 120"));
    json_decref(e);
    wsc_close(&w);
    buf_reset(&out);
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    start = "{\"command\": [\"sleep\", \"30\"]}";
    wsc_send(&w, HTTP_WS_TEXT, start, strlen(start));
    const char *sg = "{\"type\": \"signal\", \"signal\": \"SIGINT\"}";
    wsc_send(&w, HTTP_WS_TEXT, sg, strlen(sg));
    e = wsc_until_exit(&w, &out, NULL);
    assert_non_null(e);
    assert_int_equal(json_integer_value(json_object_get(e, "signal")), SIGINT);
    json_decref(e);
    wsc_close(&w);
    buf_done(&out);
}

/* Control messages that cannot be applied each get an error event and change nothing
 * (bad base64 writes none of it); the socket stays open and later messages work. */
static void test_ws_control_errors(void **state)
{
    struct sbd_fixture *f = *state;
    struct wsc w;
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    const char *msgs[] = {
        "{\"command\": [\"cat\"]}",
        "{\"type\": \"stdin\", \"data\": \"YWJj%%%\"}",
        "{\"type\": \"stdin\"}",
        "{\"type\": \"stdin\", \"data\": \"YQ==\", \"text\": \"a\"}",
        "{\"type\": \"signal\", \"signal\": \"SIGNOPE\"}",
        "{\"type\": \"resize\", \"cols\": 80, \"rows\": 24}",
        "{\"type\": \"resize\", \"cols\": 0}",
        "{\"type\": \"bogus\"}",
        "[1, 2]",
        "{\"type\": \"stdin\", \"data\": \"b2s=\"}",
        "{\"type\": \"stdin_close\"}",
    };
    for (size_t i = 0; i < ARRAY_SIZE(msgs); i++)
        wsc_send(&w, HTTP_WS_TEXT, msgs[i], strlen(msgs[i]));
    struct buf out, errs;
    buf_init(&out, 1 << 20);
    buf_init(&errs, 1 << 20);
    json_t *e = wsc_until_exit_errs(&w, &out, NULL, &errs);
    assert_non_null(e);
    assert_string_equal(buf_str(&out), "ok");
    assert_int_equal(json_integer_value(json_object_get(e, "exit_code")), 0);
    assert_string_equal(buf_str(&errs),
                        "stdin data is not valid base64: not written|"
                        "a stdin message needs one of data (base64) or text, a string|"
                        "a stdin message needs one of data (base64) or text, a string|"
                        "unknown signal|process has no PTY|"
                        "cols and rows (1 to 65535) are required|"
                        "unknown control message type (stdin, stdin_close, signal, resize)|"
                        "control messages are JSON objects with a type|");
    json_decref(e);
    buf_done(&errs);
    buf_done(&out);
    wsc_close(&w);
}

static void test_ws_errors_and_disconnect(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_resp r;
    assert_int_equal(sbd_do(f->port, "GET", "/v1/processes/ws", NULL, NULL, &r), 400);
    test_http_resp_done(&r);
    struct wsc w;
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    wsc_send(&w, HTTP_WS_TEXT, "not json", 8);
    struct buf fr;
    buf_init(&fr, 1 << 20);
    assert_int_equal(wsc_recv(&w, &fr), HTTP_WS_TEXT);
    assert_non_null(strstr(buf_str(&fr), "\"error\""));
    assert_int_equal(wsc_recv(&w, &fr), HTTP_WS_CLOSE);
    wsc_close(&w);
    /* Disconnecting kills the process: its pid disappears. */
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    const char *start = "{\"command\": [\"sleep\", \"30\"]}";
    wsc_send(&w, HTTP_WS_TEXT, start, strlen(start));
    assert_int_equal(wsc_recv(&w, &fr), HTTP_WS_TEXT);
    json_t *j = json_loadb(fr.data, fr.len, 0, NULL);
    pid_t pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
    json_decref(j);
    assert_true(pid > 0);
    wsc_close(&w);
    int alive = 1;
    for (int i = 0; i < 500 && alive; i++) {
        assert_int_equal(sbd_do(f->port, "GET", "/v1/processes", NULL, NULL, &r), 200);
        alive = strstr(buf_str(&r.body), "sleep") != NULL;
        test_http_resp_done(&r);
        if (alive)
            usleep(10000);
    }
    assert_false(alive);
    buf_done(&fr);
}

/* A text message that is not UTF-8 closes the socket with 1007 (RFC 6455 8.1), whole or
 * in fragments whose split falls inside a character; before, it reached the handler. */
static void test_ws_text_not_utf8(void **state)
{
    struct sbd_fixture *f = *state;
    struct buf fr;
    buf_init(&fr, 1024);
    for (int split = 0; split < 2; split++) {
        struct wsc w;
        assert_int_equal(wsc_open(&w, f->port, NULL), 101);
        if (!split) {
            const char *bad = "{\"command\": \"\xff\"}";
            wsc_send(&w, HTTP_WS_TEXT, bad, strlen(bad));
        } else { /* "é" split across two frames (fine), then a stray continuation byte */
            uint8_t mask[4] = {1, 2, 3, 4}, h[HTTP_WS_MAX_HEADER], frame[32];
            const char *parts[] = {"{\"a\": \"\xc3", "\xa9\x80\"}"};
            for (int i = 0; i < 2; i++) {
                size_t n = strlen(parts[i]);
                size_t hl =
                    http_ws_build_header(i ? HTTP_WS_CONT : HTTP_WS_TEXT, i == 1, n, mask, h);
                memcpy(frame, h, hl);
                memcpy(frame + hl, parts[i], n);
                http_ws_unmask(frame + hl, n, mask, 0);
                assert_int_equal(test_http_send(&w.c, frame, hl + n), 0);
            }
        }
        int op;
        while ((op = wsc_recv(&w, &fr)) == HTTP_WS_TEXT)
            ;
        assert_int_equal(op, HTTP_WS_CLOSE);
        assert_int_equal((uint8_t)fr.data[0] << 8 | (uint8_t)fr.data[1], 1007);
        wsc_close(&w);
    }
    buf_done(&fr);
}

/* Closes that start while frames are being read still go out whole: a bad process
 * request followed in the same write by the start of a large frame gets its error and
 * the 1008 close (the frame was consumed twice, the parser then ran on garbage and tore
 * the socket down); a frame declared over the 1 MiB message limit gets the 1009 close (the
 * close's own drop found the same bad header and tore the socket down before the close
 * frame was written). */
static void test_ws_closes_reach_the_peer(void **state)
{
    struct sbd_fixture *f = *state;
    uint8_t mask[4] = {9, 8, 7, 6}, h[HTTP_WS_MAX_HEADER], buf[4096];
    struct buf fr;
    buf_init(&fr, 1 << 20);
    for (int c = 0; c < 2; c++) {
        struct wsc w;
        size_t len = 0, hl;
        int op;
        assert_int_equal(wsc_open(&w, f->port, NULL), 101);
        if (c == 0) {
            hl = http_ws_build_header(HTTP_WS_TEXT, true, 8, mask, h);
            memcpy(buf, h, hl);
            memcpy(buf + hl, "not json", 8);
            http_ws_unmask(buf + hl, 8, mask, 0);
            len = hl + 8;
            hl = http_ws_build_header(HTTP_WS_BINARY, true, 100000, mask, h);
            memcpy(buf + len, h, hl);
            memset(buf + len + hl, 'x', 1000); /* the start of it only */
            len += hl + 1000;
        } else {
            len = http_ws_build_header(HTTP_WS_BINARY, true, 2u << 20, mask, buf);
        }
        assert_int_equal(test_http_send(&w.c, buf, len), 0);
        while ((op = wsc_recv(&w, &fr)) == HTTP_WS_TEXT)
            ;
        assert_int_equal(op, HTTP_WS_CLOSE);
        assert_int_equal((uint8_t)fr.data[0] << 8 | (uint8_t)fr.data[1], c == 0 ? 1008 : 1009);
        wsc_close(&w);
    }
    buf_done(&fr);
}

/* A character split across the fragments of a text message is fine: the message is
 * checked whole (the process request arrives and runs). */
static void test_ws_text_split_character(void **state)
{
    struct sbd_fixture *f = *state;
    struct wsc w;
    uint8_t mask[4] = {1, 2, 3, 4}, h[HTTP_WS_MAX_HEADER], frame[64];
    const char *parts[] = {"{\"command\": \"echo caf\xc3", "\xa9\"}"};
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(parts[i]);
        size_t hl = http_ws_build_header(i ? HTTP_WS_CONT : HTTP_WS_TEXT, i == 1, n, mask, h);
        memcpy(frame, h, hl);
        memcpy(frame + hl, parts[i], n);
        http_ws_unmask(frame + hl, n, mask, 0);
        assert_int_equal(test_http_send(&w.c, frame, hl + n), 0);
    }
    struct buf out;
    buf_init(&out, 1024);
    json_t *e = wsc_until_exit(&w, &out, NULL);
    assert_non_null(e);
    assert_string_equal(buf_str(&out), "caf\xc3\xa9\n");
    json_decref(e);
    buf_done(&out);
    wsc_close(&w);
}

/* A client that reads slowly (a small receive buffer, 64 KiB every 40 ms) gets every
 * byte of a large output, its exit event and the 1000 close: the close after the exit
 * waits while the queued frames still drain (it tore the socket down 2 s after the
 * exit, with megabytes still queued: the client saw the stream cut, no exit, no close). */
static void test_ws_slow_reader_gets_the_end(void **state)
{
    struct sbd_fixture *f = *state;
    struct wsc w;
    int small = 16 * 1024;
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    assert_int_equal(setsockopt(w.c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    const char *start = "{\"command\": \"head -c 8000000 /dev/zero; exit 3\"}";
    wsc_send(&w, HTTP_WS_TEXT, start, strlen(start));
    struct buf out, fr;
    buf_init(&out, 16u << 20);
    buf_init(&fr, 4u << 20);
    json_t *exit_ev = NULL;
    int op = 0;
    for (;;) {
        usleep(40000);
        struct http_ws_frame hf;
        int r;
        /* take whatever frames are whole, then one more read of at most 64 KiB */
        while ((r = http_ws_parse_header((const uint8_t *)w.in.data, w.in.len, UINT64_MAX, &hf)) >
                   0 &&
               w.in.len >= hf.header_len + hf.len) {
            op = wsc_recv(&w, &fr);
            if (op == HTTP_WS_CLOSE)
                break;
            json_t *j = json_loadb(fr.data, fr.len, 0, NULL);
            const char *t = json_string_value(json_object_get(j, "type"));
            if (t && strcmp(t, "stdout") == 0)
                base64_decode(json_string_value(json_object_get(j, "data")),
                              json_string_length(json_object_get(j, "data")), &out);
            if (t && strcmp(t, "exit") == 0)
                exit_ev = json_incref(j);
            json_decref(j);
        }
        if (op == HTTP_WS_CLOSE)
            break;
        struct pollfd pfd = {.fd = w.c.fd, .events = POLLIN};
        assert_true(poll(&pfd, 1, 10000) > 0);
        char b[65536];
        ssize_t n = read(w.c.fd, b, sizeof(b));
        if (n <= 0)
            break; /* cut: the assertions below say what was missing */
        buf_append(&w.in, b, (size_t)n);
    }
    assert_int_equal(out.len, 8000000);
    assert_non_null(exit_ev);
    assert_int_equal(json_integer_value(json_object_get(exit_ev, "exit_code")), 3);
    assert_int_equal(op, HTTP_WS_CLOSE);
    assert_int_equal((uint8_t)fr.data[0] << 8 | (uint8_t)fr.data[1], 1000);
    json_decref(exit_ev);
    buf_done(&out);
    buf_done(&fr);
    wsc_close(&w);
}

/* A client that stops reading while its process prints: once the queued frames stay
 * untaken for the write stall (1 s here; 5 minutes by default) the socket is closed and
 * the process, paused by the full queue, killed. Before, both stayed for ever. */
static void test_ws_stalled_reader_let_go(void **state)
{
    (void)state;
    struct sbd_fixture_opts o = {.ws_write_stall = USEC_PER_SEC};
    struct sbd_fixture *f = sbd_fixture_start_with(NULL, 0, &o);
    struct test_http_resp r;
    struct wsc w;
    int small = 16 * 1024;
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    assert_int_equal(setsockopt(w.c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    const char *start = "{\"command\": [\"yes\", \"stalled-reader\"]}";
    wsc_send(&w, HTTP_WS_TEXT, start, strlen(start));
    int alive = 1, seen = 0;
    usec_t t0 = clock_now();
    for (int i = 0; i < 1000 && alive; i++) {
        usleep(10000);
        assert_int_equal(sbd_do(f->port, "GET", "/v1/processes", NULL, NULL, &r), 200);
        alive = strstr(buf_str(&r.body), "stalled-reader") != NULL;
        seen |= alive;
        test_http_resp_done(&r);
        if (!seen && i < 500)
            alive = 1; /* not started yet */
    }
    assert_true(seen);
    print_message("stalled reader's process gone after %.1f s\n",
                  (double)(clock_now() - t0) / USEC_PER_SEC);
    assert_false(alive);
    wsc_close(&w);
    sbd_fixture_stop(f);
}

/* A client that reads slowly but steadily (16 KiB every 50 ms) while its process prints:
 * once the socket buffers are full the kernel takes another frame only when a third of
 * its (large) send buffer is free, seconds apart at this pace, longer than the write
 * stall (1 s here), but the client takes bytes of the socket's queue at its window
 * updates, several a second (http/progress.h): the socket and the process stay. Before,
 * the stall counted completed writes only and let it go. */
static void test_ws_slow_reader_kept(void **state)
{
    (void)state;
    struct sbd_fixture_opts o = {.ws_write_stall = USEC_PER_SEC};
    struct sbd_fixture *f = sbd_fixture_start_with(NULL, 0, &o);
    struct test_http_resp r;
    struct wsc w;
    char b[16 * 1024];
    assert_int_equal(wsc_open(&w, f->port, NULL), 101);
    const char *start = "{\"command\": [\"yes\", \"slow-reader\"]}";
    wsc_send(&w, HTTP_WS_TEXT, start, strlen(start));
    for (int i = 0; i < 80; i++) {
        assert_true(recv(w.c.fd, b, sizeof(b), MSG_WAITALL) > 0);
        usleep(50000);
    }
    assert_int_equal(sbd_do(f->port, "GET", "/v1/processes", NULL, NULL, &r), 200);
    assert_non_null(strstr(buf_str(&r.body), "slow-reader"));
    test_http_resp_done(&r);
    assert_true(read(w.c.fd, b, sizeof(b)) > 0);
    wsc_close(&w);
    sbd_fixture_stop(f);
}

/* A socket that never sends the process request is closed (1008) after the first-message
 * timeout, and frees its place; past max_websockets an upgrade is answered 429. */
static void test_ws_first_message_and_cap(void **state)
{
    struct sbd_fixture_opts o = {.max_websockets = 2, .ws_first_timeout = 300 * USEC_PER_MSEC};
    struct sbd_fixture *f = sbd_fixture_start_with(NULL, 0, &o);
    struct wsc a, b, c;
    struct buf fr;
    (void)state;
    buf_init(&fr, 1 << 20);
    assert_int_equal(wsc_open(&a, f->port, NULL), 101);
    assert_int_equal(wsc_open(&b, f->port, NULL), 101);
    assert_int_equal(wsc_open(&c, f->port, NULL), 429); /* two open */
    wsc_close(&c);
    /* a sends its request in time and runs; b sends nothing */
    const char *start = "{\"command\": [\"sleep\", \"2\"]}";
    wsc_send(&a, HTTP_WS_TEXT, start, strlen(start));
    assert_int_equal(wsc_recv(&a, &fr), HTTP_WS_TEXT);
    assert_non_null(strstr(buf_str(&fr), "\"start\""));
    assert_int_equal(wsc_recv(&b, &fr), HTTP_WS_CLOSE);
    assert_true(fr.len >= 2);
    assert_int_equal(((uint8_t)fr.data[0] << 8) | (uint8_t)fr.data[1], 1008);
    wsc_close(&b);
    /* b's place is free again (its close is handled on the server's loop) */
    int st = 0;
    for (int i = 0; i < 200 && (st = wsc_open(&c, f->port, NULL)) == 429; i++) {
        wsc_close(&c);
        usleep(10000);
    }
    assert_int_equal(st, 101);
    wsc_close(&c);
    wsc_close(&a);
    buf_done(&fr);
    sbd_fixture_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_key_and_codec),
        cmocka_unit_test(test_close_payload_check),
        cmocka_unit_test_setup_teardown(test_ws_stdin_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ws_stdin_backpressure, setup, teardown),
        cmocka_unit_test(test_ws_stdin_not_read_dropped),
        cmocka_unit_test_setup_teardown(test_ws_signal_pty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ws_control_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ws_errors_and_disconnect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ws_text_not_utf8, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ws_text_split_character, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ws_closes_reach_the_peer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ws_slow_reader_gets_the_end, setup, teardown),
        cmocka_unit_test(test_ws_stalled_reader_let_go),
        cmocka_unit_test(test_ws_slow_reader_kept),
        cmocka_unit_test(test_ws_first_message_and_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
