/* SPDX-License-Identifier: Apache-2.0 */
/* The process API over WebSocket: GET /v1/processes/ws. The client's first text message
 * is the process request (as for POST /v1/processes); the server then sends the same
 * events as text messages ({"type":"start"|"stdout"|"stderr"|"exit", ...}) and closes
 * with 1000 after the exit. Client messages after the start: binary = stdin bytes, or
 * JSON {"type":"stdin","data":"<base64>"} | {"type":"stdin","text":"..."} |
 * {"type":"stdin_close"} | {"type":"signal","signal":"SIGINT"} |
 * {"type":"resize","cols":C,"rows":R}. A control message that cannot be applied gets an
 * {"type":"error"} event and changes nothing; the socket stays open (an error about the
 * process request closes it with 1008). Closing the socket kills the process group. */
#include <errno.h>
#include <string.h>

#include "common/base64.h"
#include "common/limits.h"
#include "common/xalloc.h"
#include "http/ws.h"
#include "sandboxd/api_proc.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

struct wsp {
    struct sbd *d;
    struct http_ws *ws;
    struct sbd_proc *p;
    bool exited;
    /* stdin the process's full queue refused: held, with the socket not read, until the
     * queue empties (stdin_drained); the end of input asked for after it, likewise. A
     * process that takes none of its queue for LIMIT_SBD_WS_STDIN_STALL gets the held
     * bytes dropped, with an error message saying so, and the socket is read again (its
     * control messages, a kill or the close, waited behind them). */
    bool holding, hold_close;
    struct buf held;
    uv_timer_t hold_timer;
    size_t hold_queued; /* the stdin queue when the timer was last armed */
};

static void send_json(struct wsp *w, json_t *j)
{
    struct buf b;
    buf_init(&b, SIZE_MAX);
    (void)sbd_json_dump(j, &b);
    json_decref(j);
    if (http_ws_send(w->ws, HTTP_WS_TEXT, b.data, b.len) == 1 && w->p)
        sbd_proc_pause(w->p, true);
    buf_done(&b);
}

/* An error event that leaves the socket open: a control message not applied, or stdin
 * dropped. */
static void send_notice(struct wsp *w, const char *code, const char *msg)
{
    send_json(w, json_pack("{s:s, s:s, s:s}", "type", "error", "code", code, "message", msg));
}

/* An error event about the process request, then the close (1008). */
static void send_error(struct wsp *w, const char *code, const char *msg)
{
    send_notice(w, code, msg);
    http_ws_close(w->ws, 1008, NULL);
}

static void wsp_output(struct sbd_proc *p, enum sbd_stream st, const char *data, size_t n,
                       void *ctx)
{
    (void)p;
    struct buf b64;
    buf_init(&b64, SIZE_MAX);
    (void)base64_encode(data, n, &b64);
    send_json(ctx, json_pack("{s:s, s:s%}", "type", st == SBD_STDERR ? "stderr" : "stdout", "data",
                             b64.data, b64.len));
    buf_done(&b64);
}

static void hold_end(struct wsp *w)
{
    buf_reset(&w->held);
    w->holding = w->hold_close = false;
    (void)uv_timer_stop(&w->hold_timer);
    http_ws_pause(w->ws, false);
}

static void wsp_exit(struct sbd_proc *p, const struct sbd_exit *e, void *ctx)
{
    struct wsp *w = ctx;
    (void)p;
    w->p = NULL;
    w->exited = true;
    if (w->holding) /* what was held has no reader any more */
        hold_end(w);
    send_json(w, sbd__exit_json(e));
    http_ws_close(w->ws, 1000, "exited");
}

static uint64_t stall_ms(const struct wsp *w)
{
    usec_t t = w->d->cfg.ws_stdin_stall ? w->d->cfg.ws_stdin_stall : LIMIT_SBD_WS_STDIN_STALL;
    return t / USEC_PER_MSEC ? t / USEC_PER_MSEC : 1;
}

/* The stall check: while the process takes some of its queue, the hold goes on. */
static void on_hold_timer(uv_timer_t *t)
{
    struct wsp *w = t->data;
    size_t now = w->p ? sbd_proc_stdin_queued(w->p) : 0;
    char msg[160];
    if (!w->holding)
        return;
    if (w->p && now < w->hold_queued) {
        w->hold_queued = now;
        (void)uv_timer_start(&w->hold_timer, on_hold_timer, stall_ms(w), 0);
        return;
    }
    (void)snprintf(msg, sizeof(msg), "stdin not read for %llu ms: %zu bytes dropped%s",
                   (unsigned long long)stall_ms(w), w->held.len,
                   w->hold_close ? ", and the end of input" : "");
    send_notice(w, SBD_RESOURCE_EXHAUSTED, msg);
    hold_end(w);
}

/* Holds what the queue refused and stops reading the socket (back-pressure), with the
 * stall check armed. */
static void hold(struct wsp *w)
{
    w->holding = true;
    w->hold_queued = sbd_proc_stdin_queued(w->p);
    (void)uv_timer_start(&w->hold_timer, on_hold_timer, stall_ms(w), 0);
    http_ws_pause(w->ws, true);
}

/* Stdin bytes (copied) for the process; a full queue holds them (hold). */
static void ws_stdin(struct wsp *w, const char *data, size_t n)
{
    if (sbd_proc_write(w->p, data, n) != -EAGAIN)
        return; /* queued, or stdin closed: dropped, as after stdin_close */
    (void)buf_append(&w->held, data, n);
    hold(w);
}

static void ws_stdin_close(struct wsp *w)
{
    if (sbd_proc_close_stdin(w->p) != -EAGAIN)
        return;
    w->hold_close = true;
    hold(w);
}

/* The queue is empty: what was held goes (an empty queue takes it), then reading resumes. */
static void wsp_stdin_drained(struct sbd_proc *p, void *ctx)
{
    struct wsp *w = ctx;
    if (!w->holding)
        return;
    if (w->held.len)
        (void)sbd_proc_write(p, w->held.data, w->held.len);
    if (w->hold_close)
        (void)sbd_proc_close_stdin(p);
    hold_end(w);
}

static const struct sbd_proc_ops wsp_ops = {
    .output = wsp_output, .exit = wsp_exit, .stdin_drained = wsp_stdin_drained};

static void start(struct wsp *w, struct str data)
{
    json_t *j = json_loadb(data.p, data.len, 0, NULL);
    struct sbd_procreq r;
    const char *msg = "first message must be a JSON process request";
    if (!j) {
        send_error(w, SBD_INVALID_ARGUMENT, msg);
        return;
    }
    int e = sbd_procreq_parse(j, w->d->root, w->d->cfg.max_output, &r, &msg);
    json_decref(j);
    if (e == 0 && r.background)
        e = -EINVAL, msg = "background processes are started with POST /v1/processes";
    if (e < 0) {
        send_error(w, e == -EPERM ? SBD_PERMISSION_DENIED : SBD_INVALID_ARGUMENT, msg);
        sbd_procreq_done(&r); /* a failed parse may hold argv, env and stdin already */
        return;
    }
    int status;
    const char *code;
    if (sbd__proc_start_req(w->d, w->d->root, &r, &wsp_ops, w, &w->p, &status, &code, &msg) < 0) {
        send_error(w, code, msg);
        sbd_procreq_done(&r);
        return;
    }
    send_json(w, json_pack("{s:s, s:I, s:I}", "type", "start", "id", (json_int_t)sbd_proc_id(w->p),
                           "pid", (json_int_t)sbd_proc_pid(w->p)));
    if (r.stdin_data.len)
        (void)sbd_proc_write(w->p, r.stdin_data.data, r.stdin_data.len);
    sbd_procreq_done(&r);
}

/* {"type":"stdin"} with "data" (base64) or "text": written, or refused whole with an
 * error event (nothing of a bad base64 string is written). */
static void control_stdin(struct wsp *w, const json_t *j)
{
    const json_t *d = json_object_get(j, "data"), *t = json_object_get(j, "text");
    struct buf b;
    buf_init(&b, LIMIT_SBD_WS_MESSAGE);
    if (json_is_string(d) && !json_is_string(t)) {
        if (base64_decode(json_string_value(d), json_string_length(d), &b) < 0) {
            send_notice(w, SBD_INVALID_ARGUMENT, "stdin data is not valid base64: not written");
            goto out;
        }
    } else if (json_is_string(t) && !d) {
        (void)buf_append(&b, json_string_value(t), json_string_length(t));
    } else {
        send_notice(w, SBD_INVALID_ARGUMENT,
                    "a stdin message needs one of data (base64) or text, a string");
        goto out;
    }
    ws_stdin(w, b.data, b.len);
out:
    buf_done(&b);
}

static void control_signal(struct wsp *w, const json_t *j)
{
    int sig = sbd__signal_from_json(json_object_get(j, "signal"));
    if (sig < 0)
        send_notice(w, SBD_INVALID_ARGUMENT, "unknown signal");
    else
        (void)sbd_proc_signal(w->p, sig);
}

static void control_resize(struct wsp *w, const json_t *j)
{
    unsigned short c, r;
    if (sbd__resize_from_json(j, &c, &r) < 0) {
        send_notice(w, SBD_INVALID_ARGUMENT, "cols and rows (1 to 65535) are required");
        return;
    }
    int e = sbd_proc_resize(w->p, c, r);
    if (e == -ENOTTY)
        send_notice(w, SBD_FAILED_PRECONDITION, "process has no PTY");
}

/* A control message after the start. One that cannot be applied (not JSON, no or an
 * unknown type, bad fields) gets an error event and changes nothing; the socket stays
 * open. */
static void control(struct wsp *w, struct str data)
{
    json_t *j = json_loadb(data.p, data.len, 0, NULL);
    const char *type = json_string_value(json_object_get(j, "type"));
    if (!type)
        send_notice(w, SBD_INVALID_ARGUMENT, "control messages are JSON objects with a type");
    else if (strcmp(type, "stdin") == 0)
        control_stdin(w, j);
    else if (strcmp(type, "stdin_close") == 0)
        ws_stdin_close(w);
    else if (strcmp(type, "signal") == 0)
        control_signal(w, j);
    else if (strcmp(type, "resize") == 0)
        control_resize(w, j);
    else
        send_notice(w, SBD_INVALID_ARGUMENT,
                    "unknown control message type (stdin, stdin_close, signal, resize)");
    json_decref(j);
}

static void on_message(struct http_ws *ws, uint8_t opcode, struct str data, void *ctx)
{
    struct wsp *w = ctx;
    (void)ws;
    if (!w->p && !w->exited) {
        if (opcode == HTTP_WS_TEXT)
            start(w, data);
        else
            send_error(w, SBD_INVALID_ARGUMENT, "first message must be a JSON process request");
        return;
    }
    if (!w->p)
        return;
    if (opcode == HTTP_WS_BINARY)
        ws_stdin(w, data.p, data.len);
    else
        control(w, data);
}

static void on_drain(struct http_ws *ws, void *ctx)
{
    struct wsp *w = ctx;
    (void)ws;
    if (w->p)
        sbd_proc_pause(w->p, false);
}

static void free_wsp(uv_handle_t *h)
{
    xfree(h->data);
}

static void on_closed(struct http_ws *ws, int code, void *ctx)
{
    struct wsp *w = ctx;
    (void)ws;
    (void)code;
    if (w->p)
        sbd_proc_detach(w->p);
    w->d->websockets--;
    buf_done(&w->held);
    uv_close((uv_handle_t *)&w->hold_timer, free_wsp); /* w goes with its timer */
}

static const struct http_ws_ops wsp_ws_ops = {
    .message = on_message, .drain = on_drain, .closed = on_closed};

static int proc_ws(struct http_req *req, void *ctx)
{
    const char *msg;
    struct sbd *d = ctx;
    if (http_ws_check_request(req, &msg) < 0)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, msg);
    /* An upgraded socket leaves the HTTP server's connection count: this is its bound. */
    if (d->websockets >= (d->cfg.max_websockets ? d->cfg.max_websockets : LIMIT_SBD_WEBSOCKETS))
        return sbd_respond_error(req, 429, SBD_RESOURCE_EXHAUSTED,
                                 "too many open process WebSockets");
    struct wsp *w = XNEW(struct wsp);
    w->d = d;
    buf_init(&w->held, LIMIT_SBD_WS_MESSAGE);
    (void)uv_timer_init(d->loop, &w->hold_timer);
    w->hold_timer.data = w;
    /* The process request is the first message: a socket that never sends it is closed. */
    /* A client that stops reading (or is gone without a reset) is let go after the
     * stall bound of HTTP streams: its process, paused by the full queue, is killed. */
    struct http_ws_opts o = {.max_message = LIMIT_SBD_WS_MESSAGE,
                             .first_message_timeout = d->cfg.ws_first_timeout,
                             .write_stall = d->cfg.ws_write_stall ? d->cfg.ws_write_stall
                                                                  : LIMIT_HTTP_STREAM_STALL,
                             .ops = &wsp_ws_ops,
                             .ctx = w};
    d->websockets++; /* before the accept: its closed event decrements it */
    int r = http_ws_accept(req, &o, &w->ws);
    if (r < 0) {
        d->websockets--;
        buf_done(&w->held);
        uv_close((uv_handle_t *)&w->hold_timer, free_wsp);
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "cannot upgrade");
    }
    return 0;
}

int sbd__ws_register(struct sbd *d)
{
    return sbd__route(d, d->router, "GET", "/v1/processes/ws", 0, proc_ws, false);
}
