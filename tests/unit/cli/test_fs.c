/* SPDX-License-Identifier: Apache-2.0 */
/* kubectl-sandbox stat/mkdir/mv/watch helpers: request paths, watch event lines (never
 * dropped for their escapes) and watch's output and its write errors; stat's request
 * (-L/--dereference adds ?follow=true after the escaped path) against a one-request
 * HTTP server standing in for sandboxd (--sandboxd-url). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "cli/cli.h"
#include "cli/fs.h"
#include "common/xalloc.h"

static void test_api_path(void **state)
{
    (void)state;
    static const struct {
        const char *prefix, *in, *want;
    } cases[] = {
        {"/v1/stat/", "a b/c", "/v1/stat/a%20b/c"},
        {"/v1/watch/", "", "/v1/watch/"},
        {"/v1/mkdir/", "//x/y?z#", "/v1/mkdir/x/y%3Fz%23"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct buf b;
        buf_init(&b, 1024);
        assert_int_equal(cli_fs_api_path(cases[i].prefix, cases[i].in, &b), 0);
        assert_string_equal(buf_str(&b), cases[i].want);
        buf_done(&b);
    }
    struct buf small;
    buf_init(&small, 12);
    assert_int_equal(cli_fs_api_path("/v1/stat/", "abcdefghijkl", &small), -E2BIG);
    buf_done(&small);
}

static void test_format_event(void **state)
{
    (void)state;
    static const struct {
        const char *json, *want;
        int rc;
    } cases[] = {
        {"{\"type\":\"create\",\"path\":\"a/b\",\"is_dir\":false}", "create    a/b\n", 0},
        {"{\"type\":\"create\",\"path\":\"d\",\"is_dir\":true}", "create    d/\n", 0},
        {"{\"type\":\"delete\",\"path\":\"\",\"is_dir\":true}", "delete    ./\n", 0},
        {"{\"type\":\"move\",\"path\":\"b\",\"from\":\"a\",\"to\":\"b\",\"is_dir\":false}",
         "move      a -> b\n", 0},
        {"{\"type\":\"overflow\",\"lost\":3}", "overflow  3 events lost\n", 0},
        {"{\"type\":\"overflow\",\"lost\":null}", "overflow  events lost\n", 0},
        {"{\"type\":\"error\",\"message\":\"too many\"}", "error     too many\n", 0},
        {"{\"type\":\"ready\",\"path\":\"/\"}", "", 1},
        {"{\"path\":\"x\"}", "", -EINVAL},
        /* names from the sandbox reach the terminal without controls */
        {"{\"type\":\"create\",\"path\":\"\\u001b]52;c;aGk=\\u0007\",\"is_dir\":false}",
         "create    \\x1b]52;c;aGk=\\x07\n", 0},
        {"{\"type\":\"move\",\"from\":\"a\\nb\",\"to\":\"\\u009b31m\",\"is_dir\":false}",
         "move      a\\x0ab -> \\xc2\\x9b31m\n", 0},
        {"{\"type\":\"error\",\"message\":\"\\u001b[2J\\u007f\"}", "error     \\x1b[2J\\x7f\n", 0},
        {"{\"type\":\"\\u001b[H\",\"path\":\"p\"}", "\\x1b[H       p\n", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = json_loads(cases[i].json, 0, NULL);
        assert_non_null(j);
        struct buf b;
        buf_init(&b, 1024);
        assert_int_equal(cli_fs_format_event(j, &b), cases[i].rc);
        assert_string_equal(buf_str(&b), cases[i].want);
        assert_null(memchr(buf_str(&b), 0x1b, b.len));
        buf_done(&b);
        json_decref(j);
    }
}

#define CUT "\xe2\x80\xa6 (cut)\n"

/* A line that does not fit escaped is cut at a UTF-8 boundary and marked, not dropped:
 * a name of control characters shorter than the limit takes 4 times as much escaped. */
static void test_format_event_cut(void **state)
{
    (void)state;
    json_t *j = json_pack("{s:s,s:s}", "type", "create", "path",
                          "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
                          "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01");
    struct buf b;
    buf_init(&b, 64); /* 32 bytes, 128 escaped: 11 escapes fit before the mark */
    assert_int_equal(cli_fs_format_event(j, &b), 0);
    assert_string_equal(buf_str(&b), "create    \\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01"
                                     "\\x01\\x01\\x01" CUT);
    assert_int_equal(b.len, 64);
    json_decref(j);
    buf_done(&b);
    char name[41]; /* 20 two-byte characters: the cut may not split one */
    for (int i = 0; i < 20; i++)
        memcpy(name + 2 * i, "\xc3\xa9", 2);
    name[40] = '\0';
    j = json_pack("{s:s,s:s}", "type", "create", "path", name);
    buf_init(&b, 10 + 2 * 9 + 1 + sizeof(CUT) - 1); /* nine and a half fit before the mark */
    assert_int_equal(cli_fs_format_event(j, &b), 0);
    assert_string_equal(buf_str(&b),
                        "create    \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3"
                        "\xa9\xc3\xa9\xc3\xa9" CUT);
    buf_done(&b);
    buf_init(&b, sizeof(CUT) - 2); /* not even the mark */
    assert_int_equal(cli_fs_format_event(j, &b), -E2BIG);
    buf_done(&b);
    json_decref(j);
}

/* What was written to f. */
static void slurp(FILE *f, struct buf *out)
{
    char chunk[65536];
    size_t n;
    rewind(f);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        assert_int_equal(buf_append(out, chunk, n), 0);
}

/* Appends s, then n copies of rep to b. */
static void put_run(struct buf *b, const char *s, const char *rep, size_t n)
{
    assert_int_equal(buf_puts(b, s), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(buf_puts(b, rep), 0);
}

/* watch prints an event of the longest line sandboxd may send, its names (one, or a
 * move's two around mid) all DEL (one byte in JSON, four escaped), whole. */
static void check_watch_escapes(const char *head, const char *mid, const char *tail,
                                const char *want_head, const char *want_mid)
{
    size_t k = LIMIT_CLI_SBD_LINE - strlen(head) - strlen(mid) - strlen(tail);
    size_t k1 = *mid ? k / 2 : k;
    struct buf in, want, got;
    buf_init(&in, LIMIT_CLI_SBD_LINE);
    buf_init(&want, 5u * LIMIT_CLI_SBD_LINE);
    buf_init(&got, 5u * LIMIT_CLI_SBD_LINE);
    put_run(&in, head, "\x7f", k1);
    put_run(&in, mid, "\x7f", k - k1);
    put_run(&in, tail, "", 0);
    put_run(&want, want_head, "\\x7f", k1);
    put_run(&want, want_mid, "\\x7f", k - k1);
    put_run(&want, "\n", "", 0);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(cli_watch_print(f, false, in.data, in.len), 0);
    slurp(f, &got);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, want.len);
    (void)fclose(f);
    buf_done(&in);
    buf_done(&want);
    buf_done(&got);
}

static void test_watch_escapes_whole(void **state)
{
    (void)state;
    check_watch_escapes("{\"type\":\"create\",\"path\":\"", "", "\",\"is_dir\":false}",
                        "create    ", "");
    check_watch_escapes("{\"type\":\"move\",\"is_dir\":false,\"from\":\"", "\",\"to\":\"", "\"}",
                        "move      ", " -> ");
}

/* A write that fails inside the line's own write (more than stdio's buffer) keeps its
 * errno: EPIPE when the reader went away (quiet), not EIO; the disk full, ENOSPC. */
static void test_watch_write_errors(void **state)
{
    (void)state;
    static char name[3 * BUFSIZ];
    memset(name, 'a', sizeof(name) - 1);
    json_t *j = json_pack("{s:s,s:s}", "type", "create", "path", name);
    char *human = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    FILE *out = fdopen(fds[1], "w");
    assert_non_null(out);
    const char *ev = "{\"type\":\"create\",\"path\":\"x\"}";
    assert_int_equal(cli_watch_print(out, false, ev, strlen(ev)), 0);
    char b[64];
    assert_int_equal(read(fds[0], b, sizeof(b)), strlen("create    x\n"));
    (void)close(fds[0]); /* | head went away */
    assert_int_equal(cli_watch_print(out, false, human, strlen(human)), -EPIPE);
    clearerr(out);
    assert_int_equal(cli_watch_print(out, true, human, strlen(human)), -EPIPE);
    clearerr(out);
    assert_int_equal(cli_watch_print(out, false, ev, strlen(ev)), -EPIPE); /* at the flush */
    (void)fclose(out);
    (void)signal(SIGPIPE, old);
    FILE *full = fopen("/dev/full", "w");
    assert_non_null(full);
    assert_int_equal(cli_watch_print(full, false, human, strlen(human)), -ENOSPC);
    clearerr(full);
    assert_int_equal(cli_watch_print(full, true, ev, strlen(ev)), -ENOSPC);
    (void)fclose(full);
    xfree(human); /* jansson allocates with malloc: see output.c */
}

/* A sandboxd stand-in serving one connection: it keeps the request line and answers
 * a FileStat. */
struct fake_sbd {
    int lfd;
    uint16_t port;
    pthread_t th;
    char line[512];
};

static void *fake_serve(void *arg)
{
    static const char body[] = "{\"name\":\"l\",\"path\":\"/l\",\"type\":\"file\",\"size\":5,"
                               "\"mode\":\"0640\",\"mtime\":\"2026-01-01T00:00:00.000000000Z\"}";
    struct fake_sbd *f = arg;
    char req[4096], resp[512];
    size_t len = 0;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    while (len < sizeof(req) - 1) {
        ssize_t n = recv(fd, req + len, sizeof(req) - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        req[len] = '\0';
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    req[len] = '\0';
    (void)snprintf(f->line, sizeof(f->line), "%.*s", (int)strcspn(req, "\r\n"), req);
    int n = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     strlen(body), body);
    (void)send(fd, resp, (size_t)n, MSG_NOSIGNAL);
    (void)close(fd);
    return NULL;
}

static void fake_start(struct fake_sbd *f)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    *f = (struct fake_sbd){0};
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->lfd >= 0);
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(f->lfd, 4), 0);
    assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &al), 0);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->th, NULL, fake_serve, f), 0);
}

static void fake_done(struct fake_sbd *f)
{
    (void)shutdown(f->lfd, SHUT_RDWR);
    assert_int_equal(pthread_join(f->th, NULL), 0);
    (void)close(f->lfd);
}

/* Runs `stat sb` + args (at most 4) against a fake sandboxd; returns the exit code, the
 * request line it got in line and what stat printed in out. */
static int run_stat(const char *const *args, size_t n, char *line, size_t size, struct buf *out)
{
    struct fake_sbd f;
    fake_start(&f);
    char url[64], a0[] = "stat", a1[] = "sb", *argv[6] = {a0, a1}, *owned[4];
    (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u", f.port);
    FILE *o = tmpfile(), *e = tmpfile();
    assert_true(o && e && n <= 4);
    struct cli_globals g = {.output = "", .sandboxd_url = url, .out = o, .err = e};
    for (size_t i = 0; i < n; i++) /* getopt permutes argv: freed from owned */
        argv[2 + i] = owned[i] = xstrdup(args[i]);
    int rc = cli_cmd_stat(&g, (int)(2 + n), argv);
    (void)fflush(o);
    slurp(o, out);
    fake_done(&f);
    (void)snprintf(line, size, "%s", f.line);
    for (size_t i = 0; i < n; i++)
        xfree(owned[i]);
    (void)fclose(o);
    (void)fclose(e);
    return rc;
}

static void test_stat_dereference(void **state)
{
    (void)state;
    static const struct {
        const char *args[3];
        size_t n;
        const char *want;
    } cases[] = {
        {{"l"}, 1, "GET /v1/stat/l HTTP/1.1"},
        {{"l", "-L"}, 2, "GET /v1/stat/l?follow=true HTTP/1.1"},
        {{"-L", "/a b/l"}, 2, "GET /v1/stat/a%20b/l?follow=true HTTP/1.1"},
        {{"--dereference", "x?y#z"}, 2, "GET /v1/stat/x%3Fy%23z?follow=true HTTP/1.1"},
        {{"-L", "/"}, 2, "GET /v1/stat/?follow=true HTTP/1.1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char line[512];
        struct buf out;
        buf_init(&out, 4096);
        assert_int_equal(run_stat(cases[i].args, cases[i].n, line, sizeof(line), &out), CLI_OK);
        assert_string_equal(line, cases[i].want);
        assert_string_equal(buf_str(&out), "/l  file  5  0640  2026-01-01T00:00:00.000000000Z\n");
        buf_done(&out);
    }
}

/* -L is stat's alone: the other commands refuse it before any request. */
static void test_dereference_only_for_stat(void **state)
{
    (void)state;
    FILE *e = tmpfile();
    assert_non_null(e);
    struct cli_globals g = {.output = "", .sandboxd_url = "http://127.0.0.1:1", .out = e, .err = e};
    char a0[] = "mkdir", a1[] = "sb", a2[] = "d", a3[] = "-L", a4[] = "watch";
    char *mk[] = {a0, a1, a2, a3}, *w[] = {a4, a1, a2, a3};
    assert_int_equal(cli_cmd_mkdir(&g, 4, mk), CLI_USAGE);
    assert_int_equal(cli_cmd_watch(&g, 4, w), CLI_USAGE);
    char h[256] = "";
    rewind(e);
    assert_non_null(fgets(h, sizeof(h), e));
    assert_non_null(strstr(h, "bad option -L"));
    (void)fclose(e);
    FILE *hf = tmpfile();
    assert_non_null(hf);
    cli_help_stat(hf);
    struct buf help;
    buf_init(&help, 4096);
    slurp(hf, &help);
    assert_non_null(strstr(buf_str(&help), "[-L]"));
    assert_non_null(strstr(buf_str(&help), "--dereference"));
    buf_done(&help);
    (void)fclose(hf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_path),
        cmocka_unit_test(test_format_event),
        cmocka_unit_test(test_format_event_cut),
        cmocka_unit_test(test_watch_escapes_whole),
        cmocka_unit_test(test_watch_write_errors),
        cmocka_unit_test(test_stat_dereference),
        cmocka_unit_test(test_dereference_only_for_stat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
