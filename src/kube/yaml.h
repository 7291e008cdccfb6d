/* SPDX-License-Identifier: Apache-2.0 */
/* YAML (the first document) to a jansson value, enough for kubeconfig files. */
#pragma once

#include <jansson.h>
#include <stddef.h>

/** Parses data (borrowed) into *ret (a new reference). Mappings become objects (the first
 * of duplicate keys wins, as kubectl's loader keeps), sequences arrays, plain null/~ and
 * an empty plain scalar null, plain true/false booleans, every other scalar a string.
 * Anchors/aliases, non-scalar keys and nesting deeper than LIMIT_KUBE_YAML_DEPTH are
 * refused. Returns 0, or -EINVAL with a "line L column C: problem" text in err. An empty
 * document gives an empty object. */
int kube_yaml_load(const char *data, size_t len, json_t **ret, char *err, size_t errsize);
/** Same, but plain scalars that are decimal integers or floats (YAML 1.2 core schema)
 * become JSON numbers: for Kubernetes object manifests (kubeconfig values stay strings). */
int kube_yaml_load_typed(const char *data, size_t len, json_t **ret, char *err, size_t errsize);
