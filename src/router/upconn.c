/* SPDX-License-Identifier: Apache-2.0 */
/* Upstream connections: connect with a timeout, writes with accounting, and a keep-alive
 * pool per ip:port whose idle members are watched for EOF and expire. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/xalloc.h"
#include "router/proxy_int.h"

struct wop {
    uv_write_t wr;
    size_t len;
    char data[];
};

static uint64_t ms(usec_t u)
{
    return (u + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
}

static void make_key(char *out, size_t size, const char *ip, uint16_t port)
{
    (void)snprintf(out, size, "%s|%u", ip, (unsigned)port);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct up_conn *u = h->data;
    if (--u->handles == 0)
        xfree(u);
}

static void pool_unlink(struct up_conn *u)
{
    struct proxy *p = u->proxy;
    if (!u->pooled)
        return;
    u->pooled = false;
    p->pooled--;
    if (u->prev) {
        u->prev->next = u->next;
    } else if (u->next) {
        (void)map_put(p->pool, u->key, u->next, NULL);
    } else {
        (void)map_remove(p->pool, u->key);
    }
    if (u->next)
        u->next->prev = u->prev;
    u->prev = u->next = NULL;
}

/* Closes u; with reset, by a reset (SO_LINGER 0) when libuv can (not while a shutdown
 * is under way: then its FIN went or goes first, and the close is an ordinary one). */
static void up_close(struct up_conn *u, bool reset)
{
    if (!u || u->closing)
        return;
    u->closing = true;
    pool_unlink(u);
    u->owner_kind = UP_NONE;
    u->owner = NULL;
    if (!reset || uv_tcp_close_reset(&u->tcp, on_handle_closed) < 0)
        uv_close((uv_handle_t *)&u->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&u->timer, on_handle_closed);
}

void upconn_close(struct up_conn *u)
{
    up_close(u, false);
}

void upconn_reset(struct up_conn *u)
{
    up_close(u, true);
}

static void on_connect_timeout(uv_timer_t *t)
{
    struct up_conn *u = t->data;
    struct px *x = u->owner_kind == UP_PX ? u->owner : NULL;
    upconn_close(u); /* the pending connect completes with UV_ECANCELED: ignored */
    if (x)
        proxy__px_connected(x, -ETIMEDOUT);
}

static void on_connected(uv_connect_t *c, int status)
{
    struct up_conn *u = c->data;
    if (u->closing)
        return;
    (void)uv_timer_stop(&u->timer);
    struct px *x = u->owner_kind == UP_PX ? u->owner : NULL;
    if (status < 0)
        upconn_close(u);
    else
        (void)uv_tcp_nodelay(&u->tcp, 1);
    if (x)
        proxy__px_connected(x, status);
}

static int parse_addr(const char *ip, uint16_t port, struct sockaddr_storage *ss)
{
    if (uv_ip4_addr(ip, port, (struct sockaddr_in *)ss) == 0)
        return 0;
    if (uv_ip6_addr(ip, port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return -EINVAL;
}

struct up_conn *upconn_connect(struct proxy *p, const char *ip, uint16_t port, struct px *x,
                               int *ret_err)
{
    struct sockaddr_storage ss;
    if (parse_addr(ip, port, &ss) < 0) {
        *ret_err = -EINVAL;
        return NULL;
    }
    struct up_conn *u = XNEW(struct up_conn);
    u->proxy = p;
    make_key(u->key, sizeof(u->key), ip, port);
    (void)uv_tcp_init(p->loop, &u->tcp);
    (void)uv_timer_init(p->loop, &u->timer);
    u->tcp.data = u->timer.data = u->connect.data = u;
    u->handles = 2;
    u->owner_kind = UP_PX;
    u->owner = x;
    int r = uv_tcp_connect(&u->connect, &u->tcp, (struct sockaddr *)&ss, on_connected);
    if (r < 0) {
        upconn_close(u);
        *ret_err = r;
        return NULL;
    }
    (void)uv_timer_start(&u->timer, on_connect_timeout, ms(p->o.connect_timeout), 0);
    return u;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct up_conn *u = h->data;
    (void)suggested;
    *b = uv_buf_init(u->proxy->read_buf, sizeof(u->proxy->read_buf));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct up_conn *u = s->data;
    if (n == 0 || u->closing)
        return;
    switch (u->owner_kind) {
    case UP_PX:
        proxy__px_up_read(u->owner, n, b->base);
        return;
    case UP_TUNNEL:
        proxy__tunnel_up_read(u->owner, n, b->base);
        return;
    case UP_NONE:
        upconn_close(u); /* idle: the upstream closed it or sent garbage */
        return;
    }
}

int upconn_read(struct up_conn *u, bool on)
{
    if (u->closing)
        return -EPIPE;
    if (on == u->reading)
        return 0;
    int r = on ? uv_read_start((uv_stream_t *)&u->tcp, on_alloc, on_read)
               : uv_read_stop((uv_stream_t *)&u->tcp);
    if (r >= 0)
        u->reading = on;
    return r;
}

static void on_write(uv_write_t *wr, int status)
{
    struct wop *w = container_of(wr, struct wop, wr);
    struct up_conn *u = wr->handle->data;
    u->queued -= w->len;
    xfree(w);
    if (u->closing)
        return;
    if (u->owner_kind == UP_PX)
        proxy__px_up_written(u->owner, status);
    else if (u->owner_kind == UP_TUNNEL)
        proxy__tunnel_up_written(u->owner, status);
}

/* With nothing queued, writes straight from the parts: one writev, no copy, no write
 * request, no poll re-arming. Returns the bytes written; the caller queues the rest
 * (errors too: uv_write reports them through on_write). */
static size_t try_write_now(struct up_conn *u, const struct str *parts, size_t n, size_t total)
{
    uv_buf_t bufs[8];
    if (u->queued || n > ARRAY_SIZE(bufs) || total > UINT32_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        bufs[i] = uv_buf_init((char *)parts[i].p, (unsigned)parts[i].len);
    int r = uv_try_write((uv_stream_t *)&u->tcp, bufs, (unsigned)n);
    if (r < 0)
        return 0;
    return (size_t)r < total ? (size_t)r : total;
}

int upconn_write(struct up_conn *u, const struct str *parts, size_t n)
{
    if (u->closing)
        return -EPIPE;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += parts[i].len;
    if (total == 0)
        return 0;
    size_t skip = try_write_now(u, parts, n, total);
    if (skip == total)
        return 0;
    total -= skip;
    struct wop *w = xmalloc(sizeof(*w) + total);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t from = skip < parts[i].len ? skip : parts[i].len;
        skip -= from;
        memcpy(w->data + off, parts[i].p + from, parts[i].len - from);
        off += parts[i].len - from;
    }
    w->len = total;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)total);
    int r = uv_write(&w->wr, (uv_stream_t *)&u->tcp, &b, 1, on_write);
    if (r < 0) {
        xfree(w);
        return r;
    }
    u->queued += total;
    return 0;
}

static void on_idle_timeout(uv_timer_t *t)
{
    upconn_close(t->data);
}

static void on_shut(uv_shutdown_t *req, int status)
{
    (void)status; /* UV_ECANCELED when the connection closes first */
    xfree(req);
}

int upconn_shutdown(struct up_conn *u)
{
    if (u->closing || u->shut)
        return 0;
    u->shut = true;
    uv_shutdown_t *req = XNEW(uv_shutdown_t);
    int r = uv_shutdown(req, (uv_stream_t *)&u->tcp, on_shut);
    if (r < 0)
        xfree(req);
    return r;
}

void upconn_release(struct up_conn *u)
{
    struct proxy *p = u->proxy;
    u->owner_kind = UP_NONE;
    u->owner = NULL;
    struct up_conn *head = map_get(p->pool, u->key);
    size_t n = 0;
    for (struct up_conn *c = head; c; c = c->next)
        n++;
    if (u->closing || u->shut || p->shutting_down || n >= p->o.pool_per_host ||
        p->pooled >= LIMIT_ROUTER_POOL_TOTAL || upconn_read(u, true) < 0) {
        upconn_close(u);
        return;
    }
    u->next = head;
    if (head)
        head->prev = u;
    u->prev = NULL;
    (void)map_put(p->pool, u->key, u, NULL);
    u->pooled = true;
    p->pooled++;
    (void)uv_timer_start(&u->timer, on_idle_timeout, ms(p->o.pool_idle), 0);
}

struct up_conn *upconn_take(struct proxy *p, const char *ip, uint16_t port)
{
    char key[ROUTE_IP_MAX + 8];
    make_key(key, sizeof(key), ip, port);
    struct up_conn *u = map_get(p->pool, key);
    if (!u)
        return NULL;
    pool_unlink(u);
    (void)uv_timer_stop(&u->timer);
    u->reused = true; /* still reading: its next bytes go to the new owner */
    return u;
}

void upconn_pool_clear(struct proxy *p)
{
    struct map_iter it;
    const char *key;
    void *v;
    /* Closing edits the map: collect the heads first. */
    size_t n = map_len(p->pool), i = 0;
    struct up_conn **heads = xcalloc(n ? n : 1, sizeof(*heads));
    map_foreach (p->pool, it, key, v)
        heads[i++] = v;
    for (i = 0; i < n; i++) {
        struct up_conn *c = heads[i];
        while (c) {
            struct up_conn *next = c->next;
            upconn_close(c);
            c = next;
        }
    }
    xfree(heads);
}
