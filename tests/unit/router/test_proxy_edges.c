/* SPDX-License-Identifier: Apache-2.0 */
/* The proxy's edges on a real loop, against a scripted upstream: an upgrade whose 101
 * the client never takes does not hold its tunnel's room, a slow but steady download is
 * not idle, a retry connects anew (and after a sent attempt never says "Could not
 * connect"), a connect timeout says it timed out, and a 502 never carries the sandbox's
 * own headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "http/server.h"
#include "router/proxy.h"
#include "support/http_client.h"
#include "support/router/proxy_env.h"

#define T_IO (10 * USEC_PER_SEC)

/* ---- The upstream: answers by the request's path (see up_request) ------------------ */

struct fx {
    struct proxy_env env;
    size_t big_len;               /* body of /big */
    struct proxy_env_up *pair[2]; /* /pair requests waiting for their partner */
    bool close_listener;          /* after answering /ok: the next dial is refused */
    atomic_int wsreqs;            /* read by the test thread */
};

static void up_big(struct proxy_env_up *u)
{
    struct fx *f = u->env->data;
    struct buf b;
    buf_init(&b, f->big_len + 128);
    (void)buf_printf(&b, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", f->big_len);
    char block[26 * 256]; /* whole alphabets: the pattern runs on across blocks */
    for (size_t i = 0; i < sizeof(block); i++)
        block[i] = (char)('a' + i % 26);
    for (size_t left = f->big_len; left > 0;) {
        size_t n = left < sizeof(block) ? left : sizeof(block);
        (void)buf_append(&b, block, n);
        left -= n;
    }
    proxy_env_send(u, b.data, b.len);
    buf_done(&b);
}

/* A head past the router's LIMIT_HTTP_RESP_HEADERS (not past its upstream head limit),
 * after headers a 502 must not carry. */
static void up_huge_headers(struct proxy_env_up *u, const char *status_line)
{
    struct buf b;
    buf_init(&b, 64 * 1024);
    (void)buf_puts(&b, status_line);
    (void)buf_puts(&b, "Set-Cookie: session=sandbox-secret\r\nContent-Type: text/html\r\n"
                       "Cache-Control: public, max-age=86400\r\n");
    for (int i = 0; i < 24; i++) {
        (void)buf_printf(&b, "X-Pad-%d: ", i);
        for (int k = 0; k < 1000; k++)
            (void)buf_puts(&b, "p");
        (void)buf_puts(&b, "\r\n");
    }
    (void)buf_puts(&b, "Content-Length: 2\r\n\r\nok");
    proxy_env_send(u, b.data, b.len);
    buf_done(&b);
}

static const char ok_answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

static void up_request(struct proxy_env_up *u, const char *head, size_t len)
{
    struct fx *f = u->env->data;
    (void)len;
    if (strncmp(head, "GET /big ", 9) == 0) {
        up_big(u);
    } else if (strncmp(head, "GET /ws ", 8) == 0) {
        atomic_fetch_add(&f->wsreqs, 1);
        proxy_env_send_str(u, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                              "Upgrade: websocket\r\n\r\n");
    } else if (strncmp(head, "GET /pair ", 10) == 0) {
        /* answered once two wait: two upstream connections, both pooled after */
        f->pair[f->pair[0] ? 1 : 0] = u;
        if (f->pair[0] && f->pair[1]) {
            proxy_env_send_str(f->pair[0], ok_answer);
            proxy_env_send_str(f->pair[1], ok_answer);
            f->pair[0] = f->pair[1] = NULL;
        }
    } else if (strncmp(head, "GET /stale ", 11) == 0) {
        if (u->nth > 1) /* a reused connection the upstream had given up on */
            proxy_env_drop(u);
        else
            proxy_env_send_str(u, ok_answer);
    } else if (strncmp(head, "GET /hugeh ", 11) == 0) {
        up_huge_headers(u, "HTTP/1.1 200 OK\r\n");
    } else if (strncmp(head, "GET /hugews ", 12) == 0) {
        up_huge_headers(u, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                           "Upgrade: websocket\r\n");
    } else {
        proxy_env_send_str(u, ok_answer);
        if (f->close_listener)
            proxy_env_close_listener(&f->env);
    }
}

static void up_drop(struct proxy_env_up *u)
{
    struct fx *f = u->env->data;
    for (int i = 0; i < 2; i++)
        if (f->pair[i] == u)
            f->pair[i] = NULL;
}

/* ---- Fixture -------------------------------------------------------------------------- */

struct fx_opts {
    struct proxy_opts proxy; /* store and allow_loopback are set by proxy_env_start */
    size_t write_queue;
    size_t big_len;
    bool close_listener;
};

static struct fx *fx_start(const struct fx_opts *o)
{
    struct fx *f = XNEW(struct fx);
    f->big_len = o->big_len;
    f->close_listener = o->close_listener;
    struct proxy_env_opts eo = {.proxy = o->proxy,
                                .write_queue = o->write_queue,
                                .request = up_request,
                                .drop = up_drop,
                                .data = f};
    proxy_env_start(&f->env, &eo);
    return f;
}

static void fx_stop(struct fx *f)
{
    proxy_env_stop(&f->env);
    xfree(f);
}

/* ---- Client helpers -------------------------------------------------------------------- */

/* Connects with a small receive buffer (set before the connect, so the window stays
 * small): a client that does not read leaves what it is sent queued in the router. */
static void connect_small(uint16_t port, int rcvbuf, struct test_http_conn *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    c->fd = fd;
    buf_init(&c->in, 64u * 1024 * 1024);
}

static void send_req(struct test_http_conn *c, uint16_t up_port, const char *path,
                     const char *extra)
{
    char raw[512];
    (void)snprintf(raw, sizeof(raw), "GET /s/ns/box/%u%s HTTP/1.1\r\nHost: h\r\n%s\r\n",
                   (unsigned)up_port, path, extra ? extra : "");
    assert_int_equal(test_http_send_str(c, raw), 0);
}

static const char ws_headers[] = "Connection: Upgrade\r\nUpgrade: websocket\r\n";

/* One request on a new connection: its answer's status, the answer in *r. */
static int request(struct fx *f, uint16_t up_port, const char *path, const char *extra,
                   struct test_http_resp *r)
{
    struct test_http_conn c;
    assert_int_equal(test_http_connect(f->env.port, &c), 0);
    send_req(&c, up_port, path, extra);
    int rc = test_http_read(&c, false, T_IO, r);
    test_http_close(&c);
    return rc < 0 ? rc : r->status;
}

static void sleep_ms(unsigned ms)
{
    (void)usleep(ms * 1000u);
}

/* ---- Tests ----------------------------------------------------------------------------- */

/* A GET whose answer the client never reads, then an upgrade pipelined behind it: the
 * 101 waits behind the unread answer and the hand-over never happens. The tunnel being
 * set up must not hold its --max-tunnels room (and its upstream) forever: the tunnel's
 * idle timeout runs from the 101, not from the hand-over. */
static void test_unwritten_101_frees_its_tunnel(void **state)
{
    (void)state;
    struct fx_opts o = {.proxy = {.tunnel_idle = USEC_PER_SEC, .max_tunnels = 1},
                        .write_queue = 64u * 1024 * 1024,
                        .big_len = 16u * 1024 * 1024}; /* past any socket buffers */
    struct fx *f = fx_start(&o);
    struct test_http_conn a;
    connect_small(f->env.port, 4096, &a);
    send_req(&a, f->env.up_port, "/big", NULL);
    send_req(&a, f->env.up_port, "/ws", ws_headers);
    usec_t end = clock_now() + T_IO;
    while (atomic_load(&f->wsreqs) == 0 && clock_now() < end)
        sleep_ms(20);
    assert_int_equal(atomic_load(&f->wsreqs), 1); /* the upgrade is in: it holds the room */
    int status = 0;
    end = clock_now() + T_IO;
    while (clock_now() < end) {
        struct test_http_resp r;
        test_http_resp_init(&r);
        status = request(f, f->env.up_port, "/ws", ws_headers, &r);
        test_http_resp_done(&r);
        if (status != 503)
            break;
        sleep_ms(100);
    }
    assert_int_equal(status, 101); /* before: 503 until the client read or went */
    test_http_close(&a);
    fx_stop(f);
}

/* An Upgrade header is an upgrade only with Connection: upgrade on HTTP/1.1: without
 * either it is not passed on, takes no tunnel room, and a 101 the sandbox sends anyway is
 * refused (502), never relayed to a client that did not ask for it. */
static void test_upgrade_header_alone_is_no_upgrade(void **state)
{
    (void)state;
    struct fx_opts o = {.proxy = {.max_tunnels = 4}};
    struct fx *f = fx_start(&o);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(request(f, f->env.up_port, "/ws", "Upgrade: websocket\r\n", &r), 502);
    test_http_resp_done(&r);
    struct test_http_conn c;
    char raw[256];
    assert_int_equal(test_http_connect(f->env.port, &c), 0);
    (void)snprintf(raw, sizeof(raw), "GET /s/ns/box/%u/ws HTTP/1.0\r\nHost: h\r\n%s\r\n",
                   (unsigned)f->env.up_port, ws_headers);
    assert_int_equal(test_http_send_str(&c, raw), 0);
    test_http_resp_init(&r);
    assert_int_equal(test_http_read(&c, false, T_IO, &r), 0);
    assert_int_equal(r.status, 502);
    test_http_resp_done(&r);
    test_http_close(&c);
    test_http_resp_init(&r);
    assert_int_equal(request(f, f->env.up_port, "/ws", ws_headers, &r), 101); /* the real thing */
    test_http_resp_done(&r);
    fx_stop(f);
}

/* Reads c's answer of body_len bytes to its end (10 s without a byte fails): 0, or -1. */
static int read_whole(struct test_http_conn *c, size_t body_len)
{
    char tmp[65536], head[4096];
    size_t got = 0, want = 0;
    struct timeval tv = {.tv_sec = 10};
    (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (want == 0 || got < want) {
        ssize_t n = recv(c->fd, tmp, sizeof(tmp), 0);
        if (n <= 0)
            return -1;
        if (got < sizeof(head))
            memcpy(head + got, tmp,
                   (size_t)n < sizeof(head) - got ? (size_t)n : sizeof(head) - got);
        got += (size_t)n;
        const char *e =
            want ? NULL : memmem(head, got < sizeof(head) ? got : sizeof(head), "\r\n\r\n", 4);
        if (e)
            want = (size_t)(e - head) + 4 + body_len;
    }
    test_http_close(c);
    return got == want ? 0 : -1;
}

static bool queued_over(struct fx *f, size_t n)
{
    return http_server_queued(f->env.server) > n;
}

/* Clients that do not read: the bytes queued to all of them stop at the proxy's budget
 * (each client's own queue, 4 MiB here, would hold 8 MiB for two), every download paused
 * reading its sandbox. Then one client reads while the other still does not: the reader
 * goes on to the end (a client that holds its share does not stop the others), then the
 * second. */
static void test_queued_bytes_bounded_for_all_clients(void **state)
{
    (void)state;
    const size_t total = 8u * 1024 * 1024, budget = 512u * 1024;
    struct fx_opts o = {
        .proxy = {.queued_budget = budget}, .write_queue = 4u * 1024 * 1024, .big_len = total};
    struct fx *f = fx_start(&o);
    struct test_http_conn c[2];
    for (int i = 0; i < 2; i++) {
        connect_small(f->env.port, 4096, &c[i]);
        send_req(&c[i], f->env.up_port, "/big", NULL);
    }
    usec_t end = clock_now() + 2 * USEC_PER_SEC; /* the queues fill, then nothing moves */
    size_t most = 0;
    while (clock_now() < end) {
        size_t q = http_server_queued(f->env.server);
        most = q > most ? q : most;
        sleep_ms(10);
    }
    assert_true(most > budget / 2); /* it did fill */
    /* past the budget, each download writes on until its own client holds its share,
     * plus one read (64 KiB): the budget and that much per download at most */
    const size_t bound = budget + 2 * (LIMIT_ROUTER_QUEUED_SHARE + 64 * 1024);
    if (queued_over(f, bound))
        fail_msg("%zu bytes queued to the clients, budget %zu", http_server_queued(f->env.server),
                 budget);
    if (most > bound)
        fail_msg("at most %zu bytes queued to the clients, budget %zu", most, budget);
    for (int i = 0; i < 2; i++)
        assert_int_equal(read_whole(&c[i], total), 0);
    fx_stop(f);
}

/* A download slower than the client's queue drains (the queue full, upstream reads
 * stopped until it halves, which takes longer than the idle timeout) is not idle while
 * the client takes bytes: it must complete. */
static void test_slow_download_is_not_idle(void **state)
{
    (void)state;
    const size_t total = 8u * 1024 * 1024;
    struct fx_opts o = {.proxy = {.idle_timeout = 3 * USEC_PER_SEC / 2},
                        .write_queue = 1024 * 1024,
                        .big_len = total};
    struct fx *f = fx_start(&o);
    struct test_http_conn c;
    connect_small(f->env.port, 16384, &c);
    send_req(&c, f->env.up_port, "/big", NULL);
    size_t got = 0, want = 0; /* want: head + body, once the head is in */
    char tmp[16384], head[4096];
    /* ~128 KiB/s for 5 s: half a 1 MiB queue takes 4 s, a 64 KiB write 0.5 s */
    usec_t slow_end = clock_now() + 5 * USEC_PER_SEC;
    struct timeval tv = {.tv_sec = 10};
    (void)setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (want == 0 || got < want) {
        bool slow = clock_now() < slow_end;
        ssize_t n = recv(c.fd, tmp, slow ? 12800 : sizeof(tmp), 0);
        if (n <= 0)
            break; /* cut: before, the idle timeout ended it after 1.5 s */
        if (got < sizeof(head))
            memcpy(head + got, tmp,
                   (size_t)n < sizeof(head) - got ? (size_t)n : sizeof(head) - got);
        got += (size_t)n;
        const char *e =
            want ? NULL : memmem(head, got < sizeof(head) ? got : sizeof(head), "\r\n\r\n", 4);
        if (e)
            want = (size_t)(e - head) + 4 + total;
        if (slow)
            sleep_ms(100);
    }
    assert_true(want > 0);
    assert_int_equal(got, want);
    test_http_close(&c);
    fx_stop(f);
}

/* A request failing on a reused connection is retried on a new one, not on another
 * pooled connection that may be as stale. */
static void test_retry_connects_anew(void **state)
{
    (void)state;
    struct fx_opts o = {0};
    struct fx *f = fx_start(&o);
    struct test_http_conn c[2];
    struct test_http_resp r;
    test_http_resp_init(&r);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(test_http_connect(f->env.port, &c[i]), 0);
        send_req(&c[i], f->env.up_port, "/pair", NULL);
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(test_http_read(&c[i], false, T_IO, &r), 0);
        assert_int_equal(r.status, 200);
        test_http_close(&c[i]);
    }
    assert_int_equal(atomic_load(&f->env.accepts), 2); /* both pooled now */
    assert_int_equal(request(f, f->env.up_port, "/stale", NULL, &r), 200);
    assert_string_equal(buf_str(&r.body), "ok");
    assert_int_equal(atomic_load(&f->env.accepts), 3);
    test_http_resp_done(&r);
    fx_stop(f);
}

/* The retry's connect fails: the first attempt was sent (it may have run), so the 502
 * must not say the request never left. */
static void test_failed_retry_does_not_say_never_sent(void **state)
{
    (void)state;
    struct fx_opts o = {.close_listener = true};
    struct fx *f = fx_start(&o);
    struct test_http_conn c;
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(test_http_connect(f->env.port, &c), 0);
    send_req(&c, f->env.up_port, "/ok", NULL); /* pooled; then the upstream's listener goes */
    assert_int_equal(test_http_read(&c, false, T_IO, &r), 0);
    assert_int_equal(r.status, 200);
    send_req(&c, f->env.up_port, "/stale", NULL);
    assert_int_equal(test_http_read(&c, false, T_IO, &r), 0);
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(buf_str(&r.body), "closed the connection or answered badly: box"));
    assert_null(strstr(buf_str(&r.body), "Could not connect"));
    test_http_close(&c);
    test_http_resp_done(&r);
    fx_stop(f);
}

/* A connect that times out is a 504 "Timed out waiting for the backend sandbox". The
 * target: a listener whose accept queue is full (backlog 0, one connection in it), which
 * drops further SYNs. */
static void test_connect_timeout_says_timed_out(void **state)
{
    (void)state;
    struct fx_opts o = {.proxy = {.connect_timeout = 300 * USEC_PER_MSEC}};
    struct fx *f = fx_start(&o);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sin);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(lfd, 0), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &sl), 0);
    int fill[2];
    for (int i = 0; i < 2; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        (void)connect(fill[i], (struct sockaddr *)&sin, sizeof(sin));
    }
    sleep_ms(100);
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(request(f, ntohs(sin.sin_port), "/x", NULL, &r), 504);
    assert_non_null(strstr(buf_str(&r.body), "Timed out waiting for the backend sandbox: box"));
    test_http_resp_done(&r);
    for (int i = 0; i < 2; i++)
        (void)close(fill[i]);
    (void)close(lfd);
    fx_stop(f);
}

/* The router's 502 for an answer whose headers it cannot pass on carries none of them
 * (a cookie, a content type or a cache lifetime of the sandbox's on the router's JSON). */
static void check_clean_502(struct fx *f, const char *path, const char *extra)
{
    struct test_http_resp r;
    test_http_resp_init(&r);
    assert_int_equal(request(f, f->env.up_port, path, extra, &r), 502);
    char *v = test_http_header(&r, "Set-Cookie");
    assert_null(v);
    v = test_http_header(&r, "Cache-Control");
    assert_null(v);
    v = test_http_header(&r, "X-Pad-0");
    assert_null(v);
    v = test_http_header(&r, "Content-Type");
    assert_non_null(v);
    assert_string_equal(v, "application/json");
    xfree(v);
    test_http_resp_done(&r);
}

static void test_502_without_sandbox_headers(void **state)
{
    (void)state;
    struct fx_opts o = {0};
    struct fx *f = fx_start(&o);
    check_clean_502(f, "/hugeh", NULL);
    check_clean_502(f, "/hugews", ws_headers);
    fx_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unwritten_101_frees_its_tunnel),
        cmocka_unit_test(test_upgrade_header_alone_is_no_upgrade),
        cmocka_unit_test(test_queued_bytes_bounded_for_all_clients),
        cmocka_unit_test(test_slow_download_is_not_idle),
        cmocka_unit_test(test_retry_connects_anew),
        cmocka_unit_test(test_failed_retry_does_not_say_never_sent),
        cmocka_unit_test(test_connect_timeout_says_timed_out),
        cmocka_unit_test(test_502_without_sandbox_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
