/* SPDX-License-Identifier: Apache-2.0 */
/* The request multiplexer's lanes against a local HTTP/1.1 server that answers after a
 * delay the path names: a request on an idle lane runs on its caller's thread; a driver
 * whose transfer ends hands the lane to a waiter still in flight; many threads each get
 * their own answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "kube/mux.h"

static int srv_fd, srv_port;
static pthread_t srv_thread;

/* The tags of the requests the server has read, so that a test starts its second request
 * only once the first is on the wire (and so driven by its own thread). */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen_cond = PTHREAD_COND_INITIALIZER;
static char seen[8][64];
static int nseen;

static void saw(const char *tag)
{
    (void)pthread_mutex_lock(&seen_lock);
    (void)snprintf(seen[nseen % 8], sizeof(seen[0]), "%s", tag);
    nseen++;
    (void)pthread_cond_broadcast(&seen_cond);
    (void)pthread_mutex_unlock(&seen_lock);
}

/* Waits (10 s at most) until the server has read a request tagged tag. */
static void wait_seen(const char *tag)
{
    struct timespec until;
    bool found = false;
    (void)clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    (void)pthread_mutex_lock(&seen_lock);
    while (!found) {
        for (int i = 0; i < nseen && i < 8; i++)
            found = found || strcmp(seen[i], tag) == 0;
        if (!found && pthread_cond_timedwait(&seen_cond, &seen_lock, &until) != 0)
            break;
    }
    (void)pthread_mutex_unlock(&seen_lock);
    if (!found)
        fail_msg("the server never read request %s", tag);
}

static void seen_reset(void)
{
    (void)pthread_mutex_lock(&seen_lock);
    nseen = 0;
    (void)pthread_mutex_unlock(&seen_lock);
}

/* Serves one connection: each request's path is /<delay ms>/<tag>; the answer, after the
 * delay, is the tag. */
static void *conn_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char req[2048];
    size_t have = 0;
    for (;;) {
        ssize_t n = read(fd, req + have, sizeof(req) - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        req[have] = '\0';
        char *end = strstr(req, "\r\n\r\n");
        if (!end)
            continue;
        int ms = 0;
        char tag[64] = "";
        if (sscanf(req, "GET /%d/%63[^ ]", &ms, tag) != 2)
            break;
        saw(tag);
        usleep((useconds_t)ms * 1000);
        char resp[256];
        int len = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
                           strlen(tag), tag);
        if (write(fd, resp, (size_t)len) != len)
            break;
        size_t used = (size_t)(end + 4 - req);
        memmove(req, end + 4, have - used);
        have -= used;
    }
    close(fd);
    return NULL;
}

static void *srv_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept(srv_fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        pthread_t t;
        if (pthread_create(&t, NULL, conn_main, (void *)(intptr_t)fd) != 0)
            abort(); /* not an assert: this is not the test's thread */
        pthread_detach(t);
    }
}

static int setup(void **state)
{
    (void)state;
    srv_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(srv_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(srv_fd, 64), 0);
    socklen_t al = sizeof(a);
    getsockname(srv_fd, (struct sockaddr *)&a, &al);
    srv_port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&srv_thread, NULL, srv_main, NULL), 0);
    pthread_detach(srv_thread);
    return 0;
}

/* One request: its answer, the thread its body arrived on and when it returned. */
struct call {
    struct kube__mux *m;
    int delay_ms;
    char tag[32];
    char got[64];
    size_t got_len;
    pthread_t caller, body_thread;
    CURLcode cc;
    long status;
    usec_t started, returned;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct call *c = arg;
    size_t len = size * n;
    c->body_thread = pthread_self();
    if (c->got_len + len < sizeof(c->got)) {
        memcpy(c->got + c->got_len, p, len);
        c->got_len += len;
        c->got[c->got_len] = '\0';
    }
    return len;
}

static void *call_main(void *arg)
{
    struct call *c = arg;
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/%d/%s", srv_port, c->delay_ms, c->tag);
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    /* HTTP/1.1 only: a transfer does not wait for a busy connection to turn out to be
     * HTTP/2 (CURLOPT_PIPEWAIT), it opens one of its own. */
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    c->caller = pthread_self();
    c->started = clock_now();
    c->cc = kube__mux_perform(c->m, h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &c->status);
    c->returned = clock_now();
    curl_easy_cleanup(h);
    return NULL;
}

static void assert_answered(const struct call *c)
{
    assert_int_equal(c->cc, CURLE_OK);
    assert_int_equal(c->status, 200);
    assert_string_equal(c->got, c->tag);
}

/* Alone on an idle lane, a request runs on the thread that asked: no thread switch. */
static void test_idle_lane_runs_on_caller(void **state)
{
    (void)state;
    struct kube__mux *m = kube__mux_new(1, 8);
    for (int i = 0; i < 3; i++) {
        struct call c = {.m = m, .delay_ms = 0};
        snprintf(c.tag, sizeof(c.tag), "alone-%d", i);
        call_main(&c);
        assert_answered(&c);
        assert_true(pthread_equal(c.body_thread, c.caller));
    }
    kube__mux_free(m);
}

/* A drives the lane for its 800 ms request; B's 2 s request joins it. When A's ends, A
 * returns at once and B takes over the lane: B's answer arrives on B's own thread. */
static void test_driver_hands_off(void **state)
{
    (void)state;
    struct kube__mux *m = kube__mux_new(1, 8);
    struct call a = {.m = m, .delay_ms = 800, .tag = "ho-a"};
    struct call b = {.m = m, .delay_ms = 2000, .tag = "ho-b"};
    pthread_t ta, tb;
    seen_reset();
    assert_int_equal(pthread_create(&ta, NULL, call_main, &a), 0);
    wait_seen("ho-a"); /* A drives: only a driver sends */
    assert_int_equal(pthread_create(&tb, NULL, call_main, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_answered(&a);
    assert_answered(&b);
    assert_true(pthread_equal(a.body_thread, a.caller));
    assert_true(pthread_equal(b.body_thread, b.caller));
    /* A did not wait for B's transfer. */
    assert_true(b.returned >= a.returned + 500 * USEC_PER_MSEC);
    kube__mux_free(m);
}

/* One round of test_waiter_served_by_driver: B's time from its call to its return. */
static usec_t waiter_round(int round)
{
    struct kube__mux *m = kube__mux_new(1, 8);
    struct call a = {.m = m, .delay_ms = 1500};
    struct call b = {.m = m, .delay_ms = 0};
    pthread_t ta, tb;
    (void)snprintf(a.tag, sizeof(a.tag), "ws-a%d", round);
    (void)snprintf(b.tag, sizeof(b.tag), "ws-b%d", round);
    seen_reset();
    assert_int_equal(pthread_create(&ta, NULL, call_main, &a), 0);
    wait_seen(a.tag);
    usleep(300 * 1000); /* past curl's own short timers: A's poll waits for its bound */
    assert_int_equal(pthread_create(&tb, NULL, call_main, &b), 0);
    pthread_join(tb, NULL);
    pthread_join(ta, NULL);
    assert_answered(&a);
    assert_answered(&b);
    assert_true(pthread_equal(b.body_thread, a.caller));
    assert_true(b.returned + 500 * USEC_PER_MSEC < a.returned);
    kube__mux_free(m);
    return b.returned - b.started;
}

/* B's short request joins the lane A drives for a long one: B's answer comes through A's
 * thread, and B returns without waiting for A, and without waiting for A's poll to end by
 * itself (a second at most: 700 ms here; B's submission wakes it). Three rounds at most,
 * for a loaded machine: a lost wake-up is slow in every one. */
static void test_waiter_served_by_driver(void **state)
{
    (void)state;
    usec_t best = waiter_round(0);
    for (int round = 1; round < 3 && best >= 400 * USEC_PER_MSEC; round++) {
        usec_t t = waiter_round(round);
        best = t < best ? t : best;
    }
    assert_true(best < 400 * USEC_PER_MSEC);
}

/* A handle curl refuses (it is in another multi handle) fails its caller alone: the lane
 * is left idle, and the next request drives it. */
static void test_refused_handle(void **state)
{
    (void)state;
    struct kube__mux *m = kube__mux_new(1, 8);
    CURLM *other = curl_multi_init();
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, "http://127.0.0.1:1/");
    assert_int_equal(curl_multi_add_handle(other, h), CURLM_OK);
    assert_int_equal(kube__mux_perform(m, h), CURLE_FAILED_INIT);
    curl_multi_remove_handle(other, h);
    curl_easy_cleanup(h);
    curl_multi_cleanup(other);
    struct call c = {.m = m, .delay_ms = 0, .tag = "after"};
    call_main(&c);
    assert_answered(&c);
    assert_true(pthread_equal(c.body_thread, c.caller));
    kube__mux_free(m);
}

#define THREADS 16
#define ROUNDS  20

struct runner {
    struct kube__mux *m;
    int id;
    atomic_int *wrong;
};

static void *runner_main(void *arg)
{
    struct runner *r = arg;
    for (int i = 0; i < ROUNDS; i++) {
        struct call c = {.m = r->m, .delay_ms = (r->id * 7 + i * 3) % 11};
        snprintf(c.tag, sizeof(c.tag), "t%d-r%d", r->id, i);
        call_main(&c);
        if (c.cc != CURLE_OK || c.status != 200 || strcmp(c.got, c.tag) != 0)
            atomic_fetch_add(r->wrong, 1);
    }
    return NULL;
}

/* Threads come and go on two lanes, each driving in turn: every request gets its own
 * answer, and none is left without a driver (the test would hang). */
static void test_many_threads(void **state)
{
    (void)state;
    struct kube__mux *m = kube__mux_new(2, 8);
    atomic_int wrong = 0;
    struct runner r[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        r[i] = (struct runner){.m = m, .id = i, .wrong = &wrong};
        assert_int_equal(pthread_create(&t[i], NULL, runner_main, &r[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&wrong), 0);
    kube__mux_free(m);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_lane_runs_on_caller),
        cmocka_unit_test(test_driver_hands_off),
        cmocka_unit_test(test_waiter_served_by_driver),
        cmocka_unit_test(test_refused_handle),
        cmocka_unit_test(test_many_threads),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
