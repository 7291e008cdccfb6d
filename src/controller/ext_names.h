/* SPDX-License-Identifier: Apache-2.0 */
/* Well-known names of the extensions API (SandboxTemplate, SandboxWarmPool,
 * SandboxClaim): kinds, labels, annotations, condition reasons and defaults. */
#pragma once

#include "controller/sandbox_names.h"

#define EXT_API_VERSION             "extensions.agents.x-k8s.io/v1beta1"
#define EXT_KIND_TEMPLATE           "SandboxTemplate"
#define EXT_KIND_POOL               "SandboxWarmPool"
#define EXT_KIND_CLAIM              "SandboxClaim"

#define EXT_LABEL_TEMPLATE_HASH     "agents.x-k8s.io/sandbox-template-hash"
#define EXT_LABEL_POD_TEMPLATE_HASH "agents.x-k8s.io/sandbox-pod-template-hash"
#define EXT_LABEL_CLAIM_UID         "agents.x-k8s.io/claim-uid"

#define EXT_ANN_SANDBOX_NAME        "agents.x-k8s.io/sandbox-name"
#define EXT_ANN_FIRST_OBSERVED      "agents.x-k8s.io/controller-first-observed-at"
#define EXT_ANN_FIRST_READY         "agents.x-k8s.io/claim-first-ready-at"
#define EXT_ANN_CLIENT_REQ          "agents.x-k8s.io/client-first-requested-at"
#define EXT_ANN_SAFE_TO_EVICT       "cluster-autoscaler.kubernetes.io/safe-to-evict"
/* Per-object overrides of flags (the v1beta1 schema has no field for them). */
#define EXT_ANN_CLAIM_TIMEOUT "extensions.agents.x-k8s.io/claim-timeout-seconds"
#define EXT_ANN_REFILL_RATE   "extensions.agents.x-k8s.io/max-refill-rate"

/* Claim Ready reasons (besides those copied from the Sandbox). */
#define EXT_R_TEMPLATE_NOT_FOUND "TemplateNotFound"
#define EXT_R_POOL_NOT_FOUND     "WarmPoolNotFound"
#define EXT_R_CREATE_PENDING     "SandboxCreatePending"
#define EXT_R_INVALID_METADATA   "InvalidMetadata"
#define EXT_R_ENV_REJECTED       "EnvVarsInjectionRejected"
#define EXT_R_VCT_ERROR          "VolumeClaimTemplatesError"
#define EXT_R_RECONCILER_ERROR   "ReconcilerError"
#define EXT_R_CLAIM_EXPIRED      "ClaimExpired"
#define EXT_R_CLAIM_TIMEOUT      "ClaimTimeout"
#define EXT_R_SANDBOX_MISSING    "SandboxMissing"
#define EXT_R_SANDBOX_NOT_READY  "SandboxNotReady"

#define EXT_NP_SUFFIX            "-network-policy"
#define EXT_ROUTER_NAMESPACE     "agent-sandbox-system"
#define EXT_ROUTER_APP           "sandbox-router"
#define EXT_FIELD_MANAGER        "sandbox-extensions-controller"
