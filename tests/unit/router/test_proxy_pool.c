/* SPDX-License-Identifier: Apache-2.0 */
/* The proxy's fast path on a real loop: keep-alive requests share one upstream
 * connection, 40 concurrent exchanges are served again from the pool without a single
 * reconnect, the upstream sees Host ip:port, and the cached per-Sandbox target follows
 * the store (not Ready: 503 at once; Ready again: 200). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"
#include "http/server.h"
#include "kube/store.h"
#include "router/proxy.h"
#include "support/http_client.h"

#define T_IO    (5 * USEC_PER_SEC)
#define NCONC   40
#define MAX_UPS 256

/* ---- A raw upstream: counts accepted connections; answers each request with its Host
 * header as the body, holding answers until `barrier` requests are pending. ---------- */

struct up {
    uv_tcp_t tcp;
    char buf[4096];
    size_t len;
    char host[64][64]; /* Host of each pending request */
    int pending;
};

struct fx {
    uv_loop_t loop;
    uv_async_t stop;
    uv_tcp_t listener;
    pthread_t th;
    struct kube_store *store;
    struct proxy *proxy;
    struct http_router *router;
    struct http_server *server;
    uint16_t port, up_port;
    struct up *ups[MAX_UPS];
    int nups, barrier, total_pending;
    atomic_int accepts;
};

static void on_up_closed(uv_handle_t *h)
{
    xfree(h->data);
}

static void up_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    struct up *u = h->data;
    (void)s;
    *b = uv_buf_init(u->buf + u->len, (unsigned)(sizeof(u->buf) - u->len));
}

static void on_up_written(uv_write_t *w, int status)
{
    (void)status;
    xfree(w);
}

static void up_answer(struct up *u, const char *host)
{
    struct {
        uv_write_t w;
        char text[256];
    } *o = xmalloc(sizeof(*o));
    int n = snprintf(o->text, sizeof(o->text), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(host), host);
    uv_buf_t b = uv_buf_init(o->text, (unsigned)n);
    assert_int_equal(uv_write(&o->w, (uv_stream_t *)&u->tcp, &b, 1, on_up_written), 0);
}

static void release_all(struct fx *f)
{
    for (int i = 0; i < f->nups; i++) {
        struct up *u = f->ups[i];
        for (int k = 0; u && k < u->pending; k++)
            up_answer(u, u->host[k]);
        if (u)
            u->pending = 0;
    }
    f->total_pending = 0;
}

static void up_request(struct fx *f, struct up *u, const char *head, size_t len)
{
    const char *h = memmem(head, len, "\r\nHost: ", 8);
    assert_non_null(h);
    h += 8;
    const char *e = memmem(h, len - (size_t)(h - head), "\r\n", 2);
    assert_true(u->pending < 64 && e && e - h < 64);
    memcpy(u->host[u->pending], h, (size_t)(e - h));
    u->host[u->pending++][e - h] = '\0';
    if (++f->total_pending >= f->barrier)
        release_all(f);
}

static void up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct up *u = s->data;
    struct fx *f = s->loop->data;
    (void)b;
    if (n < 0) {
        for (int i = 0; i < f->nups; i++)
            if (f->ups[i] == u)
                f->ups[i] = NULL;
        f->total_pending -= u->pending;
        uv_close((uv_handle_t *)s, on_up_closed);
        return;
    }
    u->len += (size_t)n;
    char *end;
    while ((end = memmem(u->buf, u->len, "\r\n\r\n", 4))) {
        size_t used = (size_t)(end - u->buf) + 4;
        up_request(f, u, u->buf, used);
        memmove(u->buf, u->buf + used, u->len - used);
        u->len -= used;
    }
}

static void up_accept(uv_stream_t *srv, int status)
{
    struct fx *f = srv->loop->data;
    assert_int_equal(status, 0);
    assert_true(f->nups < MAX_UPS);
    struct up *u = XNEW(struct up);
    (void)uv_tcp_init(srv->loop, &u->tcp);
    u->tcp.data = u;
    assert_int_equal(uv_accept(srv, (uv_stream_t *)&u->tcp), 0);
    f->ups[f->nups++] = u;
    atomic_fetch_add(&f->accepts, 1);
    assert_int_equal(uv_read_start((uv_stream_t *)&u->tcp, up_alloc, up_read), 0);
}

/* ---- Fixture: proxy + server + upstream on a loop thread ---------------------------- */

static json_t *sandbox(bool ready)
{
    return json_pack("{s:{s:s,s:s,s:s},s:{s:[s],s:[{s:s,s:s,s:s}]}}", "metadata", "name", "box",
                     "namespace", "ns", "uid", "u1", "status", "podIPs", "127.0.0.1", "conditions",
                     "type", "Ready", "status", ready ? "True" : "False", "reason",
                     ready ? "DependenciesReady" : "PodNotReady");
}

static void *loop_main(void *arg)
{
    struct fx *f = arg;
    (void)uv_run(&f->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void on_stop(uv_async_t *a)
{
    struct fx *f = a->data;
    proxy_free(f->proxy);
    http_server_shutdown(f->server, 0, NULL, NULL); /* freed once the loop is done */
    for (int i = 0; i < f->nups; i++)
        if (f->ups[i])
            uv_close((uv_handle_t *)&f->ups[i]->tcp, on_up_closed);
    uv_close((uv_handle_t *)&f->listener, NULL);
    uv_close((uv_handle_t *)&f->stop, NULL);
}

static struct fx *fx_start(int barrier)
{
    struct fx *f = XNEW(struct fx);
    f->barrier = barrier;
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->loop.data = f;
    f->store = kube_store_new();
    assert_int_equal(kube_store_put(f->store, sandbox(true), NULL), 0);
    struct proxy_opts po = {.store = f->store, .allow_loopback = true};
    f->proxy = proxy_new(&f->loop, &po);
    f->router = http_router_new();
    assert_int_equal(proxy_register(f->proxy, f->router), 0);
    struct http_server_opts so = {.router = f->router};
    assert_int_equal(http_server_new(&f->loop, &so, &f->server), 0);
    f->port = http_server_port(f->server);
    struct sockaddr_in a;
    (void)uv_ip4_addr("127.0.0.1", 0, &a);
    (void)uv_tcp_init(&f->loop, &f->listener);
    assert_int_equal(uv_tcp_bind(&f->listener, (struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&f->listener, 128, up_accept), 0);
    int len = sizeof(a);
    assert_int_equal(uv_tcp_getsockname(&f->listener, (struct sockaddr *)&a, &len), 0);
    f->up_port = ntohs(a.sin_port);
    assert_int_equal(uv_async_init(&f->loop, &f->stop, on_stop), 0);
    f->stop.data = f;
    assert_int_equal(pthread_create(&f->th, NULL, loop_main, f), 0);
    return f;
}

static void fx_stop(struct fx *f)
{
    assert_int_equal(uv_async_send(&f->stop), 0);
    assert_int_equal(pthread_join(f->th, NULL), 0);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    http_server_free(f->server);
    http_router_free(f->router);
    kube_store_free(f->store);
    xfree(f);
}

static void send_get(struct fx *f, struct test_http_conn *c)
{
    char raw[256];
    (void)snprintf(raw, sizeof(raw), "GET /s/ns/box/%u/x HTTP/1.1\r\nHost: h\r\n\r\n",
                   (unsigned)f->up_port);
    assert_int_equal(test_http_send_str(c, raw), 0);
}

/* Reads one answer on c: its status, and for 200 the body must be Host ip:port. */
static int read_answer(struct fx *f, struct test_http_conn *c)
{
    struct test_http_resp r;
    char want[64];
    test_http_resp_init(&r);
    assert_int_equal(test_http_read(c, false, T_IO, &r), 0);
    (void)snprintf(want, sizeof(want), "127.0.0.1:%u", (unsigned)f->up_port);
    if (r.status == 200)
        assert_string_equal(buf_str(&r.body), want);
    int status = r.status;
    test_http_resp_done(&r);
    return status;
}

/* ---- Tests ----------------------------------------------------------------------------- */

static void test_keepalive_one_upstream(void **state)
{
    (void)state;
    struct fx *f = fx_start(1);
    struct test_http_conn c;
    assert_int_equal(test_http_connect(f->port, &c), 0);
    for (int i = 0; i < 20; i++) {
        send_get(f, &c);
        assert_int_equal(read_answer(f, &c), 200);
    }
    assert_int_equal(atomic_load(&f->accepts), 1);
    test_http_close(&c);
    fx_stop(f);
}

/* NCONC exchanges are in flight at once (the upstream answers only when all arrived), so
 * NCONC upstream connections are needed; later rounds must find all of them pooled. */
static void test_concurrent_rounds_reuse(void **state)
{
    (void)state;
    struct fx *f = fx_start(NCONC);
    struct test_http_conn *c = xcalloc(NCONC, sizeof(*c));
    for (int i = 0; i < NCONC; i++)
        assert_int_equal(test_http_connect(f->port, &c[i]), 0);
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < NCONC; i++)
            send_get(f, &c[i]);
        for (int i = 0; i < NCONC; i++)
            assert_int_equal(read_answer(f, &c[i]), 200);
    }
    assert_int_equal(atomic_load(&f->accepts), NCONC);
    for (int i = 0; i < NCONC; i++)
        test_http_close(&c[i]);
    xfree(c);
    fx_stop(f);
}

static void test_target_follows_store(void **state)
{
    (void)state;
    struct fx *f = fx_start(1);
    struct test_http_conn c;
    assert_int_equal(test_http_connect(f->port, &c), 0);
    send_get(f, &c);
    assert_int_equal(read_answer(f, &c), 200);
    assert_int_equal(kube_store_put(f->store, sandbox(false), NULL), 0);
    send_get(f, &c);
    assert_int_equal(read_answer(f, &c), 503);
    assert_int_equal(kube_store_put(f->store, sandbox(true), NULL), 0);
    send_get(f, &c);
    assert_int_equal(read_answer(f, &c), 200);
    assert_int_equal(kube_store_remove(f->store, "ns/box", NULL), 0);
    send_get(f, &c);
    assert_int_equal(read_answer(f, &c), 404);
    test_http_close(&c);
    fx_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keepalive_one_upstream),
        cmocka_unit_test(test_concurrent_rounds_reuse),
        cmocka_unit_test(test_target_follows_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
