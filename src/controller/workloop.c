/* SPDX-License-Identifier: Apache-2.0 */
/* One controller's work loop: queue, workers, cache wait, metrics (see workloop.h). */
#include "controller/workloop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/xalloc.h"
#include "kube/workqueue.h"

/* How long one cache wait lasts before the worker checks for shutdown again. */
#define WORKLOOP_SYNC_SLICE (100 * USEC_PER_MSEC)

struct workloop {
    struct workloop_opts o;
    struct wq *q;
    struct wq_metrics_ops ops;
    pthread_mutex_t lock; /* guards running, idle, started, stopped; taken after the
                           * queue's lock (its depth callback), never before it */
    pthread_cond_t gone;  /* a worker ended */
    int running;          /* worker threads alive (detached) */
    int idle;             /* of them, not reconciling (starting or waiting for a key) */
    int leaving;          /* of them, extra workers deciding to end (leave_idle) */
    bool started, stopped;
    atomic_int active;
    atomic_ulong reconciles;
};

static void spawn_locked(struct workloop *l);

/* ---- queue metrics (and, for an elastic loop, a worker more when keys wait) ---------- */

static void wqm_add(void *ctx, const char *name)
{
    const struct workloop *l = ctx;
    if (l->o.metrics)
        metric_inc(l->o.metrics->wq_adds, (const char *const[]){name});
}

static void wqm_depth(void *ctx, const char *name, size_t depth)
{
    struct workloop *l = ctx;
    if (l->o.metrics)
        metric_set(l->o.metrics->wq_depth, (const char *const[]){name}, (double)depth);
    if (l->o.min_workers > 0 && depth > 0) {
        /* called under the queue's lock: the lock order is queue, then loop */
        pthread_mutex_lock(&l->lock);
        if ((size_t)l->idle < depth)
            spawn_locked(l);
        pthread_mutex_unlock(&l->lock);
    }
}

static void wqm_latency(void *ctx, const char *name, usec_t d)
{
    const struct workloop *l = ctx;
    if (l->o.metrics)
        metric_observe(l->o.metrics->wq_latency, (const char *const[]){name},
                       (double)d / USEC_PER_SEC);
}

static void wqm_work(void *ctx, const char *name, usec_t d)
{
    const struct workloop *l = ctx;
    if (l->o.metrics)
        metric_observe(l->o.metrics->wq_work, (const char *const[]){name},
                       (double)d / USEC_PER_SEC);
}

static void wqm_retry(void *ctx, const char *name)
{
    const struct workloop *l = ctx;
    if (l->o.metrics)
        metric_inc(l->o.metrics->wq_retries, (const char *const[]){name});
}

/* ---- workers ------------------------------------------------------------------------ */

/* The count and its gauge change together under the lock: two workers finishing at once
 * could otherwise set the gauge in the other order and leave it at 1 with none active. */
static void set_active(struct workloop *l, int delta)
{
    pthread_mutex_lock(&l->lock);
    int n = atomic_fetch_add(&l->active, delta) + delta;
    if (l->o.metrics)
        metric_set(l->o.metrics->active_workers, (const char *const[]){l->o.name}, n);
    pthread_mutex_unlock(&l->lock);
}

static void run_one(struct workloop *l, const char *key)
{
    const struct ctrl_metrics *cm = l->o.metrics;
    const char *lv[] = {l->o.name, NULL, NULL};
    usec_t t0 = clock_now(), requeue = 0;
    int rc;
    set_active(l, 1);
    rc = l->o.reconcile(l->o.ctx, key, &requeue);
    if (cm)
        metric_observe(cm->reconcile_time, lv, (double)(clock_now() - t0) / USEC_PER_SEC);
    if (rc < 0) {
        /* -ESHUTDOWN: a create refused because the namespace is being deleted, which
         * deletes the object too; retried (with backoff) in case it is not */
        if (rc == -ESHUTDOWN)
            log_debug("reconcile: namespace terminating, will retry\tcontroller=%s key=%s",
                      l->o.name, key);
        else
            log_warn_errno(rc, "reconcile failed, will retry\tcontroller=%s key=%s", l->o.name,
                           key);
        if (cm)
            metric_inc(cm->reconcile_errors, lv);
        lv[1] = "error";
        wq_add_rate_limited(l->q, key);
        if (requeue && l->o.requeue_on_error) /* a timer the pass kept: the earlier wins */
            wq_add_after(l->q, key, requeue);
    } else {
        wq_forget(l->q, key);
        lv[1] = requeue ? "requeue_after" : "success";
        if (requeue)
            wq_add_after(l->q, key, requeue);
    }
    if (cm)
        metric_inc(cm->reconcile_total, lv);
    set_active(l, -1);
    atomic_fetch_add(&l->reconciles, 1);
}

/* Waits for the caches, giving up once the queue shuts down or the wait fails. */
static bool wait_caches(struct workloop *l)
{
    int r = -ETIMEDOUT;
    if (!l->o.wait_synced)
        return true;
    while (r == -ETIMEDOUT && !wq_shutting_down(l->q))
        r = l->o.wait_synced(l->o.ctx, WORKLOOP_SYNC_SLICE);
    if (r < 0 && r != -ETIMEDOUT)
        log_warn_errno(r, "caches did not sync, worker exits\tcontroller=%s", l->o.name);
    return r == 0;
}

/* The calling (free) worker stops being counted. After this the worker must not touch l
 * again: workloop_stop may free it. */
static void leave(struct workloop *l)
{
    pthread_mutex_lock(&l->lock);
    l->running--;
    l->idle--;
    pthread_cond_broadcast(&l->gone);
    pthread_mutex_unlock(&l->lock);
}

/* An extra worker idle for idle_exit ends, unless keys are waiting: it is first taken
 * off the idle count, so that a key queued from then on starts a worker if none is free,
 * and it stays when the queue holds a key (one queued while it was still counted as
 * idle would otherwise wait for a busy worker). The queue is asked without the loop's
 * lock (the lock order is queue, then loop). Returns true when it ends (see leave). */
static bool leave_idle(struct workloop *l)
{
    bool go;
    pthread_mutex_lock(&l->lock);
    go = l->running - l->leaving > l->o.min_workers; /* two at once never both go below */
    if (go) {
        l->idle--;
        l->leaving++;
    }
    pthread_mutex_unlock(&l->lock);
    if (!go)
        return false;
    go = wq_len(l->q) == 0;
    pthread_mutex_lock(&l->lock);
    l->leaving--;
    if (go) {
        l->running--;
        pthread_cond_broadcast(&l->gone);
    } else {
        l->idle++;
    }
    pthread_mutex_unlock(&l->lock);
    return go;
}

/* Marks the calling worker busy (busy) or free again; a busy worker of an elastic loop
 * that leaves keys waiting and no worker free starts another (pending: the depth). */
static void set_busy(struct workloop *l, bool busy, size_t pending)
{
    pthread_mutex_lock(&l->lock);
    l->idle += busy ? -1 : 1;
    if (busy && l->o.min_workers > 0 && pending > (size_t)l->idle)
        spawn_locked(l);
    pthread_mutex_unlock(&l->lock);
}

static void worker_loop(struct workloop *l)
{
    usec_t idle = l->o.min_workers > 0 ? l->o.idle_exit : USEC_INFINITY;
    const char *key;
    for (;;) {
        int r = wq_get_for(l->q, &key, idle);
        if (r == -ETIMEDOUT) {
            if (leave_idle(l)) /* idle for idle_exit: one of the extra workers ends */
                return;
            continue;
        }
        if (r < 0)
            break;
        set_busy(l, true, wq_len(l->q));
        run_one(l, key);
        wq_done(l->q, key);
        set_busy(l, false, 0);
    }
    leave(l);
}

static void *worker_main(void *arg)
{
    struct workloop *l = arg;
    if (wait_caches(l))
        worker_loop(l);
    else
        leave(l);
    return NULL; /* l is not touched after leave: workloop_stop may free it */
}

/* Starts one more worker thread (detached) unless the loop is not running or has its
 * most. Lock held. */
static void spawn_locked(struct workloop *l)
{
    pthread_attr_t a;
    pthread_t t;
    if (!l->started || l->stopped || l->running >= l->o.workers)
        return;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, worker_main, l) == 0) {
        l->running++;
        l->idle++;
    } else {
        log_error("cannot start a worker (%d running)\tcontroller=%s", l->running, l->o.name);
    }
    pthread_attr_destroy(&a);
}

/* ---- lifecycle ---------------------------------------------------------------------- */

int workloop_new(const struct workloop_opts *opts, struct workloop **ret)
{
    struct workloop *l;
    struct wq_opts qo;
    int r;
    if (!opts || !opts->name || !opts->reconcile || opts->workers < 1 || opts->min_workers < 0)
        return -EINVAL;
    l = XNEW(struct workloop);
    l->o = *opts;
    if (l->o.min_workers > l->o.workers)
        l->o.min_workers = l->o.workers;
    if (!l->o.idle_exit)
        l->o.idle_exit = WORKLOOP_IDLE_EXIT;
    l->ops = (struct wq_metrics_ops){.ctx = l,
                                     .add = wqm_add,
                                     .depth = wqm_depth,
                                     .latency = wqm_latency,
                                     .work = wqm_work,
                                     .retry = wqm_retry};
    qo = (struct wq_opts){.name = opts->name, .metrics = &l->ops};
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->gone, NULL);
    r = wq_new(&qo, &l->q);
    if (r < 0) {
        workloop_free(l);
        return r;
    }
    if (opts->metrics)
        metric_set(opts->metrics->max_concurrent, (const char *const[]){opts->name}, opts->workers);
    *ret = l;
    return 0;
}

void workloop_free(struct workloop *l)
{
    if (!l)
        return;
    workloop_stop(l);
    wq_free(l->q);
    pthread_cond_destroy(&l->gone);
    pthread_mutex_destroy(&l->lock);
    xfree(l);
}

struct wq *workloop_queue(struct workloop *l)
{
    return l->q;
}

int workloop_start(struct workloop *l)
{
    int n;
    pthread_mutex_lock(&l->lock);
    if (!l->started && !l->stopped) {
        l->started = true;
        n = l->o.min_workers > 0 ? l->o.min_workers : l->o.workers;
        for (int i = 0; i < n; i++)
            spawn_locked(l);
    }
    n = l->running;
    pthread_mutex_unlock(&l->lock);
    return n;
}

void workloop_shutdown(struct workloop *l)
{
    if (l && l->q)
        wq_shutdown_discard(l->q);
}

void workloop_stop(struct workloop *l)
{
    if (!l)
        return;
    workloop_shutdown(l);
    /* The workers are detached: wait until every one has stopped counting itself (after
     * that none touches the loop again). */
    pthread_mutex_lock(&l->lock);
    l->stopped = true;
    while (l->running > 0)
        pthread_cond_wait(&l->gone, &l->lock);
    pthread_mutex_unlock(&l->lock);
}

unsigned long workloop_reconciles(struct workloop *l)
{
    return atomic_load(&l->reconciles);
}

bool workloop_requeues_on_error(const struct workloop *l)
{
    return l->o.requeue_on_error;
}

int workloop_active(struct workloop *l)
{
    return atomic_load(&l->active);
}

int workloop_threads(struct workloop *l)
{
    int n;
    pthread_mutex_lock(&l->lock);
    n = l->running;
    pthread_mutex_unlock(&l->lock);
    return n;
}
