/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/tls: the TLS front over a real http_server (a request over TLS
 * reaches the server through http_server_adopt, with the client's address as peer; a
 * plain-text client gets nothing), a client certificate's identity as the connection's
 * peer info, its option checks, self-signed certificates, the
 * --mtls-mode parser and the bearer-token parser of metrics_auth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "http/server.h"
#include "tls/metrics_auth.h"
#include "tls/tls_front.h"

static int connect_port(uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {10, 0};
    assert_true(fd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static int h_peer(struct http_req *req, void *ctx)
{
    char peer[64] = "";
    (void)ctx;
    (void)http_req_peer(req, peer, sizeof(peer));
    return http_respond(req, 200, "text/plain", peer, strlen(peer));
}

/* A server with one route behind a TLS front with the self-signed "unit" certificate:
 * front_fix_init makes the server and certificate and fills in the front's options
 * (to), front_fix_start starts the front with them (again after a front_fix_stop_front),
 * front_fix_done stops what runs and removes the certificate. */
struct front_fix {
    struct http_router *routes;
    struct http_server_thread *srv;
    struct tls_front *front;
    char *dir, cert[512], key[512];
    struct tls_front_opts to;
};

static void front_fix_init(struct front_fix *f, const char *method, const char *path,
                           unsigned flags, http_handler_fn *h)
{
    struct http_server_opts so = {.router = f->routes = http_router_new()};
    f->front = NULL;
    assert_int_equal(http_router_add(f->routes, method, path, flags, h, NULL), 0);
    assert_int_equal(http_server_start_thread(&so, &f->srv), 0);
    assert_int_equal(tls_self_signed("unit", &f->dir), 0);
    (void)snprintf(f->cert, sizeof(f->cert), "%s/tls.crt", f->dir);
    (void)snprintf(f->key, sizeof(f->key), "%s/tls.key", f->dir);
    f->to = (struct tls_front_opts){.host = "127.0.0.1", .cert_file = f->cert, .key_file = f->key};
}

static uint16_t front_fix_start(struct front_fix *f)
{
    assert_int_equal(tls_front_start(&f->to, http_server_thread_server(f->srv), &f->front), 0);
    return tls_front_port(f->front);
}

static void front_fix_stop_front(struct front_fix *f)
{
    tls_front_stop(f->front);
    f->front = NULL;
}

static void front_fix_done(struct front_fix *f)
{
    front_fix_stop_front(f);
    http_server_stop_thread(f->srv, USEC_PER_SEC);
    http_router_free(f->routes);
    tls_self_signed_remove(f->dir);
}

/* Sends req over ssl and reads the answer until the server closes, into buf. */
static void tls_exchange(SSL *ssl, const char *req, char *buf, size_t size)
{
    int n, got = 0;
    assert_int_equal(SSL_write(ssl, req, (int)strlen(req)), (int)strlen(req));
    while ((n = SSL_read(ssl, buf + got, (int)size - 1 - got)) > 0)
        got += n;
    buf[got] = '\0';
}

static void test_front_serves_http_server(void **state)
{
    static const char req[] = "GET /peer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    struct front_fix f;
    char buf[4096] = "";
    int fd, n;
    (void)state;
    front_fix_init(&f, "GET", "/peer", 0, h_peer);
    uint16_t port = front_fix_start(&f);
    /* over TLS */
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = SSL_new(cctx);
    fd = connect_port(port);
    assert_int_equal(SSL_set_fd(ssl, fd), 1);
    assert_int_equal(SSL_connect(ssl), 1);
    tls_exchange(ssl, req, buf, sizeof(buf));
    assert_non_null(strstr(buf, "HTTP/1.1 200"));
    assert_non_null(strstr(buf, "\r\n\r\n127.0.0.1")); /* the TLS client's address */
    SSL_free(ssl);
    SSL_CTX_free(cctx);
    (void)close(fd);
    /* plain text to the TLS port: no HTTP answer */
    fd = connect_port(port);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    n = (int)read(fd, buf, sizeof(buf) - 1);
    assert_true(n <= 0 || strncmp(buf, "HTTP/", 5) != 0);
    (void)close(fd);
    front_fix_done(&f);
}

#define REJECT_LEN (2 * 1024 * 1024) /* more than the socket buffers hold at first */

/* Answers 413 with a large body at the head, without reading the upload. */
static int h_reject(struct http_req *req, void *ctx)
{
    char *body = xmalloc(REJECT_LEN);
    (void)ctx;
    memset(body, 'r', REJECT_LEN);
    int r = http_respond(req, 413, "text/plain", body, REJECT_LEN);
    xfree(body);
    return r;
}

/* Reads what is there (non-blocking) into resp; false once the connection ended. */
static bool read_some(SSL *ssl, struct buf *resp, bool *moved)
{
    char chunk[16 * 1024];
    int n = SSL_read(ssl, chunk, (int)sizeof(chunk));
    if (n > 0) {
        assert_int_equal(buf_append(resp, chunk, (size_t)n), 0);
        *moved = true;
        return true;
    }
    int e = SSL_get_error(ssl, n);
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

/* Whether this runs under valgrind (scripts/valgrind.sh runs the unit suite so). */
static bool under_valgrind(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload");
}

/* An HTTPS client uploads (8 MiB announced) while the server answers 413 with 2 MiB
 * before reading it, and reads the answer slowly (16 KiB a millisecond), writing on
 * until the answer is whole. The front reads and drops the client's bytes after the
 * server's end (as the HTTP server lingers on a plain connection), so its close is a
 * FIN after the whole answer. Before, it closed with the client's bytes unread: a reset,
 * which threw away the end of the answer still queued (a cut 413, or none). Not under
 * valgrind: 2 MiB of TLS take it longer than the linger's 2 s, after which a client
 * still writing gets the reset by design. */
static void test_front_answer_before_upload_whole(void **state)
{
    static const char head[] =
        "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n\r\n";
    static char up[16 * 1024];
    struct front_fix f;
    struct buf resp;
    size_t sent = 0;
    bool writing = true;
    (void)state;
    if (under_valgrind()) {
        skip();
        return;
    }
    memset(up, 'u', sizeof(up));
    buf_init(&resp, 2 * REJECT_LEN);
    front_fix_init(&f, "POST", "/upload", HTTP_ROUTE_STREAM_BODY, h_reject);
    uint16_t port = front_fix_start(&f);
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_mode(cctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL *ssl = SSL_new(cctx);
    int fd = connect_port(port);
    assert_int_equal(SSL_set_fd(ssl, fd), 1);
    assert_int_equal(SSL_connect(ssl), 1);
    assert_int_equal(SSL_write(ssl, head, (int)strlen(head)), (int)strlen(head));
    assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
    usec_t end = clock_now() + 20 * USEC_PER_SEC;
    for (;;) {
        bool moved = false;
        const char *body = resp.data ? strstr(resp.data, "\r\n\r\n") : NULL;
        writing = writing && sent < 8388608 &&
                  !(body && resp.len - (size_t)(body + 4 - resp.data) >= REJECT_LEN);
        if (writing) {
            int n = SSL_write(ssl, up, (int)sizeof(up));
            int e = n > 0 ? 0 : SSL_get_error(ssl, n);
            if (n > 0) {
                sent += (size_t)n;
                moved = true;
            } else if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                writing = false; /* the server's side is closed */
            }
        }
        if (!read_some(ssl, &resp, &moved))
            break;
        assert_true(clock_now() < end);
        clock_sleep(moved ? USEC_PER_MSEC : 10 * USEC_PER_MSEC);
    }
    const char *body = strstr(buf_str(&resp), "\r\n\r\n");
    assert_non_null(body);
    assert_int_equal(strncmp(resp.data, "HTTP/1.1 413 ", 13), 0);
    assert_int_equal(resp.len - (size_t)(body + 4 - resp.data), REJECT_LEN);
    buf_done(&resp);
    SSL_free(ssl);
    SSL_CTX_free(cctx);
    (void)close(fd);
    front_fix_done(&f);
}

/* The process out of descriptors while a connection waits: the acceptor backs off
 * instead of spinning on the readable listener (before: a core at 100 % until a
 * descriptor was free), and serves the connection once one is. Not under valgrind,
 * whose own descriptor limit lets the accept through. */
static void test_acceptor_waits_out_of_descriptors(void **state)
{
    static const char req[] = "GET /peer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    struct front_fix f;
    struct rlimit old, low;
    struct rusage r0, r1;
    struct sockaddr_in a = {.sin_family = AF_INET};
    char buf[4096] = "";
    (void)state;
    if (under_valgrind()) {
        skip(); /* valgrind emulates the descriptor limit: accept4 does not fail there */
        return;
    }
    front_fix_init(&f, "GET", "/peer", 0, h_peer);
    uint16_t port = front_fix_start(&f);
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = SSL_new(cctx);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), lowest = dup(0);
    assert_true(fd >= 0 && lowest >= 0);
    (void)close(lowest);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)lowest; /* no descriptor left to take */
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    clock_sleep(100 * USEC_PER_MSEC);
    assert_int_equal(getrusage(RUSAGE_SELF, &r0), 0);
    clock_sleep(500 * USEC_PER_MSEC);
    assert_int_equal(getrusage(RUSAGE_SELF, &r1), 0);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    long cpu_ms =
        (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) *
            1000L +
        (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) /
            1000L;
    print_message("CPU while out of descriptors: %ld ms in 500 ms\n", cpu_ms);
    assert_true(cpu_ms < 150);
    /* a descriptor is free again: the connection is served */
    struct timeval tv = {10, 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(SSL_set_fd(ssl, fd), 1);
    assert_int_equal(SSL_connect(ssl), 1);
    tls_exchange(ssl, req, buf, sizeof(buf));
    assert_non_null(strstr(buf, "HTTP/1.1 200"));
    SSL_free(ssl);
    SSL_CTX_free(cctx);
    (void)close(fd);
    front_fix_done(&f);
}

/* Answers the connection's peer info with each NUL shown as '|'. */
static int h_info(struct http_req *req, void *ctx)
{
    struct str info = http_req_peer_info(req);
    char out[512];
    (void)ctx;
    assert_true(info.len < sizeof(out));
    for (size_t i = 0; i < info.len; i++)
        out[i] = info.p[i] ? info.p[i] : '|';
    return http_respond(req, 200, "text/plain", out, info.len);
}

/* One GET /info over TLS (version: 0 any, else that one) with the client certificate
 * cert/key; the response into buf. With sess: *sess (if any) is offered for resumption
 * and replaced by this connection's session. Returns whether the session was resumed. */
static bool get_info_tls(uint16_t port, const char *cert, const char *key, int version,
                         SSL_SESSION **sess, char *buf, size_t size)
{
    static const char req[] = "GET /info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    int fd = connect_port(port), n, got = 0;
    if (version) {
        assert_int_equal(SSL_CTX_set_min_proto_version(cctx, version), 1);
        assert_int_equal(SSL_CTX_set_max_proto_version(cctx, version), 1);
    }
    assert_int_equal(SSL_CTX_use_certificate_file(cctx, cert, SSL_FILETYPE_PEM), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(cctx, key, SSL_FILETYPE_PEM), 1);
    SSL *ssl = SSL_new(cctx);
    assert_int_equal(SSL_set_fd(ssl, fd), 1);
    if (sess && *sess)
        assert_int_equal(SSL_set_session(ssl, *sess), 1);
    bool reused = false;
    if (SSL_connect(ssl) == 1) { /* a refused certificate: no answer (buf empty) */
        reused = SSL_session_reused(ssl) == 1;
        if (SSL_write(ssl, req, (int)strlen(req)) == (int)strlen(req))
            while ((n = SSL_read(ssl, buf + got, (int)size - 1 - got)) > 0)
                got += n;
    }
    buf[got] = '\0';
    (void)SSL_shutdown(ssl); /* a session freed without it is not resumable */
    if (sess) {
        SSL_SESSION_free(*sess);
        *sess = SSL_get1_session(ssl);
    }
    SSL_free(ssl);
    SSL_CTX_free(cctx);
    (void)close(fd);
    return reused;
}

static void get_info(uint16_t port, const char *cert, const char *key, char *buf, size_t size)
{
    (void)get_info_tls(port, cert, key, 0, NULL, buf, size);
}

/* An mTLS front (client certificates required: the self-signed "unit" certificate, its
 * own CA) before a server answering GET /info with the request's identity. */
static void mtls_fix_init(struct front_fix *f)
{
    front_fix_init(f, "GET", "/info", 0, h_info);
    f->to.client_ca = f->cert;
    f->to.mtls = TLS_MTLS_REQUIRED;
    f->to.client_identity = true;
}

/* mTLS with client_identity: the handler sees the certificate's identity (a
 * self-signed certificate that is its own CA: CN "unit", no O); without: nothing. */
static void test_front_client_identity(void **state)
{
    struct front_fix f;
    char buf[4096];
    (void)state;
    mtls_fix_init(&f);
    for (int with = 1; with >= 0; with--) {
        f.to.client_identity = with;
        get_info(front_fix_start(&f), f.cert, f.key, buf, sizeof(buf));
        assert_non_null(strstr(buf, "HTTP/1.1 200"));
        assert_non_null(
            strstr(buf, with ? "\r\n\r\nunit|system:authenticated|" : "Content-Length: 0\r\n"));
        front_fix_stop_front(&f);
    }
    front_fix_done(&f);
}

/* Writes the file at src to dst through a rename (a new inode, as a Secret's update). */
static void copy_file(const char *src, const char *dst)
{
    char tmp[600], data[16384];
    FILE *in = fopen(src, "r"), *out;
    size_t n;
    assert_non_null(in);
    n = fread(data, 1, sizeof(data), in);
    (void)fclose(in);
    (void)snprintf(tmp, sizeof(tmp), "%s.new", dst);
    out = fopen(tmp, "w");
    assert_non_null(out);
    assert_int_equal(fwrite(data, 1, n, out), n);
    assert_int_equal(fclose(out), 0);
    assert_int_equal(rename(tmp, dst), 0);
}

/* mTLS with a CA bundle replaced while the front runs: a client certificate of the new
 * CA is accepted from the next connection on, one of the old CA refused (before, the CA
 * was read again only with a changed certificate or key). */
static void test_front_client_ca_reloaded(void **state)
{
    struct front_fix f;
    char buf[4096], ca[600], *dir2, cert2[512], key2[512];
    (void)state;
    mtls_fix_init(&f);
    assert_int_equal(tls_self_signed("other", &dir2), 0);
    (void)snprintf(cert2, sizeof(cert2), "%s/tls.crt", dir2);
    (void)snprintf(key2, sizeof(key2), "%s/tls.key", dir2);
    (void)snprintf(ca, sizeof(ca), "%s/ca.crt", f.dir);
    copy_file(f.cert, ca);
    f.to.client_ca = ca;
    uint16_t port = front_fix_start(&f);
    get_info(port, cert2, key2, buf, sizeof(buf));
    assert_null(strstr(buf, "HTTP/1.1 200")); /* not of the CA */
    get_info(port, f.cert, f.key, buf, sizeof(buf));
    assert_non_null(strstr(buf, "\r\n\r\nunit|"));
    copy_file(cert2, ca);
    get_info(port, cert2, key2, buf, sizeof(buf));
    assert_non_null(strstr(buf, "\r\n\r\nother|system:authenticated|"));
    get_info(port, f.cert, f.key, buf, sizeof(buf));
    assert_null(strstr(buf, "HTTP/1.1 200")); /* the old CA's is refused now */
    front_fix_done(&f);
    tls_self_signed_remove(dir2);
}

/* mTLS: a client that resumes its session (TLS 1.3 ticket, TLS 1.2 session) is served,
 * with the identity of the certificate of the session (the handshake failed before). */
static void test_front_session_resumed(void **state)
{
    static const int versions[] = {TLS1_3_VERSION, TLS1_2_VERSION};
    struct front_fix f;
    char buf[4096];
    (void)state;
    mtls_fix_init(&f);
    uint16_t port = front_fix_start(&f);
    for (size_t i = 0; i < ARRAY_SIZE(versions); i++) {
        SSL_SESSION *sess = NULL;
        for (int round = 0; round < 2; round++) {
            buf[0] = '\0';
            bool reused = get_info_tls(port, f.cert, f.key, versions[i], &sess, buf, sizeof(buf));
            assert_int_equal(reused, round == 1);
            assert_non_null(strstr(buf, "HTTP/1.1 200"));
            assert_non_null(strstr(buf, "\r\n\r\nunit|system:authenticated|"));
        }
        SSL_SESSION_free(sess);
    }
    front_fix_done(&f);
}

/* mTLS: a session whose client certificate has expired since is not resumed (TLS 1.3
 * and 1.2 tickets): the full handshake then refuses the certificate. Before, a resumed
 * session served the expired certificate's identity for as long as tickets lasted. */
static void test_front_session_of_expired_cert(void **state)
{
    static const int versions[] = {TLS1_3_VERSION, TLS1_2_VERSION};
    struct front_fix f;
    char buf[4096], *dir, cert[512], key[512];
    SSL_SESSION *sess[ARRAY_SIZE(versions)] = {NULL};
    (void)state;
    mtls_fix_init(&f);
    assert_int_equal(tls_self_signed_for("brief", 5, &dir), 0);
    usec_t expiry = clock_now() + 5 * USEC_PER_SEC;
    (void)snprintf(cert, sizeof(cert), "%s/tls.crt", dir);
    (void)snprintf(key, sizeof(key), "%s/tls.key", dir);
    f.to.client_ca = cert;
    uint16_t port = front_fix_start(&f);
    for (size_t i = 0; i < ARRAY_SIZE(versions); i++) {
        assert_false(get_info_tls(port, cert, key, versions[i], &sess[i], buf, sizeof(buf)));
        assert_non_null(strstr(buf, "\r\n\r\nbrief|system:authenticated|"));
    }
    while (clock_now() < expiry + 1500 * USEC_PER_MSEC) /* past notAfter (whole seconds) */
        clock_sleep(100 * USEC_PER_MSEC);
    for (size_t i = 0; i < ARRAY_SIZE(versions); i++) {
        assert_false(get_info_tls(port, cert, key, versions[i], &sess[i], buf, sizeof(buf)));
        assert_null(strstr(buf, "HTTP/1.1 200"));
        SSL_SESSION_free(sess[i]);
    }
    front_fix_done(&f);
    tls_self_signed_remove(dir);
}

/* Each front has its own connection budget: one filled by connections that never
 * handshake closes more at accept, while another front of the process still serves
 * (before, all fronts shared one count: a flood of the proxy's HTTPS port shut out the
 * HTTPS metrics listener). */
static void test_front_budget_per_front(void **state)
{
    struct front_fix a, b;
    char buf[4096], c;
    int held[2];
    (void)state;
    mtls_fix_init(&a);
    mtls_fix_init(&b);
    a.to.max_conns = b.to.max_conns = 2;
    uint16_t pa = front_fix_start(&a), pb = front_fix_start(&b);
    for (int i = 0; i < 2; i++)
        held[i] = connect_port(pa); /* no ClientHello: each holds a bridge for 10 s */
    clock_sleep(300 * USEC_PER_MSEC);
    int more = connect_port(pa);
    assert_int_equal(read(more, &c, 1), 0); /* closed at accept, well before 10 s */
    (void)close(more);
    get_info(pb, b.cert, b.key, buf, sizeof(buf));
    assert_non_null(strstr(buf, "\r\n\r\nunit|system:authenticated|"));
    for (int i = 0; i < 2; i++)
        (void)close(held[i]);
    /* the held bridges end at their EOF, and their places are free again */
    usec_t end = clock_now() + 10 * USEC_PER_SEC;
    do {
        clock_sleep(100 * USEC_PER_MSEC);
        get_info(pa, a.cert, a.key, buf, sizeof(buf));
    } while (!strstr(buf, "HTTP/1.1 200") && clock_now() < end);
    assert_non_null(strstr(buf, "\r\n\r\nunit|system:authenticated|"));
    front_fix_done(&a);
    front_fix_done(&b);
}

static void test_front_rejects_bad_options(void **state)
{
    struct tls_front *front = NULL;
    char *dir, cert[512], key[512];
    (void)state;
    assert_int_equal(tls_self_signed("unit", &dir), 0);
    (void)snprintf(cert, sizeof(cert), "%s/tls.crt", dir);
    (void)snprintf(key, sizeof(key), "%s/tls.key", dir);
    struct tls_front_opts o = {.host = "127.0.0.1", .cert_file = cert, .key_file = key};
    o.mtls = TLS_MTLS_REQUIRED; /* without a CA */
    assert_int_equal(tls_front_start(&o, NULL, &front), -EINVAL);
    o.mtls = TLS_MTLS_OFF;
    o.key_file = cert; /* not a key */
    assert_int_equal(tls_front_start(&o, NULL, &front), -EINVAL);
    o.key_file = key;
    o.cert_file = "/nonexistent/tls.crt";
    assert_int_equal(tls_front_start(&o, NULL, &front), -EINVAL);
    o.cert_file = cert;
    o.host = "not-an-address";
    assert_int_equal(tls_front_start(&o, NULL, &front), -EINVAL);
    assert_null(front);
    tls_self_signed_remove(dir);
}

static void test_self_signed(void **state)
{
    char *dir, path[512], cn[64] = "";
    struct stat st;
    FILE *f;
    X509 *crt;
    EVP_PKEY *key;
    (void)state;
    assert_int_equal(tls_self_signed("metrics.example", &dir), 0);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    (void)snprintf(path, sizeof(path), "%s/tls.crt", dir);
    assert_non_null(f = fopen(path, "re"));
    crt = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    (void)snprintf(path, sizeof(path), "%s/tls.key", dir);
    assert_non_null(f = fopen(path, "re"));
    key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(crt);
    assert_non_null(key);
    assert_int_equal(X509_check_private_key(crt, key), 1);
    (void)X509_NAME_get_text_by_NID(X509_get_subject_name(crt), NID_commonName, cn, sizeof(cn));
    assert_string_equal(cn, "metrics.example");
    assert_int_equal(X509_check_host(crt, "metrics.example", 0, 0, NULL), 1);
    assert_int_equal(X509_check_ip_asc(crt, "127.0.0.1", 0), 1);
    X509_free(crt);
    EVP_PKEY_free(key);
    tls_self_signed_remove(dir);
    assert_int_equal(stat(path, &st), -1);
}

static void test_mtls_parse(void **state)
{
    enum tls_mtls_mode m;
    (void)state;
    assert_int_equal(tls_mtls_parse("off", &m), 0);
    assert_int_equal(m, TLS_MTLS_OFF);
    assert_int_equal(tls_mtls_parse("optional", &m), 0);
    assert_int_equal(m, TLS_MTLS_OPTIONAL);
    assert_int_equal(tls_mtls_parse("required", &m), 0);
    assert_int_equal(m, TLS_MTLS_REQUIRED);
    assert_int_equal(tls_mtls_parse("on", &m), -EINVAL);
    assert_int_equal(tls_mtls_parse("", &m), -EINVAL);
}

static void test_bearer(void **state)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"Bearer abc", "abc"},    {"bearer abc", "abc"},
        {"BEARER  abc  ", "abc"}, {"  Bearer x.y-z", "x.y-z"},
        {"Bearer ", ""},          {"Bearer", ""},
        {"Basic abc", ""},        {"", ""},
        {"Bearerabc", ""},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct str t = metrics_auth_bearer(str_c(cases[i].in));
        if (t.len != strlen(cases[i].want) || memcmp(t.p, cases[i].want, t.len) != 0)
            fail_msg("%s: got %.*s", cases[i].in, (int)t.len, t.p);
    }
}

int main(void)
{
    /* a write to a connection the front reset fails (EPIPE) instead of ending the run */
    (void)signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_front_serves_http_server),
        cmocka_unit_test(test_front_answer_before_upload_whole),
        cmocka_unit_test(test_acceptor_waits_out_of_descriptors),
        cmocka_unit_test(test_front_client_identity),
        cmocka_unit_test(test_front_client_ca_reloaded),
        cmocka_unit_test(test_front_session_resumed),
        cmocka_unit_test(test_front_session_of_expired_cert),
        cmocka_unit_test(test_front_budget_per_front),
        cmocka_unit_test(test_front_rejects_bad_options),
        cmocka_unit_test(test_self_signed),
        cmocka_unit_test(test_mtls_parse),
        cmocka_unit_test(test_bearer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
