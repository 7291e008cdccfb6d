/* SPDX-License-Identifier: Apache-2.0 */
/* Filesystem operations beyond plain read/write (see docs/sandboxd.md): stat, mkdir,
 * move, batch writes and windowed reads. Every path is cleaned with sbd_path_clean and
 * resolved by openat2 beneath the root's descriptor (sbd_path_open / _parent); the
 * final component is then handled with *at() calls on that confined parent, never
 * following a symlink there (lstat semantics, renameat2 moves the link itself). The one
 * exception is stat with follow=true: the whole path, last link included, is resolved
 * by openat2 beneath the root, so a link leads only where a parent could. */
#include "sandboxd/fsops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sandboxd/files.h"
#include "sandboxd/fsreq.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

/* ---- stat -------------------------------------------------------------------------- */

static const char *type_name(mode_t m)
{
    if (S_ISREG(m))
        return "file";
    if (S_ISDIR(m))
        return "directory";
    if (S_ISLNK(m))
        return "symlink";
    return "other";
}

/* RFC 3339 with nanoseconds in UTC into out (>= 40 bytes). */
static void format_nanos(const struct timespec *ts, char *out, size_t size)
{
    struct tm tm;
    char day[32];
    (void)gmtime_r(&ts->tv_sec, &tm);
    (void)strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
    (void)snprintf(out, size, "%s.%09ldZ", day, (long)ts->tv_nsec);
}

/* The public path of a cleaned relative path: "/" or "/a/b" (new). */
static char *public_path(const char *rel)
{
    return strcmp(rel, ".") == 0 ? xstrdup("/") : xasprintf("/%s", rel);
}

/* Returns a new FileStat object; target (borrowed) may be NULL. */
static json_t *stat_json(const char *rel, const struct stat *st, const char *target)
{
    char when[48], mode[8];
    format_nanos(&st->st_mtim, when, sizeof(when));
    (void)snprintf(mode, sizeof(mode), "%04o", (unsigned)(st->st_mode & 07777));
    const char *slash = strrchr(rel, '/');
    const char *name = strcmp(rel, ".") == 0 ? "" : slash ? slash + 1 : rel;
    char *path = public_path(rel);
    json_t *j = json_pack("{s:o, s:o, s:s, s:I, s:s, s:s}", "name", sbd_json_name(name), "path",
                          sbd_json_name(path), "type", type_name(st->st_mode), "size",
                          (json_int_t)st->st_size, "mode", mode, "mtime", when);
    if (target)
        (void)json_object_set_new(j, "symlink_target", sbd_json_name(target));
    xfree(path);
    return j;
}

/* lstat of rel beneath root; a symlink's target is read (never followed) into *ret_target
 * (new, or NULL). Returns 0 or a negative errno. */
static int confined_lstat(const struct sbd_root *root, const char *rel, struct stat *st,
                          char **ret_target)
{
    *ret_target = NULL;
    if (strcmp(rel, ".") == 0)
        return fstat(sbd_root_fd(root), st) < 0 ? -errno : 0;
    const char *name;
    int pfd = sbd_path_open_parent(root, rel, false, &name);
    if (pfd < 0)
        return pfd;
    int r = fstatat(pfd, name, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
    if (r == 0 && S_ISLNK(st->st_mode)) {
        char target[LIMIT_SBD_PATH + 1];
        ssize_t n = readlinkat(pfd, name, target, sizeof(target) - 1);
        if (n >= 0) {
            target[n] = '\0';
            *ret_target = xstrdup(target);
        }
    }
    (void)close(pfd);
    return r;
}

/* stat of what rel leads to beneath root, every symlink followed (the last one too) and
 * confined as the parents are. Returns 0 or a negative errno: -EPERM for a link out of
 * the root, -ENOENT for a dangling one, -ELOOP for a loop (see sbd_path_open). */
static int confined_stat(const struct sbd_root *root, const char *rel, struct stat *st)
{
    int fd = sbd_path_open(root, rel, O_PATH, 0);
    if (fd < 0)
        return fd;
    int r = fstat(fd, st) < 0 ? -errno : 0;
    (void)close(fd);
    return r;
}

static int stat_get(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    struct sbd_stat_opts o;
    const char *err;
    if (sbd_stat_opts_parse(http_req_query(req), &o, &err) < 0)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, err);
    char *rel = NULL, *target = NULL;
    if (sbd__req_path(req, d->root, &rel) < 0)
        return 0;
    struct stat st;
    int r =
        o.follow ? confined_stat(d->root, rel, &st) : confined_lstat(d->root, rel, &st, &target);
    if (r < 0) {
        (void)sbd_respond_errno(req, r, "stat");
    } else {
        json_t *j = stat_json(rel, &st, target);
        (void)http_respond_json(req, 200, j);
        json_decref(j);
    }
    xfree(target);
    xfree(rel);
    return 0;
}

/* ---- mkdir ------------------------------------------------------------------------- */

/* Is rel an existing directory beneath root (inner symlinks followed, confined)?
 * Returns 1, 0 (something else is there) or a negative errno. */
static int is_dir(const struct sbd_root *root, const char *rel)
{
    int fd = sbd_path_open(root, rel, O_PATH | O_DIRECTORY, 0);
    if (fd >= 0) {
        (void)close(fd);
        return 1;
    }
    return fd == -ENOTDIR ? 0 : fd;
}

/* Creates rel. Returns 1 created, 0 already a directory (parents), or a negative errno:
 * -EEXIST (exists), -ENOTDIR (a non-directory is in the way: the name itself, or a
 * component above it), -ENOENT (no parent). */
static int do_mkdir(const struct sbd_root *root, const char *rel, const struct sbd_mkdir_opts *o)
{
    const char *name;
    int r,
        pfd = strcmp(rel, ".") == 0 ? -EEXIST : sbd_path_open_parent(root, rel, o->parents, &name);
    if (pfd == -EEXIST) {
        r = -EEXIST;
    } else if (pfd < 0) {
        return pfd;
    } else {
        r = mkdirat(pfd, name, 0700) < 0 ? -errno : 1;
        (void)close(pfd);
    }
    if (r == -EEXIST) {
        int k = is_dir(root, rel);
        if (k == -ENOENT) /* the name is taken by a link to nothing */
            return -ENOTDIR;
        if (k < 0)
            return k;
        return k == 0 ? -ENOTDIR : o->parents ? 0 : -EEXIST;
    }
    if (r == 1) { /* the final mode, whatever the umask */
        int fd = sbd_path_open(root, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (fd >= 0) {
            (void)fchmod(fd, o->mode);
            (void)close(fd);
        }
    }
    return r;
}

/* After do_mkdir's -ENOTDIR: is the name itself taken (by a non-directory), rather than a
 * component above it not a directory? */
static bool name_taken(const struct sbd_root *root, const char *rel)
{
    struct stat st;
    char *target = NULL;
    int r = confined_lstat(root, rel, &st, &target);
    xfree(target);
    return r == 0;
}

static int mkdir_post(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    struct sbd_mkdir_opts o;
    const char *err;
    if (sbd_mkdir_opts_parse(http_req_query(req), &o, &err) < 0)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, err);
    char *rel = NULL, *target = NULL;
    if (sbd__req_path(req, d->root, &rel) < 0)
        return 0;
    int r = do_mkdir(d->root, rel, &o), k;
    struct stat st;
    if (r == -ENOTDIR && !name_taken(d->root, rel)) {
        (void)sbd_respond_not_dir(req, "mkdir");
    } else if (r == -ENOTDIR) {
        (void)sbd_respond_error(req, 409, SBD_CONFLICT, "mkdir: a non-directory is in the way");
    } else if (r == -EEXIST) {
        (void)sbd_respond_error(req, 409, SBD_CONFLICT,
                                "mkdir: already exists (use parents=true to accept it)");
    } else if (r < 0) {
        (void)sbd_respond_errno(req, r, "mkdir");
    } else if ((k = confined_lstat(d->root, rel, &st, &target)) < 0) {
        (void)sbd_respond_errno(req, k, "mkdir");
    } else {
        json_t *j = stat_json(rel, &st, target);
        (void)http_respond_json(req, r == 1 ? 201 : 200, j);
        json_decref(j);
    }
    xfree(target);
    xfree(rel);
    return 0;
}

/* ---- move -------------------------------------------------------------------------- */

/* Cleans a raw user path; answers and returns negative on failure. */
static int clean_or_respond(struct http_req *req, const struct sbd_root *root, const char *raw,
                            char **ret)
{
    int r = sbd_path_clean(sbd_root_path(root), str_c(raw), ret);
    if (r == -EPERM)
        (void)sbd_respond_error(req, 403, SBD_PERMISSION_DENIED, "path escapes the root");
    else if (r < 0)
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "invalid path");
    return r;
}

static bool is_inside(const char *child, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(child, dir, n) == 0 && child[n] == '/';
}

/* renameat2 of fname in fp to tname in tp; without overwrite, RENAME_NOREPLACE, or on a
 * filesystem without it (EINVAL) an existence check then renameat. Returns 0 or a
 * negative errno. */
static int rename_confined(int fp, const char *fname, int tp, const char *tname, bool overwrite)
{
    if (renameat2(fp, fname, tp, tname, overwrite ? 0 : RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL || overwrite)
        return -errno;
    struct stat st;
    if (fstatat(tp, tname, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return -EEXIST;
    return renameat(fp, fname, tp, tname) < 0 ? -errno : 0;
}

/* renameat2 between the two confined parents. Returns 0 or a negative errno: -ENOENT for
 * a source that is not there (a non-directory above it included), -ENOTDIR for a
 * non-directory above the destination, -EISDIR for a directory onto a non-directory or
 * back. */
static int do_move(const struct sbd_root *root, const char *from, const char *to, bool overwrite)
{
    const char *fname, *tname;
    int fp = sbd_path_open_parent(root, from, false, &fname);
    if (fp < 0)
        return fp == -ENOTDIR ? -ENOENT : fp;
    int tp = sbd_path_open_parent(root, to, false, &tname);
    if (tp < 0) {
        (void)close(fp);
        return tp;
    }
    struct stat st;
    int r = fstatat(fp, fname, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
    if (r == 0 && strcmp(from, to) == 0)
        r = 0; /* onto itself: nothing to do (RENAME_NOREPLACE would say it exists) */
    else if (r == 0)
        r = rename_confined(fp, fname, tp, tname, overwrite);
    if (r == -ENOTDIR) /* the rename's: a directory onto a non-directory */
        r = -EISDIR;
    (void)close(fp);
    (void)close(tp);
    return r;
}

static int move_respond(struct http_req *req, int r, const char *from, const char *to)
{
    switch (r) {
    case 0: {
        char *f = public_path(from), *t = public_path(to);
        json_t *j = json_pack("{s:o, s:o}", "from", sbd_json_name(f), "to", sbd_json_name(t));
        xfree(f);
        xfree(t);
        int k = http_respond_json(req, 200, j);
        json_decref(j);
        return k;
    }
    case -EEXIST:
    case -ENOTEMPTY:
        return sbd_respond_error(req, 409, SBD_CONFLICT,
                                 "move: the destination exists (use overwrite=true)");
    case -EISDIR:
        return sbd_respond_error(req, 409, SBD_CONFLICT,
                                 "move: cannot replace a directory with a non-directory or back");
    case -ENOTDIR:
        return sbd_respond_not_dir(req, "move");
    case -EXDEV:
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT,
                                 "move: source and destination are on different filesystems");
    case -EINVAL:
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT,
                                 "move: cannot move a directory into itself");
    default:
        return sbd_respond_errno(req, r, "move");
    }
}

/* rel (under root) is a directory itself, not a link to one (a link may move into the
 * directory it points to, as mv does). */
static bool is_real_dir(const struct sbd_root *root, const char *rel)
{
    struct stat st;
    int fd = sbd_path_open(root, rel, O_PATH | O_NOFOLLOW, 0);
    bool dir = fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
    if (fd >= 0)
        (void)close(fd);
    return dir;
}

static int move_post(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    struct sbd_move_req m;
    const char *err;
    if (sbd_move_req_parse(http_req_body(req), &m, &err) < 0)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, err);
    char *from = NULL, *to = NULL;
    if (clean_or_respond(req, d->root, m.from, &from) < 0 ||
        clean_or_respond(req, d->root, m.to, &to) < 0) {
        /* answered */
    } else if (strcmp(from, ".") == 0 || strcmp(to, ".") == 0) {
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "move: cannot move the root");
    } else if (is_inside(to, from) && is_real_dir(d->root, from)) {
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT,
                                "move: cannot move a directory into itself");
    } else {
        (void)move_respond(req, do_move(d->root, from, to, m.overwrite), from, to);
    }
    xfree(from);
    xfree(to);
    sbd_move_req_done(&m);
    return 0;
}

/* ---- batch write ------------------------------------------------------------------- */

/* Maps err to an HTTP status and code of the API (as sbd_respond_errno). */
static int errno_status(int err, const char **ret_code)
{
    switch (err) {
    case -EPERM:
    case -EACCES:
    case -EXDEV:
    case -ELOOP:
        *ret_code = SBD_PERMISSION_DENIED;
        return 403;
    case -ENOENT:
        *ret_code = SBD_NOT_FOUND;
        return 404;
    case -ENOTDIR:
    case -EEXIST:
        *ret_code = SBD_CONFLICT;
        return 409;
    case -EINVAL:
    case -ENAMETOOLONG:
    case -EISDIR:
    case -ENXIO: /* a FIFO or socket in the way: not a regular file (as a PUT says) */
        *ret_code = SBD_INVALID_ARGUMENT;
        return 400;
    case -EMFILE:
    case -ENFILE:
        *ret_code = SBD_UNAVAILABLE;
        return 503;
    default:
        *ret_code = SBD_INTERNAL;
        return 500;
    }
}

/* Writes one file atomically (temporary file + rename). Returns 0 or a negative errno. */
static int write_one(const struct sbd_root *root, const char *rel, const struct sbd_batch_file *f)
{
    struct sbd_writer *w = NULL;
    int r = sbd_writer_open(root, rel, f->mode, &w);
    if (r == 0)
        r = sbd_writer_write(w, f->data.data ? f->data.data : "", f->data.len);
    if (r == 0)
        return sbd_writer_commit(w);
    sbd_writer_abort(w);
    return r;
}

static json_t *batch_result(const struct sbd_root *root, const struct sbd_batch_file *f)
{
    char *rel = NULL;
    int r = sbd_path_clean(sbd_root_path(root), str_c(f->path), &rel);
    if (r == 0)
        r = write_one(root, rel, f);
    json_t *j;
    if (r == 0) {
        char *p = public_path(rel);
        j = json_pack("{s:o, s:b, s:I}", "path", sbd_json_name(p), "ok", 1, "size",
                      (json_int_t)f->data.len);
        xfree(p);
    } else {
        const char *code;
        char eb[128];
        int status = errno_status(r, &code);
        const char *msg = r == -EPERM     ? "path escapes the root"
                          : r == -ENOTDIR ? SBD_MSG_NOT_DIR
                                          : log_strerror(r, eb, sizeof(eb));
        j = json_pack("{s:o, s:b, s:i, s:s, s:s}", "path", sbd_json_name(f->path), "ok", 0,
                      "status", status, "code", code, "message", msg);
    }
    xfree(rel);
    return j;
}

/* A batch write, on libuv's thread pool: a thousand files, each fsync'ed, held the loop
 * (every other request and stream of the daemon) for a second. The body is parsed there
 * too (up to --max-body of JSON and base64). */
struct batch_job {
    uv_work_t work;
    struct http_req *req; /* a reference: its body stays while it is held */
    const struct sbd_root *root;
    struct str body;     /* req's, borrowed (not touched by the loop once dispatched) */
    uint64_t max_upload; /* one decoded file */
    int status;          /* 200, or 400/413: the body is refused with err */
    const char *err;     /* static */
    json_t *answer;      /* new: the 200 answer; NULL otherwise */
    atomic_bool stop;    /* the client went (or the daemon stops): the rest is not written */
};

/* Writes b's files in order, each one's result in the array results (borrowed); a stop
 * asked meanwhile leaves the rest unwritten. Returns whether all were written. */
static bool batch_write_all(struct batch_job *j, const struct sbd_batch_req *b, json_t *results)
{
    bool all = true;
    size_t i = 0;
    for (; i < b->n && !atomic_load(&j->stop); i++) {
        json_t *one = batch_result(j->root, &b->files[i]);
        all = all && json_is_true(json_object_get(one, "ok"));
        (void)json_array_append_new(results, one);
    }
    return all && i == b->n;
}

static void batch_work(uv_work_t *w)
{
    struct batch_job *j = w->data;
    struct sbd_batch_req b;
    int r = sbd_batch_req_parse(j->body, j->max_upload, &b, &j->err);
    if (r < 0) {
        j->status = r == -E2BIG ? 413 : 400;
        return;
    }
    json_t *results = json_array();
    bool all = batch_write_all(j, &b, results);
    sbd_batch_req_done(&b);
    j->answer = json_pack("{s:b, s:o}", "ok", all, "results", results);
    j->status = 200;
}

static void batch_done(uv_work_t *w, int status)
{
    struct batch_job *j = w->data;
    http_req_set_abort_cb(j->req, NULL, NULL);
    if (status < 0) /* not run (cancelled) */
        (void)sbd_respond_errno(j->req, status, "batch");
    else if (j->status != 200)
        (void)sbd_respond_error(j->req, j->status, SBD_INVALID_ARGUMENT, j->err);
    else
        (void)http_respond_json(j->req, 200, j->answer);
    json_decref(j->answer);
    http_req_unref(j->req);
    xfree(j);
}

/* The client went, or the daemon stops (its connections close): the files not written
 * yet are not, so a batch on a slow disk does not hold the shutdown. */
static void batch_abort(struct http_req *req, void *ctx)
{
    struct batch_job *j = ctx;
    (void)req;
    atomic_store(&j->stop, true);
}

static int batch_post(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    struct batch_job *j = XNEW(struct batch_job);
    j->work.data = j;
    j->req = http_req_ref(req);
    j->root = d->root;
    j->body = http_req_body(req);
    j->max_upload = d->cfg.max_upload;
    http_req_set_abort_cb(req, batch_abort, j);
    if (uv_queue_work(d->loop, &j->work, batch_work, batch_done) < 0) {
        batch_work(&j->work); /* written here then */
        batch_done(&j->work, 0);
    }
    return 0;
}

/* ---- windowed reads ---------------------------------------------------------------- */

static void add_u64_header(struct http_req *req, const char *name, uint64_t v)
{
    char s[24];
    (void)snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
    (void)http_resp_header_add(req, name, s);
}

/* The window of w over the file st: from offset (else the Range header) and at most
 * max_bytes. Returns 0 or -ERANGE (at or past the end of a non-empty file). */
static int window_of(struct http_req *req, const struct stat *st, const struct sbd_read_window *w,
                     uint64_t *ret_start, uint64_t *ret_len, bool *ret_partial, bool *ret_truncated)
{
    uint64_t size = (uint64_t)st->st_size, start = 0, len = size;
    bool partial = false;
    if (w->has_offset) {
        start = w->offset;
        len = start < size ? size - start : 0;
        partial = start > 0;
    } else if (sbd__pick_range(req, st, &start, &len, &partial) < 0) {
        return -ERANGE;
    }
    if (start >= size && !(start == 0 && size == 0))
        return -ERANGE;
    bool truncated = w->has_max && len > w->max_bytes;
    if (truncated)
        len = w->max_bytes;
    *ret_start = start;
    *ret_len = len;
    *ret_partial = (partial || truncated) && len > 0;
    *ret_truncated = truncated;
    return 0;
}

int sbd__read_window(struct http_req *req, int fd, const struct stat *st)
{
    struct sbd_read_window w;
    const char *err;
    if (sbd_read_window_parse(http_req_query(req), &w, &err) < 0) {
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, err);
        return 1;
    }
    if (!w.has_offset && !w.has_max)
        return 0;
    if (sbd__file_validate(req, st))
        return 1;
    uint64_t size = (uint64_t)st->st_size, start, len;
    bool partial, truncated;
    char cr[96];
    if (window_of(req, st, &w, &start, &len, &partial, &truncated) < 0) {
        (void)snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
        (void)http_resp_header_add(req, "Content-Range", cr);
        (void)sbd_respond_error(req, 416, SBD_INVALID_ARGUMENT, "range not satisfiable");
        return 1;
    }
    add_u64_header(req, "X-File-Size", size);
    (void)http_resp_header_add(req, "X-Truncated", truncated ? "true" : "false");
    if (partial) {
        (void)snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)start,
                       (unsigned long long)(start + len - 1), (unsigned long long)size);
        (void)http_resp_header_add(req, "Content-Range", cr);
    }
    (void)sbd__send_range(req, fd, partial ? 206 : 200, start, len);
    return 1;
}

/* ---- registration ------------------------------------------------------------------ */

int sbd__fsops_register(struct sbd *d)
{
    int r = 0;
    r |= sbd__route(d, d->router, "GET", "/v1/stat/", HTTP_ROUTE_PREFIX, stat_get, false);
    r |= sbd__route(d, d->router, "POST", "/v1/mkdir/", HTTP_ROUTE_PREFIX, mkdir_post, false);
    r |= sbd__route(d, d->router, "POST", "/v1/move", 0, move_post, false);
    r |= sbd__route(d, d->router, "POST", "/v1/files:batch", 0, batch_post, false);
    r |= sbd__watch_register(d);
    return r < 0 ? -EINVAL : 0;
}
