/* SPDX-License-Identifier: Apache-2.0 */
/* Pure construction from a SandboxTemplate: the blueprint (pod template, volume claim
 * templates, service) with secure pod defaults, its fingerprint, the semantic
 * "is this Sandbox still built from this template" test, the managed NetworkPolicy
 * and the Sandbox a warm pool creates. Every function borrows its inputs and never
 * touches the API. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "controller/sandbox_names.h"

/** Returns a new controller ownerReference to obj (kind in the extensions group). */
json_t *ext_owner_ref(const json_t *obj, const char *kind);
/** Returns obj's sub-object key (borrowed), creating an empty one when absent. */
json_t *ext_obj_ensure(json_t *obj, const char *key);

/** True when the template's NetworkPolicy is Managed (or unset). */
bool tpl_np_managed(const json_t *tpl);
/** Sets automountServiceAccountToken=false on pod_spec (mutable) when unset. */
void tpl_secure_pod_spec(json_t *pod_spec);
/** The env variable that turns page merging on in sandboxd (see src/sandboxd/memmerge.h). */
#define TPL_PAGE_MERGE_ENV "SANDBOXD_MEMORY_MERGE"
/** The TPL_PAGE_MERGE_ENV value tpl's spec.pageMerging (an extension) asks for: "1" for
 * Enabled, "fixed-layout" for Maximal, NULL for Disabled or absent (static strings). */
const char *tpl_page_merging(const json_t *tpl);
/** Sets TPL_PAGE_MERGE_ENV=mode on every container of pod_spec (both borrowed; pod_spec
 * modified). */
void tpl_enable_page_merging(json_t *pod_spec, const char *mode);
/** Returns a new blueprint {podTemplate, volumeClaimTemplates?, service?} copied from
 * the template spec, with secure pod defaults applied. */
json_t *tpl_blueprint(const json_t *tpl);
/** Fingerprint of the template's blueprint (FNV-1a of its canonical JSON) into out; a
 * LateBound spec.claimConfigDelivery.mode is part of it (its members mount a token). */
void tpl_blueprint_hash(const json_t *tpl, char out[SB_HASH_LEN + 1]);
/** Same for spec.podTemplate only (the deprecated pod-template-hash label). */
void tpl_pod_template_hash(const json_t *tpl, char out[SB_HASH_LEN + 1]);
/** True when Sandbox sb's spec matches the template's blueprint semantically: pod spec
 * (after secure defaults), volume claim templates (name and spec, in order) and
 * service. Pod template metadata is not compared. A LateBound template's blueprint is
 * compared with the config token injected as sb names it (lb_pod_spec_inject); sb has a
 * token (EXT_ANN_TOKEN_SECRET) exactly when the template is LateBound, else no match. */
bool tpl_blueprint_matches(const json_t *tpl, const json_t *sb);
/** True when pool member sb is stale against template tpl: built from another template
 * (its template-ref label is not th, the hash of tpl's name), or its fingerprint label is
 * not bh (tpl_blueprint_hash of tpl) and its spec does not match tpl's blueprint either
 * (tpl_blueprint_matches). th and bh are passed in so a caller computes them once. */
bool tpl_member_stale(const json_t *tpl, const char *th, const char *bh, const json_t *sb);
/** Returns a new NetworkPolicy object "<template>-network-policy" owned by the
 * template: the secure default (ingress only from the router; egress to DNS and to
 * public addresses, never to private, link-local or metadata ranges) or the template's
 * custom rules. */
json_t *tpl_network_policy(const json_t *tpl);
/** True when have (a NetworkPolicy spec as the API server returned it) says what want
 * (tpl_network_policy's) does, once both are as the server keeps them: empty lists
 * dropped, ports TCP unless said otherwise. json_equal alone rewrote a custom policy
 * with an empty list or a port without protocol at every template reconcile. */
bool tpl_np_spec_same(const json_t *have, const json_t *want);

/** Options of pool-built Sandboxes. */
struct tpl_pool_opts {
    bool eviction; /* add safe-to-evict "true" unless the template sets it */
};

/** Returns a new Sandbox for warm pool pool built from template tpl: generateName
 * "<pool>-", the pool labels and fingerprints, owner = the pool, secure defaults. */
json_t *tpl_pool_sandbox(const json_t *pool, const json_t *tpl, const struct tpl_pool_opts *o);
