/* SPDX-License-Identifier: Apache-2.0 */
/* Lexical cleaning of user paths and openat2-based confined opens (see path.h). */
#include "sandboxd/path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/xalloc.h"

struct sbd_root {
    int fd;
    char *path;
};

/* mkdir -p with 0755; existing directories are fine. */
static int mkdir_parents(const char *path)
{
    char *p = xstrdup(path);
    int r = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST) {
            r = -errno;
            break;
        }
        *s = saved;
        if (!saved)
            break;
    }
    xfree(p);
    return r;
}

int sbd_root_open(const char *path, bool create, struct sbd_root **ret)
{
    if (!path || !*path)
        return -EINVAL;
    if (create && path[0] == '/') {
        int r = mkdir_parents(path);
        if (r < 0)
            return r;
    }
    char real[PATH_MAX];
    if (!realpath(path, real))
        return -errno;
    int fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int r = fd < 0 ? -errno : 0;
    if (r == 0) {
        struct sbd_root *root = XNEW(struct sbd_root);
        root->fd = fd;
        root->path = xstrdup(real);
        *ret = root;
    }
    return r;
}

void sbd_root_free(struct sbd_root *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        (void)close(r->fd);
    xfree(r->path);
    xfree(r);
}

int sbd_root_fd(const struct sbd_root *r)
{
    return r->fd;
}

const char *sbd_root_path(const struct sbd_root *r)
{
    return r->path;
}

/* Pushes component c onto the cleaned path in out ("" means the root). Returns 0 or
 * -EPERM when ".." climbs above the root of a relative path. */
static int push_component(struct buf *out, struct str c, bool absolute)
{
    if (c.len == 0 || str_eq_c(c, "."))
        return 0;
    if (str_eq_c(c, "..")) {
        if (out->len == 0)
            return absolute ? 0 : -EPERM;
        char *slash = memrchr(out->data, '/', out->len);
        size_t keep = slash ? (size_t)(slash - out->data) : 0;
        out->len = keep;
        out->data[keep] = '\0';
        return 0;
    }
    if (out->len && buf_putc(out, '/') < 0)
        return -ENAMETOOLONG;
    return buf_append(out, c.p, c.len) < 0 ? -ENAMETOOLONG : 0;
}

static int clean_components(struct str in, bool absolute, struct buf *out)
{
    struct str rest = in, c;
    while (rest.len) {
        if (!str_cut(rest, '/', &c, &rest))
            rest = STR_NULL;
        int r = push_component(out, c, absolute);
        if (r < 0)
            return r;
    }
    return 0;
}

/* For an absolute cleaned path (without its leading '/'), drops the root prefix. */
static const char *strip_root(const char *clean, const char *root_path)
{
    if (!root_path)
        return clean;
    while (*root_path == '/')
        root_path++;
    size_t n = strlen(root_path);
    if (n == 0)
        return clean;
    if (strncmp(clean, root_path, n) != 0)
        return clean;
    if (clean[n] == '\0')
        return "";
    return clean[n] == '/' ? clean + n + 1 : clean;
}

int sbd_path_clean(const char *root_path, struct str in, char **ret)
{
    if (in.len && memchr(in.p, '\0', in.len))
        return -EINVAL;
    if (in.len > LIMIT_SBD_PATH)
        return -ENAMETOOLONG;
    bool absolute = in.len && in.p[0] == '/';
    struct buf out;
    buf_init(&out, LIMIT_SBD_PATH);
    (void)buf_puts(&out, "");
    int r = clean_components(in, absolute, &out);
    if (r < 0) {
        buf_done(&out);
        return r;
    }
    const char *rel = absolute ? strip_root(buf_str(&out), root_path) : buf_str(&out);
    *ret = xstrdup(*rel ? rel : ".");
    buf_done(&out);
    return 0;
}

static int map_resolve_err(int e)
{
    return e == EXDEV ? -EPERM : -e;
}

int sbd_path_open(const struct sbd_root *root, const char *rel, int flags, mode_t mode)
{
    struct open_how how = {
        .flags = (unsigned long long)(flags | O_CLOEXEC),
        .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    for (int i = 0; i < LIMIT_SBD_OPEN_RETRIES; i++) {
        long fd = syscall(SYS_openat2, root->fd, rel, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if (errno != EAGAIN && errno != EINTR)
            return map_resolve_err(errno);
    }
    return -EAGAIN;
}

int sbd_path_open_read(const struct sbd_root *root, const char *rel)
{
    struct stat a, b;
    int p = sbd_path_open(root, rel, O_PATH, 0), fd;
    if (p < 0)
        return p;
    int r = fstat(p, &a) < 0 ? -errno : 0;
    (void)close(p);
    if (r < 0)
        return r;
    if (!S_ISREG(a.st_mode) && !S_ISDIR(a.st_mode))
        return -ENXIO;
    fd = sbd_path_open(root, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0)
        return fd;
    if (fstat(fd, &b) < 0 || b.st_dev != a.st_dev || b.st_ino != a.st_ino) {
        (void)close(fd); /* replaced between the two opens */
        return -EAGAIN;
    }
    return fd;
}

/* One directory of the chain below made->top, in order: made by this call (ours, with
 * its identity) or by someone else meanwhile (passed through, never removed). */
struct made_step {
    char *name;
    bool ours;
    dev_t dev;
    ino_t ino;
};

/* The directories made for one path: a chain that starts in top, the deepest directory
 * that existed (its only descriptor held: a path may make ~2,000 of them, and each upload
 * keeps its record until it ends). */
struct sbd_path_made {
    int top; /* O_PATH; -1 until the first directory is made */
    struct made_step *v;
    size_t n, cap;
};

static struct sbd_path_made *made_new(void)
{
    struct sbd_path_made *m = XNEW(struct sbd_path_made);
    m->top = -1;
    return m;
}

/* Appends name to m's chain (ours: just made by this call; its identity read in pfd). */
static void made_step(struct sbd_path_made *m, int pfd, const char *name, bool ours)
{
    struct stat st;
    if (ours && (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)))
        ours = false; /* replaced at once: not ours to remove */
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 4;
        m->v = xreallocarray(m->v, m->cap, sizeof(*m->v));
    }
    m->v[m->n++] = (struct made_step){.name = xstrdup(name),
                                      .ours = ours,
                                      .dev = ours ? st.st_dev : 0,
                                      .ino = ours ? st.st_ino : 0};
}

/* Records name, just found (made: by this call) in pfd (taken): the chain starts at the
 * first directory made, in its parent. */
static void made_add(struct sbd_path_made *m, int pfd, const char *name, bool made)
{
    if (m->top < 0 && !made) {
        (void)close(pfd);
        return;
    }
    made_step(m, pfd, name, made);
    if (m->top < 0)
        m->top = pfd;
    else
        (void)close(pfd);
}

void sbd_path_made_free(struct sbd_path_made *m)
{
    if (!m)
        return;
    if (m->top >= 0)
        (void)close(m->top);
    for (size_t i = 0; i < m->n; i++)
        xfree(m->v[i].name);
    xfree(m->v);
    xfree(m);
}

void sbd_path_made_undo(struct sbd_path_made *m)
{
    if (!m || m->top < 0) {
        sbd_path_made_free(m);
        return;
    }
    /* Walk the chain down from top without following links, each directory made checked
     * to be the one made; stop where it is not (or at EMFILE: only the shallower ones are
     * tried then, and rmdir leaves those not empty). */
    int *fd = xcalloc(m->n + 1, sizeof(int));
    size_t k = 0;
    fd[0] = m->top;
    for (; k < m->n; k++) {
        const struct made_step *d = &m->v[k];
        struct stat st;
        int f = openat(fd[k], d->name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (f >= 0 && d->ours &&
            (fstat(f, &st) < 0 || st.st_dev != d->dev || st.st_ino != d->ino)) {
            (void)close(f);
            f = -1;
        }
        if (f < 0)
            break;
        fd[k + 1] = f;
    }
    while (k-- > 0) { /* deepest first; fd[k + 1] is v[k] itself */
        (void)close(fd[k + 1]);
        if (m->v[k].ours)
            (void)unlinkat(fd[k], m->v[k].name, AT_REMOVEDIR);
    }
    xfree(fd);
    sbd_path_made_free(m);
}

/* Makes the missing directory dir (0755), whose parent exists; records it in made (may be
 * NULL; also when someone else made it meanwhile, as passed through). Returns 0 or a
 * negative errno. */
static int make_dir(const struct sbd_root *root, const char *dir, struct sbd_path_made *made)
{
    const char *name = dir;
    int pfd = strchr(dir, '/') ? sbd_path_open_parent(root, dir, false, &name)
                               : sbd_path_open(root, ".", O_PATH | O_DIRECTORY, 0);
    if (pfd < 0)
        return pfd;
    int r = mkdirat(pfd, name, 0755) < 0 ? -errno : 0;
    if (r < 0 && r != -EEXIST) {
        (void)close(pfd);
        return r;
    }
    if (made)
        made_add(made, pfd, name, r == 0);
    else
        (void)close(pfd);
    return 0;
}

/* Records in made (may be NULL) the existing directory dir, passed through after the
 * chain of made ones started (someone else made it meanwhile). */
static void made_pass(const struct sbd_root *root, const char *dir, struct sbd_path_made *made)
{
    if (!made || made->top < 0)
        return;
    const char *name = dir;
    int pfd = strchr(dir, '/') ? sbd_path_open_parent(root, dir, false, &name)
                               : sbd_path_open(root, ".", O_PATH | O_DIRECTORY, 0);
    if (pfd >= 0)
        made_add(made, pfd, name, false);
}

/* Opens (creating when missing, recorded in made: may be NULL) every directory of dir,
 * one prefix at a time. */
static int open_dirs_creating(const struct sbd_root *root, char *dir, struct sbd_path_made *made)
{
    for (char *s = dir;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        int fd = sbd_path_open(root, dir, O_PATH | O_DIRECTORY, 0);
        if (fd == -ENOENT) {
            int mr = make_dir(root, dir, made);
            if (mr < 0)
                return mr;
            fd = sbd_path_open(root, dir, O_PATH | O_DIRECTORY, 0);
        } else if (fd >= 0) {
            made_pass(root, dir, made);
        }
        *s = saved;
        if (fd < 0 || !saved)
            return fd;
        (void)close(fd);
    }
}

static int open_parent(const struct sbd_root *root, const char *rel, bool create,
                       struct sbd_path_made *made, const char **ret_name)
{
    if (!*rel || strcmp(rel, ".") == 0)
        return -EINVAL;
    const char *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    if (!*name || strcmp(name, "..") == 0 || strcmp(name, ".") == 0)
        return -EINVAL;
    char *dir = slash ? xstrndup(rel, (size_t)(slash - rel)) : xstrdup(".");
    int fd = sbd_path_open(root, dir, O_PATH | O_DIRECTORY, 0);
    if (fd == -ENOENT && create && slash)
        fd = open_dirs_creating(root, dir, made);
    xfree(dir);
    if (fd >= 0)
        *ret_name = name;
    return fd;
}

int sbd_path_open_parent(const struct sbd_root *root, const char *rel, bool create,
                         const char **ret_name)
{
    return open_parent(root, rel, create, NULL, ret_name);
}

int sbd_path_open_parent_made(const struct sbd_root *root, const char *rel, const char **ret_name,
                              struct sbd_path_made **ret_made)
{
    struct sbd_path_made *made = made_new();
    int fd = open_parent(root, rel, true, made, ret_name);
    if (fd < 0) {
        sbd_path_made_undo(made);
        made = NULL;
    } else if (made->n == 0) {
        sbd_path_made_free(made);
        made = NULL;
    }
    *ret_made = made;
    return fd;
}

bool sbd_path_err_is_denied(int err)
{
    return err == -EPERM || err == -EACCES || err == -EXDEV || err == -ELOOP;
}
