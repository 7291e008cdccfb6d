/* SPDX-License-Identifier: Apache-2.0 */
/* Integration test: the controller binary's stop against an API server that accepts and
 * never answers: its informers' hung LISTs are cancelled (a clean stop), and a stop that
 * takes longer than --graceful-shutdown-timeout is bounded by it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "common/clock.h"

extern char **environ;

#define HOLD_MAX 64

/* A listener that accepts connections and never answers. */
struct blackhole {
    int lfd;
    int held[HOLD_MAX];
    int nheld;
    pthread_t th;
    uint16_t port;
};

static void *bh_main(void *arg)
{
    struct blackhole *b = arg;
    for (;;) {
        int fd = accept(b->lfd, NULL, NULL);
        if (fd < 0)
            return NULL; /* the listener was shut down */
        if (b->nheld < HOLD_MAX)
            b->held[b->nheld++] = fd;
        else
            close(fd);
    }
}

static void bh_start(struct blackhole *b)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    b->nheld = 0;
    b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(b->lfd >= 0);
    assert_int_equal(bind(b->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(b->lfd, 64), 0);
    assert_int_equal(getsockname(b->lfd, (struct sockaddr *)&a, &len), 0);
    b->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&b->th, NULL, bh_main, b), 0);
}

static void bh_stop(struct blackhole *b)
{
    (void)shutdown(b->lfd, SHUT_RDWR);
    pthread_join(b->th, NULL);
    close(b->lfd);
    for (int i = 0; i < b->nheld; i++)
        close(b->held[i]);
}

/* Writes a kubeconfig for http://127.0.0.1:port to path (a buffer of size bytes). */
static void write_kubeconfig(uint16_t port, char *path, size_t size)
{
    FILE *f;
    int fd;
    assert_true(snprintf(path, size, "/tmp/as-shutdown-kc-XXXXXX") < (int)size);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            "clusters: [{name: c, cluster: {server: \"http://127.0.0.1:%u\"}}]\n"
            "users: [{name: u, user: {token: t}}]\n"
            "contexts: [{name: c, context: {cluster: c, user: u}}]\n",
            (unsigned)port);
    assert_int_equal(fclose(f), 0);
}

static pid_t start_controller(const char *kubeconfig, const char *timeout)
{
    char bin[1024];
    const char *dir = getenv("AS_BIN_DIR");
    pid_t pid;
    char *argv[] = {bin,
                    "--kubeconfig",
                    (char *)kubeconfig,
                    "--leader-elect=false",
                    "--metrics-bind-address",
                    "0",
                    "--health-probe-bind-address",
                    "0",
                    "--graceful-shutdown-timeout",
                    (char *)timeout,
                    "--log-level",
                    "error",
                    NULL};
    assert_true(snprintf(bin, sizeof(bin), "%s/agent-sandbox-controller", dir ? dir : ".") <
                (int)sizeof(bin));
    assert_int_equal(posix_spawn(&pid, bin, NULL, NULL, argv, environ), 0);
    return pid;
}

/* Waits up to limit for pid; returns its wait status, or -1 on timeout (pid killed). */
static int wait_bounded(pid_t pid, usec_t limit, usec_t *ret_elapsed)
{
    usec_t t0 = clock_now();
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            *ret_elapsed = clock_now() - t0;
            return st;
        }
        if (clock_now() - t0 > limit) {
            kill(pid, SIGKILL);
            (void)waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Starts the controller against a listener that never answers, lets its informers block
 * in their LISTs, sends SIGTERM and returns the wait status (-1: not exited in 15 s) and
 * the time the stop took. */
static int stop_with_hung_lists(const char *timeout, usec_t *ret_elapsed)
{
    struct blackhole b;
    char kc[64];
    struct timespec settle = {1, 0};
    int st;
    pid_t pid;
    bh_start(&b);
    write_kubeconfig(b.port, kc, sizeof(kc));
    pid = start_controller(kc, timeout);
    nanosleep(&settle, NULL); /* its informers are now blocked in LISTs */
    assert_int_equal(kill(pid, SIGTERM), 0);
    st = wait_bounded(pid, 15 * USEC_PER_SEC, ret_elapsed);
    unlink(kc);
    bh_stop(&b);
    return st;
}

/* The informers' LISTs are cancelled by their stop (kube_req.cancel): a clean stop in
 * about a second (libcurl's progress callback), not the graceful timeout's 20 s. */
static void test_stop_cancels_hung_lists(void **state)
{
    usec_t elapsed = 0;
    int st;
    (void)state;
    st = stop_with_hung_lists("20s", &elapsed);
    assert_int_not_equal(st, -1);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0); /* a clean stop, not the watchdog's */
    assert_true(elapsed < 10 * USEC_PER_SEC);
    print_message("stop with hung LISTs took %llu ms (timeout 20 s)\n",
                  (unsigned long long)(elapsed / USEC_PER_MSEC));
}

/* A stop that takes longer than --graceful-shutdown-timeout ends in the watchdog's exit
 * (status 1) at that time: here 20 ms, well under what the LISTs' cancel takes (about
 * 250 ms measured). */
static void test_stop_bounded_by_timeout(void **state)
{
    usec_t elapsed = 0;
    int st;
    (void)state;
    st = stop_with_hung_lists("20ms", &elapsed);
    assert_int_not_equal(st, -1); /* it exited on its own */
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1); /* the watchdog's exit, not a clean stop */
    assert_true(elapsed >= 15 * USEC_PER_MSEC);
    print_message("stop bounded at %llu ms (timeout 20 ms)\n",
                  (unsigned long long)(elapsed / USEC_PER_MSEC));
}

static void test_bad_timeout_rejected(void **state)
{
    usec_t elapsed = 0;
    int st;
    pid_t pid;
    (void)state;
    pid = start_controller("/nonexistent", "ten seconds");
    st = wait_bounded(pid, 15 * USEC_PER_SEC, &elapsed);
    assert_int_not_equal(st, -1);
    assert_true(WIFEXITED(st));
    assert_int_not_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_cancels_hung_lists),
        cmocka_unit_test(test_stop_bounded_by_timeout),
        cmocka_unit_test(test_bad_timeout_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
