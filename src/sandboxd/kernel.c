/* SPDX-License-Identifier: Apache-2.0 */
/* Code contexts (see kernel.h): a bounded table of Python kernels, one execution at a
 * time per context, its events streamed to the client as NDJSON with a byte budget. */
#include "sandboxd/kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sandboxd/kernel_proto.h"
#include "sandboxd/ndjson.h"
#include "sandboxd/proc.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

#define KCTX_ID_MAX 64

enum kstate { KS_STARTING, KS_IDLE, KS_BUSY, KS_DEAD };
static const char *const state_names[] = {"starting", "idle", "busy", "dead"};

struct kctx;

/** One execution: its response stream, outliving the context's part while unsent
 * output remains (c NULL) or the client while the kernel still runs it (req NULL). */
struct kexec {
    struct kctx *c;
    struct http_req *req;
    struct sbd_ndjson out; /* the stream; detached once the client went away */
    size_t used, budget;
    usec_t deadline;  /* the timeout, then the end of the grace after the interrupt */
    usec_t last_sent; /* when the last line was written (keepalives fill silences) */
    bool truncated, marker, timed_out;
    bool error_sent; /* the execution's error went out (uncounted: once) */
    bool started;    /* the driver said it read the request */
    bool intr_held;  /* an interrupt came before that: sent when it does */
};

struct kctx {
    struct sbd_kernels *ks;
    struct kctx *next;
    char id[KCTX_ID_MAX + 1];
    char *cwd; /* cleaned path beneath the root, or NULL */
    struct sbd_proc *p;
    enum kstate state;
    struct sbd_kline lines;
    struct kexec *x;
    uv_timer_t timer; /* the execution's timeout; the context is freed when it closes */
    json_int_t execution_count;
    usec_t created;
    struct buf last_err; /* the kernel's stderr outside executions (start-up failures) */
    struct buf queued;   /* the execute request, held until the driver is ready */
    bool acks;           /* the driver sends "started" (its ready line said so) */
    pid_t pid;
};

struct sbd_kernels {
    struct sbd *d;
    struct kctx *head;
    size_t count;
    unsigned next_id;
    char *driver, *python;
    unsigned max_contexts;
    size_t max_output;
    usec_t keepalive;
};

/* ---- execution stream -------------------------------------------------------------- */

static void exec_free(struct kexec *x)
{
    if (x->req) {
        http_req_set_abort_cb(x->req, NULL, NULL);
        http_req_set_drain_cb(x->req, NULL, NULL);
        http_req_unref(x->req);
    }
    sbd_ndjson_done(&x->out);
    xfree(x);
}

static void exec_truncate(struct kexec *x);

/* Writes line; a line the full queue cannot take truncates the output. */
static void write_line(struct kexec *x, const struct buf *line)
{
    x->last_sent = clock_now();
    int r = sbd_ndjson_queue_raw(&x->out, line->data, line->len);
    if (r == -E2BIG) {
        exec_truncate(x);
        return;
    }
    if (r == 0 && sbd_ndjson_flush(&x->out) == 1 && x->c && x->c->p)
        sbd_proc_pause(x->c->p, true);
}

static void exec_send(struct kexec *x, json_t *ev, bool counted);

/* Marks x truncated and sends the truncation marker once (uncounted). */
static void exec_truncate(struct kexec *x)
{
    x->truncated = true;
    if (x->marker)
        return;
    x->marker = true;
    exec_send(x, json_pack("{s:s}", "type", "truncated"), false);
}

/* Sends ev (taken) as one NDJSON line. A counted event past the budget is dropped (the
 * first drop sends the truncation marker). */
static void exec_send(struct kexec *x, json_t *ev, bool counted)
{
    struct buf line;
    buf_init(&line, SIZE_MAX);
    (void)sbd_ndjson_encode(ev, &line);
    if (counted && (x->truncated || x->used + line.len > x->budget)) {
        buf_done(&line);
        exec_truncate(x);
        return;
    }
    if (counted)
        x->used += line.len;
    if (x->req)
        write_line(x, &line);
    buf_done(&line);
}

static json_t *error_json(const char *name, const char *value)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name", name, "value", value,
                     "traceback", "");
}

/* Ends c's execution with an optional error (taken) and the end event. */
static void exec_finish(struct kctx *c, json_t *error)
{
    struct kexec *x = c->x;
    c->x = NULL;
    x->c = NULL;
    (void)uv_timer_stop(&c->timer);
    if (c->p)
        sbd_proc_pause(c->p, false);
    if (c->state == KS_BUSY)
        c->state = KS_IDLE;
    if (error)
        exec_send(x, error, false);
    exec_send(x,
              json_pack("{s:s, s:I, s:b, s:b}", "type", "end", "execution_count",
                        c->execution_count, "truncated", x->truncated, "timed_out", x->timed_out),
              false);
    if (!x->req) {
        exec_free(x);
        return;
    }
    if (!sbd_ndjson_pending(&x->out)) {
        (void)http_resp_end(x->req);
        exec_free(x);
    }
}

static void exec_drain(struct http_req *req, void *ctx)
{
    struct kexec *x = ctx;
    if (sbd_ndjson_drain(&x->out) != 0)
        return; /* still blocked, or gone (the abort callback follows) */
    if (x->c) {
        if (x->c->p)
            sbd_proc_pause(x->c->p, false);
        return;
    }
    (void)http_resp_end(req);
    exec_free(x);
}

static void exec_interrupt(struct kctx *c);

/* The client went away: its execution is interrupted; the events until the end are
 * dropped. */
static void exec_abort(struct http_req *req, void *ctx)
{
    struct kexec *x = ctx;
    http_req_set_abort_cb(req, NULL, NULL);
    http_req_set_drain_cb(req, NULL, NULL);
    http_req_unref(req);
    x->req = NULL;
    sbd_ndjson_detach(&x->out);
    if (!x->c) {
        exec_free(x);
        return;
    }
    if (x->c->p)
        sbd_proc_pause(x->c->p, false);
    exec_interrupt(x->c);
}

/* ---- kernel process ---------------------------------------------------------------- */

/* Interrupts c's execution: a SIGINT to the kernel; while its request still waits for
 * the driver to start, the end of the execution before it began; while the driver has
 * not yet said it read the request (a SIGINT then would be ignored), the SIGINT waits
 * for its "started". */
static void exec_interrupt(struct kctx *c)
{
    if (c->x && c->queued.len) {
        buf_done(&c->queued); /* empty, no memory kept */
        exec_finish(c, error_json("KeyboardInterrupt", "interrupted before it started"));
        return;
    }
    if (c->x && c->acks && !c->x->started)
        c->x->intr_held = true;
    else if (c->p && c->x)
        (void)sbd_proc_signal(c->p, SIGINT);
}

static void on_event(struct kctx *c, json_t *ev, enum sbd_kevent kind)
{
    switch (kind) {
    case SBD_KEV_READY:
        c->acks = json_is_true(json_object_get(ev, "started_events"));
        if (c->state == KS_STARTING)
            c->state = c->x ? KS_BUSY : KS_IDLE;
        if (c->queued.len && c->p && sbd_proc_write(c->p, c->queued.data, c->queued.len) < 0)
            exec_finish(c, error_json("KernelDied", "cannot send the code to the kernel"));
        buf_done(&c->queued); /* empty, no memory kept */
        json_decref(ev);
        return;
    case SBD_KEV_END:
        c->execution_count = json_integer_value(json_object_get(ev, "execution_count"));
        if (c->x) {
            c->x->truncated |= json_is_true(json_object_get(ev, "truncated"));
            exec_finish(c, NULL);
        }
        json_decref(ev);
        return;
    case SBD_KEV_STARTED:
        json_decref(ev);
        if (c->x && !c->x->started) {
            c->x->started = true;
            if (c->x->intr_held && c->p)
                (void)sbd_proc_signal(c->p, SIGINT);
        }
        return;
    case SBD_KEV_TRUNCATED:
        json_decref(ev);
        if (c->x)
            exec_truncate(c->x);
        return;
    case SBD_KEV_ERROR:
        /* the first error goes whatever the output used (a client must know the cell
         * failed: the driver bounds its traceback); more count as output */
        if (c->x) {
            exec_send(c->x, ev, c->x->error_sent);
            c->x->error_sent = true;
        } else {
            json_decref(ev);
        }
        return;
    default:
        if (c->x)
            exec_send(c->x, ev, true);
        else
            json_decref(ev);
    }
}

static void on_line(void *ctx, const char *line, size_t n, bool cut)
{
    struct kctx *c = ctx;
    json_t *ev;
    enum sbd_kevent kind;
    if (cut) {
        if (c->x)
            exec_truncate(c->x);
        return;
    }
    if (sbd_kevent_parse(line, n, &ev, &kind) < 0) {
        log_debug("bad kernel event line, dropped\tcontext=%s", c->id);
        return;
    }
    on_event(c, ev, kind);
}

static void kernel_stderr(struct kctx *c, const char *data, size_t n)
{
    if (!c->x) {
        size_t room = c->last_err.limit - c->last_err.len;
        (void)buf_append(&c->last_err, data, n < room ? n : room);
        return;
    }
    struct buf t;
    buf_init(&t, SIZE_MAX);
    (void)sbd_utf8_sanitize(data, n, &t);
    exec_send(c->x, json_pack("{s:s, s:s%}", "type", "stderr", "text", t.data ? t.data : "", t.len),
              true);
    buf_done(&t);
}

static void kernel_output(struct sbd_proc *p, enum sbd_stream s, const char *data, size_t n,
                          void *ctx)
{
    struct kctx *c = ctx;
    (void)p;
    if (s == SBD_STDERR)
        kernel_stderr(c, data, n);
    else
        sbd_kline_feed(&c->lines, data, n, on_line, c);
    if (!c->x)
        sbd_kline_trim(&c->lines, LIMIT_SBD_CHUNK);
}

static void kernel_exit(struct sbd_proc *p, const struct sbd_exit *e, void *ctx)
{
    struct kctx *c = ctx;
    (void)p;
    c->p = NULL;
    c->state = KS_DEAD;
    buf_done(&c->queued); /* empty, no memory kept */
    log_info("kernel exited\tcontext=%s exit_code=%d signal=%d", c->id, e->exit_code, e->signal);
    if (!c->x)
        return;
    struct buf msg;
    buf_init(&msg, 8192);
    (void)buf_printf(&msg, "the kernel exited (exit code %d, signal %d); its state is lost",
                     e->exit_code, e->signal);
    if (c->last_err.len)
        (void)buf_printf(&msg, ": %.*s", (int)c->last_err.len, c->last_err.data);
    exec_finish(c, error_json("KernelDied", buf_str(&msg)));
    buf_done(&msg);
}

static const struct sbd_proc_ops kernel_ops = {.output = kernel_output, .exit = kernel_exit};

/* Without the driver file, `python3 -c BOOTSTRAP` reads "<length>\n<driver source>" from
 * stdin (sent before any request) and runs it under the name the driver knows itself by,
 * without the cwd on sys.path while the driver imports its modules. */
static const char bootstrap[] =
    "import os, sys\n"
    /* the cwd (python -c puts it first) is the user's: a json.py there must not replace
     * the driver's own imports; the driver puts it back for the user's code */
    "sys.path[:] = [p for p in sys.path if p not in ('', os.getcwd())]\n"
    "def _read(n):\n"
    "    b = b''\n"
    "    while len(b) < n:\n"
    "        c = os.read(0, n - len(b))\n"
    "        if not c:\n"
    "            raise SystemExit('sandboxd: no driver source on stdin')\n"
    "        b += c\n"
    "    return b\n"
    "_n = b''\n"
    "while not _n.endswith(b'\\n'):\n"
    "    _n += _read(1)\n"
    "exec(compile(_read(int(_n)), '<agent-sandbox-kernel>', 'exec'))\n";

/* Sends the embedded driver to a kernel started with the bootstrap. */
static int send_driver(struct sbd_proc *p)
{
    char head[32];
    int n = snprintf(head, sizeof(head), "%zu\n", sbd_kernel_driver_size);
    int r = sbd_proc_write(p, head, (size_t)n);
    return r < 0 ? r : sbd_proc_write(p, sbd_kernel_driver_source, sbd_kernel_driver_size);
}

static int kernel_spawn(struct kctx *c)
{
    struct sbd *d = c->ks->d;
    bool embedded = access(c->ks->driver, R_OK) != 0;
    char *file_argv[] = {c->ks->python, c->ks->driver, NULL};
    char *boot_argv[] = {c->ks->python, "-c", (char *)bootstrap, NULL};
    int fd = sbd_path_open(d->root, c->cwd ? c->cwd : ".", O_PATH | O_DIRECTORY, 0);
    if (fd < 0)
        return fd;
    struct sbd_proc_spec spec = {.argv = embedded ? boot_argv : file_argv, .cwd_fd = fd};
    int r = sbd_proc_start(d->procs, &spec, &kernel_ops, c, &c->p);
    (void)close(fd);
    if (r == 0 && embedded && send_driver(c->p) < 0) {
        sbd_proc_detach(c->p);
        c->p = NULL;
        r = -EIO;
    }
    if (r < 0)
        return r;
    c->state = KS_STARTING;
    c->pid = sbd_proc_pid(c->p);
    c->execution_count = 0;
    sbd_kline_reset(&c->lines);
    buf_reset(&c->last_err);
    return 0;
}

/* Kills the kernel (no more callbacks), ending a running execution with error. */
static void kernel_kill(struct kctx *c, const char *error_name, const char *error_value)
{
    if (c->p)
        sbd_proc_detach(c->p);
    c->p = NULL;
    c->state = KS_DEAD;
    buf_done(&c->queued); /* empty, no memory kept */
    if (c->x)
        exec_finish(c, error_json(error_name, error_value));
}

/* ---- the table --------------------------------------------------------------------- */

static void on_timer_closed(uv_handle_t *h)
{
    struct kctx *c = h->data;
    sbd_kline_done(&c->lines);
    buf_done(&c->last_err);
    buf_done(&c->queued);
    xfree(c->cwd);
    xfree(c);
}

static void ctx_delete(struct kctx *c, const char *why)
{
    struct sbd_kernels *ks = c->ks;
    kernel_kill(c, "ContextDeleted", why);
    for (struct kctx **pp = &ks->head; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    ks->count--;
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

static struct kctx *ctx_find(struct sbd_kernels *ks, struct str id)
{
    for (struct kctx *c = ks->head; c; c = c->next)
        if (str_eq_c(id, c->id))
            return c;
    return NULL;
}

static bool id_valid(struct str id)
{
    if (id.len == 0 || id.len > KCTX_ID_MAX)
        return false;
    for (size_t i = 0; i < id.len; i++) {
        char ch = id.p[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.'))
            return false;
    }
    return true;
}

static json_t *ctx_json(const struct kctx *c)
{
    char when[40];
    clock_format_rfc3339(clock_wall_now() - (clock_now() - c->created), when, sizeof(when));
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "id", c->id, "language", "python",
                          "cwd", c->cwd ? c->cwd : ".", "state", state_names[c->state],
                          "execution_count", c->execution_count, "created_at", when);
    (void)json_object_set_new(j, "pid", c->p ? json_integer(c->pid) : json_null());
    return j;
}

/* Maps a start failure to a response. */
static int respond_spawn_error(struct http_req *req, int e)
{
    switch (e) {
    case -ENOENT:
        return sbd_respond_error(req, 404, SBD_NOT_FOUND, "kernel python or cwd not found");
    case -ENOTDIR:
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "cwd is not a directory");
    case -EPERM:
    case -EACCES:
        return sbd_respond_error(req, 403, SBD_PERMISSION_DENIED, "permission denied");
    case -EAGAIN:
        return sbd_respond_error(req, 429, SBD_RESOURCE_EXHAUSTED, "too many running processes");
    case -ESHUTDOWN:
        return sbd_respond_error(req, 503, SBD_UNAVAILABLE, "sandboxd is shutting down");
    default:
        return sbd_respond_error(req, 500, SBD_INTERNAL, "cannot start the kernel");
    }
}

/* Creates and starts a context. Returns it, or NULL after responding. */
static struct kctx *ctx_create(struct http_req *req, struct sbd_kernels *ks, struct str id,
                               char *cwd /* taken */)
{
    if (ks->count >= ks->max_contexts) {
        xfree(cwd);
        (void)sbd_respond_error(req, 429, SBD_RESOURCE_EXHAUSTED, "too many code contexts");
        return NULL;
    }
    struct kctx *c = XNEW(struct kctx);
    c->ks = ks;
    c->cwd = cwd;
    c->created = clock_now();
    sbd_kline_init(&c->lines, LIMIT_SBD_KERNEL_LINE);
    buf_init(&c->last_err, 2048);
    buf_init(&c->queued, SIZE_MAX); /* one request, bounded by the request body limit */
    if (id.len) {
        memcpy(c->id, id.p, id.len);
    } else {
        do
            (void)snprintf(c->id, sizeof(c->id), "ctx-%u", ++ks->next_id);
        while (ctx_find(ks, str_c(c->id)));
    }
    (void)uv_timer_init(ks->d->loop, &c->timer);
    c->timer.data = c;
    c->next = ks->head;
    ks->head = c;
    ks->count++;
    int r = kernel_spawn(c);
    if (r < 0) {
        ctx_delete(c, "");
        (void)respond_spawn_error(req, r);
        return NULL;
    }
    return c;
}

/* ---- handlers ---------------------------------------------------------------------- */

static json_t *body_object(struct http_req *req, bool empty_ok)
{
    struct str body = http_req_body(req);
    if (empty_ok && str_trim(body).len == 0)
        return json_object();
    json_t *j = json_loadb(body.p, body.len, 0, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    if (!j)
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "body must be a JSON object");
    return j;
}

/* Checks the create body; returns 0 with *ret_cwd (new or NULL) and *ret_id, or
 * responds and returns negative. */
static int parse_create(struct http_req *req, struct sbd *d, const json_t *j, char **ret_cwd,
                        struct str *ret_id)
{
    const json_t *lang = json_object_get(j, "language"), *cwd = json_object_get(j, "cwd"),
                 *id = json_object_get(j, "id");
    if (lang && !json_is_null(lang) &&
        (!json_is_string(lang) || strcmp(json_string_value(lang), "python") != 0))
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT,
                                 "unsupported language (only python)"),
               -EINVAL;
    *ret_id = STR_NULL;
    if (id && !json_is_null(id)) {
        struct str s =
            json_is_string(id) ? str_make(json_string_value(id), json_string_length(id)) : STR_NULL;
        if (!id_valid(s))
            return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT,
                                     "id must be 1-64 of [A-Za-z0-9._-]"),
                   -EINVAL;
        *ret_id = s;
    }
    *ret_cwd = NULL;
    if (!cwd || json_is_null(cwd))
        return 0;
    if (!json_is_string(cwd))
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "cwd must be a string"), -EINVAL;
    int e = sbd_path_clean(sbd_root_path(d->root),
                           str_make(json_string_value(cwd), json_string_length(cwd)), ret_cwd);
    if (e < 0)
        return sbd_respond_error(req, e == -EPERM ? 403 : 400,
                                 e == -EPERM ? SBD_PERMISSION_DENIED : SBD_INVALID_ARGUMENT,
                                 e == -EPERM ? "cwd escapes the root" : "invalid cwd"),
               e;
    return 0;
}

static int ctx_post(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    json_t *j = body_object(req, true);
    if (!j)
        return 0;
    char *cwd = NULL;
    struct str id;
    if (parse_create(req, d, j, &cwd, &id) == 0) {
        if (id.len && ctx_find(d->kernels, id)) {
            xfree(cwd);
            (void)sbd_respond_error(req, 409, SBD_CONFLICT, "context exists");
        } else {
            struct kctx *c = ctx_create(req, d->kernels, id, cwd);
            json_t *cj = c ? ctx_json(c) : NULL;
            if (cj)
                (void)http_respond_json(req, 201, cj);
            json_decref(cj);
        }
    }
    json_decref(j);
    return 0;
}

static int ctx_list(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    json_t *arr = json_array();
    for (struct kctx *c = d->kernels->head; c; c = c->next)
        (void)json_array_insert_new(arr, 0, ctx_json(c)); /* oldest first */
    json_t *j = json_pack("{s:o}", "contexts", arr);
    int r = http_respond_json(req, 200, j);
    json_decref(j);
    return r;
}

/* Splits "{id}[/action]". Returns the context or NULL (responded). */
static struct kctx *find_ctx(struct http_req *req, struct sbd *d, struct str *ret_action)
{
    struct str rest = http_req_path_rest(req), id, action;
    if (!str_cut(rest, '/', &id, &action))
        action = STR_NULL;
    struct kctx *c = ctx_find(d->kernels, id);
    if (!c)
        (void)sbd_respond_error(req, 404, SBD_NOT_FOUND, "no such context");
    *ret_action = action;
    return c;
}

static int ctx_get(struct http_req *req, void *ctx)
{
    struct str action;
    struct kctx *c = find_ctx(req, ctx, &action);
    if (!c)
        return 0;
    if (action.len)
        return sbd_respond_error(req, 404, SBD_NOT_FOUND, "unknown context action");
    json_t *j = ctx_json(c);
    int r = http_respond_json(req, 200, j);
    json_decref(j);
    return r;
}

static int ctx_del(struct http_req *req, void *ctx)
{
    struct str action;
    struct kctx *c = find_ctx(req, ctx, &action);
    if (!c)
        return 0;
    if (action.len)
        return sbd_respond_error(req, 404, SBD_NOT_FOUND, "unknown context action");
    ctx_delete(c, "the context was deleted");
    return http_respond(req, 204, NULL, NULL, 0);
}

static int ctx_restart(struct http_req *req, struct kctx *c)
{
    kernel_kill(c, "ContextRestarted", "the context was restarted; its state is lost");
    int r = kernel_spawn(c);
    if (r < 0)
        return respond_spawn_error(req, r);
    json_t *j = ctx_json(c);
    r = http_respond_json(req, 200, j);
    json_decref(j);
    return r;
}

/* A parsed execute request: its code (borrowed from the body) and timeout (0: none). */
struct exec_args {
    const char *code;
    size_t len;
    double timeout;
};

static int parse_exec(struct http_req *req, const json_t *j, struct exec_args *ret);
static int exec_start(struct http_req *req, struct sbd *d, struct kctx *c,
                      const struct exec_args *a);

static int ctx_action(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    struct str action;
    struct kctx *c = find_ctx(req, d, &action);
    if (!c)
        return 0;
    if (str_eq_c(action, "restart"))
        return ctx_restart(req, c);
    if (str_eq_c(action, "interrupt")) {
        exec_interrupt(c);
        return http_respond(req, 204, NULL, NULL, 0);
    }
    if (!str_eq_c(action, "execute"))
        return sbd_respond_error(req, 404, SBD_NOT_FOUND, "unknown context action");
    json_t *j = body_object(req, false);
    struct exec_args a;
    if (j && parse_exec(req, j, &a) == 0)
        (void)exec_start(req, d, c, &a);
    json_decref(j);
    return 0;
}

/* ---- execute ----------------------------------------------------------------------- */

static void on_timer(uv_timer_t *t);

/* Arms c's timer for the deadline or the next keepalive, whichever comes first. */
static void arm_timer(struct kctx *c)
{
    usec_t next = c->x->deadline;
    if (next > c->x->last_sent + c->ks->keepalive)
        next = c->x->last_sent + c->ks->keepalive;
    if (next == USEC_INFINITY)
        (void)uv_timer_stop(&c->timer);
    else
        sbd_timer_at(&c->timer, on_timer, next);
}

/* The timeout: SIGINT first; if the code has not ended after the grace, a new kernel. */
static void on_deadline(struct kctx *c)
{
    struct kexec *x = c->x;
    if (!x->timed_out && c->p) {
        x->timed_out = true;
        exec_interrupt(c);
        if (!c->x)
            return; /* it had not started */
        x->deadline = clock_now() + LIMIT_SBD_KERNEL_GRACE;
        arm_timer(c);
        return;
    }
    x->timed_out = true;
    kernel_kill(c, "TimeoutError",
                "the execution timed out and did not stop on an interrupt; the context was "
                "restarted and its state is lost");
    if (kernel_spawn(c) < 0)
        log_warn("cannot restart a kernel after a timeout\tcontext=%s", c->id);
}

/* A silent execution sends {"type":"keepalive"} now and then, so that proxies with an
 * idle timeout (the router's is 60 s) keep the stream. */
static void on_timer(uv_timer_t *t)
{
    struct kctx *c = t->data;
    struct kexec *x = c->x;
    if (!x)
        return;
    usec_t now = clock_now();
    if (now >= x->deadline) {
        on_deadline(c);
        return;
    }
    if (now >= x->last_sent + c->ks->keepalive && !sbd_ndjson_pending(&x->out))
        exec_send(x, json_pack("{s:s}", "type", "keepalive"), false);
    if (now >= x->last_sent + c->ks->keepalive)
        x->last_sent = now; /* a blocked client: look again later */
    arm_timer(c);
}

/* Reads code and timeout. Returns 0 or responds and returns negative. */
/* Reads code and timeout from j into *ret; answers 400 (and returns -EINVAL) when bad. */
static int parse_exec(struct http_req *req, const json_t *j, struct exec_args *ret)
{
    const json_t *code = json_object_get(j, "code"), *t = json_object_get(j, "timeout");
    if (!json_is_string(code))
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "code must be a string"), -EINVAL;
    double timeout = 0;
    if (t && !json_is_null(t)) {
        timeout = json_number_value(t);
        if (!json_is_number(t) || timeout <= 0 || timeout > LIMIT_SBD_MAX_TIMEOUT_S)
            return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT,
                                     "timeout must be a positive number of seconds"),
                   -EINVAL;
    }
    *ret = (struct exec_args){
        .code = json_string_value(code), .len = json_string_length(code), .timeout = timeout};
    return 0;
}

static int send_request(struct kctx *c, const char *code, size_t len, size_t budget)
{
    json_t *r = json_pack("{s:s, s:s%, s:I}", "type", "execute", "code", code, len, "max_output",
                          (json_int_t)budget);
    struct buf line;
    buf_init(&line, SIZE_MAX);
    (void)sbd_json_dump(r, &line);
    (void)buf_putc(&line, '\n');
    json_decref(r);
    int e = 0;
    if (c->state == KS_STARTING) {
        buf_reset(&c->queued);
        (void)buf_append(&c->queued, line.data, line.len);
    } else {
        e = sbd_proc_write(c->p, line.data, line.len);
    }
    buf_done(&line);
    return e;
}

static int exec_start(struct http_req *req, struct sbd *d, struct kctx *c,
                      const struct exec_args *a)
{
    if (c->x)
        return sbd_respond_error(req, 409, SBD_CONFLICT, "the context is executing other code");
    int e = c->p ? 0 : kernel_spawn(c);
    if (e < 0)
        return respond_spawn_error(req, e);
    e = send_request(c, a->code, a->len, d->kernels->max_output);
    if (e < 0)
        return sbd_respond_error(req, e == -EAGAIN ? 413 : 500,
                                 e == -EAGAIN ? SBD_RESOURCE_EXHAUSTED : SBD_INTERNAL,
                                 e == -EAGAIN ? "code too large" : "the kernel is gone");
    struct kexec *x = XNEW(struct kexec);
    x->budget = d->kernels->max_output;
    /* counted lines stay within the budget; one driver line adds the uncounted ones */
    sbd_ndjson_init(&x->out, req, x->budget + LIMIT_SBD_KERNEL_LINE);
    x->c = c;
    x->req = http_req_ref(req);
    c->x = x;
    if (c->state == KS_IDLE)
        c->state = KS_BUSY;
    http_req_set_abort_cb(req, exec_abort, x);
    http_req_set_drain_cb(req, exec_drain, x);
    (void)http_resp_start(req, 200, "application/x-ndjson");
    exec_send(x, json_pack("{s:s, s:s}", "type", "start", "context", c->id), false);
    double timeout = a->timeout > 0 ? a->timeout : d->cfg.exec_timeout_s;
    /* --exec-timeout 0: no timeout, as for processes */
    x->deadline =
        timeout > 0 ? clock_now() + (usec_t)(timeout * (double)USEC_PER_SEC) : USEC_INFINITY;
    arm_timer(c);
    return 0;
}

/* The context a /v1/code/execute body names ("default" made when missing), or NULL when
 * answered (a bad context field: 400; an unknown one: 404). */
static struct kctx *execute_ctx(struct http_req *req, struct sbd *d, const json_t *j)
{
    const json_t *id = json_object_get(j, "context");
    struct str sid = STR_LIT("default");
    if (id && !json_is_null(id))
        sid =
            json_is_string(id) ? str_make(json_string_value(id), json_string_length(id)) : STR_NULL;
    if (!id_valid(sid))
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT,
                                 "context must be 1-64 of [A-Za-z0-9._-]"),
               NULL;
    struct kctx *c = ctx_find(d->kernels, sid);
    if (!c && str_eq_c(sid, "default"))
        return ctx_create(req, d->kernels, sid, NULL); /* responded when NULL */
    if (!c)
        (void)sbd_respond_error(req, 404, SBD_NOT_FOUND, "no such context");
    return c;
}

static int code_execute(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    json_t *j = body_object(req, false);
    struct exec_args a;
    struct kctx *c;
    /* the whole request is checked before the default context is made for it */
    if (j && parse_exec(req, j, &a) == 0 && (c = execute_ctx(req, d, j)))
        (void)exec_start(req, d, c, &a);
    json_decref(j);
    return 0;
}

/* ---- life cycle -------------------------------------------------------------------- */

size_t sbd__kernels_idle(const struct sbd *d)
{
    size_t n = 0;
    for (const struct kctx *c = d->kernels ? d->kernels->head : NULL; c; c = c->next)
        if (c->p && !c->x)
            n++;
    return n;
}

void sbd__kernels_shutdown(struct sbd *d)
{
    if (!d->kernels)
        return;
    while (d->kernels->head)
        ctx_delete(d->kernels->head, "sandboxd is shutting down");
}

void sbd__kernels_free(struct sbd *d)
{
    if (!d->kernels)
        return;
    xfree(d->kernels->driver);
    xfree(d->kernels->python);
    xfree(d->kernels);
    d->kernels = NULL;
}

int sbd__kernels_register(struct sbd *d)
{
    struct sbd_kernels *ks = XNEW(struct sbd_kernels);
    ks->d = d;
    ks->driver = xstrdup(d->cfg.kernel_driver ? d->cfg.kernel_driver : SBD_KERNEL_DRIVER);
    ks->python = xstrdup(d->cfg.kernel_python ? d->cfg.kernel_python : SBD_KERNEL_PYTHON);
    /* 0 (a configuration not from sbd_config_defaults): the defaults */
    ks->max_contexts = d->cfg.max_contexts ? d->cfg.max_contexts : LIMIT_SBD_CONTEXTS;
    ks->max_output = d->cfg.max_code_output ? d->cfg.max_code_output : LIMIT_SBD_CODE_OUTPUT;
    ks->keepalive = d->cfg.code_keepalive ? d->cfg.code_keepalive : LIMIT_SBD_KERNEL_KEEPALIVE;
    d->kernels = ks;
    int r = 0;
    r |= sbd__route(d, d->router, "POST", "/v1/contexts", 0, ctx_post, false);
    r |= sbd__route(d, d->router, "GET", "/v1/contexts", 0, ctx_list, false);
    r |= sbd__route(d, d->router, "GET", "/v1/contexts/", HTTP_ROUTE_PREFIX, ctx_get, false);
    r |= sbd__route(d, d->router, "POST", "/v1/contexts/", HTTP_ROUTE_PREFIX, ctx_action, false);
    r |= sbd__route(d, d->router, "DELETE", "/v1/contexts/", HTTP_ROUTE_PREFIX, ctx_del, false);
    r |= sbd__route(d, d->router, "POST", "/v1/code/execute", 0, code_execute, false);
    return r < 0 ? -EINVAL : 0;
}
