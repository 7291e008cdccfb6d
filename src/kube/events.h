/* SPDX-License-Identifier: Apache-2.0 */
/* Events recorder: core/v1 Events about objects, written asynchronously so reconcilers
 * never wait on the API. record() only formats and enqueues (a bounded queue that drops,
 * with a counter, when full); a per-object token bucket stops a hot loop from flooding
 * the API; a background thread writes, and aggregates: the same (object, type, reason,
 * message) within a window patches the existing Event's count and lastTimestamp instead
 * of creating another. The aggregation and spam caches are bounded LRUs.
 *
 * The API calls go through struct events_api so tests can use an in-memory fake;
 * events_api_kube() gives the real one. */
#pragma once

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/clock.h"
#include "kube/err.h"

struct kube_client;
struct events_recorder;
struct yield_gate;

enum events_type {
    EVENTS_NORMAL,
    EVENTS_WARNING,
};

/** The Event API as seen by the recorder. Each call returns 0 or a negative errno with
 * the kube client's mapping (-ENOENT not found, -EEXIST already exists, ...); reterr and
 * ret_obj may be NULL (on success *ret_obj gets a new reference). obj and patch are
 * borrowed; patch is a JSON merge patch. */
struct events_api {
    void *ctx;
    int (*create)(void *ctx, const char *ns, const json_t *obj, json_t **ret_obj,
                  struct kube_err *reterr);
    int (*patch)(void *ctx, const char *ns, const char *name, const json_t *patch, json_t **ret_obj,
                 struct kube_err *reterr);
};

/** Fills *ret with calls through client c (borrowed: must outlive the recorder). */
void events_api_kube(struct kube_client *c, struct events_api *ret);

/** Time sources, injectable for tests; NULL functions use clock_now / clock_wall_now.
 * now (monotonic usec) drives the spam filter and the aggregation window; wall_now
 * (usec since the epoch) gives the timestamps written. */
struct events_clock {
    void *ctx;
    usec_t (*now)(void *ctx);
    usec_t (*wall_now)(void *ctx);
};

#define EVENTS_DEFAULT_QUEUE  1000
#define EVENTS_DEFAULT_WINDOW (10 * 60 * USEC_PER_SEC) /* aggregation window */
#define EVENTS_DEFAULT_REFILL (5 * 60 * USEC_PER_SEC)  /* one spam token per 5 minutes */

struct events_opts {
    const char *component; /* source.component and reportingComponent; required (copied) */
    const char *instance;  /* reportingInstance (copied); NULL = the host name */
    struct events_api api; /* required: create, patch */
    size_t queue_size;     /* pending events; 0 = EVENTS_DEFAULT_QUEUE */
    usec_t window;         /* aggregation window; 0 = EVENTS_DEFAULT_WINDOW */
    unsigned burst;        /* events per object before limiting; 0 = LIMIT_EVENT_BURST */
    usec_t refill;         /* one more event per object every refill; 0 = default */
    size_t cache_size;     /* entries in each LRU cache; 0 = LIMIT_EVENT_CACHE */
    const struct events_clock *clock; /* copied; NULL = real clocks */
};

/** Counters since creation (a snapshot). */
struct events_stats {
    unsigned long recorded;      /* accepted into the queue */
    unsigned long dropped_queue; /* queue full, recorder stopped, or discarded */
    unsigned long dropped_spam;  /* per-object token bucket empty */
    unsigned long created;       /* Events created */
    unsigned long patched;       /* Events aggregated into an existing one */
    unsigned long failed;        /* API writes that failed (not retried) */
    unsigned long held;          /* writes the gate held back (events_set_gate) */
};

/** Creates a recorder and starts its writer thread. Returns 0 and *ret (new, free with
 * events_recorder_free), -EINVAL for missing component/api, or a pthread error. */
int events_recorder_new(const struct events_opts *opts, struct events_recorder **ret);
/** Stops (writing what is queued) and frees. NULL is fine. */
void events_recorder_free(struct events_recorder *r);

/** Records an event about obj (borrowed; only kind, apiVersion, namespace, name, uid and
 * resourceVersion are read). reason is borrowed; the message is formatted and cut to
 * LIMIT_EVENT_MESSAGE bytes (at a UTF-8 boundary). Never blocks on the API; may drop
 * (see stats). Any thread. */
void events_record(struct events_recorder *r, const json_t *obj, enum events_type type,
                   const char *reason, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void events_recordv(struct events_recorder *r, const json_t *obj, enum events_type type,
                    const char *reason, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

/** Sets the gate the writer asks before each write (g copied; NULL opens it): while it
 * says busy, an Event waits, at most g->max_wait after it was recorded, and not at all
 * once the queue is half full or the recorder stops. When it returns, the writer no
 * longer uses the gate set before (its ctx may go). Any thread. */
void events_set_gate(struct events_recorder *r, const struct yield_gate *g);

/** Waits until every event recorded before the call has been written (or failed). */
void events_flush(struct events_recorder *r);
/** Writes what is queued, then stops the thread; later records are dropped.
 * Idempotent. */
void events_stop(struct events_recorder *r);
/** As events_stop, but bounded: what is queued is written for up to budget (a slow or
 * throttling API server), then the rest is dropped as events_discard drops it (a write
 * already sent finishes). Returns whether everything recorded was written (or failed).
 * For a stop while leading: the Lease is released after it, so a successor is not kept
 * waiting behind a long queue. Idempotent with events_stop and events_discard. */
bool events_stop_within(struct events_recorder *r, usec_t budget);
/** As events_stop, but what is queued (and the one held at the gate) is dropped, not
 * written; a write already sent finishes. For a controller whose leadership ended: no
 * write starts after. Idempotent; events_stop after it does nothing more. */
void events_discard(struct events_recorder *r);
void events_stats(struct events_recorder *r, struct events_stats *ret);
