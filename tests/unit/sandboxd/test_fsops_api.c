/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxd's filesystem operations through its HTTP API on a daemon thread (so that the
 * sanitizers see the handlers): stat (also following symlinks, confined), mkdir, move,
 * batch writes, windowed reads, and watch streams (events, the stream bound, a client
 * leaving, shutdown with open streams). Escapes are covered against the real binary in
 * tests/sandboxd/test_fsops.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "ndjson_client.h"
#include "sandboxd/fsops.h"
#include "sbd_test.h"

/* The JSON body of r (new reference). */
static json_t *body_json(const struct test_http_resp *r)
{
    json_t *j = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, NULL);
    assert_non_null(j);
    return j;
}

static const char *jstr(const json_t *j, const char *key)
{
    const char *v = json_string_value(json_object_get(j, key));
    return v ? v : "";
}

static void test_stat_mkdir_move(void **state)
{
    (void)state;
    struct sbd_fixture *f = sbd_fixture_start(NULL, 0);
    struct test_http_resp r;
    assert_int_equal(
        sbd_do(f->port, "POST", "/v1/mkdir/a/b?parents=true&mode=0700", NULL, NULL, &r), 201);
    json_t *j = body_json(&r);
    assert_string_equal(jstr(j, "path"), "/a/b");
    assert_string_equal(jstr(j, "mode"), "0700");
    json_decref(j);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "POST", "/v1/mkdir/a/b", NULL, NULL, &r), 409);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "POST", "/v1/mkdir/x/y", NULL, NULL, &r), 404);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "POST", "/v1/mkdir/a?parents=maybe", NULL, NULL, &r), 400);
    test_http_resp_done(&r);

    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/a/f.txt", NULL, "12345", &r), 204);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/stat/a/f.txt", NULL, NULL, &r), 200);
    j = body_json(&r);
    assert_string_equal(jstr(j, "type"), "file");
    assert_int_equal(json_integer_value(json_object_get(j, "size")), 5);
    assert_int_equal(strlen(jstr(j, "mtime")), strlen("2026-01-01T00:00:00.000000000Z"));
    json_decref(j);
    test_http_resp_done(&r);

    const char *hdr = "Content-Type: application/json\r\n";
    assert_int_equal(
        sbd_do(f->port, "POST", "/v1/move", hdr, "{\"from\":\"a/f.txt\",\"to\":\"a/b/g.txt\"}", &r),
        200);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/a/b/g.txt", NULL, NULL, &r), 200);
    assert_string_equal(buf_str(&r.body), "12345");
    test_http_resp_done(&r);
    assert_int_equal(
        sbd_do(f->port, "POST", "/v1/move", hdr, "{\"from\":\"a\",\"to\":\"a/b/c\"}", &r), 400);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "POST", "/v1/move", hdr, "{\"from\":\"a\"}", &r), 400);
    test_http_resp_done(&r);
    /* a link to a directory moves into that directory (as mv does): not "into itself" */
    char ln[600];
    (void)snprintf(ln, sizeof(ln), "%s/ln", f->root);
    assert_int_equal(symlink("a", ln), 0);
    assert_int_equal(
        sbd_do(f->port, "POST", "/v1/move", hdr, "{\"from\":\"ln\",\"to\":\"ln/x\"}", &r), 200);
    test_http_resp_done(&r);
    (void)snprintf(ln, sizeof(ln), "%s/a/x", f->root);
    struct stat st;
    assert_int_equal(lstat(ln, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    sbd_fixture_stop(f);
}

/* GET target on port: asserts the status, returns the JSON body (new reference). */
static json_t *get_json(uint16_t port, const char *target, int want)
{
    struct test_http_resp r;
    assert_int_equal(sbd_do(port, "GET", target, NULL, NULL, &r), want);
    json_t *j = body_json(&r);
    test_http_resp_done(&r);
    return j;
}

/* Asserts the error code of GET target (status want). */
static void expect_error(uint16_t port, const char *target, int want, const char *code)
{
    json_t *j = get_json(port, target, want);
    assert_string_equal(jstr(j, "code"), code);
    json_decref(j);
}

/* Asserts that GET target describes a type (no symlink_target) at path (status 200). */
static json_t *expect_followed(uint16_t port, const char *target, const char *type,
                               const char *path)
{
    json_t *j = get_json(port, target, 200);
    assert_string_equal(jstr(j, "type"), type);
    assert_string_equal(jstr(j, "path"), path);
    assert_null(json_object_get(j, "symlink_target"));
    return j;
}

static void make_link(const struct sbd_fixture *f, const char *target, const char *rel)
{
    char p[256];
    (void)snprintf(p, sizeof(p), "%s/%s", f->root, rel);
    assert_int_equal(symlink(target, p), 0);
}

static void stat_follow_setup(const struct sbd_fixture *f)
{
    struct test_http_resp r;
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/l/f.txt", NULL, "12345", &r), 204);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "POST", "/v1/mkdir/l/d", NULL, NULL, &r), 201);
    test_http_resp_done(&r);
    char p[256];
    (void)snprintf(p, sizeof(p), "%s/l/f.txt", f->root);
    assert_int_equal(chmod(p, 0640), 0);
    make_link(f, "f.txt", "l/to_file");
    make_link(f, "d", "l/to_dir");
    make_link(f, "nope", "l/dangling");
    make_link(f, "/etc", "l/abs");
    make_link(f, "../..", "l/up");
    make_link(f, "to_file", "l/chain");
    make_link(f, "../l/chain", "l/chain2");
    make_link(f, "loop_b", "l/loop_a");
    make_link(f, "loop_a", "l/loop_b");
}

static void test_stat_follow(void **state)
{
    (void)state;
    struct sbd_fixture *f = sbd_fixture_start(NULL, 0);
    stat_follow_setup(f);
    uint16_t port = f->port;
    /* a link to a file: the file's size and mode, the requested name and path */
    json_t *j = expect_followed(port, "/v1/stat/l/to_file?follow=true", "file", "/l/to_file");
    assert_string_equal(jstr(j, "name"), "to_file");
    assert_int_equal(json_integer_value(json_object_get(j, "size")), 5);
    assert_string_equal(jstr(j, "mode"), "0640");
    json_decref(j);
    json_decref(expect_followed(port, "/v1/stat/l/to_dir?follow=1", "directory", "/l/to_dir"));
    j = expect_followed(port, "/v1/stat/l/chain2?follow=true", "file", "/l/chain2");
    assert_int_equal(json_integer_value(json_object_get(j, "size")), 5);
    json_decref(j);
    json_decref(expect_followed(port, "/v1/stat/l/f.txt?follow=true", "file", "/l/f.txt"));
    json_decref(expect_followed(port, "/v1/stat/?follow=true", "directory", "/"));
    /* a link into a directory as a parent is followed as before */
    json_decref(expect_followed(port, "/v1/stat/l/to_dir/?follow=true", "directory", "/l/to_dir"));

    expect_error(port, "/v1/stat/l/dangling?follow=true", 404, "NOT_FOUND");
    expect_error(port, "/v1/stat/l/abs?follow=true", 403, "PERMISSION_DENIED");
    expect_error(port, "/v1/stat/l/up?follow=true", 403, "PERMISSION_DENIED");
    expect_error(port, "/v1/stat/l/abs/passwd?follow=true", 403, "PERMISSION_DENIED");
    /* ELOOP is mapped as every other handler maps it (sbd_respond_errno): 403 */
    expect_error(port, "/v1/stat/l/loop_a?follow=true", 403, "PERMISSION_DENIED");
    j = get_json(port, "/v1/stat/l/to_file?follow=bogus", 400);
    assert_string_equal(jstr(j, "code"), "INVALID_ARGUMENT");
    assert_non_null(strstr(jstr(j, "message"), "follow"));
    json_decref(j);

    /* without follow (or follow=false/0) the link itself is described, as before */
    static const char *const nofollow[] = {"/v1/stat/l/to_file", "/v1/stat/l/to_file?follow=false",
                                           "/v1/stat/l/to_file?follow=0"};
    for (size_t i = 0; i < sizeof(nofollow) / sizeof(nofollow[0]); i++) {
        j = get_json(port, nofollow[i], 200);
        assert_string_equal(jstr(j, "type"), "symlink");
        assert_string_equal(jstr(j, "symlink_target"), "f.txt");
        json_decref(j);
    }
    j = get_json(port, "/v1/stat/l/abs", 200);
    assert_string_equal(jstr(j, "symlink_target"), "/etc");
    json_decref(j);
    j = get_json(port, "/v1/stat/l/dangling?follow=false", 200);
    assert_string_equal(jstr(j, "type"), "symlink");
    json_decref(j);
    sbd_fixture_stop(f);
}

static void test_batch_and_window(void **state)
{
    (void)state;
    struct sbd_fixture *f = sbd_fixture_start(NULL, 0);
    struct test_http_resp r;
    const char *body = "{\"files\":[{\"path\":\"b/1\",\"content\":\"MDEyMzQ1Njc4OQ==\"},"
                       "{\"path\":\"b/2\",\"content\":\"two\",\"encoding\":\"utf-8\"},"
                       "{\"path\":\"/\",\"content\":\"\"}]}";
    assert_int_equal(
        sbd_do(f->port, "POST", "/v1/files:batch", "Content-Type: application/json\r\n", body, &r),
        200);
    json_t *j = body_json(&r);
    json_t *res = json_object_get(j, "results");
    assert_int_equal(json_array_size(res), 3);
    assert_true(json_is_true(json_object_get(json_array_get(res, 0), "ok")));
    assert_true(json_is_true(json_object_get(json_array_get(res, 1), "ok")));
    assert_true(json_is_false(json_object_get(json_array_get(res, 2), "ok")));
    assert_true(json_is_false(json_object_get(j, "ok")));
    json_decref(j);
    test_http_resp_done(&r);

    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/b/1?offset=2&max_bytes=3", NULL, NULL, &r),
                     206);
    assert_string_equal(buf_str(&r.body), "234");
    assert_non_null(strstr(buf_str(&r.head), "Content-Range: bytes 2-4/10"));
    assert_non_null(strstr(buf_str(&r.head), "X-Truncated: true"));
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "HEAD", "/v1/files/b/1?offset=8", NULL, NULL, &r), 206);
    assert_non_null(strstr(buf_str(&r.head), "Content-Length: 2"));
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/b/1?offset=10", NULL, NULL, &r), 416);
    test_http_resp_done(&r);
    /* without the parameters, a file is served as before */
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/b/1", "Range: bytes=1-2\r\n", NULL, &r),
                     206);
    assert_string_equal(buf_str(&r.body), "12");
    assert_null(strstr(buf_str(&r.head), "X-Truncated"));
    test_http_resp_done(&r);
    sbd_fixture_stop(f);
}

/* Opens a watch stream of path (query included). Returns its status. */
static int watch_start(struct nd_client *n, uint16_t port, const char *path)
{
    memset(n, 0, sizeof(*n));
    buf_init(&n->raw, 64u * 1024 * 1024);
    buf_init(&n->data, 64u * 1024 * 1024);
    if (test_http_connect(port, &n->c) < 0)
        return -ECONNREFUSED;
    char head[512];
    snprintf(head, sizeof(head), "GET /v1/watch/%s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    if (test_http_send_str(&n->c, head) < 0)
        return -EPIPE;
    while (!n->head_done) {
        char *end = memmem(n->raw.data ? n->raw.data : "", n->raw.len, "\r\n\r\n", 4);
        if (end) {
            n->status = atoi_status(n->raw.data);
            buf_consume(&n->raw, (size_t)(end - n->raw.data) + 4);
            n->head_done = true;
        } else if (nd_fill(n, 10000) < 0) {
            return -ETIMEDOUT;
        }
    }
    return n->status;
}

/* Reads the next event and checks its type and path. */
static void expect_event(struct nd_client *n, const char *type, const char *path)
{
    json_t *e = nd_next(n, 10000);
    assert_non_null(e);
    assert_string_equal(jstr(e, "type"), type);
    assert_string_equal(jstr(e, "path"), path);
    json_decref(e);
}

static void test_watch(void **state)
{
    (void)state;
    struct sbd_fixture *f = sbd_fixture_start(NULL, 0);
    char p[256];
    snprintf(p, sizeof(p), "%s/w", f->root);
    assert_int_equal(mkdir(p, 0755), 0);
    struct nd_client n;
    assert_int_equal(watch_start(&n, f->port, "w?recursive=true"), 200);
    expect_event(&n, "ready", "/w");
    sbd_write_file(p, "a", "x");
    snprintf(p, sizeof(p), "%s/w/sub", f->root);
    assert_int_equal(mkdir(p, 0755), 0);
    expect_event(&n, "create", "a");
    expect_event(&n, "modify", "a");
    expect_event(&n, "create", "sub");
    sbd_write_file(p, "b", "");
    expect_event(&n, "create", "sub/b");
    char from[256], to[256];
    snprintf(from, sizeof(from), "%s/w/a", f->root);
    snprintf(to, sizeof(to), "%s/w/sub/c", f->root);
    assert_int_equal(rename(from, to), 0);
    json_t *e = nd_next(&n, 10000);
    assert_string_equal(jstr(e, "type"), "move");
    assert_string_equal(jstr(e, "from"), "a");
    assert_string_equal(jstr(e, "to"), "sub/c");
    json_decref(e);
    nd_close(&n);

    /* Errors before the stream starts. */
    struct nd_client bad;
    assert_int_equal(watch_start(&bad, f->port, "missing"), 404);
    nd_close(&bad);
    assert_int_equal(watch_start(&bad, f->port, "..%2Fx"), 403);
    nd_close(&bad);
    assert_int_equal(watch_start(&bad, f->port, "w?queue=1"), 400);
    nd_close(&bad);
    /* The bound: 16 streams; a client leaving frees its slot. */
    struct nd_client many[17];
    for (int i = 0; i < 16; i++)
        assert_int_equal(watch_start(&many[i], f->port, ""), 200);
    assert_int_equal(watch_start(&many[16], f->port, ""), 429);
    nd_close(&many[16]);
    nd_close(&many[0]);
    int st = 0;
    for (int tries = 0; tries < 100; tries++) {
        st = watch_start(&many[16], f->port, "");
        if (st == 200)
            break;
        nd_close(&many[16]);
        usleep(20000);
    }
    assert_int_equal(st, 200);
    /* Shutdown with open streams: they end, nothing leaks. */
    sbd_fixture_stop(f);
    for (int i = 1; i <= 16; i++)
        nd_close(&many[i]);
}

/* Reads the next event and checks it is the rename of from to to. */
static void expect_move(struct nd_client *n, const char *from, const char *to, bool is_dir)
{
    json_t *e = nd_next(n, 10000);
    assert_non_null(e);
    assert_string_equal(jstr(e, "type"), "move");
    assert_string_equal(jstr(e, "from"), from);
    assert_string_equal(jstr(e, "to"), to);
    assert_int_equal(json_is_true(json_object_get(e, "is_dir")), is_dir);
    json_decref(e);
}

/* A rename whose IN_MOVED_FROM and IN_MOVED_TO come in different reads is still one
 * "move" (one event per read and per loop turn here); an IN_MOVED_FROM with nothing after
 * it is a move out of the tree once its wait is over. */
static void test_watch_split_rename(void **state)
{
    (void)state;
    sbd__watch_test_read_size = 48; /* one event with a name of at most 16 bytes */
    struct sbd_fixture *f = sbd_fixture_start(NULL, 0);
    char w[256], a[256], c[256], out[256], sub[256], sub2[256];
    snprintf(w, sizeof(w), "%s/w", f->root);
    snprintf(a, sizeof(a), "%s/w/a", f->root);
    snprintf(c, sizeof(c), "%s/w/sub/c", f->root);
    snprintf(out, sizeof(out), "%s/out", f->root);
    snprintf(sub, sizeof(sub), "%s/w/sub", f->root);
    snprintf(sub2, sizeof(sub2), "%s/w/sub2", f->root);
    assert_int_equal(mkdir(w, 0755), 0);
    assert_int_equal(mkdir(sub, 0755), 0);
    struct nd_client n;
    assert_int_equal(watch_start(&n, f->port, "w?recursive=true"), 200);
    expect_event(&n, "ready", "/w");
    sbd_write_file(w, "a", "");
    expect_event(&n, "create", "a");
    assert_int_equal(rename(a, c), 0);
    expect_move(&n, "a", "sub/c", false);
    /* out of the tree, then back in under another name */
    assert_int_equal(rename(c, out), 0);
    expect_event(&n, "move_from", "sub/c");
    assert_int_equal(rename(out, a), 0);
    expect_event(&n, "move_to", "a");
    /* a directory: the watch follows it to its new name */
    assert_int_equal(rename(sub, sub2), 0);
    expect_move(&n, "sub", "sub2", true);
    sbd_write_file(sub2, "x", "");
    expect_event(&n, "create", "sub2/x");
    nd_close(&n);
    sbd_fixture_stop(f);
    sbd__watch_test_read_size = 0;
}

/* A tree moved into a recursive watch (300 entries: more than are read on the loop) is read
 * on a worker thread: its move_to, then each directory and file once (a directory before
 * its entries), then its directories are watched; a client that goes while another tree
 * is read leaves nothing behind. */
static void test_watch_tree_moved_in(void **state)
{
    (void)state;
    struct sbd_fixture *f = sbd_fixture_start(NULL, 0);
    char w[256], p[320], q[320];
    snprintf(w, sizeof(w), "%s/w", f->root);
    assert_int_equal(mkdir(w, 0755), 0);
    for (int i = 0; i < 2; i++) { /* base/t<i>/d<k>/e, a file in each */
        snprintf(p, sizeof(p), "%s/t%d", f->base, i);
        assert_int_equal(mkdir(p, 0755), 0);
        for (int k = 0; k < 100; k++) {
            snprintf(p, sizeof(p), "%s/t%d/d%d", f->base, i, k);
            assert_int_equal(mkdir(p, 0755), 0);
            snprintf(p, sizeof(p), "%s/t%d/d%d/e", f->base, i, k);
            assert_int_equal(mkdir(p, 0755), 0);
            sbd_write_file(p, "x", "");
        }
    }
    struct nd_client n;
    assert_int_equal(watch_start(&n, f->port, "w?recursive=true"), 200);
    expect_event(&n, "ready", "/w");
    snprintf(p, sizeof(p), "%s/t0", f->base);
    snprintf(q, sizeof(q), "%s/t0", w);
    assert_int_equal(rename(p, q), 0);
    expect_event(&n, "move_to", "t0");
    int seen[100] = {0};
    for (int i = 0; i < 3 * 100; i++) { /* d<k>, then d<k>/e, then d<k>/e/x */
        json_t *e = nd_next(&n, 10000);
        assert_non_null(e);
        assert_string_equal(jstr(e, "type"), "create");
        int k = -1, len = 0;
        assert_int_equal(sscanf(jstr(e, "path"), "t0/d%d%n", &k, &len), 1);
        assert_true(k >= 0 && k < 100);
        const char *want[] = {"", "/e", "/e/x"};
        assert_string_equal(jstr(e, "path") + len, want[seen[k]++]);
        json_decref(e);
    }
    snprintf(p, sizeof(p), "%s/t0/d99/e", w);
    sbd_write_file(p, "y", "");
    expect_event(&n, "create", "t0/d99/e/y");
    /* a second client goes while its tree is read */
    struct nd_client g;
    assert_int_equal(watch_start(&g, f->port, "w?recursive=true"), 200);
    expect_event(&g, "ready", "/w");
    snprintf(p, sizeof(p), "%s/t1", f->base);
    snprintf(q, sizeof(q), "%s/t1", w);
    assert_int_equal(rename(p, q), 0);
    nd_close(&g);
    expect_event(&n, "move_to", "t1");
    nd_close(&n);
    sbd_fixture_stop(f);
}

/* A file name that is not UTF-8 is listed and stat'ed with U+FFFD for its bad bytes (as
 * Go's encoding/json writes it) instead of vanishing from the listing and making stat
 * answer 500. */
static void test_non_utf8_names(void **state)
{
    struct sbd_fixture *f = sbd_fixture_start(NULL, 0);
    struct test_http_resp r;
    char d[160];
    (void)state;
    (void)snprintf(d, sizeof(d), "%s/n", f->root);
    assert_int_equal(mkdir(d, 0755), 0);
    sbd_write_file(d, "bad\xff", "x");
    sbd_write_file(d, "good", "y");
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/n/", NULL, NULL, &r), 200);
    json_t *j = body_json(&r);
    json_t *entries = json_object_get(j, "entries");
    assert_int_equal(json_array_size(entries), 2);
    assert_string_equal(jstr(json_array_get(entries, 0), "name"), "bad\xef\xbf\xbd");
    json_decref(j);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/stat/n/bad%FF", NULL, NULL, &r), 200);
    j = body_json(&r);
    assert_string_equal(jstr(j, "name"), "bad\xef\xbf\xbd");
    assert_string_equal(jstr(j, "path"), "/n/bad\xef\xbf\xbd");
    json_decref(j);
    test_http_resp_done(&r);
    sbd_fixture_stop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stat_mkdir_move),    cmocka_unit_test(test_stat_follow),
        cmocka_unit_test(test_batch_and_window),   cmocka_unit_test(test_watch),
        cmocka_unit_test(test_watch_split_rename), cmocka_unit_test(test_watch_tree_moved_in),
        cmocka_unit_test(test_non_utf8_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
