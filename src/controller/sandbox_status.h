/* SPDX-License-Identifier: Apache-2.0 */
/* Pure computation of a Sandbox's status from what the reconciler observed: the
 * Suspended, Finished, PodScheduled and Ready conditions (types and reasons as the
 * v1beta1 API defines them), podIPs, nodeName, selector and Service fields, plus the
 * expiry variants and the "does this need a write" comparison. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"

/** What one reconcile pass observed. Every pointer is borrowed. */
struct sb_observed {
    const json_t *sb;           /* the Sandbox (its current status is the base) */
    const json_t *pod;          /* the Pod owned by the Sandbox, or NULL */
    bool pod_unowned;           /* a Pod with the Sandbox's name exists that we may not touch */
    bool pod_error;             /* the Pod step failed: the Pod's state is unknown */
    bool pod_recreated;         /* the Pod had been lost and a new one was just created */
    bool pod_going;             /* pod is being deleted, or the cache's copy of it is older
                                   than a write of ours (our DELETE, a metadata patch) */
    bool pod_delete_failed;     /* this pass's DELETE of pod (a suspend's) was refused */
    const char *multiple_pods;  /* error text when several Pods are owned, else NULL */
    const char *errors;         /* joined PVC/Pod/Service errors, else NULL */
    bool svc_exists;            /* an owned Service exists after this pass */
    const char *svc_name;       /* Service name for status.service, or NULL */
    const char *cluster_domain; /* for serviceFQDN; NULL = "cluster.local" */
};

/** Returns a new status object: the Sandbox's current status updated from o, with
 * conditions stamped with generation and, when their status flips, with now (an
 * RFC 3339 timestamp, borrowed). Once a suspend is confirmed (Suspended=True), an owned
 * Pod still observed is taken for the deleted one seen late and ignored. */
json_t *sb_status_build(const struct sb_observed *o, const char *now);

/** Sets condition type in the conditions array conds (created in status when absent):
 * lastTransitionTime becomes now only when the status changes or the condition is new;
 * reason, message and observedGeneration are updated in place. */
void sb_cond_set(json_t *status, const char *type, const char *cstatus, const char *reason,
                 const char *message, int64_t generation, const char *now);
/** Removes condition type from status (if present). */
void sb_cond_remove(json_t *status, const char *type);
/** Returns condition type of status (borrowed), or NULL. */
const json_t *sb_cond_get(const json_t *status, const char *type);
/** Reason of condition type, or NULL. */
const char *sb_cond_reason(const json_t *status, const char *type);

/** Marks status expired: Ready=False SandboxExpired, PodScheduled removed. With reset,
 * every field but the conditions is dropped too (Retain after teardown). */
void sb_status_expire(json_t *status, bool reset, int64_t generation, const char *now);
/** True when Sandbox sb is expired at wall time now: its spec.shutdownTime (deadline; 0:
 * none) has passed, or its status says it expired (Ready=False SandboxExpired) for its
 * spec as it is (that condition's observedGeneration is the Sandbox's generation). The
 * status decides over the clock: a pass of a leader whose clock is behind (or after a
 * clock step back) does not bring an expired Sandbox back, which a changed spec does (a
 * later shutdownTime: a new generation). */
bool sb_expired(const json_t *sb, usec_t deadline, usec_t now);

/** True when new_status must be written over old_status (either may be NULL = {}). A
 * difference in nodeName alone is not written while Ready is not True: it rides along
 * with the next write. */
bool sb_status_changed(const json_t *old_status, const json_t *new_status);

/** How a new status differs from the written one, for write coalescing. */
enum sb_status_change {
    SB_STATUS_SAME,     /* nothing to write (sb_status_changed is false) */
    SB_STATUS_DETAIL,   /* only details of a Sandbox that is not Ready: messages, podIPs,
                           selector, Service fields, PodScheduled. The first status of a
                           new Sandbox (not Ready, dependencies not ready) is one too. */
    SB_STATUS_HEADLINE, /* what a user sees changed: the status and reason of Ready,
                           Suspended or Finished; or the new status is Ready=True */
};

/** Classifies new_status against old_status (either may be NULL = {}). */
enum sb_status_change sb_status_diff(const json_t *old_status, const json_t *new_status);

/** The body of a status write of Sandbox sb: a new object with sb's top-level fields but
 * "spec", and status st (borrowed; referenced, as are sb's fields: the body must not be
 * modified). The API server keeps the stored spec on a status write and leaves it out of
 * the field ownership it records, so sending it only costs decoding and schema work;
 * metadata goes as given, so the ownership of labels and annotations is unchanged. */
json_t *sb_status_body(const json_t *sb, json_t *st);

/** Pod IPs of pod (status.podIPs[].ip, else status.podIP) as a new array. */
json_t *sb_pod_ips(const json_t *pod);
