/* SPDX-License-Identifier: Apache-2.0 */
/* ProcessService handlers (see grpc_proc.h): Start streams InitEvent, output chunks and
 * ExitEvent; Execute buffers the output (at most one message); WriteStdin, SendSignal and
 * ResizeTTY act on any process of the engine by id, whichever front started it. */
#include "sandboxd/grpc_proc.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sandboxd/activity.h"
#include "sandboxd/grpc_reflect.h"
#include "sandboxd/proc.h"
#include "sandboxd/sbd_int.h"

/* A running Start or Execute call. */
struct gproc {
    struct sbd_gcall *call;
    struct sbd_proc *p;
    bool paused;
    struct buf out, err; /* Execute only */
    uint64_t over;       /* Execute: output bytes past LIMIT_SBD_GRPC_EXEC_OUT, dropped */
};

/* Packs m and queues it: a unary call's answer (unary) or a stream's message. */
static int pack_send(struct sbd_gcall *call, const ProtobufCMessage *m, bool unary)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > (unary ? LIMIT_SBD_GRPC_REPLY : LIMIT_SBD_GRPC_MESSAGE))
        return -E2BIG;
    uint8_t *b = xmalloc(n ? n : 1);
    (void)protobuf_c_message_pack(m, b);
    int r = unary ? sbd_gcall_reply(call, b, n) : sbd_gcall_send(call, b, n);
    xfree(b);
    return r;
}

static int send_msg(struct sbd_gcall *call, const ProtobufCMessage *m)
{
    return pack_send(call, m, false);
}

/* Ends a unary call after its answer was queued (r 0) or refused (r < 0). */
static void finish_reply(struct sbd_gcall *call, int r)
{
    if (r == -ENOBUFS)
        sbd_gcall_finish(call, SBD_GRPC_RESOURCE_EXHAUSTED, SBD_GRPC_UNSENT_MSG);
    else if (r < 0)
        sbd_gcall_finish(call, SBD_GRPC_RESOURCE_EXHAUSTED, "response message too large");
    else
        sbd_gcall_finish(call, SBD_GRPC_OK, NULL);
}

/* Sends the one response message of a unary call and ends it. */
static void reply(struct sbd_gcall *call, const ProtobufCMessage *m)
{
    finish_reply(call, pack_send(call, m, true));
}

/* ---- the request ------------------------------------------------------------------- */

static enum sbd_gstatus conv_env(const Process__V1__ProcessConfig *cfg, struct sbd_procreq *r,
                                 const char **msg)
{
    if (cfg->n_env_vars == 0)
        return SBD_GRPC_OK;
    r->env = xcalloc(cfg->n_env_vars + 1, sizeof(char *));
    for (size_t i = 0; i < cfg->n_env_vars; i++) {
        const char *k = cfg->env_vars[i]->key, *v = cfg->env_vars[i]->value;
        if (!k || !*k || strchr(k, '='))
            return *msg = "env_vars names must be non-empty and without '='",
                   SBD_GRPC_INVALID_ARGUMENT;
        r->env[i] = xasprintf("%s=%s", k, v ? v : "");
    }
    return SBD_GRPC_OK;
}

enum sbd_gstatus sbd__grpc_procreq(const Process__V1__ProcessConfig *cfg, const char *root_path,
                                   struct sbd_procreq *r, const char **msg)
{
    *r = (struct sbd_procreq){0};
    buf_init(&r->stdin_data, 0);
    if (!cfg || cfg->n_command == 0)
        return *msg = "command is required", SBD_GRPC_INVALID_ARGUMENT;
    if (cfg->n_command + cfg->n_env_vars > LIMIT_SBD_ARGS)
        return *msg = "too many command and env_vars entries", SBD_GRPC_INVALID_ARGUMENT;
    if (!cfg->command[0] || !cfg->command[0][0])
        return *msg = "command[0] is empty", SBD_GRPC_INVALID_ARGUMENT;
    r->argv = xcalloc(cfg->n_command + 1, sizeof(char *));
    for (size_t i = 0; i < cfg->n_command; i++)
        r->argv[i] = xstrdup(cfg->command[i] ? cfg->command[i] : "");
    enum sbd_gstatus st = conv_env(cfg, r, msg);
    if (st != SBD_GRPC_OK || !cfg->cwd || !*cfg->cwd)
        return st;
    int e = sbd_path_clean(root_path, str_c(cfg->cwd), &r->cwd);
    if (e == -EPERM)
        return *msg = "cwd escapes the sandbox root", SBD_GRPC_PERMISSION_DENIED;
    return e < 0 ? (*msg = "cwd: cannot be resolved", SBD_GRPC_INTERNAL) : SBD_GRPC_OK;
}

static enum sbd_gstatus start_error(int e, const char **msg)
{
    switch (e) {
    case -EPERM:
    case -EXDEV:
        return *msg = "cwd escapes the sandbox root", SBD_GRPC_PERMISSION_DENIED;
    case -EAGAIN:
        return *msg = "too many running processes", SBD_GRPC_RESOURCE_EXHAUSTED;
    case -ESHUTDOWN:
        return *msg = "sandboxd is shutting down", SBD_GRPC_UNAVAILABLE;
    /* as upstream's sandboxd maps them (a missing binary or path, a permission) */
    case -ENOENT:
        return *msg = "failed to start command: command or path not found", SBD_GRPC_NOT_FOUND;
    case -ENOTDIR:
        return *msg = "failed to start command: cwd is not a directory", SBD_GRPC_INTERNAL;
    case -EACCES:
    case -ELOOP:
        return *msg = "failed to start command: permission denied", SBD_GRPC_PERMISSION_DENIED;
    case -E2BIG:
        return *msg = "failed to start command: an argument or environment value is too large "
                      "for execve (send a long script on stdin)",
               SBD_GRPC_INVALID_ARGUMENT;
    case -ENOEXEC:
        return *msg = "failed to start command: not an executable the kernel can run",
               SBD_GRPC_INVALID_ARGUMENT;
    /* INTERNAL, as upstream: UNAVAILABLE would make upstream's SDK drop its channel */
    case -EMFILE:
    case -ENFILE:
    case -ENOMEM:
        return *msg = "failed to start command: out of descriptors or memory, try again",
               SBD_GRPC_INTERNAL;
    default:
        return *msg = "failed to start command", SBD_GRPC_INTERNAL;
    }
}

/* Starts r for the call on d's engine, waiting up to drain after its exit for output a
 * descendant holds open; finishes the call itself on failure. */
static struct gproc *start(struct sbd *d, struct sbd_gcall *call, struct sbd_procreq *r,
                           const struct sbd_proc_ops *ops, usec_t drain)
{
    r->timeout_s = (double)sbd_gcall_timeout(call) / (double)USEC_PER_SEC;
    struct gproc *x = XNEW(struct gproc);
    x->call = call;
    struct sbd_proc_spec spec;
    int cwd_fd = -1;
    int e = sbd_procreq_spec(r, d->root, &spec, &cwd_fd);
    spec.drain = drain;
    if (e == 0)
        e = sbd_proc_start(d->procs, &spec, ops, x, &x->p);
    if (cwd_fd >= 0)
        (void)close(cwd_fd);
    sbd_procreq_done(r);
    if (e < 0) {
        const char *msg = NULL;
        enum sbd_gstatus st = start_error(e, &msg);
        sbd_gcall_finish(call, st, msg);
        xfree(x);
        return NULL;
    }
    return x;
}

static void gproc_free(struct gproc *x)
{
    buf_done(&x->out);
    buf_done(&x->err);
    xfree(x);
}

/* The client went away (reset, disconnect, server stop): kill the process group. */
static void on_cancel(void *ctx)
{
    struct gproc *x = ctx;
    sbd_proc_detach(x->p);
    gproc_free(x);
}

/* ---- Start ------------------------------------------------------------------------- */

static void on_drain(void *ctx)
{
    struct gproc *x = ctx;
    if (x->paused && sbd_gcall_queued(x->call) < LIMIT_SBD_GRPC_QUEUE / 2) {
        x->paused = false;
        sbd_proc_pause(x->p, false);
    }
}

static void start_output(struct sbd_proc *p, enum sbd_stream s, const char *data, size_t n,
                         void *ctx)
{
    struct gproc *x = ctx;
    Process__V1__StartResponse m = PROCESS__V1__START_RESPONSE__INIT;
    ProtobufCBinaryData bin = {n, (uint8_t *)data};
    if (s == SBD_STDERR) {
        m.event_case = PROCESS__V1__START_RESPONSE__EVENT_STDERR;
        m.stderr = bin;
    } else {
        m.event_case = PROCESS__V1__START_RESPONSE__EVENT_STDOUT;
        m.stdout = bin;
    }
    if (send_msg(x->call, &m.base) < 0) {
        /* Cannot happen while the pause below bounds the queue; never drop output. */
        sbd_proc_detach(p);
        sbd_gcall_finish(x->call, SBD_GRPC_INTERNAL, "output queue overflow");
        gproc_free(x);
        return;
    }
    if (!x->paused && sbd_gcall_queued(x->call) >= LIMIT_SBD_GRPC_QUEUE) {
        x->paused = true; /* resumed by on_drain as HTTP/2 flow control lets it go */
        sbd_proc_pause(p, true);
    }
}

static void start_exit(struct sbd_proc *p, const struct sbd_exit *e, void *ctx)
{
    struct gproc *x = ctx;
    (void)p;
    if (e->timed_out) {
        sbd_gcall_finish(x->call, SBD_GRPC_DEADLINE_EXCEEDED,
                         "deadline exceeded: the process group was killed");
    } else {
        Process__V1__ExitEvent ev = PROCESS__V1__EXIT_EVENT__INIT;
        ev.exit_code = e->exit_code;
        Process__V1__StartResponse m = PROCESS__V1__START_RESPONSE__INIT;
        m.event_case = PROCESS__V1__START_RESPONSE__EVENT_EXIT;
        m.exit = &ev;
        (void)send_msg(x->call, &m.base);
        sbd_gcall_finish(x->call, SBD_GRPC_OK, NULL);
    }
    gproc_free(x);
}

static const struct sbd_proc_ops start_ops = {.output = start_output, .exit = start_exit};

/* Reads a varint at *p (before end) into *v; false when it is cut short or too long. */
static bool pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Skips a field of wire type wt (other than length-delimited) at *p; false when malformed. */
static bool pb_skip(const uint8_t **p, const uint8_t *end, unsigned wt)
{
    uint64_t v;
    size_t fixed = wt == 1 ? 8 : wt == 5 ? 4 : 0;
    if (wt == 0)
        return pb_varint(p, end, &v);
    if (fixed == 0 || (size_t)(end - *p) < fixed)
        return false; /* groups (3, 4) and unknown wire types */
    *p += fixed;
    return true;
}

/* Whether a string field of the message desc encoded in [p, end), or of a message inside
 * it (map entries included), holds a NUL byte. protobuf-c hands strings over
 * NUL-terminated, so such an argument, variable or cwd would be cut short without a word.
 * Malformed input answers false: the decode reports it. */
static bool pb_nul_string(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                          const uint8_t *end, int depth)
{
    uint64_t key, len;
    while (p < end && pb_varint(&p, end, &key)) {
        if ((key & 7) != 2) {
            if (!pb_skip(&p, end, (unsigned)(key & 7)))
                return false;
            continue;
        }
        if (!pb_varint(&p, end, &len) || len > (uint64_t)(end - p) || (key >> 3) > UINT32_MAX)
            return false;
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3));
        if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, (size_t)len))
            return true;
        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && depth < 16 &&
            pb_nul_string(f->descriptor, p, p + len, depth + 1))
            return true;
        p += len;
    }
    return false;
}

/* Decodes a request of type desc; on failure finishes the call with INVALID_ARGUMENT
 * ("cannot decode <Type>", or a string holding a NUL byte) and returns NULL. The caller
 * frees the message with protobuf_c_message_free_unpacked. */
static void *decode(struct sbd_gcall *call, const ProtobufCMessageDescriptor *desc,
                    const uint8_t *msg, size_t n)
{
    if (pb_nul_string(desc, msg, msg + n, 0)) {
        sbd_gcall_finish(call, SBD_GRPC_INVALID_ARGUMENT,
                         "string fields (command, env_vars, cwd) must not contain NUL bytes");
        return NULL;
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, n, msg);
    if (!m) {
        char why[96];
        (void)snprintf(why, sizeof(why), "cannot decode %s", desc->short_name);
        sbd_gcall_finish(call, SBD_GRPC_INVALID_ARGUMENT, why);
    }
    return m;
}

static enum sbd_gstatus start_pty(const Process__V1__StartRequest *req, struct sbd_procreq *r,
                                  const char **msg)
{
    if (!req->pty)
        return SBD_GRPC_OK;
    if (req->pty->cols > 65535 || req->pty->rows > 65535)
        return *msg = "pty cols and rows must be at most 65535", SBD_GRPC_INVALID_ARGUMENT;
    r->pty = true;
    r->cols = (unsigned short)req->pty->cols;
    r->rows = (unsigned short)req->pty->rows;
    return SBD_GRPC_OK;
}

static void h_start(struct sbd_gcall *call, const uint8_t *msg, size_t n, void *ctx)
{
    struct sbd *d = ctx;
    Process__V1__StartRequest *req = decode(call, &process__v1__start_request__descriptor, msg, n);
    if (!req)
        return;
    struct sbd_procreq r;
    const char *err = NULL;
    enum sbd_gstatus st = sbd__grpc_procreq(req->config, d->root_path, &r, &err);
    if (st == SBD_GRPC_OK)
        st = start_pty(req, &r, &err);
    protobuf_c_message_free_unpacked(&req->base, NULL);
    if (st != SBD_GRPC_OK) {
        sbd_procreq_done(&r);
        sbd_gcall_finish(call, st, err);
        return;
    }
    struct gproc *x = start(d, call, &r, &start_ops, LIMIT_SBD_GRPC_START_DRAIN);
    if (!x)
        return;
    sbd_gcall_set_callbacks(call, on_cancel, on_drain, x);
    Process__V1__InitEvent ev = PROCESS__V1__INIT_EVENT__INIT;
    ev.process_id = (int32_t)sbd_proc_id(x->p);
    Process__V1__StartResponse m = PROCESS__V1__START_RESPONSE__INIT;
    m.event_case = PROCESS__V1__START_RESPONSE__EVENT_INIT;
    m.init = &ev;
    (void)send_msg(call, &m.base);
}

/* ---- Execute ----------------------------------------------------------------------- */

/* Buffers Execute's output for its one answer. Past LIMIT_SBD_GRPC_EXEC_OUT the rest is
 * read and dropped (counted): the command runs to its end, as upstream's does, and the
 * call answers RESOURCE_EXHAUSTED then (exec_exit). */
static void exec_output(struct sbd_proc *p, enum sbd_stream s, const char *data, size_t n,
                        void *ctx)
{
    struct gproc *x = ctx;
    struct buf *b = s == SBD_STDERR ? &x->err : &x->out;
    (void)p;
    if (x->over || x->out.len + x->err.len + n > LIMIT_SBD_GRPC_EXEC_OUT) {
        x->over += n;
        return;
    }
    (void)buf_append(b, data, n);
}

static void exec_over(struct gproc *x, const struct sbd_exit *e)
{
    char msg[256];
    (void)snprintf(msg, sizeof(msg),
                   "output of %llu bytes is over Execute's limit of %u MiB (use Start to "
                   "stream it); the command ran to its end: exit code %d",
                   (unsigned long long)(x->out.len + x->err.len + x->over),
                   LIMIT_SBD_GRPC_EXEC_OUT / (1024 * 1024), e->exit_code);
    sbd_gcall_finish(x->call, SBD_GRPC_RESOURCE_EXHAUSTED, msg);
}

/* Answers Execute. The output is let go once packed: a 16 MiB answer is held twice at
 * most (packed, and queued for HTTP/2), not three times. */
static void exec_reply(struct gproc *x, int exit_code)
{
    Process__V1__ExecuteResponse m = PROCESS__V1__EXECUTE_RESPONSE__INIT;
    m.exit_code = exit_code;
    m.stdout = (ProtobufCBinaryData){x->out.len, (uint8_t *)x->out.data};
    m.stderr = (ProtobufCBinaryData){x->err.len, (uint8_t *)x->err.data};
    size_t n = protobuf_c_message_get_packed_size(&m.base);
    uint8_t *b = xmalloc(n ? n : 1);
    (void)protobuf_c_message_pack(&m.base, b);
    buf_done(&x->out);
    buf_done(&x->err);
    finish_reply(x->call, sbd_gcall_reply(x->call, b, n));
    xfree(b);
}

static void exec_exit(struct sbd_proc *p, const struct sbd_exit *e, void *ctx)
{
    struct gproc *x = ctx;
    (void)p;
    if (e->timed_out) {
        sbd_gcall_finish(x->call, SBD_GRPC_DEADLINE_EXCEEDED,
                         "deadline exceeded: the process group was killed");
    } else if (x->over) {
        exec_over(x, e);
    } else {
        exec_reply(x, e->exit_code);
    }
    gproc_free(x);
}

static const struct sbd_proc_ops exec_ops = {.output = exec_output, .exit = exec_exit};

static void h_execute(struct sbd_gcall *call, const uint8_t *msg, size_t n, void *ctx)
{
    struct sbd *d = ctx;
    Process__V1__ExecuteRequest *req =
        decode(call, &process__v1__execute_request__descriptor, msg, n);
    if (!req)
        return;
    struct sbd_procreq r;
    const char *err = NULL;
    enum sbd_gstatus st = sbd__grpc_procreq(req->config, d->root_path, &r, &err);
    protobuf_c_message_free_unpacked(&req->base, NULL);
    if (st != SBD_GRPC_OK) {
        sbd_procreq_done(&r);
        sbd_gcall_finish(call, st, err);
        return;
    }
    r.stdin_null = true; /* as upstream: Execute has no stdin (a pipe made rg read it) */
    struct gproc *x = start(d, call, &r, &exec_ops, LIMIT_SBD_GRPC_EXEC_DRAIN);
    if (!x)
        return;
    buf_init(&x->out, LIMIT_SBD_GRPC_EXEC_OUT);
    buf_init(&x->err, LIMIT_SBD_GRPC_EXEC_OUT);
    sbd_gcall_set_callbacks(call, on_cancel, NULL, x);
}

/* ---- control calls ----------------------------------------------------------------- */

static struct sbd_proc *find(struct sbd *d, struct sbd_gcall *call, int32_t id)
{
    struct sbd_proc *p = id > 0 ? sbd_procs_find(d->procs, (uint32_t)id) : NULL;
    if (!p)
        sbd_gcall_finish(call, SBD_GRPC_NOT_FOUND, "process not found");
    return p;
}

/* A WriteStdin waiting for the process to take its input. call is NULL once the client
 * went away; the write's callback frees it. */
struct stdin_wait {
    struct sbd_gcall *call;
};

static void stdin_answer(struct sbd_gcall *call, int e)
{
    if (e == -EAGAIN) {
        sbd_gcall_finish(call, SBD_GRPC_RESOURCE_EXHAUSTED, "stdin queue full (8 MiB)");
    } else if (e < 0) {
        sbd_gcall_finish(call, SBD_GRPC_FAILED_PRECONDITION,
                         "stdin is closed (or no process reads it any more)");
    } else {
        Process__V1__WriteStdinResponse m = PROCESS__V1__WRITE_STDIN_RESPONSE__INIT;
        reply(call, &m.base);
    }
}

static void on_stdin_taken(void *ctx, int status)
{
    struct stdin_wait *w = ctx;
    if (w->call)
        stdin_answer(w->call, status);
    xfree(w);
}

static void on_stdin_cancel(void *ctx)
{
    struct stdin_wait *w = ctx;
    w->call = NULL; /* the input stays queued: it cannot be taken back */
}

/* Queues input for p; the answer waits until the process's stdin took all of it (as
 * upstream's blocking write: a client writing faster than the process reads is held
 * back, where a queue of 8 MiB used to fill and refuse it), or the write failed. */
static void write_input(struct sbd_gcall *call, struct sbd_proc *p, const uint8_t *data, size_t n)
{
    if (n == 0) {
        stdin_answer(call, sbd_proc_write(p, data, 0));
        return;
    }
    struct stdin_wait *w = XNEW(struct stdin_wait);
    w->call = call;
    int e = sbd_proc_write_cb(p, data, n, on_stdin_taken, w);
    if (e < 0) {
        xfree(w);
        stdin_answer(call, e);
        return;
    }
    sbd_gcall_set_callbacks(call, on_stdin_cancel, NULL, w);
}

static void h_write_stdin(struct sbd_gcall *call, const uint8_t *msg, size_t n, void *ctx)
{
    struct sbd *d = ctx;
    Process__V1__WriteStdinRequest *req =
        decode(call, &process__v1__write_stdin_request__descriptor, msg, n);
    if (!req)
        return;
    struct sbd_proc *p = find(d, call, req->process_id);
    if (p && req->payload_case == PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_INPUT)
        write_input(call, p, req->input.data, req->input.len);
    else if (p && req->payload_case == PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_EOF)
        stdin_answer(call, sbd_proc_close_stdin(p));
    else if (p)
        stdin_answer(call, 0); /* neither: nothing to do */
    protobuf_c_message_free_unpacked(&req->base, NULL);
}

static void h_send_signal(struct sbd_gcall *call, const uint8_t *msg, size_t n, void *ctx)
{
    struct sbd *d = ctx;
    Process__V1__SendSignalRequest *req =
        decode(call, &process__v1__send_signal_request__descriptor, msg, n);
    if (!req)
        return;
    int32_t id = req->process_id;
    int sig = (int)req->signal;
    protobuf_c_message_free_unpacked(&req->base, NULL);
    struct sbd_proc *p = find(d, call, id);
    if (!p)
        return;
    if (sig != SIGINT && sig != SIGTERM && sig != SIGKILL) {
        sbd_gcall_finish(call, SBD_GRPC_INVALID_ARGUMENT, "unsupported or unspecified signal");
        return;
    }
    (void)sbd_proc_signal(p, sig);
    Process__V1__SendSignalResponse m = PROCESS__V1__SEND_SIGNAL_RESPONSE__INIT;
    reply(call, &m.base);
}

static void h_resize(struct sbd_gcall *call, const uint8_t *msg, size_t n, void *ctx)
{
    struct sbd *d = ctx;
    Process__V1__ResizeTTYRequest *req =
        decode(call, &process__v1__resize_ttyrequest__descriptor, msg, n);
    if (!req)
        return;
    int32_t id = req->process_id;
    uint32_t cols = req->cols, rows = req->rows;
    protobuf_c_message_free_unpacked(&req->base, NULL);
    struct sbd_proc *p = find(d, call, id);
    if (!p)
        return;
    if (cols > 65535 || rows > 65535) {
        sbd_gcall_finish(call, SBD_GRPC_INVALID_ARGUMENT, "cols and rows must be at most 65535");
        return;
    }
    int e = sbd_proc_resize(p, (unsigned short)cols, (unsigned short)rows);
    if (e < 0) {
        sbd_gcall_finish(call, SBD_GRPC_FAILED_PRECONDITION,
                         e == -ENOTTY ? "the process has no PTY" : "the process has exited");
        return;
    }
    Process__V1__ResizeTTYResponse m = PROCESS__V1__RESIZE_TTYRESPONSE__INIT;
    reply(call, &m.base);
}

/* ---- server ------------------------------------------------------------------------ */

static const struct sbd_grpc_method methods[] = {
    {"/process.v1.ProcessService/Start", h_start},
    {"/process.v1.ProcessService/Execute", h_execute},
    {"/process.v1.ProcessService/WriteStdin", h_write_stdin},
    {"/process.v1.ProcessService/SendSignal", h_send_signal},
    {"/process.v1.ProcessService/ResizeTTY", h_resize},
    {SBD_REFLECT_V1, sbd__grpc_reflect, true},
    {SBD_REFLECT_V1ALPHA, sbd__grpc_reflect, true},
};

static void on_activity(void *ctx)
{
    sbd__activity_touch(ctx);
}

int sbd__grpc_start(struct sbd *d)
{
    struct sbd_grpc_opts o = {
        .host = d->host,
        .port = (uint16_t)d->cfg.grpc_port,
        .methods = methods,
        .nmethods = ARRAY_SIZE(methods),
        .ctx = d,
        .token = d->token,
        .activity = on_activity,
        .idle_timeout = d->cfg.idle_timeout,
        .max_unsent = d->cfg.grpc_max_unsent,
    };
    return sbd_grpc_new(d->loop, &o, &d->grpc);
}
