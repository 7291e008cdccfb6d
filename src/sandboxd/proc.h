/* SPDX-License-Identifier: Apache-2.0 */
/* Process manager: spawns commands in their own session (so signals hit the whole process
 * group, and kills and timeouts the whole session), with pipes or a pseudo-terminal,
 * watches their exit through a pidfd, and delivers output and the exit status on the loop
 * thread. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include <sys/types.h>

#include "common/clock.h"

struct sbd_procs;
struct sbd_proc;

enum sbd_stream {
    SBD_STDOUT = 1,
    SBD_STDERR = 2,
};

/** How a process ended. exit_code is the status for a normal exit, else -1; signal is the
 * terminating signal or 0. */
struct sbd_exit {
    int exit_code;
    int signal;
    bool timed_out;
};

/** What to run. Everything is borrowed for the call. */
struct sbd_proc_spec {
    char *const *argv;         /* NULL-terminated; argv[0] is searched in PATH */
    char *const *env;          /* NULL or NULL-terminated "NAME=value" overrides */
    int cwd_fd;                /* directory to start in; -1: the daemon's cwd */
    bool pty;                  /* run on a pseudo-terminal (stdout and stderr merged) */
    bool stdin_null;           /* without a PTY: stdin is /dev/null, not a pipe (writes to it
                                  fail with -EPIPE, closing it succeeds) */
    unsigned short cols, rows; /* initial window size of the PTY (0: kernel default) */
    usec_t timeout;            /* 0: none; else SIGKILL to the session after it */
    usec_t drain; /* after the exit, how long output still held open (by a descendant) is
                     waited for; 0: LIMIT_SBD_DRAIN */
};

/** Output callbacks, on the loop thread. data is borrowed for the call. */
struct sbd_proc_ops {
    void (*output)(struct sbd_proc *p, enum sbd_stream s, const char *data, size_t n, void *ctx);
    /** The process exited and its output was drained (or the drain timed out). The last
     * callback: p must not be used after it returns. */
    void (*exit)(struct sbd_proc *p, const struct sbd_exit *e, void *ctx);
    /** Optional: stdin's queue emptied after a write was refused with -EAGAIN (the next
     * write of any allowed size is taken). */
    void (*stdin_drained)(struct sbd_proc *p, void *ctx);
};

/** Returns a new registry on loop (borrowed) allowing max concurrent processes. */
int sbd_procs_new(uv_loop_t *loop, unsigned max, struct sbd_procs **ret);
/** Frees a registry whose shutdown completed (NULL is fine). */
void sbd_procs_free(struct sbd_procs *ps);
/** sbd_proc_signal with SIGTERM to every process now, SIGKILL to the sessions left after
 * grace; done runs once every process is gone. New starts fail with -ESHUTDOWN
 * afterwards. */
void sbd_procs_shutdown(struct sbd_procs *ps, usec_t grace, void (*done)(void *ctx), void *ctx);
/** Number of running (registered) processes. */
size_t sbd_procs_count(const struct sbd_procs *ps);
/** Finds a process by id (borrowed), NULL when unknown or already finished. */
struct sbd_proc *sbd_procs_find(struct sbd_procs *ps, uint32_t id);
/** Returns a new JSON array describing every process. */
json_t *sbd_procs_list(const struct sbd_procs *ps);
/** Reaps the exited children of the daemon that are not registered processes: orphans of
 * the commands' trees, reparented to the daemon as PID 1 of its container or as a child
 * subreaper (main.c sets it). A registered process is left to its own pidfd handler.
 * Call on SIGCHLD. Returns how many were reaped. */
unsigned sbd_procs_reap_orphans(const struct sbd_procs *ps);
/** Counts the live (running or stopped) children of the daemon that are not registered
 * processes: a command's background descendants that outlived it (nohup, "cmd &"),
 * reparented to the daemon. Registered processes, and so code contexts' kernels, are not
 * counted; neither are exited children not reaped yet. Looks at no more than
 * LIMIT_SBD_ORPHANS_SEEN children (one waitid each). */
size_t sbd_procs_count_orphans(const struct sbd_procs *ps);

/** Sets the environment layered over the daemon's for processes started from now on
 * (late-bound configuration): NULL-terminated "NAME=value" entries, borrowed until the
 * next call; NULL clears it. A spec's own env still overrides it. */
void sbd_procs_set_base_env(struct sbd_procs *ps, char *const *env);

/** Starts a process; ops and ctx receive its events (ops borrowed, must be static). Returns
 * 0 with *ret borrowed (valid until the exit callback returns), -EAGAIN at the process cap,
 * -ESHUTDOWN, -ENOENT / -EACCES / -ENOEXEC (the command could not be executed), or another
 * negative errno. */
int sbd_proc_start(struct sbd_procs *ps, const struct sbd_proc_spec *spec,
                   const struct sbd_proc_ops *ops, void *ctx, struct sbd_proc **ret);
uint32_t sbd_proc_id(const struct sbd_proc *p);
pid_t sbd_proc_pid(const struct sbd_proc *p);
/** Queues data (copied) for the process's stdin. Returns 0, -EPIPE (stdin closed or the
 * process gone), -EAGAIN (too much queued: nothing taken; ops->stdin_drained follows once
 * the queue is empty). An empty queue takes one write of any size. */
int sbd_proc_write(struct sbd_proc *p, const void *data, size_t n);
/** sbd_proc_write of n > 0 bytes (-EINVAL for none) that also tells done(ctx, status),
 * on the loop thread and never before this call returned, once the process's stdin took
 * every byte (0) or the write failed (-EPIPE: nobody reads the pipe any more, or it
 * was closed as the process finished). done runs exactly once when this returns 0, and
 * not at all otherwise; ctx must live until then. */
int sbd_proc_write_cb(struct sbd_proc *p, const void *data, size_t n,
                      void (*done)(void *ctx, int status), void *ctx);
/** Bytes queued for stdin and not yet taken by the process. */
size_t sbd_proc_stdin_queued(const struct sbd_proc *p);
/** Closes stdin once queued data is written (a PTY gets EOF characters instead, which need
 * room in the queue: one ^D, or two when the last line written is not ended by '\n' or ^D,
 * since a terminal's first ^D then only ends that line). Closing a closed pipe succeeds.
 * Returns 0, -EPIPE (a PTY whose input is closed, or the process gone) or -EAGAIN (a PTY's
 * queue full: nothing sent). */
int sbd_proc_close_stdin(struct sbd_proc *p);
/** sbd_proc_write then sbd_proc_close_stdin, all or nothing: on a PTY the data and the EOF
 * characters go in one write, so -EAGAIN means none was queued. */
int sbd_proc_write_close(struct sbd_proc *p, const void *data, size_t n);
/** Sends sig to the process group (the process itself if that fails) and, on a PTY, to
 * the terminal's foreground process group (a job of a shell with job control). SIGKILL
 * goes to every process of the session instead (background jobs in groups of their own
 * too). Both hold after the process itself exited as long as p is not finished (its
 * output still open, the leader's zombie kept): what is left of its group or session
 * gets it. Returns 0 or -EINVAL. */
int sbd_proc_signal(struct sbd_proc *p, int sig);
/** Resizes the PTY. Returns 0, -ENOTTY (no PTY) or -ESRCH (exited). */
int sbd_proc_resize(struct sbd_proc *p, unsigned short cols, unsigned short rows);
/** Stops (true) or resumes reading output, for back-pressure. */
void sbd_proc_pause(struct sbd_proc *p, bool pause);
/** The owner is gone: SIGKILL to the session; no more callbacks. */
void sbd_proc_detach(struct sbd_proc *p);
/** Parses "SIGTERM", "TERM", "term" or a number. Returns the signal or -EINVAL. */
int sbd_signal_parse(const char *s);
