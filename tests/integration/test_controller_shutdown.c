/* SPDX-License-Identifier: Apache-2.0 */
/* Integration test: the controller binary's stop against an API server that accepts and
 * never finishes an answer: its informers' hung LISTs are cancelled (a clean stop), and a
 * stop held up by a request that is not cancelled (the leader election's Lease GET) ends
 * in the watchdog's exit at --graceful-shutdown-timeout.
 *
 * The fake server sends every request the start of an answer that never ends (a status
 * line, then a header line every 250 ms), so no request is cut by the client's read-stall
 * check (a GET receiving nothing for 15 s): a request that is not cancelled lasts its
 * whole timeout (60 s for a LIST, about 5 minutes for the Lease GET below). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "common/clock.h"
#include "support/apiserver.h"

extern char **environ;

#define HOLD_MAX 256
/* Bounds that only a hang reaches: no assertion depends on how fast the machine is. */
#define HANG_LIMIT (90 * USEC_PER_SEC)
#define DRIP       (250 * USEC_PER_MSEC)

struct held {
    int fd;
    size_t got;
    char head[1024];
    bool request; /* the request line arrived: answered by the drip */
    bool started; /* the response head went out */
};

/* A listener that accepts connections, reads each request line and answers with the
 * start of a response that never ends. Counts what it was asked for. */
struct blackhole {
    int lfd, wake[2];
    struct held held[HOLD_MAX];
    int nheld;
    pthread_t th;
    pthread_mutex_t lock;
    int sandbox_lists; /* GETs of the Sandbox collection (the main informer's LIST) */
    int lease_gets;    /* requests on a Lease (the leader election) */
    uint16_t port;
};

static void classify(struct blackhole *b, const char *line)
{
    bool get = strncmp(line, "GET ", 4) == 0;
    pthread_mutex_lock(&b->lock);
    if (strstr(line, "/leases"))
        b->lease_gets++;
    else if (get && strstr(line, "/sandboxes") && !strstr(line, "watch="))
        b->sandbox_lists++;
    pthread_mutex_unlock(&b->lock);
}

static void on_readable(struct blackhole *b, struct held *h)
{
    char scratch[4096];
    char *dst = h->got < sizeof(h->head) - 1 ? h->head + h->got : scratch;
    size_t room = h->got < sizeof(h->head) - 1 ? sizeof(h->head) - 1 - h->got : sizeof(scratch);
    ssize_t n = recv(h->fd, dst, room, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        close(h->fd); /* the client went away (cancelled, or the process ended) */
        h->fd = -1;
        return;
    }
    if (n < 0 || dst == scratch)
        return;
    h->got += (size_t)n;
    h->head[h->got] = '\0';
    char *eol = strstr(h->head, "\r\n");
    if (!h->request && eol) {
        *eol = '\0';
        h->request = true;
        classify(b, h->head);
        *eol = '\r';
    }
}

/* Every DRIP: the response head first (a chunked 200), then one more body byte (curl's
 * read-stall check counts body bytes, not header lines). */
static void drip(struct blackhole *b)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n";
    static const char more[] = "1\r\n \r\n";
    for (int i = 0; i < b->nheld; i++) {
        struct held *h = &b->held[i];
        if (h->fd < 0 || !h->request)
            continue;
        const char *p = h->started ? more : head;
        (void)send(h->fd, p, strlen(p), MSG_DONTWAIT | MSG_NOSIGNAL);
        h->started = true;
    }
}

static void *bh_main(void *arg)
{
    struct blackhole *b = arg;
    struct pollfd pfd[HOLD_MAX + 2];
    usec_t next = clock_now() + DRIP;
    for (;;) {
        int n = 0, idx[HOLD_MAX];
        pfd[n++] = (struct pollfd){.fd = b->wake[0], .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = b->lfd, .events = POLLIN};
        for (int i = 0; i < b->nheld; i++)
            if (b->held[i].fd >= 0) {
                idx[n - 2] = i;
                pfd[n++] = (struct pollfd){.fd = b->held[i].fd, .events = POLLIN};
            }
        usec_t now = clock_now();
        int wait_ms = now >= next ? 0 : (int)((next - now) / USEC_PER_MSEC) + 1;
        if (poll(pfd, (nfds_t)n, wait_ms) < 0 && errno != EINTR)
            return NULL;
        if (pfd[0].revents)
            return NULL; /* bh_stop */
        if (pfd[1].revents & POLLIN) {
            int fd = accept4(b->lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0 && b->nheld < HOLD_MAX)
                b->held[b->nheld++] = (struct held){.fd = fd};
            else if (fd >= 0)
                close(fd); /* fails the request at once: HOLD_MAX is far above what is used */
        }
        for (int j = 2; j < n; j++)
            if (pfd[j].revents)
                on_readable(b, &b->held[idx[j - 2]]);
        if (clock_now() >= next) {
            drip(b);
            next = clock_now() + DRIP;
        }
    }
}

static void bh_start(struct blackhole *b)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    memset(b, 0, sizeof(*b));
    assert_int_equal(pthread_mutex_init(&b->lock, NULL), 0);
    assert_int_equal(pipe2(b->wake, O_CLOEXEC), 0);
    b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(b->lfd >= 0);
    assert_int_equal(bind(b->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(b->lfd, 128), 0);
    assert_int_equal(getsockname(b->lfd, (struct sockaddr *)&a, &len), 0);
    b->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&b->th, NULL, bh_main, b), 0);
}

static void bh_stop(struct blackhole *b)
{
    assert_int_equal(write(b->wake[1], "x", 1), 1);
    pthread_join(b->th, NULL);
    close(b->lfd);
    close(b->wake[0]);
    close(b->wake[1]);
    for (int i = 0; i < b->nheld; i++)
        if (b->held[i].fd >= 0)
            close(b->held[i].fd);
    pthread_mutex_destroy(&b->lock);
}

struct count_at_least {
    struct blackhole *b;
    const int *counter;
    int min;
};

static bool counted(void *ctx)
{
    struct count_at_least *c = ctx;
    pthread_mutex_lock(&c->b->lock);
    bool ok = *c->counter >= c->min;
    pthread_mutex_unlock(&c->b->lock);
    return ok;
}

/* Waits (up to HANG_LIMIT) until *counter of b reached min. */
static void bh_wait(struct blackhole *b, const int *counter, int min)
{
    struct count_at_least c = {b, counter, min};
    assert_int_equal(it_wait(counted, &c, HANG_LIMIT), 0);
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

/* A temporary file for a controller's log (stderr); path is a buffer of size bytes. */
static void make_log(char *path, size_t size)
{
    assert_true(snprintf(path, size, "/tmp/as-shutdown-log-XXXXXX") < (int)size);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

/* True when the file at path holds needle. */
static bool log_has(const char *path, const char *needle)
{
    char buf[1 << 16];
    FILE *f = fopen(path, "r");
    bool found = false;
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    found = strstr(buf, needle) != NULL;
    return found;
}

struct log_wait {
    const char *path, *needle;
};

static bool logged(void *ctx)
{
    struct log_wait *w = ctx;
    return log_has(w->path, w->needle);
}

/* Starts the controller with --graceful-shutdown-timeout timeout; with leader_elect, on
 * a Lease whose request timeout is long (lease 600 s, renew deadline 590 s: the elector's
 * calls may take half the deadline, 295 s). Its stderr goes to log (NULL: inherited). */
static pid_t start_controller(const char *kubeconfig, const char *timeout, bool leader_elect,
                              const char *log)
{
    char bin[1024];
    const char *dir = getenv("AS_BIN_DIR");
    posix_spawn_file_actions_t fa;
    pid_t pid;
    char *argv[] = {bin,
                    "--kubeconfig",
                    (char *)kubeconfig,
                    "--metrics-bind-address",
                    "0",
                    "--health-probe-bind-address",
                    "0",
                    "--graceful-shutdown-timeout",
                    (char *)timeout,
                    "--log-level",
                    "info",
                    leader_elect ? "--leader-elect=true" : "--leader-elect=false",
                    "--leader-elect-lease-duration",
                    "600s",
                    "--leader-elect-renew-deadline",
                    "590s",
                    NULL};
    assert_true(snprintf(bin, sizeof(bin), "%s/agent-sandbox-controller", dir ? dir : ".") <
                (int)sizeof(bin));
    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    if (log)
        assert_int_equal(
            posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600), 0);
    assert_int_equal(posix_spawn(&pid, bin, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
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

/* The informers' LISTs are cancelled by their stop (kube_req.cancel): a clean stop. Not
 * cancelled, a LIST here would last its 60 s timeout, and the stop would end in the
 * watchdog's exit (status 1) at the graceful timeout's 30 s instead. */
static void test_stop_cancels_hung_lists(void **state)
{
    struct blackhole b;
    char kc[64], log[64];
    usec_t elapsed = 0;
    int st;
    pid_t pid;
    (void)state;
    bh_start(&b);
    write_kubeconfig(b.port, kc, sizeof(kc));
    make_log(log, sizeof(log));
    pid = start_controller(kc, "30s", false, log);
    bh_wait(&b, &b.sandbox_lists, 1); /* its Sandbox informer is blocked in its LIST */
    assert_int_equal(kill(pid, SIGTERM), 0);
    st = wait_bounded(pid, HANG_LIMIT, &elapsed);
    bh_stop(&b);
    unlink(kc);
    print_message("stop with hung LISTs: status %#x after %llu ms\n", (unsigned)st,
                  (unsigned long long)(elapsed / USEC_PER_MSEC));
    assert_int_not_equal(st, -1);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0); /* a clean stop, not the watchdog's */
    assert_false(log_has(log, "graceful shutdown timed out"));
    assert_true(log_has(log, "stopping"));
    unlink(log);
}

/* A stop that takes longer than --graceful-shutdown-timeout ends in the watchdog's exit
 * (status 1, its log line) once that time passed. The stop here cannot end by itself: the
 * leader election's Lease GET is not cancelled, and the server never finishes answering
 * it. A second controller on the same server without the watchdog (timeout 0: wait for
 * ever), stopped first, shows it: it is still stopping when the first one has exited. */
static void test_stop_bounded_by_timeout(void **state)
{
    struct blackhole b;
    char kc[64], log[64], ctl_log[64];
    usec_t elapsed = 0;
    int st, ctl_st;
    pid_t pid, ctl;
    (void)state;
    bh_start(&b);
    write_kubeconfig(b.port, kc, sizeof(kc));
    make_log(log, sizeof(log));
    make_log(ctl_log, sizeof(ctl_log));
    ctl = start_controller(kc, "0", true, ctl_log);
    bh_wait(&b, &b.lease_gets, 1); /* the control's elector is in its Lease GET */
    pid = start_controller(kc, "1s", true, log);
    bh_wait(&b, &b.lease_gets, 2); /* and so is this one's */
    assert_int_equal(kill(ctl, SIGTERM), 0);
    assert_int_equal(kill(pid, SIGTERM), 0);
    st = wait_bounded(pid, HANG_LIMIT, &elapsed);
    print_message("stop bounded by the 1 s timeout: status %#x after %llu ms\n", (unsigned)st,
                  (unsigned long long)(elapsed / USEC_PER_MSEC));
    /* The control logged its stop and has not finished it. */
    struct log_wait w = {ctl_log, "stopping"};
    int ctl_stopping = it_wait(logged, &w, HANG_LIMIT);
    pid_t ctl_done = waitpid(ctl, &ctl_st, WNOHANG);
    if (ctl_done == 0) {
        kill(ctl, SIGKILL);
        (void)waitpid(ctl, &ctl_st, 0);
    }
    bh_stop(&b);
    unlink(kc);
    assert_int_not_equal(st, -1); /* it exited on its own */
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1); /* the watchdog's exit, not a clean stop */
    assert_true(log_has(log, "graceful shutdown timed out"));
    assert_true(log_has(log, "timeout_ms=1000"));
    assert_true(elapsed >= USEC_PER_SEC); /* not before its time */
    assert_int_equal(ctl_stopping, 0);
    assert_int_equal(ctl_done, 0); /* without the watchdog the same stop still hangs */
    assert_false(log_has(ctl_log, "graceful shutdown timed out"));
    unlink(log);
    unlink(ctl_log);
}

static void test_bad_timeout_rejected(void **state)
{
    usec_t elapsed = 0;
    int st;
    pid_t pid;
    (void)state;
    pid = start_controller("/nonexistent", "ten seconds", false, NULL);
    st = wait_bounded(pid, HANG_LIMIT, &elapsed);
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
