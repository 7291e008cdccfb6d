/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/files, /v1/health, /v1/metadata and bearer-token auth against a real daemon on
 * 127.0.0.1: every method, listings, ranges, conditionals, atomic writes with modes,
 * multipart, deletes and their error codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>

#include "sandboxd/files.h"
#include "sandboxd/path.h"
#include "sbd_test.h"

static int setup(void **state)
{
    *state = sbd_fixture_start(NULL, 0);
    return 0;
}

static int teardown(void **state)
{
    sbd_fixture_stop(*state);
    return 0;
}

static json_t *body_json(const struct test_http_resp *r)
{
    json_error_t e;
    json_t *j = json_loadb(r->body.data, r->body.len, 0, &e);
    if (!j)
        fail_msg("bad JSON body: %s", buf_str(&r->body));
    return j;
}

static void expect_error(const struct test_http_resp *r, const char *code)
{
    json_t *j = body_json(r);
    assert_string_equal(json_string_value(json_object_get(j, "code")), code);
    assert_non_null(json_string_value(json_object_get(j, "message")));
    json_decref(j);
}

static void test_health_metadata(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_resp r;
    assert_int_equal(sbd_do(f->port, "GET", "/v1/health", NULL, NULL, &r), 200);
    json_t *j = body_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ok");
    assert_true(json_is_integer(json_object_get(j, "uptime_seconds")));
    json_decref(j);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/metadata", NULL, NULL, &r), 200);
    j = body_json(&r);
    json_t *env = json_object_get(j, "env");
    assert_true(json_is_object(env));
    assert_string_equal(json_string_value(json_object_get(env, "SANDBOX_NAME")), "box1");
    assert_null(json_object_get(env, "SANDBOX_API_TOKEN"));
    assert_null(json_object_get(env, "SANDBOX_db_password"));
    assert_null(json_object_get(env, "SANDBOX_PRIVATE_KEY"));
    assert_null(json_object_get(env, "OTHER_VAR"));
    json_decref(j);
    test_http_resp_done(&r);
}

static void test_put_get_roundtrip(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_resp r;
    assert_int_equal(
        sbd_do(f->port, "PUT", "/v1/files/dir%2Fsub%2Fa.txt?mode=0600", NULL, "hello world", &r),
        204);
    test_http_resp_done(&r);
    char p[256];
    snprintf(p, sizeof(p), "%s/dir/sub/a.txt", f->root);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/dir/sub/a.txt", NULL, NULL, &r), 200);
    assert_string_equal(buf_str(&r.body), "hello world");
    char *ct = test_http_header(&r, "Content-Type");
    assert_string_equal(ct, "application/octet-stream");
    xfree(ct);
    char *lm = test_http_header(&r, "Last-Modified");
    assert_non_null(lm);
    test_http_resp_done(&r);
    /* Conditional GET and HEAD. */
    char hdr[128];
    snprintf(hdr, sizeof(hdr), "If-Modified-Since: %s\r\n", lm);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/dir/sub/a.txt", hdr, NULL, &r), 304);
    test_http_resp_done(&r);
    snprintf(hdr, sizeof(hdr), "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n");
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/dir/sub/a.txt", hdr, NULL, &r), 412);
    test_http_resp_done(&r);
    xfree(lm);
    assert_int_equal(sbd_do(f->port, "HEAD", "/v1/files/dir/sub/a.txt", NULL, NULL, &r), 200);
    char *cl = test_http_header(&r, "Content-Length");
    assert_string_equal(cl, "11");
    xfree(cl);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "HEAD", "/v1/files/nope", NULL, NULL, &r), 404);
    test_http_resp_done(&r);
    /* Overwrite is atomic and replaces the content; bad modes are refused. */
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/dir/sub/a.txt", NULL, "v2", &r), 204);
    test_http_resp_done(&r);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_equal(st.st_size, 2);
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/x?mode=777", NULL, "x", &r), 400);
    expect_error(&r, "INVALID_ARGUMENT");
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/x?mode=0800", NULL, "x", &r), 400);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/dir", NULL, "x", &r), 400);
    expect_error(&r, "INVALID_ARGUMENT");
    test_http_resp_done(&r);
}

static void test_ranges(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_resp r;
    sbd_write_file(f->root, "r.txt", "0123456789");
    const struct {
        const char *range;
        int status;
        const char *body;
        const char *cr;
    } cases[] = {
        {"bytes=2-4", 206, "234", "bytes 2-4/10"}, {"bytes=7-", 206, "789", "bytes 7-9/10"},
        {"bytes=-2", 206, "89", "bytes 8-9/10"},   {"bytes=5-100", 206, "56789", "bytes 5-9/10"},
        {"bytes=10-", 416, NULL, "bytes */10"},    {"bytes=1-2,4-5", 200, "0123456789", NULL},
        {"items=1-2", 200, "0123456789", NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char hdr[64];
        snprintf(hdr, sizeof(hdr), "Range: %s\r\n", cases[i].range);
        assert_int_equal(sbd_do(f->port, "GET", "/v1/files/r.txt", hdr, NULL, &r), cases[i].status);
        if (cases[i].body)
            assert_string_equal(buf_str(&r.body), cases[i].body);
        char *cr = test_http_header(&r, "Content-Range");
        if (cases[i].cr)
            assert_string_equal(cr, cases[i].cr);
        else
            assert_null(cr);
        xfree(cr);
        test_http_resp_done(&r);
    }
}

/* GET of name with the header field h: v (and "Range: bytes=2-4" when range) answers
 * status, and body when not NULL. */
static void expect_status(struct sbd_fixture *f, const char *name, const char *h, const char *v,
                          bool range, int status, const char *body)
{
    struct test_http_resp r;
    char hdr[256], target[128];
    snprintf(hdr, sizeof(hdr), "%s%s: %s\r\n", range ? "Range: bytes=2-4\r\n" : "", h, v);
    snprintf(target, sizeof(target), "/v1/files/%s", name);
    assert_int_equal(sbd_do(f->port, "GET", target, hdr, NULL, &r), status);
    if (body)
        assert_string_equal(buf_str(&r.body), body);
    test_http_resp_done(&r);
}

/* Strong entity tags: If-Match, If-None-Match and If-Range by tag; If-Range by date only
 * when the date is strong (the file unchanged for a second); a windowed read answers the
 * conditionals as a whole read does. */
static void test_entity_tags(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_resp r;
    char p[256], weak[SBD_ETAG_LEN + 2], weak_list[SBD_ETAG_LEN + 16];
    sbd_write_file(f->root, "e.txt", "0123456789");
    snprintf(p, sizeof(p), "%s/e.txt", f->root);
    struct timespec old[2] = {{.tv_sec = time(NULL) - 100, .tv_nsec = 5},
                              {.tv_sec = time(NULL) - 100, .tv_nsec = 5}};
    assert_int_equal(utimensat(AT_FDCWD, p, old, 0), 0);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/e.txt", NULL, NULL, &r), 200);
    char *etag = test_http_header(&r, "ETag"), *lm = test_http_header(&r, "Last-Modified");
    test_http_resp_done(&r);
    assert_non_null(etag);
    assert_non_null(lm);
    assert_true(etag[0] == '"' && etag[strlen(etag) - 1] == '"');
    snprintf(weak, sizeof(weak), "W/%s", etag);
    snprintf(weak_list, sizeof(weak_list), "\"x\", %s", weak);
    expect_status(f, "e.txt", "If-None-Match", etag, false, 304, NULL);
    expect_status(f, "e.txt", "If-None-Match", weak_list, false, 304, NULL);
    expect_status(f, "e.txt", "If-None-Match", "*", false, 304, NULL);
    expect_status(f, "e.txt", "If-None-Match", "\"other\"", false, 200, "0123456789");
    expect_status(f, "e.txt", "If-Match", etag, false, 200, "0123456789");
    expect_status(f, "e.txt", "If-Match", "*", false, 200, NULL);
    expect_status(f, "e.txt", "If-Match", "\"other\"", false, 412, NULL);
    expect_status(f, "e.txt", "If-Match", weak, false, 412, NULL); /* weak never matches */
    expect_status(f, "e.txt", "If-Range", etag, true, 206, "234");
    expect_status(f, "e.txt", "If-Range", weak, true, 200, "0123456789");
    expect_status(f, "e.txt", "If-Range", "\"other\"", true, 200, "0123456789");
    expect_status(f, "e.txt", "If-Range", lm, true, 206, "234");
    /* A windowed read (?offset=&max_bytes=) answers the conditionals too. */
    expect_status(f, "e.txt?offset=2&max_bytes=3", "If-None-Match", etag, false, 304, NULL);
    expect_status(f, "e.txt?offset=2&max_bytes=3", "If-Match", "\"other\"", false, 412, NULL);
    expect_status(f, "e.txt?offset=2&max_bytes=3", "If-Match", etag, false, 206, "234");
    /* Rewritten in place within the same second, same size: a new tag, the old one stale. */
    struct timespec later[2] = {{.tv_sec = old[0].tv_sec, .tv_nsec = 999},
                                {.tv_sec = old[0].tv_sec, .tv_nsec = 999}};
    assert_int_equal(utimensat(AT_FDCWD, p, later, 0), 0);
    expect_status(f, "e.txt", "If-Range", etag, true, 200, "0123456789");
    expect_status(f, "e.txt", "If-None-Match", etag, false, 200, "0123456789");
    /* A file modified this second: its date is weak, If-Range by date sends it whole. */
    assert_int_equal(utimensat(AT_FDCWD, p, NULL, 0), 0);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/e.txt", NULL, NULL, &r), 200);
    char *lm_now = test_http_header(&r, "Last-Modified");
    test_http_resp_done(&r);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    if (time(NULL) == st.st_mtim.tv_sec) /* else the second passed: nothing to check */
        expect_status(f, "e.txt", "If-Range", lm_now, true, 200, "0123456789");
    xfree(lm_now);
    xfree(etag);
    xfree(lm);
}

static void test_listing(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_resp r;
    char p[256];
    snprintf(p, sizeof(p), "%s/d", f->root);
    mkdir(p, 0750);
    sbd_write_file(p, "b.txt", "bb");
    sbd_write_file(f->root, "secret-outside", "x");
    snprintf(p, sizeof(p), "%s/d/a-link", f->root);
    assert_int_equal(symlink("b.txt", p), 0);
    snprintf(p, sizeof(p), "%s/d/escape", f->root);
    assert_int_equal(symlink("/etc/passwd", p), 0);
    snprintf(p, sizeof(p), "%s/d/broken", f->root);
    assert_int_equal(symlink("nowhere", p), 0);
    snprintf(p, sizeof(p), "%s/d/c", f->root);
    mkdir(p, 0700);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/d", NULL, NULL, &r), 200);
    json_t *j = body_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "path")), "/d");
    json_t *e = json_object_get(j, "entries");
    assert_int_equal(json_array_size(e), 3); /* a-link, b.txt, c; escape/broken omitted */
    const char *names[] = {"a-link", "b.txt", "c"};
    const char *types[] = {"file", "file", "directory"};
    for (size_t i = 0; i < 3; i++) {
        json_t *x = json_array_get(e, i);
        assert_string_equal(json_string_value(json_object_get(x, "name")), names[i]);
        assert_string_equal(json_string_value(json_object_get(x, "type")), types[i]);
        const char *mod = json_string_value(json_object_get(x, "modified_at"));
        assert_int_equal(strlen(mod), 20);
        assert_int_equal(mod[19], 'Z');
    }
    assert_int_equal(json_integer_value(json_object_get(json_array_get(e, 1), "size")), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(e, 2), "mode")), "0700");
    json_decref(j);
    test_http_resp_done(&r);
    /* The root: /v1/files, /v1/files/ and /v1/files/%2F all list it. */
    const char *roots[] = {"/v1/files", "/v1/files/", "/v1/files/%2F"};
    for (size_t i = 0; i < ARRAY_SIZE(roots); i++) {
        assert_int_equal(sbd_do(f->port, "GET", roots[i], NULL, NULL, &r), 200);
        j = body_json(&r);
        assert_string_equal(json_string_value(json_object_get(j, "path")), "/");
        json_decref(j);
        test_http_resp_done(&r);
    }
}

static void test_escapes_http(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_resp r;
    char p[256];
    snprintf(p, sizeof(p), "%s/up", f->root);
    assert_int_equal(symlink("..", p), 0);
    sbd_write_file(f->base, "outside.txt", "secret");
    const char *denied[] = {"/v1/files/..%2Foutside.txt", "/v1/files/up%2Foutside.txt",
                            "/v1/files/a%2F..%2F..%2Foutside.txt", "/v1/files/%2E%2E"};
    for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
        assert_int_equal(sbd_do(f->port, "GET", denied[i], NULL, NULL, &r), 403);
        expect_error(&r, "PERMISSION_DENIED");
        test_http_resp_done(&r);
    }
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/up%2Fnew.txt", NULL, "x", &r), 403);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/up%2Fa%2Fb%2Fnew.txt", NULL, "x", &r), 403);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "DELETE", "/v1/files/up%2Foutside.txt", NULL, NULL, &r), 403);
    test_http_resp_done(&r);
    snprintf(p, sizeof(p), "%s/outside.txt", f->base);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/new.txt", f->base);
    assert_int_equal(access(p, F_OK), -1);
    /* Absolute paths are mapped under the root. */
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/%2Fabs.txt", NULL, "abs", &r), 204);
    test_http_resp_done(&r);
    snprintf(p, sizeof(p), "%s/abs.txt", f->root);
    assert_int_equal(access(p, F_OK), 0);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/bad%zz", NULL, NULL, &r), 400);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/a%00b", NULL, NULL, &r), 400);
    test_http_resp_done(&r);
}

static void test_delete(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_resp r;
    char p[256];
    snprintf(p, sizeof(p), "%s/tree/x/y", f->root);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && echo 1 > '%s/f'", p, p);
    assert_int_equal(system(cmd), 0);
    sbd_write_file(f->root, "one.txt", "1");
    assert_int_equal(sbd_do(f->port, "DELETE", "/v1/files/one.txt", NULL, NULL, &r), 204);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "DELETE", "/v1/files/one.txt", NULL, NULL, &r), 404);
    expect_error(&r, "NOT_FOUND");
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "DELETE", "/v1/files/tree", NULL, NULL, &r), 409);
    expect_error(&r, "CONFLICT");
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "DELETE", "/v1/files/tree?recursive=maybe", NULL, NULL, &r),
                     400);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "DELETE", "/v1/files/tree?recursive=true", NULL, NULL, &r),
                     204);
    test_http_resp_done(&r);
    snprintf(p, sizeof(p), "%s/tree", f->root);
    assert_int_equal(access(p, F_OK), -1);
    /* The root: 409 without recursive, emptied (but kept) with it. */
    sbd_write_file(f->root, "k.txt", "1");
    assert_int_equal(sbd_do(f->port, "DELETE", "/v1/files/", NULL, NULL, &r), 409);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "DELETE", "/v1/files/?recursive=true", NULL, NULL, &r), 204);
    test_http_resp_done(&r);
    assert_int_equal(access(f->root, F_OK), 0);
    snprintf(p, sizeof(p), "%s/k.txt", f->root);
    assert_int_equal(access(p, F_OK), -1);
}

static void test_multipart_put(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_resp r;
    const char *body = "--XyZ\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nskip\r\n"
                       "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
                       "filename=\"ignored.bin\"\r\nContent-Type: application/octet-stream\r\n"
                       "\r\nline1\r\n--not-the-boundary\r\nline2\r\n--XyZ--\r\n";
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/mp.txt",
                            "Content-Type: multipart/form-data; boundary=XyZ\r\n", body, &r),
                     204);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/mp.txt", NULL, NULL, &r), 200);
    assert_string_equal(buf_str(&r.body), "line1\r\n--not-the-boundary\r\nline2");
    test_http_resp_done(&r);
    const char *nofile =
        "--XyZ\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--XyZ--\r\n";
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/mp2.txt",
                            "Content-Type: multipart/form-data; boundary=XyZ\r\n", nofile, &r),
                     400);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/mp3.txt",
                            "Content-Type: multipart/form-data; boundary=XyZ\r\n", "garbage", &r),
                     400);
    test_http_resp_done(&r);
    /* No temporary file is left behind by the failures. */
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/", NULL, NULL, &r), 200);
    assert_null(strstr(buf_str(&r.body), ".sandboxd-tmp"));
    test_http_resp_done(&r);
}

static void test_write_through_symlink(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_resp r;
    char p[512], q[512];
    snprintf(p, sizeof(p), "%s/sub", f->root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/sub/real.txt", f->root);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fputs("old content", fp);
    fclose(fp);
    snprintf(q, sizeof(q), "%s/link", f->root);
    assert_int_equal(symlink("sub/real.txt", q), 0);
    snprintf(q, sizeof(q), "%s/sub/link2", f->root);
    assert_int_equal(symlink("../link", q), 0);
    /* A write that fails half-way leaves the file the link points to as it was. */
    const char *cut = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n"
                      "\r\npartial data and no closing boundary";
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/link",
                            "Content-Type: multipart/form-data; boundary=XyZ\r\n", cut, &r),
                     400);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/sub/real.txt", NULL, NULL, &r), 200);
    assert_string_equal(buf_str(&r.body), "old content");
    test_http_resp_done(&r);
    /* A whole write replaces the file; the links stay links (through a chain too). */
    assert_int_equal(sbd_do(f->port, "PUT", "/v1/files/sub/link2", NULL, "new", &r), 204);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/link", NULL, NULL, &r), 200);
    assert_string_equal(buf_str(&r.body), "new");
    test_http_resp_done(&r);
    struct stat st;
    assert_int_equal(lstat(q, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    snprintf(q, sizeof(q), "%s/link", f->root);
    assert_int_equal(lstat(q, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, 3);
    /* No temporary file is left in the target's directory. */
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/sub/", NULL, NULL, &r), 200);
    assert_null(strstr(buf_str(&r.body), ".sandboxd-tmp"));
    test_http_resp_done(&r);
}

/* GET (or HEAD) of path answers status with X-File-Mode: want. */
static void expect_file_mode(const struct sbd_fixture *f, const char *method, const char *path,
                             int status, const char *want)
{
    struct test_http_resp r;
    assert_int_equal(sbd_do(f->port, method, path, NULL, NULL, &r), status);
    char *mode = test_http_header(&r, "X-File-Mode");
    assert_non_null(mode);
    assert_string_equal(mode, want);
    xfree(mode);
    test_http_resp_done(&r);
}

/* X-File-Mode gives the mode of the file served: through a symlink the target's (0600,
 * 0750), not the link's 0777; also on HEAD, a windowed read and a streamed file. No
 * listing carries it. */
static void test_file_mode_header(void **state)
{
    struct sbd_fixture *f = *state;
    char p[512], q[512];
    sbd_write_file(f->root, "secret", "s3cret");
    sbd_write_file(f->root, "run.sh", "#!/bin/sh\n");
    snprintf(p, sizeof(p), "%s/secret", f->root);
    assert_int_equal(chmod(p, 0600), 0);
    snprintf(p, sizeof(p), "%s/run.sh", f->root);
    assert_int_equal(chmod(p, 04750), 0);
    snprintf(q, sizeof(q), "%s/secret.link", f->root);
    assert_int_equal(symlink("secret", q), 0);
    snprintf(q, sizeof(q), "%s/run.link", f->root);
    assert_int_equal(symlink("run.sh", q), 0);
    expect_file_mode(f, "GET", "/v1/files/secret", 200, "0600");
    expect_file_mode(f, "GET", "/v1/files/secret.link", 200, "0600");
    expect_file_mode(f, "GET", "/v1/files/run.link", 200, "4750");
    expect_file_mode(f, "HEAD", "/v1/files/secret.link", 200, "0600");
    expect_file_mode(f, "GET", "/v1/files/run.link?max_bytes=2", 206, "4750");
    size_t n = 2u * 1024 * 1024;
    char *data = xmalloc(n);
    memset(data, 'b', n);
    char *raw = sbd_fmt_req("PUT", "/v1/files/big.bin?mode=0640", NULL, data, n);
    struct test_http_resp r;
    assert_int_equal(sbd_req(f->port, raw, &r), 204);
    test_http_resp_done(&r);
    xfree(raw);
    xfree(data);
    expect_file_mode(f, "GET", "/v1/files/big.bin", 200, "0640");
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/", NULL, NULL, &r), 200);
    char *mode = test_http_header(&r, "X-File-Mode");
    assert_null(mode);
    test_http_resp_done(&r);
}

/* sbd__fd_rel (the name a write through a symlink replaces) gives a name only while it
 * still names the file: after a rename the new name; after an unlink while another hard
 * link keeps the file (nlink 1, /proc reads "NAME (deleted)"), -ENOENT, also when a
 * file of that literal name exists; nothing is written there. */
static void test_fd_rel_name_gone(void **state)
{
    struct sbd_fixture *f = *state;
    char p[512], q[512];
    snprintf(p, sizeof(p), "%s/sub", f->root);
    assert_int_equal(mkdir(p, 0755), 0);
    sbd_write_file(f->root, "sub/real.txt", "content");
    snprintf(p, sizeof(p), "%s/sub/real.txt", f->root);
    snprintf(q, sizeof(q), "%s/keep", f->root);
    assert_int_equal(link(p, q), 0);
    snprintf(q, sizeof(q), "%s/link", f->root);
    assert_int_equal(symlink("sub/real.txt", q), 0);
    struct sbd_root *root = NULL;
    assert_int_equal(sbd_root_open(f->root, false, &root), 0);
    int fd = sbd_path_open(root, "link", O_PATH, 0);
    assert_true(fd >= 0);
    char *rel = NULL;
    assert_int_equal(sbd__fd_rel(root, fd, &rel), 0);
    assert_string_equal(rel, "sub/real.txt");
    XFREE(rel);
    snprintf(q, sizeof(q), "%s/sub/moved.txt", f->root);
    assert_int_equal(rename(p, q), 0);
    assert_int_equal(sbd__fd_rel(root, fd, &rel), 0);
    assert_string_equal(rel, "sub/moved.txt");
    XFREE(rel);
    assert_int_equal(unlink(q), 0);
    assert_int_equal(sbd__fd_rel(root, fd, &rel), -ENOENT);
    assert_null(rel);
    sbd_write_file(f->root, "sub/moved.txt (deleted)", "another file");
    assert_int_equal(sbd__fd_rel(root, fd, &rel), -ENOENT);
    assert_null(rel);
    (void)close(fd);
    sbd_root_free(root);
}

static void test_large_file(void **state)
{
    struct sbd_fixture *f = *state;
    size_t n = 5u * 1024 * 1024 + 7;
    char *data = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (char)('a' + i % 26);
    char *raw = sbd_fmt_req("PUT", "/v1/files/big.bin", NULL, data, n);
    struct test_http_resp r;
    assert_int_equal(sbd_req(f->port, raw, &r), 204);
    test_http_resp_done(&r);
    xfree(raw);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/big.bin", NULL, NULL, &r), 200);
    assert_int_equal(r.body.len, n);
    assert_memory_equal(r.body.data, data, n);
    test_http_resp_done(&r);
    assert_int_equal(
        sbd_do(f->port, "GET", "/v1/files/big.bin", "Range: bytes=3000000-\r\n", NULL, &r), 206);
    assert_int_equal(r.body.len, n - 3000000);
    assert_memory_equal(r.body.data, data + 3000000, n - 3000000);
    test_http_resp_done(&r);
    /* A download in progress (not read: it stays open) does not lend its file to the
     * processes started meanwhile (its descriptor was inherited). */
    struct test_http_conn c;
    char huge[160];
    (void)snprintf(huge, sizeof(huge), "%s/huge.bin", f->root);
    int hfd = open(huge, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(hfd >= 0);
    assert_int_equal(ftruncate(hfd, 1L << 30), 0); /* sparse: more than any socket buffer */
    (void)close(hfd);
    assert_int_equal(test_http_connect(f->port, &c), 0);
    assert_int_equal(test_http_send_str(&c, "GET /v1/files/huge.bin HTTP/1.1\r\nHost: t\r\n\r\n"),
                     0);
    clock_sleep(200 * USEC_PER_MSEC);
    assert_int_equal(sbd_do(f->port, "POST", "/v1/processes/run", NULL,
                            "{\"command\": \"ls -l /proc/$$/fd\"}", &r),
                     200);
    assert_non_null(strstr(buf_str(&r.body), "\"exit_code\":0"));
    assert_null(strstr(buf_str(&r.body), "huge.bin"));
    test_http_resp_done(&r);
    test_http_close(&c);
    xfree(data);
}

/* A file that shrinks under its download: the connection is cut, not the chunked body
 * ended as if the file were whole (its status and length were already sent). */
static void test_download_of_shrinking_file(void **state)
{
    struct sbd_fixture *f = *state;
    struct test_http_conn c;
    struct test_http_resp r;
    char path[160];
    (void)snprintf(path, sizeof(path), "%s/shrinks.bin", f->root);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 1L << 30), 0); /* sparse */
    assert_int_equal(test_http_connect(f->port, &c), 0);
    assert_int_equal(
        test_http_send_str(&c, "GET /v1/files/shrinks.bin HTTP/1.1\r\nHost: t\r\n\r\n"), 0);
    clock_sleep(300 * USEC_PER_MSEC); /* the socket's buffers fill; the stream waits */
    assert_int_equal(ftruncate(fd, 10L << 20), 0);
    (void)close(fd);
    test_http_resp_init(&r);
    assert_int_not_equal(test_http_read(&c, false, 30 * USEC_PER_SEC, &r), 0);
    test_http_resp_done(&r);
    test_http_close(&c);
}

static void test_auth(void **state)
{
    (void)state;
    struct sbd_fixture *f = sbd_fixture_start("s3cret", 0);
    struct test_http_resp r;
    assert_int_equal(sbd_do(f->port, "GET", "/v1/files/", NULL, NULL, &r), 401);
    expect_error(&r, "UNAUTHENTICATED");
    test_http_resp_done(&r);
    assert_int_equal(
        sbd_do(f->port, "GET", "/v1/files/", "Authorization: Bearer wrong\r\n", NULL, &r), 401);
    test_http_resp_done(&r);
    assert_int_equal(
        sbd_do(f->port, "GET", "/v1/files/", "Authorization: Bearer s3cret\r\n", NULL, &r), 200);
    test_http_resp_done(&r);
    assert_int_equal(sbd_do(f->port, "GET", "/v1/health", NULL, NULL, &r), 200);
    test_http_resp_done(&r);
    /* Refused at the head: the 8 MiB body it announces is never sent, nor waited for. */
    struct test_http_conn c;
    assert_int_equal(test_http_connect(f->port, &c), 0);
    assert_int_equal(test_http_send_str(&c, "POST /v1/processes/run HTTP/1.1\r\nHost: t\r\n"
                                            "Content-Length: 8000000\r\n\r\n"),
                     0);
    test_http_resp_init(&r);
    assert_int_equal(test_http_read(&c, false, 5 * USEC_PER_SEC, &r), 0);
    assert_int_equal(r.status, 401);
    expect_error(&r, "UNAUTHENTICATED");
    test_http_resp_done(&r);
    test_http_close(&c);
    sbd_fixture_stop(f);
}

int main(void)
{
    setenv("SANDBOX_NAME", "box1", 1);
    setenv("SANDBOX_API_TOKEN", "t", 1);
    setenv("SANDBOX_db_password", "p", 1);
    setenv("SANDBOX_PRIVATE_KEY", "k", 1);
    setenv("OTHER_VAR", "o", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_health_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_get_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entity_tags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escapes_http, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart_put, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_through_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_mode_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fd_rel_name_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_download_of_shrinking_file, setup, teardown),
        cmocka_unit_test(test_auth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
