/* SPDX-License-Identifier: Apache-2.0 */
/* Byte tunnels after 101 Switching Protocols (WebSocket and other upgrades): both ways
 * with back-pressure, half-close passed on (a client's cut-off input as a reset
 * instead), an idle timeout, and a list for shutdown. */
#include <errno.h>
#include <string.h>

#include "common/dlist.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "router/activity_track.h"
#include "router/proxy_int.h"

struct tunnel {
    uv_tcp_t client;
    uv_timer_t timer;
    uv_shutdown_t client_shut, up_shut;
    struct proxy *p;
    struct up_conn *up;
    struct tunnel *prev, *next;
    struct buf early;     /* upstream bytes that came with the 101 */
    struct http_cut *cut; /* the client connection's (a reference; NULL: none) */
    int handles;
    size_t client_queued;
    usec_t last_activity;
    bool client_open, client_reading, up_reading, client_eof, up_eof, closing;
    bool active; /* counted by the activity tracker (activity_begin said so) */
    char sandbox[ROUTE_NAME_MAX * 2 + 2];
};

struct cwop {
    uv_write_t wr;
    struct tunnel *t;
    size_t len;
    char data[];
};

static void tunnel_close(struct tunnel *t);
static void client_read(struct tunnel *t, bool on);

static uint64_t ms(usec_t u)
{
    return (u + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
}

/* One of what the tunnel waits for before it is freed has ended: its handles, and the
 * upstream shutdown request it holds (whose callback libuv runs, cancelled, when the
 * upstream handle closes, possibly after the tunnel's own handles have closed). */
static void tunnel_unref(struct tunnel *t)
{
    if (--t->handles > 0)
        return;
    buf_done(&t->early);
    http_cut_unref(t->cut);
    xfree(t);
}

static void on_closed(uv_handle_t *h)
{
    tunnel_unref(h->data);
}

static void on_up_shut(uv_shutdown_t *req, int status)
{
    (void)status;
    tunnel_unref(req->data);
}

static void tunnel_close(struct tunnel *t)
{
    if (t->closing)
        return;
    t->closing = true;
    struct proxy *p = t->p;
    DLIST_REMOVE(p->tunnels, t);
    p->ntunnels--;
    metric_dec(p->m.tunnels, NULL);
    log_debug("tunnel closed\tsandbox=%s", t->sandbox);
    if (t->active)
        activity_end(p->o.activity, t->sandbox);
    /* the client's input cut off (its EOF, or a write to it failing first): a reset */
    if (http_cut_marked(t->cut))
        upconn_reset(t->up);
    upconn_close(t->up);
    t->up = NULL;
    if (t->client_open)
        uv_close((uv_handle_t *)&t->client, on_closed);
    uv_close((uv_handle_t *)&t->timer, on_closed);
}

static void maybe_done(struct tunnel *t);

static void on_client_written(uv_write_t *wr, int status)
{
    struct cwop *w = container_of(wr, struct cwop, wr);
    struct tunnel *t = w->t;
    t->client_queued -= w->len;
    xfree(w);
    if (t->closing)
        return;
    if (status < 0) {
        tunnel_close(t);
        return;
    }
    t->last_activity = clock_now(); /* a client still taking the end is not idle */
    if (!t->up_reading && !t->up_eof && t->client_queued < LIMIT_ROUTER_TUNNEL_QUEUE / 2) {
        t->up_reading = true;
        (void)upconn_read(t->up, true);
    }
    maybe_done(t);
}

static int write_client(struct tunnel *t, const char *p, size_t n)
{
    if (n == 0)
        return 0;
    struct cwop *w = xmalloc(sizeof(*w) + n);
    memcpy(w->data, p, n);
    w->len = n;
    w->t = t;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    int r = uv_write(&w->wr, (uv_stream_t *)&t->client, &b, 1, on_client_written);
    if (r < 0) {
        xfree(w);
        return r;
    }
    t->client_queued += n;
    return 0;
}

/* Both sides ended: the tunnel closes once what each sent is written to the other (a
 * close before would cancel the queued writes, losing the end of a stream). */
static void maybe_done(struct tunnel *t)
{
    if (t->client_eof && t->up_eof && t->client_queued == 0 && t->up->queued == 0)
        tunnel_close(t);
}

void proxy__tunnel_up_read(struct tunnel *t, ssize_t n, const char *data)
{
    if (t->closing)
        return;
    if (n < 0) {
        if (n != UV_EOF) {
            tunnel_close(t);
            return;
        }
        t->up_eof = true;
        t->up_reading = false;
        (void)upconn_read(t->up, false);
        if (uv_shutdown(&t->client_shut, (uv_stream_t *)&t->client, NULL) < 0)
            tunnel_close(t);
        else
            maybe_done(t);
        return;
    }
    t->last_activity = clock_now();
    if (write_client(t, data, (size_t)n) < 0) {
        tunnel_close(t);
        return;
    }
    if (t->client_queued >= LIMIT_ROUTER_TUNNEL_QUEUE) {
        t->up_reading = false;
        (void)upconn_read(t->up, false);
    }
}

void proxy__tunnel_up_written(struct tunnel *t, int status)
{
    if (status < 0) {
        tunnel_close(t);
        return;
    }
    t->last_activity = clock_now();
    if (!t->client_reading && !t->client_eof && t->up->queued < LIMIT_ROUTER_TUNNEL_QUEUE / 2)
        client_read(t, true);
    maybe_done(t);
}

static void on_client_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    struct tunnel *t = h->data;
    (void)s;
    *b = uv_buf_init(t->p->read_buf, sizeof(t->p->read_buf));
}

/* The client's EOF is a cut-off input (its TLS front marked the connection's cut: no
 * close_notify): the tunnel closes, its upstream reset (tunnel_close), not half-closed,
 * so the sandbox never takes the cut for the end of the stream. */
static void tunnel_abort(struct tunnel *t)
{
    log_debug("tunnel client input cut off, resetting upstream\tsandbox=%s", t->sandbox);
    tunnel_close(t);
}

static void on_client_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct tunnel *t = st->data;
    if (n == 0 || t->closing)
        return;
    if (n < 0) {
        if (n != UV_EOF) {
            tunnel_close(t);
            return;
        }
        if (http_cut_marked(t->cut)) {
            tunnel_abort(t);
            return;
        }
        t->client_eof = true;
        client_read(t, false);
        t->up_shut.data = t;
        if (uv_shutdown(&t->up_shut, (uv_stream_t *)&t->up->tcp, on_up_shut) < 0) {
            tunnel_close(t);
            return;
        }
        t->handles++; /* until on_up_shut */
        maybe_done(t);
        return;
    }
    t->last_activity = clock_now();
    struct str part = str_make(b->base, (size_t)n);
    if (upconn_write(t->up, &part, 1) < 0) {
        tunnel_close(t);
        return;
    }
    if (t->up->queued >= LIMIT_ROUTER_TUNNEL_QUEUE)
        client_read(t, false);
}

/* Starts or stops reading the client. Not before the client handle is handed over
 * (on_upgraded starts it then): an upstream write that drains earlier must not mark it
 * reading, or the start after the hand-over would be skipped. */
static void client_read(struct tunnel *t, bool on)
{
    if (on == t->client_reading || (on && !t->client_open))
        return;
    if (on && uv_read_start((uv_stream_t *)&t->client, on_client_alloc, on_client_read) < 0)
        return;
    if (!on)
        (void)uv_read_stop((uv_stream_t *)&t->client);
    t->client_reading = on;
}

static void on_idle(uv_timer_t *tm)
{
    struct tunnel *t = tm->data;
    usec_t end = t->last_activity + t->p->o.tunnel_idle, now = clock_now();
    if (now >= end) {
        log_debug("tunnel idle, closing\tsandbox=%s", t->sandbox);
        tunnel_close(t);
        return;
    }
    (void)uv_timer_start(&t->timer, on_idle, ms(end - now), 0);
}

static void on_upgraded(void *ctx, int status, uv_tcp_t *tcp, struct str pending)
{
    struct tunnel *t = ctx;
    if (status >= 0)
        tcp->data = t;
    if (status < 0 || t->closing) {
        tunnel_close(t);
        if (status >= 0)
            uv_close((uv_handle_t *)tcp, on_closed); /* closing: nobody wants it */
        else
            on_closed((uv_handle_t *)&t->timer); /* the client handle never existed */
        return;
    }
    t->client_open = true;
    t->last_activity = clock_now();
    int r = write_client(t, t->early.data ? t->early.data : "", t->early.len);
    buf_done(&t->early);
    if (r >= 0 && pending.len)
        r = upconn_write(t->up, &pending, 1);
    if (r < 0) {
        tunnel_close(t);
        return;
    }
    client_read(t, true);
    t->up_reading = true;
    (void)upconn_read(t->up, true);
    (void)uv_timer_start(&t->timer, on_idle, ms(t->p->o.tunnel_idle), 0);
}

static struct tunnel *tunnel_new(struct px *x)
{
    struct proxy *p = x->p;
    struct tunnel *t = XNEW(struct tunnel);
    t->p = p;
    buf_init(&t->early, sizeof(p->read_buf) * 2);
    (void)buf_append(&t->early, x->in.data ? x->in.data : "", x->in.len);
    buf_reset(&x->in);
    t->cut = http_cut_ref(http_req_cut(x->req)); /* before the upgrade detaches x->req */
    (void)uv_timer_init(p->loop, &t->timer);
    t->timer.data = t;
    t->handles = 2; /* the timer and the client handle (from the hand-over) */
    (void)snprintf(t->sandbox, sizeof(t->sandbox), "%s/%s", x->rt.ns, x->rt.name);
    t->active = activity_begin(p->o.activity, t->sandbox); /* an open WebSocket: awake */
    DLIST_PUSH(p->tunnels, t);
    p->ntunnels++;
    metric_inc(p->m.tunnels, NULL);
    return t;
}

int proxy__tunnel_start(struct px *x)
{
    const struct http_header *h = http_head_find(x->head, "Upgrade");
    char *proto = h ? str_dup(h->value) : NULL;
    (void)upconn_read(x->up, false);
    struct tunnel *t = tunnel_new(x);
    struct http_upgrade_opts o = {
        .protocol = proto, .tcp = &t->client, .fn = on_upgraded, .ctx = t};
    int r = http_req_upgrade(x->req, &o);
    xfree(proto);
    if (r < 0) {
        tunnel_close(t);
        on_closed((uv_handle_t *)&t->timer); /* no hand-over will come */
        return r;
    }
    t->up = x->up;
    x->up = NULL;
    t->up->owner_kind = UP_TUNNEL;
    t->up->owner = t;
    /* The hand-over waits for the 101 to be written (behind the answers before it on a
     * keep-alive connection): a client that never takes it does not hold the tunnel's
     * room and its upstream past the idle timeout (on_upgraded restarts it). */
    t->last_activity = clock_now();
    (void)uv_timer_start(&t->timer, on_idle, ms(t->p->o.tunnel_idle), 0);
    x->status = 101;
    x->resp_started = x->resp_done = true;
    proxy__px_finish(x);
    return 0;
}

void proxy__tunnels_close_all(struct proxy *p)
{
    while (p->tunnels)
        tunnel_close(p->tunnels);
}
