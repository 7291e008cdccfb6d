/* SPDX-License-Identifier: Apache-2.0 */
/* pause: the pod sandbox's init process; sleeps until SIGINT/SIGTERM, reaps zombies. */

#define _GNU_SOURCE

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

/* Reaps every exited child without blocking. */
static void pause_reap(void)
{
    for (;;) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);

        if (pid > 0)
            continue;
        if (pid < 0 && errno == EINTR)
            continue;
        return;
    }
}

/* Blocks the signals we wait for, so sigwait() receives them even as PID 1. */
static int pause_block(sigset_t *set)
{
    if (sigemptyset(set) < 0 || sigaddset(set, SIGINT) < 0 || sigaddset(set, SIGTERM) < 0 ||
        sigaddset(set, SIGCHLD) < 0)
        return -EINVAL;
    if (sigprocmask(SIG_BLOCK, set, NULL) < 0)
        return -errno;
    return 0;
}

int main(int argc, char **argv)
{
    sigset_t set;
    int sig = 0;
    int err;

    if (argc == 2 && strcmp(argv[1], "-v") == 0) {
        printf("agent-sandbox pause\n");
        return 0;
    }
    err = pause_block(&set);
    if (err < 0) {
        fprintf(stderr, "pause: cannot block signals: %s\n", strerror(-err));
        return 1;
    }
    for (;;) {
        err = sigwait(&set, &sig);
        if (err != 0) {
            fprintf(stderr, "pause: sigwait: %s\n", strerror(err));
            return 1;
        }
        if (sig == SIGCHLD) {
            pause_reap();
            continue;
        }
        pause_reap();
        return 0;
    }
}
