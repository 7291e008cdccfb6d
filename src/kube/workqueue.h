/* SPDX-License-Identifier: Apache-2.0 */
/* A controller work queue with client-go semantics: string keys, de-duplication, never
 * two workers on one key, delayed adds, per-key exponential back-off plus an overall
 * token bucket, clean shutdown (with a drain variant) and metrics hooks.
 *
 * Thread-safety: every function may be called from any thread, except wq_free. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/clock.h"

struct wq;

/** Optional metrics callbacks (each may be NULL). They run with the queue lock held:
 * they must be quick and must not call back into the queue. name is opts.name. */
struct wq_metrics_ops {
    void *ctx;
    void (*add)(void *ctx, const char *name);                 /* a key became queued */
    void (*depth)(void *ctx, const char *name, size_t depth); /* depth changed */
    void (*latency)(void *ctx, const char *name, usec_t d);   /* queued -> handed out */
    void (*work)(void *ctx, const char *name, usec_t d);      /* handed out -> done */
    void (*retry)(void *ctx, const char *name);               /* a rate-limited add */
};

struct wq_opts {
    const char *name;    /* for metrics; borrowed for the queue's life; NULL = "" */
    usec_t backoff_base; /* first per-key back-off; 0 = LIMIT_WQ_BACKOFF_BASE */
    usec_t backoff_max;  /* back-off cap; 0 = LIMIT_WQ_BACKOFF_MAX */
    double qps;          /* overall rate of rate-limited adds; 0 = 10; < 0 = no bucket */
    unsigned burst;      /* bucket size; 0 = 100 */
    const struct wq_metrics_ops *metrics; /* borrowed for the queue's life; may be NULL */
};

/** Counters since creation (plain values, a snapshot). */
struct wq_stats {
    size_t depth;          /* keys waiting to be handed out */
    size_t waiting;        /* keys parked by wq_add_after / back-off */
    size_t processing;     /* keys handed out and not yet done */
    unsigned long adds;    /* keys that became queued */
    unsigned long retries; /* wq_add_rate_limited calls */
    unsigned long gets;    /* keys handed out */
    unsigned long wakeups; /* times an idle getter woke (a key, its deadline, shutdown) */
    usec_t work_total;     /* sum of get -> done times */
    usec_t latency_total;  /* sum of queued -> get times */
    usec_t latency_max;
};

/** Creates a queue (opts may be NULL for defaults). Returns 0 and *ret (new, free with
 * wq_free) or -EINVAL for nonsensical options. */
int wq_new(const struct wq_opts *opts, struct wq **ret);
/** Frees the queue. No thread may be inside or later call any wq function; call
 * wq_shutdown and join the workers first. NULL is fine. */
void wq_free(struct wq *q);

/** Queues key (borrowed) unless it is already queued; a key being processed is queued
 * again once wq_done is called for it. Ignored after shutdown. */
void wq_add(struct wq *q, const char *key);
/** Queues key after delay (0 = at once). A key already waiting keeps the earlier of
 * the two times. Ignored after shutdown. */
void wq_add_after(struct wq *q, const char *key, usec_t delay);
/** wq_add_after with the delay of wq_when (back-off of key, and the token bucket). */
void wq_add_rate_limited(struct wq *q, const char *key);
/** Returns the delay the rate limiter gives key now and counts one more failure of it:
 * max(backoff_base * 2^failures capped at backoff_max, token-bucket delay). */
usec_t wq_when(struct wq *q, const char *key);
/** Resets the back-off of key (call after it was processed successfully). */
void wq_forget(struct wq *q, const char *key);
/** Number of failures counted for key since the last wq_forget. */
unsigned wq_num_requeues(struct wq *q, const char *key);

/** Blocks until a key is available and hands it out: *ret_key is borrowed, valid until
 * wq_done for it. Returns 0, or -ESHUTDOWN once the queue is shut down and no queued
 * key is left (keys queued before shutdown are still handed out). */
int wq_get(struct wq *q, const char **ret_key);
/** wq_get that gives up after idle without a key: returns -ETIMEDOUT then (USEC_INFINITY:
 * never). */
int wq_get_for(struct wq *q, const char **ret_key, usec_t idle);
/** Marks key (as returned by wq_get) as processed; re-queues it when it was added
 * during processing. The key pointer from wq_get is invalid afterwards. */
void wq_done(struct wq *q, const char *key);

/** Stops accepting adds, drops keys parked for later, and wakes every wq_get (which
 * returns -ESHUTDOWN once the queue is empty). Idempotent. */
void wq_shutdown(struct wq *q);
/** wq_shutdown that also drops the queued keys and the re-adds of keys being processed:
 * no key is handed out after it (the ones handed out before run to their wq_done). For
 * work that must not start any more, such as a controller's after its leadership ended.
 * Idempotent. */
void wq_shutdown_discard(struct wq *q);
/** wq_shutdown, then waits until no key is being processed. */
void wq_shutdown_drain(struct wq *q);
bool wq_shutting_down(struct wq *q);
/** Number of queued keys (depth). */
size_t wq_len(struct wq *q);
void wq_stats(struct wq *q, struct wq_stats *ret);

/** A token bucket as in client-go's BucketRateLimiter: reservations may go into debt,
 * and the delay is how long until the reserved token exists. A value type; not
 * thread-safe by itself. */
struct wq_bucket {
    double qps;
    double burst;
    double tokens;
    usec_t last;
};

/** Initialises a full bucket at time now (monotonic usec). */
void wq_bucket_init(struct wq_bucket *b, double qps, unsigned burst, usec_t now);
/** Takes one token at time now and returns how long the caller must wait for it. */
usec_t wq_bucket_reserve(struct wq_bucket *b, usec_t now);
