/* SPDX-License-Identifier: Apache-2.0 */
/* Pure claim customisation: validation of additionalPodMetadata (allowed label
 * domains, reserved annotation domains), its merge into a pod template without
 * overriding template keys, env injection and volumeClaimTemplates merging under the
 * template's policies, and the cold Sandbox built for a claim. Every function borrows
 * its inputs; failures fill a struct claim_err with the claim's Ready reason. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/** Why a claim cannot be served: a Ready reason (static string) and a message. */
struct claim_err {
    const char *reason;
    char message[512];
};

/** Allowed label domains (lowercase), e.g. {"sandbox.users.io"}. */
struct claim_domains {
    const char *const *v; /* borrowed */
    size_t n;
};

/** True for a Kubernetes qualified name ([prefix/]name). */
bool claim_qualified_name(const char *key);
/** True for a valid label value. */
bool claim_label_value(const char *v);
/** Validates spec.additionalPodMetadata of claim. Returns 0 or -EINVAL (reterr: reason
 * InvalidMetadata). */
int claim_meta_validate(const json_t *claim, const struct claim_domains *d,
                        struct claim_err *reterr);
/** Merges add's labels and annotations ({labels, annotations}, may be NULL) into meta
 * (mutable pod template metadata): new keys are added, equal ones kept, a different
 * value is an override and fails with -EEXIST (reason ReconcilerError). */
int claim_meta_merge(json_t *meta, const json_t *add, struct claim_err *reterr);
/** Injects claim env entries into pod_spec (mutable) under policy (Allowed, Overrides,
 * else disallowed). Returns 0, -EPERM (reason EnvVarsInjectionRejected) or -EINVAL
 * (unknown container; ReconcilerError). */
int claim_env_inject(json_t *pod_spec, const json_t *env, const char *policy,
                     struct claim_err *reterr);
/** Merges template and claim volumeClaimTemplates under policy into *ret (new).
 * Returns 0 or -EINVAL (reason VolumeClaimTemplatesError). */
int claim_vct_merge(const json_t *tvcts, const json_t *cvcts, const char *policy, json_t **ret,
                    struct claim_err *reterr);
/** True when the claim must cold-start (it customises env or volumes). */
bool claim_needs_cold(const json_t *claim);
/** Builds the cold Sandbox of claim from template tpl into *ret (new): named after the
 * claim, owned by it, labels claim-uid/created-by/launch-type=cold/template-ref-hash,
 * pod template metadata merged with additionalPodMetadata, env and volumes by policy,
 * secure defaults. Returns 0 or a negative errno with reterr filled. */
int claim_cold_sandbox(const json_t *claim, const json_t *tpl, json_t **ret,
                       struct claim_err *reterr);
/** Returns the desired pod template metadata of a Sandbox bound to claim: the
 * template's (tpl may be NULL: base instead, borrowed) merged with
 * additionalPodMetadata, without the pool's safe-to-evict "true". NULL with reterr
 * filled on an override conflict. */
json_t *claim_pod_meta(const json_t *claim, const json_t *tpl, const json_t *base,
                       struct claim_err *reterr);
/** Returns the pod template metadata of a Sandbox of claim built from template tpl (both
 * borrowed), as a cold Sandbox gets it and an adoption or a later sync sets it: the
 * template's, with identity the claim's identity labels (claim-uid,
 * sandbox-template-ref-hash of tpl, created-by as the claim has it or none), and
 * additionalPodMetadata. NULL with reterr filled on an override conflict. */
json_t *claim_sandbox_pod_meta(const json_t *claim, const json_t *tpl, bool identity,
                               struct claim_err *reterr);
