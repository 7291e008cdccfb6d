/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox stat / mkdir / mv / watch: sandboxd's filesystem operations
 * (GET /v1/stat/{path}, POST /v1/mkdir/{path}, POST /v1/move, GET /v1/watch/{path}). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/fs.h"
#include "cli/output.h"
#include "cli/sbd.h"
#include "cli/stream.h"
#include "common/limits.h"
#include "common/xalloc.h"

void cli_help_stat(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox stat NAME PATH [-L] [-o json]\n\n"
                 "Describes PATH in sandbox NAME: type (file, directory, symlink, other), size,\n"
                 "mode, modification time and a symlink's target (not followed).\n"
                 "-L/--dereference describes what a symlink leads to instead (every link\n"
                 "followed, confined to the sandbox's root: a link out of it is refused).\n"
                 "Exit codes: 0 ok, 1/2/3 as for every command, 5 sandboxd failed (e.g. no such\n"
                 "path, a dangling link with -L).\n");
}

void cli_help_mkdir(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox mkdir NAME PATH [-p] [--mode 0750]\n\n"
                 "Creates directory PATH in sandbox NAME. -p/--parents creates missing parents\n"
                 "and accepts an existing directory.\n"
                 "Exit codes: 0 ok, 1/2/3 as for every command, 5 sandboxd failed (exists, file\n"
                 "in the way, ...).\n");
}

void cli_help_mv(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox mv NAME SRC DST [-f]\n\n"
                 "Renames SRC to DST inside sandbox NAME (DST's parent must exist). An existing\n"
                 "DST is replaced only with -f/--force.\n"
                 "Exit codes: 0 ok, 1/2/3 as for every command, 5 sandboxd failed.\n");
}

void cli_help_watch(FILE *out)
{
    fprintf(out, "Usage: kubectl-sandbox watch NAME [PATH] [-r] [-o json]\n\n"
                 "Prints the changes under directory PATH (default: the root) of sandbox NAME\n"
                 "as they happen, one per line (\"create  src/a.py\", \"move  a -> b\"), until\n"
                 "interrupted or the directory is deleted. -r/--recursive includes\n"
                 "subdirectories; -o json prints sandboxd's NDJSON events as they are.\n"
                 "Exit codes: 0 ended, 1 the output could not be written, 1/2/3 as for every\n"
                 "command, 5 sandboxd failed.\n");
}

int cli_fs_api_path(const char *prefix, const char *path, struct buf *out)
{
    struct buf tmp;
    buf_init(&tmp, out->limit);
    int r = cli_sbd_files_path(path, &tmp);
    if (r == 0)
        r = buf_puts(out, prefix);
    if (r == 0) /* the escaped path after "/v1/files/" */
        r = buf_puts(out, buf_str(&tmp) + strlen("/v1/files/"));
    buf_done(&tmp);
    return r;
}

/* The string member key of j, "" when absent. */
static const char *jstr(const json_t *j, const char *key)
{
    const char *v = json_string_value(json_object_get(j, key));
    return v ? v : "";
}

/* The line of a watch event, unsafe and without its "\n", into line. */
static int event_line(const json_t *ev, const char *type, struct buf *line)
{
    const char *path = json_string_value(json_object_get(ev, "path"));
    bool dir = json_is_true(json_object_get(ev, "is_dir"));
    if (strcmp(type, "move") == 0)
        return buf_printf(line, "%-9s %s%s -> %s", type, jstr(ev, "from"), dir ? "/" : "",
                          jstr(ev, "to"));
    if (strcmp(type, "overflow") == 0) {
        json_int_t lost = json_integer_value(json_object_get(ev, "lost"));
        return json_is_integer(json_object_get(ev, "lost"))
                   ? buf_printf(line, "overflow  %lld events lost", (long long)lost)
                   : buf_puts(line, "overflow  events lost");
    }
    if (strcmp(type, "error") == 0)
        return buf_printf(line, "error     %s", jstr(ev, "message"));
    return buf_printf(line, "%-9s %s%s", type, path && *path ? path : ".", dir ? "/" : "");
}

/* The most event_line writes for ev: its strings and at most 64 bytes of its own. */
static size_t event_line_max(const json_t *ev, const char *type)
{
    return strlen(type) + strlen(jstr(ev, "path")) + strlen(jstr(ev, "from")) +
           strlen(jstr(ev, "to")) + strlen(jstr(ev, "message")) + 64;
}

/* Appends s[0..len) made safe and "\n" to out. What does not fit (the escapes take up to
 * 4 bytes a byte) is cut at a UTF-8 boundary and CUT_MARK ends the line instead, so an
 * event is never dropped unseen. Returns 0, or -E2BIG when not even the mark fits. */
#define CUT_MARK "\xe2\x80\xa6 (cut)\n" /* "… (cut)" */
static int append_safe_line(struct buf *out, const char *s, size_t len)
{
    size_t room = out->limit - out->len, mark = sizeof(CUT_MARK) - 1;
    struct buf safe;
    buf_init(&safe, room ? room - 1 : 0); /* and the "\n" */
    int r = out_safe_append(&safe, s, len, "\t");
    const char *end = "\n";
    size_t n = safe.len;
    if (r == -E2BIG && room >= mark) { /* what fits before the mark */
        r = 0;
        end = CUT_MARK;
        n = room - mark < n ? room - mark : n;
        while (n > 0 && ((unsigned char)safe.data[n] & 0xc0) == 0x80)
            n--;
    }
    if (r == 0)
        r = buf_append(out, safe.data ? safe.data : "", n);
    if (r == 0)
        r = buf_puts(out, end);
    buf_done(&safe);
    return r;
}

int cli_fs_format_event(const json_t *ev, struct buf *out)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type)
        return -EINVAL;
    if (strcmp(type, "ready") == 0)
        return 1;
    struct buf line; /* names come from the sandbox: no terminal controls */
    buf_init(&line, event_line_max(ev, type));
    int r = event_line(ev, type, &line);
    if (r == 0)
        r = append_safe_line(out, line.data ? line.data : "", line.len);
    buf_done(&line);
    return r;
}

/* ---- shared -------------------------------------------------------------------------- */

struct fs_opts {
    bool parents, force, recursive, dereference, json;
    const char *mode;
};

static int parse_fs(const struct cli_globals *g, int argc, char **argv, struct fs_opts *o,
                    const char *shorts, int min_args, int max_args, void (*help)(FILE *))
{
    static const struct option lo[] = {
        {"parents", no_argument, NULL, 'p'},    {"force", no_argument, NULL, 'f'},
        {"recursive", no_argument, NULL, 'r'},  {"dereference", no_argument, NULL, 'L'},
        {"mode", required_argument, NULL, 'M'}, {NULL, 0, NULL, 0},
    };
    int ch;
    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        if (ch == 'p' && strchr(shorts, 'p'))
            o->parents = true;
        else if (ch == 'f' && strchr(shorts, 'f'))
            o->force = true;
        else if (ch == 'r' && strchr(shorts, 'r'))
            o->recursive = true;
        else if (ch == 'L' && strchr(shorts, 'L'))
            o->dereference = true;
        else if (ch == 'M' && strchr(shorts, 'p'))
            o->mode = optarg;
        else {
            fprintf(g->err, "error: bad option %s; see %s --help\n", argv[optind - 1], argv[0]);
            return CLI_USAGE;
        }
    }
    int n = argc - optind;
    if (n < min_args || n > max_args) {
        help(g->err);
        return CLI_USAGE;
    }
    o->json = g->output && strcmp(g->output, "json") == 0;
    if (g->output && *g->output && !o->json) {
        fprintf(g->err, "error: %s supports only -o json\n", argv[0]);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* After parse_fs returned rc: opens sandbox args[0] into *ret_s and puts prefix, the
 * escaped path args[1] ("" without it) and the query (printf-style) into path, which is
 * initialised in any case (the caller frees it). Returns CLI_OK, rc, or prints why not. */
static int fs_target(const struct cli_globals *g, int rc, char *const *args, int nargs,
                     const char *prefix, struct cli_sbd **ret_s, struct buf *path,
                     const char *query, ...) __attribute__((format(printf, 8, 9)));
static int fs_target(const struct cli_globals *g, int rc, char *const *args, int nargs,
                     const char *prefix, struct cli_sbd **ret_s, struct buf *path,
                     const char *query, ...)
{
    buf_init(path, LIMIT_CLI_FS_PATH);
    if (rc == CLI_OK)
        rc = cli_sbd_open(g, args[0], ret_s);
    if (rc != CLI_OK)
        return rc;
    va_list ap;
    va_start(ap, query);
    int r = cli_fs_api_path(prefix, nargs > 1 ? args[1] : "", path);
    if (r == 0)
        r = buf_vprintf(path, query, ap);
    va_end(ap);
    if (r == 0)
        return CLI_OK;
    fprintf(g->err, "error: path too long\n");
    return CLI_USAGE;
}

/* One buffered call; prints sandboxd's error and returns CLI_SBD on failure. */
static int fs_call(const struct cli_globals *g, struct cli_sbd *s, const char *method,
                   const char *path, const char *body, const char *what, struct buf *resp)
{
    long status = 0;
    char err[CURL_ERROR_SIZE + 200];
    int r = cli_sbd_call(s, method, path, body, body ? strlen(body) : 0, NULL, resp, &status, err,
                         sizeof(err));
    if (r == 0 && status < 300)
        return CLI_OK;
    char text[600];
    if (r == 0)
        cli_sbd_error_text(status, resp->data, resp->len, text, sizeof(text));
    fprintf(g->err, "error: %s: %s\n", what, r == 0 ? text : err);
    return CLI_SBD;
}

/* Prints stat's answer resp: valid JSON as it came with -o json (machine output), else
 * one line, or a body that is not JSON, made safe for a terminal. */
static void print_stat(const struct cli_globals *g, const struct buf *resp, bool json)
{
    json_t *j = json_loadb(resp->data ? resp->data : "", resp->len, 0, NULL);
    struct buf line, safe;
    buf_init(&line, 2 * LIMIT_CLI_SBD_JSON);
    buf_init(&safe, 8 * LIMIT_CLI_SBD_JSON);
    if (json || !j) {
        (void)buf_append(&line, resp->data ? resp->data : "", resp->len);
    } else {
        const char *target = json_string_value(json_object_get(j, "symlink_target"));
        (void)buf_printf(&line, "%s  %s  %lld  %s  %s%s%s", jstr(j, "path"), jstr(j, "type"),
                         (long long)json_integer_value(json_object_get(j, "size")), jstr(j, "mode"),
                         jstr(j, "mtime"), target ? "  -> " : "", target ? target : "");
    }
    if (json && j)
        fprintf(g->out, "%s\n", buf_str(&line));
    else if (out_safe_append(&safe, line.data ? line.data : "", line.len, "\t\n") == 0)
        fprintf(g->out, "%s\n", buf_str(&safe));
    buf_done(&line);
    buf_done(&safe);
    json_decref(j);
}

/* ---- stat, mkdir, mv ----------------------------------------------------------------- */

int cli_cmd_stat(struct cli_globals *g, int argc, char **argv)
{
    struct fs_opts o = {0};
    int rc = parse_fs(g, argc, argv, &o, "L", 2, 2, cli_help_stat);
    struct cli_sbd *s = NULL;
    struct buf path, resp;
    rc = fs_target(g, rc, argv + optind, argc - optind, "/v1/stat/", &s, &path, "%s",
                   o.dereference ? "?follow=true" : "");
    buf_init(&resp, LIMIT_CLI_SBD_JSON);
    if (rc == CLI_OK)
        rc = fs_call(g, s, "GET", buf_str(&path), NULL, "stat", &resp);
    if (rc == CLI_OK)
        print_stat(g, &resp, o.json);
    buf_done(&path);
    buf_done(&resp);
    cli_sbd_free(s);
    return rc;
}

/* A --mode of mkdir: 1 to 4 octal digits after any leading zeros (07777 at most). */
static bool mode_ok(const char *m)
{
    size_t n = strlen(m), zeros = strspn(m, "0");
    return n > 0 && strspn(m, "01234567") == n && n - zeros <= 4;
}

int cli_cmd_mkdir(struct cli_globals *g, int argc, char **argv)
{
    struct fs_opts o = {0};
    int rc = parse_fs(g, argc, argv, &o, "p", 2, 2, cli_help_mkdir);
    if (rc == CLI_OK && o.mode && !mode_ok(o.mode)) {
        fprintf(g->err, "error: --mode takes octal digits such as 0750\n");
        rc = CLI_USAGE;
    }
    struct cli_sbd *s = NULL;
    struct buf path, resp;
    rc = fs_target(g, rc, argv + optind, argc - optind, "/v1/mkdir/", &s, &path, "?parents=%s%s%s",
                   o.parents ? "true" : "false", o.mode ? "&mode=" : "", o.mode ? o.mode : "");
    buf_init(&resp, LIMIT_CLI_SBD_JSON);
    if (rc == CLI_OK)
        rc = fs_call(g, s, "POST", buf_str(&path), NULL, "mkdir", &resp);
    buf_done(&path);
    buf_done(&resp);
    cli_sbd_free(s);
    return rc;
}

int cli_cmd_mv(struct cli_globals *g, int argc, char **argv)
{
    struct fs_opts o = {0};
    int rc = parse_fs(g, argc, argv, &o, "f", 3, 3, cli_help_mv);
    struct cli_sbd *s = NULL;
    if (rc == CLI_OK)
        rc = cli_sbd_open(g, argv[optind], &s);
    struct buf resp;
    buf_init(&resp, LIMIT_CLI_SBD_JSON);
    if (rc == CLI_OK) {
        json_t *j = json_pack("{s:s, s:s, s:b}", "from", argv[optind + 1], "to", argv[optind + 2],
                              "overwrite", o.force);
        char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!body) {
            fprintf(g->err, "error: paths must be UTF-8\n");
            rc = CLI_USAGE;
        } else {
            rc = fs_call(g, s, "POST", "/v1/move", body, "mv", &resp);
        }
        xfree(body); /* jansson allocates with malloc: see output.c */
    }
    buf_done(&resp);
    cli_sbd_free(s);
    return rc;
}

/* ---- watch --------------------------------------------------------------------------- */

struct watch_ctx {
    const struct cli_globals *g;
    bool json;
    struct cli_stream st;
    int write_err; /* writing the output failed (-EPIPE: the reader went away) */
};

/* Writes p[0..n) to out unless a write failed before (*err). A failure's errno is read
 * right after the call: glibc keeps it nowhere (see cli_output_error). */
static void watch_put(FILE *out, const char *p, size_t n, int *err)
{
    errno = 0;
    if (*err == 0 && n > 0 && fwrite(p, 1, n, out) != n)
        *err = cli_output_error(out, errno);
}

/* Flushes out unless a write failed before; returns err or the flush's failure. */
static int watch_flush(FILE *out, int err)
{
    errno = 0;
    if (err == 0 && (fflush(out) != 0 || ferror(out)))
        err = cli_output_error(out, errno);
    return err;
}

int cli_watch_print(FILE *out, bool json, const char *p, size_t n)
{
    int err = 0;
    if (json) {
        watch_put(out, p, n, &err);
        watch_put(out, "\n", 1, &err);
        return watch_flush(out, err);
    }
    json_t *ev = json_loadb(p, n, 0, NULL);
    struct buf line; /* the event's strings are at most n bytes; each escape 4 a byte */
    buf_init(&line, 4 * n + 1024);
    if (ev && cli_fs_format_event(ev, &line) == 0)
        watch_put(out, line.data, line.len, &err);
    json_decref(ev);
    buf_done(&line);
    return watch_flush(out, err);
}

/* A write failure is kept in w->write_err and stops the stream. */
static int watch_line(void *ctx, const char *p, size_t n)
{
    struct watch_ctx *w = ctx;
    int r = cli_watch_print(w->g->out, w->json, p, n);
    if (r < 0) {
        w->write_err = r;
        clearerr(w->g->out); /* reported by run_watch, not again at the end */
    }
    return r;
}

static int run_watch(const struct cli_globals *g, struct cli_sbd *s, const char *path, bool json)
{
    CURL *h = curl_easy_init();
    if (!h)
        return CLI_ERR;
    struct watch_ctx w = {.g = g, .json = json};
    cli_stream_init(&w.st, LIMIT_CLI_SBD_LINE, watch_line, &w);
    cli_stream_start(&w.st, h);
    char errbuf[CURL_ERROR_SIZE];
    struct curl_slist *hdrs = NULL;
    (void)cli_sbd_setup(s, h, "GET", path, NULL, &hdrs, errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cli_stream_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &w.st);
    CURLcode cc = curl_easy_perform(h);
    cli_stream_settle(&w.st); /* a refusal with an empty body */
    int rc = CLI_OK;
    if (w.st.status && w.st.status != 200) {
        char text[600];
        cli_sbd_error_text(w.st.status, w.st.errbody.data, w.st.errbody.len, text, sizeof(text));
        fprintf(g->err, "error: watch: %s\n", text);
        rc = CLI_SBD;
    } else if (w.write_err && w.write_err != -EPIPE) { /* EPIPE: the reader went away */
        char eb[128];
        fprintf(g->err, "error: watch: cannot write the output: %s\n",
                strerror_r(-w.write_err, eb, sizeof(eb)));
        rc = CLI_ERR;
    } else if (cc != CURLE_OK && !w.write_err) {
        fprintf(g->err, "error: watch: %s: %s\n", s->what, cli_stream_why(w.st.err, cc, errbuf));
        rc = CLI_SBD;
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    cli_stream_done(&w.st);
    return rc;
}

int cli_cmd_watch(struct cli_globals *g, int argc, char **argv)
{
    struct fs_opts o = {0};
    int rc = parse_fs(g, argc, argv, &o, "r", 1, 2, cli_help_watch);
    struct cli_sbd *s = NULL;
    struct buf path;
    rc = fs_target(g, rc, argv + optind, argc - optind, "/v1/watch/", &s, &path, "?recursive=%s",
                   o.recursive ? "true" : "false");
    if (rc == CLI_OK)
        rc = run_watch(g, s, buf_str(&path), o.json);
    buf_done(&path);
    cli_sbd_free(s);
    return rc;
}
