/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox-router against the local kube-apiserver: Sandboxes whose status.podIPs point
 * at a test upstream on 127.0.0.1 (allowed by the unsafe test flag), the router running
 * in-process. Covers both routing forms, bodies both ways, chunked, keep-alive reuse,
 * 101 tunnelling, readiness and not-found answers, auth (401/403/200), a slow client,
 * 1,000 concurrent keep-alive connections and graceful shutdown with a stream in flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "api/res.h"
#include "api/sandbox.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "http/server.h"
#include "kube/client.h"
#include "kube/obj.h"
#include "kube/res.h"
#include "router/router.h"
#include "support/apiserver.h"
#include "support/http_client.h"
#include "support/kube_fixture.h"

#define WAIT   (30 * USEC_PER_SEC)
#define T_READ (10 * USEC_PER_SEC)
#define BIG    (3u * 1024 * 1024)

static struct kube_client *c;
static char ns[96];
static struct http_router *up_routes;
static struct http_server_thread *up;
static struct router *rt, *rt_auth;

/* ---- The test upstream (runs on its own loop thread) ------------------------------- */

static int h_echo(struct http_req *req, void *ctx)
{
    (void)ctx;
    char body[2048];
    struct str m = http_req_method(req), t = http_req_target(req);
    struct str a = http_req_header(req, "Authorization"), x = http_req_header(req, "X-Sandbox-ID");
    struct str f = http_req_header(req, "X-Forwarded-For");
    int n = snprintf(body, sizeof(body), "%.*s %.*s auth=%s xsid=%s xff=%.*s", (int)m.len, m.p,
                     (int)t.len, t.p, a.p ? "yes" : "no", x.p ? "yes" : "no", (int)f.len, f.p);
    return http_respond(req, 200, "text/plain", body, (size_t)n);
}

struct upload {
    uint64_t n;
};

static int on_upload_body(struct http_req *req, struct str data, bool last, void *ctx)
{
    struct upload *u = ctx;
    u->n += data.len;
    if (!last)
        return 0;
    char body[64];
    int n = snprintf(body, sizeof(body), "got %llu", (unsigned long long)u->n);
    xfree(u);
    http_req_set_body_cb(req, NULL, NULL);
    return http_respond(req, 200, "text/plain", body, (size_t)n);
}

static int h_upload(struct http_req *req, void *ctx)
{
    (void)ctx;
    http_req_set_body_cb(req, on_upload_body, XNEW(struct upload));
    return 0;
}

struct streamer {
    struct http_req *req;
    uv_timer_t timer;
    size_t sent, total;
    unsigned delay_ms;
};

static void on_streamer_closed(uv_handle_t *h)
{
    struct streamer *s = h->data;
    http_req_unref(s->req);
    xfree(s);
}

static void stream_more(struct streamer *s);

static void on_stream_timer(uv_timer_t *t)
{
    stream_more(t->data);
}

static void on_stream_drain(struct http_req *req, void *ctx)
{
    (void)req;
    stream_more(ctx);
}

static void stream_more(struct streamer *s)
{
    static char chunk[16384];
    memset(chunk, 'z', sizeof(chunk));
    while (s->sent < s->total) {
        size_t n = s->total - s->sent < sizeof(chunk) ? s->total - s->sent : sizeof(chunk);
        int r = http_resp_write(s->req, chunk, n);
        if (r < 0 && r != -EAGAIN)
            break;
        if (r == -EAGAIN)
            return;
        s->sent += n;
        if (r == 1)
            return;
        if (s->delay_ms) {
            (void)uv_timer_start(&s->timer, on_stream_timer, s->delay_ms, 0);
            return;
        }
    }
    (void)http_resp_end(s->req);
    uv_close((uv_handle_t *)&s->timer, on_streamer_closed);
}

/* /stream?slow: 4 chunks 150 ms apart; /stream: BIG bytes as fast as allowed. */
static int h_stream(struct http_req *req, void *ctx)
{
    (void)ctx;
    struct streamer *s = XNEW(struct streamer);
    s->req = http_req_ref(req);
    bool slow = str_eq_c(http_req_query(req), "slow");
    s->total = slow ? 4 * 16384 : BIG;
    s->delay_ms = slow ? 150 : 0;
    (void)uv_timer_init(http_req_loop(req), &s->timer);
    s->timer.data = s;
    http_req_set_drain_cb(req, on_stream_drain, s);
    (void)http_resp_start(req, 200, "application/octet-stream");
    stream_more(s);
    return 0;
}

struct echo {
    uv_tcp_t tcp;
    char buf[4096];
};

static void on_echo_closed(uv_handle_t *h)
{
    xfree(h->data);
}

static void on_echo_written(uv_write_t *wr, int status)
{
    (void)status;
    xfree(wr);
}

static void echo_write(struct echo *e, const char *p, size_t n)
{
    if (n == 0)
        return;
    uv_write_t *wr = xmalloc(sizeof(*wr) + n);
    memcpy(wr + 1, p, n);
    uv_buf_t b = uv_buf_init((char *)(wr + 1), (unsigned)n);
    if (uv_write(wr, (uv_stream_t *)&e->tcp, &b, 1, on_echo_written) < 0)
        xfree(wr);
}

static void on_echo_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    struct echo *e = h->data;
    (void)s;
    *b = uv_buf_init(e->buf, sizeof(e->buf));
}

static void on_echo_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct echo *e = st->data;
    if (n < 0) {
        uv_close((uv_handle_t *)&e->tcp, on_echo_closed);
        return;
    }
    echo_write(e, b->base, (size_t)n);
}

static void on_upgraded(void *ctx, int status, uv_tcp_t *tcp, struct str pending)
{
    struct echo *e = ctx;
    if (status < 0) {
        xfree(e);
        return;
    }
    tcp->data = e;
    echo_write(e, "hello-from-upstream:", 20);
    echo_write(e, pending.p, pending.len);
    (void)uv_read_start((uv_stream_t *)tcp, on_echo_alloc, on_echo_read);
}

static int h_ws(struct http_req *req, void *ctx)
{
    (void)ctx;
    struct echo *e = XNEW(struct echo);
    (void)http_resp_header_add(req, "Sec-WebSocket-Accept", "test-accept");
    struct http_upgrade_opts o = {
        .protocol = "websocket", .tcp = &e->tcp, .fn = on_upgraded, .ctx = e};
    int r = http_req_upgrade(req, &o);
    if (r < 0)
        xfree(e);
    return r;
}

static void start_upstream(void)
{
    up_routes = http_router_new();
    assert_int_equal(
        http_router_add(up_routes, "POST", "/upload", HTTP_ROUTE_STREAM_BODY, h_upload, NULL), 0);
    assert_int_equal(http_router_add(up_routes, "GET", "/stream", 0, h_stream, NULL), 0);
    assert_int_equal(http_router_add(up_routes, "GET", "/ws", 0, h_ws, NULL), 0);
    assert_int_equal(http_router_add(up_routes, NULL, "/", HTTP_ROUTE_PREFIX, h_echo, NULL), 0);
    struct http_server_opts o = {.router = up_routes};
    assert_int_equal(http_server_start_thread(&o, &up), 0);
}

/* ---- Sandboxes ------------------------------------------------------------------------ */

static void make_sandbox(const char *name, bool ready, const char *ip)
{
    struct kube_err e;
    json_t *obj =
        json_pack("{s:s,s:s,s:{s:s},s:{s:{s:{s:[{s:s,s:s}]}}}}", "apiVersion",
                  "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name", name, "spec",
                  "podTemplate", "spec", "containers", "name", "main", "image", "example");
    json_t *created = NULL;
    IT_OK(kube_create(c, &API_RES_SANDBOXES, ns, obj, &created, &e), &e);
    json_decref(obj);
    json_t *status = json_pack("{s:[s],s:[{s:s,s:s,s:s,s:s,s:s}]}", "podIPs", ip, "conditions",
                               "type", "Ready", "status", ready ? "True" : "False", "reason",
                               ready ? "DependenciesReady" : "PodNotReady", "message", "test",
                               "lastTransitionTime", "2026-01-01T00:00:00Z");
    (void)json_object_set_new(created, "status", status);
    IT_OK(kube_update_status(c, &API_RES_SANDBOXES, ns, created, NULL, &e), &e);
    json_decref(created);
}

/* Sets name's status: Ready=status with reason, changed now, and podIPs [ip] unless ip is
 * NULL. */
static void set_status(const char *name, const char *status, const char *reason, const char *ip)
{
    struct kube_err e;
    json_t *cur = NULL;
    char now[40];
    clock_format_rfc3339_sec(clock_wall_now(), now, sizeof(now));
    IT_OK(kube_get(c, &API_RES_SANDBOXES, ns, name, &cur, &e), &e);
    json_t *st = json_pack("{s:[{s:s,s:s,s:s,s:s,s:s}]}", "conditions", "type", "Ready", "status",
                           status, "reason", reason, "message", "test", "lastTransitionTime", now);
    if (ip)
        json_object_set_new(st, "podIPs", json_pack("[s]", ip));
    json_object_set_new(cur, "status", st);
    IT_OK(kube_update_status(c, &API_RES_SANDBOXES, ns, cur, NULL, &e), &e);
    json_decref(cur);
}

static struct router *start_router_opts(bool auth, bool trust_loopback, size_t max_tunnels)
{
    struct router_opts o = {.client = c,
                            .host = "127.0.0.1",
                            .probe_host = "127.0.0.1",
                            .auth = auth,
                            .trust_loopback = trust_loopback,
                            .ns = ns,
                            .allow_loopback = true,
                            .header_timeout = 300 * USEC_PER_MSEC,
                            .shutdown_grace = 5 * USEC_PER_SEC,
                            .max_tunnels = max_tunnels,
                            .access_log = false};
    struct router *r;
    assert_int_equal(router_start(&o, &r), 0);
    assert_int_equal(router_wait_ready(r, WAIT), 0);
    return r;
}

static struct router *start_router(bool auth)
{
    return start_router_opts(auth, false, 0);
}

struct seen {
    struct router *r;
    const char *name;
};

/* The informer saw the sandbox with its status (a request answers 200). */
static bool routable(void *ctx)
{
    struct seen *s = ctx;
    char raw[256];
    struct test_http_resp resp;
    test_http_resp_init(&resp);
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/%s/%u/ HTTP/1.1\r\nHost: x\r\n\r\n", ns, s->name,
                   http_server_thread_port(up));
    bool ok = test_http_request(router_port(s->r), raw, T_READ, &resp) == 0 && resp.status == 200;
    test_http_resp_done(&resp);
    return ok;
}

static int group_setup(void **state)
{
    struct it_sandbox_ns_opts so = {.prefix = "rtr", .default_sa = true, .timeout = WAIT};
    struct kube_err e = {0};
    (void)state;
    log_set_level(LOG_WARN);
    if (it_client_new(NULL, &c, &e) < 0)
        return -1;
    if (it_sandbox_ns_setup(c, &so, ns, sizeof(ns), &e) < 0) {
        fprintf(stderr, "setup failed: %s\n", e.message);
        return -1;
    }
    start_upstream();
    make_sandbox("box", true, "127.0.0.1");
    make_sandbox("sleepy", false, "127.0.0.1");
    make_sandbox("meta", true, "169.254.169.254");
    rt = start_router(false);
    struct seen s = {rt, "box"};
    if (it_wait(routable, &s, WAIT) < 0) {
        fprintf(stderr, "the sandbox never became routable\n");
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    router_stop(rt);
    router_stop(rt_auth);
    http_server_stop_thread(up, USEC_PER_SEC);
    http_router_free(up_routes);
    (void)it_ns_delete(c, ns, WAIT);
    kube_client_free(c);
    return 0;
}

/* ---- Tests ---------------------------------------------------------------------------- */

static int get(struct router *r, const char *raw, struct test_http_resp *resp)
{
    test_http_resp_init(resp);
    return test_http_request(router_port(r), raw, T_READ, resp);
}

static void test_header_form(void **state)
{
    (void)state;
    char raw[512];
    struct test_http_resp resp;
    (void)snprintf(raw, sizeof(raw),
                   "GET /a/b%%2F..//c?x=1&y=%%20 HTTP/1.1\r\nHost: h\r\nX-Sandbox-ID: box\r\n"
                   "X-Sandbox-Namespace: %s\r\nX-Sandbox-Port: %u\r\nAuthorization: Bearer s\r\n"
                   "X-Forwarded-For: 6.6.6.6\r\n\r\n",
                   ns, http_server_thread_port(up));
    assert_int_equal(get(rt, raw, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_string_equal(buf_str(&resp.body),
                        "GET /a/b%2F..//c?x=1&y=%20 auth=no xsid=no xff=127.0.0.1");
    test_http_resp_done(&resp);
}

static void test_path_form(void **state)
{
    (void)state;
    char raw[512];
    struct test_http_resp resp;
    (void)snprintf(raw, sizeof(raw), "DELETE /s/%s/box/%u/v1/x?q=%%2F HTTP/1.1\r\nHost: h\r\n\r\n",
                   ns, http_server_thread_port(up));
    assert_int_equal(get(rt, raw, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_string_equal(buf_str(&resp.body), "DELETE /v1/x?q=%2F auth=no xsid=no xff=127.0.0.1");
    test_http_resp_done(&resp);
}

static void test_errors(void **state)
{
    (void)state;
    char raw[512];
    struct test_http_resp resp;
    assert_int_equal(get(rt, "GET /x HTTP/1.1\r\nHost: h\r\n\r\n", &resp), 0);
    assert_int_equal(resp.status, 400);
    assert_string_equal(buf_str(&resp.body), "{\"detail\": \"X-Sandbox-ID header is required.\"}");
    test_http_resp_done(&resp);
    assert_int_equal(get(rt, "GET /x HTTP/1.1\r\nHost: h\r\nX-Sandbox-ID: a.b\r\n\r\n", &resp), 0);
    assert_int_equal(resp.status, 400);
    assert_string_equal(buf_str(&resp.body), "{\"detail\": \"Invalid sandbox ID format.\"}");
    test_http_resp_done(&resp);
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/nobody/80/ HTTP/1.1\r\nHost: h\r\n\r\n", ns);
    assert_int_equal(get(rt, raw, &resp), 0);
    assert_int_equal(resp.status, 404);
    test_http_resp_done(&resp);
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/sleepy/80/ HTTP/1.1\r\nHost: h\r\n\r\n", ns);
    assert_int_equal(get(rt, raw, &resp), 0);
    assert_int_equal(resp.status, 503);
    assert_non_null(strstr(buf_str(&resp.body), "PodNotReady"));
    char *ra = test_http_header(&resp, "Retry-After");
    assert_non_null(ra); /* a passing state: retry shortly */
    assert_string_equal(ra, "1");
    xfree(ra);
    test_http_resp_done(&resp);
    /* A metadata pod IP is never dialled, even with the loopback flag. */
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/meta/80/ HTTP/1.1\r\nHost: h\r\n\r\n", ns);
    assert_int_equal(get(rt, raw, &resp), 0);
    assert_int_equal(resp.status, 502);
    test_http_resp_done(&resp);
    /* X-Sandbox-Pod-IP must be one of the sandbox's pod IPs. */
    (void)snprintf(raw, sizeof(raw),
                   "GET / HTTP/1.1\r\nHost: h\r\nX-Sandbox-ID: box\r\nX-Sandbox-Namespace: %s\r\n"
                   "X-Sandbox-Pod-IP: 10.9.9.9\r\n\r\n",
                   ns);
    assert_int_equal(get(rt, raw, &resp), 0);
    assert_int_equal(resp.status, 400);
    assert_string_equal(buf_str(&resp.body), "{\"detail\": \"Invalid target IP address.\"}");
    test_http_resp_done(&resp);
}

static void test_upload_and_stream(void **state)
{
    (void)state;
    struct test_http_conn conn;
    struct test_http_resp resp;
    char head[512];
    assert_int_equal(test_http_connect(router_port(rt), &conn), 0);
    (void)snprintf(head, sizeof(head),
                   "POST /s/%s/box/%u/upload HTTP/1.1\r\nHost: h\r\nContent-Length: %u\r\n\r\n", ns,
                   http_server_thread_port(up), BIG);
    assert_int_equal(test_http_send_str(&conn, head), 0);
    char *blob = xmalloc(BIG);
    memset(blob, 'a', BIG);
    assert_int_equal(test_http_send(&conn, blob, BIG), 0);
    test_http_resp_init(&resp);
    assert_int_equal(test_http_read(&conn, false, T_READ, &resp), 0);
    assert_int_equal(resp.status, 200);
    char want[64];
    (void)snprintf(want, sizeof(want), "got %u", BIG);
    assert_string_equal(buf_str(&resp.body), want);
    /* Chunked upload on the same (kept-alive) connection. */
    (void)snprintf(head, sizeof(head),
                   "POST /s/%s/box/%u/upload HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked"
                   "\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n",
                   ns, http_server_thread_port(up));
    assert_int_equal(test_http_send_str(&conn, head), 0);
    assert_int_equal(test_http_read(&conn, false, T_READ, &resp), 0);
    assert_string_equal(buf_str(&resp.body), "got 8");
    /* A big chunked download through the router. */
    (void)snprintf(head, sizeof(head), "GET /s/%s/box/%u/stream HTTP/1.1\r\nHost: h\r\n\r\n", ns,
                   http_server_thread_port(up));
    assert_int_equal(test_http_send_str(&conn, head), 0);
    assert_int_equal(test_http_read(&conn, false, T_READ, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_true(resp.chunked);
    assert_int_equal(resp.body.len, BIG);
    test_http_resp_done(&resp);
    test_http_close(&conn);
    xfree(blob);
}

static void test_keepalive_reuse(void **state)
{
    (void)state;
    char raw[256];
    struct test_http_resp resp;
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/box/%u/k HTTP/1.1\r\nHost: h\r\n\r\n", ns,
                   http_server_thread_port(up));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(get(rt, raw, &resp), 0);
        assert_int_equal(resp.status, 200);
        test_http_resp_done(&resp);
    }
    /* Five client connections, one pooled upstream connection. */
    assert_int_equal(http_server_connections(http_server_thread_server(up)), 1);
}

static void read_n(struct test_http_conn *conn, char *out, size_t n)
{
    size_t got = conn->in.len < n ? conn->in.len : n;
    if (got)
        memcpy(out, conn->in.data, got);
    buf_consume(&conn->in, got);
    struct timeval tv = {.tv_sec = 5};
    (void)setsockopt(conn->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (got < n) {
        ssize_t r = recv(conn->fd, out + got, n - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
    }
}

static void test_websocket_tunnel(void **state)
{
    (void)state;
    struct test_http_conn conn;
    struct test_http_resp resp;
    char head[512], got[64];
    assert_int_equal(test_http_connect(router_port(rt), &conn), 0);
    (void)snprintf(head, sizeof(head),
                   "GET /s/%s/box/%u/ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
                   "Upgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\nearly",
                   ns, http_server_thread_port(up));
    assert_int_equal(test_http_send_str(&conn, head), 0);
    test_http_resp_init(&resp);
    assert_int_equal(test_http_read(&conn, false, T_READ, &resp), 0);
    assert_int_equal(resp.status, 101);
    char *v = test_http_header(&resp, "Sec-WebSocket-Accept");
    assert_string_equal(v, "test-accept");
    xfree(v);
    read_n(&conn, got, 25);
    assert_memory_equal(got, "hello-from-upstream:early", 25);
    assert_int_equal(test_http_send_str(&conn, "\x81\x05 ping"), 0);
    read_n(&conn, got, 7);
    assert_memory_equal(got, "\x81\x05 ping", 7);
    test_http_resp_done(&resp);
    test_http_close(&conn);
}

/* Sends an upgrade request for path /s/<ns>/box/<port>/ws on a new connection to r. */
static void upgrade_start(struct router *r, uint16_t port, struct test_http_conn *conn)
{
    char head[512];
    assert_int_equal(test_http_connect(router_port(r), conn), 0);
    (void)snprintf(head, sizeof(head),
                   "GET /s/%s/box/%u/ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
                   "Upgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n",
                   ns, port);
    assert_int_equal(test_http_send_str(conn, head), 0);
}

/* The status of an upgrade request to the echoing upstream on a new connection, left open
 * in conn. */
static int upgrade_status(struct router *r, struct test_http_conn *conn)
{
    struct test_http_resp resp;
    upgrade_start(r, http_server_thread_port(up), conn);
    test_http_resp_init(&resp);
    int st = test_http_read(conn, false, T_READ, &resp) == 0 ? resp.status : -1;
    test_http_resp_done(&resp);
    return st;
}

/* A listener that accepts nothing: an upgrade sent to it waits for its answer. */
static int silent_listener(uint16_t *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 8), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* --max-tunnels counts the upgrades still waiting for their answer as well as the open
 * tunnels: with a bound of 2, one open tunnel and one upgrade in flight (to a listener
 * that never answers) leave no room for a third (503); once the waiting one fails, a new
 * upgrade passes. */
static struct router *tb_router; /* test_tunnel_bound's */
static int tb_silent = -1;

static void test_tunnel_bound(void **state)
{
    (void)state;
    struct router *r = tb_router = start_router_opts(false, false, 2);
    struct seen s = {r, "box"};
    struct test_http_conn open1, waiting, refused, later;
    struct test_http_resp resp;
    uint16_t silent_port;
    int silent = tb_silent = silent_listener(&silent_port), st = -1;
    assert_int_equal(it_wait(routable, &s, WAIT), 0);
    assert_int_equal(upgrade_status(r, &open1), 101);
    upgrade_start(r, silent_port, &waiting);
    /* the router connected to the silent listener: the upgrade is counted and waiting */
    struct pollfd pf = {.fd = silent, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 5000), 1);
    upgrade_start(r, http_server_thread_port(up), &refused);
    test_http_resp_init(&resp);
    assert_int_equal(test_http_read(&refused, false, T_READ, &resp), 0);
    assert_int_equal(resp.status, 503);
    assert_non_null(strstr(buf_str(&resp.body), "tunnels"));
    test_http_resp_done(&resp);
    test_http_close(&refused);
    /* the silent upstream goes (its unaccepted connection is reset): the waiting upgrade
     * fails, and its room comes back */
    (void)close(silent);
    tb_silent = -1;
    for (int i = 0; i < 100 && st != 101; i++) {
        st = upgrade_status(r, &later);
        test_http_close(&later);
        if (st != 101)
            clock_sleep(50 * USEC_PER_MSEC);
    }
    assert_int_equal(st, 101);
    test_http_close(&waiting);
    test_http_close(&open1);
}

/* test_tunnel_bound's router and listener, also when it failed midway (the router would
 * go on using the shared client the group's teardown frees). */
static int tunnel_bound_teardown(void **state)
{
    (void)state;
    if (tb_silent >= 0)
        (void)close(tb_silent);
    tb_silent = -1;
    router_stop(tb_router);
    tb_router = NULL;
    return 0;
}

/* True when the peer closed conn already (whatever it wrote first is dropped); false when
 * it is still open with nothing more to read. Does not wait. */
static bool closed_now(struct test_http_conn *conn)
{
    char b[4096];
    for (;;) {
        ssize_t n = recv(conn->fd, b, sizeof(b), MSG_DONTWAIT);
        if (n > 0)
            continue;
        if (n == 0)
            return true;
        if (errno == EINTR)
            continue;
        return errno != EAGAIN && errno != EWOULDBLOCK; /* a reset is closed too */
    }
}

/* The header timeout (300 ms here, 10 s by default) ends a connection whose request head
 * never completes. Checked by order, not by a clock: a /stream?slow request sent after the
 * slow client connected passes through the same router loop in 4 chunks 150 ms apart, so
 * by the time its last chunk arrived the 300 ms timer had fired (libuv runs due timers
 * before each poll) and the connection is closed; the default 10 s would still hold it. */
static void test_slow_client_cut_off(void **state)
{
    (void)state;
    struct test_http_conn conn;
    struct test_http_resp resp;
    char raw[256];
    assert_int_equal(test_http_connect(router_port(rt), &conn), 0);
    assert_int_equal(test_http_send_str(&conn, "GET / HTTP/1.1\r\nHost: h\r\nX-Sl"), 0);
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/box/%u/stream?slow HTTP/1.1\r\nHost: h\r\n\r\n", ns,
                   http_server_thread_port(up));
    assert_int_equal(get(rt, raw, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_int_equal(resp.body.len, 4 * 16384);
    test_http_resp_done(&resp);
    assert_true(closed_now(&conn));
    test_http_close(&conn);
}

static void test_auth(void **state)
{
    (void)state;
    struct kube_err e;
    rt_auth = start_router(true);
    /* alice may get sandboxes in ns; bob has no role. */
    json_t *role = json_pack("{s:s,s:s,s:{s:s},s:[{s:[s],s:[s],s:[s]}]}", "apiVersion",
                             "rbac.authorization.k8s.io/v1", "kind", "Role", "metadata", "name",
                             "sandbox-get", "rules", "apiGroups", "agents.x-k8s.io", "resources",
                             "sandboxes", "verbs", "get");
    struct kube_req rq;
    kube_req_init(&rq, "POST", NULL);
    char path[256];
    (void)snprintf(path, sizeof(path), "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/roles",
                   ns);
    rq.raw_path = path;
    rq.body = role;
    IT_OK(kube_request(c, &rq, NULL, &e), &e);
    json_decref(role);
    json_t *rb = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:s},s:[{s:s,s:s,s:s}]}", "apiVersion",
                           "rbac.authorization.k8s.io/v1", "kind", "RoleBinding", "metadata",
                           "name", "alice-get", "roleRef", "apiGroup", "rbac.authorization.k8s.io",
                           "kind", "Role", "name", "sandbox-get", "subjects", "apiGroup",
                           "rbac.authorization.k8s.io", "kind", "User", "name", "alice");
    (void)snprintf(path, sizeof(path),
                   "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings", ns);
    rq.raw_path = path;
    rq.body = rb;
    IT_OK(kube_request(c, &rq, NULL, &e), &e);
    json_decref(rb);

    char raw[1024], alice[512], bob[512];
    struct test_http_resp resp;
    assert_int_equal(it_user_token("alice", alice, sizeof(alice)), 0);
    assert_int_equal(it_user_token("bob", bob, sizeof(bob)), 0);
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/box/%u/ HTTP/1.1\r\nHost: h\r\n\r\n", ns,
                   http_server_thread_port(up));
    assert_int_equal(get(rt_auth, raw, &resp), 0);
    assert_int_equal(resp.status, 401);
    assert_string_equal(buf_str(&resp.body),
                        "{\"detail\": \"Missing or invalid Authorization header.\"}");
    test_http_resp_done(&resp);
    /* Another scheme is a missing bearer token, not an invalid one. */
    (void)snprintf(raw, sizeof(raw),
                   "GET /s/%s/box/%u/ HTTP/1.1\r\nHost: h\r\nAuthorization: Basic eDp5\r\n\r\n", ns,
                   http_server_thread_port(up));
    assert_int_equal(get(rt_auth, raw, &resp), 0);
    assert_int_equal(resp.status, 401);
    assert_string_equal(buf_str(&resp.body),
                        "{\"detail\": \"Missing or invalid Authorization header.\"}");
    test_http_resp_done(&resp);
    (void)snprintf(raw, sizeof(raw),
                   "GET /s/%s/box/%u/ HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer nope\r\n\r\n",
                   ns, http_server_thread_port(up));
    assert_int_equal(get(rt_auth, raw, &resp), 0);
    assert_int_equal(resp.status, 401);
    assert_string_equal(buf_str(&resp.body), "{\"detail\": \"Invalid token.\"}");
    test_http_resp_done(&resp);
    (void)snprintf(raw, sizeof(raw),
                   "GET /s/%s/box/%u/ HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer %s\r\n\r\n", ns,
                   http_server_thread_port(up), bob);
    assert_int_equal(get(rt_auth, raw, &resp), 0);
    assert_int_equal(resp.status, 403);
    test_http_resp_done(&resp);
    (void)snprintf(raw, sizeof(raw),
                   "GET /s/%s/box/%u/ HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer %s\r\n\r\n", ns,
                   http_server_thread_port(up), alice);
    assert_int_equal(get(rt_auth, raw, &resp), 0);
    assert_int_equal(resp.status, 200);
    /* The token is never passed on to the sandbox. */
    assert_non_null(strstr(buf_str(&resp.body), "auth=no"));
    test_http_resp_done(&resp);
}

/* --trust-loopback: a loopback peer without an Authorization header (a port-forward into
 * the router pod) is let through; a header, even a bad one, is still reviewed. A request a
 * browser's page of another site could send (a cross-site Origin, a rebound Host) is not
 * trusted. */
static void test_auth_trust_loopback(void **state)
{
    (void)state;
    struct router *r = start_router_opts(true, true, 0);
    char raw[512];
    struct test_http_resp resp;
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/box/%u/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", ns,
                   http_server_thread_port(up));
    assert_int_equal(get(r, raw, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_non_null(strstr(buf_str(&resp.body), "auth=no"));
    test_http_resp_done(&resp);
    (void)snprintf(raw, sizeof(raw),
                   "POST /s/%s/box/%u/ HTTP/1.1\r\nHost: localhost:8080\r\n"
                   "Origin: https://evil.example\r\nContent-Length: 2\r\n\r\n{}",
                   ns, http_server_thread_port(up));
    assert_int_equal(get(r, raw, &resp), 0);
    assert_int_equal(resp.status, 403);
    test_http_resp_done(&resp);
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/box/%u/ HTTP/1.1\r\nHost: evil.example\r\n\r\n", ns,
                   http_server_thread_port(up));
    assert_int_equal(get(r, raw, &resp), 0);
    assert_int_equal(resp.status, 403);
    test_http_resp_done(&resp);
    (void)snprintf(raw, sizeof(raw),
                   "GET /s/%s/box/%u/ HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer nope\r\n\r\n",
                   ns, http_server_thread_port(up));
    assert_int_equal(get(r, raw, &resp), 0);
    assert_int_equal(resp.status, 401);
    test_http_resp_done(&resp);
    (void)snprintf(raw, sizeof(raw),
                   "GET /s/%s/box/%u/ HTTP/1.1\r\nHost: h\r\nAuthorization: Basic eDp5\r\n\r\n", ns,
                   http_server_thread_port(up));
    assert_int_equal(get(r, raw, &resp), 0);
    assert_int_equal(resp.status, 401);
    test_http_resp_done(&resp);
    router_stop(r);
}

/* ---- 1,000 concurrent keep-alive connections ------------------------------------------ */

#define MANY_CONNS  1000
#define MANY_ROUNDS 5

static long proc_status_kib(const char *key)
{
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return v;
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own descriptor */
}

/* Client, router-side client, router-side upstream and upstream-side sockets all live in
 * this process: 4 descriptors per connection. Returns false (and says why) when the hard
 * limit does not allow that. */
static bool enough_fds(void)
{
    struct rlimit rl;
    rlim_t need = 4 * MANY_CONNS + 256;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return false;
    if (rl.rlim_cur >= need)
        return true;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        fprintf(stderr, "skipped: RLIMIT_NOFILE hard limit %llu < %llu needed for %d connections\n",
                (unsigned long long)rl.rlim_max, (unsigned long long)need, MANY_CONNS);
        return false;
    }
    rl.rlim_cur = need;
    return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

/* One round: a request on every connection first (all in flight at once), then every
 * answer, each checked against its own path. Round 0 opens each connection just before
 * its request: the router's header timeout (300 ms here) runs from the accept, and
 * opening 1,000 connections first can take longer than that (ASan, a loaded machine),
 * which closed the first ones before their request went out (ECONNRESET). */
static void many_round(struct test_http_conn *conns, int round)
{
    char raw[256], want[128];
    struct test_http_resp resp;
    test_http_resp_init(&resp);
    for (int i = 0; i < MANY_CONNS; i++) {
        if (round == 0)
            assert_int_equal(test_http_connect(router_port(rt), &conns[i]), 0);
        (void)snprintf(raw, sizeof(raw), "GET /s/%s/box/%u/c/%d/%d HTTP/1.1\r\nHost: h\r\n\r\n", ns,
                       http_server_thread_port(up), i, round);
        assert_int_equal(test_http_send_str(&conns[i], raw), 0);
    }
    if (round == 0) {
        /* The router answers others while 1,000 exchanges are in flight. */
        struct test_http_resp h;
        assert_int_equal(get(rt, "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n", &h), 0);
        assert_int_equal(h.status, 200);
        test_http_resp_done(&h);
    }
    for (int i = 0; i < MANY_CONNS; i++) {
        assert_int_equal(test_http_read(&conns[i], false, T_READ, &resp), 0);
        assert_int_equal(resp.status, 200);
        assert_false(resp.conn_close);
        (void)snprintf(want, sizeof(want), "GET /c/%d/%d auth=no xsid=no xff=127.0.0.1", i, round);
        assert_string_equal(buf_str(&resp.body), want);
    }
    test_http_resp_done(&resp);
}

/* The router's /metrics page into page (initialised here). */
static void get_metrics(struct buf *page)
{
    struct test_http_resp resp;
    test_http_resp_init(&resp);
    assert_int_equal(test_http_request(router_probe_port(rt),
                                       "GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n", T_READ, &resp),
                     0);
    assert_int_equal(resp.status, 200);
    buf_init(page, 16u << 20);
    assert_int_equal(buf_append(page, resp.body.data, resp.body.len), 0);
    test_http_resp_done(&resp);
}

/* The sum of the samples of metric name (exactly) whose line holds every string of want
 * (NULL-terminated); 0 when there is none. */
static double metric_sum(const struct buf *page, const char *name, const char *const *want)
{
    double sum = 0;
    size_t n = strlen(name);
    const char *p = buf_str(page);
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[1024];
        if (len < sizeof(line) && strncmp(p, name, n) == 0 && (p[n] == '{' || p[n] == ' ')) {
            memcpy(line, p, len);
            line[len] = '\0';
            bool match = true;
            for (int i = 0; want && want[i]; i++)
                match = match && strstr(line, want[i]);
            const char *sp = strrchr(line, ' ');
            if (match && sp)
                sum += strtod(sp + 1, NULL);
        }
        p = eol ? eol + 1 : NULL;
    }
    return sum;
}

/* One metric of the router's page (summed over the lines holding want, NULL: all). */
static double metric_now(const char *name, const char *const *want)
{
    struct buf page;
    get_metrics(&page);
    double v = metric_sum(&page, name, want);
    buf_done(&page);
    return v;
}

struct held {
    char raw[256];
    struct test_http_resp resp;
    int rc;
    atomic_bool done;
};

static void *send_held(void *arg)
{
    struct held *h = arg;
    h->rc = get(rt, h->raw, &h->resp);
    atomic_store(&h->done, true);
    return NULL;
}

/* Sends h's request on a thread until the router holds it (returns with the thread
 * running, *ret_t) rather than answering it: a request that meets the cache before it
 * shows the starting status is answered for what the cache holds (404 before the
 * Sandbox reached it, 503 for its old status), and sent again. */
static void send_until_held(struct held *h, pthread_t *ret_t)
{
    usec_t end = clock_now() + WAIT;
    for (;;) {
        atomic_store(&h->done, false);
        assert_int_equal(pthread_create(ret_t, NULL, send_held, h), 0);
        while (!atomic_load(&h->done) && metric_now("sandbox_router_held_requests", NULL) < 1)
            clock_sleep(10 * USEC_PER_MSEC);
        if (!atomic_load(&h->done))
            return; /* held */
        pthread_join(*ret_t, NULL);
        assert_int_equal(h->rc, 0);
        if (h->resp.status != 404) { /* 404: the Sandbox is not in the cache yet */
            assert_int_equal(h->resp.status, 503);
            assert_non_null(strstr(buf_str(&h->resp.body), "PodNotReady"));
        }
        test_http_resp_done(&h->resp);
        assert_true(clock_now() < end);
        clock_sleep(20 * USEC_PER_MSEC);
    }
}

/* A request to a Sandbox that is starting (Ready=False, DependenciesNotReady, no pod IP
 * yet) is held, not answered 503, and forwarded once the router's cache shows it Ready:
 * the client that saw Ready before the router did, or that asked right after the create.
 * A Sandbox that is not starting (PodNotReady here, as a failed one) is answered at once
 * (test_errors). */
static void test_start_hold(void **state)
{
    (void)state;
    const char *const fwd[] = {"outcome=\"forwarded\"", NULL};
    struct held h = {0};
    pthread_t t;
    make_sandbox("starter", false, "127.0.0.1");
    set_status("starter", "False", "DependenciesNotReady", NULL);
    double forwarded = metric_now("sandbox_router_held_requests_total", fwd);
    (void)snprintf(h.raw, sizeof(h.raw), "GET /s/%s/starter/%u/started HTTP/1.1\r\nHost: h\r\n\r\n",
                   ns, http_server_thread_port(up));
    send_until_held(&h, &t);
    set_status("starter", "True", "DependenciesReady", "127.0.0.1");
    pthread_join(t, NULL);
    assert_int_equal(h.rc, 0);
    assert_int_equal(h.resp.status, 200);
    assert_true(strncmp(buf_str(&h.resp.body), "GET /started", 12) == 0);
    test_http_resp_done(&h.resp);
    assert_true(metric_now("sandbox_router_held_requests_total", fwd) == forwarded + 1);
    assert_true(metric_now("sandbox_router_held_requests", NULL) == 0);
}

/* What the router counted for ns: GET 200 requests, their duration samples, upstream
 * failures; and proxied requests in progress. */
struct rt_counts {
    double requests, durations, upstream_errors, inflight;
};

static void read_counts(struct rt_counts *ret)
{
    char label[160];
    struct buf page;
    (void)snprintf(label, sizeof(label), "sandbox_namespace=\"%s\"", ns);
    const char *const get200[] = {"method=\"GET\"", "code=\"200\"", label, NULL};
    const char *const in_ns[] = {label, NULL};
    get_metrics(&page);
    ret->requests = metric_sum(&page, "sandbox_router_requests_total", get200);
    ret->durations = metric_sum(&page, "sandbox_router_request_duration_seconds_count", get200);
    ret->upstream_errors = metric_sum(&page, "sandbox_router_upstream_errors_total", in_ns);
    ret->inflight = metric_sum(&page, "sandbox_router_inflight_requests", NULL);
    buf_done(&page);
}

static bool router_idle(void *ctx)
{
    struct rt_counts *counts = ctx;
    read_counts(counts);
    return counts->inflight == 0;
}

/* The upstream holds no more connections than the router's idle pool keeps for one
 * ip:port (the rest it closed as their requests ended), beside *ctx held before the burst
 * (rt's pool and the other routers' connections: rt_auth is still running). */
static bool upstream_pool_bounded(void *ctx)
{
    size_t others = *(const size_t *)ctx;
    return http_server_connections(http_server_thread_server(up)) <=
           LIMIT_ROUTER_POOL_PER_HOST + others;
}

/* 1,000 keep-alive client connections with a request each in flight at once, five times
 * over: every request gets its own answer (status, body, the connection kept), all 1,000
 * connections are open in the router at once, the router's limits hold (its idle pool to
 * the one upstream shrinks to LIMIT_ROUTER_POOL_PER_HOST once the burst ended; nothing is
 * left in flight), and its metrics count each request exactly once, none as an upstream
 * failure. (Throughput is bench/router/run.sh's figure, not this test's.) */
static void test_thousand_connections(void **state)
{
    (void)state;
    struct rt_counts before, after;
    if (!enough_fds())
        skip();
    read_counts(&before);
    size_t up0 = http_server_connections(http_server_thread_server(up));
    long rss0 = proc_status_kib("VmRSS");
    int fds0 = open_fds();
    struct test_http_conn *conns = xcalloc(MANY_CONNS, sizeof(*conns));
    for (int r = 0; r < MANY_ROUNDS; r++)
        many_round(conns, r);
    /* Every client connection is still open, in the router too: it kept them all alive. */
    size_t rtconns = http_server_connections(router_http_server(rt));
    int fds1 = open_fds();
    assert_true(rtconns >= MANY_CONNS);
    assert_true(fds1 >= fds0 + 2 * MANY_CONNS);
    /* Up to 1,000 upstream connections were open at once; the idle pool keeps at most
     * LIMIT_ROUTER_POOL_PER_HOST of them (without that cap all 1,000 would stay until the
     * pool's 30 s idle timeout). The wait is for the upstream's loop to see the closes. */
    int pool_r = it_wait(upstream_pool_bounded, &up0, 20 * USEC_PER_SEC);
    fprintf(stderr,
            "  %d connections x %d requests; process (client + router + upstream) RSS %ld -> "
            "%ld KiB (peak %ld), fds %d -> %d, router connections %zu, upstream connections "
            "%zu -> %zu\n",
            MANY_CONNS, MANY_ROUNDS, rss0, proc_status_kib("VmRSS"), proc_status_kib("VmHWM"), fds0,
            fds1, rtconns, up0, http_server_connections(http_server_thread_server(up)));
    assert_int_equal(pool_r, 0);
    for (int i = 0; i < MANY_CONNS; i++)
        test_http_close(&conns[i]);
    xfree(conns);
    /* Still serving afterwards. */
    struct test_http_resp resp;
    char raw[256];
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/box/%u/after HTTP/1.1\r\nHost: h\r\n\r\n", ns,
                   http_server_thread_port(up));
    assert_int_equal(get(rt, raw, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_string_equal(buf_str(&resp.body), "GET /after auth=no xsid=no xff=127.0.0.1");
    test_http_resp_done(&resp);
    /* Each request is counted as it ends, with the in-flight gauge: once that is 0 the
     * counters are final. */
    assert_int_equal(it_wait(router_idle, &after, 20 * USEC_PER_SEC), 0);
    fprintf(stderr, "  requests_total{GET,200} %.0f -> %.0f, duration count %.0f -> %.0f\n",
            before.requests, after.requests, before.durations, after.durations);
    assert_true(after.requests - before.requests == MANY_CONNS * MANY_ROUNDS + 1);
    assert_true(after.durations - before.durations == MANY_CONNS * MANY_ROUNDS + 1);
    assert_true(after.upstream_errors == before.upstream_errors);
}

/* The annotation agents.x-k8s.io/last-activity of name, or "" (into out). */
static void last_activity(const char *name, char *out, size_t size)
{
    struct kube_err e;
    json_t *sb = NULL;
    IT_OK(kube_get(c, &API_RES_SANDBOXES, ns, name, &sb, &e), &e);
    const char *v = kube_obj_annotation(sb, SB_ANN_LAST_ACTIVITY);
    (void)snprintf(out, size, "%s", v ? v : "");
    json_decref(sb);
}

static bool activity_written(void *ctx)
{
    char v[64];
    last_activity(ctx, v, sizeof(v));
    return v[0] != '\0';
}

static void request_ok(struct router *r, const char *name)
{
    struct test_http_resp resp;
    char raw[256];
    (void)snprintf(raw, sizeof(raw), "GET /s/%s/%s/%u/x HTTP/1.1\r\nHost: h\r\n\r\n", ns, name,
                   http_server_thread_port(up));
    assert_int_equal(get(r, raw, &resp), 0);
    assert_int_equal(resp.status, 200);
    test_http_resp_done(&resp);
}

/* A stopping router writes the activity it saw since its last annotation write: with a
 * 600 s idle timeout the writes are 60 s apart, and before, the stop lost what came after
 * the last one (a Sandbox in use was suspended up to a minute early). */
static void test_stop_writes_last_activity(void **state)
{
    (void)state;
    struct kube_err e;
    json_t *obj = json_pack("{s:s,s:s,s:{s:s},s:{s:{s:i},s:{s:{s:[{s:s,s:s}]}}}}", "apiVersion",
                            "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name",
                            "active", "spec", "idlePolicy", "timeoutSeconds", 600, "podTemplate",
                            "spec", "containers", "name", "main", "image", "example");
    IT_OK(kube_create(c, &API_RES_SANDBOXES, ns, obj, NULL, &e), &e);
    json_decref(obj);
    set_status("active", "True", "DependenciesReady", "127.0.0.1");
    struct router *r = start_router(false);
    struct seen s = {r, "active"};
    assert_int_equal(it_wait(routable, &s, WAIT), 0);
    assert_int_equal(it_wait(activity_written, "active", WAIT), 0); /* the first write */
    char first[64], last[64];
    last_activity("active", first, sizeof(first));
    clock_sleep(1100 * USEC_PER_MSEC); /* the annotation has a second's resolution */
    request_ok(r, "active");
    clock_sleep(1500 * USEC_PER_MSEC); /* a flush tick: within the interval, no write */
    last_activity("active", last, sizeof(last));
    assert_string_equal(last, first);
    router_stop(r);
    last_activity("active", last, sizeof(last));
    if (strcmp(last, first) <= 0) /* RFC 3339 UTC sorts by time */
        fail_msg("last-activity %s after the stop, not after %s", last, first);
}

static void test_graceful_shutdown(void **state)
{
    (void)state;
    struct test_http_conn conn;
    struct test_http_resp resp;
    char head[256];
    assert_int_equal(test_http_connect(router_port(rt), &conn), 0);
    (void)snprintf(head, sizeof(head), "GET /s/%s/box/%u/stream?slow HTTP/1.1\r\nHost: h\r\n\r\n",
                   ns, http_server_thread_port(up));
    assert_int_equal(test_http_send_str(&conn, head), 0);
    char first[1];
    read_n(&conn, first, 1); /* the response started: the stream is in flight */
    router_request_stop(rt);
    test_http_resp_init(&resp);
    /* The rest of the stream still arrives; then the connection closes. */
    struct buf rest;
    buf_init(&rest, 1 << 20);
    char b[8192];
    ssize_t n;
    while ((n = recv(conn.fd, b, sizeof(b), 0)) > 0)
        assert_int_equal(buf_append(&rest, b, (size_t)n), 0);
    assert_non_null(strstr(buf_str(&rest), "\r\n0\r\n\r\n"));
    buf_done(&rest);
    test_http_resp_done(&resp);
    test_http_close(&conn);
    router_join(rt);
    rt = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_form),
        cmocka_unit_test(test_path_form),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_start_hold),
        cmocka_unit_test(test_upload_and_stream),
        cmocka_unit_test(test_keepalive_reuse),
        cmocka_unit_test(test_websocket_tunnel),
        cmocka_unit_test_teardown(test_tunnel_bound, tunnel_bound_teardown),
        cmocka_unit_test(test_slow_client_cut_off),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_auth_trust_loopback),
        cmocka_unit_test(test_thousand_connections),
        cmocka_unit_test(test_stop_writes_last_activity),
        cmocka_unit_test(test_graceful_shutdown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
