/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox cp: files and directory trees to and from a sandbox over sandboxd's
 * file API (PUT/GET /v1/files/{path}; a directory answers GET with a JSON listing). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "cli/fs.h"
#include "cli/output.h"
#include "cli/sbd.h"
#include "common/limits.h"
#include "common/str.h"
#include "common/xalloc.h"

struct cp_ctx {
    const struct cli_globals *g;
    struct cli_sbd *s;
    unsigned files;     /* copied so far, bounded by max_files */
    unsigned max_files; /* cli_cp_opts.max_entries, else LIMIT_CLI_CP_ENTRIES */
    unsigned page;      /* cli_cp_opts.listing_page (0: sandboxd's default) */
    mode_t umask;       /* applied to downloaded modes, as cp does without -p */
};

/* The download's temporary file, for the signal handler: removed when SIGINT, SIGTERM
 * or SIGHUP ends the copy (the handler only unlinks and re-raises). */
static char tmp_live[PATH_MAX];
static volatile sig_atomic_t tmp_set;

/* The signals that end a copy (tmp_guard, tmp_create). */
static const int stop_sigs[] = {SIGINT, SIGTERM, SIGHUP};

static void on_stop_signal(int sig)
{
    if (tmp_set)
        (void)unlink(tmp_live);
    (void)signal(sig, SIG_DFL);
    (void)raise(sig);
}

/* Records (path) or forgets (NULL) the temporary file the handler removes. The fences
 * keep the compiler from moving the copy of the name across the flag's stores: the
 * handler never sees the flag set over a name being written. */
static void tmp_track(const char *path)
{
    tmp_set = 0;
    atomic_signal_fence(memory_order_seq_cst);
    if (path && strlen(path) < sizeof(tmp_live)) {
        memcpy(tmp_live, path, strlen(path) + 1);
        atomic_signal_fence(memory_order_seq_cst);
        tmp_set = 1;
    }
}

/* mkostemp(tmpl) and tmp_track with the stop signals blocked, so that none arrives
 * between the two and leaves a temporary file the handler does not know of (one that
 * came meanwhile is handled after, and removes the file). Returns the fd, or -1 with
 * errno set. */
static int tmp_create(char *tmpl)
{
    sigset_t stop, old;
    (void)sigemptyset(&stop);
    for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++)
        (void)sigaddset(&stop, stop_sigs[i]);
    (void)pthread_sigmask(SIG_BLOCK, &stop, &old);
    int fd = mkostemp(tmpl, O_CLOEXEC), e = errno;
    tmp_track(fd >= 0 ? tmpl : NULL);
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return fd;
}

/* Installs on_stop_signal for the signals not ignored. */
static void tmp_guard(void)
{
    for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++) {
        struct sigaction old, sa = {.sa_handler = on_stop_signal};
        sigemptyset(&sa.sa_mask);
        if (sigaction(stop_sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            (void)sigaction(stop_sigs[i], &sa, NULL);
    }
}

void cli_help_cp(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox cp LOCAL NAME:PATH\n"
                 "       kubectl-sandbox cp NAME:PATH LOCAL\n\n"
                 "Copies a file or a directory tree to or from sandbox NAME. PATH is relative\n"
                 "to sandboxd's root (a leading / is allowed). A destination ending in / (remote)\n"
                 "or an existing local directory receives the source under its own name\n"
                 "(a source ending in . or .. gives it its contents, as cp -r does).\n"
                 "File modes are kept. A symbolic link named as the source is followed; inside\n"
                 "a tree, symbolic links and empty directories are not copied to the sandbox.\n"
                 "Parent directories are created.\n"
                 "Exit codes: 0 copied, 1 local I/O error or a limit passed (64 levels, 100000\n"
                 "files), 1/2/3 as for every command, 5 sandboxd failed (e.g. no such file in\n"
                 "the sandbox).\n");
}

static int sbd_fail(struct cp_ctx *c, const char *what, const char *path, long status,
                    const struct buf *body, const char *err)
{
    char text[600];
    if (status)
        cli_sbd_error_text(status, body ? body->data : NULL, body ? body->len : 0, text,
                           sizeof(text));
    char *safe = out_safe_dup(path); /* names from a listing come from the sandbox */
    fprintf(c->g->err, "error: cp: %s %s: %s\n", what, safe, status ? text : err);
    xfree(safe);
    return CLI_SBD;
}

/* Counts one more entry of the copy (what: the entries counted, for the message).
 * Returns CLI_OK, or CLI_ERR (printed) when that passes the bound: nothing of the entry
 * is written then. */
static int count_entry(struct cp_ctx *c, const char *what)
{
    if (++c->files <= c->max_files)
        return CLI_OK;
    fprintf(c->g->err, "error: cp: more than %u %s\n", c->max_files, what);
    return CLI_ERR;
}

/* Prints "error: cp: <path> <what>" with path escaped (names can come from a listing,
 * and local names may hold control characters). Returns CLI_ERR. */
static int path_fail(struct cp_ctx *c, const char *path, const char *what)
{
    char *safe = out_safe_dup(path);
    fprintf(c->g->err, "error: cp: %s %s\n", safe, what);
    xfree(safe);
    return CLI_ERR;
}

static int local_fail(struct cp_ctx *c, const char *what, const char *path)
{
    int e = errno;
    char *safe = out_safe_dup(path);
    fprintf(c->g->err, "error: cp: %s %s: %s\n", what, safe, strerror(e));
    xfree(safe);
    return CLI_ERR;
}

/* ---- upload ------------------------------------------------------------------------------ */

static size_t read_fd(char *p, size_t size, size_t n, void *ctx)
{
    ssize_t r;
    do
        r = read(*(int *)ctx, p, size * n);
    while (r < 0 && errno == EINTR);
    return r < 0 ? CURL_READFUNC_ABORT : (size_t)r;
}

static size_t to_buf(char *p, size_t size, size_t n, void *ctx)
{
    (void)buf_append(ctx, p, size * n); /* error bodies: keep what fits */
    return size * n;
}

static int put_file(struct cp_ctx *c, const char *local, const struct stat *st, const char *remote)
{
    if (count_entry(c, "files") != CLI_OK)
        return CLI_ERR;
    int fd = open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return local_fail(c, "cannot open", local);
    struct buf path, resp;
    buf_init(&path, LIMIT_KUBE_URL);
    buf_init(&resp, LIMIT_CLI_SBD_ERROR);
    (void)cli_sbd_files_path(remote, &path);
    (void)buf_printf(&path, "?mode=0%03o", (unsigned)(st->st_mode & 0777));
    CURL *h = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE];
    const char *extra[] = {"Content-Type: application/octet-stream", NULL};
    struct curl_slist *hdrs = NULL;
    curl_mime *mime = NULL;
    (void)cli_sbd_setup(c->s, h, "PUT", buf_str(&path), st->st_size ? extra : NULL, &hdrs, errbuf);
    if (st->st_size) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, read_fd);
        curl_easy_setopt(h, CURLOPT_READDATA, &fd);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st->st_size);
    } else {
        /* an empty body would leave sandboxd waiting: an empty multipart "file" part */
        mime = curl_mime_init(h);
        curl_mimepart *part = curl_mime_addpart(mime);
        curl_mime_name(part, "file");
        curl_mime_data(part, "", 0);
        curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_buf);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    int rc = CLI_OK;
    if (cc != CURLE_OK || status / 100 != 2)
        rc = sbd_fail(c, "cannot write", remote, cc == CURLE_OK ? status : 0, &resp,
                      errbuf[0] ? errbuf : curl_easy_strerror(cc));
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    curl_mime_free(mime);
    buf_done(&path);
    buf_done(&resp);
    (void)close(fd);
    return rc;
}

static int put_tree(struct cp_ctx *c, const char *local, const char *remote, int depth);

/* Uploads local to remote. The source named on the command line (depth 0) is followed
 * when it is a symlink, as cp follows its operands (`cp -rH`), and must be a file or a
 * directory (else exit 1); inside a tree, symlinks and special files are skipped with a
 * warning. */
static int put_entry(struct cp_ctx *c, const char *local, const char *remote, int depth)
{
    struct stat st;
    if ((depth == 0 ? stat(local, &st) : lstat(local, &st)) < 0)
        return local_fail(c, "cannot stat", local);
    if (S_ISREG(st.st_mode))
        return put_file(c, local, &st, remote);
    if (S_ISDIR(st.st_mode))
        return put_tree(c, local, remote, depth + 1);
    if (depth == 0)
        return path_fail(c, local, "is not a regular file or directory");
    char *safe = out_safe_dup(local);
    fprintf(c->g->err, "warning: cp: skipping %s (not a regular file or directory)\n", safe);
    xfree(safe);
    return CLI_OK;
}

static int put_tree(struct cp_ctx *c, const char *local, const char *remote, int depth)
{
    if (depth > LIMIT_CLI_CP_DEPTH)
        return path_fail(c, local, "is nested too deeply");
    DIR *d = opendir(local);
    if (!d)
        return local_fail(c, "cannot open directory", local);
    int rc = CLI_OK;
    struct dirent *de;
    while (rc == CLI_OK && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *l = xasprintf("%s/%s", local, de->d_name);
        char *r = xasprintf("%s%s%s", remote, *remote ? "/" : "", de->d_name);
        rc = put_entry(c, l, r, depth);
        xfree(l);
        xfree(r);
    }
    (void)closedir(d);
    return rc;
}

/* ---- download ---------------------------------------------------------------------------- */

/* The mode of a file whose mode is unknown (a symlink's target with an older sandboxd, a
 * failed stat): private, never wider than the file may have been. */
#define CP_UNKNOWN_MODE 0600

/* "0644" → 0644 (at most 4 octal digits). Returns 0 or -EINVAL. */
static int parse_mode_str(struct str s, mode_t *ret)
{
    mode_t m = 0;
    if (!s.p || s.len == 0 || s.len > 4)
        return -EINVAL;
    for (size_t i = 0; i < s.len; i++) {
        if (s.p[i] < '0' || s.p[i] > '7')
            return -EINVAL;
        m = (mode_t)(m << 3 | (mode_t)(s.p[i] - '0'));
    }
    *ret = m & 0777;
    return 0;
}

/* parse_mode_str of a C string (NULL gives -EINVAL). */
static int parse_mode(const char *s, mode_t *ret)
{
    return s ? parse_mode_str(str_c(s), ret) : -EINVAL;
}

/* A file arrives in a temporary file beside its destination (0600, never an existing
 * file), gets the remote mode and is renamed over the destination once complete: a
 * transfer that fails leaves an existing local file as it was. */
struct getter {
    struct cp_ctx *c;
    CURL *h;
    const char *local;
    char *dest;    /* where the file goes: local, or the file a local symlink names (owned) */
    char *tmp;     /* the temporary file (owned), NULL until the first byte */
    int fd;        /* tmp open for writing, -1 before */
    bool listing;  /* the answer is a directory listing */
    bool has_mode; /* sandboxd sent X-File-Mode */
    mode_t mode;   /* its value: the mode of the file served (after any symlink) */
    bool dangling; /* local is a symlink to nothing: nothing is written */
    long status;
    struct buf body; /* listing or error body */
    int local_err;   /* errno of a local failure */
};

/* Header lines of the answer: X-File-Mode into x->mode; a new status line (the next
 * answer after a 100 Continue or a redirect) forgets an earlier one. */
static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    struct getter *x = ctx;
    struct str line = str_make(p, size * n), name, value;
    if (str_has_prefix(line, STR_LIT("HTTP/")))
        x->has_mode = false;
    else if (str_cut(line, ':', &name, &value) &&
             str_eq_nocase(str_trim(name), STR_LIT("X-File-Mode")))
        x->has_mode = parse_mode_str(str_trim(value), &x->mode) == 0;
    return size * n;
}

/* Where a download to local goes, in *ret (new): through a symlink to the file it names
 * (as cp writes through one), else local itself. Returns 0 or a negative errno of
 * resolving the symlink: -ENOENT when it is dangling (cp refuses to write through one,
 * and replacing the link with a file would not be what it names either). */
static int dest_of(const char *local, char **ret)
{
    struct stat st;
    char real[PATH_MAX];
    if (lstat(local, &st) < 0 || !S_ISLNK(st.st_mode)) {
        *ret = xstrdup(local);
        return 0;
    }
    if (!realpath(local, real))
        return -errno;
    *ret = xstrdup(real);
    return 0;
}

/* Creates x->tmp, "DIR/.NAME.cp-XXXXXX" beside the destination (NAME cut to 200 bytes,
 * so a name near NAME_MAX still fits), exclusively with mode 0600. Returns the fd, or -1
 * with x->local_err (and x->dangling) set. */
static int open_local(struct getter *x)
{
    int r = dest_of(x->local, &x->dest);
    if (r < 0) {
        x->local_err = -r;
        x->dangling = r == -ENOENT;
        return -1;
    }
    char *dir = xstrdup(x->dest), *base = xstrdup(x->dest);
    x->tmp = xasprintf("%s/.%.200s.cp-XXXXXX", dirname(dir), basename(base));
    xfree(dir);
    xfree(base);
    x->fd = tmp_create(x->tmp);
    if (x->fd < 0) {
        x->local_err = errno;
        XFREE(x->tmp);
    }
    return x->fd;
}

static size_t on_get(char *p, size_t size, size_t n, void *ctx)
{
    struct getter *x = ctx;
    if (x->status == 0) {
        char *ct = NULL;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
        curl_easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ct);
        x->listing = x->status == 200 && ct && !strncmp(ct, "application/json", 16);
    }
    if (x->status != 200 || x->listing)
        return buf_append(&x->body, p, size * n) == 0 || x->status != 200 ? size * n : 0;
    if (x->fd < 0 && open_local(x) < 0)
        return 0;
    for (size_t off = 0; off < size * n;) {
        ssize_t w = write(x->fd, p + off, size * n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            x->local_err = w < 0 ? errno : EIO;
            return 0;
        }
        off += (size_t)w;
    }
    return size * n;
}

static int get_path(struct cp_ctx *c, const char *remote, const char *local, const char *mode,
                    int depth);

/* The mode sandboxd's GET /v1/stat gives for the regular file remote (a sandboxd without
 * X-File-Mode). Its stat describes a symlink itself (lstat), not the file read through
 * it: for a link, and when the stat fails, CP_UNKNOWN_MODE. */
static mode_t stat_mode(struct cp_ctx *c, const char *remote)
{
    mode_t m;
    struct buf path, resp;
    buf_init(&path, LIMIT_KUBE_URL);
    buf_init(&resp, LIMIT_CLI_SBD_JSON);
    long status = 0;
    char err[CURL_ERROR_SIZE + 200];
    int r = cli_fs_api_path("/v1/stat/", remote, &path);
    if (r == 0)
        r = cli_sbd_call(c->s, "GET", buf_str(&path), NULL, 0, NULL, &resp, &status, err,
                         sizeof(err));
    json_t *j =
        r == 0 && status == 200 ? json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL) : NULL;
    const char *type = json_string_value(json_object_get(j, "type"));
    if (!type || strcmp(type, "file") != 0 ||
        parse_mode(json_string_value(json_object_get(j, "mode")), &m) < 0)
        m = CP_UNKNOWN_MODE;
    json_decref(j);
    buf_done(&path);
    buf_done(&resp);
    return m;
}

/* The local mode of a downloaded entry of remote mode m: its permission bits (never
 * setuid, setgid or sticky from the sandbox) less the umask, as cp without -p. */
static mode_t local_mode(const struct cp_ctx *c, mode_t m)
{
    return m & 0777 & ~c->umask;
}

/* Fetches the entries of one listing page of j into local. */
static int get_entries(struct cp_ctx *c, const char *remote, const char *local, json_t *j,
                       int depth)
{
    int rc = CLI_OK;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(j, "entries"), i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
            continue; /* never let a listing write outside local */
        char *r = xasprintf("%s%s%s", remote, *remote ? "/" : "", name);
        char *l = xasprintf("%s/%s", local, name);
        rc = get_path(c, r, l, json_string_value(json_object_get(e, "mode")), depth + 1);
        xfree(r);
        xfree(l);
        if (rc != CLI_OK)
            break;
    }
    return rc;
}

/* The listing page of remote after token (a directory larger than one page). Returns
 * the page (new) or NULL after printing why not. */
static json_t *next_page(struct cp_ctx *c, const char *remote, const char *token)
{
    struct buf path, resp;
    buf_init(&path, LIMIT_KUBE_URL);
    buf_init(&resp, LIMIT_CLI_SBD_JSON);
    long status = 0;
    char err[CURL_ERROR_SIZE + 200] = "";
    json_t *j = NULL;
    int r = cli_sbd_files_path(remote, &path);
    if (r == 0)
        r = buf_printf(&path, "?continue=%s", token);
    if (r == 0 && c->page)
        r = buf_printf(&path, "&limit=%u", c->page);
    if (r == 0)
        r = cli_sbd_call(c->s, "GET", buf_str(&path), NULL, 0, NULL, &resp, &status, err,
                         sizeof(err));
    if (r == 0 && status == 200)
        j = json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL);
    if (!j)
        (void)sbd_fail(c, "cannot list", remote, r == 0 ? status : 0, &resp,
                       err[0] ? err : "not a directory listing");
    buf_done(&path);
    buf_done(&resp);
    return j;
}

/* Whether page j of a listing may be followed by the page of its "continue" token (prev:
 * the token that asked for j, or ""): a token names the page's last entry, so tokens
 * only grow (hex keeps the names' byte order), and a page that holds nothing cannot be
 * followed. *seen counts the entries of the pages so far (skipped names too), bounded as
 * the copy's entries are. Returns CLI_OK or prints why not (a sandboxd that would keep
 * cp listing for ever). */
static int page_advances(struct cp_ctx *c, const char *remote, const json_t *j, const char *prev,
                         const char *token, size_t *seen)
{
    size_t n = json_array_size(json_object_get(j, "entries"));
    *seen += n;
    if (n == 0 || strspn(token, "0123456789abcdef") != strlen(token) || strcmp(token, prev) <= 0)
        return path_fail(c, remote, "has a listing whose pages do not advance");
    if (*seen > c->max_files) {
        fprintf(c->g->err, "error: cp: more than %u files and directories\n", c->max_files);
        return CLI_ERR;
    }
    return CLI_OK;
}

/* Creates local as a directory (*ret_made: it was not there) and fetches every entry
 * of the listing (body, its first page, released once read; the pages after it by
 * their "continue" token) into it. */
static int get_listing(struct cp_ctx *c, const char *remote, const char *local, struct buf *body,
                       int depth, bool *ret_made)
{
    *ret_made = false;
    if (depth > LIMIT_CLI_CP_DEPTH)
        return path_fail(c, remote, "is nested too deeply");
    json_t *j = json_loadb(body->data ? body->data : "", body->len, 0, NULL);
    buf_done(body); /* not held while the tree below is fetched */
    if (mkdir(local, 0755) == 0) {
        *ret_made = true;
    } else if (errno != EEXIST) {
        json_decref(j);
        return local_fail(c, "cannot create directory", local);
    }
    int rc = CLI_OK;
    char *prev = xstrdup("");
    size_t seen = 0;
    while (j && rc == CLI_OK) {
        /* a page is at most sandboxd's page (what each level of the tree holds while
         * the levels below it are fetched) */
        if (json_array_size(json_object_get(j, "entries")) > LIMIT_SBD_LISTING)
            rc = path_fail(c, remote, "has a listing page over 10000 entries");
        else
            rc = get_entries(c, remote, local, j, depth);
        const char *token = json_string_value(json_object_get(j, "continue"));
        json_t *next = NULL;
        if (rc == CLI_OK && token && *token)
            rc = page_advances(c, remote, j, prev, token, &seen);
        if (rc == CLI_OK && token && *token) {
            next = next_page(c, remote, token);
            if (!next)
                rc = CLI_SBD;
            xfree(prev);
            prev = xstrdup(token);
        }
        json_decref(j);
        j = next;
    }
    json_decref(j);
    xfree(prev);
    return rc;
}

/* The remote mode of the file x downloaded from remote: X-File-Mode, which describes the
 * file served (after any symlink) when it was served; else mode (from the parent's
 * listing, which follows symlinks too); else stat_mode. */
static mode_t remote_mode(const struct getter *x, const char *remote, const char *mode)
{
    mode_t m;
    if (x->has_mode)
        return x->mode;
    if (parse_mode(mode, &m) == 0)
        return m;
    return stat_mode(x->c, remote);
}

/* After a complete transfer of a file: gives the temporary file the remote mode and
 * renames it over x->local. Returns CLI_OK or prints why not. */
static int commit_file(struct getter *x, const char *remote, const char *mode)
{
    struct stat old;
    mode_t m = local_mode(x->c, remote_mode(x, remote, mode));
    /* over an existing file: never more open than it was, nor than the sandbox's (a
     * private local file stays private, a private remote one arrives private) */
    if (stat(x->dest, &old) == 0 && S_ISREG(old.st_mode))
        m &= old.st_mode & 0777;
    int fd = x->fd;
    x->fd = -1;
    int r = fchmod(fd, m), e = errno;
    if (close(fd) < 0 && r == 0) { /* a delayed write error (NFS, quota) shows here */
        r = -1;
        e = errno;
    }
    if (r < 0) {
        errno = e;
        return local_fail(x->c, "cannot write", x->local);
    }
    if (rename(x->tmp, x->dest) < 0)
        return local_fail(x->c, "cannot write", x->local);
    tmp_track(NULL);
    XFREE(x->tmp);
    return CLI_OK;
}

/* The outcome of one GET: a local or remote failure, a listing to fetch, or a file to
 * move into place. */
static int get_finish(struct getter *x, const char *remote, const char *mode, CURLcode cc,
                      const char *errbuf, int depth)
{
    if (x->dangling) {
        char *safe = out_safe_dup(x->local);
        fprintf(x->c->g->err, "error: cp: not writing through dangling symlink %s\n", safe);
        xfree(safe);
        return CLI_ERR;
    }
    if (x->local_err) {
        errno = x->local_err;
        return local_fail(x->c, "cannot write", x->local);
    }
    if (cc != CURLE_OK || x->status != 200)
        return sbd_fail(x->c, "cannot read", remote, cc == CURLE_OK ? x->status : 0, &x->body,
                        errbuf[0] ? errbuf : curl_easy_strerror(cc));
    if (!x->listing)
        return commit_file(x, remote, mode);
    bool made;
    struct stat old;
    int rc = get_listing(x->c, remote, x->local, &x->body, depth, &made);
    mode_t m;
    if (rc == CLI_OK && parse_mode(mode, &m) == 0) {
        m = local_mode(x->c, m);
        if (!made && stat(x->local, &old) == 0) /* an existing one: never more open */
            m &= old.st_mode & 0777;
        (void)chmod(x->local, m);
    }
    return rc;
}

/* Fetches remote (a file or a directory tree) to local; mode is remote's mode from its
 * parent's listing, or NULL. */
static int get_path(struct cp_ctx *c, const char *remote, const char *local, const char *mode,
                    int depth)
{
    if (count_entry(c, "files and directories") != CLI_OK)
        return CLI_ERR;
    struct getter x = {.c = c, .local = local, .fd = -1};
    struct buf path;
    buf_init(&path, LIMIT_KUBE_URL);
    buf_init(&x.body, LIMIT_CLI_SBD_JSON);
    (void)cli_sbd_files_path(remote, &path);
    if (c->page) /* a file's GET ignores it */
        (void)buf_printf(&path, "?limit=%u", c->page);
    x.h = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = NULL;
    (void)cli_sbd_setup(c->s, x.h, "GET", buf_str(&path), NULL, &hdrs, errbuf);
    curl_easy_setopt(x.h, CURLOPT_WRITEFUNCTION, on_get);
    curl_easy_setopt(x.h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(x.h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x.h, CURLOPT_HEADERDATA, &x);
    /* a download that stalls fails instead of holding cp for ever */
    curl_easy_setopt(x.h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(x.h, CURLOPT_LOW_SPEED_TIME, (long)(LIMIT_SBD_CALL_STALL / USEC_PER_SEC));
    CURLcode cc = curl_easy_perform(x.h);
    if (cc == CURLE_OK && x.status == 0) { /* an empty body: no write call */
        curl_easy_getinfo(x.h, CURLINFO_RESPONSE_CODE, &x.status);
        if (x.status == 200)
            (void)open_local(&x);
    }
    int rc = get_finish(&x, remote, mode, cc, errbuf, depth);
    if (x.fd >= 0)
        (void)close(x.fd);
    if (x.tmp) /* not renamed into place: the destination stays as it was */
        (void)unlink(x.tmp);
    tmp_track(NULL);
    xfree(x.tmp);
    xfree(x.dest);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(x.h);
    buf_done(&path);
    buf_done(&x.body);
    return rc;
}

/* ---- arguments ----------------------------------------------------------------------------- */

/* "NAME:PATH" → name and path; a local path has no ':' before its first '/'. */
static bool split_remote(const char *arg, char *name, size_t size, const char **ret_path)
{
    const char *colon = strchr(arg, ':');
    const char *slash = strchr(arg, '/');
    if (!colon || (slash && slash < colon))
        return false;
    (void)snprintf(name, size, "%.*s", (int)(colon - arg), arg);
    *ret_path = colon + 1;
    return true;
}

/* Whether base (a base_name) names its directory itself: ".", ".." or "/". Copied
 * into a directory it goes into that directory, not into one of that name (GNU cp -r:
 * `cp -r d/.. dst` fills dst). */
static bool names_dir_itself(const char *base)
{
    return !*base || !strcmp(base, "/") || !strcmp(base, ".") || !strcmp(base, "..");
}

static char *base_name(const char *path)
{
    char *copy = xstrdup(path), *b;
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/')
        copy[--n] = '\0';
    b = xstrdup(basename(copy));
    xfree(copy);
    return b;
}

static int upload(struct cp_ctx *c, const char *local, const char *remote)
{
    char *target;
    size_t n = strlen(remote);
    if (n == 0 || remote[n - 1] == '/') {
        char *b = base_name(local);
        while (names_dir_itself(b) && n > 0 && remote[n - 1] == '/')
            n--; /* "d/" itself: no "d/.." nor "d//x" */
        target = names_dir_itself(b) ? xstrndup(remote, n) : xasprintf("%s%s", remote, b);
        xfree(b);
    } else {
        target = xstrdup(remote);
    }
    int rc = put_entry(c, local, target, 0);
    xfree(target);
    return rc;
}

static int download(struct cp_ctx *c, const char *remote, const char *local)
{
    struct stat st;
    char *target;
    if (stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
        char *b = base_name(remote);
        target = !*remote || names_dir_itself(b) ? xstrdup(local) : xasprintf("%s/%s", local, b);
        xfree(b);
    } else {
        target = xstrdup(local);
    }
    c->umask = umask(0);
    (void)umask(c->umask);
    tmp_guard();
    int rc = get_path(c, remote, target, NULL, 0);
    xfree(target);
    return rc;
}

int cli_cmd_cp(struct cli_globals *g, int argc, char **argv)
{
    return cli_cp_run(g, NULL, argc, argv);
}

int cli_cp_run(struct cli_globals *g, const struct cli_cp_opts *o, int argc, char **argv)
{
    int a = 1;
    if (a < argc && !strcmp(argv[a], "--"))
        a++;
    if (argc - a != 2) {
        cli_help_cp(g->err);
        return CLI_USAGE;
    }
    char sname[256], dname[256];
    const char *spath, *dpath;
    bool src_remote = split_remote(argv[a], sname, sizeof(sname), &spath);
    bool dst_remote = split_remote(argv[a + 1], dname, sizeof(dname), &dpath);
    if (src_remote == dst_remote) {
        fprintf(g->err, "error: cp: exactly one of SRC and DST must be NAME:PATH\n");
        return CLI_USAGE;
    }
    struct cp_ctx c = {.g = g,
                       .max_files = o && o->max_entries ? o->max_entries : LIMIT_CLI_CP_ENTRIES,
                       .page = o ? o->listing_page : 0};
    int rc = cli_sbd_open(g, src_remote ? sname : dname, &c.s);
    if (rc != CLI_OK)
        return rc;
    rc = src_remote ? download(&c, spath, argv[a + 1]) : upload(&c, argv[a], dpath);
    cli_sbd_free(c.s);
    return rc;
}
