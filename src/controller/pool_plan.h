/* SPDX-License-Identifier: Apache-2.0 */
/* Pure warm-pool decisions: from the classified members of a pool, how many Sandboxes
 * to create and which to delete (stale under Recreate, of another template than the
 * pool's under any strategy, stuck past the readiness grace,
 * excess), never counting on members that are going away; and the per-pool refill
 * token bucket. No API access, no clock reads (times are passed in). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/clock.h"

struct pool_member {
    const json_t *sb;    /* borrowed */
    bool ready;          /* Ready=True */
    bool terminating;    /* being deleted, or our delete of it is pending */
    bool stale;          /* built from another blueprint than the template's current one */
    bool other_template; /* built from another template than the pool's, which is gone
                            (replaced at once, whatever the strategy: not handed out) */
    bool unschedulable;  /* its Pod is PodScheduled=False/Unschedulable */
    usec_t created;      /* creationTimestamp (wall usec), 0 when unknown */
};

struct pool_plan_in {
    const struct pool_member *m; /* borrowed */
    size_t n;
    int desired;   /* spec.replicas, already bounded */
    int max_batch; /* creates per pass, and deletes per pass (stale, of a template gone,
                      stuck, excess: all counted), > 0 */
    bool recreate; /* updateStrategy Recreate: stale members are replaced at once */
    usec_t grace;  /* readiness grace period */
    usec_t now;    /* wall usec */
};

struct pool_plan {
    int active;      /* members counted as the pool (status.replicas) */
    int ready;       /* of which Ready (status.readyReplicas) */
    int terminating; /* going away (including the deletes planned here) */
    int held;        /* unschedulable past the grace, kept rather than churned */
    int create;      /* Sandboxes to create */
    size_t *del;     /* indexes into m to delete, in order (new array or NULL) */
    size_t ndel;
    usec_t requeue; /* earliest end of a readiness grace from now, 0 if none */
};

/** Computes the plan. *ret is overwritten; release it with pool_plan_done. */
void pool_plan_compute(const struct pool_plan_in *in, struct pool_plan *ret);
void pool_plan_done(struct pool_plan *p);

/* Refill deferral. While claims of the pool wait for adoption and Ready candidates are
 * there to serve them, a refill pass waits, so that the claims' adoption and status
 * writes do not queue behind the refill's creates at the API server. Bounded: a refill
 * pass waits at most POOL_REFILL_DEFER_MAX after the first pass that found claims
 * waiting; the pass after that creates and the next wait starts afresh. 0 disables. */
#ifndef POOL_REFILL_DEFER_MAX
#define POOL_REFILL_DEFER_MAX (1 * USEC_PER_SEC)
#endif
#define POOL_REFILL_DEFER_RECHECK (100 * USEC_PER_MSEC) /* re-check while deferring */

struct pool_defer {
    usec_t since; /* monotonic start of the current wait */
    bool active;  /* a wait is running */
};

/** Whether a refill pass waits now (monotonic now). waiting: claims of the pool wait
 * for adoption and candidates are queued for them. Returns 0 to create now, else the
 * delay after which to check again (at most recheck, never past since + max). */
usec_t pool_defer_check(struct pool_defer *d, bool waiting, usec_t now, usec_t max, usec_t recheck);

/* Pool status pacing. While a pool converges (members created, becoming Ready, adopted
 * by claims) its counts change with every member; each change was one status write. A
 * change is now written at most once per POOL_STATUS_INTERVAL; an urgent status (the
 * first, a new generation or selector, or the pool converged: replicas and readyReplicas
 * at the desired count) is written at once. */
#define POOL_STATUS_INTERVAL (1 * USEC_PER_SEC)

/** Whether a changed pool status is written now. last: monotonic time of this process's
 * last status write of the pool (0: none). Returns 0 to write now, else the delay after
 * which to write. */
usec_t pool_status_wait(usec_t last, usec_t now, usec_t interval, bool urgent);

/** A refill token bucket (one second's worth of capacity, at least one token), the
 * pool's refill deferral and the time of its last status write (the per-pool state). */
struct pool_bucket {
    double tokens;
    usec_t last;
    bool init;
    struct pool_defer defer;
    usec_t status_at; /* monotonic time of the last status write, 0: none */
};

/** Takes up to want tokens at rate per second (rate <= 0: unlimited, grants want).
 * Returns the number granted; when it is 0, *ret_wait (may be NULL) gets the time
 * until the next token. */
int pool_bucket_take(struct pool_bucket *b, double rate, int want, usec_t now, usec_t *ret_wait);
/** Gives back n tokens (no POST was made). */
void pool_bucket_refund(struct pool_bucket *b, double rate, int n);
