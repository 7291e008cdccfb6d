/* SPDX-License-Identifier: Apache-2.0 */
/* The extensions controllers (SandboxTemplate, SandboxWarmPool, SandboxClaim) inside
 * the controller manager: their informers, indexes and event handlers, one work loop
 * (controller/workloop.h) per kind, the warm candidate queue, pool expectations and metrics.
 * The manager owns the Sandbox and Pod informers; ext_ctrl_attach hooks into them
 * before they start. Workers wait for every cache to sync before the first reconcile,
 * so a pool never counts its members on an empty cache. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/clock.h"

struct kube_client;
struct kube_informer;
struct events_recorder;
struct ctrl_metrics;
struct sb_memo;
struct cascade;
struct ext_ctrl;

/** The controller's default of ext_opts.adopt_inflight (docs/tuning.md). */
#define EXT_ADOPT_INFLIGHT 16

/** Default of ext_opts.side_hold: longer than a 300-claim burst takes here. */
#define EXT_SIDE_HOLD (5 * USEC_PER_SEC)

/** Default of ext_opts.pool_coalesce: a pool pass reads every member, so the changes of
 * its members that arrive within this much make one pass (docs/tuning.md). */
#define EXT_POOL_COALESCE (100 * USEC_PER_MSEC)
/** Upper bound of --sandbox-warm-pool-coalesce-window. */
#define EXT_MAX_POOL_COALESCE (10 * USEC_PER_SEC)

struct ext_opts {
    int claim_workers;         /* 0 = 300 */
    usec_t worker_idle;        /* as ctrl_opts.worker_idle, for every extension loop */
    int create_parallel;       /* pool member creates in flight per pass; 0 = 1 */
    int pool_workers;          /* 0 = 1 */
    int template_workers;      /* 0 = 1 */
    int max_pool_replicas;     /* bound on spec.replicas; 0 = LIMIT_EXT_MAX_POOL_REPLICAS */
    int max_batch;             /* creates/deletes per pool pass; 0 = LIMIT_EXT_MAX_BATCH */
    double refill_rate;        /* per-pool creates per second; 0 = unpaced */
    usec_t ready_grace;        /* 0 = LIMIT_EXT_READY_GRACE */
    usec_t pool_coalesce;      /* a member's change queues its pool's pass this much later
                                  (later changes join it); 0 = EXT_POOL_COALESCE,
                                  USEC_INFINITY = none: a pass per change, at once */
    usec_t claim_timeout;      /* 0 = LIMIT_EXT_CLAIM_TIMEOUT; USEC_INFINITY = none */
    bool no_eviction;          /* do not stamp safe-to-evict on warm pods */
    bool no_claim_events;      /* no Events from the claim controller */
    bool no_claim_annotations; /* do not persist the first-observed/first-ready annotations */
    usec_t side_hold;          /* the most Events and a claim's annotations wait while claims
                                  are served; 0 = EXT_SIDE_HOLD, USEC_INFINITY = none */
    int adopt_inflight;        /* warm adoption PATCHes in flight at once, admitted in the
                                  order the claims reached them; 0 = no limit */
    bool adopt_edit_template;  /* adoption removes the pool's safe-to-evict from the pod
                                  template (upstream; one more generation and status write) */
    bool keep_managed_fields;  /* the adoption PATCH and the Pod metadata PATCH leave
                                  managedFields (upstream); default: they clear them
                                  (kube_obj.h). The Sandbox reconciler reads it too. */
    const struct yield_gate *side_gate; /* tests only: the side writes' gate (copied at
                                           start) instead of the claim loop's */
    bool latebind_loopback;             /* tests only: deliver late-bound env to loopback pod IPs */
    usec_t latebind_timeout;   /* one delivery to sandboxd; 0 = LIMIT_LB_DELIVERY_TIMEOUT */
    const char *label_domains; /* allowed label domains, comma-separated (copied); NULL = file
                                  /etc/sandbox-config/allowed-label-domains, else
                                  sandbox.users.io */
};

/** What the manager lends the extensions. Everything is borrowed and must outlive the
 * controller. */
struct ext_deps {
    struct kube_client *client;
    const char *ns;                 /* watched namespaces ("a" or "a,b"), NULL = all */
    struct events_recorder *events; /* NULL: no Events */
    struct ctrl_metrics *metrics;   /* the manager's reconcile/workqueue families */
    struct sb_memo *memo;           /* the manager's read-your-writes memo; NULL: none */
    struct cascade *cascade;        /* a deleted claim's or pool's Sandboxes; NULL: none */
};

/** Creates the controller (copies o). Returns 0 and *ret or a negative errno. */
int ext_ctrl_new(const struct ext_opts *o, const struct ext_deps *d, struct ext_ctrl **ret);
/** Adds indexes and handlers to the manager's Sandbox and Pod informers (before they
 * start). Returns 0 or a negative errno. */
int ext_ctrl_attach(struct ext_ctrl *x, struct kube_informer *sandboxes,
                    struct kube_informer *pods);
/** Starts the extension informers. Returns 0 or a negative errno. */
int ext_ctrl_start(struct ext_ctrl *x);
/** Starts the workers (idempotent). */
void ext_ctrl_start_workers(struct ext_ctrl *x);
/** Drops the side writes (annotations, metadata patches) waiting to be written, and
 * those the running reconciles still queue: for a stop after leadership ended. NULL is
 * fine. */
void ext_ctrl_drop_side_writes(struct ext_ctrl *x);
/** Stops the workers, letting running reconciles finish (idempotent). */
void ext_ctrl_stop_workers(struct ext_ctrl *x);
/** Stops the informers (after the workers). Idempotent. */
void ext_ctrl_stop(struct ext_ctrl *x);
/** Asks the informers to stop without waiting (ext_ctrl_stop then joins them), so that
 * the manager's and these end their watches together. NULL is fine. */
void ext_ctrl_request_stop(struct ext_ctrl *x);
/** Stops and frees; NULL is fine. */
void ext_ctrl_free(struct ext_ctrl *x);
/** True when every extension informer has synced. */
bool ext_ctrl_synced(struct ext_ctrl *x);
/** Waits for the extension informers. Returns 0, -ETIMEDOUT or -ECANCELED. */
int ext_ctrl_wait_synced(struct ext_ctrl *x, usec_t timeout);
/** True while claims are queued or being reconciled (x: a struct ext_ctrl, as a gate's
 * context; yield_gate.h): the gate of the side writes and of the Sandbox reconciler's
 * Pod metadata patches. */
bool ext_ctrl_claims_busy(void *x);
/** True when sb's (borrowed) controller is a SandboxClaim that the claim cache of x (a
 * struct ext_ctrl) shows deleted, being deleted, or made again with another UID: its
 * Sandbox is on its way out (garbage collector, dependent deletion), unless the claim was
 * deleted with propagationPolicy=Orphan, whose rewrite of the Sandbox's owner references
 * makes this false again. False for any other owner and before the claim cache exists. */
bool ext_ctrl_owner_claim_gone(void *x, const json_t *sb);
