/* SPDX-License-Identifier: Apache-2.0 */
/* Cache transforms that keep the informer stores lean: the Pod transform keeps only
 * what the Sandbox reconciler reads (metadata without managedFields and finalizers,
 * spec.nodeName, status.phase/conditions/podIP/podIPs). */
#pragma once

#include <jansson.h>

/** kube_store_transform_fn for Pods: rewrites obj in place (ctx unused). */
void ctrl_pod_transform(void *ctx, json_t *obj);
