/* SPDX-License-Identifier: Apache-2.0 */
/* The proxy behind the TLS front, against an upstream on the test thread: a client whose
 * TCP connection ends without a TLS close_notify (a truncation anyone on the path can
 * forge) has its request or tunnel aborted, the upstream connection reset, never ended
 * with a FIN that the sandbox could take for the end of a body or a stream; a client
 * that sends its close_notify still has its half-close passed on, and gets its answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include "common/buf.h"
#include "common/xalloc.h"
#include "support/router/proxy_env.h"
#include "tls/tls_front.h"

#define T_IO_S 10

/* ---- Fixture: proxy + HTTP server on a loop thread, the TLS front before them, and a
 * listening upstream socket served by the test thread itself ---------------------------- */

struct fx {
    struct proxy_env env; /* no upstream of its own: the test thread's, below */
    struct tls_front *front;
    char *cert_dir;
    int up_listen;
    uint16_t tls_port, up_port;
};

/* A blocking listener on 127.0.0.1 (an ephemeral port into *port). */
static int listen_local(uint16_t *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static struct fx *fx_start(void)
{
    struct fx *f = XNEW(struct fx);
    char cert[512], key[512];
    proxy_env_start(&f->env, NULL);
    assert_int_equal(tls_self_signed("unit", &f->cert_dir), 0);
    (void)snprintf(cert, sizeof(cert), "%s/tls.crt", f->cert_dir);
    (void)snprintf(key, sizeof(key), "%s/tls.key", f->cert_dir);
    struct tls_front_opts to = {.host = "127.0.0.1", .cert_file = cert, .key_file = key};
    assert_int_equal(tls_front_start(&to, f->env.server, &f->front), 0);
    f->tls_port = tls_front_port(f->front);
    f->up_listen = listen_local(&f->up_port);
    return f;
}

static void fx_stop(struct fx *f)
{
    tls_front_stop(f->front);
    proxy_env_stop(&f->env);
    tls_self_signed_remove(f->cert_dir);
    (void)close(f->up_listen);
    xfree(f);
}

/* ---- The upstream (test thread, blocking with timeouts) ------------------------------- */

/* The next upstream connection the proxy makes. */
static int up_accept(struct fx *f)
{
    struct pollfd p = {f->up_listen, POLLIN, 0};
    struct timeval tv = {T_IO_S, 0};
    assert_int_equal(poll(&p, 1, T_IO_S * 1000), 1);
    int fd = accept4(f->up_listen, NULL, NULL, SOCK_CLOEXEC);
    assert_true(fd >= 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Reads into b until it ends with tail (the end of what the client sent so far). */
static void up_read_until(int fd, struct buf *b, const char *tail)
{
    char tmp[4096];
    size_t n = strlen(tail);
    while (b->len < n || memcmp(b->data + b->len - n, tail, n) != 0) {
        ssize_t got = recv(fd, tmp, sizeof(tmp), 0);
        if (got <= 0)
            fail_msg("upstream: %zd (errno %d) before \"%s\"; got \"%s\"", got, errno, tail,
                     buf_str(b));
        assert_int_equal(buf_append(b, tmp, (size_t)got), 0);
    }
}

/* Reads what still comes until the connection ends: returns 0 for an EOF (a FIN: a
 * clean end), or -errno (-ECONNRESET for a reset; -EAGAIN: nothing within the timeout). */
static int up_read_end(int fd, struct buf *b)
{
    char tmp[4096];
    for (;;) {
        ssize_t got = recv(fd, tmp, sizeof(tmp), 0);
        if (got == 0)
            return 0;
        if (got < 0)
            return -errno;
        assert_int_equal(buf_append(b, tmp, (size_t)got), 0);
    }
}

static void up_send(int fd, const char *s)
{
    assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* ---- The TLS client --------------------------------------------------------------- */

struct client {
    SSL_CTX *ctx;
    SSL *ssl;
    int fd;
};

static void client_open(struct client *c, uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct timeval tv = {T_IO_S, 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c->fd >= 0);
    assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    c->ctx = SSL_CTX_new(TLS_client_method());
    c->ssl = SSL_new(c->ctx);
    assert_int_equal(SSL_set_fd(c->ssl, c->fd), 1);
    assert_int_equal(SSL_connect(c->ssl), 1);
}

static void client_send(struct client *c, const char *s)
{
    assert_int_equal(SSL_write(c->ssl, s, (int)strlen(s)), (int)strlen(s));
}

/* Ends the client's side as an attacker on the path would: a FIN, no close_notify. */
static void client_cut(struct client *c)
{
    assert_int_equal(shutdown(c->fd, SHUT_WR), 0);
}

/* Ends the client's connection with a reset (no close_notify either): OpenSSL reports
 * SSL_ERROR_SYSCALL for it, where a FIN gives SSL_ERROR_SSL (unexpected EOF). */
static void client_reset(struct client *c)
{
    struct linger l = {1, 0};
    assert_int_equal(setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)), 0);
    assert_int_equal(shutdown(c->fd, SHUT_RDWR), 0);
}

/* Ends the client's side cleanly: close_notify (then reading on is still allowed). */
static void client_close_notify(struct client *c)
{
    assert_true(SSL_shutdown(c->ssl) >= 0);
}

/* Reads until the connection ends (or the timeout) into b. */
static void client_read_end(struct client *c, struct buf *b)
{
    char tmp[4096];
    int n;
    while ((n = SSL_read(c->ssl, tmp, (int)sizeof(tmp))) > 0)
        assert_int_equal(buf_append(b, tmp, (size_t)n), 0);
}

/* Reads into b until it holds tail. */
static void client_read_until(struct client *c, struct buf *b, const char *tail)
{
    char tmp[4096];
    while (!b->data || !strstr(buf_str(b), tail)) {
        int n = SSL_read(c->ssl, tmp, (int)sizeof(tmp));
        if (n <= 0)
            fail_msg("client: connection ended before \"%s\"; got \"%s\"", tail, buf_str(b));
        assert_int_equal(buf_append(b, tmp, (size_t)n), 0);
    }
}

static void client_close(struct client *c)
{
    SSL_free(c->ssl);
    SSL_CTX_free(c->ctx);
    (void)close(c->fd);
}

static void send_post(struct fx *f, struct client *c, unsigned content_length, const char *body)
{
    char head[256];
    (void)snprintf(head, sizeof(head),
                   "POST /s/ns/box/%u/upload HTTP/1.1\r\nHost: h\r\nContent-Length: %u\r\n\r\n",
                   (unsigned)f->up_port, content_length);
    client_send(c, head);
    client_send(c, body);
}

/* ---- Tests ------------------------------------------------------------------------- */

/* An upload cut off midway (10 of 100 bytes, then a FIN without close_notify, or a
 * reset): the sandbox gets the 10 bytes and then a reset, never a FIN after a partial
 * body. Before, the proxy closed its upstream connection with a FIN: the same end as a
 * client that finished its input. */
static void run_cut_body(bool by_reset)
{
    struct fx *f = fx_start();
    struct client c;
    struct buf up;
    buf_init(&up, 64 * 1024);
    client_open(&c, f->tls_port);
    send_post(f, &c, 100, "0123456789");
    int u = up_accept(f);
    up_read_until(u, &up, "\r\n\r\n0123456789");
    if (by_reset)
        client_reset(&c);
    else
        client_cut(&c);
    assert_int_equal(up_read_end(u, &up), -ECONNRESET);
    /* the sandbox got the 10 bytes sent, and nothing that could complete the body */
    assert_string_equal(strstr(buf_str(&up), "\r\n\r\n") + 4, "0123456789");
    (void)close(u);
    client_close(&c);
    buf_done(&up);
    fx_stop(f);
}

static void test_cut_body_resets_upstream(void **state)
{
    (void)state;
    run_cut_body(false);
}

static void test_reset_body_resets_upstream(void **state)
{
    (void)state;
    run_cut_body(true);
}

/* A whole request, then a FIN without close_notify: the cut after it is not passed on as
 * the client's half-close (before: the proxy shut its upstream's write side, a clean EOF
 * for sandboxd) but aborts the exchange: the upstream connection is reset. */
static void test_cut_after_request_resets_upstream(void **state)
{
    (void)state;
    struct fx *f = fx_start();
    struct client c;
    struct buf up;
    buf_init(&up, 64 * 1024);
    client_open(&c, f->tls_port);
    send_post(f, &c, 10, "0123456789");
    int u = up_accept(f);
    up_read_until(u, &up, "\r\n\r\n0123456789");
    client_cut(&c);
    assert_int_equal(up_read_end(u, &up), -ECONNRESET);
    (void)close(u);
    client_close(&c);
    buf_done(&up);
    fx_stop(f);
}

/* The same request ended with close_notify: as before, the half-close is passed on (the
 * upstream reads an EOF after the whole request) and the answer still reaches the
 * client. */
static void test_close_notify_half_closes_upstream(void **state)
{
    (void)state;
    struct fx *f = fx_start();
    struct client c;
    struct buf up, resp;
    buf_init(&up, 64 * 1024);
    buf_init(&resp, 64 * 1024);
    client_open(&c, f->tls_port);
    send_post(f, &c, 10, "0123456789");
    int u = up_accept(f);
    up_read_until(u, &up, "\r\n\r\n0123456789");
    client_close_notify(&c);
    assert_int_equal(up_read_end(u, &up), 0);
    up_send(u, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    client_read_end(&c, &resp);
    assert_non_null(strstr(buf_str(&resp), "HTTP/1.1 200 OK"));
    assert_non_null(strstr(buf_str(&resp), "\r\n\r\nok"));
    (void)close(u);
    client_close(&c);
    buf_done(&up);
    buf_done(&resp);
    fx_stop(f);
}

/* A WebSocket tunnel over TLS: the client sends a frame's bytes, then (cut) a FIN
 * without close_notify, or (clean) its close_notify. Cut: the upstream gets the bytes and
 * then a reset (before: a half-close, the clean end of the stream). Clean: a half-close
 * as before, and what the upstream still sends reaches the client. */
static void run_tunnel(bool cut)
{
    struct fx *f = fx_start();
    struct client c;
    struct buf up, resp;
    char head[256];
    buf_init(&up, 64 * 1024);
    buf_init(&resp, 64 * 1024);
    client_open(&c, f->tls_port);
    (void)snprintf(head, sizeof(head),
                   "GET /s/ns/box/%u/ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
                   "Upgrade: websocket\r\n\r\n",
                   (unsigned)f->up_port);
    client_send(&c, head);
    int u = up_accept(f);
    up_read_until(u, &up, "\r\n\r\n");
    up_send(u, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
               "Upgrade: websocket\r\n\r\n");
    client_read_until(&c, &resp, "\r\n\r\n");
    assert_non_null(strstr(buf_str(&resp), "HTTP/1.1 101 "));
    client_send(&c, "stream-part");
    up_read_until(u, &up, "stream-part");
    if (cut) {
        client_cut(&c);
        assert_int_equal(up_read_end(u, &up), -ECONNRESET);
    } else {
        client_close_notify(&c);
        assert_int_equal(up_read_end(u, &up), 0);
        up_send(u, "bye");
        client_read_until(&c, &resp, "bye");
    }
    (void)close(u);
    client_close(&c);
    buf_done(&up);
    buf_done(&resp);
    fx_stop(f);
}

static void test_cut_tunnel_resets_upstream(void **state)
{
    (void)state;
    run_tunnel(true);
}

static void test_close_notify_tunnel_half_closes(void **state)
{
    (void)state;
    run_tunnel(false);
}

int main(void)
{
    (void)signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_body_resets_upstream),
        cmocka_unit_test(test_reset_body_resets_upstream),
        cmocka_unit_test(test_cut_after_request_resets_upstream),
        cmocka_unit_test(test_close_notify_half_closes_upstream),
        cmocka_unit_test(test_cut_tunnel_resets_upstream),
        cmocka_unit_test(test_close_notify_tunnel_half_closes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
