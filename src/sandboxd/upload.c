/* SPDX-License-Identifier: Apache-2.0 */
/* Atomic confined writes and streamed uploads (see files.h), and PUT /v1/files/{path}. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/random.h>
#include <sys/stat.h>

#include "common/xalloc.h"
#include "sandboxd/activity.h"
#include "sandboxd/files.h"
#include "sandboxd/multipart.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

struct sbd_writer {
    int dirfd; /* parent of the target (a symlink's target: the file it points to) */
    int fd;
    char *name;
    char tmp[48];
    mode_t mode;
    uint64_t size;
    struct sbd_path_made *made; /* parents made for the target: removed by an abort */
};

/* Is rel an existing symlink (the final component)? */
static bool final_is_link(const struct sbd_root *root, const char *rel)
{
    int fd = sbd_path_open(root, rel, O_PATH | O_NOFOLLOW, 0);
    if (fd < 0)
        return false;
    struct stat st;
    bool link = fstat(fd, &st) == 0 && S_ISLNK(st.st_mode);
    (void)close(fd);
    return link;
}

/* Checks the existing target. Returns 1 to write through a symlink, 0 for a new or regular
 * target, or a negative errno: -EISDIR, or -ENXIO for anything but a regular file (a FIFO
 * would block the loop thread on open, a socket or device is no file to replace). */
static int check_target(const struct sbd_root *root, const char *rel)
{
    int fd = sbd_path_open(root, rel, O_PATH, 0);
    if (fd == -ENOENT)
        return final_is_link(root, rel) ? -EPERM : 0; /* dangling link: refuse */
    if (fd < 0)
        return fd;
    struct stat st;
    int r = fstat(fd, &st) < 0 ? -errno : 0;
    (void)close(fd);
    if (r < 0)
        return r;
    if (S_ISDIR(st.st_mode))
        return -EISDIR;
    if (!S_ISREG(st.st_mode))
        return -ENXIO;
    return final_is_link(root, rel) ? 1 : 0;
}

/* Is rel (beneath root, its final component not followed) the file st describes?
 * Returns 0, or -ENOENT when rel is gone or names another file (or a symlink). */
static int names_file(const struct sbd_root *root, const char *rel, const struct stat *st)
{
    int fd = sbd_path_open(root, rel, O_PATH | O_NOFOLLOW, 0);
    if (fd < 0)
        return fd;
    struct stat now;
    int r = fstat(fd, &now) < 0 ? -errno : 0;
    (void)close(fd);
    if (r == 0 && (now.st_dev != st->st_dev || now.st_ino != st->st_ino))
        r = -ENOENT;
    return r;
}

int sbd__fd_rel(const struct sbd_root *root, int fd, char **ret)
{
    char proc[64], got[PATH_MAX];
    (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    struct stat st;
    ssize_t n = readlink(proc, got, sizeof(got) - 1);
    if (n < 0 || fstat(fd, &st) < 0)
        return -errno;
    if (st.st_nlink == 0) /* removed meanwhile: its name has " (deleted)" appended */
        return -ENOENT;
    if (!S_ISREG(st.st_mode)) /* re-pointed since check_target: never replace such a file */
        return S_ISDIR(st.st_mode) ? -EISDIR : -ENXIO;
    if ((size_t)n >= sizeof(got) - 1)
        return -ENAMETOOLONG; /* the name may be cut short */
    got[n] = '\0';
    const char *rp = sbd_root_path(root);
    size_t rl = strcmp(rp, "/") == 0 ? 0 : strlen(rp);
    if (strncmp(got, rp, rl) != 0 || got[rl] != '/' || got[rl + 1] == '\0')
        return -EPERM;
    /* The name is the one fd had when read: unlinked meanwhile while another hard link
     * keeps the file (nlink >= 1), it reads "NAME (deleted)"; renamed, the new name,
     * which may be gone or another file's by now. Only a name that still is this file
     * is written. */
    int r = names_file(root, got + rl + 1, &st);
    if (r < 0)
        return r;
    *ret = xstrdup(got + rl + 1);
    return 0;
}

/* The path beneath the root of the file the symlink rel points to (resolved by the
 * kernel under the root's confinement), in *ret (caller frees). Returns 0 or a negative
 * errno as sbd__fd_rel. */
static int link_target_rel(const struct sbd_root *root, const char *rel, char **ret)
{
    int fd = sbd_path_open(root, rel, O_PATH, 0);
    if (fd < 0)
        return fd;
    int r = sbd__fd_rel(root, fd, ret);
    (void)close(fd);
    return r;
}

static int open_temp(struct sbd_writer *w)
{
    for (int i = 0; i < 16; i++) {
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
            rnd = (uint64_t)clock_now() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)i;
        (void)snprintf(w->tmp, sizeof(w->tmp), ".sandboxd-tmp-%016llx", (unsigned long long)rnd);
        w->fd = openat(w->dirfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (w->fd >= 0 || errno != EEXIST)
            return w->fd >= 0 ? 0 : -errno;
    }
    return -EEXIST;
}

int sbd_writer_open(const struct sbd_root *root, const char *rel, mode_t mode,
                    struct sbd_writer **ret)
{
    if (strcmp(rel, ".") == 0)
        return -EISDIR;
    int kind = check_target(root, rel);
    if (kind < 0)
        return kind;
    /* Through a symlink the file it points to is replaced as any other: the link stays,
     * and a write that fails half-way leaves the old content. */
    char *target = NULL;
    if (kind == 1) {
        int r = link_target_rel(root, rel, &target);
        if (r < 0)
            return r;
        rel = target;
    }
    struct sbd_writer *w = XNEW(struct sbd_writer);
    w->mode = mode;
    w->fd = -1;
    const char *name;
    w->dirfd = sbd_path_open_parent_made(root, rel, &name, &w->made);
    int r = w->dirfd < 0 ? w->dirfd : 0;
    if (r == 0) {
        w->name = xstrdup(name);
        r = open_temp(w);
    }
    xfree(target);
    if (r < 0) {
        sbd_writer_abort(w);
        return r;
    }
    *ret = w;
    return 0;
}

int sbd_writer_write(struct sbd_writer *w, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(w->fd, c, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        c += k;
        n -= (size_t)k;
        w->size += (uint64_t)k;
    }
    return 0;
}

uint64_t sbd_writer_size(const struct sbd_writer *w)
{
    return w->size;
}

static void writer_free(struct sbd_writer *w)
{
    if (w->fd >= 0)
        (void)close(w->fd);
    if (w->dirfd >= 0)
        (void)close(w->dirfd);
    sbd_path_made_free(w->made);
    xfree(w->name);
    xfree(w);
}

int sbd_writer_commit(struct sbd_writer *w)
{
    int r = 0;
    if (fsync(w->fd) < 0 && errno != EINVAL)
        r = -errno;
    if (r == 0 && fchmod(w->fd, w->mode) < 0)
        r = -errno;
    /* closed whatever failed before: the abort below unlinks the name, and an open
     * descriptor would hold the unlinked file's blocks until the daemon exits */
    if (close(w->fd) < 0 && r == 0)
        r = -errno;
    w->fd = -1;
    if (r == 0 && renameat(w->dirfd, w->tmp, w->dirfd, w->name) < 0)
        r = -errno;
    if (r < 0) {
        sbd_writer_abort(w);
        return r;
    }
    writer_free(w);
    return 0;
}

void sbd_writer_abort(struct sbd_writer *w)
{
    if (!w)
        return;
    if (w->dirfd >= 0 && w->tmp[0])
        (void)unlinkat(w->dirfd, w->tmp, 0);
    struct sbd_path_made *made = w->made;
    w->made = NULL;
    writer_free(w);
    sbd_path_made_undo(made); /* the parents made for it, empty again without the temp file */
}

/* ---- streamed uploads -------------------------------------------------------------- */

struct upload {
    struct sbd_upload_opts o;
    struct http_req *req;
    struct sbd_writer *w;
    char *rel;
    bool multipart, got_file, finished;
    struct sbd_multipart mp;
    int err;
};

static void upload_free(struct upload *u)
{
    http_req_set_abort_cb(u->req, NULL, NULL);
    http_req_set_body_cb(u->req, NULL, NULL);
    sbd_writer_abort(u->w);
    if (u->multipart)
        sbd_multipart_done(&u->mp);
    xfree(u->rel);
    http_req_unref(u->req);
    xfree(u);
}

static void upload_finish(struct upload *u, int err)
{
    if (u->finished)
        return;
    u->finished = true;
    if (err == 0 && u->multipart && !u->got_file)
        err = -ENODATA;
    struct sbd_writer *w = u->w;
    u->w = NULL;
    if (err == 0 && w)
        err = sbd_writer_commit(w);
    else
        sbd_writer_abort(w); /* before the answer: a client told of the failure sees
                              * nothing left behind */
    u->o.done(u->req, err, err == 0 ? u->rel : NULL, u->o.ctx);
}

static int write_data(struct upload *u, struct str data)
{
    if (sbd_writer_size(u->w) + data.len > u->o.limit)
        return -EFBIG;
    return sbd_writer_write(u->w, data.p, data.len);
}

static int part_begin(void *ctx, struct str name, struct str filename)
{
    struct upload *u = ctx;
    if (!str_eq_c(name, "file") || u->got_file)
        return 0;
    u->got_file = true;
    if (!u->o.rel) {
        if (!filename.p || filename.len == 0)
            return -EINVAL;
        int r = sbd_path_clean(NULL, filename, &u->rel);
        if (r < 0)
            return r;
    }
    int r = sbd_writer_open(u->o.root, u->rel, u->o.mode, &u->w);
    return r < 0 ? r : 1;
}

static int part_data(void *ctx, struct str data)
{
    return write_data(ctx, data);
}

static int part_end(void *ctx)
{
    (void)ctx;
    return 0;
}

static int on_body(struct http_req *req, struct str data, bool last, void *ctx)
{
    struct upload *u = ctx;
    (void)req;
    if (u->o.activity)
        sbd__activity_touch(u->o.activity);
    int r = u->multipart ? sbd_multipart_feed(&u->mp, data, last) : write_data(u, data);
    if (r < 0 || last) {
        /* Responds now; the rest of an oversized or bad body is not read. */
        upload_finish(u, r < 0 ? r : 0);
        upload_free(u);
    }
    return 0;
}

static void on_abort(struct http_req *req, void *ctx)
{
    (void)req;
    struct upload *u = ctx;
    u->finished = true;
    upload_free(u);
}

int sbd_upload_start(struct http_req *req, const struct sbd_upload_opts *opts)
{
    struct upload *u = XNEW(struct upload);
    u->o = *opts;
    u->req = http_req_ref(req);
    u->multipart = opts->boundary != NULL;
    if (opts->rel)
        u->rel = xstrdup(opts->rel);
    if (u->multipart)
        sbd_multipart_init(&u->mp, opts->boundary, part_begin, part_data, part_end, u);
    int r = 0;
    if (!u->multipart)
        r = sbd_writer_open(opts->root, opts->rel, opts->mode, &u->w);
    if (r < 0) {
        u->finished = true;
        upload_free(u);
        return r;
    }
    http_req_set_body_cb(req, on_body, u);
    http_req_set_abort_cb(req, on_abort, u);
    return 0;
}

/* ---- PUT /v1/files/{path} ---------------------------------------------------------- */

static void put_done(struct http_req *req, int err, const char *path, void *ctx)
{
    (void)path;
    (void)ctx;
    switch (err) {
    case 0:
        (void)http_respond(req, 204, NULL, NULL, 0);
        return;
    case -EISDIR:
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "target is a directory");
        return;
    case -ENXIO:
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "target is not a regular file");
        return;
    case -EPROTO:
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "malformed multipart body");
        return;
    case -ENODATA:
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "missing multipart part \"file\"");
        return;
    case -EFBIG:
        (void)sbd_respond_error(req, 413, SBD_INVALID_ARGUMENT, "upload too large");
        return;
    case -ENOTDIR: /* a file where a parent should be: not "not found" (the write creates) */
        (void)sbd_respond_not_dir(req, "write");
        return;
    default:
        (void)sbd_respond_errno(req, err, "write");
        return;
    }
}

/* Parses ?mode=0NNN (default 0644). Returns 0 or -EINVAL. */
static int parse_mode(struct http_req *req, mode_t *ret)
{
    struct buf v;
    buf_init(&v, 16);
    int q = sbd_query_get(http_req_query(req), "mode", &v);
    const char *s = buf_str(&v);
    int r = 0;
    if (q < 0)
        r = -EINVAL;
    else if (q == 0)
        *ret = 0644;
    else if (strlen(s) != 4 || s[0] != '0' || strspn(s + 1, "01234567") != 3)
        r = -EINVAL;
    else
        *ret = (mode_t)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
    buf_done(&v);
    return r;
}

/* A raw body's Content-Length is the file's size: one over --max-upload is refused at the
 * head, unread (no 100 Continue, no temporary file). A multipart body's counts its framing
 * and any other parts, and a chunked body has none: those keep the counted limit. */
bool sbd__files_put_body_ok(struct http_req *req, struct sbd *d)
{
    uint64_t len;
    if (!http_req_content_length(req, &len) || len <= d->cfg.max_upload)
        return true;
    char *boundary = NULL;
    struct str ct = http_req_header(req, "Content-Type");
    bool multipart = ct.p && sbd_multipart_boundary(ct, &boundary) == 0;
    xfree(boundary);
    return multipart;
}

int sbd__files_put(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    if (!sbd__files_put_body_ok(req, d))
        return sbd_respond_error(req, 413, SBD_INVALID_ARGUMENT,
                                 "upload too large: Content-Length is over the upload limit");
    mode_t mode = 0644;
    if (parse_mode(req, &mode) < 0)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "mode must match ^0[0-7]{3}$");
    char *boundary = NULL;
    struct str ct = http_req_header(req, "Content-Type");
    int b = ct.p ? sbd_multipart_boundary(ct, &boundary) : -ENOENT;
    if (b == -EINVAL)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "bad multipart boundary");
    char *rel = NULL;
    if (sbd__req_path(req, d->root, &rel) < 0) {
        xfree(boundary);
        return 0;
    }
    struct sbd_upload_opts o = {.root = d->root,
                                .rel = rel,
                                .boundary = boundary,
                                .mode = mode,
                                .limit = d->cfg.max_upload,
                                .done = put_done,
                                .ctx = d,
                                .activity = d};
    int r = sbd_upload_start(req, &o);
    if (r < 0)
        put_done(req, r, NULL, d);
    xfree(rel);
    xfree(boundary);
    return 0;
}
