/* SPDX-License-Identifier: Apache-2.0 */
/* Pure construction of the children a Sandbox wants: its Pod, headless Service and
 * PersistentVolumeClaims, the Service ports derived from the pod template, and the
 * metadata patch that brings an existing Pod's labels and annotations in line. Every
 * function borrows its inputs and never touches the API. */
#pragma once

#include <jansson.h>
#include <stddef.h>

/** Returns a new controller ownerReference pointing at sandbox sb. */
json_t *sb_owner_ref(const json_t *sb);

/** Writes the name of the PVC of template vct ("<vct name>-<sandbox name>") into out.
 * Returns 0, -EINVAL when vct has no metadata.name, or -E2BIG. */
int sb_pvc_name(const json_t *sb, const json_t *vct, char *out, size_t size);

/** Returns a new PVC object for template vct of sb, or NULL when vct has no name. */
json_t *sb_desired_pvc(const json_t *sb, const json_t *vct);

/** Returns a new Pod object for sb: named after it, with filtered template labels and
 * annotations, the tracking label, owner-gated extension labels, the normalised
 * created-by label, the template spec with one volume per volumeClaimTemplate, and a
 * controller ownerReference. */
json_t *sb_desired_pod(const json_t *sb);

/** Returns a new array of Service ports derived from the pod template's container
 * ports (containers and native sidecar init containers), deduplicated by
 * (port, protocol), named, and sorted by port then protocol. */
json_t *sb_service_ports(const json_t *sb);

/** Returns a new headless Service object for sb. */
json_t *sb_desired_service(const json_t *sb);

/** Returns a new JSON merge patch ({"metadata":{"labels":...,"annotations":...}}) that
 * makes the labels and annotations of pod (an existing Pod of sb) match what sb wants,
 * or NULL when nothing differs. */
json_t *sb_pod_meta_patch(const json_t *sb, const json_t *pod);
