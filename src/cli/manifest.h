/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes manifests for kubectl-sandbox: multi-document YAML/JSON into objects, and
 * the resource of an object's apiVersion/kind. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "kube/res.h"

/** Parses text (borrowed) holding one or more YAML documents separated by "---" lines (or
 * JSON) into a new array of objects. Empty documents are skipped; a "kind: List" is
 * expanded into its items. Returns 0 and *ret (new reference), or -EINVAL with a
 * "document N: line L column C: problem" text in err. */
int cli_manifest_parse(const char *text, size_t len, json_t **ret, char *err, size_t errsize);
/** Reads a file ("-" = stdin) bounded by LIMIT_CLI_MANIFEST and parses it as above. */
int cli_manifest_load(const char *path, json_t **ret, char *err, size_t errsize);
/** The resource for obj's apiVersion and kind, or NULL when kubectl-sandbox does not
 * know it (the Agent Sandbox kinds and what install applies). Static storage. */
const struct kube_res *cli_manifest_res(const json_t *obj);

/** Kinds used by install that the kube module has no constant for. */
extern const struct kube_res CLI_RES_CLUSTERROLES;
extern const struct kube_res CLI_RES_CLUSTERROLEBINDINGS;
extern const struct kube_res CLI_RES_ROLES;
extern const struct kube_res CLI_RES_ROLEBINDINGS;
extern const struct kube_res CLI_RES_PDBS;
extern const struct kube_res CLI_RES_VAPS;
extern const struct kube_res CLI_RES_VAPBINDINGS;
