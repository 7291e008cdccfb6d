/* SPDX-License-Identifier: Apache-2.0 */
/* The controller's own names (field manager, event source) and small pure helpers over
 * the Sandbox API's names (api/sandbox.h): the name hash, reserved-key tests,
 * created-by normalisation and ownership checks. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "api/sandbox.h"

#define SB_FIELD_MANAGER "sandbox-controller"
#define SB_EVENT_SOURCE  "sandbox-controller"

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
