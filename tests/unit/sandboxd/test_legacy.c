/* SPDX-License-Identifier: Apache-2.0 */
/* The legacy python-runtime endpoints, byte for byte: GET /, /execute (shlex splitting
 * without a shell, failures as exit_code 1), /upload, /download, /list, /exists, their
 * 403/404/422 bodies, and the Python-compatible shlex, JSON and float text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/time.h>

#include "common/limits.h"
#include "sandboxd/shlex.h"
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

static void expect(uint16_t port, const char *method, const char *target, const char *headers,
                   const char *body, int status, const char *want)
{
    struct test_http_resp r;
    int st = sbd_do(port, method, target, headers, body, &r);
    if (st != status || (want && strcmp(buf_str(&r.body), want) != 0))
        fail_msg("%s %s: %d %s", method, target, st, buf_str(&r.body));
    test_http_resp_done(&r);
}

static void exec_expect(uint16_t port, const char *json, const char *want)
{
    expect(port, "POST", "/execute", "Content-Type: application/json\r\n", json, 200, want);
}

static void test_root_and_execute(void **state)
{
    struct sbd_fixture *f = *state;
    uint16_t p = f->legacy_port;
    expect(p, "GET", "/", NULL, NULL, 200,
           "{\"status\":\"ok\",\"message\":\"Sandbox Runtime is active.\"}");
    exec_expect(p, "{\"command\": \"echo hello 'a b'\"}",
                "{\"stdout\":\"hello a b\\n\",\"stderr\":\"\",\"exit_code\":0}");
    /* No shell: the pipe is an argument of echo. */
    exec_expect(p, "{\"command\": \"echo a | wc\"}",
                "{\"stdout\":\"a | wc\\n\",\"stderr\":\"\",\"exit_code\":0}");
    exec_expect(p, "{\"command\": \"sh -c 'echo err >&2; exit 4'\"}",
                "{\"stdout\":\"\",\"stderr\":\"err\\n\",\"exit_code\":4}");
    exec_expect(p, "{\"command\": \"printf '\\\\033[1m\\\\tx\\\\001'\"}",
                "{\"stdout\":\"\\u001b[1m\\tx\\u0001\",\"stderr\":\"\",\"exit_code\":0}");
    exec_expect(p, "{\"command\": \"echo 'unclosed\"}",
                "{\"stdout\":\"\",\"stderr\":\"Failed to execute command: No closing "
                "quotation\",\"exit_code\":1}");
    exec_expect(p, "{\"command\": \"no-such-cmd-xyz\"}",
                "{\"stdout\":\"\",\"stderr\":\"Failed to execute command: [Errno 2] No such "
                "file or directory: 'no-such-cmd-xyz'\",\"exit_code\":1}");
    exec_expect(p, "{\"command\": \"\"}",
                "{\"stdout\":\"\",\"stderr\":\"Failed to execute command: list index out of "
                "range\",\"exit_code\":1}");
    exec_expect(p, "{\"command\": \"sh -c 'kill -9 $$'\"}",
                "{\"stdout\":\"\",\"stderr\":\"\",\"exit_code\":-9}");
    exec_expect(p, "{\"command\": \"pwd\"}", NULL);
    expect(p, "POST", "/execute", NULL, "{}", 422,
           "{\"detail\":[{\"type\":\"missing\",\"loc\":[\"body\",\"command\"],\"msg\":\"Field "
           "required\",\"input\":null}]}");
    expect(p, "GET", "/nope", NULL, NULL, 404, "{\"detail\":\"Not Found\"}");
    expect(p, "GET", "/execute", NULL, NULL, 405, "{\"detail\":\"Method Not Allowed\"}");
}

/* /list of a directory with one entry more than LIMIT_SBD_LISTING lists exactly that
 * many ("." and ".." counted before, so two fewer came). */
static void list_cap(const struct sbd_fixture *f, uint16_t p)
{
    char dir[256], path[300];
    (void)snprintf(dir, sizeof(dir), "%s/many", f->root);
    assert_int_equal(mkdir(dir, 0755), 0);
    for (int i = 0; i <= LIMIT_SBD_LISTING; i++) {
        (void)snprintf(path, sizeof(path), "%s/f%d", dir, i);
        int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        (void)close(fd);
    }
    struct test_http_resp r;
    assert_int_equal(sbd_do(p, "GET", "/list/many", NULL, NULL, &r), 200);
    json_t *j = json_loads(buf_str(&r.body), 0, NULL);
    assert_int_equal(json_array_size(j), LIMIT_SBD_LISTING);
    json_decref(j);
    test_http_resp_done(&r);
}

static void test_files(void **state)
{
    struct sbd_fixture *f = *state;
    uint16_t p = f->legacy_port;
    const char *mp = "--b0\r\nContent-Disposition: form-data; name=\"file\"; "
                     "filename=\"sub/up.txt\"\r\n\r\ncontent\r\n--b0--\r\n";
    const char *ct = "Content-Type: multipart/form-data; boundary=b0\r\n";
    expect(p, "POST", "/upload", ct, mp, 200,
           "{\"message\":\"File 'sub/up.txt' uploaded successfully.\"}");
    struct test_http_resp r;
    assert_int_equal(sbd_do(p, "GET", "/download/sub%2Fup.txt", NULL, NULL, &r), 200);
    assert_string_equal(buf_str(&r.body), "content");
    char *cd = test_http_header(&r, "Content-Disposition");
    assert_string_equal(cd, "attachment; filename=\"up.txt\"");
    xfree(cd);
    test_http_resp_done(&r);
    expect(p, "GET", "/download/sub", NULL, NULL, 404, "{\"message\":\"File not found\"}");
    expect(p, "GET", "/download/..%2F..%2Fetc%2Fpasswd", NULL, NULL, 403,
           "{\"message\":\"Access denied\"}");
    const char *evil = "--b0\r\nContent-Disposition: form-data; name=\"file\"; "
                       "filename=\"../evil.txt\"\r\n\r\nx\r\n--b0--\r\n";
    expect(p, "POST", "/upload", ct, evil, 403, "{\"message\":\"Access denied\"}");
    expect(p, "GET", "/exists/sub%2Fup.txt", NULL, NULL, 200,
           "{\"path\":\"sub/up.txt\",\"exists\":true}");
    expect(p, "GET", "/exists/nope", NULL, NULL, 200, "{\"path\":\"nope\",\"exists\":false}");
    expect(p, "GET", "/exists/..%2Fx", NULL, NULL, 403, "{\"message\":\"Access denied\"}");
    expect(p, "GET", "/list/sub%2Fup.txt", NULL, NULL, 404,
           "{\"message\":\"Path is not a directory\"}");
    /* A listing with a known mtime. */
    char path[256];
    snprintf(path, sizeof(path), "%s/sub/up.txt", f->root);
    struct timeval tv[2] = {{1700000000, 250000}, {1700000000, 250000}};
    assert_int_equal(utimes(path, tv), 0);
    expect(p, "GET", "/list/sub", NULL, NULL, 200,
           "[{\"name\":\"up.txt\",\"size\":7,\"type\":\"file\",\"mod_time\":1700000000.25}]");
    list_cap(f, p);
}

static void check_split(const char *in, const char *const *want)
{
    char **v = NULL;
    const char *msg = NULL;
    assert_int_equal(sbd_shlex_split(str_c(in), &v, &msg), 0);
    size_t i = 0;
    for (; want[i]; i++) {
        assert_non_null(v[i]);
        assert_string_equal(v[i], want[i]);
    }
    assert_null(v[i]);
    sbd_shlex_free(v);
}

static void test_shlex_and_text(void **state)
{
    (void)state;
    check_split("a b  c", (const char *const[]){"a", "b", "c", NULL});
    check_split("'a b'\"c d\"e", (const char *const[]){"a bc de", NULL});
    check_split("\"a \\\" \\\\ \\n\"", (const char *const[]){"a \" \\ \\n", NULL});
    check_split("a\\ b '' x", (const char *const[]){"a b", "", "x", NULL});
    check_split("'it''s'", (const char *const[]){"its", NULL});
    check_split("   ", (const char *const[]){NULL});
    char **v = NULL;
    const char *msg = NULL;
    assert_int_equal(sbd_shlex_split(str_c("a \"b"), &v, &msg), -EINVAL);
    assert_string_equal(msg, "No closing quotation");
    assert_int_equal(sbd_shlex_split(str_c("a\\"), &v, &msg), -EINVAL);
    assert_string_equal(msg, "No escaped character");
    const struct {
        double v;
        const char *want;
    } floats[] = {{1700000000.0, "1700000000.0"},
                  {1700000000.123456, "1700000000.123456"},
                  {0.1, "0.1"},
                  {1e16, "1e+16"},
                  {1.5e-5, "1.5e-05"},
                  {0.0001, "0.0001"},
                  {-2.5, "-2.5"},
                  {0.0, "0.0"},
                  {123.0, "123.0"}};
    for (size_t i = 0; i < ARRAY_SIZE(floats); i++) {
        struct buf b;
        buf_init(&b, 64);
        assert_int_equal(sbd_py_float(floats[i].v, &b), 0);
        assert_string_equal(buf_str(&b), floats[i].want);
        buf_done(&b);
    }
    struct buf b;
    buf_init(&b, 256);
    sbd_py_json_string(str_c("q\"\\/\x7f\xc3\xa9\x1f"), &b);
    assert_string_equal(buf_str(&b), "\"q\\\"\\\\/\x7f\xc3\xa9\\u001f\"");
    buf_reset(&b);
    sbd_py_repr_list((char *const[]){"sleep", "it's", NULL}, &b);
    assert_string_equal(buf_str(&b), "['sleep', \"it's\"]");
    buf_done(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_root_and_execute, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files, setup, teardown),
        cmocka_unit_test(test_shlex_and_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
