/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the extensions controllers (ext_ctrl.c, template_reconcile.c,
 * pool_reconcile.c, claim_reconcile.c, claim_adopt.c). */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/fifo_sem.h"
#include "controller/ext_ctrl.h"
#include "kube/err.h"

struct ctrl_ns_source;
struct workloop;

struct map;
struct metric;
struct kube_store;
struct kube_res;
struct pool_expect;
struct claim_queue;
struct lb_state;

enum { EXT_INF_TEMPLATE, EXT_INF_POOL, EXT_INF_CLAIM, EXT_INF_NETPOL, EXT_INF_COUNT };
enum { EXT_LOOP_TEMPLATE, EXT_LOOP_POOL, EXT_LOOP_CLAIM, EXT_LOOP_COUNT };

/* Store indexes. Values are "namespace/name" or "namespace/hash". */
#define EXT_IDX_SB_POOL    "ext-pool-member" /* Sandboxes by namespace/warm-pool hash */
#define EXT_IDX_SB_OWNER   "ext-owner"       /* Sandboxes by controller UID */
#define EXT_IDX_POOL_TPL   "ext-template"    /* pools by namespace/template name */
#define EXT_IDX_CLAIM_POOL "ext-pool"        /* claims by namespace/pool name */
#define EXT_IDX_TPL_HASH   "ext-tpl-hash"    /* templates by namespace/hash of the name */

struct ext_ctrl;
struct side_writer;

struct ext_metrics {
    struct metric *ctrl_latency, *client_latency, *creation_total;
    struct metric *webhook_latency, *creation_latency, *ctrl_latency_fine; /* ext_metrics.h */
    struct metric *pool_replicas, *pool_ready, *pool_creates;
    struct metric *adopt_waits; /* adoptions that queued for a place (adopt_sem) */
};

struct ext_ctrl {
    struct ext_opts o;
    struct ext_deps d;
    char *ns, **domains;
    size_t ndomains;
    struct kube_informer *sandboxes, *pods; /* the manager's */
    struct kube_informer *inf[EXT_INF_COUNT];
    struct ctrl_ns_source *nss[EXT_INF_COUNT]; /* per informer, with several namespaces */
    struct workloop *loops[EXT_LOOP_COUNT];    /* queue and workers per kind */
    struct ext_metrics met;
    struct pool_expect *expect;
    struct claim_queue *cq;
    struct lb_state *lb;       /* late-bound claim configuration (latebind_deliver.c) */
    struct side_writer *side;  /* first-ready annotations; NULL: written in the reconcile */
    struct fifo_sem adopt_sem; /* adoption PATCHes in flight, in claim order */
    pthread_mutex_t lock;      /* guards the maps below */
    struct map *buckets;       /* pool key -> struct pool_bucket */
    struct map *observed;      /* claim key -> usec_t * (wall time first seen) */
    struct map *bindings;      /* claim uid -> char * (Sandbox JSON, until the cache shows it) */
    struct map *ready_once;    /* claim uid -> "" (claims this process saw Ready, until the
                                  cache shows the first-ready annotation), "failed" once
                                  the annotation's write failed */
    struct map *cold_only;     /* claim uid -> "": claims that fell back to a cold start (a
                                  failed late delivery) or whose cold create's outcome is
                                  unknown: never offered a member again */
    struct map *sb_deleted;    /* Sandbox uid -> usec_t * (monotonic expiry): Sandboxes a
                                  claim pass deleted, until their DELETED event */
    usec_t sb_deleted_pruned;  /* when sb_deleted's expired entries last went (under lock) */
    atomic_bool stopped;
};

/** Stores. */
struct kube_store *ext__store(struct ext_ctrl *x, int which);
struct kube_store *ext__sandboxes(struct ext_ctrl *x);
/** True when the cache holds a template in ns whose name hashes to hash (a member's
 *  template-ref label): the template a member was built from still exists. */
bool ext__template_of_hash(struct ext_ctrl *x, const char *ns, const char *hash);
/** True when member sb was built from another template than the one whose name hashes to
 *  pool_th (the pool's now) and that template is gone (with its NetworkPolicy). A member
 *  without the template-ref label is not (it is only stale). */
bool ext__former_template_gone(struct ext_ctrl *x, const char *pool_th, const json_t *sb);
struct kube_store *ext__pods(struct ext_ctrl *x);
/** The template Sandbox sb was built from (new reference), or NULL when it is unknown or
 * gone: tpl (borrowed, may be NULL; the pool's) when sb's template-ref label is its name's
 * hash, else the one its sandbox-template-ref annotation names, if that name hashes to the
 * label. */
json_t *ext__template_of(struct ext_ctrl *x, const json_t *sb, const json_t *tpl);
/** Queues key on a loop (now or after delay). */
void ext__enqueue(struct ext_ctrl *x, int loop, const char *key, usec_t delay);
/** Writes a merge patch no client waits for (the claim's first-ready annotations): queued
 * behind the claims being served (side_writer.h), or at once when the queue is full, the
 * hold is off or the workers stop. patch borrowed. */
void ext__side_patch(struct ext_ctrl *x, const struct kube_res *res, const char *ns,
                     const char *name, const json_t *patch);
/** Records an Event (no-op without a recorder). */
void ext__event(struct ext_ctrl *x, const json_t *obj, bool warning, const char *reason,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/** Merge patch of res ns/name (status subresource when sub != NULL). */
int ext__patch(struct ext_ctrl *x, const struct kube_res *res, const char *ns, const char *name,
               const char *sub, const json_t *patch, json_t **ret_obj, struct kube_err *reterr);
/** What a read of a Sandbox from the API server (not the cache) says of it. */
enum ext_sb_read {
    EXT_SB_OURS,    /* it exists and uid is its controller */
    EXT_SB_OTHER,   /* it exists with another controller, or none */
    EXT_SB_GONE,    /* 404 */
    EXT_SB_UNKNOWN, /* the read failed: e holds why */
};
/** GETs Sandbox ns/name and tells whether uid controls it; for writes whose outcome is
 * unknown (kube_err_outcome_unknown). *ret_sb (may be NULL): the read (new reference) for
 * OURS and OTHER, else NULL. e: filled for UNKNOWN (may be NULL). */
enum ext_sb_read ext__sb_read(struct ext_ctrl *x, const char *ns, const char *name, const char *uid,
                              json_t **ret_sb, struct kube_err *e);
/** A pool member's create (member name of ns, pool: the pool's UID) failed with r and an
 * unknown outcome (kube_err_outcome_unknown; ce: its error): the member is read. Returns
 * 0 when it exists and is the pool's (*ret_sb, when not NULL: the read, a new reference;
 * its ADDED meets the create's expectation), r when it is not there or another's, or
 * -EINPROGRESS when the read fails too: the expectation then stays until the member's
 * ADDED or its timeout (lowering it could let a pass that misses the member in the cache
 * create another). A create the server still commits after this read finds it gone (a
 * client timeout while etcd is slow) is the one window left: the pool may then make one
 * member too many, which its next pass deletes as surplus. */
int ext__member_settle(struct ext_ctrl *x, const char *ns, const char *name, const char *pool,
                       int r, const struct kube_err *ce, json_t **ret_sb);
/** "namespace/name" into out; returns 0 or -E2BIG. */
int ext__key(const char *ns, const char *name, char *out, size_t size);

/** The reconcilers, one per work loop: 0 (with *ret_requeue > 0 to run again later) or
 * a negative errno for a rate-limited retry. */
int tpl_reconcile(struct ext_ctrl *x, const char *key, usec_t *ret_requeue);
int pool_reconcile(struct ext_ctrl *x, const char *key, usec_t *ret_requeue);
int claim_reconcile(struct ext_ctrl *x, const char *key, usec_t *ret_requeue);

/** Creates the extension informers with their indexes and handlers, not started
 * (ext_ctrl_start; tests fill their stores). Returns 0 or a negative errno. */
int ext__informers_new(struct ext_ctrl *x);
struct kube_informer_handlers;
/** Tests: the event handlers of informer which (EXT_INF_*), or, for EXT_INF_COUNT, of the
 * manager's Sandbox informer; ctx is the struct ext_ctrl. */
void ext__handlers(int which, struct kube_informer_handlers *ret);

/** Pool membership of a Sandbox: writes "namespace/pool" of its controlling warm pool
 * into out and returns true when sb is pool-controlled. */
bool ext__pool_of(const json_t *sb, char *out, size_t size);
/** True when sb may be handed to a claim: pool-controlled, labelled, not deleting,
 * Ready with pod IPs. */
bool ext__warm_candidate(const json_t *sb);

/** Claim bindings made by this process that the cache may not show yet: the Sandbox as
 * the API server returned it from the adoption or create (claim and sb borrowed; kept as
 * text). Not kept for a claim the cache no longer holds (deleted during its own pass:
 * its deletion's handler, which drops bindings, has run already). */
void ext__binding_put(struct ext_ctrl *x, const json_t *claim, const json_t *sb);
/** Returns that Sandbox (new reference, the caller's to change), or NULL. */
json_t *ext__binding_get(struct ext_ctrl *x, const char *claim_uid);
/** True when this process bound the claim and the cache may not show it yet. */
bool ext__binding_has(struct ext_ctrl *x, const char *claim_uid);
void ext__binding_drop(struct ext_ctrl *x, const char *claim_uid);
/** Claims this process saw Ready and wrote (or holds) the first-ready annotation for, or
 * any it saw Ready with the annotations disabled, for as long as the cache does not show
 * the annotation (with them disabled, for the claim's life): mark, ask, forget. */
void ext__ready_once_mark(struct ext_ctrl *x, const char *claim_uid);
bool ext__ready_once(struct ext_ctrl *x, const char *claim_uid);
/** Marked, and the annotation's write is pending (not failed since). */
bool ext__ready_once_writing(struct ext_ctrl *x, const char *claim_uid);
void ext__ready_once_drop(struct ext_ctrl *x, const char *claim_uid);
/** The claim is served cold from now on: later passes retry only the cold create. Marked
 * when a late-bound claim fell back to a cold start (a delivery that failed for the
 * claim's own reason, a missing Secret say, failed again in every member: each pass burnt
 * one; a restart may cost one more member) and when a cold create's outcome is unknown
 * (that create may still land: a member taken meanwhile would be the claim's second
 * Sandbox). In memory; dropped with the claim. */
void ext__cold_only_mark(struct ext_ctrl *x, const char *claim_uid);
bool ext__cold_only(struct ext_ctrl *x, const char *claim_uid);
/** Sandboxes a claim pass deleted (a late-bound fallback's warm Sandbox, an expired
 * claim's): remembered until the cache shows them gone (their DELETED event), at most
 * EXT_SB_DELETED_TTL, so that a pass on a cache that still shows one does not bind the
 * claim to it again. put: uid borrowed; NULL is ignored. */
#define EXT_SB_DELETED_TTL (5 * 60 * USEC_PER_SEC)
void ext__sb_deleted_put(struct ext_ctrl *x, const char *uid);
bool ext__sb_deleted(struct ext_ctrl *x, const char *uid);
void ext__sb_deleted_drop(struct ext_ctrl *x, const char *uid);
/** Wall time the claim key was first seen (0 when unknown); drop removes it. */
usec_t ext__observed(struct ext_ctrl *x, const char *key, bool drop);

struct claim_err;
/** Keeps the pod template metadata of the claim's bound Sandbox sb (borrowed) as the claim
 * wants it (claim_adopt.c; upstream's "update after claimed", KEP-174): rebuilt from the
 * template sb was built from as it is now (ext__template_of, through the claim's pool) with
 * the claim's additionalPodMetadata and, where sb's pod template has them (a cold
 * Sandbox's), its identity labels (claim_sandbox_pod_meta; keys no longer wanted are
 * removed), an adoption's safe-to-evict left as it was; and sb's own
 * created-by label as the claim's. One merge patch guarded by sb's resourceVersion when
 * anything differs. Returns 1 patched (*ret_sb: the Sandbox returned, new reference), 0
 * nothing to do (or the template is gone), -EEXIST on a conflict with the template's
 * metadata (ce filled), or the PATCH's error (e filled). */
int claim__meta_sync(struct ext_ctrl *x, const json_t *claim, const json_t *sb, json_t **ret_sb,
                     struct claim_err *ce, struct kube_err *e);

/** Warm adoption (claim_adopt.c): pops candidates of pool for claim and adopts the first
 * that passes; tpl (borrowed; may be NULL) is the pool's template: under the Recreate
 * update strategy a member stale against it is dropped, not adopted. prefer (borrowed; NULL: none)
 * comes first: a member an earlier adoption PATCH of the claim may still land on, as read in the
 * version that PATCH was guarded by. It is patched by that same guard (so at most one of the two
 * lands, both for the claim) whether or not it is still a warm candidate, and settled: adopted, or
 * known not to be the claim's (the claim's binding is then dropped), or still unknown (an error;
 * the binding stays). prefer_only: no other candidate is taken. *ret_sb gets the adopted Sandbox
 * (new reference). Returns 1 adopted, 0 none available, or a negative errno (reterr text in msg).
 */
int claim__adopt(struct ext_ctrl *x, const json_t *claim, const json_t *pool, const json_t *tpl,
                 const json_t *prefer, bool prefer_only, json_t **ret_sb, char *msg, size_t size);
