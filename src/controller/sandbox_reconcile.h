/* SPDX-License-Identifier: Apache-2.0 */
/* The Sandbox reconciler: one pass brings a Sandbox's PVCs, Pod and headless Service
 * in line with its spec (adopting unowned objects only when they are labelled
 * agents.x-k8s.io/adoptable=true), handles suspend/resume and expiry, and writes the
 * status when it changed (PUT on /status, guarded by resourceVersion; changes of details
 * only are coalesced, see status_window).
 *
 * It reads the Sandbox and its children from informer stores and writes through the
 * API client. Thread-safe: several workers may run it at once on different keys. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/clock.h"
#include "common/yield_gate.h"

struct kube_client;
struct kube_store;
struct events_recorder;
struct idle_ctrl;
struct sb_memo;

/** Name of the index by controller ownerReference UID that the Pod, Service and PVC
 * stores must carry (kube_index_controller_uid). */
#define SB_INDEX_OWNER "controller-uid"

struct sb_reconciler {
    struct kube_client *client;     /* borrowed */
    struct kube_store *sandboxes;   /* borrowed: Sandbox cache */
    struct kube_store *pods;        /* borrowed: Pod cache with SB_INDEX_OWNER */
    struct kube_store *services;    /* borrowed: Service cache */
    struct kube_store *pvcs;        /* borrowed: PVC cache */
    struct events_recorder *events; /* borrowed; NULL: no Events */
    const char *cluster_domain;     /* borrowed; NULL: cluster.local */
    struct idle_ctrl *idle;         /* borrowed; NULL: no idle auto-suspend */
    struct sb_memo *memo;           /* borrowed: read-your-writes memo; NULL: none */
    /* A status change of details only (sb_status_diff) waits up to this long for the next
     * write that matters, normally the Ready transition; 0 writes every change at once. */
    usec_t status_window;
    /* Set the pod-name annotation also when the Pod is named after the Sandbox (upstream
     * does; clients fall back to the Sandbox name when it is absent). */
    bool pod_name_annotation_always;
    /* Leave the managedFields of a Pod whose metadata the reconciler patches (upstream);
     * by default that patch clears them, so later writes to the Pod (the kubelet's status)
     * skip field tracking. */
    bool keep_managed_fields;
    /* While pod_meta_gate says busy (claims are being served), a metadata-only patch of a
     * Pod (the one after a warm adoption: the pool's label and safe-to-evict go) waits, the
     * pass coming back every SB_POD_META_RECHECK, at most max_wait after it was first put
     * off. A patch that sets the Service-selector label is never held. busy NULL or
     * max_wait 0: patched at once. Needs memo. */
    struct yield_gate pod_meta_gate;
    /* True when sb's owner is known deleted, so that sb will be deleted: a Pod metadata
     * patch (a warm adoption's, still held) is then not written, as nothing would use it.
     * NULL: never. */
    bool (*owner_gone)(void *ctx, const json_t *sb);
    void *owner_gone_ctx;
};

/** How often a Sandbox whose Pod metadata patch is held asks the gate again. */
#define SB_POD_META_RECHECK (250 * USEC_PER_MSEC)

struct sb_result {
    usec_t requeue_after; /* > 0: reconcile again after this long */
};

/** Reconciles the Sandbox with store key "namespace/name" (borrowed). Returns 0 (and
 * fills *ret) or a negative errno for a failure worth a rate-limited retry. */
int sb_reconcile(const struct sb_reconciler *r, const char *key, struct sb_result *ret);
