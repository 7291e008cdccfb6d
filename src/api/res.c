/* SPDX-License-Identifier: Apache-2.0 */
/* The Sandbox API's resource table. */
#include "api/res.h"

#include "api/extensions.h"
#include "api/sandbox.h"

const struct kube_res API_RES_SANDBOXES = {
    .group = SB_GROUP,
    .version = SB_VERSION,
    .kind = SB_KIND,
    .plural = "sandboxes",
    .namespaced = true,
};
const struct kube_res API_RES_SANDBOXTEMPLATES = {
    .group = SB_EXT_GROUP,
    .version = EXT_VERSION,
    .kind = EXT_KIND_TEMPLATE,
    .plural = "sandboxtemplates",
    .namespaced = true,
};
const struct kube_res API_RES_SANDBOXCLAIMS = {
    .group = SB_EXT_GROUP,
    .version = EXT_VERSION,
    .kind = EXT_KIND_CLAIM,
    .plural = "sandboxclaims",
    .namespaced = true,
};
const struct kube_res API_RES_SANDBOXWARMPOOLS = {
    .group = SB_EXT_GROUP,
    .version = EXT_VERSION,
    .kind = EXT_KIND_POOL,
    .plural = "sandboxwarmpools",
    .namespaced = true,
};
