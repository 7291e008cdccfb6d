/* SPDX-License-Identifier: Apache-2.0 */
/* An informer keeps a kube_store in step with the API server: LIST (all pages, each
 * stored as it arrives: pages of LIMIT_KUBE_LIST_PAGE objects), then
 * WATCH from the list's resourceVersion with bookmarks; it resumes the watch from the
 * last resourceVersion seen when a stream ends or fails (with back-off), relists when
 * the server says 410 Gone / Expired, and tells handlers about every change.
 *
 * Threads and ordering: each informer runs one thread of its own. Every handler is
 * called from that thread, one call at a time, in the order the changes happened
 * (stream order; on a relist, updates and adds in list order, then deletes; a LIST that
 * fails part-way keeps the pages already stored, each object a state the server had, and
 * is retried: deletions come only after a complete list). The store
 * is updated before the handler runs, so a handler (or any other thread) reading the
 * store sees at least that state. Handlers must return promptly (enqueue a key and
 * return): while one runs, the informer reads no events.
 *
 * Typical use:
 *     struct kube_informer_opts o = {.client = c, .res = &KUBE_RES_PODS,
 *                                    .label_selector = "app=x",
 *                                    .transform = kube_store_strip_transform};
 *     struct kube_informer *inf;
 *     kube_informer_new(&o, &inf);
 *     kube_informer_add_index(inf, "owner", kube_index_controller_uid, NULL);
 *     kube_informer_add_handlers(inf, &(struct kube_informer_handlers){.on_add = ...});
 *     kube_informer_start(inf);
 *     kube_informer_wait_for_sync(inf, 30 * USEC_PER_SEC);
 *     ... kube_store_get(kube_informer_store(inf), "ns/name") ...
 *     kube_informer_free(inf); (stops and joins the thread) */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "kube/client.h"
#include "kube/err.h"
#include "kube/res.h"
#include "kube/store.h"

struct kube_informer;

/** Change notifications. Every pointer is optional. The objects are borrowed: valid
 * during the call; immutable (never modify them; json_incref to keep one). */
struct kube_informer_handlers {
    void (*on_add)(void *ctx, const json_t *obj);
    /** old_obj and new_obj are the same object on a periodic resync. */
    void (*on_update)(void *ctx, const json_t *old_obj, const json_t *new_obj);
    /** obj is the last state: from the DELETED event, or, when final_state_unknown, the
     * cached object that a relist no longer returned (the deletion itself was missed:
     * a tombstone). */
    void (*on_delete)(void *ctx, const json_t *obj, bool final_state_unknown);
    void *ctx;
};

/** Arguments of one watch call of a source. */
struct kube_informer_watch_args {
    const char *resource_version; /* resume point (from the LIST or the last event) */
    long timeout_seconds;         /* server-side timeoutSeconds to send */
    kube_stream_fn *fn;           /* feed every received byte to fn(fn_ctx, ...) */
    void *fn_ctx;
    const atomic_bool *stop; /* true: abort promptly and return -ECANCELED */
};

struct kube_informer_opts;

/** Where LIST and WATCH come from. NULL in the options means the API server through
 * opts->client; tests inject a scripted source. Both functions run on the informer's
 * thread. */
struct kube_informer_source {
    /** Lists every object: on success *ret_list gets a new reference to a List-shaped
     * object {"items":[...],"metadata":{"resourceVersion":"..."}}. Unused (may be NULL)
     * when list_pages is set. */
    int (*list)(void *ctx, const struct kube_informer_opts *opts, json_t **ret_list,
                struct kube_err *reterr);
    /** Optional; when set it is used instead of list: lists page by page as
     * kube_list_pages, handing each page to fn(fn_ctx, ...) as it arrives, so the
     * informer stores a page's items before the next is read and never holds the whole
     * response. Returns 0, fn's negative value, or a negative errno. */
    int (*list_pages)(void *ctx, const struct kube_informer_opts *opts, kube_list_page_fn *fn,
                      void *fn_ctx, struct kube_err *reterr);
    /** Streams one watch response (as kube_request_stream): 0 when the server ended it,
     * -ECANCELED when *args->stop became true, fn's negative value, -ESTALE when the
     * server refused the resourceVersion (HTTP 410), or another negative errno. */
    int (*watch)(void *ctx, const struct kube_informer_opts *opts,
                 const struct kube_informer_watch_args *args, struct kube_err *reterr);
    void *ctx;
};

struct kube_informer_opts {
    struct kube_client *client; /* borrowed; must outlive the informer (unless source) */
    const struct kube_res *res; /* borrowed; required */
    const char *ns;             /* NULL: all namespaces (or cluster scope) */
    const char *label_selector; /* NULL: none */
    const char *field_selector; /* NULL: none */
    usec_t resync_period;       /* 0: no periodic resync */
    long watch_timeout_s;       /* 0: random in [LIMIT_KUBE_WATCH_TIMEOUT_S, twice that] */
    usec_t idle_timeout;        /* no byte for this long: reconnect; 0 = LIMIT_KUBE_WATCH_IDLE */
    usec_t backoff_min;         /* 0 = LIMIT_KUBE_BACKOFF_MIN */
    usec_t backoff_max;         /* 0 = LIMIT_KUBE_BACKOFF_MAX */
    size_t max_frame;           /* 0 = LIMIT_KUBE_WATCH_FRAME */
    const struct kube_informer_source *source; /* NULL: the API server via client */
    kube_store_transform_fn *transform;        /* applied to every object received, e.g.
                                                  kube_store_strip_transform; NULL: none */
    void *transform_ctx;
    bool compact_store;   /* keep objects as JSON text (kube_store_set_compact) */
    size_t compact_above; /* or switch to it past this many objects (0: never) */
    const char *name;     /* for debug logs; NULL: res->plural */
    /* Set by the informer in the opts it hands its source (a caller's value is ignored):
     * its stop flag, for the source's LIST requests (kube_req.cancel), so a stop does not
     * wait out the retries of a failing API server. */
    atomic_bool *cancel;
};

/** Counters since creation, for tests and metrics. */
struct kube_informer_stats {
    uint64_t lists;          /* successful LISTs */
    uint64_t relists;        /* of which after the first */
    uint64_t list_errors;    /* failed LISTs (retried after back-off) */
    uint64_t watch_starts;   /* watch connections opened */
    uint64_t watch_restarts; /* of which resumed after a previous watch ended */
    uint64_t watch_errors;   /* watches ended by an error (not 410, not stop) */
    uint64_t gone;           /* 410 Gone / Expired, each forcing a relist */
    uint64_t events;         /* watch events applied, bookmarks included */
    uint64_t bookmarks;
    uint64_t resyncs;                /* periodic resyncs started */
    uint64_t adds, updates, deletes; /* handler deliveries (resync updates included) */
};

/** Creates a stopped informer with an empty store. Copies opts and its strings; res,
 * client, source->ctx and transform_ctx are borrowed. Returns 0 and *ret (free with
 * kube_informer_free), or -EINVAL without res or without both client and source. */
int kube_informer_new(const struct kube_informer_opts *opts, struct kube_informer **ret);
/** Stops (see kube_informer_stop) and frees the informer and its store. NULL is fine. */
void kube_informer_free(struct kube_informer *inf);

/** Adds a handler set (copied; h->ctx borrowed). Only before start: returns 0, -EBUSY
 * once started, -ENOSPC past LIMIT_KUBE_INFORMER_HANDLERS. */
int kube_informer_add_handlers(struct kube_informer *inf, const struct kube_informer_handlers *h);
/** Adds an index to the store (as kube_store_add_index). */
int kube_informer_add_index(struct kube_informer *inf, const char *name, kube_index_fn *fn,
                            void *ctx);
/** The informer's store (borrowed, valid until kube_informer_free); readable from any
 * thread at any time. */
struct kube_store *kube_informer_store(struct kube_informer *inf);

/** Starts the informer's thread. Returns 0, -EALREADY if it was started before, or a
 * negative errno from pthread_create. */
int kube_informer_start(struct kube_informer *inf);
/** Asks the thread to stop and joins it: a LIST or handler call in progress finishes
 * first; a watch or back-off wait is cut short (within about a second with the API
 * server source). Idempotent; no handler runs after it returns. Never call it (or
 * kube_informer_free) from a handler: the thread would join itself. start, stop and
 * free belong to the thread that owns the informer. */
void kube_informer_stop(struct kube_informer *inf);
/** Asks the thread to stop without waiting for it (kube_informer_stop then joins it).
 * Several informers asked first and joined after take about one second together, not one
 * each. Thread-safe; NULL is fine. */
void kube_informer_request_stop(struct kube_informer *inf);

/** True once the first LIST has been stored and its on_add calls made. Thread-safe. */
bool kube_informer_has_synced(struct kube_informer *inf);
/** Waits until has_synced. Returns 0, -ETIMEDOUT after timeout (USEC_INFINITY waits
 * forever), or -ECANCELED when the informer stopped first. Thread-safe; may be called
 * before start (it then waits for the start and the first LIST). */
int kube_informer_wait_for_sync(struct kube_informer *inf, usec_t timeout);

/** Fills *ret with the counters. Thread-safe. */
void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *ret);
/** Copies the last resourceVersion the informer synced to (LIST or event, bookmarks
 * included; "" before the first LIST) into out. Returns 0 or -E2BIG. Thread-safe. */
int kube_informer_last_rv(struct kube_informer *inf, char *out, size_t size);
