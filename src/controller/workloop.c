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
    pthread_mutex_t lock; /* guards threads, nthreads, started, stopped */
    pthread_t *threads;
    size_t nthreads;
    bool started, stopped;
    atomic_int active;
    atomic_ulong reconciles;
};

/* ---- queue metrics ------------------------------------------------------------------ */

static void wqm_add(void *ctx, const char *name)
{
    const struct ctrl_metrics *cm = ctx;
    metric_inc(cm->wq_adds, (const char *const[]){name});
}

static void wqm_depth(void *ctx, const char *name, size_t depth)
{
    const struct ctrl_metrics *cm = ctx;
    metric_set(cm->wq_depth, (const char *const[]){name}, (double)depth);
}

static void wqm_latency(void *ctx, const char *name, usec_t d)
{
    const struct ctrl_metrics *cm = ctx;
    metric_observe(cm->wq_latency, (const char *const[]){name}, (double)d / USEC_PER_SEC);
}

static void wqm_work(void *ctx, const char *name, usec_t d)
{
    const struct ctrl_metrics *cm = ctx;
    metric_observe(cm->wq_work, (const char *const[]){name}, (double)d / USEC_PER_SEC);
}

static void wqm_retry(void *ctx, const char *name)
{
    const struct ctrl_metrics *cm = ctx;
    metric_inc(cm->wq_retries, (const char *const[]){name});
}

/* ---- workers ------------------------------------------------------------------------ */

static void set_active(struct workloop *l, int delta)
{
    int n = atomic_fetch_add(&l->active, delta) + delta;
    if (l->o.metrics)
        metric_set(l->o.metrics->active_workers, (const char *const[]){l->o.name}, n);
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
        log_warn_errno(rc, "reconcile failed, will retry\tcontroller=%s key=%s", l->o.name, key);
        if (cm)
            metric_inc(cm->reconcile_errors, lv);
        lv[1] = "error";
        wq_add_rate_limited(l->q, key);
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

static void *worker_main(void *arg)
{
    struct workloop *l = arg;
    const char *key;
    if (!wait_caches(l))
        return NULL;
    while (wq_get(l->q, &key) == 0) {
        run_one(l, key);
        wq_done(l->q, key);
    }
    return NULL;
}

/* ---- lifecycle ---------------------------------------------------------------------- */

int workloop_new(const struct workloop_opts *opts, struct workloop **ret)
{
    struct workloop *l;
    struct wq_opts qo;
    int r;
    if (!opts || !opts->name || !opts->reconcile || opts->workers < 1)
        return -EINVAL;
    l = XNEW(struct workloop);
    l->o = *opts;
    l->ops = (struct wq_metrics_ops){.ctx = (void *)opts->metrics,
                                     .add = wqm_add,
                                     .depth = wqm_depth,
                                     .latency = wqm_latency,
                                     .work = wqm_work,
                                     .retry = wqm_retry};
    qo = (struct wq_opts){.name = opts->name, .metrics = opts->metrics ? &l->ops : NULL};
    pthread_mutex_init(&l->lock, NULL);
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
        l->threads = xcalloc((size_t)l->o.workers, sizeof(*l->threads));
        for (int i = 0; i < l->o.workers; i++) {
            if (pthread_create(&l->threads[l->nthreads], NULL, worker_main, l) != 0) {
                log_error("cannot start worker %d of %d\tcontroller=%s", i + 1, l->o.workers,
                          l->o.name);
                break;
            }
            l->nthreads++;
        }
    }
    n = (int)l->nthreads;
    pthread_mutex_unlock(&l->lock);
    return n;
}

void workloop_shutdown(struct workloop *l)
{
    if (l && l->q)
        wq_shutdown(l->q);
}

void workloop_stop(struct workloop *l)
{
    if (!l)
        return;
    workloop_shutdown(l);
    /* Under the lock: another thread may be inside workloop_start. The workers never
     * take it, so joining here cannot deadlock. */
    pthread_mutex_lock(&l->lock);
    l->stopped = true;
    for (size_t i = 0; i < l->nthreads; i++)
        pthread_join(l->threads[i], NULL);
    XFREE(l->threads);
    l->nthreads = 0;
    pthread_mutex_unlock(&l->lock);
}

unsigned long workloop_reconciles(struct workloop *l)
{
    return atomic_load(&l->reconciles);
}

int workloop_active(struct workloop *l)
{
    return atomic_load(&l->active);
}
