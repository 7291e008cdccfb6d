/* SPDX-License-Identifier: Apache-2.0 */
/* Process manager (see proc.h): posix_spawn with POSIX_SPAWN_SETSID (each command leads
 * its own session and process group), a pidfd polled on the loop for the exit, pipes or a
 * PTY read through uv_pipe_t. Nothing else in the daemon reaps a registered process: its
 * exit is read with WNOWAIT and the zombie is reaped when the record is released, so its
 * pid (also its group's and session's id) is not reused while signals can still go. */
#include "sandboxd/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <termios.h>
#include <unistd.h>

#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/random.h>
#include <sys/wait.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/dlist.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xalloc.h"
#include "sandboxd/util.h"

extern char **environ;

#define STDIN_QUEUE_MAX (8u * 1024 * 1024)

struct sbd_proc {
    struct sbd_procs *ps;
    struct sbd_proc *prev, *next;
    uint32_t id;
    pid_t pid;
    int pidfd;
    bool pty;
    int master; /* PTY master (also owned by out) */
    uv_poll_t poll;
    uv_pipe_t out, err, in;
    uv_timer_t timer;
    bool out_open, err_open, in_open, in_closing, timer_init, poll_init;
    bool exited, finished, detached, paused, closing;
    /* the drain's time ran out while the consumer held the output back: what the pipes
     * held then (drain_budget bytes) is still read, nothing written after it */
    bool drain_over;
    uint64_t drain_budget;
    bool reaped;     /* the leader's zombie was collected: nothing may be signalled */
    bool pty_held;   /* the PTY's output ended first: master kept open until the exit */
    bool in_refused; /* a stdin write was refused for a full queue: tell stdin_drained */
    int in_last;     /* the last byte queued for stdin, or -1 (none, or after a ^D) */
    int handles;
    usec_t drain; /* the output drain after the exit (spec's drain) */
    struct sbd_exit status;
    const struct sbd_proc_ops *ops;
    void *ctx;
    json_t *argv;
    usec_t started;
};

struct sbd_procs {
    uv_loop_t *loop;
    unsigned max;
    uint32_t next_id;
    struct sbd_proc *head;
    size_t count;
    bool shutting_down;
    uv_timer_t kill_timer;
    bool kill_timer_init;
    void (*done)(void *ctx);
    void *done_ctx;
    char *const *base_env; /* late-bound env (borrowed), or NULL */
};

/* Process ids start at a random point in [1, 2^30] and count up to INT32_MAX (the gRPC
 * API's int32), then wrap to 1. A handle kept across a restart of sandboxd or a move of
 * the Sandbox to a new Pod (its router name now reaching the new one) then names no
 * process there, instead of the new Pod's process of the same small number. */
static uint32_t first_id(void)
{
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
        r = (uint32_t)clock_now() ^ (uint32_t)getpid();
    return 1 + (r & 0x3fffffffu);
}

int sbd_procs_new(uv_loop_t *loop, unsigned max, struct sbd_procs **ret)
{
    struct sbd_procs *ps = XNEW(struct sbd_procs);
    ps->loop = loop;
    ps->max = max ? max : LIMIT_SBD_PROCS;
    ps->next_id = first_id();
    *ret = ps;
    return 0;
}

void sbd_procs_free(struct sbd_procs *ps)
{
    xfree(ps);
}

size_t sbd_procs_count(const struct sbd_procs *ps)
{
    return ps->count;
}

struct sbd_proc *sbd_procs_find(struct sbd_procs *ps, uint32_t id)
{
    for (struct sbd_proc *p = ps->head; p; p = p->next)
        if (p->id == id && !p->finished)
            return p;
    return NULL;
}

/* True when pid is a registered process not reaped yet (reap_leader reaps it). */
static bool registered(const struct sbd_procs *ps, pid_t pid)
{
    for (const struct sbd_proc *p = ps->head; p; p = p->next)
        if (p->pid == pid && !p->reaped)
            return true;
    return false;
}

/* Called for each child pid listed; returns false to stop the listing. */
typedef bool (*child_fn)(const struct sbd_procs *ps, pid_t pid, void *ctx);

/* Calls fn for each pid that /proc/self/task/<task>/children lists (at most
 * LIMIT_SBD_CHILDREN_LIST bytes of it). Returns false when fn stopped it. */
static bool task_children(const struct sbd_procs *ps, const char *task, child_fn fn, void *ctx)
{
    char path[96], chunk[4096];
    struct buf b;
    struct str rest, pid_s;
    bool go_on = true;
    ssize_t n;
    int fd;
    (void)snprintf(path, sizeof(path), "/proc/self/task/%s/children", task);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        static bool told;
        if (!told && errno == ENOENT) /* a kernel without CONFIG_PROC_CHILDREN */
            log_warn("cannot list child processes (%s): orphans are not reaped or counted", path);
        told = true;
        return true;
    }
    buf_init(&b, LIMIT_SBD_CHILDREN_LIST);
    while ((n = read(fd, chunk, sizeof(chunk))) > 0 && buf_append(&b, chunk, (size_t)n) == 0)
        ;
    (void)close(fd);
    rest = str_make(b.data ? b.data : "", b.len);
    while (go_on && rest.len > 0) {
        uint64_t pid;
        if (!str_cut(rest, ' ', &pid_s, &rest)) {
            pid_s = rest;
            rest = STR_NULL;
        }
        if (str_to_u64(str_trim(pid_s), &pid) == 0 && pid > 0 && pid < INT32_MAX)
            go_on = fn(ps, (pid_t)pid, ctx);
    }
    buf_done(&b);
    return go_on;
}

/* Calls fn for each child of the daemon (every thread's), until fn returns false. */
static void each_child(const struct sbd_procs *ps, child_fn fn, void *ctx)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && !task_children(ps, e->d_name, fn, ctx))
            break;
    (void)closedir(d);
}

/* Reaps pid (ctx: unsigned count) if it exited and is not registered. A waitpid with
 * WNOHANG leaves a running child alone. */
static bool reap_child(const struct sbd_procs *ps, pid_t pid, void *ctx)
{
    unsigned *reaped = ctx;
    if (!registered(ps, pid) && waitpid(pid, NULL, WNOHANG) > 0)
        (*reaped)++;
    return true;
}

unsigned sbd_procs_reap_orphans(const struct sbd_procs *ps)
{
    unsigned reaped = 0;
    each_child(ps, reap_child, &reaped);
    if (reaped)
        log_debug("reaped orphaned processes\tcount=%u", reaped);
    return reaped;
}

/* What count_child counts: live unregistered children, and children looked at. */
struct orphan_count {
    size_t live, seen;
};

/* Counts pid (ctx: struct orphan_count) if it is an unregistered child still running or
 * stopped: WNOWAIT leaves an exited one to the reaper, and a pid no longer a child (reaped
 * meanwhile) fails with ECHILD. Stops after LIMIT_SBD_ORPHANS_SEEN children. */
static bool count_child(const struct sbd_procs *ps, pid_t pid, void *ctx)
{
    struct orphan_count *c = ctx;
    siginfo_t si = {0};
    if (!registered(ps, pid) && waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == 0)
        c->live++;
    return ++c->seen < LIMIT_SBD_ORPHANS_SEEN;
}

size_t sbd_procs_count_orphans(const struct sbd_procs *ps)
{
    struct orphan_count c = {0};
    each_child(ps, count_child, &c);
    return c.live;
}

json_t *sbd_procs_list(const struct sbd_procs *ps)
{
    json_t *arr = json_array();
    for (const struct sbd_proc *p = ps->head; p; p = p->next) {
        if (p->finished)
            continue;
        char when[40];
        clock_format_rfc3339_sec(clock_wall_now() - (clock_now() - p->started), when, sizeof(when));
        (void)json_array_append_new(arr, json_pack("{s:I, s:I, s:O, s:b, s:b, s:s}", "id",
                                                   (json_int_t)p->id, "pid", (json_int_t)p->pid,
                                                   "command", p->argv, "pty", p->pty, "running",
                                                   !p->exited, "started_at", when));
    }
    return arr;
}

/* ---- teardown ---------------------------------------------------------------------- */

static void procs_maybe_done(struct sbd_procs *ps)
{
    if (!ps->shutting_down || ps->count > 0 || !ps->done)
        return;
    void (*done)(void *) = ps->done;
    ps->done = NULL;
    if (ps->kill_timer_init) {
        (void)uv_timer_stop(&ps->kill_timer);
        ps->kill_timer_init = false;
        uv_close((uv_handle_t *)&ps->kill_timer, NULL);
    }
    done(ps->done_ctx);
}

/* Collects the exited leader's zombie, kept until now so that its pid stays taken while
 * the group or session could still be signalled (see "signals"). */
static void reap_leader(struct sbd_proc *p)
{
    siginfo_t si;
    if (p->reaped || !p->exited || p->pidfd < 0)
        return;
    (void)waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED | WNOHANG);
    p->reaped = true;
}

static void proc_release(struct sbd_proc *p)
{
    struct sbd_procs *ps = p->ps;
    DLIST_REMOVE(ps->head, p);
    ps->count--;
    reap_leader(p);
    if (p->pidfd >= 0)
        (void)close(p->pidfd);
    json_decref(p->argv);
    xfree(p);
    procs_maybe_done(ps);
}

static void on_proc_handle_closed(uv_handle_t *h)
{
    struct sbd_proc *p = h->data;
    if (--p->handles == 0)
        proc_release(p);
}

static void close_handle(uv_handle_t *h, bool *open)
{
    if (open && !*open)
        return;
    if (open)
        *open = false;
    if (!uv_is_closing(h))
        uv_close(h, on_proc_handle_closed);
}

/* Everything is over: close all handles; memory goes with the last one. */
static void proc_close(struct sbd_proc *p)
{
    if (p->closing)
        return;
    p->closing = true;
    close_handle((uv_handle_t *)&p->out, &p->out_open);
    close_handle((uv_handle_t *)&p->err, &p->err_open);
    close_handle((uv_handle_t *)&p->in, &p->in_open);
    close_handle((uv_handle_t *)&p->timer, &p->timer_init);
    close_handle((uv_handle_t *)&p->poll, &p->poll_init);
    if (p->handles == 0)
        proc_release(p);
}

/* Delivers the exit once the process exited and its output ended. */
static void maybe_finish(struct sbd_proc *p, bool force)
{
    if (p->finished || !p->exited)
        return;
    if (!force && (p->out_open || p->err_open))
        return;
    p->finished = true;
    if (p->ops && !p->detached)
        p->ops->exit(p, &p->status, p->ctx);
    proc_close(p);
}

/* ---- signals ----------------------------------------------------------------------- */

/* Why signalling by group or session id is safe here: the leader's pid is also the id of
 * its process group and session (POSIX_SPAWN_SETSID), and the leader stays an unreaped
 * zombie until the record is released (reap_leader). While that pid is taken, no other
 * process can be given it, so no unrelated group or session can carry that id; every
 * process seen with it is the command's own. Nothing is signalled once it is reaped. */

/* Passes of a session kill over /proc. A member that forks while a pass runs can get a
 * pid the pass already went by (pids wrap); once its SIGKILL is pending it cannot fork. */
#define SWEEP_PASSES 3

struct stat_ids {
    char state;
    pid_t pgrp, session;
};

/* Parses the text of /proc/<pid>/stat: "pid (comm) state ppid pgrp session ...". comm
 * may hold spaces and ')', so the fields are counted from the last ')'. Returns 0 or
 * -EPROTO. */
static int parse_stat(const char *s, size_t n, struct stat_ids *ret)
{
    const char *end = memrchr(s, ')', n);
    struct str rest, f[5];
    uint64_t pgrp, sid;
    if (!end)
        return -EPROTO;
    rest = str_make(end + 1, n - (size_t)(end + 1 - s));
    /* f[0] is the empty field before the space after ')'. */
    for (size_t i = 0; i < ARRAY_SIZE(f); i++)
        if (!str_cut(rest, ' ', &f[i], &rest))
            return -EPROTO;
    if (f[0].len != 0 || f[1].len != 1 || str_to_u64(f[3], &pgrp) < 0 ||
        str_to_u64(f[4], &sid) < 0 || pgrp > INT32_MAX || sid > INT32_MAX)
        return -EPROTO;
    *ret = (struct stat_ids){.state = f[1].p[0], .pgrp = (pid_t)pgrp, .session = (pid_t)sid};
    return 0;
}

/* Reads the state, group and session of pid. Returns 0 or a negative errno (the process
 * can be gone). */
static int read_stat(pid_t pid, struct stat_ids *ret)
{
    char path[40], text[512]; /* the fields read come before the 512th byte */
    ssize_t n;
    int fd, r;
    (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    n = read(fd, text, sizeof(text));
    r = n < 0 ? -errno : parse_stat(text, (size_t)n, ret);
    (void)close(fd);
    return r;
}

/* A live (not zombie) process of session sid, and of group pgrp unless that is 0. */
static bool is_member(const struct stat_ids *st, pid_t sid, pid_t pgrp)
{
    return st->session == sid && (pgrp == 0 || st->pgrp == pgrp) && st->state != 'Z' &&
           st->state != 'X';
}

/* Sends sig to pid if it is a member (is_member). The check is repeated after a pidfd is
 * taken and the signal goes through the pidfd: should pid be reused between, the pidfd's
 * process is dead and nothing is sent; if it is alive, the check read its ids. Returns
 * true when sent. */
static bool signal_member(pid_t pid, pid_t sid, pid_t pgrp, int sig)
{
    struct stat_ids st;
    bool sent = false;
    int fd;
    if (read_stat(pid, &st) < 0 || !is_member(&st, sid, pgrp))
        return false; /* most processes: no pidfd needed */
    fd = pidfd_open(pid, 0);
    if (fd < 0)
        return false; /* gone */
    if (read_stat(pid, &st) == 0 && is_member(&st, sid, pgrp))
        sent = pidfd_send_signal(fd, sig, NULL, 0) == 0;
    (void)close(fd);
    return sent;
}

/* One pass over /proc: sig to every member. Returns how many were signalled. */
static unsigned session_pass(pid_t sid, pid_t pgrp, int sig)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    unsigned sent = 0;
    if (!d)
        return 0;
    while ((e = readdir(d))) {
        uint64_t pid;
        if (cstr_to_u64(e->d_name, &pid) == 0 && pid > 1 && pid <= INT32_MAX &&
            signal_member((pid_t)pid, sid, pgrp, sig))
            sent++;
    }
    (void)closedir(d);
    return sent;
}

/* sig to every member of session sid (of group pgrp unless 0), in up to passes passes
 * over /proc, until one finds nobody to signal. */
static void session_signal(pid_t sid, pid_t pgrp, int sig, unsigned passes)
{
    for (unsigned i = 0; i < passes; i++)
        if (session_pass(sid, pgrp, sig) == 0)
            return;
}

/* sig to the leader's process group (the leader itself if that fails). */
static void kill_group(struct sbd_proc *p, int sig)
{
    if (kill(-p->pid, sig) < 0 && !p->exited)
        (void)pidfd_send_signal(p->pidfd, sig, NULL, 0);
}

/* sig to the leader's group and, on a PTY, to the terminal's foreground group: a shell
 * with job control runs each job in a group of its own, which the first misses. The
 * leader's group goes first: a shell then takes its signal while it still waits for the
 * job, not back at its prompt (where SIGINT would discard the line being typed). */
static void signal_proc(struct sbd_proc *p, int sig)
{
    if (p->reaped || p->finished)
        return;
    pid_t fg = p->pty && p->out_open ? tcgetpgrp(p->master) : -1; /* the master's link */
    kill_group(p, sig);
    if (fg > 0 && fg != p->pid)
        session_signal(p->pid, fg, sig, 1);
}

/* SIGKILL to every process of the leader's session: its group, other jobs' groups (a
 * PTY shell's background jobs) and their descendants. A process that left the session
 * (setsid) escapes. */
static void kill_session(struct sbd_proc *p)
{
    if (p->reaped || p->finished)
        return;
    kill_group(p, SIGKILL);
    session_signal(p->pid, 0, SIGKILL, SWEEP_PASSES);
}

/* ---- output ------------------------------------------------------------------------ */

/* The read buffer of the calling loop thread; what is read into it is consumed at once. */
static char *loop_chunk(void)
{
    static _Thread_local char chunk[LIMIT_SBD_CHUNK];
    return chunk;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h;
    (void)suggested;
    *b = uv_buf_init(loop_chunk(), LIMIT_SBD_CHUNK);
}

/* Reads at the end of a PTY's output: more than the kernel's PTY buffers hold. */
#define PTY_TAIL_READS 16

/* libuv ends a stream on a hang-up that comes with a short read without reading again.
 * That holds for pipes, but a PTY master can still receive what the slave side wrote just
 * before its last close: the kernel moves it to the master asynchronously, after the
 * hang-up can already be seen. So before the master is closed, it is read until it says
 * there is nothing more (EIO once the slave is gone, EAGAIN if something still holds it). */
static void pty_tail(struct sbd_proc *p)
{
    int fd;
    if (uv_fileno((uv_handle_t *)&p->out, &fd) < 0)
        return;
    for (int i = 0; i < PTY_TAIL_READS; i++) {
        ssize_t n = read(fd, loop_chunk(), LIMIT_SBD_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        if (p->ops && !p->detached)
            p->ops->output(p, SBD_STDOUT, loop_chunk(), (size_t)n, p->ctx);
    }
}

/* The PTY's slave side was closed (EIO) while the leader is still running, often on its
 * way out (a program closing its stdio before exit). Closing the master now would hang
 * the terminal up and SIGHUP the leader, so reading stops and the master stays open
 * until the exit (release_pty). Stdin closes (its descriptor is a duplicate). */
static void hold_pty(struct sbd_proc *p)
{
    p->pty_held = true;
    (void)uv_read_stop((uv_stream_t *)&p->out);
    close_handle((uv_handle_t *)&p->in, &p->in_open);
}

/* After the exit: reads what a reopened terminal may have written, closes the master. */
static void release_pty(struct sbd_proc *p)
{
    if (!p->pty_held)
        return;
    p->pty_held = false;
    pty_tail(p);
    close_handle((uv_handle_t *)&p->out, &p->out_open);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct sbd_proc *p = s->data;
    bool is_err = s == (uv_stream_t *)&p->err;
    if (n > 0) {
        if (p->ops && !p->detached)
            p->ops->output(p, is_err ? SBD_STDERR : SBD_STDOUT, b->base, (size_t)n, p->ctx);
        if (p->drain_over) {
            p->drain_budget = (uint64_t)n < p->drain_budget ? p->drain_budget - (uint64_t)n : 0;
            if (p->drain_budget == 0)
                maybe_finish(p, true);
        }
        return;
    }
    if (n == 0)
        return;
    /* EOF, or EIO from a PTY master once the slave side is gone. */
    if (p->pty && !is_err) {
        pty_tail(p);
        if (!p->exited) {
            hold_pty(p);
            return;
        }
    }
    if (is_err)
        close_handle((uv_handle_t *)&p->err, &p->err_open);
    else
        close_handle((uv_handle_t *)&p->out, &p->out_open);
    if (p->pty)
        close_handle((uv_handle_t *)&p->in, &p->in_open);
    maybe_finish(p, false);
}

/* Fills ret with the output streams that are read (stdout unless a PTY is held, then
 * stderr); returns how many. */
static size_t read_streams(struct sbd_proc *p, uv_stream_t *ret[2])
{
    size_t n = 0;
    if (p->out_open && !p->pty_held)
        ret[n++] = (uv_stream_t *)&p->out;
    if (p->err_open)
        ret[n++] = (uv_stream_t *)&p->err;
    return n;
}

static void set_reading(struct sbd_proc *p)
{
    uv_stream_t *streams[2];
    for (size_t i = 0, n = read_streams(p, streams); i < n; i++) {
        if (p->paused)
            (void)uv_read_stop(streams[i]);
        else
            (void)uv_read_start(streams[i], on_alloc, on_read);
    }
}

void sbd_proc_pause(struct sbd_proc *p, bool pause)
{
    if (p->paused == pause)
        return;
    p->paused = pause;
    set_reading(p);
}

/* ---- exit -------------------------------------------------------------------------- */

static void on_timer(uv_timer_t *t);

/* Bytes waiting in the open output pipes (FIONREAD). */
static uint64_t pipe_buffered(struct sbd_proc *p)
{
    uv_stream_t *streams[2];
    uint64_t total = 0;
    for (size_t i = 0, k = read_streams(p, streams); i < k; i++) {
        uv_os_fd_t fd;
        int n = 0;
        if (uv_fileno((uv_handle_t *)streams[i], &fd) == 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0)
            total += (uint64_t)n;
    }
    return total;
}

/* The output drain after the exit: p->drain, then what the pipes hold then. */
static void start_drain(struct sbd_proc *p)
{
    (void)uv_timer_start(&p->timer, on_timer, p->drain / USEC_PER_MSEC, 0);
}

static void on_timer(uv_timer_t *t)
{
    struct sbd_proc *p = t->data;
    if (!p->exited) {
        p->status.timed_out = true;
        kill_session(p);
        return;
    }
    /* What the pipes hold now is not lost: it is read first (the consumer may hold the
     * output back, or have just resumed without a read yet); what a descendant writes
     * after it is not waited for (restarting the drain at each resume, as before, let a
     * descendant that writes faster than the client reads hold the exit forever). */
    p->drain_over = true;
    p->drain_budget = pipe_buffered(p);
    if (p->drain_budget > 0)
        return;
    maybe_finish(p, true); /* output did not end in time (a descendant keeps it open) */
}

static void on_pidfd(uv_poll_t *h, int status, int events)
{
    struct sbd_proc *p = h->data;
    (void)events;
    siginfo_t si = {0};
    /* WNOWAIT: the zombie stays until reap_leader. */
    if (status < 0 || waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) < 0 ||
        si.si_pid == 0)
        return;
    (void)uv_poll_stop(&p->poll);
    p->exited = true;
    bool sig = si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED;
    p->status.exit_code = sig ? -1 : si.si_status;
    p->status.signal = sig ? si.si_status : 0;
    if (p->status.timed_out || p->ps->shutting_down || p->detached)
        kill_session(p); /* no stragglers holding the pipes */
    release_pty(p);
    start_drain(p);
    maybe_finish(p, false);
}

/* ---- spawn ------------------------------------------------------------------------- */

static bool env_overridden(const char *entry, char *const *over)
{
    const char *eq = strchr(entry, '=');
    size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
    for (char *const *o = over; o && *o; o++)
        if (strncmp(*o, entry, n) == 0 && (*o)[n] == '=')
            return true;
    return false;
}

void sbd_procs_set_base_env(struct sbd_procs *ps, char *const *env)
{
    ps->base_env = env;
}

static size_t env_len(char *const *v)
{
    size_t n = 0;
    for (; v && *v; v++)
        n++;
    return n;
}

/* Returns a new NULL-terminated array (xfree; entries borrowed): the daemon's environment,
 * then the late-bound base, then the request's overrides, each layer winning over the
 * ones before it, and within the base and the overrides the last of a name winning (as
 * Go's os/exec, whose child gets the last of duplicate names). */
static char **build_env(char *const *base, char *const *over)
{
    char **env = xcalloc(env_len(environ) + env_len(base) + env_len(over) + 1, sizeof(char *));
    size_t k = 0;
    for (char **e = environ; e && *e; e++)
        if (!env_overridden(*e, over) && !env_overridden(*e, base))
            env[k++] = *e;
    for (char *const *b = base; b && *b; b++)
        if (!env_overridden(*b, over) && !env_overridden(*b, b + 1))
            env[k++] = *b;
    for (char *const *o = over; o && *o; o++)
        if (!env_overridden(*o, o + 1))
            env[k++] = *o;
    return env;
}

struct fds {
    int in[2], out[2], err[2];
    int master, slave;
    char slave_name[128];
};

static void close_fd(int *fd)
{
    if (*fd >= 0)
        (void)close(*fd);
    *fd = -1;
}

static void fds_close(struct fds *f)
{
    int *all[] = {&f->in[0],  &f->in[1],  &f->out[0], &f->out[1],
                  &f->err[0], &f->err[1], &f->master, &f->slave};
    for (size_t i = 0; i < ARRAY_SIZE(all); i++)
        close_fd(all[i]);
}

static int open_pty(struct fds *f, const struct sbd_proc_spec *spec)
{
    f->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (f->master < 0)
        return -errno;
    if (grantpt(f->master) < 0 || unlockpt(f->master) < 0 ||
        ptsname_r(f->master, f->slave_name, sizeof(f->slave_name)) != 0)
        return -errno;
    if (spec->cols && spec->rows) {
        struct winsize ws = {.ws_row = spec->rows, .ws_col = spec->cols};
        (void)ioctl(f->master, TIOCSWINSZ, &ws);
    }
    return 0;
}

static int open_fds(struct fds *f, const struct sbd_proc_spec *spec)
{
    *f = (struct fds){{-1, -1}, {-1, -1}, {-1, -1}, -1, -1, {0}};
    if (spec->pty)
        return open_pty(f, spec);
    if ((!spec->stdin_null && pipe2(f->in, O_CLOEXEC) < 0) || pipe2(f->out, O_CLOEXEC) < 0 ||
        pipe2(f->err, O_CLOEXEC) < 0)
        return -errno;
    return 0;
}

/* File actions for the child: stdio, then the working directory. After POSIX_SPAWN_SETSID
 * the first terminal opened without O_NOCTTY becomes the controlling terminal. */
static int file_actions(posix_spawn_file_actions_t *fa, const struct fds *f,
                        const struct sbd_proc_spec *spec)
{
    int r = posix_spawn_file_actions_init(fa);
    if (r)
        return -r;
    if (spec->pty) {
        r = posix_spawn_file_actions_addopen(fa, 0, f->slave_name, O_RDWR, 0);
        r = r ? r : posix_spawn_file_actions_adddup2(fa, 0, 1);
        r = r ? r : posix_spawn_file_actions_adddup2(fa, 0, 2);
    } else {
        r = f->in[0] >= 0 ? posix_spawn_file_actions_adddup2(fa, f->in[0], 0)
                          : posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);
        r = r ? r : posix_spawn_file_actions_adddup2(fa, f->out[1], 1);
        r = r ? r : posix_spawn_file_actions_adddup2(fa, f->err[1], 2);
    }
    if (!r && spec->cwd_fd >= 0)
        r = posix_spawn_file_actions_addfchdir_np(fa, spec->cwd_fd);
    return -r;
}

static int spawn_attrs(posix_spawnattr_t *at)
{
    sigset_t all, none;
    (void)sigfillset(&all);
    (void)sigemptyset(&none);
    int r = posix_spawnattr_init(at);
    r = r ? r : posix_spawnattr_setsigdefault(at, &all);
    r = r ? r : posix_spawnattr_setsigmask(at, &none);
    r = r ? r
          : posix_spawnattr_setflags(at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF |
                                             POSIX_SPAWN_SETSIGMASK);
    return -r;
}

static int do_spawn(const struct sbd_procs *ps, const struct sbd_proc_spec *spec,
                    const struct fds *f, pid_t *ret)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int r = file_actions(&fa, f, spec);
    if (r == 0)
        r = spawn_attrs(&at);
    if (r < 0) {
        (void)posix_spawn_file_actions_destroy(&fa);
        return r;
    }
    char **env = build_env(ps->base_env, spec->env);
    pid_t pid;
    r = -posix_spawnp(&pid, spec->argv[0], &fa, &at, spec->argv, env);
    xfree(env);
    (void)posix_spawn_file_actions_destroy(&fa);
    (void)posix_spawnattr_destroy(&at);
    if (r == 0)
        *ret = pid;
    return r;
}

/* Wraps fd (taken) in a pipe handle; *open tells whether h must be closed. */
static int open_stream(struct sbd_proc *p, uv_pipe_t *h, int fd, bool *open)
{
    int r = uv_pipe_init(p->ps->loop, h, 0);
    if (r < 0) {
        (void)close(fd);
        return r;
    }
    h->data = p;
    p->handles++;
    *open = true;
    r = uv_pipe_open(h, fd);
    if (r < 0)
        (void)close(fd);
    return r;
}

static int init_handles(struct sbd_proc *p, struct fds *f)
{
    uv_loop_t *loop = p->ps->loop;
    (void)uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    p->handles++;
    p->timer_init = true;
    int r = uv_poll_init(loop, &p->poll, p->pidfd);
    if (r < 0)
        return r;
    p->poll.data = p;
    p->handles++;
    p->poll_init = true;
    if (p->pty) {
        int dupfd = fcntl(f->master, F_DUPFD_CLOEXEC, 0);
        if (dupfd < 0)
            return -errno;
        p->master = f->master;
        f->master = -1;
        r = open_stream(p, &p->out, p->master, &p->out_open);
        if (r < 0) {
            (void)close(dupfd);
            return r;
        }
        return open_stream(p, &p->in, dupfd, &p->in_open);
    }
    /* Each descriptor is open_stream's once handed to it (closed on its failure), and
     * closed here when an earlier one failed. */
    r = open_stream(p, &p->out, f->out[0], &p->out_open);
    f->out[0] = -1;
    if (r == 0)
        r = open_stream(p, &p->err, f->err[0], &p->err_open);
    else
        (void)close(f->err[0]);
    f->err[0] = -1;
    if (f->in[1] < 0) /* stdin is /dev/null */
        return r;
    if (r == 0)
        r = open_stream(p, &p->in, f->in[1], &p->in_open);
    else
        (void)close(f->in[1]);
    f->in[1] = -1;
    return r;
}

static struct sbd_proc *proc_new(struct sbd_procs *ps, const struct sbd_proc_spec *spec,
                                 const struct sbd_proc_ops *ops, void *ctx)
{
    struct sbd_proc *p = XNEW(struct sbd_proc);
    p->ps = ps;
    p->pidfd = -1;
    p->master = -1;
    p->in_last = -1;
    p->ops = ops;
    p->ctx = ctx;
    p->pty = spec->pty;
    p->drain = spec->drain ? spec->drain : LIMIT_SBD_DRAIN;
    p->started = clock_now();
    p->argv = json_array();
    /* as text JSON can carry: an argument not UTF-8 (gRPC strings are not checked) made
     * every listing of the processes fail to encode (500) */
    for (char *const *a = spec->argv; *a; a++)
        (void)json_array_append_new(p->argv, sbd_json_name(*a));
    return p;
}

static void proc_link(struct sbd_procs *ps, struct sbd_proc *p)
{
    p->id = ps->next_id++;
    if (ps->next_id > INT32_MAX)
        ps->next_id = 1;
    DLIST_PUSH(ps->head, p);
    ps->count++;
}

int sbd_proc_start(struct sbd_procs *ps, const struct sbd_proc_spec *spec,
                   const struct sbd_proc_ops *ops, void *ctx, struct sbd_proc **ret)
{
    if (ps->shutting_down)
        return -ESHUTDOWN;
    if (ps->count >= ps->max)
        return -EAGAIN;
    if (!spec->argv || !spec->argv[0] || !spec->argv[0][0])
        return -EINVAL;
    struct fds f;
    int r = open_fds(&f, spec);
    pid_t pid = -1;
    if (r == 0)
        r = do_spawn(ps, spec, &f, &pid);
    if (r < 0) {
        fds_close(&f);
        return r;
    }
    close_fd(&f.in[0]);
    close_fd(&f.out[1]);
    close_fd(&f.err[1]);
    struct sbd_proc *p = proc_new(ps, spec, ops, ctx);
    p->pid = pid;
    p->pidfd = pidfd_open(pid, 0);
    proc_link(ps, p);
    r = p->pidfd < 0 ? -errno : init_handles(p, &f);
    fds_close(&f);
    if (r < 0) {
        /* Cannot watch it: kill it, reap it and report the failure. */
        (void)kill(-pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
        p->exited = p->finished = p->reaped = true;
        proc_close(p);
        return r;
    }
    (void)uv_poll_start(&p->poll, UV_READABLE, on_pidfd);
    if (spec->timeout)
        (void)uv_timer_start(&p->timer, on_timer, (spec->timeout + 999) / USEC_PER_MSEC, 0);
    set_reading(p);
    *ret = p;
    return 0;
}

/* ---- control ----------------------------------------------------------------------- */

uint32_t sbd_proc_id(const struct sbd_proc *p)
{
    return p->id;
}

pid_t sbd_proc_pid(const struct sbd_proc *p)
{
    return p->pid;
}

/* One queued stdin write: the request, whom to tell when it is done, then the bytes. */
struct stdin_write {
    uv_write_t w;
    void (*done)(void *ctx, int status); /* NULL: nobody */
    void *ctx;
};

static void on_stdin_written(uv_write_t *w, int status)
{
    uv_stream_t *in = w->handle;
    struct sbd_proc *p = in->data;
    struct stdin_write *sw = (struct stdin_write *)w;
    if (sw->done)
        sw->done(sw->ctx, status < 0 ? -EPIPE : 0);
    xfree(sw);
    /* The queue emptied, or failed (stdin closed under it: the holder's next write says
     * so): either way the one that was refused hears of it. */
    if (!p->in_refused || (status >= 0 && uv_stream_get_write_queue_size(in) > 0))
        return;
    p->in_refused = false;
    if (p->ops && p->ops->stdin_drained && !p->finished)
        p->ops->stdin_drained(p, p->ctx);
}

#define VEOF_CHAR 4 /* ^D */

/* Whether byte c (-1: nothing) ends a line under the terminal's settings t: a newline,
 * a ^D, a CR the terminal maps to one (ICRNL, as web terminals send for Enter), or an
 * end-of-line character it was given. */
static bool ends_line(const struct termios *t, int c)
{
    if (c < 0 || c == '\n' || c == VEOF_CHAR)
        return true;
    if (c == '\r' && (t->c_iflag & ICRNL) && !(t->c_iflag & IGNCR))
        return true;
    return (t->c_cc[VEOL] != _POSIX_VDISABLE && c == t->c_cc[VEOL]) ||
           (t->c_cc[VEOL2] != _POSIX_VDISABLE && c == t->c_cc[VEOL2]);
}

/* How many ^D end a PTY's input after data: a canonical-mode terminal ends input at a ^D
 * on an empty line; on a line with text, one ^D only hands the text over, so a second
 * follows. A terminal not in canonical mode (raw) gets one, as a byte. */
static size_t eof_count(const struct sbd_proc *p, const char *data, size_t n, bool eof)
{
    struct termios t;
    int last = n > 0 ? (unsigned char)data[n - 1] : p->in_last;
    if (!eof)
        return 0;
    if (tcgetattr(p->master, &t) < 0)
        return last < 0 || last == '\n' || last == VEOF_CHAR ? 1 : 2;
    if (!(t.c_lflag & ICANON))
        return 1;
    return ends_line(&t, last) ? 1 : 2;
}

/* Queues data (copied) for stdin, followed by VEOF (^D) when eof (a PTY's end of input,
 * eof_count), in one write so that all of it fits or nothing goes. done (optional) hears
 * how the write ended, unless nothing was queued (an error, or no byte). */
static int queue_stdin(struct sbd_proc *p, const void *data, size_t n, bool eof,
                       void (*done)(void *ctx, int status), void *ctx)
{
    size_t eofs = eof_count(p, data, n, eof);
    size_t len = n + eofs;
    if (!p->in_open || p->in_closing || p->finished)
        return -EPIPE;
    if (len == 0)
        return 0;
    size_t queued = uv_stream_get_write_queue_size((uv_stream_t *)&p->in);
    if (queued > 0 && queued + len > STDIN_QUEUE_MAX) {
        p->in_refused = true;
        return -EAGAIN; /* an empty queue takes one write of any size its caller allows */
    }
    struct stdin_write *sw = xmalloc(sizeof(*sw) + len);
    char *copy = (char *)(sw + 1);
    sw->done = done;
    sw->ctx = ctx;
    if (n)
        memcpy(copy, data, n);
    memset(copy + n, VEOF_CHAR, eofs);
    uv_buf_t b = uv_buf_init(copy, (unsigned)len);
    int r = uv_write(&sw->w, (uv_stream_t *)&p->in, &b, 1, on_stdin_written);
    if (r < 0) {
        xfree(sw);
        return -EPIPE;
    }
    if (eofs)
        p->in_last = -1;
    else if (n > 0)
        p->in_last = (unsigned char)((const char *)data)[n - 1];
    return 0;
}

size_t sbd_proc_stdin_queued(const struct sbd_proc *p)
{
    return p->in_open ? uv_stream_get_write_queue_size((const uv_stream_t *)&p->in) : 0;
}

int sbd_proc_write(struct sbd_proc *p, const void *data, size_t n)
{
    return queue_stdin(p, data, n, false, NULL, NULL);
}

int sbd_proc_write_cb(struct sbd_proc *p, const void *data, size_t n,
                      void (*done)(void *ctx, int status), void *ctx)
{
    if (n == 0)
        return -EINVAL;
    return queue_stdin(p, data, n, false, done, ctx);
}

static void on_stdin_shutdown(uv_shutdown_t *sr, int status)
{
    struct sbd_proc *p = sr->handle->data;
    (void)status;
    xfree(sr);
    close_handle((uv_handle_t *)&p->in, &p->in_open);
}

int sbd_proc_close_stdin(struct sbd_proc *p)
{
    if (!p->in_open || p->in_closing)
        return 0;
    if (p->pty)
        return queue_stdin(p, NULL, 0, true, NULL, NULL);
    p->in_closing = true;
    uv_shutdown_t *sr = XNEW(uv_shutdown_t);
    if (uv_shutdown(sr, (uv_stream_t *)&p->in, on_stdin_shutdown) < 0) {
        xfree(sr);
        close_handle((uv_handle_t *)&p->in, &p->in_open);
    }
    return 0;
}

int sbd_proc_write_close(struct sbd_proc *p, const void *data, size_t n)
{
    if (p->pty)
        return queue_stdin(p, data, n, true, NULL, NULL);
    int r = queue_stdin(p, data, n, false, NULL, NULL);
    return r < 0 ? r : sbd_proc_close_stdin(p);
}

int sbd_proc_signal(struct sbd_proc *p, int sig)
{
    if (sig <= 0 || sig >= NSIG)
        return -EINVAL;
    /* After the leader's exit too, until the record is finished: its group (a "cmd &"
     * still holding the output) is what the caller means, and the unreaped zombie keeps
     * the id taken (see "signals"). */
    if (sig == SIGKILL)
        kill_session(p); /* stragglers of its session too */
    else
        signal_proc(p, sig);
    return 0;
}

int sbd_proc_resize(struct sbd_proc *p, unsigned short cols, unsigned short rows)
{
    if (!p->pty)
        return -ENOTTY;
    if (p->exited || !p->out_open)
        return -ESRCH;
    struct winsize ws = {.ws_row = rows, .ws_col = cols};
    return ioctl(p->master, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

void sbd_proc_detach(struct sbd_proc *p)
{
    if (p->detached)
        return;
    p->detached = true;
    p->ops = NULL;
    kill_session(p);
    if (p->paused)
        sbd_proc_pause(p, false); /* keep draining so the pipes do not block it */
}

/* ---- shutdown ---------------------------------------------------------------------- */

static void signal_all(struct sbd_procs *ps, int sig)
{
    for (struct sbd_proc *p = ps->head; p; p = p->next)
        (void)sbd_proc_signal(p, sig);
}

static void on_kill_timer(uv_timer_t *t)
{
    struct sbd_procs *ps = t->data;
    signal_all(ps, SIGKILL);
}

void sbd_procs_shutdown(struct sbd_procs *ps, usec_t grace, void (*done)(void *ctx), void *ctx)
{
    ps->shutting_down = true;
    ps->done = done;
    ps->done_ctx = ctx;
    signal_all(ps, SIGTERM);
    if (ps->count == 0) {
        procs_maybe_done(ps);
        return;
    }
    (void)uv_timer_init(ps->loop, &ps->kill_timer);
    ps->kill_timer.data = ps;
    ps->kill_timer_init = true;
    (void)uv_timer_start(&ps->kill_timer, on_kill_timer, grace / USEC_PER_MSEC, 0);
}

int sbd_signal_parse(const char *s)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"KILL", SIGKILL},
                 {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},   {"CONT", SIGCONT},
                 {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"WINCH", SIGWINCH}, {"ALRM", SIGALRM}};
    uint64_t n;
    if (cstr_to_u64(s, &n) == 0)
        return n > 0 && n < NSIG ? (int)n : -EINVAL;
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (strcasecmp(s, names[i].name) == 0)
            return names[i].sig;
    return -EINVAL;
}
