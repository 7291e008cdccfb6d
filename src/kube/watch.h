/* SPDX-License-Identifier: Apache-2.0 */
/* The Kubernetes watch stream: event decoding, a stream decoder that frames, decodes and
 * tracks the resourceVersion, and the reconnect back-off. No HTTP here: the bytes come
 * from kube_request_stream (or a test), which keeps this layer testable on its own. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "kube/err.h"

enum kube_event_type {
    KUBE_EVENT_ADDED,
    KUBE_EVENT_MODIFIED,
    KUBE_EVENT_DELETED,
    KUBE_EVENT_BOOKMARK,
    KUBE_EVENT_ERROR,
};

/** One decoded watch event. */
struct kube_event {
    enum kube_event_type type;
    json_t *object;               /* owned reference: the object (a Status for ERROR) */
    const char *resource_version; /* the object's, valid until kube_event_done even when a
                                   * handler drops it from the object; NULL when absent */
    json_t *rv_ref;               /* owned reference to resource_version's string */
};

/** "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" (static string). */
const char *kube_event_type_name(enum kube_event_type type);

/** Decodes one frame (borrowed bytes, without the newline): a JSON object with a "type"
 * string naming one of the event types and an "object" object. On success fills *ret
 * (release with kube_event_done). A malformed frame (bad JSON, missing or unknown type,
 * object not an object) returns -EPROTO with the reason in reterr (may be NULL); *ret is
 * then untouched. Parses the bytes exactly once. */
int kube_event_decode(const char *frame, size_t len, struct kube_event *ret,
                      struct kube_err *reterr);
/** Drops the event's reference; the event is then empty. NULL is fine. */
void kube_event_done(struct kube_event *ev);

/** For an ERROR event, fills *ret from its metav1.Status (http_status = Status.code,
 * reason, message; code = the matching negative errno, -ESTALE for 410). Returns 0, or
 * -EINVAL when ev is not an ERROR event. */
int kube_event_status(const struct kube_event *ev, struct kube_err *ret);
/** True for an ERROR event whose Status says the resourceVersion is too old (code 410
 * or reason Expired/Gone): the caller must relist. */
bool kube_event_is_gone(const struct kube_event *ev);

/** Called by the decoder for each ADDED, MODIFIED, DELETED and BOOKMARK event, in stream
 * order. The event is borrowed; ev->object is referenced by nobody else, so the callee
 * may modify it (e.g. strip fields, metadata.resourceVersion too: ev->resource_version
 * stays valid) and json_incref it to keep it. Return 0 to go on, or
 * a negative errno to stop the stream (kube_watch_feed returns it). */
typedef int kube_watch_event_fn(void *ctx, const struct kube_event *ev);

/** A stream decoder: frames bytes (bounded by max_frame), decodes events, remembers the
 * resourceVersion of the last event delivered (bookmarks included), and turns ERROR
 * events into errors. One decoder serves a sequence of connections: call
 * kube_watch_reset before each reconnect. Not thread-safe: one stream at a time. */
struct kube_watch;

/** Returns a new decoder (free with kube_watch_free) calling fn(ctx, ev) per event.
 * max_frame 0 means LIMIT_KUBE_WATCH_FRAME. Never fails (aborts on OOM). */
struct kube_watch *kube_watch_new(size_t max_frame, kube_watch_event_fn *fn, void *ctx);
/** NULL is fine. */
void kube_watch_free(struct kube_watch *w);

/** Feeds the next chunk of the stream (borrowed). Has the kube_stream_fn signature, so
 * it can be passed to kube_request_stream directly with the decoder as ctx. Returns 0,
 * or stops at the first problem: -E2BIG for an oversized frame, -EPROTO for a malformed
 * frame or an ERROR event other than 410, -ESTALE for an ERROR event saying 410
 * Gone/Expired (relist), or the callback's negative value. After an error the partial
 * frame is dropped and the stream must be reconnected; kube_watch_error tells why. */
int kube_watch_feed(void *watch, const char *data, size_t len);
/** Drops a partial frame and the last error (before a new connection). Keeps the
 * resourceVersion. */
void kube_watch_reset(struct kube_watch *w);

/** The resourceVersion to resume from: the last one set or seen in an event, or NULL.
 * Borrowed, valid until the next feed or set. */
const char *kube_watch_rv(const struct kube_watch *w);
/** Sets the resourceVersion (copied; NULL clears it), e.g. from a LIST's metadata. */
void kube_watch_set_rv(struct kube_watch *w, const char *rv);
/** Why the last feed failed (code 0 when it did not). Borrowed. */
const struct kube_err *kube_watch_error(const struct kube_watch *w);
/** Events delivered to the callback since creation (bookmarks included). */
uint64_t kube_watch_events(const struct kube_watch *w);

/** Exponential back-off with jitter for reconnects: each delay lies in [min, max] and
 * the base doubles on every failure until max. Embed it; not thread-safe. */
struct kube_backoff {
    usec_t min, max; /* bounds */
    usec_t cur;      /* base of the next delay */
    uint64_t rng;    /* xorshift state for the jitter */
};

/** Initialises b; 0 for min or max means LIMIT_KUBE_BACKOFF_MIN / _MAX. */
void kube_backoff_init(struct kube_backoff *b, usec_t min, usec_t max);
/** Returns the next delay: the base plus up to half of it at random, capped at max; then
 * doubles the base. */
usec_t kube_backoff_next(struct kube_backoff *b);
/** Back to min after a success. */
void kube_backoff_reset(struct kube_backoff *b);
/** A uniformly random value in [lo, hi] drawn from b's generator (e.g. a randomised
 * watch timeoutSeconds). */
uint64_t kube_backoff_rand(struct kube_backoff *b, uint64_t lo, uint64_t hi);
