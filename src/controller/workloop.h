/* SPDX-License-Identifier: Apache-2.0 */
/* One controller's work loop: a work queue (kube/workqueue.h), N workers that wait for
 * the controller's caches before their first reconcile, the controller-runtime reconcile
 * and workqueue metrics, and shutdown that lets running reconciles finish. The Sandbox
 * controller and each extensions controller run one.
 *
 * Thread-safety: every function may be called from any thread, except workloop_free. */
#pragma once

#include <stdbool.h>

#include "common/clock.h"

struct metrics_registry;
struct metric;
struct wq;
struct workloop;

/** The metric families of the controllers (registered by the manager, shared by every
 * loop; each loop's series carry its name as the "controller" or "name" label). */
struct ctrl_metrics {
    struct metrics_registry *reg;
    struct metric *reconcile_total, *reconcile_errors, *reconcile_time;
    struct metric *max_concurrent, *active_workers;
    struct metric *wq_depth, *wq_adds, *wq_latency, *wq_work, *wq_retries;
    struct metric *leader;
};

/** Reconciles key (borrowed). Returns 0, with *ret_requeue > 0 to run the key again
 * after that long, or a negative errno for a rate-limited retry. */
typedef int workloop_reconcile_fn(void *ctx, const char *key, usec_t *ret_requeue);
/** Waits up to timeout for every cache the reconciles read. Returns 0 once synced,
 * -ETIMEDOUT (asked again while the loop runs) or another negative errno (the worker
 * gives up and exits). */
typedef int workloop_wait_fn(void *ctx, usec_t timeout);

struct workloop_opts {
    const char *name; /* controller and queue name; borrowed for the loop's life */
    int workers;      /* >= 1: the most reconciles at once */
    /* 0: all workers start at once and stay. Else the loop is elastic: min_workers start
     * (at most workers), another starts whenever keys wait and no worker is free, and a
     * worker beyond min_workers that found no key for idle_exit ends (its stack and cached
     * heap go back). */
    int min_workers;
    usec_t idle_exit;                 /* elastic loops; 0: WORKLOOP_IDLE_EXIT */
    workloop_reconcile_fn *reconcile; /* required */
    workloop_wait_fn *wait_synced;    /* NULL: the caches need no wait */
    void *ctx;                        /* for both callbacks */
    /* A failed reconcile's requeue also stands (the earlier of it and the back-off): for
     * a timer the pass must keep (a Sandbox's shutdownTime). Off: a failure is retried
     * after the back-off only, as controller-runtime does. */
    bool requeue_on_error;
    const struct ctrl_metrics *metrics; /* borrowed for the loop's life; NULL: no metrics */
};

#define WORKLOOP_IDLE_EXIT (30 * USEC_PER_SEC)
/* The controller's loops are elastic with this many workers that stay. */
#define WORKLOOP_ELASTIC_MIN 4

/** Creates a loop with its queue and no workers yet (copies opts) and sets its
 * max_concurrent_reconciles. Returns 0 and *ret (new, free with workloop_free) or
 * -EINVAL. */
int workloop_new(const struct workloop_opts *opts, struct workloop **ret);
/** Stops (workloop_stop) and frees; NULL is fine. */
void workloop_free(struct workloop *l);

/** The loop's queue (borrowed, valid until workloop_free) for event handlers to add to. */
struct wq *workloop_queue(struct workloop *l);
/** Starts the workers once (min_workers of an elastic loop); does nothing when they run
 * already or the loop was stopped. Returns the number of workers running. */
int workloop_start(struct workloop *l);
/** Shuts the queue down without waiting: workers finish their reconcile and exit (a
 * worker still waiting for the caches gives up). The keys still queued are dropped
 * (wq_shutdown_discard): no reconcile starts after this, so a leader that lost its Lease
 * or is stopping does no more work than what is under way (a successor re-lists
 * everything). Idempotent; NULL is fine. */
void workloop_shutdown(struct workloop *l);
/** workloop_shutdown, then joins every worker; the loop cannot be started again.
 * Idempotent; NULL is fine. */
void workloop_stop(struct workloop *l);

/** Whether a failed pass's requeue stands (workloop_opts.requeue_on_error). */
bool workloop_requeues_on_error(const struct workloop *l);
/** Reconciles finished so far (for tests). */
unsigned long workloop_reconciles(struct workloop *l);
/** Workers reconciling right now. */
int workloop_active(struct workloop *l);
/** Worker threads alive right now (elastic loops grow and shrink). */
int workloop_threads(struct workloop *l);
