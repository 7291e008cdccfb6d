/* SPDX-License-Identifier: Apache-2.0 */
/* The client's per-call bounds and retry log against a scripted HTTP/1.1 server on
 * 127.0.0.1: kube_req.timeout cuts a hung request and the back-off, kube_req.no_retry
 * makes one attempt, and a retried 429/503 is logged with verb, path, status and
 * Retry-After (no token, no query, no body), rate-limited. Also the log-line pieces
 * (client_int.h) on their own. */
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "api/res.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"
#include "kube/client.h"
#include "kube/client_int.h"

/* HANG: never answers; TOO_MANY: 429 (Retry-After: 1); TOO_MANY_LONG: 429 (Retry-After:
 * 50); STALL: the first request gets its head and part of its body, then nothing (the
 * connection stays open), later ones a whole answer; OK: a Pod; CLOSE: each connection
 * closed at once, nothing read (a TLS handshake meets EOF); TRICKLE: a chunked 200 whose
 * body is a space every 100 ms, for up to 20 s. */
enum mode { HANG, TOO_MANY, TOO_MANY_LONG, STALL, OK, CLOSE, TRICKLE };

static struct {
    int lfd, port, wake[2];
    pthread_t th;
    atomic_int mode, requests;
    char tmp[64];
} S;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    (void)fclose(f);
}

/* TRICKLE: a space every 100 ms until the client goes or 20 s pass. Returns -1. */
static int trickle(int fd)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n";
    ssize_t w = write(fd, head, sizeof(head) - 1);
    for (int i = 0; i < 200 && w > 0; i++) {
        clock_sleep(100 * USEC_PER_MSEC);
        w = send(fd, "1\r\n \r\n", 6, MSG_NOSIGNAL);
    }
    (void)close(fd);
    return -1;
}

/* Reads one request head; answers it per mode (HANG: never; the fd is kept open until
 * the next connection or the end). Returns the fd to keep, or -1. */
static int serve(int fd)
{
    static const char resp[] =
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
        "Connection: close\r\nContent-Length: 85\r\n\r\n"
        "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"TooManyRequests\",\"code\":429,"
        "\"x\":\"1234\"}";
    static const char resp_long[] =
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 50\r\n"
        "Connection: close\r\nContent-Length: 85\r\n\r\n"
        "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"TooManyRequests\",\"code\":429,"
        "\"x\":\"1234\"}";
    char buf[8192];
    if (atomic_load(&S.mode) == CLOSE) {
        atomic_fetch_add(&S.requests, 1); /* connections, here */
        (void)close(fd);
        return -1;
    }
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) {
        (void)close(fd);
        return -1;
    }
    if (atomic_fetch_add(&S.requests, 1) == 0 && atomic_load(&S.mode) == STALL) {
        static const char part[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Content-Length: 64\r\n\r\n{\"kind\":";
        (void)!write(fd, part, sizeof(part) - 1);
        return fd;
    }
    if (atomic_load(&S.mode) == TRICKLE)
        return trickle(fd);
    if (atomic_load(&S.mode) == STALL || atomic_load(&S.mode) == OK) {
        static const char ok[] =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            "Connection: close\r\nContent-Length: 14\r\n\r\n{\"kind\":\"Pod\"}";
        (void)!write(fd, ok, sizeof(ok) - 1);
        (void)close(fd);
        return -1;
    }
    if (atomic_load(&S.mode) == HANG)
        return fd;
    if (atomic_load(&S.mode) == TOO_MANY_LONG)
        (void)!write(fd, resp_long, sizeof(resp_long) - 1);
    else
        (void)!write(fd, resp, sizeof(resp) - 1);
    (void)close(fd);
    return -1;
}

static void *srv_main(void *arg)
{
    int held = -1;
    (void)arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = S.lfd, .events = POLLIN}, {.fd = S.wake[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 || p[1].revents)
            break;
        int fd = accept(S.lfd, NULL, NULL);
        if (fd < 0)
            continue;
        if (held >= 0)
            (void)close(held);
        held = serve(fd);
    }
    if (held >= 0)
        (void)close(held);
    return NULL;
}

static int setup(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    (void)state;
    S.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(S.lfd >= 0);
    assert_int_equal(bind(S.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(S.lfd, 16), 0);
    assert_int_equal(getsockname(S.lfd, (struct sockaddr *)&a, &alen), 0);
    S.port = ntohs(a.sin_port);
    assert_int_equal(pipe(S.wake), 0);
    (void)snprintf(S.tmp, sizeof(S.tmp), "/tmp/as-test-deadline-XXXXXX");
    assert_non_null(mkdtemp(S.tmp));
    assert_int_equal(pthread_create(&S.th, NULL, srv_main, NULL), 0);
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    assert_int_equal(write(S.wake[1], "x", 1), 1);
    assert_int_equal(pthread_join(S.th, NULL), 0);
    (void)close(S.lfd);
    (void)close(S.wake[0]);
    (void)close(S.wake[1]);
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", S.tmp);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* A client with a secret bearer token, a 300 s per-attempt timeout (far past the bounds
 * below that only a hang exceeds: a call cut by it would fail them) and a 1 s read stall
 * bound. */
/* A client of the server with options o, over http or (tls) https without verification. */
static struct kube_client *client_with(enum mode m, const struct kube_client_opts *o, bool tls)
{
    char kc[128], tok[128], text[1024];
    struct kube_config *cfg = NULL;
    struct kube_client *c = NULL;
    struct kube_err e;
    (void)snprintf(kc, sizeof(kc), "%s/kubeconfig", S.tmp);
    (void)snprintf(tok, sizeof(tok), "%s/token", S.tmp);
    write_file(tok, "s3cr3t-token");
    (void)snprintf(text, sizeof(text),
                   "current-context: t\nclusters:\n- name: k\n  cluster: {server: "
                   "'%s://127.0.0.1:%d', insecure-skip-tls-verify: %s}\ncontexts:\n- name: t\n"
                   "  context: {cluster: k, user: u, namespace: ns}\nusers:\n- name: u\n  user: "
                   "{tokenFile: '%s'}\n",
                   tls ? "https" : "http", S.port, tls ? "true" : "false", tok);
    write_file(kc, text);
    assert_int_equal(kube_config_load(&(struct kube_config_opts){.kubeconfig = kc}, &cfg, &e), 0);
    assert_int_equal(kube_client_new(cfg, o, &c), 0);
    atomic_store(&S.mode, m);
    atomic_store(&S.requests, 0);
    return c;
}

static struct kube_client *client(enum mode m, int max_retries)
{
    struct kube_client_opts o = {
        .max_retries = max_retries, .timeout = 300 * USEC_PER_SEC, .read_stall = USEC_PER_SEC};
    return client_with(m, &o, false);
}

static int get_pod(struct kube_client *c, usec_t timeout, bool no_retry, struct kube_err *e)
{
    struct kube_req r;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "ns";
    r.name = "p";
    r.label_selector = "secret-query=1";
    r.timeout = timeout;
    r.no_retry = no_retry;
    return kube_request(c, &r, NULL, e);
}

static void test_timeout_cuts_hung_request(void **state)
{
    struct kube_client *c = client(HANG, 8);
    struct kube_err e;
    usec_t t0 = clock_now(), took;
    (void)state;
    assert_int_equal(get_pod(c, 300 * USEC_PER_MSEC, true, &e), -ETIMEDOUT);
    took = clock_now() - t0;
    print_message("hung request cut after %llu ms\n", (unsigned long long)(took / USEC_PER_MSEC));
    assert_true(took >= 250 * USEC_PER_MSEC);
    assert_true(took < 30 * USEC_PER_SEC); /* cut by the call's timeout, not the client's 300 s */
    assert_int_equal(atomic_load(&S.requests), 1);
    kube_client_free(c);
}

/* A read whose answer stops mid-body is cut once nothing came for read_stall (1 s here,
 * plus curl's averaging over ~5 s: ~6-7 s), not at the 300 s timeout, and retried: the
 * second attempt gets the whole answer. */
static void test_read_stall_cut_and_retried(void **state)
{
    struct kube_client *c = client(STALL, 2);
    struct kube_err e;
    struct kube_req r;
    json_t *pod = NULL;
    usec_t t0 = clock_now(), took;
    (void)state;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "ns";
    r.name = "p";
    assert_int_equal(kube_request(c, &r, &pod, &e), 0);
    took = clock_now() - t0;
    print_message("stalled read cut and retried after %llu ms\n",
                  (unsigned long long)(took / USEC_PER_MSEC));
    assert_string_equal(json_string_value(json_object_get(pod, "kind")), "Pod");
    assert_int_equal(atomic_load(&S.requests), 2);
    assert_true(took >= USEC_PER_SEC);
    assert_true(took < 60 * USEC_PER_SEC); /* not the client's 300 s */
    json_decref(pod);
    kube_client_free(c);
}

static void test_no_retry_one_attempt(void **state)
{
    struct kube_client *c = client(TOO_MANY, 2);
    struct kube_err e;
    (void)state;
    assert_int_equal(get_pod(c, 0, true, &e), -EAGAIN);
    assert_int_equal(e.http_status, 429);
    assert_int_equal(atomic_load(&S.requests), 1);
    /* The same call with retries: 1 + 2 attempts (Retry-After: 1 s each). */
    assert_int_equal(get_pod(c, 0, false, &e), -EAGAIN);
    assert_int_equal(atomic_load(&S.requests), 4);
    kube_client_free(c);
}

/* Retry-After: 50 s would pass the call's 45 s bound: the call gives up after the first
 * attempt, with that attempt's error, instead of waiting out the back-off or the bound
 * (either would take 45 s or more; 30 s is only passed by a hang). */
static void test_timeout_bounds_backoff(void **state)
{
    struct kube_client *c = client(TOO_MANY_LONG, 8);
    struct kube_err e;
    usec_t t0 = clock_now();
    (void)state;
    assert_int_equal(get_pod(c, 45 * USEC_PER_SEC, false, &e), -EAGAIN);
    assert_int_equal(e.http_status, 429);
    assert_true(clock_now() - t0 < 30 * USEC_PER_SEC);
    assert_int_equal(atomic_load(&S.requests), 1);
    kube_client_free(c);
}

/* ---- rate limiter, attempt bound, handshake, watch bound, socket options ---------- */

struct cancel_after {
    atomic_bool flag;
    usec_t after;
};

static void *set_later(void *arg)
{
    struct cancel_after *k = arg;
    clock_sleep(k->after);
    atomic_store(&k->flag, true);
    return NULL;
}

/* With the limiter's next token 10 s away, a call with a 300 ms timeout fails at once
 * with -ETIMEDOUT and sends nothing, and one cancelled while it waits ends at the
 * cancel, not when its token is due (before: each slept the 10 s out first). */
static void test_throttle_bounded(void **state)
{
    struct kube_client_opts o = {.qps = 0.1, .burst = 1, .max_retries = 0};
    struct kube_client *c = client_with(OK, &o, false);
    struct cancel_after k = {.after = 200 * USEC_PER_MSEC};
    struct kube_req r;
    struct kube_err e;
    pthread_t t;
    usec_t t0;
    (void)state;
    assert_int_equal(get_pod(c, 0, false, &e), 0); /* the burst's token */
    assert_int_equal(atomic_load(&S.requests), 1);
    t0 = clock_now();
    assert_int_equal(get_pod(c, 300 * USEC_PER_MSEC, false, &e), -ETIMEDOUT);
    assert_non_null(strstr(e.message, "rate limiter"));
    assert_true(clock_now() - t0 < 5 * USEC_PER_SEC); /* only a 10 s sleep passes this */
    assert_int_equal(atomic_load(&S.requests), 1);
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "ns";
    r.name = "p";
    r.cancel = &k.flag;
    assert_int_equal(pthread_create(&t, NULL, set_later, &k), 0);
    t0 = clock_now();
    assert_int_equal(kube_request(c, &r, NULL, &e), -ECANCELED);
    assert_true(clock_now() - t0 < 5 * USEC_PER_SEC);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&S.requests), 1);
    kube_client_free(c);
}

/* A call whose timeout (60 s) is longer than the client's (1 s): an attempt on a stalled
 * answer is cut at the client's timeout and retried, and the retry is answered; before,
 * the first attempt had the whole 60 s and the call failed with -ETIMEDOUT. (The read
 * stall bound is 300 s here, so only the timeout can cut it.) */
static void test_attempt_capped_by_client_timeout(void **state)
{
    struct kube_client_opts o = {
        .max_retries = 2, .timeout = USEC_PER_SEC, .read_stall = 300 * USEC_PER_SEC};
    struct kube_client *c = client_with(STALL, &o, false);
    struct kube_err e;
    (void)state;
    assert_int_equal(get_pod(c, 60 * USEC_PER_SEC, false, &e), 0);
    assert_int_equal(atomic_load(&S.requests), 2);
    kube_client_free(c);
}

/* A TLS handshake that meets EOF sent nothing: retried, a POST too (before: -EPROTO at
 * once, one connection), but only LIMIT_KUBE_TLS_RETRIES times of the client's 8: one
 * that keeps failing is a configuration error, reported without 8 back-offs. */
static void test_handshake_failure_retried(void **state)
{
    struct kube_client_opts o = {.max_retries = 8, .timeout = 5 * USEC_PER_SEC};
    struct kube_client *c = client_with(CLOSE, &o, true);
    json_t *pod = json_pack("{s:s, s:{s:s}}", "kind", "Pod", "metadata", "name", "p");
    struct kube_err e;
    (void)state;
    assert_int_equal(kube_create(c, &KUBE_RES_PODS, "ns", pod, NULL, &e), -EPROTO);
    assert_int_equal(atomic_load(&S.requests), 1 + LIMIT_KUBE_TLS_RETRIES);
    assert_false(kube_err_outcome_unknown(&e));
    json_decref(pod);
    kube_client_free(c);
}

/* "Nothing sent" is the failure's kind and no request bytes out: libcurl resends a
 * request on a new connection by itself when a reused one dies before an answer, and a
 * handshake failure of that second connection must not make a write look unsent. */
static void test_nothing_sent(void **state)
{
    (void)state;
    assert_true(kube__nothing_sent(CURLE_SSL_CONNECT_ERROR, false));
    assert_true(kube__nothing_sent(CURLE_COULDNT_CONNECT, false));
    assert_true(kube__nothing_sent(CURLE_COULDNT_RESOLVE_HOST, false));
    assert_false(kube__nothing_sent(CURLE_SSL_CONNECT_ERROR, true));
    assert_false(kube__nothing_sent(CURLE_COULDNT_CONNECT, true));
    assert_false(kube__nothing_sent(CURLE_RECV_ERROR, false));
    assert_false(kube__nothing_sent(CURLE_PEER_FAILED_VERIFICATION, false));
}

static int ignore_chunk(void *ctx, const char *data, size_t len)
{
    (void)ctx;
    (void)data;
    (void)len;
    return 0;
}

/* A watch with timeoutSeconds=1 whose server trickles bytes that never end a frame (so
 * the idle bound never fires) is cut watch_slack (300 ms) after those 1 s; before, it
 * went on for the server's 20 s. */
static void test_watch_cut_past_timeout(void **state)
{
    struct kube_client_opts o = {.max_retries = 0, .watch_slack = 300 * USEC_PER_MSEC};
    struct kube_client *c = client_with(TRICKLE, &o, false);
    struct kube_req r;
    struct kube_err e;
    usec_t t0 = clock_now(), took;
    (void)state;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "ns";
    r.watch = true;
    r.timeout_seconds = 1;
    assert_int_equal(kube_request_stream(c, &r, ignore_chunk, NULL, NULL, 0, &e), -ETIMEDOUT);
    took = clock_now() - t0;
    assert_non_null(strstr(e.message, "past its timeout"));
    assert_true(took >= USEC_PER_SEC);
    assert_true(took < 15 * USEC_PER_SEC); /* the server's 20 s: only a missing cut */
    kube_client_free(c);
}

/* A watch outlives the client's per-request timeout (1 s here; 60 s by default): it ends
 * at its own timeoutSeconds (2 s) plus the slack. Before, the request timeout cut every
 * stream ("no data for too long" after 1 s). */
static void test_watch_outlives_request_timeout(void **state)
{
    struct kube_client_opts o = {
        .max_retries = 0, .timeout = USEC_PER_SEC, .watch_slack = 300 * USEC_PER_MSEC};
    struct kube_client *c = client_with(TRICKLE, &o, false);
    struct kube_req r;
    struct kube_err e;
    usec_t t0 = clock_now(), took;
    (void)state;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "ns";
    r.watch = true;
    r.timeout_seconds = 2;
    assert_int_equal(kube_request_stream(c, &r, ignore_chunk, NULL, NULL, 0, &e), -ETIMEDOUT);
    took = clock_now() - t0;
    assert_non_null(strstr(e.message, "past its timeout"));
    assert_true(took >= 2 * USEC_PER_SEC);
    assert_true(took < 15 * USEC_PER_SEC);
    kube_client_free(c);
}

/* The first chunk's handler blocks for 2 s. */
static int slow_first_chunk(void *ctx, const char *data, size_t len)
{
    bool *blocked = ctx;
    (void)data;
    (void)len;
    if (!*blocked) {
        *blocked = true;
        clock_sleep(2 * USEC_PER_SEC);
    }
    return 0;
}

/* The time a handler blocks does not count towards the cut: with timeoutSeconds=1 and a
 * 300 ms slack, a 2 s handler block moves the cut to about 3.3 s (it came right after the
 * block, at about 2 s, when the transfer's wall-clock time counted). */
static void test_watch_cut_leaves_out_handler(void **state)
{
    struct kube_client_opts o = {.max_retries = 0, .watch_slack = 300 * USEC_PER_MSEC};
    struct kube_client *c = client_with(TRICKLE, &o, false);
    struct kube_req r;
    struct kube_err e;
    bool blocked = false;
    usec_t t0 = clock_now(), took;
    (void)state;
    kube_req_init(&r, "GET", &KUBE_RES_PODS);
    r.ns = "ns";
    r.watch = true;
    r.timeout_seconds = 1;
    assert_int_equal(kube_request_stream(c, &r, slow_first_chunk, &blocked, NULL, 0, &e),
                     -ETIMEDOUT);
    took = clock_now() - t0;
    assert_true(blocked);
    assert_non_null(strstr(e.message, "past its timeout"));
    assert_true(took >= 3200 * USEC_PER_MSEC);
    assert_true(took < 15 * USEC_PER_SEC);
    kube_client_free(c);
}

/* Every connection gets TCP_USER_TIMEOUT: a socket passed through the callback has it. */
static void test_sockopt_user_timeout(void **state)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unsigned int ms = 0;
    socklen_t len = sizeof(ms);
    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(kube__sockopt(NULL, fd, CURLSOCKTYPE_IPCXN), CURL_SOCKOPT_OK);
    assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, &len), 0);
    assert_int_equal(ms, LIMIT_KUBE_TCP_UNACKED / USEC_PER_MSEC);
    (void)close(fd);
}

/* Captures what the client logs at debug level during fn. */
static void capture(void (*fn)(struct kube_client *), struct kube_client *c, char *out, size_t size)
{
    int p[2];
    ssize_t n;
    assert_int_equal(pipe(p), 0);
    log_set_fd(p[1]);
    log_set_level(LOG_DEBUG);
    fn(c);
    log_set_level(LOG_WARN);
    log_set_fd(2);
    (void)close(p[1]);
    n = read(p[0], out, size - 1);
    out[n > 0 ? n : 0] = '\0';
    (void)close(p[0]);
}

static void two_retries(struct kube_client *c)
{
    struct kube_err e;
    assert_int_equal(get_pod(c, 0, false, &e), -EAGAIN);
}

static void test_retry_log_line(void **state)
{
    struct kube_client *c = client(TOO_MANY, 1);
    char out[8192];
    (void)state;
    capture(two_retries, c, out, sizeof(out));
    print_message("%s", out);
    assert_non_null(strstr(out, "msg=\"kube request failed, will retry\" method=GET "
                                "path=\"/api/v1/namespaces/ns/pods/p\" status=429 "
                                "reason=\"TooManyRequests\" retry_after_s=1 attempt=1 "
                                "delay_ms=1000"));
    assert_non_null(strstr(out, "msg=\"kube request failed, giving up\" method=GET "
                                "path=\"/api/v1/namespaces/ns/pods/p\" status=429 "
                                "reason=\"TooManyRequests\" retry_after_s=1 attempt=2 delay_ms=0"));
    assert_null(strstr(out, "s3cr3t"));
    assert_null(strstr(out, "secret-query"));
    assert_null(strstr(out, "1234")); /* nothing of the body */
    kube_client_free(c);
}

static void test_note_format(void **state)
{
    struct kube__retry_note n = {.method = "PUT",
                                 .url = "https://h:6443/apis/coordination.k8s.io/v1/namespaces/"
                                        "a/leases/l?fieldManager=x#frag",
                                 .status = 0,
                                 .reason = "Failed to connect \"x\"\\\n",
                                 .attempt = 3,
                                 .delay = 2500 * USEC_PER_MSEC,
                                 .suppressed = 7};
    char out[512], small[16], path[8];
    (void)state;
    (void)kube__retry_note_format(&n, out, sizeof(out));
    assert_string_equal(
        out, "method=PUT path=\"/apis/coordination.k8s.io/v1/namespaces/a/leases/"
             "l\" status=0 reason=\"Failed to connect \\\"x\\\"\\\\\\n\" retry_after_s=0 "
             "attempt=3 delay_ms=2500 suppressed=7");
    assert_int_equal(kube__retry_note_format(&n, small, sizeof(small)), sizeof(small) - 1);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    kube__url_path("http://h", path, sizeof(path));
    assert_string_equal(path, "/");
    kube__url_path("http://h/abcdefghij", path, sizeof(path));
    assert_string_equal(path, "/abcdef");
}

static void test_loglimit(void **state)
{
    struct kube__loglimit l;
    unsigned long sup = 99;
    usec_t t = 5 * USEC_PER_SEC;
    int allowed = 0;
    (void)state;
    kube__loglimit_init(&l);
    for (int i = 0; i < 1000; i++)
        allowed += kube__loglimit_allow(&l, t + (usec_t)i * 100, NULL);
    assert_int_equal(allowed, LIMIT_KUBE_LOG_BURST); /* 1000 in 0.1 s */
    assert_true(kube__loglimit_allow(&l, t + LIMIT_KUBE_LOG_WINDOW, &sup));
    assert_int_equal(sup, 1000 - LIMIT_KUBE_LOG_BURST);
    assert_true(kube__loglimit_allow(&l, t + LIMIT_KUBE_LOG_WINDOW + 1, &sup));
    assert_int_equal(sup, 0);
    kube__loglimit_done(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeout_cuts_hung_request),
        cmocka_unit_test(test_read_stall_cut_and_retried),
        cmocka_unit_test(test_no_retry_one_attempt),
        cmocka_unit_test(test_timeout_bounds_backoff),
        cmocka_unit_test(test_retry_log_line),
        cmocka_unit_test(test_note_format),
        cmocka_unit_test(test_loglimit),
        cmocka_unit_test(test_throttle_bounded),
        cmocka_unit_test(test_attempt_capped_by_client_timeout),
        cmocka_unit_test(test_handshake_failure_retried),
        cmocka_unit_test(test_nothing_sent),
        cmocka_unit_test(test_watch_cut_past_timeout),
        cmocka_unit_test(test_watch_cut_leaves_out_handler),
        cmocka_unit_test(test_watch_outlives_request_timeout),
        cmocka_unit_test(test_sockopt_user_timeout),
    };
    log_set_level(LOG_WARN);
    return cmocka_run_group_tests(tests, setup, teardown);
}
