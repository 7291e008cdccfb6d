/* SPDX-License-Identifier: Apache-2.0 */
/* The wire contract of the extensions API (extensions.agents.x-k8s.io: SandboxTemplate,
 * SandboxWarmPool, SandboxClaim): group and version, kinds, labels, annotations and
 * condition reasons. Several keys live under the core group's prefix (SB_KEY_PREFIX),
 * as upstream spells them. */
#pragma once

#include "api/sandbox.h"

#define EXT_VERSION       "v1beta1"
#define EXT_API_VERSION   SB_EXT_GROUP "/" EXT_VERSION
#define EXT_KIND_TEMPLATE "SandboxTemplate"
#define EXT_KIND_POOL     "SandboxWarmPool"
#define EXT_KIND_CLAIM    "SandboxClaim"
/** Prefix of the extensions group's own label and annotation keys. */
#define EXT_KEY_PREFIX SB_EXT_GROUP "/"

/* Labels. */
#define EXT_LABEL_TEMPLATE_HASH     SB_KEY_PREFIX "sandbox-template-hash"
#define EXT_LABEL_POD_TEMPLATE_HASH SB_KEY_PREFIX "sandbox-pod-template-hash"
#define EXT_LABEL_CLAIM_UID         SB_KEY_PREFIX "claim-uid"
/** On a token Secret made for late binding: the claim it is for. */
#define EXT_LABEL_TOKEN_FOR EXT_KEY_PREFIX "config-token-for"

/* Annotations. */
#define EXT_ANN_SANDBOX_NAME   SB_KEY_PREFIX "sandbox-name"
#define EXT_ANN_FIRST_OBSERVED SB_KEY_PREFIX "controller-first-observed-at"
#define EXT_ANN_FIRST_READY    SB_KEY_PREFIX "claim-first-ready-at"
#define EXT_ANN_CLIENT_REQ     SB_KEY_PREFIX "client-first-requested-at"
/** Stamped by the admission webhook; read for the claim startup-latency metric. */
#define EXT_ANN_WEBHOOK_OBSERVED SB_KEY_PREFIX "webhook-first-observed-at"
/* Per-object overrides of controller flags (the v1beta1 schema has no field for them). */
#define EXT_ANN_CLAIM_TIMEOUT EXT_KEY_PREFIX "claim-timeout-seconds"
#define EXT_ANN_REFILL_RATE   EXT_KEY_PREFIX "max-refill-rate"
/** On a claim: the Secret holding the late-binding config token. */
#define EXT_ANN_TOKEN_SECRET EXT_KEY_PREFIX "config-token-secret"

/* Claim Ready reasons (besides those copied from the Sandbox, e.g. SB_R_RECONCILER_ERROR). */
#define EXT_R_TEMPLATE_NOT_FOUND "TemplateNotFound"
#define EXT_R_POOL_NOT_FOUND     "WarmPoolNotFound"
#define EXT_R_CREATE_PENDING     "SandboxCreatePending"
#define EXT_R_INVALID_METADATA   "InvalidMetadata"
#define EXT_R_ENV_REJECTED       "EnvVarsInjectionRejected"
#define EXT_R_VCT_ERROR          "VolumeClaimTemplatesError"
#define EXT_R_CLAIM_EXPIRED      "ClaimExpired"
#define EXT_R_CLAIM_TIMEOUT      "ClaimTimeout"
#define EXT_R_SANDBOX_MISSING    "SandboxMissing"
#define EXT_R_SANDBOX_NOT_READY  "SandboxNotReady"
