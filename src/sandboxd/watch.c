/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/watch/{path}?recursive=bool&queue=N: an NDJSON stream of inotify events of a
 * directory (and its subdirectories when recursive).
 *
 * Confinement: the directory is opened with sbd_path_open (openat2 RESOLVE_BENEATH from
 * the root), each subdirectory with openat(O_NOFOLLOW | O_DIRECTORY) by its name in the
 * O_PATH descriptor of its parent that the stream holds for every watched directory
 * (never by a path string), and the watch is added on that descriptor through
 * /proc/self/fd/N. So the stream follows the directories it watches, not their paths:
 * after a rename (of the watched directory itself, or of a subdirectory while its events
 * wait to be read) new subdirectories are the renamed directory's, and a directory made
 * at an old path by someone else is not followed. Events name paths below the watched
 * directory (renames inside the tree renaming them), whatever it is called now.
 *
 * Bounds: LIMIT_SBD_WATCH_STREAMS streams per process (429 past it), LIMIT_SBD_WATCHES
 * directories per stream and LIMIT_SBD_WATCH_FDS (at most half the open-file limit) for
 * all streams (an "error" event says when subdirectories are left out), and a
 * per-stream queue of events for a client slower than the events: past `queue` events
 * (or LIMIT_SBD_WATCH_QUEUE_BYTES) events are dropped and counted, and an
 * {"type":"overflow","lost":N} line follows the queued ones. A kernel queue overflow
 * (IN_Q_OVERFLOW) gives {"type":"overflow","lost":null} and a rescan of the tree
 * (on_overflow). The stream ends when the client goes, when the watched directory is
 * deleted, or at shutdown (sbd__watch_shutdown: at once, a job under way told to stop).
 *
 * Reads: one read of at most WATCH_READ_SIZE bytes of events a loop turn (handle_events),
 * the rest left in the kernel's queue, so that a flood of events (or a queue that waited
 * for a scan) is handled over several turns with other requests answered between them;
 * the lines of a turn go to the connection together.
 *
 * Scans: the whole tree (the first scan, and the rescan after an overflow), and a
 * directory that appears later (created or moved in) with what is below it, are read on a
 * worker thread (struct scan_job) while the stream reads no events; the loop takes what it
 * found a batch a turn, reporting a new directory's entries as before. A new directory
 * whose tree is small (WATCH_INLINE_ENTRIES) is read on the loop at once.
 *
 * Deletions: a held descriptor keeps the kernel from saying that its directory went
 * (IN_DELETE_SELF and IN_IGNORED wait for the last reference), so a subdirectory is let
 * go at its IN_DELETE in its parent, and the watched directory is looked at every tick
 * (st_nlink 0: deleted).
 *
 * Renames: the kernel queues a rename's IN_MOVED_FROM and IN_MOVED_TO one after the other,
 * but a read can come between them (the reader on another core wakes on the first). An
 * IN_MOVED_FROM is therefore held across reads until the next event, or for
 * WATCH_PAIR_MS when nothing follows; only then is it a move out of the tree. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/map.h"
#include "common/xalloc.h"
#include "sandboxd/activity.h"
#include "sandboxd/fsops.h"
#include "sandboxd/fsreq.h"
#include "sandboxd/ndjson.h"
#include "sandboxd/sbd_int.h"
#include "sandboxd/util.h"

#define WATCH_TICK_MS         500 /* shutdown / client checks */
#define WATCH_HEARTBEAT_TICKS 30  /* a quiet stream: "\n" every 15 s */
#define WATCH_PAIR_MS         50  /* how long a held IN_MOVED_FROM waits for its IN_MOVED_TO */
#define WATCH_READ_SIZE       (16 * 1024) /* one read a loop turn */
#define WATCH_BATCH_BYTES     (64 * 1024) /* lines handed to the connection at once */
#define WATCH_DRAIN_READS     64          /* reads that drain the queue when the watched one went */
#define WATCH_ANNOUNCED_MAX   65536       /* names of scanned entries kept against repeats */
#define WATCH_TAKE_BATCH      512         /* entries of a job's list taken a loop turn */
#define WATCH_INLINE_ENTRIES  256         /* a new directory's tree this small: read on the loop */

#define WATCH_MASK                                                                      \
    (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | \
     IN_EXCL_UNLINK | IN_ONLYDIR)

static atomic_uint watch_streams;
static atomic_uint watch_fds; /* directory descriptors all streams hold */
size_t sbd__watch_test_read_size;

struct wdir {
    int wd;
    int fd;     /* O_PATH descriptor of the directory (owned): its subdirectories open in it */
    char *sub;  /* path below the watched directory, "" for itself */
    bool seen;  /* found again by the rescan after a kernel queue overflow */
    size_t idx; /* in the stream's dirs */
};

struct wstream {
    struct sbd *d;
    struct wstream *prev, *next; /* d->watches */
    struct http_req *req;
    char *base;         /* cleaned root-relative path of the watched directory (at start) */
    int base_fd;        /* O_PATH descriptor of the watched directory */
    unsigned fd_budget; /* directory descriptors all streams may hold */
    bool recursive, limit_said, closing;
    bool scanning;        /* a scan of the tree: its errors wait for its end (say_held) */
    bool ready;           /* the first scan is done, "ready" sent */
    struct scan_job *job; /* a scan under way on a worker thread (events not read) */
    bool held_limit;      /* say_limit during the first scan */
    bool held_too_many;   /* a directory too large to scan, during the first scan */
    int ifd, handles;
    unsigned quiet_ticks; /* ticks since the last line was written */
    uv_poll_t poll;
    uv_timer_t timer, pair; /* pair: the end of a held IN_MOVED_FROM's wait */
    uv_idle_t more;         /* a job's list is taken over several loop turns */
    struct wdir **dirs;     /* owned, each also in bywd */
    size_t ndirs, cap;
    struct map *bywd;      /* the watch descriptor (its bytes) -> its entry of dirs (borrowed) */
    struct sbd_ndjson out; /* its queue holds at most queue_max lines */
    size_t queue_max;
    uint64_t lost;
    bool lost_unknown; /* the kernel dropped events (IN_Q_OVERFLOW): the marker says null */
    /* entries the scan of a new directory reported, "wd/name" (values not owned): their
     * IN_CREATE (queued before the scan's end) is not reported again (take_announced) */
    struct map *announced;
    uint64_t read_pos;      /* bytes of inotify events handled, the current one included */
    uint64_t announced_end; /* read_pos past which no such IN_CREATE can be: forgotten */
    /* the last read of the inotify descriptor (WATCH_READ_SIZE bytes, owned): its events
     * from rpos on are not handled yet (a scan started, or the stream closed, first) */
    char *rbuf;
    size_t rpos, rlen;
    bool in_events; /* handle_events is under way (a scan ended inside it goes on there) */
    /* an IN_MOVED_FROM waiting for its IN_MOVED_TO */
    bool has_from, from_dir;
    uint32_t from_cookie;
    char *from;
};

static void wstream_close(struct wstream *s);

/* ---- output ------------------------------------------------------------------------ */

/* Hands the queued lines and a due overflow marker to the connection. A kernel queue
 * overflow's marker waits for the end of its rescan (rescan_end): a client that lists the
 * directory again when it sees the marker then misses nothing. */
static void flush(struct wstream *s)
{
    if ((s->lost || s->lost_unknown) && !s->scanning) {
        char m[64];
        int n = s->lost_unknown ? snprintf(m, sizeof(m), "{\"type\":\"overflow\",\"lost\":null}\n")
                                : snprintf(m, sizeof(m), "{\"type\":\"overflow\",\"lost\":%llu}\n",
                                           (unsigned long long)s->lost);
        if (sbd_ndjson_queue_raw(&s->out, m, (size_t)n) == 0) {
            s->lost = 0;
            s->lost_unknown = false;
        }
    }
    if (!sbd_ndjson_pending(&s->out))
        return;
    int r = sbd_ndjson_flush(&s->out);
    if (r < 0)
        wstream_close(s);
    else if (!sbd_ndjson_pending(&s->out))
        s->quiet_ticks = 0;
}

/* Can a line of len bytes be queued (no marker due, the queue not full)? */
static bool can_queue(const struct wstream *s, size_t len)
{
    return !s->lost && !s->lost_unknown && s->out.nlines < s->queue_max &&
           s->out.queue.len + len <= s->out.queue.limit;
}

/* Queues the event j (taken) as one line. The lines of a loop turn go to the connection
 * together (emit_end), or once WATCH_BATCH_BYTES wait; a queue that fills while the
 * connection takes more goes to it first. The event is dropped and counted when the queue
 * is full while the connection is not taking more, a marker is due (it goes first), or
 * the line is too long to encode. */
static void emit(struct wstream *s, json_t *j)
{
    struct buf line;
    buf_init(&line, 4 * LIMIT_SBD_PATH);
    int r = sbd_ndjson_encode(j, &line);
    if (r == 0 && !can_queue(s, line.len) && !s->out.blocked && !s->closing)
        flush(s);
    if (r < 0 || !can_queue(s, line.len) || sbd_ndjson_queue_raw(&s->out, line.data, line.len) < 0)
        s->lost++;
    buf_done(&line);
    if (s->out.queue.len >= WATCH_BATCH_BYTES && !s->out.blocked && !s->closing)
        flush(s);
}

/* The end of a loop turn's events: their lines go to the connection. */
static void emit_end(struct wstream *s)
{
    if (!s->out.blocked && !s->closing)
        flush(s);
}

/* The event {"type":type,"path":path,"is_dir":is_dir} (new). */
static json_t *event_simple(const char *type, const char *path, bool is_dir)
{
    return json_pack("{s:s, s:o, s:b}", "type", type, "path", sbd_json_name(path), "is_dir",
                     is_dir);
}

/* The event of a rename inside the tree (new). */
static json_t *event_move(const char *from, const char *to, bool is_dir)
{
    return json_pack("{s:s, s:o, s:o, s:o, s:b}", "type", "move", "path", sbd_json_name(to), "from",
                     sbd_json_name(from), "to", sbd_json_name(to), "is_dir", is_dir);
}

static void emit_simple(struct wstream *s, const char *type, const char *path, bool is_dir)
{
    emit(s, event_simple(type, path, is_dir));
}

static void on_drain(struct http_req *req, void *ctx)
{
    struct wstream *s = ctx;
    (void)req;
    if (sbd_ndjson_drain(&s->out) < 0)
        wstream_close(s);
    else
        flush(s); /* a due overflow marker */
}

/* ---- watched directories ----------------------------------------------------------- */

/* Closes a directory descriptor counted in watch_fds. */
static void release_fd(int fd)
{
    (void)close(fd);
    atomic_fetch_sub(&watch_fds, 1);
}

static struct wdir *find_wd(struct wstream *s, int wd)
{
    return map_getn(s->bywd, (const char *)&wd, sizeof(wd));
}

static void forget_wd(struct wstream *s, int wd)
{
    struct wdir *w = map_removen(s->bywd, (const char *)&wd, sizeof(wd));
    if (!w)
        return;
    release_fd(w->fd);
    struct wdir *last = s->dirs[--s->ndirs];
    s->dirs[w->idx] = last;
    last->idx = w->idx;
    xfree(w->sub);
    xfree(w);
}

/* "sub/name" below the watched directory (new). */
static char *join(const char *sub, const char *name)
{
    return *sub ? xasprintf("%s/%s", sub, name) : xstrdup(name);
}

/* Records the watch wd of the directory fd (O_PATH, taken, counted in watch_fds) known as
 * sub (taken). Returns its entry (borrowed). */
static struct wdir *insert_dir(struct wstream *s, int wd, int fd, char *sub)
{
    if (s->ndirs == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->dirs = xreallocarray(s->dirs, s->cap, sizeof(*s->dirs));
    }
    struct wdir *w = XNEW(struct wdir);
    *w = (struct wdir){.wd = wd, .fd = fd, .sub = sub, .seen = true, .idx = s->ndirs};
    s->dirs[s->ndirs++] = w;
    (void)map_putn(s->bywd, (const char *)&wd, sizeof(wd), w, NULL);
    return w;
}

/* Adds the inotify watch of the watched directory, fd (O_PATH, taken: held while it is
 * watched). Returns 0 or a negative errno (-ENOSPC past the descriptor budget). */
static int watch_base(struct wstream *s, int fd)
{
    char proc[64];
    (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    int wd = -ENOSPC;
    if (atomic_load(&watch_fds) < s->fd_budget &&
        (wd = inotify_add_watch(s->ifd, proc, WATCH_MASK)) < 0)
        wd = -errno;
    if (wd < 0) {
        (void)close(fd);
        return wd;
    }
    atomic_fetch_add(&watch_fds, 1);
    (void)insert_dir(s, wd, fd, xstrdup(""));
    return 0;
}

/* Opens the directory name in the directory pfd (borrowed) as an O_PATH descriptor, a
 * symlink not followed. Returns it or a negative errno (-ENOTDIR: not a directory). */
static int open_child(int pfd, const char *name)
{
    int fd = openat(pfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Is the watched directory w still at its name below the watched one (found there without
 * following a symlink)? The watched directory itself: while it exists. */
static bool still_there(const struct wstream *s, const struct wdir *w)
{
    struct stat a, b;
    if (fstat(w->fd, &a) < 0)
        return false;
    if (!*w->sub)
        return a.st_nlink > 0;
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
    long fd = syscall(SYS_openat2, s->base_fd, w->sub, &how, sizeof(how));
    if (fd < 0)
        return false;
    bool same = fstat((int)fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    (void)close((int)fd);
    return same;
}

#define MSG_DIR_LIMIT "too many directories: some subdirectories are not watched"
#define MSG_TOO_MANY  "a directory has too many entries to scan"

/* An error line now, or, during the first scan, at its end (*held): "ready" comes first. */
static void say_error(struct wstream *s, bool *held, const char *msg)
{
    if (s->scanning)
        *held = true;
    else
        emit(s, json_pack("{s:s, s:s}", "type", "error", "message", msg));
}

static void say_limit(struct wstream *s)
{
    if (s->limit_said)
        return;
    s->limit_said = true;
    say_error(s, &s->held_limit, MSG_DIR_LIMIT);
}

/* The errors of the first scan, after "ready". */
static void say_held(struct wstream *s)
{
    s->scanning = false;
    if (s->held_limit)
        say_error(s, &s->held_limit, MSG_DIR_LIMIT);
    if (s->held_too_many)
        say_error(s, &s->held_too_many, MSG_TOO_MANY);
}

struct found {
    char *name;
    bool dir;
};

/* Reads the entries of the directory pfd (O_PATH, borrowed) into a new array (at most
 * max; when there are more, *too_many is set). Returns the count. Runs on the loop or on
 * a worker thread. */
static size_t scan_dir(int pfd, struct found **ret, bool *too_many, size_t max)
{
    int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        (void)close(fd);
        return 0;
    }
    struct found *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        struct stat st; /* the type without a stat call when the file system says it */
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (de->d_type != DT_UNKNOWN)
            st.st_mode = de->d_type == DT_DIR ? S_IFDIR : S_IFREG;
        else if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (n == max) {
            *too_many = true;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = xreallocarray(v, cap, sizeof(*v));
        }
        v[n++] = (struct found){.name = xstrdup(de->d_name), .dir = S_ISDIR(st.st_mode)};
    }
    (void)closedir(dir);
    *ret = v;
    return n;
}

/* ---- entries a scan reported ------------------------------------------------------ */

/* A new directory is watched, then read: an entry made in between is found by the scan
 * and has its IN_CREATE queued as well. The names the scan reported are kept until the
 * events queued by its end are read, and such an IN_CREATE is not reported again
 * (bounded: past WATCH_ANNOUNCED_MAX names, a repeat is possible). */

/* The key of name in the watched directory wd (new). */
static char *announced_key(int wd, const char *name)
{
    return xasprintf("%d/%s", wd, name);
}

static void note_announced(struct wstream *s, int wd, const char *name)
{
    if (map_len(s->announced) >= WATCH_ANNOUNCED_MAX)
        return;
    char *k = announced_key(wd, name);
    (void)map_put(s->announced, k, s, NULL); /* (any non-NULL value) */
    xfree(k);
}

/* A scan ended, queued bytes of events in the kernel's queue then (none read since): its
 * names are kept until those events are read. */
static void announced_until_queued(struct wstream *s, int queued)
{
    uint64_t end = s->read_pos + (s->rlen - s->rpos) + (uint64_t)queued;
    if (end > s->announced_end)
        s->announced_end = end;
}

/* Was name in the watched directory wd reported by a scan? Forgets it. */
static bool take_announced(struct wstream *s, int wd, const char *name)
{
    if (!map_len(s->announced))
        return false;
    char *k = announced_key(wd, name);
    bool was = map_remove(s->announced, k) != NULL;
    xfree(k);
    return was;
}

/* ---- adding directories -------------------------------------------------------------- */

#define TREE_ANNOUNCE 1u /* report the entries found as "create" events */
#define TREE_NEW      2u /* self says the directory was made: dropped when watched already */
#define TREE_FULL     4u /* the whole tree: the first scan, or a rescan (scan_end after it) */

/* Is sub the directory top or below it? */
static bool in_subtree(const char *sub, const char *top, size_t n)
{
    return strncmp(sub, top, n) == 0 && (sub[n] == '\0' || sub[n] == '/');
}

/* A directory moved from "from" to "to" inside the tree: renames its watches. */
static void rename_subtree(struct wstream *s, const char *from, const char *to)
{
    size_t n = strlen(from);
    for (size_t i = 0; i < s->ndirs; i++) {
        char *sub = s->dirs[i]->sub;
        if (!in_subtree(sub, from, n))
            continue;
        s->dirs[i]->sub = xasprintf("%s%s", to, sub + n);
        xfree(sub);
    }
}

/* Swaps the names of the directories a and b and of those below them (RENAME_EXCHANGE). */
static void swap_subtrees(struct wstream *s, const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    for (size_t i = 0; i < s->ndirs; i++) {
        char *sub = s->dirs[i]->sub;
        if (in_subtree(sub, a, na))
            s->dirs[i]->sub = xasprintf("%s%s", b, sub + na);
        else if (in_subtree(sub, b, nb))
            s->dirs[i]->sub = xasprintf("%s%s", a, sub + nb);
        else
            continue;
        xfree(sub);
    }
}

/* The watched directory known as sub, or NULL. */
static struct wdir *find_sub(struct wstream *s, const char *sub)
{
    for (size_t i = 0; i < s->ndirs; i++)
        if (strcmp(s->dirs[i]->sub, sub) == 0)
            return s->dirs[i];
    return NULL;
}

/* Is the directory of w the one now at name in the directory pfd (borrowed)? */
static bool is_at(const struct wdir *w, int pfd, const char *name)
{
    struct stat a, b;
    return fstat(w->fd, &a) == 0 && fstatat(pfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Was the directory of w deleted (removed, or replaced by a rename onto its name)? */
static bool dir_deleted(const struct wdir *w)
{
    struct stat st;
    return fstat(w->fd, &st) < 0 || st.st_nlink == 0;
}

/* A directory left the tree: drops its watches. */
static void drop_subtree(struct wstream *s, const char *from)
{
    size_t n = strlen(from);
    for (size_t i = s->ndirs; i-- > 0;) {
        if (!in_subtree(s->dirs[i]->sub, from, n))
            continue;
        (void)inotify_rm_watch(s->ifd, s->dirs[i]->wd);
        forget_wd(s, s->dirs[i]->wd);
    }
}

/* Depth of sub below the watched directory ("" 0, "a/b" 2). */
static unsigned depth_of(const char *sub)
{
    unsigned n = *sub ? 1 : 0;
    for (const char *p = sub; *p; p++)
        n += *p == '/';
    return n;
}

static void start_job(struct wstream *s, int pfd, const char *name, const char *sub, unsigned depth,
                      json_t *self, unsigned how);

/* A directory that appeared (created, moved in, or renamed before it was watched) as name
 * in the watched directory pfd (its held descriptor), at sub, reported by the event self
 * (taken), how (struct scan_job): watched with what is below it by a job on a worker thread,
 * the stream's events waiting meanwhile, unless it is deeper than a recursive watch goes
 * (the first scan's bound, LIMIT_SBD_WATCH_DEPTH): then only reported. */
static void add_new_dir(struct wstream *s, int pfd, const char *name, const char *sub, json_t *self,
                        unsigned how)
{
    unsigned depth = depth_of(sub);
    if (depth > LIMIT_SBD_WATCH_DEPTH)
        emit(s, self);
    else
        start_job(s, pfd, name, sub, depth, self, how);
}

/* Was the watched directory deleted? */
static bool base_gone(const struct wstream *s)
{
    struct stat st;
    return fstat(s->base_fd, &st) < 0 || st.st_nlink == 0;
}

/* The watched directories the rescan did not reach (a listing cut at its bound, the watch
 * limit, a watch that is not recursive) looked at again: one still at its name stays. */
static void recheck_unseen(struct wstream *s)
{
    for (size_t i = 0; i < s->ndirs; i++)
        if (!s->dirs[i]->seen)
            s->dirs[i]->seen = still_there(s, s->dirs[i]);
}

static void start_scan(struct wstream *s);

/* The kernel's queue overflowed (IN_Q_OVERFLOW): events were dropped, how many is not
 * known (the marker says null). The tree is read again, as the first scan did but
 * reporting nothing: directories that appeared meanwhile are watched, renamed ones get
 * their new names, and ones gone (their IN_IGNORED may be among the dropped events) are
 * let go. The stream ends when the watched directory itself is gone. */
static void on_overflow(struct wstream *s)
{
    s->lost_unknown = true;
    if (base_gone(s)) {
        wstream_close(s);
        return;
    }
    for (size_t i = 0; i < s->ndirs; i++)
        s->dirs[i]->seen = false;
    start_scan(s); /* its errors follow the marker (say_held) */
}

/* The rescan after an overflow is done: the directories it did not find are let go. */
static void rescan_end(struct wstream *s)
{
    bool base = false;
    recheck_unseen(s);
    for (size_t i = s->ndirs; i-- > 0;) {
        if (s->dirs[i]->seen) {
            base |= !*s->dirs[i]->sub;
            continue;
        }
        (void)inotify_rm_watch(s->ifd, s->dirs[i]->wd);
        forget_wd(s, s->dirs[i]->wd);
    }
    if (!base) {
        wstream_close(s); /* the watched directory is gone */
        return;
    }
    s->scanning = false; /* the marker goes now, then the errors of the rescan */
    emit_end(s);
    say_held(s);
}

/* ---- reading trees off the loop ------------------------------------------------- */

/* What a job found, in the order the stream takes it (a directory before its entries). */
struct scanned {
    char *sub;     /* its path below the watched directory (owned) */
    size_t name;   /* where its name starts in sub */
    int parent_wd; /* the watch of the directory it is in, -1 for the job's top */
    int wd;        /* (watch) its watch, or a negative errno (-ENOSPC: past the bounds) */
    int fd;        /* (watch) O_PATH (counted in watch_fds), or -1: the stream watches it */
    bool dir;      /* a directory */
    bool watch;    /* a directory the job watched (or tried to) */
    bool drop;     /* (watch) made (TREE_NEW) but watched already: its event is dropped */
    bool big;      /* (watch) its listing was cut at LIMIT_SBD_LISTING */
};

/* A directory read on a worker thread with what is below it: the whole tree (the first
 * scan, the rescan after a kernel queue overflow), or one that appeared later (created or
 * moved in: add_new_dir). A tree of thousands of directories takes seconds to read, which
 * every other request and stream waited for when it ran on the loop. The job adds the
 * watches (inotify calls are thread-safe) and lists what it found; the stream reads no
 * events meanwhile (they wait in the kernel's queue, and what was read waits in rbuf, as
 * they did while the tree was read on the loop), so its directories do not change: the
 * job reads its watch descriptors, and the descriptor it starts in stays open. The stream
 * then takes the list on the loop (take_some), WATCH_TAKE_BATCH entries a loop turn,
 * reporting them (announced) in the order the loop reported them before, and goes on
 * with its events. A new directory is first read on the loop, at most WATCH_INLINE_ENTRIES
 * entries (most are made empty: a trip to the thread pool for each, behind the other jobs
 * there, cost more than reading it), and on a worker thread from the start when it has
 * more (job_restart).
 *
 * how: TREE_ANNOUNCE (a directory that appeared while it was not watched yet: its entries
 * are reported as "create" events after it) and TREE_NEW (self says the directory was
 * made); an announced directory watched already was reported with its entries (by the
 * scan of its parent, or under another name): it is not read again, and a made one's
 * event is dropped. The watch of a directory is added and the directory read before its
 * event is emitted, so what a client does after seeing that event is reported once, by
 * inotify. */
struct scan_job {
    uv_work_t work;
    /* the loop's */
    struct wstream *s;
    json_t *self; /* the event of the top directory (owned, may be NULL) */
    bool done;    /* the worker is done: the list is the loop's */
    size_t taken; /* entries of v taken by the stream */
    /* read by the worker */
    int ifd, pfd;           /* borrowed: the stream (and pfd's directory) outlive the job */
    char *name, *sub;       /* the top: its name in pfd, its path below the watched one */
    unsigned depth, how;    /* the top's depth, TREE_* */
    unsigned fd_budget;     /* as the stream's */
    size_t ndirs;           /* directories the stream watched at the start */
    const struct map *bywd; /* the stream's (borrowed: unchanged while the job runs) */
    atomic_bool cancel;     /* the stream is closing: stop */
    /* written by the worker */
    struct map *added; /* the watch descriptors the job added */
    struct scanned *v;
    size_t n, cap;
    int queued;    /* bytes of events in the kernel's queue at its end */
    size_t budget; /* entries a walk on the loop may list (0: on the worker, no bound) */
    bool over;     /* the walk on the loop passed its budget: the worker does it again */
};

static void on_inotify(uv_poll_t *h, int status, int events);
static void handle_events(struct wstream *s, unsigned reads);
static void on_pair_timeout(uv_timer_t *t);
static void wstream_free(struct wstream *s);

/* One more directory descriptor for the job, within the per-stream and global bounds? */
static bool job_take_budget(struct scan_job *j)
{
    if (j->ndirs + map_len(j->added) >= LIMIT_SBD_WATCHES)
        return false;
    if (atomic_fetch_add(&watch_fds, 1) < j->fd_budget)
        return true;
    atomic_fetch_sub(&watch_fds, 1);
    return false;
}

/* Adds the watch of the directory fd (O_PATH, borrowed); *known says whether the stream
 * or the job watched it already. Returns the watch descriptor or a negative errno
 * (-ENOSPC past the bounds). */
static int job_watch(struct scan_job *j, int fd, bool *known)
{
    char proc[64];
    (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(j->ifd, proc, WATCH_MASK);
    if (wd < 0)
        return -errno;
    *known = map_find(j->bywd, (const char *)&wd, sizeof(wd), NULL) ||
             map_find(j->added, (const char *)&wd, sizeof(wd), NULL);
    if (*known)
        return wd;
    if (!job_take_budget(j)) {
        (void)inotify_rm_watch(j->ifd, wd);
        return -ENOSPC;
    }
    (void)map_putn(j->added, (const char *)&wd, sizeof(wd), j, NULL);
    return wd;
}

/* Appends sc to the list. Returns its index. */
static size_t job_add(struct scan_job *j, struct scanned sc)
{
    if (j->n == j->cap) {
        j->cap = j->cap ? j->cap * 2 : 64;
        j->v = xreallocarray(j->v, j->cap, sizeof(*j->v));
    }
    j->v[j->n] = sc;
    return j->n++;
}

static void job_tree(struct scan_job *j, int pfd, const char *name, char *sub, size_t name_at,
                     int parent_wd, unsigned depth, unsigned how);

/* The entries of the directory fd (borrowed) of v[at], at depth: its subdirectories
 * (down to LIMIT_SBD_WATCH_DEPTH) through job_tree, the other entries listed when they
 * are announced. */
static void job_below(struct scan_job *j, int fd, size_t at, unsigned depth, unsigned how)
{
    struct found *v = NULL;
    bool many = false;
    size_t room = j->budget ? j->budget - (j->n < j->budget ? j->n : j->budget) : SIZE_MAX;
    size_t n = scan_dir(fd, &v, &many, room < LIMIT_SBD_LISTING ? room : LIMIT_SBD_LISTING);
    const char *sub = j->v[at].sub; /* (v may move as it grows, the string does not) */
    size_t name_at = *sub ? strlen(sub) + 1 : 0;
    int wd = j->v[at].wd;
    if (many && room < LIMIT_SBD_LISTING)
        j->over = true; /* (not the listing's bound: the budget's) */
    else
        j->v[at].big = many;
    for (size_t i = 0; i < n; i++) {
        bool go = !atomic_load(&j->cancel) && !j->over;
        if (go && v[i].dir && depth < LIMIT_SBD_WATCH_DEPTH)
            job_tree(j, fd, v[i].name, join(sub, v[i].name), name_at, wd, depth + 1,
                     how | TREE_NEW);
        else if (go && (how & TREE_ANNOUNCE))
            (void)job_add(j, (struct scanned){.sub = join(sub, v[i].name),
                                              .name = name_at,
                                              .parent_wd = wd,
                                              .wd = -1,
                                              .fd = -1,
                                              .dir = v[i].dir});
        xfree(v[i].name);
    }
    xfree(v);
}

/* The directory name in pfd (borrowed), at sub (taken), in the watched directory
 * parent_wd: watched, and read unless it is announced and watched already. */
static void job_tree(struct scan_job *j, int pfd, const char *name, char *sub, size_t name_at,
                     int parent_wd, unsigned depth, unsigned how)
{
    size_t at = job_add(j, (struct scanned){.sub = sub,
                                            .name = name_at,
                                            .parent_wd = parent_wd,
                                            .fd = -1,
                                            .dir = true,
                                            .watch = true});
    int fd = open_child(pfd, name);
    bool known = false, announce = how & TREE_ANNOUNCE;
    int wd = fd < 0 ? fd : job_watch(j, fd, &known);
    j->v[at].wd = wd;
    if (wd >= 0 && !known)
        j->v[at].fd = fd;
    if (wd >= 0 && known && announce && (how & TREE_NEW))
        j->v[at].drop = true;
    else if (wd >= 0 && !(known && announce))
        job_below(j, fd, at, depth, how);
    if (fd >= 0 && (wd < 0 || known))
        (void)close(fd);
}

static void scan_work(uv_work_t *w)
{
    struct scan_job *j = w->data;
    job_tree(j, j->pfd, j->name, xstrdup(j->sub), 0, -1, j->depth, j->how);
    if (ioctl(j->ifd, FIONREAD, &j->queued) < 0 || j->queued < 0)
        j->queued = 0;
}

/* Takes a directory the job watched into the stream (sc's members taken). */
static void take_scanned(struct wstream *s, struct scanned *sc)
{
    struct wdir *w = find_wd(s, sc->wd);
    if (w) { /* watched already (a rescan, a rename: under the name found now) */
        if (sc->fd >= 0)
            release_fd(sc->fd);
        xfree(w->sub);
        w->sub = sc->sub;
        w->seen = true;
    } else if (sc->fd >= 0) {
        (void)insert_dir(s, sc->wd, sc->fd, sc->sub);
    } else {
        xfree(sc->sub);
    }
}

/* Takes the next entry of j, sc, into the stream: the name against repeats of its
 * IN_CREATE (take_announced), the watch of a directory, the errors, then its event. */
static void take_one(struct wstream *s, struct scan_job *j, struct scanned *sc)
{
    bool announce = j->how & TREE_ANNOUNCE;
    if (announce && sc->parent_wd >= 0)
        note_announced(s, sc->parent_wd, sc->sub + sc->name);
    json_t *ev = NULL;
    if (sc->parent_wd < 0) {
        ev = j->self;
        j->self = NULL;
    } else if (announce) {
        ev = event_simple("create", sc->sub, sc->dir);
    }
    if (sc->wd == -ENOSPC)
        say_limit(s);
    if (sc->drop) {
        json_decref(ev);
        ev = NULL;
    }
    if (sc->big)
        say_error(s, &s->held_too_many, MSG_TOO_MANY);
    if (ev)
        emit(s, ev);
    if (sc->watch && sc->wd >= 0)
        take_scanned(s, sc);
    else
        xfree(sc->sub);
}

/* A walk on the loop passed its budget: what it did is undone for the worker to do again
 * from the start (the watches it added removed: the worker adds them again, then reads
 * their directories, so nothing made meanwhile is missed). */
static void job_restart(struct scan_job *j)
{
    struct map_iter it;
    const char *key;
    void *value;
    map_foreach (j->added, it, key, value) {
        int wd;
        memcpy(&wd, key, sizeof(wd));
        (void)inotify_rm_watch(j->ifd, wd);
    }
    map_clear(j->added);
    for (size_t i = 0; i < j->n; i++) {
        if (j->v[i].fd >= 0)
            release_fd(j->v[i].fd);
        xfree(j->v[i].sub);
    }
    j->n = 0;
    j->budget = 0;
    j->over = false;
}

/* Frees j and what the stream did not take of it. */
static void job_free(struct scan_job *j)
{
    for (size_t i = j->taken; i < j->n; i++) {
        if (j->v[i].fd >= 0)
            release_fd(j->v[i].fd);
        xfree(j->v[i].sub);
    }
    xfree(j->v);
    map_free(j->added);
    json_decref(j->self);
    xfree(j->name);
    xfree(j->sub);
    xfree(j);
}

/* The first scan is done: "ready", then its errors. */
static void first_scan_end(struct wstream *s)
{
    char *pub = strcmp(s->base, ".") == 0 ? xstrdup("/") : xasprintf("/%s", s->base);
    emit(s, json_pack("{s:s, s:o, s:b}", "type", "ready", "path", sbd_json_name(pub), "recursive",
                      s->recursive));
    xfree(pub);
    s->ready = true;
    say_held(s);
}

/* A job is done (its list taken), full: a scan of the whole tree. The stream goes on with
 * its events, those read before it first. */
static void scan_end(struct wstream *s, bool full)
{
    if (full && s->ready)
        rescan_end(s);
    else if (full)
        first_scan_end(s);
    handle_events(s, 0);
    if (!s->closing && !s->job)
        (void)uv_poll_start(&s->poll, UV_READABLE, on_inotify);
}

/* The stream's job is over (taken, or let go when the stream closed). */
static void job_end(struct wstream *s)
{
    struct scan_job *j = s->job;
    bool full = j->how & TREE_FULL;
    s->job = NULL;
    job_free(j);
    if (!s->closing)
        scan_end(s, full);
    else if (s->handles == 0)
        wstream_free(s); /* (its handles were closed while the job ran) */
}

static void on_more(uv_idle_t *h);

/* Takes the next WATCH_TAKE_BATCH entries of the stream's job, the rest at the next loop
 * turn (on_more); ends the job after the last. */
static void take_some(struct wstream *s)
{
    struct scan_job *j = s->job;
    size_t end = j->n - j->taken > WATCH_TAKE_BATCH ? j->taken + WATCH_TAKE_BATCH : j->n;
    while (j->taken < end && !s->closing)
        take_one(s, j, &j->v[j->taken++]);
    if (s->closing) {
        job_end(s);
        return;
    }
    if (j->taken < j->n) {
        (void)uv_idle_start(&s->more, on_more);
        emit_end(s);
        return;
    }
    (void)uv_idle_stop(&s->more);
    job_end(s);
}

static void on_more(uv_idle_t *h)
{
    struct wstream *s = h->data;
    if (s->job && s->job->done && !s->closing)
        take_some(s);
}

static void scan_done(uv_work_t *w, int status)
{
    struct scan_job *j = w->data;
    struct wstream *s = j->s;
    j->done = true;
    if (s->closing || status < 0) {
        job_end(s);
        return;
    }
    if (j->how & TREE_ANNOUNCE)
        announced_until_queued(s, j->queued);
    take_some(s);
}

/* Starts a job reading the directory name in pfd (borrowed), at sub and depth, reported by
 * self (taken, may be NULL), how: TREE_*. The stream's events wait until it is done. */
static void start_job(struct wstream *s, int pfd, const char *name, const char *sub, unsigned depth,
                      json_t *self, unsigned how)
{
    struct scan_job *j = XNEW(struct scan_job);
    j->work.data = j;
    j->s = s;
    j->self = self;
    j->ifd = s->ifd;
    j->pfd = pfd;
    j->name = xstrdup(name);
    j->sub = xstrdup(sub);
    j->depth = depth;
    j->how = how;
    j->fd_budget = s->fd_budget;
    j->ndirs = s->ndirs;
    j->bywd = s->bywd;
    j->added = map_new(NULL);
    atomic_init(&j->cancel, false);
    s->job = j;
    if (!(how & TREE_FULL)) { /* a small tree (an empty directory made, mostly): here */
        j->budget = WATCH_INLINE_ENTRIES;
        scan_work(&j->work);
        if (!j->over) {
            scan_done(&j->work, 0);
            return;
        }
        job_restart(j);
    }
    (void)uv_poll_stop(&s->poll);
    if (uv_queue_work(http_req_loop(s->req), &j->work, scan_work, scan_done) < 0) {
        scan_work(&j->work); /* here then */
        scan_done(&j->work, 0);
    }
}

/* Reads the whole tree again (recursive) on a worker thread, the stream's events waiting
 * meanwhile; the job's end (or, not recursive, scan_end at once) ends it. */
static void start_scan(struct wstream *s)
{
    s->scanning = true;
    if (!s->recursive) {
        scan_end(s, true);
        return;
    }
    start_job(s, s->base_fd, ".", "", 0, NULL, TREE_FULL);
}

/* ---- events ------------------------------------------------------------------------ */

/* Reports a held IN_MOVED_FROM that got no IN_MOVED_TO. */
static void flush_from(struct wstream *s)
{
    if (!s->has_from)
        return;
    s->has_from = false;
    emit_simple(s, "move_from", s->from, s->from_dir);
    if (s->from_dir && s->recursive)
        drop_subtree(s, s->from);
    xfree(s->from);
    s->from = NULL;
}

/* A directory moved from "from" to "to" (name in the watched directory pfd, borrowed)
 * inside the tree: renames its watches. A watched directory at "to" is told apart by
 * what it is, not by its name: deleted, it is the empty one the rename replaced (no
 * IN_DELETE says so: let go); still there, the rename was a RENAME_EXCHANGE (the two
 * swap names, and the second pair of events, which reports the other half, finds the
 * directory at its name already). Returns whether the moved directory was not watched
 * (its IN_CREATE was read after the rename, when it was gone from its first name). */
static bool move_subtree(struct wstream *s, int pfd, const char *name, const char *from,
                         const char *to)
{
    struct wdir *dst = find_sub(s, to);
    if (dst && is_at(dst, pfd, name))
        return false; /* the second half of an exchange */
    bool watched = find_sub(s, from) != NULL;
    if (dst && dir_deleted(dst)) {
        drop_subtree(s, to);
        dst = NULL;
    }
    if (dst)
        swap_subtrees(s, from, to);
    else
        rename_subtree(s, from, to);
    return !watched;
}

/* The held IN_MOVED_FROM's path was renamed to path, name in the watched directory pfd
 * (its held descriptor). A directory's watches are renamed (move_subtree); one that was
 * not watched is watched now, reported after the move event as a moved-in one is. */
static void on_pair(struct wstream *s, int pfd, const char *name, const char *path, bool is_dir)
{
    char *from = s->from;
    s->from = NULL;
    s->has_from = false;
    json_t *j = event_move(from, path, is_dir);
    if (is_dir && s->recursive && move_subtree(s, pfd, name, from, path))
        add_new_dir(s, pfd, name, path, j, TREE_ANNOUNCE);
    else
        emit(s, j);
    xfree(from);
}

/* An IN_MOVED_TO of path in the watched directory of ev->wd (its held descriptor pfd). */
static void on_moved_to(struct wstream *s, const struct inotify_event *ev, int pfd,
                        const char *path, bool is_dir)
{
    if (s->has_from && s->from_cookie == ev->cookie) {
        on_pair(s, pfd, ev->name, path, is_dir);
        return;
    }
    flush_from(s);
    /* the held move-out just reported may have let go of the directory this event is of
     * (and closed its descriptor): looked up again */
    const struct wdir *w = find_wd(s, ev->wd);
    if (!w)
        return;
    if (is_dir && s->recursive)
        add_new_dir(s, w->fd, ev->name, path, event_simple("move_to", path, true), TREE_ANNOUNCE);
    else
        emit_simple(s, "move_to", path, is_dir);
}

static void on_event(struct wstream *s, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) {
        flush_from(s);
        on_overflow(s);
        return;
    }
    if (map_len(s->announced) && s->read_pos > s->announced_end)
        map_clear(s->announced); /* the events queued by the last scan's end were read */
    struct wdir *w = find_wd(s, ev->wd);
    if (!w)
        return;
    if (ev->mask & IN_IGNORED) {
        bool base = !*w->sub;
        forget_wd(s, ev->wd);
        if (base)
            wstream_close(s); /* the watched directory is gone */
        return;
    }
    bool is_dir = ev->mask & IN_ISDIR;
    if (ev->mask & IN_DELETE_SELF) {
        if (!*w->sub)
            emit_simple(s, "delete", "", true);
        return;
    }
    if (!ev->len)
        return;
    if (!(ev->mask & IN_MOVED_TO)) {
        flush_from(s); /* may let go of w's directory (a held move-out): looked up again */
        if (!(w = find_wd(s, ev->wd)))
            return;
    }
    bool announced = take_announced(s, ev->wd, ev->name);
    if (announced && (ev->mask & IN_CREATE))
        return; /* reported by the scan of a new directory */
    char *path = join(w->sub, ev->name);
    int pfd = w->fd; /* (w may be let go as the event is handled) */
    if (ev->mask & IN_CREATE) {
        if (is_dir && s->recursive)
            add_new_dir(s, pfd, ev->name, path, event_simple("create", path, true),
                        TREE_ANNOUNCE | TREE_NEW);
        else
            emit_simple(s, "create", path, is_dir);
    } else if (ev->mask & IN_MODIFY) {
        emit_simple(s, "modify", path, is_dir);
    } else if (ev->mask & IN_DELETE) {
        emit_simple(s, "delete", path, is_dir);
        if (is_dir && s->recursive)
            drop_subtree(s, path); /* its IN_IGNORED waits for the descriptor held */
    } else if (ev->mask & IN_MOVED_FROM) {
        s->has_from = true;
        s->from_cookie = ev->cookie;
        s->from_dir = is_dir;
        s->from = path;
        path = NULL;
    } else if (ev->mask & IN_MOVED_TO) {
        on_moved_to(s, ev, pfd, path, is_dir);
    }
    xfree(path);
}

/* Handles the events read and not handled yet, then reads again while reads allows
 * (each read up to WATCH_READ_SIZE bytes, at most what the kernel queued). Stops early
 * when the stream closes or a scan starts: the rest waits in rbuf. */
static void handle_events(struct wstream *s, unsigned reads)
{
    size_t size = WATCH_READ_SIZE;
    if (sbd__watch_test_read_size && sbd__watch_test_read_size < size)
        size = sbd__watch_test_read_size;
    if (s->in_events)
        return;
    s->in_events = true;
    while (!s->closing && !s->job) {
        if (s->rpos == s->rlen) {
            if (reads == 0)
                break;
            reads--;
            ssize_t n = read(s->ifd, s->rbuf, size);
            if (n <= 0)
                break;
            s->rpos = 0;
            s->rlen = (size_t)n;
        }
        const struct inotify_event *ev = (const struct inotify_event *)(s->rbuf + s->rpos);
        s->rpos += sizeof(*ev) + ev->len;
        s->read_pos += sizeof(*ev) + ev->len;
        on_event(s, ev);
    }
    s->in_events = false;
    if (s->has_from && !s->closing)
        (void)uv_timer_start(&s->pair, on_pair_timeout, WATCH_PAIR_MS, 0);
    emit_end(s);
}

/* Are events waiting, read or in the kernel's queue? */
static bool events_waiting(const struct wstream *s)
{
    int queued = 0;
    return s->rpos < s->rlen || (ioctl(s->ifd, FIONREAD, &queued) == 0 && queued > 0);
}

/* A held IN_MOVED_FROM's wait is over: it was a move out of the tree, unless events wait
 * (a loop turn that took longer than the wait): the next one decides. */
static void on_pair_timeout(uv_timer_t *t)
{
    struct wstream *s = t->data;
    if (s->closing || s->job || !s->has_from)
        return;
    if (events_waiting(s)) {
        handle_events(s, 1);
        return;
    }
    flush_from(s);
    emit_end(s);
}

/* The inotify descriptor is readable: one read a loop turn (a flood of events, or a queue
 * that waited for a scan, is read over several turns, other requests answered between
 * them; the kernel's queue keeps the rest, and says when it overflowed). */
static void on_inotify(uv_poll_t *h, int status, int events)
{
    struct wstream *s = h->data;
    (void)events;
    if (status < 0) {
        wstream_close(s);
        return;
    }
    handle_events(s, 1);
}

/* ---- lifecycle --------------------------------------------------------------------- */

static void wstream_free(struct wstream *s)
{
    if (s->job) /* (done: a list the stream did not take) */
        job_free(s->job);
    if (s->ifd >= 0)
        (void)close(s->ifd);
    if (s->base_fd >= 0)
        (void)close(s->base_fd);
    for (size_t i = 0; i < s->ndirs; i++) {
        (void)close(s->dirs[i]->fd);
        atomic_fetch_sub(&watch_fds, 1);
        xfree(s->dirs[i]->sub);
        xfree(s->dirs[i]);
    }
    xfree(s->dirs);
    map_free(s->bywd);
    map_free(s->announced);
    xfree(s->from);
    xfree(s->base);
    xfree(s->rbuf);
    sbd_ndjson_done(&s->out);
    http_req_unref(s->req);
    atomic_fetch_sub(&watch_streams, 1);
    if (s->prev)
        s->prev->next = s->next;
    else
        s->d->watches = s->next;
    if (s->next)
        s->next->prev = s->prev;
    xfree(s);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct wstream *s = h->data;
    if (--s->handles == 0 && (!s->job || s->job->done))
        wstream_free(s); /* (else when the job under way is done) */
}

static void wstream_close(struct wstream *s)
{
    if (s->closing)
        return;
    s->closing = true;
    if (!s->out.blocked && !http_req_is_aborted(s->req))
        flush(s); /* the lines of this turn */
    if (s->job)
        atomic_store(&s->job->cancel, true);
    http_req_set_abort_cb(s->req, NULL, NULL);
    http_req_set_drain_cb(s->req, NULL, NULL);
    if (!http_req_is_aborted(s->req))
        (void)http_resp_end(s->req);
    uv_close((uv_handle_t *)&s->poll, on_handle_closed);
    uv_close((uv_handle_t *)&s->timer, on_handle_closed);
    uv_close((uv_handle_t *)&s->pair, on_handle_closed);
    uv_close((uv_handle_t *)&s->more, on_handle_closed);
}

static void on_abort(struct http_req *req, void *ctx)
{
    (void)req;
    wstream_close(ctx);
}

static void on_tick(uv_timer_t *t)
{
    struct wstream *s = t->data;
    if (s->d->shutting_down || http_req_is_aborted(s->req)) {
        wstream_close(s);
        return;
    }
    if (s->job) { /* events are read after the scan */
        sbd__activity_touch(s->d);
        return;
    }
    if (base_gone(s)) {
        handle_events(s, WATCH_DRAIN_READS); /* the events queued before it went first */
        if (s->job)
            return; /* a scan they started: looked at again after it */
        if (!s->closing) {
            flush_from(s);
            emit_simple(s, "delete", "", true);
            wstream_close(s);
        }
        return;
    }
    sbd__activity_touch(s->d); /* an open watch is a client at work (idle policy) */
    if (++s->quiet_ticks < WATCH_HEARTBEAT_TICKS || s->out.blocked || sbd_ndjson_pending(&s->out))
        return;
    s->quiet_ticks = 0; /* a blank line: NDJSON readers skip it */
    if (sbd_ndjson_queue_raw(&s->out, "\n", 1) == 0 && sbd_ndjson_flush(&s->out) < 0)
        wstream_close(s);
}

/* Starts the inotify side of s. Returns 0 or a negative errno. */
static int wstream_setup(struct wstream *s)
{
    s->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (s->ifd < 0)
        return -errno;
    s->base_fd = sbd_path_open(s->d->root, s->base, O_PATH | O_DIRECTORY, 0);
    if (s->base_fd < 0)
        return s->base_fd;
    int fd = fcntl(s->base_fd, F_DUPFD_CLOEXEC, 0);
    int r = fd < 0 ? -errno : watch_base(s, fd);
    if (r < 0)
        return r;
    uv_loop_t *loop = http_req_loop(s->req);
    r = uv_poll_init(loop, &s->poll, s->ifd);
    if (r < 0)
        return r;
    (void)uv_timer_init(loop, &s->timer);
    (void)uv_timer_init(loop, &s->pair);
    (void)uv_idle_init(loop, &s->more);
    s->handles = 4;
    s->poll.data = s;
    s->timer.data = s;
    s->pair.data = s;
    s->more.data = s;
    return 0;
}

/* How many directory descriptors all streams may hold: LIMIT_SBD_WATCH_FDS, or half the
 * open-file limit when that is lower (the rest is for connections and processes). */
static unsigned fd_budget(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur / 2 >= LIMIT_SBD_WATCH_FDS)
        return LIMIT_SBD_WATCH_FDS;
    return (unsigned)(rl.rlim_cur / 2);
}

static struct wstream *wstream_new(struct sbd *d, struct http_req *req, char *base,
                                   const struct sbd_watch_opts *o)
{
    struct wstream *s = XNEW(struct wstream);
    s->d = d;
    s->req = http_req_ref(req);
    s->base = base;
    s->recursive = o->recursive;
    s->queue_max = o->queue;
    s->ifd = -1;
    s->base_fd = -1;
    s->fd_budget = fd_budget();
    s->announced = map_new(NULL);
    s->bywd = map_new(NULL);
    s->rbuf = xmalloc(WATCH_READ_SIZE);
    sbd_ndjson_init(&s->out, req, LIMIT_SBD_WATCH_QUEUE_BYTES);
    atomic_fetch_add(&watch_streams, 1);
    s->next = d->watches;
    if (s->next)
        s->next->prev = s;
    d->watches = s;
    return s;
}

/* Frees s after a failed setup (handles may have been initialised). */
static void wstream_fail(struct wstream *s)
{
    s->closing = true;
    if (s->handles == 0) {
        wstream_free(s);
        return;
    }
    uv_close((uv_handle_t *)&s->timer, on_handle_closed);
    uv_close((uv_handle_t *)&s->pair, on_handle_closed);
    uv_close((uv_handle_t *)&s->poll, on_handle_closed);
    uv_close((uv_handle_t *)&s->more, on_handle_closed);
}

static int respond_open_error(struct http_req *req, int r)
{
    if (r == -ENOTDIR)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, "watch: not a directory");
    if (r == -ENOSPC || r == -EMFILE || r == -ENFILE)
        return sbd_respond_error(req, 429, SBD_RESOURCE_EXHAUSTED, "watch: inotify limits reached");
    return sbd_respond_errno(req, r, "watch");
}

static int watch_get(struct http_req *req, void *ctx)
{
    struct sbd *d = ctx;
    struct sbd_watch_opts o;
    const char *err;
    if (sbd_watch_opts_parse(http_req_query(req), &o, &err) < 0)
        return sbd_respond_error(req, 400, SBD_INVALID_ARGUMENT, err);
    char *rel = NULL;
    if (sbd__req_path(req, d->root, &rel) < 0)
        return 0;
    if (atomic_load(&watch_streams) >= LIMIT_SBD_WATCH_STREAMS) {
        xfree(rel);
        return sbd_respond_error(req, 429, SBD_RESOURCE_EXHAUSTED, "watch: too many streams");
    }
    struct wstream *s = wstream_new(d, req, rel, &o);
    int r = wstream_setup(s);
    if (r < 0) {
        (void)respond_open_error(req, r);
        wstream_fail(s);
        return 0;
    }
    if (str_eq_c(http_req_method(req), "HEAD")) {
        /* answered at its head (the directory is there): a stream would keep it in
         * flight, writing nothing, and wedge the keep-alive connection (and a proxy's
         * pooled one behind it) while holding a slot and the activity */
        r = http_respond(req, 200, "application/x-ndjson", "", 0);
        wstream_fail(s);
        return r;
    }
    r = http_resp_start(req, 200, "application/x-ndjson");
    if (r < 0) {
        wstream_close(s);
        return 0;
    }
    http_req_set_abort_cb(req, on_abort, s);
    http_req_set_drain_cb(req, on_drain, s);
    (void)uv_timer_start(&s->timer, on_tick, WATCH_TICK_MS, WATCH_TICK_MS);
    start_scan(s); /* "ready" at its end, then events */
    return 0;
}

void sbd__watch_shutdown(struct sbd *d)
{
    for (struct wstream *s = d->watches; s; s = s->next)
        wstream_close(s); /* (freed later, when its handles are closed) */
}

int sbd__watch_register(struct sbd *d)
{
    int r = 0;
    r |= sbd__route(d, d->router, "GET", "/v1/watch/", HTTP_ROUTE_PREFIX, watch_get, false);
    return r < 0 ? -EINVAL : 0;
}
