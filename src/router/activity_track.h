/* SPDX-License-Identifier: Apache-2.0 */
/* Activity reporting for idle auto-suspend: the router counts, per Sandbox, requests
 * in flight and open tunnels (WebSockets) and remembers the last activity, in memory.
 * A periodic flush writes agents.x-k8s.io/last-activity on Sandboxes that have an idle
 * policy, at most once per interval (timeoutSeconds / 4, clamped to 1..60 s) and only
 * when it moved: O(1) API writes per interval of activity, never one per request. An
 * open request or tunnel counts as activity at every flush.
 *
 * Threading: everything on the loop thread; writes run on a resume_worker. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/clock.h"

struct kube_client;
struct kube_store;
struct resume_worker;
struct activity_track;

/** Writes the annotation value (RFC 3339) on ns/name (worker thread). Returns 0 or
 * negative. */
typedef int activity_write_fn(void *ctx, const char *ns, const char *name, const char *value);

struct activity_track_opts {
    struct kube_store *store;     /* borrowed: Sandboxes (for their idle policy) */
    struct resume_worker *worker; /* borrowed: runs the writes */
    struct kube_client *client;   /* borrowed; used by the default write */
    usec_t tick;                  /* 0: LIMIT_ROUTER_ACTIVITY_TICK */
    activity_write_fn *write;     /* NULL: activity_write_kube */
    void *write_ctx;
};

/** Returns a new tracker on loop (borrowed) with its flush timer running. */
struct activity_track *activity_track_new(uv_loop_t *loop, const struct activity_track_opts *o);
/** Stops and frees once the timer closed (NULL is fine). Writes in flight finish on the
 * worker, which must be freed after this. */
void activity_track_free(struct activity_track *t);

/** A request or tunnel to the Sandbox "ns/name" (key borrowed) starts / ends. Begin
 * returns whether it was counted (not with the table full, LIMIT_ROUTER_ACTIVITY_ENTRIES,
 * nor without a tracker): end only what was, or the count of a Sandbox whose entry came
 * later would drop while its own requests are still open. */
bool activity_begin(struct activity_track *t, const char *key);
void activity_end(struct activity_track *t, const char *key);

/** Write interval for a policy timeout (pure). */
usec_t activity_interval(usec_t timeout);
/** Runs one flush now (tests). */
void activity_flush(struct activity_track *t);
/** At a stop, once no request or tunnel is left: writes at once the activity of every
 * Sandbox that moved since its last write, whatever its interval or back-off (else the
 * last interval's activity, up to a minute, is lost and the Sandbox is suspended that
 * much early), and from then on each write that finishes is followed by one more when
 * its Sandbox moved meanwhile. Returns the writes pending (activity_writes_pending);
 * NULL is fine (0). */
size_t activity_flush_final(struct activity_track *t);
/** Writes submitted and not yet done (NULL: 0). */
size_t activity_writes_pending(const struct activity_track *t);

struct activity_stats {
    uint64_t writes, write_errors;
    size_t entries;
};
void activity_track_stats(const struct activity_track *t, struct activity_stats *ret);

/** The default write: a merge patch of the annotation (client is the ctx). */
int activity_write_kube(void *ctx, const char *ns, const char *name, const char *value);
