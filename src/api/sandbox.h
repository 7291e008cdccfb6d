/* SPDX-License-Identifier: Apache-2.0 */
/* The wire contract of the Sandbox API (agents.x-k8s.io): group and version, kind,
 * labels, annotations, operating modes, condition types and reasons. Every component
 * (controller, router, CLI) takes these names from here; no other file in src/ spells
 * them. The extensions group is in api/extensions.h, the resource table in api/res.h. */
#pragma once

#define SB_GROUP       "agents.x-k8s.io"
#define SB_VERSION     "v1beta1"
#define SB_API_VERSION SB_GROUP "/" SB_VERSION
#define SB_KIND        "Sandbox"
/** The extensions group (api/extensions.h); its owner references are checked here too. */
#define SB_EXT_GROUP "extensions." SB_GROUP
/** Prefix of every reserved label and annotation key of the group. */
#define SB_KEY_PREFIX SB_GROUP "/"

/* Labels. */
#define SB_LABEL_NAME_HASH    SB_KEY_PREFIX "sandbox-name-hash"
#define SB_LABEL_WARM_POOL    SB_KEY_PREFIX "warm-pool-sandbox"
#define SB_LABEL_TEMPLATE_REF SB_KEY_PREFIX "sandbox-template-ref-hash"
#define SB_LABEL_LAUNCH_TYPE  SB_KEY_PREFIX "launch-type"
#define SB_LABEL_CREATED_BY   SB_KEY_PREFIX "created-by"
#define SB_LABEL_ADOPTABLE    SB_KEY_PREFIX "adoptable"

/* Annotations. */
#define SB_ANN_POD_NAME        SB_KEY_PREFIX "pod-name"
#define SB_ANN_TEMPLATE_REF    SB_KEY_PREFIX "sandbox-template-ref"
#define SB_ANN_PROP_LABELS     SB_KEY_PREFIX "propagated-labels"
#define SB_ANN_PROP_ANNOTATION SB_KEY_PREFIX "propagated-annotations"
/* Set by warm adoption: the pod template keeps the pool's safe-to-evict "true" (so adoption
 * changes no spec), and the Pod does not get it. */
#define SB_ANN_POD_OMIT_EVICT SB_KEY_PREFIX "pod-omits-safe-to-evict"
/** Last activity seen by the router (RFC 3339), written at most once per interval. */
#define SB_ANN_LAST_ACTIVITY SB_KEY_PREFIX "last-activity"
/** Set with the idle suspend patch: the generation that patch produces. The Suspended
 * condition says IdleTimeout only while metadata.generation still equals it. */
#define SB_ANN_IDLE_SUSPENDED_GEN SB_KEY_PREFIX "idle-suspended-generation"
/* Annotations of other owners that the API reads or writes. */
#define SB_ANN_TRACE_CONTEXT "opentelemetry.io/trace-context"
#define SB_ANN_SAFE_TO_EVICT "cluster-autoscaler.kubernetes.io/safe-to-evict"

/* spec.operatingMode values (absent means Running). */
#define SB_MODE_RUNNING   "Running"
#define SB_MODE_SUSPENDED "Suspended"

/* Condition types (PodScheduled and Ready are also the Pod's). */
#define SB_COND_READY         "Ready"
#define SB_COND_SUSPENDED     "Suspended"
#define SB_COND_FINISHED      "Finished"
#define SB_COND_POD_SCHEDULED "PodScheduled"

/* Condition reasons. */
#define SB_R_NOT_SUSPENDED     "NotSuspended"
#define SB_R_POD_STATE_UNKNOWN "PodStateUnknown"
#define SB_R_POD_TERMINATED    "PodTerminated"
#define SB_R_POD_NOT_OWNED     "PodNotOwned"
#define SB_R_POD_TERMINATING   "PodTerminating"
#define SB_R_POD_DELETE_FAILED "PodDeleteFailed" /* ours: a suspend's Pod DELETE refused */
#define SB_R_POD_SUCCEEDED     "PodSucceeded"
#define SB_R_POD_FAILED        "PodFailed"
#define SB_R_SCHED_UNKNOWN     "PodSchedulingUnknown"
#define SB_R_POD_SCHEDULED     "PodScheduled"
#define SB_R_MULTIPLE_PODS     "MultiplePods"
#define SB_R_RECONCILER_ERROR  "ReconcilerError"
#define SB_R_SUSPENDED         "SandboxSuspended"
#define SB_R_DEPS_READY        "DependenciesReady"
#define SB_R_DEPS_NOT_READY    "DependenciesNotReady"
#define SB_R_EXPIRED           "SandboxExpired"
/** Ready=False of a Sandbox being deleted that is still there (finalizers). */
#define SB_R_DELETING "SandboxDeleting"
/** Reason of Suspended=True after an idle suspension, and of its Event. */
#define SB_R_IDLE_TIMEOUT "IdleTimeout"
