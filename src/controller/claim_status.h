/* SPDX-License-Identifier: Apache-2.0 */
/* Pure claim status: the Ready condition (first matching rule wins: a reconcile error,
 * expiry, the bound Sandbox's Ready when True, a timeout, no Sandbox, the Sandbox's own
 * expiry, the Sandbox's Ready copied, not ready), the mirrored Finished condition,
 * status.sandbox, and the lifecycle deadlines. No API access, no clock reads. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/clock.h"

/** What one claim pass saw. Every pointer is borrowed. */
struct claim_observed {
    const json_t *claim;
    const json_t *sb;        /* the bound Sandbox, or NULL */
    const char *err_reason;  /* a failure reason (TemplateNotFound, ...), or NULL */
    const char *err_message; /* its message */
    bool transient;          /* the failure may clear by itself */
    bool sb_keep;            /* no Sandbox, but the pass is not sure there is none (a binding
                                it cannot confirm yet): status.sandbox stays as it is;
                                otherwise, without sb, it goes */
    bool expired;            /* the claim's lifecycle expired */
    bool timed_out;          /* not Ready within the claim timeout */
};

/** Returns a new status from the claim's current one updated by o; conditions are
 * stamped with the claim's generation and, when their status flips, with now (RFC
 * 3339, borrowed), and sorted by type. */
json_t *claim_status_build(const struct claim_observed *o, const char *now);
/** True when new_status differs from old_status (either may be NULL) in anything but
 * the order of conditions. */
bool claim_status_changed(const json_t *old_status, const json_t *new_status);
/** True when the claim's status says Ready=True. */
bool claim_ready(const json_t *claim);
/** True when the claim's status says it was Ready before: its Ready condition is not True
 * and changed status more than slack after the claim's creation. A claim never Ready keeps
 * the transition time of its first status write (its first pass, moments after its
 * creation); a later one is the flip from True. A claim first written more than slack
 * after its creation (the controller was down) looks the same. */
bool claim_ready_before(const json_t *claim, usec_t slack);
/** When the claim expires (wall usec): the earlier of lifecycle.shutdownTime and the
 * Finished condition's lastTransitionTime + ttlSecondsAfterFinished. Returns 0 and
 * *ret, or -ENOENT when it never expires (as things stand). */
int claim_expire_at(const json_t *claim, usec_t *ret);
/** The claim's Ready deadline (wall usec): creationTimestamp + timeout, where timeout
 * is the claim-timeout-seconds annotation or dflt (0 = none). Returns 0 and *ret or
 * -ENOENT. */
int claim_deadline(const json_t *claim, usec_t dflt, usec_t *ret);
