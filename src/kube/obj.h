/* SPDX-License-Identifier: Apache-2.0 */
/* Thin typed accessors over Kubernetes objects kept as jansson json_t. Every accessor
 * borrows obj and returns borrowed data (valid while obj is alive and unmodified), or
 * NULL / a default when the field is absent or of the wrong type. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"

const char *kube_obj_name(const json_t *obj);
const char *kube_obj_namespace(const json_t *obj);
const char *kube_obj_uid(const json_t *obj);
/** True when o and n (both borrowed) have UIDs and they differ: an object deleted and
 * made again under its name while a watch was down comes back from the re-list as an
 * update (as with client-go), yet it is another object. */
bool kube_obj_uid_changed(const json_t *o, const json_t *n);
const char *kube_obj_resource_version(const json_t *obj);
/** Orders two resourceVersions of objects of the same resource, as Kubernetes defines
 * them comparable (KEP-5504, stable in 1.35): decimal digits without a leading zero, a
 * longer one is newer. Stores -1 (a older), 0 or 1 in *ret and returns 0, or returns
 * -EINVAL when either is NULL or not of that form (a server that does not promise the
 * order), leaving *ret unchanged. */
int kube_rv_compare(const char *a, const char *b, int *ret);
/** True when a and b both carry a non-empty resourceVersion and it is the same: the same version of
 * one object (a write guarded by either's version is guarded by the other's). Needs no
 * order between versions, so it holds for any server. */
bool kube_obj_same_version(const json_t *a, const json_t *b);
const char *kube_obj_kind(const json_t *obj);
int64_t kube_obj_generation(const json_t *obj); /* 0 when absent */
/** True when metadata.deletionTimestamp is set. */
bool kube_obj_deleting(const json_t *obj);
const char *kube_obj_label(const json_t *obj, const char *key);
const char *kube_obj_annotation(const json_t *obj, const char *key);
/** The ownerReference with controller=true, or NULL. */
const json_t *kube_obj_controller_ref(const json_t *obj);
/** UID of the controller ownerReference, or NULL. */
const char *kube_obj_controller_uid(const json_t *obj);
bool kube_obj_has_finalizer(const json_t *obj, const char *finalizer);

/** Follows a dotted path of object keys ("status.podIP"); returns borrowed or NULL. */
const json_t *kube_obj_path(const json_t *obj, const char *dotted);
/** String at a dotted path, or NULL. */
const char *kube_obj_path_str(const json_t *obj, const char *dotted);

/** Appends "namespace/name" (or "name" for cluster-scoped) to out: the store key. */
int kube_obj_key(const json_t *obj, struct buf *out);

/** Returns the condition object of type in status.conditions, or NULL. */
const json_t *kube_obj_condition(const json_t *obj, const char *type);
/** True when condition type has status "True". */
bool kube_obj_condition_true(const json_t *obj, const char *type);

/** Returns a new JSON merge patch (RFC 7386) that turns from into to: members of to that
 * differ (objects compared member by member, anything else replaced whole), and null for
 * members of from that to lacks. Empty ({}) when they are equal. A NULL or non-object
 * from counts as {}; to must be an object. A null member of to cannot be expressed (a
 * merge patch's null deletes): it is sent as a deletion. */
json_t *kube_merge_patch_diff(const json_t *from, const json_t *to);

/** Sets metadata.<key> = value on a mutable object, creating metadata if needed. */
void kube_obj_set_meta_str(json_t *obj, const char *key, const char *value);
/** Makes the merge patch (or update body) patch clear the object's
 * metadata.managedFields: the API server drops them with this write (a list holding one
 * empty entry) and, as none are left, tracks no fields for later Update writes of anyone
 * (Server-Side Apply starts over from the applied fields). Creates metadata if absent. */
void kube_obj_reset_managed_fields(json_t *patch);
