/* SPDX-License-Identifier: Apache-2.0 */
/* Read-your-writes for status writes: remembers, per object UID (Sandboxes,
 * SandboxClaims and the Pods whose metadata the Sandbox reconciler patches share the
 * table; UIDs are unique), the resourceVersion a write was based on, so a reconcile that
 * still sees that version in the cache (the watch has not delivered our own write yet)
 * skips a write that could only fail with 409 Conflict (or, for a Pod's merge patch,
 * repeat itself). Our write's watch event requeues the object.
 *
 * An entry counts for SB_MEMO_TTL only: if that event never comes (a reply or an event
 * lost across an API server restart), the memo stops suppressing the write, and callers
 * that skip a write (or drop a 409) requeue the object after SB_MEMO_TTL as a backstop.
 *
 * A fixed table per instance (LIMIT_SB_MEMO_SLOTS, in buckets of eight by UID hash; a
 * full bucket gives up its oldest entry): memory stays bounded, and a lost entry only
 * costs a conflict. The controller manager owns one
 * and lends it to the Sandbox and claim reconcilers; two managers in one process (tests)
 * never see each other's writes. Thread-safe. A NULL memo remembers nothing: never
 * stale, never a deferred write, never a created child (the end of this file). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/clock.h"
#include "common/yield_gate.h"
#include "kube/res.h"

/** How long a recorded write suppresses writes on the version it replaced; also the
 *  backstop requeue delay after a skipped write or a dropped conflict. */
#define SB_MEMO_TTL (3 * USEC_PER_SEC)

struct sb_memo;

/** Returns a new, empty memo (all three tables); free with sb_memo_free. */
struct sb_memo *sb_memo_new(void);
/** Frees m; NULL is fine. No thread may still use it. */
void sb_memo_free(struct sb_memo *m);

/** True when sb (borrowed; a Sandbox or a claim) is the very version a write of ours
 *  replaced, or an older one (when the resourceVersions are ordered, kube_rv_compare),
 *  less than SB_MEMO_TTL ago. */
bool sb_memo_stale(struct sb_memo *m, const json_t *sb);
/** Records that a write of ours (status, the pod-name annotation, or a Pod's metadata
 *  patch) replaced sb's (borrowed; a Sandbox, a claim or a Pod) resourceVersion. */
void sb_memo_wrote(struct sb_memo *m, const json_t *sb);

/** sb_memo_stale and sb_memo_wrote on an explicit monotonic time (for tests). */
bool sb_memo_stale_at(struct sb_memo *m, const json_t *sb, usec_t now);
void sb_memo_wrote_at(struct sb_memo *m, const json_t *sb, usec_t now);

/* Status write coalescing: a change of details only (sb_status_diff's SB_STATUS_DETAIL)
 * may wait up to a window from when it was first seen, so that the steps of a starting
 * Pod (scheduled, running, an IP) ride along with the next write that matters, normally
 * the Ready transition. A second fixed table keyed by UID, in buckets of eight: when
 * other objects' pending waits hold every slot of the bucket, the write is not delayed
 * at all, so an overflow only costs a write, never a delay beyond the window. */

/** 0 when a detail write of object uid is due now; else how long it may still wait.
 *  The first call for uid starts its window. window 0 = never wait. */
usec_t sb_defer_wait(struct sb_memo *m, const char *uid, usec_t window);
/** Forgets uid's pending wait (after its write, or when nothing is left to write). */
void sb_defer_clear(struct sb_memo *m, const char *uid);
/** sb_defer_wait on an explicit monotonic time (for tests). */
usec_t sb_defer_wait_at(struct sb_memo *m, const char *uid, usec_t window, usec_t now);

/* A Pod's metadata-only patch (the one after a warm adoption) may wait while the work it
 * would slow down runs: gate g says busy (claims are being served), at most g->max_wait
 * after it was first put off. The wait shares the defer table, keyed by the Pod's UID;
 * sb_defer_clear(pod_uid) after the write. */

/** 0 when the patch (borrowed; a merge patch with metadata) of the Pod with pod_uid is to
 *  be written now; else how long it may still wait. A patch that sets the
 *  Service-selector label (SB_LABEL_NAME_HASH) never waits, nor does any without a gate
 *  (g NULL, no busy function, max_wait 0) or while the gate is not busy. */
usec_t sb_pod_meta_wait(struct sb_memo *m, const struct yield_gate *g, const char *pod_uid,
                        const json_t *patch);
/** sb_pod_meta_wait on an explicit monotonic time (for tests). */
usec_t sb_pod_meta_wait_at(struct sb_memo *m, const struct yield_gate *g, const char *pod_uid,
                           const json_t *patch, usec_t now);

/* Children created and not yet in the cache. A Sandbox can be reconciled again before
 * the informer of its child kind shows the Pod (PVC, Service) the last pass created: its
 * status write's event may come first on the Sandbox watch. Without a record that pass
 * would create the child again, only to be refused (409 AlreadyExists) and, for a Pod,
 * read it back; for a PVC or a Service, to show the refusal in the status until the cache
 * catches up. So the reply to our create is kept, keyed by the owner's UID, the kind and
 * the child's name, until a pass sees the child in the cache or its deletion is seen
 * (sb_memo_created_forget), for SB_MEMO_TTL at most. A third fixed, lossy table
 * (LIMIT_SB_CREATED_SLOTS): a lost entry costs what it saved, a create refused. */

/** Keeps a copy of obj (borrowed; the API server's reply to our create of a child of
 *  kind res for the Sandbox with owner_uid), as compact text, for the passes that come
 *  before the cache shows it. Ignored without a name or UID, or with an owner_uid too
 *  long. */
void sb_memo_created(struct sb_memo *m, const struct kube_res *res, const char *owner_uid,
                     const json_t *obj);
/** A new parse of the child of kind res named name that we created for owner_uid less
 *  than SB_MEMO_TTL ago and no pass has seen in the cache since, or NULL. *ret_left
 *  (optional) gets how much of SB_MEMO_TTL is left: the pass that uses the record is to
 *  run again by then, in case the informer never shows the child. */
json_t *sb_memo_created_get(struct sb_memo *m, const struct kube_res *res, const char *owner_uid,
                            const char *name, usec_t *ret_left);
/** Forgets the record of owner_uid's child of kind res named name: the cache has it (or
 *  one of that name). child_uid non-NULL forgets only that very object (its deletion was
 *  seen), not a newer one of the same name. */
void sb_memo_created_forget(struct sb_memo *m, const struct kube_res *res, const char *owner_uid,
                            const char *name, const char *child_uid);
/** The deletion of obj (borrowed; a Pod, Service or PVC) was seen: forgets the record of
 *  that very object if it was a Sandbox's child, under whichever of the three kinds it
 *  is (the caller need not know), so that the next pass of its Sandbox does not take it
 *  for one the cache has yet to show. Anything else is ignored. */
void sb_memo_created_gone(struct sb_memo *m, const json_t *obj);
/** sb_memo_created and sb_memo_created_get on an explicit monotonic time (for tests). */
void sb_memo_created_at(struct sb_memo *m, const struct kube_res *res, const char *owner_uid,
                        const json_t *obj, usec_t now);
json_t *sb_memo_created_get_at(struct sb_memo *m, const struct kube_res *res, const char *owner_uid,
                               const char *name, usec_t *ret_left, usec_t now);
