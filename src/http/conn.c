/* SPDX-License-Identifier: Apache-2.0 */
/* One HTTP/1.1 connection: a state machine over head -> body -> handler -> next request,
 * one request at a time (pipelined bytes wait in the input buffer), with a single timer
 * whose meaning depends on the state. Memory is released only in uv_close callbacks. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/dlist.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "http/server_int.h"
#include "http/sock.h"

struct write_op {
    uv_write_t req;
    size_t len;
    char data[];
};

static void conn_process(struct http_conn *c);
static void on_timer(uv_timer_t *t);
static void on_defer(uv_idle_t *h);

static uint64_t to_ms(usec_t u)
{
    return (u + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
}

static void arm(struct http_conn *c, usec_t t, bool idle)
{
    c->idle_timer = idle;
    (void)uv_timer_start(&c->timer, on_timer, to_ms(t), 0);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct http_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    struct http_server *s = c->server;
    DLIST_REMOVE(s->conns, c);
    buf_done(&c->in);
    xfree(c->info);
    http_cut_unref(c->cut);
    xfree(c);
    http__server_conn_gone(s);
}

/* Detaches the current request; tells its owner if no response was completed (and
 * whether the client's input was cut off by then, whatever ended the connection first:
 * a write to a front that already closed fails before its EOF is read). */
static void abort_req(struct http_conn *c)
{
    struct http_req *req = c->req;
    if (!req)
        return;
    c->req = NULL;
    req->conn = NULL;
    if (req->resp != HTTP_RESP_DONE) {
        req->aborted = true;
        req->input_cut = http_cut_marked(c->cut);
        if (req->abort_fn)
            req->abort_fn(req, req->abort_ctx);
    }
    http_req_unref(req);
}

void http__conn_close(struct http_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    c->reading = false;
    (void)uv_read_stop((uv_stream_t *)&c->tcp);
    (void)uv_timer_stop(&c->timer);
    abort_req(c);
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->defer, on_handle_closed);
}

static void on_shutdown(uv_shutdown_t *sr, int status)
{
    struct http_conn *c = sr->handle->data;
    c->shut_done = true;
    if (status < 0 || c->read_eof)
        http__conn_close(c);
}

/* How long a connection lingers: LIMIT_HTTP_LINGER, or LIMIT_HTTP_SHUTDOWN_LINGER for one
 * that the server's shutdown alone ended after a request read whole (quick_linger:
 * finish_request, http__conn_drain). */
static usec_t linger_time(const struct http_conn *c)
{
    return c->quick_linger ? LIMIT_HTTP_SHUTDOWN_LINGER : LIMIT_HTTP_LINGER;
}

/* Ends the connection after the queued response: FIN after the writes, then keep reading
 * (and discarding) for a while so that unread request bytes do not turn our close into a
 * reset that destroys the response before the client read it. */
static void conn_end(struct http_conn *c)
{
    if (c->closing || c->state == HTTP_CONN_LINGER)
        return;
    abort_req(c);
    c->state = HTTP_CONN_LINGER;
    c->keep_alive = false;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        http__conn_close(c);
        return;
    }
    arm(c, linger_time(c), false);
    http__conn_update_read(c);
}

/* True while response bytes are still queued and the client took some of them within
 * stall (a completed write, or the socket's queue seen to change: http/progress.h). */
static bool taking_within(struct http_conn *c, usec_t stall)
{
    usec_t now = clock_now();
    return c->queued > 0 && now - http_progress_at(&c->wp, &c->tcp, now) < stall;
}

/* taking_within the write stall time (http_server_opts.write_stall): a close now would
 * throw away the end of a response the client is still reading (an idle, linger or
 * upgrade timer re-arms instead). */
static bool writes_moving(struct http_conn *c)
{
    return taking_within(c, c->server->opts.write_stall);
}

/* http_req_upgrade: the 101 waits in the write queue (behind the answers before it, on a
 * keep-alive connection). It is bound like any queued response: while the client takes
 * bytes the wait goes on; once it took none for the write stall time the connection
 * closes, which cancels the 101's write (its owner hears status < 0). */
void http__conn_arm_upgrade(struct http_conn *c)
{
    arm(c, c->server->opts.write_stall, false);
}

static void on_timer(uv_timer_t *t)
{
    struct http_conn *c = t->data;
    if (c->upgrading) {
        if (writes_moving(c))
            http__conn_arm_upgrade(c);
        else
            http__conn_close(c);
        return;
    }
    switch (c->state) {
    case HTTP_CONN_HEAD:
        if (uv_is_active((uv_handle_t *)&c->defer)) {
            /* the requests held back are parsed on this loop turn (on_defer runs after
             * the timers): the head is not late, its parse was */
            arm(c, c->server->opts.header_timeout, false);
            return;
        }
        if (c->held && !writes_moving(c)) {
            http__conn_close(c); /* held requests whose client reads nothing */
            return;
        }
        if ((c->held || c->in.len == 0) && writes_moving(c)) {
            arm(c, c->server->opts.idle_timeout, true);
            return;
        }
        if (c->in.len == 0) {
            http__conn_close(c);
            return;
        }
        http__write_error(c, 408, "request head not received in time");
        conn_end(c);
        return;
    case HTTP_CONN_BODY:
        if (c->req && c->req->resp == HTTP_RESP_NONE) {
            http__write_error(c, 408, "request body not received in time");
            conn_end(c);
            return;
        }
        http__conn_close(c);
        return;
    case HTTP_CONN_LINGER:
        if (writes_moving(c)) { /* the FIN goes after them (uv_shutdown) */
            arm(c, linger_time(c), false);
            return;
        }
        http__conn_close(c);
        return;
    case HTTP_CONN_WAIT:
        /* armed when a running response filled the queue: a client that takes none of
         * it for the stall time is gone for our purposes (its handler hears the abort) */
        if (c->queued == 0)
            return;
        if (taking_within(c, c->server->opts.stream_stall)) {
            arm(c, c->server->opts.stream_stall, false);
            return;
        }
        http__conn_close(c);
        return;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct http_conn *c = h->data;
    (void)suggested;
    *b = uv_buf_init(c->server->read_buf, LIMIT_HTTP_READ_CHUNK);
}

/* Whether the client's EOF is a cut-off input (its front marked the connection's
 * http_cut) that ends a request: one being read or answered, or one read whole and not
 * yet dispatched (the close aborts it: http_req_input_cut). A connection with nothing in
 * progress, or only its last answer to send (linger), ends as after any EOF. */
static bool eof_cut(struct http_conn *c)
{
    return http_cut_marked(c->cut) && c->state != HTTP_CONN_LINGER &&
           !(c->state == HTTP_CONN_HEAD && c->in.len == 0);
}

static void on_read_error(struct http_conn *c, ssize_t nread)
{
    /* an error, or a cut: the request is aborted, never taken as complete or half-closed */
    if (nread != UV_EOF || eof_cut(c)) {
        http__conn_close(c);
        return;
    }
    c->read_eof = true;
    http__conn_update_read(c);
    /* A half-closed client still gets the response to a request it completed (a sized
     * one streamed included), unless that response is an open-ended stream, or its
     * handler asked (a long run whose client gave up): then EOF is the only sign that the
     * client went away (a quiet stream never fails a write, a run writes nothing until it
     * ends), and the handler must hear it. */
    struct http_req *r = c->req;
    bool ends = r && (r->eof_aborts || (r->resp == HTTP_RESP_STREAMING && !r->resp_sized));
    if (c->state == HTTP_CONN_WAIT && !ends) {
        if (r && r->eof_fn) { /* once: the handler may pass the EOF on */
            http_req_event_fn *fn = r->eof_fn;
            r->eof_fn = NULL;
            fn(r, r->eof_ctx);
        }
        return;
    }
    if (c->state == HTTP_CONN_WAIT) {
        conn_end(c); /* the abort callback runs; the answers queued before go first */
        return;
    }
    if (c->state == HTTP_CONN_HEAD && c->in.len > 0 && !c->in_process) {
        conn_process(c);
        return;
    }
    /* the end of a response still queued goes first: FIN after it, then the close */
    if (c->state == HTTP_CONN_LINGER && !c->shut_done)
        return; /* on_shutdown closes */
    if (c->state == HTTP_CONN_HEAD && c->queued > 0) {
        conn_end(c);
        return;
    }
    http__conn_close(c);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *b)
{
    struct http_conn *c = stream->data;
    if (nread == 0 || c->closing)
        return;
    if (nread < 0) {
        on_read_error(c, nread);
        return;
    }
    if (c->state == HTTP_CONN_LINGER)
        return;
    bool was_empty = c->in.len == 0;
    if (buf_append(&c->in, b->base, (size_t)nread) < 0) {
        http__conn_close(c);
        return;
    }
    if (c->state == HTTP_CONN_HEAD && was_empty && c->idle_timer)
        arm(c, c->server->opts.header_timeout, false);
    else if (c->state == HTTP_CONN_BODY && !c->req->body_paused)
        arm(c, c->server->opts.body_timeout, false);
    conn_process(c);
}

void http__conn_update_read(struct http_conn *c)
{
    const struct http_server *s = c->server;
    bool want = !c->closing && !c->read_eof && !c->upgrading;
    if (want && c->state != HTTP_CONN_LINGER) {
        if (c->queued >= s->opts.write_queue || c->in.len > LIMIT_HTTP_HEADER_BYTES)
            want = false;
        if (c->state == HTTP_CONN_BODY && c->req && c->req->body_paused) {
            want = false;
            (void)uv_timer_stop(&c->timer); /* the handler is slow, not the client */
        }
    }
    if (want && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
            http__conn_close(c);
            return;
        }
        c->reading = true;
    } else if (!want && c->reading) {
        (void)uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

static void on_write(uv_write_t *wr, int status)
{
    struct write_op *w = container_of(wr, struct write_op, req);
    struct http_conn *c = wr->handle->data;
    c->queued -= w->len;
    http__server_queued_add(c->server, -(ptrdiff_t)w->len);
    http_progress_mark(&c->wp, &c->tcp, clock_now());
    xfree(w);
    if (status < 0) {
        http__conn_close(c);
        return;
    }
    if (c->closing)
        return;
    struct http_req *req = c->req;
    if (c->held && c->queued <= c->server->opts.write_queue / 2) {
        c->held = false;
        (void)uv_idle_start(&c->defer, on_defer); /* the pipelined requests held back */
    }
    if (req && req->want_drain && c->queued <= c->server->opts.write_queue / 2) {
        req->want_drain = false;
        if (req->drain_fn) {
            http_req_ref(req);
            req->drain_fn(req, req->drain_ctx);
            http_req_unref(req);
        }
    }
    http__conn_update_read(c);
}

/* With nothing queued, writes straight from the parts (one writev, no copy, no write
 * request and none of the poll re-arming a completed uv_write costs). Returns the bytes
 * written; the caller queues the rest. */
static size_t try_write_now(struct http_conn *c, const struct str *parts, size_t n, size_t total)
{
    uv_buf_t bufs[8];
    if (c->queued || n > ARRAY_SIZE(bufs) || uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp))
        return 0;
    for (size_t i = 0; i < n; i++)
        bufs[i] = uv_buf_init((char *)parts[i].p, (unsigned)parts[i].len);
    int r = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)n);
    if (r < 0)
        return 0; /* EAGAIN, or an error uv_write reports through on_write as before */
    return (size_t)r < total ? (size_t)r : total;
}

static int conn_write(struct http_conn *c, const struct str *parts, size_t n, bool now)
{
    if (c->closing)
        return -EPIPE;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += parts[i].len;
    if (total == 0)
        return 0;
    if (total > UINT32_MAX)
        return -E2BIG;
    size_t skip = now ? try_write_now(c, parts, n, total) : 0;
    if (skip == total)
        return 0;
    total -= skip;
    struct write_op *w = xmalloc(sizeof(*w) + total);
    w->len = total;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t from = skip < parts[i].len ? skip : parts[i].len;
        skip -= from;
        if (parts[i].len > from)
            memcpy(w->data + off, parts[i].p + from, parts[i].len - from);
        off += parts[i].len - from;
    }
    uv_buf_t b = uv_buf_init(w->data, (unsigned)total);
    int r = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (r < 0) {
        xfree(w);
        http__conn_close(c);
        return r;
    }
    if (c->queued == 0) /* the stall clock starts with the queue (its bytes in the kernel) */
        http_progress_mark(&c->wp, &c->tcp, clock_now());
    c->queued += total;
    http__server_queued_add(c->server, (ptrdiff_t)total);
    if (c->queued >= c->server->opts.write_queue) {
        http__conn_update_read(c);
        if (c->state == HTTP_CONN_WAIT && !uv_is_active((uv_handle_t *)&c->timer))
            arm(c, c->server->opts.stream_stall, false);
    }
    return 0;
}

int http__conn_write(struct http_conn *c, const struct str *parts, size_t n)
{
    return conn_write(c, parts, n, false);
}

int http__conn_write_whole(struct http_conn *c, const struct str *parts, size_t n)
{
    return conn_write(c, parts, n, true);
}

/* The handler failed: 500 if nothing was sent yet, else the response is cut off. */
static void handler_failed(struct http_conn *c, struct http_req *req)
{
    if (!req->conn)
        return;
    if (req->resp == HTTP_RESP_NONE)
        (void)http_respond_error(req, 500, "internal error");
    else if (req->resp == HTTP_RESP_STREAMING)
        http__conn_close(c);
}

static void call_handler(struct http_conn *c, struct http_req *req)
{
    http_req_ref(req);
    if (req->route->fn(req, req->route->ctx) < 0)
        handler_failed(c, req);
    /* A streaming receiver of an empty body (known complete at dispatch) still sees its
     * end, as it would after the last byte of a non-empty one. */
    else if (req->stream_body && req->body_done && req->body_fn && req->conn && !req->aborted &&
             req->body_fn(req, STR_NULL, true, req->body_ctx) < 0)
        handler_failed(c, req);
    /* Nobody kept the request and nothing answered it: it would hang forever. */
    else if (req->conn && req->resp == HTTP_RESP_NONE && req->refs == 2 && !req->stream_body)
        (void)http_respond_error(req, 500, "handler did not respond");
    /* The client's EOF came before this request was dispatched (it was pipelined behind
     * one in flight) and will not be read again: a request the EOF ends goes now, as it
     * would have had the EOF come after it (on_read_error). */
    else if (req->conn && c->read_eof && c->state == HTTP_CONN_WAIT && c->req == req &&
             req->resp != HTTP_RESP_DONE &&
             (req->eof_aborts || (req->resp == HTTP_RESP_STREAMING && !req->resp_sized)))
        conn_end(c); /* the abort callback runs; the answers queued before go first */
    http_req_unref(req);
}

/* Answers a request that gets no handler. */
static void reject(struct http_conn *c, struct http_req *req, int status, const char *detail)
{
    c->state = HTTP_CONN_WAIT;
    (void)uv_timer_stop(&c->timer);
    (void)http_respond_error(req, status, detail);
}

static bool known_method(struct str m)
{
    static const char *const methods[] = {"GET",    "HEAD",    "POST", "PUT",
                                          "DELETE", "OPTIONS", "PATCH"};
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
        if (str_eq_c(m, methods[i]))
            return true;
    return false;
}

/* Finds the route; answers 501/404/405 itself. Returns false when rejected. */
static bool route_req(struct http_conn *c, struct http_req *req)
{
    const struct http_head *h = &req->head;
    bool known = false;
    if (!known_method(h->method)) {
        reject(c, req, 501, "method not implemented");
        return false;
    }
    req->route = http__router_match(c->server->opts.router, h->method, h->path, &known);
    if (!req->route && known) {
        struct buf allow;
        buf_init(&allow, LIMIT_HTTP_RESP_HEADERS / 2);
        http__router_allow(c->server->opts.router, h->path, &allow);
        (void)http_resp_header_add(req, "Allow", buf_str(&allow));
        buf_done(&allow);
        reject(c, req, 405, "method not allowed");
        return false;
    }
    if (!req->route) {
        reject(c, req, 404, "not found");
        return false;
    }
    bool prefix = req->route->flags & HTTP_ROUTE_PREFIX;
    size_t skip = prefix ? req->route->path_len : 0;
    req->rest = str_make(h->path.p + skip, h->path.len - skip);
    req->stream_body = req->route->flags & HTTP_ROUTE_STREAM_BODY;
    return true;
}

static void dispatch(struct http_conn *c, struct http_req *req)
{
    const struct http_head *h = &req->head;
    const struct http_server *s = c->server;
    req->is_head_method = str_eq_c(h->method, "HEAD");
    req->body_done = !http_req_has_body(req);
    c->keep_alive = h->keep_alive;
    if (!route_req(c, req))
        return;
    if (!req->body_done &&
        ((req->route->flags & HTTP_ROUTE_NO_BODY) ||
         (s->opts.refuse_early && s->opts.refuse_early(req, req->route->fn, req->route->ctx)))) {
        c->keep_alive = false; /* the body is not read: the connection ends after this */
        c->state = HTTP_CONN_WAIT;
        (void)uv_timer_stop(&c->timer);
        call_handler(c, req);
        return;
    }
    if (!req->stream_body && h->body == HTTP_BODY_LENGTH && h->content_length > s->opts.max_body) {
        reject(c, req, 413, "request body too large");
        return;
    }
    if (req->body_done) {
        c->state = HTTP_CONN_WAIT;
        (void)uv_timer_stop(&c->timer);
        call_handler(c, req);
        return;
    }
    req->body_left = h->content_length;
    http_chunked_init(&req->chunked);
    if (h->expect_continue) {
        struct str cont = STR_LIT("HTTP/1.1 100 Continue\r\n\r\n");
        if (http__conn_write(c, &cont, 1) < 0)
            return;
    }
    c->state = HTTP_CONN_BODY;
    arm(c, s->opts.body_timeout, false);
    if (req->stream_body)
        call_handler(c, req);
}

static int try_head(struct http_conn *c)
{
    struct http_head h;
    struct http_parse_err e = {.status = 400, .msg = "bad request"};
    int r = http_parse_request(c->in.data, c->in.len, c->scanned, &h, &e);
    if (r == 0) {
        c->scanned = c->in.len;
        if (c->read_eof)
            http__conn_close(c);
        return 0;
    }
    if (r < 0) {
        log_debug("rejecting request head\tstatus=%d pos=%zu err=\"%s\"", e.status, e.pos, e.msg);
        http__write_error(c, e.status, e.msg);
        conn_end(c);
        return 0;
    }
    struct http_req *req = http__req_new(c);
    req->raw = xmalloc((size_t)r);
    memcpy(req->raw, c->in.data, (size_t)r);
    int again = http_parse_request(req->raw, (size_t)r, 0, &req->head, NULL);
    ASSERT(again == r);
    buf_consume(&c->in, (size_t)r);
    c->scanned = 0;
    c->req = req;
    dispatch(c, req);
    return 1;
}

/* Hands body bytes to the streaming receiver or the buffer. */
static int deliver(struct http_conn *c, struct http_req *req, struct str data, bool last)
{
    if (last) {
        req->body_done = true;
        c->state = HTTP_CONN_WAIT;
        (void)uv_timer_stop(&c->timer);
    }
    if (req->stream_body) {
        if (req->body_fn && req->body_fn(req, data, last, req->body_ctx) < 0) {
            handler_failed(c, req);
            return -ECANCELED;
        }
        return 0;
    }
    if (buf_append(&req->body, data.p, data.len) < 0) {
        reject(c, req, 413, "request body too large");
        return -E2BIG;
    }
    if (last)
        call_handler(c, req);
    return 0;
}

static int body_error(struct http_conn *c, struct http_req *req, const struct http_parse_err *e)
{
    if (req->stream_body && req->abort_fn && !req->aborted) {
        req->aborted = true;
        req->abort_fn(req, req->abort_ctx);
    }
    if (req->resp == HTTP_RESP_NONE && req->conn)
        reject(c, req, e->status, e->msg);
    else
        http__conn_close(c);
    return -EPROTO;
}

static int feed_chunked(struct http_conn *c, struct http_req *req)
{
    size_t used = 0;
    struct str data;
    struct http_parse_err e = {.status = 400, .msg = "bad chunked body"};
    int r = http_chunked_feed(&req->chunked, c->in.data, c->in.len, &used, &data, &e);
    if (r < 0)
        return body_error(c, req, &e);
    int d = 0;
    if (data.len || r == 1)
        d = deliver(c, req, data, r == 1);
    buf_consume(&c->in, used);
    return d;
}

static int feed_length(struct http_conn *c, struct http_req *req)
{
    size_t n = c->in.len < req->body_left ? c->in.len : (size_t)req->body_left;
    req->body_left -= n;
    int r = deliver(c, req, str_make(c->in.data, n), req->body_left == 0);
    buf_consume(&c->in, n);
    return r;
}

/* Returns 1 when the state machine should go on, 0 when it must wait for input. */
static int feed_body(struct http_conn *c)
{
    struct http_req *req = c->req;
    http_req_ref(req);
    while (c->in.len > 0 && c->state == HTTP_CONN_BODY && !req->body_paused && !c->closing &&
           !c->resp_complete) {
        if ((req->head.body == HTTP_BODY_CHUNKED ? feed_chunked(c, req) : feed_length(c, req)) < 0)
            break;
    }
    http_req_unref(req);
    return c->state != HTTP_CONN_BODY || c->resp_complete;
}

/* The response is complete: next request, or end of the connection. */
static void finish_request(struct http_conn *c)
{
    struct http_req *req = c->req;
    bool whole = c->keep_alive && req && req->body_done; /* nothing of it left unread */
    bool reuse = whole && !c->server->shutting_down && !(c->read_eof && c->in.len == 0);
    if (req) {
        c->req = NULL;
        req->conn = NULL;
        http_req_unref(req);
    }
    if (!reuse) {
        /* kept but for the shutdown (a stream that began before it): no body to drain,
         * only a request the client may have sent already, which arrives within a round
         * trip; a client that keeps its connection for reuse never ends its side, and the
         * whole linger held the shutdown */
        c->quick_linger = whole && c->server->shutting_down;
        conn_end(c);
        return;
    }
    c->state = HTTP_CONN_HEAD;
    c->scanned = 0;
    /* A CRLF some clients add after a body is not the start of a new request. */
    while (c->in.len >= 2 && c->in.data[0] == '\r' && c->in.data[1] == '\n')
        buf_consume(&c->in, 2);
    if (c->in.len > 0)
        arm(c, c->server->opts.header_timeout, false);
    else
        arm(c, c->server->opts.idle_timeout, true);
}

static void conn_process(struct http_conn *c)
{
    if (c->in_process)
        return;
    c->in_process = true;
    while (!c->closing && c->state != HTTP_CONN_LINGER) {
        if (c->resp_complete) {
            c->resp_complete = false;
            finish_request(c);
            continue;
        }
        int r = 0;
        /* A pipelined request waits while the responses before it fill the write queue:
         * each would queue its own answer on top (on_write starts it again). */
        if (c->state == HTTP_CONN_HEAD && c->queued >= c->server->opts.write_queue) {
            c->held = c->in.len > 0;
            break;
        }
        c->held = false; /* running again (new bytes came before the queue halved) */
        if (c->state == HTTP_CONN_HEAD)
            r = try_head(c);
        else if (c->state == HTTP_CONN_BODY)
            r = feed_body(c);
        if (r <= 0)
            break;
    }
    c->in_process = false;
    http__conn_update_read(c);
}

static void on_defer(uv_idle_t *h)
{
    struct http_conn *c = h->data;
    (void)uv_idle_stop(h);
    conn_process(c);
}

void http__conn_response_done(struct http_conn *c)
{
    c->resp_complete = true;
    if (c->in_process)
        return; /* the loop under way finishes it */
    /* A response completed from the handler's own callback (a timer, a process exit, a
     * drained write): the request is finished here, but one pipelined behind it runs on
     * the next loop turn, not inside that callback, whose state its handler could free
     * (a DELETE of the process a GET was waiting on). */
    c->resp_complete = false;
    finish_request(c);
    if (!c->closing && c->state == HTTP_CONN_HEAD && c->in.len > 0)
        (void)uv_idle_start(&c->defer, on_defer);
    http__conn_update_read(c);
}

void http__conn_resume(struct http_conn *c)
{
    if (c->state == HTTP_CONN_BODY)
        arm(c, c->server->opts.body_timeout, false);
    conn_process(c);
}

void http__conn_drain(struct http_conn *c)
{
    if (c->closing || c->state != HTTP_CONN_HEAD || c->in.len != 0)
        return;
    if (c->queued > 0) {
        c->quick_linger = true; /* (kept alive: its request was read whole) */
        conn_end(c);            /* the response's end still goes, then the FIN */
    } else {
        http__conn_close(c);
    }
}

static void on_reject_closed(uv_handle_t *h)
{
    xfree(h);
}

static void conn_start(struct http_server *s, struct http_conn *c);

void http__conn_accept(struct http_server *s)
{
    struct http_conn *c = XNEW(struct http_conn);
    (void)uv_tcp_init(s->loop, &c->tcp);
    c->tcp.data = c;
    int r = uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->tcp);
    if (r < 0 || s->nconns >= s->opts.max_connections || s->shutting_down) {
        /* tcp is the first member: the whole object is freed with the handle */
        uv_close((uv_handle_t *)&c->tcp, on_reject_closed);
        return;
    }
    conn_start(s, c);
}

int http_server_adopt(struct http_server *s, int fd, const struct http_adopt_opts *opts)
{
    struct http_conn *c = XNEW(struct http_conn);
    (void)uv_tcp_init(s->loop, &c->tcp);
    c->tcp.data = c;
    int r = uv_tcp_open(&c->tcp, fd);
    if (r >= 0 && (s->nconns >= s->opts.max_connections || s->shutting_down))
        r = -ECONNREFUSED;
    if (r >= 0 && opts->info.len > LIMIT_HTTP_PEER_INFO)
        r = -E2BIG;
    if (r < 0) {
        if (uv_fileno((uv_handle_t *)&c->tcp, &(uv_os_fd_t){0}) < 0)
            (void)close(fd); /* not taken over by the handle */
        uv_close((uv_handle_t *)&c->tcp, on_reject_closed);
        return r;
    }
    if (opts->peer)
        (void)str_copy(c->peer, sizeof(c->peer), opts->peer);
    c->secure = opts->secure;
    c->cut = http_cut_ref(opts->cut);
    if (opts->info.len > 0) {
        c->info = xmalloc(opts->info.len);
        memcpy(c->info, opts->info.p, opts->info.len);
        c->info_len = opts->info.len;
    }
    conn_start(s, c);
    return 0;
}

static void conn_start(struct http_server *s, struct http_conn *c)
{
    (void)uv_timer_init(s->loop, &c->timer);
    c->timer.data = c;
    (void)uv_idle_init(s->loop, &c->defer);
    c->defer.data = c;
    c->handles_open = 3;
    c->server = s;
    buf_init(&c->in, LIMIT_HTTP_HEADER_BYTES + LIMIT_HTTP_READ_CHUNK);
    DLIST_PUSH(s->conns, c);
    s->nconns++;
    (void)uv_tcp_nodelay(&c->tcp, 1);
    http_sock_keepalive(&c->tcp); /* a peer gone silently: the connection ends */
    arm(c, s->opts.header_timeout, false);
    http__conn_update_read(c);
}
