/* SPDX-License-Identifier: Apache-2.0 */
/* The process API over HTTP: run to completion (JSON), streaming runs (chunked NDJSON),
 * stdin, signals, PTY resize, listing and kill. */
#include "sandboxd/api_proc.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "common/base64.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "sandboxd/api_bg.h"
#include "sandboxd/late.h"
#include "sandboxd/ndjson.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

int sbd__proc_start_req(struct sbd *d, const struct sbd_root *root, const struct sbd_procreq *r,
                        const struct sbd_proc_ops *ops, void *ctx, struct sbd_proc **ret,
                        int *ret_status, const char **ret_code, const char **ret_msg)
{
    struct sbd_proc_spec spec;
    int cwd_fd = -1;
    int e = sbd_procreq_spec(r, root, &spec, &cwd_fd);
    if (e == 0)
        e = sbd_proc_start(d->procs, &spec, ops, ctx, ret);
    if (cwd_fd >= 0)
        (void)close(cwd_fd);
    switch (e) {
    case 0:
        return 0;
    case -ENOENT:
        *ret_status = 404, *ret_code = SBD_NOT_FOUND, *ret_msg = "command or cwd not found";
        break;
    case -ENOTDIR:
        *ret_status = 400, *ret_code = SBD_INVALID_ARGUMENT, *ret_msg = "cwd is not a directory";
        break;
    case -EPERM:
    case -EACCES:
    case -ELOOP: /* a cwd through a magic link, refused by the confined open */
    case -EXDEV:
        *ret_status = 403, *ret_code = SBD_PERMISSION_DENIED, *ret_msg = "permission denied";
        break;
    case -E2BIG:
        *ret_status = 413, *ret_code = SBD_INVALID_ARGUMENT,
        *ret_msg = "an argument or environment value is too large for execve (over 128 KiB "
                   "each, or all over the system's limit): send a long script on stdin";
        break;
    case -ENOEXEC:
        *ret_status = 400, *ret_code = SBD_INVALID_ARGUMENT,
        *ret_msg = "the command is not an executable the kernel can run";
        break;
    case -EMFILE:
    case -ENFILE:
    case -ENOMEM:
        *ret_status = 503, *ret_code = SBD_UNAVAILABLE,
        *ret_msg = "out of descriptors or memory to start the process: try again";
        break;
    case -EAGAIN:
        *ret_status = 429, *ret_code = SBD_RESOURCE_EXHAUSTED,
        *ret_msg = "too many running processes";
        break;
    case -ESHUTDOWN:
        *ret_status = 503, *ret_code = SBD_UNAVAILABLE, *ret_msg = "sandboxd is shutting down";
        break;
    default:
        *ret_status = 500, *ret_code = SBD_INTERNAL, *ret_msg = "cannot start the process";
        break;
    }
    return e;
}

json_t *sbd__exit_json(const struct sbd_exit *e)
{
    return json_pack("{s:s, s:i, s:i, s:b}", "type", "exit", "exit_code", e->exit_code, "signal",
                     e->signal, "timed_out", e->timed_out);
}

/* Parses the JSON body of req into a process request; responds itself on failure. */
static int parse_body(struct http_req *req, struct sbd *d, struct sbd_procreq *r)
{
    struct str body = http_req_body(req);
    json_error_t je;
    json_t *j = json_loadb(body.p, body.len, 0, &je);
    if (!j) {
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "body must be JSON");
        return -EINVAL;
    }
    const char *msg = NULL;
    int e = sbd_procreq_parse(j, d->root, d->cfg.max_output, r, &msg);
    json_decref(j);
    if (e < 0) {
        (void)sbd_respond_error(req, e == -EPERM ? 403 : 400,
                                e == -EPERM ? SBD_PERMISSION_DENIED : SBD_INVALID_ARGUMENT, msg);
        sbd_procreq_done(r);
    }
    return e;
}

/* ---- run to completion ------------------------------------------------------------- */

struct run {
    struct http_req *req;
    struct sbd_proc *p;
    struct buf out, err;
    bool out_cut, err_cut, base64;
    usec_t started;
    struct sbd_late answer; /* kept alive while the run is silent */
};

static void run_closed(uv_handle_t *h)
{
    xfree(h->data);
}

static void run_free(struct run *x)
{
    http_req_set_abort_cb(x->req, NULL, NULL);
    http_req_unref(x->req);
    buf_done(&x->out);
    buf_done(&x->err);
    sbd_late_close(&x->answer, run_closed);
}

static void run_output(struct sbd_proc *p, enum sbd_stream s, const char *data, size_t n, void *ctx)
{
    struct run *x = ctx;
    (void)p;
    struct buf *b = s == SBD_STDERR ? &x->err : &x->out;
    bool *cut = s == SBD_STDERR ? &x->err_cut : &x->out_cut;
    size_t room = b->limit - b->len;
    if (n > room) {
        *cut = true;
        n = room;
    }
    if (n)
        (void)buf_append(b, data, n);
}

static json_t *text_json(const struct buf *b, bool base64)
{
    struct buf t;
    buf_init(&t, SIZE_MAX);
    if (base64)
        (void)base64_encode(b->data, b->len, &t);
    else
        (void)sbd_utf8_sanitize(b->data ? b->data : "", b->len, &t);
    json_t *j = json_stringn(t.data, t.len);
    buf_done(&t);
    return j;
}

static void run_exit(struct sbd_proc *p, const struct sbd_exit *e, void *ctx)
{
    struct run *x = ctx;
    json_t *j = sbd__exit_json(e);
    (void)json_object_del(j, "type");
    (void)json_object_set_new(j, "id", json_integer(sbd_proc_id(p)));
    (void)json_object_set_new(j, "stdout", text_json(&x->out, x->base64));
    (void)json_object_set_new(j, "stderr", text_json(&x->err, x->base64));
    (void)json_object_set_new(j, "stdout_truncated", json_boolean(x->out_cut));
    (void)json_object_set_new(j, "stderr_truncated", json_boolean(x->err_cut));
    (void)json_object_set_new(j, "duration_ms",
                              json_integer((json_int_t)((clock_now() - x->started) / 1000)));
    (void)sbd_late_answer_json(&x->answer, j); /* a run that started answers 200 */
    json_decref(j);
    run_free(x);
}

static void run_abort(struct http_req *req, void *ctx)
{
    struct run *x = ctx;
    (void)req;
    sbd_proc_detach(x->p);
    run_free(x);
}

static const struct sbd_proc_ops run_ops = {.output = run_output, .exit = run_exit};

static int proc_run(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    struct sbd_procreq r;
    if (parse_body(req, d, &r) < 0)
        return 0;
    if (r.background) {
        sbd_procreq_done(&r);
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT,
                                 "background processes are started with POST /v1/processes");
    }
    if (r.timeout_s == 0)
        r.timeout_s = d->cfg.exec_timeout_s;
    r.stdin_null = !r.stdin_given; /* a command that reads stdin sees it empty, not a pipe */
    struct run *x = XNEW(struct run);
    x->base64 = r.base64;
    x->started = clock_now();
    buf_init(&x->out, r.max_output);
    buf_init(&x->err, r.max_output);
    int status = 0;
    const char *code = NULL, *msg = NULL;
    if (sbd__proc_start_req(d, d->root, &r, &run_ops, x, &x->p, &status, &code, &msg) < 0) {
        (void)sbd_respond_error(req, status, code, msg);
        buf_done(&x->out);
        buf_done(&x->err);
        xfree(x);
        sbd_procreq_done(&r);
        return 0;
    }
    x->req = http_req_ref(req);
    http_req_set_abort_cb(req, run_abort, x);
    http_req_set_eof_aborts(req); /* a client that gave up: its process goes */
    sbd_late_start(&x->answer, req, d->cfg.proc_keepalive, x);
    (void)sbd_proc_write_close(x->p, r.stdin_data.data, r.stdin_data.len);
    sbd_procreq_done(&r);
    return 0;
}

/* ---- streaming (chunked NDJSON) ---------------------------------------------------- */

struct stream {
    struct http_req *req;
    struct sbd_proc *p;
    struct sbd_ndjson out;
    usec_t last_sent, keepalive; /* a silent stream gets {"type":"keepalive"} */
    uv_timer_t timer;
};

static void stream_closed(uv_handle_t *h)
{
    xfree(h->data);
}

static void stream_free(struct stream *s)
{
    http_req_set_abort_cb(s->req, NULL, NULL);
    http_req_set_drain_cb(s->req, NULL, NULL);
    http_req_unref(s->req);
    sbd_ndjson_done(&s->out);
    (void)uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, stream_closed);
}

static void stream_keepalive(uv_timer_t *t);

static void stream_arm(struct stream *s)
{
    sbd_timer_at(&s->timer, stream_keepalive, s->last_sent + s->keepalive);
}

/* Writes one NDJSON line of j (taken); pauses the process when the socket is full.
 * Returns what sbd_ndjson_send does: below 0, the connection is gone and the abort
 * callback has freed s. */
static int stream_line(struct stream *s, json_t *j)
{
    s->last_sent = clock_now();
    int r = sbd_ndjson_send(&s->out, j);
    if (r == 1 && s->p)
        sbd_proc_pause(s->p, true);
    return r;
}

/* No line for a keepalive period: one, so that proxies that cut connections idle for a
 * minute keep this one (clients skip event types they do not know). Not while lines wait
 * for the client: those are the stream's news already. */
static void stream_keepalive(uv_timer_t *t)
{
    struct stream *s = t->data;
    usec_t now = clock_now();
    if (!s->p || now < s->last_sent + s->keepalive) {
        /* exited (only its exit line, waiting for the client, is left), or not due */
    } else if (!sbd_ndjson_pending(&s->out)) {
        if (stream_line(s, json_pack("{s:s}", "type", "keepalive")) < 0)
            return; /* the connection is gone: the abort callback freed s */
    } else {
        s->last_sent = now; /* blocked on the client: look again a period later */
    }
    if (s->p)
        stream_arm(s);
}

static void stream_output(struct sbd_proc *p, enum sbd_stream st, const char *data, size_t n,
                          void *ctx)
{
    struct stream *s = ctx;
    (void)p;
    struct buf b64;
    buf_init(&b64, SIZE_MAX);
    (void)base64_encode(data, n, &b64);
    stream_line(s, json_pack("{s:s, s:s%}", "type", st == SBD_STDERR ? "stderr" : "stdout", "data",
                             b64.data, b64.len));
    buf_done(&b64);
}

static void stream_exit(struct sbd_proc *p, const struct sbd_exit *e, void *ctx)
{
    struct stream *s = ctx;
    (void)p;
    s->p = NULL;
    if (stream_line(s, sbd__exit_json(e)) < 0)
        return; /* the connection is gone: the abort callback freed s */
    if (!sbd_ndjson_pending(&s->out)) {
        (void)http_resp_end(s->req);
        stream_free(s);
    }
}

static void stream_drain(struct http_req *req, void *ctx)
{
    struct stream *s = ctx;
    if (sbd_ndjson_drain(&s->out) != 0)
        return; /* still blocked, or gone (the abort callback follows) */
    if (s->p) {
        sbd_proc_pause(s->p, false);
        return;
    }
    (void)http_resp_end(req); /* the exit line was pending */
    stream_free(s);
}

static void stream_abort(struct http_req *req, void *ctx)
{
    struct stream *s = ctx;
    (void)req;
    if (s->p)
        sbd_proc_detach(s->p);
    stream_free(s);
}

static const struct sbd_proc_ops stream_ops = {.output = stream_output, .exit = stream_exit};

static int proc_stream(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    struct sbd_procreq r;
    if (parse_body(req, d, &r) < 0)
        return 0;
    if (r.background) {
        r.stdin_null = !r.stdin_given && !r.stdin_open; /* nothing ever comes: /dev/null */
        (void)sbd__bg_start(req, d, &r);
        sbd_procreq_done(&r);
        return 0;
    }
    struct stream *s = XNEW(struct stream);
    sbd_ndjson_init(&s->out, req, LIMIT_SBD_NDJSON_QUEUE);
    int status = 0;
    const char *code = NULL, *msg = NULL;
    if (sbd__proc_start_req(d, d->root, &r, &stream_ops, s, &s->p, &status, &code, &msg) < 0) {
        (void)sbd_respond_error(req, status, code, msg);
        sbd_ndjson_done(&s->out);
        xfree(s);
        sbd_procreq_done(&r);
        return 0;
    }
    s->req = http_req_ref(req);
    http_req_set_abort_cb(req, stream_abort, s);
    http_req_set_drain_cb(req, stream_drain, s);
    s->keepalive = d->cfg.proc_keepalive;
    (void)uv_timer_init(http_req_loop(req), &s->timer);
    s->timer.data = s;
    (void)http_resp_start(req, 200, "application/x-ndjson");
    if (stream_line(s, json_pack("{s:s, s:I, s:I}", "type", "start", "id",
                                 (json_int_t)sbd_proc_id(s->p), "pid",
                                 (json_int_t)sbd_proc_pid(s->p))) < 0) {
        sbd_procreq_done(&r); /* the connection is gone: the abort callback freed s */
        return 0;
    }
    stream_arm(s);
    if (r.stdin_data.len)
        (void)sbd_proc_write(s->p, r.stdin_data.data, r.stdin_data.len);
    sbd_procreq_done(&r);
    return 0;
}

/* ---- control ----------------------------------------------------------------------- */

static int proc_list(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    json_t *arr = sbd_procs_list(d->procs);
    sbd__bg_list_merge(d, arr);
    json_t *j = json_pack("{s:o}", "processes", arr);
    int r = http_respond_json(req, 200, j);
    json_decref(j);
    return r;
}

/* Splits "{id}[/action]" from the path rest. Returns the process or NULL (responded). */
static struct sbd_proc *find_proc(struct http_req *req, struct sbd *d, struct str *ret_action)
{
    struct str rest = http_req_path_rest(req), id, action;
    if (!str_cut(rest, '/', &id, &action))
        action = STR_NULL;
    uint64_t n;
    struct sbd_proc *p = NULL;
    if (str_to_u64(id, &n) == 0 && n <= UINT32_MAX)
        p = sbd_procs_find(d->procs, (uint32_t)n);
    if (!p)
        (void)sbd_respond_error(req, 404, SBD_NOT_FOUND, "no such process");
    *ret_action = action;
    return p;
}

static int do_stdin(struct http_req *req, struct sbd_proc *p)
{
    struct buf v;
    bool close_after = false;
    buf_init(&v, 16);
    int q = sbd_query_get(http_req_query(req), "close", &v);
    if (q != 0 && (q < 0 || cstr_to_bool(buf_str(&v), &close_after) < 0)) {
        buf_done(&v);
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "close must be a boolean");
    }
    buf_done(&v);
    struct str body = http_req_body(req);
    int r = close_after ? sbd_proc_write_close(p, body.p, body.len)
                        : sbd_proc_write(p, body.p, body.len);
    if (r == -EAGAIN)
        return sbd_respond_error(req, 429, SBD_RESOURCE_EXHAUSTED, "stdin queue is full");
    if (r < 0)
        return sbd_respond_error(req, 400, SBD_FAILED_PRECONDITION, "stdin is closed");
    return http_respond(req, 204, NULL, NULL, 0);
}

static json_t *body_object(struct http_req *req)
{
    struct str body = http_req_body(req);
    json_t *j = json_loadb(body.p, body.len, 0, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    if (!j)
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "body must be a JSON object");
    return j;
}

/* Signal from JSON: a name ("SIGINT") or a number. Returns the signal or -EINVAL. */
int sbd__signal_from_json(const json_t *s)
{
    if (json_is_integer(s))
        return json_integer_value(s) > 0 && json_integer_value(s) < NSIG
                   ? (int)json_integer_value(s)
                   : -EINVAL;
    return json_is_string(s) ? sbd_signal_parse(json_string_value(s)) : -EINVAL;
}

static int do_signal(struct http_req *req, struct sbd_proc *p)
{
    json_t *j = body_object(req);
    if (!j)
        return 0;
    int sig = sbd__signal_from_json(json_object_get(j, "signal"));
    json_decref(j);
    if (sig < 0)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "unknown signal");
    (void)sbd_proc_signal(p, sig);
    return http_respond(req, 204, NULL, NULL, 0);
}

int sbd__resize_from_json(const json_t *j, unsigned short *cols, unsigned short *rows)
{
    json_int_t c = 0, r = 0;
    if (json_unpack((json_t *)j, "{s:I, s:I}", "cols", &c, "rows", &r) < 0 || c <= 0 || r <= 0 ||
        c > 65535 || r > 65535)
        return -EINVAL;
    *cols = (unsigned short)c;
    *rows = (unsigned short)r;
    return 0;
}

static int do_resize(struct http_req *req, struct sbd_proc *p)
{
    json_t *j = body_object(req);
    unsigned short cols, rows;
    if (!j)
        return 0;
    int u = sbd__resize_from_json(j, &cols, &rows);
    json_decref(j);
    if (u < 0)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT,
                                 "cols and rows (1 to 65535) are required");
    int r = sbd_proc_resize(p, cols, rows);
    if (r < 0)
        return sbd_respond_error(req, 400, SBD_FAILED_PRECONDITION,
                                 r == -ENOTTY ? "process has no PTY" : "process has exited");
    return http_respond(req, 204, NULL, NULL, 0);
}

bool sbd__proc_action_known(struct str action)
{
    static const char *const actions[] = {"stdin", "stdin/close", "signal", "resize"};
    for (size_t i = 0; i < ARRAY_SIZE(actions); i++)
        if (str_eq_c(action, actions[i]))
            return true;
    return false;
}

static int proc_post(struct http_req *req, void *ctx)
{
    struct str action;
    if (sbd__bg_post(req, ctx))
        return 0;
    struct sbd_proc *p = find_proc(req, ctx, &action);
    if (!p)
        return 0;
    if (str_eq_c(action, "stdin"))
        return do_stdin(req, p);
    if (str_eq_c(action, "stdin/close")) {
        /* a closed stdin closes again fine; a PTY's ^D needs room in the queue */
        if (sbd_proc_close_stdin(p) == -EAGAIN)
            return sbd_respond_error(req, 429, SBD_RESOURCE_EXHAUSTED,
                                     "stdin queue is full: the end of input was not sent");
        return http_respond(req, 204, NULL, NULL, 0);
    }
    if (str_eq_c(action, "signal"))
        return do_signal(req, p);
    if (str_eq_c(action, "resize"))
        return do_resize(req, p);
    return sbd_respond_error(req, 404, SBD_NOT_FOUND, "unknown process action");
}

static int proc_delete(struct http_req *req, void *ctx)
{
    struct str action;
    if (sbd__bg_delete(req, ctx))
        return 0;
    struct sbd_proc *p = find_proc(req, ctx, &action);
    if (!p)
        return 0;
    if (action.len)
        return sbd_respond_error(req, 404, SBD_NOT_FOUND, "unknown process action");
    (void)sbd_proc_signal(p, SIGKILL);
    return http_respond(req, 204, NULL, NULL, 0);
}

int sbd__procs_register(struct sbd *d)
{
    int r = 0;
    r |= sbd__route(d, d->router, "POST", "/v1/processes/run", 0, proc_run, false);
    r |= sbd__route(d, d->router, "POST", "/v1/processes", 0, proc_stream, false);
    r |= sbd__route(d, d->router, "GET", "/v1/processes", 0, proc_list, false);
    r |= sbd__route(d, d->router, "POST", "/v1/processes/", HTTP_ROUTE_PREFIX, proc_post, false);
    r |=
        sbd__route(d, d->router, "DELETE", "/v1/processes/", HTTP_ROUTE_PREFIX, proc_delete, false);
    r |= sbd__ws_register(d);
    r |= sbd__bg_register(d);
    return r < 0 ? -EINVAL : 0;
}
