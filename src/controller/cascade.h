/* SPDX-License-Identifier: Apache-2.0 */
/* Dependents of a deleted owner, deleted by the controller when the garbage collector
 * has not: a deleted SandboxClaim's (or SandboxWarmPool's) Sandboxes, a deleted Sandbox's
 * Pod and Service (the manager registers which; PVCs stay the garbage collector's).
 * kube-controller-manager's garbage collector deletes them through their owner references, at its
 * client rate (20 a second by default, a read and a delete each); claims deleted faster than that
 * leave Sandboxes and Pods running behind a backlog.
 *
 * An owner's deletion, seen by an informer, queues its UID; a delay later (the garbage
 * collector's turn) a worker looks up the dependents in the caches through an index of
 * controller UIDs and deletes each one that is still there, not being deleted, in the
 * owner's namespace and owned by that owner alone (one owner reference: the garbage
 * collector keeps an object another owner still holds). Each DELETE carries the cached
 * UID and resourceVersion as preconditions, so an object changed since the cache saw it
 * (in particular one the garbage collector orphaned, propagationPolicy=Orphan, by
 * rewriting its owner references) is refused (409) and left as it is; such an owner is
 * looked at again a second later (retry), at most CASCADE_ATTEMPTS times in all. Nothing is
 * deleted that the garbage collector would keep, and an object of the same name made
 * again has another UID.
 *
 * Chained: a Sandbox the controller deletes this way (without finalizers, so the DELETE
 * removes it) owns a Pod and a Service the garbage collector, behind already, would come
 * to only after it. Its dependents are looked at CASCADE_CHAIN_DELAY later, once the
 * Sandbox cache no longer holds it (so that the Sandbox controller does not put its Pod
 * back), not the delay after the informer sees it go: a released claim's Pod goes with its
 * Sandbox. While the cache still holds it, it is looked at again (CASCADE_ATTEMPTS looks in
 * all); then the informer's look covers it.
 *
 * Swept: an owner deleted while no controller watched (the controller was down or
 * restarting) is seen by no informer, and the queue of the process before was lost with
 * it. Once after the start, when leading and synced (cascade_request_sweep), every
 * cached dependent whose controller reference names an owner of a registered kind (by
 * group and kind, any version) whose cache holds nothing under its name queues that owner
 * as if its deletion had just been seen (a name held with another UID is left to the
 * garbage collector). A delay later, it is dropped if its cache holds it by then
 * (an owner created just after its kind was listed) or if a read of it does not answer
 * 404 (or another UID under its name); else its dependents go by the rules above.
 *
 * Not while the namespace is being deleted (the namespace controller deletes everything
 * there), nor while the controller does not lead (active). The queue is bounded: an owner
 * that does not fit is left to the garbage collector. Thread-safe. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/clock.h"

struct kube_client;
struct kube_err;
struct kube_res;
struct kube_store;
struct metric;

/** Owner classes: what a queued owner UID is looked up as the controller of. */
enum cascade_class {
    CASCADE_OF_SANDBOX, /* a Sandbox: its Pods and Services */
    CASCADE_OF_EXT,     /* a SandboxClaim or SandboxWarmPool: its Sandboxes */
    CASCADE_CLASSES,
};

/** cascade_opts.delay: never (every dependent is left to the garbage collector). */
#define CASCADE_OFF USEC_INFINITY
/** cascade_opts.delay: at once (0 means the default). */
#define CASCADE_NOW           ((usec_t)1)
#define CASCADE_DEFAULT_DELAY (5 * USEC_PER_SEC)
#define CASCADE_MAX_DELAY     (3600 * USEC_PER_SEC)
#define CASCADE_DEFAULT_QUEUE 65536
#define CASCADE_ATTEMPTS      3
#define CASCADE_RETRY         (1 * USEC_PER_SEC)
#define CASCADE_CHAIN_DELAY   (100 * USEC_PER_MSEC)
#define CASCADE_WORKERS       2
#define CASCADE_MAX_TARGETS   4 /* dependent kinds per class */

/** Deletes obj (borrowed) of res guarded by its UID and resourceVersion, as
 * kube_delete_obj with same_version. Returns 0 or a negative errno with reterr filled
 * (404: gone; 409: a precondition failed). */
typedef int cascade_delete_fn(void *ctx, const struct kube_res *res, const json_t *obj,
                              struct kube_err *reterr);
/** Reads name of res in ns, as kube_get: 0 and *ret_obj (new reference), or a negative
 * errno with reterr filled (404: gone). */
typedef int cascade_get_fn(void *ctx, const struct kube_res *res, const char *ns, const char *name,
                           json_t **ret_obj, struct kube_err *reterr);

struct cascade_opts {
    struct kube_client *client; /* the DELETEs (unless delete is set) and the namespace
                                   check; borrowed */
    usec_t delay;               /* 0 = CASCADE_DEFAULT_DELAY; CASCADE_NOW; CASCADE_OFF */
    size_t max_queue;           /* new owners queued while fewer wait; 0 =
                                   CASCADE_DEFAULT_QUEUE. An owner a worker looked at goes
                                   back when it must be looked at again (a conflict, its
                                   cache behind), so at most max_queue + workers wait. */
    int workers;                /* 0 = CASCADE_WORKERS */
    usec_t retry;               /* after a conflict; 0 = CASCADE_RETRY */
    usec_t chain_delay;         /* a chained owner's first look, and between looks while the
                                   cache still shows it; 0 = CASCADE_CHAIN_DELAY */
    bool (*active)(void *ctx);  /* NULL: always; false: queued owners are dropped */
    bool (*synced)(void *ctx);  /* every cache synced (a sweep waits); NULL: always */
    void *active_ctx;           /* for active and synced */
    struct metric *deletions;   /* counter labelled kind, result; NULL: none */
    cascade_delete_fn *delete;  /* tests; NULL: kube_delete_obj on client */
    void *delete_ctx;
    cascade_get_fn *get; /* a swept owner's read (tests); NULL: kube_get on client, or
                            none (every swept owner counts as present) */
    void *get_ctx;
};

struct cascade_stats {
    unsigned long queued;        /* owners queued */
    unsigned long dropped;       /* owners refused (queue full) or skipped when due (not active,
                                    their namespace being deleted) */
    unsigned long deleted;       /* dependents deleted */
    unsigned long gone;          /* a DELETE found nothing (404) */
    unsigned long conflict;      /* a DELETE refused by its preconditions (409) */
    unsigned long failed;        /* any other error */
    unsigned long retries;       /* owners looked at again after a conflict */
    unsigned long chained;       /* owners the controller deleted itself, queued for their own
                                    dependents at once (see the header's comment) */
    unsigned long sweeps;        /* sweeps done */
    unsigned long swept;         /* owners the sweep found missing from their caches, queued */
    unsigned long swept_present; /* of those, found to exist when due: nothing deleted */
    unsigned long given_up;      /* owners whose looks ran out: refused DELETEs (left to the
                                    garbage collector), or a chained owner its cache kept
                                    holding (left to the look a delay after its deletion) */
};

struct cascade;

/** Starts the workers (opts copied; delay CASCADE_OFF starts none). Returns 0 and *ret,
 * -EINVAL without a client or a delete function, or a pthread error. */
int cascade_new(const struct cascade_opts *opts, struct cascade **ret);
/** Registers a dependent kind of class cls: objects of res in store (borrowed, must
 * outlive c), found through its index (copied name) of controller UIDs
 * (kube_index_controller_uid). Before the first cascade_owner_deleted. Returns 0,
 * -EINVAL or -ENOSPC (CASCADE_MAX_TARGETS). */
int cascade_add_dependent(struct cascade *c, enum cascade_class cls, const struct kube_res *res,
                          struct kube_store *store, const char *index);
/** Registers an owner kind of class cls for the sweep: res (borrowed, static) names it
 * (its group and kind; a reference of any version matches), store (borrowed, must
 * outlive c) caches it by namespace and name. Before cascade_request_sweep. Returns 0,
 * -EINVAL or -ENOSPC (two kinds per class). */
int cascade_add_owner(struct cascade *c, enum cascade_class cls, const struct kube_res *res,
                      struct kube_store *store);
/** Asks for one sweep (see the header's comment), run by a worker once active and synced
 * (tried every 200 ms until then). Nothing with the delay off or once stopped. Any
 * thread. */
void cascade_request_sweep(struct cascade *c);
/** sb (borrowed), a Sandbox the controller has just deleted elsewhere (a pool's surplus
 * member, a claim's unusable Sandbox), is chained: its Pod and Service are looked at once
 * the Sandbox cache (the one registered for CASCADE_OF_EXT) no longer holds it. Nothing
 * without that registration, with the delay off, or for a Sandbox with finalizers. Any
 * thread. */
void cascade_sandbox_deleted(struct cascade *c, const json_t *sb);
/** Queues the deleted owner uid in ns (copied) of class cls. Returns false when nothing
 * was queued: off, stopped, queue full, or a name too long for an object. Any thread. */
bool cascade_owner_deleted(struct cascade *c, enum cascade_class cls, const char *ns,
                           const char *uid);
/** Stops the workers (a DELETE in flight ends first); queued owners are dropped: the
 * garbage collector has them. NULL is fine; idempotent. */
void cascade_stop(struct cascade *c);
/** Stops and frees. NULL is fine. */
void cascade_free(struct cascade *c);
void cascade_stats(struct cascade *c, struct cascade_stats *ret);
/** Waits until nothing is queued or running and no requested sweep is due (tests), at
 * most timeout. A sweep waiting for leadership or synced caches is not waited for.
 * Returns 0 or -ETIMEDOUT. */
int cascade_idle_wait(struct cascade *c, usec_t timeout);
