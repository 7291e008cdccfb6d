/* SPDX-License-Identifier: Apache-2.0 */
/* http_req_upgrade: 101 response, hand-over of the socket with the bytes read past the
 * head, misuse errors, and the HTTP connection leaving the server's books. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "common/xalloc.h"
#include "http/server.h"
#include "support/http_client.h"

#define TIMEOUT (5 * USEC_PER_SEC)

struct echo {
    uv_tcp_t tcp;
    char buf[4096];
};

/* Written on the server's loop thread, read on the test thread. */
static atomic_int last_misuse = 1;
static atomic_int upgrade_failures;

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
    char *copy = (char *)(wr + 1);
    memcpy(copy, p, n);
    uv_buf_t b = uv_buf_init(copy, (unsigned)n);
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
        atomic_fetch_add(&upgrade_failures, 1);
        xfree(e);
        return;
    }
    assert_ptr_equal(tcp, &e->tcp);
    tcp->data = e;
    echo_write(e, pending.p, pending.len);
    (void)uv_read_start((uv_stream_t *)tcp, on_echo_alloc, on_echo_read);
}

static int h_upgrade(struct http_req *req, void *ctx)
{
    (void)ctx;
    struct echo *e = XNEW(struct echo);
    (void)http_resp_header_add(req, "X-Test", "yes");
    struct http_upgrade_opts o = {.protocol = "echo", .tcp = &e->tcp, .fn = on_upgraded, .ctx = e};
    int r = http_req_upgrade(req, &o);
    if (r < 0)
        xfree(e);
    /* A second upgrade or a response after the upgrade must fail. */
    atomic_store(&last_misuse, http_respond(req, 200, NULL, "x", 1));
    return r;
}

static int h_misuse(struct http_req *req, void *ctx)
{
    (void)ctx;
    uv_tcp_t tcp;
    struct http_upgrade_opts bad = {.tcp = &tcp};
    int a = http_req_upgrade(req, &bad); /* no fn */
    bad.fn = on_upgraded;
    bad.protocol = "bad proto";
    int b = http_req_upgrade(req, &bad);
    (void)http_resp_start(req, 200, "text/plain");
    bad.protocol = NULL;
    int c = http_req_upgrade(req, &bad); /* already answering */
    const char *verdict = a == -EINVAL && b == -EINVAL && c == -EALREADY ? "ok" : "bad";
    (void)http_resp_write(req, verdict, strlen(verdict));
    (void)http_resp_end(req);
    return 0;
}

#define BIG_LEN (16u * 1024 * 1024) /* past any socket buffers */

static int h_big(struct http_req *req, void *ctx)
{
    (void)ctx;
    char *body = xmalloc(BIG_LEN);
    memset(body, 'b', BIG_LEN);
    int r = http_respond(req, 200, "text/plain", body, BIG_LEN);
    xfree(body);
    return r;
}

struct fixture {
    struct http_router *router;
    struct http_server_thread *t;
};

static int setup(void **state)
{
    struct fixture *f = XNEW(struct fixture);
    f->router = http_router_new();
    assert_int_equal(http_router_add(f->router, "GET", "/ws", 0, h_upgrade, NULL), 0);
    assert_int_equal(http_router_add(f->router, "GET", "/misuse", 0, h_misuse, NULL), 0);
    struct http_server_opts o = {.router = f->router};
    assert_int_equal(http_server_start_thread(&o, &f->t), 0);
    *state = f;
    return 0;
}

/* A server whose queue holds a whole /big answer and whose write stall is short. */
static int setup_stall(void **state)
{
    struct fixture *f = XNEW(struct fixture);
    f->router = http_router_new();
    assert_int_equal(http_router_add(f->router, "GET", "/ws", 0, h_upgrade, NULL), 0);
    assert_int_equal(http_router_add(f->router, "GET", "/big", 0, h_big, NULL), 0);
    struct http_server_opts o = {
        .router = f->router, .write_queue = 64u * 1024 * 1024, .write_stall = 300 * USEC_PER_MSEC};
    assert_int_equal(http_server_start_thread(&o, &f->t), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    http_server_stop_thread(f->t, USEC_PER_SEC);
    http_router_free(f->router);
    xfree(f);
    return 0;
}

/* Reads exactly n bytes (first from the client's buffer of unconsumed bytes). */
static void read_exact(struct test_http_conn *c, char *out, size_t n)
{
    size_t got = c->in.len < n ? c->in.len : n;
    memcpy(out, c->in.data, got);
    buf_consume(&c->in, got);
    struct timeval tv = {.tv_sec = 5};
    (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (got < n) {
        ssize_t r = recv(c->fd, out + got, n - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
    }
}

static void test_upgrade_echo(void **state)
{
    struct fixture *f = *state;
    struct test_http_conn c;
    struct test_http_resp resp;
    test_http_resp_init(&resp);
    assert_int_equal(test_http_connect(http_server_thread_port(f->t), &c), 0);
    assert_int_equal(test_http_send_str(&c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
                                            "Upgrade: echo\r\n\r\nearly"),
                     0);
    assert_int_equal(test_http_read(&c, false, TIMEOUT, &resp), 0);
    assert_int_equal(resp.status, 101);
    char *v = test_http_header(&resp, "Upgrade");
    assert_string_equal(v, "echo");
    xfree(v);
    v = test_http_header(&resp, "X-Test");
    assert_string_equal(v, "yes");
    xfree(v);
    v = test_http_header(&resp, "Connection");
    assert_string_equal(v, "Upgrade");
    xfree(v);
    char got[64];
    read_exact(&c, got, 5);
    assert_memory_equal(got, "early", 5);
    /* Raw bytes, not HTTP, flow both ways now. */
    assert_int_equal(test_http_send_str(&c, "\x01\x02 not http\r\n\r\n"), 0);
    read_exact(&c, got, 15);
    assert_memory_equal(got, "\x01\x02 not http\r\n\r\n", 15);
    assert_int_equal(atomic_load(&last_misuse), -EPIPE);
    /* The HTTP connection left the server's books after the hand-over. */
    assert_int_equal(http_server_connections(http_server_thread_server(f->t)), 0);
    test_http_close(&c);
    test_http_resp_done(&resp);
}

static void test_upgrade_misuse(void **state)
{
    struct fixture *f = *state;
    struct test_http_resp resp;
    test_http_resp_init(&resp);
    assert_int_equal(test_http_request(http_server_thread_port(f->t),
                                       "GET /misuse HTTP/1.1\r\nHost: x\r\n\r\n", TIMEOUT, &resp),
                     0);
    assert_int_equal(resp.status, 200);
    assert_string_equal(buf_str(&resp.body), "ok");
    test_http_resp_done(&resp);
}

/* The client disappears before the 101 is written: the callback reports an error or
 * hands over a socket that reads EOF; either way nothing leaks (ASan checks). */
static void test_upgrade_client_gone(void **state)
{
    struct fixture *f = *state;
    struct test_http_conn c;
    assert_int_equal(test_http_connect(http_server_thread_port(f->t), &c), 0);
    assert_int_equal(test_http_send_str(&c, "GET /ws HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    test_http_close(&c);
    /* The next request is served normally: the loop is healthy. */
    test_upgrade_misuse(state);
}

/* An upgrade pipelined behind an answer the client never reads: its 101 cannot be
 * written, and the connection must not wait for it forever. After the write stall the
 * connection closes, the hand-over fails (fn hears it) and the server's books are
 * clear. */
static void test_upgrade_behind_unread_answer(void **state)
{
    struct fixture *f = *state;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rcvbuf = 4096; /* set before the connect: the window stays small */
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons(http_server_thread_port(f->t))};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    static const char reqs[] = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"
                               "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
                               "Upgrade: echo\r\n\r\n";
    assert_int_equal(send(fd, reqs, sizeof(reqs) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(reqs) - 1);
    int before = atomic_load(&upgrade_failures);
    usec_t end = clock_now() + 10 * USEC_PER_SEC;
    while (atomic_load(&upgrade_failures) == before && clock_now() < end)
        (void)usleep(20 * 1000);
    assert_int_equal(atomic_load(&upgrade_failures), before + 1);
    while (http_server_connections(http_server_thread_server(f->t)) > 0 && clock_now() < end)
        (void)usleep(20 * 1000);
    assert_int_equal(http_server_connections(http_server_thread_server(f->t)), 0);
    (void)close(fd);
}

/* Reads a response head (to its blank line) from fd, a byte at a time, into out. */
static void read_head(int fd, char *out, size_t size)
{
    size_t n = 0;
    while (n + 1 < size && (n < 4 || memcmp(out + n - 4, "\r\n\r\n", 4) != 0)) {
        ssize_t r = recv(fd, out + n, 1, 0);
        assert_true(r == 1);
        n++;
    }
    out[n] = '\0';
}

/* The same upgrade behind the same answer, which the client reads slowly but steadily
 * (16 KiB every 2 ms): the answer is one write, which completes only once most of it is
 * read, long after the 300 ms write stall. The client's taking of the socket's queue
 * counts as progress (http/progress.h), so the 101 follows the answer and the socket is
 * handed over. Before, the connection closed at the stall: a client reading more slowly
 * than one completed write per write stall lost its upgrade. */
static void test_upgrade_behind_slowly_read_answer(void **state)
{
    struct fixture *f = *state;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_port = htons(http_server_thread_port(f->t))};
    struct timeval tv = {.tv_sec = 5};
    char head[1024], *chunk = xmalloc(16 * 1024);
    size_t got = 0;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    static const char reqs[] = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"
                               "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
                               "Upgrade: echo\r\n\r\n";
    assert_int_equal(send(fd, reqs, sizeof(reqs) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(reqs) - 1);
    int before = atomic_load(&upgrade_failures);
    read_head(fd, head, sizeof(head));
    assert_non_null(strstr(head, "HTTP/1.1 200 "));
    usec_t t0 = clock_now();
    while (got < BIG_LEN) {
        size_t want = BIG_LEN - got < 16 * 1024 ? BIG_LEN - got : 16 * 1024;
        ssize_t r = recv(fd, chunk, want, 0);
        assert_true(r > 0); /* before the fix: the connection closed at the stall */
        got += (size_t)r;
        (void)usleep(2000);
    }
    print_message("answer read in %.1f s\n", (double)(clock_now() - t0) / USEC_PER_SEC);
    read_head(fd, head, sizeof(head));
    assert_non_null(strstr(head, "HTTP/1.1 101 "));
    assert_int_equal(send(fd, "ping", 4, MSG_NOSIGNAL), 4);
    for (got = 0; got < 4;) {
        ssize_t r = recv(fd, chunk + got, 4 - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
    }
    assert_memory_equal(chunk, "ping", 4);
    assert_int_equal(atomic_load(&upgrade_failures), before);
    xfree(chunk);
    (void)close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_upgrade_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_misuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_client_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_behind_unread_answer, setup_stall, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_behind_slowly_read_answer, setup_stall,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
