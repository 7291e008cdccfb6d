/* SPDX-License-Identifier: Apache-2.0 */
/* Server lifecycle: listening socket, graceful shutdown, cross-thread posting and the
 * run-on-its-own-thread convenience. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "common/limits.h"
#include "common/xalloc.h"
#include "http/server_int.h"

static void fill_defaults(struct http_server_opts *o)
{
    if (!o->header_timeout)
        o->header_timeout = LIMIT_HTTP_HEADER_TIMEOUT;
    if (!o->body_timeout)
        o->body_timeout = LIMIT_HTTP_BODY_TIMEOUT;
    if (!o->idle_timeout)
        o->idle_timeout = LIMIT_HTTP_IDLE_TIMEOUT;
    if (!o->max_connections)
        o->max_connections = LIMIT_HTTP_CONNECTIONS;
    if (!o->max_body)
        o->max_body = LIMIT_HTTP_BODY;
    if (!o->write_queue)
        o->write_queue = LIMIT_HTTP_WRITE_QUEUE;
    if (!o->stream_stall)
        o->stream_stall = LIMIT_HTTP_STREAM_STALL;
    if (!o->write_stall)
        o->write_stall = LIMIT_HTTP_WRITE_STALL;
    if (o->backlog <= 0)
        o->backlog = 511;
}

/* Creates, binds and listens a socket with plain syscalls, so every failure happens
 * before any libuv handle exists. Returns the fd or a negative errno. */
static int listen_socket(const char *host, uint16_t port, int backlog, uint16_t *ret_port)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) == 0)
        sl = sizeof(struct sockaddr_in);
    else if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) == 0)
        sl = sizeof(struct sockaddr_in6);
    else
        return -EINVAL;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int one = 1, zero = 0, r = 0;
    /* "::" takes IPv4 too (dual-stack, as Go's listeners), whatever the host's
     * net.ipv6.bindv6only says */
    if (ss.ss_family == AF_INET6 &&
        IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr) &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
        r = -errno;
    if (r < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, backlog) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        r = -errno;
    if (r < 0) {
        (void)close(fd);
        return r;
    }
    *ret_port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                              : ((struct sockaddr_in6 *)&ss)->sin6_port);
    return fd;
}

static void server_release(struct http_server *s)
{
    xfree((char *)s->opts.host);
    xfree(s->read_buf);
    (void)pthread_mutex_destroy(&s->post_lock);
    xfree(s);
}

static void on_server_handle_closed(uv_handle_t *h)
{
    struct http_server *s = h->data;
    if (--s->handles_open > 0)
        return;
    if (s->free_on_close) {
        server_release(s);
        return;
    }
    if (s->done)
        s->done(s, s->done_ctx);
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct http_server *s = listener->data;
    if (status < 0)
        return;
    http__conn_accept(s);
}

static void run_posted(struct http_post_item *it)
{
    while (it) {
        struct http_post_item *next = it->next;
        it->fn(it->arg);
        xfree(it);
        it = next;
    }
}

static void on_async(uv_async_t *a)
{
    struct http_server *s = a->data;
    (void)pthread_mutex_lock(&s->post_lock);
    struct http_post_item *it = s->post_head;
    s->post_head = s->post_tail = NULL;
    (void)pthread_mutex_unlock(&s->post_lock);
    run_posted(it);
}

static void init_handles(struct http_server *s)
{
    (void)uv_tcp_init(s->loop, &s->listener);
    (void)uv_timer_init(s->loop, &s->shutdown_timer);
    (void)uv_async_init(s->loop, &s->async, on_async);
    s->listener.data = s->shutdown_timer.data = s->async.data = s;
    s->handles_open = 3;
}

static void close_handles(struct http_server *s)
{
    if (!uv_is_closing((uv_handle_t *)&s->listener))
        uv_close((uv_handle_t *)&s->listener, on_server_handle_closed);
    uv_close((uv_handle_t *)&s->shutdown_timer, on_server_handle_closed);
    uv_close((uv_handle_t *)&s->async, on_server_handle_closed);
}

int http_server_new(uv_loop_t *loop, const struct http_server_opts *opts, struct http_server **ret)
{
    struct http_server_opts o = *opts;
    fill_defaults(&o);
    uint16_t port = 0;
    int fd = listen_socket(o.host ? o.host : "127.0.0.1", o.port, o.backlog, &port);
    if (fd < 0)
        return fd;
    struct http_server *s = XNEW(struct http_server);
    s->loop = loop;
    s->opts = o;
    s->opts.host = xstrdup(o.host ? o.host : "127.0.0.1");
    s->port = port;
    s->read_buf = xmalloc(LIMIT_HTTP_READ_CHUNK);
    (void)pthread_mutex_init(&s->post_lock, NULL);
    init_handles(s);
    int r = uv_tcp_open(&s->listener, fd);
    if (r < 0)
        (void)close(fd);
    if (r >= 0)
        r = uv_listen((uv_stream_t *)&s->listener, o.backlog, on_connection);
    if (r < 0) {
        s->free_on_close = true;
        close_handles(s);
        return r;
    }
    *ret = s;
    return 0;
}

uint16_t http_server_port(const struct http_server *s)
{
    return s->port;
}

size_t http_server_connections(const struct http_server *s)
{
    return atomic_load_explicit(&s->nconns, memory_order_relaxed);
}

/* Once no connection is left: run what was posted, refuse more, close our handles. */
static void maybe_finish(struct http_server *s)
{
    if (!s->shutting_down || atomic_load_explicit(&s->nconns, memory_order_relaxed) > 0 ||
        s->finishing)
        return;
    s->finishing = true;
    (void)uv_timer_stop(&s->shutdown_timer);
    (void)pthread_mutex_lock(&s->post_lock);
    struct http_post_item *it = s->post_head;
    s->post_head = s->post_tail = NULL;
    s->post_closed = true;
    (void)pthread_mutex_unlock(&s->post_lock);
    run_posted(it);
    close_handles(s);
}

void http__server_conn_gone(struct http_server *s)
{
    (void)atomic_fetch_sub_explicit(&s->nconns, 1, memory_order_relaxed);
    maybe_finish(s);
}

static void on_grace_expired(uv_timer_t *t)
{
    struct http_server *s = t->data;
    for (struct http_conn *c = s->conns; c; c = c->next)
        http__conn_close(c);
}

void http_server_shutdown(struct http_server *s, usec_t grace, http_server_done_fn *done, void *ctx)
{
    if (s->shutting_down)
        return;
    s->shutting_down = true;
    s->done = done;
    s->done_ctx = ctx;
    uv_close((uv_handle_t *)&s->listener, on_server_handle_closed);
    for (struct http_conn *c = s->conns; c; c = c->next)
        http__conn_drain(c);
    (void)uv_timer_start(&s->shutdown_timer, on_grace_expired,
                         (grace + USEC_PER_MSEC - 1) / USEC_PER_MSEC, 0);
    maybe_finish(s);
}

void http_server_free(struct http_server *s)
{
    if (!s)
        return;
    ASSERT(s->handles_open == 0);
    server_release(s);
}

int http_server_post(struct http_server *s, http_post_fn *fn, void *arg)
{
    struct http_post_item *it = XNEW(struct http_post_item);
    it->fn = fn;
    it->arg = arg;
    (void)pthread_mutex_lock(&s->post_lock);
    if (s->post_closed) {
        (void)pthread_mutex_unlock(&s->post_lock);
        xfree(it);
        return -ESHUTDOWN;
    }
    if (s->post_tail)
        s->post_tail->next = it;
    else
        s->post_head = it;
    s->post_tail = it;
    (void)uv_async_send(&s->async);
    (void)pthread_mutex_unlock(&s->post_lock);
    return 0;
}

/* ---- Running on a thread ------------------------------------------------------------ */

struct http_server_thread {
    uv_loop_t loop;
    uv_async_t stop;
    struct http_server *server;
    pthread_t thread;
    /* Set by the stopping thread before uv_async_send, read on the loop thread: atomic,
     * because the async handle's ordering lives in libuv (invisible to TSan). */
    _Atomic usec_t grace;
};

static void *thread_main(void *arg)
{
    struct http_server_thread *t = arg;
    (void)uv_run(&t->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void on_stop(uv_async_t *a)
{
    struct http_server_thread *t = a->data;
    uv_close((uv_handle_t *)&t->stop, NULL);
    http_server_shutdown(t->server, atomic_load_explicit(&t->grace, memory_order_acquire), NULL,
                         NULL);
}

int http_server_start_thread(const struct http_server_opts *opts, struct http_server_thread **ret)
{
    struct http_server_thread *t = XNEW(struct http_server_thread);
    int r = uv_loop_init(&t->loop);
    if (r < 0) {
        xfree(t);
        return r;
    }
    r = http_server_new(&t->loop, opts, &t->server);
    if (r >= 0) {
        (void)uv_async_init(&t->loop, &t->stop, on_stop);
        t->stop.data = t;
        r = -pthread_create(&t->thread, NULL, thread_main, t);
        if (r < 0) /* unwind on this thread: close everything and let it run down */
            on_stop(&t->stop);
    }
    if (r < 0) {
        (void)uv_run(&t->loop, UV_RUN_DEFAULT);
        if (t->server && t->server->handles_open == 0)
            http_server_free(t->server);
        (void)uv_loop_close(&t->loop);
        xfree(t);
        return r;
    }
    *ret = t;
    return 0;
}

struct http_server *http_server_thread_server(struct http_server_thread *t)
{
    return t->server;
}

uint16_t http_server_thread_port(const struct http_server_thread *t)
{
    return http_server_port(t->server);
}

void http_server_stop_thread(struct http_server_thread *t, usec_t grace)
{
    if (!t)
        return;
    atomic_store_explicit(&t->grace, grace, memory_order_release);
    (void)uv_async_send(&t->stop);
    (void)pthread_join(t->thread, NULL);
    http_server_free(t->server);
    (void)uv_loop_close(&t->loop);
    xfree(t);
}

void http__server_queued_add(struct http_server *s, ptrdiff_t n)
{
    if (n >= 0)
        (void)atomic_fetch_add_explicit(&s->queued, (size_t)n, memory_order_relaxed);
    else
        (void)atomic_fetch_sub_explicit(&s->queued, (size_t)-n, memory_order_relaxed);
}

size_t http_server_queued(const struct http_server *s)
{
    return atomic_load_explicit(&s->queued, memory_order_relaxed);
}
