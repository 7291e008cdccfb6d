/* SPDX-License-Identifier: Apache-2.0 */
/* State of one Sandbox reconcile pass, shared by the sandbox_*.c steps. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/buf.h"
#include "common/limits.h"
#include "controller/sandbox_reconcile.h"
#include "controller/sandbox_status.h"
#include "kube/err.h"
#include "kube/res.h"

struct sb_pass {
    const struct sb_reconciler *r;
    json_t *sb; /* the Sandbox (own reference; replaced by newer copies we write) */
    const char *ns, *name, *uid;
    char hash[16];
    json_t *pod;       /* the owned Pod in use (own reference), or NULL */
    bool pod_recorded; /* pod is our record of it (sb__created_child): not in the cache yet */
    struct sb_observed obs;
    struct buf errors; /* condition errors, "; "-joined */
    char *multiple;    /* multiple-Pods error text, or NULL */
    int ret;           /* first error worth a retry */
    bool refused;      /* a child was refused (owned by another, unlabelled): retried with
                          back-off, as upstream's returned error is, since nothing else
                          brings the Sandbox back when that child changes */
    usec_t backstop;   /* requeue delay after a skipped, deferred or conflicting status
                          write or a held Pod metadata patch, or 0 (sb__backstop) */
};

/** sb__error's retry for an error of the Sandbox's own spec: shown, never retried (its
 *  next change brings it back). */
#define SB_ERR_SPEC 1

/** Adds a condition error (formatted) to the pass; retry (negative errno), 0 (a
 * refusal: the pass ends with -EPERM after its status write, so the back-off brings it
 * back to look again) or SB_ERR_SPEC. A
 * -ESHUTDOWN (a create refused because the namespace is being deleted) is retried but
 * not shown: it is no fault of the Sandbox, which goes with its namespace, and a status
 * naming it would be one more write per Sandbox while the namespace empties. */
void sb__error(struct sb_pass *p, int retry, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** The pass is to run again within delay (the shortest of those asked for wins). */
void sb__backstop(struct sb_pass *p, usec_t delay);
/** New reference to the child of kind res named name that an earlier pass created and
 * the cache has yet to show (sandbox_memo.h), or NULL; the pass then comes back when the
 * record expires, in case the informer never shows the child. */
json_t *sb__created_child(struct sb_pass *p, const struct kube_res *res, const char *name);
/** After our create of the child res/name was refused with AlreadyExists: reads it.
 * Returns it (new reference), or NULL with *reterr set when the read failed (the read's
 * code; a message that says the object exists and why it could not be read). One the
 * Sandbox controls is recorded as created (sb__created_child), so that the passes until
 * the cache shows it use it instead of creating it again: one refused create and one read
 * per record's life, not a create retried with back-off. */
json_t *sb__existing_child(struct sb_pass *p, const struct kube_res *res, const char *name,
                           struct kube_err *reterr);
/** Records an Event about the Sandbox (no-op without a recorder). */
void sb__event(struct sb_pass *p, bool warning, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/** True when the API server refuses creates in the Sandbox's namespace (it is being
 * deleted; kube_client_ns_terminating): the pass then writes nothing more to the Sandbox
 * (status, pod-name annotation), which goes with its namespace, and is retried with
 * back-off (-ESHUTDOWN) so that a namespace that stays is caught up with. */
bool sb__ns_going(struct sb_pass *p);
/** POST of obj (borrowed) with our field manager; *ret_obj gets the created object. */
int sb__create(struct sb_pass *p, const struct kube_res *res, const json_t *obj, json_t **ret_obj,
               struct kube_err *reterr);
/** Merge patch that adds our controller ownerReference to obj (borrowed), guarded by
 * its resourceVersion so that two adopters cannot both win; extra (borrowed, may be
 * NULL) is merged into the patch. *ret_obj gets the patched object. */
int sb__adopt(struct sb_pass *p, const struct kube_res *res, const json_t *obj, json_t *extra,
              json_t **ret_obj, struct kube_err *reterr);
/** "Kind/Name (UID: u)" of obj's controller into out. */
void sb__owner_text(const json_t *obj, char *out, size_t size);

/** The steps. Each records its errors in the pass. */
void sb__reconcile_pvcs(struct sb_pass *p);
void sb__reconcile_pod(struct sb_pass *p);
void sb__reconcile_service(struct sb_pass *p);
