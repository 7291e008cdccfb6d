/* SPDX-License-Identifier: Apache-2.0 */
/* A counting semaphore that admits waiters in the order they arrived: at most limit
 * holders at once, the rest queued first come, first served. Each waiter sleeps on its
 * own condition variable, so a release wakes exactly the one it admits. Thread-safe. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

struct fifo_sem_waiter;

struct fifo_sem {
    pthread_mutex_t lock;
    int limit;  /* holders at once; <= 0: no limit (acquire never waits) */
    int inside; /* current holders */
    struct fifo_sem_waiter *head, *tail;
    unsigned long waited; /* acquisitions that had to queue */
};

/** limit <= 0 makes a semaphore that never waits. */
void fifo_sem_init(struct fifo_sem *s, int limit);
/** Call with no holder and no waiter left. */
void fifo_sem_done(struct fifo_sem *s);
/** Waits for a place (in arrival order). Returns true when it had to queue. */
bool fifo_sem_acquire(struct fifo_sem *s);
/** Gives the place back: to the first waiter, else to the pool. */
void fifo_sem_release(struct fifo_sem *s);
/** Acquisitions so far that had to queue. */
unsigned long fifo_sem_waited(struct fifo_sem *s);
