/* SPDX-License-Identifier: Apache-2.0 */
/* PTY processes against a real daemon: a signal reaches the foreground job of an
 * interactive shell (its own process group), a kill reaches the shell's background jobs
 * (other groups of its session), closing stdin after a line without '\n' ends the
 * input (two ^D: the first only hands the line over), and a program that closes its
 * terminal before it exits is not hung up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <unistd.h>

#include "common/base64.h"
#include "common/clock.h"
#include "ndjson_client.h"
#include "sbd_test.h"

#define SHELL_START                                                  \
    "{\"command\": [\"bash\", \"--norc\", \"--noprofile\", \"-i\"]," \
    " \"env\": {\"HISTFILE\": \"/dev/null\", \"PS1\": \"$ \"},"      \
    " \"pty\": {\"cols\": 80, \"rows\": 24}}"

/* A background job a failed test left running: killed by teardown. */
static pid_t leftover;

static int setup(void **state)
{
    *state = sbd_fixture_start(NULL, 0);
    return 0;
}

/* The fields of /proc/<pid>/stat after comm. */
struct ids {
    char state;
    int pgrp, session, tpgid;
};

/* Reads pid's stat (comm parsed from the last ')'); false when it is gone. */
static bool read_ids(pid_t pid, struct ids *ret)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return false;
    char *l = fgets(line, sizeof(line), fp);
    fclose(fp);
    char *end = l ? strrchr(line, ')') : NULL;
    int ppid, tty;
    return end && sscanf(end + 1, " %c %d %d %d %d %d", &ret->state, &ppid, &ret->pgrp,
                         &ret->session, &tty, &ret->tpgid) == 6;
}

/* True when pid runs "sleep <arg>" (not a reused pid). */
static bool is_sleep(pid_t pid, const char *arg)
{
    char path[64], cmd[64] = {0}, want[64];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return false;
    size_t n = fread(cmd, 1, sizeof(cmd) - 1, fp);
    fclose(fp);
    int w = snprintf(want, sizeof(want), "sleep%c%s", '\0', arg);
    return n == (size_t)w + 1 && memcmp(cmd, want, (size_t)w + 1) == 0;
}

static int teardown(void **state)
{
    if (leftover > 0 && is_sleep(leftover, "777"))
        (void)kill(leftover, SIGKILL);
    leftover = 0;
    sbd_fixture_stop(*state);
    return 0;
}

static const char *jstr(const json_t *j, const char *k)
{
    return json_string_value(json_object_get(j, k));
}

static json_int_t jint(const json_t *j, const char *k)
{
    return json_integer_value(json_object_get(j, k));
}

/* POST /v1/processes/run with body; returns its answer (200 asserted), a new reference. */
static json_t *run(uint16_t port, const char *body)
{
    struct test_http_resp r;
    assert_int_equal(
        sbd_do(port, "POST", "/v1/processes/run", "Content-Type: application/json\r\n", body, &r),
        200);
    json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
    test_http_resp_done(&r);
    assert_non_null(j);
    return j;
}

static int post(uint16_t port, const char *target, const char *body)
{
    struct test_http_resp r;
    int st = sbd_do(port, "POST", target, NULL, body, &r);
    test_http_resp_done(&r);
    return st;
}

static int post_action(uint16_t port, uint32_t id, const char *action, const char *body)
{
    char path[96];
    snprintf(path, sizeof(path), "/v1/processes/%u/%s", id, action);
    return post(port, path, body);
}

/* Starts an interactive bash on a PTY; returns its id, *ret_pid its pid. */
static uint32_t start_shell(struct sbd_fixture *f, struct nd_client *n, pid_t *ret_pid)
{
    assert_int_equal(nd_start(n, f->port, "/v1/processes", SHELL_START), 200);
    json_t *j = nd_next(n, 10000);
    assert_non_null(j);
    assert_string_equal(jstr(j, "type"), "start");
    uint32_t id = (uint32_t)jint(j, "id");
    *ret_pid = (pid_t)jint(j, "pid");
    json_decref(j);
    return id;
}

/* Reads events, decoding stdout into out, until out holds want at or after offset from,
 * or the exit event comes, or ms pass. Returns the exit event (new reference) or NULL. */
static json_t *read_from(struct nd_client *n, struct buf *out, size_t from, const char *want,
                         int ms)
{
    usec_t end = clock_now() + (usec_t)ms * USEC_PER_MSEC;
    while (!(want && out->len >= from && strstr(buf_str(out) + from, want)) && clock_now() < end) {
        json_t *j = nd_next(n, (int)((end - clock_now()) / USEC_PER_MSEC) + 1);
        if (!j)
            return NULL;
        if (strcmp(jstr(j, "type"), "exit") == 0)
            return j;
        if (strcmp(jstr(j, "type"), "stdout") == 0)
            (void)base64_decode(jstr(j, "data"), strlen(jstr(j, "data")), out);
        json_decref(j);
    }
    return NULL;
}

static json_t *read_until(struct nd_client *n, struct buf *out, const char *want, int ms)
{
    return read_from(n, out, 0, want, ms);
}

/* The pid of a "sleep <arg>" in session sid that is the terminal's foreground group (its
 * own group: a job of the shell), once there is one (10 s at most). */
static pid_t find_foreground_sleep(pid_t sid, const char *arg)
{
    for (int i = 0; i < 1000; i++) {
        DIR *d = opendir("/proc");
        assert_non_null(d);
        struct dirent *e;
        pid_t found = 0;
        while (!found && (e = readdir(d))) {
            pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);
            struct ids st;
            if (pid > 0 && read_ids(pid, &st) && st.session == sid && st.pgrp == pid &&
                st.tpgid == pid && is_sleep(pid, arg))
                found = pid;
        }
        closedir(d);
        if (found)
            return found;
        usleep(10000);
    }
    fail_msg("no foreground sleep in session %d", (int)sid);
    return -1;
}

/* True once pid is gone or a zombie (an orphan whose reaper has not reaped it yet). */
static bool wait_gone(pid_t pid, int ms)
{
    for (int i = 0; i <= ms / 10; i++) {
        struct ids st;
        if ((kill(pid, 0) < 0 && errno == ESRCH) || (read_ids(pid, &st) && st.state == 'Z'))
            return true;
        usleep(10000);
    }
    return false;
}

/* SIGINT over the API reaches the foreground job of an interactive shell, which runs in a
 * process group of its own: the job ends and the shell runs the next command. */
static void test_pty_signal_foreground_job(void **state)
{
    struct sbd_fixture *f = *state;
    struct nd_client n;
    pid_t shell;
    uint32_t id = start_shell(f, &n, &shell);
    assert_int_equal(post_action(f->port, id, "stdin", "sleep 31\n"), 204);
    pid_t job = find_foreground_sleep(shell, "31");
    assert_int_not_equal(job, shell);
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_null(read_until(&n, &out, "$ ", 10000)); /* the prompt sleep was typed at */
    size_t next = (size_t)(strstr(buf_str(&out), "$ ") - out.data) + 2;
    assert_int_equal(post_action(f->port, id, "signal", "{\"signal\": \"SIGINT\"}"), 204);
    /* The job ends: the next prompt. */
    assert_null(read_from(&n, &out, next, "$ ", 5000));
    if (!strstr(buf_str(&out) + next, "$ "))
        fail_msg("the foreground job did not end; output: %s", buf_str(&out));
    /* The echo of the typed line shows a""fter; only the command's output shows after. */
    assert_int_equal(post_action(f->port, id, "stdin", "echo a\"\"fter\n"), 204);
    assert_null(read_until(&n, &out, "after\r\n", 5000));
    if (!strstr(buf_str(&out), "after\r\n"))
        fail_msg("no output of the next command: %s", buf_str(&out));
    assert_true(wait_gone(job, 2000));
    buf_done(&out);
    nd_close(&n); /* the client goes away: the shell is killed */
}

/* DELETE kills a shell's background job too: it runs in a group of its own, in the
 * shell's session. */
static void test_pty_delete_kills_background_job(void **state)
{
    struct sbd_fixture *f = *state;
    struct nd_client n;
    pid_t shell;
    uint32_t id = start_shell(f, &n, &shell);
    assert_int_equal(post_action(f->port, id, "stdin", "sleep 777 & echo P=$!\n"), 204);
    struct buf out;
    buf_init(&out, 1 << 20);
    /* The typed line's echo shows " P=$!", the output a line "P=<pid>". */
    assert_null(read_until(&n, &out, "\nP=", 10000));
    const char *at = strstr(buf_str(&out), "\nP=");
    assert_non_null(at);
    size_t off = (size_t)(at - out.data) + 1;
    assert_null(read_from(&n, &out, off, "\n", 10000));
    assert_non_null(strchr(buf_str(&out) + off, '\n'));
    pid_t bg = (pid_t)strtol(buf_str(&out) + off + 2, NULL, 10);
    assert_true(bg > 0);
    leftover = bg;
    struct ids st;
    assert_true(read_ids(bg, &st));
    assert_int_equal(st.session, shell);
    assert_int_not_equal(st.pgrp, shell); /* a job of its own: the group kill misses it */
    char path[64];
    snprintf(path, sizeof(path), "/v1/processes/%u", id);
    struct test_http_resp r;
    assert_int_equal(sbd_do(f->port, "DELETE", path, NULL, NULL, &r), 204);
    test_http_resp_done(&r);
    if (!wait_gone(bg, 2000))
        fail_msg("background job %d still runs after DELETE", (int)bg);
    leftover = 0;
    json_t *e = read_until(&n, &out, NULL, 10000);
    assert_non_null(e);
    assert_int_equal(jint(e, "signal"), SIGKILL);
    json_decref(e);
    buf_done(&out);
    nd_close(&n);
}

/* A PTY's input that ends without '\n' still ends: the run finishes instead of timing
 * out. */
static void test_pty_run_stdin_without_newline(void **state)
{
    struct sbd_fixture *f = *state;
    json_t *j = run(f->port, "{\"command\": [\"cat\"], \"pty\": true, \"stdin\": \"abc\","
                             " \"timeout_seconds\": 3}");
    assert_false(json_is_true(json_object_get(j, "timed_out")));
    assert_int_equal(jint(j, "exit_code"), 0);
    assert_non_null(strstr(jstr(j, "stdout"), "abc"));
    json_decref(j);
}

/* A line ended by a CR (web terminals send one for Enter; the terminal maps it to a
 * newline, ICRNL) is a whole line: one ^D ends the input, not two, whose second would
 * reach the next reader (here `read`, which then saw the end of input too). */
static void test_pty_stdin_cr_ends_a_line(void **state)
{
    struct sbd_fixture *f = *state;
    json_t *j = run(f->port,
                    "{\"command\": \"cat >/dev/null; echo cat-ended; read x; echo read-status=$?\","
                    " \"pty\": true, \"stdin\": \"abc\\r\", \"timeout_seconds\": 2}");
    assert_non_null(strstr(jstr(j, "stdout"), "cat-ended"));
    assert_null(strstr(jstr(j, "stdout"), "read-status=1"));
    assert_true(json_is_true(json_object_get(j, "timed_out"))); /* read waits for input */
    json_decref(j);
}

/* The same through a stream: stdin, then stdin/close on its own. */
static void test_pty_close_stdin_without_newline(void **state)
{
    struct sbd_fixture *f = *state;
    struct nd_client n;
    assert_int_equal(nd_start(&n, f->port, "/v1/processes",
                              "{\"command\": [\"cat\"], \"pty\": true, \"timeout_seconds\": 3}"),
                     200);
    json_t *j = nd_next(&n, 10000);
    assert_non_null(j);
    uint32_t id = (uint32_t)jint(j, "id");
    json_decref(j);
    assert_int_equal(post_action(f->port, id, "stdin", "line\nxyz"), 204);
    assert_int_equal(post_action(f->port, id, "stdin/close", ""), 204);
    struct buf out;
    buf_init(&out, 1 << 20);
    json_t *e = read_until(&n, &out, NULL, 10000);
    assert_non_null(e);
    assert_false(json_is_true(json_object_get(e, "timed_out")));
    assert_int_equal(jint(e, "exit_code"), 0);
    assert_non_null(strstr(buf_str(&out), "xyz"));
    json_decref(e);
    buf_done(&out);
    nd_close(&n);
}

/* A program that closes its terminal before it exits is not hung up (SIGHUP) by the
 * daemon closing the PTY's master at the slave's EIO: the exit status is its own. */
static void test_pty_closed_terminal_not_hung_up(void **state)
{
    struct sbd_fixture *f = *state;
    json_t *j = run(f->port, "{\"command\": \"echo hi; exec 0<&- 1>&- 2>&-; sleep 0.3; exit 7\","
                             " \"pty\": true, \"timeout_seconds\": 5}");
    if (jint(j, "exit_code") != 7) {
        char *text = json_dumps(j, JSON_COMPACT);
        fail_msg("run: %s", text ? text : "?");
    }
    assert_non_null(strstr(jstr(j, "stdout"), "hi"));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pty_signal_foreground_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_delete_kills_background_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_run_stdin_without_newline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_stdin_cr_ends_a_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_close_stdin_without_newline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_closed_terminal_not_hung_up, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
