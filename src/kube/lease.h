/* SPDX-License-Identifier: Apache-2.0 */
/* Leader election on a coordination.k8s.io/v1 Lease, with client-go semantics: acquire a
 * lease that is absent, released, ours, or expired by OUR observation (we time how long
 * the record has not changed on the monotonic clock and never trust the remote clock);
 * renew every retry period (the leader first tries an optimistic update of the object
 * it last wrote, and reads the Lease only when that conflicts); keep trying every retry
 * period while renewals fail, and give up once renew_deadline has passed since the last
 * successful renew, or as soon as someone else is seen holding it; optimistic
 * concurrency through resourceVersion; release on stop (holder "" and
 * leaseDurationSeconds 1) so another candidate takes over at once.
 *
 * Each API call has its own timeout (request_timeout, default renew_deadline / 2 as
 * client-go's NewFromKubeconfig, and never past the renew deadline while leading), so
 * one hung request cannot use up the deadline; the API is called without the client's
 * own retries (the elector retries every period). lease_elector_is_leader turns false
 * when the renew deadline has passed even if the election thread is stuck, so work
 * gated on it stops before the lease can have expired for anyone else.
 *
 * The API calls go through struct lease_api so tests can use an in-memory fake;
 * lease_api_kube() gives the real one. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/clock.h"
#include "kube/err.h"

struct kube_client;
struct lease_elector;

/** The Lease API as seen by the elector. Each call returns 0 or a negative errno with
 * the kube client's mapping: -ENOENT not found, -EBUSY conflict (stale resourceVersion),
 * -EEXIST already exists, -ETIMEDOUT when timeout (> 0, usec) passed, others for
 * transport/server failures; reterr may be NULL. A call makes one attempt and must give
 * up after timeout. On success *ret_obj (unless ret_obj is NULL) gets a new reference
 * to the object the server returned. obj is borrowed. */
struct lease_api {
    void *ctx;
    int (*get)(void *ctx, const char *ns, const char *name, usec_t timeout, json_t **ret_obj,
               struct kube_err *reterr);
    int (*create)(void *ctx, const char *ns, const json_t *obj, usec_t timeout, json_t **ret_obj,
                  struct kube_err *reterr);
    int (*update)(void *ctx, const char *ns, const json_t *obj, usec_t timeout, json_t **ret_obj,
                  struct kube_err *reterr);
};

/** Fills *ret with calls through client c (borrowed: must outlive the elector): one
 * attempt each (no client retries), bounded by the call's timeout. */
void lease_api_kube(struct kube_client *c, struct lease_api *ret);

/** Callbacks (each may be NULL). They run on the elector's thread (or the thread that
 * calls lease_elector_tick/release/stop) and must return promptly: start long-running
 * work on another thread. */
struct lease_callbacks {
    void *ctx;
    void (*started_leading)(void *ctx);
    void (*stopped_leading)(void *ctx);
    /** The observed holder changed to identity (borrowed for the call; ours included). */
    void (*new_leader)(void *ctx, const char *identity);
};

/** Time sources, injectable for tests. NULL functions use clock_now / clock_wall_now.
 * now is monotonic usec (all expiry decisions); wall_now is usec since the epoch (only
 * for the timestamps written into the Lease). */
struct lease_clock {
    void *ctx;
    usec_t (*now)(void *ctx);
    usec_t (*wall_now)(void *ctx);
};

#define LEASE_DEFAULT_DURATION (15 * USEC_PER_SEC)
#define LEASE_DEFAULT_RENEW    (10 * USEC_PER_SEC)
#define LEASE_DEFAULT_RETRY    (2 * USEC_PER_SEC)
#define LEASE_MIN_REQUEST      (1 * USEC_PER_SEC) /* floor of the default request timeout */

struct lease_opts {
    const char *ns;         /* Lease namespace (copied) */
    const char *name;       /* Lease name (copied) */
    const char *identity;   /* this candidate, unique per process (copied) */
    usec_t lease_duration;  /* 0 = 15 s; whole seconds are written */
    usec_t renew_deadline;  /* 0 = 10 s; must be < lease_duration */
    usec_t retry_period;    /* 0 = 2 s; must be < renew_deadline */
    usec_t request_timeout; /* one API call; 0 = max(renew_deadline / 2, 1 s) */
    struct lease_api api;   /* required: get, create, update */
    struct lease_callbacks cb;
    const struct lease_clock *clock; /* copied; NULL = real clocks */
};

/** Checks timings as lease_elector_new does (0 = default each): lease_duration a whole
 * number of seconds >= 1 s (the Lease stores seconds), renew_deadline < lease_duration,
 * 0 < retry_period < renew_deadline. Returns 0 or -EINVAL with *ret_why (static text,
 * may be NULL) saying which rule failed. */
int lease_check_timings(usec_t lease_duration, usec_t renew_deadline, usec_t retry_period,
                        const char **ret_why);

/** Creates an elector (no API call yet). Returns 0 and *ret (new, free with
 * lease_elector_free), or -EINVAL for missing names/api or inconsistent timings. */
int lease_elector_new(const struct lease_opts *opts, struct lease_elector **ret);
/** Stops the elector (see lease_elector_stop) and frees it. NULL is fine. */
void lease_elector_free(struct lease_elector *le);

/** Starts the election thread: tick, wait retry_period (plus jitter while following;
 * while leading, counted from the start of the tick, so a tick that took longer than
 * a period is followed at once by the next), repeat. After losing leadership it goes back to
 * candidacy. Returns 0, -EALREADY, or a negative errno from pthread_create. */
int lease_elector_start(struct lease_elector *le);
/** Stops and joins the thread, then releases the lease if we hold it (calling
 * stopped_leading). Idempotent; fine when never started. */
void lease_elector_stop(struct lease_elector *le);

/** One election step (what the thread does each period): try to acquire or renew and
 * update the leadership state, calling the callbacks on transitions. Returns 1 when we
 * lead afterwards, 0 when not. Not reentrant: one thread at a time, and not while the
 * election thread runs. */
int lease_elector_tick(struct lease_elector *le);
/** Gives the lease up if we hold it: holderIdentity "", leaseDurationSeconds 1. Calls
 * stopped_leading if we were leading. Returns 0 or the API error (we stop leading
 * either way). Same threading rule as lease_elector_tick. */
int lease_elector_release(struct lease_elector *le);

/** Whether we currently lead: we won the Lease and the renew deadline has not passed
 * since the last successful renew (checked on the elector's clock at each call, so it
 * turns false on time even while the election thread is blocked). Any thread. */
bool lease_elector_is_leader(struct lease_elector *le);
/** Copies the last observed holder identity ("" if none) into out. Any thread. Returns
 * 0 or -E2BIG (truncated). */
int lease_elector_leader(struct lease_elector *le, char *out, size_t size);
