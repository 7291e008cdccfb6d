/* SPDX-License-Identifier: Apache-2.0 */
/* The plain sandboxd client against a one-request HTTP server on 127.0.0.1: URL building
 * with IPv6 brackets, the token and header lines sent, a long token sent whole and a
 * too-long one refused, the body and method, the bounded response, the proxy policy,
 * the timeout and the http-only protocol restriction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "kube/config.h"
#include "kube/sbd_client.h"

#define REQ_MAX (LIMIT_KUBE_TOKEN + 16384)

/* Serves exactly one connection: reads the request, then answers resp (or holds the
 * connection open until the client gives up when resp is NULL). */
struct srv {
    int lfd;
    uint16_t port;
    pthread_t th;
    const char *resp;
    char *req; /* the raw request */
    size_t len;
};

static size_t content_length(const char *head)
{
    const char *p = strcasestr(head, "\r\nContent-Length:");
    return p ? strtoul(p + 17, NULL, 10) : 0;
}

static void read_request(struct srv *s, int fd)
{
    char *end = NULL;
    while (s->len < REQ_MAX - 1) {
        ssize_t n = recv(fd, s->req + s->len, REQ_MAX - 1 - s->len, 0);
        if (n <= 0)
            return;
        s->len += (size_t)n;
        s->req[s->len] = '\0';
        if (!end && (end = strstr(s->req, "\r\n\r\n")) != NULL)
            end += 4;
        if (end && s->len >= (size_t)(end - s->req) + content_length(s->req))
            return;
    }
}

static void *serve(void *arg)
{
    struct srv *s = arg;
    int fd = accept(s->lfd, NULL, NULL);
    char tmp[256];
    if (fd < 0)
        return NULL;
    read_request(s, fd);
    if (s->resp) {
        (void)send(fd, s->resp, strlen(s->resp), MSG_NOSIGNAL);
    } else {
        while (recv(fd, tmp, sizeof(tmp), 0) > 0) { /* until the client hangs up */
        }
    }
    close(fd);
    return NULL;
}

static void srv_start(struct srv *s, const char *resp)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    *s = (struct srv){.resp = resp, .req = xcalloc(1, REQ_MAX)};
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->lfd, 4), 0);
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &al), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void srv_done(struct srv *s)
{
    shutdown(s->lfd, SHUT_RDWR);
    pthread_join(s->th, NULL);
    close(s->lfd);
}

static struct sbd_client *client(const struct sbd_client_opts *o)
{
    struct sbd_client *c = NULL;
    assert_int_equal(sbd_client_new(o, &c), 0);
    return c;
}

static void test_base_url(void **state)
{
    char u[64];
    (void)state;
    assert_int_equal(sbd_client_base_url("http", "10.1.2.3", 8080, u, sizeof(u)), 0);
    assert_string_equal(u, "http://10.1.2.3:8080");
    assert_int_equal(sbd_client_base_url("http", "fd00::1", 9, u, sizeof(u)), 0);
    assert_string_equal(u, "http://[fd00::1]:9");
    assert_int_equal(sbd_client_base_url("https", "[fd00::2]", 443, u, sizeof(u)), 0);
    assert_string_equal(u, "https://[fd00::2]:443");
    assert_int_equal(sbd_client_base_url("http", "10.1.2.3", 8080, u, 10), -E2BIG);
    assert_int_equal(sbd_client_base_url("http", "", 80, u, sizeof(u)), -EINVAL);
    assert_int_equal(sbd_client_base_url("http", NULL, 80, u, sizeof(u)), -EINVAL);
    assert_int_equal(sbd_client_base_url("http", "10.1.2.3", 0, u, sizeof(u)), -EINVAL);
}

static void test_options_checked(void **state)
{
    struct sbd_client_opts o = {.base = "http://x"};
    struct sbd_client *c = NULL;
    char *tok = xmalloc(LIMIT_KUBE_TOKEN + 2);
    (void)state;
    assert_int_equal(sbd_client_new(NULL, &c), -EINVAL);
    o.base = NULL;
    assert_int_equal(sbd_client_new(&o, &c), -EINVAL);
    o.base = "http://x";
    memset(tok, 'a', LIMIT_KUBE_TOKEN + 1);
    tok[LIMIT_KUBE_TOKEN + 1] = '\0';
    o.token = tok;
    assert_int_equal(sbd_client_new(&o, &c), -E2BIG); /* refused, never cut */
    assert_null(c);
    tok[LIMIT_KUBE_TOKEN] = '\0';
    assert_int_equal(sbd_client_new(&o, &c), 0); /* the limit itself fits */
    sbd_client_free(c);
    sbd_client_free(NULL);
    xfree(tok);
}

static void test_put_with_token_and_headers(void **state)
{
    static const char *const hdrs[] = {"X-Sandbox-ID: sb1", NULL};
    struct srv s;
    char base[64], err[CURL_ERROR_SIZE] = "";
    struct buf resp;
    long status = 0;
    (void)state;
    srv_start(&s,
              "HTTP/1.1 201 Created\r\nContent-Length: 7\r\nConnection: close\r\n\r\n{\"a\":1}");
    assert_int_equal(sbd_client_base_url("http", "127.0.0.1", s.port, base, sizeof(base)), 0);
    (void)snprintf(base + strlen(base), sizeof(base) - strlen(base), "/"); /* dropped */
    struct sbd_client *c = client(&(struct sbd_client_opts){
        .base = base, .token = "t0k", .headers = hdrs, .no_proxy = true, .http_only = true});
    struct sbd_client_req req = {
        .method = "PUT", .path = "/v1/config/env", .body = "{\"env\":{}}", .len = 10};
    buf_init(&resp, 64);
    assert_int_equal(sbd_client_call(c, &req, &resp, &status, err, sizeof(err)), 0);
    srv_done(&s);
    assert_int_equal(status, 201);
    assert_int_equal(resp.len, 7);
    assert_memory_equal(resp.data, "{\"a\":1}", 7);
    assert_true(strncmp(s.req, "PUT /v1/config/env HTTP/1.1\r\n", 29) == 0);
    assert_non_null(strstr(s.req, "\r\nAuthorization: Bearer t0k\r\n"));
    assert_non_null(strstr(s.req, "\r\nX-Sandbox-ID: sb1\r\n"));
    assert_non_null(strstr(s.req, "\r\nContent-Type: application/json\r\n"));
    assert_null(strstr(s.req, "Expect:"));
    assert_non_null(strstr(s.req, "\r\n\r\n{\"env\":{}}"));
    buf_done(&resp);
    sbd_client_free(c);
    xfree(s.req);
}

/* A token longer than the old fixed 8 KiB buffers goes out whole. */
static void test_long_token_sent_whole(void **state)
{
    struct srv s;
    char base[64], *tok = xmalloc(20001), *want;
    long status = 0;
    (void)state;
    memset(tok, 'k', 20000);
    tok[20000] = '\0';
    srv_start(&s, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
    assert_int_equal(sbd_client_base_url("http", "127.0.0.1", s.port, base, sizeof(base)), 0);
    struct sbd_client *c =
        client(&(struct sbd_client_opts){.base = base, .token = tok, .no_proxy = true});
    assert_int_equal(sbd_client_call(c, &(struct sbd_client_req){.path = "/v1/activity"}, NULL,
                                     &status, NULL, 0),
                     0);
    srv_done(&s);
    assert_int_equal(status, 204);
    want = xasprintf("\r\nAuthorization: Bearer %s\r\n", tok);
    assert_non_null(strstr(s.req, want));
    assert_true(strncmp(s.req, "GET /v1/activity ", 17) == 0);
    xfree(want);
    xfree(tok);
    sbd_client_free(c);
    xfree(s.req);
}

static void test_response_bounded(void **state)
{
    struct srv s;
    char base[64], err[CURL_ERROR_SIZE] = "";
    struct buf resp;
    long status = 0;
    (void)state;
    srv_start(&s, "HTTP/1.1 200 OK\r\nContent-Length: 40\r\nConnection: close\r\n\r\n"
                  "0123456789012345678901234567890123456789");
    assert_int_equal(sbd_client_base_url("http", "127.0.0.1", s.port, base, sizeof(base)), 0);
    struct sbd_client *c = client(&(struct sbd_client_opts){.base = base, .no_proxy = true});
    buf_init(&resp, 16);
    assert_int_equal(
        sbd_client_call(c, &(struct sbd_client_req){.path = "/"}, &resp, &status, err, sizeof(err)),
        -E2BIG);
    assert_true(resp.len <= 16);
    assert_true(err[0] != '\0');
    srv_done(&s);
    buf_done(&resp);
    sbd_client_free(c);
    xfree(s.req);
}

/* no_proxy ignores a proxy the environment names (here one that does not exist). */
static void test_no_proxy_ignores_environment(void **state)
{
    struct srv s;
    char base[64];
    long status = 0;
    (void)state;
    setenv("http_proxy", "http://127.0.0.1:1", 1);
    setenv("HTTP_PROXY", "http://127.0.0.1:1", 1);
    srv_start(&s, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    assert_int_equal(sbd_client_base_url("http", "127.0.0.1", s.port, base, sizeof(base)), 0);
    struct sbd_client *c = client(&(struct sbd_client_opts){.base = base, .no_proxy = true});
    assert_int_equal(
        sbd_client_call(c, &(struct sbd_client_req){.path = "/"}, NULL, &status, NULL, 0), 0);
    assert_int_equal(status, 200);
    srv_done(&s);
    sbd_client_free(c);
    /* Without it, the environment's proxy is used (and here refuses the connection). */
    c = client(&(struct sbd_client_opts){.base = base});
    assert_int_equal(
        sbd_client_call(c, &(struct sbd_client_req){.path = "/"}, NULL, &status, NULL, 0), -EIO);
    sbd_client_free(c);
    xfree(s.req);
    unsetenv("http_proxy");
    unsetenv("HTTP_PROXY");
}

/* A server that never answers (and holds the connection until the client hangs up): the
 * call is cut by its timeout, with -ETIMEDOUT, not before it. Without the timeout the
 * call would never return. */
static void test_timeout(void **state)
{
    struct srv s;
    char base[64], err[CURL_ERROR_SIZE] = "";
    long status = 0;
    usec_t t0;
    (void)state;
    srv_start(&s, NULL); /* never answers */
    assert_int_equal(sbd_client_base_url("http", "127.0.0.1", s.port, base, sizeof(base)), 0);
    struct sbd_client *c = client(
        &(struct sbd_client_opts){.base = base, .no_proxy = true, .timeout = 200 * USEC_PER_MSEC});
    t0 = clock_now();
    assert_int_equal(
        sbd_client_call(c, &(struct sbd_client_req){.path = "/"}, NULL, &status, err, sizeof(err)),
        -ETIMEDOUT);
    /* curl counts whole milliseconds */
    assert_true(clock_now() - t0 >= 200 * USEC_PER_MSEC - 2 * USEC_PER_MSEC);
    assert_true(err[0] != '\0');
    sbd_client_free(c);
    srv_done(&s);
    xfree(s.req);
}

static void test_http_only_refuses_https(void **state)
{
    char err[CURL_ERROR_SIZE] = "";
    long status = 0;
    (void)state;
    struct sbd_client *c = client(&(struct sbd_client_opts){
        .base = "https://127.0.0.1:1", .no_proxy = true, .http_only = true});
    assert_int_equal(
        sbd_client_call(c, &(struct sbd_client_req){.path = "/"}, NULL, &status, err, sizeof(err)),
        -EIO);
    assert_true(err[0] != '\0');
    sbd_client_free(c);
}

/* Through the API server's pod proxy with the kubeconfig's tls-server-name: the TLS
 * handshake names it (SNI, and the certificate is checked against it), as the kube
 * client's requests do; before, the sandboxd client sent none for the server's IP and
 * every CLI call through the proxy failed the name check. */
static void test_tls_server_name(void **state)
{
    struct srv s;
    char dir[] = "/tmp/as-test-sbd-XXXXXX", kc[128], text[2048], base[160];
    char err[CURL_ERROR_SIZE] = "";
    long status = 0;
    (void)state;
    srv_start(&s, NULL); /* takes the ClientHello, never answers */
    assert_non_null(mkdtemp(dir));
    (void)snprintf(kc, sizeof(kc), "%s/kubeconfig", dir);
    (void)snprintf(text, sizeof(text),
                   "current-context: t\nclusters:\n- name: k\n  cluster: {server: "
                   "'https://127.0.0.1:%u', tls-server-name: kubernetes.test, "
                   "certificate-authority: '%s/kube/test-ca.pem'}\ncontexts:\n- name: t\n"
                   "  context: {cluster: k, user: u}\nusers:\n- name: u\n  user: {token: t}\n",
                   s.port, getenv("AS_TEST_DATA"));
    FILE *f = fopen(kc, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    struct kube_config *cfg = NULL;
    struct kube_err e;
    assert_int_equal(kube_config_load(&(struct kube_config_opts){.kubeconfig = kc}, &cfg, &e), 0);
    (void)snprintf(base, sizeof(base),
                   "https://127.0.0.1:%u/api/v1/namespaces/ns/pods/p:8080/proxy", s.port);
    struct sbd_client *c = client(&(struct sbd_client_opts){
        .base = base, .tls = cfg, .no_proxy = true, .timeout = 500 * USEC_PER_MSEC});
    assert_true(sbd_client_call(c, &(struct sbd_client_req){.path = "/v1/health"}, NULL, &status,
                                err, sizeof(err)) < 0);
    sbd_client_free(c);
    srv_done(&s);
    if (!memmem(s.req, s.len, "kubernetes.test", strlen("kubernetes.test")))
        fail_msg("the ClientHello (%zu bytes) names no tls-server-name", s.len);
    xfree(s.req);
    kube_config_free(cfg);
    assert_int_equal(unlink(kc), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_url),
        cmocka_unit_test(test_options_checked),
        cmocka_unit_test(test_put_with_token_and_headers),
        cmocka_unit_test(test_long_token_sent_whole),
        cmocka_unit_test(test_response_bounded),
        cmocka_unit_test(test_no_proxy_ignores_environment),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_http_only_refuses_https),
        cmocka_unit_test(test_tls_server_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
