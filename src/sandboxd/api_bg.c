/* SPDX-License-Identifier: Apache-2.0 */
/* Background processes (see api_bg.h). A record owns the process's ring and lists the
 * requests following its output (NDJSON) and waiting for its exit. The process itself is
 * an ordinary entry of the process registry (same id, same stdin/signal/resize/kill
 * endpoints) whose output callback appends to the ring instead of a connection, so a
 * reader that falls behind loses the oldest bytes (and is told how many) instead of
 * stalling the process. */
#include "sandboxd/api_bg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/base64.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "http/server.h"
#include "sandboxd/api_proc.h"
#include "sandboxd/bgring.h"
#include "sandboxd/late.h"
#include "sandboxd/ndjson.h"
#include "sandboxd/proc.h"
#include "sandboxd/procreq.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

struct follower;
struct waiter;

struct bg {
    struct sbd_bgs *t;
    struct bg *prev, *next; /* table order: oldest first */
    uint32_t id;
    pid_t pid;
    struct sbd_proc *p; /* NULL once exited */
    json_t *argv;
    bool pty, exited;
    struct sbd_exit status;
    usec_t started_wall, ended_wall;
    struct sbd_ring *ring;
    struct follower *followers;
    struct waiter *waiters;
};

struct sbd_bgs {
    struct bg *head, *tail;
    unsigned count, max;
    size_t ring_limit;
    usec_t keepalive; /* silence before a keepalive (0: none) */
};

struct follower {
    struct follower *next;
    struct bg *bg;
    struct http_req *req;
    uint64_t offset;
    struct sbd_ndjson out;
    bool follow, exit_sent;
    usec_t last_sent; /* when a line last went out (keepalives fill silences) */
    uv_timer_t timer; /* the keepalive; .data is f */
};

struct waiter {
    struct waiter *next;
    struct bg *bg; /* NULL once answered or aborted (the timers are closing) */
    struct http_req *req;
    uv_timer_t timer;      /* the wait's timeout; .data is w */
    struct sbd_late late;  /* the answer, kept alive while the wait is long */
    unsigned open_handles; /* timers not closed yet: w is freed when the last one is */
};

/* ---- parsing ----------------------------------------------------------------------- */

int sbd_bg_target_parse(struct str rest, uint32_t *ret_id, struct str *ret_action)
{
    struct str id, action;
    if (!str_cut(rest, '/', &id, &action))
        action = STR_NULL;
    uint64_t n;
    if (str_to_u64(id, &n) < 0 || n == 0 || n > UINT32_MAX)
        return -EINVAL;
    *ret_id = (uint32_t)n;
    *ret_action = action;
    return 0;
}

static int query_value(struct str query, const char *name, struct buf *v)
{
    buf_reset(v);
    int r = sbd_query_get(query, name, v);
    if (r == 1 && v->len == 0)
        return -EINVAL;
    return r;
}

static int parse_timeout(const char *s, double *ret)
{
    char *end = NULL;
    errno = 0;
    double t = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(t) || t < 0 || t > LIMIT_SBD_MAX_TIMEOUT_S)
        return -EINVAL;
    *ret = t;
    return 0;
}

int sbd_bg_query_parse(struct str query, struct sbd_bg_query *ret, const char **ret_msg)
{
    *ret = (struct sbd_bg_query){.follow = true, .timeout_s = -1};
    struct buf v;
    buf_init(&v, 64);
    int e = 0, q = query_value(query, "follow", &v);
    if (q < 0 || (q == 1 && cstr_to_bool(buf_str(&v), &ret->follow) < 0))
        e = -EINVAL, *ret_msg = "follow must be a boolean";
    q = e ? 0 : query_value(query, "offset", &v);
    if (q < 0 || (q == 1 && cstr_to_u64(buf_str(&v), &ret->offset) < 0))
        e = -EINVAL, *ret_msg = "offset must be a non-negative integer";
    q = e ? 0 : query_value(query, "timeout", &v);
    if (q < 0 || (q == 1 && parse_timeout(buf_str(&v), &ret->timeout_s) < 0))
        e = -EINVAL, *ret_msg = "timeout must be a number of seconds in [0, 86400]";
    buf_done(&v);
    return e;
}

/* ---- table ------------------------------------------------------------------------- */

struct sbd_bgs *sbd_bgs_new(unsigned max, size_t ring_limit, usec_t keepalive)
{
    struct sbd_bgs *t = XNEW(struct sbd_bgs);
    t->max = max ? max : LIMIT_SBD_BG_PROCS;
    t->ring_limit = ring_limit ? ring_limit : LIMIT_SBD_BG_OUTPUT;
    t->keepalive = keepalive;
    return t;
}

static struct bg *bg_find(struct sbd_bgs *t, uint32_t id)
{
    for (struct bg *b = t->head; b; b = b->next)
        if (b->id == id)
            return b;
    return NULL;
}

static void follower_free(struct follower *f);

/* Unlinks and frees an exited record; its followers' connections are cut. */
static void bg_remove(struct bg *b)
{
    struct sbd_bgs *t = b->t;
    while (b->followers) {
        struct http_req *req = http_req_ref(b->followers->req);
        follower_free(b->followers);
        http_req_abort(req);
        http_req_unref(req);
    }
    if (b->prev)
        b->prev->next = b->next;
    else
        t->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        t->tail = b->prev;
    t->count--;
    sbd_ring_free(b->ring);
    json_decref(b->argv);
    xfree(b);
}

void sbd_bgs_free(struct sbd_bgs *t)
{
    if (!t)
        return;
    while (t->head)
        bg_remove(t->head);
    xfree(t);
}

/* Returns the record to evict for one more (the oldest exited one) when the table is
 * full, NULL when it is not; -EAGAIN through *ret when it is full of running ones. */
static struct bg *bg_evictee(struct sbd_bgs *t, int *ret)
{
    *ret = 0;
    if (t->count < t->max)
        return NULL;
    for (struct bg *b = t->head; b; b = b->next)
        if (b->exited)
            return b;
    *ret = -EAGAIN;
    return NULL;
}

static json_t *time_json(usec_t wall)
{
    char ts[40];
    clock_format_rfc3339(wall, ts, sizeof(ts));
    return json_string(ts);
}

static json_t *opt_int(bool set, int v)
{
    return set ? json_integer(v) : json_null();
}

/* Returns a new info object of b. */
static json_t *bg_json(const struct bg *b)
{
    bool ex = b->exited;
    json_t *j = json_pack("{s:I, s:I, s:O, s:b, s:b, s:s, s:b, s:o, s:o, s:o, s:o, s:b, s:I, s:I}",
                          "id", (json_int_t)b->id, "pid", (json_int_t)b->pid, "command", b->argv,
                          "pty", b->pty, "running", !ex, "state", ex ? "exited" : "running",
                          "background", true, "started_at", time_json(b->started_wall), "ended_at",
                          ex ? time_json(b->ended_wall) : json_null(), "exit_code",
                          opt_int(ex && b->status.exit_code >= 0, b->status.exit_code), "signal",
                          opt_int(ex && b->status.signal > 0, b->status.signal), "timed_out",
                          b->status.timed_out, "output_start", (json_int_t)sbd_ring_start(b->ring),
                          "output_end", (json_int_t)sbd_ring_end(b->ring));
    return j;
}

/* ---- output followers -------------------------------------------------------------- */

static void follower_closed(uv_handle_t *h)
{
    xfree(h->data);
}

/* Unlinks f from its record and lets it go (its memory once its timer is closed). */
static void follower_free(struct follower *f)
{
    struct follower **pp = &f->bg->followers;
    while (*pp != f)
        pp = &(*pp)->next;
    *pp = f->next;
    http_req_set_abort_cb(f->req, NULL, NULL);
    http_req_set_drain_cb(f->req, NULL, NULL);
    http_req_unref(f->req);
    sbd_ndjson_done(&f->out);
    (void)uv_timer_stop(&f->timer);
    uv_close((uv_handle_t *)&f->timer, follower_closed);
}

/* Writes the NDJSON line j (taken). Returns what sbd_ndjson_send does. */
static int follower_send(struct follower *f, json_t *j)
{
    f->last_sent = clock_now();
    return sbd_ndjson_send(&f->out, j);
}

static json_t *slice_json(const struct sbd_ring_slice *s)
{
    struct buf b64;
    buf_init(&b64, SIZE_MAX);
    (void)base64_encode(s->data, s->len, &b64);
    json_t *j =
        json_pack("{s:s, s:I, s:s%}", "type", s->stream == SBD_STDERR ? "stderr" : "stdout",
                  "offset", (json_int_t)s->offset, "data", b64.data ? b64.data : "", b64.len);
    buf_done(&b64);
    return j;
}

/* Ends the response: with the exit event when the process exited. Frees f, or leaves
 * it to the drain while the exit event waits in the queue. */
static void follower_end(struct follower *f)
{
    struct bg *b = f->bg;
    if (b->exited && !f->exit_sent) {
        json_t *e = sbd__exit_json(&b->status);
        (void)json_object_set_new(e, "offset", json_integer((json_int_t)sbd_ring_end(b->ring)));
        if (b->status.signal > 0) /* as the description says it (bg_json) */
            (void)json_object_set_new(e, "exit_code", json_null());
        f->exit_sent = true;
        if (follower_send(f, e) < 0)
            return; /* the connection is gone: the abort callback freed f */
    }
    if (sbd_ndjson_pending(&f->out))
        return; /* the drain comes back here */
    (void)http_resp_end(f->req);
    follower_free(f);
}

/* Writes what the ring has from f's offset on, until the socket is full. A line that
 * waits in the queue counts as written: the drain hands it on. */
static void follower_pump(struct follower *f)
{
    struct sbd_ring_slice s;
    while (!f->out.blocked) {
        if (!sbd_ring_next(f->bg->ring, f->offset, LIMIT_SBD_CHUNK, &s)) {
            if (f->bg->exited || !f->follow)
                follower_end(f);
            return;
        }
        int r;
        if (s.dropped) {
            r = follower_send(f, json_pack("{s:s, s:I, s:I}", "type", "dropped", "offset",
                                           (json_int_t)f->offset, "bytes", (json_int_t)s.dropped));
            if (r == 0 || r == 1)
                f->offset = s.offset;
        } else {
            r = follower_send(f, slice_json(&s));
            if (r == 0 || r == 1)
                f->offset += s.len;
        }
        if (r < 0)
            return; /* the connection is gone: the abort callback frees f */
    }
}

static void follower_drain(struct http_req *req, void *ctx)
{
    struct follower *f = ctx;
    (void)req;
    if (sbd_ndjson_drain(&f->out) == 0)
        follower_pump(f);
}

static void follower_abort(struct http_req *req, void *ctx)
{
    (void)req;
    follower_free(ctx);
}

static void follower_keepalive(uv_timer_t *t);

/* Arms f's timer for a keepalive period after its last line. */
static void follower_arm(struct follower *f)
{
    sbd_timer_at(&f->timer, follower_keepalive, f->last_sent + f->bg->t->keepalive);
}

/* A follower of a running process silent for a keepalive period gets
 * {"type":"keepalive","offset":N} (clients skip types they do not know), so that proxies that cut
 * connections idle for a minute keep it. Not while lines wait for the client (those are
 * its news already), nor once the process exited (the exit event ends the response). */
static void follower_keepalive(uv_timer_t *t)
{
    struct follower *f = t->data;
    usec_t now = clock_now();
    if (f->bg->exited)
        return;
    if (now >= f->last_sent + f->bg->t->keepalive) {
        if (sbd_ndjson_pending(&f->out))
            f->last_sent = now; /* blocked on the client: look again a period later */
        else if (follower_send(f, json_pack("{s:s, s:I}", "type", "keepalive", "offset",
                                            (json_int_t)f->offset)) < 0)
            return; /* the connection is gone: the abort callback frees f */
    }
    follower_arm(f);
}

static void pump_all(struct bg *b)
{
    for (struct follower *f = b->followers, *next; f; f = next) {
        next = f->next;
        follower_pump(f);
    }
}

static int bg_output(struct http_req *req, struct bg *b, const struct sbd_bg_query *q)
{
    struct follower *f = XNEW(struct follower);
    f->bg = b;
    f->req = http_req_ref(req);
    sbd_ndjson_init(&f->out, req, LIMIT_SBD_NDJSON_QUEUE);
    f->follow = q->follow;
    f->offset = q->offset > sbd_ring_end(b->ring) ? sbd_ring_end(b->ring) : q->offset;
    f->next = b->followers;
    b->followers = f;
    f->last_sent = clock_now();
    (void)uv_timer_init(http_req_loop(req), &f->timer);
    f->timer.data = f;
    http_req_set_abort_cb(req, follower_abort, f);
    http_req_set_drain_cb(req, follower_drain, f);
    (void)http_resp_start(req, 200, "application/x-ndjson");
    if (f->follow && !b->exited && b->t->keepalive)
        follower_arm(f);
    follower_pump(f);
    return 0;
}

/* ---- waiters ----------------------------------------------------------------------- */

static void on_waiter_closed(uv_handle_t *h)
{
    struct waiter *w = h->data;
    if (--w->open_handles == 0)
        xfree(w);
}

/* Unlinks w from its record and lets it go (its memory once its timers are closed). */
static void waiter_free(struct waiter *w)
{
    struct waiter **pp = &w->bg->waiters;
    while (*pp != w)
        pp = &(*pp)->next;
    *pp = w->next;
    w->bg = NULL;
    http_req_set_abort_cb(w->req, NULL, NULL);
    http_req_unref(w->req);
    (void)uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, on_waiter_closed);
    sbd_late_close(&w->late, on_waiter_closed);
}

/* Answers w with its record's state (200: the whole answer, or the rest of the one its
 * keepalives started) and lets it go. */
static void waiter_done(struct waiter *w)
{
    json_t *j = bg_json(w->bg);
    (void)sbd_late_answer_json(&w->late, j);
    json_decref(j);
    waiter_free(w);
}

static void on_waiter_timer(uv_timer_t *t)
{
    waiter_done(t->data);
}

static void waiter_abort(struct http_req *req, void *ctx)
{
    (void)req;
    waiter_free(ctx); /* the connection is gone: nothing to answer */
}

static int bg_wait(struct http_req *req, struct bg *b, const struct sbd_bg_query *q)
{
    if (b->exited || q->timeout_s == 0) {
        json_t *j = bg_json(b);
        int r = http_respond_json(req, 200, j);
        json_decref(j);
        return r;
    }
    struct waiter *w = XNEW(struct waiter);
    w->bg = b;
    w->req = http_req_ref(req);
    w->next = b->waiters;
    b->waiters = w;
    (void)uv_timer_init(http_req_loop(req), &w->timer);
    w->timer.data = w;
    w->open_handles = 2;
    if (q->timeout_s > 0)
        (void)uv_timer_start(&w->timer, on_waiter_timer, (uint64_t)(q->timeout_s * 1000.0), 0);
    /* a wait longer than a keepalive period starts its answer then (always 200) */
    sbd_late_start(&w->late, req, b->t->keepalive ? b->t->keepalive : UINT32_MAX * USEC_PER_SEC, w);
    http_req_set_abort_cb(req, waiter_abort, w);
    return 0;
}

/* ---- the process ------------------------------------------------------------------- */

static void on_bg_output(struct sbd_proc *p, enum sbd_stream s, const char *data, size_t n,
                         void *ctx)
{
    struct bg *b = ctx;
    (void)p;
    sbd_ring_append(b->ring, (int)s, data, n);
    pump_all(b);
}

static void on_bg_exit(struct sbd_proc *p, const struct sbd_exit *e, void *ctx)
{
    struct bg *b = ctx;
    (void)p;
    b->p = NULL;
    b->exited = true;
    b->status = *e;
    b->ended_wall = clock_wall_now();
    while (b->waiters)
        waiter_done(b->waiters);
    pump_all(b);
}

static const struct sbd_proc_ops bg_ops = {.output = on_bg_output, .exit = on_bg_exit};

static struct bg *bg_new(struct sbd_bgs *t, const struct sbd_procreq *r)
{
    struct bg *b = XNEW(struct bg);
    b->t = t;
    b->ring = sbd_ring_new(t->ring_limit);
    b->argv = json_array();
    for (char **a = r->argv; *a; a++)
        (void)json_array_append_new(b->argv, sbd_json_name(*a)); /* as proc.c's */
    b->pty = r->pty;
    b->started_wall = clock_wall_now();
    return b;
}

static void bg_link(struct sbd_bgs *t, struct bg *b)
{
    b->prev = t->tail;
    if (t->tail)
        t->tail->next = b;
    else
        t->head = b;
    t->tail = b;
    t->count++;
}

int sbd__bg_start(struct http_req *req, struct sbd *d, const struct sbd_procreq *r)
{
    struct sbd_bgs *t = d->bgs;
    int full;
    (void)bg_evictee(t, &full);
    if (full < 0)
        return sbd_respond_error(req, 429, SBD_RESOURCE_EXHAUSTED,
                                 "too many background processes: every entry of the table is "
                                 "running (--max-bg-procs); kill or wait for one");
    struct bg *b = bg_new(t, r);
    int status = 0;
    const char *code = NULL, *msg = NULL;
    if (sbd__proc_start_req(d, d->root, r, &bg_ops, b, &b->p, &status, &code, &msg) < 0) {
        sbd_ring_free(b->ring);
        json_decref(b->argv);
        xfree(b);
        return sbd_respond_error(req, status, code, msg);
    }
    b->id = sbd_proc_id(b->p);
    b->pid = sbd_proc_pid(b->p);
    /* an exited record makes room only now: a start that failed evicts nothing */
    struct bg *old = bg_evictee(t, &full);
    if (old)
        bg_remove(old);
    bg_link(t, b);
    if (!r->stdin_open)
        (void)sbd_proc_write_close(b->p, r->stdin_data.data, r->stdin_data.len);
    else if (r->stdin_data.len)
        (void)sbd_proc_write(b->p, r->stdin_data.data, r->stdin_data.len);
    json_t *j = bg_json(b);
    int e = http_respond_json(req, 201, j);
    json_decref(j);
    return e;
}

/* ---- HTTP -------------------------------------------------------------------------- */

void sbd__bg_list_merge(struct sbd *d, json_t *arr)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        struct bg *b = bg_find(d->bgs, (uint32_t)json_integer_value(json_object_get(e, "id")));
        if (b) {
            (void)json_array_set_new(arr, i, bg_json(b));
            continue;
        }
        (void)json_object_set_new(e, "background", json_false());
        (void)json_object_set_new(e, "state", json_string("running"));
    }
    for (struct bg *b = d->bgs->head; b; b = b->next)
        if (b->exited)
            (void)json_array_append_new(arr, bg_json(b));
}

/* Returns the record named by the path, or NULL with *ret_id 0 when the path is no id. */
static struct bg *target(struct http_req *req, struct sbd *d, uint32_t *ret_id,
                         struct str *ret_action)
{
    *ret_id = 0;
    if (sbd_bg_target_parse(http_req_path_rest(req), ret_id, ret_action) < 0)
        return NULL;
    return bg_find(d->bgs, *ret_id);
}

/* GET /v1/processes/{id} of an attached process: its entry of the registry's list. */
static int attached_info(struct http_req *req, struct sbd *d, uint32_t id)
{
    json_t *arr = sbd_procs_list(d->procs), *e, *found = NULL;
    size_t i;
    json_array_foreach(arr, i, e)
    {
        if (json_integer_value(json_object_get(e, "id")) == (json_int_t)id)
            found = e;
    }
    int r;
    if (found) {
        (void)json_object_set_new(found, "background", json_false());
        (void)json_object_set_new(found, "state", json_string("running"));
        r = http_respond_json(req, 200, found);
    } else {
        r = sbd_respond_error(req, 404, SBD_NOT_FOUND, "no such process");
    }
    json_decref(arr);
    return r;
}

static int bg_get(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    uint32_t id;
    struct str action;
    struct bg *b = target(req, d, &id, &action);
    if (!b && action.len == 0 && id)
        return attached_info(req, d, id);
    if (!b)
        return sbd_respond_error(req, 404, SBD_NOT_FOUND,
                                 id && sbd_procs_find(d->procs, id) ? "not a background process"
                                                                    : "no such background process");
    struct sbd_bg_query q;
    const char *msg = NULL;
    if (sbd_bg_query_parse(http_req_query(req), &q, &msg) < 0)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, msg);
    if (action.len == 0) {
        json_t *j = bg_json(b);
        int r = http_respond_json(req, 200, j);
        json_decref(j);
        return r;
    }
    bool streams = str_eq_c(action, "output") || str_eq_c(action, "wait");
    /* A HEAD of a stream is answered at its head: a follower or waiter would keep it in
     * flight, writing nothing, and wedge its keep-alive connection (and a proxy's pooled
     * one behind it) until the process ended. */
    if (streams && str_eq_c(http_req_method(req), "HEAD"))
        return http_respond(
            req, 200, str_eq_c(action, "output") ? "application/x-ndjson" : "application/json", "",
            0);
    if (str_eq_c(action, "output"))
        return bg_output(req, b, &q);
    if (str_eq_c(action, "wait"))
        return bg_wait(req, b, &q);
    return sbd_respond_error(req, 404, SBD_NOT_FOUND, "unknown process action");
}

bool sbd__bg_post(struct http_req *req, struct sbd *d)
{
    uint32_t id;
    struct str action;
    struct bg *b = target(req, d, &id, &action);
    if (!b)
        return false;
    if (str_eq_c(action, "wait")) {
        struct sbd_bg_query q;
        const char *msg = NULL;
        if (sbd_bg_query_parse(http_req_query(req), &q, &msg) < 0)
            (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, msg);
        else
            (void)bg_wait(req, b, &q);
        return true;
    }
    if (!b->exited)
        return false; /* stdin, signal, resize: the registry's endpoints */
    if (!sbd__proc_action_known(action))
        (void)sbd_respond_error(req, 404, SBD_NOT_FOUND, "unknown process action");
    else
        (void)sbd_respond_error(req, 409, SBD_FAILED_PRECONDITION, "process has exited");
    return true;
}

bool sbd__bg_delete(struct http_req *req, struct sbd *d)
{
    uint32_t id;
    struct str action;
    struct bg *b = target(req, d, &id, &action);
    if (!b || !b->exited || action.len)
        return false;
    bg_remove(b);
    (void)http_respond(req, 204, NULL, NULL, 0);
    return true;
}

int sbd__bg_register(struct sbd *d)
{
    return sbd__route(d, d->router, "GET", "/v1/processes/", HTTP_ROUTE_PREFIX, bg_get, false);
}
