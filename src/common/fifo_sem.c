/* SPDX-License-Identifier: Apache-2.0 */
/* First-come, first-served counting semaphore: a queue of waiters, each with its own
 * condition variable; a release hands its place straight to the head of the queue. */
#include "common/fifo_sem.h"

#include <string.h>

struct fifo_sem_waiter {
    pthread_cond_t cond;
    bool admitted;
    struct fifo_sem_waiter *next;
};

void fifo_sem_init(struct fifo_sem *s, int limit)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
    s->limit = limit;
}

void fifo_sem_done(struct fifo_sem *s)
{
    pthread_mutex_destroy(&s->lock);
}

bool fifo_sem_acquire(struct fifo_sem *s)
{
    struct fifo_sem_waiter w = {.admitted = false};
    if (s->limit <= 0)
        return false;
    pthread_mutex_lock(&s->lock);
    if (!s->head && s->inside < s->limit) {
        s->inside++;
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    pthread_cond_init(&w.cond, NULL);
    if (s->tail)
        s->tail->next = &w;
    else
        s->head = &w;
    s->tail = &w;
    s->waited++;
    while (!w.admitted)
        pthread_cond_wait(&w.cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    pthread_cond_destroy(&w.cond);
    return true;
}

void fifo_sem_release(struct fifo_sem *s)
{
    struct fifo_sem_waiter *w;
    if (s->limit <= 0)
        return;
    pthread_mutex_lock(&s->lock);
    w = s->head;
    if (w) {
        /* the place passes to w: inside stays the same */
        s->head = w->next;
        if (!s->head)
            s->tail = NULL;
        w->admitted = true;
        pthread_cond_signal(&w->cond);
    } else if (s->inside > 0) {
        s->inside--;
    }
    pthread_mutex_unlock(&s->lock);
}

unsigned long fifo_sem_waited(struct fifo_sem *s)
{
    unsigned long n;
    pthread_mutex_lock(&s->lock);
    n = s->waited;
    pthread_mutex_unlock(&s->lock);
    return n;
}
