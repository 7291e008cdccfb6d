/* SPDX-License-Identifier: Apache-2.0 */
/* Well-known names of the Sandbox API (labels, annotations, condition types and
 * reasons) and small pure helpers over them: the name hash, reserved-key tests,
 * created-by normalisation and ownership checks. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#define SB_GROUP               "agents.x-k8s.io"
#define SB_API_VERSION         "agents.x-k8s.io/v1beta1"
#define SB_KIND                "Sandbox"
#define SB_EXT_GROUP           "extensions.agents.x-k8s.io"

#define SB_LABEL_NAME_HASH     "agents.x-k8s.io/sandbox-name-hash"
#define SB_LABEL_WARM_POOL     "agents.x-k8s.io/warm-pool-sandbox"
#define SB_LABEL_TEMPLATE_REF  "agents.x-k8s.io/sandbox-template-ref-hash"
#define SB_LABEL_LAUNCH_TYPE   "agents.x-k8s.io/launch-type"
#define SB_LABEL_CREATED_BY    "agents.x-k8s.io/created-by"
#define SB_LABEL_ADOPTABLE     "agents.x-k8s.io/adoptable"

#define SB_ANN_POD_NAME        "agents.x-k8s.io/pod-name"
#define SB_ANN_TEMPLATE_REF    "agents.x-k8s.io/sandbox-template-ref"
#define SB_ANN_PROP_LABELS     "agents.x-k8s.io/propagated-labels"
#define SB_ANN_PROP_ANNOTATION "agents.x-k8s.io/propagated-annotations"
#define SB_ANN_TRACE_CONTEXT   "opentelemetry.io/trace-context"
#define SB_ANN_SAFE_TO_EVICT   "cluster-autoscaler.kubernetes.io/safe-to-evict"
/* Set by warm adoption: the pod template keeps the pool's safe-to-evict "true" (so adoption
 * changes no spec), and the Pod does not get it. */
#define SB_ANN_POD_OMIT_EVICT "agents.x-k8s.io/pod-omits-safe-to-evict"

#define SB_FIELD_MANAGER      "sandbox-controller"
#define SB_EVENT_SOURCE       "sandbox-controller"

/* Condition types. */
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

/** Length of a name hash string, without the NUL. */
#define SB_HASH_LEN 8

/** 32-bit FNV-1a of the bytes of s (borrowed; NULL hashes like "") as 8 lowercase hex
 * digits, NUL-terminated, into out. */
void sb_name_hash(const char *s, char out[SB_HASH_LEN + 1]);

/** True for keys with a reserved prefix (agents.x-k8s.io/, extensions.agents.x-k8s.io/). */
bool sb_key_reserved(const char *key);
/** True for annotation keys the controller never copies to a Pod: reserved prefixes and
 * the trace-context annotation. */
bool sb_annotation_system(const char *key);
/** Maps a created-by label value to itself for go-client, python-client and controller,
 * to "unknown" for anything else, and NULL to NULL. Returns static storage. */
const char *sb_created_by_normalize(const char *v);

/** True when obj (borrowed) has a controller ownerReference with uid. */
bool sb_controlled_by(const json_t *obj, const char *uid);
/** True when obj has no controller ownerReference at all. */
bool sb_uncontrolled(const json_t *obj);
/** True when obj is labelled agents.x-k8s.io/adoptable=true. */
bool sb_adoptable_label(const json_t *obj);
/** True when the controller ownerReference of obj is kind (any version) in group. */
bool sb_controller_is(const json_t *obj, const char *group, const char *kind);
