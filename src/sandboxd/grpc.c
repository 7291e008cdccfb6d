/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC server on nghttp2 (see grpc.h). Memory is bounded per connection: request bodies
 * (one message each, at most LIMIT_SBD_GRPC_MESSAGE, LIMIT_SBD_GRPC_CONN_REQ in
 * total), each call's response queue (its producer is paused above the high-water mark
 * and resumed when HTTP/2 flow control lets the queue drain), and the socket backlog
 * (nghttp2 is not asked for more frames, and the socket not read, while it is full). */
#include "sandboxd/grpc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "common/buf.h"
#include "common/dlist.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/pct.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "http/sock.h"
#include "sandboxd/util.h"

/* A unary answer fits a connection's budget of answers not taken. */
_Static_assert(LIMIT_SBD_GRPC_REPLY + 5 < LIMIT_SBD_GRPC_CONN_OUT, "reply over the budget");

struct gconn;

struct sbd_gcall {
    struct gconn *c;
    struct sbd_gcall *prev, *next;
    int32_t id;
    const struct sbd_grpc_method *m;
    struct buf req; /* the request body: 5-byte prefix + one message */
    usec_t timeout;
    const char *http_status;
    bool authorized, bad_type, post, dispatched, finished, headers_sent, deferred;
    bool drain_pending;
    bool reset_after;  /* refused at its HEADERS: reset once the answer has been sent */
    bool headed;       /* its head is in and was let through (conn_running) */
    size_t head_bytes; /* its header list as HTTP/2 counts it (name + value + 32 each) */
    enum sbd_gstatus status;
    char *msg;      /* percent-encoded grpc-message, or NULL */
    struct buf out; /* framed response messages; out_off bytes of it already sent */
    size_t out_off;
    void (*cancel)(void *ctx);
    void (*drain)(void *ctx);
    void *cb_ctx;
};

struct gconn {
    struct sbd_grpc *g;
    struct gconn *prev, *next;
    uv_tcp_t tcp;
    uv_timer_t idle;
    int handles; /* tcp and idle, until closed */
    bool has_tcp, idle_goaway;
    usec_t last_active;
    size_t unsent_seen; /* conn_unsent at the last idle tick: less since is progress */
    nghttp2_session *ng;
    struct sbd_gcall *calls;
    size_t ncalls;
    double cancels;    /* tokens for started calls ended by a reset (cancelled) */
    usec_t cancels_at; /* when they were last refilled */
    size_t req_bytes;  /* buffered request bodies */
    size_t backlog;    /* bytes handed to uv_write and not yet written */
    int in_cb;         /* inside nghttp2_session_mem_recv / mem_send */
    int in_api;        /* inside sbd_gcall_send / _finish: a handler is on the stack */
    bool want_flush, close_pending, closing, reading;
};

struct sbd_grpc {
    uv_loop_t *loop;
    struct sbd_grpc_opts o;
    char *host, *token;
    uv_tcp_t listener;
    uv_timer_t grace;
    int handles; /* listener and grace timer not yet closed */
    bool listening, stopping, grace_init;
    uint16_t port;
    struct gconn *conns;
    size_t nconns; /* accepted and not yet closed (their handles may still be closing) */
    void (*done)(void *ctx);
    void *done_ctx;
};

static void conn_flush(struct gconn *c);
static void conn_close(struct gconn *c);

/* Flushes on behalf of a handler: a connection failing now is closed from the loop
 * later, so the handler's state (which the close would cancel and free) outlives its
 * call into us. */
static void api_flush(struct gconn *c)
{
    c->in_api++;
    conn_flush(c);
    c->in_api--;
}
static void grpc_maybe_done(struct sbd_grpc *g);

/* ---- calls ------------------------------------------------------------------------- */

usec_t sbd_gcall_timeout(const struct sbd_gcall *c)
{
    return c->timeout;
}

size_t sbd_gcall_queued(const struct sbd_gcall *c)
{
    return c->out.len - c->out_off;
}

void sbd_gcall_set_callbacks(struct sbd_gcall *c, void (*cancel)(void *ctx),
                             void (*drain)(void *ctx), void *ctx)
{
    c->cancel = cancel;
    c->drain = drain;
    c->cb_ctx = ctx;
}

static struct sbd_gcall *call_new(struct gconn *c, int32_t id)
{
    struct sbd_gcall *call = XNEW(struct sbd_gcall);
    call->c = c;
    call->id = id;
    call->http_status = "200";
    call->bad_type = true; /* until an application/grpc content-type comes (none: 415) */
    buf_init(&call->req, LIMIT_SBD_GRPC_MESSAGE + 5);
    /* a stream's message on top of a full queue, or a unary call's one answer */
    buf_init(&call->out, LIMIT_SBD_GRPC_REPLY + 5 + LIMIT_SBD_GRPC_QUEUE + LIMIT_SBD_CHUNK + 64);
    DLIST_PUSH(c->calls, call);
    c->ncalls++;
    c->last_active = clock_now();
    return call;
}

/* The stream is gone: tells an unfinished handler, then frees the call. */
static void call_free(struct sbd_gcall *call)
{
    struct gconn *c = call->c;
    if (call->dispatched && !call->finished && call->cancel) {
        call->finished = true;
        call->cancel(call->cb_ctx);
    }
    DLIST_REMOVE(c->calls, call);
    c->ncalls--;
    c->last_active = clock_now();
    c->req_bytes -= call->req.len;
    buf_done(&call->req);
    buf_done(&call->out);
    xfree(call->msg);
    xfree(call);
}

static nghttp2_nv make_nv(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                        NGHTTP2_NV_FLAG_NONE};
}

static void submit_trailers(struct sbd_gcall *call)
{
    char st[16];
    (void)snprintf(st, sizeof(st), "%d", (int)call->status);
    nghttp2_nv nv[2] = {make_nv("grpc-status", st)};
    size_t n = 1;
    if (call->msg)
        nv[n++] = make_nv("grpc-message", call->msg);
    (void)nghttp2_submit_trailer(call->c->ng, call->id, nv, n);
}

static ssize_t read_data(nghttp2_session *ng, int32_t id, uint8_t *b, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    struct sbd_gcall *call = src->ptr;
    (void)ng, (void)id, (void)ud;
    size_t avail = sbd_gcall_queued(call);
    size_t n = len < avail ? len : avail;
    if (n) {
        memcpy(b, call->out.data + call->out_off, n);
        call->out_off += n;
    }
    if (call->out_off == call->out.len) {
        buf_reset(&call->out);
        call->out_off = 0;
    }
    if (call->out.len == 0 && call->finished) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        submit_trailers(call);
        return (ssize_t)n;
    }
    if (sbd_gcall_queued(call) < LIMIT_SBD_GRPC_QUEUE / 2)
        call->drain_pending = true;
    if (n == 0) {
        call->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

static void submit_headers(struct sbd_gcall *call)
{
    nghttp2_nv nv[] = {make_nv(":status", "200"), make_nv("content-type", "application/grpc")};
    nghttp2_data_provider prd = {.source.ptr = call, .read_callback = read_data};
    call->headers_sent = true;
    (void)nghttp2_submit_response(call->c->ng, call->id, nv, ARRAY_SIZE(nv), &prd);
}

/* Response bytes the connection's calls hold and the client has not taken yet (it
 * grants no flow-control window, say). */
static size_t conn_unsent(const struct gconn *c)
{
    size_t n = 0;
    for (const struct sbd_gcall *call = c->calls; call; call = call->next)
        n += sbd_gcall_queued(call);
    return n;
}

/* The same for all connections of the server. */
static size_t all_unsent(const struct sbd_grpc *g)
{
    size_t n = 0;
    for (const struct gconn *c = g->conns; c; c = c->next)
        n += conn_unsent(c);
    return n;
}

/* True when n more bytes would take the connection, or all of them, past their budget of
 * answers not taken. */
static bool over_budget(const struct gconn *c, size_t n)
{
    return conn_unsent(c) + n > LIMIT_SBD_GRPC_CONN_OUT ||
           all_unsent(c->g) + n > c->g->o.max_unsent;
}

static int send_checked(struct sbd_gcall *call, const uint8_t *msg, size_t n, bool budget);

int sbd_gcall_send(struct sbd_gcall *call, const uint8_t *msg, size_t n)
{
    /* Each call may hold a whole message, and 128 calls a connection: a client that
     * grants no window does not get them all kept for it. A stream's chunk under the
     * queue's size is not refused: its queue bounds it (its process pauses), and the
     * process cap the live streams; a finished stream's queue counts against the
     * budget that admits new calls (dispatch). */
    if (n > LIMIT_SBD_GRPC_MESSAGE)
        return -E2BIG;
    return send_checked(call, msg, n, n > LIMIT_SBD_GRPC_QUEUE);
}

int sbd_gcall_reply(struct sbd_gcall *call, const uint8_t *msg, size_t n)
{
    if (n > LIMIT_SBD_GRPC_REPLY)
        return -E2BIG;
    return send_checked(call, msg, n, true);
}

static int send_checked(struct sbd_gcall *call, const uint8_t *msg, size_t n, bool budget)
{
    if (call->finished)
        return -EPIPE;
    uint8_t pre[5] = {0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    buf_consume(&call->out, call->out_off); /* what HTTP/2 took already */
    call->out_off = 0;
    if (call->out.len + sizeof(pre) + n > call->out.limit)
        return -E2BIG;
    if (budget && over_budget(call->c, sizeof(pre) + n))
        return -ENOBUFS;
    (void)buf_append(&call->out, pre, sizeof(pre));
    (void)buf_append(&call->out, msg, n);
    if (!call->headers_sent) {
        submit_headers(call);
    } else if (call->deferred) {
        call->deferred = false;
        (void)nghttp2_session_resume_data(call->c->ng, call->id);
    }
    api_flush(call->c);
    return 0;
}

/* grpc-message is percent-encoded (printable ASCII except '%' passes). */
static char *encode_message(const char *msg)
{
    struct buf b;
    buf_init(&b, 4096);
    if (pct_encode(&b, msg, PCT_KEEP_PRINTABLE) < 0)
        (void)buf_puts(&b, "message%20too%20long");
    return buf_steal(&b);
}

/* Trailers-only response: one HEADERS frame with the status, ending the stream. */
static void submit_trailers_only(struct sbd_gcall *call)
{
    char st[16];
    (void)snprintf(st, sizeof(st), "%d", (int)call->status);
    nghttp2_nv nv[4] = {make_nv(":status", call->http_status),
                        make_nv("content-type", "application/grpc"), make_nv("grpc-status", st)};
    size_t n = 3;
    if (call->msg)
        nv[n++] = make_nv("grpc-message", call->msg);
    call->headers_sent = true;
    (void)nghttp2_submit_response(call->c->ng, call->id, nv, n, NULL);
}

void sbd_gcall_finish(struct sbd_gcall *call, enum sbd_gstatus status, const char *msg)
{
    if (call->finished)
        return;
    call->finished = true;
    call->status = status;
    call->msg = msg && *msg ? encode_message(msg) : NULL;
    if (!call->headers_sent) {
        submit_trailers_only(call);
    } else if (call->deferred) {
        call->deferred = false;
        (void)nghttp2_session_resume_data(call->c->ng, call->id);
    }
    /* Nothing more is read from a finished call. */
    call->c->req_bytes -= call->req.len;
    buf_done(&call->req);
    api_flush(call->c);
}

/* ---- request dispatch -------------------------------------------------------------- */

static int parse_timeout(const uint8_t *v, size_t n, usec_t *ret)
{
    if (n < 2 || n > 9)
        return -EINVAL;
    uint64_t x = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -EINVAL;
        x = x * 10 + (v[i] - '0');
    }
    static const struct {
        char unit;
        uint64_t num, den;
    } units[] = {{'H', 3600000000ull, 1}, {'M', 60000000ull, 1}, {'S', 1000000ull, 1},
                 {'m', 1000, 1},          {'u', 1, 1},           {'n', 1, 1000}};
    for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
        if (units[i].unit == (char)v[n - 1]) {
            usec_t t = (usec_t)(x * units[i].num / units[i].den);
            *ret = t ? t : 1;
            return 0;
        }
    }
    return -EINVAL;
}

static bool header_is(const uint8_t *name, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(name, want, n) == 0;
}

static void on_request_header(struct sbd_gcall *call, const uint8_t *name, size_t nl,
                              const uint8_t *value, size_t vl)
{
    struct sbd_grpc *g = call->c->g;
    if (header_is(name, nl, ":path")) {
        for (size_t i = 0; i < g->o.nmethods; i++)
            if (vl == strlen(g->o.methods[i].path) && memcmp(value, g->o.methods[i].path, vl) == 0)
                call->m = &g->o.methods[i];
    } else if (header_is(name, nl, ":method")) {
        call->post = vl == 4 && memcmp(value, "POST", 4) == 0;
    } else if (header_is(name, nl, "content-type")) {
        call->bad_type = vl < 16 || memcmp(value, "application/grpc", 16) != 0 ||
                         (vl > 16 && value[16] != '+' && value[16] != ';');
    } else if (header_is(name, nl, "grpc-timeout")) {
        if (parse_timeout(value, vl, &call->timeout) < 0)
            call->timeout = 0;
    } else if (header_is(name, nl, "authorization") && g->token) {
        struct str h = str_make((const char *)value, vl);
        call->authorized = h.len > 7 && str_eq_nocase(str_make(h.p, 7), STR_LIT("Bearer ")) &&
                           sbd_secure_eq(str_trim(str_make(h.p + 7, h.len - 7)), str_c(g->token));
    }
}

/* Checks the request's head (type, method, token); finishes the call itself on failure.
 * Runs once the head is in, so a refused request's body is never buffered. */
static bool check_head(struct sbd_gcall *call)
{
    if (call->finished)
        return false;
    if (call->head_bytes > LIMIT_SBD_GRPC_HEADERS) {
        sbd_gcall_finish(call, SBD_GRPC_RESOURCE_EXHAUSTED, "request headers over 16 KiB");
        return false;
    }
    if (call->bad_type || !call->post) {
        call->http_status = "415";
        sbd_gcall_finish(call, SBD_GRPC_INTERNAL, "content-type must be application/grpc");
        return false;
    }
    if (!call->m) {
        sbd_gcall_finish(call, SBD_GRPC_UNIMPLEMENTED, "unknown method");
        return false;
    }
    if (call->c->g->token && !call->authorized) {
        sbd_gcall_finish(call, SBD_GRPC_UNAUTHENTICATED, "missing or invalid bearer token");
        return false;
    }
    return true;
}

/* Checks the request's one message; finishes the call itself on failure. Returns the
 * message length or -1. */
static ssize_t check_message(struct sbd_gcall *call)
{
    const uint8_t *b = (const uint8_t *)call->req.data;
    size_t len = call->req.len;
    if (len >= 1 && b[0] != 0) {
        sbd_gcall_finish(call, SBD_GRPC_UNIMPLEMENTED, "compressed messages are not supported");
        return -1;
    }
    uint32_t n =
        len >= 5 ? (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4] : 0;
    if (len < 5 || n != len - 5) {
        sbd_gcall_finish(call, SBD_GRPC_INVALID_ARGUMENT,
                         "the request must be exactly one message");
        return -1;
    }
    return (ssize_t)n;
}

/* Lets the call in (once): not while stopping, its head checked, within the budget of
 * answers not taken. Finishes the call itself and returns false on failure. */
static bool admit(struct sbd_gcall *call)
{
    if (call->finished)
        return false;
    if (call->dispatched)
        return true;
    call->dispatched = true;
    struct sbd_grpc *g = call->c->g;
    if (g->stopping) {
        sbd_gcall_finish(call, SBD_GRPC_UNAVAILABLE, "sandboxd is shutting down");
        return false;
    }
    if (!check_head(call))
        return false;
    if (over_budget(call->c, 0)) {
        /* its answers would only add to those no client takes */
        sbd_gcall_finish(call, SBD_GRPC_RESOURCE_EXHAUSTED, SBD_GRPC_UNSENT_MSG);
        return false;
    }
    if (g->o.activity)
        g->o.activity(g->o.ctx);
    return true;
}

/* A streaming method: hands each complete message over as it arrives, and the end of the
 * client's side (end) once every message before it was. */
static void stream_in(struct sbd_gcall *call, bool end)
{
    void *ctx = call->c->g->o.ctx;
    while (!call->finished && call->req.len >= 5) {
        const uint8_t *b = (const uint8_t *)call->req.data;
        size_t n = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
        if (call->req.len < 5 + n)
            break;
        if (b[0] != 0) {
            sbd_gcall_finish(call, SBD_GRPC_UNIMPLEMENTED, "compressed messages are not supported");
            return;
        }
        call->m->fn(call, b + 5, n, ctx);
        if (call->finished)
            return; /* sbd_gcall_finish let the request go */
        call->c->req_bytes -= 5 + n;
        buf_consume(&call->req, 5 + n);
    }
    if (!end || call->finished)
        return;
    if (call->req.len > 0)
        sbd_gcall_finish(call, SBD_GRPC_INVALID_ARGUMENT, "the last message is cut short");
    else
        call->m->fn(call, NULL, 0, ctx);
}

static void dispatch(struct sbd_gcall *call)
{
    if (call->dispatched && !(call->m && call->m->stream_in))
        return;
    if (!admit(call))
        return;
    if (call->m->stream_in) {
        stream_in(call, true);
        return;
    }
    ssize_t n = check_message(call);
    if (n < 0)
        return;
    call->m->fn(call, (const uint8_t *)call->req.data + 5, (size_t)n, call->c->g->o.ctx);
    /* The handler has unpacked what it needs (protobuf-c copies): the request leaves the
     * connection's budget now, not when the call ends (a Start lasts as long as its
     * process, and four large ones held every later call of the channel off). The call is
     * still alive: it is freed from nghttp2's stream close, never inside a handler. */
    call->c->req_bytes -= call->req.len;
    buf_done(&call->req);
}

/* ---- nghttp2 callbacks ------------------------------------------------------------- */

static ssize_t cb_send(nghttp2_session *ng, const uint8_t *d, size_t n, int flags, void *ud)
{
    (void)ng, (void)d, (void)flags, (void)ud;
    return (ssize_t)n; /* only used by sbd_grpc_feed's session; sockets use mem_send */
}

static int cb_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    struct gconn *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (c->ncalls >= LIMIT_SBD_GRPC_STREAMS || c->g->stopping) {
        (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                        NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    struct sbd_gcall *call = call_new(c, f->hd.stream_id);
    (void)nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, call);
    return 0;
}

static int cb_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags, (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct sbd_gcall *call = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (!call)
        return 0;
    /* SETTINGS_MAX_HEADER_LIST_SIZE is advertised, not enforced by nghttp2: past it the
     * headers are not looked at, and check_head refuses the call */
    call->head_bytes += nl + vl + 32;
    if (call->head_bytes <= LIMIT_SBD_GRPC_HEADERS)
        on_request_header(call, name, nl, value, vl);
    return 0;
}

/* Ends a call whose body is too large while it arrives; the stream is reset once the
 * answer has gone out, so that the client stops sending the rest (as for a call refused
 * at its HEADERS). */
static void refuse_body(struct sbd_gcall *call)
{
    call->reset_after = true;
    sbd_gcall_finish(call, SBD_GRPC_RESOURCE_EXHAUSTED, "request message too large");
}

/* Takes request bytes; a declared or actual body past the limit ends the call at once. */
static void take_data(struct gconn *c, struct sbd_gcall *call, const uint8_t *d, size_t n)
{
    if (call->finished)
        return;
    if (c->req_bytes + n > LIMIT_SBD_GRPC_CONN_REQ || buf_append(&call->req, d, n) < 0) {
        refuse_body(call);
        return;
    }
    c->req_bytes += n;
    const uint8_t *b = (const uint8_t *)call->req.data;
    if (call->req.len >= 5) {
        uint32_t len = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
        if (len > LIMIT_SBD_GRPC_MESSAGE)
            refuse_body(call);
    }
}

static int cb_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *d, size_t n,
                         void *ud)
{
    (void)flags;
    struct sbd_gcall *call = nghttp2_session_get_stream_user_data(ng, id);
    if (call)
        take_data(ud, call, d, n);
    if (call && call->m && call->m->stream_in && !call->finished && admit(call))
        stream_in(call, false);
    return 0;
}

static int cb_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    (void)ud;
    if (f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS)
        return 0;
    struct sbd_gcall *call = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (!call)
        return 0;
    bool head = f->hd.type == NGHTTP2_HEADERS && !call->headed;
    if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
        dispatch(call);
    else if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
        call->reset_after = !check_head(call); /* refused: answered before its body */
    /* Only a call its head let through, and not answered yet, keeps the connection busy
     * (on_idle): a refused one's answer may never be read, and a client without the
     * token sending only those must not hold a connection slot for ever (it did when
     * every call with a header block counted). Inside the callback the call is not
     * freed. */
    if (head && !call->finished)
        call->headed = true;
    return 0;
}

/* The answer to a call refused at its HEADERS has gone out: the client is asked to stop
 * sending the body (RFC 9113 §8.1: RST_STREAM with NO_ERROR after a complete response).
 * Not before: a reset queued with the answer can overtake it. */
static int cb_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    struct sbd_gcall *call = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (call && call->reset_after) {
        call->reset_after = false;
        (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

/* A started call ended by a reset (the client's, or one the client provoked, such as a
 * window update past 2^31-1): takes a token. Each started a process that is killed at
 * once; nghttp2 (before 1.67) limits only the resets the client sends, so a client could
 * start and cancel processes without end. Returns false once the tokens are spent
 * (LIMIT_SBD_GRPC_RESETS at once, LIMIT_SBD_GRPC_RESET_HZ a second). */
static bool cancel_allowed(struct gconn *c)
{
    usec_t now = clock_now();
    c->cancels += (double)(now - c->cancels_at) * LIMIT_SBD_GRPC_RESET_HZ / USEC_PER_SEC;
    if (c->cancels > LIMIT_SBD_GRPC_RESETS)
        c->cancels = LIMIT_SBD_GRPC_RESETS;
    c->cancels_at = now;
    if (c->cancels < 1)
        return false;
    c->cancels -= 1;
    return true;
}

static int cb_stream_close(nghttp2_session *ng, int32_t id, uint32_t err, void *ud)
{
    struct gconn *c = ud;
    struct sbd_gcall *call = nghttp2_session_get_stream_user_data(ng, id);
    if (!call)
        return 0;
    bool cancelled = err != NGHTTP2_NO_ERROR && call->dispatched && !call->finished;
    (void)nghttp2_session_set_stream_user_data(ng, id, NULL);
    call_free(call);
    if (cancelled && !cancel_allowed(c)) {
        log_warn("gRPC client cancels started calls too fast, closing its connection");
        (void)nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
    }
    return 0;
}

static int session_new(struct gconn *c)
{
    nghttp2_session_callbacks *cbs;
    nghttp2_option *opt;
    int r = nghttp2_session_callbacks_new(&cbs);
    if (r < 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_send_callback(cbs, cb_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, cb_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, cb_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, cb_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, cb_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, cb_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, cb_stream_close);
    r = nghttp2_option_new(&opt);
    if (r == 0) {
        nghttp2_option_set_max_outbound_ack(opt, LIMIT_SBD_GRPC_ACKS);
        nghttp2_option_set_max_send_header_block_length(opt, 16384);
        r = nghttp2_session_server_new2(&c->ng, cbs, c, opt);
        nghttp2_option_del(opt);
    }
    nghttp2_session_callbacks_del(cbs);
    if (r < 0)
        return -ENOMEM;
    nghttp2_settings_entry s[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, LIMIT_SBD_GRPC_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, LIMIT_SBD_GRPC_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, LIMIT_SBD_GRPC_HEADERS},
    };
    if (nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, s, ARRAY_SIZE(s)) < 0)
        return -ENOMEM;
    /* The connection's window too (SETTINGS sets the streams' only; it stayed at 64 KiB,
     * so a 4 MiB request took about 64 round trips): up to the connection's budget. */
    return nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0,
                                                 (int32_t)LIMIT_SBD_GRPC_CONN_REQ) < 0
               ? -ENOMEM
               : 0;
}

/* ---- connections ------------------------------------------------------------------- */

struct wreq {
    uv_write_t w;
    struct gconn *c;
    size_t len;
    char data[];
};

static void on_written(uv_write_t *w, int status)
{
    struct wreq *wr = (struct wreq *)w;
    struct gconn *c = wr->c;
    c->backlog -= wr->len;
    xfree(wr);
    if (status < 0)
        conn_close(c);
    else
        conn_flush(c);
}

static int conn_write(struct gconn *c, const struct buf *b)
{
    if (!c->has_tcp || b->len == 0)
        return 0;
    struct wreq *wr = xmalloc(sizeof(*wr) + b->len);
    wr->c = c;
    wr->len = b->len;
    memcpy(wr->data, b->data, b->len);
    uv_buf_t ub = uv_buf_init(wr->data, (unsigned)b->len);
    int r = uv_write(&wr->w, (uv_stream_t *)&c->tcp, &ub, 1, on_written);
    if (r < 0) {
        xfree(wr);
        return r;
    }
    c->backlog += b->len;
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h, (void)suggested;
    static _Thread_local char chunk[LIMIT_SBD_CHUNK]; /* per loop thread; consumed at once */
    *b = uv_buf_init(chunk, sizeof(chunk));
}

static void on_conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

/* Reads only while the socket backlog has room: a client that does not read its
 * responses stops being read, so it cannot queue unbounded PING or SETTINGS answers. */
static void update_reading(struct gconn *c)
{
    if (!c->has_tcp || c->closing)
        return;
    bool want = c->backlog < LIMIT_SBD_GRPC_BACKLOG;
    if (want == c->reading)
        return;
    c->reading = want;
    if (want)
        (void)uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_conn_read);
    else
        (void)uv_read_stop((uv_stream_t *)&c->tcp);
}

static void run_drains(struct gconn *c)
{
    for (struct sbd_gcall *call = c->calls; call; call = call->next) {
        if (!call->drain_pending)
            continue;
        call->drain_pending = false;
        if (call->drain && !call->finished)
            call->drain(call->cb_ctx);
    }
}

/* Asks nghttp2 for frames while the socket backlog has room and writes them in batches. */
static int pump(struct gconn *c)
{
    struct buf b;
    buf_init(&b, LIMIT_SBD_GRPC_BACKLOG + 65536);
    int r = 0;
    c->in_cb++;
    while (c->backlog + b.len < LIMIT_SBD_GRPC_BACKLOG) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(c->ng, &p);
        if (n <= 0) {
            r = n < 0 ? -EPROTO : 0;
            break;
        }
        if (buf_append(&b, p, (size_t)n) < 0) {
            r = -E2BIG;
            break;
        }
    }
    c->in_cb--;
    if (r == 0)
        r = conn_write(c, &b);
    buf_done(&b);
    return r;
}

static void conn_flush(struct gconn *c)
{
    if (c->closing)
        return;
    if (c->in_cb) {
        c->want_flush = true;
        return;
    }
    do {
        c->want_flush = false;
        if (pump(c) < 0) {
            conn_close(c);
            return;
        }
        run_drains(c);
    } while (c->want_flush && !c->close_pending);
    if (c->close_pending || (!nghttp2_session_want_read(c->ng) &&
                             !nghttp2_session_want_write(c->ng) && c->backlog == 0)) {
        conn_close(c);
        return;
    }
    update_reading(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    struct gconn *c = h->data;
    struct sbd_grpc *g = c->g;
    if (--c->handles > 0)
        return;
    xfree(c);
    g->nconns--;
    grpc_maybe_done(g);
}

static void on_close_later(uv_timer_t *t)
{
    conn_close(t->data);
}

static void conn_close(struct gconn *c)
{
    if (c->closing)
        return;
    if (c->in_cb) {
        c->close_pending = true;
        return;
    }
    if (c->in_api) {
        c->close_pending = true;
        if (c->has_tcp)
            (void)uv_timer_start(&c->idle, on_close_later, 0, 0);
        return;
    }
    c->closing = true;
    while (c->calls)
        call_free(c->calls); /* unfinished handlers are cancelled */
    nghttp2_session_del(c->ng);
    c->ng = NULL;
    struct sbd_grpc *g = c->g;
    DLIST_REMOVE(g->conns, c);
    if (c->has_tcp) {
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
        uv_close((uv_handle_t *)&c->idle, on_conn_closed);
    } else {
        xfree(c);
        g->nconns--;
    }
}

static void on_conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct gconn *c = s->data;
    if (n == 0)
        return;
    if (n < 0) {
        conn_close(c); /* EOF or error: running calls are cancelled */
        return;
    }
    /* Not every byte makes the connection active: PINGs alone (any client can send them,
     * no token needed) would hold one of the connection slots for ever. Calls do. */
    c->in_cb++;
    ssize_t r = nghttp2_session_mem_recv(c->ng, (const uint8_t *)b->base, (size_t)n);
    c->in_cb--;
    if (r < 0) {
        log_debug("grpc: closing a connection\terror=\"%s\"", nghttp2_strerror((int)r));
        c->close_pending = true;
    }
    conn_flush(c);
}

static struct gconn *conn_new(struct sbd_grpc *g)
{
    struct gconn *c = XNEW(struct gconn);
    c->g = g;
    DLIST_PUSH(g->conns, c);
    g->nconns++;
    return c;
}

/* Whether a call of c is still being carried out (its head in, its handler not done). */
static bool conn_running(const struct gconn *c)
{
    for (const struct sbd_gcall *call = c->calls; call; call = call->next)
        if (call->headed && !call->finished)
            return true;
    return false;
}

/* A connection without running calls and without progress for the idle timeout gets
 * GOAWAY (clients reconnect on their next call); one that has not closed by the next tick
 * (it does not read) is closed. A call whose header block never completed does not
 * count: nghttp2 begins a call at the first byte of a HEADERS frame, before the token can
 * be checked, so a client that stops there would otherwise hold a connection slot for
 * ever without a token. Nor does a finished call whose answer waits for a client that
 * takes none of it (no flow-control window): its bytes went with the connection only
 * once that stream closed, which such a client never lets happen. Answers taken since
 * the last tick are progress (PINGs are not). */
static void on_idle(uv_timer_t *t)
{
    struct gconn *c = t->data;
    usec_t timeout = c->g->o.idle_timeout;
    size_t unsent = conn_unsent(c);
    if (unsent < c->unsent_seen)
        c->last_active = clock_now(); /* the client took answers since the last tick */
    c->unsent_seen = unsent;
    if (conn_running(c) || clock_now() - c->last_active < timeout)
        return;
    if (c->idle_goaway) {
        conn_close(c);
        return;
    }
    c->idle_goaway = true;
    (void)nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE,
                                nghttp2_session_get_last_proc_stream_id(c->ng), NGHTTP2_NO_ERROR,
                                NULL, 0);
    conn_flush(c);
}

static void on_connection(uv_stream_t *l, int status)
{
    struct sbd_grpc *g = l->data;
    if (status < 0)
        return;
    struct gconn *c = conn_new(g);
    (void)uv_tcp_init(g->loop, &c->tcp);
    (void)uv_timer_init(g->loop, &c->idle);
    c->tcp.data = c->idle.data = c;
    c->handles = 2;
    c->has_tcp = true;
    c->last_active = c->cancels_at = clock_now();
    c->cancels = LIMIT_SBD_GRPC_RESETS;
    if (g->o.idle_timeout) {
        uint64_t ms = g->o.idle_timeout / USEC_PER_MSEC / 2 + 1;
        (void)uv_timer_start(&c->idle, on_idle, ms, ms);
    }
    if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0 || g->nconns > LIMIT_SBD_GRPC_CONNS ||
        session_new(c) < 0) {
        conn_close(c);
        return;
    }
    (void)uv_tcp_nodelay(&c->tcp, 1);
    http_sock_keepalive(&c->tcp); /* a client gone silently ends its calls (processes) */
    conn_flush(c);
}

/* ---- server ------------------------------------------------------------------------ */

int sbd_grpc_new(uv_loop_t *loop, const struct sbd_grpc_opts *o, struct sbd_grpc **ret)
{
    struct sbd_grpc *g = XNEW(struct sbd_grpc);
    g->loop = loop;
    g->o = *o;
    g->host = xstrdup(o->host ? o->host : "127.0.0.1");
    g->token = o->token && *o->token ? xstrdup(o->token) : NULL;
    g->o.host = g->host;
    g->o.token = g->token;
    if (!g->o.max_unsent)
        g->o.max_unsent = LIMIT_SBD_GRPC_ALL_OUT;
    struct sockaddr_storage ss;
    int r = uv_ip4_addr(g->host, o->port, (struct sockaddr_in *)&ss);
    if (r < 0)
        r = uv_ip6_addr(g->host, o->port, (struct sockaddr_in6 *)&ss);
    if (r == 0)
        r = uv_tcp_init(loop, &g->listener);
    if (r < 0) {
        sbd_grpc_free(g);
        return r;
    }
    g->listener.data = g;
    g->listening = true;
    g->handles++;
    /* flags 0: libuv turns IPV6_V6ONLY off, so "::" takes IPv4 too (dual-stack) */
    r = uv_tcp_bind(&g->listener, (const struct sockaddr *)&ss, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&g->listener, 511, on_connection);
    if (r < 0) {
        log_error("cannot listen for gRPC\thost=%s port=%u error=\"%s\"", g->host, o->port,
                  uv_strerror(r));
        *ret = g; /* closed by the caller's shutdown */
        return r;
    }
    int len = sizeof(ss);
    if (uv_tcp_getsockname(&g->listener, (struct sockaddr *)&ss, &len) == 0)
        g->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port);
    *ret = g;
    return 0;
}

uint16_t sbd_grpc_port(const struct sbd_grpc *g)
{
    return g ? g->port : 0;
}

static void on_handle_closed(uv_handle_t *h);

static void grpc_maybe_done(struct sbd_grpc *g)
{
    if (!g->stopping || g->nconns > 0)
        return;
    if (g->grace_init) {
        g->grace_init = false;
        uv_close((uv_handle_t *)&g->grace, on_handle_closed);
    }
    if (g->handles > 0 || !g->done)
        return;
    void (*done)(void *) = g->done;
    g->done = NULL;
    done(g->done_ctx);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct sbd_grpc *g = h->data;
    g->handles--;
    grpc_maybe_done(g);
}

static void on_grace(uv_timer_t *t)
{
    struct sbd_grpc *g = t->data;
    while (g->conns)
        conn_close(g->conns);
}

void sbd_grpc_shutdown(struct sbd_grpc *g, usec_t grace, void (*done)(void *ctx), void *ctx)
{
    g->stopping = true;
    g->done = done;
    g->done_ctx = ctx;
    if (g->listening) {
        g->listening = false;
        uv_close((uv_handle_t *)&g->listener, on_handle_closed);
    }
    for (struct gconn *c = g->conns, *next; c; c = next) {
        next = c->next;
        (void)nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE,
                                    nghttp2_session_get_last_proc_stream_id(c->ng),
                                    NGHTTP2_NO_ERROR, NULL, 0);
        conn_flush(c);
    }
    if (g->nconns > 0) {
        (void)uv_timer_init(g->loop, &g->grace);
        g->grace.data = g;
        g->handles++;
        g->grace_init = true;
        (void)uv_timer_start(&g->grace, on_grace, grace / USEC_PER_MSEC + 1, 0);
        uv_unref((uv_handle_t *)&g->grace);
    }
    grpc_maybe_done(g);
}

void sbd_grpc_free(struct sbd_grpc *g)
{
    if (!g)
        return;
    xfree(g->host);
    xfree(g->token);
    xfree(g);
}

/* ---- fuzzing ----------------------------------------------------------------------- */

void sbd_grpc_feed(const struct sbd_grpc_opts *o, const uint8_t *data, size_t n)
{
    struct sbd_grpc g = {.o = *o, .stopping = false};
    g.token = (char *)o->token;
    struct gconn *c = conn_new(&g);
    if (session_new(c) == 0) {
        static const char magic[] = NGHTTP2_CLIENT_MAGIC;
        c->in_cb++;
        ssize_t r =
            nghttp2_session_mem_recv(c->ng, (const uint8_t *)magic, NGHTTP2_CLIENT_MAGIC_LEN);
        if (r >= 0)
            (void)nghttp2_session_mem_recv(c->ng, data, n);
        c->in_cb--;
        conn_flush(c);
    }
    if (g.conns)
        conn_close(g.conns);
}
