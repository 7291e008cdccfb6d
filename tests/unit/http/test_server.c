/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP server over real loopback sockets: the server runs on its own thread, the test
 * thread drives it with the blocking test client. Timeouts are shortened to ~200 ms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <sys/socket.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "http/probes.h"
#include "http/server.h"
#include "support/http_client.h"

#define T_SHORT   (200 * USEC_PER_MSEC) /* server timeouts in these tests */
#define T_READ    (5 * USEC_PER_SEC)    /* client patience for a response */
#define T_HUGE    (60 * USEC_PER_SEC)   /* for all of /huge (24 MiB) under valgrind, loaded */
#define MAX_BODY  1024
#define BIG_TOTAL (1024u * 1024)
/* bytes of a trickled head (one per 50 ms: 30 s) before the test gives up on a 408 */
#define SLOWLORIS_MAX_BYTES 600

static atomic_int stream_started, saw_queue_full, drains, ready_flag;
static atomic_int upload_chunks;

struct fixture {
    struct http_router *router;
    struct http_server_thread *t;
    uint16_t port;
};

/* ---- handlers ------------------------------------------------------------------------ */

static int h_hello(struct http_req *req, void *ctx)
{
    (void)ctx;
    return http_respond(req, 200, "text/plain", "hello", 5);
}

static int h_echo(struct http_req *req, void *ctx)
{
    (void)ctx;
    struct str b = http_req_body(req);
    char n[32];
    (void)snprintf(n, sizeof(n), "%zu", b.len);
    assert_int_equal(http_resp_header_add(req, "X-Body-Len", n), 0);
    assert_int_equal(http_resp_header_add(req, "Content-Length", "1"), -EINVAL);
    assert_int_equal(http_resp_header_add(req, "X-Bad", "a\r\nInjected: 1"), -EINVAL);
    return http_respond(req, 200, "application/octet-stream", b.p, b.len);
}

static int h_rest(struct http_req *req, void *ctx)
{
    (void)ctx;
    struct str rest = http_req_path_rest(req), q = http_req_query(req);
    struct str ua = http_req_header(req, "x-test");
    char out[256];
    int n = snprintf(out, sizeof(out), "%.*s|%.*s|%.*s", (int)rest.len, rest.p, (int)q.len, q.p,
                     (int)ua.len, ua.p ? ua.p : "");
    return http_respond(req, 200, "text/plain", out, (size_t)n);
}

static int h_fail(struct http_req *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return -EIO;
}

struct upload {
    uint64_t bytes;
};

static int upload_body(struct http_req *req, struct str data, bool last, void *ctx)
{
    struct upload *u = ctx;
    u->bytes += data.len;
    if (data.len)
        atomic_fetch_add(&upload_chunks, 1);
    if (!last)
        return 0;
    char out[64];
    int n = snprintf(out, sizeof(out), "got %llu", (unsigned long long)u->bytes);
    xfree(u);
    http_req_set_body_cb(req, NULL, NULL);
    return http_respond(req, 200, "text/plain", out, (size_t)n);
}

static void upload_abort(struct http_req *req, void *ctx)
{
    (void)req;
    xfree(ctx);
}

static int h_upload(struct http_req *req, void *ctx)
{
    (void)ctx;
    struct upload *u = XNEW(struct upload);
    http_req_set_body_cb(req, upload_body, u);
    http_req_set_abort_cb(req, upload_abort, u);
    return 0;
}

/* The first member of a handler state driven by a timer on the loop. */
struct timed {
    uv_timer_t timer;     /* first: the handle is the state */
    struct http_req *req; /* a reference, dropped when the timer is closed */
};

/* Takes a reference to req and sets up the timer of owner (whose first member is t). */
static void timed_init(struct timed *t, struct http_req *req, void *owner)
{
    t->req = http_req_ref(req);
    (void)uv_timer_init(http_req_loop(req), &t->timer);
    t->timer.data = owner;
}

/* uv_close callback of the timer: drops the request and frees the owner. */
static void timed_closed(uv_handle_t *h)
{
    struct timed *t = (struct timed *)h;
    http_req_unref(t->req);
    xfree(h->data);
}

/* A streaming response written from a timer on the loop: parts "p0".."p<n-1>". */
struct streamer {
    struct timed t;
    int n, parts;
    uint64_t interval_ms;
};

static void streamer_tick(uv_timer_t *t)
{
    struct streamer *st = t->data;
    char part[16];
    int n = snprintf(part, sizeof(part), "p%d", st->n);
    if (http_req_is_aborted(st->t.req) || http_resp_write(st->t.req, part, (size_t)n) < 0) {
        uv_close((uv_handle_t *)t, timed_closed);
        return;
    }
    if (++st->n == st->parts) {
        assert_int_equal(http_resp_end(st->t.req), 0);
        uv_close((uv_handle_t *)t, timed_closed);
        return;
    }
    (void)uv_timer_start(t, streamer_tick, st->interval_ms, 0);
}

static int start_stream(struct http_req *req, int parts, uint64_t interval_ms)
{
    struct streamer *st = XNEW(struct streamer);
    timed_init(&st->t, req, st);
    st->parts = parts;
    st->interval_ms = interval_ms;
    int r = http_resp_start(req, 200, "text/plain");
    (void)uv_timer_start(&st->t.timer, streamer_tick, interval_ms, 0);
    atomic_store(&stream_started, 1);
    return r;
}

/* A response from a timer, and a handler that counts its runs: one pipelined behind the
 * first must not run inside the timer's http_respond (its callback may still use state
 * the second request's handler frees). */
static atomic_int mark_runs, mark_inside_respond;

static int h_mark(struct http_req *req, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&mark_runs, 1);
    return http_respond(req, 200, "text/plain", "mark", 4);
}

struct later {
    struct timed t;
};

static void later_fire(uv_timer_t *t)
{
    struct later *l = t->data;
    int before = atomic_load(&mark_runs);
    assert_int_equal(http_respond(l->t.req, 200, "text/plain", "later", 5), 0);
    if (atomic_load(&mark_runs) != before)
        atomic_store(&mark_inside_respond, 1);
    uv_close((uv_handle_t *)t, timed_closed);
}

static int h_later(struct http_req *req, void *ctx)
{
    struct later *l = XNEW(struct later);
    (void)ctx;
    timed_init(&l->t, req, l);
    (void)uv_timer_start(&l->t.timer, later_fire, 20, 0);
    return 0;
}

/* Answers only once the client's EOF arrived (http_req_set_eof_cb): a half-closed
 * client still gets the answer. */
static atomic_int eofs_seen;

static void eof_seen(struct http_req *req, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&eofs_seen, 1);
    assert_int_equal(http_respond(req, 200, "text/plain", "eof seen", 8), 0);
    http_req_unref(req);
}

static int h_eof(struct http_req *req, void *ctx)
{
    (void)ctx;
    http_req_set_eof_cb(http_req_ref(req), eof_seen, NULL);
    return 0;
}

/* Answers nothing until it is aborted: the client's EOF ends it (http_req_set_eof_aborts). */
static atomic_int eof_aborted;

static void eofabort_gone(struct http_req *req, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&eof_aborted, 1);
    http_req_unref(req);
}

static int h_eofabort(struct http_req *req, void *ctx)
{
    (void)ctx;
    http_req_set_abort_cb(http_req_ref(req), eofabort_gone, NULL);
    http_req_set_eof_aborts(req);
    return 0;
}

static int h_stream(struct http_req *req, void *ctx)
{
    (void)ctx;
    return start_stream(req, 5, 10);
}

static int h_slowstream(struct http_req *req, void *ctx)
{
    (void)ctx;
    return start_stream(req, 5, 80);
}

/* Writes total bytes (BIG_TOTAL unless set) respecting back-pressure. */
struct big {
    size_t sent, total;
};

static void big_pump(struct http_req *req, void *ctx)
{
    struct big *b = ctx;
    char chunk[8192];
    while (b->sent < (b->total ? b->total : BIG_TOTAL)) {
        for (size_t i = 0; i < sizeof(chunk); i++)
            chunk[i] = (char)('a' + (b->sent + i) % 26);
        int r = http_resp_write(req, chunk, sizeof(chunk));
        if (r == -EAGAIN)
            return;
        assert_true(r >= 0);
        b->sent += sizeof(chunk);
        if (r == 1) {
            atomic_store(&saw_queue_full, 1);
            return;
        }
    }
    assert_int_equal(http_resp_end(req), 0);
    xfree(b);
}

static void big_drain(struct http_req *req, void *ctx)
{
    atomic_fetch_add(&drains, 1);
    big_pump(req, ctx);
}

static void big_abort(struct http_req *req, void *ctx)
{
    (void)req;
    xfree(ctx);
}

/* An endless stream, written as fast as the queue takes it, until the client goes. */
static atomic_int endless_aborts;

static void endless_pump(struct http_req *req, void *ctx)
{
    static const char chunk[8192];
    (void)ctx;
    while (http_resp_write(req, chunk, sizeof(chunk)) == 0)
        ;
}

static void endless_abort(struct http_req *req, void *ctx)
{
    (void)req;
    (void)ctx;
    atomic_fetch_add(&endless_aborts, 1);
}

static int h_endless(struct http_req *req, void *ctx)
{
    (void)ctx;
    http_req_set_drain_cb(req, endless_pump, NULL);
    http_req_set_abort_cb(req, endless_abort, NULL);
    int r = http_resp_start(req, 200, "application/octet-stream");
    endless_pump(req, NULL);
    return r;
}

/* HUGE_TOTAL bytes in one whole response: more than the socket buffers hold, so most of
 * it stays queued until the client reads. */
#define HUGE_TOTAL (24u * 1024 * 1024)

static atomic_int huge_calls;

static int h_huge(struct http_req *req, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&huge_calls, 1);
    char *body = xmalloc(HUGE_TOTAL);
    for (size_t i = 0; i < HUGE_TOTAL; i++)
        body[i] = (char)('a' + i % 26);
    int r = http_respond(req, 200, "application/octet-stream", body, HUGE_TOTAL);
    xfree(body);
    return r;
}

static int h_big(struct http_req *req, void *ctx)
{
    (void)ctx;
    struct big *b = XNEW(struct big);
    http_req_set_drain_cb(req, big_drain, b);
    http_req_set_abort_cb(req, big_abort, b);
    int r = http_resp_start(req, 200, "application/octet-stream");
    big_pump(req, b);
    return r;
}

/* HUGE_TOTAL bytes streamed with a Content-Length, respecting back-pressure. */
static int h_sized(struct http_req *req, void *ctx)
{
    (void)ctx;
    struct big *b = XNEW(struct big);
    b->total = HUGE_TOTAL;
    http_req_set_drain_cb(req, big_drain, b);
    http_req_set_abort_cb(req, big_abort, b);
    int r = http_resp_start_length(req, 200, "application/octet-stream", HUGE_TOTAL);
    big_pump(req, b);
    return r;
}

static int h_noresp(struct http_req *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return 0;
}

/* A streamed upload whose consumer is slower than the body timeout: it pauses the body
 * after the first data for 300 ms (> T_SHORT), which must not count as a slow client. */
struct slow_up {
    struct timed t;
    uint64_t bytes;
    int pauses;
};

static void slow_up_resume(uv_timer_t *t)
{
    struct slow_up *u = t->data;
    http_req_pause_body(u->t.req, false);
}

static int slow_up_body(struct http_req *req, struct str data, bool last, void *ctx)
{
    struct slow_up *u = ctx;
    u->bytes += data.len;
    if (last) {
        char out[64];
        int n = snprintf(out, sizeof(out), "got %llu after %d pause", (unsigned long long)u->bytes,
                         u->pauses);
        uv_close((uv_handle_t *)&u->t.timer, timed_closed);
        return http_respond(req, 200, "text/plain", out, (size_t)n);
    }
    if (data.len && u->pauses == 0) {
        u->pauses++;
        http_req_pause_body(req, true);
        (void)uv_timer_start(&u->t.timer, slow_up_resume, 300, 0);
    }
    return 0;
}

static void slow_up_abort(struct http_req *req, void *ctx)
{
    struct slow_up *u = ctx;
    (void)req;
    if (!uv_is_closing((uv_handle_t *)&u->t.timer))
        uv_close((uv_handle_t *)&u->t.timer, timed_closed);
}

static int h_slow_upload(struct http_req *req, void *ctx)
{
    (void)ctx;
    struct slow_up *u = XNEW(struct slow_up);
    timed_init(&u->t, req, u);
    http_req_set_body_cb(req, slow_up_body, u);
    http_req_set_abort_cb(req, slow_up_abort, u);
    return 0;
}

static bool ready_cb(void *ctx, struct buf *reason)
{
    (void)ctx;
    if (atomic_load(&ready_flag))
        return true;
    (void)buf_puts(reason, "informers not synced");
    return false;
}

static int render_cb(void *ctx, struct buf *out)
{
    (void)ctx;
    return buf_puts(out, "# TYPE x_total counter\nx_total 42\n");
}

static const struct http_probes_opts probes = {
    .ready = ready_cb,
    .render = render_cb,
};

/* ---- fixture ------------------------------------------------------------------------- */

static void add_routes(struct http_router *r)
{
    assert_int_equal(http_router_add(r, "GET", "/hello", 0, h_hello, NULL), 0);
    assert_int_equal(http_router_add(r, "POST", "/echo", 0, h_echo, NULL), 0);
    assert_int_equal(http_router_add(r, "PUT", "/echo", 0, h_echo, NULL), 0);
    assert_int_equal(http_router_add(r, NULL, "/files/", HTTP_ROUTE_PREFIX, h_rest, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/files/special", 0, h_hello, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/fail", 0, h_fail, NULL), 0);
    assert_int_equal(http_router_add(r, "POST", "/upload", HTTP_ROUTE_STREAM_BODY, h_upload, NULL),
                     0);
    assert_int_equal(http_router_add(r, "GET", "/stream", 0, h_stream, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/later", 0, h_later, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/mark", 0, h_mark, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/slowstream", 0, h_slowstream, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/big", 0, h_big, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/huge", 0, h_huge, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/endless", 0, h_endless, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/noresp", 0, h_noresp, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/eof", 0, h_eof, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/sized", 0, h_sized, NULL), 0);
    assert_int_equal(http_router_add(r, "GET", "/eofabort", 0, h_eofabort, NULL), 0);
    assert_int_equal(
        http_router_add(r, "PUT", "/slow-upload", HTTP_ROUTE_STREAM_BODY, h_slow_upload, NULL), 0);
    assert_int_equal(http_probes_register(r, &probes), 0);
    assert_int_equal(http_router_add(r, "GET", "no-slash", 0, h_hello, NULL), -EINVAL);
    assert_int_equal(http_router_add(r, "G T", "/x", 0, h_hello, NULL), -EINVAL);
}

static struct fixture *start(const struct http_server_opts *extra)
{
    struct fixture *f = XNEW(struct fixture);
    f->router = http_router_new();
    add_routes(f->router);
    struct http_server_opts o = {
        .header_timeout = T_SHORT,
        .body_timeout = T_SHORT,
        .idle_timeout = T_SHORT,
        .max_body = MAX_BODY,
    };
    if (extra) {
        o.max_connections = extra->max_connections;
        o.write_queue = extra->write_queue;
        o.stream_stall = extra->stream_stall;
        o.error_body = extra->error_body;
        if (extra->idle_timeout)
            o.idle_timeout = extra->idle_timeout;
    }
    o.router = f->router;
    assert_int_equal(http_server_start_thread(&o, &f->t), 0);
    f->port = http_server_thread_port(f->t);
    assert_true(f->port > 0);
    atomic_store(&stream_started, 0);
    return f;
}

static void stop(struct fixture *f)
{
    http_server_stop_thread(f->t, 2 * USEC_PER_SEC);
    http_router_free(f->router);
    xfree(f);
}

static struct test_http_conn conn_to(const struct fixture *f)
{
    struct test_http_conn c;
    assert_int_equal(test_http_connect(f->port, &c), 0);
    return c;
}

static void expect_body(const struct test_http_resp *r, const char *want)
{
    assert_int_equal(r->body.len, strlen(want));
    assert_memory_equal(r->body.data, want, strlen(want));
}

static void expect_header(const struct test_http_resp *r, const char *name, const char *want)
{
    char *v = test_http_header(r, name);
    if (!want) {
        assert_null(v);
        return;
    }
    assert_non_null(v);
    assert_string_equal(v, want);
    xfree(v);
}

/* One request on a fresh connection; returns the status. */
static int one(const struct fixture *f, const char *raw, struct test_http_resp *r)
{
    int ret = test_http_request(f->port, raw, T_READ, r);
    assert_int_equal(ret, 0);
    return r->status;
}

/* Reads one response on c into r; returns its status. */
static int read_resp(struct test_http_conn *c, struct test_http_resp *r)
{
    assert_int_equal(test_http_read(c, false, T_READ, r), 0);
    return r->status;
}

/* Reads /huge's response on c into r; returns its status. */
static int read_huge(struct test_http_conn *c, struct test_http_resp *r)
{
    assert_int_equal(test_http_read(c, false, T_HUGE, r), 0);
    return r->status;
}

/* Sends raw on c, then reads one response into r; returns its status. */
static int send_read(struct test_http_conn *c, const char *raw, struct test_http_resp *r)
{
    assert_int_equal(test_http_send_str(c, raw), 0);
    return read_resp(c, r);
}

/* Sends raw on c, then shuts c's write side (a half-close: the server reads EOF). */
static void send_half_closed(struct test_http_conn *c, const char *raw)
{
    assert_int_equal(test_http_send_str(c, raw), 0);
    assert_int_equal(shutdown(c->fd, SHUT_WR), 0);
}

/* r holds the whole /huge body (HUGE_TOTAL bytes of the alphabet, sampled). */
static void expect_huge(const struct test_http_resp *r)
{
    assert_int_equal(r->body.len, HUGE_TOTAL);
    for (size_t k = 0; k < HUGE_TOTAL; k += 4099)
        assert_int_equal(r->body.data[k], (char)('a' + k % 26));
}

/* Waits (bounded) until a streaming handler has started. */
static void wait_stream_started(void)
{
    for (int i = 0; i < 500 && !atomic_load(&stream_started); i++)
        clock_sleep(2 * USEC_PER_MSEC);
}

/* ---- tests --------------------------------------------------------------------------- */

static void test_keep_alive(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    test_http_resp_init(&r);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(send_read(&c, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
        expect_body(&r, "hello");
        assert_false(r.conn_close);
        expect_header(&r, "content-type", "text/plain");
    }
    assert_int_equal(test_http_send_str(&c, "HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n"), 0);
    assert_int_equal(test_http_read(&c, true, T_READ, &r), 0);
    assert_int_equal(r.status, 200);
    expect_header(&r, "content-length", "5");
    assert_int_equal(r.body.len, 0);
    /* the connection still works after HEAD: no stray body bytes were sent */
    (void)send_read(&c,
                    "GET /hello HTTP/1.1\r\nHost: t\r\n"
                    "Connection: close\r\n\r\n",
                    &r);
    expect_body(&r, "hello");
    assert_true(r.conn_close);
    assert_int_equal(test_http_wait_closed(&c, T_READ), 0);
    test_http_resp_done(&r);
    test_http_close(&c);
    stop(f);
}

/* The timer of the server's side of an established connection on 127.0.0.1:port, as
 * /proc/net/tcp shows it ("tr": 0 none, 2 keepalive), or -1 when not found. */
static int server_side_timer(uint16_t port)
{
    char line[512], local[64];
    unsigned st, tr;
    int found = -1;
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return -1;
    (void)snprintf(local, sizeof(local), "0100007F:%04X", (unsigned)port);
    while (fgets(line, sizeof(line), f)) {
        char loc[64];
        if (sscanf(line, " %*u: %63s %*s %x %*s %x:", loc, &st, &tr) == 3 &&
            strcmp(loc, local) == 0 && st == 1)
            found = (int)tr;
    }
    (void)fclose(f);
    return found;
}

/* An accepted connection has TCP keepalive on: a peer gone without a FIN or RST (a
 * partition, a host asleep) ends it, and what it holds (a silent call, a process) is let
 * go. Before, such a connection stayed for ever. The kernel shows the keepalive timer of
 * the idle server side. */
static void test_accepted_keepalive(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(send_read(&c, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
    /* until the client's ACK of the answer, the timer is the retransmission's (1) */
    int timer = -1;
    for (int i = 0; i < 100 && (timer = server_side_timer(f->port)) != 2; i++)
        clock_sleep(20 * USEC_PER_MSEC);
    assert_int_equal(timer, 2);
    test_http_resp_done(&r);
    test_http_close(&c);
    stop(f);
}

static void test_pipelined(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    test_http_resp_init(&r);
    (void)send_read(&c,
                    "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"
                    "POST /echo HTTP/1.1\r\nHost: t\r\n"
                    "Content-Length: 3\r\n\r\nabc"
                    "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n"
                    "GET /files/a/b?q=1 HTTP/1.1\r\nHost: t\r\n"
                    "X-Test: yes\r\n\r\n",
                    &r);
    expect_body(&r, "hello");
    (void)read_resp(&c, &r);
    expect_body(&r, "abc");
    expect_header(&r, "x-body-len", "3");
    (void)read_resp(&c, &r);
    expect_body(&r, "p0p1p2p3p4");
    (void)read_resp(&c, &r);
    expect_body(&r, "a/b|q=1|yes");
    test_http_resp_done(&r);
    test_http_close(&c);
    stop(f);
}

static void test_pipelined_after_async_response(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    atomic_store(&mark_runs, 0);
    atomic_store(&mark_inside_respond, 0);
    test_http_resp_init(&r);
    (void)send_read(&c,
                    "GET /later HTTP/1.1\r\nHost: t\r\n\r\n"
                    "GET /mark HTTP/1.1\r\nHost: t\r\n\r\n",
                    &r);
    expect_body(&r, "later");
    (void)read_resp(&c, &r);
    expect_body(&r, "mark");
    assert_int_equal(atomic_load(&mark_runs), 1);
    assert_int_equal(atomic_load(&mark_inside_respond), 0);
    test_http_resp_done(&r);
    test_http_close(&c);
    stop(f);
}

static void test_routing(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(one(f, "GET /files/special HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
    expect_body(&r, "hello"); /* exact beats prefix */
    assert_int_equal(one(f, "DELETE /files/x HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
    expect_body(&r, "x||");
    assert_int_equal(one(f, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", &r), 404);
    expect_header(&r, "content-type", "application/json");
    expect_body(&r, "{\"detail\": \"not found\"}");
    assert_int_equal(one(f, "DELETE /hello HTTP/1.1\r\nHost: t\r\n\r\n", &r), 405);
    expect_header(&r, "allow", "GET, HEAD");
    assert_int_equal(one(f, "BREW /hello HTTP/1.1\r\nHost: t\r\n\r\n", &r), 501);
    assert_int_equal(one(f, "GET /fail HTTP/1.1\r\nHost: t\r\n\r\n", &r), 500);
    expect_body(&r, "{\"detail\": \"internal error\"}");
    assert_int_equal(one(f, "GET /noresp HTTP/1.1\r\nHost: t\r\n\r\n", &r), 500);
    expect_body(&r, "{\"detail\": \"handler did not respond\"}");
    test_http_resp_done(&r);
    stop(f);
}

static void test_bad_requests(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(one(f, "GET / HTTP/1.1\r\nHost: t\r\nBad Name: x\r\n\r\n", &r), 400);
    assert_true(r.conn_close);
    assert_int_equal(one(f, "GET / HTTP/2.0\r\nHost: t\r\n\r\n", &r), 505);
    assert_int_equal(one(f,
                         "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n",
                         &r),
                     400);
    assert_int_equal(one(f, "\x16\x03\x01\x02", &r), 400); /* TLS hello: answered at once */

    struct buf big;
    buf_init(&big, 1u << 20);
    assert_int_equal(buf_puts(&big, "GET /hello HTTP/1.1\r\nHost: t\r\n"), 0);
    for (int i = 0; big.len < 70000; i++)
        assert_int_equal(buf_printf(&big, "X-%d: %0100d\r\n", i, i), 0);
    assert_int_equal(buf_puts(&big, "\r\n"), 0);
    assert_int_equal(one(f, big.data, &r), 431);
    buf_reset(&big);
    assert_int_equal(buf_puts(&big, "GET /"), 0);
    while (big.len < 20000)
        assert_int_equal(buf_putc(&big, 'a'), 0);
    assert_int_equal(buf_puts(&big, " HTTP/1.1\r\nHost: t\r\n\r\n"), 0);
    assert_int_equal(one(f, big.data, &r), 414);
    buf_done(&big);
    test_http_resp_done(&r);
    stop(f);
}

static void test_request_bodies(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    test_http_resp_init(&r);
    /* chunked body in awkward pieces, then a keep-alive request after it */
    const char *pieces[] = {"PUT /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
                            "3\r", "\nabc\r\n1", "0;x=y\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\n"};
    for (size_t i = 0; i < ARRAY_SIZE(pieces); i++)
        assert_int_equal(test_http_send_str(&c, pieces[i]), 0);
    assert_int_equal(read_resp(&c, &r), 200);
    expect_body(&r, "abc0123456789abcdef");

    /* streamed upload with Expect: 100-continue */
    atomic_store(&upload_chunks, 0);
    assert_int_equal(send_read(&c,
                               "POST /upload HTTP/1.1\r\nHost: t\r\n"
                               "Content-Length: 3000\r\n"
                               "Expect: 100-continue\r\n\r\n",
                               &r),
                     100);
    char block[1000];
    memset(block, 'z', sizeof(block));
    for (int i = 0; i < 3; i++)
        assert_int_equal(test_http_send(&c, block, sizeof(block)), 0);
    assert_int_equal(read_resp(&c, &r), 200);
    expect_body(&r, "got 3000"); /* 3000 > MAX_BODY: streamed routes are not buffered */
    assert_true(atomic_load(&upload_chunks) >= 1);
    assert_false(r.conn_close);

    /* an empty streamed body (Content-Length: 0, or none at all) still ends */
    assert_int_equal(send_read(&c,
                               "POST /upload HTTP/1.1\r\nHost: t\r\n"
                               "Content-Length: 0\r\n\r\n",
                               &r),
                     200);
    expect_body(&r, "got 0");
    assert_int_equal(send_read(&c, "POST /upload HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
    expect_body(&r, "got 0");

    /* a buffered body past max_body: 413 and the connection closes */
    assert_int_equal(send_read(&c,
                               "POST /echo HTTP/1.1\r\nHost: t\r\n"
                               "Content-Length: 5000\r\n\r\n",
                               &r),
                     413);
    assert_true(r.conn_close);
    assert_int_equal(test_http_wait_closed(&c, T_READ), 0);
    test_http_close(&c);

    /* the same with a chunked body that grows past the limit */
    c = conn_to(f);
    assert_int_equal(test_http_send_str(&c, "POST /echo HTTP/1.1\r\nHost: t\r\n"
                                            "Transfer-Encoding: chunked\r\n\r\n"),
                     0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(test_http_send_str(&c, "3e8\r\n"), 0);
        assert_int_equal(test_http_send(&c, block, sizeof(block)), 0);
        assert_int_equal(test_http_send_str(&c, "\r\n"), 0);
    }
    assert_int_equal(read_resp(&c, &r), 413);
    test_http_close(&c);

    /* a malformed chunk size */
    c = conn_to(f);
    assert_int_equal(send_read(&c,
                               "POST /echo HTTP/1.1\r\nHost: t\r\n"
                               "Transfer-Encoding: chunked\r\n\r\nzz\r\n",
                               &r),
                     400);
    test_http_resp_done(&r);
    test_http_close(&c);
    stop(f);
}

static void test_streaming_response(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(one(f, "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
    assert_true(r.chunked);
    assert_true(r.chunks >= 1);
    expect_body(&r, "p0p1p2p3p4");
    /* HTTP/1.0 gets a close-delimited body */
    assert_int_equal(one(f, "GET /stream HTTP/1.0\r\n\r\n", &r), 200);
    assert_false(r.chunked);
    assert_true(r.conn_close);
    expect_body(&r, "p0p1p2p3p4");
    test_http_resp_done(&r);
    stop(f);
}

static void test_http10_keep_alive(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    test_http_resp_init(&r);
    (void)send_read(&c, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r);
    expect_header(&r, "connection", "keep-alive");
    (void)send_read(&c, "GET /hello HTTP/1.0\r\n\r\n", &r);
    expect_body(&r, "hello");
    assert_true(r.conn_close);
    assert_int_equal(test_http_wait_closed(&c, T_READ), 0);
    test_http_resp_done(&r);
    test_http_close(&c);
    stop(f);
}

static void test_back_pressure(void **state)
{
    (void)state;
    struct http_server_opts o = {.write_queue = 16 * 1024};
    struct fixture *f = start(&o);
    atomic_store(&saw_queue_full, 0);
    atomic_store(&drains, 0);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(one(f, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
    assert_int_equal(r.body.len, BIG_TOTAL);
    for (size_t i = 0; i < BIG_TOTAL; i += 4099)
        assert_int_equal(r.body.data[i], (char)('a' + i % 26));
    assert_true(atomic_load(&saw_queue_full));
    assert_true(atomic_load(&drains) > 0);
    test_http_resp_done(&r);
    stop(f);
}

static void test_slowloris(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_resp r;
    test_http_resp_init(&r);
    /* a head that trickles in a byte every 50 ms never completes: 408 after the header
     * timeout, which bounds the whole head, not the gap between bytes. The bytes keep
     * coming until the answer does (each gap well below the timeout), so a timer that
     * every byte restarted would never fire: the answer arrives while they still come,
     * and not before the header timeout (counted from the accept, after t0). */
    usec_t t0 = clock_now();
    struct test_http_conn c = conn_to(f);
    struct pollfd answer = {.fd = c.fd, .events = POLLIN};
    int sent = 0, ready = 0;
    assert_int_equal(test_http_send_str(&c, "GET /hello HTTP/1.1\r\nHost: t\r\n"), 0);
    while (sent < SLOWLORIS_MAX_BYTES && (ready = poll(&answer, 1, 50)) == 0) {
        (void)test_http_send_str(&c, "X"); /* the answer may be on its way */
        sent++;
    }
    assert_int_equal(ready, 1); /* the answer came while the head still trickled in */
    assert_int_equal(read_resp(&c, &r), 408);
    assert_true(clock_now() - t0 >= T_SHORT - 10 * USEC_PER_MSEC); /* libuv: a coarse ms clock */
    assert_int_equal(test_http_wait_closed(&c, T_READ), 0);
    test_http_close(&c);

    /* a body that stalls: 408 after the body timeout */
    c = conn_to(f);
    assert_int_equal(send_read(&c,
                               "POST /echo HTTP/1.1\r\nHost: t\r\n"
                               "Content-Length: 10\r\n\r\nabc",
                               &r),
                     408);
    test_http_close(&c);

    /* a connection that never sends anything is closed without a response */
    c = conn_to(f);
    assert_int_equal(test_http_wait_silent_close(&c, T_READ), 0);
    test_http_close(&c);
    test_http_resp_done(&r);
    stop(f);
}

static void test_idle_keep_alive_closed(void **state)
{
    (void)state;
    struct http_server_opts o = {.idle_timeout = 300 * USEC_PER_MSEC};
    struct fixture *f = start(&o);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(send_read(&c, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
    /* a stray CRLF after a request does not count as the start of a new one (which the
     * idle close would answer with a 400 or 408) */
    assert_int_equal(send_read(&c, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n\r\n", &r), 200);
    usec_t t0 = clock_now();
    /* still open well before the idle timeout, then closed without a word */
    assert_int_equal(test_http_wait_silent_close(&c, 100 * USEC_PER_MSEC), -ETIMEDOUT);
    assert_int_equal(test_http_wait_silent_close(&c, T_READ), 0);
    assert_true(clock_now() - t0 >= 250 * USEC_PER_MSEC);
    test_http_resp_done(&r);
    test_http_close(&c);
    stop(f);
}

/* A client that reads its response slowly gets all of it: after a response that ends
 * the connection (Connection: close: the linger timer) and on a keep-alive connection
 * (the idle timer), the timers no longer close the connection while the response's end
 * is still queued and moving (they threw it away). */
static void test_slow_reader_gets_whole_response(void **state)
{
    static const char *const reqs[] = {
        "GET /huge HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "GET /huge HTTP/1.1\r\nHost: t\r\n\r\n",
    };
    (void)state;
    struct fixture *f = start(NULL); /* idle timeout T_SHORT */
    for (size_t i = 0; i < ARRAY_SIZE(reqs); i++) {
        struct test_http_conn c = conn_to(f);
        struct test_http_resp r;
        test_http_resp_init(&r);
        assert_int_equal(test_http_send_str(&c, reqs[i]), 0);
        clock_sleep(LIMIT_HTTP_LINGER + 500 * USEC_PER_MSEC); /* past both timers */
        assert_int_equal(read_huge(&c, &r), 200);
        expect_huge(&r);
        test_http_resp_done(&r);
        test_http_close(&c);
    }
    stop(f);
}

/* Pipelined requests wait while the responses before them fill the write queue: a
 * client that sends many and reads none no longer gets every answer queued for it (each
 * handler ran at once, past the queue's bound). */
static void test_pipelined_held_by_write_queue(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    atomic_store(&huge_calls, 0);
    assert_int_equal(test_http_send_str(&c, "GET /huge HTTP/1.1\r\nHost: t\r\n\r\n"
                                            "GET /huge HTTP/1.1\r\nHost: t\r\n\r\n"
                                            "GET /huge HTTP/1.1\r\nHost: t\r\n\r\n"),
                     0);
    clock_sleep(300 * USEC_PER_MSEC);
    assert_int_equal(atomic_load(&huge_calls), 1); /* the others wait for the reader */
    test_http_resp_init(&r);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(read_resp(&c, &r), 200);
        assert_int_equal(r.body.len, HUGE_TOTAL);
    }
    assert_int_equal(atomic_load(&huge_calls), 3);
    test_http_resp_done(&r);
    test_http_close(&c);
    stop(f);
}

/* A running response whose client takes nothing of its full queue for the stall time
 * ends (its handler hears the abort): the connection, its descriptor and whatever feeds
 * the response (a paused process) were held for as long as the client lived. */
static void test_stalled_stream_closed(void **state)
{
    (void)state;
    struct http_server_opts o = {.write_queue = 16 * 1024, .stream_stall = 300 * USEC_PER_MSEC};
    struct fixture *f = start(&o);
    struct test_http_conn c = conn_to(f);
    atomic_store(&endless_aborts, 0);
    assert_int_equal(test_http_send_str(&c, "GET /endless HTTP/1.1\r\nHost: t\r\n\r\n"), 0);
    for (int i = 0; i < 500 && atomic_load(&endless_aborts) == 0; i++)
        clock_sleep(10 * USEC_PER_MSEC);
    assert_int_equal(atomic_load(&endless_aborts), 1);
    test_http_close(&c);
    stop(f);
}

/* The same stream, with a stall time of 1 s, read slowly but steadily (16 KiB every
 * 50 ms): once the socket buffers are full the kernel takes another write only when a
 * third of its (large) send buffer is free, seconds apart at this pace, but the client
 * takes bytes of the socket's queue at its window updates, several a second, which
 * count as progress (http/progress.h): the stream goes on. Before, the stall bound
 * counted completed writes only and closed it. */
static void test_slowly_read_stream_kept(void **state)
{
    (void)state;
    struct http_server_opts o = {.write_queue = 16 * 1024, .stream_stall = USEC_PER_SEC};
    struct fixture *f = start(&o);
    struct test_http_conn c = conn_to(f);
    char b[16 * 1024];
    atomic_store(&endless_aborts, 0);
    assert_int_equal(test_http_send_str(&c, "GET /endless HTTP/1.1\r\nHost: t\r\n\r\n"), 0);
    for (int i = 0; i < 80; i++) {
        assert_true(recv(c.fd, b, sizeof(b), MSG_WAITALL) > 0);
        clock_sleep(50 * USEC_PER_MSEC);
    }
    assert_int_equal(atomic_load(&endless_aborts), 0);
    test_http_close(&c);
    stop(f);
}

static void test_connection_limit(void **state)
{
    (void)state;
    struct http_server_opts o = {.max_connections = 2, .idle_timeout = 10 * USEC_PER_SEC};
    struct fixture *f = start(&o);
    struct test_http_resp r;
    test_http_resp_init(&r);
    struct test_http_conn a = conn_to(f), b = conn_to(f);
    const char *get = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
    (void)send_read(&a, get, &r);
    (void)send_read(&b, get, &r);
    /* the third is accepted and closed at once */
    struct test_http_conn c = conn_to(f);
    assert_int_equal(test_http_wait_closed(&c, T_READ), 0);
    test_http_close(&c);
    /* once one closes there is room again (the server notices the close soon) */
    test_http_close(&a);
    int status = 0;
    for (int i = 0; i < 100 && status != 200; i++) {
        c = conn_to(f);
        if (test_http_send_str(&c, get) == 0 && test_http_read(&c, false, T_READ, &r) == 0)
            status = r.status;
        test_http_close(&c);
        if (status != 200)
            clock_sleep(10 * USEC_PER_MSEC);
    }
    assert_int_equal(status, 200);
    test_http_close(&b);
    test_http_resp_done(&r);
    stop(f);
}

struct stopper {
    struct fixture *f;
    pthread_t th;
};

static void *stop_main(void *arg)
{
    struct stopper *s = arg;
    http_server_stop_thread(s->f->t, 5 * USEC_PER_SEC);
    return NULL;
}

static void test_graceful_shutdown(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_resp r;
    test_http_resp_init(&r);
    /* an idle keep-alive connection and an in-flight streaming response */
    struct test_http_conn idle = conn_to(f), busy = conn_to(f);
    (void)send_read(&idle, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    assert_int_equal(test_http_send_str(&busy, "GET /slowstream HTTP/1.1\r\nHost: t\r\n\r\n"), 0);
    wait_stream_started();
    assert_true(atomic_load(&stream_started));

    struct stopper s = {.f = f};
    assert_int_equal(pthread_create(&s.th, NULL, stop_main, &s), 0);
    /* the idle connection goes right away, the stream completes, then closes: its client
     * keeps the connection (for reuse) and never ends its side, and the linger after a
     * request read whole is the short one (before: the whole LIMIT_HTTP_LINGER) */
    assert_int_equal(test_http_wait_closed(&idle, T_READ), 0);
    assert_int_equal(read_resp(&busy, &r), 200);
    expect_body(&r, "p0p1p2p3p4");
    usec_t t0 = clock_now();
    assert_int_equal(test_http_wait_closed(&busy, T_READ), 0);
    assert_int_equal(pthread_join(s.th, NULL), 0);
    assert_true(clock_now() - t0 < LIMIT_HTTP_LINGER / 2);
    /* nothing listens any more */
    struct test_http_conn late;
    assert_int_equal(test_http_connect(f->port, &late), -ECONNREFUSED);
    test_http_close(&idle);
    test_http_close(&busy);
    test_http_resp_done(&r);
    http_router_free(f->router);
    xfree(f);
}

static void test_probes(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(one(f, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
    expect_body(&r, "ok\n");
    atomic_store(&ready_flag, 0);
    assert_int_equal(one(f, "GET /readyz HTTP/1.1\r\nHost: t\r\n\r\n", &r), 503);
    expect_body(&r, "informers not synced\n");
    atomic_store(&ready_flag, 1);
    assert_int_equal(one(f, "GET /readyz HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
    assert_int_equal(one(f, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n", &r), 200);
    expect_header(&r, "content-type", HTTP_METRICS_CONTENT_TYPE);
    expect_body(&r, "# TYPE x_total counter\nx_total 42\n");
    assert_int_equal(one(f, "POST /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", &r),
                     405);
    /* a probe reads no body: one announced (and never sent) is answered at the head, the
     * connection closed after it, nothing of it buffered */
    struct test_http_conn c = conn_to(f);
    assert_int_equal(
        send_read(&c, "GET /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n", &r), 200);
    assert_true(r.conn_close);
    assert_int_equal(test_http_wait_closed(&c, T_READ), 0);
    test_http_close(&c);
    test_http_resp_done(&r);
    stop(f);
}

struct posted {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int runs;
};

static void posted_fn(void *arg)
{
    struct posted *p = arg;
    (void)pthread_mutex_lock(&p->lock);
    p->runs++;
    (void)pthread_cond_signal(&p->cond);
    (void)pthread_mutex_unlock(&p->lock);
}

static int custom_error(void *ctx, int status, const char *detail, struct buf *out,
                        const char **ret_content_type)
{
    (void)ctx;
    *ret_content_type = "text/plain";
    return buf_printf(out, "error %d: %s", status, detail);
}

static void test_post_and_custom_errors(void **state)
{
    (void)state;
    struct http_server_opts o = {.error_body = custom_error};
    struct fixture *f = start(&o);
    struct posted p = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    for (int i = 0; i < 10; i++)
        assert_int_equal(http_server_post(http_server_thread_server(f->t), posted_fn, &p), 0);
    (void)pthread_mutex_lock(&p.lock);
    while (p.runs < 10) {
        struct timespec ts;
        clock_deadline_realtime(T_READ, &ts);
        assert_int_equal(pthread_cond_timedwait(&p.cond, &p.lock, &ts), 0);
    }
    (void)pthread_mutex_unlock(&p.lock);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(one(f, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", &r), 404);
    expect_header(&r, "content-type", "text/plain");
    expect_body(&r, "error 404: not found");
    test_http_resp_done(&r);
    stop(f);
}

struct conn_count {
    struct http_server *s;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    long n;
};

static void count_fn(void *arg)
{
    struct conn_count *cc = arg;
    (void)pthread_mutex_lock(&cc->lock);
    cc->n = (long)http_server_connections(cc->s);
    (void)pthread_cond_signal(&cc->cond);
    (void)pthread_mutex_unlock(&cc->lock);
}

/* The server's open connection count, read on its loop thread. */
static long server_conns(const struct fixture *f)
{
    struct conn_count cc = {.s = http_server_thread_server(f->t),
                            .lock = PTHREAD_MUTEX_INITIALIZER,
                            .cond = PTHREAD_COND_INITIALIZER,
                            .n = -1};
    assert_int_equal(http_server_post(cc.s, count_fn, &cc), 0);
    (void)pthread_mutex_lock(&cc.lock);
    while (cc.n < 0) {
        struct timespec ts;
        clock_deadline_realtime(T_READ, &ts);
        assert_int_equal(pthread_cond_timedwait(&cc.cond, &cc.lock, &ts), 0);
    }
    (void)pthread_mutex_unlock(&cc.lock);
    return cc.n;
}

/* Waits (bounded) until the server has no connection left; returns the last count. */
static long wait_no_conns(const struct fixture *f)
{
    long n = server_conns(f);
    for (int i = 0; i < 400 && n != 0; i++) {
        clock_sleep(5 * USEC_PER_MSEC);
        n = server_conns(f);
    }
    return n;
}

static void test_client_gone_mid_stream(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    assert_int_equal(test_http_send_str(&c, "GET /slowstream HTTP/1.1\r\nHost: t\r\n\r\n"), 0);
    wait_stream_started();
    assert_int_equal(server_conns(f), 1);
    test_http_close(&c);
    /* the server notices on its next write and releases everything (ASan checks) */
    assert_int_equal(wait_no_conns(f), 0);

    /* an upload abandoned half-way */
    c = conn_to(f);
    assert_int_equal(test_http_send_str(&c, "POST /upload HTTP/1.1\r\nHost: t\r\n"
                                            "Content-Length: 100\r\n\r\nabc"),
                     0);
    clock_sleep(20 * USEC_PER_MSEC);
    test_http_close(&c);
    assert_int_equal(wait_no_conns(f), 0);
    stop(f);
}

static void test_half_close_told(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    test_http_resp_init(&r);
    atomic_store(&eofs_seen, 0);
    send_half_closed(&c, "GET /eof HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_int_equal(read_resp(&c, &r), 200); /* sent from the EOF callback */
    expect_body(&r, "eof seen");
    assert_int_equal(atomic_load(&eofs_seen), 1);
    test_http_resp_done(&r);
    test_http_close(&c);
    assert_int_equal(wait_no_conns(f), 0);
    stop(f);
}

/* A request that the client's EOF ends, pipelined behind one answered later (so the EOF
 * is read while the first waits, before the second is dispatched): it still ends, and
 * the connection with it, once the first is answered. */
static void test_eof_before_pipelined_eof_abort(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    test_http_resp_init(&r);
    atomic_store(&eof_aborted, 0);
    send_half_closed(&c, "GET /later HTTP/1.1\r\nHost: t\r\n\r\n"
                         "GET /eofabort HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_int_equal(read_resp(&c, &r), 200);
    expect_body(&r, "later");
    assert_int_equal(wait_no_conns(f), 0); /* closed, not left waiting */
    assert_int_equal(atomic_load(&eof_aborted), 1);
    test_http_close(&c);

    /* behind a response larger than the write queue, still queued when the second is
     * dispatched: the first goes out whole before the connection ends */
    c = conn_to(f);
    send_half_closed(&c, "GET /huge HTTP/1.1\r\nHost: t\r\n\r\n"
                         "GET /eofabort HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_int_equal(read_huge(&c, &r), 200);
    expect_huge(&r);
    assert_int_equal(wait_no_conns(f), 0);
    assert_int_equal(atomic_load(&eof_aborted), 2);
    test_http_resp_done(&r);
    test_http_close(&c);
    stop(f);
}

/* A client that half-closes right after its request still gets a response of a known
 * length whole: one queued at once (/huge), and one streamed with a Content-Length
 * (/sized) while the EOF arrives. Only open-ended streams end at the EOF. */
static void test_half_closed_client_gets_whole_response(void **state)
{
    static const char *const paths[] = {"/huge", "/sized"};
    (void)state;
    struct fixture *f = start(NULL);
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        struct test_http_conn c = conn_to(f);
        struct test_http_resp r;
        char req[64];
        test_http_resp_init(&r);
        (void)snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", paths[i]);
        send_half_closed(&c, req);
        clock_sleep(300 * USEC_PER_MSEC); /* the EOF is read while the response waits */
        assert_int_equal(read_huge(&c, &r), 200);
        expect_huge(&r);
        test_http_resp_done(&r);
        test_http_close(&c);
    }
    assert_int_equal(wait_no_conns(f), 0);
    stop(f);
}

static void test_paused_upload(void **state)
{
    (void)state;
    struct fixture *f = start(NULL);
    struct test_http_conn c = conn_to(f);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(test_http_send_str(&c, "PUT /slow-upload HTTP/1.1\r\nHost: t\r\n"
                                            "Content-Length: 6\r\n\r\nabc"),
                     0);
    clock_sleep(50 * USEC_PER_MSEC);
    assert_int_equal(send_read(&c, "def", &r), 200);
    expect_body(&r, "got 6 after 1 pause");
    test_http_resp_done(&r);
    test_http_close(&c);
    stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_alive),
        cmocka_unit_test(test_accepted_keepalive),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_pipelined_after_async_response),
        cmocka_unit_test(test_routing),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_request_bodies),
        cmocka_unit_test(test_streaming_response),
        cmocka_unit_test(test_http10_keep_alive),
        cmocka_unit_test(test_back_pressure),
        cmocka_unit_test(test_slowloris),
        cmocka_unit_test(test_idle_keep_alive_closed),
        cmocka_unit_test(test_slow_reader_gets_whole_response),
        cmocka_unit_test(test_pipelined_held_by_write_queue),
        cmocka_unit_test(test_stalled_stream_closed),
        cmocka_unit_test(test_slowly_read_stream_kept),
        cmocka_unit_test(test_connection_limit),
        cmocka_unit_test(test_graceful_shutdown),
        cmocka_unit_test(test_half_close_told),
        cmocka_unit_test(test_half_closed_client_gets_whole_response),
        cmocka_unit_test(test_eof_before_pipelined_eof_abort),
        cmocka_unit_test(test_probes),
        cmocka_unit_test(test_post_and_custom_errors),
        cmocka_unit_test(test_client_gone_mid_stream),
        cmocka_unit_test(test_paused_upload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
