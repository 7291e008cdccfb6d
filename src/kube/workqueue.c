/* SPDX-License-Identifier: Apache-2.0 */
/* Work queue: one record per known key in a map (queued, processing, parked on the timer
 * heap, or carrying a failure count), a FIFO of queued records, and a min-heap of parked
 * ones. No timer thread is needed: one idle getter at a time (the timer waiter) sleeps
 * until the earliest parked deadline and moves due keys into the FIFO; the other idle
 * getters sleep until a key is queued for them. Each sleeper has its own condvar, so a
 * queued key or a deadline wakes one thread, not every idle worker. */
#include "kube/workqueue.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "common/heap.h"
#include "common/limits.h"
#include "common/map.h"
#include "common/xalloc.h"

#define DEFAULT_QPS   10.0
#define DEFAULT_BURST 100u

struct wq_item {
    char *key;
    struct wq_item *next; /* FIFO link while queued */
    usec_t queued_at;     /* when it became queued (for latency) */
    usec_t started_at;    /* when it was handed out (for work duration) */
    struct heap_entry he; /* parked on the timer heap (by wq_add_after) */
    unsigned failures;
    bool dirty;      /* needs processing (queued, or re-added while processing) */
    bool processing; /* handed out, wq_done not yet called */
};

/* An idle getter, on its thread's stack while it sleeps in wq_get_for. */
struct wq_waiter {
    pthread_cond_t cond;
    struct wq_waiter *next; /* in q->sleepers */
    bool woken;             /* taken off the queue's lists by whoever woke it */
};

struct wq {
    pthread_mutex_t lock;
    pthread_condattr_t mono;        /* CLOCK_MONOTONIC, for the waiters' condvars */
    pthread_cond_t idle;            /* nothing is being processed any more (drain) */
    struct wq_waiter *sleepers;     /* idle getters waiting for a key, latest first */
    struct wq_waiter *timer_waiter; /* the idle getter waiting for the earliest deadline */
    struct map *items;              /* key -> struct wq_item */
    struct wq_item *head, *tail;
    struct heap timers;
    bool shutting_down;
    bool discarding; /* wq_shutdown_discard: no key is handed out again */
    bool bucket_on;
    struct wq_bucket bucket;
    usec_t backoff_base, backoff_max;
    const char *name;
    const struct wq_metrics_ops *m;
    struct wq_stats st;
};

/* ---- token bucket ---- */

void wq_bucket_init(struct wq_bucket *b, double qps, unsigned burst, usec_t now)
{
    b->qps = qps;
    b->burst = burst;
    b->tokens = burst;
    b->last = now;
}

usec_t wq_bucket_reserve(struct wq_bucket *b, usec_t now)
{
    if (now > b->last) {
        b->tokens += (double)(now - b->last) * b->qps / (double)USEC_PER_SEC;
        if (b->tokens > b->burst)
            b->tokens = b->burst;
        b->last = now;
    }
    b->tokens -= 1.0;
    if (b->tokens >= 0.0)
        return 0;
    return (usec_t)ceil(-b->tokens / b->qps * (double)USEC_PER_SEC);
}

/* ---- item records ---- */

static void item_free(void *p)
{
    struct wq_item *it = p;

    if (!it)
        return;
    xfree(it->key);
    xfree(it);
}

static struct wq_item *item_get(struct wq *q, const char *key)
{
    struct wq_item *it = map_get(q->items, key);

    if (it)
        return it;
    it = XNEW(struct wq_item);
    it->key = xstrdup(key);
    heap_entry_init(&it->he);
    (void)map_put(q->items, key, it, NULL);
    return it;
}

/* Drops the record once nothing refers to it any more. */
static void item_release(struct wq *q, struct wq_item *it)
{
    if (it->dirty || it->processing || heap_entry_queued(&it->he) || it->failures > 0)
        return;
    (void)map_remove(q->items, it->key);
    item_free(it);
}

static size_t depth_locked(const struct wq *q)
{
    return q->st.depth;
}

/* Marks w woken (the caller has taken it off its list) and signals it. */
static void wake_locked(struct wq_waiter *w)
{
    w->woken = true;
    (void)pthread_cond_signal(&w->cond);
}

/* Wakes one idle getter: for a queued key the latest sleeper, else the timer waiter; for
 * a new earliest deadline (timer) the timer waiter, else the latest sleeper (which then
 * takes the role). */
static void wake_one_locked(struct wq *q, bool timer)
{
    struct wq_waiter *w = q->timer_waiter;
    if (w && (timer || !q->sleepers)) {
        q->timer_waiter = NULL;
        wake_locked(w);
    } else if ((w = q->sleepers)) {
        q->sleepers = w->next;
        wake_locked(w);
    }
}

static void enqueue_locked(struct wq *q, struct wq_item *it, usec_t queued_at)
{
    it->next = NULL;
    it->queued_at = queued_at;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->st.depth++;
    q->st.adds++;
    if (q->m && q->m->add)
        q->m->add(q->m->ctx, q->name);
    if (q->m && q->m->depth)
        q->m->depth(q->m->ctx, q->name, depth_locked(q));
    wake_one_locked(q, false);
}

static void add_item_locked(struct wq *q, struct wq_item *it, usec_t queued_at)
{
    if (it->dirty)
        return;
    it->dirty = true;
    if (!it->processing)
        enqueue_locked(q, it, queued_at);
}

static void add_after_locked(struct wq *q, const char *key, usec_t delay)
{
    usec_t now = clock_now();
    struct wq_item *it = item_get(q, key);
    usec_t ready = delay > USEC_INFINITY - now ? USEC_INFINITY : now + delay;

    if (delay == 0) {
        add_item_locked(q, it, now);
        return;
    }
    if (heap_entry_queued(&it->he) && ready >= it->he.deadline)
        return;
    heap_update(&q->timers, &it->he, ready);
    /* A new earliest deadline: the timer waiter sleeps until it instead (woken, it takes
     * the role again), or, with none, an idle getter takes the role. */
    if (heap_peek(&q->timers) == &it->he)
        wake_one_locked(q, true);
}

/* Moves parked keys whose time has come into the FIFO; returns the next deadline. */
static usec_t promote_due_locked(struct wq *q, usec_t now)
{
    struct heap_entry *e;

    while ((e = heap_pop_due(&q->timers, now))) {
        struct wq_item *it = container_of(e, struct wq_item, he);
        add_item_locked(q, it, e->deadline);
        item_release(q, it);
    }
    return heap_next_deadline(&q->timers);
}

/* ---- public API ---- */

static int init_sync(struct wq *q)
{
    int r = -pthread_condattr_init(&q->mono);

    if (r < 0)
        return r;
    r = -pthread_condattr_setclock(&q->mono, CLOCK_MONOTONIC);
    if (r == 0)
        r = -pthread_cond_init(&q->idle, &q->mono);
    if (r < 0) {
        (void)pthread_condattr_destroy(&q->mono);
        return r;
    }
    (void)pthread_mutex_init(&q->lock, NULL);
    return 0;
}

int wq_new(const struct wq_opts *opts, struct wq **ret)
{
    static const struct wq_opts defaults = {0};
    struct wq *q;
    int r;

    if (!opts)
        opts = &defaults;
    if (opts->backoff_max && opts->backoff_base > opts->backoff_max)
        return -EINVAL;
    q = XNEW(struct wq);
    r = init_sync(q);
    if (r < 0) {
        xfree(q);
        return r;
    }
    q->items = map_new(NULL);
    heap_init(&q->timers);
    q->name = opts->name ? opts->name : "";
    q->m = opts->metrics;
    q->backoff_base = opts->backoff_base ? opts->backoff_base : LIMIT_WQ_BACKOFF_BASE;
    q->backoff_max = opts->backoff_max ? opts->backoff_max : LIMIT_WQ_BACKOFF_MAX;
    if (q->backoff_base > q->backoff_max)
        q->backoff_base = q->backoff_max;
    q->bucket_on = opts->qps >= 0;
    wq_bucket_init(&q->bucket, opts->qps > 0 ? opts->qps : DEFAULT_QPS,
                   opts->burst ? opts->burst : DEFAULT_BURST, clock_now());
    *ret = q;
    return 0;
}

void wq_free(struct wq *q)
{
    struct map_iter it;
    const char *key;
    void *value;

    if (!q)
        return;
    heap_done(&q->timers);
    map_foreach (q->items, it, key, value) {
        item_free(value);
    }
    map_free(q->items);
    (void)pthread_cond_destroy(&q->idle);
    (void)pthread_condattr_destroy(&q->mono);
    (void)pthread_mutex_destroy(&q->lock);
    xfree(q);
}

void wq_add(struct wq *q, const char *key)
{
    wq_add_after(q, key, 0);
}

void wq_add_after(struct wq *q, const char *key, usec_t delay)
{
    (void)pthread_mutex_lock(&q->lock);
    if (!q->shutting_down)
        add_after_locked(q, key, delay);
    (void)pthread_mutex_unlock(&q->lock);
}

static usec_t backoff_of(const struct wq *q, unsigned failures)
{
    if (failures >= 63 || q->backoff_base > (q->backoff_max >> failures))
        return q->backoff_max;
    return q->backoff_base << failures;
}

static usec_t when_locked(struct wq *q, const char *key)
{
    struct wq_item *it = item_get(q, key);
    usec_t d = backoff_of(q, it->failures);
    usec_t bucket;

    if (it->failures < UINT32_MAX)
        it->failures++;
    if (!q->bucket_on)
        return d;
    bucket = wq_bucket_reserve(&q->bucket, clock_now());
    return bucket > d ? bucket : d;
}

usec_t wq_when(struct wq *q, const char *key)
{
    usec_t d;

    (void)pthread_mutex_lock(&q->lock);
    d = when_locked(q, key);
    (void)pthread_mutex_unlock(&q->lock);
    return d;
}

void wq_add_rate_limited(struct wq *q, const char *key)
{
    (void)pthread_mutex_lock(&q->lock);
    if (!q->shutting_down) {
        q->st.retries++;
        if (q->m && q->m->retry)
            q->m->retry(q->m->ctx, q->name);
        add_after_locked(q, key, when_locked(q, key));
    }
    (void)pthread_mutex_unlock(&q->lock);
}

void wq_forget(struct wq *q, const char *key)
{
    struct wq_item *it;

    (void)pthread_mutex_lock(&q->lock);
    it = map_get(q->items, key);
    if (it) {
        it->failures = 0;
        item_release(q, it);
    }
    (void)pthread_mutex_unlock(&q->lock);
}

unsigned wq_num_requeues(struct wq *q, const char *key)
{
    struct wq_item *it;
    unsigned n;

    (void)pthread_mutex_lock(&q->lock);
    it = map_get(q->items, key);
    n = it ? it->failures : 0;
    (void)pthread_mutex_unlock(&q->lock);
    return n;
}

static struct wq_item *pop_locked(struct wq *q, usec_t now)
{
    struct wq_item *it = q->head;
    usec_t lat = now > it->queued_at ? now - it->queued_at : 0;

    q->head = it->next;
    if (!q->head)
        q->tail = NULL;
    it->next = NULL;
    it->dirty = false;
    it->processing = true;
    it->started_at = now;
    q->st.depth--;
    q->st.processing++;
    q->st.gets++;
    q->st.latency_total += lat;
    if (lat > q->st.latency_max)
        q->st.latency_max = lat;
    if (q->m && q->m->depth)
        q->m->depth(q->m->ctx, q->name, depth_locked(q));
    if (q->m && q->m->latency)
        q->m->latency(q->m->ctx, q->name, lat);
    return it;
}

/* Takes w off whichever list it is on (it woke by itself: its time came). */
static void unlink_locked(struct wq *q, struct wq_waiter *w)
{
    struct wq_waiter **pp;
    if (q->timer_waiter == w) {
        q->timer_waiter = NULL;
        return;
    }
    for (pp = &q->sleepers; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            return;
        }
    }
}

/* Sleeps until woken or until: as the timer waiter when parked keys have a deadline
 * and no other getter waits for it (until is then at most that deadline), else as a
 * sleeper that only a queued key (or shutdown) wakes before until. */
static void wait_locked(struct wq *q, usec_t now, usec_t deadline, usec_t until)
{
    struct wq_waiter w = {.woken = false};
    struct timespec ts;

    (void)pthread_cond_init(&w.cond, &q->mono); /* cannot fail: q->mono is valid */
    if (deadline != USEC_INFINITY && !q->timer_waiter) {
        q->timer_waiter = &w;
        if (deadline < until)
            until = deadline;
    } else {
        w.next = q->sleepers;
        q->sleepers = &w;
    }
    if (until != USEC_INFINITY)
        clock_deadline_mono(until > now ? until - now : 0, &ts);
    while (!w.woken && !q->shutting_down) {
        if (until == USEC_INFINITY)
            (void)pthread_cond_wait(&w.cond, &q->lock);
        else if (pthread_cond_timedwait(&w.cond, &q->lock, &ts) == ETIMEDOUT)
            break;
    }
    if (!w.woken)
        unlink_locked(q, &w);
    q->st.wakeups++;
    (void)pthread_cond_destroy(&w.cond);
}

int wq_get_for(struct wq *q, const char **ret_key, usec_t idle)
{
    struct wq_item *it = NULL;
    usec_t until = idle == USEC_INFINITY ? USEC_INFINITY : clock_now() + idle;
    int r = -ESHUTDOWN;

    (void)pthread_mutex_lock(&q->lock);
    for (;;) {
        usec_t now = clock_now();
        usec_t deadline = promote_due_locked(q, now);

        if (q->head) {
            it = pop_locked(q, now);
            break;
        }
        if (q->shutting_down)
            break;
        if (now >= until) {
            r = -ETIMEDOUT;
            break;
        }
        wait_locked(q, now, deadline, until);
    }
    /* Leaving with keys still parked and nobody waiting for their deadline (this thread
     * may have been the timer waiter): an idle getter takes the role. */
    if (!q->timer_waiter && heap_next_deadline(&q->timers) != USEC_INFINITY)
        wake_one_locked(q, false);
    (void)pthread_mutex_unlock(&q->lock);
    if (!it)
        return r;
    *ret_key = it->key;
    return 0;
}

int wq_get(struct wq *q, const char **ret_key)
{
    return wq_get_for(q, ret_key, USEC_INFINITY);
}

void wq_done(struct wq *q, const char *key)
{
    struct wq_item *it;
    usec_t now = clock_now();

    (void)pthread_mutex_lock(&q->lock);
    it = map_get(q->items, key);
    ASSERT(it && it->processing);
    it->processing = false;
    q->st.processing--;
    q->st.work_total += now - it->started_at;
    if (q->m && q->m->work)
        q->m->work(q->m->ctx, q->name, now - it->started_at);
    if (it->dirty && q->discarding)
        it->dirty = false; /* re-added while processing, after the queue's end */
    else if (it->dirty)
        enqueue_locked(q, it, now);
    item_release(q, it);
    if (q->st.processing == 0)
        (void)pthread_cond_broadcast(&q->idle);
    (void)pthread_mutex_unlock(&q->lock);
}

/* Drops the queued keys and marks the re-adds of keys being processed to be dropped. */
static void discard_locked(struct wq *q)
{
    struct wq_item *it, *next;

    q->discarding = true;
    for (it = q->head; it; it = next) {
        next = it->next;
        it->next = NULL;
        it->dirty = false;
        q->st.depth--;
        item_release(q, it);
    }
    q->head = q->tail = NULL;
    if (q->m && q->m->depth)
        q->m->depth(q->m->ctx, q->name, depth_locked(q));
}

/* The queue's end in one critical section: with discard, the queued keys are gone before
 * any getter is woken (a woken worker, or one back from wq_done, would take them). */
static void shutdown_queue(struct wq *q, bool discard)
{
    struct heap_entry *e;

    (void)pthread_mutex_lock(&q->lock);
    q->shutting_down = true;
    while ((e = heap_pop(&q->timers)))
        item_release(q, container_of(e, struct wq_item, he));
    if (discard)
        discard_locked(q);
    while (q->sleepers || q->timer_waiter)
        wake_one_locked(q, false);
    (void)pthread_mutex_unlock(&q->lock);
}

void wq_shutdown(struct wq *q)
{
    shutdown_queue(q, false);
}

void wq_shutdown_discard(struct wq *q)
{
    shutdown_queue(q, true);
}

void wq_shutdown_drain(struct wq *q)
{
    wq_shutdown(q);
    (void)pthread_mutex_lock(&q->lock);
    while (q->st.processing > 0)
        (void)pthread_cond_wait(&q->idle, &q->lock);
    (void)pthread_mutex_unlock(&q->lock);
}

bool wq_shutting_down(struct wq *q)
{
    bool v;

    (void)pthread_mutex_lock(&q->lock);
    v = q->shutting_down;
    (void)pthread_mutex_unlock(&q->lock);
    return v;
}

size_t wq_len(struct wq *q)
{
    size_t n;

    (void)pthread_mutex_lock(&q->lock);
    (void)promote_due_locked(q, clock_now());
    n = q->st.depth;
    (void)pthread_mutex_unlock(&q->lock);
    return n;
}

void wq_stats(struct wq *q, struct wq_stats *ret)
{
    (void)pthread_mutex_lock(&q->lock);
    (void)promote_due_locked(q, clock_now());
    *ret = q->st;
    ret->waiting = heap_len(&q->timers);
    (void)pthread_mutex_unlock(&q->lock);
}
