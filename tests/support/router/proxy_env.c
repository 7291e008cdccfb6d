/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <string.h>

#include <arpa/inet.h>

#include "common/xalloc.h"
#include "support/router/proxy_env.h"

json_t *proxy_env_sandbox(bool ready)
{
    return json_pack("{s:{s:s,s:s,s:s},s:{s:[s],s:[{s:s,s:s,s:s}]}}", "metadata", "name", "box",
                     "namespace", "ns", "uid", "u1", "status", "podIPs", "127.0.0.1", "conditions",
                     "type", "Ready", "status", ready ? "True" : "False", "reason",
                     ready ? "DependenciesReady" : "PodNotReady");
}

/* ---- The upstream ------------------------------------------------------------------- */

struct up_write {
    uv_write_t w;
    char data[];
};

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    xfree(container_of(w, struct up_write, w));
}

void proxy_env_send(struct proxy_env_up *u, const char *p, size_t n)
{
    struct up_write *o = xmalloc(sizeof(*o) + n);
    memcpy(o->data, p, n);
    uv_buf_t b = uv_buf_init(o->data, (unsigned)n);
    if (uv_write(&o->w, (uv_stream_t *)&u->tcp, &b, 1, on_written) < 0)
        xfree(o);
}

void proxy_env_send_str(struct proxy_env_up *u, const char *s)
{
    proxy_env_send(u, s, strlen(s));
}

static void on_up_closed(uv_handle_t *h)
{
    struct proxy_env_up *u = h->data;
    xfree(u->data);
    xfree(u);
}

void proxy_env_drop(struct proxy_env_up *u)
{
    struct proxy_env *e = u->env;
    if (uv_is_closing((uv_handle_t *)&u->tcp))
        return;
    for (int i = 0; i < e->nups; i++)
        if (e->ups[i] == u)
            e->ups[i] = NULL;
    if (e->o.drop)
        e->o.drop(u);
    uv_close((uv_handle_t *)&u->tcp, on_up_closed);
}

void proxy_env_close_listener(struct proxy_env *e)
{
    if (!e->listening)
        return;
    e->listening = false;
    uv_close((uv_handle_t *)&e->listener, NULL);
}

static void up_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    struct proxy_env_up *u = h->data;
    (void)s;
    *b = uv_buf_init(u->buf + u->len, (unsigned)(sizeof(u->buf) - u->len - 1));
}

static void up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct proxy_env_up *u = s->data;
    (void)b;
    if (n < 0) {
        proxy_env_drop(u);
        return;
    }
    u->len += (size_t)n;
    u->buf[u->len] = '\0';
    char *end;
    while (!uv_is_closing((uv_handle_t *)s) && (end = memmem(u->buf, u->len, "\r\n\r\n", 4))) {
        size_t used = (size_t)(end - u->buf) + 4;
        u->nth++;
        u->env->o.request(u, u->buf, used);
        memmove(u->buf, u->buf + used, u->len - used);
        u->len -= used;
        u->buf[u->len] = '\0';
    }
}

static void up_accept(uv_stream_t *srv, int status)
{
    struct proxy_env *e = srv->data;
    assert_int_equal(status, 0);
    assert_true(e->nups < PROXY_ENV_UPS);
    struct proxy_env_up *u = XNEW(struct proxy_env_up);
    u->env = e;
    u->data = e->o.up_data ? xcalloc(1, e->o.up_data) : NULL;
    (void)uv_tcp_init(srv->loop, &u->tcp);
    u->tcp.data = u;
    assert_int_equal(uv_accept(srv, (uv_stream_t *)&u->tcp), 0);
    e->ups[e->nups++] = u;
    atomic_fetch_add(&e->accepts, 1);
    assert_int_equal(uv_read_start((uv_stream_t *)&u->tcp, up_alloc, up_read), 0);
}

static void listen_upstream(struct proxy_env *e)
{
    struct sockaddr_in a;
    (void)uv_ip4_addr("127.0.0.1", 0, &a);
    (void)uv_tcp_init(&e->loop, &e->listener);
    e->listener.data = e;
    assert_int_equal(uv_tcp_bind(&e->listener, (struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&e->listener, 128, up_accept), 0);
    int len = sizeof(a);
    assert_int_equal(uv_tcp_getsockname(&e->listener, (struct sockaddr *)&a, &len), 0);
    e->up_port = ntohs(a.sin_port);
    e->listening = true;
}

/* ---- The loop thread ------------------------------------------------------------------ */

static void *loop_main(void *arg)
{
    struct proxy_env *e = arg;
    (void)uv_run(&e->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void on_stop(uv_async_t *a)
{
    struct proxy_env *e = a->data;
    proxy_free(e->proxy);
    http_server_shutdown(e->server, 0, NULL, NULL); /* freed once the loop is done */
    for (int i = 0; i < e->nups; i++)
        if (e->ups[i])
            proxy_env_drop(e->ups[i]);
    proxy_env_close_listener(e);
    uv_close((uv_handle_t *)&e->stop, NULL);
}

void proxy_env_start(struct proxy_env *e, const struct proxy_env_opts *o)
{
    static const struct proxy_env_opts none;
    e->o = o ? *o : none;
    e->data = e->o.data;
    assert_int_equal(uv_loop_init(&e->loop), 0);
    e->loop.data = e;
    e->store = kube_store_new();
    assert_int_equal(kube_store_put(e->store, proxy_env_sandbox(true), NULL), 0);
    struct proxy_opts po = e->o.proxy;
    po.store = e->store;
    po.allow_loopback = true;
    e->proxy = proxy_new(&e->loop, &po);
    e->router = http_router_new();
    assert_int_equal(proxy_register(e->proxy, e->router), 0);
    struct http_server_opts so = {.router = e->router, .write_queue = e->o.write_queue};
    assert_int_equal(http_server_new(&e->loop, &so, &e->server), 0);
    e->port = http_server_port(e->server);
    if (e->o.request)
        listen_upstream(e);
    assert_int_equal(uv_async_init(&e->loop, &e->stop, on_stop), 0);
    e->stop.data = e;
    assert_int_equal(pthread_create(&e->th, NULL, loop_main, e), 0);
}

void proxy_env_stop(struct proxy_env *e)
{
    assert_int_equal(uv_async_send(&e->stop), 0);
    assert_int_equal(pthread_join(e->th, NULL), 0);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    http_server_free(e->server);
    http_router_free(e->router);
    kube_store_free(e->store);
}
