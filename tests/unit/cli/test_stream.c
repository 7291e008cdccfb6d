/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's streaming NDJSON responses: lines of a 200 answer split across chunks reach
 * the callback whole (blank heartbeats skipped), a refusal's body is kept up to its
 * limit, an overlong line or the callback's stop ends the transfer, and the texts for a
 * broken stream. cli_write_all against a pipe; the end-of-command check of stdout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include "cli/cli.h"
#include "cli/stream.h"
#include "common/limits.h"

struct got {
    struct buf lines; /* each line and a '|' */
    int stop_at;      /* stop (-EPIPE) at this line number (1-based), 0: never */
    int n;
};

static int on_line(void *ctx, const char *line, size_t len)
{
    struct got *g = ctx;
    if (++g->n == g->stop_at)
        return -EPIPE;
    (void)buf_append(&g->lines, line, len);
    (void)buf_putc(&g->lines, '|');
    return 0;
}

static size_t feed(struct cli_stream *st, const char *s)
{
    return cli_stream_write((char *)s, 1, strlen(s), st);
}

static void test_lines_across_chunks(void **state)
{
    (void)state;
    struct got g = {0};
    buf_init(&g.lines, 1024);
    struct cli_stream st;
    cli_stream_init(&st, 64, on_line, &g);
    st.status = 200; /* as curl reports it once the head came */
    assert_int_equal(feed(&st, "{\"a\":1}\n{\"b\""), 12);
    assert_int_equal(feed(&st, ":2}\r\n\n  \n{\"c\":3}"), 16);
    assert_string_equal(buf_str(&g.lines), "{\"a\":1}|{\"b\":2}|");
    assert_int_equal(feed(&st, "\n"), 1);
    assert_string_equal(buf_str(&g.lines), "{\"a\":1}|{\"b\":2}|{\"c\":3}|");
    assert_int_equal(st.errbody.len, 0);
    cli_stream_done(&st);
    buf_done(&g.lines);
}

static void test_refusal_body_kept(void **state)
{
    (void)state;
    struct got g = {0};
    buf_init(&g.lines, 1024);
    struct cli_stream st;
    cli_stream_init(&st, 64, on_line, &g);
    st.status = 404;
    assert_int_equal(feed(&st, "{\"code\":\"NOT_FOUND\"}\n"), 21);
    assert_string_equal(buf_str(&st.errbody), "{\"code\":\"NOT_FOUND\"}\n");
    assert_int_equal(g.n, 0);
    /* a long refusal: the start is kept, the transfer goes on */
    static char big[LIMIT_CLI_SBD_ERROR + 100];
    memset(big, 'x', sizeof(big) - 1);
    assert_int_equal(feed(&st, big), sizeof(big) - 1);
    assert_int_equal(st.errbody.len, 21);
    /* a new transfer starts clean */
    cli_stream_start(&st, NULL);
    assert_int_equal(st.status, 0);
    assert_int_equal(st.errbody.len, 0);
    cli_stream_done(&st);
    buf_done(&g.lines);
}

static void test_stops(void **state)
{
    (void)state;
    struct got g = {.stop_at = 2};
    buf_init(&g.lines, 1024);
    struct cli_stream st;
    cli_stream_init(&st, 8, on_line, &g);
    st.status = 200;
    assert_int_equal(feed(&st, "one\ntwo\nthree\n"), 0); /* the callback stopped */
    assert_string_equal(buf_str(&g.lines), "one|");
    assert_int_equal(st.err, -EPIPE); /* the callback's reason is kept */
    cli_stream_start(&st, NULL);
    assert_int_equal(st.err, 0);
    st.status = 200;
    g.stop_at = 0;
    assert_int_equal(feed(&st, "123456789"), 0); /* over 8 bytes: ends the transfer */
    assert_int_equal(st.err, -E2BIG);            /* a protocol error, not a write error */
    assert_string_equal(cli_stream_why(st.err, CURLE_WRITE_ERROR, ""), "event line too long");
    cli_stream_done(&st);
    buf_done(&g.lines);
}

static void test_why(void **state)
{
    (void)state;
    assert_string_equal(cli_stream_why(-EPROTO, CURLE_OK, ""), "malformed event");
    assert_string_equal(cli_stream_why(-EPROTO, CURLE_RECV_ERROR, "x"), "malformed event");
    assert_string_equal(cli_stream_why(0, CURLE_OK, "ignored"), "connection closed");
    assert_string_equal(cli_stream_why(0, CURLE_RECV_ERROR, "reset by peer"), "reset by peer");
    assert_string_equal(cli_stream_why(0, CURLE_RECV_ERROR, ""),
                        curl_easy_strerror(CURLE_RECV_ERROR));
    assert_string_equal(cli_stream_why(0, CURLE_RECV_ERROR, NULL),
                        curl_easy_strerror(CURLE_RECV_ERROR));
}

static void test_write_all(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(cli_write_all(fds[1], "hello", 5), 0);
    char b[8] = "";
    assert_int_equal(read(fds[0], b, sizeof(b)), 5);
    assert_memory_equal(b, "hello", 5);
    (void)close(fds[0]);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    assert_int_equal(cli_write_all(fds[1], "x", 1), -EPIPE); /* the reader went away */
    (void)signal(SIGPIPE, old);
    (void)close(fds[1]);
    assert_int_equal(cli_write_all(-1, "x", 1), -EBADF);
}

/* The end-of-command check of stdout: a failed write turns success into CLI_ERR (with
 * a message), EPIPE does not, and another exit code is kept. */
static void test_output_done(void **state)
{
    (void)state;
    FILE *err = fopen("/dev/null", "w");
    assert_non_null(err);
    FILE *full = fopen("/dev/full", "w");
    assert_non_null(full);
    assert_int_equal(fputs("lost\n", full) >= 0, 1); /* buffered: fails at the flush */
    assert_int_equal(cli_output_done(full, err, CLI_OK), CLI_ERR);
    assert_int_equal(fputs("lost\n", full) >= 0, 1);
    assert_int_equal(cli_output_done(full, err, CLI_SBD), CLI_SBD);
    (void)fclose(full);
    FILE *ok = fopen("/dev/null", "w");
    assert_non_null(ok);
    assert_int_equal(fputs("fine\n", ok) >= 0, 1);
    assert_int_equal(cli_output_done(ok, err, CLI_OK), CLI_OK);
    assert_int_equal(cli_output_done(ok, err, 7), 7);
    (void)fclose(ok);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    (void)close(fds[0]);
    FILE *gone = fdopen(fds[1], "w");
    assert_non_null(gone);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    assert_int_equal(fputs("x\n", gone) >= 0, 1);
    assert_int_equal(cli_output_done(gone, err, CLI_OK), CLI_OK); /* | head */
    (void)signal(SIGPIPE, old);
    (void)fclose(gone);
    (void)fclose(err);
}

/* A stream on a pipe whose reader is gone (SIGPIPE must be ignored to write to it). */
static FILE *gone_pipe(void)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    (void)close(fds[0]);
    FILE *f = fdopen(fds[1], "w");
    assert_non_null(f);
    return f;
}

/* EPIPE inside an earlier write (port-forward's "Handling connection" line after `|
 * head` went away; a write past the buffer goes out at once): glibc drops the buffer and
 * keeps no errno, so the final fflush returns 0. Still EPIPE: quiet, the code kept. */
static void test_output_done_earlier_epipe(void **state)
{
    (void)state;
    static char big[4 * BUFSIZ];
    memset(big, 'x', sizeof(big));
    FILE *err = tmpfile();
    assert_non_null(err);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    FILE *gone = gone_pipe();
    assert_int_equal(fputs("Forwarding from 127.0.0.1:8080\n", gone) >= 0, 1);
    assert_true(fwrite(big, 1, sizeof(big), gone) < sizeof(big)); /* EPIPE in here */
    assert_true(ferror(gone));
    assert_int_equal(cli_output_done(gone, err, CLI_OK), CLI_OK);
    assert_int_equal(cli_output_done(gone, err, 7), 7);
    assert_int_equal(ftell(err), 0); /* nothing said */
    (void)fclose(gone);
    (void)signal(SIGPIPE, old);
    (void)fclose(err);
}

/* The errno of a failed write: the one given, else EPIPE only for a pipe or socket whose
 * reader is gone, else EIO. */
static void test_output_error(void **state)
{
    (void)state;
    FILE *file = tmpfile();
    assert_non_null(file);
    assert_int_equal(cli_output_error(file, ENOSPC), -ENOSPC);
    assert_int_equal(cli_output_error(file, 0), -EIO);
    (void)fclose(file);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    FILE *open_pipe = fdopen(fds[1], "w");
    assert_non_null(open_pipe);
    assert_int_equal(cli_output_error(open_pipe, 0), -EIO); /* its reader is still there */
    (void)close(fds[0]);
    assert_int_equal(cli_output_error(open_pipe, 0), -EPIPE);
    (void)fclose(open_pipe);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    FILE *sock = fdopen(fds[0], "w");
    assert_non_null(sock);
    assert_int_equal(cli_output_error(sock, 0), -EIO);
    (void)close(fds[1]);
    assert_int_equal(cli_output_error(sock, 0), -EPIPE);
    (void)fclose(sock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_across_chunks),
        cmocka_unit_test(test_refusal_body_kept),
        cmocka_unit_test(test_stops),
        cmocka_unit_test(test_why),
        cmocka_unit_test(test_write_all),
        cmocka_unit_test(test_output_done),
        cmocka_unit_test(test_output_done_earlier_epipe),
        cmocka_unit_test(test_output_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
