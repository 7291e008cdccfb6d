/* SPDX-License-Identifier: Apache-2.0 */
/* Background API-write thread of the router (see resume_worker.h). */
#include "router/resume_worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "common/limits.h"
#include "common/xalloc.h"

struct job {
    struct job *next;
    resume_job_fn *run;
    resume_job_done_fn *done;
    void *arg;
    int rc;
};

struct resume_worker {
    uv_async_t async;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct job *todo_head, *todo_tail, *done;
    size_t queued;
    bool stop;
};

static void *worker_main(void *arg)
{
    struct resume_worker *w = arg;
    (void)pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->stop && !w->todo_head)
            (void)pthread_cond_wait(&w->cond, &w->lock);
        if (w->stop)
            break;
        struct job *j = w->todo_head;
        w->todo_head = j->next;
        if (!w->todo_head)
            w->todo_tail = NULL;
        (void)pthread_mutex_unlock(&w->lock);
        j->rc = j->run(j->arg);
        (void)pthread_mutex_lock(&w->lock);
        j->next = w->done;
        w->done = j;
        (void)uv_async_send(&w->async);
    }
    (void)pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Runs the done callbacks of list (oldest first is not promised). */
static void deliver(struct job *list)
{
    while (list) {
        struct job *j = list;
        list = j->next;
        j->done(j->arg, j->rc);
        xfree(j);
    }
}

static void on_async(uv_async_t *a)
{
    struct resume_worker *w = a->data;
    (void)pthread_mutex_lock(&w->lock);
    struct job *list = w->done;
    w->done = NULL;
    (void)pthread_mutex_unlock(&w->lock);
    for (struct job *j = list; j; j = j->next)
        w->queued--;
    deliver(list);
}

int resume_worker_new(uv_loop_t *loop, struct resume_worker **ret)
{
    struct resume_worker *w = XNEW(struct resume_worker);
    int r = uv_async_init(loop, &w->async, on_async);
    if (r < 0) {
        xfree(w);
        return r;
    }
    w->async.data = w;
    (void)pthread_mutex_init(&w->lock, NULL);
    (void)pthread_cond_init(&w->cond, NULL);
    r = -pthread_create(&w->thread, NULL, worker_main, w);
    if (r < 0) {
        w->stop = true;
        resume_worker_free(w);
        return r;
    }
    *ret = w;
    return 0;
}

int resume_worker_submit(struct resume_worker *w, resume_job_fn *run, resume_job_done_fn *done,
                         void *arg)
{
    if (w->queued >= LIMIT_ROUTER_WORKER_QUEUE)
        return -EAGAIN;
    struct job *j = XNEW(struct job);
    *j = (struct job){.run = run, .done = done, .arg = arg};
    w->queued++;
    (void)pthread_mutex_lock(&w->lock);
    if (w->todo_tail)
        w->todo_tail->next = j;
    else
        w->todo_head = j;
    w->todo_tail = j;
    (void)pthread_cond_signal(&w->cond);
    (void)pthread_mutex_unlock(&w->lock);
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    struct resume_worker *w = h->data;
    (void)pthread_mutex_destroy(&w->lock);
    (void)pthread_cond_destroy(&w->cond);
    xfree(w);
}

void resume_worker_free(struct resume_worker *w)
{
    if (!w)
        return;
    bool started = !w->stop;
    (void)pthread_mutex_lock(&w->lock);
    w->stop = true;
    (void)pthread_cond_broadcast(&w->cond);
    (void)pthread_mutex_unlock(&w->lock);
    if (started)
        (void)pthread_join(w->thread, NULL);
    for (struct job *j = w->todo_head; j; j = j->next)
        j->rc = -ECANCELED;
    deliver(w->done);
    deliver(w->todo_head);
    w->done = w->todo_head = w->todo_tail = NULL;
    uv_close((uv_handle_t *)&w->async, on_closed);
}
