/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/log: line shape, lazy argument evaluation, logfmt quoting, the
 * tab message/fields split, errno variants, the line limit and batching (held until a
 * flush, the size and age bounds, warn/error and other threads' lines written in order,
 * stop and exit). Output is captured through log_set_fd on a pipe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/wait.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/xalloc.h"

static int fds[2];
static char out[LIMIT_LOG_LINE * 2];

static int setup(void **state)
{
    (void)state;
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    log_set_fd(fds[1]);
    log_set_level(LOG_INFO);
    log_set_component("test");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    log_set_fd(2);
    log_set_component(NULL);
    (void)close(fds[0]);
    (void)close(fds[1]);
    return 0;
}

/* Returns everything written since the last call (NUL-terminated). */
static const char *captured(void)
{
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fds[0], out + n, sizeof(out) - 1 - n);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    out[n] = '\0';
    return out;
}

/* Checks "ts=<RFC 3339 ms>Z " then returns the rest of the line. */
static const char *after_ts(const char *line)
{
    assert_memory_equal(line, "ts=", 3);
    const char *sp = strchr(line, ' ');
    assert_non_null(sp);
    assert_int_equal(sp - line, 3 + 24); /* 2026-11-30T01:02:03.456Z */
    char ts[32];
    memcpy(ts, line + 3, 24);
    ts[24] = '\0';
    usec_t t;
    assert_int_equal(clock_parse_rfc3339(ts, &t), 0);
    usec_t now = clock_wall_now();
    assert_true(t <= now && t + 60 * USEC_PER_SEC > now);
    return sp + 1;
}

static void test_line_shape(void **state)
{
    (void)state;
    log_info("hello %s", "world");
    assert_string_equal(after_ts(captured()), "level=info comp=test msg=\"hello world\"\n");
    log_set_component(NULL);
    log_warn("no comp");
    assert_string_equal(after_ts(captured()), "level=warn msg=\"no comp\"\n");
    log_set_component("test");
    log_error("%d%%", 5);
    assert_string_equal(after_ts(captured()), "level=error comp=test msg=\"5%\"\n");
}

static int side_effects;

static int bump(void)
{
    return ++side_effects;
}

static void test_level_checked_before_arguments(void **state)
{
    (void)state;
    side_effects = 0;
    log_debug("n=%d", bump());
    log_trace("n=%d", bump());
    assert_int_equal(side_effects, 0);
    assert_string_equal(captured(), "");
    assert_int_equal(log_debug_errno(-EIO, "n=%d", bump()), -EIO);
    assert_int_equal(side_effects, 0);
    assert_string_equal(captured(), "");
    log_info("n=%d", bump());
    assert_int_equal(side_effects, 1);
    assert_string_equal(after_ts(captured()), "level=info comp=test msg=\"n=1\"\n");
    log_set_level(LOG_TRACE);
    log_trace("n=%d", bump());
    assert_int_equal(side_effects, 2);
    assert_string_equal(after_ts(captured()), "level=trace comp=test msg=\"n=2\"\n");
    log_set_level(LOG_ERROR);
    log_warn("n=%d", bump());
    assert_int_equal(side_effects, 2);
    assert_string_equal(captured(), "");
    log_set_level(LOG_INFO);
}

static void test_quoting(void **state)
{
    (void)state;
    log_info("say \"hi\"\nbye\\ \x01\x7f end");
    assert_string_equal(after_ts(captured()),
                        "level=info comp=test msg=\"say \\\"hi\\\"\\nbye\\\\ \\x01\\x7f end\"\n");
}

static void test_fields(void **state)
{
    (void)state;
    log_info("reconciled\tkey=%s ms=%d", "ns/a", 5);
    assert_string_equal(after_ts(captured()),
                        "level=info comp=test msg=\"reconciled\" key=ns/a ms=5\n");
    /* Only the first tab splits; a line break in a field cannot start a new line. */
    log_info("m\tk=\"a\tb\" v=x\ny");
    assert_string_equal(after_ts(captured()),
                        "level=info comp=test msg=\"m\" k=\"a\tb\" v=x\\ny\n");
    log_info("trailing tab\t");
    assert_string_equal(after_ts(captured()), "level=info comp=test msg=\"trailing tab\"\n");
}

static void test_errno_variants(void **state)
{
    (void)state;
    assert_int_equal(log_error_errno(-ENOENT, "open failed\tpath=%s", "/x"), -ENOENT);
    assert_string_equal(
        after_ts(captured()),
        "level=error comp=test msg=\"open failed\" err=\"No such file or directory\" path=/x\n");
    assert_int_equal(log_warn_errno(EACCES, "denied"), EACCES);
    assert_string_equal(after_ts(captured()),
                        "level=warn comp=test msg=\"denied\" err=\"Permission denied\"\n");
    char b[64];
    assert_string_equal(log_strerror(-ENOENT, b, sizeof(b)), "No such file or directory");
    assert_string_equal(log_strerror(ENOENT, b, sizeof(b)), "No such file or directory");
}

static void test_long_line_is_cut(void **state)
{
    (void)state;
    size_t n = LIMIT_LOG_LINE + 500;
    char *big = xmalloc(n + 1);
    memset(big, 'a', n);
    big[n] = '\0';
    log_info("%s", big);
    const char *line = captured();
    size_t len = strlen(line);
    assert_true(len <= LIMIT_LOG_LINE);
    assert_true(len > LIMIT_LOG_LINE - 200); /* cut, not dropped */
    assert_int_equal(line[len - 1], '\n');
    assert_ptr_equal(strchr(line, '\n'), line + len - 1); /* one line */
    assert_non_null(strstr(line, "msg=\"aaaa"));
    xfree(big);
}

static void test_parse_level(void **state)
{
    (void)state;
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
    enum log_level l;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(log_parse_level(names[i], &l), 0);
        assert_int_equal(l, i);
    }
    assert_int_equal(log_parse_level("3", &l), 0);
    assert_int_equal(l, LOG_DEBUG);
    l = LOG_INFO;
    assert_int_equal(log_parse_level("5", &l), -EINVAL);
    assert_int_equal(log_parse_level("INFO", &l), -EINVAL);
    assert_int_equal(log_parse_level("", &l), -EINVAL);
    assert_int_equal(log_parse_level("30", &l), -EINVAL);
    assert_int_equal(l, LOG_INFO);
}

/* ---- batching ------------------------------------------------------------------------- */

/* The messages of the captured lines, in order, separated by ',' ("" when none). */
static const char *messages(void)
{
    static char msgs[4096];
    const char *p = captured();
    size_t n = 0;
    msgs[0] = '\0';
    while ((p = strstr(p, "msg=\"")) != NULL) {
        p += 5;
        const char *q = strchr(p, '"');
        assert_non_null(q);
        assert_true(n + (size_t)(q - p) + 2 < sizeof(msgs));
        if (n)
            msgs[n++] = ',';
        memcpy(msgs + n, p, (size_t)(q - p));
        n += (size_t)(q - p);
        msgs[n] = '\0';
        p = q;
    }
    return msgs;
}

static void test_batch_held_until_flush(void **state)
{
    (void)state;
    log_batch_start();
    log_info("a");
    log_debug("not at this level");
    log_info("b");
    log_info("c");
    assert_string_equal(messages(), "");
    log_flush();
    assert_string_equal(messages(), "a,b,c");
    log_flush(); /* nothing pending: nothing written */
    assert_string_equal(messages(), "");
    log_batch_stop();
    log_info("d"); /* not batching any more: at once */
    assert_string_equal(messages(), "d");
}

static void test_batch_warn_and_error_flush_in_order(void **state)
{
    (void)state;
    log_batch_start();
    log_info("a");
    log_warn("b");
    assert_string_equal(messages(), "a,b");
    log_info("c");
    assert_int_equal(log_error_errno(-EIO, "d"), -EIO);
    assert_string_equal(messages(), "c,d");
    log_batch_stop();
}

static void *log_from_thread(void *arg)
{
    log_info("%s", (const char *)arg);
    return NULL;
}

static void test_batch_other_threads_keep_order(void **state)
{
    (void)state;
    pthread_t t;
    log_batch_start();
    log_info("mine");
    assert_int_equal(pthread_create(&t, NULL, log_from_thread, "theirs"), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    /* A thread that does not batch writes at once, after what was pending. */
    assert_string_equal(messages(), "mine,theirs");
    log_batch_stop();
}

static void test_batch_stop_flushes(void **state)
{
    (void)state;
    log_batch_start();
    log_batch_start(); /* idempotent */
    log_info("a");
    log_batch_stop();
    assert_string_equal(messages(), "a");
    log_batch_stop(); /* idempotent */
    log_flush();
    assert_string_equal(messages(), "");
}

static void test_batch_age_bound(void **state)
{
    (void)state;
    struct timespec ts = {.tv_nsec = (LOG_BATCH_MAX_MS + 20) * 1000000L};
    log_batch_start();
    log_info("old");
    (void)nanosleep(&ts, NULL);
    log_info("new"); /* the oldest pending line waited too long: both go */
    assert_string_equal(messages(), "old,new");
    log_info("fresh");
    assert_string_equal(messages(), "");
    log_batch_stop();
    assert_string_equal(messages(), "fresh");
}

/* More than LOG_BATCH_BYTES of lines: written before any flush, all of them, in order,
 * in few writes. */
static void test_batch_size_bound(void **state)
{
    (void)state;
    enum { LINES = 1000 };
    (void)fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
    size_t size = (size_t)LINES * 200, n = 0;
    char *all = xmalloc(size + 1);
    log_batch_start();
    for (int i = 0; i < LINES; i++)
        log_info("line %04d %0100d", i, 0);
    ssize_t k;
    while ((k = read(fds[0], all + n, size - n)) > 0)
        n += (size_t)k;
    size_t before_flush = n;
    log_batch_stop();
    while ((k = read(fds[0], all + n, size - n)) > 0)
        n += (size_t)k;
    all[n] = '\0';
    /* The bound wrote whole batches already, but not everything: the rest waited. */
    assert_true(before_flush >= LOG_BATCH_BYTES);
    assert_true(before_flush < n);
    const char *p = all;
    char want[32];
    for (int i = 0; i < LINES; i++) {
        (void)snprintf(want, sizeof(want), "msg=\"line %04d ", i);
        p = strstr(p, want);
        assert_non_null(p);
    }
    xfree(all);
}

/* exit() writes what is pending (a crash-free exit loses nothing). */
static void test_batch_written_at_exit(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        log_batch_start();
        log_info("last words");
        exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_string_equal(messages(), "last words");
}

/* log_quote on its own: the escapes, UTF-8 passing, and a cut at the buffer limit. */
static void test_quote(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 64);
    static const char in[] = "a \"q\" \\ \n\t\x01\x7f \xc3\xa9";
    log_quote(&b, in, sizeof(in) - 1);
    assert_string_equal(buf_str(&b), "\"a \\\"q\\\" \\\\ \\n\\x09\\x01\\x7f \xc3\xa9\"");
    buf_reset(&b);
    log_quote(&b, "x\0y", 3); /* n counts, not the NUL */
    assert_string_equal(buf_str(&b), "\"x\\x00y\"");
    buf_done(&b);

    buf_init(&b, 6);
    log_quote(&b, "abcdefgh", 8);
    assert_string_equal(buf_str(&b), "\"abcde"); /* cut; the closing quote does not fit */
    buf_done(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_shape),
        cmocka_unit_test(test_level_checked_before_arguments),
        cmocka_unit_test(test_quoting),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_errno_variants),
        cmocka_unit_test(test_long_line_is_cut),
        cmocka_unit_test(test_parse_level),
        cmocka_unit_test(test_batch_held_until_flush),
        cmocka_unit_test(test_batch_warn_and_error_flush_in_order),
        cmocka_unit_test(test_batch_other_threads_keep_order),
        cmocka_unit_test(test_batch_stop_flushes),
        cmocka_unit_test(test_batch_age_bound),
        cmocka_unit_test(test_batch_size_bound),
        cmocka_unit_test(test_batch_written_at_exit),
        cmocka_unit_test(test_quote),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
