/* SPDX-License-Identifier: Apache-2.0 */
/* exec -t -i's raw terminal, on a pseudo-terminal: raw while the command runs, restored
 * afterwards, and restored too when SIGTERM, SIGHUP or SIGINT ends the process meanwhile
 * or SIGTSTP stops it; raw again after SIGCONT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sys/prctl.h>
#include <sys/wait.h>

#include "cli/cli.h"

static bool is_cooked(int fd)
{
    struct termios t;
    assert_int_equal(tcgetattr(fd, &t), 0);
    return (t.c_lflag & ISIG) && (t.c_lflag & ICANON) && (t.c_lflag & ECHO);
}

static bool is_raw(int fd)
{
    struct termios t;
    assert_int_equal(tcgetattr(fd, &t), 0);
    return !(t.c_lflag & (ISIG | ICANON | ECHO));
}

static void test_raw_and_restore(void **state)
{
    (void)state;
    int master, slave;
    assert_int_equal(openpty(&master, &slave, NULL, NULL, NULL), 0);
    assert_true(is_cooked(slave));
    assert_true(cli_tty_raw(slave));
    assert_true(is_raw(slave));
    assert_false(cli_tty_raw(slave)); /* one at a time */
    cli_tty_restore();
    assert_true(is_cooked(slave));
    cli_tty_restore(); /* nothing to do */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_false(cli_tty_raw(fds[0])); /* not a terminal */
    (void)close(fds[0]);
    (void)close(fds[1]);
    (void)close(master);
    (void)close(slave);
}

/* Closes a test's pty pair and its child's ready pipe. */
static void close_all(int master, int slave, const int ready[2])
{
    (void)close(ready[0]);
    (void)close(ready[1]);
    (void)close(master);
    (void)close(slave);
}

/* A child makes the terminal raw (sig's action set to disposition first) and waits. */
static pid_t raw_child(int slave, int sig, void (*disposition)(int), int ready[2])
{
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL); /* not left behind by a failed test */
        (void)setpgid(0, 0);            /* a group of its own, not orphaned: SIGTSTP stops it */
        (void)signal(sig, disposition); /* not the test runner's (nohup: ignored) */
        bool ok = cli_tty_raw(slave);
        struct sigaction now;
        ok = ok && sigaction(sig, NULL, &now) == 0 &&
             (disposition != SIG_IGN || now.sa_handler == SIG_IGN);
        (void)write(ready[1], ok ? "y" : "n", 1);
        for (;;)
            pause();
    }
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    return pid;
}

/* A child makes the terminal raw and waits; sig kills it; the terminal is cooked again. */
static void check_fatal_signal(int sig)
{
    int master, slave, ready[2];
    assert_int_equal(openpty(&master, &slave, NULL, NULL, NULL), 0);
    pid_t pid = raw_child(slave, sig, SIG_DFL, ready);
    assert_true(is_raw(slave));
    assert_int_equal(kill(pid, sig), 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st)); /* the signal's default action, after the restore */
    assert_int_equal(WTERMSIG(st), sig);
    assert_true(is_cooked(slave));
    close_all(master, slave, ready);
}

static void test_sigterm_restores(void **state)
{
    (void)state;
    check_fatal_signal(SIGTERM);
}

static void test_sighup_restores(void **state)
{
    (void)state;
    check_fatal_signal(SIGHUP);
}

/* An ignored SIGHUP (nohup) stays ignored: the raw child lives on after one. */
static void test_ignored_sighup_stays_ignored(void **state)
{
    int master, slave, ready[2], st = 0;
    (void)state;
    assert_int_equal(openpty(&master, &slave, NULL, NULL, NULL), 0);
    pid_t pid = raw_child(slave, SIGHUP, SIG_IGN, ready);
    assert_int_equal(kill(pid, SIGHUP), 0);
    usleep(200 * 1000);
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0); /* still running */
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_true(is_cooked(slave));
    close_all(master, slave, ready);
}

/* kill -INT (or timeout -s INT): keys do not send it to a raw terminal, kill does. */
static void test_sigint_restores(void **state)
{
    (void)state;
    check_fatal_signal(SIGINT);
}

/* Waits up to 5 s for the terminal to be raw (SIGCONT's handler runs after the wait). */
static bool becomes_raw(int fd)
{
    for (int i = 0; i < 500 && !is_raw(fd); i++)
        usleep(10 * 1000);
    return is_raw(fd);
}

/* Whether this runs under valgrind (scripts/valgrind.sh runs the unit suite so). */
static bool under_valgrind(void)
{
#if __has_include(<valgrind/valgrind.h>)
    return RUNNING_ON_VALGRIND != 0;
#else
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload");
#endif
}

/* SIGTSTP hands the shell a cooked terminal and stops; SIGCONT makes it raw again, also
 * after a stop (SIGSTOP) during which someone else changed the modes. */
static void test_sigtstp_restores_sigcont_raw(void **state)
{
    int master, slave, ready[2], st = 0;
    (void)state;
    if (under_valgrind()) {
        skip(); /* the child never stops there (job-control stops are not emulated) */
        return;
    }
    assert_int_equal(openpty(&master, &slave, NULL, NULL, NULL), 0);
    struct termios cooked;
    assert_int_equal(tcgetattr(slave, &cooked), 0);
    pid_t pid = raw_child(slave, SIGTSTP, SIG_DFL, ready);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(kill(pid, SIGTSTP), 0);
        assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
        assert_true(WIFSTOPPED(st) && WSTOPSIG(st) == SIGTSTP);
        assert_true(is_cooked(slave));
        assert_int_equal(kill(pid, SIGCONT), 0);
        assert_true(becomes_raw(slave));
    }
    assert_int_equal(kill(pid, SIGSTOP), 0);
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
    assert_true(WIFSTOPPED(st));
    assert_int_equal(tcsetattr(slave, TCSANOW, &cooked), 0); /* the shell's modes */
    assert_int_equal(kill(pid, SIGCONT), 0);
    assert_true(becomes_raw(slave));
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_true(is_cooked(slave));
    close_all(master, slave, ready);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_and_restore), cmocka_unit_test(test_sigterm_restores),
        cmocka_unit_test(test_sighup_restores), cmocka_unit_test(test_ignored_sighup_stays_ignored),
        cmocka_unit_test(test_sigint_restores), cmocka_unit_test(test_sigtstp_restores_sigcont_raw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
