/* SPDX-License-Identifier: Apache-2.0 */
/* The resource table of the Sandbox API's custom resources, for the generic client
 * (kube/res.h describes the shape and builds paths; this file says which ones are ours). */
#pragma once

#include "kube/res.h"

extern const struct kube_res API_RES_SANDBOXES;
extern const struct kube_res API_RES_SANDBOXTEMPLATES;
extern const struct kube_res API_RES_SANDBOXCLAIMS;
extern const struct kube_res API_RES_SANDBOXWARMPOOLS;
