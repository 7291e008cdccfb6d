/* SPDX-License-Identifier: Apache-2.0 */
/* One proxied exchange, response side: parse the upstream head, pass end-to-end headers
 * on, stream the body (length, chunked or until close) with back-pressure, or switch to
 * a tunnel after 101. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "router/proxy_int.h"

/* Whether name is listed in any Connection field of the upstream head (the field may be
 * repeated: each counts). */
static bool in_connection(const struct http_head *head, struct str name)
{
    for (size_t i = 0; i < head->num_headers; i++) {
        const struct http_header *h = &head->headers[i];
        if (str_eq_nocase(h->name, STR_LIT("connection")) && proxy__listed(h->value, name))
            return true;
    }
    return false;
}

static bool skip_resp_header(const struct http_head *head, struct str name)
{
    static const char *const names[] = {"connection",
                                        "keep-alive",
                                        "proxy-authenticate",
                                        "proxy-authorization",
                                        "te",
                                        "trailer",
                                        "transfer-encoding",
                                        "upgrade",
                                        "content-length",
                                        "date",
                                        "proxy-connection"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (str_eq_nocase(name, str_c(names[i])))
            return true;
    return in_connection(head, name);
}

static int copy_headers(struct px *x)
{
    for (size_t i = 0; i < x->head->num_headers; i++) {
        const struct http_header *h = &x->head->headers[i];
        if (skip_resp_header(x->head, h->name))
            continue;
        int r = http_resp_header_add_str(x->req, h->name, h->value);
        if (r < 0 && r != -EINVAL)
            return r;
    }
    return 0;
}

/* A 502 after the request was sent (an upstream that closed before its head, or sent a
 * bad one). Not the "Could not connect" of a request that never left: clients take that
 * one as proof that a call which must not run twice did not run (docs/router.md). */
static void bad_gateway(struct px *x, const char *reason)
{
    char d[160];
    (void)snprintf(d, sizeof(d),
                   x->req_sent || x->retried
                       ? "The backend sandbox closed the connection or answered badly: %s"
                       : "Could not connect to the backend sandbox: %s",
                   x->rt.name);
    proxy__px_fail(x, 502, d, reason);
}

static void complete(struct px *x)
{
    x->resp_done = true;
    if (http_resp_end(x->req) < 0) {
        x->up_eof = true; /* do not reuse: the client is gone mid-way */
    }
    proxy__px_finish(x);
}

/* The whole body arrived with the head (the common small answer): head and body leave
 * in one write. */
static int respond_whole(struct px *x)
{
    size_t n = (size_t)x->body_left;
    int r = http_respond(x->req, x->status, NULL, x->in.data, n);
    if (r < 0)
        return r;
    x->bytes_out += n;
    x->body_left = 0;
    buf_consume(&x->in, n);
    x->resp_done = true;
    proxy__px_finish(x);
    return 0;
}

/* The answer to a HEAD: the head the GET would have, no body. The upstream's
 * Content-Length is passed on (a client sizing a download by HEAD); without one, the
 * GET's body would be chunked or close-delimited, so the head says chunked. */
static int respond_head(struct px *x)
{
    const struct http_header *cl = http_head_find(x->head, "Content-Length");
    uint64_t len;
    int r;
    if (cl && str_to_u64(str_trim(cl->value), &len) == 0 && len <= SIZE_MAX)
        return http_respond(x->req, x->status, NULL, NULL, (size_t)len);
    if (x->status < 200 || x->status == 204 || x->status == 304)
        return http_respond(x->req, x->status, NULL, "", 0);
    r = http_resp_start(x->req, x->status, NULL);
    return r < 0 ? r : http_resp_end(x->req);
}

static int start_response(struct px *x)
{
    x->status = x->head->status;
    int r = copy_headers(x);
    if (r < 0)
        return r;
    x->resp_started = true;
    switch (x->head->body) {
    case HTTP_BODY_NONE:
        r = str_eq_c(http_req_method(x->req), "HEAD")
                ? respond_head(x)
                : http_respond(x->req, x->status, NULL, "", 0);
        if (r >= 0) {
            x->resp_done = true;
            proxy__px_finish(x);
        }
        return r;
    case HTTP_BODY_LENGTH:
        x->body_left = x->head->content_length;
        if (x->body_left <= x->in.len)
            return respond_whole(x);
        return http_resp_start_length(x->req, x->status, NULL, x->body_left);
    case HTTP_BODY_CHUNKED:
        http_chunked_init(&x->chunked);
        return http_resp_start(x->req, x->status, NULL);
    case HTTP_BODY_UNTIL_CLOSE:
        return http_resp_start(x->req, x->status, NULL);
    }
    return -EINVAL;
}

/* Parses the head in x->in. Returns 1 when the exchange went on, 0 to wait, -1 failed. */
static int process_head(struct px *x)
{
    struct http_head h;
    struct http_parse_err e;
    unsigned flags = str_eq_c(http_req_method(x->req), "HEAD") ? HTTP_PARSE_RESP_TO_HEAD : 0;
    int n = http_parse_response(x->in.data, x->in.len, x->last_len, flags, &h, &e);
    if (n == 0) {
        x->last_len = x->in.len;
        return 0;
    }
    if (n < 0) {
        bad_gateway(x, "other");
        return -1;
    }
    x->last_len = 0;
    if (h.status == 100 || (h.status > 101 && h.status < 200)) {
        buf_consume(&x->in, (size_t)n); /* interim answers are not passed on */
        return 1;
    }
    xfree(x->raw);
    x->raw = xmalloc((size_t)n);
    memcpy(x->raw, x->in.data, (size_t)n);
    if (!x->head)
        x->head = xmalloc(sizeof(*x->head));
    (void)http_parse_response(x->raw, (size_t)n, 0, flags, x->head, NULL);
    buf_consume(&x->in, (size_t)n);
    x->head_done = true;
    if (x->head->status == 101) {
        if (!x->is_upgrade || copy_headers(x) < 0 || proxy__tunnel_start(x) < 0) {
            (void)http_resp_headers_reset(x->req); /* the sandbox's, not for our 502 */
            bad_gateway(x, "other");
        }
        return -1;
    }
    if (start_response(x) < 0) {
        (void)http_resp_headers_reset(x->req); /* no-op once the response started */
        proxy__px_fail(x, 502, "Could not pass on the backend's answer.", "other");
        return -1;
    }
    return 1;
}

/* The client's queue is full: upstream reads stop until it drains. The client's progress
 * is sampled now, so that the idle timer counts only what it takes from here on. */
static void block(struct px *x)
{
    x->blocked = true;
    (void)upconn_read(x->up, false);
    (void)http_resp_write_progress(x->req);
}

/* ---- the budget of bytes queued to all clients ---- */

/* Past the proxy's queued_budget, a download whose own client holds more than
 * LIMIT_ROUTER_QUEUED_SHARE stops reading its sandbox: clients that do not read hold a
 * share each, not the router's memory, and those that read go on. */
static bool over_budget(const struct px *x)
{
    return http_server_queued(http_req_server(x->req)) > x->p->o.queued_budget &&
           http_resp_queued(x->req) > LIMIT_ROUTER_QUEUED_SHARE;
}

void proxy__unstarve(struct px *x)
{
    struct proxy *p = x->p;
    if (!x->starved)
        return;
    x->starved = false;
    if (x->starved_prev)
        x->starved_prev->starved_next = x->starved_next;
    else
        p->starved = x->starved_next;
    if (x->starved_next)
        x->starved_next->starved_prev = x->starved_prev;
    x->starved_prev = x->starved_next = NULL;
    if (!p->starved)
        (void)uv_timer_stop(&p->budget_timer);
}

/* A paused download goes on once all clients hold under three quarters of the budget, or
 * its own client half its share. */
static bool may_go_on(const struct px *x)
{
    return http_server_queued(http_req_server(x->req)) <= x->p->o.queued_budget / 4 * 3 ||
           http_resp_queued(x->req) <= LIMIT_ROUTER_QUEUED_SHARE / 2;
}

static void on_budget(uv_timer_t *t)
{
    struct proxy *p = t->data;
    struct px *x = p->starved, *next;
    for (size_t n = p->inflight; x && n > 0; x = next, n--) {
        next = x->starved_next; /* x may come back to the front (or finish) below */
        if (!may_go_on(x))
            continue;
        proxy__unstarve(x);
        proxy__resp_drain(x->req, x);
    }
}

/* x stops reading its sandbox (as when its own client's queue is full) until the budget
 * timer lets it go on. */
static void starve(struct px *x)
{
    struct proxy *p = x->p;
    block(x);
    x->starved_prev = NULL;
    x->starved_next = p->starved;
    if (p->starved)
        p->starved->starved_prev = x;
    p->starved = x;
    x->starved = true;
    if (!uv_is_active((uv_handle_t *)&p->budget_timer))
        (void)uv_timer_start(&p->budget_timer, on_budget, LIMIT_ROUTER_QUEUED_CHECK / USEC_PER_MSEC,
                             LIMIT_ROUTER_QUEUED_CHECK / USEC_PER_MSEC);
}

/* Writes data to the client; false when the exchange must wait for a drain (its client's
 * queue full, or all clients' over the budget) or ended. */
static bool write_client(struct px *x, struct str data)
{
    if (data.len == 0)
        return true;
    int r = http_resp_write(x->req, data.p, data.len);
    if (r < 0) {
        proxy__px_fail(x, 502, "", NULL);
        return false;
    }
    x->bytes_out += data.len;
    if (r == 1) {
        block(x);
        return false;
    }
    if (over_budget(x)) {
        starve(x);
        return false;
    }
    return true;
}

/* True (the exchange now waits for the drain) when the client's queue is already full:
 * a response that starts behind others still queued on a keep-alive connection. Asked
 * before any byte is taken from the upstream's, which a refused write (-EAGAIN) would
 * otherwise have lost, failing the whole connection. */
static bool client_full(struct px *x)
{
    if (http_resp_write(x->req, NULL, 0) != -EAGAIN)
        return false;
    block(x);
    return true;
}

static void body_step(struct px *x)
{
    struct http_parse_err e;
    while (!x->finished && !x->blocked && x->in.len && !client_full(x)) {
        if (x->head->body == HTTP_BODY_CHUNKED) {
            size_t used = 0;
            struct str data = STR_NULL;
            int r = http_chunked_feed(&x->chunked, x->in.data, x->in.len, &used, &data, &e);
            if (r < 0) {
                proxy__px_fail(x, 502, "", "other");
                return;
            }
            bool ok = write_client(x, data);
            if (x->finished)
                return; /* the client is gone (a failed write ended the exchange) */
            buf_consume(&x->in, used);
            if (r == 1) {
                complete(x);
                return;
            }
            if (!ok || used == 0)
                return;
            continue;
        }
        size_t n = x->in.len;
        if (x->head->body == HTTP_BODY_LENGTH && n > x->body_left)
            n = (size_t)x->body_left;
        struct str data = str_make(x->in.data, n);
        x->body_left -= x->head->body == HTTP_BODY_LENGTH ? n : 0;
        bool ok = write_client(x, data);
        if (x->finished)
            return; /* the client is gone (a failed write ended the exchange) */
        buf_consume(&x->in, n);
        if (x->head->body == HTTP_BODY_LENGTH && x->body_left == 0) {
            complete(x);
            return;
        }
        if (!ok)
            return;
    }
    if (!x->finished && x->head->body == HTTP_BODY_LENGTH && x->body_left == 0)
        complete(x);
}

void proxy__resp_process(struct px *x)
{
    while (!x->finished && !x->head_done) {
        int r = process_head(x);
        if (r <= 0)
            return;
    }
    if (!x->finished)
        body_step(x);
}

void proxy__resp_drain(struct http_req *req, void *ctx)
{
    struct px *x = ctx;
    (void)req;
    if (x->finished || !x->blocked)
        return;
    proxy__unstarve(x); /* its own client drained: the budget is looked at again on write */
    x->blocked = false;
    x->last_activity = clock_now();
    body_step(x);
    if (!x->finished && !x->blocked && x->up && upconn_read(x->up, true) < 0)
        proxy__px_fail(x, 502, "", "eof");
}

/* The upstream connection ended: cleanly (EOF) or not (a reset, an error). Only a clean
 * end completes a body delimited by the connection's close: a reset cut it short. */
static void on_up_eof(struct px *x, bool clean)
{
    x->up_eof = true;
    if (!x->head_done) {
        bad_gateway(x, "eof");
        return;
    }
    if (x->head->body == HTTP_BODY_UNTIL_CLOSE && clean) {
        complete(x);
        return;
    }
    proxy__px_fail(x, 502, "", "eof"); /* cut off: the client sees the connection end */
}

void proxy__px_up_read(struct px *x, ssize_t n, const char *data)
{
    if (x->finished)
        return;
    if (n < 0) {
        if (!x->head_done && x->in.len == 0 && proxy__px_retry(x))
            return;
        on_up_eof(x, n == UV_EOF);
        return;
    }
    x->last_activity = clock_now();
    x->got_bytes = true;
    if (buf_append(&x->in, data, (size_t)n) < 0) {
        bad_gateway(x, "other"); /* a head past the limit */
        return;
    }
    proxy__resp_process(x);
    if (!x->finished && x->head_done && x->head->body == HTTP_BODY_UNTIL_CLOSE && x->up_eof)
        complete(x);
}
