/* SPDX-License-Identifier: Apache-2.0 */
#include "controller/side_writer.h"

#include <errno.h>
#include <pthread.h>

#include "common/log.h"
#include "common/xalloc.h"

struct side_job {
    struct side_job *next;
    const struct kube_res *res;
    char *ns, *name;
    json_t *patch;
    usec_t queued; /* monotonic */
};

struct side_writer {
    struct side_opts o;
    pthread_mutex_t lock;
    pthread_cond_t work;    /* queued or stopping */
    pthread_cond_t written; /* st.written, st.failed or st.skipped advanced */
    struct side_job *head, *tail;
    size_t len;
    bool stopping;
    bool dropping; /* side_writer_drop: adds are dropped */
    atomic_bool stop_gate;
    struct side_stats st;
    pthread_t thread;
};

static void job_free(struct side_job *j)
{
    json_decref(j->patch);
    xfree(j->ns);
    xfree(j->name);
    xfree(j);
}

bool side_writer_add(struct side_writer *w, const struct kube_res *res, const char *ns,
                     const char *name, const json_t *patch)
{
    struct side_job *j;
    pthread_mutex_lock(&w->lock);
    if (w->dropping) {
        w->st.queued++;
        w->st.dropped++;
        pthread_cond_broadcast(&w->written);
        pthread_mutex_unlock(&w->lock);
        return true;
    }
    if (w->stopping || w->len >= w->o.max_queue) {
        pthread_mutex_unlock(&w->lock);
        return false;
    }
    j = XNEW(struct side_job);
    j->res = res;
    j->ns = xstrdup(ns);
    j->name = xstrdup(name);
    j->patch = json_incref((json_t *)patch);
    j->queued = clock_now();
    if (w->tail)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    w->len++;
    w->st.queued++;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->lock);
    return true;
}

/* Takes the next job (NULL once stopping with nothing queued). Called with the lock. */
static struct side_job *take(struct side_writer *w)
{
    struct side_job *j;
    while (!w->head && !w->stopping)
        pthread_cond_wait(&w->work, &w->lock);
    j = w->head;
    if (j) {
        w->head = j->next;
        if (!w->head)
            w->tail = NULL;
        w->len--;
    }
    return j;
}

/* Whether a side_writer_drop came, counting j as dropped if so. */
static bool dropped(struct side_writer *w, bool held)
{
    bool d;
    pthread_mutex_lock(&w->lock);
    d = w->dropping;
    if (d) {
        w->st.held += held;
        w->st.dropped++;
        pthread_cond_broadcast(&w->written);
    }
    pthread_mutex_unlock(&w->lock);
    return d;
}

static void write_one(struct side_writer *w, struct side_job *j)
{
    usec_t age = clock_now() - j->queued;
    bool held = age < w->o.gate.max_wait &&
                yield_gate_wait(&w->o.gate, w->o.gate.max_wait - age, &w->stop_gate);
    int r;
    /* A job taken before the drop and held at the gate through it is dropped too: with
     * one claim served it is the only one, and the queue the drop empties is empty. */
    if (dropped(w, held))
        return;
    r = w->o.write(w->o.ctx, j->res, j->ns, j->name, j->patch);
    if (r < 0)
        log_debug("side write failed\tobject=%s/%s error=%d", j->ns, j->name, r);
    pthread_mutex_lock(&w->lock);
    w->st.held += held;
    if (r < 0)
        w->st.failed++;
    else if (r == SIDE_SKIPPED)
        w->st.skipped++;
    else
        w->st.written++;
    pthread_cond_broadcast(&w->written);
    pthread_mutex_unlock(&w->lock);
}

static void *writer_main(void *arg)
{
    struct side_writer *w = arg;
    struct side_job *j;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        j = take(w);
        pthread_mutex_unlock(&w->lock);
        if (!j)
            return NULL;
        write_one(w, j);
        job_free(j);
    }
}

int side_writer_new(const struct side_opts *opts, struct side_writer **ret)
{
    struct side_writer *w;
    int r;
    if (!opts || !opts->write)
        return -EINVAL;
    w = XNEW(struct side_writer);
    w->o = *opts;
    if (!w->o.max_queue)
        w->o.max_queue = SIDE_DEFAULT_QUEUE;
    atomic_init(&w->stop_gate, false);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->written, NULL);
    r = -pthread_create(&w->thread, NULL, writer_main, w);
    if (r < 0) {
        pthread_cond_destroy(&w->written);
        pthread_cond_destroy(&w->work);
        pthread_mutex_destroy(&w->lock);
        xfree(w);
        return r;
    }
    *ret = w;
    return 0;
}

void side_writer_drop(struct side_writer *w)
{
    struct side_job *j, *next;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->dropping = true;
    for (j = w->head; j; j = next) {
        next = j->next;
        job_free(j);
        w->st.dropped++;
    }
    w->head = w->tail = NULL;
    w->len = 0;
    atomic_store(&w->stop_gate, true); /* a job held at the gate: to the drop at once */
    pthread_cond_broadcast(&w->written);
    pthread_mutex_unlock(&w->lock);
}

void side_writer_flush(struct side_writer *w)
{
    unsigned long target;
    pthread_mutex_lock(&w->lock);
    target = w->st.queued;
    while (w->st.written + w->st.failed + w->st.skipped + w->st.dropped < target)
        pthread_cond_wait(&w->written, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

void side_writer_free(struct side_writer *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    atomic_store(&w->stop_gate, true);
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->written);
    pthread_cond_destroy(&w->work);
    pthread_mutex_destroy(&w->lock);
    xfree(w);
}

void side_writer_stats(struct side_writer *w, struct side_stats *ret)
{
    pthread_mutex_lock(&w->lock);
    *ret = w->st;
    pthread_mutex_unlock(&w->lock);
}
