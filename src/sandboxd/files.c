/* SPDX-License-Identifier: Apache-2.0 */
/* GET/HEAD/PUT/DELETE /v1/files/{path}: confined file access. File I/O runs on the loop
 * thread: it is local disk work of bounded size per call (one chunk at a time for large
 * files and uploads), which keeps the code simple and the latency low. */
#include "sandboxd/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/random.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "sandboxd/fsops.h"
#include "sandboxd/fsreq.h"
#include "sandboxd/multipart.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

/* ---- listing --------------------------------------------------------------------- */

struct entry {
    char *name;
    json_t *obj;
};

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

json_t *sbd_file_entry_json(const char *name, const struct stat *st)
{
    char when[40], mode[8];
    clock_format_rfc3339_sec((usec_t)st->st_mtim.tv_sec * USEC_PER_SEC, when, sizeof(when));
    (void)snprintf(mode, sizeof(mode), "%04o", (unsigned)(st->st_mode & 0777));
    const char *type = S_ISDIR(st->st_mode) ? "directory" : S_ISREG(st->st_mode) ? "file" : "other";
    return json_pack("{s:o, s:I, s:s, s:s, s:s}", "name", sbd_json_name(name), "size",
                     (json_int_t)st->st_size, "type", type, "modified_at", when, "mode", mode);
}

/* Describes name in the directory dirfd (rel is the directory's cleaned path). Symlinks are
 * followed beneath the root; escaping or broken ones give false (omitted). */
static bool describe(const struct sbd_root *root, int dirfd, const char *rel, const char *name,
                     struct stat *st)
{
    if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    if (!S_ISLNK(st->st_mode))
        return true;
    char *child = strcmp(rel, ".") == 0 ? xstrdup(name) : xasprintf("%s/%s", rel, name);
    int fd = sbd_path_open(root, child, O_PATH, 0);
    xfree(child);
    if (fd < 0)
        return false;
    bool ok = fstat(fd, st) == 0;
    (void)close(fd);
    return ok;
}

/* A page of a listing being read: a max-heap by name of the first limit names (after
 * the cursor) seen so far, so that a directory of any size costs limit entries. */
struct page {
    struct entry *v;
    size_t n, cap, limit;
    bool more; /* a name past the page was seen */
};

static bool name_above(const struct page *pg, size_t a, size_t b)
{
    return strcmp(pg->v[a].name, pg->v[b].name) > 0;
}

static void swap_entries(struct page *pg, size_t a, size_t b)
{
    struct entry t = pg->v[a];
    pg->v[a] = pg->v[b];
    pg->v[b] = t;
}

static void sift_up(struct page *pg, size_t i)
{
    while (i > 0 && name_above(pg, i, (i - 1) / 2)) {
        swap_entries(pg, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void sift_down(struct page *pg, size_t i)
{
    for (;;) {
        size_t big = i, l = 2 * i + 1, r = l + 1;
        if (l < pg->n && name_above(pg, l, big))
            big = l;
        if (r < pg->n && name_above(pg, r, big))
            big = r;
        if (big == i)
            return;
        swap_entries(pg, i, big);
        i = big;
    }
}

/* Offers one directory entry to the page: kept when it is among the first limit names,
 * the page's last one dropped for it when the page is full. */
static void page_offer(struct page *pg, const struct sbd_root *root, int dirfd, const char *rel,
                       const char *name)
{
    struct stat st;
    bool full = pg->n == pg->limit;
    if (full && strcmp(name, pg->v[0].name) > 0) {
        pg->more = true;
        return;
    }
    if (!describe(root, dirfd, rel, name, &st))
        return;
    struct entry e = {.name = xstrdup(name), .obj = sbd_file_entry_json(name, &st)};
    if (full) {
        xfree(pg->v[0].name);
        json_decref(pg->v[0].obj);
        pg->v[0] = e;
        pg->more = true;
        sift_down(pg, 0);
        return;
    }
    if (pg->n == pg->cap) {
        pg->cap = pg->cap ? (pg->cap * 2 < pg->limit ? pg->cap * 2 : pg->limit) : 16;
        pg->v = xreallocarray(pg->v, pg->cap, sizeof(*pg->v));
    }
    pg->v[pg->n++] = e;
    sift_up(pg, pg->n - 1);
}

/* Reads the page of o from the directory fd (taken) into pg (v sorted by name). */
static void read_page(const struct sbd_root *root, int fd, const char *rel,
                      const struct sbd_list_opts *o, struct page *pg)
{
    *pg = (struct page){.limit = o->limit};
    DIR *dir = fdopendir(fd);
    if (!dir) {
        (void)close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            (o->has_after && strcmp(de->d_name, o->after) <= 0))
            continue;
        page_offer(pg, root, dirfd(dir), rel, de->d_name);
    }
    (void)closedir(dir);
    if (pg->n > 1)
        qsort(pg->v, pg->n, sizeof(*pg->v), entry_cmp);
}

/* Responds to req with the DirectoryListing pg of rel: "continue" when names remain.
 * Frees pg's names and array (its objects go into the answer). */
static int respond_listing(struct http_req *req, const char *rel, struct page *pg,
                           const struct sbd_list_opts *o)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < pg->n; i++) {
        (void)json_array_append_new(arr, pg->v[i].obj);
        if (i + 1 < pg->n || !pg->more)
            xfree(pg->v[i].name);
    }
    char *path = strcmp(rel, ".") == 0 ? xstrdup("/") : xasprintf("/%s", rel);
    json_t *j = json_pack("{s:o, s:o}", "path", sbd_json_name(path), "entries", arr);
    xfree(path);
    if (pg->more && pg->n > 0) {
        char token[2 * sizeof(o->after)];
        sbd_list_token(pg->v[pg->n - 1].name, token, sizeof(token));
        xfree(pg->v[pg->n - 1].name);
        (void)json_object_set_new(j, "continue", json_string(token));
    }
    xfree(pg->v);
    int r = http_respond_json(req, 200, j);
    json_decref(j);
    return r;
}

/* A listing read off the loop: a directory of 300,000 entries takes seconds of stat
 * calls, during which every other request and stream would wait. */
struct list_job {
    uv_work_t work;
    struct http_req *req; /* a reference */
    const struct sbd_root *root;
    char *rel;
    int fd; /* taken by read_page */
    struct sbd_list_opts o;
    struct page pg;
};

static void list_work(uv_work_t *w)
{
    struct list_job *j = w->data;
    read_page(j->root, j->fd, j->rel, &j->o, &j->pg);
}

static void list_done(uv_work_t *w, int status)
{
    struct list_job *j = w->data;
    if (status < 0) /* not run (cancelled): fd still ours */
        (void)close(j->fd);
    if (status < 0)
        (void)sbd_respond_errno(j->req, status, "list");
    else
        (void)respond_listing(j->req, j->rel, &j->pg, &j->o);
    http_req_unref(j->req);
    xfree(j->rel);
    xfree(j);
}

/* Responds with the DirectoryListing page of fd (taken), read on a worker thread. */
static int send_listing(struct http_req *req, struct sbd *d, const char *rel, int fd)
{
    struct list_job *j = XNEW(struct list_job);
    const char *err = NULL;
    if (sbd_list_opts_parse(http_req_query(req), &j->o, &err) < 0) {
        (void)close(fd);
        xfree(j);
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, err);
    }
    j->work.data = j;
    j->req = http_req_ref(req);
    j->root = d->root;
    j->rel = xstrdup(rel);
    j->fd = fd;
    int r = uv_queue_work(d->loop, &j->work, list_work, list_done);
    if (r < 0) { /* read it here then */
        read_page(j->root, j->fd, j->rel, &j->o, &j->pg);
        r = respond_listing(req, j->rel, &j->pg, &j->o);
        http_req_unref(j->req);
        xfree(j->rel);
        xfree(j);
    }
    return r;
}

/* ---- file content ------------------------------------------------------------------ */

struct range {
    uint64_t start, len;
    bool partial;
};

/* Parses a single "bytes=" range. Returns 0 (ret filled), 1 to ignore the header, or
 * -ERANGE when unsatisfiable. */
static int parse_range(struct str h, uint64_t size, struct range *ret)
{
    struct str spec, first, last;
    if (!str_has_prefix(h, STR_LIT("bytes=")))
        return 1;
    spec = str_trim(str_make(h.p + 6, h.len - 6));
    if (str_index(spec, ',') >= 0 || !str_cut(spec, '-', &first, &last))
        return 1;
    uint64_t a = 0, b = 0;
    first = str_trim(first);
    last = str_trim(last);
    if (first.len == 0) {
        if (str_to_u64(last, &b) < 0)
            return 1;
        if (b == 0 || size == 0)
            return -ERANGE;
        a = b >= size ? 0 : size - b;
        *ret = (struct range){.start = a, .len = size - a, .partial = true};
        return 0;
    }
    if (str_to_u64(first, &a) < 0 || (last.len && str_to_u64(last, &b) < 0))
        return 1;
    if (last.len && b < a)
        return 1;
    if (a >= size)
        return -ERANGE;
    if (!last.len || b >= size)
        b = size - 1;
    *ret = (struct range){.start = a, .len = b - a + 1, .partial = true};
    return 0;
}

/* The strong entity tag of the file st: its inode, size and modification time to the
 * nanosecond (an atomic write is a new inode). out: at least SBD_ETAG_LEN bytes. */
static void file_etag(const struct stat *st, char *out, size_t size)
{
    (void)snprintf(out, size, "\"%llx-%llx-%llx.%lx\"", (unsigned long long)st->st_ino,
                   (unsigned long long)st->st_size, (unsigned long long)st->st_mtim.tv_sec,
                   (unsigned long)st->st_mtim.tv_nsec);
}

/* Whether the entity-tag list h (If-Match, If-None-Match) names etag or is "*". Weak tags
 * (W/"...") match by their opaque part when weak (If-None-Match), never otherwise. */
static bool etag_listed(struct str h, const char *etag, bool weak)
{
    struct str item, rest = h;
    bool more = true;
    while (more) {
        more = str_cut(rest, ',', &item, &rest);
        item = str_trim(item);
        if (str_eq_c(item, "*"))
            return true;
        if (str_has_prefix(item, str_c("W/"))) {
            if (!weak)
                continue;
            item = str_make(item.p + 2, item.len - 2);
        }
        if (str_eq_c(item, etag))
            return true;
    }
    return false;
}

/* Conditional GET (RFC 9110 13.2.2 order). Returns 0 to go on, or the status to answer
 * (304 / 412). */
static int check_conditions(struct http_req *req, const struct stat *st, const char *etag)
{
    time_t t, mtime = st->st_mtim.tv_sec;
    struct str im = http_req_header(req, "If-Match");
    struct str inm = http_req_header(req, "If-None-Match");
    struct str ius = http_req_header(req, "If-Unmodified-Since");
    struct str ims = http_req_header(req, "If-Modified-Since");
    if (im.p && !etag_listed(im, etag, false))
        return 412;
    if (!im.p && ius.p && sbd_parse_http_date(ius, &t) == 0 && mtime > t)
        return 412;
    if (inm.p && etag_listed(inm, etag, true))
        return 304;
    if (!inm.p && ims.p && sbd_parse_http_date(ims, &t) == 0 && mtime <= t)
        return 304;
    return 0;
}

/* Whether If-Range value ir still names the file st: its strong entity tag, or its
 * Last-Modified date when that date is strong, i.e. at least a second before now (RFC
 * 9110 8.8.2.2: a file changed twice within its second would otherwise match). */
static bool if_range_holds(struct str ir, const struct stat *st, const char *etag)
{
    time_t t;
    ir = str_trim(ir);
    if (ir.len && (ir.p[0] == '"' || str_has_prefix(ir, str_c("W/"))))
        return str_eq_c(ir, etag);
    return sbd_parse_http_date(ir, &t) == 0 && t == st->st_mtim.tv_sec &&
           (int64_t)(clock_wall_now() / USEC_PER_SEC) > (int64_t)st->st_mtim.tv_sec;
}

/* Applies Range and If-Range. Returns 0 or -ERANGE. */
static int pick_range(struct http_req *req, const struct stat *st, struct range *ret)
{
    uint64_t size = (uint64_t)st->st_size;
    char etag[SBD_ETAG_LEN];
    *ret = (struct range){.start = 0, .len = size};
    struct str h = http_req_header(req, "Range");
    if (!h.p)
        return 0;
    struct str ir = http_req_header(req, "If-Range");
    file_etag(st, etag, sizeof(etag));
    if (ir.p && !if_range_holds(ir, st, etag))
        return 0;
    struct range r;
    int pr = parse_range(h, size, &r);
    if (pr < 0)
        return pr;
    if (pr == 0)
        *ret = r;
    return 0;
}

int sbd__file_validate(struct http_req *req, const struct stat *st)
{
    char date[40], etag[SBD_ETAG_LEN];
    sbd_http_date(st->st_mtim.tv_sec, date, sizeof(date));
    file_etag(st, etag, sizeof(etag));
    (void)http_resp_header_add(req, "Last-Modified", date);
    (void)http_resp_header_add(req, "ETag", etag);
    (void)http_resp_header_add(req, "Accept-Ranges", "bytes");
    switch (check_conditions(req, st, etag)) {
    case 304:
        (void)http_respond(req, 304, NULL, NULL, 0);
        return 1;
    case 412:
        (void)sbd_respond_error(req, 412, SBD_FAILED_PRECONDITION, "file was modified");
        return 1;
    default:
        return 0;
    }
}

struct fstream {
    struct http_req *req;
    int fd;
    uint64_t off, end;
    bool busy, aborted;
};

static void fstream_free(struct fstream *s)
{
    http_req_set_abort_cb(s->req, NULL, NULL);
    http_req_set_drain_cb(s->req, NULL, NULL);
    (void)close(s->fd);
    http_req_unref(s->req);
    xfree(s);
}

static void fstream_more(struct fstream *s)
{
    char chunk[LIMIT_SBD_CHUNK];
    s->busy = true;
    while (!s->aborted && s->off < s->end) {
        uint64_t want = s->end - s->off < sizeof(chunk) ? s->end - s->off : sizeof(chunk);
        ssize_t n = pread(s->fd, chunk, (size_t)want, (off_t)s->off);
        if (n <= 0) {
            /* The file shrank (or failed) under the download: its status, length and
             * range were told already, so the connection is cut, not the body ended as
             * if complete. */
            http_req_abort(s->req);
            s->aborted = true;
            break;
        }
        int r = http_resp_write(s->req, chunk, (size_t)n);
        if (r == -EAGAIN) {
            s->busy = false;
            return;
        }
        if (r < 0) {
            s->aborted = true;
            break;
        }
        s->off += (uint64_t)n;
        if (r == 1) {
            s->busy = false;
            return;
        }
    }
    if (!s->aborted)
        (void)http_resp_end(s->req);
    s->busy = false;
    fstream_free(s);
}

static void on_fstream_drain(struct http_req *req, void *ctx)
{
    (void)req;
    fstream_more(ctx);
}

static void on_fstream_abort(struct http_req *req, void *ctx)
{
    struct fstream *s = ctx;
    (void)req;
    s->aborted = true;
    if (!s->busy)
        fstream_free(s);
}

static int send_inline(struct http_req *req, int fd, int status, const struct range *rg)
{
    char *data = xmalloc(rg->len ? rg->len : 1);
    size_t got = 0;
    while (got < rg->len) {
        ssize_t n = pread(fd, data + got, rg->len - got, (off_t)(rg->start + got));
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got < rg->len) {
        /* shrank since its size was read (the range and length were worked out from
         * it): the client sees the connection end, as for a streamed download */
        xfree(data);
        http_req_abort(req);
        return 0;
    }
    int r = http_respond(req, status, "application/octet-stream", data, got);
    xfree(data);
    return r;
}

static int send_body(struct http_req *req, int fd, int status, const struct range *rg)
{
    if (str_eq_c(http_req_method(req), "HEAD"))
        return http_respond(req, status, "application/octet-stream", NULL, rg->len);
    if (rg->len <= LIMIT_SBD_INLINE_FILE)
        return send_inline(req, fd, status, rg);
    /* taken before the head goes, so that failing (out of descriptors) is an answer */
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* not into the processes started meanwhile */
    if (own < 0)
        return sbd_respond_errno(req, -errno, "download");
    /* sized: the client learns the length first (a progress bar, a check of what came),
     * and a client that half-closes after its request still gets all of it */
    int r = http_resp_start_length(req, status, "application/octet-stream", rg->len);
    if (r < 0) {
        (void)close(own);
        return r;
    }
    struct fstream *s = XNEW(struct fstream);
    s->req = http_req_ref(req);
    s->fd = own;
    s->off = rg->start;
    s->end = rg->start + rg->len;
    http_req_set_abort_cb(req, on_fstream_abort, s);
    http_req_set_drain_cb(req, on_fstream_drain, s);
    fstream_more(s);
    return 0;
}

int sbd__pick_range(struct http_req *req, const struct stat *st, uint64_t *start, uint64_t *len,
                    bool *partial)
{
    struct range rg;
    int r = pick_range(req, st, &rg);
    *start = rg.start;
    *len = rg.len;
    *partial = rg.partial;
    return r;
}

int sbd__send_range(struct http_req *req, int fd, int status, uint64_t start, uint64_t len)
{
    struct range rg = {.start = start, .len = len, .partial = status == 206};
    return send_body(req, fd, status, &rg);
}

/* Serves the regular file fd (borrowed) with its validators, Range and conditionals. */
int sbd_send_file(struct http_req *req, int fd, const struct stat *st)
{
    char cr[96];
    if (sbd__file_validate(req, st))
        return 0;
    struct range rg;
    if (pick_range(req, st, &rg) < 0) {
        (void)snprintf(cr, sizeof(cr), "bytes */%lld", (long long)st->st_size);
        (void)http_resp_header_add(req, "Content-Range", cr);
        return sbd_respond_error(req, 416, SBD_INVALID_ARGUMENT, "range not satisfiable");
    }
    if (rg.partial) {
        (void)snprintf(cr, sizeof(cr), "bytes %llu-%llu/%lld", (unsigned long long)rg.start,
                       (unsigned long long)(rg.start + rg.len - 1), (long long)st->st_size);
        (void)http_resp_header_add(req, "Content-Range", cr);
    }
    return send_body(req, fd, rg.partial ? 206 : 200, &rg);
}

/* X-File-Mode: the permission bits of the regular file served (st: its fstat, so after
 * any symlink), four octal digits as /v1/stat's mode: a client reading through a symlink
 * learns the mode of the file it got, not the link's. */
static void add_mode_header(struct http_req *req, const struct stat *st)
{
    char mode[8];
    (void)snprintf(mode, sizeof(mode), "%04o", (unsigned)(st->st_mode & 07777));
    (void)http_resp_header_add(req, "X-File-Mode", mode);
}

static int files_get(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    char *rel = NULL;
    if (sbd__req_path(req, d->root, &rel) < 0)
        return 0;
    struct stat st;
    int fd = sbd_path_open_read(d->root, rel);
    if (fd == -ENXIO) { /* a FIFO, a socket, a device */
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "not a regular file");
    } else if (fd < 0) {
        (void)sbd_respond_errno(req, fd, "open");
    } else if (fstat(fd, &st) < 0) {
        (void)sbd_respond_errno(req, -errno, "stat");
    } else if (S_ISDIR(st.st_mode)) {
        (void)send_listing(req, d, rel, fd);
        fd = -1; /* taken */
    } else if (S_ISREG(st.st_mode)) {
        add_mode_header(req, &st);
        if (sbd__read_window(req, fd, &st) == 0) /* ?offset=&max_bytes= (fsops.c) */
            (void)sbd_send_file(req, fd, &st);
    } else {
        (void)sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "not a regular file");
    }
    if (fd >= 0)
        (void)close(fd);
    xfree(rel);
    return 0;
}

/* ---- delete ------------------------------------------------------------------------ */

/* Directories a recursive delete descends (each level holds a descriptor open). */
#define RM_MAX_DEPTH 256

static int rm_contents(int fd, unsigned depth, const atomic_bool *stop);

/* Removes name (a directory, not followed if a symlink) in dirfd with its contents. Ends
 * early with -ECANCELED once *stop (NULL: never) is set, and with -EOVERFLOW below
 * RM_MAX_DEPTH levels. */
static int rm_tree(int dirfd, const char *name, unsigned depth, const atomic_bool *stop)
{
    if (depth > RM_MAX_DEPTH)
        return -EOVERFLOW;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = rm_contents(fd, depth, stop);
    if (r < 0)
        return r;
    return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

/* Empties the directory fd (taken). */
static int rm_contents(int fd, unsigned depth, const atomic_bool *stop)
{
    DIR *dir = fdopendir(fd);
    if (!dir) {
        (void)close(fd);
        return -errno;
    }
    int r = 0;
    struct dirent *de;
    while (r == 0 && (de = readdir(dir))) {
        if (stop && atomic_load(stop)) {
            r = -ECANCELED;
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISDIR(st.st_mode))
            r = rm_tree(dirfd(dir), de->d_name, depth + 1, stop);
        else if (unlinkat(dirfd(dir), de->d_name, 0) < 0 && errno != ENOENT)
            r = -errno;
    }
    (void)closedir(dir);
    return r;
}

/* A recursive removal, on libuv's thread pool: a tree of any size must not stall the
 * loop (every other request and stream of the daemon) while it goes. */
struct rm_job {
    uv_work_t work;
    struct http_req *req; /* a reference */
    int dirfd;            /* taken: the parent, or the directory to empty */
    char *name;           /* the directory in dirfd to remove, or NULL: empty dirfd */
    int result;
    atomic_bool stop; /* the client went (or the daemon stops): the rest is not removed */
};

static void rm_work(uv_work_t *w)
{
    struct rm_job *j = w->data;
    if (j->name) {
        j->result = rm_tree(j->dirfd, j->name, 0, &j->stop);
    } else {
        j->result = rm_contents(j->dirfd, 0, &j->stop);
        j->dirfd = -1; /* rm_contents took it */
    }
}

static void rm_done(uv_work_t *w, int status)
{
    struct rm_job *j = w->data;
    int r = status < 0 ? status : j->result;
    http_req_set_abort_cb(j->req, NULL, NULL);
    if (r == -EOVERFLOW) /* what was reached is gone; the client can go deep first */
        (void)sbd_respond_error(j->req, 400, SBD_INVALID_ARGUMENT,
                                "delete: the tree nests more than 256 directories deep; delete "
                                "its deepest part first");
    else if (r < 0)
        (void)sbd_respond_errno(j->req, r, "delete");
    else
        (void)http_respond(j->req, 204, NULL, NULL, 0);
    http_req_unref(j->req);
    if (j->dirfd >= 0)
        (void)close(j->dirfd);
    xfree(j->name);
    xfree(j);
}

/* The client went, or the daemon stops (its connections close): a tree of any size must
 * not hold the shutdown, so the removal ends where it is. */
static void rm_abort(struct http_req *req, void *ctx)
{
    struct rm_job *j = ctx;
    (void)req;
    atomic_store(&j->stop, true);
}

/* Removes dirfd's name (NULL: dirfd's contents) off the loop and answers req then.
 * dirfd is taken. */
static int rm_async(struct http_req *req, struct sbd *d, int dirfd, const char *name)
{
    struct rm_job *j = XNEW(struct rm_job);
    j->work.data = j;
    j->req = http_req_ref(req);
    j->dirfd = dirfd;
    j->name = name ? xstrdup(name) : NULL;
    http_req_set_abort_cb(req, rm_abort, j);
    int r = uv_queue_work(d->loop, &j->work, rm_work, rm_done);
    if (r < 0) {
        http_req_set_abort_cb(req, NULL, NULL);
        http_req_unref(j->req);
        (void)close(j->dirfd);
        xfree(j->name);
        xfree(j);
        return sbd_respond_errno(req, r, "delete");
    }
    return 0;
}

static int delete_root(struct http_req *req, struct sbd *d, bool recursive)
{
    if (!recursive)
        return sbd_respond_error(req, 409, SBD_CONFLICT,
                                 "refusing to delete the root without recursive=true");
    int fd = sbd_path_open(d->root, ".", O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return sbd_respond_errno(req, fd, "delete");
    return rm_async(req, d, fd, NULL);
}

static int delete_path(struct http_req *req, struct sbd *d, const char *rel, bool recursive)
{
    const char *name;
    int pfd = sbd_path_open_parent(d->root, rel, false, &name);
    if (pfd < 0)
        return sbd_respond_errno(req, pfd, "delete");
    struct stat st;
    int r = 0;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        r = -errno;
    } else if (!S_ISDIR(st.st_mode)) {
        r = unlinkat(pfd, name, 0) < 0 ? -errno : 0;
    } else if (unlinkat(pfd, name, AT_REMOVEDIR) < 0) {
        r = -errno;
        if (r == -EEXIST)
            r = -ENOTEMPTY;
        if (r == -ENOTEMPTY && recursive)
            return rm_async(req, d, pfd, name); /* takes pfd */
    }
    (void)close(pfd);
    if (r == -ENOTEMPTY)
        return sbd_respond_error(req, 409, SBD_CONFLICT,
                                 "directory not empty (use recursive=true)");
    if (r < 0)
        return sbd_respond_errno(req, r, "delete");
    return http_respond(req, 204, NULL, NULL, 0);
}

static int files_delete(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    struct buf v;
    bool recursive = false;
    buf_init(&v, 16);
    int q = sbd_query_get(http_req_query(req), "recursive", &v);
    if (q != 0 && (q < 0 || cstr_to_bool(buf_str(&v), &recursive) < 0)) {
        buf_done(&v);
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "recursive must be a boolean");
    }
    buf_done(&v);
    char *rel = NULL;
    if (sbd__req_path(req, d->root, &rel) < 0)
        return 0;
    if (strcmp(rel, ".") == 0)
        (void)delete_root(req, d, recursive);
    else
        (void)delete_path(req, d, rel, recursive);
    xfree(rel);
    return 0;
}

/* ---- registration ------------------------------------------------------------------ */

int sbd__files_register(struct sbd *d)
{
    int r = 0;
    r |= sbd__route(d, d->router, "GET", "/v1/files", 0, files_get, false);
    r |= sbd__route(d, d->router, "GET", "/v1/files/", HTTP_ROUTE_PREFIX, files_get, false);
    r |= sbd__route(d, d->router, "DELETE", "/v1/files", 0, files_delete, false);
    r |= sbd__route(d, d->router, "DELETE", "/v1/files/", HTTP_ROUTE_PREFIX, files_delete, false);
    r |= sbd__route_body(d, d->router, "PUT", "/v1/files/",
                         HTTP_ROUTE_PREFIX | HTTP_ROUTE_STREAM_BODY, sbd__files_put,
                         sbd__files_put_body_ok);
    r |= sbd__route_body(d, d->router, "PUT", "/v1/files", HTTP_ROUTE_STREAM_BODY, sbd__files_put,
                         sbd__files_put_body_ok);
    return r < 0 ? -EINVAL : 0;
}
