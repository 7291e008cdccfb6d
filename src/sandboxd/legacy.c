/* SPDX-License-Identifier: Apache-2.0 */
/* The legacy python-runtime API (port 8888) with its exact JSON shapes: GET /,
 * POST /execute, POST /upload, GET /download/{p}, GET /list/{p}, GET /exists/{p}. Bodies
 * are written as FastAPI writes them (compact, keys in order, non-ASCII as is). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/pct.h"
#include "common/xalloc.h"
#include "sandboxd/api_proc.h"
#include "sandboxd/files.h"
#include "sandboxd/late.h"
#include "sandboxd/multipart.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/shlex.h"
#include "sandboxd/util.h"

static int respond_buf(struct http_req *req, int status, struct buf *b)
{
    int r = http_respond(req, status, "application/json", b->data ? b->data : "", b->len);
    buf_done(b);
    return r;
}

/* {"<key>":"<value>"} */
static int respond_kv(struct http_req *req, int status, const char *key, const char *value)
{
    struct buf b;
    buf_init(&b, 64u * 1024);
    (void)buf_putc(&b, '{');
    (void)sbd_py_json_string(str_c(key), &b);
    (void)buf_putc(&b, ':');
    struct buf v;
    buf_init(&v, 32u * 1024);
    (void)sbd_utf8_sanitize(value, strlen(value), &v);
    (void)sbd_py_json_string(str_make(v.data, v.len), &b);
    buf_done(&v);
    (void)buf_putc(&b, '}');
    return respond_buf(req, status, &b);
}

int sbd__legacy_error_body(void *ctx, int status, const char *detail, struct buf *out,
                           const char **ret_content_type)
{
    (void)ctx;
    (void)detail;
    buf_reset(out);
    (void)buf_puts(out, "{\"detail\":");
    (void)sbd_py_json_string(str_c(http_status_reason(status)), out);
    (void)buf_putc(out, '}');
    *ret_content_type = "application/json";
    return 0;
}

static int root_ok(struct http_req *req, void *ctx)
{
    (void)ctx;
    static const char body[] = "{\"status\":\"ok\",\"message\":\"Sandbox Runtime is active.\"}";
    return http_respond(req, 200, "application/json", body, sizeof(body) - 1);
}

/* Decodes and cleans the path after the route prefix (leading '/' stripped, as upstream).
 * Responds 403/400 itself. */
static int legacy_path(struct http_req *req, char **ret_rel, char **ret_decoded)
{
    struct buf raw;
    buf_init(&raw, LIMIT_SBD_PATH * 3);
    int r = pct_decode(http_req_path_rest(req), false, &raw);
    if (r == 0)
        r = sbd_path_clean(NULL, str_make(raw.data, raw.len), ret_rel);
    if (r == -EPERM)
        (void)respond_kv(req, 403, "message", "Access denied");
    else if (r < 0)
        (void)respond_kv(req, 400, "message", "Invalid path");
    if (r == 0 && ret_decoded)
        *ret_decoded = buf_steal(&raw);
    buf_done(&raw);
    return r;
}

/* ---- /execute ---------------------------------------------------------------------- */

struct exec {
    struct http_req *req;
    struct sbd_proc *p;
    struct buf out, err;
    char *argv_repr;
    unsigned timeout_s;
    struct sbd_late answer; /* kept alive while the command is silent */
};

static void exec_closed(uv_handle_t *h)
{
    xfree(h->data);
}

static void exec_free(struct exec *x)
{
    http_req_set_abort_cb(x->req, NULL, NULL);
    http_req_unref(x->req);
    buf_done(&x->out);
    buf_done(&x->err);
    xfree(x->argv_repr);
    sbd_late_close(&x->answer, exec_closed);
}

/* Appends {"stdout":"...","stderr":"...","exit_code":N} to b. */
static void exec_body(const struct buf *out, const struct buf *err, int code, struct buf *b)
{
    struct buf t;
    buf_init(&t, SIZE_MAX);
    (void)buf_puts(b, "{\"stdout\":");
    (void)sbd_utf8_sanitize(out->data ? out->data : "", out->len, &t);
    (void)sbd_py_json_string(str_make(t.data, t.len), b);
    buf_reset(&t);
    (void)buf_puts(b, ",\"stderr\":");
    (void)sbd_utf8_sanitize(err->data ? err->data : "", err->len, &t);
    (void)sbd_py_json_string(str_make(t.data, t.len), b);
    buf_done(&t);
    (void)buf_printf(b, ",\"exit_code\":%d}", code);
}

/* Appends the body of a command that could not run (or timed out) to b: exit code 1,
 * stderr "Failed to execute command: <msg>". */
static void failed_body(const char *msg, struct buf *b)
{
    struct buf out, err;
    buf_init(&out, 16);
    buf_init(&err, 64u * 1024);
    (void)buf_printf(&err, "Failed to execute command: %s", msg);
    exec_body(&out, &err, 1, b);
    buf_done(&err);
    buf_done(&out);
}

static int exec_failed(struct http_req *req, const char *msg)
{
    struct buf b;
    buf_init(&b, SIZE_MAX);
    failed_body(msg, &b);
    return respond_buf(req, 200, &b);
}

static void exec_free_unstarted(struct exec *x)
{
    buf_done(&x->out);
    buf_done(&x->err);
    xfree(x->argv_repr);
    xfree(x);
}

static void exec_output(struct sbd_proc *p, enum sbd_stream s, const char *data, size_t n,
                        void *ctx)
{
    struct exec *x = ctx;
    (void)p;
    struct buf *b = s == SBD_STDERR ? &x->err : &x->out;
    size_t room = b->limit - b->len;
    (void)buf_append(b, data, n < room ? n : room);
}

static void exec_exit(struct sbd_proc *p, const struct sbd_exit *e, void *ctx)
{
    struct exec *x = ctx;
    struct buf b;
    (void)p;
    buf_init(&b, SIZE_MAX);
    if (e->timed_out) {
        char msg[LIMIT_SBD_PATH + 128];
        (void)snprintf(msg, sizeof(msg), "Command '%s' timed out after %u seconds", x->argv_repr,
                       x->timeout_s);
        failed_body(msg, &b);
    } else {
        /* Python's returncode: the exit status, or minus the signal. */
        exec_body(&x->out, &x->err, e->signal ? -e->signal : e->exit_code, &b);
    }
    (void)sbd_late_answer(&x->answer, b.data ? b.data : "", b.len);
    buf_done(&b);
    exec_free(x);
}

static void exec_abort(struct http_req *req, void *ctx)
{
    struct exec *x = ctx;
    (void)req;
    sbd_proc_detach(x->p);
    exec_free(x);
}

static const struct sbd_proc_ops exec_ops = {.output = exec_output, .exit = exec_exit};

/* FastAPI's 422 for a body without a string "command". */
static int unprocessable(struct http_req *req)
{
    static const char body[] = "{\"detail\":[{\"type\":\"missing\",\"loc\":[\"body\",\"command\"],"
                               "\"msg\":\"Field required\",\"input\":null}]}";
    return http_respond(req, 422, "application/json", body, sizeof(body) - 1);
}

static int start_exec(struct http_req *req, struct sbd *d, char **argv)
{
    struct sbd_procreq r = {
        .argv = argv,
        .max_output = d->cfg.max_output,
        .timeout_s = d->cfg.exec_timeout_s,
        .stdin_null = true, /* nothing is ever written to it */
    };
    struct exec *x = XNEW(struct exec);
    x->timeout_s = d->cfg.exec_timeout_s;
    buf_init(&x->out, d->cfg.max_output);
    buf_init(&x->err, d->cfg.max_output);
    struct buf repr;
    buf_init(&repr, LIMIT_SBD_PATH);
    (void)sbd_py_repr_list(argv, &repr);
    x->argv_repr = buf_steal(&repr);
    int status = 0;
    const char *code = NULL, *msg = NULL;
    /* Commands run in the legacy base directory. */
    int e = sbd__proc_start_req(d, d->legacy_root, &r, &exec_ops, x, &x->p, &status, &code, &msg);
    if (e < 0) {
        char m[LIMIT_SBD_PATH + 64];
        int en = e == -ENOENT ? 2 : e == -EACCES ? 13 : -e;
        (void)snprintf(m, sizeof(m), "[Errno %d] %s: '%s'", en, strerror(en), argv[0]);
        (void)exec_failed(req, e == -EAGAIN ? msg : m);
        exec_free_unstarted(x);
        return 0;
    }
    x->req = http_req_ref(req);
    http_req_set_abort_cb(req, exec_abort, x);
    http_req_set_eof_aborts(req); /* a client that gave up: its process goes */
    sbd_late_start(&x->answer, req, d->cfg.proc_keepalive, x);
    return 0;
}

static int execute(struct http_req *req, void *ctx)
{
    struct str body = http_req_body(req);
    json_t *j = json_loadb(body.p, body.len, 0, NULL);
    const json_t *c = json_object_get(j, "command");
    if (!json_is_string(c)) {
        json_decref(j);
        return unprocessable(req);
    }
    char **argv = NULL;
    const char *msg = NULL;
    int r = sbd_shlex_split(str_make(json_string_value(c), json_string_length(c)), &argv, &msg);
    json_decref(j);
    if (r < 0)
        return exec_failed(req, msg);
    if (!argv[0]) {
        sbd_shlex_free(argv);
        return exec_failed(req, "list index out of range");
    }
    r = start_exec(req, ctx, argv);
    sbd_shlex_free(argv);
    return r;
}

/* ---- /upload ----------------------------------------------------------------------- */

static void upload_done(struct http_req *req, int err, const char *path, void *ctx)
{
    (void)ctx;
    char msg[LIMIT_SBD_PATH + 64], eb[128];
    if (err == 0) {
        (void)snprintf(msg, sizeof(msg), "File '%s' uploaded successfully.", path);
        (void)respond_kv(req, 200, "message", msg);
    } else if (err == -EPERM || err == -EXDEV || err == -ELOOP) {
        (void)respond_kv(req, 403, "message", "Access denied");
    } else if (err == -ENXIO) {
        (void)respond_kv(req, 400, "message", "File upload failed: not a regular file");
    } else if (err == -ENODATA || err == -EPROTO) {
        static const char body[] = "{\"detail\":[{\"type\":\"missing\",\"loc\":[\"body\",\"file\"],"
                                   "\"msg\":\"Field required\",\"input\":null}]}";
        (void)http_respond(req, 422, "application/json", body, sizeof(body) - 1);
    } else {
        (void)snprintf(msg, sizeof(msg), "File upload failed: %s",
                       err == -EFBIG ? "file too large" : log_strerror(err, eb, sizeof(eb)));
        (void)respond_kv(req, 500, "message", msg);
    }
}

static int upload(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    char *boundary = NULL;
    struct str ct = http_req_header(req, "Content-Type");
    if (!ct.p || sbd_multipart_boundary(ct, &boundary) < 0) {
        upload_done(req, -ENODATA, NULL, d);
        return 0;
    }
    struct sbd_upload_opts o = {.root = d->legacy_root,
                                .boundary = boundary,
                                .mode = 0644,
                                .limit = d->cfg.max_upload,
                                .done = upload_done,
                                .ctx = d,
                                .activity = d};
    int r = sbd_upload_start(req, &o);
    if (r < 0)
        upload_done(req, r, NULL, d);
    xfree(boundary);
    return 0;
}

/* ---- /download, /list, /exists ----------------------------------------------------- */

/* Starlette's Content-Disposition for a FileResponse with a filename. */
static void add_disposition(struct http_req *req, const char *rel)
{
    const char *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    struct buf b;
    buf_init(&b, LIMIT_SBD_PATH * 3 + 64);
    bool plain = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                              "0123456789_.-~") == strlen(name);
    if (plain) {
        (void)buf_printf(&b, "attachment; filename=\"%s\"", name);
    } else {
        (void)buf_puts(&b, "attachment; filename*=utf-8''");
        (void)pct_encode(&b, name, NULL);
    }
    (void)http_resp_header_add(req, "Content-Disposition", buf_str(&b));
    buf_done(&b);
}

static int download(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    char *rel = NULL;
    if (legacy_path(req, &rel, NULL) < 0)
        return 0;
    struct stat st;
    int fd = sbd_path_open_read(d->legacy_root, rel);
    if (fd == -EPERM || fd == -EXDEV)
        (void)respond_kv(req, 403, "message", "Access denied");
    else if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        (void)respond_kv(req, 404, "message", "File not found");
    else {
        add_disposition(req, rel);
        (void)sbd_send_file(req, fd, &st);
    }
    if (fd >= 0)
        (void)close(fd);
    xfree(rel);
    return 0;
}

static void list_entry(struct buf *b, const char *name, const struct stat *st)
{
    (void)buf_puts(b, b->data[b->len - 1] == '[' ? "{\"name\":" : ",{\"name\":");
    struct buf t;
    buf_init(&t, LIMIT_SBD_PATH * 3);
    (void)sbd_utf8_sanitize(name, strlen(name), &t);
    (void)sbd_py_json_string(str_make(t.data, t.len), b);
    buf_done(&t);
    (void)buf_printf(b, ",\"size\":%lld,\"type\":\"%s\",\"mod_time\":", (long long)st->st_size,
                     S_ISDIR(st->st_mode) ? "directory" : "file");
    (void)sbd_py_float((double)st->st_mtim.tv_sec + (double)st->st_mtim.tv_nsec / 1e9, b);
    (void)buf_putc(b, '}');
}

/* Appends the JSON array of the directory fd's entries (at most LIMIT_SBD_LISTING) to b;
 * rel is its cleaned path beneath root. fd is taken. Returns 0 or a negative errno (the
 * directory could not be read). */
static int read_listing(const struct sbd_root *root, const char *rel, int fd, struct buf *b)
{
    DIR *dir = fdopendir(fd);
    if (!dir) {
        int r = -errno;
        (void)close(fd);
        return r;
    }
    (void)buf_putc(b, '[');
    struct dirent *de;
    size_t n = 0;
    while (n < LIMIT_SBD_LISTING && (de = readdir(dir))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue; /* not counted: LIMIT_SBD_LISTING entries are listed */
        n++;
        char *child =
            strcmp(rel, ".") == 0 ? xstrdup(de->d_name) : xasprintf("%s/%s", rel, de->d_name);
        int cfd = sbd_path_open(root, child, O_PATH, 0);
        struct stat st;
        if (cfd >= 0 && fstat(cfd, &st) == 0)
            list_entry(b, de->d_name, &st);
        if (cfd >= 0)
            (void)close(cfd);
        xfree(child);
    }
    (void)closedir(dir);
    (void)buf_putc(b, ']');
    return 0;
}

/* A listing read on libuv's thread pool: 10,000 entries, each opened beneath the root
 * and stat'ed, held every other request and stream of the daemon meanwhile. */
struct list_job {
    uv_work_t work;
    struct http_req *req; /* a reference */
    const struct sbd_root *root;
    char *rel;
    int fd; /* taken by read_listing */
    int result;
    struct buf body;
};

static void list_work(uv_work_t *w)
{
    struct list_job *j = w->data;
    j->result = read_listing(j->root, j->rel, j->fd, &j->body);
}

static void list_done(uv_work_t *w, int status)
{
    struct list_job *j = w->data;
    if (status < 0) /* not run (cancelled): fd still ours */
        (void)close(j->fd);
    if (status < 0 || j->result < 0)
        (void)respond_kv(j->req, 500, "message", "cannot list the directory");
    else
        (void)respond_buf(j->req, 200, &j->body);
    buf_done(&j->body);
    http_req_unref(j->req);
    xfree(j->rel);
    xfree(j);
}

/* Answers req with the listing of fd (taken), read on a worker thread. */
static void list_dir(struct http_req *req, struct sbd *d, const char *rel, int fd)
{
    struct list_job *j = XNEW(struct list_job);
    j->work.data = j;
    j->req = http_req_ref(req);
    j->root = d->legacy_root;
    j->rel = xstrdup(rel);
    j->fd = fd;
    buf_init(&j->body, SIZE_MAX);
    if (uv_queue_work(d->loop, &j->work, list_work, list_done) < 0) {
        list_work(&j->work); /* read here then */
        list_done(&j->work, 0);
    }
}

static int list(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    char *rel = NULL;
    if (legacy_path(req, &rel, NULL) < 0)
        return 0;
    int fd = sbd_path_open(d->legacy_root, rel, O_RDONLY | O_DIRECTORY, 0);
    if (fd == -EPERM || fd == -EXDEV)
        (void)respond_kv(req, 403, "message", "Access denied");
    else if (fd < 0)
        (void)respond_kv(req, 404, "message", "Path is not a directory");
    else
        list_dir(req, d, rel, fd);
    xfree(rel);
    return 0;
}

static int exists(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    char *rel = NULL, *decoded = NULL;
    if (legacy_path(req, &rel, &decoded) < 0)
        return 0;
    int fd = sbd_path_open(d->legacy_root, rel, O_PATH, 0);
    if (fd == -EPERM || fd == -EXDEV) {
        (void)respond_kv(req, 403, "message", "Access denied");
    } else {
        struct buf b, t;
        buf_init(&b, LIMIT_SBD_PATH * 8);
        buf_init(&t, LIMIT_SBD_PATH * 4);
        (void)sbd_utf8_sanitize(decoded, strlen(decoded), &t);
        (void)buf_puts(&b, "{\"path\":");
        (void)sbd_py_json_string(str_make(t.data, t.len), &b);
        (void)buf_printf(&b, ",\"exists\":%s}", fd >= 0 ? "true" : "false");
        buf_done(&t);
        (void)respond_buf(req, 200, &b);
    }
    if (fd >= 0)
        (void)close(fd);
    xfree(rel);
    xfree(decoded);
    return 0;
}

int sbd__legacy_register(struct sbd *d)
{
    struct http_router *r = d->legacy_router;
    int e = 0;
    e |= sbd__route(d, r, "GET", "/", 0, root_ok, true);
    e |= sbd__route(d, r, "POST", "/execute", 0, execute, false);
    e |= sbd__route(d, r, "POST", "/upload", HTTP_ROUTE_STREAM_BODY, upload, false);
    e |= sbd__route(d, r, "GET", "/download/", HTTP_ROUTE_PREFIX, download, false);
    e |= sbd__route(d, r, "GET", "/list/", HTTP_ROUTE_PREFIX, list, false);
    e |= sbd__route(d, r, "GET", "/exists/", HTTP_ROUTE_PREFIX, exists, false);
    return e < 0 ? -EINVAL : 0;
}
